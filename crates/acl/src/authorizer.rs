//! The decision for one action, as Kafka's `StandardAuthorizerData.authorize` makes it.
//!
//! A principal in `super.users` may do anything. Otherwise the ACLs that apply to the
//! resource are those of its type whose pattern is the literal name, the literal wildcard
//! `*`, or a prefix of the name (PREFIXED). Among those whose principal (or `User:*`), host
//! (or `*`) and operation match, one DENY denies; else one ALLOW allows; else the action is
//! denied, unless no ACL applies to the resource at all (whoever it names), when
//! `allow.everyone.if.no.acl.found` decides. An ALLOW of READ, WRITE, DELETE or ALTER also
//! allows DESCRIBE, and one of ALTER_CONFIGS allows DESCRIBE_CONFIGS; a DENY denies only what
//! it names (or everything, for ALL).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::{
    AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType, WILDCARD,
    WILDCARD_PRINCIPAL,
};

/// What is asked: an operation on a resource (always a literal name).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Action<'a> {
    pub operation: Operation,
    pub resource_type: ResourceType,
    pub resource_name: &'a str,
}

/// Why an action was allowed or denied, as Kafka's authorizer log names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    SuperUser,
    /// The ACL that decided.
    Acl(AclBinding),
    /// No ACL applies to the resource and `allow.everyone.if.no.acl.found` is true.
    DefaultAllow,
    /// No ACL allowed it (none applies, or none matched the principal, host and operation).
    DefaultDeny,
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rule::SuperUser => f.write_str("SuperUser"),
            Rule::Acl(acl) => write!(f, "MatchingAcl(acl={acl})"),
            Rule::DefaultAllow => f.write_str("DefaultAllow"),
            Rule::DefaultDeny => f.write_str("DefaultDeny"),
        }
    }
}

/// The answer for one action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    pub rule: Rule,
}

/// The ACLs of one resource type, indexed for lookups by name.
#[derive(Debug, Default)]
struct Section {
    /// LITERAL bindings by name (the wildcard `*` among them).
    literal: HashMap<String, Vec<AclBinding>>,
    /// PREFIXED bindings by prefix.
    prefixed: BTreeMap<String, Vec<AclBinding>>,
}

/// Every ACL, the super users and the default, ready to decide. Immutable: a change of the
/// ACLs builds a new one.
#[derive(Debug, Default)]
pub struct Authorizer {
    super_users: HashSet<String>,
    allow_if_no_acl: bool,
    bindings: BTreeSet<AclBinding>,
    sections: HashMap<ResourceType, Section>,
}

impl Authorizer {
    /// An authorizer over `bindings`. `super_users` are principals (`User:admin`).
    pub fn new(
        super_users: impl IntoIterator<Item = String>,
        allow_if_no_acl: bool,
        bindings: BTreeSet<AclBinding>,
    ) -> Authorizer {
        let mut sections: HashMap<ResourceType, Section> = HashMap::new();
        for b in &bindings {
            let section = sections.entry(b.resource_type).or_default();
            let slot = match b.pattern_type {
                PatternType::Prefixed => section.prefixed.entry(b.resource_name.clone()),
                PatternType::Literal => {
                    section
                        .literal
                        .entry(b.resource_name.clone())
                        .or_default()
                        .push(b.clone());
                    continue;
                }
                // Stored bindings were checked when created; anything else applies to nothing.
                _ => continue,
            };
            slot.or_default().push(b.clone());
        }
        Authorizer {
            super_users: super_users.into_iter().collect(),
            allow_if_no_acl,
            bindings,
            sections,
        }
    }

    /// Every ACL.
    pub fn bindings(&self) -> &BTreeSet<AclBinding> {
        &self.bindings
    }

    /// The ACLs `filter` matches.
    pub fn matching<'a>(&'a self, filter: &'a AclFilter) -> impl Iterator<Item = &'a AclBinding> {
        self.bindings.iter().filter(move |b| filter.matches(b))
    }

    pub fn is_super_user(&self, principal: &str) -> bool {
        self.super_users.contains(principal)
    }

    /// May `principal`, connecting from `host` (an IP address as Java prints it), do `action`?
    pub fn authorize(&self, principal: &str, host: &str, action: Action<'_>) -> Decision {
        if self.is_super_user(principal) {
            return Decision {
                allowed: true,
                rule: Rule::SuperUser,
            };
        }
        let mut applies = false;
        let mut allow: Option<&AclBinding> = None;
        for acl in self.applicable(action.resource_type, action.resource_name) {
            applies = true;
            match entry_result(acl, principal, host, action.operation) {
                Some(Permission::Deny) => {
                    return Decision {
                        allowed: false,
                        rule: Rule::Acl(acl.clone()),
                    }
                }
                Some(_) => allow = Some(acl),
                None => {}
            }
        }
        match allow {
            Some(acl) => Decision {
                allowed: true,
                rule: Rule::Acl(acl.clone()),
            },
            None if !applies && self.allow_if_no_acl => Decision {
                allowed: true,
                rule: Rule::DefaultAllow,
            },
            None => Decision {
                allowed: false,
                rule: Rule::DefaultDeny,
            },
        }
    }

    /// The ACLs that apply to the resource `(resource_type, name)`: its literal name, the
    /// wildcard, and every prefix of the name.
    fn applicable<'a>(
        &'a self,
        resource_type: ResourceType,
        name: &'a str,
    ) -> impl Iterator<Item = &'a AclBinding> + 'a {
        let section = self.sections.get(&resource_type);
        let literal = section
            .and_then(|s| s.literal.get(name))
            .into_iter()
            .flatten();
        let wildcard = section
            .filter(|_| name != WILDCARD)
            .and_then(|s| s.literal.get(WILDCARD))
            .into_iter()
            .flatten();
        let prefixed = section.into_iter().flat_map(move |s| {
            name.char_indices()
                .map(|(i, c)| &name[..i + c.len_utf8()])
                .filter_map(move |prefix| s.prefixed.get(prefix))
                .flatten()
        });
        literal.chain(prefixed).chain(wildcard)
    }

    /// The operations `principal` may do on the resource, as the bit field of Kafka's
    /// authorized-operations fields (over the operations the resource type supports).
    pub fn authorized_operations(
        &self,
        principal: &str,
        host: &str,
        resource_type: ResourceType,
        name: &str,
    ) -> i32 {
        let allowed = resource_type
            .supported_operations()
            .iter()
            .copied()
            .filter(|&operation| {
                self.authorize(
                    principal,
                    host,
                    Action {
                        operation,
                        resource_type,
                        resource_name: name,
                    },
                )
                .allowed
            });
        crate::operations_bits(allowed)
    }

    /// Kafka's `Authorizer.authorizeByResourceType`: may `principal` do `operation` on at least
    /// one resource of the type? True for a super user, or when a name the ACLs do not mention
    /// is allowed (`allow.everyone.if.no.acl.found`), or when some ALLOW of the principal
    /// (or `User:*`) and host is not overridden by a DENY: a literal DENY of the same name or
    /// a prefixed DENY of a prefix of its name; a wildcard DENY denies everything.
    pub fn authorize_by_resource_type(
        &self,
        principal: &str,
        host: &str,
        operation: Operation,
        resource_type: ResourceType,
    ) -> bool {
        let probe = Action {
            operation,
            resource_type,
            resource_name: "hardcode",
        };
        if self.authorize(principal, host, probe).allowed {
            return true;
        }
        let mut deny_literal: HashSet<&str> = HashSet::new();
        let mut deny_prefixed: HashSet<&str> = HashSet::new();
        let mut allows: Vec<&AclBinding> = Vec::new();
        let mut wildcard_allow = false;
        for b in self
            .bindings
            .iter()
            .filter(|b| b.resource_type == resource_type)
        {
            let principal_matches = b.principal == principal || b.principal == WILDCARD_PRINCIPAL;
            let host_matches = b.host == host || b.host == WILDCARD;
            let op_matches = b.operation == operation || b.operation == Operation::All;
            if !(principal_matches && host_matches && op_matches) {
                continue;
            }
            match (b.permission, b.pattern_type) {
                (Permission::Deny, PatternType::Literal) if b.resource_name == WILDCARD => {
                    return false
                }
                (Permission::Deny, PatternType::Literal) => {
                    deny_literal.insert(&b.resource_name);
                }
                (Permission::Deny, PatternType::Prefixed) => {
                    deny_prefixed.insert(&b.resource_name);
                }
                (Permission::Allow, PatternType::Literal) if b.resource_name == WILDCARD => {
                    wildcard_allow = true;
                }
                (Permission::Allow, _) => allows.push(b),
                _ => {}
            }
        }
        // A wildcard DENY returned above, whichever came first.
        wildcard_allow
            || allows.iter().any(|b| {
                let denied_literally = b.pattern_type == PatternType::Literal
                    && deny_literal.contains(b.resource_name.as_str());
                let name = b.resource_name.as_str();
                let denied_by_prefix = name
                    .char_indices()
                    .any(|(i, c)| deny_prefixed.contains(&name[..i + c.len_utf8()]));
                !denied_literally && !denied_by_prefix
            })
    }
}

/// Kafka's `findResult`: the permission of `acl` for this principal, host and operation, or
/// None if it does not match them (its resource is assumed to apply).
fn entry_result(
    acl: &AclBinding,
    principal: &str,
    host: &str,
    operation: Operation,
) -> Option<Permission> {
    if acl.principal != principal && acl.principal != WILDCARD_PRINCIPAL {
        return None;
    }
    if acl.host != WILDCARD && acl.host != host {
        return None;
    }
    if acl.operation != Operation::All && acl.operation != operation {
        let implied = acl.permission == Permission::Allow
            && match operation {
                Operation::Describe => matches!(
                    acl.operation,
                    Operation::Read | Operation::Write | Operation::Delete | Operation::Alter
                ),
                Operation::DescribeConfigs => acl.operation == Operation::AlterConfigs,
                _ => false,
            };
        if !implied {
            return None;
        }
    }
    Some(acl.permission)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CLUSTER_NAME;
    use proptest::prelude::*;

    fn acl(
        rt: ResourceType,
        name: &str,
        pt: PatternType,
        principal: &str,
        op: Operation,
        perm: Permission,
    ) -> AclBinding {
        AclBinding {
            resource_type: rt,
            resource_name: name.into(),
            pattern_type: pt,
            principal: principal.into(),
            host: "*".into(),
            operation: op,
            permission: perm,
        }
    }

    fn topic(name: &str) -> Action<'_> {
        Action {
            operation: Operation::Read,
            resource_type: ResourceType::Topic,
            resource_name: name,
        }
    }

    fn with(op: Operation, a: Action<'_>) -> Action<'_> {
        Action { operation: op, ..a }
    }

    fn authz(acls: Vec<AclBinding>) -> Authorizer {
        Authorizer::new(
            ["User:admin".to_string()],
            false,
            acls.into_iter().collect(),
        )
    }

    use Operation::*;
    use PatternType::{Literal, Prefixed};
    use Permission::{Allow, Deny};
    use ResourceType::{Cluster, Group, Topic};

    #[test]
    fn nothing_is_allowed_without_acls_unless_configured() {
        let a = authz(vec![]);
        let d = a.authorize("User:alice", "127.0.0.1", topic("t"));
        assert!(!d.allowed);
        assert_eq!(d.rule, Rule::DefaultDeny);
        assert!(a.authorize("User:admin", "127.0.0.1", topic("t")).allowed);
        let open = Authorizer::new([], true, BTreeSet::new());
        let d = open.authorize("User:alice", "127.0.0.1", topic("t"));
        assert_eq!((d.allowed, d.rule), (true, Rule::DefaultAllow));
    }

    #[test]
    fn allow_everyone_applies_only_where_no_acl_names_the_resource() {
        let acls = [acl(Topic, "t", Literal, "User:bob", Read, Allow)];
        let a = Authorizer::new([], true, acls.into_iter().collect());
        assert!(!a.authorize("User:alice", "h", topic("t")).allowed);
        assert!(a.authorize("User:bob", "h", topic("t")).allowed);
        assert!(a.authorize("User:alice", "h", topic("u")).allowed);
    }

    #[test]
    fn deny_beats_allow_and_super_users_beat_deny() {
        let a = authz(vec![
            acl(Topic, "*", Literal, "User:*", All, Allow),
            acl(Topic, "secret", Literal, "User:alice", Read, Deny),
            acl(Topic, "secret", Literal, "User:admin", All, Deny),
        ]);
        assert!(a.authorize("User:alice", "h", topic("public")).allowed);
        let d = a.authorize("User:alice", "h", topic("secret"));
        assert!(!d.allowed);
        assert!(matches!(d.rule, Rule::Acl(ref b) if b.permission == Deny));
        // A DENY of READ does not deny DESCRIBE (implication is for ALLOW only).
        assert!(
            a.authorize("User:alice", "h", with(Describe, topic("secret")))
                .allowed
        );
        assert!(a.authorize("User:admin", "h", topic("secret")).allowed);
    }

    #[test]
    fn prefixed_patterns_and_hosts() {
        let mut host_bound = acl(Topic, "orders-", Prefixed, "User:alice", Write, Allow);
        host_bound.host = "10.0.0.1".into();
        let a = authz(vec![host_bound]);
        let w = |name| with(Write, topic(name));
        assert!(
            a.authorize("User:alice", "10.0.0.1", w("orders-eu"))
                .allowed
        );
        assert!(a.authorize("User:alice", "10.0.0.1", w("orders-")).allowed);
        assert!(
            !a.authorize("User:alice", "10.0.0.2", w("orders-eu"))
                .allowed
        );
        assert!(!a.authorize("User:alice", "10.0.0.1", w("orders")).allowed);
        assert!(!a.authorize("User:bob", "10.0.0.1", w("orders-eu")).allowed);
    }

    #[test]
    fn implied_operations() {
        let a = authz(vec![
            acl(Topic, "t", Literal, "User:alice", Write, Allow),
            acl(Group, "g", Literal, "User:alice", Read, Allow),
            acl(
                Cluster,
                CLUSTER_NAME,
                Literal,
                "User:alice",
                AlterConfigs,
                Allow,
            ),
        ]);
        assert!(
            a.authorize("User:alice", "h", with(Describe, topic("t")))
                .allowed
        );
        assert!(
            !a.authorize("User:alice", "h", with(Read, topic("t")))
                .allowed
        );
        assert!(
            !a.authorize("User:alice", "h", with(DescribeConfigs, topic("t")))
                .allowed
        );
        let cluster = Action {
            operation: DescribeConfigs,
            resource_type: Cluster,
            resource_name: CLUSTER_NAME,
        };
        assert!(a.authorize("User:alice", "h", cluster).allowed);
        assert!(
            !a.authorize("User:alice", "h", with(Describe, cluster))
                .allowed
        );
        // Topic: WRITE, and DESCRIBE by implication.
        assert_eq!(
            a.authorized_operations("User:alice", "h", Topic, "t"),
            crate::operations_bits([Write, Describe])
        );
    }

    #[test]
    fn by_resource_type_follows_kafkas_rules() {
        let a = authz(vec![
            acl(Topic, "a", Literal, "User:alice", Write, Allow),
            acl(Topic, "a", Literal, "User:alice", Write, Deny),
        ]);
        assert!(!a.authorize_by_resource_type("User:alice", "h", Write, Topic));
        let a = authz(vec![
            acl(Topic, "ab", Literal, "User:alice", Write, Allow),
            acl(Topic, "a", Prefixed, "User:alice", Write, Deny),
        ]);
        assert!(!a.authorize_by_resource_type("User:alice", "h", Write, Topic));
        let a = authz(vec![
            acl(Topic, "ab", Literal, "User:alice", Write, Allow),
            acl(Topic, "abc", Prefixed, "User:alice", Write, Deny),
        ]);
        assert!(a.authorize_by_resource_type("User:alice", "h", Write, Topic));
        assert!(!a.authorize_by_resource_type("User:bob", "h", Write, Topic));
        assert!(a.authorize_by_resource_type("User:admin", "h", Write, Topic));
        let a = authz(vec![
            acl(Topic, "*", Literal, "User:*", All, Allow),
            acl(Topic, "*", Literal, "User:alice", Write, Deny),
        ]);
        assert!(!a.authorize_by_resource_type("User:alice", "h", Write, Topic));
    }

    /// The decision, the slow way: every stored ACL looked at.
    fn model(a: &Authorizer, principal: &str, host: &str, action: Action<'_>) -> bool {
        if a.is_super_user(principal) {
            return true;
        }
        let applies = |b: &&AclBinding| {
            b.resource_type == action.resource_type
                && match b.pattern_type {
                    Literal => b.resource_name == action.resource_name || b.resource_name == "*",
                    Prefixed => action.resource_name.starts_with(&b.resource_name),
                    _ => false,
                }
        };
        let relevant: Vec<&AclBinding> = a.bindings().iter().filter(applies).collect();
        let results: Vec<Permission> = relevant
            .iter()
            .filter_map(|b| entry_result(b, principal, host, action.operation))
            .collect();
        if results.contains(&Deny) {
            return false;
        }
        if results.contains(&Allow) {
            return true;
        }
        relevant.is_empty() && a.allow_if_no_acl
    }

    fn arb_acl() -> impl Strategy<Value = AclBinding> {
        (
            prop::sample::select(vec!["a", "ab", "abc", "b", "*"]),
            prop::bool::ANY,
            prop::sample::select(vec!["User:x", "User:y", "User:*"]),
            prop::sample::select(vec!["*", "h1", "h2"]),
            prop::sample::select(vec![All, Read, Write, Describe, Alter]),
            prop::bool::ANY,
        )
            .prop_map(|(name, prefixed, principal, host, op, allow)| AclBinding {
                resource_type: Topic,
                resource_name: name.into(),
                pattern_type: if prefixed && name != "*" {
                    Prefixed
                } else {
                    Literal
                },
                principal: principal.into(),
                host: host.into(),
                operation: op,
                permission: if allow { Allow } else { Deny },
            })
    }

    proptest! {
        #[test]
        fn the_index_decides_as_a_scan_of_every_acl(
            acls in prop::collection::vec(arb_acl(), 0..12),
            allow_if_no_acl in prop::bool::ANY,
            name in prop::sample::select(vec!["a", "ab", "abc", "abd", "b", "c", "*"]),
            principal in prop::sample::select(vec!["User:x", "User:y"]),
            host in prop::sample::select(vec!["h1", "h2"]),
            op in prop::sample::select(vec![Read, Write, Describe, Alter, Delete]),
        ) {
            let a = Authorizer::new([], allow_if_no_acl, acls.into_iter().collect());
            let action = Action { operation: op, resource_type: Topic, resource_name: name };
            prop_assert_eq!(a.authorize(principal, host, action).allowed, model(&a, principal, host, action));
        }
    }
}

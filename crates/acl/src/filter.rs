//! Binding filters (Kafka's `AclBindingFilter`: DescribeAcls and DeleteAcls) and the checks
//! Kafka makes of a new binding (CreateAcls) and of a filter, each failing with the sentence
//! Kafka answers INVALID_REQUEST with.

use crate::{
    parse_principal, AclBinding, Operation, PatternType, Permission, ResourceType, CLUSTER_NAME,
    WILDCARD,
};

/// A filter over bindings: `None` names and `Any` codes match everything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclFilter {
    pub resource_type: ResourceType,
    pub resource_name: Option<String>,
    pub pattern_type: PatternType,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Operation,
    pub permission: Permission,
}

/// Why a binding or filter is refused: the message of Kafka's INVALID_REQUEST answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidAcl(pub String);

impl std::fmt::Display for InvalidAcl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidAcl {}

fn invalid(text: impl Into<String>) -> Result<(), InvalidAcl> {
    Err(InvalidAcl(text.into()))
}

impl AclBinding {
    /// The checks a broker and Kafka's controller make of a binding to be created
    /// (`AclApis.handleCreateAcls`, `AclControlManager.validateNewAcl`).
    pub fn validate_new(&self) -> Result<(), InvalidAcl> {
        if self.resource_type == ResourceType::Cluster && self.resource_name != CLUSTER_NAME {
            return invalid(format!(
                "The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
            ));
        }
        if self.resource_name.is_empty() {
            return invalid("Invalid empty resource name");
        }
        if matches!(
            self.resource_type,
            ResourceType::Unknown | ResourceType::Any
        ) {
            return invalid(format!("Invalid resourceType {}", self.resource_type));
        }
        if !matches!(
            self.pattern_type,
            PatternType::Literal | PatternType::Prefixed
        ) {
            return invalid(format!("Invalid patternType {}", self.pattern_type));
        }
        if matches!(self.operation, Operation::Unknown | Operation::Any) {
            return invalid(format!("Invalid operation {}", self.operation));
        }
        if !matches!(self.permission, Permission::Allow | Permission::Deny) {
            return invalid(format!("Invalid permissionType {}", self.permission));
        }
        if parse_principal(&self.principal).is_none() {
            return invalid(format!(
                "Could not parse principal from `{}` (expected a string in format principalType:principalName)",
                self.principal
            ));
        }
        if self.host.is_empty() {
            return invalid("Invalid empty host");
        }
        Ok(())
    }
}

impl AclFilter {
    /// A filter matching every binding.
    pub fn any() -> AclFilter {
        AclFilter {
            resource_type: ResourceType::Any,
            resource_name: None,
            pattern_type: PatternType::Any,
            principal: None,
            host: None,
            operation: Operation::Any,
            permission: Permission::Any,
        }
    }

    /// Kafka's checks of a filter: none of its codes may be UNKNOWN
    /// (`DescribeAclsRequest.validate`, `DeleteAclsRequest.validate`,
    /// `AclControlManager.validateFilter`).
    pub fn validate(&self) -> Result<(), InvalidAcl> {
        if self.resource_type == ResourceType::Unknown {
            return invalid("Unknown patternFilter: resource type UNKNOWN.");
        }
        if self.pattern_type == PatternType::Unknown {
            return invalid("Unknown patternFilter: pattern type UNKNOWN.");
        }
        if self.operation == Operation::Unknown {
            return invalid("Unknown entryFilter: operation UNKNOWN.");
        }
        if self.permission == Permission::Unknown {
            return invalid("Unknown entryFilter: permission type UNKNOWN.");
        }
        Ok(())
    }

    /// Whether `binding` passes the filter (Kafka's `AclBindingFilter.matches`).
    pub fn matches(&self, binding: &AclBinding) -> bool {
        self.matches_pattern(binding) && self.matches_entry(binding)
    }

    /// Kafka's `ResourcePatternFilter.matches`: MATCH finds every binding that applies to a
    /// resource of the filter's name (that literal name, the wildcard, prefixes of it).
    fn matches_pattern(&self, binding: &AclBinding) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != binding.resource_type {
            return false;
        }
        if !matches!(self.pattern_type, PatternType::Any | PatternType::Match)
            && self.pattern_type != binding.pattern_type
        {
            return false;
        }
        let Some(name) = &self.resource_name else {
            return true;
        };
        if self.pattern_type == PatternType::Any || self.pattern_type == binding.pattern_type {
            return *name == binding.resource_name;
        }
        match binding.pattern_type {
            PatternType::Literal => {
                *name == binding.resource_name || binding.resource_name == WILDCARD
            }
            PatternType::Prefixed => name.starts_with(&binding.resource_name),
            _ => false,
        }
    }

    /// Kafka's `AccessControlEntryFilter.matches`.
    fn matches_entry(&self, binding: &AclBinding) -> bool {
        self.principal
            .as_ref()
            .is_none_or(|p| *p == binding.principal)
            && self.host.as_ref().is_none_or(|h| *h == binding.host)
            && (self.operation == Operation::Any || self.operation == binding.operation)
            && (self.permission == Permission::Any || self.permission == binding.permission)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(rt: ResourceType, name: &str, pt: PatternType) -> AclBinding {
        AclBinding {
            resource_type: rt,
            resource_name: name.into(),
            pattern_type: pt,
            principal: "User:alice".into(),
            host: "*".into(),
            operation: Operation::Read,
            permission: Permission::Allow,
        }
    }

    fn filter(rt: ResourceType, name: Option<&str>, pt: PatternType) -> AclFilter {
        AclFilter {
            resource_type: rt,
            resource_name: name.map(str::to_string),
            pattern_type: pt,
            ..AclFilter::any()
        }
    }

    #[test]
    fn match_filters_find_what_applies_to_a_name() {
        use PatternType::*;
        let t = ResourceType::Topic;
        let f = filter(t, Some("orders-eu"), Match);
        assert!(f.matches(&binding(t, "orders-eu", Literal)));
        assert!(f.matches(&binding(t, "*", Literal)));
        assert!(f.matches(&binding(t, "orders-", Prefixed)));
        assert!(!f.matches(&binding(t, "orders-eu-2", Prefixed)));
        assert!(!f.matches(&binding(t, "orders", Literal)));
        assert!(!f.matches(&binding(ResourceType::Group, "orders-eu", Literal)));
        // ANY compares the name exactly, whatever the pattern type.
        let f = filter(t, Some("orders-"), Any);
        assert!(f.matches(&binding(t, "orders-", Prefixed)));
        assert!(f.matches(&binding(t, "orders-", Literal)));
        assert!(!f.matches(&binding(t, "*", Literal)));
        // A definite pattern type compares it too.
        let f = filter(t, Some("orders-"), Literal);
        assert!(!f.matches(&binding(t, "orders-", Prefixed)));
        assert!(AclFilter::any().matches(&binding(ResourceType::User, "x", Prefixed)));
    }

    #[test]
    fn entry_filters_compare_each_field_given() {
        let b = binding(ResourceType::Topic, "t", PatternType::Literal);
        let mut f = AclFilter::any();
        f.principal = Some("User:bob".into());
        assert!(!f.matches(&b));
        f.principal = Some("User:alice".into());
        f.operation = Operation::Write;
        assert!(!f.matches(&b));
        f.operation = Operation::Read;
        f.permission = Permission::Deny;
        assert!(!f.matches(&b));
        f.permission = Permission::Allow;
        f.host = Some("*".into());
        assert!(f.matches(&b));
    }

    #[test]
    fn new_bindings_are_checked_as_kafka_checks_them() {
        let ok = binding(ResourceType::Topic, "t", PatternType::Literal);
        assert!(ok.validate_new().is_ok());
        let mut b = ok.clone();
        b.resource_type = ResourceType::Cluster;
        assert!(b.validate_new().unwrap_err().0.contains("kafka-cluster"));
        b.resource_name = CLUSTER_NAME.into();
        assert!(b.validate_new().is_ok());
        let mut b = ok.clone();
        b.resource_name.clear();
        assert!(b.validate_new().is_err());
        let mut b = ok.clone();
        b.pattern_type = PatternType::Match;
        assert!(b.validate_new().is_err());
        let mut b = ok.clone();
        b.operation = Operation::Any;
        assert!(b.validate_new().is_err());
        let mut b = ok.clone();
        b.permission = Permission::Any;
        assert!(b.validate_new().is_err());
        let mut b = ok;
        b.principal = "alice".into();
        assert!(b.validate_new().is_err());
    }

    #[test]
    fn filters_with_unknown_codes_are_refused() {
        assert!(AclFilter::any().validate().is_ok());
        let mut f = AclFilter::any();
        f.pattern_type = PatternType::Unknown;
        assert!(f.validate().is_err());
        let mut f = AclFilter::any();
        f.operation = Operation::Unknown;
        assert!(f.validate().is_err());
    }
}

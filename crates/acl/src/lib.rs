//! Access control lists as Apache Kafka's `StandardAuthorizer` keeps and applies them, without
//! I/O.
//!
//! Layout:
//! - this file: the vocabulary (resource types, pattern types, operations, permissions, with
//!   Kafka's wire codes and names) and an ACL binding: a resource pattern and an access
//!   control entry.
//! - `filter.rs`: binding filters (DescribeAcls, DeleteAcls; ANY and MATCH) and the checks
//!   Kafka makes of a new binding and of a filter.
//! - `authorizer.rs`: the decision for one action (super users, DENY before ALLOW, implied
//!   operations, literal, prefixed and wildcard patterns, `allow.everyone.if.no.acl.found`),
//!   the authorized-operations bit field, and Kafka's `authorizeByResourceType`.
//!
//! Owns: what a binding means and whether an action is allowed. Does not own: where bindings
//! are stored (sluice-meta), Kafka error codes and which action each API needs (the broker),
//! logging of denials (the broker).

mod authorizer;
mod filter;

use serde::{Deserialize, Serialize};

pub use authorizer::{Action, Authorizer, Decision, Rule};
pub use filter::{AclFilter, InvalidAcl};

/// The only name of the CLUSTER resource.
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// The resource name and host of ACLs that match any name or host.
pub const WILDCARD: &str = "*";
/// The principal of ACLs that match any principal.
pub const WILDCARD_PRINCIPAL: &str = "User:*";

macro_rules! coded_enum {
    ($(#[$doc:meta])* $name:ident { $($(#[$vdoc:meta])* $variant:ident = $code:literal, $text:literal;)* }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "SCREAMING_SNAKE_CASE")]
        pub enum $name {
            $($(#[$vdoc])* $variant,)*
        }

        impl $name {
            /// The value for Kafka's wire code; codes Kafka does not define read as `Unknown`,
            /// as Kafka's `fromCode` reads them.
            pub fn from_code(code: i8) -> $name {
                match code {
                    $($code => $name::$variant,)*
                    _ => $name::Unknown,
                }
            }

            /// Kafka's wire code.
            pub fn code(self) -> i8 {
                match self {
                    $($name::$variant => $code,)*
                }
            }

            /// Kafka's name (its enum constant, as `kafka-acls` prints it).
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

coded_enum! {
    /// Kafka's `ResourceType`.
    ResourceType {
        Unknown = 0, "UNKNOWN";
        /// Filters only.
        Any = 1, "ANY";
        Topic = 2, "TOPIC";
        Group = 3, "GROUP";
        Cluster = 4, "CLUSTER";
        TransactionalId = 5, "TRANSACTIONAL_ID";
        DelegationToken = 6, "DELEGATION_TOKEN";
        User = 7, "USER";
    }
}

coded_enum! {
    /// Kafka's `PatternType`.
    PatternType {
        Unknown = 0, "UNKNOWN";
        /// Filters only: any pattern type, the name compared exactly.
        Any = 1, "ANY";
        /// Filters only: every binding that would apply to a resource of that name.
        Match = 2, "MATCH";
        Literal = 3, "LITERAL";
        Prefixed = 4, "PREFIXED";
    }
}

coded_enum! {
    /// Kafka's `AclOperation`.
    Operation {
        Unknown = 0, "UNKNOWN";
        /// Filters only.
        Any = 1, "ANY";
        All = 2, "ALL";
        Read = 3, "READ";
        Write = 4, "WRITE";
        Create = 5, "CREATE";
        Delete = 6, "DELETE";
        Alter = 7, "ALTER";
        Describe = 8, "DESCRIBE";
        ClusterAction = 9, "CLUSTER_ACTION";
        DescribeConfigs = 10, "DESCRIBE_CONFIGS";
        AlterConfigs = 11, "ALTER_CONFIGS";
        IdempotentWrite = 12, "IDEMPOTENT_WRITE";
        CreateTokens = 13, "CREATE_TOKENS";
        DescribeTokens = 14, "DESCRIBE_TOKENS";
    }
}

coded_enum! {
    /// Kafka's `AclPermissionType`.
    Permission {
        Unknown = 0, "UNKNOWN";
        /// Filters only.
        Any = 1, "ANY";
        Deny = 2, "DENY";
        Allow = 3, "ALLOW";
    }
}

impl ResourceType {
    /// Kafka's `SecurityUtils.resourceTypeName`, as its authorizer log prints a resource.
    pub fn log_name(self) -> &'static str {
        match self {
            ResourceType::Topic => "Topic",
            ResourceType::Group => "Group",
            ResourceType::Cluster => "Cluster",
            ResourceType::TransactionalId => "TransactionalId",
            ResourceType::DelegationToken => "DelegationToken",
            ResourceType::User => "User",
            ResourceType::Any => "Any",
            ResourceType::Unknown => "Unknown",
        }
    }

    /// The operations an ACL on a resource of this type may name, as Kafka's
    /// `AclEntry.supportedOperations` lists them (what authorized-operations fields report on).
    pub fn supported_operations(self) -> &'static [Operation] {
        use Operation::*;
        match self {
            ResourceType::Topic => &[
                Read,
                Write,
                Create,
                Describe,
                Delete,
                Alter,
                DescribeConfigs,
                AlterConfigs,
            ],
            ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
            ResourceType::Cluster => &[
                Create,
                ClusterAction,
                DescribeConfigs,
                AlterConfigs,
                IdempotentWrite,
                Alter,
                Describe,
            ],
            ResourceType::TransactionalId => &[Describe, Write],
            ResourceType::DelegationToken => &[Describe],
            ResourceType::User => &[CreateTokens, DescribeTokens],
            ResourceType::Any | ResourceType::Unknown => &[],
        }
    }
}

/// One ACL: a resource pattern (type, name, pattern type) and an access control entry
/// (principal, host, operation, permission). Kafka's `AclBinding`; two equal bindings are
/// one ACL (creating it again changes nothing).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct AclBinding {
    pub resource_type: ResourceType,
    pub resource_name: String,
    pub pattern_type: PatternType,
    /// `Type:name`, such as `User:alice`, or [`WILDCARD_PRINCIPAL`].
    pub principal: String,
    /// An IP address as Java's `getHostAddress` prints it, or [`WILDCARD`].
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

impl std::fmt::Display for AclBinding {
    /// As Kafka's `StandardAcl.toString` reads.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "StandardAcl(resourceType={}, resourceName={}, patternType={}, principal={}, host={}, operation={}, permissionType={})",
            self.resource_type,
            self.resource_name,
            self.pattern_type,
            self.principal,
            self.host,
            self.operation,
            self.permission
        )
    }
}

/// The principal type and name of `Type:name` (Kafka's `SecurityUtils.parseKafkaPrincipal`:
/// split at the first colon; both parts must be there).
pub fn parse_principal(text: &str) -> Option<(&str, &str)> {
    let (kind, name) = text.split_once(':')?;
    (!kind.is_empty() && !name.is_empty()).then_some((kind, name))
}

/// A bit field with bit `code` set for each operation, as Kafka's authorized-operations fields
/// carry them (`Utils.to32BitField`).
pub fn operations_bits(operations: impl IntoIterator<Item = Operation>) -> i32 {
    operations
        .into_iter()
        .fold(0, |bits, op| bits | (1i32 << (op.code() as u32 & 31)))
}

/// What an authorized-operations field holds when the client did not ask for it.
pub const OPERATIONS_NOT_ASKED: i32 = i32::MIN;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_unknown_codes_read_as_unknown() {
        for code in -3..20i8 {
            let op = Operation::from_code(code);
            if op != Operation::Unknown {
                assert_eq!(op.code(), code);
            }
        }
        assert_eq!(ResourceType::from_code(7), ResourceType::User);
        assert_eq!(ResourceType::from_code(8), ResourceType::Unknown);
        assert_eq!(PatternType::from_code(4), PatternType::Prefixed);
        assert_eq!(Permission::from_code(-1), Permission::Unknown);
        assert_eq!(Operation::ClusterAction.name(), "CLUSTER_ACTION");
    }

    #[test]
    fn principals_split_at_the_first_colon() {
        assert_eq!(parse_principal("User:alice"), Some(("User", "alice")));
        assert_eq!(
            parse_principal("User:CN=a:b,O=c"),
            Some(("User", "CN=a:b,O=c"))
        );
        assert_eq!(parse_principal("alice"), None);
        assert_eq!(parse_principal("User:"), None);
        assert_eq!(parse_principal(":x"), None);
    }

    #[test]
    fn operation_bits_are_kafkas() {
        // Kafka's Metadata answer for a topic with every operation allowed.
        let all = operations_bits(ResourceType::Topic.supported_operations().iter().copied());
        assert_eq!(all, 0b1101_1111_1000);
        assert_eq!(operations_bits([]), 0);
    }
}

//! One module per Kafka API.

pub(crate) mod access;
pub(crate) mod acls;
pub(crate) mod alter_partition_reassignments;
pub(crate) mod alter_replica_log_dirs;
pub(crate) mod api_versions;
pub(crate) mod client_quotas;
pub(crate) mod configs;
pub(crate) mod consumer_group_describe;
pub(crate) mod consumer_group_heartbeat;
pub(crate) mod create_partitions;
pub(crate) mod create_topics;
pub(crate) mod delegation_tokens;
pub(crate) mod delete_groups;
pub(crate) mod delete_records;
pub(crate) mod delete_topics;
pub(crate) mod describe_cluster;
pub(crate) mod describe_groups;
pub(crate) mod describe_log_dirs;
pub(crate) mod describe_producers;
pub(crate) mod describe_topic_partitions;
pub(crate) mod elect_leaders;
pub(crate) mod fetch;
pub(crate) mod find_coordinator;
pub(crate) mod heartbeat;
pub(crate) mod init_producer_id;
pub(crate) mod join_group;
pub(crate) mod leave_group;
pub(crate) mod list_groups;
pub(crate) mod list_offsets;
pub(crate) mod list_partition_reassignments;
pub(crate) mod metadata;
pub(crate) mod offset_commit;
pub(crate) mod offset_delete;
pub(crate) mod offset_fetch;
pub(crate) mod offset_for_leader_epoch;
pub(crate) mod produce;
pub(crate) mod scram_credentials;
pub(crate) mod sync_group;
pub(crate) mod txn;
pub(crate) mod txn_offset_commit;
pub(crate) mod write_txn_markers;

use std::net::IpAddr;
use std::sync::Arc;

use kafka_protocol::messages::{RequestHeader, TopicName};
use kafka_protocol::protocol::StrBytes;

/// Who sent a request: its client id, where it connects from, who it authenticated as, and
/// which API it called.
#[derive(Clone, Debug)]
pub(crate) struct Client {
    pub(crate) id: String,
    /// The peer address as Kafka reports it (Java's `InetAddress.toString()`: `/127.0.0.1`).
    pub(crate) host: String,
    /// The listener the request came in on.
    pub(crate) listener: Arc<str>,
    /// The principal (`User:alice`; `User:ANONYMOUS` without authentication).
    pub(crate) principal: Arc<str>,
    /// The peer address as Java's `getHostAddress` prints it (`127.0.0.1`): what ACL hosts
    /// are compared with.
    pub(crate) address: String,
    /// The request's API key.
    pub(crate) api_key: i16,
    /// The connection's refused idempotent batches (Produce).
    pub(crate) produce_refusals: Arc<produce::ProduceRefusals>,
}

impl Client {
    pub(crate) fn new(header: &RequestHeader, conn: &crate::Connection) -> Client {
        let host = java_host(conn.peer);
        Client {
            id: client_id(header),
            address: host.trim_start_matches('/').to_string(),
            host,
            listener: conn.listener.clone(),
            principal: conn
                .principal
                .clone()
                .unwrap_or_else(|| Arc::from(crate::authz::ANONYMOUS)),
            api_key: header.request_api_key,
            produce_refusals: conn.produce_refusals.clone(),
        }
    }

    /// The API's name as Kafka's `ApiKeys.name` reads (`Produce`), for the authorizer log.
    pub(crate) fn api_name(&self) -> String {
        match kafka_protocol::messages::ApiKey::try_from(self.api_key) {
            Ok(key) => format!("{key:?}"),
            Err(()) => self.api_key.to_string(),
        }
    }
}

/// The request's client id ("" when it has none).
pub(crate) fn client_id(header: &RequestHeader) -> String {
    header
        .client_id
        .as_ref()
        .map(|s| s.to_string())
        .unwrap_or_default()
}

/// `InetAddress.toString()` of an address without a host name: `/` and the address, IPv6 as
/// eight hexadecimal groups without leading zeros and without `::` compression.
fn java_host(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => format!("/{v4}"),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => format!("/{v4}"),
            None => {
                let groups: Vec<String> = v6.segments().iter().map(|s| format!("{s:x}")).collect();
                format!("/{}", groups.join(":"))
            }
        },
    }
}

pub(crate) fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

pub(crate) fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

pub(crate) fn opt_str(s: Option<&str>) -> Option<StrBytes> {
    s.map(str_bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_read_as_java_prints_them() {
        assert_eq!(
            java_host("127.0.0.1".parse().unwrap_or(IpAddr::from([0; 4]))),
            "/127.0.0.1"
        );
        assert_eq!(
            java_host("::1".parse().unwrap_or(IpAddr::from([0; 4]))),
            "/0:0:0:0:0:0:0:1"
        );
        assert_eq!(
            java_host("::ffff:10.0.0.2".parse().unwrap_or(IpAddr::from([0; 4]))),
            "/10.0.0.2"
        );
    }
}

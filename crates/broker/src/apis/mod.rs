//! One module per Kafka API.

pub(crate) mod alter_replica_log_dirs;
pub(crate) mod api_versions;
pub(crate) mod configs;
pub(crate) mod create_partitions;
pub(crate) mod create_topics;
pub(crate) mod delete_records;
pub(crate) mod delete_topics;
pub(crate) mod describe_cluster;
pub(crate) mod describe_log_dirs;
pub(crate) mod fetch;
pub(crate) mod init_producer_id;
pub(crate) mod list_offsets;
pub(crate) mod metadata;
pub(crate) mod produce;

use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

pub(crate) fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

pub(crate) fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

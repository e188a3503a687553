//! Conversions of this broker's strings into kafka_protocol's wire types.

use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

pub(crate) fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

pub(crate) fn str_bytes(s: impl Into<String>) -> StrBytes {
    StrBytes::from_string(s.into())
}

pub(crate) fn opt_str(s: Option<&str>) -> Option<StrBytes> {
    s.map(str_bytes)
}

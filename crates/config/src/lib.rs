//! Broker and topic configuration, under Apache Kafka's property names.
//!
//! CONTRACT FILE: the public API below is what the broker codes against. Bodies marked
//! `unimplemented!` are to be filled in; shapes may gain fields but should not change.
//!
//! Owns: parsing `server.properties` (Java properties syntax), defaults, validation with
//! messages naming the property, the catalogue of topic-level configs with their broker-level
//! synonyms, and resolving a topic's effective configs for DescribeConfigs.
//! Does not own: applying configs (the broker and log store do that).

use std::collections::BTreeMap;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid value {value:?} for configuration {name}: {reason}")]
    InvalidValue { name: String, value: String, reason: String },
    #[error("unknown topic configuration {name}")]
    UnknownTopicConfig { name: String },
    #[error("cannot read {path}: {reason}")]
    Read { path: PathBuf, reason: String },
}

/// One listener: `NAME://host:port` (e.g. `PLAINTEXT://127.0.0.1:9092`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// Where a config value came from (DescribeConfigs `config_source`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigSource {
    /// Set on the topic (code 1, DYNAMIC_TOPIC_CONFIG).
    Topic,
    /// Set in server.properties (code 4, STATIC_BROKER_CONFIG).
    StaticBroker,
    /// Built-in default (code 5, DEFAULT_CONFIG).
    Default,
}

/// One resolved config for DescribeConfigs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigEntry {
    pub name: String,
    pub value: Option<String>,
    pub source: ConfigSource,
    pub read_only: bool,
    pub sensitive: bool,
    /// Kafka's ConfigType code for DescribeConfigs v3+ (1 BOOLEAN, 2 STRING, 3 INT, 4 SHORT,
    /// 5 LONG, 6 DOUBLE, 7 LIST, 8 CLASS, 9 PASSWORD).
    pub config_type: i8,
    pub documentation: Option<String>,
}

/// `message.timestamp.type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

/// Typed topic-level settings (a topic's overrides applied on the broker's defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct TopicConfig {
    pub segment_bytes: u64,
    pub segment_ms: i64,
    pub retention_ms: i64,
    pub retention_bytes: i64,
    pub index_interval_bytes: u32,
    pub segment_index_bytes: u32,
    pub max_message_bytes: u32,
    pub timestamp_type: TimestampType,
    /// `compression.type`: producer, uncompressed, gzip, snappy, lz4, zstd.
    pub compression_type: String,
    /// `cleanup.policy`: delete (compact is accepted and stored, enforced later).
    pub cleanup_policy: String,
    pub flush_messages: i64,
    pub flush_ms: i64,
}

/// The whole broker configuration.
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    /// `node.id`, or `broker.id` if only that is set. Default 1.
    pub node_id: i32,
    /// `listeners`. Default `PLAINTEXT://127.0.0.1:9092`.
    pub listeners: Vec<Listener>,
    /// `advertised.listeners`; defaults to `listeners`.
    pub advertised_listeners: Vec<Listener>,
    /// `log.dirs` (or `log.dir`). Default `./sluice-data`.
    pub log_dirs: Vec<PathBuf>,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    pub auto_create_topics_enable: bool,
    /// `message.max.bytes` (broker default for max.message.bytes). Default 1048588.
    pub message_max_bytes: u32,
    /// `socket.request.max.bytes`. Default 104857600.
    pub socket_request_max_bytes: u32,
    /// `log.retention.check.interval.ms`. Default 300000.
    pub log_retention_check_interval_ms: u64,
    /// `log.flush.offset.checkpoint.interval.ms`. Default 60000.
    pub log_flush_offset_checkpoint_interval_ms: u64,
    /// `max.connections`. Default 2147483647 (Kafka's), we cap at something sane? No: Kafka's.
    pub max_connections: u32,
    /// `connections.max.idle.ms`. Default 600000.
    pub connections_max_idle_ms: u64,
    /// `cluster.id` (Sluice extension; Kafka stores it in meta.properties). None = generate.
    pub cluster_id: Option<String>,
    /// Topic-level defaults from the broker's `log.*` / `message.*` / `compression.type` etc.
    pub topic_defaults: TopicConfig,
    /// Every property as given, for DescribeConfigs on the broker resource.
    pub given: BTreeMap<String, String>,
    /// Property names that were not recognised (each has been warned about once).
    pub unknown: Vec<String>,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        unimplemented!()
    }
}

impl BrokerConfig {
    /// Parse a server.properties file. Unknown properties: one `tracing::warn!` each, ignored.
    /// Invalid values: `Err` naming the property.
    pub fn from_file(path: &std::path::Path) -> Result<BrokerConfig, ConfigError> {
        let _ = path;
        unimplemented!()
    }
    /// Same, from already-parsed key/value pairs (also used for `--override k=v`).
    pub fn from_properties(props: BTreeMap<String, String>) -> Result<BrokerConfig, ConfigError> {
        let _ = props;
        unimplemented!()
    }
    /// DescribeConfigs for the broker resource: every known broker config with its value and
    /// source.
    pub fn describe(&self) -> Vec<ConfigEntry> {
        unimplemented!()
    }
}

/// Parse Java `.properties` text (comments `#`/`!`, `key=value`, `key: value`, `key value`,
/// line continuations, escapes).
pub fn parse_properties(text: &str) -> BTreeMap<String, String> {
    let _ = text;
    unimplemented!()
}

/// Validate one topic-level config (name known, value parses and is in range).
pub fn validate_topic_config(name: &str, value: &str) -> Result<(), ConfigError> {
    let _ = (name, value);
    unimplemented!()
}

/// The effective typed config of a topic: `overrides` (topic-level, already validated) applied
/// on `broker.topic_defaults`.
pub fn topic_config(broker: &BrokerConfig, overrides: &BTreeMap<String, String>) -> TopicConfig {
    let _ = (broker, overrides);
    unimplemented!()
}

/// DescribeConfigs for a topic resource: every topic-level config Kafka lists, with value and
/// source (Topic if overridden, StaticBroker if its broker synonym was set, else Default).
pub fn describe_topic(broker: &BrokerConfig, overrides: &BTreeMap<String, String>) -> Vec<ConfigEntry> {
    let _ = (broker, overrides);
    unimplemented!()
}

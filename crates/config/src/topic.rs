//! Name-based access to the fields of [`TopicConfig`].

use crate::catalog::{render_double, Value};
use crate::{TimestampType, TopicConfig};

impl Default for TopicConfig {
    /// Kafka's built-in topic defaults (no broker overrides).
    fn default() -> Self {
        TopicConfig {
            segment_bytes: 1_073_741_824,
            segment_ms: 604_800_000,
            retention_ms: 604_800_000,
            retention_bytes: -1,
            index_interval_bytes: 4096,
            segment_index_bytes: 10_485_760,
            max_message_bytes: 1_048_588,
            timestamp_type: TimestampType::CreateTime,
            compression_type: "producer".to_string(),
            cleanup_policy: "delete".to_string(),
            flush_messages: i64::MAX,
            flush_ms: i64::MAX,
            segment_jitter_ms: 0,
            delete_retention_ms: 86_400_000,
            file_delete_delay_ms: 60_000,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            min_cleanable_dirty_ratio: 0.5,
            min_insync_replicas: 1,
            unclean_leader_election_enable: false,
            preallocate: false,
            message_timestamp_before_max_ms: i64::MAX,
            message_timestamp_after_max_ms: 3_600_000,
            message_downconversion_enable: true,
            compression_gzip_level: -1,
            compression_lz4_level: 9,
            compression_zstd_level: 3,
            remote_storage_enable: false,
            remote_log_copy_disable: false,
            remote_log_delete_on_disable: false,
            local_retention_ms: -2,
            local_retention_bytes: -2,
            leader_replication_throttled_replicas: String::new(),
            follower_replication_throttled_replicas: String::new(),
        }
    }
}

/// Normalise a validated cleanup policy list to `delete`, `compact` or `compact,delete`.
fn normalise_cleanup_policy(items: &[String]) -> String {
    let compact = items.iter().any(|i| i == "compact");
    let delete = items.iter().any(|i| i == "delete");
    match (compact, delete) {
        (true, true) => "compact,delete".to_string(),
        (true, false) => "compact".to_string(),
        _ => "delete".to_string(),
    }
}

// Values reaching `apply` have passed the catalogue's type and range checks, so these
// conversions only fall back on values that cannot occur.
fn to_u64(v: i64, fallback: u64) -> u64 {
    u64::try_from(v).unwrap_or(fallback)
}
fn to_u32(v: i64, fallback: u32) -> u32 {
    u32::try_from(v).unwrap_or(fallback)
}
fn to_i32(v: i64, fallback: i32) -> i32 {
    i32::try_from(v).unwrap_or(fallback)
}

impl TopicConfig {
    /// Whether `cleanup.policy` includes `compact`.
    pub fn compacts(&self) -> bool {
        self.cleanup_policy
            .split(',')
            .any(|p| p.trim() == "compact")
    }

    /// Whether `cleanup.policy` includes `delete` (time/size retention applies).
    pub fn deletes(&self) -> bool {
        self.cleanup_policy.split(',').any(|p| p.trim() == "delete")
    }

    /// The value of a topic config by its Kafka name, rendered as DescribeConfigs shows it.
    /// `None` for names that are not topic configs.
    pub fn get(&self, name: &str) -> Option<String> {
        let v = match name {
            "cleanup.policy" => self.cleanup_policy.clone(),
            "compression.gzip.level" => self.compression_gzip_level.to_string(),
            "compression.lz4.level" => self.compression_lz4_level.to_string(),
            "compression.type" => self.compression_type.clone(),
            "compression.zstd.level" => self.compression_zstd_level.to_string(),
            "delete.retention.ms" => self.delete_retention_ms.to_string(),
            "file.delete.delay.ms" => self.file_delete_delay_ms.to_string(),
            "flush.messages" => self.flush_messages.to_string(),
            "flush.ms" => self.flush_ms.to_string(),
            "follower.replication.throttled.replicas" => {
                self.follower_replication_throttled_replicas.clone()
            }
            "index.interval.bytes" => self.index_interval_bytes.to_string(),
            "leader.replication.throttled.replicas" => {
                self.leader_replication_throttled_replicas.clone()
            }
            "local.retention.bytes" => self.local_retention_bytes.to_string(),
            "local.retention.ms" => self.local_retention_ms.to_string(),
            "max.compaction.lag.ms" => self.max_compaction_lag_ms.to_string(),
            "max.message.bytes" => self.max_message_bytes.to_string(),
            "message.downconversion.enable" => self.message_downconversion_enable.to_string(),
            "message.timestamp.after.max.ms" => self.message_timestamp_after_max_ms.to_string(),
            "message.timestamp.before.max.ms" => self.message_timestamp_before_max_ms.to_string(),
            "message.timestamp.type" => self.timestamp_type.name().to_string(),
            "min.cleanable.dirty.ratio" => render_double(self.min_cleanable_dirty_ratio),
            "min.compaction.lag.ms" => self.min_compaction_lag_ms.to_string(),
            "min.insync.replicas" => self.min_insync_replicas.to_string(),
            "preallocate" => self.preallocate.to_string(),
            "remote.log.copy.disable" => self.remote_log_copy_disable.to_string(),
            "remote.log.delete.on.disable" => self.remote_log_delete_on_disable.to_string(),
            "remote.storage.enable" => self.remote_storage_enable.to_string(),
            "retention.bytes" => self.retention_bytes.to_string(),
            "retention.ms" => self.retention_ms.to_string(),
            "segment.bytes" => self.segment_bytes.to_string(),
            "segment.index.bytes" => self.segment_index_bytes.to_string(),
            "segment.jitter.ms" => self.segment_jitter_ms.to_string(),
            "segment.ms" => self.segment_ms.to_string(),
            "unclean.leader.election.enable" => self.unclean_leader_election_enable.to_string(),
            _ => return None,
        };
        Some(v)
    }

    /// Store a value that has passed the catalogue's checks for `name`.
    pub(crate) fn apply(&mut self, name: &str, value: Value) {
        let d = TopicConfig::default();
        match (name, value) {
            ("cleanup.policy", Value::List(items)) => {
                self.cleanup_policy = normalise_cleanup_policy(&items)
            }
            ("compression.gzip.level", Value::Int(v)) => {
                self.compression_gzip_level = to_i32(v, d.compression_gzip_level)
            }
            ("compression.lz4.level", Value::Int(v)) => {
                self.compression_lz4_level = to_i32(v, d.compression_lz4_level)
            }
            ("compression.type", Value::Str(v)) => self.compression_type = v,
            ("compression.zstd.level", Value::Int(v)) => {
                self.compression_zstd_level = to_i32(v, d.compression_zstd_level)
            }
            ("delete.retention.ms", Value::Int(v)) => self.delete_retention_ms = v,
            ("file.delete.delay.ms", Value::Int(v)) => self.file_delete_delay_ms = v,
            ("flush.messages", Value::Int(v)) => self.flush_messages = v,
            ("flush.ms", Value::Int(v)) => self.flush_ms = v,
            ("follower.replication.throttled.replicas", Value::List(items)) => {
                self.follower_replication_throttled_replicas = items.join(",")
            }
            ("index.interval.bytes", Value::Int(v)) => {
                self.index_interval_bytes = to_u32(v, d.index_interval_bytes)
            }
            ("leader.replication.throttled.replicas", Value::List(items)) => {
                self.leader_replication_throttled_replicas = items.join(",")
            }
            ("local.retention.bytes", Value::Int(v)) => self.local_retention_bytes = v,
            ("local.retention.ms", Value::Int(v)) => self.local_retention_ms = v,
            ("max.compaction.lag.ms", Value::Int(v)) => self.max_compaction_lag_ms = v,
            ("max.message.bytes", Value::Int(v)) => {
                self.max_message_bytes = to_u32(v, d.max_message_bytes)
            }
            ("message.downconversion.enable", Value::Bool(v)) => {
                self.message_downconversion_enable = v
            }
            ("message.timestamp.after.max.ms", Value::Int(v)) => {
                self.message_timestamp_after_max_ms = v
            }
            ("message.timestamp.before.max.ms", Value::Int(v)) => {
                self.message_timestamp_before_max_ms = v
            }
            ("message.timestamp.type", Value::Str(v)) => {
                self.timestamp_type = TimestampType::from_name(&v).unwrap_or(d.timestamp_type)
            }
            ("min.cleanable.dirty.ratio", Value::Double(v)) => self.min_cleanable_dirty_ratio = v,
            ("min.compaction.lag.ms", Value::Int(v)) => self.min_compaction_lag_ms = v,
            ("min.insync.replicas", Value::Int(v)) => {
                self.min_insync_replicas = to_i32(v, d.min_insync_replicas)
            }
            ("preallocate", Value::Bool(v)) => self.preallocate = v,
            ("remote.log.copy.disable", Value::Bool(v)) => self.remote_log_copy_disable = v,
            ("remote.log.delete.on.disable", Value::Bool(v)) => {
                self.remote_log_delete_on_disable = v
            }
            ("remote.storage.enable", Value::Bool(v)) => self.remote_storage_enable = v,
            ("retention.bytes", Value::Int(v)) => self.retention_bytes = v,
            ("retention.ms", Value::Int(v)) => self.retention_ms = v,
            ("segment.bytes", Value::Int(v)) => self.segment_bytes = to_u64(v, d.segment_bytes),
            ("segment.index.bytes", Value::Int(v)) => {
                self.segment_index_bytes = to_u32(v, d.segment_index_bytes)
            }
            ("segment.jitter.ms", Value::Int(v)) => self.segment_jitter_ms = v,
            ("segment.ms", Value::Int(v)) => self.segment_ms = v,
            ("unclean.leader.election.enable", Value::Bool(v)) => {
                self.unclean_leader_election_enable = v
            }
            (other, value) => {
                tracing::warn!(
                    config = other,
                    ?value,
                    "ignoring a topic config value of an unexpected kind"
                );
            }
        }
    }
}

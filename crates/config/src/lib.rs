//! Broker and topic configuration, under Apache Kafka's property names.
//!
//! Owns: parsing `server.properties` (Java properties syntax), defaults, validation with
//! messages naming the property, the catalogue of topic-level configs with their broker-level
//! synonyms, and resolving a topic's effective configs for DescribeConfigs.
//! Does not own: applying configs (the broker and log store do that).

use std::collections::BTreeMap;
use std::path::PathBuf;

mod broker;
mod catalog;
mod describe;
mod dynamic;
mod etcd;
mod memory;
mod oauthbearer;
mod principal;
mod properties;
mod sasl;
mod scoped;
mod tls;
mod topic;

#[cfg(test)]
mod test_support {
    use std::collections::BTreeMap;

    /// Properties from `(name, value)` pairs, as `server.properties` would give them.
    pub(crate) fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }
}

pub use broker::parse_listeners;
pub use dynamic::{validate_dynamic_broker_configs, DEFAULT_ENTITY};
pub use etcd::{
    parse_etcd_endpoint, EtcdEndpoint, EtcdLogin, EtcdTls, ETCD_ENDPOINTS, ETCD_KEYSTORE,
    ETCD_PASSWORD, ETCD_TRUSTSTORE, ETCD_USERNAME,
};
pub use memory::{available_memory, log_cache_default, LOG_CACHE_FLOOR_BYTES};
pub use oauthbearer::{JwksSource, JwksValidation, OAuthBearerConfig, UnsecuredValidation};
pub use principal::SslPrincipalMapper;
pub use sasl::{
    parse_jaas, JaasEntry, SaslConfig, SaslLogin, SaslMechanism, SASL_MAX_RECEIVE_DEFAULT,
};
pub use tls::{ClientAuth, KeyStore, Pem, TlsConfig, TrustStore};

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid value {value:?} for configuration {name}: {reason}")]
    InvalidValue {
        name: String,
        value: String,
        reason: String,
    },
    #[error("unknown topic configuration {name}")]
    UnknownTopicConfig { name: String },
    #[error("cannot read {path}: {reason}")]
    Read { path: PathBuf, reason: String },
    /// Kafka's answer to a dynamic change of a config that is read-only (`[a, b]`).
    #[error("Cannot update these configs dynamically: [{}]", names.join(", "))]
    NotDynamic { names: Vec<String> },
    /// Kafka's answer to a cluster-wide default of a config that is set per broker only.
    #[error("Cannot update these configs at default cluster level, broker id must be specified: [{}]", names.join(", "))]
    PerBrokerOnly { names: Vec<String> },
    /// Kafka's answer to a dynamic keystore or truststore setting without a listener prefix.
    #[error("These security configs can be dynamically updated only per-listener using the listener prefix: [{}]", names.join(", "))]
    SecurityWithoutListenerPrefix { names: Vec<String> },
}

/// How a listener's connections are secured (`listener.security.protocol.map`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's name of the protocol.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// The protocol named `name` (case-insensitive), as Kafka spells them.
    pub fn parse(name: &str) -> Option<SecurityProtocol> {
        [
            SecurityProtocol::Plaintext,
            SecurityProtocol::Ssl,
            SecurityProtocol::SaslPlaintext,
            SecurityProtocol::SaslSsl,
        ]
        .into_iter()
        .find(|p| p.name().eq_ignore_ascii_case(name))
    }
}

impl std::fmt::Display for SecurityProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// One listener: `NAME://host:port` (e.g. `PLAINTEXT://127.0.0.1:9092`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listener {
    pub name: String,
    pub host: String,
    pub port: u16,
}

impl Listener {
    /// `host:port`, with an IPv6 host in brackets: ready for `ToSocketAddrs`/`SocketAddr` parsing.
    pub fn address(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

impl std::fmt::Display for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}://{}", self.name, self.address())
    }
}

/// Where a config value came from (DescribeConfigs `config_source`), highest precedence
/// first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigSource {
    /// Set on the topic (code 1, DYNAMIC_TOPIC_CONFIG).
    Topic,
    /// Set at run time for this broker (code 2, DYNAMIC_BROKER_CONFIG).
    DynamicBroker,
    /// Set at run time as the cluster-wide default (code 3, DYNAMIC_DEFAULT_BROKER_CONFIG).
    DynamicDefaultBroker,
    /// Set in server.properties (code 4, STATIC_BROKER_CONFIG).
    StaticBroker,
    /// Built-in default (code 5, DEFAULT_CONFIG).
    Default,
    /// Set on a group (code 8, DYNAMIC_GROUP_CONFIG).
    Group,
}

impl ConfigSource {
    /// Kafka's DescribeConfigs `config_source` code.
    pub fn code(self) -> i8 {
        match self {
            ConfigSource::Topic => 1,
            ConfigSource::DynamicBroker => 2,
            ConfigSource::DynamicDefaultBroker => 3,
            ConfigSource::StaticBroker => 4,
            ConfigSource::Default => 5,
            ConfigSource::Group => 8,
        }
    }
}

/// One place a config is set (DescribeConfigs synonyms): a name (the config's own, or a broker
/// property that supplies it) and its value at one source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigSynonym {
    pub name: String,
    pub value: Option<String>,
    pub source: ConfigSource,
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
    /// Every place the config is set, highest precedence first (Kafka's synonyms; `source` is
    /// the first one's, or DEFAULT_CONFIG when there is none).
    pub synonyms: Vec<ConfigSynonym>,
}

/// `message.timestamp.type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum TimestampType {
    #[default]
    CreateTime,
    LogAppendTime,
}

impl TimestampType {
    /// Kafka's name: `CreateTime` or `LogAppendTime`.
    pub fn name(self) -> &'static str {
        match self {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        }
    }

    /// Parse Kafka's name (case-sensitive, as Kafka is).
    pub fn from_name(name: &str) -> Option<TimestampType> {
        match name {
            "CreateTime" => Some(TimestampType::CreateTime),
            "LogAppendTime" => Some(TimestampType::LogAppendTime),
            _ => None,
        }
    }
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
    /// `cleanup.policy`, normalised to `delete`, `compact` or `compact,delete` (compact is
    /// accepted and stored, enforced later). See [`TopicConfig::compacts`]/[`TopicConfig::deletes`].
    pub cleanup_policy: String,
    pub flush_messages: i64,
    pub flush_ms: i64,
    /// `segment.jitter.ms` (default 0).
    pub segment_jitter_ms: i64,
    /// `delete.retention.ms` (default 86400000): tombstone lifetime on compacted topics.
    pub delete_retention_ms: i64,
    /// `file.delete.delay.ms` (default 60000).
    pub file_delete_delay_ms: i64,
    /// `min.compaction.lag.ms` (default 0).
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms` (default i64::MAX).
    pub max_compaction_lag_ms: i64,
    /// `min.cleanable.dirty.ratio` (default 0.5).
    pub min_cleanable_dirty_ratio: f64,
    /// `min.insync.replicas` (default 1).
    pub min_insync_replicas: i32,
    /// `unclean.leader.election.enable` (default false).
    pub unclean_leader_election_enable: bool,
    /// `preallocate` (default false).
    pub preallocate: bool,
    /// `message.timestamp.before.max.ms` (default i64::MAX): with CreateTime, the broker rejects
    /// batches whose max timestamp is more than this far behind its clock.
    pub message_timestamp_before_max_ms: i64,
    /// `message.timestamp.after.max.ms` (default 3600000 since Kafka 4.0): with CreateTime, the
    /// broker rejects batches whose max timestamp is more than this far ahead of its clock.
    pub message_timestamp_after_max_ms: i64,
    /// `message.downconversion.enable` (default true; no effect since Kafka 4.0).
    pub message_downconversion_enable: bool,
    /// `compression.gzip.level` (default -1 = codec default).
    pub compression_gzip_level: i32,
    /// `compression.lz4.level` (default 9).
    pub compression_lz4_level: i32,
    /// `compression.zstd.level` (default 3).
    pub compression_zstd_level: i32,
    /// `remote.storage.enable` (default false; Sluice has no tiered storage).
    pub remote_storage_enable: bool,
    /// `remote.log.copy.disable` (default false).
    pub remote_log_copy_disable: bool,
    /// `remote.log.delete.on.disable` (default false).
    pub remote_log_delete_on_disable: bool,
    /// `local.retention.ms` (default -2 = same as retention.ms).
    pub local_retention_ms: i64,
    /// `local.retention.bytes` (default -2 = same as retention.bytes).
    pub local_retention_bytes: i64,
    /// `leader.replication.throttled.replicas` (default empty).
    pub leader_replication_throttled_replicas: String,
    /// `follower.replication.throttled.replicas` (default empty).
    pub follower_replication_throttled_replicas: String,
}

/// Consumer-group settings under Kafka's property names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSettings {
    /// `group.initial.rebalance.delay.ms` (default 3000).
    pub initial_rebalance_delay_ms: i32,
    /// `group.min.session.timeout.ms` (default 6000).
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms` (default 1800000).
    pub max_session_timeout_ms: i32,
    /// `group.max.size` (default 2147483647).
    pub max_size: i32,
    /// `group.consumer.heartbeat.interval.ms` (default 5000).
    pub consumer_heartbeat_interval_ms: i32,
    /// `group.consumer.session.timeout.ms` (default 45000).
    pub consumer_session_timeout_ms: i32,
    /// `group.consumer.max.size` (default 2147483647).
    pub consumer_max_size: i32,
    /// `group.consumer.assignors` (default `uniform,range`).
    pub consumer_assignors: Vec<String>,
    /// `group.consumer.migration.policy` (default `bidirectional`; lower-cased).
    pub consumer_migration_policy: String,
    /// `offsets.topic.num.partitions` (default 50).
    pub offsets_topic_num_partitions: i32,
    /// `offsets.retention.minutes` (default 10080 = 7 days).
    pub offsets_retention_minutes: i32,
    /// `offsets.retention.check.interval.ms` (default 600000).
    pub offsets_retention_check_interval_ms: i64,
    /// `sluice.offsets.snapshot.interval.records` (default 10000).
    pub offsets_snapshot_interval_records: u64,
    /// `offset.metadata.max.bytes` (default 4096).
    pub offset_metadata_max_bytes: i32,
    /// Share groups (KIP-932), Kafka's names and defaults.
    pub share: ShareSettings,
}

/// Share-group settings (`group.share.*`, `share.coordinator.*`; Kafka's names and defaults).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShareSettings {
    /// `group.share.record.lock.duration.ms` (default 30000).
    pub record_lock_duration_ms: i32,
    /// `group.share.delivery.count.limit` (default 5).
    pub delivery_count_limit: i32,
    /// `group.share.partition.max.record.locks` (default 2000).
    pub partition_max_record_locks: i32,
    /// `group.share.session.timeout.ms` (default 45000).
    pub session_timeout_ms: i32,
    /// `group.share.heartbeat.interval.ms` (default 5000).
    pub heartbeat_interval_ms: i32,
    /// `group.share.max.size` (default 200).
    pub max_size: i32,
    /// `group.share.max.share.sessions` (default 2000).
    pub max_share_sessions: i32,
    /// `share.coordinator.state.topic.num.partitions` (default 50).
    pub state_topic_num_partitions: i32,
}

/// The transaction coordinator's settings (Kafka's names and defaults).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnSettings {
    /// `transaction.state.log.num.partitions` (default 50).
    pub state_log_num_partitions: i32,
    /// `transaction.max.timeout.ms` (default 900000).
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms` (default 604800000).
    pub id_expiration_ms: i32,
    /// `transaction.abort.timed.out.transaction.cleanup.interval.ms` (default 10000).
    pub abort_timed_out_interval_ms: i32,
    /// `transaction.remove.expired.transaction.cleanup.interval.ms` (default 3600000).
    pub remove_expired_interval_ms: i32,
    /// `sluice.transaction.version`: the finalized `transaction.version` feature (default 2).
    pub version: i16,
    /// `add.partitions.to.txn.retry.backoff.ms` (default 20).
    pub add_partitions_retry_backoff_ms: i32,
    /// `add.partitions.to.txn.retry.backoff.max.ms` (default 100).
    pub add_partitions_retry_backoff_max_ms: i32,
}

/// The whole broker configuration.
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    /// `node.id`, or `broker.id` if only that is set. Default 1.
    pub node_id: i32,
    /// `broker.rack`; None when unset or empty.
    pub rack: Option<String>,
    /// `replica.selector.class` is the rack-aware selector (the default): in a cluster this
    /// broker serves fetches of partitions other brokers own from the shared volume, and as
    /// an owner sends consumers with a rack to a broker in their rack (KIP-392).
    pub read_replicas: bool,
    /// `sluice.volume.storage.nodes`: the storage node serving each log dir (a dir of
    /// `log_dirs`, the node's name), as the operator declared it.
    pub volume_nodes: Vec<(PathBuf, String)>,
    /// `sluice.broker.storage.nodes`: the storage nodes this broker reaches directly.
    pub storage_nodes: Vec<String>,
    /// `listeners`. Default `PLAINTEXT://127.0.0.1:9092`. Names are upper-cased; an empty host
    /// (`PLAINTEXT://:9092`) becomes `0.0.0.0` (all interfaces). Listeners named in
    /// `controller.listener.names` are dropped (Sluice has no controller endpoint).
    pub listeners: Vec<Listener>,
    /// `advertised.listeners`; defaults to `listeners`, an empty host advertised as `127.0.0.1`.
    pub advertised_listeners: Vec<Listener>,
    /// `listener.security.protocol.map`: each listener's security protocol, by listener name
    /// (Kafka's default maps PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL to themselves).
    pub listener_protocols: BTreeMap<String, SecurityProtocol>,
    /// The listener brokers use to reach each other (`inter.broker.listener.name`, else the
    /// listener named as `security.inter.broker.protocol`, else the first listener).
    pub inter_broker_listener: String,
    /// The TLS settings of each listener whose protocol is SSL or SASL_SSL, by listener name.
    pub listener_tls: BTreeMap<String, TlsConfig>,
    /// The SASL settings of each listener whose protocol is SASL_PLAINTEXT or SASL_SSL, by
    /// listener name.
    pub listener_sasl: BTreeMap<String, SaslConfig>,
    /// `sasl.mechanism.inter.broker.protocol`, when the inter-broker listener is a SASL one
    /// (checked to be enabled there, with the JAAS `username` and `password` to log in with).
    pub inter_broker_sasl: Option<(SaslMechanism, SaslLogin)>,
    /// `authorizer.class.name` set to Kafka's StandardAuthorizer: ACLs decide what each
    /// principal may do. None (the default): every request is allowed.
    pub authorizer: Option<AuthorizerSettings>,
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
    /// `num.recovery.threads.per.data.dir`: threads per log dir that open (and recover) the
    /// partitions at startup. Default: the number of CPUs.
    pub recovery_threads_per_data_dir: usize,
    /// `log.flush.offset.checkpoint.interval.ms`. Default 60000.
    pub log_flush_offset_checkpoint_interval_ms: u64,
    /// `max.connections`. Default 2147483647 (Kafka's).
    pub max_connections: u32,
    /// `max.connections.per.ip`. Default 2147483647 (Kafka's).
    pub max_connections_per_ip: u32,
    /// `max.connections.per.ip.overrides`: (host or IP, count), in the order given.
    pub max_connections_per_ip_overrides: Vec<(String, u32)>,
    /// `sluice.log.open.files.max`: partition files held open at most; -1 derives it from the
    /// open-files limit (`sluice_store::fds::FdBudget`).
    pub log_open_files_max: i64,
    /// `sluice.broker.partitions.max`: partitions opened at most; -1 derives it.
    pub broker_partitions_max: i64,
    /// `connections.max.idle.ms`. Default 600000.
    pub connections_max_idle_ms: u64,
    /// `connection.failed.authentication.delay.ms`: how long the answer to a failed SASL
    /// authentication (and the close) is held back. Default 100.
    pub failed_authentication_delay_ms: u64,
    /// `sluice.delete.retry.initial.ms`: first retry delay of a deferred deletion. Default 500.
    pub delete_retry_initial_ms: u64,
    /// `sluice.delete.retry.max.ms`: longest delay between retries. Default 30000.
    pub delete_retry_max_ms: u64,
    /// `sluice.log.cache.bytes`: page-cache budget for partition log data (drop-behind),
    /// split evenly over the open partition logs. -1 = disabled (the kernel decides, as with
    /// Kafka). Default an eighth of the memory the broker has (the machine's, or its cgroup's
    /// limit when smaller), at least 1 GiB ([`log_cache_default`]).
    pub log_cache_bytes: i64,
    /// `sluice.log.cache.min.partition.bytes`: floor of each partition's share of
    /// `log_cache_bytes` (so with many partitions the total kept may exceed it). Default
    /// 8388608 (8 MiB).
    pub log_cache_min_partition_bytes: u64,
    /// `sluice.log.recovery.point.bytes`: bytes appended to a partition's active segment after
    /// which the recovery point follows the log end (a producer snapshot there, then an
    /// fsync of what the write-behind wrote back), so that a restart after a crash validates
    /// little (in a cluster the owner records it in etcd for the next owner). 0 = off.
    /// Default 8388608 (8 MiB).
    pub log_recovery_point_bytes: u64,
    /// `sluice.log.recovery.point.interval.ms`: at most this often per partition. Default 1000.
    pub log_recovery_point_interval_ms: u64,
    /// `sluice.log.writeback.bytes`: bytes appended to a partition log after which the broker
    /// starts their writeback to the volume and waits for it (write-behind), rather than
    /// leaving them to the kernel's dirty-page thresholds. -1 = disabled. Default 1048576.
    pub log_writeback_bytes: i64,
    /// `sluice.log.unwritten.bytes.max`: data appended but not yet written back (summed over
    /// the broker's logs) above which produce requests wait for the write-behind before being
    /// appended (backpressure instead of the kernel's dirty-page throttle). -1 = no limit.
    /// Default 1073741824 (1 GiB): room for a second or more of the volume's rate while the
    /// volume stalls on a cache flush (a checkpoint's or a roll's fsync), which 256 MiB was
    /// not (docs/configuration.md, write-behind: measured on 2026-11-24).
    pub log_unwritten_bytes_max: i64,
    /// `sluice.worker.threads`: threads of the runtime that serves connections and requests
    /// (file system calls that may block run on extra threads). 0 = one per CPU the process
    /// may run on. Default 0.
    pub worker_threads: u16,
    /// `sluice.console.listener`: host:port of the web console's HTTP listener
    /// (docs/console.md). None (the default) = no console.
    pub console_listener: Option<String>,
    /// `sluice.console.read.only`: the console refuses every action. Default false.
    pub console_read_only: bool,
    /// `sluice.console.hosts`: host names the console answers to besides localhost and IP
    /// addresses. Default none.
    pub console_hosts: Vec<String>,
    /// `sluice.console.connections.max`: HTTP connections the console serves at once.
    /// Default 64.
    pub console_connections_max: u32,
    /// `sluice.console.session.idle.ms`: how long a console login lasts unused. Default 30
    /// minutes.
    pub console_session_idle_ms: u64,
    /// `sluice.console.sessions.max`: console logins held at once. Default 100.
    pub console_sessions_max: u32,
    /// `sluice.console.session.recheck.ms`: how often a console login in use has its
    /// password checked again. Default 1 minute.
    pub console_session_recheck_ms: u64,
    /// `sluice.console.sessions.per.user.max`: console logins held at once by one user.
    /// Default 5.
    pub console_sessions_per_user_max: u32,
    /// `sluice.metrics.listener`: host:port of the HTTP listener for `/metrics`, `/healthz`
    /// and `/readyz` (docs/operations.md). None (the default) = no such listener.
    pub metrics_listener: Option<String>,
    /// `sluice.metrics.lag.remote.partitions.max`: cluster mode, most partitions owned by
    /// other brokers whose consumer lag one scrape asks their owners for (ListOffsets, and a
    /// Fetch at the committed offset for lag in seconds). Default 1000; 0 = none.
    pub metrics_lag_remote_partitions_max: u32,
    /// `sluice.metrics.lag.remote.cache.ms`: how long the lag of those partitions is reused
    /// by later scrapes before their owners are asked again. Default 5000.
    pub metrics_lag_remote_cache_ms: u32,
    /// The log cleaner (`log.cleaner.*`, docs/compaction.md).
    pub cleaner: CleanerSettings,
    /// `sluice.cluster.*`: the shared-storage cluster on etcd; None = single broker with the
    /// embedded metadata store.
    pub cluster: Option<ClusterSettings>,
    /// `cluster.id` (Sluice extension; Kafka stores it in meta.properties). None = generate.
    pub cluster_id: Option<String>,
    /// Consumer-group limits and timings (`group.*`, `offsets.*`).
    pub groups: GroupSettings,
    /// The transaction coordinator (`transaction.*`).
    pub transactions: TxnSettings,
    /// Client quotas' rate windows (`quota.window.*`, docs/quotas.md).
    pub quotas: QuotaSettings,
    /// Topic-level defaults from the broker's `log.*` / `message.*` / `compression.type` etc.
    pub topic_defaults: TopicConfig,
    /// Every property as given, for DescribeConfigs on the broker resource.
    pub given: BTreeMap<String, String>,
    /// Dynamic broker configs set as the cluster-wide default (`kafka-configs --entity-default`),
    /// as stored in the metadata store; applied on top of `given` ([`BrokerConfig::with_dynamic`]).
    pub dynamic_default: BTreeMap<String, String>,
    /// Dynamic broker configs set for this broker (`--entity-name <node.id>`); they take
    /// precedence over the cluster-wide ones.
    pub dynamic_broker: BTreeMap<String, String>,
    /// Property names that were not recognised (each has been warned about once).
    pub unknown: Vec<String>,
}

/// The authorizer's broker settings (Kafka's StandardAuthorizer names and defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct AuthorizerSettings {
    /// `super.users`: principals (`User:admin`) allowed everything.
    pub super_users: Vec<String>,
    /// `allow.everyone.if.no.acl.found`: allow an action on a resource no ACL names.
    pub allow_everyone_if_no_acl_found: bool,
}

/// The authorizer Sluice serves, under the class name Kafka's brokers are configured with.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

/// The log cleaner's broker settings (Kafka's names and defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct CleanerSettings {
    /// `log.cleaner.enable` (default true).
    pub enable: bool,
    /// `log.cleaner.threads` (default 1).
    pub threads: u16,
    /// `log.cleaner.backoff.ms` (default 15000).
    pub backoff_ms: u64,
    /// `log.cleaner.dedupe.buffer.size` (default 134217728).
    pub dedupe_buffer_size: u64,
    /// `log.cleaner.io.buffer.size` (default 524288).
    pub io_buffer_size: u32,
    /// `log.cleaner.io.buffer.load.factor` (default 0.9).
    pub io_buffer_load_factor: f64,
    /// `log.cleaner.io.max.bytes.per.second` (default Double.MAX_VALUE: unlimited).
    pub io_max_bytes_per_second: f64,
}

/// How client quota rates are measured (Kafka's names and defaults): over `window_num`
/// samples of `window_size_seconds` each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QuotaSettings {
    /// `quota.window.num` (default 11).
    pub window_num: u32,
    /// `quota.window.size.seconds` (default 1).
    pub window_size_seconds: u32,
}

/// How the controller evens out the brokers' bytes in (`sluice.cluster.balance.bytes.*`,
/// docs/cluster.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BytesBalance {
    /// `.enable`: move busy partitions between brokers for bytes in (with
    /// `sluice.cluster.balance.enable`). Default true.
    pub enable: bool,
    /// `.interval.ms`: how often the controller looks (Kafka's
    /// `leader.imbalance.check.interval.seconds`). Default 300000.
    pub interval_ms: u64,
    /// `.window.ms`: the window over which each broker measures its bytes in, and how often
    /// it publishes them. Default 60000.
    pub window_ms: u64,
    /// `.threshold`: a difference between two brokers' bytes in (bytes a second) below which
    /// nothing moves. Default 1048576.
    pub threshold: u64,
    /// `.percent`: nor below this percentage of the busier one's. Default 10 (Kafka's
    /// `leader.imbalance.per.broker.percentage`).
    pub percent: u64,
}

/// Cluster mode (`sluice.cluster.*`, docs/cluster.md).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterSettings {
    /// `sluice.cluster.etcd.endpoints`: each etcd member's client URL.
    pub etcd_endpoints: Vec<EtcdEndpoint>,
    /// `sluice.cluster.etcd.ssl.*`: TLS to etcd; None = plain HTTP.
    pub etcd_tls: Option<EtcdTls>,
    /// `sluice.cluster.etcd.username` and `.password`: etcd's authentication; None = none.
    pub etcd_login: Option<EtcdLogin>,
    /// `sluice.cluster.etcd.prefix`: key prefix of this cluster's records. Default `/sluice`.
    pub etcd_prefix: String,
    /// `sluice.cluster.etcd.timeout.ms`: time limit of one etcd request. Default 2000.
    pub etcd_timeout_ms: u64,
    /// `initial.broker.registration.timeout.ms`: how long a starting broker keeps trying an
    /// etcd that does not answer. Default 60000 (Kafka's).
    pub registration_timeout_ms: u64,
    /// `sluice.cluster.lease.ms`: the broker's etcd lease. Default 3000.
    pub lease_ms: u64,
    /// `sluice.cluster.poll.ms`: how often membership and ownership are read. Default 200.
    pub poll_ms: u64,
    /// `sluice.cluster.full.read.interval.ms`: how often a broker reads every record of the
    /// cluster although the watch kept its view current. Default 60000.
    pub full_read_interval_ms: u64,
    /// `sluice.cluster.balance.enable`: move partitions to even out ownership. Default true.
    pub balance_enable: bool,
    /// `sluice.cluster.death.probe.enable`: revoke the lease of a broker whose listener
    /// refuses connections after it accepted them (its process is gone). Default true.
    pub death_probe_enable: bool,
    /// `sluice.cluster.locality.delay.ms`: how long a broker with direct access to a volume
    /// must have been registered before partitions move back to it for locality. Default
    /// 30000.
    pub locality_delay_ms: u64,
    /// `sluice.cluster.balance.bytes.*`: the controller's moves for bytes in.
    pub balance_bytes: BytesBalance,
    /// `broker.session.timeout.ms`: how long a broker whose lease ended stays in the broker
    /// lists of Metadata and DescribeCluster (Kafka's fencing delay). Default 9000.
    pub broker_session_timeout_ms: u64,
}

impl Default for BrokerConfig {
    /// Kafka's defaults with Sluice's listener, data directory and node id.
    fn default() -> Self {
        // The built-in defaults are valid by construction (tests cover this), so parsing an
        // empty property set cannot fail.
        BrokerConfig::from_properties(BTreeMap::new()).expect("built-in broker defaults are valid")
    }
}

impl BrokerConfig {
    /// Parse a server.properties file. Unknown properties: one `tracing::warn!` each, ignored.
    /// Invalid values: `Err` naming the property.
    pub fn from_file(path: &std::path::Path) -> Result<BrokerConfig, ConfigError> {
        let bytes = std::fs::read(path).map_err(|e| ConfigError::Read {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        BrokerConfig::from_properties(parse_properties(&decode_text(bytes)))
    }

    /// Same, from already-parsed key/value pairs (also used for `--override k=v`).
    pub fn from_properties(props: BTreeMap<String, String>) -> Result<BrokerConfig, ConfigError> {
        broker::build(props)
    }

    /// DescribeConfigs for the broker resource: every known broker config with its value and
    /// source.
    pub fn describe(&self) -> Vec<ConfigEntry> {
        describe::describe(self)
    }

    /// DescribeConfigs for the cluster-wide default broker resource (an empty name): the
    /// dynamic defaults only, as Kafka lists them.
    pub fn describe_dynamic_default(&self) -> Vec<ConfigEntry> {
        dynamic::describe_default(self)
    }

    /// This configuration with these dynamic broker configs (cluster-wide `default`, then
    /// this broker's `broker`, each already validated) applied on the static properties, as
    /// Kafka applies them: a dynamic value overrides the static one of the same name, and
    /// among the names of one setting (`log.retention.ms` over `log.retention.hours`) the
    /// more precise wins wherever it is set. Configs that Sluice does not use are kept for
    /// DescribeConfigs only.
    pub fn with_dynamic(
        &self,
        default: &BTreeMap<String, String>,
        broker: &BTreeMap<String, String>,
    ) -> Result<BrokerConfig, ConfigError> {
        dynamic::apply(self, default, broker)
    }

    /// The TLS settings of each SSL and SASL_SSL listener with this broker's dynamic configs
    /// `broker` applied: a listener's keystore and truststore settings set at run time
    /// (`listener.name.<listener>.ssl.keystore.location` and the others Kafka reconfigures)
    /// override the static ones, name by name; its other settings stay as server.properties
    /// gives them (Kafka takes them at startup only). The stores are not loaded here (a file
    /// is only looked at to tell PEM from PKCS12 when no type is given).
    pub fn listener_tls_with(
        &self,
        broker: &BTreeMap<String, String>,
    ) -> Result<BTreeMap<String, TlsConfig>, ConfigError> {
        dynamic::listener_tls_with(self, broker)
    }

    /// The effective config of a topic with these overrides (same as [`topic_config`]).
    pub fn topic_config(&self, overrides: &BTreeMap<String, String>) -> TopicConfig {
        topic_config(self, overrides)
    }
}

/// Decode a properties file: UTF-8 when valid, else ISO-8859-1 (what Java's
/// `Properties.load(InputStream)` assumes).
fn decode_text(bytes: Vec<u8>) -> String {
    match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => e.into_bytes().iter().map(|&b| char::from(b)).collect(),
    }
}

/// Parse Java `.properties` text (comments `#`/`!`, `key=value`, `key: value`, `key value`,
/// line continuations, escapes).
///
/// Follows `java.util.Properties::load`: values keep trailing whitespace (the config parsers
/// trim it, as Kafka does); a malformed `\uXXXX` escape is kept as written.
pub fn parse_properties(text: &str) -> BTreeMap<String, String> {
    properties::parse(text)
}

/// Split a `--override name=value` argument at its first `=`.
pub fn parse_override(arg: &str) -> Result<(String, String), ConfigError> {
    match arg.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() => {
            Ok((name.trim().to_string(), value.to_string()))
        }
        _ => Err(ConfigError::InvalidValue {
            name: "--override".to_string(),
            value: arg.to_string(),
            reason: "an override must have the form name=value".to_string(),
        }),
    }
}

/// Validate one topic-level config (name known, value parses and is in range).
pub fn validate_topic_config(name: &str, value: &str) -> Result<(), ConfigError> {
    let def = catalog::topic_def(name).ok_or_else(|| ConfigError::UnknownTopicConfig {
        name: name.to_string(),
    })?;
    catalog::parse_value(name, def.ty, def.check, value).map(|_| ())
}

/// Validate a whole set of topic overrides: each one as [`validate_topic_config`] does, then
/// the rules Kafka applies across configs (min.compaction.lag.ms not above
/// max.compaction.lag.ms, no tiered storage since Sluice has none). Use this for CreateTopics
/// and AlterConfigs; `broker` supplies the defaults the overrides combine with.
pub fn validate_topic_configs(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> Result<(), ConfigError> {
    for (name, value) in overrides {
        validate_topic_config(name, value)?;
    }
    let effective = topic_config(broker, overrides);
    if effective.min_compaction_lag_ms > effective.max_compaction_lag_ms {
        let (name, value) = match overrides.get("min.compaction.lag.ms") {
            Some(v) => ("min.compaction.lag.ms", v.clone()),
            None => (
                "max.compaction.lag.ms",
                overrides
                    .get("max.compaction.lag.ms")
                    .cloned()
                    .unwrap_or_default(),
            ),
        };
        return Err(ConfigError::InvalidValue {
            name: name.to_string(),
            value,
            reason: format!(
                "min.compaction.lag.ms ({}) must not be greater than max.compaction.lag.ms ({})",
                effective.min_compaction_lag_ms, effective.max_compaction_lag_ms
            ),
        });
    }
    if effective.remote_storage_enable {
        return Err(ConfigError::InvalidValue {
            name: "remote.storage.enable".to_string(),
            value: overrides
                .get("remote.storage.enable")
                .cloned()
                .unwrap_or_default(),
            reason: "tiered storage is not supported by this broker".to_string(),
        });
    }
    Ok(())
}

/// Names of every topic-level config, sorted.
pub fn topic_config_names() -> impl Iterator<Item = &'static str> {
    catalog::TOPIC_DEFS.iter().map(|d| d.name)
}

/// Broker properties that supply a topic config's default, highest priority first
/// (e.g. `retention.ms` -> `log.retention.ms`, `log.retention.minutes`, `log.retention.hours`).
/// Empty for unknown names and for topic configs without a broker synonym.
pub fn broker_synonyms(topic_config: &str) -> Vec<&'static str> {
    catalog::topic_def(topic_config)
        .map(|d| d.synonyms.iter().map(|s| s.name).collect())
        .unwrap_or_default()
}

/// The effective typed config of a topic: `overrides` (topic-level, already validated) applied
/// on `broker.topic_defaults`.
///
/// An override that is unknown or does not validate is skipped with a warning.
pub fn topic_config(broker: &BrokerConfig, overrides: &BTreeMap<String, String>) -> TopicConfig {
    let mut config = broker.topic_defaults.clone();
    for (name, raw) in overrides {
        let Some(def) = catalog::topic_def(name) else {
            tracing::warn!(config = %name, "ignoring unknown topic config override {name}");
            continue;
        };
        match catalog::parse_value(name, def.ty, def.check, raw) {
            Ok(value) => config.apply(name, value),
            Err(e) => tracing::warn!("ignoring topic config override: {e}"),
        }
    }
    config
}

/// DescribeConfigs for a topic resource: every topic-level config Kafka lists, with value,
/// source and synonyms as Kafka's `ConfigHelper` gives them: the topic's override, then the
/// broker properties supplying its default by source (dynamic for this broker, dynamic
/// cluster-wide default, static, built-in default), with the list starting at the first
/// entry for the config's main broker property (Kafka drops entries before it, so a default
/// supplied by `log.retention.hours` alone shows no synonym and DEFAULT_CONFIG).
pub fn describe_topic(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> Vec<ConfigEntry> {
    let effective = topic_config(broker, overrides);
    catalog::TOPIC_DEFS
        .iter()
        .map(|def| {
            let value = effective.get(def.name);
            let mut synonyms = Vec::new();
            if overrides.contains_key(def.name) {
                synonyms.push(ConfigSynonym {
                    name: def.name.to_string(),
                    value: value.clone(),
                    source: ConfigSource::Topic,
                });
            }
            let names: Vec<&str> = def.synonyms.iter().map(|s| s.name).collect();
            if let Some(first) = names.first() {
                synonyms.extend(dynamic::config_synonyms(broker, first, &names, true));
            }
            ConfigEntry {
                name: def.name.to_string(),
                value,
                source: synonyms.first().map_or(ConfigSource::Default, |s| s.source),
                read_only: false,
                sensitive: false,
                config_type: def.ty.code(),
                documentation: Some(def.doc.to_string()),
                synonyms,
            }
        })
        .collect()
}

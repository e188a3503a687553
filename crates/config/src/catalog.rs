//! The catalogue of known configs: types, defaults, valid ranges and broker synonyms, following
//! Apache Kafka 4.x (`LogConfig`, `ServerTopicConfigSynonyms`, `KafkaConfig`).

use crate::ConfigError;

/// Kafka's `ConfigDef.Type`, with the DescribeConfigs `config_type` code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Type {
    Boolean,
    String,
    Int,
    Long,
    Double,
    List,
    Password,
}

impl Type {
    pub(crate) fn code(self) -> i8 {
        match self {
            Type::Boolean => 1,
            Type::String => 2,
            Type::Int => 3,
            Type::Long => 5,
            Type::Double => 6,
            Type::List => 7,
            Type::Password => 9,
        }
    }
}

/// Validity rule applied after the value parses as its type.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Check {
    None,
    AtLeast(i64),
    Between(i64, i64),
    Ratio,
    OneOf(&'static [&'static str]),
    /// One of these, compared case-insensitively (Kafka's `CaseInsensitiveValidString`).
    OneOfIgnoreCase(&'static [&'static str]),
    /// A non-empty list whose entries are each one of these.
    ListOf(&'static [&'static str]),
    GzipLevel,
    ThrottledReplicas,
    NonEmpty,
    Listeners,
}

/// How a broker synonym's value converts to the topic config's unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Unit {
    Same,
    Minutes,
    Hours,
}

#[derive(Debug)]
pub(crate) struct Synonym {
    pub(crate) name: &'static str,
    pub(crate) unit: Unit,
}

const fn same(name: &'static str) -> Synonym {
    Synonym {
        name,
        unit: Unit::Same,
    }
}

#[derive(Debug)]
pub(crate) struct TopicDef {
    pub(crate) name: &'static str,
    pub(crate) ty: Type,
    /// Kafka's built-in default; `TopicConfig::default()` mirrors it (checked by a test).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) default: &'static str,
    pub(crate) check: Check,
    /// Broker properties supplying the default, highest priority first.
    pub(crate) synonyms: &'static [Synonym],
    pub(crate) doc: &'static str,
}

#[derive(Debug)]
pub(crate) struct BrokerDef {
    pub(crate) name: &'static str,
    pub(crate) ty: Type,
    pub(crate) default: Option<&'static str>,
    pub(crate) check: Check,
    /// Can be changed at run time (`kafka-configs --entity-type brokers --alter`), and Sluice
    /// applies the change without a restart; DescribeConfigs reports `read_only` false. A few
    /// configs Kafka changes at run time are static in Sluice (listeners, max.connections,
    /// log.cleaner.threads, its key-map size and load factor): docs/configuration.md.
    pub(crate) dynamic: bool,
    /// The documentation; for a default of a topic config ([`of_topic`]) what is said after
    /// naming it.
    doc: &'static str,
    /// The topic config whose default this property supplies, when it is one.
    default_of: Option<&'static str>,
}

impl BrokerDef {
    pub(crate) fn doc(&self) -> String {
        match self.default_of {
            Some(topic) => format!("Default for the topic config {topic}{}", self.doc),
            None => self.doc.to_string(),
        }
    }
}

/// `replica.selector.class`: the rack-aware selector (the default: read replicas on).
pub(crate) const RACK_AWARE_SELECTOR: &str =
    "org.apache.kafka.common.replica.RackAwareReplicaSelector";
/// `replica.selector.class`: the leader only (no read replicas).
pub(crate) const LEADER_SELECTOR: &str = "org.apache.kafka.common.replica.LeaderSelector";
const REPLICA_SELECTORS: &[&str] = &[RACK_AWARE_SELECTOR, LEADER_SELECTOR];

pub(crate) const COMPRESSION_TYPES: &[&str] =
    &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];
pub(crate) const TIMESTAMP_TYPES: &[&str] = &["CreateTime", "LogAppendTime"];
pub(crate) const CLEANUP_POLICIES: &[&str] = &["compact", "delete"];

const LONG_MAX: &str = "9223372036854775807";
const INT_MAX: &str = "2147483647";
/// Kafka 4.0 (KIP-1030) raised the minimum segment size to 1 MiB.
pub(crate) const MIN_SEGMENT_BYTES: i64 = 1024 * 1024;

/// Every topic-level config Kafka 4.x defines, sorted by name.
pub(crate) const TOPIC_DEFS: &[TopicDef] = &[
    TopicDef {
        name: "cleanup.policy",
        ty: Type::List,
        default: "delete",
        check: Check::ListOf(CLEANUP_POLICIES),
        synonyms: &[same("log.cleanup.policy")],
        doc: "What happens to old segments: delete removes them once past retention, compact keeps the latest record per key; both may be listed.",
    },
    TopicDef {
        name: "compression.gzip.level",
        ty: Type::Int,
        default: "-1",
        check: Check::GzipLevel,
        synonyms: &[same("compression.gzip.level")],
        doc: "Compression level used when compression.type is gzip.",
    },
    TopicDef {
        name: "compression.lz4.level",
        ty: Type::Int,
        default: "9",
        check: Check::Between(1, 17),
        synonyms: &[same("compression.lz4.level")],
        doc: "Compression level used when compression.type is lz4.",
    },
    TopicDef {
        name: "compression.type",
        ty: Type::String,
        default: "producer",
        check: Check::OneOf(COMPRESSION_TYPES),
        synonyms: &[same("compression.type")],
        doc: "Final compression of the topic's data; producer keeps whatever codec the producer used.",
    },
    TopicDef {
        name: "compression.zstd.level",
        ty: Type::Int,
        default: "3",
        check: Check::Between(-131072, 22),
        synonyms: &[same("compression.zstd.level")],
        doc: "Compression level used when compression.type is zstd.",
    },
    TopicDef {
        name: "delete.retention.ms",
        ty: Type::Long,
        default: "86400000",
        check: Check::AtLeast(0),
        synonyms: &[same("log.cleaner.delete.retention.ms")],
        doc: "How long tombstones are kept on compacted topics.",
    },
    TopicDef {
        name: "file.delete.delay.ms",
        ty: Type::Long,
        default: "60000",
        check: Check::AtLeast(0),
        synonyms: &[same("log.segment.delete.delay.ms")],
        doc: "Accepted for compatibility, no effect: Sluice removes a deleted segment's files as soon as nothing holds them open (NFS-safe deferred deletion, sluice.delete.retry.*), never while a reader does.",
    },
    TopicDef {
        name: "flush.messages",
        ty: Type::Long,
        default: LONG_MAX,
        check: Check::AtLeast(1),
        synonyms: &[same("log.flush.interval.messages")],
        doc: "Force an fsync after this many messages have been appended.",
    },
    TopicDef {
        name: "flush.ms",
        ty: Type::Long,
        default: LONG_MAX,
        check: Check::AtLeast(0),
        synonyms: &[same("log.flush.interval.ms"), same("log.flush.scheduler.interval.ms")],
        doc: "Force an fsync when this long has passed since the last one.",
    },
    TopicDef {
        name: "follower.replication.throttled.replicas",
        ty: Type::List,
        default: "",
        check: Check::ThrottledReplicas,
        synonyms: &[],
        doc: "Replicas whose follower-side replication is throttled, as partition:broker pairs or *.",
    },
    TopicDef {
        name: "index.interval.bytes",
        ty: Type::Int,
        default: "4096",
        check: Check::AtLeast(0),
        synonyms: &[same("log.index.interval.bytes")],
        doc: "Bytes appended between two entries of the offset index.",
    },
    TopicDef {
        name: "leader.replication.throttled.replicas",
        ty: Type::List,
        default: "",
        check: Check::ThrottledReplicas,
        synonyms: &[],
        doc: "Replicas whose leader-side replication is throttled, as partition:broker pairs or *.",
    },
    TopicDef {
        name: "local.retention.bytes",
        ty: Type::Long,
        default: "-2",
        check: Check::AtLeast(-2),
        synonyms: &[same("log.local.retention.bytes")],
        doc: "Local size limit when tiered storage is enabled; -2 means use retention.bytes.",
    },
    TopicDef {
        name: "local.retention.ms",
        ty: Type::Long,
        default: "-2",
        check: Check::AtLeast(-2),
        synonyms: &[same("log.local.retention.ms")],
        doc: "Local time limit when tiered storage is enabled; -2 means use retention.ms.",
    },
    TopicDef {
        name: "max.compaction.lag.ms",
        ty: Type::Long,
        default: LONG_MAX,
        check: Check::AtLeast(1),
        synonyms: &[same("log.cleaner.max.compaction.lag.ms")],
        doc: "Longest time a record may stay uncompacted.",
    },
    TopicDef {
        name: "max.message.bytes",
        ty: Type::Int,
        default: "1048588",
        check: Check::AtLeast(0),
        synonyms: &[same("message.max.bytes")],
        doc: "Largest record batch the topic accepts, in bytes.",
    },
    TopicDef {
        name: "message.downconversion.enable",
        ty: Type::Boolean,
        default: "true",
        check: Check::None,
        synonyms: &[same("log.message.downconversion.enable")],
        doc: "Deprecated and without effect since Kafka 4.0.",
    },
    TopicDef {
        name: "message.timestamp.after.max.ms",
        ty: Type::Long,
        default: "3600000",
        check: Check::AtLeast(0),
        synonyms: &[same("log.message.timestamp.after.max.ms")],
        doc: "With CreateTime, reject batches whose timestamp is further than this in the future.",
    },
    TopicDef {
        name: "message.timestamp.before.max.ms",
        ty: Type::Long,
        default: LONG_MAX,
        check: Check::AtLeast(0),
        synonyms: &[same("log.message.timestamp.before.max.ms")],
        doc: "With CreateTime, reject batches whose timestamp is further than this in the past.",
    },
    TopicDef {
        name: "message.timestamp.type",
        ty: Type::String,
        default: "CreateTime",
        check: Check::OneOf(TIMESTAMP_TYPES),
        synonyms: &[same("log.message.timestamp.type")],
        doc: "Whether record timestamps are the producer's (CreateTime) or the broker's append time (LogAppendTime).",
    },
    TopicDef {
        name: "min.cleanable.dirty.ratio",
        ty: Type::Double,
        default: "0.5",
        check: Check::Ratio,
        synonyms: &[same("log.cleaner.min.cleanable.ratio")],
        doc: "Share of uncompacted log above which compaction runs.",
    },
    TopicDef {
        name: "min.compaction.lag.ms",
        ty: Type::Long,
        default: "0",
        check: Check::AtLeast(0),
        synonyms: &[same("log.cleaner.min.compaction.lag.ms")],
        doc: "Shortest time a record stays uncompacted.",
    },
    TopicDef {
        name: "min.insync.replicas",
        ty: Type::Int,
        default: "1",
        check: Check::AtLeast(1),
        synonyms: &[same("min.insync.replicas")],
        doc: "Replicas that must acknowledge a write made with acks=all.",
    },
    TopicDef {
        name: "preallocate",
        ty: Type::Boolean,
        default: "false",
        check: Check::None,
        synonyms: &[same("log.preallocate")],
        doc: "Preallocate the file of a new segment.",
    },
    TopicDef {
        name: "remote.log.copy.disable",
        ty: Type::Boolean,
        default: "false",
        check: Check::None,
        synonyms: &[],
        doc: "Stop copying segments to tiered storage.",
    },
    TopicDef {
        name: "remote.log.delete.on.disable",
        ty: Type::Boolean,
        default: "false",
        check: Check::None,
        synonyms: &[],
        doc: "Delete tiered data when tiered storage is turned off for the topic.",
    },
    TopicDef {
        name: "remote.storage.enable",
        ty: Type::Boolean,
        default: "false",
        check: Check::None,
        synonyms: &[],
        doc: "Use tiered storage for the topic (not supported by Sluice).",
    },
    TopicDef {
        name: "retention.bytes",
        ty: Type::Long,
        default: "-1",
        check: Check::None,
        synonyms: &[same("log.retention.bytes")],
        doc: "Largest size of a partition before old segments are deleted; -1 means no limit.",
    },
    TopicDef {
        name: "retention.ms",
        ty: Type::Long,
        default: "604800000",
        check: Check::AtLeast(-1),
        synonyms: &[
            same("log.retention.ms"),
            Synonym { name: "log.retention.minutes", unit: Unit::Minutes },
            Synonym { name: "log.retention.hours", unit: Unit::Hours },
        ],
        doc: "How long a segment is kept before deletion; -1 means no limit.",
    },
    TopicDef {
        name: "segment.bytes",
        ty: Type::Int,
        default: "1073741824",
        check: Check::AtLeast(MIN_SEGMENT_BYTES),
        synonyms: &[same("log.segment.bytes")],
        doc: "Size at which a new segment is rolled.",
    },
    TopicDef {
        name: "segment.index.bytes",
        ty: Type::Int,
        default: "10485760",
        check: Check::AtLeast(4),
        synonyms: &[same("log.index.size.max.bytes")],
        doc: "Size of a segment's offset and time indexes.",
    },
    TopicDef {
        name: "segment.jitter.ms",
        ty: Type::Long,
        default: "0",
        check: Check::AtLeast(0),
        synonyms: &[
            same("log.roll.jitter.ms"),
            Synonym { name: "log.roll.jitter.hours", unit: Unit::Hours },
        ],
        doc: "Largest random reduction of segment.ms, to spread segment rolls.",
    },
    TopicDef {
        name: "segment.ms",
        ty: Type::Long,
        default: "604800000",
        check: Check::AtLeast(1),
        synonyms: &[same("log.roll.ms"), Synonym { name: "log.roll.hours", unit: Unit::Hours }],
        doc: "Age at which a new segment is rolled even if the current one is not full.",
    },
    TopicDef {
        name: "unclean.leader.election.enable",
        ty: Type::Boolean,
        default: "false",
        check: Check::None,
        synonyms: &[same("unclean.leader.election.enable")],
        doc: "Allow an out-of-sync replica to become leader.",
    },
];

const fn b(
    name: &'static str,
    ty: Type,
    default: Option<&'static str>,
    check: Check,
    dynamic: bool,
    doc: &'static str,
) -> BrokerDef {
    BrokerDef {
        name,
        ty,
        default,
        check,
        dynamic,
        doc,
        default_of: None,
    }
}

/// A broker property that supplies the default of topic config `topic` (its synonym), changed
/// at run time like it: its type and check are the topic config's, so the two cannot drift
/// apart; `default` is Kafka's broker default (none where another property gives it, as
/// log.roll.hours does log.roll.ms's); `more` ends the doc's sentence.
const fn of_topic(
    name: &'static str,
    topic: &'static str,
    default: Option<&'static str>,
    more: &'static str,
) -> BrokerDef {
    let Some(t) = topic_def(topic) else {
        panic!("of_topic names a topic config TOPIC_DEFS does not have")
    };
    BrokerDef {
        name,
        ty: t.ty,
        default,
        check: t.check,
        dynamic: true,
        doc: more,
        default_of: Some(topic),
    }
}

const fn same_str(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}

/// Every broker property Sluice understands, sorted by name.
pub(crate) const BROKER_DEFS: &[BrokerDef] = &[
    b("add.partitions.to.txn.retry.backoff.max.ms", Type::Int, Some("100"), Check::AtLeast(0), false,
        "How long a partition leader retries adding a partition to a transaction that is still completing its previous one (CONCURRENT_TRANSACTIONS) before answering the producer."),
    b("add.partitions.to.txn.retry.backoff.ms", Type::Int, Some("20"), Check::AtLeast(1), false,
        "The wait between those retries."),
    b("advertised.listeners", Type::String, None, Check::Listeners, false,
        "Listeners given to clients in metadata; defaults to listeners."),
    b("allow.everyone.if.no.acl.found", Type::Boolean, Some("false"), Check::None, false,
        "With an authorizer: allow an action on a resource that no ACL names (a resource some ACL names is decided by the ACLs)."),
    b("authorizer.class.name", Type::String, Some(""), Check::None, false,
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer turns ACLs on; empty (the default): every request is allowed and the ACL APIs answer SECURITY_DISABLED."),
    b("auto.create.topics.enable", Type::Boolean, Some("true"), Check::None, false,
        "Create a topic when a client asks for metadata of one that does not exist."),
    b("broker.id", Type::Int, None, Check::AtLeast(0), false,
        "Older name of node.id."),
    b("broker.rack", Type::String, None, Check::None, false,
        "Rack of the broker: clients get it in Metadata and DescribeCluster, for rack-aware consumer assignment (KIP-881). Each partition's one replica (its owner) is in its owner's rack."),
    b("broker.session.timeout.ms", Type::Int, Some("9000"), Check::AtLeast(0), false,
        "Sluice cluster mode: how long a broker whose lease ended (a killed, paused or cut-off broker) stays in the broker lists of Metadata and DescribeCluster, as a Kafka broker stays until its session times out; its partitions move at once regardless. Clients keep their connection to it meanwhile, and one restarted within this time never leaves their view (librdkafka 2.10+ otherwise drops it, and a transactional send_offsets_to_transaction waiting for it can block for good). 0: left out at once."),
    b("cluster.id", Type::String, None, Check::NonEmpty, false,
        "Cluster id reported to clients (Sluice extension); generated when unset."),
    of_topic("compression.gzip.level", "compression.gzip.level", Some("-1"), "."),
    of_topic("compression.lz4.level", "compression.lz4.level", Some("9"), "."),
    of_topic("compression.type", "compression.type", Some("producer"), "."),
    of_topic("compression.zstd.level", "compression.zstd.level", Some("3"), "."),
    b("connection.failed.authentication.delay.ms", Type::Int, Some("100"), Check::AtLeast(0), false,
        "How long the answer to a failed SASL authentication, and the close that follows, are held back."),
    b("connections.max.idle.ms", Type::Long, Some("600000"), Check::AtLeast(0), false,
        "Close connections idle for longer than this."),
    b("default.replication.factor", Type::Int, Some("1"), Check::Between(1, i16::MAX as i64), false,
        "Replication factor of automatically created topics."),
    b("group.consumer.assignors", Type::List, Some("uniform,range"), Check::ListOf(&["uniform", "range"]), false,
        "Server-side assignors of KIP-848 consumer groups; the first is the default."),
    b("group.consumer.heartbeat.interval.ms", Type::Int, Some("5000"), Check::AtLeast(1), false,
        "Heartbeat interval given to KIP-848 consumer group members."),
    b("group.consumer.max.size", Type::Int, Some(INT_MAX), Check::AtLeast(1), false,
        "Maximum number of members of a KIP-848 consumer group."),
    b("group.consumer.migration.policy", Type::String, Some("bidirectional"),
        Check::OneOfIgnoreCase(&["bidirectional", "upgrade", "downgrade", "disabled"]), false,
        "Which online conversions of a non-empty group between the classic and the consumer protocol are allowed."),
    b("group.consumer.session.timeout.ms", Type::Int, Some("45000"), Check::AtLeast(1), false,
        "Session timeout of KIP-848 consumer group members."),
    b("group.initial.rebalance.delay.ms", Type::Int, Some("3000"), Check::AtLeast(0), false,
        "How long the first rebalance of an empty classic group waits for more members."),
    b("group.max.session.timeout.ms", Type::Int, Some("1800000"), Check::AtLeast(1), false,
        "Largest session timeout a classic group member may ask for."),
    b("group.max.size", Type::Int, Some(INT_MAX), Check::AtLeast(1), false,
        "Maximum number of members of a classic group."),
    b("group.min.session.timeout.ms", Type::Int, Some("6000"), Check::AtLeast(1), false,
        "Smallest session timeout a classic group member may ask for."),
    b("group.share.delivery.count.limit", Type::Int, Some("5"), Check::Between(2, 10), false,
        "Deliveries of a share group's record after which it is archived, not delivered again."),
    b("group.share.heartbeat.interval.ms", Type::Int, Some("5000"), Check::AtLeast(1), false,
        "Heartbeat interval given to share group members."),
    b("group.share.max.share.sessions", Type::Int, Some("2000"), Check::AtLeast(1), false,
        "Most share sessions a broker keeps."),
    b("group.share.max.size", Type::Int, Some("200"), Check::Between(1, 1000), false,
        "Maximum number of members of a share group."),
    b("group.share.partition.max.record.locks", Type::Int, Some("2000"), Check::Between(100, 10000), false,
        "Most records of a share partition in flight (acquired, or not yet done with) at once."),
    b("group.share.record.lock.duration.ms", Type::Int, Some("30000"), Check::Between(1000, 3600000), false,
        "How long a share group's record stays acquired by a consumer before it is delivered again."),
    b("group.share.session.timeout.ms", Type::Int, Some("45000"), Check::AtLeast(1), false,
        "Session timeout of share group members."),
    b("initial.broker.registration.timeout.ms", Type::Long, Some("60000"), Check::AtLeast(1), false,
        "Cluster mode: how long a starting broker keeps trying an etcd that does not answer before it exits."),
    b("inter.broker.listener.name", Type::String, None, Check::NonEmpty, false,
        "The listener brokers reach each other on (cluster mode); unset: the listener named as security.inter.broker.protocol, else the first."),
    b("listener.security.protocol.map", Type::String, Some("PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"), Check::NonEmpty, false,
        "Each listener's security protocol, LISTENER_NAME:PROTOCOL pairs (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)."),
    b("listeners", Type::String, Some("PLAINTEXT://127.0.0.1:9092"), Check::Listeners, false,
        "Addresses the broker listens on, as NAME://host:port, comma separated."),
    b("log.cleaner.backoff.ms", Type::Long, Some("15000"), Check::AtLeast(0), true,
        "How long a log cleaner thread sleeps when no log needs cleaning."),
    b("log.cleaner.dedupe.buffer.size", Type::Long, Some("134217728"), Check::AtLeast(0), false,
        "Memory of the log cleaner's key maps, over all cleaner threads."),
    of_topic("log.cleaner.delete.retention.ms", "delete.retention.ms", Some("86400000"), "."),
    b("log.cleaner.enable", Type::Boolean, Some("true"), Check::None, false,
        "Run the log cleaner (compaction of topics whose cleanup.policy includes compact)."),
    b("log.cleaner.io.buffer.load.factor", Type::Double, Some("0.9"), Check::Ratio, false,
        "How full the log cleaner lets a key map get before it cleans what it holds."),
    b("log.cleaner.io.buffer.size", Type::Int, Some("524288"), Check::AtLeast(0), true,
        "I/O buffer memory of all log cleaner threads."),
    b("log.cleaner.io.max.bytes.per.second", Type::Double, Some("1.7976931348623157E308"), Check::None, true,
        "The log cleaner's limit on bytes read plus written per second, over all its threads."),
    of_topic("log.cleaner.max.compaction.lag.ms", "max.compaction.lag.ms", Some(LONG_MAX), "."),
    of_topic("log.cleaner.min.cleanable.ratio", "min.cleanable.dirty.ratio", Some("0.5"), "."),
    of_topic("log.cleaner.min.compaction.lag.ms", "min.compaction.lag.ms", Some("0"), "."),
    b("log.cleaner.threads", Type::Int, Some("1"), Check::AtLeast(0), false,
        "Number of log cleaner threads."),
    of_topic("log.cleanup.policy", "cleanup.policy", Some("delete"), "."),
    b("log.dir", Type::String, Some("./sluice-data"), Check::NonEmpty, false,
        "Data directory, used when log.dirs is unset."),
    b("log.dirs", Type::String, None, Check::NonEmpty, false,
        "Data directories, comma separated; overrides log.dir."),
    of_topic("log.flush.interval.messages", "flush.messages", Some(LONG_MAX), "."),
    of_topic("log.flush.interval.ms", "flush.ms", None, "; when unset, log.flush.scheduler.interval.ms is used."),
    b("log.flush.offset.checkpoint.interval.ms", Type::Int, Some("60000"), Check::AtLeast(0), false,
        "How often the recovery-point checkpoint is written."),
    b("log.flush.scheduler.interval.ms", Type::Long, Some(LONG_MAX), Check::AtLeast(0), false,
        "Fallback default for the topic config flush.ms."),
    of_topic("log.index.interval.bytes", "index.interval.bytes", Some("4096"), "."),
    of_topic("log.index.size.max.bytes", "segment.index.bytes", Some("10485760"), "."),
    of_topic("log.local.retention.bytes", "local.retention.bytes", Some("-2"), "."),
    of_topic("log.local.retention.ms", "local.retention.ms", Some("-2"), "."),
    of_topic("log.message.downconversion.enable", "message.downconversion.enable", Some("true"), " (no effect)."),
    of_topic("log.message.timestamp.after.max.ms", "message.timestamp.after.max.ms", Some("3600000"), "."),
    of_topic("log.message.timestamp.before.max.ms", "message.timestamp.before.max.ms", Some(LONG_MAX), "."),
    of_topic("log.message.timestamp.type", "message.timestamp.type", Some("CreateTime"), "."),
    of_topic("log.preallocate", "preallocate", Some("false"), "."),
    of_topic("log.retention.bytes", "retention.bytes", Some("-1"), "."),
    b("log.retention.check.interval.ms", Type::Long, Some("300000"), Check::AtLeast(1), false,
        "How often segments are checked for deletion."),
    b("log.retention.hours", Type::Int, Some("168"), Check::None, false,
        "Default retention in hours; log.retention.minutes and log.retention.ms take precedence."),
    b("log.retention.minutes", Type::Int, None, Check::None, false,
        "Default retention in minutes; log.retention.ms takes precedence."),
    // Not of_topic: Kafka checks nothing here (any negative value is no limit), where the
    // topic config refuses values below -1.
    b("log.retention.ms", Type::Long, None, Check::None, true,
        "Default for the topic config retention.ms; any negative value means no limit."),
    b("log.roll.hours", Type::Int, Some("168"), Check::AtLeast(1), false,
        "Default segment age in hours; log.roll.ms takes precedence."),
    b("log.roll.jitter.hours", Type::Int, Some("0"), Check::AtLeast(0), false,
        "Default segment jitter in hours; log.roll.jitter.ms takes precedence."),
    of_topic("log.roll.jitter.ms", "segment.jitter.ms", None, "."),
    of_topic("log.roll.ms", "segment.ms", None, "."),
    of_topic("log.segment.bytes", "segment.bytes", Some("1073741824"), "."),
    of_topic("log.segment.delete.delay.ms", "file.delete.delay.ms", Some("60000"), "."),
    b("max.connections", Type::Int, Some(INT_MAX), Check::AtLeast(0), false,
        "Most client connections accepted at once; at most what the open-files limit leaves after the partition files (sluice.log.open.files.max) and a reserve. While they are open the listeners accept no more."),
    b("max.connections.per.ip", Type::Int, Some(INT_MAX), Check::AtLeast(0), false,
        "Most connections from one IP address; a connection beyond it is closed as soon as it is accepted."),
    b("max.connections.per.ip.overrides", Type::String, Some(""), Check::None, false,
        "Per-IP or per-host exceptions to max.connections.per.ip, as host:count or ip:count, comma separated."),
    of_topic("message.max.bytes", "max.message.bytes", Some("1048588"), "."),
    of_topic("min.insync.replicas", "min.insync.replicas", Some("1"), "."),
    b("node.id", Type::Int, None, Check::AtLeast(0), false,
        "Id of this node; 1 when neither node.id nor broker.id is set."),
    b("num.partitions", Type::Int, Some("1"), Check::AtLeast(1), false,
        "Partition count of automatically created topics."),
    b("num.recovery.threads.per.data.dir", Type::Int, None, Check::AtLeast(1), true,
        "Threads per log directory that open and recover partitions at startup, and in a cluster the partitions of a topic acquired together. Default: the number of CPUs (Kafka's is 1). Set at run time, it applies at the next start, and to acquisitions at once."),
    b("offset.metadata.max.bytes", Type::Int, Some("4096"), Check::AtLeast(0), false,
        "Largest metadata string of a committed offset."),
    b("offsets.retention.check.interval.ms", Type::Long, Some("600000"), Check::AtLeast(1), false,
        "How often committed offsets are checked for expiry."),
    b("offsets.retention.minutes", Type::Int, Some("10080"), Check::AtLeast(1), false,
        "Committed offsets of a group empty this long are deleted."),
    b("offsets.topic.num.partitions", Type::Int, Some("50"), Check::AtLeast(1), false,
        "Partitions of __consumer_offsets (fixed once the topic exists)."),
    b("quota.window.num", Type::Int, Some("11"), Check::AtLeast(1), false,
        "Number of samples kept for client quotas (produce, fetch and request rates)."),
    b("quota.window.size.seconds", Type::Int, Some("1"), Check::AtLeast(1), false,
        "Time span of each client quota sample."),
    b("replica.selector.class", Type::String, Some(RACK_AWARE_SELECTOR), Check::OneOf(REPLICA_SELECTORS), false,
        "Sluice cluster mode: which broker a consumer's fetches go to (KIP-392). org.apache.kafka.common.replica.RackAwareReplicaSelector (the default): a consumer with client.rack reads from a live broker in its rack, which serves the partition straight from the shared volume without owning it (docs/cluster.md, read replicas); the owner when none is, or when the consumer sets no rack. org.apache.kafka.common.replica.LeaderSelector: always the owner, and this broker serves no reads of partitions it does not own."),
    b("security.inter.broker.protocol", Type::String, Some("PLAINTEXT"), Check::NonEmpty, false,
        "Names the inter-broker listener when inter.broker.listener.name is unset (the listener of that name)."),
    b("share.coordinator.state.topic.num.partitions", Type::Int, Some("50"), Check::AtLeast(1), false,
        "Partitions of __share_group_state, fixed when it is created."),
    b("sluice.broker.partitions.max", Type::Long, Some("-1"), Check::AtLeast(-1), false,
        "Sluice: most partitions the broker opens; a topic creation or partition increase past it is refused with POLICY_VIOLATION. -1: derived from sluice.log.open.files.max."),
    b("sluice.broker.storage.nodes", Type::List, None, Check::None, false,
        "Sluice cluster mode: the storage nodes this broker reaches directly (not through the storage cluster's network), as sluice.volume.storage.nodes names them. The controller prefers a broker with direct access to a partition's volume as its owner."),
    b("sluice.cluster.balance.bytes.enable", Type::Boolean, Some("true"), Check::None, false,
        "Sluice cluster mode: the controller moves busy partitions from the broker taking most bytes in to one taking fewer (or swaps one for a quiet partition), never widening how a topic's partitions are spread; needs sluice.cluster.balance.enable."),
    b("sluice.cluster.balance.bytes.interval.ms", Type::Long, Some("300000"), Check::Between(1000, 86400000), false,
        "Sluice cluster mode: how often the controller compares the brokers' bytes in (as Kafka's leader.imbalance.check.interval.seconds); it moves nothing while partitions are moving or some broker has not published its bytes in."),
    b("sluice.cluster.balance.bytes.percent", Type::Long, Some("10"), Check::Between(0, 100), false,
        "Sluice cluster mode: a difference between two brokers' bytes in below this percentage of the busier one's moves nothing (as Kafka's leader.imbalance.per.broker.percentage)."),
    b("sluice.cluster.balance.bytes.threshold", Type::Long, Some("1048576"), Check::AtLeast(0), false,
        "Sluice cluster mode: a difference between two brokers' bytes in, in bytes a second, below which nothing moves; a move is made only if it narrows the difference by at least this much."),
    b("sluice.cluster.balance.bytes.window.ms", Type::Long, Some("60000"), Check::Between(1000, 3600000), false,
        "Sluice cluster mode: each broker measures the bytes appended to its partitions over this window and publishes the rate and its busiest partitions to etcd at its end."),
    b("sluice.cluster.balance.enable", Type::Boolean, Some("true"), Check::None, false,
        "Sluice cluster mode: the controller moves partitions so that every live broker owns a fair share (on a join, after a failover)."),
    b("sluice.cluster.death.probe.enable", Type::Boolean, Some("true"), Check::None, false,
        "Sluice cluster mode: brokers probe each other's listener; a broker whose listener accepted connections and now refuses them has no process any more, and its lease is revoked at once so that its partitions move without waiting for the lease to expire."),
    b("sluice.cluster.etcd.endpoints", Type::String, None, Check::NonEmpty, false,
        "Sluice cluster mode: etcd's client URLs, comma separated, as etcd's tools write them: https://host:port, http://host:port, or host:port (TLS when sluice.cluster.etcd.ssl.truststore.location is set). Unset: a single broker with the embedded metadata store."),
    b("sluice.cluster.etcd.password", Type::Password, None, Check::None, false,
        "Sluice cluster mode: the password of sluice.cluster.etcd.username."),
    b("sluice.cluster.etcd.prefix", Type::String, Some("/sluice"), Check::NonEmpty, false,
        "Sluice cluster mode: the etcd key prefix under which the cluster keeps its records; clusters sharing an etcd need distinct prefixes."),
    b("sluice.cluster.etcd.ssl.keystore.location", Type::String, None, Check::None, false,
        "Sluice cluster mode: a PEM file holding this broker's private key and client certificate chain, presented to an etcd that asks for client certificates (--client-cert-auth)."),
    b("sluice.cluster.etcd.ssl.truststore.location", Type::String, None, Check::None, false,
        "Sluice cluster mode: the CA certificates (PEM) etcd's certificate must chain to; set, the link to etcd is TLS (etcd's --trusted-ca-file)."),
    b("sluice.cluster.etcd.timeout.ms", Type::Int, Some("2000"), Check::Between(100, 60000), false,
        "Sluice cluster mode: time limit of one etcd request."),
    b("sluice.cluster.etcd.username", Type::String, None, Check::None, false,
        "Sluice cluster mode: the etcd user this broker authenticates as when etcd has authentication enabled; the user needs read and write access to the keys under sluice.cluster.etcd.prefix."),
    b("sluice.cluster.full.read.interval.ms", Type::Long, Some("60000"), Check::Between(1000, 3600000), false,
        "Sluice cluster mode: how often a broker reads every record of the cluster from etcd although the etcd watch kept its view current (between, it applies what the watch reports and reads in full only after a change it cannot apply: a broker, the controller, a deletion, a config)."),
    b("sluice.cluster.lease.ms", Type::Int, Some("3000"), Check::Between(2000, 300000), false,
        "Sluice cluster mode: the broker's etcd lease. A broker that cannot renew it for this long is dead to the cluster; it stops acknowledging writes before that (it fences itself)."),
    b("sluice.cluster.locality.delay.ms", Type::Long, Some("30000"), Check::AtLeast(0), false,
        "Sluice cluster mode: how long a broker with direct access to a volume must have been registered before the controller moves partitions of that volume back to it from brokers without direct access (as Kafka delays its preferred leader election)."),
    b("sluice.cluster.poll.ms", Type::Int, Some("200"), Check::Between(20, 10000), false,
        "Sluice cluster mode: how often a broker reads the cluster's membership and ownership records from etcd."),
    b("sluice.console.connections.max", Type::Int, Some("64"), Check::Between(1, 100000), false,
        "Sluice: HTTP connections the web console serves at once; at the limit the next is accepted when one closes."),
    b("sluice.console.hosts", Type::List, Some(""), Check::None, false,
        "Sluice: host names the web console answers to (the Host header) besides localhost and IP addresses; requests naming another host are refused (DNS rebinding)."),
    b("sluice.console.listener", Type::String, None, Check::NonEmpty, false,
        "Sluice: host:port of the HTTP listener serving the web console (docs/console.md). Unset: no console."),
    b("sluice.console.read.only", Type::Boolean, Some("false"), Check::None, false,
        "Sluice: the web console shows the cluster but refuses every action (create, produce, reset, delete)."),
    b("sluice.console.session.idle.ms", Type::Long, Some("1800000"), Check::Between(1000, 604800000), false,
        "Sluice: with SASL on, how long a web console login lasts without a page being loaded; then the console asks for the password again."),
    b("sluice.console.session.recheck.ms", Type::Long, Some("60000"), Check::Between(100, 86400000), false,
        "Sluice: with SASL on, how often a web console login in use has its password checked again by the brokers, on new connections; a changed password or a deleted user ends the login then."),
    b("sluice.console.sessions.max", Type::Int, Some("100"), Check::Between(1, 100000), false,
        "Sluice: with SASL on, web console logins held at once (each keeps a connection to each broker); a login beyond it is refused until one ends."),
    b("sluice.console.sessions.per.user.max", Type::Int, Some("5"), Check::Between(1, 100000), false,
        "Sluice: with SASL on, web console logins held at once by one user; a new login of a user at the limit ends that user's least recently used one."),
    b("sluice.delete.retry.initial.ms", Type::Long, Some("500"), Check::AtLeast(1), false,
        "Sluice: delay before retrying a deletion that could not complete (for example a directory still holding a silly-renamed .nfs*/.fuse_hidden* file); doubled after each failure."),
    b("sluice.delete.retry.max.ms", Type::Long, Some("30000"), Check::AtLeast(1), false,
        "Sluice: upper bound of the delay between retries of a deferred deletion."),
    // No fixed default: an eighth of the broker's memory, at least 1 GiB (memory.rs).
    b("sluice.log.cache.bytes", Type::Long, None, Check::AtLeast(-1), false,
        "Sluice: page cache the broker keeps of its partition logs (drop-behind), split evenly over the open partitions; older data is made durable and advised out of the page cache. Default: an eighth of the memory the broker has (the machine's, or its cgroup's limit when smaller), at least 1 GiB. -1 leaves the page cache to the kernel, as Kafka does."),
    b("sluice.log.cache.min.partition.bytes", Type::Long, Some("8388608"), Check::AtLeast(0), false,
        "Sluice: smallest share of sluice.log.cache.bytes a partition keeps, however many partitions are open."),
    b("sluice.log.open.files.max", Type::Long, Some("-1"), Check::AtLeast(-1), false,
        "Sluice: most partition files (segments' .log, .index, .timeindex) the broker holds open at once; idle ones are closed and opened again when used. -1: half of what the open-files limit leaves after a reserve of 256."),
    b("sluice.log.recovery.point.bytes", Type::Long, Some("8388608"), Check::AtLeast(0), false,
        "Sluice: bytes appended to a partition's active segment after which its recovery point follows the log end (a producer snapshot there, then an fsync of what the write-behind already wrote back), at most once per sluice.log.recovery.point.interval.ms, so that a restart after a crash, or a takeover in a cluster, validates only what was written since. 0 turns it off."),
    b("sluice.log.recovery.point.interval.ms", Type::Long, Some("1000"), Check::AtLeast(1), false,
        "Sluice: how often at most the recovery point of a partition follows its log end (see sluice.log.recovery.point.bytes)."),
    b("sluice.log.unwritten.bytes.max", Type::Long, Some("1073741824"), Check::AtLeast(-1), false,
        "Sluice: data appended but not yet written back, over all of the broker's partition logs, above which produce requests wait for the write-behind before they are appended: producers that outrun the volume see rising latency instead of a stall in the kernel's dirty-page throttle. -1: no limit."),
    b("sluice.log.writeback.bytes", Type::Long, Some("1048576"), Check::AtLeast(-1), false,
        "Sluice: bytes appended to a partition log after which the broker starts their writeback to the volume and waits for it (write-behind), so unwritten data stays small and moving instead of piling up to the kernel's dirty-page thresholds. -1 leaves writeback to the kernel, as Kafka does."),
    b("sluice.metrics.lag.remote.cache.ms", Type::Int, Some("5000"), Check::Between(0, 3600000), false,
        "Sluice cluster mode: how long a scrape's consumer lag of partitions owned by other brokers is reused by later scrapes before the owners are asked again."),
    b("sluice.metrics.lag.remote.partitions.max", Type::Int, Some("1000"), Check::Between(0, 1000000), false,
        "Sluice cluster mode: most partitions owned by other brokers whose consumer lag one scrape of the group coordinator asks their owners for (the others are left out of the lag metrics)."),
    b("sluice.metrics.listener", Type::String, None, Check::NonEmpty, false,
        "Sluice: host:port of the HTTP listener serving /metrics (Prometheus text format), /healthz and /readyz. Unset: no such listener."),
    b("sluice.offsets.snapshot.interval.records", Type::Long, Some("10000"), Check::AtLeast(1), false,
        "Sluice: records appended to a __consumer_offsets partition after which a snapshot of its live records is written and older records are dropped."),
    b("sluice.transaction.version", Type::Int, Some("2"), Check::Between(0, 2), false,
        "Sluice: the finalized transaction.version feature clients see (2: an epoch bump per transaction, KIP-890; 1 or 0: the older form)."),
    b("sluice.volume.storage.nodes", Type::List, None, Check::None, false,
        "Sluice cluster mode: the storage node serving each log dir, as a list of dir:node (the log dir as in log.dirs). A broker listing that node in sluice.broker.storage.nodes has direct access to the log dir's volume."),
    b("sluice.worker.threads", Type::Int, Some("0"), Check::Between(0, 1024), false,
        "Sluice: threads that serve connections and requests; 0 means one per CPU the broker may run on."),
    b("socket.request.max.bytes", Type::Int, Some("104857600"), Check::AtLeast(1), false,
        "Largest request the broker reads, in bytes."),
    b("super.users", Type::String, None, Check::None, false,
        "Principals (User:admin;User:broker, semicolon separated) allowed everything whatever the ACLs say."),
    b("transaction.abort.timed.out.transaction.cleanup.interval.ms", Type::Int, Some("10000"), Check::AtLeast(1), false,
        "How often the transaction coordinator aborts transactions open longer than their timeout."),
    b("transaction.max.timeout.ms", Type::Int, Some("900000"), Check::AtLeast(1), false,
        "Largest transaction.timeout.ms a producer may ask for."),
    b("transaction.remove.expired.transaction.cleanup.interval.ms", Type::Int, Some("3600000"), Check::AtLeast(1), false,
        "How often transactional ids idle for transactional.id.expiration.ms are removed."),
    b("transaction.state.log.num.partitions", Type::Int, Some("50"), Check::AtLeast(1), false,
        "Partitions of __transaction_state (fixed once the topic exists)."),
    b("transactional.id.expiration.ms", Type::Int, Some("604800000"), Check::AtLeast(1), false,
        "A transactional id without a transaction for this long is removed."),
    of_topic("unclean.leader.election.enable", "unclean.leader.election.enable", Some("false"), "."),
];

/// Kafka server properties accepted without a warning but not used by Sluice.
pub(crate) const IGNORED: &[&str] = &[
    "alter.config.policy.class.name",
    "auto.include.jmx.reporter",
    "auto.leader.rebalance.enable",
    "background.threads",
    "broker.heartbeat.interval.ms",
    "controlled.shutdown.enable",
    "controlled.shutdown.max.retries",
    "controlled.shutdown.retry.backoff.ms",
    "controller.listener.names",
    "controller.quorum.bootstrap.servers",
    "controller.quorum.voters",
    "create.topic.policy.class.name",
    "delete.topic.enable",
    "early.start.listeners",
    "fetch.max.bytes",
    "fetch.purgatory.purge.interval.requests",
    "inter.broker.protocol.version",
    "leader.imbalance.check.interval.seconds",
    "leader.imbalance.per.broker.percentage",
    "log.dir.failure.timeout.ms",
    "log.flush.start.offset.checkpoint.interval.ms",
    "log.initial.task.delay.ms",
    "max.connection.creation.rate",
    "max.incremental.fetch.session.cache.slots",
    "max.request.partition.size.limit",
    "metric.reporters",
    "metrics.num.samples",
    "metrics.recording.level",
    "metrics.sample.window.ms",
    "num.io.threads",
    "num.network.threads",
    "num.replica.alter.log.dirs.threads",
    "num.replica.fetchers",
    "principal.builder.class",
    "process.roles",
    "producer.id.expiration.check.interval.ms",
    "producer.id.expiration.ms",
    "producer.purgatory.purge.interval.requests",
    "queued.max.request.bytes",
    "queued.max.requests",
    "request.timeout.ms",
    "reserved.broker.max.id",
    "socket.connection.setup.timeout.max.ms",
    "socket.connection.setup.timeout.ms",
    "socket.listen.backlog.size",
    "socket.receive.buffer.bytes",
    "socket.send.buffer.bytes",
    "unstable.api.versions.enable",
    "unstable.feature.versions.enable",
];

/// Prefixes of Kafka server property families accepted without a warning but not used.
pub(crate) const IGNORED_PREFIXES: &[&str] = &[
    "controller.",
    "delegation.token.",
    "group.",
    "log.cleaner.",
    "metadata.",
    "offsets.",
    "quota.",
    "remote.log.",
    "replica.",
    "share.",
    "transaction.",
    "zookeeper.",
];

/// The topic config named `name` (a `const fn`: [`of_topic`] looks topic configs up while the
/// catalogue is built, at compile time).
pub(crate) const fn topic_def(name: &str) -> Option<&'static TopicDef> {
    let mut i = 0;
    while i < TOPIC_DEFS.len() {
        if same_str(TOPIC_DEFS[i].name, name) {
            return Some(&TOPIC_DEFS[i]);
        }
        i += 1;
    }
    None
}

pub(crate) fn broker_def(name: &str) -> Option<&'static BrokerDef> {
    BROKER_DEFS.iter().find(|d| d.name == name)
}

/// A password: DescribeConfigs shows it as sensitive and without its value, and no message
/// names its value.
pub(crate) fn is_password(name: &str) -> bool {
    broker_def(name).is_some_and(|d| d.ty == Type::Password)
}

pub(crate) fn is_ignored(name: &str) -> bool {
    IGNORED.contains(&name) || IGNORED_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// A parsed config value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Value {
    Bool(bool),
    Int(i64),
    Double(f64),
    Str(String),
    List(Vec<String>),
}

impl Value {
    /// The value as Kafka renders it in DescribeConfigs.
    pub(crate) fn render(&self) -> String {
        match self {
            Value::Bool(v) => v.to_string(),
            Value::Int(v) => v.to_string(),
            Value::Double(v) => render_double(*v),
            Value::Str(v) => v.clone(),
            Value::List(v) => v.join(","),
        }
    }
}

/// Java's `Double.toString` for plain values: always a fractional part.
pub(crate) fn render_double(v: f64) -> String {
    let s = v.to_string();
    if s.contains(['.', 'e', 'E', 'N', 'i']) {
        s
    } else {
        format!("{s}.0")
    }
}

fn invalid(name: &str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::InvalidValue {
        name: name.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

fn join(options: &[&str]) -> String {
    options.join(", ")
}

/// Parse `raw` as a value of type `ty` (trimmed, as Kafka's `ConfigDef` does) and apply `check`.
pub(crate) fn parse_value(
    name: &str,
    ty: Type,
    check: Check,
    raw: &str,
) -> Result<Value, ConfigError> {
    let s = raw.trim();
    let value = match ty {
        Type::Boolean => {
            if s.eq_ignore_ascii_case("true") {
                Value::Bool(true)
            } else if s.eq_ignore_ascii_case("false") {
                Value::Bool(false)
            } else {
                return Err(invalid(name, raw, "the value must be true or false"));
            }
        }
        Type::Int => match s.parse::<i32>() {
            Ok(v) => Value::Int(i64::from(v)),
            Err(_) => {
                return Err(invalid(
                    name,
                    raw,
                    format!(
                        "the value must be a whole number between {} and {}",
                        i32::MIN,
                        i32::MAX
                    ),
                ))
            }
        },
        Type::Long => match s.parse::<i64>() {
            Ok(v) => Value::Int(v),
            Err(_) => {
                return Err(invalid(
                    name,
                    raw,
                    format!(
                        "the value must be a whole number between {} and {}",
                        i64::MIN,
                        i64::MAX
                    ),
                ))
            }
        },
        Type::Double => match s.parse::<f64>() {
            Ok(v) if v.is_finite() => Value::Double(v),
            _ => {
                return Err(invalid(
                    name,
                    raw,
                    "the value must be a finite decimal number",
                ))
            }
        },
        Type::String | Type::Password => Value::Str(s.to_string()),
        Type::List => {
            if s.is_empty() {
                Value::List(Vec::new())
            } else {
                Value::List(s.split(',').map(|e| e.trim().to_string()).collect())
            }
        }
    };
    check_value(name, raw, check, &value)?;
    Ok(value)
}

fn check_value(name: &str, raw: &str, check: Check, value: &Value) -> Result<(), ConfigError> {
    match (check, value) {
        (Check::None | Check::Listeners, _) => Ok(()),
        (Check::AtLeast(min), Value::Int(v)) => {
            if *v < min {
                Err(invalid(
                    name,
                    raw,
                    format!("the value must be at least {min}"),
                ))
            } else {
                Ok(())
            }
        }
        (Check::Between(lo, hi), Value::Int(v)) => {
            if *v < lo || *v > hi {
                Err(invalid(
                    name,
                    raw,
                    format!("the value must be between {lo} and {hi}"),
                ))
            } else {
                Ok(())
            }
        }
        (Check::Ratio, Value::Double(v)) => {
            if !(0.0..=1.0).contains(v) {
                Err(invalid(name, raw, "the value must be between 0 and 1"))
            } else {
                Ok(())
            }
        }
        (Check::GzipLevel, Value::Int(v)) => {
            if *v == -1 || (1..=9).contains(v) {
                Ok(())
            } else {
                Err(invalid(
                    name,
                    raw,
                    "the value must be between 1 and 9, or -1 for the codec's default",
                ))
            }
        }
        (Check::OneOfIgnoreCase(options), Value::Str(v)) => {
            if options.iter().any(|o| o.eq_ignore_ascii_case(v)) {
                Ok(())
            } else {
                Err(invalid(
                    name,
                    raw,
                    format!("the value must be one of {}", join(options)),
                ))
            }
        }
        (Check::OneOf(options), Value::Str(v)) => {
            if options.contains(&v.as_str()) {
                Ok(())
            } else {
                Err(invalid(
                    name,
                    raw,
                    format!("the value must be one of {}", join(options)),
                ))
            }
        }
        (Check::ListOf(options), Value::List(items)) => {
            if items.is_empty() {
                return Err(invalid(
                    name,
                    raw,
                    format!("the value must list at least one of {}", join(options)),
                ));
            }
            match items.iter().find(|i| !options.contains(&i.as_str())) {
                Some(bad) => Err(invalid(
                    name,
                    raw,
                    format!(
                        "{bad:?} is not valid; each entry must be one of {}",
                        join(options)
                    ),
                )),
                None => Ok(()),
            }
        }
        (Check::ThrottledReplicas, Value::List(items)) => {
            let wildcard = items.len() == 1 && items[0] == "*";
            let pairs = items.iter().all(|i| i.is_empty() || is_replica_pair(i));
            if wildcard || pairs {
                Ok(())
            } else {
                Err(invalid(
                    name,
                    raw,
                    "the value must be * or a comma-separated list of partition:broker pairs such as 0:101,1:102",
                ))
            }
        }
        (Check::NonEmpty, Value::Str(v)) => {
            if v.is_empty() {
                Err(invalid(name, raw, "the value must not be empty"))
            } else {
                Ok(())
            }
        }
        // A check paired with a type it does not apply to: nothing to enforce.
        _ => Ok(()),
    }
}

fn is_replica_pair(s: &str) -> bool {
    match s.split_once(':') {
        Some((p, b)) => {
            !p.is_empty()
                && !b.is_empty()
                && p.bytes().all(|c| c.is_ascii_digit())
                && b.bytes().all(|c| c.is_ascii_digit())
        }
        None => false,
    }
}

/// Convert a broker synonym's value to the topic config's unit. Retention given at broker
/// level follows Kafka: any negative result means unlimited (-1).
pub(crate) fn convert_synonym(topic: &str, unit: Unit, value: Value) -> Value {
    match value {
        Value::Int(v) => {
            let ms = match unit {
                Unit::Same => v,
                Unit::Minutes => v.saturating_mul(60_000),
                Unit::Hours => v.saturating_mul(3_600_000),
            };
            if topic == "retention.ms" && ms < 0 {
                Value::Int(-1)
            } else {
                Value::Int(ms)
            }
        }
        other => other,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::TopicConfig;

    #[test]
    fn a_broker_default_of_a_topic_config_is_one_of_its_synonyms() {
        let mut n = 0;
        for def in BROKER_DEFS {
            if let Some(topic) = def.default_of {
                let t = topic_def(topic).unwrap();
                assert!(
                    t.synonyms.iter().any(|s| s.name == def.name),
                    "{} is the default of {topic}, which does not name it",
                    def.name
                );
                assert!(def.dynamic, "{}", def.name);
                n += 1;
            }
        }
        assert!(n > 0);
    }

    #[test]
    fn tables_are_sorted_and_unique() {
        for w in TOPIC_DEFS.windows(2) {
            assert!(w[0].name < w[1].name, "{} / {}", w[0].name, w[1].name);
        }
        for w in BROKER_DEFS.windows(2) {
            assert!(w[0].name < w[1].name, "{} / {}", w[0].name, w[1].name);
        }
        for name in IGNORED {
            assert!(
                broker_def(name).is_none(),
                "{name} is both used and ignored"
            );
        }
    }

    #[test]
    fn defaults_are_valid_and_mirrored_by_topic_config_default() {
        let defaults = TopicConfig::default();
        for def in TOPIC_DEFS {
            let v = parse_value(def.name, def.ty, def.check, def.default)
                .unwrap_or_else(|e| panic!("default of {}: {e}", def.name));
            assert_eq!(defaults.get(def.name), Some(v.render()), "{}", def.name);
            // Applying the default changes nothing.
            let mut c = TopicConfig::default();
            c.apply(def.name, v);
            assert_eq!(c, defaults, "{}", def.name);
        }
        for def in BROKER_DEFS {
            if let Some(d) = def.default {
                parse_value(def.name, def.ty, def.check, d)
                    .unwrap_or_else(|e| panic!("default of {}: {e}", def.name));
            }
        }
    }

    #[test]
    fn every_synonym_is_a_broker_config_with_the_topic_default() {
        for def in TOPIC_DEFS {
            for syn in def.synonyms {
                let b = broker_def(syn.name).unwrap_or_else(|| panic!("{} missing", syn.name));
                if let Some(d) = b.default {
                    let v = parse_value(b.name, b.ty, b.check, d).unwrap();
                    let converted = convert_synonym(def.name, syn.unit, v);
                    let topic_default =
                        parse_value(def.name, def.ty, def.check, def.default).unwrap();
                    assert_eq!(converted, topic_default, "{} vs {}", b.name, def.name);
                }
            }
        }
    }

    #[test]
    fn double_rendering_matches_java() {
        assert_eq!(render_double(0.5), "0.5");
        assert_eq!(render_double(1.0), "1.0");
        assert_eq!(render_double(0.0), "0.0");
    }
}

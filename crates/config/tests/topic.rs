#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use sluice_config::{
    broker_synonyms, describe_topic, topic_config, topic_config_names, validate_topic_config,
    validate_topic_configs, BrokerConfig, ConfigError, ConfigSource, TimestampType, TopicConfig,
};

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn validate_accepts_kafka_values() {
    let ok: &[(&str, &str)] = &[
        ("segment.bytes", "1048576"),
        ("segment.ms", "1"),
        ("retention.ms", "-1"),
        ("retention.bytes", "-1"),
        ("retention.bytes", "-5"),
        ("index.interval.bytes", "0"),
        ("segment.index.bytes", "4"),
        ("max.message.bytes", "0"),
        ("message.timestamp.type", "LogAppendTime"),
        ("compression.type", "uncompressed"),
        ("compression.gzip.level", "-1"),
        ("compression.gzip.level", "9"),
        ("compression.lz4.level", "17"),
        ("compression.zstd.level", "-131072"),
        ("cleanup.policy", "compact"),
        ("cleanup.policy", "compact,delete"),
        ("cleanup.policy", "delete , compact"),
        ("flush.messages", "1"),
        ("flush.ms", "0"),
        ("min.insync.replicas", "2"),
        ("unclean.leader.election.enable", "True"),
        ("min.compaction.lag.ms", "0"),
        ("max.compaction.lag.ms", "1"),
        ("delete.retention.ms", "0"),
        ("file.delete.delay.ms", "0"),
        ("min.cleanable.dirty.ratio", "0"),
        ("min.cleanable.dirty.ratio", "1"),
        ("preallocate", "false"),
        ("segment.jitter.ms", "0"),
        ("message.downconversion.enable", "false"),
        ("local.retention.ms", "-2"),
        ("local.retention.bytes", "-2"),
        ("remote.storage.enable", "false"),
        ("remote.log.copy.disable", "true"),
        ("remote.log.delete.on.disable", "true"),
        ("message.timestamp.before.max.ms", "0"),
        ("message.timestamp.after.max.ms", "9223372036854775807"),
        ("leader.replication.throttled.replicas", ""),
        ("leader.replication.throttled.replicas", "*"),
        ("follower.replication.throttled.replicas", "0:101, 1:102"),
    ];
    for (name, value) in ok {
        validate_topic_config(name, value).unwrap_or_else(|e| panic!("{name}={value}: {e}"));
    }
}

#[test]
fn validate_rejects_bad_values() {
    let bad: &[(&str, &str)] = &[
        ("segment.bytes", "1048575"),
        ("segment.bytes", "2147483648"),
        ("segment.ms", "0"),
        ("retention.ms", "-2"),
        ("retention.ms", "1h"),
        ("index.interval.bytes", "-1"),
        ("segment.index.bytes", "3"),
        ("max.message.bytes", "-1"),
        ("message.timestamp.type", "logappendtime"),
        ("compression.type", "none"),
        ("compression.gzip.level", "10"),
        ("compression.gzip.level", "0"),
        ("compression.lz4.level", "0"),
        ("compression.zstd.level", "23"),
        ("cleanup.policy", ""),
        ("cleanup.policy", "compact,"),
        ("cleanup.policy", "remove"),
        ("flush.messages", "0"),
        ("flush.ms", "-1"),
        ("min.insync.replicas", "0"),
        ("unclean.leader.election.enable", "1"),
        ("max.compaction.lag.ms", "0"),
        ("min.cleanable.dirty.ratio", "1.01"),
        ("min.cleanable.dirty.ratio", "NaN"),
        ("local.retention.ms", "-3"),
        ("leader.replication.throttled.replicas", "*,0:1"),
        ("leader.replication.throttled.replicas", "0-1"),
    ];
    for (name, value) in bad {
        match validate_topic_config(name, value) {
            Err(ConfigError::InvalidValue {
                name: n, value: v, ..
            }) => {
                assert_eq!(&n, name);
                assert_eq!(&v, value);
            }
            other => panic!("{name}={value}: expected InvalidValue, got {other:?}"),
        }
        let msg = validate_topic_config(name, value).unwrap_err().to_string();
        assert!(msg.contains(name), "{msg}");
    }
}

#[test]
fn validate_rejects_unknown_names() {
    for name in [
        "retention.hours",
        "log.retention.ms",
        "message.format.version",
        "message.timestamp.difference.max.ms",
        "",
    ] {
        match validate_topic_config(name, "1") {
            Err(ConfigError::UnknownTopicConfig { name: n }) => assert_eq!(n, name),
            other => panic!("{name}: {other:?}"),
        }
    }
}

#[test]
fn validate_across_configs() {
    let broker = BrokerConfig::default();
    validate_topic_configs(
        &broker,
        &map(&[("retention.ms", "1000"), ("cleanup.policy", "compact")]),
    )
    .unwrap();
    let err = validate_topic_configs(
        &broker,
        &map(&[
            ("min.compaction.lag.ms", "100"),
            ("max.compaction.lag.ms", "10"),
        ]),
    )
    .unwrap_err();
    assert!(
        matches!(&err, ConfigError::InvalidValue { name, .. } if name == "min.compaction.lag.ms"),
        "{err:?}"
    );
    let err =
        validate_topic_configs(&broker, &map(&[("remote.storage.enable", "true")])).unwrap_err();
    assert!(err.to_string().contains("remote.storage.enable"));
    let err = validate_topic_configs(&broker, &map(&[("bogus", "1")])).unwrap_err();
    assert!(matches!(err, ConfigError::UnknownTopicConfig { .. }));
}

#[test]
fn overrides_apply_on_broker_defaults() {
    let broker = BrokerConfig::from_properties(map(&[
        ("log.retention.hours", "24"),
        ("log.segment.bytes", "2097152"),
        ("compression.type", "lz4"),
    ]))
    .unwrap();
    let t = topic_config(&broker, &BTreeMap::new());
    assert_eq!(t.retention_ms, 86_400_000);
    assert_eq!(t.segment_bytes, 2_097_152);
    assert_eq!(t.compression_type, "lz4");

    let t = topic_config(
        &broker,
        &map(&[
            ("retention.ms", "1000"),
            ("segment.ms", "60000"),
            ("message.timestamp.type", "LogAppendTime"),
            ("cleanup.policy", "compact"),
            ("max.message.bytes", "5000"),
            ("flush.messages", "1"),
        ]),
    );
    assert_eq!(t.retention_ms, 1000);
    assert_eq!(t.segment_ms, 60_000);
    assert_eq!(t.segment_bytes, 2_097_152, "broker default kept");
    assert_eq!(t.timestamp_type, TimestampType::LogAppendTime);
    assert_eq!(t.cleanup_policy, "compact");
    assert!(t.compacts() && !t.deletes());
    assert_eq!(t.max_message_bytes, 5000);
    assert_eq!(t.flush_messages, 1);
    assert_eq!(broker.topic_config(&BTreeMap::new()), broker.topic_defaults);

    // Invalid or unknown overrides are skipped.
    let t = topic_config(&broker, &map(&[("retention.ms", "soon"), ("bogus", "1")]));
    assert_eq!(t.retention_ms, 86_400_000);
}

#[test]
fn topic_defaults_set_in_code_are_used() {
    let mut broker = BrokerConfig::default();
    broker.topic_defaults.segment_bytes = 4096;
    assert_eq!(topic_config(&broker, &BTreeMap::new()).segment_bytes, 4096);
    let entries = describe_topic(&broker, &BTreeMap::new());
    let e = entries.iter().find(|e| e.name == "segment.bytes").unwrap();
    assert_eq!(e.value.as_deref(), Some("4096"));
}

#[test]
fn describe_topic_sources_and_values() {
    let broker = BrokerConfig::from_properties(map(&[
        ("log.retention.minutes", "10"),
        ("message.max.bytes", "2000000"),
        ("log.flush.scheduler.interval.ms", "3000"),
    ]))
    .unwrap();
    let entries = describe_topic(
        &broker,
        &map(&[
            ("segment.bytes", "2097152"),
            ("cleanup.policy", "delete,compact"),
        ]),
    );
    let names: Vec<&str> = entries.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, topic_config_names().collect::<Vec<_>>());
    assert_eq!(entries.len(), 34);
    let get = |n: &str| entries.iter().find(|e| e.name == n).unwrap().clone();

    let e = get("segment.bytes");
    assert_eq!(
        (e.value.as_deref(), e.source),
        (Some("2097152"), ConfigSource::Topic)
    );
    assert_eq!(e.config_type, 3);
    let e = get("cleanup.policy");
    assert_eq!(
        (e.value.as_deref(), e.source),
        (Some("compact,delete"), ConfigSource::Topic)
    );
    assert_eq!(e.config_type, 7);
    // Set by log.retention.minutes alone: Kafka's synonym list starts at log.retention.ms,
    // so it lists nothing and reports DEFAULT_CONFIG (ConfigHelper.configSynonyms).
    let e = get("retention.ms");
    assert_eq!(
        (e.value.as_deref(), e.source),
        (Some("600000"), ConfigSource::Default)
    );
    assert!(e.synonyms.is_empty());
    assert_eq!(e.config_type, 5);
    let e = get("max.message.bytes");
    assert_eq!(
        (e.value.as_deref(), e.source),
        (Some("2000000"), ConfigSource::StaticBroker)
    );
    assert_eq!(e.synonyms.len(), 2, "static then default: {:?}", e.synonyms);
    let e = get("flush.ms");
    assert_eq!(
        (e.value.as_deref(), e.source),
        (Some("3000"), ConfigSource::Default)
    );
    let e = get("segment.bytes");
    let names: Vec<(&str, ConfigSource)> = e
        .synonyms
        .iter()
        .map(|s| (s.name.as_str(), s.source))
        .collect();
    assert_eq!(
        names,
        vec![
            ("segment.bytes", ConfigSource::Topic),
            ("log.segment.bytes", ConfigSource::Default)
        ]
    );
    let e = get("segment.ms");
    assert_eq!(
        (e.value.as_deref(), e.source),
        (Some("604800000"), ConfigSource::Default)
    );
    let e = get("min.cleanable.dirty.ratio");
    assert_eq!((e.value.as_deref(), e.config_type), (Some("0.5"), 6));
    let e = get("unclean.leader.election.enable");
    assert_eq!((e.value.as_deref(), e.config_type), (Some("false"), 1));
    let e = get("message.timestamp.type");
    assert_eq!((e.value.as_deref(), e.config_type), (Some("CreateTime"), 2));
    let e = get("leader.replication.throttled.replicas");
    assert_eq!(
        (e.value.as_deref(), e.source),
        (Some(""), ConfigSource::Default)
    );
    assert!(entries
        .iter()
        .all(|e| !e.read_only && !e.sensitive && e.documentation.is_some()));
    assert_eq!(ConfigSource::Topic.code(), 1);
    assert_eq!(ConfigSource::Default.code(), 5);
}

#[test]
fn synonyms() {
    assert_eq!(
        broker_synonyms("retention.ms"),
        vec![
            "log.retention.ms",
            "log.retention.minutes",
            "log.retention.hours"
        ]
    );
    assert_eq!(
        broker_synonyms("segment.ms"),
        vec!["log.roll.ms", "log.roll.hours"]
    );
    assert_eq!(
        broker_synonyms("max.message.bytes"),
        vec!["message.max.bytes"]
    );
    assert_eq!(
        broker_synonyms("segment.index.bytes"),
        vec!["log.index.size.max.bytes"]
    );
    assert!(broker_synonyms("remote.storage.enable").is_empty());
    assert!(broker_synonyms("nope").is_empty());
}

#[test]
fn topic_config_get() {
    let t = TopicConfig::default();
    assert_eq!(t.get("retention.ms").as_deref(), Some("604800000"));
    assert_eq!(t.get("flush.ms").as_deref(), Some("9223372036854775807"));
    assert_eq!(t.get("nope"), None);
}

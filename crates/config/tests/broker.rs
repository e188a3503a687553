#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;

use sluice_config::{
    parse_listeners, parse_override, BrokerConfig, ConfigError, ConfigSource, Listener,
    TimestampType,
};

fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn build(pairs: &[(&str, &str)]) -> BrokerConfig {
    BrokerConfig::from_properties(props(pairs)).unwrap()
}

fn build_err(pairs: &[(&str, &str)]) -> (String, String, String) {
    match BrokerConfig::from_properties(props(pairs)) {
        Err(ConfigError::InvalidValue {
            name,
            value,
            reason,
        }) => (name, value, reason),
        other => panic!("expected InvalidValue, got {other:?}"),
    }
}

fn listener(name: &str, host: &str, port: u16) -> Listener {
    Listener {
        name: name.into(),
        host: host.into(),
        port,
    }
}

#[test]
fn defaults() {
    let c = BrokerConfig::default();
    assert_eq!(c.node_id, 1);
    assert_eq!(c.listeners, vec![listener("PLAINTEXT", "127.0.0.1", 9092)]);
    assert_eq!(c.advertised_listeners, c.listeners);
    assert_eq!(c.log_dirs, vec![PathBuf::from("./sluice-data")]);
    assert_eq!(c.num_partitions, 1);
    assert_eq!(c.default_replication_factor, 1);
    assert!(c.auto_create_topics_enable);
    assert_eq!(c.message_max_bytes, 1_048_588);
    assert_eq!(c.socket_request_max_bytes, 104_857_600);
    assert_eq!(c.log_retention_check_interval_ms, 300_000);
    assert_eq!(c.log_flush_offset_checkpoint_interval_ms, 60_000);
    assert_eq!(c.max_connections, 2_147_483_647);
    assert_eq!(c.connections_max_idle_ms, 600_000);
    assert_eq!(c.cluster_id, None);
    assert!(c.given.is_empty());
    assert!(c.unknown.is_empty());

    let t = &c.topic_defaults;
    assert_eq!(t.segment_bytes, 1_073_741_824);
    assert_eq!(t.segment_ms, 168 * 3_600_000);
    assert_eq!(t.retention_ms, 168 * 3_600_000);
    assert_eq!(t.retention_bytes, -1);
    assert_eq!(t.index_interval_bytes, 4096);
    assert_eq!(t.segment_index_bytes, 10_485_760);
    assert_eq!(t.max_message_bytes, 1_048_588);
    assert_eq!(t.timestamp_type, TimestampType::CreateTime);
    assert_eq!(t.compression_type, "producer");
    assert_eq!(t.cleanup_policy, "delete");
    assert_eq!(t.flush_messages, i64::MAX);
    assert_eq!(t.flush_ms, i64::MAX);
    assert_eq!(t.message_timestamp_after_max_ms, 3_600_000);
    assert_eq!(t.message_timestamp_before_max_ms, i64::MAX);
    assert!(t.deletes() && !t.compacts());
}

#[test]
fn values_are_read() {
    let c = build(&[
        ("num.partitions", " 3 "),
        ("default.replication.factor", "2"),
        ("auto.create.topics.enable", "FALSE"),
        ("message.max.bytes", "2000000"),
        ("socket.request.max.bytes", "1000"),
        ("log.retention.check.interval.ms", "1000"),
        ("log.flush.offset.checkpoint.interval.ms", "0"),
        ("max.connections", "100"),
        ("connections.max.idle.ms", "5000"),
        ("cluster.id", "MkU3OEVBNTcwNTJENDM2Qk"),
        ("log.segment.bytes", "1048576"),
        ("log.retention.bytes", "123456789"),
        ("log.index.interval.bytes", "100"),
        ("log.index.size.max.bytes", "1024"),
        ("log.flush.interval.messages", "10"),
        ("log.flush.interval.ms", "1000"),
        ("log.message.timestamp.type", "LogAppendTime"),
        ("compression.type", "zstd"),
        ("log.cleanup.policy", "delete, compact"),
    ]);
    assert_eq!(c.num_partitions, 3);
    assert_eq!(c.default_replication_factor, 2);
    assert!(!c.auto_create_topics_enable);
    assert_eq!(c.message_max_bytes, 2_000_000);
    assert_eq!(c.socket_request_max_bytes, 1000);
    assert_eq!(c.log_retention_check_interval_ms, 1000);
    assert_eq!(c.log_flush_offset_checkpoint_interval_ms, 0);
    assert_eq!(c.max_connections, 100);
    assert_eq!(c.connections_max_idle_ms, 5000);
    assert_eq!(c.cluster_id.as_deref(), Some("MkU3OEVBNTcwNTJENDM2Qk"));
    let t = &c.topic_defaults;
    assert_eq!(t.segment_bytes, 1_048_576);
    assert_eq!(t.retention_bytes, 123_456_789);
    assert_eq!(t.index_interval_bytes, 100);
    assert_eq!(t.segment_index_bytes, 1024);
    assert_eq!(t.max_message_bytes, 2_000_000);
    assert_eq!(t.flush_messages, 10);
    assert_eq!(t.flush_ms, 1000);
    assert_eq!(t.timestamp_type, TimestampType::LogAppendTime);
    assert_eq!(t.compression_type, "zstd");
    assert_eq!(t.cleanup_policy, "compact,delete");
    assert!(t.compacts() && t.deletes());
}

#[test]
fn retention_precedence_ms_over_minutes_over_hours() {
    let c = build(&[("log.retention.hours", "1")]);
    assert_eq!(c.topic_defaults.retention_ms, 3_600_000);
    let c = build(&[("log.retention.hours", "1"), ("log.retention.minutes", "2")]);
    assert_eq!(c.topic_defaults.retention_ms, 120_000);
    let c = build(&[
        ("log.retention.hours", "1"),
        ("log.retention.minutes", "2"),
        ("log.retention.ms", "5"),
    ]);
    assert_eq!(c.topic_defaults.retention_ms, 5);
    // Any negative value means unlimited, whatever the unit.
    assert_eq!(
        build(&[("log.retention.ms", "-1")])
            .topic_defaults
            .retention_ms,
        -1
    );
    assert_eq!(
        build(&[("log.retention.hours", "-5")])
            .topic_defaults
            .retention_ms,
        -1
    );
    assert_eq!(
        build(&[
            ("log.retention.minutes", "-1"),
            ("log.retention.hours", "3")
        ])
        .topic_defaults
        .retention_ms,
        -1
    );
}

#[test]
fn roll_precedence_ms_over_hours() {
    assert_eq!(
        build(&[("log.roll.hours", "2")]).topic_defaults.segment_ms,
        7_200_000
    );
    assert_eq!(
        build(&[("log.roll.hours", "2"), ("log.roll.ms", "1000")])
            .topic_defaults
            .segment_ms,
        1000
    );
    assert_eq!(
        build(&[("log.roll.jitter.hours", "1")])
            .topic_defaults
            .segment_jitter_ms,
        3_600_000
    );
}

#[test]
fn flush_ms_falls_back_to_scheduler_interval() {
    assert_eq!(
        build(&[("log.flush.scheduler.interval.ms", "500")])
            .topic_defaults
            .flush_ms,
        500
    );
    assert_eq!(
        build(&[
            ("log.flush.scheduler.interval.ms", "500"),
            ("log.flush.interval.ms", "7")
        ])
        .topic_defaults
        .flush_ms,
        7
    );
}

#[test]
fn node_id_and_broker_id() {
    assert_eq!(build(&[("node.id", "7")]).node_id, 7);
    assert_eq!(build(&[("broker.id", "8")]).node_id, 8);
    assert_eq!(build(&[("broker.id", "9"), ("node.id", "9")]).node_id, 9);
    let (name, value, reason) = build_err(&[("broker.id", "2"), ("node.id", "3")]);
    assert_eq!(name, "broker.id");
    assert_eq!(value, "2");
    assert!(reason.contains("node.id"), "{reason}");
    assert_eq!(build_err(&[("node.id", "-1")]).0, "node.id");
}

#[test]
fn invalid_values_name_the_property() {
    let cases: &[(&str, &str)] = &[
        ("num.partitions", "zero"),
        ("num.partitions", "0"),
        ("num.partitions", "3000000000"),
        ("default.replication.factor", "40000"),
        ("auto.create.topics.enable", "yes"),
        ("message.max.bytes", "-1"),
        ("socket.request.max.bytes", "0"),
        ("log.segment.bytes", "1048575"),
        ("log.roll.hours", "0"),
        ("log.roll.ms", "0"),
        ("log.retention.hours", "1.5"),
        ("log.retention.ms", "forever"),
        ("log.index.size.max.bytes", "3"),
        ("log.flush.interval.messages", "0"),
        ("log.message.timestamp.type", "createtime"),
        ("compression.type", "brotli"),
        ("log.cleanup.policy", "archive"),
        ("log.cleanup.policy", ""),
        ("compression.gzip.level", "0"),
        ("compression.zstd.level", "23"),
        ("log.cleaner.min.cleanable.ratio", "1.5"),
        ("max.connections", "-1"),
        ("cluster.id", "  "),
        ("listeners", "localhost:9092"),
        ("listeners", "PLAINTEXT://localhost:port"),
        ("listeners", "PLAINTEXT://localhost:70000"),
        ("listeners", ""),
        ("advertised.listeners", "PLAINTEXT://0.0.0.0:9092"),
        ("log.dirs", " , "),
    ];
    for (prop, value) in cases {
        let (name, got_value, reason) = build_err(&[(prop, value)]);
        assert_eq!(&name, prop, "{prop}={value}: {reason}");
        assert_eq!(&got_value, value);
        let message = BrokerConfig::from_properties(props(&[(prop, value)]))
            .unwrap_err()
            .to_string();
        assert!(message.contains(prop), "{message}");
    }
}

#[test]
fn unknown_properties_are_recorded_and_ignored() {
    let c = build(&[
        ("num.partitions", "2"),
        ("no.such.thing", "1"),
        ("another.unknown", "x"),
    ]);
    assert_eq!(c.num_partitions, 2);
    assert_eq!(
        c.unknown,
        vec!["another.unknown".to_string(), "no.such.thing".to_string()]
    );
    assert_eq!(c.given.len(), 3);
}

#[test]
fn kafka_server_properties_are_known() {
    // The shape of config/server.properties shipped with Kafka 4.x.
    let text = r#"
############################# Server Basics #############################
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093

############################# Socket Server Settings #############################
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600

############################# Log Basics #############################
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
#log.flush.interval.messages=10000
#log.flush.interval.ms=1000
log.retention.hours=168
#log.retention.bytes=1073741824
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
group.initial.rebalance.delay.ms=0
controller.quorum.voters=1@localhost:9093
zookeeper.connect=localhost:2181
"#;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.properties");
    std::fs::write(&path, text).unwrap();
    let c = BrokerConfig::from_file(&path).unwrap();
    assert!(c.unknown.is_empty(), "{:?}", c.unknown);
    assert_eq!(c.node_id, 1);
    // The controller listener is not opened; the empty host binds all interfaces.
    assert_eq!(c.listeners, vec![listener("PLAINTEXT", "0.0.0.0", 9092)]);
    assert_eq!(
        c.advertised_listeners,
        vec![listener("PLAINTEXT", "localhost", 9092)]
    );
    assert_eq!(c.log_dirs, vec![PathBuf::from("/tmp/kraft-combined-logs")]);
    assert_eq!(c.topic_defaults.retention_ms, 604_800_000);
}

#[test]
fn from_file_missing_is_a_read_error() {
    let err = BrokerConfig::from_file(std::path::Path::new("/nonexistent/server.properties"))
        .unwrap_err();
    assert!(matches!(err, ConfigError::Read { .. }), "{err:?}");
    assert!(err.to_string().contains("/nonexistent/server.properties"));
}

#[test]
fn from_file_accepts_latin1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("server.properties");
    std::fs::write(&path, b"cluster.id=caf\xe9\nnum.partitions=2\n").unwrap();
    let c = BrokerConfig::from_file(&path).unwrap();
    assert_eq!(c.cluster_id.as_deref(), Some("café"));
    assert_eq!(c.num_partitions, 2);
}

#[test]
fn listener_parsing() {
    let ls = parse_listeners(
        "listeners",
        "plaintext://127.0.0.1:9092, EXTERNAL://:9093,V6://[::1]:9094,BARE6://::1:9095,ANY://0.0.0.0:0",
    )
    .unwrap();
    assert_eq!(
        ls,
        vec![
            listener("PLAINTEXT", "127.0.0.1", 9092),
            listener("EXTERNAL", "", 9093),
            listener("V6", "::1", 9094),
            listener("BARE6", "::1", 9095),
            listener("ANY", "0.0.0.0", 0),
        ]
    );
    assert_eq!(ls[2].address(), "[::1]:9094");
    assert_eq!(ls[0].address(), "127.0.0.1:9092");
    assert_eq!(ls[2].to_string(), "V6://[::1]:9094");
    for bad in [
        "PLAINTEXT://host",
        "://host:1",
        "PLAIN TEXT://h:1",
        "PLAINTEXT://h:-1",
        "PLAINTEXT://h o:1",
        "A://h:1,a://h:2",
    ] {
        let err = parse_listeners("listeners", bad).unwrap_err();
        assert!(
            matches!(&err, ConfigError::InvalidValue { name, .. } if name == "listeners"),
            "{bad}: {err:?}"
        );
    }
}

#[test]
fn listeners_and_advertised_listeners() {
    // Advertised defaults to listeners; an empty host is advertised as loopback.
    let c = build(&[
        (
            "listeners",
            "PLAINTEXT://:9092,EXTERNAL://10.0.0.1:9093,ALL://0.0.0.0:9094",
        ),
        (
            "listener.security.protocol.map",
            "PLAINTEXT:PLAINTEXT,EXTERNAL:SASL_SSL,ALL:SSL",
        ),
        ("sasl.enabled.mechanisms", "SCRAM-SHA-256"),
        INLINE_CHAIN,
        INLINE_KEY,
    ]);
    // The SASL_SSL listener has TLS and SASL settings; the others SASL none.
    assert!(c.listener_tls.contains_key("EXTERNAL"));
    assert_eq!(
        c.listener_sasl["EXTERNAL"].mechanisms,
        vec![sluice_config::SaslMechanism::ScramSha256]
    );
    assert_eq!(c.listener_sasl.len(), 1);
    assert!(c.inter_broker_sasl.is_none());
    assert_eq!(
        c.listeners,
        vec![
            listener("PLAINTEXT", "0.0.0.0", 9092),
            listener("EXTERNAL", "10.0.0.1", 9093),
            listener("ALL", "0.0.0.0", 9094)
        ]
    );
    assert_eq!(
        c.advertised_listeners,
        vec![
            listener("PLAINTEXT", "127.0.0.1", 9092),
            listener("EXTERNAL", "10.0.0.1", 9093),
            listener("ALL", "0.0.0.0", 9094)
        ]
    );
    // Explicit advertised listeners must name defined listeners.
    let c = build(&[
        ("listeners", "PLAINTEXT://:9092"),
        ("advertised.listeners", "PLAINTEXT://broker1.example:19092"),
    ]);
    assert_eq!(
        c.advertised_listeners,
        vec![listener("PLAINTEXT", "broker1.example", 19092)]
    );
    let (name, _, reason) = build_err(&[
        ("listeners", "PLAINTEXT://:9092"),
        ("advertised.listeners", "OTHER://h:1"),
    ]);
    assert_eq!(name, "advertised.listeners");
    assert!(reason.contains("OTHER"), "{reason}");
    // Ports must differ, except IPv4 vs IPv6, and port 0.
    let ab = ("listener.security.protocol.map", "A:PLAINTEXT,B:PLAINTEXT");
    assert_eq!(
        build_err(&[("listeners", "A://h:9092,B://g:9092"), ab]).0,
        "listeners"
    );
    build(&[("listeners", "A://127.0.0.1:9092,B://[::1]:9092"), ab]);
    build(&[("listeners", "A://127.0.0.1:0,B://127.0.0.1:0"), ab]);
    // Only controller listeners left.
    assert_eq!(
        build_err(&[
            ("listeners", "CONTROLLER://:9093"),
            ("controller.listener.names", "CONTROLLER")
        ])
        .0,
        "listeners"
    );
}

/// Inline PEM for the TLS listeners of these tests (the config crate reads, never parses, it).
const INLINE_CHAIN: (&str, &str) = ("ssl.keystore.certificate.chain", "chain");
const INLINE_KEY: (&str, &str) = ("ssl.keystore.key", "key");

#[test]
fn tls_settings_per_listener() {
    use sluice_config::{ClientAuth, KeyStore, Pem};
    // A TLS listener without a keystore is refused, naming what to set.
    let (name, _, reason) = build_err(&[("listeners", "SSL://:9093")]);
    assert_eq!(name, "listener.name.ssl.ssl.keystore.location");
    assert!(reason.contains("needs a keystore"), "{reason}");
    // The listener-prefixed property wins over the plain one.
    let c = build(&[
        ("listeners", "PLAINTEXT://:9092,SSL://:9093"),
        ("ssl.keystore.location", "/plain.pem"),
        ("ssl.keystore.type", "PEM"),
        ("listener.name.ssl.ssl.keystore.location", "/prefixed.pem"),
        ("ssl.client.auth", "requested"),
        ("ssl.truststore.certificates", "ca"),
    ]);
    let tls = &c.listener_tls["SSL"];
    assert_eq!(
        tls.keystore,
        KeyStore::Pem {
            chain: Pem::File("/prefixed.pem".into()),
            key: Pem::File("/prefixed.pem".into())
        }
    );
    assert_eq!(tls.client_auth, ClientAuth::Requested);
    assert_eq!(tls.protocols, vec!["TLSv1.2", "TLSv1.3"]);
    assert!(!c.listener_tls.contains_key("PLAINTEXT"));
    // Client certificates need a truststore; old protocol versions and JKS are refused.
    for (k, v, why) in [
        ("ssl.client.auth", "required", "no truststore"),
        (
            "ssl.enabled.protocols",
            "TLSv1.1",
            "only TLSv1.2 and TLSv1.3",
        ),
        ("ssl.keystore.type", "JKS", "Java's own format"),
    ] {
        let (_, _, reason) = build_err(&[
            ("listeners", "SSL://:9093"),
            ("ssl.keystore.location", "/k.pem"),
            (
                "ssl.keystore.type",
                if k == "ssl.keystore.type" { v } else { "PEM" },
            ),
            (k, v),
        ]);
        assert!(reason.contains(why), "{k}={v}: {reason}");
    }
}

#[test]
fn plain_ssl_client_auth_does_not_apply_to_sasl_ssl_listeners() {
    use sluice_config::ClientAuth;
    // As on Kafka: a SASL_SSL listener asks for client certificates only with its prefix.
    let base = [
        ("listeners", "SSL://:9093,SASL_SSL://:9094"),
        INLINE_CHAIN,
        INLINE_KEY,
        ("ssl.truststore.certificates", "ca"),
        ("ssl.client.auth", "requested"),
        ("sasl.enabled.mechanisms", "PLAIN"),
        (
            "listener.name.sasl_ssl.plain.sasl.jaas.config",
            "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"a\";",
        ),
    ];
    let c = build(&base);
    assert_eq!(c.listener_tls["SSL"].client_auth, ClientAuth::Requested);
    assert_eq!(c.listener_tls["SASL_SSL"].client_auth, ClientAuth::None);
    let mut prefixed = base.to_vec();
    prefixed.push(("listener.name.sasl_ssl.ssl.client.auth", "required"));
    let c = build(&prefixed);
    assert_eq!(c.listener_tls["SASL_SSL"].client_auth, ClientAuth::Required);
}

#[test]
fn dynamic_keystore_settings_apply_to_their_listener_only() {
    use sluice_config::{ClientAuth, KeyStore, Pem};
    let c = build(&[
        ("listeners", "PLAINTEXT://:9092,SSL://:9093,OTHER://:9094"),
        (
            "listener.security.protocol.map",
            "PLAINTEXT:PLAINTEXT,SSL:SSL,OTHER:SSL",
        ),
        ("ssl.keystore.type", "PKCS12"),
        ("ssl.keystore.location", "/old.p12"),
        ("ssl.keystore.password", "pw"),
        ("ssl.truststore.certificates", "ca"),
        ("ssl.client.auth", "requested"),
    ]);
    let dynamic = props(&[
        ("listener.name.ssl.ssl.keystore.location", "/new.p12"),
        ("listener.name.ssl.ssl.key.password", "kpw"),
        // Not taken at run time (as on Kafka): stored, no effect.
        ("listener.name.ssl.ssl.client.auth", "none"),
    ]);
    let tls = c.listener_tls_with(&dynamic).unwrap();
    assert_eq!(
        tls["SSL"].keystore,
        KeyStore::Pkcs12 {
            path: "/new.p12".into(),
            password: "pw".into(),
            key_password: Some("kpw".into()),
        }
    );
    assert_eq!(tls["SSL"].client_auth, ClientAuth::Requested);
    assert_eq!(tls["OTHER"], c.listener_tls["OTHER"]);
    // The effective config carries them.
    let e = c.with_dynamic(&BTreeMap::new(), &dynamic).unwrap();
    assert_eq!(e.listener_tls, tls);
    // Settings that do not read are an error here (the change is refused) and leave the
    // effective config's listeners as they were.
    let both = props(&[
        ("listener.name.ssl.ssl.keystore.certificate.chain", "chain"),
        ("listener.name.ssl.ssl.keystore.key", "key"),
    ]);
    assert!(c.listener_tls_with(&both).is_err());
    let e = c.with_dynamic(&BTreeMap::new(), &both).unwrap();
    assert_eq!(e.listener_tls, c.listener_tls);
    // Inline PEM replacing inline PEM.
    let c = build(&[("listeners", "SSL://:9093"), INLINE_CHAIN, INLINE_KEY]);
    let tls = c.listener_tls_with(&both).unwrap();
    assert_eq!(
        tls["SSL"].keystore,
        KeyStore::Pem {
            chain: Pem::Inline("chain".into()),
            key: Pem::Inline("key".into())
        }
    );
    // A keystore file that cannot be read (yet) is the server's to report: its type, not
    // given, is taken from whether a password is set.
    let c = build(&[
        ("listeners", "SSL://:9093"),
        ("ssl.keystore.location", "/nonexistent/k"),
    ]);
    assert!(matches!(
        c.listener_tls["SSL"].keystore,
        KeyStore::Pem { .. }
    ));
    let tls = c
        .listener_tls_with(&props(&[("listener.name.ssl.ssl.keystore.password", "pw")]))
        .unwrap();
    assert!(matches!(tls["SSL"].keystore, KeyStore::Pkcs12 { .. }));
}

#[test]
fn dynamic_tls_secrets_are_not_shown() {
    let c = build(&[("listeners", "SSL://:9093"), INLINE_CHAIN, INLINE_KEY]);
    let e = c.with_dynamic(
        &BTreeMap::new(),
        &props(&[
            ("listener.name.ssl.ssl.keystore.certificate.chain", "chain2"),
            ("listener.name.ssl.ssl.keystore.key", "key2"),
            ("listener.name.ssl.ssl.keystore.location", "/k.pem"),
            ("listener.name.ssl.ssl.truststore.password", "t"),
        ]),
    );
    // Both location and inline PEM: the listener keeps its settings; the values are stored.
    let e = e.unwrap();
    let entries = e.describe();
    let get = |n: &str| entries.iter().find(|x| x.name == n).unwrap().clone();
    for name in [
        "listener.name.ssl.ssl.keystore.certificate.chain",
        "listener.name.ssl.ssl.keystore.key",
        "listener.name.ssl.ssl.truststore.password",
    ] {
        let x = get(name);
        assert!(x.sensitive && x.value.is_none(), "{name}: {x:?}");
        assert!(x.synonyms.iter().all(|s| s.value.is_none()), "{name}");
    }
    let x = get("listener.name.ssl.ssl.keystore.location");
    assert_eq!((x.sensitive, x.value.as_deref()), (false, Some("/k.pem")));
    assert!(!x.read_only);
}

#[test]
fn listener_security_protocols_and_the_inter_broker_listener() {
    use sluice_config::SecurityProtocol;
    // Kafka's default map: each protocol's name is a listener name mapped to itself.
    let c = build(&[
        ("listeners", "PLAINTEXT://:9092,SSL://:9093"),
        INLINE_CHAIN,
        INLINE_KEY,
    ]);
    assert_eq!(c.listener_protocols["SSL"], SecurityProtocol::Ssl);
    assert_eq!(c.listener_protocols["SASL_SSL"], SecurityProtocol::SaslSsl);
    assert_eq!(c.inter_broker_listener, "PLAINTEXT");
    // A listener the map does not name is refused, with the fix in the reason.
    let (name, _, reason) = build_err(&[("listeners", "INTERNAL://:9092")]);
    assert_eq!(name, "listener.security.protocol.map");
    assert!(reason.contains("INTERNAL:PLAINTEXT"), "{reason}");
    let (_, _, reason) = build_err(&[
        ("listeners", "A://:9092"),
        ("listener.security.protocol.map", "A:TLS"),
    ]);
    assert!(reason.contains("unknown security protocol"), "{reason}");
    let (_, _, reason) = build_err(&[
        ("listeners", "A://:9092"),
        ("listener.security.protocol.map", "A:PLAINTEXT,a:SSL"),
    ]);
    assert!(reason.contains("more than once"), "{reason}");
    // inter.broker.listener.name must name a listener; security.inter.broker.protocol picks
    // the listener of that name; neither: the first listener.
    let map = (
        "listener.security.protocol.map",
        "INTERNAL:PLAINTEXT,EXTERNAL:SSL",
    );
    let listeners = ("listeners", "EXTERNAL://:9093,INTERNAL://:9092");
    let c = build(&[
        listeners,
        map,
        ("inter.broker.listener.name", "internal"),
        INLINE_CHAIN,
        INLINE_KEY,
    ]);
    assert_eq!(c.inter_broker_listener, "INTERNAL");
    assert_eq!(c.listener_protocols["EXTERNAL"], SecurityProtocol::Ssl);
    assert_eq!(
        build(&[listeners, map, INLINE_CHAIN, INLINE_KEY]).inter_broker_listener,
        "EXTERNAL"
    );
    let (name, _, _) = build_err(&[listeners, map, ("inter.broker.listener.name", "X")]);
    assert_eq!(name, "inter.broker.listener.name");
    let (name, _, _) = build_err(&[
        listeners,
        map,
        ("inter.broker.listener.name", "INTERNAL"),
        ("security.inter.broker.protocol", "SSL"),
    ]);
    assert_eq!(name, "inter.broker.listener.name");
    let c = build(&[
        ("listeners", "PLAINTEXT://:9092,SSL://:9093"),
        ("security.inter.broker.protocol", "SSL"),
        INLINE_CHAIN,
        INLINE_KEY,
    ]);
    assert_eq!(c.inter_broker_listener, "SSL");
}

#[test]
fn log_dirs() {
    assert_eq!(
        build(&[("log.dir", "/a")]).log_dirs,
        vec![PathBuf::from("/a")]
    );
    assert_eq!(
        build(&[("log.dir", "/a"), ("log.dirs", "/b, /c,")]).log_dirs,
        vec![PathBuf::from("/b"), PathBuf::from("/c")]
    );
}

#[test]
fn describe_broker() {
    let c = build(&[
        ("num.partitions", "4"),
        ("log.retention.hours", "24"),
        ("listeners", "PLAINTEXT://:9092"),
        ("num.io.threads", "8"),
        ("unknown.x", "1"),
    ]);
    let entries = c.describe();
    let get = |n: &str| {
        entries
            .iter()
            .find(|e| e.name == n)
            .unwrap_or_else(|| panic!("{n} missing"))
            .clone()
    };
    let e = get("num.partitions");
    assert_eq!(e.value.as_deref(), Some("4"));
    assert_eq!(e.source, ConfigSource::StaticBroker);
    assert!(e.read_only);
    assert_eq!(e.config_type, 3);
    let e = get("log.retention.hours");
    assert_eq!(e.value.as_deref(), Some("24"));
    assert_eq!(e.source, ConfigSource::StaticBroker);
    let e = get("log.retention.ms");
    assert_eq!(e.value, None);
    assert_eq!(e.source, ConfigSource::Default);
    assert!(!e.read_only, "log.retention.ms is dynamic in Kafka");
    assert_eq!(e.config_type, 5);
    let e = get("log.segment.bytes");
    assert_eq!(e.value.as_deref(), Some("1073741824"));
    assert_eq!(e.source, ConfigSource::Default);
    let e = get("log.cleanup.policy");
    assert_eq!(e.config_type, 7);
    assert_eq!(
        get("listeners").value.as_deref(),
        Some("PLAINTEXT://0.0.0.0:9092")
    );
    assert_eq!(get("advertised.listeners").value, None);
    assert_eq!(get("node.id").value.as_deref(), Some("1"));
    assert_eq!(get("num.io.threads").value.as_deref(), Some("8"));
    assert!(entries.iter().all(|e| e.name != "unknown.x"));
    let mut names: Vec<_> = entries.iter().map(|e| e.name.clone()).collect();
    let sorted = {
        let mut s = names.clone();
        s.sort();
        s
    };
    assert_eq!(names, sorted);
    names.dedup();
    assert_eq!(names.len(), entries.len());
    assert_eq!(ConfigSource::StaticBroker.code(), 4);
}

#[test]
fn overrides() {
    assert_eq!(
        parse_override("a.b=c=d").unwrap(),
        ("a.b".to_string(), "c=d".to_string())
    );
    assert_eq!(
        parse_override("a=").unwrap(),
        ("a".to_string(), String::new())
    );
    assert!(parse_override("novalue").is_err());
    assert!(parse_override("=x").is_err());
}

#[test]
fn group_coordinator_settings() {
    let c = build(&[]);
    assert_eq!(c.groups.consumer_migration_policy, "bidirectional");
    assert_eq!(c.groups.offsets_retention_check_interval_ms, 600_000);
    assert_eq!(c.groups.offsets_snapshot_interval_records, 10_000);
    let c = build(&[
        ("group.consumer.migration.policy", "Upgrade"),
        ("offsets.retention.check.interval.ms", "1000"),
        ("sluice.offsets.snapshot.interval.records", "50"),
    ]);
    assert_eq!(c.groups.consumer_migration_policy, "upgrade");
    assert_eq!(c.groups.offsets_retention_check_interval_ms, 1000);
    assert_eq!(c.groups.offsets_snapshot_interval_records, 50);
    assert!(c.unknown.is_empty());
    let (name, _, _) = build_err(&[("group.consumer.migration.policy", "sideways")]);
    assert_eq!(name, "group.consumer.migration.policy");
    let (name, _, _) = build_err(&[("offsets.retention.check.interval.ms", "0")]);
    assert_eq!(name, "offsets.retention.check.interval.ms");
    let (name, _, _) = build_err(&[("sluice.offsets.snapshot.interval.records", "0")]);
    assert_eq!(name, "sluice.offsets.snapshot.interval.records");
}

#[test]
fn worker_threads_setting() {
    assert_eq!(build(&[]).worker_threads, 0);
    let c = build(&[("sluice.worker.threads", "3")]);
    assert_eq!(c.worker_threads, 3);
    assert!(c.unknown.is_empty());
    for bad in ["-1", "1025", "two"] {
        let (name, value, _) = build_err(&[("sluice.worker.threads", bad)]);
        assert_eq!(
            (name.as_str(), value.as_str()),
            ("sluice.worker.threads", bad)
        );
    }
    let entry = c
        .describe()
        .into_iter()
        .find(|e| e.name == "sluice.worker.threads")
        .expect("described");
    assert_eq!(entry.value.as_deref(), Some("3"));
}

#[test]
fn log_cache_settings() {
    let c = build(&[]);
    // The default scales with the machine: an eighth of its memory, at least 1 GiB.
    let memory = sluice_config::available_memory();
    assert_eq!(c.log_cache_bytes, sluice_config::log_cache_default(memory));
    assert!(c.log_cache_bytes >= sluice_config::LOG_CACHE_FLOOR_BYTES);
    if let Some(m) = memory {
        assert!(c.log_cache_bytes >= i64::try_from(m / 8).unwrap());
    }
    let entry = c
        .describe()
        .into_iter()
        .find(|e| e.name == "sluice.log.cache.bytes")
        .unwrap();
    assert_eq!(entry.value, Some(c.log_cache_bytes.to_string()));
    assert_eq!(c.log_cache_min_partition_bytes, 8 << 20);
    let c = build(&[
        ("sluice.log.cache.bytes", "-1"),
        ("sluice.log.cache.min.partition.bytes", "0"),
    ]);
    assert_eq!(c.log_cache_bytes, -1);
    assert_eq!(c.log_cache_min_partition_bytes, 0);
    assert_eq!(build(&[("sluice.log.cache.bytes", "0")]).log_cache_bytes, 0);
    assert!(c.unknown.is_empty());
    let (name, value, _) = build_err(&[("sluice.log.cache.bytes", "-2")]);
    assert_eq!(
        (name.as_str(), value.as_str()),
        ("sluice.log.cache.bytes", "-2")
    );
    let (name, _, _) = build_err(&[("sluice.log.cache.min.partition.bytes", "-1")]);
    assert_eq!(name, "sluice.log.cache.min.partition.bytes");
    let entry = c
        .describe()
        .into_iter()
        .find(|e| e.name == "sluice.log.cache.bytes")
        .unwrap();
    assert_eq!(entry.value.as_deref(), Some("-1"));
}

#[test]
fn metrics_listener_setting() {
    assert_eq!(build(&[]).metrics_listener, None);
    let c = build(&[("sluice.metrics.listener", "127.0.0.1:9404")]);
    assert_eq!(c.metrics_listener.as_deref(), Some("127.0.0.1:9404"));
    assert!(c.unknown.is_empty());
    for bad in ["9404", "host:", ":9404", "host:99999"] {
        let (name, value, _) = build_err(&[("sluice.metrics.listener", bad)]);
        assert_eq!(
            (name.as_str(), value.as_str()),
            ("sluice.metrics.listener", bad)
        );
    }
}

#[test]
fn the_standard_authorizer_and_its_settings() {
    let none = BrokerConfig::from_properties(props(&[])).unwrap();
    assert_eq!(none.authorizer, None);
    let empty = BrokerConfig::from_properties(props(&[("authorizer.class.name", " ")])).unwrap();
    assert_eq!(empty.authorizer, None);
    let on = BrokerConfig::from_properties(props(&[
        ("authorizer.class.name", sluice_config::STANDARD_AUTHORIZER),
        ("super.users", "User:admin; User:CN=broker,O=x;"),
        ("allow.everyone.if.no.acl.found", "true"),
    ]))
    .unwrap();
    let settings = on.authorizer.unwrap();
    assert_eq!(settings.super_users, ["User:admin", "User:CN=broker,O=x"]);
    assert!(settings.allow_everyone_if_no_acl_found);
    let default = BrokerConfig::from_properties(props(&[(
        "authorizer.class.name",
        sluice_config::STANDARD_AUTHORIZER,
    )]))
    .unwrap();
    assert!(!default.authorizer.unwrap().allow_everyone_if_no_acl_found);
}

#[test]
fn other_authorizers_and_bad_super_users_stop_startup() {
    let err = BrokerConfig::from_properties(props(&[(
        "authorizer.class.name",
        "kafka.security.authorizer.AclAuthorizer",
    )]))
    .unwrap_err()
    .to_string();
    assert!(err.contains("ZooKeeper"), "{err}");
    assert!(err.contains(sluice_config::STANDARD_AUTHORIZER), "{err}");
    let err = BrokerConfig::from_properties(props(&[(
        "authorizer.class.name",
        "com.example.MyAuthorizer",
    )]))
    .unwrap_err()
    .to_string();
    assert!(err.contains("authorizer.class.name"), "{err}");
    let err = BrokerConfig::from_properties(props(&[
        ("authorizer.class.name", sluice_config::STANDARD_AUTHORIZER),
        ("super.users", "admin"),
    ]))
    .unwrap_err()
    .to_string();
    assert!(err.contains("super.users"), "{err}");
}

/// The link to etcd: endpoints as etcd's tools write them, TLS from the truststore, and a
/// login whose password DescribeConfigs never shows.
#[test]
fn etcd_link_settings_and_a_hidden_password() {
    let c = build(&[
        (
            "sluice.cluster.etcd.endpoints",
            "https://10.0.0.21:2379, 10.0.0.22:2379",
        ),
        ("sluice.cluster.etcd.ssl.truststore.location", "/etc/ca.pem"),
        ("sluice.cluster.etcd.ssl.keystore.location", "/etc/me.pem"),
        ("sluice.cluster.etcd.username", "sluice"),
        ("sluice.cluster.etcd.password", "s3cret"),
    ]);
    let cluster = c.cluster.clone().unwrap();
    let urls: Vec<String> = cluster
        .etcd_endpoints
        .iter()
        .map(|e| e.to_string())
        .collect();
    assert_eq!(urls, ["https://10.0.0.21:2379", "https://10.0.0.22:2379"]);
    assert!(cluster.etcd_tls.is_some());
    assert_eq!(cluster.etcd_login.as_ref().unwrap().username, "sluice");
    assert!(!format!("{:?}", cluster.etcd_login).contains("s3cret"));

    let entries = c.describe();
    let entry = |name: &str| entries.iter().find(|e| e.name == name).unwrap();
    let password = entry("sluice.cluster.etcd.password");
    assert!(password.sensitive && password.value.is_none());
    assert_eq!(password.source, ConfigSource::StaticBroker);
    assert!(password.synonyms.iter().all(|s| s.value.is_none()));
    assert_eq!(
        entry("sluice.cluster.etcd.username").value.as_deref(),
        Some("sluice")
    );
    assert!(!format!("{entries:?}").contains("s3cret"));

    // Plain host:port without TLS settings stays plain HTTP.
    let c = build(&[("sluice.cluster.etcd.endpoints", "127.0.0.1:2379")]);
    let cluster = c.cluster.unwrap();
    assert_eq!(
        cluster.etcd_endpoints[0].to_string(),
        "http://127.0.0.1:2379"
    );
    assert!(cluster.etcd_tls.is_none() && cluster.etcd_login.is_none());

    // Today's error for a URL was a failed address lookup at the first request; now the
    // property and the value are named at startup.
    let (name, value, reason) = build_err(&[("sluice.cluster.etcd.endpoints", "https://etcd-1")]);
    assert_eq!(name, "sluice.cluster.etcd.endpoints");
    assert_eq!(value, "https://etcd-1");
    assert!(reason.contains("port is missing"), "{reason}");
}

/// The checks run in a fixed order (each property typed, then node id, listeners, advertised
/// listeners, protocol map, inter-broker listener, log dirs, connections per IP, metrics
/// listener, etcd link, authorizer): of two mistakes, the earlier one is named.
#[test]
fn a_config_with_two_mistakes_is_refused_for_the_earlier_check() {
    let mistakes: &[(&str, &[(&str, &str)])] = &[
        ("num.partitions", &[("num.partitions", "zero")]),
        ("broker.id", &[("node.id", "3"), ("broker.id", "4")]),
        ("listeners", &[("listeners", "nope")]),
        (
            "advertised.listeners",
            &[("advertised.listeners", "OTHER://h:1")],
        ),
        (
            "listener.security.protocol.map",
            &[("listener.security.protocol.map", "X:PLAINTEXT")],
        ),
        (
            "inter.broker.listener.name",
            &[("inter.broker.listener.name", "NOPE")],
        ),
        ("log.dirs", &[("log.dirs", " , ")]),
        ("max.connections.per.ip", &[("max.connections.per.ip", "0")]),
        (
            "sluice.metrics.listener",
            &[("sluice.metrics.listener", "9404")],
        ),
        (
            "sluice.cluster.etcd.endpoints",
            &[("sluice.cluster.etcd.endpoints", "https://etcd-1")],
        ),
        (
            "authorizer.class.name",
            &[("authorizer.class.name", "com.example.MyAuthorizer")],
        ),
    ];
    for (i, (first, a)) in mistakes.iter().enumerate() {
        assert_eq!(&build_err(a).0, first, "alone");
        for (_, b) in &mistakes[i + 1..] {
            let both: Vec<(&str, &str)> = a.iter().chain(b.iter()).copied().collect();
            assert_eq!(&build_err(&both).0, first, "{both:?}");
        }
    }
}

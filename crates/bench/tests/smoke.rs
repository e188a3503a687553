//! `sluice bench` end to end: a 5-second workload against an in-process Sluice broker on
//! 127.0.0.1:0 with a real log directory. Checks that records flow and result files appear,
//! never how fast (benchmarks print figures; tests do not time them).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

/// Ignored by default (about 6 s of wall time plus its build); run with
/// `cargo test -p sluice-bench --test smoke -- --ignored`.
#[test]
#[ignore = "5-second benchmark smoke run; opt in with --ignored"]
fn five_second_workload_against_sluice() {
    let dir = tempfile::tempdir().unwrap();
    // Bind first: metadata must advertise the real port, not 0.
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_listener.local_addr().unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let mut props = BTreeMap::new();
    props.insert(
        "log.dirs".to_string(),
        dir.path().join("data").display().to_string(),
    );
    props.insert("listeners".to_string(), format!("PLAINTEXT://{addr}"));
    let config = sluice_config::BrokerConfig::from_properties(props).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    runtime.block_on(async {
        let limits = sluice_server::Limits {
            max_request_bytes: config.socket_request_max_bytes,
            max_connections: 64,
            idle_timeout: Duration::from_secs(60),
            max_in_flight: 16,
        };
        let broker = sluice_broker::Broker::open(config).unwrap();
        let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
        tokio::spawn(sluice_server::serve(broker, listener, limits, stop_rx));
    });

    let workload = dir.path().join("w.yaml");
    std::fs::write(
        &workload,
        "name: smoke\ntopics: 1\npartitionsPerTopic: 4\nmessageSize: 256\n\
         useRandomizedPayloads: true\nrandomBytesRatio: 0.5\nrandomizedPayloadPoolSize: 10\n\
         subscriptionsPerTopic: 1\nconsumerPerSubscription: 2\nproducersPerTopic: 2\n\
         producerRate: 2000\ntestDurationMinutes: 0.0834\nwarmupDurationMinutes: 0\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let args: Vec<String> = [
        workload.to_str().unwrap(),
        "--bootstrap",
        &addr.to_string(),
        "--report-interval",
        "1",
        "--out",
        out.to_str().unwrap(),
        "--name",
        "smoke",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    sluice_bench::run(&args).unwrap();

    let json = std::fs::read_to_string(out.join("smoke.json")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    let field = |name: &str| -> f64 { doc[name].as_f64().unwrap() };
    assert!(!doc["intervals"].as_array().unwrap().is_empty(), "{json}");
    assert!(field("publish_rate_msgs") > 0.0, "{json}");
    assert!(field("consume_rate_msgs") > 0.0, "{json}");
    assert_eq!(field("publish_errors"), 0.0, "{json}");
    let html = std::fs::read_to_string(out.join("smoke.html")).unwrap();
    assert!(html.contains("<svg"));
    let _ = stop.send(true);
}

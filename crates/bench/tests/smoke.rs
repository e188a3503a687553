//! `sluice bench` end to end: a 5-second workload against an in-process Sluice broker on
//! 127.0.0.1:0 with a real log directory. Checks that records flow and result files appear,
//! never how fast (benchmarks print figures; tests do not time them).

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::time::Duration;

/// An in-process Sluice broker on 127.0.0.1 with its log directory under `dir` and the
/// broker properties `extra`; it stops when the returned sender sends true (or is dropped
/// with the runtime).
fn start_broker(
    dir: &std::path::Path,
    extra: &[(&str, &str)],
) -> (
    std::net::SocketAddr,
    tokio::runtime::Runtime,
    tokio::sync::watch::Sender<bool>,
) {
    // Bind first: metadata must advertise the real port, not 0.
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = std_listener.local_addr().unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let mut props = BTreeMap::new();
    props.insert(
        "log.dirs".to_string(),
        dir.join("data").display().to_string(),
    );
    props.insert("listeners".to_string(), format!("PLAINTEXT://{addr}"));
    for (k, v) in extra {
        props.insert(k.to_string(), v.to_string());
    }
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
            max_connections_per_ip: 64,
            max_connections_per_ip_overrides: Default::default(),
            idle_timeout: Duration::from_secs(60),
            max_in_flight: 16,
            failed_auth_delay: Duration::from_millis(100),
        };
        let broker = sluice_broker::Broker::open(config).unwrap();
        // Retention and the other periodic work, as `sluice serve` runs them.
        let b = broker.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(b.maintenance_interval());
            loop {
                tick.tick().await;
                let b = b.clone();
                let _ = tokio::task::spawn_blocking(move || b.maintain()).await;
            }
        });
        let listener = tokio::net::TcpListener::from_std(std_listener).unwrap();
        let bound = vec![sluice_server::Bound {
            name: "PLAINTEXT".into(),
            listener,
            tls: None,
        }];
        tokio::spawn(sluice_server::serve(broker, bound, limits, stop_rx));
    });
    (addr, runtime, stop)
}

/// Ignored by default (about 6 s of wall time plus its build); run with
/// `cargo test -p sluice-bench --test smoke -- --ignored`.
#[test]
#[ignore = "5-second benchmark smoke run; opt in with --ignored"]
fn five_second_workload_against_sluice() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, _runtime, stop) = start_broker(dir.path(), &[]);

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

/// `--stagger-rolls`: partition p of n gets p/n of the segment size in filler, the consumers'
/// start offsets move past it, and partition 0 gets none.
#[test]
fn stagger_gives_each_partition_its_share_of_a_segment() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, runtime, stop) = start_broker(dir.path(), &[]);
    let segment: u64 = 8 << 20;
    let n = 4u32;
    let (offsets, written) = runtime.block_on(async {
        use sluice_bench::{admin, client::Connection};
        let conn = Connection::connect(&addr.to_string()).await.unwrap();
        let topic = "stagger".to_string();
        admin::create_topics(&conn, std::slice::from_ref(&topic), n, 1, &BTreeMap::new())
            .await
            .unwrap();
        let layout = admin::wait_for_layout(&conn, &[topic], n, Duration::from_secs(30))
            .await
            .unwrap()
            .remove(0);
        let mut conns = BTreeMap::new();
        conns.insert(layout.leaders[0], conn);
        let mut next = admin::probe_partitions(&conns, &layout, Duration::from_secs(30))
            .await
            .unwrap();
        assert_eq!(next, vec![1; n as usize]);
        let written = admin::stagger_rolls(
            &conns,
            &layout,
            segment,
            1000,
            &mut next,
            Duration::from_secs(60),
        )
        .await
        .unwrap();
        (next, written)
    });
    let _ = stop.send(true);
    // Bytes of each partition's log files: the probe record and the filler.
    let sizes: Vec<u64> = (0..n)
        .map(|p| {
            std::fs::read_dir(dir.path().join("data").join(format!("stagger-{p}")))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|f| f.extension().is_some_and(|x| x == "log"))
                .map(|f| std::fs::metadata(f).unwrap().len())
                .sum()
        })
        .collect();
    assert!(sizes[0] < 1024, "{sizes:?}");
    assert_eq!(offsets[0], 1, "{offsets:?}");
    for p in 1..n as usize {
        let share = p as u64 * segment / u64::from(n);
        // Whole batches of about 256 KiB: within half a batch (and the probe) of the share.
        assert!(
            sizes[p].abs_diff(share) < 160 * 1024,
            "partition {p}: {sizes:?}"
        );
        assert!(offsets[p] > offsets[p - 1], "{offsets:?}");
        // About one record of 1000 bytes per kilobyte written, after the probe's.
        let records = (offsets[p] - 1) as u64;
        assert!(
            records * 1000 <= sizes[p] && sizes[p] < records * 1100,
            "{records} records, {sizes:?}"
        );
    }
    // What it reports written is the filler: all but the probe batches, alike in size.
    assert_eq!(
        written,
        sizes.iter().sum::<u64>() - u64::from(n) * sizes[0],
        "{written} {sizes:?}"
    );
}

/// Broker settings for the retention tests: a check every 100 ms, deleted segments removed
/// at once.
const RETENTION_EVERY_100_MS: &[(&str, &str)] = &[
    ("log.retention.check.interval.ms", "100"),
    ("log.segment.delete.delay.ms", "0"),
];

/// Consumers held back until retention has deleted most of the backlog: when they start, the
/// fetch from their first offset is out of range, and what retention deleted unread leaves
/// the backlog as skipped, not consumed, so the drain ends (it waited for messages no
/// consumer could read, up to an hour, before the skipped count).
#[test]
fn messages_retention_deleted_unread_leave_the_backlog() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, _runtime, stop) = start_broker(dir.path(), RETENTION_EVERY_100_MS);
    let workload = dir.path().join("w.yaml");
    std::fs::write(
        &workload,
        "name: retention\ntopics: 1\npartitionsPerTopic: 1\nmessageSize: 1024\n\
         useRandomizedPayloads: true\nrandomBytesRatio: 0.5\nrandomizedPayloadPoolSize: 10\n\
         subscriptionsPerTopic: 1\nconsumerPerSubscription: 1\nproducersPerTopic: 1\n\
         producerRate: 10000\nconsumerBacklogSizeGB: 0.02\nbacklogDrainRatio: 0.8\n\
         testDurationMinutes: 0.02\nwarmupDurationMinutes: 0\n",
    )
    .unwrap();
    let driver = dir.path().join("d.yaml");
    std::fs::write(
        &driver,
        "name: retention\nreplicationFactor: 1\n\
         topicConfig: |\n  retention.bytes=2097152\n  segment.bytes=1048576\n\
         producerConfig: |\n  acks=all\n  linger.ms=1\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let args: Vec<String> = [
        workload.to_str().unwrap(),
        "--driver",
        driver.to_str().unwrap(),
        "--bootstrap",
        &addr.to_string(),
        "--out",
        out.to_str().unwrap(),
        "--name",
        "retention",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // The run on a thread of its own, so that a drain that never ends fails the test
    // instead of holding it for the drain's hour (the drain takes well under a second; the
    // bound is for liveness, not speed).
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done_tx.send(sluice_bench::run(&args).map_err(|e| e.to_string()));
    });
    done_rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the drain did not end")
        .unwrap();
    let json = std::fs::read_to_string(out.join("retention.json")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&json).unwrap();
    // About 20 MB were built; retention keeps 2-3 MB of it.
    let skipped = doc["skipped_msgs"].as_u64().unwrap();
    assert!(skipped > 10_000, "{skipped} skipped");
    assert!(doc["backlog"]["drain_s"].is_number(), "{json}");
    let _ = stop.send(true);
}

/// `admin::earliest_offsets` (what a consumer asks when an out-of-range fetch does not say
/// where the log starts) gives the log start after retention moved it.
#[test]
fn earliest_offsets_follow_retention() {
    let dir = tempfile::tempdir().unwrap();
    let (addr, runtime, stop) = start_broker(dir.path(), RETENTION_EVERY_100_MS);
    let starts = runtime.block_on(async {
        use sluice_bench::{admin, client::Connection};
        let conn = Connection::connect(&addr.to_string()).await.unwrap();
        let topic = "earliest".to_string();
        let mut config = BTreeMap::new();
        config.insert("retention.bytes".to_string(), "1048576".to_string());
        config.insert("segment.bytes".to_string(), "1048576".to_string());
        admin::create_topics(&conn, std::slice::from_ref(&topic), 2, 1, &config)
            .await
            .unwrap();
        let layout = admin::wait_for_layout(
            &conn,
            std::slice::from_ref(&topic),
            2,
            Duration::from_secs(30),
        )
        .await
        .unwrap()
        .remove(0);
        let mut conns = BTreeMap::new();
        conns.insert(layout.leaders[0], conn);
        let mut next = admin::probe_partitions(&conns, &layout, Duration::from_secs(30))
            .await
            .unwrap();
        // Partition 1 gets half of 8 MiB, four segments past its retention.
        admin::stagger_rolls(
            &conns,
            &layout,
            8 << 20,
            1000,
            &mut next,
            Duration::from_secs(60),
        )
        .await
        .unwrap();
        let conn = &conns[&layout.leaders[0]];
        // Retention runs every 100 ms; wait for it to move partition 1's start.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let starts = admin::earliest_offsets(conn, &topic, &[0, 1])
                .await
                .unwrap();
            if starts.iter().any(|(p, o)| *p == 1 && *o > 1) || std::time::Instant::now() > deadline
            {
                break (starts, next);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let _ = stop.send(true);
    let (starts, next) = starts;
    // Partition 0 holds only the probe record; partition 1's start moved past most of the
    // filler but not past its end.
    assert!(starts.contains(&(0, 0)), "{starts:?}");
    let s1 = starts.iter().find(|(p, _)| *p == 1).unwrap().1;
    assert!(s1 > 1 && s1 < next[1], "{starts:?} {next:?}");
}

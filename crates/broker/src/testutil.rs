//! Helpers for the broker's unit tests: real logs in a temporary directory.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use sluice_store::{Log, LogConfig, LogManager, MetaProperties, TimestampType, TopicPartition};

/// Small segments; `flush_messages` / `flush_ms` as given (i64::MAX: leave it to the OS).
pub(crate) fn log_config(flush_messages: i64, flush_ms: i64) -> LogConfig {
    LogConfig {
        segment_bytes: 1024 * 1024,
        segment_ms: i64::MAX,
        segment_jitter_ms: 0,
        retention_ms: -1,
        retention_bytes: -1,
        index_interval_bytes: 4096,
        segment_index_bytes: 1024 * 1024,
        max_message_bytes: 1024 * 1024,
        timestamp_type: TimestampType::CreateTime,
        flush_messages,
        flush_ms,
        cleanup: Default::default(),
    }
}

/// Partitions 0..n of topic "t", opened with `config` in a new temporary directory (kept
/// alive by the returned handle).
pub(crate) fn open_logs(
    n: i32,
    config: &LogConfig,
) -> (tempfile::TempDir, LogManager, Vec<Arc<Log>>) {
    let dir = tempfile::tempdir().unwrap();
    let meta = MetaProperties {
        node_id: 1,
        cluster_id: "test-cluster-id-00000A".into(),
    };
    let m = LogManager::open(vec![dir.path().to_path_buf()], meta).unwrap();
    let logs = (0..n)
        .map(|p| {
            let tp = TopicPartition {
                topic: "t".into(),
                partition: p,
            };
            m.open_log(&tp, uuid::Uuid::new_v4(), config.clone(), 0)
                .unwrap()
        })
        .collect();
    (dir, m, logs)
}

/// A tokio runtime of one worker for a test's broker (enter it first: the flusher and the
/// maintenance tasks start with the broker).
pub(crate) fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// A single broker (node 1) with its log dir `dir` (the caller has entered a tokio runtime:
/// [`runtime`]).
pub(crate) fn single_broker(dir: &std::path::Path) -> Arc<crate::Broker> {
    let mut props = std::collections::BTreeMap::new();
    props.insert("node.id".to_string(), "1".to_string());
    props.insert("log.dirs".to_string(), dir.display().to_string());
    crate::Broker::open(sluice_config::BrokerConfig::from_properties(props).unwrap()).unwrap()
}

//! AlterReplicaLogDirs: move partitions between the log directories of this broker (what
//! `kafka-reassign-partitions` does for the "log_dirs" of a plan).
//!
//! Like Kafka, the answer comes once the move is accepted; the copy runs in the background and
//! DescribeLogDirs shows the partition in its new directory when the switch is done. The old
//! copy is removed by the store's deferred-deletion rules, so a reader (ours or another
//! process's) holding one of its files never makes the move fail.

use std::path::Path;
use std::sync::Arc;

use kafka_protocol::messages::alter_replica_log_dirs_response::{
    AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
};
use kafka_protocol::messages::{
    AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse, ResponseKind,
};
use kafka_protocol::ResponseError;
use sluice_store::TopicPartition;

use crate::Broker;

/// The index of the configured log dir named `path` (as configured, or the same directory).
fn dir_index(broker: &Broker, path: &str) -> Option<usize> {
    let dirs = broker.logs.dirs();
    let wanted = Path::new(path);
    dirs.iter().position(|d| d == wanted).or_else(|| {
        let canon = std::fs::canonicalize(wanted).ok()?;
        dirs.iter()
            .position(|d| std::fs::canonicalize(d).is_ok_and(|c| c == canon))
    })
}

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: AlterReplicaLogDirsRequest,
    _version: i16,
) -> Option<ResponseKind> {
    let mut results: Vec<AlterReplicaLogDirTopicResult> = Vec::new();
    for dir in req.dirs {
        let target = dir_index(broker, dir.path.as_str());
        for topic in dir.topics {
            let name = topic.name.0.as_str().to_string();
            let state = broker.registry.get(&name);
            let partitions = topic
                .partitions
                .into_iter()
                .map(|p| {
                    let result =
                        AlterReplicaLogDirPartitionResult::default().with_partition_index(p);
                    let Some(target) = target else {
                        return result.with_error_code(ResponseError::LogDirNotFound.code());
                    };
                    if state.as_ref().and_then(|s| s.log(p)).is_none() {
                        return result
                            .with_error_code(ResponseError::UnknownTopicOrPartition.code());
                    }
                    let tp = TopicPartition {
                        topic: name.clone(),
                        partition: p,
                    };
                    let b = broker.clone();
                    // The copy can take a while: not on the connection's task.
                    tokio::task::spawn_blocking(move || {
                        if let Err(e) = b.logs.move_log(&tp, target) {
                            tracing::warn!(?tp, "moving partition to another log dir failed: {e}");
                        }
                    });
                    result
                })
                .collect();
            results.push(
                AlterReplicaLogDirTopicResult::default()
                    .with_topic_name(topic.name)
                    .with_partitions(partitions),
            );
        }
    }
    Some(ResponseKind::AlterReplicaLogDirs(
        AlterReplicaLogDirsResponse::default().with_results(results),
    ))
}

//! DescribeLogDirs: each log directory with the partitions it holds and their sizes, and
//! (KIP-827, version 4) the total and usable bytes of the volume that holds it (statvfs);
//! version 5's IsCordoned is false: Sluice never cordons a log directory.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::describe_log_dirs_response::{
    DescribeLogDirsPartition, DescribeLogDirsResult, DescribeLogDirsTopic,
};
use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse, ResponseKind};

use crate::wire::{str_bytes, topic_name};
use crate::Broker;

/// Kafka's "volume size unknown" (the volume could not be asked).
const UNKNOWN_BYTES: i64 = -1;

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: DescribeLogDirsRequest,
    _version: i16,
) -> Option<ResponseKind> {
    let wanted = |topic: &str, partition: i32| match &req.topics {
        None => true,
        Some(list) => list
            .iter()
            .any(|t| t.topic.0.as_str() == topic && t.partitions.contains(&partition)),
    };
    let results = broker
        .logs
        .dirs()
        .iter()
        .map(|dir| {
            let (total, usable) = sluice_metrics::volume_bytes(dir).map_or(
                (UNKNOWN_BYTES, UNKNOWN_BYTES),
                |(t, u)| {
                    (
                        i64::try_from(t).unwrap_or(i64::MAX),
                        i64::try_from(u).unwrap_or(i64::MAX),
                    )
                },
            );
            let mut topics: BTreeMap<String, Vec<DescribeLogDirsPartition>> = BTreeMap::new();
            for log in broker.logs.logs() {
                let tp = log.topic_partition();
                if log.dir().parent() != Some(dir.as_path()) || !wanted(&tp.topic, tp.partition) {
                    continue;
                }
                topics.entry(tp.topic.clone()).or_default().push(
                    DescribeLogDirsPartition::default()
                        .with_partition_index(tp.partition)
                        .with_partition_size(log.size_bytes() as i64),
                );
            }
            DescribeLogDirsResult::default()
                .with_log_dir(str_bytes(dir.display().to_string()))
                .with_topics(
                    topics
                        .into_iter()
                        .map(|(name, mut partitions)| {
                            partitions.sort_by_key(|p| p.partition_index);
                            DescribeLogDirsTopic::default()
                                .with_name(topic_name(&name))
                                .with_partitions(partitions)
                        })
                        .collect(),
                )
                .with_total_bytes(total)
                .with_usable_bytes(usable)
        })
        .collect();
    Some(ResponseKind::DescribeLogDirs(
        DescribeLogDirsResponse::default().with_results(results),
    ))
}

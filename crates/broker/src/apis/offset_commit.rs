//! OffsetCommit (v2-v9): validated by the group, appended to `__consumer_offsets`, and
//! answered only after the group-commit fsync that covers the append (and, in a cluster, the
//! confirmation of ownership). Until then the offsets are pending: OffsetFetch does not
//! answer them, and if the append is not confirmed they are dropped.

use std::sync::Arc;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse, ResponseKind};
use kafka_protocol::ResponseError;
use sluice_group::OffsetCommit;

use crate::errors::{coordinator_write_code, group_error_code};
use crate::{now_ms, Broker, Reply};

fn all_partitions(req: &OffsetCommitRequest, code: i16) -> OffsetCommitResponse {
    OffsetCommitResponse::default().with_topics(
        req.topics
            .iter()
            .map(|t| {
                OffsetCommitResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                OffsetCommitResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

pub(crate) fn handle(broker: &Arc<Broker>, req: OffsetCommitRequest, _version: i16) -> Reply {
    if !broker.ensure_offsets_topic() {
        let code = ResponseError::CoordinatorNotAvailable.code();
        return crate::ready(Some(ResponseKind::OffsetCommit(all_partitions(&req, code))));
    }
    // Partitions that do not exist are refused one by one; the rest go to the group.
    let mut commits = Vec::new();
    let mut codes: Vec<Vec<i16>> = Vec::new();
    for t in &req.topics {
        let state = broker.registry.get(t.name.0.as_str());
        let mut row = Vec::new();
        for p in &t.partitions {
            // The partition may be owned by another broker of a cluster: it need only exist.
            if !state
                .as_ref()
                .is_some_and(|s| s.has_partition(p.partition_index))
            {
                row.push(ResponseError::UnknownTopicOrPartition.code());
                continue;
            }
            row.push(0);
            commits.push(OffsetCommit {
                topic: t.name.0.to_string(),
                partition: p.partition_index,
                offset: p.committed_offset,
                leader_epoch: p.committed_leader_epoch,
                metadata: p.committed_metadata.as_ref().map(|s| s.to_string()),
            });
        }
        codes.push(row);
    }
    let now = now_ms();
    let group = req.group_id.0.to_string();
    let member = req.member_id.to_string();
    let instance = req.group_instance_id.as_ref().map(|s| s.to_string());
    let generation = req.generation_id_or_member_epoch;
    let (result, written) = broker.groups.run(|c| {
        match c.commit_offsets(
            &group,
            &member,
            instance.as_deref(),
            generation,
            &commits,
            now,
        ) {
            Ok((r, eff, pending)) => (Ok((r, pending)), eff),
            Err(e) => (Err(e), Default::default()),
        }
    });
    let (results, pending) = match result {
        Err(e) => {
            let code = group_error_code(&e);
            return crate::ready(Some(ResponseKind::OffsetCommit(all_partitions(&req, code))));
        }
        Ok(r) => r,
    };
    let mut results = results.into_iter();
    for row in codes.iter_mut() {
        for code in row.iter_mut() {
            if *code == 0 {
                *code = results
                    .next()
                    .and_then(|r| r.err())
                    .as_ref()
                    .map_or(0, group_error_code);
            }
        }
    }
    let flushed = broker.settle_offset_commit(pending, written);
    Box::pin(async move {
        let storage_failed = flushed.await.is_err();
        let topics = req
            .topics
            .iter()
            .zip(codes)
            .map(|(t, row)| {
                OffsetCommitResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .zip(row)
                            .map(|(p, code)| {
                                let code = if storage_failed && code == 0 {
                                    coordinator_write_code(ResponseError::KafkaStorageError.code())
                                } else {
                                    code
                                };
                                OffsetCommitResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect();
        Some(ResponseKind::OffsetCommit(
            OffsetCommitResponse::default().with_topics(topics),
        ))
    })
}

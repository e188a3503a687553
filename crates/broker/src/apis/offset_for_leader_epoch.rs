//! OffsetForLeaderEpoch (v2-v4): a consumer that saw the leader change asks where the epoch it
//! last fetched under ends, to validate its position (KIP-320); the answer is the largest
//! epoch at or below the one asked for and the offset where it ends (the log end for the
//! latest). A `current_leader_epoch` older than the partition's answers FENCED_LEADER_EPOCH,
//! a newer one UNKNOWN_LEADER_EPOCH (this broker has not caught up with the metadata yet), as
//! Kafka does; a partition another broker owns answers NOT_LEADER_OR_FOLLOWER.

use std::sync::Arc;

use kafka_protocol::messages::offset_for_leader_epoch_response::{
    EpochEndOffset, OffsetForLeaderTopicResult,
};
use kafka_protocol::messages::{
    OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, ResponseKind,
};

use crate::registry::{leader_epoch_code, missing_partition_code};
use crate::Broker;

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: OffsetForLeaderEpochRequest,
    _version: i16,
) -> Option<ResponseKind> {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let state = broker.registry.get(t.topic.0.as_str());
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let base = EpochEndOffset::default()
                        .with_partition(p.partition)
                        .with_leader_epoch(-1)
                        .with_end_offset(-1);
                    let Some(log) = state.as_ref().and_then(|s| s.log(p.partition)) else {
                        return base.with_error_code(missing_partition_code(
                            state.as_deref(),
                            p.partition,
                        ));
                    };
                    if let Some(code) =
                        leader_epoch_code(p.current_leader_epoch, log.leader_epoch())
                    {
                        return base.with_error_code(code);
                    }
                    match log.end_offset_for_epoch(p.leader_epoch) {
                        Some((epoch, end)) => base.with_leader_epoch(epoch).with_end_offset(end),
                        None => base,
                    }
                })
                .collect();
            OffsetForLeaderTopicResult::default()
                .with_topic(t.topic)
                .with_partitions(partitions)
        })
        .collect();
    Some(ResponseKind::OffsetForLeaderEpoch(
        OffsetForLeaderEpochResponse::default().with_topics(topics),
    ))
}

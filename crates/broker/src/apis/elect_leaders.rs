//! ElectLeaders (v0-v2): `kafka-leader-election`. Each partition has one logical replica, its
//! owner, which is always its preferred leader: a partition with a live owner answers
//! ELECTION_NOT_NEEDED (the tool reports "valid replica already elected"); one whose owner is
//! being failed over answers PREFERRED_LEADER_NOT_AVAILABLE (the controller assigns it within
//! `sluice.cluster.poll.ms`).

use std::sync::Arc;

use kafka_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use kafka_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse, ResponseKind};
use kafka_protocol::ResponseError;

use crate::wire::{str_bytes, topic_name};
use crate::Broker;

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: ElectLeadersRequest,
    _version: i16,
) -> Option<ResponseKind> {
    let live: Vec<i32> = broker
        .live_brokers()
        .into_iter()
        .map(|(id, _, _)| id)
        .collect();
    // Kafka answers a request for all partitions with the partitions it elected: none here.
    let Some(requested) = req.topic_partitions else {
        return Some(ResponseKind::ElectLeaders(ElectLeadersResponse::default()));
    };
    let results = requested
        .iter()
        .map(|t| {
            let name = t.topic.0.as_str();
            let state = broker.registry.get(name);
            let partitions = t
                .partitions
                .iter()
                .map(|&p| {
                    let base = PartitionResult::default().with_partition_id(p);
                    let Some(owner) = state
                        .as_ref()
                        .filter(|s| s.has_partition(p))
                        .map(|s| s.meta.owners.get(p as usize).copied().unwrap_or(-1))
                    else {
                        return base
                            .with_error_code(ResponseError::UnknownTopicOrPartition.code())
                            .with_error_message(Some(str_bytes(format!(
                                "{name}-{p} does not exist"
                            ))));
                    };
                    if live.contains(&owner) {
                        base.with_error_code(ResponseError::ElectionNotNeeded.code())
                            .with_error_message(Some(str_bytes(
                                "Leader election not needed for topic partition.",
                            )))
                    } else {
                        base.with_error_code(ResponseError::PreferredLeaderNotAvailable.code())
                            .with_error_message(Some(str_bytes(
                                "The partition's owner is being failed over.",
                            )))
                    }
                })
                .collect();
            ReplicaElectionResult::default()
                .with_topic(topic_name(name))
                .with_partition_result(partitions)
        })
        .collect();
    Some(ResponseKind::ElectLeaders(
        ElectLeadersResponse::default().with_replica_election_results(results),
    ))
}

//! AlterPartitionReassignments (v0-v1): `kafka-reassign-partitions --execute` and `--cancel`.
//!
//! Replicas are logical (docs/cluster.md): a partition has one owner, and moving it is an
//! ownership change that copies nothing. The target's first live broker becomes the owner
//! (Kafka's preferred leader is the first replica), and the partition is pinned there so that
//! balancing leaves it. A live owner hands the partition over (docs/cluster.md, planned
//! moves); the move completes when the new owner has acquired it, and
//! ListPartitionReassignments lists it until then. A cancel (null target) takes back a move
//! the owner has not handed over yet; otherwise it answers NO_REASSIGNMENT_IN_PROGRESS, as
//! Kafka does when there is nothing to stop.

use std::sync::Arc;

use kafka_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use kafka_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, ResponseKind,
};
use kafka_protocol::ResponseError;

use crate::wire::str_bytes;
use crate::Broker;

fn outcome(
    broker: &Broker,
    topic: &str,
    partition: i32,
    target: Option<&[i32]>,
) -> Result<(), (ResponseError, String)> {
    let known = broker
        .registry
        .get(topic)
        .is_some_and(|s| s.has_partition(partition));
    if !known {
        return Err((
            ResponseError::UnknownTopicOrPartition,
            format!("Topic partition {topic}-{partition} does not exist."),
        ));
    }
    let live: Vec<i32> = broker
        .live_brokers()
        .into_iter()
        .map(|(id, _, _)| id)
        .collect();
    let Some(target) = target else {
        let record = broker.meta.etcd().and_then(|s| {
            s.view()
                .owners
                .get(&(topic.to_string(), partition))
                .copied()
        });
        // Not handed over yet: moving it back to its owner takes the move back.
        if let Some(owner) = record
            .filter(|r| r.owner.to.is_some())
            .map(|r| r.owner.node)
        {
            return reassign(broker, topic, partition, owner);
        }
        let why = if record.is_some_and(|r| r.owner.from.is_some()) {
            "The partition has been handed over (nothing was copied); it cannot be cancelled."
        } else {
            "No reassignment is in progress."
        };
        return Err((
            ResponseError::NoReassignmentInProgress,
            format!("{topic}-{partition}: {why}"),
        ));
    };
    if target.is_empty() {
        return Err((
            ResponseError::InvalidReplicaAssignment,
            "The target replica list is empty.".into(),
        ));
    }
    let mut seen = Vec::new();
    for b in target {
        if seen.contains(b) {
            return Err((
                ResponseError::InvalidReplicaAssignment,
                format!("Duplicate broker {b} in the target replicas."),
            ));
        }
        seen.push(*b);
    }
    let Some(node) = target.iter().copied().find(|b| live.contains(b)) else {
        return Err((
            ResponseError::InvalidReplicaAssignment,
            format!("None of the target brokers {target:?} is alive."),
        ));
    };
    if let Some(dead) = target.iter().find(|b| !live.contains(b)) {
        return Err((
            ResponseError::InvalidReplicaAssignment,
            format!("Replica assignment has broker {dead}, which is not alive."),
        ));
    }
    reassign(broker, topic, partition, node)
}

/// Move `topic`-`partition` to `node` and pin it there (see [`EtcdStore::reassign`]).
///
/// [`EtcdStore::reassign`]: sluice_meta::EtcdStore::reassign
fn reassign(
    broker: &Broker,
    topic: &str,
    partition: i32,
    node: i32,
) -> Result<(), (ResponseError, String)> {
    let Some(store) = broker.meta.etcd() else {
        // A single broker: it is the only possible owner, and it already owns everything.
        return Ok(());
    };
    for _ in 0..10 {
        let view = store
            .refresh()
            .map_err(|e| (ResponseError::RequestTimedOut, e.to_string()))?;
        let Some(seen) = view.owners.get(&(topic.to_string(), partition)).copied() else {
            return Err((
                ResponseError::UnknownTopicOrPartition,
                format!("{topic}-{partition} has no owner record."),
            ));
        };
        if seen.owner.node == node && seen.owner.pinned && seen.owner.to.is_none() {
            return Ok(());
        }
        match store.reassign(topic, partition, seen, node) {
            Ok(true) => {
                tracing::info!(
                    topic,
                    partition,
                    from = seen.owner.node,
                    to = node,
                    "partition reassigned"
                );
                return Ok(());
            }
            Ok(false) => continue,
            Err(e) => return Err((ResponseError::RequestTimedOut, e.to_string())),
        }
    }
    Err((
        ResponseError::RequestTimedOut,
        format!("{topic}-{partition} kept changing; try again"),
    ))
}

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: AlterPartitionReassignmentsRequest,
    _version: i16,
) -> Option<ResponseKind> {
    let responses = req
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let target: Option<Vec<i32>> =
                        p.replicas.as_ref().map(|r| r.iter().map(|b| b.0).collect());
                    let base = ReassignablePartitionResponse::default()
                        .with_partition_index(p.partition_index);
                    match outcome(
                        broker,
                        t.name.0.as_str(),
                        p.partition_index,
                        target.as_deref(),
                    ) {
                        Ok(()) => base,
                        Err((code, message)) => base
                            .with_error_code(code.code())
                            .with_error_message(Some(str_bytes(message))),
                    }
                })
                .collect();
            ReassignableTopicResponse::default()
                .with_name(t.name.clone())
                .with_partitions(partitions)
        })
        .collect();
    Some(ResponseKind::AlterPartitionReassignments(
        AlterPartitionReassignmentsResponse::default()
            .with_allow_replication_factor_change(req.allow_replication_factor_change)
            .with_responses(responses),
    ))
}

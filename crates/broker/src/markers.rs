//! Transaction markers: the COMMIT or ABORT control batch a transaction coordinator writes to
//! every partition of a transaction once its outcome is decided (Kafka's
//! TransactionMarkerChannelManager and WriteTxnMarkers). A partition this broker owns gets the
//! marker appended here; a partition owned by another broker of a cluster gets it through a
//! WriteTxnMarkers request to its owner. A marker counts as written once it is as durable as
//! an acks=all append (the group-commit round, in a cluster the ownership confirmation too).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    ApiKey, ProducerId, RequestKind, ResponseKind, WriteTxnMarkersRequest,
};
use kafka_protocol::ResponseError;
use sluice_store::{AppendError, ControlType};

use crate::errors::append_error_code;
use crate::flusher::FlushError;
use crate::registry::missing_partition_code;
use crate::wire::topic_name;
use crate::{now_ms, Broker, OFFSETS_TOPIC};

/// Longest wait between two attempts to deliver the markers a partition still lacks.
const RETRY_MAX: Duration = Duration::from_secs(1);
const RETRY_FIRST: Duration = Duration::from_millis(20);

/// One transaction's markers.
#[derive(Clone, Debug)]
pub(crate) struct Markers {
    pub(crate) producer_id: i64,
    pub(crate) producer_epoch: i16,
    pub(crate) coordinator_epoch: i32,
    pub(crate) commit: bool,
    pub(crate) partitions: Vec<(String, i32)>,
}

/// What became of one partition's marker.
#[derive(Debug, PartialEq, Eq)]
enum Delivery {
    Written,
    /// Not now (not owner, storage, etcd): try again.
    Retry(i16),
    /// Never (the topic is gone; the marker is stale): give up on this partition.
    Drop(i16),
}

fn classify(code: i16) -> Delivery {
    use ResponseError as E;
    if code == 0 {
        return Delivery::Written;
    }
    let stale = [
        E::InvalidProducerEpoch.code(),
        E::ProducerFenced.code(),
        E::TransactionCoordinatorFenced.code(),
        E::CorruptMessage.code(),
        E::MessageTooLarge.code(),
        E::InvalidRecord.code(),
    ];
    if stale.contains(&code) {
        Delivery::Drop(code)
    } else {
        Delivery::Retry(code)
    }
}

impl Broker {
    /// Append a marker to a partition this broker owns. Returns the wait for its durability,
    /// or the error code answering WriteTxnMarkers for it.
    pub(crate) fn write_marker(
        &self,
        topic: &str,
        partition: i32,
        m: &Markers,
    ) -> Result<impl std::future::Future<Output = Result<(), FlushError>>, i16> {
        let state = self.registry.get(topic);
        let Some(log) = state.as_ref().and_then(|s| s.log(partition)).cloned() else {
            return Err(missing_partition_code(state.as_deref(), partition));
        };
        if self
            .cluster
            .as_ref()
            .is_some_and(|c| c.is_unconfirmed(log.topic_partition()))
        {
            return Err(ResponseError::NotEnoughReplicas.code());
        }
        if !self.may_write(log.topic_partition()) {
            return Err(ResponseError::NotLeaderOrFollower.code());
        }
        let control = if m.commit {
            ControlType::Commit
        } else {
            ControlType::Abort
        };
        let append = || {
            log.append_marker(
                m.producer_id,
                m.producer_epoch,
                m.coordinator_epoch,
                control,
                now_ms(),
            )
        };
        // A marker on __consumer_offsets completes the transaction's pending offsets: under
        // the group coordinator's lock, in log order with its other appends.
        let outcome = if topic == OFFSETS_TOPIC {
            let (outcome, _) = self.groups.run(|c| {
                let outcome = append();
                if outcome.is_ok() {
                    c.complete_txn(partition, m.producer_id, m.commit);
                }
                (outcome, Default::default())
            });
            outcome
        } else {
            append()
        };
        let outcome = outcome.map_err(|e| {
            tracing::debug!(topic, partition, "transaction marker refused: {e}");
            marker_error_code(&e)
        })?;
        self.fetch_waiters.wake(&log);
        // On storage before the transaction completes, whatever the partition's flush
        // policy: the fsync covers the transaction's records before it too, so a transaction
        // its client saw committed survives a host crash whole, and no partition keeps its
        // records without its marker (an open transaction its coordinator thinks complete,
        // holding the last stable offset). In a cluster the confirmation then publishes it.
        // The `unsynced-offsets-marker` mutation skips it on `__consumer_offsets` (the
        // fault suite's self-test).
        let skip = topic == OFFSETS_TOPIC
            && self.cluster.is_none()
            && !outcome.flush_due
            && sluice_store::mutation::active(
                sluice_store::mutation::Mutation::UnsyncedOffsetsMarker,
            );
        let flushed = (!skip).then(|| self.flusher.request(log.clone()));
        Ok(async move {
            match flushed {
                Some(f) => f.await,
                None => Ok(()),
            }
        })
    }

    /// Write a transaction's markers to every partition, here or at their owners, retrying
    /// what cannot be written yet, until each is written or can never be (its topic deleted,
    /// the marker stale), or `current()` says this broker no longer coordinates the
    /// transaction (its new coordinator writes them). True when every partition was
    /// written or dropped.
    pub(crate) async fn deliver_markers(
        self: &Arc<Self>,
        m: Markers,
        current: impl Fn() -> bool,
    ) -> bool {
        let mut left = m.partitions.clone();
        let mut wait = RETRY_FIRST;
        loop {
            let mut local = Vec::new();
            let mut remote: BTreeMap<i32, Vec<(String, i32)>> = BTreeMap::new();
            for (topic, partition) in &left {
                match self.partition_owner(topic, *partition) {
                    Some(owner) if owner != self.node_id => remote
                        .entry(owner)
                        .or_default()
                        .push((topic.clone(), *partition)),
                    _ => local.push((topic.clone(), *partition)),
                }
            }
            let mut outcomes: Vec<((String, i32), Delivery)> = Vec::new();
            let mut waits = Vec::new();
            for (topic, partition) in local {
                match self.write_marker(&topic, partition, &m) {
                    Ok(f) => waits.push(((topic, partition), f)),
                    Err(code) => outcomes.push(((topic, partition), classify(code))),
                }
            }
            for (tp, f) in waits {
                let d = match f.await {
                    Ok(()) => Delivery::Written,
                    Err(_) => Delivery::Retry(ResponseError::KafkaStorageError.code()),
                };
                outcomes.push((tp, d));
            }
            for (owner, partitions) in remote {
                outcomes.extend(self.send_markers(owner, &m, partitions).await);
            }
            left.clear();
            for ((topic, partition), d) in outcomes {
                match d {
                    Delivery::Written => {}
                    Delivery::Drop(code) => tracing::warn!(
                        topic,
                        partition,
                        producer_id = m.producer_id,
                        code,
                        "a transaction marker cannot be written; given up for this partition"
                    ),
                    Delivery::Retry(code) => {
                        if self.registry.get(&topic).is_none() && self.meta.topic(&topic).is_none()
                        {
                            tracing::info!(
                                topic,
                                partition,
                                "transaction marker dropped: the topic was deleted"
                            );
                        } else {
                            tracing::debug!(
                                topic,
                                partition,
                                code,
                                "transaction marker not written yet"
                            );
                            left.push((topic, partition));
                        }
                    }
                }
            }
            if left.is_empty() {
                return true;
            }
            if !current() {
                return false;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(RETRY_MAX);
            if !current() {
                return false;
            }
        }
    }

    /// The broker that owns a partition: its owner record in a cluster, this broker alone.
    pub(crate) fn partition_owner(&self, topic: &str, partition: i32) -> Option<i32> {
        if self.cluster.is_none() {
            return Some(self.node_id);
        }
        let t = self.meta.topic(topic)?;
        t.owners
            .get(partition as usize)
            .copied()
            .filter(|o| *o >= 0)
    }

    /// WriteTxnMarkers to `owner` for `partitions`.
    async fn send_markers(
        &self,
        owner: i32,
        m: &Markers,
        partitions: Vec<(String, i32)>,
    ) -> Vec<((String, i32), Delivery)> {
        let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
        for (t, p) in &partitions {
            by_topic.entry(t.clone()).or_default().push(*p);
        }
        let marker = WritableTxnMarker::default()
            .with_producer_id(ProducerId(m.producer_id))
            .with_producer_epoch(m.producer_epoch)
            .with_transaction_result(m.commit)
            .with_coordinator_epoch(m.coordinator_epoch)
            .with_topics(
                by_topic
                    .into_iter()
                    .map(|(t, ps)| {
                        WritableTxnMarkerTopic::default()
                            .with_name(topic_name(&t))
                            .with_partition_indexes(ps)
                    })
                    .collect(),
            );
        let body = RequestKind::WriteTxnMarkers(
            WriteTxnMarkersRequest::default().with_markers(vec![marker]),
        );
        let retry = ResponseError::NotLeaderOrFollower.code();
        match self
            .call_peer(owner, ApiKey::WriteTxnMarkers, 1, body)
            .await
        {
            Ok(ResponseKind::WriteTxnMarkers(r)) => {
                let mut codes: BTreeMap<(String, i32), i16> = BTreeMap::new();
                for mk in r.markers {
                    for t in mk.topics {
                        for p in t.partitions {
                            codes.insert((t.name.0.to_string(), p.partition_index), p.error_code);
                        }
                    }
                }
                partitions
                    .into_iter()
                    .map(|tp| {
                        let code = codes.get(&tp).copied().unwrap_or(retry);
                        (tp, classify(code))
                    })
                    .collect()
            }
            Ok(other) => {
                tracing::warn!(owner, "unexpected answer to WriteTxnMarkers: {other:?}");
                partitions
                    .into_iter()
                    .map(|tp| (tp, Delivery::Retry(retry)))
                    .collect()
            }
            Err(e) => {
                tracing::debug!(owner, "WriteTxnMarkers to broker {owner} failed: {e}");
                partitions
                    .into_iter()
                    .map(|tp| (tp, Delivery::Retry(retry)))
                    .collect()
            }
        }
    }
}

/// WriteTxnMarkers' code for a refused marker.
pub(crate) fn marker_error_code(e: &AppendError) -> i16 {
    match e {
        AppendError::ProducerFenced { .. } => ResponseError::InvalidProducerEpoch.code(),
        other => append_error_code(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_markers_are_dropped_and_unavailable_partitions_retried() {
        assert_eq!(classify(0), Delivery::Written);
        let fenced = ResponseError::TransactionCoordinatorFenced.code();
        assert_eq!(classify(fenced), Delivery::Drop(fenced));
        let not_owner = ResponseError::NotLeaderOrFollower.code();
        assert_eq!(classify(not_owner), Delivery::Retry(not_owner));
        let storage = ResponseError::KafkaStorageError.code();
        assert_eq!(classify(storage), Delivery::Retry(storage));
    }
}

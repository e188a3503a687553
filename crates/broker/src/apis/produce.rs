//! Produce: validate and append each partition's batches now (in request order), then for
//! acks=all wait for the group-commit fsync where flush.messages / flush.ms ask for one.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::messages::produce_response::{
    LeaderIdAndEpoch, NodeEndpoint, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{BrokerId, ProduceRequest, ProduceResponse, ResponseKind};
use kafka_protocol::ResponseError;
use sluice_store::AppendOrigin;

use crate::errors::append_error_code;
use crate::flusher::FlushError;
use crate::registry::{missing_partition_code, TopicState};
use crate::wire::str_bytes;
use crate::{now_ms, Broker, Gate, Reply, Verdict, Verdicts};

fn error_partition(index: i32, code: i16, message: Option<String>) -> PartitionProduceResponse {
    PartitionProduceResponse::default()
        .with_index(index)
        .with_error_code(code)
        .with_base_offset(-1)
        .with_log_append_time_ms(-1)
        .with_log_start_offset(-1)
        .with_error_message(message.map(str_bytes))
}

/// The first batch header of a partition's records, if they parse.
fn first_header(records: &[u8]) -> Option<sluice_format::BatchHeader> {
    sluice_format::BatchHeader::parse(records).ok()
}

/// The partitions of a produce request without a transactional id that the cluster has
/// assigned to this broker and that it does not serve yet (it is opening them, or will try
/// again after a failure: `Broker::acquisition_candidate`). Metadata
/// and KIP-951's leader hints name the new owner as soon as the partition is assigned, so a
/// producer can reach it first; answered NOT_LEADER_OR_FOLLOWER, its next pipelined request,
/// handled after the acquisition, would be refused as out of order, and librdkafka answers
/// that by bumping its producer epoch and sending its unacknowledged records again under new
/// sequence numbers: those the former owner had appended (and the new owner recovered) are
/// then written twice (librdkafka issue 4953). The request waits instead
/// ([`Broker::prepare`]).
pub(crate) fn acquisitions_pending(
    broker: &Broker,
    req: &ProduceRequest,
    version: i16,
) -> Vec<sluice_store::TopicPartition> {
    let mut pending = Vec::new();
    if req.transactional_id.is_some() {
        return pending;
    }
    for t in &req.topic_data {
        let name = if version >= 13 {
            broker
                .registry
                .get_by_id(t.topic_id)
                .map(|s| s.meta.name.clone())
        } else {
            Some(t.name.0.to_string())
        };
        let Some(name) = name else { continue };
        for p in &t.partition_data {
            let tp = sluice_store::TopicPartition {
                topic: name.clone(),
                partition: p.index,
            };
            if broker.acquisition_candidate(&tp) {
                pending.push(tp);
            }
        }
    }
    pending
}

/// The topic a request's topic entry names: by id from version 13 on, by name before.
fn topic_state(
    broker: &Broker,
    t: &kafka_protocol::messages::produce_request::TopicProduceData,
    version: i16,
) -> Option<Arc<TopicState>> {
    if version >= 13 {
        broker.registry.get_by_id(t.topic_id)
    } else {
        broker.registry.get(t.name.0.as_str())
    }
}

/// Which transactional partitions of `req` this broker owns whose producer has no open
/// transaction on them yet: the transaction coordinator must verify (transaction version 1)
/// or add (version 2, Produce v12+) them before their first batch is appended (KIP-890). Yields
/// the coordinator's answer per partition, with the verification guard taken on its log
/// before the coordinator was asked; None when nothing needs asking.
/// `allowed`: the topics the producer may write (None: all); the others are never asked for.
pub(crate) fn prepare(
    broker: &Arc<Broker>,
    req: &ProduceRequest,
    version: i16,
    allowed: Option<&std::collections::HashSet<String>>,
) -> Option<Gate> {
    let id = req.transactional_id.as_ref()?.0.to_string();
    let mut producer: Option<(i64, i16)> = None;
    let mut partitions = Vec::new();
    for t in &req.topic_data {
        let state = topic_state(broker, t, version);
        let Some(state) = state else { continue };
        if allowed.is_some_and(|a| !a.contains(&state.meta.name)) {
            continue;
        }
        for p in &t.partition_data {
            let Some(log) = state.log(p.index) else {
                continue;
            };
            let Some(h) = p.records.as_deref().and_then(first_header) else {
                continue;
            };
            if !h.is_transactional() || log.has_open_transaction(h.producer_id, h.producer_epoch) {
                continue;
            }
            producer.get_or_insert((h.producer_id, h.producer_epoch));
            partitions.push((
                (state.meta.name.clone(), p.index),
                log.clone(),
                Some(h.base_sequence),
            ));
        }
    }
    let (pid, epoch) = producer?;
    let check = broker.txn_check_partitions_retrying(&id, pid, epoch, partitions, version >= 12);
    Some(Box::pin(async move {
        let (answer, guards) = check.await;
        let codes: HashMap<sluice_txn::TxnPartition, i16> = match answer {
            Ok(rs) => rs.into_iter().collect(),
            Err(code) => guards.iter().map(|(tp, _, _)| (tp.clone(), code)).collect(),
        };
        guards
            .into_iter()
            .filter_map(|(tp, log, guard)| {
                let code = *codes.get(&tp)?;
                Some((tp, Verdict { code, log, guard }))
            })
            .collect()
    }))
}

/// The answer to a transactional batch for a partition its transaction does not hold (yet):
/// errors a client of any version retries or aborts on, as Kafka translates them.
fn verdict_code(code: i16, version: i16) -> i16 {
    use ResponseError as E;
    if [
        E::NotCoordinator.code(),
        E::CoordinatorNotAvailable.code(),
        E::CoordinatorLoadInProgress.code(),
        E::ConcurrentTransactions.code(),
    ]
    .contains(&code)
    {
        E::NotEnoughReplicas.code()
    } else if code == E::ProducerFenced.code() {
        E::InvalidProducerEpoch.code()
    } else if code == E::TransactionAbortable.code() && version < 11 {
        E::InvalidTxnState.code()
    } else {
        code
    }
}

/// The client id Kafka lets append to its internal topics (`AdminUtils.ADMIN_CLIENT_ID`);
/// any other client gets INVALID_TOPIC_EXCEPTION, as from Kafka's ReplicaManager.
const ADMIN_CLIENT_ID: &str = "__admin_client";

/// One produce request's settings, as each partition's append needs them.
struct Produce<'a> {
    broker: &'a Arc<Broker>,
    client: &'a crate::client::Client,
    version: i16,
    acks: i16,
    /// A transactional request's verdicts ([`prepare`]) and version: None without a
    /// transactional id.
    txn: Option<(&'a Verdicts, i16)>,
    now: i64,
}

/// The produce path, in order: a request with an invalid `acks` is refused whole
/// ([`invalid_acks`]); each topic's partitions are appended now, in request order, before the
/// connection reads its next request ([`produce_topic`]); acks=0 gets no answer; the answer
/// of the others waits for the flush rounds its acks=all appends joined
/// ([`answer_after_flushes`]).
pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: ProduceRequest,
    version: i16,
    verdicts: &Verdicts,
    client: &crate::client::Client,
) -> Reply {
    let acks = req.acks;
    if !matches!(acks, -1..=1) {
        return crate::ready(Some(ResponseKind::Produce(invalid_acks(&req))));
    }
    let produce = Produce {
        broker,
        client,
        version,
        acks,
        txn: req
            .transactional_id
            .is_some()
            .then_some((verdicts, version)),
        now: now_ms(),
    };
    let mut pending = Vec::new();
    let mut responses = Vec::with_capacity(req.topic_data.len());
    for (ti, topic) in req.topic_data.into_iter().enumerate() {
        let (response, flushes) = produce_topic(&produce, topic);
        pending.extend(flushes.into_iter().map(|(pi, flushed)| (ti, pi, flushed)));
        responses.push(response);
    }
    if acks == 0 {
        return crate::ready(None);
    }
    answer_after_flushes(
        broker.clone(),
        client.listener.clone(),
        responses,
        pending,
        version,
    )
}

/// The answer to a request whose `acks` is not -1, 0 or 1: INVALID_REQUIRED_ACKS for every
/// partition, nothing appended.
fn invalid_acks(req: &ProduceRequest) -> ProduceResponse {
    let responses = req
        .topic_data
        .iter()
        .map(|t| {
            TopicProduceResponse::default()
                .with_name(t.name.clone())
                .with_topic_id(t.topic_id)
                .with_partition_responses(
                    t.partition_data
                        .iter()
                        .map(|p| {
                            error_partition(
                                p.index,
                                ResponseError::InvalidRequiredAcks.code(),
                                None,
                            )
                        })
                        .collect(),
                )
        })
        .collect();
    ProduceResponse::default().with_responses(responses)
}

/// Append each partition of one topic entry, in request order: a partition this broker does
/// not know is refused as not written ([`note_unknown_partition`]), the others go through
/// [`produce_partition`]. Counts the topic's metrics once. Returns the topic's answer and the
/// flush rounds its acks=all appends wait for, by partition ordinal.
fn produce_topic(
    produce: &Produce<'_>,
    topic: kafka_protocol::messages::produce_request::TopicProduceData,
) -> (
    TopicProduceResponse,
    Vec<(
        usize,
        impl std::future::Future<Output = Result<(), FlushError>>,
    )>,
) {
    let broker = produce.broker;
    let state = topic_state(broker, &topic, produce.version);
    let unknown_code = if produce.version >= 13 {
        ResponseError::UnknownTopicId.code()
    } else {
        ResponseError::UnknownTopicOrPartition.code()
    };
    let mut partitions = Vec::with_capacity(topic.partition_data.len());
    let mut flushes = Vec::new();
    let mut counts = sluice_metrics::ProduceCounts::default();
    let counters = state.as_deref().map(|s| broker.metrics.topic(&s.meta.name));
    for (pi, p) in topic.partition_data.into_iter().enumerate() {
        let records = p.records.unwrap_or_default();
        let Some(s) = state.as_deref().filter(|s| s.has_partition(p.index)) else {
            counts.add(0, 0, true);
            let name = match state.as_deref() {
                Some(s) => Some(s.meta.name.clone()),
                None if produce.version < 13 => Some(topic.name.0.to_string()),
                None => None,
            };
            note_unknown_partition(produce.client, name, p.index, &records, unknown_code);
            partitions.push(error_partition(p.index, unknown_code, None));
            continue;
        };
        let (response, flushed) = produce_partition(
            produce,
            s,
            p.index,
            records,
            counters.as_deref(),
            &mut counts,
        );
        if let Some(flushed) = flushed {
            flushes.push((pi, flushed));
        }
        partitions.push(response);
    }
    broker.metrics.produced(counters.as_deref(), &counts);
    let response = TopicProduceResponse::default()
        .with_name(topic.name)
        .with_topic_id(topic.topic_id)
        .with_partition_responses(partitions);
    (response, flushes)
}

/// Note the refusal of a partition this broker does not know (`name`, when the request or
/// the registry names the topic): not written, retried. The batches pipelined behind it on
/// this connection must not reach the log once the partition is known here (a partition just
/// added, this broker's view a poll behind the client's metadata:
/// [`ProduceRefusals`](crate::refusals::ProduceRefusals)).
fn note_unknown_partition(
    client: &crate::client::Client,
    name: Option<String>,
    index: i32,
    records: &[u8],
    unknown_code: i16,
) {
    if let Some(name) = name {
        client.produce_refusals.answered(
            (&name, index),
            first_header(records).as_ref(),
            unknown_code,
        );
    }
}

/// Append one partition's records, known to this broker, and count them: a client's batch
/// for an internal topic is refused (only its coordinator writes it); a batch pipelined
/// behind one this connection refused as not written is refused too, before the log sees it
/// ([`ProduceRefusals::refuses_behind`](crate::refusals::ProduceRefusals::refuses_behind));
/// the others go to [`append_one`], and its answer is noted for the batches behind
/// ([`ProduceRefusals::answered`](crate::refusals::ProduceRefusals::answered)).
fn produce_partition(
    produce: &Produce<'_>,
    s: &TopicState,
    index: i32,
    records: bytes::Bytes,
    counters: Option<&sluice_metrics::TopicCounters>,
    counts: &mut sluice_metrics::ProduceCounts,
) -> (
    PartitionProduceResponse,
    Option<impl std::future::Future<Output = Result<(), FlushError>>>,
) {
    let (bytes, messages) = crate::metrics::batch_stats(&records);
    if crate::is_internal_topic(&s.meta.name) && produce.client.id != ADMIN_CLIENT_ID {
        // Only its coordinator writes it: a client's records would be replayed into
        // the groups' or transactions' state at the next load.
        counts.add(bytes, messages, true);
        let response = error_partition(
            index,
            ResponseError::InvalidTopicException.code(),
            Some(format!("Cannot append to internal topic {}", s.meta.name)),
        );
        return (response, None);
    }
    let header = first_header(&records);
    let refusals = &produce.client.produce_refusals;
    let in_order = |h: &sluice_format::BatchHeader| {
        s.log(index).is_some_and(|log| {
            log.next_sequence(h.producer_id, h.producer_epoch) == Some(h.base_sequence)
        })
    };
    if refusals.refuses_behind((&s.meta.name, index), header.as_ref(), in_order) {
        counts.add(bytes, messages, true);
        let response = error_partition(
            index,
            ResponseError::NotLeaderOrFollower.code(),
            Some(
                "an earlier batch of this producer on this connection was refused; \
                 retry in order"
                    .into(),
            ),
        );
        return (response, None);
    }
    let appended = Appended {
        counters,
        counts: &mut *counts,
    };
    let (response, flushed) = append_one(
        produce.broker,
        s,
        index,
        records,
        produce.acks,
        produce.txn,
        produce.now,
        appended,
    );
    refusals.answered((&s.meta.name, index), header.as_ref(), response.error_code);
    counts.add(bytes, messages, response.error_code != 0);
    (response, flushed)
}

/// The answer of a request with acks 1 or -1, once every flush round its acks=all appends
/// joined (`pending`: topic and partition ordinals, the round) is done. A failed round
/// answers its partition as possibly persisted, never as not written; from version 10 on the
/// partitions answered NOT_LEADER_OR_FOLLOWER carry their owner ([`leader_hints`]).
fn answer_after_flushes<F>(
    broker: Arc<Broker>,
    listener: Arc<str>,
    mut responses: Vec<TopicProduceResponse>,
    pending: Vec<(usize, usize, F)>,
    version: i16,
) -> Reply
where
    F: std::future::Future<Output = Result<(), FlushError>> + Send + 'static,
{
    Box::pin(async move {
        for (topic, partition, flushed) in pending {
            if let Err(e) = flushed.await {
                let p = &mut responses[topic].partition_responses[partition];
                let index = p.index;
                // The records were appended (and may be published by a later confirmed
                // round, or be in the new owner's log): "possibly persisted", which clients
                // retry under the same producer sequence, as after Kafka's post-append
                // NOT_ENOUGH_REPLICAS_AFTER_APPEND. NOT_LEADER_OR_FOLLOWER would say they
                // were not written.
                let code = match &e {
                    FlushError::Storage(_) => ResponseError::KafkaStorageError.code(),
                    FlushError::NotOwner(_) => ResponseError::NotEnoughReplicasAfterAppend.code(),
                };
                *p = error_partition(index, code, Some(e.to_string()));
            }
        }
        let node_endpoints = if version >= 10 {
            leader_hints(&broker, &mut responses, &listener)
        } else {
            Vec::new()
        };
        Some(ResponseKind::Produce(
            ProduceResponse::default()
                .with_responses(responses)
                .with_node_endpoints(node_endpoints),
        ))
    })
}

/// Where [`append_one`] counts the logical and physical bytes it appends.
struct Appended<'a> {
    counters: Option<&'a sluice_metrics::TopicCounters>,
    counts: &'a mut sluice_metrics::ProduceCounts,
}

/// What the checks before an append let through ([`check_before_append`]): the records as
/// they are appended (recompressed for the topic, if it asks), their logical size when the
/// recompression knows it, and a transactional batch's verification guard.
type Checked = (
    bytes::Bytes,
    Option<u64>,
    Option<sluice_store::VerificationGuard>,
);

/// Append one partition's records. Returns its answer and, for acks=all data that must be on
/// storage first, the flush round to wait for.
///
/// In order: the partition's log ([`missing_partition_code`] without one), the checks before
/// the log sees anything ([`check_before_append`]), the append on the log's single writer
/// (which validates, deduplicates, assigns offsets and writes), the accounting of what was
/// appended, and the flush round to join ([`join_flush_round`]).
#[allow(clippy::too_many_arguments)]
fn append_one(
    broker: &Broker,
    state: &TopicState,
    index: i32,
    records: bytes::Bytes,
    acks: i16,
    txn: Option<(&Verdicts, i16)>,
    now: i64,
    appended: Appended<'_>,
) -> (
    PartitionProduceResponse,
    Option<impl std::future::Future<Output = Result<(), FlushError>>>,
) {
    let Some(log) = state.log(index) else {
        let code = missing_partition_code(Some(state), index);
        return (error_partition(index, code, None), None);
    };
    let (records, logical, guard) =
        match check_before_append(broker, state, log, index, records, txn) {
            Ok(checked) => checked,
            Err(refused) => return (refused, None),
        };
    let physical = records.len() as u64;
    let logical = logical.or_else(|| {
        appended
            .counters
            .map(|t| crate::metrics::logical_len(&records, t))
    });
    match log.append_verified(records, AppendOrigin::Client, guard, now) {
        Ok(outcome) => {
            if !outcome.duplicate {
                broker.writeback.appended(physical);
                broker.fetch_waiters.wake(log);
                appended.counts.logical += logical.unwrap_or(physical);
                appended.counts.physical += physical;
            }
            let response = PartitionProduceResponse::default()
                .with_index(index)
                .with_base_offset(outcome.base_offset)
                .with_log_append_time_ms(outcome.log_append_time_ms)
                .with_log_start_offset(outcome.log_start_offset);
            (
                response,
                join_flush_round(broker, log, outcome.flush_due, acks),
            )
        }
        Err(e) => {
            tracing::debug!("produce refused: {e}");
            (
                error_partition(index, append_error_code(&e), Some(e.to_string())),
                None,
            )
        }
    }
}

/// The checks a partition's records pass before the log sees them, in order; the first that
/// fails answers the partition, with nothing written: ownership confirmed in etcd
/// ([`refuse_unconfirmed`]), this broker may write the partition now (it holds it, before its
/// write deadline: docs/cluster.md, Fencing), a transactional batch belongs to a transaction
/// open on the partition or one the coordinator verified ([`admit_transactional`], KIP-890),
/// the records recompressed for a topic whose `compression.type` names a codec, and on a
/// compacted topic every record has a key ([`every_record_has_a_key`]).
fn check_before_append(
    broker: &Broker,
    state: &TopicState,
    log: &Arc<sluice_store::Log>,
    index: i32,
    mut records: bytes::Bytes,
    txn: Option<(&Verdicts, i16)>,
) -> Result<Checked, PartitionProduceResponse> {
    if let Some(refused) = refuse_unconfirmed(broker, log, index) {
        return Err(refused);
    }
    if !broker.may_write(log.topic_partition()) {
        return Err(error_partition(
            index,
            ResponseError::NotLeaderOrFollower.code(),
            Some("this broker is not the partition's owner now".into()),
        ));
    }
    // KIP-890: the verification guard its transaction's verdict came with (none for a
    // request without a transactional id: the log refuses a transactional batch of it that
    // would open a transaction).
    let mut guard = None;
    if let Some((verdicts, version)) = txn {
        match admit_transactional(log, &records, verdicts, version) {
            Ok(g) => guard = g,
            Err((code, message)) => return Err(error_partition(index, code, Some(message))),
        }
    }
    let mut logical = None;
    if let Some(target) = crate::recompress::target_codec(&state.config.compression_type) {
        match crate::recompress::recompress(records, target) {
            Ok((r, l)) => (records, logical) = (r, l),
            Err(e) => {
                return Err(error_partition(
                    index,
                    ResponseError::CorruptMessage.code(),
                    Some(e),
                ))
            }
        }
    }
    if state.config.compacts() {
        if let Err(message) = every_record_has_a_key(&records) {
            let message = format!("{message} in topic partition {}-{index}", state.meta.name);
            return Err(error_partition(
                index,
                ResponseError::InvalidRecord.code(),
                Some(message),
            ));
        }
    }
    Ok((records, logical, guard))
}

/// The refusal of an append to a partition whose last ownership confirmation could not
/// reach etcd (`Cluster::is_unconfirmed`), if it is one: nothing is written (such appends
/// could not be acknowledged, yet would be published once ownership is confirmed:
/// ARCHITECTURE.md), and etcd is asked again by a flush round, so the client's retry gets
/// through once it answers.
fn refuse_unconfirmed(
    broker: &Broker,
    log: &Arc<sluice_store::Log>,
    index: i32,
) -> Option<PartitionProduceResponse> {
    if !broker
        .cluster
        .as_ref()
        .is_some_and(|c| c.is_unconfirmed(log.topic_partition()))
    {
        return None;
    }
    // Ask etcd again (a flush round confirms); the client's retry gets through once it
    // answers. Nothing was written: NOT_ENOUGH_REPLICAS, retriable, not persisted.
    let confirmed = broker.flusher.request(log.clone());
    tokio::spawn(async move {
        if let Err(e) = confirmed.await {
            tracing::debug!("ownership not confirmed yet: {e}");
        }
    });
    Some(error_partition(
        index,
        ResponseError::NotEnoughReplicas.code(),
        Some("the partition's ownership cannot be confirmed in etcd now".into()),
    ))
}

/// The flush round an append joins, if any; returned only for acks=all, which waits for it.
///
/// Keeps (ARCHITECTURE.md): acks=all with a flush due is answered only after the fsync that
/// covers the append; in a cluster every append joins a round, since only a confirmed round
/// publishes data (docs/cluster.md, Fencing, point 7).
fn join_flush_round(
    broker: &Broker,
    log: &Arc<sluice_store::Log>,
    flush_due: bool,
    acks: i16,
) -> Option<impl std::future::Future<Output = Result<(), FlushError>>> {
    // In a cluster no other broker holds a copy: acks=all waits for the fsync (and
    // the ownership confirmation) whatever flush.messages says. acks=0/1 data joins a
    // round too, in the background: readers see data only once a confirmed round
    // has covered it.
    if !(flush_due || broker.cluster.is_some()) {
        return None;
    }
    let flushed = broker.flusher.request(log.clone());
    if acks == -1 {
        return Some(flushed);
    }
    // Honour flush.messages without making acks=0/1 wait for it.
    tokio::spawn(async move {
        if let Err(e) = flushed.await {
            tracing::error!("background flush failed: {e}");
        }
    });
    None
}

/// A transactional produce request's batches for one partition: all transactional (as Kafka
/// requires), and either of a transaction already open on this log or of one the
/// coordinator verified or added this partition to ([`prepare`]). Yields the verification
/// guard to append with; the log checks it (a marker written since the coordinator was
/// asked has cleared it).
fn admit_transactional(
    log: &Arc<sluice_store::Log>,
    records: &[u8],
    verdicts: &Verdicts,
    version: i16,
) -> Result<Option<sluice_store::VerificationGuard>, (i16, String)> {
    let Some(h) = first_header(records) else {
        return Ok(None); // the log store refuses it with the precise error
    };
    if !h.is_transactional() {
        return Err((
            ResponseError::InvalidRecord.code(),
            "a transactional produce request holds a batch that is not transactional".into(),
        ));
    }
    if log.has_open_transaction(h.producer_id, h.producer_epoch) {
        return Ok(None);
    }
    let tp = log.topic_partition();
    let verdict = verdicts.get(&(tp.topic.clone(), tp.partition));
    let retry = || {
        Err((
            ResponseError::NotEnoughReplicas.code(),
            "the partition's transaction could not be verified; retry".into(),
        ))
    };
    match verdict {
        // The log was re-opened since (its guards are gone): verified again on the retry.
        Some(v) if v.code == 0 && !Arc::ptr_eq(&v.log, log) => retry(),
        Some(v) if v.code == 0 => Ok(v.guard),
        Some(v) => Err((
            verdict_code(v.code, version),
            "the transaction coordinator did not confirm this partition is in the transaction"
                .into(),
        )),
        None => retry(),
    }
}

/// Largest records section of one batch the key check decompresses (a batch beyond it is
/// refused).
const KEY_CHECK_MAX_BYTES: usize = 64 << 20;

/// A compacted topic refuses records without a key, as Kafka's `LogValidator` does (the one
/// per-record check of the produce path, only on compacted topics: see ARCHITECTURE.md).
/// Batches that do not parse pass, so that the log store refuses them with the precise error.
fn every_record_has_a_key(records: &[u8]) -> Result<(), String> {
    let Ok(batches) = sluice_format::parse_batches(records, None) else {
        return Ok(());
    };
    for b in batches {
        let h = b.header;
        if h.is_control() {
            continue;
        }
        let body = &records[b.range()][sluice_format::HEADER_LEN..];
        let section =
            sluice_format::codec::decompress(h.compression_codec(), body, KEY_CHECK_MAX_BYTES)
                .map_err(|e| format!("cannot read the records of a batch: {e}"))?;
        let recs = sluice_format::records::parse_records(&section, h.record_count)
            .map_err(|e| format!("cannot read the records of a batch: {e}"))?;
        if recs.iter().any(|r| r.key.is_none()) {
            return Err("Compacted topic cannot accept message without key".into());
        }
    }
    Ok(())
}

/// KIP-951: partitions answered NOT_LEADER_OR_FOLLOWER name their owner (`current_leader`),
/// and the response lists its endpoint, so the producer sends there at once, without a
/// metadata round trip or a retry backoff.
fn leader_hints(
    broker: &Broker,
    topics: &mut [TopicProduceResponse],
    listener: &str,
) -> Vec<NodeEndpoint> {
    let mut leaders = Vec::new();
    for t in topics.iter_mut() {
        let name = if t.name.0.is_empty() {
            broker
                .registry
                .get_by_id(t.topic_id)
                .map(|s| s.meta.name.clone())
        } else {
            Some(t.name.0.to_string())
        };
        let Some(name) = name else { continue };
        let not_leader = ResponseError::NotLeaderOrFollower.code();
        for p in t
            .partition_responses
            .iter_mut()
            .filter(|p| p.error_code == not_leader)
        {
            if let Some((leader, epoch)) = broker.leader_hint(&name, p.index) {
                p.current_leader = LeaderIdAndEpoch::default()
                    .with_leader_id(BrokerId(leader))
                    .with_leader_epoch(epoch);
                leaders.push(leader);
            }
        }
    }
    let endpoints = broker.endpoints_of(&leaders, listener);
    // The hints and the endpoints come from two reads of the view: a hinted broker that left
    // in between is not hinted (the client asks Metadata, as without a hint).
    if leaders
        .iter()
        .any(|l| !endpoints.iter().any(|(e, _, _)| e == l))
    {
        for t in topics.iter_mut() {
            for p in t.partition_responses.iter_mut() {
                let id = p.current_leader.leader_id.0;
                if id >= 0 && !endpoints.iter().any(|(e, _, _)| *e == id) {
                    p.current_leader = LeaderIdAndEpoch::default()
                        .with_leader_id(BrokerId(-1))
                        .with_leader_epoch(-1);
                }
            }
        }
    }
    endpoints
        .into_iter()
        .map(|(id, host, port)| {
            NodeEndpoint::default()
                .with_node_id(BrokerId(id))
                .with_host(str_bytes(host))
                .with_port(i32::from(port))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::refusals::{ProduceRefusals, REFUSALS_BEHIND_MAX};
    use crate::testutil::{runtime, single_broker};

    fn header(pid: i64, epoch: i16, seq: i32) -> sluice_format::BatchHeader {
        sluice_format::BatchHeader {
            base_offset: 0,
            batch_length: 0,
            partition_leader_epoch: 0,
            magic: 2,
            crc: 0,
            attributes: 0,
            last_offset_delta: 0,
            base_timestamp: 0,
            max_timestamp: 0,
            producer_id: pid,
            producer_epoch: epoch,
            base_sequence: seq,
            record_count: 1,
        }
    }

    const NOT_LEADER: i16 = 6;
    const OUT_OF_ORDER: i16 = 45;

    /// The answer to a batch whose append the log would answer `log_code`, as `handle` gives
    /// it: refused first when it comes behind a refusal.
    fn answer(
        r: &ProduceRefusals,
        tp: (&str, i32),
        h: Option<&sluice_format::BatchHeader>,
        log_code: i16,
    ) -> i16 {
        if r.refuses_behind(tp, h, |_| false) {
            return NOT_LEADER;
        }
        r.answered(tp, h, log_code);
        log_code
    }

    /// Found by an adversary on f0dc644, since fixed: `refuses_behind` ends the refusal entry
    /// as soon as the log's next sequence equals the batch's, before the batch is appended;
    /// when its append then failed with a retriable code other than NOT_LEADER_OR_FOLLOWER,
    /// nothing guarded the gap it left, and the next pipelined batch went to the log and was
    /// answered OUT_OF_ORDER_SEQUENCE_NUMBER. Now such a refusal starts the entry again.
    ///
    /// Interleaving (one connection C1 of producer 7, epoch 0; batches of one record):
    /// 1. C1 carries 10, 11, 12 pipelined. 10 is answered NOT_LEADER_OR_FOLLOWER
    ///    (`may_write` false, produce.rs:480-488): entry (7, 0, 10).
    /// 2. 10's retry is written through another connection to this broker (the log's next
    ///    sequence is 11).
    /// 3. 11 on C1: `in_order` (produce.rs:358-362) is true, the entry is removed
    ///    (produce.rs:111). `append_one` answers NOT_ENOUGH_REPLICAS: the ownership is
    ///    unconfirmed (produce.rs:458-478), or for a transactional producer the partition's
    ///    verification is missing (`admit_transactional`'s `retry()`). 11 is not written;
    ///    `answered` (produce.rs:140) has no entry to keep.
    /// 4. The flush round confirms the ownership. 12 on C1: no entry, the log (next 11)
    ///    answers OUT_OF_ORDER_SEQUENCE_NUMBER. Before 8bf4fd6, 11 and 12 were both refused
    ///    NOT_LEADER_OR_FOLLOWER behind the entry and retried in order. librdkafka answers
    ///    the out-of-order by bumping its epoch and writing its unacknowledged records
    ///    again.
    #[test]
    fn an_in_order_batch_whose_append_fails_retriably_guards_its_own_gap() {
        const NOT_ENOUGH_REPLICAS: i16 = 19;
        let r = ProduceRefusals::default();
        let tp = ("t", 1);
        assert_eq!(
            answer(&r, tp, Some(&header(7, 0, 10)), NOT_LEADER),
            NOT_LEADER
        );
        // 10 written through another connection: 11 is in order for the log.
        assert!(!r.refuses_behind(tp, Some(&header(7, 0, 11)), |_| true));
        // ... but not written: ownership unconfirmed (or the transaction unverified).
        r.answered(tp, Some(&header(7, 0, 11)), NOT_ENOUGH_REPLICAS);
        // 12, pipelined behind 11: the log's next is 11, it would answer out of order.
        assert!(
            r.refuses_behind(tp, Some(&header(7, 0, 12)), |h| h.base_sequence == 11),
            "12 goes to the log across the gap 11 left: OUT_OF_ORDER_SEQUENCE_NUMBER where \
             NOT_LEADER_OR_FOLLOWER was answered before 8bf4fd6"
        );
        // 11's retry, then 12's, are taken in order.
        assert!(!r.refuses_behind(tp, Some(&header(7, 0, 11)), |h| h.base_sequence == 11));
        r.answered(tp, Some(&header(7, 0, 11)), 0);
        assert!(!r.refuses_behind(tp, Some(&header(7, 0, 12)), |h| h.base_sequence == 12));
    }

    /// A refusal whose batch was written since (its retry went to another connection or
    /// broker) is stale: a later batch the log takes in order goes through, instead of being
    /// refused and leaving a gap the next batch would be answered out of order for (the
    /// librdkafka epoch bumps of the fault runs of seeds 104 and 105).
    #[test]
    fn a_batch_the_log_takes_in_order_is_not_refused_behind_a_stale_refusal() {
        let r = ProduceRefusals::default();
        let tp = ("t", 1);
        assert_eq!(
            answer(&r, tp, Some(&header(7, 0, 10)), NOT_LEADER),
            NOT_LEADER
        );
        // 10 was retried elsewhere and written; 11 comes here, in order for the log.
        assert!(!r.refuses_behind(tp, Some(&header(7, 0, 11)), |_| true));
        r.answered(tp, Some(&header(7, 0, 11)), 0);
        // The entry is gone: 12 is not refused either, whatever the log would say.
        assert!(!r.refuses_behind(tp, Some(&header(7, 0, 12)), |_| false));
        // Out of order for the log (a producer it does not know, or a real gap): refused.
        assert_eq!(
            answer(&r, tp, Some(&header(8, 0, 20)), NOT_LEADER),
            NOT_LEADER
        );
        assert!(r.refuses_behind(tp, Some(&header(8, 0, 21)), |_| false));
    }

    /// A batch pipelined behind one this connection refused finds a gap: it is refused the
    /// same way, not as out of order, until the client's retry of the refused batch.
    #[test]
    fn a_gap_behind_a_refusal_of_the_same_connection_is_refused_as_not_leader() {
        assert_eq!(ResponseError::NotLeaderOrFollower.code(), NOT_LEADER);
        assert_eq!(ResponseError::OutOfOrderSequenceNumber.code(), OUT_OF_ORDER);
        let r = ProduceRefusals::default();
        let tp = ("t", 1);
        // A (sequence 10) refused; B (11, sent before the client read that) finds the gap.
        assert_eq!(
            answer(&r, tp, Some(&header(7, 0, 10)), NOT_LEADER),
            NOT_LEADER
        );
        assert_eq!(
            answer(&r, tp, Some(&header(7, 0, 11)), OUT_OF_ORDER),
            NOT_LEADER
        );
        assert_eq!(
            answer(&r, tp, Some(&header(7, 0, 12)), NOT_LEADER),
            NOT_LEADER
        );
        // Another partition, producer or epoch is not behind it.
        assert_eq!(
            answer(&r, ("t", 2), Some(&header(7, 0, 11)), OUT_OF_ORDER),
            OUT_OF_ORDER
        );
        assert_eq!(
            answer(&r, tp, Some(&header(8, 0, 11)), OUT_OF_ORDER),
            OUT_OF_ORDER
        );
        // The refusal is still the one at 10 (a later producer's gap ended nothing).
        assert_eq!(
            answer(&r, tp, Some(&header(7, 0, 11)), OUT_OF_ORDER),
            NOT_LEADER
        );
        // The retry of A is answered as it is (out of order when the gap is real), and ends
        // the entry: a gap after that is a gap.
        assert_eq!(
            answer(&r, tp, Some(&header(7, 0, 10)), OUT_OF_ORDER),
            OUT_OF_ORDER
        );
        assert_eq!(
            answer(&r, tp, Some(&header(7, 0, 11)), OUT_OF_ORDER),
            OUT_OF_ORDER
        );
        // An append ends it too.
        assert_eq!(
            answer(&r, tp, Some(&header(7, 0, 20)), NOT_LEADER),
            NOT_LEADER
        );
        assert_eq!(answer(&r, tp, Some(&header(7, 0, 20)), 0), 0);
        assert_eq!(
            answer(&r, tp, Some(&header(7, 0, 22)), OUT_OF_ORDER),
            OUT_OF_ORDER
        );
        // Batches without a producer id are never tracked.
        assert_eq!(
            answer(&r, tp, Some(&header(-1, -1, -1)), NOT_LEADER),
            NOT_LEADER
        );
        assert_eq!(answer(&r, tp, None, OUT_OF_ORDER), OUT_OF_ORDER);
    }
    /// ADVERSARY: a retriable refusal of another kind between the refused batch and the one
    /// behind it ended the rule. A (10) is refused NOT_LEADER_OR_FOLLOWER; B (11, pipelined)
    /// would be refused NOT_ENOUGH_REPLICAS (the ownership of the partition, just acquired,
    /// could not be confirmed in etcd yet: `append_one`), nothing written either; C (12,
    /// pipelined behind both) finds the gap at 10. Both are refused before the log.
    #[test]
    fn a_gap_behind_a_refusal_stays_refused_after_a_retriable_error_between() {
        const NOT_ENOUGH_REPLICAS: i16 = 19;
        assert_eq!(ResponseError::NotEnoughReplicas.code(), NOT_ENOUGH_REPLICAS);
        let r = ProduceRefusals::default();
        let tp = ("t", 1);
        assert_eq!(
            answer(&r, tp, Some(&header(7, 0, 10)), NOT_LEADER),
            NOT_LEADER
        );
        assert_eq!(
            answer(&r, tp, Some(&header(7, 0, 11)), NOT_ENOUGH_REPLICAS),
            NOT_LEADER
        );
        assert_eq!(
            answer(&r, tp, Some(&header(7, 0, 12)), OUT_OF_ORDER),
            NOT_LEADER,
            "a batch pipelined behind one refused NOT_LEADER_OR_FOLLOWER (and one refused \
             NOT_ENOUGH_REPLICAS) was answered OUT_OF_ORDER_SEQUENCE_NUMBER"
        );
    }

    /// ADVERSARY (31834a6): a batch behind a refusal that the log would take (a producer it
    /// does not know yet accepts any sequence) is refused before it is appended, so the
    /// refused batch's retry comes first.
    #[test]
    fn a_batch_behind_a_refusal_is_refused_even_when_the_log_would_take_it() {
        let r = ProduceRefusals::default();
        let tp = ("t", 1);
        assert_eq!(
            answer(&r, tp, Some(&header(7, 0, 0)), NOT_LEADER),
            NOT_LEADER
        );
        assert_eq!(answer(&r, tp, Some(&header(7, 0, 1)), 0), NOT_LEADER);
        assert_eq!(answer(&r, tp, Some(&header(7, 0, 0)), 0), 0);
        assert_eq!(answer(&r, tp, Some(&header(7, 0, 1)), 0), 0);
        // Given up after the client's in-flight window: a gap found later is a real one.
        assert_eq!(
            answer(&r, tp, Some(&header(7, 0, 5)), NOT_LEADER),
            NOT_LEADER
        );
        for seq in 6..6 + REFUSALS_BEHIND_MAX as i32 {
            assert_eq!(
                answer(&r, tp, Some(&header(7, 0, seq)), OUT_OF_ORDER),
                NOT_LEADER
            );
        }
        assert_eq!(
            answer(&r, tp, Some(&header(7, 0, 6)), OUT_OF_ORDER),
            OUT_OF_ORDER
        );
    }

    /// Found by an adversary on 0cfb7e3, since fixed: the set of "refused as not written"
    /// answers that start a refusal entry missed UNKNOWN_TOPIC_OR_PARTITION (and UNKNOWN_TOPIC_ID from v13), which
    /// `handle` answers before `append_one` for a partition this broker's registry does not
    /// hold (produce.rs:346-349), without calling `answered` (produce.rs:388-392). Java and
    /// librdkafka retry it (metadata refresh, same sequence): nothing was written.
    ///
    /// Interleaving (cluster; connection C1 of idempotent producer 7, epoch 0): partition t-1
    /// was just added (CreatePartitions) or topic t just created; the client's Metadata (from
    /// a broker whose view has it) names broker A as t-1's owner; A's registry lags a poll.
    /// 1. C1 carries t-1 sequence 0, then sequence 1 pipelined. Sequence 0 finds no
    ///    partition t-1: UNKNOWN_TOPIC_OR_PARTITION, no entry (produce.rs:346-349).
    /// 2. A's view catches up, t-1 is opened.
    /// 3. Sequence 1 on C1: no entry, so `refuses_behind` lets it through; the log does not
    ///    know producer 7 and takes any sequence (`ProducerStates::check`, store
    ///    producer.rs:144-147): appended across the gap.
    /// 4. The retry of sequence 0: the log's next is 2, OUT_OF_ORDER_SEQUENCE_NUMBER;
    ///    librdkafka bumps its epoch and writes its unacknowledged records again (the
    ///    duplicates of librdkafka issue 4953 the rule exists to prevent).
    #[test]
    fn a_batch_behind_one_refused_as_an_unknown_partition_waits_for_its_retry() {
        use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime();
        let _in_runtime = rt.enter();
        let broker = single_broker(dir.path());
        broker
            .create_topic("t", 1, std::collections::BTreeMap::new())
            .unwrap();
        let client = crate::client::Client {
            id: "producer".into(),
            host: "/127.0.0.1".into(),
            listener: std::sync::Arc::from("PLAINTEXT"),
            principal: std::sync::Arc::from(crate::client::ANONYMOUS),
            address: "127.0.0.1".into(),
            api_key: 0,
            produce_refusals: std::sync::Arc::new(ProduceRefusals::default()),
            share_sessions: Default::default(),
        };
        let produce = |seq: i32| -> i16 {
            let records = sluice_format::BatchBuilder::new()
                .record(1_700_000_000_000, None, Some(b"v".as_slice()))
                .producer(7, 0, seq)
                .build();
            let req = ProduceRequest::default()
                .with_acks(-1)
                .with_timeout_ms(1000)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(kafka_protocol::messages::TopicName(str_bytes("t")))
                    .with_partition_data(vec![PartitionProduceData::default()
                        .with_index(1)
                        .with_records(Some(bytes::Bytes::from(records)))])]);
            let reply = handle(&broker, req, 9, &Verdicts::new(), &client);
            match rt.block_on(reply) {
                Some(ResponseKind::Produce(r)) => r.responses[0].partition_responses[0].error_code,
                other => panic!("unexpected answer {other:?}"),
            }
        };
        // Sequence 0: A's registry does not hold t-1 yet. Retriable, nothing written.
        assert_eq!(produce(0), ResponseError::UnknownTopicOrPartition.code());
        // A's view catches up: t-1 is opened.
        broker.add_partitions("t", 2, false).unwrap();
        // Sequence 1, pipelined behind 0 on the same connection.
        let behind = produce(1);
        // The client's retry of sequence 0.
        let retry = produce(0);
        assert!(
            behind != 0 && retry == 0,
            "sequence 1 (pipelined behind sequence 0, refused UNKNOWN_TOPIC_OR_PARTITION) was \
             answered {behind} (0: appended across the gap) and the retry of 0 then {retry} \
             (45: OUT_OF_ORDER_SEQUENCE_NUMBER)"
        );
    }

    /// Found by an adversary on 0cfb7e3, since fixed: an answer to a batch of an older epoch
    /// of the producer ended the refusal entry of its current epoch. `answered` removes the entry keyed by (partition,
    /// producer id) on any answer that is not a refusal as not written (produce.rs:151-153),
    /// whatever the batch's epoch; `refuses_behind` let that batch through because its epoch
    /// is not the entry's (produce.rs:107). A zombie of the same transactional id (the same
    /// producer id, the epoch before the fencing) sharing the connection (a proxy: the case
    /// `ProduceRefusals` names) is answered INVALID_PRODUCER_EPOCH and erases the live
    /// producer's entry.
    ///
    /// Interleaving (connection C1 carries producer 7 at epoch 5, the live instance, and its
    /// zombie at epoch 4):
    /// 1. Epoch 5 sequence 10 is refused NOT_LEADER_OR_FOLLOWER (`may_write` false,
    ///    produce.rs:480-488): entry (7, 5, 10).
    /// 2. The zombie's batch (epoch 4) goes to the log: INVALID_PRODUCER_EPOCH; `answered`
    ///    removes the entry.
    /// 3. Epoch 5 sequence 11, pipelined behind 10, goes to the log across 10's gap:
    ///    OUT_OF_ORDER_SEQUENCE_NUMBER (or, on a log that does not know producer 7, appended
    ///    before 10).
    #[test]
    fn an_older_epochs_answer_leaves_the_refusal_of_the_current_epoch() {
        const INVALID_PRODUCER_EPOCH: i16 = 47;
        assert_eq!(
            ResponseError::InvalidProducerEpoch.code(),
            INVALID_PRODUCER_EPOCH
        );
        let r = ProduceRefusals::default();
        let tp = ("t", 1);
        assert_eq!(
            answer(&r, tp, Some(&header(7, 5, 10)), NOT_LEADER),
            NOT_LEADER
        );
        // The zombie (epoch 4) of the same producer id, on the same connection.
        assert_eq!(
            answer(&r, tp, Some(&header(7, 4, 3)), INVALID_PRODUCER_EPOCH),
            INVALID_PRODUCER_EPOCH
        );
        assert_eq!(
            answer(&r, tp, Some(&header(7, 5, 11)), OUT_OF_ORDER),
            NOT_LEADER,
            "epoch 5 sequence 11, pipelined behind 10 (refused), reached the log across the gap \
             after a zombie's batch of epoch 4 was answered"
        );
    }

    /// ADVERSARY: producer sequences wrap from i32::MAX to 0 (Kafka's
    /// `DefaultRecordBatch.incrementSequence`, librdkafka likewise). The batch behind a
    /// refused one at the end of the range starts at 0, which `h.base_sequence > seq` does
    /// not take for "behind": it is answered OUT_OF_ORDER_SEQUENCE_NUMBER.
    #[test]
    fn a_gap_behind_a_refusal_at_the_sequence_wrap_is_refused_as_not_leader() {
        let r = ProduceRefusals::default();
        let tp = ("t", 1);
        assert_eq!(
            answer(&r, tp, Some(&header(7, 0, i32::MAX)), NOT_LEADER),
            NOT_LEADER
        );
        assert_eq!(
            answer(&r, tp, Some(&header(7, 0, 0)), OUT_OF_ORDER),
            NOT_LEADER,
            "the batch after sequence i32::MAX (sequence 0), behind the refused one"
        );
    }

    fn message(r: &PartitionProduceResponse) -> String {
        r.error_message
            .as_ref()
            .map(|m| m.as_str().to_string())
            .unwrap_or_default()
    }

    /// A request with an invalid `acks` is refused whole: every partition of every topic, in
    /// request order, with INVALID_REQUIRED_ACKS.
    #[test]
    fn invalid_acks_refuse_every_partition_in_request_order() {
        use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
        let topic = |name: &'static str, indexes: &[i32]| {
            TopicProduceData::default()
                .with_name(kafka_protocol::messages::TopicName(str_bytes(name)))
                .with_partition_data(
                    indexes
                        .iter()
                        .map(|i| PartitionProduceData::default().with_index(*i))
                        .collect(),
                )
        };
        let req = ProduceRequest::default()
            .with_acks(2)
            .with_topic_data(vec![topic("a", &[3, 0]), topic("b", &[1])]);
        let answer = invalid_acks(&req);
        let got: Vec<(String, i32, i16, i64)> = answer
            .responses
            .iter()
            .flat_map(|t| {
                t.partition_responses
                    .iter()
                    .map(|p| (t.name.0.to_string(), p.index, p.error_code, p.base_offset))
            })
            .collect();
        let invalid = ResponseError::InvalidRequiredAcks.code();
        assert_eq!(
            got,
            [
                ("a".to_string(), 3, invalid, -1),
                ("a".to_string(), 0, invalid, -1),
                ("b".to_string(), 1, invalid, -1),
            ]
        );
    }

    /// The checks before an append, on a compacted topic of a single broker: a record
    /// without a key is refused INVALID_RECORD naming the partition; in a transactional
    /// request a batch that is not transactional is refused before the key check; a batch
    /// whose records all have keys passes unchanged, with no verification guard. Nothing
    /// refused reaches the log.
    #[test]
    fn the_checks_before_an_append_refuse_in_order_and_write_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime();
        let _in_runtime = rt.enter();
        let broker = single_broker(dir.path());
        let mut configs = std::collections::BTreeMap::new();
        configs.insert("cleanup.policy".to_string(), "compact".to_string());
        let state = broker.create_topic("t", 1, configs).unwrap();
        let log = state.log(0).unwrap().clone();
        let keyless = bytes::Bytes::from(
            sluice_format::BatchBuilder::new()
                .record(1_700_000_000_000, None, Some(b"v".as_slice()))
                .build(),
        );
        let keyed = bytes::Bytes::from(
            sluice_format::BatchBuilder::new()
                .record(
                    1_700_000_000_000,
                    Some(b"k".as_slice()),
                    Some(b"v".as_slice()),
                )
                .build(),
        );
        let refused = check_before_append(&broker, &state, &log, 0, keyless.clone(), None)
            .expect_err("a record without a key passed on a compacted topic");
        assert_eq!(refused.error_code, ResponseError::InvalidRecord.code());
        assert_eq!(
            message(&refused),
            "Compacted topic cannot accept message without key in topic partition t-0"
        );
        let verdicts = Verdicts::new();
        let refused = check_before_append(&broker, &state, &log, 0, keyless, Some((&verdicts, 9)))
            .expect_err("a batch that is not transactional passed in a transactional request");
        assert_eq!(refused.error_code, ResponseError::InvalidRecord.code());
        assert!(
            message(&refused).contains("not transactional"),
            "the key was checked before the transaction: {}",
            message(&refused)
        );
        let (records, logical, guard) =
            check_before_append(&broker, &state, &log, 0, keyed.clone(), None).unwrap();
        assert_eq!(records, keyed);
        assert_eq!(logical, None);
        assert!(guard.is_none());
        assert_eq!(log.log_end_offset(), 0, "a check wrote into the log");
    }

    /// A flush round that fails after the append answers its partition as possibly
    /// persisted (NOT_ENOUGH_REPLICAS_AFTER_APPEND when ownership could not be confirmed,
    /// KAFKA_STORAGE_ERROR when the fsync failed), never as not written; the other
    /// partitions keep their answers.
    #[test]
    fn a_failed_flush_round_answers_possibly_persisted() {
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime();
        let _in_runtime = rt.enter();
        let broker = single_broker(dir.path());
        let appended = |index: i32| {
            PartitionProduceResponse::default()
                .with_index(index)
                .with_base_offset(7)
        };
        let responses = vec![TopicProduceResponse::default()
            .with_name(kafka_protocol::messages::TopicName(str_bytes("t")))
            .with_partition_responses(vec![appended(0), appended(1), appended(2)])];
        let outcomes = [
            Ok(()),
            Err(FlushError::NotOwner("moved".into())),
            Err(FlushError::Storage("fsync failed".into())),
        ];
        let pending = outcomes
            .into_iter()
            .enumerate()
            .map(|(p, outcome)| (0, p, std::future::ready(outcome)))
            .collect();
        let answer = match rt.block_on(answer_after_flushes(
            broker.clone(),
            Arc::from("PLAINTEXT"),
            responses,
            pending,
            9,
        )) {
            Some(ResponseKind::Produce(answer)) => answer,
            other => panic!("unexpected answer {other:?}"),
        };
        let got: Vec<(i32, i16, i64)> = answer.responses[0]
            .partition_responses
            .iter()
            .map(|p| (p.index, p.error_code, p.base_offset))
            .collect();
        assert_eq!(
            got,
            [
                (0, 0, 7),
                (1, ResponseError::NotEnoughReplicasAfterAppend.code(), -1),
                (2, ResponseError::KafkaStorageError.code(), -1),
            ]
        );
    }
}

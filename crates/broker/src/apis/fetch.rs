//! Fetch: whole batches from each partition's log, long-polled until min.bytes are available
//! or max.wait.ms passes, within max.bytes and per-partition limits, with incremental fetch
//! sessions (KIP-227).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, ProducerId, ResponseKind};
use kafka_protocol::ResponseError;
use sluice_store::{FileSlice, Isolation, ReadError};
use tokio::time::Instant;
use uuid::Uuid;

use super::topic_name;
use crate::errors::read_error_code;
use crate::sessions::{SessionError, Target, Ticket};
use crate::{Answer, Broker, Response};

/// Upper bound on max.wait.ms we honour, whatever the client asks.
const MAX_WAIT_CAP_MS: i32 = 60_000;

/// Session epoch meaning "full fetch, no session / close the session".
const FINAL_EPOCH: i32 = -1;

enum Mode {
    /// No session: answer every requested partition.
    Sessionless,
    /// Full fetch that opened a session: answer every partition, remember them.
    New(Ticket),
    /// Incremental fetch on a session: answer only partitions with news, from these.
    Incremental(Ticket, Vec<Target>),
}

fn error_response(code: i16) -> Answer {
    Box::pin(std::future::ready(Some(Response::Body(
        ResponseKind::Fetch(FetchResponse::default().with_error_code(code)),
    ))))
}

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: FetchRequest,
    version: i16,
    client: crate::quotas::Who,
    listener: Arc<str>,
) -> Answer {
    let by_id = version >= 13;
    let mut requested = Vec::new();
    for t in &req.topics {
        let (name, id) = if by_id {
            match broker.registry.get_by_id(t.topic_id) {
                Some(s) => (s.meta.name.clone(), t.topic_id),
                None => (String::new(), t.topic_id),
            }
        } else {
            let name = t.topic.0.as_str().to_string();
            let id = broker
                .registry
                .get(&name)
                .map(|s| s.meta.id)
                .unwrap_or(Uuid::nil());
            (name, id)
        };
        for p in &t.partitions {
            requested.push(Target {
                topic: name.clone(),
                topic_id: id,
                partition: p.partition,
                fetch_offset: p.fetch_offset,
                max_bytes: p.partition_max_bytes,
                current_leader_epoch: p.current_leader_epoch,
                reported: None,
            });
        }
    }

    // Kafka's FetchManager rules (see sessions.rs): epoch -1 closes the named session and
    // fetches without one, epoch 0 opens a new one (closing the named one), any other epoch
    // continues the named session.
    let mode = if version < 7 || req.session_epoch == FINAL_EPOCH {
        if req.session_id != 0 {
            broker.sessions.remove(req.session_id);
        }
        Mode::Sessionless
    } else if req.session_epoch == 0 {
        Mode::New(broker.sessions.create(req.session_id, requested.clone()))
    } else if req.session_id == 0 {
        return error_response(ResponseError::FetchSessionIdNotFound.code());
    } else {
        let forgotten = &req.forgotten_topics_data;
        let change = |targets: &mut Vec<Target>| {
            for f in forgotten {
                targets.retain(|t| {
                    let same_topic = if by_id {
                        t.topic_id == f.topic_id
                    } else {
                        t.topic == f.topic.0.as_str()
                    };
                    !(same_topic && f.partitions.contains(&t.partition))
                });
            }
            for r in requested.drain(..) {
                match targets.iter_mut().find(|t| {
                    t.topic_id == r.topic_id && t.topic == r.topic && t.partition == r.partition
                }) {
                    Some(t) => {
                        t.fetch_offset = r.fetch_offset;
                        t.max_bytes = r.max_bytes;
                        t.current_leader_epoch = r.current_leader_epoch;
                    }
                    None => targets.push(r),
                }
            }
        };
        match broker
            .sessions
            .begin(req.session_id, req.session_epoch, change)
        {
            Err(SessionError::NotFound) => {
                return error_response(ResponseError::FetchSessionIdNotFound.code())
            }
            Err(SessionError::InvalidEpoch) => {
                return error_response(ResponseError::InvalidFetchSessionEpoch.code())
            }
            Ok((ticket, targets)) => Mode::Incremental(ticket, targets),
        }
    };

    let broker = broker.clone();
    let max_wait = Duration::from_millis(req.max_wait_ms.clamp(0, MAX_WAIT_CAP_MS) as u64);
    let min_bytes = req.min_bytes.max(0) as usize;
    let max_bytes = if req.max_bytes <= 0 {
        i32::MAX
    } else {
        req.max_bytes
    } as usize;
    // A consumer byte-rate quota caps one answer at what the quota allows over its whole
    // window, as Kafka caps fetch.max.bytes (more would be throttled whatever came before).
    let max_bytes = broker
        .quotas
        .fetch_bytes_max(&client)
        .map_or(max_bytes, |cap| max_bytes.min(cap));
    let read_committed = req.isolation_level == 1;
    Box::pin(async move {
        let deadline = Instant::now() + max_wait;
        let (ticket, incremental_mode, mut targets) = match mode {
            Mode::Sessionless => (None, false, requested),
            Mode::New(ticket) => (Some(ticket), false, requested),
            Mode::Incremental(ticket, targets) => (Some(ticket), true, targets),
        };
        let session_id = ticket.map_or(0, |t| t.id);
        // Once this fetch has to wait, an append to one of these logs wakes it; it looks at
        // each log's end, and a wake that brings nothing it can answer with (min_bytes) sends
        // it back to sleep.
        let watched: Vec<_> = targets.iter().map(|t| lookup(&broker, t)).collect();
        let waiter = Arc::new(tokio::sync::Notify::new());
        let mut registered = false;
        let mut first = true;
        loop {
            let notified = waiter.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let expired = Instant::now() >= deadline;
            // A read_committed fetch can read up to the last stable offset only.
            let readable_end = |l: &sluice_store::Log| {
                if read_committed {
                    l.last_stable_offset()
                } else {
                    l.log_end_offset()
                }
            };
            let maybe = first
                || expired
                || watched.iter().zip(&targets).any(|(log, t)| {
                    log.as_ref()
                        .is_none_or(|l| l.is_closed() || readable_end(l) != t.fetch_offset)
                });
            first = false;
            if !maybe {
                tokio::select! {
                    _ = &mut notified => {}
                    _ = tokio::time::sleep_until(deadline) => {}
                }
                continue;
            }
            let (results, bytes, errors) =
                match read_all(&broker, &targets, max_bytes, read_committed, Reads::Cached) {
                    Some(read) => read,
                    None => {
                        // Some partition's data is not in the page cache (a consumer behind
                        // the drop-behind's tail): read on a blocking thread, so that this
                        // runtime thread goes on serving produce requests meanwhile.
                        let b = broker.clone();
                        let t = std::mem::take(&mut targets);
                        let done = tokio::task::spawn_blocking(move || {
                            let read = read_all(&b, &t, max_bytes, read_committed, Reads::Waiting);
                            (read, t)
                        })
                        .await;
                        match done {
                            Ok((Some(read), t)) => {
                                targets = t;
                                read
                            }
                            Ok((None, _)) | Err(_) => {
                                tracing::error!("a fetch's read on a blocking thread failed");
                                return None;
                            }
                        }
                    }
                };
            if bytes >= min_bytes || errors || expired {
                // The consumer byte-rate quota (Kafka's fetch quota manager): over it, the
                // answer is empty with the throttle time, its bytes are not counted, and the
                // session stays as the request left it (what this read found is sent later).
                let answered = results
                    .iter()
                    .filter(|(d, slice)| slice.is_some() || d.error_code != 0)
                    .count();
                let size = crate::quotas::response_bytes(bytes, answered) as f64;
                let now = crate::now_ms();
                let throttle =
                    broker
                        .quotas
                        .record(crate::quotas::QuotaKind::Fetch, &client, size, now);
                if throttle > 0 {
                    broker
                        .quotas
                        .unrecord(crate::quotas::QuotaKind::Fetch, &client, size, now);
                    let body = FetchResponse::default()
                        .with_session_id(session_id)
                        .with_throttle_time_ms(throttle);
                    return Some(Response::Fetch {
                        body,
                        regions: Vec::new(),
                    });
                }
                let mut topics: Vec<FetchableTopicResponse> = Vec::new();
                let mut regions = Vec::new();
                let mut ordinal = 0usize;
                // Counted per topic run of the answer (per-topic counters exist for the
                // topics that exist only), added to the shared counters once per run.
                let mut run: Option<(usize, sluice_metrics::FetchCounts)> = None;
                let count_run = |run: &Option<(usize, sluice_metrics::FetchCounts)>,
                                 targets: &[Target]| {
                    if let Some((at, counts)) = run {
                        let topic = &targets[*at].topic;
                        let c = broker
                            .registry
                            .get(topic)
                            .map(|_| broker.metrics.topic(topic));
                        broker.metrics.fetched(c.as_deref(), counts);
                    }
                };
                for (i, (data, slice)) in results.into_iter().enumerate().take(targets.len()) {
                    if run
                        .as_ref()
                        .is_none_or(|(at, _)| targets[*at].topic != targets[i].topic)
                    {
                        count_run(&run, &targets);
                        run = Some((i, sluice_metrics::FetchCounts::default()));
                    }
                    if let Some((_, c)) = &mut run {
                        c.add(
                            slice.as_ref().map_or(0, |s| u64::from(s.len)),
                            data.error_code != 0,
                        );
                    }
                    let target = &mut targets[i];
                    let news = (data.error_code != 0)
                        || slice.is_some()
                        || target.reported != Some(reported(&data));
                    target.reported = Some(reported(&data));
                    if incremental_mode && !news {
                        continue;
                    }
                    let same = topics.last().is_some_and(|t| {
                        if by_id {
                            t.topic_id == target.topic_id
                        } else {
                            t.topic.0.as_str() == target.topic
                        }
                    });
                    if !same {
                        topics.push(
                            FetchableTopicResponse::default()
                                .with_topic(topic_name(&target.topic))
                                .with_topic_id(target.topic_id),
                        );
                    }
                    if let Some(t) = topics.last_mut() {
                        t.partitions.push(data);
                        if let Some(slice) = slice {
                            regions.push((ordinal, slice));
                        }
                        ordinal += 1;
                    }
                }
                count_run(&run, &targets);
                if let Some(ticket) = ticket {
                    broker.sessions.finish(ticket, targets);
                }
                let node_endpoints = if version >= 16 {
                    leader_hints(&broker, &mut topics, &listener)
                } else {
                    Vec::new()
                };
                let body = FetchResponse::default()
                    .with_session_id(session_id)
                    .with_responses(topics)
                    .with_node_endpoints(node_endpoints);
                return Some(Response::Fetch { body, regions });
            }
            if !registered {
                // Only a fetch that waits watches its logs (most are answered by their first
                // read). An append since that read is seen by the check at the loop's top.
                broker
                    .fetch_waiters
                    .register(watched.iter().flatten(), &waiter);
                registered = true;
                continue;
            }
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep_until(deadline) => {}
            }
        }
    })
}

/// What an incremental fetch session compares to decide whether a partition has news.
fn reported(data: &PartitionData) -> (i64, i64, i64) {
    (
        data.high_watermark,
        data.log_start_offset,
        data.last_stable_offset,
    )
}

/// KIP-951: partitions answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH name their
/// owner (`current_leader`), and the response lists its endpoint, so the consumer goes there
/// without a metadata round trip.
fn leader_hints(
    broker: &Broker,
    topics: &mut [FetchableTopicResponse],
    listener: &str,
) -> Vec<NodeEndpoint> {
    let hinted = [
        ResponseError::NotLeaderOrFollower.code(),
        ResponseError::FencedLeaderEpoch.code(),
    ];
    let mut leaders = Vec::new();
    for t in topics.iter_mut() {
        let name = if t.topic.0.is_empty() {
            broker
                .registry
                .get_by_id(t.topic_id)
                .map(|s| s.meta.name.clone())
        } else {
            Some(t.topic.0.to_string())
        };
        let Some(name) = name else { continue };
        for p in t
            .partitions
            .iter_mut()
            .filter(|p| hinted.contains(&p.error_code))
        {
            if let Some((leader, epoch)) = broker.leader_hint(&name, p.partition_index) {
                p.current_leader = LeaderIdAndEpoch::default()
                    .with_leader_id(BrokerId(leader))
                    .with_leader_epoch(epoch);
                leaders.push(leader);
            }
        }
    }
    broker
        .endpoints_of(&leaders, listener)
        .into_iter()
        .map(|(id, host, port)| {
            NodeEndpoint::default()
                .with_node_id(BrokerId(id))
                .with_host(super::str_bytes(host))
                .with_port(i32::from(port))
        })
        .collect()
}

/// The log a fetch target names, if this broker serves it. In a cluster, only while this
/// broker may write it (the write gate: the partition held under the log's epoch, the write
/// deadline not passed): a broker cut off from etcd stops serving reads when it stops
/// writing, and its clients, answered NOT_LEADER_OR_FOLLOWER, look for the new owner.
fn lookup(broker: &Broker, t: &Target) -> Option<Arc<sluice_store::Log>> {
    if t.topic.is_empty() {
        return None;
    }
    broker
        .registry
        .get(&t.topic)
        .and_then(|s| s.log(t.partition).cloned())
        .filter(|log| log.writable())
}

/// How [`read_all`] reads the logs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reads {
    /// On a runtime thread: from memory and the page cache only ([`sluice_store::Log::read_cached`]);
    /// nothing at all as soon as one partition's read would wait for the volume.
    Cached,
    /// On a blocking thread: each partition from the page cache if it can, else waiting for
    /// the volume, its region then brought into the page cache ([`FileSlice::load`]).
    Waiting,
}

/// Totals of fetch reads that had to wait for the volume, for metrics.
#[derive(Debug, Default)]
pub(crate) struct ColdReads {
    /// Fetch requests read again on a blocking thread.
    pub fetches: AtomicU64,
    /// Partition reads among them that waited for the volume, and the bytes they found.
    pub partitions: AtomicU64,
    pub bytes: AtomicU64,
}

/// What [`read_all`] found: per target, its answer and the file region holding its records;
/// the records' total bytes; whether any partition had an error.
type ReadAll = (Vec<(PartitionData, Option<FileSlice>)>, usize, bool);

/// Read every target once. Returns per-target data with the file region holding its records
/// (left in the file: the server sends it), total record bytes, and whether any partition
/// had an error (which answers at once, like Kafka); None when `reads` is
/// [`Reads::Cached`] and some partition's read would have waited for the volume.
fn read_all(
    broker: &Broker,
    targets: &[Target],
    max_bytes: usize,
    read_committed: bool,
    reads: Reads,
) -> Option<ReadAll> {
    let mut out = Vec::with_capacity(targets.len());
    let mut total = 0usize;
    let mut errors = false;
    let isolation = if read_committed {
        Isolation::ReadCommitted
    } else {
        Isolation::ReadUncommitted
    };
    for t in targets {
        let base = PartitionData::default()
            .with_partition_index(t.partition)
            .with_high_watermark(-1)
            .with_last_stable_offset(-1)
            .with_log_start_offset(-1)
            .with_preferred_read_replica(kafka_protocol::messages::BrokerId(-1))
            .with_aborted_transactions(read_committed.then(Vec::new));
        let Some(log) = lookup(broker, t) else {
            errors = true;
            let code = if t.topic.is_empty() {
                ResponseError::UnknownTopicId.code()
            } else {
                crate::registry::missing_partition_code(
                    broker.registry.get(&t.topic).as_deref(),
                    t.partition,
                )
            };
            out.push((base.with_error_code(code), None));
            continue;
        };
        if let Some(code) =
            crate::registry::leader_epoch_code(t.current_leader_epoch, log.leader_epoch())
        {
            errors = true;
            out.push((base.with_error_code(code), None));
            continue;
        }
        let budget = max_bytes
            .saturating_sub(total)
            .min(t.max_bytes.max(0) as usize) as u32;
        let result = if budget == 0 && total > 0 {
            // Response full: report offsets only.
            Ok(None)
        } else {
            match log.read_cached(t.fetch_offset, budget, total == 0, isolation) {
                Err(ReadError::WouldBlock { .. }) if reads == Reads::Cached => return None,
                Err(ReadError::WouldBlock { .. }) => {
                    // Read, and bring what it found into the page cache, here: the server
                    // then sends it from the cache on a runtime thread.
                    let read = log.read_isolated(t.fetch_offset, budget, total == 0, isolation);
                    read.and_then(|r| {
                        if let Some(slice) = &r.slice {
                            let c = &broker.cold_reads;
                            c.partitions.fetch_add(1, Ordering::Relaxed);
                            c.bytes.fetch_add(u64::from(slice.len), Ordering::Relaxed);
                            slice.load().map_err(|source| ReadError::Io {
                                tp: log.topic_partition().clone(),
                                source,
                            })?;
                        }
                        Ok(Some(r))
                    })
                }
                read => read.map(Some),
            }
        };
        // The offsets of the look at the log the read was made from, as Kafka answers with
        // those it took before its read: a DeleteRecords or append since then does not make
        // the answer's log start, high watermark or last stable offset disagree with its
        // records.
        let (hw, lso, log_start) = match &result {
            Ok(Some(r)) => (r.high_watermark, r.last_stable_offset, r.log_start_offset),
            _ => (
                log.high_watermark(),
                log.last_stable_offset(),
                log.log_start_offset(),
            ),
        };
        let base = base
            .with_high_watermark(hw)
            .with_last_stable_offset(lso)
            .with_log_start_offset(log_start);
        match result {
            Ok(Some(r)) => match r.slice.filter(|s| s.len > 0) {
                Some(slice) => {
                    total += slice.len as usize;
                    let base = match r.aborted {
                        Some(aborted) if read_committed => base.with_aborted_transactions(Some(
                            aborted
                                .into_iter()
                                .map(|a| {
                                    AbortedTransaction::default()
                                        .with_producer_id(ProducerId(a.producer_id))
                                        .with_first_offset(a.first_offset)
                                })
                                .collect(),
                        )),
                        _ => base,
                    };
                    out.push((base, Some(slice)));
                }
                None => out.push((base.with_records(Some(Bytes::new())), None)),
            },
            Ok(None) => out.push((base.with_records(Some(Bytes::new())), None)),
            Err(e) => {
                errors = true;
                out.push((base.with_error_code(read_error_code(&e)), None));
            }
        }
    }
    if reads == Reads::Waiting {
        broker.cold_reads.fetches.fetch_add(1, Ordering::Relaxed);
    }
    Some((out, total, errors))
}

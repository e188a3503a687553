//! Fetch: whole batches from each partition's log, long-polled until min.bytes are available
//! or max.wait.ms passes, within max.bytes and per-partition limits, with incremental fetch
//! sessions (KIP-227).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::ForgottenTopic;
use kafka_protocol::messages::fetch_response::{
    AbortedTransaction, FetchableTopicResponse, LeaderIdAndEpoch, NodeEndpoint, PartitionData,
};
use kafka_protocol::messages::{BrokerId, FetchRequest, FetchResponse, ProducerId, ResponseKind};
use kafka_protocol::ResponseError;
use sluice_store::{FileSlice, Isolation, ReadError, ReadResult};
use tokio::time::Instant;
use uuid::Uuid;

use crate::errors::read_error_code;
use crate::sessions::{SessionError, Target, Ticket};
use crate::wire::topic_name;
use crate::{Answer, Broker, Response};

/// Upper bound on max.wait.ms we honour, whatever the client asks.
const MAX_WAIT_CAP_MS: i32 = 60_000;

/// Session epoch meaning "full fetch, no session / close the session".
const FINAL_EPOCH: i32 = -1;

/// What a request's session id and epoch ask for, under Kafka's FetchManager rules (see
/// sessions.rs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SessionAsk {
    /// No session (before version 7, or epoch -1): answer every requested partition, after
    /// closing the session named (0: none).
    Sessionless { close: i32 },
    /// A full fetch (epoch 0) that opens a session, closing the client's previous one (0:
    /// none): answer every partition, remember them.
    Open { previous: i32 },
    /// An incremental fetch on session `id` at `epoch`: answer only partitions with news.
    Continue { id: i32, epoch: i32 },
    /// An incremental epoch without a session id: FETCH_SESSION_ID_NOT_FOUND.
    Unnamed,
}

/// Which [`SessionAsk`] a request is. Keeps Kafka's rules: epoch -1 closes the named session
/// and fetches without one, epoch 0 opens a new one (closing the named one), any other
/// epoch continues the named session; versions before 7 have no sessions.
fn session_ask(version: i16, session_id: i32, session_epoch: i32) -> SessionAsk {
    if version < 7 || session_epoch == FINAL_EPOCH {
        SessionAsk::Sessionless { close: session_id }
    } else if session_epoch == 0 {
        SessionAsk::Open {
            previous: session_id,
        }
    } else if session_id == 0 {
        SessionAsk::Unnamed
    } else {
        SessionAsk::Continue {
            id: session_id,
            epoch: session_epoch,
        }
    }
}

/// The session a fetch was accepted on.
#[derive(Clone, Copy, Debug)]
struct Session {
    /// The request held on its session, answered with [`crate::sessions::FetchSessions::finish`].
    ticket: Option<Ticket>,
    /// An incremental fetch answers only the partitions with news ([`has_news`]).
    incremental: bool,
}

impl Session {
    /// The session id the answer carries (0: none).
    fn id(&self) -> i32 {
        self.ticket.map_or(0, |t| t.id)
    }
}

fn error_response(code: i16) -> Answer {
    Box::pin(std::future::ready(Some(Response::Body(
        ResponseKind::Fetch(FetchResponse::default().with_error_code(code)),
    ))))
}

/// A Fetch: resolve the partitions it names, accept it on its session (the session's
/// changes take effect here, before anything is read), then read, long-polled, and answer.
pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: FetchRequest,
    version: i16,
    client: crate::quotas::Who,
    listener: Arc<str>,
) -> Answer {
    let requested = requested_targets(broker, &req, version >= 13);
    let (session, targets) = match accept_on_session(broker, &req, version, requested) {
        Ok(accepted) => accepted,
        Err(code) => return error_response(code),
    };
    let rack = (version >= 11 && !req.rack_id.is_empty()).then(|| req.rack_id.to_string());
    let limits = Limits::of(broker, &req, &client, version);
    if limits.reader_poll {
        // What each reader knows of the log start (DeleteRecords waits for it); its long
        // poll names every partition it reads from here.
        let node = follower_id(&req, version);
        let polled: Vec<_> = targets
            .iter()
            .map(|t| (t.topic_id, t.partition, t.log_start))
            .collect();
        broker.readers.note_poll(node, &polled, req.max_wait_ms > 0);
    }
    let fetch = Fetch {
        limits,
        broker: broker.clone(),
        client,
        listener,
        version,
        session,
        rack,
    };
    Box::pin(fetch.serve(targets))
}

/// The partitions a request names, in its order. From version 13 topics are named by id (an
/// unknown id gives an empty name, answered UNKNOWN_TOPIC_ID), before by name (an unknown
/// name gives the nil id).
fn requested_targets(broker: &Broker, req: &FetchRequest, by_id: bool) -> Vec<Target> {
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
                log_start: p.log_start_offset,
                reported: None,
            });
        }
    }
    requested
}

/// Accept the request on the session it asks for ([`session_ask`]): close, open or continue
/// one in the broker's session cache. Returns the session and the partitions the fetch
/// reads (on a continued session, the session's partitions after the request's changes), or
/// the error code the whole fetch is answered with.
fn accept_on_session(
    broker: &Broker,
    req: &FetchRequest,
    version: i16,
    requested: Vec<Target>,
) -> Result<(Session, Vec<Target>), i16> {
    match session_ask(version, req.session_id, req.session_epoch) {
        SessionAsk::Sessionless { close } => {
            if close != 0 {
                broker.sessions.remove(close);
            }
            let session = Session {
                ticket: None,
                incremental: false,
            };
            Ok((session, requested))
        }
        SessionAsk::Open { previous } => {
            let session = Session {
                ticket: Some(broker.sessions.create(previous, requested.clone())),
                incremental: false,
            };
            Ok((session, requested))
        }
        SessionAsk::Unnamed => Err(ResponseError::FetchSessionIdNotFound.code()),
        SessionAsk::Continue { id, epoch } => {
            let by_id = version >= 13;
            let forgotten = &req.forgotten_topics_data;
            let change =
                |targets: &mut Vec<Target>| change_session(targets, forgotten, requested, by_id);
            match broker.sessions.begin(id, epoch, change) {
                Err(SessionError::NotFound) => Err(ResponseError::FetchSessionIdNotFound.code()),
                Err(SessionError::InvalidEpoch) => {
                    Err(ResponseError::InvalidFetchSessionEpoch.code())
                }
                Ok((ticket, targets)) => {
                    let session = Session {
                        ticket: Some(ticket),
                        incremental: true,
                    };
                    Ok((session, targets))
                }
            }
        }
    }
}

/// An incremental request's changes to its session's partitions (KIP-227): the forgotten
/// partitions leave first, then each requested one updates the session's entry for it
/// (offset, max bytes, leader epoch; what was last reported is kept) or joins at the end.
fn change_session(
    targets: &mut Vec<Target>,
    forgotten: &[ForgottenTopic],
    requested: Vec<Target>,
    by_id: bool,
) {
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
    for r in requested {
        match targets
            .iter_mut()
            .find(|t| t.topic_id == r.topic_id && t.topic == r.topic && t.partition == r.partition)
        {
            Some(t) => {
                t.fetch_offset = r.fetch_offset;
                t.max_bytes = r.max_bytes;
                t.current_leader_epoch = r.current_leader_epoch;
                t.log_start = r.log_start;
            }
            None => targets.push(r),
        }
    }
}

/// How long a fetch may wait and how much it answers with.
#[derive(Clone, Copy, Debug)]
struct Limits {
    /// max.wait.ms, at most [`MAX_WAIT_CAP_MS`].
    max_wait: Duration,
    min_bytes: usize,
    /// fetch.max.bytes (none: unlimited), at most what the consumer byte-rate quota allows.
    max_bytes: usize,
    /// Read up to the last stable offset only.
    read_committed: bool,
    /// A read replica's poll (a follower's fetch from another broker of the cluster,
    /// `readers.rs`): no records are read, only the offsets the owner published, answered
    /// as soon as one differs from what the poll says it knows.
    reader_poll: bool,
}

impl Limits {
    /// The request's limits. A consumer byte-rate quota caps one answer at what the quota
    /// allows over its whole window, as Kafka caps fetch.max.bytes (more would be throttled
    /// whatever came before).
    fn of(
        broker: &Broker,
        req: &FetchRequest,
        client: &crate::quotas::Who,
        version: i16,
    ) -> Limits {
        let max_bytes = if req.max_bytes <= 0 {
            i32::MAX
        } else {
            req.max_bytes
        } as usize;
        Limits {
            max_wait: Duration::from_millis(req.max_wait_ms.clamp(0, MAX_WAIT_CAP_MS) as u64),
            min_bytes: req.min_bytes.max(0) as usize,
            max_bytes: broker
                .quotas
                .fetch_bytes_max(client)
                .map_or(max_bytes, |cap| max_bytes.min(cap)),
            read_committed: req.isolation_level == 1,
            reader_poll: broker.meta.etcd().is_some() && follower_id(req, version) >= 0,
        }
    }
}

/// The replica id of a follower's fetch (-1: a consumer's), where the version carries it.
fn follower_id(req: &FetchRequest, version: i16) -> i32 {
    if version >= 15 {
        req.replica_state.replica_id.0
    } else {
        req.replica_id.0
    }
}

/// A fetch accepted on its session, to be read and answered.
struct Fetch {
    broker: Arc<Broker>,
    client: crate::quotas::Who,
    listener: Arc<str>,
    version: i16,
    session: Session,
    limits: Limits,
    /// The consumer's `client.rack` (version 11 on), for the preferred read replica.
    rack: Option<String>,
}

/// Where a fetch target is read from: this broker's own log, or (KIP-392) the files of a
/// partition another broker owns, on the shared volume (`readers.rs`).
#[derive(Clone, Debug)]
enum Source {
    Own(Arc<sluice_store::Log>),
    Replica(Arc<crate::readers::Replica>),
}

impl Fetch {
    /// Whether this fetch may be served from read replicas: a consumer's (not a reader's
    /// poll) of version 11 or later (KIP-392: Kafka's followers serve consumers from there).
    fn serves_replicas(&self) -> bool {
        !self.limits.reader_poll && self.version >= 11
    }

    /// Read until the answer has min.bytes, an error, or max.wait.ms passed. Only a fetch
    /// that waits watches its logs (most are answered by their first read): once it has to
    /// wait, an append to one of them wakes it, and it reads again only when a log's end
    /// moved ([`may_have_news`]); a wake that brings too little sends it back to sleep.
    async fn serve(self, mut targets: Vec<Target>) -> Option<Response> {
        let deadline = Instant::now() + self.limits.max_wait;
        let poll = self.limits.reader_poll;
        let replicas = self.serves_replicas();
        let watched: Vec<_> = targets
            .iter()
            .map(|t| source(&self.broker, t, replicas))
            .collect();
        let waiter = Arc::new(tokio::sync::Notify::new());
        let mut registered = false;
        let mut first = true;
        loop {
            let notified = waiter.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let expired = Instant::now() >= deadline;
            let maybe = first
                || expired
                || may_have_news(&watched, &targets, self.limits.read_committed, poll);
            first = false;
            if !maybe {
                tokio::select! {
                    _ = &mut notified => {}
                    _ = tokio::time::sleep_until(deadline) => {}
                }
                continue;
            }
            let ((results, bytes, errors), read) = self.read(targets).await?;
            targets = read;
            let moved = poll
                && results
                    .iter()
                    .zip(&targets)
                    .any(|((d, _), t)| polled_news(t, d));
            if bytes >= self.limits.min_bytes || errors || expired || moved {
                return Some(self.respond(results, bytes, targets));
            }
            if !registered {
                // An append since that read is seen by the check at the loop's top.
                let own = watched.iter().filter_map(|s| match s {
                    Some(Source::Own(log)) => Some(log),
                    _ => None,
                });
                self.broker.fetch_waiters.register(own, &waiter);
                for s in watched.iter().flatten() {
                    if let Source::Replica(r) = s {
                        r.register(&waiter);
                    }
                }
                registered = true;
                continue;
            }
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep_until(deadline) => {}
            }
        }
    }

    /// Read every target once ([`read_all`]), on this runtime thread from memory and the
    /// page cache; if some partition's data is not in the page cache (a consumer behind the
    /// drop-behind's tail), all of it again on a blocking thread, so that this runtime
    /// thread goes on serving produce requests meanwhile. Gives the targets back with what
    /// was read; None if the blocking read failed.
    async fn read(&self, targets: Vec<Target>) -> Option<(ReadAll, Vec<Target>)> {
        let how = How {
            max_bytes: self.limits.max_bytes,
            read_committed: self.limits.read_committed,
            reader_poll: self.limits.reader_poll,
            replicas: self.serves_replicas(),
            rack: self.rack.clone(),
            listener: self.listener.clone(),
        };
        if let Some(read) = read_all(&self.broker, &targets, &how, Reads::Cached) {
            return Some((read, targets));
        }
        let b = self.broker.clone();
        let done = tokio::task::spawn_blocking(move || {
            let read = read_all(&b, &targets, &how, Reads::Waiting);
            (read, targets)
        })
        .await;
        match done {
            Ok((Some(read), targets)) => Some((read, targets)),
            Ok((None, _)) | Err(_) => {
                tracing::error!("a fetch's read on a blocking thread failed");
                None
            }
        }
    }

    /// The answer to what a read found: throttled when over the consumer byte-rate quota
    /// ([`Fetch::throttled`]), else the partitions (all, or on an incremental session those
    /// with news) with their file regions, counted in the metrics; the session remembers
    /// what was reported, and (version 16) partitions answered with a leadership error name
    /// their leader.
    fn respond(
        &self,
        results: Vec<(PartitionData, Option<FileSlice>)>,
        bytes: usize,
        mut targets: Vec<Target>,
    ) -> Response {
        if let Some(throttled) = self.throttled(&results, bytes) {
            return throttled;
        }
        count_fetched(&self.broker, &targets, &results);
        let (mut topics, regions) = self.assemble(results, &mut targets);
        if let Some(ticket) = self.session.ticket {
            self.broker.sessions.finish(ticket, targets);
        }
        let node_endpoints = if self.version >= 16 {
            leader_hints(&self.broker, &mut topics, &self.listener)
        } else {
            Vec::new()
        };
        let body = FetchResponse::default()
            .with_session_id(self.session.id())
            .with_responses(topics)
            .with_node_endpoints(node_endpoints);
        Response::Fetch { body, regions }
    }

    /// The consumer byte-rate quota (Kafka's fetch quota manager): over it, the answer is
    /// empty with the throttle time, its bytes are not counted, and the session stays as the
    /// request left it (what this read found is sent later). None: not throttled, the
    /// answer's bytes recorded against the quota.
    fn throttled(
        &self,
        results: &[(PartitionData, Option<FileSlice>)],
        bytes: usize,
    ) -> Option<Response> {
        use crate::quotas::QuotaKind;
        let answered = results
            .iter()
            .filter(|(d, slice)| slice.is_some() || d.error_code != 0)
            .count();
        let size = crate::quotas::response_bytes(bytes, answered) as f64;
        let now = crate::now_ms();
        let quotas = &self.broker.quotas;
        let throttle = quotas.record(QuotaKind::Fetch, &self.client, size, now);
        if throttle <= 0 {
            return None;
        }
        quotas.unrecord(QuotaKind::Fetch, &self.client, size, now);
        let body = FetchResponse::default()
            .with_session_id(self.session.id())
            .with_throttle_time_ms(throttle);
        Some(Response::Fetch {
            body,
            regions: Vec::new(),
        })
    }

    /// The answer's topics, consecutive partitions of one topic under one entry, and the
    /// file regions of their records by the partition's ordinal in the answer. Each target
    /// remembers what was reported for it; an incremental fetch leaves out the partitions
    /// without news ([`has_news`]).
    fn assemble(
        &self,
        results: Vec<(PartitionData, Option<FileSlice>)>,
        targets: &mut [Target],
    ) -> (Vec<FetchableTopicResponse>, Vec<(usize, FileSlice)>) {
        let by_id = self.version >= 13;
        let mut topics: Vec<FetchableTopicResponse> = Vec::new();
        let mut regions = Vec::new();
        let mut ordinal = 0usize;
        for (target, (data, slice)) in targets.iter_mut().zip(results) {
            let news = has_news(target, &data, slice.is_some());
            target.reported = Some(reported(&data));
            if self.session.incremental && !news {
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
        (topics, regions)
    }
}

/// Whether a waiting fetch may have something new to answer with: a log it reads is gone or
/// closed, or a log's readable end (for read_committed the last stable offset, which is as
/// far as it may read) is not where the fetch reads from.
fn may_have_news(
    watched: &[Option<Source>],
    targets: &[Target],
    read_committed: bool,
    poll: bool,
) -> bool {
    let readable_end = |l: &sluice_store::Log| {
        if poll {
            l.high_watermark()
        } else if read_committed {
            l.last_stable_offset()
        } else {
            l.log_end_offset()
        }
    };
    watched.iter().zip(targets).any(|(source, t)| match source {
        None => true,
        Some(Source::Own(l)) => {
            l.is_closed()
                || readable_end(l) != t.fetch_offset
                || (poll && l.log_start_offset() != t.log_start)
        }
        Some(Source::Replica(r)) => {
            r.unanswered()
                || r.published().is_some_and(|p| {
                    let end = if read_committed {
                        p.last_stable
                    } else {
                        p.high_watermark
                    };
                    end != t.fetch_offset
                })
        }
    })
}

/// Whether a read replica's poll has news for a partition: an error, or a high watermark or
/// log start other than the poll says it knows.
fn polled_news(t: &Target, d: &PartitionData) -> bool {
    d.error_code != 0 || d.high_watermark != t.fetch_offset || d.log_start_offset != t.log_start
}

/// Count what a fetch answers with, per topic run of the answer (consecutive targets of one
/// topic): per-topic counters exist for the topics that exist only; each run is added to the
/// shared counters once.
fn count_fetched(
    broker: &Broker,
    targets: &[Target],
    results: &[(PartitionData, Option<FileSlice>)],
) {
    let mut run: Option<(usize, sluice_metrics::FetchCounts)> = None;
    let count_run = |run: &Option<(usize, sluice_metrics::FetchCounts)>| {
        if let Some((at, counts)) = run {
            let topic = &targets[*at].topic;
            let c = broker
                .registry
                .get(topic)
                .map(|_| broker.metrics.topic(topic));
            broker.metrics.fetched(c.as_deref(), counts);
        }
    };
    for (i, (data, slice)) in results.iter().enumerate().take(targets.len()) {
        if run
            .as_ref()
            .is_none_or(|(at, _)| targets[*at].topic != targets[i].topic)
        {
            count_run(&run);
            run = Some((i, sluice_metrics::FetchCounts::default()));
        }
        if let Some((_, c)) = &mut run {
            c.add(
                slice.as_ref().map_or(0, |s| u64::from(s.len)),
                data.error_code != 0,
            );
        }
    }
    count_run(&run);
}

/// Whether a partition has news for an incremental fetch session (KIP-227): records, an
/// error, or a high watermark, log start or last stable offset other than the one last
/// reported for it.
fn has_news(target: &Target, data: &PartitionData, has_records: bool) -> bool {
    data.error_code != 0
        || has_records
        || data.preferred_read_replica.0 >= 0
        || target.reported != Some(reported(data))
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
                .with_host(crate::wire::str_bytes(host))
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

/// The source of a target: this broker's log of it; else, for a consumer's fetch
/// (`replicas`) when this broker serves read replicas, the replica of a partition another
/// broker owns (`readers.rs`), made for the topic incarnation, owner and epoch the records
/// name now.
fn source(broker: &Broker, t: &Target, replicas: bool) -> Option<Source> {
    if let Some(log) = lookup(broker, t) {
        return Some(Source::Own(log));
    }
    // Only a broker that Metadata lists as a replica (read replicas on, a rack) serves reads
    // of partitions it does not own: without racks nothing changes.
    let listed = broker.config.read_replicas && broker.config.rack.is_some();
    if !replicas || !listed || t.topic.is_empty() {
        return None;
    }
    let (id, owner, epoch) = broker.owner_of(&t.topic, t.partition)?;
    if owner < 0 || owner == broker.node_id() || (!t.topic_id.is_nil() && id != t.topic_id) {
        return None;
    }
    let tp = sluice_store::TopicPartition {
        topic: t.topic.clone(),
        partition: t.partition,
    };
    broker
        .readers
        .replica(broker, &tp, (id, owner, epoch))
        .map(Source::Replica)
}

/// KIP-392, on the owner: the broker a consumer in `rack` should fetch `t` from instead, a
/// live broker serving read replicas in its rack (one of them by the partition, so that a
/// rack's partitions spread over its brokers); None when this broker is in that rack or
/// none is.
fn preferred_replica(broker: &Broker, t: &Target, rack: &str, listener: &str) -> Option<i32> {
    if broker.config.rack.as_deref() == Some(rack) {
        return None;
    }
    let mut candidates: Vec<i32> = broker
        .read_replicas(listener)
        .into_iter()
        .filter(|(id, r)| r == rack && *id != broker.node_id())
        .filter(|(id, _)| broker.readers.may_send(t.topic_id, t.partition, *id))
        .map(|(id, _)| id)
        .collect();
    if candidates.is_empty() {
        return None;
    }
    candidates.sort_unstable();
    // FNV-1a over the topic name and partition: the same choice on every broker and start.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in t.topic.bytes().chain(t.partition.to_be_bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    candidates
        .get((h % candidates.len() as u64) as usize)
        .copied()
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

/// What a fetch asks of its reads.
#[derive(Clone, Debug)]
struct How {
    max_bytes: usize,
    read_committed: bool,
    /// A read replica's poll: offsets only, from this broker's own logs.
    reader_poll: bool,
    /// Partitions other brokers own may be read here ([`Fetch::serves_replicas`]).
    replicas: bool,
    /// The consumer's rack, for the preferred read replica.
    rack: Option<String>,
    /// The listener the fetch came in on (a preferred read replica must have it).
    listener: Arc<str>,
}

/// Read every target once. Returns per-target data with the file region holding its records
/// (left in the file: the server sends it), total record bytes, and whether any partition
/// had an error or must be answered at once (a preferred read replica named, as Kafka
/// answers); None when `reads` is [`Reads::Cached`] and some partition's read would have
/// waited for the volume (or is a read replica's, always read on a blocking thread).
fn read_all(broker: &Broker, targets: &[Target], how: &How, reads: Reads) -> Option<ReadAll> {
    let mut out = Vec::with_capacity(targets.len());
    let mut total = 0usize;
    let mut errors = false;
    for t in targets {
        let (data, slice, failed) = read_partition(broker, t, how, total, reads)?;
        total += slice.as_ref().map_or(0, |s| s.len as usize);
        errors |= failed;
        out.push((data, slice));
    }
    if reads == Reads::Waiting {
        broker.cold_reads.fetches.fetch_add(1, Ordering::Relaxed);
    }
    Some((out, total, errors))
}

/// One target's answer, its file region (never empty) and whether it is an error, after
/// `total` bytes of the answer's other partitions: an unknown partition, a leader epoch
/// that does not match (KIP-320) or a failed read is an error; a full answer (fetch.max.bytes
/// reached) reports offsets only; while the answer has no records yet, a read returns at
/// least one whole batch, however large. None when `reads` is [`Reads::Cached`] and the read would have waited.
fn read_partition(
    broker: &Broker,
    t: &Target,
    how: &How,
    total: usize,
    reads: Reads,
) -> Option<(PartitionData, Option<FileSlice>, bool)> {
    let read_committed = how.read_committed;
    let max_bytes = how.max_bytes;
    let base = PartitionData::default()
        .with_partition_index(t.partition)
        .with_high_watermark(-1)
        .with_last_stable_offset(-1)
        .with_log_start_offset(-1)
        .with_preferred_read_replica(kafka_protocol::messages::BrokerId(-1))
        .with_aborted_transactions(read_committed.then(Vec::new));
    let log = match source(broker, t, how.replicas) {
        Some(Source::Own(log)) => Some(log),
        Some(Source::Replica(r)) => {
            if reads == Reads::Cached {
                return None; // read on a blocking thread: the files are another broker's
            }
            return Some(read_replica(
                broker,
                &r,
                t,
                base,
                max_bytes,
                total,
                read_committed,
            ));
        }
        None => None,
    };
    let Some(log) = log else {
        let code = if t.topic.is_empty() {
            ResponseError::UnknownTopicId.code()
        } else {
            crate::registry::missing_partition_code(
                broker.registry.get(&t.topic).as_deref(),
                t.partition,
            )
        };
        return Some((base.with_error_code(code), None, true));
    };
    if let Some(code) =
        crate::registry::leader_epoch_code(t.current_leader_epoch, log.leader_epoch())
    {
        return Some((base.with_error_code(code), None, true));
    }
    if how.reader_poll {
        // Offsets only: what this owner has published.
        return Some(answer_read(base, &log, Ok(None), false));
    }
    // Only an offset the owner holds is sent elsewhere (as Kafka's leader prefers a replica
    // only when the fetch offset lies in its log): one out of range gets the owner's answer.
    let in_range = || (log.log_start_offset()..=log.high_watermark()).contains(&t.fetch_offset);
    let preferred = how
        .rack
        .as_deref()
        .filter(|_| in_range())
        .and_then(|r| preferred_replica(broker, t, r, &how.listener));
    if let Some(to) = preferred {
        // Sent to a broker in the consumer's rack, with the offsets and no records, at once
        // (as Kafka's leader answers a fetch it prefers another replica for).
        let (data, _, _) = answer_read(base, &log, Ok(None), read_committed);
        let data = data.with_preferred_read_replica(kafka_protocol::messages::BrokerId(to));
        broker.readers.redirects.fetch_add(1, Ordering::Relaxed);
        return Some((data, None, true));
    }
    let budget = max_bytes
        .saturating_sub(total)
        .min(t.max_bytes.max(0) as usize) as u32;
    let result = if budget == 0 && total > 0 {
        // Response full: report offsets only.
        Ok(None)
    } else {
        read_log(
            broker,
            &log,
            t.fetch_offset,
            budget,
            total == 0,
            read_committed,
            reads,
        )?
        .map(Some)
    };
    Some(answer_read(base, &log, result, read_committed))
}

/// One target read from the replica of a partition another broker owns, never past what the
/// owner published as last learned: an epoch that is not the replica's is refused as by the
/// owner (KIP-320); before the owner's first answer, nothing (NOT_LEADER_OR_FOLLOWER once
/// it waited too long, and the consumer goes back to the owner); an offset past the
/// published high watermark is OFFSET_OUT_OF_RANGE, on which clients go back to the owner
/// (KIP-392). Read on a blocking thread, the records brought into the page cache.
fn read_replica(
    broker: &Broker,
    r: &Arc<crate::readers::Replica>,
    t: &Target,
    base: PartitionData,
    max_bytes: usize,
    total: usize,
    read_committed: bool,
) -> (PartitionData, Option<FileSlice>, bool) {
    if let Some(code) = crate::registry::leader_epoch_code(t.current_leader_epoch, r.epoch) {
        return (base.with_error_code(code), None, true);
    }
    if r.stale() {
        // Its owner has not answered for a while: the consumer goes to the owner.
        let code = ResponseError::NotLeaderOrFollower.code();
        return (base.with_error_code(code), None, true);
    }
    let Some(published) = r.published() else {
        if r.unanswered() {
            let code = ResponseError::NotLeaderOrFollower.code();
            return (base.with_error_code(code), None, true);
        }
        return (base.with_records(Some(Bytes::new())), None, false);
    };
    let base = base
        .with_high_watermark(published.high_watermark)
        .with_last_stable_offset(published.last_stable)
        .with_log_start_offset(published.log_start);
    let budget = max_bytes
        .saturating_sub(total)
        .min(t.max_bytes.max(0) as usize) as u32;
    if budget == 0 && total > 0 {
        return (base.with_records(Some(Bytes::new())), None, false);
    }
    let read = r
        .reader
        .read(
            t.fetch_offset,
            budget,
            total == 0,
            read_committed,
            published,
        )
        .and_then(|res| {
            if let Some(slice) = &res.slice {
                slice.load().map_err(|source| ReadError::Io {
                    tp: r.tp.clone(),
                    source,
                })?;
            }
            Ok(res)
        });
    // A DeleteRecords acknowledged while this read ran: what lies below the log start the
    // owner answered since is not served (the owner acknowledged it once this broker knew).
    let read = read.and_then(|res| match r.published() {
        Some(now) if t.fetch_offset < now.log_start => Err(ReadError::OffsetOutOfRange {
            tp: r.tp.clone(),
            requested: t.fetch_offset,
            log_start: now.log_start,
            log_end: now.high_watermark,
        }),
        _ => Ok(res),
    });
    let end = if read_committed {
        published.last_stable
    } else {
        published.high_watermark
    };
    let found_nothing = match &read {
        Ok(res) => res.slice.as_ref().is_none_or(|s| s.len == 0) && t.fetch_offset < end,
        Err(_) => true,
    };
    if found_nothing {
        // Nothing where the owner published something, or an error: if the partition's
        // directory is elsewhere now (the owner moved it to another log dir), this replica is
        // dropped, and the next fetch makes one on the new directory.
        broker.readers.drop_if_moved(broker, r);
    }
    match read {
        Ok(res) => match res.slice.filter(|s| s.len > 0) {
            Some(slice) => {
                let served = &broker.readers.bytes;
                served.fetch_add(u64::from(slice.len), Ordering::Relaxed);
                let base = with_aborted(base, res.aborted, read_committed);
                (base, Some(slice), false)
            }
            None => (base.with_records(Some(Bytes::new())), None, false),
        },
        Err(e) => (base.with_error_code(read_error_code(&e)), None, true),
    }
}

/// Read one log at `offset`: from memory and the page cache; when that would wait for the
/// volume, None under [`Reads::Cached`], else read waiting for it and bring what it found
/// into the page cache here ([`FileSlice::load`]), so that the server then sends it from
/// the cache on a runtime thread (counted in [`ColdReads`]).
fn read_log(
    broker: &Broker,
    log: &sluice_store::Log,
    offset: i64,
    budget: u32,
    min_one_batch: bool,
    read_committed: bool,
    reads: Reads,
) -> Option<Result<ReadResult, ReadError>> {
    let isolation = if read_committed {
        Isolation::ReadCommitted
    } else {
        Isolation::ReadUncommitted
    };
    match log.read_cached(offset, budget, min_one_batch, isolation) {
        Err(ReadError::WouldBlock { .. }) if reads == Reads::Cached => None,
        Err(ReadError::WouldBlock { .. }) => {
            let read = log.read_isolated(offset, budget, min_one_batch, isolation);
            Some(read.and_then(|r| {
                if let Some(slice) = &r.slice {
                    let c = &broker.cold_reads;
                    c.partitions.fetch_add(1, Ordering::Relaxed);
                    c.bytes.fetch_add(u64::from(slice.len), Ordering::Relaxed);
                    slice.load().map_err(|source| ReadError::Io {
                        tp: log.topic_partition().clone(),
                        source,
                    })?;
                }
                Ok(r)
            }))
        }
        read => Some(read),
    }
}

/// A partition's answer from its read (None: nothing read, the answer was full), its file
/// region if not empty, and whether it is an error. The offsets are those of the look at
/// the log the read was made from, as Kafka answers with those it took before its read: a
/// DeleteRecords or append since then does not make the answer's log start, high watermark
/// or last stable offset disagree with its records. A read_committed answer lists the
/// aborted transactions its records overlap.
fn answer_read(
    base: PartitionData,
    log: &sluice_store::Log,
    result: Result<Option<ReadResult>, ReadError>,
    read_committed: bool,
) -> (PartitionData, Option<FileSlice>, bool) {
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
                let base = with_aborted(base, r.aborted, read_committed);
                (base, Some(slice), false)
            }
            None => (base.with_records(Some(Bytes::new())), None, false),
        },
        Ok(None) => (base.with_records(Some(Bytes::new())), None, false),
        Err(e) => (base.with_error_code(read_error_code(&e)), None, true),
    }
}

/// A read_committed answer lists the aborted transactions its records overlap.
fn with_aborted(
    base: PartitionData,
    aborted: Option<Vec<sluice_store::AbortedTxn>>,
    read_committed: bool,
) -> PartitionData {
    match aborted {
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
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::StrBytes;

    use super::*;

    fn target(topic: &str, partition: i32, fetch_offset: i64) -> Target {
        Target {
            topic: topic.into(),
            topic_id: Uuid::nil(),
            partition,
            fetch_offset,
            max_bytes: 1024,
            current_leader_epoch: -1,
            log_start: -1,
            reported: None,
        }
    }

    #[test]
    fn session_ask_follows_kafkas_fetch_manager_rules() {
        // Before version 7 there are no sessions, whatever the request says.
        assert_eq!(session_ask(6, 5, 3), SessionAsk::Sessionless { close: 5 });
        assert_eq!(
            session_ask(12, 5, FINAL_EPOCH),
            SessionAsk::Sessionless { close: 5 }
        );
        assert_eq!(
            session_ask(12, 0, FINAL_EPOCH),
            SessionAsk::Sessionless { close: 0 }
        );
        assert_eq!(session_ask(12, 5, 0), SessionAsk::Open { previous: 5 });
        assert_eq!(session_ask(12, 0, 0), SessionAsk::Open { previous: 0 });
        assert_eq!(session_ask(12, 0, 4), SessionAsk::Unnamed);
        assert_eq!(
            session_ask(12, 5, 4),
            SessionAsk::Continue { id: 5, epoch: 4 }
        );
    }

    #[test]
    fn a_session_change_forgets_then_updates_or_adds() {
        let mut reported = target("a", 0, 10);
        reported.reported = Some((20, 0, 20));
        let mut targets = vec![reported, target("a", 1, 10), target("b", 0, 10)];
        let forgotten = vec![ForgottenTopic::default()
            .with_topic(TopicName(StrBytes::from_static_str("a")))
            .with_partitions(vec![1])];
        let mut moved = target("a", 0, 15);
        moved.max_bytes = 2048;
        let requested = vec![moved, target("c", 2, 0)];
        change_session(&mut targets, &forgotten, requested, false);
        let got: Vec<_> = targets
            .iter()
            .map(|t| (t.topic.as_str(), t.partition, t.fetch_offset, t.max_bytes))
            .collect();
        assert_eq!(
            got,
            [("a", 0, 15, 2048), ("b", 0, 10, 1024), ("c", 2, 0, 1024)]
        );
        // An updated partition keeps what was last reported for it.
        assert_eq!(targets[0].reported, Some((20, 0, 20)));
    }

    #[test]
    fn a_session_change_by_id_forgets_by_topic_id() {
        let id = Uuid::from_u128(7);
        let mut a0 = target("a", 0, 10);
        a0.topic_id = id;
        let mut targets = vec![a0, target("b", 0, 10)];
        // Named by id (version 13 on): the name in the forgotten entry is not looked at.
        let forgotten = vec![ForgottenTopic::default()
            .with_topic_id(id)
            .with_partitions(vec![0])];
        change_session(&mut targets, &forgotten, Vec::new(), true);
        assert_eq!(targets, [target("b", 0, 10)]);
    }

    #[test]
    fn news_is_records_an_error_or_moved_offsets() {
        let data = PartitionData::default()
            .with_high_watermark(20)
            .with_log_start_offset(0)
            .with_last_stable_offset(20);
        let mut t = target("a", 0, 20);
        // Never reported: news.
        assert!(has_news(&t, &data, false));
        t.reported = Some(reported(&data));
        assert!(!has_news(&t, &data, false));
        assert!(has_news(&t, &data, true));
        assert!(has_news(&t, &data.clone().with_error_code(1), false));
        assert!(has_news(&t, &data.clone().with_high_watermark(21), false));
        assert!(has_news(&t, &data.clone().with_log_start_offset(5), false));
        assert!(has_news(&t, &data.with_last_stable_offset(19), false));
    }
}

//! The group coordinator driver: runs the pure state machines of `sluice-group` against the
//! `__consumer_offsets` logs, a timer task, and parked JoinGroup/SyncGroup replies.
//!
//! Every mutation runs under one mutex: call the coordinator, append the records it returns
//! to their `__consumer_offsets` partition (and, when due, a snapshot followed by raising the
//! log start offset), hand replies to parked requests. Appending under the mutex keeps the
//! log in the order the state changed. Callers that promise durability (OffsetCommit,
//! DeleteGroups, OffsetDelete, ConsumerGroupHeartbeat, LeaveGroup) wait for the group-commit fsync of the
//! partitions written; JoinGroup and SyncGroup answers (parked ones too) wait for an fsync of
//! their group's partition requested once the answer exists (`Broker::flush_group`).
//!
//! Committed offsets are read only once durable and confirmed: an OffsetCommit's offsets stay
//! pending in the coordinator (OffsetFetch answers the offsets committed before) until the
//! flush round covering their append has fsynced it and, in a cluster, confirmed that this
//! broker still owns the partition; then they are applied, and on any failure dropped
//! (`Broker::settle_offset_commit`), as Kafka moves `pendingOffsetCommits` into `offsets` only
//! in the append's callback.
//!
//! Partitions are loaded when this broker acquires `__consumer_offsets` (start-up, or its
//! creation on first use) and could be unloaded on release: nothing here assumes the
//! process owns a partition forever.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use sluice_group::{
    Coordinator, Effects, GroupConfig, LoadItem, PendingOffsets, Record, Reply, Token, TopicInfo,
};
use sluice_store::{AppendOrigin, Log};
use tokio::sync::oneshot;

use crate::flusher::FlushError;
use crate::{now_ms, Broker};

/// The internal topic holding committed offsets and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// How often deadlines (session and rebalance timeouts) are checked.
const TICK_INTERVAL: Duration = Duration::from_millis(100);
/// Records per batch when writing a snapshot (keeps batches well under max.message.bytes).
const SNAPSHOT_BATCH_RECORDS: usize = 500;
/// Bytes read per step when loading a partition.
const LOAD_READ_BYTES: u32 = 1 << 20;

#[derive(Debug)]
pub(crate) struct Groups {
    coordinator: Mutex<Coordinator>,
    logs: Mutex<HashMap<i32, Arc<Log>>>,
    waiters: Mutex<HashMap<Token, oneshot::Sender<Reply>>>,
    next_token: AtomicU64,
    /// Serialises creation of `__consumer_offsets`.
    create_lock: Mutex<()>,
}

pub(crate) fn group_config(c: &sluice_config::BrokerConfig) -> GroupConfig {
    let g = &c.groups;
    GroupConfig {
        initial_rebalance_delay_ms: i64::from(g.initial_rebalance_delay_ms),
        min_session_timeout_ms: g.min_session_timeout_ms,
        max_session_timeout_ms: g.max_session_timeout_ms,
        max_size: usize::try_from(g.max_size).unwrap_or(usize::MAX),
        consumer_heartbeat_interval_ms: g.consumer_heartbeat_interval_ms,
        consumer_session_timeout_ms: g.consumer_session_timeout_ms,
        consumer_assignors: g.consumer_assignors.clone(),
        consumer_max_size: usize::try_from(g.consumer_max_size).unwrap_or(usize::MAX),
        offsets_retention_ms: i64::from(g.offsets_retention_minutes) * 60_000,
        offset_metadata_max_bytes: usize::try_from(g.offset_metadata_max_bytes).unwrap_or(0),
        // The config crate validated the name.
        migration_policy: sluice_group::MigrationPolicy::parse(&g.consumer_migration_policy)
            .unwrap_or_default(),
        snapshot_interval_records: g.offsets_snapshot_interval_records.max(1),
    }
}

/// Call `f` with every batch of a coordinator's log (`__consumer_offsets`,
/// `__transaction_state`) from offset `from` to the log end, in log order: its header and
/// bytes. Stops at the first batch that cannot be read (logged). Returns the offset after the
/// last batch read (`from` if none).
pub(crate) fn for_each_batch(
    log: &Log,
    from: i64,
    mut f: impl FnMut(&sluice_format::BatchHeader, &[u8]),
) -> i64 {
    let tp = log.topic_partition();
    let mut offset = from.max(log.log_start_offset());
    let end = log.log_end_offset();
    while offset < end {
        let slice = match log.read_appended(offset, LOAD_READ_BYTES) {
            Ok(r) => r.slice,
            Err(e) => {
                tracing::error!(?tp, offset, "reading a coordinator's log failed: {e}");
                break;
            }
        };
        let Some(bytes) = slice.and_then(|s| s.read_bytes().ok()) else {
            break;
        };
        let Ok(batches) = sluice_format::parse_batches(&bytes, None) else {
            tracing::error!(?tp, offset, "unparseable batch in a coordinator's log");
            break;
        };
        if batches.is_empty() {
            break;
        }
        let mut next = offset;
        for b in &batches {
            next = b.header.base_offset + i64::from(b.header.last_offset_delta) + 1;
            if next > offset {
                f(&b.header, &bytes[b.range()]);
            }
        }
        if next <= offset {
            break;
        }
        offset = next;
    }
    offset
}

/// Every record of a log from offset `from`, in log order, with the transaction markers and
/// the producer of transactional batches (TxnOffsetCommit offsets, pending until their
/// marker); and the offset after the last batch read.
fn read_from(log: &Log, from: i64) -> (Vec<LoadItem>, i64) {
    let tp = log.topic_partition();
    let mut out = Vec::new();
    let next = for_each_batch(log, from, |h, batch| {
        if h.is_control() {
            match sluice_format::txn::parse_control(batch, h) {
                Ok(c) if c.control_type == sluice_format::txn::CONTROL_COMMIT => {
                    out.push(LoadItem::Marker {
                        producer_id: h.producer_id,
                        commit: true,
                    })
                }
                Ok(c) if c.control_type == sluice_format::txn::CONTROL_ABORT => {
                    out.push(LoadItem::Marker {
                        producer_id: h.producer_id,
                        commit: false,
                    })
                }
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(
                        ?tp,
                        base = h.base_offset,
                        "skipping a __consumer_offsets control batch: {e}"
                    )
                }
            }
            return;
        }
        let producer_id = h.is_transactional().then_some(h.producer_id);
        match sluice_group::records::batch_records(batch) {
            Ok(records) => out.extend(records.into_iter().filter_map(|(k, value)| {
                k.map(|key| LoadItem::Record {
                    key,
                    value,
                    producer_id,
                })
            })),
            Err(e) => {
                tracing::warn!(
                    ?tp,
                    base = h.base_offset,
                    "skipping a __consumer_offsets batch: {e}"
                )
            }
        }
    });
    (out, next)
}

/// The partitions of a coordinator's loaded logs that the write gate refuses now, or that
/// failed (a failed fsync: the state in memory may hold what never reached storage); their
/// coordinator unloads them (`Groups::unload_fenced`, `Txns::unload_fenced`) and loads them
/// again from what storage holds when the log is re-opened.
pub(crate) fn unwritable(logs: &HashMap<i32, Arc<Log>>) -> Vec<i32> {
    logs.iter()
        .filter(|(_, log)| !log.writable() || log.failure().is_some())
        .map(|(p, _)| *p)
        .collect()
}

/// A TxnOffsetCommit written: the per-commit results and the log to wait for.
pub(crate) type TxnOffsetsWritten = (Vec<Result<(), sluice_group::GroupError>>, Arc<Log>);

impl Groups {
    pub(crate) fn new(config: &sluice_config::BrokerConfig) -> Groups {
        Groups {
            coordinator: Mutex::new(Coordinator::new(
                group_config(config),
                config.groups.offsets_topic_num_partitions,
            )),
            logs: Mutex::new(HashMap::new()),
            waiters: Mutex::new(HashMap::new()),
            next_token: AtomicU64::new(1),
            create_lock: Mutex::new(()),
        }
    }

    /// Load (acquire) one `__consumer_offsets` partition.
    pub(crate) fn load(&self, partition: i32, log: Arc<Log>) {
        self.load_with(partition, log, || {});
    }

    /// [`Groups::load`], calling `between` after the log was read outside the coordinator's
    /// lock (a test appends there). Every append to `__consumer_offsets` (the coordinator's
    /// records, TxnOffsetCommit batches, transaction markers) happens under that lock: what
    /// was appended after the first read is read under it, with the load, so a marker written
    /// meanwhile (which found no loaded partition to complete) is not lost.
    fn load_with(&self, partition: i32, log: Arc<Log>, between: impl FnOnce()) {
        let (mut records, next) = read_from(&log, log.log_start_offset());
        between();
        let mut c = self.coordinator.lock();
        if log.failure().is_some() {
            // Failed since it was chosen (appends fail under this lock): its re-open loads it.
            return;
        }
        records.extend(read_from(&log, next).0);
        let n = records.len();
        let bad = c.load(partition, records, now_ms());
        self.logs.lock().insert(partition, log);
        drop(c);
        if bad > 0 {
            tracing::warn!(
                partition,
                bad,
                "skipped undecodable __consumer_offsets records"
            );
        }
        tracing::debug!(
            partition,
            records = n,
            "loaded __consumer_offsets partition"
        );
    }

    /// Release (unload) one `__consumer_offsets` partition: its groups are forgotten here.
    pub(crate) fn unload(&self, partition: i32) {
        let parked = self.coordinator.lock().unload(partition);
        self.logs.lock().remove(&partition);
        // Their requests are answered now (COORDINATOR_NOT_AVAILABLE: the client looks for
        // the new coordinator) instead of at their timeout.
        let mut waiters = self.waiters.lock();
        for token in &parked {
            waiters.remove(token);
        }
        tracing::debug!(
            partition,
            parked = parked.len(),
            "unloaded __consumer_offsets partition"
        );
    }

    /// Unload every partition whose log this broker may no longer write (the write gate: the
    /// lease was not renewed in time, or the partition is no longer held here), so that its
    /// groups answer NOT_COORDINATOR and nothing is answered from state in memory that a new
    /// coordinator does not have. Asked before every call on the coordinator.
    fn unload_fenced(&self) {
        // Bound first: the lock is let go before `unload` takes it again.
        let fenced = unwritable(&self.logs.lock());
        for p in fenced {
            tracing::warn!(
                partition = p,
                "this broker may no longer write __consumer_offsets-{p}: its groups are unloaded"
            );
            self.unload(p);
        }
    }

    /// True if `partition` is loaded here.
    pub(crate) fn is_loaded(&self, partition: i32) -> bool {
        self.logs.lock().contains_key(&partition)
    }

    /// The loaded `__consumer_offsets` log holding `group_id`, if any.
    pub(crate) fn log_of(&self, group_id: &str) -> Option<Arc<Log>> {
        let p = self.coordinator.lock().partition_for(group_id);
        self.logs.lock().get(&p).cloned()
    }

    pub(crate) fn partition_count(&self) -> i32 {
        self.coordinator.lock().partitions()
    }

    /// A new token with its reply channel registered.
    pub(crate) fn park(&self) -> (Token, oneshot::Receiver<Reply>) {
        let token = self.next_token.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.waiters.lock().insert(token, tx);
        (token, rx)
    }

    pub(crate) fn unpark(&self, token: Token) {
        self.waiters.lock().remove(&token);
    }

    /// Run `f` on the coordinator, persist its records and deliver its replies. Returns `f`'s
    /// result and the logs written (for callers that wait for an fsync).
    pub(crate) fn run<T>(
        &self,
        f: impl FnOnce(&mut Coordinator) -> (T, Effects),
    ) -> (T, Vec<Arc<Log>>) {
        self.unload_fenced();
        let (value, replies, written) = {
            let mut c = self.coordinator.lock();
            let (value, effects) = f(&mut c);
            let written = self.persist_locked(&mut c, effects.records);
            (value, effects.replies, written)
        };
        let mut waiters = self.waiters.lock();
        for (token, reply) in replies {
            if let Some(tx) = waiters.remove(&token) {
                let _ = tx.send(reply);
            }
        }
        (value, written)
    }

    /// TxnOffsetCommit: validate, append the offsets as one transactional batch of the
    /// producer to the group's `__consumer_offsets` partition (the log checks the producer's
    /// epoch, and that the batch is of a transaction open there or comes with `verified`'s
    /// guard, taken on that log before the transaction coordinator was asked), and only then
    /// hold them pending until the transaction's marker. Returns the per-commit results and
    /// the log written, or the code for every partition.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn commit_txn_offsets(
        &self,
        group_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        commits: &[sluice_group::OffsetCommit],
        verified: (&Arc<Log>, Option<sluice_store::VerificationGuard>),
    ) -> Result<TxnOffsetsWritten, i16> {
        let now = now_ms();
        self.unload_fenced();
        let mut c = self.coordinator.lock();
        let (results, partition, records, pending) = c
            .txn_commit_offsets(
                group_id,
                producer_id,
                member_id,
                instance_id,
                generation,
                commits,
                now,
            )
            .map_err(|e| crate::errors::group_error_code(&e))?;
        let Some(log) = self.logs.lock().get(&partition).cloned() else {
            return Err(kafka_protocol::ResponseError::NotCoordinator.code());
        };
        if !Arc::ptr_eq(&log, verified.0) {
            // Loaded again since the transaction coordinator was asked: the client retries.
            return Err(kafka_protocol::ResponseError::NotCoordinator.code());
        }
        if !records.is_empty() {
            let mut b = sluice_format::BatchBuilder::new().producer(
                producer_id,
                producer_epoch,
                sluice_format::batch::NO_SEQUENCE,
            );
            b.transactional = true;
            for r in &records {
                b = b.record(now, Some(&r.key), r.value.as_deref());
            }
            let batch = Bytes::from(b.build());
            match log.append_verified(batch, AppendOrigin::Coordinator, verified.1, now) {
                Ok(_) => {}
                Err(e @ sluice_store::AppendError::ProducerFenced { .. }) => {
                    tracing::debug!(group_id, "transactional offset commit refused: {e}");
                    return Err(kafka_protocol::ResponseError::InvalidProducerEpoch.code());
                }
                // Nothing written: the producer's transaction is not open here (a marker
                // came after the coordinator's verdict, or it is of an older epoch).
                Err(e @ sluice_store::AppendError::InvalidTxnState { .. }) => {
                    tracing::debug!(group_id, "transactional offset commit refused: {e}");
                    return Err(kafka_protocol::ResponseError::InvalidTxnState.code());
                }
                Err(e) => {
                    tracing::error!(partition, "appending to __consumer_offsets failed: {e}");
                    log.mark_failed(format!(
                        "an append to __consumer_offsets failed ({e}); the groups of this partition are reloaded from the log"
                    ));
                    return Err(crate::errors::coordinator_write_code(
                        crate::errors::append_error_code(&e),
                    ));
                }
            }
        }
        c.apply_txn_offsets(pending);
        Ok((results, log))
    }

    /// An OffsetCommit's append is settled: its pending offsets are applied if the append was
    /// durable and confirmed, and dropped otherwise.
    fn settle_commit(&self, pending: PendingOffsets, outcome: &Result<(), FlushError>) {
        let mut c = self.coordinator.lock();
        match outcome {
            Ok(()) => c.commit_written(pending),
            Err(_) => c.commit_failed(pending),
        }
    }

    /// Read-only access.
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Coordinator) -> T) -> T {
        self.unload_fenced();
        f(&self.coordinator.lock())
    }

    fn persist_locked(&self, c: &mut Coordinator, records: Vec<(i32, Record)>) -> Vec<Arc<Log>> {
        if records.is_empty() {
            return Vec::new();
        }
        let mut by_partition: BTreeMap<i32, Vec<Record>> = BTreeMap::new();
        for (p, r) in records {
            by_partition.entry(p).or_default().push(r);
        }
        let logs = self.logs.lock().clone();
        let now = now_ms();
        let mut written = Vec::new();
        for (p, records) in by_partition {
            let Some(log) = logs.get(&p) else {
                tracing::error!(partition = p, "no __consumer_offsets log for records");
                continue;
            };
            for chunk in records.chunks(SNAPSHOT_BATCH_RECORDS) {
                let batch = sluice_group::records::encode_batch(chunk, now);
                if let Err(e) = log.append(Bytes::from(batch), AppendOrigin::Client, now) {
                    tracing::error!(partition = p, "appending to __consumer_offsets failed: {e}");
                    // The coordinator applied what the log does not hold: the log fails (the
                    // waiting answers get a retriable storage error instead of success), is
                    // re-opened, and the groups are loaded again from what it holds.
                    log.mark_failed(format!(
                        "an append to __consumer_offsets failed ({e}); the groups of this partition are reloaded from the log"
                    ));
                    break;
                }
            }
            if let Some(snapshot) = c.snapshot_if_due(p) {
                self.write_snapshot(p, log, &snapshot, now);
            }
            written.push(log.clone());
        }
        written
    }

    /// Append every live record, then drop everything before them.
    ///
    /// Kept alongside compaction (`__consumer_offsets` is `cleanup.policy=compact`, and the
    /// log cleaner compacts it like any compacted topic): the snapshot bounds what a load
    /// reads to the live records plus `sluice.offsets.snapshot.interval.records` whatever
    /// the cleaner's schedule (its dirty ratio, `min.compaction.lag.ms`, its backoff, a
    /// disabled cleaner), and both keep a load from the log alone correct: the snapshot
    /// rewrites the newest record of every live key, the cleaner leaves exactly those.
    fn write_snapshot(&self, partition: i32, log: &Log, snapshot: &[Record], now: i64) {
        let mut first: Option<i64> = None;
        for chunk in snapshot.chunks(SNAPSHOT_BATCH_RECORDS) {
            let batch = sluice_group::records::encode_batch(chunk, now);
            match log.append(Bytes::from(batch), AppendOrigin::Client, now) {
                Ok(o) => {
                    first.get_or_insert(o.base_offset);
                }
                Err(e) => {
                    tracing::error!(
                        partition,
                        "writing a __consumer_offsets snapshot failed: {e}"
                    );
                    return;
                }
            }
        }
        let start = first.unwrap_or_else(|| log.log_end_offset());
        // The snapshot must be durable before the records it replaces go.
        if let Err(e) = log.flush() {
            tracing::error!(
                partition,
                "flushing a __consumer_offsets snapshot failed: {e}"
            );
            return;
        }
        match log.delete_records_before(start) {
            Ok(low) => {
                tracing::info!(
                    partition,
                    records = snapshot.len(),
                    log_start = low,
                    "wrote __consumer_offsets snapshot"
                )
            }
            Err(e) => tracing::warn!(
                partition,
                "raising the __consumer_offsets log start failed: {e}"
            ),
        }
    }
}

impl Broker {
    /// Create `__consumer_offsets` if it does not exist yet and load every partition this
    /// broker has not loaded. False when it cannot be created.
    pub(crate) fn ensure_offsets_topic(&self) -> bool {
        if self.cluster.is_some() {
            // In a cluster the owners of its partitions load them (crate::cluster).
            return self.registry.get(OFFSETS_TOPIC).is_some()
                || self.ensure_offsets_topic_in_cluster();
        }
        if let Some(t) = self.registry.get(OFFSETS_TOPIC) {
            self.load_offsets_partitions(&t);
            return true;
        }
        let _guard = self.groups.create_lock.lock();
        if self.registry.get(OFFSETS_TOPIC).is_none() {
            let mut configs = BTreeMap::new();
            configs.insert("cleanup.policy".to_string(), "compact".to_string());
            let partitions = self.groups.partition_count();
            if let Err(r) = self.create_topic(OFFSETS_TOPIC, partitions, configs) {
                tracing::error!("creating {OFFSETS_TOPIC} failed: {}", r.message);
                return false;
            }
        }
        match self.registry.get(OFFSETS_TOPIC) {
            Some(t) => {
                self.load_offsets_partitions(&t);
                true
            }
            None => false,
        }
    }

    /// The broker that coordinates `group_id`: the owner of its `__consumer_offsets`
    /// partition.
    pub(crate) fn group_coordinator(&self, group_id: &str) -> Option<i32> {
        if self.cluster.is_none() {
            return Some(self.node_id);
        }
        let p = self.groups.read(|c| c.partition_for(group_id));
        let t = self.meta.topic(OFFSETS_TOPIC)?;
        t.owners.get(p as usize).copied().filter(|o| *o >= 0)
    }

    fn ensure_offsets_topic_in_cluster(&self) -> bool {
        let _guard = self.groups.create_lock.lock();
        let mut configs = BTreeMap::new();
        configs.insert("cleanup.policy".to_string(), "compact".to_string());
        match self.create_topic(OFFSETS_TOPIC, self.groups.partition_count(), configs) {
            Ok(_) => true,
            Err(_) if self.meta.topic(OFFSETS_TOPIC).is_some() => true,
            Err(r) => {
                tracing::error!("creating {OFFSETS_TOPIC} failed: {}", r.message);
                false
            }
        }
    }

    fn load_offsets_partitions(&self, t: &crate::registry::TopicState) {
        for (p, log) in t.logs.iter().enumerate() {
            let Some(log) = log else { continue };
            let p = p as i32;
            // A failed log is loaded when it is re-opened, from what storage holds.
            if log.failure().is_some() {
                continue;
            }
            if !self.groups.read(|c| c.is_loaded(p)) && p < self.groups.partition_count() {
                self.groups.load(p, log.clone());
            }
        }
    }

    /// Topic name -> (id, partitions) for KIP-848 assignment: every topic, the internal ones
    /// too (Kafka resolves subscriptions, regular expressions included, against all of them).
    pub(crate) fn topic_infos(&self) -> BTreeMap<String, TopicInfo> {
        self.registry
            .all()
            .iter()
            .map(|t| {
                (
                    t.meta.name.clone(),
                    TopicInfo {
                        id: t.meta.id,
                        partitions: t.meta.partitions(),
                    },
                )
            })
            .collect()
    }

    /// Consumer lag per group and partition: (group, topic, partition, committed offset,
    /// log end offset, lag). Lag is the high watermark minus the committed offset, never
    /// negative; partitions that no longer exist are left out.
    pub fn consumer_lag(&self) -> Vec<(String, String, i32, i64, i64, i64)> {
        let committed = self.groups.read(|c| c.all_committed());
        committed
            .into_iter()
            .filter_map(|(g, t, p, offset)| {
                let hw = self.registry.get(&t)?.log(p)?.high_watermark();
                Some((g, t, p, offset, hw, (hw - offset).max(0)))
            })
            .collect()
    }

    /// Start the timer task: session/rebalance deadlines every [`TICK_INTERVAL`], offset
    /// expiry every `offsets.retention.check.interval.ms`.
    pub(crate) fn start_group_timers(broker: &Arc<Broker>) {
        let weak: Weak<Broker> = Arc::downgrade(broker);
        let expiry_interval_ms = broker
            .config
            .groups
            .offsets_retention_check_interval_ms
            .max(1);
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(TICK_INTERVAL);
            let mut last_expiry = now_ms();
            loop {
                interval.tick().await;
                let Some(b) = weak.upgrade() else { return };
                let now = now_ms();
                b.groups.run(|c| ((), c.tick(now)));
                if now - last_expiry >= expiry_interval_ms {
                    last_expiry = now;
                    b.groups.run(|c| ((), c.expire_offsets(now)));
                }
            }
        });
    }

    /// Wait for the fsync of everything appended so far to the partition of `group_id`: an
    /// answer that depends on group metadata records (JoinGroup, SyncGroup, parked or not)
    /// calls this after the answer exists, so the records it depends on, appended under the
    /// coordinator mutex before the answer was produced, are covered by the group commit.
    pub(crate) fn flush_group(
        &self,
        group_id: &str,
    ) -> impl std::future::Future<Output = Result<(), crate::flusher::FlushError>> {
        // Unloaded since the answer was made (released, or the write gate closed): nothing
        // can make it durable here, so it is not given.
        let log = self.groups.log_of(group_id);
        let flushed = self.flush_logs(log.iter().cloned().collect());
        async move {
            if log.is_none() {
                return Err(crate::flusher::FlushError::NotOwner(
                    "the group's partition is no longer loaded on this broker".into(),
                ));
            }
            flushed.await
        }
    }

    /// Settle an OffsetCommit: wait for the flush round covering the `__consumer_offsets`
    /// append that holds its records (`written`, what [`Groups::run`] returned): its fsync
    /// and, in a cluster, the confirmation that this broker still owns the partition. Then
    /// its pending offsets are applied, or on any failure dropped, before the outcome is
    /// returned, so a committer that got an error never had its offset read by anyone. Runs
    /// as a task of its own: the offsets are settled even when nobody waits for the answer
    /// (the committer's connection closed), instead of staying pending until a reload.
    pub(crate) fn settle_offset_commit(
        self: &Arc<Self>,
        pending: PendingOffsets,
        written: Vec<Arc<Log>>,
    ) -> impl std::future::Future<Output = Result<(), FlushError>> {
        let partition = pending.partition();
        // Records with no log to go to were not written (logged by `persist_locked`).
        let appended = pending.is_empty()
            || written
                .iter()
                .any(|l| l.topic_partition().partition == partition);
        let flushed = self.flush_logs(written);
        let broker = self.clone();
        let settled = tokio::spawn(async move {
            let outcome = if appended {
                flushed.await
            } else {
                Err(FlushError::Storage(format!(
                    "no {OFFSETS_TOPIC}-{partition} log took the commit's records"
                )))
            };
            broker.groups.settle_commit(pending, &outcome);
            outcome
        });
        async move {
            settled.await.unwrap_or_else(|e| {
                Err(FlushError::Storage(format!(
                    "settling a commit failed: {e}"
                )))
            })
        }
    }

    /// Wait for the fsync of every log written.
    pub(crate) fn flush_logs(
        &self,
        logs: Vec<Arc<Log>>,
    ) -> impl std::future::Future<Output = Result<(), crate::flusher::FlushError>> {
        let waits: Vec<_> = logs.into_iter().map(|l| self.flusher.request(l)).collect();
        async move {
            for w in waits {
                w.await?;
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::testutil::{log_config, open_logs};

    /// Issue 53, item 6: a transaction marker written to `__consumer_offsets` while the
    /// partition is being loaded (its log read, the coordinator not loaded yet) completes the
    /// transaction's offsets in what the load builds: they are committed, not pending forever
    /// (OffsetFetch with require_stable would answer UNSTABLE_OFFSET_COMMIT indefinitely).
    #[test]
    fn a_marker_written_while_the_partition_loads_completes_its_offsets() {
        let groups = Groups::new(&sluice_config::BrokerConfig::default());
        let p = groups.coordinator.lock().partition_for("g");
        let (_dir, _m, logs) = open_logs(1, &log_config(1, i64::MAX));
        let log = logs[0].clone();
        groups.load(p, log.clone());
        let producer_id = 7;
        let commit = sluice_group::OffsetCommit {
            topic: "x".into(),
            partition: 0,
            offset: 100,
            leader_epoch: -1,
            metadata: None,
        };
        // As the TxnOffsetCommit handler does: the guard taken before the coordinator's verdict.
        let guard = log.start_txn_verification(producer_id, 0, None, now_ms());
        let (results, _) = groups
            .commit_txn_offsets("g", producer_id, 0, "", None, -1, &[commit], (&log, guard))
            .unwrap();
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        let tp = ("x".to_string(), 0);
        assert!(groups.coordinator.lock().has_pending_offset("g", &tp));

        // The partition is loaded again (a re-opened log); the marker is written, as
        // `write_marker` writes it, after the load read the log and before it took the lock.
        groups.unload(p);
        groups.load_with(p, log.clone(), || {
            groups.run(|c| {
                log.append_marker(
                    producer_id,
                    0,
                    0,
                    sluice_store::ControlType::Commit,
                    now_ms(),
                )
                .unwrap();
                c.complete_txn(p, producer_id, true);
                ((), Effects::default())
            });
        });

        let c = groups.coordinator.lock();
        assert!(
            !c.has_pending_offset("g", &tp),
            "the transaction's offset is still pending after its COMMIT marker"
        );
        let fetched = c
            .fetch_offsets("g", Some(std::slice::from_ref(&tp)))
            .unwrap();
        assert_eq!(fetched[0].1.as_ref().map(|o| o.offset), Some(100));
    }
}

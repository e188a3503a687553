//! The transaction coordinator driver: runs the pure state machine of `sluice-txn` against
//! the `__transaction_state` logs, delivers transaction markers, and runs its timers.
//!
//! Every call into the coordinator runs under one mutex: call it, append the records it
//! returns to their `__transaction_state` partition, and only then let go of the mutex, so the
//! log holds the transitions in the order they happened. Callers answer once those records
//! are durable (the group-commit round of the partitions written), and marker jobs start only
//! then (the Prepare record first, as Kafka does). When all of a job's markers are written,
//! the Complete record is appended the same way.
//!
//! A `__transaction_state` partition is loaded when this broker holds it (start-up, creation
//! on first use, acquisition in a cluster), at the partition's ownership epoch, which is the
//! coordinator epoch stamped into the markers it writes; a new owner resumes the markers of
//! the transactions it finds in PrepareCommit/PrepareAbort. Nothing here assumes the process
//! owns a partition forever.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use sluice_store::{AppendOrigin, Log};
use sluice_txn::{Coordinator, Effects, MarkerJob, TxnConfig};

use crate::flusher::FlushError;
use crate::markers::Markers;
use crate::{now_ms, Broker};

/// The internal topic holding transaction state.
pub const TXN_TOPIC: &str = "__transaction_state";
/// Records per batch when appending (keeps batches well under max.message.bytes).
const BATCH_RECORDS: usize = 500;
/// Kafka's `transaction.state.log.segment.bytes` default.
const SEGMENT_BYTES: &str = "104857600";

#[derive(Debug)]
pub(crate) struct Txns {
    coordinator: Mutex<Coordinator>,
    logs: Mutex<HashMap<i32, Arc<Log>>>,
    /// Serialises creation of `__transaction_state`.
    create_lock: Mutex<()>,
    /// Woken when a transaction completes (its Complete record is durable): a partition
    /// leader waiting to add a partition to the producer's next transaction asks again.
    completed: tokio::sync::Notify,
    /// The logs of the calls whose records are appended and whose flush has not settled yet
    /// (one entry per call and log). A later call's answer may rest on those records (a
    /// verification or a retried add, which write nothing): it waits for their flush too.
    unsettled: Mutex<Vec<Arc<Log>>>,
    /// Tests only: the next this many flushes of coordinator records end as a failed
    /// ownership confirmation does (the records on storage, the answer an error).
    #[cfg(test)]
    unconfirmed_flushes: std::sync::atomic::AtomicUsize,
}

pub(crate) fn txn_config(c: &sluice_config::BrokerConfig, transaction_version: i16) -> TxnConfig {
    let t = &c.transactions;
    TxnConfig {
        partitions: t.state_log_num_partitions,
        max_timeout_ms: t.max_timeout_ms,
        id_expiration_ms: i64::from(t.id_expiration_ms),
        transaction_version,
    }
}

/// Every (key, value) of a log's data batches from offset `from`, and the offset after the
/// last batch read (transaction markers are never written to `__transaction_state`, but are
/// skipped if found).
fn read_records(log: &Log, from: i64) -> (Vec<(Bytes, Option<Bytes>)>, i64) {
    let mut out = Vec::new();
    let next = crate::groups::for_each_batch(log, from, |h, batch| {
        if h.is_control() {
            return;
        }
        match sluice_group::records::batch_records(batch) {
            Ok(records) => out.extend(records.into_iter().filter_map(|(k, v)| k.map(|k| (k, v)))),
            Err(e) => {
                tracing::warn!(tp = ?log.topic_partition(), base = h.base_offset, "skipping a {TXN_TOPIC} batch: {e}")
            }
        }
    });
    (out, next)
}

/// What a coordinator call did: its result, the logs it wrote, the marker jobs to start.
#[cfg(test)]
type Ran<T> = (T, Vec<Arc<Log>>, Vec<MarkerJob>);

impl Txns {
    /// The coordinator of `config`, at the finalized `transaction_version`.
    pub(crate) fn new(config: &sluice_config::BrokerConfig, transaction_version: i16) -> Txns {
        Txns {
            coordinator: Mutex::new(Coordinator::new(txn_config(config, transaction_version))),
            logs: Mutex::new(HashMap::new()),
            create_lock: Mutex::new(()),
            completed: tokio::sync::Notify::new(),
            unsettled: Mutex::new(Vec::new()),
            #[cfg(test)]
            unconfirmed_flushes: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    pub(crate) fn set_transaction_version(&self, version: i16) {
        self.coordinator.lock().set_transaction_version(version);
    }

    pub(crate) fn partition_count(&self) -> i32 {
        self.coordinator.lock().config().partitions
    }

    pub(crate) fn partition_for(&self, transactional_id: &str) -> i32 {
        self.coordinator.lock().partition_for(transactional_id)
    }

    pub(crate) fn is_loaded(&self, partition: i32) -> bool {
        self.unload_fenced();
        self.coordinator.lock().is_loaded(partition)
    }

    /// The coordinator epoch a loaded partition was loaded at: a marker job of another
    /// epoch belongs to an earlier load and stops at its next step.
    pub(crate) fn coordinator_epoch(&self, partition: i32) -> Option<i32> {
        self.coordinator.lock().coordinator_epoch(partition)
    }

    /// Read-only access.
    pub(crate) fn read<T>(&self, f: impl FnOnce(&Coordinator) -> T) -> T {
        self.unload_fenced();
        f(&self.coordinator.lock())
    }

    /// Unload every partition whose log this broker may no longer write (the write gate: the
    /// lease was not renewed in time, or the partition is no longer held here) or whose log
    /// failed (its state in memory may hold a transition that never reached storage): its
    /// transactional ids answer NOT_COORDINATOR from then on, and its marker jobs stop at
    /// their next step. Asked before every call on the coordinator.
    fn unload_fenced(&self) {
        let fenced = crate::groups::unwritable(&self.logs.lock());
        for p in fenced {
            tracing::warn!(
                partition = p,
                "this broker may no longer write {TXN_TOPIC}-{p}: its transactions are unloaded"
            );
            self.unload(p);
        }
    }

    /// Records of `logs` were appended, but their flush failed (an fsync, or in a cluster the
    /// ownership confirmation): they may or may not be on storage, and the state in memory
    /// is ahead of what is known to be. Invariant: the coordinator never answers from, nor
    /// starts marker jobs of, a state storage may not hold, and never decides a transaction
    /// whose Prepare record may be on storage anew: a Prepare* record once appended is
    /// completed only with its own outcome, by the load that reads it. So each such log is
    /// marked failed and its partition unloaded, as after a failed append: the re-open (in a
    /// cluster, the acquisition again) loads it at a new coordinator epoch from what storage
    /// holds, and resumes the markers of every Prepare* it finds there.
    fn forget_unconfirmed(&self, logs: &[Arc<Log>], error: &FlushError) {
        let mut c = self.coordinator.lock();
        self.forget_unconfirmed_locked(&mut c, logs, error);
    }

    /// [`Txns::forget_unconfirmed`] under the coordinator's lock (held by the caller).
    fn forget_unconfirmed_locked(
        &self,
        c: &mut Coordinator,
        logs: &[Arc<Log>],
        error: &FlushError,
    ) {
        for log in logs {
            let p = log.topic_partition().partition;
            tracing::warn!(
                partition = p,
                "a flush of {TXN_TOPIC} failed ({error}); its transactions are reloaded from storage"
            );
            log.mark_failed(format!(
                "a flush of {TXN_TOPIC} failed ({error}); its transactions are reloaded from storage"
            ));
            // Only the load that appended them: a newer load read storage itself.
            if self
                .logs
                .lock()
                .get(&p)
                .is_some_and(|l| Arc::ptr_eq(l, log))
            {
                c.unload(p);
                self.logs.lock().remove(&p);
            }
        }
    }

    /// Forget one `__transaction_state` partition (another broker coordinates it now; its
    /// marker jobs in flight here stop at their next retry).
    pub(crate) fn unload(&self, partition: i32) {
        self.coordinator.lock().unload(partition);
        self.logs.lock().remove(&partition);
        tracing::debug!(partition, "unloaded {TXN_TOPIC} partition");
    }

    /// Tests: [`Txns::run_tracked`] untracked.
    #[cfg(test)]
    fn run<T>(&self, f: impl FnOnce(&mut Coordinator) -> (T, Effects)) -> Result<Ran<T>, ()> {
        self.run_tracked(f, false)
            .map(|(value, written, markers, _)| (value, written, markers))
    }

    /// Run `f` on the coordinator and append the records it returns. Returns `f`'s result,
    /// the logs written (to wait for), the marker jobs (to start once those are durable)
    /// and, with `track`, the logs of earlier calls whose records `f`'s answer may rest on
    /// and whose flush has not settled (only for a call that writes nothing; taken under the
    /// coordinator's lock, with `f`; the logs written are listed as unsettled until
    /// [`Txns::settled`]). An append that fails marks the log failed: the partition is
    /// re-opened and loaded again from what the log holds, and the answer is a retriable
    /// error.
    fn run_tracked<T>(
        &self,
        f: impl FnOnce(&mut Coordinator) -> (T, Effects),
        track: bool,
    ) -> Result<(T, Vec<Arc<Log>>, Vec<MarkerJob>, Vec<Arc<Log>>), ()> {
        self.unload_fenced();
        let mut c = self.coordinator.lock();
        let (value, effects) = f(&mut c);
        let mut by_partition: BTreeMap<i32, Vec<(Bytes, Option<Bytes>)>> = BTreeMap::new();
        for r in effects.records {
            by_partition
                .entry(r.partition)
                .or_default()
                .push((r.key, r.value));
        }
        let logs = self.logs.lock().clone();
        let now = now_ms();
        let mut written = Vec::new();
        let mut failed = false;
        for (p, records) in by_partition {
            let Some(log) = logs.get(&p) else {
                tracing::error!(partition = p, "no {TXN_TOPIC} log for records");
                failed = true;
                continue;
            };
            for chunk in records.chunks(BATCH_RECORDS) {
                let mut b = sluice_format::BatchBuilder::new();
                for (k, v) in chunk {
                    b = b.record(now, Some(k), v.as_deref());
                }
                if let Err(e) = log.append(Bytes::from(b.build()), AppendOrigin::Client, now) {
                    tracing::error!(partition = p, "appending to {TXN_TOPIC} failed: {e}");
                    log.mark_failed(format!(
                        "an append to {TXN_TOPIC} failed ({e}); its transactions are reloaded from the log"
                    ));
                    c.unload(p);
                    failed = true;
                    break;
                }
            }
            written.push(log.clone());
        }
        if failed {
            // The partitions whose appends went through are ahead of their logs' flush and
            // their marker jobs go with this error: they are loaded again from storage too
            // (`forget_unconfirmed`'s invariant), or a Prepare appended there would hang.
            // Under the lock, so that no other call answers from them meanwhile.
            let appended: Vec<_> = written
                .into_iter()
                .filter(|l| l.failure().is_none())
                .collect();
            self.forget_unconfirmed_locked(
                &mut c,
                &appended,
                &FlushError::Storage("an append of the same call failed".into()),
            );
            return Err(());
        }
        let mut depends: Vec<Arc<Log>> = Vec::new();
        if track {
            let mut unsettled = self.unsettled.lock();
            if written.is_empty() {
                for l in unsettled.iter() {
                    if !depends.iter().any(|d| Arc::ptr_eq(d, l)) {
                        depends.push(l.clone());
                    }
                }
            }
            unsettled.extend(written.iter().cloned());
        }
        drop(c);
        Ok((value, written, effects.markers, depends))
    }

    /// The flush of a call's `written` logs settled (done, or its failure handled).
    fn settled(&self, written: &[Arc<Log>]) {
        let mut unsettled = self.unsettled.lock();
        for l in written {
            if let Some(i) = unsettled.iter().position(|u| Arc::ptr_eq(u, l)) {
                unsettled.swap_remove(i);
            }
        }
    }
}

impl Broker {
    /// Create `__transaction_state` if it does not exist yet and load every partition this
    /// broker holds and has not loaded. False when it cannot be created.
    pub(crate) fn ensure_txn_topic(&self) -> bool {
        if self.registry.get(TXN_TOPIC).is_none() {
            let _guard = self.txns.create_lock.lock();
            if self.registry.get(TXN_TOPIC).is_none() && self.meta.topic(TXN_TOPIC).is_none() {
                let mut configs = BTreeMap::new();
                configs.insert("cleanup.policy".to_string(), "compact".to_string());
                configs.insert("segment.bytes".to_string(), SEGMENT_BYTES.to_string());
                let partitions = self.txns.partition_count();
                if let Err(r) = self.create_topic(TXN_TOPIC, partitions, configs) {
                    if self.meta.topic(TXN_TOPIC).is_none() {
                        tracing::error!("creating {TXN_TOPIC} failed: {}", r.message);
                        return false;
                    }
                }
            }
        }
        if self.cluster.is_some() {
            // In a cluster the owners of its partitions load them (crate::cluster).
            return self.meta.topic(TXN_TOPIC).is_some();
        }
        match self.registry.get(TXN_TOPIC) {
            Some(t) => {
                for (p, log) in t.logs.iter().enumerate() {
                    let Some(log) = log else { continue };
                    let p = p as i32;
                    // A failed log is loaded when it is re-opened, at a new epoch; loading it
                    // now would resume its marker jobs a second time at the same one.
                    if log.failure().is_some() {
                        continue;
                    }
                    if !self.txns.is_loaded(p) && p < self.txns.partition_count() {
                        self.load_txn_partition(p, log.clone());
                    }
                }
                true
            }
            None => false,
        }
    }

    /// Load (acquire) one `__transaction_state` partition, and resume the markers of the
    /// transactions it finds completing.
    pub(crate) fn load_txn_partition(&self, partition: i32, log: Arc<Log>) {
        let (mut records, next) = read_records(&log, log.log_start_offset());
        let epoch = log.leader_epoch();
        let (loaded, n) = {
            let mut c = self.txns.coordinator.lock();
            let same = self
                .txns
                .logs
                .lock()
                .get(&partition)
                .is_some_and(|l| Arc::ptr_eq(l, &log));
            if same && c.coordinator_epoch(partition) == Some(epoch) {
                // Loaded from this log at this epoch meanwhile (a re-open and a client's
                // request race to load it): its marker jobs run once.
                return;
            }
            if log.failure().is_some() {
                // Failed since it was chosen (appends fail under this lock): its re-open
                // loads it, at a new epoch, from what storage holds.
                return;
            }
            // What was appended since the read (a load replacing an earlier one, whose calls
            // append under this lock) is read under it.
            records.extend(read_records(&log, next).0);
            let n = records.len();
            let loaded = c.load(partition, epoch, records, now_ms());
            self.txns.logs.lock().insert(partition, log.clone());
            (loaded, n)
        };
        if loaded.skipped > 0 {
            tracing::warn!(
                partition,
                skipped = loaded.skipped,
                "skipped undecodable {TXN_TOPIC} records"
            );
        }
        tracing::debug!(
            partition,
            records = n,
            transactions = loaded.transactions,
            resumed = loaded.effects.markers.len(),
            "loaded {TXN_TOPIC} partition"
        );
        // The load read to the log end: in a partition acquired again in place, that holds
        // records of calls whose flush has not settled. A Prepare's markers start once it is
        // on storage (a request joins the flush round after theirs); a failed flush fails the
        // log, which is loaded again from storage, with the markers storage calls for.
        let markers = loaded.effects.markers;
        let Some(me) = self.arc().filter(|_| !markers.is_empty()) else {
            return;
        };
        let flushed = self.flusher.request(log.clone());
        self.runtime.spawn(async move {
            match flushed.await {
                Ok(()) => me.start_markers(markers),
                // A failed confirmation (etcd unreachable) fails no log by itself: this one
                // fails, so that it is loaded again (acquired again in a cluster) and the
                // markers start then; left loaded, its Prepare* transactions would hang.
                Err(e) => me.txns.forget_unconfirmed(&[log], &e),
            }
        });
    }

    /// The broker that coordinates `transactional_id`: the owner of its partition.
    pub(crate) fn txn_coordinator(&self, transactional_id: &str) -> Option<i32> {
        if self.cluster.is_none() {
            return Some(self.node_id);
        }
        let p = self.txns.partition_for(transactional_id);
        self.partition_owner(TXN_TOPIC, p)
    }

    /// A new producer id (Kafka's ProducerIdManager: blocks from the metadata store).
    pub(crate) fn allocate_producer_id(&self) -> Result<i64, String> {
        self.meta.next_producer_id().map_err(|e| e.to_string())
    }

    /// Run `f` on the transaction coordinator (see [`Txns::run`]), wait until its records are
    /// durable, start its marker jobs, and yield `f`'s result; `Err` is a retriable failure
    /// of the log (answered NOT_COORDINATOR, so the client looks the coordinator up again).
    /// The records are appended now; their flush, a failure's unload and the marker jobs run
    /// in a task of their own, so they happen even when nobody waits for the answer (a
    /// connection closed while the answer was queued): a Prepare record appended must get
    /// its marker jobs, or the transaction hangs in PrepareCommit/PrepareAbort.
    pub(crate) fn txn_call<T: Send + 'static>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Coordinator) -> (T, Effects),
    ) -> impl std::future::Future<Output = Result<T, ()>> + Send + 'static {
        let settled = self
            .txns
            .run_tracked(f, true)
            .map(|(value, written, markers, depends)| {
                let broker = self.clone();
                self.runtime.spawn(async move {
                    // A call that wrote nothing answers from records earlier calls appended: on
                    // storage too before it answers (a request joins the flush round after the
                    // one they are in), or its answer is an error, as theirs is; their partition
                    // is then loaded again from storage, with the marker jobs storage calls for.
                    // (One that wrote waits for its own records, after those of its partition.)
                    let depends: Vec<_> = depends
                        .into_iter()
                        .map(|l| broker.flusher.request(l))
                        .collect();
                    let flushed = broker.flush_txn_logs(written.clone()).await;
                    if let Err(e) = flushed {
                        broker.txns.forget_unconfirmed(&written, &e);
                        broker.txns.settled(&written);
                        return Err(());
                    }
                    broker.txns.settled(&written);
                    for d in depends {
                        if d.await.is_err() {
                            return Err(());
                        }
                    }
                    broker.start_markers(markers);
                    Ok(value)
                })
            });
        async move {
            match settled {
                Ok(task) => task.await.unwrap_or(Err(())),
                Err(()) => Err(()),
            }
        }
    }

    fn flush_txn_logs(
        &self,
        logs: Vec<Arc<Log>>,
    ) -> impl std::future::Future<Output = Result<(), FlushError>> {
        // Coordinator state is answered on only once on storage, whatever the flush policy.
        let waits: Vec<_> = logs.into_iter().map(|l| self.flusher.request(l)).collect();
        #[cfg(test)]
        let unconfirmed = self
            .txns
            .unconfirmed_flushes
            .fetch_update(
                std::sync::atomic::Ordering::SeqCst,
                std::sync::atomic::Ordering::SeqCst,
                |n| n.checked_sub(1),
            )
            .is_ok();
        async move {
            for w in waits {
                w.await?;
            }
            #[cfg(test)]
            if unconfirmed {
                return Err(FlushError::NotOwner("a test fails the confirmation".into()));
            }
            Ok(())
        }
    }

    /// Deliver each job's markers in the background; when all are written, complete the
    /// transaction.
    fn start_markers(&self, jobs: Vec<MarkerJob>) {
        let Some(me) = self.arc() else { return };
        for job in jobs {
            let broker = me.clone();
            self.runtime.spawn(async move {
                let partition = broker.txns.partition_for(&job.transactional_id);
                let epoch = job.coordinator_epoch;
                let weak = Arc::downgrade(&broker);
                let current = move || {
                    weak.upgrade()
                        .is_some_and(|b| b.txns.coordinator_epoch(partition) == Some(epoch))
                };
                let m = Markers {
                    producer_id: job.producer_id,
                    producer_epoch: job.producer_epoch,
                    coordinator_epoch: job.coordinator_epoch,
                    commit: job.commit,
                    partitions: job.partitions.clone(),
                };
                if !broker.deliver_markers(m, current).await {
                    tracing::info!(
                        transactional_id = job.transactional_id,
                        "markers left to the transaction's new coordinator"
                    );
                    return;
                }
                let done = broker.txn_call(|c| ((), c.markers_written(&job, now_ms())));
                let done = done.await;
                broker.txns.completed.notify_waiters();
                if done.is_err() {
                    tracing::warn!(
                        transactional_id = job.transactional_id,
                        "completing a transaction failed; its coordinator reloads it"
                    );
                }
            });
        }
    }

    /// Start the timer task: aborts of transactions past their timeout, and expiry of idle
    /// transactional ids.
    pub(crate) fn start_txn_timers(broker: &Arc<Broker>) {
        let weak: Weak<Broker> = Arc::downgrade(broker);
        let t = &broker.config.transactions;
        let interval_ms = t.abort_timed_out_interval_ms.max(1) as u64;
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(Duration::from_millis(interval_ms));
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                let Some(b) = weak.upgrade() else { return };
                if b.txns.coordinator.lock().loaded().is_empty() {
                    continue;
                }
                let broker = b.clone();
                // Producer-id allocation may wait on etcd: off the runtime threads.
                let ticked = tokio::task::spawn_blocking(move || {
                    let alloc_from = broker.clone();
                    let mut alloc = move || alloc_from.allocate_producer_id();
                    broker.txn_call(move |c| ((), c.tick(now_ms(), &mut alloc)))
                })
                .await;
                if let Ok(f) = ticked {
                    let _ = f.await;
                }
            }
        });
    }
}

/// The answer of [`Broker::txn_check_partitions`]: each partition's code (0: in the
/// transaction), or one code for all.
pub(crate) type PartitionCheck = Result<Vec<(sluice_txn::TxnPartition, i16)>, i16>;

/// The verification guards taken on partitions' logs before the transaction coordinator was
/// asked about them (`Log::start_txn_verification`): a batch the answer admits is appended
/// with its partition's (`Log::append_verified`).
pub(crate) type Guards = Vec<(
    sluice_txn::TxnPartition,
    Arc<Log>,
    Option<sluice_store::VerificationGuard>,
)>;

impl Broker {
    /// True when `topic` has partition `partition` (owned here or by another broker).
    pub(crate) fn partition_exists(&self, topic: &str, partition: i32) -> bool {
        self.registry
            .get(topic)
            .is_some_and(|s| s.has_partition(partition))
    }

    /// [`Broker::txn_check_partitions`] for `partitions` (each with its log here), retried
    /// while the coordinator answers CONCURRENT_TRANSACTIONS (the producer's previous
    /// transaction is still writing its markers), every `add.partitions.to.txn.retry.backoff.ms`
    /// (and at once when a transaction this broker coordinates completes) for up to
    /// `add.partitions.to.txn.retry.backoff.max.ms`, as Kafka's partition leaders do: the
    /// producer would otherwise wait out its own, longer, retry backoff. Before each ask the
    /// producer's verification guard is taken on every log (Kafka's
    /// `maybeStartTransactionVerification`, also before each retry): the guards returned are
    /// those taken before the answer returned, so a marker written since that ask has
    /// cleared them and the answer opens no transaction after it.
    pub(crate) fn txn_check_partitions_retrying(
        self: &Arc<Self>,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<(sluice_txn::TxnPartition, Arc<Log>, Option<i32>)>,
        add: bool,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = (PartitionCheck, Guards)> + Send>> {
        let concurrent = kafka_protocol::ResponseError::ConcurrentTransactions.code();
        let t = &self.config.transactions;
        let backoff = Duration::from_millis(t.add_partitions_retry_backoff_ms.max(1) as u64);
        let give_up = tokio::time::Instant::now()
            + Duration::from_millis(t.add_partitions_retry_backoff_max_ms.max(0) as u64);
        let broker = self.clone();
        let id = transactional_id.to_string();
        let names: Vec<sluice_txn::TxnPartition> =
            partitions.iter().map(|(tp, _, _)| tp.clone()).collect();
        Box::pin(async move {
            loop {
                // Registered before asking, so a completion in between is not missed.
                let completed = broker.txns.completed.notified();
                tokio::pin!(completed);
                completed.as_mut().enable();
                let guards: Guards = partitions
                    .iter()
                    .map(|(tp, log, first_seq)| {
                        let guard = log.start_txn_verification(
                            producer_id,
                            producer_epoch,
                            *first_seq,
                            now_ms(),
                        );
                        (tp.clone(), log.clone(), guard)
                    })
                    .collect();
                let answer = broker
                    .txn_check_partitions(&id, producer_id, producer_epoch, names.clone(), add)
                    .await;
                let busy = match &answer {
                    Err(code) => *code == concurrent,
                    Ok(rs) => rs.iter().any(|(_, c)| *c == concurrent),
                };
                if !busy || tokio::time::Instant::now() >= give_up {
                    return (answer, guards);
                }
                // At the next backoff, or as soon as a transaction of this coordinator
                // completes.
                let wait = backoff.min(give_up - tokio::time::Instant::now());
                let _ = tokio::time::timeout(wait, completed).await;
            }
        })
    }

    /// Ask the transaction coordinator of `transactional_id` whether `partitions` are in the
    /// producer's ongoing transaction (`add` false: KIP-890 part 1's verification of a
    /// transaction version 1 producer, which added them itself), or add them (`add` true:
    /// transaction version 2, where the partition's leader adds them). Here when this broker
    /// coordinates the id, else by AddPartitionsToTxn (v4 verify-only, v5 add) to the
    /// coordinator.
    pub(crate) fn txn_check_partitions(
        self: &Arc<Self>,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: Vec<sluice_txn::TxnPartition>,
        add: bool,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = PartitionCheck> + Send>> {
        use kafka_protocol::ResponseError;
        let coordinator = self.txn_coordinator(transactional_id);
        let id = transactional_id.to_string();
        if coordinator == Some(self.node_id) && self.txns.is_loaded(self.txns.partition_for(&id)) {
            let call = self.txn_call(move |c| {
                c.add_partitions(
                    &id,
                    producer_id,
                    producer_epoch,
                    &partitions,
                    !add,
                    add,
                    now_ms(),
                )
            });
            return Box::pin(async move {
                match call.await {
                    Err(()) => Err(ResponseError::NotCoordinator.code()),
                    Ok(Err(e)) => Err(crate::errors::txn_error_code(&e, false)),
                    Ok(Ok(rs)) => Ok(rs
                        .into_iter()
                        .map(|(tp, r)| {
                            let code = r
                                .err()
                                .map_or(0, |e| crate::errors::txn_error_code(&e, false));
                            (tp, code)
                        })
                        .collect()),
                }
            });
        }
        let Some(node) = coordinator.filter(|_| self.cluster.is_some()) else {
            return Box::pin(std::future::ready(Err(
                ResponseError::CoordinatorNotAvailable.code(),
            )));
        };
        let broker = self.clone();
        Box::pin(async move {
            use kafka_protocol::messages::add_partitions_to_txn_request::{
                AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
            };
            use kafka_protocol::messages::{
                AddPartitionsToTxnRequest, ApiKey, ProducerId, RequestKind, ResponseKind,
                TransactionalId,
            };
            let mut by_topic: BTreeMap<String, Vec<i32>> = BTreeMap::new();
            for (t, p) in &partitions {
                by_topic.entry(t.clone()).or_default().push(*p);
            }
            let txn = AddPartitionsToTxnTransaction::default()
                .with_transactional_id(TransactionalId(crate::wire::str_bytes(id.clone())))
                .with_producer_id(ProducerId(producer_id))
                .with_producer_epoch(producer_epoch)
                .with_verify_only(!add)
                .with_topics(
                    by_topic
                        .into_iter()
                        .map(|(t, ps)| {
                            AddPartitionsToTxnTopic::default()
                                .with_name(crate::wire::topic_name(&t))
                                .with_partitions(ps)
                        })
                        .collect(),
                );
            let body = RequestKind::AddPartitionsToTxn(
                AddPartitionsToTxnRequest::default().with_transactions(vec![txn]),
            );
            let version = if add { 5 } else { 4 };
            match broker
                .call_peer(node, ApiKey::AddPartitionsToTxn, version, body)
                .await
            {
                Ok(ResponseKind::AddPartitionsToTxn(r)) => {
                    if r.error_code != 0 {
                        return Err(r.error_code);
                    }
                    let mut out = Vec::new();
                    for t in r.results_by_transaction {
                        for tr in t.topic_results {
                            for p in tr.results_by_partition {
                                out.push((
                                    (tr.name.0.to_string(), p.partition_index),
                                    p.partition_error_code,
                                ));
                            }
                        }
                    }
                    Ok(out)
                }
                Ok(_) => Err(ResponseError::UnknownServerError.code()),
                Err(e) => {
                    tracing::debug!("AddPartitionsToTxn to broker {node} failed: {e}");
                    Err(ResponseError::NotCoordinator.code())
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    }

    fn broker_in(dir: &std::path::Path) -> Arc<Broker> {
        let mut props = BTreeMap::new();
        props.insert("node.id".to_string(), "1".to_string());
        props.insert("log.dirs".to_string(), dir.display().to_string());
        Broker::open(sluice_config::BrokerConfig::from_properties(props).unwrap()).unwrap()
    }

    fn init_producer(
        broker: &Arc<Broker>,
        id: &'static str,
    ) -> impl std::future::Future<Output = Result<(), ()>> {
        let b = broker.clone();
        let mut alloc = move || b.allocate_producer_id();
        let ran = broker.txns.run(|c| {
            let (r, effects) = c.init_producer_id(id, 60_000, None, now_ms(), &mut alloc);
            (r.map(|_| ()), effects)
        });
        std::future::ready(match ran {
            Ok((Ok(()), _, _)) => Ok(()),
            _ => Err(()),
        })
    }

    /// A `__transaction_state` log whose fsync failed may hold a transition that never reached
    /// storage (a partition added to a transaction): its coordinator stops answering from it
    /// (NOT_COORDINATOR, then the re-open loads it again from storage) instead of verifying a
    /// partition that storage does not have in the transaction.
    #[test]
    fn a_failed_transaction_log_is_not_answered_from() {
        let dir = tempfile::tempdir().unwrap();
        runtime().block_on(async {
            let broker = broker_in(dir.path());
            assert!(broker.ensure_txn_topic());
            let p = broker.txns.partition_for("tx");
            let b = broker.clone();
            let mut alloc = move || b.allocate_producer_id();
            let (ran, _, _) = broker
                .txns
                .run(|c| c.init_producer_id("tx", 60_000, None, now_ms(), &mut alloc))
                .unwrap();
            let (pid, epoch) = ran.unwrap();
            let x = ("x".to_string(), 0);
            let (added, _, _) = broker
                .txns
                .run(|c| {
                    c.add_partitions(
                        "tx",
                        pid,
                        epoch,
                        std::slice::from_ref(&x),
                        false,
                        false,
                        now_ms(),
                    )
                })
                .unwrap();
            assert!(added.unwrap().iter().all(|(_, r)| r.is_ok()));
            // The fsync of that record fails: the log is failed, the shard still loaded.
            let tp = sluice_store::TopicPartition {
                topic: TXN_TOPIC.to_string(),
                partition: p,
            };
            broker
                .logs
                .get(&tp)
                .unwrap()
                .mark_failed("a test fails the fsync".into());
            let answer = broker
                .txn_check_partitions("tx", pid, epoch, vec![x], false)
                .await;
            assert!(
                answer.is_err(),
                "verified from a failed log's memory: {answer:?}"
            );
            assert_eq!(broker.txns.coordinator_epoch(p), None);
        });
    }

    /// Seed 75: an EndTxn(commit) whose PrepareCommit record was appended but whose flush
    /// could not be confirmed (etcd away) is answered with an error, and the record may be
    /// on storage. The coordinator must not go on from the state in its memory (no marker
    /// job was started; retries were answered from it, and a reload decided the outcome
    /// later from whatever storage held): it loads the partition again, at a new epoch,
    /// from storage, and completes the transaction with the outcome the Prepare record
    /// there names, COMMIT, which a client's abort can no longer change.
    #[test]
    fn a_prepare_whose_flush_failed_is_completed_from_storage_with_its_outcome() {
        let dir = tempfile::tempdir().unwrap();
        runtime().block_on(async {
            let broker = broker_in(dir.path());
            assert!(broker.ensure_txn_topic());
            let p = broker.txns.partition_for("tx");
            let b = broker.clone();
            let mut alloc = move || b.allocate_producer_id();
            let (ran, _, _) = broker
                .txns
                .run(|c| c.init_producer_id("tx", 60_000, None, now_ms(), &mut alloc))
                .unwrap();
            let (pid, epoch) = ran.unwrap();
            let first = broker.txns.coordinator_epoch(p).unwrap();
            // A partition of a topic that does not exist: its marker counts as written.
            let x = ("x".to_string(), 0);
            let added = broker
                .txn_call(move |c| {
                    c.add_partitions("tx", pid, epoch, &[x], false, false, now_ms())
                })
                .await;
            assert!(added.unwrap().unwrap().iter().all(|(_, r)| r.is_ok()));

            // EndTxn(commit): PrepareCommit is appended, its confirmation fails.
            broker
                .txns
                .unconfirmed_flushes
                .store(1, std::sync::atomic::Ordering::SeqCst);
            let mut no_alloc = || Err("none".to_string());
            let ended = broker
                .txn_call(move |c| c.end_txn("tx", pid, epoch, true, false, now_ms(), &mut no_alloc))
                .await;
            assert!(ended.is_err(), "answered as if confirmed: {ended:?}");

            // The coordinator loads the partition again from storage, at a new epoch, and
            // completes what the Prepare record there says.
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            let state = loop {
                broker.reopen_failed_logs();
                let state = broker
                    .txns
                    .read(|c| c.describe("tx", now_ms()).map(|v| v.state));
                let reloaded = broker.txns.coordinator_epoch(p).is_some_and(|e| e > first);
                if reloaded && state == Ok(sluice_txn::TxnState::CompleteCommit) {
                    break state;
                }
                if std::time::Instant::now() > deadline {
                    panic!(
                        "not completed from storage: {state:?}, coordinator epoch {:?} (first {first})",
                        broker.txns.coordinator_epoch(p)
                    );
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            assert_eq!(state, Ok(sluice_txn::TxnState::CompleteCommit));
            // The client's retry of its commit is answered as done; an abort of it is refused.
            let mut no_alloc = || Err("none".to_string());
            let retried = broker
                .txn_call(move |c| c.end_txn("tx", pid, epoch, true, false, now_ms(), &mut no_alloc))
                .await;
            assert_eq!(retried, Ok(Ok((pid, epoch))));
            let mut no_alloc = || Err("none".to_string());
            let aborted = broker
                .txn_call(move |c| c.end_txn("tx", pid, epoch, false, false, now_ms(), &mut no_alloc))
                .await;
            assert!(matches!(aborted, Ok(Err(_))), "the commit was aborted: {aborted:?}");
        });
    }

    /// An EndTxn whose answer nobody waits for (the client's connection closed while an
    /// earlier response on it was being written, and the server dropped the queued answer):
    /// its PrepareCommit is appended when the request is handled, so its flush and marker
    /// jobs must still run, or the transaction stays in PrepareCommit with no marker job and
    /// every retry and InitProducerId is answered CONCURRENT_TRANSACTIONS (found by review).
    #[test]
    fn an_end_txn_whose_answer_is_dropped_still_completes() {
        let dir = tempfile::tempdir().unwrap();
        runtime().block_on(async {
            let broker = broker_in(dir.path());
            assert!(broker.ensure_txn_topic());
            let b = broker.clone();
            let mut alloc = move || b.allocate_producer_id();
            let (ran, _, _) = broker
                .txns
                .run(|c| c.init_producer_id("tx", 60_000, None, now_ms(), &mut alloc))
                .unwrap();
            let (pid, epoch) = ran.unwrap();
            let x = ("x".to_string(), 0);
            let added = broker
                .txn_call(move |c| c.add_partitions("tx", pid, epoch, &[x], false, false, now_ms()))
                .await;
            assert!(added.unwrap().unwrap().iter().all(|(_, r)| r.is_ok()));
            let mut no_alloc = || Err("none".to_string());
            drop(broker.txn_call(move |c| {
                c.end_txn("tx", pid, epoch, true, false, now_ms(), &mut no_alloc)
            }));
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            loop {
                let state = broker
                    .txns
                    .read(|c| c.describe("tx", now_ms()).map(|v| v.state));
                if state == Ok(sluice_txn::TxnState::CompleteCommit) {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "the dropped EndTxn's transaction stayed {state:?}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
    }

    /// One call's records for two `__transaction_state` partitions (the timer aborting timed
    /// out transactions of both), the second's append failing: the first partition's
    /// PrepareAbort was appended, but its marker job went with the call's error. Its
    /// partition is loaded again from storage too, which resumes the job (found by review: it
    /// hung in PrepareAbort).
    #[test]
    fn a_partly_failed_call_leaves_no_prepare_without_its_markers() {
        let dir = tempfile::tempdir().unwrap();
        runtime().block_on(async {
            let broker = broker_in(dir.path());
            assert!(broker.ensure_txn_topic());
            // Two ids in two partitions, the first id's partition lower.
            let ids: Vec<String> = (0..200).map(|i| format!("t{i}")).collect();
            let first = ids[0].clone();
            let p1 = broker.txns.partition_for(&first);
            let second = ids
                .iter()
                .find(|i| broker.txns.partition_for(i) > p1)
                .or_else(|| ids.iter().find(|i| broker.txns.partition_for(i) < p1))
                .unwrap()
                .clone();
            let p2 = broker.txns.partition_for(&second);
            let (low, high) = if p1 < p2 {
                (first, second)
            } else {
                (second, first)
            };
            for id in [&low, &high] {
                let b = broker.clone();
                let mut alloc = move || b.allocate_producer_id();
                let (ran, _, _) = broker
                    .txns
                    .run(|c| c.init_producer_id(id, 1, None, now_ms(), &mut alloc))
                    .unwrap();
                let (pid, epoch) = ran.unwrap();
                let x = ("x".to_string(), 0);
                let id = id.clone();
                let added = broker
                    .txn_call(move |c| {
                        c.add_partitions(&id, pid, epoch, &[x], false, false, now_ms())
                    })
                    .await;
                assert!(added.unwrap().unwrap().iter().all(|(_, r)| r.is_ok()));
            }
            // The higher partition's next append is refused (a batch over its size limit).
            let tp = |p| sluice_store::TopicPartition {
                topic: TXN_TOPIC.to_string(),
                partition: p,
            };
            let high_log = broker
                .logs
                .get(&tp(broker.txns.partition_for(&high)))
                .unwrap();
            let state = broker.registry.get(TXN_TOPIC).unwrap();
            let normal = crate::registry::log_config(&state.config);
            high_log.set_config(sluice_store::LogConfig {
                max_message_bytes: 1,
                ..normal.clone()
            });
            let b = broker.clone();
            let mut alloc = move || b.allocate_producer_id();
            let ticked = broker
                .txn_call(move |c| ((), c.tick(now_ms() + 10_000, &mut alloc)))
                .await;
            assert!(ticked.is_err(), "the call's second append was to fail");
            high_log.set_config(normal);
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            loop {
                broker.reopen_failed_logs();
                let state = broker
                    .txns
                    .read(|c| c.describe(&low, now_ms()).map(|v| v.state));
                if state == Ok(sluice_txn::TxnState::CompleteAbort) {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "the first partition's transaction stayed {state:?}"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        });
    }

    /// Issue 53, items 2 and 5: every load of a `__transaction_state` partition is at a new
    /// coordinator epoch (stamped into the markers its jobs write; partitions refuse a lower
    /// one once they saw it), as Kafka bumps it at every load: a failed log is not loaded
    /// again from its failed self, its re-open is a new epoch, and a partition acquired again
    /// in place (its log's epoch changed) is loaded again at the new one. A marker job of an
    /// earlier load is then not current and stops.
    #[test]
    fn every_load_of_a_transaction_state_partition_is_at_a_new_coordinator_epoch() {
        let dir = tempfile::tempdir().unwrap();
        runtime().block_on(async {
            let broker = broker_in(dir.path());
            assert!(broker.ensure_txn_topic());
            let p = broker.txns.partition_for("tx");
            init_producer(&broker, "tx").await.unwrap();
            let first = broker.txns.coordinator_epoch(p).unwrap();
            let tp = sluice_store::TopicPartition {
                topic: TXN_TOPIC.to_string(),
                partition: p,
            };
            let log = broker.logs.get(&tp).unwrap();

            // An append fails: the shard is unloaded and the log failed.
            log.mark_failed("a test fails the log".into());
            assert!(init_producer(&broker, "tx").await.is_err());
            assert!(!broker.txns.is_loaded(p));
            // The next transaction request must not load it again from the failed log, at
            // the same epoch (its marker jobs would run twice).
            assert!(broker.ensure_txn_topic());
            assert_eq!(
                broker.txns.coordinator_epoch(p),
                None,
                "the failed log was loaded again"
            );

            // Its re-open is a new acquisition.
            broker.reopen_failed_logs();
            let reopened = broker.txns.coordinator_epoch(p).unwrap();
            assert!(
                reopened > first,
                "re-opened at epoch {reopened}, first loaded at {first}"
            );
            let new = broker.logs.get(&tp).unwrap();
            assert!(!Arc::ptr_eq(&new, &log));
            assert_eq!(new.leader_epoch(), reopened);
            init_producer(&broker, "tx").await.unwrap();

            // Acquired again in place (a cluster's reassignment to the same owner): the log's
            // epoch changes, and the coordinator follows it.
            new.set_leader_epoch(reopened + 1);
            broker.load_coordinator_partition(&tp, &new, false);
            assert_eq!(broker.txns.coordinator_epoch(p), Some(reopened + 1));
            // And only then: loaded at the log's epoch, it is not loaded again.
            broker.load_coordinator_partition(&tp, &new, false);
            assert_eq!(broker.txns.coordinator_epoch(p), Some(reopened + 1));
        });
    }

    /// A coordinator call that writes nothing answers from records an earlier call appended:
    /// it waits for their flush, and fails with it (adversary finding F4). Here a producer's
    /// AddPartitionsToTxn(x) is appended and its flush is slow, then fails; meanwhile x's
    /// partition leader verifies a produce (KIP-890 verify-only) and the producer retries the
    /// add ("nothing new, nothing to write"). Answered "x is in the transaction" at once,
    /// the batch the leader appended would open a transaction the coordinator, loaded again
    /// from storage without x, does not know (a hanging transaction).
    #[test]
    fn a_call_that_writes_nothing_is_not_answered_before_an_earlier_flush_settles() {
        let dir = tempfile::tempdir().unwrap();
        runtime().block_on(async {
            let broker = broker_in(dir.path());
            assert!(broker.ensure_txn_topic());
            let p = broker.txns.partition_for("tx");
            let b = broker.clone();
            let mut alloc = move || b.allocate_producer_id();
            let (ran, written, _) = broker
                .txns
                .run(|c| c.init_producer_id("tx", 60_000, None, now_ms(), &mut alloc))
                .unwrap();
            let (pid, epoch) = ran.unwrap();
            broker.flush_txn_logs(written).await.unwrap();
            let seg = dir
                .path()
                .join(format!("{TXN_TOPIC}-{p}"))
                .join("00000000000000000000.log");
            let durable_len = std::fs::metadata(&seg).unwrap().len();

            // The flush of the add below is slow: the runtime's one worker thread, which
            // runs the flusher's rounds and the calls' tasks, is held until released.
            let (started_tx, started_rx) = std::sync::mpsc::channel();
            let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
            tokio::spawn(async move {
                started_tx.send(()).unwrap();
                let _ = release_rx.recv();
            });
            started_rx.recv().unwrap();
            let x = ("x".to_string(), 0);
            let x1 = x.clone();
            let first = broker.txn_call(move |c| {
                c.add_partitions("tx", pid, epoch, &[x1], false, false, now_ms())
            });
            // While it is unsettled: the partition leader's verification, and the producer's
            // retried add.
            let verified = broker.txn_check_partitions("tx", pid, epoch, vec![x.clone()], false);
            let x2 = x.clone();
            let retried = broker.txn_call(move |c| {
                c.add_partitions("tx", pid, epoch, &[x2], false, false, now_ms())
            });
            // The add's fsync fails (the log is failed before its round syncs it).
            let tp = sluice_store::TopicPartition {
                topic: TXN_TOPIC.to_string(),
                partition: p,
            };
            broker
                .logs
                .get(&tp)
                .unwrap()
                .mark_failed("a test fails the fsync".into());
            release_tx.send(()).unwrap();
            let verified = verified.await;
            let retried = retried.await;
            let first = first.await;
            eprintln!(
                "verify: {verified:?}; retried add: {retried:?}; first add: {:?}",
                first.as_ref().map(|_| ())
            );
            assert!(first.is_err(), "the first add's flush was to fail");

            // What storage holds: the record did not reach it (the kernel dropped the page
            // it could not write).
            std::fs::OpenOptions::new()
                .write(true)
                .open(&seg)
                .unwrap()
                .set_len(durable_len)
                .unwrap();
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            let stored = loop {
                broker.reopen_failed_logs();
                if broker.txns.coordinator_epoch(p).is_some() {
                    break broker.txns.read(|c| c.describe("tx", now_ms())).unwrap();
                }
                assert!(std::time::Instant::now() < deadline, "never loaded again");
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            let stored_has_x = stored.partitions.contains(&x);
            let verified_in = matches!(&verified, Ok(rs) if rs.iter().all(|(_, c)| *c == 0));
            let retried_in = matches!(&retried, Ok(Ok(rs)) if rs.iter().all(|(_, r)| r.is_ok()));
            assert!(
                stored_has_x || !(verified_in || retried_in),
                "answered 'x is in the transaction' (verify: {verified_in}, retried add: \
                 {retried_in}) while the add's flush was unsettled; that flush failed and the \
                 coordinator reloaded {:?} with partitions {:?}",
                stored.state,
                stored.partitions
            );
        });
    }

    /// A partition acquired again in place (`cluster.rs` sets the log's epoch and loads it
    /// with `load_coordinator_partition(.., false)`) is loaded to the log end, records whose
    /// flush has not settled included; a Prepare found there starts its markers only once it
    /// is on storage (adversary finding F5). Here EndTxn(commit)'s PrepareCommit is appended,
    /// the in-place load runs, then the record's fsync fails: no COMMIT marker may reach x-0
    /// while storage has the transaction Ongoing (a later abort would split it).
    #[test]
    fn an_in_place_reload_starts_no_markers_of_an_unflushed_prepare() {
        let dir = tempfile::tempdir().unwrap();
        runtime().block_on(async {
            let broker = broker_in(dir.path());
            assert!(broker.ensure_txn_topic());
            broker.create_topic("x", 1, BTreeMap::new()).unwrap();
            let p = broker.txns.partition_for("tx");
            let b = broker.clone();
            let mut alloc = move || b.allocate_producer_id();
            let (ran, written, _) = broker
                .txns
                .run(|c| c.init_producer_id("tx", 60_000, None, now_ms(), &mut alloc))
                .unwrap();
            let (pid, epoch) = ran.unwrap();
            broker.flush_txn_logs(written).await.unwrap();
            let x = ("x".to_string(), 0);
            let x1 = x.clone();
            let added = broker
                .txn_call(move |c| {
                    c.add_partitions("tx", pid, epoch, &[x1], false, false, now_ms())
                })
                .await;
            assert!(added.unwrap().unwrap().iter().all(|(_, r)| r.is_ok()));
            let seg = dir
                .path()
                .join(format!("{TXN_TOPIC}-{p}"))
                .join("00000000000000000000.log");
            let durable_len = std::fs::metadata(&seg).unwrap().len();
            let tp = sluice_store::TopicPartition {
                topic: TXN_TOPIC.to_string(),
                partition: p,
            };
            let log = broker.logs.get(&tp).unwrap();
            let x_log = broker
                .logs
                .get(&sluice_store::TopicPartition {
                    topic: "x".to_string(),
                    partition: 0,
                })
                .unwrap();
            assert_eq!(x_log.log_end_offset(), 0);

            // The runtime's one worker is held: PrepareCommit's flush is slow.
            let (started_tx, started_rx) = std::sync::mpsc::channel();
            let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
            tokio::spawn(async move {
                started_tx.send(()).unwrap();
                let _ = release_rx.recv();
            });
            started_rx.recv().unwrap();
            let mut no_alloc = || Err("none".to_string());
            let ended = broker.txn_call(move |c| {
                c.end_txn("tx", pid, epoch, true, false, now_ms(), &mut no_alloc)
            });
            // Acquired again in place, as cluster.rs does it.
            let again = log.leader_epoch() + 1;
            log.set_leader_epoch(again);
            broker.load_coordinator_partition(&tp, &log, false);
            assert_eq!(broker.txns.coordinator_epoch(p), Some(again));
            // PrepareCommit's fsync fails.
            log.mark_failed("a test fails the fsync".into());
            release_tx.send(()).unwrap();
            let ended = ended.await;
            // Let the marker job run its course.
            tokio::time::sleep(Duration::from_millis(500)).await;
            eprintln!(
                "EndTxn: {:?}; x-0 log end {}",
                ended.as_ref().map(|_| ()),
                x_log.log_end_offset()
            );

            // Storage lacks PrepareCommit (the page the kernel could not write is gone).
            std::fs::OpenOptions::new()
                .write(true)
                .open(&seg)
                .unwrap()
                .set_len(durable_len)
                .unwrap();
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            let stored = loop {
                broker.reopen_failed_logs();
                let reopened = broker.logs.get(&tp).is_some_and(|l| !Arc::ptr_eq(&l, &log));
                if reopened && broker.txns.coordinator_epoch(p).is_some() {
                    break broker.txns.read(|c| c.describe("tx", now_ms())).unwrap();
                }
                assert!(std::time::Instant::now() < deadline, "never loaded again");
                tokio::time::sleep(Duration::from_millis(20)).await;
            };
            let committed_on_x = x_log.log_end_offset() > 0;
            assert!(
                !committed_on_x
                    || matches!(
                        stored.state,
                        sluice_txn::TxnState::PrepareCommit | sluice_txn::TxnState::CompleteCommit
                    ),
                "x-0 holds the COMMIT marker of the in-place load's job, but storage has the \
                 transaction {:?} (partitions {:?}): its PrepareCommit never became durable",
                stored.state,
                stored.partitions
            );
        });
    }
}

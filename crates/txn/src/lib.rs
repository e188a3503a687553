//! The transaction coordinator (Kafka's `TransactionCoordinator` and
//! `TransactionStateManager`) as a pure state machine: requests and `now_ms` in, answers and
//! effects out.
//!
//! Layout:
//! - [`Coordinator`] (this file): the transactional ids of every `__transaction_state`
//!   partition this broker has loaded, the request entry points (InitProducerId,
//!   AddPartitionsToTxn, EndTxn, DescribeTransactions, ListTransactions), marker completion,
//!   load/unload, and [`Coordinator::tick`] (timeouts and transactional-id expiry).
//! - `state`: [`TxnState`] and one transactional id's metadata with its transitions.
//! - [`records`]: the `__transaction_state` record schemas (Apache Kafka's).
//!
//! Owns: what a transaction request means and what must be persisted. Does not own: I/O,
//! clocks, timers, sockets, Kafka error codes ([`TxnError`] is mapped by the broker), the
//! allocation of producer ids (the caller passes a `next_producer_id` function), or the
//! delivery of markers.
//!
//! # The caller's contract
//!
//! Every call returns [`Effects`]. The caller appends `effects.records` to their
//! `__transaction_state` partitions, in order, and waits for them to be durable before it
//! answers the request and before it starts delivering `effects.markers`. Each
//! [`MarkerJob`] writes a commit or abort marker with the job's producer id, epoch and
//! coordinator epoch to every partition of the job; once all are durable (a deleted topic's
//! partitions count as done, as in Kafka) the caller calls
//! [`Coordinator::markers_written`], which returns the CompleteCommit/CompleteAbort record.
//! The caller calls [`Coordinator::tick`] periodically (Kafka: every 10 s for timeouts, every
//! hour for expiry; both are cheap here).
//!
//! If an append of returned records fails, the in-memory state is ahead of the log: the
//! caller must [`Coordinator::unload`] the partition and [`Coordinator::load`] it again from
//! its log (the log is the truth), answering the request with a retriable error
//! (NOT_COORDINATOR or COORDINATOR_NOT_AVAILABLE, as Kafka maps append errors).
//!
//! # Pending states (a design choice)
//!
//! Kafka marks a transaction with a *pending state* while its append is in flight, because
//! its append is asynchronous and other requests for the same id may arrive meanwhile; it
//! answers them CONCURRENT_TRANSACTIONS. Here every call runs under the caller's mutex and
//! its records are durable before the next call is served, so a transition is applied at
//! once and no pending state exists. What remains is the one state that really waits:
//! PrepareCommit/PrepareAbort until the markers are written. Consequences:
//! - `PrepareEpochFence` is never held nor written: fencing an ongoing transaction (a
//!   re-init or a timeout) writes a single PrepareAbort record with the fenced epoch, which
//!   is all Kafka ends up writing too. A record with status 7 (Kafka never writes one) is
//!   loaded as Ongoing, so that the timeout aborts it.
//! - `Dead` is never held: expiry writes the tombstone and forgets the id in the same call.
//! - Kafka's `hasFailedEpochFence` is not needed: a failed append reloads from the log.
//!
//! Every transition is one record and every state is complete on its own, so a crash between
//! two records is safe: after Ongoing the transaction times out; after PrepareCommit or
//! PrepareAbort the load resumes the markers (as Kafka does; Kafka's load does nothing else:
//! Ongoing transactions wait for their timeout); a fence is a PrepareAbort record.
//!
//! # Transaction version 2 (KIP-890)
//!
//! EndTxn v5+ (`tv2`) bumps the epoch at every commit or abort: the markers carry the bumped
//! epoch, and the answer is the new producer id and epoch. When the bump reaches the end of
//! the epochs (the client's epoch is `i16::MAX - 1`), a new producer id is allocated, written
//! in the Prepare record (tagged field NextProducerId) and taken at completion with epoch 0.
//! A retried EndTxn (the previous epoch, or the previous producer id at `i16::MAX - 1` after
//! a rotation) is answered as success with the current id and epoch; an abort is allowed in
//! Empty and after a completed transaction (it bumps the epoch). AddPartitionsToTxn v5 from
//! a partition leader (the implicit add of a TV2 producer's partition) passes `tv2`; verify-
//! only AddPartitionsToTxn (v4+, KIP-890 part 1) checks without writing. Aborts started by
//! the coordinator (timeouts, fencing on re-init) follow the finalized `transaction.version`
//! ([`TxnConfig::transaction_version`]), as in Kafka: under 2 the epoch is bumped once to
//! fence and once more for the markers (capped at `i16::MAX`, rotating the producer id
//! when it reaches it).

mod state;

pub mod records;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;

use state::Meta;
pub use state::TxnState;

/// A partition in a transaction: (topic, partition).
pub type TxnPartition = (String, i32);

/// The caller's producer-id allocator (Kafka's ProducerIdManager). An `Err` becomes
/// [`TxnError::ProducerIdAllocation`].
pub type NextProducerId<'a> = &'a mut dyn FnMut() -> Result<i64, String>;

/// Limits and timings, under Kafka's property names.
#[derive(Clone, Debug)]
pub struct TxnConfig {
    /// `transaction.state.log.num.partitions` (default 50).
    pub partitions: i32,
    /// `transaction.max.timeout.ms` (default 900000).
    pub max_timeout_ms: i32,
    /// `transactional.id.expiration.ms` (default 604800000, 7 days).
    pub id_expiration_ms: i64,
    /// The finalized `transaction.version` feature (0, 1 or 2; default 2 as a new Kafka 4.x
    /// cluster). Decides the value version of the records (0 under 0, else 1) and how aborts
    /// started by the coordinator bump the epoch.
    pub transaction_version: i16,
}

impl Default for TxnConfig {
    fn default() -> Self {
        TxnConfig {
            partitions: 50,
            max_timeout_ms: 900_000,
            id_expiration_ms: 7 * 24 * 3600 * 1000,
            transaction_version: 2,
        }
    }
}

/// Why a transaction request was refused. The broker maps these to Kafka error codes; the
/// Kafka name is given for each.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TxnError {
    /// INVALID_REQUEST (an empty transactional id).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// NOT_COORDINATOR: the id's `__transaction_state` partition is not loaded here.
    #[error("this broker does not coordinate that transactional id")]
    NotCoordinator,
    /// CONCURRENT_TRANSACTIONS (retriable): the previous transaction is completing.
    #[error("a previous transaction of this transactional id is still completing")]
    ConcurrentTransactions,
    /// PRODUCER_FENCED. For request versions that predate it (InitProducerId < 4,
    /// AddPartitionsToTxn < 2, AddOffsetsToTxn < 2, EndTxn < 2, TxnOffsetCommit < 2) Kafka
    /// answers INVALID_PRODUCER_EPOCH instead; that mapping is the broker's.
    #[error("the producer epoch is not the transactional id's current one")]
    ProducerFenced,
    /// INVALID_PRODUCER_ID_MAPPING: unknown transactional id, or another producer id.
    #[error("the producer id does not belong to the transactional id")]
    InvalidProducerIdMapping,
    /// INVALID_TXN_STATE: e.g. a commit of an aborted transaction.
    #[error("the request is not valid in the transaction's state ({0})")]
    InvalidTxnState(&'static str),
    /// INVALID_TRANSACTION_TIMEOUT: not in 1..=`transaction.max.timeout.ms`.
    #[error("the transaction timeout is larger than transaction.max.timeout.ms or not positive")]
    InvalidTransactionTimeout,
    /// TRANSACTION_ABORTABLE: a verify-only AddPartitionsToTxn for a partition that is not
    /// in the transaction (per partition).
    #[error("the partition is not part of the transaction")]
    TransactionAbortable,
    /// TRANSACTIONAL_ID_NOT_FOUND (DescribeTransactions).
    #[error("the transactional id is unknown")]
    TransactionalIdNotFound,
    /// The producer-id allocator failed (Kafka answers what the allocator's exception maps
    /// to, e.g. COORDINATOR_LOAD_IN_PROGRESS or UNKNOWN_SERVER_ERROR).
    #[error("no producer id could be allocated: {0}")]
    ProducerIdAllocation(String),
}

/// A record to append to `__transaction_state` (value `None` = tombstone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// The `__transaction_state` partition.
    pub partition: i32,
    pub key: Bytes,
    pub value: Option<Bytes>,
}

/// Transaction markers to write (WriteTxnMarkers): one per partition, all with the same
/// producer id, epoch, coordinator epoch and result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MarkerJob {
    pub transactional_id: String,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub coordinator_epoch: i32,
    pub commit: bool,
    pub partitions: Vec<TxnPartition>,
}

/// What a call asks the caller to do.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Effects {
    /// Records to append, in order, before answering.
    pub records: Vec<Record>,
    /// Marker jobs to start once `records` are durable.
    pub markers: Vec<MarkerJob>,
}

impl Effects {
    fn merge(&mut self, other: Effects) {
        self.records.extend(other.records);
        self.markers.extend(other.markers);
    }
    pub fn is_empty(&self) -> bool {
        self.records.is_empty() && self.markers.is_empty()
    }
}

/// What a load found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Loaded {
    /// Transactional ids now known.
    pub transactions: usize,
    /// Records that could not be decoded (skipped).
    pub skipped: usize,
    /// Marker jobs of the transactions found in PrepareCommit/PrepareAbort.
    pub effects: Effects,
}

/// A verify-only or added partition's answer.
pub type PartitionResult = (TxnPartition, Result<(), TxnError>);

/// DescribeTransactions' view of one transactional id.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnView {
    pub transactional_id: String,
    pub state: TxnState,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    /// -1 when no transaction has started.
    pub start_ms: i64,
    pub partitions: Vec<TxnPartition>,
}

/// One row of ListTransactions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnListing {
    pub transactional_id: String,
    pub producer_id: i64,
    pub state: TxnState,
}

/// ListTransactions' answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxnList {
    pub transactions: Vec<TxnListing>,
    /// State filters that name no state (Kafka answers them in `UnknownStateFilters`).
    pub unknown_state_filters: Vec<String>,
}

/// The coordinator partition of a transactional id: Kafka's
/// `Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions`, the same
/// function as a group's `__consumer_offsets` partition.
pub fn partition_for(transactional_id: &str, partitions: i32) -> i32 {
    sluice_group::partition_for(transactional_id, partitions)
}

/// The transactional ids of one loaded `__transaction_state` partition.
#[derive(Debug)]
struct Shard {
    coordinator_epoch: i32,
    txns: BTreeMap<String, Meta>,
}

/// Every transactional id of the loaded `__transaction_state` partitions.
#[derive(Debug)]
pub struct Coordinator {
    config: TxnConfig,
    shards: HashMap<i32, Shard>,
}

impl Coordinator {
    pub fn new(config: TxnConfig) -> Coordinator {
        let mut config = config;
        config.partitions = config.partitions.max(1);
        Coordinator {
            config,
            shards: HashMap::new(),
        }
    }

    /// Run at `version` of `transaction.version` from the next call on (UpdateFeatures).
    pub fn set_transaction_version(&mut self, version: i16) {
        self.config.transaction_version = version;
    }

    pub fn config(&self) -> &TxnConfig {
        &self.config
    }

    pub fn partition_for(&self, transactional_id: &str) -> i32 {
        partition_for(transactional_id, self.config.partitions)
    }

    pub fn is_loaded(&self, partition: i32) -> bool {
        self.shards.contains_key(&partition)
    }

    /// The coordinator epoch a loaded partition was loaded at (stamped into its markers).
    pub fn coordinator_epoch(&self, partition: i32) -> Option<i32> {
        self.shards.get(&partition).map(|s| s.coordinator_epoch)
    }

    /// The loaded partitions.
    pub fn loaded(&self) -> Vec<i32> {
        let mut v: Vec<i32> = self.shards.keys().copied().collect();
        v.sort_unstable();
        v
    }

    fn tv2_server(&self) -> bool {
        self.config.transaction_version >= 2
    }

    fn value_version(&self) -> i16 {
        if self.config.transaction_version >= 1 {
            1
        } else {
            0
        }
    }

    /// Take over a partition at `coordinator_epoch`: replay its records (key, value) in log
    /// order (a tombstone deletes), replacing whatever was loaded for it. Transactions found
    /// in PrepareCommit/PrepareAbort get their marker jobs again (Kafka's load does the same
    /// and nothing else).
    pub fn load(
        &mut self,
        partition: i32,
        coordinator_epoch: i32,
        records: impl IntoIterator<Item = (Bytes, Option<Bytes>)>,
        now_ms: i64,
    ) -> Loaded {
        let _ = now_ms; // Kafka's load takes no decision by time; the timeout does.
        let mut txns: BTreeMap<String, Meta> = BTreeMap::new();
        let mut skipped = 0;
        for (key, value) in records {
            let id = match records::decode_key(&key) {
                Ok(Some(id)) => id,
                Ok(None) => continue,
                Err(_) => {
                    skipped += 1;
                    continue;
                }
            };
            match value {
                None => {
                    txns.remove(&id);
                }
                Some(v) => match records::decode_value(&v) {
                    Ok(v) => {
                        txns.insert(id, Meta::from_value(v));
                    }
                    Err(_) => skipped += 1,
                },
            }
        }
        let mut effects = Effects::default();
        for (id, meta) in &txns {
            if let Some(job) = meta.marker_job(id, coordinator_epoch) {
                effects.markers.push(job);
            }
        }
        let transactions = txns.len();
        self.shards.insert(
            partition,
            Shard {
                coordinator_epoch,
                txns,
            },
        );
        Loaded {
            transactions,
            skipped,
            effects,
        }
    }

    /// Forget a partition (another coordinator owns it now). Its marker jobs in flight must
    /// be dropped by the caller; the next owner resumes them from the log.
    pub fn unload(&mut self, partition: i32) {
        self.shards.remove(&partition);
    }

    fn shard_mut(&mut self, transactional_id: &str) -> Result<(i32, &mut Shard), TxnError> {
        if transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest(
                "the transactional id is empty".into(),
            ));
        }
        let p = self.partition_for(transactional_id);
        self.shards
            .get_mut(&p)
            .map(|s| (p, s))
            .ok_or(TxnError::NotCoordinator)
    }

    fn record(&self, partition: i32, id: &str, meta: &Meta) -> Record {
        Record {
            partition,
            key: records::key(id),
            value: Some(records::encode_value(
                &meta.to_value(),
                self.value_version(),
            )),
        }
    }

    /// InitProducerId with a transactional id: the producer id and epoch to answer.
    ///
    /// A new id gets a new producer id at epoch 0; a known one has its epoch bumped (fencing
    /// the previous producer), or a new producer id at epoch 0 once the epochs are exhausted.
    /// `expected` is KIP-360's producer id and epoch of a producer that recovers from an
    /// error. An Ongoing transaction is aborted first with a bumped epoch (the answer is
    /// [`TxnError::ConcurrentTransactions`] and the effects carry the abort) until its
    /// markers are written; the client retries.
    pub fn init_producer_id(
        &mut self,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        now_ms: i64,
        next_producer_id: NextProducerId<'_>,
    ) -> (Result<(i64, i16), TxnError>, Effects) {
        if timeout_ms <= 0 || timeout_ms > self.config.max_timeout_ms {
            if transactional_id.is_empty() {
                return (
                    Err(TxnError::InvalidRequest(
                        "the transactional id is empty".into(),
                    )),
                    Effects::default(),
                );
            }
            return (Err(TxnError::InvalidTransactionTimeout), Effects::default());
        }
        let tv2_server = self.tv2_server();
        let (p, shard) = match self.shard_mut(transactional_id) {
            Ok(s) => s,
            Err(e) => return (Err(e), Effects::default()),
        };
        let coordinator_epoch = shard.coordinator_epoch;
        let created = !shard.txns.contains_key(transactional_id);
        if created {
            match next_producer_id() {
                Ok(pid) => {
                    let meta = Meta::new(pid, timeout_ms, now_ms);
                    shard.txns.insert(transactional_id.to_string(), meta);
                }
                Err(e) => return (Err(TxnError::ProducerIdAllocation(e)), Effects::default()),
            }
        }
        let Some(meta) = shard.txns.get_mut(transactional_id) else {
            unreachable!("inserted above when absent");
        };
        let outcome = meta.init(timeout_ms, expected, now_ms, tv2_server, next_producer_id);
        let mut effects = Effects::default();
        let answer = match outcome {
            Ok(state::InitOutcome::Ready) => Ok((meta.producer_id, meta.producer_epoch)),
            Ok(state::InitOutcome::Fenced) => {
                effects
                    .markers
                    .extend(meta.marker_job(transactional_id, coordinator_epoch));
                Err(TxnError::ConcurrentTransactions)
            }
            Err(e) => {
                // A new id whose init failed is not kept: nothing was written for it.
                if created {
                    shard.txns.remove(transactional_id);
                }
                return (Err(e), Effects::default());
            }
        };
        let meta = meta.clone();
        effects
            .records
            .insert(0, self.record(p, transactional_id, &meta));
        (answer, effects)
    }

    /// AddPartitionsToTxn (and AddOffsetsToTxn, with the group's `__consumer_offsets`
    /// partition). With `verify_only` (KIP-890 part 1, v4+ from a partition leader) nothing is
    /// written: each partition is answered `Ok` if it is in the ongoing transaction,
    /// [`TxnError::TransactionAbortable`] if not. `tv2` marks the implicit add of a
    /// transaction-version-2 producer's partition (v5 from a partition leader). A top-level
    /// `Err` applies to every partition.
    #[allow(clippy::too_many_arguments)]
    pub fn add_partitions(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        partitions: &[TxnPartition],
        verify_only: bool,
        tv2: bool,
        now_ms: i64,
    ) -> (Result<Vec<PartitionResult>, TxnError>, Effects) {
        let (p, shard) = match self.shard_mut(transactional_id) {
            Ok(s) => s,
            Err(e) => return (Err(e), Effects::default()),
        };
        let Some(meta) = shard.txns.get_mut(transactional_id) else {
            return (Err(TxnError::InvalidProducerIdMapping), Effects::default());
        };
        if meta.producer_id != producer_id {
            return (Err(TxnError::InvalidProducerIdMapping), Effects::default());
        }
        if meta.producer_epoch != producer_epoch {
            return (Err(TxnError::ProducerFenced), Effects::default());
        }
        if meta.state.is_prepare() {
            return (Err(TxnError::ConcurrentTransactions), Effects::default());
        }
        if verify_only {
            let answers = partitions
                .iter()
                .map(|tp| {
                    let r = if meta.state == TxnState::Ongoing && meta.partitions.contains(tp) {
                        Ok(())
                    } else {
                        Err(TxnError::TransactionAbortable)
                    };
                    (tp.clone(), r)
                })
                .collect();
            return (Ok(answers), Effects::default());
        }
        let all_ok = partitions.iter().map(|tp| (tp.clone(), Ok(()))).collect();
        if meta.state == TxnState::Ongoing
            && partitions.iter().all(|tp| meta.partitions.contains(tp))
        {
            // Kafka's shortcut: nothing new, nothing to write.
            return (Ok(all_ok), Effects::default());
        }
        if let Err(e) = meta.add_partitions(partitions, tv2, now_ms) {
            return (Err(e), Effects::default());
        }
        let meta = meta.clone();
        let effects = Effects {
            records: vec![self.record(p, transactional_id, &meta)],
            markers: Vec::new(),
        };
        (Ok(all_ok), effects)
    }

    /// EndTxn: commit or abort the ongoing transaction. The answer is the producer id and
    /// epoch the producer continues with: under `tv2` (EndTxn v5+) the bumped epoch, or a new
    /// producer id at epoch 0 when the epochs are exhausted; under transaction version 1 the
    /// request's own (EndTxn < v5 answers none).
    #[allow(clippy::too_many_arguments)]
    pub fn end_txn(
        &mut self,
        transactional_id: &str,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        tv2: bool,
        now_ms: i64,
        next_producer_id: NextProducerId<'_>,
    ) -> (Result<(i64, i16), TxnError>, Effects) {
        let (p, shard) = match self.shard_mut(transactional_id) {
            Ok(s) => s,
            Err(e) => return (Err(e), Effects::default()),
        };
        let coordinator_epoch = shard.coordinator_epoch;
        let Some(meta) = shard.txns.get_mut(transactional_id) else {
            return (Err(TxnError::InvalidProducerIdMapping), Effects::default());
        };
        let outcome = if tv2 {
            meta.end_tv2(
                producer_id,
                producer_epoch,
                commit,
                now_ms,
                next_producer_id,
            )
        } else {
            meta.end_tv1(producer_id, producer_epoch, commit, now_ms)
        };
        match outcome {
            Err(e) => (Err(e), Effects::default()),
            Ok(state::EndOutcome::Retry) => (
                Ok((meta.producer_id, meta.producer_epoch)),
                Effects::default(),
            ),
            Ok(state::EndOutcome::Prepared) => {
                let answer = meta.continues_with();
                let meta = meta.clone();
                let mut effects = Effects::default();
                effects
                    .records
                    .push(self.record(p, transactional_id, &meta));
                effects.merge(self.after_prepare(p, transactional_id, coordinator_epoch, now_ms));
                (Ok(answer), effects)
            }
        }
    }

    /// After a Prepare record: the marker job, or, for a transaction without partitions (a
    /// TV2 abort in Empty), the completion at once (Kafka's marker manager does the same).
    fn after_prepare(
        &mut self,
        p: i32,
        transactional_id: &str,
        coordinator_epoch: i32,
        now_ms: i64,
    ) -> Effects {
        let Some(meta) = self
            .shards
            .get_mut(&p)
            .and_then(|s| s.txns.get_mut(transactional_id))
        else {
            return Effects::default();
        };
        let mut effects = Effects::default();
        if meta.partitions.is_empty() {
            meta.complete(now_ms);
            let meta = meta.clone();
            effects
                .records
                .push(self.record(p, transactional_id, &meta));
        } else if let Some(job) = meta.marker_job(transactional_id, coordinator_epoch) {
            effects.markers.push(job);
        }
        effects
    }

    /// All markers of `job` are durable: the transaction completes (CompleteCommit or
    /// CompleteAbort record). A job that no longer matches the transaction (another
    /// coordinator epoch, producer id or epoch, or state) changes nothing.
    pub fn markers_written(&mut self, job: &MarkerJob, now_ms: i64) -> Effects {
        let p = self.partition_for(&job.transactional_id);
        let Some(shard) = self.shards.get_mut(&p) else {
            return Effects::default();
        };
        if shard.coordinator_epoch != job.coordinator_epoch {
            return Effects::default();
        }
        let Some(meta) = shard.txns.get_mut(&job.transactional_id) else {
            return Effects::default();
        };
        let expected = if job.commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        if meta.state != expected
            || meta.producer_id != job.producer_id
            || meta.producer_epoch != job.producer_epoch
        {
            return Effects::default();
        }
        meta.complete(now_ms);
        let meta = meta.clone();
        Effects {
            records: vec![self.record(p, &job.transactional_id, &meta)],
            markers: Vec::new(),
        }
    }

    /// Periodic work, as Kafka's coordinator schedules it: abort every Ongoing transaction
    /// past its timeout (`start + timeout < now`: the epoch is bumped to fence the producer,
    /// PrepareAbort is written and markers are sent, as Kafka's abortTimedOutTransactions),
    /// and expire transactional ids idle for `transactional.id.expiration.ms` in Empty,
    /// CompleteCommit or CompleteAbort (a tombstone; the id is forgotten).
    pub fn tick(&mut self, now_ms: i64, next_producer_id: NextProducerId<'_>) -> Effects {
        let tv2_server = self.tv2_server();
        let expiration_ms = self.config.id_expiration_ms;
        let mut partitions: Vec<i32> = self.shards.keys().copied().collect();
        partitions.sort_unstable();
        let mut effects = Effects::default();
        for p in partitions {
            let Some(shard) = self.shards.get_mut(&p) else {
                continue;
            };
            let coordinator_epoch = shard.coordinator_epoch;
            let timed_out: Vec<String> = shard
                .txns
                .iter()
                .filter(|(_, m)| m.state == TxnState::Ongoing && m.timed_out(now_ms))
                .map(|(id, _)| id.clone())
                .collect();
            let expired: Vec<String> = shard
                .txns
                .iter()
                .filter(|(_, m)| {
                    m.state.is_expiration_allowed()
                        && m.last_update_ms <= now_ms.saturating_sub(expiration_ms)
                })
                .map(|(id, _)| id.clone())
                .collect();
            for id in timed_out {
                let Some(meta) = self.shards.get_mut(&p).and_then(|s| s.txns.get_mut(&id)) else {
                    continue;
                };
                if meta.fence(now_ms, tv2_server, next_producer_id).is_err() {
                    // No producer id for an overflowing fence: try again at the next tick.
                    continue;
                }
                let meta = meta.clone();
                effects.records.push(self.record(p, &id, &meta));
                effects.merge(self.after_prepare(p, &id, coordinator_epoch, now_ms));
            }
            for id in expired {
                if let Some(shard) = self.shards.get_mut(&p) {
                    shard.txns.remove(&id);
                }
                effects.records.push(Record {
                    partition: p,
                    key: records::key(&id),
                    value: None,
                });
            }
        }
        effects
    }

    /// DescribeTransactions for one id.
    pub fn describe(&self, transactional_id: &str, now_ms: i64) -> Result<TxnView, TxnError> {
        let _ = now_ms;
        if transactional_id.is_empty() {
            return Err(TxnError::InvalidRequest(
                "the transactional id is empty".into(),
            ));
        }
        let shard = self
            .shards
            .get(&self.partition_for(transactional_id))
            .ok_or(TxnError::NotCoordinator)?;
        let meta = shard
            .txns
            .get(transactional_id)
            .ok_or(TxnError::TransactionalIdNotFound)?;
        Ok(TxnView {
            transactional_id: transactional_id.to_string(),
            state: meta.state,
            producer_id: meta.producer_id,
            producer_epoch: meta.producer_epoch,
            timeout_ms: meta.timeout_ms,
            start_ms: meta.start_ms,
            partitions: meta.partitions.iter().cloned().collect(),
        })
    }

    /// ListTransactions over the loaded partitions. Empty filters match everything; a
    /// transaction passes `min_duration_ms` (KIP-994; negative = no filter) when it started
    /// more than that long ago (`now - start > min_duration_ms`, with Kafka's start of -1 for
    /// none). Sorted by transactional id.
    pub fn list(
        &self,
        states: &[String],
        producer_ids: &[i64],
        min_duration_ms: i64,
        now_ms: i64,
    ) -> TxnList {
        let mut wanted: BTreeSet<TxnState> = BTreeSet::new();
        let mut unknown = Vec::new();
        for s in states {
            match TxnState::from_name(s) {
                Some(st) => {
                    wanted.insert(st);
                }
                None => unknown.push(s.clone()),
            }
        }
        let mut out = Vec::new();
        for shard in self.shards.values() {
            for (id, m) in &shard.txns {
                if m.state == TxnState::Dead
                    || (!producer_ids.is_empty() && !producer_ids.contains(&m.producer_id))
                    || (!states.is_empty() && !wanted.contains(&m.state))
                    || (min_duration_ms >= 0
                        && now_ms.saturating_sub(m.start_ms) <= min_duration_ms)
                {
                    continue;
                }
                out.push(TxnListing {
                    transactional_id: id.clone(),
                    producer_id: m.producer_id,
                    state: m.state,
                });
            }
        }
        out.sort_by(|a, b| a.transactional_id.cmp(&b.transactional_id));
        TxnList {
            transactions: out,
            unknown_state_filters: unknown,
        }
    }
}

#[cfg(test)]
mod tests;

//! One transactional id's metadata and its transitions (Kafka's `TransactionMetadata` and
//! the checks of `TransactionCoordinator`). Each transition mutates the metadata; the
//! coordinator then writes it as one record.

use std::collections::BTreeSet;

use crate::records::TxnValue;
use crate::{MarkerJob, NextProducerId, TxnError, TxnPartition};

pub(crate) const NO_PRODUCER_ID: i64 = -1;
pub(crate) const NO_EPOCH: i16 = -1;
pub(crate) const MAX_EPOCH: i16 = i16::MAX;

/// Kafka's `isEpochExhausted`: a producer never gets `i16::MAX` so that the coordinator can
/// always fence it (or, under TV2, bump it once more for the markers).
pub(crate) fn epoch_exhausted(epoch: i16) -> bool {
    epoch >= MAX_EPOCH - 1
}

/// The transaction states, with Kafka's ids (the record's `TransactionStatus`) and names
/// (DescribeTransactions/ListTransactions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TxnState {
    /// No transaction (after InitProducerId). → Ongoing on AddPartitions.
    Empty,
    /// Partitions were added. → PrepareCommit/PrepareAbort on EndTxn, PrepareAbort on a
    /// timeout or a re-init (fencing).
    Ongoing,
    /// Committing: markers are being written. → CompleteCommit.
    PrepareCommit,
    /// Aborting: markers are being written. → CompleteAbort.
    PrepareAbort,
    /// Committed. → Ongoing on AddPartitions, Empty on InitProducerId, expiry.
    CompleteCommit,
    /// Aborted. → as CompleteCommit.
    CompleteAbort,
    /// Being expired (Kafka's transient state; never held here: expiry writes the tombstone
    /// and forgets the id at once).
    Dead,
    /// Fencing the producer of an ongoing transaction (Kafka's transient state; never held
    /// here: the fence is written as PrepareAbort with the bumped epoch).
    PrepareEpochFence,
}

impl TxnState {
    pub const ALL: [TxnState; 8] = [
        TxnState::Empty,
        TxnState::Ongoing,
        TxnState::PrepareCommit,
        TxnState::PrepareAbort,
        TxnState::CompleteCommit,
        TxnState::CompleteAbort,
        TxnState::Dead,
        TxnState::PrepareEpochFence,
    ];

    /// Kafka's id, the record's `TransactionStatus`.
    pub fn id(self) -> i8 {
        match self {
            TxnState::Empty => 0,
            TxnState::Ongoing => 1,
            TxnState::PrepareCommit => 2,
            TxnState::PrepareAbort => 3,
            TxnState::CompleteCommit => 4,
            TxnState::CompleteAbort => 5,
            TxnState::Dead => 6,
            TxnState::PrepareEpochFence => 7,
        }
    }

    pub fn from_id(id: i8) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.id() == id)
    }

    /// Kafka's name, as DescribeTransactions and ListTransactions show it.
    pub fn name(self) -> &'static str {
        match self {
            TxnState::Empty => "Empty",
            TxnState::Ongoing => "Ongoing",
            TxnState::PrepareCommit => "PrepareCommit",
            TxnState::PrepareAbort => "PrepareAbort",
            TxnState::CompleteCommit => "CompleteCommit",
            TxnState::CompleteAbort => "CompleteAbort",
            TxnState::Dead => "Dead",
            TxnState::PrepareEpochFence => "PrepareEpochFence",
        }
    }

    /// The state of a name (exact, as Kafka's `fromName`).
    pub fn from_name(name: &str) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|s| s.name() == name)
    }

    /// Kafka's `validPreviousStates`: whether `self` may follow `from`.
    pub fn may_follow(self, from: TxnState) -> bool {
        use TxnState::*;
        match self {
            Empty => matches!(from, Empty | CompleteCommit | CompleteAbort),
            Ongoing => matches!(from, Ongoing | Empty | CompleteCommit | CompleteAbort),
            PrepareCommit => from == Ongoing,
            // Kafka: from Ongoing and PrepareEpochFence; TV2 also aborts from Empty and the
            // completed states (no partitions).
            PrepareAbort => matches!(
                from,
                Ongoing | PrepareEpochFence | Empty | CompleteCommit | CompleteAbort
            ),
            CompleteCommit => from == PrepareCommit,
            CompleteAbort => from == PrepareAbort,
            Dead => matches!(from, Empty | CompleteAbort | CompleteCommit),
            PrepareEpochFence => from == Ongoing,
        }
    }

    pub(crate) fn is_prepare(self) -> bool {
        matches!(self, TxnState::PrepareCommit | TxnState::PrepareAbort)
    }

    /// Kafka's `isExpirationAllowed`.
    pub fn is_expiration_allowed(self) -> bool {
        matches!(
            self,
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort
        )
    }
}

impl std::fmt::Display for TxnState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What InitProducerId did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum InitOutcome {
    /// Empty with the producer id and epoch to answer.
    Ready,
    /// An ongoing transaction was fenced (now PrepareAbort): answer CONCURRENT_TRANSACTIONS.
    Fenced,
}

/// What EndTxn did.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum EndOutcome {
    /// Now PrepareCommit/PrepareAbort: write the record, then the markers.
    Prepared,
    /// A retry of a completed EndTxn: answer success, write nothing.
    Retry,
}

/// One transactional id's metadata (Kafka's `TransactionMetadata` without the pending state).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Meta {
    pub(crate) producer_id: i64,
    /// The producer id before the last transition (differs from `producer_id` only right
    /// after a rotation).
    pub(crate) prev_producer_id: i64,
    /// Under TV2, the producer id a Prepare* transaction continues with at completion when
    /// its epoch overflowed; -1 otherwise.
    pub(crate) next_producer_id: i64,
    pub(crate) producer_epoch: i16,
    /// The epoch before the last bump, for KIP-360 retries (-1 = none; not persisted, as in
    /// Kafka).
    pub(crate) last_producer_epoch: i16,
    pub(crate) timeout_ms: i32,
    pub(crate) state: TxnState,
    pub(crate) partitions: BTreeSet<TxnPartition>,
    /// When the transaction started (first partition added); -1 when none.
    pub(crate) start_ms: i64,
    pub(crate) last_update_ms: i64,
    /// The `transaction.version` of the client's last transition (0 or 2).
    pub(crate) client_tv: i16,
}

impl Meta {
    /// A transactional id seen for the first time (not yet written; `init` follows).
    pub(crate) fn new(producer_id: i64, timeout_ms: i32, now_ms: i64) -> Meta {
        Meta {
            producer_id,
            prev_producer_id: NO_PRODUCER_ID,
            next_producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_EPOCH,
            last_producer_epoch: NO_EPOCH,
            timeout_ms,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            start_ms: -1,
            last_update_ms: now_ms,
            client_tv: 0,
        }
    }

    pub(crate) fn from_value(v: TxnValue) -> Meta {
        let state = match v.state {
            // Never written by Kafka (a transient state); the timeout aborts it.
            TxnState::PrepareEpochFence => TxnState::Ongoing,
            s => s,
        };
        Meta {
            producer_id: v.producer_id,
            prev_producer_id: v.previous_producer_id,
            next_producer_id: v.next_producer_id,
            producer_epoch: v.producer_epoch,
            last_producer_epoch: NO_EPOCH,
            timeout_ms: v.timeout_ms,
            state,
            partitions: if state == TxnState::Empty {
                BTreeSet::new()
            } else {
                v.partitions
            },
            start_ms: v.start_ms,
            last_update_ms: v.last_update_ms,
            client_tv: v.client_transaction_version,
        }
    }

    pub(crate) fn to_value(&self) -> TxnValue {
        TxnValue {
            producer_id: self.producer_id,
            previous_producer_id: self.prev_producer_id,
            next_producer_id: self.next_producer_id,
            producer_epoch: self.producer_epoch,
            timeout_ms: self.timeout_ms,
            state: self.state,
            partitions: if self.state == TxnState::Empty {
                BTreeSet::new()
            } else {
                self.partitions.clone()
            },
            last_update_ms: self.last_update_ms,
            start_ms: self.start_ms,
            client_transaction_version: self.client_tv,
        }
    }

    fn tv2(&self) -> bool {
        self.client_tv >= 2
    }

    /// Apply a transition to `to`, checking Kafka's valid previous states.
    fn transition(&mut self, to: TxnState, now_ms: i64) {
        assert!(
            to.may_follow(self.state),
            "transition {} -> {to} is not valid",
            self.state
        );
        self.prev_producer_id = self.producer_id;
        self.state = to;
        self.last_update_ms = now_ms;
    }

    /// The marker job of a Prepare* transaction.
    pub(crate) fn marker_job(&self, id: &str, coordinator_epoch: i32) -> Option<MarkerJob> {
        self.state.is_prepare().then(|| MarkerJob {
            transactional_id: id.to_string(),
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            coordinator_epoch,
            commit: self.state == TxnState::PrepareCommit,
            partitions: self.partitions.iter().cloned().collect(),
        })
    }

    /// The producer id and epoch the producer continues with once this Prepare* transaction
    /// completes (TV2: the new producer id at epoch 0 after an overflow).
    pub(crate) fn continues_with(&self) -> (i64, i16) {
        if self.tv2() && self.next_producer_id != NO_PRODUCER_ID {
            (self.next_producer_id, 0)
        } else {
            (self.producer_id, self.producer_epoch)
        }
    }

    pub(crate) fn timed_out(&self, now_ms: i64) -> bool {
        self.start_ms.saturating_add(i64::from(self.timeout_ms)) < now_ms
    }

    /// InitProducerId (Kafka's `prepareInitProducerIdTransit`).
    pub(crate) fn init(
        &mut self,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        now_ms: i64,
        tv2_server: bool,
        next_producer_id: NextProducerId<'_>,
    ) -> Result<InitOutcome, TxnError> {
        if let Some((pid, epoch)) = expected {
            // KIP-360: the expected id must be this one, or the previous one after a
            // rotation that the producer did not hear about, or the id must be brand new.
            let valid = self.producer_epoch == NO_EPOCH
                || pid == self.producer_id
                || (pid == self.prev_producer_id && epoch_exhausted(epoch));
            if !valid {
                return Err(TxnError::ProducerFenced);
            }
        }
        match self.state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => {
                Err(TxnError::ConcurrentTransactions)
            }
            TxnState::Ongoing | TxnState::PrepareEpochFence => {
                // Abort it with a bumped epoch; the epoch is never answered: the client
                // retries and gets a second bump (or a new producer id if the first
                // exhausted the epochs).
                self.fence(now_ms, tv2_server, next_producer_id)?;
                Ok(InitOutcome::Fenced)
            }
            TxnState::Dead => Err(TxnError::InvalidTxnState("Dead")),
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                let rotate = epoch_exhausted(self.producer_epoch)
                    && expected.is_none_or(|(_, e)| e == self.producer_epoch);
                let (pid, epoch, last) = if rotate {
                    let pid = next_producer_id().map_err(TxnError::ProducerIdAllocation)?;
                    let last = if expected.is_some() {
                        self.producer_epoch
                    } else {
                        NO_EPOCH
                    };
                    (pid, 0, last)
                } else {
                    let bumped = self.producer_epoch.saturating_add(1);
                    match expected {
                        None => (self.producer_id, bumped, NO_EPOCH),
                        Some((_, e))
                            if self.producer_epoch == NO_EPOCH || e == self.producer_epoch =>
                        {
                            if epoch_exhausted(self.producer_epoch) {
                                // Kafka fails here with an internal error; an exhausted
                                // epoch that the producer does not hold is fenced.
                                return Err(TxnError::ProducerFenced);
                            }
                            (self.producer_id, bumped, self.producer_epoch)
                        }
                        // A retry of an init whose answer was lost: same epoch again.
                        Some((_, e)) if e == self.last_producer_epoch => (
                            self.producer_id,
                            self.producer_epoch,
                            self.last_producer_epoch,
                        ),
                        Some(_) => return Err(TxnError::ProducerFenced),
                    }
                };
                self.transition(TxnState::Empty, now_ms);
                self.producer_id = pid;
                self.producer_epoch = epoch;
                self.last_producer_epoch = last;
                self.timeout_ms = timeout_ms;
                self.partitions.clear();
                self.start_ms = -1;
                self.next_producer_id = NO_PRODUCER_ID;
                Ok(InitOutcome::Ready)
            }
        }
    }

    /// Fence the producer of an ongoing transaction and abort it (a re-init or a timeout;
    /// Kafka's `prepareFenceProducerEpoch` followed by the abort). Under the server's
    /// transaction version 2 the abort bumps once more for the markers, as Kafka's; the
    /// epoch saturates at `i16::MAX`, where a new producer id is taken at completion.
    pub(crate) fn fence(
        &mut self,
        now_ms: i64,
        tv2_server: bool,
        next_producer_id: NextProducerId<'_>,
    ) -> Result<(), TxnError> {
        let fenced = self.producer_epoch.saturating_add(1);
        let (epoch, last, next) = if tv2_server {
            let marker = fenced.saturating_add(1);
            let next = if marker == MAX_EPOCH {
                next_producer_id().map_err(TxnError::ProducerIdAllocation)?
            } else {
                NO_PRODUCER_ID
            };
            (marker, fenced, next)
        } else {
            (fenced, NO_EPOCH, NO_PRODUCER_ID)
        };
        if self.state == TxnState::PrepareEpochFence {
            self.state = TxnState::Ongoing;
        }
        self.transition(TxnState::PrepareAbort, now_ms);
        self.producer_epoch = epoch;
        self.last_producer_epoch = last;
        self.next_producer_id = next;
        self.client_tv = if tv2_server { 2 } else { 0 };
        Ok(())
    }

    /// AddPartitionsToTxn (Kafka's `prepareAddPartitions`); the caller checked the producer.
    pub(crate) fn add_partitions(
        &mut self,
        partitions: &[TxnPartition],
        tv2: bool,
        now_ms: i64,
    ) -> Result<(), TxnError> {
        match self.state {
            TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort => {
                self.start_ms = now_ms;
                self.partitions.clear();
                self.client_tv = if tv2 { 2 } else { 0 };
            }
            TxnState::Ongoing => {
                if tv2 {
                    self.client_tv = 2;
                }
            }
            s => return Err(TxnError::InvalidTxnState(s.name())),
        }
        self.transition(TxnState::Ongoing, now_ms);
        self.partitions.extend(partitions.iter().cloned());
        Ok(())
    }

    /// EndTxn from a transaction-version-1 client (EndTxn < v5): no epoch bump.
    pub(crate) fn end_tv1(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        now_ms: i64,
    ) -> Result<EndOutcome, TxnError> {
        if self.producer_id != producer_id {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if self.producer_epoch != producer_epoch {
            return Err(TxnError::ProducerFenced);
        }
        let state = self.state;
        match (state, commit) {
            (TxnState::Ongoing, _) => {
                self.prepare(commit, false, NO_PRODUCER_ID, false, now_ms);
                Ok(EndOutcome::Prepared)
            }
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) => {
                Ok(EndOutcome::Retry)
            }
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(TxnError::ConcurrentTransactions)
            }
            _ => Err(TxnError::InvalidTxnState(state.name())),
        }
    }

    /// EndTxn from a transaction-version-2 client (EndTxn v5+): every end bumps the epoch.
    pub(crate) fn end_tv2(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        now_ms: i64,
        next_producer_id: NextProducerId<'_>,
    ) -> Result<EndOutcome, TxnError> {
        // A retry after the end that rotated the producer id (the client still has the old
        // id at the last epoch it held).
        let retry_on_overflow = self.prev_producer_id == producer_id
            && self.prev_producer_id != self.producer_id
            && producer_epoch == MAX_EPOCH - 1
            && self.producer_epoch == 0;
        // A retry after the end that bumped the epoch.
        let retry_on_bump = i32::from(self.producer_epoch) == i32::from(producer_epoch) + 1;
        let state = self.state;
        let valid_epoch = match state {
            TxnState::PrepareCommit | TxnState::PrepareAbort => retry_on_bump,
            TxnState::CompleteCommit | TxnState::CompleteAbort => {
                retry_on_bump || retry_on_overflow || producer_epoch == self.producer_epoch
            }
            _ => producer_epoch == self.producer_epoch,
        };
        if self.producer_id != producer_id && !retry_on_overflow {
            return Err(TxnError::InvalidProducerIdMapping);
        }
        if !valid_epoch {
            return Err(TxnError::ProducerFenced);
        }
        let retry = retry_on_bump || retry_on_overflow;
        let mut bump = |meta: &mut Meta, no_partitions: bool| -> Result<EndOutcome, TxnError> {
            let next = if epoch_exhausted(meta.producer_epoch) {
                next_producer_id().map_err(TxnError::ProducerIdAllocation)?
            } else {
                NO_PRODUCER_ID
            };
            meta.prepare(commit, true, next, no_partitions, now_ms);
            Ok(EndOutcome::Prepared)
        };
        match (state, commit) {
            (TxnState::Ongoing, _) => bump(self, false),
            (TxnState::CompleteCommit, true) | (TxnState::CompleteAbort, false) if retry => {
                Ok(EndOutcome::Retry)
            }
            (TxnState::CompleteCommit, false) if retry => {
                Err(TxnError::InvalidTxnState(state.name()))
            }
            // An abort with nothing to abort still bumps the epoch (KIP-890).
            (TxnState::Empty | TxnState::CompleteCommit | TxnState::CompleteAbort, false) => {
                bump(self, true)
            }
            (TxnState::PrepareCommit, true) | (TxnState::PrepareAbort, false) => {
                Err(TxnError::ConcurrentTransactions)
            }
            _ => Err(TxnError::InvalidTxnState(state.name())),
        }
    }

    /// → PrepareCommit/PrepareAbort (Kafka's `prepareAbortOrCommit`).
    fn prepare(&mut self, commit: bool, tv2: bool, next: i64, no_partitions: bool, now_ms: i64) {
        let to = if commit {
            TxnState::PrepareCommit
        } else {
            TxnState::PrepareAbort
        };
        if no_partitions {
            // Kafka: the start time of a transaction without partitions is the end's time.
            self.start_ms = now_ms;
            self.partitions.clear();
        }
        self.transition(to, now_ms);
        if tv2 {
            self.last_producer_epoch = self.producer_epoch;
            // Never past i16::MAX: the client's epoch is at most i16::MAX - 1.
            self.producer_epoch = self.producer_epoch.saturating_add(1);
            self.client_tv = 2;
        } else {
            self.client_tv = 0;
        }
        self.next_producer_id = next;
    }

    /// Prepare* → Complete* (Kafka's `prepareComplete`): the markers are written.
    pub(crate) fn complete(&mut self, now_ms: i64) {
        let to = if self.state == TxnState::PrepareCommit {
            TxnState::CompleteCommit
        } else {
            TxnState::CompleteAbort
        };
        let (pid, epoch) = self.continues_with();
        self.transition(to, now_ms);
        self.producer_id = pid;
        self.producer_epoch = epoch;
        self.next_producer_id = NO_PRODUCER_ID;
        self.partitions.clear();
    }
}

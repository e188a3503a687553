//! Producer state, like Kafka's ProducerStateManager: per producer id the current epoch, the
//! metadata of the last five batches (idempotence), the coordinator epoch of its last
//! transaction marker and the first offset of its open transaction on this partition. The
//! log's view of open transactions (for the last stable offset) is `crate::txn::TxnState`.

use std::collections::{HashMap, VecDeque};

use sluice_format::batch::{increment_sequence, BatchHeader};
use sluice_format::snapshot::SnapshotEntry;

/// Number of batches remembered per producer (Kafka's NUM_BATCHES_TO_RETAIN).
pub(crate) const BATCHES_TO_RETAIN: usize = 5;
/// Producers idle longer than this are forgotten (Kafka's `producer.id.expiration.ms` default).
pub(crate) const PRODUCER_EXPIRATION_MS: i64 = 24 * 60 * 60 * 1000;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct BatchMeta {
    pub first_seq: i32,
    pub last_seq: i32,
    pub first_offset: i64,
    pub last_offset: i64,
}

#[derive(Clone, Debug)]
pub(crate) struct ProducerEntry {
    pub epoch: i16,
    pub batches: VecDeque<BatchMeta>,
    pub last_append_ms: i64,
    /// The coordinator epoch of the producer's last marker; -1 before any.
    pub coordinator_epoch: i32,
    /// The first offset of the producer's open transaction on this partition.
    pub txn_first: Option<i64>,
}

impl Default for ProducerEntry {
    fn default() -> Self {
        ProducerEntry {
            epoch: 0,
            batches: VecDeque::new(),
            last_append_ms: 0,
            coordinator_epoch: -1,
            txn_first: None,
        }
    }
}

/// A transaction verification under way for a producer on this partition (Kafka's
/// `VerificationStateEntry`): the guard a verdict of the transaction coordinator must come
/// back with for the producer's batch to open a transaction here. Cleared by the producer's
/// next transactional append, data or marker; in memory only.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Verifying {
    pub guard: crate::VerificationGuard,
    /// When it was created (ms): one whose verdict never came goes at the producer expiry.
    pub started_ms: i64,
    /// The lowest first sequence of the produce requests whose verification joined it
    /// (Kafka's `lowestSequence`): a batch with a higher one is refused as out of order until
    /// the transaction is open, so that a later batch whose verdict came first is never
    /// appended before an earlier one still waiting (or refused: then retried).
    pub lowest_seq: Option<i32>,
    /// The producer epoch `lowest_seq` is of: a request of a newer epoch starts it anew, one
    /// of an older epoch (a fenced zombie's) leaves it (Kafka's
    /// `maybeUpdateLowestSequenceAndEpoch`).
    pub epoch: i16,
}

impl Verifying {
    /// Kept until the producer expiry time has passed since it was created.
    pub(crate) fn expired(&self, now_ms: i64) -> bool {
        now_ms.saturating_sub(self.started_ms) >= PRODUCER_EXPIRATION_MS
    }
}

/// Whether a marker for a producer, whose entry before the marker is `entry`, leaves its
/// verification of epoch `verifying_epoch` in place: only when the marker ends a transaction
/// opened at an older epoch. That transaction is not the one the verification asks about (a
/// transaction of the verification's epoch started after it ended: transaction version 2
/// bumps the epoch at every end), and the coordinator answers for the verification's epoch
/// only, so its verdict still holds. A marker ending a transaction of the same epoch, or
/// arriving with none open here, may end the verified transaction itself: it clears the
/// verification (Kafka's ABA guard).
pub(crate) fn keeps_verification(entry: Option<&ProducerEntry>, verifying_epoch: i16) -> bool {
    entry.is_some_and(|e| e.txn_first.is_some() && e.epoch < verifying_epoch)
}

/// Why a marker is refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum MarkerError {
    Fenced {
        epoch: i16,
        current: i16,
    },
    CoordinatorFenced {
        coordinator_epoch: i32,
        current: i32,
    },
}

/// Outcome of checking one batch.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SeqCheck {
    /// Accept and append.
    Accept,
    /// A retry of a batch already in the log.
    Duplicate(BatchMeta),
}

/// Why a batch is refused.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SeqError {
    OutOfOrder { expected: i32, got: i32 },
    Fenced { epoch: i16, current: i16 },
}

#[derive(Clone, Debug, Default)]
pub(crate) struct ProducerStates {
    map: HashMap<i64, ProducerEntry>,
}

impl ProducerStates {
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// The last offset of each producer's newest batch (the batch the log cleaner keeps, so
    /// that the producer's sequence numbers survive a restart).
    pub(crate) fn last_offsets(&self) -> HashMap<i64, i64> {
        self.map
            .iter()
            .filter_map(|(pid, e)| e.batches.back().map(|b| (*pid, b.last_offset)))
            .collect()
    }

    pub(crate) fn get(&self, pid: i64) -> Option<&ProducerEntry> {
        self.map.get(&pid)
    }

    /// Check batch `h` of producer `h.producer_id` against `entry` (the state including batches
    /// earlier in the same append).
    pub(crate) fn check(
        entry: Option<&ProducerEntry>,
        h: &BatchHeader,
    ) -> Result<SeqCheck, SeqError> {
        let Some(entry) = entry else {
            // Unknown producer (new, expired or state lost): accept any sequence.
            return Ok(SeqCheck::Accept);
        };
        let first = h.base_sequence;
        let last = h.last_sequence();
        if h.producer_epoch == entry.epoch {
            if let Some(dup) = entry
                .batches
                .iter()
                .find(|b| b.first_seq == first && b.last_seq == last)
            {
                return Ok(SeqCheck::Duplicate(*dup));
            }
        }
        if h.producer_epoch < entry.epoch {
            return Err(SeqError::Fenced {
                epoch: h.producer_epoch,
                current: entry.epoch,
            });
        }
        if h.producer_epoch > entry.epoch {
            return if first == 0 {
                Ok(SeqCheck::Accept)
            } else {
                Err(SeqError::OutOfOrder {
                    expected: 0,
                    got: first,
                })
            };
        }
        match entry.batches.back() {
            // Same epoch, nothing remembered (a marker moved the producer to this epoch and
            // forgot the old one's batches): its first batch starts the epoch's sequence at 0,
            // as Kafka's `checkSequence` wants (a later batch of the epoch's first transaction
            // must not go in before the first).
            None if first == 0 => Ok(SeqCheck::Accept),
            None => Err(SeqError::OutOfOrder {
                expected: 0,
                got: first,
            }),
            Some(lastb) => {
                let expected = increment_sequence(lastb.last_seq, 1);
                if first == expected {
                    Ok(SeqCheck::Accept)
                } else {
                    Err(SeqError::OutOfOrder {
                        expected,
                        got: first,
                    })
                }
            }
        }
    }

    /// A producer with an open transaction writes only transactional batches of that
    /// transaction's epoch, until its marker ends it (the marker may bring a new epoch:
    /// KIP-890). The first half is Kafka's `appendDataBatch` check. The second is not
    /// Kafka's: Kafka keeps the open transaction's first offset when a transactional batch
    /// of a higher epoch arrives, so that epoch's COMMIT would commit whatever the old one
    /// left open. The coordinator lets a producer write at a higher epoch only once every
    /// transaction of the lower one has its markers, so a transaction of the lower epoch
    /// still open here is one the coordinator never knew of (a batch appended after its
    /// transaction's ABORT): the new epoch's batch is refused, its producer aborts, and that
    /// ABORT marker ends the old transaction too, aborted.
    pub(crate) fn check_txn(entry: Option<&ProducerEntry>, h: &BatchHeader) -> Result<(), String> {
        let Some((e, first)) = entry.and_then(|e| e.txn_first.map(|f| (e, f))) else {
            return Ok(());
        };
        if !h.is_transactional() {
            Err(format!(
                "a non-transactional batch while the transaction started at offset {first} is open"
            ))
        } else if h.producer_epoch != e.epoch {
            Err(format!(
                "a transactional batch of epoch {} while the transaction of epoch {} started \
                 at offset {first} is open (only its marker ends it)",
                h.producer_epoch, e.epoch
            ))
        } else {
            Ok(())
        }
    }

    /// Kafka's `appendEndTxnMarker` checks: the producer epoch may not go back, nor the
    /// coordinator epoch.
    pub(crate) fn check_marker(
        entry: Option<&ProducerEntry>,
        epoch: i16,
        coordinator_epoch: i32,
    ) -> Result<(), MarkerError> {
        let Some(e) = entry else { return Ok(()) };
        if epoch < e.epoch {
            return Err(MarkerError::Fenced {
                epoch,
                current: e.epoch,
            });
        }
        if coordinator_epoch < e.coordinator_epoch {
            return Err(MarkerError::CoordinatorFenced {
                coordinator_epoch,
                current: e.coordinator_epoch,
            });
        }
        Ok(())
    }

    /// Apply a marker to `entry`: its epoch (a higher one forgets the batches of the old),
    /// coordinator epoch, and the end of its open transaction, whose first offset is
    /// returned.
    pub(crate) fn apply_marker(
        entry: &mut ProducerEntry,
        epoch: i16,
        coordinator_epoch: i32,
        now_ms: i64,
    ) -> Option<i64> {
        if epoch != entry.epoch {
            entry.epoch = epoch;
            entry.batches.clear();
        }
        entry.coordinator_epoch = coordinator_epoch;
        entry.last_append_ms = entry.last_append_ms.max(now_ms);
        entry.txn_first.take()
    }

    /// Apply an accepted (or replayed-from-disk) data batch to `entry`. Returns true when the
    /// batch opens a transaction. A batch of a new epoch keeps the open transaction's first
    /// offset; only a replay of a log written before [`ProducerStates::check_txn`] refused
    /// such a batch meets one, and it gets the state that log was served with.
    pub(crate) fn apply(
        entry: &mut ProducerEntry,
        h: &BatchHeader,
        first_offset: i64,
        now_ms: i64,
    ) -> bool {
        if h.producer_epoch != entry.epoch {
            entry.epoch = h.producer_epoch;
            entry.batches.clear();
        }
        entry.batches.push_back(BatchMeta {
            first_seq: h.base_sequence,
            last_seq: h.last_sequence(),
            first_offset,
            last_offset: first_offset + i64::from(h.last_offset_delta),
        });
        while entry.batches.len() > BATCHES_TO_RETAIN {
            entry.batches.pop_front();
        }
        entry.last_append_ms = entry.last_append_ms.max(now_ms);
        if h.is_transactional() && entry.txn_first.is_none() {
            entry.txn_first = Some(first_offset);
            return true;
        }
        false
    }

    fn entry_for(&mut self, pid: i64, epoch: i16, now_ms: i64) -> &mut ProducerEntry {
        self.map.entry(pid).or_insert_with(|| ProducerEntry {
            epoch,
            last_append_ms: now_ms,
            ..ProducerEntry::default()
        })
    }

    /// Replay a data batch read from the log (no checks; an older epoch than known is
    /// ignored). Returns true when it opens a transaction.
    pub(crate) fn replay(&mut self, h: &BatchHeader, now_ms: i64) -> bool {
        if h.producer_id < 0 || h.is_control() {
            return false;
        }
        let entry = self.entry_for(h.producer_id, h.producer_epoch, now_ms);
        if h.producer_epoch < entry.epoch {
            return false;
        }
        Self::apply(entry, h, h.base_offset, now_ms)
    }

    /// Replay a marker read from the log: returns the first offset of the transaction it
    /// ends, if one was open. An older epoch than known is ignored.
    pub(crate) fn replay_marker(
        &mut self,
        h: &BatchHeader,
        coordinator_epoch: i32,
        now_ms: i64,
    ) -> Option<i64> {
        if h.producer_id < 0 {
            return None;
        }
        let entry = self.entry_for(h.producer_id, h.producer_epoch, now_ms);
        if h.producer_epoch < entry.epoch {
            return None;
        }
        Self::apply_marker(entry, h.producer_epoch, coordinator_epoch, now_ms)
    }

    /// Open transactions by producer (for the log's transaction state after a load).
    pub(crate) fn open_txns(&self) -> Vec<(i64, i64)> {
        let mut v: Vec<(i64, i64)> = self
            .map
            .iter()
            .filter_map(|(pid, e)| e.txn_first.map(|f| (*pid, f)))
            .collect();
        v.sort_by_key(|(_, f)| *f);
        v
    }

    /// What DescribeProducers shows.
    pub(crate) fn views(&self) -> Vec<crate::ProducerView> {
        let mut v: Vec<crate::ProducerView> = self
            .map
            .iter()
            .map(|(&pid, e)| crate::ProducerView {
                producer_id: pid,
                producer_epoch: e.epoch,
                last_sequence: e.batches.back().map_or(-1, |b| b.last_seq),
                last_timestamp: e.last_append_ms,
                coordinator_epoch: e.coordinator_epoch,
                current_txn_start_offset: e.txn_first.unwrap_or(-1),
            })
            .collect();
        v.sort_by_key(|p| p.producer_id);
        v
    }

    pub(crate) fn insert(&mut self, pid: i64, entry: ProducerEntry) {
        self.map.insert(pid, entry);
    }

    /// The state as Kafka's producer snapshot holds it: each producer's epoch and last batch.
    pub(crate) fn to_snapshot(&self) -> Vec<SnapshotEntry> {
        let mut v: Vec<SnapshotEntry> = self
            .map
            .iter()
            .map(|(&pid, e)| {
                let last = e.batches.back();
                SnapshotEntry {
                    producer_id: pid,
                    epoch: e.epoch,
                    last_sequence: last.map_or(-1, |b| b.last_seq),
                    last_offset: last.map_or(-1, |b| b.last_offset),
                    offset_delta: last.map_or(0, |b| {
                        i32::try_from(b.last_offset - b.first_offset).unwrap_or(0)
                    }),
                    timestamp: e.last_append_ms,
                    coordinator_epoch: e.coordinator_epoch,
                    current_txn_first_offset: e.txn_first.unwrap_or(-1),
                }
            })
            .collect();
        v.sort_by_key(|e| e.producer_id);
        v
    }

    /// State loaded from a snapshot: one remembered batch per producer (Kafka keeps no more).
    /// Expired producers go at the log's next periodic expiry ([`ProducerStates::expire`]).
    pub(crate) fn from_snapshot(entries: &[SnapshotEntry]) -> ProducerStates {
        let mut out = ProducerStates::default();
        for e in entries {
            if e.producer_id < 0 {
                continue;
            }
            let mut batches = VecDeque::new();
            if e.last_sequence >= 0 && e.last_offset >= 0 && e.offset_delta >= 0 {
                batches.push_back(BatchMeta {
                    first_seq: decrement_sequence(e.last_sequence, e.offset_delta),
                    last_seq: e.last_sequence,
                    first_offset: e.last_offset - i64::from(e.offset_delta),
                    last_offset: e.last_offset,
                });
            }
            out.map.insert(
                e.producer_id,
                ProducerEntry {
                    epoch: e.epoch,
                    batches,
                    last_append_ms: e.timestamp,
                    coordinator_epoch: e.coordinator_epoch,
                    txn_first: (e.current_txn_first_offset >= 0)
                        .then_some(e.current_txn_first_offset),
                },
            );
        }
        out
    }

    /// Add what a replay of batches below this state's snapshot offset saw (`hist`): for a
    /// producer of the same epoch, its batches older than those known (so a retry of any of
    /// the last five is recognised); a producer this state does not know, as `hist` has it,
    /// without a transaction (whatever was open then ended before the snapshot, or the
    /// snapshot would hold it).
    pub(crate) fn merge_history(&mut self, hist: ProducerStates) {
        for (pid, mut h) in hist.map {
            match self.map.get_mut(&pid) {
                None => {
                    h.txn_first = None;
                    self.map.insert(pid, h);
                }
                Some(e) if e.epoch == h.epoch => {
                    let first = e.batches.front().map(|b| b.first_offset);
                    let mut v: VecDeque<BatchMeta> = h
                        .batches
                        .into_iter()
                        .filter(|b| first.is_none_or(|f| b.last_offset < f))
                        .collect();
                    v.extend(e.batches.drain(..));
                    while v.len() > BATCHES_TO_RETAIN {
                        v.pop_front();
                    }
                    e.batches = v;
                }
                Some(_) => {}
            }
        }
    }

    /// Forget producers idle for longer than the expiration, never one with an open
    /// transaction (its marker is still to come; Kafka's `isProducerExpired`).
    pub(crate) fn expire(&mut self, now_ms: i64) {
        self.map.retain(|_, e| {
            e.txn_first.is_some()
                || now_ms.saturating_sub(e.last_append_ms) < PRODUCER_EXPIRATION_MS
        });
    }

    /// Forget batches entirely below the log start offset (like Kafka, which evicts producers
    /// whose last offset is below it), but not a producer with an open transaction.
    pub(crate) fn truncate_head(&mut self, log_start: i64) {
        self.map.retain(|_, e| {
            e.txn_first.is_some() || e.batches.back().is_none_or(|b| b.last_offset >= log_start)
        });
    }
}

/// `seq - decrement`, wrapping below 0 to i32::MAX (the inverse of [`increment_sequence`]).
fn decrement_sequence(seq: i32, decrement: i32) -> i32 {
    if seq < decrement {
        i32::MAX - (decrement - seq) + 1
    } else {
        seq - decrement
    }
}

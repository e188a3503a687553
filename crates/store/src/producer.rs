//! Idempotent-producer state, like Kafka's ProducerStateManager (without transactions): per
//! producer id the current epoch and the metadata of the last five batches.

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

#[derive(Clone, Debug, Default)]
pub(crate) struct ProducerEntry {
    pub epoch: i16,
    pub batches: VecDeque<BatchMeta>,
    pub last_append_ms: i64,
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
            // Same epoch but nothing remembered: nothing to check against.
            None => Ok(SeqCheck::Accept),
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

    /// Apply an accepted (or replayed-from-disk) batch to `entry`.
    pub(crate) fn apply(
        entry: &mut ProducerEntry,
        h: &BatchHeader,
        first_offset: i64,
        now_ms: i64,
    ) {
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
    }

    /// Replay a batch read from the log (no checks; an older epoch than known is ignored).
    pub(crate) fn replay(&mut self, h: &BatchHeader, now_ms: i64) {
        if h.producer_id < 0 {
            return;
        }
        let entry = self
            .map
            .entry(h.producer_id)
            .or_insert_with(|| ProducerEntry {
                epoch: h.producer_epoch,
                batches: VecDeque::new(),
                last_append_ms: now_ms,
            });
        if h.producer_epoch < entry.epoch {
            return;
        }
        Self::apply(entry, h, h.base_offset, now_ms);
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
                    coordinator_epoch: -1,
                    current_txn_first_offset: -1,
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
                },
            );
        }
        out
    }

    /// Add the producers of `older` (state as of an earlier offset) that this state does not
    /// know; what this state knows is newer.
    pub(crate) fn merge_older(&mut self, older: ProducerStates) {
        for (pid, entry) in older.map {
            self.map.entry(pid).or_insert(entry);
        }
    }

    /// Forget producers idle for longer than the expiration.
    pub(crate) fn expire(&mut self, now_ms: i64) {
        self.map
            .retain(|_, e| now_ms.saturating_sub(e.last_append_ms) < PRODUCER_EXPIRATION_MS);
    }

    /// Forget batches entirely below the log start offset (like Kafka, which evicts producers
    /// whose last offset is below it).
    pub(crate) fn truncate_head(&mut self, log_start: i64) {
        self.map
            .retain(|_, e| e.batches.back().is_none_or(|b| b.last_offset >= log_start));
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

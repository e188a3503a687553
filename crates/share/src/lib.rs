//! Share groups (KIP-932, "queues for Kafka"): the delivery state of the records of one
//! share partition (a topic partition as one share group consumes it), and the partition
//! assignor and membership of share groups ([`assign`], [`group`]). A pure state machine:
//! no I/O, no clock (every call is given the time), no locks.
//!
//! The broker serves the share-group APIs over this crate (`sluice-broker`'s `shares.rs`).
//!
//! # The model (Kafka 4.3's `SharePartition`)
//!
//! Records from the share-partition start offset (SPSO, [`SharePartition::start`]) up to the
//! end ([`SharePartition::end`], the first offset never acquired) are *in flight*, each in one
//! state with a delivery count:
//!
//! ```text
//!   Available --acquire (count + 1)--> Acquired(member, lock deadline)
//!   Acquired --ACCEPT--> Acknowledged            (terminal)
//!   Acquired --REJECT, GAP--> Archived           (terminal)
//!   Acquired --RELEASE, lock expiry, member gone--> Available, or Archived once the
//!                                                   delivery count reached the limit
//!   Acquired --RENEW--> Acquired (a new lock deadline)
//! ```
//!
//! Records past the end are available and never delivered. The start moves past every
//! terminal record at its head; offsets the log no longer has (below its start offset, or
//! missing from the batches fetched: compacted away) are archived. At most
//! [`Limits::max_in_flight`] offsets are in flight (`group.share.partition.max.record.locks`),
//! so the state held is bounded whatever the partition's size.
//!
//! State is kept as runs: maximal ranges of consecutive offsets in the same state with the
//! same delivery count, so that a batch acquired and acknowledged whole costs one entry.

use std::collections::BTreeMap;
use std::sync::Arc;

pub mod assign;
pub mod group;
pub mod records;

/// The limits of a share group (its group configs, or the broker's defaults).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// How long an acquisition lasts (`group.share.record.lock.duration.ms`).
    pub lock_ms: i64,
    /// Deliveries after which a released or expired record is archived
    /// (`group.share.delivery.count.limit`).
    pub delivery_limit: u16,
    /// Most offsets in flight (`group.share.partition.max.record.locks`).
    pub max_in_flight: i64,
}

impl Default for Limits {
    /// Kafka 4.3's defaults.
    fn default() -> Limits {
        Limits {
            lock_ms: 30_000,
            delivery_limit: 5,
            max_in_flight: 2_000,
        }
    }
}

/// The state of an in-flight record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum State {
    Available,
    /// Acquired by `member` until `until_ms`.
    Acquired {
        member: Arc<str>,
        until_ms: i64,
    },
    Acknowledged,
    Archived,
}

impl State {
    fn terminal(&self) -> bool {
        matches!(self, State::Acknowledged | State::Archived)
    }

    /// Kafka's `RecordState` id, as `__share_group_state` stores it (an acquired record is
    /// stored as available: an acquisition does not outlive the broker that granted it).
    pub fn persisted_id(&self) -> u8 {
        match self {
            State::Available | State::Acquired { .. } => 0,
            State::Acknowledged => 2,
            State::Archived => 4,
        }
    }

    /// The state a stored id stands for.
    pub fn from_persisted_id(id: u8) -> Option<State> {
        match id {
            0 => Some(State::Available),
            2 => Some(State::Acknowledged),
            4 => Some(State::Archived),
            _ => None,
        }
    }
}

/// How a ShareFetch acquires (`share_acquire_mode`, ShareFetch v2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcquireMode {
    /// Whole batches, until at least the records asked for (a batch may go past it).
    BatchOptimized,
    /// Exactly at most the records asked for.
    RecordLimit,
}

/// Acknowledgement types (ShareFetch / ShareAcknowledge `AcknowledgeTypes`).
pub const GAP: u8 = 0;
pub const ACCEPT: u8 = 1;
pub const RELEASE: u8 = 2;
pub const REJECT: u8 = 3;
pub const RENEW: u8 = 4;

/// Records acquired by one call: `first..=last`, delivered for the `delivery_count`th time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Acquired {
    pub first: i64,
    pub last: i64,
    pub delivery_count: u16,
}

/// Why an acknowledgement was refused. Nothing of a refused acknowledgement is applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AckError {
    /// A record is not acquired by this member (INVALID_RECORD_STATE).
    NotAcquired { offset: i64 },
    /// The types do not fit the range, or one is unknown (INVALID_REQUEST).
    BadTypes(String),
}

impl std::fmt::Display for AckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AckError::NotAcquired { offset } => {
                write!(
                    f,
                    "the record at offset {offset} is not acquired by this member"
                )
            }
            AckError::BadTypes(why) => f.write_str(why),
        }
    }
}

/// A run of consecutive offsets (from its key to `last`) in one state and delivery count.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Run {
    last: i64,
    state: State,
    count: u16,
}

/// One stored range: `first..=last` in state `state` (a [`State::persisted_id`]), delivered
/// `delivery_count` times. The form of `__share_group_state`'s state batches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateBatch {
    pub first: i64,
    pub last: i64,
    pub state: u8,
    pub delivery_count: u16,
}

/// What a share partition's durable state holds: its start offset and the state of the
/// records in flight (available and terminal ones; acquired ones as available).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub start: i64,
    pub batches: Vec<StateBatch>,
}

/// The delivery state of one share partition.
#[derive(Clone, Debug)]
pub struct SharePartition {
    limits: Limits,
    start: i64,
    end: i64,
    /// Cover `start..end` exactly, in order, without overlap; neighbours differ.
    runs: BTreeMap<i64, Run>,
}

impl SharePartition {
    /// A share partition with nothing in flight, starting at `start` (from
    /// `share.auto.offset.reset`: the log's start or end offset, or a reset's offset).
    pub fn new(limits: Limits, start: i64) -> SharePartition {
        SharePartition {
            limits,
            start,
            end: start,
            runs: BTreeMap::new(),
        }
    }

    /// A share partition as a snapshot stored it. Batches are taken in order; ones before
    /// the start, overlapping an earlier one or with an unknown state are left out (the
    /// records they name are then delivered again, never lost); offsets between batches are
    /// available.
    pub fn from_snapshot(limits: Limits, snapshot: &Snapshot) -> SharePartition {
        let mut p = SharePartition::new(limits, snapshot.start);
        for b in &snapshot.batches {
            let Some(state) = State::from_persisted_id(b.state) else {
                continue;
            };
            if b.first < p.end || b.last < b.first {
                continue;
            }
            if b.first > p.end {
                p.push(p.end, b.first - 1, State::Available, 0);
            }
            p.push(b.first, b.last, state, b.delivery_count);
        }
        p.advance();
        p
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Take up new limits (a group config changed): records already acquired keep their
    /// lock; records past the new window stay in flight until they complete.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// The share-partition start offset: every record before it is done with.
    pub fn start(&self) -> i64 {
        self.start
    }

    /// The first offset never acquired.
    pub fn end(&self) -> i64 {
        self.end
    }

    /// Where the next fetch should read the log from: the first available record in flight,
    /// or the end.
    pub fn fetch_offset(&self) -> i64 {
        self.runs
            .iter()
            .find(|(_, r)| r.state == State::Available)
            .map_or(self.end, |(first, _)| *first)
    }

    /// Where a fetch that has read the log up to `after` (exclusive) reads next: the first
    /// available record in flight at or after it, or else the end while the in-flight window
    /// has room there; `None` when nothing can be acquired there now. Past the end it is
    /// the end, never `after`: records read but not acquired (the window was full when they
    /// were read, and the start moved since) are read again, not taken for a gap in the log.
    /// A fetch stops when this is not past where its last read began.
    pub fn next_fetch_offset(&self, after: i64) -> Option<i64> {
        let holding = self.runs.range(..=after).next_back();
        let in_flight = holding
            .into_iter()
            .chain(self.runs.range(after.saturating_add(1)..))
            .find(|(_, r)| r.state == State::Available && r.last >= after)
            .map(|(first, _)| (*first).max(after));
        in_flight.or_else(|| {
            (self.end < self.start.saturating_add(self.limits.max_in_flight)).then_some(self.end)
        })
    }

    /// Whether a fetch could acquire anything: an available record in flight, or room past
    /// the end.
    pub fn can_acquire(&self) -> bool {
        self.fetch_offset() < self.end || self.end - self.start < self.limits.max_in_flight
    }

    /// The earliest lock deadline, if a record is acquired.
    pub fn next_deadline(&self) -> Option<i64> {
        self.runs
            .values()
            .filter_map(|r| match &r.state {
                State::Acquired { until_ms, .. } => Some(*until_ms),
                _ => None,
            })
            .min()
    }

    /// The state and delivery count of `offset` (None past the end or before the start).
    pub fn state_of(&self, offset: i64) -> Option<(State, u16)> {
        let (_, run) = self.runs.range(..=offset).next_back()?;
        (offset <= run.last && offset >= self.start).then(|| (run.state.clone(), run.count))
    }

    /// Acquire for `member` the available records among `batches` (the offset ranges of the
    /// batches a log read returned, in order), at most `max_records` of them (in
    /// [`AcquireMode::BatchOptimized`], whole batches until that many are reached). Offsets
    /// past the end that no batch holds (compacted away) are archived as the end passes
    /// them. Returns the ranges acquired, by delivery count.
    pub fn acquire(
        &mut self,
        member: &str,
        batches: &[(i64, i64)],
        max_records: i64,
        mode: AcquireMode,
        now_ms: i64,
    ) -> Vec<Acquired> {
        let from = self.fetch_offset();
        self.acquire_read(member, from, batches, max_records, mode, now_ms)
    }

    /// [`SharePartition::acquire`] from a log read that started at `read_from` (the
    /// [`SharePartition::fetch_offset`] when the read was made). Only available records from
    /// `read_from` up to the first batch read count as gone from the log: records released
    /// or expired below it while the read was under way are left available.
    pub fn acquire_read(
        &mut self,
        member: &str,
        read_from: i64,
        batches: &[(i64, i64)],
        max_records: i64,
        mode: AcquireMode,
        now_ms: i64,
    ) -> Vec<Acquired> {
        let member: Arc<str> = Arc::from(member);
        let acquired_state = State::Acquired {
            member,
            until_ms: now_ms.saturating_add(self.limits.lock_ms),
        };
        let window_end = self.start.saturating_add(self.limits.max_in_flight);
        // Available records in flight before the first batch read are gone from the log
        // (compacted away): the read started at the first available one.
        if let Some(&(first, _)) = batches.first() {
            let from = read_from.max(self.start);
            if from < first.min(self.end) {
                self.archive_available(from, first.min(self.end) - 1);
            }
        }
        let mut taken: i64 = 0;
        let mut out: Vec<Acquired> = Vec::new();
        for &(first, last) in batches {
            if taken >= max_records {
                break;
            }
            let first = first.max(self.start);
            if last < first {
                continue;
            }
            // What this batch may give: all of it in batch mode, else what is left to take.
            let mut left = match mode {
                AcquireMode::BatchOptimized => i64::MAX,
                AcquireMode::RecordLimit => max_records - taken,
            };
            // In flight: the available runs within the batch.
            let mut offset = first;
            while offset <= last.min(self.end - 1) && left > 0 {
                let (_, run) = self.run_at(offset);
                let run_last = run.last.min(last);
                if run.state == State::Available {
                    let upto = run_last.min(offset.saturating_add(left - 1));
                    let count = run.count.saturating_add(1);
                    self.set(offset, upto, acquired_state.clone(), count);
                    push_acquired(&mut out, offset, upto, count);
                    left -= upto - offset + 1;
                    taken += upto - offset + 1;
                    offset = upto + 1;
                } else {
                    offset = run_last + 1;
                }
            }
            // Past the end: new records, within the window.
            if left > 0 && last >= self.end && self.end < window_end {
                if first > self.end {
                    // Offsets no batch holds: gone from the log.
                    let gap_last = (first - 1).min(window_end - 1);
                    self.push(self.end, gap_last, State::Archived, 0);
                }
                let from = self.end.max(first);
                if from < window_end {
                    let upto = last.min(window_end - 1).min(from.saturating_add(left - 1));
                    self.push(from, upto, acquired_state.clone(), 1);
                    push_acquired(&mut out, from, upto, 1);
                    taken += upto - from + 1;
                }
            }
        }
        self.advance();
        out
    }

    /// Archive what of `acquired` (just returned by an acquisition) lies in `ranges` (in
    /// order): the batches of aborted transactions a read_committed share group never
    /// delivers, as Kafka archives them once acquired. Returns the rest of `acquired`.
    pub fn archive_acquired(
        &mut self,
        acquired: Vec<Acquired>,
        ranges: &[(i64, i64)],
    ) -> Vec<Acquired> {
        if ranges.is_empty() {
            return acquired;
        }
        let mut out = Vec::new();
        for a in acquired {
            let mut next = a.first;
            for &(first, last) in ranges {
                if last < next || first > a.last {
                    continue;
                }
                if first > next {
                    push_acquired(&mut out, next, first - 1, a.delivery_count);
                }
                let upto = last.min(a.last);
                self.set(first.max(next), upto, State::Archived, a.delivery_count);
                next = upto + 1;
            }
            if next <= a.last {
                push_acquired(&mut out, next, a.last, a.delivery_count);
            }
        }
        self.advance();
        out
    }

    /// Apply `member`'s acknowledgement of `first..=last`: `types` holds one type for the
    /// whole range, or one per offset. Every record of the range at or after the start must
    /// be acquired by `member`, or nothing is applied. Records before the start are done
    /// with already and are skipped, as Kafka skips them.
    pub fn acknowledge(
        &mut self,
        member: &str,
        first: i64,
        last: i64,
        types: &[u8],
        now_ms: i64,
    ) -> Result<(), AckError> {
        if last < first {
            return Err(AckError::BadTypes(format!(
                "the last offset {last} is before the first {first}"
            )));
        }
        let Some(len) = last.checked_sub(first).and_then(|d| d.checked_add(1)) else {
            return Err(AckError::BadTypes(format!(
                "the range {first}..={last} is too long"
            )));
        };
        if types.len() != 1 && types.len() as i64 != len {
            return Err(AckError::BadTypes(format!(
                "{} acknowledge types for {len} records",
                types.len()
            )));
        }
        if let Some(t) = types.iter().find(|t| **t > RENEW) {
            return Err(AckError::BadTypes(format!("unknown acknowledge type {t}")));
        }
        if last < self.start {
            return Ok(());
        }
        let from = first.max(self.start);
        if last >= self.end {
            return Err(AckError::NotAcquired {
                offset: from.max(self.end),
            });
        }
        let mut offset = from;
        while offset <= last {
            let (_, run) = self.run_at(offset);
            match &run.state {
                State::Acquired { member: m, .. } if &**m == member => offset = run.last + 1,
                _ => return Err(AckError::NotAcquired { offset }),
            }
        }
        let type_of = |o: i64| {
            types[if types.len() == 1 {
                0
            } else {
                (o - first) as usize
            }]
        };
        let mut offset = from;
        while offset <= last {
            // The longest stretch of one type within one run.
            let (_, run) = self.run_at(offset);
            let t = type_of(offset);
            let mut upto = offset;
            while upto < run.last.min(last) && type_of(upto + 1) == t {
                upto += 1;
            }
            let count = run.count;
            let state = match t {
                ACCEPT => State::Acknowledged,
                RELEASE => self.released(count),
                RENEW => match &run.state {
                    State::Acquired { member, .. } => State::Acquired {
                        member: member.clone(),
                        until_ms: now_ms.saturating_add(self.limits.lock_ms),
                    },
                    other => other.clone(),
                },
                _ => State::Archived,
            };
            self.set(offset, upto, state, count);
            offset = upto + 1;
        }
        self.advance();
        Ok(())
    }

    /// Release every record `member` holds (it left the group, or its share session ended).
    /// Returns whether anything changed.
    pub fn release_member(&mut self, member: &str) -> bool {
        self.release_where(|m, _| m == member)
    }

    /// Release every record whose lock deadline has passed at `now_ms`. Returns whether
    /// anything changed.
    pub fn expire(&mut self, now_ms: i64) -> bool {
        self.release_where(|_, until| until <= now_ms)
    }

    /// The log's start offset moved to `log_start` (retention, DeleteRecords): records
    /// before it are gone, acquired ones included.
    pub fn log_start_moved(&mut self, log_start: i64) {
        if log_start <= self.start {
            return;
        }
        if log_start >= self.end {
            self.runs.clear();
            self.start = log_start;
            self.end = log_start;
            return;
        }
        self.split_at(log_start);
        self.runs = self.runs.split_off(&log_start);
        self.start = log_start;
        self.advance();
    }

    /// What the durable state holds now.
    pub fn snapshot(&self) -> Snapshot {
        let mut batches: Vec<StateBatch> = Vec::new();
        for (first, run) in &self.runs {
            let state = run.state.persisted_id();
            match batches.last_mut() {
                Some(b) if b.state == state && b.delivery_count == run.count => b.last = run.last,
                _ => batches.push(StateBatch {
                    first: *first,
                    last: run.last,
                    state,
                    delivery_count: run.count,
                }),
            }
        }
        Snapshot {
            start: self.start,
            batches,
        }
    }

    // ---- internals ----------------------------------------------------------------

    fn released(&self, count: u16) -> State {
        if count >= self.limits.delivery_limit {
            State::Archived
        } else {
            State::Available
        }
    }

    fn release_where(&mut self, mut pick: impl FnMut(&str, i64) -> bool) -> bool {
        let picked: Vec<(i64, i64, u16)> = self
            .runs
            .iter()
            .filter_map(|(first, r)| match &r.state {
                State::Acquired { member, until_ms } if pick(member, *until_ms) => {
                    Some((*first, r.last, r.count))
                }
                _ => None,
            })
            .collect();
        for (first, last, count) in &picked {
            let state = self.released(*count);
            self.set(*first, *last, state, *count);
        }
        self.advance();
        !picked.is_empty()
    }

    /// The run holding `offset` (which must be in `start..end`).
    fn run_at(&self, offset: i64) -> (i64, Run) {
        let (first, run) = self
            .runs
            .range(..=offset)
            .next_back()
            .map(|(f, r)| (*f, r.clone()))
            .unwrap_or((
                offset,
                Run {
                    last: offset,
                    state: State::Archived,
                    count: 0,
                },
            ));
        debug_assert!(offset <= run.last, "offset {offset} past its run");
        (first, run)
    }

    /// Append `first..=last` (which must start at the end) in `state`.
    fn push(&mut self, first: i64, last: i64, state: State, count: u16) {
        debug_assert_eq!(first, self.end);
        if last < first {
            return;
        }
        self.runs.insert(first, Run { last, state, count });
        self.end = last + 1;
        self.merge_around(first);
    }

    /// Set `first..=last` (within `start..end`) to `state` and `count`.
    fn set(&mut self, first: i64, last: i64, state: State, count: u16) {
        self.split_at(first);
        self.split_at(last + 1);
        let inside: Vec<i64> = self.runs.range(first..=last).map(|(f, _)| *f).collect();
        for f in inside {
            self.runs.remove(&f);
        }
        self.runs.insert(first, Run { last, state, count });
        self.merge_around(first);
    }

    /// Make `offset` the first of a run, if it is inside one.
    fn split_at(&mut self, offset: i64) {
        let Some((&first, run)) = self.runs.range(..offset).next_back() else {
            return;
        };
        if run.last < offset {
            return;
        }
        let mut head = run.clone();
        let tail = Run {
            last: head.last,
            state: head.state.clone(),
            count: head.count,
        };
        head.last = offset - 1;
        self.runs.insert(first, head);
        self.runs.insert(offset, tail);
    }

    /// Join the run at `first` with equal neighbours.
    fn merge_around(&mut self, first: i64) {
        let mut first = first;
        if let Some((&prev, p)) = self.runs.range(..first).next_back() {
            let cur = &self.runs[&first];
            if p.last + 1 == first && p.state == cur.state && p.count == cur.count {
                let last = cur.last;
                self.runs.remove(&first);
                if let Some(p) = self.runs.get_mut(&prev) {
                    p.last = last;
                }
                first = prev;
            }
        }
        let cur = self.runs[&first].clone();
        let next_first = cur.last + 1;
        if let Some(n) = self.runs.get(&next_first).cloned() {
            if n.state == cur.state && n.count == cur.count {
                self.runs.remove(&next_first);
                if let Some(c) = self.runs.get_mut(&first) {
                    c.last = n.last;
                }
            }
        }
    }

    /// Move the start past the terminal records at the head.
    fn advance(&mut self) {
        while let Some((&first, run)) = self.runs.iter().next() {
            if !run.state.terminal() {
                self.start = first;
                return;
            }
            self.start = run.last + 1;
            self.runs.remove(&first);
        }
        self.end = self.end.max(self.start);
        self.start = self.end;
    }

    /// Archive the available records of `first..=last` (within `start..end`).
    fn archive_available(&mut self, first: i64, last: i64) {
        let available: Vec<(i64, i64, u16)> = self
            .runs
            .range(..=last)
            .filter(|(f, r)| r.last >= first && **f <= last && r.state == State::Available)
            .map(|(f, r)| ((*f).max(first), r.last.min(last), r.count))
            .collect();
        for (f, l, count) in available {
            self.set(f, l, State::Archived, count);
        }
    }
}

fn push_acquired(out: &mut Vec<Acquired>, first: i64, last: i64, count: u16) {
    match out.last_mut() {
        Some(a) if a.last + 1 == first && a.delivery_count == count => a.last = last,
        _ => out.push(Acquired {
            first,
            last,
            delivery_count: count,
        }),
    }
}

#[cfg(test)]
mod tests;

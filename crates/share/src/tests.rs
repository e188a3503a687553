use super::*;

const LIMITS: Limits = Limits {
    lock_ms: 1_000,
    delivery_limit: 3,
    max_in_flight: 100,
};

fn acquired(first: i64, last: i64, delivery_count: u16) -> Acquired {
    Acquired {
        first,
        last,
        delivery_count,
    }
}

fn state(p: &SharePartition, offset: i64) -> (State, u16) {
    p.state_of(offset).expect("in flight")
}

#[test]
fn acquire_acknowledge_and_the_start_moves() {
    let mut p = SharePartition::new(LIMITS, 0);
    let got = p.acquire("a", &[(0, 4), (5, 9)], 100, AcquireMode::BatchOptimized, 10);
    assert_eq!(got, vec![acquired(0, 9, 1)]);
    assert_eq!((p.start(), p.end(), p.fetch_offset()), (0, 10, 10));
    assert_eq!(p.next_deadline(), Some(1_010));
    // Another member finds nothing left to acquire in the same records.
    assert!(p
        .acquire("b", &[(0, 9)], 100, AcquireMode::BatchOptimized, 11)
        .is_empty());
    // Only the owner acknowledges; a refusal applies nothing.
    assert_eq!(
        p.acknowledge("b", 0, 4, &[ACCEPT], 12),
        Err(AckError::NotAcquired { offset: 0 })
    );
    assert_eq!(
        p.acknowledge("a", 8, 10, &[ACCEPT], 12),
        Err(AckError::NotAcquired { offset: 10 })
    );
    assert!(matches!(state(&p, 8).0, State::Acquired { .. }));
    p.acknowledge("a", 0, 4, &[ACCEPT], 12).unwrap();
    assert_eq!(p.start(), 5);
    p.acknowledge("a", 5, 9, &[ACCEPT], 12).unwrap();
    assert_eq!((p.start(), p.end()), (10, 10));
    assert_eq!(
        p.snapshot(),
        Snapshot {
            start: 10,
            batches: vec![]
        }
    );
    // Acknowledging records before the start again is no error (they are done with).
    assert_eq!(p.acknowledge("a", 0, 4, &[ACCEPT], 13), Ok(()));
}

#[test]
fn released_records_are_delivered_again_until_the_limit_then_archived() {
    let mut p = SharePartition::new(LIMITS, 0);
    for delivery in 1..=3u16 {
        let got = p.acquire("a", &[(0, 1)], 100, AcquireMode::RecordLimit, 0);
        assert_eq!(got, vec![acquired(0, 1, delivery)]);
        p.acknowledge("a", 0, 1, &[RELEASE], 0).unwrap();
    }
    // Delivered three times (the limit): released, it is archived, and the start moves on.
    assert_eq!((p.start(), p.end()), (2, 2));
    assert!(p
        .acquire("a", &[(0, 1)], 100, AcquireMode::RecordLimit, 0)
        .is_empty());
}

#[test]
fn expired_locks_and_departed_members_release_records() {
    let mut p = SharePartition::new(LIMITS, 0);
    p.acquire("a", &[(0, 4)], 100, AcquireMode::BatchOptimized, 0);
    p.acquire("b", &[(5, 9)], 100, AcquireMode::BatchOptimized, 500);
    assert!(!p.expire(999));
    assert!(p.expire(1_000));
    assert_eq!(state(&p, 0), (State::Available, 1));
    assert!(matches!(state(&p, 5).0, State::Acquired { .. }));
    assert_eq!(p.fetch_offset(), 0);
    // A renewal keeps b's records past their first deadline.
    p.acknowledge("b", 5, 9, &[RENEW], 1_400).unwrap();
    assert!(!p.expire(1_500));
    assert_eq!(p.next_deadline(), Some(2_400));
    // b leaves: its records are available again, with their delivery count.
    assert!(p.release_member("b"));
    assert_eq!(state(&p, 7), (State::Available, 1));
    let got = p.acquire("c", &[(0, 9)], 100, AcquireMode::BatchOptimized, 2_000);
    assert_eq!(got, vec![acquired(0, 9, 2)]);
}

#[test]
fn per_record_types_apply_each_to_its_record() {
    let mut p = SharePartition::new(LIMITS, 0);
    p.acquire("a", &[(0, 4)], 100, AcquireMode::BatchOptimized, 0);
    p.acknowledge("a", 0, 4, &[ACCEPT, RELEASE, REJECT, GAP, RENEW], 100)
        .unwrap();
    assert_eq!(p.start(), 1);
    assert_eq!(state(&p, 1), (State::Available, 1));
    assert_eq!(state(&p, 2), (State::Archived, 1));
    assert_eq!(state(&p, 3), (State::Archived, 1));
    assert!(matches!(
        state(&p, 4).0,
        State::Acquired {
            until_ms: 1_100,
            ..
        }
    ));
    assert_eq!(
        p.acknowledge("a", 4, 4, &[5], 0),
        Err(AckError::BadTypes("unknown acknowledge type 5".into()))
    );
    assert!(matches!(
        p.acknowledge("a", 3, 4, &[ACCEPT, ACCEPT, ACCEPT], 0),
        Err(AckError::BadTypes(_))
    ));
}

#[test]
fn record_limit_takes_exactly_batch_mode_takes_whole_batches() {
    let mut p = SharePartition::new(LIMITS, 0);
    let got = p.acquire("a", &[(0, 4), (5, 9)], 3, AcquireMode::RecordLimit, 0);
    assert_eq!(got, vec![acquired(0, 2, 1)]);
    assert_eq!((p.end(), p.fetch_offset()), (3, 3));
    let got = p.acquire("a", &[(3, 4), (5, 9)], 3, AcquireMode::BatchOptimized, 0);
    assert_eq!(
        got,
        vec![acquired(3, 9, 1)],
        "two whole batches: 2 then 7 records"
    );
}

#[test]
fn in_flight_records_are_bounded_by_the_window() {
    let limits = Limits {
        max_in_flight: 10,
        ..LIMITS
    };
    let mut p = SharePartition::new(limits, 0);
    let got = p.acquire("a", &[(0, 49)], 100, AcquireMode::BatchOptimized, 0);
    assert_eq!(got, vec![acquired(0, 9, 1)]);
    assert!(!p.can_acquire());
    assert!(p
        .acquire("b", &[(10, 49)], 100, AcquireMode::BatchOptimized, 0)
        .is_empty());
    p.acknowledge("a", 0, 4, &[ACCEPT], 0).unwrap();
    assert!(p.can_acquire());
    let got = p.acquire("b", &[(10, 49)], 100, AcquireMode::BatchOptimized, 0);
    assert_eq!(got, vec![acquired(10, 14, 1)]);
}

#[test]
fn offsets_missing_from_the_log_are_archived() {
    let mut p = SharePartition::new(LIMITS, 0);
    // Compacted away: 2-4 and 8 were never in a batch.
    let got = p.acquire(
        "a",
        &[(0, 1), (5, 7), (9, 9)],
        100,
        AcquireMode::BatchOptimized,
        0,
    );
    assert_eq!(
        got,
        vec![acquired(0, 1, 1), acquired(5, 7, 1), acquired(9, 9, 1)]
    );
    assert_eq!(state(&p, 3), (State::Archived, 0));
    p.acknowledge("a", 0, 1, &[ACCEPT], 0).unwrap();
    assert_eq!(p.start(), 5, "past the archived gap");
    // Released records that are gone when read again (compaction meanwhile) are archived.
    p.acknowledge("a", 5, 7, &[RELEASE], 0).unwrap();
    let got = p.acquire("a", &[(7, 7)], 100, AcquireMode::BatchOptimized, 0);
    assert_eq!(got, vec![acquired(7, 7, 2)]);
    assert_eq!(p.start(), 7, "5 and 6 archived, and the start past them");
}

#[test]
fn the_log_start_moving_ends_records_before_it() {
    let mut p = SharePartition::new(LIMITS, 0);
    p.acquire("a", &[(0, 9)], 100, AcquireMode::BatchOptimized, 0);
    p.log_start_moved(4);
    assert_eq!((p.start(), p.end()), (4, 10));
    assert!(p.state_of(3).is_none());
    assert_eq!(
        p.acknowledge("a", 2, 5, &[ACCEPT], 0),
        Ok(()),
        "records before the start are skipped"
    );
    assert_eq!(p.start(), 6);
    p.log_start_moved(50);
    assert_eq!((p.start(), p.end(), p.fetch_offset()), (50, 50, 50));
}

#[test]
fn a_snapshot_restores_the_state_with_acquired_records_available() {
    let mut p = SharePartition::new(LIMITS, 100);
    p.acquire("a", &[(100, 119)], 100, AcquireMode::BatchOptimized, 0);
    p.acknowledge("a", 100, 104, &[RELEASE], 0).unwrap();
    p.acknowledge("a", 105, 109, &[ACCEPT], 0).unwrap();
    p.acknowledge("a", 110, 112, &[REJECT], 0).unwrap();
    let snap = p.snapshot();
    assert_eq!(
        snap,
        Snapshot {
            start: 100,
            batches: vec![
                StateBatch {
                    first: 100,
                    last: 104,
                    state: 0,
                    delivery_count: 1
                },
                StateBatch {
                    first: 105,
                    last: 109,
                    state: 2,
                    delivery_count: 1
                },
                StateBatch {
                    first: 110,
                    last: 112,
                    state: 4,
                    delivery_count: 1
                },
                StateBatch {
                    first: 113,
                    last: 119,
                    state: 0,
                    delivery_count: 1
                },
            ],
        }
    );
    let q = SharePartition::from_snapshot(LIMITS, &snap);
    assert_eq!((q.start(), q.end()), (100, 120));
    assert_eq!(q.state_of(115), Some((State::Available, 1)));
    assert_eq!(q.snapshot(), snap);
    // A snapshot whose head is done with starts after it; bad batches are left out.
    let q = SharePartition::from_snapshot(
        LIMITS,
        &Snapshot {
            start: 0,
            batches: vec![
                StateBatch {
                    first: 0,
                    last: 4,
                    state: 2,
                    delivery_count: 1,
                },
                StateBatch {
                    first: 3,
                    last: 9,
                    state: 0,
                    delivery_count: 1,
                },
                StateBatch {
                    first: 10,
                    last: 12,
                    state: 9,
                    delivery_count: 1,
                },
                StateBatch {
                    first: 15,
                    last: 16,
                    state: 0,
                    delivery_count: 2,
                },
            ],
        },
    );
    assert_eq!((q.start(), q.end()), (5, 17));
    assert_eq!(q.state_of(12), Some((State::Available, 0)));
    assert_eq!(q.state_of(16), Some((State::Available, 2)));
}

// ---- against a model: one state per offset, the rules written out plainly ----

#[derive(Clone, Debug, PartialEq)]
enum M {
    Available,
    Acquired(usize, i64),
    Acknowledged,
    Archived,
}

struct Model {
    limits: Limits,
    /// State and delivery count of every offset from 0; offsets before `start` are done.
    at: Vec<(M, u16)>,
    start: i64,
    end: i64,
}

impl Model {
    fn terminal(m: &M) -> bool {
        matches!(m, M::Acknowledged | M::Archived)
    }

    fn advance(&mut self) {
        while self.start < self.end && Self::terminal(&self.at[self.start as usize].0) {
            self.start += 1;
        }
    }

    fn release(&self, count: u16) -> M {
        if count >= self.limits.delivery_limit {
            M::Archived
        } else {
            M::Available
        }
    }

    /// Batches are one per offset present in the log (`present`), read from the fetch offset.
    fn acquire(&mut self, member: usize, present: &[bool], max: i64, now: i64) -> i64 {
        let mut taken = 0;
        let window_end = self.start + self.limits.max_in_flight;
        let fetch = (self.start..self.end)
            .find(|o| self.at[*o as usize].0 == M::Available)
            .unwrap_or(self.end);
        let first_present = (fetch..present.len() as i64).find(|o| present[*o as usize]);
        let Some(first_present) = first_present else {
            return 0;
        };
        for o in fetch..first_present.min(self.end) {
            if self.at[o as usize].0 == M::Available {
                self.at[o as usize].0 = M::Archived;
            }
        }
        for o in first_present..present.len() as i64 {
            if taken >= max {
                break;
            }
            if !present[o as usize] {
                continue;
            }
            if o < self.end {
                if self.at[o as usize].0 == M::Available {
                    let c = self.at[o as usize].1 + 1;
                    self.at[o as usize] = (M::Acquired(member, now + self.limits.lock_ms), c);
                    taken += 1;
                }
                continue;
            }
            // Offsets between the end and this one are missing from the log: archived.
            while self.end < o.min(window_end) {
                self.at[self.end as usize] = (M::Archived, 0);
                self.end += 1;
            }
            if o < window_end {
                self.at[o as usize] = (M::Acquired(member, now + self.limits.lock_ms), 1);
                self.end = o + 1;
                taken += 1;
            }
        }
        self.advance();
        taken
    }

    fn acknowledge(&mut self, member: usize, first: i64, last: i64, t: u8, now: i64) -> bool {
        let from = first.max(self.start);
        if last < self.start {
            return true;
        }
        if last >= self.end {
            return false;
        }
        if (from..=last).any(|o| !matches!(self.at[o as usize].0, M::Acquired(m, _) if m == member))
        {
            return false;
        }
        for o in from..=last {
            let c = self.at[o as usize].1;
            self.at[o as usize].0 = match t {
                ACCEPT => M::Acknowledged,
                RELEASE => self.release(c),
                RENEW => M::Acquired(member, now + self.limits.lock_ms),
                _ => M::Archived,
            };
        }
        self.advance();
        true
    }

    fn release_where(&mut self, pick: impl Fn(usize, i64) -> bool) {
        for o in self.start..self.end {
            if let (M::Acquired(m, until), c) = self.at[o as usize].clone() {
                if pick(m, until) {
                    self.at[o as usize].0 = self.release(c);
                }
            }
        }
        self.advance();
    }
}

/// A small deterministic generator (xorshift), so that a failure repeats.
struct Rng(u64);

impl Rng {
    fn next(&mut self, below: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % below
    }
}

#[test]
fn random_operations_agree_with_the_model() {
    const N: usize = 400;
    const MEMBERS: [&str; 3] = ["a", "b", "c"];
    for seed in 1..=300u64 {
        let mut rng = Rng(seed * 0x9E37_79B9_7F4A_7C15);
        let limits = Limits {
            lock_ms: 50,
            delivery_limit: 1 + rng.next(4) as u16,
            max_in_flight: 5 + rng.next(60) as i64,
        };
        let present: Vec<bool> = (0..N).map(|_| rng.next(10) != 0).collect();
        let mut p = SharePartition::new(limits, 0);
        let mut m = Model {
            limits,
            at: vec![(M::Available, 0); N],
            start: 0,
            end: 0,
        };
        let mut now = 0;
        for step in 0..200 {
            now += rng.next(20) as i64;
            let member = rng.next(3) as usize;
            let ctx = format!("seed {seed} step {step}");
            match rng.next(6) {
                0 | 1 => {
                    let max = 1 + rng.next(30) as i64;
                    // One-offset batches over what is present from the fetch offset.
                    let fetch = p.fetch_offset();
                    let batches: Vec<(i64, i64)> = (fetch..N as i64)
                        .filter(|o| present[*o as usize])
                        .map(|o| (o, o))
                        .collect();
                    let got = p.acquire(
                        MEMBERS[member],
                        &batches,
                        max,
                        AcquireMode::RecordLimit,
                        now,
                    );
                    let n: i64 = got.iter().map(|a| a.last - a.first + 1).sum();
                    let expected = m.acquire(member, &present, max, now);
                    assert_eq!(n, expected, "{ctx}: records acquired");
                }
                2 => {
                    let first = m.start + rng.next(10) as i64 - 2;
                    let last = first + rng.next(8) as i64;
                    let t = [ACCEPT, RELEASE, REJECT, GAP, RENEW][rng.next(5) as usize];
                    let ok = p
                        .acknowledge(MEMBERS[member], first, last, &[t], now)
                        .is_ok();
                    assert_eq!(
                        ok,
                        m.acknowledge(member, first, last, t, now),
                        "{ctx}: ack {first}-{last} type {t}"
                    );
                }
                3 => {
                    p.expire(now);
                    m.release_where(|_, until| until <= now);
                }
                4 => {
                    p.release_member(MEMBERS[member]);
                    m.release_where(|mm, _| mm == member);
                }
                _ => {
                    let q = SharePartition::from_snapshot(limits, &p.snapshot());
                    assert_eq!(q.snapshot(), p.snapshot(), "{ctx}: snapshot round trip");
                }
            }
            assert_eq!(
                (p.start(), p.end()),
                (m.start, m.end),
                "{ctx}: start and end"
            );
            for o in m.start..m.end {
                let (ms, mc) = &m.at[o as usize];
                let (ps, pc) = p
                    .state_of(o)
                    .unwrap_or_else(|| panic!("{ctx}: {o} in flight"));
                let same = match (ms, &ps) {
                    (M::Available, State::Available)
                    | (M::Acknowledged, State::Acknowledged)
                    | (M::Archived, State::Archived) => true,
                    (M::Acquired(mm, mu), State::Acquired { member, until_ms }) => {
                        MEMBERS[*mm] == &**member && mu == until_ms
                    }
                    _ => false,
                };
                assert!(
                    same && *mc == pc,
                    "{ctx}: offset {o}: {ms:?}/{mc} vs {ps:?}/{pc}"
                );
            }
            assert!(p.end() - p.start() <= limits.max_in_flight, "{ctx}: window");
        }
    }
}

/// Records released while a fetch's read was under way are not taken for records compacted
/// away when the read's batches start after them: they stay available, delivered again.
#[test]
fn a_release_during_a_read_leaves_the_records_available() {
    let mut p = SharePartition::new(Limits::default(), 0);
    p.acquire("x", &[(0, 9)], 100, AcquireMode::BatchOptimized, 0);
    // Y's read starts at the end (10); meanwhile X releases 0..9.
    let read_from = p.fetch_offset();
    p.acknowledge("x", 0, 9, &[RELEASE], 1).unwrap();
    let got = p.acquire_read(
        "y",
        read_from,
        &[(10, 19)],
        100,
        AcquireMode::BatchOptimized,
        2,
    );
    assert_eq!(got.len(), 1);
    assert_eq!((got[0].first, got[0].last), (10, 19));
    assert_eq!(p.state_of(0), Some((State::Available, 1)));
    assert_eq!(p.start(), 0);
}

/// An acknowledgement whose range overflows is refused, not a panic.
#[test]
fn an_overflowing_range_is_refused() {
    let mut p = SharePartition::new(Limits::default(), 0);
    assert!(matches!(
        p.acknowledge("x", i64::MIN, 5, &[ACCEPT], 0),
        Err(AckError::BadTypes(_))
    ));
}

#[test]
fn the_next_read_skips_what_others_hold_and_stops_at_the_window() {
    let mut p = SharePartition::new(LIMITS, 0);
    assert_eq!(p.next_fetch_offset(0), Some(0));
    // a holds 0..=9, b 10..=19; a releases 3..=4.
    p.acquire("a", &[(0, 9)], 100, AcquireMode::BatchOptimized, 10);
    p.acquire("b", &[(10, 19)], 100, AcquireMode::BatchOptimized, 10);
    p.acknowledge("a", 3, 4, &[RELEASE], 11).unwrap();
    // From before, at and inside the released run: its first offset not yet read.
    assert_eq!(p.next_fetch_offset(0), Some(3));
    assert_eq!(p.next_fetch_offset(4), Some(4));
    // Past it, what b holds is skipped: the end.
    assert_eq!(p.next_fetch_offset(5), Some(20));
    // Past the end, reading starts again at the end.
    assert_eq!(p.next_fetch_offset(50), Some(20));
    // Filling the window (a read from the end) leaves only the released records.
    p.acquire_read("c", 20, &[(20, 99)], 100, AcquireMode::BatchOptimized, 12);
    assert_eq!(p.next_fetch_offset(0), Some(3));
    assert_eq!(p.next_fetch_offset(5), None);
}

#[test]
fn records_read_past_a_full_window_are_read_again_not_archived() {
    // The head of the log was compacted away (0..=79): the first read archives it and fills
    // the window (start + 100) up to 99; the start then moves to 80, so 100.. fit, but the
    // batches 100..=119 of that read were not taken.
    let mut p = SharePartition::new(LIMITS, 0);
    let read = [(80, 89), (90, 99), (100, 109), (110, 119)];
    let got = p.acquire_read("a", 0, &read, 500, AcquireMode::BatchOptimized, 0);
    assert_eq!(got, vec![acquired(80, 99, 1)]);
    assert_eq!((p.start(), p.end()), (80, 100));
    // The next read starts at the end, not after what was read.
    assert_eq!(p.next_fetch_offset(120), Some(100));
    let got = p.acquire_read(
        "a",
        100,
        &[(100, 109), (110, 119)],
        500,
        AcquireMode::BatchOptimized,
        0,
    );
    assert_eq!(got, vec![acquired(100, 119, 1)]);
}

#[test]
fn aborted_batches_are_archived_once_acquired() {
    let mut p = SharePartition::new(LIMITS, 0);
    let got = p.acquire(
        "a",
        &[(0, 4), (5, 9), (10, 14), (15, 19)],
        100,
        AcquireMode::BatchOptimized,
        0,
    );
    assert_eq!(got, vec![acquired(0, 19, 1)]);
    // Batches 0..=4 and 10..=14 were aborted; 20..=29 lies outside what was acquired.
    let kept = p.archive_acquired(got, &[(0, 4), (10, 14), (20, 29)]);
    assert_eq!(kept, vec![acquired(5, 9, 1), acquired(15, 19, 1)]);
    assert_eq!(state(&p, 12), (State::Archived, 1));
    assert!(matches!(state(&p, 7).0, State::Acquired { .. }));
    // The start moved past the archived head.
    assert_eq!(p.start(), 5);
    p.acknowledge("a", 5, 9, &[ACCEPT], 1).unwrap();
    p.acknowledge("a", 15, 19, &[ACCEPT], 1).unwrap();
    assert_eq!(p.start(), 20);
}

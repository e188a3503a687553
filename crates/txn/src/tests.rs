#![allow(clippy::unwrap_used)]

use super::*;
use crate::records::{decode_key, decode_value, TxnValue};

const TID: &str = "my-txn";
const COORD_EPOCH: i32 = 5;
const MAX: i16 = i16::MAX;

/// A coordinator with `TID`'s partition loaded, a producer-id allocator and the log of
/// every record returned (what the driver would have appended).
struct H {
    c: Coordinator,
    next_pid: i64,
    log: Vec<Record>,
    now: i64,
}

impl H {
    fn new(transaction_version: i16) -> H {
        let mut c = Coordinator::new(TxnConfig {
            transaction_version,
            ..TxnConfig::default()
        });
        let p = c.partition_for(TID);
        assert_eq!(p, 45); // Kafka: Utils.abs("my-txn".hashCode) % 50
        let loaded = c.load(p, COORD_EPOCH, Vec::new(), 0);
        assert_eq!(loaded, Loaded::default());
        H {
            c,
            next_pid: 1000,
            log: Vec::new(),
            now: 1_000_000,
        }
    }

    fn keep(&mut self, e: &Effects) {
        self.log.extend(e.records.iter().cloned());
    }

    fn init(&mut self, expected: Option<(i64, i16)>) -> (Result<(i64, i16), TxnError>, Effects) {
        let mut n = self.next_pid;
        let r = self
            .c
            .init_producer_id(TID, 60_000, expected, self.now, &mut || {
                n += 1;
                Ok(n - 1)
            });
        self.next_pid = n;
        self.keep(&r.1);
        r
    }

    fn add(&mut self, pid: i64, epoch: i16, parts: &[(&str, i32)]) -> Result<Effects, TxnError> {
        self.add_as(pid, epoch, parts, false, false).map(|(_, e)| e)
    }

    fn add_as(
        &mut self,
        pid: i64,
        epoch: i16,
        parts: &[(&str, i32)],
        verify_only: bool,
        tv2: bool,
    ) -> Result<(Vec<PartitionResult>, Effects), TxnError> {
        let parts: Vec<TxnPartition> = parts.iter().map(|(t, p)| (t.to_string(), *p)).collect();
        let (r, e) = self
            .c
            .add_partitions(TID, pid, epoch, &parts, verify_only, tv2, self.now);
        self.keep(&e);
        r.map(|a| (a, e))
    }

    fn end(
        &mut self,
        pid: i64,
        epoch: i16,
        commit: bool,
        tv2: bool,
    ) -> (Result<(i64, i16), TxnError>, Effects) {
        let mut n = self.next_pid;
        let r = self
            .c
            .end_txn(TID, pid, epoch, commit, tv2, self.now, &mut || {
                n += 1;
                Ok(n - 1)
            });
        self.next_pid = n;
        self.keep(&r.1);
        r
    }

    fn tick(&mut self) -> Effects {
        let mut n = self.next_pid;
        let e = self.c.tick(self.now, &mut || {
            n += 1;
            Ok(n - 1)
        });
        self.next_pid = n;
        self.keep(&e);
        e
    }

    fn markers_done(&mut self, job: &MarkerJob) -> Effects {
        let e = self.c.markers_written(job, self.now);
        self.keep(&e);
        e
    }

    fn view(&self) -> TxnView {
        self.c.describe(TID, self.now).unwrap()
    }

    /// Reload the partition from the log written so far.
    fn reload(&mut self, coordinator_epoch: i32) -> Loaded {
        let p = self.c.partition_for(TID);
        self.c.unload(p);
        assert!(!self.c.is_loaded(p));
        let recs = self
            .log
            .iter()
            .filter(|r| r.partition == p)
            .map(|r| (r.key.clone(), r.value.clone()));
        let loaded = self
            .c
            .load(p, coordinator_epoch, recs.collect::<Vec<_>>(), self.now);
        self.keep(&loaded.effects);
        loaded
    }
}

/// The one record of `e`, decoded.
fn value(e: &Effects) -> TxnValue {
    assert_eq!(e.records.len(), 1, "{e:?}");
    let r = &e.records[0];
    assert_eq!(r.partition, 45);
    assert_eq!(decode_key(&r.key).unwrap().as_deref(), Some(TID));
    decode_value(r.value.as_ref().unwrap()).unwrap()
}

fn tps(v: &[(&str, i32)]) -> Vec<TxnPartition> {
    v.iter().map(|(t, p)| (t.to_string(), *p)).collect()
}

/// Put `TID` into a given state by loading a crafted record.
fn h_with(tv: i16, v: TxnValue) -> H {
    let mut h = H::new(tv);
    let rec = Record {
        partition: 45,
        key: records::key(TID),
        value: Some(records::encode_value(&v, 1)),
    };
    h.log.push(rec);
    h.reload(COORD_EPOCH);
    h
}

fn ongoing_at(pid: i64, epoch: i16, start_ms: i64) -> TxnValue {
    TxnValue {
        producer_id: pid,
        previous_producer_id: -1,
        next_producer_id: -1,
        producer_epoch: epoch,
        timeout_ms: 60_000,
        state: TxnState::Ongoing,
        partitions: tps(&[("t", 0)]).into_iter().collect(),
        last_update_ms: start_ms,
        start_ms,
        client_transaction_version: 0,
    }
}

// ---- states ----

#[test]
fn state_ids_names_and_transitions_are_kafkas() {
    for (i, s) in TxnState::ALL.iter().enumerate() {
        assert_eq!(s.id(), i as i8);
        assert_eq!(TxnState::from_id(i as i8), Some(*s));
        assert_eq!(TxnState::from_name(s.name()), Some(*s));
    }
    assert_eq!(TxnState::from_id(8), None);
    assert_eq!(TxnState::from_name("ongoing"), None);
    use TxnState::*;
    assert!(Ongoing.may_follow(Empty) && Ongoing.may_follow(CompleteAbort));
    assert!(!Ongoing.may_follow(PrepareCommit));
    assert!(PrepareCommit.may_follow(Ongoing) && !PrepareCommit.may_follow(Empty));
    assert!(CompleteCommit.may_follow(PrepareCommit) && !CompleteCommit.may_follow(PrepareAbort));
    assert!(CompleteAbort.may_follow(PrepareAbort) && !CompleteAbort.may_follow(Ongoing));
    assert!(Empty.may_follow(CompleteCommit) && !Empty.may_follow(Ongoing));
    assert!(Dead.may_follow(Empty) && !Dead.may_follow(Ongoing));
    assert!(PrepareEpochFence.may_follow(Ongoing) && PrepareAbort.may_follow(PrepareEpochFence));
    assert!(Empty.is_expiration_allowed() && !Ongoing.is_expiration_allowed());
}

// ---- InitProducerId ----

#[test]
fn init_new_id_then_reinit_bumps_and_fences_the_old_producer() {
    let mut h = H::new(2);
    let (r, e) = h.init(None);
    assert_eq!(r, Ok((1000, 0)));
    let v = value(&e);
    assert_eq!(
        (
            v.producer_id,
            v.producer_epoch,
            v.state,
            v.start_ms,
            v.timeout_ms
        ),
        (1000, 0, TxnState::Empty, -1, 60_000)
    );
    assert!(e.markers.is_empty());

    let (r, e) = h.init(None);
    assert_eq!(r, Ok((1000, 1)));
    assert_eq!(value(&e).producer_epoch, 1);

    // The old producer is fenced everywhere.
    assert_eq!(
        h.add(1000, 0, &[("t", 0)]).unwrap_err(),
        TxnError::ProducerFenced
    );
    assert_eq!(h.end(1000, 0, true, false).0, Err(TxnError::ProducerFenced));
    assert_eq!(h.end(1000, 0, false, true).0, Err(TxnError::ProducerFenced));
    // Another producer id is not this transactional id's.
    assert_eq!(
        h.add(999, 1, &[("t", 0)]).unwrap_err(),
        TxnError::InvalidProducerIdMapping
    );
}

#[test]
fn init_checks_its_arguments() {
    let mut h = H::new(2);
    let c = &mut h.c;
    let mut pid = || Ok(1);
    assert_eq!(
        c.init_producer_id(TID, 0, None, 0, &mut pid).0,
        Err(TxnError::InvalidTransactionTimeout)
    );
    assert_eq!(
        c.init_producer_id(TID, 900_001, None, 0, &mut pid).0,
        Err(TxnError::InvalidTransactionTimeout)
    );
    assert!(matches!(
        c.init_producer_id("", 1000, None, 0, &mut pid).0,
        Err(TxnError::InvalidRequest(_))
    ));
    // "txn-1" lives in partition 10, not loaded.
    assert_eq!(
        c.init_producer_id("txn-1", 1000, None, 0, &mut pid).0,
        Err(TxnError::NotCoordinator)
    );
    let mut failing = || Err("no block".to_string());
    assert_eq!(
        c.init_producer_id(TID, 1000, None, 0, &mut failing).0,
        Err(TxnError::ProducerIdAllocation("no block".into()))
    );
    // Nothing was kept for the failed new id.
    assert_eq!(c.describe(TID, 0), Err(TxnError::TransactionalIdNotFound));
}

#[test]
fn reinit_while_ongoing_aborts_with_a_bumped_epoch_then_answers_concurrent_until_done() {
    for tv in [1, 2] {
        let mut h = H::new(tv);
        let (pid, epoch) = h.init(None).0.unwrap();
        h.add(pid, epoch, &[("t", 0), ("t", 1)]).unwrap();

        let (r, e) = h.init(None);
        assert_eq!(r, Err(TxnError::ConcurrentTransactions));
        let v = value(&e);
        // TV1: fenced epoch = 1. TV2 (server): fence + the abort's own bump = 2.
        let marker_epoch = if tv >= 2 { 2 } else { 1 };
        assert_eq!(
            (v.state, v.producer_epoch),
            (TxnState::PrepareAbort, marker_epoch)
        );
        assert_eq!(
            e.markers,
            vec![MarkerJob {
                transactional_id: TID.into(),
                producer_id: pid,
                producer_epoch: marker_epoch,
                coordinator_epoch: COORD_EPOCH,
                commit: false,
                partitions: tps(&[("t", 0), ("t", 1)]),
            }]
        );
        // Retries wait for the markers.
        assert_eq!(
            h.init(None),
            (Err(TxnError::ConcurrentTransactions), Effects::default())
        );
        // The fenced producer cannot commit.
        assert_eq!(
            h.end(pid, epoch, true, false).0,
            Err(TxnError::ProducerFenced)
        );

        let done = h.markers_done(&e.markers[0]);
        assert_eq!(value(&done).state, TxnState::CompleteAbort);
        assert_eq!(h.init(None).0, Ok((pid, marker_epoch + 1)));
    }
}

#[test]
fn init_with_exhausted_epoch_takes_a_new_producer_id() {
    let mut v = ongoing_at(77, MAX - 1, 0);
    v.state = TxnState::CompleteCommit;
    v.partitions.clear();
    let mut h = h_with(2, v);
    let (r, e) = h.init(None);
    assert_eq!(r, Ok((1000, 0)));
    let v = value(&e);
    assert_eq!(
        (v.producer_id, v.producer_epoch, v.previous_producer_id),
        (1000, 0, 77)
    );
}

#[test]
fn kip360_expected_producer_id_and_epoch() {
    let mut h = H::new(2);
    let (pid, _) = h.init(None).0.unwrap(); // epoch 0
                                            // The producer recovers: its own id and epoch -> bump.
    assert_eq!(h.init(Some((pid, 0))).0, Ok((pid, 1)));
    // The same request again (the answer was lost): no second bump.
    let (r, e) = h.init(Some((pid, 0)));
    assert_eq!(r, Ok((pid, 1)));
    assert_eq!(value(&e).producer_epoch, 1);
    // A stale epoch, or a foreign producer id: fenced.
    assert_eq!(h.init(Some((pid, 7))).0, Err(TxnError::ProducerFenced));
    assert_eq!(h.init(Some((4242, 1))).0, Err(TxnError::ProducerFenced));
    // A new transactional id accepts any expected id (UNKNOWN_PRODUCER_ID recovery).
    let mut h2 = H::new(2);
    assert_eq!(h2.init(Some((4242, 3))).0, Ok((1000, 0)));
}

#[test]
fn kip360_retry_after_a_rotation() {
    let mut v = ongoing_at(77, MAX - 1, 0);
    v.state = TxnState::CompleteAbort;
    v.partitions.clear();
    let mut h = h_with(2, v);
    // The producer at the exhausted epoch asks: a new producer id.
    assert_eq!(h.init(Some((77, MAX - 1))).0, Ok((1000, 0)));
    // Its retry with the old id (the answer was lost) gets the same answer again.
    assert_eq!(h.init(Some((77, MAX - 1))).0, Ok((1000, 0)));
    // The producer with the new id moves on.
    assert_eq!(h.init(Some((1000, 0))).0, Ok((1000, 1)));
}

// ---- AddPartitionsToTxn ----

#[test]
fn add_partitions_in_every_state() {
    let mut h = H::new(2);
    let unknown = h.add(1, 0, &[("t", 0)]);
    assert_eq!(unknown.unwrap_err(), TxnError::InvalidProducerIdMapping);
    let (pid, epoch) = h.init(None).0.unwrap();

    // Empty -> Ongoing, start time set.
    h.now = 2_000_000;
    let e = h.add(pid, epoch, &[("t", 0)]).unwrap();
    let v = value(&e);
    assert_eq!((v.state, v.start_ms), (TxnState::Ongoing, 2_000_000));
    // Ongoing + known partitions: nothing to write.
    assert!(h.add(pid, epoch, &[("t", 0)]).unwrap().is_empty());
    // Ongoing + new partitions: the union, same start.
    h.now += 10;
    let v = value(&h.add(pid, epoch, &[("u", 3)]).unwrap());
    assert_eq!(
        v.partitions,
        tps(&[("t", 0), ("u", 3)]).into_iter().collect()
    );
    assert_eq!((v.start_ms, v.last_update_ms), (2_000_000, 2_000_010));

    // PrepareCommit -> concurrent.
    let (_, e) = h.end(pid, epoch, true, false);
    assert_eq!(
        h.add(pid, epoch, &[("t", 9)]).unwrap_err(),
        TxnError::ConcurrentTransactions
    );
    h.markers_done(&e.markers[0]);
    // CompleteCommit -> Ongoing with only the new partitions and a new start.
    h.now += 10;
    let v = value(&h.add(pid, epoch, &[("v", 1)]).unwrap());
    assert_eq!(v.state, TxnState::Ongoing);
    assert_eq!(v.partitions, tps(&[("v", 1)]).into_iter().collect());
    assert_eq!(v.start_ms, 2_000_020);

    // PrepareAbort -> concurrent; CompleteAbort -> Ongoing.
    let (_, e) = h.end(pid, epoch, false, false);
    assert_eq!(
        h.add(pid, epoch, &[("t", 9)]).unwrap_err(),
        TxnError::ConcurrentTransactions
    );
    h.markers_done(&e.markers[0]);
    assert_eq!(
        value(&h.add(pid, epoch, &[("w", 0)]).unwrap()).state,
        TxnState::Ongoing
    );
}

#[test]
fn verify_only_answers_without_writing() {
    let mut h = H::new(2);
    let (pid, epoch) = h.init(None).0.unwrap();
    // Empty: nothing is in the transaction.
    let (a, e) = h.add_as(pid, epoch, &[("t", 0)], true, false).unwrap();
    assert!(e.is_empty());
    assert_eq!(
        a,
        vec![(("t".into(), 0), Err(TxnError::TransactionAbortable))]
    );

    h.add(pid, epoch, &[("t", 0)]).unwrap();
    let (a, e) = h
        .add_as(pid, epoch, &[("t", 0), ("t", 1)], true, false)
        .unwrap();
    assert!(e.is_empty());
    assert_eq!(
        a,
        vec![
            (("t".into(), 0), Ok(())),
            (("t".into(), 1), Err(TxnError::TransactionAbortable))
        ]
    );
    assert_eq!(
        h.add_as(pid, epoch + 1, &[("t", 0)], true, false)
            .unwrap_err(),
        TxnError::ProducerFenced
    );
    assert_eq!(
        h.add_as(pid + 1, epoch, &[("t", 0)], true, false)
            .unwrap_err(),
        TxnError::InvalidProducerIdMapping
    );
    assert!(h.end(pid, epoch, true, false).0.is_ok());
    assert_eq!(
        h.add_as(pid, epoch, &[("t", 0)], true, false).unwrap_err(),
        TxnError::ConcurrentTransactions
    );
}

// ---- EndTxn ----

#[test]
fn end_txn_tv1_commit_abort_and_retries() {
    let mut h = H::new(2);
    let (pid, epoch) = h.init(None).0.unwrap();
    // Nothing to end in Empty.
    assert!(matches!(
        h.end(pid, epoch, true, false).0,
        Err(TxnError::InvalidTxnState(_))
    ));
    assert!(matches!(
        h.end(pid, epoch, false, false).0,
        Err(TxnError::InvalidTxnState(_))
    ));

    h.add(pid, epoch, &[("t", 1), ("t", 0)]).unwrap();
    let (r, e) = h.end(pid, epoch, true, false);
    assert_eq!(r, Ok((pid, epoch)));
    let v = value(&e);
    assert_eq!(
        (v.state, v.producer_epoch),
        (TxnState::PrepareCommit, epoch)
    );
    assert_eq!(v.client_transaction_version, 0);
    let job = e.markers[0].clone();
    assert_eq!(
        (
            job.producer_id,
            job.producer_epoch,
            job.commit,
            job.partitions.clone()
        ),
        (pid, epoch, true, tps(&[("t", 0), ("t", 1)]))
    );
    // While the markers are written: a retry waits, the other result is invalid.
    assert_eq!(
        h.end(pid, epoch, true, false).0,
        Err(TxnError::ConcurrentTransactions)
    );
    assert!(matches!(
        h.end(pid, epoch, false, false).0,
        Err(TxnError::InvalidTxnState(_))
    ));
    assert!(matches!(
        h.init(None).0,
        Err(TxnError::ConcurrentTransactions)
    ));

    let done = h.markers_done(&job);
    let v = value(&done);
    assert_eq!(
        (v.state, v.producer_epoch),
        (TxnState::CompleteCommit, epoch)
    );
    assert!(v.partitions.is_empty());
    // The job again changes nothing.
    assert!(h.markers_done(&job).is_empty());
    // A retry after completion succeeds without writing; the other result is invalid.
    assert_eq!(
        h.end(pid, epoch, true, false),
        (Ok((pid, epoch)), Effects::default())
    );
    assert!(matches!(
        h.end(pid, epoch, false, false).0,
        Err(TxnError::InvalidTxnState(_))
    ));

    // Abort.
    h.add(pid, epoch, &[("t", 0)]).unwrap();
    let (_, e) = h.end(pid, epoch, false, false);
    assert_eq!(value(&e).state, TxnState::PrepareAbort);
    assert_eq!(
        h.end(pid, epoch, false, false).0,
        Err(TxnError::ConcurrentTransactions)
    );
    assert!(matches!(
        h.end(pid, epoch, true, false).0,
        Err(TxnError::InvalidTxnState(_))
    ));
    assert_eq!(
        value(&h.markers_done(&e.markers[0])).state,
        TxnState::CompleteAbort
    );
    assert_eq!(h.end(pid, epoch, false, false).0, Ok((pid, epoch)));
    assert!(matches!(
        h.end(pid, epoch, true, false).0,
        Err(TxnError::InvalidTxnState(_))
    ));
    // An unknown id.
    let mut h = H::new(2);
    assert_eq!(
        h.end(1, 0, true, false).0,
        Err(TxnError::InvalidProducerIdMapping)
    );
    assert_eq!(
        h.end(1, 0, false, true).0,
        Err(TxnError::InvalidProducerIdMapping)
    );
}

#[test]
fn end_txn_tv2_bumps_the_epoch_and_answers_retries() {
    let mut h = H::new(2);
    let (pid, epoch) = h.init(None).0.unwrap();
    h.add_as(pid, epoch, &[("t", 0)], false, true).unwrap();
    let (r, e) = h.end(pid, epoch, true, true);
    assert_eq!(r, Ok((pid, epoch + 1)));
    let v = value(&e);
    assert_eq!(
        (v.state, v.producer_epoch, v.client_transaction_version),
        (TxnState::PrepareCommit, epoch + 1, 2)
    );
    // The markers carry the bumped epoch.
    assert_eq!(e.markers[0].producer_epoch, epoch + 1);
    // The retry with the old epoch waits for the markers; the old producer's add is fenced.
    assert_eq!(
        h.end(pid, epoch, true, true).0,
        Err(TxnError::ConcurrentTransactions)
    );
    assert!(matches!(
        h.end(pid, epoch, false, true).0,
        Err(TxnError::InvalidTxnState(_))
    ));
    assert_eq!(
        h.end(pid, epoch + 1, true, true).0,
        Err(TxnError::ProducerFenced)
    );
    h.markers_done(&e.markers[0]);
    assert_eq!(h.view().state, TxnState::CompleteCommit);
    assert_eq!(h.view().producer_epoch, epoch + 1);

    // Kafka's table for CompleteCommit under TV2.
    assert_eq!(
        h.end(pid, epoch, true, true),
        (Ok((pid, epoch + 1)), Effects::default())
    );
    assert!(matches!(
        h.end(pid, epoch, false, true).0,
        Err(TxnError::InvalidTxnState(_))
    ));
    assert!(matches!(
        h.end(pid, epoch + 1, true, true).0,
        Err(TxnError::InvalidTxnState(_))
    ));
    assert_eq!(
        h.end(pid, epoch - 1, true, true).0,
        Err(TxnError::ProducerFenced)
    );
    // An abort at the current epoch bumps again, with nothing to abort: done at once.
    let (r, e) = h.end(pid, epoch + 1, false, true);
    assert_eq!(r, Ok((pid, epoch + 2)));
    assert!(e.markers.is_empty());
    let states: Vec<TxnState> = e
        .records
        .iter()
        .map(|r| decode_value(r.value.as_ref().unwrap()).unwrap().state)
        .collect();
    assert_eq!(
        states,
        vec![TxnState::PrepareAbort, TxnState::CompleteAbort]
    );
    // CompleteAbort: the retry of that abort succeeds, a commit is invalid.
    assert_eq!(h.end(pid, epoch + 1, false, true).0, Ok((pid, epoch + 2)));
    assert!(matches!(
        h.end(pid, epoch + 1, true, true).0,
        Err(TxnError::InvalidTxnState(_))
    ));
    assert!(matches!(
        h.end(pid, epoch + 2, true, true).0,
        Err(TxnError::InvalidTxnState(_))
    ));
}

#[test]
fn end_txn_tv2_in_empty() {
    let mut h = H::new(2);
    let (pid, epoch) = h.init(None).0.unwrap();
    assert!(matches!(
        h.end(pid, epoch, true, true).0,
        Err(TxnError::InvalidTxnState(_))
    ));
    assert_eq!(
        h.end(pid, epoch + 1, false, true).0,
        Err(TxnError::ProducerFenced)
    );
    let (r, e) = h.end(pid, epoch, false, true);
    assert_eq!(r, Ok((pid, epoch + 1)));
    assert_eq!(e.records.len(), 2);
    assert_eq!(h.view().state, TxnState::CompleteAbort);
}

#[test]
fn end_txn_tv2_epoch_overflow_rotates_the_producer_id() {
    let mut h = h_with(2, ongoing_at(77, MAX - 1, 0));
    let (r, e) = h.end(77, MAX - 1, true, true);
    // The answer is the new producer id at epoch 0.
    assert_eq!(r, Ok((1000, 0)));
    let v = value(&e);
    assert_eq!(
        (v.producer_id, v.producer_epoch, v.next_producer_id),
        (77, MAX, 1000)
    );
    // The markers use the old id at the last epoch.
    assert_eq!(
        (e.markers[0].producer_id, e.markers[0].producer_epoch),
        (77, MAX)
    );

    // A crash here: the reload resumes the markers and completes with the new id.
    let loaded = h.reload(COORD_EPOCH + 1);
    assert_eq!(loaded.effects.markers.len(), 1);
    let job = loaded.effects.markers[0].clone();
    assert_eq!(
        (job.producer_id, job.producer_epoch, job.coordinator_epoch),
        (77, MAX, 6)
    );
    let done = h.markers_done(&job);
    let v = value(&done);
    assert_eq!(
        (
            v.state,
            v.producer_id,
            v.producer_epoch,
            v.previous_producer_id,
            v.next_producer_id
        ),
        (TxnState::CompleteCommit, 1000, 0, 77, -1)
    );
    // The client's retry with the old id and epoch succeeds with the new ones.
    assert_eq!(h.end(77, MAX - 1, true, true).0, Ok((1000, 0)));
    // And the new id works.
    h.add_as(1000, 0, &[("t", 0)], false, true).unwrap();
    assert_eq!(h.end(1000, 0, true, true).0, Ok((1000, 1)));
}

#[test]
fn markers_written_ignores_stale_jobs() {
    let mut h = H::new(2);
    let (pid, epoch) = h.init(None).0.unwrap();
    h.add(pid, epoch, &[("t", 0)]).unwrap();
    let (_, e) = h.end(pid, epoch, true, false);
    let job = e.markers[0].clone();
    for stale in [
        MarkerJob {
            coordinator_epoch: 4,
            ..job.clone()
        },
        MarkerJob {
            producer_epoch: 9,
            ..job.clone()
        },
        MarkerJob {
            commit: false,
            ..job.clone()
        },
        MarkerJob {
            transactional_id: "txn-1".into(),
            ..job.clone()
        },
    ] {
        assert!(h.markers_done(&stale).is_empty());
    }
    assert_eq!(h.view().state, TxnState::PrepareCommit);
    assert!(!h.markers_done(&job).is_empty());
}

// ---- tick: timeouts and expiry ----

#[test]
fn tick_aborts_a_transaction_past_its_timeout() {
    for tv in [0, 2] {
        let mut h = H::new(tv);
        let (pid, epoch) = h.init(None).0.unwrap();
        h.add(pid, epoch, &[("t", 0)]).unwrap();
        let start = h.now;
        // Kafka: timed out when start + timeout < now.
        h.now = start + 60_000;
        assert!(h.tick().is_empty());
        h.now += 1;
        let e = h.tick();
        let v = value(&e);
        let fenced = if tv >= 2 { epoch + 2 } else { epoch + 1 };
        assert_eq!(
            (v.state, v.producer_epoch),
            (TxnState::PrepareAbort, fenced)
        );
        assert_eq!(e.markers.len(), 1);
        assert_eq!(e.markers[0].producer_epoch, fenced);
        assert!(!e.markers[0].commit);
        // Under transaction.version 0 the record is value version 0.
        let raw = e.records[0].value.as_ref().unwrap();
        assert_eq!(&raw[..2], if tv == 0 { &[0, 0] } else { &[0, 1] });
        // Nothing more to do until the markers are written.
        assert!(h.tick().is_empty());
        // The producer finds itself fenced.
        assert_eq!(
            h.end(pid, epoch, true, false).0,
            Err(TxnError::ProducerFenced)
        );
        if tv >= 2 {
            // Under TV2 the double bump keeps the old epoch from looking like a retry.
            assert_eq!(
                h.end(pid, epoch, true, true).0,
                Err(TxnError::ProducerFenced)
            );
        }
        assert_eq!(
            h.add(pid, epoch, &[("t", 1)]).unwrap_err(),
            TxnError::ProducerFenced
        );
        h.markers_done(&e.markers[0]);
        assert_eq!(h.view().state, TxnState::CompleteAbort);
    }
}

/// Prints one batch of the records of a whole life cycle (Empty, Ongoing, PrepareCommit,
/// CompleteCommit, a timeout's PrepareAbort and CompleteAbort, the expiry's tombstone) for
/// Kafka's own decoder: write the hex as `00000000000000000000.log` and run
/// `java -cp 'tests/.deps/kafka-libs/*' org.apache.kafka.tools.DumpLogSegments --files
/// 00000000000000000000.log --transaction-log-decoder` (Kafka 4.3.1 decodes all eight).
#[test]
#[ignore = "prints a batch for kafka-dump-log; run by hand"]
fn batch_for_kafka_dump_log() {
    let mut h = H::new(2);
    let (pid, epoch) = h.init(None).0.unwrap();
    h.add_as(pid, epoch, &[("t", 0), ("t", 1), ("u", 0)], false, true)
        .unwrap();
    let (_, e) = h.end(pid, epoch, true, true);
    h.markers_done(&e.markers[0]);
    h.add_as(pid, epoch + 1, &[("t", 0)], false, true).unwrap();
    h.now += 100_000;
    let e = h.tick();
    h.markers_done(&e.markers[0]);
    h.now += 8 * 24 * 3600 * 1000;
    h.tick();
    let mut b = sluice_format::BatchBuilder::new();
    for r in &h.log {
        b = b.record(h.now, Some(&r.key), r.value.as_deref());
    }
    let bytes = b.build();
    let hex: String = bytes.iter().map(|x| format!("{x:02x}")).collect();
    println!("BATCH {hex}");
}

#[test]
fn tick_expires_idle_transactional_ids() {
    let mut h = H::new(2);
    let (pid, epoch) = h.init(None).0.unwrap();
    let week = 7 * 24 * 3600 * 1000;
    let idle_since = h.now;
    h.now = idle_since + week - 1;
    assert!(h.tick().is_empty());
    // Ongoing transactions never expire (they time out instead).
    h.now = idle_since;
    h.add(pid, epoch, &[("t", 0)]).unwrap();
    let (_, e) = h.end(pid, epoch, false, false);
    h.now = idle_since + week;
    // PrepareAbort is not expired either.
    assert!(h.tick().is_empty());
    h.now = idle_since;
    h.markers_done(&e.markers[0]);
    h.now = idle_since + week;
    let e = h.tick();
    assert_eq!(
        e.records,
        vec![Record {
            partition: 45,
            key: records::key(TID),
            value: None
        }]
    );
    assert_eq!(
        h.c.describe(TID, h.now),
        Err(TxnError::TransactionalIdNotFound)
    );
    // The producer of the expired id is unknown now; a new init starts over.
    assert_eq!(
        h.add(pid, epoch, &[("t", 0)]).unwrap_err(),
        TxnError::InvalidProducerIdMapping
    );
    assert_eq!(h.init(None).0, Ok((1001, 0)));
    // After a reload the tombstone still holds: the last record wins.
    h.reload(COORD_EPOCH);
    assert_eq!(h.view().producer_id, 1001);
}

#[test]
fn load_replays_the_log_and_resumes_marker_jobs() {
    let mut h = H::new(2);
    let (pid, epoch) = h.init(None).0.unwrap();
    h.add(pid, epoch, &[("t", 0)]).unwrap();
    let (_, e) = h.end(pid, epoch, true, false);
    let before = h.view();
    // A crash before the markers are written: the new owner resumes them.
    let loaded = h.reload(COORD_EPOCH + 1);
    assert_eq!(loaded.transactions, 1);
    assert_eq!(loaded.skipped, 0);
    assert_eq!(
        loaded.effects.markers,
        vec![MarkerJob {
            coordinator_epoch: COORD_EPOCH + 1,
            ..e.markers[0].clone()
        }]
    );
    assert!(loaded.effects.records.is_empty());
    assert_eq!(h.view(), before);
    // The old owner's job is stale now.
    assert!(h.markers_done(&e.markers[0]).is_empty());
    assert_eq!(
        value(&h.markers_done(&loaded.effects.markers[0])).state,
        TxnState::CompleteCommit
    );
    // Completed transactions resume nothing.
    assert!(h.reload(COORD_EPOCH + 2).effects.is_empty());
}

#[test]
fn load_keeps_ongoing_transactions_for_their_timeout_and_skips_garbage() {
    let mut h = H::new(2);
    let (pid, epoch) = h.init(None).0.unwrap();
    h.add(pid, epoch, &[("t", 0)]).unwrap();
    // Garbage, a key of another version, and a PrepareEpochFence record (Kafka never
    // writes one) for another id in the same partition.
    h.log.push(Record {
        partition: 45,
        key: Bytes::from_static(&[0, 0, 0, 9, 1]),
        value: None,
    });
    h.log.push(Record {
        partition: 45,
        key: records::key(TID),
        value: Some(Bytes::from_static(&[0, 1, 2])),
    });
    h.log.push(Record {
        partition: 45,
        key: Bytes::from_static(&[0, 7, 1, 2]),
        value: None,
    });
    let loaded = h.reload(COORD_EPOCH);
    assert_eq!(loaded.skipped, 2);
    assert!(loaded.effects.is_empty());
    let v = h.view();
    assert_eq!((v.state, v.producer_epoch), (TxnState::Ongoing, epoch));
    // The loaded transaction times out as usual.
    h.now += 60_001;
    assert_eq!(value(&h.tick()).state, TxnState::PrepareAbort);

    let mut fence = ongoing_at(5, 1, 0);
    fence.state = TxnState::PrepareEpochFence;
    let h = h_with(2, fence);
    assert_eq!(h.view().state, TxnState::Ongoing);
}

#[test]
fn requests_for_unloaded_partitions_are_not_coordinator() {
    let mut h = H::new(2);
    let (pid, epoch) = h.init(None).0.unwrap();
    h.c.unload(45);
    assert_eq!(h.init(None).0, Err(TxnError::NotCoordinator));
    assert_eq!(
        h.add(pid, epoch, &[("t", 0)]).unwrap_err(),
        TxnError::NotCoordinator
    );
    assert_eq!(
        h.end(pid, epoch, true, true).0,
        Err(TxnError::NotCoordinator)
    );
    assert_eq!(h.c.describe(TID, 0), Err(TxnError::NotCoordinator));
    assert!(h.tick().is_empty());
    assert!(h.c.list(&[], &[], -1, 0).transactions.is_empty());
}

#[test]
fn describe_and_list() {
    let mut h = H::new(2);
    let (pid, epoch) = h.init(None).0.unwrap();
    let v = h.view();
    assert_eq!(
        v,
        TxnView {
            transactional_id: TID.into(),
            state: TxnState::Empty,
            producer_id: pid,
            producer_epoch: epoch,
            timeout_ms: 60_000,
            start_ms: -1,
            partitions: Vec::new(),
        }
    );
    h.add(pid, epoch, &[("u", 1), ("t", 0)]).unwrap();
    let v = h.view();
    assert_eq!((v.state, v.start_ms), (TxnState::Ongoing, h.now));
    assert_eq!(v.partitions, tps(&[("t", 0), ("u", 1)]));
    assert!(matches!(
        h.c.describe("", 0),
        Err(TxnError::InvalidRequest(_))
    ));

    // A second id in another loaded partition ("txn-1" is partition 10), left Empty.
    h.c.load(10, 1, Vec::new(), 0);
    let mut n = 5000;
    let (r, _) = h.c.init_producer_id("txn-1", 1000, None, h.now, &mut || {
        n += 1;
        Ok(n)
    });
    assert_eq!(r, Ok((5001, 0)));

    let ids = |l: TxnList| -> Vec<String> {
        l.transactions
            .into_iter()
            .map(|t| t.transactional_id)
            .collect()
    };
    assert_eq!(ids(h.c.list(&[], &[], -1, h.now)), vec![TID, "txn-1"]);
    let l =
        h.c.list(&["Ongoing".into(), "Bogus".into()], &[], -1, h.now);
    assert_eq!(l.unknown_state_filters, vec!["Bogus".to_string()]);
    assert_eq!(
        l.transactions,
        vec![TxnListing {
            transactional_id: TID.into(),
            producer_id: pid,
            state: TxnState::Ongoing
        }]
    );
    assert_eq!(ids(h.c.list(&[], &[5001], -1, h.now)), vec!["txn-1"]);
    assert!(ids(h.c.list(&[], &[1], -1, h.now)).is_empty());
    // KIP-994: running for more than the duration. The Ongoing one started now; the Empty
    // one has Kafka's start of -1, which counts as long ago.
    assert_eq!(ids(h.c.list(&[], &[], 0, h.now)), vec!["txn-1"]);
    assert_eq!(ids(h.c.list(&[], &[], 1000, h.now + 1000)), vec!["txn-1"]);
    assert_eq!(
        ids(h.c.list(&[], &[], 1000, h.now + 1001)),
        vec![TID, "txn-1"]
    );
}

#[test]
fn a_fence_at_the_end_of_the_epochs_takes_a_new_producer_id() {
    // Ongoing at i16::MAX - 1 under TV2: the fence and the abort's bump saturate at MAX and
    // the producer id rotates at completion.
    let mut h = h_with(2, ongoing_at(77, MAX - 1, 0));
    h.now = 60_001;
    let e = h.tick();
    let v = value(&e);
    assert_eq!(
        (v.producer_id, v.producer_epoch, v.next_producer_id),
        (77, MAX, 1000)
    );
    let done = h.markers_done(&e.markers[0]);
    let v = value(&done);
    assert_eq!((v.producer_id, v.producer_epoch), (1000, 0));
    // Under TV1 the fence alone reaches MAX; the next init rotates.
    let mut h = h_with(0, ongoing_at(77, MAX - 1, 0));
    assert_eq!(h.init(None).0, Err(TxnError::ConcurrentTransactions));
    let job = h.c.describe(TID, 0).map(|v| v.producer_epoch);
    assert_eq!(job, Ok(MAX));
    let p = h.c.partition_for(TID);
    let loaded = h.reload(COORD_EPOCH);
    assert_eq!(p, 45);
    h.markers_done(&loaded.effects.markers[0]);
    assert_eq!(h.init(None).0, Ok((1000, 0)));
}

//! Transactions in the log store: markers, the last stable offset, read_committed reads,
//! `.txnindex` files, recovery, retention and compaction of transactional data.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use sluice_format::txn::{decode_txn_index, TxnIndexEntry};
use sluice_format::{parse_batches, BatchBuilder, SegmentFileKind};

use crate::tests::{cfg, NOW};
use crate::*;

fn meta() -> MetaProperties {
    MetaProperties {
        node_id: 1,
        cluster_id: "test-cluster-id-00000A".into(),
    }
}

fn tp() -> TopicPartition {
    TopicPartition {
        topic: "txn".into(),
        partition: 0,
    }
}

fn open(m: &LogManager, c: LogConfig) -> Arc<Log> {
    m.open_log(&tp(), uuid::Uuid::from_u128(9), c, 1).unwrap()
}

fn mgr(dir: &Path) -> LogManager {
    LogManager::open(vec![dir.to_path_buf()], meta()).unwrap()
}

/// A transactional batch of `n` records of producer `pid` (epoch 0).
fn txn(pid: i64, seq: i32, n: usize, key: &str, value: &str) -> Bytes {
    let mut b = BatchBuilder::new().producer(pid, 0, seq);
    b.transactional = true;
    for i in 0..n {
        b = b.record(NOW + i as i64, Some(key.as_bytes()), Some(value.as_bytes()));
    }
    Bytes::from(b.build())
}

fn plain(pid: i64, seq: i32, key: &str, value: &str) -> Bytes {
    Bytes::from(
        BatchBuilder::new()
            .producer(pid, 0, seq)
            .record(NOW, Some(key.as_bytes()), Some(value.as_bytes()))
            .build(),
    )
}

fn dir_of(log: &Log) -> PathBuf {
    log.dir()
}

fn txn_index(dir: &Path, base: i64) -> Option<Vec<TxnIndexEntry>> {
    let path = dir.join(sluice_format::segment_file_name(
        base,
        SegmentFileKind::TxnIndex,
    ));
    std::fs::read(path)
        .ok()
        .map(|b| decode_txn_index(&b, base).unwrap())
}

/// (base offset, is control) of the batches a read returns, reading on from `from`.
fn read_batches(log: &Log, from: i64, iso: Isolation) -> (Vec<(i64, bool)>, Vec<AbortedTxn>) {
    let mut out = Vec::new();
    let mut aborted = Vec::new();
    let mut off = from;
    loop {
        let r = log.read_isolated(off, 1 << 20, true, iso).unwrap();
        if iso == Isolation::ReadCommitted {
            aborted.extend(r.aborted.clone().unwrap());
        } else {
            assert!(r.aborted.is_none());
        }
        let Some(slice) = r.slice else { break };
        let bytes = slice.read_bytes().unwrap();
        for b in parse_batches(&bytes, None).unwrap() {
            out.push((b.header.base_offset, b.header.is_control()));
            off = b.header.next_offset();
        }
    }
    aborted.dedup();
    (out, aborted)
}

/// Transactions open at their first batch, stay open across rolls, and end with their
/// markers; the marker batch has Kafka's layout; an ABORT of an open transaction writes an
/// entry to the active segment's `.txnindex`, a COMMIT does not.
#[test]
fn commit_and_abort_across_rolls() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path());
    let log = open(&m, cfg());
    log.append(txn(1, 0, 2, "a", "1"), AppendOrigin::Client, NOW)
        .unwrap(); // 0..1
    assert_eq!(log.producers()[0].current_txn_start_offset, 0);
    log.roll(NOW).unwrap();
    log.append(txn(1, 2, 1, "a", "2"), AppendOrigin::Client, NOW)
        .unwrap(); // 2
    assert_eq!(log.last_stable_offset(), 0);
    let out = log
        .append_marker(1, 0, 5, ControlType::Commit, NOW)
        .unwrap();
    assert_eq!((out.base_offset, out.last_offset), (3, 3));
    assert_eq!(log.last_stable_offset(), 4);
    let p = &log.producers()[0];
    assert_eq!(
        (
            p.producer_id,
            p.coordinator_epoch,
            p.current_txn_start_offset
        ),
        (1, 5, -1)
    );
    // The marker: a transactional control batch, base sequence -1, one record.
    let r = log.read(3, 1 << 20, true).unwrap();
    let bytes = r.slice.unwrap().read_bytes().unwrap();
    let h = parse_batches(&bytes, None).unwrap()[0].header;
    assert!(h.is_control() && h.is_transactional());
    assert_eq!((h.producer_id, h.base_sequence, h.record_count), (1, -1, 1));
    let c = sluice_format::txn::parse_control(&bytes, &h).unwrap();
    assert_eq!((c.control_type, c.coordinator_epoch), (1, 5));
    // A commit writes no transaction index.
    assert_eq!(txn_index(&dir_of(&log), 2), None);

    // A transaction from another producer, rolled over, then aborted.
    log.append(txn(2, 0, 1, "b", "x"), AppendOrigin::Client, NOW)
        .unwrap(); // 4
    log.roll(NOW).unwrap();
    log.append(txn(2, 1, 1, "b", "y"), AppendOrigin::Client, NOW)
        .unwrap(); // 5
    assert_eq!(log.last_stable_offset(), 4);
    log.append_marker(2, 0, 5, ControlType::Abort, NOW).unwrap(); // 6
    assert_eq!(log.last_stable_offset(), 7);
    assert_eq!(
        txn_index(&dir_of(&log), 5),
        Some(vec![TxnIndexEntry {
            producer_id: 2,
            first_offset: 4,
            last_offset: 6,
            last_stable_offset: 7,
        }])
    );
    // A marker with no transaction open is written, and indexes nothing (as Kafka).
    let out = log.append_marker(2, 0, 5, ControlType::Abort, NOW).unwrap();
    assert_eq!(out.base_offset, 7);
    assert_eq!(txn_index(&dir_of(&log), 5).unwrap().len(), 1);
    // A producer with an open transaction may not write outside it.
    log.append(txn(3, 0, 1, "c", "1"), AppendOrigin::Client, NOW)
        .unwrap(); // 8
    let e = log
        .append(plain(3, 1, "c", "2"), AppendOrigin::Client, NOW)
        .unwrap_err();
    assert!(
        matches!(e, AppendError::InvalidTxnState { producer_id: 3, .. }),
        "{e}"
    );
    // Clients may not write control batches.
    let forged = Bytes::from(sluice_format::txn::build_marker(3, 0, 1, 0, NOW));
    assert!(matches!(
        log.append(forged, AppendOrigin::Client, NOW),
        Err(AppendError::Invalid { .. })
    ));
}

/// The last stable offset is the first offset of the oldest open transaction, whatever the
/// order in which interleaved transactions end.
#[test]
fn last_stable_offset_with_interleaved_producers() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path());
    let log = open(&m, cfg());
    log.append(plain(9, 0, "z", "0"), AppendOrigin::Client, NOW)
        .unwrap(); // 0
    assert_eq!(log.last_stable_offset(), 1);
    log.append(txn(1, 0, 1, "a", "1"), AppendOrigin::Client, NOW)
        .unwrap(); // 1
    log.append(txn(2, 0, 1, "b", "1"), AppendOrigin::Client, NOW)
        .unwrap(); // 2
    log.append(txn(1, 1, 1, "a", "2"), AppendOrigin::Client, NOW)
        .unwrap(); // 3
    log.append(txn(3, 0, 1, "c", "1"), AppendOrigin::Client, NOW)
        .unwrap(); // 4
    assert_eq!(log.last_stable_offset(), 1);
    // Producer 2 ends first: producer 1 still holds the LSO.
    log.append_marker(2, 0, 0, ControlType::Commit, NOW)
        .unwrap(); // 5
    assert_eq!(log.last_stable_offset(), 1);
    // Producer 1 ends: producer 3's transaction (at 4) is the oldest open one. The index
    // entry of an abort records that LSO.
    log.append_marker(1, 0, 0, ControlType::Abort, NOW).unwrap(); // 6
    assert_eq!(log.last_stable_offset(), 4);
    assert_eq!(
        txn_index(&dir_of(&log), 0).unwrap()[0],
        TxnIndexEntry {
            producer_id: 1,
            first_offset: 1,
            last_offset: 6,
            last_stable_offset: 4,
        }
    );
    log.append_marker(3, 0, 0, ControlType::Commit, NOW)
        .unwrap(); // 7
    assert_eq!(log.last_stable_offset(), 8);
    assert_eq!(log.last_stable_offset(), log.high_watermark());
    let views: Vec<i64> = log
        .producers()
        .iter()
        .map(|p| p.current_txn_start_offset)
        .collect();
    assert_eq!(views, vec![-1, -1, -1, -1]);
}

/// Under read_committed a read stops at the last stable offset, and lists the aborted
/// transactions overlapping what it returns; read_uncommitted sees everything.
#[test]
fn read_committed_stops_at_lso_and_lists_aborted() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path());
    let log = open(&m, cfg());
    log.append(txn(1, 0, 2, "a", "1"), AppendOrigin::Client, NOW)
        .unwrap(); // 0-1
    log.append(txn(2, 0, 1, "b", "1"), AppendOrigin::Client, NOW)
        .unwrap(); // 2
    log.append_marker(1, 0, 0, ControlType::Abort, NOW).unwrap(); // 3
    log.append(plain(7, 0, "p", "1"), AppendOrigin::Client, NOW)
        .unwrap(); // 4
                   // Producer 2 is still open at 2: read_committed sees 0-1 only.
    assert_eq!(log.last_stable_offset(), 2);
    let (got, aborted) = read_batches(&log, 0, Isolation::ReadCommitted);
    assert_eq!(got, vec![(0, false)]);
    assert_eq!(
        aborted,
        vec![AbortedTxn {
            producer_id: 1,
            first_offset: 0
        }]
    );
    let r = log
        .read_isolated(2, 1 << 20, true, Isolation::ReadCommitted)
        .unwrap();
    assert!(r.slice.is_none());
    assert_eq!((r.last_stable_offset, r.high_watermark), (2, 5));
    let (all, _) = read_batches(&log, 0, Isolation::ReadUncommitted);
    assert_eq!(all.len(), 4);
    // Producer 2 commits: everything is readable, and only producer 1's abort is listed.
    log.append_marker(2, 0, 0, ControlType::Commit, NOW)
        .unwrap(); // 5
    let (got, aborted) = read_batches(&log, 0, Isolation::ReadCommitted);
    assert_eq!(
        got,
        vec![(0, false), (2, false), (3, true), (4, false), (5, true)]
    );
    assert_eq!(aborted.len(), 1);
    // A read past the aborted transaction does not list it.
    let r = log
        .read_isolated(4, 1 << 20, true, Isolation::ReadCommitted)
        .unwrap();
    assert_eq!(r.aborted, Some(vec![]));
    // A small read covering only the first batch lists it; one of the commit-only range
    // does not.
    let r = log
        .read_isolated(0, 100, true, Isolation::ReadCommitted)
        .unwrap();
    assert_eq!(r.aborted.unwrap().len(), 1);
}

/// Markers below the producer's epoch, or from an older coordinator, are refused; a higher
/// epoch (KIP-890) becomes the producer's.
#[test]
fn markers_fenced_by_producer_and_coordinator_epoch() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path());
    let log = open(&m, cfg());
    let mut b = BatchBuilder::new().producer(4, 3, 0);
    b.transactional = true;
    let b = Bytes::from(b.record(NOW, Some(b"k"), Some(b"v")).build());
    log.append(b, AppendOrigin::Client, NOW).unwrap();
    let e = log
        .append_marker(4, 2, 10, ControlType::Commit, NOW)
        .unwrap_err();
    assert!(
        matches!(
            e,
            AppendError::ProducerFenced {
                epoch: 2,
                current: 3,
                ..
            }
        ),
        "{e}"
    );
    log.append_marker(4, 3, 10, ControlType::Abort, NOW)
        .unwrap();
    let e = log
        .append_marker(4, 3, 9, ControlType::Abort, NOW)
        .unwrap_err();
    assert!(
        matches!(
            e,
            AppendError::CoordinatorFenced {
                coordinator_epoch: 9,
                current: 10,
                ..
            }
        ),
        "{e}"
    );
    // KIP-890: the marker bumps the epoch; the old epoch is then fenced.
    log.append_marker(4, 4, 10, ControlType::Commit, NOW)
        .unwrap();
    assert_eq!(log.producers()[0].producer_epoch, 4);
    let mut b = BatchBuilder::new().producer(4, 3, 1);
    b.transactional = true;
    let b = Bytes::from(b.record(NOW, Some(b"k"), Some(b"v")).build());
    assert!(matches!(
        log.append(b, AppendOrigin::Client, NOW),
        Err(AppendError::ProducerFenced { .. })
    ));
    assert_eq!(log.log_end_offset(), 3);
}

/// A transactional batch of `pid` at `epoch`, sequence `seq`, one record.
fn txn_at(pid: i64, epoch: i16, seq: i32, key: &str, value: &str) -> Bytes {
    let mut b = BatchBuilder::new().producer(pid, epoch, seq);
    b.transactional = true;
    Bytes::from(
        b.record(NOW, Some(key.as_bytes()), Some(value.as_bytes()))
            .build(),
    )
}

/// A transaction of an older epoch still open on the partition (one the coordinator never
/// knew of: a zombie batch appended after its transaction's ABORT) is not carried into the
/// producer's next epoch: a transactional batch of the new epoch is refused while it is open,
/// so the new epoch's COMMIT cannot commit the zombie batch; the coordinator's ABORT of the
/// refused transaction ends the zombie as aborted, and the epoch then writes and commits its
/// own transaction.
#[test]
fn a_new_epoch_does_not_take_over_an_open_transaction_of_the_old() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path());
    let log = open(&m, cfg());
    log.append(txn_at(7, 0, 0, "k", "zombie"), AppendOrigin::Client, NOW)
        .unwrap(); // 0: epoch 0, never to get a marker from the coordinator
    assert_eq!(log.last_stable_offset(), 0);
    // KIP-360: the producer bumps its epoch (no marker here); its next transaction.
    let e = log
        .append(txn_at(7, 1, 0, "k", "next"), AppendOrigin::Client, NOW)
        .unwrap_err();
    assert!(
        matches!(e, AppendError::InvalidTxnState { producer_id: 7, .. }),
        "{e}"
    );
    assert_eq!(log.log_end_offset(), 1);
    assert_eq!(log.producers()[0].current_txn_start_offset, 0);
    // The coordinator aborts that transaction: the ABORT ends the zombie, aborted.
    log.append_marker(7, 1, 0, ControlType::Abort, NOW).unwrap(); // 1
    assert_eq!(log.last_stable_offset(), 2);
    let entries = txn_index(&dir_of(&log), 0).unwrap();
    assert_eq!(
        entries
            .iter()
            .map(|e| (e.producer_id, e.first_offset, e.last_offset))
            .collect::<Vec<_>>(),
        vec![(7, 0, 1)]
    );
    // The epoch's next transaction opens at its own batch and commits only that.
    log.append(txn_at(7, 1, 0, "k", "next"), AppendOrigin::Client, NOW)
        .unwrap(); // 2
    assert_eq!(log.producers()[0].current_txn_start_offset, 2);
    log.append_marker(7, 1, 0, ControlType::Commit, NOW)
        .unwrap(); // 3
    assert_eq!(log.last_stable_offset(), 4);
    assert_eq!(committed_values(&log), vec![("k".into(), "next".into())]);
    // A replay of the log from its start (no snapshot) agrees.
    let dir = dir_of(&log);
    drop(log);
    drop(m);
    remove_snapshots(&dir);
    let m = mgr(d.path());
    let log = open(&m, cfg());
    assert_eq!(log.last_stable_offset(), 4);
    assert_eq!(committed_values(&log), vec![("k".into(), "next".into())]);
}

fn refused_as_invalid_txn_state(r: Result<AppendOutcome, AppendError>, pid: i64) {
    match r {
        Err(AppendError::InvalidTxnState { producer_id, .. }) if producer_id == pid => {}
        other => panic!("not refused as INVALID_TXN_STATE: {other:?}"),
    }
}

/// KIP-890 part 1 (Kafka's VerificationGuard): a transactional batch opens a transaction only
/// with the guard taken before the coordinator was asked, and a marker for the producer in
/// between clears it, so a verdict from before the marker (transaction version 1: the abort
/// bumps no epoch) cannot open a transaction after it, which the coordinator would not know
/// and which would hold the last stable offset forever.
#[test]
fn a_verdict_from_before_a_marker_cannot_open_a_transaction_after_it() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path());
    let log = open(&m, cfg());
    let c = AppendOrigin::Client;
    // No verdict, no transaction.
    refused_as_invalid_txn_state(
        log.append_verified(txn_at(5, 0, 0, "k", "v"), c, None, NOW),
        5,
    );
    // The leader starts a verification; a concurrent request of the producer joins it.
    let g = log.start_txn_verification(5, 0, Some(0), NOW).unwrap();
    assert_eq!(log.start_txn_verification(5, 0, Some(0), NOW), Some(g));
    // The verdict is in, but the producer's ABORT reaches the partition first.
    log.append_marker(5, 0, 0, ControlType::Abort, NOW).unwrap(); // 0
    let late = txn_at(5, 0, 0, "k", "late");
    refused_as_invalid_txn_state(log.append_verified(late, c, Some(g), NOW), 5);
    assert_eq!(log.log_end_offset(), 1);
    assert_eq!(log.last_stable_offset(), 1);
    // A verification started after the marker gets a new guard, whose verdict opens the
    // transaction; batches of the open transaction need none.
    let g2 = log.start_txn_verification(5, 0, Some(0), NOW).unwrap();
    assert_ne!(g2, g);
    log.append_verified(txn_at(5, 0, 0, "k", "v"), c, Some(g2), NOW)
        .unwrap(); // 1
    assert_eq!(log.start_txn_verification(5, 0, Some(0), NOW), None);
    log.append_verified(txn_at(5, 0, 1, "k", "w"), c, None, NOW)
        .unwrap(); // 2
                   // A retry of an appended batch is a duplicate, whatever guard it comes with.
    let r = log
        .append_verified(txn_at(5, 0, 0, "k", "v"), c, Some(g), NOW)
        .unwrap();
    assert!(r.duplicate);
    log.append_marker(5, 0, 0, ControlType::Commit, NOW)
        .unwrap(); // 3
                   // The guard the transaction opened with is spent.
    let next = txn_at(5, 0, 2, "k", "x");
    refused_as_invalid_txn_state(log.append_verified(next, c, Some(g2), NOW), 5);
    assert_eq!(log.log_end_offset(), 4);
    assert_eq!(log.last_stable_offset(), 4);
    // A coordinator's batch for a producer (TxnOffsetCommit) likewise, and only with that
    // producer's own guard.
    let offsets = || {
        let mut b = BatchBuilder::new().producer(6, 0, -1);
        b.transactional = true;
        Bytes::from(b.record(NOW, Some(b"g"), Some(b"1")).build())
    };
    let coord = AppendOrigin::Coordinator;
    let g6 = log.start_txn_verification(6, 0, None, NOW).unwrap();
    refused_as_invalid_txn_state(log.append_verified(offsets(), coord, Some(g), NOW), 6);
    log.append_verified(offsets(), coord, Some(g6), NOW)
        .unwrap(); // 4
    assert_eq!(log.last_stable_offset(), 4);
}

/// Transaction version 2: EndTxn is answered once the coordinator has prepared, so the first
/// batch of the next transaction (at the bumped epoch) can reach a partition before the
/// previous transaction's marker. Its verification starts, the marker (at the bumped epoch)
/// lands, the coordinator completes and answers "added". The marker ended the older epoch's
/// transaction, not the one being verified, so the verdict still opens it (seen in CI: a
/// three-broker test's producer failed with INVALID_TXN_STATE when the owner's question
/// reached the coordinator after the marker's answer). A marker ending the verified epoch's
/// own transaction still clears the guard.
#[test]
fn a_marker_ending_the_previous_epochs_transaction_keeps_the_next_ones_verification() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path());
    let log = open(&m, cfg());
    let c = AppendOrigin::Client;
    // T1 open here at epoch 0.
    let g0 = log.start_txn_verification(5, 0, Some(0), NOW).unwrap();
    log.append_verified(txn_at(5, 0, 0, "k", "t1"), c, Some(g0), NOW)
        .unwrap(); // 0
                   // T2's first batch (epoch 1) starts its verification before T1's marker.
    let g = log.start_txn_verification(5, 1, Some(0), NOW).unwrap();
    log.append_marker(5, 1, 0, ControlType::Commit, NOW)
        .unwrap(); // 1
                   // The coordinator added the partition to T2: the verdict opens it.
    log.append_verified(txn_at(5, 1, 0, "k", "t2"), c, Some(g), NOW)
        .unwrap(); // 2
    log.append_marker(5, 2, 0, ControlType::Abort, NOW).unwrap(); // 3
                                                                  // Transaction version 1 after a re-initialisation: T3 open at epoch 2; InitProducerId
                                                                  // bumps to 3 and the coordinator aborts T3 at epoch 3, after T4's first batch started
                                                                  // verifying (kept: T3 was of an older epoch). T4 is then aborted too (no bump in version
                                                                  // 1) before its verdict comes back: that marker clears the verification, and the stale
                                                                  // verdict opens nothing (T5 at epoch 3 may hold the partition by now).
    let g3 = log.start_txn_verification(5, 2, Some(0), NOW).unwrap();
    log.append_verified(txn_at(5, 2, 0, "k", "t3"), c, Some(g3), NOW)
        .unwrap(); // 4
    let g4 = log.start_txn_verification(5, 3, Some(0), NOW).unwrap();
    log.append_marker(5, 3, 0, ControlType::Abort, NOW).unwrap(); // 5
    assert_eq!(log.start_txn_verification(5, 3, Some(0), NOW), Some(g4));
    log.append_marker(5, 3, 0, ControlType::Abort, NOW).unwrap(); // 6
    refused_as_invalid_txn_state(
        log.append_verified(txn_at(5, 3, 0, "k", "t4"), c, Some(g4), NOW),
        5,
    );
    assert_eq!(log.log_end_offset(), 7);
    assert_eq!(log.last_stable_offset(), 7);
}

/// Two produce requests of a producer's new transaction wait for the coordinator's verdict
/// together; the later one's verdict comes first. It is refused as out of order until the
/// earlier batch is in (Kafka's `lowestSequence`), or its sequence would be taken and the
/// earlier batch's retry refused forever (seen in a three-broker test under load: the
/// earlier request's verification failed and was retried).
#[test]
fn a_later_batch_verified_first_waits_for_the_earlier_one() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path());
    let log = open(&m, cfg());
    let c = AppendOrigin::Client;
    let g = log.start_txn_verification(5, 0, Some(0), NOW).unwrap(); // batch A: seq 0
    assert_eq!(log.start_txn_verification(5, 0, Some(1), NOW), Some(g)); // batch B: seq 1
    let r = log.append_verified(txn_at(5, 0, 1, "k", "b"), c, Some(g), NOW);
    assert!(
        matches!(
            r,
            Err(AppendError::OutOfOrderSequence {
                expected: 0,
                got: 1,
                ..
            })
        ),
        "{r:?}"
    );
    assert_eq!(log.log_end_offset(), 0);
    log.append_verified(txn_at(5, 0, 0, "k", "a"), c, Some(g), NOW)
        .unwrap(); // 0
                   // B again: the transaction is open, no verdict needed, in order.
    log.append_verified(txn_at(5, 0, 1, "k", "b"), c, None, NOW)
        .unwrap(); // 1
    assert_eq!(log.log_end_offset(), 2);
}

/// (Adversary finding on 63401f0.) TV2: A (seq 0) of the next transaction starts its verification while the previous
/// transaction's COMMIT marker is still to come (coordinator answers CONCURRENT_TRANSACTIONS,
/// the leader retries after a backoff). The marker clears A's Verifying entry with its
/// lowest_seq; B (seq 1) arrives, starts a fresh one (lowest 1), is verified and opens the
/// transaction at sequence 1 (the epoch-bumping marker left no batch to check against).
#[test]
fn a_marker_between_two_batches_of_the_next_transaction_keeps_their_order() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path());
    let log = open(&m, cfg());
    let c = AppendOrigin::Client;
    // T1 at epoch 0.
    let g0 = log.start_txn_verification(5, 0, Some(0), NOW).unwrap();
    log.append_verified(txn_at(5, 0, 0, "k", "t1"), c, Some(g0), NOW)
        .unwrap(); // 0
                   // EndTxn(commit) answered with epoch 1; A (epoch 1, seq 0) starts its verification.
    let _ga = log.start_txn_verification(5, 1, Some(0), NOW).unwrap();
    // T1's COMMIT marker, at the bumped epoch (TV2).
    log.append_marker(5, 1, 0, ControlType::Commit, NOW)
        .unwrap(); // 1
                   // B (seq 1) arrives before A's retry iteration re-joins.
    let gb = log.start_txn_verification(5, 1, Some(1), NOW).unwrap();
    let r = log.append_verified(txn_at(5, 1, 1, "k", "b"), c, Some(gb), NOW);
    assert!(
        !matches!(r, Ok(_)),
        "claim 2 broken: B (seq 1) opened the transaction before A (seq 0): {r:?}"
    );
}

/// Continuation: B refused, A's retry opens the transaction, and B's retry follows it.
#[test]
fn the_first_batch_of_the_next_transaction_is_never_refused_for_good() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path());
    let log = open(&m, cfg());
    let c = AppendOrigin::Client;
    let g0 = log.start_txn_verification(5, 0, Some(0), NOW).unwrap();
    log.append_verified(txn_at(5, 0, 0, "k", "t1"), c, Some(g0), NOW)
        .unwrap(); // 0
    let _ga = log.start_txn_verification(5, 1, Some(0), NOW).unwrap();
    log.append_marker(5, 1, 0, ControlType::Commit, NOW)
        .unwrap(); // 1
    let gb = log.start_txn_verification(5, 1, Some(1), NOW).unwrap();
    let r = log.append_verified(txn_at(5, 1, 1, "k", "b"), c, Some(gb), NOW);
    assert!(
        matches!(
            r,
            Err(AppendError::OutOfOrderSequence {
                expected: 0,
                got: 1,
                ..
            })
        ),
        "{r:?}"
    );
    // A's retry, verified again, opens the transaction; then B's.
    let ga = log.start_txn_verification(5, 1, Some(0), NOW).unwrap();
    log.append_verified(txn_at(5, 1, 0, "k", "a"), c, Some(ga), NOW)
        .unwrap(); // 2
    assert_eq!(log.start_txn_verification(5, 1, Some(1), NOW), None);
    log.append_verified(txn_at(5, 1, 1, "k", "b"), c, None, NOW)
        .unwrap(); // 3
    assert_eq!(log.log_end_offset(), 4);
}

/// TV1 (no bump at commit: sequences continue). A fenced zombie of the same producer id
/// (epoch 0, mid-transaction at seq 0) joins the current epoch's verification and lowers
/// lowest_seq; the current opener C (epoch 1, seq 1, exactly the next sequence) is refused as
/// out of order on every retry. Kafka ignores a lower epoch (maybeUpdateLowestSequenceAndEpoch).
#[test]
fn a_fenced_zombie_never_blocks_the_current_opener() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path());
    let log = open(&m, cfg());
    let c = AppendOrigin::Client;
    // Epoch 1: T1 on the partition, committed (TV1 marker at the same epoch).
    let g = log.start_txn_verification(5, 1, Some(0), NOW).unwrap();
    log.append_verified(txn_at(5, 1, 0, "k", "t1"), c, Some(g), NOW)
        .unwrap();
    log.append_marker(5, 1, 0, ControlType::Commit, NOW)
        .unwrap();
    // T2's opener C (seq 1) starts; the zombie (epoch 0, seq 0) joins.
    let gc = log.start_txn_verification(5, 1, Some(1), NOW).unwrap();
    let gz = log.start_txn_verification(5, 0, Some(0), NOW).unwrap();
    assert_eq!(gz, gc);
    // The zombie is fenced.
    assert!(matches!(
        log.append_verified(txn_at(5, 0, 0, "k", "z"), c, Some(gz), NOW),
        Err(AppendError::ProducerFenced { .. })
    ));
    for _ in 0..3 {
        let g = log.start_txn_verification(5, 1, Some(1), NOW);
        let r = log.append_verified(txn_at(5, 1, 1, "k", "c"), c, g, NOW);
        assert!(
            r.is_ok(),
            "claim 1/3 broken: C (next sequence) refused: {r:?}"
        );
    }
}

/// In cluster mode a completed transaction stays unstable until the published mark passes
/// its marker (Kafka's unreplicated transactions).
#[test]
fn completed_transactions_wait_for_the_published_mark() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path());
    let log = open(&m, cfg());
    log.append(plain(7, 0, "p", "1"), AppendOrigin::Client, NOW)
        .unwrap(); // 0
    log.flush().unwrap();
    log.publish(log.synced_mark());
    assert_eq!(log.last_stable_offset(), 1);
    log.append(txn(1, 0, 1, "a", "1"), AppendOrigin::Client, NOW)
        .unwrap(); // 1
    log.append_marker(1, 0, 0, ControlType::Commit, NOW)
        .unwrap(); // 2
                   // Not published yet: the LSO is the high watermark, 1.
    assert_eq!((log.high_watermark(), log.last_stable_offset()), (1, 1));
    log.flush().unwrap();
    let mut mark = log.synced_mark();
    // Published up to the marker but not past it: the transaction is still unstable.
    mark.offset = 2;
    log.publish(mark);
    assert_eq!((log.high_watermark(), log.last_stable_offset()), (2, 1));
    log.publish(log.synced_mark());
    assert_eq!((log.high_watermark(), log.last_stable_offset()), (3, 3));
}

/// A transaction opened before the last roll and still open survives a crash through the
/// producer snapshot; the `.txnindex` of the replayed segment is rebuilt after it was
/// deleted, and a damaged one of an older segment is rebuilt from the log, never trusted.
#[test]
fn restart_mid_transaction_keeps_it_open_and_rebuilds_indexes() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path());
    let log = open(&m, cfg());
    log.append(txn(1, 0, 1, "a", "1"), AppendOrigin::Client, NOW)
        .unwrap(); // 0: producer 1 opens
    log.append(txn(2, 0, 1, "b", "1"), AppendOrigin::Client, NOW)
        .unwrap(); // 1: producer 2 opens
    log.append_marker(2, 0, 3, ControlType::Abort, NOW).unwrap(); // 2
    log.roll(NOW).unwrap(); // snapshot at 3: producer 1 open since 0
    log.append(txn(3, 0, 1, "c", "1"), AppendOrigin::Client, NOW)
        .unwrap(); // 3
    log.append_marker(3, 0, 3, ControlType::Abort, NOW).unwrap(); // 4
    let dir = dir_of(&log);
    let old = txn_index(&dir, 0).unwrap();
    let new = txn_index(&dir, 3).unwrap();
    assert_eq!((old.len(), new.len()), (1, 1));
    // A crash (no clean shutdown), and the active segment's index lost.
    drop(log);
    drop(m);
    std::fs::remove_file(dir.join(sluice_format::segment_file_name(
        3,
        SegmentFileKind::TxnIndex,
    )))
    .unwrap();
    let m = mgr(d.path());
    let log = open(&m, cfg());
    assert_eq!(log.log_end_offset(), 5);
    let p1 = log
        .producers()
        .into_iter()
        .find(|p| p.producer_id == 1)
        .unwrap();
    assert_eq!(p1.current_txn_start_offset, 0);
    assert_eq!(log.last_stable_offset(), 0);
    assert_eq!(txn_index(&dir, 3).unwrap(), new);
    // Producer 1 commits after the restart: everything is stable, both aborts are listed.
    log.append_marker(1, 0, 3, ControlType::Commit, NOW)
        .unwrap();
    let (got, aborted) = read_batches(&log, 0, Isolation::ReadCommitted);
    assert_eq!(got.len(), 6);
    assert_eq!(
        aborted,
        vec![
            AbortedTxn {
                producer_id: 2,
                first_offset: 1
            },
            AbortedTxn {
                producer_id: 3,
                first_offset: 3
            }
        ]
    );
    m.shutdown().unwrap();
    drop(log);
    drop(m);
    // A damaged index of a sealed segment is rebuilt from the log at the next open.
    let path = dir.join(sluice_format::segment_file_name(
        0,
        SegmentFileKind::TxnIndex,
    ));
    std::fs::write(&path, b"garbage, not 34-byte entries").unwrap();
    let m = mgr(d.path());
    let log = open(&m, cfg());
    let rebuilt = txn_index(&dir, 0).unwrap();
    assert_eq!(rebuilt.len(), 1);
    assert_eq!(
        (
            rebuilt[0].producer_id,
            rebuilt[0].first_offset,
            rebuilt[0].last_offset
        ),
        (2, 1, 2)
    );
    let (_, aborted) = read_batches(&log, 0, Isolation::ReadCommitted);
    assert_eq!(aborted.len(), 2);
    assert_eq!(log.last_stable_offset(), 6);
}

/// Non-idempotent data: one record.
fn data(value: &str) -> Bytes {
    Bytes::from(
        BatchBuilder::new()
            .record(NOW, Some(b"d"), Some(value.as_bytes()))
            .build(),
    )
}

/// The offsets of the producer snapshots in the partition directory `dir`, ascending.
fn snapshot_offsets(dir: &Path) -> Vec<i64> {
    let mut v: Vec<i64> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            name.strip_suffix(".snapshot").map(|o| o.parse().unwrap())
        })
        .collect();
    v.sort_unstable();
    v
}

/// Remove every producer snapshot of the partition directory `dir`.
fn remove_snapshots(dir: &Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "snapshot") {
            std::fs::remove_file(path).unwrap();
        }
    }
}

/// Issue 53: a host crash that loses every producer snapshot (the segments survive: they
/// are flushed at roll) must not lose a transaction opened three segments back, nor an
/// idempotent producer's sequence state. With no snapshot the open replays from the log
/// start: the LSO stays at the transaction, its abort is indexed and listed, and a retry of
/// the producer's last batch is a duplicate.
#[test]
fn lost_snapshots_replay_from_the_log_start() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path());
    let log = open(&m, cfg());
    log.append(txn(1, 0, 1, "a", "1"), AppendOrigin::Client, NOW)
        .unwrap(); // 0: producer 1 opens
    log.append(plain(7, 0, "i", "1"), AppendOrigin::Client, NOW)
        .unwrap(); // 1: idempotent producer 7's last batch
    for (k, v) in ["x", "y", "z"].into_iter().enumerate() {
        log.roll(NOW).unwrap(); // at 2, 3, 4
        let out = log.append(data(v), AppendOrigin::Client, NOW).unwrap();
        assert_eq!(out.base_offset, 2 + k as i64);
    }
    assert_eq!(log.last_stable_offset(), 0);
    let dir = dir_of(&log);
    // A crash (no clean shutdown) that lost every snapshot.
    drop(log);
    drop(m);
    remove_snapshots(&dir);
    let m = mgr(d.path());
    let log = open(&m, cfg());
    assert_eq!(log.log_end_offset(), 5);
    assert_eq!(
        log.last_stable_offset(),
        0,
        "the transaction at 0 is still open"
    );
    let (got, _) = read_batches(&log, 0, Isolation::ReadCommitted);
    assert!(got.is_empty(), "nothing readable past the LSO: {got:?}");
    // The idempotent producer's retry is recognised.
    let r = log
        .append(plain(7, 0, "i", "1"), AppendOrigin::Client, NOW)
        .unwrap();
    assert!(r.duplicate, "the retry is recognised, not appended again");
    assert_eq!(r.base_offset, 1);
    // The transaction aborts: indexed in the active segment, listed to read_committed.
    log.append_marker(1, 0, 0, ControlType::Abort, NOW).unwrap(); // 5
    assert_eq!(log.last_stable_offset(), 6);
    assert_eq!(
        txn_index(&dir, 4),
        Some(vec![TxnIndexEntry {
            producer_id: 1,
            first_offset: 0,
            last_offset: 5,
            last_stable_offset: 6,
        }])
    );
    let (got, aborted) = read_batches(&log, 0, Isolation::ReadCommitted);
    assert_eq!(got.len(), 6);
    assert_eq!(
        aborted,
        vec![AbortedTxn {
            producer_id: 1,
            first_offset: 0
        }]
    );
    // The state rebuilt from the start was written down at the open, so a second crash
    // does not replay from the start again.
    assert!(dir
        .join(sluice_format::segment_file_name(
            5,
            SegmentFileKind::Snapshot
        ))
        .exists());
}

/// A replay from the log start (no snapshot) that stops at a batch it cannot read, in a
/// sealed segment trusted below the recovery point, computed only part of that segment's
/// transaction index: the index it has is kept, not replaced by the part.
#[test]
fn a_replay_that_stops_early_keeps_the_transaction_index_it_found() {
    let d = tempfile::tempdir().unwrap();
    let entry = TxnIndexEntry {
        producer_id: 1,
        first_offset: 0,
        last_offset: 2,
        last_stable_offset: 3,
    };
    let dir = {
        let m = mgr(d.path());
        let log = open(&m, cfg());
        log.append(txn(1, 0, 1, "a", "1"), AppendOrigin::Client, NOW)
            .unwrap(); // 0
        log.append(data("x"), AppendOrigin::Client, NOW).unwrap(); // 1
        log.append_marker(1, 0, 0, ControlType::Abort, NOW).unwrap(); // 2
        log.roll(NOW).unwrap();
        log.append(data("y"), AppendOrigin::Client, NOW).unwrap(); // 3
        log.flush().unwrap();
        m.checkpoint().unwrap();
        let dir = dir_of(&log);
        assert_eq!(txn_index(&dir, 0), Some(vec![entry]));
        dir
    };
    remove_snapshots(&dir);
    // The header of the batch at 1, below the recovery point, becomes unreadable.
    let seg0 = dir.join(sluice_format::segment_file_name(0, SegmentFileKind::Log));
    let mut bytes = std::fs::read(&seg0).unwrap();
    let first = sluice_format::parse_batches(&bytes, None).unwrap()[0]
        .header
        .total_len();
    bytes[first + 16] = 0x7f; // its magic byte
    std::fs::write(&seg0, &bytes).unwrap();
    let m = mgr(d.path());
    let _log = open(&m, cfg());
    assert_eq!(
        txn_index(&dir, 0),
        Some(vec![entry]),
        "the index of the segment the replay could not finish"
    );
}

/// After a crash, the open replays from the newest snapshot at or below its recovery point,
/// not from the newest one: the replay is exact over every recovered segment, so the
/// transaction index of a recovered segment below the newest snapshot is rebuilt with the
/// last stable offset the abort left (a walk back over the log knows only the log start), and
/// no older segment is read to rebuild it. The prune keeps that snapshot.
#[test]
fn an_unclean_open_replays_from_the_snapshot_at_its_recovery_point() {
    let d = tempfile::tempdir().unwrap();
    let dir = {
        let m = mgr(d.path());
        let log = open(&m, cfg());
        log.append(data("p"), AppendOrigin::Client, NOW).unwrap(); // 0
        log.roll(NOW).unwrap(); // snapshot at 1
        log.flush().unwrap(); // recovery point 1, snapshot 1 durable
        m.checkpoint().unwrap();
        log.append(txn(1, 0, 1, "a", "1"), AppendOrigin::Client, NOW)
            .unwrap(); // 1: producer 1 opens
        log.append(data("x"), AppendOrigin::Client, NOW).unwrap(); // 2
        log.roll(NOW).unwrap(); // snapshot at 3
        log.append_marker(1, 0, 0, ControlType::Abort, NOW).unwrap(); // 3
        log.roll(NOW).unwrap(); // snapshot at 4
        log.append(data("y"), AppendOrigin::Client, NOW).unwrap(); // 4
        log.prune_snapshots();
        let dir = dir_of(&log);
        for o in [1, 3, 4] {
            let name = sluice_format::segment_file_name(o, SegmentFileKind::Snapshot);
            assert!(dir.join(name).exists(), "snapshot {o} kept");
        }
        dir
    }; // a crash: no clean shutdown, the recorded recovery point is 1
       // What a host crash left of the aborting segment's index: nothing.
    let idx = dir.join(sluice_format::segment_file_name(
        3,
        SegmentFileKind::TxnIndex,
    ));
    std::fs::remove_file(idx).unwrap();
    let m = mgr(d.path());
    let log = open(&m, cfg());
    assert_eq!(log.log_end_offset(), 5);
    assert_eq!(
        txn_index(&dir, 3),
        Some(vec![TxnIndexEntry {
            producer_id: 1,
            first_offset: 1,
            last_offset: 3,
            last_stable_offset: 4,
        }]),
        "rebuilt by the replay from snapshot 1"
    );
    let (_, aborted) = read_batches(&log, 0, Isolation::ReadCommitted);
    assert_eq!(
        aborted,
        vec![AbortedTxn {
            producer_id: 1,
            first_offset: 1
        }]
    );
}

/// The prune keeps the newest durable snapshot at or below the recorded recovery point (the
/// checkpoint's, which lags the log's own) besides the newest ones, and removes the rest.
#[test]
fn the_prune_keeps_the_snapshot_at_the_recovery_point() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path());
    let log = open(&m, cfg());
    let snapshots = |log: &Log| snapshot_offsets(&dir_of(log));
    for v in ["a", "b", "c", "d"] {
        log.append(data(v), AppendOrigin::Client, NOW).unwrap();
        log.roll(NOW).unwrap(); // snapshots at 1, 2, 3, 4
        log.flush().unwrap();
        if v == "b" {
            m.checkpoint().unwrap(); // the recorded recovery point: 2
        }
    }
    log.prune_snapshots();
    assert_eq!(
        snapshots(&log),
        vec![2, 3, 4],
        "the newest two, and the one at the recorded recovery point"
    );
    m.checkpoint().unwrap(); // 4
    log.prune_snapshots();
    assert_eq!(snapshots(&log), vec![3, 4]);
    for v in ["e", "f"] {
        log.append(data(v), AppendOrigin::Client, NOW).unwrap();
        log.roll(NOW).unwrap(); // snapshots at 5, 6, not yet durable
    }
    log.prune_snapshots();
    assert_eq!(snapshots(&log), vec![3, 4, 5, 6]);
    log.flush().unwrap();
    m.checkpoint().unwrap();
    log.prune_snapshots();
    assert_eq!(snapshots(&log), vec![5, 6]);
}

/// The recorded recovery point lags the log's own (a flush moved it, the checkpoint did not
/// yet): the prune keeps the snapshot at the recorded one, so a crash's open still rebuilds
/// the aborting segment's index by an exact replay (adversary finding on 4946b08).
#[test]
fn a_flush_after_the_checkpoint_keeps_the_snapshot_the_next_open_needs() {
    let d = tempfile::tempdir().unwrap();
    let dir = {
        let m = mgr(d.path());
        let log = open(&m, cfg());
        log.append(data("p"), AppendOrigin::Client, NOW).unwrap(); // 0
        log.roll(NOW).unwrap();
        log.flush().unwrap();
        m.checkpoint().unwrap(); // recorded: 1
        log.append(txn(1, 0, 1, "a", "1"), AppendOrigin::Client, NOW)
            .unwrap(); // 1
        log.roll(NOW).unwrap();
        log.append_marker(1, 0, 0, ControlType::Abort, NOW).unwrap(); // 2
        log.roll(NOW).unwrap();
        log.append(data("y"), AppendOrigin::Client, NOW).unwrap(); // 3
        log.flush().unwrap(); // the log's recovery point: 4; recorded: still 1
        log.prune_snapshots();
        dir_of(&log)
    };
    assert_eq!(snapshot_offsets(&dir), vec![1, 2, 3]);
    let m = mgr(d.path());
    let _log = open(&m, cfg());
    assert_eq!(
        txn_index(&dir, 2),
        Some(vec![TxnIndexEntry {
            producer_id: 1,
            first_offset: 1,
            last_offset: 2,
            last_stable_offset: 3,
        }])
    );
}

/// An unclean open takes its producer state from the newest snapshot, not from the older one
/// it replays the recovered segments' indexes from: the cleaner may have removed, between the
/// two, a producer's batch that only the newer one remembers, and a retry of that batch must
/// still be a duplicate (adversary finding on 4946b08).
#[test]
fn a_retry_of_a_batch_the_cleaner_removed_is_a_duplicate_after_a_crash() {
    let d = tempfile::tempdir().unwrap();
    let c = LogConfig {
        segment_bytes: 1100,
        cleanup: Cleanup {
            compact: true,
            delete: false,
            ..Cleanup::default()
        },
        ..cfg()
    };
    let big = "v".repeat(1000);
    {
        let m = mgr(d.path());
        let log = open(&m, c.clone());
        log.append(plain(9, 0, "big", &big), AppendOrigin::Client, NOW)
            .unwrap(); // 0
        log.roll(NOW).unwrap();
        log.flush().unwrap();
        m.checkpoint().unwrap(); // recorded: 1
        log.append(plain(7, 0, "k", "b1"), AppendOrigin::Client, NOW)
            .unwrap(); // 1: B1
        log.append(plain(8, 0, "k", "q"), AppendOrigin::Client, NOW)
            .unwrap(); // 2: the same key
        log.roll(NOW).unwrap(); // the snapshot at 3 holds B1
        log.append(plain(7, 1, "j", "b2"), AppendOrigin::Client, NOW)
            .unwrap(); // 3: B2
        m.clean_log(&tp()).unwrap().unwrap(); // removes B1
    } // a crash
    let m = mgr(d.path());
    let log = open(&m, c);
    let r = log.append(plain(7, 0, "k", "b1"), AppendOrigin::Client, NOW);
    assert!(
        matches!(&r, Ok(o) if o.duplicate && o.base_offset == 1),
        "{r:?}"
    );
}

/// A replay from an older snapshot for the recovered segments' indexes that meets an
/// unreadable batch below the recovery point (not validated) computes nothing: the open
/// keeps what it had rather than an index from a replay that lost track (adversary finding
/// on 4946b08).
#[test]
fn damage_below_the_recovery_point_keeps_a_recovered_segments_abort_entry() {
    let d = tempfile::tempdir().unwrap();
    let entry = TxnIndexEntry {
        producer_id: 1,
        first_offset: 2,
        last_offset: 3,
        last_stable_offset: 4,
    };
    let dir = {
        let m = mgr(d.path());
        let log = open(&m, cfg());
        log.append(data("p"), AppendOrigin::Client, NOW).unwrap(); // 0
        log.roll(NOW).unwrap(); // snapshot 1
        log.append(data("x"), AppendOrigin::Client, NOW).unwrap(); // 1
        log.append(txn(1, 0, 1, "a", "1"), AppendOrigin::Client, NOW)
            .unwrap(); // 2
        log.roll(NOW).unwrap();
        log.flush().unwrap();
        m.checkpoint().unwrap(); // recorded: 3
        log.append_marker(1, 0, 0, ControlType::Abort, NOW).unwrap(); // 3
        log.roll(NOW).unwrap();
        log.append(data("y"), AppendOrigin::Client, NOW).unwrap(); // 4
        assert_eq!(txn_index(&dir_of(&log), 3), Some(vec![entry]));
        dir_of(&log)
    };
    // The snapshot at 3 was lost; the header of the batch at 1 rotted.
    let snap3 = dir.join(sluice_format::segment_file_name(
        3,
        SegmentFileKind::Snapshot,
    ));
    std::fs::remove_file(snap3).unwrap();
    let seg1 = dir.join(sluice_format::segment_file_name(1, SegmentFileKind::Log));
    let mut b = std::fs::read(&seg1).unwrap();
    b[16] = 0x7f;
    std::fs::write(&seg1, &b).unwrap();
    let m = mgr(d.path());
    let _log = open(&m, cfg());
    assert_eq!(txn_index(&dir, 3), Some(vec![entry]));
}

/// Torn snapshots a crash left above the one an open loads are removed by the open, so the
/// prune that follows never keeps them in place of a readable one (adversary finding on
/// 4946b08).
#[test]
fn torn_snapshots_never_displace_a_readable_one() {
    let d = tempfile::tempdir().unwrap();
    let dir = {
        let m = mgr(d.path());
        let log = open(&m, cfg());
        log.append(data("p"), AppendOrigin::Client, NOW).unwrap();
        log.roll(NOW).unwrap();
        log.flush().unwrap();
        m.checkpoint().unwrap(); // recorded: 1
        for v in ["a", "b"] {
            log.append(data(v), AppendOrigin::Client, NOW).unwrap();
            log.roll(NOW).unwrap();
        }
        log.append(data("c"), AppendOrigin::Client, NOW).unwrap();
        dir_of(&log)
    }; // a host crash: the snapshots at 2 and 3 were never fsynced
    for o in [2, 3] {
        let path = dir.join(sluice_format::segment_file_name(
            o,
            SegmentFileKind::Snapshot,
        ));
        std::fs::write(path, b"").unwrap();
    }
    let m = mgr(d.path());
    let log = open(&m, cfg());
    log.prune_snapshots();
    let readable = snapshot_offsets(&dir)
        .into_iter()
        .filter(|&o| {
            let path = dir.join(sluice_format::segment_file_name(
                o,
                SegmentFileKind::Snapshot,
            ));
            sluice_format::snapshot::decode_snapshot(&std::fs::read(path).unwrap()).is_ok()
        })
        .count();
    assert!(readable > 0, "{:?}", snapshot_offsets(&dir));
}

/// A log re-opened after a failure keeps the recovery point last recorded, not the failed
/// log's own, for the prune: a crash before the next checkpoint still finds the snapshot at
/// the checkpoint's (adversary finding on cd6e13f).
#[test]
fn a_reopened_log_keeps_the_snapshot_at_the_checkpointed_recovery_point() {
    let d = tempfile::tempdir().unwrap();
    let dir = {
        let m = mgr(d.path());
        let log = open(&m, cfg());
        log.append(data("p"), AppendOrigin::Client, NOW).unwrap(); // 0
        log.roll(NOW).unwrap();
        log.flush().unwrap();
        m.checkpoint().unwrap(); // the file: 1
        log.append(txn(1, 0, 1, "a", "1"), AppendOrigin::Client, NOW)
            .unwrap(); // 1
        log.roll(NOW).unwrap();
        log.append_marker(1, 0, 0, ControlType::Abort, NOW).unwrap(); // 2
        log.roll(NOW).unwrap();
        log.append(data("y"), AppendOrigin::Client, NOW).unwrap(); // 3
        log.flush().unwrap(); // the log's own: 4; the file's: 1
        let new = m.reopen_log(&tp(), cfg()).unwrap().unwrap();
        new.flush().unwrap();
        new.prune_snapshots();
        dir_of(&new)
    }; // a crash before the next checkpoint
    let file = std::fs::read_to_string(d.path().join("recovery-point-offset-checkpoint")).unwrap();
    assert!(file.contains("txn 0 1"), "{file}");
    let kept = snapshot_offsets(&dir);
    let m = mgr(d.path());
    let _log = open(&m, cfg());
    assert_eq!(
        txn_index(&dir, 2),
        Some(vec![TxnIndexEntry {
            producer_id: 1,
            first_offset: 1,
            last_offset: 2,
            last_stable_offset: 3,
        }]),
        "snapshots left before the crash: {kept:?}"
    );
}

/// A transaction opened below the log start (DeleteRecords hid its first batch) is still
/// open after a crash that lost every snapshot: the replay reads the batches below the log
/// start too, and the LSO stays at the log start.
#[test]
fn lost_snapshots_keep_a_transaction_opened_below_the_log_start() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path());
    let log = open(&m, cfg());
    log.append(txn(1, 0, 1, "a", "1"), AppendOrigin::Client, NOW)
        .unwrap(); // 0: producer 1 opens
    log.append(data("w"), AppendOrigin::Client, NOW).unwrap(); // 1
    assert_eq!(log.delete_records_before(1).unwrap(), 1);
    for v in ["x", "y", "z"] {
        log.roll(NOW).unwrap();
        log.append(data(v), AppendOrigin::Client, NOW).unwrap();
    }
    assert_eq!(log.last_stable_offset(), 1);
    m.checkpoint().unwrap();
    let dir = dir_of(&log);
    drop(log);
    drop(m);
    remove_snapshots(&dir);
    let m = mgr(d.path());
    let log = open(&m, cfg());
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (1, 5));
    assert_eq!(
        log.last_stable_offset(),
        1,
        "the transaction at 0 is still open"
    );
    log.append_marker(1, 0, 0, ControlType::Abort, NOW).unwrap(); // 5
    let (_, aborted) = read_batches(&log, 1, Isolation::ReadCommitted);
    assert_eq!(
        aborted,
        vec![AbortedTxn {
            producer_id: 1,
            first_offset: 0
        }]
    );
}

/// A cluster takeover (`open_log_at`, shared dirs) finds the open transaction too.
#[test]
fn takeover_keeps_open_transactions() {
    let d = tempfile::tempdir().unwrap();
    let shared = |node| {
        LogManager::open_sharing(
            vec![d.path().to_path_buf()],
            MetaProperties {
                node_id: node,
                cluster_id: "shared-cluster-id-0000A".into(),
            },
            DeleteRetry::default(),
            Sharing::Shared,
        )
        .unwrap()
    };
    let a = shared(1);
    let log = a
        .open_log_at(&tp(), uuid::Uuid::from_u128(9), cfg(), 1, 0, 0)
        .unwrap();
    log.append(txn(5, 0, 1, "a", "1"), AppendOrigin::Client, NOW)
        .unwrap();
    log.roll(NOW).unwrap();
    log.append(txn(5, 1, 1, "a", "2"), AppendOrigin::Client, NOW)
        .unwrap();
    let rp = log.flush().unwrap();
    drop(log);
    let b = shared(2);
    let log = b
        .open_log_at(&tp(), uuid::Uuid::from_u128(9), cfg(), 2, rp, 0)
        .unwrap();
    assert_eq!(log.last_stable_offset(), 0);
    assert_eq!(log.producers()[0].current_txn_start_offset, 0);
    log.append_marker(5, 0, 0, ControlType::Abort, NOW).unwrap();
    assert_eq!(txn_index(&dir_of(&log), 1).unwrap()[0].first_offset, 0);
    drop(a);
}

/// Producer expiry never forgets a producer with an open transaction.
#[test]
fn expiry_keeps_producers_with_open_transactions() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path());
    let log = open(&m, cfg());
    log.append(txn(1, 0, 1, "a", "1"), AppendOrigin::Client, NOW)
        .unwrap();
    log.append(plain(2, 0, "b", "1"), AppendOrigin::Client, NOW)
        .unwrap();
    log.maintain(NOW + 30 * 24 * 3600 * 1000).unwrap();
    let ids: Vec<i64> = log.producers().iter().map(|p| p.producer_id).collect();
    assert_eq!(ids, vec![1]);
    assert_eq!(log.last_stable_offset(), 0);
}

/// Retention deletes a segment's `.txnindex` with its other files.
#[test]
fn retention_deletes_txnindex() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path());
    let log = open(&m, cfg());
    log.append(txn(1, 0, 1, "a", "1"), AppendOrigin::Client, NOW)
        .unwrap();
    log.append_marker(1, 0, 0, ControlType::Abort, NOW).unwrap();
    log.roll(NOW).unwrap();
    log.append(plain(2, 0, "b", "1"), AppendOrigin::Client, NOW)
        .unwrap();
    let dir = dir_of(&log);
    assert!(txn_index(&dir, 0).is_some());
    log.delete_records_before(2).unwrap();
    log.maintain(NOW).unwrap();
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("00000000000000000000."))
        .collect();
    assert!(names.is_empty(), "{names:?}");
    assert_eq!(log.log_start_offset(), 2);
}

/// A read_committed read lists the aborted transactions of the segments it returns data
/// from, even when DeleteRecords (or retention) removes those segments between finding the
/// data and listing them (issue 53): both come from one view of the segment list, as
/// Kafka's read does. The removed segment's files stay until the reader lets go of them.
#[test]
fn read_committed_lists_aborted_of_a_segment_deleted_mid_read() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path());
    let log = open(&m, cfg());
    log.append(txn(1, 0, 1, "a", "aborted"), AppendOrigin::Client, NOW)
        .unwrap(); // 0
    log.append_marker(1, 0, 0, ControlType::Abort, NOW).unwrap(); // 1
    log.roll(NOW).unwrap();
    log.append(plain(2, 0, "b", "1"), AppendOrigin::Client, NOW)
        .unwrap(); // 2
    let dir = dir_of(&log);
    // Between the read's data and its aborted transactions: the segment holding both goes.
    log.faults.lock().read_committed_gap = Some(crate::faults::Hook(Box::new(|l: &Log| {
        assert_eq!(l.delete_records_before(2).unwrap(), 2);
    })));
    let r = log
        .read_isolated(0, 1 << 20, true, Isolation::ReadCommitted)
        .unwrap();
    assert!(
        log.faults.lock().read_committed_gap.is_none(),
        "hook not run"
    );
    assert_eq!(log.log_start_offset(), 2);
    assert_eq!(log.segment_count(), 1);
    // The answer's offsets are those of the read's own look at the log, before the deletion
    // (the broker answers with them, as Kafka answers with those it took before its read).
    assert_eq!(
        (r.log_start_offset, r.high_watermark, r.last_stable_offset),
        (0, 3, 3)
    );
    // The data returned is the aborted batch and its marker...
    let slice = r.slice.expect("the read found data");
    let got: Vec<(i64, bool)> = parse_batches(&slice.read_bytes().unwrap(), None)
        .unwrap()
        .iter()
        .map(|b| (b.header.base_offset, b.header.is_control()))
        .collect();
    assert_eq!(got, vec![(0, false), (1, true)]);
    // ...so the aborted transaction must be listed with it, or a read_committed consumer
    // takes its records as committed.
    assert_eq!(
        r.aborted,
        Some(vec![AbortedTxn {
            producer_id: 1,
            first_offset: 0
        }])
    );
    // The deleted segment's files wait for the reader; once it is done they go.
    let deleted = dir.join(format!(
        "{}.deleted",
        sluice_format::segment_file_name(0, SegmentFileKind::Log)
    ));
    assert!(deleted.exists());
    drop(slice);
    log.maintain(NOW).unwrap();
    assert!(!deleted.exists());
}

/// Values of key `k` a read_committed consumer would see (records of aborted transactions
/// left out, as the consumer filters them).
fn committed_values(log: &Log) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let (_, mut aborted) = read_batches(log, 0, Isolation::ReadCommitted);
    aborted.sort_by_key(|a| a.first_offset);
    let mut aborted = aborted.into_iter().peekable();
    // As Kafka's consumer: a producer's batches are dropped from an aborted transaction's
    // first offset up to the producer's next marker.
    let mut aborting = std::collections::HashSet::new();
    let mut off = 0;
    loop {
        let r = log
            .read_isolated(off, 1 << 20, true, Isolation::ReadCommitted)
            .unwrap();
        let Some(slice) = r.slice else { break };
        let bytes = slice.read_bytes().unwrap();
        for b in parse_batches(&bytes, None).unwrap() {
            let h = b.header;
            off = h.next_offset();
            while let Some(a) = aborted.next_if(|a| a.first_offset <= h.last_offset()) {
                aborting.insert(a.producer_id);
            }
            if h.is_control() {
                aborting.remove(&h.producer_id);
                continue;
            }
            if h.is_transactional() && aborting.contains(&h.producer_id) {
                continue;
            }
            let body = &bytes[b.range()][sluice_format::HEADER_LEN..];
            for rec in sluice_format::records::parse_records(body, h.record_count).unwrap() {
                let k = String::from_utf8(body[rec.key.unwrap()].to_vec()).unwrap();
                let v = String::from_utf8(body[rec.value.unwrap()].to_vec()).unwrap();
                out.push((k, v));
            }
        }
    }
    out
}

/// The cleaner stops at the last stable offset, leaves aborted records out of its key map
/// and out of the cleaned segments (an aborted newer value never removes a committed older
/// one), keeps the markers, and the cleaned segment keeps the aborted transaction indexed.
#[test]
fn cleaner_drops_aborted_records_and_keeps_committed_ones() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path());
    let c = LogConfig {
        cleanup: Cleanup {
            compact: true,
            delete: false,
            ..Cleanup::default()
        },
        ..cfg()
    };
    let log = open(&m, c);
    log.append(txn(1, 0, 1, "k", "committed"), AppendOrigin::Client, NOW)
        .unwrap(); // 0
    log.append_marker(1, 0, 0, ControlType::Commit, NOW)
        .unwrap(); // 1
    log.append(txn(1, 1, 1, "k", "aborted"), AppendOrigin::Client, NOW)
        .unwrap(); // 2
    log.append_marker(1, 0, 0, ControlType::Abort, NOW).unwrap(); // 3
    log.append(txn(2, 0, 1, "j", "open"), AppendOrigin::Client, NOW)
        .unwrap(); // 4: open, holds the LSO
    log.roll(NOW).unwrap();
    log.append(plain(3, 0, "x", "1"), AppendOrigin::Client, NOW)
        .unwrap(); // 5
    log.roll(NOW).unwrap();
    assert_eq!(log.last_stable_offset(), 4);
    // The segment holding the LSO is not cleanable; the first one is.
    let range = log.cleanable(None, NOW, false);
    assert_eq!(range.first_uncleanable, 0);
    // Close producer 2's transaction; now both sealed segments are cleanable.
    log.append_marker(2, 0, 0, ControlType::Commit, NOW)
        .unwrap(); // 6
    log.roll(NOW).unwrap();
    let before = committed_values(&log);
    assert!(before.contains(&("k".into(), "committed".into())));
    m.clean_log(&tp()).unwrap().unwrap();
    let (batches, aborted) = read_batches(&log, 0, Isolation::ReadUncommitted);
    // The aborted record is gone, the committed one stays, every marker stays.
    let offsets: Vec<i64> = batches.iter().map(|b| b.0).collect();
    assert!(offsets.contains(&0), "{offsets:?}");
    assert!(
        !offsets.contains(&2) || batches.contains(&(2, false)),
        "{offsets:?}"
    );
    assert!(aborted.is_empty());
    let controls: Vec<i64> = batches.iter().filter(|b| b.1).map(|b| b.0).collect();
    assert_eq!(controls, vec![1, 3, 6]);
    assert_eq!(committed_values(&log), before);
    let uncommitted: Vec<(i64, bool)> = batches;
    assert!(
        !uncommitted.iter().any(|b| b.0 == 2 && !b.1) || {
            // Kept only as an empty batch (the producer's last batch).
            let r = log.read(2, 1 << 20, true).unwrap();
            let bytes = r.slice.unwrap().read_bytes().unwrap();
            parse_batches(&bytes, None).unwrap()[0].header.record_count == 0
        }
    );
    // The cleaned first segment still indexes the aborted transaction.
    let idx = txn_index(&dir_of(&log), 0).unwrap();
    assert_eq!(
        (idx[0].producer_id, idx[0].first_offset, idx[0].last_offset),
        (1, 2, 3)
    );
    let (_, aborted) = read_batches(&log, 0, Isolation::ReadCommitted);
    assert_eq!(aborted.len(), 1);
}

/// Issue 57: a segment's `.txnindex` is a file of the partition-file cache like its `.log`
/// and indexes: loaded by a read_committed fetch, it is closed again under the cache's cap
/// once idle and clean (it used to stay open for the segment's life, one descriptor per
/// segment with an aborted transaction that was ever read), and opened again on use.
#[test]
fn transaction_indexes_are_closed_by_the_file_cache_when_idle() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path());
    let log = open(&m, cfg());
    for i in 0..12i32 {
        log.append(txn(1, 2 * i, 2, "k", "aborted"), AppendOrigin::Client, NOW)
            .unwrap();
        log.append_marker(1, 0, 0, ControlType::Abort, NOW).unwrap();
        log.roll(NOW).unwrap();
    }
    log.flush().unwrap();
    m.shutdown().unwrap();
    drop(log);
    let m = mgr(d.path());
    let log = open(&m, cfg());
    let cache = crate::filecache::files();
    let before = usize::try_from(cache.stats().max).unwrap_or(usize::MAX);
    cache.set_max(4);
    let (_, aborted) = read_batches(&log, 0, Isolation::ReadCommitted);
    let segs = log.shared.read().segments.clone();
    let txn_files = |open_only: bool| {
        segs.iter()
            .filter(|s| {
                s.txn
                    .lock()
                    .file
                    .as_ref()
                    .is_some_and(|f| !open_only || f.is_open())
            })
            .count()
    };
    let (held, open_now) = (txn_files(false), txn_files(true));
    // Read again: every index reopens as needed.
    let (_, again) = read_batches(&log, 0, Isolation::ReadCommitted);
    cache.set_max(before);
    assert_eq!(aborted.len(), 12, "{aborted:?}");
    assert_eq!(again, aborted);
    assert_eq!(held, 12, "each segment's index was loaded");
    assert!(
        open_now <= 4,
        "{open_now} of 12 transaction indexes left open"
    );
}

/// Adversary helpers: a log whose segment 0 holds an aborted transaction (offsets 0, 1) and
/// segment 1 a plain batch (offset 2), written, shut down cleanly and opened again, so that
/// segment 0's transaction index is not loaded (below the recovery point).
fn reopened_with_unloaded_txnindex(dirs: &[PathBuf]) -> (Arc<LogManager>, Arc<Log>) {
    {
        let m = LogManager::open(dirs.to_vec(), meta()).unwrap();
        let log = open(&m, cfg());
        log.append(txn(1, 0, 1, "a", "aborted"), AppendOrigin::Client, NOW)
            .unwrap(); // 0
        log.append_marker(1, 0, 0, ControlType::Abort, NOW).unwrap(); // 1
        log.roll(NOW).unwrap();
        for i in 0..4 {
            log.append(plain(2, i, "b", "1"), AppendOrigin::Client, NOW)
                .unwrap(); // 2..
            log.roll(NOW).unwrap();
        }
        log.flush().unwrap();
        m.shutdown().unwrap();
    }
    let m = Arc::new(LogManager::open(dirs.to_vec(), meta()).unwrap());
    let log = open(&m, cfg());
    (m, log)
}

fn dir_index_of(dirs: &[PathBuf], log: &Log) -> usize {
    let parent = log.dir().parent().unwrap().to_path_buf();
    dirs.iter().position(|d| *d == parent).unwrap()
}

/// ADVERSARY (2511e39): after a log-dir move, a sealed segment whose transaction index was
/// never loaded has its `.txnindex` as a `CachedFile` (reopen_in), entries None. The cache
/// closes it (idle, clean). A second move renames the old directory to `-delete` by name;
/// a read_committed fetch that took its view before the move then lists the aborted
/// transactions of the old segments: the closed file is re-opened by its old path, which is
/// gone, and the fetch fails. Before 2511e39 the segment held the descriptor (`Arc<File>`)
/// and the fetch answered with the aborted transaction.
#[test]
fn a_read_committed_fetch_survives_a_second_move_of_a_closed_txnindex() {
    let ds: Vec<_> = (0..3).map(|_| tempfile::tempdir().unwrap()).collect();
    let dirs: Vec<PathBuf> = ds.iter().map(|d| d.path().to_path_buf()).collect();
    let (m, log) = reopened_with_unloaded_txnindex(&dirs);
    let first = dir_index_of(&dirs, &log);
    let second = (first + 1) % 3;
    let third = (first + 2) % 3;
    m.move_log(&tp(), second).unwrap();
    let seg0 = log.shared.read().segments[0].clone();
    // The move read every segment's aborted transactions into memory (a fetch in flight on
    // the old segments needs no name in a directory renamed away).
    assert!(seg0.txns_loaded(), "the move loaded segment 0's index");
    // The partition-file cache at a tiny cap (as under SLUICE_STORE_FILES_MAX / a low
    // sluice.log.open.files.max): idle clean files are closed as others open.
    let cache = crate::filecache::files();
    let before = usize::try_from(cache.stats().max).unwrap_or(usize::MAX);
    cache.set_max(1);
    let scratch = tempfile::tempdir().unwrap();
    let others: Vec<_> = (0..4)
        .map(|i| {
            crate::filecache::CachedFile::open(&scratch.path().join(format!("f{i}")), true).unwrap()
        })
        .collect();
    drop(seg0);
    let m2 = m.clone();
    log.faults.lock().read_committed_gap = Some(crate::faults::Hook(Box::new(move |_l: &Log| {
        // The partition moves on while the fetch is between its data and its aborted list.
        m2.move_log(&tp(), third).unwrap();
    })));
    let r = log.read_isolated(0, 1 << 20, true, Isolation::ReadCommitted);
    cache.set_max(before);
    drop(others);
    assert!(
        log.faults.lock().read_committed_gap.is_none(),
        "hook not run"
    );
    let r = r.expect("a read_committed fetch that succeeded before 2511e39");
    assert_eq!(
        r.aborted,
        Some(vec![AbortedTxn {
            producer_id: 1,
            first_offset: 0
        }])
    );
}

/// ADVERSARY (pre-existing, also before 2511e39): the same fetch across DeleteRecords of a
/// segment whose transaction index was never loaded. `rename_deleted` renames its
/// `.txnindex` by name (no CachedFile yet), then the read's `load` looks for
/// `<base>.txnindex` by name, finds nothing and takes the index as empty: the aborted
/// records go out as committed.
#[test]
fn a_read_committed_fetch_keeps_the_aborts_of_an_unloaded_segment_deleted_mid_read() {
    let d = tempfile::tempdir().unwrap();
    let dirs = vec![d.path().to_path_buf()];
    let (_m, log) = reopened_with_unloaded_txnindex(&dirs);
    assert!(!log.shared.read().segments[0].txns_loaded());
    log.faults.lock().read_committed_gap = Some(crate::faults::Hook(Box::new(|l: &Log| {
        assert_eq!(l.delete_records_before(2).unwrap(), 2);
    })));
    let r = log
        .read_isolated(0, 1 << 20, true, Isolation::ReadCommitted)
        .unwrap();
    assert!(
        log.faults.lock().read_committed_gap.is_none(),
        "hook not run"
    );
    let slice = r.slice.expect("data");
    let got: Vec<i64> = parse_batches(&slice.read_bytes().unwrap(), None)
        .unwrap()
        .iter()
        .map(|b| b.header.base_offset)
        .collect();
    assert_eq!(got[0], 0, "the aborted batch is returned");
    assert_eq!(
        r.aborted,
        Some(vec![AbortedTxn {
            producer_id: 1,
            first_offset: 0
        }]),
        "aborted records returned as committed"
    );
}

/// ADVERSARY (pre-existing, also before 2511e39): the same across a first log-dir move
/// (the old directory renamed to `-delete` by name while the segment's index is unloaded).
#[test]
fn a_read_committed_fetch_keeps_the_aborts_of_an_unloaded_segment_moved_mid_read() {
    let ds: Vec<_> = (0..2).map(|_| tempfile::tempdir().unwrap()).collect();
    let dirs: Vec<PathBuf> = ds.iter().map(|d| d.path().to_path_buf()).collect();
    let (m, log) = reopened_with_unloaded_txnindex(&dirs);
    let other = 1 - dir_index_of(&dirs, &log);
    assert!(!log.shared.read().segments[0].txns_loaded());
    let m2 = m.clone();
    log.faults.lock().read_committed_gap = Some(crate::faults::Hook(Box::new(move |_l: &Log| {
        m2.move_log(&tp(), other).unwrap();
    })));
    let r = log.read_isolated(0, 1 << 20, true, Isolation::ReadCommitted);
    assert!(
        log.faults.lock().read_committed_gap.is_none(),
        "hook not run"
    );
    let r = r.unwrap();
    assert_eq!(
        r.aborted,
        Some(vec![AbortedTxn {
            producer_id: 1,
            first_offset: 0
        }]),
        "aborted records returned as committed"
    );
}

/// ADVERSARY (7e1e27a): a topic deletion renames the partition directory to `-delete` by
/// name (`LogManager::delete_log`), with no `load_before_rename` of the segments'
/// transaction indexes. A read_committed fetch between its data and its aborted list then
/// looks for `<base>.txnindex` in the old directory, finds nothing and takes the index as
/// empty: the aborted records go out as committed.
#[test]
fn a_read_committed_fetch_never_loses_the_aborts_of_a_topic_deleted_mid_read() {
    let d = tempfile::tempdir().unwrap();
    let dirs = vec![d.path().to_path_buf()];
    let (m, log) = reopened_with_unloaded_txnindex(&dirs);
    assert!(!log.shared.read().segments[0].txns_loaded());
    let m2 = m.clone();
    log.faults.lock().read_committed_gap = Some(crate::faults::Hook(Box::new(move |_l: &Log| {
        m2.delete_log(&tp()).unwrap();
    })));
    let r = log.read_isolated(0, 1 << 20, true, Isolation::ReadCommitted);
    assert!(
        log.faults.lock().read_committed_gap.is_none(),
        "hook not run"
    );
    // An error is acceptable (the partition is gone); aborted records as committed are not.
    if let Ok(r) = r {
        if r.slice.is_some() {
            assert_eq!(
                r.aborted,
                Some(vec![AbortedTxn {
                    producer_id: 1,
                    first_offset: 0
                }]),
                "aborted records returned as committed"
            );
        }
    }
}

/// ADVERSARY (7e1e27a): a failed log's re-open (`LogManager::reopen_log`) opens new
/// `Segment`s over the same files; the failed log's segments keep entries None. DeleteRecords
/// on the new log renames `<base>.txnindex` through the *new* segment (its load_before_rename
/// loads the new segment's copy only). A read_committed fetch still on the failed log then
/// finds no `.txnindex` under its name: aborted records as committed.
#[test]
fn a_read_committed_fetch_on_a_failed_log_never_loses_the_aborts_its_re_open_deleted() {
    let d = tempfile::tempdir().unwrap();
    let dirs = vec![d.path().to_path_buf()];
    let (m, log) = reopened_with_unloaded_txnindex(&dirs);
    assert!(!log.shared.read().segments[0].txns_loaded());
    let m2 = m.clone();
    log.faults.lock().read_committed_gap = Some(crate::faults::Hook(Box::new(move |_l: &Log| {
        let new = m2.reopen_log(&tp(), cfg()).unwrap().expect("served");
        assert_eq!(new.delete_records_before(2).unwrap(), 2);
    })));
    let r = log.read_isolated(0, 1 << 20, true, Isolation::ReadCommitted);
    assert!(
        log.faults.lock().read_committed_gap.is_none(),
        "hook not run"
    );
    // An error is acceptable (the failed log was replaced: the client asks again, and the
    // new log answers); aborted records as committed are not.
    if let Ok(r) = r {
        assert!(r.slice.is_some());
        assert_eq!(
            r.aborted,
            Some(vec![AbortedTxn {
                producer_id: 1,
                first_offset: 0
            }]),
            "aborted records returned as committed"
        );
    }
}

/// Found by an adversary on ae24bf0, since fixed (`TxnIndex::replace` writes in place, then
/// cuts; the test stops the rewrite after its first step, `faults::stop_rewrite_after`): after
/// a recovery that resumed at the recovery point, the `.txnindex` entries
/// below the producer snapshot are taken from the file as it is (loader.rs, the `want`
/// branch for `replayed && !damaged`: `old.iter().filter(|e| e.last_offset < exact_from)`,
/// with `exact` true through `resumed_here`), on the ground that a flush of everything made
/// them durable. But every unclean open rewrites the recovered segment's index in place,
/// even unchanged (`!same || recovered`): `TxnIndex::replace` (txn.rs) cuts the file to 0,
/// writes, and only then fsyncs. A second crash after the cut reached storage and before
/// the write did leaves an empty, valid `.txnindex`; the next open resumes at the same
/// recovery point, keeps the empty index below the snapshot, and read_committed returns
/// the aborted records. A full validation of the segment (a replay from the snapshot at or
/// below its base) computes the entry again.
#[test]
fn a_second_crash_in_the_txnindex_rewrite_keeps_an_abort_below_the_snapshot() {
    let c = LogConfig {
        index_interval_bytes: 300,
        ..cfg()
    };
    let d = tempfile::tempdir().unwrap();
    let dir = {
        let m = mgr(d.path());
        let log = open(&m, c.clone());
        log.append(txn(1, 0, 1, "a", "aborted"), AppendOrigin::Client, NOW)
            .unwrap(); // 0: producer 1 opens
        log.append_marker(1, 0, 0, ControlType::Abort, NOW).unwrap(); // 1
        for i in 0..40 {
            log.append(data(&format!("filler-{i}")), AppendOrigin::Client, NOW)
                .unwrap();
        }
        assert!(log
            .advance_recovery_point_impl(crate::fsutil::now_ms(), 1, 0)
            .unwrap());
        assert_eq!(log.recovery_point_offset(), log.log_end_offset());
        m.checkpoint().unwrap();
        // Appended past the recovery point: the next open recovers (and rewrites) the index.
        for i in 0..3 {
            log.append(data(&format!("past-{i}")), AppendOrigin::Client, NOW)
                .unwrap();
        }
        dir_of(&log)
        // A crash.
    };
    let entries = txn_index(&dir, 0).unwrap();
    assert_eq!(entries.len(), 1);
    // The first unclean open resumes at the recovery point and rewrites the index; a second
    // crash after the rewrite's first step reached storage.
    crate::faults::stop_rewrite_after("txnindex", 1);
    assert!(mgr(d.path())
        .open_log(&tp(), uuid::Uuid::from_u128(9), c.clone(), 1)
        .is_err());
    let m = mgr(d.path());
    let log = open(&m, c);
    let (_, aborted) = read_batches(&log, 0, Isolation::ReadCommitted);
    assert_eq!(
        aborted,
        vec![AbortedTxn {
            producer_id: 1,
            first_offset: 0
        }],
        "read_committed must be told that offset 0 was aborted"
    );
    assert_eq!(txn_index(&dir, 0), Some(entries));
}

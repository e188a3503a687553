//! The write gate (`gate.rs`): once it is closed, nothing of a partition's files changes,
//! whichever path asks to write them.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use sluice_format::BatchBuilder;

use crate::tests::{cfg, NOW};
use crate::*;

/// A gate a test opens and closes, that also lets only one leader epoch write.
#[derive(Debug, Default)]
struct TestGate {
    closed: AtomicBool,
    epoch: AtomicI32,
}

impl WriteGate for TestGate {
    fn check(
        &self,
        _tp: &TopicPartition,
        _id: uuid::Uuid,
        leader_epoch: i32,
    ) -> Result<(), String> {
        if self.closed.load(Ordering::Acquire) {
            return Err("closed by the test".into());
        }
        let epoch = self.epoch.load(Ordering::Acquire);
        if leader_epoch != epoch {
            return Err(format!("epoch {leader_epoch} is not the held {epoch}"));
        }
        Ok(())
    }
}

fn tp() -> TopicPartition {
    TopicPartition {
        topic: "g".into(),
        partition: 0,
    }
}

fn manager(dir: &Path, gate: &Arc<TestGate>) -> LogManager {
    let m = LogManager::open_sharing(
        vec![dir.to_path_buf()],
        MetaProperties {
            node_id: 1,
            cluster_id: "gate-cluster-id-000000A".into(),
        },
        DeleteRetry::default(),
        Sharing::Shared,
    )
    .unwrap();
    m.set_write_gate(gate.clone());
    m
}

fn small() -> LogConfig {
    LogConfig {
        segment_bytes: 600,
        index_interval_bytes: 100,
        ..cfg()
    }
}

fn batch(tag: &str) -> Bytes {
    let mut b = BatchBuilder::new();
    for i in 0..4 {
        b = b.record(NOW + i, Some(b"k"), Some(format!("{tag}-{i}").as_bytes()));
    }
    Bytes::from(b.build())
}

/// Every file of the partition directory, by name, with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

fn is_fenced(e: &std::io::Error) -> bool {
    Fenced::in_io(e).is_some()
}

#[test]
fn a_closed_gate_leaves_every_file_as_it_was() {
    let d = tempfile::tempdir().unwrap();
    let gate = Arc::new(TestGate::default());
    gate.epoch.store(4, Ordering::Release);
    let m = manager(d.path(), &gate);
    let log = m
        .open_log(&tp(), uuid::Uuid::from_u128(9), small(), 4)
        .unwrap();
    for i in 0..12 {
        log.append(batch(&format!("b{i}")), AppendOrigin::Client, NOW)
            .unwrap();
    }
    assert!(log.segment_count() > 2, "the test needs sealed segments");
    // Index entries held back, a spare made, a transaction open: work waiting to be written.
    let mut txn = BatchBuilder::new().producer(7, 0, 0);
    txn.transactional = true;
    let txn = txn.record(NOW, None, Some(b"t"));
    log.append(Bytes::from(txn.build()), AppendOrigin::Client, NOW)
        .unwrap();
    log.flush().unwrap();
    let rp = log.recovery_point_offset();
    let dir = log.dir();
    gate.closed.store(true, Ordering::Release);
    let before = files(&dir);
    let leo = log.log_end_offset();

    let appended = log.append(batch("late"), AppendOrigin::Client, NOW);
    assert!(
        matches!(appended, Err(AppendError::Fenced(_))),
        "{appended:?}"
    );
    let marker = log.append_marker(7, 0, 0, ControlType::Commit, NOW);
    assert!(matches!(marker, Err(AppendError::Fenced(_))), "{marker:?}");
    let rolled = log.roll(NOW);
    assert!(rolled.as_ref().is_err_and(is_fenced), "{rolled:?}");
    let deleted = log.delete_records_before(leo - 1);
    assert!(matches!(deleted, Err(ReadError::Fenced(_))), "{deleted:?}");
    // Retention due on every sealed segment, and a time roll due on the active one.
    log.set_config(LogConfig {
        retention_ms: 1,
        segment_ms: 1,
        ..small()
    });
    log.maintain(NOW + 10_000_000).unwrap();
    m.maintain(NOW + 10_000_000);
    log.prepare_spare();
    log.flush().unwrap();
    assert_eq!(log.recovery_point_offset(), rp, "no index was written");
    assert_eq!(log.log_end_offset(), leo);
    assert_eq!(files(&dir), before, "a file changed behind a closed gate");

    // Open again: the same writes go through.
    gate.closed.store(false, Ordering::Release);
    log.append(batch("after"), AppendOrigin::Client, NOW)
        .unwrap();
    assert_eq!(log.log_end_offset(), leo + 4);
}

#[test]
fn a_log_opened_under_an_older_epoch_may_not_write() {
    let d = tempfile::tempdir().unwrap();
    let gate = Arc::new(TestGate::default());
    gate.epoch.store(5, Ordering::Release);
    let m = manager(d.path(), &gate);
    let log = m
        .open_log(&tp(), uuid::Uuid::from_u128(9), small(), 5)
        .unwrap();
    log.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
    // The partition was acquired again under a newer epoch: the log object of the older
    // acquisition writes nothing.
    gate.epoch.store(6, Ordering::Release);
    let dir = log.dir();
    let before = files(&dir);
    let appended = log.append(batch("b"), AppendOrigin::Client, NOW);
    assert!(
        matches!(appended, Err(AppendError::Fenced(_))),
        "{appended:?}"
    );
    assert_eq!(files(&dir), before);
    // Moved in place to the newer epoch (an acquisition again at the same owner), it writes.
    log.set_leader_epoch(6);
    log.append(batch("c"), AppendOrigin::Client, NOW).unwrap();
}

/// Names directly in the log dir `root`.
fn entries(root: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_closed_gate_leaves_a_deleted_topics_directory_in_place() {
    let d = tempfile::tempdir().unwrap();
    let gate = Arc::new(TestGate::default());
    gate.epoch.store(4, Ordering::Release);
    let m = manager(d.path(), &gate);
    let log = m
        .open_log(&tp(), uuid::Uuid::from_u128(9), small(), 4)
        .unwrap();
    for i in 0..6 {
        log.append(batch(&format!("b{i}")), AppendOrigin::Client, NOW)
            .unwrap();
    }
    log.flush().unwrap();
    let dir = log.dir();
    let before = files(&dir);
    let root = entries(d.path());
    // Past its write deadline, the broker learns that the topic was deleted: the partition
    // may have a new owner by now, whose files these could be.
    gate.closed.store(true, Ordering::Release);
    m.delete_log(&tp()).unwrap();
    m.maintain(NOW + 10_000_000);
    assert_eq!(entries(d.path()), root, "the directory was renamed");
    assert!(
        files(&dir) == before,
        "a file changed behind a closed gate: {:?}",
        files(&dir).keys()
    );
}

#[test]
fn deleting_a_topic_leaves_a_new_incarnations_directory_alone() {
    let d = tempfile::tempdir().unwrap();
    let gate = Arc::new(TestGate::default());
    gate.epoch.store(4, Ordering::Release);
    let old_broker = manager(d.path(), &gate);
    let old = old_broker
        .open_log(&tp(), uuid::Uuid::from_u128(9), small(), 4)
        .unwrap();
    old.append(batch("old"), AppendOrigin::Client, NOW).unwrap();
    let dir = old.dir();
    // The topic was deleted and created again under its name, and the new partition's owner
    // put the old directory aside and made its own, before this broker saw the deletion.
    std::fs::rename(&dir, d.path().join("elsewhere")).unwrap();
    let new_gate = Arc::new(TestGate::default());
    new_gate.epoch.store(1, Ordering::Release);
    let new_broker = manager(d.path(), &new_gate);
    let new = new_broker
        .open_log(&tp(), uuid::Uuid::from_u128(10), small(), 1)
        .unwrap();
    new.append(batch("new"), AppendOrigin::Client, NOW).unwrap();
    new.flush().unwrap();
    assert_eq!(new.dir(), dir);
    let before = files(&dir);
    old_broker.delete_log(&tp()).unwrap();
    old_broker.maintain(NOW);
    assert!(dir.is_dir(), "the new incarnation's directory was taken");
    assert!(files(&dir) == before, "{:?}", files(&dir).keys());
    new.append(batch("more"), AppendOrigin::Client, NOW)
        .unwrap();
}

#[test]
fn a_closed_gate_keeps_deleted_segments_for_the_owner_to_remove() {
    let d = tempfile::tempdir().unwrap();
    let gate = Arc::new(TestGate::default());
    gate.epoch.store(4, Ordering::Release);
    let m = manager(d.path(), &gate);
    let log = m
        .open_log(&tp(), uuid::Uuid::from_u128(9), small(), 4)
        .unwrap();
    for i in 0..12 {
        log.append(batch(&format!("b{i}")), AppendOrigin::Client, NOW)
            .unwrap();
    }
    log.flush().unwrap();
    log.publish(log.synced_mark());
    assert!(log.segment_count() > 2, "the test needs sealed segments");
    // A reader holds the oldest segment while DeleteRecords removes it: its files are
    // renamed to `.deleted` and wait for the reader.
    let held = log.read(0, 1 << 20, true).unwrap().slice.unwrap();
    let start = log.delete_records_before(24).unwrap();
    assert_eq!(start, 24);
    let dir = log.dir();
    let deleted = |dir: &Path| -> Vec<String> {
        files(dir)
            .into_keys()
            .filter(|n| n.ends_with(".deleted"))
            .collect()
    };
    assert!(!deleted(&dir).is_empty(), "{:?}", files(&dir).keys());
    // The broker may no longer write the partition's files (another broker took it over, and
    // may hold files of these names), then the reader lets go.
    gate.closed.store(true, Ordering::Release);
    let before = files(&dir);
    drop(held);
    // What the reaper thread does every half second.
    m.inner.reap_all(NOW);
    m.maintain(NOW);
    assert!(
        files(&dir) == before,
        "unlinked behind a closed gate: {:?}",
        files(&dir).keys()
    );
    // Open again: the owner's own removal goes through.
    gate.closed.store(false, Ordering::Release);
    m.inner.reap_all(NOW);
    assert!(deleted(&dir).is_empty(), "{:?}", files(&dir).keys());
}

/// A gate that refuses once a cleaned segment's `.swap` file is in the partition directory:
/// the broker's ownership was lost between the cleaner's two checks (before it renames its
/// files to `.swap`, and before it switches the segments).
#[derive(Debug)]
struct LostDuringSwap(std::path::PathBuf);

impl WriteGate for LostDuringSwap {
    fn check(
        &self,
        _tp: &TopicPartition,
        _id: uuid::Uuid,
        _leader_epoch: i32,
    ) -> Result<(), String> {
        let swapping = std::fs::read_dir(&self.0)
            .map(|d| {
                d.flatten()
                    .any(|e| e.file_name().to_string_lossy().ends_with(".swap"))
            })
            .unwrap_or(false);
        if swapping {
            return Err("taken over by another broker".into());
        }
        Ok(())
    }
}

fn compacted() -> LogConfig {
    LogConfig {
        segment_bytes: 2000,
        index_interval_bytes: 200,
        cleanup: Cleanup {
            compact: true,
            delete: true,
            min_cleanable_dirty_ratio: 0.01,
            min_compaction_lag_ms: 0,
            ..Cleanup::default()
        },
        ..crate::tests::cfg()
    }
}

fn bases(log: &Log) -> Vec<i64> {
    log.shared
        .read()
        .segments
        .iter()
        .map(|s| s.base_offset)
        .collect()
}

#[test]
fn a_swap_refused_by_the_gate_never_brings_back_deleted_segments() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("g-0");
    let id = uuid::Uuid::from_u128(9);
    let old_broker = LogManager::open_sharing(
        vec![d.path().to_path_buf()],
        MetaProperties {
            node_id: 1,
            cluster_id: "gate-cluster-id-000000A".into(),
        },
        DeleteRetry::default(),
        Sharing::Shared,
    )
    .unwrap();
    old_broker.set_write_gate(Arc::new(LostDuringSwap(dir.clone())));
    let old = old_broker.open_log(&tp(), id, compacted(), 1).unwrap();
    for round in 0..10 {
        for k in 0..12 {
            let b = BatchBuilder::new().record(
                NOW,
                Some(format!("k{k}").as_bytes()),
                Some(format!("v{round}-{k}-{}", "x".repeat(40)).as_bytes()),
            );
            old.append(Bytes::from(b.build()), AppendOrigin::Client, NOW)
                .unwrap();
        }
    }
    old.roll(NOW).unwrap();
    old.flush().unwrap();
    old.publish(old.synced_mark());
    let end = old.log_end_offset();

    // Another broker takes the partition over (the former owner, paused, does not know yet).
    let gate = Arc::new(TestGate::default());
    gate.epoch.store(2, Ordering::Release);
    let new_broker = manager(d.path(), &gate);
    let new = new_broker.open_log(&tp(), id, compacted(), 2).unwrap();
    new.roll(NOW).unwrap();
    new.flush().unwrap();
    new.publish(new.synced_mark());
    assert!(bases(&new).len() > 4, "{:?}", bases(&new));

    // The former owner's cleaning passed the gate before the takeover, wrote its cleaned
    // segment and renamed it to `.swap`; the switch is refused, and the files stay.
    let cleaned = old_broker.clean_log(&tp());
    assert!(
        !matches!(cleaned, Ok(Some(_))),
        "the swap went through: {cleaned:?}"
    );
    let swaps: Vec<String> = files(&dir)
        .into_keys()
        .filter(|n| n.ends_with(".swap"))
        .collect();
    assert!(!swaps.is_empty(), "{:?}", files(&dir).keys());

    // The new owner deletes records (DeleteRecords; retention does the same): the oldest
    // segments go.
    let start = bases(&new)[3];
    assert_eq!(new.delete_records_before(start).unwrap(), start);
    assert_eq!(bases(&new)[0], start);
    new_broker.release_log(&tp()).unwrap();
    drop(new);

    // The next owner's open must not bring them back (nor lose anything after them).
    let third_gate = Arc::new(TestGate::default());
    third_gate.epoch.store(3, Ordering::Release);
    let third = manager(d.path(), &third_gate);
    let log = third.open_log(&tp(), id, compacted(), 3).unwrap();
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(
        log.log_start_offset(),
        start,
        "segments deleted below the log start came back: {:?}",
        bases(&log)
    );
    assert!(bases(&log).iter().all(|b| *b >= start), "{:?}", bases(&log));
    let names: Vec<String> = files(&dir).into_keys().collect();
    assert!(!names.iter().any(|n| n.ends_with(".swap")), "{names:?}");
}

/// Recovery writes (a torn tail cut, indexes rebuilt, snapshots removed, the directory made
/// durable) pass the gate too: a takeover whose broker lost the partition while it read the
/// files (its write deadline passed during a long scan) leaves them as they were for the
/// owner that took the partition since.
#[test]
fn an_open_that_lost_the_partition_writes_nothing() {
    let d = tempfile::tempdir().unwrap();
    let gate = Arc::new(TestGate::default());
    gate.epoch.store(1, Ordering::Release);
    let m = manager(d.path(), &gate);
    let log = m
        .open_log(&tp(), uuid::Uuid::from_u128(9), small(), 1)
        .unwrap();
    for i in 0..6 {
        log.append(batch(&format!("b{i}")), AppendOrigin::Client, NOW)
            .unwrap();
    }
    let rp = log.flush().unwrap();
    let dir = log.dir();
    m.release_log(&tp()).unwrap();
    drop(log);
    drop(m);
    // A torn write at the end of the last segment: recovery would cut it.
    let last = files(&dir)
        .into_keys()
        .filter(|n| n.ends_with(".log"))
        .max()
        .unwrap();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.join(&last))
        .unwrap();
    std::io::Write::write_all(&mut f, &[0xAB; 37]).unwrap();
    drop(f);
    let before = files(&dir);

    // The next owner opens under epoch 2, which the gate no longer lets write.
    gate.epoch.store(3, Ordering::Release);
    let m = manager(d.path(), &gate);
    let opened = m.open_log_at(&tp(), uuid::Uuid::from_u128(9), small(), 2, rp, 0);
    let err = opened.expect_err("an open that may not write is refused");
    assert!(err.to_string().contains("stopped opening the log"), "{err}");
    assert_eq!(files(&dir), before, "the open changed the files");
}

/// ADVERSARY (9608008): the open no longer checks (and rebuilds, through `may_write`) the
/// index files of the sealed segments below the recovery point: they are checked on first
/// use, by `Segment::ensure_loaded` / `Segment::timestamps`, whose rebuild
/// (`write_index_files`: `set_len(0)` then the entries) asks no write gate. A log whose
/// gate has closed (a former owner still answering reads, or a deposed opener) then
/// rewrites files of the partition behind the closed gate, under the new owner.
#[test]
fn a_closed_gate_leaves_index_files_as_they_were_on_first_use() {
    let d = tempfile::tempdir().unwrap();
    let gate = Arc::new(TestGate::default());
    gate.epoch.store(4, Ordering::Release);
    let m = manager(d.path(), &gate);
    let log = m
        .open_log(&tp(), uuid::Uuid::from_u128(9), small(), 4)
        .unwrap();
    for i in 0..12 {
        log.append(batch(&format!("b{i}")), AppendOrigin::Client, NOW)
            .unwrap();
    }
    assert!(log.segment_count() > 2, "the test needs sealed segments");
    let rp = log.flush().unwrap();
    let dir = log.dir();
    m.release_log(&tp()).unwrap();
    drop(log);
    // A sealed segment's time index is damaged.
    std::fs::write(dir.join(format!("{:020}.timeindex", 0)), b"xyz").unwrap();

    gate.epoch.store(5, Ordering::Release);
    let log = m
        .open_log_at(&tp(), uuid::Uuid::from_u128(9), small(), 5, rp, 0)
        .unwrap();
    // The ownership is lost (a newer epoch holds the partition); the log still answers.
    gate.closed.store(true, Ordering::Release);
    let before = files(&dir);
    let _ = log.read(0, 1 << 20, true);
    let _ = log.max_timestamp();
    let _ = log.offset_for_timestamp(NOW);
    let after = files(&dir);
    let changed: Vec<&String> = after
        .iter()
        .filter(|(name, bytes)| before.get(*name) != Some(*bytes))
        .map(|(name, _)| name)
        .collect();
    assert!(
        changed.is_empty(),
        "changed behind a closed gate: {changed:?}"
    );
}

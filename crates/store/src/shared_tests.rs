//! Shared log dirs (cluster mode): a takeover by another broker, and a former owner that
//! keeps appending after it.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use sluice_format::{parse_batches, BatchBuilder};

use crate::tests::{cfg, NOW};
use crate::*;

fn broker(dir: &Path, node_id: i32) -> LogManager {
    broker_of(&[dir], node_id)
}

fn tp() -> TopicPartition {
    TopicPartition {
        topic: "t".into(),
        partition: 0,
    }
}

fn open(m: &LogManager, epoch: i32) -> Arc<Log> {
    m.open_log(&tp(), uuid::Uuid::from_u128(7), cfg(), epoch)
        .unwrap()
}

/// Take the partition over under `epoch` at the recovery point its previous owner recorded.
fn take_over(m: &LogManager, epoch: i32, rp: i64) -> Result<Arc<Log>, StoreError> {
    take_over_recorded(m, epoch, rp, 0)
}

/// A takeover whose previous owner recorded `rp` and published data up to segment `newest`.
fn take_over_recorded(
    m: &LogManager,
    epoch: i32,
    rp: i64,
    newest: i64,
) -> Result<Arc<Log>, StoreError> {
    m.open_log_at(&tp(), uuid::Uuid::from_u128(7), cfg(), epoch, rp, newest)
}

/// What `log`'s owner would record of its sealed segments (`crate::sealed`): those below its
/// active segment.
fn recorded(log: &Log) -> SealedDigest {
    let active = log.shared.read().segments.last().unwrap().base_offset;
    log.sealed_digest(active)
}

/// A takeover given the record of the previous owner, `sealed` included when `trust`.
fn take_over_trusting(
    m: &LogManager,
    epoch: i32,
    rp: i64,
    sealed: SealedDigest,
    trust: bool,
) -> Result<Arc<Log>, StoreError> {
    m.open_log_recorded(
        &tp(),
        uuid::Uuid::from_u128(7),
        cfg(),
        epoch,
        Recorded {
            recovery_point: rp,
            newest_segment: 0,
            sealed: trust.then_some(sealed),
            switch: None,
            snapshot: None,
        },
    )
}

/// A planned move off `m`: the owner appends a batch per tag, then hands the partition over;
/// returns the recovery point it recorded.
fn append_and_hand_over(m: &LogManager, tags: &[&str]) -> i64 {
    let old = open(m, 1);
    for tag in tags {
        old.append(batch(tag), AppendOrigin::Client, NOW).unwrap();
    }
    m.hand_over_log(&tp(), NOW).unwrap().unwrap()
}

fn batch(tag: &str) -> Bytes {
    let mut b = BatchBuilder::new();
    for i in 0..3 {
        b = b.record(NOW + i, Some(b"k"), Some(format!("{tag}-{i}").as_bytes()));
    }
    Bytes::from(b.build())
}

/// (base offset, tag) of every batch readable from offset 0; the tag is found in the batch's
/// bytes (the records are not compressed, so their values appear as written).
fn batches(log: &Log) -> Vec<(i64, &'static str)> {
    let mut out = Vec::new();
    let mut off = 0;
    loop {
        let r = log.read(off, 1 << 20, true).unwrap();
        let Some(slice) = r.slice else { break };
        let bytes = slice.read_bytes().unwrap();
        for b in parse_batches(&bytes, None).unwrap() {
            let start = b.position;
            let raw = &bytes[start..start + b.header.total_len()];
            let tag = ["stale-0", "a-0", "b-0", "c-0", "d-0", "e-0"]
                .into_iter()
                .find(|t| raw.windows(t.len()).any(|w| w == t.as_bytes()))
                .unwrap_or("?");
            out.push((b.header.base_offset, tag));
            off = b.header.next_offset();
        }
    }
    out
}

#[test]
fn a_former_owner_appending_after_a_takeover_is_never_read() {
    let dir = tempfile::tempdir().unwrap();
    let old_broker = broker(dir.path(), 1);
    let old = open(&old_broker, 1);
    old.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
    old.append(batch("b"), AppendOrigin::Client, NOW).unwrap();

    // Another broker takes the partition over: it recovers the files and starts a segment.
    let new_broker = broker(dir.path(), 2);
    let new = open(&new_broker, 2);
    new.roll(NOW).unwrap();
    assert_eq!(new.log_end_offset(), 6);
    assert_eq!(new.segment_count(), 2);

    // The former owner, paused until now, appends to the segment it had open.
    old.append(batch("stale"), AppendOrigin::Client, NOW)
        .unwrap();
    old.flush().unwrap();
    new.append(batch("c"), AppendOrigin::Client, NOW).unwrap();

    let expected = vec![(0, "a-0"), (3, "b-0"), (6, "c-0")];
    assert_eq!(batches(&new), expected);

    // And after the next takeover (or a restart), recovery cuts the stale batch.
    new_broker.release_log(&tp()).unwrap();
    let third = broker(dir.path(), 3);
    let log = open(&third, 3);
    assert_eq!(batches(&log), expected);
    assert_eq!(log.log_end_offset(), 9);
}

#[test]
fn shared_dirs_keep_no_per_dir_files() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let log = open(&a, 1);
    log.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
    a.checkpoint().unwrap();
    a.shutdown().unwrap();
    // A second broker with another node id opens the same dir.
    let b = broker(dir.path(), 2);
    assert_eq!(open(&b, 2).log_end_offset(), 3);
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, vec!["meta.properties", "t-0"]);
    let props = std::fs::read_to_string(dir.path().join("meta.properties")).unwrap();
    assert!(!props.contains("node.id"), "{props}");
}

#[test]
fn bounded_reads_see_only_what_was_published() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path(), 1);
    let log = open(&b, 1);
    log.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
    // No flush yet: the unset mark publishes nothing (it would hide the whole log).
    log.publish(log.synced_mark());
    assert_eq!(log.high_watermark(), 3);
    log.flush().unwrap();
    let first = log.synced_mark();
    assert_eq!(first.offset, 3);
    log.publish(first);
    // Appended, not synced: invisible, though the offset is in range.
    log.append(batch("b"), AppendOrigin::Client, NOW).unwrap();
    assert_eq!(log.high_watermark(), 3);
    assert_eq!(batches(&log), vec![(0, "a-0")]);
    assert!(log.read(3, 1 << 20, true).unwrap().slice.is_none());
    // Synced but not yet published (the ownership check has not confirmed it): invisible.
    log.sync_appended().unwrap();
    let second = log.synced_mark();
    assert_eq!(second.offset, 6);
    assert_eq!(batches(&log), vec![(0, "a-0")]);
    // A roll after the mark: the mark still cuts the older segment where it was taken.
    log.roll(NOW).unwrap();
    log.append(batch("c"), AppendOrigin::Client, NOW).unwrap();
    log.publish(second);
    assert_eq!(log.high_watermark(), 6);
    assert_eq!(batches(&log), vec![(0, "a-0"), (3, "b-0")]);
    // Marks only move forward.
    log.publish(first);
    assert_eq!(log.high_watermark(), 6);
    log.flush().unwrap();
    log.publish(log.synced_mark());
    assert_eq!(batches(&log), vec![(0, "a-0"), (3, "b-0"), (6, "c-0")]);
    assert_eq!(log.high_watermark(), 9);
}

fn pbatch(seq: i32) -> Bytes {
    Bytes::from(
        BatchBuilder::new()
            .producer(42, 0, seq)
            .record(NOW, None, Some(b"v"))
            .build(),
    )
}

/// Each takeover starts a segment; producer state must still reach back past the empty ones, or
/// a producer's honest retry after a failover is refused (or appended twice).
#[test]
fn producer_state_survives_takeovers_that_leave_empty_segments() {
    for sharing in [Sharing::Shared, Sharing::Exclusive] {
        let dir = tempfile::tempdir().unwrap();
        let m = |node| {
            LogManager::open_sharing(
                vec![dir.path().to_path_buf()],
                MetaProperties {
                    node_id: if sharing == Sharing::Shared { node } else { 1 },
                    cluster_id: "shared-cluster-id-0000A".into(),
                },
                DeleteRetry::default(),
                sharing,
            )
            .unwrap()
        };
        let first = m(1);
        let log = open(&first, 1);
        for seq in 0..3 {
            log.append(pbatch(seq), AppendOrigin::Client, NOW).unwrap();
            log.roll(NOW).unwrap();
        }
        first.release_log(&tp()).unwrap();
        // Two takeovers in a row with nothing appended in between.
        for node in [2, 3] {
            let b = m(node);
            let log = open(&b, node);
            log.roll(NOW).unwrap();
            b.release_log(&tp()).unwrap();
        }
        let last = m(4);
        let log = open(&last, 4);
        // A retry of the batch with sequence 1 (its first answer was lost in the failover).
        let retry = log.append(pbatch(1), AppendOrigin::Client, NOW).unwrap();
        assert!(retry.duplicate, "{sharing:?}: {retry:?}");
        assert_eq!(retry.base_offset, 1, "{sharing:?}");
        let next = log.append(pbatch(3), AppendOrigin::Client, NOW).unwrap();
        assert!(!next.duplicate);
        assert_eq!(next.base_offset, 3, "{sharing:?}");
    }
}

/// A former owner rolled (its new segment file and producer snapshot reached the server)
/// but the batch before the roll never did (not fsynced): the next owner finds an empty
/// active segment above the end of the data. The snapshot there counts a batch that is not
/// in the log; it must not be trusted, or the producer's retry of that batch is taken for a
/// duplicate and never stored.
#[test]
fn a_snapshot_above_data_that_never_reached_storage_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let log = open(&a, 1);
    for seq in 0..3 {
        log.append(pbatch(seq), AppendOrigin::Client, NOW).unwrap();
    }
    log.roll(NOW).unwrap(); // 3.log and 3.snapshot, with producer 42 at sequence 2
    a.release_log(&tp()).unwrap();
    // The bytes of the batch at 2 never reached storage.
    let seg0 = dir
        .path()
        .join("t-0")
        .join(sluice_format::segment_file_name(
            0,
            sluice_format::SegmentFileKind::Log,
        ));
    let bytes = std::fs::read(&seg0).unwrap();
    let kept: usize = parse_batches(&bytes, None).unwrap()[..2]
        .iter()
        .map(|b| b.header.total_len())
        .sum();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&seg0)
        .unwrap()
        .set_len(kept as u64)
        .unwrap();
    let b = broker(dir.path(), 2);
    let log = open(&b, 2);
    let retry = log.append(pbatch(2), AppendOrigin::Client, NOW).unwrap();
    assert!(
        !retry.duplicate,
        "the retry was taken for a duplicate: {retry:?}"
    );
}

/// A takeover that trusts the previous owner's recovery point reads only the newest segments,
/// but still cuts what a former owner appended to a segment sealed below that point.
#[test]
fn trusted_sealed_segments_still_lose_what_a_former_owner_appended() {
    // With the owner's record of its sealed segments, written before or after the former
    // owner's late write landed: it is made from what the owner holds, never from the files.
    for trust in [false, true] {
        for recorded_after in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let a = broker(dir.path(), 1);
            let old = open(&a, 1);
            old.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
            old.roll(NOW).unwrap();
            old.append(batch("b"), AppendOrigin::Client, NOW).unwrap();

            let b = broker(dir.path(), 2);
            let new = open(&b, 2);
            new.roll(NOW).unwrap();
            let before = recorded(&new);
            // The former owner, unaware, appends to its active segment (sealed for everyone
            // else).
            old.append(batch("stale"), AppendOrigin::Client, NOW)
                .unwrap();
            old.flush().unwrap();
            new.append(batch("c"), AppendOrigin::Client, NOW).unwrap();
            let rp = new.flush().unwrap();
            assert_eq!(rp, 9);
            let sealed = if recorded_after {
                recorded(&new)
            } else {
                before
            };
            assert_eq!(sealed, before);
            b.release_log(&tp()).unwrap();

            let c = broker(dir.path(), 3);
            let log = take_over_trusting(&c, 3, rp, sealed, trust).unwrap();
            assert_eq!(
                batches(&log),
                vec![(0, "a-0"), (3, "b-0"), (6, "c-0")],
                "record trusted: {trust}"
            );
            assert_eq!(log.log_end_offset(), 9);
        }
    }
}

/// Issue 51 item 5: a takeover whose listing matches the previous owner's record of its
/// sealed segments opens none of them (no tail, stray or epoch check: its work does not
/// grow with their number); they are opened when read, and read whole.
#[test]
fn a_takeover_trusting_the_record_opens_no_sealed_segment() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let old = open(&a, 1);
    let mut expected = Vec::new();
    for i in 0..20 {
        old.append(batch(&format!("s{i}")), AppendOrigin::Client, NOW)
            .unwrap();
        old.roll(NOW).unwrap();
        expected.push(3 * i);
    }
    let rp = old.flush().unwrap();
    assert_eq!(rp, 60);
    let sealed = recorded(&old);
    assert_eq!(sealed.count, 20);
    a.release_log(&tp()).unwrap();

    let c = broker(dir.path(), 2);
    let log = take_over_trusting(&c, 2, rp, sealed, true).unwrap();
    let open_sealed = {
        let s = log.shared.read();
        let n = s.segments.len();
        s.segments[..n - 1]
            .iter()
            .filter(|seg| seg.log.is_open() || seg.index_file.is_open())
            .map(|seg| seg.base_offset)
            .collect::<Vec<_>>()
    };
    // At most the newest ones whose batches give recent producers their history
    // (`PRODUCER_STATE_SEGMENTS`; the newest's first batch also tells that the epoch
    // checkpoint is current).
    assert_eq!(crate::log::PRODUCER_STATE_SEGMENTS, 2);
    assert!(open_sealed.iter().all(|b| *b >= 54), "{open_sealed:?}");
    let got: Vec<i64> = batches(&log).into_iter().map(|(o, _)| o).collect();
    assert_eq!(got, expected);
    assert_eq!(log.end_offset_for_epoch(1), Some((1, 60)));
}

/// Issue 51 item 2: a former owner's roll that passed the write gate and then stalled
/// creates `<its log end>.log` inside the data the new owner appends afterwards. Whatever
/// the next owner trusts (the recovery point the new owner recorded, or nothing), the new
/// owner's records past that offset are kept and the stray segment is removed: the batches
/// reaching its base were written under a newer epoch than the stray's.
#[test]
fn a_former_owners_late_roll_never_cuts_the_new_owners_records() {
    for (trust_recovery_point, trust_record) in [(true, true), (true, false), (false, false)] {
        for stray_batch in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let a = broker(dir.path(), 1);
            let old = open(&a, 1);
            old.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
            old.append(batch("b"), AppendOrigin::Client, NOW).unwrap(); // 3..5

            let b = broker(dir.path(), 2);
            let new = open(&b, 2);
            new.roll(NOW).unwrap(); // the new owner's segment at 6
            new.append(batch("c"), AppendOrigin::Client, NOW).unwrap(); // 6..8
                                                                        // The former owner's stalled write lands: it appends to the segment it had open
                                                                        // (3 records: its log end is 9), rolls there, and with `stray_batch` writes one
                                                                        // batch into the new segment (a size roll inside an append).
            old.append(batch("stale"), AppendOrigin::Client, NOW)
                .unwrap();
            old.roll(NOW).unwrap();
            if stray_batch {
                old.append(batch("stale"), AppendOrigin::Client, NOW)
                    .unwrap();
            }
            old.flush().unwrap();
            assert!(dir
                .path()
                .join("t-0")
                .join("00000000000000000009.log")
                .exists());
            new.append(batch("d"), AppendOrigin::Client, NOW).unwrap(); // 9..11
            new.append(batch("e"), AppendOrigin::Client, NOW).unwrap(); // 12..14
            let rp = new.flush().unwrap();
            assert_eq!(rp, 15);
            let sealed = recorded(&new);
            b.release_log(&tp()).unwrap();

            let c = broker(dir.path(), 3);
            let log = if trust_recovery_point {
                take_over_trusting(&c, 3, rp, sealed, trust_record).unwrap()
            } else {
                open(&c, 3)
            };
            let expected = vec![(0, "a-0"), (3, "b-0"), (6, "c-0"), (9, "d-0"), (12, "e-0")];
            assert_eq!(
                batches(&log),
                expected,
                "recovery point trusted: {trust_recovery_point}, record: {trust_record}, stray batch: {stray_batch}"
            );
            assert_eq!(log.log_end_offset(), 15);
            assert!(!dir
                .path()
                .join("t-0")
                .join("00000000000000000009.log")
                .exists());
        }
    }
}

/// A former owner's seal that passed the write gate and then stalled writes
/// `<its log end>.snapshot` inside the new owner's data: a producer state counting a batch
/// the new owner cut. The next owner does not trust it, or that producer's retry would be
/// taken for a duplicate and never stored.
#[test]
fn a_former_owners_late_snapshot_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let old = open(&a, 1);
    old.append(batch("a"), AppendOrigin::Client, NOW).unwrap(); // 0..2

    let b = broker(dir.path(), 2);
    let new = open(&b, 2);
    new.roll(NOW).unwrap(); // at 3
    new.append(batch("b"), AppendOrigin::Client, NOW).unwrap(); // 3..5
    new.append(batch("c"), AppendOrigin::Client, NOW).unwrap(); // 6..8
                                                                // The former owner appends the producer's batch (never acknowledged: it was cut) and its
                                                                // stalled close seals and writes the snapshot at its log end, 4.
    old.append(pbatch(0), AppendOrigin::Client, NOW).unwrap();
    a.close_log(&tp()).unwrap();
    assert!(dir
        .path()
        .join("t-0")
        .join("00000000000000000004.snapshot")
        .exists());
    assert!(!dir
        .path()
        .join("t-0")
        .join("00000000000000000004.log")
        .exists());
    let rp = new.flush().unwrap();
    b.release_log(&tp()).unwrap();

    let c = broker(dir.path(), 3);
    let log = take_over(&c, 3, rp).unwrap();
    assert_eq!(batches(&log), vec![(0, "a-0"), (3, "b-0"), (6, "c-0")]);
    // The producer sends its batch again, to the owner now.
    let retry = log.append(pbatch(0), AppendOrigin::Client, NOW).unwrap();
    assert!(!retry.duplicate, "{retry:?}");
    assert_eq!(retry.base_offset, 9);
}

/// A planned hand-over: the owner stops appending, seals its active segment and makes
/// everything durable; the next owner opens at the recovery point it was handed, with nothing
/// after it to recover, and appends to a segment file of its own (the handed-over empty one's
/// files are replaced, as any empty last segment's a former owner left).
#[test]
fn a_hand_over_leaves_the_next_owner_nothing_to_recover() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let old = open(&a, 1);
    old.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
    old.append(batch("b"), AppendOrigin::Client, NOW).unwrap();
    let rp = a.hand_over_log(&tp(), NOW).unwrap().unwrap();
    assert_eq!(rp, 6);
    assert!(a.get(&tp()).is_none());
    assert!(old.append(batch("c"), AppendOrigin::Client, NOW).is_err());
    assert_eq!(old.recovery_point_offset(), 6);
    // Handing over what this broker does not serve is nothing.
    assert_eq!(a.hand_over_log(&tp(), NOW).unwrap(), None);

    let b = broker(dir.path(), 2);
    let new = take_over(&b, 2, rp).unwrap();
    assert_eq!(
        new.segment_count(),
        2,
        "the empty segment at 6, with files of its own"
    );
    assert_eq!(new.log_end_offset(), 6);
    new.roll(NOW).unwrap();
    assert_eq!(
        new.segment_count(),
        2,
        "the active segment was empty already"
    );
    new.append(batch("c"), AppendOrigin::Client, NOW).unwrap();
    assert_eq!(batches(&new), vec![(0, "a-0"), (3, "b-0"), (6, "c-0")]);
}

/// Brokers started together on a fresh shared dir all create `meta.properties`: every one of
/// them opens (a shared temporary file name let one broker rename another's away, and that
/// broker failed to start with ENOENT).
#[test]
fn brokers_starting_together_on_a_fresh_dir_all_open() {
    for _ in 0..20 {
        let dir = tempfile::tempdir().unwrap();
        let opened: Vec<bool> = std::thread::scope(|s| {
            let handles: Vec<_> = (1..=6)
                .map(|node| {
                    let dir = dir.path();
                    s.spawn(move || {
                        LogManager::open_sharing(
                            vec![dir.to_path_buf()],
                            MetaProperties {
                                node_id: node,
                                cluster_id: "shared-cluster-id-0000A".into(),
                            },
                            DeleteRetry::default(),
                            Sharing::Shared,
                        )
                        .is_ok()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(opened.iter().all(|ok| *ok), "{opened:?}");
        let names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            !names.iter().any(|n| n.ends_with(".tmp")),
            "temporary files left: {names:?}"
        );
    }
}

fn broker_of(dirs: &[&Path], node_id: i32) -> LogManager {
    LogManager::open_sharing(
        dirs.iter().map(|d| d.to_path_buf()).collect(),
        MetaProperties {
            node_id,
            cluster_id: "shared-cluster-id-0000A".into(),
        },
        DeleteRetry::default(),
        Sharing::Shared,
    )
    .unwrap()
}

/// A takeover on a broker whose shared volume is not mounted (it sees the bare mount point)
/// is refused, creating no partition there: serving an empty log would lose every record
/// the previous owner made durable, and recording its recovery point would forget them.
#[test]
fn a_takeover_on_a_volume_that_is_not_there_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let bare = tempfile::tempdir().unwrap();
    let rp = append_and_hand_over(&broker(dir.path(), 1), &["a"]);
    assert_eq!(rp, 3);

    let b = broker(bare.path(), 2);
    let refused = take_over(&b, 2, rp).unwrap_err().to_string();
    assert!(refused.contains("refusing to open it empty"), "{refused}");
    assert!(b.get(&tp()).is_none());
    assert!(!bare.path().join("t-0").exists());

    // On the volume itself the takeover finds everything.
    let c = broker(dir.path(), 3);
    let new = take_over(&c, 2, rp).unwrap();
    assert_eq!(batches(&new), vec![(0, "a-0")]);
}

/// A takeover whose files hold less than the previous owner recorded as durable (here the
/// partition's directory is there but its files are not: a volume restored in part) is
/// refused rather than served short.
#[test]
fn a_takeover_finding_less_than_was_recorded_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let rp = append_and_hand_over(&broker(dir.path(), 1), &["a", "b"]);
    assert_eq!(rp, 6);
    for entry in std::fs::read_dir(dir.path().join("t-0")).unwrap() {
        std::fs::remove_file(entry.unwrap().path()).unwrap();
    }
    let b = broker(dir.path(), 2);
    let refused = take_over(&b, 2, rp).unwrap_err().to_string();
    assert!(refused.contains("refusing to serve less"), "{refused}");
    assert!(b.get(&tp()).is_none());
}

/// With several shared log dirs, a partition another broker created after this one started
/// is opened where its files are, not in the dir this broker would have picked for a new one.
#[test]
fn a_takeover_finds_the_partition_in_whichever_shared_dir_holds_it() {
    let d0 = tempfile::tempdir().unwrap();
    let d1 = tempfile::tempdir().unwrap();
    let dirs = [d0.path(), d1.path()];
    let a = broker_of(&dirs, 1);
    let b = broker_of(&dirs, 2);
    // b places a partition of its own in the first dir: its pick for a new one is the second.
    let other = TopicPartition {
        topic: "u".into(),
        partition: 0,
    };
    b.open_log(&other, uuid::Uuid::from_u128(8), cfg(), 1)
        .unwrap();
    // a started before that partition existed: its pick is the first dir.
    let rp = append_and_hand_over(&a, &["a"]);
    let held_in = |d: &Path| d.join("t-0").is_dir();
    assert_eq!((held_in(d0.path()), held_in(d1.path())), (true, false));

    let new = take_over(&b, 2, rp).unwrap();
    assert_eq!(batches(&new), vec![(0, "a-0")]);
    assert_eq!(new.dir(), d0.path().join("t-0"));
    assert!(!held_in(d1.path()));
}

#[test]
fn a_deleted_incarnations_directory_is_put_aside_for_the_new_one() {
    let dir = tempfile::tempdir().unwrap();
    let old_broker = broker(dir.path(), 1);
    let old = open(&old_broker, 1);
    old.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
    old.flush().unwrap();
    old_broker.release_log(&tp()).unwrap();
    drop(old);
    // The topic was deleted while its owner was away, and created again: a new id.
    let new_id = uuid::Uuid::from_u128(8);
    let b = broker(dir.path(), 2);
    let refused = b.open_log(&tp(), new_id, cfg(), 1);
    assert!(refused.is_err(), "opened the old incarnation's files");
    assert_eq!(
        b.stray_topic_id(&tp(), new_id),
        Some(uuid::Uuid::from_u128(7))
    );
    assert_eq!(b.stray_topic_id(&tp(), uuid::Uuid::from_u128(7)), None);
    let stray = uuid::Uuid::from_u128(7);
    // Only with the right to write the directory now.
    let no = b.retire_stray_dir(&tp(), stray, &|| Err("not now".into()));
    assert!(no.is_err(), "{no:?}");
    assert!(dir.path().join("t-0").is_dir());
    // Not a directory of another id.
    assert!(!b
        .retire_stray_dir(&tp(), uuid::Uuid::from_u128(99), &|| Ok(()))
        .unwrap());
    assert!(b.retire_stray_dir(&tp(), stray, &|| Ok(())).unwrap());
    let log = b.open_log(&tp(), new_id, cfg(), 1).unwrap();
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
    assert_eq!(b.stray_topic_id(&tp(), new_id), None);
    // The new incarnation's directory is not put aside for the old id.
    assert!(!b.retire_stray_dir(&tp(), stray, &|| Ok(())).unwrap());
    // The old directory is removed: nothing here holds it.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(!names.iter().any(|n| n.ends_with("-delete")), "{names:?}");
}

/// Batches adopted from a Kafka log dir carry Kafka's leader epochs, higher than the
/// cluster's owner epochs: an empty stray a former owner created inside a newer owner's data
/// is still the stray (adversary finding on cd6e13f).
#[test]
fn kafka_epochs_never_make_an_empty_stray_cut_acknowledged_records() {
    let dir = tempfile::tempdir().unwrap();
    {
        let k = broker(dir.path(), 9); // the Kafka era: leader epoch 57
        let kl = open(&k, 57);
        kl.append(batch("a"), AppendOrigin::Client, NOW).unwrap(); // 0..2
        kl.flush().unwrap();
        k.release_log(&tp()).unwrap();
    }
    let a = broker(dir.path(), 1);
    let old = open(&a, 1); // adopted: owner epochs start at 1
    old.append(batch("b"), AppendOrigin::Client, NOW).unwrap(); // 3..5
    let b = broker(dir.path(), 2);
    let new = open(&b, 2);
    new.roll(NOW).unwrap(); // 6
    new.append(batch("c"), AppendOrigin::Client, NOW).unwrap(); // 6..8
    old.append(batch("stale"), AppendOrigin::Client, NOW)
        .unwrap(); // the former owner's stalled write
    old.roll(NOW).unwrap(); // and stalled roll: an empty 9.log
    old.flush().unwrap();
    new.append(batch("d"), AppendOrigin::Client, NOW).unwrap(); // 9..11
    new.append(batch("e"), AppendOrigin::Client, NOW).unwrap(); // 12..14
    let rp = new.flush().unwrap();
    b.release_log(&tp()).unwrap();
    let c = broker(dir.path(), 3);
    let log = take_over(&c, 3, rp).unwrap();
    assert_eq!(
        batches(&log),
        vec![(0, "a-0"), (3, "b-0"), (6, "c-0"), (9, "d-0"), (12, "e-0")]
    );
}

/// A former owner's stalled write that lands torn at the end of the segment a new owner
/// sealed is damage past complete offsets: it is cut, and the new owner's later segments are
/// kept (adversary finding on cd6e13f: every later segment was removed).
#[test]
fn a_torn_stale_tail_never_removes_the_new_owners_segments() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let old = open(&a, 1);
    old.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
    old.append(batch("b"), AppendOrigin::Client, NOW).unwrap(); // 3..5
    let b = broker(dir.path(), 2);
    let new = open(&b, 2);
    new.roll(NOW).unwrap();
    new.append(batch("c"), AppendOrigin::Client, NOW).unwrap(); // 6..8
    new.flush().unwrap(); // acknowledged
    old.append(batch("stale"), AppendOrigin::Client, NOW)
        .unwrap();
    old.flush().unwrap();
    let seg0 = dir.path().join("t-0").join("00000000000000000000.log");
    let len = std::fs::metadata(&seg0).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&seg0)
        .unwrap()
        .set_len(len - 10)
        .unwrap();
    b.release_log(&tp()).unwrap();
    let c = broker(dir.path(), 3);
    let log = open(&c, 3); // no recovery point recorded past segment 0
    assert_eq!(batches(&log), vec![(0, "a-0"), (3, "b-0"), (6, "c-0")]);
}

/// A former owner's empty active segment that it still holds open with a stalled write: the
/// new owner appends to a file of its own, so the write never lands over its batches
/// (adversary finding on cd6e13f: the stale batch replaced the acknowledged one).
#[test]
fn a_stalled_write_never_lands_over_the_new_owners_batches() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let old = open(&a, 1);
    old.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
    old.append(batch("b"), AppendOrigin::Client, NOW).unwrap(); // 3..5
    old.roll(NOW).unwrap(); // before its deadline: an empty 6.log
    old.flush().unwrap();
    let b = broker(dir.path(), 2);
    let new = open(&b, 2);
    new.roll(NOW).unwrap();
    new.append(batch("c"), AppendOrigin::Client, NOW).unwrap(); // 6..8
    let rp = new.flush().unwrap(); // acknowledged
                                   // The former owner's append, past its gate before the takeover, lands now: in
                                   // its own file, or, if the file cache had closed that file, nowhere (the file
                                   // was replaced, and is never re-opened as this segment's). Its fsync finds the
                                   // file it wrote to replaced: never acknowledged.
    if old
        .append(batch("stale"), AppendOrigin::Client, NOW)
        .is_ok()
    {
        assert!(old.flush().is_err());
    }
    let expected = vec![(0, "a-0"), (3, "b-0"), (6, "c-0")];
    assert_eq!(batches(&new), expected, "what the new owner serves");
    b.release_log(&tp()).unwrap();
    let c = broker(dir.path(), 3);
    let log = take_over(&c, 3, rp).unwrap();
    assert_eq!(batches(&log), expected);
}

/// Found by a `lagging-view` fault run (tests/integration/faults.py, seed 204): a
/// former owner's active segment that is still empty on storage when a new owner takes the
/// partition over (its appends were in its page cache, not yet fsynced): the new owner's open
/// removes that empty file and its roll makes one of its own, so the former owner's writes
/// that had passed the write gate and reach storage late (its page cache written back, or the
/// fsync of `release_log` as it lets go) never land over the new owner's acknowledged records,
/// which they did when the new owner appended into the same file. (Here no page cache stands
/// between: the late write is issued after the takeover, which is what reaches storage then.)
#[test]
fn a_former_owners_late_write_into_its_empty_active_segment_keeps_the_new_owners_records() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let old = open(&a, 1);
    old.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
    old.roll(NOW).unwrap(); // the former owner's active segment 3, empty on storage
    old.flush().unwrap();

    let c = broker(dir.path(), 2);
    let new = open(&c, 2);
    new.roll(NOW).unwrap(); // a no-op: the active segment is empty
    new.append(batch("c"), AppendOrigin::Client, NOW).unwrap();
    new.append(batch("d"), AppendOrigin::Client, NOW).unwrap();
    new.sync_appended().unwrap(); // acknowledged (acks=all)

    // The former owner's append, written back now (or refused, if the file cache had closed
    // its file: the file was replaced, and is never re-opened as this segment's). Its fsync
    // finds the file it wrote to replaced: never acknowledged.
    if old
        .append(batch("stale"), AppendOrigin::Client, NOW)
        .is_ok()
    {
        assert!(old.sync_appended().is_err());
    }
    let expected = vec![(0, "a-0"), (3, "c-0"), (6, "d-0")];
    c.release_log(&tp()).unwrap();
    let third = broker(dir.path(), 3);
    let log = take_over(&third, 3, 3).unwrap();
    assert_eq!(batches(&log), expected);
}

/// A takeover whose listing of the partition directory lags (an NFS client's cached readdir,
/// which `tests/faultfs` models) does not see the segment its predecessor C started at E. The
/// segment before E would then be its last one and be validated to its end, so a zombie's
/// batches past E there (appended after C sealed it) would be kept and served where C
/// acknowledged others, and the next owner would cut C's records. C recorded E as the newest
/// segment it published data in (the owner record's `segment`), so the open refuses the stale
/// listing, and succeeds once the listing is current. (The lag is emulated by moving C's files
/// aside for the first open.)
#[test]
fn a_takeover_whose_listing_lags_keeps_the_acknowledged_records() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let zombie = open(&a, 1);
    zombie
        .append(batch("a"), AppendOrigin::Client, NOW)
        .unwrap();
    zombie
        .append(batch("b"), AppendOrigin::Client, NOW)
        .unwrap();
    zombie.flush().unwrap();

    // C takes over (epoch 2), seals at 6 and starts 6.log.
    let c = broker(dir.path(), 2);
    let owner = open(&c, 2);
    owner.roll(NOW).unwrap();
    // The zombie's write that passed the gate lands past C's seal.
    zombie
        .append(batch("stale"), AppendOrigin::Client, NOW)
        .unwrap();
    zombie.flush().unwrap();
    owner.append(batch("c"), AppendOrigin::Client, NOW).unwrap();
    owner.append(batch("d"), AppendOrigin::Client, NOW).unwrap();
    owner.sync_appended().unwrap(); // acknowledged once recorded and confirmed
    let rp = owner.recovery_point_offset();
    assert_eq!(rp, 6);
    let newest = owner.synced_mark().base;
    assert_eq!(newest, 6, "the segment C's acknowledged data is in");
    c.release_log(&tp()).unwrap();

    // B's listing predates C's roll: 6.* are not listed while it opens.
    let pdir = dir.path().join("t-0");
    let aside = dir.path().join("aside");
    std::fs::create_dir(&aside).unwrap();
    let names: Vec<_> = std::fs::read_dir(&pdir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_str().unwrap().starts_with("00000000000000000006."))
        .collect();
    for n in &names {
        std::fs::rename(pdir.join(n), aside.join(n)).unwrap();
    }
    let b = broker(dir.path(), 3);
    let stale = take_over_recorded(&b, 3, rp, newest);
    for n in &names {
        std::fs::rename(aside.join(n), pdir.join(n)).unwrap();
    }
    let err = stale.expect_err("a listing without the recorded segment is refused");
    assert!(err.to_string().contains("stale view"), "{err}");

    // The listing is current again: the next try takes the partition with C's records.
    let new = take_over_recorded(&b, 4, rp, newest).unwrap();
    new.roll(NOW).unwrap();
    new.append(batch("e"), AppendOrigin::Client, NOW).unwrap();
    new.sync_appended().unwrap();
    let served = batches(&new);
    b.release_log(&tp()).unwrap();
    let next = broker(dir.path(), 4);
    let last = take_over_recorded(&next, 5, 6, new.synced_mark().base).unwrap();
    let after = batches(&last);
    let expected = vec![(0, "a-0"), (3, "b-0"), (6, "c-0"), (9, "d-0"), (12, "e-0")];
    assert!(
        served == expected && after == expected,
        "acknowledged c and d: B served {served:?}, the next owner {after:?}"
    );
}

/// A partition whose only segment is empty (retention or DeleteRecords removed everything
/// below it) keeps its offsets across a takeover: the empty segment whose files the open
/// replaces stays at its base, never at 0 (removed outright, the takeover was refused as
/// serving less, or the log would have started over at offset 0).
#[test]
fn a_takeover_of_a_log_whose_only_segment_is_empty_keeps_its_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let old = open(&a, 1);
    old.append(batch("a"), AppendOrigin::Client, NOW).unwrap(); // 0..2
    old.roll(NOW).unwrap(); // 3
    assert_eq!(old.delete_records_before(3).unwrap(), 3);
    let rp = old.flush().unwrap();
    assert_eq!(rp, 3);
    a.release_log(&tp()).unwrap();
    assert!(!dir
        .path()
        .join("t-0")
        .join("00000000000000000000.log")
        .exists());

    let b = broker(dir.path(), 2);
    let new = take_over(&b, 2, rp).unwrap();
    assert_eq!(new.log_end_offset(), 3);
    new.roll(NOW).unwrap();
    let out = new.append(batch("b"), AppendOrigin::Client, NOW).unwrap();
    assert_eq!(out.base_offset, 3);
}

/// A former owner's `leader-epoch-checkpoint` rewrite that stalled and landed after a
/// takeover replaces the file with its older view, without the later owners' epochs. The next
/// owner, trusting the segments below the recovery point, would answer OffsetsForLeaderEpoch
/// from it (consumers validating their position after a leader change then see a false
/// truncation). It finds each epoch at the segment its owner's acquisition started.
#[test]
fn a_former_owners_late_epoch_checkpoint_loses_no_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let old = open(&a, 1);
    old.append(batch("a"), AppendOrigin::Client, NOW).unwrap(); // 0..2
    old.flush().unwrap();
    let checkpoint = dir.path().join("t-0").join("leader-epoch-checkpoint");
    let stale = std::fs::read(&checkpoint).unwrap();

    // B takes over (epoch 2) at 3, appends, rolls twice: its segments are below its recovery point.
    let b = broker(dir.path(), 2);
    let owner = take_over(&b, 2, 3).unwrap();
    owner.roll(NOW).unwrap();
    owner.append(batch("b"), AppendOrigin::Client, NOW).unwrap(); // 3..5
    owner.roll(NOW).unwrap();
    owner.append(batch("c"), AppendOrigin::Client, NOW).unwrap(); // 6..8
    owner.roll(NOW).unwrap();
    let rp = owner.flush().unwrap();
    assert_eq!(rp, 9);
    assert_eq!(owner.end_offset_for_epoch(1), Some((1, 3)));
    let sealed = recorded(&owner);
    b.release_log(&tp()).unwrap();
    // The former owner's stalled rewrite lands now.
    std::fs::write(&checkpoint, &stale).unwrap();

    // With the owner's record of its sealed segments trusted too (none of them changed, so
    // their first batches are read from the newest back, as far as the checkpoint lacks).
    for (k, trust) in [false, true].into_iter().enumerate() {
        let c = broker(dir.path(), 3 + k as i32);
        let next = take_over_trusting(&c, 3 + k as i32, rp, sealed, trust).unwrap();
        assert_eq!(
            next.end_offset_for_epoch(1),
            Some((1, 3)),
            "epoch 1 ends where epoch 2 began: {:?}",
            next.leader_epoch_entries()
        );
        assert_eq!(next.end_offset_for_epoch(2).map(|(e, _)| e), Some(2));
        c.release_log(&tp()).unwrap();
        std::fs::write(&checkpoint, &stale).unwrap();
    }
}

/// Every acquisition records the empty segment it rolled (its mark's base). The next owner
/// replaces an empty last segment's files; a replacement that fails half-way (here a
/// `.timeindex` that cannot be replaced) must leave the segment listed, or every later
/// takeover of the (current) directory would be refused as a stale view. (Found by review:
/// the files were removed, then created.)
#[test]
fn an_interrupted_replacement_of_the_recorded_empty_segment_refuses_no_later_takeover() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let old = open(&a, 1);
    old.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
    old.append(batch("b"), AppendOrigin::Client, NOW).unwrap();
    old.flush().unwrap();
    let rp = old.recovery_point_offset();
    a.release_log(&tp()).unwrap();

    // B acquires as Cluster::acquire does: open, roll, flush, record mark.base, publish.
    let b = broker(dir.path(), 2);
    let owner = take_over_recorded(&b, 2, rp, 0).unwrap();
    owner.roll(NOW).unwrap();
    owner.flush().unwrap();
    let newest = owner.synced_mark().base;
    let rp = owner.recovery_point_offset();
    assert_eq!(newest, 6, "B records its new, empty segment");
    b.release_log(&tp()).unwrap(); // B dies idle

    // C's open replaces the empty last segment: .log removed, then the removal of
    // .timeindex fails and cannot be renamed aside (obstacle below): the open fails.
    let pdir = dir.path().join("t-0");
    let ti = pdir.join("00000000000000000006.timeindex");
    std::fs::remove_file(&ti).unwrap();
    std::fs::create_dir_all(ti.join("x")).unwrap();
    let aside = pdir.join("00000000000000000006.timeindex.deleted");
    std::fs::create_dir_all(aside.join("y")).unwrap();
    let c = broker(dir.path(), 3);
    let err = take_over_recorded(&c, 3, rp, newest).expect_err("the obstacle fails the open");
    eprintln!("first open: {err}");
    // The obstacle goes (an operator, or the transient error passes).
    std::fs::remove_dir_all(&ti).unwrap();
    std::fs::remove_dir_all(&aside).unwrap();

    // The volume is current; every later takeover must succeed.
    for epoch in 4..8 {
        let m = broker(dir.path(), epoch);
        match take_over_recorded(&m, epoch, rp, newest) {
            Ok(log) => {
                assert_eq!(batches(&log), vec![(0, "a-0"), (3, "b-0")]);
                return;
            }
            Err(e) => eprintln!("takeover under epoch {epoch}: {e}"),
        }
    }
    panic!("every takeover of a current directory was refused");
}

/// An empty newest segment a takeover recorded is the recording owner's own: a former
/// owner's stalled batch crossing its base is cut, and the segment stays, even if the opener
/// then fails before its own roll (emulated: released as `Cluster::acquire`'s error path
/// does). Removed as a stray, it left a current directory that every later takeover refused.
#[test]
fn the_recorded_segment_is_never_removed_as_a_stray() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let zombie = open(&a, 1);
    zombie
        .append(batch("a"), AppendOrigin::Client, NOW)
        .unwrap();
    zombie
        .append(batch("b"), AppendOrigin::Client, NOW)
        .unwrap();
    zombie.flush().unwrap();
    let rp = zombie.recovery_point_offset();

    // B acquires (open, roll, flush, record the new segment), then stays idle.
    let b = broker(dir.path(), 2);
    let owner = take_over_recorded(&b, 2, rp, 0).unwrap();
    owner.roll(NOW).unwrap();
    owner.flush().unwrap();
    let newest = owner.synced_mark().base;
    let rp = owner.recovery_point_offset();
    assert_eq!(newest, 6);
    // The former owner's write that passed its gate lands now, past B's seal.
    zombie
        .append(batch("stale"), AppendOrigin::Client, NOW)
        .unwrap();
    zombie.flush().unwrap();
    b.release_log(&tp()).unwrap();

    // C's open puts segment 6 aside as a stray; C then fails before its roll (emulated:
    // released as Cluster::acquire's error path does).
    let c = broker(dir.path(), 3);
    let opened = take_over_recorded(&c, 3, rp, newest).unwrap();
    assert_eq!(
        batches(&opened),
        vec![(0, "a-0"), (3, "b-0")],
        "the crossing batch is cut"
    );
    c.release_log(&tp()).unwrap();

    for epoch in 4..8 {
        let m = broker(dir.path(), epoch);
        match take_over_recorded(&m, epoch, rp, newest) {
            Ok(_) => return,
            Err(e) => eprintln!("takeover under epoch {epoch}: {e}"),
        }
    }
    panic!("every takeover of a current directory was refused");
}

/// A former owner's roll that passed its write gate and acts after a takeover, at the very
/// offset where the new owner's acquisition started its segment: the new owner's `.log` is
/// there and still empty. The roll must not remove it (the new owner appends acknowledged
/// batches to the file it holds, which would then be unlinked): it is refused (found by
/// review; the roll used to replace an empty file it found).
#[test]
fn a_former_owners_late_roll_never_unlinks_the_new_owners_active_segment() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let zombie = open(&a, 1);
    zombie
        .append(batch("a"), AppendOrigin::Client, NOW)
        .unwrap();
    zombie
        .append(batch("b"), AppendOrigin::Client, NOW)
        .unwrap();
    zombie.flush().unwrap();

    let c = broker(dir.path(), 2);
    let owner = take_over(&c, 2, 6).unwrap();
    owner.roll(NOW).unwrap(); // the acquisition's roll: 6.log, empty
    assert!(
        zombie.roll(NOW).is_err(),
        "the former owner's roll at 6 was let through"
    );
    owner.append(batch("c"), AppendOrigin::Client, NOW).unwrap();
    owner.sync_appended().unwrap(); // acknowledged
    let newest = owner.synced_mark().base;
    c.release_log(&tp()).unwrap();

    let d = broker(dir.path(), 3);
    let next = take_over_recorded(&d, 3, 6, newest).unwrap();
    assert_eq!(batches(&next), vec![(0, "a-0"), (3, "b-0"), (6, "c-0")]);
}

/// A write gate that lets every check through until its `at`-th, runs `during` inside that
/// one (what happens while this broker, having passed the check, is stalled), and refuses
/// every check after it (this broker is deposed by then). Models an opener whose acquisition
/// was taken from it (lease expired, a move) between its gate check and the step it guards.
struct StallAfterCheck {
    calls: std::sync::atomic::AtomicUsize,
    at: usize,
    during: parking_lot::Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl std::fmt::Debug for StallAfterCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StallAfterCheck")
            .field("at", &self.at)
            .finish()
    }
}

impl WriteGate for StallAfterCheck {
    fn check(&self, _tp: &TopicPartition, _id: uuid::Uuid, _epoch: i32) -> Result<(), String> {
        let n = self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        if n < self.at {
            return Ok(());
        }
        if n == self.at {
            if let Some(f) = self.during.lock().take() {
                f();
            }
            return Ok(());
        }
        Err("deposed: another broker acquired the partition".into())
    }
}

fn stalled_opener(
    dir: &Path,
    node_id: i32,
    at: usize,
    during: impl FnOnce() + Send + 'static,
) -> LogManager {
    let m = broker(dir, node_id);
    m.set_write_gate(Arc::new(StallAfterCheck {
        calls: std::sync::atomic::AtomicUsize::new(0),
        at,
        during: parking_lot::Mutex::new(Some(Box::new(during))),
    }));
    m
}

fn ino(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().ino()
}

/// An open's "an empty last segment gets new files" (`loader.rs`
/// `replace_with_new_empty_files`) is a gate check, then a rename: an opener deposed in
/// between (its acquisition taken by a lease expiry or a move while it stalled) renames new
/// files over the new owner's still empty active segment. The new owner's next fsync finds
/// the file it appends to unlinked, so what it wrote there is never acknowledged, and its log
/// fails, to be acquired again from the files as they are (adversary finding on 334cc7e).
#[test]
fn a_deposed_openers_replacement_of_the_new_owners_active_segment_is_never_acknowledged_into() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let first = open(&a, 1);
    first.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
    first.append(batch("b"), AppendOrigin::Client, NOW).unwrap();
    first.flush().unwrap();
    let rp = first.recovery_point_offset();
    a.release_log(&tp()).unwrap();

    // B acquires (open, roll, flush, records its new, empty segment 6) and dies idle.
    let b = broker(dir.path(), 2);
    let owner = take_over_recorded(&b, 2, rp, 0).unwrap();
    owner.roll(NOW).unwrap();
    owner.flush().unwrap();
    let newest = owner.synced_mark().base;
    let rp = owner.recovery_point_offset();
    assert_eq!(newest, 6);
    b.release_log(&tp()).unwrap();

    // C acquires under epoch 3 and opens; it passes its gate check before replacing the
    // empty last segment (check 2: the first is "creating or stamping the directory") and
    // stalls there. Meanwhile D acquires under epoch 4 and opens: D replaces segment 6's
    // files with its own and holds them as its active segment.
    let seg6 = dir.path().join("t-0").join("00000000000000000006.log");
    let d_log: Arc<parking_lot::Mutex<Option<(LogManager, Arc<Log>)>>> = Default::default();
    let d_ino: Arc<parking_lot::Mutex<u64>> = Default::default();
    let (slot, slot_ino, root, seg) = (
        d_log.clone(),
        d_ino.clone(),
        dir.path().to_path_buf(),
        seg6.clone(),
    );
    let c = stalled_opener(dir.path(), 3, 2, move || {
        let d = broker(&root, 4);
        let log = take_over_recorded(&d, 4, rp, newest).unwrap();
        log.roll(NOW).unwrap(); // the acquisition's roll: nothing to do, 6 is empty
        log.flush().unwrap();
        *slot_ino.lock() = ino(&seg);
        *slot.lock() = Some((d, log));
    });
    // C resumes: 6.log is empty (D's, nothing appended yet) and C renames new files over it.
    // Its next gate check refuses, so C's open fails; the rename is done.
    let c_open = take_over_recorded(&c, 3, rp, newest);
    eprintln!(
        "the deposed opener's open: {:?}",
        c_open.as_ref().map(|_| ())
    );
    let (d, dlog) = d_log.lock().take().expect("D acquired while C was stalled");
    eprintln!("6.log inode: D's {} now {}", *d_ino.lock(), ino(&seg6));

    // D, the owner, appends a batch and fsyncs it to acknowledge it: the fsync finds the
    // file it wrote to unlinked, so the batch is not acknowledged, and D's log fails (to be
    // acquired again from the files as they are).
    dlog.append(batch("c"), AppendOrigin::Client, NOW).unwrap();
    let acknowledged = dlog.sync_appended().is_ok();
    assert_eq!(acknowledged, dlog.failure().is_none());
    let newest = dlog.synced_mark().base;
    let rp = dlog.recovery_point_offset();
    // A failed log's release reports its failure; it is let go all the same.
    assert_eq!(d.release_log(&tp()).is_ok(), acknowledged);

    let e = broker(dir.path(), 5);
    let next = take_over_recorded(&e, 5, rp, newest).expect("E's takeover");
    let mut expected = vec![(0, "a-0"), (3, "b-0")];
    if acknowledged {
        expected.push((6, "c-0"));
    }
    assert_eq!(batches(&next), expected, "acknowledged: {acknowledged}");
}

/// The same through `Segment::create(.., true)`, the loader's path for a partition with no
/// segment: a deposed opener finds the new owner's empty `0.log`, removes it and creates its
/// own; the new owner's fsync finds its file unlinked and acknowledges nothing.
#[test]
fn a_deposed_openers_create_of_the_new_owners_first_segment_is_never_acknowledged_into() {
    let dir = tempfile::tempdir().unwrap();
    let d_log: Arc<parking_lot::Mutex<Option<(LogManager, Arc<Log>)>>> = Default::default();
    let (slot, root) = (d_log.clone(), dir.path().to_path_buf());
    // C (epoch 1) opens the new partition; it passes the check "replacing an empty last
    // segment" (check 2) and stalls; D acquires under epoch 2 and opens: D creates 0.log.
    let c = stalled_opener(dir.path(), 1, 2, move || {
        let d = broker(&root, 2);
        let log = open(&d, 2);
        log.flush().unwrap();
        *slot.lock() = Some((d, log));
    });
    let c_open = c.open_log(&tp(), uuid::Uuid::from_u128(7), cfg(), 1);
    eprintln!(
        "the deposed opener's open: {:?}",
        c_open.as_ref().map(|_| ())
    );
    let (d, dlog) = d_log.lock().take().expect("D acquired while C was stalled");
    dlog.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
    let acknowledged = dlog.sync_appended().is_ok();
    assert_eq!(acknowledged, dlog.failure().is_none());
    let newest = dlog.synced_mark().base;
    let rp = dlog.recovery_point_offset();
    // A failed log's release reports its failure; it is let go all the same.
    assert_eq!(d.release_log(&tp()).is_ok(), acknowledged);

    let e = broker(dir.path(), 3);
    let next = take_over_recorded(&e, 3, rp, newest).expect("E's takeover");
    let expected = if acknowledged {
        vec![(0, "a-0")]
    } else {
        vec![]
    };
    assert_eq!(batches(&next), expected, "acknowledged: {acknowledged}");
}

/// A roll that finds a file at its new base (a former owner's late roll there, or a link
/// left by a move whose unlink failed) removes nothing and fails the log, so that it is
/// re-opened (in a cluster, acquired again) and its open decides whether the file is a stray;
/// left unfailed, every later append would try the same roll and be refused.
#[test]
fn a_refused_roll_on_the_append_path_fails_the_log_for_its_re_open() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker(dir.path(), 2);
    let owner = open(&b, 2);
    owner.append(batch("a"), AppendOrigin::Client, NOW).unwrap(); // 0..2
                                                                  // A former owner's late roll at 3 (its log end), as in
                                                                  // a_former_owners_late_roll_never_cuts_the_new_owners_records.
    std::fs::File::create(dir.path().join("t-0").join("00000000000000000003.log")).unwrap();
    // The active segment is full: the next append rolls at 3.
    owner.set_config(LogConfig {
        segment_bytes: 100, // one batch (94 bytes) fits; two do not
        ..cfg()
    });
    let first = owner.append(batch("b"), AppendOrigin::Client, NOW);
    eprintln!("first append: {:?}", first.as_ref().map(|_| ()));
    let second = owner.append(batch("c"), AppendOrigin::Client, NOW);
    eprintln!("second append: {:?}", second.as_ref().map(|_| ()));
    assert!(
        second.is_ok() || owner.failure().is_some(),
        "the refused roll fails every append and leaves the log unfailed: nothing re-opens it"
    );
}

/// A deposed opener's rename that stalls in flight lands on nothing. An opener giving an empty
/// last segment new files (`replace_with_new_empty_files`) creates each spare, asks the write
/// gate, then renames; after a stalled step it asks the gate again and stops. So a rename
/// that is issued before the opener's deadline and lands after the next owner acknowledged
/// names a spare made before that deadline, under a name of that opener's own, which the next
/// owner's open removed (its listing drops every `.spare`): the late rename finds no source
/// and the owner's segment keeps its name (adversary finding on 34081be; docs/cluster.md,
/// Fencing point 2).
#[test]
fn a_deposed_openers_rename_stalled_in_flight_finds_no_spare() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let first = open(&a, 1);
    first.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
    first.append(batch("b"), AppendOrigin::Client, NOW).unwrap();
    first.flush().unwrap();
    let rp = first.recovery_point_offset();
    a.release_log(&tp()).unwrap();

    // B acquires (open, roll, flush, records its new, empty segment 6) and dies idle.
    let b = broker(dir.path(), 2);
    let owner = take_over_recorded(&b, 2, rp, 0).unwrap();
    owner.roll(NOW).unwrap();
    owner.flush().unwrap();
    let newest = owner.synced_mark().base;
    let rp = owner.recovery_point_offset();
    assert_eq!(newest, 6);
    b.release_log(&tp()).unwrap();

    // C (epoch 3) opens: it made the spares of the empty segment 6 and passed its gate check
    // before its deadline; its renames stall in flight.
    let t0 = dir.path().join("t-0");
    let stalled: Vec<(std::path::PathBuf, std::path::PathBuf)> = ["index", "timeindex", "log"]
        .iter()
        .map(|ext| {
            let path = t0.join(format!("00000000000000000006.{ext}"));
            let mut spare = path.clone().into_os_string();
            spare.push(".3-1-0");
            spare.push(crate::segment::SPARE_SUFFIX);
            std::fs::File::create(&spare).unwrap();
            (std::path::PathBuf::from(spare), path)
        })
        .collect();

    // D (epoch 4), acquiring after C's deadline, opens (giving segment 6 new files itself),
    // appends, fsyncs, passes its link check and acknowledges batch c.
    let d = broker(dir.path(), 4);
    let dlog = take_over_recorded(&d, 4, rp, newest).unwrap();
    dlog.roll(NOW).unwrap();
    dlog.flush().unwrap();
    assert_eq!(dlog.synced_mark().base, 6);
    dlog.append(batch("c"), AppendOrigin::Client, NOW).unwrap();
    dlog.sync_appended()
        .expect("the owner's fsync and link check pass: batch c is acknowledged");

    // C's renames land.
    for (spare, path) in &stalled {
        let landed = std::fs::rename(spare, path);
        assert_eq!(
            landed.map_err(|e| e.kind()),
            Err(std::io::ErrorKind::NotFound),
            "a deposed opener's late rename found a spare to move over {}",
            path.display()
        );
    }

    // D goes on; the next owner has everything D acknowledged.
    dlog.append(batch("d"), AppendOrigin::Client, NOW).unwrap();
    dlog.sync_appended()
        .expect("the owner's segment still has its name");
    let newest = dlog.synced_mark().base;
    let rp = dlog.recovery_point_offset();
    d.release_log(&tp()).unwrap();
    let e = broker(dir.path(), 5);
    let next = take_over_recorded(&e, 5, rp, newest).expect("E's takeover");
    assert_eq!(
        batches(&next),
        vec![(0, "a-0"), (3, "b-0"), (6, "c-0"), (9, "d-0")]
    );
}

/// A deposed opener's removal that stalls in flight lands on nothing of the next owner's. An
/// open that finds damage removes the segments after it (and one that finds a stray removes
/// it), by name; a deposed opener's unlink issued before its deadline can land after the next
/// owner, which removed the same files at its own open, created a file of the same name. In a
/// shared directory the open first makes the log continue past the bases it removes (a batch
/// of no records holding their offsets, `continue_past_removed`), so no owner ever makes a
/// segment under one of those names again.
#[test]
fn a_deposed_openers_removal_stalled_in_flight_unlinks_no_new_segment() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let first = open(&a, 1);
    first.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
    first.append(batch("b"), AppendOrigin::Client, NOW).unwrap();
    first.roll(NOW).unwrap();
    first.append(batch("c"), AppendOrigin::Client, NOW).unwrap();
    first.roll(NOW).unwrap();
    first.append(batch("d"), AppendOrigin::Client, NOW).unwrap();
    first.flush().unwrap();
    let one_batch = batch("e").len() as u64;
    a.release_log(&tp()).unwrap();

    // A host crash damaged segment 6 (batch c): an open cuts it there and removes 9.
    let t0 = dir.path().join("t-0");
    let seg6 = t0.join("00000000000000000006.log");
    let mut bytes = std::fs::read(&seg6).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&seg6, &bytes).unwrap();

    // C (epoch 2) opened, decided so, and its unlinks of segment 9 stall in flight. D
    // (epoch 3) opens after C's deadline, removes segment 9 itself, and fills segment 6 up
    // to one batch short of the log's segment size.
    let small = LogConfig {
        segment_bytes: one_batch + one_batch / 2,
        ..cfg()
    };
    let d = broker(dir.path(), 3);
    let dlog = d
        .open_log_at(&tp(), uuid::Uuid::from_u128(7), small.clone(), 3, 0, 0)
        .unwrap();
    assert_eq!(
        dlog.log_end_offset(),
        10,
        "the log continues past 9, the base D's open removed"
    );
    assert!(!t0.join("00000000000000000009.log").exists());
    dlog.append(batch("e"), AppendOrigin::Client, NOW).unwrap();
    // The next batch is due a roll, past 9.
    dlog.append(batch("d"), AppendOrigin::Client, NOW).unwrap();
    dlog.sync_appended()
        .expect("the owner's fsync and link check pass: batch d is acknowledged");

    // C's unlinks land.
    for ext in ["log", "index", "timeindex"] {
        let _ = std::fs::remove_file(t0.join(format!("00000000000000000009.{ext}")));
    }

    let newest = dlog.synced_mark().base;
    let rp = dlog.recovery_point_offset();
    d.release_log(&tp()).unwrap();
    let e = broker(dir.path(), 4);
    let next = e
        .open_log_at(&tp(), uuid::Uuid::from_u128(7), small, 4, rp, newest)
        .expect("E's takeover");
    assert_eq!(
        batches(&next),
        vec![(0, "a-0"), (3, "b-0"), (6, "?"), (10, "e-0"), (13, "d-0")],
        "a batch the owner acknowledged is lost: a deposed opener's late unlink of segment 9 \
         landed on a segment the owner made there"
    );
}

fn compact_cfg() -> LogConfig {
    LogConfig {
        cleanup: Cleanup {
            compact: true,
            delete: false,
            min_cleanable_dirty_ratio: 0.01,
            ..Cleanup::default()
        },
        ..cfg()
    }
}

fn put_keyed(log: &Log, key: &str, value: &str) -> i64 {
    let b = BatchBuilder::new().record(NOW, Some(key.as_bytes()), Some(value.as_bytes()));
    log.append(Bytes::from(b.build()), AppendOrigin::Client, NOW)
        .unwrap()
        .base_offset
}

/// ADVERSARY (9608008): `epochs_past_checkpoint` assigns an epoch it finds at the trusted
/// segment's *base offset*, where `assign_first_batch_epoch` (the untrusted path) assigns it
/// at the first batch's base offset. After a cleaning the two differ: a cleaned segment may
/// begin with a later owner's batch (here the cleaner merged the former owner's segment 0,
/// whose only record was superseded, with the new owner's segment 1). With the former owner's
/// stale `leader-epoch-checkpoint` (fencing point 2/3), the trusting takeover says epoch 2
/// begins at 0: epoch 1 is lost (its range is empty), and OffsetsForLeaderEpoch(1) answers 0
/// instead of 1 (a consumer that read offset 0 under epoch 1 is told the log was truncated).
#[test]
fn a_trusted_cleaned_segment_loses_no_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let old = a
        .open_log(&tp(), uuid::Uuid::from_u128(7), compact_cfg(), 1)
        .unwrap();
    assert_eq!(put_keyed(&old, "k", "v1"), 0);
    old.flush().unwrap();
    let checkpoint = dir.path().join("t-0").join("leader-epoch-checkpoint");
    let stale = std::fs::read(&checkpoint).unwrap();

    let b = broker(dir.path(), 2);
    let owner = b
        .open_log_at(&tp(), uuid::Uuid::from_u128(7), compact_cfg(), 2, 1, 0)
        .unwrap();
    owner.roll(NOW).unwrap();
    assert_eq!(put_keyed(&owner, "k", "v2"), 1); // supersedes offset 0
    owner.roll(NOW).unwrap();
    assert_eq!(put_keyed(&owner, "x", "v"), 2);
    owner.roll(NOW).unwrap();
    let rp = owner.flush().unwrap();
    assert_eq!(rp, 3);
    assert_eq!(owner.end_offset_for_epoch(1), Some((1, 1)));
    let stats = b.clean_log(&tp()).unwrap();
    assert!(stats.is_some(), "precondition: cleaned");
    let first = owner.shared.read().segments[0].clone();
    assert_eq!(first.base_offset, 0);
    let rp = owner.flush().unwrap();
    // The owner still knows epoch 1 ends at 1.
    assert_eq!(owner.end_offset_for_epoch(1), Some((1, 1)));
    let sealed = recorded(&owner);
    b.release_log(&tp()).unwrap();
    // The former owner's stalled checkpoint rewrite lands.
    std::fs::write(&checkpoint, &stale).unwrap();

    for (k, trust) in [false, true].into_iter().enumerate() {
        let c = broker(dir.path(), 3 + k as i32);
        let next = c
            .open_log_recorded(
                &tp(),
                uuid::Uuid::from_u128(7),
                compact_cfg(),
                3 + k as i32,
                Recorded {
                    recovery_point: rp,
                    newest_segment: 0,
                    sealed: Some(sealed),
                    switch: None,
                    snapshot: None,
                }
                .with_trust(trust),
            )
            .unwrap();
        assert_eq!(
            next.end_offset_for_epoch(1),
            Some((1, 1)),
            "record trusted: {trust}; epochs {:?}",
            next.leader_epoch_entries()
        );
        c.release_log(&tp()).unwrap();
        std::fs::write(&checkpoint, &stale).unwrap();
    }
}

trait AdvTrust {
    fn with_trust(self, trust: bool) -> Self;
}
impl AdvTrust for Recorded {
    fn with_trust(mut self, trust: bool) -> Self {
        if !trust {
            self.sealed = None;
        }
        self
    }
}

/// ADVERSARY (9608008): a trusted sealed segment whose index file is missing is not taken
/// unopened (`Segment::unopened` returns None), so `epochs_past_checkpoint` skips it
/// (`continue`), and the loop neither reads its first batch (`base >= trusted_below` is
/// false) nor assigns epochs in the index rebuild (its callback is `|_| {}`). With the
/// former owner's stale `leader-epoch-checkpoint`, the epoch that began there is lost.
#[test]
fn a_trusted_segment_missing_its_index_loses_no_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let old = open(&a, 1);
    old.append(batch("a"), AppendOrigin::Client, NOW).unwrap(); // 0..2
    old.flush().unwrap();
    let checkpoint = dir.path().join("t-0").join("leader-epoch-checkpoint");
    let stale = std::fs::read(&checkpoint).unwrap();

    let b = broker(dir.path(), 2);
    let owner = take_over(&b, 2, 3).unwrap();
    owner.roll(NOW).unwrap();
    owner.append(batch("b"), AppendOrigin::Client, NOW).unwrap(); // 3..5
    owner.roll(NOW).unwrap();
    let rp = owner.flush().unwrap();
    assert_eq!(rp, 6);
    assert_eq!(owner.end_offset_for_epoch(1), Some((1, 3)));
    let sealed = recorded(&owner);
    b.release_log(&tp()).unwrap();
    std::fs::write(&checkpoint, &stale).unwrap();
    // A sealed segment's offset index is gone (a crash between a segment's files, an
    // operator): the open rebuilds it.
    std::fs::remove_file(dir.path().join("t-0").join("00000000000000000003.index")).unwrap();

    for (k, trust) in [false, true].into_iter().enumerate() {
        let c = broker(dir.path(), 3 + k as i32);
        let next = take_over_trusting(&c, 3 + k as i32, rp, sealed, trust).unwrap();
        assert_eq!(
            next.end_offset_for_epoch(1),
            Some((1, 3)),
            "record trusted: {trust}; epochs {:?}",
            next.leader_epoch_entries()
        );
        c.release_log(&tp()).unwrap();
        std::fs::write(&checkpoint, &stale).unwrap();
        std::fs::remove_file(dir.path().join("t-0").join("00000000000000000003.index")).ok();
    }
}

/// ADVERSARY (8f28004): `epochs_past_checkpoint` reads only the first batch of each trusted
/// segment, on the premise that "each owner's epoch begins at a segment base". A cleaning
/// breaks that premise: the cleaner merges a group of segments of different owners into one,
/// so an epoch can begin in the middle of a trusted segment. Here the former owner's record
/// at offset 0 (epoch 1, a key never superseded) survives and leads the cleaned segment, and
/// the new owner's epoch 2 (offsets 1..) lies behind it in the same segment. With the former
/// owner's stale `leader-epoch-checkpoint` (fencing point 2), the trusting takeover reads
/// epoch 1 at the cleaned segment's first batch, `break`s, and epoch 2 is lost.
#[test]
fn an_epoch_beginning_inside_a_merged_cleaned_segment_is_not_lost() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let old = a
        .open_log(&tp(), uuid::Uuid::from_u128(7), compact_cfg(), 1)
        .unwrap();
    assert_eq!(put_keyed(&old, "a", "kept"), 0);
    old.flush().unwrap();
    let checkpoint = dir.path().join("t-0").join("leader-epoch-checkpoint");
    let stale = std::fs::read(&checkpoint).unwrap();

    let b = broker(dir.path(), 2);
    let owner = b
        .open_log_at(&tp(), uuid::Uuid::from_u128(7), compact_cfg(), 2, 1, 0)
        .unwrap();
    owner.roll(NOW).unwrap();
    assert_eq!(put_keyed(&owner, "k", "v1"), 1);
    owner.roll(NOW).unwrap();
    assert_eq!(put_keyed(&owner, "k", "v2"), 2); // supersedes offset 1
    owner.roll(NOW).unwrap();
    owner.flush().unwrap();
    assert!(owner.leader_epoch_entries().iter().any(|(e, _)| *e == 2));
    let stats = b.clean_log(&tp()).unwrap();
    assert!(stats.is_some(), "precondition: cleaned");
    let segs: Vec<i64> = owner
        .shared
        .read()
        .segments
        .iter()
        .map(|s| s.base_offset)
        .collect();
    assert_eq!(segs.first(), Some(&0));
    assert!(
        !segs.contains(&1) && !segs.contains(&2),
        "precondition: the cleaning merged the owners' segments into one: {segs:?}"
    );
    let rp = owner.flush().unwrap();
    let sealed = recorded(&owner);
    b.release_log(&tp()).unwrap();
    // The former owner's stalled checkpoint rewrite lands.
    std::fs::write(&checkpoint, &stale).unwrap();

    let c = broker(dir.path(), 3);
    let next = c
        .open_log_recorded(
            &tp(),
            uuid::Uuid::from_u128(7),
            compact_cfg(),
            3,
            Recorded {
                recovery_point: rp,
                newest_segment: 0,
                sealed: Some(sealed),
                switch: None,
                snapshot: None,
            },
        )
        .unwrap();
    let entries = next.leader_epoch_entries();
    assert!(
        entries.iter().any(|(e, _)| *e == 2),
        "trusting takeover lost epoch 2 (which began inside the merged cleaned segment): {entries:?}; \
         OffsetsForLeaderEpoch(1) answers {:?}",
        next.end_offset_for_epoch(1)
    );
    // Epoch 2 began at 1, whose record the cleaning removed: the log tells 2, the first of
    // its batches left; either ends epoch 1 before any record of epoch 2.
    let ends_before_epoch_2 = |e: Option<(i32, i64)>| matches!(e, Some((1, 1 | 2)));
    assert!(
        ends_before_epoch_2(next.end_offset_for_epoch(1)),
        "{entries:?}"
    );
    // The same without trusting the record: every sealed segment is checked, and the merged
    // one's epochs are read past its first batch too.
    c.release_log(&tp()).unwrap();
    std::fs::write(&checkpoint, &stale).unwrap();
    let d = broker(dir.path(), 4);
    let next = d
        .open_log_recorded(
            &tp(),
            uuid::Uuid::from_u128(7),
            compact_cfg(),
            4,
            Recorded {
                recovery_point: rp,
                newest_segment: 0,
                sealed: None,
                switch: None,
                snapshot: None,
            },
        )
        .unwrap();
    assert!(
        ends_before_epoch_2(next.end_offset_for_epoch(1)),
        "{:?}",
        next.leader_epoch_entries()
    );
}

// ---------------------------------------------------------------------------------------
// Adversary review of 5a48f52 (a deposed opener's operation stalled in flight).
// ---------------------------------------------------------------------------------------

/// A log of segments 0 (a, b), 6 (c) and 9 (d) whose batch c a host crash damaged: an open
/// cuts segment 6 at 6 and removes segment 9. Returns the size of one batch.
fn adv_damaged_before_9(dir: &Path) -> u64 {
    let a = broker(dir, 1);
    let first = open(&a, 1);
    first.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
    first.append(batch("b"), AppendOrigin::Client, NOW).unwrap();
    first.roll(NOW).unwrap();
    first.append(batch("c"), AppendOrigin::Client, NOW).unwrap();
    first.roll(NOW).unwrap();
    first.append(batch("d"), AppendOrigin::Client, NOW).unwrap();
    first.flush().unwrap();
    let one_batch = batch("e").len() as u64;
    a.release_log(&tp()).unwrap();
    let seg6 = dir.join("t-0").join("00000000000000000006.log");
    let mut bytes = std::fs::read(&seg6).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&seg6, &bytes).unwrap();
    one_batch
}

/// C's unlinks of segment 9, issued by its open before its deadline, land now.
fn adv_stalled_unlinks_of_9_land(dir: &Path) {
    for ext in ["log", "index", "timeindex"] {
        let path = dir.join("t-0").join(format!("00000000000000000009.{ext}"));
        match std::fs::remove_file(&path) {
            Ok(()) => eprintln!(
                "the deposed opener's late unlink removed {}",
                path.display()
            ),
            Err(e) => eprintln!(
                "the deposed opener's late unlink of {}: {e}",
                path.display()
            ),
        }
    }
}

/// The next takeover has `expected`, or says why not.
fn adv_next_takeover_has(
    dir: &Path,
    epoch: i32,
    config: LogConfig,
    rp: i64,
    newest: i64,
    expected: &[(i64, &'static str)],
) {
    let f = broker(dir, epoch);
    match f.open_log_at(&tp(), uuid::Uuid::from_u128(7), config, epoch, rp, newest) {
        Ok(next) => assert_eq!(
            batches(&next),
            expected,
            "an acknowledged batch is lost: a deposed opener's late unlink of segment 9 landed \
             on a segment rolled at 9 since"
        ),
        Err(e) => panic!(
            "the partition can no longer be opened (recorded newest segment {newest}, \
             removed by a deposed opener's late unlink), and the batch acknowledged at 9 is \
             gone: {e}"
        ),
    }
}

/// A hand-over's roll is never at a base an open removed (adversary on 5a48f52: when only the
/// opening `Log` object knew the bases its open removed, a planned hand-over rolled at one).
///
/// Interleaving: C (epoch 2) opens, finds c damaged, and issues its unlink of `9.log` by
/// name, which stalls in flight (NFS REMOVE queued while C is cut off). D (epoch 3) acquires
/// after C's deadline plus the lease, opens (cuts 6, removes 9 itself), appends e,
/// acknowledges. D hands the partition over (SIGTERM controlled shutdown, or a balancing
/// move): `hand_over_log` rolls at the log end. E (epoch 4) acquires, appends d,
/// acknowledges. C's REMOVE of `9.log` lands. Before, the log end after e was 9, the
/// hand-over made `9.log`, E appended d there, and C's unlink took it (the next owner then
/// refused the partition as a stale view, forever). Now D's open continues the log past 9.
#[test]
fn a_hand_over_never_rolls_at_a_base_an_open_removed() {
    let dir = tempfile::tempdir().unwrap();
    let one_batch = adv_damaged_before_9(dir.path());
    let small = LogConfig {
        segment_bytes: one_batch + one_batch / 2,
        ..cfg()
    };
    let t0 = dir.path().join("t-0");

    // D (epoch 3): its open cuts 6 and removes 9; C's unlinks of 9 are in flight.
    let d = broker(dir.path(), 3);
    let dlog = d
        .open_log_at(&tp(), uuid::Uuid::from_u128(7), small.clone(), 3, 0, 0)
        .unwrap();
    dlog.roll(NOW).unwrap(); // the acquisition's roll: a no-op, 6 is empty
    dlog.flush().unwrap();
    assert_eq!(dlog.log_end_offset(), 10, "the log continues past 9");
    dlog.append(batch("e"), AppendOrigin::Client, NOW).unwrap();
    dlog.sync_appended().unwrap();
    assert_eq!(dlog.log_end_offset(), 13);
    // A planned move: the hand-over rolls at 9.
    let rp = d.hand_over_log(&tp(), NOW).unwrap().unwrap();
    let newest = dlog.synced_mark().base;
    eprintln!(
        "after D's hand-over: 9.log exists: {}",
        t0.join("00000000000000000009.log").exists()
    );

    // E (epoch 4) acquires, appends d at 9 and acknowledges it.
    let e = broker(dir.path(), 4);
    let elog = e
        .open_log_at(
            &tp(),
            uuid::Uuid::from_u128(7),
            small.clone(),
            4,
            rp,
            newest,
        )
        .unwrap();
    elog.roll(NOW).unwrap();
    elog.flush().unwrap();
    let out = elog.append(batch("d"), AppendOrigin::Client, NOW).unwrap();
    assert_eq!(out.base_offset, 13);
    elog.sync_appended()
        .expect("E's fsync and link check pass: batch d is acknowledged");
    let newest = elog.synced_mark().base;
    let rp = elog.recovery_point_offset();

    adv_stalled_unlinks_of_9_land(dir.path());
    let _ = e.release_log(&tp());
    adv_next_takeover_has(
        dir.path(),
        5,
        small,
        rp,
        newest,
        &[(0, "a-0"), (3, "b-0"), (6, "?"), (10, "e-0"), (13, "d-0")],
    );
}

/// The next acquisition never rolls at a base an earlier open removed (adversary on 5a48f52:
/// when the removed bases lived in the opening `Log` object only, the next owner's open knew
/// nothing of them).
///
/// Interleaving: as in `a_hand_over_never_rolls_at_a_base_an_open_removed`, C's unlink of
/// `9.log` stalls in flight; D opens (removes 9), appends e, acknowledges and dies or is
/// deposed (a crash; or its log fails and it acquires it again: the same path). E acquires:
/// open, the acquisition's roll at the log end, appends d, acknowledges. C's unlink lands.
/// Before, the log end after e was 9: E's roll made `9.log` and C's unlink took d with it.
#[test]
fn the_next_acquisition_never_rolls_at_a_base_a_former_open_removed() {
    let dir = tempfile::tempdir().unwrap();
    let one_batch = adv_damaged_before_9(dir.path());
    let small = LogConfig {
        segment_bytes: one_batch + one_batch / 2,
        ..cfg()
    };

    let d = broker(dir.path(), 3);
    let dlog = d
        .open_log_at(&tp(), uuid::Uuid::from_u128(7), small.clone(), 3, 0, 0)
        .unwrap();
    dlog.roll(NOW).unwrap();
    dlog.flush().unwrap();
    dlog.append(batch("e"), AppendOrigin::Client, NOW).unwrap();
    dlog.sync_appended().unwrap();
    assert_eq!(dlog.log_end_offset(), 13);
    let newest = dlog.synced_mark().base;
    let rp = dlog.recovery_point_offset();
    d.release_log(&tp()).unwrap(); // D dies / is deposed

    // E (epoch 4): the acquisition (open, roll, flush), then d at 9, acknowledged.
    let e = broker(dir.path(), 4);
    let elog = e
        .open_log_at(
            &tp(),
            uuid::Uuid::from_u128(7),
            small.clone(),
            4,
            rp,
            newest,
        )
        .unwrap();
    assert_eq!(elog.log_end_offset(), 13);
    elog.roll(NOW).unwrap();
    elog.flush().unwrap();
    let out = elog.append(batch("d"), AppendOrigin::Client, NOW).unwrap();
    assert_eq!(out.base_offset, 13);
    elog.sync_appended()
        .expect("E's fsync and link check pass: batch d is acknowledged");
    let newest = elog.synced_mark().base;
    let rp = elog.recovery_point_offset();

    adv_stalled_unlinks_of_9_land(dir.path());
    let _ = e.release_log(&tp());
    adv_next_takeover_has(
        dir.path(),
        5,
        small,
        rp,
        newest,
        &[(0, "a-0"), (3, "b-0"), (6, "?"), (10, "e-0"), (13, "d-0")],
    );
}

/// An index-full roll is never at a base the open removed (adversary on 5a48f52: a roll
/// deferral that only size and time rolls knew of let an index-full roll make `9.log`).
///
/// Interleaving: C's unlink of `9.log` stalls in flight; D opens (removes 9; its config has
/// a small `segment.index.bytes`), appends e, then d: the time index is full and the log
/// rolls at its end; d goes there and is acknowledged. C's unlink lands.
#[test]
fn an_index_full_roll_is_never_at_a_base_the_open_removed() {
    let dir = tempfile::tempdir().unwrap();
    adv_damaged_before_9(dir.path());
    let tiny_index = LogConfig {
        segment_index_bytes: 12, // one time index entry
        ..cfg()
    };
    let d = broker(dir.path(), 3);
    let dlog = d
        .open_log_at(&tp(), uuid::Uuid::from_u128(7), tiny_index.clone(), 3, 0, 0)
        .unwrap();
    dlog.roll(NOW).unwrap();
    dlog.flush().unwrap();
    dlog.append(batch("e"), AppendOrigin::Client, NOW).unwrap();
    let out = dlog.append(batch("d"), AppendOrigin::Client, NOW).unwrap();
    assert_eq!(out.base_offset, 13);
    dlog.sync_appended()
        .expect("D's fsync and link check pass: batch d is acknowledged");
    let newest = dlog.synced_mark().base;
    let rp = dlog.recovery_point_offset();
    eprintln!(
        "D's segments: {}, newest synced {newest}",
        dlog.segment_count()
    );

    adv_stalled_unlinks_of_9_land(dir.path());
    let _ = d.release_log(&tp());
    adv_next_takeover_has(
        dir.path(),
        4,
        tiny_index,
        rp,
        newest,
        &[(0, "a-0"), (3, "b-0"), (6, "?"), (10, "e-0"), (13, "d-0")],
    );
}

/// Two deposed openers, each with one operation in flight (adversary on 5a48f52). Before
/// each opener's spares had names of their own, the first one's late rename of
/// `6.log.spare` found a source after all: the spare the second one made under the same
/// name, moved over the next owner's `6.log`.
///
/// Interleaving (`replace_with_new_empty_files`):
/// 1. A appends a, b; B acquires, rolls (empty 6.log), dies idle.
/// 2. C1 (epoch 3) opens: 6.log is empty; it creates its spare of 6.log, passes its check
///    and issues the rename over 6.log: in flight.
/// 3. C2 (epoch 4) acquires after C1's deadline + lease and opens: its listing removes C1's
///    spare; 6.log is still empty, so it replaces 6.index and 6.timeindex, then issues the
///    create of its spare of 6.log: in flight (C2 is cut off too); its next check refuses.
/// 4. D (epoch 5) acquires after C2's deadline + lease: its listing holds no spare; it gives
///    6 new files, appends c, fsyncs, passes its link check, acknowledges c.
/// 5. C2's create lands: a new empty spare, under C2's name.
/// 6. C1's rename lands: its source, under C1's name, is gone; D's 6.log keeps c.
#[test]
fn a_second_deposed_openers_late_spare_feeds_no_late_rename() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let first = open(&a, 1);
    first.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
    first.append(batch("b"), AppendOrigin::Client, NOW).unwrap();
    first.flush().unwrap();
    let rp = first.recovery_point_offset();
    a.release_log(&tp()).unwrap();
    let b = broker(dir.path(), 2);
    let owner = take_over_recorded(&b, 2, rp, 0).unwrap();
    owner.roll(NOW).unwrap();
    owner.flush().unwrap();
    let newest = owner.synced_mark().base;
    let rp = owner.recovery_point_offset();
    assert_eq!(newest, 6);
    b.release_log(&tp()).unwrap();

    let t0 = dir.path().join("t-0");
    let log_spares = {
        let t0 = t0.clone();
        move || -> Vec<std::path::PathBuf> {
            let mut v: Vec<_> = std::fs::read_dir(&t0)
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| {
                    let n = p.file_name().unwrap().to_string_lossy().to_string();
                    n.starts_with("00000000000000000006.log.") && n.ends_with(".spare")
                })
                .collect();
            v.sort();
            v
        }
    };
    let d_log: Arc<parking_lot::Mutex<Option<(LogManager, Arc<Log>)>>> = Default::default();
    let (slot, root, spares) = (d_log.clone(), dir.path().to_path_buf(), log_spares.clone());
    // C1: checks 1 (the directory), 2 (6.index), 3 (6.timeindex) pass; at 4 (6.log) it has
    // made its spare of 6.log and passed the check: its rename is in flight while this runs.
    let c1 = stalled_opener(dir.path(), 3, 4, move || {
        let c1_spares = spares();
        assert_eq!(c1_spares.len(), 1, "C1 made its spare of 6.log");
        // C2: passes checks 1 to 3, creates its spare of 6.log, is refused at 4.
        let c2 = stalled_opener(&root, 4, 3, || {});
        let c2_open = take_over_recorded(&c2, 4, rp, newest);
        eprintln!("C2's open: {:?}", c2_open.as_ref().map(|_| ()));
        let c2_spares: Vec<_> = spares()
            .into_iter()
            .filter(|p| !c1_spares.contains(p))
            .collect();
        assert_eq!(c2_spares.len(), 1, "C2 made a spare of 6.log of its own");
        let c2_spare = c2_spares[0].clone();
        // C2's create is its operation in flight: it has not landed when D lists the
        // directory (the file C2's open made is taken away until it lands).
        std::fs::remove_file(&c2_spare).expect("C2 made its spare");
        let d = broker(&root, 5);
        let log = take_over_recorded(&d, 5, rp, newest).unwrap();
        log.roll(NOW).unwrap();
        log.flush().unwrap();
        log.append(batch("c"), AppendOrigin::Client, NOW).unwrap();
        log.sync_appended()
            .expect("D's fsync and link check pass: batch c is acknowledged");
        // C2's create lands.
        std::fs::File::create(&c2_spare).unwrap();
        *slot.lock() = Some((d, log));
    });
    // C1 resumes: its rename lands (or finds no source).
    let c1_open = take_over_recorded(&c1, 3, rp, newest);
    eprintln!("C1's open: {:?}", c1_open.as_ref().map(|_| ()));
    let (d, dlog) = d_log
        .lock()
        .take()
        .expect("D acquired while C1 was stalled");

    dlog.append(batch("d"), AppendOrigin::Client, NOW).unwrap();
    eprintln!("D's next fsync: {:?}", dlog.sync_appended().map(|_| ()));
    let newest = dlog.synced_mark().base;
    let rp = dlog.recovery_point_offset();
    let _ = d.release_log(&tp());
    let e = broker(dir.path(), 6);
    let next = take_over_recorded(&e, 6, rp, newest).expect("E's takeover");
    let got = batches(&next);
    assert!(
        got.starts_with(&[(0, "a-0"), (3, "b-0"), (6, "c-0")]),
        "batch c, acknowledged by D, is lost: C1's late rename moved C2's late spare over \
         D's 6.log; E serves {got:?}"
    );
}

/// A log of segments 0 (a, b) and an active segment 6 that holds only the first half of a
/// batch (torn: a host crash, or a former owner's write whose pages reached the server out
/// of order): an open cuts 6 to 0 bytes and keeps appending to that very file. Returns the
/// recovery point and the newest recorded segment.
fn adv_torn_only_last_segment(dir: &Path) -> (LogManager, Arc<Log>, i64, i64) {
    let a = broker(dir, 1);
    let first = open(&a, 1);
    first.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
    first.append(batch("b"), AppendOrigin::Client, NOW).unwrap();
    first.roll(NOW).unwrap();
    first.flush().unwrap();
    let rp = first.recovery_point_offset();
    let newest = first.synced_mark().base;
    (a, first, rp, newest)
}

/// ADVERSARY (5a48f52): a deposed opener's cut stalled in flight truncates the next owner's
/// active segment. An open gives new files only to a last segment that is empty when
/// listed (loader.rs:99); one holding only a torn batch is cut to 0 bytes by recovery
/// (loader.rs:223, `set_len` on the same inode), the acquisition's roll is then a no-op
/// (log.rs:1128: empty, base == log end), and the owner appends into that inode, which a
/// deposed opener holds open with its own cut in flight.
///
/// Interleaving:
/// 1. A's active segment 6 holds a torn batch only (its host crashed mid-write).
/// 2. C (epoch 2) opens: recovery of 6 stops at 0; C passes "cutting a recovered segment"
///    (loader.rs:172, its check 3) and issues ftruncate(6.log, 0) (loader.rs:223): in
///    flight (NFS SETATTR queued while C is cut off).
/// 3. D (epoch 3) acquires after C's deadline + lease: its open cuts 6 to 0 itself (same
///    inode: it was not empty when listed), its roll does nothing, it appends c at 0,
///    fsyncs, passes the link check (the name is there) and acknowledges c.
/// 4. C's ftruncate(0) lands: D's file is empty again. D appends d at its position 94
///    (a hole before it) and acknowledges it too.
/// 5. The next owner's recovery of 6 stops at the hole at 0: c and d are gone.
#[test]
#[allow(non_snake_case)]
fn a_deposed_openers_late_cut_lands_in_a_file_the_owner_no_longer_uses() {
    let dir = tempfile::tempdir().unwrap();
    let (a, first, rp, newest) = adv_torn_only_last_segment(dir.path());
    drop(first);
    a.release_log(&tp()).unwrap();
    let seg6 = dir.path().join("t-0").join("00000000000000000006.log");
    let torn = batch("x");
    std::fs::write(&seg6, &torn[..torn.len() / 2]).unwrap();

    let d_log: Arc<parking_lot::Mutex<Option<(LogManager, Arc<Log>)>>> = Default::default();
    let (slot, root) = (d_log.clone(), dir.path().to_path_buf());
    // C's checks: 1 the directory, 2 segment 0's tail, 3 cutting segment 6.
    let c = stalled_opener(dir.path(), 2, 3, move || {
        let d = broker(&root, 3);
        let log = take_over_recorded(&d, 3, rp, newest).unwrap();
        log.roll(NOW).unwrap(); // the acquisition's roll: 6 is empty after the cut
        log.flush().unwrap();
        log.append(batch("c"), AppendOrigin::Client, NOW).unwrap();
        log.sync_appended()
            .expect("D's fsync and link check pass: batch c is acknowledged");
        *slot.lock() = Some((d, log));
    });
    let c_open = take_over_recorded(&c, 2, rp, newest);
    eprintln!("C's open: {:?}", c_open.as_ref().map(|_| ()));
    let (d, dlog) = d_log.lock().take().expect("D acquired while C was stalled");
    eprintln!(
        "6.log after C's late cut: {} bytes",
        std::fs::metadata(&seg6).unwrap().len()
    );
    dlog.append(batch("d"), AppendOrigin::Client, NOW).unwrap();
    let d_acked = dlog.sync_appended().is_ok();
    eprintln!("D's next fsync acknowledged d: {d_acked}");
    let newest = dlog.synced_mark().base;
    let rp = dlog.recovery_point_offset();
    let _ = d.release_log(&tp());

    let e = broker(dir.path(), 4);
    let next = take_over_recorded(&e, 4, rp, newest).expect("E's takeover");
    let got = batches(&next);
    assert!(
        got.starts_with(&[(0, "a-0"), (3, "b-0"), (6, "c-0")]),
        "batch c, acknowledged by D, is lost: the deposed opener's late ftruncate(0) of \
         6.log landed on D's active segment; E serves {got:?}"
    );
}

/// ADVERSARY (5a48f52), the same hole without an opener: a former owner's write stalled in
/// flight lands over the new owner's acknowledged batch, because the new owner appends into
/// the former owner's active segment whenever recovery (not the listing) found it empty.
/// docs/cluster.md Fencing point 2: "a new owner never appends to a file a former owner may
/// still hold open: an empty last segment ... gets new files at the open".
///
/// Interleaving:
/// 1. A (epoch 1) rolls to 6 and, before its deadline, appends a batch of two pages to
///    6.log; the client's writeback sends them as two WRITEs; the second page reaches the
///    server, the first is in flight (A is cut off).
/// 2. B (epoch 2) acquires after A's deadline + lease: 6.log is not empty when listed (page
///    two, zeros before it), so its files are kept; recovery stops at 0 and cuts it to 0
///    bytes (loader.rs:223); the acquisition's roll does nothing (empty segment at the log
///    end); B appends c at 0 into A's inode and acknowledges it.
/// 3. A's first page lands at 0: over c. The next owner reads A's batch (never
///    acknowledged) at 6 and has lost c.
#[test]
#[allow(non_snake_case)]
fn a_former_owners_late_write_misses_a_segment_recovery_emptied() {
    use std::os::unix::fs::FileExt;
    let dir = tempfile::tempdir().unwrap();
    let (a, old, _, _) = adv_torn_only_last_segment(dir.path());
    let seg6 = dir.path().join("t-0").join("00000000000000000006.log");
    // Page two of A's write reached the server.
    std::fs::OpenOptions::new()
        .write(true)
        .open(&seg6)
        .unwrap()
        .write_all_at(&[0x5a; 512], 4096)
        .unwrap();

    let b = broker(dir.path(), 2);
    let owner = take_over(&b, 2, 6).unwrap();
    owner.roll(NOW).unwrap();
    owner.flush().unwrap();
    owner.append(batch("c"), AppendOrigin::Client, NOW).unwrap();
    owner
        .sync_appended()
        .expect("B's fsync and link check pass: batch c is acknowledged");
    let newest = owner.synced_mark().base;
    let rp = owner.recovery_point_offset();

    // A's first page lands (its append, issued before its deadline, written back now).
    let late = old.append(batch("stale"), AppendOrigin::Client, NOW);
    eprintln!("A's late write: {:?}", late.as_ref().map(|_| ()));
    let _ = old.flush();
    let _ = b.release_log(&tp());
    drop(a);

    let c = broker(dir.path(), 3);
    let next = take_over_recorded(&c, 3, rp, newest).expect("C's takeover");
    let got = batches(&next);
    assert!(
        got.starts_with(&[(0, "a-0"), (3, "b-0"), (6, "c-0")]),
        "batch c, acknowledged by B, is lost: A's late write landed in the file B appended \
         to; C serves {got:?}"
    );
}

/// A deposed opener's removals in `complete_swaps` (at open), stalled in flight, never land on
/// the cleaned segment the next owner's open renamed into place under the same name
/// (adversary on 5a48f52: before, the first old segment's files were removed by name, its
/// `.log` too, although the switch had renamed it aside).
///
/// Interleaving:
/// 1. A's cleaner switch is cut short (a crash, or A deposed) after renaming the old
///    segments aside (`CrashAt::OldRenamed`): 0.log.swap etc. and the old files as
///    `.deleted`.
/// 2. C opens (deposed meanwhile): complete_swaps finds the switch begun and removes what it
///    removes by name; each removal may be in flight (C is cut off).
/// 3. D acquires after C's deadline + lease; its open completes the same swap (renames
///    0.log.swap to 0.log) and serves the cleaned segment.
/// 4. C's removals land. The cleaned segment, the only copy of k1's record (acknowledged by
///    A), must still be there for the next owner.
#[test]
fn a_deposed_openers_late_removals_in_complete_swaps_miss_the_cleaned_segment() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let old = a
        .open_log(&tp(), uuid::Uuid::from_u128(7), compact_cfg(), 1)
        .unwrap();
    assert_eq!(put_keyed(&old, "k1", "keep-me"), 0);
    assert_eq!(put_keyed(&old, "k2", "old"), 1);
    old.roll(NOW).unwrap();
    assert_eq!(put_keyed(&old, "k2", "new"), 2);
    old.roll(NOW).unwrap();
    assert_eq!(put_keyed(&old, "x", "v"), 3);
    old.roll(NOW).unwrap();
    let rp = old.flush().unwrap();
    let _ = a.clean_log_at(&tp(), Some(crate::cleaner::CrashAt::OldRenamed));
    let t0 = dir.path().join("t-0");
    let names: Vec<String> = std::fs::read_dir(&t0)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .collect();
    eprintln!("after the cut-short switch: {names:?}");
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("00000000000000000000.log.") && n.ends_with(".swap")),
        "precondition: a switch cut short"
    );
    let _ = a.release_log(&tp());

    // C's open sees the directory as it is now: what its complete_swaps removes by name, on
    // a copy (its removals are the operations that may be in flight).
    let c_view = tempfile::tempdir().unwrap();
    for name in &names {
        std::fs::copy(t0.join(name), c_view.path().join(name)).unwrap();
    }
    let mut c_removes = Vec::new();
    crate::cleaner::recover::complete_swaps_removing(
        c_view.path(),
        &tp(),
        true,
        None,
        &mut c_removes,
    )
    .unwrap();
    let c_removes: Vec<std::ffi::OsString> = c_removes
        .iter()
        .map(|p| p.file_name().unwrap().to_os_string())
        .collect();
    eprintln!("C's removals by name: {c_removes:?}");

    // D's open completes the swap.
    let d = broker(dir.path(), 3);
    let dlog = d
        .open_log_at(&tp(), uuid::Uuid::from_u128(7), compact_cfg(), 3, rp, 0)
        .unwrap();
    dlog.roll(NOW).unwrap();
    dlog.flush().unwrap();
    let holds_k1 = |log: &Log| {
        let r = log.read(log.log_start_offset(), 1 << 20, true).unwrap();
        r.slice.is_some_and(|s| {
            let bytes = s.read_bytes().unwrap();
            bytes.windows(7).any(|w| w == b"keep-me")
        })
    };
    assert!(holds_k1(&dlog), "precondition: D serves k1");
    put_keyed(&dlog, "y", "v");
    dlog.sync_appended().unwrap();
    let rp = dlog.recovery_point_offset();
    let newest = dlog.synced_mark().base;

    // C's removals land.
    for name in &c_removes {
        let _ = std::fs::remove_file(t0.join(name));
    }
    let _ = d.release_log(&tp());

    let e = broker(dir.path(), 4);
    let next = e
        .open_log_at(
            &tp(),
            uuid::Uuid::from_u128(7),
            compact_cfg(),
            4,
            rp,
            newest,
        )
        .expect("E's takeover");
    assert!(
        holds_k1(&next),
        "k1's record (acknowledged, kept by the cleaner) is lost: a deposed opener's late \
         removal in complete_swaps landed on the cleaned segment (log start now {})",
        next.log_start_offset()
    );
}

/// An idle partition whose open removed segments is rolled and its expired data deleted
/// (adversary on 5a48f52: a roll deferral at removed bases, since replaced by the log
/// continuing past them, kept such data forever).
#[test]
fn an_idle_log_end_at_a_removed_base_is_still_rolled_for_retention() {
    let dir = tempfile::tempdir().unwrap();
    adv_damaged_before_9(dir.path());
    let retained = LogConfig {
        retention_ms: 60_000,
        segment_ms: 3_600_000,
        ..cfg()
    };
    let d = broker(dir.path(), 3);
    let dlog = d
        .open_log_at(&tp(), uuid::Uuid::from_u128(7), retained, 3, 0, 0)
        .unwrap();
    dlog.roll(NOW).unwrap();
    dlog.flush().unwrap();
    dlog.append(batch("e"), AppendOrigin::Client, NOW).unwrap();
    dlog.sync_appended().unwrap();
    assert_eq!(dlog.log_end_offset(), 13);
    // The partition is idle; days pass.
    // (The segment that continues the log has no timestamp: it ages from its file's
    // modification time, the wall clock's.)
    let now = NOW.max(crate::fsutil::now_ms());
    for day in 1..=7 {
        dlog.maintain(now + day * 86_400_000).unwrap();
    }
    assert_eq!(
        (dlog.log_start_offset(), dlog.segment_count()),
        (13, 1),
        "a week past retention.ms (60 s) and segment.ms (1 h), the idle partition still \
         serves its expired batches: its active segment was never rolled"
    );
}

/// Refuses once `refuse` says so (an opener deposed at that point).
struct RefuseWhen(Box<dyn Fn() -> bool + Send + Sync>);

impl std::fmt::Debug for RefuseWhen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RefuseWhen")
    }
}

impl WriteGate for RefuseWhen {
    fn check(&self, _tp: &TopicPartition, _id: uuid::Uuid, _epoch: i32) -> Result<(), String> {
        if (self.0)() {
            Err("deposed: another broker acquired the partition".into())
        } else {
            Ok(())
        }
    }
}

/// An open that removes the segments after damage makes the log continue past them first
/// (`continue_past_removed`); an opener deposed right after that (the segment holding the
/// batch of no records is in place, nothing removed, nothing cut) leaves a directory the next
/// open reads consistently: the damaged segment is complete up to the new segment (its
/// damage is cut, the segments after it kept), and the new segment's batch crosses the old
/// segment past the damage, an older epoch's: a stray, removed. The log goes on past every
/// base a removal named.
#[test]
fn an_opener_deposed_after_continuing_the_log_leaves_a_directory_the_next_open_reads() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let first = open(&a, 1);
    first.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
    first.roll(NOW).unwrap();
    first.append(batch("b"), AppendOrigin::Client, NOW).unwrap();
    first.append(batch("c"), AppendOrigin::Client, NOW).unwrap();
    first.roll(NOW).unwrap();
    first.append(batch("d"), AppendOrigin::Client, NOW).unwrap();
    first.flush().unwrap();
    a.release_log(&tp()).unwrap();
    // Segment 3 holds b (3..5) and c (6..8); a host crash damaged c. Segment 9 holds d.
    let t0 = dir.path().join("t-0");
    let seg3 = t0.join("00000000000000000003.log");
    let mut bytes = std::fs::read(&seg3).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&seg3, &bytes).unwrap();

    // C (epoch 2) opens and is deposed once the segment that continues the log is in place.
    let c = broker(dir.path(), 2);
    let filler = t0.join("00000000000000000006.log");
    let seen = filler.clone();
    c.set_write_gate(Arc::new(RefuseWhen(Box::new(move || seen.exists()))));
    let refused = c.open_log_at(&tp(), uuid::Uuid::from_u128(7), cfg(), 2, 0, 0);
    assert!(refused.is_err(), "C was deposed during its open");
    assert!(filler.exists(), "C made the segment that continues the log");
    assert!(
        t0.join("00000000000000000009.log").exists(),
        "C removed nothing after it was deposed"
    );

    // D (epoch 3) opens from what C left, acquires (roll) and appends e.
    let d = broker(dir.path(), 3);
    let dlog = d
        .open_log_at(&tp(), uuid::Uuid::from_u128(7), cfg(), 3, 0, 0)
        .unwrap();
    assert_eq!(
        dlog.log_end_offset(),
        10,
        "the log continues past 9, the base of the segment after the damage"
    );
    assert!(!t0.join("00000000000000000009.log").exists());
    dlog.roll(NOW).unwrap();
    dlog.append(batch("e"), AppendOrigin::Client, NOW).unwrap();
    dlog.sync_appended().unwrap();
    assert_eq!(
        batches(&dlog),
        vec![(0, "a-0"), (3, "b-0"), (6, "?"), (10, "e-0")]
    );
}

// ---------------------------------------------------------------------------------------
// Adversary review of 4a14d84 and 9ba9b36 (the log continues past removed segments through
// a batch of no records; an opener's spares have names of their own).
// ---------------------------------------------------------------------------------------

/// Segments 0 (a, b), 6 (c, epoch 1) and 9 (`d`, appended by `d_epoch`'s owner: a new
/// owner's acquisition roll at 9 when `d_epoch` > 1), all durable; then a host crash damages
/// batch c. Returns (the recovery point, the newest segment) the owner of 9 recorded.
fn adv51_damaged_before_9(dir: &Path, d_epoch: i32, d: Bytes) -> (i64, i64) {
    let a = broker(dir, 1);
    let first = open(&a, 1);
    first.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
    first.append(batch("b"), AppendOrigin::Client, NOW).unwrap();
    first.roll(NOW).unwrap();
    first.append(batch("c"), AppendOrigin::Client, NOW).unwrap();
    first.flush().unwrap();
    let recorded = if d_epoch == 1 {
        first.roll(NOW).unwrap();
        first.append(d, AppendOrigin::Client, NOW).unwrap();
        first.flush().unwrap();
        let r = (first.recovery_point_offset(), first.synced_mark().base);
        a.release_log(&tp()).unwrap();
        r
    } else {
        let rp = first.recovery_point_offset();
        a.release_log(&tp()).unwrap();
        let b = broker(dir, d_epoch);
        let owner = take_over_recorded(&b, d_epoch, rp, 0).unwrap();
        owner.roll(NOW).unwrap(); // the acquisition's roll, at 9
        owner.flush().unwrap();
        owner.append(d, AppendOrigin::Client, NOW).unwrap();
        owner.flush().unwrap();
        let r = (owner.recovery_point_offset(), owner.synced_mark().base);
        b.release_log(&tp()).unwrap();
        r
    };
    assert!(dir.join("t-0").join("00000000000000000009.log").exists());
    let seg6 = dir.join("t-0").join("00000000000000000006.log");
    let mut bytes = std::fs::read(&seg6).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&seg6, &bytes).unwrap();
    recorded
}

/// Found by an adversary on 9ba9b36, since fixed: the batch of no records that continues the log past the removed
/// segments loses its epoch, and with it the log's epoch history (OffsetsForLeaderEpoch,
/// KIP-320 truncation detection). `EpochCache::assign` (epoch.rs:59) ignores an epoch whose
/// start offset is below the newest entry's; the filler's start offset (`at`, loader.rs:205)
/// is always below the start of an epoch that began in a removed segment, and the cache is
/// then truncated only at the new log end (loader.rs:517, `truncate_from_end(leo)`), which
/// the filler moved past that start.
///
/// Interleaving (no deposed opener needed):
/// 1. A (epoch 1) appends a, b, rolls at 6, appends c (6..=8), releases.
/// 2. B (epoch 2) acquires, rolls at 9, appends d at 9 and acknowledges it; its
///    `leader-epoch-checkpoint` says epoch 2 begins at 9. A consumer fetches d: position 10,
///    last fetched epoch 2.
/// 3. A host crash damages c. C (epoch 3) opens: it cuts 6 to nothing, puts the filler
///    6..=9 (epoch 3) there and removes 9. `assign(3, 6)` is refused (6 < 9), and
///    `truncate_from_end(10)` keeps (2, 9): the cache says epoch 2 began at 9, inside C's
///    filler, and epoch 1 ran to 9.
/// 4. The consumer validates its position after the leader change: OffsetsForLeaderEpoch(2)
///    answers (2, 10), so it sees no truncation and never learns that d (and c, for a
///    consumer at 9 under epoch 1, told (1, 9)) is gone. Before 9ba9b36 the log end was 6,
///    the cache was truncated to (1, 0), and both consumers were told (1, 6).
#[test]
fn the_epochs_of_removed_segments_go_with_them() {
    let dir = tempfile::tempdir().unwrap();
    adv51_damaged_before_9(dir.path(), 2, batch("d"));
    let c = broker(dir.path(), 3);
    let log = take_over_recorded(&c, 3, 0, 0).unwrap();
    assert_eq!(log.log_end_offset(), 10, "the filler holds 6..=9");
    let entries = log.leader_epoch_entries();
    assert_eq!(
        (log.end_offset_for_epoch(1), log.end_offset_for_epoch(2)),
        (Some((1, 6)), Some((1, 6))),
        "epoch 1 ends at 6 (c is cut, the filler of epoch 3 begins there) and epoch 2 has no \
         offset left (d was removed); the epoch cache is {entries:?}, so a consumer that \
         read d (or c) is not told its position diverged"
    );
}

/// A deposed opener's late unlink of a segment it removes after damage lands on nothing the
/// next owner kept (adversary on 9ba9b36: once the filler was in place the next owner no
/// longer saw damage, the damaged segment being complete up to the filler, and kept the
/// recorded newest segment, which is never a stray, cutting the filler where it crossed it;
/// the deposed opener's removal of that very segment, stalled in flight, then landed on it).
/// Now the segments the filler crosses are strays whatever the record names.
///
/// Interleaving:
/// 1. A (epoch 1) appends a, b, rolls at 6, appends c, rolls at 9, appends d (idempotent
///    producer P, sequence 0) and fsyncs; its confirmation round records segment 9 in the
///    owner record (`record_segment`, before `confirm_held`), then its confirmation fails
///    (A's lease expired): P is told to retry, and the record's recovery point (raised only
///    after a confirmed round) stays below 9 (here 0). A host crash damages c.
/// 2. C (epoch 2) acquires and opens (recorded newest 9): it puts the filler 6..=9 in place,
///    passes its check "removing the segments after damage" and issues its unlink of
///    `9.log`: in flight.
/// 3. D (epoch 3) acquires after C's deadline plus the lease and opens: 6 holds the filler,
///    complete up to 9, and 9 lies under it: a stray, removed. D rolls at 10 and flushes.
///    P's retry of d reaches D and is appended at 10 (before: 9 was kept, and the retry was
///    answered as a duplicate at 9). D appends e and acknowledges both.
/// 4. C's unlink of `9.log` lands on nothing: the next owner has d and e.
#[test]
fn a_deposed_openers_late_unlink_takes_no_segment_the_next_owner_kept() {
    let dir = tempfile::tempdir().unwrap();
    let d_batch = Bytes::from(
        BatchBuilder::new()
            .producer(42, 0, 0)
            .record(NOW, Some(b"k"), Some(b"d-0"))
            .build(),
    );
    let (_, newest) = adv51_damaged_before_9(dir.path(), 1, d_batch.clone());
    assert_eq!(newest, 9, "A's record names segment 9");
    let t0 = dir.path().join("t-0");

    let d_log: Arc<parking_lot::Mutex<Option<(LogManager, Arc<Log>)>>> = Default::default();
    let (slot, root, t) = (d_log.clone(), dir.path().to_path_buf(), t0.clone());
    // C's checks: 1 the directory, 2 and 3 cutting segments 0 and 6, 4 continuing the log,
    // 5 to 7 the renames of 6's new files, 8 removing the segments after damage: its unlink
    // of 9 is in flight while this runs.
    let c = stalled_opener(dir.path(), 2, 8, move || {
        assert!(
            t.join("00000000000000000009.log").exists(),
            "C has not removed 9 yet"
        );
        let six = std::fs::read(t.join("00000000000000000006.log")).unwrap();
        let h = sluice_format::parse_batches(&six, None).unwrap()[0].header;
        assert_eq!(
            (h.base_offset, h.last_offset(), h.record_count),
            (6, 9, 0),
            "C's filler is in place"
        );
        let d = broker(&root, 3);
        let log = take_over_recorded(&d, 3, 0, 9).expect("D's takeover");
        log.roll(NOW).unwrap();
        log.flush().unwrap();
        assert!(
            !t.join("00000000000000000009.log").exists(),
            "9, under C's filler, is a stray to D"
        );
        let retry = log.append(d_batch, AppendOrigin::Client, NOW).unwrap();
        assert!(!retry.duplicate && retry.base_offset == 10, "{retry:?}");
        log.append(batch("e"), AppendOrigin::Client, NOW).unwrap();
        log.sync_appended()
            .expect("D's fsync and link check pass: d (P's retry) and e are acknowledged");
        assert_eq!(
            batches(&log),
            vec![(0, "a-0"), (3, "b-0"), (6, "?"), (10, "d-0"), (11, "e-0")]
        );
        *slot.lock() = Some((d, log));
    });
    // C resumes: its unlink of 9 lands; its next check refuses.
    let c_open = take_over_recorded(&c, 2, 0, 9);
    assert!(c_open.is_err(), "C was deposed");
    let (d, dlog) = d_log.lock().take().expect("D acquired while C was stalled");
    eprintln!("D's next fsync: {:?}", dlog.sync_appended().map(|_| ()));
    let newest = dlog.synced_mark().base;
    let rp = dlog.recovery_point_offset();
    let _ = d.release_log(&tp());
    let e = broker(dir.path(), 4);
    match take_over_recorded(&e, 4, rp, newest) {
        Ok(next) => assert_eq!(
            batches(&next),
            vec![(0, "a-0"), (3, "b-0"), (6, "?"), (10, "d-0"), (11, "e-0")],
            "a batch D acknowledged is lost: C's late unlink of 9.log landed on a segment D kept"
        ),
        Err(err) => panic!("the partition can no longer be opened: {err}"),
    }
}

/// Found by an adversary on 4a14d84/9ba9b36, not introduced by them, since fixed: an opener deposed right after it
/// removed the segments after damage (no operation in flight) leaves the partition
/// unopenable. Those segments may include the one the owner record names as the newest
/// with published data (loader.rs:224 removes every later base; the stray rule spares the
/// recorded one, loader.rs:182, this one does not). The record is corrected only by the
/// opener's own acquisition (`record_acquired`, which "records the segment it rolled even
/// below the recorded one"); a deposed opener never gets there, and every later open is
/// refused as a stale view (`check_listing_is_current`, loader.rs:1122), although the
/// filler has moved the log past the recorded base.
///
/// Interleaving:
/// 1. A (epoch 1): segments 0 (a, b), 6 (c), 9 (d); its record names segment 9, its
///    recovery point lags (as in the test above). A host crash damages c.
/// 2. C (epoch 2) opens: filler 6..=9 at 6, passes "removing the segments after damage",
///    removes 9; its lease expires (its next check refuses): it records nothing.
/// 3. D (epoch 3) acquires with the record (recovery point 0, segment 9): its listing
///    shows 0 and 6 only; refused, and so is every later takeover: nothing can correct the
///    record but an owner's acquisition.
#[test]
fn an_opener_deposed_after_its_removals_leaves_an_openable_partition() {
    let dir = tempfile::tempdir().unwrap();
    let (_, newest) = adv51_damaged_before_9(dir.path(), 1, batch("d"));
    assert_eq!(newest, 9);
    let t0 = dir.path().join("t-0");
    let c = broker(dir.path(), 2);
    let nine = t0.join("00000000000000000009.log");
    let gone = nine.clone();
    c.set_write_gate(Arc::new(RefuseWhen(Box::new(move || !gone.exists()))));
    let refused = take_over_recorded(&c, 2, 0, 9);
    assert!(refused.is_err(), "C was deposed during its open");
    assert!(!nine.exists(), "C removed 9 before it was deposed");

    let d = broker(dir.path(), 3);
    match take_over_recorded(&d, 3, 0, 9) {
        Ok(log) => assert_eq!(log.log_end_offset(), 10),
        Err(e) => panic!(
            "the partition can no longer be opened: the record names segment 9, which a \
             deposed opener removed after damage: {e}"
        ),
    }
}

/// Found by an adversary on 9ba9b36, since fixed: the filler moves the log end to one past the last removed base,
/// which is where the log ended before the damage whenever the last removed segment held
/// one offset. A producer snapshot written at that old log end (a state rebuilt at open,
/// `persist_rebuilt_state`, loader.rs:747, by an opener deposed before its acquisition's
/// roll) is then "at the log end" (loader.rs:525: kept) and loaded (loader.rs:537),
/// although it counts the batches the open just removed. A producer's retry of a removed
/// batch is answered as a duplicate at an offset that holds the filler: acknowledged, never
/// stored. Before 9ba9b36 the log end was the damage's offset, below that snapshot, which
/// was removed and not loaded, and the retry was appended.
///
/// Interleaving:
/// 1. A (epoch 1): segments 0 (a, b), 6 (c), 9 (d: idempotent producer P, sequence 0, one
///    record). A's answer for d never reaches P (a timeout, a dropped connection): P will
///    retry d. A's host crashes; its producer snapshots are lost ("a crash lost every
///    snapshot", loader.rs:843).
/// 2. B (epoch 2) acquires and opens: no snapshot, so it rebuilds the producer state from
///    the log start and writes it at its log end, `10.snapshot` (P: sequence 0 at 9). B is
///    deposed before its acquisition's roll (its lease expired): nothing else is written.
/// 3. A host crash damages c. C (epoch 3) acquires: it cuts 6, puts the filler 6..=9 there,
///    removes 9: the log end is 10, and `10.snapshot` is kept and loaded.
/// 4. P's retry of d reaches C: a duplicate of the batch at 9, acknowledged with offset 9,
///    where the filler is. d is in no batch of the log.
#[test]
fn a_retry_of_a_removed_batch_is_appended_not_taken_for_a_duplicate() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = dir.path().join("t-0");
    let d_batch = Bytes::from(
        BatchBuilder::new()
            .producer(42, 0, 0)
            .record(NOW, Some(b"k"), Some(b"d-0"))
            .build(),
    );
    let a = broker(dir.path(), 1);
    let first = open(&a, 1);
    first.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
    first.append(batch("b"), AppendOrigin::Client, NOW).unwrap();
    first.roll(NOW).unwrap();
    first.append(batch("c"), AppendOrigin::Client, NOW).unwrap();
    first.roll(NOW).unwrap();
    first
        .append(d_batch.clone(), AppendOrigin::Client, NOW)
        .unwrap();
    first.flush().unwrap();
    a.release_log(&tp()).unwrap();
    for e in std::fs::read_dir(&t0).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "snapshot") {
            std::fs::remove_file(path).unwrap();
        }
    }

    // B opens, rebuilds the producer state and writes it at 10; deposed before its roll.
    let b = broker(dir.path(), 2);
    let blog = take_over_recorded(&b, 2, 0, 0).unwrap();
    assert_eq!(blog.log_end_offset(), 10);
    drop(blog);
    b.release_log(&tp()).unwrap();
    assert!(
        t0.join("00000000000000000010.snapshot").exists(),
        "B's open wrote the state it rebuilt at its log end"
    );

    let seg6 = t0.join("00000000000000000006.log");
    let mut bytes = std::fs::read(&seg6).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&seg6, &bytes).unwrap();

    let c = broker(dir.path(), 3);
    let log = take_over_recorded(&c, 3, 0, 0).unwrap();
    assert_eq!(log.log_end_offset(), 10, "the filler holds 6..=9");
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    // P's retry of d.
    let retry = log.append(d_batch, AppendOrigin::Client, NOW).unwrap();
    log.sync_appended().expect("C acknowledges P's retry");
    let got = batches(&log);
    assert!(
        got.iter().any(|(_, tag)| *tag == "d-0"),
        "P's retry of d was acknowledged ({retry:?}) but d is in no batch of the log: \
         {got:?}; C's producer state came from B's snapshot at 10, the filler's end"
    );
}

/// The batch of no records that continues a log answers no ListOffsets by timestamp (found by
/// an adversary on 9ba9b36, since fixed: it carried the opener's wall clock, and
/// MAX_TIMESTAMP answered its last offset, a timestamp past every record its base offset).
/// It has no timestamp now: Kafka answers with records only.
///
/// Segments 0 (a, b), 6 (c), 9 (d), records stamped NOW..NOW+2; a host crash damages c; C
/// opens: the filler 6..=9.
#[test]
fn the_filler_batch_answers_no_list_offsets_by_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    adv51_damaged_before_9(dir.path(), 1, batch("d"));
    let c = broker(dir.path(), 2);
    let log = take_over_recorded(&c, 2, 0, 0).unwrap();
    assert_eq!(log.log_end_offset(), 10, "the filler holds 6..=9");
    assert_eq!(
        (
            log.max_timestamp(),
            log.offset_for_timestamp(NOW + 3_600_000).unwrap()
        ),
        (Some((NOW + 2, 2)), None),
        "ListOffsets answers from the filler batch, which holds no record: MAX_TIMESTAMP \
         must be a record's (a-2 at 2), and no record is stamped an hour after NOW"
    );
}

/// A write gate that lets everything through and, armed, the first time it is asked while
/// `from` exists, renames `from` to `to` first (removes `from` when `to` is None): a deposed
/// opener's rename or unlink by name, stalled in flight, landing at that moment.
struct LandRenameWhenSourceExists {
    armed: std::sync::atomic::AtomicBool,
    fired: std::sync::atomic::AtomicBool,
    from: std::path::PathBuf,
    to: Option<std::path::PathBuf>,
}

impl std::fmt::Debug for LandRenameWhenSourceExists {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LandRenameWhenSourceExists")
    }
}

impl WriteGate for LandRenameWhenSourceExists {
    fn check(&self, _tp: &TopicPartition, _id: uuid::Uuid, _epoch: i32) -> Result<(), String> {
        use std::sync::atomic::Ordering::SeqCst;
        if self.armed.load(SeqCst) && self.from.exists() && !self.fired.swap(true, SeqCst) {
            let landed = match &self.to {
                Some(to) => std::fs::rename(&self.from, to),
                None => std::fs::remove_file(&self.from),
            };
            eprintln!("the deposed opener's late operation lands: {landed:?}");
        }
        Ok(())
    }
}

/// Found by an adversary on 4a14d84, since fixed (each switch's swap files are named with its
/// tag, `swap::swap_path`): completing a cut-short cleaner swap renamed by name, and the
/// names were not the opener's own: `<base>.log.swap` (cleaner/recover.rs:140-147,
/// `std::fs::rename(swap_path(..), seg_path(..))`). A deposed opener's rename of it, stalled
/// in flight, lands on the `.swap` of the next owner's own later cleaning at the same base
/// (base 0 is cleaned again and again), between its step 2 (cleaned files renamed to the
/// swap names) and its step 4 (old files aside, swap files in, swap.rs:390-412): the cleaned
/// `.log` replaces the live one early, step 4 then renames that file aside (by the old
/// segment's name) and finds no `0.log.swap` to rename in; the log fails, and the next open
/// finds no `0.log` at all and removes the `.deleted` files: the group's records are gone.
/// (The spares got names of their own in 4a14d84; the swap files did not.)
///
/// Interleaving:
/// 1. A's cleaner switch is cut short after renaming the old segments aside
///    (`CrashAt::OldRenamed`): `0.log.swap` (k1 = keep-me, acknowledged) and the old files
///    as `.deleted`.
/// 2. C (epoch 2) opens and is deposed: its `complete_swaps` finds the switch begun, renames
///    the index swaps in and issues `rename(0.log.swap, 0.log)`: in flight.
/// 3. D (epoch 3) acquires after C's deadline plus the lease; its open completes the same
///    swap (`0.log.swap` becomes `0.log`). D appends y and x (superseding x) and acknowledges
///    them; its cleaner cleans the group at 0 again: step 2 renames its cleaned files to
///    `0.*.swap`.
/// 4. C's rename lands: D's `0.log.swap` becomes `0.log`. D's step 4 renames `0.log` (the
///    cleaned file) aside and fails on the missing `0.log.swap`; its log fails.
/// 5. E acquires: no `0.log`, the `.deleted` files are removed: the log starts at 6; k1
///    (acknowledged by A) and y and x at 4 and 5 (acknowledged by D) are lost.
#[test]
fn a_deposed_openers_late_swap_rename_misses_the_next_owners_cleaning() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let old = a
        .open_log(&tp(), uuid::Uuid::from_u128(7), compact_cfg(), 1)
        .unwrap();
    assert_eq!(put_keyed(&old, "k1", "keep-me"), 0);
    assert_eq!(put_keyed(&old, "k2", "old"), 1);
    old.roll(NOW).unwrap();
    assert_eq!(put_keyed(&old, "k2", "new"), 2);
    old.roll(NOW).unwrap();
    assert_eq!(put_keyed(&old, "x", "v"), 3);
    old.roll(NOW).unwrap();
    let rp = old.flush().unwrap();
    let _ = a.clean_log_at(&tp(), Some(crate::cleaner::CrashAt::OldRenamed));
    let t0 = dir.path().join("t-0");
    let a_swap = swap_left_at_0(&t0);
    assert!(a_swap.exists(), "precondition: a switch cut short");
    let _ = a.release_log(&tp());

    // C's rename of 0.log.swap is in flight from here; D's gate lands it when armed.
    let gate = Arc::new(LandRenameWhenSourceExists {
        armed: false.into(),
        fired: false.into(),
        from: a_swap.clone(),
        to: Some(t0.join("00000000000000000000.log")),
    });
    let d = broker(dir.path(), 3);
    d.set_write_gate(gate.clone());
    let dlog = d
        .open_log_at(&tp(), uuid::Uuid::from_u128(7), compact_cfg(), 3, rp, 0)
        .unwrap();
    dlog.roll(NOW).unwrap();
    dlog.flush().unwrap();
    let holds_k1 = |log: &Log| {
        let r = log.read(log.log_start_offset(), 1 << 20, true).unwrap();
        r.slice.is_some_and(|s| {
            let bytes = s.read_bytes().unwrap();
            bytes.windows(7).any(|w| w == b"keep-me")
        })
    };
    assert!(holds_k1(&dlog), "precondition: D serves k1");
    put_keyed(&dlog, "y", "v");
    put_keyed(&dlog, "x", "w");
    dlog.roll(NOW).unwrap();
    dlog.sync_appended().unwrap();
    gate.armed.store(true, std::sync::atomic::Ordering::SeqCst);
    let cleaned = d.clean_log(&tp());
    eprintln!(
        "D's cleaning: {:?}; the deposed opener's rename landed: {}",
        cleaned.as_ref().map(|_| ()),
        gate.fired.load(std::sync::atomic::Ordering::SeqCst)
    );
    let rp = dlog.recovery_point_offset();
    let newest = dlog.synced_mark().base;
    let _ = d.release_log(&tp());

    let e = broker(dir.path(), 4);
    let next = e
        .open_log_at(
            &tp(),
            uuid::Uuid::from_u128(7),
            compact_cfg(),
            4,
            rp,
            newest,
        )
        .expect("E's takeover");
    assert!(
        holds_k1(&next),
        "k1's record (acknowledged, kept by both cleanings) is lost: a deposed opener's late \
         rename of 0.log.swap landed in the next owner's cleaning (log start now {})",
        next.log_start_offset()
    );
}

/// Found by an adversary on 4a14d84, since fixed (tagged swap names): the same with a removal
/// by name. `complete_swaps` removes the swap
/// files of a switch that had not begun by name (cleaner/recover.rs:93,
/// `remove_if_exists(&swap_path(..))`); a deposed opener's unlink of `0.log.swap`, stalled
/// in flight, lands between steps 2 and 4 of the next owner's own cleaning at base 0: step 4
/// renames the old segments aside, finds no `0.log.swap`, and fails the log; the next open
/// finds no `0.log` and removes the `.deleted` files.
///
/// Interleaving:
/// 1. A's cleaner leaves its swap files without beginning the switch (`CrashAt::Swapped`: a
///    crash, or the gate refusing A's switch once deposed).
/// 2. C (epoch 2) opens and is deposed: `complete_swaps` removes `0.log.swap` and its index
///    swaps by name; the unlink of `0.log.swap` is in flight.
/// 3. D (epoch 3) acquires after C's deadline plus the lease (its open removes A's swap files
///    too), appends and acknowledges; its cleaner cleans the group at 0: step 2 renames its
///    cleaned files to `0.*.swap`.
/// 4. C's unlink lands on D's `0.log.swap`; D's step 4 renames `0.log` aside and fails.
/// 5. E acquires: no `0.log`; k1 (acknowledged by A, kept by D's cleaning) is lost.
#[test]
fn a_deposed_openers_late_swap_removal_misses_the_next_owners_cleaning() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let old = a
        .open_log(&tp(), uuid::Uuid::from_u128(7), compact_cfg(), 1)
        .unwrap();
    assert_eq!(put_keyed(&old, "k1", "keep-me"), 0);
    assert_eq!(put_keyed(&old, "k2", "old"), 1);
    old.roll(NOW).unwrap();
    assert_eq!(put_keyed(&old, "k2", "new"), 2);
    old.roll(NOW).unwrap();
    assert_eq!(put_keyed(&old, "x", "v"), 3);
    old.roll(NOW).unwrap();
    let rp = old.flush().unwrap();
    let _ = a.clean_log_at(&tp(), Some(crate::cleaner::CrashAt::Swapped));
    let t0 = dir.path().join("t-0");
    let a_swap = swap_left_at_0(&t0);
    assert!(
        a_swap.exists() && t0.join("00000000000000000000.log").exists(),
        "precondition: swap files left, the switch not begun"
    );
    let _ = a.release_log(&tp());

    let gate = Arc::new(LandRenameWhenSourceExists {
        armed: false.into(),
        fired: false.into(),
        from: a_swap.clone(),
        to: None,
    });
    let d = broker(dir.path(), 3);
    d.set_write_gate(gate.clone());
    let dlog = d
        .open_log_at(&tp(), uuid::Uuid::from_u128(7), compact_cfg(), 3, rp, 0)
        .unwrap();
    dlog.roll(NOW).unwrap();
    dlog.flush().unwrap();
    let holds_k1 = |log: &Log| {
        let r = log.read(log.log_start_offset(), 1 << 20, true).unwrap();
        r.slice.is_some_and(|s| {
            let bytes = s.read_bytes().unwrap();
            bytes.windows(7).any(|w| w == b"keep-me")
        })
    };
    assert!(holds_k1(&dlog), "precondition: D serves k1");
    put_keyed(&dlog, "y", "v");
    put_keyed(&dlog, "x", "w");
    dlog.roll(NOW).unwrap();
    dlog.sync_appended().unwrap();
    gate.armed.store(true, std::sync::atomic::Ordering::SeqCst);
    let cleaned = d.clean_log(&tp());
    eprintln!(
        "D's cleaning: {:?}; the deposed opener's unlink landed: {}",
        cleaned.as_ref().map(|_| ()),
        gate.fired.load(std::sync::atomic::Ordering::SeqCst)
    );
    let rp = dlog.recovery_point_offset();
    let newest = dlog.synced_mark().base;
    let _ = d.release_log(&tp());

    let e = broker(dir.path(), 4);
    let next = e
        .open_log_at(
            &tp(),
            uuid::Uuid::from_u128(7),
            compact_cfg(),
            4,
            rp,
            newest,
        )
        .expect("E's takeover");
    assert!(
        holds_k1(&next),
        "k1's record (acknowledged, kept by D's cleaning) is lost: a deposed opener's late \
         unlink of 0.log.swap landed in the next owner's cleaning (log start now {})",
        next.log_start_offset()
    );
}

/// The `.log` swap file a switch at 0 left in `t0` (`<base>.log.<tag>.swap`).
fn swap_left_at_0(t0: &Path) -> std::path::PathBuf {
    let left: Vec<_> = std::fs::read_dir(t0)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().to_string();
            n.starts_with("00000000000000000000.log.") && n.ends_with(".swap")
        })
        .collect();
    assert_eq!(left.len(), 1, "one .log swap file at 0: {left:?}");
    left[0].clone()
}

/// Found by an adversary on 9ba9b36, since fixed: as
/// `a_deposed_openers_late_unlink_takes_no_segment_the_next_owner_kept`,
/// without a recorded segment or a lagging recovery point: in a log adopted from Kafka the
/// later segments' batches carry Kafka's leader epochs, above the cluster's owner epochs,
/// so the filler (at the opener's owner epoch) is never "newer" than the segment it
/// crosses (`is_stray`, loader.rs:1055): the next owner cuts the filler and keeps the
/// segments the deposed opener is removing, and the opener's late unlink takes one of them.
///
/// Interleaving:
/// 1. The Kafka era (leader epoch 57): segments 0 (a, b), 6 (c), 9 (d: idempotent producer
///    P, sequence 0). The log is adopted by the cluster; a host crash damages c.
/// 2. C (owner epoch 1, the first acquisition: no record) opens: it puts the filler 6..=9
///    (epoch 1) in place, passes "removing the segments after damage" and issues its unlink
///    of `9.log`: in flight.
/// 3. D (epoch 2) acquires after C's deadline plus the lease and opens: 6 is complete up to
///    the filler; the filler crosses 9, whose first batch has epoch 57 > 1. Before, not a
///    stray: the filler was cut, 9 kept, and P's retry of d a duplicate at 9. Now whatever
///    lies under the filler is a stray: D removes 9, rolls at 10, appends P's retry of d
///    there and e, and acknowledges both.
/// 4. C's unlink of `9.log` lands on nothing.
#[test]
fn a_deposed_openers_late_unlink_takes_no_kafka_era_segment_the_next_owner_kept() {
    let dir = tempfile::tempdir().unwrap();
    let d_batch = Bytes::from(
        BatchBuilder::new()
            .producer(42, 0, 0)
            .record(NOW, Some(b"k"), Some(b"d-0"))
            .build(),
    );
    {
        let k = broker(dir.path(), 9);
        let kl = open(&k, 57);
        kl.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
        kl.append(batch("b"), AppendOrigin::Client, NOW).unwrap();
        kl.roll(NOW).unwrap();
        kl.append(batch("c"), AppendOrigin::Client, NOW).unwrap();
        kl.roll(NOW).unwrap();
        kl.append(d_batch.clone(), AppendOrigin::Client, NOW)
            .unwrap();
        kl.flush().unwrap();
        k.release_log(&tp()).unwrap();
    }
    let t0 = dir.path().join("t-0");
    let seg6 = t0.join("00000000000000000006.log");
    let mut bytes = std::fs::read(&seg6).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&seg6, &bytes).unwrap();

    let d_log: Arc<parking_lot::Mutex<Option<(LogManager, Arc<Log>)>>> = Default::default();
    let (slot, root, t) = (d_log.clone(), dir.path().to_path_buf(), t0.clone());
    // C's checks: 1 the directory, 2 and 3 cutting segments 0 and 6, 4 continuing the log,
    // 5 to 7 the renames of 6's new files, 8 removing the segments after damage: its unlink
    // of 9 is in flight while this runs.
    let c = stalled_opener(dir.path(), 1, 8, move || {
        assert!(t.join("00000000000000000009.log").exists());
        let six = std::fs::read(t.join("00000000000000000006.log")).unwrap();
        let h = sluice_format::parse_batches(&six, None).unwrap()[0].header;
        assert_eq!(
            (h.base_offset, h.last_offset(), h.record_count),
            (6, 9, 0),
            "C's filler is in place"
        );
        let d = broker(&root, 2);
        let log = open(&d, 2);
        log.roll(NOW).unwrap();
        log.flush().unwrap();
        let retry = log.append(d_batch, AppendOrigin::Client, NOW).unwrap();
        assert!(!retry.duplicate && retry.base_offset == 10, "{retry:?}");
        log.append(batch("e"), AppendOrigin::Client, NOW).unwrap();
        log.sync_appended()
            .expect("D's fsync and link check pass: d (P's retry) and e are acknowledged");
        assert_eq!(
            batches(&log),
            vec![(0, "a-0"), (3, "b-0"), (6, "?"), (10, "d-0"), (11, "e-0")]
        );
        *slot.lock() = Some((d, log));
    });
    let c_open = c.open_log(&tp(), uuid::Uuid::from_u128(7), cfg(), 1);
    assert!(c_open.is_err(), "C was deposed");
    let (d, dlog) = d_log.lock().take().expect("D acquired while C was stalled");
    let newest = dlog.synced_mark().base;
    let rp = dlog.recovery_point_offset();
    let _ = d.release_log(&tp());
    let e = broker(dir.path(), 4);
    match take_over_recorded(&e, 3, rp, newest) {
        Ok(next) => assert_eq!(
            batches(&next),
            vec![(0, "a-0"), (3, "b-0"), (6, "?"), (10, "d-0"), (11, "e-0")],
            "a batch D acknowledged is lost: C's late unlink of 9.log landed on a segment D kept"
        ),
        Err(err) => panic!("the partition can no longer be opened: {err}"),
    }
}

/// Found by an adversary on 9ba9b36, since fixed: `the_epochs_of_removed_segments_go_with_them` with
/// the records the cluster actually keeps. An owner record's recovery point is at or past
/// the base of the segment its acquisition started, so an open recovers from below an
/// epoch's start only when there is no record: the first acquisition of a log adopted from
/// Kafka (`open_log`, every segment recovered), whose `leader-epoch-checkpoint` holds
/// Kafka's epochs, which may begin anywhere. The filler (owner epoch 1) is refused by the
/// cache (epoch.rs:59), and `truncate_from_end(10)` (loader.rs:517) keeps Kafka's epoch 57
/// beginning at 9, an offset that now holds the filler: OffsetsForLeaderEpoch(57) answers
/// the log end, so a consumer migrated from Kafka that read d (offset 9, epoch 57) is told
/// its position is valid. Before 9ba9b36 the log ended at 6 and the entry was dropped.
///
/// Interleaving: the Kafka era writes a, b (epoch 55), c at 6 (epoch 55) and d at 9 (epoch
/// 57, a leader change); a host crash damages c; the cluster's first acquisition (C, owner
/// epoch 1) opens: the filler 6..=9 at 6, 9 removed.
#[test]
fn a_kafka_epoch_of_removed_segments_goes_with_them() {
    let dir = tempfile::tempdir().unwrap();
    {
        let k = broker(dir.path(), 9);
        let kl = open(&k, 55);
        kl.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
        kl.append(batch("b"), AppendOrigin::Client, NOW).unwrap();
        kl.roll(NOW).unwrap();
        kl.append(batch("c"), AppendOrigin::Client, NOW).unwrap();
        kl.roll(NOW).unwrap();
        kl.set_leader_epoch(57);
        kl.append(batch("d"), AppendOrigin::Client, NOW).unwrap();
        kl.flush().unwrap();
        assert_eq!(kl.leader_epoch_entries(), vec![(55, 0), (57, 9)]);
        k.release_log(&tp()).unwrap();
    }
    let seg6 = dir.path().join("t-0").join("00000000000000000006.log");
    let mut bytes = std::fs::read(&seg6).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&seg6, &bytes).unwrap();

    let c = broker(dir.path(), 1);
    let log = open(&c, 1);
    assert_eq!(log.log_end_offset(), 10, "the filler holds 6..=9");
    let entries = log.leader_epoch_entries();
    assert!(
        entries.iter().all(|&(_, start)| start < 6),
        "the epoch cache has an epoch beginning inside the filler (6..=9), whose batch is \
         of epoch 1: {entries:?}; OffsetsForLeaderEpoch(57) answers {:?}",
        log.end_offset_for_epoch(57)
    );
}

// ---------------------------------------------------------------------------------------
// Adversary review of 05d20be, 265e829 and 0a7da8d (the filler made a stray of what it
// crosses; tagged swap names).
// ---------------------------------------------------------------------------------------

/// Found by an adversary on 0a7da8d, since fixed: when the removed segments' offsets do not fit one batch of no records, the open
/// removes them "without covering their bases" (loader.rs:1461-1464, `continue_past_removed`
/// returns false) and the log end goes back to the damage: the late unlink that 9ba9b36 closed
/// is open again for every removed base within reach, although only the last one is far.
///
/// Interleaving:
/// 1. A (epoch 1): segments 0 (a, b), 6 (c), 9 (d) and a later segment whose base is more
///    than `i32::MAX` offsets past c (a log whose offsets past the damage span that far: a
///    long compacted log, an adopted Kafka log, an open with no recovery point recorded);
///    a host crash damages c.
/// 2. C (epoch 2) opens: `filler_batch(6, last removed base)` is None, so no segment covers
///    9; C issues its unlink of `9.log` (it passed "removing the segments after damage"),
///    which stalls in flight; C is deposed.
/// 3. D (epoch 3) opens the same way (no filler, 9 removed, log end 6), appends e at 6..=8,
///    acknowledges it, hands the partition over: the hand-over's roll makes `9.log`.
/// 4. E (epoch 4) acquires, appends d at 9 and acknowledges it (its record names segment 9).
/// 5. C's unlink of `9.log` lands: d is gone, and the next takeover (record: segment 9) finds
///    no segment at or past 9 and is refused as a stale view, at every attempt.
#[test]
fn removed_bases_beyond_one_batchs_reach_are_never_rolled_at_again() {
    let dir = tempfile::tempdir().unwrap();
    adv_damaged_before_9(dir.path());
    let t0 = dir.path().join("t-0");
    let far = 3_000_000_000i64;
    let mut b = BatchBuilder::new().record(NOW, Some(b"k"), Some(b"far-0"));
    b.base_offset = far;
    b.partition_leader_epoch = 1;
    std::fs::write(t0.join(format!("{far:020}.log")), b.build()).unwrap();

    // D (epoch 3): its open cuts 6 and removes 9 and the far segment; C's unlinks of 9 are
    // in flight.
    let d = broker(dir.path(), 3);
    let dlog = take_over_recorded(&d, 3, 0, 0).unwrap();
    dlog.roll(NOW).unwrap();
    dlog.flush().unwrap();
    eprintln!("log end after D's open: {}", dlog.log_end_offset());
    dlog.append(batch("e"), AppendOrigin::Client, NOW).unwrap();
    dlog.sync_appended().unwrap();
    let rp = d.hand_over_log(&tp(), NOW).unwrap().unwrap();
    let newest = dlog.synced_mark().base;

    // E (epoch 4) acquires, appends d and acknowledges it.
    let e = broker(dir.path(), 4);
    let elog = take_over_recorded(&e, 4, rp, newest).unwrap();
    elog.roll(NOW).unwrap();
    elog.flush().unwrap();
    let out = elog.append(batch("d"), AppendOrigin::Client, NOW).unwrap();
    elog.sync_appended()
        .expect("E's fsync and link check pass: batch d is acknowledged");
    let newest = elog.synced_mark().base;
    let rp = elog.recovery_point_offset();
    eprintln!("d acknowledged at {} in segment {newest}", out.base_offset);

    adv_stalled_unlinks_of_9_land(dir.path());
    let _ = e.release_log(&tp());
    let f = broker(dir.path(), 5);
    match take_over_recorded(&f, 5, rp, newest) {
        Ok(next) => assert!(
            batches(&next).iter().any(|(_, t)| *t == "d-0"),
            "an acknowledged batch is lost: C's late unlink of 9 landed on E's segment: {:?}",
            batches(&next)
        ),
        Err(err) => panic!(
            "the partition can no longer be opened (its record names segment {newest}, which \
             C's late unlink removed), and d, acknowledged at {}, is gone: {err}",
            out.base_offset
        ),
    }
}

/// Refuses once `6.log` begins with a batch of no records: an opener deposed right after the
/// segment that continues the log at 6 (over the damaged segment's files) is in place.
fn adv51b_deposed_once_the_filler_is_at_6(t0: &Path) -> Arc<RefuseWhen> {
    let six = t0.join("00000000000000000006.log");
    Arc::new(RefuseWhen(Box::new(move || {
        std::fs::read(&six)
            .ok()
            .and_then(|b| parse_batches(&b, None).ok())
            .and_then(|v| v.first().map(|x| x.header.record_count == 0))
            .unwrap_or(false)
    })))
}

/// Found by an adversary on 0a7da8d, since fixed: the epochs of the segments under a filler survive when the opener that made it
/// was deposed before its removals: the fix of `the_epochs_of_removed_segments_go_with_them`
/// truncates the epoch cache only in the open that made the filler (loader.rs:228-236,
/// `if let Some(at) = continued_at`); the next open removes the same segments as strays under
/// the filler (`is_stray` -> true, loader.rs:1076; `put_stray_aside`, loader.rs:1100-1122),
/// which touches no epoch, and `EpochCache::assign` refuses the filler's epoch at 6 below the
/// removed segment's epoch start at 9.
///
/// Interleaving:
/// 1. A (epoch 1) appends a, b, rolls at 6, appends c; B (epoch 2) acquires, rolls at 9,
///    appends d at 9 and acknowledges it (`leader-epoch-checkpoint`: epoch 2 begins at 9). A
///    consumer reads d: position 10, last fetched epoch 2. A host crash damages c.
/// 2. C (epoch 3) opens: its filler 6..=9 (epoch 3) replaces segment 6's files; C is deposed
///    before "removing the segments after damage" (nothing removed, no checkpoint written).
/// 3. D (epoch 4) opens: 6 holds the filler, which crosses 9: 9 is a stray, removed; the
///    checkpoint's (2, 9) stays, (3, 6) is refused, and `truncate_from_end(10)` keeps (2, 9).
/// 4. The consumer's OffsetsForLeaderEpoch(2) is answered (2, 10): no truncation is detected
///    although d is gone (before the filler, (1, 6)).
#[test]
fn epochs_under_a_deposed_openers_filler_go_with_the_strays() {
    let dir = tempfile::tempdir().unwrap();
    adv51_damaged_before_9(dir.path(), 2, batch("d"));
    let t0 = dir.path().join("t-0");
    let c = broker(dir.path(), 3);
    c.set_write_gate(adv51b_deposed_once_the_filler_is_at_6(&t0));
    assert!(take_over_recorded(&c, 3, 0, 0).is_err(), "C was deposed");
    assert!(
        t0.join("00000000000000000009.log").exists(),
        "C removed nothing"
    );

    let d = broker(dir.path(), 4);
    let log = take_over_recorded(&d, 4, 0, 0).unwrap();
    assert_eq!(log.log_end_offset(), 10, "the filler holds 6..=9");
    assert!(
        !t0.join("00000000000000000009.log").exists(),
        "9 was a stray"
    );
    let entries = log.leader_epoch_entries();
    assert_eq!(
        (log.end_offset_for_epoch(1), log.end_offset_for_epoch(2)),
        (Some((1, 6)), Some((1, 6))),
        "epoch 2 has no offset left (d was removed under C's filler); the epoch cache is \
         {entries:?}, so a consumer that read d is not told its position diverged"
    );
}

/// Found by an adversary on 0a7da8d, since fixed: a producer snapshot at the filler's end survives when the opener that made the
/// filler was deposed before its removals: the fix of
/// `a_retry_of_a_removed_batch_is_appended_not_taken_for_a_duplicate` removes the snapshots
/// past the continuation point only in that opener's open (loader.rs:235); the next open
/// removes segment 9 as a stray under the filler with its own snapshot only
/// (`remove_segment_files(dir, stray, true)`, loader.rs:1118), keeps `10.snapshot` (at its
/// log end) and loads it.
///
/// Interleaving:
/// 1. A (epoch 1): segments 0 (a, b), 6 (c), 9 (d: idempotent producer P, sequence 0); A's
///    answer for d never reaches P; A's host crashes and its snapshots are lost.
/// 2. B (epoch 2) opens, rebuilds the producer state and writes `10.snapshot` (P: sequence 0
///    at 9); deposed before its roll.
/// 3. A host crash damages c. C (epoch 3) opens: its filler 6..=9 replaces segment 6's
///    files; C is deposed before its removals.
/// 4. D (epoch 4) opens: 9 is a stray under the filler, removed; log end 10; `10.snapshot`
///    is kept and loaded. P's retry of d is answered as a duplicate at 9, where the filler
///    is: acknowledged, in no batch of the log.
#[test]
fn a_snapshot_past_a_deposed_openers_filler_goes_with_the_strays() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = dir.path().join("t-0");
    let d_batch = Bytes::from(
        BatchBuilder::new()
            .producer(42, 0, 0)
            .record(NOW, Some(b"k"), Some(b"d-0"))
            .build(),
    );
    let a = broker(dir.path(), 1);
    let first = open(&a, 1);
    first.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
    first.append(batch("b"), AppendOrigin::Client, NOW).unwrap();
    first.roll(NOW).unwrap();
    first.append(batch("c"), AppendOrigin::Client, NOW).unwrap();
    first.roll(NOW).unwrap();
    first
        .append(d_batch.clone(), AppendOrigin::Client, NOW)
        .unwrap();
    first.flush().unwrap();
    a.release_log(&tp()).unwrap();
    for e in std::fs::read_dir(&t0).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "snapshot") {
            std::fs::remove_file(path).unwrap();
        }
    }
    let b = broker(dir.path(), 2);
    let blog = take_over_recorded(&b, 2, 0, 0).unwrap();
    assert_eq!(blog.log_end_offset(), 10);
    drop(blog);
    b.release_log(&tp()).unwrap();
    assert!(t0.join("00000000000000000010.snapshot").exists());
    let seg6 = t0.join("00000000000000000006.log");
    let mut bytes = std::fs::read(&seg6).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&seg6, &bytes).unwrap();

    let c = broker(dir.path(), 3);
    c.set_write_gate(adv51b_deposed_once_the_filler_is_at_6(&t0));
    assert!(take_over_recorded(&c, 3, 0, 0).is_err(), "C was deposed");
    assert!(
        t0.join("00000000000000000009.log").exists(),
        "C removed nothing"
    );

    let d = broker(dir.path(), 4);
    let log = take_over_recorded(&d, 4, 0, 0).unwrap();
    assert_eq!(log.log_end_offset(), 10, "the filler holds 6..=9");
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    let retry = log.append(d_batch, AppendOrigin::Client, NOW).unwrap();
    log.sync_appended().expect("D acknowledges P's retry");
    let got = batches(&log);
    assert!(
        got.iter().any(|(_, tag)| *tag == "d-0"),
        "P's retry of d was acknowledged ({retry:?}) but d is in no batch of the log: \
         {got:?}; D's producer state came from B's snapshot at 10, past C's filler"
    );
}

/// Found by an adversary on 0a7da8d, since fixed: a deposed owner's cleaner switch, stalled in flight at its first rename of step
/// 4 (the group's first old segment's `.log` to `<base>.log.<tag>.deleted`), lands after the
/// next owner's open removed that switch's swap files as "not begun": the segment the next
/// owner kept and serves loses its name, and the open after it removes it as a leftover.
///
/// `swap_in` (cleaner/swap.rs:356-385) asks the write gate (`ctx.owns`) once, under the writer
/// lock, then renames every old segment's files aside (`rename_deleted`, segment.rs:1249,
/// `.log` first) and the swap files in, none of them asked again. The open decides whether a
/// switch had begun from the listing (recover.rs:89-111): `0.log` still there, so A's swap is
/// removed and segment 0 kept; A's rename of `0.log` was issued before and lands after.
///
/// Interleaving:
/// 1. A (epoch 1), compacted topic: k1 at 0 (kept by every cleaning), k2 at 1 and 2, x at 3,
///    segments rolled after each; flushed. A's cleaner makes the swap of the group at 0
///    (`0.log.<tag>.swap`), passes its ownership check and issues the rename of `0.log` to
///    `0.log.<tag>.deleted`, which stalls in flight (NFS RENAME queued while A is cut off).
/// 2. D (epoch 3) acquires after A's deadline plus the lease and opens: `0.log` is listed,
///    so the switch had not begun: A's swap files are removed, segment 0 kept. D serves k1,
///    appends y and acknowledges it.
/// 3. A's rename lands: `0.log` is now `0.log.<tag>.deleted` (D's descriptor still reads it:
///    nothing fails, and a rename leaves `nlink` at 1, so D's link check sees nothing).
/// 4. E (epoch 4) acquires: no `0.log`; `0.log.<tag>.deleted` has no swap to complete and is
///    removed with the other `.deleted` files. k1, acknowledged and never superseded, is gone.
///
/// Now D's open, before it removes A's swap, makes `0.log.<tag>.deleted` a directory: A's
/// late rename of a file onto it fails (`cleaner::recover::block_late_switch`).
#[test]
fn a_deposed_cleaners_late_rename_aside_never_takes_a_segment_the_next_owner_kept() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let old = a
        .open_log(&tp(), uuid::Uuid::from_u128(7), compact_cfg(), 1)
        .unwrap();
    assert_eq!(put_keyed(&old, "k1", "keep-me"), 0);
    assert_eq!(put_keyed(&old, "k2", "old"), 1);
    old.roll(NOW).unwrap();
    assert_eq!(put_keyed(&old, "k2", "new"), 2);
    old.roll(NOW).unwrap();
    assert_eq!(put_keyed(&old, "x", "v"), 3);
    old.roll(NOW).unwrap();
    let rp = old.flush().unwrap();
    // A's switch stops where its first rename of step 4 is issued.
    let _ = a.clean_log_at(&tp(), Some(crate::cleaner::CrashAt::Swapped));
    let t0 = dir.path().join("t-0");
    let a_swap = swap_left_at_0(&t0);
    let name = a_swap.file_name().unwrap().to_string_lossy().to_string();
    let tag = name
        .strip_prefix("00000000000000000000.log.")
        .and_then(|s| s.strip_suffix(".swap"))
        .unwrap()
        .to_string();
    let _ = a.release_log(&tp());

    let d = broker(dir.path(), 3);
    let dlog = d
        .open_log_at(&tp(), uuid::Uuid::from_u128(7), compact_cfg(), 3, rp, 0)
        .unwrap();
    dlog.roll(NOW).unwrap();
    dlog.flush().unwrap();
    let holds_k1 = |log: &Log| {
        let r = log.read(log.log_start_offset(), 1 << 20, true).unwrap();
        r.slice.is_some_and(|s| {
            let bytes = s.read_bytes().unwrap();
            bytes.windows(7).any(|w| w == b"keep-me")
        })
    };
    assert!(holds_k1(&dlog), "precondition: D serves k1");
    assert!(!a_swap.exists(), "D's open removed A's swap (not begun)");
    put_keyed(&dlog, "y", "v");
    dlog.sync_appended()
        .expect("D's fsync and link check pass: y is acknowledged");

    // A's rename, issued before its deadline, lands: the name is a directory now.
    let landed = std::fs::rename(
        t0.join("00000000000000000000.log"),
        t0.join(format!("00000000000000000000.log.{tag}.deleted")),
    );
    assert!(landed.is_err(), "A's late rename moved 0.log aside");
    assert!(
        holds_k1(&dlog),
        "D still reads segment 0 through its descriptor"
    );
    let rp = dlog.recovery_point_offset();
    let newest = dlog.synced_mark().base;
    let _ = d.release_log(&tp());

    let e = broker(dir.path(), 4);
    match e.open_log_at(
        &tp(),
        uuid::Uuid::from_u128(7),
        compact_cfg(),
        4,
        rp,
        newest,
    ) {
        Ok(next) => assert!(
            holds_k1(&next),
            "k1's record (acknowledged, never superseded, served by D) is lost: A's late \
             rename of 0.log aside landed on the segment D kept (log start now {})",
            next.log_start_offset()
        ),
        Err(err) => panic!("the partition can no longer be opened: {err}"),
    }
}

/// Found by an adversary on 0a7da8d, since fixed: as `an_opener_deposed_after_its_removals_leaves_an_openable_partition`, where
/// the removed offsets do not fit one batch of no records: without the filler
/// (loader.rs:1461-1464) an opener deposed right after its removals (no operation in flight)
/// leaves the partition unopenable again.
///
/// Interleaving:
/// 1. A (epoch 1): segments 0 (a, b), 6 (c), 9 (d) and, more than `i32::MAX` offsets past c,
///    the segment the owner record names as the newest with published data. A host crash
///    damages c.
/// 2. C (epoch 2) opens: no filler (the range does not fit), it removes 9 and the recorded
///    segment, and is deposed (its next check refuses): it records nothing.
/// 3. D (epoch 3) acquires with the record: its listing shows 0 and 6 only, below the recorded
///    segment, and no filler vouches for it: refused as a stale view, and so is every later
///    takeover.
#[test]
fn removed_bases_beyond_one_batchs_reach_leave_an_openable_partition() {
    let dir = tempfile::tempdir().unwrap();
    adv_damaged_before_9(dir.path());
    let t0 = dir.path().join("t-0");
    let far = 3_000_000_000i64;
    let mut b = BatchBuilder::new().record(NOW, Some(b"k"), Some(b"far-0"));
    b.base_offset = far;
    b.partition_leader_epoch = 1;
    let far_log = t0.join(format!("{far:020}.log"));
    std::fs::write(&far_log, b.build()).unwrap();

    let c = broker(dir.path(), 2);
    let gone = far_log.clone();
    c.set_write_gate(Arc::new(RefuseWhen(Box::new(move || !gone.exists()))));
    let refused = take_over_recorded(&c, 2, 0, far);
    assert!(refused.is_err(), "C was deposed during its open");
    assert!(
        !far_log.exists(),
        "C removed the recorded segment before it was deposed"
    );

    let d = broker(dir.path(), 3);
    if let Err(e) = take_over_recorded(&d, 3, 0, far) {
        panic!(
            "the partition can no longer be opened: the record names segment {far}, which a \
             deposed opener removed after damage without a filler: {e}"
        );
    }
}

/// One record of producer `pid` (epoch 0) at sequence `seq`.
fn pid_batch(pid: i64, seq: i32) -> Bytes {
    Bytes::from(
        BatchBuilder::new()
            .producer(pid, 0, seq)
            .record(NOW, None, Some(b"v"))
            .build(),
    )
}

/// The set-up of the stalled snapshot writes below: A (epoch 1) holds 0..=2 (durable) and,
/// at 3, producer 42's batch, which never reaches what the next owner reads (not fsynced
/// when A's host failed, or past a lagging NFS view). Returns A's manager and log.
fn a_with_an_unread_producer_batch(dir: &Path) -> (LogManager, Arc<Log>) {
    let a = broker(dir, 1);
    let old = open(&a, 1);
    old.append(batch("a"), AppendOrigin::Client, NOW).unwrap();
    old.flush().unwrap();
    old.append(pid_batch(42, 0), AppendOrigin::Client, NOW)
        .unwrap();
    (a, old)
}

/// Cut A's segment 0 back to its first batch: what the next owner reads of it.
fn cut_to_first_batch(dir: &Path) {
    let seg0 = dir.join("t-0").join("00000000000000000000.log");
    let bytes = std::fs::read(&seg0).unwrap();
    let first = parse_batches(&bytes, None).unwrap()[0].header.total_len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&seg0)
        .unwrap()
        .set_len(first as u64)
        .unwrap();
}

/// B (epoch 2) takes over at 3, appends producer 43's batch at 3 and rolls at 4, where A's
/// snapshot is (its log end): B's `4.snapshot` holds producer 43 at sequence 0.
fn b_rolls_at_4(b: &LogManager, before_roll: impl FnOnce()) -> Arc<Log> {
    let new = open(b, 2);
    assert_eq!(new.log_end_offset(), 3);
    let acked = new
        .append(pid_batch(43, 0), AppendOrigin::Client, NOW)
        .unwrap();
    assert_eq!(acked.base_offset, 3);
    before_roll();
    new.roll(NOW).unwrap();
    new.append(batch("c"), AppendOrigin::Client, NOW).unwrap();
    new
}

/// The next owner after B: producer 42's retry of its batch (never acknowledged: A's
/// confirmation failed) is stored, and producer 43's retry of its batch (acknowledged by B,
/// the answer lost) is a duplicate.
fn c_has_bs_producer_state(dir: &Path, b: &LogManager, blog: Arc<Log>) {
    let rp = blog.flush().unwrap();
    drop(blog);
    b.release_log(&tp()).unwrap();
    let c = broker(dir, 3);
    let log = take_over(&c, 3, rp).unwrap();
    let retry43 = log
        .append(pid_batch(43, 0), AppendOrigin::Client, NOW)
        .unwrap();
    assert!(
        retry43.duplicate && retry43.base_offset == 3,
        "producer 43's retry of what B acknowledged at 3 was appended again: {retry43:?}"
    );
    let retry42 = log
        .append(pid_batch(42, 0), AppendOrigin::Client, NOW)
        .unwrap();
    assert!(
        !retry42.duplicate,
        "producer 42's retry was taken for a duplicate of a batch that is in no log: {retry42:?}"
    );
}

/// `old`'s close (a seal, then `<its log end>.snapshot`) whose snapshot placement stalls in
/// flight after its gate check: its landing, to run later.
fn stalled_close(old: &Log) -> crate::snapshots::Landing {
    crate::snapshots::STALL_NEXT.with(|s| s.set(true));
    old.close_active().unwrap();
    crate::snapshots::STALLED
        .with(|s| s.borrow_mut().pop())
        .expect("the close's snapshot placement was kept")
}

/// A former owner's producer snapshot write that passed its checks and stalled in flight
/// lands after the new owner rolled at the same offset (A's log end, which B reached with
/// batches of its own). It must neither replace nor rewrite B's snapshot there, or the next
/// owner loads A's producer state: a producer's retry of what B acknowledged is appended
/// twice, and another's retry of what only A held is taken for a duplicate and never stored.
#[test]
fn a_former_owners_stalled_snapshot_never_replaces_the_new_owners_at_the_same_base() {
    let dir = tempfile::tempdir().unwrap();
    let (a, old) = a_with_an_unread_producer_batch(dir.path());
    // A's close (a release, or a shutdown) seals and writes `4.snapshot`; the write stalls.
    crate::snapshots::STALL_NEXT.with(|s| s.set(true));
    drop(old);
    a.close_log(&tp()).unwrap();
    let landing = crate::snapshots::STALLED
        .with(|s| s.borrow_mut().pop())
        .unwrap();
    cut_to_first_batch(dir.path());
    let b = broker(dir.path(), 2);
    let blog = b_rolls_at_4(&b, || {});
    // A's rename lands: B's open removed the file it renames (a `.spare`).
    assert_eq!(
        landing().map_err(|e| e.kind()),
        Err(std::io::ErrorKind::NotFound)
    );
    c_has_bs_producer_state(dir.path(), &b, blog);
}

/// As above, A's whole snapshot write comes after B's open (B's listing did not show
/// anything of it), and lands after B's roll at the same offset.
#[test]
fn a_former_owners_snapshot_written_after_the_new_owners_open_never_replaces_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let (a, old) = a_with_an_unread_producer_batch(dir.path());
    cut_to_first_batch(dir.path());
    let b = broker(dir.path(), 2);
    let landing = std::cell::RefCell::new(None);
    let blog = b_rolls_at_4(&b, || {
        *landing.borrow_mut() = Some(stalled_close(&old));
    });
    assert_eq!(
        (landing.into_inner().unwrap())().map_err(|e| e.kind()),
        Err(std::io::ErrorKind::AlreadyExists),
        "A's late rename found the name B's snapshot has free"
    );
    drop(old);
    drop(a);
    c_has_bs_producer_state(dir.path(), &b, blog);
}

/// A former owner's stalled snapshot write that lands before the new owner rolls at its
/// offset: the new owner's roll puts its own in place of it.
#[test]
fn a_new_owners_roll_replaces_a_former_owners_snapshot_at_its_base() {
    let dir = tempfile::tempdir().unwrap();
    let (a, old) = a_with_an_unread_producer_batch(dir.path());
    cut_to_first_batch(dir.path());
    let b = broker(dir.path(), 2);
    let blog = b_rolls_at_4(&b, || {
        stalled_close(&old)().unwrap();
        assert!(dir
            .path()
            .join("t-0/00000000000000000004.snapshot")
            .exists());
    });
    drop(old);
    drop(a);
    c_has_bs_producer_state(dir.path(), &b, blog);
}

/// A former owner's stalled snapshot placement lands where the new owner has none: at an
/// offset the new owner reached without rolling there (A's log end, 4), and the new owner
/// stops there (a crash). The next owner's log end is 4, where A's snapshot is: it is not
/// trusted, as no owner rolled there.
#[test]
fn a_former_owners_late_snapshot_at_the_log_end_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let (a, old) = a_with_an_unread_producer_batch(dir.path());
    cut_to_first_batch(dir.path());
    let b = broker(dir.path(), 2);
    let blog = open(&b, 2);
    blog.roll(NOW).unwrap();
    // A's seal comes after B's open listed the directory, and its rename lands after B's
    // append of producer 43's batch at 3.
    crate::snapshots::STALL_NEXT.with(|s| s.set(true));
    old.close_active().unwrap();
    let landing = crate::snapshots::STALLED
        .with(|s| s.borrow_mut().pop())
        .unwrap();
    let acked = blog
        .append(pid_batch(43, 0), AppendOrigin::Client, NOW)
        .unwrap();
    assert_eq!((acked.base_offset, blog.log_end_offset()), (3, 4));
    landing().unwrap();
    assert!(dir
        .path()
        .join("t-0/00000000000000000004.snapshot")
        .exists());
    drop(old);
    drop(a);
    c_has_bs_producer_state(dir.path(), &b, blog);
}

/// Move `dir`'s files whose name satisfies `pick` into `side` (created): what a stale NFS
/// listing of `dir` does not show. Returns the names moved, for [`restore_hidden`].
fn hide_from_listing(dir: &Path, side: &Path, pick: impl Fn(&str) -> bool) -> Vec<String> {
    std::fs::create_dir_all(side).unwrap();
    let mut moved = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().to_string();
        if pick(&name) {
            std::fs::rename(dir.join(&name), side.join(&name)).unwrap();
            moved.push(name);
        }
    }
    moved
}

/// A write gate letting every write through and keeping the last switch announced.
#[derive(Debug, Default)]
struct Announced(parking_lot::Mutex<Option<crate::CleanerSwitch>>);

impl WriteGate for Announced {
    fn check(&self, _: &TopicPartition, _: uuid::Uuid, _: i32) -> Result<(), String> {
        Ok(())
    }

    fn announce_switch(
        &self,
        _: &TopicPartition,
        _: uuid::Uuid,
        _: i32,
        switch: crate::CleanerSwitch,
    ) -> Result<(), String> {
        *self.0.lock() = Some(switch);
        Ok(())
    }
}

/// The files [`hide_from_listing`] moved, back under their names in `dir`.
fn restore_hidden(dir: &Path, side: &Path, names: &[String]) {
    for name in names {
        std::fs::rename(side.join(name), dir.join(name)).unwrap();
    }
}

/// Found by an adversary on ca4e392, since fixed: a former owner's stalled snapshot placement
/// lands at a segment base where the new owner never placed a snapshot of its own, and the
/// next owner trusts it. Now an open of a shared directory that keeps an empty last segment
/// at the log end places its own snapshot at that base (`owns_empty_base`, loader.rs), so the
/// late rename finds the name taken.
///
/// The shared open trusts a snapshot at a segment base because "its owner rolled there and
/// put it in place" (loader.rs:538-547). But a base made by the FORMER owner's roll, whose
/// segment is empty when the new owner opens, becomes the new owner's active segment with no
/// roll of its own: `roll_locked` returns at once for an empty active segment at the log end
/// (log.rs:1135-1137), so no snapshot of the new owner ever takes that name, and the former
/// owner's late `rename_no_replace` (snapshots.rs `place`) finds it free.
///
/// Interleaving:
/// 1. A (epoch 1) holds 0..=2 (durable) and producer 42's batch at 3, which never reaches
///    storage (not flushed; A's host fails). A rolls at 4: `4.log` is created (a synchronous
///    namespace operation, on storage), and A's snapshot placement of `4.snapshot` (producer
///    42 at sequence 0) passes its gate check and stalls in flight (snapshots.rs `place`).
/// 2. B (epoch 2) acquires and opens. Its listing does not show A's snapshot spare (a stale
///    listing: the premise of
///    `a_former_owners_snapshot_written_after_the_new_owners_open_never_replaces_its_own`),
///    so the spare is not swept. B finds segment 0 ending at 3 and the empty last segment 4:
///    new files at 4, log end 4, no producer 42 (right: its batch is in no log). B's
///    acquisition roll is a no-op (empty active at the log end). B appends producer 43's
///    batch at 4 and acknowledges it.
/// 3. A's rename lands: `4.snapshot` did not exist, so it is placed.
/// 4. C (epoch 3) opens: 4 is a segment base, so A's snapshot is trusted and loaded (loader.rs
///    556): producer 42 is "known" at sequence 0. Producer 42's retry of its batch (never
///    acknowledged by A, never stored anywhere) is answered as a duplicate: acknowledged and
///    never stored.
#[test]
fn a_former_owners_late_snapshot_at_a_base_the_new_owner_kept_empty_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = dir.path().join("t-0");
    let (a, old) = a_with_an_unread_producer_batch(dir.path());
    assert_eq!(old.log_end_offset(), 4);
    // A's roll at 4: the segment is created, the snapshot placement stalls after its gate.
    crate::snapshots::STALL_NEXT.with(|s| s.set(true));
    old.roll(NOW).unwrap();
    let landing = crate::snapshots::STALLED
        .with(|s| s.borrow_mut().pop())
        .expect("A's snapshot placement was captured");
    assert!(t0.join("00000000000000000004.log").exists());
    // A's host fails: producer 42's batch at 3 never reached storage.
    cut_to_first_batch(dir.path());
    // B's listing does not show A's spare (stale).
    let side = dir.path().join("hidden");
    let hidden = hide_from_listing(&t0, &side, |n| {
        n.starts_with("00000000000000000004.snapshot") && n.ends_with(".spare")
    });
    assert_eq!(hidden.len(), 1, "A's snapshot spare: {hidden:?}");
    let b = broker(dir.path(), 2);
    let blog = open(&b, 2);
    assert_eq!(blog.log_end_offset(), 4);
    blog.roll(NOW).unwrap();
    let acked = blog
        .append(pid_batch(43, 0), AppendOrigin::Client, NOW)
        .unwrap();
    assert_eq!(acked.base_offset, 4);
    blog.sync_appended()
        .expect("B acknowledges producer 43's batch");
    restore_hidden(&t0, &side, &hidden);
    // A's rename lands.
    let landed = landing().map_err(|e| e.kind());
    let rp = blog.flush().unwrap();
    drop(blog);
    b.release_log(&tp()).unwrap();
    drop(old);
    drop(a);

    let c = broker(dir.path(), 3);
    let log = take_over(&c, 3, rp).unwrap();
    let retry42 = log
        .append(pid_batch(42, 0), AppendOrigin::Client, NOW)
        .unwrap();
    assert!(
        !retry42.duplicate,
        "producer 42's retry was taken for a duplicate of a batch that is in no log \
         ({retry42:?}): C loaded A's 4.snapshot (A's late rename: {landed:?}), trusted as \
         at a segment base, though no owner of this log rolled there"
    );
}

/// Found by an adversary on ca4e392, since fixed: the blocker directory is made only for a swap the open's own listing
/// shows, and that listing (`complete_swaps`, recover.rs:61) is a separate `read_dir` that no
/// currency check covers (`check_listing_is_current`, loader.rs:95 and 1189, checks the
/// loader's later listing, and only against the recorded segment base, which a cleaning after
/// the owner's last roll does not move). An open whose listing does not show the former
/// owner's swap makes no blocker and leaves the swap in place; that owner's first rename
/// aside, stalled in flight, then takes the segment the new owner kept, and the next open
/// finds the switch "begun" and completes a swap made from segments the new owner has
/// deleted since: records removed by an acknowledged DeleteRecords come back below the log
/// start (the hazard docs/compaction.md names for a stale swap).
///
/// Interleaving:
/// 1. A (epoch 1), compacted: k1 at 0, k2 at 1 and 2, x at 3, rolled after each (its last
///    roll, and the segment it records, come before the cleaning). A's cleaner makes
///    `0.log.<tag>.swap` (and its index swaps), passes its gate check and issues the rename of
///    `0.log` to `0.log.<tag>.deleted`, which stalls in flight.
/// 2. D (epoch 3) opens from an NFS-cached listing taken before A's swap files appeared (still
///    current by the record: it shows every segment). No swap listed: no blocker, and the
///    swap files stay. D rolls and serves.
/// 3. A's rename lands: `0.log` is now `0.log.<tag>.deleted`, a file (no directory there).
/// 4. D answers DeleteRecords(3): log start 3, segments 0, 1 and 2 deleted (segment 0's name
///    is already gone).
/// 5. E (epoch 4) opens: no `0.log`, `0.log.<tag>.deleted` under the swap's tag: the switch
///    "had begun", and A's cleaned segment is renamed to `0.log`: k1 and k2 (offsets 0..=2,
///    deleted by D's acknowledged DeleteRecords) are served again, log start 0.
///
/// Now a switch is announced before its swap files exist (`WriteGate::announce_switch`: in a
/// cluster, recorded in the owner record), and the next owner's open looks the announced
/// switch's swap up by name: one its listing misses makes the open refused as a stale view,
/// and the open tried again, its listing current, blocks the switch.
#[test]
fn an_open_whose_listing_misses_the_swap_still_blocks_the_announced_switch() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    // What A's gate records of its switch (in a cluster: the owner record).
    let announced = Arc::new(Announced::default());
    a.set_write_gate(announced.clone());
    let old = a
        .open_log(&tp(), uuid::Uuid::from_u128(7), compact_cfg(), 1)
        .unwrap();
    assert_eq!(put_keyed(&old, "k1", "keep-me"), 0);
    assert_eq!(put_keyed(&old, "k2", "old"), 1);
    old.roll(NOW).unwrap();
    assert_eq!(put_keyed(&old, "k2", "new"), 2);
    old.roll(NOW).unwrap();
    assert_eq!(put_keyed(&old, "x", "v"), 3);
    old.roll(NOW).unwrap();
    let rp = old.flush().unwrap();
    let _ = a.clean_log_at(&tp(), Some(crate::cleaner::CrashAt::Swapped));
    let t0 = dir.path().join("t-0");
    let a_swap = swap_left_at_0(&t0);
    let name = a_swap.file_name().unwrap().to_string_lossy().to_string();
    let tag = name
        .strip_prefix("00000000000000000000.log.")
        .and_then(|s| s.strip_suffix(".swap"))
        .unwrap()
        .to_string();
    let switch = announced.0.lock().expect("A announced its switch");
    assert_eq!(crate::cleaner::swap::switch_tag(switch), tag);
    let _ = a.release_log(&tp());

    // D's listing predates A's swap files (a cached listing); a lookup by name finds them.
    crate::fsutil::LISTING_HIDES.with(|h| {
        *h.borrow_mut() = Some(Box::new(|n: &str| n.ends_with(".swap")));
    });
    let d = broker(dir.path(), 3);
    let recorded = Recorded {
        recovery_point: rp,
        newest_segment: 0,
        sealed: None,
        switch: Some(switch),
        snapshot: None,
    };
    let stale = d.open_log_recorded(&tp(), uuid::Uuid::from_u128(7), compact_cfg(), 3, recorded);
    crate::fsutil::LISTING_HIDES.with(|h| *h.borrow_mut() = None);
    assert!(
        stale.is_err(),
        "an open whose listing misses the announced switch's swap is refused"
    );
    // Tried again, its listing current: the swap had not begun, it is blocked and removed.
    let dlog = d
        .open_log_recorded(&tp(), uuid::Uuid::from_u128(7), compact_cfg(), 3, recorded)
        .unwrap();
    dlog.roll(NOW).unwrap();
    dlog.flush().unwrap();
    // A's rename, issued before its deadline, lands on the blocker D made.
    let landed = std::fs::rename(
        t0.join("00000000000000000000.log"),
        t0.join(format!("00000000000000000000.log.{tag}.deleted")),
    );
    assert!(landed.is_err(), "A's late rename moved 0.log aside");
    let deleted = dlog.delete_records_before(3);
    assert_eq!(dlog.log_start_offset(), 3, "D's DeleteRecords: {deleted:?}");
    put_keyed(&dlog, "y", "v");
    dlog.sync_appended().unwrap();
    let rp = dlog.recovery_point_offset();
    let newest = dlog.synced_mark().base;
    let _ = d.release_log(&tp());

    let e = broker(dir.path(), 4);
    let next = e
        .open_log_at(
            &tp(),
            uuid::Uuid::from_u128(7),
            compact_cfg(),
            4,
            rp,
            newest,
        )
        .unwrap();
    let r = next.read(next.log_start_offset(), 1 << 20, true).unwrap();
    let served_k1 = r.slice.is_some_and(|s| {
        let bytes = s.read_bytes().unwrap();
        bytes.windows(7).any(|w| w == b"keep-me")
    });
    assert!(
        next.log_start_offset() >= 3 && !served_k1,
        "records D deleted (DeleteRecords to 3, acknowledged) are back: log start {}, k1 \
         served: {served_k1}; A's late rename aside landed ({landed:?}) as D's open made no \
         blocker for a swap its listing did not show, and E completed that swap",
        next.log_start_offset()
    );
}

/// Found by an adversary on ae4b207, since fixed (`snapshot_bound`: a gap between segments
/// past the recovery point bounds the snapshots an open loads): a former owner's roll
/// snapshot was trusted at a segment base while
/// the data it describes below that base never reached storage, because the segment at that
/// base is NOT empty. `snapshot_bound` (loader.rs:934) and `owns_empty_base` (loader.rs:789)
/// only consider an EMPTY last segment; the `at_base` filter (loader.rs:571) trusts any
/// snapshot at a base. A roll does not fsync the sealed segment (log.rs:1129-1172: seal, create,
/// write_producer_snapshot), and writeback of two files is unordered (NFS: the snapshot's
/// bytes reach the server at its close, log.rs `snapshots::write` drops the file before the
/// rename; the new segment's pages by background writeback).
///
/// Interleaving:
/// 1. A (epoch 1) holds 0..=2 (flushed) and producer 42's batch at 3 (not flushed, never
///    acknowledged: A's confirmation never ran).
/// 2. A rolls at 4: `4.log` created, `4.snapshot` placed (producer 42 at sequence 0; its
///    bytes reach the server at close). A appends a batch at 4 into `4.log`.
/// 3. A's host fails: writeback had sent `4.log`'s page, not segment 0's tail (batch 3).
/// 4. B (epoch 2) takes over: segment 0 ends at 3, segment 4 holds a batch (not empty, so
///    no `snapshot_bound` cut and no `owns_empty_base`); `4.snapshot` is at a base: loaded.
/// 5. Producer 42 retries its unacknowledged batch at B: taken for a duplicate, answered
///    success, and stored nowhere (acks=all data loss).
#[test]
fn a_roll_snapshot_over_a_lost_tail_is_not_trusted_when_the_next_segment_holds_data() {
    let dir = tempfile::tempdir().unwrap();
    let (a, old) = a_with_an_unread_producer_batch(dir.path());
    assert_eq!(old.log_end_offset(), 4);
    old.roll(NOW).unwrap();
    assert!(dir
        .path()
        .join("t-0/00000000000000000004.snapshot")
        .exists());
    let at4 = old.append(batch("x"), AppendOrigin::Client, NOW).unwrap();
    assert_eq!(at4.base_offset, 4);
    // A's host fails: segment 0's tail (producer 42's batch at 3) never reached storage;
    // `4.log`'s page and `4.snapshot` did.
    cut_to_first_batch(dir.path());
    drop(old);
    drop(a);

    let b = broker(dir.path(), 2);
    let blog = take_over(&b, 2, 3).unwrap();
    let retry42 = blog
        .append(pid_batch(42, 0), AppendOrigin::Client, NOW)
        .unwrap();
    assert!(
        !retry42.duplicate,
        "producer 42's retry was taken for a duplicate of a batch that is in no log \
         ({retry42:?}): B loaded A's 4.snapshot (at a segment base) although segment 0 ends \
         at 3 and producer 42's batch at 3 is gone"
    );
}

/// Found by an adversary on ae4b207, since fixed (an announced switch with no swap file,
/// looked up by name, completed or never began: nothing to refuse or block): a completed
/// switch wedged the partition: every open is refused
/// as "a stale view", with a CURRENT listing. recover.rs:118-128 takes "the announced
/// switch's first segment is aside, and neither its swap nor `<base>.log` is listed" for a
/// stale listing. But that is also what a current directory holds once the switch completed
/// and the cleaned segment at `base` was deleted since (retention, DeleteRecords), while the
/// old segment's aside file is still there (its deferred deletion waits for its last reader,
/// or the owner crashed before it ran: the loader removes `.deleted` files only after
/// `complete_swaps`, loader.rs:64-80). The owner record keeps the switch through
/// acquisitions (meta cluster.rs `Owner::switch`), so every later open fails the same way.
///
/// Interleaving:
/// 1. A (epoch 1) announces switch S at base 0 and completes it: the cleaned segment is
///    `0.log`, the old one `0.log.<S>.deleted`, whose unlink waits for a reader (a fetch).
/// 2. A answers DeleteRecords past the cleaned segment: `0.log` is deleted.
/// 3. A's host fails before the deferred deletion unlinks `0.log.<S>.deleted`.
/// 4. D (epoch 3) acquires; the record still names S. D's open: announced S, no swap of S,
///    its aside listed, no `0.log`: "a stale view; opening again". And again, forever.
#[test]
fn a_completed_switch_whose_segment_was_deleted_since_wedges_no_open() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = dir.path().join("t-0");
    let a = broker(dir.path(), 1);
    let announced = Arc::new(Announced::default());
    a.set_write_gate(announced.clone());
    let old = a
        .open_log(&tp(), uuid::Uuid::from_u128(7), compact_cfg(), 1)
        .unwrap();
    assert_eq!(put_keyed(&old, "k1", "v"), 0);
    assert_eq!(put_keyed(&old, "k2", "old"), 1);
    old.roll(NOW).unwrap();
    assert_eq!(put_keyed(&old, "k2", "new"), 2);
    old.roll(NOW).unwrap();
    assert_eq!(put_keyed(&old, "x", "v"), 3);
    old.roll(NOW).unwrap();
    assert_eq!(put_keyed(&old, "y", "v"), 4);
    old.roll(NOW).unwrap();
    old.flush().unwrap();
    // A fetch holds the old segment 0: its deferred deletion waits.
    let reader = old.read(0, 1 << 20, true).unwrap();
    let stats = a.clean_log_at(&tp(), None).unwrap();
    assert!(stats.is_some(), "A cleaned");
    let switch = announced.0.lock().expect("A announced its switch");
    assert_eq!(switch.base, 0);
    let tag = crate::cleaner::swap::switch_tag(switch);
    let aside = t0.join(format!("00000000000000000000.log.{tag}.deleted"));
    assert!(
        aside.is_file(),
        "the old segment 0 waits for its reader: {aside:?}"
    );
    // DeleteRecords past the cleaned segment at 0.
    let deleted = old.delete_records_before(5);
    assert_eq!(old.log_start_offset(), 5, "A's DeleteRecords: {deleted:?}");
    old.flush().unwrap();
    let rp = old.recovery_point_offset();
    let newest = old.synced_mark().base;
    let names: Vec<_> = std::fs::read_dir(&t0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(
        !t0.join("00000000000000000000.log").exists(),
        "segment 0 deleted: {names:?} {:?}",
        old.shared
            .read()
            .segments
            .iter()
            .map(|s| s.base_offset)
            .collect::<Vec<_>>()
    );
    // A's host fails: nothing more of A runs (its deferred deletion never unlinks the aside).
    std::mem::forget(reader);
    std::mem::forget(old);
    std::mem::forget(a);
    assert!(aside.is_file());

    let d = broker(dir.path(), 3);
    let recorded = Recorded {
        recovery_point: rp,
        newest_segment: newest,
        sealed: None,
        switch: Some(switch),
        snapshot: None,
    };
    let mut last = None;
    for _ in 0..3 {
        match d.open_log_recorded(&tp(), uuid::Uuid::from_u128(7), compact_cfg(), 3, recorded) {
            Ok(_) => return,
            Err(e) => last = Some(e.to_string()),
        }
    }
    panic!(
        "the partition is wedged: every open of a current directory fails: {}",
        last.unwrap()
    );
}

/// Found by an adversary on ae4b207, since fixed (blockers are never removed, and made only
/// for a swap that exists): the open's removal of "blockers below the first segment"
/// (loader.rs:101-109) trusts its own listing's first segment, and that listing is a
/// separate `read_dir` from `complete_swaps`' (recover.rs:74), after `complete_swaps` renamed
/// the cleaned segment into place. An NFS client's cached listing taken before that rename
/// (a consistent snapshot of the directory mid-switch) shows no `0.log`: the blocker of an
/// older switch at 0, still possibly in flight, is removed, and that switch's late rename
/// aside then takes the segment every owner kept. Without the removal the late rename lands
/// on the blocker and the stale view costs nothing (the next open lists `0.log` again).
///
/// Interleaving:
/// 1. A (epoch 1) announces S1 at base 0, makes its swap, and its rename of `0.log` to
///    `0.log.<S1>.deleted` passes the gate and stalls in flight.
/// 2. B (epoch 2) opens with the record naming S1: blocker `0.log.<S1>.deleted/` made, S1's
///    swap removed. B appends, rolls, announces S2 at base 0 and switches: `0.log` aside under
///    S2, indexes in, `0.log.<S2>.swap` not yet renamed in (B deposed / crashes).
/// 3. C (epoch 3) opens (record names S2). `complete_swaps` lists the directory mid-switch
///    (current: S2's `.log.swap` and aside, no `0.log`) and completes S2: `0.log` is the
///    cleaned segment. The loader's listing is the client's cached snapshot of that same
///    moment (before C's own rename): no `0.log`, first segment above 0, so the blocker of S1
///    at 0 is removed (emulated: `0.log` is kept out of that listing by a thread that moves
///    it aside as soon as C renames it in, and puts it back after the open).
/// 4. A's rename lands: nothing at `0.log.<S1>.deleted` any more, so `0.log` (the cleaned
///    segment, offsets 0.., kept and served by C) is moved aside; the next open removes it as
///    a `.deleted` leftover: those records are lost for good.
#[test]
fn a_stale_loader_listing_never_removes_a_blocker() {
    // The emulation races a thread against the open (step 3): tried a few times.
    for _ in 0..20 {
        if let Some(broken) = stale_loader_listing_round() {
            panic!("{broken}");
        }
    }
}

/// One try of [`a_stale_loader_listing_never_removes_a_blocker`]:
/// what broke, if the loader's listing missed `0.log`.
fn stale_loader_listing_round() -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let t0 = dir.path().join("t-0");
    let a = broker(dir.path(), 1);
    let a_gate = Arc::new(Announced::default());
    a.set_write_gate(a_gate.clone());
    let old = a
        .open_log(&tp(), uuid::Uuid::from_u128(7), compact_cfg(), 1)
        .unwrap();
    assert_eq!(put_keyed(&old, "k1", "keep-me"), 0);
    assert_eq!(put_keyed(&old, "k2", "old"), 1);
    old.roll(NOW).unwrap();
    assert_eq!(put_keyed(&old, "k2", "new"), 2);
    old.roll(NOW).unwrap();
    assert_eq!(put_keyed(&old, "x", "v"), 3);
    old.roll(NOW).unwrap();
    let rp = old.flush().unwrap();
    // A's switch S1: swap made; its first rename aside is in flight (lands in step 4).
    let _ = a.clean_log_at(&tp(), Some(crate::cleaner::CrashAt::Swapped));
    let s1 = a_gate.0.lock().expect("A announced S1");
    let s1_tag = crate::cleaner::swap::switch_tag(s1);
    let _ = a.release_log(&tp());

    // B opens with the record naming S1: S1 is blocked.
    let b = broker(dir.path(), 2);
    let b_gate = Arc::new(Announced::default());
    b.set_write_gate(b_gate.clone());
    let recorded = Recorded {
        recovery_point: rp,
        newest_segment: 0,
        sealed: None,
        switch: Some(s1),
        snapshot: None,
    };
    let blog = b
        .open_log_recorded(&tp(), uuid::Uuid::from_u128(7), compact_cfg(), 2, recorded)
        .unwrap();
    let s1_blocker = t0.join(format!("00000000000000000000.log.{s1_tag}.deleted"));
    assert!(s1_blocker.is_dir(), "B blocked S1");
    blog.roll(NOW).unwrap();
    put_keyed(&blog, "x", "w");
    blog.roll(NOW).unwrap();
    put_keyed(&blog, "y", "v");
    blog.roll(NOW).unwrap();
    let rp = blog.flush().unwrap();
    let newest = blog.synced_mark().base;
    // B's switch S2 at 0 stops with its indexes in, its `.log` still `.swap`.
    let _ = b.clean_log_at(&tp(), Some(crate::cleaner::CrashAt::IndexesIn));
    let s2 = b_gate.0.lock().expect("B announced S2");
    assert_eq!(s2.base, 0);
    assert!(
        !t0.join("00000000000000000000.log").exists(),
        "S2 mid-switch"
    );
    drop(blog);
    let _ = b.release_log(&tp());

    // C's loader listing is the cached one of the mid-switch moment: `0.log`, which C's
    // `complete_swaps` renames in, is not in it.
    let side = dir.path().join("hidden");
    std::fs::create_dir_all(&side).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let spinner = {
        let (t0, side, stop) = (t0.clone(), side.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if std::fs::rename(
                    t0.join("00000000000000000000.log"),
                    side.join("00000000000000000000.log"),
                )
                .is_ok()
                {
                    return true;
                }
            }
            false
        })
    };
    let c = broker(dir.path(), 3);
    let recorded = Recorded {
        recovery_point: rp,
        newest_segment: newest,
        sealed: None,
        switch: Some(s2),
        snapshot: None,
    };
    let opened = c.open_log_recorded(&tp(), uuid::Uuid::from_u128(7), compact_cfg(), 3, recorded);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let hid = spinner.join().unwrap();
    if !hid {
        // The thread never ran during the open: this round emulated nothing.
        return None;
    }
    std::fs::rename(
        side.join("00000000000000000000.log"),
        t0.join("00000000000000000000.log"),
    )
    .unwrap();
    // An open that met the file moved under it was refused: nothing served, nothing removed.
    let Ok(clog) = opened else { return None };
    let c_segments: Vec<i64> = clog
        .shared
        .read()
        .segments
        .iter()
        .map(|s| s.base_offset)
        .collect();
    // The listing had S1's blocker; the loader raced the spinner only if the blocker stayed.
    // A's rename, in flight since step 1, lands.
    let landed = std::fs::rename(
        t0.join("00000000000000000000.log"),
        t0.join(format!("00000000000000000000.log.{s1_tag}.deleted")),
    );
    drop(clog);
    landed.is_ok().then(|| {
        format!(
            "A's late rename aside of S1 moved the cleaned segment 0 (kept by C) aside: C's open \
             (segments {c_segments:?}) removed S1's blocker as 'below the first segment' of a \
             listing that did not show 0.log (blocker still there: {})",
            s1_blocker.is_dir()
        )
    })
}

/// Issue 56, a takeover: the previous owner's recovery point followed its log end inside the
/// active segment (a producer snapshot there, then a full flush), and its record names that
/// snapshot with its CRC. The next owner validates only what lies past the recovery point
/// (damage below it, under a batch's CRC, is not read) and keeps the snapshot it was vouched
/// (not at a segment base): a retry of the producer's last batch is recognised.
fn owner_with_a_followed_recovery_point(
    dir: &Path,
) -> (LogManager, Arc<Log>, i64, crate::SnapshotRef) {
    let a = broker(dir, 1);
    let old = open(&a, 1);
    for seq in 0..3 {
        old.append(pbatch(seq), AppendOrigin::Client, NOW).unwrap();
    }
    for i in 0..100 {
        old.append(batch(&format!("f{i}")), AppendOrigin::Client, NOW)
            .unwrap();
    }
    assert!(old
        .advance_recovery_point_impl(crate::fsutil::now_ms(), 1, 0)
        .unwrap());
    let rp = old.recovery_point_offset();
    assert_eq!(rp, old.log_end_offset());
    assert_eq!(old.segment_count(), 1, "inside the active segment");
    let vouched = old
        .vouched_snapshot(rp)
        .expect("a durable snapshot at the recovery point");
    assert_eq!(vouched.offset, rp);
    for i in 0..5 {
        old.append(batch(&format!("past{i}")), AppendOrigin::Client, NOW)
            .unwrap();
    }
    old.sync_appended().unwrap();
    (a, old, rp, vouched)
}

fn take_over_vouched(
    m: &LogManager,
    epoch: i32,
    rp: i64,
    snapshot: crate::SnapshotRef,
) -> Result<Arc<Log>, StoreError> {
    m.open_log_recorded(
        &tp(),
        uuid::Uuid::from_u128(7),
        cfg(),
        epoch,
        Recorded {
            recovery_point: rp,
            newest_segment: 0,
            sealed: None,
            switch: None,
            snapshot: Some(snapshot),
        },
    )
}

#[test]
fn a_takeover_resumes_at_the_recorded_point_and_trusts_the_vouched_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let pdir = dir.path().join("t-0");
    let (_a, old, rp, vouched) = owner_with_a_followed_recovery_point(dir.path());
    let leo = old.log_end_offset();
    // Damage under the CRC of the first batch, below the recovery point.
    let seg = pdir.join(format!("{:020}.log", 0));
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[sluice_format::HEADER_LEN + 5] ^= 0xff;
    std::fs::write(&seg, &bytes).unwrap();

    let b = broker(dir.path(), 2);
    let log = take_over_vouched(&b, 2, rp, vouched).unwrap();
    assert_eq!(log.log_end_offset(), leo, "nothing below {rp} validated");
    assert!(log.recovered_bytes < bytes.len() as u64 / 4);
    assert!(
        pdir.join(format!("{rp:020}.snapshot")).exists(),
        "the vouched snapshot is kept, though not at a segment base"
    );
    let retry = log.append(pbatch(2), AppendOrigin::Client, NOW).unwrap();
    assert!(retry.duplicate, "{retry:?}");
    assert_eq!(retry.base_offset, 2);
    let next = log.append(pbatch(3), AppendOrigin::Client, NOW).unwrap();
    assert!(!next.duplicate);
}

/// A file at the vouched offset that is not the one the owner vouched for (a former owner's
/// placement landing late: another CRC) is not trusted: it is removed, and producer state
/// comes from a snapshot at a segment base and the batches after it.
#[test]
fn a_file_at_the_vouched_offset_with_another_crc_is_not_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let pdir = dir.path().join("t-0");
    let (_a, old, rp, vouched) = owner_with_a_followed_recovery_point(dir.path());
    let leo = old.log_end_offset();
    let path = pdir.join(format!("{rp:020}.snapshot"));
    let mut entries =
        sluice_format::snapshot::decode_snapshot(&std::fs::read(&path).unwrap()).unwrap();
    let e = entries.iter_mut().find(|e| e.producer_id == 42).unwrap();
    e.last_sequence = 10;
    std::fs::write(&path, sluice_format::snapshot::encode_snapshot(&entries)).unwrap();

    let b = broker(dir.path(), 2);
    let log = take_over_vouched(&b, 2, rp, vouched).unwrap();
    assert_eq!(log.log_end_offset(), leo);
    assert!(
        !path.exists(),
        "removed: not the file the owner vouched for"
    );
    let retry = log.append(pbatch(2), AppendOrigin::Client, NOW).unwrap();
    assert!(retry.duplicate, "{retry:?}");
    let next = log.append(pbatch(3), AppendOrigin::Client, NOW).unwrap();
    assert!(!next.duplicate);
    assert_eq!(next.base_offset, leo);
}

/// Found by an adversary on 8966a29, since fixed (the resumed segment's epochs below the
/// resume position are read from its first and last batches, as a trusted sealed segment's):
/// a takeover that resumes inside the segment holding the recorded
/// recovery point never reads that segment's first batch, so the epoch that began there comes
/// from `leader-epoch-checkpoint` alone. A former owner's stalled checkpoint rewrite (its
/// older view, fencing point 3) landing after the owner recorded its recovery point takes
/// that epoch out of the file; `epochs_past_checkpoint` reads only the trusted sealed
/// segments (loader.rs:158-161), never the resumed one (loader.rs:187-205), so the new owner
/// starts the epoch at the first batch after the resume position. A full validation starts it
/// at the segment's base.
#[test]
fn a_former_owners_late_epoch_checkpoint_never_moves_the_resumed_segments_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let a = broker(dir.path(), 1);
    let old = open(&a, 1);
    old.append(batch("a"), AppendOrigin::Client, NOW).unwrap(); // 0..2
    old.flush().unwrap();
    let checkpoint = dir.path().join("t-0").join("leader-epoch-checkpoint");
    let stale = std::fs::read(&checkpoint).unwrap();

    // B takes over (epoch 2) at 3, rolls there (its acquisition), appends, and its recovery
    // point follows its log end inside that segment.
    let b = broker(dir.path(), 2);
    let owner = take_over(&b, 2, 3).unwrap();
    owner.roll(NOW).unwrap();
    for i in 0..100 {
        owner
            .append(batch(&format!("b{i}")), AppendOrigin::Client, NOW)
            .unwrap();
    }
    assert!(owner
        .advance_recovery_point_impl(crate::fsutil::now_ms(), 1, 0)
        .unwrap());
    let rp = owner.recovery_point_offset();
    assert_eq!(rp, owner.log_end_offset());
    assert_eq!(owner.end_offset_for_epoch(1), Some((1, 3)));
    let vouched = owner.vouched_snapshot(rp).unwrap();
    // B crashes; the former owner's stalled rewrite lands now.
    std::fs::write(&checkpoint, &stale).unwrap();

    let c = broker(dir.path(), 3);
    let next = take_over_vouched(&c, 3, rp, vouched).unwrap();
    assert_eq!(next.log_end_offset(), rp);
    assert_eq!(
        next.end_offset_for_epoch(1),
        Some((1, 3)),
        "epoch 1 ends where epoch 2 began (a full validation says 3): {:?}",
        next.leader_epoch_entries()
    );
}

/// The writes for `adversary_a_vouched_snapshot_forgets_retries_a_full_validation_recognises`:
/// producer 42's batches 0..=2, then 8 MiB of other batches in the same segment, then the
/// recovery point follows the log end (a snapshot there), and the owner crashes.
fn adv56b_owner_with_old_producer_batches(
    dir: &Path,
) -> (LogManager, Arc<Log>, i64, crate::SnapshotRef, LogConfig) {
    let mut big = cfg();
    big.segment_bytes = 64 << 20;
    big.max_message_bytes = 2 << 20;
    let a = broker(dir, 1);
    let old = a
        .open_log(&tp(), uuid::Uuid::from_u128(7), big.clone(), 1)
        .unwrap();
    for seq in 0..3 {
        old.append(pbatch(seq), AppendOrigin::Client, NOW).unwrap();
    }
    let value = vec![b'x'; 1 << 20];
    for _ in 0..8 {
        let b = BatchBuilder::new().record(NOW, None, Some(&value)).build();
        old.append(Bytes::from(b), AppendOrigin::Client, NOW)
            .unwrap();
    }
    assert!(old
        .advance_recovery_point_impl(crate::fsutil::now_ms(), 1, 0)
        .unwrap());
    let rp = old.recovery_point_offset();
    assert_eq!(old.segment_count(), 1);
    let vouched = old.vouched_snapshot(rp).unwrap();
    (a, old, rp, vouched, big)
}

/// Found by an adversary on 8966a29, since fixed (the history replay reaches back to the
/// snapshot before the one loaded, here the segment base's): the vouched snapshot (not at a
/// segment base) lets a takeover replay
/// producer history from only `HISTORY_BYTES` (4 MiB) before it (loader.rs:657-659,
/// `history_start`), where the full validation from the snapshot at a segment base it
/// replaces replays every batch of the segment. Producer 42's batches 0..=2 lie more than
/// 4 MiB before the vouched offset: after a full validation a retry of batch 1 is a duplicate;
/// after the vouched one it is refused as out of order (the Java client's idempotent producer
/// takes OUT_OF_ORDER_SEQUENCE_NUMBER as fatal), so a retry is not recognised.
#[test]
fn a_vouched_snapshot_keeps_the_retries_appended_since_the_snapshot_before_it() {
    // A full validation (no snapshot vouched): the retry is recognised.
    let dir = tempfile::tempdir().unwrap();
    let (_a, _old, rp, _vouched, big) = adv56b_owner_with_old_producer_batches(dir.path());
    let b = broker(dir.path(), 2);
    let recorded = |snapshot| Recorded {
        recovery_point: rp,
        newest_segment: 0,
        sealed: None,
        switch: None,
        snapshot,
    };
    let full = b
        .open_log_recorded(
            &tp(),
            uuid::Uuid::from_u128(7),
            big.clone(),
            2,
            recorded(None),
        )
        .unwrap();
    let retry = full.append(pbatch(1), AppendOrigin::Client, NOW);
    assert!(
        retry
            .as_ref()
            .is_ok_and(|r| r.duplicate && r.base_offset == 1),
        "{retry:?}"
    );

    // The same directory, the owner's snapshot vouched for.
    let dir = tempfile::tempdir().unwrap();
    let (_a, _old, rp, vouched, big) = adv56b_owner_with_old_producer_batches(dir.path());
    let b = broker(dir.path(), 2);
    let log = b
        .open_log_recorded(
            &tp(),
            uuid::Uuid::from_u128(7),
            big,
            2,
            Recorded {
                recovery_point: rp,
                newest_segment: 0,
                sealed: None,
                switch: None,
                snapshot: Some(vouched),
            },
        )
        .unwrap();
    let retry = log.append(pbatch(1), AppendOrigin::Client, NOW);
    assert!(
        retry
            .as_ref()
            .is_ok_and(|r| r.duplicate && r.base_offset == 1),
        "a retry a full validation recognises: {retry:?}"
    );
}

/// A broker opens a partition where another broker moved it since, not in the log dir it
/// placed it in before (the copy there is gone), and finds what was appended after the move.
#[test]
fn a_takeover_opens_the_copy_another_broker_moved_since() {
    let roots = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let dirs: Vec<_> = roots.iter().map(|d| d.path().to_path_buf()).collect();
    let mk = |node_id| broker_of(&[dirs[0].as_path(), dirs[1].as_path()], node_id);
    let append = |log: &Log, n: i64| {
        for i in 0..n {
            let b = Bytes::from(
                BatchBuilder::new()
                    .record(NOW + i, None, Some(b"v"))
                    .build(),
            );
            log.append(b, AppendOrigin::Client, NOW).unwrap();
        }
        log.flush().unwrap();
    };
    let a = mk(1);
    let log = open(&a, 1);
    append(&log, 3);
    let first = log.dir();
    drop(log);
    a.release_log(&tp()).unwrap();

    let b = mk(2);
    let log = take_over(&b, 2, 0).unwrap();
    assert_eq!(log.dir(), first);
    let target = usize::from(first.parent() == Some(dirs[0].as_path()));
    b.move_log(&tp(), target).unwrap();
    append(&log, 2);
    let moved = log.dir();
    assert_ne!(moved, first);
    drop(log);
    b.release_log(&tp()).unwrap();

    let log = take_over(&a, 3, 0).unwrap();
    assert_eq!(log.dir(), moved);
    assert_eq!(log.log_end_offset(), 5);
}

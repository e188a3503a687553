//! The cleaner against real logs: what stays, offsets, tombstones, producer state, restarts,
//! readers holding replaced segments, a crash at each step of a swap, and a property test
//! against an in-memory model.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;
use sluice_format::{parse_batches, BatchBuilder};

use super::filter::{decode, delete_horizon};
use super::CrashAt;
use crate::tests::cfg;
use crate::{AppendOrigin, Cleanup, Log, LogConfig, LogManager, MetaProperties, TopicPartition};

const NOW: i64 = crate::tests::NOW;

fn tp() -> TopicPartition {
    TopicPartition {
        topic: "compacted".into(),
        partition: 0,
    }
}

fn compact_cfg(delete_retention_ms: i64) -> LogConfig {
    LogConfig {
        segment_bytes: 2000,
        index_interval_bytes: 200,
        cleanup: Cleanup {
            compact: true,
            delete: false,
            min_cleanable_dirty_ratio: 0.01,
            delete_retention_ms,
            ..Cleanup::default()
        },
        ..cfg()
    }
}

/// Reads held at the start of every segment on disk, as fetches in flight hold them: the
/// reaper thread unlinks a replaced segment's aside file (`<base>.log.<tag>.deleted`) only
/// once nothing reads it, so a test that looks at those files holds these across the
/// cleaning, or the reaper may have removed them first.
fn hold_segments(log: &Log) -> Vec<crate::FileSlice> {
    let mut bases: Vec<i64> = std::fs::read_dir(log.dir())
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().to_string();
            n.strip_suffix(".log").and_then(|s| s.parse::<i64>().ok())
        })
        .collect();
    bases.sort();
    bases
        .into_iter()
        .filter_map(|b| log.read(b, 1 << 20, true).unwrap().slice)
        .collect()
}

fn open_mgr(dir: &Path) -> LogManager {
    LogManager::open(
        vec![dir.to_path_buf()],
        MetaProperties {
            node_id: 1,
            cluster_id: "test-cluster-id-00000A".into(),
        },
    )
    .unwrap()
}

fn open(m: &LogManager, c: LogConfig) -> Arc<Log> {
    m.open_log(&tp(), uuid::Uuid::from_u128(7), c, 1).unwrap()
}

/// Append one record; returns its offset.
fn put(log: &Log, key: &str, value: Option<&str>) -> i64 {
    let b = BatchBuilder::new().record(NOW, Some(key.as_bytes()), value.map(str::as_bytes));
    log.append(Bytes::from(b.build()), AppendOrigin::Client, NOW)
        .unwrap()
        .base_offset
}

/// Every record readable from the log start: (offset, key, value).
fn records(log: &Log) -> Vec<(i64, String, Option<String>)> {
    let mut out = Vec::new();
    let mut off = log.log_start_offset();
    loop {
        let r = log.read(off, 1 << 20, true).unwrap();
        let Some(slice) = r.slice else { break };
        let bytes = slice.read_bytes().unwrap();
        for b in parse_batches(&bytes, None).unwrap() {
            let h = b.header;
            let d = decode(&bytes[b.range()], &h, 1 << 24).unwrap();
            for rec in &d.records {
                let s = |r: &Option<std::ops::Range<usize>>| {
                    r.clone()
                        .map(|r| String::from_utf8_lossy(&d.section[r]).to_string())
                };
                out.push((
                    h.base_offset + i64::from(rec.offset_delta),
                    s(&rec.key).unwrap_or_default(),
                    s(&rec.value),
                ));
            }
            off = h.next_offset();
        }
    }
    out
}

/// Offsets increase strictly and every key's newest record of `model` is there, with no
/// older record of it.
fn check_against(
    log: &Log,
    model: &BTreeMap<String, (i64, Option<String>)>,
    tombstones_gone: bool,
) {
    let recs = records(log);
    assert!(
        recs.windows(2).all(|w| w[0].0 < w[1].0),
        "offsets out of order: {recs:?}"
    );
    for (key, (offset, value)) in model {
        let found: Vec<_> = recs.iter().filter(|r| &r.1 == key).collect();
        let newest = found.last();
        if value.is_none() && tombstones_gone {
            assert!(
                found.is_empty(),
                "tombstoned key {key} still there: {found:?}"
            );
            continue;
        }
        // A tombstone may be gone (past its horizon), and then every older record too.
        if value.is_none() && found.is_empty() {
            continue;
        }
        let newest = newest.unwrap_or_else(|| panic!("key {key} lost"));
        assert_eq!((newest.0, &newest.2), (*offset, value), "key {key}");
    }
}

fn fill(
    log: &Log,
    model: &mut BTreeMap<String, (i64, Option<String>)>,
    rounds: usize,
    keys: usize,
) {
    for round in 0..rounds {
        for k in 0..keys {
            let key = format!("k{k}");
            let value = (round + k) % 7 != 3;
            let v = value.then(|| format!("v{round}-{k}-{}", "x".repeat(40)));
            let off = put(log, &key, v.as_deref());
            model.insert(key, (off, v));
        }
    }
}

#[test]
fn cleaning_keeps_the_newest_of_each_key_and_every_offset() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, compact_cfg(0));
    let mut model = BTreeMap::new();
    fill(&log, &mut model, 20, 15);
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    let before = records(&log).len();
    let segments = log.segment_count();
    let stats = m.clean_log(&tp()).unwrap().unwrap();
    assert!(
        stats.groups >= 1 && stats.bytes_written < stats.bytes_read,
        "{stats:?}"
    );
    let after = records(&log);
    assert!(
        after.len() <= 15 && after.len() < before,
        "{} of {before}",
        after.len()
    );
    check_against(&log, &model, false);
    // The tombstones kept carry a delete horizon; the next cleaning (past it) drops them.
    assert_eq!(m.cleaner_first_dirty(&tp()), Some(log.log_end_offset()));
    put(&log, "other", Some("x"));
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    m.clean_log(&tp()).unwrap().unwrap();
    check_against(&log, &model, true);
    // The segments shrank: the next cleaning puts several into one.
    assert!(
        log.segment_count() < segments,
        "{} of {segments}",
        log.segment_count()
    );
    // Appends go on at the end; the offsets did not move.
    assert_eq!(put(&log, "late", Some("y")), log.log_end_offset() - 1);
    // Kafka's checkpoint file records the first dirty offset.
    m.checkpoint().unwrap();
    let text = std::fs::read_to_string(d.path().join("cleaner-offset-checkpoint")).unwrap();
    assert!(text.starts_with("0\n1\ncompacted 0 "), "{text}");
}

#[test]
fn the_active_segment_and_young_segments_are_not_cleaned() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let mut c = compact_cfg(0);
    c.segment_bytes = 1 << 20;
    let log = open(&m, c.clone());
    let mut model = BTreeMap::new();
    fill(&log, &mut model, 5, 5);
    log.flush().unwrap();
    // Everything is in the active segment.
    assert_eq!(m.clean_log(&tp()).unwrap(), None);
    assert_eq!(records(&log).len(), 25);
    // Sealed, but younger than min.compaction.lag.ms.
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    c.cleanup.min_compaction_lag_ms = i64::MAX / 2;
    log.set_config(c);
    assert_eq!(m.clean_log(&tp()).unwrap(), None);
    assert_eq!(records(&log).len(), 25);
}

#[test]
fn idempotent_producers_keep_their_last_batch_and_state() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, compact_cfg(0));
    let append = |seq: i32, key: &str| {
        let b =
            BatchBuilder::new()
                .producer(42, 0, seq)
                .record(NOW, Some(key.as_bytes()), Some(b"v"));
        log.append(Bytes::from(b.build()), AppendOrigin::Client, NOW)
            .unwrap()
    };
    append(0, "a");
    let last = append(1, "a");
    put(&log, "a", Some("newer"));
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    m.clean_log(&tp()).unwrap().unwrap();
    // The producer's last batch stays, empty.
    let r = log.read(last.base_offset, 1 << 20, true).unwrap();
    let bytes = r.slice.unwrap().read_bytes().unwrap();
    let h = parse_batches(&bytes, None).unwrap()[0].header;
    assert_eq!(
        (
            h.base_offset,
            h.producer_id,
            h.base_sequence,
            h.record_count
        ),
        (last.base_offset, 42, 1, 0)
    );
    // After a restart the producer's retry is still a duplicate.
    drop(log);
    m.shutdown().unwrap();
    drop(m);
    let m = open_mgr(d.path());
    let log = open(&m, compact_cfg(0));
    let b = BatchBuilder::new()
        .producer(42, 0, 1)
        .record(NOW, Some(b"a"), Some(b"v"));
    let again = log
        .append(Bytes::from(b.build()), AppendOrigin::Client, NOW)
        .unwrap();
    assert!(again.duplicate);
    assert_eq!(again.base_offset, last.base_offset);
}

#[test]
fn readers_of_replaced_segments_keep_reading_and_files_go_after_them() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, compact_cfg(0));
    let mut model = BTreeMap::new();
    fill(&log, &mut model, 10, 10);
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    let held = log.read(0, 1 << 20, true).unwrap().slice.unwrap();
    let before = held.read_bytes().unwrap();
    m.clean_log(&tp()).unwrap().unwrap();
    // The old file is renamed aside and still readable through the handle.
    assert_eq!(held.read_bytes().unwrap(), before);
    let names = || -> Vec<String> {
        std::fs::read_dir(log.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect()
    };
    assert!(
        names().iter().any(|n| n.ends_with(".deleted")),
        "{:?}",
        names()
    );
    assert!(!names()
        .iter()
        .any(|n| n.ends_with(".swap") || n.ends_with(".cleaned")));
    drop(held);
    log.reap_pending(i64::MAX);
    assert!(
        !names().iter().any(|n| n.ends_with(".deleted")),
        "{:?}",
        names()
    );
    // Cleaning again within the delay renames nothing over anything.
    put(&log, "k1", Some("again"));
    model.insert(
        "k1".into(),
        (log.log_end_offset() - 1, Some("again".into())),
    );
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    let held = log.read(0, 1 << 20, true).unwrap().slice.unwrap();
    m.clean_log(&tp()).unwrap().unwrap();
    m.clean_log(&tp()).unwrap();
    assert!(held.read_bytes().is_ok());
    check_against(&log, &model, false);
}

#[test]
fn a_crash_at_each_step_of_a_swap_recovers_a_whole_log() {
    for crash in [
        CrashAt::Cleaned,
        CrashAt::Swapped,
        CrashAt::OldRenamed,
        CrashAt::IndexesIn,
    ] {
        let d = tempfile::tempdir().unwrap();
        let m = open_mgr(d.path());
        let log = open(&m, compact_cfg(60_000));
        let mut model = BTreeMap::new();
        fill(&log, &mut model, 12, 10);
        log.roll(NOW).unwrap();
        log.flush().unwrap();
        let end = log.log_end_offset();
        m.clean_log_at(&tp(), Some(crash)).unwrap();
        // The process dies: no shutdown, no clean-shutdown marker.
        drop(log);
        drop(m);
        let m = open_mgr(d.path());
        let log = open(&m, compact_cfg(60_000));
        assert_eq!(log.log_end_offset(), end, "{crash:?}");
        check_against(&log, &model, false);
        let names: Vec<String> = std::fs::read_dir(log.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        assert!(
            !names.iter().any(|n| n.ends_with(".swap")
                || n.ends_with(".cleaned")
                || n.ends_with(".deleted")),
            "{crash:?}: {names:?}"
        );
        // The swap was completed (once the switch had begun renaming the old segments
        // aside) or the old segments stayed (a `.swap` left before that is removed: the
        // segments may have changed since, recover.rs); either way a new cleaning works and
        // the appends go on.
        let cleaned = matches!(crash, CrashAt::OldRenamed | CrashAt::IndexesIn);
        assert_eq!(records(&log).len() < 120, cleaned, "{crash:?}");
        m.clean_log(&tp()).unwrap();
        check_against(&log, &model, false);
        assert_eq!(put(&log, "z", Some("z")), end);
    }
}

#[test]
fn compressed_batches_are_cleaned_and_recompressed() {
    use sluice_format::batch::{compute_crc, BatchHeader, CRC_OFFSET, LOG_OVERHEAD};
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, compact_cfg(0));
    for round in 0..3 {
        let mut b = BatchBuilder::new();
        for k in 0..5 {
            b = b.record(
                NOW,
                Some(format!("k{k}").as_bytes()),
                Some(format!("r{round}").as_bytes()),
            );
        }
        let plain = b.build();
        let h = BatchHeader::decode(&plain).unwrap();
        let body = sluice_format::codec::compress(4, &plain[sluice_format::HEADER_LEN..]).unwrap();
        let mut out = BatchHeader {
            batch_length: (sluice_format::HEADER_LEN - LOG_OVERHEAD + body.len()) as i32,
            attributes: h.attributes | 4,
            ..h
        }
        .encode()
        .to_vec();
        out.extend_from_slice(&body);
        let crc = compute_crc(&out);
        out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        log.append(Bytes::from(out), AppendOrigin::Client, NOW)
            .unwrap();
    }
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    m.clean_log(&tp()).unwrap().unwrap();
    let recs = records(&log);
    assert_eq!(recs.len(), 5, "{recs:?}");
    assert!(recs.iter().all(|r| r.2.as_deref() == Some("r2")));
    let bytes = log
        .read(0, 1 << 20, true)
        .unwrap()
        .slice
        .unwrap()
        .read_bytes()
        .unwrap();
    assert!(parse_batches(&bytes, None)
        .unwrap()
        .iter()
        .all(|b| b.header.compression_codec() == 4 || b.header.record_count == 0));
}

#[test]
fn tombstones_get_a_delete_horizon_first() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, compact_cfg(3_600_000));
    put(&log, "a", Some("1"));
    let t = put(&log, "a", None);
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    m.clean_log(&tp()).unwrap().unwrap();
    let r = log
        .read(t, 1 << 20, true)
        .unwrap()
        .slice
        .unwrap()
        .read_bytes()
        .unwrap();
    let h = parse_batches(&r, None).unwrap()[0].header;
    let horizon = delete_horizon(&h).unwrap();
    assert!(horizon >= crate::fsutil::now_ms() + 3_500_000);
    // Before the horizon it stays.
    put(&log, "b", Some("2"));
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    m.clean_log(&tp()).unwrap().unwrap();
    assert_eq!(records(&log).iter().filter(|r| r.1 == "a").count(), 1);
}

#[derive(Clone, Debug)]
enum Op {
    Put(u8, Option<u8>),
    Roll,
    Clean,
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => (0u8..12, proptest::option::weighted(0.8, any::<u8>())).prop_map(|(k, v)| Op::Put(k, v)),
        1 => Just(Op::Roll),
        2 => Just(Op::Clean),
        1 => Just(Op::Restart),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]
    /// Random keyed appends, tombstones, rolls, cleanings and restarts against a map of the
    /// newest record per key: that record is always there at its offset, the offsets read
    /// increase, and the log end never moves back.
    #[test]
    fn cleaning_matches_a_model(ops in proptest::collection::vec(op(), 1..80)) {
        let d = tempfile::tempdir().unwrap();
        let mut m = open_mgr(d.path());
        let c = LogConfig { segment_bytes: 400, ..compact_cfg(60_000) };
        let mut log = open(&m, c.clone());
        let mut model: BTreeMap<String, (i64, Option<String>)> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Put(k, v) => {
                    let key = format!("key{k}");
                    let v = v.map(|v| format!("value{v}"));
                    let off = put(&log, &key, v.as_deref());
                    model.insert(key, (off, v));
                }
                Op::Roll => log.roll(NOW).unwrap(),
                Op::Clean => {
                    log.flush().unwrap();
                    m.clean_log(&tp()).unwrap();
                }
                Op::Restart => {
                    let end = log.log_end_offset();
                    drop(log);
                    m.shutdown().unwrap();
                    drop(m);
                    m = open_mgr(d.path());
                    log = open(&m, c.clone());
                    prop_assert_eq!(log.log_end_offset(), end);
                }
            }
            check_against(&log, &model, false);
        }
    }
}

#[test]
fn a_swap_is_completed_only_once_its_switch_had_begun() {
    use super::recover::switched_aside;
    // The first segment of the group, renamed aside under a tag naming the swap's base.
    assert_eq!(
        switched_aside("00000000000000000017.log.17-0123456789ab.deleted"),
        Some((17, "17-0123456789ab".to_string()))
    );
    // A tag from before tags named the base: such swaps are completed, as they were.
    assert_eq!(
        switched_aside("00000000000000000017.log.0123456789ab.deleted"),
        Some((17, "0123456789ab".to_string()))
    );
    // Renamed aside by a switch of another swap (a group starting lower), by retention or
    // DeleteRecords (no tag), or not the `.log`: not this swap's switch.
    for name in [
        "00000000000000000017.log.5-0123456789ab.deleted",
        "00000000000000000017.log.deleted",
        "00000000000000000017.index.17-0123456789ab.deleted",
        "00000000000000000017.log.17-.deleted",
        "00000000000000000017.log.swap",
    ] {
        assert_eq!(switched_aside(name), None, "{name}");
    }
}

#[test]
fn a_cleaning_takes_no_swap_file_a_former_owner_left() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, compact_cfg(60_000));
    let mut model = BTreeMap::new();
    fill(&log, &mut model, 12, 10);
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    // A former owner's refused switch left a transaction index for a segment at the base
    // this cleaning starts at; this cleaning keeps no aborted transaction, so makes none.
    let stale = log.dir().join("00000000000000000000.txnindex.swap");
    std::fs::write(&stale, [7u8; 40]).unwrap();
    m.clean_log(&tp()).unwrap().unwrap();
    let txnindex = log.dir().join("00000000000000000000.txnindex");
    assert!(
        std::fs::read(&txnindex).map_or(true, |b| b != [7u8; 40]),
        "the former owner's transaction index was switched in"
    );
    // (It stays for the next open, which removes it: no switch of this cleaner takes a swap
    // file not named with its own tag.)
    check_against(&log, &model, false);
}

/// The tag of the `.log` swap file a switch at `base` left in `dir` (`<base>.log.<tag>.swap`).
fn swap_tag_left(dir: &std::path::Path, base: i64) -> String {
    let prefix = format!("{base:020}.log.");
    let tags: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().to_string();
            name.strip_prefix(&prefix)?
                .strip_suffix(".swap")
                .map(str::to_string)
        })
        .collect();
    assert_eq!(
        tags.len(),
        1,
        "one switch's .log swap file at {base}: {tags:?}"
    );
    tags[0].clone()
}

#[test]
fn a_segment_whose_log_cannot_be_renamed_aside_keeps_every_file() {
    use crate::segment::{deleted_path, rename_deleted_in, seg_path, SEGMENT_KINDS};
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    for kind in SEGMENT_KINDS {
        std::fs::write(seg_path(dir, 0, kind), [1u8; 12]).unwrap();
    }
    // The `.log`'s rename fails (a non-empty directory stands at its `.deleted` name, as a
    // failing storage server would fail it).
    let blocker = deleted_path(dir, 0, sluice_format::SegmentFileKind::Log, Some("0-abc"));
    std::fs::create_dir(&blocker).unwrap();
    std::fs::write(blocker.join("x"), b"x").unwrap();
    assert!(rename_deleted_in(dir, 0, Some("0-abc")).is_err());
    // A switch that failed here is rolled back by the next open (its `.log` is in place), and
    // the loader removes `.deleted` files: an index renamed aside now would be lost, the
    // `.txnindex` with the segment's aborted transactions among them.
    for kind in SEGMENT_KINDS {
        assert!(seg_path(dir, 0, kind).exists(), "{kind:?} renamed aside");
    }
}

/// A switch that renamed the first old segment's `.log` aside and then failed before its
/// other files (its `.txnindex` still under its name): the open completes the swap, and the
/// cleaned segment must not inherit that stale `.txnindex` (its entries name aborted
/// transactions whose markers the cleaning removed) when it keeps none of its own.
#[test]
fn a_completed_swap_takes_none_of_the_replaced_segments_files() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, compact_cfg(60_000));
    let mut model = BTreeMap::new();
    fill(&log, &mut model, 12, 10);
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    let end = log.log_end_offset();
    // The recovery point past the cleaned segments: their indexes are trusted at the open.
    m.checkpoint().unwrap();
    m.clean_log_at(&tp(), Some(CrashAt::Swapped)).unwrap();
    let dir = log.dir().to_path_buf();
    drop(log);
    drop(m);
    let tag = swap_tag_left(&dir, 0);
    assert!(!dir
        .join(format!("00000000000000000000.txnindex.{tag}.swap"))
        .exists());
    let stale = dir.join("00000000000000000000.txnindex");
    let entry = sluice_format::txn::TxnIndexEntry {
        producer_id: 42,
        first_offset: 1,
        last_offset: 4,
        last_stable_offset: 1,
    }
    .encode();
    std::fs::write(&stale, entry).unwrap();
    std::fs::rename(
        dir.join("00000000000000000000.log"),
        dir.join(format!("00000000000000000000.log.{tag}.deleted")),
    )
    .unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, compact_cfg(60_000));
    assert_eq!(log.log_end_offset(), end);
    assert!(
        std::fs::read(&stale).map_or(true, |b| b != entry),
        "the cleaned segment took the replaced segment's .txnindex"
    );
    check_against(&log, &model, false);
}

/// A switch cut short after it renamed the cleaned segment's indexes in (its `.txnindex`
/// among them) and before its `.log`: the open completes it and keeps those indexes.
#[test]
fn a_swap_completed_after_its_indexes_were_renamed_in_keeps_them() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, compact_cfg(60_000));
    let mut model = BTreeMap::new();
    fill(&log, &mut model, 12, 10);
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    m.checkpoint().unwrap();
    let end = log.log_end_offset();
    m.clean_log_at(&tp(), Some(CrashAt::IndexesIn)).unwrap();
    let dir = log.dir().to_path_buf();
    drop(log);
    drop(m);
    let tag = swap_tag_left(&dir, 0);
    assert!(!dir
        .join(format!("00000000000000000000.index.{tag}.swap"))
        .exists());
    // The cleaned segment's transaction index, renamed in with the others.
    let txnindex = dir.join("00000000000000000000.txnindex");
    assert!(!txnindex.exists());
    let entry = sluice_format::txn::TxnIndexEntry {
        producer_id: 42,
        first_offset: 1,
        last_offset: 4,
        last_stable_offset: 1,
    }
    .encode();
    std::fs::write(&txnindex, entry).unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, compact_cfg(60_000));
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(
        std::fs::read(&txnindex).ok().as_deref(),
        Some(&entry[..]),
        "the cleaned segment's own .txnindex was removed"
    );
}

/// Found by an adversary on 0a7da8d, since fixed: an adopted Kafka log dir whose cleaning crashed after Kafka's
/// `LocalLog.replaceSegments` renamed the old segments to `.deleted` loses the group's
/// records at Sluice's first open.
///
/// Kafka's switch (3.x `LocalLog.replaceSegments`): (1) `<base>.log.cleaned` ->
/// `<base>.log.swap` (indexes alike); (2) each old segment through `deleteSegmentFiles(..,
/// asyncDelete = true)`, which renames its files to `<base>.log.deleted` (no tag) at once
/// and unlinks them only after `file.delete.delay.ms`; (3) `.swap` -> final name. From (1)
/// on Kafka's `LogLoader` completes the swap (it deletes `.deleted` files and renames every
/// `.swap` into place over the segments it overlaps).
///
/// Interleaving:
/// 1. A Kafka broker cleans the group at 0 and crashes between (2) and (3) (a power loss):
///    the directory holds `0.log.swap` (+ `.index.swap`, `.timeindex.swap`) and
///    `0.log.deleted` (+ its indexes), and the active segment.
/// 2. The log dir is adopted by Sluice. Its open (`cleaner/recover.rs`
///    `complete_swaps_removing`) finds the untagged swap and asks whether its switch had
///    begun: "one of Kafka's names, when one is aside under any tag naming its base"
///    (recover.rs:89-94); Kafka's `0.log.deleted` has no tag (`switched_aside` -> None,
///    recover.rs:180), so `begun` is false and the swap is removed as one "whose switch had
///    not begun" (recover.rs:105-111).
/// 3. The loader then removes the `.deleted` files: neither the cleaned segment nor the old
///    one is left, and every record of the group (offsets 0 up to the active segment) is gone;
///    the log starts at the active segment's base.
#[test]
fn a_kafka_swap_left_after_its_old_segments_went_aside_is_completed() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, compact_cfg(60_000));
    let mut model = BTreeMap::new();
    fill(&log, &mut model, 12, 10);
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    let end = log.log_end_offset();
    // Sluice's switch stopped at the same point as Kafka's (old segments aside, swap not in).
    m.clean_log_at(&tp(), Some(CrashAt::OldRenamed)).unwrap();
    let dir = log.dir().to_path_buf();
    drop(log);
    drop(m);
    // Rename Sluice's tagged names to the ones Kafka's switch leaves at that point.
    let mut renamed = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let name = e.unwrap().file_name().to_string_lossy().to_string();
        for suffix in [".swap", ".deleted"] {
            if let Some(stem) = name.strip_suffix(suffix) {
                // `<base>.<kind>.<tag>` -> `<base>.<kind>`
                let mut parts: Vec<&str> = stem.split('.').collect();
                if parts.len() == 3 {
                    parts.pop();
                    let kafka = format!("{}{suffix}", parts.join("."));
                    std::fs::rename(dir.join(&name), dir.join(&kafka)).unwrap();
                    renamed.push(kafka);
                }
            }
        }
    }
    renamed.sort();
    assert!(
        renamed.iter().any(|n| n == "00000000000000000000.log.swap")
            && renamed
                .iter()
                .any(|n| n == "00000000000000000000.log.deleted"),
        "Kafka's crash state: {renamed:?}"
    );
    let m = open_mgr(d.path());
    let log = open(&m, compact_cfg(60_000));
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(
        log.log_start_offset(),
        0,
        "the group's records are gone: Kafka's swap was removed as not begun and its old \
         segment (`0.log.deleted`) removed as a leftover"
    );
    check_against(&log, &model, false);
}

/// Found by an adversary on f0dc644 (a rename-back at open, since removed): the rename-back of `complete_swaps_removing`
/// (cleaner/recover.rs:173-187) resurrects a segment that DeleteRecords (or retention)
/// deleted after a completed cleaning.
///
/// Interleaving:
/// 1. The cleaner cleans the group at 0 and completes its switch: the cleaned `0.log` is in
///    place and the old one aside as `0.log.<0-x>.deleted`, retired to `pending`
///    (cleaner/swap.rs:445-458); it stays on disk until `reap_pending` unlinks it
///    (log.rs:2145-2197: not while a reader holds it, never once the broker is not
///    `writable`, log.rs:2154).
/// 2. DeleteRecords (or retention) moves the log start past segment 0: the cleaned `0.log`
///    goes aside / is unlinked.
/// 3. The broker stops or is deposed before `0.log.<0-x>.deleted` is unlinked.
/// 4. The next open: `switched_aside` takes `0.log.<0-x>.deleted` for a switch's first
///    segment; no `0.log`, no swap of tag `0-x` -> renamed back to `0.log` (recover.rs:183):
///    the old, uncleaned segment 0 is back in the log, below the deleted-records point.
///
/// Observed: after the reopen the log starts at 0 again; the records DeleteRecords deleted
/// (and the superseded ones the cleaning removed) are served to readers. Steps 1-3 are
/// stood in for with a copy of the aside file put back after the stop.
#[test]
fn a_segment_deleted_after_its_cleaning_is_never_renamed_back() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, compact_cfg(0));
    let mut model = BTreeMap::new();
    fill(&log, &mut model, 20, 15);
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    let dir = log.dir().to_path_buf();
    let mut bases: Vec<i64> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().to_string();
            n.strip_suffix(".log").and_then(|s| s.parse::<i64>().ok())
        })
        .collect();
    bases.sort();
    let held = hold_segments(&log);
    m.clean_log_at(&tp(), None).unwrap();
    let aside: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("00000000000000000000.log.") && n.ends_with(".deleted"))
        .collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    // Step 1's aside file, as a fetch in flight (or a stop before the reap) keeps it.
    let kept = std::fs::read(dir.join(&aside[0])).unwrap();
    drop(held);
    let start = bases[1];
    log.delete_records_before(start).unwrap();
    log.flush().unwrap();
    let zero = crate::segment::seg_path(&dir, 0, sluice_format::SegmentFileKind::Log);
    let gone_after_delete = !zero.exists();
    let before = records(&log);
    let end = log.log_end_offset();
    drop(log);
    drop(m);
    let mut left: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("00000000000000000000.log"))
        .collect();
    left.sort();
    eprintln!("aside after cleaning {aside:?}; 0.log gone after delete: {gone_after_delete}; left at stop {left:?}");
    // Step 3: the broker stopped before the reader let go of the aside file.
    std::fs::write(dir.join(&aside[0]), kept).unwrap();
    let m = open_mgr(d.path());
    let log = m
        .open_log(&tp(), uuid::Uuid::from_u128(7), compact_cfg(0), 1)
        .expect("the open fails");
    assert_eq!(log.log_end_offset(), end);
    assert!(
        log.log_start_offset() >= start,
        "log start {} < {start}: deleted records are served again",
        log.log_start_offset()
    );
    assert_eq!(records(&log), before, "the records served changed");
    assert!(
        !zero.exists(),
        "segment 0, cleaned then deleted by DeleteRecords, was renamed back under its name"
    );
}

/// Found by an adversary on f0dc644 (a rename-back at open, since removed): the rename-back of `complete_swaps_removing`
/// (cleaner/recover.rs:173-187) puts a switch's first old segment back under its name when no
/// `<base>.log` and no swap of its tag exist, without asking whether a later switch's cleaned
/// segment covers that base: it resurrects cleaned-away records over the newer segment.
///
/// Interleaving:
/// 1. A cleaning pass cleans segment B (B > 0) alone and completes its switch: the cleaned
///    `B.log` in place, the old one aside as `B.log.<B-x>.deleted`, retired to `pending`
///    (cleaner/swap.rs:445-458), which `reap_pending` leaves while a fetch holds the segment
///    (log.rs:2175-2180) and for good once the broker is not `writable` (log.rs:2154).
/// 2. More records; the next pass merges the group 0..B.. into a cleaned `0.log`: the cleaned
///    `B.log` goes aside as `B.log.<0-y>.deleted`.
/// 3. The broker stops (or is deposed) with `B.log.<B-x>.deleted` still on disk.
/// 4. The next open: `switched_aside` takes `B.log.<B-x>.deleted` for a switch's first
///    segment; no `B.log`, no swap of tag `B-x` -> renamed back to `B.log` (recover.rs:183),
///    over offsets the cleaned `0.log` holds.
///
/// Steps 1-3 are stood in for with a copy of the aside file put back after the stop.
///
/// Observed (B = 18): the reopened log serves offsets 18..=35 again with their superseded
/// values and a tombstone the cleanings had removed (k9 at 24), records that a completed
/// cleaning took out of what readers see.
#[test]
fn a_segment_a_later_switch_covers_is_never_renamed_back() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, compact_cfg(0));
    let mut model = BTreeMap::new();
    fill(&log, &mut model, 20, 15);
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    let held = hold_segments(&log);
    m.clean_log_at(&tp(), None).unwrap();
    let dir = log.dir().to_path_buf();
    let names = || -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().to_string())
            .collect();
        v.sort();
        v
    };
    // Step 1: the first pass's aside files (keep their bytes, as a reader would).
    let aside: Vec<(String, Vec<u8>)> = names()
        .into_iter()
        .filter(|n| n.contains(".log.") && n.ends_with(".deleted"))
        .map(|n| {
            let b = std::fs::read(dir.join(&n)).unwrap();
            (n, b)
        })
        .collect();
    drop(held);
    fill(&log, &mut model, 20, 15);
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    m.clean_log_at(&tp(), None).unwrap();
    let now = names();
    // Step 2: a base whose cleaned segment the second pass merged into a lower one.
    let (name, bytes) = aside
        .into_iter()
        .find(|(n, _)| {
            let base = &n[..20];
            base != "00000000000000000000" && !now.contains(&format!("{base}.log"))
        })
        .expect("the second pass merges segments");
    let b: i64 = name[..20].parse().unwrap();
    let before = records(&log);
    let end = log.log_end_offset();
    drop(log);
    drop(m);
    // Step 3: the stop left it on disk.
    std::fs::write(dir.join(&name), bytes).unwrap();
    let m = open_mgr(d.path());
    let log = m
        .open_log(&tp(), uuid::Uuid::from_u128(7), compact_cfg(0), 1)
        .expect("the open fails: a renamed-back segment overlaps the cleaned one");
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(
        records(&log),
        before,
        "the records served changed: segment {b}'s pre-cleaning records are back"
    );
    assert!(
        !crate::segment::seg_path(&dir, b, sluice_format::SegmentFileKind::Log).exists(),
        "segment {b}, merged into the cleaned segment at 0, was renamed back under its name"
    );
}

/// Found by an adversary on f0dc644 (a rename-back at open, since removed): the fencing path of the rename-back needs no reader.
/// A deposed cleaner's rename aside that lands after the new owner's open, then the new
/// owner's DeleteRecords past that segment: the next open renames the segment back
/// (cleaner/recover.rs:173-187) and the deleted records are served again.
///
/// Interleaving:
/// 1. Broker A cleans the group at 0; it is deposed; its step 4 rename of `0.log` to
///    `0.log.<0-a>.deleted` (cleaner/swap.rs:410) was asked of the write gate before
///    (swap.rs:406) and stalls in flight (NFS).
/// 2. Broker B opens the partition: `0.log` in place, A's swap removed as not begun.
/// 3. A's rename lands: `0.log.<0-a>.deleted`, no `0.log` (B keeps serving from its open
///    file).
/// 4. B's DeleteRecords moves the log start past segment 0: the segment is dropped (its
///    `.log` is already gone; the rest renamed aside/unlinked).
/// 5. B (or C) opens the partition again: `0.log.<0-a>.deleted`, no `0.log`, no swap of tag
///    `0-a` -> renamed back to `0.log` (recover.rs:183): the log starts at 0 again.
///
/// Steps 1-2 leave the directory as it was (the swap removed): the test starts at step 3.
/// Observed: after step 5 the log starts at 0 and serves the deleted records.
#[test]
fn records_deleted_after_a_late_aside_stay_deleted() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, compact_cfg(0));
    let mut model = BTreeMap::new();
    fill(&log, &mut model, 20, 15);
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    let dir = log.dir().to_path_buf();
    let zero = crate::segment::seg_path(&dir, 0, sluice_format::SegmentFileKind::Log);
    let mut bases: Vec<i64> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().to_string_lossy().to_string();
            n.strip_suffix(".log").and_then(|s| s.parse::<i64>().ok())
        })
        .collect();
    bases.sort();
    // Step 3: the deposed cleaner's rename aside lands.
    std::fs::rename(
        &zero,
        crate::segment::deleted_path(
            &dir,
            0,
            sluice_format::SegmentFileKind::Log,
            Some("0-0123456789ab"),
        ),
    )
    .unwrap();
    // Step 4.
    let start = bases[1];
    log.delete_records_before(start).unwrap();
    log.flush().unwrap();
    let before = records(&log);
    let end = log.log_end_offset();
    drop(log);
    drop(m);
    // Step 5.
    let m = open_mgr(d.path());
    let log = m
        .open_log(&tp(), uuid::Uuid::from_u128(7), compact_cfg(0), 1)
        .expect("the open fails");
    assert_eq!(log.log_end_offset(), end);
    assert!(
        log.log_start_offset() >= start,
        "log start {} < {start}: records DeleteRecords deleted are served again",
        log.log_start_offset()
    );
    assert_eq!(records(&log), before, "the records served changed");
}

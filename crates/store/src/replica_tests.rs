//! [`ReplicaReader`] against a real [`Log`] writing the same directory: the reader's answers
//! equal the log's own reads for the same bound, never pass the bound, follow rolls and
//! retention, start over after `forget`, and fail (without panicking) on garbage below the
//! bound.
#![allow(clippy::unwrap_used)]

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use sluice_format::{parse_batches, BatchBuilder};

use super::*;
use crate::tests::{cfg, NOW};
use crate::{
    AppendOrigin, ControlType, DeleteRetry, Isolation, Log, LogConfig, LogManager, MetaProperties,
    Sharing,
};

fn tp() -> TopicPartition {
    TopicPartition {
        topic: "r".into(),
        partition: 0,
    }
}

fn mgr(dir: &Path, sharing: Sharing, node_id: i32) -> LogManager {
    LogManager::open_sharing(
        vec![dir.to_path_buf()],
        MetaProperties {
            node_id,
            cluster_id: "replica-cluster-id-000A".into(),
        },
        DeleteRetry::default(),
        sharing,
    )
    .unwrap()
}

/// Small segments (a roll every few batches), an index entry every few hundred bytes.
fn small() -> LogConfig {
    LogConfig {
        segment_bytes: 1000,
        index_interval_bytes: 200,
        ..cfg()
    }
}

fn open(m: &LogManager, c: LogConfig, epoch: i32) -> Arc<Log> {
    m.open_log(&tp(), uuid::Uuid::from_u128(11), c, epoch)
        .unwrap()
}

fn batch(n: usize, tag: &str) -> Bytes {
    let mut b = BatchBuilder::new();
    for i in 0..n {
        b = b.record(
            NOW + i as i64,
            Some(b"k"),
            Some(format!("{tag}-{i}").as_bytes()),
        );
    }
    Bytes::from(b.build())
}

fn txn(pid: i64, seq: i32, n: usize) -> Bytes {
    let mut b = BatchBuilder::new().producer(pid, 0, seq);
    b.transactional = true;
    for i in 0..n {
        b = b.record(
            NOW + i as i64,
            Some(b"t"),
            Some(format!("{pid}-{seq}-{i}").as_bytes()),
        );
    }
    Bytes::from(b.build())
}

fn published(log: &Log) -> Published {
    Published {
        log_start: log.log_start_offset(),
        high_watermark: log.high_watermark(),
        last_stable: log.last_stable_offset(),
    }
}

fn reader(log: &Log) -> ReplicaReader {
    ReplicaReader::new(tp(), log.dir())
}

/// The slice's place and bytes.
fn region(r: &ReadResult) -> Option<(u64, u32, Vec<u8>)> {
    r.slice
        .as_ref()
        .map(|s| (s.position, s.len, s.read_bytes().unwrap().to_vec()))
}

/// (base offset, last offset) of every batch in `bytes`.
fn offsets(bytes: &[u8]) -> Vec<(i64, i64)> {
    parse_batches(bytes, None)
        .unwrap()
        .iter()
        .map(|b| (b.header.base_offset, b.header.last_offset()))
        .collect()
}

fn log_path(log: &Log, base: i64) -> PathBuf {
    log.dir().join(sluice_format::segment_file_name(
        base,
        sluice_format::SegmentFileKind::Log,
    ))
}

fn bases(log: &Log) -> Vec<i64> {
    log.shared
        .read()
        .segments
        .iter()
        .map(|s| s.base_offset)
        .collect()
}

/// Every batch of the log: (base offset, last offset), from its files.
fn all_batches(log: &Log) -> Vec<(i64, i64)> {
    bases(log)
        .into_iter()
        .flat_map(|b| offsets(&std::fs::read(log_path(log, b)).unwrap()))
        .collect()
}

/// A log of several rolled segments holding plain batches of different sizes and the
/// transactions of two producers, some aborted, one left open at the end (so that the last
/// stable offset is below the high watermark).
fn mixed_log(m: &LogManager) -> Arc<Log> {
    let log = open(m, small(), 1);
    let (mut s1, mut s2) = (0, 0);
    for round in 0..12 {
        log.append(
            batch(1 + round % 4, &format!("p{round}")),
            AppendOrigin::Client,
            NOW,
        )
        .unwrap();
        log.append(txn(1, s1, 2), AppendOrigin::Client, NOW)
            .unwrap();
        s1 += 2;
        log.append(txn(2, s2, 1), AppendOrigin::Client, NOW)
            .unwrap();
        s2 += 1;
        log.append(batch(3, &format!("q{round}")), AppendOrigin::Client, NOW)
            .unwrap();
        let c1 = if round % 3 == 0 {
            ControlType::Abort
        } else {
            ControlType::Commit
        };
        log.append_marker(1, 0, 0, c1, NOW).unwrap();
        if round % 2 == 1 {
            let c2 = if round % 4 == 1 {
                ControlType::Abort
            } else {
                ControlType::Commit
            };
            log.append_marker(2, 0, 0, c2, NOW).unwrap();
        }
    }
    // Producer 1's transaction stays open.
    log.append(txn(1, s1, 2), AppendOrigin::Client, NOW)
        .unwrap();
    log.append(batch(2, "tail"), AppendOrigin::Client, NOW)
        .unwrap();
    log
}

/// The reader answers as the log's own read does, for every offset and cap, both
/// isolations, across rolled segments (sealed ones read from their `.index` hints).
#[test]
fn reads_equal_the_logs_own_reads() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path(), Sharing::Exclusive, 1);
    let log = mixed_log(&m);
    assert!(log.segment_count() >= 4, "{}", log.segment_count());
    let p = published(&log);
    assert!(p.last_stable < p.high_watermark, "{p:?}");
    let r = reader(&log);
    let mut some_aborted = false;
    for committed in [false, true] {
        let iso = if committed {
            Isolation::ReadCommitted
        } else {
            Isolation::ReadUncommitted
        };
        for offset in p.log_start..=p.high_watermark {
            for max in [0, 1, 100, 300, 700, 1500, 5000, u32::MAX] {
                for min_one in [false, true] {
                    let want = log.read_isolated(offset, max, min_one, iso).unwrap();
                    let got = r.read(offset, max, min_one, committed, p).unwrap();
                    let at = format!(
                        "offset {offset} max {max} min_one {min_one} committed {committed}"
                    );
                    assert_eq!(region(&got), region(&want), "{at}");
                    assert_eq!(got.aborted, want.aborted, "{at}");
                    assert_eq!(
                        (
                            got.high_watermark,
                            got.log_start_offset,
                            got.last_stable_offset
                        ),
                        (
                            want.high_watermark,
                            want.log_start_offset,
                            want.last_stable_offset
                        ),
                        "{at}"
                    );
                    some_aborted |= got.aborted.as_ref().is_some_and(|a| !a.is_empty());
                }
            }
        }
    }
    assert!(some_aborted);
    // A second reader that starts at the end (positions learned backwards) agrees too.
    let r = reader(&log);
    for offset in (p.log_start..p.high_watermark).rev() {
        let want = log
            .read_isolated(offset, 1000, true, Isolation::ReadCommitted)
            .unwrap();
        let got = r.read(offset, 1000, true, true, p).unwrap();
        assert_eq!(region(&got), region(&want), "offset {offset}");
        assert_eq!(got.aborted, want.aborted, "offset {offset}");
    }
}

/// With a bound below the log end (mid-segment, at a segment's base, at its end), nothing
/// at or past it is returned, and reading on from each answer returns every batch below it.
#[test]
fn nothing_at_or_past_the_bound() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path(), Sharing::Exclusive, 1);
    let log = mixed_log(&m);
    let batches = all_batches(&log);
    let seg_bases = bases(&log);
    // Past the log end, bytes an owner is writing (torn): never read below the bound.
    let active = *seg_bases.last().unwrap();
    let f = std::fs::OpenOptions::new()
        .append(true)
        .open(log_path(&log, active))
        .unwrap();
    std::io::Write::write_all(&mut &f, &[0xA5; 100]).unwrap();
    let leo = log.log_end_offset();
    let mut bounds: Vec<i64> = batches.iter().map(|b| b.0).collect();
    bounds.push(leo);
    assert!(seg_bases[1..].iter().all(|b| bounds.contains(b)));
    for bound in bounds {
        let p = Published {
            log_start: 0,
            high_watermark: bound,
            last_stable: bound,
        };
        let r = reader(&log);
        for committed in [false, true] {
            for max in [1, 500, u32::MAX] {
                for start in [0, bound / 2, (bound - 1).max(0)] {
                    let mut offset = start;
                    let mut got = Vec::new();
                    while offset < bound {
                        let res = r.read(offset, max, true, committed, p).unwrap();
                        let Some((_, _, bytes)) = region(&res) else {
                            panic!("nothing at {offset} below the bound {bound}");
                        };
                        let o = offsets(&bytes);
                        assert!(
                            o.iter().all(|&(_, last)| last < bound),
                            "{o:?} bound {bound}"
                        );
                        offset = o.last().unwrap().1 + 1;
                        got.extend(o);
                    }
                    let want: Vec<_> = batches
                        .iter()
                        .copied()
                        .filter(|&(_, last)| last >= start && last < bound)
                        .collect();
                    assert_eq!(got, want, "bound {bound} start {start} max {max}");
                    let at_end = r.read(bound, max, true, committed, p).unwrap();
                    assert!(at_end.slice.is_none());
                }
            }
        }
        // Past the bound is out of range, with the bound as the log end.
        assert!(matches!(
            reader(&log).read(bound + 1, u32::MAX, true, false, p),
            Err(ReadError::OffsetOutOfRange { log_end, .. }) if log_end == bound
        ));
    }
}

/// A reader made before the log rolled reads the segments rolled since (its listing taken
/// again when the bound says there is more than its newest segment holds).
#[test]
fn follows_rolls() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path(), Sharing::Exclusive, 1);
    let log = open(&m, small(), 1);
    log.append(batch(2, "a"), AppendOrigin::Client, NOW)
        .unwrap();
    let r = reader(&log);
    let first = r.read(0, u32::MAX, true, false, published(&log)).unwrap();
    assert_eq!(offsets(&region(&first).unwrap().2), vec![(0, 1)]);
    for i in 0..40 {
        log.append(batch(3, &format!("b{i}")), AppendOrigin::Client, NOW)
            .unwrap();
        if i % 10 == 9 {
            log.roll(NOW).unwrap();
        }
    }
    assert!(log.segment_count() >= 5);
    let p = published(&log);
    // Read on from where the first read ended, and at every offset.
    let mut offset = 2;
    while offset < p.high_watermark {
        let want = log.read(offset, 700, true).unwrap();
        let got = r.read(offset, 700, true, false, p).unwrap();
        assert_eq!(region(&got), region(&want), "offset {offset}");
        offset = offsets(&region(&got).unwrap().2).last().unwrap().1 + 1;
    }
    for offset in 0..p.high_watermark {
        let want = log.read(offset, 300, false).unwrap();
        let got = r.read(offset, 300, false, false, p).unwrap();
        assert_eq!(region(&got), region(&want), "offset {offset}");
    }
}

/// After DeleteRecords removed the oldest segments: a read below the new start is out of
/// range (by the published start, and by the files for a reader told an older start); a
/// read above still works, for a reader whose files of the removed segments were open.
#[test]
fn follows_retention() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path(), Sharing::Exclusive, 1);
    let log = open(&m, small(), 1);
    for i in 0..60 {
        log.append(batch(2, &format!("c{i}")), AppendOrigin::Client, NOW)
            .unwrap();
    }
    let old = published(&log);
    let r = reader(&log);
    // Every segment read (and its file opened) once.
    for offset in (0..old.high_watermark).step_by(7) {
        r.read(offset, 100, true, false, old).unwrap();
    }
    let seg_bases = bases(&log);
    assert!(seg_bases.len() >= 4);
    // A reader that listed the segments but opened only the newest.
    let unopened = reader(&log);
    unopened
        .read(old.high_watermark - 1, 100, true, false, old)
        .unwrap();
    let cut = seg_bases[2];
    log.delete_records_before(cut).unwrap();
    log.maintain(NOW).unwrap();
    m.maintain(NOW);
    assert_eq!(bases(&log)[0], cut);
    assert!(!log_path(&log, 0).exists());
    let new = published(&log);
    assert_eq!(new.log_start, cut);
    for reader in [&r, &reader(&log)] {
        assert!(matches!(
            reader.read(0, u32::MAX, true, false, new),
            Err(ReadError::OffsetOutOfRange { log_start, .. }) if log_start == cut
        ));
        for offset in cut..new.high_watermark {
            let want = log.read(offset, 500, true).unwrap();
            let got = reader.read(offset, 500, true, false, new).unwrap();
            assert_eq!(region(&got), region(&want), "offset {offset}");
        }
    }
    // Told the old start, a reader that lists the directory now, or one whose listing
    // names files gone since: out of range by the files.
    for reader in [&reader(&log), &unopened] {
        assert!(matches!(
            reader.read(1, u32::MAX, true, false, old),
            Err(ReadError::OffsetOutOfRange { log_start, .. }) if log_start == cut
        ));
    }
    let want = log.read(cut, 500, true).unwrap();
    let got = unopened.read(cut, 500, true, false, old).unwrap();
    assert_eq!(region(&got), region(&want));
}

/// A new owner cuts what lay past the old owner's published end and writes other bytes
/// there: after `forget`, the reader returns the new bytes.
#[test]
fn forget_after_a_new_owner_rewrote_past_the_old_bound() {
    let d = tempfile::tempdir().unwrap();
    let a = mgr(d.path(), Sharing::Shared, 1);
    let old = open(&a, small(), 1);
    for i in 0..6 {
        old.append(batch(1, &format!("old{i}")), AppendOrigin::Client, NOW)
            .unwrap();
    }
    let dir = old.dir();
    let path = log_path(&old, 0);
    let r = ReplicaReader::new(tp(), dir.clone());
    // The old owner published up to 3; the reader reads all of it, and learns positions.
    let p = Published {
        log_start: 0,
        high_watermark: 3,
        last_stable: 3,
    };
    for offset in 0..3 {
        r.read(offset, u32::MAX, true, false, p).unwrap();
    }
    a.release_log(&tp()).unwrap();
    drop(old);
    // The new owner's open cuts at the published end (as a takeover does at its recovery
    // point), then appends other records.
    let bytes = std::fs::read(&path).unwrap();
    let cut: usize = parse_batches(&bytes, None).unwrap()[..3]
        .iter()
        .map(|b| b.header.total_len())
        .sum();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(cut as u64)
        .unwrap();
    let b = mgr(d.path(), Sharing::Shared, 2);
    let new = open(&b, small(), 2);
    assert_eq!(new.log_end_offset(), 3);
    for i in 0..4 {
        new.append(batch(2, &format!("new{i}")), AppendOrigin::Client, NOW)
            .unwrap();
    }
    r.forget();
    let p = Published {
        log_start: 0,
        high_watermark: 11,
        last_stable: 11,
    };
    let got = r.read(3, u32::MAX, true, false, p).unwrap();
    let (pos, _, got) = region(&got).unwrap();
    assert_eq!(pos, cut as u64);
    let file = std::fs::read(&path).unwrap();
    assert_eq!(got, file[cut..]);
    assert_eq!(offsets(&got), vec![(3, 4), (5, 6), (7, 8), (9, 10)]);
    assert!(String::from_utf8_lossy(&got).contains("new0-0"));
    // Below the old bound, the same bytes as before.
    let got = r.read(0, u32::MAX, true, false, p).unwrap();
    assert_eq!(region(&got).unwrap().2, file);
}

/// A header that does not parse below the bound is an error (the cached state dropped),
/// never a panic; once the file is right again, reads work.
#[test]
fn garbage_below_the_bound_is_an_error_until_fixed() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path(), Sharing::Exclusive, 1);
    let log = open(&m, small(), 1);
    for i in 0..20 {
        log.append(batch(2, &format!("g{i}")), AppendOrigin::Client, NOW)
            .unwrap();
    }
    log.roll(NOW).unwrap();
    log.append(batch(2, "last"), AppendOrigin::Client, NOW)
        .unwrap();
    let p = published(&log);
    let r = reader(&log);
    // Positions learned everywhere.
    for offset in 0..p.high_watermark {
        r.read(offset, 200, true, false, p).unwrap();
    }
    for base in bases(&log) {
        let path = log_path(&log, base);
        let bytes = std::fs::read(&path).unwrap();
        let found = parse_batches(&bytes, None).unwrap();
        let victim = &found[found.len() / 2];
        let at = victim.position as u64;
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        // The magic byte and what follows.
        file.write_all_at(&[0x7F; 8], at + 16).unwrap();
        for fresh in [false, true] {
            let r2 = reader(&log);
            let rd = if fresh { &r2 } else { &r };
            let e = rd
                .read(victim.header.base_offset, u32::MAX, true, false, p)
                .unwrap_err();
            assert!(
                matches!(&e, ReadError::Io { source, .. } if source.kind() == std::io::ErrorKind::InvalidData),
                "{e:?}"
            );
            // From before it, scanning over it (a fresh reader), or extending over it.
            let before = found[0].header.base_offset;
            let e = rd.read(before, u32::MAX, true, false, p).unwrap_err();
            assert!(matches!(e, ReadError::Io { .. }), "{e:?}");
        }
        file.write_all_at(&bytes[at as usize + 16..at as usize + 24], at + 16)
            .unwrap();
        for offset in 0..p.high_watermark {
            let want = log.read(offset, 300, true).unwrap();
            let got = r.read(offset, 300, true, false, p).unwrap();
            assert_eq!(region(&got), region(&want), "offset {offset}");
        }
    }
}

#[test]
fn a_reader_is_send_and_sync() {
    fn shared<T: Send + Sync>() {}
    shared::<ReplicaReader>();
}

/// No input panics: odd published offsets, and a directory of random bytes.
#[test]
fn no_panic_on_any_input() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("r-0");
    std::fs::create_dir(&dir).unwrap();
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let r = ReplicaReader::new(tp(), dir.clone());
    for round in 0..200 {
        let len = (next() % 400) as usize;
        let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        std::fs::write(dir.join("00000000000000000000.log"), &bytes).unwrap();
        std::fs::write(dir.join("00000000000000000000.txnindex"), &bytes[..len / 2]).unwrap();
        if round % 3 == 0 {
            std::fs::write(dir.join("00000000000000000005.log"), &bytes[len / 3..]).unwrap();
            std::fs::write(dir.join("00000000000000000005.index"), &bytes[..len / 4]).unwrap();
        }
        r.forget();
        for _ in 0..10 {
            let pick = |v: u64| match v % 5 {
                0 => -1,
                1 => i64::MAX,
                2 => i64::MIN,
                _ => (v % 20) as i64,
            };
            let p = Published {
                log_start: pick(next()),
                high_watermark: pick(next()),
                last_stable: pick(next()),
            };
            let _ = r.read(
                pick(next()),
                next() as u32,
                next() % 2 == 0,
                next() % 2 == 0,
                p,
            );
        }
    }
}

/// The `.index` of a sealed segment is a hint only: entries that point inside batches, past
/// the offset or past the file are checked and passed over, and the reads still equal the
/// log's own.
#[test]
fn offset_index_entries_are_hints_only() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path(), Sharing::Exclusive, 1);
    let log = mixed_log(&m);
    let p = published(&log);
    let seg_bases = bases(&log);
    for (k, &base) in seg_bases[..seg_bases.len() - 1].iter().enumerate() {
        let path = log.dir().join(sluice_format::segment_file_name(
            base,
            sluice_format::SegmentFileKind::Index,
        ));
        let found = parse_batches(&std::fs::read(log_path(&log, base)).unwrap(), None).unwrap();
        let last = found.last().unwrap().position as i32;
        // Increasing relative offsets, positions that are not batch starts (or, for every
        // other segment, the start of its last batch, past most offsets they are asked for).
        let entries: Vec<u8> = (1..6)
            .flat_map(|i| {
                sluice_format::OffsetIndexEntry {
                    relative_offset: i,
                    position: if k % 2 == 0 { i * 7 + 1 } else { last },
                }
                .encode()
            })
            .collect();
        std::fs::write(&path, entries).unwrap();
    }
    let r = reader(&log);
    for committed in [false, true] {
        let iso = if committed {
            Isolation::ReadCommitted
        } else {
            Isolation::ReadUncommitted
        };
        for offset in (p.log_start..p.high_watermark).rev() {
            let want = log.read_isolated(offset, 400, true, iso).unwrap();
            let got = r.read(offset, 400, true, committed, p).unwrap();
            assert_eq!(region(&got), region(&want), "offset {offset}");
            assert_eq!(got.aborted, want.aborted, "offset {offset}");
        }
    }
}

/// An ABORT marker written to a segment rolled after the reader listed the directory still
/// lists its transaction for a read_committed read of the older segment.
#[test]
fn an_abort_in_a_segment_rolled_since_the_listing_is_found() {
    let d = tempfile::tempdir().unwrap();
    let m = mgr(d.path(), Sharing::Exclusive, 1);
    let log = open(&m, cfg(), 1);
    log.append(batch(1, "a"), AppendOrigin::Client, NOW)
        .unwrap();
    let r = reader(&log);
    r.read(0, u32::MAX, true, true, published(&log)).unwrap();
    log.append(txn(5, 0, 2), AppendOrigin::Client, NOW).unwrap();
    log.append(batch(1, "b"), AppendOrigin::Client, NOW)
        .unwrap();
    log.roll(NOW).unwrap();
    log.append(batch(1, "c"), AppendOrigin::Client, NOW)
        .unwrap();
    log.append_marker(5, 0, 0, ControlType::Abort, NOW).unwrap();
    let p = published(&log);
    assert_eq!(p.last_stable, p.high_watermark);
    for max in [1, u32::MAX] {
        let want = log
            .read_isolated(1, max, true, Isolation::ReadCommitted)
            .unwrap();
        assert_eq!(
            want.aborted,
            Some(vec![AbortedTxn {
                producer_id: 5,
                first_offset: 1
            }])
        );
        let got = r.read(1, max, true, true, p).unwrap();
        assert_eq!(region(&got), region(&want), "max {max}");
        assert_eq!(got.aborted, want.aborted, "max {max}");
        r.forget();
        r.read(
            0,
            u32::MAX,
            true,
            true,
            Published {
                high_watermark: 1,
                last_stable: 1,
                ..p
            },
        )
        .unwrap();
    }
}

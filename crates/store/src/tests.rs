#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use proptest::prelude::*;
use sluice_format::batch::BatchTimestampType;
use sluice_format::index::{decode_offset_index, decode_time_index};
use sluice_format::{parse_batches, validate_batch, BatchBuilder, OffsetIndexEntry};

use crate::*;

pub(crate) const NOW: i64 = 1_700_000_000_000;

pub(crate) fn cfg() -> LogConfig {
    LogConfig {
        segment_bytes: 1024 * 1024,
        segment_ms: 7 * 24 * 3600 * 1000,
        segment_jitter_ms: 0,
        retention_ms: -1,
        retention_bytes: -1,
        index_interval_bytes: 4096,
        segment_index_bytes: 10 * 1024 * 1024,
        max_message_bytes: 1024 * 1024,
        timestamp_type: TimestampType::CreateTime,
        flush_messages: i64::MAX,
        flush_ms: i64::MAX,
        cleanup: Default::default(),
    }
}

fn small_cfg() -> LogConfig {
    LogConfig {
        segment_bytes: 1000,
        index_interval_bytes: 300,
        ..cfg()
    }
}

fn meta() -> MetaProperties {
    MetaProperties {
        node_id: 1,
        cluster_id: "test-cluster-id-00000A".into(),
    }
}

fn tp(p: i32) -> TopicPartition {
    TopicPartition {
        topic: "topic".into(),
        partition: p,
    }
}

fn topic_id() -> uuid::Uuid {
    uuid::Uuid::from_u128(0x1234_5678_9abc_def0_1122_3344_5566_7788)
}

fn batch(n: usize, ts: i64, tag: &str) -> Bytes {
    let mut b = BatchBuilder::new();
    for i in 0..n {
        b = b.record(
            ts + i as i64,
            Some(b"key"),
            Some(format!("{tag}-{i}").as_bytes()),
        );
    }
    Bytes::from(b.build())
}

fn pbatch(pid: i64, epoch: i16, seq: i32, n: usize) -> Bytes {
    let mut b = BatchBuilder::new().producer(pid, epoch, seq);
    for i in 0..n {
        b = b.record(NOW + i as i64, None, Some(b"v"));
    }
    Bytes::from(b.build())
}

fn open_mgr(dir: &Path) -> LogManager {
    LogManager::open(vec![dir.to_path_buf()], meta()).unwrap()
}

fn open(m: &LogManager, c: LogConfig) -> Arc<Log> {
    m.open_log(&tp(0), topic_id(), c, 3).unwrap()
}

/// All (base offset, last offset) of batches readable from `from`, reading repeatedly.
fn read_all(log: &Log, from: i64) -> Vec<(i64, i64)> {
    let mut out = Vec::new();
    let mut off = from;
    loop {
        let r = log.read(off, 1000, true).unwrap();
        let Some(slice) = r.slice else { break };
        let bytes = slice.read_bytes().unwrap();
        let batches = parse_batches(&bytes, None).unwrap();
        assert!(!batches.is_empty());
        for b in batches {
            out.push((b.header.base_offset, b.header.last_offset()));
            off = b.header.next_offset();
        }
    }
    out
}

#[test]
fn append_and_read() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, cfg());
    assert_eq!(log.log_end_offset(), 0);
    let r = log
        .append(batch(3, NOW, "a"), AppendOrigin::Client, NOW)
        .unwrap();
    assert_eq!(
        (
            r.base_offset,
            r.last_offset,
            r.duplicate,
            r.log_append_time_ms
        ),
        (0, 2, false, -1)
    );
    let r = log
        .append(batch(2, NOW, "b"), AppendOrigin::Client, NOW)
        .unwrap();
    assert_eq!((r.base_offset, r.last_offset), (3, 4));
    assert_eq!(log.log_end_offset(), 5);
    assert_eq!(log.high_watermark(), 5);

    for off in 0..5 {
        let res = log.read(off, 1 << 20, false).unwrap();
        let bytes = res.slice.unwrap().read_bytes().unwrap();
        let batches = parse_batches(&bytes, None).unwrap();
        assert!(batches[0].header.base_offset <= off && off <= batches[0].header.last_offset());
        assert_eq!(batches[0].header.partition_leader_epoch, 3);
    }
    assert!(log.read(5, 100, true).unwrap().slice.is_none());
    assert!(matches!(
        log.read(6, 100, true),
        Err(ReadError::OffsetOutOfRange { .. })
    ));
    assert!(matches!(
        log.read(-1, 100, true),
        Err(ReadError::OffsetOutOfRange { .. })
    ));
    // max_bytes smaller than the first batch.
    assert!(log.read(0, 10, false).unwrap().slice.is_none());
    let one = log.read(0, 10, true).unwrap().slice.unwrap();
    assert_eq!(
        parse_batches(&one.read_bytes().unwrap(), None)
            .unwrap()
            .len(),
        1
    );
    // Exactly one batch fits.
    let first_len = one.len;
    let s = log.read(0, first_len + 5, false).unwrap().slice.unwrap();
    assert_eq!(s.len, first_len);
    assert_eq!(log.max_timestamp(), Some((NOW + 2, 2)));
    let ep = d.path().join("topic-0/leader-epoch-checkpoint");
    assert_eq!(std::fs::read_to_string(ep).unwrap(), "0\n1\n3 0\n");
    let md = std::fs::read_to_string(d.path().join("topic-0/partition.metadata")).unwrap();
    assert!(md.starts_with("version: 0\ntopic_id: "));
}

/// A read fills `max_bytes` with as many whole batches as fit, also when every batch is
/// larger than the index interval (so the index has an entry at every batch start).
#[test]
fn read_fills_max_bytes_with_whole_batches() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(
        &m,
        LogConfig {
            segment_bytes: 64 * 1024 * 1024,
            index_interval_bytes: 100,
            ..cfg()
        },
    );
    let mut lens = Vec::new();
    for i in 0..40 {
        let b = batch(20 + i % 7, NOW, &format!("batch-{i}"));
        lens.push(b.len() as u32);
        log.append(b, AppendOrigin::Client, NOW).unwrap();
    }
    for max in [lens[0] + 1, 3 * lens[0] + 10, 1000, 5000, 12_345] {
        let mut off = 0;
        let mut first = 0;
        while first < lens.len() {
            let s = log.read(off, max, true).unwrap().slice.unwrap();
            let got = parse_batches(&s.read_bytes().unwrap(), None).unwrap();
            let want = lens[first..]
                .iter()
                .scan(0u32, |sum, l| {
                    *sum += l;
                    Some(*sum)
                })
                .take_while(|sum| *sum <= max)
                .count()
                .max(1);
            assert_eq!(got.len(), want, "read at offset {off} with max {max}");
            off = got.last().unwrap().header.last_offset() + 1;
            first += got.len();
        }
    }
}

#[test]
fn rejects_bad_batches() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(
        &m,
        LogConfig {
            max_message_bytes: 200,
            ..cfg()
        },
    );
    let mut b = batch(1, NOW, "x").to_vec();
    let last = b.len() - 1;
    b[last] ^= 1;
    assert!(matches!(
        log.append(Bytes::from(b), AppendOrigin::Client, NOW),
        Err(AppendError::Corrupt { .. })
    ));
    let mut b = batch(1, NOW, "x").to_vec();
    b[16] = 1;
    assert!(matches!(
        log.append(Bytes::from(b), AppendOrigin::Client, NOW),
        Err(AppendError::Invalid { .. })
    ));
    let b = batch(1, NOW, "x");
    assert!(matches!(
        log.append(b.slice(..b.len() - 3), AppendOrigin::Client, NOW),
        Err(AppendError::Corrupt { .. })
    ));
    assert!(matches!(
        log.append(batch(20, NOW, "big"), AppendOrigin::Client, NOW),
        Err(AppendError::TooLarge { .. })
    ));
    assert!(matches!(
        log.append(Bytes::new(), AppendOrigin::Client, NOW),
        Err(AppendError::Invalid { .. })
    ));
    assert!(matches!(
        log.append(
            Bytes::from(BatchBuilder::new().build()),
            AppendOrigin::Client,
            NOW
        ),
        Err(AppendError::Invalid { .. })
    ));
    assert!(log
        .append(Bytes::from(vec![0xffu8; 100]), AppendOrigin::Client, NOW)
        .is_err());
    assert_eq!(log.log_end_offset(), 0);
}

#[test]
fn multi_batch_append_is_one_unit() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, cfg());
    let mut v = batch(2, NOW, "a").to_vec();
    v.extend_from_slice(&batch(3, NOW, "b"));
    let r = log
        .append(Bytes::from(v), AppendOrigin::Client, NOW)
        .unwrap();
    assert_eq!((r.base_offset, r.last_offset), (0, 4));
    assert_eq!(read_all(&log, 0), vec![(0, 1), (2, 4)]);
    assert_eq!(read_all(&log, 3), vec![(2, 4)]);
}

#[test]
fn log_append_time() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(
        &m,
        LogConfig {
            timestamp_type: TimestampType::LogAppendTime,
            ..cfg()
        },
    );
    let r = log
        .append(batch(2, 5, "a"), AppendOrigin::Client, NOW)
        .unwrap();
    assert_eq!(r.log_append_time_ms, NOW);
    let bytes = log
        .read(0, 1000, true)
        .unwrap()
        .slice
        .unwrap()
        .read_bytes()
        .unwrap();
    let h = validate_batch(&bytes).unwrap();
    assert_eq!(h.max_timestamp, NOW);
    assert_eq!(h.timestamp_type(), BatchTimestampType::LogAppendTime);
    assert_eq!(log.offset_for_timestamp(NOW).unwrap(), Some((0, NOW)));
}

/// `segment.jitter.ms`, as Kafka's: a segment rolls on time a share of the jitter before
/// `segment.ms` (a different share per partition), never after it; without jitter, exactly
/// at `segment.ms`.
#[test]
fn time_rolls_come_a_share_of_the_jitter_early() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let mut next = 0;
    // Of 40 new partitions, how many a second append `wait` ms after the first rolled.
    let mut rolled_after = |jitter_ms: i64, wait: i64| -> usize {
        let c = LogConfig {
            segment_ms: 10_000,
            segment_jitter_ms: jitter_ms,
            ..cfg()
        };
        (0..40)
            .filter(|_| {
                next += 1;
                let log = m.open_log(&tp(next), topic_id(), c.clone(), 3).unwrap();
                log.append(batch(1, NOW, "a"), AppendOrigin::Client, NOW)
                    .unwrap();
                log.append(batch(1, NOW + wait, "b"), AppendOrigin::Client, NOW + wait)
                    .unwrap();
                log.segment_count() == 2
            })
            .count()
    };
    assert_eq!(rolled_after(0, 9_000), 0);
    assert_eq!(rolled_after(0, 10_001), 40);
    let early = rolled_after(10_000, 5_000);
    assert!((5..=35).contains(&early), "{early} of 40 rolled halfway");
    assert_eq!(rolled_after(10_000, 10_001), 40);
}

#[test]
fn offset_for_timestamp_and_rolls() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, small_cfg());
    for i in 0..100i64 {
        log.append(batch(2, 1000 + i * 10, "t"), AppendOrigin::Client, NOW)
            .unwrap();
    }
    assert!(log.segment_count() > 5);
    // Batch i holds offsets 2i, 2i+1 with timestamps 1000+10i, 1001+10i.
    assert_eq!(log.offset_for_timestamp(0).unwrap(), Some((0, 1000)));
    assert_eq!(log.offset_for_timestamp(1001).unwrap(), Some((1, 1001)));
    assert_eq!(log.offset_for_timestamp(1002).unwrap(), Some((2, 1010)));
    assert_eq!(log.offset_for_timestamp(1500).unwrap(), Some((100, 1500)));
    assert_eq!(log.offset_for_timestamp(1991).unwrap(), Some((199, 1991)));
    assert_eq!(log.offset_for_timestamp(1992).unwrap(), None);
    assert_eq!(log.max_timestamp(), Some((1991, 199)));
    assert_eq!(read_all(&log, 0).len(), 100);
    for off in 0..200 {
        let r = read_all(&log, off);
        assert_eq!(r[0].0, off - off % 2);
    }
}

/// Compare every index entry to the batch it points at, like kafka-dump-log --verify-index-only.
fn verify_indexes(dir: &Path) {
    let mut n_index = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_str().unwrap().to_string();
        let Some(stem) = name.strip_suffix(".index") else {
            continue;
        };
        let base: i64 = stem.parse().unwrap();
        let log = std::fs::read(dir.join(format!("{stem}.log"))).unwrap();
        let batches = parse_batches(&log, None).unwrap();
        let oi = std::fs::read(&p).unwrap();
        assert_eq!(oi.len() % 8, 0);
        for e in decode_offset_index(&oi) {
            let b = batches
                .iter()
                .find(|b| b.position == e.position as usize)
                .expect("entry at batch start");
            assert_eq!(b.header.last_offset(), base + i64::from(e.relative_offset));
            n_index += 1;
        }
        let ti = std::fs::read(dir.join(format!("{stem}.timeindex"))).unwrap();
        assert_eq!(ti.len() % 12, 0);
        let mut prev = -1;
        for e in decode_time_index(&ti) {
            let b = batches
                .iter()
                .find(|b| b.header.last_offset() == base + i64::from(e.relative_offset))
                .unwrap();
            assert_eq!(b.header.max_timestamp, e.timestamp);
            assert!(e.timestamp > prev);
            prev = e.timestamp;
        }
    }
    assert!(n_index > 0);
}

#[test]
fn index_files_match_kafka_rules_and_survive_clean_restart() {
    let d = tempfile::tempdir().unwrap();
    {
        let m = open_mgr(d.path());
        let log = open(&m, small_cfg());
        for i in 0..60i64 {
            log.append(
                batch(1 + (i % 3) as usize, NOW + i, "x"),
                AppendOrigin::Client,
                NOW,
            )
            .unwrap();
        }
        m.shutdown().unwrap();
    }
    let pdir = d.path().join("topic-0");
    verify_indexes(&pdir);
    assert!(d.path().join(".kafka_cleanshutdown").exists());
    let rp = std::fs::read_to_string(d.path().join("recovery-point-offset-checkpoint")).unwrap();
    let m = open_mgr(d.path());
    assert!(!d.path().join(".kafka_cleanshutdown").exists());
    let log = open(&m, small_cfg());
    let leo = log.log_end_offset();
    assert_eq!(rp, format!("0\n1\ntopic 0 {leo}\n"));
    assert_eq!(
        std::fs::read_to_string(d.path().join("log-start-offset-checkpoint")).unwrap(),
        "0\n1\ntopic 0 0\n"
    );
    let all = read_all(&log, 0);
    assert_eq!(all.len(), 60);
    assert_eq!(all.last().unwrap().1 + 1, leo);
    // Continue appending after reopen; indexes still follow the rules.
    for i in 0..30i64 {
        log.append(batch(2, NOW + 100 + i, "y"), AppendOrigin::Client, NOW)
            .unwrap();
    }
    log.roll(NOW).unwrap();
    verify_indexes(&pdir);
    assert_eq!(read_all(&log, 0).len(), 90);
}

#[test]
fn index_lookup_matches_linear_scan() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(
        &m,
        LogConfig {
            index_interval_bytes: 100,
            ..cfg()
        },
    );
    let mut expected = Vec::new();
    for i in 0..200 {
        let r = log
            .append(batch(1 + i % 4, NOW, "z"), AppendOrigin::Client, NOW)
            .unwrap();
        expected.push((r.base_offset, r.last_offset));
    }
    for off in 0..log.log_end_offset() {
        let r = log.read(off, 1, true).unwrap().slice.unwrap();
        let h = validate_batch(&r.read_bytes().unwrap()).unwrap();
        let want = expected
            .iter()
            .find(|(b, l)| *b <= off && off <= *l)
            .unwrap();
        assert_eq!((h.base_offset, h.last_offset()), *want);
    }
}

fn unclean_reopen(d: &Path) -> (LogManager, Arc<Log>) {
    let m = open_mgr(d);
    let log = open(&m, small_cfg());
    (m, log)
}

#[test]
fn torn_tail_and_garbage_are_truncated() {
    for garbage in [
        vec![0u8; 30],
        vec![0xAB; 500],
        batch(3, NOW, "torn")[..70].to_vec(),
    ] {
        let d = tempfile::tempdir().unwrap();
        let leo;
        {
            let m = open_mgr(d.path());
            let log = open(&m, small_cfg());
            for i in 0..40i64 {
                log.append(batch(2, NOW + i, "x"), AppendOrigin::Client, NOW)
                    .unwrap();
            }
            leo = log.log_end_offset();
            // Crash: no shutdown, no checkpoint.
        }
        let pdir = d.path().join("topic-0");
        let mut logs: Vec<_> = std::fs::read_dir(&pdir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .collect();
        logs.sort();
        let last = logs.last().unwrap();
        let mut content = std::fs::read(last).unwrap();
        content.extend_from_slice(&garbage);
        std::fs::write(last, content).unwrap();
        let (_m, log) = unclean_reopen(d.path());
        assert_eq!(log.log_end_offset(), leo);
        assert_eq!(read_all(&log, 0).len(), 40);
        let r = log
            .append(batch(1, NOW, "after"), AppendOrigin::Client, NOW)
            .unwrap();
        assert_eq!(r.base_offset, leo);
        assert_eq!(read_all(&log, 0).len(), 41);
    }
}

#[test]
fn corruption_in_middle_drops_later_segments() {
    let d = tempfile::tempdir().unwrap();
    {
        let m = open_mgr(d.path());
        let log = open(&m, small_cfg());
        for i in 0..40i64 {
            log.append(batch(2, NOW + i, "x"), AppendOrigin::Client, NOW)
                .unwrap();
        }
        assert!(log.segment_count() >= 4);
    }
    let pdir = d.path().join("topic-0");
    let mut logs: Vec<_> = std::fs::read_dir(&pdir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    // Flip a byte in the body of the second batch of the second segment.
    let victim = &logs[1];
    let mut content = std::fs::read(victim).unwrap();
    let batches = parse_batches(&content, None).unwrap();
    let pos = batches[1].position + 70;
    content[pos] ^= 0xff;
    std::fs::write(victim, &content).unwrap();
    let base: i64 = victim
        .file_stem()
        .unwrap()
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let (_m, log) = unclean_reopen(d.path());
    assert_eq!(log.log_end_offset(), batches[1].header.base_offset);
    assert_eq!(log.segment_count(), 2);
    let all = read_all(&log, 0);
    assert_eq!(all.last().unwrap().1 + 1, batches[1].header.base_offset);
    assert!(all.iter().any(|b| b.0 == base));
    assert!(!logs[2].exists());
}

/// Segments after a corruption that recovery cannot remove must not come back at the next
/// open (past a log end that moved on meanwhile): the open fails instead, with the file named;
/// once the file can go, the open cuts it as before. The file is made immutable
/// (`chattr +i`, which stops even root's unlink and rename); skipped where that is not
/// possible.
#[test]
fn later_segments_that_cannot_be_removed_stop_the_open() {
    let d = tempfile::tempdir().unwrap();
    {
        let m = open_mgr(d.path());
        let log = open(&m, small_cfg());
        for i in 0..40i64 {
            log.append(batch(2, NOW + i, "x"), AppendOrigin::Client, NOW)
                .unwrap();
        }
    }
    let pdir = d.path().join("topic-0");
    let mut logs: Vec<_> = std::fs::read_dir(&pdir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    let mut content = std::fs::read(&logs[0]).unwrap();
    let pos = parse_batches(&content, None).unwrap()[1].position + 70;
    content[pos] ^= 0xff;
    std::fs::write(&logs[0], &content).unwrap();
    let chattr = |flag: &str| {
        std::process::Command::new("chattr")
            .arg(flag)
            .arg(&logs[2])
            .status()
            .is_ok_and(|s| s.success())
    };
    if !chattr("+i") {
        eprintln!("skipped: chattr +i is not possible here");
        return;
    }
    let refused = LogManager::open(vec![d.path().to_path_buf()], meta())
        .and_then(|m| m.open_log(&tp(0), topic_id(), small_cfg(), 3).map(|_| ()));
    assert!(chattr("-i"));
    let err = refused.expect_err("opened with a later segment it could not remove");
    assert!(err.to_string().contains("the log is not opened"), "{err}");
    assert!(logs[2].exists());
    let (_m, log) = unclean_reopen(d.path());
    assert_eq!(log.segment_count(), 1);
    assert!(!logs[2].exists());
}

#[test]
fn recovery_only_after_recovery_point() {
    let d = tempfile::tempdir().unwrap();
    {
        let m = open_mgr(d.path());
        let log = open(&m, small_cfg());
        for i in 0..40i64 {
            log.append(batch(2, NOW + i, "x"), AppendOrigin::Client, NOW)
                .unwrap();
        }
        log.flush().unwrap();
        m.checkpoint().unwrap();
        log.append(batch(2, NOW, "late"), AppendOrigin::Client, NOW)
            .unwrap();
    }
    // Corrupt the first segment (below the recovery point) inside its first batch's records,
    // bytes the CRC covers: a validation would cut the log there. It must not be re-validated.
    let first = d.path().join("topic-0/00000000000000000000.log");
    let mut c = std::fs::read(&first).unwrap();
    let len = parse_batches(&c, None).unwrap()[0].header.total_len();
    c[sluice_format::HEADER_LEN + 5] ^= 0xff;
    assert!(
        validate_batch(&c[..len]).is_err(),
        "the flipped byte is under the CRC"
    );
    std::fs::write(&first, &c).unwrap();
    let (_m, log) = unclean_reopen(d.path());
    assert_eq!(log.log_end_offset(), 82);
}

/// `sync_appended` (acks=all under flush.messages) makes the data durable but leaves the
/// recovery point at the active segment's base, so a crash that loses the active segment's
/// unsynced index entries is repaired by recovery; flush.messages counts from the synced
/// offset, not from the recovery point.
#[test]
fn sync_appended_leaves_the_active_index_to_recovery() {
    let d = tempfile::tempdir().unwrap();
    let cfg3 = LogConfig {
        flush_messages: 3,
        ..small_cfg()
    };
    let (leo, active_base) = {
        let m = open_mgr(d.path());
        let log = open(&m, cfg3.clone());
        for i in 0..40i64 {
            log.append(batch(2, NOW + i, "x"), AppendOrigin::Client, NOW)
                .unwrap();
        }
        let rp = log.sync_appended().unwrap();
        let leo = log.log_end_offset();
        assert_eq!(log.synced_offset(), leo);
        assert!(
            rp > 0 && rp < leo,
            "recovery point {rp} at the active base, below {leo}"
        );
        assert_eq!(log.recovery_point_offset(), rp);
        // Due again after three more records since the sync (not at once: the recovery point
        // is behind, the synced offset is not).
        assert!(
            !log.append(batch(2, NOW, "y"), AppendOrigin::Client, NOW)
                .unwrap()
                .flush_due
        );
        assert!(
            log.append(batch(1, NOW, "y"), AppendOrigin::Client, NOW)
                .unwrap()
                .flush_due
        );
        log.sync_appended().unwrap();
        m.checkpoint().unwrap();
        (log.log_end_offset(), rp)
    };
    // Crash: the active segment's index entries never reached the disk.
    let pdir = d.path().join("topic-0");
    let stem = format!("{active_base:020}");
    std::fs::write(pdir.join(format!("{stem}.index")), b"").unwrap();
    std::fs::write(pdir.join(format!("{stem}.timeindex")), b"").unwrap();
    let (_m, log) = unclean_reopen(d.path());
    assert_eq!(log.log_end_offset(), leo);
    assert_eq!(read_all(&log, 0).len(), 42);
    verify_indexes(&pdir);
    let idx = std::fs::read(pdir.join(format!("{stem}.index"))).unwrap();
    assert!(
        !idx.is_empty(),
        "the active segment's offset index was rebuilt"
    );
    // A full flush moves the recovery point to the end.
    log.append(batch(1, NOW, "z"), AppendOrigin::Client, NOW)
        .unwrap();
    assert_eq!(log.flush().unwrap(), leo + 1);
}

/// With no flush policy, `flush_sealed` (the broker runs it after rolls) moves the recovery
/// point to the active segment's base, so a restart after a crash validates the active
/// segment only: damage inside a sealed segment below the recorded point is not rescanned
/// (it would be, and cut there, without the flush).
#[test]
fn flush_sealed_bounds_recovery_to_the_active_segment() {
    for flushed in [true, false] {
        let d = tempfile::tempdir().unwrap();
        let (leo, active_base) = {
            let m = open_mgr(d.path());
            let log = open(&m, small_cfg());
            for i in 0..40i64 {
                log.append(batch(2, NOW + i, "x"), AppendOrigin::Client, NOW)
                    .unwrap();
            }
            let active_base = log.shared.read().segments.last().unwrap().base_offset;
            assert!(active_base > 0, "the appends rolled");
            assert!(log.has_unflushed_sealed());
            if flushed {
                assert_eq!(log.flush_sealed().unwrap(), active_base);
                assert!(!log.has_unflushed_sealed());
                assert_eq!(log.recovery_point_offset(), active_base);
                // Nothing of the active segment is claimed durable.
                assert_eq!(log.synced_offset(), active_base);
            } else {
                assert_eq!(log.recovery_point_offset(), 0);
            }
            m.checkpoint().unwrap();
            (log.log_end_offset(), active_base)
        };
        // Crash, then damage the first segment's second batch.
        let first = d.path().join("topic-0").join(format!("{:020}.log", 0));
        let mut c = std::fs::read(&first).unwrap();
        let first_len = 12 + u32::from_be_bytes(c[8..12].try_into().unwrap()) as usize;
        c[first_len + 70] ^= 0xff;
        std::fs::write(&first, &c).unwrap();
        let (_m, log) = unclean_reopen(d.path());
        if flushed {
            assert_eq!(
                log.log_end_offset(),
                leo,
                "below {active_base}: not rescanned"
            );
        } else {
            assert_eq!(log.log_end_offset(), 2, "rescanned and cut at the damage");
        }
    }
}

#[test]
fn active_index_entries_are_written_in_groups() {
    let d = tempfile::tempdir().unwrap();
    // An index entry for every batch (each is larger than the interval).
    let c = LogConfig {
        index_interval_bytes: 1,
        ..cfg()
    };
    let pdir = d.path().join("topic-0");
    let index_len = || {
        std::fs::metadata(pdir.join("00000000000000000000.index"))
            .unwrap()
            .len() as usize
    };
    let append = |log: &Log, i: i64| {
        log.append(batch(2, NOW + i, "x"), AppendOrigin::Client, NOW)
            .unwrap();
    };
    let leo = {
        let m = open_mgr(d.path());
        let log = open(&m, c.clone());
        // The first batch gets no entry (nothing before it); then one per batch.
        for i in 0..40 {
            append(&log, i);
        }
        assert_eq!(index_len(), 0, "entries held back in memory");
        assert_eq!(read_all(&log, 0).len(), 40);
        // A group is written once the held-back entries of both indexes reach the size.
        for i in 40..(2 * crate::segment::INDEX_WRITE_ENTRIES as i64) {
            append(&log, i);
        }
        let written = index_len() / 8;
        assert!(written > 0 && written < 2 * crate::segment::INDEX_WRITE_ENTRIES);
        // A full flush writes the rest.
        for i in 0..5 {
            append(&log, 1000 + i);
        }
        log.flush().unwrap();
        let n = 2 * crate::segment::INDEX_WRITE_ENTRIES + 5 - 1;
        assert_eq!(index_len() / 8, n);
        verify_indexes(&pdir);
        // More held back, then a crash: recovery rebuilds the active segment's indexes.
        for i in 0..7 {
            append(&log, 2000 + i);
        }
        assert_eq!(index_len() / 8, n);
        m.checkpoint().unwrap();
        log.log_end_offset()
    };
    let (_m, log) = {
        let m = open_mgr(d.path());
        let log = open(&m, c);
        (m, log)
    };
    assert_eq!(log.log_end_offset(), leo);
    assert_eq!(read_all(&log, 0).len() as i64, leo / 2);
    assert_eq!(index_len() / 8, (leo / 2 - 1) as usize);
    verify_indexes(&pdir);
}

#[test]
fn a_move_takes_the_held_back_index_entries() {
    let d1 = tempfile::tempdir().unwrap();
    let d2 = tempfile::tempdir().unwrap();
    let dirs = vec![d1.path().to_path_buf(), d2.path().to_path_buf()];
    let c = LogConfig {
        index_interval_bytes: 1,
        ..cfg()
    };
    let m = LogManager::open(dirs.clone(), meta()).unwrap();
    let log = open(&m, c.clone());
    // Some entries written in a group, some held back.
    for i in 0..100i64 {
        log.append(batch(2, NOW + i, "m"), AppendOrigin::Client, NOW)
            .unwrap();
    }
    let on_disk = std::fs::metadata(d1.path().join("topic-0/00000000000000000000.index"))
        .unwrap()
        .len();
    assert!(on_disk > 0 && on_disk < 99 * 8, "{on_disk}");
    m.move_log(&tp(0), 1).unwrap();
    for i in 100..110i64 {
        log.append(batch(2, NOW + i, "m"), AppendOrigin::Client, NOW)
            .unwrap();
    }
    m.shutdown().unwrap();
    let pdir = d2.path().join("topic-0");
    let index = std::fs::read(pdir.join("00000000000000000000.index")).unwrap();
    assert_eq!(index.len(), 109 * 8);
    verify_indexes(&pdir);
}

/// A manager of the log dirs `roots`, in order.
fn open_roots(roots: &[tempfile::TempDir]) -> Result<LogManager, StoreError> {
    LogManager::open(
        roots.iter().map(|d| d.path().to_path_buf()).collect(),
        meta(),
    )
}

/// Two log dirs, a log in the first with `batches` appended, and a move of it to the second
/// stopped at `at` as if the process died there; then `more` batches appended to wherever the
/// log is and the manager dropped without a shutdown (a crash, page cache kept).
fn crash_a_move(at: crate::relocate::crash::At, batches: i64, more: i64) -> [tempfile::TempDir; 2] {
    let roots = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
    let m = open_roots(&roots).unwrap();
    let log = open(&m, cfg());
    for i in 0..batches {
        log.append(batch(2, NOW + i, "m"), AppendOrigin::Client, NOW)
            .unwrap();
    }
    crate::relocate::crash::AT.with(|c| c.set(at));
    let moved = m.move_log(&tp(0), 1);
    crate::relocate::crash::AT.with(|c| c.set(crate::relocate::crash::At::Nowhere));
    assert_eq!(
        moved.is_ok(),
        at == crate::relocate::crash::At::AfterSwitch,
        "{moved:?}"
    );
    for i in 0..more {
        log.append(batch(2, NOW + i, "n"), AppendOrigin::Client, NOW)
            .unwrap();
    }
    log.flush().unwrap();
    drop(log);
    drop(m);
    roots
}

/// A crash after a move switched to its new copy but before the old copy's rename leaves the
/// partition in both log dirs: the start serves the new copy, with what was appended after
/// the switch, and deletes the old one.
#[test]
fn a_crash_after_a_moves_switch_serves_the_new_copy() {
    use crate::relocate::crash::At;
    let roots = crash_a_move(At::AfterSwitch, 10, 5);
    let (old, new) = (
        roots[0].path().join("topic-0"),
        roots[1].path().join("topic-0"),
    );
    assert!(
        old.is_dir() && new.is_dir(),
        "the state a crash in the window leaves"
    );
    let m = open_roots(&roots).unwrap();
    let log = open(&m, cfg());
    assert_eq!(log.dir(), new);
    assert_eq!(
        read_all(&log, 0).len(),
        15,
        "every batch, those after the switch too"
    );
    assert!(!old.exists(), "the old copy is deleted");
}

/// A crash after the old copy was marked but before the new one took its name: the marked
/// copy, alone, is served with everything.
#[test]
fn a_crash_before_a_moves_copy_takes_its_name_serves_the_old_copy() {
    use crate::relocate::crash::At;
    let roots = crash_a_move(At::BeforePublish, 10, 5);
    let old = roots[0].path().join("topic-0");
    assert!(crate::relocate::is_marked_moved(&old));
    assert!(!roots[1].path().join("topic-0").exists());
    let m = open_roots(&roots).unwrap();
    let log = open(&m, cfg());
    assert_eq!(log.dir(), old);
    assert_eq!(read_all(&log, 0).len(), 15);
    assert!(
        !crate::relocate::is_marked_moved(&old),
        "the copy opened is the partition's: its mark comes off"
    );
}

/// A move whose published copy cannot be opened stays where it was, and takes the copy back
/// and its mark off: the start serves the old directory, with what was appended after.
#[test]
fn a_move_that_cannot_open_its_copy_leaves_no_copy_to_prefer() {
    use crate::relocate::crash::At;
    let roots = crash_a_move(At::OpenFails, 10, 5);
    let old = roots[0].path().join("topic-0");
    assert!(!roots[1].path().join("topic-0").exists());
    assert!(!crate::relocate::is_marked_moved(&old));
    let m = open_roots(&roots).unwrap();
    let log = open(&m, cfg());
    assert_eq!(log.dir(), old);
    assert_eq!(read_all(&log, 0).len(), 15);
}

/// A mark makes its directory a move's old copy only while it names a copy of the same
/// topic id elsewhere.
#[test]
fn a_mark_names_the_copy_that_supersedes_its_directory() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (d.path().join("a/t-0"), d.path().join("b/t-0"));
    let id = |dir: &Path, n: u128| {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(
            dir.join("partition.metadata"),
            sluice_format::text::format_partition_metadata(uuid::Uuid::from_u128(n).as_bytes()),
        )
        .unwrap();
    };
    id(&a, 1);
    let mark = |to: &Path| {
        std::fs::write(
            a.join(crate::relocate::MOVED_MARKER),
            format!("{}\n", to.display()),
        )
        .unwrap()
    };
    assert!(!crate::relocate::superseded(&a), "no mark");
    mark(&b);
    assert!(
        !crate::relocate::superseded(&a),
        "the copy it names is not there"
    );
    id(&b, 2);
    assert!(
        !crate::relocate::superseded(&a),
        "another incarnation's copy"
    );
    id(&b, 1);
    assert!(crate::relocate::superseded(&a));
    mark(&a);
    assert!(!crate::relocate::superseded(&a), "naming itself");
}

/// Two copies of one topic id, neither marked (a move's mark lost, or copied by hand): no
/// rule tells the current one, so the start is refused, naming both.
#[test]
fn two_unmarked_copies_of_one_partition_refuse_the_start() {
    use crate::relocate::crash::At;
    let roots = crash_a_move(At::AfterSwitch, 3, 1);
    let (old, new) = (
        roots[0].path().join("topic-0"),
        roots[1].path().join("topic-0"),
    );
    std::fs::remove_file(old.join(crate::relocate::MOVED_MARKER)).unwrap();
    let e = open_roots(&roots).unwrap_err().to_string();
    assert!(
        e.contains(&old.display().to_string()) && e.contains(&new.display().to_string()),
        "{e}"
    );
    assert!(old.is_dir() && new.is_dir(), "nothing is removed");
}

/// A move between log dirs leaves the old dir's producer snapshots behind and writes the
/// state as of the switch into the new one.
#[test]
fn a_moved_log_has_a_producer_snapshot() {
    let d1 = tempfile::tempdir().unwrap();
    let d2 = tempfile::tempdir().unwrap();
    let m = LogManager::open(
        vec![d1.path().to_path_buf(), d2.path().to_path_buf()],
        meta(),
    )
    .unwrap();
    let log = open(&m, cfg());
    log.append(pbatch(10, 2, 0, 3), AppendOrigin::Client, NOW)
        .unwrap();
    m.move_log(&tp(0), 1).unwrap();
    let snap = d2.path().join("topic-0/00000000000000000003.snapshot");
    let entries = sluice_format::snapshot::decode_snapshot(&std::fs::read(snap).unwrap()).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!((entries[0].producer_id, entries[0].last_sequence), (10, 2));
}

/// `relocate::remove_copies`: the copies of segments deleted during a move's first copy go,
/// every kind of file, a missing one no error; the other segments' copies stay.
#[test]
fn a_moves_copies_of_deleted_segments_are_removed() {
    use sluice_format::SegmentFileKind;
    let d = tempfile::tempdir().unwrap();
    let future = d.path();
    let name = |base: i64, kind| sluice_format::segment_file_name(base, kind);
    for base in [0, 10] {
        for kind in [
            SegmentFileKind::Log,
            SegmentFileKind::Index,
            SegmentFileKind::TimeIndex,
        ] {
            std::fs::write(future.join(name(base, kind)), b"x").unwrap();
        }
    }
    crate::relocate::remove_copies(future, &[0, 5]).unwrap();
    let mut left: Vec<String> = std::fs::read_dir(future)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    let mut want: Vec<String> = [
        SegmentFileKind::Log,
        SegmentFileKind::Index,
        SegmentFileKind::TimeIndex,
    ]
    .into_iter()
    .map(|k| name(10, k))
    .collect();
    want.sort();
    assert_eq!(left, want);
}

/// `relocate::publish_copy`: the copy gets its `partition.metadata` and takes the final
/// name; a final directory already there is refused and left as it was.
#[test]
fn a_moves_copy_takes_the_final_name_only_if_free() {
    let d = tempfile::tempdir().unwrap();
    let id = uuid::Uuid::from_u128(0x42);
    let future = d.path().join("topic-0.abc-future");
    let final_dir = d.path().join("topic-0");
    std::fs::create_dir(&future).unwrap();
    std::fs::write(future.join("00000000000000000000.log"), b"data").unwrap();
    crate::relocate::publish_copy(&future, &final_dir, id, || Ok(())).unwrap();
    assert!(!future.exists());
    assert_eq!(
        std::fs::read(final_dir.join("00000000000000000000.log")).unwrap(),
        b"data"
    );
    assert_eq!(crate::manager::dir_topic_id(&final_dir), Some(id));

    std::fs::create_dir(&future).unwrap();
    let e = crate::relocate::publish_copy(&future, &final_dir, id, || Ok(())).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
    assert_eq!(
        e.to_string(),
        format!("{} already exists", final_dir.display())
    );
    assert!(future.join("partition.metadata").exists());
    assert!(final_dir.join("00000000000000000000.log").exists());
}

#[test]
fn missing_and_broken_indexes_are_rebuilt() {
    let d = tempfile::tempdir().unwrap();
    {
        let m = open_mgr(d.path());
        let log = open(&m, small_cfg());
        for i in 0..40i64 {
            log.append(batch(2, NOW + i, "x"), AppendOrigin::Client, NOW)
                .unwrap();
        }
        m.shutdown().unwrap();
    }
    let pdir = d.path().join("topic-0");
    let expected: Vec<(String, Vec<u8>)> = std::fs::read_dir(&pdir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.extension()
                .is_some_and(|e| e == "index" || e == "timeindex")
        })
        .map(|p| {
            (
                p.file_name().unwrap().to_str().unwrap().to_string(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    std::fs::remove_file(pdir.join("00000000000000000000.index")).unwrap();
    // Wrong size (Kafka-style preallocated zeros) on the second segment.
    let second = expected
        .iter()
        .filter(|(n, _)| n.ends_with(".index"))
        .map(|(n, _)| n.clone())
        .min_by_key(|n| {
            let b: i64 = n.trim_end_matches(".index").parse().unwrap();
            if b == 0 {
                i64::MAX
            } else {
                b
            }
        });
    let second = pdir.join(second.unwrap());
    let mut c = std::fs::read(&second).unwrap();
    c.extend_from_slice(&[0u8; 8 * 10]);
    std::fs::write(&second, c).unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, small_cfg());
    assert_eq!(read_all(&log, 0).len(), 40);
    // A missing index is rebuilt at the open; an invalid one by its first use, in memory, and
    // written by the next maintenance round.
    log.maintain(NOW).unwrap();
    for (name, content) in expected {
        assert_eq!(std::fs::read(pdir.join(&name)).unwrap(), content, "{name}");
    }
}

#[test]
fn idempotent_producer() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, cfg());
    let a = |b: Bytes| log.append(b, AppendOrigin::Client, NOW);
    let r = a(pbatch(10, 0, 0, 3)).unwrap();
    assert_eq!((r.base_offset, r.last_offset), (0, 2));
    let r = a(pbatch(10, 0, 3, 2)).unwrap();
    assert_eq!((r.base_offset, r.last_offset), (3, 4));
    // Retry of the first batch.
    let r = a(pbatch(10, 0, 0, 3)).unwrap();
    assert!(r.duplicate);
    assert_eq!((r.base_offset, r.last_offset), (0, 2));
    assert_eq!(log.log_end_offset(), 5);
    // Gap.
    assert!(matches!(
        a(pbatch(10, 0, 7, 1)),
        Err(AppendError::OutOfOrderSequence {
            expected: 5,
            got: 7,
            ..
        })
    ));
    // New epoch must start at 0.
    assert!(matches!(
        a(pbatch(10, 1, 5, 1)),
        Err(AppendError::OutOfOrderSequence {
            expected: 0,
            got: 5,
            ..
        })
    ));
    a(pbatch(10, 1, 0, 1)).unwrap();
    // Old epoch is fenced.
    assert!(matches!(
        a(pbatch(10, 0, 5, 1)),
        Err(AppendError::ProducerFenced {
            epoch: 0,
            current: 1,
            ..
        })
    ));
    // Unknown producer: any sequence.
    a(pbatch(11, 0, 42, 1)).unwrap();
    // Sequence wrap.
    a(pbatch(12, 0, i32::MAX - 1, 2)).unwrap();
    a(pbatch(12, 0, 0, 1)).unwrap();
    // Only 5 batches are remembered.
    for s in 1..7 {
        a(pbatch(12, 0, s, 1)).unwrap();
    }
    assert!(a(pbatch(12, 0, 6, 1)).unwrap().duplicate);
    assert!(a(pbatch(12, 0, 2, 1)).unwrap().duplicate);
    assert!(matches!(
        a(pbatch(12, 0, 1, 1)),
        Err(AppendError::OutOfOrderSequence { .. })
    ));
    // Two batches of one producer in one append: the second is checked against the first.
    let mut v = pbatch(13, 0, 0, 2).to_vec();
    v.extend_from_slice(&pbatch(13, 0, 2, 2));
    a(Bytes::from(v)).unwrap();
    let mut v = pbatch(14, 0, 0, 2).to_vec();
    v.extend_from_slice(&pbatch(14, 0, 5, 2));
    let leo = log.log_end_offset();
    assert!(a(Bytes::from(v)).is_err());
    assert_eq!(log.log_end_offset(), leo);
    // Sequence -1 with a producer id is invalid.
    assert!(matches!(
        a(pbatch(15, 0, -1, 1)),
        Err(AppendError::Invalid { .. })
    ));
}

/// Producer snapshot files in a partition directory.
fn snapshot_count(pdir: &std::path::Path) -> usize {
    std::fs::read_dir(pdir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".snapshot")
        })
        .count()
}

/// Issue 17's reading list: producer state rebuilt from the newest segments alone forgot a
/// producer that had not written for two rolls, so after a crash its retry was appended again
/// and its stale epoch was not fenced. The snapshot written at each roll keeps it.
#[test]
fn producer_state_survives_rolls_and_a_crash() {
    let d = tempfile::tempdir().unwrap();
    {
        let m = open_mgr(d.path());
        let log = open(&m, small_cfg());
        log.append(pbatch(10, 2, 0, 3), AppendOrigin::Client, NOW)
            .unwrap();
        for i in 0..40i64 {
            log.append(batch(2, NOW + i, "other"), AppendOrigin::Client, NOW)
                .unwrap();
        }
        assert!(log.segment_count() >= 4, "the appends rolled");
        assert!(
            snapshot_count(&d.path().join("topic-0")) > crate::snapshots::SNAPSHOTS_KEPT,
            "a roll leaves the removal of old snapshots to the periodic check, off the append path"
        );
        // The broker's periodic check: the flush after the rolls, then the prune.
        log.flush_sealed().unwrap();
        log.prepare_spare();
        // No shutdown: a crash.
    }
    assert_eq!(
        snapshot_count(&d.path().join("topic-0")),
        crate::snapshots::SNAPSHOTS_KEPT
    );
    let (_m, log) = unclean_reopen(d.path());
    let r = log
        .append(pbatch(10, 2, 0, 3), AppendOrigin::Client, NOW)
        .unwrap();
    assert!(r.duplicate, "the retry is recognised, not appended again");
    assert_eq!(r.base_offset, 0);
    assert!(matches!(
        log.append(pbatch(10, 1, 3, 1), AppendOrigin::Client, NOW),
        Err(AppendError::ProducerFenced { .. })
    ));
    assert!(matches!(
        log.append(pbatch(10, 2, 5, 1), AppendOrigin::Client, NOW),
        Err(AppendError::OutOfOrderSequence { expected: 3, .. })
    ));
}

/// Issue 53: the snapshot a roll writes is not fsynced on the append path; the flush that
/// follows the roll fsyncs it after the segments below it, and its directory entry. Until
/// then the prune leaves it and does not count it, so a crash that loses it leaves the
/// newest durable ones. A close makes its own snapshot durable before it prunes.
/// Snapshots an earlier process wrote and never fsynced (it died before the flush after its
/// rolls) are fsynced by an unclean open before they count as durable: the prune keeps the
/// newest durable ones, and would otherwise remove the only ones that were.
#[test]
fn an_unclean_open_fsyncs_the_snapshots_it_finds() {
    let d = tempfile::tempdir().unwrap();
    let mut bases = Vec::new();
    {
        let m = open_mgr(d.path());
        let log = open(&m, cfg());
        for k in 0..2i64 {
            log.append(pbatch(10, 0, k as i32, 1), AppendOrigin::Client, NOW)
                .unwrap();
            log.roll(NOW).unwrap();
            bases.push(log.log_end_offset());
        }
        // Dropped without a close or a flush: the process died.
    }
    crate::snapshots::SYNCED.with(|s| s.borrow_mut().clear());
    let (_m, _log) = unclean_reopen(d.path());
    let synced = crate::snapshots::SYNCED.with(|s| std::mem::take(&mut *s.borrow_mut()));
    for b in &bases {
        assert!(
            synced.contains(b),
            "snapshot {b} not fsynced at the open: {synced:?}"
        );
    }
}

#[test]
fn snapshots_are_fsynced_by_the_flush_after_the_roll() {
    let d = tempfile::tempdir().unwrap();
    let pdir = d.path().join("topic-0");
    let m = open_mgr(d.path());
    let log = open(&m, cfg());
    let synced = || crate::snapshots::SYNCED.with(|s| std::mem::take(&mut *s.borrow_mut()));
    let mut bases = Vec::new();
    for k in 0..3i64 {
        log.append(pbatch(10, 0, k as i32, 1), AppendOrigin::Client, NOW)
            .unwrap();
        log.roll(NOW).unwrap();
        bases.push(log.log_end_offset());
        assert_eq!(synced(), Vec::<i64>::new(), "a roll fsyncs no snapshot");
        if k == 0 {
            crate::fsutil::SYNCED_DIRS.with(|s| s.borrow_mut().clear());
            log.flush_sealed().unwrap();
            assert_eq!(synced(), vec![bases[0]]);
            let dirs = crate::fsutil::SYNCED_DIRS.with(|s| s.borrow().clone());
            let name = format!("{:020}.snapshot", bases[0]);
            assert!(
                dirs.iter()
                    .any(|(dir, names)| *dir == pdir && names.contains(&name)),
                "the directory was not fsynced with the snapshot in it: {dirs:?}"
            );
            // Nothing left to sync: the next flush syncs no snapshot.
            log.flush().unwrap();
            assert_eq!(synced(), Vec::<i64>::new());
        }
    }
    // Two snapshots not yet durable: the prune keeps them and the durable one.
    log.prepare_spare();
    assert_eq!(snapshot_count(&pdir), 3);
    log.flush_sealed().unwrap();
    assert_eq!(synced(), bases[1..].to_vec());
    log.prepare_spare();
    assert_eq!(snapshot_count(&pdir), crate::snapshots::SNAPSHOTS_KEPT);
    // A roll with nothing appended since the last flush still gets its snapshot synced.
    log.append(pbatch(10, 0, 3, 1), AppendOrigin::Client, NOW)
        .unwrap();
    log.flush().unwrap();
    log.roll(NOW).unwrap();
    log.flush().unwrap();
    assert_eq!(synced(), vec![log.log_end_offset()]);
    // A close: the snapshot at the end is durable before the old ones go.
    log.append(pbatch(10, 0, 4, 1), AppendOrigin::Client, NOW)
        .unwrap();
    m.shutdown().unwrap();
    assert_eq!(synced(), vec![log.log_end_offset()]);
    assert_eq!(snapshot_count(&pdir), crate::snapshots::SNAPSHOTS_KEPT);
}

/// A torn newest snapshot is removed and the one before it is used, replaying more; a
/// snapshot above the log end (recovery cut the log back) is removed.
#[test]
fn damaged_or_stale_snapshots_fall_back() {
    let d = tempfile::tempdir().unwrap();
    let newest = {
        let m = open_mgr(d.path());
        let log = open(&m, small_cfg());
        for i in 0..30i64 {
            log.append(batch(2, NOW + i, "other"), AppendOrigin::Client, NOW)
                .unwrap();
        }
        log.append(pbatch(10, 2, 0, 3), AppendOrigin::Client, NOW)
            .unwrap();
        log.roll(NOW).unwrap();
        log.append(pbatch(10, 2, 3, 3), AppendOrigin::Client, NOW)
            .unwrap();
        log.roll(NOW).unwrap();
        log.log_end_offset()
    };
    let pdir = d.path().join("topic-0");
    let snap = |o: i64| pdir.join(format!("{o:020}.snapshot"));
    let bytes = std::fs::read(snap(newest)).unwrap();
    std::fs::write(snap(newest), &bytes[..bytes.len() - 3]).unwrap();
    std::fs::write(snap(newest + 100), &bytes).unwrap();
    let (_m, log) = unclean_reopen(d.path());
    assert!(!snap(newest).exists(), "the torn snapshot was removed");
    assert!(
        !snap(newest + 100).exists(),
        "the one past the log end was removed"
    );
    let r = log
        .append(pbatch(10, 2, 3, 3), AppendOrigin::Client, NOW)
        .unwrap();
    assert!(r.duplicate, "replayed from the older snapshot");
    assert!(log
        .append(pbatch(10, 2, 6, 1), AppendOrigin::Client, NOW)
        .is_ok());
}

#[test]
fn producer_state_rebuilt_at_open() {
    let d = tempfile::tempdir().unwrap();
    {
        let m = open_mgr(d.path());
        let log = open(&m, cfg());
        log.append(pbatch(10, 2, 0, 3), AppendOrigin::Client, NOW)
            .unwrap();
        log.append(pbatch(10, 2, 3, 3), AppendOrigin::Client, NOW)
            .unwrap();
    }
    let m = open_mgr(d.path());
    let log = open(&m, cfg());
    let r = log
        .append(pbatch(10, 2, 3, 3), AppendOrigin::Client, NOW)
        .unwrap();
    assert!(r.duplicate);
    assert_eq!(r.base_offset, 3);
    assert!(matches!(
        log.append(pbatch(10, 2, 9, 1), AppendOrigin::Client, NOW),
        Err(AppendError::OutOfOrderSequence { expected: 6, .. })
    ));
    assert!(matches!(
        log.append(pbatch(10, 1, 0, 1), AppendOrigin::Client, NOW),
        Err(AppendError::ProducerFenced { .. })
    ));
}

#[test]
fn flush_due_rules() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(
        &m,
        LogConfig {
            flush_messages: 5,
            ..cfg()
        },
    );
    assert!(
        !log.append(batch(2, NOW, "a"), AppendOrigin::Client, NOW)
            .unwrap()
            .flush_due
    );
    assert!(
        log.append(batch(3, NOW, "a"), AppendOrigin::Client, NOW)
            .unwrap()
            .flush_due
    );
    assert_eq!(log.flush().unwrap(), 5);
    assert_eq!(log.recovery_point_offset(), 5);
    assert!(
        !log.append(batch(1, NOW, "a"), AppendOrigin::Client, NOW)
            .unwrap()
            .flush_due
    );
    log.set_config(LogConfig {
        flush_messages: 1,
        ..cfg()
    });
    assert!(
        log.append(batch(1, NOW, "a"), AppendOrigin::Client, NOW)
            .unwrap()
            .flush_due
    );
    log.set_config(LogConfig {
        flush_ms: 1000,
        ..cfg()
    });
    log.flush().unwrap();
    assert!(
        !log.append(batch(1, NOW, "a"), AppendOrigin::Client, NOW)
            .unwrap()
            .flush_due
    );
    assert!(
        log.append(batch(1, NOW, "a"), AppendOrigin::Client, NOW + 1000)
            .unwrap()
            .flush_due
    );
    log.set_config(LogConfig {
        flush_ms: 0,
        ..cfg()
    });
    log.flush().unwrap();
    assert!(
        log.append(batch(1, NOW, "a"), AppendOrigin::Client, NOW)
            .unwrap()
            .flush_due
    );
}

/// A retry that the idempotence check calls a duplicate must not be answered before an fsync
/// covers the original (whose first answer may have timed out, or whose flush round failed):
/// under a flush policy it is flush due while its last offset is at or past the synced offset.
#[test]
fn duplicate_waits_for_the_fsync_of_its_original() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(
        &m,
        LogConfig {
            flush_messages: 1,
            ..cfg()
        },
    );
    let first = log
        .append(pbatch(10, 0, 0, 3), AppendOrigin::Client, NOW)
        .unwrap();
    assert!(first.flush_due && !first.duplicate);
    // The first answer never came (timeout); nothing synced the data yet.
    assert_eq!(log.synced_offset(), 0);
    let retry = log
        .append(pbatch(10, 0, 0, 3), AppendOrigin::Client, NOW)
        .unwrap();
    assert!(retry.duplicate);
    assert_eq!((retry.base_offset, retry.last_offset), (0, 2));
    assert!(
        retry.flush_due,
        "a duplicate of unsynced data was answered at once"
    );
    // Once the data is synced the duplicate is answered at once.
    log.sync_appended().unwrap();
    assert_eq!(log.synced_offset(), 3);
    let retry = log
        .append(pbatch(10, 0, 0, 3), AppendOrigin::Client, NOW)
        .unwrap();
    assert!(retry.duplicate && !retry.flush_due);

    // Without a flush policy no append waits for an fsync, duplicates neither.
    let log = m.open_log(&tp(1), topic_id(), cfg(), 3).unwrap();
    assert!(
        !log.append(pbatch(11, 0, 0, 1), AppendOrigin::Client, NOW)
            .unwrap()
            .flush_due
    );
    let retry = log
        .append(pbatch(11, 0, 0, 1), AppendOrigin::Client, NOW)
        .unwrap();
    assert!(retry.duplicate && !retry.flush_due);
}

/// The `.log` of the newest segment of partition 0.
fn active_log_file(dir: &Path) -> std::path::PathBuf {
    let mut logs: Vec<_> = std::fs::read_dir(dir.join("topic-0"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "log"))
        .collect();
    logs.sort();
    logs.pop().unwrap()
}

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).unwrap().len()
}

fn concat(parts: &[&Bytes]) -> Bytes {
    Bytes::from(
        parts
            .iter()
            .flat_map(|p| p.iter().copied())
            .collect::<Vec<u8>>(),
    )
}

/// A write that fails part-way (ENOSPC after two whole batches and part of a third) is cut
/// back to the segment's recorded end. Otherwise the next, shorter append leaves the second
/// never-acknowledged batch after it, a roll seals it, and after a restart it is served at
/// offsets the next segment's acknowledged records also hold (clean), or recovery stops at
/// the torn third batch and deletes the next segment with its acknowledged records (crash).
#[test]
fn failed_write_is_cut_back_before_the_next_append() {
    let b1 = batch(2, NOW, "b1");
    let c1 = batch(2, NOW, "c1");
    assert_eq!(b1.len(), c1.len());
    let b2 = batch(3, NOW, "b2");
    let b3 = batch(3, NOW, "b3");
    for crash in [true, false] {
        let d = tempfile::tempdir().unwrap();
        {
            let m = open_mgr(d.path());
            let log = open(&m, cfg());
            log.append(batch(1, NOW, "a"), AppendOrigin::Client, NOW)
                .unwrap();
            let size = log.size_bytes();
            let file = active_log_file(d.path());
            log.faults.lock().data_write = Some(b1.len() + b2.len() + 10);
            assert!(matches!(
                log.append(concat(&[&b1, &b2, &b3]), AppendOrigin::Client, NOW),
                Err(AppendError::Io { .. })
            ));
            assert_eq!(log.log_end_offset(), 1);
            assert_eq!(file_len(&file), size, "the failed write's bytes stayed");
            assert!(log.failure().is_none());
            let r = log.append(c1.clone(), AppendOrigin::Client, NOW).unwrap();
            assert_eq!((r.base_offset, r.last_offset), (1, 2));
            log.roll(NOW).unwrap();
            let r = log
                .append(batch(4, NOW, "d"), AppendOrigin::Client, NOW)
                .unwrap();
            assert_eq!((r.base_offset, r.last_offset), (3, 6));
            if !crash {
                m.shutdown().unwrap();
            }
        }
        let m = open_mgr(d.path());
        let log = open(&m, cfg());
        assert_eq!(
            read_all(&log, 0),
            vec![(0, 0), (1, 2), (3, 6)],
            "crash: {crash}"
        );
    }
}

/// The requests an idempotent producer had in flight behind one that failed on storage
/// (ENOSPC) get the same retriable storage error, not OUT_OF_ORDER_SEQUENCE_NUMBER: librdkafka
/// answers that with a new producer epoch, which re-sends other partitions' unanswered
/// batches under new sequences (a fault run duplicated a record so). Once the failed batch is
/// written, the rest follow in order; a gap nothing failed behind is still out of order.
#[test]
fn batches_behind_one_that_failed_on_storage_are_retried_not_out_of_order() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, cfg());
    let a = |b: Bytes| log.append(b, AppendOrigin::Client, NOW);
    a(pbatch(10, 0, 0, 2)).unwrap();
    a(pbatch(11, 0, 0, 1)).unwrap();
    log.faults.lock().data_write = Some(10);
    assert!(matches!(
        a(pbatch(10, 0, 2, 2)),
        Err(AppendError::Io { .. })
    ));
    // Requests 2 and 3 in flight behind it.
    for seq in [4, 6] {
        match a(pbatch(10, 0, seq, 2)) {
            Err(AppendError::Io { source, .. }) => {
                assert!(
                    source.to_string().contains("sequence 2 failed on storage"),
                    "{source}"
                )
            }
            other => panic!("sequence {seq}: {other:?}"),
        }
    }
    // Another producer's gap is not explained by producer 10's failure.
    assert!(matches!(
        a(pbatch(11, 0, 3, 1)),
        Err(AppendError::OutOfOrderSequence {
            expected: 1,
            got: 3,
            ..
        })
    ));
    // The retries, in order.
    for (seq, base) in [(2, 3), (4, 5), (6, 7)] {
        let r = a(pbatch(10, 0, seq, 2)).unwrap();
        assert_eq!(
            (r.base_offset, r.duplicate),
            (base, false),
            "sequence {seq}"
        );
    }
    // Once written, a later gap is out of order again, and the same epoch's stale entry
    // explains nothing; neither does it for a new epoch.
    assert!(matches!(
        a(pbatch(10, 0, 12, 1)),
        Err(AppendError::OutOfOrderSequence { expected: 8, .. })
    ));
    assert!(matches!(
        a(pbatch(10, 1, 4, 1)),
        Err(AppendError::OutOfOrderSequence { expected: 0, .. })
    ));
    assert_eq!(log.log_end_offset(), 9);
}

/// An index write that fails after the data write fails the append, and the data it wrote is
/// cut back too.
#[test]
fn failed_index_write_cuts_the_data_back() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    // An index entry for every batch: one append of 200 batches writes the index files.
    let log = open(
        &m,
        LogConfig {
            index_interval_bytes: 0,
            ..cfg()
        },
    );
    log.append(batch(1, NOW, "a"), AppendOrigin::Client, NOW)
        .unwrap();
    let size = log.size_bytes();
    let file = active_log_file(d.path());
    let one = batch(1, NOW, "m");
    let many = concat(&vec![&one; 200]);
    log.faults.lock().index_write = true;
    assert!(matches!(
        log.append(many.clone(), AppendOrigin::Client, NOW),
        Err(AppendError::Io { .. })
    ));
    assert_eq!(log.log_end_offset(), 1);
    assert_eq!(file_len(&file), size, "the failed append's data stayed");
    let r = log.append(many, AppendOrigin::Client, NOW).unwrap();
    assert_eq!((r.base_offset, r.last_offset), (1, 200));
    assert_eq!(read_all(&log, 0).len(), 201);
}

/// When a failed write cannot be cut back either, the log refuses every later append and roll
/// (nothing is written after the garbage) until it is re-opened, which recovers it.
#[test]
fn failed_cut_back_refuses_appends_until_reopened() {
    let d = tempfile::tempdir().unwrap();
    {
        let m = open_mgr(d.path());
        let log = open(&m, cfg());
        log.append(batch(1, NOW, "a"), AppendOrigin::Client, NOW)
            .unwrap();
        let size = log.size_bytes();
        let file = active_log_file(d.path());
        {
            let mut f = log.faults.lock();
            f.data_write = Some(30);
            f.truncate = true;
        }
        assert!(log
            .append(batch(3, NOW, "b"), AppendOrigin::Client, NOW)
            .is_err());
        assert!(matches!(
            log.failure(),
            Some(LogFailure::UntrimmedWrite { size: s, .. }) if s == size
        ));
        let Err(AppendError::Io { source, .. }) =
            log.append(batch(1, NOW, "c"), AppendOrigin::Client, NOW)
        else {
            panic!("an append after garbage was accepted");
        };
        let refused = source.get_ref().and_then(|e| e.downcast_ref::<LogFailed>());
        assert!(refused.is_some(), "unexpected error: {source}");
        assert!(log.roll(NOW).is_err());
        assert_eq!(
            file_len(&file),
            size + 30,
            "something was written after the garbage"
        );
        assert_eq!(log.log_end_offset(), 1);
    }
    // Re-opened (after a crash): recovery cuts the garbage, appends work again.
    let m = open_mgr(d.path());
    let log = open(&m, cfg());
    assert!(log.failure().is_none());
    let r = log
        .append(batch(2, NOW, "c"), AppendOrigin::Client, NOW)
        .unwrap();
    assert_eq!((r.base_offset, r.last_offset), (1, 2));
    assert_eq!(read_all(&log, 0), vec![(0, 0), (1, 2)]);
}

/// A roll seals the `.log` at the segment's recorded size, whatever lies after it in the file;
/// otherwise recovery after a crash stops there and deletes the later segments.
#[test]
fn roll_cuts_the_sealed_log_to_its_recorded_size() {
    let d = tempfile::tempdir().unwrap();
    {
        let m = open_mgr(d.path());
        let log = open(&m, cfg());
        log.append(batch(2, NOW, "a"), AppendOrigin::Client, NOW)
            .unwrap();
        let size = log.size_bytes();
        let file = active_log_file(d.path());
        // Bytes past the recorded end that the log does not know about.
        {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&file)
                .unwrap();
            f.write_all(&[0u8; 30]).unwrap();
        }
        log.roll(NOW).unwrap();
        assert_eq!(file_len(&file), size);
        log.append(batch(3, NOW, "b"), AppendOrigin::Client, NOW)
            .unwrap();
        // Crash.
    }
    let m = open_mgr(d.path());
    let log = open(&m, cfg());
    assert_eq!(read_all(&log, 0), vec![(0, 1), (2, 4)]);
}

/// The error inside an append refused by a failed log.
fn refused_by_failed_log(r: Result<AppendOutcome, AppendError>) -> bool {
    match r {
        Err(AppendError::Io { source, .. }) => source
            .get_ref()
            .is_some_and(|e| e.downcast_ref::<LogFailed>().is_some()),
        _ => false,
    }
}

/// True when the flush failed because the log refuses writes.
fn flush_refused(r: std::io::Result<i64>) -> bool {
    r.is_err_and(|e| {
        e.get_ref()
            .is_some_and(|e| e.downcast_ref::<LogFailed>().is_some())
    })
}

/// After a failed fsync the kernel may have dropped the dirty pages it could not write, so a
/// later fsync of the same file can succeed without them: the log never trusts the page cache
/// again. Every later flush, sync and append fails (the synced offset and the recovery point
/// stay where the last good fsync left them) until the log is re-opened, which recovers it
/// from storage.
#[test]
fn failed_fsync_fails_the_log_until_reopened() {
    let d = tempfile::tempdir().unwrap();
    let c = LogConfig {
        flush_messages: 1,
        ..cfg()
    };
    {
        let m = open_mgr(d.path());
        let log = open(&m, c.clone());
        log.append(batch(1, NOW, "a"), AppendOrigin::Client, NOW)
            .unwrap();
        log.sync_appended().unwrap();
        assert_eq!(log.synced_offset(), 1);
        log.append(batch(2, NOW, "b"), AppendOrigin::Client, NOW)
            .unwrap();
        log.faults.lock().flush_sync = true;
        assert!(log.sync_appended().is_err());
        assert!(matches!(log.failure(), Some(LogFailure::SyncFailed { .. })));
        // The retry's fsync would succeed over whatever the kernel dropped.
        assert!(
            flush_refused(log.sync_appended()),
            "a sync after a failed fsync"
        );
        assert!(flush_refused(log.flush()));
        assert_eq!(log.synced_offset(), 1);
        assert_eq!(log.recovery_point_offset(), 0);
        // Readers see only what the last good fsync covered, not the page cache past it.
        assert_eq!(log.high_watermark(), 1);
        assert_eq!(read_all(&log, 0), vec![(0, 0)]);
        assert!(refused_by_failed_log(log.append(
            batch(1, NOW, "c"),
            AppendOrigin::Client,
            NOW
        )));
        assert!(log.roll(NOW).is_err());
        // No flush: the shutdown fails and leaves no clean-shutdown marker.
        assert!(m.shutdown().is_err());
    }
    let m = open_mgr(d.path());
    let log = open(&m, c);
    assert!(log.failure().is_none());
    // What storage holds (here all of it: only the fsync was made to fail).
    assert_eq!(read_all(&log, 0), vec![(0, 0), (1, 2)]);
    log.append(batch(1, NOW, "c"), AppendOrigin::Client, NOW)
        .unwrap();
    log.sync_appended().unwrap();
    assert_eq!(log.synced_offset(), 4);
}

/// `flush.messages=1`: every batch is synced before it is acknowledged.
fn synced_each() -> LogConfig {
    LogConfig {
        flush_messages: 1,
        ..cfg()
    }
}

/// A log of `m` (with [`synced_each`]) that synced a batch of each `(records, tag)` in
/// `synced`, then failed the fsync of one more, of `unsynced`.
fn failed_log(m: &LogManager, synced: &[(usize, &str)], unsynced: (usize, &str)) -> Arc<Log> {
    let log = open(m, synced_each());
    for &(n, tag) in synced {
        log.append(batch(n, NOW, tag), AppendOrigin::Client, NOW)
            .unwrap();
    }
    log.sync_appended().unwrap();
    log.faults.lock().flush_sync = true;
    log.append(
        batch(unsynced.0, NOW, unsynced.1),
        AppendOrigin::Client,
        NOW,
    )
    .unwrap();
    assert!(log.sync_appended().is_err());
    log
}

/// A failed log is re-opened in place (what the broker does by itself): the new log recovers
/// from storage and takes appends again; the failed one is closed.
#[test]
fn a_failed_log_is_reopened_in_place() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = failed_log(&m, &[(1, "a")], (2, "b"));
    let tp = log.topic_partition().clone();
    let new = m.reopen_log(&tp, synced_each()).unwrap().unwrap();
    assert!(new.failure().is_none());
    // Appends go to a new segment: nothing the failed log may have handed a reader as a file
    // region is rewritten with other bytes.
    assert_eq!(new.segment_count(), 2);
    assert!(log.is_closed());
    assert!(Arc::ptr_eq(&m.get(&tp).unwrap(), &new));
    new.append(batch(1, NOW, "c"), AppendOrigin::Client, NOW)
        .unwrap();
    new.sync_appended().unwrap();
    assert_eq!(new.synced_offset(), new.log_end_offset());
}

/// A failed log whose volume went away (an unmounted export, a file system process that
/// died: the bare mount point is left) is not re-opened empty: the re-open is refused and
/// writes nothing there, the failed log stays, and once the volume is back a re-open finds
/// everything that was made durable.
#[test]
fn a_failed_log_is_not_reopened_on_an_emptied_volume() {
    let d = tempfile::tempdir().unwrap();
    let vol = d.path().join("vol");
    let away = d.path().join("away");
    std::fs::create_dir(&vol).unwrap();
    let c = synced_each();
    let m = open_mgr(&vol);
    let log = failed_log(&m, &[(3, "a"), (2, "b")], (1, "c"));
    assert_eq!(log.synced_offset(), 5);
    let tp = log.topic_partition().clone();

    std::fs::rename(&vol, &away).unwrap();
    std::fs::create_dir(&vol).unwrap();
    let refused = m.reopen_log(&tp, c.clone()).unwrap_err().to_string();
    assert!(refused.contains("meta.properties"), "{refused}");
    assert!(Arc::ptr_eq(&m.get(&tp).unwrap(), &log));
    assert!(log.failure().is_some());
    assert_eq!(std::fs::read_dir(&vol).unwrap().count(), 0);

    // The volume's identity is there but the partition's directory is not.
    std::fs::copy(away.join("meta.properties"), vol.join("meta.properties")).unwrap();
    let refused = m.reopen_log(&tp, c.clone()).unwrap_err().to_string();
    assert!(refused.contains("partition's directory"), "{refused}");
    assert!(Arc::ptr_eq(&m.get(&tp).unwrap(), &log));
    assert_eq!(std::fs::read_dir(&vol).unwrap().count(), 1);

    // The volume comes back.
    std::fs::remove_dir_all(&vol).unwrap();
    std::fs::rename(&away, &vol).unwrap();
    let new = m.reopen_log(&tp, c).unwrap().unwrap();
    assert!(new.failure().is_none());
    assert!(log.is_closed());
    assert!(new.log_end_offset() >= 5);
    assert_eq!(read_all(&new, 0)[..2], [(0, 2), (3, 4)]);
}

/// A re-open that finds less than the failed log made durable (a segment cut short behind
/// the broker's back) is refused: the partition stays offline rather than serving fewer
/// records than were acknowledged.
#[test]
fn a_reopen_finding_less_than_was_made_durable_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = failed_log(&m, &[(3, "a")], (1, "b"));
    let tp = log.topic_partition().clone();
    for entry in std::fs::read_dir(log.dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "log") {
            std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .unwrap()
                .set_len(0)
                .unwrap();
        }
    }
    let refused = m.reopen_log(&tp, synced_each()).unwrap_err().to_string();
    assert!(refused.contains("made durable"), "{refused}");
    assert!(Arc::ptr_eq(&m.get(&tp).unwrap(), &log));
    assert!(log.failure().is_some());
}

/// Append `n` batches of 5 records, `a0`, `a1`, ...
fn append_batches(log: &Log, n: usize) {
    for i in 0..n {
        log.append(batch(5, NOW, &format!("a{i}")), AppendOrigin::Client, NOW)
            .unwrap();
    }
}

/// A drop-behind `fdatasync` that finds a segment of the log gone from the server (ESTALE)
/// fails the log: that data is not on storage any more. (Before, it failed only the next
/// flush, and the one after succeeded as if nothing had been lost.)
#[test]
fn drop_behind_finding_a_live_segment_gone_fails_the_log() {
    let d = disk_tempdir();
    let m = open_mgr(d.path());
    let log = open(
        &m,
        LogConfig {
            flush_messages: 1,
            ..small_cfg()
        },
    );
    append_batches(&log, 20);
    log.faults.lock().drop_sync_gone = true;
    assert!(log.drop_cache_behind(0).is_err());
    assert!(matches!(log.failure(), Some(LogFailure::SyncFailed { .. })));
    assert!(flush_refused(log.sync_appended()));
    assert!(
        flush_refused(log.sync_appended()),
        "a later flush succeeded"
    );
}

/// The drop-behind's `fdatasync` shares the open file (and so its writeback error) with the
/// flushes: it runs under the flush lock, and its failure fails the log as a flush's does.
#[test]
fn failed_drop_behind_fdatasync_fails_the_log() {
    let d = disk_tempdir();
    let m = open_mgr(d.path());
    let log = open(
        &m,
        LogConfig {
            flush_messages: 1,
            ..small_cfg()
        },
    );
    append_batches(&log, 20);
    log.faults.lock().drop_sync = true;
    assert!(log.drop_cache_behind(0).is_err());
    assert!(matches!(log.failure(), Some(LogFailure::SyncFailed { .. })));
    assert!(flush_refused(log.sync_appended()));
    assert!(
        flush_refused(log.sync_appended()),
        "a second flush trusted the page cache"
    );
    assert_eq!(log.synced_offset(), 0);
    assert!(refused_by_failed_log(log.append(
        batch(1, NOW, "c"),
        AppendOrigin::Client,
        NOW
    )));
}

/// A partition created on a cleanly started broker has its directory entry (in the log dir)
/// and its first segment's entries (in the partition directory) fsynced when it is opened:
/// flushes fsync only the directories they changed since.
#[test]
fn new_partition_directory_entries_are_fsynced() {
    let d = tempfile::tempdir().unwrap();
    open_mgr(d.path()).shutdown().unwrap();
    let m = open_mgr(d.path());
    crate::fsutil::SYNCED_DIRS.with(|s| s.borrow_mut().clear());
    let _log = open(&m, cfg());
    let synced = crate::fsutil::SYNCED_DIRS.with(|s| s.borrow().clone());
    let pdir = d.path().join("topic-0");
    assert!(
        synced
            .iter()
            .any(|(dir, names)| dir == d.path() && names.iter().any(|n| n == "topic-0")),
        "the log dir was not fsynced with the partition directory in it: {synced:?}"
    );
    assert!(
        synced
            .iter()
            .any(|(dir, names)| *dir == pdir
                && names.iter().any(|n| n == "00000000000000000000.log")),
        "the partition directory was not fsynced with the segment in it: {synced:?}"
    );
}

fn files_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    v.sort();
    v
}

#[test]
fn retention_by_time_and_size_waits_for_readers() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let c = LogConfig {
        retention_ms: 1000,
        ..small_cfg()
    };
    let log = open(&m, c.clone());
    for i in 0..60i64 {
        log.append(batch(2, NOW + i, "x"), AppendOrigin::Client, NOW)
            .unwrap();
    }
    let segs = log.segment_count();
    assert!(segs > 3);
    // A reader holds a slice of the first segment.
    let held = log.read(0, 100, true).unwrap().slice.unwrap();
    log.maintain(NOW + 500).unwrap();
    assert_eq!(log.segment_count(), segs);
    log.maintain(NOW + 10_000).unwrap();
    // Everything was expired: the active segment was rolled and all sealed ones deleted.
    assert_eq!(log.segment_count(), 1);
    assert_eq!(log.log_start_offset(), 120);
    assert_eq!(log.log_end_offset(), 120);
    let pdir = d.path().join("topic-0");
    let names = files_in(&pdir);
    assert!(
        names.contains(&"00000000000000000000.log.deleted".to_string()),
        "{names:?}"
    );
    assert!(held.read_bytes().is_ok());
    drop(held);
    log.maintain(NOW + 10_000).unwrap();
    let names = files_in(&pdir);
    assert!(!names.iter().any(|n| n.ends_with(".deleted")), "{names:?}");
    assert!(matches!(
        log.read(0, 100, true),
        Err(ReadError::OffsetOutOfRange { .. })
    ));

    // Size-based.
    log.set_config(LogConfig {
        retention_bytes: 1500,
        ..small_cfg()
    });
    for i in 0..30i64 {
        log.append(batch(2, NOW + i, "x"), AppendOrigin::Client, NOW + 20_000)
            .unwrap();
    }
    log.maintain(NOW + 20_000).unwrap();
    assert!(log.size_bytes() <= 1500 + 1000, "{}", log.size_bytes());
    let start = log.log_start_offset();
    assert!(start > 120);
    assert_eq!(
        read_all(&log, start).last().unwrap().1 + 1,
        log.log_end_offset()
    );
}

#[test]
fn delete_records() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, small_cfg());
    for i in 0..30i64 {
        log.append(batch(2, NOW + i, "x"), AppendOrigin::Client, NOW)
            .unwrap();
    }
    let segs = log.segment_count();
    assert!(matches!(
        log.delete_records_before(61),
        Err(ReadError::OffsetOutOfRange { .. })
    ));
    assert_eq!(log.delete_records_before(25).unwrap(), 25);
    assert!(log.segment_count() < segs);
    assert_eq!(log.log_start_offset(), 25);
    assert!(matches!(
        log.read(24, 100, true),
        Err(ReadError::OffsetOutOfRange { .. })
    ));
    // Offset 25 lies in the batch 24..25.
    assert_eq!(read_all(&log, 25)[0], (24, 25));
    assert_eq!(log.delete_records_before(10).unwrap(), 25);
    m.checkpoint().unwrap();
    drop(log);
    m.shutdown().unwrap();
    drop(m);
    let m = open_mgr(d.path());
    let log = open(&m, small_cfg());
    assert_eq!(log.log_start_offset(), 25);
    assert_eq!(log.delete_records_before(60).unwrap(), 60);
    assert!(log.read(60, 100, true).unwrap().slice.is_none());
}

#[test]
fn delete_log_waits_for_readers() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, cfg());
    log.append(batch(2, NOW, "x"), AppendOrigin::Client, NOW)
        .unwrap();
    let held = log.read(0, 100, true).unwrap().slice.unwrap();
    m.delete_log(&tp(0)).unwrap();
    assert!(m.get(&tp(0)).is_none());
    assert!(log
        .append(batch(2, NOW, "x"), AppendOrigin::Client, NOW)
        .is_err());
    let names = files_in(d.path());
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("topic-0.") && n.ends_with("-delete")),
        "{names:?}"
    );
    assert!(!names.contains(&"topic-0".to_string()));
    m.maintain(NOW);
    assert!(files_in(d.path()).iter().any(|n| n.ends_with("-delete")));
    assert!(held.read_bytes().is_ok());
    drop(held);
    drop(log);
    m.maintain(NOW);
    assert!(!files_in(d.path()).iter().any(|n| n.ends_with("-delete")));
    // Recreate the same partition: starts empty.
    let log = open(&m, cfg());
    assert_eq!(log.log_end_offset(), 0);
}

#[test]
fn manager_scan_placement_and_foreign_entries() {
    let d1 = tempfile::tempdir().unwrap();
    let d2 = tempfile::tempdir().unwrap();
    // Foreign things in d1.
    std::fs::create_dir_all(d1.path().join("__cluster_metadata-0")).unwrap();
    std::fs::create_dir_all(d1.path().join(".nfs0000000012345")).unwrap();
    std::fs::create_dir_all(d1.path().join("lost+found")).unwrap();
    std::fs::create_dir_all(
        d1.path()
            .join("old-3.0123456789abcdef0123456789abcdef-delete"),
    )
    .unwrap();
    std::fs::create_dir_all(
        d1.path()
            .join("x-1.0123456789abcdef0123456789abcdef-future"),
    )
    .unwrap();
    std::fs::write(d1.path().join(".fuse_hidden0001"), b"x").unwrap();
    std::fs::write(d1.path().join("cleaner-offset-checkpoint"), b"0\n0\n").unwrap();
    std::fs::create_dir_all(d1.path().join("existing-0")).unwrap();
    let dirs = vec![d1.path().to_path_buf(), d2.path().to_path_buf()];
    let m = LogManager::open(dirs.clone(), meta()).unwrap();
    let disc = m.discovered();
    assert_eq!(disc.len(), 1);
    assert_eq!(
        disc[0].tp,
        TopicPartition {
            topic: "existing".into(),
            partition: 0
        }
    );
    assert!(!d1
        .path()
        .join("old-3.0123456789abcdef0123456789abcdef-delete")
        .exists());
    assert!(d1.path().join("__cluster_metadata-0").exists());
    // New partitions go to the emptier dir.
    let a = m.open_log(&tp(0), topic_id(), cfg(), 0).unwrap();
    assert!(a.dir().starts_with(d2.path()));
    let b = m.open_log(&tp(1), topic_id(), cfg(), 0).unwrap();
    assert!(b.dir().starts_with(d1.path()) || b.dir().starts_with(d2.path()));
    let again = m.open_log(&tp(0), topic_id(), cfg(), 0).unwrap();
    assert!(Arc::ptr_eq(&a, &again));
    assert!(m
        .open_log(&tp(0), uuid::Uuid::from_u128(9), cfg(), 0)
        .is_err());
    assert_eq!(m.logs().len(), 2);
    let props = std::fs::read_to_string(d1.path().join("meta.properties")).unwrap();
    assert!(
        props.contains("version=1\n")
            && props.contains("node.id=1\n")
            && props.contains("directory.id=")
    );
    assert!(props.contains("cluster.id=test-cluster-id-00000A\n"));
    m.shutdown().unwrap();
    // An existing meta.properties (e.g. Kafka's) is kept byte for byte; a mismatch is refused.
    let kafka_props = "#\n#Thu Oct 24 10:00:00 UTC 2024\nnode.id=1\ndirectory.id=abcdefghijklmnopqrstuv\nversion=1\ncluster.id=test-cluster-id-00000A\n";
    std::fs::write(d1.path().join("meta.properties"), kafka_props).unwrap();
    let m = LogManager::open(dirs.clone(), meta()).unwrap();
    assert_eq!(
        std::fs::read_to_string(d1.path().join("meta.properties")).unwrap(),
        kafka_props
    );
    drop(m);
    let other = MetaProperties {
        node_id: 2,
        cluster_id: "test-cluster-id-00000A".into(),
    };
    assert!(LogManager::open(dirs, other).is_err());
}

#[test]
fn close_and_reopen_in_process() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, small_cfg());
    for i in 0..20i64 {
        log.append(batch(2, NOW + i, "x"), AppendOrigin::Client, NOW)
            .unwrap();
    }
    m.close_log(&tp(0)).unwrap();
    assert!(m.get(&tp(0)).is_none());
    assert!(log
        .append(batch(2, NOW, "x"), AppendOrigin::Client, NOW)
        .is_err());
    let log2 = open(&m, small_cfg());
    assert_eq!(log2.log_end_offset(), 40);
    assert_eq!(read_all(&log2, 0).len(), 20);
}

#[test]
fn kafka_style_directory_is_tolerated() {
    // A partition directory as a crashed Kafka leaves it: preallocated (zero-filled) index
    // files, a producer snapshot, a leader-epoch-checkpoint, no partition.metadata issues.
    let d = tempfile::tempdir().unwrap();
    let pdir = d.path().join("kt-0");
    std::fs::create_dir_all(&pdir).unwrap();
    let mut data = Vec::new();
    for i in 0..10i64 {
        let mut b = BatchBuilder::new();
        b.base_offset = i * 2;
        b.partition_leader_epoch = 0;
        let b = b
            .record(NOW + i, None, Some(b"kafka"))
            .record(NOW + i, None, Some(b"kafka"));
        data.extend_from_slice(&b.build());
    }
    std::fs::write(pdir.join("00000000000000000000.log"), &data).unwrap();
    std::fs::write(
        pdir.join("00000000000000000000.index"),
        vec![0u8; 10 * 1024],
    )
    .unwrap();
    std::fs::write(
        pdir.join("00000000000000000000.timeindex"),
        vec![0u8; 12 * 1024],
    )
    .unwrap();
    std::fs::write(pdir.join("00000000000000000010.snapshot"), b"snapshot").unwrap();
    std::fs::write(pdir.join("leader-epoch-checkpoint"), "0\n1\n0 0\n").unwrap();
    let id = topic_id();
    std::fs::write(
        pdir.join("partition.metadata"),
        sluice_format::text::format_partition_metadata(id.as_bytes()),
    )
    .unwrap();
    let m = open_mgr(d.path());
    assert_eq!(m.discovered()[0].topic_id, Some(id));
    let log = m
        .open_log(
            &TopicPartition {
                topic: "kt".into(),
                partition: 0,
            },
            id,
            small_cfg(),
            1,
        )
        .unwrap();
    assert_eq!(log.log_end_offset(), 20);
    assert_eq!(read_all(&log, 0).len(), 10);
    // An unreadable producer snapshot is removed, as Kafka removes one (the state comes from
    // the log instead).
    assert!(!pdir.join("00000000000000000010.snapshot").exists());
    log.append(batch(1, NOW + 100, "new"), AppendOrigin::Client, NOW)
        .unwrap();
    assert_eq!(log.leader_epoch_entries(), vec![(0, 0), (1, 20)]);
    assert_eq!(log.end_offset_for_epoch(0), Some((0, 20)));
    assert_eq!(log.leader_epoch(), 1);
    assert_eq!(log.end_offset_for_epoch(1), Some((1, 21)));
    // Newer than the log's epoch: UNDEFINED, as Kafka answers.
    assert_eq!(log.end_offset_for_epoch(5), None);
    assert_eq!(log.end_offset_for_epoch(-1), None);
    let idx = std::fs::read(pdir.join("00000000000000000000.index")).unwrap();
    assert!(idx.len() < 10 * 1024);
    let _ = OffsetIndexEntry::decode(&idx);
}

#[test]
fn tail_reads_from_recent_batches_equal_the_scan() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(
        &m,
        LogConfig {
            index_interval_bytes: 700,
            ..cfg()
        },
    );
    // 100 appends of 1-3 batches of 1-7 records (some batches below the index interval):
    // more than the recent list holds, so early offsets need the scan.
    let mut rng = 12345u64;
    let mut step = || {
        rng = rng
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (rng >> 33) as usize
    };
    for k in 0..100 {
        let mut v = Vec::new();
        for j in 0..1 + step() % 3 {
            v.extend_from_slice(&batch(1 + step() % 7, NOW + k, &format!("{k}-{j}")));
        }
        log.append(Bytes::from(v), AppendOrigin::Client, NOW)
            .unwrap();
    }
    let leo = log.log_end_offset();
    let active_size = log.shared.read().active_size;
    let mut answered = 0;
    for off in 0..leo {
        for max in [1u32, 60, 200, 1000, 5000, 1 << 20] {
            for min_one in [true, false] {
                let fast = log.read_from(off, max, min_one, true).unwrap();
                let scan = log.read_from(off, max, min_one, false).unwrap();
                assert_eq!(
                    fast.slice.map(|s| (s.position, s.len)),
                    scan.slice.map(|s| (s.position, s.len)),
                    "offset {off} max {max} min_one {min_one}"
                );
                let segs = log.shared.read().segments.clone();
                let recent = segs.last().unwrap().meta.read().recent.clone();
                answered +=
                    usize::from(recent.read(off, max.into(), min_one, active_size).is_some());
            }
        }
    }
    // The tail was answered from memory (the list holds its last 64 batches), the rest not.
    assert!(answered > 0 && answered < (leo as usize) * 12, "{answered}");
    // Sealing the segment empties the list; reads still answer the same.
    log.roll(NOW).unwrap();
    let segs = log.shared.read().segments.clone();
    assert!(segs[0]
        .meta
        .read()
        .recent
        .read(leo - 1, 1 << 20, true, active_size)
        .is_none());
    let r = log.read(leo - 1, 1 << 20, true).unwrap().slice.unwrap();
    assert_eq!(r.position + u64::from(r.len), active_size);
}

#[derive(Clone, Debug)]
enum Op {
    Append(usize, usize),
    Roll,
    Read(usize, u32),
    Reopen(bool),
    Flush,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1usize..4, 1usize..5).prop_map(|(b, n)| Op::Append(b, n)),
        1 => Just(Op::Roll),
        4 => (any::<usize>(), 1u32..3000).prop_map(|(o, m)| Op::Read(o, m)),
        1 => any::<bool>().prop_map(Op::Reopen),
        1 => Just(Op::Flush),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn model_check(ops in prop::collection::vec(op(), 1..60)) {
        let d = tempfile::tempdir().unwrap();
        let c = LogConfig { segment_bytes: 1500, index_interval_bytes: 200, ..cfg() };
        let mut m = open_mgr(d.path());
        let mut log = open(&m, c.clone());
        // Model: list of batches (base, last, bytes after patching).
        let mut model: Vec<(i64, i64)> = Vec::new();
        let mut next = 0i64;
        for (k, o) in ops.into_iter().enumerate() {
            match o {
                Op::Append(nb, nr) => {
                    let mut v = Vec::new();
                    for j in 0..nb {
                        v.extend_from_slice(&batch(nr, NOW + k as i64, &format!("{k}-{j}")));
                    }
                    let r = log.append(Bytes::from(v), AppendOrigin::Client, NOW).unwrap();
                    prop_assert_eq!(r.base_offset, next);
                    for _ in 0..nb {
                        model.push((next, next + nr as i64 - 1));
                        next += nr as i64;
                    }
                    prop_assert_eq!(r.last_offset, next - 1);
                }
                Op::Roll => log.roll(NOW).unwrap(),
                Op::Flush => { log.flush().unwrap(); }
                Op::Read(o, max) => {
                    let off = if next == 0 { 0 } else { (o as i64).rem_euclid(next + 1) };
                    // The recent batches of the active segment answer exactly as the scan.
                    for min_one in [true, false] {
                        let fast = log.read_from(off, max, min_one, true).unwrap();
                        let scan = log.read_from(off, max, min_one, false).unwrap();
                        prop_assert_eq!(
                            fast.slice.map(|s| (s.position, s.len)),
                            scan.slice.map(|s| (s.position, s.len))
                        );
                    }
                    let r = log.read(off, max, true).unwrap();
                    if off == next {
                        prop_assert!(r.slice.is_none());
                    } else {
                        let bytes = r.slice.unwrap().read_bytes().unwrap();
                        let got = parse_batches(&bytes, None).unwrap();
                        let i = model.iter().position(|(b, l)| *b <= off && off <= *l).unwrap();
                        prop_assert_eq!(got[0].header.base_offset, model[i].0);
                        prop_assert!(bytes.len() <= max as usize || got.len() == 1);
                        for (j, g) in got.iter().enumerate() {
                            prop_assert_eq!((g.header.base_offset, g.header.last_offset()), model[i + j]);
                        }
                    }
                }
                Op::Reopen(clean) => {
                    if clean { m.shutdown().unwrap(); }
                    drop(log);
                    drop(m);
                    m = open_mgr(d.path());
                    log = open(&m, c.clone());
                    prop_assert_eq!(log.log_end_offset(), next);
                }
            }
        }
        let all = read_all(&log, 0);
        prop_assert_eq!(all, model);
    }
}

/// Writes a sample log directory to `$SLUICE_DUMP_DIR` for checking with Kafka's
/// `kafka-dump-log` (run with `--ignored`).
#[test]
#[ignore]
fn write_sample_for_kafka_tools() {
    let Ok(dir) = std::env::var("SLUICE_DUMP_DIR") else {
        return;
    };
    let dir = Path::new(&dir);
    let m = open_mgr(dir);
    let log = open(
        &m,
        LogConfig {
            segment_bytes: 20_000,
            index_interval_bytes: 500,
            ..cfg()
        },
    );
    let lat = m
        .open_log(
            &tp(1),
            topic_id(),
            LogConfig {
                timestamp_type: TimestampType::LogAppendTime,
                segment_bytes: 20_000,
                index_interval_bytes: 500,
                ..cfg()
            },
            0,
        )
        .unwrap();
    for i in 0..400i64 {
        log.append(
            batch(1 + (i % 5) as usize, NOW + (i * 7919) % 1000, "v"),
            AppendOrigin::Client,
            NOW,
        )
        .unwrap();
        lat.append(
            pbatch(5, 0, (i * 3) as i32, 3),
            AppendOrigin::Client,
            NOW + i,
        )
        .unwrap();
    }
    if std::env::var("SLUICE_DUMP_CLEAN").is_ok() {
        m.shutdown().unwrap();
    } else {
        log.flush().unwrap();
        lat.flush().unwrap();
    }
}

/// Opens a log directory written by Apache Kafka (`$SLUICE_KAFKA_DIR`, a copy: it is modified),
/// reads every partition end to end, appends to each and shuts down (run with `--ignored`).
#[test]
#[ignore]
fn open_kafka_written_dir() {
    let Ok(dir) = std::env::var("SLUICE_KAFKA_DIR") else {
        return;
    };
    let dir = Path::new(&dir);
    let props = sluice_format::text::parse_properties(
        &std::fs::read_to_string(dir.join("meta.properties")).unwrap(),
    );
    let get = |k: &str| {
        props
            .iter()
            .find(|(kk, _)| kk == k)
            .map(|(_, v)| v.clone())
            .unwrap()
    };
    let meta = MetaProperties {
        node_id: get("node.id").parse().unwrap(),
        cluster_id: get("cluster.id"),
    };
    let m = LogManager::open(vec![dir.to_path_buf()], meta).unwrap();
    for d in m.discovered() {
        let log = m.open_log(&d.tp, d.topic_id.unwrap(), cfg(), 7).unwrap();
        let all = read_all(&log, log.log_start_offset());
        for w in all.windows(2) {
            assert_eq!(w[0].1 + 1, w[1].0);
        }
        println!(
            "{:?}: start {} end {} batches {}",
            d.tp,
            log.log_start_offset(),
            log.log_end_offset(),
            all.len()
        );
        assert_eq!(
            all.last().map_or(log.log_start_offset(), |b| b.1 + 1),
            log.log_end_offset()
        );
        let r = log
            .append(batch(3, NOW, "sluice"), AppendOrigin::Client, NOW)
            .unwrap();
        assert_eq!(r.base_offset, all.last().unwrap().1 + 1);
        let _ = log.offset_for_timestamp(0).unwrap().unwrap();
    }
    m.shutdown().unwrap();
}

#[test]
fn concurrent_appends_reads_flushes() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(
        &m,
        LogConfig {
            segment_bytes: 5000,
            index_interval_bytes: 256,
            ..cfg()
        },
    );
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut handles = Vec::new();
    for _ in 0..2 {
        let log = log.clone();
        let stop = stop.clone();
        handles.push(std::thread::spawn(move || {
            let mut reads = 0;
            // At least 50 reads each, whatever the scheduler did during the appends.
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || reads < 50 {
                let leo = log.log_end_offset();
                if leo == 0 {
                    continue;
                }
                let off = (reads * 7919) % leo;
                let r = log.read(off, 3000, true).unwrap();
                let bytes = r.slice.unwrap().read_bytes().unwrap();
                let got = parse_batches(&bytes, None).unwrap();
                assert!(got[0].header.base_offset <= off && off <= got[0].header.last_offset());
                for w in got.windows(2) {
                    assert_eq!(w[0].header.next_offset(), w[1].header.base_offset);
                }
                reads += 1;
            }
            reads
        }));
    }
    let flusher = {
        let log = log.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                log.flush().unwrap();
            }
        })
    };
    for i in 0..2000i64 {
        let r = log
            .append(
                batch(1 + (i % 3) as usize, NOW + i, "c"),
                AppendOrigin::Client,
                NOW,
            )
            .unwrap();
        if i % 500 == 0 {
            log.maintain(NOW).unwrap();
        }
        assert!(!r.duplicate);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for h in handles {
        assert!(h.join().unwrap() > 0);
    }
    flusher.join().unwrap();
    assert_eq!(log.flush().unwrap(), log.log_end_offset());
    assert_eq!(read_all(&log, 0).len(), 2000);
}

/// Poll (the reaper thread works in the background) for at most 10 s.
fn eventually(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !f() {
        assert!(std::time::Instant::now() < deadline, "timed out: {what}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

fn delete_dirs_in(dir: &Path) -> Vec<String> {
    files_in(dir)
        .into_iter()
        .filter(|n| n.ends_with("-delete") || n.ends_with("-future"))
        .collect()
}

#[test]
fn move_between_log_dirs_keeps_serving_and_waits_for_readers() {
    let d1 = tempfile::tempdir().unwrap();
    let d2 = tempfile::tempdir().unwrap();
    let dirs = vec![d1.path().to_path_buf(), d2.path().to_path_buf()];
    let m = LogManager::open_with(
        dirs.clone(),
        meta(),
        crate::DeleteRetry {
            initial_ms: 10,
            max_ms: 50,
        },
    )
    .unwrap();
    let log = open(&m, small_cfg());
    assert_eq!(log.dir(), d1.path().join("topic-0"));
    for i in 0..40i64 {
        log.append(batch(2, NOW + i, "m"), AppendOrigin::Client, NOW)
            .unwrap();
    }
    let before = read_all(&log, 0);
    let held = log.read(0, 100, true).unwrap().slice.unwrap();

    m.move_log(&tp(0), 1).unwrap();
    assert_eq!(log.dir(), d2.path().join("topic-0"));
    assert!(!d1.path().join("topic-0").exists());
    assert_eq!(read_all(&log, 0), before);
    // The old copy waits for the reader.
    assert_eq!(delete_dirs_in(d1.path()).len(), 1);
    assert!(m.deletion_stats().pending >= 1);
    assert!(held.read_bytes().is_ok());
    drop(held);
    // The reaper removes the directory, then counts it done.
    eventually("old copy removed and counted", || {
        delete_dirs_in(d1.path()).is_empty() && m.deletion_stats().pending == 0
    });

    // The moved log takes appends, and survives a restart in its new place.
    log.append(batch(2, NOW + 100, "m"), AppendOrigin::Client, NOW)
        .unwrap();
    let after = read_all(&log, 0);
    assert_eq!(after.len(), before.len() + 1);
    m.shutdown().unwrap();
    drop(log);
    drop(m);
    let m = LogManager::open(dirs, meta()).unwrap();
    let log = open(&m, small_cfg());
    assert_eq!(log.dir(), d2.path().join("topic-0"));
    assert_eq!(read_all(&log, 0), after);
}

#[test]
fn deleted_log_dir_waits_for_reader_then_goes() {
    let d = tempfile::tempdir().unwrap();
    let m = LogManager::open_with(
        vec![d.path().to_path_buf()],
        meta(),
        crate::DeleteRetry {
            initial_ms: 10,
            max_ms: 50,
        },
    )
    .unwrap();
    let log = open(&m, small_cfg());
    for i in 0..10i64 {
        log.append(batch(2, NOW + i, "d"), AppendOrigin::Client, NOW)
            .unwrap();
    }
    let held = log.read(0, 100, true).unwrap().slice.unwrap();
    m.delete_log(&tp(0)).unwrap();
    assert!(m.get(&tp(0)).is_none());
    assert!(!d.path().join("topic-0").exists());
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(
        delete_dirs_in(d.path()).len(),
        1,
        "removed while a reader held it"
    );
    assert!(held.read_bytes().is_ok());
    drop(held);
    // The reaper removes the directory, then counts the removal done: wait for both.
    eventually("deleted dir removed and counted", || {
        delete_dirs_in(d.path()).is_empty() && m.deletion_stats().pending == 0
    });
}

#[test]
fn leftovers_in_log_dirs_are_ignored_and_reclaimed() {
    let d = tempfile::tempdir().unwrap();
    {
        let m = open_mgr(d.path());
        let log = open(&m, small_cfg());
        log.append(batch(2, NOW, "l"), AppendOrigin::Client, NOW)
            .unwrap();
        m.shutdown().unwrap();
    }
    let pdir = d.path().join("topic-0");
    std::fs::write(d.path().join(".nfs000000000000abcd00000001"), b"x").unwrap();
    std::fs::write(pdir.join(".fuse_hidden0000000100000002"), b"x").unwrap();
    std::fs::create_dir(
        d.path()
            .join(format!("topic-0.{}-future", uuid::Uuid::new_v4().simple())),
    )
    .unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, small_cfg());
    assert_eq!(log.log_end_offset(), 2);
    eventually("leftovers reclaimed", || {
        !files_in(d.path())
            .iter()
            .chain(files_in(&pdir).iter())
            .any(|n| {
                n.starts_with(".nfs") || n.starts_with(".fuse_hidden") || n.ends_with("-future")
            })
    });
    assert_eq!(m.deletion_stats().leftovers_reclaimed, 2);
}

// ---- page-cache drop-behind ----

/// Append batches of `per_batch` records with ~1 KiB values (`b{batch}-r{record}-xxx...`)
/// until the log holds `bytes`; returns the number of batches.
fn fill_log(log: &Log, bytes: u64, per_batch: usize) -> usize {
    let value = "x".repeat(1000);
    let mut n = 0usize;
    while log.size_bytes() < bytes {
        let mut b = BatchBuilder::new();
        for i in 0..per_batch {
            b = b.record(NOW, None, Some(format!("b{n}-r{i}-{value}").as_bytes()));
        }
        log.append(Bytes::from(b.build()), AppendOrigin::Client, NOW)
            .unwrap();
        n += 1;
    }
    n
}

/// Resident page-cache bytes of `file` as util-linux `fincore` reports them.
fn resident(file: &Path) -> u64 {
    let out = std::process::Command::new("fincore")
        .args(["--bytes", "--noheadings", "--raw", "-o", "RES"])
        .arg(file)
        .output()
        .expect("fincore (util-linux) is needed by this test: apt-get install util-linux");
    assert!(out.status.success(), "fincore {}: {out:?}", file.display());
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

/// The segment `.log` files of a partition directory, oldest first.
fn segment_logs(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    v.sort();
    v
}

/// Every batch of the log from its start, as (base offset, bytes), read through `Log::read`.
fn read_batches(log: &Log) -> Vec<(i64, Vec<u8>)> {
    let mut out = Vec::new();
    let mut off = log.log_start_offset();
    loop {
        let r = log.read(off, 1 << 20, true).unwrap();
        let Some(slice) = r.slice else { break };
        let bytes = slice.read_bytes().unwrap();
        for b in parse_batches(&bytes, None).unwrap() {
            validate_batch(&bytes[b.range()]).unwrap();
            out.push((b.header.base_offset, bytes[b.range()].to_vec()));
            off = b.header.next_offset();
        }
    }
    out
}

/// `tempfile::tempdir()` unless that is on tmpfs, where DONTNEED cannot evict anything.
fn disk_tempdir() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let fs = rustix::fs::statfs(d.path()).unwrap();
    // TMPFS_MAGIC
    assert_ne!(
        fs.f_type as u64, 0x0102_1994,
        "the drop-behind tests need a disk-backed TMPDIR, not tmpfs"
    );
    d
}

/// `View::cut_point`: a drop-behind pass's new point lies exactly `keep_bytes` before the
/// end, whether that falls inside a segment, at a boundary or at the end; from a later first
/// segment it is the same point.
#[test]
fn the_drop_point_is_cut_keep_bytes_before_the_end() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, small_cfg());
    for i in 0..40i64 {
        log.append(batch(2, NOW + i, "x"), AppendOrigin::Client, NOW)
            .unwrap();
    }
    let (view, _, _) = log.view();
    let n = view.segs.len();
    assert!(n >= 3, "{n} segments");
    let total = view.bytes_from((0, 0));
    let last = view.limit(n - 1);
    for keep in [0, 1, last, last + 1, total / 2, total - 1, total] {
        let (cut, pos) = view.cut_point(0, keep);
        assert_eq!(view.bytes_from((cut, pos)), keep, "keep {keep}");
        assert!(pos <= view.limit(cut), "keep {keep}");
        if keep < total - view.limit(0) {
            assert_eq!(
                view.cut_point(1, keep),
                (cut, pos),
                "keep {keep} from the second"
            );
        }
    }
    assert_eq!(view.cut_point(0, total + 1), (n - 1, 0));
}

#[test]
fn drop_cache_behind_evicts_old_segments_and_keeps_the_tail() {
    const MIB: u64 = 1 << 20;
    const KEEP: u64 = 4 * MIB;
    let d = disk_tempdir();
    let m = open_mgr(d.path());
    let log = open(
        &m,
        LogConfig {
            segment_bytes: 8 * MIB,
            ..cfg()
        },
    );
    // 40 MiB in batches of 64 records of ~1 KiB values, each value naming its batch.
    let n = fill_log(&log, 40 * MIB, 64);
    assert!(log.segment_count() >= 5, "{} segments", log.segment_count());
    let before = read_batches(&log);
    assert_eq!(before.len(), n);
    let dir = log.dir();
    let files = segment_logs(&dir);
    let total: u64 = files.iter().map(|f| resident(f)).sum();
    // Freshly written pages are resident: the drop below has something to do.
    assert!(
        total > 30 * MIB,
        "only {total} bytes resident before the drop"
    );
    // At open the drop point is the end of the (empty) log: everything is undropped.
    assert_eq!(log.cache_undropped_bytes(), log.size_bytes());
    let rp = log.recovery_point_offset();

    let stats = log.drop_cache_behind(KEEP).unwrap();
    let size = log.size_bytes();
    let cut = size - KEEP;
    assert_eq!(stats.dropped_bytes, cut);
    assert_eq!(log.cache_undropped_bytes(), KEEP);
    assert_eq!(
        log.recovery_point_offset(),
        rp,
        "drop-behind moved the recovery point"
    );

    // Old segments are out of the page cache; the last KEEP bytes are still in it, give or
    // take the folio the cut goes through (the kernel keeps it whole; up to 2 MiB).
    let mut start = 0;
    let mut below_cut = 0;
    let res: Vec<u64> = files.iter().map(|f| resident(f)).collect();
    for (f, &r) in files.iter().zip(&res) {
        let len = std::fs::metadata(f).unwrap().len();
        let expected = (start + len).saturating_sub(cut).min(len);
        let slack = if expected == 0 {
            64 * 1024
        } else if expected == len {
            4096
        } else {
            2 * MIB
        };
        assert!(
            r + 4096 >= expected && r <= expected + slack,
            "{}: {r} bytes resident, expected about {expected}: {res:?}",
            f.display()
        );
        below_cut += usize::from(start < cut);
        start += len;
    }
    assert_eq!(start, size);
    // Nothing was flushed: every segment with data below the cut needed an fdatasync.
    assert_eq!(stats.fdatasyncs as usize, below_cut);

    // A second call has nothing to do.
    assert_eq!(log.drop_cache_behind(KEEP).unwrap(), DropStats::default());

    // The data reads back unchanged (now from disk), every batch with its own values.
    let after = read_batches(&log);
    assert_eq!(after, before);
    for (i, (_, bytes)) in after.iter().enumerate() {
        let needle = format!("b{i}-r63-");
        assert!(
            bytes.windows(needle.len()).any(|w| w == needle.as_bytes()),
            "batch {i} lost its values"
        );
    }

    // Once flushed, nothing more needs an fdatasync.
    log.append(batch(10, NOW, "z"), AppendOrigin::Client, NOW)
        .unwrap();
    log.flush().unwrap();
    let s = log.drop_cache_behind(0).unwrap();
    assert_eq!(
        (s.fdatasyncs, s.dropped_bytes),
        (0, KEEP + (log.size_bytes() - size))
    );
    assert_eq!(log.cache_undropped_bytes(), 0);
}

/// Pages below the drop point that a reader brought back (here a plain read of the file, as
/// the kernel's readahead for a lagging consumer does) are not advised out by the next
/// drop-behind pass, also when the point passes the end of their segment: only what lies
/// above the previous point is. They are the read-back's to drop once read.
#[test]
fn drop_cache_behind_leaves_pages_read_back_below_the_point() {
    use std::os::unix::fs::FileExt;
    const MIB: u64 = 1 << 20;
    const KEEP: u64 = 4 * MIB;
    let d = disk_tempdir();
    let m = open_mgr(d.path());
    let log = open(
        &m,
        LogConfig {
            segment_bytes: 32 * MIB,
            ..cfg()
        },
    );
    fill_log(&log, 24 * MIB, 64);
    assert_eq!(log.segment_count(), 1);
    let first = segment_logs(&log.dir()).remove(0);
    log.drop_cache_behind(KEEP).unwrap();
    let point = log.size_bytes() - KEEP;
    assert!(resident(&first) <= KEEP + 2 * MIB);

    // A reader behind the point: [4 MiB, 12 MiB) comes back into the page cache.
    let f = std::fs::File::open(&first).unwrap();
    let mut buf = vec![0u8; MIB as usize];
    for i in 4..12 {
        f.read_exact_at(&mut buf, i * MIB).unwrap();
    }
    // Producers go on: the first segment is sealed, and the next pass moves the point into
    // the second, past the first's end.
    fill_log(&log, 48 * MIB, 64);
    assert!(log.segment_count() >= 2);
    let s = log.drop_cache_behind(KEEP).unwrap();
    assert_eq!(s.dropped_bytes, log.size_bytes() - KEEP - point);
    let r = resident(&first);
    // What was read back stays; readahead may have brought more, up to the folio holding the
    // old point, which the pass advised out. So no more than [4 MiB, point) is resident, and
    // what was written above the old point is out.
    assert!(
        r + 4096 >= 8 * MIB && r <= point - 2 * MIB,
        "{r} bytes of the sealed segment resident; the read-back region is 8 MiB, the old \
         point at {point}"
    );
}

#[test]
fn drop_cache_behind_survives_deletion_roll_and_restart() {
    let d = disk_tempdir();
    let m = open_mgr(d.path());
    let log = open(&m, small_cfg());
    for i in 0..40 {
        log.append(batch(5, NOW, &format!("a{i}")), AppendOrigin::Client, NOW)
            .unwrap();
    }
    // The drop point at the end of a segment that DeleteRecords then removes.
    log.drop_cache_behind(0).unwrap();
    assert_eq!(log.cache_undropped_bytes(), 0);
    log.roll(NOW).unwrap();
    for i in 0..40 {
        log.append(batch(5, NOW, &format!("b{i}")), AppendOrigin::Client, NOW)
            .unwrap();
    }
    assert!(log.cache_undropped_bytes() > 0);
    // A reader holds the oldest segment through its deletion.
    let held = log.read(log.log_start_offset(), 100, true).unwrap();
    let segs = log.segment_count();
    log.delete_records_before(log.log_end_offset() - 5).unwrap();
    assert!(log.segment_count() < segs);
    // Restarts from the first remaining segment; never panics.
    let undropped = log.cache_undropped_bytes();
    assert_eq!(undropped, log.size_bytes());
    let s = log.drop_cache_behind(0).unwrap();
    assert_eq!(s.dropped_bytes, undropped);
    drop(held);
    let leo = log.log_end_offset();
    drop(log);
    m.shutdown().unwrap();
    drop(m);
    // After a restart the drop point is the end: no burst.
    let m = open_mgr(d.path());
    let log = open(&m, small_cfg());
    assert_eq!(log.log_end_offset(), leo);
    assert_eq!(log.cache_undropped_bytes(), 0);
    assert_eq!(log.drop_cache_behind(0).unwrap(), DropStats::default());
    // A deleted log is left alone.
    log.append(batch(5, NOW, "c"), AppendOrigin::Client, NOW)
        .unwrap();
    m.delete_log(&tp(0)).unwrap();
    assert_eq!(log.drop_cache_behind(0).unwrap(), DropStats::default());
}

#[test]
fn drop_cache_behind_starts_over_after_a_move() {
    let d1 = disk_tempdir();
    let d2 = disk_tempdir();
    let m = LogManager::open(
        vec![d1.path().to_path_buf(), d2.path().to_path_buf()],
        meta(),
    )
    .unwrap();
    let log = open(&m, small_cfg());
    for i in 0..40 {
        log.append(batch(5, NOW, &format!("a{i}")), AppendOrigin::Client, NOW)
            .unwrap();
    }
    let before = read_all(&log, 0);
    log.drop_cache_behind(0).unwrap();
    assert_eq!(log.cache_undropped_bytes(), 0);
    let target = usize::from(log.dir().starts_with(d1.path()));
    m.move_log(&tp(0), target).unwrap();
    // The copy went through the page cache: all of it is undropped again.
    assert_eq!(log.cache_undropped_bytes(), log.size_bytes());
    let s = log.drop_cache_behind(0).unwrap();
    assert_eq!(s.dropped_bytes, log.size_bytes());
    assert_eq!(read_all(&log, 0), before);
}

// ---- write-behind ----

/// The writeback point starts at the end of the log at open, moves over everything a pass
/// started and waited for (across segments; the active segment's partial last page waits
/// for a later pass), and a log with less than `min_bytes` after it is left alone. Nothing
/// about durability moves.
#[test]
fn writeback_moves_its_point_over_what_it_wrote() {
    let d = disk_tempdir();
    let m = open_mgr(d.path());
    let log = open(&m, small_cfg());
    assert_eq!(log.unwritten_bytes(), 0);
    assert!(log
        .start_writeback(1, WritebackEnd::PageBoundary)
        .unwrap()
        .is_none());
    for i in 0..40 {
        log.append(batch(5, NOW, &format!("a{i}")), AppendOrigin::Client, NOW)
            .unwrap();
    }
    assert!(log.segment_count() > 1, "the appends span segments");
    let size = log.size_bytes();
    assert_eq!(log.unwritten_bytes(), size);
    assert!(log
        .start_writeback(size + 1, WritebackEnd::PageBoundary)
        .unwrap()
        .is_none());
    assert!(
        log.start_writeback(size, WritebackEnd::PageBoundary)
            .unwrap()
            .is_none(),
        "the partial last page waits"
    );
    let started = log
        .start_writeback(1, WritebackEnd::PageBoundary)
        .unwrap()
        .expect("enough to write");
    // All of it but the active segment's last partial page.
    let written = started.bytes;
    assert!(
        written <= size && size - written < 4096,
        "{written} of {size}"
    );
    // Appends between the two phases stay unwritten.
    append_batches(&log, 40);
    assert_eq!(log.finish_writeback(started).unwrap(), written);
    assert_eq!(log.unwritten_bytes(), log.size_bytes() - written);
    let rest = log
        .start_writeback(1, WritebackEnd::PageBoundary)
        .unwrap()
        .expect("the later batches");
    log.finish_writeback(rest).unwrap();
    assert!(log.unwritten_bytes() < 4096, "{}", log.unwritten_bytes());
    // To the end, partial page included: nothing is left.
    if let Some(tail) = log.start_writeback(1, WritebackEnd::End).unwrap() {
        log.finish_writeback(tail).unwrap();
    }
    assert_eq!(log.unwritten_bytes(), 0);
    assert_eq!(log.synced_offset(), 0, "write-behind is not a flush");
    assert!(log.failure().is_none());
}

/// Waiting for writeback can report (and clear) a writeback error of the open file, as an
/// `fdatasync` does: a failed wait fails the log, and no later flush succeeds.
#[test]
fn failed_writeback_wait_fails_the_log() {
    let d = disk_tempdir();
    let m = open_mgr(d.path());
    let log = open(
        &m,
        LogConfig {
            flush_messages: 1,
            ..small_cfg()
        },
    );
    append_batches(&log, 20);
    let started = log
        .start_writeback(1, WritebackEnd::PageBoundary)
        .unwrap()
        .expect("something to write");
    log.faults.lock().writeback_wait = true;
    assert!(log.finish_writeback(started).is_err());
    assert!(matches!(log.failure(), Some(LogFailure::SyncFailed { .. })));
    assert!(flush_refused(log.sync_appended()));
    assert!(
        flush_refused(log.sync_appended()),
        "a later flush trusted the page cache"
    );
    assert!(
        log.start_writeback(1, WritebackEnd::End).is_err(),
        "a failed log is not written back"
    );
    assert!(refused_by_failed_log(log.append(
        batch(1, NOW, "c"),
        AppendOrigin::Client,
        NOW
    )));
}

/// A new segment's `.log` gets its extent anchors (where the volume supports
/// `fallocate(KEEP_SIZE)`) without any change to its length or its data.
#[test]
fn new_segments_are_anchored_and_their_length_is_the_data() {
    use std::os::unix::fs::MetadataExt;
    let d = disk_tempdir();
    // Does this volume keep KEEP_SIZE allocations? Asked of a scratch file beside the log.
    let probe = std::fs::File::create(d.path().join("probe")).unwrap();
    let supported = rustix::fs::fallocate(
        &probe,
        rustix::fs::FallocateFlags::KEEP_SIZE,
        crate::segment::ANCHOR_OFFSET,
        4096,
    )
    .is_ok();
    drop(probe);
    std::fs::remove_file(d.path().join("probe")).unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, small_cfg());
    let seg0 = log.dir().join(sluice_format::segment_file_name(
        0,
        sluice_format::SegmentFileKind::Log,
    ));
    let stat = std::fs::metadata(&seg0).unwrap();
    assert_eq!(stat.len(), 0);
    if supported {
        assert!(
            stat.blocks() * 512 >= crate::segment::ANCHORS * 4096,
            "{} blocks of 512 bytes",
            stat.blocks()
        );
    }
    for i in 0..40 {
        log.append(batch(5, NOW, &format!("a{i}")), AppendOrigin::Client, NOW)
            .unwrap();
    }
    assert!(log.segment_count() > 1, "rolled");
    let on_disk: u64 = std::fs::read_dir(log.dir())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| e.metadata().unwrap().len())
        .sum();
    assert_eq!(
        on_disk,
        log.size_bytes(),
        "the anchors add nothing to the lengths"
    );
    drop(log);
    drop(m);
    // Recovered (it reads each `.log` to its length), every batch reads back.
    let (_m, log) = unclean_reopen(d.path());
    assert_eq!(log.log_end_offset(), 200);
    assert_eq!(read_all(&log, 0).len(), 40);
}

/// The spare files in a partition directory: (name, inode).
fn spares(pdir: &Path) -> Vec<(String, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut v: Vec<(String, u64)> = std::fs::read_dir(pdir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".spare"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().ino(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn a_roll_renames_the_files_made_ahead_of_it() {
    use std::os::unix::fs::MetadataExt;
    let d = tempfile::tempdir().unwrap();
    let pdir = d.path().join("topic-0");
    let m = open_mgr(d.path());
    let log = open(&m, small_cfg());
    log.prepare_spare();
    assert!(
        spares(&pdir).is_empty(),
        "none while the active segment is under half full"
    );
    let mut seq = 0;
    while log.shared.read().active_size < 500 {
        log.append(pbatch(7, 0, seq, 2), AppendOrigin::Client, NOW)
            .unwrap();
        seq += 2;
    }
    log.prepare_spare();
    let made = spares(&pdir);
    let kinds: Vec<&str> = made
        .iter()
        .map(|(n, _)| n.rsplit('.').nth(1).unwrap())
        .collect();
    assert_eq!(kinds, ["index", "log", "snapshot", "timeindex"], "{made:?}");
    let ino = |suffix: &str| made.iter().find(|(n, _)| n.ends_with(suffix)).unwrap().1;
    let (log_ino, snap_ino) = (ino(".log.spare"), ino(".snapshot.spare"));
    log.prepare_spare();
    assert_eq!(spares(&pdir), made, "one spare at a time");

    let first_base = log.shared.read().segments.last().unwrap().base_offset;
    while log.shared.read().segments.last().unwrap().base_offset == first_base {
        log.append(pbatch(7, 0, seq, 2), AppendOrigin::Client, NOW)
            .unwrap();
        seq += 2;
    }
    let base = log.shared.read().segments.last().unwrap().base_offset;
    assert!(spares(&pdir).is_empty(), "the roll used them all");
    let meta = |name: String| std::fs::metadata(pdir.join(name)).unwrap();
    assert_eq!(meta(format!("{base:020}.log")).ino(), log_ino);
    assert_eq!(meta(format!("{base:020}.snapshot")).ino(), snap_ino);
    for kind in ["index", "timeindex"] {
        assert!(pdir.join(format!("{base:020}.{kind}")).exists());
    }
    let leo = log.log_end_offset();

    // Half full again, a spare is made; then a crash. The open removes the spare and finds
    // the producer state in the snapshot the roll wrote (a duplicate is recognised).
    while log.shared.read().active_size < 500 {
        log.append(pbatch(7, 0, seq, 2), AppendOrigin::Client, NOW)
            .unwrap();
        seq += 2;
    }
    log.prepare_spare();
    assert_eq!(spares(&pdir).len(), 4);
    let leo2 = log.log_end_offset();
    drop(log);
    drop(m);
    let (_m, log) = unclean_reopen(d.path());
    assert!(spares(&pdir).is_empty(), "an open removes spares");
    assert_eq!(log.log_end_offset(), leo2);
    assert!(leo < leo2);
    let dup = log
        .append(pbatch(7, 0, seq - 2, 2), AppendOrigin::Client, NOW)
        .unwrap();
    assert!(dup.duplicate, "producer state survived: {dup:?}");
}

#[test]
fn a_checkpoint_file_that_would_not_change_is_not_written_again() {
    use std::os::unix::fs::MetadataExt;
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, small_cfg());
    log.append(batch(2, NOW, "x"), AppendOrigin::Client, NOW)
        .unwrap();
    let ino = |name: &str| std::fs::metadata(d.path().join(name)).unwrap().ino();
    let names = [
        "recovery-point-offset-checkpoint",
        "log-start-offset-checkpoint",
        "cleaner-offset-checkpoint",
    ];
    m.checkpoint().unwrap();
    let first: Vec<u64> = names.iter().map(|n| ino(n)).collect();
    m.checkpoint().unwrap();
    let again: Vec<u64> = names.iter().map(|n| ino(n)).collect();
    assert_eq!(
        first, again,
        "nothing changed, nothing written (a write renames a new file in)"
    );
    log.flush().unwrap();
    m.checkpoint().unwrap();
    assert_ne!(ino(names[0]), first[0], "the recovery point moved");
    assert_eq!(ino(names[1]), first[1]);
    assert_eq!(ino(names[2]), first[2]);
    let text = std::fs::read_to_string(d.path().join(names[0])).unwrap();
    assert!(text.contains("topic 0 2"), "{text}");
}

/// Advise every segment file under `dir` out of the page cache again (after an fsync:
/// DONTNEED evicts clean pages only).
fn advise_out_segments(dir: &std::path::Path) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            advise_out_segments(&path);
        } else if path.extension().is_some_and(|e| e == "log") {
            let file = std::fs::File::open(&path).unwrap();
            file.sync_all().unwrap();
            rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        }
    }
}

/// A read that would wait for the volume is refused by `read_cached`, and answered the same
/// by `read_isolated`, which then leaves what it read in the page cache.
#[test]
fn read_cached_refuses_what_is_not_in_the_page_cache() {
    const MIB: u64 = 1 << 20;
    let d = disk_tempdir();
    let m = open_mgr(d.path());
    let log = open(&m, cfg());
    fill_log(&log, 4 * MIB, 16);
    assert!(log.segment_count() >= 3, "{} segments", log.segment_count());
    let read = |cached: bool, offset: i64| {
        let r = if cached {
            log.read_cached(offset, 256 * 1024, true, Isolation::ReadUncommitted)
        } else {
            log.read_isolated(offset, 256 * 1024, true, Isolation::ReadUncommitted)
        };
        r.map(|r| {
            let s = r.slice.unwrap();
            (s.position, s.len, s.read_bytes().unwrap())
        })
    };
    let middle = log.log_end_offset() / 2;
    // Just written: in the page cache, and the same answer either way.
    let warm = read(false, middle).unwrap();
    assert_eq!(read(true, middle).unwrap(), warm);
    assert!(warm.1 > 0);

    // DONTNEED is advice: a page the kernel holds busy for a moment (a per-CPU batch on a
    // loaded machine) stays. Advise the segments again a few times before calling the
    // answer wrong.
    log.drop_cache_behind(0).unwrap();
    let mut tries = 0;
    loop {
        match read(true, middle) {
            Err(ReadError::WouldBlock { tp: t }) => {
                assert_eq!(t, tp(0));
                break;
            }
            Ok(answer) if answer == warm && tries < 20 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
                advise_out_segments(d.path());
            }
            other => panic!("a read of evicted data was answered from the cache: {other:?}"),
        }
    }
    // The waiting read finds the same batches, and brings their headers back in.
    assert_eq!(read(false, middle).unwrap(), warm);
    assert_eq!(read(true, middle).unwrap(), warm);

    // After a restart the sealed segments' indexes are not loaded yet: reading them is
    // refused until a waiting read has loaded them, cached pages or not.
    drop(log);
    m.shutdown().unwrap();
    drop(m);
    let m = open_mgr(d.path());
    let log = open(&m, cfg());
    let r = log.read_cached(0, 1024, true, Isolation::ReadUncommitted);
    assert!(matches!(r, Err(ReadError::WouldBlock { .. })), "{r:?}");
    let first = log
        .read_isolated(0, 1024, true, Isolation::ReadUncommitted)
        .unwrap()
        .slice
        .unwrap();
    let again = log
        .read_cached(0, 1024, true, Isolation::ReadUncommitted)
        .unwrap()
        .slice
        .unwrap();
    assert_eq!((again.position, again.len), (first.position, first.len));
}

/// What a read brings back from below the drop point (a consumer far behind) is advised out
/// again by the second `drop_read_back` after it, not by the first (the region may not have
/// been sent yet); a read at the tail is not recorded. The kernel keeps a large folio that
/// reaches past the advised range, so the region read is larger than the largest folio and
/// what must be gone is what lies below the last folio boundary inside it.
#[test]
fn reads_from_below_the_drop_point_are_advised_out_again() {
    const MIB: u64 = 1 << 20;
    let d = disk_tempdir();
    let m = open_mgr(d.path());
    let log = open(
        &m,
        LogConfig {
            segment_bytes: 16 * MIB,
            ..cfg()
        },
    );
    fill_log(&log, 6 * MIB, 16);
    assert_eq!(log.segment_count(), 1);
    let read = |offset: i64, max: u32| {
        log.read_isolated(offset, max, true, Isolation::ReadUncommitted)
            .unwrap()
            .slice
            .unwrap()
    };
    let cached = |s: &FileSlice| resident_in(&s.file, s.position, u64::from(s.len));
    let pages = |s: &FileSlice| page_span(s.position, u64::from(s.len));
    // Everything but the last 256 KiB dropped.
    log.drop_cache_behind(256 * 1024).unwrap();
    let old = read(0, 3 * MIB as u32);
    old.load().unwrap();
    assert_eq!(cached(&old), pages(&old));
    let below = (old.position + u64::from(old.len)) / MAX_FOLIO * MAX_FOLIO;
    assert!(
        below > old.position,
        "the region read ends inside its first folio"
    );
    let tail = read(log.log_end_offset() - 1, 256 * 1024);
    assert!(cached(&tail) > 0);
    // Recorded now: the first call only ages it.
    assert_eq!(log.drop_read_back(), 0);
    assert_eq!(cached(&old), pages(&old), "evicted before it could be sent");
    assert_eq!(log.drop_read_back(), u64::from(old.len));
    assert_eq!(
        resident_in(&old.file, old.position, below - old.position),
        0,
        "the read-back region is still in the page cache"
    );
    assert!(cached(&tail) > 0, "the tail was evicted");
    // Nothing more to do until something is read back again.
    assert_eq!(log.drop_read_back(), 0);
    assert_eq!(log.drop_read_back(), 0);
}

/// The largest page-cache folio (as `cache.rs` assumes it).
const MAX_FOLIO: u64 = 2 << 20;

#[allow(unsafe_code)]
fn page_bytes() -> u64 {
    // SAFETY: sysconf reads a constant of the system.
    u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap()
}

/// Bytes of the pages overlapping `[pos, pos + len)`.
fn page_span(pos: u64, len: u64) -> u64 {
    let page = page_bytes();
    let start = pos / page * page;
    (pos + len).div_ceil(page) * page - start
}

/// Bytes of the pages overlapping `[pos, pos + len)` of `file` that are in the page cache, as
/// mincore(2) reports them over a mapping of the range (mapping faults nothing in). Unlike a
/// RWF_NOWAIT read, a page marked for readahead counts as the resident page it is.
#[allow(unsafe_code)]
fn resident_in(file: &std::fs::File, pos: u64, len: u64) -> u64 {
    use std::os::fd::AsRawFd;
    if len == 0 {
        return 0;
    }
    let page = page_bytes();
    let start = pos / page * page;
    let span = page_span(pos, len) as usize;
    let mut vec = vec![0u8; span / page as usize];
    // SAFETY: a fresh read-only shared mapping of an open file, unmapped below; mincore
    // writes one byte per page of it into `vec`, which is that long.
    unsafe {
        let addr = libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            start as libc::off_t,
        );
        assert_ne!(
            addr,
            libc::MAP_FAILED,
            "mmap: {}",
            std::io::Error::last_os_error()
        );
        let rc = libc::mincore(addr, span, vec.as_mut_ptr());
        let err = std::io::Error::last_os_error();
        libc::munmap(addr, span);
        assert_eq!(rc, 0, "mincore: {err}");
    }
    vec.iter().filter(|b| *b & 1 == 1).count() as u64 * page
}

/// Two readers behind the drop point in one segment (two consumer groups): dropping what
/// the one further ahead read leaves what the kernel's readahead brought in for the one
/// behind it; a read recorded while a pass held the point is dropped only below the point.
#[test]
fn read_back_drops_the_ranges_read_only() {
    use std::os::unix::fs::FileExt;
    const MIB: u64 = 1 << 20;
    let d = disk_tempdir();
    let m = open_mgr(d.path());
    let log = open(
        &m,
        LogConfig {
            segment_bytes: 64 * MIB,
            ..cfg()
        },
    );
    fill_log(&log, 40 * MIB, 64);
    assert_eq!(log.segment_count(), 1);
    let path = segment_logs(&log.dir()).remove(0);
    log.drop_cache_behind(4 * MIB).unwrap();
    let point = log.size_bytes() - 4 * MIB;
    assert!(point > 36 * MIB && point < 37 * MIB, "{point}");
    let tail = resident(&path);
    assert!(tail <= 6 * MIB, "{tail}");

    // Brought in with readahead off, so that the page cache holds exactly these: the reader
    // behind read [4, 5) MiB and its readahead took [5, 20) MiB; the reader ahead read
    // [24, 28) MiB.
    let f = std::fs::File::open(&path).unwrap();
    rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::Random).unwrap();
    let mut buf = vec![0u8; MIB as usize];
    // On a loaded machine the kernel may evict pages just read before they are counted: read
    // them again (a few times at most) until they are all resident, the test's premise.
    for _ in 0..3 {
        for i in (4..20).chain(24..28) {
            f.read_exact_at(&mut buf, i * MIB).unwrap();
        }
        if resident(&path) >= tail + 20 * MIB - 4096 {
            break;
        }
    }
    assert!(resident(&path) >= tail + 20 * MIB - 4096);
    log.note_read_back(0, 4 * MIB, MIB);
    log.note_read_back(0, 24 * MIB, 2 * MIB);
    log.note_read_back(0, 26 * MIB, 2 * MIB);
    // A read at the tail while a pass holds the point: recorded whole, dropped only below the
    // point.
    {
        let _pass = log.drop_point.lock();
        log.note_read_back(0, point - 2 * MIB, 4 * MIB);
    }
    assert_eq!(log.drop_read_back(), 0);
    // 1 + 4 MiB, and the 2 MiB of the tail read below the point.
    assert_eq!(log.drop_read_back(), 7 * MIB);
    let r = resident(&path);
    // The readahead of the reader behind stays: [5, 20) MiB, and the 2 MiB folio holding
    // 5 MiB may keep [4, 5) too. The reader ahead's range, and the region below the point
    // read at the tail, are out; the tail above the point is not.
    assert!(
        r + 4096 >= 15 * MIB && r <= 16 * MIB + tail,
        "{r} bytes resident: 15-16 MiB of readahead and {tail} of the tail expected"
    );
    let above = (point + 2 * MIB - point % (2 * MIB), log.size_bytes());
    let mut buf = vec![0u8; (above.1 - above.0) as usize];
    assert_eq!(
        crate::segment::pread_cached(&f, &mut buf, above.0).unwrap(),
        buf.len(),
        "the tail above the point was advised out"
    );
}

#[test]
fn file_slice_reads_a_range_of_itself() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("f");
    std::fs::write(&path, (0..=255u8).collect::<Vec<u8>>()).unwrap();
    let slice = FileSlice {
        file: Arc::new(std::fs::File::open(&path).unwrap()),
        position: 16,
        len: 32,
    };
    assert_eq!(
        &slice.read_bytes().unwrap()[..],
        &(16..48u8).collect::<Vec<u8>>()[..]
    );
    assert_eq!(&slice.read_range(8, 4).unwrap()[..], &[24, 25, 26, 27]);
    // Clamped to the region.
    assert_eq!(&slice.read_range(30, 100).unwrap()[..], &[46, 47]);
    assert!(slice.read_range(40, 4).unwrap().is_empty());
}

/// `FileSlice::load` brings a region that is not in the page cache back into it, whole.
#[test]
fn file_slice_load_brings_the_region_into_the_page_cache() {
    const MIB: usize = 1 << 20;
    let d = disk_tempdir();
    let path = d.path().join("f");
    let data: Vec<u8> = (0..4 * MIB).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    let file = std::fs::File::open(&path).unwrap();
    // DONTNEED evicts clean pages only.
    file.sync_all().unwrap();
    let cached = |pos: u64, len: usize| {
        crate::segment::pread_cached(&file, &mut vec![0; len], pos).unwrap_or(0)
    };
    // DONTNEED is advice: on a loaded machine a page may stay a moment; advise again.
    for _ in 0..20 {
        rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        if cached(MIB as u64, 4096) == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert_eq!(cached(MIB as u64, 4096), 0, "still cached after DONTNEED");
    let slice = FileSlice {
        file: Arc::new(file.try_clone().unwrap()),
        position: MIB as u64,
        len: 2 * MIB as u32,
    };
    slice.load().unwrap();
    assert_eq!(
        resident_in(&file, MIB as u64, 2 * MIB as u64),
        2 * MIB as u64,
        "not all of the region is in the page cache"
    );
    assert_eq!(&slice.read_bytes().unwrap()[..], &data[MIB..3 * MIB]);
    // A region past the end of the file is an error, not a hang.
    let past = FileSlice {
        position: 3 * MIB as u64,
        ..slice
    };
    assert_eq!(
        past.load().unwrap_err().kind(),
        std::io::ErrorKind::UnexpectedEof
    );
}

/// `flush.messages=1` (every acknowledgement waits for an fsync): readers see nothing past
/// the synced mark, as Kafka flushes such an append before its high watermark moves. A
/// record a consumer saw then cannot vanish when the fsync fails (a consume-transform-produce
/// application would process it twice: the fault suite found it); a topic without the policy
/// reads to the log end.
#[test]
fn under_flush_messages_1_readers_see_only_what_is_fsynced() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, synced_each());
    log.append(batch(2, NOW, "a"), AppendOrigin::Client, NOW)
        .unwrap();
    assert_eq!(read_all(&log, 0), vec![], "read before its fsync");
    assert_eq!(log.high_watermark(), 0);
    log.sync_appended().unwrap();
    assert_eq!(read_all(&log, 0), vec![(0, 1)]);
    assert_eq!(log.high_watermark(), 2);

    // The next append's fsync fails: its records were never readable, and the re-opened log
    // does not have them.
    log.faults.lock().flush_sync = true;
    log.append(batch(3, NOW, "b"), AppendOrigin::Client, NOW)
        .unwrap();
    assert_eq!(read_all(&log, 0), vec![(0, 1)]);
    assert!(log.sync_appended().is_err());
    assert_eq!(read_all(&log, 0), vec![(0, 1)]);

    // Without the policy, the log end.
    let other = m.open_log(&tp(1), topic_id(), cfg(), 3).unwrap();
    other
        .append(batch(2, NOW, "c"), AppendOrigin::Client, NOW)
        .unwrap();
    assert_eq!(read_all(&other, 0), vec![(0, 1)]);
    // Turned on: bounded from the next fsync on, which makes what was readable durable.
    other.set_config(synced_each());
    other.sync_appended().unwrap();
    other
        .append(batch(1, NOW, "d"), AppendOrigin::Client, NOW)
        .unwrap();
    assert_eq!(read_all(&other, 0), vec![(0, 1)]);
    other.sync_appended().unwrap();
    assert_eq!(read_all(&other, 0), vec![(0, 1), (2, 2)]);
}

/// A deleted topic's directory without `partition.metadata` (imported from a Kafka before
/// topic ids, never opened here) is put aside for the deletion naming this broker, so that
/// no topic created later under the name opens (and stamps as its own) the deleted data; a
/// directory whose `partition.metadata` cannot be read is left, and the refusal says so (the
/// deletion record stays, for a later try).
#[test]
fn a_deleted_topics_directory_without_or_with_unreadable_metadata() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let gone = TopicPartition {
        topic: "gone".into(),
        partition: 0,
    };
    let dir = d.path().join("gone-0");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("00000000000000000000.log"), b"kafka data").unwrap();
    assert!(m
        .retire_stray_dir(&gone, uuid::Uuid::from_u128(5), &|| Ok(()))
        .unwrap());
    assert!(!dir.exists());
    // Unreadable: a directory where the file should be.
    let bad = TopicPartition {
        topic: "bad".into(),
        partition: 0,
    };
    let dir = d.path().join("bad-0");
    std::fs::create_dir_all(dir.join("partition.metadata")).unwrap();
    assert!(m
        .retire_stray_dir(&bad, uuid::Uuid::from_u128(5), &|| Ok(()))
        .is_err());
    assert!(dir.exists());
    // Not there: nothing to do.
    let none = TopicPartition {
        topic: "none".into(),
        partition: 0,
    };
    assert!(!m
        .retire_stray_dir(&none, uuid::Uuid::from_u128(5), &|| Ok(()))
        .unwrap());
}

/// acks=all makes appends durable with `sync_appended`, which fsyncs the `.log` but not the
/// active segment's `.index`/`.timeindex`; their entries are written every 128 entries, so a
/// partition acknowledged in full kept two dirty files the cache may not close, until the
/// segment rolled or a full flush (adversary finding on 3a5d161). Maintenance flushes an idle
/// partition's (`IDLE_FLUSH_MS` without appends).
#[test]
fn an_idle_partition_acknowledged_in_full_pins_no_file() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, cfg());
    let before = log.shared.read().segments.last().unwrap().base_offset;
    let mut n = 0;
    // About 700 KiB in the first segment, each append acknowledged as acks=all is.
    while n < 140 {
        log.append(batch(200, NOW + n, "acked"), AppendOrigin::Client, NOW)
            .unwrap();
        log.sync_appended().unwrap();
        n += 1;
    }
    let segs = log.shared.read().segments.clone();
    let active = segs.last().unwrap();
    assert_eq!(
        active.base_offset, before,
        "rolled: the test needs one segment"
    );
    assert!(!active.log.dirty(), "the .log is synced by sync_appended");
    assert!(
        active.has_unsynced_writes(),
        "precondition: sync_appended left index files unsynced"
    );
    log.maintain(NOW + crate::log::IDLE_FLUSH_MS - 1).unwrap();
    assert!(active.has_unsynced_writes(), "flushed before it was idle");
    log.maintain(NOW + crate::log::IDLE_FLUSH_MS).unwrap();
    assert_eq!(log.recovery_point_offset(), log.log_end_offset());
    assert!(
        !active.has_unsynced_writes(),
        "an idle partition whose every append was acknowledged keeps dirty (never closed) files: \
         .index {} .timeindex {}",
        active.index_file.dirty(),
        active.time_file.dirty()
    );
}

/// A full flush (maintenance's of an idle partition, `flush.ms`) takes its snapshot of the
/// segments and the log end, fsyncs, then moves the recovery point; a roll in between seals
/// the segment it synced, writing its final time index entry after that fsync. The recovery
/// point stops at that segment, which the next flush syncs, instead of passing it with an
/// unsynced write below it (adversary finding on 2a919c0).
#[test]
fn a_full_flush_racing_a_roll_stops_the_recovery_point_at_the_sealed_segment() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, cfg());
    let mut n = 0;
    while n < 140 {
        log.append(batch(200, NOW + n, "acked"), AppendOrigin::Client, NOW)
            .unwrap();
        log.sync_appended().unwrap();
        n += 1;
    }
    // Small batches with newer timestamps (the second gets no index entry of its own), so
    // the seal adds the segment's final time-index entry.
    for ts in [NOW + 100_000, NOW + 200_000] {
        log.append(batch(1, ts, "last"), AppendOrigin::Client, NOW)
            .unwrap();
        log.sync_appended().unwrap();
    }
    let active = log.shared.read().segments.last().unwrap().clone();
    assert!(
        active.has_unsynced_writes(),
        "precondition: dirty index files"
    );
    // Hold the flush between its index fsyncs and its recovery-point update (it takes the
    // segment's txn-index lock right after syncing the .timeindex).
    let held = active.txn.lock();
    let l2 = log.clone();
    let t = std::thread::spawn(move || l2.maintain(NOW + crate::log::IDLE_FLUSH_MS));
    let t0 = std::time::Instant::now();
    while active.index_file.dirty() || active.time_file.dirty() {
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(20),
            "flush never synced"
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    std::thread::sleep(std::time::Duration::from_millis(50));
    // An append arrives now and rolls (segment.ms, a full segment: any roll).
    let ti_before = active
        .meta
        .read()
        .time_index
        .as_ref()
        .map_or(0, |v| v.len());
    log.roll(NOW + crate::log::IDLE_FLUSH_MS).unwrap();
    let ti_after = active
        .meta
        .read()
        .time_index
        .as_ref()
        .map_or(0, |v| v.len());
    eprintln!(
        "time index {ti_before} -> {ti_after}; dirty: .log {} .index {} .timeindex {}",
        active.log.dirty(),
        active.index_file.dirty(),
        active.time_file.dirty()
    );
    drop(held);
    t.join().unwrap().unwrap();
    // What the broker's 0.5 s check and a shutdown's flush do next.
    log.flush_sealed().unwrap();
    log.flush().unwrap();
    let rp = log.recovery_point_offset();
    for seg in log.shared.read().segments.iter() {
        if seg.next_offset() <= rp {
            assert!(
                !seg.has_unsynced_writes(),
                "segment {} lies below the recovery point {rp} with unsynced writes \
                 (.index {} .timeindex {})",
                seg.base_offset,
                seg.index_file.dirty(),
                seg.time_file.dirty()
            );
        }
    }
}

/// A flush finds the segments below the recovery point with unsynced writes by scanning from
/// the end and stopping at the first clean one, since only a seal leaves one there unsynced:
/// an index rebuild syncs what it rewrote (adversary finding on ee4cfd5). The loader's rebuild of a sealed
/// segment's invalid index files (`loader.rs`, "index files missing or invalid; rebuilding",
/// `write_index_files` through `for_write`) dirties an OLD segment: the open fsyncs only the
/// segments at or above the recovery point (and none at all after a clean shutdown), and
/// every later flush stops at the newer clean segments. Its rebuilt `.index`/`.timeindex`
/// lie below the recovery point, recorded at the next checkpoint, never fsynced (a crash can
/// leave them empty, which the open's cheap sanity check accepts: no time index entries, so
/// a wrong largest timestamp for retention and ListOffsets), and the file cache can never
/// close them.
#[test]
fn a_sealed_segment_whose_indexes_the_open_rebuilt_is_synced() {
    for clean in [true, false] {
        let d = tempfile::tempdir().unwrap();
        {
            let m = open_mgr(d.path());
            let log = open(&m, small_cfg());
            for i in 0..60i64 {
                log.append(batch(2, NOW + i, "x"), AppendOrigin::Client, NOW)
                    .unwrap();
            }
            assert!(log.shared.read().segments.len() >= 4, "rolled");
            log.flush().unwrap();
            m.checkpoint().unwrap();
            if clean {
                m.shutdown().unwrap();
            }
        }
        // The oldest segment's time index is invalid: its first use (a read) rebuilds it in
        // memory, and the next maintenance round writes it.
        let pdir = d.path().join("topic-0");
        std::fs::write(pdir.join(format!("{:020}.timeindex", 0)), b"xyz").unwrap();
        let m = open_mgr(d.path());
        let log = open(&m, small_cfg());
        let seg0 = log.shared.read().segments[0].clone();
        assert_eq!(read_all(&log, 0).len(), 60);
        assert_eq!(
            std::fs::read(pdir.join(format!("{:020}.timeindex", 0))).unwrap(),
            b"xyz",
            "a read writes nothing"
        );
        log.maintain(NOW).unwrap();
        assert!(
            std::fs::read(pdir.join(format!("{:020}.timeindex", 0))).unwrap() != b"xyz",
            "precondition: segment 0's time index was rewritten"
        );
        assert!(
            !seg0.has_unsynced_writes(),
            "the rebuild left its files unsynced"
        );
        // Life goes on: appends, the broker's 0.5 s check of sealed segments, a full flush.
        for i in 0..30i64 {
            log.append(batch(2, NOW + i, "y"), AppendOrigin::Client, NOW)
                .unwrap();
        }
        log.flush_sealed().unwrap();
        log.flush().unwrap();
        m.checkpoint().unwrap();
        let rp = log.recovery_point_offset();
        for seg in log.shared.read().segments.iter() {
            if seg.next_offset() <= rp {
                assert!(
                    !seg.has_unsynced_writes(),
                    "clean={clean}: segment {} lies below the recovery point {rp} with unsynced \
                     writes (.index {} .timeindex {}): the scan from the end stopped at a newer \
                     clean segment",
                    seg.base_offset,
                    seg.index_file.dirty(),
                    seg.time_file.dirty()
                );
            }
        }
    }
}

/// The same at run time, with no open involved (adversary finding on ee4cfd5). A sealed
/// segment's indexes load lazily (`Segment::ensure_loaded`), and one whose index file fails
/// the full check (an entry out of order in the middle; the open's cheap check looks at the
/// last entry only) is rebuilt and rewritten (`write_index_files`, `for_write`) by the first
/// read that looks up a position in it, a fetch from an old offset or ListOffsets. That
/// segment is far below the recovery point, behind clean ones: no flush ever syncs it.
#[test]
fn a_sealed_segment_whose_indexes_a_read_rebuilt_is_synced() {
    let d = tempfile::tempdir().unwrap();
    {
        let m = open_mgr(d.path());
        let log = open(&m, small_cfg());
        for i in 0..60i64 {
            log.append(batch(2, NOW + i, "x"), AppendOrigin::Client, NOW)
                .unwrap();
        }
        assert!(log.shared.read().segments.len() >= 4, "rolled");
        m.shutdown().unwrap();
    }
    // Segment 0's first offset index entry replaced by its last: the last entry is plausible
    // (the open's sanity check passes), the file as a whole is not.
    let pdir = d.path().join("topic-0");
    let ip = pdir.join(format!("{:020}.index", 0));
    let mut idx = std::fs::read(&ip).unwrap();
    assert!(idx.len() >= 16, "precondition: two index entries");
    let last = idx[idx.len() - 8..].to_vec();
    idx[..8].copy_from_slice(&last);
    std::fs::write(&ip, &idx).unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, small_cfg());
    let seg0 = log.shared.read().segments[0].clone();
    assert!(!seg0.has_unsynced_writes(), "precondition: opened clean");
    assert_eq!(log.recovery_point_offset(), log.log_end_offset());
    // A consumer fetching from an old offset.
    let r = log.read(seg0.next_offset() - 2, 1000, true).unwrap();
    assert!(r.slice.is_some());
    // Written by the next maintenance round (a read writes nothing).
    log.maintain(NOW).unwrap();
    assert!(
        std::fs::read(&ip).unwrap() != idx,
        "precondition: segment 0's offset index was rewritten"
    );
    assert!(
        !seg0.has_unsynced_writes(),
        "the rebuild left its files unsynced"
    );
    for i in 0..30i64 {
        log.append(batch(2, NOW + i, "y"), AppendOrigin::Client, NOW)
            .unwrap();
    }
    log.flush_sealed().unwrap();
    log.flush().unwrap();
    m.checkpoint().unwrap();
    let rp = log.recovery_point_offset();
    for seg in log.shared.read().segments.iter() {
        if seg.next_offset() <= rp {
            assert!(
                !seg.has_unsynced_writes(),
                "segment {} lies below the recovery point {rp} with unsynced writes (.index {} \
                 .timeindex {}): rewritten by a read, hidden behind newer clean segments",
                seg.base_offset,
                seg.index_file.dirty(),
                seg.time_file.dirty()
            );
        }
    }
}

/// ADVERSARY (8f28004): `write_index_files` rewrites a sealed segment's index files in place
/// (`set_len(0)`, then the entries), from the maintenance round (`write_rebuilt_indexes`),
/// without the writer lock and while readers run. A segment whose indexes a read rebuilt in
/// memory still has `max_ts` unread, so the next `timestamps()` (ListOffsets by timestamp or
/// MAX_TIMESTAMP, the cleaner's compaction lag) reads the time index from disk: if it lands
/// between the truncation and the write, it finds an empty (hence "sane") time index and
/// caches `max_ts = -1` for good. `offset_for_timestamp` then skips the whole segment
/// (`max_ts < ts`): a consumer seeking by timestamp is sent past its records. The loop
/// re-arms the one-shot window (max_ts unread, rewrite pending) to make it hit reliably.
#[test]
fn an_index_rewrite_under_a_reader_never_makes_a_segment_look_timeless() {
    let d = tempfile::tempdir().unwrap();
    {
        let m = open_mgr(d.path());
        let log = open(&m, small_cfg());
        for i in 0..60i64 {
            log.append(batch(2, NOW + i, "x"), AppendOrigin::Client, NOW)
                .unwrap();
        }
        m.shutdown().unwrap();
    }
    let pdir = d.path().join("topic-0");
    let ip = pdir.join(format!("{:020}.index", 0));
    let mut idx = std::fs::read(&ip).unwrap();
    let last = idx[idx.len() - 8..].to_vec();
    idx[..8].copy_from_slice(&last);
    std::fs::write(&ip, &idx).unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, small_cfg());
    let seg0 = log.shared.read().segments[0].clone();
    let r = log.read(seg0.next_offset() - 2, 1000, true).unwrap();
    assert!(r.slice.is_some());
    assert!(
        seg0.meta.read().index_rewrite,
        "precondition: rebuilt by the read"
    );
    let interval = u64::from(small_cfg().index_interval_bytes);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let maint = {
        let (log, seg0, stop) = (log.clone(), seg0.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                seg0.meta.write().index_rewrite = true;
                log.maintain(NOW).unwrap();
            }
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut seen = None;
    while std::time::Instant::now() < deadline {
        seg0.meta.write().max_ts = crate::segment::MAX_TS_UNREAD;
        let (max_ts, _) = seg0.timestamps(interval).unwrap();
        if max_ts < 0 {
            seen = Some(max_ts);
            break;
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    maint.join().unwrap();
    if seen.is_some() {
        let found = log.offset_for_timestamp(NOW).unwrap();
        panic!(
            "a timestamps() read during the maintenance's index rewrite cached max_ts {seen:?} \
             for segment 0 (it holds records of timestamp {NOW}..); offset_for_timestamp({NOW}) \
             now answers {found:?} instead of offset 0"
        );
    }
}

/// `read_into` fills a reused buffer with the region's bytes chunk by chunk (the TLS path of
/// a fetch), the same bytes `read_range` gives; a read past the region's end is refused.
#[test]
fn read_into_gives_a_regions_chunks() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("segment");
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    let slice = FileSlice {
        file: Arc::new(std::fs::File::open(&path).unwrap()),
        position: 100,
        len: 9_000,
    };
    let mut chunk = vec![0u8; 4096];
    let mut got = Vec::new();
    let mut from = 0u32;
    while from < slice.len {
        let n = ((slice.len - from) as usize).min(chunk.len());
        slice.read_into(from, &mut chunk[..n]).unwrap();
        assert_eq!(
            Bytes::copy_from_slice(&chunk[..n]),
            slice.read_range(from, n as u32).unwrap()
        );
        got.extend_from_slice(&chunk[..n]);
        from += n as u32;
    }
    assert_eq!(got, &data[100..9_100]);
    assert!(slice.read_into(8_999, &mut chunk[..2]).is_err());
}

/// Found by an adversary on 1d4ea99, since fixed (the flag is set after the range is
/// recorded): `Log::note_read_back` (cache.rs:350) set `cache_work` *before* it
/// records the range under `read_back`, so the drop-behind pass (broker cache.rs:104-116:
/// take the flag, `drop_read_back`, keep the flag only if `read_back_pending`) can run
/// entirely in between. Interleaving: a consumer far behind reads below the drop point; its
/// `note_read_back` stores the flag; the pass takes it, finds nothing recorded and does not
/// keep it; the reader then records its range. The flag is clear, the range is pending, and
/// every later pass skips the log (`!take_cache_work() && !every`): what the read brought
/// back into the page cache is never advised out while the log takes no append and no other
/// read below the point. The pass's steps are emulated here, in their order (the broker's
/// `DropBehind::pass` cannot be driven between the two halves of a read from outside). Since
/// the order changed, no test can hold the reader between its two halves any more (the flag
/// is the last thing it does): the test now runs passes beside the read and checks the range
/// is advised out after it.
#[test]
fn a_read_back_recorded_after_the_pass_took_the_flag_is_advised_out() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, cfg());
    for i in 0..20i64 {
        log.append(batch(4, NOW + i, "r"), AppendOrigin::Client, NOW)
            .unwrap();
    }
    log.flush().unwrap();
    log.drop_cache_behind(0).unwrap();
    // The broker's pass for one log, as in crates/broker/src/cache.rs (the log is below its
    // share once dropped, so only the read-back part acts).
    let pass = |log: &Log| {
        if !log.take_cache_work() {
            return;
        }
        log.drop_read_back();
        if log.read_back_pending() {
            log.keep_cache_work();
        }
    };
    for _ in 0..4 {
        pass(&log);
    }
    assert!(!log.read_back_pending());
    assert!(!log.cache_work.load(std::sync::atomic::Ordering::Acquire));
    // The read (now: its range recorded first, then the flag), with passes running beside
    // it as they may: whatever they take, a pass after the read finds the flag.
    let reader = {
        let log = log.clone();
        std::thread::spawn(move || log.note_read_back(0, 0, 512))
    };
    while !reader.is_finished() {
        pass(&log);
        std::thread::yield_now();
    }
    reader.join().unwrap();
    for _ in 0..5 {
        pass(&log);
    }
    assert!(
        !log.read_back_pending(),
        "a range read back below the drop point is never advised out: the flag was taken before it was recorded"
    );
}

/// Issue 56: the recovery point follows the log end inside the active segment (a producer
/// snapshot there, then a flush of everything), and an unclean open validates only what lies
/// past it: damage below it in the active segment is not rescanned (a whole-segment
/// validation would cut the log there), a torn tail past it is cut, and producer state comes
/// from the snapshot plus the batches after it (a retry of the last batch is recognised).
#[test]
fn recovery_resumes_at_a_recovery_point_inside_the_active_segment() {
    let c = LogConfig {
        index_interval_bytes: 300,
        ..cfg()
    };
    let d = tempfile::tempdir().unwrap();
    let pdir = d.path().join("topic-0");
    let (rp, leo) = {
        let m = open_mgr(d.path());
        let log = open(&m, c.clone());
        for i in 0..100i64 {
            log.append(batch(2, NOW + i, "below"), AppendOrigin::Client, NOW)
                .unwrap();
        }
        log.append(pbatch(10, 2, 0, 3), AppendOrigin::Client, NOW)
            .unwrap();
        assert!(
            !log.advance_recovery_point_impl(crate::fsutil::now_ms(), 1 << 30, 0)
                .unwrap(),
            "not due below its bytes"
        );
        assert!(log
            .advance_recovery_point_impl(crate::fsutil::now_ms(), 1, 0)
            .unwrap());
        let rp = log.recovery_point_offset();
        assert_eq!(rp, log.log_end_offset());
        assert_eq!(log.segment_count(), 1, "inside the active segment");
        assert!(
            !log.advance_recovery_point_impl(crate::fsutil::now_ms(), 1, 60_000)
                .unwrap(),
            "not due within its interval"
        );
        m.checkpoint().unwrap();
        for i in 0..20i64 {
            log.append(batch(2, NOW + i, "past"), AppendOrigin::Client, NOW)
                .unwrap();
        }
        log.append(pbatch(10, 2, 3, 2), AppendOrigin::Client, NOW)
            .unwrap();
        log.flush_impl(crate::log::FlushScope::Appended).unwrap();
        assert_eq!(
            log.recovery_point_offset(),
            rp,
            "an fsync of the data alone"
        );
        (rp, log.log_end_offset())
        // No shutdown: a crash.
    };
    let seg = pdir.join(format!("{:020}.log", 0));
    let mut bytes = std::fs::read(&seg).unwrap();
    // Damage under the CRC of the first batch (below the recovery point), and a torn batch
    // after the last.
    bytes[sluice_format::HEADER_LEN + 5] ^= 0xff;
    let size = bytes.len();
    bytes.extend_from_slice(&batch(2, NOW, "torn")[..40]);
    std::fs::write(&seg, &bytes).unwrap();
    let (_m, log) = unclean_reopen_with(d.path(), c.clone());
    assert_eq!(log.log_end_offset(), leo, "nothing below {rp} rescanned");
    assert_eq!(file_len(&seg), size as u64, "the torn tail is cut");
    assert!(
        log.recovered_bytes < size as u64 / 4,
        "validated {} of {size} bytes",
        log.recovered_bytes
    );
    let rolling_ts = log.shared.read().segments[0].meta.read().rolling_ts;
    assert_eq!(
        rolling_ts,
        NOW + 1,
        "time rolls count from the first batch, not from the open"
    );
    // The damage undone, the index files match the batches.
    let mut now = std::fs::read(&seg).unwrap();
    now[sluice_format::HEADER_LEN + 5] ^= 0xff;
    std::fs::write(&seg, &now).unwrap();
    verify_indexes(&pdir);
    let r = log
        .append(pbatch(10, 2, 3, 2), AppendOrigin::Client, NOW)
        .unwrap();
    assert!(r.duplicate, "the retry past the snapshot is recognised");
    assert!(matches!(
        log.append(pbatch(10, 2, 7, 1), AppendOrigin::Client, NOW),
        Err(AppendError::OutOfOrderSequence { expected: 5, .. })
    ));
}

/// When the index entry below the recovery point does not lead to it (an entry that names
/// another batch), the whole segment is validated: the damage below is found and cut.
#[test]
fn recovery_validates_the_whole_segment_when_the_index_misleads() {
    let c = LogConfig {
        index_interval_bytes: 300,
        ..cfg()
    };
    let d = tempfile::tempdir().unwrap();
    let pdir = d.path().join("topic-0");
    {
        let m = open_mgr(d.path());
        let log = open(&m, c.clone());
        for i in 0..100i64 {
            log.append(batch(2, NOW + i, "below"), AppendOrigin::Client, NOW)
                .unwrap();
        }
        assert!(log
            .advance_recovery_point_impl(crate::fsutil::now_ms(), 1, 0)
            .unwrap());
        m.checkpoint().unwrap();
    }
    let index = pdir.join(format!("{:020}.index", 0));
    let mut idx = std::fs::read(&index).unwrap();
    assert!(idx.len() >= 16, "entries below the recovery point");
    // The last entry's position moved to the previous entry's batch.
    let n = idx.len();
    let prev: [u8; 4] = idx[n - 12..n - 8].try_into().unwrap();
    idx[n - 4..].copy_from_slice(&prev);
    std::fs::write(&index, &idx).unwrap();
    let seg = pdir.join(format!("{:020}.log", 0));
    let mut bytes = std::fs::read(&seg).unwrap();
    let first_len = 12 + u32::from_be_bytes(bytes[8..12].try_into().unwrap()) as usize;
    bytes[first_len + 70] ^= 0xff;
    std::fs::write(&seg, &bytes).unwrap();
    let (_m, log) = unclean_reopen_with(d.path(), c);
    assert_eq!(
        log.log_end_offset(),
        2,
        "validated from the start and cut at the damage"
    );
}

fn unclean_reopen_with(d: &Path, c: LogConfig) -> (LogManager, Arc<Log>) {
    let m = open_mgr(d);
    let log = open(&m, c);
    (m, log)
}

/// Issue 56: the recovery point never moves past data a crash can drop. A failed fsync in the
/// move leaves it where it was (and fails the log), and the checkpoint written after says so;
/// the prune keeps the snapshot at the recorded recovery point.
#[test]
fn a_failed_fsync_leaves_the_recovery_point_where_it_was() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, cfg());
    for i in 0..20i64 {
        log.append(batch(2, NOW + i, "a"), AppendOrigin::Client, NOW)
            .unwrap();
    }
    let now = crate::fsutil::now_ms();
    assert!(log.advance_recovery_point_impl(now, 1, 0).unwrap());
    let rp = log.recovery_point_offset();
    assert_eq!(rp, 40);
    for i in 0..20i64 {
        log.append(batch(2, NOW + i, "b"), AppendOrigin::Client, NOW)
            .unwrap();
    }
    log.faults.lock().flush_sync = true;
    assert!(log.advance_recovery_point_impl(now, 1, 0).is_err());
    assert_eq!(log.recovery_point_offset(), rp);
    assert!(matches!(log.failure(), Some(LogFailure::SyncFailed { .. })));
    assert!(
        !log.advance_recovery_point_impl(now, 1, 0).unwrap(),
        "not on a failed log"
    );
    m.checkpoint().unwrap();
    let text =
        std::fs::read_to_string(d.path().join(crate::manager::RECOVERY_POINT_CHECKPOINT)).unwrap();
    assert!(text.lines().any(|l| l == "topic 0 40"), "{text}");
    // The snapshot at 80 was made durable before the data below it (an open removes it if
    // the data does not reach it); the one at the recorded recovery point stays.
    log.prune_snapshots();
    assert!(d
        .path()
        .join("topic-0")
        .join(format!("{:020}.snapshot", 40))
        .exists());
}

/// Found by an adversary on ae24bf0, since fixed (index rewrites write in place, then cut):
/// the resumed recovery of the segment holding the recovery point takes the time
/// index below it from the `.timeindex` file without checking that the file holds the time
/// entries of the offset entries it keeps (`Segment::resume_point`, segment.rs, `ti.truncate`):
/// a time index that lost its entries while the offset index kept them gives a cursor whose
/// max timestamp is that of the batches from the resume position on. The state comes from a
/// second crash: the first unclean open rewrites the recovered segment's index files
/// (`Segment::write_index_files`: `time_file.set_len(0)`, then the write, then the fsyncs),
/// and a crash after the offset index was written and the time index cut, before its write
/// reached storage, leaves an empty `.timeindex` beside a whole `.index`. A full validation
/// of the segment gives the first batch's timestamp as the segment's max.
#[test]
fn a_second_crash_in_the_index_rewrite_keeps_the_time_index_below_the_recovery_point() {
    let c = LogConfig {
        index_interval_bytes: 300,
        ..cfg()
    };
    let d = tempfile::tempdir().unwrap();
    let late = NOW + 1_000_000;
    {
        let m = open_mgr(d.path());
        let log = open(&m, c.clone());
        // The first batch carries the segment's largest timestamp (CreateTime, a producer's).
        log.append(batch(2, late, "first"), AppendOrigin::Client, NOW)
            .unwrap();
        for i in 0..100i64 {
            log.append(batch(2, NOW + i, "below"), AppendOrigin::Client, NOW)
                .unwrap();
        }
        assert!(log
            .advance_recovery_point_impl(crate::fsutil::now_ms(), 1, 0)
            .unwrap());
        assert_eq!(log.recovery_point_offset(), log.log_end_offset());
        m.checkpoint().unwrap();
        assert_eq!(log.max_timestamp(), Some((late + 1, 1)));
        // A crash.
    }
    // The first unclean open resumes at the recovery point and rewrites the index files; a
    // second crash after three of the rewrite's steps reached storage.
    crate::faults::stop_rewrite_after("index", 3);
    assert!(open_mgr(d.path())
        .open_log(&tp(0), topic_id(), c.clone(), 3)
        .is_err());
    let (_m, log) = unclean_reopen_with(d.path(), c.clone());
    // What a full validation of the segment computes.
    let seg = log.shared.read().segments[0].clone();
    let full = seg
        .scan_rebuild(seg.size(), 300, true, i64::MAX, |_| {})
        .unwrap();
    assert_eq!(full.cursor.max_ts, late + 1);
    assert_eq!(
        log.max_timestamp(),
        Some((late + 1, 1)),
        "the segment's max timestamp is its first batch's (ListOffsets MAX_TIMESTAMP, time retention)"
    );
    assert_eq!(
        seg.meta
            .read()
            .time_index
            .as_deref()
            .cloned()
            .unwrap_or_default(),
        full.time_index,
        "the time index a full validation rebuilds"
    );
    assert_eq!(log.offset_for_timestamp(late).unwrap(), Some((0, late)));
}

/// Found by an adversary on ae24bf0, since fixed (no flush moves the recovery point while
/// the epoch checkpoint lacks an epoch; `Log::epochs_durable`): leader epochs that began in
/// the segment holding the recovery point, below the
/// offset-index entry recovery resumes from, are never re-derived: the resumed scan
/// (loader.rs, `scan_rebuild_from(start, ..)` with `epochs.assign` per batch) starts at that
/// entry. The epoch cache's file is not always right: `Log::persist_epochs` (log.rs) logs a
/// failed write and relies on "the cache is rebuilt from the batches' epochs where recovery
/// scans" (an unreadable file is ignored too, epoch.rs `EpochCache::load`). Interleaving: the
/// write of `leader-epoch-checkpoint` for the new epoch 5 fails (a full disk), appends go on,
/// `advance_recovery_point_impl` moves the recovery point to the log end (its flush does not
/// touch the epoch file), crash. A full validation of the segment assigns epoch 5 at its
/// first batch; the resumed one at the first batch it scans, past the resume position.
#[test]
fn a_recovery_point_never_passes_an_epoch_its_checkpoint_lacks() {
    let c = LogConfig {
        index_interval_bytes: 300,
        ..cfg()
    };
    let d = tempfile::tempdir().unwrap();
    let pdir = d.path().join("topic-0");
    let (leo, epoch5_at) = {
        let m = open_mgr(d.path());
        let log = open(&m, c.clone()); // leader epoch 3
        for i in 0..50i64 {
            log.append(batch(2, NOW + i, "e3"), AppendOrigin::Client, NOW)
                .unwrap();
        }
        // The disk is full when the new epoch's checkpoint is written (its temp file cannot be
        // created): the write fails and is logged.
        let tmp = pdir.join("leader-epoch-checkpoint.tmp");
        std::fs::create_dir(&tmp).unwrap();
        log.set_leader_epoch(5);
        let epoch5_at = log.log_end_offset();
        for i in 0..50i64 {
            log.append(batch(2, NOW + i, "e5"), AppendOrigin::Client, NOW)
                .unwrap();
        }
        assert_eq!(log.leader_epoch_entries(), vec![(3, 0), (5, epoch5_at)]);
        std::fs::remove_dir(&tmp).unwrap();
        assert!(log
            .advance_recovery_point_impl(crate::fsutil::now_ms(), 1, 0)
            .unwrap());
        m.checkpoint().unwrap();
        (log.log_end_offset(), epoch5_at)
        // A crash.
    };
    let (_m, log) = unclean_reopen_with(d.path(), c);
    assert_eq!(log.log_end_offset(), leo);
    assert_eq!(
        log.leader_epoch_entries(),
        vec![(3, 0), (5, epoch5_at)],
        "the epochs a full validation of the segment assigns"
    );
}

/// Found by the fault suite (one broker, seed 108, disk-full faults, the recovery point
/// following the log end every 100 ms), since fixed: a failed fsync of the snapshot the
/// recovery point follows the log end with failed the log (as a roll's does, through the
/// flush), so every full volume re-opened the busy partitions. The snapshot holds no record:
/// its failure now removes it and leaves the recovery point where it was; the log serves on.
#[test]
fn a_full_volume_failing_the_followed_snapshot_fails_no_log() {
    let d = tempfile::tempdir().unwrap();
    let m = open_mgr(d.path());
    let log = open(&m, cfg());
    for i in 0..20i64 {
        log.append(batch(2, NOW + i, "a"), AppendOrigin::Client, NOW)
            .unwrap();
    }
    let now = crate::fsutil::now_ms();
    log.faults.lock().snapshot_sync = true;
    assert!(!log.advance_recovery_point_impl(now, 1, 0).unwrap());
    assert!(log.failure().is_none(), "{:?}", log.failure());
    assert_eq!(log.recovery_point_offset(), 0);
    assert!(!d
        .path()
        .join("topic-0")
        .join(format!("{:020}.snapshot", 40))
        .exists());
    log.append(batch(2, NOW, "b"), AppendOrigin::Client, NOW)
        .unwrap();
    assert!(log.advance_recovery_point_impl(now, 1, 0).unwrap());
    assert_eq!(log.recovery_point_offset(), 42);
}

/// Found by an adversary on 9ad390d (issue 56), since fixed: the snapshot the recovery point
/// follows the log end with is fsynced, and its directory entry with it, *before* the data below it
/// (log.rs:2105-2131, then `flush_impl` at log.rs:2132), against docs/log-format.md ("A
/// durable snapshot so vouches for everything below it"). When the data's fsync then fails
/// (faultfs fail-next-fsync drops the pages, as Linux does) or a crash comes before it, the
/// disk holds `<S>.snapshot` above the durable log end R. The restart's open removes it
/// (snapshots.rs:293, `load_newest` from loader.rs:653), but after the last directory fsync of
/// that open (loader.rs:582; with the log ending at R exactly no transaction index is
/// rewritten, so the one at loader.rs:888 does not run), and nothing fsyncs the partition
/// directory until the next roll or snapshot: acks=all fsyncs (`FlushScope::Appended`) and an
/// idle or `flush.ms` flush (`FlushScope::All`, log.rs:2006-2011: no `sync_dir` without a
/// snapshot or `dir_dirty`) do not, and the latter moves the recovery point past S, which
/// the checkpoint records. A second crash (one broker: faultfs `dirsync`) undoes the unlink;
/// the open resumes at that recovery point, `load_newest(.., rp)` takes the resurrected S (now
/// below the log end), and producer 10 is believed to have stored seq 3..=5 at offsets
/// 13..=15, where another producer's acknowledged records now lie. Producer 10's retry of that
/// never-acknowledged batch is answered as a duplicate at offset 13: acknowledged, never
/// stored. Before 9ad390d the snapshot was fsynced only after its data (in `flush_impl`), so
/// the crash took its directory entry with the data.
///
/// The crashes follow faultfs `dirsync` from what this thread fsynced (`snapshots::SYNCED`,
/// `fsutil::SYNCED_DIRS`): a file survives only if fsynced and listed at a later fsync of its
/// directory; an unlink is undone unless a later fsync of the directory no longer lists it.
/// The fix: an open that removes snapshots past what is durable fsyncs the directory after.
#[test]
fn a_snapshot_an_open_removed_stays_removed_through_a_second_crash() {
    let d = tempfile::tempdir().unwrap();
    let pdir = d.path().join("topic-0");
    let snap = |o: i64| pdir.join(format!("{o:020}.snapshot"));
    let seg = pdir.join(format!("{:020}.log", 0));
    // The names of the partition directory at its last fsync on this thread, if any.
    let last_dir_fsync = || {
        crate::fsutil::SYNCED_DIRS.with(|v| {
            v.borrow()
                .iter()
                .rev()
                .find(|(p, _)| p.ends_with("topic-0"))
                .map(|(_, names)| names.clone())
        })
    };
    let (r, s, durable_len, s_durable);
    {
        let m = open_mgr(d.path());
        let log = open(&m, cfg());
        log.append(pbatch(10, 0, 0, 3), AppendOrigin::Client, NOW)
            .unwrap(); // 0..=2
        for i in 0..5i64 {
            log.append(batch(2, NOW + i, "a"), AppendOrigin::Client, NOW)
                .unwrap(); // 3..=12
        }
        assert!(log
            .advance_recovery_point_impl(crate::fsutil::now_ms(), 1, 0)
            .unwrap());
        r = log.recovery_point_offset();
        assert_eq!(r, 13);
        m.checkpoint().unwrap();
        durable_len = file_len(&seg);
        // Appended, never acknowledged: the fsync that would make them durable fails.
        log.append(pbatch(10, 0, 3, 3), AppendOrigin::Client, NOW)
            .unwrap(); // 13..=15
        log.append(batch(2, NOW, "b"), AppendOrigin::Client, NOW)
            .unwrap(); // 16..=17
        s = log.log_end_offset();
        crate::snapshots::SYNCED.with(|v| v.borrow_mut().clear());
        crate::fsutil::SYNCED_DIRS.with(|v| v.borrow_mut().clear());
        log.faults.lock().flush_sync = true;
        assert!(log
            .advance_recovery_point_impl(crate::fsutil::now_ms(), 1, 0)
            .is_err());
        assert_eq!(log.recovery_point_offset(), r);
        let name = format!("{s:020}.snapshot");
        s_durable = crate::snapshots::SYNCED.with(|v| v.borrow().contains(&s))
            && last_dir_fsync().is_some_and(|names| names.contains(&name));
        m.checkpoint().unwrap();
    }
    // The crash (or the failed fsync) dropped the data past R; the snapshot at S stays only
    // if it was made durable.
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    f.set_len(durable_len).unwrap();
    drop(f);
    if !s_durable {
        let _ = std::fs::remove_file(snap(s));
    }
    let kept = std::fs::read(snap(s)).ok();
    let unlink_durable;
    {
        crate::fsutil::SYNCED_DIRS.with(|v| v.borrow_mut().clear());
        let (m, log) = unclean_reopen_with(d.path(), cfg());
        assert_eq!(log.log_end_offset(), r);
        assert!(!snap(s).exists(), "above the log end: not kept");
        // Another producer's records, acknowledged under a flush; no roll, no snapshot.
        for i in 0..5i64 {
            log.append(batch(2, NOW + i, "c"), AppendOrigin::Client, NOW)
                .unwrap(); // 13..=22
        }
        log.sync_appended().unwrap();
        log.flush().unwrap();
        assert!(log.recovery_point_offset() > s);
        m.checkpoint().unwrap();
        let name = format!("{s:020}.snapshot");
        unlink_durable = last_dir_fsync().is_some_and(|names| !names.contains(&name));
    }
    // The second crash: an unlink no directory fsync covered is undone.
    if let (Some(kept), false) = (kept, unlink_durable) {
        std::fs::write(snap(s), &kept).unwrap();
    }
    let (_m, log) = unclean_reopen_with(d.path(), cfg());
    assert_eq!(log.log_end_offset(), 23);
    let retry = log
        .append(pbatch(10, 0, 3, 3), AppendOrigin::Client, NOW)
        .unwrap();
    assert!(
        !retry.duplicate,
        "producer 10's seq 3 was never stored; answered as a duplicate at {} (another \
         producer's record): {retry:?}",
        retry.base_offset
    );
    assert_eq!(retry.base_offset, 23);
}

/// Found by an adversary on 1468c7c (issue 56), since fixed: the open's removal of a producer
/// snapshot past what is durable is made durable (loader.rs:849-854), but a removal that *fails* is only logged
/// (snapshots.rs:67-74 `remove`), and `load_newest` still sets `removed` (snapshots.rs:295-296)
/// and goes on: the open succeeds with `<S>.snapshot` left above its log end. Nothing later
/// removes it (prune keeps the newest; no follow snapshot lands at S), so once the log has
/// grown past S the next open, clean or not, loads it as the newest snapshot at or below the
/// log end: producer 10's never-stored seq 3..=5 count as stored, and its retry is answered as
/// a duplicate at another producer's offset. An unlink can fail on a failing volume (EIO) or
/// NFS (ESTALE, EACCES after a server-side change); here the file is made immutable
/// (`chattr +i`, EPERM), the same as any such failure to `remove_file`. Compare
/// `remove_segment_files` (loader.rs:1635), which refuses to open the log when a segment file
/// can be neither removed nor renamed aside. The fix: such an open fails (to be tried again).
#[test]
fn an_open_that_cannot_remove_a_snapshot_past_its_log_end_refuses_to_open() {
    struct Immutable(std::path::PathBuf);
    impl Drop for Immutable {
        fn drop(&mut self) {
            let _ = std::process::Command::new("chattr")
                .arg("-i")
                .arg(&self.0)
                .status();
        }
    }
    let d = tempfile::tempdir().unwrap();
    let pdir = d.path().join("topic-0");
    let snap = |o: i64| pdir.join(format!("{o:020}.snapshot"));
    let seg = pdir.join(format!("{:020}.log", 0));
    let (r, s, durable_len);
    {
        let m = open_mgr(d.path());
        let log = open(&m, cfg());
        log.append(pbatch(10, 0, 0, 3), AppendOrigin::Client, NOW)
            .unwrap(); // 0..=2
        for i in 0..5i64 {
            log.append(batch(2, NOW + i, "a"), AppendOrigin::Client, NOW)
                .unwrap(); // 3..=12
        }
        assert!(log
            .advance_recovery_point_impl(crate::fsutil::now_ms(), 1, 0)
            .unwrap());
        r = log.recovery_point_offset();
        assert_eq!(r, 13);
        m.checkpoint().unwrap();
        durable_len = file_len(&seg);
        // Appended, never acknowledged: the fsync that would make them durable fails.
        log.append(pbatch(10, 0, 3, 3), AppendOrigin::Client, NOW)
            .unwrap(); // 13..=15
        log.append(batch(2, NOW, "b"), AppendOrigin::Client, NOW)
            .unwrap(); // 16..=17
        s = log.log_end_offset();
        log.faults.lock().flush_sync = true;
        assert!(log
            .advance_recovery_point_impl(crate::fsutil::now_ms(), 1, 0)
            .is_err());
        assert_eq!(log.recovery_point_offset(), r);
        m.checkpoint().unwrap();
    }
    // The failed fsync (or a crash) dropped the data past R; the snapshot at S was made
    // durable before it (9ad390d).
    let f = std::fs::OpenOptions::new().write(true).open(&seg).unwrap();
    f.set_len(durable_len).unwrap();
    drop(f);
    assert!(snap(s).exists());
    // The volume refuses to unlink that one file.
    let ok = std::process::Command::new("chattr")
        .arg("+i")
        .arg(snap(s))
        .status()
        .is_ok_and(|st| st.success());
    assert!(
        ok,
        "this test needs `chattr +i` (root, ext4) to make an unlink fail"
    );
    let guard = Immutable(snap(s));
    {
        let m = open_mgr(d.path());
        assert!(
            m.open_log(&tp(0), topic_id(), cfg(), 3).is_err(),
            "an open that cannot remove a snapshot past its log end must not open the log"
        );
    }
    // The volume lets it go again: the next open removes it.
    drop(guard);
    {
        let (m, log) = unclean_reopen_with(d.path(), cfg());
        assert!(!snap(s).exists());
        assert_eq!(log.log_end_offset(), r);
        // Another producer's records, acknowledged under a flush.
        for i in 0..5i64 {
            log.append(batch(2, NOW + i, "c"), AppendOrigin::Client, NOW)
                .unwrap(); // 13..=22
        }
        log.sync_appended().unwrap();
        log.flush().unwrap();
        assert!(log.recovery_point_offset() > s);
        m.checkpoint().unwrap();
    }
    // A restart; no crash needed.
    let (_m, log) = unclean_reopen_with(d.path(), cfg());
    assert_eq!(log.log_end_offset(), 23);
    let retry = log
        .append(pbatch(10, 0, 3, 3), AppendOrigin::Client, NOW)
        .unwrap();
    assert!(
        !retry.duplicate,
        "producer 10's seq 3 was never stored; answered as a duplicate at {} (another \
         producer's record): {retry:?}",
        retry.base_offset
    );
    assert_eq!(retry.base_offset, 23);
}

/// Found by an adversary on 34c03ef, since fixed. On a single broker the silly-renamed leftovers of a
/// partition directory are now noted only by that partition's own listing in `Log::open`
/// (manager.rs:702, loader.rs:113); the sweep of every discovered partition directory at the
/// manager's open is gone outside shared dirs. A partition found whose open is refused before
/// it lists its directory (here `stamp_dir`, loader.rs:72: another topic's `partition.metadata`)
/// keeps its `.nfs*` leftover for good: nothing holds it, and no reaper ever notes it (on
/// d77fa00 the start noted and reclaimed it).
#[test]
fn adv57_a_leftover_in_a_partition_dir_whose_open_is_refused_is_still_reclaimed() {
    let d = tempfile::tempdir().unwrap();
    {
        let m = open_mgr(d.path());
        let log = open(&m, small_cfg());
        log.append(batch(2, NOW, "l"), AppendOrigin::Client, NOW)
            .unwrap();
        m.shutdown().unwrap();
    }
    let pdir = d.path().join("topic-0");
    std::fs::write(pdir.join(".nfs000000000000abcd00000001"), b"x").unwrap();
    let m = open_mgr(d.path());
    // Another topic of the same name: refused before its directory is listed.
    let other = uuid::Uuid::from_u128(0xdead_beef);
    assert!(m.open_log(&tp(0), other, small_cfg(), 3).is_err());
    eventually("leftover reclaimed", || {
        !files_in(&pdir).iter().any(|n| n.starts_with(".nfs"))
    });
    assert_eq!(m.deletion_stats().leftovers_reclaimed, 1);
}

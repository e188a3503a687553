//! The periodic maintenance of a [`Log`] (`Log::maintain_impl`, the broker's maintenance
//! round), as the sequence of its steps: producers and verifications expire (in memory);
//! then, only while the write gate lets this process write (docs/cluster.md, "Fencing",
//! point 3: each write below asks it again, under the writer lock), index files rebuilt in
//! memory are written, the active segment rolls on time, an idle partition is flushed, and
//! the oldest segments go by time, by size and below the log start (docs/log-format.md,
//! "Deletion"), their files when no reader holds them any more.

use super::*;

/// Whether the active segment rolls at `now_ms` though nothing is appended: `segment.ms`
/// after it started (`rolling_ts`), or when its newest data (`largest`, its largest
/// timestamp or last write) is past `retention.ms` of a deleting topic, so that retention
/// can remove it once it is sealed.
pub(super) fn roll_due_on_time(
    cfg: &LogConfig,
    now_ms: i64,
    rolling_ts: i64,
    largest: i64,
) -> bool {
    let time_due = now_ms.saturating_sub(rolling_ts) > cfg.segment_ms;
    let expired = cfg.cleanup.delete
        && cfg.retention_ms >= 0
        && now_ms.saturating_sub(largest) > cfg.retention_ms;
    expired || time_due
}

/// How many of the oldest sealed segments (of `sealed_sizes`, oldest first) size retention
/// removes: as many as can go while the log (`total` bytes) stays at or above
/// `retention_bytes`.
pub(super) fn oldest_over_size(
    sealed_sizes: impl IntoIterator<Item = u64>,
    total: u64,
    retention_bytes: i64,
) -> usize {
    let mut diff = i128::from(total) - i128::from(retention_bytes);
    let mut n = 0;
    for size in sealed_sizes {
        let sz = i128::from(size);
        if diff - sz >= 0 {
            diff -= sz;
            n += 1;
        } else {
            break;
        }
    }
    n
}

impl Log {
    /// One maintenance round ([`Log::maintain`]), its steps in the order of the module doc.
    pub(crate) fn maintain_impl(&self, now_ms: i64) -> io::Result<()> {
        let cfg = self.config.read().clone();
        let interval = u64::from(cfg.index_interval_bytes);
        self.expire_producers(now_ms);
        // Nothing below is this broker's to do while the gate is closed (each write asks it
        // again under the writer lock).
        if !self.writable() {
            return Ok(());
        }
        self.write_rebuilt_indexes(interval);
        self.roll_on_time(&cfg, now_ms)?;
        self.flush_if_idle(now_ms);
        self.retain_by_time(&cfg, now_ms, interval);
        self.retain_by_size(&cfg);
        self.delete_below_log_start();
        self.reap_pending(now_ms);
        Ok(())
    }

    /// Producer expiry (docs/log-format.md: producers idle for 24 hours are forgotten; never
    /// one with an open transaction, ARCHITECTURE.md), and of verifications whose verdict
    /// never came. In memory only, under the writer lock.
    pub(super) fn expire_producers(&self, now_ms: i64) {
        let mut w = self.writer.lock();
        w.producers.expire(now_ms);
        w.verifying.retain(|_, v| !v.expired(now_ms));
    }

    /// Time-based roll of the active segment ([`roll_due_on_time`]), also when its data is
    /// all past retention. Under the writer lock; the roll asks the write gate itself
    /// (`roll_locked`).
    pub(super) fn roll_on_time(&self, cfg: &LogConfig, now_ms: i64) -> io::Result<()> {
        let mut w = self.writer.lock();
        let (segs, active_size) = {
            let s = self.shared.read();
            (s.segments.clone(), s.active_size)
        };
        let Some(active) = segs.last() else {
            return Ok(());
        };
        if active_size == 0 {
            return Ok(());
        }
        let (rolling_ts, largest) = {
            let m = active.meta.read();
            (
                m.rolling_ts,
                if m.max_ts >= 0 { m.max_ts } else { m.mtime_ms },
            )
        };
        if roll_due_on_time(cfg, now_ms, rolling_ts, largest) {
            self.roll_locked(&mut w, now_ms)?;
        }
        Ok(())
    }

    /// The active segment of a partition idle for [`IDLE_FLUSH_MS`] had its index files
    /// written since their last fsync (acks=all syncs the data only).
    pub(super) fn idle_and_dirty(&self, now_ms: i64) -> bool {
        let s = self.shared.read();
        s.segments.last().is_some_and(|a| {
            (a.index_file.dirty() || a.time_file.dirty())
                && now_ms.saturating_sub(a.meta.read().mtime_ms) >= IDLE_FLUSH_MS
        })
    }

    /// An idle partition whose active segment's index files were written since their last
    /// fsync is flushed in full: the file cache may then close them (an idle partition holds
    /// no descriptor), and its recovery point reaches its end (docs/log-format.md, "Recovery
    /// invariants": "a partition idle for 10 s does the same"). Once per idle spell: a
    /// flushed segment's files are clean. With the recovery point following the log end, a
    /// producer snapshot there first when enough was appended since the last one (so that a
    /// restart replays little). A failed fsync fails the log (its own path); maintenance goes
    /// on regardless.
    pub(super) fn flush_if_idle(&self, now_ms: i64) {
        if !self.idle_and_dirty(now_ms) {
            return;
        }
        let followed = match crate::recovery::follow_policy() {
            Some((bytes, _)) => self.advance_recovery_point_impl(now_ms, bytes, 0),
            None => Ok(false),
        };
        if let Err(e) = followed.and_then(|done| {
            if done {
                Ok(0)
            } else {
                self.flush_impl(FlushScope::All)
            }
        }) {
            tracing::warn!(tp = ?self.tp, error = %e, "flushing an idle partition failed");
        }
    }

    /// Time retention: the oldest sealed segments whose largest timestamp is older than
    /// `retention.ms` go (`delete_oldest`, through the write gate). A compacted topic
    /// (`cleanup.policy` without delete) keeps its data; the cleaner keeps it small.
    pub(super) fn retain_by_time(&self, cfg: &LogConfig, now_ms: i64, interval: u64) {
        if !(cfg.cleanup.delete && cfg.retention_ms >= 0) {
            return;
        }
        let segs = self.shared.read().segments.clone();
        let sealed = segs.len().saturating_sub(1);
        let n = segs[..sealed]
            .iter()
            .take_while(|s| now_ms.saturating_sub(s.largest_timestamp(interval)) > cfg.retention_ms)
            .count();
        if n > 0 {
            self.delete_oldest(segs[n - 1].base_offset, "retention.ms");
        }
    }

    /// Size retention: the oldest sealed segments go while the log stays at or above
    /// `retention.bytes` ([`oldest_over_size`]; `delete_oldest`, through the write gate).
    pub(super) fn retain_by_size(&self, cfg: &LogConfig) {
        if !(cfg.cleanup.delete && cfg.retention_bytes >= 0) {
            return;
        }
        let segs = self.shared.read().segments.clone();
        let total = self.size_bytes_impl();
        let sealed = segs.len().saturating_sub(1);
        let n = oldest_over_size(
            segs[..sealed].iter().map(|s| s.size()),
            total,
            cfg.retention_bytes,
        );
        if n > 0 {
            self.delete_oldest(segs[n - 1].base_offset, "retention.bytes");
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::log::append::tests::{batch, open_log, pbatch};
    use crate::producer::{Verifying, PRODUCER_EXPIRATION_MS};
    use crate::tests::{cfg, NOW};

    fn append(log: &Log, n: usize) {
        log.append(Bytes::from(batch(n, "m")), AppendOrigin::Client, NOW)
            .unwrap();
    }

    #[test]
    fn roll_due_on_time_by_age_or_when_its_data_is_past_retention() {
        let aged = LogConfig {
            segment_ms: 1000,
            ..cfg()
        };
        assert!(!roll_due_on_time(&aged, NOW + 1000, NOW, NOW));
        assert!(roll_due_on_time(&aged, NOW + 1001, NOW, NOW));
        let retained = LogConfig {
            segment_ms: i64::MAX,
            retention_ms: 100,
            ..cfg()
        };
        assert!(roll_due_on_time(&retained, NOW + 101, NOW, NOW));
        assert!(!roll_due_on_time(&retained, NOW + 101, NOW, NOW + 50));
        let compacted = LogConfig {
            cleanup: crate::Cleanup {
                delete: false,
                ..retained.cleanup
            },
            ..retained
        };
        assert!(!roll_due_on_time(&compacted, NOW + 101, NOW, NOW));
    }

    #[test]
    fn oldest_over_size_keeps_the_log_at_or_above_the_limit() {
        assert_eq!(oldest_over_size([100, 100, 100], 350, 150), 2);
        assert_eq!(oldest_over_size([100, 100, 100], 350, 151), 1);
        assert_eq!(oldest_over_size([100, 100, 100], 350, 400), 0);
        assert_eq!(oldest_over_size([100, 10, 100], 350, 0), 3);
        assert_eq!(
            oldest_over_size([200, 10], 350, 200),
            0,
            "oldest first, no skipping"
        );
    }

    /// The producer snapshot at offset 1 of the partition [`open_log`] opens.
    fn snapshot_at_1(root: &std::path::Path) -> std::path::PathBuf {
        root.join("a-0")
            .join(sluice_format::names::segment_file_name(
                1,
                sluice_format::SegmentFileKind::Snapshot,
            ))
    }

    /// [`open_log`], then one idempotent producer's batch of one record: the end is at 1.
    fn open_with_a_producer(root: &std::path::Path) -> (crate::LogManager, Arc<Log>) {
        let (m, log) = open_log(root, cfg());
        log.append(
            Bytes::from(pbatch(7, 0, 0, false)),
            AppendOrigin::Client,
            NOW,
        )
        .unwrap();
        (m, log)
    }

    /// A close writes a producer snapshot at the end unless one holding exactly that state
    /// is there already: an idle partition's restart and stop rewrite nothing (no rename, no
    /// directory fsync), while a state that changed without an append (producers expired) is
    /// written again.
    #[test]
    fn a_close_rewrites_the_end_snapshot_only_when_the_state_differs() {
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().unwrap();
        let snapshot = snapshot_at_1(d.path());
        let inode = || std::fs::metadata(&snapshot).unwrap().ino();
        {
            let (m, _log) = open_with_a_producer(d.path());
            m.shutdown().unwrap();
        }
        let first = inode();
        let (m, log) = open_log(d.path(), cfg());
        m.shutdown().unwrap();
        assert_eq!(inode(), first, "the same state: not written again");
        assert!(
            log.vouched_snapshot(1).is_none(),
            "loaded, not written: never vouched for"
        );
        drop((m, log));

        let (m, log) = open_log(d.path(), cfg());
        log.expire_producers(NOW + PRODUCER_EXPIRATION_MS);
        m.shutdown().unwrap();
        assert_ne!(inode(), first, "the producer expired: written again");
        let now = std::fs::read(&snapshot).unwrap();
        assert!(sluice_format::snapshot::decode_snapshot(&now)
            .unwrap()
            .is_empty());
    }

    /// A file at the end holding exactly the log's state, which the log neither loaded nor
    /// wrote (one whose durability it cannot vouch for), is written again at a close.
    #[test]
    fn a_close_writes_over_an_end_snapshot_it_does_not_know() {
        use std::os::unix::fs::MetadataExt;
        let d = tempfile::tempdir().unwrap();
        let (m, log) = open_with_a_producer(d.path());
        let dir = d.path().join("a-0");
        crate::snapshots::write(&dir, 1, &log.writer.lock().producers, 0, None, &|| Ok(()))
            .unwrap();
        let snapshot = snapshot_at_1(d.path());
        let placed = std::fs::metadata(&snapshot).unwrap().ino();
        m.shutdown().unwrap();
        assert_ne!(std::fs::metadata(&snapshot).unwrap().ino(), placed);
    }

    #[test]
    fn expire_producers_forgets_idle_producers_but_not_an_open_transaction() {
        let d = tempfile::tempdir().unwrap();
        let (_m, log) = open_log(d.path(), cfg());
        for (pid, transactional) in [(1, false), (2, true)] {
            log.append(
                Bytes::from(pbatch(pid, 0, 0, transactional)),
                AppendOrigin::Client,
                NOW,
            )
            .unwrap();
        }
        log.writer.lock().verifying.insert(
            3,
            Verifying {
                guard: VerificationGuard::new(),
                started_ms: NOW,
                lowest_seq: None,
                epoch: 0,
            },
        );
        log.expire_producers(NOW + PRODUCER_EXPIRATION_MS - 1);
        {
            let w = log.writer.lock();
            assert!(w.producers.get(1).is_some() && w.producers.get(2).is_some());
            assert!(w.verifying.contains_key(&3));
        }
        log.expire_producers(NOW + PRODUCER_EXPIRATION_MS);
        let w = log.writer.lock();
        assert!(w.producers.get(1).is_none(), "idle for the expiry time");
        assert!(w.producers.get(2).is_some(), "its transaction is open");
        assert!(w.verifying.is_empty());
    }

    #[test]
    fn roll_on_time_rolls_a_written_active_segment_once_due() {
        let d = tempfile::tempdir().unwrap();
        let c = LogConfig {
            segment_ms: 1000,
            ..cfg()
        };
        let (_m, log) = open_log(d.path(), c.clone());
        log.roll_on_time(&c, NOW + 5000).unwrap();
        assert_eq!(log.segment_count(), 1, "an empty segment does not roll");
        append(&log, 1);
        log.roll_on_time(&c, NOW + 1000).unwrap();
        assert_eq!(log.segment_count(), 1);
        log.roll_on_time(&c, NOW + 1001).unwrap();
        assert_eq!(log.segment_count(), 2);
    }

    #[test]
    fn an_idle_partition_with_written_index_files_is_flushed_once() {
        let d = tempfile::tempdir().unwrap();
        let c = LogConfig {
            index_interval_bytes: 1,
            ..cfg()
        };
        let (_m, log) = open_log(d.path(), c);
        for _ in 0..INDEX_WRITE_ENTRIES + 2 {
            append(&log, 1);
        }
        let leo = log.log_end_offset();
        assert!(log.recovery_point_offset() < leo);
        assert!(!log.idle_and_dirty(NOW + IDLE_FLUSH_MS - 1), "not idle yet");
        assert!(log.idle_and_dirty(NOW + IDLE_FLUSH_MS));
        log.flush_if_idle(NOW + IDLE_FLUSH_MS);
        assert_eq!(log.recovery_point_offset(), leo);
        assert!(!log.idle_and_dirty(NOW + IDLE_FLUSH_MS), "flushed: clean");
    }

    /// A log of three segments of one batch each, two sealed, and the size of one.
    fn three_segments(dir: &std::path::Path) -> (crate::LogManager, Arc<Log>, u64) {
        let (m, log) = open_log(dir, cfg());
        for _ in 0..2 {
            append(&log, 1);
            log.roll(NOW).unwrap();
        }
        append(&log, 1);
        let size = log.size_bytes() / 3;
        assert_eq!(log.size_bytes(), 3 * size);
        (m, log, size)
    }

    #[test]
    fn time_retention_removes_old_sealed_segments_only() {
        let d = tempfile::tempdir().unwrap();
        let (_m, log, _) = three_segments(d.path());
        let c = LogConfig {
            retention_ms: 1000,
            ..cfg()
        };
        log.retain_by_time(&c, NOW + 1000, 4096);
        assert_eq!(log.segment_count(), 3);
        let compacted = LogConfig {
            cleanup: crate::Cleanup {
                delete: false,
                ..c.cleanup
            },
            ..c.clone()
        };
        log.retain_by_time(&compacted, NOW + 1001, 4096);
        assert_eq!(log.segment_count(), 3, "a compacted topic keeps its data");
        log.retain_by_time(&c, NOW + 1001, 4096);
        assert_eq!(log.segment_count(), 1, "the active segment stays");
        assert_eq!(log.log_start_offset(), 2);
    }

    #[test]
    fn size_retention_keeps_at_least_the_limit() {
        let d = tempfile::tempdir().unwrap();
        let (_m, log, size) = three_segments(d.path());
        let limit = |bytes: u64| LogConfig {
            retention_bytes: i64::try_from(bytes).unwrap(),
            ..cfg()
        };
        log.retain_by_size(&limit(size + 1));
        assert_eq!(log.segment_count(), 2);
        log.retain_by_size(&limit(size));
        assert_eq!(log.segment_count(), 1);
        assert_eq!(log.log_start_offset(), 2);
    }
}

//! The flush of a [`Log`], as the sequence of its steps (`Log::flush_impl`):
//!
//! 1. refuse on a failed log (ARCHITECTURE.md: "after a failed fsync a log never trusts its
//!    page cache");
//! 2. [`Log::flush_start`]: the state to make durable, in one look;
//! 3. [`FlushStart::done`]: nothing to do, or
//! 4. [`Log::sync_for_flush`]: fsync the segments' data ([`Log::sync_segment_data`]) and
//!    index files ([`Log::sync_segment_indexes`], whose held-back entries are written only
//!    through the write gate), the producer snapshots, the directory;
//! 5. [`settle_flush`]: move the synced mark and the recovery point, no further than what
//!    was made durable (docs/log-format.md, "Recovery invariants").

use super::*;

/// The log as a flush found it ([`Log::flush_start`]).
#[derive(Debug)]
pub(super) struct FlushStart {
    pub segs: Arc<Vec<Arc<Segment>>>,
    pub leo: i64,
    /// The recovery point.
    pub rp: i64,
    pub synced: i64,
    /// Files were created or removed since the last directory fsync (the flag is taken
    /// over: a failed flush puts it back).
    pub dir_dirty: bool,
    pub active_size: u64,
    /// The first segment below the recovery point that may have been written to since its
    /// last fsync (see [`first_dirty_below`]).
    pub dirty_from: usize,
}

impl FlushStart {
    /// The active segment's base (the log end with no segment).
    pub(super) fn active_base(&self) -> i64 {
        self.segs
            .last()
            .map_or(self.leo, |a| a.base_offset.min(self.leo))
    }

    /// Segment `i` lies below the recovery point and was written to since its last fsync (a
    /// seal of the segment that was active writes its last index entries).
    pub(super) fn dirty_below(&self, i: usize, seg: &Segment) -> bool {
        i >= self.dirty_from && seg.next_offset() <= self.rp && seg.has_unsynced_writes()
    }

    /// Everything `scope` makes durable already is (the directory and the producer
    /// snapshots aside): no sealed segment below the recovery point is dirty, and for
    /// [`FlushScope::All`] the recovery point is at the end with nothing of the active
    /// segment unsynced (index entries a seal wrote at a close included); for
    /// [`FlushScope::Appended`] the synced offset is at the end; for [`FlushScope::Sealed`]
    /// the recovery point reaches the active segment.
    pub(super) fn done(&self, scope: FlushScope) -> bool {
        let n = self.segs.len();
        let any_dirty_below = self
            .segs
            .iter()
            .enumerate()
            .skip(self.dirty_from)
            .any(|(i, seg)| i + 1 < n && self.dirty_below(i, seg));
        !any_dirty_below
            && match scope {
                FlushScope::All => {
                    self.leo <= self.rp
                        && !self.segs.last().is_some_and(|a| a.has_unsynced_writes())
                }
                FlushScope::Appended => self.leo <= self.synced,
                FlushScope::Sealed => self.active_base() <= self.rp,
            }
    }
}

/// Segments below the recovery point written to since their last fsync: a seal writes the
/// last index entries of the segment that was active, so they are the newest ones below it;
/// older ones were synced by the flush that followed (or by whoever rewrote them). Found from
/// the end, the scan stops at the first clean one: the index after it.
pub(super) fn first_dirty_below(segs: &[Arc<Segment>], rp: i64) -> usize {
    segs.iter()
        .rposition(|seg| seg.next_offset() <= rp && !seg.has_unsynced_writes())
        .map_or(0, |i| i + 1)
}

/// How far a flush may move the recovery point, given that everything below `indexed` was
/// synced: not past a segment written to since its files were synced here (from
/// `dirty_from` on). A roll that sealed the active segment meanwhile (its last time index
/// entry, under the writer lock, which a flush does not take) wrote after the fsync, and
/// nothing below the recovery point `rp` is synced again (docs/log-format.md, "Recovery
/// invariants": "a flush never moves the recovery point past a segment written to after its
/// fsync").
pub(super) fn recovery_point_bound(
    segs: &[Arc<Segment>],
    dirty_from: usize,
    indexed: i64,
    rp: i64,
) -> i64 {
    segs.iter()
        .skip(dirty_from.min(segs.len().saturating_sub(1)))
        .find(|seg| seg.base_offset < indexed && seg.has_unsynced_writes())
        .map_or(indexed, |seg| seg.base_offset.max(rp).min(indexed))
}

/// After a successful flush, under the shared lock: the recovery point moves to what is
/// durable with its index files (the end for [`FlushScope::All`], the active segment's base
/// otherwise, bounded by [`recovery_point_bound`]) when `may_move_rp` (the index files
/// are complete, written through the gate, and `leader-epoch-checkpoint` holds every epoch);
/// the synced offset and mark move to the end, unless only sealed segments were synced
/// (ARCHITECTURE.md, the acks=all invariant: a group-commit round moves the recovery point
/// only to the active segment's base, and recovery rebuilds that segment's indexes). Under
/// `flush.messages=1` the high watermark moves with the synced mark. Returns the recovery
/// point.
pub(super) fn settle_flush(
    s: &mut Shared,
    st: &FlushStart,
    scope: FlushScope,
    may_move_rp: bool,
) -> i64 {
    let indexed = if scope == FlushScope::All {
        st.leo
    } else {
        st.active_base()
    };
    let indexed = recovery_point_bound(&st.segs, st.dirty_from, indexed, s.recovery_point);
    if may_move_rp {
        s.recovery_point = s.recovery_point.max(indexed);
    }
    if scope == FlushScope::Sealed {
        // The active segment was not synced: only what lies below it is known durable.
        s.synced = s.synced.max(s.recovery_point);
        return s.recovery_point;
    }
    s.synced = s.synced.max(st.leo).max(s.recovery_point);
    s.mark_synced(&st.segs, st.leo, st.active_size);
    if s.leo == st.leo {
        s.unflushed_since = None;
    }
    if s.sync_bounded && s.published.is_none() {
        // The high watermark moved with the synced mark.
        let hw = high_watermark_of(s);
        s.txns.published_to(hw);
    }
    s.recovery_point
}

impl Log {
    /// Make durable what `scope` names (see [`FlushScope`]) and move the recovery point: to
    /// the end for [`FlushScope::All`], to the active segment's base otherwise (recovery
    /// rebuilds the active segment's index files from its data, so acknowledging a record
    /// needs only its data on disk).
    pub(crate) fn flush_impl(&self, scope: FlushScope) -> io::Result<i64> {
        let full = scope == FlushScope::All;
        let _g = self.flush_lock.lock();
        // After a failed fsync (this log's, or the drop-behind's) nothing past the synced
        // offset is trusted to reach storage: no flush may succeed over it.
        self.check_not_failed()?;
        let st = self.flush_start();
        // The producer snapshots of the rolls this flush covers: durable after the segments
        // below them, as Kafka flushes the snapshot with the rolled segment. (A roll writes
        // one at the new active segment's base; a flush of everything covers one at the end.)
        let snapshots = self.snapshots_unsynced_upto(if full { st.leo } else { st.active_base() });
        if st.done(scope) && !st.dir_dirty && snapshots.is_empty() {
            // Everything up to `leo` is durable already; the mark may not say so yet (a log
            // just opened). Not so for `Sealed`, which says nothing of the active segment.
            if scope != FlushScope::Sealed {
                self.shared
                    .write()
                    .mark_synced(&st.segs, st.leo, st.active_size);
            }
            return Ok(st.rp);
        }
        // Index entries held back are written only through the gate; fsyncs write nothing
        // new. A log that may not write keeps its recovery point (its index files are not
        // known complete), while what it appended becomes durable.
        let mut writable = self.writable();
        let res = self.sync_for_flush(&st, scope, &snapshots, &mut writable);
        if res.is_ok() {
            self.snapshots_durable(&snapshots);
        }
        let epochs_durable = res.is_ok() && self.epochs_durable();
        let mut s = self.shared.write();
        if let Err(e) = res {
            s.dir_dirty |= st.dir_dirty;
            return Err(e);
        }
        Ok(settle_flush(&mut s, &st, scope, writable && epochs_durable))
    }

    /// The state a flush makes durable, in one look at the log; the directory's dirty flag
    /// is taken (cleared here, put back by a flush that fails).
    pub(super) fn flush_start(&self) -> FlushStart {
        let (segs, leo, rp, synced, dir_dirty, active_size) = {
            let mut s = self.shared.write();
            let d = s.dir_dirty;
            s.dir_dirty = false;
            (
                s.segments.clone(),
                s.leo,
                s.recovery_point,
                s.synced,
                d,
                s.active_size,
            )
        };
        let dirty_from = first_dirty_below(&segs, rp);
        FlushStart {
            segs,
            leo,
            rp,
            synced,
            dir_dirty,
            active_size,
            dirty_from,
        }
    }

    /// fsync what `scope` covers, in order: each segment past the recovery point (and each
    /// below it written to since its fsync), its data and, but for the active segment of a
    /// partial flush, its index files; then the producer `snapshots`, then the directory
    /// when files were created or removed or snapshots written (docs/log-format.md,
    /// "Recovery invariants": the snapshot is made durable after the segments below it). Any
    /// failed fsync fails the log (`sync_failed`). `writable` turns false once the write gate
    /// refuses an index write.
    pub(super) fn sync_for_flush(
        &self,
        st: &FlushStart,
        scope: FlushScope,
        snapshots: &[i64],
        writable: &mut bool,
    ) -> io::Result<()> {
        let n = st.segs.len();
        for (i, seg) in st.segs.iter().enumerate() {
            let active = i + 1 == n;
            if active && scope == FlushScope::Sealed {
                continue;
            }
            // Below the recovery point too when written to since its last fsync (a seal
            // of the segment that was active writes its last index entries).
            if active || seg.next_offset() > st.rp || st.dirty_below(i, seg) {
                self.sync_segment_data(seg, st.synced)?;
                if scope == FlushScope::All || !active {
                    self.sync_segment_indexes(seg, st.synced, writable)?;
                }
            }
        }
        self.sync_snapshots(snapshots, st.synced)?;
        if st.dir_dirty || !snapshots.is_empty() {
            let dir = self.dir();
            sync_dir(&dir).map_err(|e| self.sync_failed(dir, st.synced, e))?;
        }
        Ok(())
    }

    /// fsync a segment's `.log`, then check that the file synced still has its name
    /// (`check_still_linked`: data synced into a file another process replaced must not be
    /// acknowledged; docs/cluster.md, "Fencing", point 2). A failure fails the log: after a
    /// failed fsync nothing past `synced` is trusted (ARCHITECTURE.md).
    pub(super) fn sync_segment_data(&self, seg: &Arc<Segment>, synced: i64) -> io::Result<()> {
        let path = || seg_path(&seg.dir, seg.base_offset, SegmentFileKind::Log);
        #[cfg(test)]
        crate::faults::fire(&mut self.faults.lock().flush_sync, rustix::io::Errno::IO)
            .map_err(|e| self.sync_failed(path(), synced, e))?;
        // Held across the fsync and the link check, so that the file cache does not close it
        // in between. One the cache closed is opened again only if its name still leads to it
        // (a replaced file fails here).
        let file = seg
            .log
            .get()
            .map_err(|e| self.sync_failed(path(), synced, e))?;
        if !crate::mutation::active(crate::mutation::Mutation::SkipFsync) {
            seg.log
                .sync_data()
                .map_err(|e| self.sync_failed(path(), synced, e))?;
        }
        self.check_still_linked(seg, &file)
            .map_err(|e| self.sync_failed(path(), synced, e))
    }

    /// Write a segment's held-back index entries, only while the write gate lets this
    /// process write (`writable`, asked again here, immediately before: docs/cluster.md,
    /// "Fencing", point 3), then fsync its offset, time and transaction index files. A sealed
    /// segment's index files are complete once this ran with the gate open
    /// (docs/log-format.md, "Write path"). A failed fsync fails the log.
    pub(super) fn sync_segment_indexes(
        &self,
        seg: &Segment,
        synced: i64,
        writable: &mut bool,
    ) -> io::Result<()> {
        let path = |kind| seg_path(&seg.dir, seg.base_offset, kind);
        *writable = *writable && self.writable();
        if *writable {
            seg.write_pending_index()?;
        }
        seg.index_file
            .sync_data()
            .map_err(|e| self.sync_failed(path(SegmentFileKind::Index), synced, e))?;
        seg.time_file
            .sync_data()
            .map_err(|e| self.sync_failed(path(SegmentFileKind::TimeIndex), synced, e))?;
        seg.txn
            .lock()
            .sync(&seg.dir, seg.base_offset)
            .map_err(|e| self.sync_failed(path(SegmentFileKind::TxnIndex), synced, e))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::atomic::AtomicBool;

    use super::*;
    use crate::log::append::tests::{batch, open_log};
    use crate::tests::{cfg, NOW};
    use crate::WriteGate;

    fn append(log: &Log, n: usize) {
        log.append(Bytes::from(batch(n, "f")), AppendOrigin::Client, NOW)
            .unwrap();
    }

    fn segments(log: &Log) -> Arc<Vec<Arc<Segment>>> {
        log.shared.read().segments.clone()
    }

    #[test]
    fn the_recovery_point_stops_at_a_segment_written_since_its_fsync() {
        let d = tempfile::tempdir().unwrap();
        let (_m, log) = open_log(d.path(), cfg());
        append(&log, 3);
        log.roll(NOW).unwrap();
        append(&log, 3);
        // Nothing synced: both segments dirty.
        let segs = segments(&log);
        assert_eq!(first_dirty_below(&segs, 0), 0);
        assert_eq!(recovery_point_bound(&segs, 0, 6, 0), 0);
        log.flush().unwrap();
        let segs = segments(&log);
        assert_eq!(recovery_point_bound(&segs, 0, 6, 6), 6, "all synced");
        assert_eq!(
            first_dirty_below(&segs, 6),
            2,
            "every segment below is clean"
        );
        // Written to since: the active segment, based at 3.
        append(&log, 3);
        assert_eq!(recovery_point_bound(&segs, 0, 9, 0), 3);
        assert_eq!(
            recovery_point_bound(&segs, 0, 9, 6),
            6,
            "never below the point"
        );
    }

    #[test]
    fn flush_start_takes_the_directory_flag_and_done_says_what_is_left() {
        let d = tempfile::tempdir().unwrap();
        let (_m, log) = open_log(d.path(), cfg());
        append(&log, 3);
        log.flush().unwrap();
        let st = log.flush_start();
        assert!(!st.dir_dirty);
        for scope in [FlushScope::All, FlushScope::Appended, FlushScope::Sealed] {
            assert!(st.done(scope), "{scope:?}");
        }
        append(&log, 2);
        let st = log.flush_start();
        assert!(!st.done(FlushScope::All) && !st.done(FlushScope::Appended));
        assert!(
            st.done(FlushScope::Sealed),
            "no sealed segment past the point"
        );
        log.roll(NOW).unwrap();
        let st = log.flush_start();
        assert!(st.dir_dirty, "the roll created files");
        assert!(!st.done(FlushScope::Sealed));
        assert_eq!(st.active_base(), 5);
        assert!(!log.flush_start().dir_dirty, "taken by the first look");
    }

    #[test]
    fn settle_flush_moves_the_recovery_point_only_as_far_as_allowed() {
        let d = tempfile::tempdir().unwrap();
        let (_m, log) = open_log(d.path(), cfg());
        append(&log, 3);
        let settle = |scope, may_move_rp| {
            let st = log.flush_start();
            log.sync_for_flush(&st, scope, &[], &mut true).unwrap();
            let mut s = log.shared.write();
            let rp = settle_flush(&mut s, &st, scope, may_move_rp);
            (rp, s.synced, s.unflushed_since)
        };
        // Acknowledgements: the data is synced, the active segment's indexes are not.
        assert_eq!(settle(FlushScope::Appended, true), (0, 3, None));
        append(&log, 1);
        // Everything synced, but the index files or the epochs are not known complete.
        assert_eq!(settle(FlushScope::All, false), (0, 4, None));
        assert_eq!(settle(FlushScope::All, true), (4, 4, None));
    }

    /// A gate a test closes.
    #[derive(Debug, Default)]
    struct Closable(AtomicBool);

    impl WriteGate for Closable {
        fn check(&self, _: &TopicPartition, _: uuid::Uuid, _: i32) -> Result<(), String> {
            if self.0.load(Ordering::SeqCst) {
                Err("closed".into())
            } else {
                Ok(())
            }
        }
    }

    #[test]
    fn held_back_index_entries_are_written_only_through_the_gate() {
        let d = tempfile::tempdir().unwrap();
        let (m, log) = open_log(
            d.path(),
            LogConfig {
                index_interval_bytes: 50,
                ..cfg()
            },
        );
        let gate = Arc::new(Closable::default());
        m.set_write_gate(gate.clone());
        for _ in 0..8 {
            append(&log, 2);
        }
        let seg = segments(&log).last().cloned().unwrap();
        let held = seg.meta.read().offset_index.as_ref().map_or(0, |v| v.len());
        assert!(held > 0 && held < INDEX_WRITE_ENTRIES, "{held}");
        let on_disk = || {
            std::fs::metadata(seg_path(&seg.dir, 0, SegmentFileKind::Index))
                .unwrap()
                .len()
        };
        assert_eq!(on_disk(), 0, "held back");
        let mut writable = false;
        log.sync_segment_indexes(&seg, 0, &mut writable).unwrap();
        assert_eq!(on_disk(), 0, "not writable: nothing written");
        gate.0.store(true, Ordering::SeqCst);
        let mut writable = true;
        log.sync_segment_indexes(&seg, 0, &mut writable).unwrap();
        assert!(!writable, "the gate refused");
        assert_eq!(on_disk(), 0);
        gate.0.store(false, Ordering::SeqCst);
        let mut writable = true;
        log.sync_segment_indexes(&seg, 0, &mut writable).unwrap();
        assert!(writable);
        assert_eq!(on_disk(), (held * OFFSET_INDEX_ENTRY_LEN) as u64);
    }

    #[test]
    fn a_failed_data_fsync_fails_the_log() {
        let d = tempfile::tempdir().unwrap();
        let (_m, log) = open_log(d.path(), cfg());
        append(&log, 3);
        let seg = segments(&log).last().cloned().unwrap();
        log.sync_segment_data(&seg, 0).unwrap();
        assert!(log.check_not_failed().is_ok());
        log.faults.lock().flush_sync = true;
        assert!(log.sync_segment_data(&seg, 0).is_err());
        assert!(log.check_not_failed().is_err(), "failed until re-opened");
    }
}

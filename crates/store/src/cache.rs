//! Page-cache drop-behind: make old log data durable, then tell the kernel it may evict it.
//!
//! Each [`Log`] remembers a *drop point* (in memory only): a segment and a byte position in it.
//! Everything of the log below it has been advised out of the page cache
//! (`posix_fadvise(POSIX_FADV_DONTNEED)`) once, and is again after a reader brings it back;
//! everything above it was written since. A call of
//! [`Log::drop_cache_behind`] moves the drop point to `keep_bytes` before the end: for every
//! byte range in between it first makes the segment file durable with `fdatasync` (DONTNEED
//! only evicts clean pages; a dirty page would stay), unless the range lies below the
//! write-behind's writeback point (`writeback.rs`: written back, so clean already), then
//! advises the range out: sealed segments wholly below the new point from the old point to
//! their end, the segment holding the new point up to it. Not from the start of the files:
//! what is resident below the old point again was read back (below), and a lagging reader's
//! readahead is among it.
//!
//! Safety of the schedule, which the broker owns (`crates/broker/src/cache.rs`):
//! - The segment list is snapshotted (`Arc<Segment>`), so the files stay open through a roll,
//!   a retention or DeleteRecords deletion (rename to `*.deleted`, unlink after the last
//!   holder), topic deletion or a move. Bytes below the visible end of a segment are never
//!   rewritten (truncation happens only at open), so nothing new can become dirty in a range
//!   between its `fdatasync` and its DONTNEED.
//! - The drop point never affects recovery: the recovery point is not moved, and index files
//!   are left alone. An `fdatasync` here only adds durability. Because it may be the call that
//!   sees (and so clears, for this open file) a writeback error, it runs under the flush lock
//!   (no flush is in flight that could then succeed and acknowledge its round), and a failure
//!   fails the log exactly as a flush's failed fsync does (`LogFailure::SyncFailed`: no later
//!   flush succeeds until the log is re-opened). One that finds the file gone from the server
//!   (ENOENT, ESTALE) is ignored if the segment was deleted meanwhile (retention); if the
//!   segment is still part of the log, its data is gone from storage and the log fails the
//!   same way.
//! - Pages read back later from below the point (a consumer far behind, and the kernel's
//!   readahead for it) are advised out again by [`Log::drop_read_back`]: a read records the
//!   range it found there ([`ReadBack`]), and the call after next advises out the ranges
//!   recorded, not the files from their start (that dropped the readahead of a second reader
//!   further behind in the same segment, another consumer group): 200-400 ms after the
//!   read, by when its response has been
//!   sent unless the client's socket held it up (a send after that reads the region from the
//!   volume again, on the runtime thread). Left to the kernel, they stayed: consumers catching up
//!   through a backlog while producers went on grew the page cache by 12 GB in 47 s, most of
//!   it on the kernel's active list (read once to be loaded off the runtime threads, once to
//!   be sent), until free memory was down to about 1 GB and allocations waited for reclaim
//!   and compaction. A move's copy reads through its own files and is not recorded.
//! - At open the drop point starts at the end of the log (no burst of drops after a restart);
//!   after a move to another log dir it restarts at the log start, so the copy does not stay
//!   cached.

use std::fs::File;
use std::io;
use std::num::NonZeroU64;
use std::path::PathBuf;
use std::sync::Arc;

use rustix::fs::Advice;
use rustix::io::Errno;

use sluice_format::SegmentFileKind;

use crate::segment::{seg_path, Segment};
use crate::Log;

/// Where the page cache of a log was last dropped up to.
#[derive(Debug)]
pub(crate) struct DropPoint {
    /// The directory the log was in (a move to another log dir starts over).
    pub dir: PathBuf,
    /// Base offset of the segment holding the point; older segments are below it.
    pub segment: i64,
    /// Bytes of that segment below the point.
    pub position: u64,
}

/// Most ranges one generation of [`ReadBack`] remembers: one per reader behind the point and
/// segment it reads in (a consumer crosses one or two segments in a drop-behind interval);
/// more readers far behind are left to the kernel.
const READ_BACK_RANGES: usize = 32;

/// A byte range of one segment that reads found below the drop point.
#[derive(Clone, Copy, Debug)]
struct ReadRange {
    /// The segment's base offset.
    segment: i64,
    start: u64,
    end: u64,
    /// Bytes the reads returned (a re-read counts again).
    bytes: u64,
}

/// Reads from below the drop point: the ranges read since the last [`Log::drop_read_back`]
/// call (`current`) and before it (`previous`, advised out by the next call). A reader's
/// reads follow one another, so each reader adds to one range per segment.
#[derive(Debug, Default)]
pub(crate) struct ReadBack {
    current: Vec<ReadRange>,
    previous: Vec<ReadRange>,
}

impl ReadBack {
    /// Whether reads are recorded for a later pass to advise out.
    pub(crate) fn pending(&self) -> bool {
        !self.current.is_empty() || !self.previous.is_empty()
    }
}

/// What one [`Log::drop_cache_behind`] call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DropStats {
    /// Bytes of segment data advised out of the page cache (the ranges given to the kernel,
    /// resident or not).
    pub dropped_bytes: u64,
    /// `fdatasync` calls made to make those ranges clean first.
    pub fdatasyncs: u64,
}

impl std::ops::AddAssign for DropStats {
    fn add_assign(&mut self, o: DropStats) {
        self.dropped_bytes += o.dropped_bytes;
        self.fdatasyncs += o.fdatasyncs;
    }
}

/// The file is gone from the server (deleted; NFS answers ESTALE).
pub(crate) fn gone(e: Errno) -> bool {
    e == Errno::NOENT || e == Errno::STALE
}

/// Largest page-cache folio the kernel may use for a file (a PMD, 2 MiB on x86-64; folios are
/// aligned to their size in the file).
const MAX_FOLIO_BYTES: u64 = 2 << 20;

/// Advise `[from, to)` (`to` None: to the end of the file) out of the page cache, `from`
/// rounded down to a [`MAX_FOLIO_BYTES`] boundary: the kernel keeps a page (or a large folio)
/// that lies only partly inside the range, so the one holding the previous drop point must be
/// covered again now.
///
/// Not from the start of the file: everything below `from` was advised out before, and what
/// is resident there again was brought back by a reader behind the point, the kernel's
/// readahead ahead of it included. Those pages are [`ReadBack`]'s to drop once read; advising
/// them out on every pass threw a lagging consumer's readahead away before it got there, so
/// the volume read about 2.3x what such consumers were sent.
fn dont_need(file: &File, from: u64, to: Option<u64>) -> Result<(), Errno> {
    let from = from - from % MAX_FOLIO_BYTES;
    let len = match to {
        // To the end of the file.
        None => None,
        Some(to) if to <= from => return Ok(()),
        Some(to) => NonZeroU64::new(to - from),
    };
    match rustix::fs::fadvise(file, from, len, Advice::DontNeed) {
        Err(e) if !gone(e) => Err(e),
        _ => Ok(()),
    }
}

/// A snapshot of the segments with the byte count readers may see in each.
pub(crate) struct View {
    pub(crate) segs: Arc<Vec<Arc<Segment>>>,
    pub(crate) active_size: u64,
}

impl View {
    pub(crate) fn limit(&self, i: usize) -> u64 {
        if i + 1 == self.segs.len() {
            self.active_size
        } else {
            self.segs[i].size()
        }
    }

    /// (index of the segment holding the drop point, position in it). A point in a segment
    /// that was deleted since lies before the first remaining segment.
    pub(crate) fn resolve(&self, p: &DropPoint, dir_now: &std::path::Path) -> (usize, u64) {
        if p.dir != dir_now {
            return (0, 0);
        }
        let i = self.segs.partition_point(|s| s.base_offset < p.segment);
        match self.segs.get(i) {
            Some(s) if s.base_offset == p.segment => (i, p.position.min(self.limit(i))),
            Some(_) => (i, 0),
            // Cannot happen (base offsets only grow while a log is open); start over.
            None => (0, 0),
        }
    }

    pub(crate) fn bytes_from(&self, (i, pos): (usize, u64)) -> u64 {
        (i..self.segs.len()).map(|j| self.limit(j)).sum::<u64>() - pos
    }

    /// The new drop point of a pass that starts in segment `first`: `keep_bytes` before the
    /// end, as (index of its segment, position in it). The bytes from there to the end are
    /// exactly `keep_bytes` when the segments from `first` hold at least that many (the
    /// caller's case); otherwise the start of the last segment.
    pub(crate) fn cut_point(&self, first: usize, keep_bytes: u64) -> (usize, u64) {
        let n = self.segs.len();
        let (mut cut, mut cut_pos) = (n - 1, 0);
        let mut rest = keep_bytes;
        for i in (first..n).rev() {
            let l = self.limit(i);
            if l >= rest {
                (cut, cut_pos) = (i, l - rest);
                break;
            }
            rest -= l;
        }
        (cut, cut_pos)
    }
}

/// Whether `[.., to)` of segment `i` of `view` must be fdatasynced before it is advised out.
/// Not when it is durable (below the synced offset of `(leo, synced)`: a flush fsynced it
/// already) nor when it is clean (below the writeback point `written_back`: written back,
/// and bytes below the end are never rewritten). Everything else may hold dirty pages,
/// which DONTNEED would leave in the cache.
fn needs_fdatasync(
    view: &View,
    i: usize,
    to: u64,
    (leo, synced): (i64, i64),
    written_back: (usize, u64),
) -> bool {
    let durable = if i + 1 == view.segs.len() {
        leo <= synced
    } else {
        view.segs[i].next_offset() <= synced
    };
    let clean = i < written_back.0 || (i == written_back.0 && to <= written_back.1);
    !durable && !clean
}

impl Log {
    pub(crate) fn initial_drop_point(dir: PathBuf, segs: &[Arc<Segment>], size: u64) -> DropPoint {
        DropPoint {
            dir,
            segment: segs.last().map_or(0, |s| s.base_offset),
            position: size,
        }
    }

    pub(crate) fn view(&self) -> (View, i64, i64) {
        let s = self.shared.read();
        (
            View {
                segs: s.segments.clone(),
                active_size: s.active_size,
            },
            s.leo,
            s.synced,
        )
    }

    pub(crate) fn cache_undropped_bytes_impl(&self) -> u64 {
        let (view, _, _) = self.view();
        if view.segs.is_empty() {
            return 0;
        }
        let point = self.drop_point.lock();
        let at = view.resolve(&point, &self.dir.read());
        view.bytes_from(at)
    }

    /// One drop-behind pass ([`Log::drop_cache_behind`]): moves the drop point to
    /// `keep_bytes` before the end, making each range in between durable first where it may
    /// be dirty ([`needs_fdatasync`], [`Log::sync_before_drop`]) and then advising it out.
    /// The point is moved after each range, so a failure leaves it where the work stopped.
    pub(crate) fn drop_cache_behind_impl(&self, keep_bytes: u64) -> io::Result<DropStats> {
        let mut stats = DropStats::default();
        if self.is_closed() {
            // Released or deleted: its files are closed or going away.
            return Ok(stats);
        }
        // A failed log waits to be re-opened; its page cache is not to be synced again.
        self.check_not_failed()?;
        let mut point = self.drop_point.lock();
        let (view, leo, synced_offset) = self.view();
        let n = view.segs.len();
        if n == 0 {
            return Ok(stats);
        }
        let dir = self.dir();
        let (first, first_pos) = view.resolve(&point, &dir);
        // What the write-behind has written back is clean already: DONTNEED drops it
        // without an fdatasync first (see `writeback.rs`). Taken alone, never held with I/O.
        let written_back = view.resolve(&self.writeback_point.lock(), &dir);
        *point = DropPoint {
            dir,
            segment: view.segs[first].base_offset,
            position: first_pos,
        };
        if view.bytes_from((first, first_pos)) <= keep_bytes {
            return Ok(stats);
        }
        let (cut, cut_pos) = view.cut_point(first, keep_bytes);
        for i in first..=cut {
            let seg = &view.segs[i];
            let from = if i == first { first_pos } else { 0 };
            let whole = i < cut;
            let to = if whole { view.limit(i) } else { cut_pos };
            if to > from {
                if needs_fdatasync(&view, i, to, (leo, synced_offset), written_back) {
                    stats.fdatasyncs += 1;
                    if !self.sync_before_drop(seg)? {
                        return Ok(stats);
                    }
                }
                // A sealed segment wholly below the point goes to its end.
                dont_need(&*seg.log.get()?, from, if whole { None } else { Some(to) })?;
                stats.dropped_bytes += to - from;
            }
            *point = if whole {
                DropPoint {
                    dir: point.dir.clone(),
                    segment: view.segs[i + 1].base_offset,
                    position: 0,
                }
            } else {
                DropPoint {
                    dir: point.dir.clone(),
                    segment: seg.base_offset,
                    position: to.max(from),
                }
            };
        }
        Ok(stats)
    }

    /// Makes `seg`'s `.log` durable before a range of it is advised out (DONTNEED evicts only
    /// clean pages). Runs under the flush lock: this fdatasync may be the one that sees (and
    /// so clears) a writeback error of the file, and a flush in flight must not then succeed
    /// and acknowledge its round; a failure fails the log before any later flush can start.
    /// Ok(false) when the file is gone because the segment was deleted meanwhile (nothing of
    /// the log is lost, nothing to drop: the pass ends).
    fn sync_before_drop(&self, seg: &Arc<Segment>) -> io::Result<bool> {
        let _flushing = self.flush_lock.lock();
        self.check_not_failed()?;
        #[cfg(test)]
        assert!(
            self.flush_lock.is_locked(),
            "the drop-behind's fdatasync runs outside the flush lock"
        );
        #[cfg(test)]
        let fault = {
            let mut f = self.faults.lock();
            if std::mem::take(&mut f.drop_sync) {
                Some(Errno::IO)
            } else {
                std::mem::take(&mut f.drop_sync_gone).then_some(Errno::STALE)
            }
        };
        #[cfg(not(test))]
        let fault: Option<Errno> = None;
        let synced = match fault {
            Some(e) => Err(e),
            // Through the file cache, which then knows the file clean.
            None => seg
                .log
                .sync_data()
                .map_err(|e| Errno::from_io_error(&e).unwrap_or(Errno::IO)),
        };
        match synced {
            Ok(()) => Ok(true),
            // Deleted meanwhile (retention, DeleteRecords, a new owner's retention): nothing
            // of the log is lost, nothing to drop.
            Err(e) if gone(e) && !self.holds_segment(seg) => Ok(false),
            Err(e) => {
                let path = seg_path(&seg.dir, seg.base_offset, SegmentFileKind::Log);
                Err(self.sync_failed(path, self.synced_offset(), e.into()))
            }
        }
    }

    /// A read found `[pos, pos + len)` of segment `segment`: remember what of it lies below
    /// the drop point. While a drop-behind pass holds the point (its I/O must not hold up a
    /// read) the whole read is remembered, and [`Log::drop_read_back`] leaves out what lies
    /// above the point.
    pub(crate) fn note_read_back(&self, segment: i64, pos: u64, len: u64) {
        let end = match self.drop_point.try_lock() {
            Some(p) if segment < p.segment => pos + len,
            Some(p) if segment == p.segment && pos < p.position => (pos + len).min(p.position),
            // At or above the point: the drop-behind's.
            Some(_) => return,
            None => pos + len,
        };
        let len = end - pos;
        let mut rb = self.read_back.lock();
        // A reader's next read starts where its last one ended (or inside it, for a batch it
        // had only part of): the same range.
        let touching = rb
            .current
            .iter_mut()
            .find(|r| r.segment == segment && pos <= r.end && end >= r.start);
        if let Some(r) = touching {
            r.start = r.start.min(pos);
            r.end = r.end.max(end);
            r.bytes += len;
        } else if rb.current.len() < READ_BACK_RANGES {
            rb.current.push(ReadRange {
                segment,
                start: pos,
                end,
                bytes: len,
            });
        }
        // After the range is recorded: a pass that took the flag before this either saw the
        // range or leaves the flag set for the next one.
        self.cache_work
            .store(true, std::sync::atomic::Ordering::Release);
    }

    pub(crate) fn drop_read_back_impl(&self) -> u64 {
        let older = {
            let mut rb = self.read_back.lock();
            let current = std::mem::take(&mut rb.current);
            std::mem::replace(&mut rb.previous, current)
        };
        if older.is_empty() || self.is_closed() {
            return 0;
        }
        let (view, _, _) = self.view();
        let dir = self.dir();
        let (point_segment, point_position) = {
            let p = self.drop_point.lock();
            if p.dir != dir {
                // Moved: the point starts over, nothing lies below it.
                return 0;
            }
            (p.segment, p.position)
        };
        let mut bytes = 0;
        for r in older {
            // Only what lies below the point, which only moves up: a read recorded while a
            // pass held the point may have been at the tail.
            let end = match r.segment.cmp(&point_segment) {
                std::cmp::Ordering::Less => r.end,
                std::cmp::Ordering::Equal => r.end.min(point_position),
                std::cmp::Ordering::Greater => continue,
            };
            let Ok(i) = view
                .segs
                .binary_search_by_key(&r.segment, |s| s.base_offset)
            else {
                // Deleted since: its pages went with it.
                continue;
            };
            // Only the range read: below it another reader further behind may be about to
            // read what the kernel's readahead brought in for it, and the reader's own
            // readahead lies above it. What lies below the point is durable, so its pages
            // are clean and DONTNEED drops them.
            let advised = || {
                view.segs[i]
                    .log
                    .get()
                    .is_ok_and(|f| dont_need(&f, r.start, Some(end)).is_ok())
            };
            if end > r.start && advised() {
                bytes += if end < r.end {
                    r.bytes.min(end - r.start)
                } else {
                    r.bytes
                };
            }
        }
        bytes
    }

    /// True while `seg` is one of this log's segments (not deleted since the view was taken).
    pub(crate) fn holds_segment(&self, seg: &Arc<Segment>) -> bool {
        self.shared
            .read()
            .segments
            .iter()
            .any(|s| Arc::ptr_eq(s, seg))
    }
}

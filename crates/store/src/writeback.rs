//! Write-behind: start the kernel's writeback of appended log data early, in small steps,
//! and wait for it, so that what the broker has written but the volume has not yet received
//! stays small and moving.
//!
//! Left to itself, the kernel lets dirty pages pile up until a background threshold (10% of
//! memory by default) or an age of 30 s, then writes gigabytes at once; a writer that outruns
//! the volume meanwhile is stopped in `write` by the dirty-page throttle, for seconds. Each
//! [`Log`] keeps a *writeback point* (in memory only, a [`DropPoint`]): everything of the log
//! below it has been written back to the volume. A writeback pass over the logs (the broker's,
//! `crates/broker/src/writeback.rs`) has two phases, so that the I/O of every log is in flight
//! at once rather than one log's after another's:
//!
//! 1. [`Log::start_writeback`]: for a log with at least `min_bytes` after its point,
//!    `sync_file_range(SYNC_FILE_RANGE_WRITE)` over each segment's range from the point to the
//!    current end, the active segment's end rounded down to a page (the partial last page
//!    is written again by the next append). This only queues the I/O (it may wait for room
//!    in the device's queue).
//! 2. [`Log::finish_writeback`]: `sync_file_range(SYNC_FILE_RANGE_WAIT_AFTER)` over the same
//!    ranges, then the point moves to where phase 1 ended.
//!
//! Nothing here is about durability: no metadata is written and the device's cache is not
//! flushed, so the recovery point and the synced offset do not move (flushes and the
//! drop-behind's `fdatasync` still do that, and find less left to write). The wait can report
//! (and so clear, for this open file) a writeback error, exactly like an `fdatasync`: it runs
//! under the flush lock and a failure fails the log (`LogFailure::SyncFailed`), as a failed
//! drop-behind `fdatasync` does (see `cache.rs`). A file found gone (ENOENT, ESTALE) is
//! ignored when its segment was deleted meanwhile.

use std::io;
use std::sync::Arc;

use sluice_format::SegmentFileKind;

use crate::cache::{gone, DropPoint};
use crate::segment::{seg_path, Segment};
use crate::sys::{sync_file_range, START_WRITE, WAIT_AFTER};
use crate::Log;

/// Page size the write-behind rounds the end of the active segment down to (x86-64, arm64's
/// usual 4 KiB; a larger page only makes a pass write part of a page a second time).
const PAGE_BYTES: u64 = 4096;

/// Where a write-behind pass stops in the active segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WritebackEnd {
    /// At the last page boundary: the partial last page waits for a later pass (the next
    /// append writes into it again).
    PageBoundary,
    /// At the end, partial page included (to bring the unwritten data down to nothing).
    End,
}

/// The ranges one [`Log::start_writeback`] queued, to wait for with
/// [`Log::finish_writeback`].
#[derive(Debug)]
pub struct WritebackStarted {
    ranges: Vec<(Arc<Segment>, u64, u64)>,
    /// The writeback point once they are written.
    end: DropPoint,
    /// Bytes in the ranges.
    pub bytes: u64,
}

impl Log {
    pub(crate) fn unwritten_bytes_impl(&self) -> u64 {
        let (view, _, _) = self.view();
        if view.segs.is_empty() {
            return 0;
        }
        let point = self.writeback_point.lock();
        view.bytes_from(view.resolve(&point, &self.dir.read()))
    }

    pub(crate) fn start_writeback_impl(
        &self,
        min_bytes: u64,
        end: WritebackEnd,
    ) -> io::Result<Option<WritebackStarted>> {
        if self.is_closed() {
            return Ok(None);
        }
        self.check_not_failed()?;
        let point = self.writeback_point.lock();
        let (view, _, _) = self.view();
        let n = view.segs.len();
        if n == 0 {
            return Ok(None);
        }
        let dir = self.dir();
        let (first, first_pos) = view.resolve(&point, &dir);
        drop(point);
        let end_pos = match end {
            WritebackEnd::PageBoundary => view.limit(n - 1) / PAGE_BYTES * PAGE_BYTES,
            WritebackEnd::End => view.limit(n - 1),
        };
        let bytes = view
            .bytes_from((first, first_pos))
            .saturating_sub(view.limit(n - 1) - end_pos);
        if bytes == 0 || bytes < min_bytes {
            return Ok(None);
        }
        let mut ranges = Vec::with_capacity(n - first);
        for i in first..n {
            let seg = &view.segs[i];
            let from = if i == first { first_pos } else { 0 };
            // The active segment's last partial page is left for a later pass: the next
            // append writes into it again, and writing it back every pass would be a small
            // random write per log per pass.
            let to = if i + 1 == n { end_pos } else { view.limit(i) };
            if to <= from {
                continue;
            }
            // A file the cache closed is clean: nothing of it to write back.
            let Some(file) = seg.log.get_if_open() else {
                continue;
            };
            match sync_file_range(&file, from, to - from, START_WRITE) {
                Ok(()) => ranges.push((seg.clone(), from, to)),
                // Deleted meanwhile: nothing of it to write.
                Err(e) if gone(e) && !self.holds_segment(seg) => {}
                // Starting writeback clears no error state: the wait (or a flush) reports it.
                Err(e) => return Err(e.into()),
            }
        }
        let end = DropPoint {
            dir,
            segment: view.segs[n - 1].base_offset,
            position: end_pos.max(if first == n - 1 { first_pos } else { 0 }),
        };
        Ok(Some(WritebackStarted { ranges, end, bytes }))
    }

    pub(crate) fn finish_writeback_impl(&self, started: WritebackStarted) -> io::Result<u64> {
        if self.is_closed() {
            return Ok(0);
        }
        for (seg, from, to) in &started.ranges {
            // Under the flush lock, like the drop-behind's fdatasync: this wait may be the call
            // that sees (and clears) a writeback error of the file.
            let _flushing = self.flush_lock.lock();
            self.check_not_failed()?;
            #[cfg(test)]
            let waited = crate::faults::fire(
                &mut self.faults.lock().writeback_wait,
                rustix::io::Errno::IO,
            )
            .map_err(|e| rustix::io::Errno::from_io_error(&e).unwrap_or(rustix::io::Errno::IO))
            .and_then(|()| match seg.log.get_if_open() {
                Some(f) => sync_file_range(&f, *from, to - from, WAIT_AFTER),
                None => Ok(()),
            });
            #[cfg(not(test))]
            let waited = match seg.log.get_if_open() {
                Some(f) => sync_file_range(&f, *from, to - from, WAIT_AFTER),
                // Closed by the cache, so clean: its writeback is done.
                None => Ok(()),
            };
            match waited {
                Ok(()) => {}
                Err(e) if gone(e) && !self.holds_segment(seg) => {}
                Err(e) => {
                    let path = seg_path(&seg.dir, seg.base_offset, SegmentFileKind::Log);
                    return Err(self.sync_failed(path, self.synced_offset(), e.into()));
                }
            }
        }
        let mut point = self.writeback_point.lock();
        // A move to another log dir since phase 1 starts over there.
        if point.dir == started.end.dir {
            *point = started.end;
        }
        Ok(started.bytes)
    }
}

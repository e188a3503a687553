//! The bounded read of a [`Log`], as the sequence of its steps (`Log::read_bounded`): the
//! offset checked against the view ([`Log::check_read_range`]); then, segment by segment
//! from the one holding it: its file ([`Log::read_file`]), the active segment's recent
//! batches ([`read_recent`]), else the batch holding the offset from the sparse index and a
//! header scan ([`Log::first_batch_from`]), and how much to return from it
//! ([`Log::read_extent`]). Every read stops at the view's end: the high watermark (in a
//! cluster the published mark, docs/cluster.md, "Fencing", point 7) or the last stable
//! offset. No record is decoded (ARCHITECTURE.md: "the fetch path does no per-record work").

use super::*;

/// One segment as a read sees it.
#[derive(Debug)]
pub(super) struct SegRead<'a> {
    pub seg: &'a Arc<Segment>,
    pub file: &'a Arc<std::fs::File>,
    /// The segment's size readers see.
    pub limit: u64,
    /// The offset after everything the segment shows readers.
    pub seg_end: i64,
    /// `index.interval.bytes`.
    pub interval: u64,
    /// Never wait for the volume (see [`Log::read_isolated_from`]).
    pub cached_only: bool,
}

impl View {
    /// The answer of a read of this view returning `slice`.
    fn result(&self, slice: Option<FileSlice>) -> ReadResult {
        ReadResult {
            slice,
            high_watermark: self.hw,
            log_start_offset: self.log_start,
            last_stable_offset: self.lso,
            aborted: None,
        }
    }
}

/// A header scan of `file` from `from` to `limit` (a read that must not wait gets
/// [`io::ErrorKind::WouldBlock`] instead of reading from the volume).
fn scanner(
    file: &Arc<std::fs::File>,
    from: u64,
    limit: u64,
    cached_only: bool,
) -> BatchScanner<'static> {
    let s = BatchScanner::new(file.clone(), from, limit, false);
    if cached_only {
        s.cached_only()
    } else {
        s
    }
}

/// The read answered from the active segment's newest batches kept in memory, when they can
/// answer it (exactly as the scan would: ARCHITECTURE.md, the fetch path invariant), with the
/// offset after what it returns. None: they cannot, the file is scanned.
pub(super) fn read_recent(
    seg: &Segment,
    offset: i64,
    max_bytes: u32,
    min_one_batch: bool,
    limit: u64,
    seg_end: i64,
) -> Option<(TailRead, i64)> {
    let m = seg.meta.read();
    m.recent
        .read(offset, u64::from(max_bytes), min_one_batch, limit)
        .map(|t| match t {
            TailRead::Found { position, len } => {
                (t, m.recent.offset_after(position + len).unwrap_or(seg_end))
            }
            TailRead::TooLarge => (t, offset),
        })
}

impl Log {
    /// A read of what `view` shows, and the offset after the last batch it returns (the
    /// upper bound of the aborted transactions a read_committed fetch needs). A view taken
    /// with `committed` stops at the last stable offset. `cached_only`: as in
    /// [`Log::read_isolated_from`].
    pub(super) fn read_bounded(
        &self,
        view: &View,
        offset: i64,
        max_bytes: u32,
        min_one_batch: bool,
        use_recent: bool,
        cached_only: bool,
    ) -> Result<(ReadResult, i64), ReadError> {
        self.check_read_range(view, offset)?;
        // Between the visible end (the high watermark, or the last stable offset) and the
        // log end: nothing yet.
        if offset >= view.end {
            return Ok((view.result(None), offset));
        }
        let interval = self.interval();
        let segs = &view.segs;
        let first = segs
            .partition_point(|s| s.base_offset <= offset)
            .saturating_sub(1);
        for i in first..segs.len() {
            let seg = &segs[i];
            let last = i + 1 == segs.len();
            let limit = Self::seg_limit(segs, i, view.active_size);
            // The offset after everything this segment shows readers.
            let seg_end = if last { view.end } else { seg.next_offset() };
            let file = self.read_file(seg, cached_only)?;
            let slice = |position: u64, len: u64| {
                Some(FileSlice {
                    file: file.clone(),
                    position,
                    len: u32::try_from(len).unwrap_or(u32::MAX),
                })
            };
            let tail = if use_recent && last {
                read_recent(seg, offset, max_bytes, min_one_batch, limit, seg_end)
            } else {
                None
            };
            match tail {
                Some((TailRead::TooLarge, _)) => return Ok((view.result(None), offset)),
                Some((TailRead::Found { position, len }, upper)) => {
                    return Ok((view.result(slice(position, len)), upper));
                }
                None => {}
            }
            if cached_only && !seg.indexes_loaded() {
                return Err(self.read_io(cached_only, io::ErrorKind::WouldBlock.into()));
            }
            let r = SegRead {
                seg,
                file: &file,
                limit,
                seg_end,
                interval,
                cached_only,
            };
            let Some((pos, h)) = self.first_batch_from(&r, offset)? else {
                continue;
            };
            let Some((len, upper)) = self.read_extent(&r, pos, &h, max_bytes, min_one_batch)?
            else {
                return Ok((view.result(None), offset));
            };
            self.note_read_back(seg.base_offset, pos, len);
            return Ok((view.result(slice(pos, len)), upper));
        }
        Ok((view.result(None), offset))
    }

    /// A read below the log start or past the log end is out of range (the client resets
    /// its position); one between the visible end and the log end is not, it finds nothing
    /// yet (the data is not confirmed, or not stable, yet).
    pub(super) fn check_read_range(&self, view: &View, offset: i64) -> Result<(), ReadError> {
        if offset < view.log_start || offset > view.log_end {
            return Err(ReadError::OffsetOutOfRange {
                tp: self.tp.clone(),
                requested: offset,
                log_start: view.log_start,
                log_end: view.log_end,
            });
        }
        Ok(())
    }

    /// The error of a read that failed on `source`: a read that must not wait and would
    /// have is [`ReadError::WouldBlock`] (it is read again on a blocking thread).
    fn read_io(&self, cached_only: bool, source: io::Error) -> ReadError {
        if cached_only && source.kind() == io::ErrorKind::WouldBlock {
            ReadError::WouldBlock {
                tp: self.tp.clone(),
            }
        } else {
            ReadError::Io {
                tp: self.tp.clone(),
                source,
            }
        }
    }

    /// The segment's `.log`, opened again if the file cache closed it; not on a read that
    /// must not wait, which is read again on a blocking thread instead (ARCHITECTURE.md: the
    /// fetch path waits for the volume on a blocking thread, never on a runtime thread).
    pub(super) fn read_file(
        &self,
        seg: &Segment,
        cached_only: bool,
    ) -> Result<Arc<std::fs::File>, ReadError> {
        if cached_only {
            seg.log
                .get_if_open()
                .ok_or_else(|| self.read_io(cached_only, io::ErrorKind::WouldBlock.into()))
        } else {
            seg.log.get().map_err(|e| self.read_io(cached_only, e))
        }
    }

    /// The first batch of the segment whose last offset reaches `offset`, and its position:
    /// from the sparse index's entry at or below it, a scan of batch headers (bodies skipped)
    /// up to the visible size (docs/log-format.md, "Lookup of offset"). None: no such batch
    /// below the visible size.
    pub(super) fn first_batch_from(
        &self,
        r: &SegRead<'_>,
        offset: i64,
    ) -> Result<Option<(u64, BatchHeader)>, ReadError> {
        let rio = |e| self.read_io(r.cached_only, e);
        let start = r
            .seg
            .lookup_position(offset, r.limit, r.interval)
            .map_err(rio)?;
        let mut batches = scanner(r.file, start, r.limit, r.cached_only);
        loop {
            match batches.next_batch() {
                Ok(Some((pos, h))) => {
                    if h.last_offset() >= offset {
                        return Ok(Some((pos, h)));
                    }
                }
                Ok(None) => return Ok(None),
                Err(e) => return Err(rio(e.into_io())),
            }
        }
    }

    /// How much to return from the batch at `pos` (header `h`), and the offset after it:
    /// whole batches only. The first batch alone when it is larger than `max_bytes` and
    /// `min_one_batch` (None when not: nothing is returned); everything up to the visible
    /// size when that fits; else the batches that fit whole under the cap
    /// ([`Log::whole_batches_below`]).
    pub(super) fn read_extent(
        &self,
        r: &SegRead<'_>,
        pos: u64,
        h: &BatchHeader,
        max_bytes: u32,
        min_one_batch: bool,
    ) -> Result<Option<(u64, i64)>, ReadError> {
        let first_len = h.total_len() as u64;
        let max = u64::from(max_bytes);
        if first_len > max {
            if !min_one_batch {
                return Ok(None);
            }
            return Ok(Some((first_len, h.next_offset())));
        }
        if pos + max >= r.limit {
            return Ok(Some((r.limit - pos, r.seg_end)));
        }
        let (end, upper) = self.whole_batches_below(r, pos, first_len, pos + max)?;
        Ok(Some((end - pos, upper.max(h.next_offset()))))
    }

    /// Where the whole batches from `pos` (the first `first_len` long) end at or below
    /// `target`, walking from the nearest batch boundary below the cap (an index entry), and
    /// the offset the first batch left out starts at: no aborted transaction this read needs
    /// reaches it (the segment's visible end when none is left out).
    pub(super) fn whole_batches_below(
        &self,
        r: &SegRead<'_>,
        pos: u64,
        first_len: u64,
        target: u64,
    ) -> Result<(u64, i64), ReadError> {
        let rio = |e| self.read_io(r.cached_only, e);
        let from = r
            .seg
            .boundary_at_or_below(target, pos, r.interval)
            .map_err(rio)?;
        let mut batches = scanner(r.file, from, r.limit, r.cached_only);
        // Every batch before `from` (a batch start at or below the cap) fits whole.
        let mut end = (pos + first_len).max(from);
        loop {
            match batches.next_batch() {
                Ok(Some((p, h))) => {
                    let e = p + h.total_len() as u64;
                    if e > target {
                        return Ok((end, h.base_offset));
                    }
                    end = end.max(e);
                }
                Ok(None) => return Ok((end, r.seg_end)),
                Err(e) => return Err(rio(e.into_io())),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::log::append::tests::{batch, open_log};
    use crate::tests::{cfg, NOW};
    use crate::LogManager;

    /// A log of one segment holding five batches of three records each (an index entry at
    /// each batch but the first), and each batch's position and header.
    fn five_batches(dir: &std::path::Path) -> (LogManager, Arc<Log>, Vec<(u64, BatchHeader)>) {
        let c = LogConfig {
            index_interval_bytes: 1,
            ..cfg()
        };
        let (m, log) = open_log(dir, c);
        for i in 0..5 {
            log.append(
                Bytes::from(batch(3, &format!("r{i}"))),
                AppendOrigin::Client,
                NOW,
            )
            .unwrap();
        }
        let bytes = std::fs::read(seg_path(&log.dir(), 0, SegmentFileKind::Log)).unwrap();
        let found = parse_batches(&bytes, None)
            .unwrap()
            .into_iter()
            .map(|b| (b.position as u64, b.header))
            .collect();
        (m, log, found)
    }

    fn active(log: &Log) -> Arc<Segment> {
        log.shared.read().segments.last().cloned().unwrap()
    }

    #[test]
    fn check_read_range_refuses_offsets_outside_the_log_only() {
        let d = tempfile::tempdir().unwrap();
        let (_m, log, _) = five_batches(d.path());
        let view = log.visible(false);
        for offset in [-1, 16] {
            assert!(matches!(
                log.check_read_range(&view, offset),
                Err(ReadError::OffsetOutOfRange {
                    log_start: 0,
                    log_end: 15,
                    ..
                })
            ));
        }
        for offset in [0, 7, 15] {
            assert!(log.check_read_range(&view, offset).is_ok());
        }
    }

    #[test]
    fn the_first_batch_from_an_offset_is_the_one_holding_it() {
        let d = tempfile::tempdir().unwrap();
        let (_m, log, batches) = five_batches(d.path());
        let seg = active(&log);
        let file = log.read_file(&seg, false).unwrap();
        let r = SegRead {
            seg: &seg,
            file: &file,
            limit: seg.size(),
            seg_end: 15,
            interval: 1,
            cached_only: false,
        };
        for (offset, k) in [(0, 0), (4, 1), (5, 1), (6, 2), (14, 4)] {
            let (pos, h) = log.first_batch_from(&r, offset).unwrap().unwrap();
            assert_eq!(
                (pos, h.base_offset),
                (batches[k].0, batches[k].1.base_offset)
            );
        }
        assert!(log.first_batch_from(&r, 15).unwrap().is_none());
        // Not past the visible size.
        let short = SegRead {
            limit: batches[2].0,
            ..r
        };
        assert!(log.first_batch_from(&short, 7).unwrap().is_none());
    }

    #[test]
    fn read_extent_returns_whole_batches_up_to_the_cap() {
        let d = tempfile::tempdir().unwrap();
        let (_m, log, batches) = five_batches(d.path());
        let seg = active(&log);
        let file = log.read_file(&seg, false).unwrap();
        let limit = seg.size();
        let r = SegRead {
            seg: &seg,
            file: &file,
            limit,
            seg_end: 15,
            interval: 1,
            cached_only: false,
        };
        let (p0, h0) = batches[0];
        let len0 = h0.total_len() as u64;
        let cap = |bytes: u64| u32::try_from(bytes).unwrap();
        // The first batch over the cap: alone, or nothing.
        assert_eq!(
            log.read_extent(&r, p0, &h0, cap(len0 - 1), false).unwrap(),
            None
        );
        assert_eq!(
            log.read_extent(&r, p0, &h0, cap(len0 - 1), true).unwrap(),
            Some((len0, 3))
        );
        // Everything fits.
        assert_eq!(
            log.read_extent(&r, p0, &h0, cap(limit), false).unwrap(),
            Some((limit, 15))
        );
        // Two and a half batches: two, and the third's base as the upper bound.
        let (p2, h2) = batches[2];
        let half = cap(p2 + h2.total_len() as u64 / 2);
        assert_eq!(
            log.read_extent(&r, p0, &h0, half, false).unwrap(),
            Some((p2, 6))
        );
        // From the second batch, exactly two batches' worth.
        let (p1, h1) = batches[1];
        let (p3, _) = batches[3];
        assert_eq!(
            log.read_extent(&r, p1, &h1, cap(p3 - p1), false).unwrap(),
            Some((p3 - p1, 9))
        );
        assert_eq!(
            log.whole_batches_below(&r, p0, len0, p0 + len0).unwrap(),
            (batches[1].0, 3)
        );
    }

    #[test]
    fn read_recent_answers_from_the_active_segment_only() {
        let d = tempfile::tempdir().unwrap();
        let (_m, log, batches) = five_batches(d.path());
        let seg = active(&log);
        let limit = seg.size();
        let (p1, _) = batches[1];
        assert_eq!(
            read_recent(&seg, 4, u32::MAX, true, limit, 15),
            Some((
                TailRead::Found {
                    position: p1,
                    len: limit - p1
                },
                15
            ))
        );
        assert_eq!(
            read_recent(&seg, 4, 10, false, limit, 15),
            Some((TailRead::TooLarge, 4))
        );
        // A sealed segment keeps no recent batches: its file is scanned.
        log.roll(NOW).unwrap();
        assert_eq!(read_recent(&seg, 4, u32::MAX, true, limit, 15), None);
    }
}

//! One cleaning of one log (Kafka's `Cleaner.doClean`): find the cleanable range, build the
//! key map over its dirty part, then rewrite every segment below the map's end, in groups
//! that fit one segment, each into a new segment that replaces the group (`swap.rs`).

use std::collections::HashMap;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use sluice_format::{BatchHeader, SegmentFileKind, OFFSET_INDEX_ENTRY_LEN, TIME_INDEX_ENTRY_LEN};

use super::filter::{decode, filter_batch, Decision, Rules};
use super::offset_map::OffsetMap;
use super::{CleanStats, CleanStop};
use crate::segment::{BatchScanner, IndexCursor, ScanError, Segment};
use crate::Log;

/// The cleanable part of a log now (Kafka's `LogToClean`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Cleanable {
    pub first_dirty: i64,
    /// Base offset of the first segment that may not be cleaned.
    pub first_uncleanable: i64,
    /// Bytes of the segments below the first dirty offset.
    pub clean_bytes: u64,
    /// Bytes of the segments from the one holding the first dirty offset to the first
    /// uncleanable one.
    pub cleanable_bytes: u64,
    /// Uncleaned data is older than `max.compaction.lag.ms`.
    pub overdue: bool,
}

impl Cleanable {
    pub(crate) fn ratio(&self) -> f64 {
        let total = self.clean_bytes + self.cleanable_bytes;
        if total == 0 {
            0.0
        } else {
            self.cleanable_bytes as f64 / total as f64
        }
    }
}

/// A rate limit on the cleaner's read and written bytes, shared by its threads (Kafka's
/// `Throttler`): after each chunk, sleep as long as the bytes so far ask for.
#[derive(Debug)]
pub(crate) struct Throttle {
    bytes_per_second: f64,
    window: Mutex<(Instant, f64)>,
}

/// How often the throttle's window restarts.
const THROTTLE_WINDOW: Duration = Duration::from_millis(300);

impl Throttle {
    pub(crate) fn new(bytes_per_second: f64) -> Throttle {
        Throttle {
            bytes_per_second,
            window: Mutex::new((Instant::now(), 0.0)),
        }
    }

    /// Count `bytes` and sleep as the rate asks (in short slices, stopping early once
    /// `aborted` says so).
    pub(crate) fn account(&self, bytes: u64, aborted: &dyn Fn() -> bool) {
        if !(self.bytes_per_second > 0.0 && self.bytes_per_second < 1e15) {
            return;
        }
        let sleep = {
            let mut w = self.window.lock();
            w.1 += bytes as f64;
            let elapsed = w.0.elapsed();
            let due = Duration::from_secs_f64(w.1 / self.bytes_per_second);
            let sleep = due.saturating_sub(elapsed);
            if elapsed + sleep >= THROTTLE_WINDOW {
                *w = (Instant::now() + sleep, 0.0);
            }
            sleep
        };
        let until = Instant::now() + sleep.min(Duration::from_secs(60));
        while !aborted() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            std::thread::sleep(left.min(Duration::from_millis(50)));
        }
    }
}

/// What one cleaning runs with.
pub(crate) struct CleanCtx<'a> {
    pub first_dirty: i64,
    pub now_ms: i64,
    pub map: &'a mut OffsetMap,
    pub throttle: &'a Throttle,
    /// True when the cleaning must stop (the log is going away, moving, or failed).
    pub aborted: &'a (dyn Fn() -> bool + Sync),
    /// True while this broker may write to the log (cluster mode ownership).
    pub owns: &'a (dyn Fn() -> bool + Sync),
    /// Part of the cleaner's temporary file names, unique to this process.
    pub token: &'a str,
    pub io_buffer_bytes: usize,
    pub max_decompressed: usize,
    #[cfg(test)]
    pub crash_at: Option<super::CrashAt>,
}

impl std::fmt::Debug for CleanCtx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CleanCtx")
            .field("first_dirty", &self.first_dirty)
            .field("now_ms", &self.now_ms)
            .finish_non_exhaustive()
    }
}

/// Index of the segment holding `offset` (the last with base <= offset), if any.
fn floor_index(segs: &[Arc<Segment>], offset: i64) -> Option<usize> {
    segs.partition_point(|s| s.base_offset <= offset)
        .checked_sub(1)
}

impl Log {
    /// The cleanable range from `first_dirty` (None: the log start), Kafka's
    /// `LogCleanerManager.cleanableOffsets`: up to the first of the active segment, the high
    /// watermark (the published mark in cluster mode), the recovery point, and the first
    /// segment whose newest record is younger than `min.compaction.lag.ms`; rounded down to a
    /// segment's base. `durable_only`: also below the recovery point (a cleaning syncs the
    /// sealed segments first, as Kafka's roll schedules their flush; choosing a log to clean
    /// leaves it out, as Kafka's cleaner does).
    pub(crate) fn cleanable(
        &self,
        first_dirty: Option<i64>,
        now_ms: i64,
        durable_only: bool,
    ) -> Cleanable {
        let cfg = self.config.read().cleanup;
        let hw = self.high_watermark();
        let (segs, log_start, leo, recovery_point) = {
            let s = self.shared.read();
            (s.segments.clone(), s.log_start, s.leo, s.recovery_point)
        };
        let mut first_dirty = first_dirty.unwrap_or(log_start);
        if first_dirty < log_start || first_dirty > leo {
            first_dirty = log_start;
        }
        let active_base = segs.last().map_or(leo, |s| s.base_offset);
        let sealed = &segs[..segs.len().saturating_sub(1)];
        let from = floor_index(sealed, first_dirty).unwrap_or(0);
        // Nothing at or past the last stable offset: an open transaction's records may still
        // be aborted (Kafka's cleanableOffsets).
        let mut uncleanable = hw.min(active_base).min(self.last_stable_offset());
        if durable_only {
            uncleanable = uncleanable.min(recovery_point);
        }
        if cfg.min_compaction_lag_ms > 0 {
            let interval = self.interval();
            let young = sealed.get(from..).unwrap_or_default().iter().find(|s| {
                s.largest_timestamp(interval) > now_ms.saturating_sub(cfg.min_compaction_lag_ms)
            });
            if let Some(s) = young {
                uncleanable = uncleanable.min(s.base_offset);
            }
        }
        let uncleanable = uncleanable.max(first_dirty);
        let first_uncleanable =
            floor_index(&segs, uncleanable).map_or(active_base, |i| segs[i].base_offset);
        let clean_bytes = segs
            .iter()
            .take_while(|s| s.base_offset < first_dirty)
            .map(|s| s.size())
            .sum();
        let cleanable_bytes = segs
            .get(from..)
            .unwrap_or_default()
            .iter()
            .take_while(|s| s.base_offset < first_uncleanable)
            .map(|s| s.size())
            .sum();
        let mut overdue = false;
        if cfg.max_compaction_lag_ms < i64::MAX {
            let until = now_ms.saturating_sub(cfg.max_compaction_lag_ms.max(0));
            overdue = sealed
                .get(from..)
                .unwrap_or_default()
                .iter()
                .filter(|s| s.next_offset() > first_dirty)
                .filter_map(|s| crate::segment::read_first_ts(s))
                .any(|t| t > 0 && t < until);
        }
        Cleanable {
            first_dirty,
            first_uncleanable,
            clean_bytes,
            cleanable_bytes,
            overdue,
        }
    }

    /// Clean the log once: returns the new first dirty offset (the end of what the key map
    /// covered) and what was done. Blocking; run on a cleaner thread.
    pub(crate) fn clean(&self, ctx: &mut CleanCtx<'_>) -> Result<(i64, CleanStats), CleanStop> {
        let mut stats = CleanStats::default();
        // Never clean what a crash could still take away: sealed segments past the recovery
        // point are made durable first (the data of the active one too; its index files are
        // left to recovery, as a group-commit round leaves them).
        let wanted = self.cleanable(Some(ctx.first_dirty), ctx.now_ms, false);
        if wanted.first_uncleanable > self.recovery_point() {
            self.sync_appended()?;
        }
        let range = self.cleanable(Some(ctx.first_dirty), ctx.now_ms, true);
        if range.first_uncleanable <= range.first_dirty {
            return Ok((range.first_dirty, stats));
        }
        let aborted = self.aborted_ranges()?;
        let end = self.build_offset_map(ctx, range, &aborted, &mut stats)?;
        if end <= range.first_dirty {
            tracing::warn!(tp = ?self.tp, first_dirty = range.first_dirty,
                "log.cleaner.dedupe.buffer.size is too small to hold the keys of one batch; not cleaning");
            return Ok((range.first_dirty, stats));
        }
        let (segs, cfg) = (
            self.shared.read().segments.clone(),
            self.config.read().clone(),
        );
        let sealed = &segs[..segs.len().saturating_sub(1)];
        let to_clean: Vec<Arc<Segment>> = sealed
            .iter()
            .take_while(|s| s.base_offset < end)
            .cloned()
            .collect();
        let producers = self.writer.lock().producers.last_offsets();
        let rules = Rules {
            now_ms: ctx.now_ms,
            delete_retention_ms: cfg.cleanup.delete_retention_ms.max(0),
        };
        for group in group_by_size(
            &to_clean,
            cfg.segment_bytes,
            u64::from(cfg.segment_index_bytes),
            range.first_uncleanable,
        ) {
            self.clean_group(
                ctx,
                &group,
                rules,
                &producers,
                &aborted,
                range.first_uncleanable,
                &mut stats,
            )?;
            stats.groups += 1;
        }
        tracing::info!(tp = ?self.tp, first_dirty = range.first_dirty, end, groups = stats.groups,
            read = stats.bytes_read, written = stats.bytes_written, "cleaned log");
        Ok((end, stats))
    }

    /// Kafka's `buildOffsetMap`: the latest offset of every key from the first dirty offset
    /// up to the first uncleanable one, or as far as the map holds (stopping at a batch).
    /// Returns the offset after the last one covered.
    fn build_offset_map(
        &self,
        ctx: &mut CleanCtx<'_>,
        range: Cleanable,
        aborted: &Aborted,
        stats: &mut CleanStats,
    ) -> Result<i64, CleanStop> {
        ctx.map.clear();
        let interval = self.interval();
        let segs = self.shared.read().segments.clone();
        let dirty: Vec<&Arc<Segment>> = segs
            .iter()
            .filter(|s| {
                s.base_offset < range.first_uncleanable && s.next_offset() > range.first_dirty
            })
            .collect();
        'segments: for (i, seg) in dirty.iter().enumerate() {
            let size = seg.size();
            let start = if seg.base_offset < range.first_dirty {
                seg.lookup_position(range.first_dirty, size, interval)?
            } else {
                0
            };
            let mut scanner = BatchScanner::new(seg.log.get()?, start, size, true);
            while let Some((pos, h)) = self.next_to_clean(ctx, &mut scanner, seg)? {
                stats.bytes_read += h.total_len() as u64;
                ctx.throttle.account(h.total_len() as u64, ctx.aborted);
                if h.last_offset() < range.first_dirty {
                    continue;
                }
                // Records of aborted transactions never enter the map: an aborted newer value
                // must not remove a committed older one.
                if !h.is_control() && !aborted.contains(&h) {
                    let bytes = scanner.batch_bytes(pos, &h).unwrap_or_default();
                    if let Ok(d) = decode(bytes, &h, ctx.max_decompressed) {
                        for r in &d.records {
                            let offset = h.base_offset + i64::from(r.offset_delta);
                            if let (Some(k), true) = (&r.key, offset >= range.first_dirty) {
                                if !ctx.map.put(&d.section[k.clone()], offset) {
                                    break 'segments;
                                }
                            }
                        }
                    }
                }
                ctx.map.update_latest_offset(h.last_offset());
            }
            // Gaps at a segment's end count as covered.
            let next = dirty
                .get(i + 1)
                .map_or(range.first_uncleanable, |s| s.base_offset);
            ctx.map.update_latest_offset(next - 1);
        }
        Ok(ctx.map.latest_offset() + 1)
    }

    /// Rewrite `group` into one new segment and swap it in.
    /// The next batch header of `seg` for a cleaning pass: stops when the cleaning was
    /// aborted, and refuses damage (the cleaner never rewrites what it cannot read).
    fn next_to_clean(
        &self,
        ctx: &CleanCtx<'_>,
        scanner: &mut BatchScanner<'_>,
        seg: &Segment,
    ) -> Result<Option<(u64, BatchHeader)>, CleanStop> {
        if (ctx.aborted)() {
            return Err(CleanStop::Aborted("the log is closing, moving or failed"));
        }
        match scanner.next_batch() {
            Ok(x) => Ok(x),
            Err(ScanError::Io(e)) => Err(e.into()),
            Err(ScanError::Corrupt { pos, err }) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "segment {} of {:?}: invalid batch at position {pos}: {err}",
                    seg.base_offset, self.tp
                ),
            )
            .into()),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn clean_group(
        &self,
        ctx: &mut CleanCtx<'_>,
        group: &[Arc<Segment>],
        rules: Rules,
        producers: &HashMap<i64, i64>,
        aborted: &Aborted,
        upper_bound: i64,
        stats: &mut CleanStats,
    ) -> Result<(), CleanStop> {
        let Some(first) = group.first() else {
            return Ok(());
        };
        let dir = self.dir();
        let base = first.base_offset;
        let interval = self.interval();
        let mut out = super::swap::Cleaned::create(&dir, base, ctx.token, ctx.io_buffer_bytes)?;
        let result = (|| {
            for (gi, seg) in group.iter().enumerate() {
                let size = seg.size();
                let last_seg = gi + 1 == group.len();
                let mut scanner = BatchScanner::new(seg.log.get()?, 0, size, true);
                while let Some((pos, h)) = self.next_to_clean(ctx, &mut scanner, seg)? {
                    stats.batches_read += 1;
                    stats.bytes_read += h.total_len() as u64;
                    ctx.throttle.account(h.total_len() as u64, ctx.aborted);
                    let bytes = scanner.batch_bytes(pos, &h).unwrap_or_default();
                    let retain_empty = (h.has_producer_id()
                        && producers.get(&h.producer_id) == Some(&h.last_offset()))
                        || h.next_offset() == upper_bound
                        || (last_seg && pos + h.total_len() as u64 == size);
                    let decoded = if h.is_control() {
                        None
                    } else {
                        match decode(bytes, &h, ctx.max_decompressed) {
                            Ok(d) => Some(d),
                            Err(e) => {
                                stats.batches_unreadable += 1;
                                tracing::warn!(tp = ?self.tp, offset = h.base_offset, error = %e,
                                    "the cleaner cannot read this batch's records; keeping it as it is");
                                None
                            }
                        }
                    };
                    let decision = if aborted.contains(&h) {
                        // Kafka discards the records of aborted transactions; the batch stays
                        // empty only where one must stay (a producer's last batch, the end).
                        if retain_empty {
                            Decision::Rewrite(super::filter::empty_batch(&h))
                        } else {
                            Decision::Drop
                        }
                    } else {
                        filter_batch(&h, decoded.as_ref(), ctx.map, rules, retain_empty).map_err(
                            |e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()),
                        )?
                    };
                    let written = match &decision {
                        Decision::Keep => out.append(bytes, &h, interval)?,
                        Decision::Rewrite(b) => {
                            let nh = BatchHeader::decode(b).map_err(|e| {
                                io::Error::new(io::ErrorKind::InvalidData, e.to_string())
                            })?;
                            out.append(b, &nh, interval)?
                        }
                        Decision::Drop => 0,
                    };
                    if written > 0 {
                        stats.batches_written += 1;
                        stats.bytes_written += written;
                        ctx.throttle.account(written, ctx.aborted);
                    }
                }
            }
            Ok(())
        })();
        if let Err(e) = result {
            out.discard();
            return Err(e);
        }
        let last = group.last().unwrap_or(first);
        let next_offset = last.next_offset();
        let mtime = last.meta.read().mtime_ms;
        // The markers are kept, so the group's aborted transactions stay indexed.
        let mut entries = Vec::new();
        for g in group {
            entries.extend(g.aborted_txns()?.iter().copied());
        }
        let new = out.finish(next_offset, mtime, ctx.now_ms, entries)?;
        self.swap_in(ctx, group, new)
    }
}

/// The aborted transactions of a log, by producer: (first offset, marker offset) ranges.
#[derive(Debug, Default)]
pub(crate) struct Aborted(HashMap<i64, Vec<(i64, i64)>>);

impl Aborted {
    /// True for a transactional data batch inside an aborted transaction of its producer.
    fn contains(&self, h: &BatchHeader) -> bool {
        h.is_transactional()
            && !h.is_control()
            && self.0.get(&h.producer_id).is_some_and(|v| {
                v.iter()
                    .any(|&(first, last)| first <= h.base_offset && h.base_offset < last)
            })
    }
}

impl Log {
    /// Every aborted transaction of the log, from the segments' transaction indexes.
    fn aborted_ranges(&self) -> Result<Aborted, CleanStop> {
        let segs = self.shared.read().segments.clone();
        let mut out = Aborted::default();
        for seg in segs.iter() {
            let entries = match seg.aborted_txns() {
                Ok(e) => e,
                Err(e) if e.kind() == io::ErrorKind::InvalidData => self.rebuild_txn_index(seg)?,
                Err(e) => return Err(e.into()),
            };
            for e in entries.iter() {
                out.0
                    .entry(e.producer_id)
                    .or_default()
                    .push((e.first_offset, e.last_offset));
            }
        }
        Ok(out)
    }
}

/// Kafka's `groupSegmentsBySize`: consecutive segments whose data and index files each total
/// at most `max_bytes` / `max_index_bytes`, and whose offsets stay within i32 of the group's
/// base (the last segment's last offset is bounded by the next base, or by `upper_bound`).
fn group_by_size(
    segs: &[Arc<Segment>],
    max_bytes: u64,
    max_index_bytes: u64,
    upper_bound: i64,
) -> Vec<Vec<Arc<Segment>>> {
    let index_len = |s: &Segment, kind: SegmentFileKind| {
        let m = s.meta.read();
        match (kind, &m.offset_index, &m.time_index) {
            (SegmentFileKind::Index, Some(o), _) => (o.len() * OFFSET_INDEX_ENTRY_LEN) as u64,
            (SegmentFileKind::TimeIndex, _, Some(t)) => (t.len() * TIME_INDEX_ENTRY_LEN) as u64,
            _ => {
                drop(m);
                let f = if kind == SegmentFileKind::Index {
                    &s.index_file
                } else {
                    &s.time_file
                };
                f.get().and_then(|f| f.metadata()).map_or(0, |m| m.len())
            }
        }
    };
    let mut groups = Vec::new();
    let mut i = 0;
    while i < segs.len() {
        let head = &segs[i];
        let mut group = vec![head.clone()];
        let (mut size, mut oi, mut ti) = (
            head.size(),
            index_len(head, SegmentFileKind::Index),
            index_len(head, SegmentFileKind::TimeIndex),
        );
        i += 1;
        while let Some(s) = segs.get(i) {
            let last_offset = segs.get(i + 1).map_or(upper_bound, |n| n.base_offset) - 1;
            let (so, st) = (
                index_len(s, SegmentFileKind::Index),
                index_len(s, SegmentFileKind::TimeIndex),
            );
            let fits = size + s.size() <= max_bytes
                && oi + so <= max_index_bytes
                && ti + st <= max_index_bytes
                && (s.size() == 0 || last_offset - head.base_offset <= i64::from(i32::MAX));
            if !fits {
                break;
            }
            size += s.size();
            oi += so;
            ti += st;
            group.push(s.clone());
            i += 1;
        }
        groups.push(group);
    }
    groups
}

/// A cleaned segment's files being written (positional writes through a buffer).
pub(crate) struct SegWriter {
    pub(crate) file: std::fs::File,
    pub(crate) pos: u64,
    buf: Vec<u8>,
    buf_cap: usize,
    pub(crate) cursor: IndexCursor,
    pub(crate) oi: Vec<sluice_format::OffsetIndexEntry>,
    pub(crate) ti: Vec<sluice_format::TimeIndexEntry>,
    pub(crate) first_ts: Option<i64>,
}

impl SegWriter {
    pub(crate) fn new(file: std::fs::File, base: i64, buf_cap: usize) -> SegWriter {
        SegWriter {
            file,
            pos: 0,
            buf: Vec::with_capacity(buf_cap.min(16 << 20)),
            buf_cap: buf_cap.max(4096),
            cursor: IndexCursor::new(base),
            oi: Vec::new(),
            ti: Vec::new(),
            first_ts: None,
        }
    }

    /// Append one batch; returns the bytes written.
    pub(crate) fn append(
        &mut self,
        batch: &[u8],
        h: &BatchHeader,
        interval: u64,
    ) -> io::Result<u64> {
        let at = self.pos + self.buf.len() as u64;
        if i32::try_from(at).is_err() {
            return Err(io::Error::other("a cleaned segment would exceed 2 GiB"));
        }
        let (o, t) = self.cursor.observe(at, h, interval);
        self.oi.extend(o);
        self.ti.extend(t);
        self.first_ts.get_or_insert(h.max_timestamp);
        if self.buf.len() + batch.len() > self.buf_cap {
            self.flush_buf()?;
        }
        if batch.len() > self.buf_cap {
            self.file.write_all_at(batch, self.pos)?;
            self.pos += batch.len() as u64;
        } else {
            self.buf.extend_from_slice(batch);
        }
        Ok(batch.len() as u64)
    }

    pub(crate) fn flush_buf(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.file.write_all_at(&self.buf, self.pos)?;
            self.pos += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn throttle_sleeps_for_the_rate() {
        let t = Throttle::new(1_000_000.0);
        let start = Instant::now();
        for _ in 0..10 {
            t.account(20_000, &|| false);
        }
        // 200 kB at 1 MB/s: about 0.2 s.
        assert!(
            start.elapsed() >= Duration::from_millis(150),
            "{:?}",
            start.elapsed()
        );
        let unlimited = Throttle::new(f64::MAX);
        let start = Instant::now();
        unlimited.account(u64::MAX / 2, &|| false);
        assert!(start.elapsed() < Duration::from_millis(50));
    }
}

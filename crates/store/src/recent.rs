//! The newest batches of the active segment, kept in memory so that a read at the tail of the
//! log (a consumer that is caught up, the common case) finds its batch and the whole batches
//! after it without reading batch headers back from the file.
//!
//! The entries are exactly the last batches appended to the segment since it was created or
//! opened, in order and contiguous: each starts where the one before it ends, and the last
//! ends at the segment's end. An append pushes its batches; a roll starts the new segment
//! with an empty list. A segment opened from disk starts empty too. A read that this list
//! cannot answer exactly as a scan of the file would falls back to that scan.

use std::collections::VecDeque;

/// Batches kept per segment: enough for consumers a few requests behind the tail.
pub(crate) const RECENT_BATCHES_MAX: usize = 64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RecentBatch {
    pub base_offset: i64,
    pub last_offset: i64,
    pub position: u64,
    pub len: u32,
}

impl RecentBatch {
    fn end(&self) -> u64 {
        self.position + u64::from(self.len)
    }
}

#[derive(Clone, Debug, Default)]
pub(crate) struct RecentBatches {
    v: VecDeque<RecentBatch>,
}

/// Where a read's bytes are, as the file scan would have found them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TailRead {
    /// The batch holding the offset starts at `position`; `len` bytes of whole batches.
    Found { position: u64, len: u64 },
    /// The first batch is larger than the cap and one is not required.
    TooLarge,
}

impl RecentBatches {
    /// Record a batch appended at the end of the segment. A batch that does not start where
    /// the last one ends (never the case for appends) empties the list first, so the
    /// entries stay contiguous.
    pub(crate) fn push(&mut self, b: RecentBatch) {
        if self.v.back().is_some_and(|last| last.end() != b.position) {
            self.v.clear();
        }
        if self.v.len() == RECENT_BATCHES_MAX {
            self.v.pop_front();
        }
        self.v.push_back(b);
    }

    /// The offset after the batch ending at byte `end`, if the list holds it.
    pub(crate) fn offset_after(&self, end: u64) -> Option<i64> {
        self.v
            .iter()
            .rev()
            .find(|b| b.end() == end)
            .map(|b| b.last_offset + 1)
    }

    /// The answer of a read of `offset` with at most `max_bytes` (`min_one_batch`: the first
    /// batch is returned whole even when larger), given that the segment's readers see
    /// `limit` bytes. None when the list cannot tell (the batch may lie before it, or the
    /// cap reaches past what it holds): the caller scans the file instead.
    pub(crate) fn read(
        &self,
        offset: i64,
        max_bytes: u64,
        min_one_batch: bool,
        limit: u64,
    ) -> Option<TailRead> {
        let front = self.v.front()?;
        // Batches before the list end below its first offset: none of them can hold
        // `offset` only if the list starts at or below it.
        if offset < front.base_offset {
            return None;
        }
        let visible = self.v.partition_point(|b| b.end() <= limit);
        let k = self
            .v
            .range(..visible)
            .position(|b| b.last_offset >= offset)?;
        let first = self.v[k];
        let first_len = u64::from(first.len);
        let pos = first.position;
        if first_len > max_bytes {
            if !min_one_batch {
                return Some(TailRead::TooLarge);
            }
            return Some(TailRead::Found {
                position: pos,
                len: first_len,
            });
        }
        if pos + max_bytes >= limit {
            return Some(TailRead::Found {
                position: pos,
                len: limit - pos,
            });
        }
        // Whole batches up to the cap. The cap lies before `limit`; the list must reach a
        // batch that crosses it, or it cannot tell where the scan would stop.
        let target = pos + max_bytes;
        let mut end = pos + first_len;
        for b in self.v.range(k + 1..visible) {
            if b.end() > target {
                return Some(TailRead::Found {
                    position: pos,
                    len: end - pos,
                });
            }
            end = b.end();
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ring(lens: &[u32], base: i64, start: u64) -> RecentBatches {
        let mut r = RecentBatches::default();
        let (mut off, mut pos) = (base, start);
        for &l in lens {
            r.push(RecentBatch {
                base_offset: off,
                last_offset: off + 9,
                position: pos,
                len: l,
            });
            off += 10;
            pos += u64::from(l);
        }
        r
    }

    #[test]
    fn answers_like_a_scan_or_not_at_all() {
        // Batches of offsets 100-109 @0 (100 B), 110-119 @100 (50 B), 120-129 @150 (200 B).
        let r = ring(&[100, 50, 200], 100, 0);
        let found = |position, len| Some(TailRead::Found { position, len });
        assert_eq!(r.read(99, 1000, true, 350), None, "before the list");
        assert_eq!(r.read(100, 1000, true, 350), found(0, 350));
        assert_eq!(r.read(115, 1000, true, 350), found(100, 250));
        assert_eq!(r.read(130, 1000, true, 350), None, "past the end");
        // Cap inside the second batch after the first: only the first.
        assert_eq!(r.read(100, 120, true, 350), found(0, 100));
        assert_eq!(r.read(100, 150, true, 350), found(0, 150));
        // First batch larger than the cap.
        assert_eq!(r.read(120, 10, true, 350), found(150, 200));
        assert_eq!(r.read(120, 10, false, 350), Some(TailRead::TooLarge));
        // Readers see only the first two batches.
        assert_eq!(r.read(120, 1000, true, 150), None);
        assert_eq!(r.read(110, 1000, true, 150), found(100, 50));
    }

    #[test]
    fn keeps_the_newest_and_stays_contiguous() {
        let lens = vec![10u32; RECENT_BATCHES_MAX + 5];
        let mut r = ring(&lens, 0, 0);
        assert_eq!(r.v.len(), RECENT_BATCHES_MAX);
        assert_eq!(r.v.front().unwrap().base_offset, 50);
        // A batch that does not continue the list replaces it.
        r.push(RecentBatch {
            base_offset: 10_000,
            last_offset: 10_000,
            position: 5,
            len: 1,
        });
        assert_eq!(r.v.len(), 1);
    }
}

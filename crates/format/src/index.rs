//! Offset index (`.index`) and time index (`.timeindex`) entries, as Kafka stores them.

/// Bytes per offset index entry.
pub const OFFSET_INDEX_ENTRY_LEN: usize = 8;
/// Bytes per time index entry.
pub const TIME_INDEX_ENTRY_LEN: usize = 12;

/// `.index` entry: offset relative to the segment base (i32 BE) -> byte position of the batch
/// in the `.log` file (i32 BE).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct OffsetIndexEntry {
    pub relative_offset: i32,
    pub position: i32,
}

impl OffsetIndexEntry {
    pub fn encode(&self) -> [u8; OFFSET_INDEX_ENTRY_LEN] {
        let mut b = [0u8; OFFSET_INDEX_ENTRY_LEN];
        b[0..4].copy_from_slice(&self.relative_offset.to_be_bytes());
        b[4..8].copy_from_slice(&self.position.to_be_bytes());
        b
    }
    /// Decode from the first 8 bytes; None if fewer.
    pub fn decode(b: &[u8]) -> Option<OffsetIndexEntry> {
        if b.len() < OFFSET_INDEX_ENTRY_LEN {
            return None;
        }
        Some(OffsetIndexEntry {
            relative_offset: i32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            position: i32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        })
    }
}

/// `.timeindex` entry: timestamp (i64 BE) -> offset relative to the segment base (i32 BE).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TimeIndexEntry {
    pub timestamp: i64,
    pub relative_offset: i32,
}

impl TimeIndexEntry {
    pub fn encode(&self) -> [u8; TIME_INDEX_ENTRY_LEN] {
        let mut b = [0u8; TIME_INDEX_ENTRY_LEN];
        b[0..8].copy_from_slice(&self.timestamp.to_be_bytes());
        b[8..12].copy_from_slice(&self.relative_offset.to_be_bytes());
        b
    }
    /// Decode from the first 12 bytes; None if fewer.
    pub fn decode(b: &[u8]) -> Option<TimeIndexEntry> {
        if b.len() < TIME_INDEX_ENTRY_LEN {
            return None;
        }
        let mut ts = [0u8; 8];
        ts.copy_from_slice(&b[0..8]);
        Some(TimeIndexEntry {
            timestamp: i64::from_be_bytes(ts),
            relative_offset: i32::from_be_bytes([b[8], b[9], b[10], b[11]]),
        })
    }
}

/// Decode every whole entry of an offset index file's content (a trailing partial entry is
/// ignored; callers decide what a partial entry means).
pub fn decode_offset_index(buf: &[u8]) -> Vec<OffsetIndexEntry> {
    buf.chunks_exact(OFFSET_INDEX_ENTRY_LEN)
        .filter_map(OffsetIndexEntry::decode)
        .collect()
}

/// Decode every whole entry of a time index file's content.
pub fn decode_time_index(buf: &[u8]) -> Vec<TimeIndexEntry> {
    buf.chunks_exact(TIME_INDEX_ENTRY_LEN)
        .filter_map(TimeIndexEntry::decode)
        .collect()
}

/// Length of the longest prefix of `entries` that is a valid offset index for a log file of
/// `log_size` bytes: relative offsets strictly increasing and >= 0, positions non-decreasing
/// and < `log_size`. Kafka preallocates index files, so a crashed Kafka leaves zero entries
/// after the valid ones; they end the prefix (an entry (0, 0) is valid only first).
pub fn valid_offset_index_prefix(entries: &[OffsetIndexEntry], log_size: u64) -> usize {
    let mut prev: Option<OffsetIndexEntry> = None;
    for (i, e) in entries.iter().enumerate() {
        if e.relative_offset < 0 || e.position < 0 || (e.position as u64) >= log_size.max(1) {
            return i;
        }
        if let Some(p) = prev {
            if e.relative_offset <= p.relative_offset || e.position < p.position {
                return i;
            }
        }
        prev = Some(*e);
    }
    entries.len()
}

/// Length of the longest valid prefix of a time index: timestamps strictly increasing (Kafka
/// only appends a larger timestamp; a repeated last entry is tolerated), relative offsets
/// non-decreasing and >= 0.
pub fn valid_time_index_prefix(entries: &[TimeIndexEntry]) -> usize {
    let mut prev: Option<TimeIndexEntry> = None;
    for (i, e) in entries.iter().enumerate() {
        if e.relative_offset < 0 || e.timestamp < 0 {
            return i;
        }
        if let Some(p) = prev {
            if e.timestamp < p.timestamp || e.relative_offset < p.relative_offset {
                return i;
            }
            if e.timestamp == p.timestamp && e.relative_offset != p.relative_offset {
                return i;
            }
            if e.relative_offset == 0 && i > 0 && e.timestamp == 0 {
                return i;
            }
        }
        prev = Some(*e);
    }
    entries.len()
}

/// Largest entry index `i` with `entries[i].relative_offset <= target`, by binary search.
pub fn lookup_offset(entries: &[OffsetIndexEntry], target_relative: i64) -> Option<usize> {
    let n = entries.partition_point(|e| i64::from(e.relative_offset) <= target_relative);
    n.checked_sub(1)
}

/// Largest entry index `i` with `entries[i].timestamp <= target` (Kafka's time index lookup
/// returns the entry at or below the target timestamp and scans forward from its offset).
pub fn lookup_time(entries: &[TimeIndexEntry], target_timestamp: i64) -> Option<usize> {
    let n = entries.partition_point(|e| e.timestamp <= target_timestamp);
    n.checked_sub(1)
}

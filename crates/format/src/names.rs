//! Segment file names: 20-digit zero-padded base offset + suffix.

/// The kinds of per-segment files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SegmentFileKind {
    Log,
    Index,
    TimeIndex,
    /// `.txnindex` (Kafka's aborted-transaction index, `crate::txn`).
    TxnIndex,
    /// `.snapshot` (Kafka's producer state snapshot, `crate::snapshot`).
    Snapshot,
}

impl SegmentFileKind {
    pub fn suffix(self) -> &'static str {
        match self {
            SegmentFileKind::Log => ".log",
            SegmentFileKind::Index => ".index",
            SegmentFileKind::TimeIndex => ".timeindex",
            SegmentFileKind::TxnIndex => ".txnindex",
            SegmentFileKind::Snapshot => ".snapshot",
        }
    }
    const ALL: [SegmentFileKind; 5] = [
        SegmentFileKind::Log,
        SegmentFileKind::Index,
        SegmentFileKind::TimeIndex,
        SegmentFileKind::TxnIndex,
        SegmentFileKind::Snapshot,
    ];
}

/// Suffix Kafka appends to files scheduled for deletion.
pub const DELETED_SUFFIX: &str = ".deleted";

/// `00000000000000000042` for 42 (negative offsets are not valid base offsets; they are
/// formatted with a sign and never parse back).
pub fn offset_file_stem(base_offset: i64) -> String {
    format!("{base_offset:020}")
}

/// e.g. `00000000000000000000.log`.
pub fn segment_file_name(base_offset: i64, kind: SegmentFileKind) -> String {
    format!("{}{}", offset_file_stem(base_offset), kind.suffix())
}

/// Parse `<digits><suffix>` back into (base offset, kind). Only exact suffixes match
/// (`.log.deleted`, `.log.swap`, `.cleaned` etc. yield None). The stem must be 1..=20 ASCII
/// digits (Kafka always writes 20) fitting in an i64.
pub fn parse_segment_file_name(name: &str) -> Option<(i64, SegmentFileKind)> {
    for kind in SegmentFileKind::ALL {
        if let Some(stem) = name.strip_suffix(kind.suffix()) {
            return parse_offset_stem(stem).map(|o| (o, kind));
        }
    }
    None
}

/// Parse a 1..=20 digit stem into a non-negative offset.
pub fn parse_offset_stem(stem: &str) -> Option<i64> {
    if stem.is_empty() || stem.len() > 20 || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse::<i64>().ok()
}

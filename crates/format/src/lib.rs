//! Kafka's on-disk log format, without any I/O: RecordBatch v2 headers (parse, validate,
//! patch), CRC-32C, `.index` / `.timeindex` entries, segment file names and the small text
//! files (checkpoints, `partition.metadata`, `meta.properties`), producer-state snapshots.

pub mod batch;
pub mod builder;
#[cfg(feature = "codecs")]
pub mod codec;
pub mod fields;
pub mod index;
pub mod names;
pub mod records;
pub mod snapshot;
pub mod text;
pub mod txn;

pub use batch::{
    compute_crc, parse_batches, set_base_offset, set_max_timestamp, set_partition_leader_epoch,
    validate_batch, BatchHeader, BatchRef, BatchTimestampType, HEADER_LEN, LOG_OVERHEAD,
};
pub use builder::{BatchBuilder, SimpleRecord};
pub use index::{OffsetIndexEntry, TimeIndexEntry, OFFSET_INDEX_ENTRY_LEN, TIME_INDEX_ENTRY_LEN};
pub use names::{parse_segment_file_name, segment_file_name, SegmentFileKind};

/// Everything that can be wrong with bytes claiming to be in Kafka's format.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FormatError {
    #[error("truncated: need {needed} bytes, have {available}")]
    Truncated { needed: usize, available: usize },
    #[error("batch length {0} is smaller than the minimum batch header")]
    LengthTooSmall(i32),
    #[error("batch of {length} bytes exceeds the limit of {max}")]
    LengthTooLarge { length: usize, max: usize },
    #[error("unsupported magic {0} (only 2 is supported)")]
    BadMagic(i8),
    #[error("crc mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    CrcMismatch { stored: u32, computed: u32 },
    #[error("invalid record count {0}")]
    InvalidRecordCount(i32),
    #[error("lastOffsetDelta {last_offset_delta} inconsistent with record count {record_count}")]
    InvalidLastOffsetDelta {
        last_offset_delta: i32,
        record_count: i32,
    },
    #[error("malformed record: {0}")]
    Record(String),
    #[error("{0}")]
    Text(String),
}

impl FormatError {
    /// True for damage (torn/short data, impossible lengths, CRC mismatch); false for
    /// well-formed but unacceptable content (magic, counts).
    pub fn is_corrupt(&self) -> bool {
        matches!(
            self,
            FormatError::Truncated { .. }
                | FormatError::LengthTooSmall(_)
                | FormatError::LengthTooLarge { .. }
                | FormatError::CrcMismatch { .. }
        )
    }
}

#[cfg(test)]
mod tests;

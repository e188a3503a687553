//! RecordBatch v2 ("magic 2") header layout, validation and in-place patching.
//!
//! Layout (all integers big-endian):
//!
//! | offset | size | field                |
//! |-------:|-----:|----------------------|
//! |      0 |    8 | baseOffset           |
//! |      8 |    4 | batchLength (bytes after this field) |
//! |     12 |    4 | partitionLeaderEpoch |
//! |     16 |    1 | magic (= 2)          |
//! |     17 |    4 | crc (CRC-32C of bytes 21..end) |
//! |     21 |    2 | attributes           |
//! |     23 |    4 | lastOffsetDelta      |
//! |     27 |    8 | baseTimestamp        |
//! |     35 |    8 | maxTimestamp         |
//! |     43 |    8 | producerId           |
//! |     51 |    2 | producerEpoch        |
//! |     53 |    4 | baseSequence         |
//! |     57 |    4 | recordCount          |
//! |     61 |    … | records              |

use crate::FormatError;

pub const BASE_OFFSET_OFFSET: usize = 0;
pub const BATCH_LENGTH_OFFSET: usize = 8;
pub const PARTITION_LEADER_EPOCH_OFFSET: usize = 12;
pub const MAGIC_OFFSET: usize = 16;
pub const CRC_OFFSET: usize = 17;
pub const ATTRIBUTES_OFFSET: usize = 21;
pub const LAST_OFFSET_DELTA_OFFSET: usize = 23;
pub const BASE_TIMESTAMP_OFFSET: usize = 27;
pub const MAX_TIMESTAMP_OFFSET: usize = 35;
pub const PRODUCER_ID_OFFSET: usize = 43;
pub const PRODUCER_EPOCH_OFFSET: usize = 51;
pub const BASE_SEQUENCE_OFFSET: usize = 53;
pub const RECORD_COUNT_OFFSET: usize = 57;
/// Size of the v2 batch header.
pub const HEADER_LEN: usize = 61;
/// baseOffset + batchLength: the bytes not counted in batchLength.
pub const LOG_OVERHEAD: usize = 12;
/// Smallest legal batchLength (a header with no records).
pub const MIN_BATCH_LENGTH: i32 = (HEADER_LEN - LOG_OVERHEAD) as i32;
/// The only supported magic.
pub const MAGIC_V2: i8 = 2;

pub const COMPRESSION_CODEC_MASK: i16 = 0x07;
pub const TIMESTAMP_TYPE_MASK: i16 = 0x08;
pub const TRANSACTIONAL_FLAG_MASK: i16 = 0x10;
pub const CONTROL_FLAG_MASK: i16 = 0x20;
pub const DELETE_HORIZON_FLAG_MASK: i16 = 0x40;

pub const NO_PRODUCER_ID: i64 = -1;
pub const NO_PRODUCER_EPOCH: i16 = -1;
pub const NO_SEQUENCE: i32 = -1;
pub const NO_TIMESTAMP: i64 = -1;
pub const NO_PARTITION_LEADER_EPOCH: i32 = -1;

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(a)
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    i32::from_be_bytes(a)
}
fn be_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_be_bytes(a)
}
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

/// The timestamp type bit of the attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchTimestampType {
    CreateTime,
    LogAppendTime,
}

/// A decoded v2 batch header (owned copy of the first 61 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchHeader {
    pub base_offset: i64,
    pub batch_length: i32,
    pub partition_leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub record_count: i32,
}

impl BatchHeader {
    /// Decode the header fields from the first [`HEADER_LEN`] bytes of `buf` without any
    /// validation beyond the length of `buf`.
    pub fn decode(buf: &[u8]) -> Result<BatchHeader, FormatError> {
        if buf.len() < HEADER_LEN {
            return Err(FormatError::Truncated {
                needed: HEADER_LEN,
                available: buf.len(),
            });
        }
        Ok(BatchHeader {
            base_offset: be_i64(buf, BASE_OFFSET_OFFSET),
            batch_length: be_i32(buf, BATCH_LENGTH_OFFSET),
            partition_leader_epoch: be_i32(buf, PARTITION_LEADER_EPOCH_OFFSET),
            magic: buf[MAGIC_OFFSET] as i8,
            crc: be_u32(buf, CRC_OFFSET),
            attributes: be_i16(buf, ATTRIBUTES_OFFSET),
            last_offset_delta: be_i32(buf, LAST_OFFSET_DELTA_OFFSET),
            base_timestamp: be_i64(buf, BASE_TIMESTAMP_OFFSET),
            max_timestamp: be_i64(buf, MAX_TIMESTAMP_OFFSET),
            producer_id: be_i64(buf, PRODUCER_ID_OFFSET),
            producer_epoch: be_i16(buf, PRODUCER_EPOCH_OFFSET),
            base_sequence: be_i32(buf, BASE_SEQUENCE_OFFSET),
            record_count: be_i32(buf, RECORD_COUNT_OFFSET),
        })
    }

    /// Decode and check what the header alone can tell: batchLength >= 49, magic 2,
    /// recordCount >= 0 and lastOffsetDelta >= 0. Does not check the CRC nor that the body is
    /// present. This is what a header scan over a log file uses.
    pub fn parse(buf: &[u8]) -> Result<BatchHeader, FormatError> {
        // The length and magic come first so that a short read of garbage reports the
        // most useful error.
        if buf.len() > MAGIC_OFFSET {
            let len = be_i32(buf, BATCH_LENGTH_OFFSET);
            if len < MIN_BATCH_LENGTH {
                return Err(FormatError::LengthTooSmall(len));
            }
            let magic = buf[MAGIC_OFFSET] as i8;
            if magic != MAGIC_V2 {
                return Err(FormatError::BadMagic(magic));
            }
        }
        let h = BatchHeader::decode(buf)?;
        if h.record_count < 0 {
            return Err(FormatError::InvalidRecordCount(h.record_count));
        }
        if h.last_offset_delta < 0 {
            return Err(FormatError::InvalidLastOffsetDelta {
                last_offset_delta: h.last_offset_delta,
                record_count: h.record_count,
            });
        }
        Ok(h)
    }

    /// Encode the header into 61 bytes (the CRC field is written as stored in `self.crc`).
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(&self.base_offset.to_be_bytes());
        b[8..12].copy_from_slice(&self.batch_length.to_be_bytes());
        b[12..16].copy_from_slice(&self.partition_leader_epoch.to_be_bytes());
        b[16] = self.magic as u8;
        b[17..21].copy_from_slice(&self.crc.to_be_bytes());
        b[21..23].copy_from_slice(&self.attributes.to_be_bytes());
        b[23..27].copy_from_slice(&self.last_offset_delta.to_be_bytes());
        b[27..35].copy_from_slice(&self.base_timestamp.to_be_bytes());
        b[35..43].copy_from_slice(&self.max_timestamp.to_be_bytes());
        b[43..51].copy_from_slice(&self.producer_id.to_be_bytes());
        b[51..53].copy_from_slice(&self.producer_epoch.to_be_bytes());
        b[53..57].copy_from_slice(&self.base_sequence.to_be_bytes());
        b[57..61].copy_from_slice(&self.record_count.to_be_bytes());
        b
    }

    /// Whole size of the batch on disk: batchLength + 12.
    pub fn total_len(&self) -> usize {
        // batch_length is validated >= 49 by parse(); a negative value from decode() maps to 0.
        usize::try_from(self.batch_length).unwrap_or(0) + LOG_OVERHEAD
    }
    pub fn last_offset(&self) -> i64 {
        self.base_offset
            .wrapping_add(i64::from(self.last_offset_delta))
    }
    /// Offset following this batch.
    pub fn next_offset(&self) -> i64 {
        self.last_offset().wrapping_add(1)
    }
    pub fn compression_codec(&self) -> u8 {
        (self.attributes & COMPRESSION_CODEC_MASK) as u8
    }
    pub fn timestamp_type(&self) -> BatchTimestampType {
        if self.attributes & TIMESTAMP_TYPE_MASK != 0 {
            BatchTimestampType::LogAppendTime
        } else {
            BatchTimestampType::CreateTime
        }
    }
    pub fn is_transactional(&self) -> bool {
        self.attributes & TRANSACTIONAL_FLAG_MASK != 0
    }
    pub fn is_control(&self) -> bool {
        self.attributes & CONTROL_FLAG_MASK != 0
    }
    pub fn has_producer_id(&self) -> bool {
        self.producer_id >= 0
    }
    /// The sequence number of the last record, wrapping past i32::MAX to 0 like Kafka.
    pub fn last_sequence(&self) -> i32 {
        increment_sequence(self.base_sequence, self.last_offset_delta)
    }
}

/// `seq + increment`, wrapping from i32::MAX to 0 (Kafka's DefaultRecordBatch.incrementSequence).
pub fn increment_sequence(seq: i32, increment: i32) -> i32 {
    if seq < 0 || increment < 0 {
        return seq;
    }
    if seq > i32::MAX - increment {
        // Wraps: both operands are non-negative here, so this cannot overflow.
        increment - (i32::MAX - seq) - 1
    } else {
        seq + increment
    }
}

/// CRC-32C of a whole batch as stored in its crc field: bytes from attributes to the end.
pub fn compute_crc(batch: &[u8]) -> u32 {
    if batch.len() <= ATTRIBUTES_OFFSET {
        return crc32c::crc32c(&[]);
    }
    crc32c::crc32c(&batch[ATTRIBUTES_OFFSET..])
}

/// Fully validate one batch occupying exactly `batch` (length must equal batchLength + 12):
/// header checks plus CRC.
pub fn validate_batch(batch: &[u8]) -> Result<BatchHeader, FormatError> {
    let h = BatchHeader::parse(batch)?;
    if h.total_len() != batch.len() {
        return Err(FormatError::Truncated {
            needed: h.total_len(),
            available: batch.len(),
        });
    }
    let computed = compute_crc(batch);
    if computed != h.crc {
        return Err(FormatError::CrcMismatch {
            stored: h.crc,
            computed,
        });
    }
    Ok(h)
}

/// One batch found in a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BatchRef {
    /// Byte position of the batch in the buffer.
    pub position: usize,
    pub header: BatchHeader,
}

impl BatchRef {
    pub fn range(&self) -> std::ops::Range<usize> {
        self.position..self.position + self.header.total_len()
    }
}

/// Parse and fully validate (CRC included) a buffer of concatenated batches. The buffer must
/// hold whole batches only. `max_batch_len`, if given, bounds the size of each batch
/// (batchLength + 12) and yields [`FormatError::LengthTooLarge`] when exceeded.
pub fn parse_batches(
    buf: &[u8],
    max_batch_len: Option<usize>,
) -> Result<Vec<BatchRef>, FormatError> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while pos < buf.len() {
        let rest = &buf[pos..];
        if rest.len() < LOG_OVERHEAD {
            return Err(FormatError::Truncated {
                needed: LOG_OVERHEAD,
                available: rest.len(),
            });
        }
        let len = be_i32(rest, BATCH_LENGTH_OFFSET);
        if len < MIN_BATCH_LENGTH {
            return Err(FormatError::LengthTooSmall(len));
        }
        // len >= 49 > 0 here.
        let total = len as usize + LOG_OVERHEAD;
        if let Some(max) = max_batch_len {
            if total > max {
                return Err(FormatError::LengthTooLarge { length: total, max });
            }
        }
        if total > rest.len() {
            return Err(FormatError::Truncated {
                needed: total,
                available: rest.len(),
            });
        }
        let header = validate_batch(&rest[..total])?;
        out.push(BatchRef {
            position: pos,
            header,
        });
        pos += total;
    }
    Ok(out)
}

/// Check the stricter rules Kafka applies to batches coming from clients: a positive record
/// count equal to lastOffsetDelta + 1.
pub fn check_client_counts(h: &BatchHeader) -> Result<(), FormatError> {
    if h.record_count <= 0 {
        return Err(FormatError::InvalidRecordCount(h.record_count));
    }
    if i64::from(h.last_offset_delta) + 1 != i64::from(h.record_count) {
        return Err(FormatError::InvalidLastOffsetDelta {
            last_offset_delta: h.last_offset_delta,
            record_count: h.record_count,
        });
    }
    Ok(())
}

/// Patch baseOffset (not covered by the CRC). `batch` must hold at least the header.
pub fn set_base_offset(batch: &mut [u8], base_offset: i64) -> Result<(), FormatError> {
    check_len(batch)?;
    batch[BASE_OFFSET_OFFSET..BASE_OFFSET_OFFSET + 8].copy_from_slice(&base_offset.to_be_bytes());
    Ok(())
}

/// Patch partitionLeaderEpoch (not covered by the CRC).
pub fn set_partition_leader_epoch(batch: &mut [u8], epoch: i32) -> Result<(), FormatError> {
    check_len(batch)?;
    batch[PARTITION_LEADER_EPOCH_OFFSET..PARTITION_LEADER_EPOCH_OFFSET + 4]
        .copy_from_slice(&epoch.to_be_bytes());
    Ok(())
}

/// Set maxTimestamp and the timestamp-type attribute bit, recomputing the CRC if either
/// changed. `batch` must be a whole batch (the CRC covers up to its end).
pub fn set_max_timestamp(
    batch: &mut [u8],
    timestamp_type: BatchTimestampType,
    max_timestamp: i64,
) -> Result<(), FormatError> {
    let h = BatchHeader::decode(batch)?;
    let attributes = match timestamp_type {
        BatchTimestampType::LogAppendTime => h.attributes | TIMESTAMP_TYPE_MASK,
        BatchTimestampType::CreateTime => h.attributes & !TIMESTAMP_TYPE_MASK,
    };
    if attributes == h.attributes && max_timestamp == h.max_timestamp {
        return Ok(());
    }
    batch[ATTRIBUTES_OFFSET..ATTRIBUTES_OFFSET + 2].copy_from_slice(&attributes.to_be_bytes());
    batch[MAX_TIMESTAMP_OFFSET..MAX_TIMESTAMP_OFFSET + 8]
        .copy_from_slice(&max_timestamp.to_be_bytes());
    let crc = compute_crc(batch);
    batch[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(())
}

fn check_len(batch: &[u8]) -> Result<(), FormatError> {
    if batch.len() < HEADER_LEN {
        Err(FormatError::Truncated {
            needed: HEADER_LEN,
            available: batch.len(),
        })
    } else {
        Ok(())
    }
}

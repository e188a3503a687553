//! Minimal reading of the records inside an uncompressed v2 batch (timestamps and offset
//! deltas only). Compressed batches are never opened by the store.

use crate::batch::{BatchHeader, BatchTimestampType, HEADER_LEN};
use crate::FormatError;

/// Read a zig-zag varlong at `*pos`, advancing it.
pub fn read_varlong(buf: &[u8], pos: &mut usize) -> Result<i64, FormatError> {
    let mut value: u64 = 0;
    let mut shift = 0u32;
    loop {
        let b = *buf
            .get(*pos)
            .ok_or_else(|| FormatError::Record("truncated varint".into()))?;
        *pos += 1;
        if shift > 63 {
            return Err(FormatError::Record("varint too long".into()));
        }
        value |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            break;
        }
        shift += 7;
    }
    Ok(((value >> 1) as i64) ^ -((value & 1) as i64))
}

/// Read a zig-zag varint (must fit in i32).
pub fn read_varint(buf: &[u8], pos: &mut usize) -> Result<i32, FormatError> {
    let v = read_varlong(buf, pos)?;
    i32::try_from(v).map_err(|_| FormatError::Record("varint out of range".into()))
}

/// (offset delta, timestamp) of each record of an uncompressed batch (`batch` is the whole
/// batch). Under LogAppendTime every record carries the batch's maxTimestamp. Errors on a
/// compressed batch or malformed records.
pub fn record_timestamps(batch: &[u8]) -> Result<Vec<(i32, i64)>, FormatError> {
    let h = BatchHeader::parse(batch)?;
    if h.compression_codec() != 0 {
        return Err(FormatError::Record("batch is compressed".into()));
    }
    let end = h.total_len().min(batch.len());
    let mut pos = HEADER_LEN;
    let mut out = Vec::new();
    for _ in 0..h.record_count {
        let len = read_varint(batch, &mut pos)?;
        let len = usize::try_from(len)
            .map_err(|_| FormatError::Record("negative record length".into()))?;
        let rec_end = pos
            .checked_add(len)
            .filter(|e| *e <= end)
            .ok_or(FormatError::Record("record past batch end".into()))?;
        let mut p = pos + 1; // attributes
        let ts_delta = read_varlong(&batch[..rec_end], &mut p)?;
        let off_delta = read_varint(&batch[..rec_end], &mut p)?;
        let ts = match h.timestamp_type() {
            BatchTimestampType::LogAppendTime => h.max_timestamp,
            BatchTimestampType::CreateTime => h.base_timestamp.wrapping_add(ts_delta),
        };
        out.push((off_delta, ts));
        pos = rec_end;
    }
    Ok(out)
}

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

/// One record of a v2 records section (uncompressed), as positions in that section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordRef {
    /// The record's attributes byte (unused by Kafka, kept as found).
    pub attributes: u8,
    pub timestamp_delta: i64,
    pub offset_delta: i32,
    /// The key bytes; None for a null key.
    pub key: Option<std::ops::Range<usize>>,
    /// The value bytes; None for a null value (a tombstone).
    pub value: Option<std::ops::Range<usize>>,
    /// The headers, from their count to the record's end, as found.
    pub headers: std::ops::Range<usize>,
}

fn read_bytes_field(
    buf: &[u8],
    pos: &mut usize,
    end: usize,
) -> Result<Option<std::ops::Range<usize>>, FormatError> {
    let len = read_varint(&buf[..end], pos)?;
    if len < 0 {
        return Ok(None);
    }
    let start = *pos;
    let stop = start
        .checked_add(len as usize)
        .filter(|e| *e <= end)
        .ok_or_else(|| FormatError::Record("field past record end".into()))?;
    *pos = stop;
    Ok(Some(start..stop))
}

/// Parse `count` records of a records section (the bytes after the batch header, decompressed).
/// Every record must lie wholly inside `section`, its headers included; bytes after the last
/// record are an error.
pub fn parse_records(section: &[u8], count: i32) -> Result<Vec<RecordRef>, FormatError> {
    let count = usize::try_from(count).map_err(|_| FormatError::InvalidRecordCount(count))?;
    // A record takes at least 7 bytes: never reserve more than the section could hold.
    let mut out = Vec::with_capacity(count.min(section.len() / 7 + 1));
    let mut pos = 0usize;
    for _ in 0..count {
        let len = read_varint(section, &mut pos)?;
        let len = usize::try_from(len)
            .map_err(|_| FormatError::Record("negative record length".into()))?;
        let end = pos
            .checked_add(len)
            .filter(|e| *e <= section.len())
            .ok_or_else(|| FormatError::Record("record past the records' end".into()))?;
        let mut p = pos;
        let attributes = *section
            .get(p)
            .filter(|_| p < end)
            .ok_or_else(|| FormatError::Record("empty record".into()))?;
        p += 1;
        let timestamp_delta = read_varlong(&section[..end], &mut p)?;
        let offset_delta = read_varint(&section[..end], &mut p)?;
        let key = read_bytes_field(section, &mut p, end)?;
        let value = read_bytes_field(section, &mut p, end)?;
        let headers_start = p;
        let n = read_varint(&section[..end], &mut p)?;
        if n < 0 {
            return Err(FormatError::Record("negative header count".into()));
        }
        for _ in 0..n {
            if read_bytes_field(section, &mut p, end)?.is_none() {
                return Err(FormatError::Record("null header key".into()));
            }
            read_bytes_field(section, &mut p, end)?;
        }
        if p != end {
            return Err(FormatError::Record(
                "record length disagrees with its fields".into(),
            ));
        }
        out.push(RecordRef {
            attributes,
            timestamp_delta,
            offset_delta,
            key,
            value,
            headers: headers_start..end,
        });
        pos = end;
    }
    if pos != section.len() {
        return Err(FormatError::Record("bytes after the last record".into()));
    }
    Ok(out)
}

/// Append record `r` of `section` to `out` with its timestamp delta replaced (the other fields
/// are copied as they are).
pub fn write_record(out: &mut Vec<u8>, section: &[u8], r: &RecordRef, timestamp_delta: i64) {
    use crate::builder::{put_varint, put_varlong};
    let mut body = Vec::with_capacity(
        16 + r.key.as_ref().map_or(0, |k| k.len())
            + r.value.as_ref().map_or(0, |v| v.len())
            + r.headers.len(),
    );
    body.push(r.attributes);
    put_varlong(&mut body, timestamp_delta);
    put_varint(&mut body, r.offset_delta);
    for field in [&r.key, &r.value] {
        match field {
            // Lengths come from a parsed section, so they fit in i32.
            Some(range) => {
                put_varint(&mut body, i32::try_from(range.len()).unwrap_or(i32::MAX));
                body.extend_from_slice(&section[range.clone()]);
            }
            None => put_varint(&mut body, -1),
        }
    }
    body.extend_from_slice(&section[r.headers.clone()]);
    put_varint(out, i32::try_from(body.len()).unwrap_or(i32::MAX));
    out.extend_from_slice(&body);
}

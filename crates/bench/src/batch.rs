//! Payloads and record batches: a pool of pre-made payloads, an encoder that writes
//! uncompressed RecordBatch v2 straight into one reusable buffer (no per-record allocation),
//! and a scanner that walks fetched batches to read the send timestamps back.
//!
//! Every value carries its send time: the first 8 bytes of a value of 8 bytes or more are the
//! send time in microseconds since the Unix epoch (big-endian), overwritten on the pooled
//! payload as the record is encoded. The record's own timestamp (milliseconds) is the fallback
//! for smaller values.

use std::path::Path;

use bytes::{BufMut, Bytes, BytesMut};
use sluice_format::batch::{
    compute_crc, BatchHeader, COMPRESSION_CODEC_MASK, CRC_OFFSET, HEADER_LEN, LOG_OVERHEAD,
    MAGIC_V2, NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE,
};

/// Bytes of a value used for the embedded send timestamp.
pub const SEND_TIME_BYTES: usize = 8;

/// Largest payload file read (matches [`crate::config::MAX_MESSAGE_BYTES`]).
const MAX_PAYLOAD_FILE_BYTES: u64 = 1 << 20;

/// A small deterministic PRNG (xorshift64*): payload bytes need not be cryptographic.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// The payloads producers pick from (OMB: a payload file, or randomized payloads).
#[derive(Debug)]
pub struct PayloadPool {
    payloads: Vec<Vec<u8>>,
}

impl PayloadPool {
    /// OMB semantics: with `randomized`, `pool` payloads whose first `ratio` of bytes are
    /// random and the rest zero; otherwise the payload file's bytes (repeated or cut to
    /// `size`), or one random payload when there is no file.
    pub fn new(
        size: usize,
        file: Option<&Path>,
        randomized: bool,
        ratio: f64,
        pool: usize,
        seed: u64,
    ) -> anyhow::Result<PayloadPool> {
        let mut rng = Rng::new(seed);
        let payloads = if randomized {
            let random = ((size as f64) * ratio.clamp(0.0, 1.0)).round() as usize;
            (0..pool.max(1))
                .map(|_| {
                    let mut p = vec![0u8; size];
                    rng.fill(&mut p[..random.min(size)]);
                    p
                })
                .collect()
        } else if let Some(path) = file.filter(|p| p.exists()) {
            let len = std::fs::metadata(path)?.len();
            anyhow::ensure!(
                len <= MAX_PAYLOAD_FILE_BYTES,
                "payload file {} is {len} bytes, more than {MAX_PAYLOAD_FILE_BYTES}",
                path.display()
            );
            let data = std::fs::read(path)?;
            anyhow::ensure!(!data.is_empty(), "payload file {} is empty", path.display());
            vec![data.iter().copied().cycle().take(size).collect()]
        } else {
            let mut p = vec![0u8; size];
            rng.fill(&mut p);
            vec![p]
        };
        Ok(PayloadPool { payloads })
    }

    pub fn len(&self) -> usize {
        self.payloads.len()
    }

    pub fn is_empty(&self) -> bool {
        self.payloads.is_empty()
    }

    /// Payload `i` (modulo the pool's size; an index within it costs no division).
    pub fn get(&self, i: usize) -> &[u8] {
        match self.payloads.get(i) {
            Some(p) => p,
            None => &self.payloads[i % self.payloads.len()],
        }
    }
}

/// Bytes of `v` as a zig-zag varint.
#[inline]
fn varint_len(v: i64) -> usize {
    let z = ((v << 1) ^ (v >> 63)) as u64;
    // 1 + (index of the highest set bit) / 7; z | 1 makes 0 take one byte.
    1 + (63 - (z | 1).leading_zeros() as usize) / 7
}

/// Write `v` as a zig-zag varint at `out[*n..]` (the caller leaves room: at most 10 bytes).
#[inline]
fn put_varint(out: &mut [u8], n: &mut usize, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out[*n] = (z as u8) | 0x80;
        *n += 1;
        z >>= 7;
    }
    out[*n] = z as u8;
    *n += 1;
}

/// Read a zig-zag varint of at most 10 bytes at `buf[*pos..]`; `None` if truncated or longer.
#[inline]
fn get_varint(buf: &[u8], pos: &mut usize) -> Option<i64> {
    let first = *buf.get(*pos)?;
    *pos += 1;
    let z = if first < 0x80 {
        u64::from(first)
    } else {
        let mut z = u64::from(first & 0x7f);
        let mut shift = 7;
        loop {
            let b = *buf.get(*pos)?;
            *pos += 1;
            z |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                break z;
            }
            shift += 7;
            if shift > 63 {
                return None;
            }
        }
    };
    Some(((z >> 1) as i64) ^ -((z & 1) as i64))
}

/// Longest record head: length, attributes, timestamp delta, offset delta, key length, value
/// length (5 + 1 + 10 + 5 + 5 + 5 bytes), then the send time.
const RECORD_HEAD_MAX: usize = 31 + SEND_TIME_BYTES;

/// Writes one uncompressed RecordBatch v2 at a time into a reusable buffer.
///
/// `begin`, then `push` each record, then `finish` yields the batch as `Bytes` (split off the
/// buffer, so the allocation is shared with later batches, not repeated per record).
#[derive(Debug)]
pub struct BatchEncoder {
    buf: BytesMut,
    start: usize,
    base_timestamp_ms: i64,
    max_timestamp_ms: i64,
    count: i32,
}

impl Default for BatchEncoder {
    fn default() -> Self {
        Self::new()
    }
}

impl BatchEncoder {
    pub fn new() -> BatchEncoder {
        BatchEncoder {
            buf: BytesMut::with_capacity(1 << 20),
            start: 0,
            base_timestamp_ms: -1,
            max_timestamp_ms: -1,
            count: 0,
        }
    }

    /// Start a batch whose first record has `timestamp_ms`.
    pub fn begin(&mut self, timestamp_ms: i64, capacity: usize) {
        self.buf.clear();
        self.buf.reserve(HEADER_LEN + capacity);
        self.buf.put_bytes(0, HEADER_LEN);
        self.start = 0;
        self.base_timestamp_ms = timestamp_ms;
        self.max_timestamp_ms = timestamp_ms;
        self.count = 0;
    }

    pub fn count(&self) -> i32 {
        self.count
    }

    /// Bytes of the batch so far, header included.
    pub fn len(&self) -> usize {
        self.buf.len() - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes a record with this key and value adds (its length prefix included).
    pub fn record_size(&self, timestamp_ms: i64, key: Option<&[u8]>, value_len: usize) -> usize {
        let body = self.record_body_len(timestamp_ms, key, value_len);
        varint_len(body as i64) + body
    }

    fn record_body_len(&self, timestamp_ms: i64, key: Option<&[u8]>, value_len: usize) -> usize {
        1 + varint_len(timestamp_ms - self.base_timestamp_ms)
            + varint_len(i64::from(self.count))
            + key.map_or(1, |k| varint_len(k.len() as i64) + k.len())
            + varint_len(value_len as i64)
            + value_len
            + 1
    }

    /// Append a record whose value is `payload` with its first [`SEND_TIME_BYTES`] replaced by
    /// `send_time_us` (when the payload is at least that long).
    pub fn push(
        &mut self,
        timestamp_ms: i64,
        key: Option<&[u8]>,
        payload: &[u8],
        send_time_us: u64,
    ) {
        // The fixed-size head goes through a local array and into the buffer in one copy.
        let body = self.record_body_len(timestamp_ms, key, payload.len());
        let mut head = [0u8; RECORD_HEAD_MAX];
        let mut n = 0;
        put_varint(&mut head, &mut n, body as i64);
        head[n] = 0; // attributes
        n += 1;
        put_varint(&mut head, &mut n, timestamp_ms - self.base_timestamp_ms);
        put_varint(&mut head, &mut n, i64::from(self.count));
        match key {
            Some(k) => {
                put_varint(&mut head, &mut n, k.len() as i64);
                self.buf.put_slice(&head[..n]);
                self.buf.put_slice(k);
                n = 0;
            }
            None => put_varint(&mut head, &mut n, -1),
        }
        put_varint(&mut head, &mut n, payload.len() as i64);
        let rest = if payload.len() >= SEND_TIME_BYTES {
            head[n..n + SEND_TIME_BYTES].copy_from_slice(&send_time_us.to_be_bytes());
            n += SEND_TIME_BYTES;
            &payload[SEND_TIME_BYTES..]
        } else {
            payload
        };
        self.buf.put_slice(&head[..n]);
        self.buf.put_slice(rest);
        self.buf.put_u8(0); // headers
        self.max_timestamp_ms = self.max_timestamp_ms.max(timestamp_ms);
        self.count += 1;
    }

    /// Fill in the header and CRC and hand the batch out.
    pub fn finish(&mut self) -> Bytes {
        let total = self.buf.len() - self.start;
        let header = BatchHeader {
            base_offset: 0,
            batch_length: (total - LOG_OVERHEAD) as i32,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            magic: MAGIC_V2,
            crc: 0,
            attributes: 0,
            last_offset_delta: (self.count - 1).max(0),
            base_timestamp: self.base_timestamp_ms,
            max_timestamp: self.max_timestamp_ms,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            base_sequence: NO_SEQUENCE,
            record_count: self.count,
        };
        let b = &mut self.buf[self.start..];
        b[..HEADER_LEN].copy_from_slice(&header.encode());
        let crc = compute_crc(b);
        b[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        self.count = 0;
        self.buf.split().freeze()
    }
}

/// What [`scan`] found in a fetched partition's records.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Scanned {
    pub records: u64,
    pub bytes: u64,
    /// Offset after the last complete batch, if any.
    pub next_offset: Option<i64>,
}

/// Walk the complete batches in `data` (a fetch response's records; a partial trailing batch
/// is ignored, as clients do). For each record of an uncompressed batch, `on_send_time` gets
/// the embedded send time in microseconds (or the record timestamp × 1000 for values shorter
/// than [`SEND_TIME_BYTES`]). Malformed records stop the scan of their batch, not the
/// program.
pub fn scan(data: &[u8], mut on_send_time: impl FnMut(u64)) -> Scanned {
    let mut out = Scanned::default();
    let mut pos = 0;
    while data.len() - pos >= HEADER_LEN {
        let Ok(h) = BatchHeader::decode(&data[pos..]) else {
            break;
        };
        let total = h.total_len();
        if h.batch_length < 0 || data.len() - pos < total {
            break;
        }
        let batch = &data[pos..pos + total];
        pos += total;
        out.bytes += total as u64;
        out.next_offset = Some(h.next_offset());
        if h.is_control() {
            continue;
        }
        out.records += u64::try_from(h.record_count.max(0)).unwrap_or(0);
        if h.attributes & COMPRESSION_CODEC_MASK != 0 {
            continue;
        }
        let _ = scan_records(batch, h.base_timestamp, h.record_count, &mut on_send_time);
    }
    out
}

fn scan_records(
    batch: &[u8],
    base_ts: i64,
    count: i32,
    on_send_time: &mut impl FnMut(u64),
) -> Option<()> {
    let mut pos = HEADER_LEN;
    for _ in 0..count {
        let len = usize::try_from(get_varint(batch, &mut pos)?).ok()?;
        let end = pos.checked_add(len)?;
        if end > batch.len() {
            return None;
        }
        let rec = &batch[..end];
        let mut p = pos + 1; // attributes
        let ts_delta = get_varint(rec, &mut p)?;
        let _offset_delta = get_varint(rec, &mut p)?;
        let key_len = get_varint(rec, &mut p)?;
        if key_len > 0 {
            p = p.checked_add(usize::try_from(key_len).ok()?)?;
        }
        let value_len = get_varint(rec, &mut p)?;
        if value_len >= SEND_TIME_BYTES as i64 && p + SEND_TIME_BYTES <= end {
            let mut t = [0u8; 8];
            t.copy_from_slice(&rec[p..p + SEND_TIME_BYTES]);
            on_send_time(u64::from_be_bytes(t));
        } else {
            on_send_time(
                u64::try_from(base_ts.saturating_add(ts_delta))
                    .unwrap_or(0)
                    .saturating_mul(1000),
            );
        }
        pos = end;
    }
    Some(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use sluice_format::batch::validate_batch;
    use sluice_format::records::record_timestamps;

    #[test]
    fn encoder_output_is_a_valid_batch() {
        let pool = PayloadPool::new(100, None, true, 0.5, 4, 7).unwrap();
        assert_eq!(pool.len(), 4);
        let mut enc = BatchEncoder::new();
        enc.begin(1_000, 1_000);
        let mut expected = 0;
        for i in 0..10u64 {
            let key = (i % 3 == 0).then_some(&b"key"[..]);
            let before = enc.len();
            expected = enc.record_size(1_000 + i as i64, key, 100);
            enc.push(1_000 + i as i64, key, pool.get(i as usize), 5_000_000 + i);
            assert_eq!(enc.len() - before, expected);
        }
        assert!(expected > 100);
        let b = enc.finish();
        validate_batch(&b).unwrap();
        let h = BatchHeader::decode(&b).unwrap();
        assert_eq!(h.record_count, 10);
        assert_eq!(h.last_offset_delta, 9);
        assert_eq!(h.base_timestamp, 1_000);
        assert_eq!(h.max_timestamp, 1_009);
        let ts = record_timestamps(&b).unwrap();
        assert_eq!(ts.len(), 10);
        assert_eq!(ts[9], (9, 1_009));

        // The batch can be built again into the same encoder.
        enc.begin(2_000, 100);
        enc.push(2_000, None, b"tiny", 0);
        let b2 = enc.finish();
        validate_batch(&b2).unwrap();

        let mut both = b.to_vec();
        both.extend_from_slice(&b2);
        both.extend_from_slice(&b2[..20]); // a partial trailing batch is ignored
        let mut seen = Vec::new();
        let s = scan(&both, |t| seen.push(t));
        assert_eq!(s.records, 11);
        assert_eq!(s.bytes, (b.len() + b2.len()) as u64);
        assert_eq!(seen[..10], (5_000_000..5_000_010).collect::<Vec<_>>()[..]);
        assert_eq!(seen[10], 2_000_000); // short value: record timestamp in µs
    }

    #[test]
    fn varints_match_the_log_format() {
        let mut rng = Rng::new(11);
        let mut values = vec![0, 1, -1, 63, -64, 64, -65, 8191, 8192, -8193];
        values.extend([i64::from(i32::MAX), i64::from(i32::MIN), i64::MAX, i64::MIN]);
        values.extend((0..1000).map(|i| (rng.next_u64() as i64) >> (i % 64)));
        for v in values {
            let mut buf = [0u8; 10];
            let mut n = 0;
            put_varint(&mut buf, &mut n, v);
            assert_eq!(n, varint_len(v), "{v}");
            let mut p = 0;
            assert_eq!(
                sluice_format::records::read_varlong(&buf[..n], &mut p).unwrap(),
                v
            );
            assert_eq!(p, n);
            let mut p = 0;
            assert_eq!(get_varint(&buf[..n], &mut p), Some(v));
            assert_eq!(p, n);
            assert_eq!(get_varint(&buf[..n - 1], &mut 0), None, "{v}: truncated");
        }
        assert_eq!(
            get_varint(&[0xff; 11], &mut 0),
            None,
            "longer than 10 bytes"
        );
    }

    #[test]
    fn scan_survives_garbage() {
        let mut rng = Rng::new(3);
        for len in [0usize, 10, 61, 62, 200, 4096] {
            let mut buf = vec![0u8; len];
            rng.fill(&mut buf);
            let _ = scan(&buf, |_| {});
        }
        let mut enc = BatchEncoder::new();
        enc.begin(0, 64);
        enc.push(0, None, &[1u8; 64], 9);
        let mut b = enc.finish().to_vec();
        let n = b.len();
        b[n - 5] = 0xff; // corrupt a record: the scan stops, no panic
        let _ = scan(&b, |_| {});
    }

    #[test]
    fn payload_pool_modes() {
        let p = PayloadPool::new(1024, None, true, 0.25, 3, 1).unwrap();
        assert_eq!(p.len(), 3);
        assert!(p.get(0)[256..].iter().all(|&b| b == 0));
        assert!(p.get(0)[..256].iter().any(|&b| b != 0));
        let p = PayloadPool::new(10, None, false, 0.0, 1, 1).unwrap();
        assert_eq!(p.get(5).len(), 10);
        let d = std::env::temp_dir().join(format!("sluice-bench-payload-{}", std::process::id()));
        std::fs::write(&d, b"abc").unwrap();
        let p = PayloadPool::new(7, Some(&d), false, 0.0, 1, 1).unwrap();
        assert_eq!(p.get(0), b"abcabca");
        let _ = std::fs::remove_file(&d);
    }
}

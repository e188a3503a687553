//! Building uncompressed v2 batches (for tests, tools and internally generated data).

use crate::batch::{
    compute_crc, BatchHeader, BatchTimestampType, CRC_OFFSET, HEADER_LEN, LOG_OVERHEAD, MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
};

/// Append a zig-zag varint (Kafka's `ByteUtils.writeVarint`).
pub fn put_varint(out: &mut Vec<u8>, v: i32) {
    put_varlong(out, i64::from(v));
}

/// Append a zig-zag varlong.
pub fn put_varlong(out: &mut Vec<u8>, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        out.push((z as u8) | 0x80);
        z >>= 7;
    }
    out.push(z as u8);
}

/// A record to put into a built batch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SimpleRecord {
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(String, Option<Vec<u8>>)>,
}

/// Builder of an uncompressed RecordBatch v2.
#[derive(Clone, Debug)]
pub struct BatchBuilder {
    pub base_offset: i64,
    pub partition_leader_epoch: i32,
    pub timestamp_type: BatchTimestampType,
    pub transactional: bool,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records: Vec<SimpleRecord>,
}

impl Default for BatchBuilder {
    fn default() -> Self {
        BatchBuilder {
            base_offset: 0,
            partition_leader_epoch: NO_PARTITION_LEADER_EPOCH,
            timestamp_type: BatchTimestampType::CreateTime,
            transactional: false,
            producer_id: NO_PRODUCER_ID,
            producer_epoch: NO_PRODUCER_EPOCH,
            base_sequence: NO_SEQUENCE,
            records: Vec::new(),
        }
    }
}

/// A batch of no records that holds the offsets `base_offset..=last_offset` (a header only,
/// record count 0, no producer): what a shared directory's open writes where it removes
/// segments past damage, so that the log continues past their base offsets and no segment is
/// made at those names again (docs/cluster.md, Fencing point 2). Clients skip it as they skip
/// a batch compaction emptied: Kafka's consumers move to the batch's last offset plus one.
/// It has no timestamp (-1): it answers no time lookup and moves no segment's largest time.
/// `None` when the range does not fit one batch (more than `i32::MAX` offsets).
pub fn filler_batch(
    base_offset: i64,
    last_offset: i64,
    partition_leader_epoch: i32,
) -> Option<Vec<u8>> {
    let delta = i32::try_from(last_offset.checked_sub(base_offset)?).ok()?;
    if delta < 0 {
        return None;
    }
    let header = BatchHeader {
        base_offset,
        batch_length: (HEADER_LEN - LOG_OVERHEAD) as i32,
        partition_leader_epoch,
        magic: MAGIC_V2,
        crc: 0,
        attributes: 0,
        last_offset_delta: delta,
        base_timestamp: crate::batch::NO_TIMESTAMP,
        max_timestamp: crate::batch::NO_TIMESTAMP,
        producer_id: NO_PRODUCER_ID,
        producer_epoch: NO_PRODUCER_EPOCH,
        base_sequence: NO_SEQUENCE,
        record_count: 0,
    };
    let mut out = header.encode().to_vec();
    let crc = compute_crc(&out);
    out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    Some(out)
}

impl BatchBuilder {
    pub fn new() -> Self {
        Self::default()
    }
    /// Add a record with a value and timestamp.
    pub fn record(mut self, timestamp: i64, key: Option<&[u8]>, value: Option<&[u8]>) -> Self {
        self.records.push(SimpleRecord {
            timestamp,
            key: key.map(<[u8]>::to_vec),
            value: value.map(<[u8]>::to_vec),
            headers: Vec::new(),
        });
        self
    }
    pub fn producer(mut self, producer_id: i64, producer_epoch: i16, base_sequence: i32) -> Self {
        self.producer_id = producer_id;
        self.producer_epoch = producer_epoch;
        self.base_sequence = base_sequence;
        self
    }

    /// Encode the batch. An empty record list yields a header-only batch (record count 0).
    pub fn build(&self) -> Vec<u8> {
        let base_ts = self
            .records
            .first()
            .map_or(crate::batch::NO_TIMESTAMP, |r| r.timestamp);
        let max_ts = self
            .records
            .iter()
            .map(|r| r.timestamp)
            .max()
            .unwrap_or(crate::batch::NO_TIMESTAMP);
        let mut body = Vec::new();
        for (i, r) in self.records.iter().enumerate() {
            let mut rec = Vec::new();
            rec.push(0u8); // attributes
            put_varlong(&mut rec, r.timestamp.wrapping_sub(base_ts));
            put_varint(&mut rec, i as i32);
            match &r.key {
                Some(k) => {
                    put_varint(&mut rec, k.len() as i32);
                    rec.extend_from_slice(k);
                }
                None => put_varint(&mut rec, -1),
            }
            match &r.value {
                Some(v) => {
                    put_varint(&mut rec, v.len() as i32);
                    rec.extend_from_slice(v);
                }
                None => put_varint(&mut rec, -1),
            }
            put_varint(&mut rec, r.headers.len() as i32);
            for (hk, hv) in &r.headers {
                put_varint(&mut rec, hk.len() as i32);
                rec.extend_from_slice(hk.as_bytes());
                match hv {
                    Some(v) => {
                        put_varint(&mut rec, v.len() as i32);
                        rec.extend_from_slice(v);
                    }
                    None => put_varint(&mut rec, -1),
                }
            }
            put_varint(&mut body, rec.len() as i32);
            body.extend_from_slice(&rec);
        }
        let mut attributes = 0i16;
        if self.timestamp_type == BatchTimestampType::LogAppendTime {
            attributes |= TIMESTAMP_TYPE_MASK;
        }
        if self.transactional {
            attributes |= TRANSACTIONAL_FLAG_MASK;
        }
        let n = self.records.len() as i32;
        let header = BatchHeader {
            base_offset: self.base_offset,
            batch_length: (HEADER_LEN - LOG_OVERHEAD + body.len()) as i32,
            partition_leader_epoch: self.partition_leader_epoch,
            magic: MAGIC_V2,
            crc: 0,
            attributes,
            last_offset_delta: (n - 1).max(0),
            base_timestamp: base_ts,
            max_timestamp: max_ts,
            producer_id: self.producer_id,
            producer_epoch: self.producer_epoch,
            base_sequence: self.base_sequence,
            record_count: n,
        };
        let mut out = Vec::with_capacity(HEADER_LEN + body.len());
        out.extend_from_slice(&header.encode());
        out.extend_from_slice(&body);
        let crc = compute_crc(&out);
        out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
        out
    }
}

/// Whether `h` heads a [`filler_batch`]: no records, no producer, not a control batch. (The
/// batches compaction empties keep their producer.)
pub fn is_filler(h: &BatchHeader) -> bool {
    h.record_count == 0 && h.producer_id < 0 && !h.is_control()
}

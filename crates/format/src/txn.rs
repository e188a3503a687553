//! Transactions in the log: control batches (the COMMIT/ABORT markers a transaction
//! coordinator has written into each partition a transaction touched) and the aborted
//! transaction index (`<base>.txnindex`).
//!
//! A control batch (Kafka's `MemoryRecords.withEndTransactionMarker`) is a RecordBatch v2 with
//! the transactional and control attribute bits set, uncompressed, the producer id and epoch
//! of the transaction in the header, base sequence -1, and one record (offset delta 0):
//!
//! ```text
//! key:   version: i16 (0) | type: i16 (0 = ABORT, 1 = COMMIT)
//! value: version: i16 (0) | coordinator_epoch: i32
//! ```
//!
//! The transaction index holds one entry per aborted transaction whose ABORT marker lies in
//! the segment, in marker order, each 34 bytes, big-endian (Kafka's `AbortedTxn`, version 0):
//!
//! ```text
//! version: i16 (0) | producer_id: i64 | first_offset: i64 | last_offset: i64 |
//! last_stable_offset: i64
//! ```
//!
//! `last_offset` is the marker's offset; `last_stable_offset` is the log's last stable offset
//! once the transaction completed (the first offset of the oldest transaction then still
//! open, else the marker's offset + 1). A read_committed fetch returns the aborted
//! transactions overlapping what it read, and stops looking at the first entry whose last
//! stable offset reaches past the fetched range.

use crate::batch::{
    compute_crc, BatchHeader, CONTROL_FLAG_MASK, CRC_OFFSET, HEADER_LEN, TRANSACTIONAL_FLAG_MASK,
};
use crate::builder::BatchBuilder;
use crate::records::parse_records;
use crate::FormatError;

/// `ControlRecordType.ABORT`.
pub const CONTROL_ABORT: i16 = 0;
/// `ControlRecordType.COMMIT`.
pub const CONTROL_COMMIT: i16 = 1;
/// Bytes of one transaction index entry.
pub const TXN_INDEX_ENTRY_LEN: usize = 2 + 8 + 8 + 8 + 8;
/// The only transaction index entry version.
pub const TXN_INDEX_VERSION: i16 = 0;

/// The content of a control record: its type and the coordinator epoch of its value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControlRecord {
    /// [`CONTROL_ABORT`], [`CONTROL_COMMIT`] (other types exist in Kafka, for KRaft).
    pub control_type: i16,
    /// -1 when the record has no value of the end-transaction layout.
    pub coordinator_epoch: i32,
}

/// A transaction marker batch (base offset 0; the log assigns it).
pub fn build_marker(
    producer_id: i64,
    producer_epoch: i16,
    control_type: i16,
    coordinator_epoch: i32,
    timestamp: i64,
) -> Vec<u8> {
    let mut key = Vec::with_capacity(4);
    key.extend_from_slice(&0i16.to_be_bytes());
    key.extend_from_slice(&control_type.to_be_bytes());
    let mut value = Vec::with_capacity(6);
    value.extend_from_slice(&0i16.to_be_bytes());
    value.extend_from_slice(&coordinator_epoch.to_be_bytes());
    let mut b = BatchBuilder::new()
        .record(timestamp, Some(&key), Some(&value))
        .producer(producer_id, producer_epoch, -1);
    b.transactional = true;
    let mut out = b.build();
    let attributes = i16::from_be_bytes([out[21], out[22]]) | CONTROL_FLAG_MASK;
    out[21..23].copy_from_slice(&attributes.to_be_bytes());
    let crc = compute_crc(&out);
    out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    out
}

/// The control record of a whole control batch `batch` (header `h`). Control batches are
/// never compressed; an error for anything that is not a readable control batch.
pub fn parse_control(batch: &[u8], h: &BatchHeader) -> Result<ControlRecord, FormatError> {
    if !h.is_control() {
        return Err(FormatError::Record("not a control batch".into()));
    }
    if h.compression_codec() != 0 {
        return Err(FormatError::Record("compressed control batch".into()));
    }
    let body = batch
        .get(HEADER_LEN..h.total_len())
        .ok_or(FormatError::Truncated {
            needed: h.total_len(),
            available: batch.len(),
        })?;
    let records = parse_records(body, h.record_count)?;
    let r = records
        .first()
        .ok_or_else(|| FormatError::Record("control batch without a record".into()))?;
    let key = r
        .key
        .clone()
        .map(|k| &body[k])
        .filter(|k| k.len() >= 4)
        .ok_or_else(|| FormatError::Record("control record key too short".into()))?;
    let control_type = i16::from_be_bytes([key[2], key[3]]);
    let coordinator_epoch = r
        .value
        .clone()
        .map(|v| &body[v])
        .filter(|v| v.len() >= 6)
        .map_or(-1, |v| i32::from_be_bytes([v[2], v[3], v[4], v[5]]));
    Ok(ControlRecord {
        control_type,
        coordinator_epoch,
    })
}

/// True for a batch header with both the transactional and control bits (a marker).
pub fn is_txn_marker(h: &BatchHeader) -> bool {
    h.attributes & (CONTROL_FLAG_MASK | TRANSACTIONAL_FLAG_MASK)
        == (CONTROL_FLAG_MASK | TRANSACTIONAL_FLAG_MASK)
}

/// One entry of a `.txnindex` file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxnIndexEntry {
    pub producer_id: i64,
    pub first_offset: i64,
    pub last_offset: i64,
    pub last_stable_offset: i64,
}

impl TxnIndexEntry {
    pub fn encode(&self) -> [u8; TXN_INDEX_ENTRY_LEN] {
        let mut b = [0u8; TXN_INDEX_ENTRY_LEN];
        b[0..2].copy_from_slice(&TXN_INDEX_VERSION.to_be_bytes());
        b[2..10].copy_from_slice(&self.producer_id.to_be_bytes());
        b[10..18].copy_from_slice(&self.first_offset.to_be_bytes());
        b[18..26].copy_from_slice(&self.last_offset.to_be_bytes());
        b[26..34].copy_from_slice(&self.last_stable_offset.to_be_bytes());
        b
    }
}

fn be_i64(b: &[u8]) -> i64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    i64::from_be_bytes(a)
}

/// The entries of a `.txnindex` file of the segment based at `base`: an error for a length
/// that is not a whole number of entries, an unknown version, or an entry that cannot belong
/// to the segment (its marker below the base, its first offset after its marker), like
/// Kafka's `TransactionIndex.sanityCheck`.
pub fn decode_txn_index(bytes: &[u8], base: i64) -> Result<Vec<TxnIndexEntry>, FormatError> {
    if !bytes.len().is_multiple_of(TXN_INDEX_ENTRY_LEN) {
        return Err(FormatError::Truncated {
            needed: bytes.len().div_ceil(TXN_INDEX_ENTRY_LEN) * TXN_INDEX_ENTRY_LEN,
            available: bytes.len(),
        });
    }
    let mut out = Vec::with_capacity(bytes.len() / TXN_INDEX_ENTRY_LEN);
    for c in bytes.chunks_exact(TXN_INDEX_ENTRY_LEN) {
        let version = i16::from_be_bytes([c[0], c[1]]);
        if version != TXN_INDEX_VERSION {
            return Err(FormatError::Text(format!(
                "transaction index entry version {version}"
            )));
        }
        let e = TxnIndexEntry {
            producer_id: be_i64(&c[2..]),
            first_offset: be_i64(&c[10..]),
            last_offset: be_i64(&c[18..]),
            last_stable_offset: be_i64(&c[26..]),
        };
        if e.last_offset < base
            || e.first_offset > e.last_offset
            || e.producer_id < 0
            || out
                .last()
                .is_some_and(|p: &TxnIndexEntry| p.last_offset >= e.last_offset)
        {
            return Err(FormatError::Text(format!(
                "transaction index entry {e:?} does not fit a segment based at {base}"
            )));
        }
        out.push(e);
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::batch::validate_batch;

    #[test]
    fn marker_layout() {
        let b = build_marker(42, 7, CONTROL_ABORT, 13, 1_700_000_000_000);
        let h = validate_batch(&b).unwrap();
        assert!(h.is_control() && h.is_transactional() && is_txn_marker(&h));
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (42, 7, -1)
        );
        assert_eq!((h.record_count, h.last_offset_delta), (1, 0));
        assert_eq!(
            parse_control(&b, &h).unwrap(),
            ControlRecord {
                control_type: CONTROL_ABORT,
                coordinator_epoch: 13
            }
        );
        // The record: attributes 0, deltas 0, key [0,0,0,0], value [0,0,0,0,0,13], no headers.
        let body = &b[HEADER_LEN..];
        assert_eq!(
            body,
            &[
                (1 + 1 + 1 + 1 + 4 + 1 + 6 + 1) * 2,
                0,
                0,
                0,
                8,
                0,
                0,
                0,
                0,
                12,
                0,
                0,
                0,
                0,
                0,
                13,
                0
            ]
        );
        let c = build_marker(42, 7, CONTROL_COMMIT, 0, 5);
        let hc = validate_batch(&c).unwrap();
        assert_eq!(parse_control(&c, &hc).unwrap().control_type, CONTROL_COMMIT);
    }

    #[test]
    fn txn_index_round_trip_and_damage() {
        let entries = [
            TxnIndexEntry {
                producer_id: 1,
                first_offset: 90,
                last_offset: 105,
                last_stable_offset: 106,
            },
            TxnIndexEntry {
                producer_id: 2,
                first_offset: 100,
                last_offset: 110,
                last_stable_offset: 107,
            },
        ];
        let bytes: Vec<u8> = entries.iter().flat_map(|e| e.encode()).collect();
        assert_eq!(bytes.len(), 68);
        assert_eq!(&bytes[0..2], &[0, 0]);
        assert_eq!(&bytes[2..10], &1i64.to_be_bytes());
        assert_eq!(decode_txn_index(&bytes, 100).unwrap(), entries);
        assert_eq!(decode_txn_index(&[], 0).unwrap(), vec![]);
        assert!(decode_txn_index(&bytes[..67], 100).is_err());
        assert!(
            decode_txn_index(&bytes, 106).is_err(),
            "marker below the base"
        );
        let mut v = bytes.clone();
        v[1] = 1;
        assert!(decode_txn_index(&v, 100).is_err(), "version");
    }
}

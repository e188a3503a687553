//! Kafka's producer-state snapshot (`<offset>.snapshot` in a partition directory): the state
//! of every idempotent producer as of `offset`, so that opening a log replays batches from
//! the newest snapshot on instead of guessing from the newest segments.
//!
//! Layout (version 1, big-endian, as Kafka's `ProducerStateManager` writes it):
//!
//! ```text
//! version: i16 (1) | crc: u32 (CRC-32C of every byte after this field) | count: i32 |
//! count x { producer_id: i64, epoch: i16, last_sequence: i32, last_offset: i64,
//!           offset_delta: i32, timestamp: i64, coordinator_epoch: i32,
//!           current_txn_first_offset: i64 (-1: none) }
//! ```
//!
//! `offset_delta` is the last batch's last sequence minus its first sequence (its first
//! offset is `last_offset - offset_delta`). Kafka keeps only the last batch of each producer;
//! so does this file.

use crate::FormatError;

/// The only snapshot version Kafka writes.
pub const SNAPSHOT_VERSION: i16 = 1;
const HEADER_LEN: usize = 2 + 4 + 4;
/// Bytes of one producer entry.
pub const SNAPSHOT_ENTRY_LEN: usize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8;

/// One producer's state in a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotEntry {
    pub producer_id: i64,
    pub epoch: i16,
    pub last_sequence: i32,
    pub last_offset: i64,
    pub offset_delta: i32,
    pub timestamp: i64,
    pub coordinator_epoch: i32,
    pub current_txn_first_offset: i64,
}

/// The bytes of a snapshot holding `entries`.
pub fn encode_snapshot(entries: &[SnapshotEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + entries.len() * SNAPSHOT_ENTRY_LEN);
    out.extend_from_slice(&SNAPSHOT_VERSION.to_be_bytes());
    out.extend_from_slice(&[0; 4]);
    // A snapshot never holds more producers than fit in memory; i32::MAX is far beyond that.
    let count = i32::try_from(entries.len()).unwrap_or(i32::MAX);
    out.extend_from_slice(&count.to_be_bytes());
    for e in entries.iter().take(count as usize) {
        out.extend_from_slice(&e.producer_id.to_be_bytes());
        out.extend_from_slice(&e.epoch.to_be_bytes());
        out.extend_from_slice(&e.last_sequence.to_be_bytes());
        out.extend_from_slice(&e.last_offset.to_be_bytes());
        out.extend_from_slice(&e.offset_delta.to_be_bytes());
        out.extend_from_slice(&e.timestamp.to_be_bytes());
        out.extend_from_slice(&e.coordinator_epoch.to_be_bytes());
        out.extend_from_slice(&e.current_txn_first_offset.to_be_bytes());
    }
    let crc = crc32c::crc32c(&out[6..]);
    out[2..6].copy_from_slice(&crc.to_be_bytes());
    out
}

/// The entries of a snapshot file's bytes; an error for a torn, damaged or unknown file.
pub fn decode_snapshot(bytes: &[u8]) -> Result<Vec<SnapshotEntry>, FormatError> {
    if bytes.len() < HEADER_LEN {
        return Err(FormatError::Truncated {
            needed: HEADER_LEN,
            available: bytes.len(),
        });
    }
    let version = i16::from_be_bytes([bytes[0], bytes[1]]);
    if version != SNAPSHOT_VERSION {
        return Err(FormatError::Text(format!(
            "producer snapshot version {version} (only {SNAPSHOT_VERSION} is known)"
        )));
    }
    let stored = u32::from_be_bytes([bytes[2], bytes[3], bytes[4], bytes[5]]);
    let computed = crc32c::crc32c(&bytes[6..]);
    if stored != computed {
        return Err(FormatError::CrcMismatch { stored, computed });
    }
    let count = i32::from_be_bytes([bytes[6], bytes[7], bytes[8], bytes[9]]);
    let count = usize::try_from(count)
        .map_err(|_| FormatError::Text(format!("producer snapshot count {count}")))?;
    let needed = count
        .checked_mul(SNAPSHOT_ENTRY_LEN)
        .and_then(|n| n.checked_add(HEADER_LEN))
        .ok_or_else(|| FormatError::Text(format!("producer snapshot count {count}")))?;
    if bytes.len() != needed {
        return Err(FormatError::Truncated {
            needed,
            available: bytes.len(),
        });
    }
    let mut out = Vec::with_capacity(count);
    let mut r = Reader(&bytes[HEADER_LEN..]);
    for _ in 0..count {
        out.push(SnapshotEntry {
            producer_id: i64::from_be_bytes(r.take()),
            epoch: i16::from_be_bytes(r.take()),
            last_sequence: i32::from_be_bytes(r.take()),
            last_offset: i64::from_be_bytes(r.take()),
            offset_delta: i32::from_be_bytes(r.take()),
            timestamp: i64::from_be_bytes(r.take()),
            coordinator_epoch: i32::from_be_bytes(r.take()),
            current_txn_first_offset: i64::from_be_bytes(r.take()),
        });
    }
    Ok(out)
}

/// Fixed-size big-endian fields off the front of a slice whose length was checked.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut a = [0u8; N];
        a.copy_from_slice(&self.0[..N]);
        self.0 = &self.0[N..];
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(pid: i64) -> SnapshotEntry {
        SnapshotEntry {
            producer_id: pid,
            epoch: 3,
            last_sequence: 41,
            last_offset: 1000 + pid,
            offset_delta: 4,
            timestamp: 1_700_000_000_000,
            coordinator_epoch: -1,
            current_txn_first_offset: -1,
        }
    }

    #[test]
    fn round_trip() {
        let entries: Vec<_> = (0..5).map(entry).collect();
        let bytes = encode_snapshot(&entries);
        assert_eq!(bytes.len(), HEADER_LEN + 5 * SNAPSHOT_ENTRY_LEN);
        assert_eq!(decode_snapshot(&bytes).unwrap(), entries);
        assert_eq!(decode_snapshot(&encode_snapshot(&[])).unwrap(), vec![]);
    }

    #[test]
    fn damage_is_refused() {
        let bytes = encode_snapshot(&[entry(1), entry(2)]);
        for cut in 0..bytes.len() {
            assert!(decode_snapshot(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 0x40;
            assert!(decode_snapshot(&b).is_err(), "flipped byte {i}");
        }
    }

    /// The layout field by field as Kafka's snapshot schema names it (version, CRC over the
    /// rest, entry count, entries); tests/integration/test_dump_log_segments.py has Kafka's
    /// own dump tool read the files the store writes.
    #[test]
    fn layout_field_by_field() {
        let mut b = vec![0u8, 1, 0, 0, 0, 0, 0, 0, 0, 1];
        b.extend_from_slice(&7i64.to_be_bytes());
        b.extend_from_slice(&0i16.to_be_bytes());
        b.extend_from_slice(&9i32.to_be_bytes());
        b.extend_from_slice(&19i64.to_be_bytes());
        b.extend_from_slice(&4i32.to_be_bytes());
        b.extend_from_slice(&1_700_000_000_123i64.to_be_bytes());
        b.extend_from_slice(&(-1i32).to_be_bytes());
        b.extend_from_slice(&(-1i64).to_be_bytes());
        let crc = crc32c::crc32c(&b[6..]);
        b[2..6].copy_from_slice(&crc.to_be_bytes());
        let e = decode_snapshot(&b).unwrap();
        assert_eq!(e.len(), 1);
        assert_eq!(
            (e[0].producer_id, e[0].last_sequence, e[0].last_offset),
            (7, 9, 19)
        );
        assert_eq!(encode_snapshot(&e), b);
    }
}

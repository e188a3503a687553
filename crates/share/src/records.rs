//! The records of `__share_group_state`, in Kafka 4.3's format (share coordinator schemas
//! `ShareSnapshotKey/Value` and `ShareUpdateKey/Value`), so that Kafka's tools read what
//! Sluice writes.
//!
//! Key: int16 record type (0 snapshot, 1 update), then (not flexible) group id (int16-length
//! string), topic id (16-byte uuid), partition (int32).
//!
//! Value: int16 version (0), then (flexible):
//!
//! | type | fields |
//! |---|---|
//! | 0 snapshot | snapshotEpoch int32, stateEpoch int32, leaderEpoch int32, startOffset int64, createTimestamp int64, writeTimestamp int64, stateBatches, tag 0 deliveryCompleteCount int32 (-1 absent) |
//! | 1 update | snapshotEpoch int32, leaderEpoch int32, startOffset int64 (-1: unchanged), stateBatches, tag 0 deliveryCompleteCount int32 |
//!
//! stateBatches: compact array of [firstOffset int64, lastOffset int64, deliveryState int8
//! (0 available, 2 acknowledged, 4 archived), deliveryCount int16, tags]. A null value (a
//! tombstone) deletes the share partition's state.

use bytes::{BufMut, Bytes, BytesMut};
use sluice_format::fields::{put_str, put_uvarint, FieldError, FieldReader};

use crate::StateBatch;

/// Record types (the key's leading int16).
pub const SNAPSHOT: i16 = 0;
pub const UPDATE: i16 = 1;
/// The only value version of both.
pub const VALUE_VERSION: i16 = 0;

/// Why a record could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    #[error("malformed share state record: {0}")]
    Malformed(&'static str),
    #[error("share state record type {0} is not known")]
    UnknownType(i16),
    #[error("share state value version {0} is not known")]
    UnknownVersion(i16),
}

impl From<FieldError> for RecordError {
    fn from(e: FieldError) -> Self {
        RecordError::Malformed(e.0)
    }
}

type Reader<'a> = FieldReader<'a, RecordError>;

/// Whose state a record holds: a share group's view of one topic partition.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShareKey {
    pub group_id: String,
    pub topic_id: [u8; 16],
    pub partition: i32,
}

/// A decoded value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShareValue {
    /// The whole state (`ShareSnapshotValue`).
    Snapshot {
        snapshot_epoch: i32,
        state_epoch: i32,
        leader_epoch: i32,
        start_offset: i64,
        delivery_complete_count: i32,
        create_timestamp: i64,
        write_timestamp: i64,
        batches: Vec<StateBatch>,
    },
    /// What changed since the snapshot (`ShareUpdateValue`).
    Update {
        snapshot_epoch: i32,
        leader_epoch: i32,
        /// -1: unchanged.
        start_offset: i64,
        delivery_complete_count: i32,
        batches: Vec<StateBatch>,
    },
}

impl ShareValue {
    fn record_type(&self) -> i16 {
        match self {
            ShareValue::Snapshot { .. } => SNAPSHOT,
            ShareValue::Update { .. } => UPDATE,
        }
    }
}

/// The key of a record of `record_type` for `key`.
pub fn encode_key(record_type: i16, key: &ShareKey) -> Bytes {
    let mut b = BytesMut::with_capacity(2 + 2 + key.group_id.len() + 16 + 4);
    b.put_i16(record_type);
    put_str(&mut b, &key.group_id);
    b.put_slice(&key.topic_id);
    b.put_i32(key.partition);
    b.freeze()
}

/// The record type and key a key holds.
pub fn decode_key(bytes: &[u8]) -> Result<(i16, ShareKey), RecordError> {
    let mut r = Reader::new(bytes);
    let record_type = r.i16()?;
    if record_type != SNAPSHOT && record_type != UPDATE {
        return Err(RecordError::UnknownType(record_type));
    }
    let group_id = r.str()?;
    let topic_id = r.array::<16>()?;
    let partition = r.i32()?;
    Ok((
        record_type,
        ShareKey {
            group_id,
            topic_id,
            partition,
        },
    ))
}

/// The key and value of a record holding `value` for `key`.
pub fn encode(key: &ShareKey, value: &ShareValue) -> (Bytes, Bytes) {
    let mut b = BytesMut::with_capacity(64);
    b.put_i16(VALUE_VERSION);
    let (count, batches) = match value {
        ShareValue::Snapshot {
            snapshot_epoch,
            state_epoch,
            leader_epoch,
            start_offset,
            delivery_complete_count,
            create_timestamp,
            write_timestamp,
            batches,
        } => {
            b.put_i32(*snapshot_epoch);
            b.put_i32(*state_epoch);
            b.put_i32(*leader_epoch);
            b.put_i64(*start_offset);
            b.put_i64(*create_timestamp);
            b.put_i64(*write_timestamp);
            (*delivery_complete_count, batches)
        }
        ShareValue::Update {
            snapshot_epoch,
            leader_epoch,
            start_offset,
            delivery_complete_count,
            batches,
        } => {
            b.put_i32(*snapshot_epoch);
            b.put_i32(*leader_epoch);
            b.put_i64(*start_offset);
            (*delivery_complete_count, batches)
        }
    };
    put_uvarint(&mut b, batches.len() as u64 + 1);
    for s in batches {
        b.put_i64(s.first);
        b.put_i64(s.last);
        b.put_i8(s.state as i8);
        b.put_i16(s.delivery_count as i16);
        put_uvarint(&mut b, 0);
    }
    if count == -1 {
        put_uvarint(&mut b, 0);
    } else {
        put_uvarint(&mut b, 1);
        put_uvarint(&mut b, 0);
        put_uvarint(&mut b, 4);
        b.put_i32(count);
    }
    (encode_key(value.record_type(), key), b.freeze())
}

/// The value of a record of `record_type` (from its key).
pub fn decode_value(record_type: i16, bytes: &[u8]) -> Result<ShareValue, RecordError> {
    let mut r = Reader::new(bytes);
    let version = r.i16()?;
    if version != VALUE_VERSION {
        return Err(RecordError::UnknownVersion(version));
    }
    let batch = |r: &mut Reader<'_>| -> Result<StateBatch, RecordError> {
        let first = r.i64()?;
        let last = r.i64()?;
        let state = r.i8()? as u8;
        let delivery_count = r.i16()? as u16;
        r.skip_tags()?;
        Ok(StateBatch {
            first,
            last,
            state,
            delivery_count,
        })
    };
    let complete_count = |r: &mut Reader<'_>| -> Result<i32, RecordError> {
        let mut count = -1;
        for (tag, data) in r.tagged()? {
            if tag == 0 {
                let bytes: [u8; 4] = data
                    .try_into()
                    .map_err(|_| RecordError::Malformed("deliveryCompleteCount"))?;
                count = i32::from_be_bytes(bytes);
            }
        }
        Ok(count)
    };
    match record_type {
        SNAPSHOT => {
            let snapshot_epoch = r.i32()?;
            let state_epoch = r.i32()?;
            let leader_epoch = r.i32()?;
            let start_offset = r.i64()?;
            let create_timestamp = r.i64()?;
            let write_timestamp = r.i64()?;
            let batches = r.compact_array(batch)?;
            let delivery_complete_count = complete_count(&mut r)?;
            Ok(ShareValue::Snapshot {
                snapshot_epoch,
                state_epoch,
                leader_epoch,
                start_offset,
                delivery_complete_count,
                create_timestamp,
                write_timestamp,
                batches,
            })
        }
        UPDATE => {
            let snapshot_epoch = r.i32()?;
            let leader_epoch = r.i32()?;
            let start_offset = r.i64()?;
            let batches = r.compact_array(batch)?;
            let delivery_complete_count = complete_count(&mut r)?;
            Ok(ShareValue::Update {
                snapshot_epoch,
                leader_epoch,
                start_offset,
                delivery_complete_count,
                batches,
            })
        }
        other => Err(RecordError::UnknownType(other)),
    }
}

/// The partition of `__share_group_state` (of `partitions`) that holds `key`'s state, as
/// Kafka's share coordinator places it: the Java hash of "group:topicId:partition" (the
/// topic id in Kafka's base64 form), made non-negative, modulo the partitions.
pub fn state_partition(key: &ShareKey, topic_id_base64: &str, partitions: i32) -> i32 {
    let s = format!("{}:{}:{}", key.group_id, topic_id_base64, key.partition);
    let h = java_string_hash(&s);
    // Kafka's Utils.abs: i32::MIN maps to 0.
    let h = if h == i32::MIN { 0 } else { h.abs() };
    h % partitions.max(1)
}

/// Java's `String.hashCode` (over UTF-16 code units).
fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ShareKey {
        ShareKey {
            group_id: "g".into(),
            topic_id: [7; 16],
            partition: 3,
        }
    }

    #[test]
    fn snapshot_bytes_are_kafkas() {
        let value = ShareValue::Snapshot {
            snapshot_epoch: 1,
            state_epoch: 2,
            leader_epoch: 3,
            start_offset: 10,
            delivery_complete_count: -1,
            create_timestamp: 5,
            write_timestamp: 6,
            batches: vec![StateBatch {
                first: 10,
                last: 12,
                state: 2,
                delivery_count: 1,
            }],
        };
        let (k, v) = encode(&key(), &value);
        let mut expected_key = vec![0, 0, 0, 1, b'g'];
        expected_key.extend([7u8; 16]);
        expected_key.extend([0, 0, 0, 3]);
        assert_eq!(&k[..], &expected_key[..]);
        let mut expected = vec![0, 0]; // version
        expected.extend(1i32.to_be_bytes());
        expected.extend(2i32.to_be_bytes());
        expected.extend(3i32.to_be_bytes());
        expected.extend(10i64.to_be_bytes());
        expected.extend(5i64.to_be_bytes());
        expected.extend(6i64.to_be_bytes());
        expected.push(2); // one batch
        expected.extend(10i64.to_be_bytes());
        expected.extend(12i64.to_be_bytes());
        expected.push(2);
        expected.extend(1i16.to_be_bytes());
        expected.push(0); // the batch's tags
        expected.push(0); // no tags
        assert_eq!(&v[..], &expected[..]);
        assert_eq!(decode_key(&k).unwrap(), (SNAPSHOT, key()));
        assert_eq!(decode_value(SNAPSHOT, &v).unwrap(), value);
    }

    #[test]
    fn updates_and_the_tagged_count_round_trip_and_bad_input_is_an_error() {
        let value = ShareValue::Update {
            snapshot_epoch: 4,
            leader_epoch: 1,
            start_offset: -1,
            delivery_complete_count: 17,
            batches: vec![],
        };
        let (k, v) = encode(&key(), &value);
        assert_eq!(decode_key(&k).unwrap().0, UPDATE);
        assert_eq!(decode_value(UPDATE, &v).unwrap(), value);
        assert!(decode_value(UPDATE, &v[..v.len() - 2]).is_err());
        assert_eq!(
            decode_value(SNAPSHOT, &[0, 1]),
            Err(RecordError::UnknownVersion(1))
        );
        assert_eq!(decode_key(&[0, 9]), Err(RecordError::UnknownType(9)));
        assert!(decode_key(&k[..k.len() - 1]).is_err());
    }

    #[test]
    fn state_partitions_follow_javas_string_hash() {
        // "hello".hashCode() == 99162322 in Java.
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(java_string_hash(""), 0);
        // Overflowing hashes wrap as Java's do: "polygenelubricants".hashCode() == i32::MIN.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        let p = state_partition(&key(), "BwcHBwcHBwcHBwcHBwcHBw", 50);
        assert!((0..50).contains(&p));
    }
}

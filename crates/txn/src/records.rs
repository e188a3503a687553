//! The records of `__transaction_state`, in Apache Kafka's own schemas
//! (`TransactionLogKey.json`, `TransactionLogValue.json`) so that
//! `kafka-dump-log --transaction-log-decoder` and a Kafka coordinator read them.
//!
//! Key, version 0 (not flexible): int16 version 0, then `TransactionalId` as an
//! int16-length-prefixed UTF-8 string.
//!
//! Value, version 0 (not flexible) or 1 (flexible; written when `transaction.version` ≥ 1):
//!
//! | field | type |
//! |---|---|
//! | ProducerId | int64 |
//! | ProducerEpoch | int16 |
//! | TransactionTimeoutMs | int32 |
//! | TransactionStatus | int8 (the [`TxnState`] id) |
//! | TransactionPartitions | nullable array of {Topic string, PartitionIds []int32}; null in Empty |
//! | TransactionLastUpdateTimestampMs | int64 |
//! | TransactionStartTimestampMs | int64 |
//! | v1 tagged 0: PreviousProducerId | int64, default -1 |
//! | v1 tagged 1: NextProducerId | int64, default -1 |
//! | v1 tagged 2: ClientTransactionVersion | int16, default 0 |
//!
//! In v0 arrays carry an int32 count (-1 = null) and strings an int16 length; in v1 arrays and
//! strings carry an unsigned varint of length + 1 (0 = null), every struct ends with a
//! tagged-field section, and tagged fields are written only when they differ from their
//! default, in tag order (tag, size, value, each size an unsigned varint).
//!
//! As Kafka 4.3 does, PreviousProducerId is the producer id before the transition that wrote
//! the record (equal to ProducerId except right after a new producer id was taken), and
//! NextProducerId is set only in the PrepareCommit/PrepareAbort record of a TV2 transaction
//! whose epoch overflows (the producer id taken at completion).
//! Topics are written in name order and partitions in ascending order (Kafka's order comes
//! from a hash map).

use std::collections::BTreeSet;

use bytes::{BufMut, Bytes, BytesMut};
use sluice_format::fields::{put_str, put_uvarint, FieldError, FieldReader};

use crate::{TxnPartition, TxnState};

/// The key version of every transaction record.
pub const KEY_VERSION: i16 = 0;
/// The highest value version this crate reads and writes.
pub const VALUE_VERSION_MAX: i16 = 1;

/// A decoded transaction record value (`TransactionLogValue`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnValue {
    pub producer_id: i64,
    /// Tagged field 0 (v1): -1 when absent.
    pub previous_producer_id: i64,
    /// Tagged field 1 (v1): -1 when absent.
    pub next_producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    pub partitions: BTreeSet<TxnPartition>,
    pub last_update_ms: i64,
    pub start_ms: i64,
    /// Tagged field 2 (v1): the `transaction.version` the client used, 0 when absent.
    pub client_transaction_version: i16,
}

/// A record that is not a transaction record of a version this crate knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed __transaction_state record: {0}")]
pub struct DecodeError(pub String);

/// The key of a transactional id's records.
pub fn key(transactional_id: &str) -> Bytes {
    let mut b = BytesMut::with_capacity(4 + transactional_id.len());
    b.put_i16(KEY_VERSION);
    put_str(&mut b, transactional_id);
    b.freeze()
}

/// Topics in name order with their partitions in ascending order.
fn by_topic(partitions: &BTreeSet<TxnPartition>) -> Vec<(&str, Vec<i32>)> {
    let mut out: Vec<(&str, Vec<i32>)> = Vec::new();
    for (topic, p) in partitions {
        match out.last_mut() {
            Some((t, ps)) if *t == topic.as_str() => ps.push(*p),
            _ => out.push((topic.as_str(), vec![*p])),
        }
    }
    out
}

/// Encode a value in `version` (0 or 1; anything above 1 is written as 1).
pub fn encode_value(v: &TxnValue, version: i16) -> Bytes {
    let flexible = version >= 1;
    let mut b = BytesMut::with_capacity(64);
    b.put_i16(if flexible { 1 } else { 0 });
    b.put_i64(v.producer_id);
    b.put_i16(v.producer_epoch);
    b.put_i32(v.timeout_ms);
    b.put_i8(v.state.id());
    // Kafka writes a null array in Empty (and refuses partitions there).
    let topics = (v.state != TxnState::Empty).then(|| by_topic(&v.partitions));
    match (&topics, flexible) {
        (None, false) => b.put_i32(-1),
        (None, true) => put_uvarint(&mut b, 0),
        (Some(ts), false) => {
            b.put_i32(ts.len() as i32);
            for (topic, ps) in ts {
                put_str(&mut b, topic);
                b.put_i32(ps.len() as i32);
                ps.iter().for_each(|p| b.put_i32(*p));
            }
        }
        (Some(ts), true) => {
            put_uvarint(&mut b, ts.len() as u64 + 1);
            for (topic, ps) in ts {
                put_uvarint(&mut b, topic.len() as u64 + 1);
                b.put_slice(topic.as_bytes());
                put_uvarint(&mut b, ps.len() as u64 + 1);
                ps.iter().for_each(|p| b.put_i32(*p));
                put_uvarint(&mut b, 0); // the struct's tagged fields
            }
        }
    }
    b.put_i64(v.last_update_ms);
    b.put_i64(v.start_ms);
    if flexible {
        let mut tagged: Vec<(u64, Vec<u8>)> = Vec::new();
        if v.previous_producer_id != -1 {
            tagged.push((0, v.previous_producer_id.to_be_bytes().to_vec()));
        }
        if v.next_producer_id != -1 {
            tagged.push((1, v.next_producer_id.to_be_bytes().to_vec()));
        }
        if v.client_transaction_version != 0 {
            tagged.push((2, v.client_transaction_version.to_be_bytes().to_vec()));
        }
        put_uvarint(&mut b, tagged.len() as u64);
        for (tag, data) in tagged {
            put_uvarint(&mut b, tag);
            put_uvarint(&mut b, data.len() as u64);
            b.put_slice(&data);
        }
    }
    b.freeze()
}

type Reader<'a> = FieldReader<'a, DecodeError>;

impl From<FieldError> for DecodeError {
    fn from(e: FieldError) -> DecodeError {
        DecodeError(e.0.into())
    }
}

/// The transactional id of a record key; `None` for a key of another version (Kafka skips
/// those on load as leftovers of an aborted upgrade).
pub fn decode_key(key: &[u8]) -> Result<Option<String>, DecodeError> {
    let mut r = Reader::new(key);
    if r.i16()? != KEY_VERSION {
        return Ok(None);
    }
    r.str().map(Some)
}

/// Decode a value (not a tombstone).
pub fn decode_value(value: &[u8]) -> Result<TxnValue, DecodeError> {
    let mut r = Reader::new(value);
    let version = r.i16()?;
    if !(0..=VALUE_VERSION_MAX).contains(&version) {
        return Err(DecodeError(format!("unknown value version {version}")));
    }
    let flexible = version >= 1;
    let producer_id = r.i64()?;
    let producer_epoch = r.i16()?;
    let timeout_ms = r.i32()?;
    let status = r.i8()?;
    let state = TxnState::from_id(status)
        .ok_or_else(|| DecodeError(format!("unknown transaction status {status}")))?;
    let mut partitions = BTreeSet::new();
    let topics = if flexible {
        r.compact_len()?
    } else {
        usize::try_from(r.i32()?).ok()
    };
    if let Some(n) = topics {
        let n = r.count(n, if flexible { 3 } else { 6 })?;
        for _ in 0..n {
            let topic = if flexible { r.compact_str()? } else { r.str()? };
            let count = if flexible {
                r.compact_len()?
            } else {
                usize::try_from(r.i32()?).ok()
            };
            let count = r.count(count.unwrap_or(0), 4)?;
            for _ in 0..count {
                let p = r.i32()?;
                // Kafka ignores the partitions of an Empty record.
                if state != TxnState::Empty {
                    partitions.insert((topic.clone(), p));
                }
            }
            if flexible {
                r.skip_tags()?;
            }
        }
    }
    let last_update_ms = r.i64()?;
    let start_ms = r.i64()?;
    let mut v = TxnValue {
        producer_id,
        previous_producer_id: -1,
        next_producer_id: -1,
        producer_epoch,
        timeout_ms,
        state,
        partitions,
        last_update_ms,
        start_ms,
        client_transaction_version: 0,
    };
    if flexible {
        for (tag, data) in r.tagged()? {
            let mut f = Reader::new(data);
            match tag {
                0 => v.previous_producer_id = f.i64()?,
                1 => v.next_producer_id = f.i64()?,
                2 => v.client_transaction_version = f.i16()?,
                _ => {} // an unknown tagged field: skipped, as Kafka does
            }
        }
    }
    Ok(v)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    fn ongoing() -> TxnValue {
        TxnValue {
            producer_id: 1000,
            previous_producer_id: 1000,
            next_producer_id: -1,
            producer_epoch: 3,
            timeout_ms: 60_000,
            state: TxnState::Ongoing,
            partitions: [("b".to_string(), 1), ("a".to_string(), 0)]
                .into_iter()
                .collect(),
            last_update_ms: 1_700_000_000_123,
            start_ms: 1_700_000_000_000,
            client_transaction_version: 2,
        }
    }

    #[test]
    fn key_bytes() {
        // Kafka 4.3.1's TransactionLog.keyToBytes("my-txn").
        assert_eq!(hex(&key("my-txn")), "000000066d792d74786e");
        assert_eq!(
            decode_key(&key("my-txn")).unwrap().as_deref(),
            Some("my-txn")
        );
        assert_eq!(decode_key(&[0, 1, 0, 0]).unwrap(), None);
    }

    /// Hand-checked against the schema field by field, and equal to what Kafka 4.3.1's
    /// `TransactionLog.valueToBytes` writes for the same metadata under transaction.version
    /// 2 (run with the jars of tests/.deps/kafka-libs).
    #[test]
    fn value_v1_bytes_are_kafkas() {
        let v = ongoing();
        let bytes = encode_value(&v, 1);
        let expected = [
            "0001",             // version 1
            "00000000000003e8", // producer id 1000
            "0003",             // epoch 3
            "0000ea60",         // timeout 60000
            "01",               // Ongoing
            "03",               // 2 topics (compact: n + 1)
            "02",
            "61",
            "02",
            "00000000",
            "00", // "a" [0], no tagged fields
            "02",
            "62",
            "02",
            "00000001",
            "00",               // "b" [1], no tagged fields
            "0000018bcfe5687b", // last update 1700000000123
            "0000018bcfe56800", // start 1700000000000
            "02",               // two tagged fields:
            "00",
            "08",
            "00000000000003e8", // tag 0 PreviousProducerId 1000
            "02",
            "02",
            "0002", // tag 2 ClientTransactionVersion 2
        ]
        .concat();
        assert_eq!(hex(&bytes), expected);
        assert_eq!(
            expected,
            "000100000000000003e800030000ea600103026102000000000002620200000001000000018bcfe5687b\
             0000018bcfe5680002000800000000000003e802020002"
        );
        assert_eq!(decode_value(&bytes).unwrap(), v);
    }

    /// Kafka 4.3.1 under transaction.version 0.
    #[test]
    fn value_v0_bytes_are_kafkas() {
        let mut v = ongoing();
        v.client_transaction_version = 0;
        let bytes = encode_value(&v, 0);
        assert_eq!(
            hex(&bytes),
            "000000000000000003e800030000ea6001000000020001610000000100000000000162000000010000\
             00010000018bcfe5687b0000018bcfe56800"
        );
        // v0 has no tagged fields.
        v.previous_producer_id = -1;
        assert_eq!(decode_value(&bytes).unwrap(), v);
    }

    /// A TV2 PrepareCommit whose epoch overflowed, and an Empty record (null partitions),
    /// as Kafka 4.3.1 writes them.
    #[test]
    fn overflow_and_empty_values_are_kafkas() {
        let overflow = TxnValue {
            producer_id: 77,
            previous_producer_id: 77,
            next_producer_id: 2000,
            producer_epoch: i16::MAX,
            timeout_ms: 60_000,
            state: TxnState::PrepareCommit,
            partitions: [("t".to_string(), 0)].into_iter().collect(),
            last_update_ms: 6,
            start_ms: 5,
            client_transaction_version: 2,
        };
        let kafka =
            "0001000000000000004d7fff0000ea600202027402000000000000000000000000060000000000\
                     000005030008000000000000004d010800000000000007d002020002";
        assert_eq!(hex(&encode_value(&overflow, 1)), kafka);
        let empty = TxnValue {
            producer_id: 7,
            previous_producer_id: 5,
            next_producer_id: -1,
            producer_epoch: 0,
            timeout_ms: 1,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            last_update_ms: 2,
            start_ms: -1,
            client_transaction_version: 0,
        };
        let kafka =
            "0001000000000000000700000000000100000000000000000002ffffffffffffffff010008000000\
                     0000000005";
        assert_eq!(hex(&encode_value(&empty, 1)), kafka);
    }

    #[test]
    fn empty_has_null_partitions_and_tags_round_trip() {
        let v = TxnValue {
            producer_id: 7,
            previous_producer_id: 5,
            next_producer_id: 9,
            producer_epoch: 0,
            timeout_ms: 1,
            state: TxnState::Empty,
            partitions: BTreeSet::new(),
            last_update_ms: 2,
            start_ms: -1,
            client_transaction_version: 0,
        };
        for version in [0, 1] {
            let b = encode_value(&v, version);
            // The partitions array is null: int32 -1 in v0, varint 0 in v1.
            let at = 2 + 8 + 2 + 4 + 1;
            if version == 0 {
                assert_eq!(&b[at..at + 4], &[0xff; 4]);
            } else {
                assert_eq!(b[at], 0);
            }
            let d = decode_value(&b).unwrap();
            if version == 0 {
                // v0 has no tagged fields.
                assert_eq!((d.previous_producer_id, d.next_producer_id), (-1, -1));
            } else {
                assert_eq!(d, v);
            }
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        let b = encode_value(&ongoing(), 1);
        for n in 0..b.len() {
            assert!(decode_value(&b[..n]).is_err(), "prefix of {n} bytes");
        }
        let mut bad = b.to_vec();
        bad[2 + 8 + 2 + 4] = 42; // status
        assert!(decode_value(&bad).is_err());
        assert!(decode_value(&[0, 9]).is_err());
        // A huge array count is refused before any allocation.
        let mut huge = b.to_vec();
        huge[17] = 0xff;
        huge.splice(18..18, [0xff, 0xff, 0x0f]);
        assert!(decode_value(&huge).is_err());
    }
}

//! Broker-side recompression for topics whose `compression.type` names a codec (Kafka's
//! behaviour): a batch whose codec differs is decoded and re-encoded with the topic's codec,
//! keeping producer id, epoch, sequences, timestamps, keys, values and headers. Topics with
//! `compression.type=producer` (the default) never come here: their batches are stored as sent.

use bytes::{Bytes, BytesMut};
use kafka_protocol::records::{
    Compression, Record, RecordBatchDecoder, RecordBatchEncoder, RecordEncodeOptions,
};

/// The codec a topic's `compression.type` asks for, or None for `producer`.
pub(crate) fn target_codec(compression_type: &str) -> Option<Compression> {
    match compression_type {
        "uncompressed" | "none" => Some(Compression::None),
        "gzip" => Some(Compression::Gzip),
        "snappy" => Some(Compression::Snappy),
        "lz4" => Some(Compression::Lz4),
        "zstd" => Some(Compression::Zstd),
        _ => None,
    }
}

fn codec_id(c: Compression) -> u8 {
    match c {
        Compression::None => 0,
        Compression::Gzip => 1,
        Compression::Snappy => 2,
        Compression::Lz4 => 3,
        Compression::Zstd => 4,
    }
}

/// Re-encode `records` with `target` if any batch uses another codec, with the bytes the
/// batches take uncompressed (their logical size, computed from the decoded records: no
/// further pass over the data); None when they were left as they are. Batches that do not
/// parse are returned unchanged so that the log store rejects them with the precise error.
pub(crate) fn recompress(
    records: Bytes,
    target: Compression,
) -> Result<(Bytes, Option<u64>), String> {
    let Ok(batches) = sluice_format::batch::parse_batches(&records, None) else {
        return Ok((records, None));
    };
    if batches
        .iter()
        .all(|b| b.header.compression_codec() == codec_id(target) || b.header.is_control())
    {
        return Ok((records, None));
    }
    let mut input = records.clone();
    let sets = RecordBatchDecoder::decode_all(&mut input)
        .map_err(|e| format!("cannot decode batch for recompression: {e}"))?;
    let mut out = BytesMut::with_capacity(records.len());
    let mut logical = 0u64;
    for set in sets {
        logical += uncompressed_len(&set.records);
        RecordBatchEncoder::encode(
            &mut out,
            &set.records,
            &RecordEncodeOptions {
                version: 2,
                compression: target,
            },
        )
        .map_err(|e| format!("cannot recompress batch: {e}"))?;
    }
    Ok((out.freeze(), Some(logical)))
}

/// Bytes of a batch holding `records` uncompressed: the 61-byte header and each record as
/// RecordBatch v2 encodes it (a varint length, then attributes, timestamp and offset deltas
/// from the first record, key, value and headers with varint lengths).
fn uncompressed_len(records: &[Record]) -> u64 {
    fn varint(v: i64) -> u64 {
        let mut z = ((v << 1) ^ (v >> 63)) as u64;
        let mut n = 1;
        while z >= 0x80 {
            z >>= 7;
            n += 1;
        }
        n
    }
    fn bytes(b: Option<&[u8]>) -> u64 {
        b.map_or(varint(-1), |b| varint(b.len() as i64) + b.len() as u64)
    }
    let Some(first) = records.first() else {
        return sluice_format::HEADER_LEN as u64;
    };
    let mut total = sluice_format::HEADER_LEN as u64;
    for r in records {
        let mut len = 1
            + varint(r.timestamp.wrapping_sub(first.timestamp))
            + varint(r.offset.wrapping_sub(first.offset))
            + bytes(r.key.as_deref())
            + bytes(r.value.as_deref())
            + varint(r.headers.len() as i64);
        for (k, v) in &r.headers {
            len += bytes(Some(k.as_bytes())) + bytes(v.as_deref());
        }
        total += varint(len as i64) + len;
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use indexmap::IndexMap;
    use kafka_protocol::records::TimestampType;

    fn records(compression: Compression) -> Bytes {
        let recs: Vec<Record> = (0..5)
            .map(|i| Record {
                transactional: false,
                control: false,
                delete_horizon: false,
                partition_leader_epoch: -1,
                producer_id: 42,
                producer_epoch: 3,
                timestamp_type: TimestampType::Creation,
                offset: i,
                sequence: 10 + i as i32,
                timestamp: 1_000 + i,
                key: Some(Bytes::from(format!("k{i}"))),
                value: Some(Bytes::from(vec![b'v'; 200])),
                headers: if i % 2 == 1 {
                    IndexMap::from([(
                        kafka_protocol::protocol::StrBytes::from_static_str("h"),
                        Some(Bytes::from_static(b"header value")),
                    )])
                } else {
                    IndexMap::new()
                },
            })
            .collect();
        let mut buf = BytesMut::new();
        RecordBatchEncoder::encode(
            &mut buf,
            &recs,
            &RecordEncodeOptions {
                version: 2,
                compression,
            },
        )
        .expect("encode");
        buf.freeze()
    }

    #[test]
    fn recompresses_keeping_producer_state_and_records() {
        for (from, to) in [
            (Compression::None, Compression::Zstd),
            (Compression::Gzip, Compression::Lz4),
            (Compression::Snappy, Compression::None),
        ] {
            let input = records(from);
            let (out, logical) = recompress(input.clone(), to).expect("recompress");
            // The logical size is the batch's size uncompressed, byte for byte.
            assert_eq!(logical, Some(records(Compression::None).len() as u64));
            let batches = sluice_format::batch::parse_batches(&out, None).expect("valid output");
            assert_eq!(batches.len(), 1);
            let h = batches[0].header;
            assert_eq!(h.compression_codec(), codec_id(to));
            assert_eq!(
                (h.producer_id, h.producer_epoch, h.base_sequence),
                (42, 3, 10)
            );
            let mut a = input.clone();
            let mut b = out.clone();
            let before = RecordBatchDecoder::decode_all(&mut a).expect("decode input");
            let after = RecordBatchDecoder::decode_all(&mut b).expect("decode output");
            let strip = |s: &Vec<kafka_protocol::records::RecordSet>| {
                s.iter()
                    .flat_map(|s| {
                        s.records.iter().map(|r| {
                            (
                                r.offset,
                                r.timestamp,
                                r.key.clone(),
                                r.value.clone(),
                                r.sequence,
                            )
                        })
                    })
                    .collect::<Vec<_>>()
            };
            assert_eq!(strip(&before), strip(&after));
        }
    }

    #[test]
    fn same_codec_and_garbage_are_left_alone() {
        let input = records(Compression::Gzip);
        assert_eq!(
            recompress(input.clone(), Compression::Gzip).expect("same"),
            (input, None)
        );
        let garbage = Bytes::from_static(b"not a batch at all, not at all");
        assert_eq!(
            recompress(garbage.clone(), Compression::Zstd).expect("garbage"),
            (garbage, None)
        );
    }

    /// A batch whose header claims far more records than its bytes hold (CRC made valid) is
    /// refused with an error: the decoder must not reserve room for the claimed count first
    /// (2^31 records of ~100 bytes: an allocation the process dies of, found by reading the
    /// vendored decoder).
    #[test]
    fn a_batch_claiming_more_records_than_it_holds_is_an_error_not_an_abort() {
        let mut b = records(Compression::None).to_vec();
        b[23..27].copy_from_slice(&(i32::MAX - 1).to_be_bytes()); // last offset delta
        b[57..61].copy_from_slice(&i32::MAX.to_be_bytes()); // record count
        let crc = sluice_format::batch::compute_crc(&b);
        b[17..21].copy_from_slice(&crc.to_be_bytes());
        sluice_format::batch::validate_batch(&b).expect("a valid header");
        assert!(recompress(Bytes::from(b), Compression::Zstd).is_err());
    }
}

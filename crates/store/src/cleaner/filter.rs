//! What the cleaner keeps of one batch (Kafka's `LogCleaner.cleanInto` filter and
//! `MemoryRecords.filterTo`), as a pure function of the batch bytes, the offset map and the
//! time:
//!
//! - a record past the map's latest offset is kept (the map did not look that far);
//! - a record without a key is dropped (Kafka counts it as invalid on a compacted topic);
//! - a record is kept if its offset is at least the map's offset for its key, and it has a
//!   value or its batch's delete horizon has not passed (KIP-534: the first cleaning that
//!   keeps a tombstone sets the batch's delete horizon, `now + delete.retention.ms`, in its
//!   base timestamp with the delete-horizon attribute bit; later cleanings past the horizon
//!   drop the tombstones);
//! - control batches are kept as they are (transaction markers are never removed; the
//!   records of aborted transactions are dropped before this filter, in `clean.rs`);
//! - a batch left empty is dropped, unless it must stay (the last batch of an idempotent
//!   producer, for its sequence numbers; the last batch of a cleaned segment group, so the
//!   segment's end offset survives), then it stays as a header without records, as Kafka
//!   writes it;
//! - a batch that keeps every record and needs no horizon is copied byte for byte; otherwise
//!   it is rebuilt with its base offset, last offset delta, producer id, epoch and base
//!   sequence, partition leader epoch, codec, headers and record timestamps unchanged, and a
//!   new CRC.

use sluice_format::batch::{
    compute_crc, BatchHeader, BatchTimestampType, COMPRESSION_CODEC_MASK, CONTROL_FLAG_MASK,
    CRC_OFFSET, DELETE_HORIZON_FLAG_MASK, LOG_OVERHEAD, TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_FLAG_MASK,
};
use sluice_format::records::{parse_records, write_record, RecordRef};
use sluice_format::{codec, FormatError, HEADER_LEN};

use super::offset_map::OffsetMap;

/// The records of a batch, decompressed.
pub(crate) struct Decoded {
    pub section: Vec<u8>,
    pub records: Vec<RecordRef>,
}

/// Decode the records of a whole batch. An error means the cleaner cannot look inside it
/// (damaged, an unknown codec, or larger than `max_len` decompressed): it is kept as it is.
pub(crate) fn decode(
    batch: &[u8],
    h: &BatchHeader,
    max_len: usize,
) -> Result<Decoded, FormatError> {
    let body = batch
        .get(HEADER_LEN..h.total_len())
        .ok_or(FormatError::Truncated {
            needed: h.total_len(),
            available: batch.len(),
        })?;
    let section = codec::decompress(h.compression_codec(), body, max_len)?;
    let records = parse_records(&section, h.record_count)?;
    Ok(Decoded { section, records })
}

/// The delete horizon a batch carries (KIP-534), if any.
pub(crate) fn delete_horizon(h: &BatchHeader) -> Option<i64> {
    (h.attributes & DELETE_HORIZON_FLAG_MASK != 0).then_some(h.base_timestamp)
}

/// What becomes of a batch.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Copy the batch as it is.
    Keep,
    /// Leave it out.
    Drop,
    /// Write these bytes instead.
    Rewrite(Vec<u8>),
}

/// The inputs of one cleaning's decisions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rules {
    pub now_ms: i64,
    pub delete_retention_ms: i64,
}

/// Decide one batch (`h` is its header). `retain_empty`: the batch
/// stays, emptied if need be. `decoded` is its records (None when they could not be read).
pub(crate) fn filter_batch(
    h: &BatchHeader,
    decoded: Option<&Decoded>,
    map: &OffsetMap,
    rules: Rules,
    retain_empty: bool,
) -> Result<Decision, FormatError> {
    if h.is_control() {
        return Ok(Decision::Keep);
    }
    let Some(d) = decoded else {
        return Ok(Decision::Keep);
    };
    let horizon = delete_horizon(h);
    let retain_deletes = horizon.is_none_or(|t| rules.now_ms < t);
    let kept: Vec<&RecordRef> = d
        .records
        .iter()
        .filter(|r| {
            let offset = h.base_offset + i64::from(r.offset_delta);
            if offset > map.latest_offset() {
                return true;
            }
            match &r.key {
                None => false,
                Some(k) => {
                    offset >= map.get(&d.section[k.clone()])
                        && (r.value.is_some() || retain_deletes)
                }
            }
        })
        .collect();
    let tombstones = kept.iter().any(|r| r.value.is_none());
    let set_horizon = tombstones && horizon.is_none();
    if kept.len() == d.records.len() && !set_horizon {
        return Ok(Decision::Keep);
    }
    if kept.is_empty() {
        return Ok(if retain_empty {
            Decision::Rewrite(empty_batch(h))
        } else {
            Decision::Drop
        });
    }
    let horizon = if set_horizon {
        Some(rules.now_ms.saturating_add(rules.delete_retention_ms))
    } else {
        horizon
    };
    Ok(Decision::Rewrite(rebuild(h, d, &kept, horizon)?))
}

/// Kafka's `MemoryRecordsBuilder.writeEmptyHeader`: the batch's offsets and producer fields,
/// no records, its max timestamp as both timestamps, uncompressed.
pub(crate) fn empty_batch(h: &BatchHeader) -> Vec<u8> {
    let attributes =
        h.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_FLAG_MASK | CONTROL_FLAG_MASK);
    finish(
        BatchHeader {
            batch_length: (HEADER_LEN - LOG_OVERHEAD) as i32,
            crc: 0,
            attributes,
            base_timestamp: h.max_timestamp,
            record_count: 0,
            ..*h
        },
        &[],
    )
}

fn finish(h: BatchHeader, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(&h.encode());
    out.extend_from_slice(body);
    let crc = compute_crc(&out);
    out[CRC_OFFSET..CRC_OFFSET + 4].copy_from_slice(&crc.to_be_bytes());
    out
}

fn rebuild(
    h: &BatchHeader,
    d: &Decoded,
    kept: &[&RecordRef],
    horizon: Option<i64>,
) -> Result<Vec<u8>, FormatError> {
    let abs = |r: &RecordRef| h.base_timestamp.wrapping_add(r.timestamp_delta);
    let base_ts = horizon.unwrap_or_else(|| kept.first().map_or(h.max_timestamp, |r| abs(r)));
    let max_ts = match h.timestamp_type() {
        BatchTimestampType::LogAppendTime => h.max_timestamp,
        BatchTimestampType::CreateTime => kept.iter().map(|r| abs(r)).max().unwrap_or(-1),
    };
    let mut section = Vec::with_capacity(d.section.len());
    for r in kept {
        write_record(&mut section, &d.section, r, abs(r).wrapping_sub(base_ts));
    }
    let codec_id = (h.attributes & COMPRESSION_CODEC_MASK) as u8;
    let body = codec::compress(codec_id, &section)?;
    let mut attributes = h.attributes & !DELETE_HORIZON_FLAG_MASK;
    if horizon.is_some() {
        attributes |= DELETE_HORIZON_FLAG_MASK;
    }
    let batch_length = i32::try_from(HEADER_LEN - LOG_OVERHEAD + body.len()).map_err(|_| {
        FormatError::LengthTooLarge {
            length: body.len(),
            max: i32::MAX as usize,
        }
    })?;
    Ok(finish(
        BatchHeader {
            batch_length,
            crc: 0,
            attributes,
            base_timestamp: base_ts,
            max_timestamp: max_ts,
            // Kept records only; lastOffsetDelta stays (producer sequences depend on it).
            record_count: i32::try_from(kept.len()).unwrap_or(i32::MAX),
            ..*h
        },
        &body,
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use sluice_format::batch::validate_batch;
    use sluice_format::BatchBuilder;

    fn map_of(entries: &[(&[u8], i64)], latest: i64) -> OffsetMap {
        let mut m = OffsetMap::new(1 << 16, 0.9);
        for (k, o) in entries {
            m.put(k, *o);
        }
        m.update_latest_offset(latest);
        m
    }

    fn batch(base: i64) -> Vec<u8> {
        let mut b = BatchBuilder::new()
            .record(1000, Some(b"a"), Some(b"1"))
            .record(1001, Some(b"b"), None)
            .record(1002, Some(b"c"), Some(b"3"))
            .producer(7, 2, 40);
        b.base_offset = base;
        b.partition_leader_epoch = 5;
        b.build()
    }

    fn run(bytes: &[u8], map: &OffsetMap, now: i64, retain_empty: bool) -> Decision {
        let h = validate_batch(bytes).unwrap();
        let d = decode(bytes, &h, 1 << 20).ok();
        filter_batch(
            &h,
            d.as_ref(),
            map,
            Rules {
                now_ms: now,
                delete_retention_ms: 100,
            },
            retain_empty,
        )
        .unwrap()
    }

    #[test]
    fn superseded_records_go_and_tombstones_get_a_horizon() {
        let b = batch(10);
        // a is superseded at 20; b (a tombstone) and c are the latest.
        let m = map_of(&[(b"a", 20), (b"b", 11), (b"c", 12)], 20);
        let Decision::Rewrite(out) = run(&b, &m, 5000, false) else {
            panic!()
        };
        let h = validate_batch(&out).unwrap();
        assert_eq!(
            (h.base_offset, h.last_offset_delta, h.record_count),
            (10, 2, 2)
        );
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.base_sequence),
            (7, 2, 40)
        );
        assert_eq!(h.partition_leader_epoch, 5);
        assert_eq!(delete_horizon(&h), Some(5100));
        assert_eq!(h.max_timestamp, 1002);
        let d = decode(&out, &h, 1 << 20).unwrap();
        let got: Vec<(i64, i64, bool)> = d
            .records
            .iter()
            .map(|r| {
                (
                    10 + i64::from(r.offset_delta),
                    h.base_timestamp + r.timestamp_delta,
                    r.value.is_some(),
                )
            })
            .collect();
        assert_eq!(got, vec![(11, 1001, false), (12, 1002, true)]);
        // Before the horizon the tombstone stays (nothing changes: kept as it is) ...
        assert_eq!(run(&out, &m, 5099, false), Decision::Keep);
        // ... after it, it goes.
        let Decision::Rewrite(out2) = run(&out, &m, 5100, false) else {
            panic!()
        };
        let h2 = validate_batch(&out2).unwrap();
        assert_eq!(h2.record_count, 1);
        assert_eq!(delete_horizon(&h2), Some(5100));
    }

    #[test]
    fn whole_batches_kept_dropped_or_emptied() {
        let b = batch(10);
        // Nothing superseded, no tombstone... but b is a tombstone: needs a horizon.
        let m = map_of(&[], 12);
        assert!(matches!(run(&b, &m, 0, false), Decision::Rewrite(_)));
        // Past the map's range: every record stays, but the tombstone gets its horizon (as
        // Kafka's filterTo does); a batch without tombstones is kept as it is.
        let m = map_of(&[], 9);
        assert!(matches!(run(&b, &m, 0, false), Decision::Rewrite(_)));
        let plain = BatchBuilder::new()
            .record(1, Some(b"a"), Some(b"1"))
            .build();
        assert_eq!(run(&plain, &m, 0, false), Decision::Keep);
        // Everything superseded.
        let m = map_of(&[(b"a", 30), (b"b", 30), (b"c", 30)], 30);
        assert_eq!(run(&b, &m, 0, false), Decision::Drop);
        let Decision::Rewrite(e) = run(&b, &m, 0, true) else {
            panic!()
        };
        let h = validate_batch(&e).unwrap();
        assert_eq!(
            (h.record_count, h.last_offset_delta, h.base_sequence),
            (0, 2, 40)
        );
        assert_eq!(e.len(), HEADER_LEN);
    }

    #[test]
    fn compressed_batches_keep_their_codec() {
        for codec_id in [1u8, 2, 3, 4] {
            let plain = batch(0);
            let h = validate_batch(&plain).unwrap();
            let body = codec::compress(codec_id, &plain[HEADER_LEN..]).unwrap();
            let compressed = finish(
                BatchHeader {
                    batch_length: (HEADER_LEN - LOG_OVERHEAD + body.len()) as i32,
                    attributes: h.attributes | i16::from(codec_id),
                    ..h
                },
                &body,
            );
            let m = map_of(&[(b"a", 5)], 5);
            let Decision::Rewrite(out) = run(&compressed, &m, 0, false) else {
                panic!()
            };
            let h2 = validate_batch(&out).unwrap();
            assert_eq!(h2.compression_codec(), codec_id);
            assert_eq!(h2.record_count, 2);
        }
    }
}

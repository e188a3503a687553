#![allow(clippy::unwrap_used)]

use proptest::prelude::*;

use crate::batch::*;
use crate::index::*;
use crate::names::*;
use crate::records::record_timestamps;
use crate::text::*;
use crate::{BatchBuilder, FormatError};

fn sample(n: usize, ts: i64) -> Vec<u8> {
    let mut b = BatchBuilder::new().producer(7, 1, 3);
    for i in 0..n {
        b = b.record(
            ts + i as i64,
            Some(b"k"),
            Some(format!("value-{i}").as_bytes()),
        );
    }
    b.build()
}

#[test]
fn header_fields_roundtrip() {
    let bytes = sample(3, 1000);
    let h = validate_batch(&bytes).unwrap();
    assert_eq!(h.magic, 2);
    assert_eq!(h.record_count, 3);
    assert_eq!(h.last_offset_delta, 2);
    assert_eq!(h.base_timestamp, 1000);
    assert_eq!(h.max_timestamp, 1002);
    assert_eq!(h.producer_id, 7);
    assert_eq!(h.producer_epoch, 1);
    assert_eq!(h.base_sequence, 3);
    assert_eq!(h.last_sequence(), 5);
    assert_eq!(h.total_len(), bytes.len());
    assert_eq!(BatchHeader::decode(&h.encode()).unwrap(), h);
}

#[test]
fn known_crc_vector() {
    // CRC-32C check value of "123456789".
    assert_eq!(crc32c::crc32c(b"123456789"), 0xE306_9283);
}

#[test]
fn detects_crc_mismatch_and_bad_magic() {
    let mut bytes = sample(2, 5);
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    assert!(matches!(
        validate_batch(&bytes),
        Err(FormatError::CrcMismatch { .. })
    ));
    let mut bytes = sample(2, 5);
    bytes[MAGIC_OFFSET] = 1;
    assert_eq!(validate_batch(&bytes), Err(FormatError::BadMagic(1)));
    assert!(!FormatError::BadMagic(1).is_corrupt());
}

#[test]
fn parse_errors() {
    let one = sample(1, 1);
    let mut two = one.clone();
    two.extend_from_slice(&sample(2, 2));
    assert_eq!(parse_batches(&two, None).unwrap().len(), 2);
    assert!(matches!(
        parse_batches(&two[..two.len() - 1], None),
        Err(FormatError::Truncated { .. })
    ));
    assert!(matches!(
        parse_batches(&two[..5], None),
        Err(FormatError::Truncated { .. })
    ));
    assert!(matches!(
        parse_batches(&two, Some(one.len())),
        Err(FormatError::LengthTooLarge { .. })
    ));
    let mut small = one.clone();
    small[8..12].copy_from_slice(&10i32.to_be_bytes());
    assert_eq!(
        parse_batches(&small, None),
        Err(FormatError::LengthTooSmall(10))
    );
    let mut neg = one.clone();
    neg[RECORD_COUNT_OFFSET..RECORD_COUNT_OFFSET + 4].copy_from_slice(&(-1i32).to_be_bytes());
    assert_eq!(
        BatchHeader::parse(&neg).unwrap_err(),
        FormatError::InvalidRecordCount(-1)
    );
    let h = BatchHeader::decode(&sample(3, 0)).unwrap();
    assert!(check_client_counts(&h).is_ok());
    let bad = BatchHeader {
        record_count: 2,
        ..h
    };
    assert!(check_client_counts(&bad).is_err());
    assert!(parse_batches(&[], None).unwrap().is_empty());
}

#[test]
fn patching_keeps_crc_valid() {
    let mut bytes = sample(4, 100);
    set_base_offset(&mut bytes, 1234).unwrap();
    set_partition_leader_epoch(&mut bytes, 9).unwrap();
    let h = validate_batch(&bytes).unwrap();
    assert_eq!(h.base_offset, 1234);
    assert_eq!(h.last_offset(), 1237);
    assert_eq!(h.partition_leader_epoch, 9);
    set_max_timestamp(&mut bytes, BatchTimestampType::LogAppendTime, 99_999).unwrap();
    let h = validate_batch(&bytes).unwrap();
    assert_eq!(h.max_timestamp, 99_999);
    assert_eq!(h.timestamp_type(), BatchTimestampType::LogAppendTime);
    let ts = record_timestamps(&bytes).unwrap();
    assert_eq!(ts, vec![(0, 99_999), (1, 99_999), (2, 99_999), (3, 99_999)]);
    set_max_timestamp(&mut bytes, BatchTimestampType::CreateTime, 103).unwrap();
    assert_eq!(
        record_timestamps(&bytes).unwrap(),
        vec![(0, 100), (1, 101), (2, 102), (3, 103)]
    );
    assert!(set_base_offset(&mut [0u8; 10], 1).is_err());
}

#[test]
fn sequence_wraps() {
    assert_eq!(increment_sequence(i32::MAX, 1), 0);
    assert_eq!(increment_sequence(i32::MAX - 1, 3), 1);
    assert_eq!(increment_sequence(5, 0), 5);
}

#[test]
fn index_entries() {
    let e = OffsetIndexEntry {
        relative_offset: 5,
        position: 4096,
    };
    assert_eq!(e.encode(), [0, 0, 0, 5, 0, 0, 16, 0]);
    assert_eq!(OffsetIndexEntry::decode(&e.encode()), Some(e));
    let t = TimeIndexEntry {
        timestamp: 1_700_000_000_000,
        relative_offset: 7,
    };
    assert_eq!(TimeIndexEntry::decode(&t.encode()), Some(t));
    assert_eq!(OffsetIndexEntry::decode(&[0; 7]), None);
    let entries = vec![
        OffsetIndexEntry {
            relative_offset: 3,
            position: 100,
        },
        OffsetIndexEntry {
            relative_offset: 9,
            position: 900,
        },
        OffsetIndexEntry {
            relative_offset: 0,
            position: 0,
        },
        OffsetIndexEntry {
            relative_offset: 0,
            position: 0,
        },
    ];
    assert_eq!(valid_offset_index_prefix(&entries, 1000), 2);
    assert_eq!(valid_offset_index_prefix(&entries, 500), 1);
    assert_eq!(lookup_offset(&entries[..2], 2), None);
    assert_eq!(lookup_offset(&entries[..2], 3), Some(0));
    assert_eq!(lookup_offset(&entries[..2], 100), Some(1));
    let times = vec![
        TimeIndexEntry {
            timestamp: 10,
            relative_offset: 1,
        },
        TimeIndexEntry {
            timestamp: 20,
            relative_offset: 4,
        },
        TimeIndexEntry {
            timestamp: 0,
            relative_offset: 0,
        },
    ];
    assert_eq!(valid_time_index_prefix(&times), 2);
    assert_eq!(lookup_time(&times[..2], 15), Some(0));
    assert_eq!(lookup_time(&times[..2], 5), None);
}

#[test]
fn names() {
    assert_eq!(
        segment_file_name(0, SegmentFileKind::Log),
        "00000000000000000000.log"
    );
    assert_eq!(
        segment_file_name(42, SegmentFileKind::TimeIndex),
        "00000000000000000042.timeindex"
    );
    assert_eq!(
        parse_segment_file_name("00000000000000000042.index"),
        Some((42, SegmentFileKind::Index))
    );
    assert_eq!(
        parse_segment_file_name("00000000000000000042.snapshot"),
        Some((42, SegmentFileKind::Snapshot))
    );
    assert_eq!(
        parse_segment_file_name("00000000000000000042.log.deleted"),
        None
    );
    assert_eq!(parse_segment_file_name("abc.log"), None);
    assert_eq!(parse_segment_file_name(".log"), None);
    assert_eq!(parse_segment_file_name("99999999999999999999.log"), None);
}

#[test]
fn text_files() {
    // Kafka's Uuid.toString of these bytes.
    let id = [0u8; 16];
    assert_eq!(uuid_to_kafka_string(&id), "AAAAAAAAAAAAAAAAAAAAAA");
    let id: [u8; 16] = core::array::from_fn(|i| (i * 17) as u8);
    let s = uuid_to_kafka_string(&id);
    assert_eq!(s, "ABEiM0RVZneImaq7zN3u_w");
    assert_eq!(uuid_from_kafka_string(&s).unwrap(), id);
    assert!(uuid_from_kafka_string("short").is_err());
    // Non-canonical (unused bits set) and the standard alphabet's characters are refused,
    // as Kafka's URL-safe decoder refuses '+' and '/'.
    assert!(uuid_from_kafka_string("ABEiM0RVZneImaq7zN3u_x").is_err());
    assert!(uuid_from_kafka_string("ABEiM0RVZneImaq7zN3u/w").is_err());
    assert!(uuid_from_kafka_string("+BEiM0RVZneImaq7zN3u_w").is_err());
    let md = format_partition_metadata(&id);
    assert!(md.starts_with("version: 0\ntopic_id: "));
    assert_eq!(parse_partition_metadata(&md).unwrap(), id);
    let cp = format_offset_checkpoint(&[("t".into(), 0, 5), ("a-b".into(), 3, 100)]);
    assert_eq!(cp, "0\n2\nt 0 5\na-b 3 100\n");
    assert_eq!(parse_offset_checkpoint(&cp).unwrap().len(), 2);
    assert!(parse_offset_checkpoint("0\n3\nt 0 5\n").is_err());
    assert!(parse_offset_checkpoint("1\n0\n").is_err());
    let le = format_leader_epoch_checkpoint(&[(0, 0), (3, 50)]);
    assert_eq!(le, "0\n2\n0 0\n3 50\n");
    assert_eq!(
        parse_leader_epoch_checkpoint(&le).unwrap(),
        vec![(0, 0), (3, 50)]
    );
    let props = parse_properties("#\n#Thu Jan 01\ncluster.id=abc\\:d\nnode.id = 1\nversion=1\n");
    assert_eq!(props[0], ("cluster.id".to_string(), "abc:d".to_string()));
    assert_eq!(props[1], ("node.id".to_string(), "1".to_string()));
}

type Rec = (i64, Option<Vec<u8>>, Option<Vec<u8>>);

fn arb_records() -> impl Strategy<Value = Vec<Rec>> {
    prop::collection::vec(
        (
            0i64..1_000_000,
            prop::option::of(prop::collection::vec(any::<u8>(), 0..20)),
            prop::option::of(prop::collection::vec(any::<u8>(), 0..64)),
        ),
        0..10,
    )
}

proptest! {
    #[test]
    fn build_parse_roundtrip(recs in arb_records(), pid in -1i64..100, epoch in -1i16..5, seq in -1i32..i32::MAX, base in 0i64..i64::MAX / 2) {
        let mut b = BatchBuilder::new().producer(pid, epoch, seq);
        b.base_offset = base;
        for (ts, k, v) in &recs {
            b = b.record(*ts, k.as_deref(), v.as_deref());
        }
        let bytes = b.build();
        let parsed = parse_batches(&bytes, None).unwrap();
        prop_assert_eq!(parsed.len(), 1);
        let h = parsed[0].header;
        prop_assert_eq!(h.base_offset, base);
        prop_assert_eq!(h.record_count as usize, recs.len());
        prop_assert_eq!(h.producer_id, pid);
        prop_assert_eq!(h.base_sequence, seq);
        prop_assert_eq!(h.max_timestamp, recs.iter().map(|r| r.0).max().unwrap_or(-1));
        let ts = record_timestamps(&bytes).unwrap();
        prop_assert_eq!(ts.iter().map(|t| t.1).collect::<Vec<_>>(), recs.iter().map(|r| r.0).collect::<Vec<_>>());
    }

    #[test]
    fn patch_then_verify(n in 1usize..5, off in 0i64..i64::MAX / 2, epoch in any::<i32>(), ts in any::<i64>(), lat in any::<bool>()) {
        let mut bytes = sample(n, 10);
        set_base_offset(&mut bytes, off).unwrap();
        set_partition_leader_epoch(&mut bytes, epoch).unwrap();
        let tt = if lat { BatchTimestampType::LogAppendTime } else { BatchTimestampType::CreateTime };
        set_max_timestamp(&mut bytes, tt, ts).unwrap();
        let h = validate_batch(&bytes).unwrap();
        prop_assert_eq!(h.base_offset, off);
        prop_assert_eq!(h.partition_leader_epoch, epoch);
        prop_assert_eq!(h.max_timestamp, ts);
        prop_assert_eq!(h.timestamp_type(), tt);
    }

    #[test]
    fn garbage_never_panics(data in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = parse_batches(&data, None);
        let _ = parse_batches(&data, Some(100));
        let _ = BatchHeader::parse(&data);
        let _ = validate_batch(&data);
        let _ = record_timestamps(&data);
        let _ = decode_offset_index(&data);
        let _ = decode_time_index(&data);
        let s = String::from_utf8_lossy(&data);
        let _ = parse_offset_checkpoint(&s);
        let _ = parse_leader_epoch_checkpoint(&s);
        let _ = parse_partition_metadata(&s);
        let _ = parse_properties(&s);
        let _ = uuid_from_kafka_string(&s);
        let _ = parse_segment_file_name(&s);
        let mut d = data.clone();
        let _ = set_max_timestamp(&mut d, BatchTimestampType::LogAppendTime, 1);
    }

    #[test]
    fn mutated_batch_never_panics(flip in 0usize..200, val in any::<u8>()) {
        let mut bytes = sample(3, 42);
        let i = flip % bytes.len();
        bytes[i] = val;
        let _ = parse_batches(&bytes, None);
        let _ = record_timestamps(&bytes);
        // A change anywhere in the CRC-covered range is detected.
        if i >= ATTRIBUTES_OFFSET && val != sample(3, 42)[i] {
            prop_assert!(validate_batch(&bytes).is_err());
        }
    }

    #[test]
    fn uuid_roundtrip(id in any::<[u8; 16]>()) {
        prop_assert_eq!(uuid_from_kafka_string(&uuid_to_kafka_string(&id)).unwrap(), id);
    }

    #[test]
    fn index_roundtrip(r in any::<i32>(), p in any::<i32>(), t in any::<i64>()) {
        let e = OffsetIndexEntry { relative_offset: r, position: p };
        prop_assert_eq!(OffsetIndexEntry::decode(&e.encode()), Some(e));
        let te = TimeIndexEntry { timestamp: t, relative_offset: r };
        prop_assert_eq!(TimeIndexEntry::decode(&te.encode()), Some(te));
    }
}

#[test]
fn records_parse_and_rewrite_with_a_new_timestamp_delta() {
    use crate::builder::{BatchBuilder, SimpleRecord};
    use crate::records::{parse_records, write_record};
    let mut b = BatchBuilder::new().record(1000, Some(b"k1"), Some(b"v1"));
    b.records.push(SimpleRecord {
        timestamp: 1500,
        key: Some(b"k2".to_vec()),
        value: None,
        headers: vec![("h".into(), Some(b"x".to_vec())), ("n".into(), None)],
    });
    let batch = b.build();
    let section = &batch[crate::HEADER_LEN..];
    let recs = parse_records(section, 2).unwrap();
    assert_eq!(recs.len(), 2);
    assert_eq!(&section[recs[0].key.clone().unwrap()], b"k1");
    assert_eq!(recs[1].value, None);
    assert_eq!((recs[1].timestamp_delta, recs[1].offset_delta), (500, 1));
    // Rewritten with the same delta: byte-identical.
    let mut out = Vec::new();
    for r in &recs {
        write_record(&mut out, section, r, r.timestamp_delta);
    }
    assert_eq!(out, section);
    // A new delta parses back.
    let mut out = Vec::new();
    write_record(&mut out, section, &recs[1], -7);
    let again = parse_records(&out, 1).unwrap();
    assert_eq!(again[0].timestamp_delta, -7);
    assert_eq!(
        &out[again[0].headers.clone()],
        &section[recs[1].headers.clone()]
    );
    // Damaged sections are errors, not panics.
    assert!(parse_records(&section[..section.len() - 1], 2).is_err());
    assert!(parse_records(section, 3).is_err());
    assert!(parse_records(section, 1).is_err());
}

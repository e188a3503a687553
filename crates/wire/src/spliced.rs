//! Frames whose record data is not copied into them: Fetch responses (the records stay in
//! segment files) and Produce requests (the batches stay in the producer's buffers).
//!
//! A Fetch response is mostly record batches that already sit, byte for byte, in segment
//! files. Encoding them through `kafka-protocol` would copy every byte into the response
//! buffer; instead the response is encoded with a short, unguessable marker in place of each
//! partition's records, and the encoded frame is cut at the markers into [`FramePart`]s: the
//! bytes around the records (with each records length prefix rewritten for the real length)
//! and references to the regions the caller sends from elsewhere (`sendfile`, or a read of
//! the file straight into the socket write). The frame size prefix counts the real lengths.
//!
//! Invariant: concatenating the parts, with each region's bytes in place of its reference,
//! gives exactly the frame [`crate::encode_response`] would give for the same response with
//! the records inline (tested below against `kafka-protocol`'s encoder).

use std::sync::OnceLock;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, FetchResponse, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::Encodable;

use crate::{WireError, FRAME_PREFIX_BYTES};

/// First Fetch version with flexible encoding (compact bytes for records).
const FLEXIBLE_FROM: i16 = 12;
/// First Produce version with flexible encoding.
const PRODUCE_FLEXIBLE_FROM: i16 = 9;
/// Marker length: 12 random bytes, then the region's index.
const MARKER_LEN: usize = 16;

/// One piece of an encoded frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FramePart {
    /// Bytes to write as they are.
    Inline(Bytes),
    /// The records of region `i` (as passed to [`encode_fetch_response`]) go here.
    Region(usize),
}

/// 12 bytes chosen at random once per process, so no client-chosen string (a topic name) can
/// forge a marker.
fn nonce() -> &'static [u8; 12] {
    static NONCE: OnceLock<[u8; 12]> = OnceLock::new();
    NONCE.get_or_init(|| {
        let mut n = [0u8; 12];
        n.copy_from_slice(&random_bytes()[..12]);
        n
    })
}

/// 16 random bytes from the standard library's randomly keyed hasher (no extra dependency).
fn random_bytes() -> [u8; 16] {
    use std::hash::{BuildHasher, Hasher};
    let mut out = [0u8; 16];
    for (i, chunk) in out.chunks_mut(8).enumerate() {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_usize(i);
        chunk.copy_from_slice(&h.finish().to_be_bytes());
    }
    out
}

fn marker(i: usize) -> [u8; MARKER_LEN] {
    let mut m = [0u8; MARKER_LEN];
    m[..12].copy_from_slice(nonce());
    m[12..].copy_from_slice(&(i as u32).to_be_bytes());
    m
}

fn uvarint_len(mut v: u32) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

fn put_uvarint(buf: &mut BytesMut, mut v: u32) {
    while v >= 0x80 {
        buf.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    buf.put_u8(v as u8);
}

/// Encode a Fetch response frame in which the records of some partitions are regions sent
/// from elsewhere. `regions` lists, for each region, the partition it belongs to (its ordinal
/// over `body.responses[*].partitions[*]` in order) and its length in bytes; ordinals must be
/// strictly increasing. Those partitions' `records` are overwritten. The returned parts start
/// with the frame's size prefix.
pub fn encode_fetch_response(
    version: i16,
    correlation_id: i32,
    body: &mut FetchResponse,
    regions: &[(usize, u32)],
) -> Result<Vec<FramePart>, WireError> {
    let malformed = |reason: String| WireError::Malformed {
        api: ApiKey::Fetch,
        version,
        correlation_id,
        reason,
    };
    // Put a marker in each region's partition.
    let mut next = regions.iter().enumerate().peekable();
    let mut ordinal = 0usize;
    for t in &mut body.responses {
        for p in &mut t.partitions {
            if let Some(&(i, &(at, _))) = next.peek() {
                if at == ordinal {
                    p.records = Some(region_marker(i));
                    next.next();
                }
            }
            ordinal += 1;
        }
    }
    if next.peek().is_some() {
        return Err(malformed(
            "fetch region refers to a partition not in the response".into(),
        ));
    }

    let mut buf = BytesMut::with_capacity(256 + 32 * ordinal);
    buf.put_i32(0);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, ApiKey::Fetch.response_header_version(version))
        .map_err(|e| malformed(e.to_string()))?;
    body.encode(&mut buf, version)
        .map_err(|e| malformed(e.to_string()))?;
    let lens: Vec<u32> = regions.iter().map(|&(_, len)| len).collect();
    cut_at_markers(buf, version >= FLEXIBLE_FROM, &lens).map_err(malformed)
}

/// The placeholder to put in the `records` field of the `i`th region before encoding, for
/// [`cut_at_markers`].
pub fn region_marker(i: usize) -> Bytes {
    Bytes::copy_from_slice(&marker(i))
}

/// Encode a Produce request frame whose record batches are not copied into the frame: the
/// caller has put [`region_marker`]`(i)` in the `records` of the `i`th partition (in
/// encoding order) and passes the real lengths in `lens`. Region `i` of the returned parts
/// is the `i`th batch. Produce is flexible (compact records) from v9.
pub fn encode_produce_request<B: Encodable>(
    header: &RequestHeader,
    version: i16,
    body: &B,
    lens: &[u32],
) -> Result<Vec<FramePart>, String> {
    let mut buf = BytesMut::with_capacity(256 + 64 * lens.len());
    buf.put_i32(0);
    header
        .encode(&mut buf, ApiKey::Produce.request_header_version(version))
        .map_err(|e| e.to_string())?;
    body.encode(&mut buf, version).map_err(|e| e.to_string())?;
    cut_at_markers(buf, version >= PRODUCE_FLEXIBLE_FROM, lens)
}

/// Cut an encoded frame (starting with its 4-byte size prefix, any value) at the markers of
/// regions `0..lens.len()`, which must appear in that order, each as a records field (nullable
/// bytes: i32 length, or compact: unsigned varint length + 1, when `flexible`). Each marker's
/// length prefix is rewritten for the region's real length, and the size prefix for the real
/// frame size.
pub fn cut_at_markers(
    mut buf: BytesMut,
    flexible: bool,
    lens: &[u32],
) -> Result<Vec<FramePart>, String> {
    let old_prefix = if flexible {
        uvarint_len(MARKER_LEN as u32 + 1)
    } else {
        4
    };
    let mut frame_len = (buf.len() - FRAME_PREFIX_BYTES) as u64;
    let mut parts = Vec::with_capacity(2 * lens.len() + 1);
    let mut cuts = Vec::with_capacity(lens.len());
    let mut from = FRAME_PREFIX_BYTES;
    for (i, &len) in lens.iter().enumerate() {
        let m = marker(i);
        let at = buf[from..]
            .windows(MARKER_LEN)
            .position(|w| w == m)
            .map(|p| p + from)
            .ok_or("region marker not found")?;
        let expected_prefix: &[u8] = if flexible {
            &[MARKER_LEN as u8 + 1]
        } else {
            &[0, 0, 0, MARKER_LEN as u8]
        };
        if at < from + old_prefix || &buf[at - old_prefix..at] != expected_prefix {
            return Err("region marker without its length prefix".into());
        }
        let new_prefix = if flexible {
            uvarint_len(len.checked_add(1).ok_or("region too large")?)
        } else {
            4
        };
        frame_len = frame_len - (old_prefix + MARKER_LEN) as u64 + (new_prefix as u64 + len as u64);
        cuts.push((at - old_prefix, at + MARKER_LEN, len));
        from = at + MARKER_LEN;
    }
    if frame_len > i32::MAX as u64 {
        return Err("frame larger than 2 GiB".into());
    }
    buf[..FRAME_PREFIX_BYTES].copy_from_slice(&(frame_len as i32).to_be_bytes());

    // Cut the buffer: [.. prefix) new-prefix Region [marker end ..).
    let mut consumed = 0usize;
    for (i, (prefix_at, resume_at, len)) in cuts.into_iter().enumerate() {
        let mut head = buf.split_to(prefix_at - consumed);
        let _marker = buf.split_to(resume_at - prefix_at);
        consumed = resume_at;
        if flexible {
            put_uvarint(&mut head, len + 1);
        } else {
            head.put_i32(len as i32);
        }
        parts.push(FramePart::Inline(head.freeze()));
        parts.push(FramePart::Region(i));
    }
    parts.push(FramePart::Inline(buf.freeze()));
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::{ResponseKind, TopicName};
    use kafka_protocol::protocol::StrBytes;

    /// A response with `topics` topics of `parts` partitions; partition (t, p) gets records of
    /// length `len(t, p)` (None: no records field content).
    fn response(
        version: i16,
        topics: usize,
        parts: usize,
        len: impl Fn(usize, usize) -> Option<usize>,
    ) -> FetchResponse {
        let mut r = FetchResponse::default();
        if version >= 7 {
            r.session_id = 7;
        }
        for t in 0..topics {
            let mut topic = FetchableTopicResponse::default();
            if version >= 13 {
                topic.topic_id = uuid::Uuid::from_u128(t as u128 + 1);
            } else {
                topic.topic = TopicName(StrBytes::from_string(format!("topic-{t}")));
            }
            for p in 0..parts {
                let records = len(t, p).map(|n| {
                    Bytes::from(
                        (0..n)
                            .map(|i| (i * 31 + t * 7 + p) as u8)
                            .collect::<Vec<u8>>(),
                    )
                });
                topic.partitions.push(
                    PartitionData::default()
                        .with_partition_index(p as i32)
                        .with_high_watermark(1000 + p as i64)
                        .with_records(records),
                );
            }
            r.responses.push(topic);
        }
        r
    }

    fn check(
        version: i16,
        topics: usize,
        parts: usize,
        len: impl Fn(usize, usize) -> Option<usize> + Copy,
    ) {
        let inline = response(version, topics, parts, len);
        let expected = crate::encode_response(
            ApiKey::Fetch,
            version,
            42,
            &ResponseKind::Fetch(inline.clone()),
        )
        .unwrap();
        // Every partition with records becomes a region.
        let mut regions = Vec::new();
        let mut contents = Vec::new();
        let mut ordinal = 0;
        for t in &inline.responses {
            for p in &t.partitions {
                if let Some(r) = &p.records {
                    if !r.is_empty() {
                        regions.push((ordinal, r.len() as u32));
                        contents.push(r.clone());
                    }
                }
                ordinal += 1;
            }
        }
        let mut body = inline.clone();
        for t in &mut body.responses {
            for p in &mut t.partitions {
                if p.records.as_ref().is_some_and(|r| !r.is_empty()) {
                    p.records = None;
                }
            }
        }
        let parts = encode_fetch_response(version, 42, &mut body, &regions).unwrap();
        let mut joined = Vec::new();
        for part in parts {
            match part {
                FramePart::Inline(b) => joined.extend_from_slice(&b),
                FramePart::Region(i) => joined.extend_from_slice(&contents[i]),
            }
        }
        assert_eq!(joined, expected.to_vec(), "version {version}");
    }

    #[test]
    fn spliced_frame_equals_the_inline_encoding_for_every_version() {
        for version in 4..=18 {
            check(version, 1, 1, |_, _| Some(10));
            check(version, 3, 5, |t, p| Some((t * 5 + p) * 37 % 300));
            check(version, 2, 4, |t, p| {
                if (t + p) % 2 == 0 {
                    Some(0)
                } else {
                    Some(200)
                }
            });
            // Lengths whose varint needs 1, 2, 3 bytes.
            check(version, 1, 3, |_, p| Some([126, 127, 20_000][p]));
            check(version, 2, 2, |_, _| None);
            check(version, 0, 0, |_, _| None);
        }
    }

    #[test]
    fn a_region_outside_the_response_is_refused() {
        let mut body = response(12, 1, 2, |_, _| None);
        assert!(encode_fetch_response(12, 1, &mut body, &[(5, 10)]).is_err());
    }

    #[test]
    fn spliced_produce_request_equals_the_inline_encoding() {
        use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
        use kafka_protocol::messages::ProduceRequest;
        for version in 3..=12 {
            for lens in [vec![10usize], vec![126, 127, 20_000], vec![0, 300], vec![]] {
                let batches: Vec<Bytes> = lens
                    .iter()
                    .enumerate()
                    .map(|(i, n)| {
                        Bytes::from((0..*n).map(|j| (j * 7 + i) as u8).collect::<Vec<u8>>())
                    })
                    .collect();
                let build = |records: &dyn Fn(usize) -> Bytes| {
                    let mut t = TopicProduceData::default();
                    t.name = TopicName(StrBytes::from_static_str("topic"));
                    for i in 0..batches.len() {
                        let mut d = PartitionProduceData::default();
                        d.index = i as i32;
                        d.records = Some(records(i));
                        t.partition_data.push(d);
                    }
                    let mut r = ProduceRequest::default();
                    r.acks = -1;
                    r.timeout_ms = 30_000;
                    r.topic_data = vec![t];
                    r
                };
                let header = RequestHeader::default()
                    .with_request_api_key(ApiKey::Produce as i16)
                    .with_request_api_version(version)
                    .with_correlation_id(9)
                    .with_client_id(Some(StrBytes::from_static_str("test")));
                let hv = ApiKey::Produce.request_header_version(version);
                let inline = build(&|i| batches[i].clone());
                let mut expected = BytesMut::new();
                let size = header.compute_size(hv).unwrap() + inline.compute_size(version).unwrap();
                expected.put_i32(size as i32);
                header.encode(&mut expected, hv).unwrap();
                inline.encode(&mut expected, version).unwrap();

                let marked = build(&region_marker);
                let lens32: Vec<u32> = lens.iter().map(|n| *n as u32).collect();
                let parts = encode_produce_request(&header, version, &marked, &lens32).unwrap();
                let mut joined = Vec::new();
                for part in parts {
                    match part {
                        FramePart::Inline(b) => joined.extend_from_slice(&b),
                        FramePart::Region(i) => joined.extend_from_slice(&batches[i]),
                    }
                }
                assert_eq!(joined, expected.to_vec(), "version {version} lens {lens:?}");
            }
        }
    }
}

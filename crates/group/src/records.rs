//! The records of `__consumer_offsets`, in Apache Kafka's own key/value schemas so that
//! `kafka-dump-log --offsets-decoder` reads them:
//!
//! | key version | key fields | value |
//! |---|---|---|
//! | 1 (`OffsetCommitKey`) | group: string, topic: string, partition: int32 | `OffsetCommitValue` v3: offset int64, leaderEpoch int32, metadata string, commitTimestamp int64 |
//! | 2 (`GroupMetadataKey`) | group: string | `GroupMetadataValue` v3 (below) |
//!
//! `GroupMetadataValue` v3: protocolType string, generation int32, protocol nullable string,
//! leader nullable string, currentStateTimestamp int64, members array (int32 count) of
//! memberId string, groupInstanceId nullable string, clientId string, clientHost string,
//! rebalanceTimeout int32, sessionTimeout int32, subscription bytes, assignment bytes.
//!
//! Strings are int16-length-prefixed UTF-8 (-1 = null), bytes int32-length-prefixed. A null
//! value is a tombstone. Keys of other versions (Kafka's KIP-848 records, 3..) are skipped on
//! load: Sluice does not persist KIP-848 membership (members rejoin; offsets persist).

use bytes::{BufMut, Bytes, BytesMut};
use sluice_format::records::read_varint;
use sluice_format::{BatchHeader, FormatError, HEADER_LEN};

pub(crate) const OFFSET_COMMIT_KEY_VERSION: i16 = 1;
pub(crate) const GROUP_METADATA_KEY_VERSION: i16 = 2;
const OFFSET_COMMIT_VALUE_VERSION: i16 = 3;
const GROUP_METADATA_VALUE_VERSION: i16 = 3;

/// One record to append to `__consumer_offsets` (value `None` = tombstone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub key: Bytes,
    pub value: Option<Bytes>,
}

/// A committed offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedOffset {
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: String,
    pub commit_timestamp_ms: i64,
}

/// A classic group's persisted member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberRecord {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub session_timeout_ms: i32,
    pub subscription: Bytes,
    pub assignment: Bytes,
}

/// A classic group's persisted metadata.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupRecord {
    pub protocol_type: String,
    pub generation: i32,
    pub protocol: Option<String>,
    pub leader: Option<String>,
    pub state_timestamp_ms: i64,
    pub members: Vec<MemberRecord>,
}

/// A decoded record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decoded {
    Offset {
        group: String,
        topic: String,
        partition: i32,
        value: Option<CommittedOffset>,
    },
    Group {
        group: String,
        value: Option<GroupRecord>,
    },
    /// A key version Sluice does not interpret (e.g. Kafka's KIP-848 records).
    Other,
}

fn put_str(b: &mut BytesMut, s: &str) {
    let bytes = s.as_bytes();
    let len = bytes.len().min(i16::MAX as usize);
    b.put_i16(len as i16);
    b.put_slice(&bytes[..len]);
}

fn put_nullable_str(b: &mut BytesMut, s: Option<&str>) {
    match s {
        Some(s) => put_str(b, s),
        None => b.put_i16(-1),
    }
}

fn put_bytes(b: &mut BytesMut, v: &[u8]) {
    b.put_i32(v.len() as i32);
    b.put_slice(v);
}

pub(crate) fn offset_key(group: &str, topic: &str, partition: i32) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(OFFSET_COMMIT_KEY_VERSION);
    put_str(&mut b, group);
    put_str(&mut b, topic);
    b.put_i32(partition);
    b.freeze()
}

pub(crate) fn offset_value(v: &CommittedOffset) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(OFFSET_COMMIT_VALUE_VERSION);
    b.put_i64(v.offset);
    b.put_i32(v.leader_epoch);
    put_str(&mut b, &v.metadata);
    b.put_i64(v.commit_timestamp_ms);
    b.freeze()
}

pub(crate) fn group_key(group: &str) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(GROUP_METADATA_KEY_VERSION);
    put_str(&mut b, group);
    b.freeze()
}

pub(crate) fn group_value(g: &GroupRecord) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(GROUP_METADATA_VALUE_VERSION);
    put_str(&mut b, &g.protocol_type);
    b.put_i32(g.generation);
    put_nullable_str(&mut b, g.protocol.as_deref());
    put_nullable_str(&mut b, g.leader.as_deref());
    b.put_i64(g.state_timestamp_ms);
    b.put_i32(g.members.len() as i32);
    for m in &g.members {
        put_str(&mut b, &m.member_id);
        put_nullable_str(&mut b, m.instance_id.as_deref());
        put_str(&mut b, &m.client_id);
        put_str(&mut b, &m.client_host);
        b.put_i32(m.rebalance_timeout_ms);
        b.put_i32(m.session_timeout_ms);
        put_bytes(&mut b, &m.subscription);
        put_bytes(&mut b, &m.assignment);
    }
    b.freeze()
}

/// Why a record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed __consumer_offsets record: {0}")]
pub struct DecodeError(pub String);

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|e| *e <= self.buf.len())
            .ok_or_else(|| DecodeError("truncated".into()))?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    fn i16(&mut self) -> Result<i16, DecodeError> {
        let s = self.take(2)?;
        Ok(i16::from_be_bytes([s[0], s[1]]))
    }
    fn i32(&mut self) -> Result<i32, DecodeError> {
        let s = self.take(4)?;
        Ok(i32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn i64(&mut self) -> Result<i64, DecodeError> {
        let s = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Ok(i64::from_be_bytes(a))
    }
    fn nullable_str(&mut self) -> Result<Option<String>, DecodeError> {
        let len = self.i16()?;
        if len < 0 {
            return Ok(None);
        }
        let s = self.take(len as usize)?;
        String::from_utf8(s.to_vec())
            .map(Some)
            .map_err(|_| DecodeError("string is not UTF-8".into()))
    }
    fn str(&mut self) -> Result<String, DecodeError> {
        self.nullable_str()?
            .ok_or_else(|| DecodeError("null string".into()))
    }
    fn bytes(&mut self) -> Result<Bytes, DecodeError> {
        let len = self.i32()?;
        if len < 0 {
            return Ok(Bytes::new());
        }
        Ok(Bytes::copy_from_slice(self.take(len as usize)?))
    }
}

/// Decode one record of `__consumer_offsets`.
pub fn decode(key: &[u8], value: Option<&[u8]>) -> Result<Decoded, DecodeError> {
    let mut k = Reader { buf: key, pos: 0 };
    let version = k.i16()?;
    match version {
        0 | 1 => {
            let group = k.str()?;
            let topic = k.str()?;
            let partition = k.i32()?;
            let value = match value {
                None => None,
                Some(v) => Some(decode_offset_value(v)?),
            };
            Ok(Decoded::Offset {
                group,
                topic,
                partition,
                value,
            })
        }
        2 => {
            let group = k.str()?;
            let value = match value {
                None => None,
                Some(v) => Some(decode_group_value(v)?),
            };
            Ok(Decoded::Group { group, value })
        }
        _ => Ok(Decoded::Other),
    }
}

fn decode_offset_value(v: &[u8]) -> Result<CommittedOffset, DecodeError> {
    let mut r = Reader { buf: v, pos: 0 };
    let version = r.i16()?;
    let offset = r.i64()?;
    let leader_epoch = if version >= 3 { r.i32()? } else { -1 };
    let metadata = r.str()?;
    let commit_timestamp_ms = r.i64()?;
    Ok(CommittedOffset {
        offset,
        leader_epoch,
        metadata,
        commit_timestamp_ms,
    })
}

fn decode_group_value(v: &[u8]) -> Result<GroupRecord, DecodeError> {
    let mut r = Reader { buf: v, pos: 0 };
    let version = r.i16()?;
    if !(0..=3).contains(&version) {
        return Err(DecodeError(format!(
            "group metadata value version {version} is not supported"
        )));
    }
    let protocol_type = r.str()?;
    let generation = r.i32()?;
    let protocol = r.nullable_str()?;
    let leader = r.nullable_str()?;
    let state_timestamp_ms = if version >= 2 { r.i64()? } else { -1 };
    let n = r.i32()?;
    let mut members = Vec::new();
    for _ in 0..n.max(0) {
        let member_id = r.str()?;
        let instance_id = if version >= 3 {
            r.nullable_str()?
        } else {
            None
        };
        let client_id = r.str()?;
        let client_host = r.str()?;
        let rebalance_timeout_ms = if version >= 1 { r.i32()? } else { 0 };
        let session_timeout_ms = r.i32()?;
        let subscription = r.bytes()?;
        let assignment = r.bytes()?;
        members.push(MemberRecord {
            member_id,
            instance_id,
            client_id,
            client_host,
            rebalance_timeout_ms,
            session_timeout_ms,
            subscription,
            assignment,
        });
    }
    Ok(GroupRecord {
        protocol_type,
        generation,
        protocol,
        leader,
        state_timestamp_ms,
        members,
    })
}

/// A record's (key, value).
pub type KeyValue = (Option<Bytes>, Option<Bytes>);

/// The (key, value) of each record of an uncompressed v2 batch (`batch` is the whole batch).
pub fn batch_records(batch: &[u8]) -> Result<Vec<KeyValue>, FormatError> {
    let h = BatchHeader::parse(batch)?;
    if h.compression_codec() != 0 {
        return Err(FormatError::Record("batch is compressed".into()));
    }
    let end = h.total_len().min(batch.len());
    let mut pos = HEADER_LEN;
    let mut out = Vec::new();
    let bad = |m: &str| FormatError::Record(m.to_string());
    for _ in 0..h.record_count {
        let len = usize::try_from(read_varint(batch, &mut pos)?)
            .map_err(|_| bad("negative record length"))?;
        let rec_end = pos
            .checked_add(len)
            .filter(|e| *e <= end)
            .ok_or_else(|| bad("record past batch end"))?;
        let rec = &batch[..rec_end];
        let mut p = pos + 1; // attributes
        sluice_format::records::read_varlong(rec, &mut p)?; // timestamp delta
        read_varint(rec, &mut p)?; // offset delta
        let field = |p: &mut usize| -> Result<Option<Bytes>, FormatError> {
            let n = read_varint(rec, p)?;
            if n < 0 {
                return Ok(None);
            }
            let e = p
                .checked_add(n as usize)
                .filter(|e| *e <= rec_end)
                .ok_or_else(|| bad("field past record end"))?;
            let v = Bytes::copy_from_slice(&rec[*p..e]);
            *p = e;
            Ok(Some(v))
        };
        let key = field(&mut p)?;
        let value = field(&mut p)?;
        out.push((key, value));
        pos = rec_end;
    }
    Ok(out)
}

/// Encode records as one uncompressed batch (offsets assigned by the log on append).
pub fn encode_batch(records: &[Record], now_ms: i64) -> Vec<u8> {
    let mut b = sluice_format::BatchBuilder::new();
    for r in records {
        b = b.record(now_ms, Some(&r.key), r.value.as_deref());
    }
    b.build()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn offset_round_trip_through_a_batch() {
        let v = CommittedOffset {
            offset: 42,
            leader_epoch: 3,
            metadata: "m".into(),
            commit_timestamp_ms: 1000,
        };
        let recs = vec![
            Record {
                key: offset_key("g", "t", 7),
                value: Some(offset_value(&v)),
            },
            Record {
                key: group_key("g"),
                value: None,
            },
        ];
        let batch = encode_batch(&recs, 5);
        let parsed = batch_records(&batch).unwrap();
        assert_eq!(parsed.len(), 2);
        let (k, val) = &parsed[0];
        assert_eq!(
            decode(k.as_ref().unwrap(), val.as_deref()).unwrap(),
            Decoded::Offset {
                group: "g".into(),
                topic: "t".into(),
                partition: 7,
                value: Some(v)
            }
        );
        let (k, val) = &parsed[1];
        assert_eq!(
            decode(k.as_ref().unwrap(), val.as_deref()).unwrap(),
            Decoded::Group {
                group: "g".into(),
                value: None
            }
        );
    }

    #[test]
    fn group_value_round_trip() {
        let g = GroupRecord {
            protocol_type: "consumer".into(),
            generation: 4,
            protocol: Some("range".into()),
            leader: Some("a".into()),
            state_timestamp_ms: 9,
            members: vec![MemberRecord {
                member_id: "a".into(),
                instance_id: Some("i".into()),
                client_id: "c".into(),
                client_host: "/h".into(),
                rebalance_timeout_ms: 1,
                session_timeout_ms: 2,
                subscription: Bytes::from_static(b"s"),
                assignment: Bytes::from_static(b"x"),
            }],
        };
        let d = decode(&group_key("g"), Some(&group_value(&g))).unwrap();
        assert_eq!(
            d,
            Decoded::Group {
                group: "g".into(),
                value: Some(g)
            }
        );
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode(&[0, 1, 0], None).is_err());
        assert!(decode(&[0, 1, 0, 1, b'g', 0, 1], Some(&[0, 3, 1])).is_err());
        assert!(batch_records(&[1, 2, 3]).is_err());
        assert_eq!(decode(&[0, 9], None).unwrap(), Decoded::Other);
    }
}

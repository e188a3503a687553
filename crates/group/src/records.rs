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
//! value is a tombstone.
//!
//! KIP-848 consumer groups use Kafka's records of the new coordinator. Keys are not flexible
//! (int16 version, then int16-length strings); values are flexible version 0 (int16 version,
//! compact strings and arrays with unsigned-varint length + 1, 0 = null, 16-byte uuids, an
//! empty tagged-field section after every struct):
//!
//! | key version | key fields | value v0 fields |
//! |---|---|---|
//! | 3 `ConsumerGroupMetadata` | group | epoch int32 |
//! | 4 `ConsumerGroupPartitionMetadata` | group | topics [id uuid, name string, partitions int32, partitionMetadata [] (empty)] |
//! | 5 `ConsumerGroupMemberMetadata` | group, member | instanceId?, rackId?, clientId, clientHost, subscribedTopicNames []string, subscribedTopicRegex?, rebalanceTimeoutMs int32, serverAssignor?; tagged field 0 `ClassicMemberMetadata` (a member speaking the classic protocol): sessionTimeoutMs int32, supportedProtocols [name string, metadata bytes] |
//! | 6 `ConsumerGroupTargetAssignmentMetadata` | group | assignmentEpoch int32 |
//! | 7 `ConsumerGroupTargetAssignmentMember` | group, member | topicPartitions [id uuid, partitions []int32] |
//! | 8 `ConsumerGroupCurrentMemberAssignment` | group, member | memberEpoch int32, previousMemberEpoch int32, state int8, assigned and pendingRevocation [id uuid, partitions []int32] |
//!
//! A nullable struct in a tagged field is written as tag, size, a presence byte 1, then the
//! struct (Kafka's generated code does the same). Unknown tagged fields are skipped on decode; other key versions decode as
//! [`Decoded::Other`] and are ignored.

use bytes::{BufMut, Bytes, BytesMut};
use sluice_format::fields::{
    put_compact_str, put_nullable_str, put_str, put_uvarint, FieldError, FieldReader,
};
use sluice_format::records::read_varint;
use sluice_format::{BatchHeader, FormatError, HEADER_LEN};

pub(crate) const OFFSET_COMMIT_KEY_VERSION: i16 = 1;
pub(crate) const GROUP_METADATA_KEY_VERSION: i16 = 2;
const OFFSET_COMMIT_VALUE_VERSION: i16 = 3;
const GROUP_METADATA_VALUE_VERSION: i16 = 3;
pub(crate) const CONSUMER_GROUP_KEY_VERSION: i16 = 3;
pub(crate) const CONSUMER_PARTITION_META_KEY_VERSION: i16 = 4;
pub(crate) const CONSUMER_MEMBER_KEY_VERSION: i16 = 5;
pub(crate) const CONSUMER_TARGET_META_KEY_VERSION: i16 = 6;
pub(crate) const CONSUMER_TARGET_MEMBER_KEY_VERSION: i16 = 7;
pub(crate) const CONSUMER_CURRENT_KEY_VERSION: i16 = 8;

/// Partitions by topic id.
pub type TopicPartitions = Vec<(uuid::Uuid, Vec<i32>)>;
/// A subscribed topic's (id, name, partition count).
pub type TopicMetadata = (uuid::Uuid, String, i32);

/// A KIP-848 member's metadata (key 5).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerMemberRecord {
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    /// The member's KIP-848 regular expression subscription, if any.
    pub subscribed_topic_regex: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub server_assignor: Option<String>,
    /// Set for a member that speaks the classic protocol (tagged field 0).
    pub classic: Option<ClassicMemberMetadata>,
}

/// A classic-protocol member of a consumer group: what its JoinGroup said.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassicMemberMetadata {
    pub session_timeout_ms: i32,
    /// (name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
}

/// A KIP-848 member's current assignment (key 8).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsumerAssignmentRecord {
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    /// Kafka's MemberState: 1 stable, 2 unrevoked partitions, 3 unreleased partitions.
    pub state: i8,
    pub assigned: TopicPartitions,
    pub revoking: TopicPartitions,
}

/// The value of a KIP-848 record (`None` = tombstone).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ConsumerValue {
    /// Key 3: the group epoch.
    Group(Option<i32>),
    /// Key 4: (topic id, name, partition count) of subscribed topics.
    PartitionMetadata(Option<Vec<TopicMetadata>>),
    /// Key 5.
    Member(String, Option<ConsumerMemberRecord>),
    /// Key 6: the assignment epoch.
    TargetMetadata(Option<i32>),
    /// Key 7: a member's target assignment.
    TargetMember(String, Option<TopicPartitions>),
    /// Key 8.
    Current(String, Option<ConsumerAssignmentRecord>),
}

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
    /// A KIP-848 consumer group record.
    Consumer { group: String, value: ConsumerValue },
    /// A key version Sluice does not interpret (e.g. share or streams groups).
    Other,
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

fn put_topic_partitions(b: &mut BytesMut, tps: &[(uuid::Uuid, Vec<i32>)]) {
    put_uvarint(b, tps.len() as u64 + 1);
    for (id, ps) in tps {
        b.put_slice(id.as_bytes());
        put_uvarint(b, ps.len() as u64 + 1);
        for p in ps {
            b.put_i32(*p);
        }
        b.put_u8(0); // tagged fields
    }
}

/// A KIP-848 record's key (`member` for keys 5, 7 and 8).
pub(crate) fn consumer_key(version: i16, group: &str, member: Option<&str>) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(version);
    put_str(&mut b, group);
    if let Some(m) = member {
        put_str(&mut b, m);
    }
    b.freeze()
}

fn flexible_value(f: impl FnOnce(&mut BytesMut)) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    f(&mut b);
    b.put_u8(0); // tagged fields
    b.freeze()
}

/// Key 3 / 6 values: one int32 epoch.
pub(crate) fn consumer_epoch_value(epoch: i32) -> Bytes {
    flexible_value(|b| b.put_i32(epoch))
}

pub(crate) fn consumer_partition_meta_value(topics: &[TopicMetadata]) -> Bytes {
    flexible_value(|b| {
        put_uvarint(b, topics.len() as u64 + 1);
        for (id, name, n) in topics {
            b.put_slice(id.as_bytes());
            put_compact_str(b, Some(name));
            b.put_i32(*n);
            put_uvarint(b, 1); // no partition racks
            b.put_u8(0);
        }
    })
}

pub(crate) fn consumer_member_value(m: &ConsumerMemberRecord) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(0);
    put_compact_str(&mut b, m.instance_id.as_deref());
    put_compact_str(&mut b, m.rack_id.as_deref());
    put_compact_str(&mut b, Some(&m.client_id));
    put_compact_str(&mut b, Some(&m.client_host));
    put_uvarint(&mut b, m.subscribed_topic_names.len() as u64 + 1);
    for t in &m.subscribed_topic_names {
        put_compact_str(&mut b, Some(t));
    }
    put_compact_str(&mut b, m.subscribed_topic_regex.as_deref());
    b.put_i32(m.rebalance_timeout_ms);
    put_compact_str(&mut b, m.server_assignor.as_deref());
    match &m.classic {
        None => b.put_u8(0), // no tagged fields
        Some(c) => {
            let mut s = BytesMut::new();
            s.put_u8(1); // present
            s.put_i32(c.session_timeout_ms);
            put_uvarint(&mut s, c.protocols.len() as u64 + 1);
            for (name, metadata) in &c.protocols {
                put_compact_str(&mut s, Some(name));
                put_uvarint(&mut s, metadata.len() as u64 + 1);
                s.put_slice(metadata);
                s.put_u8(0); // tagged fields of the protocol
            }
            s.put_u8(0); // tagged fields of ClassicMemberMetadata
            put_uvarint(&mut b, 1); // one tagged field
            put_uvarint(&mut b, 0); // tag 0
            put_uvarint(&mut b, s.len() as u64);
            b.put_slice(&s);
        }
    }
    b.freeze()
}

pub(crate) fn consumer_target_member_value(tps: &[(uuid::Uuid, Vec<i32>)]) -> Bytes {
    flexible_value(|b| put_topic_partitions(b, tps))
}

pub(crate) fn consumer_current_value(a: &ConsumerAssignmentRecord) -> Bytes {
    flexible_value(|b| {
        b.put_i32(a.member_epoch);
        b.put_i32(a.previous_member_epoch);
        b.put_i8(a.state);
        put_topic_partitions(b, &a.assigned);
        put_topic_partitions(b, &a.revoking);
    })
}

/// Why a record could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed __consumer_offsets record: {0}")]
pub struct DecodeError(pub String);

type Reader<'a> = FieldReader<'a, DecodeError>;

impl From<FieldError> for DecodeError {
    fn from(e: FieldError) -> DecodeError {
        DecodeError(e.0.into())
    }
}

/// The fields of the consumer-group records beyond Kafka's common encodings.
trait GroupFields {
    fn uuid(&mut self) -> Result<uuid::Uuid, DecodeError>;
    fn member_tags(&mut self) -> Result<Option<ClassicMemberMetadata>, DecodeError>;
    fn topic_partitions(&mut self) -> Result<TopicPartitions, DecodeError>;
    fn bytes(&mut self) -> Result<Bytes, DecodeError>;
}

impl GroupFields for Reader<'_> {
    fn uuid(&mut self) -> Result<uuid::Uuid, DecodeError> {
        Ok(uuid::Uuid::from_bytes(self.array()?))
    }
    /// The tagged fields of `ConsumerGroupMemberMetadataValue`: tag 0 is the classic member
    /// metadata; others are skipped.
    fn member_tags(&mut self) -> Result<Option<ClassicMemberMetadata>, DecodeError> {
        let mut classic = None;
        for (tag, field) in self.tagged()? {
            if tag != 0 {
                continue;
            }
            let mut r = Reader::new(field);
            if r.i8()? < 0 {
                continue; // null
            }
            let session_timeout_ms = r.i32()?;
            let protocols = r.compact_array(|r| {
                let name = r.compact_str()?;
                let n = r.compact_len()?.unwrap_or(0);
                let metadata = Bytes::copy_from_slice(r.take(n)?);
                r.skip_tags()?;
                Ok((name, metadata))
            })?;
            r.skip_tags()?;
            classic = Some(ClassicMemberMetadata {
                session_timeout_ms,
                protocols,
            });
        }
        Ok(classic)
    }
    fn topic_partitions(&mut self) -> Result<TopicPartitions, DecodeError> {
        self.compact_array(|r| {
            let id = r.uuid()?;
            let ps = r.compact_array(|r| r.i32())?;
            r.skip_tags()?;
            Ok((id, ps))
        })
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
    let mut k = Reader::new(key);
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
        3..=8 => {
            let group = k.str()?;
            let member = if matches!(version, 5 | 7 | 8) {
                Some(k.str()?)
            } else {
                None
            };
            let value = decode_consumer_value(version, member, value)?;
            Ok(Decoded::Consumer { group, value })
        }
        _ => Ok(Decoded::Other),
    }
}

fn decode_consumer_value(
    key_version: i16,
    member: Option<String>,
    value: Option<&[u8]>,
) -> Result<ConsumerValue, DecodeError> {
    let member = member.unwrap_or_default();
    let mut r = value.map(Reader::new);
    if let Some(r) = r.as_mut() {
        let version = r.i16()?;
        if version != 0 {
            return Err(DecodeError(format!(
                "consumer group value version {version} is not supported"
            )));
        }
    }
    let done = |r: &mut Reader<'_>| r.skip_tags();
    Ok(match (key_version, r.as_mut()) {
        (3, None) => ConsumerValue::Group(None),
        (3, Some(r)) => {
            let epoch = r.i32()?;
            done(r)?;
            ConsumerValue::Group(Some(epoch))
        }
        (4, None) => ConsumerValue::PartitionMetadata(None),
        (4, Some(r)) => {
            // Sluice before 2026-11 wrote an int32 epoch first (not Kafka's schema): read
            // Kafka's layout, else that one.
            let start = r.clone();
            let topics = match partition_metadata(r) {
                Ok(t) => t,
                Err(_) => {
                    *r = start;
                    r.i32()?;
                    partition_metadata(r)?
                }
            };
            ConsumerValue::PartitionMetadata(Some(topics))
        }
        (5, None) => ConsumerValue::Member(member, None),
        (5, Some(r)) => {
            let instance_id = r.compact_nullable_str()?;
            let rack_id = r.compact_nullable_str()?;
            let client_id = r.compact_str()?;
            let client_host = r.compact_str()?;
            let subscribed_topic_names = r.compact_array(|r| r.compact_str())?;
            let subscribed_topic_regex = r.compact_nullable_str()?;
            let rebalance_timeout_ms = r.i32()?;
            let server_assignor = r.compact_nullable_str()?;
            let classic = r.member_tags()?;
            ConsumerValue::Member(
                member,
                Some(ConsumerMemberRecord {
                    instance_id,
                    rack_id,
                    client_id,
                    client_host,
                    subscribed_topic_names,
                    subscribed_topic_regex,
                    rebalance_timeout_ms,
                    server_assignor,
                    classic,
                }),
            )
        }
        (6, None) => ConsumerValue::TargetMetadata(None),
        (6, Some(r)) => {
            let epoch = r.i32()?;
            done(r)?;
            ConsumerValue::TargetMetadata(Some(epoch))
        }
        (7, None) => ConsumerValue::TargetMember(member, None),
        (7, Some(r)) => {
            let tps = r.topic_partitions()?;
            done(r)?;
            ConsumerValue::TargetMember(member, Some(tps))
        }
        (_, None) => ConsumerValue::Current(member, None),
        (_, Some(r)) => {
            let member_epoch = r.i32()?;
            let previous_member_epoch = r.i32()?;
            let state = r.i8()?;
            let assigned = r.topic_partitions()?;
            let revoking = r.topic_partitions()?;
            done(r)?;
            ConsumerValue::Current(
                member,
                Some(ConsumerAssignmentRecord {
                    member_epoch,
                    previous_member_epoch,
                    state,
                    assigned,
                    revoking,
                }),
            )
        }
    })
}

/// The rest of a `ConsumerGroupPartitionMetadataValue`, to its very end.
fn partition_metadata(r: &mut Reader<'_>) -> Result<Vec<TopicMetadata>, DecodeError> {
    let topics = r.compact_array(|r| {
        let id = r.uuid()?;
        let name = r.compact_str()?;
        let n = r.i32()?;
        r.compact_array(|r| {
            r.i32()?;
            r.compact_array(|r| r.compact_str())?;
            r.skip_tags()
        })?;
        r.skip_tags()?;
        Ok((id, name, n))
    })?;
    r.skip_tags()?;
    if !r.at_end() {
        return Err(DecodeError("trailing bytes".into()));
    }
    Ok(topics)
}

fn decode_offset_value(v: &[u8]) -> Result<CommittedOffset, DecodeError> {
    let mut r = Reader::new(v);
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
    let mut r = Reader::new(v);
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
    fn partition_metadata_of_the_older_sluice_layout_still_reads() {
        let t = uuid::Uuid::from_u128(7);
        let kafka = consumer_partition_meta_value(&[(t, "a".into(), 3)]);
        // The old layout: the same with an int32 epoch after the version.
        let mut old = BytesMut::new();
        old.put_slice(&kafka[..2]);
        old.put_i32(9);
        old.put_slice(&kafka[2..]);
        for v in [&kafka[..], &old[..]] {
            assert_eq!(
                decode(&consumer_key(4, "g", None), Some(v)).unwrap(),
                Decoded::Consumer {
                    group: "g".into(),
                    value: ConsumerValue::PartitionMetadata(Some(vec![(t, "a".into(), 3)]))
                }
            );
        }
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(decode(&[0, 1, 0], None).is_err());
        assert!(decode(&[0, 1, 0, 1, b'g', 0, 1], Some(&[0, 3, 1])).is_err());
        assert!(batch_records(&[1, 2, 3]).is_err());
        assert_eq!(decode(&[0, 9], None).unwrap(), Decoded::Other);
        assert!(decode(&consumer_key(8, "g", Some("m")), Some(&[0, 0, 0xff])).is_err());
    }

    #[test]
    fn consumer_values_round_trip() {
        let t = uuid::Uuid::from_u128(7);
        let m = ConsumerMemberRecord {
            instance_id: None,
            rack_id: Some("r".into()),
            client_id: "c".into(),
            client_host: "/h".into(),
            subscribed_topic_names: vec!["a".into(), "b".into()],
            subscribed_topic_regex: Some("c.*".into()),
            rebalance_timeout_ms: 300,
            server_assignor: Some("range".into()),
            classic: None,
        };
        let classic = ConsumerMemberRecord {
            classic: Some(ClassicMemberMetadata {
                session_timeout_ms: 45000,
                protocols: vec![
                    ("range".into(), Bytes::from_static(b"\0\x03sub")),
                    ("cooperative-sticky".into(), Bytes::new()),
                ],
            }),
            ..m.clone()
        };
        let a = ConsumerAssignmentRecord {
            member_epoch: 5,
            previous_member_epoch: 4,
            state: 2,
            assigned: vec![(t, vec![0, 2])],
            revoking: vec![(t, vec![1])],
        };
        let cases = [
            (
                consumer_key(3, "g", None),
                consumer_epoch_value(9),
                ConsumerValue::Group(Some(9)),
            ),
            (
                consumer_key(4, "g", None),
                consumer_partition_meta_value(&[(t, "a".into(), 3)]),
                ConsumerValue::PartitionMetadata(Some(vec![(t, "a".into(), 3)])),
            ),
            (
                consumer_key(5, "g", Some("m")),
                consumer_member_value(&m),
                ConsumerValue::Member("m".into(), Some(m.clone())),
            ),
            (
                consumer_key(5, "g", Some("c")),
                consumer_member_value(&classic),
                ConsumerValue::Member("c".into(), Some(classic.clone())),
            ),
            (
                consumer_key(6, "g", None),
                consumer_epoch_value(8),
                ConsumerValue::TargetMetadata(Some(8)),
            ),
            (
                consumer_key(7, "g", Some("m")),
                consumer_target_member_value(&[(t, vec![0, 1, 2])]),
                ConsumerValue::TargetMember("m".into(), Some(vec![(t, vec![0, 1, 2])])),
            ),
            (
                consumer_key(8, "g", Some("m")),
                consumer_current_value(&a),
                ConsumerValue::Current("m".into(), Some(a.clone())),
            ),
        ];
        for (k, v, want) in cases {
            let group = "g".to_string();
            assert_eq!(
                decode(&k, Some(&v)).unwrap(),
                Decoded::Consumer {
                    group: group.clone(),
                    value: want
                }
            );
        }
        assert_eq!(
            decode(&consumer_key(8, "g", Some("m")), None).unwrap(),
            Decoded::Consumer {
                group: "g".into(),
                value: ConsumerValue::Current("m".into(), None)
            }
        );
    }
}

//! The consumer embedded protocol that classic members carry in JoinGroup and SyncGroup
//! (Kafka's `ConsumerProtocolSubscription` and `ConsumerProtocolAssignment`, versions 0-3, not
//! flexible). Needed where a group changes protocol (classic members' subscriptions and
//! assignments become a consumer group's and back) and where a consumer group answers a
//! classic member's SyncGroup.
//!
//! Subscription: version int16, topics [string], userData nullable bytes, v1+ ownedPartitions
//! [topic string, partitions [int32]], v2+ generationId int32, v3+ rackId nullable string.
//! Assignment: version int16, assignedPartitions [topic string, partitions [int32]], userData
//! nullable bytes. As in Kafka, a newer version is read with the newest known layout, and
//! fields missing at the end take their defaults.

use bytes::{BufMut, Bytes, BytesMut};

/// The protocol type of groups that can change protocol.
pub(crate) const CONSUMER_PROTOCOL_TYPE: &str = "consumer";

/// The newest version of both structures Sluice knows.
const MAX_VERSION: i16 = 3;

/// A decoded `ConsumerProtocolSubscription`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Subscription {
    pub(crate) version: i16,
    pub(crate) topics: Vec<String>,
    /// (topic, partitions) the member owns (v1+; empty before).
    pub(crate) owned: Vec<(String, Vec<i32>)>,
    pub(crate) rack_id: Option<String>,
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|e| *e <= self.buf.len())?;
        let s = &self.buf[self.pos..end];
        self.pos = end;
        Some(s)
    }
    fn i16(&mut self) -> Option<i16> {
        let s = self.take(2)?;
        Some(i16::from_be_bytes([s[0], s[1]]))
    }
    fn i32(&mut self) -> Option<i32> {
        let s = self.take(4)?;
        Some(i32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn nullable_str(&mut self) -> Option<Option<String>> {
        let len = self.i16()?;
        if len < 0 {
            return Some(None);
        }
        let s = self.take(len as usize)?;
        Some(Some(String::from_utf8(s.to_vec()).ok()?))
    }
    fn str(&mut self) -> Option<String> {
        self.nullable_str()?
    }
    fn skip_nullable_bytes(&mut self) -> Option<()> {
        let len = self.i32()?;
        if len >= 0 {
            self.take(len as usize)?;
        }
        Some(())
    }
    /// An array of int32 count (-1 = null = empty); every element is at least `min_len`
    /// bytes, which bounds the count by what is left.
    fn array<T>(
        &mut self,
        min_len: usize,
        mut f: impl FnMut(&mut Self) -> Option<T>,
    ) -> Option<Vec<T>> {
        let n = self.i32()?;
        if n < 0 {
            return Some(Vec::new());
        }
        let n = n as usize;
        if n.checked_mul(min_len)? > self.buf.len() - self.pos {
            return None;
        }
        (0..n).map(|_| f(self)).collect()
    }
    fn topic_partitions(&mut self) -> Option<Vec<(String, Vec<i32>)>> {
        self.array(6, |r| {
            let topic = r.str()?;
            let partitions = r.array(4, |r| r.i32())?;
            Some((topic, partitions))
        })
    }
}

/// Decode a subscription; None when the bytes do not parse.
pub(crate) fn decode_subscription(b: &[u8]) -> Option<Subscription> {
    let mut r = Reader { buf: b, pos: 0 };
    let version = r.i16()?;
    if version < 0 {
        return None;
    }
    let topics = r.array(2, |r| r.str())?;
    r.skip_nullable_bytes()?;
    let mut s = Subscription {
        version,
        topics,
        ..Default::default()
    };
    if version >= 1 && !r.at_end() {
        s.owned = r.topic_partitions()?;
    }
    if version >= 2 && !r.at_end() {
        r.i32()?; // generation id
    }
    if version >= 3 && !r.at_end() {
        s.rack_id = r.nullable_str()?;
    }
    Some(s)
}

/// Decode an assignment's (topic, partitions); None when the bytes do not parse. An empty
/// buffer (a member that never got an assignment) is an empty assignment.
pub(crate) fn decode_assignment(b: &[u8]) -> Option<Vec<(String, Vec<i32>)>> {
    if b.is_empty() {
        return Some(Vec::new());
    }
    let mut r = Reader { buf: b, pos: 0 };
    let version = r.i16()?;
    if version < 0 {
        return None;
    }
    r.topic_partitions()
}

fn put_str(b: &mut BytesMut, s: &str) {
    let bytes = s.as_bytes();
    let len = bytes.len().min(i16::MAX as usize);
    b.put_i16(len as i16);
    b.put_slice(&bytes[..len]);
}

/// Encode an assignment at `version` (clamped to 0..=3), without user data.
pub(crate) fn encode_assignment(version: i16, partitions: &[(String, Vec<i32>)]) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(version.clamp(0, MAX_VERSION));
    b.put_i32(partitions.len() as i32);
    for (topic, ps) in partitions {
        put_str(&mut b, topic);
        b.put_i32(ps.len() as i32);
        for p in ps {
            b.put_i32(*p);
        }
    }
    b.put_i32(-1); // user data: null
    b.freeze()
}

/// The version of a subscription (its first two bytes), for answering in kind.
pub(crate) fn version_of(b: &[u8]) -> i16 {
    match b {
        [a, c, ..] => i16::from_be_bytes([*a, *c]).max(0),
        _ => 0,
    }
}

#[cfg(test)]
pub(crate) fn encode_subscription(
    version: i16,
    topics: &[&str],
    owned: &[(&str, Vec<i32>)],
) -> Bytes {
    let mut b = BytesMut::new();
    b.put_i16(version);
    b.put_i32(topics.len() as i32);
    for t in topics {
        put_str(&mut b, t);
    }
    b.put_i32(-1);
    if version >= 1 {
        b.put_i32(owned.len() as i32);
        for (t, ps) in owned {
            put_str(&mut b, t);
            b.put_i32(ps.len() as i32);
            for p in ps {
                b.put_i32(*p);
            }
        }
    }
    if version >= 2 {
        b.put_i32(-1);
    }
    if version >= 3 {
        b.put_i16(-1);
    }
    b.freeze()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn subscription_and_assignment_round_trip() {
        for v in 0..=3 {
            let b = encode_subscription(v, &["a", "b"], &[("a", vec![1, 2])]);
            let s = decode_subscription(&b).unwrap();
            assert_eq!(s.version, v);
            assert_eq!(s.topics, vec!["a".to_string(), "b".to_string()]);
            let owned = if v >= 1 {
                vec![("a".to_string(), vec![1, 2])]
            } else {
                Vec::new()
            };
            assert_eq!(s.owned, owned);
        }
        let a = encode_assignment(3, &[("t".into(), vec![0, 5])]);
        assert_eq!(version_of(&a), 3);
        assert_eq!(
            decode_assignment(&a).unwrap(),
            vec![("t".to_string(), vec![0, 5])]
        );
        assert_eq!(decode_assignment(&[]).unwrap(), Vec::new());
    }

    #[test]
    fn garbage_does_not_parse_or_panic() {
        assert!(decode_subscription(&[0, 0, 0x7f, 0xff, 0xff, 0xff]).is_none());
        assert!(decode_subscription(&[0xff, 0xff]).is_none());
        assert!(decode_assignment(&[0, 1, 0, 0, 0, 9, 0]).is_none());
        assert_eq!(version_of(&[7]), 0);
    }
}

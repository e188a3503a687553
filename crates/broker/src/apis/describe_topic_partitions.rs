//! DescribeTopicPartitions (v0): what the admin client's `describeTopics` (and so
//! `kafka-topics --describe`) asks brokers that offer it, instead of Metadata. Topics come in
//! name order, at most `ResponsePartitionLimit` partitions per answer (capped by
//! `max.request.partition.size.limit`, Kafka's 2000), and a cursor names the next partition
//! when the answer is cut, as Kafka pages them.
//!
//! Partitions read as in Metadata (one logical replica, the owner; docs/cluster.md), except
//! that a partition whose owner is not alive has leader -1 and no error code (Kafka leaves the
//! error out here too) and its owner listed as an offline replica.

use std::sync::Arc;

use kafka_protocol::messages::describe_topic_partitions_response::{
    Cursor, DescribeTopicPartitionsResponsePartition, DescribeTopicPartitionsResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, ResponseKind,
};
use kafka_protocol::ResponseError;
use uuid::Uuid;

use crate::registry::TopicState;
use crate::wire::topic_name;
use crate::Broker;

/// Kafka's `max.request.partition.size.limit` default: the most partitions of one answer.
pub(crate) const PARTITION_LIMIT_MAX: i32 = 2000;

/// Kafka's "authorized operations not requested" marker.
const OPS_NOT_REQUESTED: i32 = i32::MIN;

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: DescribeTopicPartitionsRequest,
    _version: i16,
) -> Option<ResponseKind> {
    let all = req.topics.is_empty();
    let cursor = req
        .cursor
        .as_ref()
        .map(|c| (c.topic_name.0.to_string(), c.partition_index));
    let cursor_topic = cursor.as_ref().map_or("", |(t, _)| t.as_str());
    let mut names: Vec<String> = if all {
        broker
            .registry
            .all()
            .iter()
            .map(|t| t.meta.name.clone())
            .collect()
    } else {
        req.topics.iter().map(|t| t.name.0.to_string()).collect()
    };
    names.retain(|n| n.as_str() >= cursor_topic);
    names.sort();
    names.dedup();
    let invalid = match &cursor {
        Some((t, _)) if !all && !names.contains(t) => true,
        Some((_, p)) => *p < 0,
        None => false,
    };
    if invalid {
        // Kafka answers an invalid cursor with the error on every requested topic.
        let topics = req
            .topics
            .iter()
            .map(|t| {
                DescribeTopicPartitionsResponseTopic::default()
                    .with_error_code(ResponseError::InvalidRequest.code())
                    .with_name(Some(t.name.clone()))
                    .with_topic_authorized_operations(OPS_NOT_REQUESTED)
            })
            .collect();
        return Some(ResponseKind::DescribeTopicPartitions(
            DescribeTopicPartitionsResponse::default().with_topics(topics),
        ));
    }
    let limit = req.response_partition_limit.clamp(1, PARTITION_LIMIT_MAX);
    let live: Vec<i32> = broker.live_brokers().iter().map(|(id, _, _)| *id).collect();
    let pages = paginate(
        names.iter().map(|n| {
            let start = match &cursor {
                Some((t, p)) if t == n => *p,
                _ => 0,
            };
            let state = broker.registry.get(n);
            (n.as_str(), start, state)
        }),
        limit,
    );
    let mut resp = DescribeTopicPartitionsResponse::default();
    for page in pages.topics {
        let topic = match page.state {
            Some(t) => DescribeTopicPartitionsResponseTopic::default()
                .with_name(Some(topic_name(page.name)))
                .with_topic_id(t.meta.id)
                .with_is_internal(crate::is_internal_topic(page.name))
                .with_partitions(
                    page.range
                        .map(|p| partition(&t, p, &live))
                        .collect::<Vec<_>>(),
                ),
            None if all => continue,
            None => DescribeTopicPartitionsResponseTopic::default()
                .with_error_code(if sluice_meta::validate_topic_name(page.name).is_ok() {
                    ResponseError::UnknownTopicOrPartition.code()
                } else {
                    ResponseError::InvalidTopicException.code()
                })
                .with_name(Some(topic_name(page.name)))
                .with_topic_id(Uuid::nil())
                .with_is_internal(crate::is_internal_topic(page.name)),
        };
        resp.topics
            .push(topic.with_topic_authorized_operations(OPS_NOT_REQUESTED));
    }
    resp.next_cursor = pages.next.map(|(t, p)| {
        Cursor::default()
            .with_topic_name(topic_name(t))
            .with_partition_index(p)
    });
    Some(ResponseKind::DescribeTopicPartitions(resp))
}

fn partition(t: &TopicState, p: i32, live: &[i32]) -> DescribeTopicPartitionsResponsePartition {
    let idx = p as usize;
    let owner = t.meta.owners.get(idx).copied().unwrap_or(-1);
    let epoch = t.meta.epochs.get(idx).copied().unwrap_or(-1);
    let replicas: Vec<BrokerId> = if owner >= 0 {
        vec![BrokerId(owner)]
    } else {
        vec![]
    };
    let alive = live.contains(&owner);
    DescribeTopicPartitionsResponsePartition::default()
        .with_partition_index(p)
        .with_leader_id(BrokerId(if alive { owner } else { -1 }))
        .with_leader_epoch(epoch)
        .with_isr_nodes(replicas.clone())
        .with_offline_replicas(if alive { vec![] } else { replicas.clone() })
        .with_replica_nodes(replicas)
        .with_eligible_leader_replicas(Some(vec![]))
        .with_last_known_elr(Some(vec![]))
}

/// One topic of an answer: the partitions to describe (empty for an unknown topic).
struct Page<'a, S> {
    name: &'a str,
    state: Option<S>,
    range: std::ops::Range<i32>,
}

struct Pages<'a, S> {
    topics: Vec<Page<'a, S>>,
    next: Option<(&'a str, i32)>,
}

/// Kafka's paging: topics in order, each from its start partition, until `limit` partitions
/// are given; the cursor then names the first partition left out (the next topic's 0 when a
/// topic ended exactly at the limit). A topic that would contribute no partition because the
/// limit is spent is left out of the answer; unknown topics (no state) cost nothing.
fn paginate<'a, S: PartitionCount>(
    topics: impl Iterator<Item = (&'a str, i32, Option<S>)>,
    limit: i32,
) -> Pages<'a, S> {
    let mut remaining = limit;
    let mut out = Pages {
        topics: Vec::new(),
        next: None,
    };
    for (name, start, state) in topics {
        if remaining == 0 {
            out.next = Some((name, 0));
            break;
        }
        let Some(s) = state else {
            out.topics.push(Page {
                name,
                state: None,
                range: 0..0,
            });
            continue;
        };
        let count = s.partition_count();
        let end = count.min(start.saturating_add(remaining));
        let range = start.min(end)..end;
        remaining -= range.len() as i32;
        out.topics.push(Page {
            name,
            state: Some(s),
            range,
        });
        if end < count {
            out.next = Some((name, end));
            break;
        }
    }
    out
}

trait PartitionCount {
    fn partition_count(&self) -> i32;
}

impl PartitionCount for Arc<TopicState> {
    fn partition_count(&self) -> i32 {
        self.meta.partitions()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl PartitionCount for i32 {
        fn partition_count(&self) -> i32 {
            *self
        }
    }

    fn run(topics: &[(&'static str, i32, Option<i32>)], limit: i32) -> Vec<String> {
        let p = paginate(topics.iter().copied(), limit);
        let mut out: Vec<String> = p
            .topics
            .iter()
            .map(|t| format!("{}:{}..{}", t.name, t.range.start, t.range.end))
            .collect();
        if let Some((t, i)) = p.next {
            out.push(format!("next {t}:{i}"));
        }
        out
    }

    #[test]
    fn pages_cut_inside_a_topic_and_between_topics() {
        let ts = [("a", 0, Some(3)), ("b", 0, Some(2)), ("c", 0, Some(1))];
        assert_eq!(run(&ts, 10), ["a:0..3", "b:0..2", "c:0..1"]);
        assert_eq!(run(&ts, 2), ["a:0..2", "next a:2"]);
        assert_eq!(run(&ts, 3), ["a:0..3", "next b:0"]);
        assert_eq!(run(&ts, 4), ["a:0..3", "b:0..1", "next b:1"]);
        let from_cursor = [("b", 1, Some(2)), ("c", 0, Some(1))];
        assert_eq!(run(&from_cursor, 5), ["b:1..2", "c:0..1"]);
    }

    #[test]
    fn unknown_topics_cost_nothing() {
        let ts = [("a", 0, Some(1)), ("nope", 0, None), ("z", 0, Some(1))];
        assert_eq!(run(&ts, 2), ["a:0..1", "nope:0..0", "z:0..1"]);
    }
}

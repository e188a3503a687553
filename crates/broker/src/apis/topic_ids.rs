//! OffsetCommit and OffsetFetch v10 name topics by id instead of by name (KIP-848). Before
//! anything else looks at such a request, each id is turned into its topic's name, so that
//! authorization, the group coordinator and the answer builders work by name as for older
//! versions; a topic whose id is not known here is taken out of the request and answered
//! UNKNOWN_TOPIC_ID, partition by partition. The answer gets the ids back (and, for a fetch
//! of all the group's offsets, leaves out topics that no longer exist, which have none), as
//! Kafka's KafkaApis does.

use std::collections::HashMap;
use std::sync::Arc;

use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponsePartitions, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{RequestKind, ResponseKind, TopicName};
use kafka_protocol::ResponseError;
use uuid::Uuid;

use crate::apis::access::Patch;
use crate::wire::topic_name;
use crate::Broker;

/// The first version of both APIs that names topics by id.
const BY_ID: i16 = 10;

/// A topic the request named by an id not known here, with the partitions it asked about.
type Unknown = (Uuid, Vec<i32>);

/// Names for the ids of an OffsetCommit or OffsetFetch v10 request, and the patch that gives
/// its answer (whether served or refused) the ids back. Other requests pass unchanged.
pub(crate) fn resolve(
    broker: &Arc<Broker>,
    body: RequestKind,
    version: i16,
) -> (RequestKind, Option<Patch>) {
    if version < BY_ID {
        return (body, None);
    }
    let name_of = |id: Uuid| broker.registry.get_by_id(id).map(|t| t.meta.name.clone());
    match body {
        RequestKind::OffsetCommit(mut r) => {
            let mut unknown: Vec<Unknown> = Vec::new();
            r.topics.retain_mut(|t| match name_of(t.topic_id) {
                Some(name) => {
                    t.name = topic_name(&name);
                    true
                }
                None => {
                    let partitions = t.partitions.iter().map(|p| p.partition_index).collect();
                    unknown.push((t.topic_id, partitions));
                    false
                }
            });
            let broker = broker.clone();
            let patch: Patch = Box::new(move |answer| {
                if let ResponseKind::OffsetCommit(body) = answer {
                    for t in &mut body.topics {
                        t.topic_id = id_of(&broker, &t.name).unwrap_or_default();
                        t.name = TopicName::default();
                    }
                    body.topics
                        .extend(unknown.into_iter().map(|(id, partitions)| {
                            OffsetCommitResponseTopic::default()
                                .with_topic_id(id)
                                .with_partitions(
                                    partitions
                                        .into_iter()
                                        .map(|p| {
                                            OffsetCommitResponsePartition::default()
                                                .with_partition_index(p)
                                                .with_error_code(UNKNOWN_TOPIC_ID)
                                        })
                                        .collect(),
                                )
                        }));
                }
            });
            (RequestKind::OffsetCommit(r), Some(patch))
        }
        RequestKind::OffsetFetch(mut r) => {
            let mut unknown: HashMap<String, Vec<Unknown>> = HashMap::new();
            for g in &mut r.groups {
                let Some(topics) = g.topics.as_mut() else {
                    continue;
                };
                topics.retain_mut(|t| match name_of(t.topic_id) {
                    Some(name) => {
                        t.name = topic_name(&name);
                        true
                    }
                    None => {
                        unknown
                            .entry(g.group_id.to_string())
                            .or_default()
                            .push((t.topic_id, t.partition_indexes.clone()));
                        false
                    }
                });
            }
            let broker = broker.clone();
            let patch: Patch = Box::new(move |answer| {
                if let ResponseKind::OffsetFetch(body) = answer {
                    for g in &mut body.groups {
                        // A topic without an id (gone since its offsets were committed)
                        // cannot be named at this version: left out, as Kafka does.
                        g.topics.retain_mut(|t| match id_of(&broker, &t.name) {
                            Some(id) => {
                                t.topic_id = id;
                                t.name = TopicName::default();
                                true
                            }
                            None => false,
                        });
                        if g.error_code != 0 {
                            continue;
                        }
                        let Some(unknown) = unknown.remove(g.group_id.as_str()) else {
                            continue;
                        };
                        g.topics.extend(unknown.into_iter().map(|(id, partitions)| {
                            OffsetFetchResponseTopics::default()
                                .with_topic_id(id)
                                .with_partitions(
                                    partitions
                                        .into_iter()
                                        .map(|p| {
                                            OffsetFetchResponsePartitions::default()
                                                .with_partition_index(p)
                                                .with_committed_offset(-1)
                                                .with_error_code(UNKNOWN_TOPIC_ID)
                                        })
                                        .collect(),
                                )
                        }));
                    }
                }
            });
            (RequestKind::OffsetFetch(r), Some(patch))
        }
        other => (other, None),
    }
}

const UNKNOWN_TOPIC_ID: i16 = ResponseError::UnknownTopicId.code();

fn id_of(broker: &Broker, name: &TopicName) -> Option<Uuid> {
    broker
        .registry
        .get(name.as_str())
        .map(|t| t.meta.id)
        .filter(|id| !id.is_nil())
}

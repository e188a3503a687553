//! OffsetCommit and OffsetFetch v10 name topics by id instead of by name (KIP-848). Before
//! anything else looks at such a request, each id is turned into its topic's name, so that
//! authorization, the group coordinator and the answer builders work by name as for older
//! versions; a topic whose id is not known here is taken out of the request and answered
//! UNKNOWN_TOPIC_ID, partition by partition. The answer gets the ids back (and, for a fetch
//! of all the group's offsets, leaves out topics that no longer exist, which have none), as
//! Kafka's KafkaApis does; each topic is answered with the id the request named it by.

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

use crate::wire::topic_name;
use crate::Broker;

/// The first version of both APIs that names topics by id.
const BY_ID: i16 = 10;

/// A topic the request named by an id not known here, with the partitions it asked about.
type Unknown = (Uuid, Vec<i32>);

/// What [`resolve`] did to a request: the ids it named each topic by, and the topics it took
/// out; [`Ids::apply`] gives the answer the ids back.
pub(crate) struct Ids {
    broker: Arc<Broker>,
    kind: Kind,
}

enum Kind {
    Commit {
        ids: HashMap<String, Uuid>,
        unknown: Vec<Unknown>,
    },
    /// By group id.
    Fetch {
        ids: HashMap<String, HashMap<String, Uuid>>,
        unknown: HashMap<String, Vec<Unknown>>,
    },
}

/// Names for the ids of an OffsetCommit or OffsetFetch v10 request; other requests pass
/// unchanged.
pub(crate) fn resolve(
    broker: &Arc<Broker>,
    body: RequestKind,
    version: i16,
) -> (RequestKind, Option<Ids>) {
    if version < BY_ID {
        return (body, None);
    }
    let name_of = |id: Uuid| broker.registry.get_by_id(id).map(|t| t.meta.name.clone());
    let (body, kind) = match body {
        RequestKind::OffsetCommit(mut r) => {
            let (mut ids, mut unknown) = (HashMap::new(), Vec::new());
            r.topics.retain_mut(|t| match name_of(t.topic_id) {
                Some(name) => {
                    t.name = topic_name(&name);
                    ids.insert(name, t.topic_id);
                    true
                }
                None => {
                    unknown.push((
                        t.topic_id,
                        t.partitions.iter().map(|p| p.partition_index).collect(),
                    ));
                    false
                }
            });
            (RequestKind::OffsetCommit(r), Kind::Commit { ids, unknown })
        }
        RequestKind::OffsetFetch(mut r) => {
            let (mut ids, mut unknown) = (HashMap::new(), HashMap::new());
            for g in &mut r.groups {
                let Some(topics) = g.topics.as_mut() else {
                    continue;
                };
                let group = g.group_id.to_string();
                topics.retain_mut(|t| match name_of(t.topic_id) {
                    Some(name) => {
                        t.name = topic_name(&name);
                        ids.entry(group.clone())
                            .or_insert_with(HashMap::new)
                            .insert(name, t.topic_id);
                        true
                    }
                    None => {
                        unknown
                            .entry(group.clone())
                            .or_insert_with(Vec::new)
                            .push((t.topic_id, t.partition_indexes.clone()));
                        false
                    }
                });
            }
            (RequestKind::OffsetFetch(r), Kind::Fetch { ids, unknown })
        }
        other => return (other, None),
    };
    (
        body,
        Some(Ids {
            broker: broker.clone(),
            kind,
        }),
    )
}

impl Ids {
    /// Give `answer` the ids back: each topic the request named by id gets that id; an
    /// unknown id is answered UNKNOWN_TOPIC_ID partition by partition, or, in an OffsetCommit
    /// refused whole (`refused`: the group is not authorized), as the other topics are.
    pub(crate) fn apply(self, answer: &mut ResponseKind, refused: bool) {
        match (self.kind, answer) {
            (Kind::Commit { ids, unknown }, ResponseKind::OffsetCommit(body)) => {
                let code = match refused {
                    true => body
                        .topics
                        .iter()
                        .flat_map(|t| t.partitions.first())
                        .map(|p| p.error_code)
                        .next()
                        .unwrap_or(ResponseError::GroupAuthorizationFailed.code()),
                    false => UNKNOWN_TOPIC_ID,
                };
                for t in &mut body.topics {
                    t.topic_id = ids.get(t.name.as_str()).copied().unwrap_or_default();
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
                                            .with_error_code(code)
                                    })
                                    .collect(),
                            )
                    }));
            }
            (Kind::Fetch { ids, mut unknown }, ResponseKind::OffsetFetch(body)) => {
                for g in &mut body.groups {
                    let named = ids.get(g.group_id.as_str());
                    // A topic named by id gets that id; one of a fetch of all the group's
                    // offsets gets its topic's id now, and one without (gone since its
                    // offsets were committed) cannot be named at this version: left out, as
                    // Kafka does.
                    let broker = &self.broker;
                    g.topics.retain_mut(|t| {
                        let id = named
                            .and_then(|n| n.get(t.name.as_str()).copied())
                            .or_else(|| id_of(broker, &t.name));
                        match id {
                            Some(id) => {
                                t.topic_id = id;
                                t.name = TopicName::default();
                                true
                            }
                            None => false,
                        }
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
            _ => {}
        }
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

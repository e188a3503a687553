//! Metadata: brokers, and topics with their partitions; auto-creates missing topics when the
//! client allows it and `auto.create.topics.enable` is on.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{BrokerId, MetadataRequest, MetadataResponse, ResponseKind};
use kafka_protocol::ResponseError;
use uuid::Uuid;

use crate::registry::TopicState;
use crate::wire::{str_bytes, topic_name};
use crate::Broker;

/// Kafka's "authorized operations not requested" marker.
const OPS_NOT_REQUESTED: i32 = i32::MIN;

/// A topic's partitions as clients see them. Each partition has one logical replica, its
/// owner, which is also its leader and its whole ISR (docs/cluster.md): every broker of a
/// cluster sees the same storage, so there is nothing to replicate or to fall behind. A
/// partition whose owner is not alive (it is being failed over) has no leader yet:
/// LEADER_NOT_AVAILABLE, which clients retry.
fn topic_response(broker: &Broker, t: &TopicState, listener: &str) -> MetadataResponseTopic {
    let live = broker.live_brokers();
    let readers = reader_ids(broker, listener);
    let partitions = t
        .meta
        .epochs
        .iter()
        .enumerate()
        .map(|(p, epoch)| {
            let owner = t.meta.owners.get(p).copied().unwrap_or(-1);
            let part = MetadataResponsePartition::default()
                .with_partition_index(p as i32)
                .with_leader_epoch(*epoch);
            if live.iter().any(|(id, _, _)| *id == owner) {
                let replicas = replicas_of(owner, &readers);
                part.with_leader_id(BrokerId(owner))
                    .with_replica_nodes(replicas.clone())
                    .with_isr_nodes(replicas)
            } else {
                part.with_error_code(ResponseError::LeaderNotAvailable.code())
                    .with_leader_id(BrokerId(-1))
                    .with_replica_nodes(if owner >= 0 {
                        vec![BrokerId(owner)]
                    } else {
                        vec![]
                    })
            }
        })
        .collect();
    MetadataResponseTopic::default()
        .with_name(Some(topic_name(&t.meta.name)))
        .with_topic_id(t.meta.id)
        .with_partitions(partitions)
        .with_is_internal(crate::is_internal_topic(&t.meta.name))
        .with_topic_authorized_operations(OPS_NOT_REQUESTED)
}

/// The brokers on `listener` that serve reads of partitions they do not own (KIP-392,
/// `readers.rs`), sorted.
fn reader_ids(broker: &Broker, listener: &str) -> Vec<i32> {
    let mut ids: Vec<i32> = broker
        .read_replicas(listener)
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    ids.sort_unstable();
    ids
}

/// A partition's replicas as clients see them in Metadata: its owner, then the brokers that
/// serve its reads from the shared volume (a consumer is sent only to a broker its Metadata
/// lists as a replica: the Java client checks). Every one is in sync: there is one copy of
/// the data. DescribeTopicPartitions, which Kafka's tools read (kafka-topics --describe,
/// kafka-reassign-partitions --verify compares it with its plan), names the owner alone.
fn replicas_of(owner: i32, readers: &[i32]) -> Vec<BrokerId> {
    std::iter::once(owner)
        .chain(readers.iter().copied().filter(|id| *id != owner))
        .map(BrokerId)
        .collect()
}

fn error_topic(name: Option<&str>, id: Uuid, code: i16) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_error_code(code)
        .with_name(name.map(topic_name))
        .with_topic_id(id)
        .with_topic_authorized_operations(OPS_NOT_REQUESTED)
}

fn by_id(broker: &Broker, id: Uuid, listener: &str) -> MetadataResponseTopic {
    match broker.registry.get_by_id(id) {
        Some(t) => topic_response(broker, &t, listener),
        None => error_topic(None, id, ResponseError::UnknownTopicId.code()),
    }
}

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: MetadataRequest,
    version: i16,
    listener: &str,
) -> Option<ResponseKind> {
    let topics = match req.topics {
        None => broker
            .registry
            .all()
            .iter()
            .map(|t| topic_response(broker, t, listener))
            .collect(),
        // Before v1 an empty list meant "all topics".
        Some(list) if list.is_empty() && version == 0 => broker
            .registry
            .all()
            .iter()
            .map(|t| topic_response(broker, t, listener))
            .collect(),
        Some(list) => list
            .into_iter()
            .map(|requested| match requested.name {
                // As Kafka: a topic id, when given, names the topic (the Java client sends an
                // empty name beside the ids of topics it was assigned but does not know yet,
                // e.g. under a regex subscription).
                _ if !requested.topic_id.is_nil() => by_id(broker, requested.topic_id, listener),
                Some(name) => {
                    let name = name.0.as_str().to_string();
                    if let Some(t) = broker.registry.get(&name) {
                        return topic_response(broker, &t, listener);
                    }
                    // The internal topic is created with its own settings, never as an
                    // ordinary auto-created topic.
                    if name == crate::OFFSETS_TOPIC {
                        return match broker
                            .ensure_offsets_topic()
                            .then(|| broker.registry.get(&name))
                            .flatten()
                        {
                            Some(t) => topic_response(broker, &t, listener),
                            None => error_topic(
                                Some(&name),
                                Uuid::nil(),
                                ResponseError::CoordinatorNotAvailable.code(),
                            ),
                        };
                    }
                    let auto = broker.config.auto_create_topics_enable
                        && (version < 4 || req.allow_auto_topic_creation);
                    if sluice_meta::validate_topic_name(&name).is_err() {
                        return error_topic(
                            Some(&name),
                            Uuid::nil(),
                            ResponseError::InvalidTopicException.code(),
                        );
                    }
                    if !auto {
                        return error_topic(
                            Some(&name),
                            Uuid::nil(),
                            ResponseError::UnknownTopicOrPartition.code(),
                        );
                    }
                    match broker.create_topic(&name, broker.config.num_partitions, BTreeMap::new())
                    {
                        Ok(t) => topic_response(broker, &t, listener),
                        // Lost a race with another creator: answer with what exists now.
                        Err(_) if broker.registry.get(&name).is_some() => broker
                            .registry
                            .get(&name)
                            .map(|t| topic_response(broker, &t, listener))
                            .unwrap_or_default(),
                        Err(refusal) => error_topic(Some(&name), Uuid::nil(), refusal.code),
                    }
                }
                None => by_id(broker, requested.topic_id, listener),
            })
            .collect(),
    };
    let brokers = broker
        .listed_brokers(listener)
        .into_iter()
        .map(|(id, host, port, rack)| {
            MetadataResponseBroker::default()
                .with_node_id(BrokerId(id))
                .with_host(str_bytes(host))
                .with_port(i32::from(port))
                .with_rack(rack.map(str_bytes))
        })
        .collect();
    let body = MetadataResponse::default()
        .with_brokers(brokers)
        .with_cluster_id(Some(str_bytes(broker.cluster_id.clone())))
        .with_controller_id(BrokerId(broker.controller_for_clients()))
        .with_topics(topics)
        .with_cluster_authorized_operations(OPS_NOT_REQUESTED);
    Some(ResponseKind::Metadata(body))
}

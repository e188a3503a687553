//! ListPartitionReassignments (v0): `kafka-reassign-partitions --verify` and `--list`. A move
//! is under way from the moment an owner record names a new broker until that broker has
//! acquired the partition (docs/cluster.md).

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, ResponseKind,
};

use super::topic_name;
use crate::Broker;

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: ListPartitionReassignmentsRequest,
    _version: i16,
) -> Option<ResponseKind> {
    let mut ongoing: BTreeMap<String, Vec<OngoingPartitionReassignment>> = BTreeMap::new();
    if let Some(store) = broker.meta.etcd() {
        let view = store.view();
        for ((topic, p), rec) in &view.owners {
            let Some(from) = rec.owner.from else { continue };
            let wanted = match &req.topics {
                None => true,
                Some(list) => list
                    .iter()
                    .any(|t| t.name.0.as_str() == topic && t.partition_indexes.contains(p)),
            };
            if !wanted {
                continue;
            }
            ongoing.entry(topic.clone()).or_default().push(
                OngoingPartitionReassignment::default()
                    .with_partition_index(*p)
                    .with_replicas(vec![BrokerId(rec.owner.node), BrokerId(from)])
                    .with_adding_replicas(vec![BrokerId(rec.owner.node)])
                    .with_removing_replicas(vec![BrokerId(from)]),
            );
        }
    }
    let topics = ongoing
        .into_iter()
        .map(|(name, partitions)| {
            OngoingTopicReassignment::default()
                .with_name(topic_name(&name))
                .with_partitions(partitions)
        })
        .collect();
    Some(ResponseKind::ListPartitionReassignments(
        ListPartitionReassignmentsResponse::default().with_topics(topics),
    ))
}

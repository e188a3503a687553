//! ListPartitionReassignments (v0): `kafka-reassign-partitions --verify` and `--list`. A move
//! is under way from the moment it is asked for (the owner record names a target) until the
//! new owner has acquired the partition (docs/cluster.md).

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use kafka_protocol::messages::{
    BrokerId, ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, ResponseKind,
};

use crate::wire::topic_name;
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
            // Asked of the owner and not handed over yet, or handed over and not acquired.
            let (now, next) = match (rec.owner.to, rec.owner.from) {
                (Some(to), _) => (rec.owner.node, to),
                (None, Some(from)) => (from, rec.owner.node),
                (None, None) => continue,
            };
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
                    .with_replicas(vec![BrokerId(next), BrokerId(now)])
                    .with_adding_replicas(vec![BrokerId(next)])
                    .with_removing_replicas(vec![BrokerId(now)]),
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

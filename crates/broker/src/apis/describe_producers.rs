//! DescribeProducers (v0): the producers a partition's log knows, with the first offset of
//! each one's open transaction (`kafka-transactions describe-producers`, `find-hanging`).

use std::sync::Arc;

use kafka_protocol::messages::describe_producers_response::{
    PartitionResponse, ProducerState, TopicResponse,
};
use kafka_protocol::messages::{
    DescribeProducersRequest, DescribeProducersResponse, ProducerId, ResponseKind,
};

use crate::registry::missing_partition_code;
use crate::Broker;

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: DescribeProducersRequest,
    _version: i16,
) -> Option<ResponseKind> {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let state = broker.registry.get(t.name.0.as_str());
            let partitions = t
                .partition_indexes
                .iter()
                .map(|&p| {
                    let base = PartitionResponse::default().with_partition_index(p);
                    let Some(log) = state.as_ref().and_then(|s| s.log(p)) else {
                        return base.with_error_code(missing_partition_code(state.as_deref(), p));
                    };
                    if !broker.may_write(log.topic_partition()) {
                        return base.with_error_code(
                            kafka_protocol::ResponseError::NotLeaderOrFollower.code(),
                        );
                    }
                    base.with_active_producers(
                        log.producers()
                            .into_iter()
                            .map(|v| {
                                ProducerState::default()
                                    .with_producer_id(ProducerId(v.producer_id))
                                    .with_producer_epoch(i32::from(v.producer_epoch))
                                    .with_last_sequence(v.last_sequence)
                                    .with_last_timestamp(v.last_timestamp)
                                    .with_coordinator_epoch(v.coordinator_epoch)
                                    .with_current_txn_start_offset(v.current_txn_start_offset)
                            })
                            .collect(),
                    )
                })
                .collect();
            TopicResponse::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    Some(ResponseKind::DescribeProducers(
        DescribeProducersResponse::default().with_topics(topics),
    ))
}

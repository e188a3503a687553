//! DescribeCluster: this broker is the whole cluster (and its controller).

use std::sync::Arc;

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeClusterResponse, ResponseKind,
};

use super::str_bytes;
use crate::Broker;

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: DescribeClusterRequest,
    _version: i16,
) -> Option<ResponseKind> {
    let listener = broker.advertised();
    let body = DescribeClusterResponse::default()
        .with_endpoint_type(req.endpoint_type)
        .with_cluster_id(str_bytes(broker.cluster_id.clone()))
        .with_controller_id(BrokerId(broker.node_id))
        .with_brokers(vec![DescribeClusterBroker::default()
            .with_broker_id(BrokerId(broker.node_id))
            .with_host(str_bytes(listener.host))
            .with_port(i32::from(listener.port))])
        .with_cluster_authorized_operations(i32::MIN);
    Some(ResponseKind::DescribeCluster(body))
}

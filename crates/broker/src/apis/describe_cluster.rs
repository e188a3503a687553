//! DescribeCluster: the brokers (this one alone, or the cluster's registered members and those
//! whose lease ended less than `broker.session.timeout.ms` ago: `Broker::listed_brokers`) and
//! the broker clients send controller requests to (this one).

use std::sync::Arc;

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeClusterResponse, ResponseKind,
};

use crate::wire::str_bytes;
use crate::Broker;

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: DescribeClusterRequest,
    _version: i16,
    listener: &str,
) -> Option<ResponseKind> {
    let brokers = broker
        .listed_brokers(listener)
        .into_iter()
        .map(|(id, host, port, rack)| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(id))
                .with_host(str_bytes(host))
                .with_port(i32::from(port))
                .with_rack(rack.map(str_bytes))
        })
        .collect();
    let body = DescribeClusterResponse::default()
        .with_endpoint_type(req.endpoint_type)
        .with_cluster_id(str_bytes(broker.cluster_id.clone()))
        .with_controller_id(BrokerId(broker.controller_for_clients()))
        .with_brokers(brokers)
        .with_cluster_authorized_operations(i32::MIN);
    Some(ResponseKind::DescribeCluster(body))
}

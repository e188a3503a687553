//! ConsumerGroupHeartbeat (v0-v1): the KIP-848 consumer protocol. An answer that changed the
//! group's records (membership, epochs, assignments) is sent after their fsync.

use std::sync::Arc;

use kafka_protocol::messages::consumer_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, ResponseKind,
};
use kafka_protocol::ResponseError;
use sluice_group::ConsumerHeartbeat;

use crate::client::Client;
use crate::errors::group_error_code;
use crate::wire::str_bytes;
use crate::{now_ms, Broker, Reply};

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: ConsumerGroupHeartbeatRequest,
    _version: i16,
    client: &Client,
) -> Reply {
    if broker.features().level(crate::features::GROUP_VERSION) < 1 {
        // group.version 0: the consumer protocol is off, as on Kafka.
        return crate::ready(Some(ResponseKind::ConsumerGroupHeartbeat(
            ConsumerGroupHeartbeatResponse::default()
                .with_error_code(ResponseError::UnsupportedVersion.code()),
        )));
    }
    if !broker.ensure_offsets_topic() {
        return crate::ready(Some(ResponseKind::ConsumerGroupHeartbeat(
            ConsumerGroupHeartbeatResponse::default()
                .with_error_code(ResponseError::CoordinatorNotAvailable.code()),
        )));
    }
    let hb = ConsumerHeartbeat {
        group_id: req.group_id.0.to_string(),
        member_id: req.member_id.to_string(),
        member_epoch: req.member_epoch,
        instance_id: req.instance_id.as_ref().map(|s| s.to_string()),
        rack_id: req.rack_id.as_ref().map(|s| s.to_string()),
        rebalance_timeout_ms: req.rebalance_timeout_ms,
        subscribed_topic_names: req
            .subscribed_topic_names
            .as_ref()
            .map(|ts| ts.iter().map(|t| t.0.to_string()).collect()),
        subscribed_topic_regex: req.subscribed_topic_regex.as_ref().map(|s| s.to_string()),
        server_assignor: req.server_assignor.as_ref().map(|s| s.to_string()),
        owned: req.topic_partitions.as_ref().map(|ts| {
            ts.iter()
                .map(|t| (t.topic_id, t.partitions.clone()))
                .collect()
        }),
        client_id: client.id.clone(),
        client_host: client.host.clone(),
    };
    let topics = broker.topic_infos();
    let now = now_ms();
    let (result, written) = broker
        .groups
        .run(|c| match c.consumer_heartbeat(hb, &topics, now) {
            Ok((r, eff)) => (Ok(r), eff),
            Err(e) => (Err(e), Default::default()),
        });
    let resp = match result {
        Err(e) => ConsumerGroupHeartbeatResponse::default()
            .with_error_code(group_error_code(&e))
            .with_error_message(Some(str_bytes(e.to_string()))),
        Ok(r) => ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(str_bytes(r.member_id)))
            .with_member_epoch(r.member_epoch)
            .with_heartbeat_interval_ms(r.heartbeat_interval_ms)
            .with_assignment(r.assignment.map(|a| {
                Assignment::default().with_topic_partitions(
                    a.into_iter()
                        .map(|(id, ps)| {
                            TopicPartitions::default()
                                .with_topic_id(id)
                                .with_partitions(ps)
                        })
                        .collect(),
                )
            })),
    };
    let flushed = broker.flush_logs(written);
    Box::pin(async move {
        let resp = match flushed.await {
            Ok(()) => resp,
            Err(_) => ConsumerGroupHeartbeatResponse::default()
                .with_error_code(ResponseError::CoordinatorNotAvailable.code()),
        };
        Some(ResponseKind::ConsumerGroupHeartbeat(resp))
    })
}

//! ConsumerGroupDescribe (v0-v1): KIP-848 groups with members, assignments and targets.

use std::sync::Arc;

use kafka_protocol::messages::consumer_group_describe_response::{
    Assignment, DescribedGroup, Member, TopicPartitions,
};
use kafka_protocol::messages::{
    ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, ResponseKind,
};
use kafka_protocol::ResponseError;

use crate::errors::group_error_code;
use crate::wire::{opt_str, str_bytes, topic_name};
use crate::Broker;

const OPS_NOT_REQUESTED: i32 = i32::MIN;
/// Member types of KIP-1099: 0 = classic protocol, 1 = consumer protocol (-1 = unknown).
const MEMBER_TYPE_CLASSIC: i8 = 0;
const MEMBER_TYPE_CONSUMER: i8 = 1;

fn assignment(a: Vec<(uuid::Uuid, String, Vec<i32>)>) -> Assignment {
    Assignment::default().with_topic_partitions(
        a.into_iter()
            .map(|(id, name, ps)| {
                TopicPartitions::default()
                    .with_topic_id(id)
                    .with_topic_name(topic_name(&name))
                    .with_partitions(ps)
            })
            .collect(),
    )
}

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: ConsumerGroupDescribeRequest,
    _version: i16,
) -> Option<ResponseKind> {
    if broker.features().level(crate::features::GROUP_VERSION) < 1 {
        // group.version 0: the consumer protocol is off, as on Kafka.
        let groups = req
            .group_ids
            .iter()
            .map(|id| {
                DescribedGroup::default()
                    .with_group_id(id.clone())
                    .with_error_code(kafka_protocol::ResponseError::UnsupportedVersion.code())
            })
            .collect();
        return Some(ResponseKind::ConsumerGroupDescribe(
            ConsumerGroupDescribeResponse::default().with_groups(groups),
        ));
    }
    let ok = broker.ensure_offsets_topic();
    let topics = broker.topic_infos();
    let groups = req
        .group_ids
        .iter()
        .map(|id| {
            let base = DescribedGroup::default()
                .with_group_id(id.clone())
                .with_authorized_operations(OPS_NOT_REQUESTED);
            if !ok {
                return base.with_error_code(ResponseError::CoordinatorNotAvailable.code());
            }
            match broker
                .groups
                .read(|c| c.describe_consumer_group(id.0.as_str(), &topics))
            {
                Ok(v) => base
                    .with_group_state(str_bytes(v.state))
                    .with_group_epoch(v.group_epoch)
                    .with_assignment_epoch(v.assignment_epoch)
                    .with_assignor_name(str_bytes(v.assignor))
                    .with_members(
                        v.members
                            .into_iter()
                            .map(|m| {
                                Member::default()
                                    .with_member_id(str_bytes(m.member_id))
                                    .with_instance_id(opt_str(m.instance_id.as_deref()))
                                    .with_rack_id(opt_str(m.rack_id.as_deref()))
                                    .with_member_epoch(m.member_epoch)
                                    .with_client_id(str_bytes(m.client_id))
                                    .with_client_host(str_bytes(m.client_host))
                                    .with_subscribed_topic_names(
                                        m.subscribed_topic_names
                                            .iter()
                                            .map(|t| topic_name(t))
                                            .collect(),
                                    )
                                    .with_subscribed_topic_regex(opt_str(
                                        m.subscribed_topic_regex.as_deref(),
                                    ))
                                    .with_assignment(assignment(m.assignment))
                                    .with_target_assignment(assignment(m.target_assignment))
                                    .with_member_type(if m.classic {
                                        MEMBER_TYPE_CLASSIC
                                    } else {
                                        MEMBER_TYPE_CONSUMER
                                    })
                            })
                            .collect(),
                    ),
                Err(e) => base
                    .with_error_code(group_error_code(&e))
                    .with_error_message(Some(str_bytes(format!(
                        "Group {} not found or not a consumer group.",
                        id.0.as_str()
                    )))),
            }
        })
        .collect();
    Some(ResponseKind::ConsumerGroupDescribe(
        ConsumerGroupDescribeResponse::default().with_groups(groups),
    ))
}

//! DescribeGroups (v0-v6): classic groups with their members.

use std::sync::Arc;

use kafka_protocol::messages::describe_groups_response::{DescribedGroup, DescribedGroupMember};
use kafka_protocol::messages::{DescribeGroupsRequest, DescribeGroupsResponse, ResponseKind};
use kafka_protocol::ResponseError;
use sluice_group::GroupError;

use crate::errors::group_error_code;
use crate::wire::{opt_str, str_bytes};
use crate::Broker;

const OPS_NOT_REQUESTED: i32 = i32::MIN;

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: DescribeGroupsRequest,
    version: i16,
) -> Option<ResponseKind> {
    let ok = broker.ensure_offsets_topic();
    let groups = req
        .groups
        .iter()
        .map(|id| {
            let base = DescribedGroup::default()
                .with_group_id(id.clone())
                .with_authorized_operations(OPS_NOT_REQUESTED);
            if !ok {
                return base.with_error_code(ResponseError::CoordinatorNotAvailable.code());
            }
            match broker.groups.read(|c| c.describe_classic(id.0.as_str())) {
                Ok(v) => base
                    .with_group_state(str_bytes(v.state))
                    .with_protocol_type(str_bytes(v.protocol_type))
                    .with_protocol_data(str_bytes(v.protocol))
                    .with_members(
                        v.members
                            .into_iter()
                            .map(|m| {
                                DescribedGroupMember::default()
                                    .with_member_id(str_bytes(m.member_id))
                                    .with_group_instance_id(opt_str(m.instance_id.as_deref()))
                                    .with_client_id(str_bytes(m.client_id))
                                    .with_client_host(str_bytes(m.client_host))
                                    .with_member_metadata(m.metadata)
                                    .with_member_assignment(m.assignment)
                            })
                            .collect(),
                    ),
                // Before v6 an unknown group is described as Dead with no error.
                Err(GroupError::GroupIdNotFound) if version < 6 => {
                    base.with_group_state(str_bytes("Dead"))
                }
                Err(e @ GroupError::GroupTypeMismatch(_)) if version >= 6 => base
                    .with_group_state(str_bytes("Dead"))
                    .with_error_code(group_error_code(&e))
                    .with_error_message(Some(str_bytes(format!(
                        "Group {} is not a classic group.",
                        id.0.as_str()
                    )))),
                Err(GroupError::GroupTypeMismatch(_)) => base
                    .with_group_state(str_bytes("Dead"))
                    .with_error_code(ResponseError::GroupIdNotFound.code()),
                Err(e) => base
                    .with_group_state(str_bytes("Dead"))
                    .with_error_code(group_error_code(&e))
                    .with_error_message(Some(str_bytes(format!(
                        "Group {} not found.",
                        id.0.as_str()
                    )))),
            }
        })
        .collect();
    Some(ResponseKind::DescribeGroups(
        DescribeGroupsResponse::default().with_groups(groups),
    ))
}

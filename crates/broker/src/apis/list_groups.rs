//! ListGroups (v0-v5; state filter from v4, type filter from v5).

use std::sync::Arc;

use kafka_protocol::messages::list_groups_response::ListedGroup;
use kafka_protocol::messages::{GroupId, ListGroupsRequest, ListGroupsResponse, ResponseKind};

use crate::wire::str_bytes;
use crate::Broker;

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: ListGroupsRequest,
    _version: i16,
) -> Option<ResponseKind> {
    let states: Vec<String> = req.states_filter.iter().map(|s| s.to_string()).collect();
    let types: Vec<String> = req.types_filter.iter().map(|s| s.to_string()).collect();
    let groups = broker
        .groups
        .read(|c| c.list_groups(&states, &types))
        .into_iter()
        .map(|g| {
            ListedGroup::default()
                .with_group_id(GroupId(str_bytes(g.group_id)))
                .with_protocol_type(str_bytes(g.protocol_type))
                .with_group_state(str_bytes(g.state))
                .with_group_type(str_bytes(g.group_type))
        })
        .collect();
    Some(ResponseKind::ListGroups(
        ListGroupsResponse::default().with_groups(groups),
    ))
}

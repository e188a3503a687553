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
        .chain(share_groups(broker, &states, &types))
        .collect();
    Some(ResponseKind::ListGroups(
        ListGroupsResponse::default().with_groups(groups),
    ))
}

/// The share groups coordinated here (members in memory, or state stored), as ListGroups
/// lists them: type "Share", protocol type "share", state Stable or Empty.
fn share_groups(broker: &Broker, states: &[String], types: &[String]) -> Vec<ListedGroup> {
    if !types.is_empty() && !types.iter().any(|t| t.eq_ignore_ascii_case("share")) {
        return Vec::new();
    }
    let mut found: std::collections::BTreeMap<String, &'static str> = broker
        .shares
        .stored_groups()
        .into_iter()
        .map(|g| (g, "Empty"))
        .collect();
    broker.shares.groups(|g| {
        for id in g.group_ids() {
            let state = match g.get(id) {
                Some(s) if !s.members.is_empty() => "Stable",
                _ => "Empty",
            };
            found.insert(id.clone(), state);
        }
    });
    found
        .into_iter()
        .filter(|(id, _)| broker.group_coordinator(id) == Some(broker.node_id))
        .filter(|(_, state)| {
            states.is_empty() || states.iter().any(|s| s.eq_ignore_ascii_case(state))
        })
        .map(|(id, state)| {
            ListedGroup::default()
                .with_group_id(GroupId(str_bytes(id)))
                .with_protocol_type(str_bytes("share"))
                .with_group_state(str_bytes(state))
                .with_group_type(str_bytes("Share"))
        })
        .collect()
}

//! JoinGroup (v0-v9): answered at once (MEMBER_ID_REQUIRED, errors, a static member's
//! rejoin) or parked until the rebalance completes; a successful answer is sent once the
//! group's `__consumer_offsets` partition is fsynced (group commit).

use std::sync::Arc;

use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::{JoinGroupRequest, JoinGroupResponse, ResponseKind};
use sluice_group::{JoinResponse, Reply};

use crate::client::Client;
use crate::errors::group_error_code;
use crate::wire::{opt_str, str_bytes};
use crate::{now_ms, Broker, Reply as Pending};

fn response(r: JoinResponse) -> JoinGroupResponse {
    JoinGroupResponse::default()
        .with_error_code(r.error.as_ref().map_or(0, group_error_code))
        .with_generation_id(r.generation)
        .with_protocol_type(opt_str(r.protocol_type.as_deref()))
        .with_protocol_name(opt_str(r.protocol.as_deref()))
        .with_leader(str_bytes(r.leader))
        .with_skip_assignment(r.skip_assignment)
        .with_member_id(str_bytes(r.member_id))
        .with_members(
            r.members
                .into_iter()
                .map(|m| {
                    JoinGroupResponseMember::default()
                        .with_member_id(str_bytes(m.member_id))
                        .with_group_instance_id(opt_str(m.instance_id.as_deref()))
                        .with_metadata(m.metadata)
                })
                .collect(),
        )
}

fn error(code: i16, member_id: &str) -> Option<ResponseKind> {
    Some(ResponseKind::JoinGroup(
        JoinGroupResponse::default()
            .with_error_code(code)
            .with_generation_id(-1)
            .with_member_id(str_bytes(member_id)),
    ))
}

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: JoinGroupRequest,
    version: i16,
    client: &Client,
) -> Pending {
    let member_id = req.member_id.to_string();
    if !broker.ensure_offsets_topic() {
        return crate::ready(error(
            kafka_protocol::ResponseError::CoordinatorNotAvailable.code(),
            &member_id,
        ));
    }
    let group_id = req.group_id.0.to_string();
    let request = sluice_group::JoinRequest {
        group_id: group_id.clone(),
        member_id: member_id.clone(),
        instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        protocol_type: req.protocol_type.to_string(),
        protocols: req
            .protocols
            .iter()
            .map(|p| (p.name.to_string(), p.metadata.clone()))
            .collect(),
        session_timeout_ms: req.session_timeout_ms,
        // v0 has no rebalance timeout: it equals the session timeout.
        rebalance_timeout_ms: if version >= 1 {
            req.rebalance_timeout_ms
        } else {
            req.session_timeout_ms
        },
        client_id: client.id.clone(),
        client_host: client.host.clone(),
        require_known_member_id: version >= 4,
    };
    let topics = broker.topic_infos();
    let (token, rx) = broker.groups.park();
    let now = now_ms();
    let (result, _) = broker
        .groups
        .run(|c| match c.join_group(request, token, &topics, now) {
            Ok((resp, effects)) => (Ok(resp), effects),
            Err(e) => (Err(e), Default::default()),
        });
    match result {
        Err(e) => {
            broker.groups.unpark(token);
            crate::ready(error(group_error_code(&e), &member_id))
        }
        // Either answer waits for the fsync of the group metadata records it depends on.
        Ok(Some(resp)) => {
            broker.groups.unpark(token);
            let flushed = broker.flush_group(&group_id);
            Box::pin(async move {
                match flushed.await {
                    Ok(()) => Some(ResponseKind::JoinGroup(response(resp))),
                    Err(_) => error(
                        kafka_protocol::ResponseError::CoordinatorNotAvailable.code(),
                        &member_id,
                    ),
                }
            })
        }
        Ok(None) => {
            let broker = broker.clone();
            Box::pin(async move {
                match rx.await {
                    Ok(Reply::Join(r)) if broker.flush_group(&group_id).await.is_ok() => {
                        Some(ResponseKind::JoinGroup(response(r)))
                    }
                    _ => error(
                        kafka_protocol::ResponseError::CoordinatorNotAvailable.code(),
                        &member_id,
                    ),
                }
            })
        }
    }
}

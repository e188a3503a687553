//! LeaveGroup (v0-v5; batched members with instance ids from v3). The answer is sent after
//! the fsync of the records the departures caused (group commit).

use std::sync::Arc;

use kafka_protocol::messages::leave_group_response::MemberResponse;
use kafka_protocol::messages::{LeaveGroupRequest, LeaveGroupResponse, ResponseKind};
use kafka_protocol::ResponseError;
use sluice_group::LeaveMember;

use crate::errors::group_error_code;
use crate::{now_ms, Broker, Reply};

pub(crate) fn handle(broker: &Arc<Broker>, req: LeaveGroupRequest, version: i16) -> Reply {
    broker.ensure_offsets_topic();
    let members: Vec<LeaveMember> = if version >= 3 {
        req.members
            .iter()
            .map(|m| LeaveMember {
                member_id: m.member_id.to_string(),
                instance_id: m.group_instance_id.as_ref().map(|s| s.to_string()),
            })
            .collect()
    } else {
        vec![LeaveMember {
            member_id: req.member_id.to_string(),
            instance_id: None,
        }]
    };
    let now = now_ms();
    let group = req.group_id.0.to_string();
    let (result, written) = broker
        .groups
        .run(|c| match c.leave_group(&group, &members, now) {
            Ok((r, eff)) => (Ok(r), eff),
            Err(e) => (Err(e), Default::default()),
        });
    let resp = match result {
        Err(e) => LeaveGroupResponse::default().with_error_code(group_error_code(&e)),
        Ok(results) if version >= 3 => LeaveGroupResponse::default().with_members(
            req.members
                .iter()
                .zip(results)
                .map(|(m, r)| {
                    MemberResponse::default()
                        .with_member_id(m.member_id.clone())
                        .with_group_instance_id(m.group_instance_id.clone())
                        .with_error_code(r.err().as_ref().map_or(0, group_error_code))
                })
                .collect(),
        ),
        Ok(results) => LeaveGroupResponse::default().with_error_code(
            results
                .into_iter()
                .find_map(|r| r.err())
                .as_ref()
                .map_or(0, group_error_code),
        ),
    };
    let flushed = broker.flush_logs(written);
    Box::pin(async move {
        let resp = match flushed.await {
            Ok(()) => resp,
            Err(_) => LeaveGroupResponse::default()
                .with_error_code(ResponseError::CoordinatorNotAvailable.code()),
        };
        Some(ResponseKind::LeaveGroup(resp))
    })
}

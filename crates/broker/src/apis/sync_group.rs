//! SyncGroup (v0-v5): followers wait for the leader's assignment; every successful answer
//! waits for the fsync of the group metadata record holding it (group commit).

use std::sync::Arc;

use kafka_protocol::messages::{ResponseKind, SyncGroupRequest, SyncGroupResponse};
use sluice_group::{Reply, SyncResponse};

use crate::errors::group_error_code;
use crate::wire::opt_str;
use crate::{now_ms, Broker, Reply as Pending};

fn response(r: SyncResponse) -> Option<ResponseKind> {
    Some(ResponseKind::SyncGroup(
        SyncGroupResponse::default()
            .with_error_code(r.error.as_ref().map_or(0, group_error_code))
            .with_protocol_type(opt_str(r.protocol_type.as_deref()))
            .with_protocol_name(opt_str(r.protocol.as_deref()))
            .with_assignment(r.assignment),
    ))
}

fn error(code: i16) -> Option<ResponseKind> {
    Some(ResponseKind::SyncGroup(
        SyncGroupResponse::default().with_error_code(code),
    ))
}

pub(crate) fn handle(broker: &Arc<Broker>, req: SyncGroupRequest, _version: i16) -> Pending {
    if !broker.ensure_offsets_topic() {
        return crate::ready(error(
            kafka_protocol::ResponseError::CoordinatorNotAvailable.code(),
        ));
    }
    let group_id = req.group_id.0.to_string();
    let request = sluice_group::SyncRequest {
        group_id: group_id.clone(),
        member_id: req.member_id.to_string(),
        instance_id: req.group_instance_id.as_ref().map(|s| s.to_string()),
        generation: req.generation_id,
        protocol_type: req.protocol_type.as_ref().map(|s| s.to_string()),
        protocol: req.protocol_name.as_ref().map(|s| s.to_string()),
        assignments: req
            .assignments
            .iter()
            .map(|a| (a.member_id.to_string(), a.assignment.clone()))
            .collect(),
    };
    let (token, rx) = broker.groups.park();
    let now = now_ms();
    let (result, _) = broker
        .groups
        .run(|c| match c.sync_group(request, token, now) {
            Ok((resp, effects)) => (Ok(resp), effects),
            Err(e) => (Err(e), Default::default()),
        });
    match result {
        Err(e) => {
            broker.groups.unpark(token);
            crate::ready(error(group_error_code(&e)))
        }
        // Either answer waits for the fsync of the group metadata (the assignments).
        Ok(Some(r)) => {
            broker.groups.unpark(token);
            let flushed = broker.flush_group(&group_id);
            Box::pin(async move {
                match flushed.await {
                    Ok(()) => response(r),
                    Err(_) => error(kafka_protocol::ResponseError::CoordinatorNotAvailable.code()),
                }
            })
        }
        Ok(None) => {
            let broker = broker.clone();
            Box::pin(async move {
                match rx.await {
                    Ok(Reply::Sync(r)) if broker.flush_group(&group_id).await.is_ok() => {
                        response(r)
                    }
                    _ => error(kafka_protocol::ResponseError::CoordinatorNotAvailable.code()),
                }
            })
        }
    }
}

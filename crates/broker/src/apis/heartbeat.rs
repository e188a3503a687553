//! Heartbeat (v0-v4) of a classic group member.

use std::sync::Arc;

use kafka_protocol::messages::{HeartbeatRequest, HeartbeatResponse, ResponseKind};

use crate::errors::group_error_code;
use crate::{now_ms, Broker};

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: HeartbeatRequest,
    _version: i16,
) -> Option<ResponseKind> {
    broker.ensure_offsets_topic();
    let now = now_ms();
    let instance = req.group_instance_id.as_ref().map(|s| s.to_string());
    let (result, _) = broker.groups.run(|c| {
        // Sessions that ended since the last timer tick end first, as Kafka's exact timers
        // have ended them (a member that left is noticed by the others' next heartbeat).
        let expired = c.tick_group(req.group_id.0.as_str(), now);
        let result = c.heartbeat(
            req.group_id.0.as_str(),
            req.member_id.as_str(),
            instance.as_deref(),
            req.generation_id,
            now,
        );
        (result, expired)
    });
    let code = result.err().as_ref().map_or(0, group_error_code);
    Some(ResponseKind::Heartbeat(
        HeartbeatResponse::default().with_error_code(code),
    ))
}

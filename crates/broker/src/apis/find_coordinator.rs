//! FindCoordinator (v0-v6, batched keys from v4): a group's coordinator is the broker that
//! owns its `__consumer_offsets` partition, a transactional id's the broker that owns its
//! `__transaction_state` partition (a single broker: itself, once the topic exists).

use std::sync::Arc;

use kafka_protocol::messages::find_coordinator_response::Coordinator;
use kafka_protocol::messages::{
    BrokerId, FindCoordinatorRequest, FindCoordinatorResponse, ResponseKind,
};
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::ResponseError;

use crate::wire::str_bytes;
use crate::Broker;

const KEY_TYPE_GROUP: i8 = 0;
const KEY_TYPE_TRANSACTION: i8 = 1;

fn find(broker: &Broker, key: &StrBytes, key_type: i8, listener: &str) -> Coordinator {
    let base = Coordinator::default()
        .with_key(key.clone())
        .with_node_id(BrokerId(-1))
        .with_host(str_bytes(""))
        .with_port(-1);
    if key.is_empty() {
        return base.with_error_code(ResponseError::InvalidRequest.code());
    }
    let owner = match key_type {
        KEY_TYPE_GROUP => {
            if !broker.ensure_offsets_topic() {
                return base.with_error_code(ResponseError::CoordinatorNotAvailable.code());
            }
            broker.group_coordinator(key.as_str())
        }
        KEY_TYPE_TRANSACTION => {
            if !broker.ensure_txn_topic() {
                return base.with_error_code(ResponseError::CoordinatorNotAvailable.code());
            }
            broker.txn_coordinator(key.as_str())
        }
        // Share groups (KIP-932) are not supported.
        _ => return base.with_error_code(ResponseError::InvalidRequest.code()),
    };
    match broker
        .live_endpoints(listener)
        .into_iter()
        .find(|(id, _, _)| Some(*id) == owner)
    {
        Some((id, host, port)) => base
            .with_node_id(BrokerId(id))
            .with_host(str_bytes(host))
            .with_port(i32::from(port)),
        // Its partition is being failed over: clients retry.
        None => base.with_error_code(ResponseError::CoordinatorNotAvailable.code()),
    }
}

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: FindCoordinatorRequest,
    version: i16,
    listener: &str,
) -> Option<ResponseKind> {
    let mut resp = FindCoordinatorResponse::default();
    if version >= 4 {
        resp.coordinators = req
            .coordinator_keys
            .iter()
            .map(|k| find(broker, k, req.key_type, listener))
            .collect();
    } else {
        let c = find(broker, &req.key, req.key_type, listener);
        resp = resp
            .with_error_code(c.error_code)
            .with_error_message(c.error_message)
            .with_node_id(c.node_id)
            .with_host(c.host)
            .with_port(c.port);
    }
    Some(ResponseKind::FindCoordinator(resp))
}

//! UnregisterBroker (`kafka-cluster unregister --id N`): in a cluster, the broker's
//! registration ends now (its lease is revoked, as the probe of a dead broker's listener does),
//! so that the controller moves its partitions at once instead of when its lease would expire.
//! A broker still running is fenced by that and registers again, as a Kafka broker whose
//! registration was removed does. A broker not registered is answered
//! BROKER_ID_NOT_REGISTERED. A single broker is registered while it runs: its own id is
//! answered as done.

use std::sync::Arc;

use kafka_protocol::messages::{ResponseKind, UnregisterBrokerRequest, UnregisterBrokerResponse};
use kafka_protocol::ResponseError;

use crate::errors::meta_error_code;
use crate::wire::str_bytes;
use crate::Broker;

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: UnregisterBrokerRequest,
    _version: i16,
) -> Option<ResponseKind> {
    let id = req.broker_id.0;
    let not_registered = || {
        (
            ResponseError::BrokerIdNotRegistered.code(),
            format!("Broker ID {id} is not currently registered"),
        )
    };
    let outcome = match broker.meta.etcd() {
        None if id == broker.node_id => Ok(()),
        None => Err(not_registered()),
        Some(store) => store
            .refresh()
            .map_err(|e| (meta_error_code(&e), e.to_string()))
            .and_then(|view| {
                let lease = view.brokers.get(&id).map(|b| b.lease);
                let lease = lease.ok_or_else(not_registered)?;
                tracing::warn!(
                    node_id = id,
                    "UnregisterBroker: ending broker {id}'s registration (its lease is revoked)"
                );
                store
                    .revoke_lease_of(id, lease)
                    .map_err(|e| (meta_error_code(&e), e.to_string()))
            }),
    };
    let body = match outcome {
        Ok(()) => UnregisterBrokerResponse::default(),
        Err((code, message)) => UnregisterBrokerResponse::default()
            .with_error_code(code)
            .with_error_message(Some(str_bytes(message))),
    };
    Some(ResponseKind::UnregisterBroker(body))
}

//! UnregisterBroker (`kafka-cluster unregister --id N`): in a cluster, a departed broker's
//! registration ends now instead of when its lease runs out, so that its partitions move at
//! once. Only a broker that can write nothing more is unregistered: one whose lease has gone
//! unrenewed for longer than its write deadline (two thirds of the lease, which a broker stops
//! writing at when it cannot renew: docs/cluster.md, fencing). A broker that renewed more
//! recently may still be running and writing its partitions' files, so it is refused with
//! INVALID_REQUEST and a message saying when it can be unregistered (a Kafka broker would be
//! unregistered and register again; here that would let two brokers write the same files).
//! A broker not registered is answered BROKER_ID_NOT_REGISTERED; a single broker is
//! registered while it runs, and is refused as running.

use std::sync::Arc;

use kafka_protocol::messages::{ResponseKind, UnregisterBrokerRequest, UnregisterBrokerResponse};
use kafka_protocol::ResponseError;

use crate::errors::meta_error_code;
use crate::wire::str_bytes;
use crate::Broker;

type Refused = (i16, String);

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: UnregisterBrokerRequest,
    _version: i16,
) -> Option<ResponseKind> {
    let id = req.broker_id.0;
    let body = match unregister(broker, id) {
        Ok(()) => UnregisterBrokerResponse::default(),
        Err((code, message)) => UnregisterBrokerResponse::default()
            .with_error_code(code)
            .with_error_message(Some(str_bytes(message))),
    };
    Some(ResponseKind::UnregisterBroker(body))
}

fn unregister(broker: &Broker, id: i32) -> Result<(), Refused> {
    let not_registered = || {
        (
            ResponseError::BrokerIdNotRegistered.code(),
            format!("Broker ID {id} is not currently registered"),
        )
    };
    let meta_err = |e: sluice_meta::MetaError| (meta_error_code(&e), e.to_string());
    let Some(store) = broker.meta.etcd() else {
        return Err(match id == broker.node_id {
            true => running(id, "it is this broker, which is running"),
            false => not_registered(),
        });
    };
    let view = store.refresh().map_err(meta_err)?;
    let lease = view.brokers.get(&id).ok_or_else(not_registered)?.lease;
    let Some((silent_s, granted_s)) = store.lease_silence(lease).map_err(meta_err)? else {
        return Err(not_registered());
    };
    // The broker's write deadline is two thirds of its lease (`sluice.cluster.lease.ms` in
    // whole seconds, as etcd granted it) after it sent the last renewal etcd saw; the silence
    // is counted short (`lease_silence`).
    let deadline_s = (2 * granted_s + 2) / 3;
    if silent_s < deadline_s {
        return Err(running(
            id,
            &format!(
                "it renewed its registration {silent_s} s ago and may still write its partitions' files until {deadline_s} s have passed; stop it, and its registration ends with its lease ({granted_s} s) or can be ended then"
            ),
        ));
    }
    tracing::warn!(
        node_id = id,
        silent_s,
        "UnregisterBroker: ending broker {id}'s registration (its lease is revoked)"
    );
    store.revoke_lease_of(id, lease).map_err(meta_err)
}

fn running(id: i32, why: &str) -> Refused {
    (
        ResponseError::InvalidRequest.code(),
        format!("Broker {id} cannot be unregistered now: {why}."),
    )
}

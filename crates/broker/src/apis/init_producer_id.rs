//! InitProducerId for idempotent producers (with a transactional id: `apis::txn`).

use std::sync::Arc;

use kafka_protocol::messages::{
    InitProducerIdRequest, InitProducerIdResponse, ProducerId, ResponseKind,
};

use crate::errors::meta_error_code;
use crate::Broker;

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: InitProducerIdRequest,
    _version: i16,
) -> Option<ResponseKind> {
    let refused = |code: i16| {
        InitProducerIdResponse::default()
            .with_error_code(code)
            .with_producer_id(ProducerId(-1))
            .with_producer_epoch(-1)
    };
    let body =
        if req.producer_id.0 >= 0 && req.producer_epoch >= 0 && req.producer_epoch < i16::MAX - 1 {
            // KIP-360: an idempotent producer bumping its own epoch after an error.
            InitProducerIdResponse::default()
                .with_producer_id(req.producer_id)
                .with_producer_epoch(req.producer_epoch + 1)
        } else {
            match broker.meta.next_producer_id() {
                Ok(id) => InitProducerIdResponse::default()
                    .with_producer_id(ProducerId(id))
                    .with_producer_epoch(0),
                Err(e) => {
                    tracing::error!("allocating a producer id failed: {e}");
                    refused(meta_error_code(&e))
                }
            }
        };
    Some(ResponseKind::InitProducerId(body))
}

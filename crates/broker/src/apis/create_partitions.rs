//! CreatePartitions (validate-only too).

use std::sync::Arc;

use kafka_protocol::messages::create_partitions_response::CreatePartitionsTopicResult;
use kafka_protocol::messages::{CreatePartitionsRequest, CreatePartitionsResponse, ResponseKind};
use kafka_protocol::ResponseError;

use crate::wire::str_bytes;
use crate::Broker;

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: CreatePartitionsRequest,
    _version: i16,
) -> Option<ResponseKind> {
    let results = req
        .topics
        .into_iter()
        .map(|t| {
            let result = CreatePartitionsTopicResult::default().with_name(t.name.clone());
            let bad_assignment = t.assignments.as_ref().is_some_and(|a| {
                a.iter()
                    .any(|p| p.broker_ids.iter().any(|b| b.0 != broker.node_id))
            });
            if bad_assignment {
                return result
                    .with_error_code(ResponseError::InvalidReplicaAssignment.code())
                    .with_error_message(Some(str_bytes(format!(
                        "only broker {} exists",
                        broker.node_id
                    ))));
            }
            match broker.add_partitions(t.name.0.as_str(), t.count, req.validate_only) {
                Ok(()) => result,
                Err(r) => result
                    .with_error_code(r.code)
                    .with_error_message(Some(str_bytes(r.message))),
            }
        })
        .collect();
    Some(ResponseKind::CreatePartitions(
        CreatePartitionsResponse::default().with_results(results),
    ))
}

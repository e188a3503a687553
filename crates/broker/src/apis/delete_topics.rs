//! DeleteTopics, by name or (v6+) by topic id.

use std::sync::Arc;

use kafka_protocol::messages::delete_topics_response::DeletableTopicResult;
use kafka_protocol::messages::{DeleteTopicsRequest, DeleteTopicsResponse, ResponseKind};
use kafka_protocol::ResponseError;
use uuid::Uuid;

use crate::wire::{str_bytes, topic_name};
use crate::Broker;

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: DeleteTopicsRequest,
    version: i16,
) -> Option<ResponseKind> {
    let targets: Vec<(Option<String>, Uuid)> = if version >= 6 {
        req.topics
            .iter()
            .map(|t| {
                (
                    t.name.as_ref().map(|n| n.0.as_str().to_string()),
                    t.topic_id,
                )
            })
            .collect()
    } else {
        req.topic_names
            .iter()
            .map(|n| (Some(n.0.as_str().to_string()), Uuid::nil()))
            .collect()
    };
    let responses = targets
        .into_iter()
        .map(|(name, id)| {
            let state = match &name {
                Some(n) => broker.registry.get(n),
                None => broker.registry.get_by_id(id),
            };
            let result = DeletableTopicResult::default()
                .with_name(name.as_deref().map(topic_name))
                .with_topic_id(id);
            let Some(state) = state else {
                let code = if name.is_some() {
                    ResponseError::UnknownTopicOrPartition
                } else {
                    ResponseError::UnknownTopicId
                };
                return result.with_error_code(code.code());
            };
            let result = result
                .with_name(Some(topic_name(&state.meta.name)))
                .with_topic_id(state.meta.id);
            match broker.delete_topic(&state.meta.name) {
                Ok(()) => result,
                Err(r) => result
                    .with_error_code(r.code)
                    .with_error_message(Some(str_bytes(r.message))),
            }
        })
        .collect();
    Some(ResponseKind::DeleteTopics(
        DeleteTopicsResponse::default().with_responses(responses),
    ))
}

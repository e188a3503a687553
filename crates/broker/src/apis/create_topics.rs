//! CreateTopics (validate-only too).

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse, ResponseKind};
use kafka_protocol::ResponseError;

use crate::admin::Refusal;
use crate::wire::str_bytes;
use crate::Broker;

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: CreateTopicsRequest,
    _version: i16,
) -> Option<ResponseKind> {
    let mut results = Vec::with_capacity(req.topics.len());
    for t in req.topics {
        let name = t.name.0.as_str().to_string();
        let result = CreatableTopicResult::default().with_name(t.name.clone());
        let configs: BTreeMap<String, String> = t
            .configs
            .iter()
            .filter_map(|c| {
                c.value
                    .as_ref()
                    .map(|v| (c.name.as_str().to_string(), v.as_str().to_string()))
            })
            .collect();
        let (partitions, replication) = if t.assignments.is_empty() {
            let p = if t.num_partitions == -1 {
                broker.config.num_partitions
            } else {
                t.num_partitions
            };
            let r = if t.replication_factor == -1 {
                broker.config.default_replication_factor
            } else {
                t.replication_factor
            };
            (p, r)
        } else {
            let bad = t.assignments.iter().enumerate().find(|(i, a)| {
                a.partition_index != *i as i32 || a.broker_ids.iter().any(|b| b.0 != broker.node_id)
            });
            if bad.is_some() {
                let refusal = Refusal::new(
                    ResponseError::InvalidReplicaAssignment,
                    format!(
                        "replica assignment must name partitions 0..n in order and only broker {}",
                        broker.node_id
                    ),
                );
                results.push(
                    result
                        .with_error_code(refusal.code)
                        .with_error_message(Some(str_bytes(refusal.message))),
                );
                continue;
            }
            let r = t
                .assignments
                .iter()
                .map(|a| a.broker_ids.len() as i16)
                .max()
                .unwrap_or(1);
            (t.assignments.len() as i32, r)
        };
        let outcome = broker
            .check_new_topic(&name, partitions, replication, &configs)
            .and_then(|()| {
                if req.validate_only {
                    Ok(None)
                } else {
                    broker
                        .create_topic(&name, partitions, configs.clone())
                        .map(Some)
                }
            });
        match outcome {
            Ok(state) => {
                let described = sluice_config::describe_topic(&broker.effective_config(), &configs)
                    .into_iter()
                    .map(|e| {
                        CreatableTopicConfigs::default()
                            .with_name(str_bytes(e.name))
                            .with_value(e.value.map(str_bytes))
                            .with_read_only(e.read_only)
                            .with_config_source(e.source.code())
                            .with_is_sensitive(e.sensitive)
                    })
                    .collect();
                results.push(
                    result
                        .with_topic_id(state.map(|s| s.meta.id).unwrap_or_default())
                        .with_num_partitions(partitions)
                        .with_replication_factor(replication)
                        .with_configs(Some(described)),
                );
            }
            Err(refusal) => {
                results.push(
                    result
                        .with_error_code(refusal.code)
                        .with_error_message(Some(str_bytes(refusal.message)))
                        .with_num_partitions(-1)
                        .with_replication_factor(-1),
                );
            }
        }
    }
    Some(ResponseKind::CreateTopics(
        CreateTopicsResponse::default().with_topics(results),
    ))
}

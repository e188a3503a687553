//! CreateTopics (validate-only too).

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::create_topics_response::{
    CreatableTopicConfigs, CreatableTopicResult,
};
use kafka_protocol::messages::{CreateTopicsRequest, CreateTopicsResponse, ResponseKind};
use kafka_protocol::ResponseError;

use crate::admin::Refusal;
use crate::wire::str_bytes;
use crate::Broker;

/// The configs a topic asks for: those with a value (a null value leaves the default).
fn requested_configs(t: &CreatableTopic) -> BTreeMap<String, String> {
    t.configs
        .iter()
        .filter_map(|c| {
            c.value
                .as_ref()
                .map(|v| (c.name.as_str().to_string(), v.as_str().to_string()))
        })
        .collect()
}

/// A topic's partition count and replication factor: without an assignment the request's, the
/// broker's defaults for -1 (`num.partitions`, `default.replication.factor`); with one, its
/// partitions and its longest replica list. An assignment must name partitions 0..n in order
/// and only this broker (`node_id`): else INVALID_REPLICA_ASSIGNMENT.
fn layout(
    t: &CreatableTopic,
    config: &sluice_config::BrokerConfig,
    node_id: i32,
) -> Result<(i32, i16), Refusal> {
    if t.assignments.is_empty() {
        let p = if t.num_partitions == -1 {
            config.num_partitions
        } else {
            t.num_partitions
        };
        let r = if t.replication_factor == -1 {
            config.default_replication_factor
        } else {
            t.replication_factor
        };
        return Ok((p, r));
    }
    let bad = t.assignments.iter().enumerate().find(|(i, a)| {
        a.partition_index != *i as i32 || a.broker_ids.iter().any(|b| b.0 != node_id)
    });
    if bad.is_some() {
        return Err(Refusal::new(
            ResponseError::InvalidReplicaAssignment,
            format!(
                "replica assignment must name partitions 0..n in order and only broker {node_id}"
            ),
        ));
    }
    let r = t
        .assignments
        .iter()
        .map(|a| a.broker_ids.len() as i16)
        .max()
        .unwrap_or(1);
    Ok((t.assignments.len() as i32, r))
}

/// The topic's configs as the response describes them (each with its value and source, the
/// broker's effective config beneath the topic's own).
fn described_configs(
    broker: &Broker,
    configs: &BTreeMap<String, String>,
) -> Vec<CreatableTopicConfigs> {
    sluice_config::describe_topic(&broker.effective_config(), configs)
        .into_iter()
        .map(|e| {
            CreatableTopicConfigs::default()
                .with_name(str_bytes(e.name))
                .with_value(e.value.map(str_bytes))
                .with_read_only(e.read_only)
                .with_config_source(e.source.code())
                .with_is_sensitive(e.sensitive)
        })
        .collect()
}

/// One topic of the request: its layout checked ([`layout`]; refused with the code and
/// message alone), then the new topic checked (name, partitions, replication, configs) and,
/// unless `validate_only`, created; a refusal there answers -1 partitions and replicas.
fn create_one(broker: &Broker, t: &CreatableTopic, validate_only: bool) -> CreatableTopicResult {
    let name = t.name.0.as_str().to_string();
    let result = CreatableTopicResult::default().with_name(t.name.clone());
    let configs = requested_configs(t);
    let (partitions, replication) = match layout(t, &broker.config, broker.node_id) {
        Ok(layout) => layout,
        Err(refusal) => {
            return result
                .with_error_code(refusal.code)
                .with_error_message(Some(str_bytes(refusal.message)));
        }
    };
    let outcome = broker
        .check_new_topic(&name, partitions, replication, &configs)
        .and_then(|()| {
            if validate_only {
                Ok(None)
            } else {
                broker
                    .create_topic(&name, partitions, configs.clone())
                    .map(Some)
            }
        });
    match outcome {
        Ok(state) => result
            .with_topic_id(state.map(|s| s.meta.id).unwrap_or_default())
            .with_num_partitions(partitions)
            .with_replication_factor(replication)
            .with_configs(Some(described_configs(broker, &configs))),
        Err(refusal) => result
            .with_error_code(refusal.code)
            .with_error_message(Some(str_bytes(refusal.message)))
            .with_num_partitions(-1)
            .with_replication_factor(-1),
    }
}

/// CreateTopics: each topic in request order ([`create_one`]).
pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: CreateTopicsRequest,
    _version: i16,
) -> Option<ResponseKind> {
    let results = req
        .topics
        .iter()
        .map(|t| create_one(broker, t, req.validate_only))
        .collect();
    Some(ResponseKind::CreateTopics(
        CreateTopicsResponse::default().with_topics(results),
    ))
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::create_topics_request::CreatableReplicaAssignment;
    use kafka_protocol::messages::BrokerId;

    use super::*;

    fn config() -> sluice_config::BrokerConfig {
        let mut props = BTreeMap::new();
        props.insert("node.id".to_string(), "1".to_string());
        props.insert("log.dirs".to_string(), "data".to_string());
        props.insert("num.partitions".to_string(), "3".to_string());
        sluice_config::BrokerConfig::from_properties(props).unwrap()
    }

    fn assignment(index: i32, brokers: &[i32]) -> CreatableReplicaAssignment {
        CreatableReplicaAssignment::default()
            .with_partition_index(index)
            .with_broker_ids(brokers.iter().map(|b| BrokerId(*b)).collect())
    }

    /// -1 takes the broker's default; an assignment gives the partitions and the longest
    /// replica list, and must name partitions 0..n in order and only this broker.
    #[test]
    fn a_layout_takes_the_defaults_for_minus_one_and_checks_an_assignment() {
        let config = config();
        let t = CreatableTopic::default()
            .with_num_partitions(-1)
            .with_replication_factor(-1);
        assert_eq!(
            layout(&t, &config, 1).ok(),
            Some((3, config.default_replication_factor))
        );
        let t = t.with_num_partitions(5).with_replication_factor(2);
        assert_eq!(layout(&t, &config, 1).ok(), Some((5, 2)));
        let t = CreatableTopic::default()
            .with_assignments(vec![assignment(0, &[1]), assignment(1, &[1, 1])]);
        assert_eq!(layout(&t, &config, 1).ok(), Some((2, 2)));
        let invalid = ResponseError::InvalidReplicaAssignment.code();
        for bad in [
            vec![assignment(1, &[1])],
            vec![assignment(0, &[1]), assignment(1, &[2])],
        ] {
            let t = CreatableTopic::default().with_assignments(bad);
            let refusal = layout(&t, &config, 1).err().map(|r| (r.code, r.message));
            assert_eq!(
                refusal,
                Some((
                    invalid,
                    "replica assignment must name partitions 0..n in order and only broker 1"
                        .to_string()
                ))
            );
        }
    }
}

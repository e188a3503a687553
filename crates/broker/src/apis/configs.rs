//! DescribeConfigs, AlterConfigs and IncrementalAlterConfigs for topics and brokers (dynamic
//! broker configs: `crate::dynamic`), and ListConfigResources.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::list_config_resources_response::ConfigResource;
use kafka_protocol::messages::{
    alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest,
    AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, ListConfigResourcesRequest,
    ListConfigResourcesResponse, ResponseKind,
};
use kafka_protocol::ResponseError;
use sluice_config::ConfigEntry;

use crate::admin::Refusal;
use crate::wire::str_bytes;
use crate::Broker;

const TOPIC: i8 = 2;
const BROKER: i8 = 4;
const BROKER_LOGGER: i8 = 8;
const CLIENT_METRICS: i8 = 16;
const GROUP: i8 = 32;

const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

fn entry(e: ConfigEntry, synonyms: bool, docs: bool) -> DescribeConfigsResourceResult {
    let synonym_list = if synonyms {
        e.synonyms
            .iter()
            .map(|s| {
                DescribeConfigsSynonym::default()
                    .with_name(str_bytes(s.name.clone()))
                    .with_value(s.value.clone().map(str_bytes))
                    .with_source(s.source.code())
            })
            .collect()
    } else {
        Vec::new()
    };
    DescribeConfigsResourceResult::default()
        .with_name(str_bytes(e.name))
        .with_value(e.value.map(str_bytes))
        .with_read_only(e.read_only)
        .with_config_source(e.source.code())
        .with_is_sensitive(e.sensitive)
        .with_synonyms(synonym_list)
        .with_config_type(e.config_type)
        .with_documentation(if docs {
            e.documentation.map(str_bytes)
        } else {
            None
        })
}

pub(crate) fn describe(
    broker: &Arc<Broker>,
    req: DescribeConfigsRequest,
    _version: i16,
) -> Option<ResponseKind> {
    let results = req
        .resources
        .into_iter()
        .map(|r| {
            let name = r.resource_name.as_str().to_string();
            let result = DescribeConfigsResult::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name.clone());
            let entries = match r.resource_type {
                TOPIC => match broker.registry.get(&name) {
                    Some(t) => Ok(sluice_config::describe_topic(
                        &broker.effective_config(),
                        &t.meta.configs,
                    )),
                    None => Err(Refusal::new(
                        ResponseError::UnknownTopicOrPartition,
                        format!("Topic '{name}' does not exist."),
                    )),
                },
                BROKER => broker.describe_broker_configs(&name),
                GROUP => broker.describe_group_configs(&name),
                other => Err(Refusal::new(
                    ResponseError::InvalidRequest,
                    format!("resource type {other} is not supported"),
                )),
            };
            match entries {
                Ok(entries) => {
                    let wanted = r.configuration_keys.as_ref();
                    let configs = entries
                        .into_iter()
                        .filter(|e| {
                            wanted.is_none_or(|keys| keys.iter().any(|k| k.as_str() == e.name))
                        })
                        .map(|e| entry(e, req.include_synonyms, req.include_documentation))
                        .collect();
                    result.with_configs(configs)
                }
                Err(r) => result
                    .with_error_code(r.code)
                    .with_error_message(Some(str_bytes(r.message))),
            }
        })
        .collect();
    Some(ResponseKind::DescribeConfigs(
        DescribeConfigsResponse::default().with_results(results),
    ))
}

/// ListConfigResources: the config resources of the types asked for (all of Kafka's when none
/// are; v0 knows client-metrics resources only). Topics and the brokers with the client's
/// listener are listed; Sluice keeps no group, client-metrics or broker-logger configs, so
/// none of those are. A type Kafka does not list is refused with UNSUPPORTED_VERSION.
pub(crate) fn list_resources(
    broker: &Arc<Broker>,
    req: ListConfigResourcesRequest,
    version: i16,
    listener: &str,
) -> Option<ResponseKind> {
    let supported: &[i8] = match version {
        0 => &[CLIENT_METRICS],
        _ => &[TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP],
    };
    let asked = match req.resource_types.is_empty() {
        true => supported.to_vec(),
        false => req.resource_types,
    };
    if asked.iter().any(|t| !supported.contains(t)) {
        return Some(ResponseKind::ListConfigResources(
            ListConfigResourcesResponse::default()
                .with_error_code(ResponseError::UnsupportedVersion.code()),
        ));
    }
    let resource = |name: String, resource_type: i8| {
        ConfigResource::default()
            .with_resource_name(str_bytes(name))
            .with_resource_type(resource_type)
    };
    let mut resources = Vec::new();
    if asked.contains(&BROKER) {
        let mut ids: Vec<i32> = broker
            .live_endpoints(listener)
            .into_iter()
            .map(|(id, _, _)| id)
            .collect();
        ids.sort_unstable();
        resources.extend(ids.into_iter().map(|id| resource(id.to_string(), BROKER)));
    }
    if asked.contains(&TOPIC) {
        let mut names: Vec<String> = broker
            .registry
            .all()
            .iter()
            .map(|t| t.meta.name.clone())
            .collect();
        names.sort_unstable();
        resources.extend(names.into_iter().map(|n| resource(n, TOPIC)));
    }
    Some(ResponseKind::ListConfigResources(
        ListConfigResourcesResponse::default().with_config_resources(resources),
    ))
}

/// Apply a new set of overrides to a topic, or of dynamic configs to a broker or the
/// cluster-wide broker default (or only validate it).
fn apply(
    broker: &Broker,
    resource_type: i8,
    name: &str,
    validate_only: bool,
    change: impl FnOnce(&mut BTreeMap<String, String>) -> Result<(), Refusal>,
) -> Result<(), Refusal> {
    match resource_type {
        TOPIC => {}
        BROKER => return broker.alter_broker_configs(name, validate_only, change),
        GROUP => return broker.alter_group_configs(name, validate_only, change),
        other => {
            return Err(Refusal::new(
                ResponseError::InvalidRequest,
                format!("resource type {other} is not supported"),
            ))
        }
    }
    let state = broker.registry.get(name).ok_or_else(|| {
        Refusal::new(
            ResponseError::UnknownTopicOrPartition,
            format!("Topic '{name}' does not exist."),
        )
    })?;
    let mut configs = state.meta.configs.clone();
    change(&mut configs)?;
    broker.validate_topic_configs(&configs)?;
    if validate_only {
        return Ok(());
    }
    broker.set_topic_configs(name, configs)
}

pub(crate) fn alter(
    broker: &Arc<Broker>,
    req: AlterConfigsRequest,
    _version: i16,
) -> Option<ResponseKind> {
    let responses = req
        .resources
        .into_iter()
        .map(|r| {
            let name = r.resource_name.as_str().to_string();
            let outcome = apply(
                broker,
                r.resource_type,
                &name,
                req.validate_only,
                |configs| {
                    // AlterConfigs replaces the whole set of overrides.
                    configs.clear();
                    for c in &r.configs {
                        if let Some(v) = &c.value {
                            configs.insert(c.name.as_str().to_string(), v.as_str().to_string());
                        }
                    }
                    Ok(())
                },
            );
            let result = alter_configs_response::AlterConfigsResourceResponse::default()
                .with_resource_type(r.resource_type)
                .with_resource_name(r.resource_name);
            match outcome {
                Ok(()) => result,
                Err(e) => result
                    .with_error_code(e.code)
                    .with_error_message(Some(str_bytes(e.message))),
            }
        })
        .collect();
    Some(ResponseKind::AlterConfigs(
        AlterConfigsResponse::default().with_responses(responses),
    ))
}

pub(crate) fn incremental_alter(
    broker: &Arc<Broker>,
    req: IncrementalAlterConfigsRequest,
    _version: i16,
) -> Option<ResponseKind> {
    let responses = req
        .resources
        .into_iter()
        .map(|r| {
            let name = r.resource_name.as_str().to_string();
            let outcome = apply(
                broker,
                r.resource_type,
                &name,
                req.validate_only,
                |configs| {
                    for c in &r.configs {
                        let key = c.name.as_str().to_string();
                        let value = c.value.as_ref().map(|v| v.as_str().to_string());
                        match c.config_operation {
                            OP_SET => {
                                let v = value.ok_or_else(|| {
                                    Refusal::new(
                                        ResponseError::InvalidConfig,
                                        format!("Null value not supported for: {key}"),
                                    )
                                })?;
                                configs.insert(key, v);
                            }
                            OP_DELETE => {
                                configs.remove(&key);
                            }
                            OP_APPEND | OP_SUBTRACT => {
                                let current = configs.get(&key).cloned().unwrap_or_else(|| {
                                    sluice_config::describe_topic(
                                        &broker.effective_config(),
                                        &BTreeMap::new(),
                                    )
                                    .into_iter()
                                    .find(|e| e.name == key)
                                    .and_then(|e| e.value)
                                    .unwrap_or_default()
                                });
                                let mut items: Vec<String> = current
                                    .split(',')
                                    .map(str::trim)
                                    .filter(|s| !s.is_empty())
                                    .map(String::from)
                                    .collect();
                                for v in value
                                    .unwrap_or_default()
                                    .split(',')
                                    .map(str::trim)
                                    .filter(|s| !s.is_empty())
                                {
                                    if c.config_operation == OP_APPEND {
                                        if !items.iter().any(|i| i == v) {
                                            items.push(v.to_string());
                                        }
                                    } else {
                                        items.retain(|i| i != v);
                                    }
                                }
                                configs.insert(key, items.join(","));
                            }
                            other => {
                                return Err(Refusal::new(
                                    ResponseError::InvalidRequest,
                                    format!("unknown config operation {other}"),
                                ))
                            }
                        }
                    }
                    Ok(())
                },
            );
            let result =
                incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                    .with_resource_type(r.resource_type)
                    .with_resource_name(r.resource_name);
            match outcome {
                Ok(()) => result,
                Err(e) => result
                    .with_error_code(e.code)
                    .with_error_message(Some(str_bytes(e.message))),
            }
        })
        .collect();
    Some(ResponseKind::IncrementalAlterConfigs(
        IncrementalAlterConfigsResponse::default().with_responses(responses),
    ))
}

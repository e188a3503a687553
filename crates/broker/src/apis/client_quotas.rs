//! DescribeClientQuotas and AlterClientQuotas (`kafka-configs --entity-type users|clients`):
//! the quota entities in the metadata store, filtered and validated as Kafka's controller
//! (`ClientQuotaControlManager`) and metadata image (`ClientQuotasImage`) do.
//!
//! `controller_mutation_rate` and `ip` entities (`connection_creation_rate`) are refused with
//! INVALID_REQUEST: Sluice does not enforce them, and accepting a limit that does nothing
//! would mislead (docs/quotas.md).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kafka_protocol::messages::alter_client_quotas_response;
use kafka_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use kafka_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, DescribeClientQuotasRequest,
    DescribeClientQuotasResponse, ResponseKind,
};
use kafka_protocol::ResponseError;
use sluice_meta::{QuotaAlteration, QuotaEntity};

use crate::quotas::{CLIENT_ID, IP, USER};
use crate::wire::{opt_str, str_bytes};
use crate::Broker;

const MATCH_EXACT: i8 = 0;
const MATCH_DEFAULT: i8 = 1;
const MATCH_SPECIFIED: i8 = 2;

/// Quota keys of user and client-id entities, and whether each must be a whole number.
const USER_CLIENT_KEYS: &[(&str, bool)] = &[
    ("producer_byte_rate", true),
    ("consumer_byte_rate", true),
    ("request_percentage", false),
];

/// Keys Kafka knows that Sluice does not enforce: refused rather than stored.
const UNENFORCED_KEYS: &[&str] = &["controller_mutation_rate", "connection_creation_rate"];

fn describe_error(code: i16, message: String) -> Option<ResponseKind> {
    Some(ResponseKind::DescribeClientQuotas(
        DescribeClientQuotasResponse::default()
            .with_error_code(code)
            .with_error_message(Some(str_bytes(message)))
            .with_entries(None),
    ))
}

pub(crate) fn describe(
    broker: &Arc<Broker>,
    req: DescribeClientQuotasRequest,
    _version: i16,
) -> Option<ResponseKind> {
    let invalid = ResponseError::InvalidRequest.code();
    // type -> Some(name or None for the default) for exact/default matches; None: any name.
    let mut filter: BTreeMap<String, Option<Option<String>>> = BTreeMap::new();
    for c in &req.components {
        let ty = c.entity_type.to_string();
        if ty.is_empty() {
            return describe_error(invalid, "Invalid empty entity type.".into());
        }
        if filter.contains_key(&ty) {
            return describe_error(
                invalid,
                format!("Entity type {ty} cannot appear more than once in the filter."),
            );
        }
        if ![USER, CLIENT_ID, IP].contains(&ty.as_str()) {
            return describe_error(
                ResponseError::UnsupportedVersion.code(),
                format!("Unsupported entity type {ty}"),
            );
        }
        let name = c._match.as_ref().map(|m| m.to_string());
        let wanted = match (c.match_type, name) {
            (MATCH_EXACT, Some(n)) => Some(Some(n)),
            (MATCH_EXACT, None) => {
                return describe_error(
                    invalid,
                    "Request specified MATCH_TYPE_EXACT, but set match string to null.".into(),
                )
            }
            (MATCH_DEFAULT, None) => Some(None),
            (MATCH_SPECIFIED, None) => None,
            (MATCH_DEFAULT | MATCH_SPECIFIED, Some(_)) => {
                let what = if c.match_type == MATCH_DEFAULT {
                    "MATCH_TYPE_DEFAULT"
                } else {
                    "MATCH_TYPE_SPECIFIED"
                };
                return describe_error(
                    invalid,
                    format!("Request specified {what}, but also specified a match string."),
                );
            }
            (other, _) => return describe_error(invalid, format!("Unknown match type {other}")),
        };
        filter.insert(ty, wanted);
    }
    if filter.contains_key(IP) && (filter.contains_key(USER) || filter.contains_key(CLIENT_ID)) {
        return describe_error(
            invalid,
            "Invalid entity filter component combination. IP filter component should not be used with user or clientId filter component.".into(),
        );
    }
    let table = broker.quotas.table();
    let entries = table
        .iter()
        .filter(|(entity, _)| {
            (!req.strict || entity.len() == filter.len())
                && filter
                    .iter()
                    .all(|(ty, wanted)| match (entity.get(ty), wanted) {
                        (None, _) => false,
                        (Some(_), None) => true,
                        (Some(name), Some(w)) => name == w,
                    })
        })
        .map(|(entity, values)| {
            EntryData::default()
                .with_entity(
                    entity
                        .iter()
                        .map(|(ty, name)| {
                            EntityData::default()
                                .with_entity_type(str_bytes(ty.clone()))
                                .with_entity_name(opt_str(name.as_deref()))
                        })
                        .collect(),
                )
                .with_values(
                    values
                        .iter()
                        .map(|(k, v)| {
                            ValueData::default()
                                .with_key(str_bytes(k.clone()))
                                .with_value(*v)
                        })
                        .collect(),
                )
        })
        .collect();
    Some(ResponseKind::DescribeClientQuotas(
        DescribeClientQuotasResponse::default().with_entries(Some(entries)),
    ))
}

/// An entity as a request sent it: (type, name or None for the default), in its order.
type SentEntity = Vec<(String, Option<String>)>;

/// Kafka's `ClientQuotaEntity.toString()`, for messages.
fn entity_text(entity: &[(String, Option<String>)]) -> String {
    let parts: Vec<String> = entity
        .iter()
        .map(|(t, n)| format!("{t}={}", n.as_deref().unwrap_or("null")))
        .collect();
    format!("ClientQuotaEntity(entries={{{}}})", parts.join(", "))
}

/// The entity as a map, or Kafka's reason to refuse it.
fn validate_entity(entity: &[(String, Option<String>)]) -> Result<QuotaEntity, String> {
    if entity.is_empty() {
        return Err("Invalid empty client quota entity".into());
    }
    let mut out = QuotaEntity::new();
    for (ty, name) in entity {
        if out.contains_key(ty) {
            return Err(format!(
                "Invalid client quota entity, duplicate entity entry {ty}"
            ));
        }
        if ![USER, CLIENT_ID, IP].contains(&ty.as_str()) {
            return Err(format!("Unhandled client quota entity type: {ty}"));
        }
        if name.as_deref() == Some("") {
            return Err(format!("Empty {ty} not supported"));
        }
        out.insert(ty.clone(), name.clone());
    }
    if out.contains_key(IP) {
        if out.len() > 1 {
            return Err("Invalid quota entity combination, IP entity should not be combined with User or ClientId".into());
        }
        return Err("Sluice does not enforce connection_creation_rate quotas (ip entities)".into());
    }
    Ok(out)
}

/// Kafka's reason to refuse setting `key` to `value` on a user/client-id entity.
fn validate_value(key: &str, value: f64) -> Result<(), String> {
    if UNENFORCED_KEYS.contains(&key) {
        return Err(format!("Sluice does not enforce {key} quotas"));
    }
    let Some((_, whole)) = USER_CLIENT_KEYS.iter().find(|(k, _)| *k == key) else {
        return Err(format!("Invalid configuration key {key}"));
    };
    if value.is_nan() || value <= 0.0 {
        return Err(format!("Quota {key} must be greater than 0"));
    }
    if *whole {
        if value > i64::MAX as f64 {
            return Err(format!("Proposed value for {key} is too large for a LONG."));
        }
        if (value % 1.0).abs() > 1e-6 {
            return Err(format!("{key} cannot be a fractional value."));
        }
    }
    Ok(())
}

pub(crate) fn alter(
    broker: &Arc<Broker>,
    req: AlterClientQuotasRequest,
    _version: i16,
) -> Option<ResponseKind> {
    let invalid = ResponseError::InvalidRequest.code();
    // Per entry: its entity as sent, and its outcome (None: valid so far).
    let mut results: Vec<(SentEntity, Option<(i16, String)>)> = Vec::new();
    let mut alterations: Vec<(usize, QuotaAlteration)> = Vec::new();
    let mut seen: BTreeSet<QuotaEntity> = BTreeSet::new();
    for entry in &req.entries {
        let sent: Vec<(String, Option<String>)> = entry
            .entity
            .iter()
            .map(|e| {
                (
                    e.entity_type.to_string(),
                    e.entity_name.as_ref().map(|n| n.to_string()),
                )
            })
            .collect();
        let index = results.len();
        let mut keys = BTreeSet::new();
        let outcome = (|| {
            for op in &entry.ops {
                if !keys.insert(op.key.to_string()) {
                    return Err(format!(
                        "Duplicate quota key {} not updating quota for this entity {}",
                        op.key,
                        entity_text(&sent)
                    ));
                }
            }
            let entity = validate_entity(&sent)?;
            if !seen.insert(entity.clone()) {
                return Err(format!("Ignoring duplicate entity {}", entity_text(&sent)));
            }
            let mut ops = Vec::with_capacity(entry.ops.len());
            for op in &entry.ops {
                let key = op.key.to_string();
                if op.remove {
                    ops.push((key, None));
                } else {
                    validate_value(&key, op.value)?;
                    ops.push((key, Some(op.value)));
                }
            }
            Ok(QuotaAlteration { entity, ops })
        })();
        match outcome {
            Ok(a) => {
                alterations.push((index, a));
                results.push((sent, None));
            }
            Err(message) => results.push((sent, Some((invalid, message)))),
        }
    }
    if !req.validate_only && !alterations.is_empty() {
        let list: Vec<QuotaAlteration> = alterations.iter().map(|(_, a)| a.clone()).collect();
        match broker.meta.alter_client_quotas(&list) {
            Ok(table) => broker.quotas.set_table(table),
            Err(e) => {
                tracing::warn!("altering client quotas failed: {e}");
                let code = crate::errors::meta_error_code(&e);
                for (i, _) in &alterations {
                    results[*i].1 = Some((code, e.to_string()));
                }
            }
        }
    }
    let entries = results
        .into_iter()
        .map(|(sent, outcome)| {
            let (code, message) = outcome.map_or((0, None), |(c, m)| (c, Some(m)));
            alter_client_quotas_response::EntryData::default()
                .with_error_code(code)
                .with_error_message(opt_str(message.as_deref()))
                .with_entity(
                    sent.into_iter()
                        .map(|(t, n)| {
                            alter_client_quotas_response::EntityData::default()
                                .with_entity_type(str_bytes(t))
                                .with_entity_name(opt_str(n.as_deref()))
                        })
                        .collect(),
                )
        })
        .collect();
    Some(ResponseKind::AlterClientQuotas(
        AlterClientQuotasResponse::default().with_entries(entries),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_as_kafka_checks_them() {
        assert!(validate_value("producer_byte_rate", 1024.0).is_ok());
        assert!(validate_value("request_percentage", 12.5).is_ok());
        assert!(validate_value("producer_byte_rate", 10.5).is_err());
        assert!(validate_value("consumer_byte_rate", 0.0).is_err());
        assert!(validate_value("consumer_byte_rate", -1.0).is_err());
        assert!(validate_value("nonsense", 1.0).is_err());
        assert!(validate_value("controller_mutation_rate", 1.0).is_err());
        let e = |v: &[(&str, Option<&str>)]| {
            validate_entity(
                &v.iter()
                    .map(|(t, n)| (t.to_string(), n.map(str::to_string)))
                    .collect::<Vec<_>>(),
            )
        };
        assert!(e(&[("user", None), ("client-id", Some("c"))]).is_ok());
        assert!(e(&[]).is_err());
        assert!(e(&[("user", Some(""))]).is_err());
        assert!(e(&[("user", None), ("user", Some("a"))]).is_err());
        assert!(e(&[("group", Some("a"))]).is_err());
        assert!(e(&[("ip", Some("127.0.0.1"))]).is_err());
    }
}

//! DescribeAcls, CreateAcls and DeleteAcls (v1-v3), as Kafka's `AclApis` answers them.
//!
//! Without an authorizer (`authorizer.class.name` unset, its default) they answer
//! SECURITY_DISABLED, "No Authorizer is configured.", as such a Kafka broker does. With one,
//! ACLs are created and deleted in the metadata store (atomically; in a cluster by
//! compare-and-swap on one etcd record, which every broker re-reads) and put in force on this
//! broker at once. Who may call them (DESCRIBE or ALTER on the cluster) is `access.rs`'s.
//!
//! Bindings and filters with codes Kafka does not define, or UNKNOWN, are answered
//! INVALID_REQUEST; a Kafka broker refuses such a request while parsing it and closes the
//! connection.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::delete_acls_response::{
    DeleteAclsFilterResult, DeleteAclsMatchingAcl,
};
use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse, ResponseKind,
};
use kafka_protocol::ResponseError;
use sluice_acl::{AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType};

use crate::wire::str_bytes;
use crate::Broker;

const NO_AUTHORIZER: &str = "No Authorizer is configured.";

/// A refusal: Kafka's error code and message.
type Refusal = (ResponseError, String);

/// The binding a creation asks for.
fn binding(c: &AclCreation) -> AclBinding {
    AclBinding {
        resource_type: ResourceType::from_code(c.resource_type),
        resource_name: c.resource_name.to_string(),
        pattern_type: PatternType::from_code(c.resource_pattern_type),
        principal: c.principal.to_string(),
        host: c.host.to_string(),
        operation: Operation::from_code(c.operation),
        permission: Permission::from_code(c.permission_type),
    }
}

/// The filter of a DescribeAcls request or of one DeleteAcls filter.
fn filter(
    resource_type: i8,
    name: Option<&str>,
    pattern_type: i8,
    principal: Option<&str>,
    host: Option<&str>,
    operation: i8,
    permission: i8,
) -> AclFilter {
    AclFilter {
        resource_type: ResourceType::from_code(resource_type),
        resource_name: name.map(str::to_string),
        pattern_type: PatternType::from_code(pattern_type),
        principal: principal.map(str::to_string),
        host: host.map(str::to_string),
        operation: Operation::from_code(operation),
        permission: Permission::from_code(permission),
    }
}

/// Version 0 knows only LITERAL bindings (and ANY in filters), as Kafka's requests check.
fn check_version(version: i16, pattern_type: PatternType, filter: bool) -> Result<(), Refusal> {
    let allowed =
        pattern_type == PatternType::Literal || (filter && pattern_type == PatternType::Any);
    if version == 0 && !allowed {
        return Err((
            ResponseError::UnsupportedVersion,
            format!("Version 0 does not support pattern type {pattern_type}"),
        ));
    }
    Ok(())
}

fn check_filter(version: i16, f: &AclFilter) -> Result<(), Refusal> {
    check_version(version, f.pattern_type, true)?;
    f.validate()
        .map_err(|e| (ResponseError::InvalidRequest, e.to_string()))
}

pub(crate) fn describe(
    broker: &Broker,
    req: DescribeAclsRequest,
    version: i16,
) -> Option<ResponseKind> {
    if !broker.authz.enabled() {
        return Some(ResponseKind::DescribeAcls(
            DescribeAclsResponse::default()
                .with_error_code(ResponseError::SecurityDisabled.code())
                .with_error_message(Some(str_bytes("No Authorizer is configured on the broker"))),
        ));
    }
    let f = filter(
        req.resource_type_filter,
        req.resource_name_filter.as_deref(),
        req.pattern_type_filter,
        req.principal_filter.as_deref(),
        req.host_filter.as_deref(),
        req.operation,
        req.permission_type,
    );
    let body = match check_filter(version, &f) {
        Err((code, message)) => DescribeAclsResponse::default()
            .with_error_code(code.code())
            .with_error_message(Some(str_bytes(message))),
        Ok(()) => {
            DescribeAclsResponse::default().with_resources(by_resource(broker.authz.matching(&f)))
        }
    };
    Some(ResponseKind::DescribeAcls(body))
}

/// Bindings grouped by resource pattern, as DescribeAcls answers them.
fn by_resource(bindings: Vec<AclBinding>) -> Vec<DescribeAclsResource> {
    let mut grouped: BTreeMap<(ResourceType, String, PatternType), Vec<AclDescription>> =
        BTreeMap::new();
    for b in bindings {
        grouped
            .entry((b.resource_type, b.resource_name, b.pattern_type))
            .or_default()
            .push(
                AclDescription::default()
                    .with_principal(str_bytes(b.principal))
                    .with_host(str_bytes(b.host))
                    .with_operation(b.operation.code())
                    .with_permission_type(b.permission.code()),
            );
    }
    grouped
        .into_iter()
        .map(|((rt, name, pt), acls)| {
            DescribeAclsResource::default()
                .with_resource_type(rt.code())
                .with_resource_name(str_bytes(name))
                .with_pattern_type(pt.code())
                .with_acls(acls)
        })
        .collect()
}

/// The answer to a creation: success, or its refusal.
fn creation_result(outcome: &Result<(), Refusal>) -> AclCreationResult {
    match outcome {
        Ok(()) => AclCreationResult::default(),
        Err((code, message)) => AclCreationResult::default()
            .with_error_code(code.code())
            .with_error_message(Some(str_bytes(message.clone()))),
    }
}

pub(crate) fn create(
    broker: &Arc<Broker>,
    req: CreateAclsRequest,
    version: i16,
) -> Option<ResponseKind> {
    if !broker.authz.enabled() {
        let results = req
            .creations
            .iter()
            .map(|_| {
                creation_result(&Err((
                    ResponseError::SecurityDisabled,
                    NO_AUTHORIZER.into(),
                )))
            })
            .collect();
        return Some(ResponseKind::CreateAcls(
            CreateAclsResponse::default().with_results(results),
        ));
    }
    let checked: Vec<(AclBinding, Result<(), Refusal>)> = req
        .creations
        .iter()
        .map(|c| {
            let b = binding(c);
            let outcome = check_version(version, b.pattern_type, false).and_then(|()| {
                b.validate_new()
                    .map_err(|e| (ResponseError::InvalidRequest, e.to_string()))
            });
            (b, outcome)
        })
        .collect();
    let valid: Vec<&AclBinding> = checked
        .iter()
        .filter(|(_, o)| o.is_ok())
        .map(|(b, _)| b)
        .collect();
    let stored = if valid.is_empty() {
        Ok(())
    } else {
        broker
            .meta
            .alter_acls(|mut acls| {
                acls.extend(valid.iter().map(|b| (*b).clone()));
                (acls, ())
            })
            .map(|(acls, ())| {
                tracing::info!(created = valid.len(), acls = acls.len(), "ACLs created");
                broker.authz.set(acls);
            })
            .map_err(|e| {
                tracing::warn!("storing ACLs failed: {e}");
                (
                    ResponseError::UnknownServerError,
                    format!("storing the ACLs failed: {e}"),
                )
            })
    };
    let results = checked
        .iter()
        .map(|(_, outcome)| match (outcome, &stored) {
            (Ok(()), Err(refusal)) => creation_result(&Err(refusal.clone())),
            (outcome, _) => creation_result(outcome),
        })
        .collect();
    Some(ResponseKind::CreateAcls(
        CreateAclsResponse::default().with_results(results),
    ))
}

/// The filter of one DeleteAcls filter.
fn delete_filter(f: &DeleteAclsFilter) -> AclFilter {
    filter(
        f.resource_type_filter,
        f.resource_name_filter.as_deref(),
        f.pattern_type_filter,
        f.principal_filter.as_deref(),
        f.host_filter.as_deref(),
        f.operation,
        f.permission_type,
    )
}

fn matching_acl(b: &AclBinding) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl::default()
        .with_resource_type(b.resource_type.code())
        .with_resource_name(str_bytes(b.resource_name.clone()))
        .with_pattern_type(b.pattern_type.code())
        .with_principal(str_bytes(b.principal.clone()))
        .with_host(str_bytes(b.host.clone()))
        .with_operation(b.operation.code())
        .with_permission_type(b.permission.code())
}

fn filter_error(code: ResponseError, message: String) -> DeleteAclsFilterResult {
    DeleteAclsFilterResult::default()
        .with_error_code(code.code())
        .with_error_message(Some(str_bytes(message)))
}

pub(crate) fn delete(
    broker: &Arc<Broker>,
    req: DeleteAclsRequest,
    version: i16,
) -> Option<ResponseKind> {
    if !broker.authz.enabled() {
        let results = req
            .filters
            .iter()
            .map(|_| filter_error(ResponseError::SecurityDisabled, NO_AUTHORIZER.into()))
            .collect();
        return Some(ResponseKind::DeleteAcls(
            DeleteAclsResponse::default().with_filter_results(results),
        ));
    }
    let filters: Vec<Result<AclFilter, Refusal>> = req
        .filters
        .iter()
        .map(|f| {
            let f = delete_filter(f);
            check_filter(version, &f).map(|()| f)
        })
        .collect();
    // Each filter reports every ACL it matched in the ACLs as they were before the request,
    // as Kafka's controller does; all of them go in one change.
    let outcome = broker.meta.alter_acls(|acls| {
        let matched: Vec<Vec<AclBinding>> = filters
            .iter()
            .map(|f| match f {
                Ok(f) => acls.iter().filter(|b| f.matches(b)).cloned().collect(),
                Err(_) => Vec::new(),
            })
            .collect();
        let mut after = acls;
        for b in matched.iter().flatten() {
            after.remove(b);
        }
        (after, matched)
    });
    let results = match outcome {
        Ok((acls, matched)) => {
            let removed: usize = matched.iter().map(Vec::len).sum();
            if removed > 0 {
                tracing::info!(removed, acls = acls.len(), "ACLs deleted");
            }
            broker.authz.set(acls);
            filters
                .iter()
                .zip(matched)
                .map(|(f, matched)| match f {
                    Ok(_) => DeleteAclsFilterResult::default()
                        .with_matching_acls(matched.iter().map(matching_acl).collect()),
                    Err((code, message)) => filter_error(*code, message.clone()),
                })
                .collect()
        }
        Err(e) => {
            tracing::warn!("deleting ACLs failed: {e}");
            filters
                .iter()
                .map(|f| match f {
                    Ok(_) => filter_error(
                        ResponseError::UnknownServerError,
                        format!("deleting the ACLs failed: {e}"),
                    ),
                    Err((code, message)) => filter_error(*code, message.clone()),
                })
                .collect()
        }
    };
    Some(ResponseKind::DeleteAcls(
        DeleteAclsResponse::default().with_filter_results(results),
    ))
}

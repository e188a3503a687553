//! DescribeAcls, CreateAcls and DeleteAcls (v1-v3) as Apache Kafka answers them without an
//! authorizer (`authorizer.class.name` unset, its default): SECURITY_DISABLED, "No Authorizer
//! is configured." Sluice has no authorizer yet (docs/compatibility.md), so `kafka-acls` and
//! admin clients get the answer they get from such a Kafka broker instead of a closed
//! connection.

use kafka_protocol::messages::create_acls_response::AclCreationResult;
use kafka_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use kafka_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse, ResponseKind,
};
use kafka_protocol::ResponseError;

use super::str_bytes;

const NO_AUTHORIZER: &str = "No Authorizer is configured.";

pub(crate) fn describe(_req: DescribeAclsRequest, _version: i16) -> Option<ResponseKind> {
    Some(ResponseKind::DescribeAcls(
        DescribeAclsResponse::default()
            .with_error_code(ResponseError::SecurityDisabled.code())
            .with_error_message(Some(str_bytes(NO_AUTHORIZER))),
    ))
}

pub(crate) fn create(req: CreateAclsRequest, _version: i16) -> Option<ResponseKind> {
    let results = req
        .creations
        .iter()
        .map(|_| {
            AclCreationResult::default()
                .with_error_code(ResponseError::SecurityDisabled.code())
                .with_error_message(Some(str_bytes(NO_AUTHORIZER)))
        })
        .collect();
    Some(ResponseKind::CreateAcls(
        CreateAclsResponse::default().with_results(results),
    ))
}

pub(crate) fn delete(req: DeleteAclsRequest, _version: i16) -> Option<ResponseKind> {
    let results = req
        .filters
        .iter()
        .map(|_| {
            DeleteAclsFilterResult::default()
                .with_error_code(ResponseError::SecurityDisabled.code())
                .with_error_message(Some(str_bytes(NO_AUTHORIZER)))
        })
        .collect();
    Some(ResponseKind::DeleteAcls(
        DeleteAclsResponse::default().with_filter_results(results),
    ))
}

//! ApiVersions: the versions table from the wire layer.

use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, ResponseKind};
use std::sync::Arc;

use crate::Broker;

pub(crate) fn handle(
    _broker: &Arc<Broker>,
    _req: ApiVersionsRequest,
    _version: i16,
) -> Option<ResponseKind> {
    let body = ApiVersionsResponse::default().with_api_keys(sluice_wire::api_version_entries());
    Some(ResponseKind::ApiVersions(body))
}

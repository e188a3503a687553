//! ApiVersions: the versions table from the wire layer, and (v3+) the features Sluice
//! supports with the levels finalized now (`crate::features`). As Kafka, v3 leaves out the
//! supported features whose lowest level is 0 (older clients fail to read them, KAFKA-17492),
//! and no finalized feature at level 0 is listed.

use kafka_protocol::messages::api_versions_response::{FinalizedFeatureKey, SupportedFeatureKey};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, ResponseKind};
use std::sync::Arc;

use crate::features::SUPPORTED;
use crate::wire::str_bytes;
use crate::Broker;

pub(crate) fn handle(
    broker: &Arc<Broker>,
    _req: ApiVersionsRequest,
    version: i16,
) -> Option<ResponseKind> {
    let mut body = ApiVersionsResponse::default().with_api_keys(sluice_wire::api_version_entries());
    if version >= 3 {
        let features = broker.features();
        let supported = SUPPORTED
            .iter()
            .filter(|f| version >= 4 || f.min > 0)
            .map(|f| {
                SupportedFeatureKey::default()
                    .with_name(str_bytes(f.name))
                    .with_min_version(f.min)
                    .with_max_version(f.max)
            })
            .collect();
        let finalized = features
            .levels
            .iter()
            .filter(|(_, level)| **level > 0)
            .map(|(name, level)| {
                FinalizedFeatureKey::default()
                    .with_name(str_bytes(*name))
                    .with_max_version_level(*level)
                    .with_min_version_level(*level)
            })
            .collect();
        body = body
            .with_supported_features(supported)
            .with_finalized_features_epoch(features.epoch)
            .with_finalized_features(finalized);
    }
    Some(ResponseKind::ApiVersions(body))
}

//! ApiVersions: the versions table from the wire layer, and (v3+) the features: Sluice
//! supports `transaction.version` 0-2 and finalizes the level `sluice.transaction.version`
//! names (2 by default, as a new Kafka 4.x cluster: Kafka 4.x producers then use KIP-890's
//! transaction version 2).

use kafka_protocol::messages::api_versions_response::{FinalizedFeatureKey, SupportedFeatureKey};
use kafka_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, ResponseKind};
use std::sync::Arc;

use crate::wire::str_bytes;
use crate::Broker;

const TRANSACTION_VERSION: &str = "transaction.version";
/// The epoch of the finalized features: they never change while a broker runs.
const FEATURES_EPOCH: i64 = 1;

pub(crate) fn handle(
    broker: &Arc<Broker>,
    _req: ApiVersionsRequest,
    version: i16,
) -> Option<ResponseKind> {
    let mut body = ApiVersionsResponse::default().with_api_keys(sluice_wire::api_version_entries());
    let level = broker.config.transactions.version;
    if version >= 3 {
        // Kafka lists no finalized feature at level 0.
        let finalized = (level > 0)
            .then(|| {
                FinalizedFeatureKey::default()
                    .with_name(str_bytes(TRANSACTION_VERSION))
                    .with_max_version_level(level)
                    .with_min_version_level(level)
            })
            .into_iter()
            .collect();
        body = body
            .with_supported_features(vec![SupportedFeatureKey::default()
                .with_name(str_bytes(TRANSACTION_VERSION))
                .with_min_version(0)
                .with_max_version(2)])
            .with_finalized_features_epoch(FEATURES_EPOCH)
            .with_finalized_features(finalized);
    }
    Some(ResponseKind::ApiVersions(body))
}

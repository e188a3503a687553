//! The dynamic broker configs as the cluster's view holds them: each entity's configs (a
//! broker id, or [`DEFAULT_ENTITY`] for the cluster-wide default), their names in etcd keys
//! and in the single broker's file, and the view's reading of their records. A leaf that the
//! view (`cluster.rs`) and the store of these configs (`broker_configs.rs`) both build on.

use std::collections::BTreeMap;

use crate::etcd::Kv;
use crate::MetaError;

/// The entity of the cluster-wide defaults (Kafka's empty resource name).
pub const DEFAULT_ENTITY: &str = "";

/// The entity that holds the finalized feature levels set with UpdateFeatures (feature name
/// to level, and `epoch`), kept with the dynamic broker configs so that it is stored and
/// carried to every broker as they are; its name can be no broker id.
pub const FEATURES_ENTITY: &str = "<features>";

/// How the default entity is named in etcd keys and in the file (Kafka's ZooKeeper name).
const DEFAULT_NAME: &str = "<default>";

/// Configs of one entity.
pub type EntityConfigs = BTreeMap<String, String>;

/// Every entity's dynamic configs.
pub type BrokerConfigs = BTreeMap<String, EntityConfigs>;

/// Where the records lie under `P/`.
pub(crate) const RECORD_PREFIX: &str = "broker_configs/";

/// An entity's name in keys and in the file.
pub(crate) fn entity_name(entity: &str) -> &str {
    if entity == DEFAULT_ENTITY {
        DEFAULT_NAME
    } else {
        entity
    }
}

/// The entity a name in keys or in the file stands for.
pub(crate) fn entity_of(name: &str) -> String {
    if name == DEFAULT_NAME {
        DEFAULT_ENTITY.to_string()
    } else {
        name.to_string()
    }
}

/// A record of the cluster's view under `P/` (`rest` is the key after it): the entity and its
/// configs if it is one of these.
pub(crate) fn view_record(
    rest: &str,
    kv: &Kv,
) -> Result<Option<(String, EntityConfigs)>, MetaError> {
    let Some(name) = rest.strip_prefix(RECORD_PREFIX) else {
        return Ok(None);
    };
    let configs: EntityConfigs = serde_json::from_slice(&kv.value)
        .map_err(|e| MetaError::Etcd(format!("the etcd record {} does not parse: {e}", kv.key)))?;
    Ok(Some((entity_of(name), configs)))
}

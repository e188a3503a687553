//! Feature flags (KIP-584): the features Sluice supports, the levels finalized in the cluster,
//! and UpdateFeatures (`kafka-features upgrade|downgrade|disable`).
//!
//! Supported: `transaction.version` 0-2 (finalized at `sluice.transaction.version` until
//! changed), `group.version` 0-1 (finalized at 1: the KIP-848 consumer protocol, which
//! ConsumerGroupHeartbeat refuses with UNSUPPORTED_VERSION at 0, as Kafka does) and
//! `share.version` 0-1 (finalized at 1: share groups, whose APIs refuse at 0). Levels set
//! with UpdateFeatures are kept as the [`FEATURES_ENTITY`] of the dynamic broker configs' store
//! (the embedded store's file on one broker, an etcd record in a cluster), beside an epoch that
//! counts the changes; every broker takes them up when it takes up those configs.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::update_features_response::UpdatableFeatureResult;
use kafka_protocol::messages::{ResponseKind, UpdateFeaturesRequest, UpdateFeaturesResponse};
use kafka_protocol::ResponseError;
use sluice_config::BrokerConfig;
use sluice_meta::broker_configs::{BrokerConfigs, EntityConfigs, FEATURES_ENTITY};

use crate::admin::Refusal;
use crate::errors::meta_error_code;
use crate::wire::str_bytes;
use crate::Broker;

pub(crate) const TRANSACTION_VERSION: &str = "transaction.version";
pub(crate) const GROUP_VERSION: &str = "group.version";
pub(crate) const SHARE_VERSION: &str = "share.version";

/// A supported feature: its name and the levels this broker can run at.
pub(crate) struct Feature {
    pub(crate) name: &'static str,
    pub(crate) min: i16,
    pub(crate) max: i16,
}

/// Every feature Sluice supports.
pub(crate) const SUPPORTED: &[Feature] = &[
    Feature {
        name: GROUP_VERSION,
        min: 0,
        max: 1,
    },
    Feature {
        name: SHARE_VERSION,
        min: 0,
        max: 1,
    },
    Feature {
        name: TRANSACTION_VERSION,
        min: 0,
        max: 2,
    },
];

/// The key of the epoch in the stored entity (feature names hold dots; this one has none).
const EPOCH_KEY: &str = "epoch";
/// The epoch of the levels before any UpdateFeatures.
const FIRST_EPOCH: i64 = 1;

/// Upgrade types of UpdateFeatures v1+ (v0's AllowDowngrade is a safe downgrade).
const UPGRADE: i8 = 1;
const SAFE_DOWNGRADE: i8 = 2;
const UNSAFE_DOWNGRADE: i8 = 3;

/// The finalized level of every supported feature, and the epoch of that set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Finalized {
    pub(crate) levels: BTreeMap<&'static str, i16>,
    pub(crate) epoch: i64,
}

impl Finalized {
    /// The levels `stored` (the features entity's configs) sets over the defaults of
    /// `config`. A stored value that does not parse or is out of range keeps the default,
    /// logged.
    pub(crate) fn read(config: &BrokerConfig, stored: &EntityConfigs) -> Finalized {
        let mut levels = BTreeMap::new();
        for f in SUPPORTED {
            let default = match f.name {
                TRANSACTION_VERSION => config.transactions.version,
                _ => f.max,
            };
            let level = match stored.get(f.name).map(|v| v.parse::<i16>()) {
                None => default,
                Some(Ok(l)) if (f.min..=f.max).contains(&l) => l,
                Some(_) => {
                    tracing::error!(
                        feature = f.name,
                        "ignoring the stored level of a feature, which is not one this broker supports"
                    );
                    default
                }
            };
            levels.insert(f.name, level);
        }
        let epoch = stored
            .get(EPOCH_KEY)
            .and_then(|e| e.parse().ok())
            .unwrap_or(FIRST_EPOCH);
        Finalized { levels, epoch }
    }

    /// As [`Finalized::read`], from every entity's dynamic configs.
    pub(crate) fn of(config: &BrokerConfig, all: &BrokerConfigs) -> Finalized {
        Finalized::read(
            config,
            &all.get(FEATURES_ENTITY).cloned().unwrap_or_default(),
        )
    }

    pub(crate) fn level(&self, name: &str) -> i16 {
        self.levels.get(name).copied().unwrap_or(0)
    }
}

/// Why `name` cannot be set to `level` from `current` with `upgrade_type`, in Kafka's words
/// (FeatureControlManager), if it cannot.
fn check_update(
    node: i32,
    current: &Finalized,
    name: &str,
    level: i16,
    upgrade_type: i8,
) -> Option<String> {
    let reason = (|| {
        if !(UPGRADE..=UNSAFE_DOWNGRADE).contains(&upgrade_type) {
            return Some("The controller does not support the given upgrade type.".to_string());
        }
        if level < 0 {
            return Some("A feature version cannot be less than 0.".to_string());
        }
        let Some(f) = SUPPORTED.iter().find(|f| f.name == name) else {
            return Some(format!(
                "Local controller {node} does not support this feature."
            ));
        };
        if !(f.min..=f.max).contains(&level) {
            return Some(format!(
                "Local controller {node} only supports versions {}-{}",
                f.min, f.max
            ));
        }
        let now = current.level(name);
        if level < now && upgrade_type == UPGRADE {
            return Some("Can't downgrade the version of this feature without setting the upgrade type to either safe or unsafe downgrade.".to_string());
        }
        if level > now && upgrade_type != UPGRADE {
            return Some("Can't downgrade to a newer version.".to_string());
        }
        None
    })()?;
    Some(format!(
        "Invalid update version {level} for feature {name}. {reason}"
    ))
}

/// UpdateFeatures: every update checked, then all stored together (or none: the first that
/// fails fails the request, as Kafka's controller does), unless only validated.
pub(crate) fn update(
    broker: &Arc<Broker>,
    req: UpdateFeaturesRequest,
    version: i16,
) -> Option<ResponseKind> {
    let names: Vec<_> = req
        .feature_updates
        .iter()
        .map(|u| u.feature.clone())
        .collect();
    let body = match broker.update_features(&req, version) {
        Ok(()) => UpdateFeaturesResponse::default().with_results(if version <= 1 {
            names
                .into_iter()
                .map(|n| UpdatableFeatureResult::default().with_feature(n))
                .collect()
        } else {
            Vec::new()
        }),
        Err(r) => UpdateFeaturesResponse::default()
            .with_error_code(r.code)
            .with_error_message(Some(str_bytes(r.message))),
    };
    Some(ResponseKind::UpdateFeatures(body))
}

impl Broker {
    /// The finalized feature levels in force on this broker.
    pub(crate) fn features(&self) -> Finalized {
        self.features.read().clone()
    }

    fn update_features(&self, req: &UpdateFeaturesRequest, version: i16) -> Result<(), Refusal> {
        let stored = self
            .meta
            .broker_configs_of(FEATURES_ENTITY)
            .map_err(|e| Refusal {
                code: meta_error_code(&e),
                message: e.to_string(),
            })?;
        let current = Finalized::read(&self.config, &stored.configs);
        // Only the levels set here are stored: a feature never set keeps following each
        // broker's own default (`sluice.transaction.version`).
        let mut to_store = stored.configs.clone();
        for u in &req.feature_updates {
            let upgrade_type = match (version, u.allow_downgrade) {
                (0, true) => SAFE_DOWNGRADE,
                (0, false) => UPGRADE,
                _ => u.upgrade_type,
            };
            let name = u.feature.as_str();
            if let Some(reason) = check_update(
                self.node_id,
                &current,
                name,
                u.max_version_level,
                upgrade_type,
            ) {
                tracing::warn!("UpdateFeatures refused: {reason}");
                return Err(Refusal::new(
                    ResponseError::InvalidUpdateVersion,
                    format!("The update failed for all features since the following feature had an error: {reason}"),
                ));
            }
            to_store.insert(name.to_string(), u.max_version_level.to_string());
        }
        let next = Finalized::read(&self.config, &to_store);
        if req.validate_only || to_store == stored.configs {
            return Ok(());
        }
        to_store.insert(
            EPOCH_KEY.to_string(),
            current.epoch.saturating_add(1).to_string(),
        );
        self.meta
            .set_broker_configs(FEATURES_ENTITY, to_store, stored.version)
            .map_err(|e| Refusal {
                code: meta_error_code(&e),
                message: e.to_string(),
            })?;
        tracing::info!(levels = ?next.levels, "finalized feature levels set");
        match &self.cluster {
            Some(cluster) => cluster.reconcile(self),
            None => {
                self.take_up_dynamic_configs(&self.meta.broker_configs());
            }
        }
        Ok(())
    }

    /// Take up the finalized levels stored in `all` (every entity's dynamic configs), if they
    /// changed: the transaction coordinator runs at the new `transaction.version` from its
    /// next request on.
    pub(crate) fn take_up_features(&self, all: &BrokerConfigs) {
        let next = Finalized::of(&self.config, all);
        let mut now = self.features.write();
        if *now == next {
            return;
        }
        self.txns
            .set_transaction_version(next.level(TRANSACTION_VERSION));
        tracing::info!(levels = ?next.levels, epoch = next.epoch, "finalized feature levels changed");
        *now = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finalized(tv: i16, gv: i16) -> Finalized {
        Finalized {
            levels: [
                (TRANSACTION_VERSION, tv),
                (GROUP_VERSION, gv),
                (SHARE_VERSION, 1),
            ]
            .into(),
            epoch: 1,
        }
    }

    #[test]
    fn updates_are_checked_as_kafka_checks_them() {
        let now = finalized(2, 1);
        assert_eq!(check_update(1, &now, TRANSACTION_VERSION, 2, UPGRADE), None);
        assert_eq!(
            check_update(1, &now, TRANSACTION_VERSION, 1, SAFE_DOWNGRADE),
            None
        );
        assert_eq!(
            check_update(1, &now, GROUP_VERSION, 0, UNSAFE_DOWNGRADE),
            None
        );
        let refused = |name, level, t| check_update(1, &now, name, level, t).unwrap();
        assert!(refused(TRANSACTION_VERSION, 1, UPGRADE).contains("Can't downgrade the version"));
        assert!(refused(TRANSACTION_VERSION, 3, UPGRADE).contains("only supports versions 0-2"));
        assert!(refused(TRANSACTION_VERSION, -1, UPGRADE).contains("cannot be less than 0"));
        assert!(refused(TRANSACTION_VERSION, 2, 4).contains("upgrade type"));
        assert!(refused("streams.version", 1, UPGRADE).contains("does not support this feature"));
        assert!(refused(SHARE_VERSION, 2, UPGRADE).contains("only supports versions 0-1"));
        let older = finalized(0, 0);
        assert!(check_update(1, &older, GROUP_VERSION, 1, SAFE_DOWNGRADE)
            .unwrap()
            .contains("Can't downgrade to a newer version"));
        assert_eq!(
            refused(GROUP_VERSION, 2, UPGRADE),
            "Invalid update version 2 for feature group.version. Local controller 1 only supports versions 0-1"
        );
    }

    #[test]
    fn stored_levels_read_back_and_bad_ones_keep_the_default() {
        let config = BrokerConfig::default();
        let f = Finalized::read(&config, &EntityConfigs::new());
        assert_eq!(f.level(TRANSACTION_VERSION), config.transactions.version);
        assert_eq!(f.level(GROUP_VERSION), 1);
        assert_eq!(f.epoch, FIRST_EPOCH);
        let stored: EntityConfigs = [
            (TRANSACTION_VERSION.to_string(), "0".to_string()),
            (EPOCH_KEY.to_string(), "7".to_string()),
        ]
        .into();
        let read = Finalized::read(&config, &stored);
        assert_eq!(read.level(TRANSACTION_VERSION), 0);
        assert_eq!(read.level(GROUP_VERSION), 1, "not stored: the default");
        assert_eq!(read.epoch, 7);
        let mut bad = stored.clone();
        bad.insert(GROUP_VERSION.to_string(), "9".to_string());
        bad.insert(EPOCH_KEY.to_string(), "x".to_string());
        let read = Finalized::read(&config, &bad);
        assert_eq!((read.level(GROUP_VERSION), read.epoch), (1, FIRST_EPOCH));
    }
}

//! Dynamic broker configs: the broker's effective configuration (server.properties with the
//! cluster-wide and per-broker configs set at run time on top), changing it through
//! AlterConfigs/IncrementalAlterConfigs on BROKER resources, and applying a change without a
//! restart.
//!
//! A change is stored in the metadata store first (`sluice_meta::broker_configs`: the embedded
//! store's file, or etcd), then taken up: at once on a single broker; in a cluster by every
//! broker's reconciliation, which the etcd watch starts on each of them, as it does for topic
//! config changes. Taking a change up recomputes the effective configuration, gives every
//! topic without an override of a changed default its new effective config (its open logs
//! switch at once: the next roll, retention check or flush uses it), and reconfigures the log
//! cleaner's run-time settings.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use parking_lot::{Mutex, RwLock};
use sluice_config::{BrokerConfig, ConfigEntry};
use sluice_meta::broker_configs::{BrokerConfigs, EntityConfigs, DEFAULT_ENTITY};

use crate::admin::Refusal;
use crate::errors::meta_error_code;
use crate::registry::TopicState;
use crate::Broker;

/// The effective configuration, replaced as a whole when a dynamic config changes.
#[derive(Debug)]
pub(crate) struct DynamicConfig {
    effective: RwLock<Arc<BrokerConfig>>,
    /// One change taken up at a time (requests and the cluster thread).
    apply: Mutex<()>,
}

impl DynamicConfig {
    pub(crate) fn new(effective: BrokerConfig) -> DynamicConfig {
        DynamicConfig {
            effective: RwLock::new(Arc::new(effective)),
            apply: Mutex::new(()),
        }
    }
}

/// `config` (the static one) with the dynamic configs of the default entity and of its own
/// node applied. Stored values were validated when set; should they no longer be valid (an
/// older or newer version stored them) the static config is kept and the problem logged.
pub(crate) fn effective(config: &BrokerConfig, all: &BrokerConfigs) -> BrokerConfig {
    let default = all.get(DEFAULT_ENTITY).cloned().unwrap_or_default();
    let mine = all
        .get(&config.node_id.to_string())
        .cloned()
        .unwrap_or_default();
    match config.with_dynamic(&default, &mine) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!("ignoring the stored dynamic broker configs: {e}");
            config.clone()
        }
    }
}

/// The log cleaner's settings in `config`.
pub(crate) fn cleaner_config(config: &BrokerConfig) -> sluice_store::CleanerConfig {
    let c = &config.cleaner;
    sluice_store::CleanerConfig {
        enable: c.enable && c.threads > 0,
        threads: usize::from(c.threads.max(1)),
        dedupe_buffer_size: c.dedupe_buffer_size,
        io_buffer_load_factor: c.io_buffer_load_factor,
        io_buffer_size: c.io_buffer_size as usize,
        io_max_bytes_per_second: c.io_max_bytes_per_second,
        backoff_ms: c.backoff_ms,
        ..sluice_store::CleanerConfig::default()
    }
}

/// A BROKER resource name: the cluster-wide default (empty) or a broker id.
fn entity(name: &str) -> Result<String, Refusal> {
    if name.is_empty() {
        return Ok(DEFAULT_ENTITY.to_string());
    }
    match name.parse::<i32>() {
        Ok(id) if id >= 0 => Ok(id.to_string()),
        _ => Err(Refusal::new(
            ResponseError::InvalidRequest,
            format!("Broker id must be an integer, but it is: {name}"),
        )),
    }
}

impl Broker {
    /// The configuration in force now: server.properties with the dynamic broker configs.
    pub(crate) fn effective_config(&self) -> Arc<BrokerConfig> {
        self.dynamic.effective.read().clone()
    }

    /// Take up the dynamic configs stored now (`all`, every entity's). Returns the effective
    /// configuration; when it changed, the log cleaner is reconfigured and, on a single broker,
    /// every topic's effective config recomputed (in a cluster the reconciliation that calls
    /// this does that for the partitions this broker holds).
    pub(crate) fn take_up_dynamic_configs(&self, all: &BrokerConfigs) -> Arc<BrokerConfig> {
        let _one = self.dynamic.apply.lock();
        let current = self.effective_config();
        let default = all.get(DEFAULT_ENTITY).cloned().unwrap_or_default();
        let mine = all
            .get(&self.node_id.to_string())
            .cloned()
            .unwrap_or_default();
        if current.dynamic_default == default && current.dynamic_broker == mine {
            return current;
        }
        let next = Arc::new(effective(&self.config, all));
        *self.dynamic.effective.write() = next.clone();
        tracing::info!(
            default = ?next.dynamic_default,
            broker = ?next.dynamic_broker,
            "dynamic broker configs changed"
        );
        if next.cleaner != current.cleaner {
            self.logs.start_cleaner(cleaner_config(&next));
        }
        if self.cluster.is_none() {
            for state in self.registry.all() {
                let config = sluice_config::topic_config(&next, &state.meta.configs);
                if config == state.config {
                    continue;
                }
                // Applied to the topic as it is now (its logs may have been re-opened, its
                // overrides changed, since it was read).
                if self
                    .registry
                    .update(&state.meta.name, |now| TopicState {
                        meta: now.meta.clone(),
                        config: sluice_config::topic_config(&next, &now.meta.configs),
                        logs: now.logs.clone(),
                    })
                    .is_some()
                {
                    self.apply_topic_config(&state.meta.name);
                }
            }
        }
        next
    }

    /// DescribeConfigs of a BROKER resource: this broker's (every config, with sources), or
    /// the cluster-wide default one (the dynamic defaults).
    pub(crate) fn describe_broker_configs(&self, name: &str) -> Result<Vec<ConfigEntry>, Refusal> {
        let config = self.effective_config();
        if name.is_empty() {
            return Ok(config.describe_dynamic_default());
        }
        if name == self.node_id.to_string() {
            return Ok(config.describe());
        }
        let _ = entity(name)?;
        Err(Refusal::new(
            ResponseError::InvalidRequest,
            format!(
                "Unexpected broker id, expected {} or empty string, but received {name}",
                self.node_id
            ),
        ))
    }

    /// Change the dynamic configs of a BROKER resource (`name`: a broker id, or empty for the
    /// cluster-wide default): `change` edits the stored set; the result is validated as Kafka
    /// validates it, stored unless `validate_only`, and taken up.
    pub(crate) fn alter_broker_configs(
        &self,
        name: &str,
        validate_only: bool,
        change: impl FnOnce(&mut BTreeMap<String, String>) -> Result<(), Refusal>,
    ) -> Result<(), Refusal> {
        let entity = entity(name)?;
        let stored = self.meta.broker_configs_of(&entity).map_err(|e| Refusal {
            code: meta_error_code(&e),
            message: e.to_string(),
        })?;
        let mut next: EntityConfigs = stored.configs.clone();
        change(&mut next)?;
        sluice_config::validate_dynamic_broker_configs(&next, entity != DEFAULT_ENTITY)
            .map_err(|e| Refusal::new(ResponseError::InvalidRequest, e.to_string()))?;
        if validate_only || next == stored.configs {
            return Ok(());
        }
        self.meta
            .set_broker_configs(&entity, next, stored.version)
            .map_err(|e| Refusal {
                code: meta_error_code(&e),
                message: e.to_string(),
            })?;
        tracing::info!(
            entity = if entity.is_empty() {
                "<default>"
            } else {
                entity.as_str()
            },
            "dynamic broker configs set"
        );
        match &self.cluster {
            Some(cluster) => cluster.reconcile(self),
            None => {
                self.take_up_dynamic_configs(&self.meta.broker_configs());
            }
        }
        Ok(())
    }
}

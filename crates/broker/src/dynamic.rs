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
//!
//! A listener's keystore and truststore (`listener.name.<listener>.ssl.keystore.location` and
//! the others Kafka reconfigures) are changed for one broker: the broker named checks the new
//! stores through the server's [`ListenerCertificates`] before storing the change (they load,
//! Kafka's checks pass), refusing it otherwise as Kafka does, and replaces the listener's
//! certificates when it takes the change up. A change for this broker also re-reads the stores
//! its listeners name: a keystore replaced in place is taken up by setting the same config
//! again, as on Kafka (which also reloads on a change of the broker's other configs; a store
//! that fails then is logged, not refused). A change made through another broker is checked
//! by this one only when it takes it up (a failure is logged and the listener keeps its
//! certificate).

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use parking_lot::{Mutex, RwLock};
use sluice_config::{BrokerConfig, ConfigEntry, TlsConfig};
use sluice_meta::broker_configs::{BrokerConfigs, EntityConfigs, DEFAULT_ENTITY};

use crate::admin::Refusal;
use crate::errors::meta_error_code;
use crate::registry::TopicState;
use crate::Broker;

/// The TLS listeners' certificates, which the server loads and serves
/// (`sluice_server::Certificates`).
pub trait ListenerCertificates: Send + Sync + std::fmt::Debug {
    /// Load the stores `settings` name for listener `listener` and check that they may replace
    /// the listener's (Kafka's checks: the subject and alternative names kept, ...); with
    /// `apply`, replace them for the connections accepted from now on. Ok(false): the stores
    /// hold what the listener serves already. The error is a sentence for the operator.
    fn reload(&self, listener: &str, settings: &TlsConfig, apply: bool) -> Result<bool, String>;
}

/// Kafka's refusal of a dynamic config that cannot be taken up (`Invalid dynamic
/// configuration`), with the reason.
fn invalid_dynamic(reason: impl std::fmt::Display) -> Refusal {
    Refusal::new(
        ResponseError::InvalidRequest,
        format!("Invalid dynamic configuration: {reason}"),
    )
}

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
        self.take_up_features(all);
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
        if next.listener_tls != current.listener_tls {
            self.take_up_listener_tls(&next.listener_tls, Some(&current.listener_tls));
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

    /// Install the server's TLS listeners and give them the keystores and truststores set
    /// at run time (stored before this start).
    pub fn set_certificates(&self, certs: Arc<dyn ListenerCertificates>) {
        if self.certs.set(certs).is_ok() {
            let _one = self.dynamic.apply.lock();
            let effective = self.effective_config();
            self.take_up_listener_tls(&effective.listener_tls, Some(&self.config.listener_tls));
        }
    }

    /// Replace the certificates of each TLS listener whose settings in `tls` differ from those
    /// in `before` (every listener without `before`: their stores are read again, a file
    /// replaced in place is taken up). A listener whose new stores do not load or pass the
    /// checks keeps its certificate; the error is logged.
    fn take_up_listener_tls(
        &self,
        tls: &BTreeMap<String, TlsConfig>,
        before: Option<&BTreeMap<String, TlsConfig>>,
    ) {
        let Some(certs) = self.certs.get() else {
            return;
        };
        for (listener, settings) in tls {
            if before.is_some_and(|b| b.get(listener) == Some(settings)) {
                continue;
            }
            if let Err(e) = certs.reload(listener, settings, true) {
                tracing::error!(
                    listener = %listener,
                    "the listener keeps its TLS certificate: its new keystore or truststore cannot be taken up: {e}"
                );
            }
        }
    }

    /// Check the TLS settings of this broker's listeners as a change of its dynamic configs
    /// from `stored` to `next` leaves them: they read, and the stores they name load and may
    /// replace the listeners' (nothing is replaced). Checked: each listener whose settings the
    /// change touches, and every one when it changes nothing (the same config set again, to
    /// have a file replaced in place taken up); a change of other configs does not fail for a
    /// store that no longer loads (its take-up logs that, as Kafka's does). Returns the
    /// listeners' settings to take up, None when they do not read (and the change leaves them).
    fn check_listener_tls(
        &self,
        stored: &EntityConfigs,
        next: &EntityConfigs,
    ) -> Result<Option<BTreeMap<String, TlsConfig>>, Refusal> {
        let again = stored == next;
        let before = self.config.listener_tls_with(stored).ok();
        let tls = match self.config.listener_tls_with(next) {
            Ok(tls) => tls,
            Err(e) if again || before.is_some() => return Err(invalid_dynamic(e)),
            Err(_) => return Ok(None),
        };
        if let Some(certs) = self.certs.get() {
            for (listener, settings) in &tls {
                let touched = before.as_ref().and_then(|b| b.get(listener)) != Some(settings);
                if touched || again {
                    certs
                        .reload(listener, settings, false)
                        .map_err(|e| invalid_dynamic(format!("listener {listener}: {e}")))?;
                }
            }
        }
        Ok(Some(tls))
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
        // This broker's own listeners: their new keystores and truststores are checked here,
        // and read again even when no value changed (a file replaced in place), as Kafka
        // reloads them on any change of the broker's configs.
        let tls = match entity == self.node_id.to_string() {
            true => self.check_listener_tls(&stored.configs, &next)?,
            false => None,
        };
        if validate_only {
            return Ok(());
        }
        if next == stored.configs {
            if let Some(tls) = &tls {
                let _one = self.dynamic.apply.lock();
                self.take_up_listener_tls(tls, None);
            }
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
        if let Some(tls) = &tls {
            // What was stored, whatever view the cluster's reconciliation had; files whose
            // settings did not change are read again too.
            let _one = self.dynamic.apply.lock();
            self.take_up_listener_tls(tls, None);
        }
        Ok(())
    }
}

//! Dynamic broker configs (`kafka-configs --entity-type brokers --alter`), as Kafka's
//! `DynamicBrokerConfig` defines them: which names may change at run time, at which level
//! (cluster-wide default or one broker), how the levels combine with server.properties, and
//! the synonyms DescribeConfigs lists.
//!
//! Four kinds of names can be set at run time (the same as in Apache Kafka 4.3):
//! - broker configs Sluice uses and applies at run time (`BrokerDef::dynamic`): the defaults of
//!   topic configs (`log.retention.ms`, `log.segment.bytes`, `message.max.bytes`, ...) and
//!   some of the log cleaner's;
//! - a listener's keystore and truststore (`listener.name.<listener>.ssl.keystore.location`
//!   and the others of `tls::RECONFIGURABLE`), for one broker only: applied to the listener's
//!   TLS settings ([`BrokerConfig::listener_tls_with`]); the server loads and checks them;
//! - Kafka's run-time configs of features Sluice does not have, or does not change at run time
//!   (thread pools, other TLS and SASL settings, tiered storage, replication throttles):
//!   stored and described, without effect, as the same names in server.properties are
//!   accepted without effect ([`DYNAMIC_UNUSED`]);
//! - names Kafka does not know: Kafka stores them and describes them as sensitive, so does
//!   Sluice.
//!
//! Everything else is refused with Kafka's `Cannot update these configs dynamically`.

use std::collections::BTreeMap;

use crate::catalog::{self, Type};
use crate::{BrokerConfig, ConfigEntry, ConfigError, ConfigSource, ConfigSynonym};

/// The entity name under which the cluster-wide default broker configs are stored (the
/// resource name of DescribeConfigs/AlterConfigs is empty for it).
pub const DEFAULT_ENTITY: &str = "";

/// Kafka 4.3's broker configs that can change at run time but name features Sluice does not
/// have: accepted, stored, described, no effect. Sorted.
const DYNAMIC_UNUSED: &[&str] = &[
    "background.threads",
    "config.providers",
    "cordoned.log.dirs",
    "follower.fetch.last.tiered.offset.enable",
    "follower.replication.throttled.rate",
    "group.consumer.assignment.interval.ms",
    "group.coordinator.cached.buffer.max.bytes",
    "group.share.assignment.interval.ms",
    "group.streams.assignment.interval.ms",
    "leader.replication.throttled.rate",
    "max.connection.creation.rate",
    "metric.reporters",
    "num.io.threads",
    "num.network.threads",
    "num.replica.fetchers",
    "principal.builder.class",
    "producer.id.expiration.ms",
    "remote.fetch.max.wait.ms",
    "remote.list.offsets.request.timeout.ms",
    "remote.log.index.file.cache.total.size.bytes",
    "remote.log.manager.copier.thread.pool.size",
    "remote.log.manager.copy.max.bytes.per.second",
    "remote.log.manager.expiration.thread.pool.size",
    "remote.log.manager.fetch.max.bytes.per.second",
    "remote.log.manager.follower.thread.pool.size",
    "remote.log.reader.threads",
    "replica.alter.log.dirs.io.max.bytes.per.second",
    "share.coordinator.cached.buffer.max.bytes",
    "transaction.partition.verification.enable",
];

/// Prefixes of Kafka's run-time configs Sluice has no use for (TLS, SASL, per-listener).
const DYNAMIC_UNUSED_PREFIXES: &[&str] = &["listener.name.", "sasl.", "ssl."];

/// Kafka's `ssl.*` broker configs that never change at run time (every other `ssl.*` name
/// does, in Kafka).
const SSL_STATIC: &[&str] = &[
    "ssl.allow.dn.changes",
    "ssl.allow.san.changes",
    "ssl.principal.mapping.rules",
];

/// Configs Kafka changes only per broker, never as a cluster-wide default.
const PER_BROKER_ONLY: &[&str] = &["listener.security.protocol.map", "listeners"];

/// Listener configs that may be a cluster-wide default even with a listener prefix.
const CLUSTER_LEVEL_LISTENER_CONFIGS: &[&str] = &[
    "max.connection.creation.rate",
    "max.connections",
    "num.network.threads",
];

pub(crate) fn is_dynamic_unused(name: &str) -> bool {
    DYNAMIC_UNUSED.contains(&name) || DYNAMIC_UNUSED_PREFIXES.iter().any(|p| name.starts_with(p))
}

/// Whether Kafka knows `name` as a broker config (in any form Sluice recognises).
fn is_known(name: &str) -> bool {
    catalog::broker_def(name).is_some() || catalog::is_ignored(name) || is_dynamic_unused(name)
}

/// A config Sluice does not use is shown without its value when Kafka would hide it: names
/// Kafka does not know (it cannot tell their type) and passwords.
pub(crate) fn is_sensitive_unused(name: &str) -> bool {
    !is_known(name)
        || name.contains("password")
        || name.ends_with("jaas.config")
        || crate::tls::is_secret(name)
}

/// The DescribeConfigs documentation of a config outside the catalogue.
pub(crate) fn unused_doc(name: &str) -> String {
    if crate::tls::is_reconfigurable_listener_config(name) {
        "A listener's keystore or truststore setting, taken up at run time (docs/security.md)."
            .to_string()
    } else {
        "Accepted for compatibility with Kafka; not used by Sluice.".to_string()
    }
}

/// DescribeConfigs `config_type` of a config Sluice does not use: UNKNOWN (0) for names Kafka
/// does not know, PASSWORD for secrets, else STRING.
pub(crate) fn unused_type_code(name: &str, sensitive: bool) -> i8 {
    if !is_known(name) {
        0
    } else if sensitive {
        Type::Password.code()
    } else {
        Type::String.code()
    }
}

/// Kafka's `brokerConfigSynonyms`: the names of one setting, most precise first.
pub(crate) fn broker_synonyms(name: &str) -> Vec<&str> {
    match name {
        "log.roll.ms" | "log.roll.hours" => vec!["log.roll.ms", "log.roll.hours"],
        "log.roll.jitter.ms" | "log.roll.jitter.hours" => {
            vec!["log.roll.jitter.ms", "log.roll.jitter.hours"]
        }
        "log.flush.interval.ms" => vec!["log.flush.interval.ms", "log.flush.scheduler.interval.ms"],
        "log.retention.ms" | "log.retention.minutes" | "log.retention.hours" => {
            vec![
                "log.retention.ms",
                "log.retention.minutes",
                "log.retention.hours",
            ]
        }
        other => vec![other],
    }
}

/// The value `name` has at one source, if it is set there.
fn layer_value(config: &BrokerConfig, source: ConfigSource, name: &str) -> Option<String> {
    let set = |layer: &BTreeMap<String, String>| layer.get(name).map(|v| v.trim().to_string());
    match source {
        ConfigSource::DynamicBroker => set(&config.dynamic_broker),
        ConfigSource::DynamicDefaultBroker => set(&config.dynamic_default),
        ConfigSource::StaticBroker => set(&config.given),
        ConfigSource::Default => {
            catalog::broker_def(name).and_then(|d| d.default.map(str::to_string))
        }
        ConfigSource::Topic | ConfigSource::Group => None,
    }
}

/// Kafka's `configSynonyms`: every entry of `names` set at each source, by source (dynamic
/// for this broker, dynamic default, static, built-in default) then by name, from the first
/// entry named `name` on. `per_broker` false keeps the dynamic defaults only (the
/// cluster-wide resource).
pub(crate) fn config_synonyms(
    config: &BrokerConfig,
    name: &str,
    names: &[&str],
    per_broker: bool,
) -> Vec<ConfigSynonym> {
    let mut out = Vec::new();
    for source in [
        ConfigSource::DynamicBroker,
        ConfigSource::DynamicDefaultBroker,
        ConfigSource::StaticBroker,
        ConfigSource::Default,
    ] {
        if !per_broker && source != ConfigSource::DynamicDefaultBroker {
            continue;
        }
        for n in names {
            if let Some(value) = layer_value(config, source, n) {
                out.push(ConfigSynonym {
                    name: (*n).to_string(),
                    value: (!catalog::is_password(n)).then_some(value),
                    source,
                });
            }
        }
    }
    let first = out.iter().position(|s| s.name == name).unwrap_or(out.len());
    out.split_off(first)
}

/// Check a resulting set of dynamic configs for one entity (`per_broker`: a broker id, else
/// the cluster-wide default) as Kafka does: read-only names first, then names that exist per
/// broker only, then each value against its type and range.
pub fn validate_dynamic_broker_configs(
    props: &BTreeMap<String, String>,
    per_broker: bool,
) -> Result<(), ConfigError> {
    // Kafka refuses a per-broker-only config at the cluster level first, whether or not it
    // may change at run time.
    if !per_broker {
        let per_broker_only: Vec<String> = props
            .keys()
            .filter(|n| {
                PER_BROKER_ONLY.contains(&n.as_str())
                    || n.strip_prefix("listener.name.")
                        .and_then(|rest| rest.split_once('.'))
                        .is_some_and(|(_, base)| !CLUSTER_LEVEL_LISTENER_CONFIGS.contains(&base))
            })
            .cloned()
            .collect();
        if !per_broker_only.is_empty() {
            return Err(ConfigError::PerBrokerOnly {
                names: per_broker_only,
            });
        }
    }
    let not_dynamic: Vec<String> = props
        .keys()
        .filter(|n| match catalog::broker_def(n) {
            Some(def) => !def.dynamic,
            None => {
                (catalog::is_ignored(n) && !is_dynamic_unused(n))
                    || SSL_STATIC.contains(&n.as_str())
            }
        })
        .cloned()
        .collect();
    if !not_dynamic.is_empty() {
        return Err(ConfigError::NotDynamic { names: not_dynamic });
    }
    let unprefixed: Vec<String> = props
        .keys()
        .filter(|n| crate::tls::is_reconfigurable_without_prefix(n))
        .cloned()
        .collect();
    if !unprefixed.is_empty() {
        return Err(ConfigError::SecurityWithoutListenerPrefix { names: unprefixed });
    }
    for (name, value) in props {
        if let Some(def) = catalog::broker_def(name) {
            catalog::parse_value(name, def.ty, def.check, value)?;
        }
    }
    Ok(())
}

/// See [`BrokerConfig::with_dynamic`].
pub(crate) fn apply(
    base: &BrokerConfig,
    default: &BTreeMap<String, String>,
    broker: &BTreeMap<String, String>,
) -> Result<BrokerConfig, ConfigError> {
    let mut merged = base.given.clone();
    for layer in [default, broker] {
        for (name, value) in layer {
            // Only configs Sluice uses and may change at run time reach the typed config
            // (names it does not know would be warned about on every change).
            if catalog::broker_def(name).is_some_and(|d| d.dynamic) {
                merged.insert(name.clone(), value.clone());
            }
        }
    }
    let mut config = crate::broker::build(merged)?;
    config.given = base.given.clone();
    config.unknown = base.unknown.clone();
    config.dynamic_default = default.clone();
    config.dynamic_broker = broker.clone();
    // A listener's keystore or truststore set at run time (this broker's only: the cluster-wide
    // default cannot hold listener configs). Settings that do not read leave the listeners as
    // they are, the rest of the dynamic configs applied; a change is checked when it is made.
    match listener_tls_with(base, broker) {
        Ok(tls) => config.listener_tls = tls,
        Err(e) => tracing::error!(
            "the listeners keep their TLS settings: the dynamic ones of this broker do not read: {e}"
        ),
    }
    Ok(config)
}

/// See [`BrokerConfig::listener_tls_with`].
pub(crate) fn listener_tls_with(
    base: &BrokerConfig,
    broker: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, crate::TlsConfig>, ConfigError> {
    let mut props = base.given.clone();
    for (name, value) in broker {
        if crate::tls::is_reconfigurable_listener_config(name) {
            props.insert(name.clone(), value.clone());
        }
    }
    crate::broker::listeners_tls(&props, &base.listeners, &base.listener_protocols)
}

/// DescribeConfigs of the cluster-wide default resource: each dynamic default with its
/// value, synonyms of that level only.
pub(crate) fn describe_default(config: &BrokerConfig) -> Vec<ConfigEntry> {
    config
        .dynamic_default
        .iter()
        .map(|(name, raw)| {
            let def = catalog::broker_def(name);
            let sensitive =
                def.map_or_else(|| is_sensitive_unused(name), |d| d.ty == Type::Password);
            let value = (!sensitive).then(|| raw.trim().to_string());
            let synonyms = config_synonyms(config, name, &broker_synonyms(name), false);
            ConfigEntry {
                name: name.clone(),
                value,
                source: synonyms.first().map_or(ConfigSource::Default, |s| s.source),
                read_only: def.map_or(!is_dynamic_unused(name), |d| !d.dynamic),
                sensitive,
                config_type: def.map_or_else(|| unused_type_code(name, sensitive), |d| d.ty.code()),
                documentation: Some(def.map_or_else(|| unused_doc(name), |d| d.doc())),
                synonyms,
            }
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn lists_are_sorted_and_disjoint_from_the_catalogue() {
        for w in DYNAMIC_UNUSED.windows(2) {
            assert!(w[0] < w[1], "{} / {}", w[0], w[1]);
        }
        for name in DYNAMIC_UNUSED {
            assert!(catalog::broker_def(name).is_none(), "{name}");
        }
    }

    #[test]
    fn refusals_name_the_configs_as_kafka_does() {
        let e =
            validate_dynamic_broker_configs(&map(&[("num.partitions", "3")]), true).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Cannot update these configs dynamically: [num.partitions]"
        );
        let e = validate_dynamic_broker_configs(
            &map(&[("log.dirs", "/x"), ("log.retention.hours", "1")]),
            false,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "Cannot update these configs dynamically: [log.dirs, log.retention.hours]"
        );
        let e = validate_dynamic_broker_configs(
            &map(&[("listener.name.a.ssl.keystore.location", "/k")]),
            false,
        )
        .unwrap_err();
        assert!(matches!(e, ConfigError::PerBrokerOnly { .. }), "{e}");
        assert!(validate_dynamic_broker_configs(
            &map(&[("listener.name.a.ssl.keystore.location", "/k")]),
            true
        )
        .is_ok());
        assert!(
            validate_dynamic_broker_configs(&map(&[("log.segment.bytes", "100")]), true).is_err()
        );
        assert!(validate_dynamic_broker_configs(
            &map(&[
                ("log.segment.bytes", "2097152"),
                ("num.io.threads", "4"),
                ("foo.bar", "x")
            ]),
            false
        )
        .is_ok());
        // A listener's keystore and truststore change only with the listener's prefix; the
        // TLS settings Kafka reads at startup only are refused.
        let e = validate_dynamic_broker_configs(
            &map(&[
                ("ssl.keystore.location", "/k"),
                ("ssl.truststore.password", "p"),
            ]),
            true,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "These security configs can be dynamically updated only per-listener using the listener prefix: [ssl.keystore.location, ssl.truststore.password]"
        );
        let e = validate_dynamic_broker_configs(
            &map(&[("ssl.principal.mapping.rules", "DEFAULT")]),
            true,
        )
        .unwrap_err();
        assert!(matches!(e, ConfigError::NotDynamic { .. }), "{e}");
        assert!(validate_dynamic_broker_configs(
            &map(&[
                ("listener.name.ssl.ssl.keystore.location", "/k"),
                ("listener.name.ssl.ssl.principal.mapping.rules", "DEFAULT"),
                ("ssl.cipher.suites", "x"),
            ]),
            true
        )
        .is_ok());
        // Kafka may change these at run time; Sluice cannot (yet), and says so.
        for name in [
            "listeners",
            "listener.security.protocol.map",
            "max.connections",
            "log.cleaner.threads",
        ] {
            assert!(
                validate_dynamic_broker_configs(&map(&[(name, "1")]), true).is_err(),
                "{name}"
            );
        }
    }

    #[test]
    fn layers_combine_by_precedence_and_show_as_synonyms() {
        let base = BrokerConfig::from_properties(map(&[
            ("log.segment.bytes", "2097152"),
            ("log.retention.hours", "5"),
        ]))
        .unwrap();
        let c = base
            .with_dynamic(
                &map(&[
                    ("log.retention.ms", "3600000"),
                    ("log.segment.bytes", "4194304"),
                ]),
                &map(&[("log.segment.bytes", "3145728"), ("num.io.threads", "4")]),
            )
            .unwrap();
        assert_eq!(c.topic_defaults.segment_bytes, 3_145_728);
        assert_eq!(c.topic_defaults.retention_ms, 3_600_000);
        let entries = c.describe();
        let get = |n: &str| entries.iter().find(|e| e.name == n).unwrap().clone();
        let e = get("log.segment.bytes");
        assert_eq!(e.source, ConfigSource::DynamicBroker);
        assert_eq!(e.value.as_deref(), Some("3145728"));
        let sources: Vec<(ConfigSource, &str)> = e
            .synonyms
            .iter()
            .map(|s| (s.source, s.value.as_deref().unwrap()))
            .collect();
        assert_eq!(
            sources,
            vec![
                (ConfigSource::DynamicBroker, "3145728"),
                (ConfigSource::DynamicDefaultBroker, "4194304"),
                (ConfigSource::StaticBroker, "2097152"),
                (ConfigSource::Default, "1073741824"),
            ]
        );
        let e = get("log.retention.ms");
        assert_eq!(e.source, ConfigSource::DynamicDefaultBroker);
        assert_eq!(e.value.as_deref(), Some("3600000"));
        let e = get("num.io.threads");
        assert_eq!(
            (e.source, e.value.as_deref()),
            (ConfigSource::DynamicBroker, Some("4"))
        );
        let topic = crate::describe_topic(&c, &BTreeMap::new());
        let t = topic.iter().find(|e| e.name == "retention.ms").unwrap();
        assert_eq!(t.source, ConfigSource::DynamicDefaultBroker);
        let names: Vec<&str> = t.synonyms.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "log.retention.ms",
                "log.retention.hours",
                "log.retention.hours"
            ]
        );
        let d = c.describe_dynamic_default();
        assert_eq!(d.len(), 2);
        assert!(d
            .iter()
            .all(|e| e.source == ConfigSource::DynamicDefaultBroker && e.synonyms.len() == 1));
    }
}

//! Broker DescribeConfigs: each config with its value and source, over the static
//! properties ([`crate::broker`]) and the dynamic layers ([`crate::dynamic`]).

use std::collections::BTreeMap;

use crate::catalog;
use crate::dynamic;
use crate::{BrokerConfig, ConfigEntry, ConfigSource, Listener};

fn join_listeners(listeners: &[Listener]) -> String {
    listeners
        .iter()
        .map(Listener::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The value DescribeConfigs shows for a broker config: typed fields where the broker holds
/// them, else the given value as parsed, else the default.
fn broker_value(config: &BrokerConfig, def: &catalog::BrokerDef) -> Option<String> {
    let typed = match def.name {
        "node.id" | "broker.id" => Some(config.node_id.to_string()),
        "listeners" => Some(join_listeners(&config.listeners)),
        "advertised.listeners" => {
            return config
                .given
                .contains_key(def.name)
                .then(|| join_listeners(&config.advertised_listeners))
        }
        "num.partitions" => Some(config.num_partitions.to_string()),
        "default.replication.factor" => Some(config.default_replication_factor.to_string()),
        "auto.create.topics.enable" => Some(config.auto_create_topics_enable.to_string()),
        "message.max.bytes" => Some(config.message_max_bytes.to_string()),
        "socket.request.max.bytes" => Some(config.socket_request_max_bytes.to_string()),
        "log.retention.check.interval.ms" => {
            Some(config.log_retention_check_interval_ms.to_string())
        }
        "log.flush.offset.checkpoint.interval.ms" => {
            Some(config.log_flush_offset_checkpoint_interval_ms.to_string())
        }
        "max.connections" => Some(config.max_connections.to_string()),
        "max.connections.per.ip" => Some(config.max_connections_per_ip.to_string()),
        "max.connections.per.ip.overrides" => Some(
            config
                .max_connections_per_ip_overrides
                .iter()
                .map(|(h, n)| format!("{h}:{n}"))
                .collect::<Vec<_>>()
                .join(","),
        ),
        "sluice.log.open.files.max" => Some(config.log_open_files_max.to_string()),
        "sluice.broker.partitions.max" => Some(config.broker_partitions_max.to_string()),
        "connections.max.idle.ms" => Some(config.connections_max_idle_ms.to_string()),
        "connection.failed.authentication.delay.ms" => {
            Some(config.failed_authentication_delay_ms.to_string())
        }
        "sluice.delete.retry.initial.ms" => Some(config.delete_retry_initial_ms.to_string()),
        "sluice.delete.retry.max.ms" => Some(config.delete_retry_max_ms.to_string()),
        "sluice.log.cache.bytes" => Some(config.log_cache_bytes.to_string()),
        "sluice.log.cache.min.partition.bytes" => {
            Some(config.log_cache_min_partition_bytes.to_string())
        }
        "sluice.log.writeback.bytes" => Some(config.log_writeback_bytes.to_string()),
        "sluice.log.recovery.point.bytes" => Some(config.log_recovery_point_bytes.to_string()),
        "sluice.log.recovery.point.interval.ms" => {
            Some(config.log_recovery_point_interval_ms.to_string())
        }
        "sluice.log.unwritten.bytes.max" => Some(config.log_unwritten_bytes_max.to_string()),
        "sluice.worker.threads" => Some(config.worker_threads.to_string()),
        "num.recovery.threads.per.data.dir" => {
            Some(config.recovery_threads_per_data_dir.to_string())
        }
        "sluice.metrics.listener" => return config.metrics_listener.clone(),
        "sluice.console.listener" => return config.console_listener.clone(),
        "sluice.console.read.only" => Some(config.console_read_only.to_string()),
        "sluice.console.hosts" => Some(config.console_hosts.join(",")),
        "sluice.console.connections.max" => Some(config.console_connections_max.to_string()),
        "sluice.console.session.idle.ms" => Some(config.console_session_idle_ms.to_string()),
        "sluice.console.sessions.max" => Some(config.console_sessions_max.to_string()),
        "sluice.console.session.recheck.ms" => Some(config.console_session_recheck_ms.to_string()),
        "sluice.console.sessions.per.user.max" => {
            Some(config.console_sessions_per_user_max.to_string())
        }
        "sluice.metrics.lag.remote.partitions.max" => {
            Some(config.metrics_lag_remote_partitions_max.to_string())
        }
        "sluice.metrics.lag.remote.cache.ms" => {
            Some(config.metrics_lag_remote_cache_ms.to_string())
        }
        "log.cleaner.enable" => Some(config.cleaner.enable.to_string()),
        "log.cleaner.threads" => Some(config.cleaner.threads.to_string()),
        "cluster.id" => return config.cluster_id.clone(),
        _ => None,
    };
    if typed.is_some() {
        return typed;
    }
    let set = config
        .dynamic_broker
        .get(def.name)
        .or_else(|| config.dynamic_default.get(def.name))
        .or_else(|| config.given.get(def.name));
    match set {
        Some(raw) => Some(
            catalog::parse_value(def.name, def.ty, def.check, raw)
                .map(|v| v.render())
                .unwrap_or_else(|_| raw.trim().to_string()),
        ),
        None => def.default.map(str::to_string),
    }
}

pub(crate) fn describe(config: &BrokerConfig) -> Vec<ConfigEntry> {
    let mut entries: Vec<ConfigEntry> = catalog::BROKER_DEFS
        .iter()
        .map(|def| {
            let synonyms = dynamic::config_synonyms(
                config,
                def.name,
                &dynamic::broker_synonyms(def.name),
                true,
            );
            let sensitive = def.ty == catalog::Type::Password;
            ConfigEntry {
                name: def.name.to_string(),
                value: broker_value(config, def).filter(|_| !sensitive),
                source: synonyms.first().map_or(ConfigSource::Default, |s| s.source),
                read_only: !def.dynamic,
                sensitive,
                config_type: def.ty.code(),
                documentation: Some(def.doc()),
                synonyms,
            }
        })
        .collect();
    // Properties Sluice does not use are still reported where they are set: recognised Kafka
    // properties given in server.properties, and dynamic configs set through the admin API
    // (Kafka's run-time configs Sluice has no use for, and names Kafka does not know, which it
    // stores and shows as sensitive, with no value).
    let mut unused: BTreeMap<&str, Vec<(ConfigSource, &str)>> = BTreeMap::new();
    for (layer, source) in [
        (&config.dynamic_broker, ConfigSource::DynamicBroker),
        (&config.dynamic_default, ConfigSource::DynamicDefaultBroker),
    ] {
        for (name, raw) in layer {
            if catalog::broker_def(name).is_none() {
                unused.entry(name).or_default().push((source, raw));
            }
        }
    }
    for (name, raw) in &config.given {
        if catalog::broker_def(name).is_some() || !catalog::is_ignored(name) {
            continue;
        }
        unused
            .entry(name)
            .or_default()
            .push((ConfigSource::StaticBroker, raw));
    }
    for (name, sources) in unused {
        let sensitive = dynamic::is_sensitive_unused(name);
        let value = |raw: &str| (!sensitive).then(|| raw.trim().to_string());
        let synonyms: Vec<crate::ConfigSynonym> = sources
            .iter()
            .map(|(source, raw)| crate::ConfigSynonym {
                name: name.to_string(),
                value: value(raw),
                source: *source,
            })
            .collect();
        let (source, raw) = sources[0];
        entries.push(ConfigEntry {
            name: name.to_string(),
            value: value(raw),
            source,
            read_only: !dynamic::is_dynamic_unused(name),
            sensitive,
            config_type: dynamic::unused_type_code(name, sensitive),
            documentation: Some(dynamic::unused_doc(name)),
            synonyms,
        });
    }
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    entries
}

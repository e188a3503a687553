//! Building [`BrokerConfig`] from properties, and listener parsing.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use crate::catalog::{self, Value};
use crate::{BrokerConfig, ConfigError, Listener, SecurityProtocol, TopicConfig};

const DEFAULT_LISTENERS: &str = "PLAINTEXT://127.0.0.1:9092";
const DEFAULT_LOG_DIR: &str = "./sluice-data";
const DEFAULT_NODE_ID: i32 = 1;
/// Host advertised for a listener bound with an empty host.
const LOOPBACK: &str = "127.0.0.1";
const WILDCARD: &str = "0.0.0.0";
const PROTOCOL_MAP: &str = "listener.security.protocol.map";

fn invalid(name: &str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::InvalidValue {
        name: name.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

fn valid_host_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '%' | '.' | '_' | ':')
}

fn valid_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

/// Parse one `NAME://host:port` entry. The host may be empty (all interfaces) or an IPv6
/// address, bracketed or not; the name is upper-cased as Kafka does.
fn parse_listener(property: &str, value: &str, entry: &str) -> Result<Listener, ConfigError> {
    let syntax = || {
        invalid(
            property,
            value,
            format!("the entry {entry:?} is not of the form NAME://host:port (for example PLAINTEXT://127.0.0.1:9092)"),
        )
    };
    let (name, rest) = entry.split_once("://").ok_or_else(syntax)?;
    if name.is_empty() || !name.chars().all(valid_name_char) {
        return Err(syntax());
    }
    let (host, port) = if let Some(bracketed) = rest.strip_prefix('[') {
        let (host, after) = bracketed.split_once(']').ok_or_else(syntax)?;
        (host, after.strip_prefix(':').ok_or_else(syntax)?)
    } else {
        rest.rsplit_once(':').ok_or_else(syntax)?
    };
    if !host.chars().all(valid_host_char) {
        return Err(syntax());
    }
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(syntax());
    }
    let port: u16 = port.parse().map_err(|_| {
        invalid(
            property,
            value,
            format!("the port of {entry:?} must be between 0 and 65535"),
        )
    })?;
    Ok(Listener {
        name: name.to_ascii_uppercase(),
        host: host.to_string(),
        port,
    })
}

/// Parse a comma-separated listener list such as `PLAINTEXT://127.0.0.1:9092,EXTERNAL://:9093`
/// (the syntax of `listeners` and `advertised.listeners`). Hosts are returned as written (an
/// empty host stays empty); names are upper-cased and must be distinct. Errors name
/// `property`.
pub fn parse_listeners(property: &str, value: &str) -> Result<Vec<Listener>, ConfigError> {
    let mut out: Vec<Listener> = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let listener = parse_listener(property, value, entry)?;
        if out.iter().any(|l| l.name == listener.name) {
            return Err(invalid(
                property,
                value,
                format!(
                    "the listener name {} appears more than once; each listener needs its own name",
                    listener.name
                ),
            ));
        }
        out.push(listener);
    }
    if out.is_empty() {
        return Err(invalid(
            property,
            value,
            "at least one listener such as PLAINTEXT://127.0.0.1:9092 is required",
        ));
    }
    Ok(out)
}

/// Kafka allows two listeners on one port only if one binds an IPv4 and the other an IPv6
/// address. Port 0 (pick any) is exempt.
fn check_distinct_ports(value: &str, listeners: &[Listener]) -> Result<(), ConfigError> {
    for (i, a) in listeners.iter().enumerate() {
        for b in listeners.iter().skip(i + 1) {
            if a.port == 0 || a.port != b.port {
                continue;
            }
            let ok = match (a.host.parse::<IpAddr>(), b.host.parse::<IpAddr>()) {
                (Ok(x), Ok(y)) => x.is_ipv4() != y.is_ipv4(),
                _ => false,
            };
            if !ok {
                return Err(invalid(
                    "listeners",
                    value,
                    format!(
                        "listeners {} and {} share port {}; each listener needs its own port unless one is IPv4 and the other IPv6",
                        a.name, b.name, a.port
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// `listener.security.protocol.map` ([`parse_protocol_map`]; Kafka's default maps PLAINTEXT,
/// SSL, SASL_PLAINTEXT and SASL_SSL each to itself), which must map every listener.
fn protocol_map(
    p: &Parsed<'_>,
    listeners: &[Listener],
) -> Result<BTreeMap<String, SecurityProtocol>, ConfigError> {
    let map = match p.raw(PROTOCOL_MAP) {
        Some(value) => parse_protocol_map(value)?,
        None => [
            SecurityProtocol::Plaintext,
            SecurityProtocol::Ssl,
            SecurityProtocol::SaslPlaintext,
            SecurityProtocol::SaslSsl,
        ]
        .into_iter()
        .map(|protocol| (protocol.name().to_string(), protocol))
        .collect(),
    };
    for l in listeners {
        if !map.contains_key(&l.name) {
            return Err(invalid(
                PROTOCOL_MAP,
                p.raw(PROTOCOL_MAP).unwrap_or(""),
                format!(
                    "no security protocol is defined for listener {}; map it, e.g. {}:PLAINTEXT",
                    l.name, l.name
                ),
            ));
        }
    }
    Ok(map)
}

/// A `listener.security.protocol.map` value: comma-separated `LISTENER_NAME:PROTOCOL`, names
/// upper-cased, each mapped once.
fn parse_protocol_map(value: &str) -> Result<BTreeMap<String, SecurityProtocol>, ConfigError> {
    let mut map = BTreeMap::new();
    for entry in csv(value) {
        let (name, protocol) = entry.split_once(':').ok_or_else(|| {
            invalid(
                PROTOCOL_MAP,
                value,
                format!("{entry:?} is not LISTENER_NAME:PROTOCOL"),
            )
        })?;
        let protocol = SecurityProtocol::parse(protocol.trim()).ok_or_else(|| {
            invalid(
                PROTOCOL_MAP,
                value,
                format!(
                    "unknown security protocol {:?} (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)",
                    protocol.trim()
                ),
            )
        })?;
        if map
            .insert(name.trim().to_ascii_uppercase(), protocol)
            .is_some()
        {
            return Err(invalid(
                PROTOCOL_MAP,
                value,
                format!("listener {} is mapped more than once", name.trim()),
            ));
        }
    }
    Ok(map)
}

/// The inter-broker listener: `inter.broker.listener.name` (which must name a listener), else
/// the listener named as `security.inter.broker.protocol` (default PLAINTEXT), else the first
/// listener; at most one of the two properties may be set.
fn inter_broker_listener(p: &Parsed<'_>, listeners: &[Listener]) -> Result<String, ConfigError> {
    const NAME: &str = "inter.broker.listener.name";
    match (p.raw(NAME), p.raw("security.inter.broker.protocol")) {
        (Some(name), Some(_)) => Err(invalid(
            NAME,
            name,
            "only one of inter.broker.listener.name and security.inter.broker.protocol may be set",
        )),
        (Some(name), None) => {
            let name = name.trim().to_ascii_uppercase();
            if !listeners.iter().any(|l| l.name == name) {
                return Err(invalid(NAME, &name, "it must name one of the listeners"));
            }
            Ok(name)
        }
        (None, protocol) => {
            let wanted = protocol.unwrap_or("PLAINTEXT").trim().to_ascii_uppercase();
            Ok(listeners
                .iter()
                .find(|l| l.name == wanted)
                .or_else(|| listeners.first())
                .map(|l| l.name.clone())
                .unwrap_or(wanted))
        }
    }
}

fn csv(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Properties parsed so far: only those given, plus lookups falling back to the catalogue
/// default.
struct Parsed<'a> {
    props: &'a BTreeMap<String, String>,
    given: BTreeMap<&'static str, Value>,
}

impl Parsed<'_> {
    /// The given value, else the catalogue default, else `None`.
    fn get(&self, name: &'static str) -> Result<Option<Value>, ConfigError> {
        if let Some(v) = self.given.get(name) {
            return Ok(Some(v.clone()));
        }
        match catalog::broker_def(name) {
            Some(def) => match def.default {
                Some(d) => catalog::parse_value(name, def.ty, def.check, d).map(Some),
                None => Ok(None),
            },
            None => Ok(None),
        }
    }

    fn int(&self, name: &'static str) -> Result<Option<i64>, ConfigError> {
        Ok(match self.get(name)? {
            Some(Value::Int(v)) => Some(v),
            _ => None,
        })
    }

    fn double(&self, name: &'static str, fallback: f64) -> Result<f64, ConfigError> {
        Ok(match self.get(name)? {
            Some(Value::Double(v)) => v,
            Some(Value::Int(v)) => v as f64,
            _ => fallback,
        })
    }

    fn bool(&self, name: &'static str, fallback: bool) -> Result<bool, ConfigError> {
        Ok(match self.get(name)? {
            Some(Value::Bool(v)) => v,
            _ => fallback,
        })
    }

    /// An integer that must fit `T` (the catalogue's range checks guarantee it does; the
    /// error covers a catalogue mistake).
    fn typed<T: TryFrom<i64>>(&self, name: &'static str, fallback: T) -> Result<T, ConfigError> {
        match self.int(name)? {
            Some(v) => T::try_from(v).map_err(|_| {
                let raw = self
                    .props
                    .get(name)
                    .cloned()
                    .unwrap_or_else(|| v.to_string());
                invalid(name, &raw, "the value is out of range")
            }),
            None => Ok(fallback),
        }
    }

    fn raw(&self, name: &str) -> Option<&str> {
        self.props.get(name).map(String::as_str)
    }
}

/// `authorizer.class.name` and its settings: Kafka's StandardAuthorizer is served, any
/// other class refused (Sluice cannot load Java classes; AclAuthorizer kept its ACLs in
/// ZooKeeper and left Kafka with it).
fn authorizer(p: &Parsed<'_>) -> Result<Option<crate::AuthorizerSettings>, ConfigError> {
    const NAME: &str = "authorizer.class.name";
    let class = p.raw(NAME).map(str::trim).unwrap_or("");
    if class.is_empty() {
        return Ok(None);
    }
    if class != crate::STANDARD_AUTHORIZER {
        let why = if class.ends_with(".AclAuthorizer") {
            "AclAuthorizer kept its ACLs in ZooKeeper and is not in Kafka 4"
        } else {
            "Sluice does not load Java classes"
        };
        return Err(invalid(
            NAME,
            class,
            format!(
                "{why}; the authorizer Sluice serves is {}, with Kafka's ACL semantics (or leave it empty for none)",
                crate::STANDARD_AUTHORIZER
            ),
        ));
    }
    let raw_users = p.raw("super.users").unwrap_or("");
    let mut super_users = Vec::new();
    for user in raw_users
        .split(';')
        .map(str::trim)
        .filter(|u| !u.is_empty())
    {
        match user.split_once(':') {
            Some((kind, name)) if !kind.is_empty() && !name.is_empty() => {
                super_users.push(user.to_string())
            }
            _ => {
                return Err(invalid(
                    "super.users",
                    raw_users,
                    format!("`{user}` is not a principal: expected principalType:principalName, such as User:admin"),
                ))
            }
        }
    }
    Ok(Some(crate::AuthorizerSettings {
        super_users,
        allow_everyone_if_no_acl_found: p.bool("allow.everyone.if.no.acl.found", false)?,
    }))
}

/// The TLS settings of each SSL and SASL_SSL listener of `listeners` from `props`.
pub(crate) fn listeners_tls(
    props: &BTreeMap<String, String>,
    listeners: &[Listener],
    protocols: &BTreeMap<String, SecurityProtocol>,
) -> Result<BTreeMap<String, crate::TlsConfig>, ConfigError> {
    let mut out = BTreeMap::new();
    for l in listeners {
        let sasl = match protocols.get(&l.name) {
            Some(SecurityProtocol::Ssl) => false,
            Some(SecurityProtocol::SaslSsl) => true,
            _ => continue,
        };
        out.insert(
            l.name.clone(),
            crate::tls::listener_tls(props, &l.name, sasl)?,
        );
    }
    Ok(out)
}

/// Build the broker's configuration from `props` (server.properties with any overrides):
/// type-check every known property, then decide each part in turn. The steps run in a fixed
/// order, so a configuration with two mistakes is always refused for the earlier one.
pub(crate) fn build(props: BTreeMap<String, String>) -> Result<BrokerConfig, ConfigError> {
    let (given, unknown) = parse_given(&props)?;
    let p = Parsed {
        props: &props,
        given,
    };
    let node_id = node_id(&p)?;
    let Listeners {
        listeners,
        advertised_listeners,
        listener_protocols,
        inter_broker_listener,
        listener_tls,
        listener_sasl,
        inter_broker_sasl,
    } = listeners(&p)?;
    let log_dirs = log_dirs(&p)?;
    let (max_connections_per_ip, max_connections_per_ip_overrides) = connections_per_ip(&p)?;
    let cluster_id = cluster_id(&p)?;
    let metrics_listener = http_listener(&p, "sluice.metrics.listener", "127.0.0.1:9404")?;
    let console_listener = http_listener(&p, "sluice.console.listener", "127.0.0.1:9080")?;
    let cluster = cluster_settings(&p)?;
    let topic_defaults = topic_defaults(&p);
    let authorizer = authorizer(&p)?;
    let rack = rack(&p)?;
    let read_replicas = p
        .get("replica.selector.class")?
        .is_none_or(|v| !matches!(v, Value::Str(s) if s == crate::catalog::LEADER_SELECTOR));
    let volume_nodes = volume_nodes(&p, &log_dirs)?;
    let storage_nodes = match p.get("sluice.broker.storage.nodes")? {
        Some(Value::List(nodes)) => nodes,
        _ => Vec::new(),
    };

    // The rest are plain reads of one property each (or one group of them), after the checks
    // above.
    Ok(BrokerConfig {
        node_id,
        rack,
        read_replicas,
        volume_nodes,
        storage_nodes,
        listeners,
        advertised_listeners,
        listener_protocols,
        inter_broker_listener,
        listener_tls,
        listener_sasl,
        inter_broker_sasl,
        authorizer,
        log_dirs,
        num_partitions: p.typed("num.partitions", 1)?,
        default_replication_factor: p.typed("default.replication.factor", 1)?,
        auto_create_topics_enable: p.bool("auto.create.topics.enable", true)?,
        message_max_bytes: p.typed("message.max.bytes", 1_048_588)?,
        socket_request_max_bytes: p.typed("socket.request.max.bytes", 104_857_600)?,
        log_retention_check_interval_ms: p.typed("log.retention.check.interval.ms", 300_000)?,
        log_flush_offset_checkpoint_interval_ms: p
            .typed("log.flush.offset.checkpoint.interval.ms", 60_000)?,
        max_connections: p.typed("max.connections", i32::MAX as u32)?,
        max_connections_per_ip,
        max_connections_per_ip_overrides,
        log_open_files_max: p.typed("sluice.log.open.files.max", -1)?,
        broker_partitions_max: p.typed("sluice.broker.partitions.max", -1)?,
        connections_max_idle_ms: p.typed("connections.max.idle.ms", 600_000)?,
        failed_authentication_delay_ms: p
            .typed("connection.failed.authentication.delay.ms", 100)?,
        delete_retry_initial_ms: p.typed("sluice.delete.retry.initial.ms", 500)?,
        delete_retry_max_ms: p.typed("sluice.delete.retry.max.ms", 30_000)?,
        log_cache_bytes: p.typed(
            "sluice.log.cache.bytes",
            crate::memory::log_cache_default(crate::memory::available_memory()),
        )?,
        log_cache_min_partition_bytes: p.typed("sluice.log.cache.min.partition.bytes", 8 << 20)?,
        log_writeback_bytes: p.typed("sluice.log.writeback.bytes", 1 << 20)?,
        log_recovery_point_bytes: p.typed("sluice.log.recovery.point.bytes", 8 << 20)?,
        log_recovery_point_interval_ms: p.typed("sluice.log.recovery.point.interval.ms", 1000)?,
        log_unwritten_bytes_max: p.typed("sluice.log.unwritten.bytes.max", 1 << 30)?,
        worker_threads: p.typed("sluice.worker.threads", 0)?,
        recovery_threads_per_data_dir: recovery_threads(&p)?,
        metrics_listener,
        console_listener,
        console_read_only: p.bool("sluice.console.read.only", false)?,
        console_hosts: match p.get("sluice.console.hosts")? {
            Some(Value::List(hosts)) => hosts,
            _ => Vec::new(),
        },
        console_connections_max: p.typed("sluice.console.connections.max", 64)?,
        console_session_idle_ms: p.typed("sluice.console.session.idle.ms", 1_800_000)?,
        console_session_recheck_ms: p.typed("sluice.console.session.recheck.ms", 60_000)?,
        console_sessions_max: p.typed("sluice.console.sessions.max", 100)?,
        console_sessions_per_user_max: p.typed("sluice.console.sessions.per.user.max", 5)?,
        metrics_lag_remote_partitions_max: p
            .typed("sluice.metrics.lag.remote.partitions.max", 1000)?,
        metrics_lag_remote_cache_ms: p.typed("sluice.metrics.lag.remote.cache.ms", 5000)?,
        cleaner: cleaner_settings(&p)?,
        cluster,
        cluster_id,
        groups: group_settings(&p)?,
        quotas: quota_settings(&p)?,
        transactions: txn_settings(&p)?,
        topic_defaults,
        given: props.clone(),
        dynamic_default: BTreeMap::new(),
        dynamic_broker: BTreeMap::new(),
        unknown,
    })
}

/// Each known property typed and checked against its catalogue entry (the first invalid one,
/// in name order, is the error), and the names of the unknown ones, each warned about once.
/// TLS and SASL properties are neither: they are checked per listener ([`listeners`]).
fn parse_given(
    props: &BTreeMap<String, String>,
) -> Result<(BTreeMap<&'static str, Value>, Vec<String>), ConfigError> {
    let mut given = BTreeMap::new();
    let mut unknown = Vec::new();
    for (name, raw) in props {
        if let Some(def) = catalog::broker_def(name) {
            given.insert(
                def.name,
                catalog::parse_value(name, def.ty, def.check, raw)?,
            );
        } else if !catalog::is_ignored(name)
            && !crate::tls::is_tls_property(name)
            && !crate::sasl::is_sasl_property(name)
        {
            tracing::warn!(property = %name, "ignoring unknown configuration property {name}");
            unknown.push(name.clone());
        }
    }
    Ok((given, unknown))
}

/// `node.id`, else `broker.id`, else 1; when both are set they must be equal.
fn node_id(p: &Parsed<'_>) -> Result<i32, ConfigError> {
    let node = p.typed::<i32>("node.id", -1)?;
    let broker = p.typed::<i32>("broker.id", -1)?;
    Ok(match (p.raw("node.id"), p.raw("broker.id")) {
        (Some(_), Some(b)) if node != broker => {
            return Err(invalid(
                "broker.id",
                b,
                format!("broker.id must equal node.id ({node}) when both are set"),
            ))
        }
        (Some(_), _) => node,
        (None, Some(_)) => broker,
        (None, None) => DEFAULT_NODE_ID,
    })
}

/// The listener fields of [`BrokerConfig`] (same names), decided together by [`listeners`].
struct Listeners {
    listeners: Vec<Listener>,
    advertised_listeners: Vec<Listener>,
    listener_protocols: BTreeMap<String, SecurityProtocol>,
    inter_broker_listener: String,
    listener_tls: BTreeMap<String, crate::TlsConfig>,
    listener_sasl: BTreeMap<String, crate::SaslConfig>,
    inter_broker_sasl: Option<(crate::SaslMechanism, crate::SaslLogin)>,
}

/// The listeners and their security, each step checking what the one before decided: the
/// bound listeners, the advertised ones, the protocol map and inter-broker listener, then the
/// TLS and SASL settings of the listeners that use them.
fn listeners(p: &Parsed<'_>) -> Result<Listeners, ConfigError> {
    let controller_names = controller_listener_names(p);
    let bound = bound_listeners(p, &controller_names)?;
    let advertised_listeners = advertised_listeners(p, &bound, &controller_names)?;
    let listener_protocols = protocol_map(p, &bound)?;
    let inter_broker_listener = inter_broker_listener(p, &bound)?;
    let listener_tls = listeners_tls(p.props, &bound, &listener_protocols)?;
    let listener_sasl = listeners_sasl(p.props, &bound, &listener_protocols)?;
    let inter_broker_sasl = inter_broker_sasl(p.props, &inter_broker_listener, &listener_sasl)?;
    Ok(Listeners {
        listeners: bind_all_interfaces(bound),
        advertised_listeners,
        listener_protocols,
        inter_broker_listener,
        listener_tls,
        listener_sasl,
        inter_broker_sasl,
    })
}

/// `controller.listener.names`, upper-cased: the listeners Sluice does not open.
fn controller_listener_names(p: &Parsed<'_>) -> Vec<String> {
    p.raw("controller.listener.names")
        .map(|v| csv(v).into_iter().map(|n| n.to_ascii_uppercase()).collect())
        .unwrap_or_default()
}

/// `listeners` (default PLAINTEXT://127.0.0.1:9092) less the controller listeners (Sluice has
/// no controller endpoint): at least one must remain, on distinct ports. Hosts as written.
fn bound_listeners(
    p: &Parsed<'_>,
    controller_names: &[String],
) -> Result<Vec<Listener>, ConfigError> {
    let value = p.raw("listeners").unwrap_or(DEFAULT_LISTENERS);
    let mut bound = parse_listeners("listeners", value)?;
    bound.retain(|l| {
        let keep = !controller_names.contains(&l.name);
        if !keep {
            tracing::info!(listener = %l, "not opening controller listener (Sluice has no controller endpoint)");
        }
        keep
    });
    if bound.is_empty() {
        return Err(invalid(
            "listeners",
            value,
            "every listener is named in controller.listener.names; at least one client listener is required",
        ));
    }
    check_distinct_ports(value, &bound)?;
    Ok(bound)
}

/// `advertised.listeners` if set ([`explicit_advertised`]), else the bound listeners with an
/// empty host advertised as 127.0.0.1.
fn advertised_listeners(
    p: &Parsed<'_>,
    bound: &[Listener],
    controller_names: &[String],
) -> Result<Vec<Listener>, ConfigError> {
    match p.raw("advertised.listeners") {
        Some(value) => explicit_advertised(value, bound, controller_names),
        None => Ok(bound
            .iter()
            .map(|l| Listener {
                host: if l.host.is_empty() {
                    LOOPBACK.to_string()
                } else {
                    l.host.clone()
                },
                ..l.clone()
            })
            .collect()),
    }
}

/// The `advertised.listeners` given as `value`, controller listeners dropped: each must be a
/// bound listener and reachable (not 0.0.0.0; an empty host is advertised as 127.0.0.1), and
/// at least one must remain.
fn explicit_advertised(
    value: &str,
    bound: &[Listener],
    controller_names: &[String],
) -> Result<Vec<Listener>, ConfigError> {
    let mut advertised = parse_listeners("advertised.listeners", value)?;
    advertised.retain(|l| !controller_names.contains(&l.name));
    for l in &mut advertised {
        if l.host == WILDCARD {
            return Err(invalid(
                "advertised.listeners",
                value,
                format!("listener {} advertises the non-routable address 0.0.0.0; use an address clients can reach", l.name),
            ));
        }
        if !bound.iter().any(|b| b.name == l.name) {
            return Err(invalid(
                "advertised.listeners",
                value,
                format!("listener {} is not defined in listeners", l.name),
            ));
        }
        if l.host.is_empty() {
            l.host = LOOPBACK.to_string();
        }
    }
    if advertised.is_empty() {
        return Err(invalid(
            "advertised.listeners",
            value,
            "at least one client listener must be advertised",
        ));
    }
    Ok(advertised)
}

/// The SASL settings of each SASL_PLAINTEXT and SASL_SSL listener of `listeners`.
fn listeners_sasl(
    props: &BTreeMap<String, String>,
    listeners: &[Listener],
    protocols: &BTreeMap<String, SecurityProtocol>,
) -> Result<BTreeMap<String, crate::SaslConfig>, ConfigError> {
    let mut out = BTreeMap::new();
    for l in listeners {
        if matches!(
            protocols.get(&l.name),
            Some(SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl)
        ) {
            out.insert(l.name.clone(), crate::sasl::listener_sasl(props, &l.name)?);
        }
    }
    Ok(out)
}

/// The mechanism and login the broker uses with its peers when the inter-broker listener is a
/// SASL one (then checked by [`crate::sasl::inter_broker`]); None otherwise.
fn inter_broker_sasl(
    props: &BTreeMap<String, String>,
    inter_broker_listener: &str,
    listener_sasl: &BTreeMap<String, crate::SaslConfig>,
) -> Result<Option<(crate::SaslMechanism, crate::SaslLogin)>, ConfigError> {
    match listener_sasl.get(inter_broker_listener) {
        None => Ok(None),
        Some(sasl) => crate::sasl::inter_broker(props, inter_broker_listener, sasl).map(Some),
    }
}

/// The listeners as bound: an empty host binds all interfaces (0.0.0.0).
fn bind_all_interfaces(bound: Vec<Listener>) -> Vec<Listener> {
    bound
        .into_iter()
        .map(|l| Listener {
            host: if l.host.is_empty() {
                WILDCARD.to_string()
            } else {
                l.host
            },
            ..l
        })
        .collect()
}

/// `log.dirs`, else `log.dir`, else ./sluice-data: at least one directory.
fn log_dirs(p: &Parsed<'_>) -> Result<Vec<PathBuf>, ConfigError> {
    let (dirs_name, dirs_value) = match p.raw("log.dirs") {
        Some(v) => ("log.dirs", v),
        None => ("log.dir", p.raw("log.dir").unwrap_or(DEFAULT_LOG_DIR)),
    };
    let log_dirs: Vec<PathBuf> = csv(dirs_value).into_iter().map(PathBuf::from).collect();
    if log_dirs.is_empty() {
        return Err(invalid(
            dirs_name,
            dirs_value,
            "at least one directory is required",
        ));
    }
    Ok(log_dirs)
}

/// `sluice.volume.storage.nodes`: `dir:node` pairs (split at the last colon), each dir one of
/// `log_dirs` and named once.
fn volume_nodes(
    p: &Parsed<'_>,
    log_dirs: &[PathBuf],
) -> Result<Vec<(PathBuf, String)>, ConfigError> {
    const NAME: &str = "sluice.volume.storage.nodes";
    let Some(Value::List(entries)) = p.get(NAME)? else {
        return Ok(Vec::new());
    };
    let mut out: Vec<(PathBuf, String)> = Vec::with_capacity(entries.len());
    for entry in &entries {
        let Some((dir, node)) = entry
            .rsplit_once(':')
            .map(|(d, n)| (PathBuf::from(d.trim()), n.trim().to_string()))
            .filter(|(d, n)| !d.as_os_str().is_empty() && !n.is_empty())
        else {
            return Err(invalid(
                NAME,
                entry,
                "each entry is a log dir and a storage node: dir:node",
            ));
        };
        if !log_dirs.contains(&dir) {
            return Err(invalid(NAME, entry, "the dir is not one of log.dirs"));
        }
        if out.iter().any(|(d, _)| *d == dir) {
            return Err(invalid(NAME, entry, "the dir is named twice"));
        }
        out.push((dir, node));
    }
    Ok(out)
}

/// `max.connections.per.ip` and its overrides; as on Kafka, the limit may be zero only when
/// overrides name the hosts that may connect.
fn connections_per_ip(p: &Parsed<'_>) -> Result<(u32, Vec<(String, u32)>), ConfigError> {
    let max_connections_per_ip: u32 = p.typed("max.connections.per.ip", i32::MAX as u32)?;
    let overrides_raw = match p.get("max.connections.per.ip.overrides")? {
        Some(Value::Str(s)) => s,
        _ => String::new(),
    };
    let overrides = per_ip_overrides(&overrides_raw)?;
    if max_connections_per_ip == 0 && overrides.is_empty() {
        return Err(invalid(
            "max.connections.per.ip",
            "0",
            "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides property is set.",
        ));
    }
    Ok((max_connections_per_ip, overrides))
}

/// `max.connections.per.ip.overrides` given as `raw`: comma-separated `host:count` entries, in
/// the order given; a host is not empty (an IPv6 one may be bracketed), a count at most
/// 2147483647.
fn per_ip_overrides(raw: &str) -> Result<Vec<(String, u32)>, ConfigError> {
    let mut overrides = Vec::new();
    for entry in csv(raw) {
        let parsed = entry
            .rsplit_once(':')
            .and_then(|(host, n)| Some((host.trim(), n.trim().parse::<u32>().ok()?)))
            .filter(|(host, n)| !host.is_empty() && i64::from(*n) <= i64::from(i32::MAX));
        let Some((host, n)) = parsed else {
            return Err(invalid(
                "max.connections.per.ip.overrides",
                raw,
                "each entry must be host:count or ip:count",
            ));
        };
        // An IPv6 address may be written in brackets.
        let host = host.trim_start_matches('[').trim_end_matches(']');
        overrides.push((host.to_string(), n));
    }
    Ok(overrides)
}

/// `cluster.id` (checked not blank by the catalogue); None = generate one.
fn cluster_id(p: &Parsed<'_>) -> Result<Option<String>, ConfigError> {
    Ok(match p.get("cluster.id")? {
        Some(Value::Str(s)) => Some(s),
        _ => None,
    })
}

/// An HTTP listener's property (`sluice.metrics.listener`, `sluice.console.listener`),
/// trimmed: `host:port` with a host and a valid port; None = no such listener.
fn http_listener(
    p: &Parsed<'_>,
    property: &'static str,
    example: &str,
) -> Result<Option<String>, ConfigError> {
    Ok(match p.get(property)? {
        Some(Value::Str(s)) => {
            let s = s.trim().to_string();
            let ok = s
                .rsplit_once(':')
                .is_some_and(|(h, port)| !h.is_empty() && port.parse::<u16>().is_ok());
            if !ok {
                return Err(invalid(
                    property,
                    &s,
                    format!("the value is not of the form host:port (for example {example})"),
                ));
            }
            Some(s)
        }
        _ => None,
    })
}

/// `sluice.cluster.*`: with `sluice.cluster.etcd.endpoints` set, the broker joins the cluster
/// those etcd endpoints hold; None (unset) = a single broker with the embedded store.
fn cluster_settings(p: &Parsed<'_>) -> Result<Option<crate::ClusterSettings>, ConfigError> {
    let Some(Value::Str(endpoints)) = p.get("sluice.cluster.etcd.endpoints")? else {
        return Ok(None);
    };
    let link = etcd_link(p, &endpoints)?;
    Ok(Some(crate::ClusterSettings {
        etcd_endpoints: link.endpoints,
        etcd_tls: link.tls,
        etcd_login: link.login,
        etcd_prefix: etcd_prefix(p)?,
        etcd_timeout_ms: p.typed("sluice.cluster.etcd.timeout.ms", 2000)?,
        registration_timeout_ms: p.typed("initial.broker.registration.timeout.ms", 60000)?,
        lease_ms: p.typed("sluice.cluster.lease.ms", 3000)?,
        poll_ms: p.typed("sluice.cluster.poll.ms", 200)?,
        full_read_interval_ms: p.typed("sluice.cluster.full.read.interval.ms", 60000)?,
        balance_enable: p.bool("sluice.cluster.balance.enable", true)?,
        death_probe_enable: p.bool("sluice.cluster.death.probe.enable", true)?,
        locality_delay_ms: p.typed("sluice.cluster.locality.delay.ms", 30_000)?,
        balance_bytes: crate::BytesBalance {
            enable: p.bool("sluice.cluster.balance.bytes.enable", true)?,
            interval_ms: p.typed("sluice.cluster.balance.bytes.interval.ms", 300_000)?,
            window_ms: p.typed("sluice.cluster.balance.bytes.window.ms", 60_000)?,
            threshold: p.typed("sluice.cluster.balance.bytes.threshold", 1_048_576)?,
            percent: p.typed("sluice.cluster.balance.bytes.percent", 10)?,
        },
        broker_session_timeout_ms: p.typed("broker.session.timeout.ms", 9000)?,
    }))
}

/// The link to etcd: `endpoints` with the etcd TLS and login settings (each trimmed; a blank
/// one is unset), checked by [`crate::etcd::etcd_link`].
fn etcd_link(p: &Parsed<'_>, endpoints: &str) -> Result<crate::etcd::Link, ConfigError> {
    let text = |name: &'static str| -> Result<Option<String>, ConfigError> {
        Ok(match p.get(name)? {
            Some(Value::Str(v)) if !v.trim().is_empty() => Some(v.trim().to_string()),
            _ => None,
        })
    };
    crate::etcd::etcd_link(
        endpoints,
        text(crate::ETCD_TRUSTSTORE)?.as_deref(),
        text(crate::ETCD_KEYSTORE)?.as_deref(),
        text(crate::ETCD_USERNAME)?.as_deref(),
        text(crate::ETCD_PASSWORD)?.as_deref(),
    )
}

/// `sluice.cluster.etcd.prefix` without its trailing slashes (default /sluice): the root of
/// the cluster's keys, to which each key adds `/...`.
fn etcd_prefix(p: &Parsed<'_>) -> Result<String, ConfigError> {
    Ok(match p.get("sluice.cluster.etcd.prefix")? {
        Some(Value::Str(s)) => s.trim_end_matches('/').to_string(),
        _ => "/sluice".to_string(),
    })
}

/// Topic defaults from the broker synonyms (`log.retention.hours` for `retention.ms`...): of
/// those given, the highest-priority synonym of each topic config wins.
fn topic_defaults(p: &Parsed<'_>) -> TopicConfig {
    let mut topic_defaults = TopicConfig::default();
    for def in catalog::TOPIC_DEFS {
        if let Some((syn, value)) = def
            .synonyms
            .iter()
            .find_map(|s| p.given.get(s.name).map(|v| (s, v.clone())))
        {
            topic_defaults.apply(
                def.name,
                catalog::convert_synonym(def.name, syn.unit, value),
            );
        }
    }
    topic_defaults
}

/// `broker.rack`, trimmed; None when unset or blank.
fn rack(p: &Parsed<'_>) -> Result<Option<String>, ConfigError> {
    Ok(match p.get("broker.rack")? {
        Some(Value::Str(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
        _ => None,
    })
}

/// `num.recovery.threads.per.data.dir`; unset (no catalogue default, so the fallback 0), one
/// per CPU the process may use. The catalogue refuses an explicit 0.
fn recovery_threads(p: &Parsed<'_>) -> Result<usize, ConfigError> {
    p.typed("num.recovery.threads.per.data.dir", 0usize)
        .map(|n| if n == 0 { default_parallelism() } else { n })
}

/// The log cleaner's settings (`log.cleaner.*`, Kafka's names and defaults).
fn cleaner_settings(p: &Parsed<'_>) -> Result<crate::CleanerSettings, ConfigError> {
    Ok(crate::CleanerSettings {
        enable: p.bool("log.cleaner.enable", true)?,
        threads: p.typed("log.cleaner.threads", 1)?,
        backoff_ms: p.typed("log.cleaner.backoff.ms", 15_000)?,
        dedupe_buffer_size: p.typed("log.cleaner.dedupe.buffer.size", 134_217_728)?,
        io_buffer_size: p.typed("log.cleaner.io.buffer.size", 524_288)?,
        io_buffer_load_factor: p.double("log.cleaner.io.buffer.load.factor", 0.9)?,
        io_max_bytes_per_second: p.double("log.cleaner.io.max.bytes.per.second", f64::MAX)?,
    })
}

/// The group coordinator's settings (`group.*`, `offsets.*`); the consumer assignors as a
/// list, the migration policy lower-cased.
fn group_settings(p: &Parsed<'_>) -> Result<crate::GroupSettings, ConfigError> {
    Ok(crate::GroupSettings {
        initial_rebalance_delay_ms: p.typed("group.initial.rebalance.delay.ms", 3000)?,
        min_session_timeout_ms: p.typed("group.min.session.timeout.ms", 6000)?,
        max_session_timeout_ms: p.typed("group.max.session.timeout.ms", 1_800_000)?,
        max_size: p.typed("group.max.size", i32::MAX)?,
        consumer_heartbeat_interval_ms: p.typed("group.consumer.heartbeat.interval.ms", 5000)?,
        consumer_session_timeout_ms: p.typed("group.consumer.session.timeout.ms", 45000)?,
        consumer_max_size: p.typed("group.consumer.max.size", i32::MAX)?,
        consumer_assignors: csv(p.raw("group.consumer.assignors").unwrap_or("uniform,range")),
        consumer_migration_policy: p
            .raw("group.consumer.migration.policy")
            .unwrap_or("bidirectional")
            .trim()
            .to_ascii_lowercase(),
        offsets_topic_num_partitions: p.typed("offsets.topic.num.partitions", 50)?,
        offsets_retention_minutes: p.typed("offsets.retention.minutes", 10080)?,
        offsets_retention_check_interval_ms: p
            .typed("offsets.retention.check.interval.ms", 600_000)?,
        offsets_snapshot_interval_records: p
            .typed("sluice.offsets.snapshot.interval.records", 10_000)?,
        offset_metadata_max_bytes: p.typed("offset.metadata.max.bytes", 4096)?,
        share: crate::ShareSettings {
            record_lock_duration_ms: p.typed("group.share.record.lock.duration.ms", 30_000)?,
            delivery_count_limit: p.typed("group.share.delivery.count.limit", 5)?,
            partition_max_record_locks: p.typed("group.share.partition.max.record.locks", 2000)?,
            session_timeout_ms: p.typed("group.share.session.timeout.ms", 45_000)?,
            heartbeat_interval_ms: p.typed("group.share.heartbeat.interval.ms", 5000)?,
            max_size: p.typed("group.share.max.size", 200)?,
            max_share_sessions: p.typed("group.share.max.share.sessions", 2000)?,
            state_topic_num_partitions: p
                .typed("share.coordinator.state.topic.num.partitions", 50)?,
        },
    })
}

/// Client quotas' rate windows (`quota.window.*`).
fn quota_settings(p: &Parsed<'_>) -> Result<crate::QuotaSettings, ConfigError> {
    Ok(crate::QuotaSettings {
        window_num: p.typed("quota.window.num", 11)?,
        window_size_seconds: p.typed("quota.window.size.seconds", 1)?,
    })
}

/// The transaction coordinator's settings (`transaction.*`, `transactional.id.*`,
/// `add.partitions.to.txn.*`).
fn txn_settings(p: &Parsed<'_>) -> Result<crate::TxnSettings, ConfigError> {
    Ok(crate::TxnSettings {
        state_log_num_partitions: p.typed("transaction.state.log.num.partitions", 50)?,
        max_timeout_ms: p.typed("transaction.max.timeout.ms", 900_000)?,
        id_expiration_ms: p.typed("transactional.id.expiration.ms", 604_800_000)?,
        abort_timed_out_interval_ms: p.typed(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            10_000,
        )?,
        remove_expired_interval_ms: p.typed(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            3_600_000,
        )?,
        version: p.typed("sluice.transaction.version", 2)?,
        add_partitions_retry_backoff_ms: p.typed("add.partitions.to.txn.retry.backoff.ms", 20)?,
        add_partitions_retry_backoff_max_ms: p
            .typed("add.partitions.to.txn.retry.backoff.max.ms", 100)?,
    })
}

/// The number of CPUs this process may use (1 when unknown).
fn default_parallelism() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::test_support::props;

    /// `pairs` typed as [`build`] types them, handed to `step`.
    fn with<R>(pairs: &[(&str, &str)], step: impl FnOnce(&Parsed<'_>) -> R) -> R {
        let props = props(pairs);
        let (given, _) = parse_given(&props).unwrap();
        step(&Parsed {
            props: &props,
            given,
        })
    }

    fn listener(name: &str, host: &str, port: u16) -> Listener {
        Listener {
            name: name.into(),
            host: host.into(),
            port,
        }
    }

    fn invalid_parts(e: ConfigError) -> (String, String, String) {
        match e {
            ConfigError::InvalidValue {
                name,
                value,
                reason,
            } => (name, value, reason),
            other => panic!("expected InvalidValue, got {other:?}"),
        }
    }

    #[test]
    fn per_ip_overrides_keep_their_order_and_lose_ipv6_brackets() {
        assert_eq!(per_ip_overrides("").unwrap(), []);
        assert_eq!(
            per_ip_overrides("a:1, [::1]:2 ,host.x:3,fe80::1:2147483647").unwrap(),
            [
                ("a".to_string(), 1),
                ("::1".to_string(), 2),
                ("host.x".to_string(), 3),
                ("fe80::1".to_string(), 2_147_483_647),
            ]
        );
        // No count, no host, not a number, above Kafka's int range, negative.
        for bad in ["h", ":5", "h:x", "h:2147483648", "h:-1", "a:1,b"] {
            let (name, value, reason) = invalid_parts(per_ip_overrides(bad).unwrap_err());
            assert_eq!(
                (name.as_str(), value.as_str()),
                ("max.connections.per.ip.overrides", bad)
            );
            assert!(reason.contains("host:count"), "{reason}");
        }
    }

    #[test]
    fn a_zero_connection_limit_per_ip_needs_overrides() {
        assert_eq!(
            with(&[], connections_per_ip).unwrap(),
            (2_147_483_647, vec![])
        );
        let (name, value, _) = invalid_parts(
            with(&[("max.connections.per.ip", "0")], connections_per_ip).unwrap_err(),
        );
        assert_eq!(
            (name.as_str(), value.as_str()),
            ("max.connections.per.ip", "0")
        );
        let only_listed = with(
            &[
                ("max.connections.per.ip", "0"),
                ("max.connections.per.ip.overrides", "10.0.0.1:5"),
            ],
            connections_per_ip,
        );
        assert_eq!(only_listed.unwrap(), (0, vec![("10.0.0.1".to_string(), 5)]));
    }

    #[test]
    fn advertised_listeners_must_be_bound_reachable_and_not_controllers() {
        let bound = [
            listener("PLAINTEXT", "", 9092),
            listener("EXTERNAL", "h", 9093),
        ];
        let controllers = ["CONTROLLER".to_string()];
        // Controller listeners are dropped; an empty host is advertised as loopback.
        assert_eq!(
            explicit_advertised("plaintext://:1,CONTROLLER://c:3", &bound, &controllers).unwrap(),
            [listener("PLAINTEXT", "127.0.0.1", 1)]
        );
        let reason = |value: &str| {
            let (name, got, reason) =
                invalid_parts(explicit_advertised(value, &bound, &controllers).unwrap_err());
            assert_eq!(
                (name.as_str(), got.as_str()),
                ("advertised.listeners", value)
            );
            reason
        };
        assert!(reason("CONTROLLER://c:3").contains("at least one client listener"));
        assert!(reason("EXTERNAL://0.0.0.0:1").contains("non-routable"));
        assert!(reason("OTHER://h:1").contains("not defined in listeners"));
        // Of two mistakes in one entry, the unreachable address is named.
        assert!(reason("OTHER://0.0.0.0:1").contains("non-routable"));
        // Unset: the bound listeners, an empty host advertised as loopback.
        assert_eq!(
            with(&[], |p| advertised_listeners(p, &bound, &controllers)).unwrap(),
            [
                listener("PLAINTEXT", "127.0.0.1", 9092),
                listener("EXTERNAL", "h", 9093)
            ]
        );
    }

    #[test]
    fn controller_listeners_are_not_bound_and_an_empty_host_binds_all_interfaces() {
        let pairs = [
            ("listeners", "PLAINTEXT://:9092,CONTROLLER://:9093"),
            ("controller.listener.names", " controller "),
        ];
        let bound = with(&pairs, |p| {
            bound_listeners(p, &controller_listener_names(p))
        })
        .unwrap();
        assert_eq!(bound, [listener("PLAINTEXT", "", 9092)]);
        assert_eq!(
            bind_all_interfaces(bound),
            [listener("PLAINTEXT", "0.0.0.0", 9092)]
        );
    }

    #[test]
    fn the_etcd_prefix_loses_its_trailing_slashes() {
        assert_eq!(with(&[], etcd_prefix).unwrap(), "/sluice");
        let prefix =
            |value: &str| with(&[("sluice.cluster.etcd.prefix", value)], etcd_prefix).unwrap();
        assert_eq!(prefix("/a/b//"), "/a/b");
        assert_eq!(prefix("/a"), "/a");
        assert_eq!(prefix("/"), "");
    }

    #[test]
    fn a_blank_rack_is_no_rack() {
        assert_eq!(with(&[], rack).unwrap(), None);
        assert_eq!(with(&[("broker.rack", "  ")], rack).unwrap(), None);
        assert_eq!(
            with(&[("broker.rack", " r1 ")], rack).unwrap().as_deref(),
            Some("r1")
        );
    }

    #[test]
    fn unset_recovery_threads_means_one_per_cpu() {
        assert_eq!(with(&[], recovery_threads).unwrap(), default_parallelism());
        let three = [("num.recovery.threads.per.data.dir", "3")];
        assert_eq!(with(&three, recovery_threads).unwrap(), 3);
    }

    #[test]
    fn the_inter_broker_login_is_decided_only_for_a_sasl_inter_broker_listener() {
        let props = props(&[
            ("sasl.enabled.mechanisms", "PLAIN"),
            (
                "sasl.jaas.config",
                r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="b" password="p" user_b="p";"#,
            ),
        ]);
        let sasl = BTreeMap::from([(
            "SEC".to_string(),
            crate::sasl::listener_sasl(&props, "SEC").unwrap(),
        )]);
        // A plaintext inter-broker listener: Kafka's default GSSAPI is not even looked at.
        assert_eq!(inter_broker_sasl(&props, "PLAINTEXT", &sasl).unwrap(), None);
        // A SASL one: the mechanism is checked (GSSAPI is not served) ...
        let (name, _, _) = invalid_parts(inter_broker_sasl(&props, "SEC", &sasl).unwrap_err());
        assert_eq!(name, "sasl.mechanism.inter.broker.protocol");
        // ... and its login taken from the listener's JAAS configuration.
        let mut plain = props.clone();
        plain.insert(
            "sasl.mechanism.inter.broker.protocol".into(),
            "PLAIN".into(),
        );
        let (mechanism, login) = inter_broker_sasl(&plain, "SEC", &sasl).unwrap().unwrap();
        assert_eq!(mechanism, crate::SaslMechanism::Plain);
        assert_eq!(
            (login.username.as_str(), login.password.as_str()),
            ("b", "p")
        );
    }
}

//! `sluice serve`: one broker's start, run and shutdown, as named steps.
//!
//! The order matters in a cluster: the listeners are bound before the broker opens (it
//! registers while opening, and its peers take a registered broker whose listener refuses
//! for a dead one), and it leaves the cluster while they still accept.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use sluice_broker::Broker;
use sluice_config::{BrokerConfig, SecurityProtocol};
use sluice_server::{Bound, ListenerTls, TcpPeers};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Runs a broker until SIGINT or SIGTERM.
pub(crate) fn serve(config: BrokerConfig) -> Result<()> {
    raise_open_files_limit();
    let per_ip_overrides = resolve_per_ip_overrides(&config.max_connections_per_ip_overrides)?;
    let (runtime, workers) = build_runtime(config.worker_threads)?;
    runtime.block_on(async move {
        let mut limits = sluice_server::Limits {
            max_request_bytes: config.socket_request_max_bytes,
            max_connections: config.max_connections,
            max_connections_per_ip: config.max_connections_per_ip,
            max_connections_per_ip_overrides: per_ip_overrides,
            idle_timeout: Duration::from_millis(config.connections_max_idle_ms),
            max_in_flight: 64,
            failed_auth_delay: Duration::from_millis(config.failed_authentication_delay_ms),
        };
        let (bound, certs) = bind_listeners(&config).await?;
        let peers = peer_client(&config, &certs);
        let console = console_client(&config)?;
        let broker = Broker::open(config)?;
        broker.set_reader_peers(Arc::new(peers.separate()));
        broker.set_peers(Arc::new(peers));
        // OAUTHBEARER key sets at http(s):// URLs are fetched with the server's client.
        broker.set_jwks_fetcher(sluice_server::jwks_fetcher());
        // Keystores and truststores set at run time before this start are taken up now.
        broker.set_certificates(Arc::new(sluice_server::Certificates::new(certs)));
        limits.max_connections = u32::try_from(broker.fd_budget().connections).unwrap_or(u32::MAX);
        log_capacity(&broker, &bound, workers)?;
        run(broker, bound, limits, console).await
    })
}

/// Raises the soft open-files limit to the hard one, as Go's runtime and many servers do:
/// the soft limit is a leftover of select(2)'s days. Failing to is logged, not fatal.
fn raise_open_files_limit() {
    match sluice_store::fds::raise_open_files_limit() {
        Ok(l) if l.soft > l.before => tracing::info!(
            "open-files limit raised from {} to the hard limit, {}",
            l.before,
            l.soft
        ),
        Ok(l) => tracing::info!("open-files limit {} (the hard limit)", l.soft),
        Err(e) => tracing::warn!(
            "could not raise the open-files limit ({e}); it stays at {}",
            sluice_store::fds::open_files_limit()
        ),
    }
}

/// `max.connections.per.ip.overrides`' hosts as addresses (an IP as it is; a host name by
/// the resolver, every address it has, as Kafka's `InetAddress.getByName` takes its first).
fn resolve_per_ip_overrides(overrides: &[(String, u32)]) -> Result<HashMap<IpAddr, u32>> {
    use std::net::ToSocketAddrs;
    let mut out = HashMap::new();
    for (host, n) in overrides {
        if let Ok(ip) = host.parse::<IpAddr>() {
            out.insert(ip, *n);
            continue;
        }
        let addrs = (host.as_str(), 0)
            .to_socket_addrs()
            .with_context(|| format!("max.connections.per.ip.overrides: cannot resolve {host}"))?;
        for a in addrs {
            out.insert(a.ip(), *n);
        }
    }
    Ok(out)
}

/// The runtime, with `worker_threads` workers (0: one per CPU), and that number.
///
/// tokio gives its workers and its blocking pool's threads one name. A worker blocked in the
/// kernel stalls every connection it serves, a blocking-pool thread only its own call, so
/// profiles and the benchmark's blocked-time sampler need them apart: the first `workers`
/// threads (the runtime starts its workers while it is built, before any blocking thread)
/// are `sluice-worker-N`, the rest `sluice-blocking`.
fn build_runtime(worker_threads: u16) -> Result<(tokio::runtime::Runtime, usize)> {
    let workers = match worker_threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => usize::from(n),
    };
    let named = Arc::new(AtomicUsize::new(0));
    let counter = named.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .thread_name_fn(move || {
            let n = counter.fetch_add(1, Ordering::Relaxed);
            if n < workers {
                format!("sluice-worker-{n}")
            } else {
                "sluice-blocking".to_string()
            }
        })
        .enable_all()
        .build()?;
    if named.load(Ordering::Relaxed) != workers || runtime.metrics().num_workers() != workers {
        tracing::warn!(
            "the runtime started {} thread(s) while built for {} worker(s): its threads' names may not tell workers from blocking calls",
            named.load(Ordering::Relaxed),
            runtime.metrics().num_workers()
        );
    }
    Ok((runtime, workers))
}

/// Binds every Kafka listener, with its TLS settings loaded, before the broker opens: in a
/// cluster it registers while opening, and its peers take a registered broker whose listener
/// refuses connections for a dead one (the kernel queues connections until the broker serves
/// them). A port in use or a TLS mistake fails the start before anything is registered.
/// Returns the bound listeners and the certificates of the TLS ones.
async fn bind_listeners(config: &BrokerConfig) -> Result<(Vec<Bound>, Vec<Arc<ListenerTls>>)> {
    let mut bound = Vec::new();
    let mut certs = Vec::new();
    for l in &config.listeners {
        let protocol = listener_protocol(config, &l.name);
        let tls = match protocol {
            SecurityProtocol::Plaintext | SecurityProtocol::SaslPlaintext => None,
            SecurityProtocol::Ssl | SecurityProtocol::SaslSsl => {
                let settings = config
                    .listener_tls
                    .get(&l.name)
                    .with_context(|| format!("listener {} has no TLS settings", l.name))?;
                // Brokers call each other on the inter-broker listener, over TLS when it is
                // an SSL one.
                let inter_broker = l.name == config.inter_broker_listener;
                let listener = Arc::new(
                    ListenerTls::load(&l.name, settings, inter_broker)
                        .map_err(|e| anyhow::anyhow!(e))?,
                );
                certs.push(listener.clone());
                // On SASL_SSL, SASL says who the client is; on SSL, its certificate.
                let principals = (protocol == SecurityProtocol::Ssl)
                    .then(|| Arc::new(settings.principal_mapping.clone()));
                Some(sluice_server::Tls {
                    certs: listener,
                    principals,
                })
            }
        };
        if protocol == SecurityProtocol::SaslPlaintext
            && config
                .listener_sasl
                .get(&l.name)
                .is_some_and(|s| s.mechanisms.contains(&sluice_config::SaslMechanism::Plain))
        {
            tracing::warn!(
                "listener {} takes SASL/PLAIN without TLS: passwords cross the network in clear text (map it to SASL_SSL)",
                l.name
            );
        }
        let addr = l.address();
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .with_context(|| format!("cannot listen on {addr} (listener {})", l.name))?;
        bound.push(Bound {
            name: l.name.as_str().into(),
            listener,
            tls,
        });
    }
    Ok((bound, certs))
}

/// A listener's security protocol (PLAINTEXT when `listener.security.protocol.map` has none).
fn listener_protocol(config: &BrokerConfig, name: &str) -> SecurityProtocol {
    config
        .listener_protocols
        .get(name)
        .copied()
        .unwrap_or(SecurityProtocol::Plaintext)
}

/// The client brokers call each other with: over TLS when the inter-broker listener is an SSL
/// one (with that listener's certificates), with SASL when the config names a mechanism.
fn peer_client(config: &BrokerConfig, certs: &[Arc<ListenerTls>]) -> TcpPeers {
    let peers = match certs
        .iter()
        .find(|l| l.name() == config.inter_broker_listener)
    {
        Some(listener) => TcpPeers::with_tls(config.node_id, listener.clone()),
        None => TcpPeers::new(config.node_id),
    };
    match &config.inter_broker_sasl {
        Some((mechanism, login)) => peers.with_sasl(*mechanism, login),
        None => peers,
    }
}

/// Logs what the broker can hold: the descriptor budget and the partitions and connections
/// it implies, the page cache kept, and each listener.
fn log_capacity(broker: &Broker, bound: &[Bound], workers: usize) -> Result<()> {
    let fds = broker.fd_budget();
    tracing::info!(
        "open-files limit {}: {} reserved, {} for partition files (sluice.log.open.files.max), {} for client connections (max.connections); up to {} partitions (sluice.broker.partitions.max), {} open now",
        fds.limit,
        fds.reserved,
        fds.files,
        fds.connections,
        fds.partitions,
        broker.partition_count(),
    );
    let cache_bytes = broker.config().log_cache_bytes;
    if cache_bytes >= 0 {
        tracing::info!(
            "page cache kept of the partition logs: {} MiB (sluice.log.cache.bytes)",
            cache_bytes >> 20
        );
    } else {
        tracing::info!(
            "page cache of the partition logs left to the kernel (sluice.log.cache.bytes=-1)"
        );
    }
    for b in bound {
        tracing::info!(
            "listener {} ({}) on {} with {workers} worker thread(s)",
            b.name,
            listener_protocol(broker.config(), &b.name),
            b.listener.local_addr()?
        );
    }
    Ok(())
}

/// Serves until a signal, then shuts down in order: leave the cluster while the listeners
/// still accept (its clients are answered NOT_LEADER meanwhile), stop the listeners and the
/// background tasks, close the logs. A listener that ends by itself (a panic) exits the
/// process with 70: a broker whose listener refuses is taken for dead by its peers, and must be.
async fn run(
    broker: Arc<Broker>,
    bound: Vec<Bound>,
    limits: sluice_server::Limits,
    console: Option<Console>,
) -> Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let maintenance = spawn_maintenance(broker.clone(), stop_rx.clone());
    let metrics_server = spawn_metrics_listener(&broker, stop_rx.clone()).await?;
    let console_server = spawn_console(&broker, console, stop_rx.clone()).await?;
    let mut server = tokio::spawn(sluice_server::serve(broker.clone(), bound, limits, stop_rx));
    tokio::select! {
        _ = shutdown_signal() => {}
        ended = &mut server => {
            tracing::error!(?ended, "the listener stopped while the broker runs; exiting");
            std::process::exit(70);
        }
    }
    tracing::info!("shutting down");
    {
        let b = broker.clone();
        let _ = tokio::task::spawn_blocking(move || b.leave_cluster()).await;
    }
    let _ = stop_tx.send(true);
    let _ = server.await;
    let _ = maintenance.await;
    if let Some(m) = metrics_server {
        let _ = m.await;
    }
    if let Some(c) = console_server {
        let _ = c.await;
    }
    broker.shutdown()?;
    tracing::info!("shut down cleanly");
    Ok(())
}

/// The maintenance round (retention, rolls, cleaner scheduling) every
/// `Broker::maintenance_interval`, and the flush check every `FLUSH_CHECK_INTERVAL`, each on
/// a blocking thread, until `stop`.
fn spawn_maintenance(broker: Arc<Broker>, mut stop: watch::Receiver<bool>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(broker.maintenance_interval());
        let mut flush_tick = tokio::time::interval(sluice_broker::FLUSH_CHECK_INTERVAL);
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let b = broker.clone();
                    let _ = tokio::task::spawn_blocking(move || b.maintain()).await;
                }
                _ = flush_tick.tick() => {
                    let b = broker.clone();
                    let _ = tokio::task::spawn_blocking(move || b.flush_due_logs()).await;
                }
                _ = stop.changed() => break,
            }
        }
    })
}

/// `/metrics`, `/healthz` and `/readyz` on `sluice.metrics.listener`, when it is set.
async fn spawn_metrics_listener(
    broker: &Arc<Broker>,
    stop: watch::Receiver<bool>,
) -> Result<Option<JoinHandle<()>>> {
    let Some(addr) = broker.config().metrics_listener.clone() else {
        return Ok(None);
    };
    let listener = tokio::net::TcpListener::bind(&addr)
        .await
        .with_context(|| format!("cannot listen on {addr} (sluice.metrics.listener)"))?;
    tracing::info!(
        "serving /metrics, /healthz and /readyz on http://{}",
        listener.local_addr()?
    );
    Ok(Some(tokio::spawn(sluice_server::serve_http(
        broker.clone(),
        listener,
        stop,
    ))))
}

/// The console's listener address and its Kafka client, when `sluice.console.listener` is set.
struct Console {
    addr: String,
    peers: TcpPeers,
    settings: sluice_console::Settings,
}

/// The console reaches the cluster through one of this broker's own listeners, never with the
/// brokers' own identity (an SSL or SASL inter-broker login would act as a super user): the
/// first SASL_PLAINTEXT listener with SCRAM or PLAIN enabled, each user logging in to the
/// console as a Kafka client of that listener would; else the first PLAINTEXT listener, as a
/// client without credentials (`User:ANONYMOUS` to the authorizer).
fn console_client(config: &BrokerConfig) -> Result<Option<Console>> {
    use sluice_config::SaslMechanism;
    let Some(addr) = config.console_listener.clone() else {
        return Ok(None);
    };
    // The mechanisms a login is tried with on a listener: SCRAM first (its passwords never
    // cross the connection), then PLAIN.
    let login_mechanisms = |name: &str| -> Vec<SaslMechanism> {
        let Some(sasl) = config.listener_sasl.get(name) else {
            return Vec::new();
        };
        [
            SaslMechanism::ScramSha512,
            SaslMechanism::ScramSha256,
            SaslMechanism::Plain,
        ]
        .into_iter()
        .filter(|m| sasl.mechanisms.contains(m))
        .collect()
    };
    let sasl = config.listeners.iter().find_map(|l| {
        let mechanisms = login_mechanisms(&l.name);
        (listener_protocol(config, &l.name) == SecurityProtocol::SaslPlaintext
            && !mechanisms.is_empty())
        .then_some((l, mechanisms))
    });
    let plain = || {
        config
            .listeners
            .iter()
            .find(|l| listener_protocol(config, &l.name) == SecurityProtocol::Plaintext)
    };
    let Some(listener) = sasl.as_ref().map(|(l, _)| *l).or_else(plain) else {
        anyhow::bail!(
            "sluice.console.listener is set, but the console needs a SASL_PLAINTEXT listener with SCRAM or PLAIN enabled, or a PLAINTEXT listener, to reach the cluster through (it does not connect with TLS)"
        );
    };
    let advertised = config
        .advertised_listeners
        .iter()
        .find(|l| l.name == listener.name)
        .unwrap_or(listener);
    let host = match advertised.host.as_str() {
        "" | "0.0.0.0" | "::" => "127.0.0.1".to_string(),
        h => h.to_string(),
    };
    let node_id = config.node_id;
    let login = sasl.map(|(_, mechanisms)| sluice_console::LoginSettings {
        mechanisms: mechanisms.iter().map(|m| m.name().to_string()).collect(),
        connect: Arc::new(move |mechanism: &str, user: &str, password: &str| {
            let login = sluice_config::SaslLogin {
                username: user.to_string(),
                password: password.to_string(),
            };
            let peers = TcpPeers::new(node_id).named("sluice-console");
            Arc::new(match SaslMechanism::parse(mechanism) {
                Some(m) => peers.with_sasl(m, &login),
                // Never: the names come from the list above.
                None => peers,
            }) as Arc<dyn sluice_broker::PeerClient>
        }),
        sessions_max: config.console_sessions_max as usize,
        sessions_per_user_max: config.console_sessions_per_user_max as usize,
        idle: Duration::from_millis(config.console_session_idle_ms),
        recheck: Duration::from_millis(config.console_session_recheck_ms),
    });
    Ok(Some(Console {
        addr,
        peers: TcpPeers::new(node_id).named("sluice-console"),
        settings: sluice_console::Settings {
            read_only: config.console_read_only,
            hosts: config.console_hosts.clone(),
            connections_max: config.console_connections_max as usize,
            bootstrap: (host, advertised.port),
            login,
        },
    }))
}

/// The web console on `sluice.console.listener`, when it is set.
async fn spawn_console(
    broker: &Arc<Broker>,
    console: Option<Console>,
    stop: watch::Receiver<bool>,
) -> Result<Option<JoinHandle<()>>> {
    let Some(console) = console else {
        return Ok(None);
    };
    let listener = tokio::net::TcpListener::bind(&console.addr)
        .await
        .with_context(|| {
            format!(
                "cannot listen on {} (sluice.console.listener)",
                console.addr
            )
        })?;
    tracing::info!(
        "serving the web console on http://{}{}{}",
        listener.local_addr()?,
        match &console.settings.login {
            Some(l) => format!(
                ", each user logging in with SASL ({})",
                l.mechanisms.join(", ")
            ),
            None => String::new(),
        },
        if console.settings.read_only {
            " (read-only)"
        } else {
            ""
        }
    );
    Ok(Some(tokio::spawn(sluice_console::serve(
        broker.clone(),
        Arc::new(console.peers),
        console.settings,
        listener,
        stop,
    ))))
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_ip_overrides_take_addresses_as_they_are_and_resolve_names() {
        let out = resolve_per_ip_overrides(&[
            ("127.0.0.7".to_string(), 3),
            ("::1".to_string(), 4),
            ("localhost".to_string(), 5),
        ])
        .unwrap();
        assert_eq!(out[&"127.0.0.7".parse::<IpAddr>().unwrap()], 3);
        // localhost resolves to 127.0.0.1 (and ::1 where the resolver has it, which then
        // takes the later entry's limit).
        assert_eq!(out[&"127.0.0.1".parse::<IpAddr>().unwrap()], 5);
    }
}

//! The `sluice` command line (parsed with clap; `sluice help SUBCOMMAND` or `--help` on each).
//!
//! `sluice serve` runs one broker: with no arguments on 127.0.0.1:9092 with data under
//! `./sluice-data` and the embedded metadata store; `--config server.properties` takes Kafka's
//! property names; `--override name=value` sets one property on top.
//!
//! `sluice volume check PATH` tells an operator what a mount will do to a log directory
//! (silly rename, fsync latency, throughput); the logic is `sluice_store::volume`.
//!
//! `sluice machine check` samples how fast this machine copies memory (for telling a
//! benchmark's spread from the machine's own); the logic is `sluice_bench::machine`.
//!
//! `sluice stats` (`stats.rs`) prints periodic statistics scraped from brokers' metrics
//! listeners; `sluice size` (`size.rs`) is the sizing calculator; `sluice bench` is the
//! `sluice-bench` crate.

mod size;
mod stats;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use sluice_config::BrokerConfig;

/// Sluice: a Kafka-compatible streaming broker built for shared storage.
#[derive(Debug, Parser)]
#[command(
    name = "sluice",
    version,
    arg_required_else_help = true,
    after_help = "Log verbosity: RUST_LOG (default info)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a broker (with no options: 127.0.0.1:9092, data in ./sluice-data).
    Serve(ServeArgs),
    /// Check what a volume will do to a log directory.
    #[command(subcommand)]
    Volume(VolumeCommand),
    /// Check how fast this machine copies memory, sampled over time.
    #[command(subcommand)]
    Machine(MachineCommand),
    /// Periodic statistics of running brokers, read from their metrics listeners.
    Stats(stats::StatsArgs),
    /// Sizing calculator: brokers and capacity for a produce rate, from the volume's throughput.
    Size(size::SizeArgs),
    /// Run an OpenMessaging Benchmark workload against a Kafka-compatible broker
    /// (`sluice bench --help` for its options).
    #[command(disable_help_flag = true)]
    Bench {
        /// The workload file and options (see `sluice bench --help`).
        #[arg(
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "ARGS"
        )]
        args: Vec<String>,
    },
}

#[derive(Debug, clap::Args)]
struct ServeArgs {
    /// A Kafka server.properties file (Kafka's property names).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Set one property, after the file (may be repeated).
    #[arg(long = "override", value_name = "NAME=VALUE", value_parser = parse_override)]
    overrides: Vec<(String, String)>,
}

#[derive(Debug, Subcommand)]
enum VolumeCommand {
    /// Test, in a scratch directory under PATH that is removed afterwards, whether files
    /// unlinked while open are silly-renamed (NFS, FUSE), fsync latency and rate, and
    /// sequential write/read throughput, then print a verdict.
    Check {
        /// A directory on the volume (a log dir, or where one will be).
        #[arg(required_unless_present = "config", conflicts_with = "config")]
        path: Option<PathBuf>,
        /// Check every log dir of this broker's server.properties instead, each with the
        /// storage node it declares and whether this broker reaches it directly
        /// (`sluice.volume.storage.nodes`, `sluice.broker.storage.nodes`): run it on each
        /// broker's host to see what direct access is worth.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// MiB written and read back for the throughput test.
        #[arg(long, default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..))]
        size_mb: u64,
    },
}

#[derive(Debug, Subcommand)]
enum MachineCommand {
    /// Time a 32 MiB memory copy (more than the caches hold) and 256 KiB ones (in them), every
    /// 100 ms, and print the rates' percentiles and how far they move from second to second
    /// (a shared host's other tenants move them; steal time does not show it).
    Check {
        /// How long to sample, in seconds.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=3600))]
        seconds: u64,
    },
}

fn parse_override(kv: &str) -> Result<(String, String), String> {
    let (k, v) = kv
        .split_once('=')
        .ok_or_else(|| format!("{kv:?} is not NAME=VALUE"))?;
    Ok((k.trim().to_string(), v.trim().to_string()))
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve(args),
        Command::Volume(VolumeCommand::Check {
            path,
            config,
            size_mb,
        }) => volume_check(path, config, size_mb),
        Command::Machine(MachineCommand::Check { seconds }) => machine_check(seconds),
        Command::Stats(args) => stats::run(args),
        Command::Size(args) => size::run(args),
        Command::Bench { args } => sluice_bench::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn volume_check(path: Option<PathBuf>, config: Option<PathBuf>, size_mb: u64) -> Result<()> {
    let opts = || sluice_store::volume::VolumeCheckOptions {
        throughput_bytes: size_mb * 1024 * 1024,
        ..Default::default()
    };
    let check = |path: &std::path::Path| -> Result<()> {
        let report = sluice_store::volume::check_volume(path, opts())
            .with_context(|| format!("volume check of {}", path.display()))?;
        print!("{report}");
        Ok(())
    };
    let Some(file) = config else {
        return check(&path.context("a PATH or --config is needed")?);
    };
    let config = broker_config(ServeArgs {
        config: Some(file),
        overrides: Vec::new(),
    })?;
    for dir in &config.log_dirs {
        let node = config
            .volume_nodes
            .iter()
            .find(|(d, _)| d == dir)
            .map(|(_, n)| n.as_str());
        let reach = match node {
            Some(n) if config.storage_nodes.iter().any(|s| s == n) => "direct",
            Some(_) => "indirect",
            None => "not declared",
        };
        println!(
            "log dir {} (broker {}): storage node {}, {reach}",
            dir.display(),
            config.node_id,
            node.unwrap_or("-"),
        );
        check(dir)?;
        println!();
    }
    Ok(())
}

fn machine_check(seconds: u64) -> Result<()> {
    use sluice_bench::machine;
    let samples = machine::sample(Duration::from_secs(seconds), Duration::from_millis(100));
    let summary = machine::summarize(&samples).context("no samples taken")?;
    print!("{summary}");
    Ok(())
}

/// `max.connections.per.ip.overrides`' hosts as addresses (an IP as it is; a host name by
/// the resolver, every address it has, as Kafka's `InetAddress.getByName` takes its first).
fn resolve_per_ip_overrides(
    overrides: &[(String, u32)],
) -> Result<std::collections::HashMap<std::net::IpAddr, u32>> {
    use std::net::ToSocketAddrs;
    let mut out = std::collections::HashMap::new();
    for (host, n) in overrides {
        if let Ok(ip) = host.parse::<std::net::IpAddr>() {
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

fn broker_config(args: ServeArgs) -> Result<BrokerConfig> {
    let mut props = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            sluice_config::parse_properties(&text)
        }
        None => BTreeMap::new(),
    };
    props.extend(args.overrides);
    Ok(BrokerConfig::from_properties(props)?)
}

fn serve(args: ServeArgs) -> Result<()> {
    let config = broker_config(args)?;
    // As Go's runtime and many servers do: the soft limit is a leftover of select(2)'s days.
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
    let per_ip_overrides = resolve_per_ip_overrides(&config.max_connections_per_ip_overrides)?;
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    // 0 in the config means one per CPU.
    let workers = match config.worker_threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => usize::from(n),
    };
    builder.worker_threads(workers);
    // tokio gives its workers and its blocking pool's threads one name. A worker blocked in
    // the kernel stalls every connection it serves, a blocking-pool thread only its own
    // call, so profiles and the benchmark's blocked-time sampler need them apart. The
    // runtime starts its workers while it is built, before any blocking thread.
    let named = Arc::new(AtomicUsize::new(0));
    let counter = named.clone();
    builder.thread_name_fn(move || {
        let n = counter.fetch_add(1, Ordering::Relaxed);
        if n < workers {
            format!("sluice-worker-{n}")
        } else {
            "sluice-blocking".to_string()
        }
    });
    let runtime = builder.enable_all().build()?;
    if named.load(Ordering::Relaxed) != workers || runtime.metrics().num_workers() != workers {
        tracing::warn!(
            "the runtime started {} thread(s) while built for {} worker(s): its threads' names may not tell workers from blocking calls",
            named.load(Ordering::Relaxed),
            runtime.metrics().num_workers()
        );
    }
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
        let cache_bytes = config.log_cache_bytes;
        // Bound before the broker opens: in a cluster it registers while opening, and its
        // peers take a registered broker whose listener refuses connections for a dead one
        // (the kernel queues connections until the broker serves them). A port in use fails
        // the start before anything is registered.
        let mut bound = Vec::new();
        let mut certs = Vec::new();
        for l in &config.listeners {
            use sluice_config::SecurityProtocol;
            let protocol = config
                .listener_protocols
                .get(&l.name)
                .copied()
                .unwrap_or(SecurityProtocol::Plaintext);
            let tls = match protocol {
                SecurityProtocol::Plaintext | SecurityProtocol::SaslPlaintext => None,
                SecurityProtocol::Ssl | SecurityProtocol::SaslSsl => {
                    let settings = config
                        .listener_tls
                        .get(&l.name)
                        .with_context(|| format!("listener {} has no TLS settings", l.name))?;
                    // Brokers call each other on the inter-broker listener, over TLS when it
                    // is an SSL one (loaded before the broker opens, so that a TLS mistake
                    // registers nothing).
                    let inter_broker = l.name == config.inter_broker_listener;
                    let listener = std::sync::Arc::new(
                        sluice_server::ListenerTls::load(&l.name, settings, inter_broker)
                            .map_err(|e| anyhow::anyhow!(e))?,
                    );
                    certs.push(listener.clone());
                    // On SASL_SSL, SASL says who the client is; on SSL, its certificate.
                    let principals = (protocol == SecurityProtocol::Ssl)
                        .then(|| std::sync::Arc::new(settings.principal_mapping.clone()));
                    Some(sluice_server::Tls {
                        certs: listener,
                        principals,
                    })
                }
            };
            if protocol == SecurityProtocol::SaslPlaintext
                && config.listener_sasl.get(&l.name).is_some_and(|s| {
                    s.mechanisms.contains(&sluice_config::SaslMechanism::Plain)
                })
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
            bound.push(sluice_server::Bound {
                name: l.name.as_str().into(),
                listener,
                tls,
            });
        }
        let peers = match certs
            .iter()
            .find(|l| l.name() == config.inter_broker_listener)
        {
            Some(listener) => sluice_server::TcpPeers::with_tls(config.node_id, listener.clone()),
            None => sluice_server::TcpPeers::new(config.node_id),
        };
        let peers = match &config.inter_broker_sasl {
            Some((mechanism, login)) => peers.with_sasl(*mechanism, login),
            None => peers,
        };
        let broker = sluice_broker::Broker::open(config)?;
        broker.set_reader_peers(std::sync::Arc::new(peers.separate()));
        broker.set_peers(std::sync::Arc::new(peers));
        // OAUTHBEARER key sets at http(s):// URLs are fetched with the server's client.
        broker.set_jwks_fetcher(sluice_server::jwks_fetcher());
        // Keystores and truststores set at run time before this start are taken up now.
        broker.set_certificates(std::sync::Arc::new(sluice_server::Certificates::new(certs)));
        let fds = broker.fd_budget();
        limits.max_connections = u32::try_from(fds.connections).unwrap_or(u32::MAX);
        tracing::info!(
            "open-files limit {}: {} reserved, {} for partition files (sluice.log.open.files.max), {} for client connections (max.connections); up to {} partitions (sluice.broker.partitions.max), {} open now",
            fds.limit,
            fds.reserved,
            fds.files,
            fds.connections,
            fds.partitions,
            broker.partition_count(),
        );
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
        for b in &bound {
            let protocol = broker
                .config()
                .listener_protocols
                .get(b.name.as_ref())
                .copied()
                .unwrap_or(sluice_config::SecurityProtocol::Plaintext);
            tracing::info!(
                "listener {} ({protocol}) on {} with {workers} worker thread(s)",
                b.name,
                b.listener.local_addr()?
            );
        }

        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let maintenance = {
            let broker = broker.clone();
            let mut stop = stop_rx.clone();
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
        };
        let metrics_server = match broker.config().metrics_listener.clone() {
            Some(addr) => {
                let listener = tokio::net::TcpListener::bind(&addr)
                    .await
                    .with_context(|| {
                        format!("cannot listen on {addr} (sluice.metrics.listener)")
                    })?;
                tracing::info!(
                    "serving /metrics, /healthz and /readyz on http://{}",
                    listener.local_addr()?
                );
                Some(tokio::spawn(sluice_server::serve_http(
                    broker.clone(),
                    listener,
                    stop_rx.clone(),
                )))
            }
            None => None,
        };
        let mut server = tokio::spawn(sluice_server::serve(
            broker.clone(),
            bound,
            limits,
            stop_rx,
        ));
        tokio::select! {
            _ = shutdown_signal() => {}
            ended = &mut server => {
                // Only a shutdown ends the listener. One that ended otherwise (a panic) leaves
                // a process its peers take for dead (its listener refuses): it must be.
                tracing::error!(?ended, "the listener stopped while the broker runs; exiting");
                std::process::exit(70);
            }
        }
        tracing::info!("shutting down");
        // In a cluster, leave it while the listener still accepts (its peers take a broker
        // whose listener refuses for dead); its clients are answered NOT_LEADER meanwhile.
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
        broker.shutdown()?;
        tracing::info!("shut down cleanly");
        Ok(())
    })
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

//! The `sluice` command line.
//!
//! `sluice serve` runs one broker: with no arguments on 127.0.0.1:9092 with data under
//! `./sluice-data` and the embedded metadata store; `--config server.properties` takes Kafka's
//! property names; `--override name=value` sets one property on top.
//!
//! `sluice volume check PATH` tells an operator what a mount will do to a log directory
//! (silly rename, fsync latency, throughput); the logic is `sluice_store::volume`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use sluice_config::BrokerConfig;

const USAGE: &str = "\
usage: sluice serve [--config FILE] [--override NAME=VALUE]...
       sluice volume check PATH [--size-mb N]
       sluice bench WORKLOAD.yaml [--driver DRIVER.yaml] [--bootstrap HOST:PORT] (see sluice bench --help)

  --config FILE          a Kafka server.properties file (Kafka's property names)
  --override NAME=VALUE  set one property, after the file (may be repeated)

`volume check` tests, in a scratch directory under PATH that it removes afterwards, whether
files unlinked while open are silly-renamed (NFS, FUSE), fsync latency and rate, and
sequential write/read throughput (N MiB, default 256), then prints a verdict.

With no arguments the broker listens on 127.0.0.1:9092 and keeps its data in ./sluice-data.
Log verbosity: RUST_LOG (default info).";

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: Vec<String>) -> Result<()> {
    let Some((command, rest)) = args.split_first() else {
        println!("{USAGE}");
        return Ok(());
    };
    match command.as_str() {
        "serve" => serve(rest),
        "volume" => volume(rest),
        "bench" => sluice_bench::run(rest),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => bail!("unknown command {other:?}\n{USAGE}"),
    }
}

fn volume(args: &[String]) -> Result<()> {
    let mut it = args.iter();
    match it.next().map(String::as_str) {
        Some("check") => {}
        _ => bail!("usage: sluice volume check PATH [--size-mb N]"),
    }
    let mut path: Option<PathBuf> = None;
    let mut opts = sluice_store::volume::VolumeCheckOptions::default();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--size-mb" => {
                let n: u64 = it
                    .next()
                    .context("--size-mb needs a number")?
                    .parse()
                    .context("--size-mb needs a number")?;
                opts.throughput_bytes = n.max(1) * 1024 * 1024;
            }
            other if path.is_none() && !other.starts_with("--") => path = Some(other.into()),
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    let path = path.context("sluice volume check needs a PATH")?;
    let report = sluice_store::volume::check_volume(&path, opts)
        .with_context(|| format!("volume check of {}", path.display()))?;
    print!("{report}");
    Ok(())
}

fn parse_serve_args(args: &[String]) -> Result<BrokerConfig> {
    let mut file: Option<PathBuf> = None;
    let mut overrides = BTreeMap::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--config" => file = Some(it.next().context("--config needs a file")?.into()),
            "--override" => {
                let kv = it.next().context("--override needs NAME=VALUE")?;
                let (k, v) = kv
                    .split_once('=')
                    .with_context(|| format!("--override {kv:?} is not NAME=VALUE"))?;
                overrides.insert(k.trim().to_string(), v.trim().to_string());
            }
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    let mut props = match &file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read {}", path.display()))?;
            sluice_config::parse_properties(&text)
        }
        None => BTreeMap::new(),
    };
    props.extend(overrides);
    Ok(BrokerConfig::from_properties(props)?)
}

fn serve(args: &[String]) -> Result<()> {
    let config = parse_serve_args(args)?;
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if config.worker_threads > 0 {
        builder.worker_threads(usize::from(config.worker_threads));
    }
    let runtime = builder.enable_all().build()?;
    // What the runtime runs with, as it reports it (0 in the config means one per CPU).
    let workers = runtime.metrics().num_workers();
    runtime.block_on(async move {
        let listener_conf = config
            .listeners
            .first()
            .cloned()
            .context("listeners is empty")?;
        let addr = listener_conf.address();
        let limits = sluice_server::Limits {
            max_request_bytes: config.socket_request_max_bytes,
            max_connections: config.max_connections,
            idle_timeout: Duration::from_millis(config.connections_max_idle_ms),
            max_in_flight: 64,
        };
        let broker = sluice_broker::Broker::open(config)?;
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .with_context(|| format!("cannot listen on {addr}"))?;
        tracing::info!(
            "listening on {} with {workers} worker thread(s)",
            listener.local_addr()?
        );

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
        let server = tokio::spawn(sluice_server::serve(
            broker.clone(),
            listener,
            limits,
            stop_rx,
        ));
        shutdown_signal().await;
        tracing::info!("shutting down");
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

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

mod serve;
mod size;
mod stats;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
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
        Command::Serve(args) => broker_config(args).and_then(serve::serve),
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

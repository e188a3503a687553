//! `sluice bench`: OpenMessaging-Benchmark-style workloads against any Kafka-compatible broker.
//!
//! Owns: reading OMB workload and driver files, a small pipelined Kafka client (Metadata,
//! CreateTopics/DeleteTopics, Produce, assign-style Fetch), rate-controlled producers and
//! consumers, latency histograms, periodic reports, and the JSON + HTML result files. Does not
//! own: the broker (it only speaks the wire protocol to it), consumer groups (consumers are
//! assigned partitions directly), comparing brokers (`bench/compare` does that).
//!
//! Layout:
//! - [`yaml`]: the YAML subset OMB files use.
//! - [`config`]: workload and driver files, validated, every limit explicit.
//! - [`batch`]: payload pool, RecordBatch v2 encoder, fetched-batch scanner.
//! - [`client`]: one pipelined connection with API version negotiation.
//! - [`admin`]: topic creation, leaders, deletion, the readiness probe and the roll stagger.
//! - [`producer`], [`consumer`]: the load.
//! - [`stats`]: counters and HDR histograms.
//! - [`timer`]: a sub-millisecond sleep for `linger.ms`.
//! - [`machine`]: `sluice machine check`, the machine's memory copy rate over time.
//! - [`run`]: the phases (warm-up, backlog build and drain, measurement) and reporting.
//! - [`report`]: result files.

pub mod admin;
pub mod batch;
pub mod client;
pub mod config;
pub mod consumer;
pub mod machine;
pub mod producer;
pub mod report;
pub mod run;
pub mod stats;
pub mod timer;
pub mod yaml;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};

pub const USAGE: &str = "\
usage: sluice bench WORKLOAD.yaml [--driver DRIVER.yaml] [--bootstrap HOST:PORT] [options]

  WORKLOAD.yaml          an OpenMessaging Benchmark workload file
  --driver FILE          an OMB-style Kafka driver file (replicationFactor, topicConfig,
                         commonConfig, producerConfig, consumerConfig); default: acks=all,
                         linger.ms=5, batch.size=16384
  --bootstrap HOST:PORT  the broker (default: the driver's bootstrap.servers, else
                         127.0.0.1:9092)
  --duration SECS        measured time, overriding testDurationMinutes
  --warmup SECS          warm-up time, overriding warmupDurationMinutes
  --rate MSG_PER_SEC     total producer rate, overriding producerRate (0 = search, during
                         the warm-up, for the highest rate that producers reach with a
                         publish latency within the latency bound and consumers keep up with,
                         then measure whole windows from that rate, up while they hold
                         and down while they do not, up to nine rates; a window that
                         missed on one stall only (reached the rate, at most a tenth of
                         its seconds over the bound) is measured again and the second
                         decides, up to three times; the window at the highest rate
                         held is reported)
  --latency-bound-ms MS  the publish latency a sustainable rate must keep (default 100)
  --latency-percentile P the percentile of publish latency judged against that bound, in
                         the search, in each window and in each second: 99 or 99.9
                         (default 99.9)
  --unthrottled          with rate 0: no search, producers send as fast as acknowledgements
                         come back (the highest publish rate, consumers may fall behind)
  --backlog-gb GB        overriding consumerBacklogSizeGB
  --report-interval SECS progress line interval (default 10)
  --out DIR              where the JSON and HTML results go (default bench-results)
  --name NAME            result file base name (default: workload-driver-timestamp)
  --keep-topics          do not delete the benchmark topics afterwards
  --stagger-rolls BYTES  the brokers' segment size: before the run, write partition p of n
                         p/n of it in filler records (not consumed), so that partitions
                         written evenly roll one after another, as in a log that has been
                         running, not all in the same second as a new topic does

Prints a progress line every interval and a summary at the end, and writes
DIR/NAME.json and DIR/NAME.html (self-contained: open it in a browser).";

/// Largest segment size `--stagger-rolls` takes (Kafka's segment.bytes is an int).
const MAX_STAGGER_BYTES: u64 = i32::MAX as u64;
/// Longest duration accepted on the command line.
const MAX_CLI_SECS: f64 = 24.0 * 3600.0;

fn secs(v: Option<&String>, flag: &str) -> Result<Duration> {
    let v = v.with_context(|| format!("{flag} needs a number of seconds"))?;
    let s: f64 = v
        .parse()
        .ok()
        .filter(|s: &f64| (0.0..=MAX_CLI_SECS).contains(s))
        .with_context(|| format!("{flag} {v:?}: expected seconds in 0..={MAX_CLI_SECS}"))?;
    Ok(Duration::from_secs_f64(s))
}

/// Entry point of `sluice bench` (arguments after the subcommand).
pub fn run(args: &[String]) -> Result<()> {
    let mut workload_path: Option<PathBuf> = None;
    let mut driver_path: Option<PathBuf> = None;
    let mut bootstrap: Option<String> = None;
    let mut duration = None;
    let mut warmup = None;
    let mut rate: Option<f64> = None;
    let mut backlog: Option<f64> = None;
    let mut interval = Duration::from_secs(10);
    let mut out = PathBuf::from("bench-results");
    let mut name: Option<String> = None;
    let mut keep_topics = false;
    let mut unthrottled = false;
    let mut latency_bound_ms = run::DEFAULT_LATENCY_BOUND_MS;
    let mut latency_percentile = run::LatencyPercentile::default();
    let mut stagger_segment_bytes = 0u64;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                return Ok(());
            }
            "--driver" => driver_path = Some(it.next().context("--driver needs a file")?.into()),
            "--bootstrap" => {
                bootstrap = Some(it.next().context("--bootstrap needs HOST:PORT")?.clone())
            }
            "--duration" => duration = Some(secs(it.next(), "--duration")?),
            "--warmup" => warmup = Some(secs(it.next(), "--warmup")?),
            "--report-interval" => {
                interval = secs(it.next(), "--report-interval")?;
                if interval < Duration::from_millis(100) {
                    bail!("--report-interval must be at least 0.1 s");
                }
            }
            "--rate" => {
                let v = it.next().context("--rate needs msg/s")?;
                rate = Some(
                    v.parse()
                        .ok()
                        .filter(|r: &f64| (0.0..=1e9).contains(r))
                        .with_context(|| format!("--rate {v:?}: expected 0..=1e9"))?,
                );
            }
            "--backlog-gb" => {
                let v = it.next().context("--backlog-gb needs GB")?;
                backlog = Some(
                    v.parse()
                        .ok()
                        .filter(|r: &f64| (0.0..=config::MAX_BACKLOG_GB).contains(r))
                        .with_context(|| {
                            format!(
                                "--backlog-gb {v:?}: expected 0..={}",
                                config::MAX_BACKLOG_GB
                            )
                        })?,
                );
            }
            "--out" => out = it.next().context("--out needs a directory")?.into(),
            "--name" => name = Some(it.next().context("--name needs a name")?.clone()),
            "--keep-topics" => keep_topics = true,
            "--unthrottled" => unthrottled = true,
            "--latency-bound-ms" => {
                let v = it.next().context("--latency-bound-ms needs a value")?;
                latency_bound_ms = v
                    .parse()
                    .ok()
                    .filter(|b: &f64| *b > 0.0 && b.is_finite())
                    .with_context(|| format!("--latency-bound-ms {v:?}: expected a number > 0"))?;
            }
            "--latency-percentile" => {
                let v = it.next().context("--latency-percentile needs 99 or 99.9")?;
                latency_percentile = run::LatencyPercentile::parse(v)
                    .with_context(|| format!("--latency-percentile {v:?}: expected 99 or 99.9"))?;
            }
            "--stagger-rolls" => {
                let v = it
                    .next()
                    .context("--stagger-rolls needs a segment size in bytes")?;
                stagger_segment_bytes = v
                    .parse()
                    .ok()
                    .filter(|b: &u64| *b <= MAX_STAGGER_BYTES)
                    .with_context(|| {
                        format!("--stagger-rolls {v:?}: expected bytes in 0..={MAX_STAGGER_BYTES}")
                    })?;
            }
            s if s.starts_with('-') => bail!("unknown option {s:?}\n{USAGE}"),
            s => {
                if workload_path.replace(s.into()).is_some() {
                    bail!("more than one workload file given\n{USAGE}");
                }
            }
        }
    }
    let Some(workload_path) = workload_path else {
        bail!("no workload file given\n{USAGE}");
    };
    let mut workload = config::Workload::from_file(&workload_path)?;
    let driver = match &driver_path {
        Some(p) => config::Driver::from_file(p)?,
        None => config::Driver::default(),
    };
    if let Some(d) = duration {
        workload.test_duration = d;
    }
    if let Some(d) = warmup {
        workload.warmup_duration = d;
    }
    if let Some(r) = rate {
        workload.producer_rate = r;
    }
    if let Some(b) = backlog {
        workload.consumer_backlog_size_gb = b;
    }
    let bootstrap = bootstrap
        .or_else(|| {
            driver
                .bootstrap
                .as_ref()
                .and_then(|b| b.split(',').next().map(|s| s.trim().to_string()))
        })
        .unwrap_or_else(|| "127.0.0.1:9092".to_string());
    let plan = run::Plan {
        workload,
        driver,
        bootstrap,
        report_interval: interval,
        keep_topics,
        unthrottled,
        latency_bound_ms,
        latency_percentile,
        stagger_segment_bytes,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let outcome = runtime.block_on(run::execute(plan))?;
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let base = name.unwrap_or_else(|| {
        let stem = |p: &std::path::Path| {
            p.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        let d = driver_path
            .as_deref()
            .map(stem)
            .unwrap_or_else(|| "default".into());
        format!("{}-{}-{}", stem(&workload_path), d, outcome.started_unix_s)
    });
    let json_path = out.join(format!("{base}.json"));
    let html_path = out.join(format!("{base}.html"));
    std::fs::write(&json_path, report::json(&outcome))
        .with_context(|| format!("cannot write {}", json_path.display()))?;
    std::fs::write(&html_path, report::html(&outcome))
        .with_context(|| format!("cannot write {}", html_path.display()))?;
    println!("wrote {} and {}", json_path.display(), html_path.display());
    Ok(())
}

//! `sluice stats`: periodic statistics after ONTAP's `statistics show-periodic`. Every
//! interval it scrapes each broker's metrics listener, prints one row of rates (summed over
//! the brokers, or one row per broker), and at the end (Ctrl-C or `--count`) the minimum,
//! average and maximum of every column.
//!
//! The rows are computed from two scrapes (`Reading`) by [`row`]; the table by [`Table`];
//! both pure and unit-tested. The scrape is a plain HTTP/1.1 GET.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use sluice_metrics::names;
use sluice_metrics::scrape::{parse, Sample};

#[derive(Debug, clap::Args)]
pub(crate) struct StatsArgs {
    /// Metrics listeners of the brokers (host:port, as in sluice.metrics.listener).
    #[arg(value_name = "HOST:PORT", default_value = "127.0.0.1:9404")]
    brokers: Vec<String>,
    /// Seconds between rows.
    #[arg(short, long, default_value_t = 1.0)]
    interval: f64,
    /// Stop after this many rows (default: until Ctrl-C).
    #[arg(short = 'n', long)]
    count: Option<u64>,
    /// One row per broker each interval instead of one row summed over the brokers.
    #[arg(long)]
    per_broker: bool,
}

/// Number of columns.
const N: usize = 13;

/// The columns, in order.
const COLUMNS: [(&str, Unit); N] = [
    ("cpu", Unit::Percent),
    ("prod/s", Unit::Count),
    ("fetch/s", Unit::Count),
    ("msg-in/s", Unit::Count),
    ("in/s", Unit::Bytes),
    ("out/s", Unit::Bytes),
    ("log:phys", Unit::Ratio),
    ("st-read/s", Unit::Bytes),
    ("st-write/s", Unit::Bytes),
    ("fsync/s", Unit::Count),
    ("fsync-p99", Unit::Micros),
    ("conns", Unit::Count),
    ("lag", Unit::Count),
];

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Percent,
    Count,
    Bytes,
    Micros,
    /// x:1; `-` for 0 (nothing to compare).
    Ratio,
}

/// What one scrape of one broker says, reduced to the numbers the columns need.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Reading {
    cpu_seconds: f64,
    produce_requests: f64,
    fetch_requests: f64,
    messages_in: f64,
    bytes_in: f64,
    bytes_out: f64,
    logical_in: f64,
    physical_in: f64,
    storage_read: f64,
    storage_write: f64,
    fsyncs: f64,
    /// Cumulative fsync histogram: (upper bound in seconds, count).
    fsync_buckets: Vec<(f64, f64)>,
    connections: f64,
    lag: f64,
}

impl Reading {
    pub(crate) fn from_samples(samples: &[Sample]) -> Reading {
        let mut r = Reading::default();
        for s in samples {
            let no_topic = s.label("topic").is_none();
            match s.name.as_str() {
                names::PROCESS_CPU_SECONDS => r.cpu_seconds += s.value,
                names::REQUESTS => match s.label("request") {
                    Some("Produce") => r.produce_requests += s.value,
                    Some("Fetch") => r.fetch_requests += s.value,
                    _ => {}
                },
                names::MESSAGES_IN if no_topic => r.messages_in += s.value,
                names::BYTES_IN if no_topic => r.bytes_in += s.value,
                names::BYTES_OUT if no_topic => r.bytes_out += s.value,
                names::LOGICAL_BYTES_IN if no_topic => r.logical_in += s.value,
                names::PHYSICAL_BYTES_IN if no_topic => r.physical_in += s.value,
                names::STORAGE_READ_BYTES => r.storage_read += s.value,
                names::STORAGE_WRITE_BYTES => r.storage_write += s.value,
                names::CONNECTION_COUNT => r.connections += s.value,
                names::GROUP_LAG => r.lag += s.value,
                n if n == format!("{}_count", names::FSYNC_SECONDS) => r.fsyncs += s.value,
                n if n == format!("{}_bucket", names::FSYNC_SECONDS) => {
                    let le = match s.label("le") {
                        Some("+Inf") => f64::INFINITY,
                        Some(v) => v.parse().unwrap_or(f64::INFINITY),
                        None => continue,
                    };
                    r.fsync_buckets.push((le, s.value));
                }
                _ => {}
            }
        }
        r
    }

    /// The sum of several brokers' readings (histograms bucket by bucket).
    fn sum(readings: &[Reading]) -> Reading {
        let mut t = Reading::default();
        for r in readings {
            t.cpu_seconds += r.cpu_seconds;
            t.produce_requests += r.produce_requests;
            t.fetch_requests += r.fetch_requests;
            t.messages_in += r.messages_in;
            t.bytes_in += r.bytes_in;
            t.bytes_out += r.bytes_out;
            t.logical_in += r.logical_in;
            t.physical_in += r.physical_in;
            t.storage_read += r.storage_read;
            t.storage_write += r.storage_write;
            t.fsyncs += r.fsyncs;
            t.connections += r.connections;
            t.lag += r.lag;
            for (le, c) in &r.fsync_buckets {
                match t.fsync_buckets.iter_mut().find(|(l, _)| l == le) {
                    Some(b) => b.1 += c,
                    None => t.fsync_buckets.push((*le, *c)),
                }
            }
        }
        t.fsync_buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
        t
    }
}

/// The p99 (microseconds) of the fsyncs between two cumulative histograms, as Prometheus's
/// histogram_quantile interpolates within the bucket; None with no fsync in between.
fn fsync_p99_us(before: &[(f64, f64)], after: &[(f64, f64)]) -> Option<f64> {
    let delta: Vec<(f64, f64)> = after
        .iter()
        .map(|(le, c)| {
            let was = before
                .iter()
                .find(|(l, _)| l == le)
                .map_or(0.0, |(_, c)| *c);
            (*le, (c - was).max(0.0))
        })
        .collect();
    let total = delta.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = 0.99 * total;
    let mut prev = (0.0, 0.0);
    for (le, c) in &delta {
        if *c >= rank {
            if le.is_infinite() {
                return Some(prev.0 * 1e6);
            }
            let within = if c - prev.1 > 0.0 {
                (rank - prev.1) / (c - prev.1)
            } else {
                1.0
            };
            return Some((prev.0 + (le - prev.0) * within) * 1e6);
        }
        prev = (*le, *c);
    }
    None
}

/// One row of rates from two readings `secs` apart.
pub(crate) fn row(before: &Reading, after: &Reading, secs: f64) -> [f64; N] {
    let rate = |a: f64, b: f64| ((b - a) / secs).max(0.0);
    let physical = after.physical_in - before.physical_in;
    let ratio = if physical > 0.0 {
        ((after.logical_in - before.logical_in) / physical).max(0.0)
    } else {
        0.0
    };
    [
        rate(before.cpu_seconds, after.cpu_seconds) * 100.0,
        rate(before.produce_requests, after.produce_requests),
        rate(before.fetch_requests, after.fetch_requests),
        rate(before.messages_in, after.messages_in),
        rate(before.bytes_in, after.bytes_in),
        rate(before.bytes_out, after.bytes_out),
        ratio,
        rate(before.storage_read, after.storage_read),
        rate(before.storage_write, after.storage_write),
        rate(before.fsyncs, after.fsyncs),
        fsync_p99_us(&before.fsync_buckets, &after.fsync_buckets).unwrap_or(0.0),
        after.connections,
        after.lag,
    ]
}

/// A value for a column of 10 characters: `12.3MB`, `850us`, `45%`, `1.2K`.
fn format(v: f64, unit: Unit) -> String {
    let scaled = |v: f64, suffixes: &[&str], step: f64| {
        let mut v = v;
        let mut i = 0;
        while v >= step * 0.9995 && i + 1 < suffixes.len() {
            v /= step;
            i += 1;
        }
        if v < 10.0 && i > 0 {
            format!("{v:.1}{}", suffixes[i])
        } else {
            format!("{v:.0}{}", suffixes[i])
        }
    };
    match unit {
        Unit::Percent => format!("{v:.0}%"),
        Unit::Count => scaled(v, &["", "K", "M", "G"], 1000.0),
        Unit::Bytes => scaled(v, &["B", "KB", "MB", "GB", "TB"], 1024.0),
        Unit::Ratio if v <= 0.0 => "-".into(),
        Unit::Ratio => format!("{v:.2}:1"),
        Unit::Micros => {
            if v >= 1000.0 {
                format!("{:.1}ms", v / 1000.0)
            } else {
                format!("{v:.0}us")
            }
        }
    }
}

/// Rows printed so far, for the summary.
#[derive(Debug, Default)]
pub(crate) struct Table {
    rows: Vec<[f64; N]>,
}

impl Table {
    pub(crate) fn header(first: &str) -> String {
        let mut s = format!("{first:>10}");
        for (name, _) in COLUMNS {
            s.push_str(&format!(" {name:>10}"));
        }
        s
    }

    pub(crate) fn add(&mut self, label: &str, values: [f64; N]) -> String {
        self.rows.push(values);
        line(label, &values)
    }

    /// `Minimums:`, `Averages for N samples:`, `Maximums:` as ONTAP ends its table.
    pub(crate) fn summary(&self) -> Vec<String> {
        if self.rows.is_empty() {
            return Vec::new();
        }
        let n = self.rows.len() as f64;
        let mut min = [f64::INFINITY; N];
        let mut max = [f64::NEG_INFINITY; N];
        let mut avg = [0.0; N];
        for r in &self.rows {
            for i in 0..N {
                min[i] = min[i].min(r[i]);
                max[i] = max[i].max(r[i]);
                avg[i] += r[i] / n;
            }
        }
        vec![
            "=".repeat(10 + 11 * COLUMNS.len()),
            format!("Minimums:\n{}", line("", &min)),
            format!(
                "Averages for {} samples:\n{}",
                self.rows.len(),
                line("", &avg)
            ),
            format!("Maximums:\n{}", line("", &max)),
        ]
    }
}

fn line(label: &str, values: &[f64; N]) -> String {
    let mut s = format!("{label:>10}");
    for ((_, unit), v) in COLUMNS.iter().zip(values) {
        s.push_str(&format!(" {:>10}", format(*v, *unit)));
    }
    s
}

/// GET /metrics from `addr` (host:port), with a 5 s limit.
fn scrape(addr: &str) -> Result<Reading> {
    const LIMIT: Duration = Duration::from_secs(5);
    const MAX_BYTES: u64 = 64 << 20;
    let sock = addr
        .to_socket_addrs()
        .with_context(|| format!("{addr}: not a host:port"))?
        .next()
        .with_context(|| format!("{addr}: no address"))?;
    let mut stream = TcpStream::connect_timeout(&sock, LIMIT)
        .with_context(|| format!("cannot connect to {addr}"))?;
    stream.set_read_timeout(Some(LIMIT))?;
    stream.set_write_timeout(Some(LIMIT))?;
    write!(
        stream,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    let mut body = String::new();
    stream
        .take(MAX_BYTES)
        .read_to_string(&mut body)
        .with_context(|| format!("reading {addr}/metrics"))?;
    let (head, page) = body
        .split_once("\r\n\r\n")
        .with_context(|| format!("{addr}: not an HTTP answer"))?;
    if !head.starts_with("HTTP/1.1 200") {
        bail!(
            "{addr}/metrics answered {}",
            head.lines().next().unwrap_or("")
        );
    }
    Ok(Reading::from_samples(&parse(page)))
}

fn scrape_all(brokers: &[String]) -> Result<Vec<Reading>> {
    brokers.iter().map(|b| scrape(b)).collect()
}

pub(crate) fn run(args: StatsArgs) -> Result<()> {
    if !(0.1..=3600.0).contains(&args.interval) {
        bail!("--interval must be between 0.1 and 3600 seconds");
    }
    let interval = Duration::from_secs_f64(args.interval);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut before = scrape_all(&args.brokers)?;
    let mut at = Instant::now();
    let mut table = Table::default();
    println!(
        "{}",
        Table::header(if args.per_broker { "broker" } else { "" })
    );
    let mut printed = 0u64;
    let interrupted = runtime.block_on(async {
        loop {
            if args.count.is_some_and(|n| printed >= n) {
                return Ok::<bool, anyhow::Error>(false);
            }
            tokio::select! {
                _ = tokio::time::sleep_until((at + interval).into()) => {}
                _ = tokio::signal::ctrl_c() => return Ok(true),
            }
            let after = scrape_all(&args.brokers)?;
            let now = Instant::now();
            let secs = now.duration_since(at).as_secs_f64();
            if args.per_broker {
                for ((name, b), a) in args.brokers.iter().zip(&before).zip(&after) {
                    println!("{}", table.add(short(name), row(b, a, secs)));
                }
            } else {
                let values = row(&Reading::sum(&before), &Reading::sum(&after), secs);
                println!("{}", table.add("", values));
            }
            printed += 1;
            before = after;
            at = now;
        }
    })?;
    if interrupted {
        println!();
    }
    for l in table.summary() {
        println!("{l}");
    }
    Ok(())
}

/// The last 10 characters of a broker's address, for its column.
fn short(addr: &str) -> &str {
    let start = addr.len().saturating_sub(10);
    addr.get(start..).unwrap_or(addr)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn page(cpu: f64, produce: f64, bytes_in: f64, fsync_buckets: &[(f64, f64)]) -> Reading {
        let logical = bytes_in * 2.5;
        let mut text = format!(
            "process_cpu_seconds_total {cpu}\n\
             kafka_network_requestmetrics_requests_total{{request=\"Produce\",version=\"9\"}} {produce}\n\
             kafka_network_requestmetrics_requests_total{{request=\"Fetch\",version=\"16\"}} 5\n\
             kafka_server_brokertopicmetrics_bytesin_total {bytes_in}\n\
             kafka_server_brokertopicmetrics_bytesin_total{{topic=\"t\"}} {bytes_in}\n\
             sluice_topic_logical_bytes_in_total {logical}\n\
             sluice_topic_physical_bytes_in_total {bytes_in}\n\
             kafka_consumergroup_lag{{consumergroup=\"g\",topic=\"t\",partition=\"0\"}} 7\n"
        );
        let mut total = 0.0;
        for (le, c) in fsync_buckets {
            text.push_str(&format!(
                "sluice_log_fsync_seconds_bucket{{le=\"{le}\"}} {c}\n"
            ));
            total = *c;
        }
        text.push_str(&format!(
            "sluice_log_fsync_seconds_bucket{{le=\"+Inf\"}} {total}\nsluice_log_fsync_seconds_count {total}\n"
        ));
        Reading::from_samples(&parse(&text))
    }

    #[test]
    fn a_row_is_the_rates_between_two_scrapes() {
        let a = page(1.0, 100.0, 1000.0, &[(0.001, 0.0), (0.01, 0.0)]);
        let b = page(1.5, 300.0, 3048.0, &[(0.001, 50.0), (0.01, 100.0)]);
        let r = row(&a, &b, 2.0);
        assert_eq!(r[0], 25.0); // 0.5 CPU s over 2 s
        assert_eq!(r[1], 100.0); // produce/s
        assert_eq!(r[2], 0.0); // fetch/s
        assert_eq!(r[4], 1024.0); // bytes in/s, the broker-wide series only
        assert_eq!(r[6], 2.5); // logical to physical bytes appended
        assert_eq!(r[9], 50.0); // fsyncs/s
                                // p99 of 100 fsyncs, 50 under 1 ms and 50 in (1 ms, 10 ms]: 9.82 ms interpolated.
        assert!((r[10] - 9820.0).abs() < 1.0, "{}", r[10]);
        assert_eq!(r[12], 7.0);
        let line = Table::default().add("", r);
        assert!(
            line.contains("1.0KB")
                && line.contains("9.8ms")
                && line.contains("25%")
                && line.contains("2.50:1"),
            "{line}"
        );
        // Nothing appended: no ratio.
        assert_eq!(row(&a, &a, 1.0)[6], 0.0);
        assert_eq!(format(0.0, Unit::Ratio), "-");
    }

    #[test]
    fn the_summary_has_minimum_average_and_maximum() {
        let mut t = Table::default();
        let mut r = [0.0; N];
        r[1] = 10.0;
        t.add("", r);
        r[1] = 30.0;
        t.add("", r);
        let s = t.summary().join("\n");
        assert!(s.contains("Averages for 2 samples:"), "{s}");
        let nums: Vec<&str> = s
            .lines()
            .filter(|l| !l.contains(':') && !l.starts_with('='))
            .map(|l| l.split_whitespace().nth(1).unwrap())
            .collect();
        assert_eq!(nums, vec!["10", "20", "30"]);
    }

    #[test]
    fn brokers_sum_bucket_by_bucket() {
        let a = page(1.0, 1.0, 1.0, &[(0.001, 2.0)]);
        let b = page(2.0, 1.0, 1.0, &[(0.001, 3.0)]);
        let s = Reading::sum(&[a, b]);
        assert_eq!(s.cpu_seconds, 3.0);
        assert_eq!(s.fsync_buckets, vec![(0.001, 5.0), (f64::INFINITY, 5.0)]);
        assert_eq!(format(1536.0, Unit::Bytes), "1.5KB");
        assert_eq!(format(2_500_000.0, Unit::Count), "2.5M");
    }
}

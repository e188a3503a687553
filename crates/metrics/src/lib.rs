//! Metrics: every metric name in one place ([`names`]), the counters and histograms the
//! request path updates, and the Prometheus text exposition.
//!
//! Layout:
//! - [`Metrics`] (this file): what the server and the broker count as they work: requests
//!   per API and version, errors per API and error code, request times, per-topic bytes and
//!   messages, fsyncs, group-commit rounds, partition acquisitions, connections. Every update
//!   is one or a few relaxed atomic adds on memory allocated at start-up (a topic's counters:
//!   at its first use); nothing on the request path takes a lock that a scrape holds.
//! - `histogram`: Prometheus histograms and log-linear latency histograms (quantiles).
//! - `exposition`: the text format.
//! - `process`: `process_*` from `/proc/self`.
//! - `names`: every name.
//! - `scrape`: reading the text format back (for `sluice stats`).
//!
//! Does not own: the gauges that describe broker state (partitions, log sizes, consumer lag),
//! which the broker computes at scrape time and writes with [`exposition::Exposition`]; the
//! HTTP listener (the server crate).

pub mod exposition;
pub mod histogram;
pub mod names;
pub mod process;
pub mod scrape;

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use exposition::{Exposition, Kind};
use histogram::{Histogram, LatencyHistogram};
use parking_lot::{Mutex, RwLock};

/// API keys counted (Kafka's go up to about 90).
const API_KEYS: usize = 128;
/// Versions counted per API key; newer versions are counted as this minus one.
const API_VERSIONS: usize = 32;
/// Error codes counted per API key: -1 (UNKNOWN_SERVER_ERROR) to 158; others count as -1.
const ERROR_CODES: usize = 160;

/// fsync latency bounds, microseconds (100 us to 10 s).
static FSYNC_BOUNDS_US: [u64; 16] = [
    100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000, 2_500_000, 5_000_000, 10_000_000,
];
/// Group-commit round sizes (requests answered by one round).
static ROUND_BOUNDS: [u64; 11] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];
/// Partition acquisition times, microseconds (10 ms to 60 s).
static ACQUIRE_BOUNDS_US: [u64; 12] = [
    10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000,
    30_000_000, 60_000_000,
];

/// The request-time quantiles exported, as the JMX exporter labels Kafka's percentiles.
const QUANTILES: [(f64, &str); 6] = [
    (0.50, "0.50"),
    (0.75, "0.75"),
    (0.95, "0.95"),
    (0.98, "0.98"),
    (0.99, "0.99"),
    (0.999, "0.999"),
];

/// Request-time quantiles cover the requests of the last one to two minutes (Kafka's
/// histograms are biased to the last five), so they follow changes in load.
const QUANTILE_WINDOW: Duration = Duration::from_secs(60);

/// Counters of one topic (and of the broker as a whole), Kafka's BrokerTopicMetrics.
#[derive(Debug, Default)]
pub struct TopicCounters {
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub messages_in: AtomicU64,
    pub produce_requests: AtomicU64,
    pub failed_produce_requests: AtomicU64,
    pub fetch_requests: AtomicU64,
    pub failed_fetch_requests: AtomicU64,
    /// Bytes of the appended batches with their records uncompressed, and the bytes they
    /// take in the log as written (after any broker-side recompression).
    pub logical_bytes_in: AtomicU64,
    pub physical_bytes_in: AtomicU64,
    /// Batches whose uncompressed size their compression frame does not state, and the
    /// stored and uncompressed bytes of those the broker decompressed to measure it (recent
    /// ones weigh more: both halve from time to time), from which it estimates the others
    /// (`crates/broker/src/metrics.rs`).
    pub unstated_batches: AtomicU64,
    pub sampled_stored_bytes: AtomicU64,
    pub sampled_logical_bytes: AtomicU64,
}

impl TopicCounters {
    fn load(&self) -> [u64; 9] {
        [
            self.bytes_in.load(Ordering::Relaxed),
            self.bytes_out.load(Ordering::Relaxed),
            self.messages_in.load(Ordering::Relaxed),
            self.produce_requests.load(Ordering::Relaxed),
            self.failed_produce_requests.load(Ordering::Relaxed),
            self.fetch_requests.load(Ordering::Relaxed),
            self.failed_fetch_requests.load(Ordering::Relaxed),
            self.logical_bytes_in.load(Ordering::Relaxed),
            self.physical_bytes_in.load(Ordering::Relaxed),
        ]
    }
}

/// A request's counts for one topic, summed locally and added to the shared counters once
/// (so a request with many partitions touches each shared counter once).
#[derive(Clone, Copy, Debug, Default)]
pub struct ProduceCounts {
    pub partitions: u64,
    pub failed: u64,
    /// Bytes and records appended (of the partitions that did not fail).
    pub bytes: u64,
    pub messages: u64,
    /// Bytes appended uncompressed, and as stored (set by the caller; duplicates excluded).
    pub logical: u64,
    pub physical: u64,
}

impl ProduceCounts {
    pub fn add(&mut self, bytes: u64, messages: u64, failed: bool) {
        self.partitions += 1;
        if failed {
            self.failed += 1;
        } else {
            self.bytes += bytes;
            self.messages += messages;
        }
    }
}

/// A fetch answer's counts for one topic (see [`ProduceCounts`]).
#[derive(Clone, Copy, Debug, Default)]
pub struct FetchCounts {
    pub partitions: u64,
    pub failed: u64,
    pub bytes: u64,
}

impl FetchCounts {
    pub fn add(&mut self, bytes: u64, failed: bool) {
        self.partitions += 1;
        if failed {
            self.failed += 1;
        } else {
            self.bytes += bytes;
        }
    }
}

/// Error codes of one response, tallied locally before they are added to the shared
/// counters (one add per distinct code instead of one per partition).
#[derive(Debug)]
pub struct ErrorTally<'a> {
    metrics: &'a Metrics,
    api_key: i16,
    codes: [(i16, u64); 4],
    len: usize,
}

impl<'a> ErrorTally<'a> {
    pub fn new(metrics: &'a Metrics, api_key: i16) -> ErrorTally<'a> {
        ErrorTally {
            metrics,
            api_key,
            codes: [(0, 0); 4],
            len: 0,
        }
    }

    pub fn count(&mut self, code: i16) {
        if let Some(slot) = self.codes[..self.len].iter_mut().find(|(c, _)| *c == code) {
            slot.1 += 1;
            return;
        }
        if self.len == self.codes.len() {
            self.flush();
        }
        self.codes[self.len] = (code, 1);
        self.len += 1;
    }

    fn flush(&mut self) {
        for (code, n) in &self.codes[..self.len] {
            self.metrics.errors(self.api_key, *code, *n);
        }
        self.len = 0;
    }
}

impl Drop for ErrorTally<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}

/// The BrokerTopicMetrics families, in [`TopicCounters::load`] order.
const TOPIC_FAMILIES: [(&str, &str); 9] = [
    (
        names::BYTES_IN,
        "Bytes of record batches appended, as produced (BytesInPerSec).",
    ),
    (
        names::BYTES_OUT,
        "Bytes of record batches sent to consumers (BytesOutPerSec).",
    ),
    (names::MESSAGES_IN, "Records appended (MessagesInPerSec)."),
    (
        names::TOTAL_PRODUCE_REQUESTS,
        "Produce requests, counted per partition (TotalProduceRequestsPerSec).",
    ),
    (
        names::FAILED_PRODUCE_REQUESTS,
        "Produce requests that failed, per partition (FailedProduceRequestsPerSec).",
    ),
    (
        names::TOTAL_FETCH_REQUESTS,
        "Fetch requests, counted per partition (TotalFetchRequestsPerSec).",
    ),
    (
        names::FAILED_FETCH_REQUESTS,
        "Fetch requests that failed, per partition (FailedFetchRequestsPerSec).",
    ),
    (
        names::LOGICAL_BYTES_IN,
        "Bytes of the record batches appended, with their records uncompressed (as produced, before any compression; estimated for batches whose compression frame does not state it: docs/operations.md).",
    ),
    (
        names::PHYSICAL_BYTES_IN,
        "Bytes the appended record batches take in the log, as written (after broker-side recompression).",
    ),
];

/// Snapshots of one API's request-time buckets, for windowed quantiles.
#[derive(Debug)]
struct Window {
    /// Taken at least [`QUANTILE_WINDOW`] ago: quantiles cover what came after it.
    older: Vec<u64>,
    /// The next `older`, and when it was taken.
    newer: (Instant, Vec<u64>),
}

/// Everything counted while the broker works. One per broker, shared.
#[derive(Debug)]
pub struct Metrics {
    requests: Box<[AtomicU64]>,
    errors: Box<[AtomicU64]>,
    /// Request times in microseconds, per API key (allocated for the APIs served).
    times: Box<[Option<LatencyHistogram>]>,
    windows: Mutex<HashMap<usize, Window>>,
    all_topics: TopicCounters,
    topics: RwLock<HashMap<String, Arc<TopicCounters>>>,
    fsync: Histogram,
    fsync_failures: AtomicU64,
    rounds: Histogram,
    acquisitions: Histogram,
    releases: AtomicU64,
    handovers: AtomicU64,
    /// Per listener: (name, open connections, failed authentications).
    listeners: Vec<(String, AtomicI64, AtomicU64)>,
}

impl Metrics {
    /// Counters for a broker serving the API keys `served` on the listeners named
    /// `listeners`.
    pub fn new(served: impl IntoIterator<Item = i16>, listeners: &[&str]) -> Metrics {
        let mut times: Vec<Option<LatencyHistogram>> = (0..API_KEYS).map(|_| None).collect();
        for key in served {
            if let Some(slot) = usize::try_from(key).ok().and_then(|k| times.get_mut(k)) {
                *slot = Some(LatencyHistogram::default());
            }
        }
        Metrics {
            requests: (0..API_KEYS * API_VERSIONS)
                .map(|_| AtomicU64::new(0))
                .collect(),
            errors: (0..API_KEYS * ERROR_CODES)
                .map(|_| AtomicU64::new(0))
                .collect(),
            times: times.into_boxed_slice(),
            windows: Mutex::new(HashMap::new()),
            all_topics: TopicCounters::default(),
            topics: RwLock::new(HashMap::new()),
            fsync: Histogram::new(&FSYNC_BOUNDS_US),
            fsync_failures: AtomicU64::new(0),
            rounds: Histogram::new(&ROUND_BOUNDS),
            acquisitions: Histogram::new(&ACQUIRE_BOUNDS_US),
            releases: AtomicU64::new(0),
            handovers: AtomicU64::new(0),
            listeners: listeners
                .iter()
                .map(|l| (l.to_string(), AtomicI64::new(0), AtomicU64::new(0)))
                .collect(),
        }
    }

    /// A request was read (counted before it is handled, as Kafka counts RequestsPerSec).
    pub fn request(&self, api_key: i16, version: i16) {
        let (Ok(k), Ok(v)) = (usize::try_from(api_key), usize::try_from(version)) else {
            return;
        };
        if k < API_KEYS {
            let v = v.min(API_VERSIONS - 1);
            self.requests[k * API_VERSIONS + v].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A request's answer was written `elapsed` after the request was read (or, with no
    /// answer, its handling ended).
    pub fn request_time(&self, api_key: i16, elapsed: Duration) {
        if let Some(Some(h)) = usize::try_from(api_key)
            .ok()
            .and_then(|k| self.times.get(k))
        {
            h.record(elapsed.as_micros().min(u128::from(u64::MAX)) as u64);
        }
    }

    /// `n` occurrences of error `code` (0 = NONE) in a response of `api_key`.
    pub fn errors(&self, api_key: i16, code: i16, n: u64) {
        let Ok(k) = usize::try_from(api_key) else {
            return;
        };
        if k >= API_KEYS || n == 0 {
            return;
        }
        let c = usize::try_from(i32::from(code) + 1)
            .ok()
            .filter(|c| *c < ERROR_CODES)
            .unwrap_or(0);
        self.errors[k * ERROR_CODES + c].fetch_add(n, Ordering::Relaxed);
    }

    /// The counters of `topic` (created at its first use).
    pub fn topic(&self, topic: &str) -> Arc<TopicCounters> {
        if let Some(c) = self.topics.read().get(topic) {
            return c.clone();
        }
        self.topics
            .write()
            .entry(topic.to_string())
            .or_default()
            .clone()
    }

    /// Forget a deleted topic's counters.
    pub fn remove_topic(&self, topic: &str) {
        self.topics.write().remove(topic);
    }

    /// A produce request's partitions of one topic (`t`; None for a topic that does not
    /// exist, counted broker-wide only), added once per topic and request.
    pub fn produced(&self, t: Option<&TopicCounters>, c: &ProduceCounts) {
        if c.partitions == 0 {
            return;
        }
        for t in [t, Some(&self.all_topics)].into_iter().flatten() {
            t.produce_requests
                .fetch_add(c.partitions, Ordering::Relaxed);
            if c.failed > 0 {
                t.failed_produce_requests
                    .fetch_add(c.failed, Ordering::Relaxed);
            }
            if c.bytes > 0 {
                t.bytes_in.fetch_add(c.bytes, Ordering::Relaxed);
                t.messages_in.fetch_add(c.messages, Ordering::Relaxed);
            }
            if c.physical > 0 {
                t.logical_bytes_in.fetch_add(c.logical, Ordering::Relaxed);
                t.physical_bytes_in.fetch_add(c.physical, Ordering::Relaxed);
            }
        }
    }

    /// A fetch answer's partitions of one topic, added once per topic and answer.
    pub fn fetched(&self, t: Option<&TopicCounters>, c: &FetchCounts) {
        if c.partitions == 0 {
            return;
        }
        for t in [t, Some(&self.all_topics)].into_iter().flatten() {
            t.fetch_requests.fetch_add(c.partitions, Ordering::Relaxed);
            if c.failed > 0 {
                t.failed_fetch_requests
                    .fetch_add(c.failed, Ordering::Relaxed);
            }
            if c.bytes > 0 {
                t.bytes_out.fetch_add(c.bytes, Ordering::Relaxed);
            }
        }
    }

    /// One log's fsync (a group-commit round's or a periodic flush's) took `elapsed`.
    pub fn fsync(&self, elapsed: Duration, ok: bool) {
        self.fsync.record(elapsed.as_micros() as u64);
        if !ok {
            self.fsync_failures.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The fsyncs so far (microseconds), and how many failed: what the console shows.
    pub fn fsyncs(&self) -> (histogram::HistogramSnapshot, u64) {
        (
            self.fsync.snapshot(),
            self.fsync_failures.load(Ordering::Relaxed),
        )
    }

    /// Bytes in, bytes out and messages in over every topic since the broker started (what
    /// the console shows).
    pub fn traffic(&self) -> [u64; 3] {
        [
            self.all_topics.bytes_in.load(Ordering::Relaxed),
            self.all_topics.bytes_out.load(Ordering::Relaxed),
            self.all_topics.messages_in.load(Ordering::Relaxed),
        ]
    }

    /// The group-commit rounds so far, by requests answered per round.
    pub fn rounds(&self) -> histogram::HistogramSnapshot {
        self.rounds.snapshot()
    }

    /// A group-commit round answered `requests` waiters.
    pub fn round(&self, requests: usize) {
        self.rounds.record(requests as u64);
    }

    /// This broker acquired a partition (cluster mode), taking `elapsed` from the owner
    /// record's change to serving it.
    pub fn acquired(&self, elapsed: Duration) {
        self.acquisitions.record(elapsed.as_micros() as u64);
    }

    /// This broker released partitions (another owns them now).
    pub fn released(&self, n: u64) {
        self.releases.fetch_add(n, Ordering::Relaxed);
    }

    /// This broker handed partitions over (planned moves, controlled shutdown).
    pub fn handed_over(&self, n: u64) {
        self.handovers.fetch_add(n, Ordering::Relaxed);
    }

    fn listener(&self, name: &str) -> Option<&(String, AtomicI64, AtomicU64)> {
        self.listeners.iter().find(|(n, _, _)| n == name)
    }

    pub fn connection_opened(&self, listener: &str) {
        if let Some((_, open, _)) = self.listener(listener) {
            open.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn connection_closed(&self, listener: &str) {
        if let Some((_, open, _)) = self.listener(listener) {
            open.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// A connection failed to authenticate (a failed TLS handshake, as Kafka counts it).
    pub fn failed_authentication(&self, listener: &str) {
        if let Some((_, _, failed)) = self.listener(listener) {
            failed.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Write every counter and histogram. Per-topic series are written for the topics for
    /// which `keep_topic` is true (the topics that exist).
    pub fn expose(&self, e: &mut Exposition, keep_topic: impl Fn(&str) -> bool) {
        self.expose_topics(e, keep_topic);
        self.expose_requests(e);
        self.expose_times(e);
        self.expose_listeners(e);
        self.expose_durability(e);
        self.expose_ownership(e);
    }

    /// The per-topic byte and message counters (BrokerTopicMetrics), all topics and each.
    fn expose_topics(&self, e: &mut Exposition, keep_topic: impl Fn(&str) -> bool) {
        let mut topics: Vec<(String, [u64; 9])> = self
            .topics
            .read()
            .iter()
            .filter(|(name, _)| keep_topic(name))
            .map(|(name, c)| (name.clone(), c.load()))
            .collect();
        topics.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let all = self.all_topics.load();
        for (i, (name, help)) in TOPIC_FAMILIES.iter().enumerate() {
            e.family(name, Kind::Counter, help);
            e.sample_u64(name, &[], all[i]);
            for (topic, values) in &topics {
                e.sample_u64(name, &[("topic", topic)], values[i]);
            }
        }
    }

    /// Requests read per API and version, and the error codes answered per API.
    fn expose_requests(&self, e: &mut Exposition) {
        e.family(
            names::REQUESTS,
            Kind::Counter,
            "Requests read, per API and version (RequestMetrics RequestsPerSec).",
        );
        for k in 0..API_KEYS {
            for v in 0..API_VERSIONS {
                let n = self.requests[k * API_VERSIONS + v].load(Ordering::Relaxed);
                if n > 0 {
                    let version = v.to_string();
                    e.sample_u64(
                        names::REQUESTS,
                        &[("request", api_name(k)), ("version", &version)],
                        n,
                    );
                }
            }
        }
        e.family(
            names::ERRORS,
            Kind::Counter,
            "Error codes in responses, per API and error (RequestMetrics ErrorsPerSec; NONE counts successes).",
        );
        for k in 0..API_KEYS {
            for c in 0..ERROR_CODES {
                let n = self.errors[k * ERROR_CODES + c].load(Ordering::Relaxed);
                if n > 0 {
                    let error = error_name(c as i16 - 1);
                    e.sample_u64(
                        names::ERRORS,
                        &[("request", api_name(k)), ("error", &error)],
                        n,
                    );
                }
            }
        }
    }

    /// Open connections and failed authentications, per listener.
    fn expose_listeners(&self, e: &mut Exposition) {
        e.family(
            names::CONNECTION_COUNT,
            Kind::Gauge,
            "Open client connections, per listener.",
        );
        for (name, open, _) in &self.listeners {
            e.sample(
                names::CONNECTION_COUNT,
                &[("listener", name), ("networkProcessor", "0")],
                open.load(Ordering::Relaxed).max(0) as f64,
            );
        }
        e.family(
            names::FAILED_AUTHENTICATION,
            Kind::Counter,
            "Connections that failed to authenticate (a failed TLS handshake), per listener.",
        );
        for (name, _, failed) in &self.listeners {
            e.sample(
                names::FAILED_AUTHENTICATION,
                &[("listener", name), ("networkProcessor", "0")],
                failed.load(Ordering::Relaxed) as f64,
            );
        }
    }

    /// What makes writes durable: fsync times and failures, group-commit round sizes.
    fn expose_durability(&self, e: &mut Exposition) {
        e.family(
            names::FSYNC_SECONDS,
            Kind::Histogram,
            "Time of each log fsync (group-commit rounds, flush.ms, sealed segments): the fdatasyncs of one partition's files.",
        );
        e.histogram(names::FSYNC_SECONDS, &[], &self.fsync.snapshot(), 1e6);
        e.single(
            names::FSYNC_FAILURES,
            Kind::Counter,
            "Log fsyncs that failed (the log is then re-opened from storage).",
            self.fsync_failures.load(Ordering::Relaxed) as f64,
        );
        e.family(
            names::GROUP_COMMIT_ROUND_SIZE,
            Kind::Histogram,
            "Requests (acks=all producers, offset commits) answered by one group-commit round.",
        );
        e.histogram(
            names::GROUP_COMMIT_ROUND_SIZE,
            &[],
            &self.rounds.snapshot(),
            1.0,
        );
    }

    /// Partition ownership changes (cluster mode): acquisitions and their times, releases,
    /// handovers.
    fn expose_ownership(&self, e: &mut Exposition) {
        e.family(
            names::ACQUISITIONS,
            Kind::Counter,
            "Partitions this broker acquired (cluster mode: failover, moves, start-up).",
        );
        let acquisitions = self.acquisitions.snapshot();
        e.sample_u64(names::ACQUISITIONS, &[], acquisitions.count);
        e.family(
            names::ACQUIRE_SECONDS,
            Kind::Histogram,
            "Time from this broker's change of a partition's owner record to serving the partition (recovery included).",
        );
        e.histogram(names::ACQUIRE_SECONDS, &[], &acquisitions, 1e6);
        e.single(
            names::RELEASES,
            Kind::Counter,
            "Partitions this broker released because another broker owns them now.",
            self.releases.load(Ordering::Relaxed) as f64,
        );
        e.single(
            names::HANDOVERS,
            Kind::Counter,
            "Partitions this broker handed over (planned moves, controlled shutdown).",
            self.handovers.load(Ordering::Relaxed) as f64,
        );
    }

    /// Request-time quantiles in milliseconds over the last one to two minutes, with their
    /// `_count` since start-up, as the JMX exporter writes Kafka's TotalTimeMs.
    fn expose_times(&self, e: &mut Exposition) {
        let now = Instant::now();
        let mut windows = self.windows.lock();
        let mut rows = Vec::new();
        for (k, h) in self.times.iter().enumerate() {
            let Some(h) = h else { continue };
            let current = h.snapshot();
            let total: u64 = current.iter().sum();
            if total == 0 {
                continue;
            }
            let w = windows.entry(k).or_insert_with(|| Window {
                older: vec![0; current.len()],
                newer: (now, current.clone()),
            });
            let recent: Vec<u64> = current
                .iter()
                .zip(&w.older)
                .map(|(c, o)| c.saturating_sub(*o))
                .collect();
            if now.duration_since(w.newer.0) >= QUANTILE_WINDOW {
                let newer = std::mem::replace(&mut w.newer, (now, current));
                w.older = newer.1;
            }
            rows.push((k, recent, total));
        }
        drop(windows);
        e.family(
            names::TOTAL_TIME_MS,
            Kind::Gauge,
            "Request time from read to answer written, in milliseconds, over the last 1-2 minutes (RequestMetrics TotalTimeMs percentiles).",
        );
        for (k, recent, _) in &rows {
            let name = time_name(*k);
            for (q, label) in QUANTILES {
                let ms = histogram::quantile(recent, q).map_or(0.0, |us| us / 1000.0);
                e.sample(
                    names::TOTAL_TIME_MS,
                    &[("request", name), ("quantile", label)],
                    ms,
                );
            }
        }
        e.family(
            names::TOTAL_TIME_MS_COUNT,
            Kind::Counter,
            "Requests timed (RequestMetrics TotalTimeMs Count).",
        );
        for (k, _, total) in &rows {
            e.sample_u64(
                names::TOTAL_TIME_MS_COUNT,
                &[("request", time_name(*k))],
                *total,
            );
        }
    }
}

/// Total and usable bytes of the volume holding `path` (statvfs: usable is what an
/// unprivileged writer may still use). None if it cannot be asked.
pub fn volume_bytes(path: &std::path::Path) -> Option<(u64, u64)> {
    let s = rustix::fs::statvfs(path).ok()?;
    let block = s.f_frsize.max(1);
    Some((
        s.f_blocks.saturating_mul(block),
        s.f_bavail.saturating_mul(block),
    ))
}

/// Kafka's name of an API (`ApiKeys.name`: `Produce`, `Fetch`, `ListOffsets`, ...).
pub fn api_name(key: usize) -> &'static str {
    i16::try_from(key)
        .ok()
        .and_then(|k| kafka_protocol::messages::ApiKey::try_from(k).ok())
        .map_or("Unknown", api_key_name)
}

fn api_key_name(key: kafka_protocol::messages::ApiKey) -> &'static str {
    use kafka_protocol::messages::ApiKey as K;
    // Kafka's names where they differ from the crate's variant names.
    match key {
        K::Produce => "Produce",
        K::Fetch => "Fetch",
        K::ListOffsets => "ListOffsets",
        K::Metadata => "Metadata",
        K::OffsetCommit => "OffsetCommit",
        K::OffsetFetch => "OffsetFetch",
        K::FindCoordinator => "FindCoordinator",
        K::JoinGroup => "JoinGroup",
        K::Heartbeat => "Heartbeat",
        K::LeaveGroup => "LeaveGroup",
        K::SyncGroup => "SyncGroup",
        K::DescribeGroups => "DescribeGroups",
        K::ListGroups => "ListGroups",
        K::ApiVersions => "ApiVersions",
        K::CreateTopics => "CreateTopics",
        K::DeleteTopics => "DeleteTopics",
        K::DeleteRecords => "DeleteRecords",
        K::InitProducerId => "InitProducerId",
        K::OffsetForLeaderEpoch => "OffsetForLeaderEpoch",
        K::DescribeConfigs => "DescribeConfigs",
        K::AlterConfigs => "AlterConfigs",
        K::AlterReplicaLogDirs => "AlterReplicaLogDirs",
        K::DescribeLogDirs => "DescribeLogDirs",
        K::CreatePartitions => "CreatePartitions",
        K::DeleteGroups => "DeleteGroups",
        K::ElectLeaders => "ElectLeaders",
        K::IncrementalAlterConfigs => "IncrementalAlterConfigs",
        K::AlterPartitionReassignments => "AlterPartitionReassignments",
        K::ListPartitionReassignments => "ListPartitionReassignments",
        K::OffsetDelete => "OffsetDelete",
        K::DescribeCluster => "DescribeCluster",
        K::ConsumerGroupHeartbeat => "ConsumerGroupHeartbeat",
        K::ConsumerGroupDescribe => "ConsumerGroupDescribe",
        K::AddPartitionsToTxn => "AddPartitionsToTxn",
        K::AddOffsetsToTxn => "AddOffsetsToTxn",
        K::EndTxn => "EndTxn",
        K::TxnOffsetCommit => "TxnOffsetCommit",
        K::DescribeProducers => "DescribeProducers",
        K::DescribeTransactions => "DescribeTransactions",
        K::ListTransactions => "ListTransactions",
        K::WriteTxnMarkers => "WriteTxnMarkers",
        K::ListConfigResources => "ListConfigResources",
        K::UpdateFeatures => "UpdateFeatures",
        K::UnregisterBroker => "UnregisterBroker",
        K::ShareGroupHeartbeat => "ShareGroupHeartbeat",
        K::ShareGroupDescribe => "ShareGroupDescribe",
        K::ShareFetch => "ShareFetch",
        K::ShareAcknowledge => "ShareAcknowledge",
        K::ReadShareGroupState => "ReadShareGroupState",
        K::WriteShareGroupState => "WriteShareGroupState",
        K::ReadShareGroupStateSummary => "ReadShareGroupStateSummary",
        K::DescribeShareGroupOffsets => "DescribeShareGroupOffsets",
        K::AlterShareGroupOffsets => "AlterShareGroupOffsets",
        K::DeleteShareGroupOffsets => "DeleteShareGroupOffsets",
        K::InitializeShareGroupState => "InitializeShareGroupState",
        K::DeleteShareGroupState => "DeleteShareGroupState",
        K::DescribeTopicPartitions => "DescribeTopicPartitions",
        K::DescribeClientQuotas => "DescribeClientQuotas",
        K::AlterClientQuotas => "AlterClientQuotas",
        K::SaslHandshake => "SaslHandshake",
        K::SaslAuthenticate => "SaslAuthenticate",
        K::DescribeUserScramCredentials => "DescribeUserScramCredentials",
        K::AlterUserScramCredentials => "AlterUserScramCredentials",
        K::DescribeAcls => "DescribeAcls",
        K::CreateAcls => "CreateAcls",
        K::DeleteAcls => "DeleteAcls",
        K::CreateDelegationToken => "CreateDelegationToken",
        K::RenewDelegationToken => "RenewDelegationToken",
        K::ExpireDelegationToken => "ExpireDelegationToken",
        K::DescribeDelegationToken => "DescribeDelegationToken",
        _ => "Other",
    }
}

/// The request label of request times: Kafka times fetches from consumers as
/// `FetchConsumer` (and from followers, which Sluice has none of, as `FetchFollower`).
fn time_name(key: usize) -> &'static str {
    match api_name(key) {
        "Fetch" => "FetchConsumer",
        n => n,
    }
}

/// Kafka's name of an error code (`NONE`, `NOT_LEADER_OR_FOLLOWER`, ...).
pub fn error_name(code: i16) -> String {
    match kafka_protocol::ResponseError::try_from_code(code) {
        None => "NONE".to_string(),
        Some(kafka_protocol::ResponseError::Unknown(c)) => format!("UNKNOWN_{c}"),
        Some(e) => screaming_snake(&e.to_string()),
    }
}

/// `NotLeaderOrFollower` -> `NOT_LEADER_OR_FOLLOWER`.
fn screaming_snake(camel: &str) -> String {
    let mut out = String::with_capacity(camel.len() + 8);
    for (i, c) in camel.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_uppercase());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kafka_error_and_api_names() {
        assert_eq!(error_name(0), "NONE");
        assert_eq!(error_name(6), "NOT_LEADER_OR_FOLLOWER");
        assert_eq!(error_name(-1), "UNKNOWN_SERVER_ERROR");
        assert_eq!(error_name(3), "UNKNOWN_TOPIC_OR_PARTITION");
        assert_eq!(api_name(0), "Produce");
        assert_eq!(api_name(18), "ApiVersions");
        assert_eq!(time_name(1), "FetchConsumer");
    }

    #[test]
    fn counts_show_up_under_kafkas_names() {
        let m = Metrics::new([0, 1, 3], &["PLAINTEXT"]);
        m.request(0, 9);
        m.request(0, 9);
        m.request(3, 12);
        m.errors(0, 0, 5);
        m.errors(0, 6, 1);
        m.request_time(0, Duration::from_millis(2));
        let t = m.topic("orders");
        let mut c = ProduceCounts::default();
        c.add(1000, 10, false);
        c.add(500, 5, true);
        m.produced(Some(&t), &c);
        let mut f = FetchCounts::default();
        f.add(300, false);
        m.fetched(Some(&m.topic("gone")), &f);
        {
            let mut tally = ErrorTally::new(&m, 1);
            for code in [0, 0, 6, 0, 3, 1, 2, 0] {
                tally.count(code);
            }
        }
        m.connection_opened("PLAINTEXT");
        m.fsync(Duration::from_micros(700), true);
        let mut e = Exposition::new();
        m.expose(&mut e, |t| t != "gone");
        let text = e.finish();
        for line in [
            "kafka_server_brokertopicmetrics_bytesin_total 1000",
            "kafka_server_brokertopicmetrics_bytesin_total{topic=\"orders\"} 1000",
            "kafka_server_brokertopicmetrics_messagesin_total{topic=\"orders\"} 10",
            "kafka_server_brokertopicmetrics_totalproducerequests_total{topic=\"orders\"} 2",
            "kafka_server_brokertopicmetrics_failedproducerequests_total{topic=\"orders\"} 1",
            "kafka_server_brokertopicmetrics_bytesout_total 300",
            "kafka_network_requestmetrics_errors_total{request=\"Fetch\",error=\"NONE\"} 4",
            "kafka_network_requestmetrics_errors_total{request=\"Fetch\",error=\"OFFSET_OUT_OF_RANGE\"} 1",
            "kafka_network_requestmetrics_requests_total{request=\"Produce\",version=\"9\"} 2",
            "kafka_network_requestmetrics_requests_total{request=\"Metadata\",version=\"12\"} 1",
            "kafka_network_requestmetrics_errors_total{request=\"Produce\",error=\"NONE\"} 5",
            "kafka_network_requestmetrics_errors_total{request=\"Produce\",error=\"NOT_LEADER_OR_FOLLOWER\"} 1",
            "kafka_network_requestmetrics_totaltimems_count{request=\"Produce\"} 1",
            "kafka_server_socket_server_metrics_connection_count{listener=\"PLAINTEXT\",networkProcessor=\"0\"} 1",
            "sluice_log_fsync_seconds_bucket{le=\"0.001\"} 1",
            "sluice_log_fsync_seconds_count 1",
        ] {
            assert!(text.lines().any(|l| l == line), "missing {line:?} in\n{text}");
        }
        assert!(!text.contains("gone"));
        let p99 = text
            .lines()
            .find(|l| l.starts_with("kafka_network_requestmetrics_totaltimems{request=\"Produce\",quantile=\"0.99\"}"))
            .and_then(|l| l.rsplit_once(' '))
            .and_then(|(_, v)| v.parse::<f64>().ok())
            .expect("p99 of Produce");
        assert!((1.75..=2.25).contains(&p99), "{p99}");
    }
}

//! What the broker exports: the counters the request path updates (`sluice_metrics::Metrics`,
//! one per broker) and, at scrape time, the gauges that describe its state: partitions and
//! leaders, log sizes and offsets, consumer lag in offsets and in seconds (from the group
//! coordinator's committed offsets and the record timestamps in the logs), deletions waiting
//! on silly-renamed files, page-cache drop-behind, the volumes of the log dirs, and the
//! process. Also readiness (`/readyz`) and the error codes of responses (ErrorsPerSec).
//!
//! The names live in `sluice_metrics::names`; docs/operations.md explains each.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::ResponseKind;
use sluice_format::{BatchHeader, BatchTimestampType, HEADER_LEN};
use sluice_metrics::exposition::{Exposition, Kind};
use sluice_metrics::{names, Metrics};
use sluice_store::Log;

use crate::{now_ms, Broker, Response, OFFSETS_TOPIC};

/// The metrics of a broker serving the wire crate's APIs on `listeners`.
pub(crate) fn new_metrics(listeners: &[&str]) -> Arc<Metrics> {
    Arc::new(Metrics::new(
        sluice_wire::SUPPORTED_APIS
            .iter()
            .map(|(k, _, _)| *k as i16),
        listeners,
    ))
}

/// A partition this broker serves: its topic, its index, its log.
type ServedLog = (String, i32, Arc<Log>);

/// The partitions of `topics` this broker serves (it leads every one), by topic then
/// partition, and how many partitions of them it does not serve (no log open here).
fn served_logs(topics: &[Arc<crate::registry::TopicState>]) -> (Vec<ServedLog>, u64) {
    let mut logs: Vec<ServedLog> = Vec::new();
    let mut unserved = 0u64;
    for t in topics {
        for (p, log) in t.logs.iter().enumerate() {
            match log {
                Some(log) => logs.push((t.meta.name.clone(), p as i32, log.clone())),
                None => unserved += 1,
            }
        }
    }
    (logs, unserved)
}

/// Failed logs waiting to be re-opened, the partition-file cache (open files, its cap,
/// re-opens, closes, opens past the cap), and the always-zero offline log dirs (a failure
/// fails one log, never a directory).
fn expose_log_files(e: &mut Exposition, failed: u64) {
    e.single(
        names::FAILED_LOGS,
        Kind::Gauge,
        "Partition logs of this broker that failed (a failed fsync or write) and wait to be re-opened from storage.",
        failed as f64,
    );
    let files = sluice_store::fds::partition_files();
    e.single(
        names::LOG_FILES_OPEN,
        Kind::Gauge,
        "Partition files (.log, .index, .timeindex, .txnindex of segments) open now.",
        files.open as f64,
    );
    e.single(
        names::LOG_FILES_MAX,
        Kind::Gauge,
        "The cap on open partition files (sluice.log.open.files.max, or what the open-files budget gives them).",
        files.max as f64,
    );
    e.single(
        names::LOG_FILES_REOPENED,
        Kind::Counter,
        "Partition files opened again after the cache had closed them.",
        files.reopened as f64,
    );
    e.single(
        names::LOG_FILES_CLOSED,
        Kind::Counter,
        "Partition files the cache closed to stay under its cap.",
        files.closed as f64,
    );
    e.single(
        names::LOG_FILES_OVER_CAP,
        Kind::Counter,
        "Opens past the cap because every open partition file was in use or had unsynced writes.",
        files.over_cap as f64,
    );
    let recovered = sluice_store::recovery::totals();
    e.single(
        names::LOG_RECOVERED_BYTES,
        Kind::Counter,
        "Bytes of segment data partition opens read and validated (recovery after an unclean shutdown, and at each takeover).",
        recovered.bytes as f64,
    );
    e.single(
        names::LOG_RECOVERY_SECONDS,
        Kind::Counter,
        "Seconds the partition opens that recovered took; with sluice_log_recovered_bytes_total, the rate recovery ran at.",
        recovered.seconds,
    );
    e.single(
        names::OFFLINE_LOG_DIRS,
        Kind::Gauge,
        "Always 0: Sluice never takes a log directory offline (a failure fails one log, which is re-opened).",
        0.0,
    );
}

/// Kafka's per-partition Log gauges (size, log end and start offsets, segments; each log
/// read once for all four), then each topic's bytes on the volume as the sum of its
/// partitions' sizes.
fn expose_log_gauges(e: &mut Exposition, logs: &[ServedLog]) {
    let per_log: [(&str, &str); 4] = [
        (
            names::LOG_SIZE,
            "Bytes of a partition's segment files (Log Size).",
        ),
        (
            names::LOG_END_OFFSET,
            "A partition's log end offset (Log LogEndOffset).",
        ),
        (
            names::LOG_START_OFFSET,
            "A partition's log start offset (Log LogStartOffset).",
        ),
        (
            names::LOG_SEGMENTS,
            "A partition's segments (Log NumLogSegments).",
        ),
    ];
    let values: Vec<[u64; 4]> = logs
        .iter()
        .map(|(_, _, l)| {
            [
                l.size_bytes(),
                l.log_end_offset().max(0) as u64,
                l.log_start_offset().max(0) as u64,
                l.segment_count() as u64,
            ]
        })
        .collect();
    for (i, (name, help)) in per_log.iter().enumerate() {
        e.family(name, Kind::Gauge, help);
        for ((topic, p, _), v) in logs.iter().zip(&values) {
            let partition = p.to_string();
            e.sample_u64(name, &[("topic", topic), ("partition", &partition)], v[i]);
        }
    }
    let mut physical: BTreeMap<&str, u64> = BTreeMap::new();
    for ((topic, _, _), v) in logs.iter().zip(&values) {
        *physical.entry(topic.as_str()).or_default() += v[0];
    }
    e.family(
        names::TOPIC_PHYSICAL_BYTES,
        Kind::Gauge,
        "Bytes on the volume of a topic's partitions that this broker serves (the sum of kafka_log_log_size).",
    );
    for (topic, bytes) in &physical {
        e.sample_u64(names::TOPIC_PHYSICAL_BYTES, &[("topic", topic)], *bytes);
    }
}

/// kafka_exporter's partition offsets: each partition's high watermark (current offset)
/// and log start offset (oldest offset).
fn expose_partition_offsets(e: &mut Exposition, logs: &[ServedLog]) {
    e.family(
        names::PARTITION_CURRENT_OFFSET,
        Kind::Gauge,
        "A partition's high watermark: the offset the next record gets that consumers will see.",
    );
    for (topic, p, l) in logs {
        let partition = p.to_string();
        e.sample_u64(
            names::PARTITION_CURRENT_OFFSET,
            &[("topic", topic), ("partition", &partition)],
            l.high_watermark().max(0) as u64,
        );
    }
    e.family(
        names::PARTITION_OLDEST_OFFSET,
        Kind::Gauge,
        "A partition's log start offset (kafka_exporter's oldest offset).",
    );
    for (topic, p, l) in logs {
        let partition = p.to_string();
        e.sample_u64(
            names::PARTITION_OLDEST_OFFSET,
            &[("topic", topic), ("partition", &partition)],
            l.log_start_offset().max(0) as u64,
        );
    }
}

/// One gauge family of consumer lag per partition (`consumergroup`, `topic`, `partition`),
/// its value read from each row.
fn partition_lag_family(
    e: &mut Exposition,
    name: &str,
    help: &str,
    rows: &[crate::lag::LagRow],
    value: impl Fn(&crate::lag::LagRow) -> f64,
) {
    e.family(name, Kind::Gauge, help);
    for row in rows {
        let (g, t, p, _, _, _) = row;
        let partition = p.to_string();
        e.sample(
            name,
            &[
                ("consumergroup", g),
                ("topic", t),
                ("partition", &partition),
            ],
            value(row),
        );
    }
}

/// Each partition's committed offset, lag in records, and lag in seconds.
fn expose_partition_lag(e: &mut Exposition, rows: &[crate::lag::LagRow]) {
    partition_lag_family(
        e,
        names::GROUP_CURRENT_OFFSET,
        "A consumer group's committed offset of a partition.",
        rows,
        |(_, _, _, committed, _, _)| *committed as f64,
    );
    partition_lag_family(
        e,
        names::GROUP_LAG,
        "Records of a partition a consumer group has not consumed: high watermark minus committed offset.",
        rows,
        |(_, _, _, _, lag, _)| *lag as f64,
    );
    partition_lag_family(
        e,
        names::GROUP_LAG_SECONDS,
        "Age of the oldest record of a partition a consumer group has not consumed, in seconds (0 when it has consumed everything).",
        rows,
        |(_, _, _, _, _, s)| *s,
    );
}

/// Committed offsets and lag summed over each topic's partitions, per group.
fn expose_topic_lag(e: &mut Exposition, rows: &[crate::lag::LagRow]) {
    let mut sums: BTreeMap<(&str, &str), (i64, i64)> = BTreeMap::new();
    for (g, t, _, committed, lag, _) in rows {
        let e = sums.entry((g.as_str(), t.as_str())).or_default();
        e.0 += committed;
        e.1 += lag;
    }
    e.family(
        names::GROUP_CURRENT_OFFSET_SUM,
        Kind::Gauge,
        "Sum of a consumer group's committed offsets over a topic's partitions.",
    );
    for ((g, t), (committed, _)) in &sums {
        e.sample(
            names::GROUP_CURRENT_OFFSET_SUM,
            &[("consumergroup", g), ("topic", t)],
            *committed as f64,
        );
    }
    e.family(
        names::GROUP_LAG_SUM,
        Kind::Gauge,
        "A consumer group's lag summed over a topic's partitions.",
    );
    for ((g, t), (_, lag)) in &sums {
        e.sample(
            names::GROUP_LAG_SUM,
            &[("consumergroup", g), ("topic", t)],
            *lag as f64,
        );
    }
}

/// Each group's largest lag in seconds over all its partitions.
fn expose_lag_seconds_max(e: &mut Exposition, rows: &[crate::lag::LagRow]) {
    let mut max_seconds: BTreeMap<&str, f64> = BTreeMap::new();
    for (g, _, _, _, _, s) in rows {
        let m = max_seconds.entry(g.as_str()).or_default();
        *m = m.max(*s);
    }
    e.family(
        names::GROUP_LAG_SECONDS_MAX,
        Kind::Gauge,
        "A consumer group's largest lag in seconds over all its partitions.",
    );
    for (g, s) in &max_seconds {
        e.sample(names::GROUP_LAG_SECONDS_MAX, &[("consumergroup", g)], *s);
    }
}

/// Bytes and records of a produce request's records for one partition, from the batch
/// headers alone (no per-record work). Unparseable input counts what parsed.
pub(crate) fn batch_stats(records: &[u8]) -> (u64, u64) {
    let mut messages = 0u64;
    let mut at = 0usize;
    while let Some(h) = records
        .get(at..)
        .and_then(|rest| BatchHeader::decode(rest).ok())
    {
        if h.batch_length < 0 {
            break;
        }
        messages += u64::try_from(h.last_offset_delta).map_or(0, |d| d + 1);
        at += h.total_len();
    }
    (records.len() as u64, messages)
}

/// One in this many batches whose compression frame does not state their uncompressed size
/// (lz4 and zstd as the Java client and librdkafka write them) is decompressed to measure
/// it; the others are estimated at the ratio of the topic's samples, weighted by their bytes.
/// At 1 in 64 the sampling costs about 1.5% of a decompression of everything produced, far
/// below the produce path's own cost per byte.
const LOGICAL_SAMPLE_EVERY: u64 = 64;
/// Every such batch is sampled until a topic's samples add up to this many stored bytes, so
/// that no small first batch sets the ratio for the many after it.
const LOGICAL_SAMPLE_FIRST_BYTES: u64 = 1 << 20;
/// Once a topic's samples add up to this many stored bytes, both sums halve: the ratio
/// follows the data as it changes.
const LOGICAL_SAMPLE_DECAY_BYTES: u64 = 64 << 20;
/// Largest records section a sample decompresses (a larger one is estimated as stored).
const LOGICAL_SAMPLE_MAX_BYTES: usize = 16 << 20;

/// Bytes of `records` (batches about to be appended to a topic counted by `t`) with their
/// records uncompressed: an uncompressed batch's own size; a compressed batch's header plus
/// the records section's length as its compression frame states it
/// ([`sluice_format::codec::stated_len`]: gzip, snappy, lz4 or zstd frames with a content
/// size), else estimated from a sampled decompression ([`LOGICAL_SAMPLE_EVERY`]). Headers
/// only, apart from the samples.
pub(crate) fn logical_len(records: &[u8], t: &sluice_metrics::TopicCounters) -> u64 {
    use std::sync::atomic::Ordering::Relaxed;
    let mut logical = 0u64;
    let mut at = 0usize;
    while let Some(h) = records
        .get(at..)
        .and_then(|rest| BatchHeader::decode(rest).ok())
    {
        if h.batch_length < 0 {
            break;
        }
        let stored = h.total_len();
        let Some(body) = records.get(at + HEADER_LEN..at + stored) else {
            break;
        };
        at += stored;
        let codec = h.compression_codec();
        if let Some(n) = sluice_format::codec::stated_len(codec, body) {
            logical += (HEADER_LEN as u64).saturating_add(n);
            continue;
        }
        let k = t.unstated_batches.fetch_add(1, Relaxed);
        let sampled = t.sampled_stored_bytes.load(Relaxed);
        if k.is_multiple_of(LOGICAL_SAMPLE_EVERY) || sampled < LOGICAL_SAMPLE_FIRST_BYTES {
            if let Ok(section) =
                sluice_format::codec::decompress(codec, body, LOGICAL_SAMPLE_MAX_BYTES)
            {
                let n = (HEADER_LEN + section.len()) as u64;
                if sampled >= LOGICAL_SAMPLE_DECAY_BYTES {
                    // Racing appends may halve twice or add to a sum being halved: an
                    // estimate's weights, not a count.
                    t.sampled_stored_bytes.store(sampled / 2, Relaxed);
                    let l = t.sampled_logical_bytes.load(Relaxed);
                    t.sampled_logical_bytes.store(l / 2, Relaxed);
                }
                t.sampled_stored_bytes.fetch_add(stored as u64, Relaxed);
                t.sampled_logical_bytes.fetch_add(n, Relaxed);
                logical += n;
                continue;
            }
        }
        let (s, l) = (
            t.sampled_stored_bytes.load(Relaxed),
            t.sampled_logical_bytes.load(Relaxed),
        );
        logical += if s == 0 {
            stored as u64
        } else {
            u64::try_from(u128::from(stored as u64) * u128::from(l) / u128::from(s))
                .unwrap_or(u64::MAX)
        };
    }
    logical
}

impl Broker {
    /// The counters the server and the request path update.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Count the error codes of a response (Kafka's ErrorsPerSec: one per error code found,
    /// `NONE` included, per partition where the response has partitions).
    pub fn count_errors(&self, api_key: i16, response: &Response) {
        let mut tally = sluice_metrics::ErrorTally::new(&self.metrics, api_key);
        let mut count = |code: i16| tally.count(code);
        match response {
            Response::Fetch { body, .. } => {
                if body.error_code != 0 {
                    count(body.error_code);
                } else {
                    for t in &body.responses {
                        for p in &t.partitions {
                            count(p.error_code);
                        }
                    }
                }
            }
            Response::Body(body) => response_errors(body, &mut count),
            Response::Silent { .. } => {}
        }
    }

    /// Ready to serve: the logs are open (they are once the broker exists) and, in a
    /// cluster, this broker's registration is alive (its lease renewed in time) and it is not
    /// shutting down.
    pub fn readiness(&self) -> Result<(), String> {
        match &self.cluster {
            Some(c) => c.readiness(),
            None => Ok(()),
        }
    }

    /// The page of metrics, in the Prometheus text format. Reads log state and the volumes;
    /// run it off the async runtime. The families come in one fixed order, each step's after
    /// the one before (the page is read as text, and compared as text across builds): the
    /// request path's counters, partitions and the controller, the authorizer, partition
    /// files, per-partition log gauges and offsets, lag, storage, fetch sessions, the
    /// process, and the broker's identity.
    pub fn render_metrics(&self) -> String {
        let mut e = Exposition::new();
        let topics = self.registry.all();
        let names: std::collections::HashSet<&str> =
            topics.iter().map(|t| t.meta.name.as_str()).collect();
        self.metrics.expose(&mut e, |t| names.contains(t));
        let (logs, unserved) = served_logs(&topics);
        let failed = logs
            .iter()
            .filter(|(_, _, l)| l.failure().is_some())
            .count() as u64;
        self.expose_partitions(&mut e, logs.len(), unserved, failed);
        self.expose_authorizer(&mut e);
        expose_log_files(&mut e, failed);
        expose_log_gauges(&mut e, &logs);
        expose_partition_offsets(&mut e, &logs);
        self.expose_lag(&mut e);
        self.expose_storage(&mut e);
        self.expose_locality(&mut e, &logs);
        self.expose_fetch_sessions(&mut e);
        sluice_metrics::process::expose(&mut e, &sluice_metrics::process::read());
        self.expose_broker_info(&mut e);
        e.finish()
    }

    /// Partitions served and led (every partition this broker serves, it leads), the
    /// always-zero under-replicated count (one physical copy on the shared volume), whether
    /// this broker is the controller, and, on the controller only, the offline partitions
    /// ([`Broker::offline_partitions`]).
    fn expose_partitions(&self, e: &mut Exposition, served: usize, unserved: u64, failed: u64) {
        let served = served as f64;
        e.single(
            names::PARTITION_COUNT,
            Kind::Gauge,
            "Partitions this broker serves (ReplicaManager PartitionCount).",
            served,
        );
        e.single(
            names::LEADER_COUNT,
            Kind::Gauge,
            "Partitions this broker leads: every partition it serves (ReplicaManager LeaderCount).",
            served,
        );
        e.single(
            names::UNDER_REPLICATED,
            Kind::Gauge,
            "Always 0: a partition has one physical copy on the shared volume, which protects it (ReplicaManager UnderReplicatedPartitions).",
            0.0,
        );
        let is_controller = self.controller_id() == self.node_id;
        e.single(
            names::ACTIVE_CONTROLLER,
            Kind::Gauge,
            "1 on the broker that is the controller (a single broker is its own).",
            if is_controller { 1.0 } else { 0.0 },
        );
        let offline = if is_controller {
            self.offline_partitions(unserved, failed)
        } else {
            0
        };
        e.single(
            names::OFFLINE_PARTITIONS,
            Kind::Gauge,
            "On the controller: partitions no live broker serves (no owner alive, or a failed log). 0 on other brokers.",
            offline as f64,
        );
    }

    /// The authorizer's decisions and the ACLs in force; nothing when no authorizer is
    /// configured.
    fn expose_authorizer(&self, e: &mut Exposition) {
        if !self.authz.enabled() {
            return;
        }
        let (allowed, denied, acls) = self.authz.counts();
        e.single(
            names::AUTHORIZATION_ALLOWED,
            Kind::Counter,
            "Authorizer decisions that allowed an action (listings and authorized-operations fields included).",
            allowed as f64,
        );
        e.single(
            names::AUTHORIZATION_DENIED,
            Kind::Counter,
            "Authorizer decisions that denied an action (listings and authorized-operations fields included).",
            denied as f64,
        );
        e.single(
            names::ACLS_TOTAL,
            Kind::Gauge,
            "ACLs in force (Kafka's acls-total-count).",
            acls as f64,
        );
    }

    /// The broker's identity: one sample of 1 labelled with its node id, cluster id, mode
    /// (single or cluster) and version.
    fn expose_broker_info(&self, e: &mut Exposition) {
        e.family(
            names::BROKER_INFO,
            Kind::Gauge,
            "1, labelled with the broker's node id, cluster id, mode and version.",
        );
        let node = self.node_id.to_string();
        e.sample(
            names::BROKER_INFO,
            &[
                ("node_id", &node),
                ("cluster_id", &self.cluster_id),
                (
                    "mode",
                    if self.cluster.is_some() {
                        "cluster"
                    } else {
                        "single"
                    },
                ),
                ("version", env!("CARGO_PKG_VERSION")),
            ],
            1.0,
        );
    }

    /// Partitions of existing topics that no live broker serves. A single broker: those with
    /// no open log and those whose log failed. A cluster: those whose owner record names no
    /// live broker.
    fn offline_partitions(&self, unserved: u64, failed: u64) -> u64 {
        match self.meta.etcd() {
            None => unserved + failed,
            Some(store) => {
                let view = store.view();
                let mut offline = 0u64;
                for (name, t) in &view.topics {
                    for p in 0..t.partitions() {
                        let alive = view
                            .owners
                            .get(&(name.clone(), p))
                            .is_some_and(|r| view.brokers.contains_key(&r.owner.node));
                        if !alive {
                            offline += 1;
                        }
                    }
                }
                offline + failed
            }
        }
    }

    /// Consumer lag of the groups this broker coordinates, in offsets (kafka_exporter's
    /// names) and in seconds: per partition, summed per topic, the groups' members, and each
    /// group's largest lag in seconds.
    fn expose_lag(&self, e: &mut Exposition) {
        let rows = self.lag_rows();
        expose_partition_lag(e, &rows);
        expose_topic_lag(e, &rows);
        self.expose_group_members(e);
        expose_lag_seconds_max(e, &rows);
    }

    /// The lag of each partition of the groups coordinated here (`__consumer_offsets` left
    /// out): in seconds, the age of the oldest record the group has not consumed, from the
    /// timestamp of the record at its committed offset (0 when it consumed everything); in a
    /// cluster, for partitions other brokers own, from their owners.
    fn lag_rows(&self) -> Vec<crate::lag::LagRow> {
        let now = now_ms();
        let mut rows: Vec<crate::lag::LagRow> = self
            .consumer_lag()
            .into_iter()
            .filter(|(_, t, _, _, _, _)| t != OFFSETS_TOPIC)
            .map(|(g, t, p, committed, _hw, lag)| {
                let seconds = if lag > 0 {
                    self.registry
                        .get(&t)
                        .and_then(|s| s.log(p).cloned())
                        .and_then(|log| record_timestamp(&log, committed))
                        .map_or(0.0, |ts| (now - ts).max(0) as f64 / 1000.0)
                } else {
                    0.0
                };
                (g, t, p, committed, lag, seconds)
            })
            .collect();
        // In a cluster: partitions of the groups coordinated here that other brokers own.
        rows.extend(self.remote_lag());
        rows
    }

    /// Members of the groups this broker coordinates (classic and consumer protocol).
    fn expose_group_members(&self, e: &mut Exposition) {
        let topics = self.topic_infos();
        let members: Vec<(String, usize)> = self.groups.read(|c| {
            c.list_groups(&[], &[])
                .into_iter()
                .map(|g| {
                    let n = match g.group_type.as_str() {
                        "consumer" => c
                            .describe_consumer_group(&g.group_id, &topics)
                            .map_or(0, |v| v.members.len()),
                        _ => c
                            .describe_classic(&g.group_id)
                            .map_or(0, |v| v.members.len()),
                    };
                    (g.group_id, n)
                })
                .collect()
        });
        e.family(
            names::GROUP_MEMBERS,
            Kind::Gauge,
            "Members of a consumer group this broker coordinates.",
        );
        for (g, n) in &members {
            e.sample(names::GROUP_MEMBERS, &[("consumergroup", g)], *n as f64);
        }
    }

    /// The incremental fetch session cache (KIP-227).
    fn expose_fetch_sessions(&self, e: &mut Exposition) {
        let (sessions, cached, evicted) = self.sessions.stats();
        e.single(
            names::FETCH_SESSIONS,
            Kind::Gauge,
            "Incremental fetch sessions held (FetchSessionCache NumIncrementalFetchSessions).",
            sessions as f64,
        );
        e.single(
            names::FETCH_SESSION_PARTITIONS,
            Kind::Gauge,
            "Partitions the fetch sessions hold (FetchSessionCache NumIncrementalFetchPartitionsCached).",
            cached as f64,
        );
        e.single(
            names::FETCH_SESSION_EVICTIONS,
            Kind::Counter,
            "Fetch sessions evicted to make room for a new one (FetchSessionCache IncrementalFetchSessionEvictionsPerSec).",
            evicted as f64,
        );
    }

    /// Deferred deletions, drop-behind, cold reads, read replicas, the write-behind, and the
    /// volumes of the log dirs.
    fn expose_storage(&self, e: &mut Exposition) {
        self.expose_deletions(e);
        self.expose_drop_behind(e);
        self.expose_cold_reads(e);
        self.expose_read_replicas(e);
        self.expose_writeback(e);
        self.expose_volumes(e);
    }

    /// Deferred deletions: segments, directories and leftovers waiting to be removed, and how
    /// their removals went.
    fn expose_deletions(&self, e: &mut Exposition) {
        let d = self.deletion_stats();
        e.single(
            names::DELETIONS_PENDING,
            Kind::Gauge,
            "Segments, directories and silly-renamed leftovers waiting to be removed (a file still open somewhere, .nfs*/.fuse_hidden*).",
            d.pending as f64,
        );
        e.single(
            names::DELETIONS_DEFERRED,
            Kind::Counter,
            "Removals that could not complete at the first attempt.",
            d.deferred_total as f64,
        );
        e.single(
            names::DELETION_RETRIES,
            Kind::Counter,
            "Retries of deferred removals.",
            d.retries as f64,
        );
        e.single(
            names::DELETIONS_COMPLETED,
            Kind::Counter,
            "Deferred removals that completed.",
            d.completed as f64,
        );
        e.single(
            names::LEFTOVERS_RECLAIMED,
            Kind::Counter,
            "Silly-renamed leftovers (.nfs*, .fuse_hidden*) this broker removed.",
            d.leftovers_reclaimed as f64,
        );
    }

    /// The page-cache drop-behind (`sluice.log.cache.bytes`): bytes advised out, reads from
    /// below its point, its fdatasyncs and failures.
    fn expose_drop_behind(&self, e: &mut Exposition) {
        let c = self.page_cache_drops();
        e.single(
            names::CACHE_DROPPED_BYTES,
            Kind::Counter,
            "Bytes of segment data advised out of the page cache (drop-behind, sluice.log.cache.bytes).",
            c.dropped_bytes as f64,
        );
        e.single(
            names::CACHE_READ_BACK_DROPPED_BYTES,
            Kind::Counter,
            "Bytes of reads from below the drop-behind's point (a consumer far behind) whose pages were advised out of the page cache again.",
            c.read_back_bytes as f64,
        );
        e.single(
            names::CACHE_DROP_FDATASYNCS,
            Kind::Counter,
            "fdatasync calls made before dropping pages behind.",
            c.fdatasyncs as f64,
        );
        e.single(
            names::CACHE_DROP_ERRORS,
            Kind::Counter,
            "Drop-behind attempts that failed.",
            c.errors as f64,
        );
    }

    /// Fetches read on a blocking thread because their data was not in the page cache.
    fn expose_cold_reads(&self, e: &mut Exposition) {
        let (fetches, partitions, bytes) = self.cold_reads();
        e.single(
            names::FETCH_COLD_REQUESTS,
            Kind::Counter,
            "Fetch requests read on a blocking thread because some partition's data was not in the page cache.",
            fetches as f64,
        );
        e.single(
            names::FETCH_COLD_PARTITIONS,
            Kind::Counter,
            "Partition reads of fetches that waited for the volume (and brought their data into the page cache on a blocking thread).",
            partitions as f64,
        );
        e.single(
            names::FETCH_COLD_BYTES,
            Kind::Counter,
            "Bytes those partition reads returned.",
            bytes as f64,
        );
    }

    /// Reads served of partitions other brokers own (KIP-392 read replicas) and consumers sent
    /// to a broker in their rack.
    fn expose_read_replicas(&self, e: &mut Exposition) {
        let r = self.readers.totals();
        e.single(
            names::READ_REPLICA_PARTITIONS,
            Kind::Gauge,
            "Partitions other brokers own that this broker serves reads of from the shared volume (KIP-392 read replicas).",
            r.partitions as f64,
        );
        e.single(
            names::READ_REPLICA_BYTES,
            Kind::Counter,
            "Record bytes this broker served from partitions other brokers own.",
            r.bytes as f64,
        );
        e.single(
            names::READ_REPLICA_POLLS,
            Kind::Counter,
            "Polls this broker sent to owners for what they published of the partitions it reads.",
            r.polls as f64,
        );
        e.single(
            names::PREFERRED_REPLICA_REDIRECTS,
            Kind::Counter,
            "Fetch answers that sent a consumer to a broker in its rack (preferred_read_replica).",
            r.redirects as f64,
        );
    }

    /// The write-behind (`sluice.log.writeback.bytes`) and the produce backpressure behind it
    /// (`sluice.log.unwritten.bytes.max`).
    fn expose_writeback(&self, e: &mut Exposition) {
        let w = self.writeback_totals();
        e.single(
            names::WRITEBACK_BYTES,
            Kind::Counter,
            "Bytes of log data the write-behind wrote back to the volume (sluice.log.writeback.bytes).",
            w.written_bytes as f64,
        );
        e.single(
            names::WRITEBACK_ERRORS,
            Kind::Counter,
            "Write-behind attempts that failed.",
            w.errors as f64,
        );
        e.single(
            names::UNWRITTEN_BYTES,
            Kind::Gauge,
            "Log data appended but not yet written back to the volume, over all partitions, at the last write-behind pass.",
            w.unwritten_bytes as f64,
        );
        e.single(
            names::PRODUCE_BACKPRESSURE_WAITS,
            Kind::Counter,
            "Produce requests held back because unwritten data passed sluice.log.unwritten.bytes.max.",
            w.produce_waits as f64,
        );
        e.single(
            names::PRODUCE_BACKPRESSURE_SECONDS,
            Kind::Counter,
            "Time produce requests were held back by the write-behind.",
            w.produce_wait_us as f64 / 1e6,
        );
    }

    /// The size and usable bytes of the volume of each log dir.
    fn expose_volumes(&self, e: &mut Exposition) {
        let volumes: Vec<(String, u64, u64)> = self
            .config
            .log_dirs
            .iter()
            .filter_map(|d| {
                let (total, usable) = sluice_metrics::volume_bytes(d)?;
                Some((d.display().to_string(), total, usable))
            })
            .collect();
        e.family(
            names::VOLUME_TOTAL_BYTES,
            Kind::Gauge,
            "Size of the volume holding a log dir.",
        );
        for (dir, total, _) in &volumes {
            e.sample_u64(names::VOLUME_TOTAL_BYTES, &[("log_dir", dir)], *total);
        }
        e.family(
            names::VOLUME_USABLE_BYTES,
            Kind::Gauge,
            "Bytes of the volume holding a log dir that the broker can still use.",
        );
        for (dir, _, usable) in &volumes {
            e.sample_u64(names::VOLUME_USABLE_BYTES, &[("log_dir", dir)], *usable);
        }
    }

    /// Storage-aware ownership, when a log dir declares its storage node: whether this broker
    /// reaches each log dir directly, and each partition it serves (the ownership map, which
    /// the brokers' pages give together).
    fn expose_locality(&self, e: &mut Exposition, logs: &[ServedLog]) {
        let Some(volumes) = self.cluster.as_ref().map(|c| &c.volumes) else {
            return;
        };
        if !volumes.declared() {
            return;
        }
        e.family(
            names::LOG_DIR_DIRECT,
            Kind::Gauge,
            "1 if this broker reaches the storage node serving the log dir directly (sluice.volume.storage.nodes, sluice.broker.storage.nodes), else 0.",
        );
        for d in volumes.dirs() {
            let Some(node) = &d.node else { continue };
            let dir = d.path.display().to_string();
            e.sample_u64(
                names::LOG_DIR_DIRECT,
                &[("log_dir", &dir), ("storage_node", node)],
                u64::from(d.direct),
            );
        }
        e.family(
            names::PARTITION_DIRECT,
            Kind::Gauge,
            "1 if this broker, the partition's owner, reaches its volume directly, else 0 (partitions on log dirs with a declared storage node).",
        );
        let mut indirect = 0u64;
        for (topic, p, l) in logs {
            let Some(d) = volumes.dir_of(&l.dir()).filter(|d| d.node.is_some()) else {
                continue;
            };
            indirect += u64::from(!d.direct);
            let partition = p.to_string();
            e.sample_u64(
                names::PARTITION_DIRECT,
                &[("topic", topic), ("partition", &partition)],
                u64::from(d.direct),
            );
        }
        e.single(
            names::PARTITIONS_INDIRECT,
            Kind::Gauge,
            "Partitions this broker owns on volumes it does not reach directly.",
            indirect as f64,
        );
    }

    /// Time a request's answer (called by the server when it is written).
    pub fn request_done(&self, api_key: i16, elapsed: Duration) {
        self.metrics.request_time(api_key, elapsed);
    }
}

/// The timestamp of the record at `offset` (the first at or after it), from the batch that
/// holds it: its own timestamp in an uncompressed batch, the batch's first timestamp in a
/// compressed one or one over 256 KiB (read without decompressing; at most the batch's span
/// older), the batch's time under LogAppendTime. None if nothing is there to read.
fn record_timestamp(log: &Log, offset: i64) -> Option<i64> {
    /// Largest uncompressed batch read whole to find a record inside it (a scrape reads one
    /// batch header, and at most this, per group and lagging partition).
    const WHOLE_BATCH_MAX: usize = 256 << 10;
    let slice = log.read(offset, 1, true).ok()?.slice?;
    let head = slice.read_range(0, HEADER_LEN as u32).ok()?;
    let h = BatchHeader::parse(&head).ok()?;
    if h.timestamp_type() == BatchTimestampType::LogAppendTime
        || offset <= h.base_offset
        || h.compression_codec() != 0
        || h.total_len() > WHOLE_BATCH_MAX
    {
        return crate::lag::batch_timestamp(&h, None, offset);
    }
    let whole = slice.read_range(0, h.total_len() as u32).ok()?;
    crate::lag::batch_timestamp(&h, Some(&whole), offset)
}

/// Error codes of the responses whose errors Kafka counts, with their per-partition or
/// per-topic codes where they have them.
fn response_errors(body: &ResponseKind, count: &mut impl FnMut(i16)) {
    match body {
        ResponseKind::Produce(r) => {
            for t in &r.responses {
                for p in &t.partition_responses {
                    count(p.error_code);
                }
            }
        }
        ResponseKind::Fetch(r) => {
            count(r.error_code);
        }
        ResponseKind::ListOffsets(r) => {
            for t in &r.topics {
                for p in &t.partitions {
                    count(p.error_code);
                }
            }
        }
        ResponseKind::Metadata(r) => {
            for t in &r.topics {
                count(t.error_code);
            }
        }
        ResponseKind::OffsetCommit(r) => {
            for t in &r.topics {
                for p in &t.partitions {
                    count(p.error_code);
                }
            }
        }
        ResponseKind::OffsetFetch(r) => {
            if r.groups.is_empty() {
                count(r.error_code);
            }
            for g in &r.groups {
                count(g.error_code);
            }
        }
        ResponseKind::FindCoordinator(r) => {
            if r.coordinators.is_empty() {
                count(r.error_code);
            }
            for c in &r.coordinators {
                count(c.error_code);
            }
        }
        ResponseKind::JoinGroup(r) => count(r.error_code),
        ResponseKind::SyncGroup(r) => count(r.error_code),
        ResponseKind::Heartbeat(r) => count(r.error_code),
        ResponseKind::LeaveGroup(r) => count(r.error_code),
        ResponseKind::ApiVersions(r) => count(r.error_code),
        ResponseKind::InitProducerId(r) => count(r.error_code),
        ResponseKind::ListGroups(r) => count(r.error_code),
        ResponseKind::ConsumerGroupHeartbeat(r) => count(r.error_code),
        ResponseKind::DescribeGroups(r) => {
            for g in &r.groups {
                count(g.error_code);
            }
        }
        ResponseKind::CreateTopics(r) => {
            for t in &r.topics {
                count(t.error_code);
            }
        }
        ResponseKind::DeleteTopics(r) => {
            for t in &r.responses {
                count(t.error_code);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use sluice_format::BatchBuilder;

    /// 50 JSON-ish records in one batch, its records section compressed with `codec`.
    fn encoded(codec: u8) -> Vec<u8> {
        let mut b = BatchBuilder::new();
        for i in 0..50 {
            let value = format!("{{\"event\": {i}, \"kind\": \"click\"}}").repeat(8);
            b = b.record(1_700_000_000_000 + i, None, Some(value.as_bytes()));
        }
        let plain = b.build();
        let h = BatchHeader::decode(&plain).unwrap();
        let body = sluice_format::codec::compress(codec, &plain[HEADER_LEN..]).unwrap();
        let mut out = BatchHeader {
            batch_length: (HEADER_LEN - sluice_format::LOG_OVERHEAD + body.len()) as i32,
            attributes: h.attributes | i16::from(codec),
            ..h
        }
        .encode()
        .to_vec();
        out.extend_from_slice(&body);
        out
    }

    /// Every API the broker answers is counted under its Kafka name, never as "Other".
    #[test]
    fn every_served_api_has_its_kafka_name() {
        for (key, _, _) in sluice_wire::SUPPORTED_APIS {
            let name = sluice_metrics::api_name(*key as usize);
            assert_ne!(name, "Other", "{key:?} has no name in the metrics");
        }
    }

    #[test]
    fn logical_bytes_come_from_frames_or_samples() {
        use sluice_format::codec::{GZIP, LZ4, NONE, SNAPPY};
        use std::sync::atomic::Ordering::Relaxed;
        let plain = encoded(NONE);
        let n = plain.len() as u64;
        let t = sluice_metrics::TopicCounters::default();
        assert_eq!(logical_len(&plain, &t), n);
        // gzip and snappy state their size: no sample.
        for c in [GZIP, SNAPPY] {
            let z = encoded(c);
            assert!((z.len() as u64) < n);
            assert_eq!(logical_len(&z, &t), n);
        }
        assert_eq!(t.unstated_batches.load(Relaxed), 0);
        // lz4 as Kafka's clients frame it states nothing: every batch is decompressed until
        // the samples add up to LOGICAL_SAMPLE_FIRST_BYTES stored, then one in 64; the others
        // are estimated at the samples' ratio.
        let l = encoded(LZ4);
        let lz = l.len() as u64;
        let first = LOGICAL_SAMPLE_FIRST_BYTES.div_ceil(lz);
        for _ in 0..first {
            assert_eq!(logical_len(&l, &t), n, "measured while the samples are few");
        }
        assert_eq!(t.sampled_stored_bytes.load(Relaxed), first * lz);
        // From here on, batch k is measured when k is a multiple of 64, else estimated.
        let mut estimated = 0;
        for _ in 0..LOGICAL_SAMPLE_EVERY {
            let k = t.unstated_batches.load(Relaxed);
            let got = logical_len(&l, &t);
            assert!(got.abs_diff(n) <= n / 100, "{got} vs {n}");
            if !k.is_multiple_of(LOGICAL_SAMPLE_EVERY) {
                estimated += 1;
                // Estimated exactly: every sample had this ratio.
                assert_eq!(got, n);
            }
        }
        assert_eq!(estimated, LOGICAL_SAMPLE_EVERY - 1);
        assert_eq!(t.sampled_stored_bytes.load(Relaxed), (first + 1) * lz);
        // The sums halve once they reach LOGICAL_SAMPLE_DECAY_BYTES, at the next sample.
        t.sampled_stored_bytes
            .store(LOGICAL_SAMPLE_DECAY_BYTES, Relaxed);
        t.sampled_logical_bytes
            .store(3 * LOGICAL_SAMPLE_DECAY_BYTES, Relaxed);
        while !t
            .unstated_batches
            .load(Relaxed)
            .is_multiple_of(LOGICAL_SAMPLE_EVERY)
        {
            t.unstated_batches.fetch_add(1, Relaxed);
        }
        assert_eq!(logical_len(&l, &t), n, "a sample is measured");
        let (s, lg) = (
            LOGICAL_SAMPLE_DECAY_BYTES / 2 + lz,
            3 * LOGICAL_SAMPLE_DECAY_BYTES / 2 + n,
        );
        assert_eq!(t.sampled_stored_bytes.load(Relaxed), s);
        assert_eq!(t.sampled_logical_bytes.load(Relaxed), lg);
        assert_eq!(
            logical_len(&l, &t),
            lz * lg / s,
            "estimated at the samples' ratio"
        );
        // Garbage counts what parsed.
        assert_eq!(logical_len(&[1, 2, 3], &t), 0);
    }

    #[test]
    fn batch_stats_count_records_from_headers() {
        let mut records = BatchBuilder::new()
            .record(1_700_000_000_000, None, Some(b"a"))
            .record(1_700_000_000_001, None, Some(b"b"))
            .build();
        let second = BatchBuilder::new()
            .record(1_700_000_000_002, None, Some(b"c"))
            .build();
        records.extend_from_slice(&second);
        assert_eq!(batch_stats(&records), (records.len() as u64, 3));
        assert_eq!(batch_stats(&[]), (0, 0));
        assert_eq!(batch_stats(&[1, 2, 3]), (3, 0));
    }

    /// The lag families: one sample per partition, per group and topic the sums, per group
    /// the largest lag in seconds.
    #[test]
    fn lag_is_exposed_per_partition_summed_per_topic_and_its_largest_per_group() {
        let rows: Vec<crate::lag::LagRow> = vec![
            ("g".into(), "t".into(), 0, 10, 5, 2.5),
            ("g".into(), "t".into(), 1, 20, 1, 0.5),
            ("h".into(), "t".into(), 0, 7, 0, 0.0),
        ];
        let mut e = Exposition::new();
        expose_partition_lag(&mut e, &rows);
        expose_topic_lag(&mut e, &rows);
        expose_lag_seconds_max(&mut e, &rows);
        let text = e.finish();
        let samples: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        let lag = names::GROUP_LAG;
        let lag_sum = names::GROUP_LAG_SUM;
        let offset_sum = names::GROUP_CURRENT_OFFSET_SUM;
        let seconds_max = names::GROUP_LAG_SECONDS_MAX;
        for expected in [
            format!(r#"{lag}{{consumergroup="g",topic="t",partition="1"}} 1"#),
            format!(r#"{offset_sum}{{consumergroup="g",topic="t"}} 30"#),
            format!(r#"{lag_sum}{{consumergroup="g",topic="t"}} 6"#),
            format!(r#"{lag_sum}{{consumergroup="h",topic="t"}} 0"#),
            format!(r#"{seconds_max}{{consumergroup="g"}} 2.5"#),
        ] {
            assert!(samples.contains(&expected.as_str()), "{expected} in {text}");
        }
        assert_eq!(samples.len(), 3 * 3 + 2 * 2 + 2);
    }
}

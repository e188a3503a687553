//! Client quotas as Kafka enforces them (its `ClientQuotaManager` and
//! `ClientRequestQuotaManager`): produce and fetch byte rates and the request-time percentage,
//! per user and client id.
//!
//! The quota values come from the metadata store (`sluice_meta::quotas`) and are reloaded
//! whenever they change: at once on the broker that altered them, and in a cluster on every
//! other broker when its etcd watch or poll sees the cluster's revision move
//! ([`Quotas::reload_if_changed`]). Nothing here needs a restart.
//!
//! Resolution follows Kafka's default quota callback, separately for each quota type: the
//! first of `user+client-id`, `user+<default> client-id`, `user`, `<default> user+client-id`,
//! `<default> user+<default> client-id`, `<default> user`, `client-id`, `<default> client-id`
//! that sets the type's key applies. The user is the name of the connection's principal (a SASL
//! login, or a client certificate's mapped subject on an SSL listener), or Kafka's
//! unauthenticated principal, `ANONYMOUS`. Which entity applied decides who shares a
//! rate: a quota found at user level is shared by every client id of that user (Kafka's
//! metric tags `(user, "")`), one found at client-id level by every user of that client id.
//!
//! Rates are Kafka's `Rate` over a `SampledStat`: `quota.window.num` samples of
//! `quota.window.size.seconds` each; a value is recorded, then the rate is measured; above
//! the bound the throttle time is the time that brings the rate back to the bound,
//! `(rate - bound) / bound * window` (request time: at most one sample window). The broker
//! answers at once with `throttle_time_ms` set and the server reads nothing more from that
//! connection for that long (KIP-219: Kafka mutes the channel); a throttled fetch is answered
//! empty and its bytes are not counted, as Kafka does.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use kafka_protocol::messages::{FetchResponse, ResponseKind};
use sluice_store::FileSlice;

use parking_lot::{Mutex, RwLock};
use sluice_meta::{ClientQuotas, QuotaEntity};

/// Kafka's principal name for a client that did not authenticate.
pub(crate) const ANONYMOUS: &str = "ANONYMOUS";

/// Entity types of a quota entity (Kafka's `ClientQuotaEntity`).
pub(crate) const USER: &str = "user";
pub(crate) const CLIENT_ID: &str = "client-id";
pub(crate) const IP: &str = "ip";

/// A rate sensor not used for this long is dropped (Kafka's
/// `InactiveSensorExpirationTimeSeconds`).
const SENSOR_IDLE_EXPIRY_MS: i64 = 3_600_000;

/// What a quota limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum QuotaKind {
    /// `producer_byte_rate`: bytes of produce requests per second.
    Produce,
    /// `consumer_byte_rate`: bytes of fetch responses per second.
    Fetch,
    /// `request_percentage`: time spent on the client's requests, in percent of one thread.
    Request,
}

impl QuotaKind {
    pub(crate) fn key(self) -> &'static str {
        match self {
            QuotaKind::Produce => "producer_byte_rate",
            QuotaKind::Fetch => "consumer_byte_rate",
            QuotaKind::Request => "request_percentage",
        }
    }
}

/// One sample of a rate (Kafka's `SampledStat.Sample`).
#[derive(Clone, Copy, Debug)]
struct Sample {
    start_ms: i64,
    last_event_ms: i64,
    value: f64,
}

impl Sample {
    fn new(now_ms: i64) -> Sample {
        Sample {
            start_ms: now_ms,
            last_event_ms: now_ms,
            value: 0.0,
        }
    }
}

/// A windowed rate: Kafka's `Rate` over a `WindowedSum`, with its window-size rule.
#[derive(Debug)]
struct Rate {
    samples: Vec<Sample>,
    current: usize,
    last_used_ms: i64,
}

#[derive(Clone, Copy, Debug)]
struct Window {
    samples: usize,
    sample_ms: i64,
}

impl Rate {
    fn new(now_ms: i64) -> Rate {
        Rate {
            samples: Vec::new(),
            current: 0,
            last_used_ms: now_ms,
        }
    }

    fn record(&mut self, w: Window, value: f64, now_ms: i64) {
        self.last_used_ms = now_ms;
        if self.samples.is_empty() {
            self.samples.push(Sample::new(now_ms));
        }
        if now_ms - self.samples[self.current].start_ms >= w.sample_ms {
            // One sample more than the window, for the one overlapping its start.
            self.current = (self.current + 1) % (w.samples + 1);
            if self.current >= self.samples.len() {
                self.samples.push(Sample::new(now_ms));
            } else {
                self.samples[self.current] = Sample::new(now_ms);
            }
        }
        let s = &mut self.samples[self.current];
        s.value += value;
        s.last_event_ms = now_ms;
    }

    fn purge(&mut self, w: Window, now_ms: i64) {
        let expire = w.samples as i64 * w.sample_ms;
        for s in &mut self.samples {
            if now_ms - s.last_event_ms >= expire {
                *s = Sample::new(now_ms);
            }
        }
    }

    /// The span the rate is measured over: at least `samples - 1` whole windows.
    fn window_ms(&mut self, w: Window, now_ms: i64) -> i64 {
        self.purge(w, now_ms);
        let oldest = self
            .samples
            .iter()
            .map(|s| s.start_ms)
            .min()
            .unwrap_or(now_ms);
        let mut elapsed = now_ms - oldest;
        let full = elapsed / w.sample_ms;
        let min_full = w.samples as i64 - 1;
        if full < min_full {
            elapsed += (min_full - full) * w.sample_ms;
        }
        elapsed.max(1)
    }

    /// Per second.
    fn measure(&mut self, w: Window, now_ms: i64) -> f64 {
        self.purge(w, now_ms);
        let total: f64 = self.samples.iter().map(|s| s.value).sum();
        total / (self.window_ms(w, now_ms) as f64 / 1000.0)
    }
}

/// Who a request counts against: the principal's name (Kafka's quota user) and the client id.
#[derive(Clone, Debug)]
pub(crate) struct Who {
    pub(crate) user: String,
    pub(crate) client_id: String,
}

impl Who {
    pub(crate) fn new(
        header: &kafka_protocol::messages::RequestHeader,
        conn: &crate::Connection,
    ) -> Who {
        let user = conn
            .principal
            .as_deref()
            .map(|p| p.strip_prefix("User:").unwrap_or(p))
            .unwrap_or(ANONYMOUS);
        Who {
            user: user.to_string(),
            client_id: crate::client::client_id(header),
        }
    }
}

/// Who a rate belongs to: Kafka's metric tags (user, client id; empty when not part of it).
type Tags = (String, String);

/// The client quotas of a broker: the values and the rates measured against them.
#[derive(Debug)]
pub(crate) struct Quotas {
    window: Window,
    table: RwLock<Arc<ClientQuotas>>,
    /// Any produce, fetch or request quota set: without one, nothing is recorded.
    enabled: AtomicBool,
    sensors: Mutex<HashMap<(QuotaKind, Tags), Rate>>,
    /// The cluster revision at which the table was last read (cluster mode).
    loaded_revision: AtomicI64,
}

/// Look up `kind`'s value for the entity made of these parts (`Some(None)`: the default).
fn value_of(
    table: &ClientQuotas,
    kind: QuotaKind,
    user: Option<Option<&str>>,
    client: Option<Option<&str>>,
) -> Option<f64> {
    let mut entity = QuotaEntity::new();
    if let Some(u) = user {
        entity.insert(USER.to_string(), u.map(str::to_string));
    }
    if let Some(c) = client {
        entity.insert(CLIENT_ID.to_string(), c.map(str::to_string));
    }
    table.get(&entity)?.get(kind.key()).copied()
}

/// Kafka's `DefaultQuotaCallback.quotaMetricTags`: which rate a request of `user` and
/// `client` counts against.
fn metric_tags(table: &ClientQuotas, kind: QuotaKind, user: &str, client: &str) -> Tags {
    let has =
        |u: Option<Option<&str>>, c: Option<Option<&str>>| value_of(table, kind, u, c).is_some();
    let both = (user.to_string(), client.to_string());
    let user_only = (user.to_string(), String::new());
    if has(Some(Some(user)), Some(Some(client))) || has(Some(Some(user)), Some(None)) {
        both
    } else if has(Some(Some(user)), None) {
        user_only
    } else if has(Some(None), Some(Some(client))) || has(Some(None), Some(None)) {
        both
    } else if has(Some(None), None) {
        user_only
    } else {
        (String::new(), client.to_string())
    }
}

/// Kafka's `DefaultQuotaCallback.quotaLimit`: the bound of the rate with these tags.
fn limit(table: &ClientQuotas, kind: QuotaKind, tags: &Tags) -> Option<f64> {
    let (user, client) = (tags.0.as_str(), tags.1.as_str());
    let v = |u, c| value_of(table, kind, u, c);
    if !user.is_empty() && !client.is_empty() {
        v(Some(Some(user)), Some(Some(client)))
            .or_else(|| v(Some(Some(user)), Some(None)))
            .or_else(|| v(Some(None), Some(Some(client))))
            .or_else(|| v(Some(None), Some(None)))
    } else if !user.is_empty() {
        v(Some(Some(user)), None).or_else(|| v(Some(None), None))
    } else if !client.is_empty() {
        v(None, Some(Some(client))).or_else(|| v(None, Some(None)))
    } else {
        None
    }
}

impl Quotas {
    pub(crate) fn new(settings: &sluice_config::QuotaSettings) -> Quotas {
        Quotas {
            window: Window {
                samples: settings.window_num.max(1) as usize,
                sample_ms: i64::from(settings.window_size_seconds.max(1)) * 1000,
            },
            table: RwLock::new(Arc::new(ClientQuotas::new())),
            enabled: AtomicBool::new(false),
            sensors: Mutex::new(HashMap::new()),
            loaded_revision: AtomicI64::new(-1),
        }
    }

    /// Whether any produce, fetch or request quota is set (nothing is measured otherwise).
    pub(crate) fn enabled(&self) -> bool {
        self.enabled.load(Ordering::Relaxed)
    }

    /// The quota values in force.
    pub(crate) fn table(&self) -> Arc<ClientQuotas> {
        self.table.read().clone()
    }

    /// Put the values read from the metadata store in force. Rates measured so far are kept,
    /// as Kafka keeps its sensors when a quota changes.
    pub(crate) fn set_table(&self, table: ClientQuotas) {
        let enabled = table.values().any(|v| {
            [QuotaKind::Produce, QuotaKind::Fetch, QuotaKind::Request]
                .iter()
                .any(|k| v.contains_key(k.key()))
        });
        *self.table.write() = Arc::new(table);
        self.enabled.store(enabled, Ordering::Relaxed);
    }

    /// Load the values from the store (start-up).
    pub(crate) fn load(&self, meta: &sluice_meta::Meta) -> Result<(), sluice_meta::MetaError> {
        let revision = meta.etcd().map_or(0, |s| s.view().revision);
        self.set_table(meta.client_quotas()?);
        self.loaded_revision.store(revision, Ordering::Relaxed);
        Ok(())
    }

    /// Cluster mode: read the values again if the cluster's records changed since the last
    /// read (another broker may have altered them). Runs on the cluster thread.
    pub(crate) fn reload_if_changed(&self, store: &sluice_meta::EtcdStore, revision: i64) {
        if revision <= self.loaded_revision.load(Ordering::Relaxed) {
            return;
        }
        match store.client_quotas() {
            Ok(table) => {
                if *self.table() != table {
                    tracing::info!(entities = table.len(), "client quotas changed");
                    self.set_table(table);
                }
                self.loaded_revision.store(revision, Ordering::Relaxed);
            }
            Err(e) => tracing::warn!("reading the client quotas failed: {e}"),
        }
    }

    /// The bound that applies to `client` for `kind`, and the rate it counts against.
    fn resolve(&self, kind: QuotaKind, who: &Who) -> Option<(Tags, f64)> {
        let table = self.table();
        let tags = metric_tags(&table, kind, &who.user, &who.client_id);
        limit(&table, kind, &tags).map(|bound| (tags, bound))
    }

    /// Record `value` against `client`'s `kind` quota at `now_ms`; the throttle time in ms
    /// (0 when within the quota, or when none applies).
    pub(crate) fn record(&self, kind: QuotaKind, who: &Who, value: f64, now_ms: i64) -> i32 {
        if !self.enabled() {
            return 0;
        }
        let Some((tags, bound)) = self.resolve(kind, who) else {
            return 0;
        };
        let w = self.window;
        let mut sensors = self.sensors.lock();
        let rate = sensors
            .entry((kind, tags))
            .or_insert_with(|| Rate::new(now_ms));
        rate.record(w, value, now_ms);
        let measured = rate.measure(w, now_ms);
        if measured <= bound || bound <= 0.0 {
            return 0;
        }
        let window_ms = rate.window_ms(w, now_ms) as f64;
        let mut throttle = ((measured - bound) / bound * window_ms).round();
        if kind == QuotaKind::Request {
            throttle = throttle.min(w.sample_ms as f64);
        }
        throttle.clamp(0.0, f64::from(i32::MAX)) as i32
    }

    /// Take back a value recorded by [`Quotas::record`] (a throttled fetch sends nothing).
    pub(crate) fn unrecord(&self, kind: QuotaKind, who: &Who, value: f64, now_ms: i64) {
        if let Some((tags, _)) = self.resolve(kind, who) {
            if let Some(rate) = self.sensors.lock().get_mut(&(kind, tags)) {
                rate.record(self.window, -value, now_ms);
            }
        }
    }

    /// The most bytes a fetch may return to `client` without being throttled for sure:
    /// the quota over the whole window (Kafka's `getMaxValueInQuotaWindow`).
    pub(crate) fn fetch_bytes_max(&self, who: &Who) -> Option<usize> {
        if !self.enabled() {
            return None;
        }
        let (_, bound) = self.resolve(QuotaKind::Fetch, who)?;
        let window_s = (self.window.samples as f64 - 1.0) * (self.window.sample_ms as f64 / 1000.0);
        Some((bound * window_s).clamp(1.0, i32::MAX as f64) as usize)
    }

    /// Drop rates idle for an hour (runs with the broker's maintenance).
    pub(crate) fn expire(&self, now_ms: i64) {
        self.sensors
            .lock()
            .retain(|_, r| now_ms - r.last_used_ms < SENSOR_IDLE_EXPIRY_MS);
    }
}

/// The `throttle_time_ms` field of a response body, for the APIs Sluice answers that have one.
pub(crate) fn throttle_slot(body: &mut ResponseKind) -> Option<&mut i32> {
    macro_rules! slots {
        ($($v:ident),* $(,)?) => {
            match body {
                $(ResponseKind::$v(b) => Some(&mut b.throttle_time_ms),)*
                _ => None,
            }
        };
    }
    slots!(
        Produce,
        Fetch,
        ListOffsets,
        Metadata,
        ApiVersions,
        CreateTopics,
        DeleteTopics,
        DeleteRecords,
        InitProducerId,
        DescribeConfigs,
        AlterConfigs,
        AlterReplicaLogDirs,
        DescribeLogDirs,
        CreatePartitions,
        IncrementalAlterConfigs,
        DescribeCluster,
        FindCoordinator,
        JoinGroup,
        SyncGroup,
        Heartbeat,
        LeaveGroup,
        OffsetCommit,
        OffsetFetch,
        DescribeGroups,
        ListGroups,
        DeleteGroups,
        OffsetDelete,
        ConsumerGroupHeartbeat,
        ConsumerGroupDescribe,
        ElectLeaders,
        AlterPartitionReassignments,
        ListPartitionReassignments,
        OffsetForLeaderEpoch,
        AddPartitionsToTxn,
        AddOffsetsToTxn,
        EndTxn,
        TxnOffsetCommit,
        DescribeProducers,
        DescribeTransactions,
        ListTransactions,
        DescribeTopicPartitions,
        DescribeAcls,
        CreateAcls,
        DeleteAcls,
        CreateDelegationToken,
        RenewDelegationToken,
        ExpireDelegationToken,
        DescribeDelegationToken,
        DescribeClientQuotas,
        AlterClientQuotas,
        DescribeUserScramCredentials,
    )
}

/// A request's answer, timing the work done in it: the time spent inside its polls, which is
/// the time a thread worked on it (waiting for an fsync or a long poll is not counted).
/// Kafka's request quota counts a request's handler-thread time the same way.
pub(crate) struct Busy {
    pub(crate) inner: crate::Answer,
    pub(crate) busy: Duration,
}

impl Future for Busy {
    type Output = (Option<crate::Response>, Duration);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let started = Instant::now();
        let polled = this.inner.as_mut().poll(cx);
        this.busy += started.elapsed();
        polled.map(|r| (r, this.busy))
    }
}

/// Bytes a fetch answer sends, as its quota counts them: the record data and a small
/// allowance per partition and for the frame (Kafka counts the encoded response).
pub(crate) fn fetch_response_bytes(body: &FetchResponse, regions: &[(usize, FileSlice)]) -> usize {
    let partitions: usize = body.responses.iter().map(|t| t.partitions.len()).sum();
    let records: usize = regions.iter().map(|(_, r)| r.len as usize).sum();
    response_bytes(records, partitions)
}

/// [`fetch_response_bytes`] from the record bytes and the number of partitions answered.
pub(crate) fn response_bytes(records: usize, partitions: usize) -> usize {
    records + partitions * 64 + 32
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn who(client_id: &str) -> Who {
        Who {
            user: ANONYMOUS.to_string(),
            client_id: client_id.to_string(),
        }
    }

    #[test]
    fn a_principals_name_is_its_quota_user() {
        let q = Quotas::new(&sluice_config::QuotaSettings {
            window_num: 11,
            window_size_seconds: 1,
        });
        q.set_table(table(&[(
            &[(USER, Some("CN=bob,O=Acme"))],
            "producer_byte_rate",
            1000.0,
        )]));
        let bob = Who {
            user: "CN=bob,O=Acme".into(),
            client_id: "c".into(),
        };
        assert!(q.record(QuotaKind::Produce, &bob, 100_000.0, 0) > 0);
        assert_eq!(q.record(QuotaKind::Produce, &who("c"), 100_000.0, 0), 0);
    }

    /// (entity as (type, name) pairs, key, value)
    type Row<'a> = (&'a [(&'a str, Option<&'a str>)], &'a str, f64);

    fn table(rows: &[Row<'_>]) -> ClientQuotas {
        let mut t = ClientQuotas::new();
        for (entity, key, value) in rows {
            let e: QuotaEntity = entity
                .iter()
                .map(|(k, v)| (k.to_string(), v.map(str::to_string)))
                .collect();
            t.entry(e).or_default().insert(key.to_string(), *value);
        }
        t
    }

    fn resolved(t: &ClientQuotas, client: &str) -> (Tags, Option<f64>) {
        let tags = metric_tags(t, QuotaKind::Produce, ANONYMOUS, client);
        let l = limit(t, QuotaKind::Produce, &tags);
        (tags, l)
    }

    #[test]
    fn precedence_follows_kafka() {
        let p = "producer_byte_rate";
        let mut rows: Vec<Row<'_>> = vec![
            (&[(CLIENT_ID, None)], p, 8.0),
            (&[(CLIENT_ID, Some("c"))], p, 7.0),
            (&[(USER, None)], p, 6.0),
            (&[(USER, None), (CLIENT_ID, None)], p, 5.0),
            (&[(USER, None), (CLIENT_ID, Some("c"))], p, 4.0),
            (&[(USER, Some(ANONYMOUS))], p, 3.0),
            (&[(USER, Some(ANONYMOUS)), (CLIENT_ID, None)], p, 2.0),
            (&[(USER, Some(ANONYMOUS)), (CLIENT_ID, Some("c"))], p, 1.0),
        ];
        // Remove the most specific one at a time: the next one applies.
        for expected in 1..=8 {
            let t = table(&rows);
            let (tags, l) = resolved(&t, "c");
            assert_eq!(l, Some(expected as f64), "{tags:?}");
            rows.pop();
        }
        assert_eq!(resolved(&table(&rows), "c").1, None);
        // A user-level quota is shared by every client id; a client-level one is not.
        let t = table(&[(&[(USER, None)], p, 6.0)]);
        assert_eq!(resolved(&t, "a").0, resolved(&t, "b").0);
        let t = table(&[(&[(CLIENT_ID, None)], p, 6.0)]);
        assert_ne!(resolved(&t, "a").0, resolved(&t, "b").0);
        // Another quota type's entity does not take precedence.
        let t = table(&[
            (&[(USER, None)], "consumer_byte_rate", 6.0),
            (&[(CLIENT_ID, Some("c"))], p, 7.0),
        ]);
        assert_eq!(resolved(&t, "c").1, Some(7.0));
    }

    #[test]
    fn throttle_brings_the_rate_back_to_the_bound() {
        let q = Quotas::new(&sluice_config::QuotaSettings {
            window_num: 11,
            window_size_seconds: 1,
        });
        q.set_table(table(&[(
            &[(CLIENT_ID, Some("c"))],
            "producer_byte_rate",
            1000.0,
        )]));
        // 10 s of window at first: 10,000 bytes are within the quota, more are not.
        assert_eq!(q.record(QuotaKind::Produce, &who("c"), 10_000.0, 0), 0);
        assert_eq!(q.record(QuotaKind::Produce, &who("other"), 1e9, 0), 0);
        let t = q.record(QuotaKind::Produce, &who("c"), 10_000.0, 0);
        // (20,000 / 10 s - 1000) / 1000 * 10 s = 10 s.
        assert_eq!(t, 10_000);
        // Taking the second value back leaves the rate within the quota.
        q.unrecord(QuotaKind::Produce, &who("c"), 10_000.0, 0);
        assert_eq!(q.record(QuotaKind::Produce, &who("c"), 0.0, 1), 0);
        assert_eq!(q.fetch_bytes_max(&who("c")), None);
        // Samples older than the window are forgotten.
        assert_eq!(q.record(QuotaKind::Produce, &who("c"), 10_000.0, 20_000), 0);
    }

    #[test]
    fn request_throttle_is_at_most_one_window() {
        let q = Quotas::new(&sluice_config::QuotaSettings {
            window_num: 11,
            window_size_seconds: 1,
        });
        q.set_table(table(&[(&[(USER, None)], "request_percentage", 1.0)]));
        assert_eq!(q.record(QuotaKind::Request, &who("x"), 1000.0, 0), 1000);
        assert!(q.enabled());
        q.set_table(ClientQuotas::new());
        assert!(!q.enabled());
        assert_eq!(q.record(QuotaKind::Request, &who("x"), 1000.0, 0), 0);
    }
}

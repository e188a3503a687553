//! Consumer lag, in cluster mode, of the partitions a group coordinator does not serve itself:
//! their owners are asked, as a consumer would ask them. One sessionless Fetch per partition
//! and distinct committed offset, sent to the partition's owner: its answer gives the
//! partition's high watermark (lag in records) and the batch holding the committed offset
//! (exactly one batch: `max_bytes` is 1, and Kafka's Fetch returns the first batch of its
//! first partition whole), whose timestamps give the lag in seconds, as the local reading
//! does. Only one partition per Fetch: Kafka returns a whole batch below the limit only for
//! the first partition of an answer.
//!
//! Bounded per scrape: at most `sluice.metrics.lag.remote.partitions.max` partitions, each
//! owner's Fetches within [`REMOTE_LAG_TIMEOUT`] (one request at a time on the connection to
//! it), and the result reused for `sluice.metrics.lag.remote.cache.ms` by later scrapes.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, RequestKind, ResponseKind, TopicName,
};
use sluice_format::{BatchHeader, BatchTimestampType};

use crate::wire::str_bytes;
use crate::{now_ms, Broker, OFFSETS_TOPIC};

/// One group's lag on one partition: group, topic, partition, committed offset, lag in
/// records, lag in seconds.
pub(crate) type LagRow = (String, String, i32, i64, i64, f64);

/// Longest wait for one owner's answer during a scrape (a dead or slow owner leaves its
/// partitions out of that scrape rather than holding it up to the peer timeout).
pub(crate) const REMOTE_LAG_TIMEOUT: Duration = Duration::from_secs(2);

/// Fetch version used (topic names, not ids; Kafka 4 brokers serve 4 and up).
const FETCH_VERSION: i16 = 12;
/// Bytes one Fetch answer may carry; it holds one batch, however large (up to the topic's
/// `max.message.bytes`).
const FETCH_MAX_BYTES: i32 = 1;

/// The last remote lag computed, and when.
pub(crate) type RemoteLagCache = parking_lot::Mutex<Option<(Instant, Vec<LagRow>)>>;

/// Committed offsets by owner, then partition: the groups and their offsets.
type ByOwner = BTreeMap<i32, BTreeMap<(String, i32), Vec<(String, i64)>>>;

impl Broker {
    /// Lag of the groups this broker coordinates on partitions other brokers own (cluster
    /// mode; empty on a single broker). Called on the scrape's blocking thread.
    pub(crate) fn remote_lag(&self) -> Vec<LagRow> {
        let max = self.config.metrics_lag_remote_partitions_max as usize;
        if self.cluster.is_none() || max == 0 {
            return Vec::new();
        }
        let ttl = Duration::from_millis(u64::from(self.config.metrics_lag_remote_cache_ms));
        if let Some((at, rows)) = &*self.remote_lag.lock() {
            if at.elapsed() < ttl {
                return rows.clone();
            }
        }
        let mut by_owner = ByOwner::new();
        let mut partitions = 0usize;
        for (g, t, p, offset) in self.groups.read(|c| c.all_committed()) {
            if t == OFFSETS_TOPIC {
                continue;
            }
            let Some(state) = self.registry.get(&t) else {
                continue;
            };
            if !state.has_partition(p) || state.log(p).is_some() {
                continue; // no such partition, or served here (the local rows)
            }
            let Some((owner, _)) = self.leader_hint(&t, p) else {
                continue;
            };
            let parts = by_owner.entry(owner).or_default();
            let key = (t, p);
            if !parts.contains_key(&key) {
                if partitions >= max {
                    continue;
                }
                partitions += 1;
            }
            parts.entry(key).or_default().push((g, offset));
        }
        let rows = if by_owner.is_empty() {
            Vec::new()
        } else {
            self.runtime.block_on(async {
                let mut rows = Vec::new();
                for (owner, parts) in &by_owner {
                    rows.extend(self.owner_lag(*owner, parts).await);
                }
                rows
            })
        };
        *self.remote_lag.lock() = Some((Instant::now(), rows.clone()));
        rows
    }

    /// The lag rows of `parts` (owned by `owner`), from Fetches at the committed offsets.
    async fn owner_lag(
        &self,
        owner: i32,
        parts: &BTreeMap<(String, i32), Vec<(String, i64)>>,
    ) -> Vec<LagRow> {
        let mut asked: Vec<(&str, i32, i64)> = parts
            .iter()
            .flat_map(|((t, p), groups)| groups.iter().map(move |(_, o)| (t.as_str(), *p, *o)))
            .collect();
        asked.sort_unstable();
        asked.dedup();
        let deadline = tokio::time::Instant::now() + REMOTE_LAG_TIMEOUT;
        // (topic, partition, offset) -> (high watermark, timestamp at the offset)
        let mut seen: BTreeMap<(String, i32, i64), (i64, Option<i64>)> = BTreeMap::new();
        for (t, p, offset) in asked {
            let call = self.call_peer(
                owner,
                ApiKey::Fetch,
                FETCH_VERSION,
                RequestKind::Fetch(fetch_at(t, p, offset)),
            );
            let resp = match tokio::time::timeout_at(deadline, call).await {
                Ok(Ok(ResponseKind::Fetch(r))) if r.error_code == 0 => r,
                Ok(Ok(_)) => {
                    tracing::debug!("consumer lag: broker {owner} refused a fetch");
                    continue;
                }
                Ok(Err(e)) => {
                    tracing::debug!("consumer lag: broker {owner}: {e}");
                    break;
                }
                Err(_) => {
                    tracing::debug!("consumer lag: broker {owner} did not answer in time");
                    break;
                }
            };
            let Some(pd) = resp
                .responses
                .into_iter()
                .flat_map(|tr| tr.partitions)
                .find(|pd| pd.partition_index == p)
            else {
                continue;
            };
            if pd.error_code != 0 || pd.high_watermark < 0 {
                continue; // moved, or not served there now: left out of this scrape
            }
            let ts = pd.records.as_ref().and_then(|r| timestamp_in(r, offset));
            seen.insert((t.to_string(), p, offset), (pd.high_watermark, ts));
        }
        let now = now_ms();
        let mut rows = Vec::new();
        for ((t, p), groups) in parts {
            for (g, offset) in groups {
                let Some((hw, ts)) = seen.get(&(t.clone(), *p, *offset)) else {
                    continue;
                };
                let lag = (hw - offset).max(0);
                let seconds = match ts {
                    Some(ts) if lag > 0 => (now - ts).max(0) as f64 / 1000.0,
                    _ => 0.0,
                };
                rows.push((g.clone(), t.clone(), *p, *offset, lag, seconds));
            }
        }
        rows
    }
}

/// A sessionless Fetch of one partition at `offset`: its answer holds the high watermark and,
/// the partition being the request's first, the whole first batch at the offset however
/// small `partition_max_bytes` is (Kafka's rule), and nothing more.
fn fetch_at(topic: &str, partition: i32, offset: i64) -> FetchRequest {
    let mut fp = FetchPartition::default();
    fp.partition = partition;
    fp.fetch_offset = offset;
    fp.current_leader_epoch = -1;
    fp.last_fetched_epoch = -1;
    fp.log_start_offset = -1;
    fp.partition_max_bytes = 1;
    let mut ft = FetchTopic::default();
    ft.topic = TopicName(str_bytes(topic));
    ft.partitions = vec![fp];
    let mut req = FetchRequest::default();
    req.replica_id = BrokerId(-1);
    req.max_wait_ms = 0;
    req.min_bytes = 0;
    req.max_bytes = FETCH_MAX_BYTES;
    req.isolation_level = 0;
    req.session_id = 0;
    req.session_epoch = -1;
    req.topics = vec![ft];
    req
}

/// The timestamp of the record at `offset` in the batch `h` (`whole`: the batch's bytes, if
/// read): the batch's time under LogAppendTime; its first timestamp when the offset is its
/// first, when it is compressed, or when its bytes were not read; else the record's own.
pub(crate) fn batch_timestamp(h: &BatchHeader, whole: Option<&[u8]>, offset: i64) -> Option<i64> {
    if h.timestamp_type() == BatchTimestampType::LogAppendTime {
        return Some(h.max_timestamp);
    }
    let whole = match whole {
        Some(w) if offset > h.base_offset && h.compression_codec() == 0 => w,
        _ => return Some(h.base_timestamp),
    };
    let Ok(records) = sluice_format::records::record_timestamps(whole) else {
        return Some(h.base_timestamp);
    };
    records
        .iter()
        .find(|(delta, _)| h.base_offset + i64::from(*delta) >= offset)
        .or(records.last())
        .map(|(_, ts)| *ts)
}

/// The timestamp of the record at `offset` (the first at or after it) in `records` (a Fetch
/// answer's batches), by the rule the metrics' local reading follows too ([`batch_timestamp`]).
fn timestamp_in(records: &Bytes, offset: i64) -> Option<i64> {
    let mut at = 0usize;
    while let Some(h) = records
        .get(at..)
        .and_then(|rest| BatchHeader::decode(rest).ok())
    {
        if h.batch_length < 0 {
            return None;
        }
        let end = at + h.total_len();
        if h.base_offset + i64::from(h.last_offset_delta) >= offset {
            return batch_timestamp(&h, records.get(at..end), offset);
        }
        at = end;
    }
    None
}

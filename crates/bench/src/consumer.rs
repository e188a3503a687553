//! One benchmark consumer on one leader: assign-style (no consumer group), fetches its
//! partitions from the offsets after the readiness probe with one Fetch in flight (as Kafka's consumer does per broker),
//! reads the embedded send times for end-to-end latency, and counts records and bytes.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{bail, Result};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::watch;

use crate::admin;
use crate::batch::scan;
use crate::client::Connection;
use crate::config::Driver;
use crate::producer::now_us;
use crate::stats::{Counters, Stats};

/// Kafka's OFFSET_OUT_OF_RANGE error code.
const OFFSET_OUT_OF_RANGE: i16 = 1;
/// Consecutive failed fetches after which the consumer gives up.
const FETCH_FAILURES_MAX: u32 = 10;

#[derive(Debug)]
pub struct Consumer {
    pub topic: String,
    /// (partition, offset to start at).
    pub partitions: Vec<(i32, i64)>,
    pub conn: Arc<Connection>,
    pub driver: Driver,
    pub stats: Arc<Stats>,
    pub stop: Arc<AtomicBool>,
    /// False while the consumers are held back (backlog build-up).
    pub resume: watch::Receiver<bool>,
}

impl Consumer {
    pub async fn run(mut self) -> Result<()> {
        let mut offsets: Vec<i64> = self.partitions.iter().map(|(_, o)| *o).collect();
        let e2e = self.stats.end_to_end_recorder();
        let topic = TopicName(StrBytes::from_string(self.topic.clone()));
        let version = self.conn.versions.fetch;
        let mut failures = 0u32;
        let mut send_times: Vec<u64> = Vec::with_capacity(1 << 16);
        // Partitions answered out of range without their log start, in this response.
        let mut unknown_start: Vec<i32> = Vec::new();
        while !self.stop.load(Ordering::Relaxed) {
            if !*self.resume.borrow() {
                tokio::select! {
                    _ = self.resume.changed() => {}
                    _ = tokio::time::sleep(std::time::Duration::from_millis(100)) => {}
                }
                continue;
            }
            let mut t = FetchTopic::default();
            t.topic = topic.clone();
            t.partitions = self
                .partitions
                .iter()
                .zip(&offsets)
                .map(|((p, _), o)| {
                    let mut fp = FetchPartition::default();
                    fp.partition = *p;
                    fp.fetch_offset = *o;
                    fp.current_leader_epoch = -1;
                    fp.last_fetched_epoch = -1;
                    fp.log_start_offset = -1;
                    fp.partition_max_bytes = self.driver.max_partition_fetch_bytes;
                    fp
                })
                .collect();
            let mut req = FetchRequest::default();
            req.replica_id = BrokerId(-1);
            req.max_wait_ms = self.driver.fetch_max_wait_ms;
            req.min_bytes = self.driver.fetch_min_bytes;
            req.max_bytes = self.driver.fetch_max_bytes;
            req.isolation_level = 0;
            req.session_id = 0;
            req.session_epoch = -1;
            req.topics = vec![t];
            let resp: FetchResponse = match self.conn.call(ApiKey::Fetch, version, &req).await {
                Ok(r) => r,
                Err(e) => {
                    failures += 1;
                    if failures >= FETCH_FAILURES_MAX {
                        return Err(
                            e.context(format!("{FETCH_FAILURES_MAX} fetches in a row failed"))
                        );
                    }
                    continue;
                }
            };
            if resp.error_code != 0 {
                failures += 1;
                if failures >= FETCH_FAILURES_MAX {
                    bail!(
                        "fetch failed {FETCH_FAILURES_MAX} times, last error code {}",
                        resp.error_code
                    );
                }
                continue;
            }
            failures = 0;
            let now = now_us();
            let mut msgs = 0;
            let mut bytes = 0;
            send_times.clear();
            for tr in &resp.responses {
                for pd in &tr.partitions {
                    let Some(i) = self
                        .partitions
                        .iter()
                        .position(|(p, _)| *p == pd.partition_index)
                    else {
                        continue;
                    };
                    if pd.error_code == OFFSET_OUT_OF_RANGE {
                        // Start over from the log start (retention moved it); what lay
                        // between was deleted unread. A broker that does not say where the
                        // log starts (-1) is asked below.
                        if pd.log_start_offset < 0 {
                            unknown_start.push(pd.partition_index);
                        } else {
                            self.restart_at(&mut offsets[i], pd.log_start_offset);
                        }
                        continue;
                    }
                    let Some(records) = &pd.records else { continue };
                    let s = scan(records, |t| send_times.push(t));
                    if let Some(next) = s.next_offset {
                        offsets[i] = offsets[i].max(next);
                    }
                    msgs += s.records;
                    bytes += s.bytes;
                }
            }
            if !unknown_start.is_empty() {
                let starts =
                    admin::earliest_offsets(&self.conn, &self.topic, &unknown_start).await?;
                unknown_start.clear();
                for (p, start) in starts {
                    if let Some(i) = self.partitions.iter().position(|(q, _)| *q == p) {
                        self.restart_at(&mut offsets[i], start);
                    }
                }
            }
            if !send_times.is_empty() {
                e2e.lock().record_since(now, &send_times);
            }
            let c = &self.stats.counters;
            Counters::add(&c.consumed_msgs, msgs);
            Counters::add(&c.consumed_bytes, bytes);
        }
        Ok(())
    }

    /// Move a partition's next offset to its log start after an out-of-range fetch, counting
    /// what lay between as deleted unread.
    fn restart_at(&self, offset: &mut i64, log_start: i64) {
        let start = log_start.max(0);
        if start > *offset {
            Counters::add(&self.stats.counters.skipped_msgs, (start - *offset) as u64);
        }
        *offset = start;
    }
}

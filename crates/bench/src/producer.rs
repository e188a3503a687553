//! One benchmark producer: generates records at its share of the workload rate (or as fast as
//! acknowledgements allow when the rate is 0), batches them per partition like Kafka's Java
//! producer (batch.size, linger.ms, sticky partition for unkeyed records), and pipelines
//! Produce requests (one per leader at a time holding every ready batch for it, up to
//! max.in.flight.requests.per.connection in flight).

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Result;
use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse, TopicName};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;

use crate::batch::{BatchEncoder, PayloadPool, Rng};
use crate::client::{decode_response, Connection};
use crate::config::{Acks, Driver, KeyDistributor};
use crate::stats::{Counters, Recorder, Stats};
use crate::timer::PreciseTimer;

/// Producer memory bound (Kafka's buffer.memory default): generation pauses above it.
pub const BUFFER_BYTES_MAX: usize = 32 << 20;
/// Largest Produce request (Kafka's max.request.size default).
pub const REQUEST_BYTES_MAX: usize = 1 << 20;
/// Records generated per loop turn before the loop sends and checks the clock again.
const RECORDS_PER_TURN_MAX: u64 = 2_000;
/// Shortest pause between generation turns at a fixed rate: records due meanwhile are made
/// together in the next turn (stamped with its time), rather than a wake-up per record.
const PACE_MIN: Duration = Duration::from_millis(1);
/// Largest schedule debt caught up after a stall, in seconds of the rate (like Guava's
/// RateLimiter that OMB uses): beyond it, missed sends are dropped from the schedule.
const CATCH_UP_S: f64 = 1.0;
/// Attempts per batch for retriable errors (Kafka's producer retries these too).
const ATTEMPTS_MAX: u32 = 10;
/// Pause before a retry (Kafka's retry.backoff.ms default).
const RETRY_BACKOFF: Duration = Duration::from_millis(100);
/// Kafka error codes worth retrying: UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE,
/// NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
/// KAFKA_STORAGE_ERROR.
const RETRIABLE: &[i16] = &[3, 5, 6, 7, 19, 20, 56];

/// Microseconds since the Unix epoch.
pub fn now_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

#[derive(Debug)]
struct Open {
    enc: BatchEncoder,
    created: Instant,
    send_times: Vec<u64>,
}

#[derive(Debug)]
struct Ready {
    partition: i32,
    batch: Bytes,
    send_times: Vec<u64>,
    attempt: u32,
}

#[derive(Debug)]
pub struct Producer {
    pub topic: String,
    /// Leader node id of each partition.
    pub leaders: Vec<i32>,
    pub conns: BTreeMap<i32, Arc<Connection>>,
    /// Messages per second for this producer (f64 bits; 0 = unthrottled). Shared so the
    /// run's rate controller can move it while the producer runs.
    pub rate: Arc<AtomicU64>,
    pub driver: Driver,
    pub key_distributor: KeyDistributor,
    pub pool: Arc<PayloadPool>,
    pub stats: Arc<Stats>,
    pub stop: Arc<AtomicBool>,
    pub seed: u64,
}

struct Leader {
    conn: Arc<Connection>,
    permits: Arc<Semaphore>,
    ready: VecDeque<Ready>,
}

impl Producer {
    pub async fn run(self) -> Result<()> {
        let n = self.leaders.len();
        let topic = TopicName(StrBytes::from_string(self.topic.clone()));
        let in_flight = self.driver.max_in_flight as usize;
        let mut leaders: BTreeMap<i32, Leader> = self
            .conns
            .iter()
            .map(|(id, c)| {
                (
                    *id,
                    Leader {
                        conn: c.clone(),
                        permits: Arc::new(Semaphore::new(in_flight)),
                        ready: VecDeque::new(),
                    },
                )
            })
            .collect();
        let released = Arc::new(Notify::new());
        let (retry_tx, mut retry_rx) = tokio::sync::mpsc::unbounded_channel::<Ready>();
        let publish = self.stats.publish_recorder();
        let mut rng = Rng::new(self.seed);
        let mut open: Vec<Option<Open>> = (0..n).map(|_| None).collect();
        let mut spare: Vec<BatchEncoder> = Vec::new();
        let mut sticky = (self.seed as usize) % n;
        let mut buffered = 0usize;
        let mut generated: u64 = 0;
        // Token bucket: sends allowed now, refilled at the rate, capped at CATCH_UP_S of it.
        let mut credit: f64 = 0.0;
        let mut refilled = Instant::now();
        let mut key_buf = [0u8; 20];
        let batch_bytes = self.driver.batch_bytes as usize;
        let linger = self.driver.linger;
        let timer = PreciseTimer::new()?;
        let msg_size = self.pool.get(0).len();
        let mut seen: Vec<i32> = Vec::new();
        // The next payload of the pool, taken in turn (a counter, not a division per record).
        let mut pool_next = 0usize;

        while !self.stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            // 1. Generate what is due.
            let rate = f64::from_bits(self.rate.load(Ordering::Relaxed));
            let due = if rate > 0.0 {
                let dt = now.duration_since(refilled).as_secs_f64();
                refilled = now;
                credit = (credit + rate * dt).min((rate * CATCH_UP_S).max(1.0));
                credit.max(0.0) as u64
            } else {
                u64::MAX
            };
            let mut made = 0u64;
            // One clock read per turn: the records of a turn are all due by now (reading the
            // clock per record cost ~7% of the client's CPU at millions of records/s).
            let send_us = now_us();
            let ts_ms = (send_us / 1000) as i64;
            while made < due.min(RECORDS_PER_TURN_MAX) && buffered < BUFFER_BYTES_MAX {
                let key: Option<&[u8]> = match self.key_distributor {
                    KeyDistributor::NoKey => None,
                    KeyDistributor::KeyRoundRobin => Some(fmt_u64(&mut key_buf, generated)),
                    KeyDistributor::RandomNano => Some(fmt_u64(&mut key_buf, rng.next_u64())),
                };
                let p = match key {
                    None => sticky,
                    Some(k) => (fnv1a(k) % n as u64) as usize,
                };
                let payload = self.pool.get(pool_next);
                pool_next += 1;
                if pool_next == self.pool.len() {
                    pool_next = 0;
                }
                let slot = &mut open[p];
                let o = slot.get_or_insert_with(|| {
                    let mut enc = spare.pop().unwrap_or_default();
                    enc.begin(ts_ms, batch_bytes.max(msg_size + 64));
                    Open {
                        enc,
                        created: now,
                        send_times: Vec::with_capacity(batch_bytes / msg_size.max(1) + 1),
                    }
                });
                let before = o.enc.len();
                o.enc.push(ts_ms, key, payload, send_us);
                o.send_times.push(send_us);
                buffered += o.enc.len() - before;
                let full = o.enc.len() + o.enc.record_size(ts_ms, key, msg_size) > batch_bytes;
                if full {
                    if let Some(o) = slot.take() {
                        self.close(p, o, &mut leaders, &mut spare);
                    }
                    if key.is_none() {
                        sticky = (sticky + 1) % n;
                    }
                }
                generated += 1;
                made += 1;
            }
            if rate > 0.0 {
                credit -= made as f64;
            }
            // 2. Close batches whose linger has passed.
            let now = Instant::now();
            for (p, slot) in open.iter_mut().enumerate() {
                if slot
                    .as_ref()
                    .is_some_and(|o| now.duration_since(o.created) >= linger)
                {
                    if let Some(o) = slot.take() {
                        self.close(p, o, &mut leaders, &mut spare);
                        if self.key_distributor == KeyDistributor::NoKey && p == sticky {
                            sticky = (sticky + 1) % n;
                        }
                    }
                }
            }
            // 3. Retries go first (their data is older), then ready batches, while requests
            // may be in flight.
            while let Ok(r) = retry_rx.try_recv() {
                let leader = self.leaders[r.partition as usize];
                if let Some(l) = leaders.get_mut(&leader) {
                    buffered += r.batch.len();
                    l.ready.push_front(r);
                }
            }
            for leader in leaders.values_mut() {
                while !leader.ready.is_empty() {
                    let Ok(permit) = leader.permits.clone().try_acquire_owned() else {
                        break;
                    };
                    let mut batches = Vec::new();
                    let mut bytes = 0usize;
                    let mut in_request = std::mem::take(&mut seen);
                    in_request.clear();
                    while let Some(r) = leader.ready.front() {
                        // One batch per partition per request (brokers key a request's data
                        // by partition); the next batch of a partition waits for the next
                        // request, which keeps per-partition order.
                        if !batches.is_empty()
                            && (bytes + r.batch.len() > REQUEST_BYTES_MAX
                                || in_request.contains(&r.partition))
                        {
                            break;
                        }
                        in_request.push(r.partition);
                        bytes += r.batch.len();
                        batches.extend(leader.ready.pop_front());
                    }
                    seen = in_request;
                    buffered = buffered.saturating_sub(bytes);
                    let ctx = SendCtx {
                        permit,
                        released: released.clone(),
                        publish: publish.clone(),
                        retry: retry_tx.clone(),
                    };
                    self.send(&leader.conn, &topic, batches, ctx).await?;
                }
            }
            // 4. Wait for the next thing to do.
            if made >= RECORDS_PER_TURN_MAX {
                tokio::task::yield_now().await;
                continue;
            }
            let mut wake = now + Duration::from_millis(50);
            if rate > 0.0 && buffered < BUFFER_BYTES_MAX {
                let next = now + Duration::from_secs_f64(((1.0 - credit) / rate).max(0.0));
                wake = wake.min(next.max(now + PACE_MIN));
            }
            for o in open.iter().flatten() {
                wake = wake.min(o.created + linger);
            }
            let blocked = leaders
                .values()
                .any(|l| !l.ready.is_empty() && l.permits.available_permits() == 0);
            let waiting = rate == 0.0 || buffered >= BUFFER_BYTES_MAX;
            if blocked || waiting {
                tokio::select! {
                    _ = released.notified() => {}
                    r = timer.sleep_until(wake) => r?,
                }
            } else {
                timer.sleep_until(wake).await?;
            }
        }
        // Wait (bounded) for the requests in flight so their acknowledgements are counted.
        let deadline = Instant::now() + self.driver.request_timeout;
        for leader in leaders.values() {
            let _ =
                tokio::time::timeout_at(deadline, leader.permits.acquire_many(in_flight as u32))
                    .await;
        }
        Ok(())
    }

    fn close(
        &self,
        p: usize,
        mut o: Open,
        leaders: &mut BTreeMap<i32, Leader>,
        spare: &mut Vec<BatchEncoder>,
    ) {
        let batch = o.enc.finish();
        spare.push(o.enc);
        let leader = self.leaders[p];
        if let Some(l) = leaders.get_mut(&leader) {
            l.ready.push_back(Ready {
                partition: p as i32,
                batch,
                send_times: std::mem::take(&mut o.send_times),
                attempt: 1,
            });
        }
    }

    async fn send(
        &self,
        conn: &Arc<Connection>,
        topic: &TopicName,
        batches: Vec<Ready>,
        ctx: SendCtx,
    ) -> Result<()> {
        // The batches are written from their own buffers in place of these markers.
        let mut by_partition: Vec<PartitionProduceData> = Vec::with_capacity(batches.len());
        for (i, r) in batches.iter().enumerate() {
            let mut d = PartitionProduceData::default();
            d.index = r.partition;
            d.records = Some(sluice_wire::region_marker(i));
            by_partition.push(d);
        }
        let bodies: Vec<Bytes> = batches.iter().map(|r| r.batch.clone()).collect();
        let mut t = TopicProduceData::default();
        t.name = topic.clone();
        t.partition_data = by_partition;
        let mut req = ProduceRequest::default();
        req.acks = self.driver.acks.wire();
        req.timeout_ms = i32::try_from(self.driver.request_timeout.as_millis()).unwrap_or(i32::MAX);
        req.topic_data = vec![t];
        let msgs: u64 = batches.iter().map(|r| r.send_times.len() as u64).sum();
        let c = &self.stats.counters;
        for r in batches.iter().filter(|r| r.attempt == 1) {
            Counters::add(&c.sent_msgs, r.send_times.len() as u64);
            Counters::add(&c.sent_bytes, r.batch.len() as u64);
        }
        let version = conn.versions.produce;
        let rx = conn
            .send_produce(version, &req, &bodies, self.driver.acks != Acks::None)
            .await?;
        drop(bodies);
        let stats = self.stats.clone();
        let Some(rx) = rx else {
            // acks=0: written is all the acknowledgement there is.
            let now = now_us();
            let mut h = ctx.publish.lock();
            for r in &batches {
                h.record_since(now, &r.send_times);
            }
            drop(h);
            Counters::add(&stats.counters.acked_msgs, msgs);
            ctx.done();
            return Ok(());
        };
        tokio::spawn(async move {
            let outcome = match rx.await {
                Ok(Ok(frame)) => {
                    decode_response::<ProduceResponse>(ApiKey::Produce, version, frame)
                }
                Ok(Err(e)) => Err(e),
                Err(_) => Err(anyhow::anyhow!("connection closed")),
            };
            let now = now_us();
            let c = &stats.counters;
            let mut retries = Vec::new();
            match outcome {
                Ok(resp) => {
                    let mut codes: Vec<(i32, i16)> = resp
                        .responses
                        .iter()
                        .flat_map(|t| t.partition_responses.iter())
                        .map(|p| (p.index, p.error_code))
                        .collect();
                    codes.sort_unstable();
                    let mut h = ctx.publish.lock();
                    for r in batches {
                        // A partition missing from the response counts as an error (-1).
                        let code = codes
                            .binary_search_by_key(&r.partition, |(p, _)| *p)
                            .map_or(-1, |i| codes[i].1);
                        if code == 0 {
                            h.record_since(now, &r.send_times);
                            Counters::add(&c.acked_msgs, r.send_times.len() as u64);
                        } else if RETRIABLE.contains(&code) && r.attempt < ATTEMPTS_MAX {
                            retries.push(r);
                        } else {
                            report_error(format!(
                                "produce to partition {} failed with error code {code} after {} attempt(s)",
                                r.partition, r.attempt
                            ));
                            Counters::add(&c.publish_errors, r.send_times.len() as u64);
                        }
                    }
                }
                Err(e) => {
                    report_error(format!("produce failed: {e:#}"));
                    Counters::add(&c.publish_errors, msgs);
                }
            }
            if !retries.is_empty() {
                // Keep the in-flight slot through the backoff so retries cannot pile up.
                tokio::time::sleep(RETRY_BACKOFF).await;
                for mut r in retries {
                    r.attempt += 1;
                    let _ = ctx.retry.send(r);
                }
            }
            ctx.done();
        });
        Ok(())
    }
}

/// What a request's completion needs: its in-flight slot, the producer's wake-up, the
/// latency recorder, the retry queue.
struct SendCtx {
    permit: tokio::sync::OwnedSemaphorePermit,
    released: Arc<Notify>,
    publish: Recorder,
    retry: tokio::sync::mpsc::UnboundedSender<Ready>,
}

impl SendCtx {
    fn done(self) {
        drop(self.permit);
        self.released.notify_one();
    }
}

/// Print the first few errors, then stay quiet (they are counted).
fn report_error(msg: String) {
    use std::sync::atomic::AtomicU32;
    static SHOWN: AtomicU32 = AtomicU32::new(0);
    const SHOWN_MAX: u32 = 10;
    if SHOWN.fetch_add(1, Ordering::Relaxed) < SHOWN_MAX {
        eprintln!("sluice bench: {msg}");
    }
}

fn fmt_u64(buf: &mut [u8; 20], mut v: u64) -> &[u8] {
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    &buf[i..]
}

fn fnv1a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &x| {
        (h ^ u64::from(x)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn fmt_u64_writes_decimal() {
        let mut b = [0u8; 20];
        assert_eq!(super::fmt_u64(&mut b, 0), b"0");
        assert_eq!(super::fmt_u64(&mut b, 1234567), b"1234567");
        assert_eq!(super::fmt_u64(&mut b, u64::MAX), b"18446744073709551615");
    }
}

//! Topic administration and metadata for the benchmark: create the workload's topics, find
//! every partition's leader, delete the topics afterwards.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest,
    DeleteTopicsResponse, ListOffsetsRequest, ListOffsetsResponse, MetadataRequest,
    MetadataResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;

use crate::client::Connection;

/// Kafka's TOPIC_ALREADY_EXISTS error code.
const TOPIC_ALREADY_EXISTS: i16 = 36;

/// Leaders of one topic's partitions and the brokers' addresses.
#[derive(Clone, Debug)]
pub struct TopicLayout {
    pub name: String,
    /// Leader node id of partition `i` at index `i`.
    pub leaders: Vec<i32>,
    pub brokers: BTreeMap<i32, String>,
}

fn name(s: &str) -> TopicName {
    TopicName(StrBytes::from_string(s.to_string()))
}

pub async fn create_topics(
    conn: &Connection,
    names: &[String],
    partitions: u32,
    replication_factor: i16,
    configs: &BTreeMap<String, String>,
) -> Result<()> {
    let topics = names
        .iter()
        .map(|n| {
            let mut t = CreatableTopic::default();
            t.name = name(n);
            t.num_partitions = i32::try_from(partitions).unwrap_or(i32::MAX);
            t.replication_factor = replication_factor;
            t.configs = configs
                .iter()
                .map(|(k, v)| {
                    let mut c = CreatableTopicConfig::default();
                    c.name = StrBytes::from_string(k.clone());
                    c.value = Some(StrBytes::from_string(v.clone()));
                    c
                })
                .collect();
            t
        })
        .collect();
    let mut req = CreateTopicsRequest::default();
    req.topics = topics;
    req.timeout_ms = 60_000;
    let resp: CreateTopicsResponse = conn
        .call(ApiKey::CreateTopics, conn.versions.create_topics, &req)
        .await?;
    for t in resp.topics {
        if t.error_code != 0 && t.error_code != TOPIC_ALREADY_EXISTS {
            bail!(
                "cannot create topic {}: error code {} {}",
                t.name.0.as_str(),
                t.error_code,
                t.error_message.as_deref().unwrap_or("")
            );
        }
    }
    Ok(())
}

pub async fn delete_topics(conn: &Connection, names: &[String]) -> Result<()> {
    let mut req = DeleteTopicsRequest::default();
    req.topic_names = names.iter().map(|n| name(n)).collect();
    req.timeout_ms = 60_000;
    let resp: DeleteTopicsResponse = conn
        .call(ApiKey::DeleteTopics, conn.versions.delete_topics, &req)
        .await?;
    for r in resp.responses {
        if r.error_code != 0 {
            bail!(
                "cannot delete topic {:?}: error code {}",
                r.name.map(|n| n.0.to_string()),
                r.error_code
            );
        }
    }
    Ok(())
}

/// The log start offset of each of `partitions` of `topic` on the broker behind `conn` (their
/// leader): ListOffsets with the earliest timestamp (-2), as a consumer resetting to the
/// earliest offset asks. For a fetch answered OFFSET_OUT_OF_RANGE without the log start
/// (-1).
pub async fn earliest_offsets(
    conn: &Connection,
    topic: &str,
    partitions: &[i32],
) -> Result<Vec<(i32, i64)>> {
    let mut t = ListOffsetsTopic::default();
    t.name = name(topic);
    t.partitions = partitions
        .iter()
        .map(|p| {
            let mut lp = ListOffsetsPartition::default();
            lp.partition_index = *p;
            lp.current_leader_epoch = -1;
            lp.timestamp = -2;
            lp
        })
        .collect();
    let mut req = ListOffsetsRequest::default();
    req.replica_id = BrokerId(-1);
    req.topics = vec![t];
    let resp: ListOffsetsResponse = conn
        .call(ApiKey::ListOffsets, conn.versions.list_offsets, &req)
        .await?;
    let mut out = Vec::new();
    for t in resp.topics {
        for p in t.partitions {
            if p.error_code != 0 {
                bail!(
                    "cannot list the earliest offset of {topic}-{}: error code {}",
                    p.partition_index,
                    p.error_code
                );
            }
            out.push((p.partition_index, p.offset));
        }
    }
    Ok(out)
}

/// Metadata of `topics`, retried until every partition has a leader or `timeout` passes.
pub async fn wait_for_layout(
    conn: &Connection,
    topics: &[String],
    partitions: u32,
    timeout: Duration,
) -> Result<Vec<TopicLayout>> {
    let deadline = Instant::now() + timeout;
    loop {
        let mut req = MetadataRequest::default();
        req.topics = Some(
            topics
                .iter()
                .map(|t| {
                    let mut m = MetadataRequestTopic::default();
                    m.name = Some(name(t));
                    m
                })
                .collect(),
        );
        req.allow_auto_topic_creation = false;
        let resp: MetadataResponse = conn
            .call(ApiKey::Metadata, conn.versions.metadata, &req)
            .await
            .context("Metadata")?;
        let brokers: BTreeMap<i32, String> = resp
            .brokers
            .iter()
            .map(|b| (b.node_id.0, format!("{}:{}", b.host.as_str(), b.port)))
            .collect();
        let mut layouts = Vec::new();
        let mut why = String::new();
        for t in topics {
            let Some(md) = resp
                .topics
                .iter()
                .find(|m| m.name.as_ref().map(|n| n.0.as_str()) == Some(t.as_str()))
            else {
                why = format!("topic {t} not in metadata");
                break;
            };
            let mut leaders = vec![-1; partitions as usize];
            for p in &md.partitions {
                if let Some(slot) = usize::try_from(p.partition_index)
                    .ok()
                    .and_then(|i| leaders.get_mut(i))
                {
                    if p.error_code == 0 {
                        *slot = p.leader_id.0;
                    }
                }
            }
            if let Some(i) = leaders
                .iter()
                .position(|l| *l < 0 || !brokers.contains_key(l))
            {
                why = format!("partition {t}-{i} has no leader yet");
                break;
            }
            layouts.push(TopicLayout {
                name: t.clone(),
                leaders,
                brokers: brokers.clone(),
            });
        }
        if layouts.len() == topics.len() {
            return Ok(layouts);
        }
        if Instant::now() >= deadline {
            bail!("metadata not ready after {timeout:?}: {why}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Produce one small record to every partition (acks=1), retrying until each is accepted or
/// `timeout` passes, and return each partition's next offset. A broker can list a leader in
/// its metadata a moment before that leader accepts writes (Kafka under KRaft does); the
/// consumers start after these probe records.
pub async fn probe_partitions(
    conns: &BTreeMap<i32, std::sync::Arc<Connection>>,
    layout: &TopicLayout,
    timeout: Duration,
) -> Result<Vec<i64>> {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, ProduceResponse};

    let deadline = Instant::now() + timeout;
    let mut next = vec![-1i64; layout.leaders.len()];
    let mut enc = crate::batch::BatchEncoder::new();
    loop {
        let mut last_error = String::new();
        for (leader, conn) in conns {
            let mut t = TopicProduceData::default();
            t.name = name(&layout.name);
            for (p, _) in layout
                .leaders
                .iter()
                .enumerate()
                .filter(|(p, l)| *l == leader && next[*p] < 0)
            {
                let now = crate::producer::now_us();
                enc.begin((now / 1000) as i64, 64);
                enc.push((now / 1000) as i64, None, b"sluice-bench-probe", now);
                let mut d = PartitionProduceData::default();
                d.index = p as i32;
                d.records = Some(enc.finish());
                t.partition_data.push(d);
            }
            if t.partition_data.is_empty() {
                continue;
            }
            let mut req = ProduceRequest::default();
            req.acks = 1;
            req.timeout_ms = 10_000;
            req.topic_data = vec![t];
            let resp: ProduceResponse = conn
                .call(ApiKey::Produce, conn.versions.produce, &req)
                .await?;
            for p in resp
                .responses
                .iter()
                .flat_map(|t| t.partition_responses.iter())
            {
                let Some(slot) = usize::try_from(p.index).ok().and_then(|i| next.get_mut(i)) else {
                    continue;
                };
                if p.error_code == 0 {
                    *slot = p.base_offset + 1;
                } else {
                    last_error =
                        format!("partition {} answered error code {}", p.index, p.error_code);
                }
            }
        }
        if next.iter().all(|o| *o >= 0) {
            return Ok(next);
        }
        if Instant::now() >= deadline {
            bail!(
                "{} not writable after {timeout:?}: {last_error}",
                layout.name
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Filler batches of a stagger (records of the workload's size, zeros) are about this large.
const STAGGER_BATCH_BYTES: usize = 256 * 1024;
/// Produce requests of a stagger in flight per leader.
const STAGGER_LANES: usize = 4;
/// Failed produce answers a stagger tolerates per partition before it gives up.
const STAGGER_FAILURES_MAX: u32 = 10;

/// Spread the partitions' segment rolls over time: write `p * segment_bytes / n` bytes of
/// filler records to partition `p` of `n` (acks=1, one batch per partition per request), so
/// that partitions written evenly afterwards fill their segments one after another instead
/// of all at once. A new topic written evenly rolls every partition in the same second; a
/// log that has been running, its partitions' segments begun at different times, does not.
/// `next` holds each partition's next offset (from the probe) and is advanced past the
/// filler, so the consumers start after it. Returns the bytes written.
pub async fn stagger_rolls(
    conns: &BTreeMap<i32, std::sync::Arc<Connection>>,
    layout: &TopicLayout,
    segment_bytes: u64,
    message_size: usize,
    next: &mut [i64],
    timeout: Duration,
) -> Result<u64> {
    use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
    use kafka_protocol::messages::{ProduceRequest, ProduceResponse};

    let n = layout.leaders.len() as u64;
    let payload = vec![0u8; message_size];
    let mut enc = crate::batch::BatchEncoder::new();
    let now_ms = (crate::producer::now_us() / 1000) as i64;
    enc.begin(now_ms, STAGGER_BATCH_BYTES + message_size);
    while enc.len() < STAGGER_BATCH_BYTES {
        enc.push(now_ms, None, &payload, 0);
    }
    let records = i64::from(enc.count());
    let batch = enc.finish();
    let batch_len = batch.len() as u64;
    // Whole batches per partition: the filler of partition p rounded to the nearest batch.
    let wanted: Vec<u64> = (0..n)
        .map(|p| (p * segment_bytes / n + batch_len / 2) / batch_len)
        .collect();
    let deadline = tokio::time::Instant::now() + timeout;
    let mut lanes = tokio::task::JoinSet::new();
    for (leader, conn) in conns {
        let mine: Vec<usize> = (0..layout.leaders.len())
            .filter(|p| layout.leaders[*p] == *leader && wanted[*p] > 0)
            .collect();
        for lane in 0..STAGGER_LANES {
            let partitions: Vec<(usize, u64)> = mine
                .iter()
                .skip(lane)
                .step_by(STAGGER_LANES)
                .map(|p| (*p, wanted[*p]))
                .collect();
            if partitions.is_empty() {
                continue;
            }
            let (conn, batch, topic) = (conn.clone(), batch.clone(), name(&layout.name));
            lanes.spawn(async move {
                // (partition, batches still to write, failures, next offset).
                let mut left: Vec<(usize, u64, u32, i64)> =
                    partitions.into_iter().map(|(p, b)| (p, b, 0, -1)).collect();
                while left.iter().any(|l| l.1 > 0) {
                    let mut t = TopicProduceData::default();
                    t.name = topic.clone();
                    for (p, _, _, _) in left.iter().filter(|l| l.1 > 0) {
                        let mut d = PartitionProduceData::default();
                        d.index = *p as i32;
                        d.records = Some(batch.clone());
                        t.partition_data.push(d);
                    }
                    let mut req = ProduceRequest::default();
                    req.acks = 1;
                    req.timeout_ms = 30_000;
                    req.topic_data = vec![t];
                    let call = conn.call(ApiKey::Produce, conn.versions.produce, &req);
                    let resp: ProduceResponse = tokio::time::timeout_at(deadline, call)
                        .await
                        .context("staggering the segment rolls took too long")??;
                    let mut failed = false;
                    for r in resp.responses.iter().flat_map(|t| t.partition_responses.iter()) {
                        let Some(l) = left.iter_mut().find(|l| l.0 as i32 == r.index) else {
                            continue;
                        };
                        if r.error_code == 0 {
                            l.1 = l.1.saturating_sub(1);
                            l.3 = r.base_offset + records;
                        } else {
                            failed = true;
                            l.2 += 1;
                            if l.2 > STAGGER_FAILURES_MAX {
                                bail!(
                                    "staggering the segment rolls: partition {} answered error code {} {} times",
                                    r.index, r.error_code, l.2
                                );
                            }
                        }
                    }
                    if failed {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                    }
                }
                Ok::<_, anyhow::Error>(
                    left.into_iter().map(|l| (l.0, l.3)).collect::<Vec<_>>(),
                )
            });
        }
    }
    while let Some(done) = lanes.join_next().await {
        for (p, offset) in done.context("stagger task")?? {
            next[p] = next[p].max(offset);
        }
    }
    Ok(wanted.iter().sum::<u64>() * batch_len)
}

//! DeleteRecords: raise a partition's log start offset.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse, ResponseKind};
use kafka_protocol::ResponseError;

use sluice_store::TopicPartition;

use crate::errors::read_error_code;
use crate::Broker;

/// "Up to the high watermark".
const HIGH_WATERMARK: i64 = -1;

/// Longest wait for the read replicas of a partition to learn its new log start (at most the
/// request's timeout).
const READERS_WAIT_MAX: Duration = Duration::from_secs(30);

/// DeleteRecords, answered once every read replica that reads a partition knows its new log
/// start (`readers.rs`: the owner wakes their polls and waits for their next ones), as Kafka
/// answers once every in-sync replica's log start moved; a partition some reader has not
/// caught up with within the request's timeout is answered REQUEST_TIMED_OUT, as by Kafka
/// (its records are gone on the owner all the same).
pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: DeleteRecordsRequest,
    _version: i16,
) -> crate::Reply {
    let wait = Duration::from_millis(req.timeout_ms.max(0) as u64).min(READERS_WAIT_MAX);
    let mut response = delete(broker, req);
    let moved: Vec<(usize, usize, TopicPartition, i64)> = response
        .topics
        .iter()
        .enumerate()
        .flat_map(|(i, t)| {
            t.partitions
                .iter()
                .enumerate()
                .filter(|(_, p)| p.error_code == 0)
                .map(move |(j, p)| {
                    let tp = TopicPartition {
                        topic: t.name.0.to_string(),
                        partition: p.partition_index,
                    };
                    (i, j, tp, p.low_watermark)
                })
        })
        .collect();
    // The readers' polls are woken, and each partition is waited for by its topic's id
    // (another incarnation's readers are not this one's).
    let mut waits = Vec::with_capacity(moved.len());
    for (i, j, tp, low) in moved {
        let Some(state) = broker.registry.get(&tp.topic) else {
            continue;
        };
        if let Some(log) = state.log(tp.partition) {
            broker.fetch_waiters.wake(log);
        }
        waits.push((i, j, state.meta.id, tp.partition, low));
    }
    let broker = broker.clone();
    Box::pin(async move {
        let deadline = tokio::time::Instant::now() + wait;
        let behind = |b: &Broker| {
            waits
                .iter()
                .filter(|(_, _, id, p, low)| b.readers.readers_behind(*id, *p, *low))
                .map(|(i, j, _, _, _)| (*i, *j))
                .collect::<Vec<_>>()
        };
        let mut late = behind(&broker);
        while !late.is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
            late = behind(&broker);
        }
        for (i, j) in late {
            response.topics[i].partitions[j].error_code = ResponseError::RequestTimedOut.code();
        }
        Some(ResponseKind::DeleteRecords(response))
    })
}

/// Raise the log start of each partition named that this broker owns.
fn delete(broker: &Broker, req: DeleteRecordsRequest) -> DeleteRecordsResponse {
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let state = broker.registry.get(t.name.0.as_str());
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let base = DeleteRecordsPartitionResult::default()
                        .with_partition_index(p.partition_index)
                        .with_low_watermark(-1);
                    let Some(log) = state.as_ref().and_then(|s| s.log(p.partition_index)) else {
                        return base.with_error_code(crate::registry::missing_partition_code(
                            state.as_deref(),
                            p.partition_index,
                        ));
                    };
                    let offset = if p.offset == HIGH_WATERMARK {
                        log.high_watermark()
                    } else {
                        p.offset
                    };
                    if offset < 0 || offset > log.high_watermark() {
                        return base.with_error_code(ResponseError::OffsetOutOfRange.code());
                    }
                    match log.delete_records_before(offset) {
                        Ok(low) => base.with_low_watermark(low),
                        Err(e) => base.with_error_code(read_error_code(&e)),
                    }
                })
                .collect();
            DeleteRecordsTopicResult::default()
                .with_name(t.name)
                .with_partitions(partitions)
        })
        .collect();
    DeleteRecordsResponse::default().with_topics(topics)
}

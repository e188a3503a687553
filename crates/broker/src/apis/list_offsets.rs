//! ListOffsets: earliest, latest, max timestamp, and by timestamp through the time index. A
//! special (negative) timestamp older than the request's version is refused with
//! UNSUPPORTED_VERSION, as Kafka refuses it.

use std::sync::Arc;

use kafka_protocol::messages::list_offsets_response::{
    ListOffsetsPartitionResponse, ListOffsetsTopicResponse,
};
use kafka_protocol::messages::{ListOffsetsRequest, ListOffsetsResponse, ResponseKind};
use kafka_protocol::ResponseError;

use crate::Broker;

const LATEST: i64 = -1;
const EARLIEST: i64 = -2;
const MAX_TIMESTAMP: i64 = -3;
const EARLIEST_LOCAL: i64 = -4;
const LATEST_TIERED: i64 = -5;
const EARLIEST_PENDING_UPLOAD: i64 = -6;

/// The first version that may ask for special timestamp `ts`; None for one Kafka does not
/// know.
fn first_version_of(ts: i64) -> Option<i16> {
    match ts {
        LATEST | EARLIEST => Some(1),
        MAX_TIMESTAMP => Some(7),
        EARLIEST_LOCAL => Some(8),
        LATEST_TIERED => Some(9),
        EARLIEST_PENDING_UPLOAD => Some(11),
        _ => None,
    }
}

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: ListOffsetsRequest,
    version: i16,
) -> Option<ResponseKind> {
    let read_committed = req.isolation_level == 1;
    let topics = req
        .topics
        .into_iter()
        .map(|t| {
            let state = broker.registry.get(t.name.0.as_str());
            let partitions = t
                .partitions
                .into_iter()
                .map(|p| {
                    let base = ListOffsetsPartitionResponse::default()
                        .with_partition_index(p.partition_index)
                        .with_timestamp(-1)
                        .with_offset(-1)
                        .with_leader_epoch(-1);
                    if p.timestamp < 0
                        && first_version_of(p.timestamp).is_none_or(|first| version < first)
                    {
                        return base.with_error_code(ResponseError::UnsupportedVersion.code());
                    }
                    let Some(log) = state.as_ref().and_then(|s| s.log(p.partition_index)) else {
                        return base.with_error_code(crate::registry::missing_partition_code(
                            state.as_deref(),
                            p.partition_index,
                        ));
                    };
                    let epoch = log.leader_epoch();
                    if let Some(code) =
                        crate::registry::leader_epoch_code(p.current_leader_epoch, epoch)
                    {
                        return base.with_error_code(code);
                    }
                    let found = match p.timestamp {
                        // READ_COMMITTED: the last stable offset (nothing of an open
                        // transaction is below it), as Kafka answers.
                        LATEST if read_committed => Ok(Some((-1, log.last_stable_offset()))),
                        LATEST => Ok(Some((-1, log.high_watermark()))),
                        EARLIEST | EARLIEST_LOCAL => Ok(Some((-1, log.log_start_offset()))),
                        MAX_TIMESTAMP => Ok(log.max_timestamp()),
                        // No tiered storage: nothing is tiered or pending upload.
                        LATEST_TIERED | EARLIEST_PENDING_UPLOAD => Ok(Some((-1, -1))),
                        ts => log.offset_for_timestamp(ts).map(|r| r.map(|(offset, ts)| (ts, offset))),
                    };
                    // As Kafka: a lookup finds only what a consumer could fetch (in a
                    // cluster, what a confirmed flush round published).
                    let bounded = p.timestamp >= 0 || p.timestamp == MAX_TIMESTAMP;
                    let hw = if read_committed {
                        log.last_stable_offset()
                    } else {
                        log.high_watermark()
                    };
                    let found =
                        found.map(|f| f.filter(|(_, offset)| !bounded || *offset < hw));
                    match found {
                        Ok(Some((timestamp, offset))) => base
                            .with_timestamp(timestamp)
                            .with_offset(offset)
                            .with_leader_epoch(if offset >= 0 { epoch } else { -1 }),
                        Ok(None) => base,
                        Err(e) => {
                            tracing::error!(tp = ?log.topic_partition(), "ListOffsets read failed: {e}");
                            base.with_error_code(ResponseError::KafkaStorageError.code())
                        }
                    }
                })
                .collect();
            ListOffsetsTopicResponse::default().with_name(t.name).with_partitions(partitions)
        })
        .collect();
    Some(ResponseKind::ListOffsets(
        ListOffsetsResponse::default().with_topics(topics),
    ))
}

//! DeleteRecords: raise a partition's log start offset.

use std::sync::Arc;

use kafka_protocol::messages::delete_records_response::{
    DeleteRecordsPartitionResult, DeleteRecordsTopicResult,
};
use kafka_protocol::messages::{DeleteRecordsRequest, DeleteRecordsResponse, ResponseKind};
use kafka_protocol::ResponseError;

use crate::errors::read_error_code;
use crate::Broker;

/// "Up to the high watermark".
const HIGH_WATERMARK: i64 = -1;

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: DeleteRecordsRequest,
    _version: i16,
) -> Option<ResponseKind> {
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
    Some(ResponseKind::DeleteRecords(
        DeleteRecordsResponse::default().with_topics(topics),
    ))
}

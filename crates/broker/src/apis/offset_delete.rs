//! OffsetDelete (v0): remove committed offsets of partitions the group does not subscribe to.

use std::sync::Arc;

use kafka_protocol::messages::offset_delete_response::{
    OffsetDeleteResponsePartition, OffsetDeleteResponseTopic,
};
use kafka_protocol::messages::{OffsetDeleteRequest, OffsetDeleteResponse, ResponseKind};
use kafka_protocol::ResponseError;

use crate::errors::{coordinator_write_code, group_error_code};
use crate::{Broker, Reply};

pub(crate) fn handle(broker: &Arc<Broker>, req: OffsetDeleteRequest, _version: i16) -> Reply {
    if !broker.ensure_offsets_topic() {
        return crate::ready(Some(ResponseKind::OffsetDelete(
            OffsetDeleteResponse::default()
                .with_error_code(ResponseError::CoordinatorNotAvailable.code()),
        )));
    }
    let wanted: Vec<(String, i32)> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.name.0.to_string(), p.partition_index))
        })
        .collect();
    let group = req.group_id.0.to_string();
    let (result, written) = broker
        .groups
        .run(|c| match c.delete_offsets(&group, &wanted) {
            Ok((r, eff)) => (Ok(r), eff),
            Err(e) => (Err(e), Default::default()),
        });
    let results = match result {
        Err(e) => {
            return crate::ready(Some(ResponseKind::OffsetDelete(
                OffsetDeleteResponse::default().with_error_code(group_error_code(&e)),
            )))
        }
        Ok(r) => r,
    };
    let flushed = broker.flush_logs(written);
    Box::pin(async move {
        let failed = flushed.await.is_err();
        let mut results = results.into_iter();
        let topics = req
            .topics
            .iter()
            .map(|t| {
                OffsetDeleteResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                let code = match results.next() {
                                    Some(Err(e)) => group_error_code(&e),
                                    _ if failed => coordinator_write_code(
                                        ResponseError::KafkaStorageError.code(),
                                    ),
                                    _ => 0,
                                };
                                OffsetDeleteResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect();
        Some(ResponseKind::OffsetDelete(
            OffsetDeleteResponse::default().with_topics(topics),
        ))
    })
}

//! WriteTxnMarkers (v1): a transaction coordinator (another broker of the cluster, or the
//! admin client's abortTransaction, as `kafka-transactions abort` uses it) asks this broker
//! to write COMMIT/ABORT markers to partitions it owns. Each partition is answered once its
//! marker is as durable as an acks=all append.

use std::sync::Arc;

use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{ResponseKind, WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use kafka_protocol::ResponseError;

use crate::markers::Markers;
use crate::{Broker, Reply};

pub(crate) fn handle(broker: &Arc<Broker>, req: WriteTxnMarkersRequest, _version: i16) -> Reply {
    // Append every marker now (in request order), then wait for their durability.
    let mut results = Vec::new();
    for marker in &req.markers {
        let m = Markers {
            producer_id: marker.producer_id.0,
            producer_epoch: marker.producer_epoch,
            coordinator_epoch: marker.coordinator_epoch,
            commit: marker.transaction_result,
            partitions: Vec::new(),
        };
        let mut topics = Vec::new();
        for t in &marker.topics {
            let name = t.name.0.to_string();
            let mut partitions = Vec::new();
            for &p in &t.partition_indexes {
                partitions.push((p, broker.write_marker(&name, p, &m)));
            }
            topics.push((t.name.clone(), partitions));
        }
        results.push((marker.producer_id, topics));
    }
    Box::pin(async move {
        let mut markers = Vec::new();
        for (producer_id, topics) in results {
            let mut out_topics = Vec::new();
            for (name, partitions) in topics {
                let mut out = Vec::new();
                for (p, written) in partitions {
                    let code = match written {
                        Ok(f) => match f.await {
                            Ok(()) => 0,
                            Err(_) => ResponseError::KafkaStorageError.code(),
                        },
                        Err(code) => code,
                    };
                    out.push(
                        WritableTxnMarkerPartitionResult::default()
                            .with_partition_index(p)
                            .with_error_code(code),
                    );
                }
                out_topics.push(
                    WritableTxnMarkerTopicResult::default()
                        .with_name(name)
                        .with_partitions(out),
                );
            }
            markers.push(
                WritableTxnMarkerResult::default()
                    .with_producer_id(producer_id)
                    .with_topics(out_topics),
            );
        }
        Some(ResponseKind::WriteTxnMarkers(
            WriteTxnMarkersResponse::default().with_markers(markers),
        ))
    })
}

//! TxnOffsetCommit (v0-v5): a transactional producer commits its consumer group's offsets as
//! part of its transaction (`sendOffsetsToTransaction`). The group coordinator checks with
//! the transaction coordinator that the group's `__consumer_offsets` partition is in the
//! transaction (transaction version 1, which added it with AddOffsetsToTxn), or adds it
//! (v5: transaction version 2), then appends the offsets as a transactional batch of the
//! producer. They become the group's committed offsets when the transaction's COMMIT marker
//! reaches that partition.

use std::sync::Arc;

use kafka_protocol::messages::txn_offset_commit_response::{
    TxnOffsetCommitResponsePartition, TxnOffsetCommitResponseTopic,
};
use kafka_protocol::messages::{ResponseKind, TxnOffsetCommitRequest, TxnOffsetCommitResponse};
use kafka_protocol::ResponseError;

use super::offset_commit::{commit_list, take_group_results};
use crate::errors::coordinator_write_code;
use crate::{Broker, Reply, OFFSETS_TOPIC};

fn answer(req: &TxnOffsetCommitRequest, codes: &[Vec<i16>]) -> Option<ResponseKind> {
    let topics = req
        .topics
        .iter()
        .zip(codes)
        .map(|(t, row)| {
            TxnOffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .zip(row)
                        .map(|(p, code)| {
                            TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(*code)
                        })
                        .collect(),
                )
        })
        .collect();
    Some(ResponseKind::TxnOffsetCommit(
        TxnOffsetCommitResponse::default().with_topics(topics),
    ))
}

fn all(req: &TxnOffsetCommitRequest, code: i16) -> Vec<Vec<i16>> {
    req.topics
        .iter()
        .map(|t| vec![code; t.partitions.len()])
        .collect()
}

pub(crate) fn handle(broker: &Arc<Broker>, req: TxnOffsetCommitRequest, version: i16) -> Reply {
    if !broker.ensure_offsets_topic() {
        let codes = all(&req, ResponseError::CoordinatorNotAvailable.code());
        return crate::ready(answer(&req, &codes));
    }
    let group = req.group_id.0.to_string();
    let partition = broker.groups.read(|c| c.partition_for(&group));
    let log = broker.groups.log_of(&group);
    let Some(log) = log.filter(|_| broker.groups.read(|c| c.is_loaded(partition))) else {
        let codes = all(&req, ResponseError::NotCoordinator.code());
        return crate::ready(answer(&req, &codes));
    };
    // The offsets are appended with the verification guard taken before the transaction
    // coordinator was asked (KIP-890), as a produce's batches are.
    let check = broker.txn_check_partitions_retrying(
        req.transactional_id.0.as_str(),
        req.producer_id.0,
        req.producer_epoch,
        vec![((OFFSETS_TOPIC.to_string(), partition), log, None)],
        version >= 5,
    );
    let broker = broker.clone();
    Box::pin(async move {
        let (checked, mut guards) = check.await;
        let refused = match checked {
            Err(code) => Some(code),
            Ok(rs) => rs.into_iter().map(|(_, c)| c).find(|c| *c != 0),
        };
        let Some((_, log, guard)) = guards.pop() else {
            return answer(&req, &all(&req, ResponseError::NotCoordinator.code()));
        };
        if let Some(code) = refused {
            // As Kafka: a fenced producer of an older version gets INVALID_PRODUCER_EPOCH.
            let code = if version < 2 && code == ResponseError::ProducerFenced.code() {
                ResponseError::InvalidProducerEpoch.code()
            } else {
                code
            };
            return answer(&req, &all(&req, code));
        }
        let (commits, mut codes) = commit_list(
            &broker,
            req.topics
                .iter()
                .map(|t| (t.name.0.as_str(), t.partitions.as_slice())),
        );
        let written = broker.groups.commit_txn_offsets(
            &group,
            req.producer_id.0,
            req.producer_epoch,
            req.member_id.as_str(),
            req.group_instance_id.as_ref().map(|s| s.as_str()),
            req.generation_id,
            &commits,
            (&log, guard),
        );
        let (results, log) = match written {
            Err(code) => return answer(&req, &all(&req, code)),
            Ok(w) => w,
        };
        take_group_results(&mut codes, results);
        if broker.flush_logs(vec![log]).await.is_err() {
            for code in codes.iter_mut().flatten() {
                if *code == 0 {
                    *code = coordinator_write_code(ResponseError::KafkaStorageError.code());
                }
            }
        }
        answer(&req, &codes)
    })
}

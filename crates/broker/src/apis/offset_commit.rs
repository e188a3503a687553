//! OffsetCommit (v2-v9): validated by the group, appended to `__consumer_offsets`, and
//! answered only after the group-commit fsync that covers the append (and, in a cluster, the
//! confirmation of ownership). Until then the offsets are pending: OffsetFetch does not
//! answer them, and if the append is not confirmed they are dropped.

use std::sync::Arc;

use kafka_protocol::messages::offset_commit_request::OffsetCommitRequestPartition;
use kafka_protocol::messages::offset_commit_response::{
    OffsetCommitResponsePartition, OffsetCommitResponseTopic,
};
use kafka_protocol::messages::txn_offset_commit_request::TxnOffsetCommitRequestPartition;
use kafka_protocol::messages::{OffsetCommitRequest, OffsetCommitResponse, ResponseKind};
use kafka_protocol::ResponseError;
use sluice_group::{GroupError, OffsetCommit, PendingOffsets};
use sluice_store::Log;

use crate::errors::{coordinator_write_code, group_error_code};
use crate::{now_ms, Broker, Reply};

fn all_partitions(req: &OffsetCommitRequest, code: i16) -> OffsetCommitResponse {
    OffsetCommitResponse::default().with_topics(
        req.topics
            .iter()
            .map(|t| {
                OffsetCommitResponseTopic::default()
                    .with_name(t.name.clone())
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                OffsetCommitResponsePartition::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(code)
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

/// A partition of an offset commit request: OffsetCommit's and TxnOffsetCommit's carry the
/// same fields under the same names.
pub(super) trait RequestedOffset {
    /// The partition's index.
    fn index(&self) -> i32;
    /// The commit it asks for, of a partition of `topic`.
    fn commit(&self, topic: &str) -> OffsetCommit;
}

impl RequestedOffset for OffsetCommitRequestPartition {
    fn index(&self) -> i32 {
        self.partition_index
    }

    fn commit(&self, topic: &str) -> OffsetCommit {
        OffsetCommit {
            topic: topic.to_string(),
            partition: self.partition_index,
            offset: self.committed_offset,
            leader_epoch: self.committed_leader_epoch,
            metadata: self.committed_metadata.as_ref().map(|s| s.to_string()),
        }
    }
}

impl RequestedOffset for TxnOffsetCommitRequestPartition {
    fn index(&self) -> i32 {
        self.partition_index
    }

    fn commit(&self, topic: &str) -> OffsetCommit {
        OffsetCommit {
            topic: topic.to_string(),
            partition: self.partition_index,
            offset: self.committed_offset,
            leader_epoch: self.committed_leader_epoch,
            metadata: self.committed_metadata.as_ref().map(|s| s.to_string()),
        }
    }
}

/// The commits of a request (OffsetCommit or TxnOffsetCommit) that go to the group, in
/// request order, and per topic the code of each of its partitions: a partition that does
/// not exist is refused UNKNOWN_TOPIC_OR_PARTITION, one by one (Kafka's answer); the others
/// are 0 until the group answers ([`take_group_results`]). In a cluster the partition may be
/// owned by another broker: it need only exist.
pub(super) fn commit_list<'a, P: RequestedOffset + 'a>(
    broker: &Broker,
    topics: impl IntoIterator<Item = (&'a str, &'a [P])>,
) -> (Vec<OffsetCommit>, Vec<Vec<i16>>) {
    let mut commits = Vec::new();
    let mut codes: Vec<Vec<i16>> = Vec::new();
    for (name, partitions) in topics {
        let state = broker.registry.get(name);
        let mut row = Vec::new();
        for p in partitions {
            if !state.as_ref().is_some_and(|s| s.has_partition(p.index())) {
                row.push(ResponseError::UnknownTopicOrPartition.code());
                continue;
            }
            row.push(0);
            commits.push(p.commit(name));
        }
        codes.push(row);
    }
    (commits, codes)
}

/// The group's answers, one per commit of [`commit_list`] in order, taken into the codes of
/// the partitions that went to it (those still 0): a commit the group refused answers its
/// group error code.
pub(super) fn take_group_results(
    codes: &mut [Vec<i16>],
    results: impl IntoIterator<Item = Result<(), GroupError>>,
) {
    let mut results = results.into_iter();
    for row in codes.iter_mut() {
        for code in row.iter_mut() {
            if *code == 0 {
                *code = results
                    .next()
                    .and_then(|r| r.err())
                    .as_ref()
                    .map_or(0, group_error_code);
            }
        }
    }
}

/// What the group made of a request's commits: its answer per commit, the offsets pending
/// until the append is on storage, and the logs the append wrote.
type Committed = (Vec<Result<(), GroupError>>, PendingOffsets, Vec<Arc<Log>>);

/// Hand the commits to the group, which checks the member and its generation or member
/// epoch ([`Committed`]); or the group's refusal of the whole request.
fn commit_to_group(
    broker: &Broker,
    req: &OffsetCommitRequest,
    commits: &[OffsetCommit],
) -> Result<Committed, GroupError> {
    let now = now_ms();
    let group = req.group_id.0.to_string();
    let member = req.member_id.to_string();
    let instance = req.group_instance_id.as_ref().map(|s| s.to_string());
    let generation = req.generation_id_or_member_epoch;
    let (result, written) = broker.groups.run(|c| {
        match c.commit_offsets(
            &group,
            &member,
            instance.as_deref(),
            generation,
            commits,
            now,
        ) {
            Ok((r, eff, pending)) => (Ok((r, pending)), eff),
            Err(e) => (Err(e), Default::default()),
        }
    });
    result.map(|(r, pending)| (r, pending, written))
}

/// The answer once the flush that covers the commits' append is settled: a partition the
/// group accepted is answered the coordinator's code for KAFKA_STORAGE_ERROR when the append
/// did not reach storage (or was not confirmed), as Kafka's coordinator answers a failed
/// write.
fn answer(req: &OffsetCommitRequest, codes: Vec<Vec<i16>>, storage_failed: bool) -> ResponseKind {
    let topics = req
        .topics
        .iter()
        .zip(codes)
        .map(|(t, row)| {
            OffsetCommitResponseTopic::default()
                .with_name(t.name.clone())
                .with_partitions(
                    t.partitions
                        .iter()
                        .zip(row)
                        .map(|(p, code)| {
                            let code = if storage_failed && code == 0 {
                                coordinator_write_code(ResponseError::KafkaStorageError.code())
                            } else {
                                code
                            };
                            OffsetCommitResponsePartition::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect();
    ResponseKind::OffsetCommit(OffsetCommitResponse::default().with_topics(topics))
}

/// OffsetCommit: refused as a whole COORDINATOR_NOT_AVAILABLE without an offsets topic, or
/// with the group's refusal (an unknown member, an old generation); else each partition
/// answered ([`commit_list`], [`take_group_results`]) once the append is on storage
/// ([`answer`]).
pub(crate) fn handle(broker: &Arc<Broker>, req: OffsetCommitRequest, _version: i16) -> Reply {
    if !broker.ensure_offsets_topic() {
        let code = ResponseError::CoordinatorNotAvailable.code();
        return crate::ready(Some(ResponseKind::OffsetCommit(all_partitions(&req, code))));
    }
    let (commits, mut codes) = commit_list(
        broker,
        req.topics
            .iter()
            .map(|t| (t.name.0.as_str(), t.partitions.as_slice())),
    );
    let (results, pending, written) = match commit_to_group(broker, &req, &commits) {
        Err(e) => {
            let code = group_error_code(&e);
            return crate::ready(Some(ResponseKind::OffsetCommit(all_partitions(&req, code))));
        }
        Ok(r) => r,
    };
    take_group_results(&mut codes, results);
    let flushed = broker.settle_offset_commit(pending, written);
    Box::pin(async move {
        let storage_failed = flushed.await.is_err();
        Some(answer(&req, codes, storage_failed))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{runtime, single_broker};

    fn partition(index: i32, offset: i64) -> OffsetCommitRequestPartition {
        OffsetCommitRequestPartition::default()
            .with_partition_index(index)
            .with_committed_offset(offset)
    }

    /// Only partitions that exist go to the group, in request order; the others are refused
    /// one by one, and a topic that does not exist refuses each of its partitions.
    #[test]
    fn commits_of_partitions_that_exist_go_to_the_group_the_others_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let rt = runtime();
        let _in_runtime = rt.enter();
        let broker = single_broker(dir.path());
        broker
            .create_topic("t", 2, std::collections::BTreeMap::new())
            .unwrap();
        let t = vec![partition(1, 10), partition(2, 20), partition(0, 30)];
        let missing = vec![partition(0, 40)];
        let (commits, codes) = commit_list(
            &broker,
            [("t", t.as_slice()), ("missing", missing.as_slice())],
        );
        let unknown = ResponseError::UnknownTopicOrPartition.code();
        assert_eq!(codes, vec![vec![0, unknown, 0], vec![unknown]]);
        let committed: Vec<(&str, i32, i64)> = commits
            .iter()
            .map(|c| (c.topic.as_str(), c.partition, c.offset))
            .collect();
        assert_eq!(committed, vec![("t", 1, 10), ("t", 0, 30)]);
    }

    /// The group's answers fill the partitions that went to it, in order; the refused ones
    /// keep their codes.
    #[test]
    fn group_results_fill_the_partitions_that_went_to_the_group() {
        let unknown = ResponseError::UnknownTopicOrPartition.code();
        let mut codes = vec![vec![0, unknown, 0], vec![unknown], vec![0]];
        take_group_results(
            &mut codes,
            vec![Ok(()), Err(GroupError::IllegalGeneration), Ok(())],
        );
        let illegal = ResponseError::IllegalGeneration.code();
        assert_eq!(
            codes,
            vec![vec![0, unknown, illegal], vec![unknown], vec![0]]
        );
    }
}

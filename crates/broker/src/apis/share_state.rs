//! ReadShareGroupState (v0) and WriteShareGroupState (v0-v1): a share partition's durable
//! state read and written at the broker that owns its `__share_group_state` partition, by
//! the broker that owns the topic partition (Kafka's share coordinator calls, here between
//! Sluice brokers). Both carry the reader's or writer's leader epoch of the topic partition:
//! one older than the last seen is refused with FENCED_LEADER_EPOCH, so a broker that lost
//! the partition writes no state over its new owner's. A write is answered once fsynced.
//!
//! ReadShareGroupStateSummary (v0-1) reads the start offset, leader epoch and the count of
//! records done with, fencing nobody (DescribeShareGroupOffsets at the group's coordinator).
//!
//! A share partition with no state stored is read as start offset -1 with the state epoch
//! a new state starts at, and no error (Kafka's coordinator would have initialized it first;
//! Sluice's owner does that with its first write).
//!
//! InitializeShareGroupState (v0) and DeleteShareGroupState (v0): the group's coordinator
//! resets a share partition's state to a start offset (AlterShareGroupOffsets) or deletes it
//! (DeleteShareGroupOffsets, DeleteGroups). Between Sluice brokers the request's state epoch
//! is not used: the state's owner moves it past the stored one, so that an owner of the
//! topic partition that loaded the state before writes nothing over the reset.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::delete_share_group_state_request::{
    DeleteStateData, PartitionData as DeletePartition,
};
use kafka_protocol::messages::delete_share_group_state_response::{
    DeleteStateResult, PartitionResult as DeleteResult,
};
use kafka_protocol::messages::initialize_share_group_state_request::{
    InitializeStateData, PartitionData as InitPartition,
};
use kafka_protocol::messages::initialize_share_group_state_response::{
    InitializeStateResult, PartitionResult as InitResult,
};
use kafka_protocol::messages::read_share_group_state_request::{
    PartitionData as ReadPartition, ReadStateData,
};
use kafka_protocol::messages::read_share_group_state_response::{
    PartitionResult as ReadResult, ReadStateResult, StateBatch as ReadBatch,
};
use kafka_protocol::messages::write_share_group_state_request::{
    PartitionData as WritePartition, StateBatch as WriteBatch, WriteStateData,
};
use kafka_protocol::messages::write_share_group_state_response::{
    PartitionResult as WriteResult, WriteStateResult,
};
use kafka_protocol::messages::{
    ApiKey, ReadShareGroupStateRequest, ReadShareGroupStateResponse, RequestKind, ResponseKind,
    WriteShareGroupStateRequest, WriteShareGroupStateResponse,
};
use kafka_protocol::messages::{
    DeleteShareGroupStateRequest, DeleteShareGroupStateResponse, InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
};
use kafka_protocol::ResponseError;
use sluice_share::records::ShareKey;
use sluice_share::{Snapshot, StateBatch};
use uuid::Uuid;

use crate::shares::{key_of, StateError, Summary};
use crate::wire::str_bytes;
use crate::{Broker, Reply};
use kafka_protocol::messages::read_share_group_state_summary_request::{
    PartitionData as SummaryPartition, ReadStateSummaryData,
};
use kafka_protocol::messages::read_share_group_state_summary_response::{
    PartitionResult as SummaryResult, ReadStateSummaryResult,
};
use kafka_protocol::messages::{
    ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse,
};

/// The state epoch that says "nothing stored".
const NO_STATE: i32 = -1;

fn code_of(e: &StateError) -> i16 {
    match e {
        StateError::NotLoaded(_) => ResponseError::NotCoordinator.code(),
        StateError::Fenced(_) => ResponseError::FencedLeaderEpoch.code(),
        StateError::Storage(_) => ResponseError::KafkaStorageError.code(),
    }
}

fn error_of(code: i16, message: Option<String>) -> StateError {
    let m = message.unwrap_or_else(|| format!("error code {code}"));
    if code == ResponseError::FencedLeaderEpoch.code()
        || code == ResponseError::FencedStateEpoch.code()
    {
        StateError::Fenced(m)
    } else if code == ResponseError::NotCoordinator.code()
        || code == ResponseError::CoordinatorNotAvailable.code()
    {
        StateError::NotLoaded(m)
    } else {
        StateError::Storage(m)
    }
}

/// The partition of a state answer (`$resp.results[*].partitions[*]`) that is `$key`'s,
/// or the error it carries (returned from the calling function).
macro_rules! partition_of {
    ($resp:expr, $key:expr, $api:literal) => {{
        let Some(p) = $resp
            .results
            .iter()
            .flat_map(|t| t.partitions.iter())
            .find(|p| p.partition == $key.partition)
        else {
            return Err(StateError::Storage(
                concat!($api, " answered no partition").into(),
            ));
        };
        if p.error_code != 0 {
            return Err(error_of(
                p.error_code,
                p.error_message.as_ref().map(|m| m.to_string()),
            ));
        }
        p
    }};
}

// ---- at the state partition's owner ----

pub(crate) fn read(broker: &Arc<Broker>, req: ReadShareGroupStateRequest) -> Reply {
    let broker = broker.clone();
    Box::pin(async move {
        let group = req.group_id.to_string();
        let mut results = Vec::new();
        for t in &req.topics {
            let mut partitions = Vec::new();
            for p in &t.partitions {
                let key = key_of(&group, t.topic_id, p.partition);
                let base = ReadResult::default().with_partition(p.partition);
                let sp = broker.share_state_partition(&key);
                let answer = match broker.shares.read_local(&key, sp, p.leader_epoch) {
                    Err(e) => Err(e),
                    Ok((found, written)) => match written {
                        None => Ok(found),
                        Some(log) => broker
                            .flush_logs(vec![log])
                            .await
                            .map(|()| found)
                            .map_err(|e| StateError::Storage(e.to_string())),
                    },
                };
                partitions.push(match answer {
                    Err(e) => base
                        .with_error_code(code_of(&e))
                        .with_error_message(Some(str_bytes(e.to_string())))
                        .with_state_epoch(NO_STATE)
                        .with_start_offset(-1),
                    Ok((None, next_epoch)) => {
                        base.with_state_epoch(next_epoch).with_start_offset(-1)
                    }
                    Ok((Some(snapshot), state_epoch)) => base
                        .with_state_epoch(state_epoch)
                        .with_start_offset(snapshot.start)
                        .with_state_batches(
                            snapshot
                                .batches
                                .iter()
                                .map(|b| {
                                    ReadBatch::default()
                                        .with_first_offset(b.first)
                                        .with_last_offset(b.last)
                                        .with_delivery_state(b.state as i8)
                                        .with_delivery_count(b.delivery_count as i16)
                                })
                                .collect(),
                        ),
                });
            }
            results.push(
                ReadStateResult::default()
                    .with_topic_id(t.topic_id)
                    .with_partitions(partitions),
            );
        }
        Some(ResponseKind::ReadShareGroupState(
            ReadShareGroupStateResponse::default().with_results(results),
        ))
    })
}

pub(crate) fn write(broker: &Arc<Broker>, req: WriteShareGroupStateRequest) -> Reply {
    let broker = broker.clone();
    Box::pin(async move {
        let group = req.group_id.to_string();
        let mut results = Vec::new();
        for t in &req.topics {
            let mut partitions = Vec::new();
            for p in &t.partitions {
                let key = key_of(&group, t.topic_id, p.partition);
                let snapshot = Snapshot {
                    start: p.start_offset,
                    batches: p
                        .state_batches
                        .iter()
                        .map(|b| StateBatch {
                            first: b.first_offset,
                            last: b.last_offset,
                            state: b.delivery_state as u8,
                            delivery_count: b.delivery_count.max(0) as u16,
                        })
                        .collect(),
                };
                let sp = broker.share_state_partition(&key);
                let written = broker.shares.write_local(
                    &key,
                    sp,
                    &snapshot,
                    p.state_epoch,
                    p.leader_epoch,
                    || true,
                );
                let outcome = match written {
                    Err(e) => Err(e),
                    Ok(log) => broker
                        .flush_logs(vec![log])
                        .await
                        .map_err(|e| StateError::Storage(e.to_string())),
                };
                partitions.push(with_outcome(
                    WriteResult::default().with_partition(p.partition),
                    outcome,
                ));
            }
            results.push(
                WriteStateResult::default()
                    .with_topic_id(t.topic_id)
                    .with_partitions(partitions),
            );
        }
        Some(ResponseKind::WriteShareGroupState(
            WriteShareGroupStateResponse::default().with_results(results),
        ))
    })
}

pub(crate) fn summary(broker: &Arc<Broker>, req: ReadShareGroupStateSummaryRequest) -> Reply {
    let group = req.group_id.to_string();
    let results = req
        .topics
        .iter()
        .map(|t| {
            let partitions = t
                .partitions
                .iter()
                .map(|p| {
                    let key = key_of(&group, t.topic_id, p.partition);
                    let sp = broker.share_state_partition(&key);
                    let base = SummaryResult::default().with_partition(p.partition);
                    match broker.shares.summary_local(&key, sp) {
                        Err(e) => base
                            .with_error_code(code_of(&e))
                            .with_error_message(Some(str_bytes(e.to_string())))
                            .with_state_epoch(NO_STATE)
                            .with_start_offset(-1),
                        Ok(None) => base.with_state_epoch(NO_STATE).with_start_offset(-1),
                        Ok(Some(s)) => base
                            .with_state_epoch(0)
                            .with_leader_epoch(s.leader_epoch)
                            .with_start_offset(s.start)
                            .with_delivery_complete_count(
                                i32::try_from(s.complete).unwrap_or(i32::MAX),
                            ),
                    }
                })
                .collect();
            ReadStateSummaryResult::default()
                .with_topic_id(t.topic_id)
                .with_partitions(partitions)
        })
        .collect();
    crate::ready(Some(ResponseKind::ReadShareGroupStateSummary(
        ReadShareGroupStateSummaryResponse::default().with_results(results),
    )))
}

// ---- at the topic partition's owner ----

/// `key`'s state summary from broker `node`, which owns its `__share_group_state` partition.
pub(crate) async fn summary_remote(
    broker: &Broker,
    node: i32,
    key: &ShareKey,
) -> Result<Option<Summary>, StateError> {
    let req = ReadShareGroupStateSummaryRequest::default()
        .with_group_id(str_bytes(key.group_id.clone()))
        .with_topics(vec![ReadStateSummaryData::default()
            .with_topic_id(Uuid::from_bytes(key.topic_id))
            .with_partitions(vec![SummaryPartition::default()
                .with_partition(key.partition)
                .with_leader_epoch(-1)])]);
    let answer = broker
        .call_peer(
            node,
            ApiKey::ReadShareGroupStateSummary,
            1,
            RequestKind::ReadShareGroupStateSummary(req),
        )
        .await
        .map_err(StateError::NotLoaded)?;
    let ResponseKind::ReadShareGroupStateSummary(resp) = answer else {
        return Err(StateError::Storage(
            "an unexpected answer to ReadShareGroupStateSummary".into(),
        ));
    };
    let p = partition_of!(resp, key, "ReadShareGroupStateSummary");
    if p.state_epoch == NO_STATE {
        return Ok(None);
    }
    Ok(Some(Summary {
        start: p.start_offset,
        leader_epoch: p.leader_epoch,
        complete: i64::from(p.delivery_complete_count.max(0)),
    }))
}

/// Read `key`'s state from broker `node`, which owns its `__share_group_state` partition.
pub(crate) async fn read_remote(
    broker: &Broker,
    node: i32,
    key: &ShareKey,
    leader_epoch: i32,
) -> Result<crate::shares::ReadState, StateError> {
    let req = ReadShareGroupStateRequest::default()
        .with_group_id(str_bytes(key.group_id.clone()))
        .with_topics(vec![ReadStateData::default()
            .with_topic_id(Uuid::from_bytes(key.topic_id))
            .with_partitions(vec![ReadPartition::default()
                .with_partition(key.partition)
                .with_leader_epoch(leader_epoch)])]);
    let answer = broker
        .call_peer(
            node,
            ApiKey::ReadShareGroupState,
            0,
            RequestKind::ReadShareGroupState(req),
        )
        .await
        .map_err(StateError::NotLoaded)?;
    let ResponseKind::ReadShareGroupState(resp) = answer else {
        return Err(StateError::Storage(
            "an unexpected answer to ReadShareGroupState".into(),
        ));
    };
    let p = partition_of!(resp, key, "ReadShareGroupState");
    if p.start_offset < 0 {
        return Ok((None, p.state_epoch.max(0)));
    }
    let snapshot = Snapshot {
        start: p.start_offset,
        batches: p
            .state_batches
            .iter()
            .map(|b| StateBatch {
                first: b.first_offset,
                last: b.last_offset,
                state: b.delivery_state as u8,
                delivery_count: b.delivery_count.max(0) as u16,
            })
            .collect(),
    };
    Ok((Some(snapshot), p.state_epoch))
}

/// Write `key`'s state at broker `node`, which owns its `__share_group_state` partition;
/// answered once fsynced there.
pub(crate) async fn write_remote(
    broker: &Broker,
    node: i32,
    key: &ShareKey,
    snapshot: &Snapshot,
    state_epoch: i32,
    leader_epoch: i32,
) -> Result<(), StateError> {
    let req = WriteShareGroupStateRequest::default()
        .with_group_id(str_bytes(key.group_id.clone()))
        .with_topics(vec![WriteStateData::default()
            .with_topic_id(Uuid::from_bytes(key.topic_id))
            .with_partitions(vec![WritePartition::default()
                .with_partition(key.partition)
                .with_state_epoch(state_epoch)
                .with_leader_epoch(leader_epoch)
                .with_start_offset(snapshot.start)
                .with_delivery_complete_count(-1)
                .with_state_batches(
                    snapshot
                        .batches
                        .iter()
                        .map(|b| {
                            WriteBatch::default()
                                .with_first_offset(b.first)
                                .with_last_offset(b.last)
                                .with_delivery_state(b.state as i8)
                                .with_delivery_count(b.delivery_count as i16)
                        })
                        .collect(),
                )])]);
    let answer = broker
        .call_peer(
            node,
            ApiKey::WriteShareGroupState,
            0,
            RequestKind::WriteShareGroupState(req),
        )
        .await
        .map_err(StateError::NotLoaded)?;
    let ResponseKind::WriteShareGroupState(resp) = answer else {
        return Err(StateError::Storage(
            "an unexpected answer to WriteShareGroupState".into(),
        ));
    };
    partition_of!(resp, key, "WriteShareGroupState");
    Ok(())
}

// ---- resets and deletions: served at the state's owner, asked by the group's coordinator ----

pub(crate) fn initialize(broker: &Arc<Broker>, req: InitializeShareGroupStateRequest) -> Reply {
    let broker = broker.clone();
    Box::pin(async move {
        let group = req.group_id.to_string();
        let mut results = Vec::new();
        for t in &req.topics {
            let mut partitions = Vec::new();
            for p in &t.partitions {
                let key = key_of(&group, t.topic_id, p.partition);
                let sp = broker.share_state_partition(&key);
                let outcome = match broker.shares.initialize_local(&key, sp, p.start_offset) {
                    Err(e) => Err(e),
                    Ok(log) => broker
                        .flush_logs(vec![log])
                        .await
                        .map_err(|e| StateError::Storage(e.to_string())),
                };
                partitions.push(with_outcome(
                    InitResult::default().with_partition(p.partition),
                    outcome,
                ));
            }
            results.push(
                InitializeStateResult::default()
                    .with_topic_id(t.topic_id)
                    .with_partitions(partitions),
            );
        }
        Some(ResponseKind::InitializeShareGroupState(
            InitializeShareGroupStateResponse::default().with_results(results),
        ))
    })
}

pub(crate) fn delete(broker: &Arc<Broker>, req: DeleteShareGroupStateRequest) -> Reply {
    let broker = broker.clone();
    Box::pin(async move {
        let group = req.group_id.to_string();
        let mut logs = Vec::new();
        let mut results = Vec::new();
        for t in &req.topics {
            let mut partitions = Vec::new();
            for p in &t.partitions {
                let key = key_of(&group, t.topic_id, p.partition);
                let sp = broker.share_state_partition(&key);
                let outcome = broker.shares.delete_local(&key, sp).map(|log| {
                    logs.extend(log);
                });
                partitions.push(with_outcome(
                    DeleteResult::default().with_partition(p.partition),
                    outcome,
                ));
            }
            results.push(
                DeleteStateResult::default()
                    .with_topic_id(t.topic_id)
                    .with_partitions(partitions),
            );
        }
        if let Err(e) = broker.flush_logs(logs).await {
            // Nothing is answered deleted that is not on storage.
            for t in &mut results {
                for p in &mut t.partitions {
                    if p.error_code == 0 {
                        p.error_code = ResponseError::KafkaStorageError.code();
                        p.error_message = Some(str_bytes(e.to_string()));
                    }
                }
            }
        }
        Some(ResponseKind::DeleteShareGroupState(
            DeleteShareGroupStateResponse::default().with_results(results),
        ))
    })
}

/// A partition result with its error set from `outcome`.
fn with_outcome<R: HasError>(base: R, outcome: Result<(), StateError>) -> R {
    match outcome {
        Ok(()) => base,
        Err(e) => base.set_error(code_of(&e), e.to_string()),
    }
}

trait HasError {
    fn set_error(self, code: i16, message: String) -> Self;
}

macro_rules! has_error {
    ($($t:ty),*) => {$(
        impl HasError for $t {
            fn set_error(self, code: i16, message: String) -> Self {
                self.with_error_code(code).with_error_message(Some(str_bytes(message)))
            }
        }
    )*};
}
has_error!(InitResult, DeleteResult, WriteResult);

/// Reset `key`'s state to start at `start` at broker `node`, which owns its
/// `__share_group_state` partition; answered once fsynced there.
pub(crate) async fn initialize_remote(
    broker: &Broker,
    node: i32,
    key: &ShareKey,
    start: i64,
) -> Result<(), StateError> {
    let req = InitializeShareGroupStateRequest::default()
        .with_group_id(str_bytes(key.group_id.clone()))
        .with_topics(vec![InitializeStateData::default()
            .with_topic_id(Uuid::from_bytes(key.topic_id))
            .with_partitions(vec![InitPartition::default()
                .with_partition(key.partition)
                .with_state_epoch(-1)
                .with_start_offset(start)])]);
    let answer = broker
        .call_peer(
            node,
            ApiKey::InitializeShareGroupState,
            0,
            RequestKind::InitializeShareGroupState(req),
        )
        .await
        .map_err(StateError::NotLoaded)?;
    let ResponseKind::InitializeShareGroupState(resp) = answer else {
        return Err(StateError::Storage(
            "an unexpected answer to InitializeShareGroupState".into(),
        ));
    };
    partition_of!(resp, key, "InitializeShareGroupState");
    Ok(())
}

/// Delete the state of `keys` (one group's) at broker `node`, which owns their
/// `__share_group_state` partitions; each key's outcome, done once fsynced there.
pub(crate) async fn delete_remote(
    broker: &Broker,
    node: i32,
    keys: &[ShareKey],
) -> Vec<(ShareKey, Result<(), StateError>)> {
    let Some(group) = keys.first().map(|k| k.group_id.clone()) else {
        return Vec::new();
    };
    let mut topics: BTreeMap<[u8; 16], Vec<i32>> = BTreeMap::new();
    for k in keys {
        topics.entry(k.topic_id).or_default().push(k.partition);
    }
    let req = DeleteShareGroupStateRequest::default()
        .with_group_id(str_bytes(group))
        .with_topics(
            topics
                .into_iter()
                .map(|(id, ps)| {
                    DeleteStateData::default()
                        .with_topic_id(Uuid::from_bytes(id))
                        .with_partitions(
                            ps.into_iter()
                                .map(|p| DeletePartition::default().with_partition(p))
                                .collect(),
                        )
                })
                .collect(),
        );
    let answer = broker
        .call_peer(
            node,
            ApiKey::DeleteShareGroupState,
            0,
            RequestKind::DeleteShareGroupState(req),
        )
        .await;
    let resp = match answer {
        Ok(ResponseKind::DeleteShareGroupState(resp)) => resp,
        Ok(_) => {
            let e = StateError::Storage("an unexpected answer to DeleteShareGroupState".into());
            return keys.iter().map(|k| (k.clone(), Err(e.clone()))).collect();
        }
        Err(m) => {
            let e = StateError::NotLoaded(m);
            return keys.iter().map(|k| (k.clone(), Err(e.clone()))).collect();
        }
    };
    keys.iter()
        .map(|k| {
            let found = resp
                .results
                .iter()
                .filter(|t| t.topic_id.as_bytes() == &k.topic_id)
                .flat_map(|t| t.partitions.iter())
                .find(|p| p.partition == k.partition);
            let outcome = match found {
                None => Err(StateError::Storage(
                    "DeleteShareGroupState answered no partition".into(),
                )),
                Some(p) if p.error_code != 0 => Err(error_of(
                    p.error_code,
                    p.error_message.as_ref().map(|m| m.to_string()),
                )),
                Some(_) => Ok(()),
            };
            (k.clone(), outcome)
        })
        .collect()
}

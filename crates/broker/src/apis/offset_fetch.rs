//! OffsetFetch (v1-v9; several groups per request from v8).

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::offset_fetch_response::{
    OffsetFetchResponseGroup, OffsetFetchResponsePartition, OffsetFetchResponsePartitions,
    OffsetFetchResponseTopic, OffsetFetchResponseTopics,
};
use kafka_protocol::messages::{GroupId, OffsetFetchRequest, OffsetFetchResponse, ResponseKind};
use sluice_group::{FetchedOffset, GroupError};

use crate::errors::group_error_code;
use crate::wire::{str_bytes, topic_name};
use crate::Broker;

/// One partition's answer: (partition, offset, epoch, metadata, error code).
type Row = (i32, i64, i32, String, i16);
/// One group's answer: (topic -> rows), or an error.
type GroupAnswer = Result<BTreeMap<String, Vec<Row>>, GroupError>;

fn fetch_group(
    broker: &Broker,
    group: &str,
    topics: Option<Vec<(String, Vec<i32>)>>,
    member: Option<(&str, i32)>,
    require_stable: bool,
) -> GroupAnswer {
    if !broker.ensure_offsets_topic() {
        return Err(GroupError::NotCoordinator);
    }
    let wanted: Option<Vec<(String, i32)>> = topics.map(|ts| {
        ts.into_iter()
            .flat_map(|(t, ps)| ps.into_iter().map(move |p| (t.clone(), p)))
            .collect()
    });
    let unstable = kafka_protocol::ResponseError::UnstableOffsetCommit.code();
    let fetched: Vec<(FetchedOffset, bool)> = broker.groups.read(|c| {
        if let Some((id, epoch)) = member {
            c.validate_fetch_member(group, id, epoch)?;
        }
        let fetched = c.fetch_offsets(group, wanted.as_deref())?;
        // A fetch that requires stable offsets gets UNSTABLE_OFFSET_COMMIT for a partition
        // an open transaction has committed an offset for (the consumer retries).
        Ok::<_, GroupError>(
            fetched
                .into_iter()
                .map(|(tp, v)| {
                    let pending = require_stable && c.has_pending_offset(group, &tp);
                    ((tp, v), pending)
                })
                .collect(),
        )
    })?;
    let mut out: BTreeMap<String, Vec<Row>> = BTreeMap::new();
    for (((t, p), v), pending) in fetched {
        let row = match v {
            _ if pending => (p, -1, -1, String::new(), unstable),
            Some(v) => (p, v.offset, v.leader_epoch, v.metadata, 0),
            None => (p, -1, -1, String::new(), 0),
        };
        out.entry(t).or_default().push(row);
    }
    Ok(out)
}

pub(crate) fn handle(
    broker: &Arc<Broker>,
    req: OffsetFetchRequest,
    version: i16,
) -> Option<ResponseKind> {
    if version >= 8 {
        let groups = req
            .groups
            .iter()
            .map(|g| {
                let topics = g.topics.as_ref().map(|ts| {
                    ts.iter()
                        .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
                        .collect()
                });
                let member = g
                    .member_id
                    .as_ref()
                    .filter(|m| !m.is_empty())
                    .map(|m| (m.as_str(), g.member_epoch));
                match fetch_group(
                    broker,
                    g.group_id.0.as_str(),
                    topics,
                    member,
                    req.require_stable,
                ) {
                    Err(e) => OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_error_code(group_error_code(&e)),
                    Ok(map) => OffsetFetchResponseGroup::default()
                        .with_group_id(g.group_id.clone())
                        .with_topics(
                            map.into_iter()
                                .map(|(t, ps)| {
                                    OffsetFetchResponseTopics::default()
                                        .with_name(topic_name(&t))
                                        .with_partitions(
                                            ps.into_iter()
                                                .map(|(p, o, e, m, code)| {
                                                    OffsetFetchResponsePartitions::default()
                                                        .with_partition_index(p)
                                                        .with_error_code(code)
                                                        .with_committed_offset(o)
                                                        .with_committed_leader_epoch(e)
                                                        .with_metadata(Some(str_bytes(m)))
                                                })
                                                .collect(),
                                        )
                                })
                                .collect(),
                        ),
                }
            })
            .collect();
        return Some(ResponseKind::OffsetFetch(
            OffsetFetchResponse::default().with_groups(groups),
        ));
    }
    let GroupId(group) = &req.group_id;
    let topics = req.topics.as_ref().map(|ts| {
        ts.iter()
            .map(|t| (t.name.0.to_string(), t.partition_indexes.clone()))
            .collect()
    });
    let resp = match fetch_group(broker, group.as_str(), topics, None, req.require_stable) {
        Err(e) => OffsetFetchResponse::default().with_error_code(group_error_code(&e)),
        Ok(map) => OffsetFetchResponse::default().with_topics(
            map.into_iter()
                .map(|(t, ps)| {
                    OffsetFetchResponseTopic::default()
                        .with_name(topic_name(&t))
                        .with_partitions(
                            ps.into_iter()
                                .map(|(p, o, e, m, code)| {
                                    OffsetFetchResponsePartition::default()
                                        .with_partition_index(p)
                                        .with_error_code(code)
                                        .with_committed_offset(o)
                                        .with_committed_leader_epoch(e)
                                        .with_metadata(Some(str_bytes(m)))
                                })
                                .collect(),
                        )
                })
                .collect(),
        ),
    };
    Some(ResponseKind::OffsetFetch(resp))
}

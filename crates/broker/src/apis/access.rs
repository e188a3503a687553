//! What each API needs its caller to be allowed, as Kafka's `KafkaApis` authorizes it: every
//! API's authorization in one place, before its handler runs and on its answer.
//!
//! [`admit`] looks at a request before its handler and says one of:
//! - refused whole (Kafka's `getErrorResponse` with the authorization error: a group API
//!   without READ on the group, a transactional call without WRITE on the transactional id, an
//!   administrative call without its CLUSTER operation);
//! - served, with the items the caller may not touch taken out of the request (topics a
//!   producer may not WRITE, groups it may not DELETE, ...), and a patch that puts them back
//!   into the answer with their authorization error, and narrows listings (topics without
//!   DESCRIBE left out of Metadata) and fills authorized-operations fields.
//!
//! Without an authorizer every request is served as it is; only authorized-operations fields
//! asked for are filled (with every operation, as Kafka does).
//!
//! The produce path's KIP-890 check (`Broker::prepare`) asks [`produce_allowed`] first, so a
//! partition the producer may not write is never added to its transaction.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use kafka_protocol::messages::*;
use kafka_protocol::ResponseError;
use sluice_acl::{Operation, ResourceType, OPERATIONS_NOT_ASKED};

use crate::authz::Audit;
use crate::client::Client;
use crate::wire::{str_bytes, topic_name};
use crate::Broker;

/// Changes to a handler's answer: what was taken out of the request, back with its error.
pub(crate) type Patch = Box<dyn FnOnce(&mut ResponseKind) + Send>;

/// What [`admit`] decided.
pub(crate) enum Admission {
    /// Serve this request (perhaps narrowed); apply the patch, if any, to its answer.
    Serve(RequestKind, Option<Patch>),
    /// Answer with this, without serving the request.
    Refuse(ResponseKind),
}

const TOPIC_DENIED: ResponseError = ResponseError::TopicAuthorizationFailed;
const GROUP_DENIED: ResponseError = ResponseError::GroupAuthorizationFailed;
const TXN_DENIED: ResponseError = ResponseError::TransactionalIdAuthorizationFailed;
const CLUSTER_DENIED: ResponseError = ResponseError::ClusterAuthorizationFailed;
/// Kafka's message for a described group whose assignments name a topic the client may not
/// describe (ConsumerGroupDescribe, ShareGroupDescribe).
const TOPICS_HIDDEN: &str =
    "The group has described topic(s) that the client is not authorized to describe.";

/// Decide what of `body` `client` may have served.
pub(crate) fn admit(
    broker: &Arc<Broker>,
    body: RequestKind,
    version: i16,
    client: &Client,
) -> Admission {
    if !broker.authz.enabled() {
        return admit_unsecured(broker, body, client);
    }
    let gate = Gate { broker, client };
    match body {
        RequestKind::Produce(r) => gate.produce(r),
        RequestKind::Metadata(r) => gate.metadata(r, version),
        RequestKind::ListOffsets(r) => gate.list_offsets(r),
        RequestKind::OffsetCommit(r) => gate.offset_commit(r),
        RequestKind::OffsetFetch(r) => gate.offset_fetch(r),
        RequestKind::JoinGroup(r) => {
            gate.group_read(r.group_id.0.to_string(), RequestKind::JoinGroup(r))
        }
        RequestKind::SyncGroup(r) => {
            gate.group_read(r.group_id.0.to_string(), RequestKind::SyncGroup(r))
        }
        RequestKind::Heartbeat(r) => {
            gate.group_read(r.group_id.0.to_string(), RequestKind::Heartbeat(r))
        }
        RequestKind::LeaveGroup(r) => {
            gate.group_read(r.group_id.0.to_string(), RequestKind::LeaveGroup(r))
        }
        RequestKind::ConsumerGroupHeartbeat(r) => gate.group_read(
            r.group_id.0.to_string(),
            RequestKind::ConsumerGroupHeartbeat(r),
        ),
        RequestKind::FindCoordinator(r) => gate.find_coordinator(r),
        RequestKind::DescribeGroups(r) => gate.describe_groups(r),
        RequestKind::ListGroups(r) => gate.list_groups(r),
        RequestKind::DeleteGroups(r) => gate.delete_groups(r),
        RequestKind::ConsumerGroupDescribe(r) => gate.consumer_group_describe(r),
        RequestKind::ShareGroupHeartbeat(r) => gate.share(RequestKind::ShareGroupHeartbeat(r)),
        RequestKind::ShareGroupDescribe(r) => gate.share(RequestKind::ShareGroupDescribe(r)),
        RequestKind::ShareFetch(r) => gate.share(RequestKind::ShareFetch(r)),
        RequestKind::ShareAcknowledge(r) => gate.share(RequestKind::ShareAcknowledge(r)),
        RequestKind::DescribeShareGroupOffsets(r) => {
            gate.share(RequestKind::DescribeShareGroupOffsets(r))
        }
        RequestKind::AlterShareGroupOffsets(r) => {
            gate.share(RequestKind::AlterShareGroupOffsets(r))
        }
        RequestKind::DeleteShareGroupOffsets(r) => {
            gate.share(RequestKind::DeleteShareGroupOffsets(r))
        }
        RequestKind::CreateTopics(r) => gate.create_topics(r),
        RequestKind::DeleteTopics(r) => gate.delete_topics(r),
        RequestKind::CreatePartitions(r) => gate.create_partitions(r),
        RequestKind::DeleteRecords(r) => gate.delete_records(r),
        RequestKind::DescribeConfigs(r) => gate.describe_configs(r),
        RequestKind::AlterConfigs(r) => gate.alter_configs(r),
        RequestKind::IncrementalAlterConfigs(r) => gate.incremental_alter_configs(r),
        RequestKind::DescribeCluster(r) => gate.describe_cluster(r),
        RequestKind::InitProducerId(r) => gate.init_producer_id(r),
        RequestKind::AddPartitionsToTxn(r) => gate.add_partitions_to_txn(r, version),
        RequestKind::AddOffsetsToTxn(r) => gate.add_offsets_to_txn(r),
        RequestKind::EndTxn(r) => gate.end_txn(r),
        RequestKind::TxnOffsetCommit(r) => gate.txn_offset_commit(r),
        RequestKind::DescribeTransactions(r) => gate.describe_transactions(r),
        RequestKind::ListTransactions(r) => gate.list_transactions(r),
        RequestKind::DescribeProducers(r) => gate.describe_producers(r),
        RequestKind::OffsetForLeaderEpoch(r) => gate.offset_for_leader_epoch(r),
        RequestKind::DescribeTopicPartitions(r) => gate.describe_topic_partitions(r),
        RequestKind::OffsetDelete(r) => gate.offset_delete(r),
        other => gate.cluster_gated(other),
    }
}

/// No authorizer: everything is served; authorized operations asked for are all of them.
fn admit_unsecured(broker: &Arc<Broker>, body: RequestKind, client: &Client) -> Admission {
    let asked = match &body {
        RequestKind::Metadata(r) => {
            r.include_topic_authorized_operations || r.include_cluster_authorized_operations
        }
        RequestKind::DescribeCluster(r) => r.include_cluster_authorized_operations,
        RequestKind::DescribeGroups(r) => r.include_authorized_operations,
        RequestKind::ConsumerGroupDescribe(r) => r.include_authorized_operations,
        RequestKind::DescribeTopicPartitions(_) => false,
        _ => false,
    };
    if !asked {
        return Admission::Serve(body, None);
    }
    // The same patches as with an authorizer, whose questions are all answered yes.
    let gate = Gate { broker, client };
    match body {
        RequestKind::Metadata(r) => gate.metadata(r, i16::MAX),
        RequestKind::DescribeCluster(r) => gate.describe_cluster(r),
        RequestKind::DescribeGroups(r) => gate.describe_groups(r),
        RequestKind::ConsumerGroupDescribe(r) => gate.consumer_group_describe(r),
        other => Admission::Serve(other, None),
    }
}

/// The topics of a transactional or idempotent produce request that its producer may write:
/// None when the request is refused whole (its transactional id), else the set (all of them
/// without an authorizer).
pub(crate) fn produce_allowed(
    broker: &Broker,
    req: &ProduceRequest,
    client: &Client,
) -> Option<HashSet<String>> {
    let authz = &broker.authz;
    if let Some(id) = &req.transactional_id {
        if !authz.allows(
            client,
            Operation::Write,
            ResourceType::TransactionalId,
            &id.0,
            Audit::Log,
        ) {
            return None;
        }
    }
    Some(
        req.topic_data
            .iter()
            .map(|t| produce_topic_name(broker, t))
            .filter(|name| {
                authz.allows(
                    client,
                    Operation::Write,
                    ResourceType::Topic,
                    name,
                    Audit::Log,
                )
            })
            .collect(),
    )
}

/// A produce request's topic by name, or (v13+) by id.
fn produce_topic_name(broker: &Broker, t: &produce_request::TopicProduceData) -> String {
    if t.name.0.is_empty() && !t.topic_id.is_nil() {
        if let Some(state) = broker.registry.get_by_id(t.topic_id) {
            return state.meta.name.clone();
        }
    }
    t.name.0.to_string()
}

/// Wrap a patch of one response type.
fn patch<T: 'static>(
    f: impl FnOnce(&mut T) + Send + 'static,
    pick: fn(&mut ResponseKind) -> Option<&mut T>,
) -> Option<Patch> {
    Some(Box::new(move |response: &mut ResponseKind| {
        if let Some(body) = pick(response) {
            f(body);
        }
    }))
}

macro_rules! pick {
    ($variant:ident) => {
        |r: &mut ResponseKind| match r {
            ResponseKind::$variant(b) => Some(b),
            _ => None,
        }
    };
}

/// The questions one request asks.
struct Gate<'a> {
    broker: &'a Arc<Broker>,
    client: &'a Client,
}

impl Gate<'_> {
    fn allows(&self, op: Operation, rt: ResourceType, name: &str) -> bool {
        self.broker
            .authz
            .allows(self.client, op, rt, name, Audit::Log)
    }

    fn allows_quietly(&self, op: Operation, rt: ResourceType, name: &str) -> bool {
        self.broker
            .authz
            .allows(self.client, op, rt, name, Audit::Quiet)
    }

    fn allows_cluster(&self, op: Operation) -> bool {
        self.broker.authz.allows_cluster(self.client, op)
    }

    fn topic(&self, op: Operation, name: &str) -> bool {
        self.allows(op, ResourceType::Topic, name)
    }

    /// A callable the patches keep: may this client do `op` on the resource (quietly)?
    fn quiet_check(&self) -> impl Fn(Operation, ResourceType, &str) -> bool + Send + 'static {
        let (broker, client) = (self.broker.clone(), self.client.clone());
        move |op, rt, name| broker.authz.allows(&client, op, rt, name, Audit::Quiet)
    }

    /// A callable the patches keep: the authorized operations of a resource.
    fn operations(&self) -> impl Fn(ResourceType, &str) -> i32 + Send + 'static {
        let (broker, client) = (self.broker.clone(), self.client.clone());
        move |rt, name| broker.authz.operations(&client, rt, name)
    }

    fn produce(&self, mut r: ProduceRequest) -> Admission {
        let Some(allowed) = produce_allowed(self.broker, &r, self.client) else {
            let every: Vec<(String, Vec<i32>)> = r
                .topic_data
                .iter()
                .map(|t| {
                    (
                        t.name.0.to_string(),
                        t.partition_data.iter().map(|p| p.index).collect(),
                    )
                })
                .collect();
            let body = ProduceResponse::default().with_responses(produce_errors(every, TXN_DENIED));
            return Admission::Refuse(ResponseKind::Produce(body));
        };
        let mut denied = Vec::new();
        r.topic_data.retain(|t| {
            let keep = allowed.contains(&produce_topic_name(self.broker, t));
            if !keep {
                denied.push((
                    t.name.0.to_string(),
                    t.partition_data.iter().map(|p| p.index).collect(),
                ));
            }
            keep
        });
        if denied.is_empty() {
            return Admission::Serve(RequestKind::Produce(r), None);
        }
        let fix = patch(
            move |b: &mut ProduceResponse| b.responses.extend(produce_errors(denied, TOPIC_DENIED)),
            pick!(Produce),
        );
        Admission::Serve(RequestKind::Produce(r), fix)
    }

    fn metadata(&self, mut r: MetadataRequest, version: i16) -> Admission {
        let all_topics =
            r.topics.is_none() || (version == 0 && r.topics.as_ref().is_some_and(Vec::is_empty));
        let mut denied: Vec<String> = Vec::new();
        if let Some(list) = r.topics.as_mut().filter(|_| !all_topics) {
            let auto = self.broker.config.auto_create_topics_enable
                && (version < 4 || r.allow_auto_topic_creation);
            let may_create_any = std::cell::OnceCell::new();
            list.retain(|t| {
                let Some(name) = t
                    .name
                    .as_ref()
                    .map(|n| n.0.to_string())
                    .filter(|_| t.topic_id.is_nil())
                else {
                    return true; // by id: checked on the answer
                };
                if !self.topic(Operation::Describe, &name) {
                    denied.push(name);
                    return false;
                }
                let creates = auto
                    && self.broker.registry.get(&name).is_none()
                    && !crate::is_internal_topic(&name);
                if creates {
                    let cluster = *may_create_any.get_or_init(|| {
                        self.allows_quietly(
                            Operation::Create,
                            ResourceType::Cluster,
                            sluice_acl::CLUSTER_NAME,
                        )
                    });
                    if !cluster && !self.topic(Operation::Create, &name) {
                        denied.push(name);
                        return false;
                    }
                }
                true
            });
        }
        let check = self.quiet_check();
        let ops = self.operations();
        let topic_ops = r.include_topic_authorized_operations;
        let cluster_ops = r.include_cluster_authorized_operations;
        let client = self.client.clone();
        let broker = self.broker.clone();
        let fix = patch(
            move |b: &mut MetadataResponse| {
                let enabled = broker.authz.enabled();
                b.topics.retain_mut(|t| {
                    let Some(name) = t.name.as_ref().map(|n| n.0.to_string()) else {
                        return true;
                    };
                    if enabled
                        && t.error_code == 0
                        && !check(Operation::Describe, ResourceType::Topic, &name)
                    {
                        if all_topics {
                            return false;
                        }
                        // Asked by id: the id is no secret, the name is.
                        *t = error_topic(None, t.topic_id, TOPIC_DENIED);
                        return true;
                    }
                    if topic_ops && t.error_code == 0 {
                        t.topic_authorized_operations = ops(ResourceType::Topic, &name);
                    }
                    true
                });
                for name in denied {
                    b.topics
                        .push(error_topic(Some(name), uuid::Uuid::nil(), TOPIC_DENIED));
                }
                if cluster_ops {
                    b.cluster_authorized_operations = if broker.authz.allows(
                        &client,
                        Operation::Describe,
                        ResourceType::Cluster,
                        sluice_acl::CLUSTER_NAME,
                        Audit::Quiet,
                    ) {
                        ops(ResourceType::Cluster, sluice_acl::CLUSTER_NAME)
                    } else {
                        0
                    };
                }
            },
            pick!(Metadata),
        );
        Admission::Serve(RequestKind::Metadata(r), fix)
    }

    fn list_offsets(&self, mut r: ListOffsetsRequest) -> Admission {
        let mut denied = Vec::new();
        r.topics.retain(|t| {
            let keep = self.topic(Operation::Describe, &t.name.0);
            if !keep {
                denied.push((
                    t.name.clone(),
                    t.partitions
                        .iter()
                        .map(|p| p.partition_index)
                        .collect::<Vec<_>>(),
                ));
            }
            keep
        });
        let fix = (!denied.is_empty())
            .then(|| {
                patch(
                    move |b: &mut ListOffsetsResponse| {
                        for (name, parts) in denied {
                            let partitions = parts
                                .into_iter()
                                .map(|p| {
                                    list_offsets_response::ListOffsetsPartitionResponse::default()
                                        .with_partition_index(p)
                                        .with_error_code(TOPIC_DENIED.code())
                                        .with_timestamp(-1)
                                        .with_offset(-1)
                                })
                                .collect();
                            b.topics.push(
                                list_offsets_response::ListOffsetsTopicResponse::default()
                                    .with_name(name)
                                    .with_partitions(partitions),
                            );
                        }
                    },
                    pick!(ListOffsets),
                )
            })
            .flatten();
        Admission::Serve(RequestKind::ListOffsets(r), fix)
    }

    fn offset_commit(&self, mut r: OffsetCommitRequest) -> Admission {
        let all = |r: &OffsetCommitRequest| -> Vec<(TopicName, Vec<i32>)> {
            r.topics
                .iter()
                .map(|t| {
                    (
                        t.name.clone(),
                        t.partitions.iter().map(|p| p.partition_index).collect(),
                    )
                })
                .collect()
        };
        if !self.allows(Operation::Read, ResourceType::Group, &r.group_id.0) {
            let body =
                OffsetCommitResponse::default().with_topics(commit_errors(all(&r), GROUP_DENIED));
            return Admission::Refuse(ResponseKind::OffsetCommit(body));
        }
        let mut denied = Vec::new();
        r.topics.retain(|t| {
            let keep = self.topic(Operation::Read, &t.name.0);
            if !keep {
                denied.push((
                    t.name.clone(),
                    t.partitions.iter().map(|p| p.partition_index).collect(),
                ));
            }
            keep
        });
        let fix = (!denied.is_empty())
            .then(|| {
                patch(
                    move |b: &mut OffsetCommitResponse| {
                        b.topics.extend(commit_errors(denied, TOPIC_DENIED))
                    },
                    pick!(OffsetCommit),
                )
            })
            .flatten();
        Admission::Serve(RequestKind::OffsetCommit(r), fix)
    }

    /// OffsetFetch reads nothing it changes: its answer is narrowed afterwards. A group the
    /// caller may not DESCRIBE answers GROUP_AUTHORIZATION_FAILED; a topic it may not DESCRIBE
    /// is left out of an all-topics answer and answered TOPIC_AUTHORIZATION_FAILED when named.
    fn offset_fetch(&self, r: OffsetFetchRequest) -> Admission {
        let check = self.quiet_check();
        let loud = {
            let (broker, client) = (self.broker.clone(), self.client.clone());
            move |op, rt, name: &str| broker.authz.allows(&client, op, rt, name, Audit::Log)
        };
        let single_all_topics = r.topics.is_none();
        let groups_all_topics: BTreeMap<String, bool> = r
            .groups
            .iter()
            .map(|g| (g.group_id.0.to_string(), g.topics.is_none()))
            .collect();
        let single_group = r.group_id.0.to_string();
        let fix = patch(
            move |b: &mut OffsetFetchResponse| {
                if !b.groups.is_empty() {
                    for g in &mut b.groups {
                        let id = g.group_id.0.to_string();
                        if !loud(Operation::Describe, ResourceType::Group, &id) {
                            g.topics.clear();
                            g.error_code = GROUP_DENIED.code();
                            continue;
                        }
                        let all_topics = groups_all_topics.get(&id).copied().unwrap_or(true);
                        g.topics.retain_mut(|t| {
                            if check(Operation::Describe, ResourceType::Topic, &t.name.0) {
                                return true;
                            }
                            for p in &mut t.partitions {
                                *p =
                                    offset_fetch_response::OffsetFetchResponsePartitions::default()
                                        .with_partition_index(p.partition_index)
                                        .with_committed_offset(-1)
                                        .with_committed_leader_epoch(-1)
                                        .with_metadata(Some(str_bytes("")))
                                        .with_error_code(TOPIC_DENIED.code());
                            }
                            !all_topics
                        });
                    }
                    return;
                }
                if !loud(Operation::Describe, ResourceType::Group, &single_group) {
                    b.topics.clear();
                    b.error_code = GROUP_DENIED.code();
                    return;
                }
                b.topics.retain_mut(|t| {
                    if check(Operation::Describe, ResourceType::Topic, &t.name.0) {
                        return true;
                    }
                    for p in &mut t.partitions {
                        *p = offset_fetch_response::OffsetFetchResponsePartition::default()
                            .with_partition_index(p.partition_index)
                            .with_committed_offset(-1)
                            .with_committed_leader_epoch(-1)
                            .with_metadata(Some(str_bytes("")))
                            .with_error_code(TOPIC_DENIED.code());
                    }
                    !single_all_topics
                });
            },
            pick!(OffsetFetch),
        );
        Admission::Serve(RequestKind::OffsetFetch(r), fix)
    }

    /// JoinGroup, SyncGroup, Heartbeat, LeaveGroup, ConsumerGroupHeartbeat: READ on the group.
    fn group_read(&self, group: String, body: RequestKind) -> Admission {
        if self.allows(Operation::Read, ResourceType::Group, &group) {
            return Admission::Serve(body, None);
        }
        let code = GROUP_DENIED.code();
        Admission::Refuse(match body {
            RequestKind::JoinGroup(_) => ResponseKind::JoinGroup(
                JoinGroupResponse::default()
                    .with_error_code(code)
                    .with_generation_id(-1)
                    .with_member_id(str_bytes(""))
                    .with_leader(str_bytes("")),
            ),
            RequestKind::SyncGroup(_) => {
                ResponseKind::SyncGroup(SyncGroupResponse::default().with_error_code(code))
            }
            RequestKind::Heartbeat(_) => {
                ResponseKind::Heartbeat(HeartbeatResponse::default().with_error_code(code))
            }
            RequestKind::LeaveGroup(_) => {
                ResponseKind::LeaveGroup(LeaveGroupResponse::default().with_error_code(code))
            }
            _ => ResponseKind::ConsumerGroupHeartbeat(
                ConsumerGroupHeartbeatResponse::default()
                    .with_error_code(code)
                    .with_error_message(Some(str_bytes(GROUP_DENIED.to_string()))),
            ),
        })
    }

    /// Whether this client may DESCRIBE a group (checked, and logged, when a describing
    /// answer is patched).
    /// Whether the client may describe a topic (logged as Kafka's topic checks are).
    fn describes_topic(&self) -> impl Fn(&str) -> bool + Send + Sync + 'static {
        let (broker, client) = (self.broker.clone(), self.client.clone());
        move |name: &str| {
            broker.authz.allows(
                &client,
                Operation::Describe,
                ResourceType::Topic,
                name,
                Audit::Log,
            )
        }
    }

    fn describes_group(&self) -> impl Fn(&str) -> bool + Send + Sync + 'static {
        let (broker, client) = (self.broker.clone(), self.client.clone());
        move |name: &str| {
            broker.authz.allows(
                &client,
                Operation::Describe,
                ResourceType::Group,
                name,
                Audit::Log,
            )
        }
    }

    /// The share-group APIs: READ on the group (ShareGroupDescribe and
    /// DescribeShareGroupOffsets: DESCRIBE; DeleteShareGroupOffsets: DELETE), and for
    /// ShareFetch, ShareAcknowledge and Alter/DeleteShareGroupOffsets READ on every topic
    /// named. Refused whole: a topic denied refuses the request with
    /// TOPIC_AUTHORIZATION_FAILED (Kafka answers that per topic and serves the others).
    fn share(&self, body: RequestKind) -> Admission {
        let by_id = |ids: Vec<uuid::Uuid>| -> Vec<String> {
            ids.into_iter()
                .filter_map(|id| self.broker.registry.get_by_id(id))
                .map(|t| t.meta.name.clone())
                .collect()
        };
        let (group, op, topics): (String, Operation, Vec<String>) = match &body {
            RequestKind::ShareGroupHeartbeat(r) => {
                (r.group_id.0.to_string(), Operation::Read, vec![])
            }
            RequestKind::ShareGroupDescribe(_) => {
                let loud = self.describes_group();
                let topic = self.describes_topic();
                let fix = patch(
                    move |b: &mut ShareGroupDescribeResponse| {
                        for g in &mut b.groups {
                            if !loud(&g.group_id.0) {
                                *g = share_group_describe_response::DescribedGroup::default()
                                    .with_group_id(g.group_id.clone())
                                    .with_error_code(GROUP_DENIED.code())
                                    .with_error_message(Some(str_bytes(GROUP_DENIED.to_string())))
                                    .with_authorized_operations(OPERATIONS_NOT_ASKED);
                            } else if g.members.iter().any(|m| {
                                m.assignment
                                    .topic_partitions
                                    .iter()
                                    .any(|t| !topic(&t.topic_name.0))
                            }) {
                                // As Kafka: a group whose assignment names a topic the
                                // client may not describe is not shown.
                                *g = share_group_describe_response::DescribedGroup::default()
                                    .with_group_id(g.group_id.clone())
                                    .with_error_code(TOPIC_DENIED.code())
                                    .with_error_message(Some(str_bytes(TOPICS_HIDDEN)))
                                    .with_authorized_operations(OPERATIONS_NOT_ASKED);
                            }
                        }
                    },
                    pick!(ShareGroupDescribe),
                );
                return Admission::Serve(body, fix);
            }
            RequestKind::DescribeShareGroupOffsets(_) => {
                // DESCRIBE on each group, and only the topics the client may describe (as
                // Kafka filters them).
                let loud = self.describes_group();
                let topic = self.describes_topic();
                let fix = patch(
                    move |b: &mut DescribeShareGroupOffsetsResponse| {
                        for g in &mut b.groups {
                            if !loud(&g.group_id.0) {
                                *g = describe_share_group_offsets_response::DescribeShareGroupOffsetsResponseGroup::default()
                                    .with_group_id(g.group_id.clone())
                                    .with_error_code(GROUP_DENIED.code())
                                    .with_error_message(Some(str_bytes(GROUP_DENIED.to_string())));
                            } else {
                                g.topics.retain(|t| topic(&t.topic_name.0));
                            }
                        }
                    },
                    pick!(DescribeShareGroupOffsets),
                );
                return Admission::Serve(body, fix);
            }
            RequestKind::ShareFetch(r) => (
                r.group_id
                    .as_ref()
                    .map(|g| g.0.to_string())
                    .unwrap_or_default(),
                Operation::Read,
                by_id(r.topics.iter().map(|t| t.topic_id).collect()),
            ),
            RequestKind::ShareAcknowledge(r) => (
                r.group_id
                    .as_ref()
                    .map(|g| g.0.to_string())
                    .unwrap_or_default(),
                Operation::Read,
                by_id(r.topics.iter().map(|t| t.topic_id).collect()),
            ),
            RequestKind::AlterShareGroupOffsets(r) => (
                r.group_id.0.to_string(),
                Operation::Read,
                r.topics
                    .iter()
                    .map(|t| t.topic_name.0.to_string())
                    .collect(),
            ),
            RequestKind::DeleteShareGroupOffsets(r) => (
                r.group_id.0.to_string(),
                Operation::Delete,
                r.topics
                    .iter()
                    .map(|t| t.topic_name.0.to_string())
                    .collect(),
            ),
            _ => return Admission::Serve(body, None),
        };
        let code = if !self.allows(op, ResourceType::Group, &group) {
            Some(GROUP_DENIED)
        } else if topics
            .iter()
            .any(|name| !self.allows(Operation::Read, ResourceType::Topic, name))
        {
            Some(TOPIC_DENIED)
        } else {
            None
        };
        let Some(code) = code else {
            return Admission::Serve(body, None);
        };
        let message = Some(str_bytes(code.to_string()));
        Admission::Refuse(match body {
            RequestKind::ShareGroupHeartbeat(_) => ResponseKind::ShareGroupHeartbeat(
                ShareGroupHeartbeatResponse::default()
                    .with_error_code(code.code())
                    .with_error_message(message),
            ),
            RequestKind::ShareFetch(_) => ResponseKind::ShareFetch(
                ShareFetchResponse::default()
                    .with_error_code(code.code())
                    .with_error_message(message),
            ),
            RequestKind::AlterShareGroupOffsets(_) => ResponseKind::AlterShareGroupOffsets(
                AlterShareGroupOffsetsResponse::default()
                    .with_error_code(code.code())
                    .with_error_message(message),
            ),
            RequestKind::DeleteShareGroupOffsets(_) => ResponseKind::DeleteShareGroupOffsets(
                DeleteShareGroupOffsetsResponse::default()
                    .with_error_code(code.code())
                    .with_error_message(message),
            ),
            _ => ResponseKind::ShareAcknowledge(
                ShareAcknowledgeResponse::default()
                    .with_error_code(code.code())
                    .with_error_message(message),
            ),
        })
    }

    fn find_coordinator(&self, r: FindCoordinatorRequest) -> Admission {
        let loud = {
            let (broker, client) = (self.broker.clone(), self.client.clone());
            move |op, rt, name: &str| broker.authz.allows(&client, op, rt, name, Audit::Log)
        };
        let key_type = r.key_type;
        let single_key = r.key.to_string();
        let fix = patch(
            move |b: &mut FindCoordinatorResponse| {
                let (rt, code) = match key_type {
                    0 => (ResourceType::Group, GROUP_DENIED),
                    1 => (ResourceType::TransactionalId, TXN_DENIED),
                    _ => return,
                };
                if b.coordinators.is_empty() {
                    if !loud(Operation::Describe, rt, &single_key) {
                        b.error_code = code.code();
                        b.error_message = Some(str_bytes(code.to_string()));
                        b.node_id = BrokerId(-1);
                        b.host = str_bytes("");
                        b.port = -1;
                    }
                    return;
                }
                for c in &mut b.coordinators {
                    if !loud(Operation::Describe, rt, &c.key) {
                        c.error_code = code.code();
                        c.error_message = Some(str_bytes(code.to_string()));
                        c.node_id = BrokerId(-1);
                        c.host = str_bytes("");
                        c.port = -1;
                    }
                }
            },
            pick!(FindCoordinator),
        );
        Admission::Serve(RequestKind::FindCoordinator(r), fix)
    }

    fn describe_groups(&self, r: DescribeGroupsRequest) -> Admission {
        let loud = self.describes_group();
        let ops = self.operations();
        let with_ops = r.include_authorized_operations;
        let fix = patch(
            move |b: &mut DescribeGroupsResponse| {
                for g in &mut b.groups {
                    if !loud(&g.group_id.0) {
                        *g = describe_groups_response::DescribedGroup::default()
                            .with_group_id(g.group_id.clone())
                            .with_error_code(GROUP_DENIED.code())
                            .with_authorized_operations(OPERATIONS_NOT_ASKED);
                    } else if with_ops {
                        g.authorized_operations = ops(ResourceType::Group, &g.group_id.0);
                    }
                }
            },
            pick!(DescribeGroups),
        );
        Admission::Serve(RequestKind::DescribeGroups(r), fix)
    }

    fn consumer_group_describe(&self, r: ConsumerGroupDescribeRequest) -> Admission {
        let loud = self.describes_group();
        let topic = self.describes_topic();
        let ops = self.operations();
        let with_ops = r.include_authorized_operations;
        let fix = patch(
            move |b: &mut ConsumerGroupDescribeResponse| {
                for g in &mut b.groups {
                    if !loud(&g.group_id.0) {
                        *g = consumer_group_describe_response::DescribedGroup::default()
                            .with_group_id(g.group_id.clone())
                            .with_error_code(GROUP_DENIED.code())
                            .with_error_message(Some(str_bytes(GROUP_DENIED.to_string())))
                            .with_authorized_operations(OPERATIONS_NOT_ASKED);
                    } else if g.members.iter().any(|m| {
                        [&m.assignment, &m.target_assignment]
                            .iter()
                            .any(|a| a.topic_partitions.iter().any(|t| !topic(&t.topic_name.0)))
                    }) {
                        // As Kafka: a group whose members' assignments name a topic the
                        // client may not describe is not shown.
                        *g = consumer_group_describe_response::DescribedGroup::default()
                            .with_group_id(g.group_id.clone())
                            .with_error_code(TOPIC_DENIED.code())
                            .with_error_message(Some(str_bytes(TOPICS_HIDDEN)))
                            .with_authorized_operations(OPERATIONS_NOT_ASKED);
                    } else if with_ops {
                        g.authorized_operations = ops(ResourceType::Group, &g.group_id.0);
                    }
                }
            },
            pick!(ConsumerGroupDescribe),
        );
        Admission::Serve(RequestKind::ConsumerGroupDescribe(r), fix)
    }

    fn list_groups(&self, r: ListGroupsRequest) -> Admission {
        if self.allows_quietly(
            Operation::Describe,
            ResourceType::Cluster,
            sluice_acl::CLUSTER_NAME,
        ) {
            return Admission::Serve(RequestKind::ListGroups(r), None);
        }
        let check = self.quiet_check();
        let fix = patch(
            move |b: &mut ListGroupsResponse| {
                b.groups
                    .retain(|g| check(Operation::Describe, ResourceType::Group, &g.group_id.0))
            },
            pick!(ListGroups),
        );
        Admission::Serve(RequestKind::ListGroups(r), fix)
    }

    fn delete_groups(&self, mut r: DeleteGroupsRequest) -> Admission {
        let mut denied = Vec::new();
        r.groups_names.retain(|g| {
            let keep = self.allows(Operation::Delete, ResourceType::Group, &g.0);
            if !keep {
                denied.push(g.clone());
            }
            keep
        });
        let fix = (!denied.is_empty())
            .then(|| {
                patch(
                    move |b: &mut DeleteGroupsResponse| {
                        b.results.extend(denied.into_iter().map(|g| {
                            delete_groups_response::DeletableGroupResult::default()
                                .with_group_id(g)
                                .with_error_code(GROUP_DENIED.code())
                        }))
                    },
                    pick!(DeleteGroups),
                )
            })
            .flatten();
        Admission::Serve(RequestKind::DeleteGroups(r), fix)
    }

    fn offset_delete(&self, mut r: OffsetDeleteRequest) -> Admission {
        if !self.allows(Operation::Delete, ResourceType::Group, &r.group_id.0) {
            return Admission::Refuse(ResponseKind::OffsetDelete(
                OffsetDeleteResponse::default().with_error_code(GROUP_DENIED.code()),
            ));
        }
        let mut denied = Vec::new();
        r.topics.retain(|t| {
            let keep = self.topic(Operation::Read, &t.name.0);
            if !keep {
                denied.push((
                    t.name.clone(),
                    t.partitions
                        .iter()
                        .map(|p| p.partition_index)
                        .collect::<Vec<_>>(),
                ));
            }
            keep
        });
        let fix = (!denied.is_empty())
            .then(|| {
                patch(
                    move |b: &mut OffsetDeleteResponse| {
                        for (name, parts) in denied {
                            b.topics.push(
                                offset_delete_response::OffsetDeleteResponseTopic::default()
                                    .with_name(name)
                                    .with_partitions(
                                        parts
                                            .into_iter()
                                            .map(|p| {
                                                offset_delete_response::OffsetDeleteResponsePartition::default()
                                                    .with_partition_index(p)
                                                    .with_error_code(TOPIC_DENIED.code())
                                            })
                                            .collect(),
                                    ),
                            );
                        }
                    },
                    pick!(OffsetDelete),
                )
            })
            .flatten();
        Admission::Serve(RequestKind::OffsetDelete(r), fix)
    }

    fn create_topics(&self, mut r: CreateTopicsRequest) -> Admission {
        let cluster = self.allows_quietly(
            Operation::Create,
            ResourceType::Cluster,
            sluice_acl::CLUSTER_NAME,
        );
        let mut denied = Vec::new();
        r.topics.retain(|t| {
            let keep = cluster || self.topic(Operation::Create, &t.name.0);
            if !keep {
                denied.push(t.name.clone());
            }
            keep
        });
        let check = self.quiet_check();
        let fix = patch(
            move |b: &mut CreateTopicsResponse| {
                for t in &mut b.topics {
                    if t.error_code == 0
                        && !check(Operation::DescribeConfigs, ResourceType::Topic, &t.name.0)
                    {
                        t.topic_config_error_code = TOPIC_DENIED.code();
                        t.configs = None;
                        t.num_partitions = -1;
                        t.replication_factor = -1;
                    }
                }
                b.topics.extend(denied.into_iter().map(|name| {
                    create_topics_response::CreatableTopicResult::default()
                        .with_name(name)
                        .with_error_code(TOPIC_DENIED.code())
                        .with_error_message(Some(str_bytes("Authorization failed.")))
                        .with_num_partitions(-1)
                        .with_replication_factor(-1)
                        .with_topic_config_error_code(TOPIC_DENIED.code())
                }));
            },
            pick!(CreateTopics),
        );
        Admission::Serve(RequestKind::CreateTopics(r), fix)
    }

    fn delete_topics(&self, mut r: DeleteTopicsRequest) -> Admission {
        let mut denied: Vec<delete_topics_response::DeletableTopicResult> = Vec::new();
        r.topic_names.retain(|name| {
            let keep = self.topic(Operation::Delete, &name.0);
            if !keep {
                denied.push(
                    delete_topics_response::DeletableTopicResult::default()
                        .with_name(Some(name.clone()))
                        .with_error_code(TOPIC_DENIED.code()),
                );
            }
            keep
        });
        r.topics.retain(|t| {
            let name = match &t.name {
                Some(n) if !n.0.is_empty() => Some(n.0.to_string()),
                _ => self
                    .broker
                    .registry
                    .get_by_id(t.topic_id)
                    .map(|s| s.meta.name.clone()),
            };
            // A topic id that names nothing is the handler's to answer.
            let Some(name) = name else { return true };
            // By id, a topic the caller may not DESCRIBE is as good as unknown.
            let by_id = t.name.as_ref().is_none_or(|n| n.0.is_empty());
            let (keep, code, shown) = if by_id && !self.topic(Operation::Describe, &name) {
                (false, ResponseError::TopicAuthorizationFailed, None)
            } else if !self.topic(Operation::Delete, &name) {
                (false, TOPIC_DENIED, Some(topic_name(&name)))
            } else {
                (true, TOPIC_DENIED, None)
            };
            if !keep {
                denied.push(
                    delete_topics_response::DeletableTopicResult::default()
                        .with_name(shown)
                        .with_topic_id(t.topic_id)
                        .with_error_code(code.code()),
                );
            }
            keep
        });
        let fix = (!denied.is_empty())
            .then(|| {
                patch(
                    move |b: &mut DeleteTopicsResponse| b.responses.extend(denied),
                    pick!(DeleteTopics),
                )
            })
            .flatten();
        Admission::Serve(RequestKind::DeleteTopics(r), fix)
    }

    fn create_partitions(&self, mut r: CreatePartitionsRequest) -> Admission {
        let mut denied = Vec::new();
        r.topics.retain(|t| {
            let keep = self.topic(Operation::Alter, &t.name.0);
            if !keep {
                denied.push(t.name.clone());
            }
            keep
        });
        let fix = (!denied.is_empty())
            .then(|| {
                patch(
                    move |b: &mut CreatePartitionsResponse| {
                        b.results.extend(denied.into_iter().map(|name| {
                            create_partitions_response::CreatePartitionsTopicResult::default()
                                .with_name(name)
                                .with_error_code(TOPIC_DENIED.code())
                                .with_error_message(Some(str_bytes(
                                    "The topic authorization is failed.",
                                )))
                        }))
                    },
                    pick!(CreatePartitions),
                )
            })
            .flatten();
        Admission::Serve(RequestKind::CreatePartitions(r), fix)
    }

    fn delete_records(&self, mut r: DeleteRecordsRequest) -> Admission {
        let mut denied = Vec::new();
        r.topics.retain(|t| {
            let keep = self.topic(Operation::Delete, &t.name.0);
            if !keep {
                denied.push((
                    t.name.clone(),
                    t.partitions
                        .iter()
                        .map(|p| p.partition_index)
                        .collect::<Vec<_>>(),
                ));
            }
            keep
        });
        let fix = (!denied.is_empty())
            .then(|| {
                patch(
                    move |b: &mut DeleteRecordsResponse| {
                        for (name, parts) in denied {
                            b.topics.push(
                                delete_records_response::DeleteRecordsTopicResult::default()
                                    .with_name(name)
                                    .with_partitions(
                                        parts
                                            .into_iter()
                                            .map(|p| {
                                                delete_records_response::DeleteRecordsPartitionResult::default()
                                                    .with_partition_index(p)
                                                    .with_low_watermark(-1)
                                                    .with_error_code(TOPIC_DENIED.code())
                                            })
                                            .collect(),
                                    ),
                            );
                        }
                    },
                    pick!(DeleteRecords),
                )
            })
            .flatten();
        Admission::Serve(RequestKind::DeleteRecords(r), fix)
    }

    /// The operation a config resource needs, its ACL resource, and the error for it
    /// (Kafka's `ConfigResource` types: 2 topic, 4 broker, 8 broker logger, 16 client
    /// metrics, 32 group).
    fn config_resource(
        &self,
        resource_type: i8,
        name: &str,
        op: Operation,
    ) -> Option<ResponseError> {
        let (rt, acl_name, error) = match resource_type {
            2 => (ResourceType::Topic, name, TOPIC_DENIED),
            32 => (ResourceType::Group, name, GROUP_DENIED),
            _ => (
                ResourceType::Cluster,
                sluice_acl::CLUSTER_NAME,
                CLUSTER_DENIED,
            ),
        };
        (!self.allows(op, rt, acl_name)).then_some(error)
    }

    fn describe_configs(&self, mut r: DescribeConfigsRequest) -> Admission {
        let mut denied = Vec::new();
        r.resources.retain(|res| {
            match self.config_resource(
                res.resource_type,
                &res.resource_name,
                Operation::DescribeConfigs,
            ) {
                None => true,
                Some(error) => {
                    denied.push(
                        describe_configs_response::DescribeConfigsResult::default()
                            .with_error_code(error.code())
                            .with_error_message(Some(str_bytes(error.to_string())))
                            .with_resource_type(res.resource_type)
                            .with_resource_name(res.resource_name.clone()),
                    );
                    false
                }
            }
        });
        let fix = (!denied.is_empty())
            .then(|| {
                patch(
                    move |b: &mut DescribeConfigsResponse| b.results.extend(denied),
                    pick!(DescribeConfigs),
                )
            })
            .flatten();
        Admission::Serve(RequestKind::DescribeConfigs(r), fix)
    }

    fn alter_configs(&self, mut r: AlterConfigsRequest) -> Admission {
        let mut denied = Vec::new();
        r.resources.retain(|res| {
            match self.config_resource(
                res.resource_type,
                &res.resource_name,
                Operation::AlterConfigs,
            ) {
                None => true,
                Some(error) => {
                    denied.push(
                        alter_configs_response::AlterConfigsResourceResponse::default()
                            .with_error_code(error.code())
                            .with_error_message(Some(str_bytes(error.to_string())))
                            .with_resource_type(res.resource_type)
                            .with_resource_name(res.resource_name.clone()),
                    );
                    false
                }
            }
        });
        let fix = (!denied.is_empty())
            .then(|| {
                patch(
                    move |b: &mut AlterConfigsResponse| b.responses.extend(denied),
                    pick!(AlterConfigs),
                )
            })
            .flatten();
        Admission::Serve(RequestKind::AlterConfigs(r), fix)
    }

    fn incremental_alter_configs(&self, mut r: IncrementalAlterConfigsRequest) -> Admission {
        let mut denied = Vec::new();
        r.resources.retain(|res| {
            match self.config_resource(
                res.resource_type,
                &res.resource_name,
                Operation::AlterConfigs,
            ) {
                None => true,
                Some(error) => {
                    denied.push(
                        incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                            .with_error_code(error.code())
                            .with_error_message(Some(str_bytes(error.to_string())))
                            .with_resource_type(res.resource_type)
                            .with_resource_name(res.resource_name.clone()),
                    );
                    false
                }
            }
        });
        let fix = (!denied.is_empty())
            .then(|| {
                patch(
                    move |b: &mut IncrementalAlterConfigsResponse| b.responses.extend(denied),
                    pick!(IncrementalAlterConfigs),
                )
            })
            .flatten();
        Admission::Serve(RequestKind::IncrementalAlterConfigs(r), fix)
    }

    /// DescribeCluster needs nothing; its authorized operations are the cluster's when the
    /// caller may DESCRIBE it, else none (Kafka's `computeDescribeClusterResponse`).
    fn describe_cluster(&self, r: DescribeClusterRequest) -> Admission {
        if !r.include_cluster_authorized_operations {
            return Admission::Serve(RequestKind::DescribeCluster(r), None);
        }
        let check = self.quiet_check();
        let ops = self.operations();
        let fix = patch(
            move |b: &mut DescribeClusterResponse| {
                b.cluster_authorized_operations = if check(
                    Operation::Describe,
                    ResourceType::Cluster,
                    sluice_acl::CLUSTER_NAME,
                ) {
                    ops(ResourceType::Cluster, sluice_acl::CLUSTER_NAME)
                } else {
                    0
                };
            },
            pick!(DescribeCluster),
        );
        Admission::Serve(RequestKind::DescribeCluster(r), fix)
    }

    /// A transactional producer needs WRITE on its transactional id; an idempotent one
    /// IDEMPOTENT_WRITE on the cluster or WRITE on some topic.
    fn init_producer_id(&self, r: InitProducerIdRequest) -> Admission {
        let refused = |code: ResponseError| {
            Admission::Refuse(ResponseKind::InitProducerId(
                InitProducerIdResponse::default()
                    .with_error_code(code.code())
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1),
            ))
        };
        match &r.transactional_id {
            Some(id) if !self.allows(Operation::Write, ResourceType::TransactionalId, &id.0) => {
                refused(TXN_DENIED)
            }
            Some(_) => Admission::Serve(RequestKind::InitProducerId(r), None),
            None => {
                let idempotent = self.allows_quietly(
                    Operation::IdempotentWrite,
                    ResourceType::Cluster,
                    sluice_acl::CLUSTER_NAME,
                ) || self.broker.authz.allows_some(
                    self.client,
                    Operation::Write,
                    ResourceType::Topic,
                );
                if idempotent {
                    Admission::Serve(RequestKind::InitProducerId(r), None)
                } else {
                    refused(CLUSTER_DENIED)
                }
            }
        }
    }

    /// From a client (v3 and older): WRITE on the transactional id and on each topic; with a
    /// topic refused nothing is added (the other partitions answer OPERATION_NOT_ATTEMPTED).
    /// From a broker (v4+, KIP-890's verification): CLUSTER_ACTION.
    fn add_partitions_to_txn(&self, r: AddPartitionsToTxnRequest, version: i16) -> Admission {
        if version >= 4 {
            if self.allows_cluster(Operation::ClusterAction) {
                return Admission::Serve(RequestKind::AddPartitionsToTxn(r), None);
            }
            return Admission::Refuse(ResponseKind::AddPartitionsToTxn(
                AddPartitionsToTxnResponse::default().with_error_code(CLUSTER_DENIED.code()),
            ));
        }
        let topics: Vec<(TopicName, Vec<i32>)> = r
            .v3_and_below_topics
            .iter()
            .map(|t| (t.name.clone(), t.partitions.clone()))
            .collect();
        let id = r.v3_and_below_transactional_id.0.to_string();
        let results = if !self.allows(Operation::Write, ResourceType::TransactionalId, &id) {
            txn_partition_errors(&topics, |_| TXN_DENIED)
        } else {
            let denied: HashSet<String> = topics
                .iter()
                .map(|(n, _)| n.0.to_string())
                .filter(|n| !crate::is_internal_topic(n) && !self.topic(Operation::Write, n))
                .collect();
            if denied.is_empty() {
                return Admission::Serve(RequestKind::AddPartitionsToTxn(r), None);
            }
            txn_partition_errors(&topics, |name| {
                if denied.contains(name) {
                    TOPIC_DENIED
                } else {
                    ResponseError::OperationNotAttempted
                }
            })
        };
        Admission::Refuse(ResponseKind::AddPartitionsToTxn(
            AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(results),
        ))
    }

    fn add_offsets_to_txn(&self, r: AddOffsetsToTxnRequest) -> Admission {
        let code = if !self.allows(
            Operation::Write,
            ResourceType::TransactionalId,
            &r.transactional_id.0,
        ) {
            TXN_DENIED
        } else if !self.allows(Operation::Read, ResourceType::Group, &r.group_id.0) {
            GROUP_DENIED
        } else {
            return Admission::Serve(RequestKind::AddOffsetsToTxn(r), None);
        };
        Admission::Refuse(ResponseKind::AddOffsetsToTxn(
            AddOffsetsToTxnResponse::default().with_error_code(code.code()),
        ))
    }

    fn end_txn(&self, r: EndTxnRequest) -> Admission {
        if self.allows(
            Operation::Write,
            ResourceType::TransactionalId,
            &r.transactional_id.0,
        ) {
            return Admission::Serve(RequestKind::EndTxn(r), None);
        }
        Admission::Refuse(ResponseKind::EndTxn(
            EndTxnResponse::default()
                .with_error_code(TXN_DENIED.code())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        ))
    }

    fn txn_offset_commit(&self, mut r: TxnOffsetCommitRequest) -> Admission {
        let all: Vec<(TopicName, Vec<i32>)> = r
            .topics
            .iter()
            .map(|t| {
                (
                    t.name.clone(),
                    t.partitions.iter().map(|p| p.partition_index).collect(),
                )
            })
            .collect();
        let whole = if !self.allows(
            Operation::Write,
            ResourceType::TransactionalId,
            &r.transactional_id.0,
        ) {
            Some(TXN_DENIED)
        } else if !self.allows(Operation::Read, ResourceType::Group, &r.group_id.0) {
            Some(GROUP_DENIED)
        } else {
            None
        };
        if let Some(code) = whole {
            let body = TxnOffsetCommitResponse::default().with_topics(txn_commit_errors(all, code));
            return Admission::Refuse(ResponseKind::TxnOffsetCommit(body));
        }
        let mut denied = Vec::new();
        r.topics.retain(|t| {
            let keep = self.topic(Operation::Read, &t.name.0);
            if !keep {
                denied.push((
                    t.name.clone(),
                    t.partitions.iter().map(|p| p.partition_index).collect(),
                ));
            }
            keep
        });
        let fix = (!denied.is_empty())
            .then(|| {
                patch(
                    move |b: &mut TxnOffsetCommitResponse| {
                        b.topics.extend(txn_commit_errors(denied, TOPIC_DENIED))
                    },
                    pick!(TxnOffsetCommit),
                )
            })
            .flatten();
        Admission::Serve(RequestKind::TxnOffsetCommit(r), fix)
    }

    fn describe_transactions(&self, r: DescribeTransactionsRequest) -> Admission {
        let loud = {
            let (broker, client) = (self.broker.clone(), self.client.clone());
            move |op, rt, name: &str| broker.authz.allows(&client, op, rt, name, Audit::Log)
        };
        let check = self.quiet_check();
        let fix = patch(
            move |b: &mut DescribeTransactionsResponse| {
                for s in &mut b.transaction_states {
                    if !loud(
                        Operation::Describe,
                        ResourceType::TransactionalId,
                        &s.transactional_id.0,
                    ) {
                        *s = describe_transactions_response::TransactionState::default()
                            .with_transactional_id(s.transactional_id.clone())
                            .with_error_code(TXN_DENIED.code())
                            .with_transaction_state(str_bytes(""));
                        continue;
                    }
                    s.topics
                        .retain(|t| check(Operation::Describe, ResourceType::Topic, &t.topic.0));
                }
            },
            pick!(DescribeTransactions),
        );
        Admission::Serve(RequestKind::DescribeTransactions(r), fix)
    }

    fn list_transactions(&self, r: ListTransactionsRequest) -> Admission {
        let check = self.quiet_check();
        let fix = patch(
            move |b: &mut ListTransactionsResponse| {
                b.transaction_states.retain(|s| {
                    check(
                        Operation::Describe,
                        ResourceType::TransactionalId,
                        &s.transactional_id.0,
                    )
                })
            },
            pick!(ListTransactions),
        );
        Admission::Serve(RequestKind::ListTransactions(r), fix)
    }

    fn describe_producers(&self, r: DescribeProducersRequest) -> Admission {
        let loud = {
            let (broker, client) = (self.broker.clone(), self.client.clone());
            move |name: &str| {
                broker.authz.allows(
                    &client,
                    Operation::Read,
                    ResourceType::Topic,
                    name,
                    Audit::Log,
                )
            }
        };
        let fix = patch(
            move |b: &mut DescribeProducersResponse| {
                for t in &mut b.topics {
                    if !loud(&t.name.0) {
                        for p in &mut t.partitions {
                            *p = describe_producers_response::PartitionResponse::default()
                                .with_partition_index(p.partition_index)
                                .with_error_code(TOPIC_DENIED.code())
                                .with_error_message(Some(str_bytes(TOPIC_DENIED.to_string())));
                        }
                    }
                }
            },
            pick!(DescribeProducers),
        );
        Admission::Serve(RequestKind::DescribeProducers(r), fix)
    }

    fn offset_for_leader_epoch(&self, r: OffsetForLeaderEpochRequest) -> Admission {
        if self.allows_quietly(
            Operation::ClusterAction,
            ResourceType::Cluster,
            sluice_acl::CLUSTER_NAME,
        ) {
            return Admission::Serve(RequestKind::OffsetForLeaderEpoch(r), None);
        }
        let loud = self.describes_topic();
        let fix = patch(
            move |b: &mut OffsetForLeaderEpochResponse| {
                for t in &mut b.topics {
                    if !loud(&t.topic.0) {
                        for p in &mut t.partitions {
                            *p = offset_for_leader_epoch_response::EpochEndOffset::default()
                                .with_partition(p.partition)
                                .with_error_code(TOPIC_DENIED.code())
                                .with_leader_epoch(-1)
                                .with_end_offset(-1);
                        }
                    }
                }
            },
            pick!(OffsetForLeaderEpoch),
        );
        Admission::Serve(RequestKind::OffsetForLeaderEpoch(r), fix)
    }

    fn describe_topic_partitions(&self, r: DescribeTopicPartitionsRequest) -> Admission {
        let all_topics = r.topics.is_empty();
        let check = self.quiet_check();
        let loud = self.describes_topic();
        let fix = patch(
            move |b: &mut DescribeTopicPartitionsResponse| {
                b.topics.retain_mut(|t| {
                    let Some(name) = t.name.as_ref().map(|n| n.0.to_string()) else {
                        return true;
                    };
                    let allowed = if all_topics {
                        check(Operation::Describe, ResourceType::Topic, &name)
                    } else {
                        loud(&name)
                    };
                    if allowed {
                        return true;
                    }
                    if all_topics {
                        return false;
                    }
                    *t = describe_topic_partitions_response::DescribeTopicPartitionsResponseTopic::default()
                        .with_name(Some(topic_name(&name)))
                        .with_error_code(TOPIC_DENIED.code())
                        .with_topic_authorized_operations(OPERATIONS_NOT_ASKED);
                    true
                });
            },
            pick!(DescribeTopicPartitions),
        );
        Admission::Serve(RequestKind::DescribeTopicPartitions(r), fix)
    }

    /// The APIs that need one operation on the cluster, refused whole without it; every other
    /// API needs nothing (ApiVersions, the SASL requests, the delegation-token APIs, which
    /// are not served).
    fn cluster_gated(&self, body: RequestKind) -> Admission {
        let needs = match &body {
            RequestKind::DescribeAcls(_)
            | RequestKind::DescribeLogDirs(_)
            | RequestKind::ListPartitionReassignments(_)
            | RequestKind::DescribeUserScramCredentials(_) => Operation::Describe,
            RequestKind::CreateAcls(_)
            | RequestKind::DeleteAcls(_)
            | RequestKind::AlterReplicaLogDirs(_)
            | RequestKind::ElectLeaders(_)
            | RequestKind::AlterPartitionReassignments(_)
            | RequestKind::AlterUserScramCredentials(_) => Operation::Alter,
            RequestKind::DescribeClientQuotas(_) | RequestKind::ListConfigResources(_) => {
                Operation::DescribeConfigs
            }
            RequestKind::UpdateFeatures(_) | RequestKind::UnregisterBroker(_) => Operation::Alter,
            RequestKind::ReadShareGroupState(_)
            | RequestKind::WriteShareGroupState(_)
            | RequestKind::ReadShareGroupStateSummary(_)
            | RequestKind::InitializeShareGroupState(_)
            | RequestKind::DeleteShareGroupState(_) => Operation::ClusterAction,
            RequestKind::AlterClientQuotas(_) => Operation::AlterConfigs,
            RequestKind::WriteTxnMarkers(_) => {
                // Kafka takes ALTER on the cluster (quietly) as well as CLUSTER_ACTION.
                if self.allows_quietly(
                    Operation::Alter,
                    ResourceType::Cluster,
                    sluice_acl::CLUSTER_NAME,
                ) {
                    return Admission::Serve(body, None);
                }
                Operation::ClusterAction
            }
            _ => return Admission::Serve(body, None),
        };
        if self.allows_cluster(needs) {
            return Admission::Serve(body, None);
        }
        Admission::Refuse(cluster_refusal(body))
    }
}

/// The answer to a request refused for want of an operation on the cluster: Kafka's
/// `getErrorResponse` with CLUSTER_AUTHORIZATION_FAILED (with its message where the response
/// has one), on the request's own items where the response lists them.
fn cluster_refusal(body: RequestKind) -> ResponseKind {
    let code = CLUSTER_DENIED.code();
    let message = cluster_denied_message;
    match body {
        RequestKind::DescribeAcls(_) => ResponseKind::DescribeAcls(
            DescribeAclsResponse::default()
                .with_error_code(code)
                .with_error_message(message()),
        ),
        RequestKind::CreateAcls(r) => ResponseKind::CreateAcls(refused_acl_creations(&r)),
        RequestKind::DeleteAcls(r) => ResponseKind::DeleteAcls(refused_acl_deletions(&r)),
        RequestKind::DescribeLogDirs(_) => {
            ResponseKind::DescribeLogDirs(DescribeLogDirsResponse::default().with_error_code(code))
        }
        RequestKind::AlterReplicaLogDirs(r) => {
            ResponseKind::AlterReplicaLogDirs(refused_log_dir_moves(&r))
        }
        RequestKind::ElectLeaders(_) => {
            ResponseKind::ElectLeaders(ElectLeadersResponse::default().with_error_code(code))
        }
        RequestKind::AlterPartitionReassignments(_) => ResponseKind::AlterPartitionReassignments(
            AlterPartitionReassignmentsResponse::default()
                .with_error_code(code)
                .with_error_message(message()),
        ),
        RequestKind::ListPartitionReassignments(_) => ResponseKind::ListPartitionReassignments(
            ListPartitionReassignmentsResponse::default()
                .with_error_code(code)
                .with_error_message(message()),
        ),
        RequestKind::DescribeUserScramCredentials(_) => ResponseKind::DescribeUserScramCredentials(
            DescribeUserScramCredentialsResponse::default()
                .with_error_code(code)
                .with_error_message(message()),
        ),
        RequestKind::AlterUserScramCredentials(r) => {
            ResponseKind::AlterUserScramCredentials(refused_scram_alterations(&r))
        }
        RequestKind::DescribeClientQuotas(_) => ResponseKind::DescribeClientQuotas(
            DescribeClientQuotasResponse::default()
                .with_error_code(code)
                .with_error_message(message()),
        ),
        RequestKind::AlterClientQuotas(r) => {
            ResponseKind::AlterClientQuotas(refused_quota_alterations(&r))
        }
        RequestKind::WriteTxnMarkers(r) => ResponseKind::WriteTxnMarkers(refused_markers(&r)),
        RequestKind::ListConfigResources(_) => ResponseKind::ListConfigResources(
            ListConfigResourcesResponse::default().with_error_code(code),
        ),
        RequestKind::UpdateFeatures(_) => ResponseKind::UpdateFeatures(
            UpdateFeaturesResponse::default()
                .with_error_code(code)
                .with_error_message(message()),
        ),
        RequestKind::UnregisterBroker(_) => ResponseKind::UnregisterBroker(
            UnregisterBrokerResponse::default()
                .with_error_code(code)
                .with_error_message(message()),
        ),
        // Not gated (cluster_gated lists the ones that are).
        _ => ResponseKind::DescribeAcls(DescribeAclsResponse::default().with_error_code(code)),
    }
}

/// CLUSTER_AUTHORIZATION_FAILED's message, as the refused responses that have one carry it.
fn cluster_denied_message() -> Option<kafka_protocol::protocol::StrBytes> {
    Some(str_bytes(CLUSTER_DENIED.to_string()))
}

/// CreateAcls refused ([`cluster_refusal`]): each creation answered CLUSTER_AUTHORIZATION_FAILED.
fn refused_acl_creations(r: &CreateAclsRequest) -> CreateAclsResponse {
    CreateAclsResponse::default().with_results(
        r.creations
            .iter()
            .map(|_| {
                create_acls_response::AclCreationResult::default()
                    .with_error_code(CLUSTER_DENIED.code())
                    .with_error_message(cluster_denied_message())
            })
            .collect(),
    )
}

/// DeleteAcls refused ([`cluster_refusal`]): each filter answered CLUSTER_AUTHORIZATION_FAILED.
fn refused_acl_deletions(r: &DeleteAclsRequest) -> DeleteAclsResponse {
    DeleteAclsResponse::default().with_filter_results(
        r.filters
            .iter()
            .map(|_| {
                delete_acls_response::DeleteAclsFilterResult::default()
                    .with_error_code(CLUSTER_DENIED.code())
                    .with_error_message(cluster_denied_message())
            })
            .collect(),
    )
}

/// AlterReplicaLogDirs refused ([`cluster_refusal`]): every partition the request moves, its
/// topics merged over the dirs and in name order (as Kafka's answer groups them), answered
/// CLUSTER_AUTHORIZATION_FAILED.
fn refused_log_dir_moves(r: &AlterReplicaLogDirsRequest) -> AlterReplicaLogDirsResponse {
    use alter_replica_log_dirs_response::{
        AlterReplicaLogDirPartitionResult, AlterReplicaLogDirTopicResult,
    };
    let mut topics: BTreeMap<TopicName, Vec<i32>> = BTreeMap::new();
    for d in &r.dirs {
        for t in &d.topics {
            topics
                .entry(t.name.clone())
                .or_default()
                .extend(&t.partitions);
        }
    }
    AlterReplicaLogDirsResponse::default().with_results(
        topics
            .into_iter()
            .map(|(name, parts)| {
                AlterReplicaLogDirTopicResult::default()
                    .with_topic_name(name)
                    .with_partitions(
                        parts
                            .into_iter()
                            .map(|p| {
                                AlterReplicaLogDirPartitionResult::default()
                                    .with_partition_index(p)
                                    .with_error_code(CLUSTER_DENIED.code())
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

/// AlterUserScramCredentials refused ([`cluster_refusal`]): each user the request names (its
/// deletions and upsertions, once each, in name order) answered CLUSTER_AUTHORIZATION_FAILED.
fn refused_scram_alterations(
    r: &AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    use alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
    let users: std::collections::BTreeSet<String> = r
        .deletions
        .iter()
        .map(|d| d.name.to_string())
        .chain(r.upsertions.iter().map(|u| u.name.to_string()))
        .collect();
    AlterUserScramCredentialsResponse::default().with_results(
        users
            .into_iter()
            .map(|u| {
                AlterUserScramCredentialsResult::default()
                    .with_user(str_bytes(u))
                    .with_error_code(CLUSTER_DENIED.code())
                    .with_error_message(cluster_denied_message())
            })
            .collect(),
    )
}

/// AlterClientQuotas refused ([`cluster_refusal`]): each entry, with its entity, answered
/// CLUSTER_AUTHORIZATION_FAILED.
fn refused_quota_alterations(r: &AlterClientQuotasRequest) -> AlterClientQuotasResponse {
    use alter_client_quotas_response::{EntityData, EntryData};
    AlterClientQuotasResponse::default().with_entries(
        r.entries
            .iter()
            .map(|e| {
                EntryData::default()
                    .with_error_code(CLUSTER_DENIED.code())
                    .with_error_message(cluster_denied_message())
                    .with_entity(
                        e.entity
                            .iter()
                            .map(|x| {
                                EntityData::default()
                                    .with_entity_type(x.entity_type.clone())
                                    .with_entity_name(x.entity_name.clone())
                            })
                            .collect(),
                    )
            })
            .collect(),
    )
}

/// WriteTxnMarkers refused ([`cluster_refusal`]): every partition of every marker answered
/// CLUSTER_AUTHORIZATION_FAILED, under its producer and topic.
fn refused_markers(r: &WriteTxnMarkersRequest) -> WriteTxnMarkersResponse {
    use write_txn_markers_response::{
        WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
    };
    let topic = |t: &write_txn_markers_request::WritableTxnMarkerTopic| {
        WritableTxnMarkerTopicResult::default()
            .with_name(t.name.clone())
            .with_partitions(
                t.partition_indexes
                    .iter()
                    .map(|&p| {
                        WritableTxnMarkerPartitionResult::default()
                            .with_partition_index(p)
                            .with_error_code(CLUSTER_DENIED.code())
                    })
                    .collect(),
            )
    };
    WriteTxnMarkersResponse::default().with_markers(
        r.markers
            .iter()
            .map(|m| {
                WritableTxnMarkerResult::default()
                    .with_producer_id(m.producer_id)
                    .with_topics(m.topics.iter().map(topic).collect())
            })
            .collect(),
    )
}

fn error_topic(
    name: Option<String>,
    id: uuid::Uuid,
    code: ResponseError,
) -> metadata_response::MetadataResponseTopic {
    metadata_response::MetadataResponseTopic::default()
        .with_error_code(code.code())
        .with_name(name.map(|n| topic_name(&n)))
        .with_topic_id(id)
        .with_topic_authorized_operations(OPERATIONS_NOT_ASKED)
}

fn produce_errors(
    topics: Vec<(String, Vec<i32>)>,
    code: ResponseError,
) -> Vec<produce_response::TopicProduceResponse> {
    topics
        .into_iter()
        .map(|(name, parts)| {
            produce_response::TopicProduceResponse::default()
                .with_name(topic_name(&name))
                .with_partition_responses(
                    parts
                        .into_iter()
                        .map(|p| {
                            produce_response::PartitionProduceResponse::default()
                                .with_index(p)
                                .with_error_code(code.code())
                                .with_base_offset(-1)
                                .with_log_append_time_ms(-1)
                                .with_log_start_offset(-1)
                        })
                        .collect(),
                )
        })
        .collect()
}

fn commit_errors(
    topics: Vec<(TopicName, Vec<i32>)>,
    code: ResponseError,
) -> Vec<offset_commit_response::OffsetCommitResponseTopic> {
    topics
        .into_iter()
        .map(|(name, parts)| {
            offset_commit_response::OffsetCommitResponseTopic::default()
                .with_name(name)
                .with_partitions(
                    parts
                        .into_iter()
                        .map(|p| {
                            offset_commit_response::OffsetCommitResponsePartition::default()
                                .with_partition_index(p)
                                .with_error_code(code.code())
                        })
                        .collect(),
                )
        })
        .collect()
}

fn txn_commit_errors(
    topics: Vec<(TopicName, Vec<i32>)>,
    code: ResponseError,
) -> Vec<txn_offset_commit_response::TxnOffsetCommitResponseTopic> {
    topics
        .into_iter()
        .map(|(name, parts)| {
            txn_offset_commit_response::TxnOffsetCommitResponseTopic::default()
                .with_name(name)
                .with_partitions(
                    parts
                        .into_iter()
                        .map(|p| {
                            txn_offset_commit_response::TxnOffsetCommitResponsePartition::default()
                                .with_partition_index(p)
                                .with_error_code(code.code())
                        })
                        .collect(),
                )
        })
        .collect()
}

fn txn_partition_errors(
    topics: &[(TopicName, Vec<i32>)],
    code_of: impl Fn(&str) -> ResponseError,
) -> Vec<add_partitions_to_txn_response::AddPartitionsToTxnTopicResult> {
    topics
        .iter()
        .map(|(name, parts)| {
            let code = code_of(&name.0).code();
            add_partitions_to_txn_response::AddPartitionsToTxnTopicResult::default()
                .with_name(name.clone())
                .with_results_by_partition(
                    parts
                        .iter()
                        .map(|&p| {
                            add_partitions_to_txn_response::AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(p)
                                .with_partition_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect()
}

/// Fetch: a follower's fetch (a replica id) needs CLUSTER_ACTION; a consumer's, READ on each
/// topic. Returns the request to serve and the partitions refused, by topic (name, id), to be
/// answered TOPIC_AUTHORIZATION_FAILED.
pub(crate) fn fetch(
    broker: &Broker,
    mut r: FetchRequest,
    client: &Client,
) -> (FetchRequest, Vec<fetch_response::FetchableTopicResponse>) {
    if !broker.authz.enabled() {
        return (r, Vec::new());
    }
    let follower = r.replica_id.0 >= 0 || r.replica_state.replica_id.0 >= 0;
    let cluster = follower
        && broker
            .authz
            .allows_cluster(client, Operation::ClusterAction);
    let mut denied = Vec::new();
    r.topics.retain(|t| {
        let name = if t.topic.0.is_empty() && !t.topic_id.is_nil() {
            match broker.registry.get_by_id(t.topic_id) {
                Some(s) => s.meta.name.clone(),
                // An unknown id is the handler's to answer (UNKNOWN_TOPIC_ID).
                None => return true,
            }
        } else {
            t.topic.0.to_string()
        };
        let keep = if follower {
            cluster
        } else {
            broker.authz.allows(
                client,
                Operation::Read,
                ResourceType::Topic,
                &name,
                Audit::Log,
            )
        };
        if !keep {
            denied.push(
                fetch_response::FetchableTopicResponse::default()
                    .with_topic(t.topic.clone())
                    .with_topic_id(t.topic_id)
                    .with_partitions(
                        t.partitions
                            .iter()
                            .map(|p| {
                                fetch_response::PartitionData::default()
                                    .with_partition_index(p.partition)
                                    .with_error_code(TOPIC_DENIED.code())
                                    .with_high_watermark(-1)
                                    .with_last_stable_offset(-1)
                                    .with_log_start_offset(-1)
                            })
                            .collect(),
                    ),
            );
        }
        keep
    });
    (r, denied)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A refused AlterReplicaLogDirs answers each topic once, its partitions of every dir
    /// together, in name order; a refused AlterUserScramCredentials each user once.
    #[test]
    fn refused_cluster_requests_answer_each_topic_and_user_once() {
        use alter_replica_log_dirs_request::{AlterReplicaLogDir, AlterReplicaLogDirTopic};
        let dir = |topics: Vec<(&str, Vec<i32>)>| {
            AlterReplicaLogDir::default().with_topics(
                topics
                    .into_iter()
                    .map(|(t, ps)| {
                        AlterReplicaLogDirTopic::default()
                            .with_name(topic_name(t))
                            .with_partitions(ps)
                    })
                    .collect(),
            )
        };
        let r = AlterReplicaLogDirsRequest::default().with_dirs(vec![
            dir(vec![("b", vec![0]), ("a", vec![1])]),
            dir(vec![("b", vec![2])]),
        ]);
        let answered: Vec<(String, i32, i16)> = refused_log_dir_moves(&r)
            .results
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .map(|p| (t.topic_name.0.to_string(), p.partition_index, p.error_code))
            })
            .collect();
        let denied = CLUSTER_DENIED.code();
        assert_eq!(
            answered,
            vec![
                ("a".to_string(), 1, denied),
                ("b".to_string(), 0, denied),
                ("b".to_string(), 2, denied),
            ]
        );
        let r = AlterUserScramCredentialsRequest::default()
            .with_deletions(vec![
                alter_user_scram_credentials_request::ScramCredentialDeletion::default()
                    .with_name(str_bytes("bob")),
            ])
            .with_upsertions(vec![
                alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
                    .with_name(str_bytes("bob")),
                alter_user_scram_credentials_request::ScramCredentialUpsertion::default()
                    .with_name(str_bytes("alice")),
            ]);
        let users: Vec<(String, i16)> = refused_scram_alterations(&r)
            .results
            .iter()
            .map(|u| (u.user.to_string(), u.error_code))
            .collect();
        assert_eq!(
            users,
            vec![("alice".to_string(), denied), ("bob".to_string(), denied)]
        );
    }
}

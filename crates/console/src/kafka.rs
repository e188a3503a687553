//! The console's Kafka client: every page reads and every action writes through the
//! cluster's own Kafka API, as Kafka's tools do (Metadata, then each request to the partition's
//! leader, the group's coordinator or the controller), so a page shows what `kafka-topics`,
//! `kafka-consumer-groups` and `kafka-console-consumer` would for the same state, on any
//! broker of a cluster, and the broker's authorizer judges every request.
//!
//! Requests go over the broker's [`PeerClient`] (one connection per broker, TLS when the
//! console's Kafka listener is an SSL one).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::describe_configs_response::DescribeConfigsResourceResult;
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{
    ApiKey, BrokerId, CreateTopicsRequest, DescribeConfigsRequest, DescribeGroupsRequest,
    DescribeLogDirsRequest, FetchRequest, FindCoordinatorRequest, GroupId, ListGroupsRequest,
    ListOffsetsRequest, MetadataRequest, MetadataResponse, OffsetFetchRequest, ProduceRequest,
    RequestKind, ResponseKind, TopicName,
};
use kafka_protocol::protocol::{Request, StrBytes};
use kafka_protocol::ResponseError;
use sluice_broker::PeerClient;

/// What a failed call says: a Kafka error by name, or why the broker could not be asked.
pub(crate) type Res<T> = Result<T, String>;

pub(crate) fn error_name(code: i16) -> String {
    match ResponseError::try_from_code(code) {
        Some(e) => format!("{e:?}"),
        None if code == 0 => "NONE".into(),
        None => format!("error code {code}"),
    }
}

pub(crate) fn check(code: i16, what: &str) -> Res<()> {
    if code == 0 {
        Ok(())
    } else {
        Err(format!("{what}: {}", error_name(code)))
    }
}

pub(crate) fn s(v: impl Into<String>) -> StrBytes {
    StrBytes::from_string(v.into())
}

/// A broker of the cluster as Metadata names it.
#[derive(Clone, Debug)]
pub(crate) struct Node {
    pub(crate) id: i32,
    pub(crate) host: String,
    pub(crate) port: u16,
    pub(crate) rack: Option<String>,
}

/// A topic as Metadata names it.
#[derive(Clone, Debug)]
pub(crate) struct Topic {
    pub(crate) internal: bool,
    pub(crate) error: i16,
    /// Leader per partition, by index.
    pub(crate) leaders: BTreeMap<i32, i32>,
    pub(crate) epochs: BTreeMap<i32, i32>,
}

/// The cluster as one Metadata answer shows it.
#[derive(Clone, Debug, Default)]
pub(crate) struct Cluster {
    pub(crate) cluster_id: Option<String>,
    pub(crate) controller: i32,
    pub(crate) nodes: BTreeMap<i32, Node>,
    pub(crate) topics: BTreeMap<String, Topic>,
}

impl Cluster {
    fn from(m: MetadataResponse) -> Res<Cluster> {
        check(m.error_code, "Metadata")?;
        let nodes = m
            .brokers
            .into_iter()
            .map(|b| {
                let id = b.node_id.0;
                (
                    id,
                    Node {
                        id,
                        host: b.host.to_string(),
                        port: u16::try_from(b.port).unwrap_or(0),
                        rack: b.rack.map(|r| r.to_string()),
                    },
                )
            })
            .collect();
        let topics = m
            .topics
            .into_iter()
            .filter_map(|t| {
                let name = t.name?.0.to_string();
                let leaders = t
                    .partitions
                    .iter()
                    .map(|p| (p.partition_index, p.leader_id.0))
                    .collect();
                let epochs = t
                    .partitions
                    .iter()
                    .map(|p| (p.partition_index, p.leader_epoch))
                    .collect();
                Some((
                    name,
                    Topic {
                        internal: t.is_internal,
                        error: t.error_code,
                        leaders,
                        epochs,
                    },
                ))
            })
            .collect();
        Ok(Cluster {
            cluster_id: m.cluster_id.map(|c| c.to_string()),
            controller: m.controller_id.0,
            nodes,
            topics,
        })
    }

    /// The leader of a partition, or why there is none.
    pub(crate) fn leader(&self, topic: &str, partition: i32) -> Res<i32> {
        self.topics
            .get(topic)
            .and_then(|t| t.leaders.get(&partition))
            .copied()
            .filter(|l| *l >= 0)
            .ok_or_else(|| format!("{topic}-{partition} has no leader"))
    }

    /// Partitions each broker leads.
    pub(crate) fn led(&self) -> HashMap<i32, usize> {
        let mut led = HashMap::new();
        for t in self.topics.values() {
            for l in t.leaders.values() {
                *led.entry(*l).or_default() += 1;
            }
        }
        led
    }
}

/// A partition's offsets: log start, high watermark.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Offsets {
    pub(crate) start: i64,
    pub(crate) end: i64,
}

/// A broker's log directory as DescribeLogDirs describes it.
#[derive(Clone, Debug)]
pub(crate) struct LogDir {
    pub(crate) path: String,
    pub(crate) error: i16,
    /// The volume's size and free space (-1: unknown).
    pub(crate) total: i64,
    pub(crate) usable: i64,
    /// Bytes of the partitions in it.
    pub(crate) bytes: i64,
}

/// A config of a topic or broker as DescribeConfigs answers it.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) name: String,
    pub(crate) value: Option<String>,
    pub(crate) source: &'static str,
    pub(crate) sensitive: bool,
    pub(crate) read_only: bool,
}

fn config_source(code: i8) -> &'static str {
    match code {
        1 => "DYNAMIC_TOPIC_CONFIG",
        2 => "DYNAMIC_BROKER_CONFIG",
        3 => "DYNAMIC_DEFAULT_BROKER_CONFIG",
        4 => "STATIC_BROKER_CONFIG",
        5 => "DEFAULT_CONFIG",
        6 => "DYNAMIC_BROKER_LOGGER_CONFIG",
        7 => "CLIENT_METRICS_CONFIG",
        8 => "GROUP_CONFIG",
        _ => "UNKNOWN",
    }
}

/// A group as ListGroups names it.
#[derive(Clone, Debug)]
pub(crate) struct ListedGroup {
    pub(crate) id: String,
    pub(crate) protocol_type: String,
    pub(crate) state: String,
    pub(crate) kind: String,
}

impl From<kafka_protocol::messages::list_groups_response::ListedGroup> for ListedGroup {
    fn from(g: kafka_protocol::messages::list_groups_response::ListedGroup) -> ListedGroup {
        ListedGroup {
            id: g.group_id.0.to_string(),
            protocol_type: g.protocol_type.to_string(),
            state: g.group_state.to_string(),
            kind: g.group_type.to_string(),
        }
    }
}

/// A member of a classic group.
#[derive(Clone, Debug)]
pub(crate) struct Member {
    pub(crate) id: String,
    pub(crate) instance_id: Option<String>,
    pub(crate) client_id: String,
    pub(crate) host: String,
    /// The assigned partitions, decoded from a consumer protocol assignment.
    pub(crate) assignment: Vec<(String, i32)>,
}

/// A group as DescribeGroups answers it.
#[derive(Clone, Debug)]
pub(crate) struct DescribedGroup {
    pub(crate) protocol_type: String,
    pub(crate) protocol: String,
    pub(crate) members: Vec<Member>,
}

/// A request the console sends, the version it sends it at, and its answer taken out of the
/// [`ResponseKind`] it came back in.
pub(crate) trait Ask: Request + Into<RequestKind> {
    const VERSION: i16;
    fn answer(kind: ResponseKind) -> Option<Self::Response>;
}

macro_rules! asks {
    ($($kind:ident: $req:ident => $resp:ident @ $version:literal),* $(,)?) => {$(
        impl Ask for kafka_protocol::messages::$req {
            const VERSION: i16 = $version;
            fn answer(kind: ResponseKind) -> Option<kafka_protocol::messages::$resp> {
                match kind {
                    ResponseKind::$kind(r) => Some(r),
                    _ => None,
                }
            }
        }
    )*};
}

asks! {
    Metadata: MetadataRequest => MetadataResponse @ 12,
    ListOffsets: ListOffsetsRequest => ListOffsetsResponse @ 7,
    Fetch: FetchRequest => FetchResponse @ 12,
    DescribeConfigs: DescribeConfigsRequest => DescribeConfigsResponse @ 4,
    CreateTopics: CreateTopicsRequest => CreateTopicsResponse @ 7,
    Produce: ProduceRequest => ProduceResponse @ 9,
    ListGroups: ListGroupsRequest => ListGroupsResponse @ 5,
    DescribeGroups: DescribeGroupsRequest => DescribeGroupsResponse @ 5,
    FindCoordinator: FindCoordinatorRequest => FindCoordinatorResponse @ 4,
    OffsetFetch: OffsetFetchRequest => OffsetFetchResponse @ 8,
    DescribeLogDirs: DescribeLogDirsRequest => DescribeLogDirsResponse @ 4,
    OffsetCommit: OffsetCommitRequest => OffsetCommitResponse @ 9,
    DeleteGroups: DeleteGroupsRequest => DeleteGroupsResponse @ 2,
    // v6 names topics in `topics` (v0-5 in `topic_names`).
    DeleteTopics: DeleteTopicsRequest => DeleteTopicsResponse @ 6,
    CreatePartitions: CreatePartitionsRequest => CreatePartitionsResponse @ 3,
    IncrementalAlterConfigs: IncrementalAlterConfigsRequest => IncrementalAlterConfigsResponse @ 1,
    DeleteRecords: DeleteRecordsRequest => DeleteRecordsResponse @ 2,
    ListTransactions: ListTransactionsRequest => ListTransactionsResponse @ 1,
    DescribeTransactions: DescribeTransactionsRequest => DescribeTransactionsResponse @ 0,
    DescribeProducers: DescribeProducersRequest => DescribeProducersResponse @ 0,
    WriteTxnMarkers: WriteTxnMarkersRequest => WriteTxnMarkersResponse @ 1,
    DescribeClientQuotas: DescribeClientQuotasRequest => DescribeClientQuotasResponse @ 1,
    AlterClientQuotas: AlterClientQuotasRequest => AlterClientQuotasResponse @ 1,
    DescribeAcls: DescribeAclsRequest => DescribeAclsResponse @ 3,
    CreateAcls: CreateAclsRequest => CreateAclsResponse @ 3,
    DeleteAcls: DeleteAclsRequest => DeleteAclsResponse @ 3,
    DescribeUserScramCredentials: DescribeUserScramCredentialsRequest => DescribeUserScramCredentialsResponse @ 0,
    ConsumerGroupDescribe: ConsumerGroupDescribeRequest => ConsumerGroupDescribeResponse @ 1,
    ShareGroupDescribe: ShareGroupDescribeRequest => ShareGroupDescribeResponse @ 1,
    DescribeShareGroupOffsets: DescribeShareGroupOffsetsRequest => DescribeShareGroupOffsetsResponse @ 1,
}

/// The first item of an answer's list, or what was missing.
pub(crate) fn first<T>(items: impl IntoIterator<Item = T>, what: &str) -> Res<T> {
    items
        .into_iter()
        .next()
        .ok_or_else(|| format!("{what} answered nothing"))
}

/// An error code and message as one sentence part.
pub(crate) fn failed(code: i16, message: Option<StrBytes>) -> Res<()> {
    if code == 0 {
        return Ok(());
    }
    Err(format!(
        "{}{}",
        error_name(code),
        message.map(|m| format!(": {m}")).unwrap_or_default()
    ))
}

/// Talks to the cluster through one broker (its bootstrap address) and then to each broker
/// Metadata names.
#[derive(Clone, Debug)]
pub(crate) struct Kafka {
    peers: Arc<dyn PeerClient>,
    bootstrap: (String, u16),
}

/// Groups one OffsetFetch of [`Kafka::committed_of_groups`] asks for.
const GROUPS_PER_OFFSET_FETCH: usize = 100;

/// Time a write may take on the broker (CreateTopics, Produce).
const WRITE_TIMEOUT_MS: i32 = 30_000;

impl Kafka {
    pub(crate) fn new(peers: Arc<dyn PeerClient>, bootstrap: (String, u16)) -> Kafka {
        Kafka { peers, bootstrap }
    }

    /// The broker the console asks first.
    pub(crate) fn bootstrap(&self) -> &(String, u16) {
        &self.bootstrap
    }

    /// Send `req` to the broker at `host:port` and wait for its answer.
    async fn ask_at<R: Ask>(&self, (host, port): (&str, u16), req: R) -> Res<R::Response> {
        let api = ApiKey::try_from(R::KEY).map_err(|_| format!("no API with key {}", R::KEY))?;
        let call = self.peers.call(host, port, api, R::VERSION, req.into());
        let kind = match tokio::time::timeout(sluice_broker::PEER_REQUEST_TIMEOUT, call).await {
            Ok(r) => r.map_err(|e| format!("{api:?} to {host}:{port}: {e}"))?,
            Err(_) => return Err(format!("{api:?} to {host}:{port}: no answer in time")),
        };
        R::answer(kind).ok_or_else(|| format!("{api:?} to {host}:{port}: another API answered"))
    }

    /// Send `req` to broker `node` of `cluster`.
    pub(crate) async fn ask<R: Ask>(
        &self,
        cluster: &Cluster,
        node: i32,
        req: R,
    ) -> Res<R::Response> {
        let n = cluster
            .nodes
            .get(&node)
            .ok_or_else(|| format!("broker {node} is not in the cluster's metadata"))?;
        self.ask_at((&n.host, n.port), req).await
    }

    /// Send `req` to the broker the console was given.
    pub(crate) async fn ask_bootstrap<R: Ask>(&self, req: R) -> Res<R::Response> {
        self.ask_at((&self.bootstrap.0, self.bootstrap.1), req)
            .await
    }

    /// The controller, or any broker when Metadata names none (Kafka's admin client sends
    /// topic and config changes there).
    pub(crate) fn controller(&self, cluster: &Cluster) -> Res<i32> {
        if cluster.nodes.contains_key(&cluster.controller) {
            Ok(cluster.controller)
        } else {
            cluster
                .nodes
                .keys()
                .next()
                .copied()
                .ok_or_else(|| "no broker in metadata".into())
        }
    }

    /// Metadata of every topic (None) or of `topics`.
    pub(crate) async fn cluster(&self, topics: Option<&[String]>) -> Res<Cluster> {
        use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
        let req = MetadataRequest::default()
            .with_allow_auto_topic_creation(false)
            .with_topics(topics.map(|ts| {
                ts.iter()
                    .map(|t| MetadataRequestTopic::default().with_name(Some(TopicName(s(t)))))
                    .collect()
            }));
        Cluster::from(self.ask_bootstrap(req).await?)
    }

    /// The offset at `timestamp` (-2 earliest, -1 latest) of each partition, asked of each
    /// leader.
    pub(crate) async fn list_offsets(
        &self,
        cluster: &Cluster,
        partitions: &[(String, i32)],
        timestamp: i64,
    ) -> BTreeMap<(String, i32), Res<i64>> {
        let mut by_leader: BTreeMap<i32, BTreeMap<String, Vec<i32>>> = BTreeMap::new();
        let mut out = BTreeMap::new();
        for (t, p) in partitions {
            match cluster.leader(t, *p) {
                Ok(l) => by_leader
                    .entry(l)
                    .or_default()
                    .entry(t.clone())
                    .or_default()
                    .push(*p),
                Err(e) => {
                    out.insert((t.clone(), *p), Err(e));
                }
            }
        }
        let calls = by_leader.into_iter().map(|(leader, topics)| {
            let req = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_topics(
                    topics
                        .into_iter()
                        .map(|(t, ps)| {
                            ListOffsetsTopic::default()
                                .with_name(TopicName(s(t)))
                                .with_partitions(
                                    ps.into_iter()
                                        .map(|p| {
                                            ListOffsetsPartition::default()
                                                .with_partition_index(p)
                                                .with_current_leader_epoch(-1)
                                                .with_timestamp(timestamp)
                                        })
                                        .collect(),
                                )
                        })
                        .collect(),
                );
            async move { (leader, self.ask(cluster, leader, req).await) }
        });
        for (leader, answer) in join_all(calls).await {
            match answer {
                Ok(r) => {
                    for t in r.topics {
                        for p in t.partitions {
                            let v = failed(p.error_code, None).map(|()| p.offset);
                            out.insert((t.name.0.to_string(), p.partition_index), v);
                        }
                    }
                }
                Err(e) => {
                    for (t, p) in partitions {
                        if cluster.leader(t, *p) == Ok(leader) {
                            out.insert((t.clone(), *p), Err(e.clone()));
                        }
                    }
                }
            }
        }
        out
    }

    /// Log start and high watermark of each partition.
    pub(crate) async fn offsets(
        &self,
        cluster: &Cluster,
        partitions: &[(String, i32)],
    ) -> BTreeMap<(String, i32), Res<Offsets>> {
        let (start, end) = tokio::join!(
            self.list_offsets(cluster, partitions, -2),
            self.list_offsets(cluster, partitions, -1)
        );
        partitions
            .iter()
            .map(|tp| {
                let v = match (start.get(tp), end.get(tp)) {
                    (Some(Ok(s)), Some(Ok(e))) => Ok(Offsets { start: *s, end: *e }),
                    (Some(Err(e)), _) | (_, Some(Err(e))) => Err(e.clone()),
                    _ => Err("no answer".into()),
                };
                (tp.clone(), v)
            })
            .collect()
    }

    /// Bytes on disk of each partition, from every broker's DescribeLogDirs (each answers for
    /// the partitions it serves).
    pub(crate) async fn sizes(
        &self,
        cluster: &Cluster,
        topics: &[String],
    ) -> HashMap<(String, i32), i64> {
        use kafka_protocol::messages::describe_log_dirs_request::DescribableLogDirTopic;
        let wanted: Vec<DescribableLogDirTopic> = topics
            .iter()
            .filter_map(|t| {
                let m = cluster.topics.get(t)?;
                Some(
                    DescribableLogDirTopic::default()
                        .with_topic(TopicName(s(t)))
                        .with_partitions(m.leaders.keys().copied().collect()),
                )
            })
            .collect();
        let calls = cluster.nodes.keys().map(|node| {
            let req = DescribeLogDirsRequest::default().with_topics(Some(wanted.clone()));
            self.ask(cluster, *node, req)
        });
        let mut out = HashMap::new();
        for r in join_all(calls).await.into_iter().flatten() {
            for dir in r.results {
                for t in dir.topics {
                    for p in t.partitions {
                        // A partition reported by two brokers (a move in flight): the larger.
                        let e = out
                            .entry((t.name.0.to_string(), p.partition_index))
                            .or_insert(0);
                        *e = (*e).max(p.partition_size);
                    }
                }
            }
        }
        out
    }

    /// Each broker's log directories: path, the volume's total and usable bytes, and the
    /// bytes of the partitions in it (DescribeLogDirs of every topic, asked of each broker).
    pub(crate) async fn log_dirs(&self, cluster: &Cluster) -> BTreeMap<i32, Res<Vec<LogDir>>> {
        let calls = cluster.nodes.keys().map(|node| async move {
            let req = DescribeLogDirsRequest::default().with_topics(None);
            (*node, self.ask(cluster, *node, req).await)
        });
        join_all(calls)
            .await
            .into_iter()
            .map(|(node, answer)| {
                let dirs = answer.and_then(|r| {
                    check(r.error_code, "DescribeLogDirs")?;
                    Ok(r.results
                        .into_iter()
                        .map(|d| LogDir {
                            path: d.log_dir.to_string(),
                            error: d.error_code,
                            total: d.total_bytes,
                            usable: d.usable_bytes,
                            bytes: d
                                .topics
                                .iter()
                                .flat_map(|t| t.partitions.iter())
                                .map(|p| p.partition_size)
                                .sum(),
                        })
                        .collect())
                });
                (node, dirs)
            })
            .collect()
    }

    /// Fetch up to `max_bytes` of one partition from `offset` (read_uncommitted, no wait):
    /// the record batches as the leader sent them, the high watermark and log start.
    pub(crate) async fn fetch(
        &self,
        cluster: &Cluster,
        topic: &str,
        partition: i32,
        offset: i64,
        max_bytes: i32,
    ) -> Res<(bytes::Bytes, i64, i64)> {
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_min_bytes(0)
            .with_max_bytes(max_bytes)
            .with_isolation_level(0)
            .with_session_id(0)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(s(topic)))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_current_leader_epoch(-1)
                    .with_fetch_offset(offset)
                    .with_last_fetched_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(max_bytes)])]);
        let r = self
            .ask(cluster, cluster.leader(topic, partition)?, req)
            .await?;
        check(r.error_code, "Fetch")?;
        let p = r
            .responses
            .into_iter()
            .flat_map(|t| t.partitions)
            .find(|p| p.partition_index == partition)
            .ok_or("Fetch answered without the partition")?;
        check(p.error_code, "Fetch")?;
        Ok((
            p.records.unwrap_or_default(),
            p.high_watermark,
            p.log_start_offset,
        ))
    }

    /// A topic's configs (resource type 2) or a broker's (4).
    pub(crate) async fn configs(
        &self,
        cluster: &Cluster,
        resource_type: i8,
        name: &str,
    ) -> Res<Vec<Config>> {
        let req = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(s(name))
                .with_configuration_keys(None),
        ]);
        // A broker's own configs are asked of that broker; a topic's of any.
        let node = if resource_type == 4 {
            name.parse()
                .map_err(|_| format!("{name} is not a broker id"))?
        } else {
            *cluster.nodes.keys().next().ok_or("no broker in metadata")?
        };
        let result = first(
            self.ask(cluster, node, req).await?.results,
            "DescribeConfigs",
        )?;
        failed(result.error_code, result.error_message)
            .map_err(|e| format!("DescribeConfigs: {e}"))?;
        Ok(result
            .configs
            .into_iter()
            .map(|c: DescribeConfigsResourceResult| Config {
                name: c.name.to_string(),
                value: c.value.map(|v| v.to_string()),
                source: config_source(c.config_source),
                sensitive: c.is_sensitive,
                read_only: c.read_only,
            })
            .collect())
    }

    /// Create a topic; the controller answers (Kafka's admin client asks it too).
    pub(crate) async fn create_topic(
        &self,
        cluster: &Cluster,
        name: &str,
        partitions: i32,
        configs: &[(String, String)],
    ) -> Res<()> {
        let req = CreateTopicsRequest::default()
            .with_timeout_ms(WRITE_TIMEOUT_MS)
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(s(name)))
                .with_num_partitions(partitions)
                .with_replication_factor(-1)
                .with_configs(
                    configs
                        .iter()
                        .map(|(k, v)| {
                            CreatableTopicConfig::default()
                                .with_name(s(k))
                                .with_value(Some(s(v)))
                        })
                        .collect(),
                )]);
        let r = self.ask(cluster, self.controller(cluster)?, req).await?;
        let t = first(r.topics, "CreateTopics")?;
        failed(t.error_code, t.error_message)
    }

    /// Append one record batch to a partition (acks=all); the offset it was given.
    pub(crate) async fn produce(
        &self,
        cluster: &Cluster,
        topic: &str,
        partition: i32,
        batch: Vec<u8>,
    ) -> Res<i64> {
        let req = ProduceRequest::default()
            .with_acks(-1)
            .with_timeout_ms(WRITE_TIMEOUT_MS)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(s(topic)))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(partition)
                    .with_records(Some(bytes::Bytes::from(batch)))])]);
        let r = self
            .ask(cluster, cluster.leader(topic, partition)?, req)
            .await?;
        let p = first(
            r.responses.into_iter().flat_map(|t| t.partition_responses),
            "Produce",
        )?;
        failed(p.error_code, p.error_message)?;
        Ok(p.base_offset)
    }

    /// Every group of every broker (each coordinator lists its own).
    pub(crate) async fn list_groups(&self, cluster: &Cluster) -> Res<Vec<ListedGroup>> {
        Ok(self
            .list_groups_by_coordinator(cluster)
            .await?
            .into_iter()
            .map(|(_, g)| g)
            .collect())
    }

    /// Every group of every broker, with the broker that coordinates it, by group id.
    pub(crate) async fn list_groups_by_coordinator(
        &self,
        cluster: &Cluster,
    ) -> Res<Vec<(i32, ListedGroup)>> {
        let calls = cluster.nodes.keys().map(|node| async move {
            (
                *node,
                self.ask(cluster, *node, ListGroupsRequest::default()).await,
            )
        });
        let mut out = BTreeMap::new();
        for (node, answer) in join_all(calls).await {
            let r = answer?;
            check(r.error_code, "ListGroups")?;
            for g in r.groups {
                let g = ListedGroup::from(g);
                out.insert(g.id.clone(), (node, g));
            }
        }
        Ok(out.into_values().collect())
    }

    /// The committed offsets in `topics` of each group of `groups` (id, coordinator), one
    /// OffsetFetch per coordinator: (group, partition) → offset.
    pub(crate) async fn committed_of_groups(
        &self,
        cluster: &Cluster,
        groups: &[(i32, String)],
        topics: &[String],
    ) -> BTreeMap<(String, (String, i32)), i64> {
        use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopics;
        let mut by_node: BTreeMap<i32, Vec<&String>> = BTreeMap::new();
        for (node, g) in groups {
            by_node.entry(*node).or_default().push(g);
        }
        // At most GROUPS_PER_OFFSET_FETCH groups a request, so that no answer nears the
        // response size limit.
        let requests: Vec<(i32, Vec<&String>)> = by_node
            .into_iter()
            .flat_map(|(node, ids)| {
                ids.chunks(GROUPS_PER_OFFSET_FETCH)
                    .map(|c| (node, c.to_vec()))
                    .collect::<Vec<_>>()
            })
            .collect();
        let calls = requests.into_iter().map(|(node, ids)| {
            let wanted: Vec<OffsetFetchRequestTopics> = topics
                .iter()
                .filter_map(|t| {
                    let m = cluster.topics.get(t)?;
                    Some(
                        OffsetFetchRequestTopics::default()
                            .with_name(TopicName(s(t)))
                            .with_partition_indexes(m.leaders.keys().copied().collect()),
                    )
                })
                .collect();
            let req = OffsetFetchRequest::default().with_groups(
                ids.into_iter()
                    .map(|g| {
                        OffsetFetchRequestGroup::default()
                            .with_group_id(GroupId(s(g)))
                            .with_topics(Some(wanted.clone()))
                    })
                    .collect(),
            );
            self.ask(cluster, node, req)
        });
        let mut out = BTreeMap::new();
        for r in join_all(calls).await.into_iter().flatten() {
            for g in r.groups.into_iter().filter(|g| g.error_code == 0) {
                for t in g.topics {
                    for p in t.partitions {
                        if p.error_code == 0 && p.committed_offset >= 0 {
                            out.insert(
                                (
                                    g.group_id.0.to_string(),
                                    (t.name.0.to_string(), p.partition_index),
                                ),
                                p.committed_offset,
                            );
                        }
                    }
                }
            }
        }
        out
    }

    /// The coordinator of `key`: a group (key type 0) or a transactional id (1).
    pub(crate) async fn find_coordinator(
        &self,
        cluster: &Cluster,
        key_type: i8,
        key: &str,
    ) -> Res<i32> {
        let req = FindCoordinatorRequest::default()
            .with_key_type(key_type)
            .with_coordinator_keys(vec![s(key)]);
        let c = first(
            self.ask_bootstrap(req).await?.coordinators,
            "FindCoordinator",
        )?;
        failed(c.error_code, c.error_message).map_err(|e| format!("FindCoordinator: {e}"))?;
        if !cluster.nodes.contains_key(&c.node_id.0) {
            return Err(format!(
                "the coordinator, broker {}, is not in the metadata",
                c.node_id.0
            ));
        }
        Ok(c.node_id.0)
    }

    /// The coordinator of group `group`.
    pub(crate) async fn coordinator(&self, cluster: &Cluster, group: &str) -> Res<i32> {
        self.find_coordinator(cluster, 0, group).await
    }

    /// A classic group's state and members.
    pub(crate) async fn describe_group(
        &self,
        cluster: &Cluster,
        coordinator: i32,
        group: &str,
    ) -> Res<DescribedGroup> {
        let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(s(group))]);
        let g = first(
            self.ask(cluster, coordinator, req).await?.groups,
            "DescribeGroups",
        )?;
        check(g.error_code, "DescribeGroups")?;
        let consumer = g.protocol_type.as_str() == "consumer";
        Ok(DescribedGroup {
            protocol_type: g.protocol_type.to_string(),
            protocol: g.protocol_data.to_string(),
            members: g
                .members
                .into_iter()
                .map(|m| Member {
                    id: m.member_id.to_string(),
                    instance_id: m.group_instance_id.map(|i| i.to_string()),
                    client_id: m.client_id.to_string(),
                    host: m.client_host.to_string(),
                    assignment: if consumer {
                        consumer_assignment(&m.member_assignment).unwrap_or_default()
                    } else {
                        Vec::new()
                    },
                })
                .collect(),
        })
    }

    /// A consumer group's members as its coordinator describes them (KIP-848's protocol,
    /// ConsumerGroupDescribe): the assignor in `protocol`.
    pub(crate) async fn describe_consumer_group(
        &self,
        cluster: &Cluster,
        coordinator: i32,
        group: &str,
    ) -> Res<DescribedGroup> {
        use kafka_protocol::messages::ConsumerGroupDescribeRequest;
        let req = ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(group))]);
        let g = first(
            self.ask(cluster, coordinator, req).await?.groups,
            "ConsumerGroupDescribe",
        )?;
        failed(g.error_code, g.error_message).map_err(|e| format!("ConsumerGroupDescribe: {e}"))?;
        Ok(DescribedGroup {
            protocol_type: "consumer".into(),
            protocol: g.assignor_name.to_string(),
            members: g
                .members
                .into_iter()
                .map(|m| Member {
                    id: m.member_id.to_string(),
                    instance_id: m.instance_id.map(|i| i.to_string()),
                    client_id: m.client_id.to_string(),
                    host: m.client_host.to_string(),
                    assignment: partitions(
                        m.assignment
                            .topic_partitions
                            .into_iter()
                            .map(|t| (t.topic_name.0.to_string(), t.partitions)),
                    ),
                })
                .collect(),
        })
    }

    /// A share group's members (ShareGroupDescribe).
    pub(crate) async fn describe_share_group(
        &self,
        cluster: &Cluster,
        coordinator: i32,
        group: &str,
    ) -> Res<DescribedGroup> {
        use kafka_protocol::messages::ShareGroupDescribeRequest;
        let req = ShareGroupDescribeRequest::default().with_group_ids(vec![GroupId(s(group))]);
        let g = first(
            self.ask(cluster, coordinator, req).await?.groups,
            "ShareGroupDescribe",
        )?;
        failed(g.error_code, g.error_message).map_err(|e| format!("ShareGroupDescribe: {e}"))?;
        Ok(DescribedGroup {
            protocol_type: "share".into(),
            protocol: g.assignor_name.to_string(),
            members: g
                .members
                .into_iter()
                .map(|m| Member {
                    id: m.member_id.to_string(),
                    instance_id: None,
                    client_id: m.client_id.to_string(),
                    host: m.client_host.to_string(),
                    assignment: partitions(
                        m.assignment
                            .topic_partitions
                            .into_iter()
                            .map(|t| (t.topic_name.0.to_string(), t.partitions)),
                    ),
                })
                .collect(),
        })
    }

    /// A share group's start offset and lag per share partition (DescribeShareGroupOffsets,
    /// as `kafka-share-groups --describe`); lag -1 where the coordinator does not know it.
    pub(crate) async fn share_offsets(
        &self,
        cluster: &Cluster,
        coordinator: i32,
        group: &str,
    ) -> Res<BTreeMap<(String, i32), (i64, i64)>> {
        use kafka_protocol::messages::describe_share_group_offsets_request::DescribeShareGroupOffsetsRequestGroup;
        use kafka_protocol::messages::DescribeShareGroupOffsetsRequest;
        let req = DescribeShareGroupOffsetsRequest::default().with_groups(vec![
            DescribeShareGroupOffsetsRequestGroup::default()
                .with_group_id(GroupId(s(group)))
                .with_topics(None),
        ]);
        let g = first(
            self.ask(cluster, coordinator, req).await?.groups,
            "DescribeShareGroupOffsets",
        )?;
        failed(g.error_code, g.error_message)
            .map_err(|e| format!("DescribeShareGroupOffsets: {e}"))?;
        let mut out = BTreeMap::new();
        for t in g.topics {
            for p in t.partitions {
                if p.error_code == 0 && p.start_offset >= 0 {
                    out.insert(
                        (t.topic_name.0.to_string(), p.partition_index),
                        (p.start_offset, p.lag),
                    );
                }
            }
        }
        Ok(out)
    }

    /// The timestamp of the first record at or after each `(partition, offset)` (None where
    /// there is none yet or it cannot be read), one small fetch each.
    pub(crate) async fn timestamps_at(
        &self,
        cluster: &Cluster,
        at: &[((String, i32), i64)],
    ) -> BTreeMap<(String, i32), i64> {
        let calls = at.iter().map(|((t, p), o)| async move {
            let fetched = self.fetch(cluster, t, *p, *o, 64 * 1024).await.ok()?;
            let bounds = crate::records::Bounds {
                keep: 1,
                read: u64::MAX,
                matcher: None,
                until: None,
            };
            // Decompressing takes CPU time: off the runtime's workers.
            let decoded =
                tokio::task::block_in_place(|| crate::records::decode(&fetched.0, *o, &bounds));
            let r = decoded.records.into_iter().next()?;
            Some(((t.clone(), *p), r.timestamp))
        });
        join_all(calls).await.into_iter().flatten().collect()
    }

    /// A group's committed offsets, by partition.
    pub(crate) async fn committed(
        &self,
        cluster: &Cluster,
        coordinator: i32,
        group: &str,
    ) -> Res<BTreeMap<(String, i32), i64>> {
        let req =
            OffsetFetchRequest::default().with_groups(vec![OffsetFetchRequestGroup::default()
                .with_group_id(GroupId(s(group)))
                .with_topics(None)]);
        let g = first(
            self.ask(cluster, coordinator, req).await?.groups,
            "OffsetFetch",
        )?;
        check(g.error_code, "OffsetFetch")?;
        let mut out = BTreeMap::new();
        for t in g.topics {
            for p in t.partitions {
                if p.error_code == 0 && p.committed_offset >= 0 {
                    out.insert(
                        (t.name.0.to_string(), p.partition_index),
                        p.committed_offset,
                    );
                }
            }
        }
        Ok(out)
    }

    /// A group's state as its coordinator lists it (every group type), None when it has no
    /// such group.
    pub(crate) async fn group_state(
        &self,
        cluster: &Cluster,
        coordinator: i32,
        group: &str,
    ) -> Res<Option<ListedGroup>> {
        let r = self
            .ask(cluster, coordinator, ListGroupsRequest::default())
            .await?;
        check(r.error_code, "ListGroups")?;
        Ok(r.groups
            .into_iter()
            .find(|g| g.group_id.0.as_str() == group)
            .map(ListedGroup::from))
    }

    /// Commit `offsets` for a group with no active member, as Kafka's admin client does
    /// (generation -1, no member id).
    pub(crate) async fn commit(
        &self,
        cluster: &Cluster,
        coordinator: i32,
        group: &str,
        offsets: &BTreeMap<(String, i32), i64>,
    ) -> Res<()> {
        use kafka_protocol::messages::offset_commit_request::{
            OffsetCommitRequestPartition, OffsetCommitRequestTopic,
        };
        use kafka_protocol::messages::OffsetCommitRequest;
        let mut topics: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> = BTreeMap::new();
        for ((t, p), o) in offsets {
            topics.entry(t).or_default().push(
                OffsetCommitRequestPartition::default()
                    .with_partition_index(*p)
                    .with_committed_offset(*o)
                    .with_committed_leader_epoch(-1),
            );
        }
        let req = OffsetCommitRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_generation_id_or_member_epoch(-1)
            .with_member_id(s(""))
            .with_topics(
                topics
                    .into_iter()
                    .map(|(t, ps)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(TopicName(s(t)))
                            .with_partitions(ps)
                    })
                    .collect(),
            );
        let r = self.ask(cluster, coordinator, req).await?;
        let failures: Vec<String> = r
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions
                    .iter()
                    .filter(|p| p.error_code != 0)
                    .map(move |p| {
                        format!(
                            "{}-{}: {}",
                            t.name.0,
                            p.partition_index,
                            error_name(p.error_code)
                        )
                    })
            })
            .collect();
        if failures.is_empty() {
            Ok(())
        } else {
            Err(failures.join(", "))
        }
    }

    /// Delete a group (its coordinator refuses one with members: NON_EMPTY_GROUP).
    pub(crate) async fn delete_group(
        &self,
        cluster: &Cluster,
        coordinator: i32,
        group: &str,
    ) -> Res<()> {
        use kafka_protocol::messages::DeleteGroupsRequest;
        let req = DeleteGroupsRequest::default().with_groups_names(vec![GroupId(s(group))]);
        let g = first(
            self.ask(cluster, coordinator, req).await?.results,
            "DeleteGroups",
        )?;
        check(g.error_code, "DeleteGroups")
    }
}

/// Topic administration, each request to the controller as Kafka's admin client sends it
/// (DeleteRecords to each partition's leader).
impl Kafka {
    pub(crate) async fn delete_topic(&self, cluster: &Cluster, name: &str) -> Res<()> {
        use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
        use kafka_protocol::messages::DeleteTopicsRequest;
        let req = DeleteTopicsRequest::default()
            .with_topics(vec![
                DeleteTopicState::default().with_name(Some(TopicName(s(name))))
            ])
            .with_timeout_ms(WRITE_TIMEOUT_MS);
        let r = self.ask(cluster, self.controller(cluster)?, req).await?;
        let t = first(r.responses, "DeleteTopics")?;
        failed(t.error_code, t.error_message)
    }

    /// Grow a topic to `count` partitions.
    pub(crate) async fn add_partitions(
        &self,
        cluster: &Cluster,
        name: &str,
        count: i32,
    ) -> Res<()> {
        use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
        use kafka_protocol::messages::CreatePartitionsRequest;
        let req = CreatePartitionsRequest::default()
            .with_topics(vec![CreatePartitionsTopic::default()
                .with_name(TopicName(s(name)))
                .with_count(count)
                .with_assignments(None)])
            .with_timeout_ms(WRITE_TIMEOUT_MS);
        let r = self.ask(cluster, self.controller(cluster)?, req).await?;
        let t = first(r.results, "CreatePartitions")?;
        failed(t.error_code, t.error_message)
    }

    /// Set a config of a topic (resource type 2) or a broker (4; "" for the cluster-wide
    /// default) when `value` is Some, or delete it back to its default (None).
    pub(crate) async fn alter_config(
        &self,
        cluster: &Cluster,
        resource_type: i8,
        name: &str,
        config: &str,
        value: Option<&str>,
    ) -> Res<()> {
        use kafka_protocol::messages::incremental_alter_configs_request::{
            AlterConfigsResource, AlterableConfig,
        };
        use kafka_protocol::messages::IncrementalAlterConfigsRequest;
        let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
            AlterConfigsResource::default()
                .with_resource_type(resource_type)
                .with_resource_name(s(name))
                .with_configs(vec![AlterableConfig::default()
                    .with_name(s(config))
                    // 0 SET, 1 DELETE
                    .with_config_operation(if value.is_some() { 0 } else { 1 })
                    .with_value(value.map(s))]),
        ]);
        // A broker's own configs go to that broker, as Kafka's admin client sends them.
        let node = match (resource_type, name.parse::<i32>()) {
            (4, Ok(id)) => id,
            _ => self.controller(cluster)?,
        };
        let t = first(
            self.ask(cluster, node, req).await?.responses,
            "IncrementalAlterConfigs",
        )?;
        failed(t.error_code, t.error_message)
    }

    /// Delete a partition's records before `offset` (-1: all); the new log start.
    pub(crate) async fn delete_records(
        &self,
        cluster: &Cluster,
        name: &str,
        partition: i32,
        offset: i64,
    ) -> Res<i64> {
        use kafka_protocol::messages::delete_records_request::{
            DeleteRecordsPartition, DeleteRecordsTopic,
        };
        use kafka_protocol::messages::DeleteRecordsRequest;
        let req = DeleteRecordsRequest::default()
            .with_topics(vec![DeleteRecordsTopic::default()
                .with_name(TopicName(s(name)))
                .with_partitions(vec![DeleteRecordsPartition::default()
                    .with_partition_index(partition)
                    .with_offset(offset)])])
            .with_timeout_ms(WRITE_TIMEOUT_MS);
        let r = self
            .ask(cluster, cluster.leader(name, partition)?, req)
            .await?;
        let p = first(
            r.topics.into_iter().flat_map(|t| t.partitions),
            "DeleteRecords",
        )?;
        failed(p.error_code, None)?;
        Ok(p.low_watermark)
    }
}

/// Each (topic, partition) of an assignment given as partitions per topic.
fn partitions(topics: impl Iterator<Item = (String, Vec<i32>)>) -> Vec<(String, i32)> {
    topics
        .flat_map(|(t, ps)| ps.into_iter().map(move |p| (t.clone(), p)))
        .collect()
}

/// The partitions of a consumer protocol assignment (version, topics, user data).
fn consumer_assignment(bytes: &[u8]) -> Option<Vec<(String, i32)>> {
    let mut r = sluice_format::fields::FieldReader::<sluice_format::fields::FieldError>::new(bytes);
    let _version = r.i16().ok()?;
    let topics = r.i32().ok()?;
    let mut out = Vec::new();
    for _ in 0..topics.max(0) {
        let name = r.str().ok()?;
        let n = r.i32().ok()?;
        for _ in 0..n.max(0) {
            out.push((name.clone(), r.i32().ok()?));
        }
    }
    Some(out)
}

/// Run futures at once and wait for all (the console's calls are few and short).
pub(crate) async fn join_all<F: std::future::Future>(
    futures: impl IntoIterator<Item = F>,
) -> Vec<F::Output> {
    let handles: Vec<_> = futures.into_iter().collect();
    let mut out = Vec::with_capacity(handles.len());
    // Polled together: each call's future is driven by its own connection's task.
    let mut pinned: Vec<std::pin::Pin<Box<F>>> = handles.into_iter().map(Box::pin).collect();
    let mut results: Vec<Option<F::Output>> = pinned.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (i, f) in pinned.iter_mut().enumerate() {
            if results[i].is_none() {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => results[i] = Some(v),
                    std::task::Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            std::task::Poll::Pending
        } else {
            std::task::Poll::Ready(())
        }
    })
    .await;
    out.extend(results.into_iter().flatten());
    out
}

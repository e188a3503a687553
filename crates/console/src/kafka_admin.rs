//! The console's administration calls: transactions (as `kafka-transactions` sends them),
//! client quotas, ACLs and SCRAM users (as `kafka-configs` and `kafka-acls` do).

use std::collections::BTreeMap;

use kafka_protocol::messages::{
    DescribeAclsRequest, DescribeClientQuotasRequest, DescribeProducersRequest,
    DescribeTransactionsRequest, DescribeUserScramCredentialsRequest, ListTransactionsRequest,
    ProducerId, TopicName, TransactionalId, WriteTxnMarkersRequest,
};

use crate::kafka::{check, failed, first, join_all, s, Cluster, Kafka, Res};

/// A transaction as its coordinator lists it.
#[derive(Clone, Debug)]
pub(crate) struct ListedTxn {
    pub(crate) id: String,
    pub(crate) producer_id: i64,
    pub(crate) state: String,
    pub(crate) coordinator: i32,
}

/// A transaction as its coordinator describes it.
#[derive(Clone, Debug)]
pub(crate) struct Txn {
    pub(crate) coordinator: i32,
    pub(crate) state: String,
    pub(crate) timeout_ms: i32,
    pub(crate) start_ms: i64,
    pub(crate) producer_id: i64,
    pub(crate) producer_epoch: i16,
    pub(crate) partitions: Vec<(String, i32)>,
}

/// A producer a partition's leader knows (DescribeProducers).
#[derive(Clone, Debug)]
pub(crate) struct ActiveProducer {
    pub(crate) producer_id: i64,
    pub(crate) epoch: i32,
    pub(crate) last_sequence: i32,
    pub(crate) last_timestamp: i64,
    pub(crate) coordinator_epoch: i32,
    /// The first offset of its open transaction, -1 when none is open.
    pub(crate) txn_start: i64,
}

/// A client quota entity and its quotas.
#[derive(Clone, Debug)]
pub(crate) struct Quota {
    /// (entity type, name; None for the default entity).
    pub(crate) entity: Vec<(String, Option<String>)>,
    pub(crate) values: Vec<(String, f64)>,
}

/// One ACL binding, its codes as names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Acl {
    pub(crate) resource_type: i8,
    pub(crate) resource_name: String,
    pub(crate) pattern_type: i8,
    pub(crate) principal: String,
    pub(crate) host: String,
    pub(crate) operation: i8,
    pub(crate) permission: i8,
}

/// Kafka's names of the ACL codes (AclOperation, ResourceType, PatternType,
/// AclPermissionType), as `kafka-acls` prints them.
pub(crate) const RESOURCE_TYPES: &[(i8, &str)] = &[
    (2, "TOPIC"),
    (3, "GROUP"),
    (4, "CLUSTER"),
    (5, "TRANSACTIONAL_ID"),
    (6, "DELEGATION_TOKEN"),
    (7, "USER"),
];
pub(crate) const PATTERN_TYPES: &[(i8, &str)] = &[(3, "LITERAL"), (4, "PREFIXED")];
pub(crate) const OPERATIONS: &[(i8, &str)] = &[
    (2, "ALL"),
    (3, "READ"),
    (4, "WRITE"),
    (5, "CREATE"),
    (6, "DELETE"),
    (7, "ALTER"),
    (8, "DESCRIBE"),
    (9, "CLUSTER_ACTION"),
    (10, "DESCRIBE_CONFIGS"),
    (11, "ALTER_CONFIGS"),
    (12, "IDEMPOTENT_WRITE"),
    (13, "CREATE_TOKENS"),
    (14, "DESCRIBE_TOKENS"),
    (15, "TWO_PHASE_COMMIT"),
];
pub(crate) const PERMISSIONS: &[(i8, &str)] = &[(2, "DENY"), (3, "ALLOW")];

/// The name of code `code` in `names`.
pub(crate) fn code_name(names: &[(i8, &'static str)], code: i8) -> String {
    names
        .iter()
        .find(|(c, _)| *c == code)
        .map_or_else(|| format!("UNKNOWN({code})"), |(_, n)| (*n).to_string())
}

/// A SCRAM user's credentials: (mechanism, iterations).
#[derive(Clone, Debug)]
pub(crate) struct ScramUser {
    pub(crate) user: String,
    pub(crate) credentials: Vec<(String, i32)>,
}

impl Kafka {
    /// Every transaction of every coordinator.
    pub(crate) async fn list_transactions(&self, cluster: &Cluster) -> Res<Vec<ListedTxn>> {
        let calls = cluster.nodes.keys().map(|node| async move {
            (
                *node,
                self.ask(cluster, *node, ListTransactionsRequest::default())
                    .await,
            )
        });
        let mut out = Vec::new();
        for (node, answer) in join_all(calls).await {
            let r = answer?;
            check(r.error_code, "ListTransactions")?;
            out.extend(r.transaction_states.into_iter().map(|t| ListedTxn {
                id: t.transactional_id.0.to_string(),
                producer_id: t.producer_id.0,
                state: t.transaction_state.to_string(),
                coordinator: node,
            }));
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    /// A transaction, asked of its coordinator.
    pub(crate) async fn describe_transaction(&self, cluster: &Cluster, id: &str) -> Res<Txn> {
        let coordinator = self.find_coordinator(cluster, 1, id).await?;
        let req = DescribeTransactionsRequest::default()
            .with_transactional_ids(vec![TransactionalId(s(id))]);
        let t = first(
            self.ask(cluster, coordinator, req)
                .await?
                .transaction_states,
            "DescribeTransactions",
        )?;
        check(t.error_code, "DescribeTransactions")?;
        Ok(Txn {
            coordinator,
            state: t.transaction_state.to_string(),
            timeout_ms: t.transaction_timeout_ms,
            start_ms: t.transaction_start_time_ms,
            producer_id: t.producer_id.0,
            producer_epoch: t.producer_epoch,
            partitions: t
                .topics
                .into_iter()
                .flat_map(|d| {
                    let name = d.topic.0.to_string();
                    d.partitions.into_iter().map(move |p| (name.clone(), p))
                })
                .collect(),
        })
    }

    /// The producers each partition of `topic` knows, asked of each leader.
    pub(crate) async fn producers(
        &self,
        cluster: &Cluster,
        topic: &str,
    ) -> Res<BTreeMap<i32, Res<Vec<ActiveProducer>>>> {
        use kafka_protocol::messages::describe_producers_request::TopicRequest;
        let t = cluster
            .topics
            .get(topic)
            .ok_or_else(|| format!("no topic {topic}"))?;
        let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        let mut out = BTreeMap::new();
        for p in t.leaders.keys() {
            match cluster.leader(topic, *p) {
                Ok(l) => by_leader.entry(l).or_default().push(*p),
                Err(e) => {
                    out.insert(*p, Err(e));
                }
            }
        }
        let calls = by_leader.into_iter().map(|(leader, partitions)| {
            let req = DescribeProducersRequest::default()
                .with_topics(vec![TopicRequest::default()
                    .with_name(TopicName(s(topic)))
                    .with_partition_indexes(partitions.clone())]);
            async move { (partitions, self.ask(cluster, leader, req).await) }
        });
        for (partitions, answer) in join_all(calls).await {
            match answer {
                Ok(r) => {
                    for p in r.topics.into_iter().flat_map(|t| t.partitions) {
                        let v = failed(p.error_code, p.error_message).map(|()| {
                            p.active_producers
                                .into_iter()
                                .map(|a| ActiveProducer {
                                    producer_id: a.producer_id.0,
                                    epoch: a.producer_epoch,
                                    last_sequence: a.last_sequence,
                                    last_timestamp: a.last_timestamp,
                                    coordinator_epoch: a.coordinator_epoch,
                                    txn_start: a.current_txn_start_offset,
                                })
                                .collect()
                        });
                        out.insert(p.partition_index, v);
                    }
                }
                Err(e) => {
                    for p in partitions {
                        out.insert(p, Err(e.clone()));
                    }
                }
            }
        }
        Ok(out)
    }

    /// Abort the open transaction starting at `start` in a partition, as `kafka-transactions
    /// abort --start-offset` does: the producer the leader names for it now, then an ABORT
    /// marker written by the leader with that producer's epoch and coordinator epoch.
    pub(crate) async fn abort_transaction(
        &self,
        cluster: &Cluster,
        topic: &str,
        partition: i32,
        start: i64,
    ) -> Res<i64> {
        use kafka_protocol::messages::write_txn_markers_request::{
            WritableTxnMarker, WritableTxnMarkerTopic,
        };
        if start < 0 {
            return Err(format!("{start} is not the start offset of a transaction"));
        }
        let producers = self.producers(cluster, topic).await?;
        let open = producers
            .get(&partition)
            .ok_or_else(|| format!("{topic}-{partition}: no such partition"))?
            .clone()?
            .into_iter()
            .find(|p| p.txn_start == start)
            .ok_or_else(|| {
                format!("{topic}-{partition}: no open transaction starts at offset {start}")
            })?;
        let epoch = i16::try_from(open.epoch)
            .map_err(|_| format!("producer epoch {} out of range", open.epoch))?;
        let req =
            WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
                .with_producer_id(ProducerId(open.producer_id))
                .with_producer_epoch(epoch)
                .with_transaction_result(false)
                .with_coordinator_epoch(open.coordinator_epoch)
                .with_topics(vec![WritableTxnMarkerTopic::default()
                    .with_name(TopicName(s(topic)))
                    .with_partition_indexes(vec![partition])])]);
        let r = self
            .ask(cluster, cluster.leader(topic, partition)?, req)
            .await?;
        let p = first(
            r.markers
                .into_iter()
                .flat_map(|m| m.topics)
                .flat_map(|t| t.partitions),
            "WriteTxnMarkers",
        )?;
        failed(p.error_code, None)?;
        Ok(open.producer_id)
    }

    /// Every client quota (DescribeClientQuotas with no filter), asked of any broker.
    pub(crate) async fn quotas(&self) -> Res<Vec<Quota>> {
        let r = self
            .ask_bootstrap(DescribeClientQuotasRequest::default().with_strict(false))
            .await?;
        failed(r.error_code, r.error_message).map_err(|e| format!("DescribeClientQuotas: {e}"))?;
        let mut out: Vec<Quota> = r
            .entries
            .unwrap_or_default()
            .into_iter()
            .map(|e| Quota {
                entity: e
                    .entity
                    .into_iter()
                    .map(|d| {
                        (
                            d.entity_type.to_string(),
                            d.entity_name.map(|n| n.to_string()),
                        )
                    })
                    .collect(),
                values: e
                    .values
                    .into_iter()
                    .map(|v| (v.key.to_string(), v.value))
                    .collect(),
            })
            .collect();
        out.sort_by(|a, b| a.entity.cmp(&b.entity));
        Ok(out)
    }

    /// Set a client quota of one entity (`value` Some) or remove it (None), as `kafka-configs
    /// --entity-type users|clients --alter` does; the entity's name None is its default.
    pub(crate) async fn alter_quota(
        &self,
        cluster: &Cluster,
        entity: (&str, Option<&str>),
        key: &str,
        value: Option<f64>,
    ) -> Res<()> {
        use kafka_protocol::messages::alter_client_quotas_request::{
            EntityData, EntryData, OpData,
        };
        use kafka_protocol::messages::AlterClientQuotasRequest;
        let req = AlterClientQuotasRequest::default().with_entries(vec![EntryData::default()
            .with_entity(vec![EntityData::default()
                .with_entity_type(s(entity.0))
                .with_entity_name(entity.1.map(s))])
            .with_ops(vec![OpData::default()
                .with_key(s(key))
                .with_value(value.unwrap_or(0.0))
                .with_remove(value.is_none())])]);
        let r = self.ask(cluster, self.controller(cluster)?, req).await?;
        let e = first(r.entries, "AlterClientQuotas")?;
        failed(e.error_code, e.error_message)
    }

    /// Every ACL, or None when the brokers have no authorizer (SECURITY_DISABLED).
    pub(crate) async fn acls(&self) -> Res<Option<Vec<Acl>>> {
        let req = DescribeAclsRequest::default()
            .with_resource_type_filter(1)
            .with_resource_name_filter(None)
            .with_principal_filter(None)
            .with_host_filter(None)
            .with_pattern_type_filter(1)
            .with_operation(1)
            .with_permission_type(1);
        let r = self.ask_bootstrap(req).await?;
        // SECURITY_DISABLED: no authorizer.
        if r.error_code == 54 {
            return Ok(None);
        }
        failed(r.error_code, r.error_message).map_err(|e| format!("DescribeAcls: {e}"))?;
        let mut out = Vec::new();
        for res in r.resources {
            for a in res.acls {
                out.push(Acl {
                    resource_type: res.resource_type,
                    resource_name: res.resource_name.to_string(),
                    pattern_type: res.pattern_type,
                    principal: a.principal.to_string(),
                    host: a.host.to_string(),
                    operation: a.operation,
                    permission: a.permission_type,
                });
            }
        }
        out.sort_by(|a, b| {
            (a.resource_type, &a.resource_name, &a.principal, a.operation).cmp(&(
                b.resource_type,
                &b.resource_name,
                &b.principal,
                b.operation,
            ))
        });
        Ok(Some(out))
    }

    /// Add one ACL binding (the controller answers, as to Kafka's admin client).
    pub(crate) async fn create_acl(&self, cluster: &Cluster, acl: &Acl) -> Res<()> {
        use kafka_protocol::messages::create_acls_request::AclCreation;
        use kafka_protocol::messages::CreateAclsRequest;
        let req = CreateAclsRequest::default().with_creations(vec![AclCreation::default()
            .with_resource_type(acl.resource_type)
            .with_resource_name(s(&acl.resource_name))
            .with_resource_pattern_type(acl.pattern_type)
            .with_principal(s(&acl.principal))
            .with_host(s(&acl.host))
            .with_operation(acl.operation)
            .with_permission_type(acl.permission)]);
        let r = self.ask(cluster, self.controller(cluster)?, req).await?;
        let c = first(r.results, "CreateAcls")?;
        failed(c.error_code, c.error_message)
    }

    /// Remove exactly one ACL binding; how many were removed.
    pub(crate) async fn delete_acl(&self, cluster: &Cluster, acl: &Acl) -> Res<usize> {
        use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
        use kafka_protocol::messages::DeleteAclsRequest;
        let req = DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()
            .with_resource_type_filter(acl.resource_type)
            .with_resource_name_filter(Some(s(&acl.resource_name)))
            .with_pattern_type_filter(acl.pattern_type)
            .with_principal_filter(Some(s(&acl.principal)))
            .with_host_filter(Some(s(&acl.host)))
            .with_operation(acl.operation)
            .with_permission_type(acl.permission)]);
        let r = self.ask(cluster, self.controller(cluster)?, req).await?;
        let f = first(r.filter_results, "DeleteAcls")?;
        failed(f.error_code, f.error_message)?;
        Ok(f.matching_acls.len())
    }

    /// Every SCRAM user and its credentials' mechanisms and iterations.
    pub(crate) async fn scram_users(&self) -> Res<Vec<ScramUser>> {
        let r = self
            .ask_bootstrap(DescribeUserScramCredentialsRequest::default().with_users(None))
            .await?;
        failed(r.error_code, r.error_message)
            .map_err(|e| format!("DescribeUserScramCredentials: {e}"))?;
        let mut out: Vec<ScramUser> = r
            .results
            .into_iter()
            .filter(|u| u.error_code == 0)
            .map(|u| ScramUser {
                user: u.user.to_string(),
                credentials: u
                    .credential_infos
                    .into_iter()
                    .map(|c| {
                        let m = match c.mechanism {
                            1 => "SCRAM-SHA-256".to_string(),
                            2 => "SCRAM-SHA-512".to_string(),
                            m => format!("UNKNOWN({m})"),
                        };
                        (m, c.iterations)
                    })
                    .collect(),
            })
            .collect();
        out.sort_by(|a, b| a.user.cmp(&b.user));
        Ok(out)
    }
}

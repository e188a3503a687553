//! The transaction coordinator's APIs: InitProducerId with a transactional id (v0-v5),
//! AddPartitionsToTxn (v0-v3 from producers; v4-v5 batched, verify-only or adding, from
//! partition leaders), AddOffsetsToTxn, EndTxn (v5: KIP-890's epoch bump per transaction),
//! DescribeTransactions and ListTransactions. Each call runs on the pure coordinator
//! (`crate::txns`), and is answered once the records it wrote are on storage.

use std::sync::Arc;

use kafka_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use kafka_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use kafka_protocol::messages::list_transactions_response::TransactionState as ListedState;
use kafka_protocol::messages::{
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, DescribeTransactionsRequest, DescribeTransactionsResponse,
    EndTxnRequest, EndTxnResponse, InitProducerIdRequest, InitProducerIdResponse,
    ListTransactionsRequest, ListTransactionsResponse, ProducerId, ResponseKind, TopicName,
    TransactionalId,
};
use kafka_protocol::ResponseError;
use sluice_txn::TxnPartition;

use crate::errors::txn_error_code;
use crate::wire::{str_bytes, topic_name};
use crate::{now_ms, Broker, Reply, OFFSETS_TOPIC};

/// Run `call` on a blocking thread in a cluster (producer-id allocation may wait on etcd),
/// at once on a single broker; then wait for its records to be on storage.
fn coordinated<T: Send + 'static>(
    broker: &Arc<Broker>,
    call: impl FnOnce(
            &Arc<Broker>,
        )
            -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, ()>> + Send>>
        + Send
        + 'static,
) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<T, ()>> + Send>> {
    if broker.cluster.is_none() {
        return call(broker);
    }
    let broker = broker.clone();
    Box::pin(async move {
        match tokio::task::spawn_blocking(move || call(&broker)).await {
            Ok(f) => f.await,
            Err(_) => Err(()),
        }
    })
}

/// The error for a call refused because the coordinator's log failed: the client looks the
/// coordinator up again and retries.
fn log_failed() -> i16 {
    ResponseError::NotCoordinator.code()
}

pub(crate) fn init_producer_id(
    broker: &Arc<Broker>,
    req: InitProducerIdRequest,
    version: i16,
) -> Reply {
    let refused = |code: i16| {
        Some(ResponseKind::InitProducerId(
            InitProducerIdResponse::default()
                .with_error_code(code)
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
        ))
    };
    let id = req
        .transactional_id
        .as_ref()
        .map(|t| t.0.to_string())
        .unwrap_or_default();
    if !broker.ensure_txn_topic() {
        return crate::ready(refused(ResponseError::CoordinatorNotAvailable.code()));
    }
    let expected = (req.producer_id.0 >= 0 && req.producer_epoch >= 0)
        .then_some((req.producer_id.0, req.producer_epoch));
    let timeout = req.transaction_timeout_ms;
    let answer = coordinated(broker, move |b| {
        let alloc_from = b.clone();
        Box::pin(b.txn_call(move |c| {
            let mut alloc = move || alloc_from.allocate_producer_id();
            c.init_producer_id(&id, timeout, expected, now_ms(), &mut alloc)
        }))
    });
    Box::pin(async move {
        let body = match answer.await {
            Err(()) => return refused(log_failed()),
            Ok(Err(e)) => return refused(txn_error_code(&e, version < 4)),
            Ok(Ok((pid, epoch))) => InitProducerIdResponse::default()
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch),
        };
        Some(ResponseKind::InitProducerId(body))
    })
}

/// The coordinator's answer for one transaction's partitions, or one code for all of them.
type Answer = Result<Vec<sluice_txn::PartitionResult>, i16>;

/// One transaction's partitions, grouped by topic as the requests carry them.
fn partitions_of(topics: &[(TopicName, Vec<i32>)]) -> Vec<TxnPartition> {
    topics
        .iter()
        .flat_map(|(t, ps)| ps.iter().map(move |p| (t.0.to_string(), *p)))
        .collect()
}

/// The per-topic results of one transaction: `code` for every partition, or each partition's
/// own result.
fn topic_results(
    topics: &[(TopicName, Vec<i32>)],
    answer: &Answer,
    old_fenced: bool,
) -> Vec<AddPartitionsToTxnTopicResult> {
    topics
        .iter()
        .map(|(t, ps)| {
            let results = ps
                .iter()
                .map(|p| {
                    let code = match answer {
                        Err(code) => *code,
                        Ok(rs) => rs
                            .iter()
                            .find(|((rt, rp), _)| rt == t.0.as_str() && rp == p)
                            .map_or(0, |(_, r)| {
                                r.as_ref()
                                    .err()
                                    .map_or(0, |e| txn_error_code(e, old_fenced))
                            }),
                    };
                    AddPartitionsToTxnPartitionResult::default()
                        .with_partition_index(*p)
                        .with_partition_error_code(code)
                })
                .collect();
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.clone())
                .with_results_by_partition(results)
        })
        .collect()
}

/// One transaction of an AddPartitionsToTxn request: its transactional id, producer id and
/// epoch, whether it only verifies (v4+, from a partition leader), and its partitions grouped
/// by topic.
type Txn = (String, i64, i16, bool, Vec<(TopicName, Vec<i32>)>);

/// The transactions a request carries: up to v3 one, from its producer, that adds its
/// partitions; from v4 a batch from a partition leader, each verifying or adding.
fn transactions_of(req: &AddPartitionsToTxnRequest, version: i16) -> Vec<Txn> {
    if version <= 3 {
        vec![(
            req.v3_and_below_transactional_id.0.to_string(),
            req.v3_and_below_producer_id.0,
            req.v3_and_below_producer_epoch,
            false,
            req.v3_and_below_topics
                .iter()
                .map(|t| (t.name.clone(), t.partitions.clone()))
                .collect(),
        )]
    } else {
        req.transactions
            .iter()
            .map(|t| {
                (
                    t.transactional_id.0.to_string(),
                    t.producer_id.0,
                    t.producer_epoch,
                    t.verify_only,
                    t.topics
                        .iter()
                        .map(|t| (t.name.clone(), t.partitions.clone()))
                        .collect(),
                )
            })
            .collect()
    }
}

/// Kafka's rule for a transaction naming a partition that does not exist (`exists`): none of
/// its partitions joins; UNKNOWN_TOPIC_OR_PARTITION for each unknown one,
/// OPERATION_NOT_ATTEMPTED for the others. None when every partition exists.
fn refuse_unknown(parts: &[TxnPartition], exists: impl Fn(&str, i32) -> bool) -> Option<Refused> {
    let unknown: Vec<TxnPartition> = parts
        .iter()
        .filter(|(t, p)| !exists(t, *p))
        .cloned()
        .collect();
    if unknown.is_empty() {
        return None;
    }
    let codes = parts
        .iter()
        .map(|tp| {
            let code = if unknown.contains(tp) {
                ResponseError::UnknownTopicOrPartition.code()
            } else {
                ResponseError::OperationNotAttempted.code()
            };
            (tp.clone(), code)
        })
        .collect();
    Some(codes)
}

/// The coordinator's answer to adding one transaction's partitions: each partition's result,
/// or the refusal of them all.
type Added = Result<Vec<sluice_txn::PartitionResult>, sluice_txn::TxnError>;

/// The code of each partition of a transaction refused before the coordinator was asked.
type Refused = Vec<(TxnPartition, i16)>;

/// Ask the coordinator to add (or, `verify_only`, to verify) one transaction's partitions
/// (`tv2`: a transaction version 2 producer's, added by its partition leader), its producer
/// id and epoch checked there (the fencing rule); refused without asking when a partition
/// does not exist ([`refuse_unknown`]).
fn ask_coordinator(
    broker: &Arc<Broker>,
    txn: &Txn,
    tv2: bool,
) -> Result<impl std::future::Future<Output = Result<Added, ()>> + Send + 'static, Refused> {
    let (id, pid, epoch, verify_only, topics) = txn;
    let mut parts = partitions_of(topics);
    if let Some(codes) = refuse_unknown(&parts, |t, p| broker.partition_exists(t, p)) {
        return Err(codes);
    }
    parts.dedup();
    let (id, pid, epoch, verify_only) = (id.clone(), *pid, *epoch, *verify_only);
    Ok(broker
        .txn_call(move |c| c.add_partitions(&id, pid, epoch, &parts, verify_only, tv2, now_ms())))
}

/// The per-topic results of a transaction refused before the coordinator was asked: each
/// partition's code from `codes` ([`refuse_unknown`]).
fn refused_results(
    topics: &[(TopicName, Vec<i32>)],
    codes: &[(TxnPartition, i16)],
) -> Vec<AddPartitionsToTxnTopicResult> {
    topics
        .iter()
        .map(|(t, ps)| {
            AddPartitionsToTxnTopicResult::default()
                .with_name(t.clone())
                .with_results_by_partition(
                    ps.iter()
                        .map(|p| {
                            let code = codes
                                .iter()
                                .find(|((ct, cp), _)| ct == t.0.as_str() && cp == p)
                                .map_or(0, |(_, c)| *c);
                            AddPartitionsToTxnPartitionResult::default()
                                .with_partition_index(*p)
                                .with_partition_error_code(code)
                        })
                        .collect(),
                )
        })
        .collect()
}

/// The response for the transactions' results in request order: up to v3 the one
/// transaction's topics, from v4 each transaction under its id.
fn add_partitions_response(
    version: i16,
    results: Vec<(String, Vec<AddPartitionsToTxnTopicResult>)>,
) -> AddPartitionsToTxnResponse {
    let mut resp = AddPartitionsToTxnResponse::default();
    if version <= 3 {
        resp.results_by_topic_v3_and_below = results
            .into_iter()
            .next()
            .map(|(_, r)| r)
            .unwrap_or_default();
    } else {
        resp.results_by_transaction = results
            .into_iter()
            .map(|(id, r)| {
                AddPartitionsToTxnResult::default()
                    .with_transactional_id(TransactionalId(str_bytes(id)))
                    .with_topic_results(r)
            })
            .collect();
    }
    resp
}

/// AddPartitionsToTxn: each transaction's partitions asked of the coordinator
/// ([`ask_coordinator`]), all asked before any answer is awaited; answered in request order
/// once the coordinator's records are on storage (a failed log: NOT_COORDINATOR; a fenced
/// producer of v0-v1: INVALID_PRODUCER_EPOCH, Kafka's older code).
pub(crate) fn add_partitions(
    broker: &Arc<Broker>,
    req: AddPartitionsToTxnRequest,
    version: i16,
) -> Reply {
    let txns = transactions_of(&req, version);
    // v5 (from a partition leader) adds partitions of transaction version 2 producers.
    let tv2 = version >= 5;
    let old_fenced = version < 2;
    let waits: Vec<_> = txns
        .iter()
        .map(|txn| ask_coordinator(broker, txn, tv2))
        .collect();
    Box::pin(async move {
        let mut results = Vec::new();
        for ((id, _, _, _, topics), wait) in txns.iter().zip(waits) {
            let answer: Answer = match wait {
                Err(codes) => {
                    results.push((id.clone(), refused_results(topics, &codes)));
                    continue;
                }
                Ok(call) => match call.await {
                    Err(()) => Err(log_failed()),
                    Ok(Err(e)) => Err(txn_error_code(&e, old_fenced)),
                    Ok(Ok(rs)) => Ok(rs),
                },
            };
            results.push((id.clone(), topic_results(topics, &answer, old_fenced)));
        }
        Some(ResponseKind::AddPartitionsToTxn(add_partitions_response(
            version, results,
        )))
    })
}

pub(crate) fn add_offsets(
    broker: &Arc<Broker>,
    req: AddOffsetsToTxnRequest,
    version: i16,
) -> Reply {
    let refused = |code: i16| {
        Some(ResponseKind::AddOffsetsToTxn(
            AddOffsetsToTxnResponse::default().with_error_code(code),
        ))
    };
    if !broker.ensure_offsets_topic() {
        return crate::ready(refused(ResponseError::CoordinatorNotAvailable.code()));
    }
    let partition = broker
        .groups
        .read(|c| c.partition_for(req.group_id.0.as_str()));
    let id = req.transactional_id.0.to_string();
    let (pid, epoch) = (req.producer_id.0, req.producer_epoch);
    let parts = vec![(OFFSETS_TOPIC.to_string(), partition)];
    let call =
        broker.txn_call(move |c| c.add_partitions(&id, pid, epoch, &parts, false, false, now_ms()));
    Box::pin(async move {
        let code = match call.await {
            Err(()) => log_failed(),
            Ok(Err(e)) => txn_error_code(&e, version < 2),
            Ok(Ok(rs)) => rs
                .into_iter()
                .find_map(|(_, r)| r.err())
                .map_or(0, |e| txn_error_code(&e, version < 2)),
        };
        refused(code)
    })
}

pub(crate) fn end_txn(broker: &Arc<Broker>, req: EndTxnRequest, version: i16) -> Reply {
    let id = req.transactional_id.0.to_string();
    let (pid, epoch, commit) = (req.producer_id.0, req.producer_epoch, req.committed);
    let tv2 = version >= 5;
    let answer = coordinated(broker, move |b| {
        let alloc_from = b.clone();
        Box::pin(b.txn_call(move |c| {
            let mut alloc = move || alloc_from.allocate_producer_id();
            c.end_txn(&id, pid, epoch, commit, tv2, now_ms(), &mut alloc)
        }))
    });
    Box::pin(async move {
        let resp = match answer.await {
            Err(()) => EndTxnResponse::default().with_error_code(log_failed()),
            Ok(Err(e)) => EndTxnResponse::default()
                .with_error_code(txn_error_code(&e, version < 2))
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1),
            Ok(Ok((pid, epoch))) => EndTxnResponse::default()
                .with_producer_id(ProducerId(pid))
                .with_producer_epoch(epoch),
        };
        Some(ResponseKind::EndTxn(resp))
    })
}

pub(crate) fn describe(
    broker: &Arc<Broker>,
    req: DescribeTransactionsRequest,
    _version: i16,
) -> Option<ResponseKind> {
    broker.ensure_txn_topic();
    let now = now_ms();
    let states = req
        .transactional_ids
        .into_iter()
        .map(|id| {
            let base = TransactionState::default()
                .with_transactional_id(id.clone())
                .with_producer_id(ProducerId(-1))
                .with_producer_epoch(-1)
                .with_transaction_start_time_ms(-1);
            match broker.txns.read(|c| c.describe(id.0.as_str(), now)) {
                Err(e) => base.with_error_code(txn_error_code(&e, false)),
                Ok(v) => {
                    let mut topics: Vec<TopicData> = Vec::new();
                    for (t, p) in v.partitions {
                        match topics.iter_mut().find(|d| d.topic.0.as_str() == t) {
                            Some(d) => d.partitions.push(p),
                            None => topics.push(
                                TopicData::default()
                                    .with_topic(topic_name(&t))
                                    .with_partitions(vec![p]),
                            ),
                        }
                    }
                    base.with_transaction_state(str_bytes(v.state.name()))
                        .with_transaction_timeout_ms(v.timeout_ms)
                        .with_transaction_start_time_ms(v.start_ms)
                        .with_producer_id(ProducerId(v.producer_id))
                        .with_producer_epoch(v.producer_epoch)
                        .with_topics(topics)
                }
            }
        })
        .collect();
    Some(ResponseKind::DescribeTransactions(
        DescribeTransactionsResponse::default().with_transaction_states(states),
    ))
}

pub(crate) fn list(
    broker: &Arc<Broker>,
    req: ListTransactionsRequest,
    _version: i16,
) -> Option<ResponseKind> {
    broker.ensure_txn_topic();
    // v2 (KIP-1152): only the ids the expression matches whole, RE2 syntax (Kafka: RE2/J).
    let pattern = req
        .transactional_id_pattern
        .as_ref()
        .map(|p| p.to_string())
        .filter(|p| !p.is_empty());
    let id_filter = match pattern.as_deref().map(whole_match) {
        None => None,
        Some(Ok(r)) => Some(r),
        Some(Err(_)) => {
            return Some(ResponseKind::ListTransactions(
                ListTransactionsResponse::default()
                    .with_error_code(ResponseError::InvalidRegularExpression.code()),
            ))
        }
    };
    let states: Vec<String> = req.state_filters.iter().map(|s| s.to_string()).collect();
    let pids: Vec<i64> = req.producer_id_filters.iter().map(|p| p.0).collect();
    let list = broker
        .txns
        .read(|c| c.list(&states, &pids, req.duration_filter, now_ms()));
    let rows = list
        .transactions
        .into_iter()
        .filter(|t| {
            id_filter
                .as_ref()
                .is_none_or(|r| r.is_match(&t.transactional_id))
        })
        .map(|t| {
            ListedState::default()
                .with_transactional_id(TransactionalId(str_bytes(t.transactional_id)))
                .with_producer_id(ProducerId(t.producer_id))
                .with_transaction_state(str_bytes(t.state.name()))
        })
        .collect();
    Some(ResponseKind::ListTransactions(
        ListTransactionsResponse::default()
            .with_unknown_state_filters(
                list.unknown_state_filters
                    .into_iter()
                    .map(str_bytes)
                    .collect(),
            )
            .with_transaction_states(rows),
    ))
}

/// `pattern` compiled to match whole strings only (Java's `Matcher.matches()`). It is first
/// compiled as given, so that an unbalanced `)` cannot escape the anchors.
fn whole_match(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::Regex::new(pattern)?;
    regex::Regex::new(&format!("^(?:{pattern})$"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One unknown partition keeps the whole transaction out: it is answered
    /// UNKNOWN_TOPIC_OR_PARTITION, every other one OPERATION_NOT_ATTEMPTED.
    #[test]
    fn an_unknown_partition_keeps_every_partition_of_its_transaction_out() {
        let parts: Vec<TxnPartition> = vec![("a".into(), 0), ("a".into(), 1), ("b".into(), 0)];
        assert_eq!(refuse_unknown(&parts, |_, _| true), None);
        let codes = refuse_unknown(&parts, |t, p| !(t == "a" && p == 1));
        let unknown = ResponseError::UnknownTopicOrPartition.code();
        let not_attempted = ResponseError::OperationNotAttempted.code();
        assert_eq!(
            codes,
            Some(vec![
                (("a".into(), 0), not_attempted),
                (("a".into(), 1), unknown),
                (("b".into(), 0), not_attempted),
            ])
        );
        let topics = vec![(topic_name("a"), vec![0, 1]), (topic_name("b"), vec![0])];
        let results = refused_results(&topics, &codes.unwrap_or_default());
        let answered: Vec<(String, i32, i16)> = results
            .iter()
            .flat_map(|t| {
                t.results_by_partition.iter().map(|p| {
                    (
                        t.name.0.to_string(),
                        p.partition_index,
                        p.partition_error_code,
                    )
                })
            })
            .collect();
        assert_eq!(
            answered,
            vec![
                ("a".to_string(), 0, not_attempted),
                ("a".to_string(), 1, unknown),
                ("b".to_string(), 0, not_attempted),
            ]
        );
    }

    /// Up to v3 the response carries the one transaction's topics; from v4 each transaction
    /// under its id, in request order.
    #[test]
    fn the_response_carries_one_transaction_up_to_v3_and_each_by_id_after() {
        let topic = AddPartitionsToTxnTopicResult::default().with_name(topic_name("a"));
        let results = vec![
            ("x".to_string(), vec![topic.clone()]),
            ("y".to_string(), vec![]),
        ];
        let v3 = add_partitions_response(3, results.clone());
        assert_eq!(v3.results_by_topic_v3_and_below, vec![topic]);
        assert!(v3.results_by_transaction.is_empty());
        let v4 = add_partitions_response(4, results);
        assert!(v4.results_by_topic_v3_and_below.is_empty());
        let ids: Vec<String> = v4
            .results_by_transaction
            .iter()
            .map(|t| t.transactional_id.0.to_string())
            .collect();
        assert_eq!(ids, vec!["x", "y"]);
    }
}

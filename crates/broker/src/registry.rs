//! Topics as this broker serves them: metadata, effective config and open partition logs.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use parking_lot::RwLock;
use sluice_config::{BrokerConfig, TopicConfig};
use sluice_meta::{Meta, TopicMeta};
use sluice_store::{Log, LogConfig, LogManager, TimestampType, TopicPartition};
use uuid::Uuid;

use crate::BrokerError;

/// One served topic. Replaced whole (copy on write) when it changes.
#[derive(Debug)]
pub(crate) struct TopicState {
    pub(crate) meta: TopicMeta,
    pub(crate) config: TopicConfig,
    /// The open log of each partition this broker serves (in cluster mode, those it owns;
    /// on a single broker, all).
    pub(crate) logs: Vec<Option<Arc<Log>>>,
}

impl TopicState {
    pub(crate) fn log(&self, partition: i32) -> Option<&Arc<Log>> {
        usize::try_from(partition)
            .ok()
            .and_then(|p| self.logs.get(p))
            .and_then(Option::as_ref)
    }

    /// The open logs of the partitions this broker serves.
    pub(crate) fn open_logs(&self) -> impl Iterator<Item = &Arc<Log>> {
        self.logs.iter().flatten()
    }

    pub(crate) fn has_partition(&self, partition: i32) -> bool {
        (0..self.meta.partitions()).contains(&partition)
    }
}

/// The error for a partition this broker has no log for: the topic or partition does not
/// exist, or another broker owns it.
pub(crate) fn missing_partition_code(state: Option<&TopicState>, partition: i32) -> i16 {
    match state {
        Some(s) if s.has_partition(partition) => {
            kafka_protocol::ResponseError::NotLeaderOrFollower.code()
        }
        _ => kafka_protocol::ResponseError::UnknownTopicOrPartition.code(),
    }
}

/// The error for a request naming `current` as the partition's leader epoch when this
/// broker leads it at `ours` (KIP-320): an older epoch is fenced, a newer one not known yet;
/// -1 asks for no check.
pub(crate) fn leader_epoch_code(current: i32, ours: i32) -> Option<i16> {
    if current >= 0 && current < ours {
        Some(kafka_protocol::ResponseError::FencedLeaderEpoch.code())
    } else if current > ours {
        Some(kafka_protocol::ResponseError::UnknownLeaderEpoch.code())
    } else {
        None
    }
}

#[derive(Debug, Default)]
struct Topics {
    by_name: BTreeMap<String, Arc<TopicState>>,
    by_id: HashMap<Uuid, String>,
}

#[derive(Debug, Default)]
pub(crate) struct Registry {
    topics: RwLock<Topics>,
}

/// The store's view of a topic's effective config.
pub(crate) fn log_config(c: &TopicConfig) -> LogConfig {
    LogConfig {
        segment_bytes: c.segment_bytes,
        segment_ms: c.segment_ms,
        segment_jitter_ms: c.segment_jitter_ms,
        retention_ms: c.retention_ms,
        retention_bytes: c.retention_bytes,
        index_interval_bytes: c.index_interval_bytes,
        segment_index_bytes: c.segment_index_bytes,
        max_message_bytes: c.max_message_bytes,
        timestamp_type: match c.timestamp_type {
            sluice_config::TimestampType::CreateTime => TimestampType::CreateTime,
            sluice_config::TimestampType::LogAppendTime => TimestampType::LogAppendTime,
        },
        flush_messages: c.flush_messages,
        flush_ms: c.flush_ms,
        cleanup: sluice_store::Cleanup {
            compact: c.compacts(),
            delete: c.deletes(),
            min_cleanable_dirty_ratio: c.min_cleanable_dirty_ratio,
            min_compaction_lag_ms: c.min_compaction_lag_ms,
            max_compaction_lag_ms: c.max_compaction_lag_ms,
            delete_retention_ms: c.delete_retention_ms,
        },
    }
}

/// Register in the metadata store every topic whose partition directories were found on disk
/// but that the store does not know: this is how a log directory written by Apache Kafka (or
/// a Sluice whose metadata was lost) is adopted in place.
pub(crate) fn adopt_discovered(meta: &Meta, logs: &LogManager) -> Result<(), BrokerError> {
    let mut found: BTreeMap<String, (i32, Option<Uuid>)> = BTreeMap::new();
    for d in logs.discovered() {
        let entry = found.entry(d.tp.topic.clone()).or_insert((0, None));
        entry.0 = entry.0.max(d.tp.partition + 1);
        entry.1 = entry.1.or(d.topic_id);
    }
    for (name, (partitions, id)) in found {
        match meta.topic(&name) {
            Some(known) if known.partitions() >= partitions => {}
            Some(known) => {
                tracing::warn!(topic = %name, known = known.partitions(), on_disk = partitions, "adopting extra partition directories");
                meta.add_partitions(&name, partitions)?;
            }
            None => {
                tracing::info!(topic = %name, partitions, "adopting topic found in the log directories");
                meta.create_topic(&name, partitions, BTreeMap::new(), id)?;
            }
        }
    }
    Ok(())
}

/// Start-up of a cluster member on a log directory that a single broker served: the topics of
/// its embedded metadata store (with their ids, configs and epochs), and any partition
/// directories no metadata names (a log directory written by Apache Kafka), are registered in
/// etcd unless etcd knows them already; their partitions get no owner, so the controller
/// assigns them. No data is copied. The embedded store is then renamed to
/// `__sluice_meta.imported` so that a single broker started on the directory later cannot
/// serve stale metadata. Several brokers starting at once import the same topics harmlessly:
/// creation is a compare-and-swap.
///
/// Partition directories alone are adopted only while a single broker's metadata is imported
/// or the cluster has no topic yet: in a running cluster an unknown directory is a deleted
/// topic's leftover (its owner was dead when it was deleted), not a topic to bring back.
/// Neither is a directory (nor an embedded topic) whose topic id a deletion recorded in etcd
/// names, also in a cluster whose last topic was that one: its broker removes it
/// (`Cluster::let_go_of_deleted`).
pub(crate) fn import_into_cluster(
    store: &sluice_meta::EtcdStore,
    first_dir: &std::path::Path,
    logs: &LogManager,
) -> Result<(), BrokerError> {
    let embedded_dir = first_dir.join("__sluice_meta");
    let mut topics: BTreeMap<String, TopicMeta> = BTreeMap::new();
    let mut quotas = sluice_meta::ClientQuotas::new();
    if embedded_dir.join("metadata.v1").is_file() {
        let embedded = sluice_meta::EmbeddedStore::open(&embedded_dir, || store.cluster_id())?;
        if embedded.cluster_id() != store.cluster_id() {
            return Err(BrokerError::Startup(format!(
                "{} belongs to cluster {} but etcd holds cluster {}; refusing to mix them",
                embedded_dir.display(),
                embedded.cluster_id(),
                store.cluster_id()
            )));
        }
        for t in embedded.topics() {
            topics.insert(t.name.clone(), t);
        }
        quotas = embedded.client_quotas()?;
    }
    let known = store.refresh()?;
    topics.retain(|_, t| !known.deleted.contains_key(&t.id));
    let adopt_dirs = !topics.is_empty() || known.topics.is_empty();
    // A directory without an id is the deleted topic's if a deletion of that name is
    // recorded: nothing else of that name is in the cluster.
    let deleted = |d: &sluice_store::DiscoveredLog| match d.topic_id {
        Some(id) => known.deleted.contains_key(&id),
        None => known.deleted.values().any(|r| r.topic == d.tp.topic),
    };
    for d in logs
        .discovered()
        .into_iter()
        .filter(|d| adopt_dirs && !deleted(d))
    {
        let t = topics
            .entry(d.tp.topic.clone())
            .or_insert_with(|| TopicMeta {
                name: d.tp.topic.clone(),
                id: d.topic_id.unwrap_or_else(Uuid::new_v4),
                epochs: Vec::new(),
                owners: Vec::new(),
                configs: BTreeMap::new(),
            });
        if t.epochs.len() <= d.tp.partition as usize {
            t.epochs.resize(d.tp.partition as usize + 1, 0);
        }
    }
    for t in topics.values() {
        if known.topics.contains_key(&t.name) {
            continue;
        }
        match store.create_topic(
            &t.name,
            t.partitions(),
            t.configs.clone(),
            &[],
            Some(t.id),
            &t.epochs,
        ) {
            Ok(_) => {
                tracing::info!(topic = %t.name, partitions = t.partitions(), "imported topic into the cluster")
            }
            Err(sluice_meta::MetaError::TopicExists(_)) => {}
            Err(e) => return Err(e.into()),
        }
    }
    // Client quotas come along unless the cluster already has its own.
    if !quotas.is_empty() && store.client_quotas()?.is_empty() {
        let alterations: Vec<sluice_meta::QuotaAlteration> = quotas
            .into_iter()
            .map(|(entity, values)| sluice_meta::QuotaAlteration {
                entity,
                ops: values.into_iter().map(|(k, v)| (k, Some(v))).collect(),
            })
            .collect();
        store.alter_client_quotas(&alterations)?;
        tracing::info!(
            entities = alterations.len(),
            "imported client quotas into the cluster"
        );
    }
    if sluice_meta::EmbeddedStore::retire(&embedded_dir)? {
        tracing::info!(
            "moved the embedded metadata into etcd; {} is now __sluice_meta.imported",
            embedded_dir.display()
        );
    }
    Ok(())
}

impl Registry {
    pub(crate) fn len(&self) -> usize {
        self.topics.read().by_name.len()
    }

    pub(crate) fn get(&self, name: &str) -> Option<Arc<TopicState>> {
        self.topics.read().by_name.get(name).cloned()
    }

    /// The topic with id `id`: never another incarnation of its name.
    pub(crate) fn get_by_id(&self, id: Uuid) -> Option<Arc<TopicState>> {
        let topics = self.topics.read();
        topics
            .by_id
            .get(&id)
            .and_then(|n| topics.by_name.get(n))
            .filter(|t| t.meta.id == id)
            .cloned()
    }

    pub(crate) fn all(&self) -> Vec<Arc<TopicState>> {
        self.topics.read().by_name.values().cloned().collect()
    }

    /// Open the logs of every partition of `topic` (whose epochs are already acquired), on up
    /// to `threads` threads (`num.recovery.threads.per.data.dir`, as a cluster opens the
    /// partitions it acquires together): a new partition's files and directory are fsynced,
    /// and one after the other that took about 10 ms a partition.
    pub(crate) fn open_topic(
        &self,
        broker_config: &BrokerConfig,
        logs: &LogManager,
        topic: TopicMeta,
        threads: usize,
    ) -> Result<Arc<TopicState>, BrokerError> {
        let name = topic.name.clone();
        self.open_topics(broker_config, logs, vec![topic], threads)?;
        self.get(&name)
            .ok_or_else(|| BrokerError::Startup(format!("topic {name} vanished once opened")))
    }

    /// Open the logs of every partition of `topics` (epochs already acquired) on up to
    /// `threads` threads at once, each thread taking the next partition: a start after a
    /// crash recovers the partitions in parallel (`num.recovery.threads.per.data.dir`).
    /// Logs the partitions opened, the bytes recovery validated and its rate. The first
    /// failure is returned once the threads stop, as [`Registry::open_topic`]'s would be.
    pub(crate) fn open_topics(
        &self,
        broker_config: &BrokerConfig,
        logs: &LogManager,
        topics: Vec<TopicMeta>,
        threads: usize,
    ) -> Result<(), BrokerError> {
        let started = std::time::Instant::now();
        let configs: Vec<TopicConfig> = topics
            .iter()
            .map(|t| sluice_config::topic_config(broker_config, &t.configs))
            .collect();
        let jobs: Vec<(usize, usize)> = topics
            .iter()
            .enumerate()
            .flat_map(|(t, meta)| (0..meta.epochs.len()).map(move |p| (t, p)))
            .collect();
        // After a failure the remaining partitions are not opened: it is the answer.
        let failed = std::sync::atomic::AtomicBool::new(false);
        let threads = threads.clamp(1, jobs.len().max(1));
        let opened = crate::parallel_map(&jobs, threads, |&(t, partition)| {
            if failed.load(std::sync::atomic::Ordering::Relaxed) {
                return None;
            }
            let meta = &topics[t];
            let tp = TopicPartition {
                topic: meta.name.clone(),
                partition: partition as i32,
            };
            let r = logs
                .open_log(
                    &tp,
                    meta.id,
                    log_config(&configs[t]),
                    meta.epochs[partition],
                )
                .map_err(BrokerError::from);
            if r.is_err() {
                failed.store(true, std::sync::atomic::Ordering::Relaxed);
            }
            Some(r)
        });
        let mut results = Vec::with_capacity(jobs.len());
        for r in opened {
            match r {
                Some(Ok(log)) => results.push(log),
                Some(Err(e)) => return Err(e),
                None => {}
            }
        }
        if results.len() != jobs.len() {
            return Err(BrokerError::Startup(
                "a partition's log was not opened".into(),
            ));
        }
        let recovered_bytes: u64 = results.iter().map(|l| l.recovered_bytes()).sum();
        let mut results = results.into_iter();
        let states: Vec<TopicState> = topics
            .into_iter()
            .zip(configs)
            .map(|(topic, config)| TopicState {
                logs: results
                    .by_ref()
                    .take(topic.epochs.len())
                    .map(Some)
                    .collect(),
                meta: topic,
                config,
            })
            .collect();
        for state in states {
            self.insert(Arc::new(state));
        }
        let secs = started.elapsed().as_secs_f64();
        tracing::info!(
            partitions = jobs.len(),
            threads,
            recovered_bytes,
            seconds = format!("{secs:.2}"),
            recovered_gb_per_s = format!("{:.2}", recovered_bytes as f64 / 1e9 / secs.max(1e-9)),
            "partitions opened"
        );
        Ok(())
    }

    /// Replace the state of topic `name` by `change` applied to its current state, under the
    /// registry's lock: a change made from a state read earlier would undo what happened
    /// since (a failed log re-opened in place, [`Registry::replace_log`]). None if the topic
    /// is gone.
    pub(crate) fn update(
        &self,
        name: &str,
        change: impl FnOnce(&TopicState) -> TopicState,
    ) -> Option<Arc<TopicState>> {
        let mut topics = self.topics.write();
        let next = Arc::new(change(topics.by_name.get(name)?));
        topics.by_name.insert(name.to_string(), next.clone());
        Some(next)
    }

    /// Serve `state`, replacing the topic of its name (an earlier incarnation's id is
    /// forgotten).
    pub(crate) fn insert(&self, state: Arc<TopicState>) {
        let mut topics = self.topics.write();
        let replaced = topics
            .by_name
            .insert(state.meta.name.clone(), state.clone());
        if let Some(old) = replaced.filter(|old| old.meta.id != state.meta.id) {
            topics.by_id.remove(&old.meta.id);
        }
        topics.by_id.insert(state.meta.id, state.meta.name.clone());
    }

    /// Serve `log` as its partition's log from now on (a log re-opened in place; the caller
    /// then gives it the topic's config as it is now, `Broker::apply_topic_config`). False if
    /// the topic is gone, is another incarnation, or served that partition with no log.
    pub(crate) fn replace_log(&self, log: Arc<Log>) -> bool {
        let tp = log.topic_partition().clone();
        let mut topics = self.topics.write();
        let Some(state) = topics.by_name.get(&tp.topic) else {
            return false;
        };
        if state.meta.id != log.topic_id() || state.log(tp.partition).is_none() {
            return false;
        }
        let mut logs = state.logs.clone();
        // Metadata answers the new log's epoch (a re-open is a new one).
        let mut meta = state.meta.clone();
        if let Some(e) = meta.epochs.get_mut(tp.partition as usize) {
            *e = log.leader_epoch();
        }
        logs[tp.partition as usize] = Some(log);
        let next = Arc::new(TopicState {
            meta,
            config: state.config.clone(),
            logs,
        });
        topics.by_name.insert(tp.topic, next);
        true
    }

    pub(crate) fn remove(&self, name: &str) -> Option<Arc<TopicState>> {
        let mut topics = self.topics.write();
        let removed = topics.by_name.remove(name)?;
        topics.by_id.remove(&removed.meta.id);
        Some(removed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(name: &str, id: Uuid) -> Arc<TopicState> {
        Arc::new(TopicState {
            meta: TopicMeta {
                name: name.to_string(),
                id,
                epochs: vec![0],
                owners: vec![],
                configs: BTreeMap::new(),
            },
            config: sluice_config::BrokerConfig::default().topic_config(&BTreeMap::new()),
            logs: vec![None],
        })
    }

    /// A topic deleted and created again under its name (a cluster broker's reconciliation
    /// replaces it in one step): its old id names nothing.
    #[test]
    fn an_earlier_incarnations_id_names_nothing() {
        let r = Registry::default();
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        r.insert(state("t", a));
        assert_eq!(r.get_by_id(a).map(|t| t.meta.id), Some(a));
        r.insert(state("t", b));
        assert!(r.get_by_id(a).is_none());
        assert_eq!(r.get_by_id(b).map(|t| t.meta.id), Some(b));
        r.remove("t");
        assert!(r.get_by_id(b).is_none());
    }
}

//! Topic administration shared by several APIs (CreateTopics, Metadata auto-creation,
//! DeleteTopics, CreatePartitions, config changes): metadata first, then the logs.

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::ResponseError;
use sluice_store::TopicPartition;

use crate::errors::meta_error_code;
use crate::registry::{log_config, TopicState};
use crate::Broker;

/// A refusal with its Kafka error code and a message for the client.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub(crate) code: i16,
    pub(crate) message: String,
}

impl Refusal {
    pub(crate) fn new(e: ResponseError, message: impl Into<String>) -> Refusal {
        Refusal {
            code: e.code(),
            message: message.into(),
        }
    }
}

impl Broker {
    /// Validate the topic-level configs of a create or alter request.
    pub(crate) fn validate_topic_configs(
        &self,
        configs: &BTreeMap<String, String>,
    ) -> Result<(), Refusal> {
        sluice_config::validate_topic_configs(&self.effective_config(), configs)
            .map_err(|e| Refusal::new(ResponseError::InvalidConfig, e.to_string()))
    }

    pub(crate) fn check_new_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: &BTreeMap<String, String>,
    ) -> Result<(), Refusal> {
        sluice_meta::validate_topic_name(name)
            .map_err(|m| Refusal::new(ResponseError::InvalidTopicException, m))?;
        if self.registry.get(name).is_some() {
            return Err(Refusal::new(
                ResponseError::TopicAlreadyExists,
                format!("Topic '{name}' already exists."),
            ));
        }
        if partitions < 1 {
            return Err(Refusal::new(
                ResponseError::InvalidPartitions,
                format!("Number of partitions must be larger than 0, got {partitions}."),
            ));
        }
        if replication_factor < 1 {
            return Err(Refusal::new(
                ResponseError::InvalidReplicationFactor,
                format!("Replication factor must be larger than 0, got {replication_factor}."),
            ));
        }
        let brokers = self.live_broker_count();
        if replication_factor > 1
            && (self.cluster.is_none() || i32::from(replication_factor) > brokers)
        {
            // A cluster accepts a replication factor up to its broker count: replicas are
            // logical there (every broker sees the same storage; docs/cluster.md).
            return Err(Refusal::new(
                ResponseError::InvalidReplicationFactor,
                format!("Unable to replicate the partition {replication_factor} time(s): The target replication factor of {replication_factor} cannot be reached because only {brokers} broker(s) are registered."),
            ));
        }
        self.validate_topic_configs(configs)?;
        self.check_partition_budget(name, partitions).map(drop)
    }

    /// Refuse `added` partitions more when they would take this broker past its partition
    /// budget (`sluice.broker.partitions.max`, by default what its share of the open-files
    /// limit holds): running out of descriptors would fail other partitions' storage and the
    /// listener's accepts. In a cluster the budget is the sum of the live brokers' (each
    /// publishes its own in its registration; the controller places partitions on brokers
    /// under theirs first), checked against every topic's partitions. The broker's internal
    /// topics are never refused (their partition counts are fixed and small). What is granted
    /// stays reserved until the returned hold is dropped, which the caller does once the new
    /// partitions are open, or written to etcd, or creation failed.
    pub(crate) fn check_partition_budget(
        &self,
        name: &str,
        added: i32,
    ) -> Result<BudgetHold<'_>, Refusal> {
        if crate::is_internal_topic(name) {
            return Ok(BudgetHold { broker: self, n: 0 });
        }
        let added = u64::try_from(added).unwrap_or(0);
        let mut reserved = self.budget_reserved.lock();
        let (used, max, whose) = match self.meta.etcd() {
            Some(store) => match store.view().partition_capacity() {
                (used, Some(max)) => (used, max, "the live brokers' budgets together"),
                (_, None) => return Ok(BudgetHold { broker: self, n: 0 }),
            },
            None => (
                self.logs.logs().len() as u64,
                self.fds.partitions,
                "this broker's budget",
            ),
        };
        let want = used.saturating_add(*reserved).saturating_add(added);
        if want <= max {
            *reserved += added;
            return Ok(BudgetHold {
                broker: self,
                n: added,
            });
        }
        let pending = *reserved;
        drop(reserved);
        tracing::warn!(
            topic = name,
            partitions = added,
            used,
            pending,
            max,
            "topic refused: it would take the partitions past {whose} (sluice.broker.partitions.max)"
        );
        Err(Refusal::new(
            ResponseError::PolicyViolation,
            format!(
                "Topic '{name}' refused: {added} more partition(s) would make {want}, past {whose} of {max} (sluice.broker.partitions.max; this broker's open-files limit {})",
                self.fds.limit
            ),
        ))
    }

    /// In cluster mode, apply the records just changed in etcd at once (the cluster thread
    /// would within `sluice.cluster.poll.ms`).
    fn reconcile_now(&self) {
        if let Some(cluster) = &self.cluster {
            cluster.reconcile(self);
        }
    }

    /// Create a topic and open its partitions (in cluster mode, those assigned to this broker;
    /// their owners open the others).
    pub(crate) fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
    ) -> Result<Arc<TopicState>, Refusal> {
        let _budget = self.check_partition_budget(name, partitions)?;
        if self.cluster.is_some() {
            self.meta
                .create_topic(name, partitions, configs, None)
                .map_err(|e| Refusal {
                    code: meta_error_code(&e),
                    message: e.to_string(),
                })?;
            self.reconcile_now();
            tracing::info!(topic = name, partitions, "created topic");
            return self.registry.get(name).ok_or_else(|| {
                Refusal::new(ResponseError::UnknownServerError, "the new topic vanished")
            });
        }
        let meta = self
            .meta
            .create_topic(name, partitions, configs, None)
            .map_err(|e| Refusal {
                code: meta_error_code(&e),
                message: e.to_string(),
            })?;
        let mut meta = meta;
        meta.epochs = self
            .meta
            .acquire_partitions(name, 0..meta.partitions())
            .map_err(|e| Refusal {
                code: meta_error_code(&e),
                message: e.to_string(),
            })?;
        let effective = self.effective_config();
        let threads = effective.recovery_threads_per_data_dir.max(1);
        let state = self
            .registry
            .open_topic(&effective, &self.logs, meta, threads)
            .map_err(|e| {
                tracing::error!(topic = name, "opening the logs of a new topic failed: {e}");
                Refusal::new(ResponseError::KafkaStorageError, e.to_string())
            })?;
        tracing::info!(topic = name, partitions, "created topic");
        Ok(state)
    }

    /// The committed offsets of deleted topic `name` are forgotten in every group this broker
    /// coordinates (tombstones appended to `__consumer_offsets`), as Kafka's coordinator
    /// forgets a deleted partition's offsets: a topic created again under the name starts
    /// with none. Flushed with the coordinator's next round, as expired offsets are.
    pub(crate) fn forget_offsets_of(&self, name: &str) {
        self.groups.run(|c| ((), c.topic_deleted(name)));
    }

    /// Delete a topic: gone from clients' view at once; files removed by the store as soon as
    /// nothing holds them; its committed offsets forgotten.
    pub(crate) fn delete_topic(&self, name: &str) -> Result<(), Refusal> {
        self.meta.delete_topic(name).map_err(|e| Refusal {
            code: meta_error_code(&e),
            message: e.to_string(),
        })?;
        if self.cluster.is_some() {
            self.reconcile_now();
            tracing::info!(topic = name, "deleted topic");
            return Ok(());
        }
        if let Some(state) = self.registry.remove(name) {
            for p in 0..state.meta.partitions() {
                let tp = TopicPartition {
                    topic: name.to_string(),
                    partition: p,
                };
                if let Err(e) = self.logs.delete_log(&tp) {
                    // The store retries removal in the background; the topic is already gone.
                    tracing::warn!(topic = name, partition = p, "deleting partition files: {e}");
                }
                // Fetches waiting on the partition answer now (with the topic's error).
                if let Some(log) = state.log(p) {
                    self.fetch_waiters.wake(log);
                }
            }
            self.forget_offsets_of(name);
        }
        tracing::info!(topic = name, "deleted topic");
        Ok(())
    }

    pub(crate) fn add_partitions(
        &self,
        name: &str,
        count: i32,
        validate_only: bool,
    ) -> Result<(), Refusal> {
        let state = self.registry.get(name).ok_or_else(|| {
            Refusal::new(
                ResponseError::UnknownTopicOrPartition,
                format!("Topic '{name}' does not exist."),
            )
        })?;
        let current = state.meta.partitions();
        if count <= current {
            return Err(Refusal::new(
                ResponseError::InvalidPartitions,
                format!("Topic currently has {current} partitions, which is higher than the requested {count}."),
            ));
        }
        let _budget = self.check_partition_budget(name, count - current)?;
        if validate_only {
            return Ok(());
        }
        let mut meta = self.meta.add_partitions(name, count).map_err(|e| Refusal {
            code: meta_error_code(&e),
            message: e.to_string(),
        })?;
        if self.cluster.is_some() {
            self.reconcile_now();
            tracing::info!(topic = name, from = current, to = count, "added partitions");
            return Ok(());
        }
        let mut added = Vec::with_capacity((count - current) as usize);
        let epochs = self
            .meta
            .acquire_partitions(name, current..count)
            .map_err(|e| Refusal {
                code: meta_error_code(&e),
                message: e.to_string(),
            })?;
        for (p, epoch) in (current..count).zip(epochs) {
            meta.epochs[p as usize] = epoch;
            let tp = TopicPartition {
                topic: name.to_string(),
                partition: p,
            };
            let log = self
                .logs
                .open_log(&tp, meta.id, log_config(&state.config), epoch)
                .map_err(|e| Refusal::new(ResponseError::KafkaStorageError, e.to_string()))?;
            added.push(Some(log));
        }
        // The existing partitions as they are now (one may have been re-opened meanwhile, its
        // configs changed: the new partitions take them below).
        self.registry.update(name, |now| {
            let mut logs = now.logs.clone();
            logs.extend(added);
            for (e, cur) in meta.epochs.iter_mut().zip(&now.meta.epochs) {
                *e = *cur;
            }
            TopicState {
                meta,
                config: now.config.clone(),
                logs,
            }
        });
        self.apply_topic_config(name);
        tracing::info!(topic = name, from = current, to = count, "added partitions");
        Ok(())
    }

    /// Make topic `name`'s config in the registry what the effective broker config and the
    /// topic's overrides in the metadata store make it now, and give it to every open log of
    /// the topic, until what was applied is still what the registry holds: config changes
    /// (the topic's, the broker's dynamic ones) and a re-open of a log (which configures the
    /// new log with what it read) may each apply theirs in any order, and whichever applied a
    /// config the registry no longer holds applies again. One broker (a cluster's brokers
    /// take configs up in their reconciliation).
    pub(crate) fn apply_topic_config(&self, name: &str) {
        for _ in 0..16 {
            let effective = self.effective_config();
            let overrides = self.meta.topic(name).map(|t| t.configs);
            let Some(state) = self.registry.update(name, |now| {
                let mut meta = now.meta.clone();
                if let Some(o) = &overrides {
                    meta.configs = o.clone();
                }
                TopicState {
                    config: sluice_config::topic_config(&effective, &meta.configs),
                    meta,
                    logs: now.logs.clone(),
                }
            }) else {
                return;
            };
            for log in state.open_logs() {
                self.configure_log(log, log_config(&state.config));
            }
            if self
                .registry
                .get(name)
                .is_none_or(|now| now.config == state.config)
            {
                return;
            }
        }
        tracing::warn!(
            topic = name,
            "the topic's config kept changing while it was applied; the next change applies it again"
        );
    }

    /// Replace a topic's config overrides and apply them to its open logs.
    pub(crate) fn set_topic_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<(), Refusal> {
        self.validate_topic_configs(&configs)?;
        let meta = self
            .meta
            .set_topic_configs(name, configs)
            .map_err(|e| Refusal {
                code: meta_error_code(&e),
                message: e.to_string(),
            })?;
        if self.cluster.is_some() {
            self.reconcile_now();
            return Ok(());
        }
        let config = sluice_config::topic_config(&self.effective_config(), &meta.configs);
        #[cfg(test)]
        tests::between_read_and_update();
        let state = self
            .registry
            .update(name, |current| {
                let mut meta = meta;
                meta.epochs = current.meta.epochs.clone();
                TopicState {
                    meta,
                    config: config.clone(),
                    logs: current.logs.clone(),
                }
            })
            .ok_or_else(|| {
                Refusal::new(
                    ResponseError::UnknownTopicOrPartition,
                    format!("Topic '{name}' does not exist."),
                )
            })?;
        drop(state);
        self.apply_topic_config(name);
        Ok(())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]

    use std::cell::RefCell;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use crate::Broker;

    thread_local! {
        /// Run once where a topic change has read the topic and not yet updated it.
        static BETWEEN: RefCell<Option<Box<dyn FnOnce()>>> = RefCell::new(None);
        /// Run once where a re-open has put the new log in the registry and not yet given it
        /// the topic's config.
        static AFTER_REPLACE: RefCell<Option<Box<dyn FnOnce()>>> = RefCell::new(None);
    }

    pub(super) fn between_read_and_update() {
        if let Some(f) = BETWEEN.with(|b| b.borrow_mut().take()) {
            f();
        }
    }

    pub(crate) fn after_replace_log() {
        if let Some(f) = AFTER_REPLACE.with(|b| b.borrow_mut().take()) {
            f();
        }
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap()
    }

    fn partition_0() -> sluice_store::TopicPartition {
        sluice_store::TopicPartition {
            topic: "t".into(),
            partition: 0,
        }
    }

    fn broker_in(dir: &std::path::Path) -> Arc<Broker> {
        let mut props = BTreeMap::new();
        props.insert("node.id".to_string(), "1".to_string());
        props.insert("log.dirs".to_string(), dir.display().to_string());
        Broker::open(sluice_config::BrokerConfig::from_properties(props).unwrap()).unwrap()
    }

    /// A failed log re-opened while a topic's configs change: the change must neither put
    /// the failed log back (it refuses every write until re-opened again, and a coordinator
    /// would load it) nor leave the re-opened one without the new configs.
    #[test]
    fn a_config_change_racing_a_reopen_keeps_the_reopened_log() {
        let (dir, rt) = (tempfile::tempdir().unwrap(), runtime());
        let _in_runtime = rt.enter();
        let broker = broker_in(dir.path());
        broker.create_topic("t", 1, BTreeMap::new()).unwrap();
        let tp = partition_0();
        let failed = broker.logs.get(&tp).unwrap();
        failed.mark_failed("a test fails the log".into());
        let b = broker.clone();
        BETWEEN.with(|h| *h.borrow_mut() = Some(Box::new(move || b.reopen_failed_logs())));
        let configs = BTreeMap::from([("flush.messages".to_string(), "1".to_string())]);
        broker.set_topic_configs("t", configs).unwrap();
        let served = broker.registry.get("t").unwrap().log(0).cloned().unwrap();
        assert!(
            !Arc::ptr_eq(&served, &failed),
            "the failed log is served again"
        );
        assert!(served.failure().is_none());
        assert!(Arc::ptr_eq(&served, &broker.logs.get(&tp).unwrap()));
        assert!(
            served.sync_bounded(),
            "the re-opened log lacks the new configs"
        );
    }

    /// The other order: the re-open has put its log in the registry (with the config it read)
    /// when the configs change; the change configures the new log, and the re-open must not
    /// then give it the config it read before.
    #[test]
    fn a_reopen_racing_a_config_change_ends_with_the_new_configs() {
        let (dir, rt) = (tempfile::tempdir().unwrap(), runtime());
        let _in_runtime = rt.enter();
        let broker = broker_in(dir.path());
        broker.create_topic("t", 1, BTreeMap::new()).unwrap();
        let tp = partition_0();
        broker
            .logs
            .get(&tp)
            .unwrap()
            .mark_failed("a test fails the log".into());
        let b = broker.clone();
        AFTER_REPLACE.with(|h| {
            *h.borrow_mut() = Some(Box::new(move || {
                let configs = BTreeMap::from([("flush.messages".to_string(), "1".to_string())]);
                b.set_topic_configs("t", configs).unwrap();
            }))
        });
        broker.reopen_failed_logs();
        let served = broker.registry.get("t").unwrap().log(0).cloned().unwrap();
        assert!(served.failure().is_none());
        assert!(
            served.sync_bounded(),
            "the re-open gave its log the configs it read before the change"
        );
    }

    fn snapshot_files(dir: &std::path::Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|n| n.ends_with(".snapshot"))
            .collect();
        v.sort();
        v
    }

    /// Found by an adversary on 1d4ea99, since fixed (recording a recovery point sets the
    /// flush check's flag): the prune of old producer snapshots waits for a recovery point
    /// to be recorded (`snapshots::prune` keeps the newest durable snapshot at or below the
    /// recorded one), and `Log::recovery_point_recorded` (store lib.rs:957) marks the
    /// snapshots unpruned but never sets `flush_work`. Interleaving on one broker:
    /// 1. rolls at b2, b3; a flush on the append path (flush.messages, or the cleaner's
    ///    `sync_appended`) makes their snapshots durable: `snapshots_durable` sets the flag;
    /// 2. the flush check (lib.rs:1142) takes the flag; nothing to flush (`moved` false, no
    ///    checkpoint written); `prepare_spare` prunes with the recorded recovery point still
    ///    at b1, so the snapshot at b1 stays;
    /// 3. the periodic checkpoint records b3 (`recovery_point_recorded`): b1 is prunable now;
    /// 4. the log stays idle: every later check skips it (flag clear), and the snapshot at b1
    ///    is never removed. Before 1d4ea99 the next check pruned it. (The same in a cluster:
    ///    the recovery point is recorded in etcd after the group commit's sync.)
    #[test]
    fn a_recorded_recovery_point_prunes_an_idle_logs_snapshots() {
        let (dir, rt) = (tempfile::tempdir().unwrap(), runtime());
        let _in_runtime = rt.enter();
        let broker = broker_in(dir.path());
        broker.create_topic("t", 1, BTreeMap::new()).unwrap();
        let log = broker.logs.get(&partition_0()).unwrap();
        let now = 1_700_000_000_000i64;
        let append = |k: i64| {
            let b = sluice_format::BatchBuilder::new().record(now + k, None, Some(b"v"));
            log.append(
                bytes::Bytes::from(b.build()),
                sluice_store::AppendOrigin::Client,
                now,
            )
            .unwrap();
        };
        append(0);
        log.roll(now).unwrap();
        // The check flushes the sealed segment and records the recovery point (b1).
        broker.flush_due_logs();
        broker.flush_due_logs();
        broker.flush_due_logs();
        append(1);
        log.roll(now).unwrap();
        append(2);
        log.roll(now).unwrap();
        let pdir = log.dir();
        // A flush outside the check (the append path's, under flush.messages).
        log.flush().unwrap();
        broker.flush_due_logs();
        assert_eq!(
            snapshot_files(&pdir).len(),
            3,
            "{:?}",
            snapshot_files(&pdir)
        );
        // The periodic checkpoint (log.flush.offset.checkpoint.interval.ms).
        broker.logs.checkpoint().unwrap();
        for _ in 0..5 {
            broker.flush_due_logs();
        }
        assert_eq!(
            snapshot_files(&pdir).len(),
            2,
            "an old producer snapshot is never pruned on an idle log: {:?}",
            snapshot_files(&pdir)
        );
    }
}

/// Partitions granted by [`Broker::check_partition_budget`] and not yet open: they count
/// against the budget until this is dropped.
pub(crate) struct BudgetHold<'a> {
    broker: &'a Broker,
    n: u64,
}

impl Drop for BudgetHold<'_> {
    fn drop(&mut self) {
        if self.n > 0 {
            let mut reserved = self.broker.budget_reserved.lock();
            *reserved = reserved.saturating_sub(self.n);
        }
    }
}

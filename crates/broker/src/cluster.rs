//! Cluster mode: this broker's part in a shared-storage cluster on etcd (docs/cluster.md).
//!
//! Two threads per broker, both blocking on etcd (never on a runtime thread):
//! - the lease thread renews the broker's etcd lease and keeps the *write deadline*: the
//!   moment until which the lease is surely alive, measured from before the renewal was sent,
//!   minus a third of the lease. Past it the broker appends nothing (it fences itself before
//!   etcd can expire the lease and the controller can move its partitions away).
//! - the cluster thread reads the cluster's records as soon as an etcd watch (a third thread)
//!   reports a change, and at least every `sluice.cluster.poll.ms`; it acquires the
//!   partitions assigned to it (bumping their epoch, recovering their files and starting a
//!   new segment), hands over those a planned move sends elsewhere (stop appending, seal,
//!   fsync, name the new owner: [`Cluster::hand_over`]), releases those taken from it, and,
//!   on the broker that holds the controller key, assigns partitions without a live owner and
//!   balances ownership.
//!
//! Architecture invariant: an acknowledgement of acks=all data follows, in this order, the
//! append, the fsync that covers it, and a transaction in etcd that confirms this broker's
//! registration and the owner records of the round's partitions are unchanged since it
//! acquired them ([`Cluster::confirm`], run by the group commit once per round). A broker that
//! lost a partition therefore never acknowledges data the new owner may not have: the new
//! owner acquired (changing the record) before it read the files.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};
use sluice_config::ClusterSettings;
use sluice_meta::etcd::WatchCancel;
use sluice_meta::{BrokerInfo, ClusterView, EtcdStore, OwnerRecord, Renewal};
use sluice_store::{Log, TopicPartition};

use crate::locality::{Settling, Volumes};
use crate::peers::Probe;
use crate::registry::{log_config, TopicState};
use crate::{now_ms, Broker, OFFSETS_TOPIC, SHARE_STATE_TOPIC, TXN_TOPIC};

/// Most ownership changes the controller makes to balance load in one round.
const BALANCE_MOVES_MAX: usize = 8;

/// First wait before acquiring again a partition whose files could not be opened (at least
/// the cluster poll), doubled at each failure up to [`ACQUIRE_RETRY_MAX`].
const ACQUIRE_RETRY_MIN: Duration = Duration::from_millis(500);
const ACQUIRE_RETRY_MAX: Duration = Duration::from_secs(30);

/// A view whose count plan was empty, with the controller key's revision and the settled
/// brokers ([`Cluster::bytes_round`]).
type Counted = (Arc<ClusterView>, i64, BTreeSet<i32>);

/// This broker's view of its place in the cluster.
#[derive(Debug)]
pub(crate) struct Cluster {
    settings: ClusterSettings,
    /// This broker's log dirs as the cluster numbers its volumes, and which it reaches
    /// directly (`locality.rs`).
    pub(crate) volumes: Volumes,
    /// As the controller: when each broker registered, for `sluice.cluster.locality.delay.ms`.
    settling: Mutex<Settling>,
    /// This broker's bytes in, read each `sluice.cluster.balance.bytes.window.ms` (`load.rs`).
    load_meter: Mutex<crate::load::LoadMeter>,
    /// As the controller: when it next compares the brokers' bytes in (None: not the
    /// controller; a new controller waits one interval, for loads of the ownership it sees).
    bytes_due: Mutex<Option<Instant>>,
    /// Partitions this broker serves, with the owner record it acquired. The write gate
    /// ([`Gate`]) lets a partition's files be written only while it is here, under the epoch
    /// and topic id of its log.
    held: RwLock<HashMap<TopicPartition, Held>>,
    /// Held from before this broker rewrites one of its owner records (`record_progress`)
    /// until `held` has the new record: a reconciliation that sees a newer record of its own
    /// at its epoch takes it before deciding the record changed behind its back.
    progress: Mutex<()>,
    /// Confirmation rounds hold it shared; a cleaner switch's announcement, which rewrites an
    /// owner record outside the flush thread, holds it alone, so that no round compares the
    /// record's mod revision from before the rewrite (a spurious "not owner").
    confirming: RwLock<()>,
    /// Held partitions being handed over: no new append is taken ([`Cluster::may_write`]),
    /// while the hand-over itself seals and fsyncs through the gate.
    handing_over: RwLock<HashSet<TopicPartition>>,
    /// Held partitions whose log failed, to let go and acquire again at the next
    /// reconciliation ([`Cluster::acquire_again`]).
    failed_logs: Mutex<HashSet<TopicPartition>>,
    /// Until when appends are allowed (see the module doc).
    write_deadline: Mutex<Instant>,
    /// Held partitions whose last confirmation could not reach etcd. Their appends are
    /// refused (before anything is written) until a confirmation succeeds again: what was
    /// appended meanwhile could not be acknowledged, yet is published once ownership is
    /// confirmed, so every further append would only add records that a client re-sending
    /// under a new producer epoch stores twice.
    unconfirmed: RwLock<HashSet<TopicPartition>>,
    /// Partitions assigned to this broker whose files could not be opened (storage refuses,
    /// or holds less than was recorded durable: a volume not mounted), with when to try
    /// again and the wait after that (doubling up to [`ACQUIRE_RETRY_MAX`]): each try bumps
    /// the partition's epoch in etcd and logs an error.
    acquire_retry: Mutex<HashMap<TopicPartition, (Instant, Duration)>>,
    /// Set when etcd says the lease has expired: every partition is released and the broker
    /// registers anew.
    lease_lost: AtomicBool,
    /// Set while a log dir's volume is not there (`Broker::log_dir_volume_missing`): the
    /// broker has left the cluster (its registration revoked, so its partitions go to brokers
    /// that see the volume) and registers again once the volume is back.
    volume_away: AtomicBool,
    /// Set by a controlled shutdown.
    stopping: AtomicBool,
    /// One reconciliation at a time (the cluster thread, or a topic change on a request).
    reconcile_lock: Mutex<()>,
    /// What the last reconciliations left steady ([`Cluster::reconcile`]); taken under
    /// `reconcile_lock`.
    passes: Mutex<Passes>,
    /// (controller key revision, view revision, settled brokers) of the last controller round
    /// that planned nothing ([`Cluster::control`]).
    planned_empty: Mutex<Option<(i64, i64, BTreeSet<i32>)>>,
    /// The view of this controller's last round that planned nothing, with the controller
    /// key's revision and the settled brokers: what the bytes-in round plans from, on the
    /// load thread ([`Cluster::bytes_round`]), so that it never delays the cluster thread's
    /// acquisitions. None while a count plan is under way or another broker is the
    /// controller; one left from before this broker lost the controller key moves nothing
    /// (an assignment names the key's create revision: `EtcdStore::assign`).
    counted: Mutex<Option<Counted>>,
    /// Set by whatever changes what this broker holds outside a reconciliation (a log failed,
    /// everything released): the next reconciliation visits every topic.
    visit_all: AtomicBool,
    /// Wakes the cluster thread before its next poll: the etcd watch saw a change.
    wakeup: Arc<Wakeup>,
    /// Ends the etcd watch (controlled shutdown).
    watch_cancel: Arc<WatchCancel>,
    /// When the cluster thread last read every record although the watch kept its view
    /// current ([`EtcdStore::refresh_current`]).
    last_full_read: Mutex<Instant>,
    /// Set once the controlled shutdown has run (it runs once).
    left: AtomicBool,
    /// Set when another process registered with this node id: this one never registers
    /// again ([`Renewal::Replaced`]).
    replaced: AtomicBool,
    /// The death probe's knowledge of the other brokers' listeners ([`Cluster::probe_peers`]).
    probed: Mutex<HashMap<i32, Probed>>,
    threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

/// The write gate of a broker in a cluster (`sluice_store::WriteGate`): every write to a
/// partition's files asks it immediately before it writes. The broker's cluster store records
/// a cleaner switch's announcement.
#[derive(Debug)]
pub(crate) struct Gate(pub(crate) Arc<Cluster>, pub(crate) Weak<Broker>);

impl sluice_store::WriteGate for Gate {
    fn check(
        &self,
        tp: &TopicPartition,
        topic_id: uuid::Uuid,
        leader_epoch: i32,
    ) -> Result<(), String> {
        self.0.may_write_files(tp, topic_id, leader_epoch)
    }

    fn announce_switch(
        &self,
        tp: &TopicPartition,
        topic_id: uuid::Uuid,
        leader_epoch: i32,
        switch: sluice_store::CleanerSwitch,
    ) -> Result<(), String> {
        let broker = self.1.upgrade().ok_or("the broker is shutting down")?;
        let store = broker.meta.etcd().ok_or("no cluster store")?;
        self.0
            .announce_switch(store, tp, topic_id, leader_epoch, switch)
    }
}

/// A partition this broker holds: the owner record it acquired and the id of the topic
/// (the incarnation of its name) it acquired it for. A topic deleted and created again
/// starts its epochs anew, so the epoch alone does not tell a log object of the deleted
/// topic from one of the new.
#[derive(Clone, Copy, Debug)]
struct Held {
    record: OwnerRecord,
    topic_id: uuid::Uuid,
}

/// One reconciliation's reading of the cluster: the view it decides from, and what this
/// broker may do in it ([`Cluster::reconcile`]).
struct Round<'a> {
    broker: &'a Broker,
    store: &'a EtcdStore,
    view: &'a ClusterView,
    /// The broker's configuration with the view's dynamic configs taken up.
    effective: &'a sluice_config::BrokerConfig,
    /// This broker may hold partitions now ([`Cluster::may_hold_partitions`]).
    usable: bool,
    /// A log dir's volume is missing: nothing is acquired.
    volume_missing: bool,
}

/// What a reconciliation builds for one topic of the view ([`Cluster::reconcile_topic`]).
struct TopicPass<'a> {
    topic: &'a sluice_meta::TopicMeta,
    /// The registry's state of the topic, unless it is of a deleted incarnation of the name.
    existing: Option<Arc<TopicState>>,
    /// The registry held a deleted incarnation of the topic's name.
    replaced: bool,
    config: sluice_config::TopicConfig,
    /// The topic as this broker serves it: the epochs (and owners) of what it holds.
    meta: sluice_meta::TopicMeta,
    /// The partitions assigned here to acquire together, with the records naming this broker.
    to_acquire: Vec<(i32, OwnerRecord)>,
    /// Every partition's step so far left it as it was ([`PartitionStep::is_steady`]).
    steady: bool,
}

/// What the reconciliations left steady: the topics whose every partition was kept, or is
/// neither held nor assigned here, with the records they were decided from, and what every
/// topic's decisions also rest on.
#[derive(Debug, Default)]
struct Passes {
    /// (topic id, the view's revision of the topic's records), by name.
    steady: HashMap<String, (uuid::Uuid, i64)>,
    /// The inputs of the last visit of every topic.
    inputs: Option<RoundInputs>,
    /// When every topic was last visited.
    all_at: Option<Instant>,
}

/// What every topic's reconciliation rests on besides its own records: a change visits every
/// topic.
#[derive(Debug, PartialEq)]
struct RoundInputs {
    usable: bool,
    volume_missing: bool,
    brokers: BTreeMap<i32, sluice_meta::BrokerInfo>,
    broker_configs: sluice_meta::broker_configs::BrokerConfigs,
    deleted: BTreeMap<uuid::Uuid, sluice_meta::DeletedTopic>,
}

/// Every topic is visited at least this often, whatever changed.
const VISIT_ALL_EVERY: Duration = Duration::from_secs(10);

/// What a reconciliation does with one partition ([`decide_partition`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PartitionStep {
    /// A planned move to the live broker `to`: hand the partition over under `record`.
    HandOver { record: OwnerRecord, to: i32 },
    /// The view is older than the record this broker holds (its own acquisition or progress
    /// write, made after the view was read): keep serving, under the held record's epoch.
    KeepNewerHeld(OwnerRecord),
    /// The record is the one this broker holds, or older at the same epoch: keep serving.
    Keep,
    /// The record changed but names this broker at its epoch: acquire again in place.
    AcquireInPlace(OwnerRecord),
    /// Assigned here, but not yet: no volume, or a failed acquisition is backing off.
    NotYet,
    /// Assigned here: acquire it with the topic's others, letting go first of what is held
    /// (`release_held`: held under another epoch).
    Acquire {
        record: OwnerRecord,
        release_held: bool,
    },
    /// Held, but assigned elsewhere (to `new_owner`; -1: no record) or not servable now.
    LetGo { new_owner: i32 },
    /// Neither held nor assigned here.
    Nothing,
}

impl PartitionStep {
    /// Whether the step leaves the partition as it is, for as long as its record stays the
    /// same: kept under the record the view shows, or neither held nor assigned here.
    fn is_steady(&self) -> bool {
        matches!(self, PartitionStep::Keep | PartitionStep::Nothing)
    }
}

/// Decide what to do with a partition from the record this broker holds it under (`held`),
/// the view's owner record (`record`), whether the record names this broker and it may hold
/// partitions (`mine`, `usable`: [`Cluster::may_hold_partitions`]), a planned move to a live
/// broker (`moving`), and whether an acquisition must wait (`not_yet`, asked only when it
/// matters). Pure: the caller does what it says.
///
/// Keeps: a view older than what this broker holds never lets go of (or acquires again) a
/// partition just acquired, since every acquisition bumps the epoch and a record at this
/// broker's epoch was written by this broker; a partition whose record names another broker,
/// or that this broker cannot serve now, is let go (docs/cluster.md, Ownership).
fn decide_partition(
    held: Option<OwnerRecord>,
    record: Option<OwnerRecord>,
    mine: bool,
    usable: bool,
    moving: Option<i32>,
    not_yet: impl FnOnce() -> bool,
) -> PartitionStep {
    if let (Some(to), Some(r)) = (moving, record) {
        if mine && held.is_none_or(|h| h.owner.epoch == r.owner.epoch) {
            return PartitionStep::HandOver { record: r, to };
        }
    }
    match (held, record) {
        // The view is older than the record this broker holds (its own acquisition or
        // progress write, made after the view was read, by this or a concurrent
        // reconciliation): nothing to decide from it for this partition; a later round with
        // a newer view does. Deciding from it let go of partitions just acquired and
        // acquired them again, one epoch bump each, at every topic creation
        // (test_open_files).
        (Some(h), Some(r)) if usable && h.mod_revision > r.mod_revision => {
            PartitionStep::KeepNewerHeld(h)
        }
        // Equal, or newer than the view: this broker rewrote its own record (a recovery
        // point) after the view was read.
        (Some(h), Some(r))
            if mine && h.mod_revision >= r.mod_revision && h.owner.epoch == r.owner.epoch =>
        {
            PartitionStep::Keep
        }
        // The record changed but names us at our epoch: no other broker acquired it
        // meanwhile (every acquisition bumps the epoch), so the files are as we left them.
        (Some(h), Some(r)) if mine && r.owner.epoch == h.owner.epoch => {
            PartitionStep::AcquireInPlace(r)
        }
        // No volume, or its files could not be opened a moment ago: not yet.
        (None, Some(_)) if mine && not_yet() => PartitionStep::NotYet,
        (held, Some(r)) if mine => PartitionStep::Acquire {
            record: r,
            release_held: held.is_some(),
        },
        // Assigned elsewhere, or this broker cannot serve it now (leaving, a lost lease):
        // stop appending at once, then let go.
        (Some(_), _) => PartitionStep::LetGo {
            new_owner: record.map_or(-1, |r| r.owner.node),
        },
        (None, _) => PartitionStep::Nothing,
    }
}

/// Why a confirmation did not confirm a partition.
#[derive(Debug, thiserror::Error)]
enum ConfirmError {
    /// The partition moved (or is moving) to another broker.
    #[error("{0}")]
    NotOwner(String),
    /// etcd could not be asked: ownership is unknown.
    #[error("ownership could not be confirmed: {0}")]
    Unreachable(String),
}

/// Refusals in a row, one probe round apart, after a broker's listener accepted a connection,
/// that tell its process is gone ([`Cluster::probe_peers`]).
const DEATH_REFUSALS: u32 = 2;
/// Time limit of one probe's connection attempt: a listener that does not answer (a host
/// down, a network cut) says nothing; only a refusal counts.
const PROBE_CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// What the death probe knows of another broker's listener, for one registration (lease).
#[derive(Debug, Default)]
struct Probed {
    lease: i64,
    /// The listener accepted a connection under this registration.
    accepted: bool,
    /// Refusals in a row since.
    refusals: u32,
}

/// A flag the cluster thread waits on between its rounds.
#[derive(Debug, Default)]
struct Wakeup {
    pending: Mutex<bool>,
    cv: Condvar,
}

impl Wakeup {
    fn wake(&self) {
        *self.pending.lock() = true;
        self.cv.notify_all();
    }

    /// Until woken (since the last wait) or `timeout` passes.
    fn wait(&self, timeout: Duration) {
        let mut pending = self.pending.lock();
        if !*pending {
            self.cv.wait_for(&mut pending, timeout);
        }
        *pending = false;
    }
}

impl Cluster {
    pub(crate) fn new(settings: ClusterSettings, volumes: Volumes) -> Cluster {
        Cluster {
            settings,
            volumes,
            settling: Mutex::new(Settling::default()),
            load_meter: Mutex::new(crate::load::LoadMeter::default()),
            bytes_due: Mutex::new(None),
            held: RwLock::new(HashMap::new()),
            progress: Mutex::new(()),
            confirming: RwLock::new(()),
            handing_over: RwLock::new(HashSet::new()),
            failed_logs: Mutex::new(HashSet::new()),
            write_deadline: Mutex::new(Instant::now()),
            unconfirmed: RwLock::new(HashSet::new()),
            acquire_retry: Mutex::new(HashMap::new()),
            lease_lost: AtomicBool::new(false),
            volume_away: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
            reconcile_lock: Mutex::new(()),
            passes: Mutex::new(Passes::default()),
            planned_empty: Mutex::new(None),
            counted: Mutex::new(None),
            visit_all: AtomicBool::new(true),
            wakeup: Arc::new(Wakeup::default()),
            watch_cancel: Arc::new(WatchCancel::default()),
            last_full_read: Mutex::new(Instant::now()),
            left: AtomicBool::new(false),
            replaced: AtomicBool::new(false),
            probed: Mutex::new(HashMap::new()),
            threads: Mutex::new(Vec::new()),
        }
    }

    fn lease(&self) -> Duration {
        // etcd counts leases in whole seconds.
        Duration::from_secs((self.settings.lease_ms / 1000).max(2))
    }

    /// True if this broker may append to `tp` now: it holds the partition, its lease is
    /// surely alive, and it is not shutting down.
    pub(crate) fn may_write(&self, tp: &TopicPartition) -> bool {
        !self.stopping.load(Ordering::Acquire)
            && Instant::now() < *self.write_deadline.lock()
            && self.held.read().contains_key(tp)
            && !self.handing_over.read().contains(tp)
    }

    /// Whether an acquisition of `tp` by this broker may come soon, if it is assigned here:
    /// the broker may acquire now (not leaving, its lease alive, the volume there), and no
    /// failed try of `tp` is backing off (`acquire_retry`). A produce waits for one only then
    /// (`Broker::awaiting_acquisition`).
    pub(crate) fn may_acquire_soon(&self, tp: &TopicPartition) -> bool {
        !self.stopping.load(Ordering::Acquire)
            && !self.lease_lost.load(Ordering::Acquire)
            && !self.volume_away.load(Ordering::Acquire)
            && Instant::now() < *self.write_deadline.lock()
            && self
                .acquire_retry
                .lock()
                .get(tp)
                .is_none_or(|(at, _)| Instant::now() >= *at)
    }

    #[cfg(test)]
    fn hold_for_test(&self, tp: &TopicPartition, topic_id: uuid::Uuid, record: OwnerRecord) {
        self.held
            .write()
            .insert(tp.clone(), Held { record, topic_id });
    }

    /// The write gate's answer ([`Gate`]): this broker holds `tp` under the epoch its log was
    /// opened (or acquired again) with, and its lease is surely alive. Unlike
    /// [`Cluster::may_write`], a hand-over and a controlled shutdown pass it: they seal and
    /// fsync what they hold before they let go.
    fn may_write_files(
        &self,
        tp: &TopicPartition,
        topic_id: uuid::Uuid,
        leader_epoch: i32,
    ) -> Result<(), String> {
        if Instant::now() >= *self.write_deadline.lock() {
            return Err("the broker's etcd lease was not renewed in time".into());
        }
        match self.held.read().get(tp) {
            Some(h) if h.topic_id != topic_id => Err(format!(
                "the log is of topic id {topic_id}, the partition is held for topic id {}",
                h.topic_id
            )),
            Some(h) if h.record.owner.epoch == leader_epoch => Ok(()),
            Some(h) => Err(format!(
                "the log was opened under epoch {leader_epoch}, the partition is held under {}",
                h.record.owner.epoch
            )),
            None => Err("the partition is not held by this broker".into()),
        }
    }

    /// Record `switch` in `tp`'s owner record (`EtcdStore::record_switch`), after the write
    /// gate's check, by compare-and-swap on the record this broker holds under the log's
    /// epoch and topic id; the held record becomes the new one, as after `record_progress`.
    fn announce_switch(
        &self,
        store: &EtcdStore,
        tp: &TopicPartition,
        topic_id: uuid::Uuid,
        leader_epoch: i32,
        switch: sluice_store::CleanerSwitch,
    ) -> Result<(), String> {
        self.may_write_files(tp, topic_id, leader_epoch)?;
        let _confirming = self.confirming.write();
        let _progress = self.progress.lock();
        let held = match self.held.read().get(tp) {
            Some(h) if h.topic_id == topic_id && h.record.owner.epoch == leader_epoch => h.record,
            _ => return Err("the partition is no longer held under this log's epoch".into()),
        };
        let recorded = sluice_meta::Switch {
            base: switch.base,
            id: switch.id,
        };
        match store.record_switch(&tp.topic, tp.partition, held, recorded) {
            Ok(Some(next)) => {
                self.took_progress(tp, held, next);
                Ok(())
            }
            Ok(None) => Err("ownership changed before the switch was recorded".into()),
            Err(e) => Err(format!("recording the switch failed: {e}")),
        }
    }

    /// The lease could not be renewed: once the write deadline has passed, nothing may be
    /// written (the write gate already refuses), and the partitions go: their coordinators
    /// unload (their clients get NOT_COORDINATOR and look for the new one), reads end
    /// (NOT_LEADER_OR_FOLLOWER), and the broker registers again when etcd answers, as after
    /// an expired lease. A later renewal may still find the lease alive; the partitions are
    /// then acquired again, under a new epoch.
    fn fence_if_past_deadline(&self) {
        if Instant::now() < *self.write_deadline.lock() {
            return;
        }
        if !self.lease_lost.swap(true, Ordering::AcqRel) {
            tracing::error!("the etcd lease was not renewed before the write deadline: this broker writes nothing more and lets its partitions go; it registers again once etcd answers");
            self.wakeup.wake();
        }
    }

    /// Ready to serve (`/readyz`): not shutting down, and the lease surely alive.
    pub(crate) fn readiness(&self) -> Result<(), String> {
        if self.stopping.load(Ordering::Acquire) {
            return Err("the broker is shutting down".into());
        }
        if Instant::now() >= *self.write_deadline.lock() {
            return Err(
                "the broker's etcd lease was not renewed in time (etcd unreachable?)".into(),
            );
        }
        Ok(())
    }

    /// True while `tp`'s ownership could not be confirmed since its last failed attempt
    /// (see `unconfirmed`): the produce path then asks for a confirmation round.
    pub(crate) fn is_unconfirmed(&self, tp: &TopicPartition) -> bool {
        self.unconfirmed.read().contains(tp)
    }

    /// After a flush round: confirm in etcd (linearizably) that this broker still holds the
    /// partitions of `logs` under the records it acquired, then publish to readers what was
    /// durable before the confirmation began. One result per log: a partition that moved
    /// fails alone, the others of the round are acknowledged (nothing is published for a
    /// failed one).
    pub(crate) fn confirm(&self, store: &EtcdStore, logs: &[Arc<Log>]) -> Vec<Result<(), String>> {
        // Taken before the check: data durable by then was on storage before any new owner
        // could have acquired the partition and read its files.
        let _confirming = self.confirming.read();
        let marks: Vec<_> = logs.iter().map(|l| l.synced_mark()).collect();
        // The owner record names the newest segment of what is published before it is: a
        // takeover refuses a listing of the directory without it (a stale view).
        let recorded: Vec<_> = logs
            .iter()
            .zip(&marks)
            .map(|(log, mark)| self.record_segment(store, log, mark.base))
            .collect();
        let mut outcomes = self.confirm_held(store, logs);
        for (o, r) in outcomes.iter_mut().zip(recorded) {
            if o.is_ok() {
                *o = r;
            }
        }
        {
            let mut unconfirmed = self.unconfirmed.write();
            for (log, ok) in logs.iter().zip(&outcomes) {
                match ok {
                    Ok(()) => {
                        unconfirmed.remove(log.topic_partition());
                    }
                    Err(ConfirmError::Unreachable(_)) => {
                        unconfirmed.insert(log.topic_partition().clone());
                    }
                    Err(ConfirmError::NotOwner(_)) => {}
                }
            }
        }
        let outcomes: Vec<Result<(), String>> = outcomes
            .into_iter()
            .map(|o| o.map_err(|e| e.to_string()))
            .collect();
        for ((log, mark), ok) in logs.iter().zip(marks).zip(&outcomes) {
            if ok.is_ok() {
                log.publish(mark);
            }
        }
        for (log, ok) in logs.iter().zip(&outcomes) {
            if ok.is_ok() {
                self.record_recovery_point(store, log);
            }
        }
        outcomes
    }

    /// Keep the owner record's recovery point up with the log's (it moves at rolls and full
    /// flushes), so that the next owner validates only what lies after it. Runs on the flush
    /// thread after a confirmed round, or at acquisition: never beside a confirmation.
    fn record_recovery_point(&self, store: &EtcdStore, log: &Log) {
        let rp = log.recovery_point_offset();
        match self.record_progress(store, log, rp, 0, false) {
            Ok(true) => log.recovery_point_recorded(rp),
            Ok(false) => {}
            Err(ConfirmError::NotOwner(e)) => {
                tracing::debug!(tp = ?log.topic_partition(), "recovery point not recorded: {e}")
            }
            Err(ConfirmError::Unreachable(e)) => {
                tracing::warn!(tp = ?log.topic_partition(), "recording the recovery point failed: {e}")
            }
        }
    }

    /// Make the owner record name `segment` (a synced mark's segment, its directory entry
    /// durable) as the newest segment of published data, before anything in it is published
    /// (docs/cluster.md, fencing point 2). A no-op when it does already. Runs on the flush
    /// thread in a confirmation round, or at acquisition.
    fn record_segment(
        &self,
        store: &EtcdStore,
        log: &Log,
        segment: i64,
    ) -> Result<(), ConfirmError> {
        self.record_progress(store, log, 0, segment, false)
            .map(|_| ())
    }

    /// Raise the owner record's recovery point to `rp` and its newest segment to `segment`
    /// where they are below (or set the segment, at acquisition: `acquired`), by
    /// compare-and-swap on the record this broker holds for `log`. Ok(true) if it wrote,
    /// Ok(false) if the record already said as much.
    fn record_progress(
        &self,
        store: &EtcdStore,
        log: &Log,
        rp: i64,
        segment: i64,
        acquired: bool,
    ) -> Result<bool, ConfirmError> {
        let Some(p) = self.progress_of(log, rp, segment, acquired)? else {
            return Ok(false);
        };
        let tp = log.topic_partition();
        let _progress = self.progress.lock();
        match store.record_progress(&tp.topic, p, acquired) {
            Ok(Some(next)) => {
                self.took_progress(tp, p.held, next);
                Ok(true)
            }
            Ok(None) => Err(ConfirmError::NotOwner(
                "ownership changed before the acknowledgement".to_string(),
            )),
            Err(e) => Err(ConfirmError::Unreachable(e.to_string())),
        }
    }

    /// What [`Cluster::record_progress`] writes for `log`, from the record this broker holds
    /// for it: None when the record says it all already.
    fn progress_of(
        &self,
        log: &Log,
        rp: i64,
        segment: i64,
        acquired: bool,
    ) -> Result<Option<sluice_meta::cluster::Progress>, ConfirmError> {
        let tp = log.topic_partition();
        let Some(Held {
            record: held,
            topic_id,
        }) = self.held.read().get(tp).copied()
        else {
            return Err(ConfirmError::NotOwner(format!(
                "{tp:?} is no longer owned by this broker"
            )));
        };
        if topic_id != log.topic_id() || held.owner.epoch != log.leader_epoch() {
            return Err(ConfirmError::NotOwner(format!(
                "{tp:?} was acquired again since this log was opened"
            )));
        }
        let same_segment = if acquired {
            segment == held.owner.segment
        } else {
            segment <= held.owner.segment
        };
        // What the next owner may trust without reading it (`sluice_store::SealedDigest`):
        // the sealed segments below the newest one the record names. Rewritten when they
        // change (a roll, retention, a cleaning), so that a takeover rarely finds it stale.
        let below = if acquired || !same_segment {
            segment
        } else {
            held.owner.segment
        };
        let d = log.sealed_digest(below);
        let sealed = Some(sluice_meta::cluster::Sealed {
            below: d.below,
            count: d.count,
            hash: d.hash,
        });
        // The producer snapshot the next owner may trust at the recovery point written.
        let snapshot = (rp > 0)
            .then(|| log.vouched_snapshot(rp.max(held.owner.recovery_point)))
            .flatten()
            .map(|s| sluice_meta::cluster::SnapshotRef {
                offset: s.offset,
                crc: s.crc,
                previous: s.previous.unwrap_or(0),
            });
        // The volume the log lies on, for the controller's choice of its next owner.
        let volume = self.volumes.dir_of(&log.dir()).and_then(|d| d.volume);
        if rp <= held.owner.recovery_point
            && same_segment
            && sealed == held.owner.sealed
            && (snapshot.is_none() || snapshot == held.owner.snapshot)
            && (volume.is_none() || volume == held.owner.volume)
        {
            return Ok(None);
        }
        Ok(Some(sluice_meta::cluster::Progress {
            partition: tp.partition,
            held,
            recovery_point: rp,
            segment,
            sealed,
            snapshot,
            volume,
        }))
    }

    /// `next`, written over `held` by a progress write, is the record this broker holds for
    /// `tp` now, if it still holds `held` (not released meanwhile). Under `progress`.
    fn took_progress(&self, tp: &TopicPartition, held: OwnerRecord, next: OwnerRecord) {
        let mut all = self.held.write();
        if let Some(h) = all
            .get_mut(tp)
            .filter(|h| h.record.mod_revision == held.mod_revision)
        {
            h.record = next;
        }
    }

    fn confirm_held(&self, store: &EtcdStore, logs: &[Arc<Log>]) -> Vec<Result<(), ConfirmError>> {
        let mut out: Vec<Result<(), ConfirmError>> = Vec::with_capacity(logs.len());
        let mut held: Vec<(usize, (String, i32, i64))> = Vec::with_capacity(logs.len());
        {
            let records = self.held.read();
            for (i, log) in logs.iter().enumerate() {
                let tp = log.topic_partition();
                match records.get(tp) {
                    // Held under the epoch of this log object: data appended to the log of an
                    // earlier acquisition is never confirmed by a later one.
                    Some(Held {
                        record: r,
                        topic_id,
                    }) if r.owner.epoch == log.leader_epoch() && *topic_id == log.topic_id() => {
                        held.push((i, (tp.topic.clone(), tp.partition, r.mod_revision)));
                        out.push(Ok(()));
                    }
                    Some(_) => out.push(Err(ConfirmError::NotOwner(format!(
                        "{tp:?} was acquired again since this log was opened"
                    )))),
                    None => out.push(Err(ConfirmError::NotOwner(format!(
                        "{tp:?} is no longer owned by this broker"
                    )))),
                }
            }
        }
        let all: Vec<_> = held.iter().map(|(_, h)| h.clone()).collect();
        match store.confirm(&all) {
            Ok(true) => {}
            // Some record changed: find which, one transaction each (the rare path).
            Ok(false) => {
                for (i, h) in &held {
                    out[*i] = match store.confirm(std::slice::from_ref(h)) {
                        Ok(true) => Ok(()),
                        Ok(false) => Err(ConfirmError::NotOwner(
                            "ownership changed before the acknowledgement".to_string(),
                        )),
                        Err(e) => Err(ConfirmError::Unreachable(e.to_string())),
                    };
                }
            }
            Err(e) => {
                for (i, _) in &held {
                    out[*i] = Err(ConfirmError::Unreachable(e.to_string()));
                }
            }
        }
        out
    }

    fn info(broker: &Broker) -> BrokerInfo {
        let l = broker.inter_broker();
        let console = broker.config.console_listener.as_deref().map(|a| {
            // A wildcard address: the other brokers reach it at this broker's host.
            match a.rsplit_once(':') {
                Some(("0.0.0.0" | "" | "[::]" | "::", port)) => format!("{}:{port}", l.host),
                _ => a.to_string(),
            }
        });
        BrokerInfo {
            node_id: broker.node_id,
            host: l.host,
            port: l.port,
            listeners: broker
                .config
                .advertised_listeners
                .iter()
                .map(|a| sluice_meta::Endpoint {
                    name: a.name.clone(),
                    host: a.host.clone(),
                    port: a.port,
                })
                .collect(),
            rack: broker.config.rack.clone(),
            partitions_max: Some(broker.fds.partitions),
            reads: broker.config.read_replicas,
            direct: broker
                .cluster
                .as_ref()
                .map(|c| c.volumes.direct())
                .unwrap_or_default(),
            console,
            lease: 0,
        }
    }

    /// Another process registered with this node id: nothing more is written, the
    /// partitions are let go (`cluster_loop`), this process's lease is revoked (it may hold
    /// the controller key) and it never registers again.
    fn replaced_by_another(&self, store: &EtcdStore) {
        *self.write_deadline.lock() = Instant::now();
        self.lease_lost.store(true, Ordering::Release);
        if !self.replaced.swap(true, Ordering::AcqRel) {
            tracing::error!(
                "another process registered with this node.id: this one writes nothing more, lets go of its partitions and does not register again (stop it)"
            );
            if let Err(e) = store.deregister() {
                tracing::warn!("revoking this process's lease failed (it expires instead): {e}");
            }
        }
    }

    /// [`Cluster::register`] after a lost registration, unless another process took the
    /// node id meanwhile (`EtcdStore::register_again`): false then.
    fn register_again(
        &self,
        broker: &Broker,
        store: &EtcdStore,
    ) -> Result<bool, sluice_meta::MetaError> {
        let sent = Instant::now();
        if store
            .register_again(self.lease(), &Self::info(broker))?
            .is_none()
        {
            return Ok(false);
        }
        *self.write_deadline.lock() = sent + self.lease() * 2 / 3;
        self.lease_lost.store(false, Ordering::Release);
        tracing::info!(
            node_id = broker.node_id,
            lease_s = self.lease().as_secs(),
            "registered in the cluster again"
        );
        Ok(true)
    }

    fn register(&self, broker: &Broker, store: &EtcdStore) -> Result<(), sluice_meta::MetaError> {
        let sent = Instant::now();
        store.register(self.lease(), &Self::info(broker))?;
        *self.write_deadline.lock() = sent + self.lease() * 2 / 3;
        self.lease_lost.store(false, Ordering::Release);
        tracing::info!(
            node_id = broker.node_id,
            lease_s = self.lease().as_secs(),
            "registered in the cluster"
        );
        Ok(())
    }

    /// Register, take the partitions assigned to this broker, and start the threads.
    pub(crate) fn start(broker: &Arc<Broker>) -> Result<(), crate::BrokerError> {
        let (Some(cluster), Some(store)) = (broker.cluster.as_ref(), broker.meta.etcd()) else {
            return Ok(());
        };
        cluster.register(broker, store)?;
        store.refresh()?;
        cluster.reconcile(broker);
        let weak = Arc::downgrade(broker);
        let lease = spawn("sluice-lease", {
            let weak = weak.clone();
            move || lease_loop(weak)
        })?;
        let main = spawn("sluice-cluster", {
            let weak = weak.clone();
            move || cluster_loop(weak)
        })?;
        let (watch, cancel) = (store.watcher(), cluster.watch_cancel.clone());
        let (wakeup, retry) = (
            cluster.wakeup.clone(),
            Duration::from_millis(cluster.settings.poll_ms),
        );
        let watch = spawn("sluice-watch", move || {
            watch_loop(&watch, &cancel, &wakeup, retry)
        })?;
        cluster.threads.lock().extend([lease, main, watch]);
        if cluster.settings.balance_enable && cluster.settings.balance_bytes.enable {
            let weak = weak.clone();
            let load = spawn("sluice-load", move || {
                every(
                    &weak,
                    false,
                    |cluster| Duration::from_millis(cluster.settings.balance_bytes.window_ms),
                    |broker, cluster, store| {
                        cluster.report_load(broker, store);
                        cluster.bytes_round(store);
                    },
                )
            })?;
            cluster.threads.lock().push(load);
        }
        if cluster.settings.death_probe_enable {
            let probe = spawn("sluice-probe", move || {
                every(
                    &weak,
                    false,
                    |cluster| Duration::from_millis(cluster.settings.poll_ms),
                    |broker, cluster, store| cluster.probe_peers(broker, store),
                )
            })?;
            cluster.threads.lock().push(probe);
        }
        Ok(())
    }

    /// Measure this broker's bytes in over the last window and publish them for the
    /// controller (`sluice.cluster.balance.bytes.*`, `load.rs`).
    fn report_load(&self, broker: &Broker, store: &EtcdStore) {
        if self.stopping.load(Ordering::Acquire) {
            return;
        }
        let tps: Vec<TopicPartition> = self.held.read().keys().cloned().collect();
        let logs = tps
            .into_iter()
            .filter_map(|tp| broker.logs.get(&tp).map(|log| (tp, log)))
            .collect();
        let Some(load) = self.load_meter.lock().read(logs, Instant::now()) else {
            return;
        };
        if let Err(e) = store.publish_load(&load) {
            tracing::debug!("publishing this broker's bytes in failed: {e}");
        }
    }

    /// On the load thread, after this broker's own load is published: the controller's
    /// bytes-in round, from the view of its last round that planned nothing. That view may
    /// be a window old: a load measured over other partitions than it gives a broker is not
    /// used, and the moves are compare-and-swap on the owner records it read.
    fn bytes_round(&self, store: &EtcdStore) {
        if self.stopping.load(Ordering::Acquire) {
            return;
        }
        let Some((view, rev, settled)) = self.counted.lock().clone() else {
            return;
        };
        self.balance_bytes(store, &view, rev, &settled);
    }

    /// The controller's bytes-in round, once its interval has passed and the partition
    /// counts are settled (`plan` found nothing to do): busy partitions move from the broker
    /// taking most bytes in (`sluice_meta::load::plan_load_moves`).
    fn balance_bytes(
        &self,
        store: &EtcdStore,
        view: &ClusterView,
        rev: i64,
        settled: &BTreeSet<i32>,
    ) {
        let cfg = &self.settings.balance_bytes;
        if !self.settings.balance_enable || !cfg.enable {
            return;
        }
        let now = Instant::now();
        {
            let mut due = self.bytes_due.lock();
            let interval = Duration::from_millis(cfg.interval_ms);
            match *due {
                Some(at) if at <= now => *due = Some(now + interval),
                Some(_) => return,
                None => {
                    *due = Some(now + interval);
                    return;
                }
            }
        }
        let loads = match store.loads() {
            Ok(loads) => loads,
            Err(e) => {
                tracing::warn!("reading the brokers' bytes in failed: {e}");
                return;
            }
        };
        let plan = sluice_meta::load::plan_load_moves(
            view,
            &loads,
            settled,
            sluice_meta::load::LoadBalance {
                threshold: cfg.threshold,
                percent: cfg.percent,
                moves_max: BALANCE_MOVES_MAX,
            },
        );
        let moves = with_records(view, plan);
        if moves.is_empty() {
            return;
        }
        match store.assign(rev, &moves) {
            Ok(true) => {
                for (t, p, seen, node) in &moves {
                    let rate = |b: i32| loads.get(&b).map_or(0, |l| l.bytes_in);
                    tracing::info!(
                        topic = %t, partition = p, from = seen.owner.node, to = node,
                        from_bytes_in = rate(seen.owner.node), to_bytes_in = rate(*node),
                        "moved partition for bytes in"
                    );
                }
            }
            Ok(false) => tracing::debug!("a move for bytes in raced with another change"),
            Err(e) => tracing::warn!("moving partitions for bytes in failed: {e}"),
        }
    }

    /// The death probe's round (`sluice.cluster.death.probe.enable`). The controller probes
    /// every other broker's listener, the others the controller's (with no controller, every
    /// broker probes all). A broker whose listener accepted a connection under its current
    /// registration and then refuses [`DEATH_REFUSALS`] times in a row has no process: a live
    /// process keeps its listening socket open until its controlled shutdown, which leaves
    /// the cluster before it closes the listener (`Broker::leave_cluster`). Its lease is
    /// revoked, so that its partitions (and the controller key, if it held it) move now
    /// rather than when the lease expires; a process that is gone writes nothing more, so the
    /// write deadline's wait buys nothing. A host that is down or cut off does not refuse
    /// (no answer): its lease expires as before.
    fn probe_peers(&self, broker: &Broker, store: &EtcdStore) {
        if self.stopping.load(Ordering::Acquire)
            || self.lease_lost.load(Ordering::Acquire)
            || Instant::now() >= *self.write_deadline.lock()
        {
            return;
        }
        // The server's client probes (only the server touches sockets); none before it runs.
        let Some(peers) = broker.peers.get() else {
            return;
        };
        let view = store.view();
        let me = broker.node_id;
        let controller = view.controller.map(|(id, _)| id);
        let mut probed = self.probed.lock();
        probed.retain(|n, _| view.brokers.contains_key(n));
        for b in view.brokers.values() {
            let probes_it = b.node_id != me
                && match controller {
                    Some(c) if c == me => true,
                    Some(c) => c == b.node_id,
                    None => true,
                };
            if !probes_it {
                continue;
            }
            let p = probed.entry(b.node_id).or_default();
            if p.lease != b.lease {
                *p = Probed {
                    lease: b.lease,
                    ..Probed::default()
                };
            }
            match peers.probe(&b.host, b.port, PROBE_CONNECT_TIMEOUT) {
                Probe::Accepted => {
                    p.accepted = true;
                    p.refusals = 0;
                }
                Probe::Refused if p.accepted => p.refusals += 1,
                _ => p.refusals = 0,
            }
            if p.refusals < DEATH_REFUSALS {
                continue;
            }
            // A view older than the broker's departure: it left (controlled shutdown revokes
            // its lease before its listener closes), or its lease expired. Nothing to do.
            if matches!(store.lease_silence(b.lease), Ok(None)) {
                p.accepted = false;
                p.refusals = 0;
                continue;
            }
            tracing::error!(
                node_id = b.node_id,
                host = %b.host,
                port = b.port,
                "broker {}'s listener refuses connections after it accepted them: its process is gone; revoking its lease so that its partitions move now",
                b.node_id
            );
            match store.revoke_lease_of(b.node_id, b.lease) {
                Ok(()) => {
                    p.accepted = false;
                    p.refusals = 0;
                    self.wakeup.wake();
                }
                Err(e) => tracing::warn!(node_id = b.node_id, "revoking the lease failed: {e}"),
            }
        }
    }

    /// Controlled shutdown: stop appending, fsync and release every partition, then leave the
    /// cluster (the controller hands the partitions to the other brokers at once). Runs once.
    pub(crate) fn shutdown(&self, broker: &Broker) {
        if self.left.swap(true, Ordering::AcqRel) {
            return;
        }
        self.stopping.store(true, Ordering::Release);
        self.watch_cancel.cancel();
        self.wakeup.wake();
        let _one = self.reconcile_lock.lock();
        let handed = broker
            .meta
            .etcd()
            .map_or(0, |store| self.hand_over_all(broker, store));
        let released = self.release_all(broker);
        if let Some(store) = broker.meta.etcd() {
            match store.deregister() {
                Ok(()) => tracing::info!(
                    handed_over = handed,
                    released,
                    "left the cluster; partitions handed over"
                ),
                Err(e) => tracing::warn!("leaving the cluster failed (the lease will expire): {e}"),
            }
        }
        drop(_one);
        for t in self.threads.lock().drain(..) {
            let _ = t.join();
        }
    }

    /// Controlled shutdown: hand every partition over to the live broker owning fewest of its
    /// topic (then fewest overall), so no controller round is waited for. Returns how many.
    fn hand_over_all(&self, broker: &Broker, store: &EtcdStore) -> usize {
        let view = match store.refresh() {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!("reading the cluster's records for the hand-over failed: {e}");
                return 0;
            }
        };
        let me = broker.node_id;
        let others: Vec<i32> = view.brokers.keys().copied().filter(|b| *b != me).collect();
        if others.is_empty() {
            return 0;
        }
        let mut total: BTreeMap<i32, usize> = others.iter().map(|b| (*b, 0)).collect();
        let mut per_topic: HashMap<(&str, i32), usize> = HashMap::new();
        for ((topic, _), rec) in &view.owners {
            let at = rec.owner.to.unwrap_or(rec.owner.node);
            if let Some(n) = total.get_mut(&at) {
                *n += 1;
                *per_topic.entry((topic.as_str(), at)).or_default() += 1;
            }
        }
        let mut held: Vec<(TopicPartition, OwnerRecord)> = self
            .held
            .read()
            .iter()
            .map(|(tp, h)| (tp.clone(), h.record))
            .collect();
        held.sort_by(|a, b| (&a.0.topic, a.0.partition).cmp(&(&b.0.topic, b.0.partition)));
        let mut handed = 0;
        for (tp, mine) in held {
            // The newest record naming this broker (a planned move may have changed it).
            let record = match view.owners.get(&(tp.topic.clone(), tp.partition)) {
                Some(r) if r.owner.node == me && r.mod_revision > mine.mod_revision => *r,
                _ => mine,
            };
            // Among the brokers with direct access to its volume when one is alive.
            let direct: Vec<i32> = sluice_meta::cluster::candidates_for(&view, record.owner.volume)
                .into_iter()
                .filter(|b| *b != me)
                .collect();
            let pool = if direct.is_empty() { &others } else { &direct };
            let to = record
                .owner
                .to
                .filter(|t| total.contains_key(t))
                .or_else(|| {
                    pool.iter().copied().min_by_key(|b| {
                        let of_topic = per_topic.get(&(tp.topic.as_str(), *b)).copied();
                        (of_topic.unwrap_or(0), total[b], *b)
                    })
                });
            let Some(to) = to else { break };
            if let Some(n) = total.get_mut(&to) {
                *n += 1;
            }
            if self.hand_over(broker, store, &tp, record, to) {
                handed += 1;
            }
        }
        handed
    }

    /// Hand `tp` over to broker `to` (a planned move, or a controlled shutdown): stop
    /// appending, seal the active segment and make the log durable, then name `to` the owner
    /// in etcd with the log's end as the recovery point, if the record is still `record`. The
    /// new owner then recovers nothing, whatever the partition's size. True if handed over.
    fn hand_over(
        &self,
        broker: &Broker,
        store: &EtcdStore,
        tp: &TopicPartition,
        record: OwnerRecord,
        to: i32,
    ) -> bool {
        let started = Instant::now();
        // Appends stop here; acknowledgements of rounds under way fail their confirmation
        // (the record changed when the move was asked for) and are retried at the new owner.
        // The partition stays held until it is sealed: the seal passes the write gate.
        self.handing_over.write().insert(tp.clone());
        if tp.topic == OFFSETS_TOPIC {
            broker.groups.unload(tp.partition);
            broker.unload_share_groups(tp.partition);
        }
        if tp.topic == TXN_TOPIC {
            broker.txns.unload(tp.partition);
        }
        if tp.topic == SHARE_STATE_TOPIC {
            broker.shares.unload_state(tp.partition);
        }
        let log = broker.logs.get(tp);
        let recovery_point = match broker.logs.hand_over_log(tp, now_ms()) {
            Ok(Some(end)) => end,
            Ok(None) => record.owner.recovery_point,
            Err(e) => {
                tracing::warn!(?tp, "sealing the partition for its hand-over failed; the next owner recovers it: {e}");
                record.owner.recovery_point
            }
        };
        self.held.write().remove(tp);
        self.handing_over.write().remove(tp);
        if let Some(log) = &log {
            broker.fetch_waiters.wake(log);
        }
        match store.hand_over(&tp.topic, tp.partition, record, to, recovery_point) {
            Ok(true) => {
                broker.metrics.handed_over(1);
                tracing::info!(
                    ?tp,
                    to,
                    recovery_point,
                    millis = started.elapsed().as_millis() as u64,
                    "handed the partition over"
                );
                true
            }
            Ok(false) => {
                tracing::info!(
                    ?tp,
                    "the partition's record changed before the hand-over; released it"
                );
                false
            }
            Err(e) => {
                tracing::warn!(?tp, to, "handing the partition over failed (retried while the record names this broker): {e}");
                false
            }
        }
    }

    /// Load the group or transaction coordinator's partition of `log`, if it is one and is
    /// not loaded (the partition acquired again in place).
    fn load_coordinator(&self, broker: &Broker, tp: &TopicPartition, log: &Arc<Log>) {
        broker.load_coordinator_partition(tp, log, false);
    }

    /// A held log failed (a failed fsync, a write that could not be cut back): the next
    /// reconciliation lets it go and acquires the partition again (a new epoch, then the
    /// recovery from what storage holds, as at any acquisition).
    pub(crate) fn acquire_again(&self, tp: &TopicPartition, failure: &sluice_store::LogFailure) {
        self.visit_all.store(true, Ordering::Release);
        if self.failed_logs.lock().insert(tp.clone()) {
            tracing::warn!(?tp, %failure, "a failed log is let go and acquired again");
        }
        self.wakeup.wake();
    }

    /// Stop serving every partition (shutdown, or the lease was lost). Returns how many.
    fn release_all(&self, broker: &Broker) -> usize {
        let held: Vec<TopicPartition> = self.held.write().drain().map(|(tp, _)| tp).collect();
        self.visit_all.store(true, Ordering::Release);
        for tp in &held {
            self.release_files(broker, tp, false);
        }
        held.len()
    }

    fn release_files(&self, broker: &Broker, tp: &TopicPartition, deleted: bool) {
        if !deleted {
            broker.metrics.released(1);
        }
        if tp.topic == OFFSETS_TOPIC {
            broker.groups.unload(tp.partition);
            broker.unload_share_groups(tp.partition);
        }
        if tp.topic == TXN_TOPIC {
            broker.txns.unload(tp.partition);
        }
        if tp.topic == SHARE_STATE_TOPIC {
            broker.shares.unload_state(tp.partition);
        }
        let log = broker.logs.get(tp);
        let result = if deleted {
            broker.logs.delete_log(tp)
        } else {
            broker.logs.release_log(tp)
        };
        if let Err(e) = result {
            tracing::warn!(?tp, "releasing the partition: {e}");
        }
        if let Some(log) = log {
            // Fetches waiting on it answer now (with NOT_LEADER_OR_FOLLOWER).
            broker.fetch_waiters.wake(&log);
        }
    }

    /// Acquire the partition `tp` assigned to this broker: bump its epoch in etcd, open
    /// (recover) its files, start a new segment so that whatever a former owner may still
    /// append lies past the sealed end, and fsync what was recovered.
    #[allow(clippy::too_many_arguments)]
    fn acquire(
        &self,
        broker: &Broker,
        store: &EtcdStore,
        view: &ClusterView,
        topic: &sluice_meta::TopicMeta,
        partition: i32,
        seen: OwnerRecord,
        config: &sluice_config::TopicConfig,
    ) -> Acquired {
        let started = Instant::now();
        let record = match store.acquire(&topic.name, partition, seen) {
            Ok(Some(r)) => r,
            Ok(None) => return None,
            Err(e) => {
                tracing::warn!(topic = %topic.name, partition, "acquiring failed: {e}");
                return None;
            }
        };
        let tp = TopicPartition {
            topic: topic.name.clone(),
            partition,
        };
        if self.acquired_too_late(&tp) {
            return None;
        }
        let opened = self
            .open_acquired(broker, store, view, topic, &tp, record, config)
            .and_then(|log| {
                self.record_acquired(store, &log)?;
                Ok(log)
            });
        self.finish_acquiring(broker, &tp, record, opened, started)
    }

    /// [`Cluster::acquire`] for several partitions of one topic (a topic created, a broker's
    /// share taken over): the epochs are bumped [`sluice_meta::cluster::BATCH_RECORDS_MAX`]
    /// records per etcd transaction, the files opened by `threads` threads at once, and the
    /// new segments recorded in one transaction per batch. The same steps, in the same order,
    /// for each partition as one acquisition; a batch whose records changed meanwhile is
    /// acquired one by one.
    #[allow(clippy::too_many_arguments)]
    fn acquire_many(
        &self,
        broker: &Broker,
        store: &EtcdStore,
        view: &ClusterView,
        topic: &sluice_meta::TopicMeta,
        pending: &[(i32, OwnerRecord)],
        config: &sluice_config::TopicConfig,
        threads: usize,
    ) -> Vec<(i32, Acquired)> {
        let one_by_one = |chunk: &[(i32, OwnerRecord)]| -> Vec<_> {
            chunk
                .iter()
                .map(|(p, r)| (*p, self.acquire(broker, store, view, topic, *p, *r, config)))
                .collect()
        };
        if pending.len() == 1 {
            return one_by_one(pending);
        }
        let mut out = Vec::with_capacity(pending.len());
        for chunk in pending.chunks(sluice_meta::cluster::BATCH_RECORDS_MAX) {
            let started = Instant::now();
            let records = match store.acquire_many(&topic.name, chunk) {
                Ok(Some(records)) => records,
                Ok(None) => {
                    // A record changed since the view (or is not ours any more).
                    out.extend(one_by_one(chunk));
                    continue;
                }
                Err(e) => {
                    tracing::warn!(topic = %topic.name, partitions = chunk.len(), "acquiring failed: {e}");
                    out.extend(chunk.iter().map(|(p, _)| (*p, None)));
                    continue;
                }
            };
            let tps: Vec<TopicPartition> = chunk
                .iter()
                .map(|(p, _)| TopicPartition {
                    topic: topic.name.clone(),
                    partition: *p,
                })
                .collect();
            if tps.iter().any(|tp| self.acquired_too_late(tp)) {
                out.extend(chunk.iter().map(|(p, _)| (*p, None)));
                continue;
            }
            let jobs: Vec<(&TopicPartition, OwnerRecord)> =
                tps.iter().zip(records.iter().copied()).collect();
            let opened = crate::parallel_map(&jobs, threads, |(tp, record)| {
                self.open_acquired(broker, store, view, topic, tp, *record, config)
            });
            let recorded = self.record_acquired_many(store, &topic.name, &opened);
            for (((tp, record), opened), recorded) in jobs.into_iter().zip(opened).zip(recorded) {
                let opened = opened.and_then(|log| recorded.map(|()| log));
                let done = self.finish_acquiring(broker, tp, record, opened, started);
                out.push((tp.partition, done));
            }
        }
        out
    }

    /// Whether the etcd call that acquired `tp` outlasted the write deadline: recovering
    /// now could race the broker that takes the partition once this lease expires. The
    /// record stays; a later round acquires it again if it still names this broker.
    fn acquired_too_late(&self, tp: &TopicPartition) -> bool {
        let late = Instant::now() >= *self.write_deadline.lock();
        if late {
            tracing::warn!(
                ?tp,
                "acquired past the write deadline; not opening the partition"
            );
        }
        late
    }

    /// The files of `tp`, just acquired under `record`: held from here (putting a deleted
    /// topic's directory aside, the new segment and the flush pass the write gate under the
    /// epoch just acquired, the log is opened with it), opened (recovered), a new segment
    /// started and everything fsynced.
    #[allow(clippy::too_many_arguments)]
    fn open_acquired(
        &self,
        broker: &Broker,
        store: &EtcdStore,
        view: &ClusterView,
        topic: &sluice_meta::TopicMeta,
        tp: &TopicPartition,
        record: OwnerRecord,
        config: &sluice_config::TopicConfig,
    ) -> Result<Arc<Log>, String> {
        let partition = tp.partition;
        let open = || {
            match (record.owner.recovery_point, record.owner.segment) {
                (0, 0) => {
                    broker
                        .logs
                        .open_log(tp, topic.id, log_config(config), record.owner.epoch)
                }
                (rp, _) => broker.logs.open_log_recorded(
                    tp,
                    topic.id,
                    log_config(config),
                    record.owner.epoch,
                    sluice_store::Recorded {
                        recovery_point: rp,
                        newest_segment: record.owner.segment,
                        sealed: record.owner.sealed.map(|d| sluice_store::SealedDigest {
                            below: d.below,
                            count: d.count,
                            hash: d.hash,
                        }),
                        switch: record.owner.switch.map(|s| sluice_store::CleanerSwitch {
                            base: s.base,
                            id: s.id,
                        }),
                        snapshot: record.owner.snapshot.map(|s| sluice_store::SnapshotRef {
                            offset: s.offset,
                            crc: s.crc,
                            previous: (s.previous > 0).then_some(s.previous),
                        }),
                    },
                ),
            }
            .map_err(|e| e.to_string())
        };
        // Held from here: putting a deleted topic's directory aside, the new segment and the
        // flush pass the write gate under the epoch just acquired (the log is opened with it).
        self.held.write().insert(
            tp.clone(),
            Held {
                record,
                topic_id: topic.id,
            },
        );
        // A deleted topic of this name whose deletion still names a broker for this
        // partition: its directory may still be here, also without a `partition.metadata`
        // (imported from a Kafka before topic ids), which an open would take for this topic's
        // and stamp. It is put aside first, once nobody else may write it.
        let pending: Vec<uuid::Uuid> = view
            .deleted
            .iter()
            .filter(|(_, d)| {
                d.topic == tp.topic && d.owners.get(partition as usize).is_some_and(|n| *n >= 0)
            })
            .map(|(id, _)| *id)
            .collect();
        let mut opened = pending
            .iter()
            .try_for_each(|id| {
                self.retire_stray(broker, store, view, tp, topic.id, *id, record.owner.epoch)
            })
            .and_then(|()| open());
        if opened.is_err() {
            // The directory of a deleted topic of this name, left where it was (its owner was
            // away when it was deleted): put aside once nobody else may write it, then opened
            // anew.
            if let Some(stray) = broker.logs.stray_topic_id(tp, topic.id) {
                opened = self
                    .retire_stray(broker, store, view, tp, topic.id, stray, record.owner.epoch)
                    .and_then(|()| open());
            }
        }
        opened.and_then(|log| {
            log.roll(now_ms()).map_err(|e| e.to_string())?;
            log.flush().map_err(|e| e.to_string())?;
            Ok(log)
        })
    }

    /// Readers of a log just acquired see what was recovered, and from now on only what a
    /// confirmed flush round covered; the owner record names the new segment first (what
    /// was recovered may be a former owner's unacknowledged tail, which a later owner's
    /// stale listing must not lose once it was served). The segment is the one it rolled,
    /// even below the recorded one: recovery removed what lay past damage, and a record
    /// naming a segment no longer there would refuse every later takeover.
    fn record_acquired(&self, store: &EtcdStore, log: &Log) -> Result<(), String> {
        let mark = log.synced_mark();
        let rp = log.recovery_point_offset();
        match self.record_progress(store, log, rp, mark.base, true) {
            Ok(true) => log.recovery_point_recorded(rp),
            Ok(false) => {}
            Err(e) => {
                return Err(format!(
                    "recording the new segment in the owner record: {e}"
                ))
            }
        }
        log.publish(mark);
        Ok(())
    }

    /// [`Cluster::record_acquired`] for the logs of one topic opened by one batch, in one
    /// etcd transaction; one by one if it fails.
    fn record_acquired_many(
        &self,
        store: &EtcdStore,
        topic: &str,
        opened: &[Result<Arc<Log>, String>],
    ) -> Vec<Result<(), String>> {
        let logs: Vec<&Arc<Log>> = opened.iter().filter_map(|o| o.as_ref().ok()).collect();
        let marks: Vec<(sluice_store::SyncedMark, i64)> = logs
            .iter()
            .map(|log| (log.synced_mark(), log.recovery_point_offset()))
            .collect();
        let progress: Result<Vec<_>, _> = logs
            .iter()
            .zip(&marks)
            .map(|(log, (mark, rp))| self.progress_of(log, *rp, mark.base, true))
            .collect();
        let batched = progress.ok().and_then(|progress| {
            let writes: Vec<sluice_meta::cluster::Progress> =
                progress.iter().flatten().copied().collect();
            let _progress = self.progress.lock();
            match store.record_progress_many(topic, &writes, true) {
                Ok(Some(next)) => {
                    for (w, next) in writes.iter().zip(next) {
                        let tp = TopicPartition {
                            topic: topic.to_string(),
                            partition: w.partition,
                        };
                        self.took_progress(&tp, w.held, next);
                    }
                    Some(progress)
                }
                _ => None,
            }
        });
        let Some(progress) = batched else {
            return opened
                .iter()
                .map(|o| match o {
                    Ok(log) => self.record_acquired(store, log),
                    Err(e) => Err(e.clone()),
                })
                .collect();
        };
        let mut recorded = logs.iter().zip(marks).zip(progress);
        opened
            .iter()
            .map(|o| match o {
                Ok(_) => {
                    let ((log, (mark, rp)), written) = recorded.next().expect("one per log");
                    if written.is_some() {
                        log.recovery_point_recorded(rp);
                    }
                    log.publish(mark);
                    Ok(())
                }
                Err(e) => Err(e.clone()),
            })
            .collect()
    }

    /// The end of an acquisition of `tp` under `record`: served from now on, or let go of
    /// and tried again later (with a growing wait) when its files could not be opened.
    fn finish_acquiring(
        &self,
        broker: &Broker,
        tp: &TopicPartition,
        record: OwnerRecord,
        opened: Result<Arc<Log>, String>,
        started: Instant,
    ) -> Acquired {
        match opened {
            Ok(log) => {
                self.acquire_retry.lock().remove(tp);
                self.unconfirmed.write().remove(tp);
                broker.load_coordinator_partition(tp, &log, true);
                broker.metrics.acquired(started.elapsed());
                tracing::info!(
                    ?tp,
                    epoch = record.owner.epoch,
                    log_end = log.log_end_offset(),
                    millis = started.elapsed().as_millis() as u64,
                    "acquired partition"
                );
                Some((record, log))
            }
            Err(e) => {
                self.held.write().remove(tp);
                let mut retry = self.acquire_retry.lock();
                let first = Duration::from_millis(self.settings.poll_ms).max(ACQUIRE_RETRY_MIN);
                let wait = retry
                    .get(tp)
                    .map_or(first, |(_, w)| (*w * 2).min(ACQUIRE_RETRY_MAX));
                retry.insert(tp.clone(), (Instant::now() + wait, wait));
                drop(retry);
                tracing::error!(
                    ?tp,
                    retry_ms = wait.as_millis() as u64,
                    "opening an acquired partition failed; it stays offline until a later attempt succeeds: {e}"
                );
                let _ = broker.logs.release_log(tp);
                None
            }
        }
    }

    /// `tp`'s directory holds the files of `stray`, an earlier incarnation of the topic (one
    /// deleted: this broker just acquired the partition under `topic_id`, and topic ids are
    /// never used again). Put it aside (renamed to a `-delete` name, then removed) once no
    /// other broker may write it: a deletion leaves a record in etcd naming the broker each
    /// partition was assigned to then ([`sluice_meta::DeletedTopic`]), and until that broker
    /// has let go of it, or has left the cluster (its write deadline passed before its lease
    /// expired), the directory is its own. The topic is read again first (linearizably): a
    /// deletion of the incarnation this broker acquired, after the view, would leave a record
    /// naming this broker, which the next owner of the name waits for.
    #[allow(clippy::too_many_arguments)]
    fn retire_stray(
        &self,
        broker: &Broker,
        store: &EtcdStore,
        view: &ClusterView,
        tp: &TopicPartition,
        topic_id: uuid::Uuid,
        stray: uuid::Uuid,
        epoch: i32,
    ) -> Result<(), String> {
        let me = broker.node_id;
        for (id, d) in &view.deleted {
            let named = d.owners.get(tp.partition as usize).copied().unwrap_or(-1);
            if d.topic != tp.topic || named < 0 || named == me {
                continue;
            }
            if view.brokers.contains_key(&named) {
                return Err(format!(
                    "its directory holds the files of a deleted topic of this name ({stray}); broker {named} has not let go of partition {} of the deleted topic {id} yet",
                    tp.partition
                ));
            }
            // Gone from the cluster: its entry becomes this broker's, in etcd, before the
            // directory is touched (a compare that it is still not registered); back, it
            // reads the record again before it renames anything, and finds it is not named.
            match store.take_over_deleted(*id, d, &[named]) {
                Ok(true) => tracing::info!(?tp, deleted_topic = %id, from = named,
                    "took over a departed broker's partition of a deleted topic"),
                Ok(false) => {
                    return Err(format!(
                        "broker {named}'s entry of the deleted topic {id} changed; next round"
                    ))
                }
                Err(e) => return Err(format!("taking over the deleted topic's entry failed: {e}")),
            }
        }
        match store.topic_id(&tp.topic) {
            Ok(Some(id)) if id == topic_id => {}
            Ok(_) => return Err("the topic was deleted or created again meanwhile".into()),
            Err(e) => return Err(format!("reading the topic's id failed: {e}")),
        }
        broker
            .logs
            .retire_stray_dir(tp, stray, &|| self.may_write_files(tp, topic_id, epoch))
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    /// The partitions of deleted topics that this broker was assigned when they were deleted
    /// ([`sluice_meta::DeletedTopic`]): their directories, if they are still there and hold the
    /// deleted topic's files (a deletion past the write deadline left them, or the broker was
    /// away), are put aside while its write deadline has not passed; then it lets go of them
    /// in etcd, so the owner of a partition of that name created since may open it. The
    /// controller takes over the entries of brokers that have left the cluster
    /// (`EtcdStore::take_over_deleted`: their lease is gone, so their write deadline passed;
    /// back, they read the record again before touching a directory and find it no longer
    /// names them), so that neither the directories nor the records of a broker that never
    /// comes back stay forever.
    fn let_go_of_deleted(&self, broker: &Broker, store: &EtcdStore, view: &ClusterView) {
        let me = broker.node_id;
        let controller = view.controller.is_some_and(|(id, _)| id == me);
        for (id, d) in &view.deleted {
            if controller {
                let mut departed: Vec<i32> = d
                    .owners
                    .iter()
                    .copied()
                    .filter(|n| *n >= 0 && *n != me && !view.brokers.contains_key(n))
                    .collect();
                departed.sort_unstable();
                departed.dedup();
                if !departed.is_empty() {
                    match store.take_over_deleted(*id, d, &departed) {
                        Ok(true) => {
                            tracing::info!(topic = %d.topic, deleted_topic = %id, from = ?departed,
                            "took over departed brokers' partitions of a deleted topic")
                        }
                        Ok(false) => {
                            tracing::debug!(deleted_topic = %id, "the deleted topic's record changed; next round")
                        }
                        Err(e) => {
                            tracing::warn!(deleted_topic = %id, "taking over departed brokers' partitions of a deleted topic failed: {e}")
                        }
                    }
                    // The record as it is now, next round.
                    continue;
                }
            }
            if !d.owners.contains(&me) {
                continue;
            }
            // Read again before touching a directory: while this broker was away its entries
            // may have been taken over (`EtcdStore::take_over_deleted`), after the view.
            let d = match store.deleted_topic(*id) {
                Ok(Some(d)) if d.owners.contains(&me) => d,
                Ok(_) => continue,
                Err(e) => {
                    tracing::warn!(deleted_topic = %id, "reading a deleted topic's record failed: {e}");
                    continue;
                }
            };
            let mut failed = false;
            for (p, _) in d.owners.iter().enumerate().filter(|(_, n)| **n == me) {
                let tp = TopicPartition {
                    topic: d.topic.clone(),
                    partition: p as i32,
                };
                if let Err(e) = broker
                    .logs
                    .retire_stray_dir(&tp, *id, &|| self.may_write_names())
                {
                    tracing::warn!(?tp, deleted_topic = %id, "putting aside a deleted topic's directory failed; trying again next round: {e}");
                    failed = true;
                }
            }
            // Not while the deadline has passed: the directories are still this broker's to
            // put aside once it may write again. Nor while one could not be put aside: the
            // record is what makes the next round try again.
            if self.may_write_names().is_err() {
                return;
            }
            if failed {
                continue;
            }
            match store.let_go_of_deleted(*id, &d) {
                Ok(true) => {
                    tracing::info!(topic = %d.topic, deleted_topic = %id, "let go of the deleted topic's partitions")
                }
                Ok(false) => {
                    tracing::debug!(deleted_topic = %id, "the deleted topic's record changed; next round")
                }
                Err(e) => {
                    tracing::warn!(deleted_topic = %id, "letting go of the deleted topic's partitions failed: {e}")
                }
            }
        }
    }

    /// Whether this broker may write the directories a deletion record names it for now: its
    /// write deadline has not passed and it is not shutting down or re-registering.
    fn may_write_names(&self) -> Result<(), String> {
        if self.stopping.load(Ordering::Acquire) || self.lease_lost.load(Ordering::Acquire) {
            return Err("the broker is leaving the cluster or registering again".into());
        }
        if Instant::now() >= *self.write_deadline.lock() {
            return Err("the broker's etcd lease was not renewed in time".into());
        }
        Ok(())
    }

    /// Make what this broker serves match `view`: acquire what is assigned to it, release what
    /// is not, apply topic changes (configs, partitions, deletions) to the registry.
    ///
    /// The takeover path, in order: read the newest view under the reconciliation lock, take
    /// up the dynamic configs, decide whether this broker may hold partitions at all
    /// ([`Cluster::may_hold_partitions`]), reconcile each topic of the view
    /// ([`Cluster::reconcile_topic`]), forget the topics gone from it
    /// ([`Cluster::forget_deleted_topics`]), and put aside the directories of deleted topics
    /// this broker was named for, letting go of them in etcd ([`Cluster::let_go_of_deleted`]).
    pub(crate) fn reconcile(&self, broker: &Broker) {
        let Some(store) = broker.meta.etcd() else {
            return;
        };
        let _one = self.reconcile_lock.lock();
        // The newest view, read under the lock: a view read before another reconciliation
        // that saw a newer one must not undo it (see `EtcdStore::refresh`).
        let view = store.view();
        let view = view.as_ref();
        let effective = broker.take_up_dynamic_configs(&view.broker_configs);
        let usable = self.may_hold_partitions();
        // Without the shared volume nothing is acquired (an acquisition bumps the epoch in
        // etcd before it opens the files), also in a round that runs before the cluster
        // thread has seen the volume go (and made the broker leave, `volume_away`).
        let volume_missing = broker.log_dir_volume_missing("partitions are taken over");
        let round = Round {
            broker,
            store,
            view,
            effective: &effective,
            usable,
            volume_missing,
        };
        let inputs = RoundInputs {
            usable,
            volume_missing,
            brokers: view.brokers.clone(),
            broker_configs: view.broker_configs.clone(),
            deleted: view.deleted.clone(),
        };
        let mut passes = self.passes.lock();
        let visit_all = self.visit_all.swap(false, Ordering::AcqRel)
            || passes.inputs.as_ref() != Some(&inputs)
            || passes
                .all_at
                .is_none_or(|at| at.elapsed() >= VISIT_ALL_EVERY);
        if visit_all {
            passes.steady.clear();
            passes.inputs = Some(inputs);
            passes.all_at = Some(Instant::now());
        }
        // Topics with a partition whose log failed, or whose acquisition failed, are never
        // steady; they are visited until they are.
        let unsettled: HashSet<String> = (self.failed_logs.lock().iter())
            .chain(self.acquire_retry.lock().keys())
            .map(|tp| tp.topic.clone())
            .collect();
        for topic in view.topics.values() {
            let stamp = (
                topic.id,
                view.revisions.get(&topic.name).copied().unwrap_or(0),
            );
            if passes.steady.get(&topic.name) == Some(&stamp)
                && !unsettled.contains(&topic.name)
                && broker.registry.get(&topic.name).is_some()
            {
                continue;
            }
            if self.reconcile_topic(&round, topic) {
                passes.steady.insert(topic.name.clone(), stamp);
            } else {
                passes.steady.remove(&topic.name);
            }
        }
        passes
            .steady
            .retain(|name, _| view.topics.contains_key(name));
        drop(passes);
        self.forget_deleted_topics(broker, view);
        if usable {
            self.let_go_of_deleted(broker, store, view);
        }
    }

    /// Whether this broker may hold partitions in this reconciliation: it is not stopping,
    /// its lease was not lost, its volume is there, and its write deadline has not passed.
    ///
    /// Past the write deadline nothing is acquired (an acquisition recovers, so writes, the
    /// partition's files) and what is held is let go: the lease may expire any moment
    /// (docs/cluster.md, Fencing, point 3).
    fn may_hold_partitions(&self) -> bool {
        !self.stopping.load(Ordering::Acquire)
            && !self.lease_lost.load(Ordering::Acquire)
            && !self.volume_away.load(Ordering::Acquire)
            && Instant::now() < *self.write_deadline.lock()
    }

    /// Reconcile one topic of the view: let go of what this broker held of a deleted
    /// incarnation of its name, decide each partition ([`Cluster::reconcile_partition`]),
    /// acquire the partitions assigned here together ([`Cluster::acquire_many`]), and put the
    /// topic's new state in the registry. Returns whether the topic is steady: every
    /// partition kept as it was, or neither held nor assigned here (a later reconciliation
    /// may skip it while its records and the round's inputs stay the same).
    ///
    /// Keeps: a topic of this name deleted and created again (the view shows both) is never
    /// served from what this broker held of the deleted one (docs/cluster.md, Fencing,
    /// point 4).
    fn reconcile_topic(&self, round: &Round<'_>, topic: &sluice_meta::TopicMeta) -> bool {
        let broker = round.broker;
        // A topic of this name deleted and created again (this view shows both): what
        // this broker held of the deleted one is let go of first, never served as the
        // new topic's.
        let existing = broker.registry.get(&topic.name);
        let replaced = existing.as_ref().is_some_and(|s| s.meta.id != topic.id);
        let existing = existing.filter(|_| !replaced);
        if replaced {
            // Partitions of the deleted topic past the new one's count are let go of
            // here: the loop below covers only the new topic's partitions.
            for tp in self.held_beyond(&topic.name, topic.partitions()) {
                if self.held.write().remove(&tp).is_some() {
                    self.release_files(broker, &tp, false);
                }
            }
        }
        let mut pass = TopicPass {
            topic,
            existing,
            replaced,
            config: sluice_config::topic_config(round.effective, &topic.configs),
            meta: topic.clone(),
            to_acquire: Vec::new(),
            steady: !replaced,
        };
        let mut logs: Vec<Option<Arc<Log>>> = Vec::with_capacity(topic.epochs.len());
        for p in 0..topic.partitions() {
            logs.push(self.reconcile_partition(round, &mut pass, p));
        }
        let threads = round.effective.recovery_threads_per_data_dir.max(1);
        let acquired = self.acquire_many(
            broker,
            round.store,
            round.view,
            topic,
            &pass.to_acquire,
            &pass.config,
            threads,
        );
        for (p, done) in acquired {
            if let Some((rec, log)) = done {
                pass.meta.epochs[p as usize] = rec.owner.epoch;
                logs[p as usize] = Some(log);
            }
        }
        broker.registry.insert(Arc::new(TopicState {
            meta: pass.meta,
            config: pass.config,
            logs,
        }));
        pass.steady && pass.to_acquire.is_empty()
    }

    /// The partitions of topic `name` this broker holds at or past partition `count`: those
    /// of a deleted incarnation of the name beyond the new incarnation's partitions.
    fn held_beyond(&self, name: &str, count: i32) -> Vec<TopicPartition> {
        self.held
            .read()
            .keys()
            .filter(|tp| tp.topic == name && tp.partition >= count)
            .cloned()
            .collect()
    }

    /// Reconcile partition `p` of the topic `pass` builds: let go of a failed or replaced
    /// log, read what this broker holds, decide from it and the view's owner record
    /// ([`decide_partition`]), and do it. Returns the log served for the partition now (None:
    /// not served, or acquired with the topic's others afterwards, `pass.to_acquire`).
    fn reconcile_partition(
        &self,
        round: &Round<'_>,
        pass: &mut TopicPass<'_>,
        p: i32,
    ) -> Option<Arc<Log>> {
        let (broker, me) = (round.broker, round.broker.node_id);
        let tp = TopicPartition {
            topic: pass.topic.name.clone(),
            partition: p,
        };
        let record = round
            .view
            .owners
            .get(&(pass.topic.name.clone(), p))
            .copied();
        self.let_go_of_failed_or_replaced(broker, &tp, pass.replaced);
        let held = self.held_record(&tp, record, me);
        let mine = round.usable && record.is_some_and(|r| r.owner.node == me);
        if !mine {
            self.forget_acquire_retry(&tp);
        }
        // A planned move to a live broker: hand the partition over (files or not).
        let moving = record
            .and_then(|r| r.owner.to)
            .filter(|t| *t != me && round.view.brokers.contains_key(t));
        let step = decide_partition(held, record, mine, round.usable, moving, || {
            round.volume_missing || self.acquire_backing_off(&tp)
        });
        pass.steady &= step.is_steady();
        match step {
            PartitionStep::HandOver { record, to } => {
                self.hand_over(broker, round.store, &tp, record, to);
                None
            }
            PartitionStep::KeepNewerHeld(h) => {
                let log = Self::served_log(broker, pass, &tp);
                pass.meta.epochs[p as usize] = h.owner.epoch;
                if let Some(owner) = pass.meta.owners.get_mut(p as usize) {
                    *owner = h.owner.node;
                }
                log
            }
            PartitionStep::Keep => {
                let log = Self::served_log(broker, pass, &tp);
                pass.steady &= log.is_some();
                log
            }
            PartitionStep::AcquireInPlace(r) => self.acquire_in_place(round, pass, &tp, r),
            PartitionStep::NotYet | PartitionStep::Nothing => None,
            PartitionStep::Acquire {
                record,
                release_held,
            } => {
                if release_held {
                    self.held.write().remove(&tp);
                    self.release_files(broker, &tp, false);
                }
                // Acquired with the topic's others (`reconcile_topic`).
                pass.to_acquire.push((p, record));
                None
            }
            PartitionStep::LetGo { new_owner } => {
                self.let_go(broker, &tp, new_owner);
                None
            }
        }
    }

    /// Let go of `tp` before deciding anything about it when its log failed
    /// ([`Cluster::acquire_again`]: it is acquired again under a new epoch, never re-opened in
    /// place) or when it belongs to a deleted incarnation of the topic's name (`replaced`).
    fn let_go_of_failed_or_replaced(&self, broker: &Broker, tp: &TopicPartition, replaced: bool) {
        if self.failed_logs.lock().remove(tp) && self.held.write().remove(tp).is_some() {
            // A failed log (`acquire_again`): let go, then acquired again below.
            self.release_files(broker, tp, false);
        }
        if replaced && self.held.write().remove(tp).is_some() {
            self.release_files(broker, tp, false);
        }
    }

    /// The owner record this broker holds `tp` under, read after any progress write of its
    /// own that `record` (the view's) may show: a newer record naming this broker at its
    /// epoch is perhaps that write, whose answer is being taken in (`progress`); once it is,
    /// the record is what this broker holds, and the partition is not acquired again.
    fn held_record(
        &self,
        tp: &TopicPartition,
        record: Option<OwnerRecord>,
        me: i32,
    ) -> Option<OwnerRecord> {
        let mut held = self.held.read().get(tp).map(|h| h.record);
        if let (Some(h), Some(r)) = (held, record) {
            if r.owner.node == me
                && r.owner.epoch == h.owner.epoch
                && r.mod_revision > h.mod_revision
            {
                // Perhaps this broker's own progress write, whose answer is being
                // taken in: once it is, the record is what this broker holds, and
                // is not acquired again (which would fail every confirmation in
                // flight: the benchmark's 1 MiB segments, a record write per roll,
                // re-acquired one partition hundreds of times).
                let _progress = self.progress.lock();
                held = self.held.read().get(tp).map(|h| h.record);
            }
        }
        held
    }

    /// Forget the backoff of a failed acquisition of `tp`: it is not this broker's to acquire
    /// now.
    fn forget_acquire_retry(&self, tp: &TopicPartition) {
        let mut retry = self.acquire_retry.lock();
        if !retry.is_empty() {
            retry.remove(tp);
        }
    }

    /// Whether a failed acquisition of `tp` is backing off: its files could not be opened a
    /// moment ago, and the next try is not due yet.
    fn acquire_backing_off(&self, tp: &TopicPartition) -> bool {
        self.acquire_retry
            .lock()
            .get(tp)
            .is_some_and(|(at, _)| Instant::now() < *at)
    }

    /// The log of `tp` this broker keeps serving (the registry's, else the log manager's),
    /// configured with the topic's current config.
    fn served_log(broker: &Broker, pass: &TopicPass<'_>, tp: &TopicPartition) -> Option<Arc<Log>> {
        let log = pass
            .existing
            .as_ref()
            .and_then(|s| s.log(tp.partition).cloned());
        let log = log.or_else(|| broker.logs.get(tp));
        if let Some(log) = &log {
            broker.configure_log(log, log_config(&pass.config));
        }
        log
    }

    /// Acquire `tp` again in place: its record changed but names this broker at the epoch it
    /// holds, so no other broker acquired it meanwhile (every acquisition bumps the epoch)
    /// and the files are as this broker left them. The new record is one confirmations can
    /// compare against ([`Cluster::confirm`]). Failing that, the partition is let go.
    ///
    /// Keeps: the log's leader epoch and `held` change together, under the lock the write
    /// gate reads `held` with ([`Gate`]).
    fn acquire_in_place(
        &self,
        round: &Round<'_>,
        pass: &mut TopicPass<'_>,
        tp: &TopicPartition,
        r: OwnerRecord,
    ) -> Option<Arc<Log>> {
        let p = tp.partition;
        let log = pass.existing.as_ref().and_then(|s| s.log(p).cloned());
        match (round.store.acquire(&pass.topic.name, p, r), log) {
            (Ok(Some(rec)), Some(log)) => {
                {
                    // Both under the lock the write gate reads `held` with.
                    let mut held = self.held.write();
                    log.set_leader_epoch(rec.owner.epoch);
                    held.insert(
                        tp.clone(),
                        Held {
                            record: rec,
                            topic_id: pass.topic.id,
                        },
                    );
                }
                // A coordinator that unloaded while the epochs differed (the
                // write gate refused meanwhile) loads again.
                self.load_coordinator(round.broker, tp, &log);
                pass.meta.epochs[p as usize] = rec.owner.epoch;
                Some(log)
            }
            (outcome, _) => {
                if let Err(e) = outcome {
                    tracing::warn!(?tp, "acquiring again failed: {e}");
                }
                self.held.write().remove(tp);
                self.release_files(round.broker, tp, false);
                None
            }
        }
    }

    /// Let go of `tp`: assigned elsewhere (to `new_owner`, -1: no record), or this broker
    /// cannot serve it now (leaving, a lost lease). It stops appending at once (`held` first:
    /// the write gate refuses from then on), then releases the files, writing nothing else
    /// (docs/cluster.md, Ownership).
    fn let_go(&self, broker: &Broker, tp: &TopicPartition, new_owner: i32) {
        self.held.write().remove(tp);
        if new_owner == broker.node_id {
            tracing::info!(
                ?tp,
                "letting go of a partition this broker cannot serve now"
            );
        } else {
            tracing::info!(
                ?tp,
                new_owner,
                "partition moved to another broker; releasing it"
            );
        }
        self.release_files(broker, tp, false);
    }

    /// Forget the topics gone from `view`: deleted. Their owners delete the files, through the
    /// write gate: the partition stays held until its directory is renamed away, so a broker
    /// past its write deadline leaves it (for `let_go_of_deleted` once it may write again, or
    /// for the next owner of a partition of that name: docs/cluster.md, Fencing, point 4).
    fn forget_deleted_topics(&self, broker: &Broker, view: &ClusterView) {
        for state in broker.registry.all() {
            if view.topics.contains_key(&state.meta.name) {
                continue;
            }
            broker.registry.remove(&state.meta.name);
            // Not on a replacement (deleted and created again between two of this broker's
            // views): a commit to the new topic may be among the offsets by then.
            broker.forget_offsets_of(&state.meta.name);
            for p in 0..state.meta.partitions() {
                let tp = TopicPartition {
                    topic: state.meta.name.clone(),
                    partition: p,
                };
                if self.held.read().contains_key(&tp) {
                    self.release_files(broker, &tp, true);
                    self.held.write().remove(&tp);
                }
            }
            tracing::info!(topic = %state.meta.name, "topic deleted");
        }
    }

    /// The controller's round: take the controller key if nobody holds it, and, holding it,
    /// assign partitions without a live owner and balance.
    fn control(&self, broker: &Broker, store: &EtcdStore, view: &Arc<ClusterView>) {
        if self.stopping.load(Ordering::Acquire)
            || self.lease_lost.load(Ordering::Acquire)
            || self.volume_away.load(Ordering::Acquire)
        {
            return;
        }
        let rev = match view.controller {
            Some((id, rev)) if id == broker.node_id => rev,
            Some(_) => {
                self.settling.lock().reset();
                *self.bytes_due.lock() = None;
                *self.counted.lock() = None;
                return;
            }
            None => match store.campaign() {
                Ok(Some(rev)) => {
                    tracing::info!(node_id = broker.node_id, "became the controller");
                    rev
                }
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!("campaigning for controller failed: {e}");
                    return;
                }
            },
        };
        // The brokers registered long enough for partitions to move back to them for
        // locality (as Kafka delays its preferred leader election).
        let settled = self.settling.lock().settled(
            view.brokers.iter().map(|(n, b)| (*n, b.lease)),
            Duration::from_millis(self.settings.locality_delay_ms),
            Instant::now(),
        );
        // The plan is a function of the view and the settled brokers alone: the same as at
        // the last plan that was empty (no record changed, no broker came, went or settled)
        // plans nothing again.
        let mut planned = self.planned_empty.lock();
        let key = (rev, view.revision, settled);
        if planned.as_ref() == Some(&key) {
            *self.counted.lock() = Some((view.clone(), rev, key.2));
            return;
        }
        let plan = sluice_meta::cluster::plan_assignments(
            view,
            self.settings.balance_enable,
            BALANCE_MOVES_MAX,
            &key.2,
        );
        if plan.is_empty() {
            *planned = Some(key.clone());
            *self.counted.lock() = Some((view.clone(), rev, key.2));
            return;
        }
        drop(planned);
        *self.counted.lock() = None;
        let moves = with_records(view, plan);
        for chunk in moves.chunks(100) {
            match store.assign(rev, chunk) {
                Ok(true) => {
                    for (t, p, seen, node) in chunk {
                        tracing::info!(
                            topic = %t, partition = p, from = seen.owner.node, to = node,
                            "assigned partition"
                        );
                    }
                }
                Ok(false) => {
                    tracing::debug!("assignment raced with another change; next round");
                    return;
                }
                Err(e) => {
                    tracing::warn!("assigning partitions failed: {e}");
                    return;
                }
            }
        }
    }
}

/// A plan's moves with the owner record each was planned from (what `EtcdStore::assign`
/// compares).
fn with_records(
    view: &ClusterView,
    plan: Vec<(String, i32, i32)>,
) -> Vec<(String, i32, OwnerRecord, i32)> {
    plan.into_iter()
        .filter_map(|(t, p, node)| {
            let seen = *view.owners.get(&(t.clone(), p))?;
            Some((t, p, seen, node))
        })
        .collect()
}

/// Start one of the cluster's threads.
fn spawn(
    name: &str,
    f: impl FnOnce() + Send + 'static,
) -> Result<std::thread::JoinHandle<()>, crate::BrokerError> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(f)
        .map_err(|e| crate::BrokerError::Startup(format!("cannot start a thread: {e}")))
}

/// What an acquisition gives: the record it wrote and the log opened, or None.
type Acquired = Option<(OwnerRecord, Arc<Log>)>;

/// Run `round` every `period` while the broker lives and is not shutting down. The thread
/// holds the broker only during a round.
/// With `wakeable`, a wake-up of the cluster's [`Wakeup`] starts the next round at once.
fn every(
    weak: &Weak<Broker>,
    wakeable: bool,
    period: impl Fn(&Cluster) -> Duration,
    round: impl Fn(&Broker, &Cluster, &EtcdStore),
) {
    loop {
        let Some(broker) = weak.upgrade() else { return };
        let (Some(cluster), Some(store)) = (broker.cluster.as_ref(), broker.meta.etcd()) else {
            return;
        };
        if cluster.stopping.load(Ordering::Acquire) {
            return;
        }
        let started = Instant::now();
        let period = period(cluster);
        round(&broker, cluster, store);
        let wakeup = wakeable.then(|| cluster.wakeup.clone());
        let cancel = cluster.watch_cancel.clone();
        drop(broker);
        let until = started + period;
        match wakeup {
            Some(w) => w.wait(until.saturating_duration_since(Instant::now())),
            // In slices, so that a controlled shutdown (which cancels the watch, then joins
            // these threads) does not wait out a long period (the bytes-in window is a
            // minute).
            None => loop {
                let rest = until.saturating_duration_since(Instant::now());
                if rest.is_zero() || cancel.cancelled() {
                    break;
                }
                std::thread::sleep(rest.min(SLEEP_SLICE));
            },
        }
    }
}

/// The longest sleep of a cluster thread between looks at whether the broker is stopping.
const SLEEP_SLICE: Duration = Duration::from_millis(100);

fn lease_loop(weak: Weak<Broker>) {
    every(
        &weak,
        false,
        |cluster| cluster.lease() / 4,
        |_, cluster, store| {
            let sent = Instant::now();
            let renewed = store.keep_alive();
            match renewed {
                // A renewal that answers after the deadline does not open the gate again:
                // the coordinators have unloaded and nothing was written meanwhile, so the
                // broker lets go of its partitions and acquires them again (a new epoch).
                Ok(Renewal::Alive) if Instant::now() >= *cluster.write_deadline.lock() => {
                    cluster.fence_if_past_deadline();
                }
                // Left the cluster (a missing volume) or lost the lease meanwhile: a renewal
                // sent before does not open the gate again.
                Ok(Renewal::Alive)
                    if cluster.volume_away.load(Ordering::Acquire)
                        || cluster.lease_lost.load(Ordering::Acquire) => {}
                Ok(Renewal::Alive) => {
                    *cluster.write_deadline.lock() = sent + cluster.lease() * 2 / 3;
                }
                Ok(Renewal::Stale) => {}
                Ok(Renewal::Replaced) => cluster.replaced_by_another(store),
                Ok(Renewal::Expired) => {
                    // Gone (expired, or revoked by a broker that took this process for dead):
                    // the partitions may be acquired elsewhere already, so nothing more is
                    // written from now on, not only from the deadline on.
                    *cluster.write_deadline.lock() = Instant::now();
                    if !cluster.lease_lost.swap(true, Ordering::AcqRel)
                        && !cluster.volume_away.load(Ordering::Acquire)
                    {
                        tracing::error!("the etcd lease expired: this broker lost its partitions; releasing them and registering again");
                    }
                }
                Err(e) => {
                    tracing::warn!("renewing the etcd lease failed: {e}");
                    cluster.fence_if_past_deadline();
                }
            }
        },
    );
}

/// Watch etcd until shut down, waking the cluster thread at every change; a watch that
/// breaks (etcd away) is opened again after `retry` (the polls go on meanwhile).
fn watch_loop(
    watch: &sluice_meta::ClusterWatch,
    cancel: &WatchCancel,
    wakeup: &Wakeup,
    retry: Duration,
) {
    // etcd refusing the watch (its user may not read the prefix) does not pass by itself:
    // said once, at warn, until a watch runs again.
    let mut refused = false;
    while !cancel.cancelled() {
        match watch.run(cancel, || wakeup.wake()) {
            Err(e @ sluice_meta::MetaError::EtcdRefused(_)) => {
                if !std::mem::replace(&mut refused, true) {
                    tracing::warn!("etcd refuses the watch of the cluster's records (changes are seen at the next poll only): {e}");
                }
            }
            Err(e) => {
                refused = false;
                tracing::debug!("the etcd watch ended: {e}");
            }
            Ok(()) => refused = false,
        }
        if !cancel.cancelled() {
            std::thread::sleep(retry);
        }
    }
}

fn cluster_loop(weak: Weak<Broker>) {
    every(
        &weak,
        true,
        |cluster| Duration::from_millis(cluster.settings.poll_ms),
        |broker, cluster, store| {
            let away = broker.log_dir_volume_missing("the broker joins the cluster again");
            if away && !cluster.volume_away.swap(true, Ordering::AcqRel) {
                // Its partitions are served from files it cannot reach: leave, so that the
                // controller gives them to brokers that can (the reconciliation below lets go
                // of them here, writing nothing).
                tracing::error!("leaving the cluster while the shared volume is not mounted");
                // Its partitions go to other brokers as soon as the lease is revoked: nothing
                // is written from now on.
                *cluster.write_deadline.lock() = Instant::now();
                if let Err(e) = store.deregister() {
                    tracing::warn!("leaving the cluster failed (the lease expires instead): {e}");
                }
            }
            if !away && cluster.volume_away.swap(false, Ordering::AcqRel) {
                tracing::info!("the shared volume is back: joining the cluster again");
                cluster.lease_lost.store(true, Ordering::Release);
            }
            if cluster.replaced.load(Ordering::Acquire) {
                // Registering again would fence the process that replaced this one.
                cluster.release_all(broker);
                return;
            }
            if !away && cluster.lease_lost.load(Ordering::Acquire) {
                cluster.release_all(broker);
                match cluster.register_again(broker, store) {
                    Ok(true) => {}
                    Ok(false) => {
                        cluster.replaced_by_another(store);
                        cluster.release_all(broker);
                        return;
                    }
                    Err(e) => tracing::warn!("registering again failed: {e}"),
                }
            }
            // Read in full only when the watch cannot vouch for the view, and at least every
            // `sluice.cluster.full.read.interval.ms` whatever it says.
            let every = Duration::from_millis(cluster.settings.full_read_interval_ms);
            let full = cluster.last_full_read.lock().elapsed() >= every;
            if full {
                *cluster.last_full_read.lock() = Instant::now();
            }
            // A watch quiet this long is sent this broker's beat; one that does not report it
            // this long after is opened again (`EtcdStore::refresh_current`).
            let silence = Duration::from_millis(cluster.settings.lease_ms / 3)
                .max(Duration::from_millis(cluster.settings.poll_ms));
            let read = store.refresh_current(full, silence);
            if store.take_watch_restart() {
                tracing::warn!(
                    silence_ms = silence.as_millis() as u64,
                    "the etcd watch did not report this broker's beat: reading in full and opening the watch again"
                );
                cluster.watch_cancel.restart();
            }
            match read {
                Ok(view) => {
                    broker.quotas.reload_if_changed(store, view.revision);
                    broker.scram.reload_if_changed(store, view.revision);
                    broker.authz.reload_if_changed(store, view.revision);
                    cluster.reconcile(broker);
                    cluster.control(broker, store, &view);
                }
                Err(e) => tracing::warn!("reading the cluster's records failed: {e}"),
            }
        },
    );
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use sluice_meta::Owner;
    use sluice_store::{AppendOrigin, LogManager, MetaProperties};

    fn held_at(epoch: i32) -> OwnerRecord {
        OwnerRecord {
            owner: Owner {
                node: 1,
                epoch,
                pinned: false,
                from: None,
                to: None,
                recovery_point: 0,
                segment: 0,
                sealed: None,
                switch: None,
                snapshot: None,
                volume: None,
            },
            mod_revision: 1,
        }
    }

    /// A topic deleted and created again under its name starts its partitions' epochs anew:
    /// a log object of the deleted incarnation left in a task (a DeleteRecords or the
    /// maintenance iterating an old list) can carry the epoch the new one is held under.
    /// It must write nothing into the new incarnation's directory.
    #[test]
    fn a_log_of_a_deleted_incarnation_writes_nothing_at_the_same_epoch() {
        let cluster = Arc::new(Cluster::new(test_settings(), Volumes::default()));
        *cluster.write_deadline.lock() = Instant::now() + Duration::from_secs(600);
        let dir = tempfile::tempdir().unwrap();
        let m = LogManager::open(
            vec![dir.path().to_path_buf()],
            MetaProperties {
                node_id: 1,
                cluster_id: "test-cluster-id-00000A".into(),
            },
        )
        .unwrap();
        m.set_write_gate(Arc::new(Gate(cluster.clone(), Weak::new())));
        let tp = TopicPartition {
            topic: "t".into(),
            partition: 0,
        };
        let config = crate::testutil::log_config(i64::MAX, i64::MAX);
        let (old_id, new_id) = (uuid::Uuid::from_u128(1), uuid::Uuid::from_u128(2));
        cluster.hold_for_test(&tp, old_id, held_at(1));
        let old = m.open_log(&tp, old_id, config.clone(), 1).unwrap();
        let batch = sluice_format::BatchBuilder::new()
            .record(0, None, Some(b"old".as_slice()))
            .build();
        old.append(bytes::Bytes::from(batch), AppendOrigin::Client, 0)
            .unwrap();
        // The deletion: the old log leaves the registry (its object stays with a task), its
        // directory is put aside, and the new incarnation is acquired under the same epoch.
        m.release_log(&tp).unwrap();
        std::fs::rename(old.dir(), dir.path().join("t-0.aside-delete")).unwrap();
        cluster.hold_for_test(&tp, new_id, held_at(1));
        let new = m.open_log(&tp, new_id, config, 1).unwrap();
        let before: Vec<_> = std::fs::read_dir(new.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        // The old object's directory name is the new one's: a roll there would create a
        // segment inside the new incarnation.
        assert_eq!(old.dir(), new.dir());
        assert!(old.roll(0).is_err(), "the deleted incarnation's log rolled");
        let after: Vec<_> = std::fs::read_dir(new.dir())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(before.len(), after.len(), "files appeared: {after:?}");
        // The new incarnation's own log writes as before.
        let batch = sluice_format::BatchBuilder::new()
            .record(0, None, Some(b"new".as_slice()))
            .build();
        new.append(bytes::Bytes::from(batch), AppendOrigin::Client, 0)
            .unwrap();
        new.roll(0).unwrap();
        assert_eq!(new.segment_count(), 2);
    }

    fn test_settings() -> ClusterSettings {
        ClusterSettings {
            etcd_endpoints: vec![],
            etcd_tls: None,
            etcd_login: None,
            etcd_prefix: "/t".into(),
            etcd_timeout_ms: 1000,
            registration_timeout_ms: 60000,
            lease_ms: 3000,
            poll_ms: 200,
            full_read_interval_ms: 60000,
            balance_enable: false,
            death_probe_enable: false,
            locality_delay_ms: 30_000,
            balance_bytes: sluice_config::BytesBalance {
                enable: false,
                interval_ms: 300_000,
                window_ms: 60_000,
                threshold: 1_048_576,
                percent: 10,
            },
            broker_session_timeout_ms: 9000,
        }
    }

    /// An owner record naming `node` at `epoch`, written at `mod_revision`.
    fn record(node: i32, epoch: i32, mod_revision: i64) -> OwnerRecord {
        let mut r = held_at(epoch);
        r.owner.node = node;
        r.mod_revision = mod_revision;
        r
    }

    /// The reconciliation's decision for one partition, in the order the cases are checked:
    /// a view older than the record held never makes the broker let go of (or acquire again)
    /// what it just acquired; a record at its own epoch is kept or acquired again in place,
    /// never acquired under a new epoch; what is assigned elsewhere, or cannot be served, is
    /// let go.
    #[test]
    fn a_partition_is_decided_from_the_held_record_and_the_views() {
        let never = || -> bool { panic!("asked whether to wait where it does not matter") };
        // The view predates this broker's own acquisition (held at revision 5, the view
        // shows revision 3 at the older epoch): kept, under the held record.
        let held = record(1, 2, 5);
        assert_eq!(
            decide_partition(Some(held), Some(record(2, 1, 3)), false, true, None, never),
            PartitionStep::KeepNewerHeld(held)
        );
        // The view shows the record held, or an older one at its epoch: kept.
        assert_eq!(
            decide_partition(Some(held), Some(held), true, true, None, never),
            PartitionStep::Keep
        );
        // A newer record at this broker's epoch (a progress write's answer not taken in):
        // acquired again in place, not under a new epoch.
        let newer = record(1, 2, 7);
        assert_eq!(
            decide_partition(Some(held), Some(newer), true, true, None, never),
            PartitionStep::AcquireInPlace(newer)
        );
        // Acquired by this broker under another epoch than it holds: let go, then acquired.
        let bumped = record(1, 3, 7);
        assert_eq!(
            decide_partition(Some(held), Some(bumped), true, true, None, never),
            PartitionStep::Acquire {
                record: bumped,
                release_held: true
            }
        );
        // Assigned here, not held: acquired, unless the acquisition must wait.
        assert_eq!(
            decide_partition(None, Some(bumped), true, true, None, || false),
            PartitionStep::Acquire {
                record: bumped,
                release_held: false
            }
        );
        assert_eq!(
            decide_partition(None, Some(bumped), true, true, None, || true),
            PartitionStep::NotYet
        );
        // Assigned elsewhere at a newer revision: let go, naming the new owner.
        assert_eq!(
            decide_partition(Some(held), Some(record(2, 3, 9)), false, true, None, never),
            PartitionStep::LetGo { new_owner: 2 }
        );
        // This broker cannot hold partitions now (past its write deadline): let go, even of a
        // record naming it and older than the one it holds.
        assert_eq!(
            decide_partition(Some(held), Some(record(1, 2, 3)), false, false, None, never),
            PartitionStep::LetGo { new_owner: 1 }
        );
        assert_eq!(
            decide_partition(Some(held), None, false, true, None, never),
            PartitionStep::LetGo { new_owner: -1 }
        );
        assert_eq!(
            decide_partition(None, Some(record(2, 3, 9)), false, true, None, never),
            PartitionStep::Nothing
        );
    }

    /// A planned move is handed over by the broker the record names, whether it holds the
    /// partition at the record's epoch or not at all; held under another epoch, the record
    /// is decided as without the move.
    #[test]
    fn a_planned_move_is_handed_over_only_at_the_records_epoch() {
        let never = || -> bool { panic!("asked whether to wait where it does not matter") };
        let mut moving = record(1, 2, 5);
        moving.owner.to = Some(3);
        assert_eq!(
            decide_partition(
                Some(record(1, 2, 4)),
                Some(moving),
                true,
                true,
                Some(3),
                never
            ),
            PartitionStep::HandOver {
                record: moving,
                to: 3
            }
        );
        assert_eq!(
            decide_partition(None, Some(moving), true, true, Some(3), never),
            PartitionStep::HandOver {
                record: moving,
                to: 3
            }
        );
        assert_eq!(
            decide_partition(
                Some(record(1, 1, 4)),
                Some(moving),
                true,
                true,
                Some(3),
                never
            ),
            PartitionStep::Acquire {
                record: moving,
                release_held: true
            }
        );
        // Not this broker's to hand over (it cannot hold partitions now): let go.
        assert_eq!(
            decide_partition(
                Some(record(1, 2, 4)),
                Some(moving),
                false,
                false,
                Some(3),
                never
            ),
            PartitionStep::LetGo { new_owner: 1 }
        );
    }

    /// Of a deleted incarnation's partitions, those past the new incarnation's count are the
    /// ones the per-partition pass does not reach; other topics' are not among them.
    #[test]
    fn the_partitions_held_beyond_a_new_incarnations_count_are_found() {
        let cluster = Cluster::new(test_settings(), Volumes::default());
        let id = uuid::Uuid::from_u128(1);
        for (topic, partition) in [("t", 0), ("t", 1), ("t", 2), ("t", 3), ("u", 5), ("tt", 4)] {
            let tp = TopicPartition {
                topic: topic.into(),
                partition,
            };
            cluster.hold_for_test(&tp, id, held_at(1));
        }
        let mut beyond = cluster.held_beyond("t", 2);
        beyond.sort_by_key(|tp| tp.partition);
        let beyond: Vec<_> = beyond
            .iter()
            .map(|tp| (tp.topic.as_str(), tp.partition))
            .collect();
        assert_eq!(beyond, [("t", 2), ("t", 3)]);
    }

    /// A broker holds partitions only before its write deadline and while it is not leaving,
    /// re-registering or without its volume.
    #[test]
    fn partitions_are_held_only_before_the_write_deadline() {
        let cluster = Cluster::new(test_settings(), Volumes::default());
        assert!(
            !cluster.may_hold_partitions(),
            "a new cluster's deadline has passed"
        );
        *cluster.write_deadline.lock() = Instant::now() + Duration::from_secs(600);
        assert!(cluster.may_hold_partitions());
        for flag in [&cluster.stopping, &cluster.lease_lost, &cluster.volume_away] {
            flag.store(true, Ordering::Release);
            assert!(!cluster.may_hold_partitions());
            flag.store(false, Ordering::Release);
        }
        assert!(cluster.may_hold_partitions());
    }
}

//! The cluster's records in etcd: membership (one key per live broker, under its lease), the
//! controller (one key under the controller's lease), topics, partition ownership and
//! producer-id blocks. Layout under the prefix `P` (`sluice.cluster.etcd.prefix`), all values
//! JSON or plain text:
//!
//! ```text
//! P/cluster_id               the cluster id (created once)
//! P/volume                   the shared log dirs' directory.ids, sorted, comma-separated (created once)
//! P/brokers/<node>           {"host":..,"port":..}          under the broker's lease
//! P/controller               "<node>"                       under the controller's lease
//! P/topics/<topic>           {"id":..,"partitions":..,"configs":{..}}
//! P/owners/<topic>/<p>       {"node":..,"epoch":..}         node -1: no owner yet
//! P/producer_ids             the first producer id not yet reserved
//! P/broker_configs/<entity>  {"<name>":"<value>",..}       dynamic broker configs (broker_configs.rs),
//!                                                          finalized feature levels (entity <features>)
//! P/load/<node>              {"bytes_in":..,"top":[..]}     its bytes in, under the broker's lease (load.rs)
//! ```
//!
//! Architecture invariant: an owner record changes only by compare-and-swap on its mod
//! revision. The controller changes `node` (assignment); the assigned broker changes `epoch`
//! (acquisition: every acquisition bumps it). A broker acknowledges data only after a
//! transaction confirms, after the data's fsync, that its own registration and the owner
//! records it acquired are unchanged ([`EtcdStore::confirm`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::etcd::{Compare, Etcd, EtcdError, EtcdLink, Kv, Op};
use crate::{MetaError, TopicMeta, PRODUCER_ID_BLOCK};

/// Most comparisons sent in one confirming transaction (etcd's default `--max-txn-ops` is 128).
const CONFIRM_COMPARES_MAX: usize = 100;
/// The most owner records one batched acquisition or progress write changes in one etcd
/// transaction (etcd refuses more than `--max-txn-ops`, 128 by default, in a transaction).
pub const BATCH_RECORDS_MAX: usize = 100;

/// One listener a broker advertises: its name and where clients reach it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub name: String,
    pub host: String,
    pub port: u16,
}

/// A live broker as its registration record says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerInfo {
    #[serde(skip)]
    pub node_id: i32,
    /// Its inter-broker listener (the one its peers call).
    pub host: String,
    pub port: u16,
    /// Every listener it advertises (a client is given the addresses of the listener it came
    /// in on).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub listeners: Vec<Endpoint>,
    /// `broker.rack`, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rack: Option<String>,
    /// Its partition budget (`sluice.broker.partitions.max`); None (a record written before
    /// brokers published it) counts as no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions_max: Option<u64>,
    /// It serves fetches of partitions other brokers own, from the shared volume
    /// (`replica.selector.class` rack-aware, KIP-392 read replicas).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reads: bool,
    /// The volumes it reaches through their own storage node (`sluice.volume.storage.nodes`
    /// and `sluice.broker.storage.nodes`), as indexes into the cluster's log dirs ordered by
    /// `directory.id` ([`Owner::volume`]): the controller prefers such a broker as the owner
    /// of a partition on one of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub direct: Vec<u16>,
    /// Its web console's address (`sluice.console.listener`), when it serves one: the other
    /// brokers' consoles read its figures there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub console: Option<String>,
    /// The etcd lease its registration lives under (not stored; read with the record).
    #[serde(skip)]
    pub lease: i64,
}

impl BrokerInfo {
    /// Where clients of listener `name` reach this broker; None if it has no such listener.
    /// A record without listeners (registered before brokers listed them) has one, its
    /// host and port, under every name.
    pub fn endpoint(&self, name: &str) -> Option<(String, u16)> {
        if self.listeners.is_empty() {
            return Some((self.host.clone(), self.port));
        }
        self.listeners
            .iter()
            .find(|e| e.name == name)
            .map(|e| (e.host.clone(), e.port))
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct TopicRecord {
    id: Uuid,
    partitions: i32,
    #[serde(default)]
    configs: BTreeMap<String, String>,
}

/// One partition's owner record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    /// The owning broker; -1 when none is assigned yet.
    pub node: i32,
    /// The leader epoch of the owner's latest acquisition.
    pub epoch: i32,
    /// Placed by an explicit reassignment (kafka-reassign-partitions): balancing leaves it
    /// where it is (a failover still moves it, and unpins it).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pinned: bool,
    /// Set while a move is under way: the broker it is moving from. The new owner clears it
    /// when it acquires the partition (ListPartitionReassignments lists these).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<i32>,
    /// Set while a planned move waits for the owner (`node`, alive) to hand the partition
    /// over: the broker it goes to. The owner stops appending, makes everything durable,
    /// seals the active segment and names `to` the owner with a recovery point at the log's
    /// end ([`EtcdStore::hand_over`]), so the next owner has nothing to recover.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<i32>,
    /// The owner's recovery point: everything below it was durable when the owner recorded
    /// it, so the next owner validates only what lies after it (and the tails of the sealed
    /// segments below it).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub recovery_point: i64,
    /// The base offset of the newest segment the owner has published data in, recorded
    /// before that data is published: the next owner refuses a directory listing without a
    /// segment at or past it (a stale view of the volume).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub segment: i64,
    /// What the owner's sealed segments below `below` were when it wrote the record: how
    /// many, and a hash of their base offsets and sizes. A next owner whose listing and file
    /// sizes give the same trusts them without reading them (docs/cluster.md, fencing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sealed: Option<Sealed>,
    /// The last cleaner switch the owner announced before making its swap files
    /// ([`EtcdStore::record_switch`]): the next owner's open makes that switch's first rename
    /// aside, should it stall in flight past the takeover, land on nothing
    /// (docs/compaction.md). Kept through acquisitions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub switch: Option<Switch>,
    /// The owner's newest durable producer snapshot at or below `recovery_point`: the next
    /// owner's open trusts that file (not at a segment base) if it still carries this CRC, and
    /// replays producer state from there (docs/cluster.md, fencing point 2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotRef>,
    /// The volume holding the partition's directory, as the owner last recorded it: its log
    /// dir's index among the cluster's log dirs ordered by `directory.id` (the same on every
    /// broker: they share the set, `P/volume`). None until an owner records it (an
    /// acquisition does), or where a log dir has no `directory.id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<u16>,
}

/// [`Owner::snapshot`]: a producer snapshot's offset and the CRC-32C its file carries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRef {
    pub offset: i64,
    pub crc: u32,
    /// The offset of the owner's snapshot before it (0: none): where the next owner's replay
    /// of producer history starts (a position only; that file is not trusted).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub previous: i64,
}

/// [`Owner::switch`]: the cleaned segment's base offset and the random part of the switch's
/// tag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Switch {
    pub base: i64,
    pub id: u64,
}

/// One partition's progress for [`EtcdStore::record_progress_many`]: the record this broker
/// holds, and the recovery point, newest segment and sealed digest to write in it.
#[derive(Clone, Copy, Debug)]
pub struct Progress {
    pub partition: i32,
    pub held: OwnerRecord,
    pub recovery_point: i64,
    pub segment: i64,
    pub sealed: Option<Sealed>,
    /// The snapshot vouched for at `recovery_point` (None: the record's is kept, except at
    /// an acquisition, which drops the former owner's).
    pub snapshot: Option<SnapshotRef>,
    /// The volume the owner's log lies on ([`Owner::volume`]; None: the record's is kept).
    pub volume: Option<u16>,
}

/// [`Owner::sealed`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sealed {
    pub below: i64,
    pub count: u64,
    pub hash: u64,
}

impl Owner {
    /// This record after deciding that the partition goes to `node`: a planned move (the
    /// owner hands it over) while the owner is alive, else a direct assignment. Moving it to
    /// its owner takes back a planned move not yet handed over.
    fn moving_to(&self, node: i32, owner_alive: bool, pinned: bool) -> Owner {
        if node == self.node {
            Owner {
                pinned,
                to: None,
                ..*self
            }
        } else if owner_alive && self.node >= 0 {
            Owner {
                pinned,
                to: Some(node),
                ..*self
            }
        } else {
            Owner {
                node,
                pinned,
                from: (self.node >= 0).then_some(self.node),
                to: None,
                ..*self
            }
        }
    }
}

fn is_zero(v: &i64) -> bool {
    *v == 0
}

/// The record a topic's deletion leaves in etcd (`P/deleted/<topic id>`), naming the broker
/// each partition was assigned to when it was deleted: the only one that may have it open and
/// write its directory. Until that broker lets go of it (it sets its entries to -1; the last
/// removes the record) or leaves the cluster, no other broker touches the directory, also not
/// the owner of a partition of the same name created since (docs/cluster.md, fencing).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletedTopic {
    /// The deleted topic's name.
    pub topic: String,
    /// The broker each partition was assigned to at the deletion, or -1.
    pub owners: Vec<i32>,
    /// The record's mod revision (not stored; for compare-and-swap).
    #[serde(skip)]
    pub mod_revision: i64,
}

/// What renewing a broker's lease found ([`EtcdStore::keep_alive`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// Renewed; the registration is this process's.
    Alive,
    /// The lease has expired or was revoked: the registration is gone.
    Expired,
    /// The lease lives, but another process registered with this node id since (a
    /// replacement): this one may write nothing more, and must not register again (it would
    /// fence its replacement).
    Replaced,
    /// The lease renewed is no longer this process's registration: it registered again
    /// meanwhile, under a new lease. Nothing to conclude from this renewal.
    Stale,
}

/// An owner record with the revision that a compare-and-swap needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnerRecord {
    pub owner: Owner,
    pub mod_revision: i64,
}

/// Everything a broker needs to know about the cluster, read in one linearizable range.
#[derive(Clone, Debug, Default)]
pub struct ClusterView {
    pub revision: i64,
    pub brokers: BTreeMap<i32, BrokerInfo>,
    pub controller: Option<(i32, i64)>,
    /// Topics by name; `epochs` and `owners` come from the owner records.
    pub topics: BTreeMap<String, TopicMeta>,
    /// Owner records by (topic, partition).
    pub owners: BTreeMap<(String, i32), OwnerRecord>,
    /// The newest change to each topic's records (its topic record and its owner records),
    /// by name: a topic whose revision did not move has the same records.
    pub revisions: BTreeMap<String, i64>,
    /// Dynamic broker configs by entity (`entity_configs.rs`, kept by `broker_configs.rs`).
    pub broker_configs: crate::entity_configs::BrokerConfigs,
    /// Deleted topics whose partitions' brokers have not all let go yet, by topic id.
    pub deleted: BTreeMap<Uuid, DeletedTopic>,
}

impl ClusterView {
    pub fn controller_id(&self) -> Option<i32> {
        self.controller.map(|(id, _)| id)
    }

    /// Whether live broker `node`, owning `owned` partitions, is at its partition budget.
    pub fn is_full(&self, node: i32, owned: usize) -> bool {
        self.brokers
            .get(&node)
            .and_then(|b| b.partitions_max)
            .is_some_and(|max| owned as u64 >= max)
    }

    /// The partitions of every topic, and what the live brokers' budgets hold together (None
    /// when one of them publishes no budget).
    pub fn partition_capacity(&self) -> (u64, Option<u64>) {
        let used = self
            .topics
            .values()
            .map(|t| u64::try_from(t.partitions()).unwrap_or(0))
            .sum();
        let capacity = self
            .brokers
            .values()
            .map(|b| b.partitions_max)
            .try_fold(0u64, |sum, max| max.map(|m| sum.saturating_add(m)));
        (used, capacity)
    }
}

/// A watch of every record of a cluster ([`EtcdStore::watcher`]).
#[derive(Clone, Debug)]
pub struct ClusterWatch {
    etcd: Etcd,
    prefix: String,
    views: Arc<Views>,
}

impl ClusterWatch {
    /// Watch the cluster's records, handing what the watch reports to the store's view
    /// ([`Views`]); `changed` runs once the watch is in place and after every change, until
    /// the watch ends (etcd went away, or `cancel`). Blocks.
    pub fn run(
        &self,
        cancel: &crate::etcd::WatchCancel,
        mut changed: impl FnMut(),
    ) -> Result<(), MetaError> {
        let outcome = self.etcd.watch_prefix(&self.prefix, cancel, |message| {
            self.views.watched(message);
            changed();
        });
        self.views.watch_ended();
        outcome.map_err(etcd_err)
    }
}

/// The view of the cluster and how current it is.
///
/// A full read ([`EtcdStore::refresh`], one range of every record) costs etcd and the broker
/// in proportion to the records: at 10,000 partitions, one per round (200 ms) on each of
/// three brokers kept 1.5 of etcd's cores busy. So the cluster thread's rounds
/// ([`EtcdStore::refresh_current`]) apply what the watch reported instead: a full read made
/// while the watch was in place is the base, and every owner or topic record written since
/// (acquisitions, progress, assignments, topics created or changed: nearly every change) is
/// applied to it in revision order. Anything else reported (a broker, the controller, a
/// deletion, a config), a watch that ended or said something unreadable, or more changes than
/// [`WATCH_PENDING_MAX`] between two rounds, and the next round reads in full again.
///
/// Keeps: a view never goes back. Its revision is the newest change it holds (read or
/// applied); a full read older than that is dropped, and a full read is a base only if no
/// change reported after it began was lost (`epoch`).
#[derive(Debug, Default)]
pub(crate) struct Views {
    view: RwLock<Arc<ClusterView>>,
    sync: Mutex<WatchSync>,
}

#[derive(Debug, Default)]
struct WatchSync {
    /// A watch is in place.
    live: bool,
    /// Changes by every watch when anything reported may have been lost (a watch put in place
    /// or ended, a message not read, `pending` over its bound): a full read is a base only if
    /// it did not change while the read ran.
    epoch: u64,
    /// The view is a base plus every change reported since, but `pending`.
    synced: bool,
    /// Changes reported and not applied yet, in revision order.
    pending: Vec<crate::etcd::WatchEvent>,
    /// The first parts of a response etcd split (`fragment`), held until its last part
    /// comes, so that no round applies half of one revision's changes.
    partial: Vec<crate::etcd::WatchEvent>,
    /// When the watch last reported anything.
    last_message: Option<Instant>,
    /// The newest revision the watch reported.
    seen: i64,
    /// This broker's beat ([`EtcdStore::watch_went_silent`]): the revision it was written at
    /// and when, until the watch reports it.
    beat: Option<(i64, Instant)>,
}

/// How long a broker waits for its watch to report its own write before it reads every
/// record instead ([`EtcdStore::refresh_through`]).
const THROUGH_WAIT: Duration = Duration::from_millis(500);

/// Changes kept between two rounds; past that they are dropped and the next round reads in
/// full.
const WATCH_PENDING_MAX: usize = 200_000;

impl Views {
    /// What the watch reported.
    fn watched(&self, message: crate::etcd::WatchMessage) {
        use crate::etcd::WatchMessage;
        let mut sync = self.sync.lock();
        match message {
            WatchMessage::Started => {
                sync.live = true;
                // A beat the previous watch owed is not this one's to report.
                sync.beat = None;
                sync.lost();
            }
            WatchMessage::Unreadable => sync.lost(),
            WatchMessage::Events { events, fragment } => {
                sync.last_message = Some(Instant::now());
                if sync.pending.len() + sync.partial.len() + events.len() > WATCH_PENDING_MAX {
                    sync.lost();
                    return;
                }
                if let Some(last) = events.last() {
                    sync.seen = sync.seen.max(last.kv.mod_revision);
                }
                sync.partial.extend(events);
                if !fragment {
                    let whole = std::mem::take(&mut sync.partial);
                    sync.pending.extend(whole);
                }
            }
        }
        if sync.beat.is_some_and(|(revision, _)| sync.seen >= revision) {
            sync.beat = None;
        }
    }

    /// How the watch does: quiet for `silence` (a beat is due), silent (a beat written
    /// `silence` ago was not reported), or fine. No watch in place: fine (every round reads
    /// in full).
    fn health(&self, silence: Duration) -> WatchHealth {
        let sync = self.sync.lock();
        if !sync.live {
            return WatchHealth::Fine;
        }
        match sync.beat {
            Some((_, at)) if at.elapsed() >= silence => WatchHealth::Silent,
            Some(_) => WatchHealth::Fine,
            None if sync.last_message.is_none_or(|at| at.elapsed() >= silence) => {
                WatchHealth::Quiet
            }
            None => WatchHealth::Fine,
        }
    }

    fn beat_written(&self, revision: i64, at: Instant) {
        let mut sync = self.sync.lock();
        if sync.seen < revision {
            sync.beat = Some((revision, at));
        }
    }

    /// The watch went silent: nothing it reported is trusted until a new one is in place and
    /// a full read made under it.
    fn silent(&self) {
        let mut sync = self.sync.lock();
        sync.beat = None;
        // No base until a new watch is in place (`Started`).
        sync.live = false;
        sync.lost();
    }

    fn watch_ended(&self) {
        let mut sync = self.sync.lock();
        sync.live = false;
        sync.beat = None;
        sync.lost();
    }

    /// The watch's epoch when a watch is in place (taken before a full read).
    fn epoch_if_live(&self) -> Option<u64> {
        let sync = self.sync.lock();
        sync.live.then_some(sync.epoch)
    }

    /// Install `view`, a full read begun at watch epoch `epoch` (None: no watch was in
    /// place): it replaces the view unless the view is newer; the changes reported past its
    /// revision are applied, and the view is a base for later rounds if nothing reported
    /// since the read began was lost and every change past it could be applied.
    /// `replacing` runs with the view before and after, under the view's lock, when it is
    /// replaced.
    fn install(
        &self,
        prefix: &str,
        view: ClusterView,
        epoch: Option<u64>,
        replacing: impl FnOnce(&ClusterView, &ClusterView),
    ) -> Arc<ClusterView> {
        let mut sync = self.sync.lock();
        let mut current = self.view.write();
        // Views only move forward: a read that finished after a newer one is dropped, so
        // nobody acts on an older picture than one already seen (a topic just created would
        // look deleted).
        if view.revision >= current.revision {
            replacing(&current, &view);
            *current = Arc::new(view);
        }
        let base = current.revision;
        sync.pending.retain(|e| e.kv.mod_revision > base);
        if sync.live && epoch == Some(sync.epoch) && all_applied(prefix, &sync.pending) {
            let pending = std::mem::take(&mut sync.pending);
            if !pending.is_empty() {
                apply_events(prefix, Arc::make_mut(&mut current), &pending);
            }
            sync.synced = true;
        } else {
            sync.synced = false;
        }
        current.clone()
    }

    /// The view with every change reported so far applied, if the view is a base the
    /// watch kept current and each change can be applied (None: read in full).
    fn current(&self, prefix: &str) -> Option<Arc<ClusterView>> {
        let mut sync = self.sync.lock();
        if !sync.synced || !sync.live {
            return None;
        }
        if !all_applied(prefix, &sync.pending) {
            sync.synced = false;
            return None;
        }
        let mut current = self.view.write();
        let pending = std::mem::take(&mut sync.pending);
        if !pending.is_empty() {
            apply_events(prefix, Arc::make_mut(&mut current), &pending);
        }
        Some(current.clone())
    }
}

impl WatchSync {
    /// Something reported may have been lost: the next round reads in full.
    fn lost(&mut self) {
        self.epoch += 1;
        self.synced = false;
        self.pending.clear();
        self.partial.clear();
    }
}

/// What [`Views::health`] finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum WatchHealth {
    Fine,
    Quiet,
    Silent,
}

/// A change the view applies by itself: a write of an owner record, or of a topic's record
/// (a topic created, its partitions or configs changed: written in one transaction with its
/// new owner records, so reported in one message with them).
enum Applied<'a> {
    Owner(&'a str, i32),
    Topic(&'a str),
    /// A broker's beat ([`EtcdStore::watch_went_silent`]) or load (load.rs): nothing to apply.
    Beat,
}

fn applied<'a>(prefix: &str, e: &'a crate::etcd::WatchEvent) -> Option<Applied<'a>> {
    if e.deleted {
        return None;
    }
    let rest = e.kv.key.strip_prefix(prefix)?;
    if let Some(name) = rest.strip_prefix("topics/") {
        return Some(Applied::Topic(name));
    }
    // A broker's load (load.rs) is read by the controller when it balances, not held in the
    // view: nothing to apply either.
    if rest.starts_with("beats/") || rest.starts_with("load/") {
        return Some(Applied::Beat);
    }
    let (topic, p) = rest.strip_prefix("owners/")?.rsplit_once('/')?;
    Some(Applied::Owner(topic, p.parse().ok()?))
}

/// Whether the view can apply every one of `events` by itself.
fn all_applied(prefix: &str, events: &[crate::etcd::WatchEvent]) -> bool {
    events.iter().all(|e| applied(prefix, e).is_some())
}

/// Apply `events` (each one [`applied`] takes, in revision order) to `view`, each only if
/// newer than what the view holds; the topics written are rebuilt from their record and the
/// owner records after all of them. The view's revision becomes the newest change applied.
fn apply_events(prefix: &str, view: &mut ClusterView, events: &[crate::etcd::WatchEvent]) {
    let mut topics: Vec<(&str, TopicRecord)> = Vec::new();
    for e in events {
        // Strictly older only: the rest of a revision etcd split over several messages has
        // the revision the view took from its first part (applied again, it changes nothing).
        if e.kv.mod_revision < view.revision {
            continue;
        }
        match applied(prefix, e) {
            Some(Applied::Owner(topic, p)) => {
                let Ok(owner) = serde_json::from_slice::<Owner>(&e.kv.value) else {
                    // Read in full it would fail the read; left as it was here.
                    continue;
                };
                if let Some(t) = view.topics.get_mut(topic) {
                    if let (Some(epoch), Some(node)) =
                        (t.epochs.get_mut(p as usize), t.owners.get_mut(p as usize))
                    {
                        *epoch = owner.epoch;
                        *node = owner.node;
                    }
                }
                view.owners.insert(
                    (topic.to_string(), p),
                    OwnerRecord {
                        owner,
                        mod_revision: e.kv.mod_revision,
                    },
                );
                note_revision(&mut view.revisions, topic, e.kv.mod_revision);
            }
            Some(Applied::Topic(name)) => {
                note_revision(&mut view.revisions, name, e.kv.mod_revision);
                if let Ok(record) = serde_json::from_slice::<TopicRecord>(&e.kv.value) {
                    topics.retain(|(n, _)| *n != name);
                    topics.push((name, record));
                }
            }
            Some(Applied::Beat) | None => {}
        }
    }
    // Beats change nothing the view holds: its revision (which the quota, credential and
    // ACL reloads compare) stays.
    if let Some(last) = events
        .iter()
        .rev()
        .find(|e| !matches!(applied(prefix, e), Some(Applied::Beat)))
    {
        view.revision = view.revision.max(last.kv.mod_revision);
    }
    for (name, record) in topics {
        let meta = topic_meta(name, record, &view.owners);
        view.topics.insert(name.to_string(), meta);
    }
}

/// `revision` is a change to `topic`'s records: its revision is at least that.
fn note_revision(revisions: &mut BTreeMap<String, i64>, topic: &str, revision: i64) {
    match revisions.get_mut(topic) {
        Some(r) => *r = (*r).max(revision),
        None => {
            revisions.insert(topic.to_string(), revision);
        }
    }
}

/// A topic as the view has it: its record, with each partition's epoch and owner from its
/// owner record (0 and -1 without one).
fn topic_meta(
    name: &str,
    t: TopicRecord,
    owners: &BTreeMap<(String, i32), OwnerRecord>,
) -> TopicMeta {
    let n = t.partitions.max(0) as usize;
    let mut epochs = vec![0; n];
    let mut nodes = vec![-1; n];
    for p in 0..n {
        if let Some(r) = owners.get(&(name.to_string(), p as i32)) {
            epochs[p] = r.owner.epoch;
            nodes[p] = r.owner.node;
        }
    }
    TopicMeta {
        name: name.to_string(),
        id: t.id,
        epochs,
        owners: nodes,
        configs: t.configs,
    }
}

/// The metadata store of a cluster, in etcd.
#[derive(Debug)]
pub struct EtcdStore {
    pub(crate) etcd: Etcd,
    prefix: String,
    node_id: i32,
    cluster_id: String,
    /// The view, shared with the watch that keeps it current ([`ClusterWatch`]).
    views: Arc<Views>,
    /// The watch went silent ([`EtcdStore::take_watch_restart`]).
    watch_restart: Mutex<bool>,
    /// (next producer id to hand out, first id not reserved by this broker).
    producer_ids: Mutex<(i64, i64)>,
    /// This broker's registration: (lease id, mod revision of its broker key).
    registration: Mutex<Option<(i64, i64)>>,
    /// Every lease this process granted itself: a registration under any other lease is
    /// another process's (a replacement with this node id).
    own_leases: Mutex<std::collections::HashSet<i64>>,
    /// Brokers that left the view (their lease ended) and when this process's view first
    /// lacked them: [`EtcdStore::departed_within`].
    departed: Mutex<std::collections::HashMap<i32, (BrokerInfo, std::time::Instant)>>,
}

pub(crate) fn etcd_err(e: EtcdError) -> MetaError {
    match e {
        EtcdError::Refused(reason) => MetaError::EtcdRefused(reason),
        e => MetaError::Etcd(e.to_string()),
    }
}

pub(crate) fn parse_json<T: for<'de> Deserialize<'de>>(kv: &Kv) -> Result<T, MetaError> {
    serde_json::from_slice(&kv.value)
        .map_err(|e| MetaError::Etcd(format!("the etcd record {} does not parse: {e}", kv.key)))
}

pub(crate) fn to_json(v: &impl Serialize) -> Vec<u8> {
    // Serializing these plain structs cannot fail (no maps with non-string keys).
    serde_json::to_vec(v).unwrap_or_default()
}

impl EtcdStore {
    /// Connect, and read or create the cluster id (`cluster_id` is used only when creating).
    pub fn open(
        link: &EtcdLink,
        prefix: &str,
        node_id: i32,
        cluster_id: impl FnOnce() -> String,
    ) -> Result<EtcdStore, MetaError> {
        let etcd = Etcd::connect(link).map_err(etcd_err)?;
        let prefix = prefix.trim_end_matches('/').to_string();
        let key = format!("{prefix}/cluster_id");
        let existing = etcd.get(&key).map_err(etcd_err)?;
        let cluster_id = match existing {
            Some(kv) => String::from_utf8_lossy(&kv.value).into_owned(),
            None => {
                let id = cluster_id();
                etcd.txn(
                    &[Compare::CreateRevision(key.clone(), 0)],
                    &[Op::Put {
                        key: key.clone(),
                        value: id.clone().into_bytes(),
                        lease: 0,
                    }],
                    &[],
                )
                .map_err(etcd_err)?;
                // Whoever created it first wins.
                let kv = etcd.get(&key).map_err(etcd_err)?;
                kv.map(|kv| String::from_utf8_lossy(&kv.value).into_owned())
                    .unwrap_or(id)
            }
        };
        let store = EtcdStore {
            etcd,
            prefix,
            node_id,
            cluster_id,
            views: Arc::default(),
            watch_restart: Mutex::new(false),
            producer_ids: Mutex::new((0, 0)),
            registration: Mutex::new(None),
            own_leases: Mutex::new(std::collections::HashSet::new()),
            departed: Mutex::new(std::collections::HashMap::new()),
        };
        store.refresh()?;
        Ok(store)
    }

    pub fn cluster_id(&self) -> String {
        self.cluster_id.clone()
    }

    /// Check that `directory_ids` (the `directory.id` of each of this broker's log dirs, from
    /// their `meta.properties`) are the cluster's shared volume: the first broker to ask
    /// records them; every later one must see the same set. A broker whose mount of the
    /// volume is missing sees a bare mount point, where a fresh `meta.properties` (a new
    /// directory id) was just written: it gets an error naming both sets.
    pub fn check_volume(&self, directory_ids: &[String]) -> Result<(), MetaError> {
        let mut ids = directory_ids.to_vec();
        ids.sort();
        let mine = ids.join(",");
        let key = self.key("volume");
        self.etcd
            .txn(
                &[Compare::CreateRevision(key.clone(), 0)],
                &[Op::Put {
                    key: key.clone(),
                    value: mine.clone().into_bytes(),
                    lease: 0,
                }],
                &[],
            )
            .map_err(etcd_err)?;
        let recorded = self
            .etcd
            .get(&key)
            .map_err(etcd_err)?
            .map(|kv| String::from_utf8_lossy(&kv.value).into_owned())
            .unwrap_or_default();
        if recorded == mine {
            return Ok(());
        }
        Err(MetaError::WrongVolume(format!(
            "these log dirs (directory.id {mine}) are not the cluster's shared volume \
             (directory.id {recorded} recorded in etcd): is the volume mounted at every log dir?"
        )))
    }

    pub fn node_id(&self) -> i32 {
        self.node_id
    }

    pub(crate) fn key(&self, rest: &str) -> String {
        format!("{}/{rest}", self.prefix)
    }

    fn broker_key(&self, node: i32) -> String {
        self.key(&format!("brokers/{node}"))
    }

    fn owner_key(&self, topic: &str, partition: i32) -> String {
        self.key(&format!("owners/{topic}/{partition}"))
    }

    /// The latest view read by [`EtcdStore::refresh`].
    pub fn view(&self) -> Arc<ClusterView> {
        self.views.view.read().clone()
    }

    /// Read every record of the cluster (one linearizable range) and make it the view.
    pub fn refresh(&self) -> Result<Arc<ClusterView>, MetaError> {
        let root = format!("{}/", self.prefix);
        let epoch = self.views.epoch_if_live();
        let (kvs, revision) = self.etcd.range_prefix(&root).map_err(etcd_err)?;
        let mut view = ClusterView {
            revision,
            ..ClusterView::default()
        };
        let mut topics: BTreeMap<String, TopicRecord> = BTreeMap::new();
        for kv in &kvs {
            let Some(rest) = kv.key.strip_prefix(&root) else {
                continue;
            };
            if let Some(node) = rest.strip_prefix("brokers/") {
                let Ok(node_id) = node.parse::<i32>() else {
                    continue;
                };
                let mut info: BrokerInfo = parse_json(kv)?;
                info.node_id = node_id;
                info.lease = kv.lease;
                view.brokers.insert(node_id, info);
            } else if rest == "controller" {
                if let Ok(id) = String::from_utf8_lossy(&kv.value).parse::<i32>() {
                    view.controller = Some((id, kv.create_revision));
                }
            } else if let Some((entity, configs)) = crate::entity_configs::view_record(rest, kv)? {
                view.broker_configs.insert(entity, configs);
            } else if let Some(id) = rest.strip_prefix("deleted/") {
                let Ok(id) = Uuid::parse_str(id) else {
                    continue;
                };
                let mut d: DeletedTopic = parse_json(kv)?;
                d.mod_revision = kv.mod_revision;
                view.deleted.insert(id, d);
            } else if let Some(name) = rest.strip_prefix("topics/") {
                topics.insert(name.to_string(), parse_json(kv)?);
                note_revision(&mut view.revisions, name, kv.mod_revision);
            } else if let Some(tp) = rest.strip_prefix("owners/") {
                let Some((topic, p)) = tp.rsplit_once('/') else {
                    continue;
                };
                let Ok(p) = p.parse::<i32>() else { continue };
                let owner: Owner = parse_json(kv)?;
                note_revision(&mut view.revisions, topic, kv.mod_revision);
                view.owners.insert(
                    (topic.to_string(), p),
                    OwnerRecord {
                        owner,
                        mod_revision: kv.mod_revision,
                    },
                );
            }
        }
        for (name, t) in topics {
            let meta = topic_meta(&name, t, &view.owners);
            view.topics.insert(name, meta);
        }
        Ok(self.views.install(&root, view, epoch, |before, after| {
            self.note_departures(&before.brokers, &after.brokers)
        }))
    }

    /// The view for a round of the cluster thread: every change the watch reported applied
    /// to the last full read ([`Views`]), or a full read ([`EtcdStore::refresh`]) when the
    /// watch cannot vouch for that, or when `full` asks for one. Either way etcd is asked
    /// first (one key, a linearizable read), so a broker cut off from etcd gets an error as
    /// from a full read, never the last view it had.
    ///
    /// A watch can also go silent while etcd answers reads (a connection dropped by
    /// something in between without a reset, a member cut off from the others). So a watch
    /// that reported nothing for `silence` is sent something: this broker writes its beat
    /// (`beats/<node id>`); if the watch has not reported it `silence` later, its view is not
    /// trusted (a full read each round) and [`EtcdStore::take_watch_restart`] says to open
    /// the watch again.
    pub fn refresh_current(
        &self,
        full: bool,
        silence: Duration,
    ) -> Result<Arc<ClusterView>, MetaError> {
        if !full {
            self.etcd.get(&self.key("cluster_id")).map_err(etcd_err)?;
            match self.views.health(silence) {
                WatchHealth::Fine => {}
                // A beat that cannot be written (etcd refusing writes, say, while it answers
                // reads) leaves the round as it is; the next quiet round writes one again.
                WatchHealth::Quiet => drop(self.beat()),
                WatchHealth::Silent => {
                    self.views.silent();
                    *self.watch_restart.lock() = true;
                }
            }
            if let Some(view) = self.views.current(&format!("{}/", self.prefix)) {
                return Ok(view);
            }
        }
        self.refresh()
    }

    /// The view once it holds every change up to `revision` (a write of this broker's it
    /// must see): the watch's reports applied ([`Views::current`]) as soon as they reach it,
    /// or a full read when the watch cannot vouch for the view or has not reported it within
    /// [`THROUGH_WAIT`]. A full read of every record after each topic created cost etcd a
    /// range of the whole cluster per topic.
    fn refresh_through(&self, revision: i64) -> Result<Arc<ClusterView>, MetaError> {
        let prefix = format!("{}/", self.prefix);
        let deadline = Instant::now() + THROUGH_WAIT;
        loop {
            match self.views.current(&prefix) {
                Some(view) if view.revision >= revision => return Ok(view),
                Some(_) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(2));
                }
                _ => return self.refresh(),
            }
        }
    }

    /// Write this broker's beat, for its watch to report ([`EtcdStore::refresh_current`]).
    fn beat(&self) -> Result<(), MetaError> {
        let at = Instant::now();
        let key = self.key(&format!("beats/{}", self.node_id));
        let put = Op::Put {
            key,
            value: self.node_id.to_string().into_bytes(),
            lease: 0,
        };
        if let Some(revision) = self.etcd.txn_at(&[], &[put], &[]).map_err(etcd_err)? {
            self.views.beat_written(revision, at);
        }
        Ok(())
    }

    /// The lease of this process's registration, None while not registered.
    pub(crate) fn registration_lease(&self) -> Option<i64> {
        self.registration.lock().map(|(lease, _)| lease)
    }

    /// Whether the watch went silent since the last call ([`EtcdStore::refresh_current`]):
    /// its connection is to be shut down and a new watch opened.
    pub fn take_watch_restart(&self) -> bool {
        std::mem::take(&mut *self.watch_restart.lock())
    }

    /// Remember the brokers of `before` that `after` lacks, from now; forget those `after`
    /// holds (a broker that registered again).
    fn note_departures(
        &self,
        before: &BTreeMap<i32, BrokerInfo>,
        after: &BTreeMap<i32, BrokerInfo>,
    ) {
        let mut departed = self.departed.lock();
        departed.retain(|id, _| !after.contains_key(id));
        let now = std::time::Instant::now();
        for (id, info) in before.iter().filter(|(id, _)| !after.contains_key(id)) {
            departed.entry(*id).or_insert_with(|| (info.clone(), now));
        }
    }

    /// The brokers to list to clients, from one view: every registered broker, and each one
    /// whose registration left the view less than `within` ago and has not registered again,
    /// as last registered. A Kafka broker that stops heartbeating stays in the Metadata answer
    /// until its session times out (`broker.session.timeout.ms`); clients keep their
    /// connection objects meanwhile (librdkafka 2.10+ drops the objects of brokers gone from
    /// Metadata, and a request waiting for such a broker's connection is never woken again:
    /// librdkafka issues 5456 and 5511). The view and the departed set are read under the
    /// view's lock, which [`EtcdStore::refresh`] holds while it moves a broker between them:
    /// a broker back from the departed set is in the view read, never in neither.
    pub fn listed_brokers(&self, within: Duration) -> Vec<BrokerInfo> {
        let view = self.views.view.read();
        let mut departed = self.departed.lock();
        departed.retain(|_, (_, since)| since.elapsed() < within);
        let mut out: Vec<BrokerInfo> = view.brokers.values().cloned().collect();
        out.extend(
            departed
                .iter()
                .filter(|(id, _)| !view.brokers.contains_key(id))
                .map(|(_, (info, _))| info.clone()),
        );
        out.sort_unstable_by_key(|b| b.node_id);
        out
    }

    // ---- membership ------------------------------------------------------------------

    /// Register this broker under a new lease of `ttl`. A registration left by an earlier
    /// process with this node id is replaced in one write (the key is never absent, so no
    /// controller takes the replacement's partitions for orphans meanwhile); that process's
    /// confirmations fail from then on, as they compare the key's mod revision. Returns the
    /// lease id.
    pub fn register(&self, ttl: Duration, info: &BrokerInfo) -> Result<i64, MetaError> {
        self.register_if(ttl, info, &[])?
            .ok_or_else(|| MetaError::Etcd("an unconditional transaction failed".into()))
    }

    /// Register again after this process lost its registration (an expired or revoked
    /// lease), unless another process has registered with this node id since (a
    /// replacement): the key is written only if it is absent or under a lease of this
    /// process, as read just before. Returns the lease, None if replaced.
    pub fn register_again(
        &self,
        ttl: Duration,
        info: &BrokerInfo,
    ) -> Result<Option<i64>, MetaError> {
        let key = self.broker_key(self.node_id);
        let seen = self.etcd.get(&key).map_err(etcd_err)?;
        if let Some(kv) = &seen {
            if !self.own_leases.lock().contains(&kv.lease) {
                return Ok(None);
            }
        }
        let compare = Compare::ModRevision(key.clone(), seen.map_or(0, |kv| kv.mod_revision));
        if let Some(lease) = self.register_if(ttl, info, &[compare])? {
            return Ok(Some(lease));
        }
        // The key changed between the read and the write. Another process's registration is
        // a replacement; this process's own lease revoked meanwhile (UnregisterBroker, an
        // expiry) only removed it: not a replacement, so the caller tries again later.
        match self.etcd.get(&key).map_err(etcd_err)? {
            Some(kv) if !self.own_leases.lock().contains(&kv.lease) => Ok(None),
            _ => Err(MetaError::Etcd(
                "this broker's registration changed while it registered again; trying again".into(),
            )),
        }
    }

    fn register_if(
        &self,
        ttl: Duration,
        info: &BrokerInfo,
        compares: &[Compare],
    ) -> Result<Option<i64>, MetaError> {
        let ttl_s = ttl.as_secs().max(2) as i64;
        let lease = self.etcd.lease_grant(ttl_s).map_err(etcd_err)?;
        self.own_leases.lock().insert(lease);
        let key = self.broker_key(self.node_id);
        // The key's mod revision is the transaction's revision.
        let Some(written) = self
            .etcd
            .txn_at(
                compares,
                &[Op::Put {
                    key,
                    value: to_json(info),
                    lease,
                }],
                &[],
            )
            .map_err(etcd_err)?
        else {
            // Written by another process meanwhile: the lease goes unused.
            let _ = self.etcd.lease_revoke(lease);
            return Ok(None);
        };
        *self.registration.lock() = Some((lease, written));
        Ok(Some(lease))
    }

    /// Renew this broker's lease, and check that its registration is still under it.
    pub fn keep_alive(&self) -> Result<Renewal, MetaError> {
        let Some((lease, _)) = *self.registration.lock() else {
            return Ok(Renewal::Expired);
        };
        let ttl = self.etcd.lease_keep_alive(lease).map_err(etcd_err)?;
        if ttl <= 0 {
            return Ok(Renewal::Expired);
        }
        let key = self.broker_key(self.node_id);
        Ok(match self.etcd.get(&key).map_err(etcd_err)? {
            Some(kv) if kv.lease == lease => Renewal::Alive,
            // Registered again by this process meanwhile (under another of its leases).
            Some(kv) if self.own_leases.lock().contains(&kv.lease) => Renewal::Stale,
            Some(_) => Renewal::Replaced,
            // Gone under a live lease: deleted by hand; registering again is safe.
            None => Renewal::Expired,
        })
    }

    /// End the registration of another broker whose process is gone: its lease `lease` is
    /// revoked, which removes its registration and, if it was the controller, the controller
    /// key, so that its partitions move now instead of when the lease would expire. A lease
    /// already gone is no error. A new process of that broker registers under a new lease,
    /// which this leaves alone.
    pub fn revoke_lease_of(&self, node: i32, lease: i64) -> Result<(), MetaError> {
        match self.etcd.lease_revoke(lease) {
            Ok(()) => Ok(()),
            Err(e) if e.to_string().contains("requested lease not found") => {
                tracing::debug!(node, lease, "lease already gone");
                Ok(())
            }
            Err(e) => Err(etcd_err(e)),
        }
    }

    /// How long, in whole seconds at least, the lease `lease` has gone without a renewal, and
    /// the TTL it was granted; None if it is gone. etcd counts in whole seconds: the silence
    /// returned is one second less than etcd's count, so never more than the truth.
    pub fn lease_silence(&self, lease: i64) -> Result<Option<(i64, i64)>, MetaError> {
        let (remaining, granted) = self.etcd.lease_time_to_live(lease).map_err(etcd_err)?;
        if remaining < 0 {
            return Ok(None);
        }
        Ok(Some(((granted - remaining - 1).max(0), granted)))
    }

    /// Leave the cluster now (controlled shutdown): revoking the lease removes the
    /// registration and, if this broker is the controller, the controller key.
    pub fn deregister(&self) -> Result<(), MetaError> {
        let Some((lease, _)) = self.registration.lock().take() else {
            return Ok(());
        };
        self.etcd.lease_revoke(lease).map_err(etcd_err)
    }

    /// Become the controller if there is none. Returns the controller key's create revision
    /// when this broker is the controller.
    pub fn campaign(&self) -> Result<Option<i64>, MetaError> {
        let Some((lease, _)) = *self.registration.lock() else {
            return Ok(None);
        };
        let key = self.key("controller");
        // Created now, so its create revision is the transaction's revision.
        self.etcd
            .txn_at(
                &[Compare::CreateRevision(key.clone(), 0)],
                &[Op::Put {
                    key,
                    value: self.node_id.to_string().into_bytes(),
                    lease,
                }],
                &[],
            )
            .map_err(etcd_err)
    }

    // ---- ownership -------------------------------------------------------------------

    /// The controller assigns partitions: each `(topic, partition, record seen, new node)` is
    /// written only if the record is unchanged and this broker is still the controller (its
    /// key's create revision is `controller_rev`). A partition whose owner is alive is asked
    /// to move (its owner hands it over); one without is assigned at once. Returns whether it
    /// was applied.
    pub fn assign(
        &self,
        controller_rev: i64,
        moves: &[(String, i32, OwnerRecord, i32)],
    ) -> Result<bool, MetaError> {
        let alive = self.view().brokers.keys().copied().collect::<Vec<_>>();
        let mut compares = vec![Compare::CreateRevision(
            self.key("controller"),
            controller_rev,
        )];
        let mut ops = Vec::new();
        for (topic, p, seen, node) in moves {
            let key = self.owner_key(topic, *p);
            compares.push(Compare::ModRevision(key.clone(), seen.mod_revision));
            let owner_alive = alive.contains(&seen.owner.node);
            ops.push(Op::Put {
                key,
                value: to_json(&seen.owner.moving_to(*node, owner_alive, false)),
                lease: 0,
            });
        }
        self.etcd.txn(&compares, &ops, &[]).map_err(etcd_err)
    }

    /// An explicit reassignment (AlterPartitionReassignments): move the partition to `node`
    /// and pin it there, if its record is still `seen` (a planned move when its owner is
    /// alive). Any broker may do this; the compare-and-swap keeps it from undoing a change it
    /// did not see. Returns whether it was applied.
    pub fn reassign(
        &self,
        topic: &str,
        partition: i32,
        seen: OwnerRecord,
        node: i32,
    ) -> Result<bool, MetaError> {
        let key = self.owner_key(topic, partition);
        let owner_alive = self.view().brokers.contains_key(&seen.owner.node);
        self.etcd
            .txn(
                &[Compare::ModRevision(key.clone(), seen.mod_revision)],
                &[Op::Put {
                    key,
                    value: to_json(&seen.owner.moving_to(node, owner_alive, true)),
                    lease: 0,
                }],
                &[],
            )
            .map_err(etcd_err)
    }

    /// The owner hands a partition over to `to` (a planned move, or a controlled shutdown):
    /// it has stopped appending and made the log durable up to `recovery_point`, its end.
    /// Written if the record is still `held` and this broker still registered; the epoch is
    /// left for the new owner to bump. Returns whether it was applied.
    pub fn hand_over(
        &self,
        topic: &str,
        partition: i32,
        held: OwnerRecord,
        to: i32,
        recovery_point: i64,
    ) -> Result<bool, MetaError> {
        let Some((_, reg_rev)) = *self.registration.lock() else {
            return Ok(false);
        };
        let key = self.owner_key(topic, partition);
        let next = Owner {
            node: to,
            from: Some(self.node_id),
            to: None,
            recovery_point: recovery_point.max(held.owner.recovery_point),
            ..held.owner
        };
        self.etcd
            .txn(
                &[
                    Compare::ModRevision(key.clone(), held.mod_revision),
                    Compare::ModRevision(self.broker_key(self.node_id), reg_rev),
                ],
                &[Op::Put {
                    key,
                    value: to_json(&next),
                    lease: 0,
                }],
                &[],
            )
            .map_err(etcd_err)
    }

    /// A watch of the cluster's records, independent of this store's lifetime (a broker runs
    /// it on a thread of its own to refresh its view at once instead of at its next poll).
    pub fn watcher(&self) -> ClusterWatch {
        ClusterWatch {
            etcd: self.etcd.clone(),
            prefix: format!("{}/", self.prefix),
            views: self.views.clone(),
        }
    }

    /// Acquire a partition assigned to this broker: bump its epoch if the record is still
    /// `seen`. Returns the new record, or None if it changed meanwhile.
    pub fn acquire(
        &self,
        topic: &str,
        partition: i32,
        seen: OwnerRecord,
    ) -> Result<Option<OwnerRecord>, MetaError> {
        Ok(self
            .acquire_many(topic, &[(partition, seen)])?
            .and_then(|mut v| v.pop()))
    }

    /// [`EtcdStore::acquire`] for several partitions of `topic` in one transaction (at most
    /// [`BATCH_RECORDS_MAX`]): all are acquired, in the order given, or none (Ok(None)) when
    /// any record changed or one is not assigned to this broker.
    pub fn acquire_many(
        &self,
        topic: &str,
        seen: &[(i32, OwnerRecord)],
    ) -> Result<Option<Vec<OwnerRecord>>, MetaError> {
        if seen.iter().any(|(_, r)| r.owner.node != self.node_id) || seen.is_empty() {
            return Ok(None);
        }
        let mut nexts = Vec::with_capacity(seen.len());
        let mut compares = Vec::with_capacity(seen.len() + 1);
        let mut ops = Vec::with_capacity(seen.len());
        for (partition, r) in seen {
            let key = self.owner_key(topic, *partition);
            let next = Owner {
                node: self.node_id,
                epoch: r.owner.epoch + 1,
                from: None,
                to: None,
                ..r.owner
            };
            compares.push(Compare::ModRevision(key.clone(), r.mod_revision));
            ops.push(Op::Put {
                key,
                value: to_json(&next),
                lease: 0,
            });
            nexts.push(next);
        }
        self.txn_registered(compares, &ops, nexts)
    }

    /// Run a transaction of `ops` on the owner records `compares` names, also comparing this
    /// broker's registration; the records written, with their new mod revision, when it ran.
    fn txn_registered(
        &self,
        mut compares: Vec<Compare>,
        ops: &[Op],
        owners: Vec<Owner>,
    ) -> Result<Option<Vec<OwnerRecord>>, MetaError> {
        assert!(
            ops.len() <= BATCH_RECORDS_MAX,
            "too many records in one transaction"
        );
        let Some((_, reg_rev)) = *self.registration.lock() else {
            return Ok(None);
        };
        compares.push(Compare::ModRevision(self.broker_key(self.node_id), reg_rev));
        let revision = self.etcd.txn_at(&compares, ops, &[]).map_err(etcd_err)?;
        Ok(revision.map(|mod_revision| {
            owners
                .into_iter()
                .map(|owner| OwnerRecord {
                    owner,
                    mod_revision,
                })
                .collect()
        }))
    }

    /// Record the owner's recovery point, the newest segment it publishes data in and the
    /// rest of `progress` in a partition's owner record, if the record is still
    /// `progress.held` and this broker still registered. The recovery point never moves
    /// back; the segment does only with `acquired` (an acquisition names the segment it
    /// rolled: what it recovered is the log now). Returns the new record (its mod revision is
    /// the one confirmations must compare from now on), or None if it changed.
    pub fn record_progress(
        &self,
        topic: &str,
        progress: Progress,
        acquired: bool,
    ) -> Result<Option<OwnerRecord>, MetaError> {
        Ok(self
            .record_progress_many(topic, &[progress], acquired)?
            .and_then(|mut v| v.pop()))
    }

    /// [`EtcdStore::record_progress`] for several partitions of `topic` in one transaction
    /// (at most [`BATCH_RECORDS_MAX`]): all are written, in the order given, or none
    /// (Ok(None)) when any record changed.
    pub fn record_progress_many(
        &self,
        topic: &str,
        progress: &[Progress],
        acquired: bool,
    ) -> Result<Option<Vec<OwnerRecord>>, MetaError> {
        if progress.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let mut owners = Vec::with_capacity(progress.len());
        let mut compares = Vec::with_capacity(progress.len() + 1);
        let mut ops = Vec::with_capacity(progress.len());
        for p in progress {
            let key = self.owner_key(topic, p.partition);
            let owner = Owner {
                recovery_point: p.recovery_point.max(p.held.owner.recovery_point),
                segment: if acquired {
                    p.segment
                } else {
                    p.segment.max(p.held.owner.segment)
                },
                sealed: p.sealed.or(p.held.owner.sealed),
                snapshot: if acquired {
                    p.snapshot
                } else {
                    p.snapshot.or(p.held.owner.snapshot)
                },
                volume: p.volume.or(p.held.owner.volume),
                ..p.held.owner
            };
            compares.push(Compare::ModRevision(key.clone(), p.held.mod_revision));
            ops.push(Op::Put {
                key,
                value: to_json(&owner),
                lease: 0,
            });
            owners.push(owner);
        }
        self.txn_registered(compares, &ops, owners)
    }

    /// Record in a partition's owner record the cleaner switch about to begin, if the record
    /// is still `held` and this broker still registered. Returns the new record (its mod
    /// revision is the one confirmations must compare from now on), or None if it changed.
    pub fn record_switch(
        &self,
        topic: &str,
        partition: i32,
        held: OwnerRecord,
        switch: Switch,
    ) -> Result<Option<OwnerRecord>, MetaError> {
        let key = self.owner_key(topic, partition);
        let owner = Owner {
            switch: Some(switch),
            ..held.owner
        };
        let op = Op::Put {
            key: key.clone(),
            value: to_json(&owner),
            lease: 0,
        };
        Ok(self
            .txn_registered(
                vec![Compare::ModRevision(key, held.mod_revision)],
                &[op],
                vec![owner],
            )?
            .and_then(|mut v| v.pop()))
    }

    /// True if this broker's registration and every listed owner record are exactly as they
    /// were when acquired (a linearizable check: etcd compares them in one transaction each
    /// [`CONFIRM_COMPARES_MAX`] records).
    pub fn confirm(&self, held: &[(String, i32, i64)]) -> Result<bool, MetaError> {
        let Some((_, reg_rev)) = *self.registration.lock() else {
            return Ok(false);
        };
        let me = self.broker_key(self.node_id);
        if held.is_empty() {
            return Ok(true);
        }
        for chunk in held.chunks(CONFIRM_COMPARES_MAX) {
            let mut compares = vec![Compare::ModRevision(me.clone(), reg_rev)];
            compares.extend(
                chunk
                    .iter()
                    .map(|(t, p, rev)| Compare::ModRevision(self.owner_key(t, *p), *rev)),
            );
            if !self.etcd.txn(&compares, &[], &[]).map_err(etcd_err)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    // ---- topics ----------------------------------------------------------------------

    /// Create a topic with its owner records (`owners[p]` is the broker assigned to
    /// partition p, or -1; `epochs[p]` its epoch so far, 0 if absent). `id` is given when
    /// adopting a topic whose partition directories already name it.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
        owners: &[i32],
        id: Option<Uuid>,
        epochs: &[i32],
    ) -> Result<TopicMeta, MetaError> {
        if partitions < 1 {
            return Err(MetaError::InvalidPartitions {
                topic: name.to_string(),
                current: 0,
                requested: partitions,
            });
        }
        let record = TopicRecord {
            id: id.unwrap_or_else(Uuid::new_v4),
            partitions,
            configs,
        };
        let key = self.key(&format!("topics/{name}"));
        let mut ops = vec![Op::Put {
            key: key.clone(),
            value: to_json(&record),
            lease: 0,
        }];
        for p in 0..partitions {
            ops.push(Op::Put {
                key: self.owner_key(name, p),
                value: to_json(&Owner {
                    node: owners.get(p as usize).copied().unwrap_or(-1),
                    epoch: epochs.get(p as usize).copied().unwrap_or(0),
                    ..Owner::default()
                }),
                lease: 0,
            });
        }
        let Some(revision) = self
            .etcd
            .txn_at(&[Compare::CreateRevision(key, 0)], &ops, &[])
            .map_err(etcd_err)?
        else {
            return Err(MetaError::TopicExists(name.to_string()));
        };
        self.refresh_through(revision)?;
        self.topic(name)
            .ok_or_else(|| MetaError::Etcd(format!("topic {name} vanished after its creation")))
    }

    /// Delete a topic and its owner records, leaving a [`DeletedTopic`] record that names the
    /// broker each partition was assigned to at that moment, or this broker for a partition
    /// assigned to none (the owner records are compared in the same transaction; a change of
    /// one, such as a recovery point, is read again).
    pub fn delete_topic(&self, name: &str) -> Result<TopicMeta, MetaError> {
        let key = self.key(&format!("topics/{name}"));
        let owners_prefix = self.key(&format!("owners/{name}/"));
        let mut tries = 0;
        let topic = loop {
            tries += 1;
            let (kv, topic) = self.topic_record(name)?;
            let (records, revision) = self.etcd.range_prefix(&owners_prefix).map_err(etcd_err)?;
            let mut owners = vec![-1; topic.partitions.max(0) as usize];
            for r in &records {
                let Some(p) = r.key.strip_prefix(&owners_prefix) else {
                    continue;
                };
                let Ok(p) = p.parse::<usize>() else { continue };
                let owner: Owner = parse_json(r)?;
                if let Some(o) = owners.get_mut(p) {
                    *o = owner.node;
                }
            }
            let mut ops = vec![
                Op::Delete { key: key.clone() },
                Op::DeletePrefix {
                    prefix: owners_prefix.clone(),
                },
            ];
            // A partition no broker was assigned (imported, not yet placed) may still have a
            // directory: the broker deleting the topic answers for it.
            for o in &mut owners {
                if *o < 0 {
                    *o = self.node_id;
                }
            }
            if !owners.is_empty() {
                ops.push(Op::Put {
                    key: self.deleted_key(topic.id),
                    value: to_json(&DeletedTopic {
                        topic: name.to_string(),
                        owners,
                        mod_revision: 0,
                    }),
                    lease: 0,
                });
            }
            let deleted = self
                .etcd
                .txn(
                    &[
                        Compare::ModRevision(key.clone(), kv.mod_revision),
                        Compare::PrefixModBelow(owners_prefix.clone(), revision + 1),
                    ],
                    &ops,
                    &[],
                )
                .map_err(etcd_err)?;
            if deleted {
                break topic;
            }
            if tries >= 5 {
                return Err(MetaError::Etcd(format!(
                    "topic {name} changed while it was being deleted; try again"
                )));
            }
        };
        self.refresh()?;
        Ok(TopicMeta {
            name: name.to_string(),
            id: topic.id,
            epochs: vec![0; topic.partitions.max(0) as usize],
            owners: vec![-1; topic.partitions.max(0) as usize],
            configs: topic.configs,
        })
    }

    fn deleted_key(&self, id: Uuid) -> String {
        self.key(&format!("deleted/{id}"))
    }

    /// The id of the topic named `name` now (a linearizable read), None if there is none.
    pub fn topic_id(&self, name: &str) -> Result<Option<Uuid>, MetaError> {
        match self.topic_record(name) {
            Ok((_, t)) => Ok(Some(t.id)),
            Err(MetaError::UnknownTopic(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The deletion record of topic `id` as it is now (a linearizable read), None if gone.
    pub fn deleted_topic(&self, id: Uuid) -> Result<Option<DeletedTopic>, MetaError> {
        let Some(kv) = self.etcd.get(&self.deleted_key(id)).map_err(etcd_err)? else {
            return Ok(None);
        };
        let mut d: DeletedTopic = parse_json(&kv)?;
        d.mod_revision = kv.mod_revision;
        Ok(Some(d))
    }

    /// Take over, for this broker, the entries of the deleted topic `id` that `seen` names
    /// one of `departed` for, if the record is still `seen` and none of `departed` is
    /// registered: a broker that has left the cluster (its lease gone, so its write deadline
    /// passed) writes nothing more, and once back it reads the record again before it touches
    /// a directory, so it finds the entries no longer naming it. This broker then puts the
    /// directories aside as their named broker. Returns whether it was written.
    pub fn take_over_deleted(
        &self,
        id: Uuid,
        seen: &DeletedTopic,
        departed: &[i32],
    ) -> Result<bool, MetaError> {
        let key = self.deleted_key(id);
        let mut next = seen.clone();
        for o in &mut next.owners {
            if departed.contains(o) {
                *o = self.node_id;
            }
        }
        let mut compares = vec![Compare::ModRevision(key.clone(), seen.mod_revision)];
        compares.extend(
            departed
                .iter()
                .map(|n| Compare::CreateRevision(self.broker_key(*n), 0)),
        );
        let op = Op::Put {
            key,
            value: to_json(&next),
            lease: 0,
        };
        self.etcd.txn(&compares, &[op], &[]).map_err(etcd_err)
    }

    /// This broker has let go of the partitions of the deleted topic `id` that `seen` names
    /// it for: their entries become -1 (the record goes with the last one), if the record is
    /// still `seen`. Returns whether it was written.
    pub fn let_go_of_deleted(&self, id: Uuid, seen: &DeletedTopic) -> Result<bool, MetaError> {
        let key = self.deleted_key(id);
        let mut next = seen.clone();
        for o in &mut next.owners {
            if *o == self.node_id {
                *o = -1;
            }
        }
        let op = if next.owners.iter().all(|o| *o < 0) {
            Op::Delete { key: key.clone() }
        } else {
            Op::Put {
                key: key.clone(),
                value: to_json(&next),
                lease: 0,
            }
        };
        self.etcd
            .txn(&[Compare::ModRevision(key, seen.mod_revision)], &[op], &[])
            .map_err(etcd_err)
    }

    fn topic_record(&self, name: &str) -> Result<(Kv, TopicRecord), MetaError> {
        let key = self.key(&format!("topics/{name}"));
        let kv = self
            .etcd
            .get(&key)
            .map_err(etcd_err)?
            .ok_or_else(|| MetaError::UnknownTopic(name.to_string()))?;
        let t = parse_json(&kv)?;
        Ok((kv, t))
    }

    /// Grow a topic to `partitions`; `owners[i]` is the broker for the i-th new partition.
    pub fn add_partitions(
        &self,
        name: &str,
        partitions: i32,
        owners: &[i32],
    ) -> Result<TopicMeta, MetaError> {
        let (kv, mut t) = self.topic_record(name)?;
        if partitions <= t.partitions {
            return Err(MetaError::InvalidPartitions {
                topic: name.to_string(),
                current: t.partitions,
                requested: partitions,
            });
        }
        let current = t.partitions;
        t.partitions = partitions;
        let mut ops = vec![Op::Put {
            key: kv.key.clone(),
            value: to_json(&t),
            lease: 0,
        }];
        for (i, p) in (current..partitions).enumerate() {
            ops.push(Op::Put {
                key: self.owner_key(name, p),
                value: to_json(&Owner {
                    node: owners.get(i).copied().unwrap_or(-1),
                    ..Owner::default()
                }),
                lease: 0,
            });
        }
        let Some(revision) = self
            .etcd
            .txn_at(
                &[Compare::ModRevision(kv.key.clone(), kv.mod_revision)],
                &ops,
                &[],
            )
            .map_err(etcd_err)?
        else {
            return Err(MetaError::Etcd(format!(
                "topic {name} changed while partitions were being added; try again"
            )));
        };
        self.refresh_through(revision)?;
        self.topic(name)
            .ok_or_else(|| MetaError::UnknownTopic(name.to_string()))
    }

    pub fn set_topic_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicMeta, MetaError> {
        let (kv, mut t) = self.topic_record(name)?;
        t.configs = configs;
        let Some(revision) = self
            .etcd
            .txn_at(
                &[Compare::ModRevision(kv.key.clone(), kv.mod_revision)],
                &[Op::Put {
                    key: kv.key.clone(),
                    value: to_json(&t),
                    lease: 0,
                }],
                &[],
            )
            .map_err(etcd_err)?
        else {
            return Err(MetaError::Etcd(format!(
                "topic {name} changed while its configs were being set; try again"
            )));
        };
        self.refresh_through(revision)?;
        self.topic(name)
            .ok_or_else(|| MetaError::UnknownTopic(name.to_string()))
    }

    pub fn topics(&self) -> Vec<TopicMeta> {
        self.view().topics.values().cloned().collect()
    }

    pub fn topic(&self, name: &str) -> Option<TopicMeta> {
        self.view().topics.get(name).cloned()
    }

    // ---- producer ids ----------------------------------------------------------------

    /// A producer id never handed out before by any broker of the cluster: each broker
    /// reserves blocks of [`PRODUCER_ID_BLOCK`] with a compare-and-swap.
    pub fn next_producer_id(&self) -> Result<i64, MetaError> {
        let mut ids = self.producer_ids.lock();
        if ids.0 >= ids.1 {
            let key = self.key("producer_ids");
            let mut attempts = 0;
            loop {
                attempts += 1;
                let kv = self.etcd.get(&key).map_err(etcd_err)?;
                let (first, compare) = match &kv {
                    Some(kv) => (
                        String::from_utf8_lossy(&kv.value)
                            .parse::<i64>()
                            .unwrap_or(0),
                        Compare::ModRevision(key.clone(), kv.mod_revision),
                    ),
                    None => (0, Compare::CreateRevision(key.clone(), 0)),
                };
                let end = first + PRODUCER_ID_BLOCK;
                let ok = self
                    .etcd
                    .txn(
                        &[compare],
                        &[Op::Put {
                            key: key.clone(),
                            value: end.to_string().into_bytes(),
                            lease: 0,
                        }],
                        &[],
                    )
                    .map_err(etcd_err)?;
                if ok {
                    *ids = (first, end);
                    break;
                }
                if attempts >= 20 {
                    return Err(MetaError::Etcd(
                        "could not reserve a block of producer ids (too much contention)".into(),
                    ));
                }
            }
        }
        let id = ids.0;
        ids.0 += 1;
        Ok(id)
    }
}

/// The controller's plan for one round.
///
/// Each partition's candidates are the live brokers with direct access to its volume
/// ([`BrokerInfo::direct`], [`Owner::volume`]), or every live broker when none has: locality
/// never costs availability. A partition whose volume is not recorded yet, while some broker
/// declares direct access, has the brokers with direct access to some volume (its owner makes
/// it on one of them), and is never moved. A topic's partitions with the same candidates form
/// a group:
///
/// - A partition without a live owner goes to the candidate owning fewest of its group under
///   its partition budget (where a planned move was taking it, if that broker is a live
///   candidate); when every candidate is full, to a live broker with room; when every one is
///   full, past a candidate's budget.
/// - With `balance`, at most `moves_max` partitions move this round, first those owned by a
///   live broker that is not a candidate (a broker with direct access came back), then, group
///   by group, from the candidate owning most of the group to the one owning fewest, while
///   they differ by more than one (so each topic is spread over its candidates, as Kafka
///   spreads a topic's leaders, and the totals follow). With locality in use a partition
///   moves only to a broker in `settled` (registered long enough that a broker coming and
///   going does not move partitions back and forth). Pinned partitions (an explicit
///   reassignment) count but are not moved.
///
/// Returns `(topic, partition, new owner)`; deterministic for a given view and `settled`.
pub fn plan_assignments(
    view: &ClusterView,
    balance: bool,
    moves_max: usize,
    settled: &BTreeSet<i32>,
) -> Vec<(String, i32, i32)> {
    if view.brokers.is_empty() {
        return Vec::new();
    }
    let mut planner = Planner::new(view);
    let (orphans, misplaced) = planner.count_owners();
    planner.place_orphans(orphans);
    if balance {
        let moves = planner.move_back(misplaced, moves_max, settled);
        planner.balance_groups(moves, moves_max, settled);
    }
    once_per_partition(planner.plan)
}

/// Per candidate of a group: the partitions balancing may move (newest assignment last),
/// and how many it owns that stay (pinned, or a planned move under way to it).
type PerBroker = BTreeMap<i32, (Vec<i32>, usize)>;

/// A partition of a group: without a live owner (and where a planned move was taking it),
/// or owned by a live broker that is not one of its candidates.
type Orphan<'a> = ((&'a str, Group), i32, Option<i32>);
type Misplaced<'a> = ((&'a str, Group), i32, i32);

/// [`plan_assignments`]' state: the groups, what each live broker owns in all, the plan.
struct Planner<'a> {
    view: &'a ClusterView,
    live: Vec<i32>,
    /// The live brokers reaching each volume directly ([`direct_brokers`]).
    direct: BTreeMap<u16, Vec<i32>>,
    /// The live brokers reaching some volume directly.
    any_direct: Vec<i32>,
    /// Locality is in use: some live broker reaches a volume directly. Then a partition
    /// whose volume is not recorded yet (a new one, before its owner's acquisition records
    /// it) has those brokers as candidates (its owner makes it on a volume it reaches
    /// directly), and partitions move to a direct broker only once it is settled.
    locality: bool,
    groups: BTreeMap<(&'a str, Group), PerBroker>,
    total: BTreeMap<i32, usize>,
    plan: Vec<(String, i32, i32)>,
}

impl<'a> Planner<'a> {
    fn new(view: &'a ClusterView) -> Planner<'a> {
        let any_direct: Vec<i32> = view
            .brokers
            .iter()
            .filter(|(_, b)| !b.direct.is_empty())
            .map(|(n, _)| *n)
            .collect();
        Planner {
            view,
            live: view.brokers.keys().copied().collect(),
            direct: direct_brokers(view),
            locality: !any_direct.is_empty(),
            any_direct,
            groups: BTreeMap::new(),
            total: view.brokers.keys().map(|&b| (b, 0)).collect(),
            plan: Vec::new(),
        }
    }

    /// A partition's group within its topic: its volume when some live broker reaches that
    /// directly (the candidates are those brokers); with locality in use, a volume not known
    /// yet (those with direct access to some volume); else every live broker.
    fn group_of(&self, volume: Option<u16>) -> Group {
        group_of(&self.direct, self.locality, volume)
    }

    fn candidates(&self, group: Group) -> &[i32] {
        match group {
            Group::Volume(v) => self.direct.get(&v).map_or(&self.live, |b| b),
            Group::Unknown => &self.any_direct,
            Group::Any => &self.live,
        }
    }

    fn is_full(&self, b: i32) -> bool {
        self.view.is_full(b, self.total[&b])
    }

    /// Count every partition where it is (or is going: a planned move under way counts at
    /// its target and is left to finish); a move whose target died before the hand-over is
    /// taken back. Returns the partitions without a live owner and those owned outside
    /// their candidates.
    fn count_owners(&mut self) -> (Vec<Orphan<'a>>, Vec<Misplaced<'a>>) {
        let view = self.view;
        let (mut orphans, mut misplaced) = (Vec::new(), Vec::new());
        for ((topic, p), rec) in &view.owners {
            // Records of partitions past the topic's count (a half-finished change) are
            // skipped.
            if view.topics.get(topic).is_none_or(|t| *p >= t.partitions()) {
                continue;
            }
            let group = (topic.as_str(), self.group_of(rec.owner.volume));
            if !self.groups.contains_key(&group) {
                let per = (self.candidates(group.1).iter())
                    .map(|&b| (b, (Vec::new(), 0)))
                    .collect();
                self.groups.insert(group, per);
            }
            let owner_alive = self.total.contains_key(&rec.owner.node);
            let to = rec.owner.to.filter(|t| self.total.contains_key(t));
            let per = self.groups.entry(group).or_default();
            let at = match (owner_alive, to) {
                (true, Some(t)) => {
                    if let Some((_, fixed)) = per.get_mut(&t) {
                        *fixed += 1;
                    }
                    *self.total.entry(t).or_default() += 1;
                    continue;
                }
                (true, None) => rec.owner.node,
                (false, _) => {
                    orphans.push((group, *p, to.filter(|t| per.contains_key(t))));
                    continue;
                }
            };
            let stale = rec.owner.to.is_some();
            if stale {
                self.plan.push((topic.clone(), *p, at));
            }
            match per.get_mut(&at) {
                Some((_, pinned)) if rec.owner.pinned || stale => *pinned += 1,
                Some((movable, _)) => movable.push(*p),
                // Pinned, or its volume not recorded yet (see the balancing): it stays.
                None if rec.owner.pinned || stale || group.1 == Group::Unknown => {}
                None => misplaced.push((group, *p, at)),
            }
            *self.total.entry(at).or_default() += 1;
        }
        (orphans, misplaced)
    }

    /// Of `among`, the broker owning fewest of `group`, then fewest in all, then the lowest
    /// id.
    fn fewest(&self, group: &(&str, Group), among: impl Iterator<Item = i32>) -> Option<i32> {
        let per = self.groups.get(group);
        among.min_by_key(|b| (per.map_or(0, |per| count(per, *b)), self.total[b], *b))
    }

    /// Record that `p` of `group` goes to `b` (from `from`, if it had a live owner).
    fn assign(&mut self, group: (&'a str, Group), p: i32, from: Option<i32>, b: i32) {
        if let Some((movable, _)) = self.groups.get_mut(&group).and_then(|g| g.get_mut(&b)) {
            movable.push(p);
        }
        if let Some(from) = from {
            *self.total.entry(from).or_default() -= 1;
        }
        *self.total.entry(b).or_default() += 1;
        self.plan.push((group.0.to_string(), p, b));
    }

    /// Each partition without a live owner goes where a planned move was taking it, else to
    /// the candidate with fewest of the group under its partition budget; when every
    /// candidate is full, to the live broker with fewest under its budget; when every one is
    /// full, to the candidate with fewest, past its budget, so that the partition is served.
    fn place_orphans(&mut self, orphans: Vec<Orphan<'a>>) {
        for (group, p, to) in orphans {
            let Some(per) = self.groups.get(&group) else {
                continue;
            };
            let members: Vec<i32> = per.keys().copied().collect();
            let with_room = |b: &i32| !self.is_full(*b);
            let Some(b) = to
                .or_else(|| self.fewest(&group, members.iter().copied().filter(with_room)))
                .or_else(|| {
                    (self.live.iter().copied().filter(with_room))
                        .min_by_key(|b| (self.total[b], *b))
                })
                .or_else(|| self.fewest(&group, members.iter().copied()))
            else {
                continue;
            };
            self.assign(group, p, None, b);
        }
    }

    /// Partitions owned outside their candidates go back to the settled candidate owning
    /// fewest of the group, under its budget, at most `moves_max`. Returns the moves made.
    fn move_back(
        &mut self,
        misplaced: Vec<Misplaced<'a>>,
        moves_max: usize,
        settled: &BTreeSet<i32>,
    ) -> usize {
        let mut moves = 0;
        for (group, p, at) in misplaced {
            if moves >= moves_max {
                break;
            }
            let Some(per) = self.groups.get(&group) else {
                continue;
            };
            let members: Vec<i32> = per.keys().copied().collect();
            let eligible = |b: &i32| settled.contains(b) && !self.is_full(*b);
            let Some(b) = self.fewest(&group, members.into_iter().filter(eligible)) else {
                continue;
            };
            self.assign(group, p, Some(at), b);
            moves += 1;
        }
        moves
    }

    /// Group by group, move from the candidate owning most of the group to the one owning
    /// fewest while they differ by more than one, never to a broker at its budget nor, with
    /// locality in use, to one not settled; the busiest one's newest assignment first.
    fn balance_groups(&mut self, mut moves: usize, moves_max: usize, settled: &BTreeSet<i32>) {
        let keys: Vec<(&'a str, Group)> = self.groups.keys().copied().collect();
        for group in keys {
            // Partitions whose volume is not recorded yet are being acquired (their owner
            // records it): balancing them against the recorded ones of their topic would move
            // them between groups mid-acquisition.
            if group.1 == Group::Unknown {
                continue;
            }
            let members: Vec<i32> = self.groups[&group].keys().copied().collect();
            while moves < moves_max {
                let eligible =
                    |b: &i32| !self.is_full(*b) && (!self.locality || settled.contains(b));
                let Some(min_b) = self.fewest(&group, members.iter().copied().filter(eligible))
                else {
                    break;
                };
                let per = &self.groups[&group];
                // The candidate owning most of the group that has something balancing may
                // move.
                let Some(max_b) = (members.iter().copied())
                    .filter(|b| per.get(b).is_some_and(|(m, _)| !m.is_empty()))
                    .max_by_key(|b| (count(per, *b), self.total[b], std::cmp::Reverse(*b)))
                else {
                    break;
                };
                if count(per, max_b) <= count(per, min_b) + 1 {
                    break;
                }
                let popped = (self.groups.get_mut(&group))
                    .and_then(|per| per.get_mut(&max_b))
                    .and_then(|(m, _)| m.pop());
                let Some(p) = popped else {
                    break;
                };
                self.assign(group, p, Some(max_b), min_b);
                moves += 1;
            }
        }
    }
}

/// How many of a group `b` owns.
fn count(per: &PerBroker, b: i32) -> usize {
    per.get(&b).map_or(0, |(m, pinned)| m.len() + pinned)
}

/// Which of a topic's partitions [`plan_assignments`] balances together: the candidates they
/// share.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Group {
    /// On this volume, which a live broker reaches directly: those brokers.
    Volume(u16),
    /// Volume not recorded yet, with locality in use: the brokers with direct access to some
    /// volume (a new partition's owner makes it on one).
    Unknown,
    /// Every live broker (no locality, or no live broker reaches the volume directly).
    Any,
}

/// A partition's group within its topic, given the live brokers with direct access to each
/// volume ([`direct_brokers`]) and whether locality is in use (some live broker declares
/// direct access): its volume when some live broker reaches that directly; with locality in
/// use, a volume not recorded yet; else every live broker.
pub(crate) fn group_of(
    direct: &BTreeMap<u16, Vec<i32>>,
    locality: bool,
    volume: Option<u16>,
) -> Group {
    match volume {
        Some(v) if direct.contains_key(&v) => Group::Volume(v),
        None if locality => Group::Unknown,
        _ => Group::Any,
    }
}

/// The live brokers with direct access to each volume ([`BrokerInfo::direct`]), by volume;
/// volumes no live broker reaches directly are absent.
pub fn direct_brokers(view: &ClusterView) -> BTreeMap<u16, Vec<i32>> {
    let mut direct: BTreeMap<u16, Vec<i32>> = BTreeMap::new();
    for (node, b) in &view.brokers {
        for v in &b.direct {
            direct.entry(*v).or_default().push(*node);
        }
    }
    direct
}

/// The live brokers a partition on `volume` should be owned by: those reaching it directly,
/// or every live broker when none does (or the volume is not known).
pub fn candidates_for(view: &ClusterView, volume: Option<u16>) -> Vec<i32> {
    volume
        .and_then(|v| direct_brokers(view).remove(&v))
        .unwrap_or_else(|| view.brokers.keys().copied().collect())
}

/// The plan with one entry per partition, its last: an orphan assigned this round may be
/// moved again by balancing, and an etcd transaction refuses a key given twice (the whole
/// assignment would fail, round after round).
fn once_per_partition(plan: Vec<(String, i32, i32)>) -> Vec<(String, i32, i32)> {
    let mut seen = std::collections::HashSet::new();
    let mut out: Vec<_> = plan
        .into_iter()
        .rev()
        .filter(|(t, p, _)| seen.insert((t.clone(), *p)))
        .collect();
    out.reverse();
    out
}

/// Owners for `n` new partitions: round-robin over the live brokers, starting with those that
/// own the fewest partitions now; those under their partition budget first, and among them
/// those with direct access to a volume when some have (the owner makes a new partition's
/// directory on a volume it reaches directly).
pub fn spread_new_partitions(view: &ClusterView, n: i32) -> Vec<i32> {
    let locality = view.brokers.values().any(|b| !b.direct.is_empty());
    let indirect = |b: i32| locality && view.brokers.get(&b).is_some_and(|i| i.direct.is_empty());
    let mut counts: BTreeMap<i32, usize> = view.brokers.keys().map(|&b| (b, 0)).collect();
    for rec in view.owners.values() {
        if let Some(c) = counts.get_mut(&rec.owner.node) {
            *c += 1;
        }
    }
    let mut out = Vec::with_capacity(n.max(0) as usize);
    for _ in 0..n {
        let Some(b) = counts
            .iter()
            .min_by_key(|(b, c)| (view.is_full(**b, **c), indirect(**b), **c, **b))
            .map(|(b, _)| *b)
        else {
            out.push(-1);
            continue;
        };
        if let Some(c) = counts.get_mut(&b) {
            *c += 1;
        }
        out.push(b);
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;

    fn owner_put(topic: &str, p: i32, epoch: i32, rev: i64) -> crate::etcd::WatchEvent {
        let owner = Owner {
            node: 1,
            epoch,
            ..Owner::default()
        };
        put(
            &format!("p/owners/{topic}/{p}"),
            &String::from_utf8(to_json(&owner)).unwrap(),
            rev,
        )
    }

    fn put(key: &str, value: &str, rev: i64) -> crate::etcd::WatchEvent {
        crate::etcd::WatchEvent {
            deleted: false,
            kv: Kv {
                key: key.into(),
                value: value.as_bytes().to_vec(),
                create_revision: rev,
                mod_revision: rev,
                lease: 0,
            },
        }
    }

    fn read_at(revision: i64, epochs: &[i32]) -> ClusterView {
        let mut v = ClusterView {
            revision,
            ..ClusterView::default()
        };
        v.topics.insert(
            "t".into(),
            TopicMeta {
                name: "t".into(),
                id: Uuid::nil(),
                epochs: epochs.to_vec(),
                owners: vec![1; epochs.len()],
                configs: BTreeMap::new(),
            },
        );
        v
    }

    fn events(events: Vec<crate::etcd::WatchEvent>) -> crate::etcd::WatchMessage {
        crate::etcd::WatchMessage::Events {
            events,
            fragment: false,
        }
    }

    fn fragment(events: Vec<crate::etcd::WatchEvent>) -> crate::etcd::WatchMessage {
        crate::etcd::WatchMessage::Events {
            events,
            fragment: true,
        }
    }

    fn epochs(views: &Views) -> Vec<i32> {
        views.view.read().topics["t"].epochs.clone()
    }

    /// The watch keeps the view current from a full read made under it: owner and topic
    /// records are applied at the next round; anything else makes the next round read in
    /// full, which applies what was reported past its revision; a read begun before a watch
    /// was put in place, or while a report was lost, is no base; without a watch every round
    /// reads in full.
    #[test]
    fn the_watch_keeps_the_view_current_between_full_reads() {
        let views = Views::default();
        let p = "p/";
        assert!(views.current(p).is_none(), "no watch: read in full");
        views.watched(crate::etcd::WatchMessage::Started);
        let epoch = views.epoch_if_live();
        views.install(p, read_at(10, &[1, 1]), epoch, |_, _| {});
        assert!(
            views.current(p).is_some(),
            "a read under the watch is a base"
        );
        views.watched(events(vec![owner_put("t", 0, 5, 11)]));
        assert_eq!(epochs(&views), vec![1, 1], "applied at the next round");
        let v = views.current(p).unwrap();
        assert_eq!((v.revision, v.topics["t"].epochs.clone()), (11, vec![5, 1]));
        assert_eq!(v.owners[&("t".to_string(), 0)].mod_revision, 11);
        // A topic created (its record and owner records in one message) is applied.
        let topic = r#"{"id":"00000000-0000-0000-0000-000000000000","partitions":2}"#;
        views.watched(events(vec![
            put("p/topics/u", topic, 12),
            owner_put("u", 0, 1, 12),
            owner_put("u", 1, 1, 12),
        ]));
        assert_eq!(views.current(p).unwrap().topics["u"].epochs, vec![1, 1]);
        // A broker's record: read in full; an owner record reported after it is applied over
        // that read.
        views.watched(events(vec![put("p/brokers/3", "{}", 13)]));
        views.watched(events(vec![owner_put("t", 1, 7, 14)]));
        assert!(views.current(p).is_none());
        let v = views.install(p, read_at(13, &[5, 1]), views.epoch_if_live(), |_, _| {});
        assert_eq!((v.revision, v.topics["t"].epochs.clone()), (14, vec![5, 7]));
        assert!(views.current(p).is_some());
        // A deletion: read in full.
        let mut gone = put("p/owners/t/1", "", 15);
        gone.deleted = true;
        views.watched(events(vec![gone]));
        assert!(views.current(p).is_none());
        views.install(p, read_at(15, &[5, 7]), views.epoch_if_live(), |_, _| {});
        // A read begun under an earlier watch is no base.
        let old = views.epoch_if_live();
        views.watched(crate::etcd::WatchMessage::Started);
        views.install(p, read_at(16, &[5, 7]), old, |_, _| {});
        assert!(views.current(p).is_none());
        // Nor one during which a message could not be read.
        let during = views.epoch_if_live();
        views.watched(crate::etcd::WatchMessage::Unreadable);
        views.install(p, read_at(17, &[5, 7]), during, |_, _| {});
        assert!(views.current(p).is_none());
        views.install(p, read_at(18, &[5, 7]), views.epoch_if_live(), |_, _| {});
        assert!(views.current(p).is_some());
        // Without a watch, never current.
        views.watch_ended();
        views.install(p, read_at(19, &[5, 7]), None, |_, _| {});
        assert!(views.current(p).is_none());
    }

    /// A full read that finishes after the view applied a newer change is dropped (the view
    /// never goes back), and reports it had already applied are not applied again over a
    /// newer read.
    #[test]
    fn a_full_read_older_than_the_changes_applied_is_dropped() {
        let views = Views::default();
        let p = "p/";
        views.watched(crate::etcd::WatchMessage::Started);
        views.install(p, read_at(10, &[1, 1]), views.epoch_if_live(), |_, _| {});
        // A second full read begins (at revision 11, say) while the watch reports 11 and 12.
        let slow = views.epoch_if_live();
        views.watched(events(vec![owner_put("t", 0, 2, 11)]));
        views.watched(events(vec![owner_put("t", 1, 3, 12)]));
        assert_eq!(views.current(p).unwrap().topics["t"].epochs, vec![2, 3]);
        let mut replaced = false;
        let v = views.install(p, read_at(11, &[2, 1]), slow, |_, _| replaced = true);
        assert!(!replaced, "an older read never replaces the view");
        assert_eq!((v.revision, v.topics["t"].epochs.clone()), (12, vec![2, 3]));
        // A newer read replaces it, and an old report left over is not applied over it.
        views.watched(events(vec![owner_put("t", 0, 4, 13)]));
        let v = views.install(p, read_at(14, &[6, 6]), views.epoch_if_live(), |_, _| {});
        assert_eq!((v.revision, v.topics["t"].epochs.clone()), (14, vec![6, 6]));
        assert_eq!(views.current(p).unwrap().topics["t"].epochs, vec![6, 6]);
    }

    /// More changes between two rounds than the view keeps: the next round reads in full.
    #[test]
    fn too_many_changes_between_rounds_mean_a_full_read() {
        let views = Views::default();
        let p = "p/";
        views.watched(crate::etcd::WatchMessage::Started);
        views.install(p, read_at(10, &[1, 1]), views.epoch_if_live(), |_, _| {});
        let many: Vec<_> = (0..=WATCH_PENDING_MAX as i64)
            .map(|i| owner_put("t", 0, 2, 11 + i))
            .collect();
        views.watched(events(many));
        assert!(views.current(p).is_none());
    }

    /// Found by an adversary on a5134e6, since fixed (claim: every change is in the view by
    /// the round after the watch reported it). etcd sends a watch response of max-request-bytes or more in
    /// fragments (`sendLoop` calls `sendFragments` for every watch it created, fragment
    /// asked or not: `fragmented, ok := sws.fragment[id]; if !fragmented && !ok {..} else
    /// { sendFragments(..) }`), cutting between events, also between events of one revision
    /// (one transaction: a topic created with its owner records, or a batch of acquisitions).
    /// The gateway passes each fragment as its own message. A round between two fragments
    /// applies the first and moves the view's revision to the transaction's; the second
    /// fragment's events then have `mod_revision <= view.revision` and `apply_events`
    /// (cluster.rs `if e.kv.mod_revision <= view.revision { continue; }`) skips them: the
    /// view keeps a partition of the new topic without its owner record (owner -1, epoch 0)
    /// until the next full read, 60 s later, and no state etcd ever had looks like that.
    #[test]
    fn a_transaction_reported_in_two_fragments_is_applied_whole_whatever_round_falls_between() {
        let views = Views::default();
        let p = "p/";
        views.watched(crate::etcd::WatchMessage::Started);
        views.install(p, read_at(10, &[1, 1]), views.epoch_if_live(), |_, _| {});
        // One transaction at revision 11: topic `u` (2 partitions) and its 2 owner records,
        // reported in two fragments.
        let topic = r#"{"id":"00000000-0000-0000-0000-000000000000","partitions":2}"#;
        views.watched(events(vec![
            put("p/topics/u", topic, 11),
            owner_put("u", 0, 1, 11),
        ]));
        // The cluster thread's round, woken by the first fragment.
        let between = views.current(p).expect("owner and topic records only");
        assert_eq!(between.revision, 11);
        views.watched(events(vec![owner_put("u", 1, 1, 11)]));
        let v = views.current(p).expect("owner and topic records only");
        assert_eq!(
            (
                v.topics["u"].epochs.clone(),
                v.topics["u"].owners.clone(),
                v.owners.contains_key(&("u".to_string(), 1))
            ),
            (vec![1, 1], vec![1, 1], true),
            "the second fragment of revision 11 was dropped: partition u-1 has no owner record in the view (revision {})",
            v.revision
        );
    }

    /// etcd marks the first parts of a split response (`fragment`): no round applies half of
    /// one revision's changes.
    #[test]
    fn a_round_never_applies_part_of_a_response_etcd_split() {
        let views = Views::default();
        let p = "p/";
        views.watched(crate::etcd::WatchMessage::Started);
        views.install(p, read_at(10, &[1, 1]), views.epoch_if_live(), |_, _| {});
        let topic = r#"{"id":"00000000-0000-0000-0000-000000000000","partitions":2}"#;
        views.watched(fragment(vec![
            put("p/topics/u", topic, 11),
            owner_put("u", 0, 1, 11),
        ]));
        let between = views.current(p).unwrap();
        assert!(
            !between.topics.contains_key("u"),
            "half of revision 11 applied"
        );
        assert_eq!(between.revision, 10);
        views.watched(events(vec![owner_put("u", 1, 1, 11)]));
        let v = views.current(p).unwrap();
        assert_eq!((v.revision, v.topics["u"].owners.clone()), (11, vec![1, 1]));
    }

    /// A watch that reports nothing is sent a beat; one that does not report its beat is
    /// silent: no base until a new watch is in place.
    #[test]
    fn a_watch_that_does_not_report_the_beat_is_silent() {
        let views = Views::default();
        let p = "p/";
        let silence = Duration::from_millis(50);
        assert_eq!(
            views.health(silence),
            WatchHealth::Fine,
            "no watch: every round reads in full"
        );
        views.watched(crate::etcd::WatchMessage::Started);
        views.install(p, read_at(10, &[1, 1]), views.epoch_if_live(), |_, _| {});
        assert_eq!(
            views.health(silence),
            WatchHealth::Quiet,
            "nothing reported yet"
        );
        views.watched(events(vec![owner_put("t", 0, 2, 11)]));
        assert_eq!(views.health(silence), WatchHealth::Fine);
        std::thread::sleep(silence);
        assert_eq!(views.health(silence), WatchHealth::Quiet);
        // The beat is reported: fine again.
        views.beat_written(12, Instant::now());
        assert_eq!(views.health(silence), WatchHealth::Fine);
        views.watched(events(vec![put("p/beats/1", "1", 12)]));
        assert!(views.current(p).is_some(), "a beat changes nothing");
        std::thread::sleep(silence);
        // A beat not reported within `silence`: silent.
        views.beat_written(13, Instant::now());
        std::thread::sleep(silence);
        assert_eq!(views.health(silence), WatchHealth::Silent);
        views.silent();
        assert!(views.current(p).is_none());
        views.install(p, read_at(14, &[2, 1]), views.epoch_if_live(), |_, _| {});
        assert!(views.current(p).is_none(), "no base before a new watch");
        views.watched(crate::etcd::WatchMessage::Started);
        views.install(p, read_at(15, &[2, 1]), views.epoch_if_live(), |_, _| {});
        assert!(views.current(p).is_some());
    }

    /// Found by an adversary on a97f352, since fixed; claim C2 ("a restarted watch cannot be mistaken
    /// for the old one"). The beat (`WatchSync::beat`) is not tied to the watch it was
    /// written for: `watch_ended` and `watched(Started)` leave it in place (only `silent()`
    /// clears it). Interleaving: watch A is quiet, a round writes the beat at revision 12
    /// (`refresh_current` -> `beat` -> `beat_written`); A's connection is reset (an etcd
    /// member restarted) before it reports 12 (`ClusterWatch::run` -> `watch_ended`);
    /// `watch_loop` opens B `poll_ms` later: etcd creates B at the current revision, so B
    /// never reports 12 (only changes after its creation). `silence` after the beat,
    /// `Views::health` finds `Some((12, at))` elapsed and answers Silent: the healthy new
    /// watch B is declared silent, its view distrusted (`silent()`: a full read each round)
    /// and B shut down (`WatchCancel::restart`), with a warning that the watch did not report
    /// the beat.
    #[test]
    fn a_beat_owed_by_a_watch_that_ended_is_not_held_against_the_next_watch() {
        let views = Views::default();
        let p = "p/";
        let silence = Duration::from_millis(100);
        // Watch A, with a base.
        views.watched(crate::etcd::WatchMessage::Started);
        views.install(p, read_at(10, &[1, 1]), views.epoch_if_live(), |_, _| {});
        views.watched(events(vec![owner_put("t", 0, 2, 11)]));
        std::thread::sleep(silence);
        assert_eq!(views.health(silence), WatchHealth::Quiet);
        // The round writes the beat (revision 12).
        views.beat_written(12, Instant::now());
        // A's connection is reset before it reports 12.
        views.watch_ended();
        // B is in place, created at revision 12 (reports only what comes after), with a
        // full read under it: a base.
        views.watched(crate::etcd::WatchMessage::Started);
        views.install(p, read_at(12, &[2, 1]), views.epoch_if_live(), |_, _| {});
        assert!(views.current(p).is_some(), "B's base is in place");
        std::thread::sleep(silence + Duration::from_millis(20));
        assert_ne!(
            views.health(silence),
            WatchHealth::Silent,
            "watch B (in place, healthy) is declared silent for the beat of revision 12 that watch A owed and B, created after it, can never report: B is shut down and the view distrusted"
        );
    }

    pub(crate) fn view(brokers: &[i32], owners: &[(&str, i32, i32)]) -> ClusterView {
        let mut v = ClusterView::default();
        for &b in brokers {
            v.brokers.insert(
                b,
                BrokerInfo {
                    partitions_max: None,
                    reads: false,
                    direct: Vec::new(),
                    node_id: b,
                    host: "h".into(),
                    port: 1,
                    listeners: Vec::new(),
                    rack: None,
                    console: None,
                    lease: 0,
                },
            );
        }
        for (t, p, node) in owners {
            v.owners.insert(
                (t.to_string(), *p),
                OwnerRecord {
                    owner: Owner {
                        node: *node,
                        epoch: 1,
                        ..Owner::default()
                    },
                    mod_revision: 1,
                },
            );
            let topic = v.topics.entry(t.to_string()).or_insert_with(|| TopicMeta {
                name: t.to_string(),
                id: Uuid::nil(),
                epochs: vec![],
                owners: vec![],
                configs: BTreeMap::new(),
            });
            topic.epochs.push(1);
            topic.owners.push(*node);
        }
        v
    }

    /// Every live broker of `v`, settled.
    fn all(v: &ClusterView) -> BTreeSet<i32> {
        v.brokers.keys().copied().collect()
    }

    /// `v` with broker `b` reaching `volumes` directly and partitions `of` (topic, partition,
    /// volume) recorded on their volume.
    fn on_volumes(
        mut v: ClusterView,
        direct: &[(i32, &[u16])],
        of: &[(&str, i32, u16)],
    ) -> ClusterView {
        for (b, volumes) in direct {
            v.brokers.get_mut(b).unwrap().direct = volumes.to_vec();
        }
        for (t, p, vol) in of {
            v.owners.get_mut(&(t.to_string(), *p)).unwrap().owner.volume = Some(*vol);
        }
        v
    }

    fn owner_after(v: &ClusterView, plan: &[(String, i32, i32)], t: &str, p: i32) -> i32 {
        plan.iter()
            .rev()
            .find(|(pt, pp, _)| pt == t && *pp == p)
            .map_or(v.owners[&(t.to_string(), p)].owner.node, |(_, _, b)| *b)
    }

    #[test]
    fn orphans_go_to_brokers_with_direct_access_to_their_volume() {
        // Volume 0 is reached directly by 1 and 2, volume 1 by 3; broker 4 reaches none.
        // Every partition is orphaned (its owner, 9, is not alive).
        let owners: Vec<(&str, i32, i32)> = (0..8).map(|p| ("t", p, 9)).collect();
        let of: Vec<(&str, i32, u16)> = (0..8).map(|p| ("t", p, (p % 2) as u16)).collect();
        let v = on_volumes(
            view(&[1, 2, 3, 4], &owners),
            &[(1, &[0]), (2, &[0]), (3, &[1])],
            &of,
        );
        let plan = plan_assignments(&v, true, 100, &all(&v));
        for p in 0..8 {
            let b = owner_after(&v, &plan, "t", p);
            if p % 2 == 0 {
                assert!(b == 1 || b == 2, "partition {p} on volume 0 went to {b}");
            } else {
                assert_eq!(b, 3, "partition {p} on volume 1");
            }
        }
        // Spread over the direct brokers of volume 0.
        let c = counts(&v, &plan);
        assert_eq!(
            (c.get(&1), c.get(&2), c.get(&4)),
            (Some(&2), Some(&2), None)
        );
    }

    #[test]
    fn without_a_direct_broker_alive_any_broker_takes_the_partitions() {
        let owners: Vec<(&str, i32, i32)> = (0..6).map(|p| ("t", p, 9)).collect();
        let of: Vec<(&str, i32, u16)> = (0..6).map(|p| ("t", p, 0)).collect();
        // Only broker 4 (not alive) reaches volume 0; 1 and 2 reach volume 1, 3 none: every
        // live broker takes a share, not only those with direct access to another volume.
        let v = on_volumes(view(&[1, 2, 3], &owners), &[(1, &[1]), (2, &[1])], &of);
        let plan = plan_assignments(&v, true, 100, &all(&v));
        let c = counts(&v, &plan);
        assert_eq!((c[&1], c[&2], c[&3]), (2, 2, 2));
    }

    #[test]
    fn partitions_go_back_to_a_direct_broker_once_it_is_settled_a_few_per_round() {
        // Broker 1, with direct access to volume 0, was away: 2 and 3 (no direct access)
        // took its six partitions.
        let owners: Vec<(&str, i32, i32)> = (0..6)
            .map(|p| ("t", p, if p < 3 { 2 } else { 3 }))
            .collect();
        let of: Vec<(&str, i32, u16)> = (0..6).map(|p| ("t", p, 0)).collect();
        let v = on_volumes(view(&[1, 2, 3], &owners), &[(1, &[0])], &of);
        // Back, but not settled: nothing moves.
        let not_yet: BTreeSet<i32> = [2, 3].into();
        assert!(plan_assignments(&v, true, 100, &not_yet).is_empty());
        // Settled: they move back, at most moves_max a round.
        assert_eq!(plan_assignments(&v, true, 4, &all(&v)).len(), 4);
        let plan = plan_assignments(&v, true, 100, &all(&v));
        assert_eq!(counts(&v, &plan)[&1], 6);
        // Balancing off: they stay where they are.
        assert!(plan_assignments(&v, false, 100, &all(&v)).is_empty());
        // A pinned one stays.
        let mut pinned = v.clone();
        pinned
            .owners
            .get_mut(&("t".to_string(), 0))
            .unwrap()
            .owner
            .pinned = true;
        let plan = plan_assignments(&pinned, true, 100, &all(&pinned));
        assert_eq!(owner_after(&pinned, &plan, "t", 0), 2);
        assert_eq!(counts(&pinned, &plan)[&1], 5);
    }

    #[test]
    fn balancing_spreads_a_topic_over_the_direct_brokers_of_each_volume() {
        // All eight on broker 1; volume 0 (even partitions) reached by 1 and 2, volume 1
        // (odd) by 3 and 4.
        let owners: Vec<(&str, i32, i32)> = (0..8).map(|p| ("t", p, 1)).collect();
        let of: Vec<(&str, i32, u16)> = (0..8).map(|p| ("t", p, (p % 2) as u16)).collect();
        let v = on_volumes(
            view(&[1, 2, 3, 4], &owners),
            &[(1, &[0]), (2, &[0]), (3, &[1]), (4, &[1])],
            &of,
        );
        let plan = plan_assignments(&v, true, 100, &all(&v));
        for p in 0..8 {
            let b = owner_after(&v, &plan, "t", p);
            assert!(
                if p % 2 == 0 { b <= 2 } else { b >= 3 },
                "partition {p} on {b}"
            );
        }
        let c = counts(&v, &plan);
        assert_eq!((c[&1], c[&2], c[&3], c[&4]), (2, 2, 2, 2));
        // And a second round plans nothing.
        let mut after = v.clone();
        for (t, p, b) in &plan {
            after.owners.get_mut(&(t.clone(), *p)).unwrap().owner.node = *b;
        }
        assert!(plan_assignments(&after, true, 100, &all(&after)).is_empty());
    }

    #[test]
    fn a_partition_whose_volume_is_not_recorded_is_not_moved_for_locality() {
        // Created before locality was declared: on broker 3 (no direct access), no volume.
        let v = on_volumes(
            view(&[1, 2, 3], &[("t", 0, 3), ("t", 1, 3)]),
            &[(1, &[0])],
            &[],
        );
        assert!(plan_assignments(&v, true, 100, &all(&v)).is_empty());
        // Orphaned, it goes to a broker with direct access to some volume.
        let v = on_volumes(view(&[1, 2], &[("t", 0, 3)]), &[(1, &[0])], &[]);
        assert_eq!(
            plan_assignments(&v, true, 100, &all(&v)),
            vec![("t".to_string(), 0, 1)]
        );
    }

    #[test]
    fn new_partitions_go_to_brokers_with_direct_access() {
        let v = on_volumes(view(&[1, 2, 3], &[]), &[(2, &[0])], &[]);
        assert_eq!(spread_new_partitions(&v, 3), vec![2, 2, 2]);
        let v = view(&[1, 2, 3], &[]);
        assert_eq!(spread_new_partitions(&v, 3), vec![1, 2, 3]);
    }

    /// Found by an adversary on fdf3d7a, since fixed. Volume 0 is reached directly by brokers 1 and 2;
    /// broker 3 reaches nothing. Both direct brokers were away, so broker 3 took the volume's
    /// four partitions. Broker 1 is back and settled; broker 2 registered just now (not in
    /// `settled`). The locality pass moves the four to broker 1 (settled, correct), and the
    /// balancing pass of the same round then moves two of them on to broker 2 (it pops the
    /// newest movable of broker 1, i.e. the ones just moved): partitions move from a broker
    /// without direct access to a direct broker that has not been registered for
    /// `sluice.cluster.locality.delay.ms` (docs/cluster.md: "gets partitions back once it has
    /// been registered for sluice.cluster.locality.delay.ms").
    #[test]
    fn adv58_partitions_reach_an_unsettled_direct_broker_in_its_first_round() {
        let owners: Vec<(&str, i32, i32)> = (0..4).map(|p| ("t", p, 3)).collect();
        let of: Vec<(&str, i32, u16)> = (0..4).map(|p| ("t", p, 0)).collect();
        let v = on_volumes(view(&[1, 2, 3], &owners), &[(1, &[0]), (2, &[0])], &of);
        let settled: BTreeSet<i32> = [1, 3].into();
        let plan = plan_assignments(&v, true, 8, &settled);
        let to_unsettled: Vec<_> = plan.iter().filter(|(_, _, b)| *b == 2).collect();
        assert!(
            to_unsettled.is_empty(),
            "partitions planned to broker 2, which is not settled: {to_unsettled:?} (plan {plan:?})"
        );
    }

    /// Found by an adversary on fdf3d7a, since fixed. Volume 0 is reached directly by brokers 1 and 2.
    /// Broker 2 was away (its six partitions went to broker 1, the other live candidate) and
    /// has just registered again under a new lease: it is not in `settled`. The balancing pass
    /// of the group (t, volume 0) counts broker 2 as a member regardless of `settled` and
    /// moves three partitions to it in its first round (cluster.rs, plan_assignments, the
    /// per-group balancing loop: `members` is every candidate): docs/cluster.md says a broker
    /// with direct access that comes back "(or joins) gets partitions back once it has been
    /// registered for sluice.cluster.locality.delay.ms". A broker that comes and goes moves
    /// partitions back and forth, which the delay was to prevent.
    #[test]
    fn adv58_a_direct_broker_coming_back_gets_partitions_before_it_settles() {
        let owners: Vec<(&str, i32, i32)> = (0..6).map(|p| ("t", p, 1)).collect();
        let of: Vec<(&str, i32, u16)> = (0..6).map(|p| ("t", p, 0)).collect();
        let v = on_volumes(view(&[1, 2], &owners), &[(1, &[0]), (2, &[0])], &of);
        let settled: BTreeSet<i32> = [1].into();
        let plan = plan_assignments(&v, true, 8, &settled);
        assert!(
            plan.is_empty(),
            "partitions planned to broker 2 before it settled: {plan:?}"
        );
    }

    /// Found by an adversary on fdf3d7a, since fixed. Broker 1 reaches volume 0 directly and is at its
    /// partition budget (1 of 1); broker 2 reaches nothing and has room (0 of 10). Partition
    /// a-1 on volume 0 is orphaned (its owner, 9, died). plan_assignments restricts the
    /// orphan's choice to the candidates (broker 1 only), so it goes past broker 1's budget
    /// while broker 2 has room: docs/cluster.md (Ownership, budgets) and the old plan put an
    /// orphan past a budget only "when every broker is full". cluster.rs, plan_assignments,
    /// the orphan loop (`per.keys()...min_by_key(is_full, ...)` over the candidates only).
    #[test]
    fn adv58_an_orphan_goes_past_a_full_direct_brokers_budget_while_another_has_room() {
        let v = on_volumes(
            view(&[1, 2], &[("a", 0, 1), ("a", 1, 9)]),
            &[(1, &[0])],
            &[("a", 0, 0), ("a", 1, 0)],
        );
        let mut v = v;
        v.brokers.get_mut(&1).unwrap().partitions_max = Some(1);
        v.brokers.get_mut(&2).unwrap().partitions_max = Some(10);
        let plan = plan_assignments(&v, true, 8, &all(&v));
        assert_eq!(
            plan,
            vec![("a".to_string(), 1, 2)],
            "the orphan went past broker 1's budget although broker 2 has room"
        );
    }

    /// Found by an adversary on fdf3d7a, since fixed. The same for new partitions: broker 1 (direct to
    /// volume 0) is at its budget of 2, broker 2 (no direct access) has 0 of 10. A topic of
    /// two partitions fits the cluster's budget (the creation is not refused), and
    /// spread_new_partitions gives both to broker 1, past its budget, since it only considers
    /// brokers with direct access (cluster.rs, spread_new_partitions, the `any_direct`
    /// filter): before fdf3d7a they went to broker 2.
    #[test]
    fn adv58_new_partitions_go_past_a_full_direct_brokers_budget() {
        let mut v = on_volumes(
            view(&[1, 2], &[("a", 0, 1), ("a", 1, 1)]),
            &[(1, &[0])],
            &[("a", 0, 0), ("a", 1, 0)],
        );
        v.brokers.get_mut(&1).unwrap().partitions_max = Some(2);
        v.brokers.get_mut(&2).unwrap().partitions_max = Some(10);
        assert_eq!(
            spread_new_partitions(&v, 2),
            vec![2, 2],
            "new partitions placed past broker 1's budget although broker 2 has room"
        );
    }

    /// Found by an adversary on fdf3d7a, since fixed. A topic is created in a quiet cluster: broker 1
    /// reaches volume 0 directly, brokers 2 and 3 nothing. spread_new_partitions gives all six
    /// partitions to broker 1 (which makes them on volume 0). The controller's round on the
    /// view of the creation (every record without `volume` until its owner's acquisition
    /// writes it; the controller runs `control` on the same view its own `reconcile` used)
    /// puts the six in the group of unknown volume, candidates every live broker, and
    /// balancing moves four of them to brokers 2 and 3. Once those acquire them they record
    /// volume 0, the partitions are "misplaced", and the next round moves them back to
    /// broker 1: eight hand-overs for a topic creation with no broker coming or going.
    #[test]
    fn adv58_a_new_topic_moves_off_its_direct_broker_and_back() {
        let v0 = on_volumes(view(&[1, 2, 3], &[]), &[(1, &[0])], &[]);
        let owners_new = spread_new_partitions(&v0, 6);
        assert_eq!(owners_new, vec![1; 6]);
        let owners: Vec<(&str, i32, i32)> = owners_new
            .iter()
            .enumerate()
            .map(|(p, b)| ("t", p as i32, *b))
            .collect();
        let v = on_volumes(view(&[1, 2, 3], &owners), &[(1, &[0])], &[]);
        let first = plan_assignments(&v, true, 8, &all(&v));
        // The moves complete: the new owners acquire and record the volume (0).
        let mut after = v.clone();
        for rec in after.owners.values_mut() {
            rec.owner.volume = Some(0);
        }
        for (t, p, b) in &first {
            let rec = after.owners.get_mut(&(t.clone(), *p)).unwrap();
            rec.owner.node = *b;
            rec.owner.to = None;
        }
        let second = plan_assignments(&after, true, 8, &all(&after));
        assert!(
            first.is_empty() && second.is_empty(),
            "a topic creation moved partitions off their direct broker ({first:?}) and back ({second:?})"
        );
    }

    fn counts(v: &ClusterView, plan: &[(String, i32, i32)]) -> BTreeMap<i32, usize> {
        let mut owners: BTreeMap<(String, i32), i32> = v
            .owners
            .iter()
            .map(|(k, r)| (k.clone(), r.owner.node))
            .collect();
        for (t, p, b) in plan {
            owners.insert((t.clone(), *p), *b);
        }
        let mut c = BTreeMap::new();
        for b in owners.values() {
            *c.entry(*b).or_insert(0) += 1;
        }
        c
    }

    /// A store that talks to nobody (`Etcd::connect` is lazy), whose view the test installs
    /// as `refresh` does.
    fn offline_store() -> EtcdStore {
        let link = EtcdLink::plain(&["127.0.0.1:1"], Duration::from_secs(1)).unwrap();
        EtcdStore {
            etcd: Etcd::connect(&link).unwrap(),
            prefix: "/t".into(),
            node_id: 1,
            cluster_id: "c".into(),
            views: Arc::default(),
            watch_restart: Mutex::new(false),
            producer_ids: Mutex::new((0, 0)),
            registration: Mutex::new(None),
            own_leases: Mutex::new(std::collections::HashSet::new()),
            departed: Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// The tail of `refresh`, with a view read from etcd.
    fn install(store: &EtcdStore, view: ClusterView) {
        store.views.install("/t/", view, None, |before, after| {
            store.note_departures(&before.brokers, &after.brokers)
        });
    }

    fn brokers_at(revision: i64, brokers: &[(i32, &str)]) -> ClusterView {
        let mut v = ClusterView {
            revision,
            ..ClusterView::default()
        };
        for &(id, host) in brokers {
            v.brokers.insert(
                id,
                BrokerInfo {
                    partitions_max: None,
                    reads: false,
                    direct: Vec::new(),
                    node_id: id,
                    host: host.into(),
                    port: 9092,
                    listeners: Vec::new(),
                    rack: None,
                    console: None,
                    lease: i64::from(id),
                },
            );
        }
        v
    }

    /// Found by an adversary on b61746e, since fixed: a broker that restarts inside its
    /// session timeout was left out of a Metadata or DescribeCluster answer whose listing
    /// crossed the view refresh that saw it back: the listing read the live brokers from one
    /// view and the departed ones later, and `refresh` drops a broker from the departed set in
    /// the step that installs the view holding it again. Interleaving (brokers 1 and 2;
    /// broker 2's process crashes and restarts): broker 2's lease ends (departed, listed);
    /// a Metadata request reads the view (no broker 2); broker 2 registers again and the poll
    /// installs the view holding it, removing it from the departed set; the same request then
    /// read the departed set: broker 2 in neither. Now one read under the view's lock lists
    /// it at every step, once, with its newest registration.
    #[test]
    fn a_restarted_broker_is_listed_at_every_step_of_its_return() {
        let store = offline_store();
        let within = Duration::from_secs(9);
        let listed = |store: &EtcdStore| -> Vec<(i32, String)> {
            store
                .listed_brokers(within)
                .into_iter()
                .map(|b| (b.node_id, b.host))
                .collect()
        };
        install(&store, brokers_at(1, &[(1, "h1"), (2, "h2-old")]));
        assert_eq!(listed(&store), [(1, "h1".into()), (2, "h2-old".into())]);
        // Broker 2's lease ended: listed as last registered.
        install(&store, brokers_at(2, &[(1, "h1")]));
        assert_eq!(listed(&store), [(1, "h1".into()), (2, "h2-old".into())]);
        // Registered again: listed once, as registered now.
        install(&store, brokers_at(3, &[(1, "h1"), (2, "h2-new")]));
        assert_eq!(listed(&store), [(1, "h1".into()), (2, "h2-new".into())]);
        // Left again, and the session timed out: not listed.
        install(&store, brokers_at(4, &[(1, "h1")]));
        assert_eq!(store.listed_brokers(Duration::ZERO).len(), 1);
    }

    #[test]
    fn orphans_of_a_dead_broker_spread_over_the_survivors() {
        let owners: Vec<(&str, i32, i32)> = (0..9).map(|p| ("t", p, p % 3 + 1)).collect();
        let v = view(&[1, 2], &owners);
        let plan = plan_assignments(&v, false, 0, &all(&v));
        assert_eq!(plan.len(), 3);
        assert!(plan.iter().all(|(_, _, b)| *b == 1 || *b == 2));
        let c = counts(&v, &plan);
        assert_eq!(c.get(&3), None);
        assert!(c[&1].abs_diff(c[&2]) <= 1);
    }

    #[test]
    fn a_new_broker_gets_a_fair_share_when_balancing() {
        let owners: Vec<(&str, i32, i32)> = (0..12).map(|p| ("t", p, p % 2 + 1)).collect();
        let v = view(&[1, 2, 3], &owners);
        assert!(plan_assignments(&v, false, 100, &all(&v)).is_empty());
        let plan = plan_assignments(&v, true, 100, &all(&v));
        let c = counts(&v, &plan);
        assert_eq!((c[&1], c[&2], c[&3]), (4, 4, 4));
        // Bounded per round.
        assert_eq!(plan_assignments(&v, true, 2, &all(&v)).len(), 2);
    }

    #[test]
    fn balancing_leaves_pinned_partitions_alone() {
        let owners: Vec<(&str, i32, i32)> = (0..6).map(|p| ("t", p, 1)).collect();
        let mut v = view(&[1, 2], &owners);
        for p in 0..4 {
            v.owners
                .get_mut(&("t".to_string(), p))
                .unwrap()
                .owner
                .pinned = true;
        }
        let plan = plan_assignments(&v, true, 100, &all(&v));
        // Only the two unpinned partitions may move; one does (4+1 against 1 would be
        // uneven, but nothing else is movable).
        assert!(plan.iter().all(|(_, p, _)| *p >= 4), "{plan:?}");
        assert_eq!(plan.len(), 2);
    }

    #[test]
    fn each_topic_is_spread_not_only_the_totals() {
        // 50 offsets partitions spread evenly, and a topic of 6 all on broker 1: the totals
        // (18/19/19 against 17/17/17 plus 6) would hide it.
        let mut owners: Vec<(&str, i32, i32)> =
            (0..48).map(|p| ("offsets", p, p % 3 + 1)).collect();
        owners.extend((0..6).map(|p| ("data", p, 1)));
        let v = view(&[1, 2, 3], &owners);
        let plan = plan_assignments(&v, true, 100, &all(&v));
        let mut data = BTreeMap::new();
        for ((t, p), r) in &v.owners {
            if t == "data" {
                let to = plan
                    .iter()
                    .find(|(pt, pp, _)| pt == t && pp == p)
                    .map_or(r.owner.node, |x| x.2);
                *data.entry(to).or_insert(0) += 1;
            }
        }
        assert_eq!(data.values().copied().collect::<Vec<_>>(), vec![2, 2, 2]);
        assert!(plan.iter().all(|(t, _, _)| t == "data"), "{plan:?}");
        // Orphans of a dead broker go where their topic is thinnest.
        let v = view(
            &[1, 2],
            &[
                ("x", 0, 1),
                ("x", 1, 3),
                ("y", 0, 2),
                ("y", 1, 2),
                ("y", 2, 1),
            ],
        );
        assert_eq!(
            plan_assignments(&v, false, 0, &all(&v)),
            vec![("x".to_string(), 1, 2)]
        );
    }

    #[test]
    fn unassigned_partitions_and_new_ones_are_spread() {
        let owners: Vec<(&str, i32, i32)> = (0..4).map(|p| ("t", p, -1)).collect();
        let v = view(&[1, 2], &owners);
        let c = counts(&v, &plan_assignments(&v, false, 0, &all(&v)));
        assert_eq!((c[&1], c[&2]), (2, 2));
        assert_eq!(
            spread_new_partitions(&view(&[1, 2, 3], &[]), 4),
            vec![1, 2, 3, 1]
        );
        assert_eq!(spread_new_partitions(&view(&[], &[]), 2), vec![-1, -1]);
    }

    #[test]
    fn partitions_go_to_brokers_under_their_budget_first() {
        let budgets = |v: &mut ClusterView, max: &[(i32, u64)]| {
            for (b, m) in max {
                v.brokers.get_mut(b).unwrap().partitions_max = Some(*m);
            }
        };
        // Broker 1 holds 3 of a budget of 3: new partitions and orphans go to 2 and 3.
        let mut owners: Vec<(&str, i32, i32)> = (0..3).map(|p| ("a", p, 1)).collect();
        owners.extend((0..4).map(|p| ("b", p, -1)));
        let mut v = view(&[1, 2, 3], &owners);
        budgets(&mut v, &[(1, 3), (2, 10), (3, 10)]);
        assert_eq!(spread_new_partitions(&v, 4), vec![2, 3, 2, 3]);
        let plan = plan_assignments(&v, false, 0, &all(&v));
        assert!(plan.iter().all(|(_, _, to)| *to != 1), "{plan:?}");
        // Balancing moves partitions off broker 1, and never past a budget.
        let c = counts(&v, &plan_assignments(&v, true, 100, &all(&v)));
        assert!(c[&1] <= 3 && c[&1] + c[&2] + c[&3] == 7, "{c:?}");
        budgets(&mut v, &[(2, 2), (3, 2)]);
        let c = counts(&v, &plan_assignments(&v, true, 100, &all(&v)));
        assert_eq!((c[&1], c[&2], c[&3]), (3, 2, 2));
        // Every broker full: an orphan is still placed (served past the budget).
        let mut v = view(&[1, 2], &[("a", 0, 1), ("a", 1, 2), ("a", 2, -1)]);
        budgets(&mut v, &[(1, 1), (2, 1)]);
        assert_eq!(plan_assignments(&v, true, 100, &all(&v)).len(), 1);
        assert_eq!(v.partition_capacity(), (3, Some(2)));
        // A broker that publishes no budget: no limit.
        v.brokers.get_mut(&2).unwrap().partitions_max = None;
        assert_eq!(v.partition_capacity(), (3, None));
    }

    #[test]
    fn planned_moves_count_where_they_go_and_finish_or_are_taken_back() {
        let owners: Vec<(&str, i32, i32)> = (0..4).map(|p| ("t", p, 1)).collect();
        let mut v = view(&[1, 2], &owners);
        let to = |v: &mut ClusterView, p: i32, b: i32| {
            v.owners.get_mut(&("t".to_string(), p)).unwrap().owner.to = Some(b);
        };
        // Two moves to broker 2 under way: balanced already, nothing planned.
        to(&mut v, 0, 2);
        to(&mut v, 1, 2);
        assert!(plan_assignments(&v, true, 100, &all(&v)).is_empty());
        // The owner dies before handing over: its partitions go where the moves were taking
        // them, the rest where there is room.
        v.brokers.remove(&1);
        v.brokers.insert(3, v.brokers[&2].clone());
        let plan = plan_assignments(&v, false, 0, &all(&v));
        assert!(plan.contains(&("t".to_string(), 0, 2)), "{plan:?}");
        assert!(plan.contains(&("t".to_string(), 1, 2)), "{plan:?}");
        assert!(plan.contains(&("t".to_string(), 2, 3)), "{plan:?}");
        // The target dies instead: the move is taken back (planned to the owner).
        let mut v = view(&[1, 3], &owners);
        to(&mut v, 0, 2);
        let plan = plan_assignments(&v, true, 100, &all(&v));
        assert!(plan.contains(&("t".to_string(), 0, 1)), "{plan:?}");
        assert_eq!(plan.iter().filter(|(_, p, _)| *p == 0).count(), 1);
    }

    /// Found by a fault run (seed 201): an orphan assigned to where its planned move was
    /// going is also movable by balancing in the same round, so the plan named it twice, and
    /// `EtcdStore::assign` put the same key twice into one etcd transaction, which etcd
    /// refuses ("duplicate key given in txn request"): no orphan was assigned while the plan
    /// stayed so (40 s of `assigning partitions failed` in that run).
    #[test]
    fn an_orphan_is_planned_at_most_once() {
        // Broker 3 died while moves of its four partitions of t to broker 1 were under way;
        // broker 2 owns none of t.
        let owners: Vec<(&str, i32, i32)> = (0..4).map(|p| ("t", p, 3)).collect();
        let mut v = view(&[1, 2], &owners);
        for p in 0..4 {
            v.owners.get_mut(&("t".to_string(), p)).unwrap().owner.to = Some(1);
        }
        let plan = plan_assignments(&v, true, 8, &all(&v));
        let mut keys: Vec<_> = plan.iter().map(|(t, p, _)| (t.clone(), *p)).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(
            keys.len(),
            plan.len(),
            "a partition planned twice: {plan:?}"
        );
    }
}

//! The share-group driver (KIP-932): runs the pure state machines of `sluice-share` against
//! this broker's logs, a timer task and share sessions.
//!
//! Three roles, as Kafka splits them:
//! - **Membership** (ShareGroupHeartbeat) lives at the group's coordinator, the owner of its
//!   `__consumer_offsets` partition, in memory: a member that finds the coordinator moved
//!   joins again (UNKNOWN_MEMBER_ID), and the assignment is computed anew from the members.
//! - **Share partitions** (ShareFetch, ShareAcknowledge) live at the topic partition's owner:
//!   the delivery state of the records of one partition as one group consumes it. Loaded on
//!   first use from the durable state, kept while this broker holds the same log.
//! - **Durable state** lives in `__share_group_state` (Kafka's record format, so Kafka's tools
//!   read it): one `ShareSnapshot` record per change of a share partition, written before the
//!   change is answered (an acknowledgement, a release, a lock expiry that counted a delivery,
//!   the start offset chosen on first use). Acquisitions are not written, as on Kafka: after a
//!   crash a record that was acquired is available again with its delivery count as last
//!   written. The topic is compacted; the newest snapshot of each key is the state.
//!
//! On one broker this broker holds every role. In a cluster a share partition's owner reads
//! and writes its state at the owner of its `__share_group_state` partition: here, or by
//! ReadShareGroupState / WriteShareGroupState (`apis/share_state.rs`). Each read and write
//! carries the topic partition's leader epoch (this broker's ownership epoch of it): one older
//! than the last seen is refused, so a broker that lost the partition writes nothing over its
//! new owner's state; a newer read is written, so the fence holds across restarts. A share
//! partition whose state cannot be read yet (its state partition is being acquired) acquires
//! nothing until it can. An acknowledgement whose write fails is answered with the error (it
//! stays applied in memory and is written with the next change).
//!
//! A share partition is loaded for one log incarnation ([`ShareCell`]). When this broker
//! loads it again for another (the log failed and was re-opened, or the partition came back)
//! the old cell is retired: it acquires, acknowledges and writes nothing more, so two cells
//! never hand out the same records or write over each other. If nothing wrote the state since
//! the old cell's last write, the new cell starts from the old one's state in memory, its
//! acquisitions included, instead of from the snapshot (where they are available).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;
use sluice_share::group::{GroupLimits, ShareGroups};
use sluice_share::records::{self, ShareKey, ShareValue};
use sluice_share::{Limits, SharePartition, Snapshot};
use sluice_store::{AppendOrigin, Log};
use uuid::Uuid;

use crate::groups::for_each_batch;
use crate::{now_ms, Broker};

/// The internal topic holding share partitions' durable state.
pub const SHARE_STATE_TOPIC: &str = "__share_group_state";
/// How often lock deadlines and member sessions are checked.
const TICK_INTERVAL: Duration = Duration::from_millis(100);

/// Why a share partition's state could not be read or written.
#[derive(Debug, Clone)]
pub(crate) enum StateError {
    /// Its `__share_group_state` partition is not loaded here (COORDINATOR_NOT_AVAILABLE).
    NotLoaded(String),
    /// The append or its fsync failed (a retriable storage error).
    Storage(String),
    /// A later owner of the topic partition read or wrote the state (FENCED_LEADER_EPOCH):
    /// this broker no longer leads the share partition.
    Fenced(String),
}

impl std::fmt::Display for StateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StateError::NotLoaded(m) | StateError::Storage(m) | StateError::Fenced(m) => {
                f.write_str(m)
            }
        }
    }
}

/// A share partition's stored state as DescribeShareGroupOffsets reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Summary {
    pub(crate) start: i64,
    pub(crate) leader_epoch: i32,
    /// Records from the start on that are acknowledged or archived.
    pub(crate) complete: i64,
}

/// What `__share_group_state` holds for one share partition. A deleted state is kept as a
/// state with start offset -1 (Kafka's "not initialized") and nothing in flight, under a new
/// state epoch: a share partition loaded before the deletion writes nothing over it, also
/// after the state partition is loaded again (a tombstone would forget the epochs).
#[derive(Clone, Debug)]
struct Stored {
    snapshot: Snapshot,
    state_epoch: i32,
    /// The leader epoch of the topic partition's owner that last read or wrote it: an owner
    /// with an older one is fenced.
    leader_epoch: i32,
    snapshot_epoch: i32,
    create_ms: i64,
}

/// The start offset of a deleted state.
const DELETED_START: i64 = -1;

impl Stored {
    fn is_deleted(&self) -> bool {
        self.snapshot.start < 0
    }
}

/// The `__share_group_state` partitions loaded here and the newest state of every key.
#[derive(Debug, Default)]
struct StateStore {
    logs: HashMap<i32, Arc<Log>>,
    latest: HashMap<ShareKey, (i32, Stored)>,
}

/// A share partition's state as read for its owner: what is stored (None: nothing) and its
/// state epoch (for nothing stored, the epoch a new state starts at).
pub(crate) type ReadState = (Option<Snapshot>, i32);

/// One share partition led here.
#[derive(Debug)]
pub(crate) struct ShareCell {
    pub(crate) key: ShareKey,
    state: Mutex<SpState>,
    /// Serialises writes of this partition's state, so they land in the order they were
    /// taken.
    writer: tokio::sync::Mutex<()>,
}

#[derive(Debug)]
struct SpState {
    part: SharePartition,
    /// The log incarnation the state was loaded for.
    log: Arc<Log>,
    /// Changes made, and how many of them are durable.
    changes: u64,
    persisted: u64,
    state_epoch: i32,
    /// The state this cell loaded or last wrote (durably).
    last_written: Option<Snapshot>,
    /// Replaced by a cell for another log incarnation: nothing more is done with this one.
    retired: bool,
    /// To be loaded again before its next use (the group has no share session here any
    /// more, or a write was fenced): the stored state may have been reset or deleted since.
    /// Until then it still releases and writes what its members leave behind.
    stale: bool,
}

/// A share session (ShareFetch/ShareAcknowledge `ShareSessionEpoch`): the partitions a member
/// fetches from this broker, the epoch its next request must carry, and the connection it was
/// opened on ([`ConnSessions::id`]).
#[derive(Debug, Clone)]
pub(crate) struct ShareSession {
    pub(crate) epoch: i32,
    pub(crate) partitions: BTreeSet<(Uuid, i32)>,
    conn: usize,
}

/// The share sessions opened over one connection. When the connection closes (this is
/// dropped) they are closed and the records their members hold here released, as Kafka
/// releases them when a share session's connection closes: a consumer that dies gets its
/// records delivered to the others at once, not at its locks' expiry.
#[derive(Debug, Default)]
pub struct ConnSessions {
    broker: std::sync::OnceLock<Weak<Broker>>,
    opened: Mutex<BTreeSet<(String, String)>>,
}

impl ConnSessions {
    /// This connection's identity while it is open.
    fn id(&self) -> usize {
        self as *const ConnSessions as usize
    }

    fn opened(&self, broker: &Arc<Broker>, group: &str, member: &str) {
        let _ = self.broker.set(Arc::downgrade(broker));
        self.opened
            .lock()
            .insert((group.to_string(), member.to_string()));
    }
}

impl Drop for ConnSessions {
    fn drop(&mut self) {
        let opened = std::mem::take(self.opened.get_mut());
        if opened.is_empty() {
            return;
        }
        let Some(broker) = self.broker.get().and_then(Weak::upgrade) else {
            return;
        };
        let id = self.id();
        let closed: Vec<(String, String)> = opened
            .into_iter()
            .filter(|(g, m)| broker.shares.close_session_on(g, m, id))
            .collect();
        if closed.is_empty() {
            return;
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                for (group, member) in closed {
                    broker.release_member(&group, &member).await;
                }
            });
        }
    }
}

#[derive(Debug)]
pub(crate) struct Shares {
    groups: Mutex<ShareGroups>,
    parts: Mutex<HashMap<ShareKey, Arc<ShareCell>>>,
    sessions: Mutex<HashMap<(String, String), ShareSession>>,
    store: Mutex<StateStore>,
    state_partitions: i32,
    max_sessions: usize,
    limits: Limits,
    /// Serialises creation of `__share_group_state`.
    create_lock: Mutex<()>,
    /// Serialises loads of share partitions (rare: once per partition and log incarnation),
    /// so that two loads of one never both write their first state.
    load_lock: tokio::sync::Mutex<()>,
}

pub(crate) fn share_limits(c: &sluice_config::BrokerConfig) -> Limits {
    let s = &c.groups.share;
    Limits {
        lock_ms: i64::from(s.record_lock_duration_ms),
        delivery_limit: u16::try_from(s.delivery_count_limit).unwrap_or(u16::MAX),
        max_in_flight: i64::from(s.partition_max_record_locks),
    }
}

pub(crate) fn key_of(group: &str, topic_id: Uuid, partition: i32) -> ShareKey {
    ShareKey {
        group_id: group.to_string(),
        topic_id: *topic_id.as_bytes(),
        partition,
    }
}

/// Kafka's base64 form of a topic id (url-safe, no padding), which places a key.
fn topic_id_base64(id: &[u8; 16]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::with_capacity(22);
    for chunk in id.chunks(3) {
        let b = [
            chunk[0],
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let chars = chunk.len() + 1;
        for i in 0..chars {
            out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

impl Shares {
    pub(crate) fn new(config: &sluice_config::BrokerConfig) -> Shares {
        let s = &config.groups.share;
        Shares {
            groups: Mutex::new(ShareGroups::new(GroupLimits {
                max_size: usize::try_from(s.max_size).unwrap_or(usize::MAX),
                session_timeout_ms: i64::from(s.session_timeout_ms),
                heartbeat_interval_ms: s.heartbeat_interval_ms,
            })),
            parts: Mutex::new(HashMap::new()),
            sessions: Mutex::new(HashMap::new()),
            store: Mutex::new(StateStore::default()),
            state_partitions: s.state_topic_num_partitions.max(1),
            max_sessions: usize::try_from(s.max_share_sessions).unwrap_or(usize::MAX),
            limits: share_limits(config),
            create_lock: Mutex::new(()),
            load_lock: tokio::sync::Mutex::new(()),
        }
    }

    pub(crate) fn limits(&self) -> Limits {
        self.limits
    }

    pub(crate) fn state_partition_count(&self) -> i32 {
        self.state_partitions
    }

    /// The `__share_group_state` partition holding `key`.
    pub(crate) fn state_partition(key: &ShareKey, partitions: i32) -> i32 {
        records::state_partition(key, &topic_id_base64(&key.topic_id), partitions)
    }

    // ---- membership ----

    pub(crate) fn groups<T>(&self, f: impl FnOnce(&mut ShareGroups) -> T) -> T {
        f(&mut self.groups.lock())
    }

    /// Forget the groups coordinated from `__consumer_offsets` partition `offsets_partition`
    /// (it moved away): their members join again at the new coordinator.
    pub(crate) fn unload_groups(&self, is_theirs: impl Fn(&str) -> bool) {
        let ids: Vec<String> = self.groups.lock().group_ids().cloned().collect();
        let theirs: Vec<String> = ids.into_iter().filter(|id| is_theirs(id)).collect();
        let mut g = self.groups.lock();
        for id in theirs {
            g.forget(&id);
        }
    }

    // ---- sessions ----

    /// Open a session for `(group, member)` with `partitions`, replacing any it had. None when
    /// the broker holds its most sessions already. Returns the partitions of the replaced
    /// session (whose records the member held are released by the caller).
    pub(crate) fn open_session(
        &self,
        broker: &Arc<Broker>,
        conn: &ConnSessions,
        group: &str,
        member: &str,
        partitions: BTreeSet<(Uuid, i32)>,
    ) -> Option<Option<ShareSession>> {
        conn.opened(broker, group, member);
        let mut s = self.sessions.lock();
        let k = (group.to_string(), member.to_string());
        if !s.contains_key(&k) && s.len() >= self.max_sessions {
            return None;
        }
        Some(s.insert(
            k,
            ShareSession {
                epoch: 1,
                partitions,
                conn: conn.id(),
            },
        ))
    }

    /// Continue `(group, member)`'s session at `epoch`: its partitions after `add` and
    /// `forget`, and the epoch moves on. Err(code) when there is no session or the epoch is
    /// not the one expected.
    pub(crate) fn continue_session(
        &self,
        group: &str,
        member: &str,
        epoch: i32,
        add: &[(Uuid, i32)],
        forget: &[(Uuid, i32)],
    ) -> Result<ShareSession, i16> {
        use kafka_protocol::ResponseError;
        let mut s = self.sessions.lock();
        let Some(session) = s.get_mut(&(group.to_string(), member.to_string())) else {
            return Err(ResponseError::ShareSessionNotFound.code());
        };
        if session.epoch != epoch {
            return Err(ResponseError::InvalidShareSessionEpoch.code());
        }
        for p in forget {
            session.partitions.remove(p);
        }
        session.partitions.extend(add.iter().copied());
        session.epoch = if epoch == i32::MAX { 1 } else { epoch + 1 };
        Ok(session.clone())
    }

    /// Close the sessions of members that left `group` (or whose session expired).
    pub(crate) fn close_sessions_of(&self, group: &str, members: &[String]) {
        {
            let mut s = self.sessions.lock();
            for m in members {
                s.remove(&(group.to_string(), m.clone()));
            }
        }
        self.after_close(group);
    }

    /// Close `(group, member)`'s session if it was opened on connection `conn`; whether it
    /// was.
    fn close_session_on(&self, group: &str, member: &str, conn: usize) -> bool {
        let closed = {
            let mut s = self.sessions.lock();
            let k = (group.to_string(), member.to_string());
            s.get(&k).is_some_and(|session| session.conn == conn) && s.remove(&k).is_some()
        };
        if closed {
            self.after_close(group);
        }
        closed
    }

    /// Close `(group, member)`'s session; its partitions, if it had one.
    pub(crate) fn close_session(&self, group: &str, member: &str) -> Option<ShareSession> {
        let closed = self
            .sessions
            .lock()
            .remove(&(group.to_string(), member.to_string()));
        self.after_close(group);
        closed
    }

    /// A session of `group` closed: when it was the group's last here, its share partitions
    /// are loaded again before their next use (as Kafka drops them when a group has no
    /// session left on a broker), so that a reset or deletion of their state made while
    /// the group is empty takes effect. Until then they still release and write what the
    /// members left behind; a load finding the state they last wrote carries them over.
    fn after_close(&self, group: &str) {
        let open = self.sessions.lock().keys().any(|(g, _)| g == group);
        if !open {
            for cell in self.cells_of(group) {
                Shares::mark_stale(&cell);
            }
        }
    }

    // ---- share partitions ----

    /// The share partition `key` for `log` (this broker's log of its topic partition), loaded
    /// from its durable state or, on its first use by the group, started at the log's end
    /// (`share.auto.offset.reset=latest`, Kafka's default) or start (`earliest`) and that
    /// start written. A state loaded for another incarnation of the log is loaded again.
    /// `settings` gives, when it is loaded, where the group starts on a partition it never read
    /// and its lock duration (its group configs).
    pub(crate) async fn partition(
        self: &Arc<Self>,
        broker: &Arc<Broker>,
        key: &ShareKey,
        log: &Arc<Log>,
        settings: impl FnOnce() -> (crate::group_configs::ShareStart, i64),
    ) -> Result<Arc<ShareCell>, StateError> {
        let found = |parts: &HashMap<ShareKey, Arc<ShareCell>>| {
            parts.get(key).filter(|c| c.is_current_for(log)).cloned()
        };
        if let Some(cell) = found(&self.parts.lock()) {
            return Ok(cell);
        }
        let _loading = self.load_lock.lock().await;
        let old = self.parts.lock().get(key).cloned();
        if let Some(cell) = old.as_ref().filter(|c| c.is_current_for(log)) {
            return Ok(cell.clone());
        }
        let (stored, stored_epoch) = broker.read_share_state(key, log.leader_epoch()).await?;
        let (start_at, lock_ms) = settings();
        let limits = Limits {
            lock_ms,
            ..self.limits
        };
        // The cell of an earlier incarnation, retired now; its state in memory is the newest
        // when nothing wrote the state since its last write.
        let carried = old.and_then(|c| {
            let mut s = c.state.lock();
            s.retired = true;
            let current = stored.is_some()
                && stored.as_ref() == s.last_written.as_ref()
                && stored_epoch == s.state_epoch;
            current.then(|| (s.part.clone(), s.state_epoch))
        });
        let loaded = stored.clone();
        let (part, fresh, state_epoch) = match (carried, stored) {
            (Some((mut part, state_epoch)), _) => {
                part.set_limits(limits);
                part.log_start_moved(log.log_start_offset());
                (part, true, state_epoch)
            }
            (None, Some(snapshot)) => {
                let mut part = SharePartition::from_snapshot(limits, &snapshot);
                part.log_start_moved(log.log_start_offset());
                (part, false, stored_epoch)
            }
            (None, None) => {
                use crate::group_configs::ShareStart;
                let start = match start_at {
                    ShareStart::Earliest => log.log_start_offset(),
                    ShareStart::Latest => log.high_watermark(),
                    // The first record no older than the duration, or the end.
                    ShareStart::ByDuration(ms) => log
                        .offset_for_timestamp(crate::now_ms().saturating_sub(ms))
                        .map_err(|e| StateError::Storage(e.to_string()))?
                        .map_or_else(|| log.high_watermark(), |(offset, _)| offset)
                        .clamp(log.log_start_offset(), log.high_watermark()),
                };
                (SharePartition::new(limits, start), true, stored_epoch)
            }
        };
        let cell = Arc::new(ShareCell {
            key: key.clone(),
            state: Mutex::new(SpState {
                part,
                log: log.clone(),
                changes: u64::from(fresh),
                persisted: 0,
                state_epoch,
                last_written: loaded,
                retired: false,
                stale: false,
            }),
            writer: tokio::sync::Mutex::new(()),
        });
        // Written before it is used: its first write fences the earlier owners (a state
        // never stored has no fence until then), and a cell whose write failed is not kept.
        self.persist(broker, &cell).await?;
        let cell = {
            let mut parts = self.parts.lock();
            if !broker.is_current_log(key, log) {
                // The log changed while this one was loaded: a later request loads it for the
                // new one (and retires what it finds).
                return Err(StateError::NotLoaded(
                    "the partition's log changed while its share state was loaded".into(),
                ));
            }
            match parts.get(key) {
                // Another request loaded it for the same log meanwhile: that one is used.
                Some(c) if c.is_current_for(log) => c.clone(),
                _ => {
                    parts.insert(key.clone(), cell.clone());
                    cell
                }
            }
        };
        Ok(cell)
    }

    /// Run `f` on a share partition's state; when it returns true (it changed what is
    /// durable), the change is counted for [`Shares::persist`]. None when the cell was
    /// retired (another incarnation's cell took over): `f` is not run.
    pub(crate) fn with<T>(
        &self,
        cell: &ShareCell,
        f: impl FnOnce(&mut SharePartition) -> (T, bool),
    ) -> Option<T> {
        let mut s = cell.state.lock();
        if s.retired {
            return None;
        }
        let (value, changed) = f(&mut s.part);
        if changed {
            s.changes += 1;
        }
        Some(value)
    }

    /// Load `cell` again before its next use (its stored state was reset or deleted, or its
    /// group has no session here any more).
    pub(crate) fn mark_stale(cell: &ShareCell) {
        cell.state.lock().stale = true;
    }

    /// The log the share partition was loaded for.
    pub(crate) fn log_of(cell: &ShareCell) -> Arc<Log> {
        cell.state.lock().log.clone()
    }

    /// Make every change counted so far durable: one snapshot record of the state as it is
    /// now, appended to its `__share_group_state` partition and fsynced. Concurrent callers
    /// share one write when they can.
    pub(crate) async fn persist(
        &self,
        broker: &Arc<Broker>,
        cell: &ShareCell,
    ) -> Result<(), StateError> {
        let wanted = cell.state.lock().changes;
        let _writer = cell.writer.lock().await;
        let (snapshot, version, leader_epoch, state_epoch) = {
            let s = cell.state.lock();
            if s.retired {
                return Err(retired());
            }
            if s.persisted >= wanted {
                return Ok(());
            }
            (
                s.part.snapshot(),
                s.changes,
                s.log.leader_epoch(),
                s.state_epoch,
            )
        };
        let written = broker
            .write_share_state(cell, &snapshot, state_epoch, leader_epoch)
            .await;
        let mut s = cell.state.lock();
        if let Err(e) = written {
            if matches!(e, StateError::Fenced(_)) {
                // A later owner, or a reset or deletion of the state: loaded again before
                // its next use.
                s.stale = true;
            }
            return Err(e);
        }
        s.persisted = s.persisted.max(version);
        s.last_written = Some(snapshot);
        Ok(())
    }

    /// Every share partition led here (for timers and releases).
    pub(crate) fn cells(&self) -> Vec<Arc<ShareCell>> {
        self.parts.lock().values().cloned().collect()
    }

    /// The share partitions of `group` led here.
    pub(crate) fn cells_of(&self, group: &str) -> Vec<Arc<ShareCell>> {
        self.parts
            .lock()
            .values()
            .filter(|c| c.key.group_id == group)
            .cloned()
            .collect()
    }

    /// The share partition `key` if it is loaded here.
    pub(crate) fn cell(&self, key: &ShareKey) -> Option<Arc<ShareCell>> {
        self.parts.lock().get(key).cloned()
    }

    /// Forget (retire) the share partitions whose topic partition is gone (`exists` false:
    /// the topic was deleted). Those whose log failed or moved away are kept: loaded again for
    /// another log, their state in memory is carried over when nothing wrote it meanwhile.
    pub(crate) fn drop_stale(&self, exists: impl Fn(&ShareKey) -> bool) {
        self.parts.lock().retain(|k, c| {
            let keep = exists(k);
            if !keep {
                c.state.lock().retired = true;
            }
            keep
        });
    }

    // ---- durable state ----

    /// Load (acquire) a `__share_group_state` partition: the newest snapshot of every key.
    pub(crate) fn load_state(&self, partition: i32, log: Arc<Log>) {
        let mut found: HashMap<ShareKey, Option<Stored>> = HashMap::new();
        let mut bad = 0usize;
        for_each_batch(&log, log.log_start_offset(), |h, batch| {
            if h.is_control() {
                return;
            }
            let Ok(kvs) = sluice_group::records::batch_records(batch) else {
                bad += 1;
                return;
            };
            for (k, v) in kvs {
                let Some(k) = k else { continue };
                let Ok((record_type, key)) = records::decode_key(&k) else {
                    bad += 1;
                    continue;
                };
                let Some(v) = v else {
                    found.insert(key, None);
                    continue;
                };
                match records::decode_value(record_type, &v) {
                    Ok(ShareValue::Snapshot {
                        snapshot_epoch,
                        state_epoch,
                        leader_epoch,
                        start_offset,
                        create_timestamp,
                        batches,
                        ..
                    }) => {
                        found.insert(
                            key,
                            Some(Stored {
                                snapshot: Snapshot {
                                    start: start_offset,
                                    batches,
                                },
                                state_epoch,
                                leader_epoch,
                                snapshot_epoch,
                                create_ms: create_timestamp,
                            }),
                        );
                    }
                    // Sluice writes snapshots only; an update would come from elsewhere.
                    Ok(ShareValue::Update { .. }) | Err(_) => bad += 1,
                }
            }
        });
        let mut store = self.store.lock();
        store.latest.retain(|_, (p, _)| *p != partition);
        let n = found.len();
        for (k, v) in found {
            if let Some(v) = v {
                store.latest.insert(k, (partition, v));
            }
        }
        store.logs.insert(partition, log);
        if bad > 0 {
            tracing::warn!(
                partition,
                bad,
                "skipped __share_group_state records Sluice does not read"
            );
        }
        tracing::debug!(partition, keys = n, "loaded __share_group_state partition");
    }

    /// Release (unload) a `__share_group_state` partition.
    pub(crate) fn unload_state(&self, partition: i32) {
        let mut store = self.store.lock();
        store.logs.remove(&partition);
        store.latest.retain(|_, (p, _)| *p != partition);
    }

    pub(crate) fn loaded_count(&self) -> usize {
        self.store.lock().logs.len()
    }

    pub(crate) fn state_loaded(&self, partition: i32) -> bool {
        self.store.lock().logs.contains_key(&partition)
    }

    fn state_log(&self, store: &StateStore, p: i32) -> Result<Arc<Log>, StateError> {
        match store.logs.get(&p) {
            Some(log) if log.writable() && log.failure().is_none() => Ok(log.clone()),
            _ => Err(StateError::NotLoaded(format!(
                "{SHARE_STATE_TOPIC}-{p} is not loaded on this broker"
            ))),
        }
    }

    /// The stored state of `key` (None: never written, or deleted) and its state epoch (for a
    /// deleted one, the epoch a new state starts at), for
    /// the owner of its topic partition at `leader_epoch`: refused (fenced) when a later owner
    /// read or wrote it; a later owner than the last fences the earlier ones, which is written
    /// (the log returned, to wait for before answering) so that it holds across a restart.
    pub(crate) fn read_local(
        &self,
        key: &ShareKey,
        p: i32,
        leader_epoch: i32,
    ) -> Result<(ReadState, Option<Arc<Log>>), StateError> {
        let mut store = self.store.lock();
        let log = self.state_log(&store, p)?;
        let Some((_, stored)) = store.latest.get(key).cloned() else {
            return Ok(((None, 0), None));
        };
        fence(&stored, leader_epoch)?;
        let snapshot = (!stored.is_deleted()).then(|| stored.snapshot.clone());
        let found = (snapshot, stored.state_epoch);
        if leader_epoch == stored.leader_epoch {
            return Ok((found, None));
        }
        let next = Stored {
            leader_epoch,
            snapshot_epoch: stored.snapshot_epoch + 1,
            ..stored
        };
        append_state(&mut store, &log, p, key, next)?;
        Ok((found, Some(log)))
    }

    /// What `kafka-share-groups --describe` shows of `key`'s stored state, without fencing
    /// anyone: its start offset, the leader epoch that last read or wrote it, and how many
    /// records from the start on are done with (acknowledged or archived). None: nothing
    /// stored.
    pub(crate) fn summary_local(
        &self,
        key: &ShareKey,
        p: i32,
    ) -> Result<Option<Summary>, StateError> {
        let store = self.store.lock();
        self.state_log(&store, p)?;
        Ok(store
            .latest
            .get(key)
            .filter(|(_, s)| !s.is_deleted())
            .map(|(_, s)| Summary {
                start: s.snapshot.start,
                leader_epoch: s.leader_epoch,
                complete: s
                    .snapshot
                    .batches
                    .iter()
                    .filter(|b| b.state == 2 || b.state == 4)
                    .map(|b| b.last - b.first.max(s.snapshot.start) + 1)
                    .filter(|n| *n > 0)
                    .sum(),
            }))
    }

    /// Append `snapshot` as `key`'s state, written by the owner of its topic partition at
    /// `leader_epoch` (refused when a later owner read or wrote it); the log to wait for.
    /// `current` is asked under the store's lock: a writer that is no longer current (a
    /// retired cell) writes nothing, so its write never lands after its successor's.
    pub(crate) fn write_local(
        &self,
        key: &ShareKey,
        p: i32,
        snapshot: &Snapshot,
        state_epoch: i32,
        leader_epoch: i32,
        current: impl FnOnce() -> bool,
    ) -> Result<Arc<Log>, StateError> {
        let mut store = self.store.lock();
        if !current() {
            return Err(retired());
        }
        let log = self.state_log(&store, p)?;
        let previous = store.latest.get(key).map(|(_, s)| s.clone());
        if let Some(previous) = &previous {
            fence(previous, leader_epoch)?;
            if state_epoch < previous.state_epoch {
                return Err(StateError::Fenced(format!(
                    "the share state was reset or deleted (state epoch {}, written at \
                     {state_epoch})",
                    previous.state_epoch
                )));
            }
        }
        let next = Stored {
            snapshot: snapshot.clone(),
            state_epoch,
            leader_epoch,
            snapshot_epoch: previous.as_ref().map_or(0, |s| s.snapshot_epoch + 1),
            create_ms: previous.as_ref().map_or_else(now_ms, |s| s.create_ms),
        };
        append_state(&mut store, &log, p, key, next)?;
        Ok(log)
    }

    /// Make `key`'s state start at `start` with nothing in flight (AlterShareGroupOffsets):
    /// a new state epoch, so that a share partition loaded before writes nothing over it and
    /// is loaded again. The leader epoch stays, fencing the owners it fenced. The log to
    /// wait for.
    pub(crate) fn initialize_local(
        &self,
        key: &ShareKey,
        p: i32,
        start: i64,
    ) -> Result<Arc<Log>, StateError> {
        let mut store = self.store.lock();
        let log = self.state_log(&store, p)?;
        let previous = store.latest.get(key).map(|(_, s)| s.clone());
        let next = reset_to(previous.as_ref(), start);
        append_state(&mut store, &log, p, key, next)?;
        Ok(log)
    }

    /// Delete `key`'s state (DeleteShareGroupOffsets, DeleteGroups): kept as a deleted state
    /// ([`Stored`]) under a new state epoch, so a share partition loaded before writes
    /// nothing over the deletion. None when nothing was stored; else the log to wait for.
    pub(crate) fn delete_local(
        &self,
        key: &ShareKey,
        p: i32,
    ) -> Result<Option<Arc<Log>>, StateError> {
        let mut store = self.store.lock();
        let log = self.state_log(&store, p)?;
        let Some((_, previous)) = store
            .latest
            .get(key)
            .cloned()
            .filter(|(_, s)| !s.is_deleted())
        else {
            return Ok(None);
        };
        let next = reset_to(Some(&previous), DELETED_START);
        append_state(&mut store, &log, p, key, next)?;
        Ok(Some(log))
    }

    /// The groups with state stored in the partitions loaded here.
    pub(crate) fn stored_groups(&self) -> BTreeSet<String> {
        self.store
            .lock()
            .latest
            .iter()
            .filter(|(_, (_, s))| !s.is_deleted())
            .map(|(k, _)| k.group_id.clone())
            .collect()
    }

    /// The stored start offset of every share partition of `group` held here.
    pub(crate) fn stored_starts(&self, group: &str) -> Vec<(ShareKey, i64)> {
        self.store
            .lock()
            .latest
            .iter()
            .filter(|(k, (_, s))| k.group_id == group && !s.is_deleted())
            .map(|(k, (_, s))| (k.clone(), s.snapshot.start))
            .collect()
    }
}

/// A state starting at `start` with nothing in flight (deleted: `DELETED_START`) that
/// replaces `previous` under the next state epoch, keeping its leader epoch (the owners it
/// fenced stay fenced).
fn reset_to(previous: Option<&Stored>, start: i64) -> Stored {
    Stored {
        snapshot: Snapshot {
            start,
            batches: Vec::new(),
        },
        state_epoch: previous.map_or(0, |s| s.state_epoch.saturating_add(1)),
        leader_epoch: previous.map_or(-1, |s| s.leader_epoch),
        snapshot_epoch: previous.map_or(0, |s| s.snapshot_epoch + 1),
        create_ms: now_ms(),
    }
}

fn retired() -> StateError {
    StateError::NotLoaded(
        "the share partition was loaded again for another incarnation of its log".into(),
    )
}

/// Refuse an owner of the topic partition older than the one that last read or wrote
/// `stored`.
fn fence(stored: &Stored, leader_epoch: i32) -> Result<(), StateError> {
    if leader_epoch < stored.leader_epoch {
        return Err(StateError::Fenced(format!(
            "the share state was read or written at leader epoch {}, after {leader_epoch}",
            stored.leader_epoch
        )));
    }
    Ok(())
}

/// Append `stored` as `key`'s snapshot record to `log` (partition `p`) and make it the newest.
fn append_state(
    store: &mut StateStore,
    log: &Log,
    p: i32,
    key: &ShareKey,
    stored: Stored,
) -> Result<(), StateError> {
    let now = now_ms();
    let value = ShareValue::Snapshot {
        snapshot_epoch: stored.snapshot_epoch,
        state_epoch: stored.state_epoch,
        leader_epoch: stored.leader_epoch,
        start_offset: stored.snapshot.start,
        delivery_complete_count: -1,
        create_timestamp: stored.create_ms,
        write_timestamp: now,
        batches: stored.snapshot.batches.clone(),
    };
    let (k, v) = records::encode(key, &value);
    let batch = sluice_format::BatchBuilder::new()
        .record(now, Some(&k), Some(&v))
        .build();
    log.append(Bytes::from(batch), AppendOrigin::Client, now)
        .map_err(|e| {
            StateError::Storage(format!("appending to {SHARE_STATE_TOPIC}-{p} failed: {e}"))
        })?;
    store.latest.insert(key.clone(), (p, stored));
    Ok(())
}

impl ShareCell {
    fn is_retired(&self) -> bool {
        self.state.lock().retired
    }

    /// Loaded for `log` and usable as it is (not to be loaded again).
    fn is_current_for(&self, log: &Arc<Log>) -> bool {
        let s = self.state.lock();
        Arc::ptr_eq(&s.log, log) && !s.stale
    }
}

impl Broker {
    /// The `__share_group_state` partition holding `key`, by the topic's partition count
    /// (the configured count before it exists).
    pub(crate) fn share_state_partition(&self, key: &ShareKey) -> i32 {
        let n = self
            .meta
            .topic(SHARE_STATE_TOPIC)
            .map_or(self.shares.state_partition_count(), |t| t.partitions());
        Shares::state_partition(key, n)
    }

    /// The broker owning `__share_group_state` partition `p` (this one on a single broker).
    fn share_state_owner(&self, p: i32) -> Option<i32> {
        if self.cluster.is_none() {
            return Some(self.node_id);
        }
        let t = self.meta.topic(SHARE_STATE_TOPIC)?;
        t.owners.get(p as usize).copied().filter(|o| *o >= 0)
    }

    /// `key`'s stored state and state epoch, read where its `__share_group_state` partition
    /// is owned, by the owner of its topic partition at `leader_epoch`.
    pub(crate) async fn read_share_state(
        &self,
        key: &ShareKey,
        leader_epoch: i32,
    ) -> Result<ReadState, StateError> {
        let p = self.share_state_partition(key);
        match self.share_state_owner(p) {
            None => Err(StateError::NotLoaded(format!(
                "{SHARE_STATE_TOPIC}-{p} has no owner"
            ))),
            Some(node) if node == self.node_id => {
                let (found, written) = self.shares.read_local(key, p, leader_epoch)?;

                if let Some(log) = written {
                    self.flush_logs(vec![log]).await.map_err(|e| {
                        StateError::Storage(format!("writing share state failed: {e}"))
                    })?;
                }
                Ok(found)
            }
            Some(node) => {
                crate::apis::share_state::read_remote(self, node, key, leader_epoch).await
            }
        }
    }

    /// Reset `key`'s state to start at `start`, where its `__share_group_state` partition is
    /// owned; done once fsynced there.
    pub(crate) async fn initialize_share_state(
        &self,
        key: &ShareKey,
        start: i64,
    ) -> Result<(), StateError> {
        let p = self.share_state_partition(key);
        match self.share_state_owner(p) {
            None => Err(StateError::NotLoaded(format!(
                "{SHARE_STATE_TOPIC}-{p} has no owner"
            ))),
            Some(node) if node == self.node_id => {
                let log = self.shares.initialize_local(key, p, start)?;
                self.flush_logs(vec![log])
                    .await
                    .map_err(|e| StateError::Storage(format!("writing share state failed: {e}")))
            }
            Some(node) => crate::apis::share_state::initialize_remote(self, node, key, start).await,
        }
    }

    /// Delete the stored state of `keys` (of one group), where their `__share_group_state`
    /// partitions are owned (one request per owner; a key with nothing stored is no
    /// error); each key's outcome, done once fsynced.
    pub(crate) async fn delete_share_states(
        &self,
        keys: &[ShareKey],
    ) -> Vec<(ShareKey, Result<(), StateError>)> {
        let mut by_owner: BTreeMap<Option<i32>, Vec<(ShareKey, i32)>> = BTreeMap::new();
        for key in keys {
            let p = self.share_state_partition(key);
            by_owner
                .entry(self.share_state_owner(p))
                .or_default()
                .push((key.clone(), p));
        }
        let mut out = Vec::with_capacity(keys.len());
        for (owner, keys) in by_owner {
            match owner {
                None => out.extend(keys.into_iter().map(|(k, p)| {
                    let e = StateError::NotLoaded(format!("{SHARE_STATE_TOPIC}-{p} has no owner"));
                    (k, Err(e))
                })),
                Some(node) if node == self.node_id => {
                    let mut logs = Vec::new();
                    let mut done = Vec::new();
                    for (k, p) in keys {
                        let r = self.shares.delete_local(&k, p);
                        if let Ok(Some(log)) = &r {
                            logs.push(log.clone());
                        }
                        done.push((k, r.map(|l| l.is_some())));
                    }
                    let flushed = self.flush_logs(logs).await;
                    out.extend(done.into_iter().map(|(k, r)| match (&flushed, r) {
                        (Err(e), Ok(true)) => (
                            k,
                            Err(StateError::Storage(format!(
                                "deleting share state failed: {e}"
                            ))),
                        ),
                        (_, r) => (k, r.map(|_| ())),
                    }));
                }
                Some(node) => {
                    let keys: Vec<ShareKey> = keys.into_iter().map(|(k, _)| k).collect();
                    out.extend(crate::apis::share_state::delete_remote(self, node, &keys).await);
                }
            }
        }
        out
    }

    /// `key`'s stored state summary, where its `__share_group_state` partition is owned.
    pub(crate) async fn share_state_summary(
        &self,
        key: &ShareKey,
    ) -> Result<Option<Summary>, StateError> {
        let p = self.share_state_partition(key);
        match self.share_state_owner(p) {
            None => Err(StateError::NotLoaded(format!(
                "{SHARE_STATE_TOPIC}-{p} has no owner"
            ))),
            Some(node) if node == self.node_id => self.shares.summary_local(key, p),
            Some(node) => crate::apis::share_state::summary_remote(self, node, key).await,
        }
    }

    /// Write `cell`'s state where its `__share_group_state` partition is owned; done once
    /// fsynced there. A retired cell writes nothing.
    pub(crate) async fn write_share_state(
        &self,
        cell: &ShareCell,
        snapshot: &Snapshot,
        state_epoch: i32,
        leader_epoch: i32,
    ) -> Result<(), StateError> {
        let key = &cell.key;
        let p = self.share_state_partition(key);
        match self.share_state_owner(p) {
            None => Err(StateError::NotLoaded(format!(
                "{SHARE_STATE_TOPIC}-{p} has no owner"
            ))),
            Some(node) if node == self.node_id => {
                let log =
                    self.shares
                        .write_local(key, p, snapshot, state_epoch, leader_epoch, || {
                            !cell.is_retired()
                        })?;
                if sluice_store::mutation::active(
                    sluice_store::mutation::Mutation::UnsyncedShareState,
                ) {
                    return Ok(());
                }
                self.flush_logs(vec![log])
                    .await
                    .map_err(|e| StateError::Storage(format!("writing share state failed: {e}")))
            }
            Some(node) => {
                if cell.is_retired() {
                    return Err(retired());
                }
                crate::apis::share_state::write_remote(
                    self,
                    node,
                    key,
                    snapshot,
                    state_epoch,
                    leader_epoch,
                )
                .await
            }
        }
    }

    /// Create `__share_group_state` if it does not exist yet and load every partition of it
    /// this broker has not loaded (one broker; in a cluster their owners load them). False
    /// when it cannot be created.
    pub(crate) fn ensure_share_state_topic(&self) -> bool {
        if self.registry.get(SHARE_STATE_TOPIC).is_none() {
            let _guard = self.shares.create_lock.lock();
            if self.registry.get(SHARE_STATE_TOPIC).is_none() {
                let mut configs = BTreeMap::new();
                configs.insert("cleanup.policy".to_string(), "compact".to_string());
                let n = self.shares.state_partition_count();
                match self.create_topic(SHARE_STATE_TOPIC, n, configs) {
                    Ok(_) => {}
                    Err(_) if self.meta.topic(SHARE_STATE_TOPIC).is_some() => {}
                    Err(r) => {
                        tracing::error!("creating {SHARE_STATE_TOPIC} failed: {}", r.message);
                        return false;
                    }
                }
            }
        }
        if self.cluster.is_some() {
            return true;
        }
        if self.shares.loaded_count() >= self.shares.state_partition_count() as usize {
            return true;
        }
        let Some(t) = self.registry.get(SHARE_STATE_TOPIC) else {
            return false;
        };
        // One loader at a time: a second load of a partition, begun before a write the
        // first one's caller made, would forget that write.
        let _guard = self.shares.create_lock.lock();
        for (p, log) in t.logs.iter().enumerate() {
            let Some(log) = log else { continue };
            let p = p as i32;
            if log.failure().is_none() && !self.shares.state_loaded(p) {
                self.shares.load_state(p, log.clone());
            }
        }
        true
    }

    /// Start the share-group timer: expired record locks are released (and written when
    /// that counted a delivery), members that missed their session leave and their records
    /// are released.
    pub(crate) fn start_share_timers(broker: &Arc<Broker>) {
        let weak: Weak<Broker> = Arc::downgrade(broker);
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(TICK_INTERVAL);
            loop {
                interval.tick().await;
                let Some(b) = weak.upgrade() else { return };
                b.share_tick().await;
            }
        });
    }

    async fn share_tick(self: &Arc<Self>) {
        let now = now_ms();
        self.shares.drop_stale(|k| {
            let id = Uuid::from_bytes(k.topic_id);
            self.registry
                .get_by_id(id)
                .is_some_and(|t| k.partition < t.meta.partitions())
        });
        let topics = self.share_topics();
        let gone = self.shares.groups(|g| g.expire(&topics, now));
        for (group, member) in gone {
            tracing::info!(group, member, "share group member's session expired");
            self.shares
                .close_sessions_of(&group, std::slice::from_ref(&member));
            self.release_member(&group, &member).await;
        }
        for cell in self.shares.cells() {
            let (due, log) = {
                let s = cell.state.lock();
                (
                    s.part.next_deadline().is_some_and(|d| d <= now),
                    s.log.clone(),
                )
            };
            // Only a share partition this broker leads now (not one whose log failed or
            // moved away) releases what expired.
            if !due || !self.is_current_log(&cell.key, &log) {
                continue;
            }
            let changed = self.shares.with(&cell, |p| {
                let c = p.expire(now);
                (c, c)
            });
            if changed == Some(true) {
                self.fetch_waiters.wake(&log);
                self.persist_in_background(cell, "lock expiry");
            }
        }
    }

    /// Write `cell`'s state on a task of its own: a state owner slow to answer holds up
    /// neither the timer nor other share partitions.
    fn persist_in_background(self: &Arc<Self>, cell: Arc<ShareCell>, after: &'static str) {
        let b = self.clone();
        tokio::spawn(async move {
            if let Err(e) = b.shares.persist(&b, &cell).await {
                tracing::warn!(key = ?cell.key, "writing share state after {after} failed: {e}");
            }
        });
    }

    /// Whether `log` is this broker's writable log of `key`'s topic partition now.
    pub(crate) fn is_current_log(&self, key: &ShareKey, log: &Arc<Log>) -> bool {
        self.registry
            .get_by_id(Uuid::from_bytes(key.topic_id))
            .and_then(|t| t.log(key.partition).cloned())
            .is_some_and(|l| Arc::ptr_eq(&l, log) && l.writable() && l.failure().is_none())
    }

    /// A member left its group (or its session here ended): the records it holds in the
    /// group's share partitions led here are released, and that written.
    pub(crate) async fn release_member(self: &Arc<Self>, group: &str, member: &str) {
        for cell in self.shares.cells_of(group) {
            let changed = self.shares.with(&cell, |p| {
                let c = p.release_member(member);
                (c, c)
            });
            if changed == Some(true) {
                self.fetch_waiters.wake(&Shares::log_of(&cell));
                self.persist_in_background(cell, "a release");
            }
        }
    }

    /// `__consumer_offsets` partition `partition` moved away: the share groups it
    /// coordinated are forgotten here.
    pub(crate) fn unload_share_groups(&self, partition: i32) {
        let of = |g: &str| self.groups.read(|c| c.partition_for(g)) == partition;
        self.shares.unload_groups(of);
    }

    /// Topic name to partition count, for share-group assignment (internal topics left out).
    pub(crate) fn share_topics(&self) -> BTreeMap<String, i32> {
        self.registry
            .all()
            .iter()
            .filter(|t| !crate::is_internal_topic(&t.meta.name))
            .map(|t| (t.meta.name.clone(), t.meta.partitions()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A `Shares` with `__share_group_state` partition 0 loaded from a real log, and the
    /// log (to load again, as after a restart).
    fn store() -> (tempfile::TempDir, Shares, Arc<Log>) {
        let cfg = crate::testutil::log_config(i64::MAX, i64::MAX);
        let (dir, _m, mut logs) = crate::testutil::open_logs(1, &cfg);
        let mut props = std::collections::BTreeMap::new();
        props.insert("node.id".to_string(), "1".to_string());
        props.insert("log.dirs".to_string(), dir.path().display().to_string());
        let config = sluice_config::BrokerConfig::from_properties(props).unwrap();
        let shares = Shares::new(&config);
        let log = logs.remove(0);
        shares.load_state(0, log.clone());
        (dir, shares, log)
    }

    fn key() -> ShareKey {
        key_of("g", Uuid::from_u128(7), 0)
    }

    fn snap(start: i64) -> Snapshot {
        Snapshot {
            start,
            batches: Vec::new(),
        }
    }

    fn fenced<T: std::fmt::Debug>(r: Result<T, StateError>) -> bool {
        matches!(r, Err(StateError::Fenced(_)))
    }

    /// A read by a later owner of the topic partition fences the earlier ones' writes, and
    /// the fence is on storage: it holds once the partition is loaded again.
    #[test]
    fn a_later_owners_read_fences_an_earlier_owners_write() {
        let (_d, shares, log) = store();
        let k = key();
        shares.write_local(&k, 0, &snap(10), 0, 4, || true).unwrap();
        let ((found, epoch), written) = shares.read_local(&k, 0, 5).unwrap();
        assert_eq!((found.map(|s| s.start), epoch), (Some(10), 0));
        assert!(written.is_some(), "the new leader epoch was not written");
        assert!(fenced(shares.write_local(&k, 0, &snap(11), 0, 4, || true)));
        assert!(fenced(shares.read_local(&k, 0, 4)));
        shares.unload_state(0);
        shares.load_state(0, log);
        assert!(fenced(shares.write_local(&k, 0, &snap(11), 0, 4, || true)));
        shares.write_local(&k, 0, &snap(12), 0, 5, || true).unwrap();
        // Reading what was never written writes no fence.
        let other = key_of("g", Uuid::from_u128(8), 0);
        let ((found, epoch), written) = shares.read_local(&other, 0, 9).unwrap();
        assert!(found.is_none() && epoch == 0 && written.is_none());
    }

    /// A reset (AlterShareGroupOffsets) moves the state epoch on: a share partition loaded
    /// before it writes nothing over it; one loaded after it writes.
    #[test]
    fn a_reset_fences_the_writes_of_a_state_loaded_before_it() {
        let (_d, shares, log) = store();
        let k = key();
        shares.write_local(&k, 0, &snap(50), 0, 3, || true).unwrap();
        shares.initialize_local(&k, 0, 0).unwrap();
        assert!(fenced(shares.write_local(&k, 0, &snap(51), 0, 3, || true)));
        let ((found, epoch), _) = shares.read_local(&k, 0, 3).unwrap();
        assert_eq!((found.map(|s| s.start), epoch), (Some(0), 1));
        shares.write_local(&k, 0, &snap(5), 1, 3, || true).unwrap();
        // A leader epoch fence survives the reset.
        assert!(fenced(shares.write_local(&k, 0, &snap(6), 1, 2, || true)));
        shares.unload_state(0);
        shares.load_state(0, log);
        assert!(fenced(shares.write_local(&k, 0, &snap(6), 0, 3, || true)));
        let ((found, epoch), _) = shares.read_local(&k, 0, 3).unwrap();
        assert_eq!((found.map(|s| s.start), epoch), (Some(5), 1));
    }

    /// A deletion (DeleteShareGroupOffsets, DeleteGroups) is durable: loaded again, the
    /// state is gone; a state loaded before it writes nothing over it; a new one starts
    /// above its epoch.
    #[test]
    fn a_deletion_is_durable_and_fences_the_state_loaded_before_it() {
        let (_d, shares, log) = store();
        let k = key();
        shares.write_local(&k, 0, &snap(50), 2, 3, || true).unwrap();
        assert!(shares.delete_local(&k, 0).unwrap().is_some());
        assert!(
            shares.delete_local(&k, 0).unwrap().is_none(),
            "nothing left to delete"
        );
        assert!(fenced(shares.write_local(&k, 0, &snap(51), 2, 3, || true)));
        let ((found, epoch), _) = shares.read_local(&k, 0, 3).unwrap();
        assert!(found.is_none());
        assert_eq!(epoch, 3);
        shares
            .write_local(&k, 0, &snap(0), epoch, 3, || true)
            .unwrap();
        assert!(shares.delete_local(&k, 0).unwrap().is_some());
        shares.unload_state(0);
        shares.load_state(0, log);
        let ((found, _), _) = shares.read_local(&k, 0, 3).unwrap();
        assert!(found.is_none(), "the deleted state came back after a load");
        assert!(shares.stored_groups().is_empty());
    }

    /// A deletion's fence is on storage: once the state partition is loaded again (its owner
    /// restarted, or it moved), a share partition loaded before the deletion writes nothing,
    /// over the deletion or over a reset made after it.
    #[test]
    fn a_deletion_fences_what_was_loaded_before_it_across_a_load() {
        let (_d, shares, log) = store();
        let k = key();
        shares.write_local(&k, 0, &snap(50), 0, 3, || true).unwrap();
        shares.delete_local(&k, 0).unwrap();
        shares.unload_state(0);
        shares.load_state(0, log.clone());
        assert!(fenced(shares.write_local(&k, 0, &snap(51), 0, 3, || true)));
        shares.initialize_local(&k, 0, 0).unwrap();
        shares.unload_state(0);
        shares.load_state(0, log);
        assert!(fenced(shares.write_local(&k, 0, &snap(51), 0, 3, || true)));
        assert!(fenced(shares.write_local(&k, 0, &snap(51), 9, 1, || true)));
        let ((found, _), _) = shares.read_local(&k, 0, 3).unwrap();
        assert_eq!(found.map(|s| s.start), Some(0));
    }

    #[test]
    fn topic_ids_in_kafkas_base64() {
        // Kafka's Uuid.toString of this id (url-safe base64 without padding).
        let id = Uuid::parse_str("6ba7b810-9dad-11d1-80b4-00c04fd430c8").unwrap();
        assert_eq!(topic_id_base64(id.as_bytes()), "a6e4EJ2tEdGAtADAT9QwyA");
    }
}

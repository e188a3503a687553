//! Consumer-group coordination: the classic rebalance protocol (JoinGroup/SyncGroup/...),
//! the KIP-848 consumer protocol (ConsumerGroupHeartbeat with server-side assignors) and
//! committed offsets, as pure state machines.
//!
//! Layout:
//! - [`Coordinator`] (this file): the groups of every `__consumer_offsets` partition this
//!   broker has loaded ([`Shard`] each), offsets, expiry, snapshots, and load/unload.
//! - `classic`: the classic group state machine (Empty, PreparingRebalance,
//!   CompletingRebalance, Stable, Dead), member ids, generations, static membership.
//! - `consumer`: KIP-848 consumer groups: group epoch, target assignment, reconciliation,
//!   members that speak the classic protocol, conversion from and to a classic group
//!   (online migration, `group.consumer.migration.policy`).
//! - `protocol`: the consumer embedded protocol (subscriptions and assignments of classic
//!   members), needed when a group changes protocol.
//! - `assignor`: the server-side assignors `uniform` and `range`.
//! - `records`: `__consumer_offsets` record schemas (Apache Kafka's).
//!
//! Owns: what a group request means and what must be persisted. Does not own: I/O, clocks,
//! timers, sockets or Kafka error codes. Every entry point takes `now_ms`; answers that must
//! wait (a JoinGroup until the rebalance completes, a SyncGroup until the leader's
//! assignment) are parked under a caller-chosen [`Token`] and come back later in
//! [`Effects::replies`]; the caller calls [`Coordinator::tick`] periodically so deadlines
//! (session timeouts, rebalance timeouts, the initial rebalance delay) fire. The records in
//! [`Effects::records`] must be appended to the group's `__consumer_offsets` partition.

mod assignor;
mod classic;
mod consumer;
mod protocol;
pub mod records;
mod topic_regex;

use std::collections::{BTreeMap, BTreeSet, HashMap};

pub use assignor::TopicInfo;
use bytes::Bytes;
use classic::CommitKind;
pub use classic::{
    ClassicState, JoinRequest, JoinResponse, JoinedMember, LeaveMember, SyncRequest, SyncResponse,
};
pub use consumer::{
    ConsumerHeartbeat, ConsumerHeartbeatResponse, ConsumerMemberView, ConsumerView,
};
pub use records::{ClassicMemberMetadata, CommittedOffset, Record};

/// Identifies a parked request (chosen by the caller).
pub type Token = u64;

/// Limits and timings, under Kafka's property names.
#[derive(Clone, Debug)]
pub struct GroupConfig {
    /// `group.initial.rebalance.delay.ms` (default 3000).
    pub initial_rebalance_delay_ms: i64,
    /// `group.min.session.timeout.ms` (default 6000).
    pub min_session_timeout_ms: i32,
    /// `group.max.session.timeout.ms` (default 1800000).
    pub max_session_timeout_ms: i32,
    /// `group.max.size` (default i32::MAX).
    pub max_size: usize,
    /// `group.consumer.heartbeat.interval.ms` (default 5000).
    pub consumer_heartbeat_interval_ms: i32,
    /// `group.consumer.session.timeout.ms` (default 45000).
    pub consumer_session_timeout_ms: i32,
    /// `group.consumer.assignors` (default `uniform,range`; the first is the default).
    pub consumer_assignors: Vec<String>,
    /// `group.consumer.max.size` (default i32::MAX).
    pub consumer_max_size: usize,
    /// `offsets.retention.minutes` in ms (default 7 days).
    pub offsets_retention_ms: i64,
    /// `offset.metadata.max.bytes` (default 4096).
    pub offset_metadata_max_bytes: usize,
    /// Records appended to one `__consumer_offsets` partition after which a snapshot of the
    /// live state is written and older records are dropped (Sluice's compaction).
    pub snapshot_interval_records: u64,
    /// `group.consumer.migration.policy` (default bidirectional).
    pub migration_policy: MigrationPolicy,
}

impl Default for GroupConfig {
    fn default() -> Self {
        GroupConfig {
            initial_rebalance_delay_ms: 3000,
            min_session_timeout_ms: 6000,
            max_session_timeout_ms: 1_800_000,
            max_size: i32::MAX as usize,
            consumer_heartbeat_interval_ms: 5000,
            consumer_session_timeout_ms: 45000,
            consumer_assignors: vec!["uniform".into(), "range".into()],
            consumer_max_size: i32::MAX as usize,
            offsets_retention_ms: 7 * 24 * 3600 * 1000,
            offset_metadata_max_bytes: 4096,
            snapshot_interval_records: 10_000,
            migration_policy: MigrationPolicy::Bidirectional,
        }
    }
}

/// Why a group request was refused. The broker maps these to Kafka error codes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GroupError {
    #[error("the group id is empty")]
    InvalidGroupId,
    #[error("this broker does not coordinate that group")]
    NotCoordinator,
    #[error("the member id is unknown to the group")]
    UnknownMemberId,
    #[error("the generation is not the group's current one")]
    IllegalGeneration,
    #[error("the group is rebalancing")]
    RebalanceInProgress,
    #[error("a member id is required: rejoin with the one given")]
    MemberIdRequired,
    #[error("the static member was replaced by a newer instance")]
    FencedInstanceId,
    #[error("the protocol type or protocols do not match the group's")]
    InconsistentGroupProtocol,
    #[error("the session timeout is outside group.min/max.session.timeout.ms")]
    InvalidSessionTimeout,
    #[error("the group has reached group.max.size members")]
    GroupMaxSizeReached,
    #[error("the group does not exist")]
    GroupIdNotFound,
    #[error("the group is not empty")]
    NonEmptyGroup,
    #[error("the group is subscribed to the topic")]
    GroupSubscribedToTopic,
    #[error("the member epoch is fenced")]
    FencedMemberEpoch,
    #[error("the member epoch is stale")]
    StaleMemberEpoch,
    #[error("the static instance id is still in use by another member")]
    UnreleasedInstanceId,
    #[error("the assignor is not supported: {0}")]
    UnsupportedAssignor(String),
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// A `SubscribedTopicRegex` that does not compile (the text says why).
    #[error("{0}")]
    InvalidRegularExpression(String),
    #[error("the offset metadata is larger than offset.metadata.max.bytes")]
    OffsetMetadataTooLarge,
    #[error("the group is of another type: {0}")]
    GroupTypeMismatch(String),
    /// Where Kafka's coordinator fails with an internal error (UNKNOWN_SERVER_ERROR), e.g. a
    /// classic member's malformed embedded consumer protocol.
    #[error("internal error: {0}")]
    Internal(String),
}

/// `group.consumer.migration.policy`: which online conversions of a non-empty group between
/// the classic and the consumer protocol are allowed (Kafka's default: both).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MigrationPolicy {
    #[default]
    Bidirectional,
    Upgrade,
    Downgrade,
    Disabled,
}

impl MigrationPolicy {
    /// Parse a name, case-insensitively (None for an unknown one).
    pub fn parse(s: &str) -> Option<MigrationPolicy> {
        match s.to_ascii_lowercase().as_str() {
            "bidirectional" => Some(MigrationPolicy::Bidirectional),
            "upgrade" => Some(MigrationPolicy::Upgrade),
            "downgrade" => Some(MigrationPolicy::Downgrade),
            "disabled" => Some(MigrationPolicy::Disabled),
            _ => None,
        }
    }
    pub fn upgrade_enabled(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Bidirectional | MigrationPolicy::Upgrade
        )
    }
    pub fn downgrade_enabled(self) -> bool {
        matches!(
            self,
            MigrationPolicy::Bidirectional | MigrationPolicy::Downgrade
        )
    }
}

/// A reply to a parked request.
#[derive(Clone, Debug)]
pub enum Reply {
    Join(JoinResponse),
    Sync(SyncResponse),
}

/// What a call asks the caller to do.
#[derive(Debug, Default)]
pub struct Effects {
    /// Answers for parked requests.
    pub replies: Vec<(Token, Reply)>,
    /// Records to append, per `__consumer_offsets` partition.
    pub records: Vec<(i32, Record)>,
}

impl Effects {
    fn merge(&mut self, other: Effects) {
        self.replies.extend(other.replies);
        self.records.extend(other.records);
    }
}

/// A group of either protocol.
#[derive(Debug)]
pub(crate) enum Group {
    Classic(classic::ClassicGroup),
    Consumer(consumer::ConsumerGroup),
}

impl Group {
    fn is_empty(&self) -> bool {
        match self {
            Group::Classic(g) => g.members.is_empty(),
            Group::Consumer(g) => g.members.is_empty(),
        }
    }
    fn state_name(&self) -> &'static str {
        match self {
            Group::Classic(g) => g.state.name(),
            Group::Consumer(g) => g.state_name(),
        }
    }
    fn type_name(&self) -> &'static str {
        match self {
            Group::Classic(_) => "classic",
            Group::Consumer(_) => "consumer",
        }
    }
    fn protocol_type(&self) -> String {
        match self {
            Group::Classic(g) => g.protocol_type.clone().unwrap_or_default(),
            Group::Consumer(_) => "consumer".into(),
        }
    }
    /// Topics the group's members subscribe to, if known (None = unknown, e.g. a classic
    /// group of a non-consumer protocol type).
    fn subscribed_topics(&self) -> Option<BTreeSet<String>> {
        match self {
            Group::Classic(g) => g.subscribed_topics(),
            Group::Consumer(g) => Some(g.subscribed_topics()),
        }
    }
}

/// The place of an offset record in its `__consumer_offsets` partition's log: a number that
/// grows with every offset record the coordinator applies to the partition, and that a load
/// gives each item it replays, in log order, before going on from there.
///
/// Only the order of two records of one partition is ever compared (which of a committed
/// and a pending offset is newer, Kafka's `olderThan`), and that order is the log's: the
/// driver appends every record of a partition under the coordinator's mutex in the order
/// the coordinator placed them (`crates/broker/src/groups.rs`; markers too,
/// `crates/broker/src/markers.rs`), so live and after a reload the comparison gives the
/// same answer. Why not the record's log offset: OffsetCommit places its offsets (pending)
/// before the driver appends the records it returns, when no offset is known yet, and a
/// number of our own keeps the crate free of the log. Compaction drops records but never reorders the
/// ones it keeps; a snapshot (Sluice's compaction) renumbers the live offsets at a reload,
/// but is written only while no transaction has offsets pending, so every pending offset
/// is newer than them either way.
type LogSeq = u64;

/// An offset and the place in the log of the record that wrote it.
#[derive(Clone, Debug)]
pub(crate) struct PlacedOffset {
    pub(crate) value: CommittedOffset,
    pub(crate) seq: LogSeq,
}

/// One group's offsets by (topic, partition).
type GroupOffsets = BTreeMap<(String, i32), PlacedOffset>;

/// The pending OffsetCommits of one partition of a group, by the place of their record (two
/// commits of one partition may be in flight at once, in two flush rounds).
type PendingPlaced = BTreeMap<LogSeq, CommittedOffset>;

/// The groups and offsets of one `__consumer_offsets` partition.
#[derive(Debug, Default)]
pub struct Shard {
    pub(crate) groups: BTreeMap<String, Group>,
    pub(crate) offsets: BTreeMap<String, GroupOffsets>,
    /// Offsets committed by open transactions (TxnOffsetCommit), per producer id, per group:
    /// at the transaction's COMMIT marker each replaces the group's committed offset unless
    /// that one's record is newer in the log (a plain OffsetCommit written after it); at its
    /// ABORT marker they are dropped.
    pub(crate) pending_txn: BTreeMap<i64, BTreeMap<String, GroupOffsets>>,
    /// Offsets of plain OffsetCommits whose records were appended but whose append is not yet
    /// durable and confirmed (Kafka's `pendingOffsetCommits`), per group, per partition, by
    /// the place of their record. OffsetFetch never answers from them: each becomes the
    /// committed offset at [`Coordinator::commit_written`], or goes at
    /// [`Coordinator::commit_failed`] or with a tombstone of its partition written meanwhile.
    pub(crate) pending_commits: BTreeMap<String, BTreeMap<(String, i32), PendingPlaced>>,
    /// Which load of the partition this shard is: a [`PendingOffsets`] made under another
    /// load is ignored (that load's log decides what it left).
    load_id: u64,
    /// The [`LogSeq`] of the next offset record applied to this partition.
    next_seq: LogSeq,
    /// Records appended since the last snapshot (or load).
    records_since_snapshot: u64,
}

/// One item of a `__consumer_offsets` partition replayed by [`Coordinator::load`], in log order.
#[derive(Clone, Debug)]
pub enum LoadItem {
    /// A record (key, value); `producer_id` is set when its batch is transactional (a
    /// TxnOffsetCommit, pending until its transaction's marker).
    Record {
        key: Bytes,
        value: Option<Bytes>,
        producer_id: Option<i64>,
    },
    /// A transaction marker (control batch) of `producer_id`.
    Marker { producer_id: i64, commit: bool },
}

impl From<(Bytes, Option<Bytes>)> for LoadItem {
    fn from((key, value): (Bytes, Option<Bytes>)) -> LoadItem {
        LoadItem::Record {
            key,
            value,
            producer_id: None,
        }
    }
}

/// A partition's records replayed in log order: the last value of each key wins, as
/// compaction would leave it.
#[derive(Default)]
struct Replay {
    shard: Shard,
    /// Records that could not be read.
    bad: usize,
    /// The last classic-group record of each group (`None`: a tombstone).
    groups: BTreeMap<String, Option<records::GroupRecord>>,
    /// The consumer-protocol groups' records, gathered per group.
    consumer_groups: BTreeMap<String, consumer::Loaded>,
}

impl Replay {
    /// A committed record: an offset (a tombstone removes the offset and any offset a
    /// transaction holds pending for it), a classic group, or a consumer group's record.
    fn record(&mut self, key: Bytes, value: Option<Bytes>, seq: u64) {
        match records::decode(&key, value.as_deref()) {
            Ok(records::Decoded::Offset {
                group,
                topic,
                partition,
                value,
            }) => match value {
                Some(v) => {
                    self.shard
                        .offsets
                        .entry(group)
                        .or_default()
                        .insert((topic, partition), PlacedOffset { value: v, seq });
                }
                None => {
                    let tp = (topic, partition);
                    if let Some(per_group) = self.shard.offsets.get_mut(&group) {
                        per_group.remove(&tp);
                    }
                    self.shard.drop_pending(&group, std::slice::from_ref(&tp));
                }
            },
            Ok(records::Decoded::Group { group, value }) => {
                self.groups.insert(group, value);
            }
            Ok(records::Decoded::Consumer { group, value: v }) => {
                self.consumer_groups
                    .entry(group)
                    .or_default()
                    .apply(key, value, v);
            }
            Ok(records::Decoded::Other) => {}
            Err(_) => self.bad += 1,
        }
    }

    /// A record of an open transaction (a TxnOffsetCommit): its offset is pending until the
    /// producer's marker commits or aborts it; nothing else a transaction writes here counts.
    fn transactional(&mut self, producer_id: i64, key: &[u8], value: Option<&[u8]>, seq: u64) {
        match records::decode(key, value) {
            Ok(records::Decoded::Offset {
                group,
                topic,
                partition,
                value: Some(v),
            }) => {
                self.shard
                    .pending_txn
                    .entry(producer_id)
                    .or_default()
                    .entry(group)
                    .or_default()
                    .insert((topic, partition), PlacedOffset { value: v, seq });
            }
            Ok(_) => {}
            Err(_) => self.bad += 1,
        }
    }

    /// The shard the replay leaves: its groups built from their last records, and a classic
    /// group, empty, for each group that has only committed offsets.
    fn into_shard(self, now_ms: i64, config: &GroupConfig) -> Shard {
        let mut shard = self.shard;
        shard.offsets.retain(|_, o| !o.is_empty());
        for (id, value) in self.groups {
            if let Some(v) = value {
                shard.groups.insert(
                    id.clone(),
                    Group::Classic(classic::ClassicGroup::from_record(id, v, now_ms)),
                );
            }
        }
        for (id, loaded) in self.consumer_groups {
            if let Some(g) =
                consumer::ConsumerGroup::from_loaded(id.clone(), loaded, now_ms, config)
            {
                shard.groups.insert(id, Group::Consumer(g));
            }
        }
        let offset_groups: Vec<String> = shard.offsets.keys().cloned().collect();
        for id in offset_groups {
            shard
                .groups
                .entry(id.clone())
                .or_insert_with(|| Group::Classic(classic::ClassicGroup::new(id, now_ms)));
        }
        shard
    }
}

impl Shard {
    /// An offset tombstone of `group` for `tps` was written (or replayed): the offsets that
    /// open transactions hold pending for them go too, as Kafka replays a tombstone, so that
    /// a later COMMIT marker does not bring back an offset the log deleted (and compaction,
    /// which keeps only the tombstone, agrees with the live state).
    ///
    /// The same holds for plain OffsetCommits still pending: their record is older than the
    /// tombstone, so their confirmation must not bring the offset back either (Kafka's
    /// `removeOffsets` drops `pendingOffsetCommits` too).
    fn drop_pending(&mut self, group: &str, tps: &[(String, i32)]) {
        for per_group in self.pending_txn.values_mut() {
            if let Some(offsets) = per_group.get_mut(group) {
                for tp in tps {
                    offsets.remove(tp);
                }
            }
        }
        if let Some(pending) = self.pending_commits.get_mut(group) {
            for tp in tps {
                pending.remove(tp);
            }
            if pending.is_empty() {
                self.pending_commits.remove(group);
            }
        }
    }

    /// True when a plain OffsetCommit of `group`'s `tp` is appended but not yet confirmed.
    fn has_pending_commit(&self, group: &str, tp: &(String, i32)) -> bool {
        self.pending_commits
            .get(group)
            .is_some_and(|o| o.contains_key(tp))
    }

    /// True when `group` has an offset, committed or pending in an OffsetCommit (so a group
    /// without committed offsets is not forgotten while its first commit is in flight).
    fn has_offsets(&self, group: &str) -> bool {
        self.offsets.contains_key(group) || self.pending_commits.contains_key(group)
    }

    /// Every partition `group` has an offset record for that a tombstone must delete: its
    /// committed offsets and its pending OffsetCommits (their records are in the log already).
    fn offset_partitions(&self, group: &str) -> BTreeSet<(String, i32)> {
        let committed = self.offsets.get(group).into_iter().flat_map(|o| o.keys());
        let pending = self
            .pending_commits
            .get(group)
            .into_iter()
            .flat_map(|o| o.keys());
        committed.chain(pending).cloned().collect()
    }

    /// A tombstone of `group`'s `tp` is being written: forget its committed offset and what
    /// is pending for it. False when it had neither a committed offset nor a pending
    /// OffsetCommit (no tombstone is needed; offsets of open transactions are then kept).
    fn remove_offset(&mut self, group: &str, tp: &(String, i32)) -> bool {
        let committed = self
            .offsets
            .get_mut(group)
            .and_then(|o| o.remove(tp))
            .is_some();
        if self.offsets.get(group).is_some_and(BTreeMap::is_empty) {
            self.offsets.remove(group);
        }
        let deleted = committed || self.has_pending_commit(group, tp);
        if deleted {
            self.drop_pending(group, std::slice::from_ref(tp));
        }
        deleted
    }

    /// Take the pending OffsetCommit of `group`'s `tp` placed at `seq` out of the pending
    /// ones. False when it is no longer there (a tombstone of the partition came after it).
    fn take_pending_commit(&mut self, group: &str, tp: &(String, i32), seq: LogSeq) -> bool {
        let Some(pending) = self.pending_commits.get_mut(group) else {
            return false;
        };
        let Some(placed) = pending.get_mut(tp) else {
            return false;
        };
        let taken = placed.remove(&seq).is_some();
        if placed.is_empty() {
            pending.remove(tp);
        }
        if pending.is_empty() {
            self.pending_commits.remove(group);
        }
        taken
    }

    /// Make `offset` the committed offset of `group`'s `tp` unless the committed one's record
    /// is newer in the log (Kafka's `olderThan`): whichever record is newer wins, in whatever
    /// order their appends were confirmed.
    fn apply_if_newer(&mut self, group: &str, tp: (String, i32), offset: PlacedOffset) {
        let committed = self.offsets.entry(group.to_string()).or_default();
        if committed.get(&tp).is_none_or(|c| c.seq < offset.seq) {
            committed.insert(tp, offset);
        }
    }

    /// The newest record in the log of every offset key, as records: a pending OffsetCommit's
    /// when its record is newer than the committed offset's. A snapshot writes these: its
    /// copy lands after the pending record in the same log (so it is never durable when that
    /// record is not), and the log then says what the state says once the commit is
    /// confirmed. Leaving the pending one out would let the snapshot drop its record, or
    /// write an older offset after it.
    fn newest_offset_records(&self) -> Vec<Record> {
        let groups: BTreeSet<&String> = self
            .offsets
            .keys()
            .chain(self.pending_commits.keys())
            .collect();
        let mut out = Vec::new();
        for group in groups {
            for tp in self.offset_partitions(group) {
                let committed = self
                    .offsets
                    .get(group)
                    .and_then(|o| o.get(&tp))
                    .map(|o| (o.seq, &o.value));
                let pending = self
                    .pending_commits
                    .get(group)
                    .and_then(|o| o.get(&tp))
                    .and_then(|p| p.iter().next_back())
                    .map(|(seq, v)| (*seq, v));
                let newest = match (committed, pending) {
                    (Some(c), Some(p)) if p.0 > c.0 => Some(p),
                    (Some(c), _) => Some(c),
                    (None, p) => p,
                };
                if let Some((_, value)) = newest {
                    out.push(Record {
                        key: records::offset_key(group, &tp.0, tp.1),
                        value: Some(records::offset_value(value)),
                    });
                }
            }
        }
        out
    }

    /// The [`LogSeq`] for the offset record being applied now.
    fn next_seq(&mut self) -> LogSeq {
        let seq = self.next_seq;
        self.next_seq += 1;
        seq
    }

    /// A transaction marker of `producer_id` reached this partition. COMMIT: each of its
    /// pending offsets becomes the committed offset unless the committed one's record is
    /// newer in the log, so that whichever record is newer wins, as in Kafka, and as the log
    /// says after compaction (which keeps only the newer of the two). ABORT: they are dropped.
    fn complete_txn(&mut self, producer_id: i64, commit: bool) {
        let Some(pending) = self.pending_txn.remove(&producer_id) else {
            return;
        };
        if !commit {
            return;
        }
        for (group, offsets) in pending {
            for (tp, offset) in offsets {
                let committed = self.offsets.get(&group).and_then(|o| o.get(&tp));
                debug_assert!(committed.is_none_or(|c| c.seq != offset.seq));
                if committed.is_none_or(|c| c.seq < offset.seq) {
                    self.offsets
                        .entry(group.clone())
                        .or_default()
                        .insert(tp, offset);
                }
            }
        }
    }
}

/// The offsets of one OffsetCommit, pending from the moment its records are returned until the
/// append holding them is durable and confirmed: the caller then hands this back to
/// [`Coordinator::commit_written`] (they become the committed offsets) or, if the append, its
/// fsync or the confirmation of ownership failed, to [`Coordinator::commit_failed`] (they are
/// dropped). Kafka's `prepareOffsetCommit` / `onOffsetCommitAppend` / `failPendingOffsetWrite`.
#[derive(Clone, Debug)]
#[must_use = "pending offsets are applied or dropped once their append is settled"]
pub struct PendingOffsets {
    partition: i32,
    load_id: u64,
    group_id: String,
    offsets: Vec<((String, i32), PlacedOffset)>,
    now_ms: i64,
}

impl PendingOffsets {
    /// The `__consumer_offsets` partition whose append this waits for.
    pub fn partition(&self) -> i32 {
        self.partition
    }

    /// True when the commit wrote no offset (nothing to wait for).
    pub fn is_empty(&self) -> bool {
        self.offsets.is_empty()
    }
}

/// Offsets of one TxnOffsetCommit, to apply once written ([`Coordinator::apply_txn_offsets`]).
#[derive(Clone, Debug)]
pub struct TxnOffsets {
    partition: i32,
    group_id: String,
    producer_id: i64,
    offsets: BTreeMap<(String, i32), CommittedOffset>,
    now_ms: i64,
}

/// One row of ListGroups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupListing {
    pub group_id: String,
    pub protocol_type: String,
    pub state: String,
    pub group_type: String,
}

/// OffsetFetch's answer for one partition: ((topic, partition), committed offset if any).
pub type FetchedOffset = ((String, i32), Option<CommittedOffset>);

/// One committed offset to write.
#[derive(Clone, Debug)]
pub struct OffsetCommit {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub leader_epoch: i32,
    pub metadata: Option<String>,
}

impl OffsetCommit {
    /// The offset to store, or OFFSET_METADATA_TOO_LARGE.
    fn value(&self, max_metadata: usize, now_ms: i64) -> Result<CommittedOffset, GroupError> {
        let metadata = self.metadata.clone().unwrap_or_default();
        if metadata.len() > max_metadata {
            return Err(GroupError::OffsetMetadataTooLarge);
        }
        Ok(CommittedOffset {
            offset: self.offset,
            leader_epoch: self.leader_epoch,
            metadata,
            commit_timestamp_ms: now_ms,
        })
    }
}

/// DescribeGroups' view of a classic group.
#[derive(Clone, Debug, Default)]
pub struct ClassicView {
    pub state: String,
    pub protocol_type: String,
    pub protocol: String,
    pub members: Vec<ClassicMemberView>,
}

#[derive(Clone, Debug)]
pub struct ClassicMemberView {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub metadata: Bytes,
    pub assignment: Bytes,
}

/// Java's `String.hashCode` (UTF-16 code units, wrapping).
fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16()
        .fold(0i32, |h, c| h.wrapping_mul(31).wrapping_add(i32::from(c)))
}

/// The coordinator partition of a key (a group id in `__consumer_offsets`, a transactional
/// id in `__transaction_state`): Kafka's `Utils.abs(key.hashCode) % partitions`. `Utils.abs`
/// is the absolute value with `Integer.MIN_VALUE` mapped to 0, not a mask of the sign bit:
/// the two differ for every negative hash.
pub fn partition_for(group_id: &str, partitions: i32) -> i32 {
    java_string_hash(group_id).checked_abs().unwrap_or(0) % partitions.max(1)
}

/// Kafka's conditions for downgrading a consumer group when `leaving` goes: it is the last
/// member using the consumer protocol, others remain, the policy allows it and the rest fit
/// in `group.max.size`.
fn downgrade_allowed(g: &consumer::ConsumerGroup, leaving: &str, config: &GroupConfig) -> bool {
    config.migration_policy.downgrade_enabled()
        && g.only_classic_remain_without(leaving)
        && g.members.len() - 1 <= config.max_size
}

/// Kafka's online upgrade: a consumer-protocol member joining (epoch 0) a non-empty classic
/// group of protocol type `consumer` converts it, when `group.consumer.migration.policy`
/// allows and the group is within `group.consumer.max.size`; otherwise the group is not a
/// consumer group (GROUP_ID_NOT_FOUND). A refused heartbeat leaves the classic group as it
/// was; an accepted one replaces it (its metadata record deleted) and sends the members
/// waiting in its rebalance to rejoin.
fn upgrade_classic_group(
    shard: &mut Shard,
    p: i32,
    id: &str,
    req: ConsumerHeartbeat,
    topics: &BTreeMap<String, TopicInfo>,
    now_ms: i64,
    config: &GroupConfig,
) -> Result<(ConsumerHeartbeatResponse, Effects), GroupError> {
    let Some(Group::Classic(g)) = shard.groups.get_mut(id) else {
        return Err(GroupError::GroupIdNotFound);
    };
    let mut records = Vec::new();
    let allowed = req.member_epoch == 0
        && config.migration_policy.upgrade_enabled()
        && g.uses_consumer_protocol()
        && g.members.len() <= config.consumer_max_size;
    if !allowed {
        return Err(GroupError::GroupIdNotFound);
    }
    let Some(mut cg) = consumer::ConsumerGroup::from_classic(
        id.to_string(),
        g.generation,
        g.converted_members(),
        topics,
        now_ms,
    ) else {
        return Err(GroupError::GroupIdNotFound);
    };
    // A refused heartbeat leaves the classic group as it was.
    let resp = cg.heartbeat(req, topics, now_ms, config)?;
    // Members waiting in a rebalance must rejoin the converted group.
    let replies = g.drain_parked(GroupError::RebalanceInProgress);
    if g.generation > 0 {
        records.push(Record {
            key: records::group_key(id),
            value: None,
        });
    }
    records.extend(cg.take_records());
    shard.groups.insert(id.to_string(), Group::Consumer(cg));
    shard.records_since_snapshot += records.len() as u64;
    let effects = Effects {
        replies,
        records: records.into_iter().map(|r| (p, r)).collect(),
    };
    Ok((resp, effects))
}

/// Fence (remove) `member` of consumer group `id`; when it was the last member using the
/// consumer protocol and [`downgrade_allowed`], the group becomes a classic group instead
/// (tombstones for the consumer group's records, its group metadata record) and rebalances.
fn fence_consumer_member(
    shard: &mut Shard,
    p: i32,
    id: &str,
    member: &str,
    now_ms: i64,
    config: &GroupConfig,
) -> Effects {
    let Some(Group::Consumer(g)) = shard.groups.get_mut(id) else {
        return Effects::default();
    };
    if !g.members.contains_key(member) {
        return Effects::default();
    }
    let mut effects = Effects::default();
    if downgrade_allowed(g, member, config) {
        let mut records = g.tombstones();
        let mut classic = classic::ClassicGroup::from_converted(
            id.to_string(),
            g.group_epoch(),
            g.to_classic_members(member),
            now_ms,
        );
        records.push(classic.record());
        let rebalance = classic.start_rebalance(now_ms, config);
        shard.groups.insert(id.to_string(), Group::Classic(classic));
        effects.records = records.into_iter().map(|r| (p, r)).collect();
        effects.merge(rebalance.into_effects(p));
    } else {
        g.fence(member, now_ms);
        effects.records = g.take_records().into_iter().map(|r| (p, r)).collect();
    }
    shard.records_since_snapshot += effects.records.len() as u64;
    effects
}

/// Every group of the loaded `__consumer_offsets` partitions.
#[derive(Debug)]
pub struct Coordinator {
    config: GroupConfig,
    partitions: i32,
    shards: HashMap<i32, Shard>,
    /// Loads so far: each shard's `load_id`.
    loads: u64,
}

impl Coordinator {
    pub fn new(config: GroupConfig, partitions: i32) -> Coordinator {
        Coordinator {
            config,
            partitions: partitions.max(1),
            shards: HashMap::new(),
            loads: 0,
        }
    }

    pub fn config(&self) -> &GroupConfig {
        &self.config
    }

    pub fn partitions(&self) -> i32 {
        self.partitions
    }

    pub fn partition_for(&self, group_id: &str) -> i32 {
        partition_for(group_id, self.partitions)
    }

    pub fn is_loaded(&self, partition: i32) -> bool {
        self.shards.contains_key(&partition)
    }

    /// Take over a partition: replay its records (key, value) and transaction markers in log
    /// order ([`Replay`]), then build its groups from what the replay left. Returns how many
    /// records could not be read (skipped, as Kafka's loader does).
    pub fn load<I: Into<LoadItem>>(
        &mut self,
        partition: i32,
        records: impl IntoIterator<Item = I>,
        now_ms: i64,
    ) -> usize {
        self.loads += 1;
        let mut replay = Replay {
            shard: Shard {
                load_id: self.loads,
                ..Shard::default()
            },
            ..Replay::default()
        };
        for item in records {
            // Every item gets its place in the log, whatever it holds.
            let seq = replay.shard.next_seq();
            match item.into() {
                LoadItem::Record {
                    key,
                    value,
                    producer_id: None,
                } => replay.record(key, value, seq),
                LoadItem::Record {
                    key,
                    value,
                    producer_id: Some(pid),
                } => replay.transactional(pid, &key, value.as_deref(), seq),
                LoadItem::Marker {
                    producer_id,
                    commit,
                } => replay.shard.complete_txn(producer_id, commit),
            }
        }
        let bad = replay.bad;
        self.shards
            .insert(partition, replay.into_shard(now_ms, &self.config));
        bad
    }

    /// Release a partition: its groups are forgotten here (another broker loads them).
    /// Parked requests of those groups get NOT_COORDINATOR-style replies from the caller.
    /// Forget a partition's groups (another coordinator owns them now). Returns the requests
    /// its groups had parked: they get no answer from this coordinator any more.
    pub fn unload(&mut self, partition: i32) -> Vec<Token> {
        let Some(shard) = self.shards.remove(&partition) else {
            return Vec::new();
        };
        shard
            .groups
            .values()
            .flat_map(|g| match g {
                Group::Classic(c) => c.parked_tokens().collect::<Vec<_>>(),
                _ => Vec::new(),
            })
            .collect()
    }

    fn shard(&mut self, group_id: &str) -> Result<(i32, &mut Shard), GroupError> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        let p = partition_for(group_id, self.partitions);
        self.shards
            .get_mut(&p)
            .map(|s| (p, s))
            .ok_or(GroupError::NotCoordinator)
    }

    // ---- classic protocol ----

    /// JoinGroup. `topics` is the cluster's topics, needed when the group is a consumer group
    /// (a classic member of it is assigned by the coordinator).
    pub fn join_group(
        &mut self,
        req: JoinRequest,
        token: Token,
        topics: &BTreeMap<String, TopicInfo>,
        now_ms: i64,
    ) -> Result<(Option<JoinResponse>, Effects), GroupError> {
        let config = self.config.clone();
        let (p, shard) = self.shard(&req.group_id)?;
        if req.session_timeout_ms < config.min_session_timeout_ms
            || req.session_timeout_ms > config.max_session_timeout_ms
        {
            return Err(GroupError::InvalidSessionTimeout);
        }
        if req.protocol_type.is_empty() || req.protocols.is_empty() {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        let id = req.group_id.clone();
        // An empty consumer group becomes a classic group on its first classic join
        // (Kafka's offline downgrade); a non-empty one takes the member as a classic member
        // of the consumer group.
        let mut converted = Vec::new();
        if let Some(Group::Consumer(g)) = shard.groups.get_mut(&id) {
            if !g.members.is_empty() {
                // Kafka 4.x: no classic members at all when migration is disabled.
                if config.migration_policy == MigrationPolicy::Disabled {
                    return Err(GroupError::InconsistentGroupProtocol);
                }
                let resp = g.classic_join(&req, topics, now_ms, &config)?;
                let records = g.take_records();
                shard.records_since_snapshot += records.len() as u64;
                let effects = Effects {
                    replies: Vec::new(),
                    records: records.into_iter().map(|r| (p, r)).collect(),
                };
                return Ok((Some(resp), effects));
            }
            converted = g.tombstones();
            shard.groups.remove(&id);
        }
        let group = match shard
            .groups
            .entry(id.clone())
            .or_insert_with(|| Group::Classic(classic::ClassicGroup::new(id.clone(), now_ms)))
        {
            Group::Classic(g) => g,
            Group::Consumer(_) => return Err(GroupError::InconsistentGroupProtocol),
        };
        let (resp, effects) = group.join(req, token, now_ms, &config)?;
        let mut effects = effects.into_effects(p);
        shard.records_since_snapshot += converted.len() as u64;
        effects
            .records
            .splice(0..0, converted.into_iter().map(|r| (p, r)));
        Ok((resp, effects))
    }

    pub fn sync_group(
        &mut self,
        req: SyncRequest,
        token: Token,
        now_ms: i64,
    ) -> Result<(Option<SyncResponse>, Effects), GroupError> {
        let (p, shard) = self.shard(&req.group_id)?;
        match shard.groups.get_mut(&req.group_id) {
            Some(Group::Classic(g)) => {
                let (resp, eff) = g.sync(req, token, now_ms)?;
                Ok((resp, eff.into_effects(p)))
            }
            Some(Group::Consumer(g)) => {
                let resp = g.classic_sync(&req, now_ms)?;
                Ok((Some(resp), Effects::default()))
            }
            None => Err(GroupError::UnknownMemberId),
        }
    }

    pub fn heartbeat(
        &mut self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now_ms: i64,
    ) -> Result<(), GroupError> {
        let (_, shard) = self.shard(group_id)?;
        match shard.groups.get_mut(group_id) {
            Some(Group::Classic(g)) => g.heartbeat(member_id, instance_id, generation, now_ms),
            Some(Group::Consumer(g)) => {
                g.classic_heartbeat(member_id, instance_id, generation, now_ms)
            }
            None => Err(GroupError::UnknownMemberId),
        }
    }

    /// LeaveGroup: one result per member, in request order.
    pub fn leave_group(
        &mut self,
        group_id: &str,
        members: &[LeaveMember],
        now_ms: i64,
    ) -> Result<(Vec<Result<(), GroupError>>, Effects), GroupError> {
        let (p, shard) = self.shard(group_id)?;
        match shard.groups.get_mut(group_id) {
            Some(Group::Classic(g)) => {
                let (results, eff) = g.leave(members, now_ms);
                Ok((results, eff.into_effects(p)))
            }
            Some(Group::Consumer(g)) => {
                let results = g.classic_leave(members, now_ms);
                let records = g.take_records();
                shard.records_since_snapshot += records.len() as u64;
                let effects = Effects {
                    replies: Vec::new(),
                    records: records.into_iter().map(|r| (p, r)).collect(),
                };
                Ok((results, effects))
            }
            None => Err(GroupError::UnknownMemberId),
        }
    }

    // ---- KIP-848 ----

    pub fn consumer_heartbeat(
        &mut self,
        req: ConsumerHeartbeat,
        topics: &BTreeMap<String, TopicInfo>,
        now_ms: i64,
    ) -> Result<(ConsumerHeartbeatResponse, Effects), GroupError> {
        let config = self.config.clone();
        let (p, shard) = self.shard(&req.group_id)?;
        let id = req.group_id.clone();
        let mut records = Vec::new();
        match shard.groups.get_mut(&id) {
            Some(Group::Classic(g)) if !g.members.is_empty() => {
                return upgrade_classic_group(shard, p, &id, req, topics, now_ms, &config);
            }
            Some(Group::Classic(g)) => {
                // An empty classic group becomes a consumer group (Kafka's conversion); its
                // group metadata record, if any, is deleted.
                if g.generation > 0 {
                    records.push(Record {
                        key: records::group_key(&id),
                        value: None,
                    });
                }
                shard.groups.remove(&id);
            }
            _ => {}
        }
        if req.member_epoch != 0 && !shard.groups.contains_key(&id) {
            return Err(GroupError::UnknownMemberId);
        }
        // The last consumer-protocol member leaving may turn the group back into a classic
        // group (Kafka's online downgrade).
        let leaving =
            req.member_epoch == -1 || (req.member_epoch == -2 && req.instance_id.is_none());
        if leaving {
            if let Some(Group::Consumer(g)) = shard.groups.get(&id) {
                if g.members.contains_key(&req.member_id)
                    && downgrade_allowed(g, &req.member_id, &config)
                {
                    let effects =
                        fence_consumer_member(shard, p, &id, &req.member_id, now_ms, &config);
                    let resp = ConsumerHeartbeatResponse {
                        member_id: req.member_id,
                        member_epoch: req.member_epoch,
                        heartbeat_interval_ms: 0,
                        assignment: None,
                    };
                    return Ok((resp, effects));
                }
            }
        }
        let group =
            match shard.groups.entry(id.clone()).or_insert_with(|| {
                Group::Consumer(consumer::ConsumerGroup::new(id.clone(), now_ms))
            }) {
                Group::Consumer(g) => g,
                Group::Classic(_) => return Err(GroupError::GroupIdNotFound),
            };
        // A refused heartbeat returns no records: whatever it changed is in the next diff.
        let resp = group.heartbeat(req, topics, now_ms, &config)?;
        records.extend(group.take_records());
        shard.records_since_snapshot += records.len() as u64;
        let effects = Effects {
            replies: Vec::new(),
            records: records.into_iter().map(|r| (p, r)).collect(),
        };
        Ok((resp, effects))
    }

    pub fn describe_consumer_group(
        &self,
        group_id: &str,
        topics: &BTreeMap<String, TopicInfo>,
    ) -> Result<ConsumerView, GroupError> {
        let p = partition_for(group_id, self.partitions);
        let shard = self.shards.get(&p).ok_or(GroupError::NotCoordinator)?;
        match shard.groups.get(group_id) {
            Some(Group::Consumer(g)) => Ok(g.view(topics, &self.config)),
            Some(Group::Classic(_)) => Err(GroupError::GroupTypeMismatch("classic".into())),
            None => Err(GroupError::GroupIdNotFound),
        }
    }

    // ---- both protocols ----

    /// OffsetCommit. `generation` is the classic generation or the KIP-848 member epoch; -1
    /// with an empty member id is an admin/simple commit (allowed only on an empty group).
    ///
    /// Returns the per-commit results, the records to append, and the offsets, which are
    /// pending: OffsetFetch does not answer them (and one that requires stable offsets gets
    /// UNSTABLE_OFFSET_COMMIT for their partitions) until the caller reports the append
    /// holding the records durable and confirmed ([`Coordinator::commit_written`]) or failed
    /// ([`Coordinator::commit_failed`]). So no reader ever sees an offset that a failed fsync,
    /// or a new owner of the partition, can take back.
    #[allow(clippy::type_complexity)]
    pub fn commit_offsets(
        &mut self,
        group_id: &str,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        commits: &[OffsetCommit],
        now_ms: i64,
    ) -> Result<(Vec<Result<(), GroupError>>, Effects, PendingOffsets), GroupError> {
        let max_meta = self.config.offset_metadata_max_bytes;
        let (p, shard) = self.shard(group_id)?;
        let id = group_id.to_string();
        match shard.groups.get(&id) {
            None if generation < 0 => {
                shard.groups.insert(
                    id.clone(),
                    Group::Classic(classic::ClassicGroup::new(id.clone(), now_ms)),
                );
            }
            None => return Err(GroupError::IllegalGeneration),
            Some(Group::Classic(g)) => {
                g.validate_commit(member_id, instance_id, generation, CommitKind::Offsets)?
            }
            Some(Group::Consumer(g)) => g.validate_commit(member_id, generation)?,
        }
        let mut results = Vec::with_capacity(commits.len());
        let mut effects = Effects::default();
        let mut pending = PendingOffsets {
            partition: p,
            load_id: shard.load_id,
            group_id: id.clone(),
            offsets: Vec::new(),
            now_ms,
        };
        for c in commits {
            let v = match c.value(max_meta, now_ms) {
                Ok(v) => v,
                Err(e) => {
                    results.push(Err(e));
                    continue;
                }
            };
            effects.records.push((
                p,
                Record {
                    key: records::offset_key(&id, &c.topic, c.partition),
                    value: Some(records::offset_value(&v)),
                },
            ));
            let seq = shard.next_seq();
            let tp = (c.topic.clone(), c.partition);
            shard
                .pending_commits
                .entry(id.clone())
                .or_default()
                .entry(tp.clone())
                .or_default()
                .insert(seq, v.clone());
            pending.offsets.push((tp, PlacedOffset { value: v, seq }));
            results.push(Ok(()));
        }
        shard.records_since_snapshot += effects.records.len() as u64;
        Ok((results, effects, pending))
    }

    /// The append holding `pending`'s records is durable and confirmed: each of its offsets
    /// becomes the group's committed offset, unless a tombstone of that partition was written
    /// after it (the pending offset went with it) or the committed offset's record is newer
    /// in the log (a later commit confirmed first). Kafka's `onOffsetCommitAppend`.
    pub fn commit_written(&mut self, pending: PendingOffsets) {
        let Some(shard) = self.shards.get_mut(&pending.partition) else {
            return;
        };
        if shard.load_id != pending.load_id {
            return;
        }
        let group = pending.group_id;
        let mut applied = false;
        for (tp, offset) in pending.offsets {
            if shard.take_pending_commit(&group, &tp, offset.seq) {
                shard.apply_if_newer(&group, tp, offset);
                applied = true;
            }
        }
        if applied {
            // Kept while its commit was pending (expiry forgets no group with offsets pending).
            shard.groups.entry(group.clone()).or_insert_with(|| {
                Group::Classic(classic::ClassicGroup::new(group, pending.now_ms))
            });
        }
    }

    /// The append holding `pending`'s records failed, or its fsync, or the confirmation that
    /// this broker still owned the partition: its offsets are dropped, never having been
    /// answered. (What the log holds is what a later load finds.) Kafka's
    /// `failPendingOffsetWrite`.
    pub fn commit_failed(&mut self, pending: PendingOffsets) {
        let Some(shard) = self.shards.get_mut(&pending.partition) else {
            return;
        };
        if shard.load_id != pending.load_id {
            return;
        }
        for (tp, offset) in &pending.offsets {
            shard.take_pending_commit(&pending.group_id, tp, offset.seq);
        }
    }

    /// TxnOffsetCommit: offsets committed as part of producer `producer_id`'s transaction.
    /// Validates the commit and returns the per-commit results, the `__consumer_offsets`
    /// partition, the records (which the caller appends as one transactional batch of the
    /// producer, where the log checks the producer's epoch) and the offsets to apply with
    /// [`Coordinator::apply_txn_offsets`] once that append succeeded. Applied, they are pending
    /// (not visible to OffsetFetch, which answers UNSTABLE_OFFSET_COMMIT to a fetch that
    /// requires stable offsets) until the transaction's marker reaches the group's partition
    /// ([`Coordinator::complete_txn`]). A member id and generation, when given
    /// (TxnOffsetCommit v3+), are checked as OffsetCommit checks them; without them (older
    /// clients) nothing is.
    #[allow(clippy::too_many_arguments, clippy::type_complexity)]
    pub fn txn_commit_offsets(
        &mut self,
        group_id: &str,
        producer_id: i64,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        commits: &[OffsetCommit],
        now_ms: i64,
    ) -> Result<(Vec<Result<(), GroupError>>, i32, Vec<Record>, TxnOffsets), GroupError> {
        let max_meta = self.config.offset_metadata_max_bytes;
        let (p, shard) = self.shard(group_id)?;
        let id = group_id.to_string();
        let unchecked = member_id.is_empty() && generation < 0;
        match shard.groups.get(&id) {
            None => {}
            Some(_) if unchecked => {}
            Some(Group::Classic(g)) => g.validate_commit(
                member_id,
                instance_id,
                generation,
                CommitKind::Transactional,
            )?,
            Some(Group::Consumer(g)) => g.validate_commit(member_id, generation)?,
        }
        let mut results = Vec::with_capacity(commits.len());
        let mut records = Vec::new();
        let mut offsets = BTreeMap::new();
        for c in commits {
            let v = match c.value(max_meta, now_ms) {
                Ok(v) => v,
                Err(e) => {
                    results.push(Err(e));
                    continue;
                }
            };
            records.push(Record {
                key: records::offset_key(&id, &c.topic, c.partition),
                value: Some(records::offset_value(&v)),
            });
            offsets.insert((c.topic.clone(), c.partition), v);
            results.push(Ok(()));
        }
        let pending = TxnOffsets {
            partition: p,
            group_id: id,
            producer_id,
            offsets,
            now_ms,
        };
        Ok((results, p, records, pending))
    }

    /// Apply what [`Coordinator::txn_commit_offsets`] returned, once its records are in the log.
    pub fn apply_txn_offsets(&mut self, t: TxnOffsets) {
        let Some(shard) = self.shards.get_mut(&t.partition) else {
            return;
        };
        shard.records_since_snapshot += t.offsets.len() as u64;
        shard.groups.entry(t.group_id.clone()).or_insert_with(|| {
            Group::Classic(classic::ClassicGroup::new(t.group_id.clone(), t.now_ms))
        });
        let placed: Vec<((String, i32), PlacedOffset)> = t
            .offsets
            .into_iter()
            .map(|(tp, value)| {
                (
                    tp,
                    PlacedOffset {
                        value,
                        seq: shard.next_seq(),
                    },
                )
            })
            .collect();
        shard
            .pending_txn
            .entry(t.producer_id)
            .or_default()
            .entry(t.group_id)
            .or_default()
            .extend(placed);
    }

    /// A transaction marker of `producer_id` was appended to `__consumer_offsets` partition
    /// `partition`: its pending offsets there become committed (COMMIT) or are dropped.
    pub fn complete_txn(&mut self, partition: i32, producer_id: i64, commit: bool) {
        if let Some(shard) = self.shards.get_mut(&partition) {
            shard.complete_txn(producer_id, commit);
        }
    }

    /// True when an open transaction has committed an offset for `group_id`'s `tp`, or an
    /// OffsetCommit of it is not confirmed yet (OffsetFetch with require_stable answers
    /// UNSTABLE_OFFSET_COMMIT for it, as Kafka's `hasPendingOffsetCommitsForTopicPartition`).
    pub fn has_pending_offset(&self, group_id: &str, tp: &(String, i32)) -> bool {
        let p = partition_for(group_id, self.partitions);
        self.shards.get(&p).is_some_and(|s| {
            s.has_pending_commit(group_id, tp)
                || s.pending_txn
                    .values()
                    .any(|g| g.get(group_id).is_some_and(|o| o.contains_key(tp)))
        })
    }

    /// OffsetFetch: committed offsets of `group_id` (all of them when `partitions` is None).
    /// A group that does not exist has no offsets (not an error, as in Kafka).
    pub fn fetch_offsets(
        &self,
        group_id: &str,
        partitions: Option<&[(String, i32)]>,
    ) -> Result<Vec<FetchedOffset>, GroupError> {
        if group_id.is_empty() {
            return Err(GroupError::InvalidGroupId);
        }
        let p = partition_for(group_id, self.partitions);
        let shard = self.shards.get(&p).ok_or(GroupError::NotCoordinator)?;
        let empty = BTreeMap::new();
        let offsets = shard.offsets.get(group_id).unwrap_or(&empty);
        Ok(match partitions {
            Some(list) => list
                .iter()
                .map(|tp| (tp.clone(), offsets.get(tp).map(|o| o.value.clone())))
                .collect(),
            None => offsets
                .iter()
                .map(|(k, v)| (k.clone(), Some(v.value.clone())))
                .collect(),
        })
    }

    /// Validate a KIP-848 member for OffsetFetch v9 (member id + epoch given).
    pub fn validate_fetch_member(
        &self,
        group_id: &str,
        member_id: &str,
        member_epoch: i32,
    ) -> Result<(), GroupError> {
        let p = partition_for(group_id, self.partitions);
        let shard = self.shards.get(&p).ok_or(GroupError::NotCoordinator)?;
        match shard.groups.get(group_id) {
            Some(Group::Consumer(g)) => g.validate_fetch(member_id, member_epoch),
            _ => Ok(()),
        }
    }

    pub fn list_groups(&self, states: &[String], types: &[String]) -> Vec<GroupListing> {
        let mut out = Vec::new();
        for shard in self.shards.values() {
            for (id, g) in &shard.groups {
                let state = g.state_name();
                if !states.is_empty() && !states.iter().any(|s| s.eq_ignore_ascii_case(state)) {
                    continue;
                }
                if !types.is_empty() && !types.iter().any(|t| t.eq_ignore_ascii_case(g.type_name()))
                {
                    continue;
                }
                out.push(GroupListing {
                    group_id: id.clone(),
                    protocol_type: g.protocol_type(),
                    state: state.to_string(),
                    group_type: g.type_name().to_string(),
                });
            }
        }
        out.sort_by(|a, b| a.group_id.cmp(&b.group_id));
        out
    }

    /// Whether a classic or consumer group `group_id` exists (a share group may not take its
    /// id).
    pub fn has_group(&self, group_id: &str) -> bool {
        let p = partition_for(group_id, self.partitions);
        self.shards
            .get(&p)
            .is_some_and(|s| s.groups.contains_key(group_id))
    }

    /// DescribeGroups for one group. A group that does not exist is reported as Dead; a
    /// consumer group as [`GroupError::GroupTypeMismatch`].
    pub fn describe_classic(&self, group_id: &str) -> Result<ClassicView, GroupError> {
        let p = partition_for(group_id, self.partitions);
        let shard = self.shards.get(&p).ok_or(GroupError::NotCoordinator)?;
        match shard.groups.get(group_id) {
            Some(Group::Classic(g)) => Ok(g.view()),
            Some(Group::Consumer(_)) => Err(GroupError::GroupTypeMismatch("consumer".into())),
            None => Err(GroupError::GroupIdNotFound),
        }
    }

    /// DeleteGroups for one group: only empty groups; tombstones for its offsets and metadata.
    pub fn delete_group(&mut self, group_id: &str) -> Result<Effects, GroupError> {
        let (p, shard) = self.shard(group_id)?;
        let group = shard
            .groups
            .get(group_id)
            .ok_or(GroupError::GroupIdNotFound)?;
        if !group.is_empty() {
            return Err(GroupError::NonEmptyGroup);
        }
        let mut effects = Effects::default();
        if let Some(Group::Consumer(g)) = shard.groups.remove(group_id) {
            effects
                .records
                .extend(g.tombstones().into_iter().map(|r| (p, r)));
        }
        // Pending OffsetCommits too: their records are in the log already.
        for tp in shard.offset_partitions(group_id) {
            shard.remove_offset(group_id, &tp);
            effects.records.push((
                p,
                Record {
                    key: records::offset_key(group_id, &tp.0, tp.1),
                    value: None,
                },
            ));
        }
        effects.records.push((
            p,
            Record {
                key: records::group_key(group_id),
                value: None,
            },
        ));
        shard.records_since_snapshot += effects.records.len() as u64;
        Ok(effects)
    }

    /// OffsetDelete: per partition, refused with GROUP_SUBSCRIBED_TO_TOPIC when a member of
    /// the group subscribes to its topic.
    pub fn delete_offsets(
        &mut self,
        group_id: &str,
        partitions: &[(String, i32)],
    ) -> Result<(Vec<Result<(), GroupError>>, Effects), GroupError> {
        let (p, shard) = self.shard(group_id)?;
        let group = shard
            .groups
            .get(group_id)
            .ok_or(GroupError::GroupIdNotFound)?;
        let subscribed = if group.is_empty() {
            Some(BTreeSet::new())
        } else {
            group.subscribed_topics()
        };
        let Some(subscribed) = subscribed else {
            return Err(GroupError::NonEmptyGroup);
        };
        let mut effects = Effects::default();
        let mut results = Vec::new();
        for (topic, partition) in partitions {
            if subscribed.contains(topic) {
                results.push(Err(GroupError::GroupSubscribedToTopic));
                continue;
            }
            // A pending OffsetCommit's record is in the log already: it gets the tombstone too.
            if shard.remove_offset(group_id, &(topic.clone(), *partition)) {
                effects.records.push((
                    p,
                    Record {
                        key: records::offset_key(group_id, topic, *partition),
                        value: None,
                    },
                ));
            }
            results.push(Ok(()));
        }
        shard.records_since_snapshot += effects.records.len() as u64;
        Ok((results, effects))
    }

    /// Fire due deadlines: session timeouts, rebalance timeouts, the initial rebalance delay,
    /// KIP-848 session and revocation timeouts.
    /// The deadlines of one group that have passed (sessions, the rebalance timeout), as
    /// [`Coordinator::tick`] applies them: called before a member's heartbeat, so that a
    /// session expired a moment ago is seen as Kafka's exact timers see it (the heartbeat
    /// then tells the others of the rebalance at once, not one heartbeat interval later).
    pub fn tick_group(&mut self, group_id: &str, now_ms: i64) -> Effects {
        let config = self.config.clone();
        let Ok((p, shard)) = self.shard(group_id) else {
            return Effects::default();
        };
        match shard.groups.get_mut(group_id) {
            Some(Group::Classic(g)) => {
                let eff = g.tick(now_ms, &config);
                shard.records_since_snapshot += eff.records.len() as u64;
                eff.into_effects(p)
            }
            Some(Group::Consumer(g)) => {
                let expired = g.expired(now_ms);
                let mut effects = Effects::default();
                for member in expired {
                    effects.merge(fence_consumer_member(
                        shard, p, group_id, &member, now_ms, &config,
                    ));
                }
                effects
            }
            None => Effects::default(),
        }
    }

    pub fn tick(&mut self, now_ms: i64) -> Effects {
        let mut effects = Effects::default();
        let config = self.config.clone();
        for (p, shard) in self.shards.iter_mut() {
            for g in shard.groups.values_mut() {
                match g {
                    Group::Classic(g) => {
                        let eff = g.tick(now_ms, &config);
                        shard.records_since_snapshot += eff.records.len() as u64;
                        effects.merge(eff.into_effects(*p));
                    }
                    Group::Consumer(_) => {}
                }
            }
            // Fencing a consumer group's member may turn the group into a classic one.
            let consumer_groups: Vec<(String, Vec<String>)> = shard
                .groups
                .iter()
                .filter_map(|(id, g)| match g {
                    Group::Consumer(g) => Some((id.clone(), g.expired(now_ms))),
                    Group::Classic(_) => None,
                })
                .filter(|(_, expired)| !expired.is_empty())
                .collect();
            for (id, expired) in consumer_groups {
                for member in expired {
                    effects.merge(fence_consumer_member(
                        shard, *p, &id, &member, now_ms, &config,
                    ));
                }
            }
        }
        effects
    }

    /// Expire the offsets of groups that have been empty for `offsets.retention.minutes`
    /// (Kafka's rule since 2.1), and forget empty groups left without offsets.
    pub fn expire_offsets(&mut self, now_ms: i64) -> Effects {
        let retention = self.config.offsets_retention_ms;
        let mut effects = Effects::default();
        for (p, shard) in self.shards.iter_mut() {
            let ids: Vec<String> = shard.groups.keys().cloned().collect();
            for id in ids {
                let Some(g) = shard.groups.get(&id) else {
                    continue;
                };
                if !g.is_empty() {
                    continue;
                }
                let empty_since = match g {
                    Group::Classic(c) => c.state_timestamp_ms,
                    Group::Consumer(c) => c.state_timestamp_ms,
                };
                // A partition with an OffsetCommit in flight is being committed now: its
                // tombstone would land after that commit's record (Kafka's
                // `removeExpiredOffsets` skips `pendingOffsetCommits` too).
                let expired: Vec<(String, i32)> = shard
                    .offsets
                    .get(&id)
                    .into_iter()
                    .flatten()
                    .filter(|(tp, v)| {
                        !shard.has_pending_commit(&id, tp)
                            && now_ms.saturating_sub(v.value.commit_timestamp_ms.max(empty_since))
                                >= retention
                    })
                    .map(|(k, _)| k.clone())
                    .collect();
                for tp in &expired {
                    shard.remove_offset(&id, tp);
                    effects.records.push((
                        *p,
                        Record {
                            key: records::offset_key(&id, &tp.0, tp.1),
                            value: None,
                        },
                    ));
                }
                if !shard.has_offsets(&id) {
                    let persisted = matches!(shard.groups.get(&id), Some(Group::Classic(c)) if c.generation > 0);
                    if let Some(Group::Consumer(g)) = shard.groups.remove(&id) {
                        effects
                            .records
                            .extend(g.tombstones().into_iter().map(|r| (*p, r)));
                    }
                    if persisted {
                        effects.records.push((
                            *p,
                            Record {
                                key: records::group_key(&id),
                                value: None,
                            },
                        ));
                    }
                }
            }
        }
        effects
    }

    /// If `partition` has had more than `snapshot_interval_records` appended since its last
    /// snapshot: every live record of the partition (the caller appends them, then drops
    /// everything before the first of them).
    pub fn snapshot_if_due(&mut self, partition: i32) -> Option<Vec<Record>> {
        let limit = self.config.snapshot_interval_records;
        let shard = self.shards.get_mut(&partition)?;
        // A snapshot raises the log start past the records it replaces: not while open
        // transactions have offsets whose records it would drop (their markers are to come).
        if shard.records_since_snapshot < limit || !shard.pending_txn.is_empty() {
            return None;
        }
        shard.records_since_snapshot = 0;
        let mut out = Vec::new();
        for (id, g) in &shard.groups {
            match g {
                Group::Classic(c) if c.generation > 0 => out.push(Record {
                    key: records::group_key(id),
                    value: Some(records::group_value(&c.to_record())),
                }),
                Group::Classic(_) => {}
                Group::Consumer(c) => out.extend(c.persisted_records()),
            }
        }
        out.extend(shard.newest_offset_records());
        Some(out)
    }

    /// Committed offsets of every group of the loaded partitions, for lag computation:
    /// (group, topic, partition, committed offset).
    pub fn all_committed(&self) -> Vec<(String, String, i32, i64)> {
        let mut out = Vec::new();
        for shard in self.shards.values() {
            for (g, offsets) in &shard.offsets {
                for ((t, p), v) in offsets {
                    out.push((g.clone(), t.clone(), *p, v.value.offset));
                }
            }
        }
        out.sort();
        out
    }

    /// Forget the offsets of a deleted topic (tombstones for every group): committed ones,
    /// ones of OffsetCommits still pending, and ones open transactions hold (whose COMMIT
    /// marker would otherwise bring them back; the tombstone drops them on replay too).
    pub fn topic_deleted(&mut self, topic: &str) -> Effects {
        let mut effects = Effects::default();
        for (p, shard) in self.shards.iter_mut() {
            let mut gone: BTreeSet<(String, i32)> = BTreeSet::new();
            let groups: BTreeSet<String> = shard
                .offsets
                .keys()
                .chain(shard.pending_commits.keys())
                .cloned()
                .collect();
            for g in groups {
                for tp in shard.offset_partitions(&g) {
                    if tp.0 == topic {
                        gone.insert((g.clone(), tp.1));
                    }
                }
            }
            for per_group in shard.pending_txn.values() {
                for (g, offsets) in per_group {
                    for tp in offsets.keys().filter(|(t, _)| t == topic) {
                        gone.insert((g.clone(), tp.1));
                    }
                }
            }
            for (g, partition) in gone {
                let tp = (topic.to_string(), partition);
                shard.remove_offset(&g, &tp);
                shard.drop_pending(&g, std::slice::from_ref(&tp));
                effects.records.push((
                    *p,
                    Record {
                        key: records::offset_key(&g, topic, partition),
                        value: None,
                    },
                ));
            }
        }
        effects
    }
}

#[cfg(test)]
mod migration_tests;
#[cfg(test)]
mod tests;

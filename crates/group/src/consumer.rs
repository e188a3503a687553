//! KIP-848 consumer groups: the broker computes the assignment.
//!
//! The group epoch bumps whenever membership, a subscription or the partition count of a
//! subscribed topic changes; the target assignment is recomputed (by the server-side
//! assignor) when the group epoch is ahead of the assignment epoch. Each member then moves
//! toward its target on its own heartbeats: first it is told to revoke partitions it must
//! give up (keeping its old member epoch), and once it acknowledges (its owned partitions no
//! longer include them) it takes the new epoch and every target partition that no other
//! member still owns.
//!
//! Invariant: a partition is never in the assigned or revoking set of two members at once.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use crate::assignor::{self, Assignment, TopicInfo};
use crate::classic::{
    ConvertedMember, JoinRequest, JoinResponse, LeaveMember, SyncRequest, SyncResponse,
};
use crate::protocol::{self, CONSUMER_PROTOCOL_TYPE};
use crate::records::{
    self, ClassicMemberMetadata, ConsumerAssignmentRecord, ConsumerMemberRecord, ConsumerValue,
    Record,
};
use crate::topic_regex::TopicRegex;
use crate::{GroupConfig, GroupError};

#[derive(Clone, Debug)]
pub struct ConsumerHeartbeat {
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topic_names: Option<Vec<String>>,
    pub subscribed_topic_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// Owned partitions by topic id (None = unchanged since the last heartbeat).
    pub owned: Option<Vec<(uuid::Uuid, Vec<i32>)>>,
    pub client_id: String,
    pub client_host: String,
}

#[derive(Clone, Debug, Default)]
pub struct ConsumerHeartbeatResponse {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// Present when the member's assignment changed since the last answer.
    pub assignment: Option<Vec<(uuid::Uuid, Vec<i32>)>>,
}

#[derive(Clone, Debug)]
pub struct ConsumerMemberView {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub member_epoch: i32,
    pub client_id: String,
    pub client_host: String,
    pub subscribed_topic_names: Vec<String>,
    pub subscribed_topic_regex: Option<String>,
    pub assignment: Vec<(uuid::Uuid, String, Vec<i32>)>,
    pub target_assignment: Vec<(uuid::Uuid, String, Vec<i32>)>,
    /// The member speaks the classic protocol (JoinGroup/SyncGroup/Heartbeat).
    pub classic: bool,
}

#[derive(Clone, Debug)]
pub struct ConsumerView {
    pub state: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub assignor: String,
    pub members: Vec<ConsumerMemberView>,
}

#[derive(Debug)]
pub(crate) struct Member {
    id: String,
    instance_id: Option<String>,
    rack_id: Option<String>,
    client_id: String,
    client_host: String,
    rebalance_timeout_ms: i32,
    pub(crate) subscribed: BTreeSet<String>,
    /// The member's regular expression subscription (KIP-848), beside `subscribed`.
    regex: Option<String>,
    assignor: Option<String>,
    epoch: i32,
    previous_epoch: i32,
    assigned: Assignment,
    revoking: Assignment,
    session_deadline_ms: i64,
    revoke_deadline_ms: Option<i64>,
    sent: Option<Assignment>,
    /// Set for a member that speaks the classic protocol.
    classic: Option<ClassicMember>,
}

/// What a consumer group keeps about a member speaking the classic protocol. Such a member
/// has no revocation deadline; instead it must rejoin within its rebalance timeout once told
/// REBALANCE_IN_PROGRESS, and send SyncGroup within it after its JoinGroup answer (Kafka's
/// join and sync timers). The timers are not persisted (nor are Kafka's).
#[derive(Clone, Debug)]
struct ClassicMember {
    meta: ClassicMemberMetadata,
    join_deadline_ms: Option<i64>,
    sync_deadline_ms: Option<i64>,
}

impl ClassicMember {
    fn new(meta: ClassicMemberMetadata) -> ClassicMember {
        ClassicMember {
            meta,
            join_deadline_ms: None,
            sync_deadline_ms: None,
        }
    }
    /// The protocol a consumer group answers this member with: its first.
    fn protocol(&self) -> (&str, &[u8]) {
        self.meta
            .protocols
            .first()
            .map(|(n, m)| (n.as_str(), &m[..]))
            .unwrap_or(("", &[]))
    }
}

impl Member {
    fn new(id: String, instance_id: Option<String>) -> Member {
        Member {
            id,
            instance_id,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout_ms: 0,
            subscribed: BTreeSet::new(),
            regex: None,
            assignor: None,
            epoch: 0,
            previous_epoch: 0,
            assigned: Assignment::new(),
            revoking: Assignment::new(),
            session_deadline_ms: 0,
            revoke_deadline_ms: None,
            sent: None,
            classic: None,
        }
    }

    pub(crate) fn uses_classic(&self) -> bool {
        self.classic.is_some()
    }

    /// Whether a heartbeat at `epoch` (not 0, -1 or -2) may go on: at the member's epoch, or
    /// at its previous one while it owns nothing beyond what it is assigned (the answer that
    /// moved it on was lost; Kafka accepts it). Otherwise the member is fenced.
    fn accepts_epoch(&self, epoch: i32, owned: Option<&Assignment>) -> bool {
        epoch == self.epoch
            || (epoch == self.previous_epoch
                && owned.is_some_and(|o| minus(o, &self.assigned).is_empty()))
    }

    /// Take in what a heartbeat says about the member: subscribed names and expression
    /// (None: unchanged; an empty expression ends it), assignor, rebalance timeout, rack and
    /// client; its session deadline restarts. Returns whether its subscription or assignor
    /// changed, which bumps the group epoch.
    fn take_in(&mut self, req: &ConsumerHeartbeat, now_ms: i64, config: &GroupConfig) -> bool {
        let mut changed = false;
        if let Some(names) = &req.subscribed_topic_names {
            let subscribed: BTreeSet<String> = names.iter().cloned().collect();
            if subscribed != self.subscribed {
                self.subscribed = subscribed;
                changed = true;
            }
        }
        if let Some(r) = &req.subscribed_topic_regex {
            let regex = (!r.is_empty()).then(|| r.clone());
            if regex != self.regex {
                self.regex = regex;
                changed = true;
            }
        }
        if req.server_assignor.is_some() && self.assignor != req.server_assignor {
            self.assignor = req.server_assignor.clone();
            changed = true;
        }
        if req.rebalance_timeout_ms >= 0 {
            self.rebalance_timeout_ms = req.rebalance_timeout_ms;
        }
        if req.rack_id.is_some() {
            self.rack_id = req.rack_id.clone();
        }
        if !req.client_id.is_empty() {
            self.client_id = req.client_id.clone();
            self.client_host = req.client_host.clone();
        }
        self.session_deadline_ms = now_ms + i64::from(config.consumer_session_timeout_ms);
        changed
    }

    /// Whether the heartbeat's answer carries the member's assignment: always when it joins,
    /// when the assignment changed since it was last sent, and when the member reports
    /// owning something else while nothing is being revoked from it (it lost track).
    fn assignment_due(&self, joining: bool, owned: Option<&Assignment>) -> bool {
        joining
            || self.sent.as_ref() != Some(&self.assigned)
            || owned.is_some_and(|o| *o != self.assigned && self.revoking.is_empty())
    }
}

/// The member a join (epoch 0) puts in the group under `member_id`, and whether the group
/// epoch bumps. One that inherits a static member's instance keeps what the old one owned:
/// a classic member replaced by a consumer-protocol one starts at epoch 0 (a bump, Kafka);
/// a consumer-protocol one resumes at the epoch it left with and its assignment is sent
/// again (no bump: the group did not change). A new member starts with nothing (a bump).
fn joined_member(
    inherited: Option<Member>,
    member_id: String,
    instance_id: Option<String>,
) -> (Member, bool) {
    match inherited {
        Some(mut m) if m.uses_classic() => {
            m.id = member_id;
            m.epoch = 0;
            m.previous_epoch = 0;
            m.classic = None;
            m.sent = None;
            (m, true)
        }
        Some(mut m) => {
            m.id = member_id;
            m.epoch = m.previous_epoch.max(0);
            m.sent = None;
            (m, false)
        }
        None => (Member::new(member_id, instance_id), true),
    }
}

/// The assignor a heartbeat asks for, which must be one `group.consumer.assignors` offers
/// (else UNSUPPORTED_ASSIGNOR); without one, the first offered (else `uniform`).
fn chosen_assignor(asked: Option<&String>, config: &GroupConfig) -> Result<String, GroupError> {
    match asked {
        Some(a) if !config.consumer_assignors.contains(a) => {
            Err(GroupError::UnsupportedAssignor(a.clone()))
        }
        Some(a) => Ok(a.clone()),
        None => Ok(config
            .consumer_assignors
            .first()
            .cloned()
            .unwrap_or_else(|| "uniform".into())),
    }
}

#[derive(Debug)]
pub(crate) struct ConsumerGroup {
    id: String,
    pub(crate) members: BTreeMap<String, Member>,
    group_epoch: i32,
    assignment_epoch: i32,
    target: BTreeMap<String, Assignment>,
    /// The subscribed topics (id, partition count) when the group epoch last bumped.
    subscribed_meta: BTreeMap<String, TopicInfo>,
    pub(crate) state_timestamp_ms: i64,
    assignor: String,
    /// The topics each subscription expression of a member matches, as last resolved against
    /// the topics (None until first resolved after the group was created or loaded). Kept in
    /// memory only: resolving again gives the same answer from the same topics.
    resolved: Option<BTreeMap<String, BTreeSet<String>>>,
    /// Compiled subscription expressions, by their text.
    compiled: BTreeMap<String, Option<TopicRegex>>,
    /// The group's live records as last handed out for `__consumer_offsets` (key -> value).
    persisted: BTreeMap<Bytes, Bytes>,
}

/// A consumer group's records read back from `__consumer_offsets`, in log order.
#[derive(Debug, Default)]
pub(crate) struct Loaded {
    epoch: Option<i32>,
    topics: Vec<(uuid::Uuid, String, i32)>,
    members: BTreeMap<String, ConsumerMemberRecord>,
    assignment_epoch: i32,
    target: BTreeMap<String, records::TopicPartitions>,
    current: BTreeMap<String, ConsumerAssignmentRecord>,
    raw: BTreeMap<Bytes, Bytes>,
}

impl Loaded {
    pub(crate) fn apply(&mut self, key: Bytes, value: Option<Bytes>, decoded: ConsumerValue) {
        match value {
            Some(v) => self.raw.insert(key, v),
            None => self.raw.remove(&key),
        };
        match decoded {
            ConsumerValue::Group(e) => self.epoch = e,
            ConsumerValue::PartitionMetadata(v) => {
                self.topics = v.unwrap_or_default();
            }
            ConsumerValue::Member(m, Some(v)) => {
                self.members.insert(m, v);
            }
            ConsumerValue::Member(m, None) => {
                self.members.remove(&m);
            }
            ConsumerValue::TargetMetadata(e) => self.assignment_epoch = e.unwrap_or(0),
            ConsumerValue::TargetMember(m, Some(v)) => {
                self.target.insert(m, v);
            }
            ConsumerValue::TargetMember(m, None) => {
                self.target.remove(&m);
            }
            ConsumerValue::Current(m, Some(v)) => {
                self.current.insert(m, v);
            }
            ConsumerValue::Current(m, None) => {
                self.current.remove(&m);
            }
        }
    }
}

fn to_wire(a: &Assignment) -> Vec<(uuid::Uuid, Vec<i32>)> {
    a.iter()
        .filter(|(_, p)| !p.is_empty())
        .map(|(t, p)| (*t, p.iter().copied().collect()))
        .collect()
}

fn from_wire(v: &[(uuid::Uuid, Vec<i32>)]) -> Assignment {
    let mut a = Assignment::new();
    for (t, ps) in v {
        a.entry(*t).or_default().extend(ps.iter().copied());
    }
    a.retain(|_, p| !p.is_empty());
    a
}

fn minus(a: &Assignment, b: &Assignment) -> Assignment {
    let mut out = Assignment::new();
    for (t, ps) in a {
        let rest: BTreeSet<i32> = match b.get(t) {
            Some(bs) => ps.difference(bs).copied().collect(),
            None => ps.clone(),
        };
        if !rest.is_empty() {
            out.insert(*t, rest);
        }
    }
    out
}

fn intersect(a: &Assignment, b: &Assignment) -> Assignment {
    let mut out = Assignment::new();
    for (t, ps) in a {
        if let Some(bs) = b.get(t) {
            let both: BTreeSet<i32> = ps.intersection(bs).copied().collect();
            if !both.is_empty() {
                out.insert(*t, both);
            }
        }
    }
    out
}

fn contains(a: &Assignment, t: &uuid::Uuid, p: i32) -> bool {
    a.get(t).is_some_and(|s| s.contains(&p))
}

impl ConsumerGroup {
    pub(crate) fn new(id: String, now_ms: i64) -> ConsumerGroup {
        ConsumerGroup {
            id,
            members: BTreeMap::new(),
            group_epoch: 0,
            assignment_epoch: 0,
            target: BTreeMap::new(),
            subscribed_meta: BTreeMap::new(),
            state_timestamp_ms: now_ms,
            assignor: String::new(),
            resolved: None,
            compiled: BTreeMap::new(),
            persisted: BTreeMap::new(),
        }
    }

    /// Rebuild a group from its records (None when its metadata record is absent or
    /// deleted). Members get a fresh session timeout, as after a coordinator failover.
    pub(crate) fn from_loaded(
        id: String,
        l: Loaded,
        now_ms: i64,
        config: &GroupConfig,
    ) -> Option<ConsumerGroup> {
        let group_epoch = l.epoch?;
        let mut members = BTreeMap::new();
        for (mid, r) in l.members {
            let cur = l.current.get(&mid);
            let revoking = cur.map(|c| from_wire(&c.revoking)).unwrap_or_default();
            members.insert(
                mid.clone(),
                Member {
                    id: mid,
                    instance_id: r.instance_id,
                    rack_id: r.rack_id,
                    client_id: r.client_id,
                    client_host: r.client_host,
                    rebalance_timeout_ms: r.rebalance_timeout_ms,
                    subscribed: r.subscribed_topic_names.into_iter().collect(),
                    regex: r.subscribed_topic_regex,
                    assignor: r.server_assignor,
                    epoch: cur.map_or(0, |c| c.member_epoch),
                    previous_epoch: cur.map_or(0, |c| c.previous_member_epoch),
                    assigned: cur.map(|c| from_wire(&c.assigned)).unwrap_or_default(),
                    revoke_deadline_ms: (!revoking.is_empty() && r.classic.is_none())
                        .then(|| now_ms + i64::from(r.rebalance_timeout_ms.max(1000))),
                    revoking,
                    session_deadline_ms: now_ms
                        + i64::from(
                            r.classic
                                .as_ref()
                                .map_or(config.consumer_session_timeout_ms, |c| {
                                    c.session_timeout_ms
                                }),
                        ),
                    sent: None,
                    classic: r.classic.map(ClassicMember::new),
                },
            );
        }
        let target = l
            .target
            .into_iter()
            .filter(|(m, _)| members.contains_key(m))
            .map(|(m, a)| (m, from_wire(&a)))
            .collect();
        let mut g = ConsumerGroup {
            id,
            members,
            group_epoch,
            assignment_epoch: l.assignment_epoch,
            target,
            subscribed_meta: l
                .topics
                .into_iter()
                .map(|(tid, name, partitions)| {
                    (
                        name,
                        TopicInfo {
                            id: tid,
                            partitions,
                        },
                    )
                })
                .collect(),
            state_timestamp_ms: now_ms,
            assignor: String::new(),
            resolved: None,
            compiled: BTreeMap::new(),
            persisted: l.raw,
        };
        g.assignor = g.voted_assignor().unwrap_or_default();
        Some(g)
    }

    /// The assignor most members asked for.
    fn voted_assignor(&self) -> Option<String> {
        let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some(a) = &m.assignor {
                *votes.entry(a.as_str()).or_default() += 1;
            }
        }
        votes
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(a, _)| a.to_string())
    }

    /// Every live record of the group, as Kafka's coordinator writes them.
    pub(crate) fn live_records(&self) -> BTreeMap<Bytes, Bytes> {
        let id = self.id.as_str();
        let key = |v: i16, m: Option<&str>| records::consumer_key(v, id, m);
        let mut out = BTreeMap::new();
        out.insert(
            key(records::CONSUMER_GROUP_KEY_VERSION, None),
            records::consumer_epoch_value(self.group_epoch),
        );
        let topics: Vec<(uuid::Uuid, String, i32)> = self
            .subscribed_meta
            .iter()
            .map(|(n, t)| (t.id, n.clone(), t.partitions))
            .collect();
        out.insert(
            key(records::CONSUMER_PARTITION_META_KEY_VERSION, None),
            records::consumer_partition_meta_value(&topics),
        );
        for m in self.members.values() {
            out.insert(
                key(records::CONSUMER_MEMBER_KEY_VERSION, Some(&m.id)),
                records::consumer_member_value(&ConsumerMemberRecord {
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.subscribed.iter().cloned().collect(),
                    subscribed_topic_regex: m.regex.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    server_assignor: m.assignor.clone(),
                    classic: m.classic.as_ref().map(|c| c.meta.clone()),
                }),
            );
            let state = if !m.revoking.is_empty() {
                2
            } else if Some(&m.assigned) != self.target.get(&m.id) {
                3
            } else {
                1
            };
            out.insert(
                key(records::CONSUMER_CURRENT_KEY_VERSION, Some(&m.id)),
                records::consumer_current_value(&ConsumerAssignmentRecord {
                    member_epoch: m.epoch,
                    previous_member_epoch: m.previous_epoch,
                    state,
                    assigned: to_wire(&m.assigned),
                    revoking: to_wire(&m.revoking),
                }),
            );
        }
        out.insert(
            key(records::CONSUMER_TARGET_META_KEY_VERSION, None),
            records::consumer_epoch_value(self.assignment_epoch),
        );
        for (mid, a) in &self.target {
            out.insert(
                key(records::CONSUMER_TARGET_MEMBER_KEY_VERSION, Some(mid)),
                records::consumer_target_member_value(&to_wire(a)),
            );
        }
        out
    }

    /// The records that bring `__consumer_offsets` up to the group's current state (changed
    /// records, tombstones for removed ones).
    pub(crate) fn take_records(&mut self) -> Vec<Record> {
        let live = self.live_records();
        let mut out: Vec<Record> = live
            .iter()
            .filter(|(k, v)| self.persisted.get(*k) != Some(*v))
            .map(|(k, v)| Record {
                key: k.clone(),
                value: Some(v.clone()),
            })
            .collect();
        out.extend(
            self.persisted
                .keys()
                .filter(|k| !live.contains_key(*k))
                .map(|k| Record {
                    key: k.clone(),
                    value: None,
                }),
        );
        self.persisted = live;
        out
    }

    /// The group's records as persisted (for a snapshot).
    pub(crate) fn persisted_records(&self) -> Vec<Record> {
        self.persisted
            .iter()
            .map(|(k, v)| Record {
                key: k.clone(),
                value: Some(v.clone()),
            })
            .collect()
    }

    /// Tombstones for every persisted record (the group is deleted or converted).
    pub(crate) fn tombstones(&self) -> Vec<Record> {
        self.persisted
            .keys()
            .map(|k| Record {
                key: k.clone(),
                value: None,
            })
            .collect()
    }

    pub(crate) fn state_name(&self) -> &'static str {
        if self.members.is_empty() {
            "Empty"
        } else if self.group_epoch > self.assignment_epoch {
            "Assigning"
        } else if self.members.values().any(|m| {
            m.epoch != self.assignment_epoch
                || !m.revoking.is_empty()
                || Some(&m.assigned) != self.target.get(&m.id)
        }) {
            "Reconciling"
        } else {
            "Stable"
        }
    }

    fn bump(&mut self, now_ms: i64) {
        self.group_epoch += 1;
        self.state_timestamp_ms = now_ms;
    }

    fn remove_member(&mut self, id: &str, now_ms: i64) {
        if self.members.remove(id).is_some() {
            self.target.remove(id);
            self.bump(now_ms);
        }
    }

    /// A KIP-848 ConsumerGroupHeartbeat, in steps: the assignor it asks for must be offered
    /// and a new subscription expression must compile, before anything changes; then the
    /// member joins (epoch 0), leaves (-1, or -2 for a static member leaving for a while) or
    /// is checked against its epoch (fenced otherwise); its fields are taken in; the group
    /// epoch and target assignment follow ([`ConsumerGroup::refresh`]); the member moves
    /// toward its target ([`ConsumerGroup::reconcile`], which keeps the module's invariant:
    /// no partition is assigned to or being revoked from two members at once); the answer
    /// carries the assignment when the member needs it.
    pub(crate) fn heartbeat(
        &mut self,
        req: ConsumerHeartbeat,
        topics: &BTreeMap<String, TopicInfo>,
        now_ms: i64,
        config: &GroupConfig,
    ) -> Result<ConsumerHeartbeatResponse, GroupError> {
        let assignor_name = chosen_assignor(req.server_assignor.as_ref(), config)?;
        self.compile_new_regex(req.subscribed_topic_regex.as_deref())?;
        let (member_id, bump) = match req.member_epoch {
            0 => self.join(&req, config)?,
            -1 | -2 => return self.leave(&req, now_ms, config),
            epoch => {
                let m = self
                    .members
                    .get(&req.member_id)
                    .ok_or(GroupError::UnknownMemberId)?;
                let owned = req.owned.as_deref().map(from_wire);
                if !m.accepts_epoch(epoch, owned.as_ref()) {
                    return Err(GroupError::FencedMemberEpoch);
                }
                (req.member_id.clone(), false)
            }
        };
        let mut changed = false;
        if let Some(m) = self.members.get_mut(&member_id) {
            changed = m.take_in(&req, now_ms, config);
        }
        self.refresh(bump || changed, topics, now_ms, assignor_name);
        let owned = req.owned.as_deref().map(from_wire);
        self.reconcile(&member_id, owned.as_ref(), now_ms);
        let Some(m) = self.members.get_mut(&member_id) else {
            return Err(GroupError::UnknownMemberId);
        };
        let send = m.assignment_due(req.member_epoch == 0, owned.as_ref());
        let assignment = send.then(|| to_wire(&m.assigned));
        m.sent = Some(m.assigned.clone());
        Ok(ConsumerHeartbeatResponse {
            member_id,
            member_epoch: m.epoch,
            heartbeat_interval_ms: config.consumer_heartbeat_interval_ms,
            assignment,
        })
    }

    /// A heartbeat's subscription expression, compiled the first time it is seen (and
    /// refused, INVALID_REGULAR_EXPRESSION, when invalid) before anything else changes, so
    /// that a refused heartbeat leaves the group as it was. An empty expression ends a
    /// subscription and compiles nothing.
    fn compile_new_regex(&mut self, regex: Option<&str>) -> Result<(), GroupError> {
        if let Some(r) = regex.filter(|r| !r.is_empty()) {
            if !self.compiled.contains_key(r) {
                let compiled = TopicRegex::new(r).map_err(GroupError::InvalidRegularExpression)?;
                self.compiled.insert(r.to_string(), Some(compiled));
            }
        }
        Ok(())
    }

    /// A member joining or rejoining (epoch 0): it must name a subscription; without a member
    /// id it gets a new one. A static member takes over its instance's previous member
    /// ([`ConsumerGroup::take_over_instance`]); a member rejoining under its own id starts
    /// over with nothing owned; a member that inherits nothing must fit under
    /// `group.consumer.max.size`. Returns the member's id and whether the group epoch bumps.
    fn join(
        &mut self,
        req: &ConsumerHeartbeat,
        config: &GroupConfig,
    ) -> Result<(String, bool), GroupError> {
        if req.subscribed_topic_names.is_none() && req.subscribed_topic_regex.is_none() {
            return Err(GroupError::InvalidRequest(
                "SubscribedTopicNames or SubscribedTopicRegex must be set when joining".into(),
            ));
        }
        let member_id = if req.member_id.is_empty() {
            uuid::Uuid::new_v4().to_string()
        } else {
            req.member_id.clone()
        };
        let inherited = match &req.instance_id {
            Some(instance) => self.take_over_instance(instance, &member_id)?,
            None => None,
        };
        let mut bump = false;
        if self.members.remove(&member_id).is_some() {
            // Rejoining with epoch 0: start over with nothing owned.
            self.target.remove(&member_id);
            bump = true;
        }
        if inherited.is_none() && self.members.len() >= config.consumer_max_size {
            return Err(GroupError::GroupMaxSizeReached);
        }
        let (m, new) = joined_member(inherited, member_id.clone(), req.instance_id.clone());
        self.members.insert(member_id.clone(), m);
        Ok((member_id, bump || new))
    }

    /// Static membership: the member that holds `instance` under another id than
    /// `member_id` is removed, to be inherited by `member_id`, and its target assignment
    /// moves with it. Refused (UNRELEASED_INSTANCE_ID), changing nothing, while that member
    /// has not left for a while (epoch -2), unless it speaks the classic protocol (Kafka
    /// takes a classic member's instance over at once).
    fn take_over_instance(
        &mut self,
        instance: &str,
        member_id: &str,
    ) -> Result<Option<Member>, GroupError> {
        let holder = self
            .members
            .values()
            .find(|m| m.instance_id.as_deref() == Some(instance) && m.id != member_id)
            .map(|m| (m.id.clone(), m.epoch));
        let Some((old, epoch)) = holder else {
            return Ok(None);
        };
        let classic = self.members.get(&old).is_some_and(Member::uses_classic);
        if epoch != -2 && !classic {
            return Err(GroupError::UnreleasedInstanceId);
        }
        let inherited = self.members.remove(&old);
        if let Some(t) = self.target.remove(&old) {
            self.target.insert(member_id.to_string(), t);
        }
        Ok(inherited)
    }

    /// A member leaving (epoch -1, or -2 without an instance id): removed, and the group
    /// epoch bumps. A static member leaving for a while (-2 with an instance id) keeps its
    /// assignment until its session times out. The answer echoes the epoch.
    fn leave(
        &mut self,
        req: &ConsumerHeartbeat,
        now_ms: i64,
        config: &GroupConfig,
    ) -> Result<ConsumerHeartbeatResponse, GroupError> {
        let member_id = req.member_id.clone();
        if !self.members.contains_key(&member_id) {
            return Err(GroupError::UnknownMemberId);
        }
        if req.member_epoch == -2 && req.instance_id.is_some() {
            if let Some(m) = self.members.get_mut(&member_id) {
                m.previous_epoch = m.epoch;
                m.epoch = -2;
                m.session_deadline_ms = now_ms + i64::from(config.consumer_session_timeout_ms);
            }
        } else {
            self.remove_member(&member_id, now_ms);
        }
        Ok(ConsumerHeartbeatResponse {
            member_id,
            member_epoch: req.member_epoch,
            heartbeat_interval_ms: 0,
            assignment: None,
        })
    }

    /// After a member changed: recompute the subscribed topics' metadata, bump the group epoch
    /// if it or a subscription (`bump`) changed, and recompute the target assignment when the
    /// group epoch is ahead of it.
    fn refresh(
        &mut self,
        mut bump: bool,
        topics: &BTreeMap<String, TopicInfo>,
        now_ms: i64,
        default_assignor: String,
    ) {
        let first_resolution = self.resolved.is_none();
        let resolved = self.resolve_regexes(topics);
        if self.resolved.as_ref() != Some(&resolved) {
            // A topic now matches or no longer matches some member's expression: its
            // subscription changed (after a load, the resolution is only rebuilt).
            bump |= !first_resolution;
            self.resolved = Some(resolved);
        }
        let subs = self.subscriptions();
        let meta: BTreeMap<String, TopicInfo> = subs
            .values()
            .flatten()
            .filter_map(|t| topics.get(t).map(|i| (t.clone(), i.clone())))
            .collect();
        if meta != self.subscribed_meta {
            self.subscribed_meta = meta;
            bump = true;
        }
        if bump {
            self.bump(now_ms);
        }
        // The assignor: the one most members asked for, else the default.
        self.assignor = self.voted_assignor().unwrap_or(default_assignor);
        if self.group_epoch > self.assignment_epoch {
            self.target = assignor::assign(&self.assignor, &subs, &self.target, topics);
            self.assignment_epoch = self.group_epoch;
        }
    }

    /// The topics each member's expression matches among `topics` (every topic the broker
    /// has, internal ones included, as Kafka resolves them). An expression that does not
    /// compile (one persisted by Kafka in RE2/J syntax the `regex` crate refuses) matches
    /// nothing.
    fn resolve_regexes(
        &mut self,
        topics: &BTreeMap<String, TopicInfo>,
    ) -> BTreeMap<String, BTreeSet<String>> {
        let used: BTreeSet<String> = self
            .members
            .values()
            .filter_map(|m| m.regex.clone())
            .collect();
        self.compiled.retain(|r, _| used.contains(r));
        let mut out = BTreeMap::new();
        for r in used {
            let compiled = self
                .compiled
                .entry(r.clone())
                .or_insert_with(|| TopicRegex::new(&r).ok());
            let matched: BTreeSet<String> = match compiled {
                Some(c) => topics.keys().filter(|t| c.matches(t)).cloned().collect(),
                None => BTreeSet::new(),
            };
            out.insert(r, matched);
        }
        out
    }

    /// Every member's subscription: the topics it names and those its expression matched
    /// when last resolved.
    fn subscriptions(&self) -> BTreeMap<String, BTreeSet<String>> {
        self.members
            .values()
            .map(|m| {
                let mut s = m.subscribed.clone();
                if let (Some(r), Some(resolved)) = (&m.regex, &self.resolved) {
                    if let Some(ts) = resolved.get(r) {
                        s.extend(ts.iter().cloned());
                    }
                }
                (m.id.clone(), s)
            })
            .collect()
    }

    /// The topics any member subscribes to (by name or by a resolved expression).
    pub(crate) fn subscribed_topics(&self) -> BTreeSet<String> {
        self.subscriptions().into_values().flatten().collect()
    }

    fn owned_by_other(&self, id: &str, topic: &uuid::Uuid, p: i32) -> bool {
        self.members.values().any(|m| {
            m.id != id && (contains(&m.assigned, topic, p) || contains(&m.revoking, topic, p))
        })
    }

    fn reconcile(&mut self, id: &str, owned: Option<&Assignment>, now_ms: i64) {
        let target = self.target.get(id).cloned().unwrap_or_default();
        let assignment_epoch = self.assignment_epoch;
        let Some(m) = self.members.get(id) else {
            return;
        };
        let mut assigned = m.assigned.clone();
        let mut revoking = m.revoking.clone();
        let mut epoch = m.epoch;
        let mut revoke_deadline = m.revoke_deadline_ms;
        if !revoking.is_empty() {
            if let Some(o) = owned {
                if intersect(o, &revoking).is_empty() {
                    revoking.clear();
                    revoke_deadline = None;
                }
            }
        }
        if revoking.is_empty() && (epoch != assignment_epoch || assigned != target) {
            let keep = intersect(&assigned, &target);
            let revoke = minus(&assigned, &target);
            // As Kafka: a member that already reports not owning what it must give up (an
            // eager classic member rejoining with nothing) skips the revocation step.
            let still_owned = owned.is_none_or(|o| !intersect(o, &revoke).is_empty());
            if !revoke.is_empty() && still_owned {
                assigned = keep;
                revoking = revoke;
                // Classic members have join and sync timers instead.
                revoke_deadline = m
                    .classic
                    .is_none()
                    .then(|| now_ms + i64::from(m.rebalance_timeout_ms.max(1000)));
            } else {
                let mut next = keep;
                for (t, ps) in &target {
                    for p in ps {
                        if !contains(&next, t, *p) && !self.owned_by_other(id, t, *p) {
                            next.entry(*t).or_default().insert(*p);
                        }
                    }
                }
                assigned = next;
                if epoch != assignment_epoch {
                    if let Some(m) = self.members.get_mut(id) {
                        m.previous_epoch = m.epoch;
                    }
                    epoch = assignment_epoch;
                }
            }
        }
        if let Some(m) = self.members.get_mut(id) {
            m.assigned = assigned;
            m.revoking = revoking;
            m.epoch = epoch;
            m.revoke_deadline_ms = revoke_deadline;
        }
    }

    /// Members whose session, revocation, join or sync deadline passed (to be fenced).
    pub(crate) fn expired(&self, now_ms: i64) -> Vec<String> {
        let due = |d: Option<i64>| d.is_some_and(|d| d <= now_ms);
        self.members
            .values()
            .filter(|m| {
                m.session_deadline_ms <= now_ms
                    || due(m.revoke_deadline_ms)
                    || m.classic
                        .as_ref()
                        .is_some_and(|c| due(c.join_deadline_ms) || due(c.sync_deadline_ms))
            })
            .map(|m| m.id.clone())
            .collect()
    }

    /// Fence a member (session or rebalance timeout): remove it and bump the group epoch.
    pub(crate) fn fence(&mut self, id: &str, now_ms: i64) {
        self.remove_member(id, now_ms);
    }

    pub(crate) fn validate_commit(&self, member_id: &str, epoch: i32) -> Result<(), GroupError> {
        if epoch < 0 && self.members.is_empty() {
            return Ok(());
        }
        self.validate_fetch(member_id, epoch)
    }

    /// A member's epoch check: a classic member's generation is its member epoch
    /// (ILLEGAL_GENERATION on a mismatch), a consumer-protocol member gets STALE_MEMBER_EPOCH.
    pub(crate) fn validate_fetch(&self, member_id: &str, epoch: i32) -> Result<(), GroupError> {
        let m = self
            .members
            .get(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        if epoch != m.epoch {
            return Err(if m.uses_classic() {
                GroupError::IllegalGeneration
            } else {
                GroupError::StaleMemberEpoch
            });
        }
        Ok(())
    }

    pub(crate) fn view(
        &self,
        topics: &BTreeMap<String, TopicInfo>,
        config: &GroupConfig,
    ) -> ConsumerView {
        let names: BTreeMap<uuid::Uuid, &String> = topics.iter().map(|(n, i)| (i.id, n)).collect();
        let named = |a: &Assignment| {
            a.iter()
                .map(|(t, ps)| {
                    (
                        *t,
                        names.get(t).map(|s| s.to_string()).unwrap_or_default(),
                        ps.iter().copied().collect(),
                    )
                })
                .collect()
        };
        let _ = &self.id;
        ConsumerView {
            state: self.state_name().to_string(),
            group_epoch: self.group_epoch,
            assignment_epoch: self.assignment_epoch,
            assignor: if self.assignor.is_empty() {
                config
                    .consumer_assignors
                    .first()
                    .cloned()
                    .unwrap_or_default()
            } else {
                self.assignor.clone()
            },
            members: self
                .members
                .values()
                .map(|m| ConsumerMemberView {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    rack_id: m.rack_id.clone(),
                    member_epoch: m.epoch,
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    subscribed_topic_names: m.subscribed.iter().cloned().collect(),
                    subscribed_topic_regex: m.regex.clone(),
                    assignment: named(&m.assigned),
                    target_assignment: named(&self.target.get(&m.id).cloned().unwrap_or_default()),
                    classic: m.uses_classic(),
                })
                .collect(),
        }
    }
}

/// Classic-protocol members of a consumer group (Kafka's online migration), and conversion
/// from and to a classic group.
impl ConsumerGroup {
    /// Topic id -> name of the subscribed topics.
    fn topic_names(&self) -> BTreeMap<uuid::Uuid, String> {
        self.subscribed_meta
            .iter()
            .map(|(n, t)| (t.id, n.clone()))
            .collect()
    }

    fn by_name(&self, a: &Assignment) -> Vec<(String, Vec<i32>)> {
        let names = self.topic_names();
        a.iter()
            .filter_map(|(t, ps)| Some((names.get(t)?.clone(), ps.iter().copied().collect())))
            .collect()
    }

    pub(crate) fn classic_members(&self) -> usize {
        self.members.values().filter(|m| m.uses_classic()).count()
    }

    /// Kafka's `supportsClassicProtocols`: protocol type `consumer`, and (unless the group is
    /// empty) one of the protocols is supported by every classic member.
    fn supports_classic(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if protocol_type != CONSUMER_PROTOCOL_TYPE || protocols.is_empty() {
            return false;
        }
        protocols.iter().any(|(name, _)| {
            self.members.values().all(|m| {
                m.classic
                    .as_ref()
                    .is_none_or(|c| c.meta.protocols.iter().any(|(n, _)| n == name))
            })
        })
    }

    /// Find a member for SyncGroup/Heartbeat/LeaveGroup: by instance id when given (a
    /// different member id holding it is FENCED_INSTANCE_ID), else by member id.
    fn classic_member_id(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<String, GroupError> {
        let id = match instance_id {
            Some(i) => {
                let m = self
                    .members
                    .values()
                    .find(|m| m.instance_id.as_deref() == Some(i))
                    .ok_or(GroupError::UnknownMemberId)?;
                if m.id != member_id {
                    return Err(GroupError::FencedInstanceId);
                }
                m.id.clone()
            }
            None => {
                if !self.members.contains_key(member_id) {
                    return Err(GroupError::UnknownMemberId);
                }
                member_id.to_string()
            }
        };
        match self.members.get(&id) {
            Some(m) if m.uses_classic() => Ok(id),
            _ => Err(GroupError::UnknownMemberId),
        }
    }

    /// Partitions of the member's target that it has not got yet and that no other member
    /// holds any more: it should rejoin to take them (Kafka: UNRELEASED_PARTITIONS and not
    /// waiting on an unreleased partition).
    fn can_take_released(&self, m: &Member) -> bool {
        if m.epoch != self.assignment_epoch || !m.revoking.is_empty() {
            return false;
        }
        let target = self.target.get(&m.id).cloned().unwrap_or_default();
        let missing = minus(&target, &m.assigned);
        !missing.is_empty()
            && missing
                .iter()
                .all(|(t, ps)| ps.iter().all(|p| !self.owned_by_other(&m.id, t, *p)))
    }

    /// JoinGroup from a classic member (Kafka's `classicGroupJoinToConsumerGroup`): the
    /// member's subscription and owned partitions come from its protocol metadata; it is
    /// reconciled like a consumer-protocol member and answered at once with its member epoch
    /// as the generation, no leader and no member list (the assignment is the coordinator's).
    pub(crate) fn classic_join(
        &mut self,
        req: &JoinRequest,
        topics: &BTreeMap<String, TopicInfo>,
        now_ms: i64,
        config: &GroupConfig,
    ) -> Result<JoinResponse, GroupError> {
        let unknown = req.member_id.is_empty();
        let member_id = if unknown {
            uuid::Uuid::new_v4().to_string()
        } else {
            req.member_id.clone()
        };
        if !self.members.contains_key(&member_id) && self.members.len() >= config.consumer_max_size
        {
            return Err(GroupError::GroupMaxSizeReached);
        }
        if !self.supports_classic(&req.protocol_type, &req.protocols) {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        if unknown && req.require_known_member_id && req.instance_id.is_none() {
            return Ok(JoinResponse {
                error: Some(GroupError::MemberIdRequired),
                generation: -1,
                member_id,
                ..Default::default()
            });
        }
        let subscription = req
            .protocols
            .first()
            .and_then(|(_, m)| protocol::decode_subscription(m))
            .ok_or_else(|| {
                GroupError::Internal("malformed embedded consumer protocol subscription".into())
            })?;
        let mut bump = self.place_classic_member(req, unknown, &member_id)?;
        let Some(m) = self.members.get_mut(&member_id) else {
            return Err(GroupError::UnknownMemberId);
        };
        bump |= take_classic_join(m, req, &subscription, now_ms);
        let default_assignor = config
            .consumer_assignors
            .first()
            .cloned()
            .unwrap_or_else(|| "uniform".into());
        self.refresh(bump, topics, now_ms, default_assignor);
        let mut owned = Assignment::new();
        for (topic, ps) in &subscription.owned {
            if let Some(t) = topics.get(topic) {
                owned.entry(t.id).or_default().extend(ps.iter().copied());
            }
        }
        self.reconcile(&member_id, Some(&owned), now_ms);
        let m = self
            .members
            .get(&member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        let protocol = m
            .classic
            .as_ref()
            .map(|c| c.protocol().0.to_string())
            .unwrap_or_default();
        Ok(JoinResponse {
            error: None,
            generation: m.epoch,
            protocol_type: Some(CONSUMER_PROTOCOL_TYPE.into()),
            protocol: Some(protocol),
            leader: String::new(),
            skip_assignment: false,
            member_id,
            members: Vec::new(),
        })
    }

    /// A classic JoinGroup's member: found, created (a new dynamic member, or a static
    /// instance seen for the first time), or, for a static instance rejoining without its
    /// member id, the old member replaced by a new id that takes over its place and assignment
    /// from epoch 0. A known id whose instance another member holds is fenced
    /// (FENCED_INSTANCE_ID), as Kafka does. Returns whether the group's membership changed.
    fn place_classic_member(
        &mut self,
        req: &JoinRequest,
        unknown: bool,
        member_id: &str,
    ) -> Result<bool, GroupError> {
        let mut bump = false;
        match &req.instance_id {
            None => {
                if !self.members.contains_key(member_id) {
                    self.members.insert(
                        member_id.to_string(),
                        Member::new(member_id.to_string(), None),
                    );
                    bump = true;
                }
            }
            Some(instance) => {
                let holder = self
                    .members
                    .values()
                    .find(|m| m.instance_id.as_ref() == Some(instance))
                    .map(|m| m.id.clone());
                match (unknown, holder) {
                    (true, None) => {
                        self.members.insert(
                            member_id.to_string(),
                            Member::new(member_id.to_string(), Some(instance.clone())),
                        );
                        bump = true;
                    }
                    (true, Some(old)) => {
                        // The new instance takes over the old one's place and assignment,
                        // starting again from epoch 0.
                        if let Some(mut m) = self.members.remove(&old) {
                            m.id = member_id.to_string();
                            m.epoch = 0;
                            m.previous_epoch = 0;
                            m.sent = None;
                            self.members.insert(member_id.to_string(), m);
                        }
                        if let Some(t) = self.target.remove(&old) {
                            self.target.insert(member_id.to_string(), t);
                        }
                    }
                    (false, None) => return Err(GroupError::UnknownMemberId),
                    (false, Some(old)) if old != *member_id => {
                        return Err(GroupError::FencedInstanceId)
                    }
                    (false, Some(_)) => {}
                }
            }
        }
        Ok(bump)
    }

    /// Kafka's `throwIfRebalanceInProgress`: the group moved on since the member's epoch and
    /// the member is not in the middle of a revocation; it must rejoin (within its rebalance
    /// timeout, else it is fenced).
    fn rejoin_needed(&mut self, id: &str, now_ms: i64) -> Result<(), GroupError> {
        let group_epoch = self.group_epoch;
        let Some(m) = self.members.get_mut(id) else {
            return Err(GroupError::UnknownMemberId);
        };
        if group_epoch > m.epoch && m.revoking.is_empty() {
            let timeout = i64::from(m.rebalance_timeout_ms.max(0));
            if let Some(c) = m.classic.as_mut() {
                c.join_deadline_ms.get_or_insert(now_ms + timeout);
            }
            return Err(GroupError::RebalanceInProgress);
        }
        Ok(())
    }

    /// SyncGroup from a classic member: its current assignment (never the target directly:
    /// partitions still held by others come on a later rejoin), in the version of its
    /// subscription.
    pub(crate) fn classic_sync(
        &mut self,
        req: &SyncRequest,
        now_ms: i64,
    ) -> Result<SyncResponse, GroupError> {
        let id = self.classic_member_id(&req.member_id, req.instance_id.as_deref())?;
        let m = self.members.get(&id).ok_or(GroupError::UnknownMemberId)?;
        if req.generation != m.epoch {
            return Err(GroupError::IllegalGeneration);
        }
        let (protocol, metadata) = m
            .classic
            .as_ref()
            .map(|c| c.protocol())
            .unwrap_or(("", &[]));
        if req
            .protocol_type
            .as_deref()
            .is_some_and(|t| t != CONSUMER_PROTOCOL_TYPE)
            || req.protocol.as_deref().is_some_and(|p| p != protocol)
        {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        let version = protocol::version_of(metadata);
        self.rejoin_needed(&id, now_ms)?;
        let m = self.members.get(&id).ok_or(GroupError::UnknownMemberId)?;
        let assignment = protocol::encode_assignment(version, &self.by_name(&m.assigned));
        if let Some(m) = self.members.get_mut(&id) {
            if let Some(c) = m.classic.as_mut() {
                c.sync_deadline_ms = None;
                m.session_deadline_ms = now_ms + i64::from(c.meta.session_timeout_ms);
            }
            m.sent = Some(m.assigned.clone());
        }
        Ok(SyncResponse {
            error: None,
            protocol_type: req.protocol_type.clone(),
            protocol: req.protocol.clone(),
            assignment,
        })
    }

    /// Heartbeat from a classic member: REBALANCE_IN_PROGRESS when it must rejoin (the group
    /// epoch moved past its epoch, it must revoke partitions, or partitions it waits for
    /// were released).
    pub(crate) fn classic_heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now_ms: i64,
    ) -> Result<(), GroupError> {
        let id = self.classic_member_id(member_id, instance_id)?;
        let group_epoch = self.group_epoch;
        let m = self.members.get(&id).ok_or(GroupError::UnknownMemberId)?;
        if generation != m.epoch {
            return Err(GroupError::IllegalGeneration);
        }
        let rejoin = m.epoch < group_epoch || !m.revoking.is_empty() || self.can_take_released(m);
        if let Some(m) = self.members.get_mut(&id) {
            if let Some(c) = m.classic.as_ref() {
                m.session_deadline_ms = now_ms + i64::from(c.meta.session_timeout_ms);
            }
            if rejoin {
                let timeout = i64::from(m.rebalance_timeout_ms.max(0));
                if let Some(c) = m.classic.as_mut() {
                    c.join_deadline_ms.get_or_insert(now_ms + timeout);
                }
            }
        }
        if rejoin {
            return Err(GroupError::RebalanceInProgress);
        }
        Ok(())
    }

    /// LeaveGroup of classic members: each must be a classic member (by member id, or by
    /// instance id for a static one); the group epoch bumps once if any left.
    pub(crate) fn classic_leave(
        &mut self,
        members: &[LeaveMember],
        now_ms: i64,
    ) -> Vec<Result<(), GroupError>> {
        let mut results = Vec::with_capacity(members.len());
        let mut any = false;
        for lm in members {
            let found = match &lm.instance_id {
                None => self.classic_member_id(&lm.member_id, None),
                Some(i) => match self
                    .members
                    .values()
                    .find(|m| m.instance_id.as_deref() == Some(i))
                {
                    None => Err(GroupError::UnknownMemberId),
                    Some(m) if !lm.member_id.is_empty() && m.id != lm.member_id => {
                        Err(GroupError::FencedInstanceId)
                    }
                    Some(m) if !m.uses_classic() => Err(GroupError::UnknownMemberId),
                    Some(m) => Ok(m.id.clone()),
                },
            };
            match found {
                Ok(id) => {
                    self.members.remove(&id);
                    self.target.remove(&id);
                    any = true;
                    results.push(Ok(()));
                }
                Err(e) => results.push(Err(e)),
            }
        }
        if any {
            self.bump(now_ms);
        }
        results
    }

    /// Kafka's downgrade condition when `leaving` is fenced or leaves: it is the last member
    /// using the consumer protocol and others remain (policy and size are the caller's).
    pub(crate) fn only_classic_remain_without(&self, leaving: &str) -> bool {
        self.members.len() > 1
            && self.members.get(leaving).is_some_and(|m| !m.uses_classic())
            && self.classic_members() == self.members.len() - 1
    }

    /// A consumer group built from a non-empty classic group using the consumer protocol
    /// (Kafka's `fromClassicGroup`): group and assignment epoch = the generation; every
    /// member Stable at that epoch with its last classic assignment as both current and
    /// target assignment. None when a member's subscription does not parse.
    pub(crate) fn from_classic(
        id: String,
        generation: i32,
        members: Vec<ConvertedMember>,
        topics: &BTreeMap<String, TopicInfo>,
        now_ms: i64,
    ) -> Option<ConsumerGroup> {
        let mut g = ConsumerGroup::new(id, now_ms);
        g.group_epoch = generation;
        g.assignment_epoch = generation;
        for c in members {
            let sub = protocol::decode_subscription(&c.subscription)?;
            let mut assigned = Assignment::new();
            for (topic, ps) in protocol::decode_assignment(&c.assignment)? {
                if let Some(t) = topics.get(&topic) {
                    assigned.entry(t.id).or_default().extend(ps);
                }
            }
            assigned.retain(|_, ps| !ps.is_empty());
            let mut m = Member::new(c.id.clone(), c.instance_id);
            m.rack_id = sub.rack_id;
            m.client_id = c.client_id;
            m.client_host = c.client_host;
            m.rebalance_timeout_ms = c.rebalance_timeout_ms;
            m.subscribed = sub.topics.into_iter().collect();
            m.epoch = generation;
            m.previous_epoch = generation;
            m.assigned = assigned.clone();
            m.session_deadline_ms = now_ms + i64::from(c.session_timeout_ms);
            m.classic = Some(ClassicMember::new(ClassicMemberMetadata {
                session_timeout_ms: c.session_timeout_ms,
                protocols: c.protocols,
            }));
            g.target.insert(c.id.clone(), assigned);
            g.members.insert(c.id, m);
        }
        g.subscribed_meta = g
            .members
            .values()
            .flat_map(|m| m.subscribed.iter())
            .filter_map(|t| topics.get(t).map(|i| (t.clone(), i.clone())))
            .collect();
        Some(g)
    }

    /// The members of the classic group this group becomes when `leaving` (the last member
    /// using the consumer protocol) goes: every other member with its target assignment.
    pub(crate) fn to_classic_members(&self, leaving: &str) -> Vec<ConvertedMember> {
        self.members
            .values()
            .filter(|m| m.id != leaving)
            .filter_map(|m| {
                let c = m.classic.as_ref()?;
                Some(ConvertedMember {
                    id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout_ms: c.meta.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    protocols: c.meta.protocols.clone(),
                    subscription: Bytes::new(),
                    assignment: Bytes::new(),
                    partitions: self.by_name(&self.target.get(&m.id).cloned().unwrap_or_default()),
                })
            })
            .collect()
    }

    pub(crate) fn group_epoch(&self) -> i32 {
        self.group_epoch
    }
}

/// What a classic JoinGroup says of its member: instance, rack, rebalance timeout, client,
/// the subscription, and the session and SyncGroup deadlines it starts. Returns whether the
/// subscription changed (the group's assignment must be computed again).
fn take_classic_join(
    m: &mut Member,
    req: &JoinRequest,
    subscription: &protocol::Subscription,
    now_ms: i64,
) -> bool {
    let mut changed = false;
    if req.instance_id.is_some() {
        m.instance_id = req.instance_id.clone();
    }
    if subscription.rack_id.is_some() {
        m.rack_id = subscription.rack_id.clone();
    }
    if req.rebalance_timeout_ms >= 0 {
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
    }
    let subscribed: BTreeSet<String> = subscription.topics.iter().cloned().collect();
    if subscribed != m.subscribed {
        m.subscribed = subscribed;
        changed = true;
    }
    m.client_id = req.client_id.clone();
    m.client_host = req.client_host.clone();
    m.classic = Some(ClassicMember {
        meta: ClassicMemberMetadata {
            session_timeout_ms: req.session_timeout_ms,
            protocols: req.protocols.clone(),
        },
        join_deadline_ms: None,
        // It must send SyncGroup within its rebalance timeout.
        sync_deadline_ms: Some(now_ms + i64::from(req.rebalance_timeout_ms.max(0))),
    });
    m.revoke_deadline_ms = None;
    m.session_deadline_ms = now_ms + i64::from(req.session_timeout_ms);
    changed
}

#[cfg(test)]
mod tests {
    //! The heartbeat's pure steps; the whole heartbeat is tested through the coordinator in
    //! `tests.rs`.
    use super::*;

    fn heartbeat(member_epoch: i32) -> ConsumerHeartbeat {
        ConsumerHeartbeat {
            group_id: "g".into(),
            member_id: "m".into(),
            member_epoch,
            instance_id: None,
            rack_id: None,
            rebalance_timeout_ms: -1,
            subscribed_topic_names: None,
            subscribed_topic_regex: None,
            server_assignor: None,
            owned: None,
            client_id: String::new(),
            client_host: String::new(),
        }
    }

    fn assignment(parts: &[(u128, &[i32])]) -> Assignment {
        parts
            .iter()
            .map(|(t, ps)| (uuid::Uuid::from_u128(*t), ps.iter().copied().collect()))
            .collect()
    }

    #[test]
    fn the_assignor_asked_for_must_be_offered_and_defaults_to_the_first() {
        let config = GroupConfig::default();
        assert_eq!(chosen_assignor(None, &config), Ok("uniform".to_string()));
        assert_eq!(
            chosen_assignor(Some(&"range".to_string()), &config),
            Ok("range".to_string())
        );
        assert_eq!(
            chosen_assignor(Some(&"sticky".to_string()), &config),
            Err(GroupError::UnsupportedAssignor("sticky".into()))
        );
        let none = GroupConfig {
            consumer_assignors: Vec::new(),
            ..GroupConfig::default()
        };
        assert_eq!(chosen_assignor(None, &none), Ok("uniform".to_string()));
    }

    #[test]
    fn a_member_at_its_previous_epoch_goes_on_only_owning_nothing_new() {
        let mut m = Member::new("m".into(), None);
        m.previous_epoch = 3;
        m.epoch = 4;
        m.assigned = assignment(&[(1, &[0, 1])]);
        assert!(m.accepts_epoch(4, None));
        assert!(m.accepts_epoch(3, Some(&assignment(&[(1, &[0])]))));
        assert!(m.accepts_epoch(3, Some(&Assignment::new())));
        // Owning a partition it is no longer assigned, or not saying what it owns: fenced.
        assert!(!m.accepts_epoch(3, Some(&assignment(&[(1, &[2])]))));
        assert!(!m.accepts_epoch(3, None));
        assert!(!m.accepts_epoch(2, Some(&Assignment::new())));
        assert!(!m.accepts_epoch(5, None));
    }

    #[test]
    fn only_subscription_and_assignor_changes_bump_the_group() {
        let config = GroupConfig::default();
        let mut m = Member::new("m".into(), None);
        let mut req = heartbeat(1);
        req.subscribed_topic_names = Some(vec!["b".into(), "a".into()]);
        assert!(m.take_in(&req, 1000, &config));
        assert_eq!(
            m.session_deadline_ms,
            1000 + i64::from(config.consumer_session_timeout_ms)
        );
        // The same names in another order, a new rack, client and timeout: no change.
        req.subscribed_topic_names = Some(vec!["a".into(), "b".into()]);
        req.rack_id = Some("r1".into());
        req.client_id = "c".into();
        req.client_host = "/10.0.0.1".into();
        req.rebalance_timeout_ms = 7000;
        assert!(!m.take_in(&req, 2000, &config));
        assert_eq!(m.rack_id.as_deref(), Some("r1"));
        assert_eq!(
            (m.client_id.as_str(), m.client_host.as_str()),
            ("c", "/10.0.0.1")
        );
        assert_eq!(m.rebalance_timeout_ms, 7000);
        assert_eq!(
            m.session_deadline_ms,
            2000 + i64::from(config.consumer_session_timeout_ms)
        );
        // Fields left out change nothing; an empty client id keeps the client.
        let mut empty = heartbeat(1);
        empty.client_host = "/10.0.0.2".into();
        assert!(!m.take_in(&empty, 3000, &config));
        assert_eq!(m.subscribed.len(), 2);
        assert_eq!(m.rebalance_timeout_ms, 7000);
        assert_eq!(m.client_host, "/10.0.0.1");
        // An expression, then an empty one that ends it.
        req.subscribed_topic_regex = Some("t.*".into());
        assert!(m.take_in(&req, 4000, &config));
        req.subscribed_topic_regex = Some(String::new());
        assert!(m.take_in(&req, 5000, &config));
        assert_eq!(m.regex, None);
        req.server_assignor = Some("range".into());
        assert!(m.take_in(&req, 6000, &config));
        assert!(!m.take_in(&req, 7000, &config));
    }

    #[test]
    fn the_assignment_is_sent_on_join_on_change_or_when_the_member_lost_track() {
        let mut m = Member::new("m".into(), None);
        m.assigned = assignment(&[(1, &[0])]);
        assert!(m.assignment_due(false, None));
        m.sent = Some(m.assigned.clone());
        assert!(!m.assignment_due(false, None));
        assert!(m.assignment_due(true, None));
        assert!(!m.assignment_due(false, Some(&assignment(&[(1, &[0])]))));
        assert!(m.assignment_due(false, Some(&Assignment::new())));
        // While partitions are being revoked, what it owns differs anyway.
        m.revoking = assignment(&[(1, &[1])]);
        assert!(!m.assignment_due(false, Some(&assignment(&[(1, &[0, 1])]))));
    }

    #[test]
    fn a_joining_member_inherits_a_static_instance_or_starts_empty() {
        let (m, bump) = joined_member(None, "new".into(), Some("i".into()));
        assert!(bump);
        assert_eq!((m.id.as_str(), m.epoch), ("new", 0));
        assert_eq!(m.instance_id.as_deref(), Some("i"));

        // A consumer-protocol member that left for a while (epoch -2) resumes where it was.
        let mut left = Member::new("old".into(), Some("i".into()));
        left.previous_epoch = 5;
        left.epoch = -2;
        left.assigned = assignment(&[(1, &[0])]);
        left.sent = Some(left.assigned.clone());
        let (m, bump) = joined_member(Some(left), "new".into(), Some("i".into()));
        assert!(!bump);
        assert_eq!((m.id.as_str(), m.epoch), ("new", 5));
        assert_eq!(m.assigned, assignment(&[(1, &[0])]));
        assert_eq!(m.sent, None);

        // A classic member replaced: epoch 0, no longer classic, what it owned kept.
        let mut classic = Member::new("old".into(), Some("i".into()));
        classic.epoch = 3;
        classic.previous_epoch = 2;
        classic.assigned = assignment(&[(1, &[0])]);
        classic.classic = Some(ClassicMember::new(ClassicMemberMetadata {
            session_timeout_ms: 10_000,
            protocols: Vec::new(),
        }));
        let (m, bump) = joined_member(Some(classic), "new".into(), Some("i".into()));
        assert!(bump);
        assert_eq!((m.epoch, m.previous_epoch), (0, 0));
        assert!(!m.uses_classic());
        assert_eq!(m.assigned, assignment(&[(1, &[0])]));
    }

    #[test]
    fn a_classic_join_sets_its_deadlines_and_says_when_the_subscription_changed() {
        let req = JoinRequest {
            group_id: "g".into(),
            member_id: "m".into(),
            instance_id: Some("i".into()),
            protocol_type: "consumer".into(),
            protocols: Vec::new(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            require_known_member_id: false,
        };
        let sub = protocol::Subscription {
            topics: vec!["t".into()],
            rack_id: Some("r1".into()),
            ..Default::default()
        };
        let mut m = Member::new("m".into(), None);
        m.revoke_deadline_ms = Some(5);
        assert!(take_classic_join(&mut m, &req, &sub, 1_000));
        assert_eq!(m.instance_id.as_deref(), Some("i"));
        assert_eq!(m.rack_id.as_deref(), Some("r1"));
        assert_eq!(m.session_deadline_ms, 11_000);
        assert_eq!(m.revoke_deadline_ms, None);
        assert_eq!(m.classic.as_ref().unwrap().sync_deadline_ms, Some(31_000));
        // The same subscription again changes nothing the assignment depends on; a rack
        // left out keeps the one known.
        let again = protocol::Subscription {
            topics: vec!["t".into()],
            ..Default::default()
        };
        assert!(!take_classic_join(&mut m, &req, &again, 2_000));
        assert_eq!(m.rack_id.as_deref(), Some("r1"));
        assert_eq!(m.session_deadline_ms, 12_000);
    }
}

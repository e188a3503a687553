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

use crate::assignor::{self, Assignment};
use crate::records::{self, ConsumerAssignmentRecord, ConsumerMemberRecord, ConsumerValue, Record};
use crate::{GroupConfig, GroupError};

/// A topic as the caller's metadata knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicInfo {
    pub id: uuid::Uuid,
    pub partitions: i32,
}

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
    pub assignment: Vec<(uuid::Uuid, String, Vec<i32>)>,
    pub target_assignment: Vec<(uuid::Uuid, String, Vec<i32>)>,
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
    assignor: Option<String>,
    epoch: i32,
    previous_epoch: i32,
    assigned: Assignment,
    revoking: Assignment,
    session_deadline_ms: i64,
    revoke_deadline_ms: Option<i64>,
    sent: Option<Assignment>,
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
                self.topics = v.map(|(_, t)| t).unwrap_or_default();
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
                    assignor: r.server_assignor,
                    epoch: cur.map_or(0, |c| c.member_epoch),
                    previous_epoch: cur.map_or(0, |c| c.previous_member_epoch),
                    assigned: cur.map(|c| from_wire(&c.assigned)).unwrap_or_default(),
                    revoke_deadline_ms: (!revoking.is_empty())
                        .then(|| now_ms + i64::from(r.rebalance_timeout_ms.max(1000))),
                    revoking,
                    session_deadline_ms: now_ms + i64::from(config.consumer_session_timeout_ms),
                    sent: None,
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
            records::consumer_partition_meta_value(self.group_epoch, &topics),
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
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    server_assignor: m.assignor.clone(),
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

    pub(crate) fn heartbeat(
        &mut self,
        req: ConsumerHeartbeat,
        topics: &BTreeMap<String, TopicInfo>,
        now_ms: i64,
        config: &GroupConfig,
    ) -> Result<ConsumerHeartbeatResponse, GroupError> {
        let assignor_name = match &req.server_assignor {
            Some(a) if !config.consumer_assignors.contains(a) => {
                return Err(GroupError::UnsupportedAssignor(a.clone()))
            }
            Some(a) => a.clone(),
            None => config
                .consumer_assignors
                .first()
                .cloned()
                .unwrap_or_else(|| "uniform".into()),
        };
        if req
            .subscribed_topic_regex
            .as_deref()
            .is_some_and(|r| !r.is_empty())
        {
            return Err(GroupError::InvalidRequest(
                "subscribed_topic_regex is not supported by Sluice yet".into(),
            ));
        }
        let mut member_id = req.member_id.clone();
        let mut bump = false;
        match req.member_epoch {
            0 => {
                if req.subscribed_topic_names.is_none() {
                    return Err(GroupError::InvalidRequest(
                        "subscribed_topic_names must be set when joining".into(),
                    ));
                }
                if member_id.is_empty() {
                    member_id = uuid::Uuid::new_v4().to_string();
                }
                let mut inherited: Option<Member> = None;
                if let Some(instance) = &req.instance_id {
                    let holder = self
                        .members
                        .values()
                        .find(|m| m.instance_id.as_ref() == Some(instance) && m.id != member_id)
                        .map(|m| (m.id.clone(), m.epoch));
                    if let Some((old, epoch)) = holder {
                        if epoch != -2 {
                            return Err(GroupError::UnreleasedInstanceId);
                        }
                        inherited = self.members.remove(&old);
                        if let Some(t) = self.target.remove(&old) {
                            self.target.insert(member_id.clone(), t);
                        }
                    }
                }
                if let Some(old) = self.members.remove(&member_id) {
                    // Rejoining with epoch 0: start over with nothing owned.
                    drop(old);
                    self.target.remove(&member_id);
                    bump = true;
                }
                if inherited.is_none() && self.members.len() >= config.consumer_max_size {
                    return Err(GroupError::GroupMaxSizeReached);
                }
                let m = match inherited {
                    Some(mut m) => {
                        m.id = member_id.clone();
                        m.epoch = m.previous_epoch.max(0);
                        m.sent = None;
                        m
                    }
                    None => {
                        bump = true;
                        Member {
                            id: member_id.clone(),
                            instance_id: req.instance_id.clone(),
                            rack_id: None,
                            client_id: String::new(),
                            client_host: String::new(),
                            rebalance_timeout_ms: 0,
                            subscribed: BTreeSet::new(),
                            assignor: None,
                            epoch: 0,
                            previous_epoch: 0,
                            assigned: Assignment::new(),
                            revoking: Assignment::new(),
                            session_deadline_ms: 0,
                            revoke_deadline_ms: None,
                            sent: None,
                        }
                    }
                };
                self.members.insert(member_id.clone(), m);
            }
            -1 | -2 => {
                if !self.members.contains_key(&member_id) {
                    return Err(GroupError::UnknownMemberId);
                }
                if req.member_epoch == -2 && req.instance_id.is_some() {
                    // A static member leaving for a while keeps its assignment until its
                    // session times out.
                    if let Some(m) = self.members.get_mut(&member_id) {
                        m.previous_epoch = m.epoch;
                        m.epoch = -2;
                        m.session_deadline_ms =
                            now_ms + i64::from(config.consumer_session_timeout_ms);
                    }
                } else {
                    self.remove_member(&member_id, now_ms);
                }
                return Ok(ConsumerHeartbeatResponse {
                    member_id,
                    member_epoch: req.member_epoch,
                    heartbeat_interval_ms: 0,
                    assignment: None,
                });
            }
            epoch => {
                let m = self
                    .members
                    .get(&member_id)
                    .ok_or(GroupError::UnknownMemberId)?;
                if epoch != m.epoch {
                    let owned = req.owned.as_deref().map(from_wire);
                    let ok = epoch == m.previous_epoch
                        && owned.is_some_and(|o| minus(&o, &m.assigned).is_empty());
                    if !ok {
                        return Err(GroupError::FencedMemberEpoch);
                    }
                }
            }
        }
        // Update the member.
        let mut changed = false;
        if let Some(m) = self.members.get_mut(&member_id) {
            if let Some(names) = &req.subscribed_topic_names {
                let subscribed: BTreeSet<String> = names.iter().cloned().collect();
                if subscribed != m.subscribed {
                    m.subscribed = subscribed;
                    changed = true;
                }
            }
            if req.server_assignor.is_some() && m.assignor != req.server_assignor {
                m.assignor = req.server_assignor.clone();
                changed = true;
            }
            if req.rebalance_timeout_ms >= 0 {
                m.rebalance_timeout_ms = req.rebalance_timeout_ms;
            }
            if req.rack_id.is_some() {
                m.rack_id = req.rack_id.clone();
            }
            if !req.client_id.is_empty() {
                m.client_id = req.client_id.clone();
                m.client_host = req.client_host.clone();
            }
            m.session_deadline_ms = now_ms + i64::from(config.consumer_session_timeout_ms);
        }
        bump |= changed;
        // Partition counts of the subscribed topics.
        let meta: BTreeMap<String, TopicInfo> = self
            .members
            .values()
            .flat_map(|m| m.subscribed.iter())
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
        self.assignor = self.voted_assignor().unwrap_or(assignor_name);
        if self.group_epoch > self.assignment_epoch {
            let subs: BTreeMap<String, BTreeSet<String>> = self
                .members
                .values()
                .map(|m| (m.id.clone(), m.subscribed.clone()))
                .collect();
            self.target = assignor::assign(&self.assignor, &subs, &self.target, topics);
            self.assignment_epoch = self.group_epoch;
        }
        let owned = req.owned.as_deref().map(from_wire);
        self.reconcile(&member_id, owned.as_ref(), now_ms);
        let Some(m) = self.members.get_mut(&member_id) else {
            return Err(GroupError::UnknownMemberId);
        };
        let send = req.member_epoch == 0
            || m.sent.as_ref() != Some(&m.assigned)
            || owned
                .as_ref()
                .is_some_and(|o| *o != m.assigned && m.revoking.is_empty());
        let assignment = send.then(|| to_wire(&m.assigned));
        m.sent = Some(m.assigned.clone());
        Ok(ConsumerHeartbeatResponse {
            member_id,
            member_epoch: m.epoch,
            heartbeat_interval_ms: config.consumer_heartbeat_interval_ms,
            assignment,
        })
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
            if !revoke.is_empty() {
                assigned = keep;
                revoking = revoke;
                revoke_deadline = Some(now_ms + i64::from(m.rebalance_timeout_ms.max(1000)));
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

    /// Remove members whose session or revocation timed out; true when any was removed.
    pub(crate) fn tick(&mut self, now_ms: i64) -> bool {
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                m.session_deadline_ms <= now_ms || m.revoke_deadline_ms.is_some_and(|d| d <= now_ms)
            })
            .map(|m| m.id.clone())
            .collect();
        let any = !expired.is_empty();
        for id in expired {
            self.remove_member(&id, now_ms);
        }
        any
    }

    pub(crate) fn validate_commit(&self, member_id: &str, epoch: i32) -> Result<(), GroupError> {
        if epoch < 0 && member_id.is_empty() && self.members.is_empty() {
            return Ok(());
        }
        let m = self
            .members
            .get(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        if epoch != m.epoch {
            return Err(GroupError::StaleMemberEpoch);
        }
        Ok(())
    }

    pub(crate) fn validate_fetch(&self, member_id: &str, epoch: i32) -> Result<(), GroupError> {
        let m = self
            .members
            .get(member_id)
            .ok_or(GroupError::UnknownMemberId)?;
        if epoch != m.epoch {
            return Err(GroupError::StaleMemberEpoch);
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
                    assignment: named(&m.assigned),
                    target_assignment: named(&self.target.get(&m.id).cloned().unwrap_or_default()),
                })
                .collect(),
        }
    }
}

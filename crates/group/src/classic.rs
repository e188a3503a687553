//! The classic group protocol, as Apache Kafka's coordinator runs it.
//!
//! States: Empty -> PreparingRebalance (a join, or a member lost) -> CompletingRebalance
//! (every member rejoined, or the rebalance timeout passed; generation + 1, JoinGroup answered)
//! -> Stable (the leader's SyncGroup brought the assignment) -> PreparingRebalance ... A group
//! whose last member leaves becomes Empty (generation + 1).
//!
//! Invariants: a member id is in `members` or `pending` (dynamic members told
//! MEMBER_ID_REQUIRED), never both; `static_members` maps each instance id to exactly one
//! member; a parked JoinGroup exists only in PreparingRebalance, a parked SyncGroup only in
//! CompletingRebalance.

use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use crate::records::{self, GroupRecord, MemberRecord, Record};
use crate::{ClassicMemberView, ClassicView, Effects, GroupConfig, GroupError, Reply, Token};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassicState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
}

impl ClassicState {
    pub fn name(self) -> &'static str {
        match self {
            ClassicState::Empty => "Empty",
            ClassicState::PreparingRebalance => "PreparingRebalance",
            ClassicState::CompletingRebalance => "CompletingRebalance",
            ClassicState::Stable => "Stable",
        }
    }
}

#[derive(Clone, Debug)]
pub struct JoinRequest {
    pub group_id: String,
    /// Empty for a new member.
    pub member_id: String,
    pub instance_id: Option<String>,
    pub protocol_type: String,
    /// (name, metadata) in the member's order of preference.
    pub protocols: Vec<(String, Bytes)>,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub client_id: String,
    pub client_host: String,
    /// JoinGroup v4+: a new dynamic member first gets MEMBER_ID_REQUIRED with its id.
    pub require_known_member_id: bool,
}

#[derive(Clone, Debug)]
pub struct JoinedMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub metadata: Bytes,
}

#[derive(Clone, Debug, Default)]
pub struct JoinResponse {
    pub error: Option<GroupError>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub leader: String,
    pub skip_assignment: bool,
    pub member_id: String,
    pub members: Vec<JoinedMember>,
}

#[derive(Clone, Debug)]
pub struct SyncRequest {
    pub group_id: String,
    pub member_id: String,
    pub instance_id: Option<String>,
    pub generation: i32,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub assignments: Vec<(String, Bytes)>,
}

#[derive(Clone, Debug, Default)]
pub struct SyncResponse {
    pub error: Option<GroupError>,
    pub protocol_type: Option<String>,
    pub protocol: Option<String>,
    pub assignment: Bytes,
}

/// Which request commits offsets: the group's state matters to an OffsetCommit, not to a
/// TxnOffsetCommit (Kafka's `isTransactional`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CommitKind {
    /// OffsetCommit.
    Offsets,
    /// TxnOffsetCommit: part of a producer's transaction.
    Transactional,
}

#[derive(Clone, Debug)]
pub struct LeaveMember {
    pub member_id: String,
    pub instance_id: Option<String>,
}

#[derive(Debug)]
pub(crate) struct Member {
    pub(crate) id: String,
    instance_id: Option<String>,
    client_id: String,
    client_host: String,
    session_timeout_ms: i32,
    rebalance_timeout_ms: i32,
    protocols: Vec<(String, Bytes)>,
    assignment: Bytes,
    awaiting_join: Option<Token>,
    awaiting_sync: Option<Token>,
    session_deadline_ms: i64,
}

impl Member {
    fn metadata(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(n, _)| n == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }
}

/// Internal effects, before the partition is known.
#[derive(Debug, Default)]
pub(crate) struct GroupEffects {
    replies: Vec<(Token, Reply)>,
    pub(crate) records: Vec<Record>,
}

impl GroupEffects {
    pub(crate) fn into_effects(self, partition: i32) -> Effects {
        Effects {
            replies: self.replies,
            records: self.records.into_iter().map(|r| (partition, r)).collect(),
        }
    }
}

#[derive(Debug)]
pub(crate) struct ClassicGroup {
    pub(crate) id: String,
    pub(crate) state: ClassicState,
    pub(crate) state_timestamp_ms: i64,
    pub(crate) generation: i32,
    pub(crate) protocol_type: Option<String>,
    protocol: Option<String>,
    leader: Option<String>,
    pub(crate) members: BTreeMap<String, Member>,
    static_members: BTreeMap<String, String>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, with their expiry.
    pending: BTreeMap<String, i64>,
    rebalance_deadline_ms: i64,
    /// The initial rebalance delay of a group that was empty: (current end, hard limit).
    initial_delay: Option<(i64, i64)>,
}

impl ClassicGroup {
    /// The requests of this group's members that wait for an answer (JoinGroup, SyncGroup).
    pub(crate) fn parked_tokens(&self) -> impl Iterator<Item = Token> + '_ {
        self.members
            .values()
            .flat_map(|m| m.awaiting_join.into_iter().chain(m.awaiting_sync))
    }
}

/// A member moving between a classic and a consumer group (online migration).
#[derive(Clone, Debug)]
pub(crate) struct ConvertedMember {
    pub(crate) id: String,
    pub(crate) instance_id: Option<String>,
    pub(crate) client_id: String,
    pub(crate) client_host: String,
    pub(crate) session_timeout_ms: i32,
    pub(crate) rebalance_timeout_ms: i32,
    pub(crate) protocols: Vec<(String, Bytes)>,
    /// Classic -> consumer: the subscription (metadata of the group's protocol).
    pub(crate) subscription: Bytes,
    /// Classic -> consumer: the last assignment (`ConsumerProtocolAssignment`).
    pub(crate) assignment: Bytes,
    /// Consumer -> classic: the member's target assignment by topic name.
    pub(crate) partitions: Vec<(String, Vec<i32>)>,
}

fn new_member_id(client_id: &str) -> String {
    format!("{client_id}-{}", uuid::Uuid::new_v4())
}

impl ClassicGroup {
    pub(crate) fn new(id: String, now_ms: i64) -> ClassicGroup {
        ClassicGroup {
            id,
            state: ClassicState::Empty,
            state_timestamp_ms: now_ms,
            generation: 0,
            protocol_type: None,
            protocol: None,
            leader: None,
            members: BTreeMap::new(),
            static_members: BTreeMap::new(),
            pending: BTreeMap::new(),
            rebalance_deadline_ms: 0,
            initial_delay: None,
        }
    }

    /// A group loaded from `__consumer_offsets`: Stable with its members (who must heartbeat
    /// within their session timeout), or Empty.
    pub(crate) fn from_record(id: String, r: GroupRecord, now_ms: i64) -> ClassicGroup {
        let mut g = ClassicGroup::new(id, now_ms);
        g.generation = r.generation;
        g.protocol_type = Some(r.protocol_type).filter(|p| !p.is_empty());
        g.protocol = r.protocol.clone();
        g.leader = r.leader;
        g.state_timestamp_ms = if r.state_timestamp_ms > 0 {
            r.state_timestamp_ms
        } else {
            now_ms
        };
        let protocol = r.protocol.unwrap_or_default();
        for m in r.members {
            if let Some(i) = &m.instance_id {
                g.static_members.insert(i.clone(), m.member_id.clone());
            }
            g.members.insert(
                m.member_id.clone(),
                Member {
                    id: m.member_id,
                    instance_id: m.instance_id,
                    client_id: m.client_id,
                    client_host: m.client_host,
                    session_timeout_ms: m.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    protocols: vec![(protocol.clone(), m.subscription)],
                    assignment: m.assignment,
                    awaiting_join: None,
                    awaiting_sync: None,
                    session_deadline_ms: now_ms + i64::from(m.session_timeout_ms),
                },
            );
        }
        g.state = if g.members.is_empty() {
            ClassicState::Empty
        } else {
            ClassicState::Stable
        };
        if g.leader
            .as_ref()
            .is_some_and(|l| !g.members.contains_key(l))
        {
            g.leader = g.members.keys().next().cloned();
        }
        g
    }

    /// Whether the group's members speak the consumer embedded protocol (only such a group
    /// can become a consumer group).
    pub(crate) fn uses_consumer_protocol(&self) -> bool {
        self.protocol_type.as_deref() == Some(crate::protocol::CONSUMER_PROTOCOL_TYPE)
    }

    /// The members as they move to a consumer group.
    pub(crate) fn converted_members(&self) -> Vec<ConvertedMember> {
        self.members
            .values()
            .map(|m| {
                let subscription = match &self.protocol {
                    Some(p) => m.metadata(p),
                    None => m
                        .protocols
                        .first()
                        .map(|(_, b)| b.clone())
                        .unwrap_or_default(),
                };
                ConvertedMember {
                    id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    session_timeout_ms: m.session_timeout_ms,
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    protocols: m.protocols.clone(),
                    subscription,
                    assignment: m.assignment.clone(),
                    partitions: Vec::new(),
                }
            })
            .collect()
    }

    /// Answer every parked JoinGroup and SyncGroup with `error` (the group is converted).
    pub(crate) fn drain_parked(&mut self, error: GroupError) -> Vec<(Token, Reply)> {
        let mut out = Vec::new();
        for m in self.members.values_mut() {
            if let Some(t) = m.awaiting_join.take() {
                out.push((
                    t,
                    Reply::Join(JoinResponse {
                        error: Some(error.clone()),
                        member_id: m.id.clone(),
                        generation: -1,
                        ..Default::default()
                    }),
                ));
            }
            if let Some(t) = m.awaiting_sync.take() {
                out.push((
                    t,
                    Reply::Sync(SyncResponse {
                        error: Some(error.clone()),
                        ..Default::default()
                    }),
                ));
            }
        }
        out
    }

    /// A classic group built from a consumer group whose last consumer-protocol member left
    /// (Kafka's `fromConsumerGroup`): Stable at generation `generation`, protocol type
    /// `consumer`, the protocol every member supports, no leader, each member's target
    /// assignment encoded in the version of its subscription. The caller persists it and
    /// then starts a rebalance.
    pub(crate) fn from_converted(
        id: String,
        generation: i32,
        members: Vec<ConvertedMember>,
        now_ms: i64,
    ) -> ClassicGroup {
        let mut g = ClassicGroup::new(id, now_ms);
        g.state = ClassicState::Stable;
        g.generation = generation;
        g.protocol_type = Some(crate::protocol::CONSUMER_PROTOCOL_TYPE.into());
        let mut partitions = BTreeMap::new();
        for c in members {
            if let Some(i) = &c.instance_id {
                g.static_members.insert(i.clone(), c.id.clone());
            }
            partitions.insert(c.id.clone(), c.partitions);
            g.members.insert(
                c.id.clone(),
                Member {
                    id: c.id,
                    instance_id: c.instance_id,
                    client_id: c.client_id,
                    client_host: c.client_host,
                    session_timeout_ms: c.session_timeout_ms,
                    rebalance_timeout_ms: c.rebalance_timeout_ms,
                    protocols: c.protocols,
                    assignment: Bytes::new(),
                    awaiting_join: None,
                    awaiting_sync: None,
                    session_deadline_ms: now_ms + i64::from(c.session_timeout_ms),
                },
            );
        }
        g.protocol = g.select_protocol();
        let protocol = g.protocol.clone().unwrap_or_default();
        for m in g.members.values_mut() {
            let version = crate::protocol::version_of(&m.metadata(&protocol));
            let parts = partitions.remove(&m.id).unwrap_or_default();
            m.assignment = crate::protocol::encode_assignment(version, &parts);
        }
        g
    }

    /// The group's metadata record.
    pub(crate) fn record(&self) -> Record {
        Record {
            key: records::group_key(&self.id),
            value: Some(records::group_value(&self.to_record())),
        }
    }

    /// Start a rebalance of a Stable group (after a downgrade).
    pub(crate) fn start_rebalance(&mut self, now_ms: i64, config: &GroupConfig) -> GroupEffects {
        let mut eff = GroupEffects::default();
        self.prepare_rebalance(now_ms, config, &mut eff);
        self.maybe_complete_join(now_ms, &mut eff);
        eff
    }

    pub(crate) fn to_record(&self) -> GroupRecord {
        let protocol = self.protocol.clone().unwrap_or_default();
        GroupRecord {
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            generation: self.generation,
            protocol: self.protocol.clone(),
            leader: self.leader.clone(),
            state_timestamp_ms: self.state_timestamp_ms,
            members: self
                .members
                .values()
                .map(|m| MemberRecord {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    rebalance_timeout_ms: m.rebalance_timeout_ms,
                    session_timeout_ms: m.session_timeout_ms,
                    subscription: m.metadata(&protocol),
                    assignment: m.assignment.clone(),
                })
                .collect(),
        }
    }

    fn persist(&self, eff: &mut GroupEffects) {
        eff.records.push(Record {
            key: records::group_key(&self.id),
            value: Some(records::group_value(&self.to_record())),
        });
    }

    fn set_state(&mut self, s: ClassicState, now_ms: i64) {
        self.state = s;
        self.state_timestamp_ms = now_ms;
    }

    /// Topics subscribed by the members, decoded from their `consumer` protocol metadata.
    pub(crate) fn subscribed_topics(&self) -> Option<BTreeSet<String>> {
        if self.protocol_type.as_deref() != Some("consumer") {
            return None;
        }
        let protocol = self.protocol.clone()?;
        let mut out = BTreeSet::new();
        for m in self.members.values() {
            out.extend(decode_subscription_topics(&m.metadata(&protocol))?);
        }
        Some(out)
    }

    /// Protocols every member supports, in `candidate` order.
    fn supports(&self, protocol_type: &str, protocols: &[(String, Bytes)]) -> bool {
        if self.members.is_empty() {
            return true;
        }
        if self.protocol_type.as_deref() != Some(protocol_type) {
            return false;
        }
        protocols.iter().any(|(name, _)| {
            self.members
                .values()
                .all(|m| m.protocols.iter().any(|(n, _)| n == name))
        })
    }

    /// Kafka's vote: each member votes for its most preferred protocol among those every
    /// member supports; the most votes wins.
    fn select_protocol(&self) -> Option<String> {
        let candidates: Vec<&String> = self
            .members
            .values()
            .next()?
            .protocols
            .iter()
            .map(|(n, _)| n)
            .filter(|n| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(x, _)| x == *n))
            })
            .collect();
        let mut votes: BTreeMap<&String, usize> = BTreeMap::new();
        for m in self.members.values() {
            if let Some((n, _)) = m.protocols.iter().find(|(n, _)| candidates.contains(&n)) {
                *votes.entry(n).or_default() += 1;
            }
        }
        // Ties go to the first candidate in the first member's order.
        let best = votes.values().copied().max()?;
        candidates
            .into_iter()
            .find(|c| votes.get(c) == Some(&best))
            .cloned()
    }

    fn max_rebalance_timeout(&self) -> i64 {
        self.members
            .values()
            .map(|m| i64::from(m.rebalance_timeout_ms))
            .max()
            .unwrap_or(0)
    }

    fn prepare_rebalance(&mut self, now_ms: i64, config: &GroupConfig, eff: &mut GroupEffects) {
        if self.state == ClassicState::CompletingRebalance {
            for m in self.members.values_mut() {
                if let Some(t) = m.awaiting_sync.take() {
                    eff.replies.push((
                        t,
                        Reply::Sync(SyncResponse {
                            error: Some(GroupError::RebalanceInProgress),
                            ..Default::default()
                        }),
                    ));
                }
            }
        }
        let was_empty = self.state == ClassicState::Empty;
        self.set_state(ClassicState::PreparingRebalance, now_ms);
        self.rebalance_deadline_ms = now_ms + self.max_rebalance_timeout();
        if was_empty && config.initial_rebalance_delay_ms > 0 {
            let limit = now_ms + self.max_rebalance_timeout();
            self.initial_delay = Some((
                (now_ms + config.initial_rebalance_delay_ms).min(limit),
                limit,
            ));
        } else {
            self.initial_delay = None;
        }
    }

    fn all_joined(&self) -> bool {
        self.pending.is_empty() && self.members.values().all(|m| m.awaiting_join.is_some())
    }

    fn maybe_complete_join(&mut self, now_ms: i64, eff: &mut GroupEffects) {
        if self.state != ClassicState::PreparingRebalance {
            return;
        }
        let ready = match self.initial_delay {
            Some((until, _)) => now_ms >= until,
            None => self.all_joined() || now_ms >= self.rebalance_deadline_ms,
        };
        if ready {
            self.complete_join(now_ms, eff);
        }
    }

    fn complete_join(&mut self, now_ms: i64, eff: &mut GroupEffects) {
        self.initial_delay = None;
        // Dynamic members that did not rejoin in time are removed; static ones stay.
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| m.awaiting_join.is_none() && m.instance_id.is_none())
            .map(|m| m.id.clone())
            .collect();
        for id in gone {
            self.members.remove(&id);
        }
        self.pending.clear();
        if self
            .leader
            .as_ref()
            .is_some_and(|l| !self.members.contains_key(l))
        {
            self.leader = None;
        }
        self.generation += 1;
        if self.members.is_empty() {
            self.protocol = None;
            self.leader = None;
            self.set_state(ClassicState::Empty, now_ms);
            self.persist(eff);
            return;
        }
        self.protocol = self.select_protocol();
        if self.leader.is_none() {
            self.leader = self
                .members
                .values()
                .find(|m| m.awaiting_join.is_some())
                .or_else(|| self.members.values().next())
                .map(|m| m.id.clone());
        }
        self.set_state(ClassicState::CompletingRebalance, now_ms);
        let protocol = self.protocol.clone().unwrap_or_default();
        let leader = self.leader.clone().unwrap_or_default();
        let all: Vec<JoinedMember> = self
            .members
            .values()
            .map(|m| JoinedMember {
                member_id: m.id.clone(),
                instance_id: m.instance_id.clone(),
                metadata: m.metadata(&protocol),
            })
            .collect();
        for m in self.members.values_mut() {
            m.session_deadline_ms = now_ms + i64::from(m.session_timeout_ms);
            if let Some(t) = m.awaiting_join.take() {
                eff.replies.push((
                    t,
                    Reply::Join(JoinResponse {
                        error: None,
                        generation: self.generation,
                        protocol_type: self.protocol_type.clone(),
                        protocol: self.protocol.clone(),
                        leader: leader.clone(),
                        skip_assignment: false,
                        member_id: m.id.clone(),
                        members: if m.id == leader {
                            all.clone()
                        } else {
                            Vec::new()
                        },
                    }),
                ));
            }
        }
    }

    fn current_join_response(&self, member_id: &str, skip_assignment: bool) -> JoinResponse {
        let protocol = self.protocol.clone().unwrap_or_default();
        let leader = self.leader.clone().unwrap_or_default();
        JoinResponse {
            error: None,
            generation: self.generation,
            protocol_type: self.protocol_type.clone(),
            protocol: self.protocol.clone(),
            leader: leader.clone(),
            skip_assignment,
            member_id: member_id.to_string(),
            members: if member_id == leader {
                self.members
                    .values()
                    .map(|m| JoinedMember {
                        member_id: m.id.clone(),
                        instance_id: m.instance_id.clone(),
                        metadata: m.metadata(&protocol),
                    })
                    .collect()
            } else {
                Vec::new()
            },
        }
    }

    fn add_member(&mut self, id: String, req: &JoinRequest, token: Token, now_ms: i64) {
        if let Some(i) = &req.instance_id {
            self.static_members.insert(i.clone(), id.clone());
        }
        if self.members.is_empty() {
            self.protocol_type = Some(req.protocol_type.clone());
        }
        self.members.insert(
            id.clone(),
            Member {
                id,
                instance_id: req.instance_id.clone(),
                client_id: req.client_id.clone(),
                client_host: req.client_host.clone(),
                session_timeout_ms: req.session_timeout_ms,
                rebalance_timeout_ms: req.rebalance_timeout_ms,
                protocols: req.protocols.clone(),
                assignment: Bytes::new(),
                awaiting_join: Some(token),
                awaiting_sync: None,
                session_deadline_ms: now_ms + i64::from(req.session_timeout_ms),
            },
        );
    }

    /// A member (re)joins while the group is (or now becomes) PreparingRebalance; the join is
    /// parked and may complete at once.
    fn park_join(
        &mut self,
        now_ms: i64,
        config: &GroupConfig,
        mut eff: GroupEffects,
        new_member: bool,
    ) -> (Option<JoinResponse>, GroupEffects) {
        if self.state != ClassicState::PreparingRebalance {
            self.prepare_rebalance(now_ms, config, &mut eff);
        } else if new_member {
            if let Some((until, limit)) = self.initial_delay {
                let extended = (now_ms + config.initial_rebalance_delay_ms).min(limit);
                self.initial_delay = Some((until.max(extended), limit));
            }
        }
        self.maybe_complete_join(now_ms, &mut eff);
        (None, eff)
    }

    pub(crate) fn join(
        &mut self,
        req: JoinRequest,
        token: Token,
        now_ms: i64,
        config: &GroupConfig,
    ) -> Result<(Option<JoinResponse>, GroupEffects), GroupError> {
        if !self.supports(&req.protocol_type, &req.protocols) {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        let mut eff = GroupEffects::default();
        if req.member_id.is_empty() {
            if let Some(instance) = req.instance_id.clone() {
                if let Some(old_id) = self.static_members.get(&instance).cloned() {
                    return Ok(self.replace_static_member(old_id, req, token, now_ms, config));
                }
            }
            if self.members.len() >= config.max_size {
                return Err(GroupError::GroupMaxSizeReached);
            }
            let id = new_member_id(&req.client_id);
            if req.require_known_member_id && req.instance_id.is_none() {
                self.pending
                    .insert(id.clone(), now_ms + i64::from(req.session_timeout_ms));
                return Ok((
                    Some(JoinResponse {
                        error: Some(GroupError::MemberIdRequired),
                        generation: -1,
                        member_id: id,
                        ..Default::default()
                    }),
                    eff,
                ));
            }
            self.add_member(id, &req, token, now_ms);
            return Ok(self.park_join(now_ms, config, eff, true));
        }
        // A known (or pending) member id.
        if self.pending.remove(&req.member_id).is_some() {
            if self.members.len() >= config.max_size {
                return Err(GroupError::GroupMaxSizeReached);
            }
            self.add_member(req.member_id.clone(), &req, token, now_ms);
            return Ok(self.park_join(now_ms, config, eff, true));
        }
        self.validate_member(&req.member_id, req.instance_id.as_deref())?;
        let protocols_changed = self
            .members
            .get(&req.member_id)
            .is_some_and(|m| m.protocols != req.protocols);
        let is_leader = self.leader.as_deref() == Some(req.member_id.as_str());
        let Some(m) = self.members.get_mut(&req.member_id) else {
            return Err(GroupError::UnknownMemberId);
        };
        if let Some(old) = m.awaiting_join.take() {
            // A retried JoinGroup replaces the older one, which learns it was superseded.
            eff.replies.push((
                old,
                Reply::Join(JoinResponse {
                    error: Some(GroupError::UnknownMemberId),
                    member_id: req.member_id.clone(),
                    generation: -1,
                    ..Default::default()
                }),
            ));
        }
        m.protocols = req.protocols.clone();
        m.session_timeout_ms = req.session_timeout_ms;
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        m.session_deadline_ms = now_ms + i64::from(req.session_timeout_ms);
        match self.state {
            ClassicState::PreparingRebalance => {
                m.awaiting_join = Some(token);
                Ok(self.park_join(now_ms, config, eff, false))
            }
            ClassicState::CompletingRebalance if !protocols_changed => {
                // The member missed the JoinGroup response: send it again.
                Ok((Some(self.current_join_response(&req.member_id, false)), eff))
            }
            ClassicState::Stable if !protocols_changed && !is_leader => {
                Ok((Some(self.current_join_response(&req.member_id, false)), eff))
            }
            ClassicState::CompletingRebalance | ClassicState::Stable => {
                m.awaiting_join = Some(token);
                Ok(self.park_join(now_ms, config, eff, false))
            }
            ClassicState::Empty => Err(GroupError::UnknownMemberId),
        }
    }

    fn replace_static_member(
        &mut self,
        old_id: String,
        req: JoinRequest,
        token: Token,
        now_ms: i64,
        config: &GroupConfig,
    ) -> (Option<JoinResponse>, GroupEffects) {
        let mut eff = GroupEffects::default();
        let new_id = new_member_id(&req.client_id);
        let Some(mut m) = self.members.remove(&old_id) else {
            // The static map and members disagree: treat as a new member.
            self.add_member(new_id, &req, token, now_ms);
            return self.park_join(now_ms, config, eff, true);
        };
        if let Some(t) = m.awaiting_join.take() {
            eff.replies.push((
                t,
                Reply::Join(JoinResponse {
                    error: Some(GroupError::FencedInstanceId),
                    member_id: old_id.clone(),
                    generation: -1,
                    ..Default::default()
                }),
            ));
        }
        if let Some(t) = m.awaiting_sync.take() {
            eff.replies.push((
                t,
                Reply::Sync(SyncResponse {
                    error: Some(GroupError::FencedInstanceId),
                    ..Default::default()
                }),
            ));
        }
        let protocols_changed = m.protocols != req.protocols;
        m.id = new_id.clone();
        m.protocols = req.protocols.clone();
        m.client_id = req.client_id.clone();
        m.client_host = req.client_host.clone();
        m.session_timeout_ms = req.session_timeout_ms;
        m.rebalance_timeout_ms = req.rebalance_timeout_ms;
        m.session_deadline_ms = now_ms + i64::from(req.session_timeout_ms);
        if let Some(i) = &req.instance_id {
            self.static_members.insert(i.clone(), new_id.clone());
        }
        if self.leader.as_deref() == Some(old_id.as_str()) {
            self.leader = Some(new_id.clone());
        }
        match self.state {
            ClassicState::Stable if !protocols_changed => {
                self.members.insert(new_id.clone(), m);
                self.persist(&mut eff);
                let is_leader = self.leader.as_deref() == Some(new_id.as_str());
                (Some(self.current_join_response(&new_id, is_leader)), eff)
            }
            _ => {
                m.awaiting_join = Some(token);
                self.members.insert(new_id, m);
                self.park_join(now_ms, config, eff, false)
            }
        }
    }

    fn validate_member(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
    ) -> Result<(), GroupError> {
        if let Some(i) = instance_id {
            match self.static_members.get(i) {
                Some(id) if id == member_id => return Ok(()),
                Some(_) => return Err(GroupError::FencedInstanceId),
                None => return Err(GroupError::UnknownMemberId),
            }
        }
        if self.members.contains_key(member_id) {
            Ok(())
        } else {
            Err(GroupError::UnknownMemberId)
        }
    }

    pub(crate) fn sync(
        &mut self,
        req: SyncRequest,
        token: Token,
        now_ms: i64,
    ) -> Result<(Option<SyncResponse>, GroupEffects), GroupError> {
        if self.state == ClassicState::Empty {
            return Err(GroupError::UnknownMemberId);
        }
        self.validate_member(&req.member_id, req.instance_id.as_deref())?;
        if req.generation != self.generation {
            return Err(GroupError::IllegalGeneration);
        }
        if req
            .protocol_type
            .as_ref()
            .is_some_and(|p| Some(p) != self.protocol_type.as_ref())
            || req
                .protocol
                .as_ref()
                .is_some_and(|p| Some(p) != self.protocol.as_ref())
        {
            return Err(GroupError::InconsistentGroupProtocol);
        }
        let mut eff = GroupEffects::default();
        let answer = |g: &ClassicGroup, assignment: Bytes| SyncResponse {
            error: None,
            protocol_type: g.protocol_type.clone(),
            protocol: g.protocol.clone(),
            assignment,
        };
        match self.state {
            ClassicState::PreparingRebalance => Err(GroupError::RebalanceInProgress),
            ClassicState::Stable => {
                let a = self
                    .members
                    .get(&req.member_id)
                    .map(|m| m.assignment.clone())
                    .unwrap_or_default();
                if let Some(m) = self.members.get_mut(&req.member_id) {
                    m.session_deadline_ms = now_ms + i64::from(m.session_timeout_ms);
                }
                Ok((Some(answer(self, a)), eff))
            }
            ClassicState::CompletingRebalance => {
                if let Some(m) = self.members.get_mut(&req.member_id) {
                    if let Some(old) = m.awaiting_sync.replace(token) {
                        eff.replies.push((
                            old,
                            Reply::Sync(SyncResponse {
                                error: Some(GroupError::UnknownMemberId),
                                ..Default::default()
                            }),
                        ));
                    }
                    m.session_deadline_ms = now_ms + i64::from(m.session_timeout_ms);
                }
                if self.leader.as_deref() == Some(req.member_id.as_str()) {
                    let given: BTreeMap<String, Bytes> = req.assignments.into_iter().collect();
                    for m in self.members.values_mut() {
                        m.assignment = given.get(&m.id).cloned().unwrap_or_default();
                    }
                    self.set_state(ClassicState::Stable, now_ms);
                    self.persist(&mut eff);
                    let waiting: Vec<(Token, Bytes)> = self
                        .members
                        .values_mut()
                        .filter_map(|m| m.awaiting_sync.take().map(|t| (t, m.assignment.clone())))
                        .collect();
                    for (t, a) in waiting {
                        eff.replies.push((t, Reply::Sync(answer(self, a))));
                    }
                }
                Ok((None, eff))
            }
            ClassicState::Empty => Err(GroupError::UnknownMemberId),
        }
    }

    pub(crate) fn heartbeat(
        &mut self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        now_ms: i64,
    ) -> Result<(), GroupError> {
        if self.state == ClassicState::Empty {
            return Err(GroupError::UnknownMemberId);
        }
        self.validate_member(member_id, instance_id)?;
        if generation != self.generation {
            return Err(GroupError::IllegalGeneration);
        }
        if let Some(m) = self.members.get_mut(member_id) {
            m.session_deadline_ms = now_ms + i64::from(m.session_timeout_ms);
        }
        if self.state == ClassicState::PreparingRebalance {
            return Err(GroupError::RebalanceInProgress);
        }
        Ok(())
    }

    fn remove_member(
        &mut self,
        id: &str,
        now_ms: i64,
        config: &GroupConfig,
        eff: &mut GroupEffects,
    ) {
        let Some(m) = self.members.remove(id) else {
            return;
        };
        if let Some(i) = &m.instance_id {
            if self.static_members.get(i).is_some_and(|x| x == id) {
                self.static_members.remove(i);
            }
        }
        if let Some(t) = m.awaiting_join {
            eff.replies.push((
                t,
                Reply::Join(JoinResponse {
                    error: Some(GroupError::UnknownMemberId),
                    member_id: id.to_string(),
                    generation: -1,
                    ..Default::default()
                }),
            ));
        }
        if let Some(t) = m.awaiting_sync {
            eff.replies.push((
                t,
                Reply::Sync(SyncResponse {
                    error: Some(GroupError::UnknownMemberId),
                    ..Default::default()
                }),
            ));
        }
        if self.leader.as_deref() == Some(id) {
            self.leader = None;
        }
        match self.state {
            ClassicState::Stable | ClassicState::CompletingRebalance => {
                self.prepare_rebalance(now_ms, config, eff);
                self.maybe_complete_join(now_ms, eff);
            }
            ClassicState::PreparingRebalance => self.maybe_complete_join(now_ms, eff),
            ClassicState::Empty => {}
        }
    }

    pub(crate) fn leave(
        &mut self,
        members: &[LeaveMember],
        now_ms: i64,
    ) -> (Vec<Result<(), GroupError>>, GroupEffects) {
        // Leaving does not depend on config beyond the rebalance it triggers, which uses no
        // initial delay (the group is not empty).
        let config = GroupConfig {
            initial_rebalance_delay_ms: 0,
            ..GroupConfig::default()
        };
        let mut eff = GroupEffects::default();
        let mut results = Vec::new();
        for lm in members {
            let target = match &lm.instance_id {
                Some(i) => match self.static_members.get(i) {
                    Some(id) if lm.member_id.is_empty() || *id == lm.member_id => Ok(id.clone()),
                    Some(_) => Err(GroupError::FencedInstanceId),
                    None => Err(GroupError::UnknownMemberId),
                },
                None => {
                    if self.pending.remove(&lm.member_id).is_some() {
                        results.push(Ok(()));
                        continue;
                    }
                    if self.members.contains_key(&lm.member_id) {
                        Ok(lm.member_id.clone())
                    } else {
                        Err(GroupError::UnknownMemberId)
                    }
                }
            };
            match target {
                Ok(id) => {
                    self.remove_member(&id, now_ms, &config, &mut eff);
                    results.push(Ok(()));
                }
                Err(e) => results.push(Err(e)),
            }
        }
        (results, eff)
    }

    /// Whether a member may commit offsets now, as Kafka's `ClassicGroup.validateOffsetCommit`
    /// decides: the member and its generation first (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID,
    /// ILLEGAL_GENERATION), then, for an OffsetCommit only, REBALANCE_IN_PROGRESS while the
    /// group waits for its leader's assignment (the member has its new generation but not
    /// yet its partitions). A transactional commit is not held to the group's state: its
    /// member and generation are checked, and its transaction decides the rest.
    pub(crate) fn validate_commit(
        &self,
        member_id: &str,
        instance_id: Option<&str>,
        generation: i32,
        kind: CommitKind,
    ) -> Result<(), GroupError> {
        if generation < 0 && member_id.is_empty() && self.state == ClassicState::Empty {
            return Ok(());
        }
        self.validate_member(member_id, instance_id)?;
        if generation != self.generation {
            return Err(GroupError::IllegalGeneration);
        }
        if kind == CommitKind::Offsets && self.state == ClassicState::CompletingRebalance {
            return Err(GroupError::RebalanceInProgress);
        }
        Ok(())
    }

    pub(crate) fn tick(&mut self, now_ms: i64, config: &GroupConfig) -> GroupEffects {
        let mut eff = GroupEffects::default();
        self.pending.retain(|_, deadline| *deadline > now_ms);
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                m.awaiting_join.is_none()
                    && m.awaiting_sync.is_none()
                    && m.session_deadline_ms <= now_ms
            })
            .map(|m| m.id.clone())
            .collect();
        for id in expired {
            self.remove_member(&id, now_ms, config, &mut eff);
        }
        self.maybe_complete_join(now_ms, &mut eff);
        eff
    }

    pub(crate) fn view(&self) -> ClassicView {
        let protocol = self.protocol.clone().unwrap_or_default();
        let stable = self.state == ClassicState::Stable;
        ClassicView {
            state: self.state.name().to_string(),
            protocol_type: self.protocol_type.clone().unwrap_or_default(),
            protocol: if stable || self.state == ClassicState::CompletingRebalance {
                protocol.clone()
            } else {
                String::new()
            },
            members: self
                .members
                .values()
                .map(|m| ClassicMemberView {
                    member_id: m.id.clone(),
                    instance_id: m.instance_id.clone(),
                    client_id: m.client_id.clone(),
                    client_host: m.client_host.clone(),
                    metadata: if stable {
                        m.metadata(&protocol)
                    } else {
                        Bytes::new()
                    },
                    assignment: if stable {
                        m.assignment.clone()
                    } else {
                        Bytes::new()
                    },
                })
                .collect(),
        }
    }
}

/// Topic names of a `ConsumerProtocolSubscription` (any version: int16 version, then an
/// array of strings; v0-v3 non-flexible; flexible v4+ is not produced by the classic
/// protocol's consumers). None when the bytes do not parse.
pub(crate) fn decode_subscription_topics(b: &[u8]) -> Option<Vec<String>> {
    let version = i16::from_be_bytes([*b.first()?, *b.get(1)?]);
    if version < 0 {
        return None;
    }
    let n = i32::from_be_bytes([*b.get(2)?, *b.get(3)?, *b.get(4)?, *b.get(5)?]);
    let mut pos = 6usize;
    let mut out = Vec::new();
    for _ in 0..n.max(0) {
        let len = i16::from_be_bytes([*b.get(pos)?, *b.get(pos + 1)?]);
        pos += 2;
        let len = usize::try_from(len).ok()?;
        let s = b.get(pos..pos + len)?;
        out.push(String::from_utf8(s.to_vec()).ok()?);
        pos += len;
    }
    Some(out)
}

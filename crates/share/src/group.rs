//! Share-group membership (ShareGroupHeartbeat, KIP-932) as Kafka 4.3's group coordinator
//! keeps it: a member joins with epoch 0 and its subscribed topics, heartbeats with the epoch
//! it was given, and leaves with epoch -1 or by missing heartbeats for the session timeout.
//! A change of membership, of a member's subscription or of a subscribed topic's partition
//! count bumps the group epoch and computes a new target assignment ([`crate::assign`]);
//! unlike a consumer group's, a share member takes its new assignment at once (partitions are
//! shared, nothing is revoked first) and with it the group epoch.
//!
//! Pure: takes `now`, returns answers and the members that left (whose acquired records the
//! caller releases in its share partitions).

use std::collections::{BTreeMap, BTreeSet};

use crate::assign::{assign, Assignment};

/// A share group's limits (`group.share.*` configs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupLimits {
    /// `group.share.max.size`.
    pub max_size: usize,
    /// `group.share.session.timeout.ms`.
    pub session_timeout_ms: i64,
    /// `group.share.heartbeat.interval.ms`.
    pub heartbeat_interval_ms: i32,
}

impl Default for GroupLimits {
    /// Kafka 4.3's defaults.
    fn default() -> GroupLimits {
        GroupLimits {
            max_size: 200,
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
        }
    }
}

/// The epoch a member leaves with.
pub const LEAVE_EPOCH: i32 = -1;

/// One ShareGroupHeartbeat.
#[derive(Clone, Debug, Default)]
pub struct Heartbeat {
    pub group_id: String,
    pub member_id: String,
    pub member_epoch: i32,
    pub rack_id: Option<String>,
    /// None: unchanged since the last heartbeat.
    pub subscribed_topic_names: Option<Vec<String>>,
    pub client_id: String,
    pub client_host: String,
}

/// Its answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeartbeatAnswer {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// The member's partitions by topic name, when the member must be told them (it joined,
    /// sent its full state, or its assignment changed).
    pub assignment: Option<BTreeMap<String, BTreeSet<i32>>>,
}

/// Why a heartbeat was refused, with Kafka's error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GroupError {
    /// INVALID_REQUEST.
    InvalidRequest(String),
    /// GROUP_ID_NOT_FOUND: no such share group (or the id is another kind of group's).
    GroupIdNotFound(String),
    /// UNKNOWN_MEMBER_ID.
    UnknownMemberId(String),
    /// FENCED_MEMBER_EPOCH.
    FencedMemberEpoch(String),
    /// GROUP_MAX_SIZE_REACHED.
    GroupMaxSizeReached(String),
}

impl std::fmt::Display for GroupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GroupError::InvalidRequest(m)
            | GroupError::GroupIdNotFound(m)
            | GroupError::UnknownMemberId(m)
            | GroupError::FencedMemberEpoch(m)
            | GroupError::GroupMaxSizeReached(m) => f.write_str(m),
        }
    }
}

/// A member of a share group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub epoch: i32,
    pub previous_epoch: i32,
    pub subscribed: BTreeSet<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// When the member is gone if it sends no heartbeat.
    pub deadline_ms: i64,
    pub assigned: BTreeMap<String, BTreeSet<i32>>,
}

/// A share group: its members, epoch and target assignment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ShareGroup {
    pub epoch: i32,
    pub members: BTreeMap<String, Member>,
    /// The partition counts of the subscribed topics the target assignment was computed
    /// for: a change bumps the epoch.
    pub topics_seen: BTreeMap<String, i32>,
    pub target: Assignment,
}

/// Why [`ShareGroups::begin_change`] refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChangeRefused {
    /// The group has members.
    NotEmpty,
    /// Another change of the group's state is under way.
    Busy,
}

/// Every share group of a coordinator.
#[derive(Clone, Debug, Default)]
pub struct ShareGroups {
    pub limits: GroupLimits,
    groups: BTreeMap<String, ShareGroup>,
    /// Groups whose stored state an admin request is changing (AlterShareGroupOffsets,
    /// DeleteShareGroupOffsets, DeleteGroups; one at a time): a member joining meanwhile is
    /// assigned nothing until it ends, as Kafka assigns no
    /// partition whose share state is being initialized, so that it never reads the state
    /// from before the change.
    changing: BTreeSet<String>,
}

impl ShareGroups {
    pub fn new(limits: GroupLimits) -> ShareGroups {
        ShareGroups {
            limits,
            groups: BTreeMap::new(),
            changing: BTreeSet::new(),
        }
    }

    pub fn get(&self, group_id: &str) -> Option<&ShareGroup> {
        self.groups.get(group_id)
    }

    pub fn group_ids(&self) -> impl Iterator<Item = &String> {
        self.groups.keys()
    }

    /// Begin a change of `group_id`'s stored state, if the group has no members and no other
    /// change is under way (two would undo each other: a reset writing state a deletion just
    /// removed); `create` makes the group exist (empty) if it does not (AlterShareGroupOffsets
    /// creates the group, as on Kafka). Each change begun is ended by
    /// [`ShareGroups::end_change`].
    pub fn begin_change(&mut self, group_id: &str, create: bool) -> Result<(), ChangeRefused> {
        if self.changing.contains(group_id) {
            return Err(ChangeRefused::Busy);
        }
        if create {
            self.groups.entry(group_id.to_string()).or_default();
        }
        if self
            .groups
            .get(group_id)
            .is_some_and(|g| !g.members.is_empty())
        {
            return Err(ChangeRefused::NotEmpty);
        }
        self.changing.insert(group_id.to_string());
        Ok(())
    }

    /// End a change begun by [`ShareGroups::begin_change`]: members are given their
    /// assignments at their next heartbeat.
    pub fn end_change(&mut self, group_id: &str) {
        self.changing.remove(group_id);
    }

    /// Forget an empty group (DeleteGroups); false if it has members or does not exist.
    pub fn delete(&mut self, group_id: &str) -> bool {
        match self.groups.get(group_id) {
            Some(g) if g.members.is_empty() => self.groups.remove(group_id).is_some(),
            _ => false,
        }
    }

    /// Forget a group whatever its members (its coordinator moved away: they join again at
    /// the new one).
    pub fn forget(&mut self, group_id: &str) {
        self.groups.remove(group_id);
    }

    /// Answer `hb` against the topics that exist now (`topics`: name to partition count).
    /// Returns the answer and the members that left (the sender, when it leaves).
    pub fn heartbeat(
        &mut self,
        hb: Heartbeat,
        topics: &BTreeMap<String, i32>,
        now_ms: i64,
    ) -> Result<(HeartbeatAnswer, Vec<String>), GroupError> {
        check_request(&hb)?;
        let limits = self.limits;
        if hb.member_epoch == LEAVE_EPOCH {
            return self.leave(&hb, topics);
        }
        let joining = hb.member_epoch == 0;
        if !joining && !self.groups.contains_key(&hb.group_id) {
            return Err(GroupError::GroupIdNotFound(format!(
                "Share group {} not found.",
                hb.group_id
            )));
        }
        let held = self.changing.contains(&hb.group_id);
        let group = self.groups.entry(hb.group_id.clone()).or_default();
        let known = group.members.get(&hb.member_id).cloned();
        if group.members.len() >= limits.max_size && known.is_none() {
            return Err(GroupError::GroupMaxSizeReached(format!(
                "The share group has reached its maximum capacity of {} members.",
                limits.max_size
            )));
        }
        let member = match known {
            Some(m) => {
                check_epoch(&m, hb.member_epoch)?;
                m
            }
            None if joining => Member {
                epoch: 0,
                previous_epoch: 0,
                subscribed: BTreeSet::new(),
                rack_id: None,
                client_id: String::new(),
                client_host: String::new(),
                deadline_ms: 0,
                assigned: BTreeMap::new(),
            },
            None => {
                return Err(GroupError::UnknownMemberId(format!(
                    "Member {} is not a member of share group {}.",
                    hb.member_id, hb.group_id
                )))
            }
        };
        let mut updated = member.clone();
        if let Some(names) = &hb.subscribed_topic_names {
            updated.subscribed = names.iter().cloned().collect();
        }
        if hb.rack_id.is_some() {
            updated.rack_id = hb.rack_id.clone();
        }
        updated.client_id = hb.client_id.clone();
        updated.client_host = hb.client_host.clone();
        updated.deadline_ms = now_ms.saturating_add(limits.session_timeout_ms);
        let new_member = !group.members.contains_key(&hb.member_id);
        let subscription_changed = updated.subscribed != member.subscribed;
        group.members.insert(hb.member_id.clone(), updated);
        let seen = subscribed_counts(group, topics);
        if new_member || subscription_changed || seen != group.topics_seen {
            group.epoch += 1;
            group.topics_seen = seen;
            retarget(group, topics);
        }
        // A share member takes its target at once, and the group epoch with it.
        let epoch = group.epoch;
        let target = if held {
            Default::default()
        } else {
            group.target.get(&hb.member_id).cloned().unwrap_or_default()
        };
        let m = group
            .members
            .get_mut(&hb.member_id)
            .ok_or_else(|| GroupError::UnknownMemberId("member vanished".into()))?;
        let assignment_changed = m.assigned != target;
        if m.epoch != epoch {
            m.previous_epoch = m.epoch;
            m.epoch = epoch;
        }
        m.assigned = target.clone();
        let full = hb.subscribed_topic_names.is_some();
        let answer = HeartbeatAnswer {
            member_id: hb.member_id,
            member_epoch: epoch,
            heartbeat_interval_ms: limits.heartbeat_interval_ms,
            assignment: (joining || full || assignment_changed).then_some(target),
        };
        Ok((answer, Vec::new()))
    }

    /// Members whose session ended by `now_ms`, removed: (group, member) of each.
    pub fn expire(&mut self, topics: &BTreeMap<String, i32>, now_ms: i64) -> Vec<(String, String)> {
        let mut gone = Vec::new();
        for (id, group) in &mut self.groups {
            let expired: Vec<String> = group
                .members
                .iter()
                .filter(|(_, m)| m.deadline_ms <= now_ms)
                .map(|(m, _)| m.clone())
                .collect();
            if expired.is_empty() {
                continue;
            }
            for m in &expired {
                group.members.remove(m);
                gone.push((id.clone(), m.clone()));
            }
            group.epoch += 1;
            group.topics_seen = subscribed_counts(group, topics);
            retarget(group, topics);
        }
        gone
    }

    fn leave(
        &mut self,
        hb: &Heartbeat,
        topics: &BTreeMap<String, i32>,
    ) -> Result<(HeartbeatAnswer, Vec<String>), GroupError> {
        let Some(group) = self.groups.get_mut(&hb.group_id) else {
            return Err(GroupError::GroupIdNotFound(format!(
                "Share group {} not found.",
                hb.group_id
            )));
        };
        if group.members.remove(&hb.member_id).is_none() {
            return Err(GroupError::UnknownMemberId(format!(
                "Member {} is not a member of share group {}.",
                hb.member_id, hb.group_id
            )));
        }
        group.epoch += 1;
        group.topics_seen = subscribed_counts(group, topics);
        retarget(group, topics);
        Ok((
            HeartbeatAnswer {
                member_id: hb.member_id.clone(),
                member_epoch: LEAVE_EPOCH,
                heartbeat_interval_ms: 0,
                assignment: None,
            },
            vec![hb.member_id.clone()],
        ))
    }
}

/// Kafka's checks of the request itself (GroupCoordinatorService).
fn check_request(hb: &Heartbeat) -> Result<(), GroupError> {
    let invalid = |m: &str| Err(GroupError::InvalidRequest(m.to_string()));
    if hb.member_id.is_empty() {
        return invalid("MemberId can't be empty.");
    }
    if hb.group_id.is_empty() {
        return invalid("GroupId can't be empty.");
    }
    if hb.rack_id.as_deref() == Some("") {
        return invalid("RackId can't be empty.");
    }
    if hb.member_epoch == 0 {
        if hb
            .subscribed_topic_names
            .as_ref()
            .is_none_or(|t| t.is_empty())
        {
            return invalid("SubscribedTopicNames must be set in first request.");
        }
    } else if hb.member_epoch < LEAVE_EPOCH {
        return invalid("MemberEpoch is invalid.");
    }
    Ok(())
}

/// Kafka's epoch check: the current epoch, or the previous one (its answer may have been
/// lost).
fn check_epoch(m: &Member, received: i32) -> Result<(), GroupError> {
    if received == 0 || received == m.epoch || received == m.previous_epoch {
        return Ok(());
    }
    Err(GroupError::FencedMemberEpoch(format!(
        "The share group member has a {} member epoch ({received}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.",
        if received > m.epoch { "greater" } else { "smaller" },
        m.epoch
    )))
}

/// The partition counts of the topics the group's members subscribe to that exist.
fn subscribed_counts(group: &ShareGroup, topics: &BTreeMap<String, i32>) -> BTreeMap<String, i32> {
    group
        .members
        .values()
        .flat_map(|m| m.subscribed.iter())
        .filter_map(|t| topics.get(t).map(|n| (t.clone(), *n)))
        .collect()
}

fn retarget(group: &mut ShareGroup, topics: &BTreeMap<String, i32>) {
    let subscriptions: BTreeMap<String, BTreeSet<String>> = group
        .members
        .iter()
        .map(|(id, m)| (id.clone(), m.subscribed.clone()))
        .collect();
    group.target = assign(&subscriptions, topics, &group.target);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn topics(ts: &[(&str, i32)]) -> BTreeMap<String, i32> {
        ts.iter().map(|(t, n)| (t.to_string(), *n)).collect()
    }

    fn hb(member: &str, epoch: i32, subscribed: Option<&[&str]>) -> Heartbeat {
        Heartbeat {
            group_id: "g".into(),
            member_id: member.into(),
            member_epoch: epoch,
            subscribed_topic_names: subscribed.map(|s| s.iter().map(|t| t.to_string()).collect()),
            ..Heartbeat::default()
        }
    }

    #[test]
    fn members_join_share_a_partition_and_leave() {
        let t = topics(&[("t", 1)]);
        let mut g = ShareGroups::new(GroupLimits::default());
        let (a, _) = g.heartbeat(hb("a", 0, Some(&["t"])), &t, 0).unwrap();
        assert_eq!(a.member_epoch, 1);
        assert_eq!(a.assignment, Some([("t".to_string(), [0].into())].into()));
        let (b, _) = g.heartbeat(hb("b", 0, Some(&["t"])), &t, 0).unwrap();
        assert_eq!(b.member_epoch, 2);
        assert_eq!(b.assignment, Some([("t".to_string(), [0].into())].into()));
        // a heartbeats with its old epoch: accepted, given the new one, assignment unchanged.
        let (a, _) = g.heartbeat(hb("a", 1, None), &t, 10).unwrap();
        assert_eq!((a.member_epoch, a.assignment), (2, None));
        // A stale epoch is fenced; an unknown member is refused.
        assert!(matches!(
            g.heartbeat(hb("a", 7, None), &t, 10),
            Err(GroupError::FencedMemberEpoch(_))
        ));
        assert!(matches!(
            g.heartbeat(hb("z", 2, None), &t, 10),
            Err(GroupError::UnknownMemberId(_))
        ));
        let (left, gone) = g.heartbeat(hb("b", LEAVE_EPOCH, None), &t, 20).unwrap();
        assert_eq!(
            (left.member_epoch, gone),
            (LEAVE_EPOCH, vec!["b".to_string()])
        );
        assert_eq!(g.get("g").unwrap().epoch, 3);
    }

    #[test]
    fn bad_requests_and_limits_are_refused_as_kafka_refuses_them() {
        let t = topics(&[("t", 2)]);
        let mut g = ShareGroups::new(GroupLimits {
            max_size: 1,
            ..GroupLimits::default()
        });
        let refused = |r: Result<_, GroupError>| match r {
            Err(GroupError::InvalidRequest(m)) => m,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            refused(g.heartbeat(hb("", 0, Some(&["t"])), &t, 0)),
            "MemberId can't be empty."
        );
        assert_eq!(
            refused(g.heartbeat(hb("a", 0, None), &t, 0)),
            "SubscribedTopicNames must be set in first request."
        );
        assert_eq!(
            refused(g.heartbeat(hb("a", -2, None), &t, 0)),
            "MemberEpoch is invalid."
        );
        assert!(matches!(
            g.heartbeat(hb("a", 3, None), &t, 0),
            Err(GroupError::GroupIdNotFound(_))
        ));
        g.heartbeat(hb("a", 0, Some(&["t"])), &t, 0).unwrap();
        assert!(matches!(
            g.heartbeat(hb("b", 0, Some(&["t"])), &t, 0),
            Err(GroupError::GroupMaxSizeReached(_))
        ));
        assert!(!g.delete("g"), "not empty");
    }

    #[test]
    fn a_member_joining_during_a_state_change_is_assigned_nothing_until_it_ends() {
        let t = topics(&[("t", 2)]);
        let mut g = ShareGroups::new(GroupLimits::default());
        assert_eq!(g.begin_change("g", true), Ok(()));
        assert!(g.get("g").is_some(), "created empty");
        assert_eq!(
            g.begin_change("g", false),
            Err(ChangeRefused::Busy),
            "one change at a time"
        );
        let (a, _) = g.heartbeat(hb("a", 0, Some(&["t"])), &t, 0).unwrap();
        assert_eq!(a.assignment, Some(BTreeMap::new()));
        let (a, _) = g.heartbeat(hb("a", a.member_epoch, None), &t, 1).unwrap();
        assert_eq!(a.assignment, None, "still held");
        g.end_change("g");
        assert_eq!(
            g.begin_change("g", false),
            Err(ChangeRefused::NotEmpty),
            "a group with members is not changed"
        );
        let (a, _) = g.heartbeat(hb("a", a.member_epoch, None), &t, 2).unwrap();
        assert_eq!(
            a.assignment,
            Some([("t".to_string(), [0, 1].into())].into())
        );
        // Without create, a change of an unknown group makes no group.
        assert_eq!(g.begin_change("other", false), Ok(()));
        g.end_change("other");
        assert!(g.get("other").is_none());
    }

    #[test]
    fn silent_members_expire_and_new_partitions_are_assigned() {
        let mut t = topics(&[("t", 2)]);
        let mut g = ShareGroups::new(GroupLimits::default());
        g.heartbeat(hb("a", 0, Some(&["t"])), &t, 0).unwrap();
        g.heartbeat(hb("b", 0, Some(&["t"])), &t, 30_000).unwrap();
        assert_eq!(g.expire(&t, 44_999), vec![]);
        assert_eq!(
            g.expire(&t, 45_000),
            vec![("g".to_string(), "a".to_string())]
        );
        let (b, _) = g.heartbeat(hb("b", 2, None), &t, 45_001).unwrap();
        assert_eq!(
            b.assignment,
            Some([("t".to_string(), [0, 1].into())].into())
        );
        // Partitions added: a new epoch, and b is told its larger assignment.
        t.insert("t".into(), 3);
        let (b, _) = g
            .heartbeat(hb("b", b.member_epoch, None), &t, 45_002)
            .unwrap();
        assert_eq!(
            b.assignment,
            Some([("t".to_string(), [0, 1, 2].into())].into())
        );
        g.heartbeat(hb("b", LEAVE_EPOCH, None), &t, 45_003).unwrap();
        assert!(g.delete("g"));
    }
}

//! Online migration between the classic and the consumer protocol (Kafka's
//! `group.consumer.migration.policy`): simulated classic clients (JoinGroup, SyncGroup,
//! Heartbeat, LeaveGroup, eager or cooperative) and consumer-protocol clients
//! (ConsumerGroupHeartbeat) drive one coordinator through rolling upgrades and downgrades.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bytes::Bytes;

use crate::protocol::{
    decode_assignment, decode_subscription, encode_assignment, encode_subscription,
};
use crate::*;

const TOPIC_ID: u128 = 7;
const PARTITIONS: i32 = 12;
const SESSION: i32 = 10_000;
const REBALANCE: i32 = 5_000;

fn topics() -> BTreeMap<String, TopicInfo> {
    BTreeMap::from([(
        "t".to_string(),
        TopicInfo {
            id: uuid::Uuid::from_u128(TOPIC_ID),
            partitions: PARTITIONS,
        },
    )])
}

#[derive(Debug)]
enum Kind {
    /// A classic client; eager ones give up everything before rejoining.
    Classic {
        generation: i32,
        eager: bool,
        join: Option<Token>,
        sync: Option<Token>,
        rejoin: bool,
    },
    Consumer {
        epoch: i32,
    },
}

#[derive(Debug)]
struct Client {
    name: String,
    member_id: String,
    owned: BTreeSet<i32>,
    kind: Kind,
}

struct Sim {
    c: Coordinator,
    t: BTreeMap<String, TopicInfo>,
    now: i64,
    next_token: Token,
    replies: HashMap<Token, Reply>,
    /// Every record the coordinator asked to persist, in order.
    log: Vec<Record>,
    clients: Vec<Client>,
}

impl Sim {
    fn new(config: GroupConfig) -> Sim {
        let mut c = Coordinator::new(config, 1);
        c.load(0, Vec::<LoadItem>::new(), 0);
        Sim {
            c,
            t: topics(),
            now: 0,
            next_token: 1,
            replies: HashMap::new(),
            log: Vec::new(),
            clients: Vec::new(),
        }
    }

    fn absorb(&mut self, eff: Effects) {
        self.log.extend(eff.records.into_iter().map(|(_, r)| r));
        self.replies.extend(eff.replies);
    }

    fn token(&mut self) -> Token {
        self.next_token += 1;
        self.next_token
    }

    fn group_type(&self) -> String {
        self.c.list_groups(&[], &[])[0].group_type.clone()
    }

    fn add_classic(&mut self, name: &str, eager: bool) {
        self.clients.push(Client {
            name: name.into(),
            member_id: String::new(),
            owned: BTreeSet::new(),
            kind: Kind::Classic {
                generation: -1,
                eager,
                join: None,
                sync: None,
                rejoin: true,
            },
        });
    }

    fn add_consumer(&mut self, name: &str) {
        self.clients.push(Client {
            name: name.into(),
            member_id: String::new(),
            owned: BTreeSet::new(),
            kind: Kind::Consumer { epoch: 0 },
        });
    }

    /// The client leaves the group (LeaveGroup or a heartbeat with epoch -1) and is gone.
    fn leave(&mut self, name: &str) {
        let i = self.clients.iter().position(|c| c.name == name).unwrap();
        let client = self.clients.remove(i);
        match client.kind {
            Kind::Classic { .. } => {
                let (results, eff) = self
                    .c
                    .leave_group(
                        "g",
                        &[LeaveMember {
                            member_id: client.member_id.clone(),
                            instance_id: None,
                        }],
                        self.now,
                    )
                    .unwrap();
                assert_eq!(results, vec![Ok(())], "{name} leaves");
                self.absorb(eff);
            }
            Kind::Consumer { .. } => {
                let mut req = hb(&client.member_id, -1, None);
                req.subscribed_topic_names = None;
                let (r, eff) = self.c.consumer_heartbeat(req, &self.t, self.now).unwrap();
                assert_eq!(r.member_epoch, -1);
                self.absorb(eff);
            }
        }
    }

    fn join_request(&self, i: usize) -> JoinRequest {
        let cl = &self.clients[i];
        let owned: Vec<i32> = cl.owned.iter().copied().collect();
        let sub = encode_subscription(1, &["t"], &[("t", owned)]);
        JoinRequest {
            group_id: "g".into(),
            member_id: cl.member_id.clone(),
            instance_id: None,
            protocol_type: "consumer".into(),
            protocols: vec![("range".into(), sub)],
            session_timeout_ms: SESSION,
            rebalance_timeout_ms: REBALANCE,
            client_id: cl.name.clone(),
            client_host: "/127.0.0.1".into(),
            require_known_member_id: true,
        }
    }

    /// The leader's assignment in a classic group: partitions dealt round-robin over the
    /// members in id order.
    fn leader_assignment(members: &[JoinedMember]) -> Vec<(String, Bytes)> {
        let mut ids: Vec<&JoinedMember> = members.iter().collect();
        ids.sort_by(|a, b| a.member_id.cmp(&b.member_id));
        let mut parts: Vec<Vec<i32>> = vec![Vec::new(); ids.len()];
        for p in 0..PARTITIONS {
            parts[p as usize % ids.len()].push(p);
        }
        ids.iter()
            .zip(parts)
            .map(|(m, ps)| {
                assert!(decode_subscription(&m.metadata).is_some());
                (
                    m.member_id.clone(),
                    encode_assignment(1, &[("t".into(), ps)]),
                )
            })
            .collect()
    }

    fn on_join(&mut self, i: usize, r: JoinResponse) {
        let cl = &mut self.clients[i];
        let Kind::Classic {
            generation,
            rejoin,
            sync,
            ..
        } = &mut cl.kind
        else {
            return;
        };
        match r.error {
            Some(GroupError::MemberIdRequired) => {
                cl.member_id = r.member_id;
                *rejoin = true;
                return;
            }
            Some(_) => {
                *rejoin = true;
                return;
            }
            None => {}
        }
        cl.member_id = r.member_id.clone();
        *generation = r.generation;
        let assignments = if r.leader == r.member_id {
            Sim::leader_assignment(&r.members)
        } else {
            Vec::new()
        };
        let token = self.next_token + 1;
        self.next_token = token;
        let req = SyncRequest {
            group_id: "g".into(),
            member_id: r.member_id,
            instance_id: None,
            generation: r.generation,
            protocol_type: Some("consumer".into()),
            protocol: r.protocol,
            assignments,
        };
        match self.c.sync_group(req, token, self.now) {
            Ok((Some(s), eff)) => {
                self.absorb(eff);
                self.on_sync(i, s);
            }
            Ok((None, eff)) => {
                *sync = Some(token);
                self.absorb(eff);
            }
            Err(_) => *rejoin = true,
        }
    }

    fn on_sync(&mut self, i: usize, r: SyncResponse) {
        let cl = &mut self.clients[i];
        let Kind::Classic { rejoin, .. } = &mut cl.kind else {
            return;
        };
        if r.error.is_some() {
            *rejoin = true;
            return;
        }
        let a = decode_assignment(&r.assignment).unwrap();
        cl.owned = a
            .into_iter()
            .flat_map(|(t, ps)| {
                assert_eq!(t, "t");
                ps
            })
            .collect();
    }

    /// One step of client `i`; true when it had nothing to do (a heartbeat that needed no
    /// change).
    fn step(&mut self, i: usize) -> bool {
        let now = self.now;
        let cl = &self.clients[i];
        match &cl.kind {
            Kind::Consumer { epoch } => {
                let owned: Vec<i32> = cl.owned.iter().copied().collect();
                let req = hb(&cl.member_id, *epoch, Some(owned));
                match self.c.consumer_heartbeat(req, &self.t, now) {
                    Ok((r, eff)) => {
                        self.absorb(eff);
                        let cl = &mut self.clients[i];
                        cl.member_id = r.member_id;
                        let mut quiet = true;
                        if let Kind::Consumer { epoch } = &mut cl.kind {
                            quiet = *epoch == r.member_epoch;
                            *epoch = r.member_epoch;
                        }
                        if let Some(a) = r.assignment {
                            let new: BTreeSet<i32> = a.into_iter().flat_map(|(_, ps)| ps).collect();
                            quiet &= new == cl.owned;
                            cl.owned = new;
                        }
                        quiet
                    }
                    Err(e) => panic!("consumer heartbeat of {}: {e:?}", cl.name),
                }
            }
            Kind::Classic {
                join,
                sync,
                rejoin,
                generation,
                eager,
            } => {
                let (join, sync, rejoin, generation, eager) =
                    (*join, *sync, *rejoin, *generation, *eager);
                let member_id = cl.member_id.clone();
                if let Some(t) = join {
                    if let Some(Reply::Join(r)) = self.replies.remove(&t) {
                        if let Kind::Classic { join, .. } = &mut self.clients[i].kind {
                            *join = None;
                        }
                        self.on_join(i, r);
                    }
                    return false;
                }
                if let Some(t) = sync {
                    if let Some(Reply::Sync(r)) = self.replies.remove(&t) {
                        if let Kind::Classic { sync, .. } = &mut self.clients[i].kind {
                            *sync = None;
                        }
                        self.on_sync(i, r);
                    }
                    return false;
                }
                if !rejoin {
                    match self.c.heartbeat("g", &member_id, None, generation, now) {
                        Ok(()) => return true,
                        Err(GroupError::UnknownMemberId) => {
                            let cl = &mut self.clients[i];
                            cl.member_id.clear();
                            cl.owned.clear();
                        }
                        Err(_) => {}
                    }
                }
                // (Re)join; an eager client gives up everything first.
                if eager {
                    self.clients[i].owned.clear();
                }
                if let Kind::Classic { rejoin, .. } = &mut self.clients[i].kind {
                    *rejoin = false;
                }
                let req = self.join_request(i);
                let token = self.token();
                let (r, eff) = self.c.join_group(req, token, &self.t, now).unwrap();
                self.absorb(eff);
                match r {
                    Some(r) => self.on_join(i, r),
                    None => {
                        if let Kind::Classic { join, .. } = &mut self.clients[i].kind {
                            *join = Some(token);
                        }
                    }
                }
                false
            }
        }
    }

    /// Run rounds until every client is quiet for two rounds in a row; then check that every
    /// partition is owned by exactly one client and that the shares are fair.
    fn settle(&mut self) {
        let mut quiet_rounds = 0;
        for _ in 0..200 {
            let mut quiet = true;
            for i in 0..self.clients.len() {
                quiet &= self.step(i);
            }
            self.now += 100;
            let eff = self.c.tick(self.now);
            quiet &= eff.records.is_empty() && eff.replies.is_empty();
            self.absorb(eff);
            quiet_rounds = if quiet { quiet_rounds + 1 } else { 0 };
            if quiet_rounds == 2 {
                self.check_ownership();
                return;
            }
        }
        panic!("the group did not settle: {:#?}", self.clients);
    }

    fn check_ownership(&self) {
        let mut owner: BTreeMap<i32, &str> = BTreeMap::new();
        for cl in &self.clients {
            for p in &cl.owned {
                if let Some(other) = owner.insert(*p, &cl.name) {
                    panic!("partition {p} owned by {other} and {}", cl.name);
                }
            }
        }
        assert_eq!(owner.len(), PARTITIONS as usize, "{:#?}", self.clients);
        let n = self.clients.len() as i32;
        for cl in &self.clients {
            let share = cl.owned.len() as i32;
            assert!(
                share == PARTITIONS / n || share == (PARTITIONS + n - 1) / n,
                "unfair share {share} for {}: {:#?}",
                cl.name,
                self.clients
            );
        }
    }

    /// Reload the log into a fresh coordinator: the same groups, types and members.
    fn check_reload(&self) {
        let mut d = Coordinator::new(self.c.config().clone(), 1);
        d.load(
            0,
            self.log.iter().map(|r| (r.key.clone(), r.value.clone())),
            self.now,
        );
        assert_eq!(d.list_groups(&[], &[]), self.c.list_groups(&[], &[]));
        match self.group_type().as_str() {
            "consumer" => assert_eq!(
                format!("{:?}", d.describe_consumer_group("g", &self.t)),
                format!("{:?}", self.c.describe_consumer_group("g", &self.t)),
            ),
            _ => {
                let ids = |c: &Coordinator| -> Vec<String> {
                    let v = c.describe_classic("g").unwrap();
                    v.members.into_iter().map(|m| m.member_id).collect()
                };
                assert_eq!(ids(&d), ids(&self.c));
            }
        }
    }
}

fn hb(member: &str, epoch: i32, owned: Option<Vec<i32>>) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: epoch,
        instance_id: None,
        rack_id: None,
        rebalance_timeout_ms: REBALANCE,
        subscribed_topic_names: Some(vec!["t".into()]),
        subscribed_topic_regex: None,
        server_assignor: None,
        owned: owned.map(|p| vec![(uuid::Uuid::from_u128(TOPIC_ID), p)]),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
    }
}

fn config() -> GroupConfig {
    GroupConfig {
        initial_rebalance_delay_ms: 0,
        ..GroupConfig::default()
    }
}

fn rolling_upgrade_then_downgrade(eager: bool) {
    let mut sim = Sim::new(config());
    for n in ["c1", "c2", "c3"] {
        sim.add_classic(n, eager);
    }
    sim.settle();
    assert_eq!(sim.group_type(), "classic");
    // Upgrade: each classic member is replaced by a consumer-protocol one.
    for (old, new) in [("c1", "n1"), ("c2", "n2"), ("c3", "n3")] {
        sim.add_consumer(new);
        sim.settle();
        assert_eq!(sim.group_type(), "consumer", "converted when {new} joined");
        sim.check_reload();
        sim.leave(old);
        sim.settle();
        sim.check_reload();
    }
    let v = sim.c.describe_consumer_group("g", &sim.t).unwrap();
    assert!(v.members.iter().all(|m| !m.classic));
    assert_eq!(v.state, "Stable");
    // Downgrade: each consumer-protocol member is replaced by a classic one; the last one
    // leaving turns the group back into a classic group.
    for (old, new) in [("n1", "d1"), ("n2", "d2"), ("n3", "d3")] {
        sim.add_classic(new, eager);
        sim.settle();
        assert_eq!(sim.group_type(), "consumer");
        let v = sim.c.describe_consumer_group("g", &sim.t).unwrap();
        assert!(v.members.iter().any(|m| m.classic));
        sim.check_reload();
        sim.leave(old);
        sim.settle();
        sim.check_reload();
    }
    assert_eq!(sim.group_type(), "classic");
    assert_eq!(sim.c.describe_classic("g").unwrap().state, "Stable");
}

#[test]
fn rolling_upgrade_and_downgrade_with_eager_classic_members() {
    rolling_upgrade_then_downgrade(true);
}

#[test]
fn rolling_upgrade_and_downgrade_with_cooperative_classic_members() {
    rolling_upgrade_then_downgrade(false);
}

/// Two classic members (generation 1), then a consumer-protocol member joins.
fn upgraded(
    config: GroupConfig,
) -> (
    Sim,
    Result<(ConsumerHeartbeatResponse, Effects), GroupError>,
) {
    let mut sim = Sim::new(config);
    sim.add_classic("a", true);
    sim.add_classic("b", true);
    sim.settle();
    let r = sim
        .c
        .consumer_heartbeat(hb("", 0, Some(vec![])), &sim.t, sim.now);
    (sim, r)
}

#[test]
fn upgrade_converts_members_epochs_and_records() {
    let (mut sim, r) = upgraded(config());
    let (r, eff) = r.unwrap();
    let generation = match &sim.clients[0].kind {
        Kind::Classic { generation, .. } => *generation,
        Kind::Consumer { .. } => unreachable!(),
    };
    assert_eq!(
        r.member_epoch,
        generation + 1,
        "the group epoch is the generation, bumped"
    );
    assert_eq!(
        r.assignment,
        Some(Vec::new()),
        "everything is still owned by a and b"
    );
    // The classic group's record is deleted; the consumer group's written, with the classic
    // members' metadata.
    let decoded: Vec<records::Decoded> = eff
        .records
        .iter()
        .map(|(_, r)| records::decode(&r.key, r.value.as_deref()).unwrap())
        .collect();
    assert!(decoded.contains(&records::Decoded::Group {
        group: "g".into(),
        value: None
    }));
    let classic_members = decoded
        .iter()
        .filter(|d| {
            matches!(d, records::Decoded::Consumer {
                value: records::ConsumerValue::Member(_, Some(m)), ..
            } if m.classic.is_some())
        })
        .count();
    assert_eq!(classic_members, 2);
    sim.absorb(eff);
    let v = sim.c.describe_consumer_group("g", &sim.t).unwrap();
    assert_eq!(v.members.iter().filter(|m| m.classic).count(), 2);
    assert!(v
        .members
        .iter()
        .filter(|m| m.classic)
        .all(|m| m.member_epoch == generation));
    // A classic member's heartbeat: the group moved on, rejoin.
    let a = sim.clients[0].member_id.clone();
    assert_eq!(
        sim.c.heartbeat("g", &a, None, generation, sim.now),
        Err(GroupError::RebalanceInProgress)
    );
    assert_eq!(
        sim.c.heartbeat("g", &a, None, generation + 5, sim.now),
        Err(GroupError::IllegalGeneration)
    );
    // A consumer-protocol member is not a classic member.
    assert_eq!(
        sim.c
            .heartbeat("g", &r.member_id, None, r.member_epoch, sim.now),
        Err(GroupError::UnknownMemberId)
    );
    // Commits: a classic member's stale generation is ILLEGAL_GENERATION.
    assert_eq!(
        sim.c
            .commit_offsets("g", &a, None, generation + 1, &[], sim.now)
            .unwrap_err(),
        GroupError::IllegalGeneration
    );
    assert!(sim
        .c
        .commit_offsets("g", &a, None, generation, &[], sim.now)
        .is_ok());
    sim.check_reload();
}

#[test]
fn upgrade_refused_by_policy_or_protocol_type() {
    for policy in [MigrationPolicy::Downgrade, MigrationPolicy::Disabled] {
        let (sim, r) = upgraded(GroupConfig {
            migration_policy: policy,
            ..config()
        });
        assert_eq!(r.unwrap_err(), GroupError::GroupIdNotFound);
        assert_eq!(sim.group_type(), "classic");
    }
    // A classic group of another protocol type never converts.
    let mut c = Coordinator::new(config(), 1);
    c.load(0, Vec::<LoadItem>::new(), 0);
    let j = Sim::new(config()).join_request_for("connect");
    c.join_group(j, 1, &topics(), 0).unwrap();
    assert!(!c.describe_classic("g").unwrap().members.is_empty());
    assert_eq!(
        c.consumer_heartbeat(hb("", 0, None), &topics(), 0)
            .unwrap_err(),
        GroupError::GroupIdNotFound
    );
}

impl Sim {
    fn join_request_for(&self, protocol_type: &str) -> JoinRequest {
        JoinRequest {
            group_id: "g".into(),
            member_id: String::new(),
            instance_id: None,
            protocol_type: protocol_type.into(),
            protocols: vec![("p".into(), Bytes::from_static(b"x"))],
            session_timeout_ms: SESSION,
            rebalance_timeout_ms: REBALANCE,
            client_id: "x".into(),
            client_host: "/127.0.0.1".into(),
            require_known_member_id: false,
        }
    }
}

#[test]
fn downgrade_on_session_timeout_of_the_last_consumer_member_and_policy() {
    for policy in [MigrationPolicy::Bidirectional, MigrationPolicy::Upgrade] {
        let mut sim = Sim::new(GroupConfig {
            migration_policy: policy,
            ..config()
        });
        sim.add_classic("a", false);
        sim.add_classic("b", false);
        sim.settle();
        sim.add_consumer("n");
        sim.settle();
        assert_eq!(sim.group_type(), "consumer");
        // n stops heartbeating: its session expires.
        let n = sim.clients.remove(2);
        let deadline = sim.now + i64::from(GroupConfig::default().consumer_session_timeout_ms);
        while sim.now <= deadline {
            for i in 0..sim.clients.len() {
                sim.step(i);
            }
            sim.now += 1000;
            let eff = sim.c.tick(sim.now);
            sim.absorb(eff);
        }
        sim.settle();
        let v = sim.c.list_groups(&[], &[]);
        match policy {
            MigrationPolicy::Bidirectional => {
                assert_eq!(v[0].group_type, "classic");
                assert_eq!(sim.c.describe_classic("g").unwrap().members.len(), 2);
            }
            _ => {
                assert_eq!(v[0].group_type, "consumer", "downgrade disabled");
                let members = sim.c.describe_consumer_group("g", &sim.t).unwrap().members;
                assert!(members
                    .iter()
                    .all(|m| m.classic && m.member_id != n.member_id));
            }
        }
        sim.check_reload();
    }
}

#[test]
fn classic_member_that_does_not_rejoin_is_fenced() {
    let mut sim = Sim::new(config());
    sim.add_classic("a", true);
    sim.add_classic("b", true);
    sim.settle();
    sim.add_consumer("n");
    sim.step(2); // converts
                 // b is told to rejoin but never does; a and n carry on.
    let b = sim.clients.remove(1);
    let Kind::Classic { generation, .. } = b.kind else {
        unreachable!()
    };
    assert_eq!(
        sim.c
            .heartbeat("g", &b.member_id, None, generation, sim.now),
        Err(GroupError::RebalanceInProgress)
    );
    let until = sim.now + i64::from(REBALANCE) + 1000;
    while sim.now <= until {
        for i in 0..sim.clients.len() {
            sim.step(i);
        }
        sim.now += 500;
        let eff = sim.c.tick(sim.now);
        sim.absorb(eff);
    }
    sim.settle();
    let members = sim.c.describe_consumer_group("g", &sim.t).unwrap().members;
    assert_eq!(members.len(), 2);
    assert!(members.iter().all(|m| m.member_id != b.member_id));
}

#[test]
fn classic_requests_to_a_consumer_group_are_validated() {
    let (mut sim, r) = upgraded(config());
    let (r, eff) = r.unwrap();
    sim.absorb(eff);
    let t = sim.t.clone();
    let now = sim.now;
    // Protocols no classic member supports.
    let mut j = sim.join_request(0);
    j.protocols[0].0 = "roundrobin".into();
    assert_eq!(
        sim.c.join_group(j, 90, &t, now).unwrap_err(),
        GroupError::InconsistentGroupProtocol
    );
    // A malformed embedded subscription: Kafka fails with an internal error.
    let mut j = sim.join_request(0);
    j.protocols[0].1 = Bytes::from_static(b"\x00\x01\x7f");
    assert!(matches!(
        sim.c.join_group(j, 91, &t, now).unwrap_err(),
        GroupError::Internal(_)
    ));
    // A new dynamic member first gets MEMBER_ID_REQUIRED.
    let mut j = sim.join_request(0);
    j.member_id.clear();
    let (resp, _) = sim.c.join_group(j, 92, &t, now).unwrap();
    assert_eq!(resp.unwrap().error, Some(GroupError::MemberIdRequired));
    // SyncGroup: wrong generation, wrong protocol name, unknown member.
    let a = sim.clients[0].member_id.clone();
    let (jr, _) = sim.c.join_group(sim.join_request(0), 93, &t, now).unwrap();
    let jr = jr.unwrap();
    assert_eq!(jr.protocol.as_deref(), Some("range"));
    assert!(jr.leader.is_empty() && jr.members.is_empty());
    let sync = |generation: i32, protocol: &str, member: &str| SyncRequest {
        group_id: "g".into(),
        member_id: member.into(),
        instance_id: None,
        generation,
        protocol_type: Some("consumer".into()),
        protocol: Some(protocol.into()),
        assignments: Vec::new(),
    };
    assert_eq!(
        sim.c
            .sync_group(sync(jr.generation + 1, "range", &a), 94, now)
            .unwrap_err(),
        GroupError::IllegalGeneration
    );
    assert_eq!(
        sim.c
            .sync_group(sync(jr.generation, "sticky", &a), 95, now)
            .unwrap_err(),
        GroupError::InconsistentGroupProtocol
    );
    assert_eq!(
        sim.c
            .sync_group(sync(jr.generation, "range", "nobody"), 96, now)
            .unwrap_err(),
        GroupError::UnknownMemberId
    );
    assert_eq!(
        sim.c
            .sync_group(sync(r.member_epoch, "range", &r.member_id), 97, now)
            .unwrap_err(),
        GroupError::UnknownMemberId,
        "a consumer-protocol member cannot SyncGroup"
    );
    // LeaveGroup of a consumer-protocol member id is refused; of a classic one accepted.
    let (results, _) = sim
        .c
        .leave_group(
            "g",
            &[
                LeaveMember {
                    member_id: r.member_id.clone(),
                    instance_id: None,
                },
                LeaveMember {
                    member_id: a,
                    instance_id: None,
                },
            ],
            now,
        )
        .unwrap();
    assert_eq!(results, vec![Err(GroupError::UnknownMemberId), Ok(())]);
}

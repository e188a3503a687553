//! State-machine tests: generations, errors, timeouts, static membership, KIP-848, load.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::*;

const SESSION: i32 = 10_000;

fn coordinator() -> Coordinator {
    let mut c = Coordinator::new(
        GroupConfig {
            initial_rebalance_delay_ms: 0,
            ..GroupConfig::default()
        },
        1,
    );
    c.load(0, Vec::<LoadItem>::new(), 0);
    c
}

fn join(member: &str, instance: Option<&str>) -> JoinRequest {
    JoinRequest {
        group_id: "g".into(),
        member_id: member.into(),
        instance_id: instance.map(str::to_string),
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"meta"))],
        session_timeout_ms: SESSION,
        rebalance_timeout_ms: 5000,
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        require_known_member_id: true,
    }
}

fn sync(member: &str, generation: i32, assignments: Vec<(String, Bytes)>) -> SyncRequest {
    SyncRequest {
        group_id: "g".into(),
        member_id: member.into(),
        instance_id: None,
        generation,
        protocol_type: None,
        protocol: None,
        assignments,
    }
}

/// Join with MEMBER_ID_REQUIRED then the given id; returns the member id.
fn new_member(
    c: &mut Coordinator,
    token: Token,
    now: i64,
) -> (String, Option<JoinResponse>, Effects) {
    let (r, _) = c
        .join_group(join("", None), token, &BTreeMap::new(), now)
        .unwrap();
    let r = r.unwrap();
    assert_eq!(r.error, Some(GroupError::MemberIdRequired));
    let id = r.member_id.clone();
    let (r, eff) = c
        .join_group(join(&id, None), token, &BTreeMap::new(), now)
        .unwrap();
    (id, r, eff)
}

fn join_reply(eff: &Effects, token: Token) -> JoinResponse {
    eff.replies
        .iter()
        .find_map(|(t, r)| match r {
            Reply::Join(j) if *t == token => Some(j.clone()),
            _ => None,
        })
        .expect("a join reply")
}

#[test]
fn single_member_joins_syncs_and_heartbeats() {
    let mut c = coordinator();
    let (id, r, eff) = new_member(&mut c, 1, 0);
    assert!(r.is_none(), "join is answered through effects");
    let j = join_reply(&eff, 1);
    assert_eq!(j.generation, 1);
    assert_eq!(j.leader, id);
    assert_eq!(j.members.len(), 1);
    let (r, eff) = c
        .sync_group(
            sync(&id, 1, vec![(id.clone(), Bytes::from_static(b"A"))]),
            2,
            0,
        )
        .unwrap();
    assert!(r.is_none());
    assert!(
        matches!(&eff.replies[0], (2, Reply::Sync(s)) if s.assignment == Bytes::from_static(b"A"))
    );
    assert_eq!(eff.records.len(), 1, "group metadata persisted");
    c.heartbeat("g", &id, None, 1, 100).unwrap();
    assert_eq!(
        c.heartbeat("g", &id, None, 0, 100),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(
        c.heartbeat("g", "nobody", None, 1, 100),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn second_member_triggers_rebalance_and_both_get_new_generation() {
    let mut c = coordinator();
    let (a, _, _) = new_member(&mut c, 1, 0);
    c.sync_group(sync(&a, 1, vec![]), 2, 0).unwrap();
    let (b, r, eff) = new_member(&mut c, 3, 10);
    assert!(
        r.is_none() && eff.replies.is_empty(),
        "b waits for a to rejoin"
    );
    assert_eq!(
        c.heartbeat("g", &a, None, 1, 20),
        Err(GroupError::RebalanceInProgress)
    );
    let (r, eff) = c
        .join_group(join(&a, None), 4, &BTreeMap::new(), 30)
        .unwrap();
    assert!(r.is_none());
    let ja = join_reply(&eff, 4);
    let jb = join_reply(&eff, 3);
    assert_eq!((ja.generation, jb.generation), (2, 2));
    assert_eq!(ja.leader, a, "the leader is kept");
    assert_eq!(ja.members.len(), 2);
    assert!(jb.members.is_empty());
    // b syncs first and waits; a (leader) brings the assignment.
    let (r, eff) = c.sync_group(sync(&b, 2, vec![]), 5, 40).unwrap();
    assert!(r.is_none() && eff.replies.is_empty());
    let (_, eff) = c
        .sync_group(
            sync(
                &a,
                2,
                vec![
                    (a.clone(), Bytes::from_static(b"x")),
                    (b.clone(), Bytes::from_static(b"y")),
                ],
            ),
            6,
            40,
        )
        .unwrap();
    assert_eq!(eff.replies.len(), 2);
    let b_sync = eff.replies.iter().find(|(t, _)| *t == 5).unwrap();
    assert!(matches!(&b_sync.1, Reply::Sync(s) if s.assignment == Bytes::from_static(b"y")));
}

/// Between JoinGroup and the leader's SyncGroup (CompletingRebalance), as Kafka's
/// `ClassicGroup.validateOffsetCommit`: an OffsetCommit of the current generation is told
/// REBALANCE_IN_PROGRESS, a TxnOffsetCommit is not (its transaction decides); a commit of an
/// unknown member or an old generation is told so first.
#[test]
fn commits_while_completing_rebalance_are_checked_as_kafka_checks_them() {
    let mut c = coordinator();
    let (a, _, _) = new_member(&mut c, 1, 0);
    c.sync_group(sync(&a, 1, vec![]), 2, 0).unwrap();
    new_member(&mut c, 3, 10);
    let (_, eff) = c
        .join_group(join(&a, None), 4, &BTreeMap::new(), 20)
        .unwrap();
    assert_eq!(
        join_reply(&eff, 4).generation,
        2,
        "CompletingRebalance at 2"
    );
    let offsets = [OffsetCommit {
        topic: "t".into(),
        partition: 0,
        offset: 5,
        leader_epoch: -1,
        metadata: None,
    }];
    let commit = |c: &mut Coordinator, member: &str, generation| {
        c.commit_offsets("g", member, None, generation, &offsets, 30)
            .map(|_| ())
    };
    assert_eq!(commit(&mut c, &a, 2), Err(GroupError::RebalanceInProgress));
    assert_eq!(commit(&mut c, &a, 1), Err(GroupError::IllegalGeneration));
    assert_eq!(
        commit(&mut c, "nobody", 2),
        Err(GroupError::UnknownMemberId)
    );
    let txn_commit = |c: &mut Coordinator, member: &str, generation| {
        c.txn_commit_offsets("g", 7, member, None, generation, &offsets, 30)
            .map(|(results, ..)| results)
    };
    let results = txn_commit(&mut c, &a, 2).expect("not held to the group's state");
    assert!(results.iter().all(Result::is_ok));
    assert_eq!(
        txn_commit(&mut c, &a, 1).map(|_| ()),
        Err(GroupError::IllegalGeneration)
    );
}

#[test]
fn session_timeout_removes_member_and_rebalances() {
    let mut c = coordinator();
    let (a, _, _) = new_member(&mut c, 1, 0);
    let (b, _, _) = new_member(&mut c, 2, 0);
    // a was waiting when b joined: a must rejoin.
    let (_, eff) = c
        .join_group(join(&a, None), 3, &BTreeMap::new(), 0)
        .unwrap();
    assert_eq!(join_reply(&eff, 3).generation, 2);
    c.sync_group(sync(&a, 2, vec![]), 4, 0).unwrap();
    // Only a heartbeats; b's session expires.
    c.heartbeat("g", &a, None, 2, SESSION as i64 - 1).unwrap();
    let eff = c.tick(SESSION as i64 + 1);
    assert!(eff.replies.is_empty());
    assert_eq!(
        c.heartbeat("g", &a, None, 2, SESSION as i64 + 2),
        Err(GroupError::RebalanceInProgress)
    );
    let (_, eff) = c
        .join_group(join(&a, None), 5, &BTreeMap::new(), SESSION as i64 + 3)
        .unwrap();
    let j = join_reply(&eff, 5);
    assert_eq!(j.generation, 3);
    assert_eq!(j.members.len(), 1);
    assert_eq!(
        c.heartbeat("g", &b, None, 3, SESSION as i64 + 4),
        Err(GroupError::UnknownMemberId)
    );
}

/// A heartbeat that arrives just after another member's session ended, before the periodic
/// tick noticed it, learns of the rebalance at once (`tick_group` before the heartbeat, as
/// the broker calls it): Kafka's exact session timers have ended it by then. Without it, the
/// member heard of it one heartbeat interval later (a librdkafka static member's departure
/// took 11 s against Kafka's 10 at a 1 s heartbeat interval).
#[test]
fn a_heartbeat_right_after_a_session_ended_learns_of_the_rebalance() {
    let mut c = coordinator();
    let (a, _, _) = new_member(&mut c, 1, 0);
    let (b, _, _) = new_member(&mut c, 2, 0);
    let (_, eff) = c
        .join_group(join(&a, None), 3, &BTreeMap::new(), 0)
        .unwrap();
    assert_eq!(join_reply(&eff, 3).generation, 2);
    c.sync_group(sync(&a, 2, vec![]), 4, 0).unwrap();
    c.heartbeat("g", &a, None, 2, SESSION as i64 - 1).unwrap();
    // b's session ended at SESSION; no tick since.
    let now = SESSION as i64 + 1;
    let eff = c.tick_group("g", now);
    assert!(eff.replies.is_empty());
    assert_eq!(
        c.heartbeat("g", &a, None, 2, now),
        Err(GroupError::RebalanceInProgress)
    );
    assert_eq!(
        c.heartbeat("g", &b, None, 2, now),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn rebalance_timeout_drops_members_that_do_not_rejoin() {
    let mut c = coordinator();
    let (a, _, _) = new_member(&mut c, 1, 0);
    c.sync_group(sync(&a, 1, vec![]), 2, 0).unwrap();
    let (_b, _, eff) = new_member(&mut c, 3, 100);
    assert!(eff.replies.is_empty());
    // a keeps heartbeating but never rejoins: after the rebalance timeout (5000) b proceeds.
    c.heartbeat("g", &a, None, 1, 2000).ok();
    let eff = c.tick(5200);
    let j = join_reply(&eff, 3);
    assert_eq!(j.generation, 2);
    assert_eq!(j.members.len(), 1, "a was removed");
}

#[test]
fn leave_group_batched_and_unknown_members() {
    let mut c = coordinator();
    let (a, _, _) = new_member(&mut c, 1, 0);
    let (results, _) = c
        .leave_group(
            "g",
            &[
                LeaveMember {
                    member_id: a.clone(),
                    instance_id: None,
                },
                LeaveMember {
                    member_id: "ghost".into(),
                    instance_id: None,
                },
            ],
            10,
        )
        .unwrap();
    assert_eq!(results, vec![Ok(()), Err(GroupError::UnknownMemberId)]);
    assert_eq!(c.list_groups(&[], &[])[0].state, "Empty");
}

#[test]
fn static_member_rejoin_keeps_assignment_and_fences_old_id() {
    let mut c = coordinator();
    let (r, _) = c
        .join_group(join("", Some("i1")), 1, &BTreeMap::new(), 0)
        .unwrap();
    assert!(
        r.is_none(),
        "static members need no MEMBER_ID_REQUIRED round"
    );
    let eff = c.tick(0);
    let _ = eff;
    let view = c.describe_classic("g").unwrap();
    let old = view.members[0].member_id.clone();
    c.sync_group(
        sync(&old, 1, vec![(old.clone(), Bytes::from_static(b"A"))]),
        2,
        0,
    )
    .unwrap();
    // Restarted instance: unknown member id, same instance id -> new id, no rebalance.
    let (r, _) = c
        .join_group(join("", Some("i1")), 3, &BTreeMap::new(), 100)
        .unwrap();
    let r = r.expect("answered at once: the group is stable");
    assert_ne!(r.member_id, old);
    assert_eq!(r.generation, 1);
    assert_eq!(c.describe_classic("g").unwrap().state, "Stable");
    assert_eq!(
        c.heartbeat("g", &old, Some("i1"), 1, 200),
        Err(GroupError::FencedInstanceId)
    );
    c.heartbeat("g", &r.member_id, Some("i1"), 1, 200).unwrap();
    let mut s = sync(&r.member_id, 1, vec![]);
    s.instance_id = Some("i1".into());
    let (resp, _) = c.sync_group(s, 4, 200).unwrap();
    assert_eq!(resp.unwrap().assignment, Bytes::from_static(b"A"));
}

#[test]
fn invalid_session_timeout_and_protocol_mismatch() {
    let mut c = coordinator();
    let mut j = join("", None);
    j.session_timeout_ms = 10;
    assert_eq!(
        c.join_group(j, 1, &BTreeMap::new(), 0).unwrap_err(),
        GroupError::InvalidSessionTimeout
    );
    let (a, _, _) = new_member(&mut c, 1, 0);
    let _ = a;
    let mut j = join("", None);
    j.protocols = vec![("roundrobin".into(), Bytes::new())];
    j.require_known_member_id = false;
    assert_eq!(
        c.join_group(j, 2, &BTreeMap::new(), 0).unwrap_err(),
        GroupError::InconsistentGroupProtocol
    );
}

#[test]
fn group_max_size_is_enforced() {
    let mut c = Coordinator::new(
        GroupConfig {
            initial_rebalance_delay_ms: 0,
            max_size: 1,
            ..GroupConfig::default()
        },
        1,
    );
    c.load(0, Vec::<LoadItem>::new(), 0);
    new_member(&mut c, 1, 0);
    assert_eq!(
        c.join_group(join("", None), 2, &BTreeMap::new(), 0)
            .unwrap_err(),
        GroupError::GroupMaxSizeReached
    );
}

#[test]
fn initial_rebalance_delay_waits_for_more_members() {
    let mut c = Coordinator::new(
        GroupConfig {
            initial_rebalance_delay_ms: 1000,
            ..GroupConfig::default()
        },
        1,
    );
    c.load(0, Vec::<LoadItem>::new(), 0);
    let (_, _, eff) = new_member(&mut c, 1, 0);
    assert!(
        eff.replies.is_empty(),
        "the first join waits for the initial delay"
    );
    let (_, _, eff) = new_member(&mut c, 2, 500);
    assert!(eff.replies.is_empty());
    assert!(
        c.tick(1200).replies.is_empty(),
        "a second member extended the delay"
    );
    let eff = c.tick(1500);
    assert_eq!(eff.replies.len(), 2);
    assert_eq!(join_reply(&eff, 1).generation, 1);
}

#[test]
fn offsets_commit_fetch_and_simple_commits() {
    let mut c = coordinator();
    let commit = |t: &str, p, o| OffsetCommit {
        topic: t.into(),
        partition: p,
        offset: o,
        leader_epoch: -1,
        metadata: None,
    };
    // Admin commit to a group that does not exist creates an empty group.
    let (r, eff, pending) = c
        .commit_offsets("g", "", None, -1, &[commit("t", 0, 5)], 1)
        .unwrap();
    assert_eq!(r, vec![Ok(())]);
    assert_eq!(eff.records.len(), 1);
    c.commit_written(pending);
    let got = c.fetch_offsets("g", None).unwrap();
    assert_eq!(got[0].1.as_ref().unwrap().offset, 5);
    // A member commit with a wrong generation is refused.
    let (a, _, _) = new_member(&mut c, 1, 0);
    c.sync_group(sync(&a, 1, vec![]), 2, 0).unwrap();
    assert_eq!(
        c.commit_offsets("g", &a, None, 7, &[commit("t", 0, 6)], 2)
            .unwrap_err(),
        GroupError::IllegalGeneration
    );
    assert_eq!(
        c.commit_offsets("g", "", None, -1, &[commit("t", 0, 6)], 2)
            .unwrap_err(),
        GroupError::UnknownMemberId
    );
    let (_, _, pending) = c
        .commit_offsets("g", &a, None, 1, &[commit("t", 0, 6)], 3)
        .unwrap();
    c.commit_written(pending);
    assert_eq!(c.delete_group("g").unwrap_err(), GroupError::NonEmptyGroup);
    let missing = c.fetch_offsets("nope", Some(&[("t".into(), 0)])).unwrap();
    assert!(missing[0].1.is_none());
}

#[test]
fn offsets_and_groups_survive_reload_and_snapshot() {
    let mut c = Coordinator::new(
        GroupConfig {
            initial_rebalance_delay_ms: 0,
            snapshot_interval_records: 3,
            ..GroupConfig::default()
        },
        1,
    );
    c.load(0, Vec::<LoadItem>::new(), 0);
    let mut log: Vec<Record> = Vec::new();
    let (a, _, eff) = new_member(&mut c, 1, 0);
    log.extend(eff.records.into_iter().map(|(_, r)| r));
    let (_, eff) = c
        .sync_group(
            sync(&a, 1, vec![(a.clone(), Bytes::from_static(b"A"))]),
            2,
            0,
        )
        .unwrap();
    log.extend(eff.records.into_iter().map(|(_, r)| r));
    for i in 0..4 {
        let (_, eff, pending) = c
            .commit_offsets(
                "g",
                &a,
                None,
                1,
                &[OffsetCommit {
                    topic: "t".into(),
                    partition: 0,
                    offset: i,
                    leader_epoch: -1,
                    metadata: None,
                }],
                1,
            )
            .unwrap();
        c.commit_written(pending);
        log.extend(eff.records.into_iter().map(|(_, r)| r));
    }
    let snapshot = c.snapshot_if_due(0).expect("a snapshot is due");
    assert_eq!(snapshot.len(), 2, "one group record and one offset");
    assert!(c.snapshot_if_due(0).is_none());
    // Loading only the snapshot gives the same state as the whole log.
    for records in [log, snapshot] {
        let mut d = coordinator();
        d.load(0, records.into_iter().map(|r| (r.key, r.value)), 10);
        assert_eq!(
            d.fetch_offsets("g", None).unwrap()[0]
                .1
                .as_ref()
                .unwrap()
                .offset,
            3
        );
        let v = d.describe_classic("g").unwrap();
        assert_eq!(v.state, "Stable");
        d.heartbeat("g", &a, None, 1, 20).unwrap();
        assert_eq!(v.members[0].assignment, Bytes::from_static(b"A"));
    }
}

#[test]
fn expired_offsets_of_empty_groups_are_removed() {
    let mut c = Coordinator::new(
        GroupConfig {
            offsets_retention_ms: 1000,
            ..GroupConfig::default()
        },
        1,
    );
    c.load(0, Vec::<LoadItem>::new(), 0);
    let (_, _, pending) = c
        .commit_offsets(
            "g",
            "",
            None,
            -1,
            &[OffsetCommit {
                topic: "t".into(),
                partition: 0,
                offset: 1,
                leader_epoch: -1,
                metadata: None,
            }],
            0,
        )
        .unwrap();
    c.commit_written(pending);
    assert!(c.expire_offsets(500).records.is_empty());
    let eff = c.expire_offsets(1500);
    assert_eq!(eff.records.len(), 1);
    assert!(eff.records[0].1.value.is_none(), "a tombstone");
    assert!(c.list_groups(&[], &[]).is_empty());
}

#[test]
fn unloaded_partition_is_not_coordinated_here() {
    let mut c = coordinator();
    // A member waits in a rebalance; unloading hands back its parked request.
    let (a, _, _) = new_member(&mut c, 1, 0);
    c.sync_group(sync(&a, 1, vec![]), 2, 0).unwrap();
    let (_, r, _) = new_member(&mut c, 3, 10);
    assert!(
        r.is_none(),
        "the second member waits for the first to rejoin"
    );
    assert_eq!(c.unload(0), vec![3]);
    assert_eq!(c.unload(0), Vec::<Token>::new());
    assert_eq!(
        c.join_group(join("", None), 1, &BTreeMap::new(), 0)
            .unwrap_err(),
        GroupError::NotCoordinator
    );
}

#[test]
fn partition_for_matches_kafka() {
    // Checked with Kafka 4.3's own classes: "my-group".hashCode() == -1906497762 and
    // Utils.abs(h) % 50 == 12 (a mask of the sign bit would give 36); "my-txn" -> 45.
    assert_eq!(java_string_hash("my-group"), -1_906_497_762);
    assert_eq!(partition_for("my-group", 50), 12);
    assert_eq!(partition_for("my-txn", 50), 45);
    assert_eq!(partition_for("txn-1", 50), 10);
    assert_eq!(partition_for("", 50), 0);
}

fn topics() -> BTreeMap<String, TopicInfo> {
    let mut t = BTreeMap::new();
    t.insert(
        "t".to_string(),
        TopicInfo {
            id: uuid::Uuid::from_u128(7),
            partitions: 4,
        },
    );
    t
}

fn hb(member: &str, epoch: i32, owned: Option<Vec<i32>>) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        group_id: "g".into(),
        member_id: member.into(),
        member_epoch: epoch,
        instance_id: None,
        rack_id: None,
        rebalance_timeout_ms: 5000,
        subscribed_topic_names: Some(vec!["t".into()]),
        subscribed_topic_regex: None,
        server_assignor: None,
        owned: owned.map(|p| vec![(uuid::Uuid::from_u128(7), p)]),
        client_id: "c".into(),
        client_host: "/h".into(),
    }
}

fn count(r: &ConsumerHeartbeatResponse) -> Option<usize> {
    r.assignment
        .as_ref()
        .map(|a| a.iter().map(|(_, p)| p.len()).sum())
}

#[test]
fn consumer_group_revokes_before_reassigning() {
    let mut c = coordinator();
    let t = topics();
    let (a, _) = c.consumer_heartbeat(hb("a", 0, None), &t, 0).unwrap();
    assert_eq!(a.member_epoch, 1);
    assert_eq!(count(&a), Some(4));
    let (b, _) = c.consumer_heartbeat(hb("b", 0, None), &t, 10).unwrap();
    assert_eq!(b.member_epoch, 2);
    assert_eq!(count(&b), Some(0), "b waits: a still owns everything");
    // a is asked to revoke two partitions and keeps epoch 1.
    let (a2, _) = c.consumer_heartbeat(hb("a", 1, None), &t, 20).unwrap();
    assert_eq!(a2.member_epoch, 1);
    let kept: Vec<i32> = a2.assignment.as_ref().unwrap()[0].1.clone();
    assert_eq!(kept.len(), 2);
    // b still gets nothing until a acknowledges.
    let (b2, _) = c
        .consumer_heartbeat(hb("b", 2, Some(vec![])), &t, 30)
        .unwrap();
    assert_eq!(count(&b2).unwrap_or(0), 0);
    let (a3, _) = c
        .consumer_heartbeat(hb("a", 1, Some(kept.clone())), &t, 40)
        .unwrap();
    assert_eq!(a3.member_epoch, 2);
    let (b3, _) = c
        .consumer_heartbeat(hb("b", 2, Some(vec![])), &t, 50)
        .unwrap();
    assert_eq!(count(&b3), Some(2));
    assert_eq!(c.describe_consumer_group("g", &t).unwrap().state, "Stable");
    // Fencing and unknown members.
    assert_eq!(
        c.consumer_heartbeat(hb("b", 9, None), &t, 60).unwrap_err(),
        GroupError::FencedMemberEpoch
    );
    assert_eq!(
        c.consumer_heartbeat(hb("z", 3, None), &t, 60).unwrap_err(),
        GroupError::UnknownMemberId
    );
}

#[test]
fn consumer_member_session_expiry_frees_partitions() {
    let mut c = coordinator();
    let t = topics();
    c.consumer_heartbeat(hb("a", 0, None), &t, 0).unwrap();
    c.consumer_heartbeat(hb("b", 0, None), &t, 0).unwrap();
    c.consumer_heartbeat(hb("a", 1, None), &t, 0).unwrap();
    let session = GroupConfig::default().consumer_session_timeout_ms as i64;
    c.consumer_heartbeat(hb("b", 2, Some(vec![])), &t, session - 10)
        .unwrap();
    c.tick(session + 1); // a expires
    let (b, _) = c
        .consumer_heartbeat(hb("b", 2, None), &t, session + 2)
        .unwrap();
    assert_eq!(count(&b), Some(4));
    assert_eq!(b.member_epoch, 3);
}

#[test]
fn empty_classic_group_converts_to_consumer_and_back() {
    let mut c = coordinator();
    let t = topics();
    let (_, _, pending) = c
        .commit_offsets(
            "g",
            "",
            None,
            -1,
            &[OffsetCommit {
                topic: "t".into(),
                partition: 0,
                offset: 1,
                leader_epoch: -1,
                metadata: None,
            }],
            0,
        )
        .unwrap();
    c.commit_written(pending);
    c.consumer_heartbeat(hb("a", 0, None), &t, 0).unwrap();
    assert_eq!(c.list_groups(&[], &[])[0].group_type, "consumer");
    let mut other = join("", None);
    other.protocol_type = "connect".into();
    assert_eq!(
        c.join_group(other, 1, &BTreeMap::new(), 0).unwrap_err(),
        GroupError::InconsistentGroupProtocol,
        "a non-empty consumer group takes only classic members of protocol type consumer"
    );
    c.consumer_heartbeat(hb("a", -1, None), &t, 10).unwrap();
    new_member(&mut c, 2, 20);
    assert_eq!(c.list_groups(&[], &[])[0].group_type, "classic");
    assert_eq!(c.fetch_offsets("g", None).unwrap().len(), 1, "offsets kept");
}

fn consumer_records(c: &Coordinator) -> BTreeMap<Bytes, Bytes> {
    match c.shards[&0].groups.get("g") {
        Some(Group::Consumer(g)) => g.live_records(),
        _ => BTreeMap::new(),
    }
}

fn view(c: &Coordinator, t: &BTreeMap<String, TopicInfo>) -> String {
    format!("{:?}", c.describe_consumer_group("g", t))
}

#[test]
fn consumer_group_reload_equals_live() {
    let mut c = Coordinator::new(
        GroupConfig {
            snapshot_interval_records: 1,
            ..GroupConfig::default()
        },
        1,
    );
    c.load(0, Vec::<LoadItem>::new(), 0);
    let t = topics();
    let mut log: Vec<Record> = Vec::new();
    let mut step = |c: &mut Coordinator, req: ConsumerHeartbeat, now: i64| {
        let (r, eff) = c.consumer_heartbeat(req, &t, now).unwrap();
        log.extend(eff.records.into_iter().map(|(_, r)| r));
        r
    };
    step(&mut c, hb("a", 0, None), 0);
    step(&mut c, hb("b", 0, None), 10);
    let mut s = hb("s", 0, None);
    s.instance_id = Some("i".into());
    s.server_assignor = Some("range".into());
    step(&mut c, s, 15);
    // a is told to revoke and has not acknowledged yet: mid-reconciliation.
    let a2 = step(&mut c, hb("a", 1, None), 20);
    assert_eq!(a2.member_epoch, 1);
    assert_eq!(
        c.describe_consumer_group("g", &t).unwrap().state,
        "Reconciling"
    );
    let live = consumer_records(&c);
    assert!(!live.is_empty());
    let snapshot = c.snapshot_if_due(0).expect("a snapshot is due");
    let mut reloaded: Vec<Coordinator> = [log.clone(), snapshot]
        .into_iter()
        .map(|records| {
            let mut d = coordinator();
            d.load(0, records.into_iter().map(|r| (r.key, r.value)), 1000);
            assert_eq!(
                consumer_records(&d),
                live,
                "reloaded records equal the live ones"
            );
            assert_eq!(view(&d, &t), view(&c, &t));
            d
        })
        .collect();
    // The next heartbeats continue with the members' ids and epochs (no rejoin) and get the
    // same answers as on the live coordinator: a acknowledges the revocation, b and s get
    // the freed partitions.
    let kept: Vec<i32> = a2.assignment.as_ref().unwrap()[0].1.clone();
    let steps = [
        ("a", 1, Some(kept)),
        ("b", 2, Some(vec![])),
        ("s", 3, Some(vec![])),
        ("a", 3, None),
    ];
    for (m, epoch, owned) in steps {
        let mut req = hb(m, epoch, owned);
        if m == "s" {
            req.instance_id = Some("i".into());
        }
        let (want, eff) = c.consumer_heartbeat(req.clone(), &t, 1100).unwrap();
        log.extend(eff.records.into_iter().map(|(_, r)| r));
        for d in reloaded.iter_mut() {
            let (got, _) = d.consumer_heartbeat(req.clone(), &t, 1100).unwrap();
            assert_eq!(got.member_id, want.member_id);
            assert_eq!(got.member_epoch, want.member_epoch);
            if want.assignment.is_some() {
                assert_eq!(got.assignment, want.assignment);
            }
        }
    }
    assert_eq!(c.describe_consumer_group("g", &t).unwrap().state, "Stable");
    for d in &reloaded {
        assert_eq!(consumer_records(d), consumer_records(&c));
        assert_eq!(view(d, &t), view(&c, &t));
    }
    // Members leave and the group is deleted: tombstones leave nothing to reload.
    for (m, epoch) in [("a", -1), ("b", -1), ("s", -1)] {
        let (_, eff) = c.consumer_heartbeat(hb(m, epoch, None), &t, 2000).unwrap();
        log.extend(eff.records.into_iter().map(|(_, r)| r));
    }
    log.extend(
        c.delete_group("g")
            .unwrap()
            .records
            .into_iter()
            .map(|(_, r)| r),
    );
    let mut d = coordinator();
    d.load(0, log.into_iter().map(|r| (r.key, r.value)), 3000);
    assert!(d.list_groups(&[], &[]).is_empty());
}

fn txn_commit(c: &mut Coordinator, pid: i64, offset: i64) -> Vec<Record> {
    let (results, partition, records, pending) = c
        .txn_commit_offsets(
            "g",
            pid,
            "",
            None,
            -1,
            &[OffsetCommit {
                topic: "t".into(),
                partition: 0,
                offset,
                leader_epoch: -1,
                metadata: None,
            }],
            1,
        )
        .unwrap();
    assert_eq!(partition, 0);
    assert!(results.iter().all(Result::is_ok));
    assert!(
        !c.has_pending_offset("g", &("t".to_string(), 0)) || offset != 10,
        "nothing is pending before the records are written"
    );
    c.apply_txn_offsets(pending);
    records
}

fn committed(c: &Coordinator) -> Option<i64> {
    let tp = ("t".to_string(), 0);
    c.fetch_offsets("g", Some(std::slice::from_ref(&tp)))
        .unwrap()[0]
        .1
        .as_ref()
        .map(|o| o.offset)
}

#[test]
fn transactional_offsets_are_pending_until_their_marker() {
    let mut c = coordinator();
    let tp = ("t".to_string(), 0);
    txn_commit(&mut c, 7, 10);
    assert_eq!(committed(&c), None, "pending offsets are not visible");
    assert!(c.has_pending_offset("g", &tp));
    c.complete_txn(0, 7, true);
    assert_eq!(committed(&c), Some(10));
    assert!(!c.has_pending_offset("g", &tp));

    txn_commit(&mut c, 7, 20);
    c.complete_txn(0, 8, true); // another producer's marker changes nothing
    assert!(c.has_pending_offset("g", &tp));
    c.complete_txn(0, 7, false);
    assert_eq!(
        committed(&c),
        Some(10),
        "an aborted transaction's offsets are dropped"
    );
    assert!(!c.has_pending_offset("g", &tp));
}

#[test]
fn loading_replays_transactional_offsets_and_markers() {
    let mut c = coordinator();
    let first = txn_commit(&mut c, 7, 10);
    let second = txn_commit(&mut c, 9, 30);
    let mut items: Vec<LoadItem> = Vec::new();
    for (records, pid) in [(first, 7), (second, 9)] {
        items.extend(records.into_iter().map(|r| LoadItem::Record {
            key: r.key,
            value: r.value,
            producer_id: Some(pid),
        }));
    }
    items.push(LoadItem::Marker {
        producer_id: 7,
        commit: true,
    });
    let mut d = Coordinator::new(GroupConfig::default(), 1);
    assert_eq!(d.load(0, items, 2), 0);
    assert_eq!(committed(&d), Some(10));
    assert!(
        d.has_pending_offset("g", &("t".to_string(), 0)),
        "producer 9's transaction is still open after the load"
    );
    assert!(
        d.snapshot_if_due(0).is_none(),
        "no snapshot while a transaction's offsets are pending"
    );
    d.complete_txn(0, 9, true);
    assert_eq!(committed(&d), Some(30));
}

/// A live coordinator and the `__consumer_offsets` log its calls wrote, in the order they were
/// applied (the broker appends under the coordinator's mutex, so that is the log order).
struct Logged {
    c: Coordinator,
    log: Vec<LoadItem>,
}

impl Logged {
    fn new() -> Logged {
        Logged {
            c: coordinator(),
            log: Vec::new(),
        }
    }

    /// A plain OffsetCommit (no member: an admin or assign()-only consumer's commit).
    fn plain(&mut self, offset: i64) {
        let commit = OffsetCommit {
            topic: "t".into(),
            partition: 0,
            offset,
            leader_epoch: -1,
            metadata: None,
        };
        let (results, eff, pending) = self
            .c
            .commit_offsets("g", "", None, -1, &[commit], 1)
            .unwrap();
        assert!(results.iter().all(Result::is_ok));
        self.c.commit_written(pending);
        self.log.extend(
            eff.records
                .into_iter()
                .map(|(_, r)| (r.key, r.value).into()),
        );
    }

    /// A TxnOffsetCommit of producer `pid`, written and applied.
    fn txn(&mut self, pid: i64, offset: i64) {
        let records = txn_commit(&mut self.c, pid, offset);
        self.log
            .extend(records.into_iter().map(|r| LoadItem::Record {
                key: r.key,
                value: r.value,
                producer_id: Some(pid),
            }));
    }

    /// OffsetDelete of the partition, written and applied.
    fn delete(&mut self) {
        let (results, eff) = self.c.delete_offsets("g", &[("t".to_string(), 0)]).unwrap();
        assert!(results.iter().all(Result::is_ok));
        self.log.extend(
            eff.records
                .into_iter()
                .map(|(_, r)| (r.key, r.value).into()),
        );
    }

    /// Producer `pid`'s COMMIT or ABORT marker, written and applied.
    fn marker(&mut self, pid: i64, commit: bool) {
        self.c.complete_txn(0, pid, commit);
        self.log.push(LoadItem::Marker {
            producer_id: pid,
            commit,
        });
    }

    /// A coordinator loaded from `items`.
    fn load(items: Vec<LoadItem>) -> Coordinator {
        let mut d = Coordinator::new(GroupConfig::default(), 1);
        assert_eq!(d.load(0, items, 2), 0);
        d
    }

    /// What the log cleaner leaves of the log once every transaction in it has ended: the
    /// records of aborted transactions dropped, then the newest record of each key, and every
    /// marker.
    fn compacted(&self) -> Vec<LoadItem> {
        let aborted = |i: usize, pid: i64| {
            self.log[i..].iter().find_map(|item| match item {
                LoadItem::Marker {
                    producer_id,
                    commit,
                } if *producer_id == pid => Some(!commit),
                _ => None,
            }) == Some(true)
        };
        let key_of = |item: &LoadItem| match item {
            LoadItem::Record { key, .. } => Some(key.clone()),
            LoadItem::Marker { .. } => None,
        };
        let kept: Vec<(usize, &LoadItem)> = self
            .log
            .iter()
            .enumerate()
            .filter(|(i, item)| match item {
                LoadItem::Record {
                    producer_id: Some(pid),
                    ..
                } => !aborted(*i, *pid),
                _ => true,
            })
            .collect();
        kept.iter()
            .enumerate()
            .filter(|(j, (_, item))| {
                let Some(key) = key_of(item) else {
                    return true;
                };
                !kept[j + 1..]
                    .iter()
                    .any(|(_, later)| key_of(later).as_ref() == Some(&key))
            })
            .map(|(_, (_, item))| (*item).clone())
            .collect()
    }
}

#[test]
fn the_newer_record_in_the_log_wins_between_plain_and_transactional_offsets() {
    // (what happens in log order, the committed offset after it). Kafka keeps whichever
    // record is newer in the log (its `olderThan` comparison at the COMMIT marker).
    enum Step {
        Plain(i64),
        Txn(i64, i64),
        Commit(i64),
        Abort(i64),
        Delete,
    }
    use Step::*;
    let cases: Vec<(&str, Vec<Step>, Option<i64>)> = vec![
        (
            "a plain commit after the transactional one wins at the COMMIT",
            vec![Txn(7, 100), Plain(50), Commit(7)],
            Some(50),
        ),
        (
            "a transactional commit after the plain one wins at the COMMIT",
            vec![Plain(50), Txn(7, 100), Commit(7)],
            Some(100),
        ),
        (
            "an ABORT drops the pending offset",
            vec![Plain(50), Txn(7, 100), Abort(7)],
            Some(50),
        ),
        (
            "an ABORT drops the pending offset, the later plain one stays",
            vec![Txn(7, 100), Plain(50), Abort(7)],
            Some(50),
        ),
        (
            "with nothing committed the pending offset is taken",
            vec![Txn(7, 100), Commit(7)],
            Some(100),
        ),
        (
            "transactions ending out of order: the newest record wins",
            vec![Txn(7, 100), Plain(50), Txn(9, 200), Commit(9), Commit(7)],
            Some(200),
        ),
        (
            "a later transaction's older-record ending does not undo a newer plain commit",
            vec![Txn(7, 100), Txn(9, 200), Plain(50), Commit(9), Commit(7)],
            Some(50),
        ),
        (
            "an offset deleted while a transaction holds one pending: the tombstone drops it",
            vec![Plain(50), Txn(7, 100), Delete, Commit(7)],
            None,
        ),
    ];
    for (what, steps, want) in cases {
        let mut l = Logged::new();
        for step in steps {
            match step {
                Plain(o) => l.plain(o),
                Txn(pid, o) => l.txn(pid, o),
                Commit(pid) => l.marker(pid, true),
                Abort(pid) => l.marker(pid, false),
                Delete => l.delete(),
            }
        }
        assert_eq!(committed(&l.c), want, "live: {what}");
        assert!(!l.c.has_pending_offset("g", &("t".to_string(), 0)));
        let reloaded = Logged::load(l.log.clone());
        assert_eq!(committed(&reloaded), want, "reloaded from the log: {what}");
        let compacted = Logged::load(l.compacted());
        assert_eq!(
            committed(&compacted),
            want,
            "reloaded after compaction: {what}"
        );
    }
}

#[test]
fn a_plain_commit_while_a_transaction_is_open_survives_a_reload_mid_transaction() {
    // Reloaded between the plain commit and the marker: the pending offset's place in the
    // log is known from the replay, so the marker that follows the load decides as the live
    // coordinator would have.
    let mut l = Logged::new();
    l.txn(7, 100);
    l.plain(50);
    let mut reloaded = Logged::load(l.log.clone());
    assert_eq!(committed(&reloaded), Some(50));
    assert!(reloaded.has_pending_offset("g", &("t".to_string(), 0)));
    reloaded.complete_txn(0, 7, true);
    l.marker(7, true);
    assert_eq!(committed(&reloaded), Some(50));
    assert_eq!(committed(&l.c), Some(50));

    let mut l = Logged::new();
    l.plain(50);
    l.txn(7, 100);
    let mut reloaded = Logged::load(l.log.clone());
    reloaded.complete_txn(0, 7, true);
    assert_eq!(committed(&reloaded), Some(100));

    // Records applied after a load come after everything it replayed.
    let mut l = Logged::new();
    l.plain(10);
    l.txn(7, 100);
    l.c = Logged::load(l.log.clone());
    l.plain(50);
    l.marker(7, true);
    assert_eq!(committed(&l.c), Some(50));
    assert_eq!(committed(&Logged::load(l.log.clone())), Some(50));
}

#[test]
fn regex_subscription_follows_matching_topics() {
    let mut c = coordinator();
    let mut t = topics();
    t.insert(
        "rx-1".into(),
        TopicInfo {
            id: uuid::Uuid::from_u128(8),
            partitions: 2,
        },
    );
    let regex = |epoch: i32, re: Option<&str>| ConsumerHeartbeat {
        subscribed_topic_names: (epoch == 0).then(Vec::new),
        subscribed_topic_regex: re.map(str::to_string),
        ..hb("a", epoch, None)
    };
    let (a, _) = c
        .consumer_heartbeat(regex(0, Some("rx-.*")), &t, 0)
        .unwrap();
    assert_eq!(count(&a), Some(2), "rx-1's partitions, not t's");
    // A matching topic created later joins the subscription on the next heartbeat.
    t.insert(
        "rx-2".into(),
        TopicInfo {
            id: uuid::Uuid::from_u128(9),
            partitions: 3,
        },
    );
    let (a, _) = c
        .consumer_heartbeat(regex(a.member_epoch, None), &t, 10)
        .unwrap();
    assert_eq!(count(&a), Some(5));
    let described = c.describe_consumer_group("g", &t).unwrap();
    assert_eq!(
        described.members[0].subscribed_topic_regex.as_deref(),
        Some("rx-.*")
    );
    let (a, _) = c
        .consumer_heartbeat(regex(a.member_epoch, Some("")), &t, 20)
        .unwrap();
    assert_eq!(
        count(&a),
        Some(0),
        "an empty expression ends the subscription"
    );
    // An invalid expression is refused and changes nothing.
    assert!(matches!(
        c.consumer_heartbeat(regex(a.member_epoch, Some("rx-(")), &t, 30),
        Err(GroupError::InvalidRegularExpression(_))
    ));
}

fn plain_commit(offset: i64) -> OffsetCommit {
    OffsetCommit {
        topic: "t".into(),
        partition: 0,
        offset,
        leader_epoch: -1,
        metadata: None,
    }
}

fn fetched(c: &Coordinator) -> Option<i64> {
    let tp = ("t".to_string(), 0);
    c.fetch_offsets("g", Some(std::slice::from_ref(&tp)))
        .unwrap()[0]
        .1
        .as_ref()
        .map(|o| o.offset)
}

/// An OffsetCommit's offsets are pending while the append they are in is not yet durable and
/// confirmed: OffsetFetch answers what was committed before (here: nothing), as Kafka's
/// GroupMetadata answers from `offsets`, never from `pendingOffsetCommits`. A reader that saw
/// the offset could see it go away again if that append then failed.
#[test]
fn an_offset_commit_is_not_visible_before_its_append_is_confirmed() {
    let mut c = coordinator();
    let (results, eff, _pending) = c
        .commit_offsets("g", "", None, -1, &[plain_commit(5)], 1)
        .unwrap();
    assert_eq!(results, vec![Ok(())]);
    assert_eq!(
        eff.records.len(),
        1,
        "the commit's record is to be appended"
    );
    assert_eq!(
        fetched(&c),
        None,
        "OffsetFetch answered an offset whose append is not confirmed yet"
    );
    assert!(
        c.all_committed().is_empty(),
        "lag computed from an unconfirmed offset"
    );
}

/// An admin commit of `offset` to partition t-0 of group "g": (records, pending offsets).
fn admin_commit(c: &mut Coordinator, offset: i64, now_ms: i64) -> (Vec<Record>, PendingOffsets) {
    let (results, eff, pending) = c
        .commit_offsets("g", "", None, -1, &[plain_commit(offset)], now_ms)
        .unwrap();
    assert_eq!(results, vec![Ok(())]);
    (eff.records.into_iter().map(|(_, r)| r).collect(), pending)
}

/// Confirmed, the offset is committed; failed (a failed fsync, a lost confirmation of
/// ownership), it is dropped: OffsetFetch then answers the offset committed before, never
/// the failed one, and nothing is pending any more.
#[test]
fn a_confirmed_commit_is_applied_and_a_failed_one_dropped() {
    let mut c = coordinator();
    let tp = ("t".to_string(), 0);
    let (_, first) = admin_commit(&mut c, 5, 1);
    assert!(
        c.has_pending_offset("g", &tp),
        "require_stable sees it pending"
    );
    c.commit_written(first);
    assert_eq!(fetched(&c), Some(5));
    assert!(!c.has_pending_offset("g", &tp));

    let (_, failed) = admin_commit(&mut c, 9, 2);
    assert_eq!(fetched(&c), Some(5), "a pending commit is not answered");
    c.commit_failed(failed);
    assert_eq!(fetched(&c), Some(5), "a failed commit is never answered");
    assert!(!c.has_pending_offset("g", &tp));
    assert_eq!(c.all_committed(), vec![("g".into(), "t".into(), 0, 5)]);
}

/// Two commits of one partition in flight at once (two flush rounds): whichever record is
/// newer in the log wins, in whatever order their confirmations are applied, and the failure
/// of the newer one leaves the older one's offset (Kafka's `onOffsetCommitAppend`, keyed by
/// the record's place in the log).
#[test]
fn two_pending_commits_of_one_partition_settle_in_log_order() {
    for newer_first in [false, true] {
        let mut c = coordinator();
        let (_, older) = admin_commit(&mut c, 5, 1);
        let (_, newer) = admin_commit(&mut c, 7, 2);
        assert_eq!(fetched(&c), None);
        if newer_first {
            c.commit_written(newer);
            assert_eq!(fetched(&c), Some(7));
            c.commit_written(older);
        } else {
            c.commit_written(older);
            assert_eq!(
                fetched(&c),
                Some(5),
                "the older one is confirmed, the newer pending"
            );
            assert!(c.has_pending_offset("g", &("t".into(), 0)));
            c.commit_written(newer);
        }
        assert_eq!(fetched(&c), Some(7), "newer first: {newer_first}");
    }
    // The older confirmed, the newer failed: the older one stays.
    let mut c = coordinator();
    let (_, older) = admin_commit(&mut c, 5, 1);
    let (_, newer) = admin_commit(&mut c, 7, 2);
    c.commit_written(older);
    c.commit_failed(newer);
    assert_eq!(fetched(&c), Some(5));
}

/// A tombstone written while a commit is pending (OffsetDelete, DeleteGroups, a deleted
/// topic) deletes the pending offset too: its record is in the log before the tombstone, so
/// its confirmation must not bring the offset back; the tombstone is written even when the
/// only offset was pending.
#[test]
fn a_tombstone_written_while_a_commit_is_pending_deletes_it() {
    let tp = ("t".to_string(), 0);
    // OffsetDelete.
    let mut c = coordinator();
    let (_, pending) = admin_commit(&mut c, 5, 1);
    let (results, eff) = c.delete_offsets("g", std::slice::from_ref(&tp)).unwrap();
    assert_eq!(results, vec![Ok(())]);
    assert_eq!(
        eff.records.len(),
        1,
        "a tombstone for the pending offset's record"
    );
    c.commit_written(pending);
    assert_eq!(fetched(&c), None, "OffsetDelete's tombstone came after it");
    // DeleteGroups.
    let mut c = coordinator();
    let (_, pending) = admin_commit(&mut c, 5, 1);
    let eff = c.delete_group("g").unwrap();
    let offset_tombstones = eff
        .records
        .iter()
        .filter(|(_, r)| r.key == records::offset_key("g", "t", 0) && r.value.is_none())
        .count();
    assert_eq!(offset_tombstones, 1);
    c.commit_written(pending);
    assert_eq!(fetched(&c), None, "the group's deletion came after it");
    assert!(
        c.list_groups(&[], &[]).is_empty(),
        "the deleted group is not brought back"
    );
    // A deleted topic.
    let mut c = coordinator();
    let (_, pending) = admin_commit(&mut c, 5, 1);
    assert_eq!(c.topic_deleted("t").records.len(), 1);
    c.commit_written(pending);
    assert_eq!(fetched(&c), None, "the topic's deletion came after it");
}

/// Expiry leaves a partition with a commit in flight alone (the commit is newer than the
/// retention), and does not forget a group whose only offsets are pending.
#[test]
fn expiry_spares_partitions_and_groups_with_commits_in_flight() {
    let mut c = Coordinator::new(
        GroupConfig {
            offsets_retention_ms: 1000,
            ..GroupConfig::default()
        },
        1,
    );
    c.load(0, Vec::<LoadItem>::new(), 0);
    // Only pending: the group stays, nothing is written.
    let (_, first) = admin_commit(&mut c, 5, 0);
    assert!(c.expire_offsets(5000).records.is_empty());
    assert_eq!(c.list_groups(&[], &[]).len(), 1);
    c.commit_written(first);
    // An old committed offset with a new commit of it in flight: not expired.
    let (_, second) = admin_commit(&mut c, 6, 6000);
    assert!(c.expire_offsets(6000).records.is_empty());
    c.commit_written(second);
    assert_eq!(fetched(&c), Some(6));
}

/// A snapshot written while a commit is pending writes the newest record of its key, the
/// pending one's (its record is in the log already and the snapshot drops what lies before
/// it): loading the snapshot gives what the state is once the commit is confirmed, and the
/// state before confirmation still answers the committed offset.
#[test]
fn a_snapshot_keeps_the_record_of_a_pending_commit() {
    let mut c = Coordinator::new(
        GroupConfig {
            snapshot_interval_records: 2,
            ..GroupConfig::default()
        },
        1,
    );
    c.load(0, Vec::<LoadItem>::new(), 0);
    let (_, first) = admin_commit(&mut c, 5, 1);
    c.commit_written(first);
    let (_, second) = admin_commit(&mut c, 7, 2);
    let snapshot = c.snapshot_if_due(0).expect("a snapshot is due");
    assert_eq!(fetched(&c), Some(5), "the snapshot applies nothing");
    let mut reloaded = Coordinator::new(GroupConfig::default(), 1);
    reloaded.load(0, snapshot.into_iter().map(|r| (r.key, r.value)), 3);
    assert_eq!(fetched(&reloaded), Some(7));
    c.commit_written(second);
    assert_eq!(fetched(&c), Some(7));
}

/// A commit made under an earlier load of the partition (unloaded and loaded again while its
/// append was in flight) changes nothing: the new load's log decides.
#[test]
fn a_commit_settled_after_a_reload_changes_nothing() {
    let mut c = coordinator();
    let (_, pending) = admin_commit(&mut c, 5, 1);
    c.unload(0);
    // The load finds no record (the append was lost with a failed fsync): nothing committed.
    c.load(0, Vec::<LoadItem>::new(), 2);
    // The same place numbers are handed out again under the new load.
    let (_, newer) = admin_commit(&mut c, 8, 3);
    c.commit_written(pending);
    assert_eq!(
        fetched(&c),
        None,
        "a settlement of the earlier load applied an offset"
    );
    c.commit_written(newer);
    assert_eq!(fetched(&c), Some(8));
}

/// A topic deleted while a transaction holds an offset of it for a group that has none
/// committed: the deletion's tombstone drops the pending offset, so the transaction's COMMIT
/// marker does not bring it back (a topic created again under the name would resume there),
/// in memory and when the log is loaded again.
#[test]
fn a_deleted_topic_forgets_offsets_pending_in_a_transaction() {
    let mut c = coordinator();
    let mut log = txn_commit(&mut c, 7, 42);
    let eff = c.topic_deleted("t");
    assert_eq!(
        eff.records.len(),
        1,
        "a tombstone for the offset the transaction holds"
    );
    log.extend(eff.records.into_iter().map(|(_, r)| r));
    c.complete_txn(0, 7, true);
    assert_eq!(
        committed(&c),
        None,
        "the COMMIT marker brought the offset back"
    );
    // Loaded from the log: the transactional record, the tombstone, then the marker.
    let mut d = coordinator();
    let mut items: Vec<LoadItem> = log
        .into_iter()
        .enumerate()
        .map(|(i, r)| LoadItem::Record {
            key: r.key,
            value: r.value,
            producer_id: (i == 0).then_some(7),
        })
        .collect();
    items.push(LoadItem::Marker {
        producer_id: 7,
        commit: true,
    });
    d.load(0, items, 3000);
    assert_eq!(
        committed(&d),
        None,
        "the reloaded log brought the offset back"
    );
}

//! Bytes-in balancing. Each broker publishes how many bytes a second were appended to the
//! partitions it owns, and which of them took most (`P/load/<node>`, under its lease:
//! [`BrokerLoad`]); the controller, once the partition counts are settled, moves busy
//! partitions from the broker taking most bytes in to one taking fewer ([`plan_load_moves`]).
//!
//! Counting partitions (per topic, per volume: [`crate::cluster::plan_assignments`]) evens
//! out bytes in as long as a topic's partitions take similar loads; what it cannot see is a
//! few busy partitions of different topics landing on one broker. A move here never widens
//! the spread of a topic's partitions over their candidates, so the count balancing never
//! undoes it, and where the counts leave no room it is a swap (the busy partition for one of
//! the other broker's quiet ones, of the same or another topic).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::cluster::{direct_brokers, ClusterView};

/// The most partitions a broker lists in its [`BrokerLoad::top`].
pub const LOAD_TOP: usize = 16;

/// What a broker publishes of its load (`P/load/<node>`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerLoad {
    /// Bytes a second appended to the partitions it owned, over its last window.
    pub bytes_in: u64,
    /// Its busiest partitions over that window, busiest first, at most [`LOAD_TOP`]:
    /// (topic, partition, bytes a second); only partitions that took bytes.
    #[serde(default)]
    pub top: Vec<(String, i32, u64)>,
    /// `top` names every partition that took bytes (the others took none); else those not
    /// named took at most the last named one's rate.
    #[serde(default)]
    pub complete: bool,
}

/// When the controller moves partitions for bytes in
/// (`sluice.cluster.balance.bytes.*`).
#[derive(Clone, Copy, Debug)]
pub struct LoadBalance {
    /// A difference between two brokers' bytes in below this (bytes a second) moves nothing.
    pub threshold: u64,
    /// Nor one below this percentage of the busier broker's bytes in.
    pub percent: u64,
    /// At most this many partitions move in one round (a swap moves two).
    pub moves_max: usize,
}

/// One partition as the planner sees it.
#[derive(Clone, Debug)]
struct Part {
    topic: String,
    partition: i32,
    owner: i32,
    /// Bytes a second, as its owner published, or as estimated for one it did not name.
    rate: u64,
    /// The topic and the volume (None: any broker) whose candidates it is balanced among.
    group: (String, Option<u16>),
    /// The brokers that may own it.
    candidates: Vec<i32>,
    /// Its owner named it (`rate` is measured, not a bound): only such a partition is moved
    /// for its own load.
    named: bool,
    movable: bool,
}

/// The moves that even out the brokers' bytes in: `(topic, partition, new owner)`.
///
/// Nothing moves unless every live broker has published its load, no partition lacks a
/// live owner and no move is under way (the loads then describe the ownership the view
/// holds). Then, while two brokers' bytes in differ by more than the thresholds: a busy
/// partition (one its owner named) of the busiest broker moves to a broker taking fewer
/// bytes that may own it (a candidate of its volume, settled when locality is in use, under
/// its partition budget), alone if its topic's group and the totals leave room (the
/// receiving broker owns fewer of both), else swapped for the receiver's quietest partition
/// that may go the other way. A move is taken only if it narrows the gap between the two by
/// at least the threshold, the best one first; the planner updates the rates it assumes and
/// goes on. Pinned partitions and partitions whose volume is not recorded yet stay put.
/// Deterministic for a given view, loads and `settled`.
pub fn plan_load_moves(
    view: &ClusterView,
    loads: &BTreeMap<i32, BrokerLoad>,
    settled: &BTreeSet<i32>,
    cfg: LoadBalance,
) -> Vec<(String, i32, i32)> {
    let live: Vec<i32> = view.brokers.keys().copied().collect();
    if live.len() < 2 || live.iter().any(|b| !loads.contains_key(b)) {
        return Vec::new();
    }
    let Some(mut parts) = parts(view, loads) else {
        return Vec::new();
    };
    let locality = view.brokers.values().any(|b| !b.direct.is_empty());
    let mut rate: BTreeMap<i32, u64> = live.iter().map(|b| (*b, loads[b].bytes_in)).collect();
    let mut total: BTreeMap<i32, usize> = live.iter().map(|b| (*b, 0)).collect();
    let mut in_group: BTreeMap<(&str, Option<u16>, i32), usize> = BTreeMap::new();
    for p in &parts {
        *total.entry(p.owner).or_default() += 1;
    }
    let keys: Vec<(String, Option<u16>)> = parts.iter().map(|p| p.group.clone()).collect();
    for (p, k) in parts.iter().zip(&keys) {
        *in_group.entry((k.0.as_str(), k.1, p.owner)).or_default() += 1;
    }
    let mut plan = Vec::new();
    while plan.len() < cfg.moves_max {
        let Some(step) = best_step(
            view, &parts, &rate, &total, &in_group, settled, locality, cfg,
        ) else {
            break;
        };
        let moved: Vec<usize> = match step.swap {
            Some(q) => vec![step.part, q],
            None => vec![step.part],
        };
        if plan.len() + moved.len() > cfg.moves_max {
            break;
        }
        for i in moved {
            let (from, to) = (
                parts[i].owner,
                if parts[i].owner == step.from {
                    step.to
                } else {
                    step.from
                },
            );
            let k = &keys[i];
            *in_group.entry((k.0.as_str(), k.1, from)).or_default() -= 1;
            *in_group.entry((k.0.as_str(), k.1, to)).or_default() += 1;
            *total.entry(from).or_default() -= 1;
            *total.entry(to).or_default() += 1;
            if let Some(r) = rate.get_mut(&from) {
                *r = r.saturating_sub(parts[i].rate);
            }
            *rate.entry(to).or_default() += parts[i].rate;
            parts[i].owner = to;
            // Moved once this round: not again.
            parts[i].movable = false;
            plan.push((parts[i].topic.clone(), parts[i].partition, to));
        }
    }
    plan
}

/// The move [`best_step`] chose: `part` from `from` to `to`, and `swap` back.
struct Step {
    part: usize,
    swap: Option<usize>,
    from: i32,
    to: i32,
}

/// The single move or swap that narrows the widest gap most, or None.
#[allow(clippy::too_many_arguments)]
fn best_step(
    view: &ClusterView,
    parts: &[Part],
    rate: &BTreeMap<i32, u64>,
    total: &BTreeMap<i32, usize>,
    in_group: &BTreeMap<(&str, Option<u16>, i32), usize>,
    settled: &BTreeSet<i32>,
    locality: bool,
    cfg: LoadBalance,
) -> Option<Step> {
    let (&h, &hot) = rate
        .iter()
        .max_by_key(|(b, r)| (**r, std::cmp::Reverse(**b)))?;
    let floor = cfg
        .threshold
        .max(hot.saturating_mul(cfg.percent) / 100)
        .max(1);
    // The receivers, quietest first.
    let mut receivers: Vec<(i32, u64)> = rate
        .iter()
        .filter(|(b, r)| **b != h && hot.saturating_sub(**r) > floor)
        .filter(|(b, _)| !locality || settled.contains(b))
        .map(|(b, r)| (*b, *r))
        .collect();
    receivers.sort_by_key(|(b, r)| (*r, *b));
    // Each receiver's partitions that may go to `h`, quietest first.
    let mut best: Option<(u64, Step)> = None;
    for (c, cold) in receivers {
        let gap = hot - cold;
        let full = view.is_full(c, total[&c]);
        let mut back: Vec<usize> = (0..parts.len())
            .filter(|&i| {
                parts[i].owner == c && parts[i].movable && parts[i].candidates.contains(&h)
            })
            .collect();
        back.sort_by_key(|&i| (parts[i].rate, i));
        for (i, p) in parts.iter().enumerate() {
            if p.owner != h || !p.movable || !p.named || p.rate == 0 || !p.candidates.contains(&c) {
                continue;
            }
            let mut consider = |shift: u64, swap: Option<usize>| {
                if shift == 0 || shift >= gap {
                    return;
                }
                let after = gap.abs_diff(2 * shift);
                if gap - after < floor {
                    return;
                }
                if best.as_ref().is_none_or(|(a, _)| after < *a) {
                    best = Some((
                        after,
                        Step {
                            part: i,
                            swap,
                            from: h,
                            to: c,
                        },
                    ));
                }
            };
            // Alone: the receiver owns fewer of the topic's group and fewer in all.
            if !full && room(in_group, p, h, c) && total[&h] > total[&c] {
                consider(p.rate, None);
            }
            // Swapped for the receiver's quietest partition that may go back.
            let same = |q: &Part| q.group == p.group;
            if let Some(&q) = back.iter().find(|&&q| {
                let q = &parts[q];
                q.rate < p.rate && (same(q) || (room(in_group, p, h, c) && room(in_group, q, c, h)))
            }) {
                consider(p.rate - parts[q].rate, Some(q));
            }
        }
    }
    best.map(|(_, s)| s)
}

/// Every partition with its owner's rate, group and candidates; None when the loads may not
/// describe the ownership (a partition without a live owner, or a move under way).
fn parts(view: &ClusterView, loads: &BTreeMap<i32, BrokerLoad>) -> Option<Vec<Part>> {
    let direct = direct_brokers(view);
    let live: Vec<i32> = view.brokers.keys().copied().collect();
    let locality = view.brokers.values().any(|b| !b.direct.is_empty());
    let named: BTreeMap<(&str, i32, i32), u64> = loads
        .iter()
        .flat_map(|(b, l)| {
            l.top
                .iter()
                .map(move |(t, p, r)| ((t.as_str(), *p, *b), *r))
        })
        .collect();
    // What a partition its owner did not name took, at most.
    let unnamed = |b: i32| {
        let l = &loads[&b];
        if l.complete {
            0
        } else {
            l.top.iter().map(|(_, _, r)| *r).min().unwrap_or(0)
        }
    };
    let mut out = Vec::with_capacity(view.owners.len());
    for ((topic, p), rec) in &view.owners {
        if view.topics.get(topic).is_none_or(|t| *p >= t.partitions()) {
            continue;
        }
        let o = &rec.owner;
        if !view.brokers.contains_key(&o.node) || o.to.is_some() || o.from.is_some() {
            return None;
        }
        let (volume, candidates, movable) = match o.volume {
            Some(v) if direct.contains_key(&v) => (Some(v), direct[&v].clone(), true),
            // Not recorded yet while locality is in use: being acquired; it stays.
            None if locality => (None, Vec::new(), false),
            _ => (None, live.clone(), true),
        };
        let named_rate = named.get(&(topic.as_str(), *p, o.node)).copied();
        out.push(Part {
            topic: topic.clone(),
            partition: *p,
            owner: o.node,
            rate: named_rate.unwrap_or_else(|| unnamed(o.node)),
            group: (topic.clone(), volume),
            candidates,
            named: named_rate.is_some(),
            movable: movable && !o.pinned,
        });
    }
    Some(out)
}

/// Whether `p` can leave `from` for `to` without widening the spread of its group: `from`
/// owns more of the group than `to`.
fn room(
    in_group: &BTreeMap<(&str, Option<u16>, i32), usize>,
    p: &Part,
    from: i32,
    to: i32,
) -> bool {
    let c = |b| {
        in_group
            .get(&(p.group.0.as_str(), p.group.1, b))
            .copied()
            .unwrap_or(0)
    };
    c(from) > c(to)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::cluster::plan_assignments;
    use crate::cluster::tests::view;

    const MB: u64 = 1 << 20;

    fn cfg() -> LoadBalance {
        LoadBalance {
            threshold: MB,
            percent: 10,
            moves_max: 8,
        }
    }

    fn load(bytes_in: u64, top: &[(&str, i32, u64)]) -> BrokerLoad {
        BrokerLoad {
            bytes_in,
            top: top
                .iter()
                .map(|(t, p, r)| (t.to_string(), *p, *r))
                .collect(),
            complete: true,
        }
    }

    fn all(v: &ClusterView) -> BTreeSet<i32> {
        v.brokers.keys().copied().collect()
    }

    /// The view with `plan` carried out (every move finished).
    fn after(v: &ClusterView, plan: &[(String, i32, i32)]) -> ClusterView {
        let mut v = v.clone();
        for (t, p, b) in plan {
            v.owners.get_mut(&(t.clone(), *p)).unwrap().owner.node = *b;
            v.topics.get_mut(t).unwrap().owners[*p as usize] = *b;
        }
        v
    }

    /// The loads the brokers would publish for `v` with these partition rates.
    fn loads_of(v: &ClusterView, rates: &BTreeMap<(&str, i32), u64>) -> BTreeMap<i32, BrokerLoad> {
        let mut out: BTreeMap<i32, BrokerLoad> =
            v.brokers.keys().map(|b| (*b, load(0, &[]))).collect();
        for ((t, p), r) in rates {
            let owner = v.owners[&(t.to_string(), *p)].owner.node;
            let l = out.get_mut(&owner).unwrap();
            l.bytes_in += r;
            l.top.push((t.to_string(), *p, *r));
        }
        out
    }

    /// Six one-partition topics, two per broker; broker 1 owns both busy ones.
    fn two_busy_on_one() -> (ClusterView, BTreeMap<(&'static str, i32), u64>) {
        let v = view(
            &[1, 2, 3],
            &[
                ("a", 0, 1),
                ("b", 0, 1),
                ("c", 0, 2),
                ("d", 0, 2),
                ("e", 0, 3),
                ("f", 0, 3),
            ],
        );
        let rates = [
            (("a", 0), 20 * MB),
            (("b", 0), 20 * MB),
            (("c", 0), 100),
            (("e", 0), 50),
        ];
        (v, rates.into_iter().collect())
    }

    #[test]
    fn two_busy_partitions_on_one_broker_are_split_by_a_swap() {
        let (v, rates) = two_busy_on_one();
        let loads = loads_of(&v, &rates);
        let plan = plan_load_moves(&v, &loads, &all(&v), cfg());
        // One busy partition goes to the quietest broker (3? it took 50 B/s, 2 took 100),
        // and a quiet one of 3's comes back: the counts stay two each.
        assert_eq!(plan.len(), 2, "{plan:?}");
        let v2 = after(&v, &plan);
        let owners = |t: &str| v2.owners[&(t.to_string(), 0)].owner.node;
        assert_ne!(
            owners("a"),
            owners("b"),
            "the busy ones are apart: {plan:?}"
        );
        for b in [1, 2, 3] {
            let n = v2.owners.values().filter(|r| r.owner.node == b).count();
            assert_eq!(n, 2, "broker {b} owns {n}: {plan:?}");
        }
        // Carried out and measured again: nothing more moves, and the partition counts
        // balancing has nothing to undo.
        let loads2 = loads_of(&v2, &rates);
        assert!(plan_load_moves(&v2, &loads2, &all(&v2), cfg()).is_empty());
        assert!(plan_assignments(&v2, true, 8, &all(&v2)).is_empty());
    }

    #[test]
    fn nothing_moves_below_the_thresholds() {
        let (v, _) = two_busy_on_one();
        // 1 takes 900 KB/s more than the others: under the 1 MiB/s threshold.
        let rates = [(("a", 0), 450_000), (("b", 0), 450_000)]
            .into_iter()
            .collect();
        assert!(plan_load_moves(&v, &loads_of(&v, &rates), &all(&v), cfg()).is_empty());
        // 30 MB/s against 28: under 10 % of the busier.
        let rates = [
            (("a", 0), 15 * MB),
            (("b", 0), 15 * MB),
            (("c", 0), 28 * MB),
            (("e", 0), 28 * MB),
        ]
        .into_iter()
        .collect();
        assert!(plan_load_moves(&v, &loads_of(&v, &rates), &all(&v), cfg()).is_empty());
    }

    #[test]
    fn one_partition_busier_than_the_gap_stays() {
        // Broker 1 takes 30 MB/s in one partition: anywhere else it makes the gap no narrower.
        let v = view(&[1, 2], &[("a", 0, 1), ("b", 0, 2)]);
        let rates = [(("a", 0), 30 * MB)].into_iter().collect();
        assert!(plan_load_moves(&v, &loads_of(&v, &rates), &all(&v), cfg()).is_empty());
    }

    #[test]
    fn nothing_moves_while_a_broker_has_not_published_or_a_move_is_under_way() {
        let (v, rates) = two_busy_on_one();
        let mut loads = loads_of(&v, &rates);
        loads.remove(&3);
        assert!(plan_load_moves(&v, &loads, &all(&v), cfg()).is_empty());
        let loads = loads_of(&v, &rates);
        let mut moving = v.clone();
        moving
            .owners
            .get_mut(&("f".to_string(), 0))
            .unwrap()
            .owner
            .to = Some(1);
        assert!(plan_load_moves(&moving, &loads, &all(&v), cfg()).is_empty());
        let mut orphan = v.clone();
        orphan
            .owners
            .get_mut(&("f".to_string(), 0))
            .unwrap()
            .owner
            .node = 9;
        assert!(plan_load_moves(&orphan, &loads, &all(&v), cfg()).is_empty());
    }

    #[test]
    fn pinned_partitions_stay() {
        let (mut v, rates) = two_busy_on_one();
        for t in ["a", "b"] {
            v.owners.get_mut(&(t.to_string(), 0)).unwrap().owner.pinned = true;
        }
        assert!(plan_load_moves(&v, &loads_of(&v, &rates), &all(&v), cfg()).is_empty());
    }

    #[test]
    fn a_busy_partition_moves_only_to_a_broker_with_direct_access_to_its_volume() {
        let (mut v, rates) = two_busy_on_one();
        // Volume 0 holds everything; 1 and 2 reach it directly, 3 does not.
        for b in [1, 2] {
            v.brokers.get_mut(&b).unwrap().direct = vec![0];
        }
        for r in v.owners.values_mut() {
            r.owner.volume = Some(0);
        }
        // (Partitions on 3 are misplaced: the locality pass moves them first; here only the
        // bytes-in plan is asked.)
        let plan = plan_load_moves(&v, &loads_of(&v, &rates), &all(&v), cfg());
        assert!(!plan.is_empty());
        assert!(plan.iter().all(|(_, _, b)| *b != 3), "{plan:?}");
        // Not settled yet: 2 takes nothing.
        let settled: BTreeSet<i32> = [1, 3].into();
        assert!(plan_load_moves(&v, &loads_of(&v, &rates), &settled, cfg()).is_empty());
    }

    #[test]
    fn a_plain_move_where_the_counts_leave_room() {
        // Broker 1 owns three partitions of topic t (two busy), broker 2 one.
        let v = view(
            &[1, 2],
            &[("t", 0, 1), ("t", 1, 1), ("t", 2, 2), ("t", 3, 1)],
        );
        let rates = [(("t", 0), 10 * MB), (("t", 1), 10 * MB)]
            .into_iter()
            .collect();
        // (A topic spread 3:1 is the count balancing's to fix; here the bytes plan alone.)
        let plan = plan_load_moves(&v, &loads_of(&v, &rates), &all(&v), cfg());
        assert_eq!(plan.len(), 1, "{plan:?}");
        assert_eq!(plan[0].2, 2);
        assert!(plan[0].1 == 0 || plan[0].1 == 1);
    }

    #[test]
    fn a_partition_its_owner_did_not_name_is_never_moved_for_load() {
        // Broker 1 names only a (busy); b took bytes too but its list was cut short.
        let v = view(
            &[1, 2],
            &[("a", 0, 1), ("b", 0, 1), ("c", 0, 2), ("d", 0, 2)],
        );
        let mut loads = BTreeMap::new();
        loads.insert(
            1,
            BrokerLoad {
                bytes_in: 40 * MB,
                top: vec![("a".into(), 0, 30 * MB)],
                complete: false,
            },
        );
        loads.insert(2, load(0, &[]));
        let plan = plan_load_moves(&v, &loads, &all(&v), cfg());
        // a (30 MB/s) is busier than the 40 MB/s gap allows? It narrows it to 20: taken, as
        // a swap for one of 2's (quiet) partitions; b is never the one moved from 1.
        assert!(
            plan.iter().all(|(t, _, b)| !(t == "b" && *b == 2)),
            "{plan:?}"
        );
        assert!(plan.iter().any(|(t, _, b)| t == "a" && *b == 2), "{plan:?}");
    }
}

#[cfg(test)]
#[path = "load_adversary.rs"]
mod adversary;

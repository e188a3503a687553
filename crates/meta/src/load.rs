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
//!
//! A load is used only if it describes the ownership the controller sees: measured over a
//! whole window in which the broker held the same partitions (`steady`), and those
//! partitions the ones the owner records give it now (`digest`). After any move, acquisition
//! or release, nothing moves for bytes until every broker has measured a whole window since.

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
    /// It held the same partitions (the same open logs) through the whole window.
    #[serde(default)]
    pub steady: bool,
    /// [`ownership_digest`] of the partitions it held.
    #[serde(default)]
    pub digest: u64,
}

/// A digest of a set of partitions, the same whatever their order: what a broker's
/// [`BrokerLoad`] was measured over, compared with what the owner records give it.
pub fn ownership_digest<'a>(parts: impl IntoIterator<Item = (&'a str, i32)>) -> u64 {
    parts.into_iter().fold(0u64, |sum, (topic, p)| {
        // FNV-1a of the topic's bytes, a separator and the partition, then a final mix, so
        // that the sum of distinct sets rarely collides.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in topic.bytes().chain([0xff]).chain(p.to_le_bytes()) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        sum.wrapping_add(h)
    })
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
    /// Bytes a second, as its owner published, or at most this for one it did not name.
    rate: u64,
    /// The volume whose direct brokers may own it (None: any live broker).
    volume: Option<u16>,
    /// Its owner named it (`rate` is measured, not a bound): only such a partition is moved
    /// for its own load.
    named: bool,
    movable: bool,
}

/// The moves that even out the brokers' bytes in: `(topic, partition, new owner)`.
///
/// Nothing moves unless every live broker has published a load that describes the
/// ownership the view holds (steady over its window, over the partitions the owner records
/// give it), no partition lacks a live owner and no move is under way. Then, while two
/// brokers' bytes in differ by more than the thresholds: a busy partition (one its owner
/// named) of the busiest broker moves to a broker taking fewer bytes that may own it (a
/// candidate of its volume, settled when locality is in use, under its partition budget),
/// alone if its topic's group and the totals leave room (the receiving broker owns fewer of
/// both), else swapped for the receiver's quietest partition that may go the other way (to a
/// busiest broker that may own it, settled when locality is in use). A move is taken only if
/// it narrows the gap between the two by at least the threshold, the best one first; the
/// planner updates the rates it assumes and goes on. Pinned partitions and partitions whose
/// volume is not recorded yet stay put. Deterministic for a given view, loads and `settled`.
pub fn plan_load_moves(
    view: &ClusterView,
    loads: &BTreeMap<i32, BrokerLoad>,
    settled: &BTreeSet<i32>,
    cfg: LoadBalance,
) -> Vec<(String, i32, i32)> {
    if view.brokers.len() < 2 {
        return Vec::new();
    }
    let Some(parts) = parts(view, loads) else {
        return Vec::new();
    };
    let mut planner = LoadPlanner::new(view, loads, settled, cfg, parts);
    let mut plan = Vec::new();
    while plan.len() < cfg.moves_max {
        let Some(step) = planner.best_step() else {
            break;
        };
        let moved: Vec<(usize, i32)> = match step.swap {
            Some(q) => vec![(step.part, step.to), (q, step.from)],
            None => vec![(step.part, step.to)],
        };
        if plan.len() + moved.len() > cfg.moves_max {
            break;
        }
        for (i, to) in moved {
            planner.shift(i, to);
            let part = &planner.parts[i];
            plan.push((part.topic.clone(), part.partition, to));
        }
    }
    plan
}

/// The move [`LoadPlanner::best_step`] chose: `part` from `from` to `to`, and `swap` back.
struct Step {
    part: usize,
    swap: Option<usize>,
    from: i32,
    to: i32,
}

/// [`plan_load_moves`]' state: the partitions, each broker's (by index), the rates and counts
/// it assumes as it plans.
struct LoadPlanner<'a> {
    view: &'a ClusterView,
    settled: &'a BTreeSet<i32>,
    cfg: LoadBalance,
    direct: BTreeMap<u16, Vec<i32>>,
    locality: bool,
    parts: Vec<Part>,
    /// Each broker's partitions, as indexes into `parts`.
    owned: BTreeMap<i32, Vec<usize>>,
    rate: BTreeMap<i32, u64>,
    /// How many partitions of a group (topic, volume) each broker owns.
    in_group: BTreeMap<(String, Option<u16>, i32), usize>,
}

impl<'a> LoadPlanner<'a> {
    fn new(
        view: &'a ClusterView,
        loads: &BTreeMap<i32, BrokerLoad>,
        settled: &'a BTreeSet<i32>,
        cfg: LoadBalance,
        parts: Vec<Part>,
    ) -> LoadPlanner<'a> {
        let mut owned: BTreeMap<i32, Vec<usize>> =
            view.brokers.keys().map(|b| (*b, Vec::new())).collect();
        let mut in_group = BTreeMap::new();
        for (i, p) in parts.iter().enumerate() {
            owned.entry(p.owner).or_default().push(i);
            *in_group
                .entry((p.topic.clone(), p.volume, p.owner))
                .or_default() += 1;
        }
        LoadPlanner {
            view,
            settled,
            cfg,
            direct: direct_brokers(view),
            locality: view.brokers.values().any(|b| !b.direct.is_empty()),
            rate: view
                .brokers
                .keys()
                .map(|b| (*b, loads[b].bytes_in))
                .collect(),
            parts,
            owned,
            in_group,
        }
    }

    /// Whether `b` may own `p`: a live broker with direct access to its volume (any live
    /// broker when its volume has none), settled when locality is in use.
    fn may_own(&self, p: &Part, b: i32) -> bool {
        let candidate = match p.volume {
            Some(v) => self.direct.get(&v).is_some_and(|d| d.contains(&b)),
            None => self.view.brokers.contains_key(&b),
        };
        candidate && (!self.locality || self.settled.contains(&b))
    }

    /// How many of `p`'s group `b` owns.
    fn in_group(&self, p: &Part, b: i32) -> usize {
        self.in_group
            .get(&(p.topic.clone(), p.volume, b))
            .copied()
            .unwrap_or(0)
    }

    /// Whether `p` can leave `from` for `to` without widening the spread of its group:
    /// `from` owns more of the group than `to`.
    fn room(&self, p: &Part, from: i32, to: i32) -> bool {
        self.in_group(p, from) > self.in_group(p, to)
    }

    fn total(&self, b: i32) -> usize {
        self.owned.get(&b).map_or(0, Vec::len)
    }

    /// Carry out (in the planner's assumptions) the move of partition `i` to `to`.
    fn shift(&mut self, i: usize, to: i32) {
        let (from, rate) = (self.parts[i].owner, self.parts[i].rate);
        let key = |b| (self.parts[i].topic.clone(), self.parts[i].volume, b);
        let (kf, kt) = (key(from), key(to));
        if let Some(c) = self.in_group.get_mut(&kf) {
            *c = c.saturating_sub(1);
        }
        *self.in_group.entry(kt).or_default() += 1;
        if let Some(list) = self.owned.get_mut(&from) {
            list.retain(|&j| j != i);
        }
        self.owned.entry(to).or_default().push(i);
        if let Some(r) = self.rate.get_mut(&from) {
            *r = r.saturating_sub(rate);
        }
        let r = self.rate.entry(to).or_default();
        *r = r.saturating_add(rate);
        self.parts[i].owner = to;
        // Moved once this round: not again.
        self.parts[i].movable = false;
    }

    /// The single move or swap from the busiest broker that evens out the rates most (takes
    /// most off the sum of their squares), or None.
    fn best_step(&self) -> Option<Step> {
        let (&h, &hot) = (self.rate.iter()).max_by_key(|(b, r)| (**r, std::cmp::Reverse(**b)))?;
        let floor = (self.cfg.threshold)
            .max(hot.saturating_mul(self.cfg.percent) / 100)
            .max(1);
        // The busy partitions of `h` that may move.
        let busy: Vec<usize> = (self.owned.get(&h)?.iter().copied())
            .filter(|&i| {
                let p = &self.parts[i];
                p.movable && p.named && p.rate > 0
            })
            .collect();
        if busy.is_empty() {
            return None;
        }
        // The receivers, quietest first.
        let mut receivers: Vec<(i32, u64)> = (self.rate.iter())
            .filter(|(b, r)| **b != h && hot.saturating_sub(**r) > floor)
            .map(|(b, r)| (*b, *r))
            .collect();
        receivers.sort_by_key(|(b, r)| (*r, *b));
        let mut best: Option<(u128, Step)> = None;
        for (c, cold) in receivers {
            let gap = hot - cold;
            // The receiver's partitions that may go to `h`, quietest first.
            let mut back: Vec<usize> = (self.owned[&c].iter().copied())
                .filter(|&q| self.parts[q].movable && self.may_own(&self.parts[q], h))
                .collect();
            back.sort_by_key(|&q| (self.parts[q].rate, q));
            for &i in &busy {
                let p = &self.parts[i];
                if !self.may_own(p, c) {
                    continue;
                }
                let mut consider = |shift: u64, swap: Option<usize>| {
                    if shift == 0 || shift >= gap {
                        return;
                    }
                    // The gap after the move, |gap - 2 shift|, without overflow.
                    let after = u64::try_from(u128::from(gap).abs_diff(2 * u128::from(shift)))
                        .unwrap_or(u64::MAX);
                    if gap - after.min(gap) < floor {
                        return;
                    }
                    // What it takes off the sum of the squared rates (2 shift (gap - shift),
                    // halved): the most even spread first, and of equal shifts the one to
                    // the quieter receiver.
                    let score = u128::from(shift) * u128::from(gap - shift);
                    if best.as_ref().is_none_or(|(a, _)| score > *a) {
                        let step = Step {
                            part: i,
                            swap,
                            from: h,
                            to: c,
                        };
                        best = Some((score, step));
                    }
                };
                // Alone: the receiver owns fewer of the topic's group and fewer in all.
                let full = self.view.is_full(c, self.total(c));
                if !full && self.room(p, h, c) && self.total(h) > self.total(c) {
                    consider(p.rate, None);
                }
                // Swapped for the receiver's quietest partition that may go back.
                let q = back.iter().copied().find(|&q| {
                    let q = &self.parts[q];
                    let same = q.topic == p.topic && q.volume == p.volume;
                    q.rate < p.rate && (same || (self.room(p, h, c) && self.room(q, c, h)))
                });
                if let Some(q) = q {
                    consider(p.rate - self.parts[q].rate, Some(q));
                }
            }
        }
        best.map(|(_, s)| s)
    }
}

/// Every partition with its owner's rate and volume; None when the loads may not describe
/// the ownership: a live broker without a load, or with one not steady or measured over
/// other partitions than the owner records give it; a partition without a live owner; a move
/// under way.
fn parts(view: &ClusterView, loads: &BTreeMap<i32, BrokerLoad>) -> Option<Vec<Part>> {
    let direct = direct_brokers(view);
    let locality = view.brokers.values().any(|b| !b.direct.is_empty());
    let named: BTreeMap<(&str, i32, i32), u64> = loads
        .iter()
        .flat_map(|(b, l)| {
            l.top
                .iter()
                .map(move |(t, p, r)| ((t.as_str(), *p, *b), *r))
        })
        .collect();
    let mut out = Vec::with_capacity(view.owners.len());
    let mut digests: BTreeMap<i32, u64> = view.brokers.keys().map(|b| (*b, 0)).collect();
    for ((topic, p), rec) in &view.owners {
        if view.topics.get(topic).is_none_or(|t| *p >= t.partitions()) {
            continue;
        }
        let o = &rec.owner;
        let load = loads.get(&o.node)?;
        if !view.brokers.contains_key(&o.node) || o.to.is_some() || o.from.is_some() {
            return None;
        }
        let d = digests.entry(o.node).or_default();
        *d = d.wrapping_add(ownership_digest([(topic.as_str(), *p)]));
        let (volume, movable) = match o.volume {
            Some(v) if direct.contains_key(&v) => (Some(v), true),
            // Not recorded yet while locality is in use: being acquired; it stays.
            None if locality => (None, false),
            _ => (None, true),
        };
        let named_rate = named.get(&(topic.as_str(), *p, o.node)).copied();
        // What a partition its owner did not name took, at most.
        let unnamed = || match load.complete {
            true => 0,
            false => load.top.iter().map(|(_, _, r)| *r).min().unwrap_or(0),
        };
        out.push(Part {
            topic: topic.clone(),
            partition: *p,
            owner: o.node,
            rate: named_rate.unwrap_or_else(unnamed),
            volume,
            named: named_rate.is_some(),
            movable: movable && !o.pinned,
        });
    }
    let described = view.brokers.keys().all(|b| {
        loads
            .get(b)
            .is_some_and(|l| l.steady && Some(&l.digest) == digests.get(b))
    });
    described.then_some(out)
}

/// `loads` as brokers owning what `view` gives them would publish after a steady window:
/// each steady, with the digest of its partitions in `view`.
#[cfg(test)]
pub(crate) fn described(
    view: &ClusterView,
    mut loads: BTreeMap<i32, BrokerLoad>,
) -> BTreeMap<i32, BrokerLoad> {
    for (b, l) in loads.iter_mut() {
        l.steady = true;
        l.digest = ownership_digest(
            (view.owners.iter())
                .filter(|(_, r)| r.owner.node == *b)
                .map(|((t, p), _)| (t.as_str(), *p)),
        );
    }
    loads
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
            ..BrokerLoad::default()
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
        described(v, out)
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
                ..BrokerLoad::default()
            },
        );
        loads.insert(2, load(0, &[]));
        let loads = described(&v, loads);
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

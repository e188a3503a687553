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
//! A load is used only if it describes the ownership the controller sees: published by the
//! process that holds the broker's registration now (`lease`), measured over a whole window
//! in which the broker held the same partitions (`steady`), and those partitions the ones the
//! owner records give it now (`digest`). After any move, acquisition, release or restart,
//! nothing moves for bytes until every broker has measured a whole window since.
//!
//! Nothing moves back and forth under a steady load: a step is taken only if it narrows the
//! gap between the two brokers by at least the threshold whatever the rates the owners did
//! not name turn out to be (each planned rate is kept as a range), so every step lowers the
//! sum of the squared rates; and only if the count balancing, run on the result, has
//! nothing to undo.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::cluster::{
    direct_brokers, etcd_err, group_of, plan_assignments, to_json, ClusterView, Group,
};
use crate::etcd::Op;
use crate::{EtcdStore, MetaError};

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
    pub digest: String,
    /// The lease of the registration it was published under: a load left by an earlier
    /// process of the same node id (a restart before its lease expired) is not used.
    #[serde(default)]
    pub lease: i64,
}

/// A digest of a set of partitions, the same whatever their order: what a broker's
/// [`BrokerLoad`] was measured over, compared with what the owner records give it. SHA-256
/// (first 128 bits, hex) of the sorted names, each its topic, a NUL (never in a topic name)
/// and its partition: two sets collide only as SHA-256 does (a sum of per-partition hashes
/// let sets of four be found that collide).
pub fn ownership_digest<'a>(parts: impl IntoIterator<Item = (&'a str, i32)>) -> String {
    let mut parts: Vec<(&str, i32)> = parts.into_iter().collect();
    parts.sort_unstable();
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    for (topic, p) in parts {
        ctx.update(topic.as_bytes());
        ctx.update(&[0]);
        ctx.update(&p.to_be_bytes());
    }
    let hash = ctx.finish();
    hash.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl EtcdStore {
    /// Publish this broker's load ([`BrokerLoad`]) under its registration's lease (it goes
    /// with the registration), naming that lease (the controller uses a load only while it
    /// names the broker's registration). Nothing is written while not registered.
    pub fn publish_load(&self, load: &BrokerLoad) -> Result<(), MetaError> {
        let Some(lease) = self.registration_lease() else {
            return Ok(());
        };
        let load = BrokerLoad {
            lease,
            ..load.clone()
        };
        let put = Op::Put {
            key: self.key(&format!("load/{}", self.node_id())),
            value: to_json(&load),
            lease,
        };
        self.etcd.txn(&[], &[put], &[]).map_err(etcd_err)?;
        Ok(())
    }

    /// Every broker's published load, by node id (records that do not parse are skipped).
    pub fn loads(&self) -> Result<BTreeMap<i32, BrokerLoad>, MetaError> {
        let root = self.key("load/");
        let (kvs, _) = self.etcd.range_prefix(&root).map_err(etcd_err)?;
        Ok(kvs
            .iter()
            .filter_map(|kv| {
                let node = kv.key.strip_prefix(&root)?.parse::<i32>().ok()?;
                Some((node, serde_json::from_slice(&kv.value).ok()?))
            })
            .collect())
    }
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
    /// At least this: `rate` when its owner named it or named every partition that took
    /// bytes, else 0.
    rate_min: u64,
    /// Its group within its topic (the candidates it shares), as the count balancing sees it.
    group: Group,
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
/// it narrows the gap between the two by at least the threshold whatever the rates of the
/// partitions their owners did not name, and only if the count balancing
/// ([`plan_assignments`]) finds nothing to do once it is carried out; the best one first;
/// the planner updates the rates it assumes (as ranges) and goes on. Pinned partitions and
/// partitions whose volume is not recorded yet stay put. Deterministic for a given view,
/// loads and `settled`.
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
    // The count balancing's check, of the whole plan first (one run of it), of each step
    // when the whole plan fails it.
    let mut result = view.clone();
    let plan = plan_steps(view, loads, settled, cfg, parts.clone(), None);
    for (t, p, to) in &plan {
        set_owner(&mut result, t, *p, *to);
    }
    if plan_assignments(&result, true, 1, settled).is_empty() {
        return plan;
    }
    plan_steps(view, loads, settled, cfg, parts, Some(view.clone()))
}

/// [`plan_load_moves`]' steps; with `check` (the view), each step only if the count
/// balancing has nothing to do once it is carried out.
fn plan_steps(
    view: &ClusterView,
    loads: &BTreeMap<i32, BrokerLoad>,
    settled: &BTreeSet<i32>,
    cfg: LoadBalance,
    parts: Vec<Part>,
    mut check: Option<ClusterView>,
) -> Vec<(String, i32, i32)> {
    let mut planner = LoadPlanner::new(view, loads, settled, cfg, parts);
    let mut plan = Vec::new();
    let mut refused = 0;
    while plan.len() < cfg.moves_max && refused < REFUSALS_MAX {
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
        if let Some(result) = check.as_mut() {
            let set = |result: &mut ClusterView, i: usize, to: i32| {
                let p = &planner.parts[i];
                set_owner(result, &p.topic, p.partition, to);
            };
            for &(i, to) in &moved {
                set(result, i, to);
            }
            if !plan_assignments(result, true, 1, settled).is_empty() {
                // The count balancing would undo it (a full broker elsewhere, a group's
                // spread the step's two brokers do not show): not this step.
                for &(i, _) in &moved {
                    set(result, i, planner.parts[i].owner);
                }
                // A plain move changes the two brokers' totals, which is what the count
                // balancing answers (a broker dropping under its budget, another group's
                // spread): no plain move off that broker this round; a swap keeps them.
                match step.swap {
                    Some(_) => planner.refused.insert((step.part, step.swap, step.to)),
                    None => planner.no_plain.insert(step.from),
                };
                refused += 1;
                continue;
            }
        }
        for (i, to) in moved {
            planner.shift(i, to);
            let part = &planner.parts[i];
            plan.push((part.topic.clone(), part.partition, to));
        }
    }
    plan
}

/// The most steps one round tries that the count balancing would undo: each costs a run of
/// it (about 0.25 s at 100,000 partitions on 400 brokers).
const REFUSALS_MAX: usize = 4;

/// Record `to` as the owner of `topic`'s `partition` in `view` (a move carried out).
fn set_owner(view: &mut ClusterView, topic: &str, partition: i32, to: i32) {
    if let Some(rec) = view.owners.get_mut(&(topic.to_string(), partition)) {
        rec.owner.node = to;
    }
    let topic = view.topics.get_mut(topic);
    if let Some(owner) = topic.and_then(|t| t.owners.get_mut(partition as usize)) {
        *owner = to;
    }
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
    /// Each broker's bytes in as planned: at most (the rates of the partitions its owner
    /// did not name at their bound) ...
    rate: BTreeMap<i32, u64>,
    /// ... and at least (those at 0).
    rate_min: BTreeMap<i32, u64>,
    /// How many partitions of a group (topic, group) each broker owns.
    in_group: BTreeMap<(String, Group, i32), usize>,
    /// Swaps the count balancing would undo: (part, swap, to).
    refused: BTreeSet<(usize, Option<usize>, i32)>,
    /// Brokers whose plain moves (off them) it would undo.
    no_plain: BTreeSet<i32>,
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
                .entry((p.topic.clone(), p.group, p.owner))
                .or_default() += 1;
        }
        let rate: BTreeMap<i32, u64> = (view.brokers.keys())
            .map(|b| (*b, loads[b].bytes_in))
            .collect();
        LoadPlanner {
            view,
            settled,
            cfg,
            direct: direct_brokers(view),
            locality: view.brokers.values().any(|b| !b.direct.is_empty()),
            rate_min: rate.clone(),
            rate,
            parts,
            owned,
            in_group,
            refused: BTreeSet::new(),
            no_plain: BTreeSet::new(),
        }
    }

    /// Whether `b` may own `p`: a live broker with direct access to its volume (any live
    /// broker when its volume has none), settled when locality is in use.
    fn may_own(&self, p: &Part, b: i32) -> bool {
        let candidate = match p.group {
            Group::Volume(v) => self.direct.get(&v).is_some_and(|d| d.contains(&b)),
            Group::Any => self.view.brokers.contains_key(&b),
            // Being acquired: it stays.
            Group::Unknown => false,
        };
        candidate && (!self.locality || self.settled.contains(&b))
    }

    /// How many of `p`'s group `b` owns.
    fn in_group(&self, p: &Part, b: i32) -> usize {
        self.in_group
            .get(&(p.topic.clone(), p.group, b))
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
        let (from, rate, least) = (
            self.parts[i].owner,
            self.parts[i].rate,
            self.parts[i].rate_min,
        );
        let key = |b| (self.parts[i].topic.clone(), self.parts[i].group, b);
        let (kf, kt) = (key(from), key(to));
        if let Some(c) = self.in_group.get_mut(&kf) {
            *c = c.saturating_sub(1);
        }
        *self.in_group.entry(kt).or_default() += 1;
        if let Some(list) = self.owned.get_mut(&from) {
            list.retain(|&j| j != i);
        }
        self.owned.entry(to).or_default().push(i);
        // The range of each: the giver's top falls by the least the partition may take, its
        // bottom by the most; the receiver's the other way.
        if let Some(r) = self.rate.get_mut(&from) {
            *r = r.saturating_sub(least);
        }
        if let Some(r) = self.rate_min.get_mut(&from) {
            *r = r.saturating_sub(rate);
        }
        let r = self.rate.entry(to).or_default();
        *r = r.saturating_add(rate);
        let r = self.rate_min.entry(to).or_default();
        *r = r.saturating_add(least);
        self.parts[i].owner = to;
        // Moved once this round: not again.
        self.parts[i].movable = false;
    }

    /// The single move or swap from the busiest broker that evens out the rates most (takes
    /// most off the sum of their squares), or None. Taken only if the gap between the two
    /// narrows by at least the threshold for every rate the planned ranges allow: so every
    /// step lowers the true sum of the squared rates, and no ownership comes back.
    fn best_step(&self) -> Option<Step> {
        let (&h, &hot) = (self.rate.iter()).max_by_key(|(b, r)| (**r, std::cmp::Reverse(**b)))?;
        let hot_min = self.rate_min[&h];
        let floor = (self.cfg.threshold)
            .max(hot.saturating_mul(self.cfg.percent) / 100)
            .max(1);
        let floor = u128::from(floor);
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
        // The receivers, quietest first: surely quieter than `h` by more than the floor.
        let mut receivers: Vec<(i32, u64)> = (self.rate.iter())
            .filter(|(b, r)| **b != h && u128::from(hot_min.saturating_sub(**r)) > floor)
            .map(|(b, r)| (*b, *r))
            .collect();
        receivers.sort_by_key(|(b, r)| (*r, *b));
        let mut best: Option<(u128, Step)> = None;
        for (c, cold) in receivers {
            // The gap is at least this (and the shift below at most `gap_min` - floor / 2).
            let gap_min = u128::from(hot_min - cold);
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
                // `shift`: what the step takes off `h` and gives `c`, at least and at most.
                let mut consider = |shift: (u64, u64), swap: Option<usize>| {
                    let (least, most) = (u128::from(shift.0), u128::from(shift.1));
                    // Narrowed by at least the floor (2 least), and not turned over by more
                    // than the gap less the floor (2 most - gap <= gap - floor).
                    if 2 * least < floor || 2 * most + floor > 2 * gap_min {
                        return;
                    }
                    if self.refused.contains(&(i, swap, c)) {
                        return;
                    }
                    // What it takes off the sum of the squared rates (2 shift (gap - shift),
                    // halved): the most even spread first, and of equal shifts the one to
                    // the quieter receiver.
                    let score = least * (gap_min - least);
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
                let plain = !self.no_plain.contains(&h);
                if plain && !full && self.room(p, h, c) && self.total(h) > self.total(c) {
                    consider((p.rate_min, p.rate), None);
                }
                // Swapped for the receiver's quietest partition that may go back.
                let q = back.iter().copied().find(|&q| {
                    let q = &self.parts[q];
                    let same = q.topic == p.topic && q.group == p.group;
                    q.rate < p.rate_min && (same || (self.room(p, h, c) && self.room(q, c, h)))
                });
                if let Some(qi) = q {
                    let q = &self.parts[qi];
                    consider((p.rate_min - q.rate, p.rate - q.rate_min), Some(qi));
                }
            }
        }
        best.map(|(_, s)| s)
    }
}

/// Every partition with its owner's rate and group; None when the loads may not describe
/// the ownership: a live broker without a load, or with one published under another
/// registration, not steady, or measured over other partitions than the owner records give
/// it; a partition without a live owner; a move under way.
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
    let mut held: BTreeMap<i32, Vec<(&str, i32)>> = BTreeMap::new();
    for ((topic, p), rec) in &view.owners {
        if view.topics.get(topic).is_none_or(|t| *p >= t.partitions()) {
            continue;
        }
        let o = &rec.owner;
        let load = loads.get(&o.node)?;
        if !view.brokers.contains_key(&o.node) || o.to.is_some() || o.from.is_some() {
            return None;
        }
        held.entry(o.node).or_default().push((topic.as_str(), *p));
        let group = group_of(&direct, locality, o.volume);
        let named_rate = named.get(&(topic.as_str(), *p, o.node)).copied();
        // What a partition its owner did not name took, at most.
        let unnamed = || match load.complete {
            true => 0,
            false => load.top.iter().map(|(_, _, r)| *r).min().unwrap_or(0),
        };
        let rate = named_rate.unwrap_or_else(unnamed);
        out.push(Part {
            topic: topic.clone(),
            partition: *p,
            owner: o.node,
            rate,
            rate_min: if named_rate.is_some() || load.complete {
                rate
            } else {
                0
            },
            group,
            named: named_rate.is_some(),
            // A partition whose volume is not recorded yet is being acquired: it stays.
            movable: group != Group::Unknown && !o.pinned,
        });
    }
    let described = view.brokers.iter().all(|(b, info)| {
        loads.get(b).is_some_and(|l| {
            let parts = held.remove(b).unwrap_or_default();
            l.steady && l.lease == info.lease && l.digest == ownership_digest(parts)
        })
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
        l.lease = view.brokers.get(b).map_or(0, |i| i.lease);
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

    /// A load left by an earlier process of the same node id (restarted before its lease
    /// expired) is not used: the view names the new registration. (Found by an adversary on
    /// c0cb672.)
    #[test]
    fn a_load_published_under_an_earlier_registration_is_not_used() {
        let (mut v, rates) = two_busy_on_one();
        let loads = loads_of(&v, &rates);
        assert!(!plan_load_moves(&v, &loads, &all(&v), cfg()).is_empty());
        v.brokers.get_mut(&1).unwrap().lease = 42;
        assert!(plan_load_moves(&v, &loads, &all(&v), cfg()).is_empty());
    }

    /// The digest names a set: the same whatever the order, another for any other set
    /// (names that run into each other included), and not a sum of per-partition values
    /// (sets of four collided when it was: found by an adversary on c0cb672).
    #[test]
    fn the_digest_names_a_set_whatever_its_order() {
        let d = |parts: &[(&str, i32)]| ownership_digest(parts.iter().copied());
        assert_eq!(d(&[("a", 1), ("b", 2)]), d(&[("b", 2), ("a", 1)]));
        assert_ne!(d(&[("a", 1), ("b", 2)]), d(&[("a", 2), ("b", 1)]));
        assert_ne!(d(&[("ab", 1)]), d(&[("a", 1)]));
        assert_ne!(d(&[]), d(&[("a", 0)]));
        // Every subset of eight partitions: 256 digests, all different.
        let names: Vec<(String, i32)> = (0..8).map(|i| (format!("t{}", i % 3), i)).collect();
        let mut seen = BTreeSet::new();
        for mask in 0u32..256 {
            let set = (names.iter().enumerate())
                .filter(|(i, _)| mask & (1 << i) != 0)
                .map(|(_, (t, p))| (t.as_str(), *p));
            assert!(seen.insert(ownership_digest(set)), "subset {mask:b}");
        }
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
        // Volume 0 holds a to d; 1 and 2 reach it directly, 3 reaches only volume 1 (e, f).
        for b in [1, 2] {
            v.brokers.get_mut(&b).unwrap().direct = vec![0];
        }
        v.brokers.get_mut(&3).unwrap().direct = vec![1];
        for r in v.owners.values_mut() {
            r.owner.volume = Some(if r.owner.node == 3 { 1 } else { 0 });
        }
        assert!(plan_assignments(&v, true, 8, &all(&v)).is_empty());
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

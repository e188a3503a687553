//! Server-side assignors for KIP-848 groups.
//!
//! - `uniform`: every partition of the subscribed topics goes to one subscribed member;
//!   member counts differ by at most one among members with the same subscription, and a
//!   partition stays with its previous owner when that keeps the balance (sticky).
//! - `range`: per topic, the subscribed members (sorted by id) get contiguous ranges, the
//!   first `partitions % members` one partition more.

use std::collections::{BTreeMap, BTreeSet};

/// A topic as the caller's metadata knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicInfo {
    pub id: uuid::Uuid,
    pub partitions: i32,
}

/// Partitions by topic id.
pub(crate) type Assignment = BTreeMap<uuid::Uuid, BTreeSet<i32>>;

pub(crate) fn assign(
    name: &str,
    subscriptions: &BTreeMap<String, BTreeSet<String>>,
    previous: &BTreeMap<String, Assignment>,
    topics: &BTreeMap<String, TopicInfo>,
) -> BTreeMap<String, Assignment> {
    match name {
        "range" => range(subscriptions, topics),
        _ => uniform(subscriptions, previous, topics),
    }
}

fn range(
    subscriptions: &BTreeMap<String, BTreeSet<String>>,
    topics: &BTreeMap<String, TopicInfo>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = subscriptions
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    for (topic, info) in topics {
        let members: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, s)| s.contains(topic))
            .map(|(m, _)| m)
            .collect();
        if members.is_empty() || info.partitions <= 0 {
            continue;
        }
        let n = info.partitions as usize;
        let per = n / members.len();
        let extra = n % members.len();
        let mut next = 0i32;
        for (i, m) in members.iter().enumerate() {
            let count = per + usize::from(i < extra);
            let set = out
                .entry((*m).clone())
                .or_default()
                .entry(info.id)
                .or_default();
            for _ in 0..count {
                set.insert(next);
                next += 1;
            }
        }
    }
    for a in out.values_mut() {
        a.retain(|_, p| !p.is_empty());
    }
    out
}

fn uniform(
    subscriptions: &BTreeMap<String, BTreeSet<String>>,
    previous: &BTreeMap<String, Assignment>,
    topics: &BTreeMap<String, TopicInfo>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = subscriptions
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    let mut counts: BTreeMap<&String, usize> = subscriptions.keys().map(|m| (m, 0)).collect();
    // Every partition with the members that may own it.
    let mut partitions: Vec<(uuid::Uuid, i32, Vec<&String>)> = Vec::new();
    for (topic, info) in topics {
        let eligible: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, s)| s.contains(topic))
            .map(|(m, _)| m)
            .collect();
        if eligible.is_empty() {
            continue;
        }
        for p in 0..info.partitions.max(0) {
            partitions.push((info.id, p, eligible.clone()));
        }
    }
    let members = subscriptions.len().max(1);
    let quota = partitions.len().div_ceil(members);
    let mut owner: BTreeMap<(uuid::Uuid, i32), &String> = BTreeMap::new();
    // Sticky pass: keep previous owners up to the quota.
    for (t, p, eligible) in &partitions {
        let prev = previous
            .iter()
            .find(|(m, a)| a.get(t).is_some_and(|s| s.contains(p)) && eligible.contains(m))
            .map(|(m, _)| m);
        if let Some(m) = prev {
            if let Some((key, c)) = counts.iter_mut().find(|(k, _)| **k == m) {
                if *c < quota {
                    *c += 1;
                    owner.insert((*t, *p), *key);
                }
            }
        }
    }
    // Fill: each unowned partition to the eligible member with the fewest partitions.
    for (t, p, eligible) in &partitions {
        if owner.contains_key(&(*t, *p)) {
            continue;
        }
        let best = eligible
            .iter()
            .min_by_key(|m| (counts.get(**m).copied().unwrap_or(0), (**m).clone()))
            .copied();
        if let Some(m) = best {
            if let Some(c) = counts.get_mut(m) {
                *c += 1;
            }
            owner.insert((*t, *p), m);
        }
    }
    // Balance: move partitions from the fullest to an eligible emptier member.
    for _ in 0..partitions.len() {
        let mut moved = false;
        for (t, p, eligible) in &partitions {
            let Some(cur) = owner.get(&(*t, *p)).copied() else {
                continue;
            };
            let cur_count = counts.get(cur).copied().unwrap_or(0);
            let target = eligible
                .iter()
                .filter(|m| counts.get(**m).copied().unwrap_or(0) + 1 < cur_count)
                .min_by_key(|m| counts.get(**m).copied().unwrap_or(0))
                .copied();
            if let Some(to) = target {
                if let Some(c) = counts.get_mut(cur) {
                    *c -= 1;
                }
                if let Some(c) = counts.get_mut(to) {
                    *c += 1;
                }
                owner.insert((*t, *p), to);
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
    for ((t, p), m) in owner {
        out.entry(m.clone())
            .or_default()
            .entry(t)
            .or_default()
            .insert(p);
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn topics(n: i32) -> (BTreeMap<String, TopicInfo>, uuid::Uuid) {
        let id = uuid::Uuid::new_v4();
        let mut t = BTreeMap::new();
        t.insert("t".to_string(), TopicInfo { id, partitions: n });
        (t, id)
    }

    fn subs(members: &[&str]) -> BTreeMap<String, BTreeSet<String>> {
        members
            .iter()
            .map(|m| (m.to_string(), ["t".to_string()].into_iter().collect()))
            .collect()
    }

    fn sizes(a: &BTreeMap<String, Assignment>) -> Vec<usize> {
        a.values()
            .map(|x| x.values().map(BTreeSet::len).sum())
            .collect()
    }

    #[test]
    fn uniform_is_balanced_and_complete() {
        let (t, id) = topics(12);
        let a = uniform(&subs(&["a", "b", "c"]), &BTreeMap::new(), &t);
        assert_eq!(sizes(&a), vec![4, 4, 4]);
        let all: BTreeSet<i32> = a.values().flat_map(|x| x[&id].iter().copied()).collect();
        assert_eq!(all.len(), 12);
    }

    #[test]
    fn uniform_is_sticky_when_a_member_leaves() {
        let (t, _) = topics(12);
        let before = uniform(&subs(&["a", "b", "c"]), &BTreeMap::new(), &t);
        let after = uniform(&subs(&["a", "b"]), &before, &t);
        assert_eq!(sizes(&after), vec![6, 6]);
        for m in ["a", "b"] {
            let kept = &before[m];
            for (topic, ps) in kept {
                assert!(
                    ps.is_subset(&after[m][topic]),
                    "{m} lost partitions it kept"
                );
            }
        }
    }

    #[test]
    fn range_gives_contiguous_ranges() {
        let (t, id) = topics(7);
        let a = range(&subs(&["a", "b", "c"]), &t);
        assert_eq!(a["a"][&id], [0, 1, 2].into_iter().collect());
        assert_eq!(a["b"][&id], [3, 4].into_iter().collect());
        assert_eq!(a["c"][&id], [5, 6].into_iter().collect());
    }

    #[test]
    fn members_without_the_topic_get_nothing() {
        let (t, _) = topics(4);
        let mut s = subs(&["a"]);
        s.insert("b".into(), BTreeSet::new());
        let a = uniform(&s, &BTreeMap::new(), &t);
        assert_eq!(sizes(&a), vec![4, 0]);
    }
}

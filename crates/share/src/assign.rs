//! The share groups' partition assignor (KIP-932's `simple` assignor): every partition of a
//! subscribed topic goes to ceil(members / partitions) of the topic's subscribers, so that
//! with more members than partitions they share them (three members of a one-partition
//! topic all read it) and with fewer each partition has one; each member gets an even share
//! of the slots (within one of the others); and a member keeps what it had wherever that
//! stays within those bounds (stickiness), as Kafka's simple assignor balances first and
//! keeps what it can second.
//!
//! Topics are taken one by one, among their own subscribers: members subscribed to different
//! sets of topics are balanced per topic, the one being filled first having the fewest
//! partitions overall.

use std::collections::{BTreeMap, BTreeSet};

/// Member id to the partitions it is assigned, by topic.
pub type Assignment = BTreeMap<String, BTreeMap<String, BTreeSet<i32>>>;

/// Assign the partitions of `topics` (name to partition count; a subscribed topic missing
/// from it does not exist and gets nobody) to the members of `subscriptions` (member id to
/// the topics it subscribes to), keeping what `previous` gave where balance allows.
pub fn assign(
    subscriptions: &BTreeMap<String, BTreeSet<String>>,
    topics: &BTreeMap<String, i32>,
    previous: &Assignment,
) -> Assignment {
    let mut out: Assignment = subscriptions
        .keys()
        .map(|m| (m.clone(), BTreeMap::new()))
        .collect();
    let mut totals: BTreeMap<&str, usize> = subscriptions.keys().map(|m| (m.as_str(), 0)).collect();
    for (topic, &count) in topics {
        let members: Vec<&str> = subscriptions
            .iter()
            .filter(|(_, subscribed)| subscribed.contains(topic))
            .map(|(m, _)| m.as_str())
            .collect();
        if members.is_empty() || count <= 0 {
            continue;
        }
        let partitions = count as usize;
        let sharing = members.len().div_ceil(partitions);
        let slots = sharing * partitions;
        // Member i of n gets ceil(slots*(i+1)/n) - ceil(slots*i/n): all within one.
        let n = members.len();
        let desired: BTreeMap<&str, usize> = members
            .iter()
            .enumerate()
            .map(|(i, m)| (*m, (slots * (i + 1)).div_ceil(n) - (slots * i).div_ceil(n)))
            .collect();
        let mut holders: Vec<BTreeSet<&str>> = vec![BTreeSet::new(); partitions];
        let mut given: BTreeMap<&str, usize> = members.iter().map(|m| (*m, 0)).collect();
        // Keep what members had, within the bounds.
        for m in &members {
            let Some(had) = previous.get(*m).and_then(|t| t.get(topic)) else {
                continue;
            };
            for &p in had {
                let Some(h) = usize::try_from(p).ok().and_then(|p| holders.get_mut(p)) else {
                    continue;
                };
                if h.len() < sharing && given[m] < desired[m] {
                    h.insert(m);
                    if let Some(g) = given.get_mut(m) {
                        *g += 1;
                    }
                }
            }
        }
        // Fill every partition up to its sharing, each time from the member with the most
        // room left for this topic, then the fewest partitions overall.
        let mut stuck = false;
        'fill: for h in holders.iter_mut() {
            while h.len() < sharing {
                let pick = members
                    .iter()
                    .filter(|m| !h.contains(**m) && given[**m] < desired[**m])
                    .min_by_key(|m| {
                        (
                            std::cmp::Reverse(desired[**m] - given[**m]),
                            totals[**m] + given[**m],
                        )
                    })
                    .copied();
                let Some(m) = pick else {
                    // The members with room left all hold this partition already (what was
                    // kept boxed the fill in).
                    stuck = true;
                    break 'fill;
                };
                h.insert(m);
                if let Some(g) = given.get_mut(m) {
                    *g += 1;
                }
            }
        }
        if stuck {
            // Start again without stickiness: the slots dealt round the members in turn,
            // those due one more first, can never give a member a partition twice
            // (sharing <= members) and give each exactly its due.
            let mut order = members.clone();
            order.sort_by_key(|m| std::cmp::Reverse(desired[*m]));
            holders = vec![BTreeSet::new(); partitions];
            given = members.iter().map(|m| (*m, 0)).collect();
            for (slot, m) in (0..slots).zip(order.iter().cycle()) {
                holders[slot / sharing].insert(m);
                if let Some(g) = given.get_mut(*m) {
                    *g += 1;
                }
            }
        }
        for (p, h) in holders.iter().enumerate() {
            for m in h {
                if let Some(a) = out.get_mut(*m) {
                    a.entry(topic.clone()).or_default().insert(p as i32);
                }
            }
        }
        for (m, g) in given {
            if let Some(t) = totals.get_mut(m) {
                *t += g;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subs(members: &[(&str, &[&str])]) -> BTreeMap<String, BTreeSet<String>> {
        members
            .iter()
            .map(|(m, ts)| (m.to_string(), ts.iter().map(|t| t.to_string()).collect()))
            .collect()
    }

    fn topics(ts: &[(&str, i32)]) -> BTreeMap<String, i32> {
        ts.iter().map(|(t, n)| (t.to_string(), *n)).collect()
    }

    fn of(a: &Assignment, m: &str, t: &str) -> Vec<i32> {
        a[m].get(t)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default()
    }

    #[test]
    fn more_members_than_partitions_share_them() {
        let a = assign(
            &subs(&[("a", &["t"]), ("b", &["t"]), ("c", &["t"])]),
            &topics(&[("t", 1)]),
            &Assignment::new(),
        );
        for m in ["a", "b", "c"] {
            assert_eq!(of(&a, m, "t"), vec![0]);
        }
        let a = assign(
            &subs(&[("a", &["t"]), ("b", &["t"]), ("c", &["t"])]),
            &topics(&[("t", 2)]),
            &Assignment::new(),
        );
        // Two holders per partition, four slots over three members.
        let counts: Vec<usize> = ["a", "b", "c"]
            .iter()
            .map(|m| of(&a, m, "t").len())
            .collect();
        assert_eq!(counts.iter().sum::<usize>(), 4);
        assert!(counts.iter().all(|c| (1..=2).contains(c)), "{counts:?}");
    }

    #[test]
    fn fewer_members_split_the_partitions_evenly_and_keep_theirs() {
        let s = subs(&[("a", &["t"]), ("b", &["t"])]);
        let t = topics(&[("t", 6)]);
        let first = assign(&s, &t, &Assignment::new());
        assert_eq!(of(&first, "a", "t").len(), 3);
        assert_eq!(of(&first, "b", "t").len(), 3);
        // A third member joins: two partitions move to it, the rest stay where they were.
        let s3 = subs(&[("a", &["t"]), ("b", &["t"]), ("c", &["t"])]);
        let second = assign(&s3, &t, &first);
        for m in ["a", "b"] {
            let kept: BTreeSet<i32> = of(&second, m, "t").into_iter().collect();
            let had: BTreeSet<i32> = of(&first, m, "t").into_iter().collect();
            assert_eq!(kept.len(), 2);
            assert!(kept.is_subset(&had), "{m} kept {kept:?} of {had:?}");
        }
        assert_eq!(of(&second, "c", "t").len(), 2);
        // Unchanged membership: the same assignment.
        assert_eq!(assign(&s3, &t, &second), second);
    }

    #[test]
    fn members_get_only_their_topics_and_unknown_topics_nobody() {
        let a = assign(
            &subs(&[("a", &["x", "y"]), ("b", &["y"]), ("c", &["gone"])]),
            &topics(&[("x", 2), ("y", 2)]),
            &Assignment::new(),
        );
        assert_eq!(of(&a, "a", "x"), vec![0, 1]);
        assert!(of(&a, "b", "x").is_empty());
        assert_eq!(of(&a, "a", "y").len() + of(&a, "b", "y").len(), 2);
        assert_eq!(
            of(&a, "b", "y").len(),
            1,
            "b, with fewer overall, gets its share"
        );
        assert!(a["c"].is_empty());
    }

    #[test]
    fn random_groups_are_balanced_and_complete() {
        let mut seed: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = |below: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % below
        };
        let mut previous = Assignment::new();
        for round in 0..500 {
            let members = 1 + next(8) as usize;
            let partitions = 1 + next(10) as i32;
            let s: BTreeMap<String, BTreeSet<String>> = (0..members)
                .map(|i| (format!("m{i}"), ["t".to_string()].into()))
                .collect();
            let t = topics(&[("t", partitions)]);
            let a = assign(&s, &t, &previous);
            let sharing = members.div_ceil(partitions as usize);
            for p in 0..partitions {
                let holders = a
                    .values()
                    .filter(|x| x.get("t").is_some_and(|ps| ps.contains(&p)))
                    .count();
                assert_eq!(holders, sharing, "round {round}: partition {p}");
            }
            let counts: Vec<usize> = a
                .values()
                .map(|x| x.get("t").map_or(0, |ps| ps.len()))
                .collect();
            let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
            assert!(hi - lo <= 1, "round {round}: {counts:?}");
            previous = a;
        }
    }
}

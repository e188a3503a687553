//! Storage-aware ownership (docs/cluster.md, "Owners next to their storage"): which volumes
//! this broker reaches through their own storage node, and, on the controller, which brokers
//! have been registered long enough for partitions to move back to them.
//!
//! The cluster numbers its volumes by their log dirs' `directory.id`, in order: every broker
//! has the same set (`P/volume`), so the numbers agree without another record. An owner writes
//! its partition's number in the owner record ([`sluice_meta::Owner::volume`]) and a broker
//! the numbers it reaches directly in its registration ([`sluice_meta::BrokerInfo::direct`]);
//! `sluice_meta::cluster::plan_assignments` prefers those brokers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sluice_config::BrokerConfig;

/// This broker's log dirs as the cluster numbers its volumes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Volumes {
    /// Per log dir (as in `log.dirs`): the dir, its volume number (None when a log dir has no
    /// `directory.id`: then none is numbered), its declared storage node, and whether this
    /// broker reaches that node directly.
    dirs: Vec<Dir>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Dir {
    pub path: PathBuf,
    pub volume: Option<u16>,
    pub node: Option<String>,
    pub direct: bool,
}

impl Volumes {
    /// From `config`'s `log.dirs`, `sluice.volume.storage.nodes` and
    /// `sluice.broker.storage.nodes`, and each log dir's `directory.id` (`ids`, in the order of
    /// `log.dirs`).
    pub(crate) fn of(config: &BrokerConfig, ids: &[Option<String>]) -> Volumes {
        let numbered: Option<Vec<&String>> = ids.iter().map(Option::as_ref).collect();
        let order = numbered.map(|mut sorted| {
            sorted.sort();
            sorted
        });
        let dirs = config
            .log_dirs
            .iter()
            .zip(ids)
            .map(|(path, id)| {
                let volume = match (&order, id) {
                    (Some(order), Some(id)) => order
                        .iter()
                        .position(|o| *o == id)
                        .and_then(|i| u16::try_from(i).ok()),
                    _ => None,
                };
                let node = config
                    .volume_nodes
                    .iter()
                    .find(|(d, _)| d == path)
                    .map(|(_, n)| n.clone());
                let direct = node
                    .as_ref()
                    .is_some_and(|n| config.storage_nodes.contains(n));
                Dir {
                    path: path.clone(),
                    volume,
                    node,
                    direct,
                }
            })
            .collect();
        Volumes { dirs }
    }

    pub(crate) fn dirs(&self) -> &[Dir] {
        &self.dirs
    }

    /// The volumes this broker reaches directly (its registration's `direct`).
    pub(crate) fn direct(&self) -> Vec<u16> {
        self.dirs
            .iter()
            .filter(|d| d.direct)
            .filter_map(|d| d.volume)
            .collect()
    }

    /// The log dirs (indexes) on volumes this broker reaches directly: where it makes the
    /// directories of new partitions.
    pub(crate) fn direct_dirs(&self) -> Vec<usize> {
        (0..self.dirs.len())
            .filter(|&i| self.dirs[i].direct)
            .collect()
    }

    /// The log dir holding the partition directory `dir`.
    pub(crate) fn dir_of(&self, dir: &Path) -> Option<&Dir> {
        let parent = dir.parent()?;
        self.dirs.iter().find(|d| d.path == parent)
    }

    /// Whether any log dir declares its storage node (else locality is not in use).
    pub(crate) fn declared(&self) -> bool {
        self.dirs.iter().any(|d| d.node.is_some())
    }
}

/// The controller's memory of when it first saw each broker's registration (by lease: a
/// broker registered again is seen anew), for `sluice.cluster.locality.delay.ms`. A new
/// controller has seen every broker just now: it cannot tell one registered a moment ago (a
/// rolling restart) from one registered long since, so partitions move to none of them for
/// the locality delay.
#[derive(Debug, Default)]
pub(crate) struct Settling {
    seen: BTreeMap<i32, (i64, Instant)>,
}

impl Settling {
    /// The brokers of `brokers` (node id, lease) registered for at least `delay` as of `now`.
    pub(crate) fn settled(
        &mut self,
        brokers: impl Iterator<Item = (i32, i64)>,
        delay: Duration,
        now: Instant,
    ) -> BTreeSet<i32> {
        let mut live = BTreeMap::new();
        for (node, lease) in brokers {
            let since = match self.seen.get(&node) {
                Some((l, at)) if *l == lease => *at,
                _ => now,
            };
            live.insert(node, (lease, since));
        }
        self.seen = live;
        self.seen
            .iter()
            .filter(|(_, (_, at))| now.duration_since(*at) >= delay)
            .map(|(n, _)| *n)
            .collect()
    }

    /// Forget everything (this broker is no longer the controller).
    pub(crate) fn reset(&mut self) {
        *self = Settling::default();
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn config(
        dirs: &[&str],
        volume_nodes: &[(&str, &str)],
        storage_nodes: &[&str],
    ) -> BrokerConfig {
        BrokerConfig {
            log_dirs: dirs.iter().map(PathBuf::from).collect(),
            volume_nodes: volume_nodes
                .iter()
                .map(|(d, n)| (PathBuf::from(d), n.to_string()))
                .collect(),
            storage_nodes: storage_nodes.iter().map(|n| n.to_string()).collect(),
            ..BrokerConfig::default()
        }
    }

    #[test]
    fn volumes_are_numbered_by_directory_id_and_direct_by_the_declared_nodes() {
        let c = config(
            &["/a", "/b", "/c"],
            &[("/a", "filer-1"), ("/b", "filer-2")],
            &["filer-2"],
        );
        let ids = [
            Some("zz".to_string()),
            Some("aa".to_string()),
            Some("mm".to_string()),
        ];
        let v = Volumes::of(&c, &ids);
        let numbers: Vec<Option<u16>> = v.dirs().iter().map(|d| d.volume).collect();
        assert_eq!(numbers, vec![Some(2), Some(0), Some(1)]);
        assert_eq!(v.direct(), vec![0]);
        assert_eq!(v.direct_dirs(), vec![1]);
        assert!(v.declared());
        let d = v.dir_of(Path::new("/b/t-0")).unwrap();
        assert_eq!(
            (d.volume, d.node.as_deref(), d.direct),
            (Some(0), Some("filer-2"), true)
        );
        assert!(v.dir_of(Path::new("/elsewhere/t-0")).is_none());
        // A log dir without a directory.id: nothing is numbered.
        let v = Volumes::of(&c, &[Some("zz".into()), None, Some("mm".into())]);
        assert!(v.direct().is_empty() && v.dirs().iter().all(|d| d.volume.is_none()));
        // Nothing declared.
        let v = Volumes::of(&config(&["/a"], &[], &["filer-1"]), &[Some("x".into())]);
        assert!(!v.declared() && v.direct().is_empty() && v.direct_dirs().is_empty());
    }

    #[test]
    fn a_broker_settles_after_the_delay_and_again_when_it_registers_anew() {
        let delay = Duration::from_secs(30);
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut s = Settling::default();
        // A new controller has seen every broker just now: none is settled.
        assert!(s
            .settled([(1, 10), (2, 20)].into_iter(), delay, t0)
            .is_empty());
        // Broker 3 joins 5 s later: each is settled once the delay has passed since it was
        // first seen.
        assert!(s
            .settled([(1, 10), (2, 20), (3, 30)].into_iter(), delay, at(5))
            .is_empty());
        let all = [(1, 10), (2, 20), (3, 30)];
        assert_eq!(s.settled(all.into_iter(), delay, at(30)), [1, 2].into());
        assert_eq!(s.settled(all.into_iter(), delay, at(35)), [1, 2, 3].into());
        // Broker 2 registered again (a new lease): it starts over.
        let again = [(1, 10), (2, 21), (3, 30)];
        assert_eq!(s.settled(again.into_iter(), delay, at(40)), [1, 3].into());
        assert_eq!(
            s.settled(again.into_iter(), delay, at(70)),
            [1, 2, 3].into()
        );
        // Gone and back under the same lease counts as new too (it was forgotten).
        assert_eq!(s.settled([(1, 10)].into_iter(), delay, at(70)), [1].into());
        assert_eq!(
            s.settled([(1, 10), (3, 30)].into_iter(), delay, at(71)),
            [1].into()
        );
        // A delay of 0 settles at once; a controller that lost the role forgets.
        assert_eq!(
            s.settled([(1, 10), (4, 40)].into_iter(), Duration::ZERO, at(71)),
            [1, 4].into()
        );
        s.reset();
        assert!(s.settled([(1, 10)].into_iter(), delay, at(72)).is_empty());
    }
}

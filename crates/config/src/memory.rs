//! The machine's memory, for defaults that scale with it.
//!
//! Read once per parse from Linux's `/proc/meminfo` (`MemTotal`) and the broker's cgroup
//! memory limit (v2 `memory.max`, or v1 `memory.limit_in_bytes`, of the cgroup named in
//! `/proc/self/cgroup`), whichever is smaller: a broker in a container sees the host's
//! `MemTotal`, but its page cache is charged to its cgroup. Elsewhere, or when none of them
//! can be read, there is no figure and the defaults fall back to their fixed floors.

use std::path::{Path, PathBuf};

/// Fixed floor of `sluice.log.cache.bytes`' default (and the whole default when the memory
/// is not known): 1 GiB.
pub const LOG_CACHE_FLOOR_BYTES: i64 = 1 << 30;

/// Share of the memory `sluice.log.cache.bytes` defaults to: an eighth.
const LOG_CACHE_MEMORY_DIVISOR: u64 = 8;

/// Default of `sluice.log.cache.bytes` on a machine (or cgroup) with `memory` bytes: an
/// eighth of it, at least [`LOG_CACHE_FLOOR_BYTES`].
pub fn log_cache_default(memory: Option<u64>) -> i64 {
    memory
        .map(|m| i64::try_from(m / LOG_CACHE_MEMORY_DIVISOR).unwrap_or(i64::MAX))
        .map_or(LOG_CACHE_FLOOR_BYTES, |b| b.max(LOG_CACHE_FLOOR_BYTES))
}

/// Memory available to this process, in bytes: the smaller of `MemTotal` and its cgroup's
/// memory limit; None when neither can be read.
pub fn available_memory() -> Option<u64> {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| mem_total(&s));
    let limit = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|s| {
            cgroup_limit_files(&s)
                .into_iter()
                .find_map(|f| std::fs::read_to_string(f).ok())
        })
        .and_then(|s| cgroup_limit(&s));
    match (total, limit) {
        (Some(t), Some(l)) => Some(t.min(l)),
        (t, l) => t.or(l),
    }
}

/// `MemTotal` of a `/proc/meminfo` text, in bytes.
pub(crate) fn mem_total(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let mut words = line["MemTotal:".len()..].split_whitespace();
    let n: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => n.checked_mul(1024),
        None => Some(n),
        Some(_) => None,
    }
}

/// The files that may hold this process's cgroup memory limit, from a `/proc/self/cgroup`
/// text: v2 `memory.max` of its `0::/path` line, v1 `memory.limit_in_bytes` of its `memory`
/// line.
pub(crate) fn cgroup_limit_files(cgroup: &str) -> Vec<PathBuf> {
    let root = Path::new("/sys/fs/cgroup");
    let mut files = Vec::new();
    for line in cgroup.lines() {
        if let Some(p) = line.strip_prefix("0::") {
            files.push(root.join(p.trim_start_matches('/')).join("memory.max"));
        } else if let Some((_, p)) = line.split_once(":memory:") {
            files.push(
                root.join("memory")
                    .join(p.trim_start_matches('/'))
                    .join("memory.limit_in_bytes"),
            );
        }
    }
    files
}

/// A cgroup limit text in bytes; None for v2's `max` (no limit) or anything unreadable. (v1's
/// "no limit" is a number near `i64::MAX`, which the smaller of it and `MemTotal` leaves out.)
pub(crate) fn cgroup_limit(memory_max: &str) -> Option<u64> {
    memory_max.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_eighth_of_the_memory_with_a_floor() {
        assert_eq!(log_cache_default(None), 1 << 30);
        assert_eq!(log_cache_default(Some(4 << 30)), 1 << 30);
        assert_eq!(log_cache_default(Some(8 << 30)), 1 << 30);
        assert_eq!(log_cache_default(Some(24 << 30)), 3 << 30);
        assert_eq!(log_cache_default(Some(512 << 30)), 64 << 30);
        assert_eq!(
            log_cache_default(Some(u64::MAX)),
            i64::try_from(u64::MAX / 8).unwrap()
        );
    }

    #[test]
    fn reads_meminfo_and_cgroup_files() {
        let meminfo = "MemTotal:       24588436 kB\nMemFree:         1190312 kB\n";
        assert_eq!(mem_total(meminfo), Some(24_588_436 * 1024));
        assert_eq!(mem_total("MemFree: 1 kB\n"), None);
        assert_eq!(mem_total("MemTotal: x kB\n"), None);
        assert_eq!(mem_total("MemTotal: 7 MB\n"), None);
        assert_eq!(
            cgroup_limit_files("0::/system.slice/sluice.service\n"),
            [PathBuf::from(
                "/sys/fs/cgroup/system.slice/sluice.service/memory.max"
            )]
        );
        assert_eq!(
            cgroup_limit_files("4:memory:/box/1\n1:cpu:/\n0::/\n"),
            [
                PathBuf::from("/sys/fs/cgroup/memory/box/1/memory.limit_in_bytes"),
                PathBuf::from("/sys/fs/cgroup/memory.max"),
            ]
        );
        assert_eq!(cgroup_limit("max\n"), None);
        assert_eq!(cgroup_limit("4294967296\n"), Some(4 << 30));
    }

    #[test]
    fn this_machine_has_a_figure_on_linux() {
        if cfg!(target_os = "linux") {
            let m = available_memory().expect("MemTotal is readable on Linux");
            // No machine this runs on has less than 64 MiB.
            assert!(m >= 64 << 20, "{m}");
        }
    }
}

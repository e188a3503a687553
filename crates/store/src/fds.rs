//! File descriptors: the process's open-files limit and how the broker shares it.
//!
//! At start the broker raises its soft `RLIMIT_NOFILE` to the hard limit
//! ([`raise_open_files_limit`], as Go's runtime and many servers do) and splits what it got
//! ([`FdBudget`]): a fixed reserve (the listeners, the metadata store, the runtime, checkpoint
//! and snapshot files written and closed again, directories opened for an fsync), then the
//! partition files the store may hold open (`sluice.log.open.files.max`, opened on demand
//! and closed when idle: `filecache.rs`) and the client
//! connections (`max.connections`, lowered to what is left). Running out must never be an
//! outage: a topic that would take the broker past its partition budget is refused, and the
//! listener stops accepting while connections are at their share.

use std::io;

/// Descriptors kept out of every share: standard streams, the runtime's epoll and event
/// descriptors, the listeners, the metadata store (embedded files or etcd connections), peer
/// connections, the files that are written and closed again (checkpoints, snapshots,
/// `partition.metadata`), directories opened for an fsync, and the next segments' files made
/// ahead of a roll.
pub const RESERVED_FDS: u64 = 256;

/// Partitions per partition-file descriptor in the default partition budget. Partition
/// files are opened on demand and closed when idle (`filecache.rs`), so an idle partition
/// holds none; a busy one holds its active segment's `.log` (and, for a while, its indexes).
/// With the default, the cap holds every busy partition's files while no more than one
/// partition in this many is busy at once, and the others' files are opened again as used.
pub const PARTITIONS_PER_FILE: u64 = 16;

pub use crate::filecache::FileCacheStats;

/// Set the most partition files the process holds open (the broker's
/// `sluice.log.open.files.max`, [`FdBudget::files`]); until then there is no cap.
pub fn set_partition_files_max(max: u64) {
    crate::filecache::files().set_max(usize::try_from(max).unwrap_or(usize::MAX));
}

/// The partition files open now, the cap, and how often files were closed and opened again.
pub fn partition_files() -> FileCacheStats {
    crate::filecache::files().stats()
}

/// The process's open-files limit before and after [`raise_open_files_limit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpenFilesLimit {
    /// The soft limit found at start.
    pub before: u64,
    /// The soft limit now (the hard limit, unless raising it failed).
    pub soft: u64,
    /// The hard limit.
    pub hard: u64,
}

/// Raise the soft `RLIMIT_NOFILE` to the hard limit. An unlimited hard limit (root may
/// have one) is not taken as it stands: the kernel's `nr_open` caps it.
pub fn raise_open_files_limit() -> io::Result<OpenFilesLimit> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let now = getrlimit(Resource::Nofile);
    let before = now.current.unwrap_or(u64::MAX);
    let hard = match now.maximum {
        Some(h) => h,
        None => nr_open().unwrap_or(1 << 20),
    };
    if before >= hard {
        return Ok(OpenFilesLimit {
            before,
            soft: before,
            hard,
        });
    }
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(hard),
            maximum: now.maximum,
        },
    )?;
    Ok(OpenFilesLimit {
        before,
        soft: hard,
        hard,
    })
}

/// The soft open-files limit in force now.
pub fn open_files_limit() -> u64 {
    rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .unwrap_or(u64::MAX)
}

fn nr_open() -> Option<u64> {
    std::fs::read_to_string("/proc/sys/fs/nr_open")
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// How the broker shares its open-files limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdBudget {
    /// The soft open-files limit.
    pub limit: u64,
    /// Kept out of every share ([`RESERVED_FDS`], less when the limit is tiny).
    pub reserved: u64,
    /// Partition files the store holds open at most (`sluice.log.open.files.max`).
    pub files: u64,
    /// Client connections accepted at once (`max.connections`, at most what is left).
    pub connections: u64,
    /// Partitions the broker opens at most (`sluice.broker.partitions.max`).
    pub partitions: u64,
}

impl FdBudget {
    /// Share `limit`: the reserve first, then the partition files (`files_max`, or by
    /// default half of what is left) and the connections (`max_connections`, at most the
    /// rest); the partition budget is `partitions_max`, or by default
    /// [`PARTITIONS_PER_FILE`] per partition-file descriptor. A negative `files_max` or
    /// `partitions_max` means "derive".
    pub fn new(limit: u64, files_max: i64, max_connections: u64, partitions_max: i64) -> FdBudget {
        let reserved = RESERVED_FDS.min(limit / 4);
        let rest = limit.saturating_sub(reserved);
        let files = match u64::try_from(files_max) {
            Ok(n) => n.min(rest.saturating_sub(1)).max(1),
            Err(_) => (rest / 2).max(1),
        };
        let connections = max_connections.min(rest.saturating_sub(files));
        let partitions = match u64::try_from(partitions_max) {
            Ok(n) => n,
            Err(_) => files.saturating_mul(PARTITIONS_PER_FILE),
        };
        FdBudget {
            limit,
            reserved,
            files,
            connections,
            partitions,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_shares_the_limit() {
        let b = FdBudget::new(4096, -1, i32::MAX as u64, -1);
        assert_eq!(b.reserved, RESERVED_FDS);
        assert_eq!(b.files, (4096 - RESERVED_FDS) / 2);
        assert_eq!(b.files + b.connections + b.reserved, 4096);
        assert_eq!(b.partitions, b.files * PARTITIONS_PER_FILE);
        // Explicit values win, within the limit.
        let b = FdBudget::new(4096, 1000, 50, 20_000);
        assert_eq!((b.files, b.connections, b.partitions), (1000, 50, 20_000));
        let b = FdBudget::new(4096, 1_000_000, i32::MAX as u64, -1);
        assert!(b.files < 4096 - b.reserved && b.connections >= 1);
        // A tiny limit still leaves something for each.
        let b = FdBudget::new(64, -1, 10, -1);
        assert!(b.reserved <= 16 && b.files >= 1 && b.connections >= 1);
    }

    #[test]
    fn raising_the_limit_reaches_the_hard_limit() {
        let l = raise_open_files_limit().expect("setrlimit");
        assert!(l.soft >= l.before);
        assert_eq!(open_files_limit(), l.soft);
    }
}

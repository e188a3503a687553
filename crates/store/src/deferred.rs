//! Deferred deletion: the rules every removal of data in a log directory follows, so that it
//! is safe on NFS (silly rename) and FUSE (`.fuse_hidden*`) semantics.
//!
//! 1. What leaves the log leaves readers' view at once (removed from the segment list or the
//!    registry, renamed to `*.deleted` / `*-delete`); renaming is safe while files are open.
//! 2. A file is unlinked only after this process dropped its last handle to it: the segment's
//!    `Arc`s are checked and dropped (closing the files) before any unlink.
//! 3. A removal that fails (`ENOTEMPTY` because another process on this host still holds a
//!    silly-renamed file, `EBUSY`, anything else) is retried with exponential backoff
//!    ([`DeleteRetry`]), logged once when first deferred and once when done, counted in
//!    [`DeletionStats`], and never fatal: no log directory goes offline because of it.
//! 4. Silly-renamed leftovers (`.nfs*`, `.fuse_hidden*`) are never part of a log. Inside a
//!    directory being removed, or found in a log dir, they are reclaimed once no process on
//!    this host holds them (the NFS client or FUSE removes them by itself on last close; a
//!    leftover of a dead process or a crashed host is unlinked by us).

use std::collections::HashSet;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Backoff of deferred deletions (`sluice.delete.retry.initial.ms`, `sluice.delete.retry.max.ms`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeleteRetry {
    /// Delay before the first retry; doubled after each failure.
    pub initial_ms: u64,
    /// Upper bound of the delay between retries.
    pub max_ms: u64,
}

impl Default for DeleteRetry {
    fn default() -> Self {
        DeleteRetry {
            initial_ms: 500,
            max_ms: 30_000,
        }
    }
}

/// Counters of deferred deletions, for metrics ([`crate::LogManager::deletion_stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeletionStats {
    /// Segments, directories and leftover files waiting to be removed right now.
    pub pending: u64,
    /// Removals that could not complete on the first attempt (since start).
    pub deferred_total: u64,
    /// Retries of deferred removals (since start).
    pub retries: u64,
    /// Deferred removals that completed (since start).
    pub completed: u64,
    /// Silly-renamed leftovers (`.nfs*`, `.fuse_hidden*`) this process unlinked.
    pub leftovers_reclaimed: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Counters {
    pending: AtomicU64,
    deferred_total: AtomicU64,
    retries: AtomicU64,
    completed: AtomicU64,
    leftovers_reclaimed: AtomicU64,
}

impl Counters {
    pub(crate) fn snapshot(&self) -> DeletionStats {
        DeletionStats {
            pending: self.pending.load(Ordering::Relaxed),
            deferred_total: self.deferred_total.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            completed: self.completed.load(Ordering::Relaxed),
            leftovers_reclaimed: self.leftovers_reclaimed.load(Ordering::Relaxed),
        }
    }
    pub(crate) fn added(&self) {
        self.pending.fetch_add(1, Ordering::Relaxed);
    }
    pub(crate) fn done(&self, attempt: &Attempt) {
        self.pending.fetch_sub(1, Ordering::Relaxed);
        if attempt.failures > 0 {
            self.completed.fetch_add(1, Ordering::Relaxed);
        }
    }
    pub(crate) fn reclaimed(&self) {
        self.leftovers_reclaimed.fetch_add(1, Ordering::Relaxed);
    }
}

/// Retry state of one pending removal.
#[derive(Debug, Clone, Default)]
pub(crate) struct Attempt {
    failures: u32,
    delay_ms: u64,
    next_at_ms: i64,
}

impl Attempt {
    /// True when the next attempt is due (always true before the first failure).
    pub(crate) fn due(&self, now_ms: i64) -> bool {
        now_ms >= self.next_at_ms
    }

    /// When the next attempt is due, if it was deferred.
    pub(crate) fn next_at(&self) -> Option<i64> {
        (self.failures > 0).then_some(self.next_at_ms)
    }

    /// Record a failed (or not yet possible) attempt: schedule the next one and log the first
    /// failure only.
    pub(crate) fn failed(
        &mut self,
        policy: DeleteRetry,
        counters: &Counters,
        now_ms: i64,
        what: &Path,
        why: &dyn std::fmt::Display,
    ) {
        if self.failures == 0 {
            counters.deferred_total.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(path = %what.display(), reason = %why,
                "removal deferred; retrying in the background (not an error for the log directory)");
            self.delay_ms = policy.initial_ms.max(1);
        } else {
            counters.retries.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(path = %what.display(), reason = %why, failures = self.failures, "removal still deferred");
            self.delay_ms = self.delay_ms.saturating_mul(2).min(policy.max_ms.max(1));
        }
        self.failures = self.failures.saturating_add(1);
        self.next_at_ms = now_ms.saturating_add(i64::try_from(self.delay_ms).unwrap_or(i64::MAX));
    }

    /// Log the completion of a removal that had been deferred.
    pub(crate) fn finished(&self, what: &Path) {
        if self.failures > 0 {
            tracing::info!(path = %what.display(), retries = self.failures - 1, "deferred removal completed");
        }
    }
}

/// True for the names NFS clients (`.nfsXXXX`) and FUSE (`.fuse_hiddenXXXX`) give to files
/// that were unlinked or replaced while still open.
pub(crate) fn is_silly_renamed(name: &str) -> bool {
    name.starts_with(".nfs") || name.starts_with(".fuse_hidden")
}

/// The (device, inode) of every file some process on this host holds open, from
/// `/proc/*/fd`. None when that cannot be known (no `/proc`, or another process's file
/// descriptors are not readable).
pub(crate) fn open_files_on_host() -> Option<HashSet<(u64, u64)>> {
    let mut out = HashSet::new();
    let procs = std::fs::read_dir("/proc").ok()?;
    let mut any = false;
    for p in procs.flatten() {
        let name = p.file_name();
        let Some(name) = name.to_str() else { continue };
        if !name.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let fds = match std::fs::read_dir(p.path().join("fd")) {
            Ok(f) => f,
            // The process exited meanwhile.
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            // Not ours to see: the answer would be incomplete.
            Err(_) => return None,
        };
        any = true;
        for fd in fds.flatten() {
            if let Ok(m) = std::fs::metadata(fd.path()) {
                out.insert((m.dev(), m.ino()));
            }
        }
    }
    any.then_some(out)
}

/// Unlink a silly-renamed leftover if no process on this host holds it. Ok(true) when it is
/// gone, Ok(false) when it is still held (the NFS client or FUSE removes it on last close).
pub(crate) fn reclaim_leftover(
    path: &Path,
    open: &mut Option<Option<HashSet<(u64, u64)>>>,
) -> io::Result<bool> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(true),
        Err(e) => return Err(e),
    };
    let open = open.get_or_insert_with(open_files_on_host);
    if let Some(set) = open {
        if set.contains(&(meta.dev(), meta.ino())) {
            return Ok(false);
        }
    }
    // Unknown holders: try. An NFS client refuses (EBUSY) if this host holds it; FUSE would
    // hide it again under a new name, which the next sweep finds.
    match std::fs::remove_file(path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(e),
    }
}

/// Remove a directory tree this process no longer holds anything in. Silly-renamed files are
/// reclaimed only when nothing on this host holds them; a directory that still contains one is
/// left for a later attempt (`Err` with the reason, for example `ENOTEMPTY`).
pub(crate) fn remove_tree(
    path: &Path,
    counters: &Counters,
    open: &mut Option<Option<HashSet<(u64, u64)>>>,
) -> io::Result<()> {
    let entries = match std::fs::read_dir(path) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut held = None;
    for entry in entries {
        let entry = entry?;
        let p = entry.path();
        let name = entry.file_name();
        let is_dir = entry.file_type().map(|t| t.is_dir()).unwrap_or(false);
        if is_dir {
            if let Err(e) = remove_tree(&p, counters, open) {
                held.get_or_insert(e);
            }
            continue;
        }
        if name.to_str().is_some_and(is_silly_renamed) {
            match reclaim_leftover(&p, open) {
                Ok(true) => counters.reclaimed(),
                Ok(false) => {
                    held.get_or_insert(io::Error::other(format!(
                        "{} is still held open by a process on this host",
                        p.display()
                    )));
                }
                Err(e) => {
                    held.get_or_insert(e);
                }
            }
            continue;
        }
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                held.get_or_insert(e);
            }
        }
    }
    match std::fs::remove_dir(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(held.unwrap_or(e)),
    }
}

/// What every log and the manager share about deletions: the retry policy and the counters.
#[derive(Debug, Default)]
pub(crate) struct DeleteCtx {
    pub retry: DeleteRetry,
    pub counters: Counters,
}

/// A path scheduled for removal with its retry state.
#[derive(Debug)]
pub(crate) struct PendingPath {
    pub path: PathBuf,
    pub attempt: Attempt,
}

/// Shorthand: `(now_ms, earliest next attempt)` bookkeeping for the reaper thread.
pub(crate) fn earliest(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) => x,
        (None, y) => y,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_max() {
        let c = Counters::default();
        let policy = DeleteRetry {
            initial_ms: 100,
            max_ms: 350,
        };
        let mut a = Attempt::default();
        assert!(a.due(0));
        let p = Path::new("/x");
        a.failed(policy, &c, 0, p, &"busy");
        assert_eq!(a.next_at(), Some(100));
        assert!(!a.due(99) && a.due(100));
        a.failed(policy, &c, 100, p, &"busy");
        assert_eq!(a.next_at(), Some(300));
        a.failed(policy, &c, 300, p, &"busy");
        assert_eq!(a.next_at(), Some(650));
        let s = c.snapshot();
        assert_eq!((s.deferred_total, s.retries), (1, 2));
    }

    #[test]
    fn silly_names() {
        assert!(is_silly_renamed(".nfs000000000123abcd00000001"));
        assert!(is_silly_renamed(".fuse_hidden0000000300000001"));
        assert!(!is_silly_renamed("00000000000000000000.log"));
        assert!(!is_silly_renamed(".kafka_cleanshutdown"));
    }

    #[test]
    fn remove_tree_reclaims_unheld_leftovers_and_keeps_held_ones() {
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("t-0.abc-delete");
        std::fs::create_dir_all(d.join("sub")).unwrap();
        std::fs::write(d.join("00000000000000000000.log"), b"x").unwrap();
        std::fs::write(d.join(".nfs0000abcd"), b"x").unwrap();
        let held = d.join(".fuse_hidden0001");
        std::fs::write(&held, b"x").unwrap();
        let f = std::fs::File::open(&held).unwrap();
        let c = Counters::default();
        let err = remove_tree(&d, &c, &mut None).unwrap_err();
        assert!(err.to_string().contains("held open"), "{err}");
        assert!(held.exists() && !d.join(".nfs0000abcd").exists());
        drop(f);
        remove_tree(&d, &c, &mut None).unwrap();
        assert!(!d.exists());
        assert_eq!(c.snapshot().leftovers_reclaimed, 2);
    }
}

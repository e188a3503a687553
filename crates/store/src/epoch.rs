//! The leader epoch cache (`leader-epoch-checkpoint`): which epoch started writing at which
//! offset, like Kafka's LeaderEpochFileCache.

use std::io;
use std::path::{Path, PathBuf};

use sluice_format::text::{format_leader_epoch_checkpoint, parse_leader_epoch_checkpoint};

use crate::fsutil::write_atomic;

pub(crate) const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";

#[derive(Debug)]
pub(crate) struct EpochCache {
    path: PathBuf,
    entries: Vec<(i32, i64)>,
}

impl EpochCache {
    /// Load from the partition directory; a missing or unreadable file yields an empty cache
    /// (it is rebuilt from batch headers where the log is scanned).
    pub(crate) fn load(dir: &Path) -> EpochCache {
        let path = dir.join(LEADER_EPOCH_CHECKPOINT);
        let entries = match std::fs::read_to_string(&path) {
            Ok(text) => match parse_leader_epoch_checkpoint(&text) {
                Ok(mut e) => {
                    // Keep only a monotonic sequence (epochs and offsets both increasing).
                    let mut clean: Vec<(i32, i64)> = Vec::with_capacity(e.len());
                    for (ep, off) in e.drain(..) {
                        if let Some(&(le, lo)) = clean.last() {
                            if ep <= le || off < lo {
                                continue;
                            }
                        }
                        clean.push((ep, off));
                    }
                    clean
                }
                Err(err) => {
                    tracing::warn!(path = %path.display(), error = %err, "ignoring unreadable leader epoch checkpoint");
                    Vec::new()
                }
            },
            Err(_) => Vec::new(),
        };
        EpochCache { path, entries }
    }

    pub(crate) fn entries(&self) -> &[(i32, i64)] {
        &self.entries
    }

    pub(crate) fn latest_epoch(&self) -> Option<i32> {
        self.entries.last().map(|e| e.0)
    }

    /// Record that `epoch` starts at `offset` if it is newer than the latest. Returns true if
    /// the cache changed.
    pub(crate) fn assign(&mut self, epoch: i32, offset: i64) -> bool {
        if epoch < 0 {
            return false;
        }
        match self.entries.last() {
            Some(&(le, lo)) if epoch <= le || offset < lo => false,
            _ => {
                self.entries.push((epoch, offset));
                true
            }
        }
    }

    /// Drop entries starting at or after `end_offset` (log truncated to it).
    pub(crate) fn truncate_from_end(&mut self, end_offset: i64) -> bool {
        let before = self.entries.len();
        self.entries.retain(|e| e.1 < end_offset);
        before != self.entries.len()
    }

    /// The log start moved to `start`: the epoch covering it now starts there.
    pub(crate) fn truncate_from_start(&mut self, start: i64) -> bool {
        let covering = self.entries.iter().rposition(|e| e.1 <= start);
        match covering {
            Some(i) if i > 0 || self.entries[i].1 != start => {
                self.entries.drain(..i);
                self.entries[0].1 = start;
                true
            }
            _ => false,
        }
    }

    /// Kafka's endOffsetFor: (the largest epoch <= `epoch`, the start offset of the next
    /// epoch or `log_end` if none).
    pub(crate) fn end_offset_for(&self, epoch: i32, log_end: i64) -> Option<(i32, i64)> {
        let i = self.entries.iter().rposition(|e| e.0 <= epoch)?;
        let end = self.entries.get(i + 1).map_or(log_end, |n| n.1);
        Some((self.entries[i].0, end))
    }

    /// The partition directory moved: write the checkpoint there from now on.
    pub(crate) fn move_to(&mut self, dir: &Path) -> io::Result<()> {
        self.path = dir.join(LEADER_EPOCH_CHECKPOINT);
        self.persist()
    }

    pub(crate) fn persist(&self) -> io::Result<()> {
        write_atomic(
            &self.path,
            format_leader_epoch_checkpoint(&self.entries).as_bytes(),
        )
    }
}

//! The leader epoch cache (`leader-epoch-checkpoint`): which epoch started writing at which
//! offset, like Kafka's LeaderEpochFileCache.

use std::io;
use std::path::{Path, PathBuf};

use sluice_format::text::{format_leader_epoch_checkpoint, parse_leader_epoch_checkpoint};

use crate::fsutil::write_atomic;

pub(crate) const LEADER_EPOCH_CHECKPOINT: &str = "leader-epoch-checkpoint";

#[derive(Debug, Clone)]
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

    /// Kafka's `LeaderEpochFileCache.endOffsetFor`, with `current` the log's leader epoch
    /// (Kafka writes an entry for it when the broker becomes leader; Sluice at its first
    /// append):
    /// - `epoch` is `current` or the newest entry: (`epoch`, `log_end`);
    /// - newer than both: none (Kafka: "larger than any known epoch", UNDEFINED);
    /// - older than every entry: (`epoch`, the first entry's start offset): the history is
    ///   gone, the client continues from where the log's known epochs begin;
    /// - otherwise (the largest epoch <= `epoch`, the start offset of the next one).
    pub(crate) fn end_offset_for(
        &self,
        epoch: i32,
        log_end: i64,
        current: i32,
    ) -> Option<(i32, i64)> {
        if epoch < 0 {
            return None;
        }
        let newest = self.entries.last().map(|e| e.0);
        if epoch == current || Some(epoch) == newest {
            return Some((epoch, log_end));
        }
        match self.entries.iter().rposition(|e| e.0 <= epoch) {
            None => self.entries.first().map(|first| (epoch, first.1)),
            Some(i) => match self.entries.get(i + 1) {
                Some(next) => Some((self.entries[i].0, next.1)),
                // Newer than the newest entry and not the current epoch: between the two
                // (no append since `current` began), the newest entry's epoch ends at the
                // log end; past `current`, unknown.
                None if epoch < current => Some((self.entries[i].0, log_end)),
                None => None,
            },
        }
    }

    /// The partition directory moved: write the checkpoint there from now on.
    pub(crate) fn move_to(&mut self, dir: &Path) -> io::Result<()> {
        self.path = dir.join(LEADER_EPOCH_CHECKPOINT);
        self.persist()
    }

    pub(crate) fn persist(&self) -> io::Result<()> {
        let (path, text) = self.contents();
        write_atomic(&path, text.as_bytes())
    }

    /// Where the checkpoint goes and what it holds now, to write outside the cache's lock.
    pub(crate) fn contents(&self) -> (PathBuf, String) {
        (
            self.path.clone(),
            format_leader_epoch_checkpoint(&self.entries),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, i64)]) -> EpochCache {
        EpochCache {
            path: PathBuf::from("unused"),
            entries: entries.to_vec(),
        }
    }

    /// The answers of Kafka's LeaderEpochFileCache.endOffsetFor for the same entries.
    #[test]
    fn end_offset_for_answers_as_kafka() {
        let c = cache(&[(2, 10), (4, 30), (5, 50)]);
        let leo = 70;
        // The newest epoch (the current one): the log end.
        assert_eq!(c.end_offset_for(5, leo, 5), Some((5, 70)));
        // An epoch with a successor: where the next one starts.
        assert_eq!(c.end_offset_for(2, leo, 5), Some((2, 30)));
        assert_eq!(c.end_offset_for(4, leo, 5), Some((4, 50)));
        // An epoch between two known ones: the floor's epoch, the next start.
        assert_eq!(c.end_offset_for(3, leo, 5), Some((2, 30)));
        // Older than every entry: the requested epoch, where the first one starts.
        assert_eq!(c.end_offset_for(0, leo, 5), Some((0, 10)));
        // Newer than any: UNDEFINED.
        assert_eq!(c.end_offset_for(6, leo, 5), None);
        assert_eq!(c.end_offset_for(-1, leo, 5), None);
        // The current epoch before its first append (Kafka has its entry from the election).
        assert_eq!(c.end_offset_for(7, leo, 7), Some((7, 70)));
        assert_eq!(c.end_offset_for(6, leo, 7), Some((5, 70)));
        assert_eq!(cache(&[]).end_offset_for(0, 0, 0), Some((0, 0)));
        assert_eq!(cache(&[]).end_offset_for(1, 0, 0), None);
    }
}

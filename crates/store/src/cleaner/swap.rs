//! Replacing a group of segments by their cleaned segment, safe on NFS semantics
//! (docs/nfs.md, docs/compaction.md):
//!
//! 1. The cleaned files are written under temporary names carrying this process's token
//!    (`<base>.log.<token>.cleaned`, and `.index`/`.timeindex` alike), so that no two
//!    brokers ever write the same file, and fsynced.
//! 2. Under the log's files lock, after checking that the cleaning was not aborted and that
//!    this broker still owns the partition, they are renamed to swap names of this switch's
//!    own (`<base>.log.<tag>.swap`, Kafka's `.swap` suffix with the switch's tag; index files
//!    first) and the directory is fsynced: from here on the swap is complete on storage, and
//!    recovery finishes it (`recover.rs`). No other switch ever uses those names, so a
//!    deposed opener's rename or removal of another switch's swap files, stalled in flight,
//!    never lands on this one's.
//! 3. Under the writer lock (the only moment appends wait), the segment list is switched:
//!    readers see the old list or the new one, never a mix; readers holding old segments go
//!    on reading them.
//! 4. Each old segment's files are renamed aside to `.<tag>.deleted` names (never
//!    renamed over, never unlinked while open), then the swap files into the freed names (the
//!    `.log` last), and the directory is fsynced. The old segments go to the deferred
//!    deletion: unlinked after their last reader.
//!
//! A failure before step 3 removes the temporary files and changes nothing; a failure in
//! step 4 fails the log, whose re-open completes the swap from the files.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::RwLock;
use sluice_format::{BatchHeader, SegmentFileKind};

use super::clean::{CleanCtx, SegWriter};
use super::CleanStop;
use crate::deferred::Attempt;
use crate::fsutil::sync_dir;
use crate::log::PendingSegment;
use crate::recent::RecentBatches;
use crate::segment::{seg_path, SegMeta, Segment};
use crate::{Log, LogFailure, SyncedMark};

/// Suffix of the cleaner's temporary files.
pub(crate) const CLEANED_SUFFIX: &str = ".cleaned";
/// Suffix of a complete cleaned segment waiting to replace the segments it covers.
pub(crate) const SWAP_SUFFIX: &str = ".swap";

/// The segment file kinds a cleaned segment has (the `.txnindex` only when it keeps aborted
/// transactions; a missing one is skipped), in the order they are switched in.
const KINDS: [SegmentFileKind; 4] = [
    SegmentFileKind::Index,
    SegmentFileKind::TimeIndex,
    SegmentFileKind::TxnIndex,
    SegmentFileKind::Log,
];

/// Rename `from` to `to`; a missing optional `.txnindex` is no error.
fn rename_kind(kind: SegmentFileKind, from: &Path, to: &Path) -> io::Result<()> {
    match std::fs::rename(from, to) {
        Err(e) if e.kind() == io::ErrorKind::NotFound && kind == SegmentFileKind::TxnIndex => {
            Ok(())
        }
        r => r,
    }
}

pub(crate) fn cleaned_path(dir: &Path, base: i64, kind: SegmentFileKind, token: &str) -> PathBuf {
    let mut p = seg_path(dir, base, kind).into_os_string();
    p.push(".");
    p.push(token);
    p.push(CLEANED_SUFFIX);
    PathBuf::from(p)
}

/// The tag of the `.deleted` names a switch gives the segments it replaces (they may be
/// replaced again, or deleted, while these wait for a reader, so each removal needs names of
/// its own): `<base of the cleaned segment>-<random>`, so that an open can tell a switch that
/// had begun (`recover.rs`).
fn new_switch(base: i64) -> crate::CleanerSwitch {
    let id = uuid::Uuid::new_v4().as_u64_pair().0 & 0xffff_ffff_ffff;
    crate::CleanerSwitch { base, id }
}

/// The tag of `switch`'s names: `<base>-<id as 12 hex digits>`.
pub(crate) fn switch_tag(switch: crate::CleanerSwitch) -> String {
    format!("{}-{:012x}", switch.base, switch.id)
}

/// True if `tag` is the tag of a switch of the cleaned segment based at `base`, or of any
/// switch made before tags named the base (12 hex digits: such a swap left at an open was
/// completed then, as it is now).
pub(crate) fn swap_tag_names(tag: &str, base: i64) -> bool {
    match tag.split_once('-') {
        Some((b, rest)) => b.parse::<i64>() == Ok(base) && !rest.is_empty(),
        None => tag.len() == 12 && tag.bytes().all(|c| c.is_ascii_hexdigit()),
    }
}

/// `<base>.<kind>.<tag>.swap` for a switch of this cleaner (its tag, [`swap_tag`]), or Kafka's
/// `<base>.<kind>.swap` (`tag` None: a Kafka log dir, or a switch before swap names were
/// tagged).
pub(crate) fn swap_path(
    dir: &Path,
    base: i64,
    kind: SegmentFileKind,
    tag: Option<&str>,
) -> PathBuf {
    let mut p = seg_path(dir, base, kind).into_os_string();
    if let Some(tag) = tag {
        p.push(".");
        p.push(tag);
    }
    p.push(SWAP_SUFFIX);
    PathBuf::from(p)
}

fn create_new(path: &Path) -> io::Result<File> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
}

/// A cleaned segment being written.
pub(crate) struct Cleaned {
    dir: PathBuf,
    base: i64,
    token: String,
    log: SegWriter,
    index: File,
    time: File,
}

/// A cleaned segment written and fsynced under its temporary names.
pub(crate) struct Finished {
    cleaned: Cleaned,
    seg: Segment,
}

impl Cleaned {
    pub(crate) fn create(
        dir: &Path,
        base: i64,
        token: &str,
        io_buffer: usize,
    ) -> io::Result<Cleaned> {
        let path = |k| cleaned_path(dir, base, k, token);
        let log = create_new(&path(SegmentFileKind::Log))?;
        let index = create_new(&path(SegmentFileKind::Index))?;
        let time = create_new(&path(SegmentFileKind::TimeIndex))?;
        Ok(Cleaned {
            dir: dir.to_path_buf(),
            base,
            token: token.to_string(),
            log: SegWriter::new(log, base, io_buffer),
            index,
            time,
        })
    }

    pub(crate) fn append(
        &mut self,
        batch: &[u8],
        h: &BatchHeader,
        interval: u64,
    ) -> io::Result<u64> {
        self.log.append(batch, h, interval)
    }

    /// Remove the temporary files (a cleaning that stopped).
    pub(crate) fn discard(self) {
        remove_all(&self.dir, self.base, |k| {
            cleaned_path(&self.dir, self.base, k, &self.token)
        });
    }

    /// Write the indexes, fsync the three files, keep the old segments' modification time
    /// (retention of batches without timestamps counts from it, as Kafka's does).
    pub(crate) fn finish(
        mut self,
        next_offset: i64,
        mtime_ms: i64,
        now_ms: i64,
        aborted: Vec<sluice_format::txn::TxnIndexEntry>,
    ) -> io::Result<Finished> {
        let res = (|| {
            if !aborted.is_empty() {
                let bytes: Vec<u8> = aborted.iter().flat_map(|e| e.encode()).collect();
                let path =
                    cleaned_path(&self.dir, self.base, SegmentFileKind::TxnIndex, &self.token);
                let f = create_new(&path)?;
                std::os::unix::fs::FileExt::write_all_at(&f, &bytes, 0)?;
                f.sync_all()?;
            }
            self.log.flush_buf()?;
            let tail = self.log.cursor.maybe_time_entry();
            self.log.ti.extend(tail);
            let ib: Vec<u8> = self.log.oi.iter().flat_map(|e| e.encode()).collect();
            let tb: Vec<u8> = self.log.ti.iter().flat_map(|e| e.encode()).collect();
            std::os::unix::fs::FileExt::write_all_at(&self.index, &ib, 0)?;
            std::os::unix::fs::FileExt::write_all_at(&self.time, &tb, 0)?;
            if let Ok(t) = u64::try_from(mtime_ms) {
                let when = std::time::UNIX_EPOCH + std::time::Duration::from_millis(t);
                if let Err(e) = self.log.file.set_modified(when) {
                    tracing::debug!(error = %e, "could not keep the modification time of a cleaned segment");
                }
            }
            self.log.file.sync_all()?;
            self.index.sync_all()?;
            self.time.sync_all()
        })();
        if let Err(e) = res {
            self.discard();
            return Err(e);
        }
        let (log, index, time) = match (
            self.log.file.try_clone(),
            self.index.try_clone(),
            self.time.try_clone(),
        ) {
            (Ok(a), Ok(b), Ok(c)) => (a, b, c),
            (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => {
                self.discard();
                return Err(e);
            }
        };
        // Fsynced above: clean in the cache. Renamed through it (`Segment::renamed_kind`).
        let cache = crate::filecache::files();
        let adopted = (|| {
            let (dir, base, token) = (&self.dir, self.base, &self.token);
            let at = |kind| cleaned_path(dir, base, kind, token);
            Ok::<_, io::Error>((
                cache.adopt(at(SegmentFileKind::Log), log)?,
                cache.adopt(at(SegmentFileKind::Index), index)?,
                cache.adopt(at(SegmentFileKind::TimeIndex), time)?,
            ))
        })();
        let (log, index, time) = match adopted {
            Ok(files) => files,
            Err(e) => {
                self.discard();
                return Err(e);
            }
        };
        let w = &self.log;
        let seg = Segment {
            base_offset: self.base,
            dir: self.dir.clone(),
            log,
            index_file: index,
            time_file: time,
            meta: RwLock::new(SegMeta {
                size: w.pos,
                next_offset,
                offset_index: Some(Arc::new(w.oi.clone())),
                time_index: Some(Arc::new(w.ti.clone())),
                max_ts: w.cursor.max_ts,
                off_max_ts: w.cursor.off_max_ts,
                rolling_ts: w.first_ts.filter(|t| *t >= 0).unwrap_or(now_ms),
                mtime_ms,
                recent: RecentBatches::default(),
                index_on_disk: (w.oi.len(), w.ti.len()),
                index_rewrite: false,
            }),
            txn: parking_lot::Mutex::new(crate::txn::TxnIndex {
                entries: Some(Arc::new(aborted)),
                file: None,
            }),
        };
        Ok(Finished { cleaned: self, seg })
    }
}

fn remove_all(dir: &Path, base: i64, path: impl Fn(SegmentFileKind) -> PathBuf) {
    for kind in KINDS {
        let p = path(kind);
        match std::fs::remove_file(&p) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(file = %p.display(), segment = base, dir = %dir.display(), error = %e,
                    "could not remove a cleaner's temporary file; the next open of the log removes it");
            }
        }
    }
}

/// Put the new segment's marks where the old ones were: a mark inside the replaced group
/// lies at or past its end (the group is below the high watermark and the synced offset),
/// so it moves to the end of the cleaned segment.
fn remap(mark: &mut SyncedMark, group: &[Arc<Segment>], base: i64, size: u64) {
    if *mark != SyncedMark::NONE && group.iter().any(|g| g.base_offset == mark.base) {
        mark.base = base;
        mark.pos = size;
    }
}

impl Log {
    /// Steps 2 to 4 of the module doc.
    pub(super) fn swap_in(
        &self,
        ctx: &CleanCtx<'_>,
        group: &[Arc<Segment>],
        done: Finished,
    ) -> Result<(), CleanStop> {
        let dir = done.cleaned.dir.clone();
        let base = done.cleaned.base;
        #[cfg(test)]
        if ctx.crash_at == Some(super::CrashAt::Cleaned) {
            drop(done);
            return Err(CleanStop::Aborted("simulated crash"));
        }
        // The switch's tag names its swap files and, in step 4, the old files it puts aside: a
        // `.swap` left by a former owner (whose switch the gate refused) has another. It is
        // recorded for the next owner before any of them exists (in a cluster: in the owner
        // record, through the write gate, an etcd write), so that whatever its listing shows,
        // the next owner's open can make this switch's first rename aside, if it stalls in
        // flight, land on nothing (`recover.rs`).
        let switch = new_switch(base);
        if let Err(e) = self.announce_switch(switch) {
            done.cleaned.discard();
            tracing::info!(tp = ?self.tp, error = %e, "a cleaned segment's switch was not announced; the cleaning is dropped");
            return Err(CleanStop::Aborted(
                "the switch could not be recorded for the next owner",
            ));
        }
        let files = self.files_lock.lock();
        if (ctx.aborted)() || self.is_closed() || self.failure().is_some() {
            drop(files);
            done.cleaned.discard();
            return Err(CleanStop::Aborted("the log is closing, moving or failed"));
        }
        // The ownership check appends use, immediately before the swap.
        if !(ctx.owns)() {
            drop(files);
            done.cleaned.discard();
            return Err(CleanStop::Aborted(
                "this broker no longer owns the partition",
            ));
        }
        let tag = switch_tag(switch);
        let swap = |kind| swap_path(&dir, base, kind, Some(&tag));
        let renamed = (|| {
            for kind in KINDS {
                done.seg.rename_kind(kind, &swap(kind), |from, to| {
                    rename_kind(
                        kind,
                        from.unwrap_or(&cleaned_path(&dir, base, kind, &done.cleaned.token)),
                        to,
                    )
                })?;
            }
            sync_dir(&dir)
        })();
        if let Err(e) = renamed {
            remove_all(&dir, base, swap);
            drop(files);
            done.cleaned.discard();
            return Err(e.into());
        }
        #[cfg(test)]
        if ctx.crash_at == Some(super::CrashAt::Swapped) {
            drop(done);
            return Err(CleanStop::Aborted("simulated crash"));
        }
        let new_size = done.seg.size();
        let new = Arc::new(done.seg);
        let switched = {
            let _w = self.writer.lock();
            let mut s = self.shared.write();
            let at = s.segments.iter().position(|x| Arc::ptr_eq(x, &group[0]));
            let intact = at.is_some_and(|k| {
                k + group.len() < s.segments.len()
                    && group
                        .iter()
                        .zip(&s.segments[k..])
                        .all(|(g, x)| Arc::ptr_eq(g, x))
            });
            let live = !(ctx.aborted)() && !self.is_closed() && *self.dir.read() == dir;
            match at {
                Some(k) if intact && live && (ctx.owns)() => {
                    let mut v = s.segments.to_vec();
                    v.splice(k..k + group.len(), [new.clone()]);
                    s.segments = Arc::new(v);
                    let mut synced = s.synced_mark;
                    remap(&mut synced, group, base, new_size);
                    s.synced_mark = synced;
                    if let Some(mut p) = s.published {
                        remap(&mut p, group, base, new_size);
                        s.published = Some(p);
                    }
                    true
                }
                _ => false,
            }
        };
        if !switched {
            // Retention removed part of the group meanwhile, or the log is going away: the
            // old segments stay; the swap files go, unless the write gate refuses (the
            // partition's files are another broker's now, and an open of theirs completes
            // the swap or removes it).
            if (ctx.owns)() {
                remove_all(&dir, base, swap);
            }
            drop(files);
            return Err(CleanStop::Aborted(
                "the segments changed during the cleaning",
            ));
        }
        let mut res = Ok(());
        for g in group {
            // The write gate before each rename aside, as before each of an opener's renames:
            // a deposed broker stops after the one that may be in flight (an open that found
            // the swap not begun removed it; `recover.rs` puts a first segment renamed aside
            // late back under its name).
            if !(ctx.owns)() {
                res = Err(io::Error::other("this broker no longer owns the partition"));
                break;
            }
            if let Err(e) = g.rename_deleted(Some(&tag)) {
                res = Err(e);
                break;
            }
        }
        #[cfg(test)]
        if ctx.crash_at == Some(super::CrashAt::OldRenamed) {
            return Err(CleanStop::Aborted("simulated crash"));
        }
        if res.is_ok() {
            for kind in KINDS {
                #[cfg(test)]
                if kind == SegmentFileKind::Log && ctx.crash_at == Some(super::CrashAt::IndexesIn) {
                    return Err(CleanStop::Aborted("simulated crash"));
                }
                if let Err(e) = new.rename_kind(kind, &seg_path(&dir, base, kind), |from, to| {
                    rename_kind(kind, from.unwrap_or(&swap(kind)), to)
                }) {
                    res = Err(e);
                    break;
                }
            }
        }
        let res = res.and_then(|()| sync_dir(&dir));
        drop(files);
        if let Err(e) = res {
            self.fail(LogFailure::Refused {
                reason: format!(
                    "the cleaned segment {base} could not be switched in on storage ({e}); re-opening the log completes the switch from its files"
                ),
            });
            return Err(CleanStop::Io(e));
        }
        let now = crate::fsutil::now_ms();
        let retired: Vec<PendingSegment> = group
            .iter()
            .map(|g| {
                self.del.counters.added();
                PendingSegment {
                    seg: Some(g.clone()),
                    dir: dir.clone(),
                    base: g.base_offset,
                    renamed: true,
                    attempt: Attempt::default(),
                    tag: Some(tag.clone()),
                }
            })
            .collect();
        self.pending.lock().extend(retired);
        self.reap_pending(now);
        Ok(())
    }
}

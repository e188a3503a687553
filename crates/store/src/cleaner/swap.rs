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
use crate::recent::RecentBatches;
use crate::segment::{seg_path, PendingSegment, SegMeta, Segment};
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

/// `<base>.<kind>.<tag>.swap` for a switch of this cleaner (its tag, [`switch_tag`]), or Kafka's
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
    /// Steps 2 to 4 of the module doc: the switch is announced ([`Log::announce_switch`]),
    /// then, under the log's files lock, the swap is refused if the cleaning was aborted or
    /// the write gate says no ([`Log::swap_refusal`]); the cleaned files are renamed to the
    /// switch's swap names ([`rename_to_swap`], step 2), the segment list switched under the
    /// writer lock ([`Log::switch_segment_list`], step 3), the old segments renamed aside
    /// ([`Log::rename_group_aside`]) and the swap files renamed in ([`rename_swap_in`]), step
    /// 4; last the old segments go to the deferred deletion ([`Log::retire_group`]).
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
        if let Some(reason) = self.swap_refusal(ctx) {
            drop(files);
            done.cleaned.discard();
            return Err(CleanStop::Aborted(reason));
        }
        let tag = switch_tag(switch);
        let swap = |kind| swap_path(&dir, base, kind, Some(&tag));
        if let Err(e) = rename_to_swap(&done, &tag) {
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
        if !self.switch_segment_list(ctx, group, &new, new_size) {
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
        let res = self.rename_group_aside(ctx, group, &tag);
        #[cfg(test)]
        if ctx.crash_at == Some(super::CrashAt::OldRenamed) {
            return Err(CleanStop::Aborted("simulated crash"));
        }
        // The swap files in: the indexes, then the `.log` (the last of `KINDS`).
        let (indexes, log) = KINDS.split_at(KINDS.len() - 1);
        let res = res.and_then(|()| rename_swap_in(&new, &tag, indexes));
        #[cfg(test)]
        if res.is_ok() && ctx.crash_at == Some(super::CrashAt::IndexesIn) {
            return Err(CleanStop::Aborted("simulated crash"));
        }
        let res = res
            .and_then(|()| rename_swap_in(&new, &tag, log))
            .and_then(|()| sync_dir(&dir));
        drop(files);
        if let Err(e) = res {
            self.fail(LogFailure::Refused {
                reason: format!(
                    "the cleaned segment {base} could not be switched in on storage ({e}); re-opening the log completes the switch from its files"
                ),
            });
            return Err(CleanStop::Io(e));
        }
        self.retire_group(group, &dir, &tag);
        Ok(())
    }

    /// Why the swap must not go on, if it must not: the cleaning was aborted (the log is
    /// closing, moving or failed), or the write gate refuses (this broker no longer owns the
    /// partition: the check appends use). Asked under the files lock, immediately before the
    /// cleaned files are renamed to their swap names (docs/compaction.md, "The swap, safe on
    /// NFS semantics", step 2; docs/cluster.md, Fencing point 3).
    fn swap_refusal(&self, ctx: &CleanCtx<'_>) -> Option<&'static str> {
        if (ctx.aborted)() || self.is_closed() || self.failure().is_some() {
            return Some("the log is closing, moving or failed");
        }
        // The ownership check appends use, immediately before the swap.
        if !(ctx.owns)() {
            return Some("this broker no longer owns the partition");
        }
        None
    }

    /// Step 3 of the module doc: under the writer lock (the only moment appends wait for the
    /// cleaner), replaces `group` by `new` (of `new_size` bytes) in the segment list, and
    /// moves the synced and published marks that lay in the group to its end ([`remap`]);
    /// readers see the old list or the new one. Only while the group is still in the list,
    /// whole, below the active segment, the cleaning was not aborted, the log not closed or
    /// moved, and the write gate lets this broker write (checked again here: docs/compaction.md,
    /// "Cluster mode"). False, changing nothing, otherwise.
    fn switch_segment_list(
        &self,
        ctx: &CleanCtx<'_>,
        group: &[Arc<Segment>],
        new: &Arc<Segment>,
        new_size: u64,
    ) -> bool {
        let base = new.base_offset;
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
        let live = !(ctx.aborted)() && !self.is_closed() && *self.dir.read() == new.dir;
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
    }

    /// Step 4 of the module doc, first half: renames each old segment of `group` aside to
    /// its `.<tag>.deleted` names (its `.log` first: `Segment::rename_deleted`), in order,
    /// asking the write gate before each, as before each of an opener's renames: a deposed
    /// broker stops after the one that may be in flight (an open that found the swap not
    /// begun removed it, and blocks that rename: `recover.rs`; docs/compaction.md,
    /// "Recovery"). Stops at the first failure.
    fn rename_group_aside(
        &self,
        ctx: &CleanCtx<'_>,
        group: &[Arc<Segment>],
        tag: &str,
    ) -> io::Result<()> {
        for g in group {
            if !(ctx.owns)() {
                return Err(io::Error::other("this broker no longer owns the partition"));
            }
            g.rename_deleted(Some(tag))?;
        }
        Ok(())
    }

    /// The old segments of `group`, renamed aside under `tag` in `dir`, go to the deferred
    /// deletion: unlinked after their last reader, retried with backoff, never fatal
    /// (ARCHITECTURE.md: a file is never unlinked while this process holds it open).
    fn retire_group(&self, group: &[Arc<Segment>], dir: &Path, tag: &str) {
        let now = crate::fsutil::now_ms();
        let retired: Vec<PendingSegment> = group
            .iter()
            .map(|g| {
                self.del.counters.added();
                PendingSegment {
                    seg: Some(g.clone()),
                    dir: dir.to_path_buf(),
                    base: g.base_offset,
                    renamed: true,
                    attempt: Attempt::default(),
                    tag: Some(tag.to_string()),
                }
            })
            .collect();
        self.pending.lock().extend(retired);
        self.reap_pending(now);
    }
}

/// Step 2 of the module doc: renames the finished cleaned segment's files from their
/// temporary names to the swap names of the switch tagged `tag` (index files first, the
/// `.log` last; a missing `.txnindex` is none), through the file cache, then fsyncs the
/// directory: from here on the swap is complete on storage and an open whose switch had
/// begun completes it (docs/compaction.md, "The swap, safe on NFS semantics"). No other
/// switch uses these names.
fn rename_to_swap(done: &Finished, tag: &str) -> io::Result<()> {
    let (dir, base) = (&done.cleaned.dir, done.cleaned.base);
    for kind in KINDS {
        done.seg
            .rename_kind(kind, &swap_path(dir, base, kind, Some(tag)), |from, to| {
                rename_kind(
                    kind,
                    from.unwrap_or(&cleaned_path(dir, base, kind, &done.cleaned.token)),
                    to,
                )
            })?;
    }
    sync_dir(dir)
}

/// Step 4 of the module doc, second half: renames the swap files of `kinds` (of the switch
/// tagged `tag`) into the freed segment names of `new`, through the file cache, in order,
/// stopping at the first failure. Called for the index files, then for the `.log`: once the
/// `.log` is in, the cleaned segment stands under its name.
fn rename_swap_in(new: &Segment, tag: &str, kinds: &[SegmentFileKind]) -> io::Result<()> {
    let (dir, base) = (&new.dir, new.base_offset);
    for &kind in kinds {
        new.rename_kind(kind, &seg_path(dir, base, kind), |from, to| {
            rename_kind(
                kind,
                from.unwrap_or(&swap_path(dir, base, kind, Some(tag))),
                to,
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use bytes::Bytes;
    use sluice_format::BatchBuilder;

    use super::*;
    use crate::segment::deleted_path;
    use crate::tests::{cfg, NOW};
    use crate::{AppendOrigin, LogConfig, LogManager, MetaProperties, TopicPartition};

    const TAG: &str = "0-0123456789ab";

    #[test]
    fn the_cleaned_files_become_swap_files_then_segment_files_the_log_last() {
        use SegmentFileKind as K;
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        let mut cleaned = Cleaned::create(dir, 0, "tok", 4096).unwrap();
        let batch = BatchBuilder::new()
            .record(NOW, Some(b"k"), Some(b"v"))
            .build();
        let h = BatchHeader::decode(&batch).unwrap();
        cleaned.append(&batch, &h, 4096).unwrap();
        let done = cleaned
            .finish(h.next_offset(), NOW, NOW, Vec::new())
            .unwrap();
        rename_to_swap(&done, TAG).unwrap();
        for kind in [K::Log, K::Index, K::TimeIndex] {
            assert!(!cleaned_path(dir, 0, kind, "tok").exists(), "{kind:?}");
            assert!(swap_path(dir, 0, kind, Some(TAG)).exists(), "{kind:?}");
        }
        // No aborted transaction kept: no `.txnindex`, and its absence is no error.
        assert!(!swap_path(dir, 0, K::TxnIndex, Some(TAG)).exists());
        let new = done.seg;
        let (indexes, log) = KINDS.split_at(KINDS.len() - 1);
        assert_eq!(log, [K::Log]);
        rename_swap_in(&new, TAG, indexes).unwrap();
        assert!(seg_path(dir, 0, K::Index).exists() && seg_path(dir, 0, K::TimeIndex).exists());
        assert!(
            !seg_path(dir, 0, K::Log).exists(),
            "the .log is renamed in last"
        );
        rename_swap_in(&new, TAG, log).unwrap();
        assert_eq!(std::fs::read(seg_path(dir, 0, K::Log)).unwrap(), batch);
        assert!(!swap_path(dir, 0, K::Log, Some(TAG)).exists());
    }

    #[test]
    fn a_refused_gate_stops_the_renames_aside_at_the_next_segment() {
        let d = tempfile::tempdir().unwrap();
        let m = LogManager::open(
            vec![d.path().to_path_buf()],
            MetaProperties {
                node_id: 1,
                cluster_id: "test-cluster-id-00000A".into(),
            },
        )
        .unwrap();
        let tp = TopicPartition {
            topic: "compacted".into(),
            partition: 0,
        };
        let config = LogConfig {
            segment_bytes: 1000,
            ..cfg()
        };
        let log = m
            .open_log(&tp, uuid::Uuid::from_u128(7), config, 1)
            .unwrap();
        for i in 0..60 {
            let value = format!("v{i}-{}", "x".repeat(40));
            let b = BatchBuilder::new().record(NOW, Some(b"k"), Some(value.as_bytes()));
            log.append(Bytes::from(b.build()), AppendOrigin::Client, NOW)
                .unwrap();
        }
        let segments = log.shared.read().segments.clone();
        assert!(segments.len() >= 3, "{} segments", segments.len());
        let group = &segments[..2];
        let at_name = |g: &Arc<Segment>| seg_path(&g.dir, g.base_offset, SegmentFileKind::Log);
        let aside =
            |g: &Arc<Segment>| deleted_path(&g.dir, g.base_offset, SegmentFileKind::Log, Some(TAG));
        let mut map = super::super::OffsetMap::new(1 << 16, 0.9);
        let throttle = super::super::clean::Throttle::new(f64::MAX);
        let asked = AtomicUsize::new(0);
        // The gate lets the first rename aside through, and refuses from then on.
        let owns = || asked.fetch_add(1, Ordering::SeqCst) == 0;
        let ctx = CleanCtx {
            first_dirty: 0,
            now_ms: NOW,
            map: &mut map,
            throttle: &throttle,
            aborted: &|| false,
            owns: &owns,
            token: "tok",
            io_buffer_bytes: 4096,
            max_decompressed: 1 << 20,
            crash_at: None,
        };
        let err = log.rename_group_aside(&ctx, group, TAG).unwrap_err();
        assert!(err.to_string().contains("no longer owns"), "{err}");
        assert!(!at_name(&group[0]).exists() && aside(&group[0]).exists());
        assert!(
            at_name(&group[1]).exists() && !aside(&group[1]).exists(),
            "renamed aside after the gate refused"
        );
        assert_eq!(asked.load(Ordering::SeqCst), 2);
    }
}

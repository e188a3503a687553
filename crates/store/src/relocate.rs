//! Moving a partition's log to another log directory of this broker (AlterReplicaLogDirs).
//!
//! The files are copied (the directories may be on different file systems) into
//! `<target>/<topic>-<partition>.<id>-future` while the log keeps serving: first without any
//! lock, then the remainder under the writer lock, where the copy is fsynced, renamed to
//! `<target>/<topic>-<partition>` and the log switched to the new files. The old directory is
//! then removed by the deferred-deletion rules (after its last reader, retried on failure).
//!
//! Between the copy taking the final name and the old directory's rename out of the way, the
//! partition is in two log dirs. Before the final name is taken, the old directory gets a
//! durable [`MOVED_MARKER`] naming the copy: a start that finds both serves the one named
//! and deletes the old one ([`superseded`]; docs/log-format.md, "Deletion").

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use sluice_format::text::format_partition_metadata;
use sluice_format::SegmentFileKind;

use crate::fsutil::{sync_dir, write_atomic};
use crate::log::Writer;
use crate::log::PARTITION_METADATA;
use crate::segment::{seg_path, PendingSegment, Segment, SEGMENT_KINDS};
use crate::Log;

const COPY_CHUNK: usize = 1024 * 1024;

/// The file a move leaves in the old directory, durably, before its copy takes the final
/// name: this copy is the old one whenever another copy exists. It holds the new directory's
/// path, for the operator.
pub(crate) const MOVED_MARKER: &str = "moved-to";

/// True if `dir` carries a move's mark.
#[cfg(test)]
pub(crate) fn is_marked_moved(dir: &Path) -> bool {
    dir.join(MOVED_MARKER).exists()
}

/// True if `dir` is the old copy of a move that published its new one: its mark names
/// another directory that holds a copy of the same topic id. A mark naming nothing (the move
/// failed or crashed before its copy took the name, or that copy was deleted since) or a copy
/// of another incarnation of the topic does not make `dir` old.
pub(crate) fn superseded(dir: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(dir.join(MOVED_MARKER)) else {
        return false;
    };
    let target = PathBuf::from(text.trim_end_matches('\n'));
    let id = crate::manager::dir_topic_id(dir);
    target != dir && target.is_dir() && id.is_some() && crate::manager::dir_topic_id(&target) == id
}

/// Marks `old_dir` durably as the old copy of a move to `final_dir`.
fn mark_moved(old_dir: &Path, final_dir: &Path) -> io::Result<()> {
    write_atomic(
        &old_dir.join(MOVED_MARKER),
        format!("{}\n", final_dir.display()).as_bytes(),
    )
}

/// Takes the mark off `old_dir` (its move failed before its copy took the final name),
/// durably; a failure is logged: a marked copy alone is served all the same.
fn unmark_moved(old_dir: &Path) {
    let removed = match std::fs::remove_file(old_dir.join(MOVED_MARKER)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => sync_dir(old_dir),
    };
    if let Err(e) = removed {
        tracing::warn!(dir = %old_dir.display(), error = %e, "could not remove a failed move's marker");
    }
}

/// Where a test stops a move as if the process died there.
#[cfg(test)]
pub(crate) mod crash {
    use std::cell::Cell;

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub(crate) enum At {
        Nowhere,
        /// The old directory is marked; the copy has not taken the final name.
        BeforePublish,
        /// The log switched to the new copy; the old directory is still under its name.
        AfterSwitch,
        /// Not a crash: opening the published copy fails.
        OpenFails,
    }

    thread_local! {
        pub(crate) static AT: Cell<At> = const { Cell::new(At::Nowhere) };
    }

    pub(crate) fn here(at: At) -> bool {
        AT.with(|c| c.get()) == at
    }
}

/// What a move leaves behind: the old directory and what of it readers may still hold.
#[derive(Debug)]
pub(crate) struct Retired {
    pub old_dir: PathBuf,
    pub segments: Vec<Arc<Segment>>,
    pub pending: Vec<PendingSegment>,
}

/// Copy `src[from..len]` to the same range of `dst` (created if missing).
fn copy_range(src: &File, dst: &Path, from: u64, len: u64) -> io::Result<()> {
    let out = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(dst)?;
    out.set_len(from)?;
    let mut buf = vec![0u8; COPY_CHUNK];
    let mut pos = from;
    while pos < len {
        let n = usize::try_from(len - pos)
            .unwrap_or(usize::MAX)
            .min(COPY_CHUNK);
        src.read_exact_at(&mut buf[..n], pos)?;
        out.write_all_at(&buf[..n], pos)?;
        pos += n as u64;
    }
    out.sync_all()
}

/// Copy one segment's files; `log_from` bytes of the `.log` are already there.
fn copy_segment(seg: &Segment, dir: &Path, log_from: u64, log_len: u64) -> io::Result<()> {
    let base = seg.base_offset;
    copy_range(
        &*seg.log.get()?,
        &seg_path(dir, base, SegmentFileKind::Log),
        log_from,
        log_len,
    )?;
    for (file, kind) in [
        (&seg.index_file, SegmentFileKind::Index),
        (&seg.time_file, SegmentFileKind::TimeIndex),
    ] {
        let file = file.get()?;
        let len = file.metadata()?.len();
        copy_range(&file, &seg_path(dir, base, kind), 0, len)?;
    }
    // The transaction index, if the segment has one (written under the writer lock, which
    // the last copy holds).
    let txn = seg.txn.lock().file.as_ref().map(|f| f.get()).transpose()?;
    let txn = match txn {
        Some(f) => Some(f),
        None => crate::txn::open_existing(&seg.dir, base)?.map(Arc::new),
    };
    if let Some(f) = txn {
        let len = f.metadata()?.len();
        copy_range(&f, &seg_path(dir, base, SegmentFileKind::TxnIndex), 0, len)?;
    }
    Ok(())
}

/// Removes from the copy in `future` the files of the segments based at `bases`: those the
/// first copy took that retention deleted before the writer lock was taken, so that the copy
/// holds exactly the segments the log holds. A file already missing is no error.
pub(crate) fn remove_copies<'a>(
    future: &Path,
    bases: impl IntoIterator<Item = &'a i64>,
) -> io::Result<()> {
    for base in bases {
        for kind in SEGMENT_KINDS {
            match std::fs::remove_file(seg_path(future, *base, kind)) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// Makes the complete copy in `future` the partition's directory `final_dir`, durably:
/// `partition.metadata` naming `topic_id` written, the copy's directory fsynced, then
/// renamed to `final_dir` (refused if that exists: nothing there is replaced) and the
/// parent fsynced; `gate` (the write gate) is asked right before the rename. Once it returns
/// Ok, the new copy is complete and survives a crash.
pub(crate) fn publish_copy(
    future: &Path,
    final_dir: &Path,
    topic_id: uuid::Uuid,
    gate: impl Fn() -> io::Result<()>,
) -> io::Result<()> {
    write_atomic(
        &future.join(PARTITION_METADATA),
        format_partition_metadata(topic_id.as_bytes()).as_bytes(),
    )?;
    sync_dir(future)?;
    // The fsyncs above may take long on a network volume: the gate again, just before the
    // copy takes the partition's name.
    gate()?;
    if final_dir.exists() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} already exists", final_dir.display()),
        ));
    }
    std::fs::rename(future, final_dir)?;
    if let Some(parent) = final_dir.parent() {
        sync_dir(parent)?;
    }
    Ok(())
}

/// After a failed [`publish_copy`]: a copy that took the final name goes back to `future`
/// (for the caller to delete), so that the old copy, unmarked, stays the only one. If it
/// cannot, the two copies stay unmarked and a start refuses to choose between them.
fn withdraw_copy(future: &Path, final_dir: &Path) {
    if future.exists() || !final_dir.exists() {
        return;
    }
    // Durably before the mark comes off.
    let withdrawn =
        std::fs::rename(final_dir, future).and_then(|()| future.parent().map_or(Ok(()), sync_dir));
    if let Err(e) = withdrawn {
        tracing::error!(dir = %final_dir.display(), error = %e,
            "a failed move's copy could not be put aside; the partition is in two log dirs until one is removed");
    }
}

impl Log {
    /// Copy this log to `future` (a fresh directory), then under the writer lock finish the
    /// copy, rename it to `final_dir` and switch to it. Returns what the old directory still
    /// holds; the caller schedules its removal. On error nothing is switched (the caller
    /// removes `future`).
    pub(crate) fn copy_and_switch(&self, future: &Path, final_dir: &Path) -> io::Result<Retired> {
        std::fs::create_dir_all(future)?;
        let copied = self.copy_visible(future)?;
        // Writer lock: appends, rolls and retention wait until the switch is done.
        let w = self.writer.lock();
        if self.deleted.load(std::sync::atomic::Ordering::Acquire) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "the log was deleted or closed during the move",
            ));
        }
        let segs = self.copy_rest(future, copied)?;
        // The mark goes into the partition's own directory: through the write gate.
        let old_dir = self.dir();
        self.gate_io()?;
        mark_moved(&old_dir, final_dir)?;
        #[cfg(test)]
        if crash::here(crash::At::BeforePublish) {
            return Err(io::Error::other(
                "test crash before the copy takes the final name",
            ));
        }
        // A broker fenced meanwhile publishes nothing, and leaves the mark: a marked copy
        // alone is served as any other.
        self.gate_io()?;
        // Once published, the new copy is complete and durable; it is opened, and the log
        // switched to it. Should the publish or the open fail, the log stays where it is and
        // takes appends there: the copy goes back to `future` and the mark comes off, so that
        // a start never prefers the copy left behind.
        let published =
            publish_copy(future, final_dir, self.topic_id, || self.gate_io()).and_then(|()| {
                #[cfg(test)]
                if crash::here(crash::At::OpenFails) {
                    return Err(io::Error::other(
                        "test: the published copy cannot be opened",
                    ));
                }
                self.reopen_in(&segs, final_dir)
            });
        let new_segs = match published {
            Ok(s) => s,
            Err(e) => {
                // A broker fenced meanwhile touches neither: the copy under the final name
                // may be what a new owner opened since, and the mark names it.
                if self.gate_io().is_ok() {
                    withdraw_copy(future, final_dir);
                    unmark_moved(&old_dir);
                }
                return Err(e);
            }
        };
        let old_dir = self.switch_to(&w, final_dir, new_segs);
        Ok(Retired {
            old_dir,
            segments: segs.iter().cloned().collect(),
            pending: self.take_pending(),
        })
    }

    /// Phase 1 of a move, with no lock held (appends and reads go on): copies every segment
    /// as far as it is visible now. Returns how many bytes of each segment's `.log` were
    /// copied, by base offset, for [`Log::copy_rest`] to go on from.
    fn copy_visible(&self, future: &Path) -> io::Result<HashMap<i64, u64>> {
        let mut copied: HashMap<i64, u64> = HashMap::new();
        let (segs, active_size) = {
            let s = self.shared.read();
            (s.segments.clone(), s.active_size)
        };
        let n = segs.len();
        for (i, seg) in segs.iter().enumerate() {
            let len = if i + 1 == n { active_size } else { seg.size() };
            copy_segment(seg, future, 0, len)?;
            copied.insert(seg.base_offset, len);
        }
        Ok(copied)
    }

    /// Phase 2 of a move, under the writer lock (nothing is appended, rolled or deleted
    /// meanwhile): copies what was appended since [`Log::copy_visible`] (and every segment's
    /// index files again) and removes the copies of segments deleted since. Returns the
    /// segments the copy now holds exactly.
    fn copy_rest(
        &self,
        future: &Path,
        mut copied: HashMap<i64, u64>,
    ) -> io::Result<Arc<Vec<Arc<Segment>>>> {
        let (segs, active_size) = {
            let s = self.shared.read();
            (s.segments.clone(), s.active_size)
        };
        let n = segs.len();
        for (i, seg) in segs.iter().enumerate() {
            let len = if i + 1 == n { active_size } else { seg.size() };
            let from = copied.remove(&seg.base_offset).unwrap_or(0).min(len);
            copy_segment(seg, future, from, len)?;
        }
        // Segments deleted by retention meanwhile.
        remove_copies(future, copied.keys())?;
        Ok(segs)
    }

    /// The segments `segs` opened again in `final_dir`. Each old segment's aborted
    /// transactions are read into memory first (an open loads a sealed segment's
    /// `.txnindex` on first use): a read_committed fetch in flight on the old segments finds
    /// them there, never by a name in the old directory, which is renamed away after the
    /// switch; the new segments take them over.
    fn reopen_in(&self, segs: &[Arc<Segment>], final_dir: &Path) -> io::Result<Vec<Arc<Segment>>> {
        let mut new_segs = Vec::with_capacity(segs.len());
        for seg in segs.iter() {
            if let Err(e) = seg.aborted_txns() {
                // A damaged one is rebuilt from the log by its first reader, as before.
                tracing::debug!(tp = ?self.tp, segment = seg.base_offset, error = %e,
                    "transaction index not loaded before the move");
            }
            new_segs.push(Arc::new(seg.reopen_in(final_dir)?));
        }
        Ok(new_segs)
    }

    /// Switches the log, under the writer lock `w`, to `new_segs` in `final_dir`: the spare
    /// and the leader epochs go along, readers see the new segments and directory at once,
    /// the recorded recovery point and the drop point start over, and a producer snapshot of
    /// the state as of now is written there and made durable (the old directory's stay
    /// behind). Returns the old directory.
    fn switch_to(&self, w: &Writer, final_dir: &Path, new_segs: Vec<Arc<Segment>>) -> PathBuf {
        // A spare made in the old directory goes with it.
        self.drop_spare();
        let moved = {
            let _turn = self.epoch_file.lock();
            self.epochs.lock().move_to(final_dir)
        };
        if let Err(e) = moved {
            // Derived data (rebuilt from batch headers when missing); not worth failing for.
            tracing::warn!(tp = ?self.tp, error = %e, "could not write leader-epoch-checkpoint after move");
        }
        let (old_dir, leo) = {
            let mut s = self.shared.write();
            s.segments = Arc::new(new_segs);
            let mut d = self.dir.write();
            (std::mem::replace(&mut *d, final_dir.to_path_buf()), s.leo)
        };
        // The new log dir's checkpoint has no recovery point for it until its next write.
        self.reset_recorded_recovery_point(i64::MIN);
        // The drop point starts over in the new dir: everything there is undropped.
        self.keep_cache_work();
        // The old directory's producer snapshots stay behind; the state as of now replaces them.
        self.write_producer_snapshot(w, leo, None);
        if let Err(e) = self.make_snapshots_durable() {
            // The move is done; the log is failed (a failed fsync) and re-opens from the copy.
            tracing::warn!(tp = ?self.tp, error = %e, "could not make the moved log's producer snapshot durable");
        }
        old_dir
    }
}

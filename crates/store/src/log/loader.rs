//! Opening a log: reading its directory, recovering what a crash, a failed write or a former
//! owner left (docs/log-format.md, "Recovery invariants"; docs/cluster.md, fencing), and
//! rebuilding the derived state (indexes, leader epochs, producer state). Kept apart from the
//! running log, as Kafka keeps its LogLoader apart: a restart and a cluster takeover both
//! come through here.

use std::path::Path;

use super::*;
use crate::segment::{Rebuilt, ScanStart};
use sluice_format::txn::{is_txn_marker, TxnIndexEntry, CONTROL_ABORT};

impl Log {
    /// Opens the log in `p.dir`; a restart and a cluster takeover both come through here. The
    /// steps run in the order of the recovery invariants (docs/log-format.md, "Recovery
    /// invariants"; in a shared directory the fencing points of docs/cluster.md): read the
    /// directory, load the segments (validate what lies past the recovery point and cut its
    /// damage, load the rest), settle the log's ends and make what was recovered durable,
    /// rebuild the producer and transaction state, then start the log. Every write an open
    /// makes passes the write gate first (`may_write`): a deposed opener writes nothing.
    ///
    /// The silly-renamed files (`.nfs*`, `.fuse_hidden*`) its listing of the directory shows
    /// are added to `leftovers`, for the manager to reclaim.
    pub(crate) fn open(p: OpenParams, leftovers: &mut Vec<PathBuf>) -> Result<Log, StoreError> {
        let opened_at = std::time::Instant::now();
        let created_dir = stamp_dir(&p)?;
        let bases = list_segments(&p, leftovers)?;
        let mut o = Opening::new(p, bases)?;
        o.load_segments()?;
        o.replace_emptied_last()?;
        let ends = o.settle_ends(created_dir)?;
        if o.p.shared {
            remove_foreign_snapshots(&o.p, &o.segments)?;
        }
        let mut replay = o.replay_producer_state(&ends)?;
        o.rebuild_txn_indexes(&ends, &mut replay)?;
        o.into_log(ends, replay, opened_at)
    }
}

/// How a [`StoreError`] names an I/O failure in the log's directory.
fn serr(dir: &Path) -> impl Fn(io::Error) -> StoreError {
    let dir = dir.to_path_buf();
    move |source| StoreError::Io {
        path: dir.clone(),
        source,
    }
}

/// Creates the partition's directory if it is new and checks (or writes) its
/// `partition.metadata`: a directory of another topic with the same name is never opened as
/// this one's. Returns whether the directory was created (its entry is fsynced later).
fn stamp_dir(p: &OpenParams) -> Result<bool, StoreError> {
    let serr = serr(&p.dir);
    let created_dir = match std::fs::symlink_metadata(&p.dir) {
        Ok(_) => false,
        Err(e) if e.kind() == io::ErrorKind::NotFound => true,
        Err(e) => return Err(serr(e)),
    };
    may_write(p, "creating or stamping the directory")?;
    if created_dir {
        // Only then: on an open of an existing partition (every one at a start) the
        // `mkdir` and the `stat` after its EEXIST were two of its path lookups.
        std::fs::create_dir_all(&p.dir).map_err(&serr)?;
    }
    let md_path = p.dir.join(PARTITION_METADATA);
    let rewrite = || {
        write_atomic(
            &md_path,
            format_partition_metadata(p.topic_id.as_bytes()).as_bytes(),
        )
        .map_err(&serr)
    };
    match std::fs::read_to_string(&md_path) {
        Ok(text) => match parse_partition_metadata(&text) {
            Ok(id) if id == *p.topic_id.as_bytes() => {}
            Ok(id) => {
                return Err(StoreError::Invalid {
                    path: p.dir.clone(),
                    reason: format!(
                        "partition.metadata has topic id {} but {} was expected",
                        uuid::Uuid::from_bytes(id),
                        p.topic_id
                    ),
                })
            }
            Err(e) => {
                tracing::warn!(path = %md_path.display(), error = %e, "rewriting unreadable partition.metadata");
                rewrite()?;
            }
        },
        Err(e) if e.kind() == io::ErrorKind::NotFound => rewrite()?,
        Err(e) => return Err(serr(e)),
    }
    Ok(created_dir)
}

/// The bases of the directory's segments, in order, once what a cleaning cut short was
/// completed or undone (`cleaner::recover`) and what a deletion or a roll left behind was
/// removed; a listing older than the owner record's newest segment is refused (a lagging NFS
/// view, tried again). In a shared directory an empty last segment gets new files (a former
/// owner may still hold it open). The directory is listed once here, and once more only if
/// the cleaner's leftovers changed it (an open listed it four to five times); the
/// silly-renamed files listed go to `leftovers`.
fn list_segments(p: &OpenParams, leftovers: &mut Vec<PathBuf>) -> Result<Vec<i64>, StoreError> {
    let serr = serr(&p.dir);
    let list = || -> io::Result<Vec<std::fs::DirEntry>> { std::fs::read_dir(&p.dir)?.collect() };
    let mut listing = list().map_err(&serr)?;
    if crate::cleaner::recover::complete_swaps(&p.dir, &p.tp, p.shared, p.switch, &listing)
        .map_err(&serr)?
    {
        listing = list().map_err(&serr)?;
    }
    let mut bases = Vec::new();
    for entry in listing {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if crate::deferred::is_silly_renamed(name) {
            if entry.file_type().is_ok_and(|t| t.is_file()) {
                leftovers.push(entry.path());
            }
            continue;
        }
        if name.ends_with(DELETED_SUFFIX) {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                // A name a cleaner switch must never take (`cleaner::recover`): it stays,
                // as that switch's rename may land at any time.
                continue;
            }
            // Left over from a deletion that did not finish; nothing can hold it now.
            if let Err(e) = std::fs::remove_file(entry.path()) {
                tracing::warn!(file = %entry.path().display(), error = %e, "could not remove deleted file");
            }
            continue;
        }
        if name == crate::relocate::MOVED_MARKER {
            // A move's mark on the copy opened: this copy is the partition's now (the move
            // failed or crashed before its copy took the name, or that copy is gone), so the
            // mark comes off, lest a copy appearing later under the name it gives (a former
            // owner's stalled move) be taken for the newer one.
            may_write(p, "removing a move's mark")?;
            if let Err(e) = std::fs::remove_file(entry.path()).and_then(|()| sync_dir(&p.dir)) {
                tracing::warn!(file = %entry.path().display(), error = %e, "could not remove a move's mark");
            }
            continue;
        }
        if name.ends_with(crate::segment::SPARE_SUFFIX) {
            // Made ahead of a roll that did not come (by this broker before a restart, or
            // by a former owner of a shared directory).
            if let Err(e) = std::fs::remove_file(entry.path()) {
                tracing::warn!(file = %entry.path().display(), error = %e, "could not remove a spare segment file");
            }
            continue;
        }
        if let Some((base, SegmentFileKind::Log)) = parse_segment_file_name(name) {
            bases.push(base);
        }
    }
    bases.sort_unstable();
    check_listing_is_current(p, &bases)?;
    if p.shared {
        replace_empty_last(p, &bases)?;
    }
    Ok(bases)
}

/// In a shared directory, an empty last segment may be the active segment of a former owner
/// that still holds it open, with a write that passed its write gate and stalled: appended to
/// by this owner, that write would land over this owner's batches. It holds no data; its
/// files are replaced by new ones of this owner's (on NFS the former owner's write then fails
/// as stale; elsewhere it goes to the unlinked file). docs/cluster.md, fencing.
fn replace_empty_last(p: &OpenParams, bases: &[i64]) -> Result<(), StoreError> {
    let Some(&last) = bases.last() else {
        return Ok(());
    };
    let serr = serr(&p.dir);
    let path = seg_path(&p.dir, last, SegmentFileKind::Log);
    // Its length as an open reports it, never a stat by name: a lagging NFS view answers
    // that from its attribute cache, and the segment the previous owner filled with
    // acknowledged batches since looks empty (seed 75).
    if crate::fsutil::len_at_open(&path).map_err(&serr)? == Some(0) {
        tracing::info!(tp = ?p.tp, segment = last, "replacing the files of an empty last segment left by the previous owner");
        let check = || may_write_io(p, "replacing an empty last segment");
        replace_with_new_empty_files(&p.dir, last, p.leader_epoch, &check).map_err(&serr)?;
    }
    Ok(())
}

/// What an open has read and decided so far (`Log::open`), handed from step to step.
struct Opening {
    p: OpenParams,
    /// `index.interval.bytes`.
    interval: u64,
    /// The recovery point the open was given (`i64::MIN` without one).
    rp_cp: i64,
    /// The segments still to load (and those loaded), in order; steps put strays aside and
    /// continue the log past damage by changing it.
    bases: Vec<i64>,
    /// Index in `bases` of the first segment to recover: the one holding the recovery point
    /// (`bases.len()` after a clean shutdown).
    first_recover: usize,
    /// The sealed segments below the recovery point, taken unopened and unread: their files
    /// are opened and checked on first use (`Segment::unopened`).
    unopened: HashMap<i64, Segment>,
    /// In a shared directory, the sealed segments below this bound are the ones the previous
    /// owner's record vouches for (`crate::sealed`).
    trusted_below: i64,
    epochs: EpochCache,
    /// Whether `epochs` changed from what `leader-epoch-checkpoint` holds.
    epochs_dirty: bool,
    segments: Vec<Arc<Segment>>,
    cursor: IndexCursor,
    /// The base of a segment that held bytes and that recovery cut to none.
    cut_to_empty: Option<i64>,
    recovered_any: bool,
    recovered_bytes: u64,
    /// The recovery point, when recovery validated only what lies past it in the segment
    /// holding it (`Segment::resume_point`).
    resumed_at: Option<i64>,
}

/// What a segment's loading step leaves the loop over the segments to do.
enum Next {
    /// Load the next segment.
    Advance,
    /// Load the segment at the same position again: `bases` changed there.
    Again,
    /// The log ends in this segment.
    Stop,
}

/// Where the loaded log begins and ends, and what of it an open recovered.
struct Ends {
    leo: i64,
    log_start: i64,
    /// The recovery point the log starts with (its end, after a recovery made it durable).
    recovery_point: i64,
    /// What the next open after a crash would be given until this one's is recorded.
    recorded_recovery_point: i64,
    /// The first segment this open recovered (None after a clean shutdown): what lies from
    /// there on may be only partly on storage, index files and snapshots included.
    recovered_from: Option<i64>,
}

/// The producer and transaction state rebuilt from a snapshot and the batches after it.
struct ProducerReplay {
    state: ReplayState,
    /// Segments whose replay stopped at a batch it could not read: what was computed of
    /// them is incomplete.
    scan_stopped: std::collections::HashSet<i64>,
    /// The loaded snapshot's offset (`i64::MIN` without one): the replay is exact from here.
    snap_offset: i64,
    /// The loaded snapshot's CRC (0 without one).
    snap_crc: u32,
    /// Index of the first segment the replay read.
    from: usize,
    /// Whether no snapshot was loaded and the replay began before the recent segments.
    rebuilt_from_start: bool,
}

impl Opening {
    /// Loads the leader epochs and decides which segments are recovered, which are taken
    /// unread (below the recovery point) and, in a shared directory, which the previous
    /// owner's record vouches for.
    fn new(p: OpenParams, bases: Vec<i64>) -> Result<Opening, StoreError> {
        let serr = serr(&p.dir);
        let mut epochs = EpochCache::load(&p.dir);
        let rp_cp = p.recovery_point.unwrap_or(i64::MIN);
        // The segment containing the recovery point and those after it, when the shutdown
        // was not clean.
        let first_recover = if p.clean {
            bases.len()
        } else {
            bases.iter().rposition(|b| *b <= rp_cp).unwrap_or(0)
        };
        // One whose index file is missing is opened in the loop and its indexes rebuilt.
        let mut unopened = HashMap::new();
        for (k, &base) in bases.iter().enumerate() {
            if k + 1 < bases.len() && (p.clean || k < first_recover) {
                if let Some(seg) = Segment::unopened(&p.dir, base, p.now_ms).map_err(&serr)? {
                    unopened.insert(base, seg);
                }
            }
        }
        // Their tails, a stray among them and their first batches' epochs are not read.
        // Those at or past this bound are checked as before.
        let trusted_below = trusted_bound(&p, &bases, &unopened).map_err(&serr)?;
        let mut epochs_dirty = false;
        if trusted_below > i64::MIN {
            epochs_dirty |=
                epochs_past_checkpoint(&mut epochs, &p.dir, &bases, &unopened, trusted_below);
        }
        Ok(Opening {
            interval: u64::from(p.config.index_interval_bytes),
            rp_cp,
            segments: Vec::with_capacity(bases.len()),
            bases,
            first_recover,
            unopened,
            trusted_below,
            epochs,
            epochs_dirty,
            cursor: IndexCursor::new(0),
            cut_to_empty: None,
            recovered_any: false,
            recovered_bytes: 0,
            resumed_at: None,
            p,
        })
    }

    /// Loads the listed segments in order: those from the recovery point on after a crash
    /// validated batch by batch (`recover_segment`), the active segment of a clean shutdown
    /// from its indexes (`load_clean_active`), the sealed ones below the recovery point
    /// unread (`load_sealed`).
    fn load_segments(&mut self) -> Result<(), StoreError> {
        let mut i = 0;
        while i < self.bases.len() {
            let base = self.bases[i];
            let (seg, existed) = match self.unopened.remove(&base) {
                Some(seg) => (seg, true),
                None => Segment::open_files(&self.p.dir, base, self.p.now_ms)
                    .map_err(serr(&self.p.dir))?,
            };
            let next = if !self.p.clean && i >= self.first_recover {
                self.recover_segment(i, seg, existed)?
            } else if i + 1 == self.bases.len() {
                self.load_clean_active(seg, existed)?
            } else {
                self.load_sealed(i, seg, existed)?
            };
            match next {
                Next::Advance => i += 1,
                Next::Again => {}
                Next::Stop => break,
            }
        }
        Ok(())
    }

    /// A segment at or past the recovery point after a crash: every batch of what storage
    /// holds validated, what follows the first invalid one cut (and in a shared directory a
    /// former owner's batches past the next segment's base: docs/cluster.md, fencing), the
    /// indexes rebuilt from the batches. No byte past a valid batch is ever served.
    fn recover_segment(
        &mut self,
        i: usize,
        seg: Segment,
        existed: bool,
    ) -> Result<Next, StoreError> {
        let base = self.bases[i];
        // A segment ends where the next begins.
        let next_base = self.bases.get(i + 1).copied().unwrap_or(i64::MAX);
        let file_size = seg.size();
        // Pages the kernel kept after failing to write them (a failed fsync before a
        // re-open) are advised out first. Dirty pages stay (the kernel may still write them).
        if let Err(e) = rustix::fs::fadvise(
            &*seg.log.get().map_err(serr(&self.p.dir))?,
            0,
            None,
            rustix::fs::Advice::DontNeed,
        ) {
            tracing::debug!(tp = ?self.p.tp, segment = base, error = %e, "could not advise a segment out of the page cache before recovery");
        }
        self.recovered_any = true;
        let (r, from_pos) = self.validate(i, &seg, existed, file_size, next_base)?;
        self.recovered_bytes += file_size - from_pos;
        may_write(&self.p, "cutting a recovered segment")?;
        if let Some(pos) = r.overlapped.filter(|_| self.p.shared) {
            if self.put_aside_if_stray(i, &seg, pos, file_size, next_base)? {
                return Ok(Next::Again);
            }
        }
        let (stopped, continued) = self.remove_after_damage(i, &r, next_base)?;
        let continued_at = continued.as_ref().and_then(|c| c.first().copied());
        if let Some(made) = continued.as_ref().filter(|_| continued_at == Some(base)) {
            // The damaged segment kept nothing and now holds the batch that continues the
            // log, in new files: opened again from them.
            drop(seg);
            self.bases.truncate(i + 1);
            self.bases.extend_from_slice(&made[1..]);
            return Ok(Next::Again);
        }
        self.install_recovered(seg, r, file_size, from_pos)?;
        if let Some(made) = continued {
            // Then the segments that continue the log, recovered as the last ones.
            self.bases.truncate(i + 1);
            self.bases.extend(made);
            return Ok(Next::Advance);
        }
        Ok(if stopped { Next::Stop } else { Next::Advance })
    }

    /// Validates a recovered segment's batches: from the recovery point when this segment
    /// holds it and its index files say where it lies (`Segment::resume_point`: what lies
    /// below was durable, index entries included, when the recovery point was recorded, and
    /// no rewrite ever empties them first), else from its start. The scan from the recovery
    /// point must reach it at a batch boundary, or the whole segment is validated. Returns
    /// the scan and the position validation began at.
    fn validate(
        &mut self,
        i: usize,
        seg: &Segment,
        existed: bool,
        file_size: u64,
        next_base: i64,
    ) -> Result<(Rebuilt, u64), StoreError> {
        let serr = serr(&self.p.dir);
        let rp = self.rp_cp;
        let resume = (i == self.first_recover && existed)
            .then(|| resume_from(&self.p, seg, rp, file_size))
            .flatten();
        let Some(start) = resume else {
            return Ok((self.validate_whole(seg, file_size, next_base)?, 0));
        };
        let pos = start.pos;
        // What the epochs were before the resumed scan, for a fallback to start from.
        let before = (self.epochs.clone(), self.epochs_dirty);
        // The epochs of the batches below the resume position, from the first and last of
        // them (all their headers when those differ), as for a trusted sealed segment:
        // `leader-epoch-checkpoint` may lack one (a failed write, or in a shared directory a
        // former owner's late rewrite).
        let last_from = start
            .offset_index
            .iter()
            .rev()
            .nth(1)
            .map_or(0, |e| e.position as u64);
        {
            let file = seg.log.get().map_err(&serr)?;
            self.epochs_dirty |= assign_epochs_of(&mut self.epochs, &file, pos, last_from);
        }
        let reached = std::cell::Cell::new(false);
        let (epochs, dirty) = (&mut self.epochs, &mut self.epochs_dirty);
        let r = seg
            .scan_rebuild_from(start, file_size, self.interval, true, next_base, |h| {
                reached.set(reached.get() || h.next_offset() == rp);
                *dirty |= epochs.assign(h.partition_leader_epoch, h.base_offset);
            })
            .map_err(&serr)?;
        if reached.get() {
            self.resumed_at = Some(rp);
            return Ok((r, pos));
        }
        tracing::warn!(tp = ?self.p.tp, segment = seg.base_offset, recovery_point = rp, position = pos,
            "the data after the index entry below the recovery point does not lead to it; validating the whole segment");
        (self.epochs, self.epochs_dirty) = before;
        Ok((self.validate_whole(seg, file_size, next_base)?, 0))
    }

    /// Validates every batch of a segment from its start, the epochs of its batches noted.
    fn validate_whole(
        &mut self,
        seg: &Segment,
        file_size: u64,
        next_base: i64,
    ) -> Result<Rebuilt, StoreError> {
        let (epochs, dirty) = (&mut self.epochs, &mut self.epochs_dirty);
        seg.scan_rebuild(file_size, self.interval, true, next_base, |h| {
            *dirty |= epochs.assign(h.partition_leader_epoch, h.base_offset);
        })
        .map_err(serr(&self.p.dir))
    }

    /// In a shared directory, a segment whose batches reach into the next segment's offsets
    /// may be a stray (a former owner's roll that landed late: docs/cluster.md, fencing): it
    /// is put aside with the epochs it started, and `bases` changes at `i`. Returns whether
    /// it was.
    fn put_aside_if_stray(
        &mut self,
        i: usize,
        seg: &Segment,
        pos: u64,
        file_size: u64,
        next_base: i64,
    ) -> Result<bool, StoreError> {
        let p = &self.p;
        let stray = is_stray(seg, pos, file_size, &p.dir, next_base, p.newest_segment)
            .map_err(serr(&p.dir))?;
        if stray == Stray::No {
            return Ok(false);
        }
        self.epochs_dirty |= forget_under_filler(p, stray, &mut self.epochs)?;
        put_stray_aside(
            &p.tp,
            &p.dir,
            seg,
            &mut self.bases,
            i,
            &mut self.first_recover,
        )?;
        Ok(true)
    }

    /// Where validation stopped short of the segment's end: damage (a torn or corrupt
    /// batch) ends the log there, and every later segment is removed before this one is cut
    /// (left behind, one would come back at the next open past a log end that has moved
    /// on); damage past a segment whose offsets are complete is cut and the later segments
    /// kept. In a shared directory the log first continues past what goes
    /// (`continue_past_removed`), at a segment of its own. Returns whether the log ends in
    /// this segment, and the bases of the segments that continue it.
    fn remove_after_damage(
        &mut self,
        i: usize,
        r: &Rebuilt,
        next_base: i64,
    ) -> Result<(bool, Option<Vec<i64>>), StoreError> {
        let p = &self.p;
        let base = self.bases[i];
        let is_last = i + 1 == self.bases.len();
        if let Some((pos, err)) = &r.stopped {
            tracing::warn!(
                tp = ?p.tp, segment = base, position = pos, error = %err,
                "corrupt or torn data found during recovery; truncating the log here"
            );
        }
        if let Some(pos) = r.overlapped {
            tracing::warn!(
                tp = ?p.tp, segment = base, position = pos, next_base,
                "batches past the next segment's base offset (appended by a former owner after a takeover); cutting them"
            );
        }
        // Damage past the last offset before the next segment (a former owner's write
        // after a takeover, torn: the new owner sealed this segment there) is cut like a
        // batch reaching the next segment: the later segments continue the offsets.
        let complete = r.stopped.is_some() && !is_last && r.next_offset == next_base;
        if complete {
            tracing::warn!(tp = ?p.tp, segment = base, next_base,
                "damaged bytes past a segment whose offsets are complete; cutting them and keeping the later segments");
        }
        let stopped = r.stopped.is_some() && !complete;
        let continued = (stopped && p.shared && !is_last)
            .then(|| continue_past_removed(p, base, r.next_offset, &self.bases[i + 1..]))
            .transpose()?;
        if stopped {
            may_write(p, "removing the segments after damage")?;
            // One that cannot be removed is renamed aside (a later open removes it); if that
            // fails too the log is not opened, and the next open finds the damage again.
            for &later in &self.bases[i + 1..] {
                remove_segment_files(&p.dir, later, false)?;
            }
        }
        if let Some(at) = continued.as_ref().and_then(|c| c.first().copied()) {
            // What described the removed segments goes with them: the epochs that began in
            // them (the batch that continues the log starts this opener's epoch at `at`),
            // and the producer snapshots past `at`, whose state counts their batches (one at
            // the new log end would otherwise be kept, and a retry of a removed batch taken
            // for a duplicate).
            self.epochs_dirty |= self.epochs.truncate_from_end(at);
            crate::snapshots::remove_unless(&p.dir, |o| o <= at).map_err(serr(&p.dir))?;
        }
        Ok((stopped, continued))
    }

    /// Cuts a recovered segment at the end of its last valid batch and writes the indexes
    /// rebuilt from its batches: no index entry and no byte past what the log holds.
    fn install_recovered(
        &mut self,
        seg: Segment,
        r: Rebuilt,
        file_size: u64,
        from_pos: u64,
    ) -> Result<(), StoreError> {
        let serr = serr(&self.p.dir);
        // Cut only where the file is longer: a cut to its own length still frees the blocks
        // past its end (the extent anchors, `segment::anchor_extent_tree`, then lost), on a
        // volume mounted with `discard` with a synchronous discard each (a sixth of the
        // samples of an open of 100,000 empty partitions after a crash). In a shared
        // directory the cut is made whatever the length (a former owner's write may be
        // landing).
        let current = if self.p.shared {
            None
        } else {
            Some(
                seg.log
                    .get()
                    .map_err(&serr)?
                    .metadata()
                    .map_err(&serr)?
                    .len(),
            )
        };
        if current != Some(r.size) {
            seg.log
                .for_write()
                .map_err(&serr)?
                .set_len(r.size)
                .map_err(&serr)?;
        }
        if r.size == 0 && file_size > 0 {
            self.cut_to_empty = Some(seg.base_offset);
        }
        seg.write_index_files(&r.offset_index, &r.time_index, self.p.shared)
            .map_err(&serr)?;
        // A scan that resumed past the first batch did not see it.
        let first_ts = match r.first_batch_ts {
            None if from_pos > 0 => {
                let file = seg.log.get().map_err(&serr)?;
                match BatchScanner::new(file, 0, r.size, false).next_batch() {
                    Ok(Some((_, h))) => Some(h.max_timestamp),
                    _ => None,
                }
            }
            t => t,
        };
        let loaded = Loaded {
            size: r.size,
            next_offset: r.next_offset,
            cursor: r.cursor,
            first_ts,
            offset_index: r.offset_index,
            time_index: r.time_index,
        };
        self.push_loaded(seg, loaded);
        Ok(())
    }

    /// The active segment of a clean shutdown: its index files loaded, only the tail after
    /// the last index entry read to find the log end (a tail that does not read is cut);
    /// without index files, every batch read and the indexes rebuilt.
    fn load_clean_active(&mut self, seg: Segment, existed: bool) -> Result<Next, StoreError> {
        let serr = serr(&self.p.dir);
        let base = seg.base_offset;
        let file_size = seg.size();
        let indexes = if existed {
            seg.read_index_files(file_size).map_err(&serr)?
        } else {
            None
        };
        let loaded = match indexes {
            Some((oi, ti)) => read_clean_tail(&self.p, &seg, oi, ti, file_size)?,
            None => {
                let r = seg
                    .scan_rebuild(file_size, self.interval, false, i64::MAX, |_| {})
                    .map_err(&serr)?;
                may_write(&self.p, "rebuilding an active segment's indexes")?;
                seg.write_index_files(&r.offset_index, &r.time_index, self.p.shared)
                    .map_err(&serr)?;
                Loaded {
                    size: r.size,
                    next_offset: r.next_offset,
                    cursor: r.cursor,
                    first_ts: r.first_batch_ts,
                    offset_index: r.offset_index,
                    time_index: r.time_index,
                }
            }
        };
        if loaded.size != file_size {
            may_write(&self.p, "cutting the active segment")?;
            seg.log
                .for_write()
                .map_err(&serr)?
                .set_len(loaded.size)
                .map_err(&serr)?;
            if loaded.size == 0 {
                self.cut_to_empty = Some(base);
            }
        }
        self.push_loaded(seg, loaded);
        Ok(Next::Advance)
    }

    /// Records what was loaded of a segment in its state and makes it the last loaded one.
    fn push_loaded(&mut self, seg: Segment, l: Loaded) {
        {
            let mut m = seg.meta.write();
            m.size = l.size;
            m.next_offset = l.next_offset;
            m.max_ts = l.cursor.max_ts;
            m.off_max_ts = l.cursor.off_max_ts;
            m.rolling_ts = l.first_ts.filter(|t| *t >= 0).unwrap_or(self.p.now_ms);
            m.set_indexes_as_on_disk(l.offset_index, l.time_index);
        }
        self.cursor = l.cursor;
        self.segments.push(Arc::new(seg));
    }

    /// A sealed segment below the recovery point: trusted, its indexes loaded when first
    /// used (missing ones rebuilt now). In a shared directory, at or past what the previous
    /// owner's record vouches for, its tail is checked first: it may have been a former
    /// owner's active segment, appended to after a takeover sealed it (docs/cluster.md,
    /// fencing), and its batches' epochs are noted.
    fn load_sealed(&mut self, i: usize, seg: Segment, existed: bool) -> Result<Next, StoreError> {
        let serr = serr(&self.p.dir);
        let base = self.bases[i];
        let next_base = self.bases[i + 1];
        let checked = self.p.shared && base >= self.trusted_below;
        let mut file_size = seg.size();
        if checked {
            let (valid, crossing) =
                verified_sealed_size(&seg, file_size, next_base).map_err(&serr)?;
            may_write(&self.p, "cutting a sealed segment's tail")?;
            if let Some(pos) = crossing {
                if self.put_aside_if_stray(i, &seg, pos, file_size, next_base)? {
                    return Ok(Next::Again);
                }
            }
            if valid < file_size {
                tracing::warn!(tp = ?self.p.tp, segment = base, position = valid, next_base,
                    "bytes past a sealed segment's last batch (appended by a former owner after a takeover); cutting them");
                seg.log
                    .for_write()
                    .map_err(&serr)?
                    .set_len(valid)
                    .map_err(&serr)?;
                seg.meta.write().size = valid;
                file_size = valid;
            }
        }
        // Index files that are there are checked when first used (`ensure_loaded`,
        // `timestamps`) and rebuilt then if invalid; missing ones are rebuilt now.
        if !existed {
            tracing::info!(tp = ?self.p.tp, segment = base, "index files missing; rebuilding");
            let r = seg
                .scan_rebuild(file_size, self.interval, false, next_base, |_| {})
                .map_err(&serr)?;
            may_write(&self.p, "rebuilding a sealed segment's indexes")?;
            seg.write_index_files(&r.offset_index, &r.time_index, self.p.shared)
                .map_err(&serr)?;
            let mut m = seg.meta.write();
            m.max_ts = r.cursor.max_ts;
            m.off_max_ts = r.cursor.off_max_ts;
            m.set_indexes_as_on_disk(r.offset_index, r.time_index);
        }
        seg.meta.write().next_offset = next_base;
        if checked {
            self.epochs_dirty |= assign_segment_epochs(&mut self.epochs, &seg, file_size);
        }
        self.segments.push(Arc::new(seg));
        Ok(Next::Advance)
    }

    /// A last segment that held bytes and that recovery cut to none (a torn batch only) is
    /// still the file a former owner may hold open with a write in flight, or a deposed
    /// opener with its own cut in flight: like one found empty in the listing, in a shared
    /// directory it gets new files, so that what this owner appends there is in a file no one
    /// else holds (docs/cluster.md, fencing).
    fn replace_emptied_last(&mut self) -> Result<(), StoreError> {
        let p = &self.p;
        if !p.shared
            || self.cut_to_empty.is_none()
            || self.segments.last().map(|s| s.base_offset) != self.cut_to_empty
        {
            return Ok(());
        }
        let serr = serr(&p.dir);
        let Some(last) = self.segments.pop() else {
            return Ok(());
        };
        let base = last.base_offset;
        drop(last);
        tracing::info!(tp = ?p.tp, segment = base, "replacing the files of a last segment recovery emptied");
        let check = || may_write_io(p, "replacing a last segment recovery emptied");
        replace_with_new_empty_files(&p.dir, base, p.leader_epoch, &check).map_err(&serr)?;
        let (seg, _) = Segment::open_files(&p.dir, base, p.now_ms).map_err(&serr)?;
        {
            let mut m = seg.meta.write();
            m.size = 0;
            m.next_offset = base;
            m.rolling_ts = p.now_ms;
            m.set_indexes_as_on_disk(Vec::new(), Vec::new());
        }
        self.cursor = IndexCursor::new(base);
        self.segments.push(Arc::new(seg));
        Ok(())
    }

    /// Settles where the log starts and ends (a log start checkpointed beyond the end
    /// empties the log; a log without segments gets one), makes what was recovered durable
    /// (`make_recovered_durable`) and cuts the epochs to the log.
    fn settle_ends(&mut self, created_dir: bool) -> Result<Ends, StoreError> {
        let p = &self.p;
        let mut leo = self.segments.last().map_or(0, |s| s.next_offset());
        if let Some(ls) = p
            .log_start
            .filter(|ls| *ls > leo && !self.segments.is_empty())
        {
            tracing::warn!(tp = ?p.tp, log_start = ls, leo, "log start beyond log end; starting an empty log at the log start");
            for s in self.segments.drain(..) {
                // Close the files before unlinking them.
                let base = s.base_offset;
                drop(s);
                if let Err(e) = rename_deleted_in(&p.dir, base, None)
                    .and_then(|()| unlink_deleted_in(&p.dir, base, None))
                {
                    tracing::warn!(error = %e, "could not delete segment");
                }
            }
        }
        let created_segment = self.segments.is_empty();
        if created_segment {
            let base = p.log_start.unwrap_or(0).max(0);
            let check = || may_write_io(p, "replacing an empty first segment");
            let seg =
                Segment::create(&p.dir, base, p.now_ms, Some(&check)).map_err(serr(&p.dir))?;
            self.cursor = IndexCursor::new(base);
            self.segments.push(Arc::new(seg));
            leo = base;
        }
        let first_base = self.segments[0].base_offset;
        let log_start = p.log_start.unwrap_or(first_base).max(first_base).min(leo);
        let recovery_point = if p.clean {
            leo
        } else {
            p.recovery_point.unwrap_or(0).clamp(0, leo)
        };
        self.make_recovered_durable(recovery_point, created_segment, created_dir)?;
        let recovered_from = (!p.clean)
            .then(|| {
                self.segments
                    .iter()
                    .find(|s| s.next_offset() > recovery_point)
                    .map(|s| s.base_offset)
            })
            .flatten();
        self.epochs_dirty |= self.epochs.truncate_from_end(leo);
        self.epochs_dirty |= self.epochs.truncate_from_start(log_start);
        Ok(Ends {
            leo,
            log_start,
            recovery_point: if self.recovered_any {
                leo
            } else {
                recovery_point
            },
            recorded_recovery_point: recovery_point,
            recovered_from,
        })
    }

    /// After a crash, what recovery kept may be only in the page cache: every segment past
    /// the recovery point (and the active one) is fsynced, its indexes and transaction index
    /// too, then the directory, before the recovery point may move past them. A new
    /// segment's or directory's entry is made durable here too (a flush fsyncs only the
    /// directory changes it knows of).
    fn make_recovered_durable(
        &self,
        recovery_point: i64,
        created_segment: bool,
        created_dir: bool,
    ) -> Result<(), StoreError> {
        let (p, segments) = (&self.p, &self.segments);
        let serr = serr(&p.dir);
        may_write(p, "making what it recovered durable")?;
        if self.recovered_any || !p.clean {
            // The transaction index too: the recovery point moves past these segments, and
            // an open below a producer snapshot does not rebuild their aborted transactions.
            for s in segments {
                if s.next_offset() > recovery_point || Arc::ptr_eq(s, &segments[segments.len() - 1])
                {
                    s.log.sync_data().map_err(&serr)?;
                    s.index_file.sync_data().map_err(&serr)?;
                    s.time_file.sync_data().map_err(&serr)?;
                    s.txn.lock().sync(&s.dir, s.base_offset).map_err(&serr)?;
                }
            }
            sync_dir(&p.dir).map_err(&serr)?;
        } else if created_segment {
            sync_dir(&p.dir).map_err(&serr)?;
        }
        if created_dir {
            if let Some(log_dir) = p.dir.parent() {
                sync_dir(log_dir).map_err(&serr)?;
            }
        }
        Ok(())
    }

    /// Whether the producer snapshot at `offset` may be loaded: any, in a directory of this
    /// broker's own; in a shared directory one at a segment base, or the one the previous
    /// owner vouched for when the bytes loaded carry the CRC it recorded.
    fn snapshot_trusted(&self, offset: i64, bytes: Option<&[u8]>) -> bool {
        !self.p.shared
            || self.segments.iter().any(|s| s.base_offset == offset)
            || self.p.vouched_snapshot.is_some_and(|v| {
                v.offset == offset
                    && bytes.is_none_or(|b| crate::snapshots::crc_of(b) == Some(v.crc))
            })
    }

    /// Rebuilds the producer and transaction state: the newest trusted snapshot at or below
    /// what is known durable (`snapshot_bound`; after a recovery that resumed at the recovery
    /// point, at or below it), then a replay of the batch headers after it, exact as
    /// Kafka's (markers followed, aborted transactions computed); the batches shortly before
    /// the snapshot only add batch history for idempotence (`history_start`).
    fn replay_producer_state(&mut self, ends: &Ends) -> Result<ProducerReplay, StoreError> {
        let serr = serr(&self.p.dir);
        let bound = snapshot_bound(&self.segments, ends.leo, ends.recorded_recovery_point);
        may_write(&self.p, "removing producer snapshots past what is durable")?;
        let mut removed = false;
        // One listing of the snapshots for this step (it removes some, and says which).
        let mut listed = crate::snapshots::offsets(&self.p.dir).map_err(&serr)?;
        let snapshot = crate::snapshots::load_newest(
            &self.p.dir,
            &mut listed,
            self.resumed_at.map_or(bound, |rp| bound.min(rp)),
            &|o, b| self.snapshot_trusted(o, b),
            &mut removed,
        )
        .map_err(&serr)?;
        if removed {
            // The removal is made durable before the recovery point can pass the offsets of
            // the snapshots removed: undone by a crash, one would describe batches that were
            // never stored, once the log has grown past it with others (a durable snapshot
            // may be older than the data below it: `advance_recovery_point_impl`).
            sync_dir(&self.p.dir).map_err(&serr)?;
        }
        // After an unclean shutdown every snapshot left is made durable before this process
        // counts it so (their names were made durable with the directory above): the
        // process before may have written them without fsync, and the prune keeps only the
        // newest durable ones. A clean shutdown fsynced its own (`Log::close_active`).
        if !self.p.clean {
            crate::snapshots::sync_every(&self.p.dir, &listed).map_err(&serr)?;
        }
        let from = replay_start(
            &self.segments,
            snapshot.as_ref().map(|(offset, _, _)| *offset),
        );
        let rebuilt_from_start = snapshot.is_none() && recent_start(&self.segments) > 0;
        let (snap_offset, producers, snap_crc) =
            snapshot.unwrap_or((i64::MIN, ProducerStates::default(), 0));
        let state =
            ReplayState::from_snapshot(producers, &self.segments, self.interval).map_err(&serr)?;
        // The snapshot before the one loaded, if any: its offset (only where it lies: its
        // content is not read) bounds the history replay too. For the snapshot an owner
        // vouched for, the one it wrote before it, which it recorded with it (an open of a
        // shared directory removed that file, not being at a segment base).
        let vouched_previous = self
            .p
            .vouched_snapshot
            .filter(|v| v.offset == snap_offset)
            .and_then(|v| v.previous);
        let previous = listed
            .into_iter()
            .chain(vouched_previous)
            .filter(|o| *o < snap_offset)
            .max();
        let (from, from_pos) =
            history_start(&self.segments, from, snap_offset, previous, self.interval)
                .map_err(&serr)?;
        let mut replay = ProducerReplay {
            state,
            scan_stopped: Default::default(),
            snap_offset,
            snap_crc,
            from,
            rebuilt_from_start,
        };
        let mut hist = ProducerStates::default();
        for (k, s) in self.segments.iter().enumerate().skip(from) {
            let start = if k == from { from_pos } else { 0 };
            let (epochs, dirty) = (&mut self.epochs, &mut self.epochs_dirty);
            replay_segment(&self.p, s, start, ends, &mut replay, &mut hist, |h| {
                *dirty |= epochs.assign(h.partition_leader_epoch, h.base_offset);
            })?;
        }
        replay.state.producers.merge_history(hist);
        replay.state.producers.truncate_head(ends.log_start);
        Ok(replay)
    }

    /// Rewrites the transaction indexes the replay or the recovery says may be wrong: exact
    /// from the replay for the segments it read from the snapshot's offset on; a recovered
    /// segment's whatever its file holds (what an earlier process wrote and never synced, or
    /// what a failed fsync left, which an fsync from here would not write); a damaged one
    /// rebuilt from the log alone. Each rewrite is fsynced, then the directory.
    fn rebuild_txn_indexes(
        &self,
        ends: &Ends,
        replay: &mut ProducerReplay,
    ) -> Result<(), StoreError> {
        let serr = serr(&self.p.dir);
        // Recovered segments below the snapshot: their indexes from an exact replay of their
        // own, from the newest snapshot at or below the first of them, if one is left (the
        // prune keeps one at or below the recorded recovery point), as Kafka recovers each
        // unflushed segment from the snapshot at or below its base. Where what this open
        // recovered begins: the recovery point where recovery resumed there, else the first
        // recovered segment's base.
        let exact_from = replay.snap_offset;
        let below_snapshot = self
            .resumed_at
            .or(ends.recovered_from)
            .filter(|b| *b < exact_from)
            .and_then(|b| {
                crate::snapshots::read_at_or_below(&self.p.dir, b, &|o, bytes| {
                    self.snapshot_trusted(o, bytes)
                })
            })
            .map(|older| {
                replay_for_indexes(
                    &self.segments,
                    older,
                    exact_from,
                    self.interval,
                    self.p.now_ms,
                )
            })
            .transpose()
            .map_err(&serr)?
            .flatten();
        let mut rewrote = false;
        for (i, seg) in self.segments.iter().enumerate() {
            let recovered = ends.recovered_from.is_some_and(|b| seg.base_offset >= b);
            if i < replay.from && !recovered {
                // Neither replayed nor recovered: its index is loaded on first use, and
                // rebuilt from the log then if damaged (`Log::rebuild_txn_index`).
                continue;
            }
            let loaded = seg.txn.lock().load(&seg.dir, seg.base_offset);
            let damaged = match &loaded {
                Ok(_) => false,
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    tracing::warn!(tp = ?self.p.tp, segment = seg.base_offset, error = %e,
                        "damaged transaction index; rebuilding it from the log");
                    true
                }
                Err(e) => return Err(serr(io::Error::new(e.kind(), e.to_string()))),
            };
            let old = loaded.as_ref().ok().map(|v| &***v);
            let want =
                self.txn_index_wanted(i, ends, replay, below_snapshot.as_ref(), old, damaged)?;
            if let Some(v) = want {
                let same = old.is_some_and(|old| *old == *v);
                if !same || recovered {
                    if !same {
                        tracing::info!(tp = ?self.p.tp, segment = seg.base_offset, entries = v.len(),
                            "rewriting the transaction index from the log");
                    }
                    may_write(&self.p, "rewriting a transaction index")?;
                    let mut t = seg.txn.lock();
                    t.file = None;
                    t.replace(&seg.dir, seg.base_offset, v).map_err(&serr)?;
                    t.sync(&seg.dir, seg.base_offset).map_err(&serr)?;
                    rewrote = true;
                }
            }
        }
        if rewrote {
            // A transaction index created or removed above is in the directory for good.
            sync_dir(&self.p.dir).map_err(&serr)?;
        }
        Ok(())
    }

    /// What the transaction index of segment `i` must hold, when the open knows it: walked
    /// back over the log for a recovered segment the exact replay did not read whole (from
    /// the older snapshot's replay when there is one); from the replay for one it read from
    /// the snapshot's offset on (entries below the snapshot kept from the file); rebuilt
    /// from the log when damaged. None: the file is kept as it is.
    fn txn_index_wanted(
        &self,
        i: usize,
        ends: &Ends,
        replay: &mut ProducerReplay,
        below_snapshot: Option<&HashMap<i64, Vec<TxnIndexEntry>>>,
        old: Option<&[TxnIndexEntry]>,
        damaged: bool,
    ) -> Result<Option<Vec<TxnIndexEntry>>, StoreError> {
        let seg = &self.segments[i];
        let base = seg.base_offset;
        let next = self.segments.get(i + 1).map_or(i64::MAX, |n| n.base_offset);
        let exact_from = replay.snap_offset;
        let recovered = ends.recovered_from.is_some_and(|b| base >= b);
        let stopped = replay.scan_stopped.contains(&base);
        // A scan that stopped early computed part of the segment's index only: the index it
        // has is kept (rebuilt only if damaged), never replaced by less.
        let replayed = i >= replay.from && next > exact_from && !stopped;
        // Below the snapshot, a recovered segment's index is walked back over the log: a
        // snapshot above it says nothing of whether its roll's flush made its index durable.
        // A segment recovered from the recovery point on (`resumed_at`): its index below the
        // snapshot was durable, as the recovery point is not past the snapshot.
        let resumed_here =
            ends.recovered_from == Some(base) && self.resumed_at.is_some_and(|rp| rp >= exact_from);
        let exact = replayed && (base >= exact_from || resumed_here);
        if recovered && !exact && !stopped {
            if let Some(v) = below_snapshot {
                return Ok(Some(v.get(&base).cloned().unwrap_or_default()));
            }
            // An unreadable batch in an older segment the walk reads (below the recovery
            // point, not validated) does not fail the open: the file is kept, as when a
            // scan stops early.
            match crate::log::rebuild_walkback(&self.segments, i, ends.log_start) {
                Ok(v) => return Ok(Some(v)),
                Err(e) => {
                    tracing::warn!(tp = ?self.p.tp, segment = base, error = %e,
                        "could not rebuild the transaction index by walking back; keeping it");
                }
            }
        }
        if replayed && (base >= exact_from || !damaged) {
            let mut v: Vec<TxnIndexEntry> = match old {
                Some(old) if base < exact_from => old
                    .iter()
                    .filter(|e| e.last_offset < exact_from)
                    .copied()
                    .collect(),
                _ => Vec::new(),
            };
            v.extend(replay.state.computed.remove(&base).unwrap_or_default());
            return Ok(Some(v));
        }
        if damaged {
            let v = crate::log::rebuild_walkback(&self.segments, i, ends.log_start)
                .map_err(serr(&self.p.dir))?;
            return Ok(Some(v));
        }
        Ok(None)
    }

    /// Starts the log: the rebuilt producer state written as a snapshot where the next open
    /// must find one (rebuilt from the log start, or this owner's empty last segment in a
    /// shared directory: docs/cluster.md, fencing point 2), the leader epochs written, after
    /// the transaction indexes were rewritten and fsynced (a durable snapshot vouches for
    /// everything below it).
    fn into_log(
        mut self,
        ends: Ends,
        replay: ProducerReplay,
        opened_at: std::time::Instant,
    ) -> Result<Log, StoreError> {
        may_write(
            &self.p,
            "writing the rebuilt producer state and leader epochs",
        )?;
        let written = Written {
            unsynced_snapshots: self.place_rebuilt_snapshot(&ends, &replay),
            epochs_unpersisted: self.persist_epochs(),
        };
        self.report_loaded(&ends, &replay, opened_at);
        Ok(self.start(ends, replay, written))
    }

    /// Writes the rebuilt producer state as a snapshot at the log end where the next open
    /// must find one: after a replay from the log start (no snapshot survived), or, in a
    /// shared directory, at this owner's empty last segment ([`owns_empty_base`]), so that a
    /// former owner's placement stalled in flight finds the name taken (docs/cluster.md,
    /// fencing point 2). Runs after the transaction indexes were rewritten and fsynced, so
    /// that it keeps the producer-state invariant of docs/log-format.md ("Recovery
    /// invariants": a durable snapshot vouches for everything below it). Returns the
    /// snapshots left for the log's first flush to make durable ([`persist_rebuilt_state`]).
    fn place_rebuilt_snapshot(&self, ends: &Ends, replay: &ProducerReplay) -> Vec<i64> {
        if replay.rebuilt_from_start || owns_empty_base(self.p.shared, &self.segments, ends.leo) {
            persist_rebuilt_state(&self.p, ends.leo, &replay.state.producers)
        } else {
            Vec::new()
        }
    }

    /// Writes `leader-epoch-checkpoint` if loading changed the epochs. The first recovery
    /// invariant of docs/log-format.md holds either way (the `.log` is the truth; the epoch
    /// cache is derived and rebuildable): a failed write is logged, and the log remembers to
    /// write it again. Returns whether the epochs are left unwritten.
    fn persist_epochs(&mut self) -> bool {
        if !self.epochs_dirty {
            return false;
        }
        match self.epochs.persist() {
            Ok(()) => false,
            Err(e) => {
                tracing::warn!(tp = ?self.p.tp, error = %e, "could not write leader-epoch-checkpoint");
                true
            }
        }
    }

    /// Logs the loaded log and counts what recovery read (`crate::recovery`). One line a
    /// partition at INFO only where recovery read data (`bench/restart-recovery` sums them);
    /// the start logs one line for all (`partitions opened`): at 100,000 partitions a line
    /// each was 100,000 lines a start.
    fn report_loaded(&self, ends: &Ends, replay: &ProducerReplay, opened_at: std::time::Instant) {
        let (p, segments, recovered_bytes) = (&self.p, &self.segments, self.recovered_bytes);
        if recovered_bytes > 0 {
            tracing::info!(tp = ?p.tp, segments = segments.len(), log_start = ends.log_start, leo = ends.leo,
                producers = replay.state.producers.len(), clean = p.clean, recovered_bytes, "log loaded");
        } else {
            tracing::debug!(tp = ?p.tp, segments = segments.len(), log_start = ends.log_start, leo = ends.leo,
                producers = replay.state.producers.len(), clean = p.clean, recovered_bytes, "log loaded");
        }
        if recovered_bytes > 0 {
            crate::recovery::add(recovered_bytes, opened_at.elapsed());
        }
    }

    /// Makes the running log of what the open loaded: the segments, the settled ends (the
    /// recovery point is where the open made everything durable), the rebuilt producer and
    /// transaction state, the appender's cursor at the last segment's base. Drop-behind and
    /// write-behind start at the end: what is cached now is left to the kernel. No I/O.
    fn start(self, ends: Ends, replay: ProducerReplay, written: Written) -> Log {
        let Opening {
            p,
            epochs,
            segments,
            mut cursor,
            recovered_bytes,
            ..
        } = self;
        let active_size = segments.last().map_or(0, |s| s.size());
        cursor.base = segments.last().map_or(0, |s| s.base_offset);
        let drop_point = Log::initial_drop_point(p.dir.clone(), &segments, active_size);
        let writeback_point = Log::initial_drop_point(p.dir.clone(), &segments, active_size);
        let sync_bounded = p.config.flush_messages == 1;
        Log {
            tp: p.tp,
            dir: RwLock::new(p.dir),
            topic_id: p.topic_id,
            config: RwLock::new(p.config),
            shared: RwLock::new(initial_shared(
                &ends,
                segments,
                active_size,
                sync_bounded,
                replay.state.txns,
            )),
            writer: Mutex::new(Writer {
                cursor,
                producers: replay.state.producers,
                failed_writes: Default::default(),
                verifying: Default::default(),
            }),
            flush_lock: Mutex::new(()),
            files_lock: Mutex::new(()),
            epochs: Mutex::new(epochs),
            epoch_file: Mutex::new(()),
            epochs_unpersisted: AtomicBool::new(written.epochs_unpersisted),
            spare: Mutex::new(None),
            snapshots_unpruned: AtomicBool::new(true),
            recorded_recovery_point: std::sync::atomic::AtomicI64::new(
                ends.recorded_recovery_point,
            ),
            snapshots_unsynced: Mutex::new(written.unsynced_snapshots),
            pending: Mutex::new(Vec::new()),
            leader_epoch: AtomicI32::new(p.leader_epoch),
            deleted: AtomicBool::new(false),
            del: p.del,
            drop_point: Mutex::new(drop_point),
            read_back: Mutex::new(crate::cache::ReadBack::default()),
            cache_work: std::sync::atomic::AtomicBool::new(true),
            flush_work: std::sync::atomic::AtomicBool::new(true),
            writeback_point: Mutex::new(writeback_point),
            failure: Mutex::new(None),
            gate: p.gate,
            recovered_bytes,
            appended: std::sync::atomic::AtomicU64::new(0),
            snapshot_crcs: Mutex::new(Vec::new()),
            loaded_end_snapshot: Mutex::new(
                (replay.snap_offset == ends.leo).then_some((replay.snap_offset, replay.snap_crc)),
            ),
            rp_followed: Mutex::new(Followed {
                at_ms: p.now_ms,
                base: cursor.base,
                size: active_size,
            }),
            #[cfg(test)]
            faults: Mutex::new(crate::faults::Faults::default()),
        }
    }
}

/// What [`Opening::into_log`] wrote before the log starts, for the log to remember.
struct Written {
    /// Producer snapshots written but not yet fsynced.
    unsynced_snapshots: Vec<i64>,
    /// Whether `leader-epoch-checkpoint` could not be written.
    epochs_unpersisted: bool,
}

/// Whether, in a shared directory, the last segment is empty and based at the log end `leo`:
/// then it is this owner's active segment with no roll of its own (an acquisition rolls only
/// past data), at a base a former owner made, and this owner places its producer snapshot
/// there (docs/cluster.md, fencing point 2). Never in a directory of one broker.
fn owns_empty_base(shared: bool, segments: &[Arc<Segment>], leo: i64) -> bool {
    shared
        && segments
            .last()
            .is_some_and(|s| s.size() == 0 && s.base_offset == leo)
}

/// The readers' state of a log just loaded: its segments and settled ends; the recovery point
/// is where the open made everything durable, so it is also what is synced. Nothing is
/// published, unflushed or pending a directory sync yet.
fn initial_shared(
    ends: &Ends,
    segments: Vec<Arc<Segment>>,
    active_size: u64,
    sync_bounded: bool,
    txns: TxnState,
) -> Shared {
    Shared {
        segments: Arc::new(segments),
        log_start: ends.log_start,
        leo: ends.leo,
        active_size,
        recovery_point: ends.recovery_point,
        synced: ends.recovery_point,
        synced_mark: SyncedMark::NONE,
        published: None,
        sync_bounded,
        unflushed_since: None,
        dir_dirty: false,
        txns,
    }
}

/// What loading a segment found: its end and the indexes that describe it.
struct Loaded {
    size: u64,
    next_offset: i64,
    cursor: IndexCursor,
    first_ts: Option<i64>,
    offset_index: Vec<OffsetIndexEntry>,
    time_index: Vec<sluice_format::TimeIndexEntry>,
}

/// The tail of a cleanly shut down active segment after its last offset-index entry, read
/// to find the log end: the entries up to there exist; a batch that does not read ends the
/// segment (it is cut).
fn read_clean_tail(
    p: &OpenParams,
    seg: &Segment,
    oi: Vec<OffsetIndexEntry>,
    ti: Vec<sluice_format::TimeIndexEntry>,
    file_size: u64,
) -> Result<Loaded, StoreError> {
    let serr = serr(&p.dir);
    let base = seg.base_offset;
    let mut c = IndexCursor::new(base);
    let start = oi.last().map_or(0, |e| e.position as u64);
    c.last_off_rel = oi.last().map(|e| e.relative_offset);
    c.last_time = ti.last().copied();
    if let Some(t) = ti.last() {
        c.max_ts = t.timestamp;
        c.off_max_ts = base + i64::from(t.relative_offset);
    }
    let mut scanner = BatchScanner::new(seg.log.get().map_err(&serr)?, start, file_size, false);
    let mut next = base;
    let mut size = start;
    loop {
        match scanner.next_batch() {
            Ok(Some((pos, h))) => {
                if h.max_timestamp > c.max_ts {
                    c.max_ts = h.max_timestamp;
                    c.off_max_ts = h.last_offset();
                }
                c.bytes_since += h.total_len() as u64;
                next = h.next_offset();
                size = pos + h.total_len() as u64;
            }
            Ok(None) => break,
            Err(ScanError::Io(e)) => return Err(serr(e)),
            Err(ScanError::Corrupt { pos, err }) => {
                tracing::warn!(tp = ?p.tp, position = pos, error = %err,
                    "invalid batch at the end of a cleanly shut down log; truncating");
                break;
            }
        }
    }
    Ok(Loaded {
        size,
        next_offset: next,
        cursor: c,
        first_ts: read_first_ts(seg),
        offset_index: oi,
        time_index: ti,
    })
}

/// In a shared directory only a snapshot at a segment base is trusted: its owner rolled there
/// and put it in place with a rename that never replaces a file (a former owner's late one,
/// if first, was removed by that roll). One anywhere else, the log end included, may be a
/// former owner's, placed by a rename that stalled in flight past a takeover: it describes
/// batches a newer owner cut or never had (docs/cluster.md, fencing point 2); it is removed.
/// An owner's own at its log end (a seal, a rebuilt state) only saves a replay of the active
/// segment; a hand-over rolls before it seals and an acquisition rolls at the log end, so the
/// next open finds its snapshot at a base. The one the previous owner vouched for stays if
/// its file still has the CRC the owner recorded (a former owner's placement there would
/// not).
fn remove_foreign_snapshots(p: &OpenParams, segments: &[Arc<Segment>]) -> Result<(), StoreError> {
    let at = |o: i64| {
        segments.iter().any(|s| s.base_offset == o)
            || p.vouched_snapshot
                .is_some_and(|v| v.offset == o && snapshot_crc(&p.dir, o) == Some(v.crc))
    };
    may_write(p, "removing a former owner's producer snapshots")?;
    let removed = crate::snapshots::remove_unless(&p.dir, at).map_err(serr(&p.dir))?;
    if !removed.is_empty() {
        tracing::warn!(tp = ?p.tp, ?removed,
            "producer snapshots neither at a segment base nor at the log end (a former owner's); removed");
    }
    Ok(())
}

/// Replays one segment's batch headers from `start` into the producer state: below the
/// snapshot's offset only batch history; from it on exactly, markers followed (an abort's
/// transaction noted for the segment's transaction index) and transactions started. A
/// recovered segment was validated: a read that fails there fails the open; elsewhere the
/// replay of the segment stops early and it is noted (its transaction index is kept).
fn replay_segment(
    p: &OpenParams,
    s: &Segment,
    start: u64,
    ends: &Ends,
    replay: &mut ProducerReplay,
    hist: &mut ProducerStates,
    mut note_epoch: impl FnMut(&BatchHeader),
) -> Result<(), StoreError> {
    let serr = serr(&p.dir);
    let mut scanner = BatchScanner::new(s.log.get().map_err(&serr)?, start, s.size(), false);
    loop {
        match scanner.next_batch() {
            Ok(Some((pos, h))) => {
                if p.clean {
                    note_epoch(&h);
                }
                if h.base_offset < replay.snap_offset {
                    hist.replay(&h, p.now_ms);
                } else if is_txn_marker(&h) {
                    let marker = s
                        .log
                        .get()
                        .and_then(|f| crate::txn::read_marker(&f, pos, &h));
                    if let Some(c) = marker.map_err(&serr)? {
                        replay.state.marker(s, &h, &c, p.now_ms);
                    }
                } else {
                    replay.state.data(s, pos, &h, p.now_ms);
                }
            }
            Ok(None) => return Ok(()),
            Err(e) if ends.recovered_from.is_some_and(|b| s.base_offset >= b) => {
                return Err(serr(e.into_io()));
            }
            Err(e) => {
                tracing::warn!(tp = ?p.tp, segment = s.base_offset, error = %e.into_io(), "producer state scan stopped early");
                replay.scan_stopped.insert(s.base_offset);
                return Ok(());
            }
        }
    }
}

/// What a replay of batch headers builds: the producers' state, the open transactions, and
/// the aborted transactions it found, by segment base (their `.txnindex` entries).
#[derive(Default)]
struct ReplayState {
    producers: ProducerStates,
    txns: crate::txn::TxnState,
    computed: HashMap<i64, Vec<TxnIndexEntry>>,
}

impl ReplayState {
    /// Starts from a snapshot's producers, their open transactions marked where they began.
    fn from_snapshot(
        producers: ProducerStates,
        segments: &[Arc<Segment>],
        interval: u64,
    ) -> io::Result<ReplayState> {
        let mut txns = crate::txn::TxnState::default();
        for (pid, first) in producers.open_txns() {
            txns.start(pid, batch_mark(segments, first, interval)?);
        }
        Ok(ReplayState {
            producers,
            txns,
            computed: HashMap::new(),
        })
    }

    /// A data batch at `pos` of segment `s`: its producer's state, and the transaction it
    /// starts, if any.
    fn data(&mut self, s: &Segment, pos: u64, h: &BatchHeader, now_ms: i64) {
        if self.producers.replay(h, now_ms) {
            let mark = SyncedMark {
                offset: h.base_offset,
                base: s.base_offset,
                pos,
            };
            self.txns.start(h.producer_id, mark);
        }
    }

    /// A transaction marker of segment `s`: ends its producer's transaction; an abort's range
    /// goes to the segment's entries, with the last stable offset after it.
    fn marker(
        &mut self,
        s: &Segment,
        h: &BatchHeader,
        c: &sluice_format::txn::ControlRecord,
        now_ms: i64,
    ) {
        let Some(first) = self.producers.replay_marker(h, c.coordinator_epoch, now_ms) else {
            return;
        };
        if c.control_type == CONTROL_ABORT {
            let lso = self.txns.stable_after(h.producer_id, h.base_offset);
            self.computed
                .entry(s.base_offset)
                .or_default()
                .push(TxnIndexEntry {
                    producer_id: h.producer_id,
                    first_offset: first,
                    last_offset: h.base_offset,
                    last_stable_offset: lso,
                });
        }
        self.txns.ongoing.remove(&first);
    }
}

/// The CRC-32C the snapshot file at `offset` in `dir` carries, if it can be read.
fn snapshot_crc(dir: &Path, offset: i64) -> Option<u32> {
    use std::os::unix::fs::FileExt;
    let path = dir.join(sluice_format::segment_file_name(
        offset,
        SegmentFileKind::Snapshot,
    ));
    let mut head = [0u8; 6];
    std::fs::File::open(path)
        .and_then(|f| f.read_exact_at(&mut head, 0))
        .ok()?;
    crate::snapshots::crc_of(&head)
}

/// Where the recovery of `seg`, the segment holding the recovery point `rp`, may start:
/// its last offset-index entry below `rp` (None: from its start). An unreadable index file
/// is not an error here: the segment is then validated whole.
fn resume_from(p: &OpenParams, seg: &Segment, rp: i64, size: u64) -> Option<ScanStart> {
    match seg.resume_point(rp, size) {
        Ok(start) => start,
        Err(e) => {
            tracing::warn!(tp = ?p.tp, segment = seg.base_offset, error = %e,
                "could not read the index below the recovery point; validating the whole segment");
            None
        }
    }
}

/// The first of the newest [`PRODUCER_STATE_SEGMENTS`] segments that hold data (a takeover
/// or a time-based roll leaves empty or small ones behind): their batches give recent
/// producers their last five batches, so a retry of any of them is recognised.
fn recent_start(segments: &[Arc<Segment>]) -> usize {
    let mut with_data = 0;
    segments
        .iter()
        .rposition(|s| {
            with_data += usize::from(s.size() > 0);
            with_data == PRODUCER_STATE_SEGMENTS
        })
        .unwrap_or(0)
}

/// The first segment the producer-state replay at open reads (an index into `segments`).
///
/// With a snapshot (at offset `snapshot`): the older of [`recent_start`] and the snapshot's
/// segment. The snapshot keeps every producer that wrote before those segments (one batch
/// each, as Kafka keeps), and the replay is exact from its offset on.
///
/// Without one (a crash lost every snapshot, or the log never had one): the first segment.
/// Nothing else says which transactions are open, and one opened in any segment and not
/// ended since must be found, or the last stable offset passes it and its abort is indexed
/// nowhere (read_committed reads its records as committed, the cleaner keeps them; issue
/// 53). As Kafka after an unclean shutdown with no snapshot, the state is rebuilt from the
/// log start. Cost: a header scan of every segment (16 KiB reads: the whole log when its
/// batches are smaller than that, one read a batch when larger), so it grows with the log,
/// not bounded by the newest segments as a replay from a snapshot is. It is paid only when
/// no snapshot survives (they are fsynced by the flush after each roll and at close), and
/// once: the rebuilt state is written as a durable snapshot at the log end
/// ([`persist_rebuilt_state`]), so a second crash before the next roll does not pay it again.
fn replay_start(segments: &[Arc<Segment>], snapshot: Option<i64>) -> usize {
    let Some(offset) = snapshot else {
        return 0;
    };
    let snap = segments
        .iter()
        .rposition(|s| s.base_offset <= offset)
        .unwrap_or(0);
    recent_start(segments).min(snap)
}

/// Bytes of batches before a producer snapshot that the replay at open reads at least for
/// their history (the last batches of each producer, so that a retry of one is recognised).
const HISTORY_BYTES: u64 = 4 << 20;

/// Where the producer-state replay starts reading, as (segment index, position), never
/// before segment `from`: at the older of [`HISTORY_BYTES`] before the snapshot at
/// `snapshot` and the snapshot before it (`previous`, written a recovery-point interval or a
/// roll earlier), at a batch boundary the offset index names. So a batch appended since the
/// previous snapshot, which a producer may still retry (its answer lost in the crash), is
/// recognised; one from before it has only the snapshot's last batch of its producer, as
/// Kafka's snapshots keep. Without a snapshot, from the start of `from`.
fn history_start(
    segments: &[Arc<Segment>],
    from: usize,
    snapshot: i64,
    previous: Option<i64>,
    interval: u64,
) -> io::Result<(usize, u64)> {
    let Some(snap_k) = segments.iter().rposition(|s| s.base_offset <= snapshot) else {
        return Ok((from, 0));
    };
    if snapshot == i64::MIN || snap_k < from {
        return Ok((from, 0));
    }
    let snap = &segments[snap_k];
    let mut k = snap_k;
    let mut want = HISTORY_BYTES;
    let mut end = snap.lookup_position(snapshot, snap.size(), interval)?;
    let window = loop {
        if end >= want {
            let seg = &segments[k];
            break (k, seg.boundary_at_or_below(end - want, 0, interval)?);
        }
        if k == from {
            break (from, 0);
        }
        want -= end;
        k -= 1;
        end = segments[k].size();
    };
    // No snapshot before it: the replay reads from the start of `from`, as before.
    let Some(prev) = previous else {
        return Ok((from, 0));
    };
    let prev_k = segments
        .iter()
        .rposition(|s| s.base_offset <= prev)
        .unwrap_or(0)
        .max(from);
    let seg = &segments[prev_k];
    let prev_at = if seg.base_offset <= prev {
        (prev_k, seg.lookup_position(prev, seg.size(), interval)?)
    } else {
        (prev_k, 0)
    };
    Ok(window.min(prev_at))
}

/// Write the producer state a replay from the log start rebuilt (or, in a shared directory,
/// the state at the base of the empty active segment this open keeps) as `<leo>.snapshot`, fsynced
/// with its directory entry, so the next open starts from it. Everything below it is durable
/// first (recovered data by recovery, rewritten transaction indexes by their rewrite), as a
/// flush makes the segments below a roll's snapshot durable before it. A failure is logged: the next open replays from the start
/// again. Returns the snapshots left for the log's first flush to make durable.
fn persist_rebuilt_state(p: &OpenParams, leo: i64, producers: &ProducerStates) -> Vec<i64> {
    let (dir, tp) = (&p.dir, &p.tp);
    let check = || may_write_io(p, "placing the rebuilt producer snapshot");
    let durable = crate::snapshots::write(dir, leo, producers, p.leader_epoch, None, &check)
        .and_then(|_| crate::snapshots::sync(dir, leo))
        .and_then(|()| sync_dir(dir));
    match durable {
        Ok(()) => Vec::new(),
        Err(e) => {
            tracing::warn!(tp = ?tp, offset = leo, error = %e, "could not write the producer state rebuilt from the log start");
            vec![leo]
        }
    }
}

/// The highest offset a producer snapshot may be taken at: the log end, unless the data of a
/// segment ends below the next segment's base, past the recovery point (`durable`), or the
/// active segment is empty and the data before it ends below its base. Then a roll named a
/// segment (and wrote a snapshot) at an end that the data never reached on storage (a crash,
/// or a former owner on NFS: its file names, and the bytes written back since, reached the
/// server; the sealed segment's tail it had not fsynced did not). A snapshot there would
/// count as written batches that are not in the log (a producer's retry of them would be
/// taken for a duplicate and never stored). Below the recovery point such a gap is a
/// cleaning's (it removes records, and whole batches): those batches were written, and a
/// snapshot past them counts them rightly.
fn snapshot_bound(segments: &[Arc<Segment>], leo: i64, durable: i64) -> i64 {
    let lost_tail = segments.windows(2).find_map(|w| {
        let (before, next) = (&w[0], &w[1]);
        (before.next_offset() < next.base_offset && next.base_offset > durable)
            .then(|| before.next_offset())
    });
    let empty_active = match segments {
        [.., before, active] if active.size() == 0 && before.next_offset() < active.base_offset => {
            Some(before.next_offset())
        }
        _ => None,
    };
    lost_tail
        .into_iter()
        .chain(empty_active)
        .fold(leo, i64::min)
}

/// Where the batch holding `offset` starts (for an open transaction known from a snapshot).
/// A mark with no segment of its own when the offset lies before every segment.
fn batch_mark(segments: &[Arc<Segment>], offset: i64, interval: u64) -> io::Result<SyncedMark> {
    let k = segments.partition_point(|s| s.base_offset <= offset);
    let none = SyncedMark {
        offset,
        base: i64::MIN,
        pos: 0,
    };
    let Some(seg) = k.checked_sub(1).map(|k| &segments[k]) else {
        return Ok(none);
    };
    let size = seg.size();
    let start = seg.lookup_position(offset, size, interval)?;
    let mut scanner = BatchScanner::new(seg.log.get()?, start, size, false);
    while let Some((pos, h)) = scanner.next_batch().map_err(|e| e.into_io())? {
        if h.last_offset() >= offset {
            return Ok(SyncedMark {
                offset,
                base: seg.base_offset,
                pos,
            });
        }
    }
    Ok(SyncedMark {
        offset,
        base: seg.base_offset,
        pos: size,
    })
}

/// The `.txnindex` entries of the segments below `upto` that an exact replay from `older`
/// (a snapshot's offset and state) computes, by segment base offset; None if the replay
/// cannot read a batch on its way (a sealed segment trusted below the recovery point is not
/// validated): what it would compute past that batch is not exact.
fn replay_for_indexes(
    segments: &[Arc<Segment>],
    older: (i64, ProducerStates),
    upto: i64,
    interval: u64,
    now_ms: i64,
) -> io::Result<Option<HashMap<i64, Vec<TxnIndexEntry>>>> {
    let (offset, producers) = older;
    let mut state = ReplayState::from_snapshot(producers, segments, interval)?;
    let start = segments
        .iter()
        .rposition(|s| s.base_offset <= offset)
        .unwrap_or(0);
    for s in segments[start..]
        .iter()
        .take_while(|s| s.base_offset < upto)
    {
        let Ok(log) = s.log.get() else {
            return Ok(None);
        };
        let mut scanner = BatchScanner::new(log, 0, s.size(), false);
        loop {
            let (pos, h) = match scanner.next_batch() {
                Ok(Some(b)) => b,
                Ok(None) => break,
                Err(_) => return Ok(None),
            };
            if h.base_offset < offset {
                continue;
            }
            if !is_txn_marker(&h) {
                state.data(s, pos, &h, now_ms);
                continue;
            }
            match s
                .log
                .get()
                .and_then(|f| crate::txn::read_marker(&f, pos, &h))
            {
                Ok(Some(c)) => state.marker(s, &h, &c, now_ms),
                Ok(None) => {}
                Err(_) => return Ok(None),
            }
        }
    }
    Ok(Some(state.computed))
}

/// Remove the files of the segment at `base` (its producer snapshot too, with `snapshot`).
/// One that cannot be removed is renamed aside (a later open removes it); if that fails too,
/// the log is not opened, and the next open finds the segment again.
fn remove_segment_files(dir: &Path, base: i64, snapshot: bool) -> Result<(), StoreError> {
    let kinds = [
        SegmentFileKind::Log,
        SegmentFileKind::Index,
        SegmentFileKind::TimeIndex,
        SegmentFileKind::TxnIndex,
        SegmentFileKind::Snapshot,
    ];
    for kind in &kinds[..if snapshot { 5 } else { 4 }] {
        let path = seg_path(dir, base, *kind);
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(file = %path.display(), error = %e, "could not remove a segment file; renaming it aside");
                let mut aside = path.clone().into_os_string();
                aside.push(DELETED_SUFFIX);
                std::fs::rename(&path, &aside).map_err(|source| StoreError::Io {
                    path: path.clone(),
                    source: io::Error::new(
                        source.kind(),
                        format!("a segment file to remove can be neither removed ({e}) nor renamed aside ({source}); the log is not opened"),
                    ),
                })?;
            }
        }
    }
    Ok(())
}

/// Whether the segment at `next_base` is a stray a former owner created after a takeover
/// (docs/cluster.md, fencing point 2): the batch at `cross_pos` of the segment before it
/// reaches its base offset, so two owners wrote past that offset, and the batch was written
/// under a newer leader epoch (ownership epoch) than the stray's first batch, or the stray
/// holds none (an empty segment, even a newer owner's that it never wrote to: the former
/// owner's batches reaching its base are then kept, as no record of the newer owner is there
/// to lose). A segment whose first batch is as new as the crossing batch or newer is the
/// newer owner's, and the crossing batches are what is cut, as before. (Epochs are compared
/// only between owners of the cluster: a crossing needs two of them; batches adopted from a
/// Kafka log dir may carry higher leader epochs, but never cross.) The callers never ask it of
/// the segment the owner record names as the newest with published data (`recorded`): that
/// one is the owner's own (its roll made a new file), the batches crossing into it are a
/// former owner's and are cut, and a later takeover needs it listed
/// (`check_listing_is_current`). Except under the batch of no records an open made before
/// removing the segments after damage (`continue_past_removed`): the segments it crosses are
/// the ones that open was removing, the recorded one included, and go.
fn is_stray(
    seg: &Segment,
    cross_pos: u64,
    end: u64,
    dir: &Path,
    next_base: i64,
    recorded: i64,
) -> io::Result<Stray> {
    let crossing = match BatchScanner::new(seg.log.get()?, cross_pos, end, false).next_batch() {
        Ok(Some((_, h))) if sluice_format::builder::is_filler(&h) => {
            return Ok(Stray::UnderFiller(h.base_offset))
        }
        Ok(Some((_, h))) => h.partition_leader_epoch,
        Ok(None) | Err(ScanError::Corrupt { .. }) => return Ok(Stray::No),
        Err(ScanError::Io(e)) => return Err(e),
    };
    if next_base == recorded || crossing < 0 {
        return Ok(Stray::No);
    }
    let next = std::fs::File::open(seg_path(dir, next_base, SegmentFileKind::Log))?;
    let len = next.metadata()?.len();
    let first = match BatchScanner::new(&next, 0, len, false).next_batch() {
        Ok(Some((_, h))) => Some(h.partition_leader_epoch),
        Ok(None) | Err(ScanError::Corrupt { .. }) => None,
        Err(ScanError::Io(e)) => return Err(e),
    };
    // An empty one holds no record of anyone's to lose.
    Ok(if first.is_none_or(|epoch| epoch < crossing) {
        Stray::Older
    } else {
        Stray::No
    })
}

/// What [`is_stray`] found of the segment after a crossing batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stray {
    /// Not a stray: the crossing batches are cut.
    No,
    /// A former owner's segment inside a newer owner's data.
    Older,
    /// Under the batch of no records an open made at this offset before removing the
    /// segments after damage (`continue_past_removed`), which stopped before it removed
    /// this one.
    UnderFiller(i64),
}

/// For a stray under the batch of no records at `at`, what the open that made it would have
/// done after its removals (`continue_past_removed`): the epochs that began past `at` and
/// the producer snapshots past it describe the segments removed and go. (Nothing of a
/// later owner's lies past it yet: a later owner writes only after an open that removed
/// every stray under it.) Returns whether the epoch cache changed.
fn forget_under_filler(
    p: &OpenParams,
    stray: Stray,
    epochs: &mut EpochCache,
) -> Result<bool, StoreError> {
    let Stray::UnderFiller(at) = stray else {
        return Ok(false);
    };
    crate::snapshots::remove_unless(&p.dir, |o| o <= at).map_err(|source| StoreError::Io {
        path: p.dir.clone(),
        source,
    })?;
    Ok(epochs.truncate_from_end(at))
}

/// Remove the stray segment after `bases[i]` ([`is_stray`]) with its producer snapshot, and
/// drop it from `bases`, keeping `first_recover` on the same segment (the one before it if it
/// was the stray). The segment before it, `crossing`, is fsynced first: its batches crossing
/// the stray's base are then on storage, so the log stays past that base and no segment is
/// made under the stray's name again, where a deposed opener's removal of it, stalled in
/// flight, could land (docs/cluster.md, Fencing point 2).
fn put_stray_aside(
    tp: &TopicPartition,
    dir: &Path,
    crossing: &Segment,
    bases: &mut Vec<i64>,
    i: usize,
    first_recover: &mut usize,
) -> Result<(), StoreError> {
    let stray = bases[i + 1];
    crossing
        .log
        .get()
        .and_then(|f| f.sync_data())
        .map_err(|source| StoreError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
    tracing::warn!(?tp, segment = stray, before = bases[i],
        "a segment a former owner created inside a newer owner's data after a takeover; removing it");
    remove_segment_files(dir, stray, true)?;
    bases.remove(i + 1);
    if *first_recover > i {
        *first_recover -= 1;
    }
    Ok(())
}

/// A takeover reads the directory as the previous owner left it, or refuses. An NFS client may
/// list a directory from its cache, as it was up to a minute before (attribute caching; a
/// directory is revalidated when its change time moves, which a coarse server timestamp can
/// miss): such a listing lacks the segments rolled since, and the older files' tails (a former
/// owner's writes that a later owner's seal cut off) would be served and kept in their place.
/// The previous owner recorded the newest segment it published data in before publishing it
/// (docs/cluster.md, fencing point 2): a listing with no segment at or past it is stale.
/// Segments are created in increasing order, so a listing that shows it shows those below.
///
/// An open that removed the segments after damage may have removed the recorded one: it made
/// the log continue past them first (`continue_past_removed`), and a listing whose newest
/// segment begins with that batch of no records, reaching the recorded base, shows a file made
/// after the recorded segment: it is current.
fn check_listing_is_current(p: &OpenParams, bases: &[i64]) -> Result<(), StoreError> {
    let recorded = p.newest_segment;
    if recorded <= 0 || bases.last().is_some_and(|&newest| newest >= recorded) {
        return Ok(());
    }
    if let Some(&newest) = bases.last() {
        let path = seg_path(&p.dir, newest, SegmentFileKind::Log);
        let continued = std::fs::File::open(&path).ok().and_then(|f| {
            let len = f.metadata().ok()?.len();
            first_batch(&f, len)
        });
        if continued
            .is_some_and(|h| sluice_format::builder::is_filler(&h) && h.last_offset() >= recorded)
        {
            return Ok(());
        }
    }
    Err(StoreError::Invalid {
        path: p.dir.clone(),
        reason: format!(
            "the previous owner recorded data in segment {recorded}, but the directory lists {}: \
             a stale view of the volume (a cached listing); not opening from it until it is current",
            match bases.last() {
                Some(b) => format!("segments up to {b} only"),
                None => "no segment".to_string(),
            }
        ),
    })
}

/// The write gate (`crate::gate`), asked by an open before each of its writes to the
/// partition's files: an acquisition bumps the owner record's epoch before the files are
/// read, but recovery can outlast the broker's write deadline (a long scan, a stalled
/// volume), after which another broker may own the partition and nothing may be written.
fn may_write_io(p: &OpenParams, before: &str) -> io::Result<()> {
    may_write(p, before).map_err(io::Error::other)
}

fn may_write(p: &OpenParams, before: &str) -> Result<(), StoreError> {
    p.gate
        .check(&p.tp, p.topic_id, p.leader_epoch)
        .map_err(|reason| StoreError::Invalid {
            path: p.dir.clone(),
            reason: format!("stopped opening the log before {before}: {reason}"),
        })
}

/// A trusted segment of a shared directory tells the epochs of its batches to the epoch
/// cache: an owner's epoch begins at a segment base (an acquisition starts a new segment), but
/// a cleaned segment can merge segments of several owners, so an epoch can also begin inside
/// one. This finds the epochs a `leader-epoch-checkpoint` lacks when a former owner's stalled
/// rewrite replaced it with its older view after a takeover; the recovered segments tell
/// theirs as they are scanned. Changes nothing when the checkpoint already has the epochs
/// (one is only added past the newest).
fn assign_segment_epochs(epochs: &mut EpochCache, seg: &Segment, size: u64) -> bool {
    match seg.log.get() {
        Ok(log) => assign_epochs_of(epochs, &log, size, index_last_position(seg, size)),
        Err(_) => false,
    }
}

/// [`assign_segment_epochs`] of a `.log` of `size` bytes whose last batch begins at or after
/// `last_from`: reads the first batch and the last; the batch headers in between only when
/// those two differ in epoch.
fn assign_epochs_of(
    epochs: &mut EpochCache,
    log: &std::fs::File,
    size: u64,
    last_from: u64,
) -> bool {
    let Some(first) = first_batch(log, size) else {
        return false;
    };
    let mut changed = epochs.assign(first.partition_leader_epoch, first.base_offset);
    let last = last_batch(log, size, last_from).unwrap_or(first);
    if last.partition_leader_epoch != first.partition_leader_epoch {
        let mut scanner = BatchScanner::new(log, 0, size, false);
        while let Ok(Some((_, h))) = scanner.next_batch() {
            changed |= epochs.assign(h.partition_leader_epoch, h.base_offset);
        }
    }
    changed
}

/// Where a sealed segment's last batch can be looked for from: its offset index's last
/// entry, if plausible, else 0.
fn index_last_position(seg: &Segment, size: u64) -> u64 {
    seg.index_file
        .get()
        .ok()
        .and_then(|f| {
            let len = f.metadata().ok()?.len();
            let n = OFFSET_INDEX_ENTRY_LEN as u64;
            if len < n {
                return None;
            }
            let mut b = [0u8; OFFSET_INDEX_ENTRY_LEN];
            f.read_exact_at(&mut b, len - n).ok()?;
            OffsetIndexEntry::decode(&b)
        })
        .and_then(|e| u64::try_from(e.position).ok())
        .filter(|p| *p < size)
        .unwrap_or(0)
}

/// The header of the last batch of a `.log` of `size` bytes, scanned from `from`, an index
/// entry's position, if the batches found from there check (CRC) and end exactly at `size`;
/// else from the start, following the batch lengths (a stale index entry can point inside a
/// batch, at bytes a client chose).
fn last_batch(log: &std::fs::File, size: u64, from: u64) -> Option<BatchHeader> {
    let scan = |from: u64, verify: bool| {
        let mut scanner = BatchScanner::new(log, from, size, verify);
        let mut last = None;
        let mut end = from;
        while let Ok(Some((pos, h))) = scanner.next_batch() {
            end = pos + h.total_len() as u64;
            last = Some(h);
        }
        (last, end)
    };
    if from > 0 {
        if let (Some(h), end) = scan(from, true) {
            if end == size {
                return Some(h);
            }
        }
    }
    scan(0, false).0
}

/// The bound below which the previous owner's record vouches for the sealed segments of a
/// shared directory (`crate::sealed`): its `below` if the listed segments under it, with
/// their sizes as the volume reports them now, give the digest it recorded; `i64::MIN`
/// (nothing trusted) otherwise, or without a record. A segment recovered in full is sized
/// by a `stat` here; its scan checks it anyway.
fn trusted_bound(
    p: &OpenParams,
    bases: &[i64],
    unopened: &std::collections::HashMap<i64, Segment>,
) -> io::Result<i64> {
    let Some(recorded) = p.sealed.filter(|_| p.shared) else {
        return Ok(i64::MIN);
    };
    let mut listed = Vec::new();
    for &base in bases.iter().take_while(|b| **b < recorded.below) {
        let size = match unopened.get(&base) {
            Some(seg) => seg.size(),
            None => rustix::fs::stat(seg_path(&p.dir, base, SegmentFileKind::Log))?.st_size as u64,
        };
        listed.push((base, size));
    }
    let found = crate::sealed::digest(recorded.below, listed);
    if found == recorded {
        Ok(recorded.below)
    } else {
        tracing::info!(tp = ?p.tp, below = recorded.below, recorded = recorded.count, listed = found.count,
            "the sealed segments differ from what the previous owner recorded (a former owner's late write, or a deletion or cleaning not recorded yet); checking each");
        Ok(i64::MIN)
    }
}

/// The leader epochs that begin in the trusted sealed segments below `trusted_below` and
/// that the `leader-epoch-checkpoint` lacks (a former owner's stalled rewrite can replace
/// it with its older view after a takeover: docs/cluster.md, fencing point 2). Epochs only
/// grow along the log, so the segments are read from the newest back until one whose last
/// batch's epoch the checkpoint has (two header reads when it is current), and those found
/// newer tell their epochs oldest first ([`assign_epochs_of`]). A segment not taken
/// unopened (an index file missing) is read by name.
fn epochs_past_checkpoint(
    epochs: &mut EpochCache,
    dir: &Path,
    bases: &[i64],
    unopened: &std::collections::HashMap<i64, Segment>,
    trusted_below: i64,
) -> bool {
    let newest = epochs.latest_epoch().unwrap_or(-1);
    let mut newer: Vec<(std::sync::Arc<std::fs::File>, u64, u64)> = Vec::new();
    for base in bases.iter().rev().filter(|b| **b < trusted_below) {
        // One that cannot be read tells nothing (as `assign_segment_epochs`).
        let opened = match unopened.get(base) {
            Some(seg) => seg
                .log
                .get()
                .ok()
                .map(|log| (log, seg.size(), index_last_position(seg, seg.size()))),
            None => std::fs::File::open(seg_path(dir, *base, SegmentFileKind::Log))
                .ok()
                .and_then(|f| {
                    let len = f.metadata().ok()?.len();
                    Some((std::sync::Arc::new(f), len, 0))
                }),
        };
        let Some((log, size, from)) = opened else {
            continue;
        };
        match last_batch(&log, size, from) {
            Some(h) if h.partition_leader_epoch > newest => newer.push((log, size, from)),
            Some(_) => break,
            None => continue,
        }
    }
    let mut changed = false;
    for (log, size, from) in newer.into_iter().rev() {
        changed |= assign_epochs_of(epochs, &log, size, from);
    }
    changed
}

/// The header of the first batch of a segment's `.log` of `len` bytes, if one can be read.
fn first_batch(log: &std::fs::File, len: u64) -> Option<BatchHeader> {
    match BatchScanner::new(log, 0, len, false).next_batch() {
        Ok(Some((_, h))) => Some(h),
        _ => None,
    }
}

/// Give the empty segment at `base` new files in place: each is made empty under a spare name
/// and renamed over the old one, so the segment is listed at every moment (a takeover needs
/// the segment the owner record names: `check_listing_is_current`), while a former owner that
/// holds the old `.log` open writes only into the file replaced (on NFS, a stale handle). Its
/// transaction index goes: an empty segment has none.
///
/// Each opener's spares have names of their own (`<file>.<epoch>-<process>-<n>.spare`): a
/// deposed opener's rename stalled in flight names its own spare, which the next owner's open
/// removed with every spare it lists, and never one another opener made later under the same
/// name (two deposed openers in a row, the second's create landing after the next owner's
/// listing: `a_second_deposed_openers_late_spare_feeds_no_late_rename`).
fn replace_with_new_empty_files(
    dir: &Path,
    base: i64,
    epoch: i32,
    check: &dyn Fn() -> io::Result<()>,
) -> io::Result<()> {
    replace_with_new_files(dir, base, epoch, &[], check)
}

/// [`replace_with_new_empty_files`], the new `.log` holding `content` (written and fsynced
/// before it is renamed into place).
fn replace_with_new_files(
    dir: &Path,
    base: i64,
    epoch: i32,
    content: &[u8],
    check: &dyn Fn() -> io::Result<()>,
) -> io::Result<()> {
    let token = crate::segment::spare_token(epoch);
    for kind in [
        SegmentFileKind::Index,
        SegmentFileKind::TimeIndex,
        SegmentFileKind::Log,
    ] {
        let path = seg_path(dir, base, kind);
        let spare = make_spare_of(&path, &token, kind, content)?;
        // The write gate right before each rename: the file may be the active segment of an
        // owner that acquired the partition since (a check then a rename; what stays open is
        // a rename that stalls in flight, docs/cluster.md).
        check()?;
        std::fs::rename(&spare, &path)?;
    }
    match std::fs::remove_file(seg_path(dir, base, SegmentFileKind::TxnIndex)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Create the spare of `path` (`<path><token>.spare`, new), holding `content` if it is the
/// `.log` (fsynced), empty otherwise.
fn make_spare_of(
    path: &Path,
    token: &str,
    kind: SegmentFileKind,
    content: &[u8],
) -> io::Result<PathBuf> {
    use std::io::Write;
    let mut spare = path.to_path_buf().into_os_string();
    spare.push(token);
    spare.push(crate::segment::SPARE_SUFFIX);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&spare)?;
    if kind == SegmentFileKind::Log && !content.is_empty() {
        f.write_all(content)?;
        f.sync_data()?;
    }
    Ok(PathBuf::from(spare))
}

/// Where an open of a shared directory removes the segments after damage (`removed`, in
/// order), it first makes the log continue past their base offsets, so that no owner ever
/// makes a segment under one of those names again: a removal by name of a deposed opener,
/// stalled in flight, would land on it (docs/cluster.md, Fencing point 2). A segment at
/// `at` (the offset after the damaged segment's last valid batch) is made holding one batch
/// of no records over `at..=` the last removed base ([`sluice_format::builder::filler_batch`]),
/// at this opener's epoch, fsynced, renamed into place (a new name: never over another's
/// file; when `at` is the damaged segment's own base, which keeps nothing, over its files),
/// the directory fsynced, all before any removal. Offsets past one batch's reach (2^31) take
/// more such segments, each based past the one before and at no removed base. An open that
/// stops after it finds the damaged segment complete up to the new one (its damage is cut,
/// the segments after it kept) and the batch crossing their bases: they are strays under it,
/// removed then (`Stray::UnderFiller`). Returns the bases of the segments made (none when
/// nothing is removed).
fn continue_past_removed(
    p: &OpenParams,
    damaged_base: i64,
    at: i64,
    removed: &[i64],
) -> Result<Vec<i64>, StoreError> {
    let Some(&last) = removed.last() else {
        return Ok(Vec::new());
    };
    let chunks = filler_chunks(at, last, removed);
    may_write(
        p,
        "making the log continue past the segments removed after damage",
    )?;
    tracing::warn!(tp = ?p.tp, segment = at, through = last, removed = ?removed, segments = chunks.len(),
        "the log continues past the segments removed after the damage: a batch of no records holds their offsets");
    let check = || may_write_io(p, "renaming the segment that continues the log into place");
    let made = chunks.iter().try_for_each(|&(from, to)| {
        let filler = sluice_format::builder::filler_batch(from, to, p.leader_epoch)
            .ok_or_else(|| io::Error::other("a filler batch's range past one batch's reach"))?;
        if from == damaged_base {
            return replace_with_new_files(&p.dir, from, p.leader_epoch, &filler, &check);
        }
        let token = crate::segment::spare_token(p.leader_epoch);
        for kind in [
            SegmentFileKind::Index,
            SegmentFileKind::TimeIndex,
            SegmentFileKind::Log,
        ] {
            let path = seg_path(&p.dir, from, kind);
            let spare = make_spare_of(&path, &token, kind, &filler)?;
            check()?;
            if kind == SegmentFileKind::Log {
                crate::segment::rename_no_replace(&spare, &path)?;
            } else {
                // No segment has index files here (no `.log` at `from` was listed): one left
                // by an attempt cut short is replaced.
                std::fs::rename(&spare, &path)?;
            }
        }
        Ok(())
    });
    made.and_then(|()| sync_dir(&p.dir))
        .map_err(|source| StoreError::Io {
            path: p.dir.clone(),
            source,
        })?;
    Ok(chunks.into_iter().map(|(from, _)| from).collect())
}

/// The ranges `from..=to` of the batches of no records that cover `at..=last`: each within
/// one batch's reach (and one segment's: offsets relative to a segment base are 32-bit), and
/// none starting at a base in `removed` (a segment is made at each start).
fn filler_chunks(at: i64, last: i64, removed: &[i64]) -> Vec<(i64, i64)> {
    let reach = i64::from(i32::MAX) - 1;
    let mut chunks = Vec::new();
    let mut from = at;
    while from <= last {
        let mut to = last.min(from.saturating_add(reach));
        while to < last && to > from && removed.contains(&(to + 1)) {
            to -= 1;
        }
        chunks.push((from, to));
        from = to + 1;
    }
    chunks
}

#[cfg(test)]
mod epoch_tests {
    use super::*;

    /// ADVERSARY (db207eb): an offset index whose last entry is stale (a former owner's
    /// stalled index write landing on a segment the cleaner rewrote since, say) and points
    /// inside a batch, within the size, at bytes that parse as a batch header (a record's
    /// value holding an encoded batch: client-chosen bytes). `last_batch` takes that
    /// header as the segment's last batch (BatchScanner reads headers only; the scan after
    /// it stops at the garbage that follows and the `or_else(scan(0))` fallback is not
    /// taken since one "batch" was found). Its epoch equals the first batch's, so the
    /// segment's headers are not read: epoch 2, which begins inside the segment, is lost.
    /// In `epochs_past_checkpoint` the same fake epoch (<= the checkpoint's newest) ends the
    /// walk back at once.
    #[test]
    fn a_stale_index_entry_inside_a_batch_loses_no_epoch() {
        let d = tempfile::tempdir().unwrap();
        let mut inner = sluice_format::BatchBuilder::new().record(1, None, Some(b"x"));
        inner.base_offset = 5;
        inner.partition_leader_epoch = 1;
        let inner = inner.build();
        let mut a = sluice_format::BatchBuilder::new().record(1, None, Some(b"a"));
        a.base_offset = 0;
        a.partition_leader_epoch = 1;
        let mut b = sluice_format::BatchBuilder::new().record(2, None, Some(&inner));
        b.base_offset = 1;
        b.partition_leader_epoch = 2;
        let mut bytes = a.build();
        bytes.extend_from_slice(&b.build());
        let inner_pos = bytes
            .windows(inner.len())
            .position(|w| w == &inner[..])
            .unwrap() as u64;
        let path = d.path().join("00000000000000000000.log");
        std::fs::write(&path, &bytes).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        let size = bytes.len() as u64;
        let load = || {
            std::fs::write(
                d.path().join(crate::epoch::LEADER_EPOCH_CHECKPOINT),
                sluice_format::text::format_leader_epoch_checkpoint(&[(1, 0)]),
            )
            .unwrap();
            EpochCache::load(d.path())
        };
        // With a sane index (or none) epoch 2 is found at 1.
        let mut ok = load();
        assign_epochs_of(&mut ok, &f, size, 0);
        assert_eq!(ok.entries(), &[(1, 0), (2, 1)]);
        // With the stale last entry inside batch b.
        assert!(inner_pos < size);
        assert_eq!(
            last_batch(&f, size, inner_pos).map(|h| h.partition_leader_epoch),
            Some(2),
            "the segment's last batch is b (epoch 2); a stale index entry read a fake one"
        );
        let mut stale = load();
        assign_epochs_of(&mut stale, &f, size, inner_pos);
        assert_eq!(stale.entries(), &[(1, 0), (2, 1)], "epoch 2 lost");
    }
}

#[cfg(test)]
mod filler_tests {
    use super::filler_chunks;

    #[test]
    fn filler_chunks_cover_the_range_within_reach_and_start_at_no_removed_base() {
        assert_eq!(filler_chunks(6, 9, &[9]), vec![(6, 9)]);
        let reach = i64::from(i32::MAX) - 1;
        let last = 6 + 2 * reach + 10;
        // The second chunk would start at a removed base: it starts one before.
        let removed = [9, 6 + reach + 1, last];
        let chunks = filler_chunks(6, last, &removed);
        assert_eq!(chunks.first().map(|c| c.0), Some(6));
        assert_eq!(chunks.last().map(|c| c.1), Some(last));
        for w in chunks.windows(2) {
            assert_eq!(w[0].1 + 1, w[1].0, "contiguous: {chunks:?}");
        }
        for &(from, to) in &chunks {
            assert!(to - from <= reach, "within one batch: {chunks:?}");
            assert!(!removed.contains(&from) || from == 6, "{chunks:?}");
        }
        assert_eq!(chunks[0], (6, 6 + reach - 1));
    }
}

#[cfg(test)]
mod step_tests {
    #![allow(clippy::unwrap_used)]

    use std::path::PathBuf;

    use super::*;
    use crate::tests::{cfg, NOW};
    use crate::{LogManager, MetaProperties};

    fn topic_id() -> uuid::Uuid {
        uuid::Uuid::from_u128(0x1234_5678_9abc_def0_1122_3344_5566_7788)
    }

    fn tp() -> TopicPartition {
        TopicPartition {
            topic: "topic".into(),
            partition: 0,
        }
    }

    fn params(dir: PathBuf, clean: bool, recovery_point: Option<i64>) -> OpenParams {
        OpenParams {
            dir,
            tp: tp(),
            topic_id: topic_id(),
            config: LogConfig {
                index_interval_bytes: 300,
                ..cfg()
            },
            leader_epoch: 3,
            recovery_point,
            newest_segment: 0,
            sealed: None,
            switch: None,
            vouched_snapshot: None,
            log_start: None,
            clean,
            now_ms: NOW,
            del: Arc::new(DeleteCtx::default()),
            shared: false,
            gate: Arc::new(crate::gate::GateSlot::default()),
        }
    }

    /// One segment of 40 batches of two records (offsets 0..80), index entries every 300
    /// bytes, shut down cleanly. Returns the partition's directory and the segment's size.
    fn one_segment(root: &Path) -> (PathBuf, u64) {
        let m = LogManager::open(
            vec![root.to_path_buf()],
            MetaProperties {
                node_id: 1,
                cluster_id: "test-cluster-id-00000A".into(),
            },
        )
        .unwrap();
        let c = LogConfig {
            index_interval_bytes: 300,
            ..cfg()
        };
        let log = m.open_log(&tp(), topic_id(), c, 3).unwrap();
        for i in 0..40i64 {
            let b = sluice_format::BatchBuilder::new()
                .record(NOW + i, Some(b"k"), Some(b"v0"))
                .record(NOW + i, Some(b"k"), Some(b"v1"))
                .build();
            log.append(bytes::Bytes::from(b), crate::AppendOrigin::Client, NOW)
                .unwrap();
        }
        m.shutdown().unwrap();
        let dir = root.join("topic-0");
        let size = std::fs::metadata(seg_path(&dir, 0, SegmentFileKind::Log))
            .unwrap()
            .len();
        (dir, size)
    }

    #[test]
    fn stamp_dir_stamps_a_new_directory_and_refuses_another_topics() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("topic-0");
        assert!(stamp_dir(&params(dir.clone(), true, None)).unwrap());
        assert!(dir.join(PARTITION_METADATA).exists());
        assert!(!stamp_dir(&params(dir.clone(), true, None)).unwrap());
        let other = OpenParams {
            topic_id: uuid::Uuid::from_u128(7),
            ..params(dir, true, None)
        };
        assert!(matches!(stamp_dir(&other), Err(StoreError::Invalid { .. })));
    }

    #[test]
    fn list_segments_removes_leftovers_and_keeps_blocker_directories() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("topic-0");
        std::fs::create_dir_all(&dir).unwrap();
        let name = |base: i64| sluice_format::segment_file_name(base, SegmentFileKind::Log);
        std::fs::write(dir.join(name(0)), b"").unwrap();
        std::fs::write(dir.join(name(10)), b"").unwrap();
        let deleted = dir.join(format!("{}{DELETED_SUFFIX}", name(5)));
        std::fs::write(&deleted, b"x").unwrap();
        let spare = dir.join(format!("{}{}", name(20), crate::segment::SPARE_SUFFIX));
        std::fs::write(&spare, b"").unwrap();
        let blocker = dir.join(format!("{}.abc{DELETED_SUFFIX}", name(0)));
        std::fs::create_dir(&blocker).unwrap();
        let bases = list_segments(&params(dir, true, None), &mut Vec::new()).unwrap();
        assert_eq!(bases, vec![0, 10]);
        assert!(!deleted.exists() && !spare.exists());
        assert!(blocker.is_dir(), "a switch's blocker stays");
    }

    /// `Opening::validate`: at a recovery point on a batch boundary recovery resumes there
    /// and validates only what follows; at one inside a batch (the scan never reaches it)
    /// the whole segment is validated. The log end is the same either way.
    #[test]
    fn validation_resumes_only_at_a_recovery_point_the_scan_reaches() {
        let d = tempfile::tempdir().unwrap();
        let (dir, size) = one_segment(d.path());
        let mut o = Opening::new(params(dir.clone(), false, Some(60)), vec![0]).unwrap();
        o.load_segments().unwrap();
        assert_eq!(o.resumed_at, Some(60));
        assert!(o.recovered_bytes > 0 && o.recovered_bytes < size / 2);
        assert_eq!(o.segments[0].next_offset(), 80);
        drop(o);
        let mut o = Opening::new(params(dir, false, Some(61)), vec![0]).unwrap();
        o.load_segments().unwrap();
        assert_eq!(o.resumed_at, None);
        assert_eq!(o.recovered_bytes, size);
        assert_eq!(o.segments[0].next_offset(), 80);
    }

    /// `owns_empty_base`: only in a shared directory, and only for an empty last segment
    /// based at the log end, does the open place its producer snapshot at that base.
    #[test]
    fn only_a_shared_dirs_empty_last_segment_at_the_log_end_is_owned() {
        let d = tempfile::tempdir().unwrap();
        let (dir, _) = one_segment(d.path());
        let full = Arc::new(Segment::open_files(&dir, 0, NOW).unwrap().0);
        let empty = Arc::new(Segment::create(&dir, 80, NOW, None).unwrap());
        let segs = vec![full.clone(), empty];
        assert!(owns_empty_base(true, &segs, 80));
        assert!(
            !owns_empty_base(false, &segs, 80),
            "a directory of one broker"
        );
        assert!(!owns_empty_base(true, &segs, 81), "not at the log end");
        assert!(
            !owns_empty_base(true, &[full], 80),
            "the last segment holds data"
        );
        assert!(!owns_empty_base(true, &[], 0));
    }

    /// `Opening::persist_epochs`: `leader-epoch-checkpoint` is written only when loading
    /// changed the epochs, and a write that succeeded leaves nothing unpersisted.
    #[test]
    fn the_epochs_are_written_only_when_loading_changed_them() {
        let d = tempfile::tempdir().unwrap();
        let (dir, _) = one_segment(d.path());
        let file = dir.join("leader-epoch-checkpoint");
        let mut o = Opening::new(params(dir.clone(), true, None), vec![0]).unwrap();
        std::fs::remove_file(&file).unwrap();
        o.epochs_dirty = false;
        assert!(!o.persist_epochs());
        assert!(!file.exists(), "unchanged epochs are not written");
        o.epochs_dirty = true;
        assert!(!o.persist_epochs());
        assert!(file.exists());
    }

    /// `load_clean_active` / `read_clean_tail`: the active segment of a clean shutdown is
    /// read from its last index entry on, and bytes after its last batch are cut.
    #[test]
    fn a_clean_active_segment_is_cut_after_its_last_batch() {
        let d = tempfile::tempdir().unwrap();
        let (dir, size) = one_segment(d.path());
        let path = seg_path(&dir, 0, SegmentFileKind::Log);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes.extend_from_slice(&[0xAB; 100]);
        std::fs::write(&path, bytes).unwrap();
        let mut o = Opening::new(params(dir, true, None), vec![0]).unwrap();
        o.load_segments().unwrap();
        assert_eq!(o.recovered_bytes, 0, "a clean start validates nothing");
        assert_eq!(o.segments[0].size(), size);
        assert_eq!(o.segments[0].next_offset(), 80);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), size);
    }
}

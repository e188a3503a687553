//! The partition log: append, read, flush, retention (opening and recovery: `log/loader.rs`).
//! The safety paths are sequences of named steps, each in a file of its own: the append
//! (`log/append.rs`, where the write gate of an append lives), the flush (`log/flush.rs`),
//! the bounded read (`log/read.rs`) and the maintenance round (`log/maintain.rs`).

use std::collections::HashMap;
use std::io::{self, IoSlice};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use sluice_format::batch::{check_client_counts, BatchTimestampType};
use sluice_format::names::{parse_segment_file_name, DELETED_SUFFIX};
use sluice_format::records::record_timestamps;
use sluice_format::text::{format_partition_metadata, parse_partition_metadata};
use sluice_format::{
    parse_batches, set_base_offset, set_max_timestamp, set_partition_leader_epoch, BatchHeader,
    FormatError, OffsetIndexEntry, SegmentFileKind, HEADER_LEN, OFFSET_INDEX_ENTRY_LEN,
    TIME_INDEX_ENTRY_LEN,
};

use crate::deferred::{Attempt, DeleteCtx};
use crate::epoch::EpochCache;
use crate::fsutil::{sync_dir, write_all_vectored_at, write_atomic};
use crate::gate::Fenced;
use crate::producer::{
    keeps_verification, MarkerError, ProducerEntry, ProducerStates, SeqCheck, SeqError,
};
use crate::recent::{RecentBatch, RecentBatches, TailRead};
use crate::segment::{
    read_first_ts, rename_deleted_in, seg_path, unlink_deleted_in, BatchScanner, IndexCursor,
    PendingSegment, ScanError, Segment, INDEX_WRITE_ENTRIES,
};
use crate::txn::TxnState;
use crate::{
    AppendError, AppendOrigin, AppendOutcome, FileSlice, Log, LogConfig, LogFailed, LogFailure,
    ReadError, ReadResult, StoreError, SyncedMark, TimestampType, TopicPartition,
    VerificationGuard,
};

mod append;
mod flush;
mod loader;
mod maintain;
mod read;

pub(crate) const PARTITION_METADATA: &str = "partition.metadata";

/// How many of the newest segments are scanned at open to rebuild producer state.
pub(crate) const PRODUCER_STATE_SEGMENTS: usize = 2;

/// State readers snapshot (short lock, never held during I/O).
#[derive(Debug)]
pub(crate) struct Shared {
    pub segments: Arc<Vec<Arc<Segment>>>,
    pub log_start: i64,
    pub leo: i64,
    /// Bytes of the active (last) segment visible to readers.
    pub active_size: u64,
    pub recovery_point: i64,
    /// Offset below which the log data (`.log` files and directory entries) is durable; at
    /// least `recovery_point`, which also needs the index files durable. Acknowledgements of
    /// acks=all under flush.messages/flush.ms wait for this one.
    pub synced: i64,
    /// Where `synced` ends in the files: the last successful flush covered everything up to
    /// this offset, which ends at this position of this segment.
    pub synced_mark: SyncedMark,
    /// Cluster mode: readers see only what was published ([`Log::publish`]), the data of
    /// flush rounds whose ownership was confirmed afterwards. None: readers see the log end,
    /// or the synced mark when `sync_bounded`.
    pub published: Option<SyncedMark>,
    /// `flush.messages=1`: every acknowledgement waits for an fsync, and readers see nothing
    /// past the synced mark either (Kafka flushes such an append before the high watermark
    /// moves), so a record a reader saw cannot vanish with a failed fsync or a host crash.
    pub sync_bounded: bool,
    /// Time of the oldest append not yet covered by a flush.
    pub unflushed_since: Option<i64>,
    /// Files were created or removed since the last directory fsync.
    pub dir_dirty: bool,
    /// Open and unpublished transactions (the last stable offset).
    pub txns: TxnState,
}

/// Where reads stop: the published mark in cluster mode, the synced mark on a single broker
/// for a `sync_bounded` log, else nowhere (the log end).
pub(crate) fn read_bound(s: &Shared) -> Option<SyncedMark> {
    match s.published {
        Some(m) => Some(m),
        None if s.sync_bounded => Some(s.durable_mark()),
        None => None,
    }
}

/// The high watermark: the log end on a single broker (the synced mark for a
/// `sync_bounded` log), the published mark in cluster mode.
pub(crate) fn high_watermark_of(s: &Shared) -> i64 {
    match read_bound(s) {
        Some(m) => m.offset.clamp(s.log_start, s.leo),
        None => s.leo,
    }
}

/// The last stable offset, and where it lies in the files when it is below the high
/// watermark (a read_committed read stops there).
pub(crate) fn stable_mark(s: &Shared) -> (i64, Option<SyncedMark>) {
    let hw = high_watermark_of(s);
    let ongoing = s.txns.ongoing.values().next().map(|t| t.first);
    let unpublished = s
        .txns
        .unpublished
        .values()
        .find(|t| t.last_offset.is_none_or(|l| l >= hw))
        .map(|t| t.first);
    let first = match (ongoing, unpublished) {
        (Some(a), Some(b)) => Some(if a.offset <= b.offset { a } else { b }),
        (a, b) => a.or(b),
    };
    match first {
        Some(m) if m.offset < hw => (m.offset.max(s.log_start), Some(m)),
        _ => (hw, None),
    }
}

/// A marker being appended: who it is for and what it says.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MarkerArgs {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub coordinator_epoch: i32,
    pub control: crate::ControlType,
}

impl Shared {
    /// Where what is known durable ends: the synced mark, or with no fsync since the open the
    /// whole segments below the synced offset.
    fn durable_mark(&self) -> SyncedMark {
        if self.synced_mark == SyncedMark::NONE {
            SyncedMark {
                offset: self.synced,
                base: i64::MIN,
                pos: 0,
            }
        } else {
            self.synced_mark
        }
    }

    /// A flush made everything up to `leo` durable, ending at `active_size` in the last of
    /// `segs` (the state it started from): move the synced mark there.
    fn mark_synced(&mut self, segs: &[Arc<Segment>], leo: i64, active_size: u64) {
        let Some(active) = segs.last() else { return };
        if leo > self.synced_mark.offset || self.synced_mark == SyncedMark::NONE {
            self.synced_mark = SyncedMark {
                offset: leo,
                base: active.base_offset,
                pos: active_size,
            };
        }
    }
}

/// How many of the snapshots it wrote a log remembers the CRC of (for
/// [`Log::vouched_snapshot_impl`]; the prune keeps fewer files than this).
const SNAPSHOT_CRCS_KEPT: usize = 8;

/// Where the active segment stood when the recovery point last followed the log end.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Followed {
    pub at_ms: i64,
    /// The active segment's base offset and size then.
    pub base: i64,
    pub size: u64,
}

/// What a read sees of the log, taken in one look at it ([`Log::visible`]).
struct View {
    /// The segments readers see (cut at the visible end's segment).
    segs: Arc<Vec<Arc<Segment>>>,
    /// Every segment of the log at the same moment: those `segs` holds, then the rest.
    all: Arc<Vec<Arc<Segment>>>,
    log_start: i64,
    log_end: i64,
    /// The visible end: the high watermark, or the last stable offset (read_committed).
    end: i64,
    /// The readable size of the last segment of `segs`.
    active_size: u64,
    hw: i64,
    lso: i64,
}

/// State only the appender touches (behind the writer lock).
#[derive(Debug)]
pub(crate) struct Writer {
    pub cursor: IndexCursor,
    pub producers: ProducerStates,
    /// Producers whose newest append failed on storage: the epoch and first sequence of
    /// what failed ([`Log::note_failed_write`]).
    pub failed_writes: HashMap<i64, (i16, i32)>,
    /// Transaction verifications under way, by producer ([`Log::start_txn_verification`]).
    pub verifying: HashMap<i64, crate::producer::Verifying>,
}

/// Producers remembered in [`Writer::failed_writes`] at most (a full map starts again).
const FAILED_WRITES_KEPT: usize = 4096;

/// What a flush makes durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FlushScope {
    /// Data and index files of every segment, up to the end ([`Log::flush`]).
    All,
    /// The data appended so far: sealed segments past the recovery point whole, the active
    /// segment's `.log` ([`Log::sync_appended`], for acknowledgements).
    Appended,
    /// The sealed segments past the recovery point only ([`Log::flush_sealed`], after rolls).
    Sealed,
}

/// What `Log::open` needs.
#[derive(Debug)]
pub(crate) struct OpenParams {
    pub dir: PathBuf,
    pub tp: TopicPartition,
    pub topic_id: uuid::Uuid,
    pub config: LogConfig,
    pub leader_epoch: i32,
    pub recovery_point: Option<i64>,
    /// See `manager::Known::newest_segment`.
    pub newest_segment: i64,
    /// See `manager::Known::sealed`.
    pub sealed: Option<crate::SealedDigest>,
    /// See `manager::Known::switch`.
    pub switch: Option<crate::CleanerSwitch>,
    /// See `manager::Known::snapshot`.
    pub vouched_snapshot: Option<crate::SnapshotRef>,
    pub log_start: Option<i64>,
    pub clean: bool,
    pub now_ms: i64,
    pub del: Arc<DeleteCtx>,
    /// A log dir shared by the brokers of a cluster: a sealed segment trusted below the
    /// recovery point still gets its tail checked, since a former owner may have appended to
    /// it after a takeover sealed it (see `verified_sealed_size`).
    pub shared: bool,
    /// The write gate of the log's manager (`crate::gate`).
    pub gate: Arc<crate::gate::GateSlot>,
}

fn io_err(msg: String) -> io::Error {
    io::Error::other(msg)
}

impl Log {
    pub(crate) fn interval(&self) -> u64 {
        u64::from(self.config.read().index_interval_bytes)
    }

    fn snapshot(&self) -> (Arc<Vec<Arc<Segment>>>, i64, i64, u64) {
        let s = self.shared.read();
        (s.segments.clone(), s.log_start, s.leo, s.active_size)
    }

    /// What readers may see: the segments, the end offset and the last segment's readable
    /// size, cut at the published mark when reads are bounded (cluster mode).
    /// `committed`: cut at the last stable offset instead (read_committed). Also the high
    /// watermark, the last stable offset and the whole segment list, all from one look at
    /// the log.
    fn visible(&self, committed: bool) -> View {
        let s = self.shared.read();
        let hw = high_watermark_of(&s);
        let (lso, stable) = stable_mark(&s);
        let bound = match (committed, stable) {
            (true, Some(m)) => Some(m),
            _ => read_bound(&s),
        };
        let (segs, log_start, log_end, end, size) = Self::cut_at(&s, bound);
        View {
            segs,
            all: s.segments.clone(),
            log_start,
            log_end,
            end: end.min(if committed { lso } else { hw }),
            active_size: size,
            hw,
            lso,
        }
    }

    /// The segments, log start, log end, visible end and the last segment's visible size
    /// when readers see up to `bound` (None: the log end).
    #[allow(clippy::type_complexity)]
    fn cut_at(
        s: &Shared,
        bound: Option<SyncedMark>,
    ) -> (Arc<Vec<Arc<Segment>>>, i64, i64, i64, u64) {
        let Some(m) = bound else {
            return (s.segments.clone(), s.log_start, s.leo, s.leo, s.active_size);
        };
        let segs = &s.segments;
        let cut = match segs.iter().rposition(|g| g.base_offset == m.base) {
            Some(k) => Some((k, m.pos)),
            // The mark's segment is gone (retention): whole segments below the mark.
            None => segs
                .iter()
                .rposition(|g| g.next_offset() <= m.offset)
                .map(|k| (k, segs[k].size())),
        };
        match cut {
            Some((k, pos)) if k + 1 == segs.len() => (
                segs.clone(),
                s.log_start,
                s.leo,
                m.offset.min(s.leo),
                pos.min(s.active_size),
            ),
            Some((k, pos)) => (
                Arc::new(segs[..=k].to_vec()),
                s.log_start,
                s.leo,
                m.offset.min(s.leo),
                pos,
            ),
            None => (Arc::new(Vec::new()), s.log_start, s.leo, s.log_start, 0),
        }
    }

    fn seg_limit(segs: &[Arc<Segment>], i: usize, active_size: u64) -> u64 {
        if i + 1 == segs.len() {
            active_size
        } else {
            segs[i].size()
        }
    }

    // ------------------------------------------------------------------------------------
    // Append (its steps: `log/append.rs`)
    // ------------------------------------------------------------------------------------

    fn format_error(&self, e: FormatError) -> AppendError {
        if e.is_corrupt() {
            AppendError::Corrupt {
                tp: self.tp.clone(),
                reason: e.to_string(),
            }
        } else {
            AppendError::Invalid {
                tp: self.tp.clone(),
                reason: e.to_string(),
            }
        }
    }

    fn aio(&self, source: io::Error) -> AppendError {
        if let Some(fenced) = Fenced::in_io(&source) {
            return AppendError::Fenced(fenced.clone());
        }
        AppendError::Io {
            tp: self.tp.clone(),
            source,
        }
    }

    /// `verify`: None for [`Log::append`], else the guard of [`Log::append_verified`].
    pub(crate) fn append_impl(
        &self,
        records: Bytes,
        origin: AppendOrigin,
        verify: Option<Option<VerificationGuard>>,
        now_ms: i64,
    ) -> Result<AppendOutcome, AppendError> {
        let appended = self.append_inner(&records, None, origin, verify, now_ms);
        if let Err(AppendError::Io { .. }) = &appended {
            self.note_failed_write(&records);
        }
        appended
    }

    /// An append failed on storage (a write, a roll, a refused log): remember, for each
    /// producer in it, the sequence its first batch started at. A client keeps up to five
    /// requests in flight; those behind the failed one arrive with later sequences, and
    /// without this they would be refused as out of order, which the Kafka clients answer
    /// with a new producer epoch (librdkafka) that re-sends, under new sequences, batches of
    /// other partitions whose answers were lost: duplicates. Kafka takes the partition
    /// offline after a storage failure, so they get the same retriable storage error; here
    /// a batch that follows the failed one does ([`Self::failed_write_gap`]).
    fn note_failed_write(&self, records: &[u8]) {
        let Ok(batches) = parse_batches(records, None) else {
            return;
        };
        let mut w = self.writer.lock();
        if w.failed_writes.len() >= FAILED_WRITES_KEPT {
            w.failed_writes.clear();
        }
        let mut seen: Vec<i64> = Vec::new();
        for b in &batches {
            let h = &b.header;
            if !h.has_producer_id() || h.base_sequence < 0 || seen.contains(&h.producer_id) {
                continue;
            }
            seen.push(h.producer_id);
            // Only the batch the producer's state expected next (one refused for the gap
            // behind it would move the mark past the batch still missing).
            let next = ProducerStates::check(w.producers.get(h.producer_id), h);
            if next == Ok(SeqCheck::Accept) {
                w.failed_writes
                    .insert(h.producer_id, (h.producer_epoch, h.base_sequence));
            }
        }
    }

    /// A batch of `h`'s producer arrived out of order because the batch it expected
    /// (`expected`) failed on storage: the storage error that refused that batch, for
    /// this one too (it is retried after the failed one, in order).
    fn failed_write_gap(&self, w: &Writer, h: &BatchHeader, expected: i32) -> Option<AppendError> {
        let &(epoch, first) = w.failed_writes.get(&h.producer_id)?;
        (epoch == h.producer_epoch && first == expected).then(|| {
            self.aio(io::Error::other(format!(
                "producer {} sequence {}: its batch at sequence {expected} failed on storage; \
                 it must be written first",
                h.producer_id, h.base_sequence
            )))
        })
    }

    pub(crate) fn append_marker_impl(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        control: crate::ControlType,
        now_ms: i64,
    ) -> Result<AppendOutcome, AppendError> {
        if producer_id < 0 {
            return Err(AppendError::Invalid {
                tp: self.tp.clone(),
                reason: format!("transaction marker for producer id {producer_id}"),
            });
        }
        let control_type = match control {
            crate::ControlType::Abort => sluice_format::txn::CONTROL_ABORT,
            crate::ControlType::Commit => sluice_format::txn::CONTROL_COMMIT,
        };
        if crate::mutation::active(crate::mutation::Mutation::ForgetCommitMarker)
            && control == crate::ControlType::Commit
            && !self.tp.topic.starts_with("__")
        {
            let s = self.shared.read();
            return Ok(AppendOutcome {
                base_offset: s.leo,
                last_offset: s.leo,
                log_append_time_ms: -1,
                log_start_offset: s.log_start,
                duplicate: true,
                flush_due: false,
            });
        }
        let bytes = sluice_format::txn::build_marker(
            producer_id,
            producer_epoch,
            control_type,
            coordinator_epoch,
            now_ms,
        );
        self.append_inner(
            &bytes,
            Some(MarkerArgs {
                producer_id,
                producer_epoch,
                coordinator_epoch,
                control,
            }),
            AppendOrigin::Client,
            None,
            now_ms,
        )
    }

    /// The error of a write refused by a failed log, or Ok.
    pub(crate) fn check_not_failed(&self) -> io::Result<()> {
        match &*self.failure.lock() {
            None => Ok(()),
            Some(failure) => Err(io::Error::other(LogFailed {
                tp: self.tp.clone(),
                failure: failure.clone(),
            })),
        }
    }

    /// Make the log refuse writes until it is re-opened (the first failure is kept).
    pub(crate) fn fail(&self, failure: LogFailure) {
        {
            let mut slot = self.failure.lock();
            if slot.is_some() {
                return;
            }
            tracing::error!(tp = ?self.tp, error = %failure,
                "log refuses writes until it is re-opened and recovered from storage");
            *slot = Some(failure);
        }
        // Readers see only what storage holds from now on: nothing past the last successful
        // fsync (the page cache may hold pages the kernel could not write).
        let mut s = self.shared.write();
        let mark = s.durable_mark();
        if s.published.is_none_or(|p| p.offset > mark.offset) {
            s.published = Some(mark);
        }
    }

    /// What was just synced into `seg` is where recovery and readers will look: its `.log`
    /// still has a name, or it is no longer one of this log's segments (retention or the
    /// cleaner retired it meanwhile). A file with no name left while still in use was
    /// replaced or removed by another process: a deposed broker's open that took this
    /// owner's empty active segment for a stray and moved new files over it after its last
    /// gate check, say (its check and its rename are two steps). The synced data then lives
    /// in an unlinked inode, so it must not be acknowledged: the flush fails, and with it the
    /// log, which is re-opened (in a cluster, acquired again) from the files as they are. On
    /// NFS the same replacement makes this broker's file handle stale, and the fsync itself
    /// fails.
    fn check_still_linked(&self, seg: &Arc<Segment>, file: &std::fs::File) -> io::Result<()> {
        use rustix::fs::{statx, AtFlags, StatxFlags};
        // From the server, not an attribute cache (NFS).
        let st = statx(
            file,
            "",
            AtFlags::EMPTY_PATH | AtFlags::STATX_FORCE_SYNC,
            StatxFlags::NLINK,
        )?;
        let linked = st.stx_nlink > 0;
        if linked
            || !self
                .shared
                .read()
                .segments
                .iter()
                .any(|s| Arc::ptr_eq(s, seg))
        {
            return Ok(());
        }
        Err(io::Error::other(format!(
            "segment {} was replaced or removed by another process while this broker wrote to it",
            seg.base_offset
        )))
    }

    /// An fsync of `path` failed: the kernel may have dropped pages it could not write (and
    /// a later fsync of the file can succeed without them), so the log never trusts its page
    /// cache again for data at or past `synced`; it refuses every later append, roll and
    /// flush until it is re-opened and recovered from storage. Returns that refusal.
    pub(crate) fn sync_failed(&self, path: PathBuf, synced: i64, e: io::Error) -> io::Error {
        self.fail(LogFailure::SyncFailed {
            path,
            synced,
            cause: e.to_string(),
        });
        match self.check_not_failed() {
            Err(refused) => refused,
            Ok(()) => e,
        }
    }

    /// A write of an append to `seg` failed, and may have left bytes after `size`, the
    /// segment's recorded end: cut the `.log` back there (as tikv/raft-engine does), so no
    /// later append or roll leaves them inside the log. If that fails too, the log refuses
    /// every later append (nothing is ever written after garbage); re-opening recovers it.
    fn write_failed(&self, seg: &Segment, size: u64, e: io::Error) -> AppendError {
        if crate::mutation::active(crate::mutation::Mutation::ExitOnEnospc)
            && e.raw_os_error() == Some(rustix::io::Errno::NOSPC.raw_os_error())
        {
            std::process::exit(1);
        }
        if let Err(cut) = self.cut_log(seg, size) {
            self.fail(LogFailure::UntrimmedWrite {
                path: seg_path(&seg.dir, seg.base_offset, SegmentFileKind::Log),
                size,
                cause: cut.to_string(),
            });
        }
        self.aio(e)
    }

    /// Cut a segment's `.log` to `size` bytes if it is longer. A file of the right length is
    /// not written, so it stays clean: the flush after a close of an idle partition then
    /// has nothing to fsync.
    fn cut_log(&self, seg: &Segment, size: u64) -> io::Result<()> {
        #[cfg(test)]
        crate::faults::fire(&mut self.faults.lock().truncate, rustix::io::Errno::IO)?;
        if seg.log.get()?.metadata()?.len() != size {
            seg.log.for_write()?.set_len(size)?;
        }
        Ok(())
    }

    /// Write an append's data at `at` of the active segment's `.log`.
    fn write_data(&self, seg: &Segment, parts: &mut [IoSlice<'_>], at: u64) -> io::Result<usize> {
        #[cfg(test)]
        if let Some(n) = self.faults.lock().data_write.take() {
            let head: Vec<u8> = parts
                .iter()
                .flat_map(|p| p.iter().copied())
                .take(n)
                .collect();
            seg.log.for_write()?.write_all_at(&head, at)?;
            return Err(rustix::io::Errno::NOSPC.into());
        }
        write_all_vectored_at(&*seg.log.for_write()?, parts, at)
    }

    /// Write an append's index entries (see [`Segment::write_index_tails`]).
    fn write_index(
        &self,
        seg: &Segment,
        offsets: (usize, &[u8]),
        times: (usize, &[u8]),
    ) -> io::Result<()> {
        #[cfg(test)]
        crate::faults::fire(&mut self.faults.lock().index_write, rustix::io::Errno::IO)?;
        seg.write_index_tails(offsets, times)
    }

    /// Roll if due; returns the (possibly new) active segment's size.
    #[allow(clippy::too_many_arguments)]
    fn maybe_roll(
        &self,
        w: &mut Writer,
        cfg: &LogConfig,
        now_ms: i64,
        append_bytes: u64,
        n_batches: usize,
        last_offset: i64,
        active_size: u64,
        leo: i64,
    ) -> Result<u64, AppendError> {
        if active_size == 0 {
            return Ok(active_size);
        }
        let segs = self.shared.read().segments.clone();
        let Some(active) = segs.last() else {
            return Ok(active_size);
        };
        let (n_oi, n_ti, rolling_ts) = {
            let m = active.meta.read();
            (
                m.offset_index.as_ref().map_or(0, |v| v.len()),
                m.time_index.as_ref().map_or(0, |v| v.len()),
                m.rolling_ts,
            )
        };
        let max_oi = (cfg.segment_index_bytes as usize / OFFSET_INDEX_ENTRY_LEN).max(1);
        let max_ti = (cfg.segment_index_bytes as usize / TIME_INDEX_ENTRY_LEN).max(1);
        let reason = if active_size + append_bytes > cfg.segment_bytes {
            Some("size")
        } else if now_ms.saturating_sub(rolling_ts)
            > cfg.segment_ms - roll_jitter_ms(&self.tp, active.base_offset, cfg)
        {
            Some("time")
        } else if n_oi + n_batches > max_oi || n_ti + n_batches + 1 > max_ti {
            Some("index full")
        } else if last_offset - active.base_offset > i64::from(i32::MAX) {
            Some("offset overflow")
        } else if active_size + append_bytes > i32::MAX as u64 {
            Some("position overflow")
        } else {
            None
        };
        match reason {
            None => Ok(active_size),
            Some(why) => {
                tracing::debug!(tp = ?self.tp, reason = why, new_base = leo, "rolling segment");
                self.roll_locked(w, now_ms).map_err(|e| self.aio(e))?;
                Ok(0)
            }
        }
    }

    /// Seal the active segment and start a new one at the log end. Caller holds the writer.
    pub(crate) fn roll_locked(&self, w: &mut Writer, now_ms: i64) -> io::Result<()> {
        let (segs, leo) = {
            let s = self.shared.read();
            (s.segments.clone(), s.leo)
        };
        let Some(active) = segs.last() else {
            return Err(io_err("no active segment".into()));
        };
        if active.size() == 0 && active.base_offset == leo {
            return Ok(());
        }
        self.check_not_failed()?;
        self.gate_io()?;
        self.seal(w, active)?;
        // Again before a new file appears: the seal wrote and may have waited on the volume.
        self.gate_io()?;
        let dir = self.dir();
        let mut spare = self.spare.try_lock().and_then(|mut s| s.take());
        let created = match spare
            .as_mut()
            .map(|sp| Segment::from_spare(sp, &dir, leo, now_ms))
        {
            Some(Ok(seg)) => Ok(seg),
            Some(Err(e)) => {
                tracing::warn!(tp = ?self.tp, error = %e, "could not rename the spare segment files; creating the segment's");
                Segment::create(&dir, leo, now_ms, None)
            }
            None => Segment::create(&dir, leo, now_ms, None),
        };
        let seg = created.map_err(|e| self.roll_refused(leo, e))?;
        let mut new_list: Vec<Arc<Segment>> = segs.as_ref().clone();
        new_list.push(Arc::new(seg));
        w.cursor = IndexCursor::new(leo);
        {
            let mut s = self.shared.write();
            s.segments = Arc::new(new_list);
            s.active_size = 0;
            s.dir_dirty = true;
        }
        self.flush_work.store(true, Ordering::Release);
        self.write_producer_snapshot(w, leo, spare.as_mut());
        if let Some(sp) = spare {
            sp.discard();
        }
        Ok(())
    }

    /// A roll could not create the segment at `leo`. A file already there (a former owner's
    /// late roll at the same offset, or a link left behind by a move whose unlink failed) is
    /// never removed by a roll: the log fails instead, so that it is re-opened (in a cluster,
    /// acquired again), and the open decides from what it recorded whether that file is a
    /// stray; every later append would otherwise try the same roll and be refused.
    fn roll_refused(&self, leo: i64, e: io::Error) -> io::Error {
        if e.kind() != io::ErrorKind::AlreadyExists {
            return e;
        }
        self.fail(LogFailure::Refused {
            reason: format!("a roll found a segment file at its new base {leo} ({e})"),
        });
        match self.check_not_failed() {
            Err(refused) => refused,
            Ok(()) => e,
        }
    }

    pub(crate) fn prepare_spare_impl(&self) -> bool {
        if self.deleted.load(Ordering::Acquire) || self.failure().is_some() || !self.writable() {
            return false;
        }
        let Some(mut slot) = self.spare.try_lock() else {
            return true;
        };
        let dir = self.dir();
        self.prune_snapshots();
        if slot.is_some() {
            return false;
        }
        let half = self.config.read().segment_bytes / 2;
        if self.shared.read().active_size < half {
            return false;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        let token = format!("{:x}-{now:x}", std::process::id());
        match crate::segment::Spare::create(&dir, &token) {
            Ok(spare) => {
                *slot = Some(spare);
                false
            }
            Err(e) => {
                tracing::warn!(tp = ?self.tp, dir = %dir.display(), error = %e, "could not make the next segment's files ahead of its roll");
                true
            }
        }
    }

    /// The producer state as of `leo` (the writer is held, so nothing was appended past it)
    /// into `<leo>.snapshot`, without fsync: it is listed as unsynced for the next flush
    /// ([`Log::sync_snapshots`]). A failure is logged: the next open replays from an older
    /// snapshot, or from the log start (`crate::snapshots`).
    pub(crate) fn write_producer_snapshot(
        &self,
        w: &Writer,
        leo: i64,
        spare: Option<&mut crate::segment::Spare>,
    ) {
        let dir = self.dir();
        // The loaded file is replaced (or, if this write fails, may be gone or torn).
        self.loaded_end_snapshot
            .lock()
            .take_if(|(offset, _)| *offset == leo);
        let spare = spare.and_then(|sp| {
            let file = sp.take(SegmentFileKind::Snapshot)?;
            Some((file, sp.path(SegmentFileKind::Snapshot)))
        });
        let written =
            crate::snapshots::write(&dir, leo, &w.producers, self.leader_epoch(), spare, &|| {
                self.gate_io()
            });
        match written {
            Ok(crc) => {
                self.snapshots_unsynced.lock().push(leo);
                self.remember_snapshot_crc(leo, crc);
            }
            Err(e) => {
                tracing::warn!(tp = ?self.tp, offset = leo, error = %e, "could not write a producer snapshot")
            }
        }
        // The old ones go in the next `prepare_spare`, off the append path.
        self.snapshots_unpruned.store(true, Ordering::Release);
    }

    /// Whether the snapshot file at `leo` holds exactly the state `producers` and is one this
    /// log knows, by its CRC: the one its open loaded (durable) or one it wrote (durable once
    /// its flush succeeds, else the log fails). A file it does not know (one
    /// whose fsync at open failed, a former owner's landing late in a shared directory) is
    /// written again, whatever it holds.
    fn holds_end_snapshot(&self, leo: i64, producers: &crate::producer::ProducerStates) -> bool {
        let Some(crc) = crate::snapshots::same_at(&self.dir(), leo, producers) else {
            return false;
        };
        *self.loaded_end_snapshot.lock() == Some((leo, crc))
            || self.snapshot_crcs.lock().contains(&(leo, crc))
    }

    /// The CRC of the snapshot at `offset`, which holds this log's state there (it wrote it):
    /// one it may vouch for once durable.
    fn remember_snapshot_crc(&self, offset: i64, crc: u32) {
        let mut crcs = self.snapshot_crcs.lock();
        crcs.retain(|(o, _)| *o != offset);
        crcs.push((offset, crc));
        let n = crcs.len();
        if n > SNAPSHOT_CRCS_KEPT {
            crcs.drain(..n - SNAPSHOT_CRCS_KEPT);
        }
    }

    /// The newest producer snapshot this log wrote at or below `upto` that is durable, with
    /// the CRC-32C it wrote in it: what an owner vouches for in its owner record, so that the
    /// next owner's open trusts it though it is not at a segment base (a former owner's file
    /// there would carry another CRC).
    pub(crate) fn vouched_snapshot_impl(&self, upto: i64) -> Option<crate::SnapshotRef> {
        let unsynced = self.snapshots_unsynced.lock().clone();
        let crcs = self.snapshot_crcs.lock();
        let (offset, crc) = crcs
            .iter()
            .filter(|(o, _)| *o <= upto && !unsynced.contains(o))
            .max_by_key(|(o, _)| *o)
            .copied()?;
        // Each was written at the log end then, so it lies at a batch boundary.
        let previous = crcs.iter().map(|(o, _)| *o).filter(|o| *o < offset).max();
        Some(crate::SnapshotRef {
            offset,
            crc,
            previous,
        })
    }

    /// The snapshots written at or below `upto` and not yet fsynced. They stay listed (and
    /// pruning leaves them) until [`Log::snapshots_durable`].
    fn snapshots_unsynced_upto(&self, upto: i64) -> Vec<i64> {
        let mut v: Vec<i64> = self
            .snapshots_unsynced
            .lock()
            .iter()
            .copied()
            .filter(|o| *o <= upto)
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// fsync the snapshot files `offsets`; the caller fsyncs the directory after. A failure
    /// fails the log, as a failed fsync of any of its files does (the kernel may have dropped
    /// the pages it could not write, and a later fsync would report nothing).
    fn sync_snapshots(&self, offsets: &[i64], synced: i64) -> io::Result<()> {
        let dir = self.dir();
        for &offset in offsets {
            crate::snapshots::sync(&dir, offset).map_err(|e| {
                self.sync_failed(seg_path(&dir, offset, SegmentFileKind::Snapshot), synced, e)
            })?;
        }
        Ok(())
    }

    /// `offsets` were fsynced, and their directory entries after them: they leave the
    /// unsynced list, and the old snapshots they replace may go at the next prune.
    fn snapshots_durable(&self, offsets: &[i64]) {
        if offsets.is_empty() {
            return;
        }
        self.snapshots_unsynced
            .lock()
            .retain(|o| !offsets.contains(o));
        self.snapshots_unpruned.store(true, Ordering::Release);
        self.flush_work.store(true, Ordering::Release);
    }

    /// Remove all but the newest durable snapshots, if a snapshot was written or made durable
    /// since the last prune; never one not yet fsynced (`crate::snapshots::prune`). Off the
    /// append path: removing a file can wait for the volume.
    pub(crate) fn prune_snapshots(&self) {
        if self.snapshots_unpruned.swap(false, Ordering::AcqRel) {
            let recovery_point = self.recorded_recovery_point.load(Ordering::Acquire);
            if let Err(e) =
                crate::snapshots::prune(&self.dir(), &self.snapshots_unsynced, recovery_point)
            {
                tracing::warn!(tp = ?self.tp, error = %e, "could not remove old producer snapshots");
            }
        }
    }

    /// Kafka's onBecomeInactiveSegment / close: a final time index entry for the segment's max
    /// timestamp, and index files cut to exactly their entries. The `.log` is cut to the
    /// segment's recorded size too: bytes a failed write may have left after it must not
    /// become part of a sealed segment (after a restart they would be read as batches, or
    /// stop recovery, which then deletes every later segment).
    fn seal(&self, w: &mut Writer, active: &Arc<Segment>) -> io::Result<()> {
        self.cut_log(active, active.size())?;
        let mut cursor = w.cursor;
        if let Some(t) = cursor.maybe_time_entry() {
            let mut m = active.meta.write();
            Arc::make_mut(m.time_index.get_or_insert_with(Default::default)).push(t);
        }
        w.cursor = cursor;
        // Every entry held back, and the final one, into the files.
        active.write_pending_index()?;
        // Reads of a sealed segment scan its file; its recent batches are no longer kept.
        active.meta.write().recent = RecentBatches::default();
        let m = active.meta.read();
        let n_oi = m.offset_index.as_ref().map_or(0, |v| v.len());
        let n_ti = m.time_index.as_ref().map_or(0, |v| v.len());
        drop(m);
        // Cut to the entries only where the file is longer (a file of the right length is
        // not written, so an idle partition's files stay clean for the file cache).
        for (file, len) in [
            (&active.index_file, (n_oi * OFFSET_INDEX_ENTRY_LEN) as u64),
            (&active.time_file, (n_ti * TIME_INDEX_ENTRY_LEN) as u64),
        ] {
            if file.get()?.metadata()?.len() != len {
                file.for_write()?.set_len(len)?;
            }
        }
        Ok(())
    }

    /// Close semantics for shutdown/close_log: final time index entry on the active segment,
    /// and the producer snapshot at the end, made durable at once (closing is off the append
    /// path; its caller flushed the data below it first), before the old snapshots go.
    pub(crate) fn close_active(&self) -> io::Result<()> {
        {
            let mut w = self.writer.lock();
            let (segs, leo) = {
                let s = self.shared.read();
                (s.segments.clone(), s.leo)
            };
            let Some(active) = segs.last() else {
                return Ok(());
            };
            self.gate_io()?;
            self.seal(&mut w, active)?;
            // A snapshot of exactly this state at the end already (an idle partition's, from
            // its last close or roll) is not written again, nor one of a log never written
            // to (an open replays nothing and starts empty), as Kafka takes one at close only
            // past its last: the rename and directory fsync of 100,000 idle partitions were
            // most of a shutdown. Any there at open is durable (the loader's rule), and one
            // this process wrote is until its flush (`snapshots_unsynced`).
            if leo == 0 && w.producers.len() == 0 {
                // Nothing to write.
            } else if self.holds_end_snapshot(leo, &w.producers) {
                // Kept.
            } else {
                self.write_producer_snapshot(&w, leo, None);
            }
        }
        self.make_snapshots_durable()?;
        self.prune_snapshots();
        Ok(())
    }

    /// fsync every snapshot written and not yet durable, then the directory: for the paths
    /// off the append path that write one and must not leave it to the next flush (a close,
    /// a move to another log dir).
    pub(crate) fn make_snapshots_durable(&self) -> io::Result<()> {
        let snapshots = self.snapshots_unsynced_upto(i64::MAX);
        if snapshots.is_empty() {
            return Ok(());
        }
        let synced = self.shared.read().synced;
        self.sync_snapshots(&snapshots, synced)?;
        let dir = self.dir();
        sync_dir(&dir).map_err(|e| self.sync_failed(dir, synced, e))?;
        self.snapshots_durable(&snapshots);
        Ok(())
    }

    // ------------------------------------------------------------------------------------
    // Read (the bounded read's steps: `log/read.rs`)
    // ------------------------------------------------------------------------------------

    pub(crate) fn read_impl(
        &self,
        offset: i64,
        max_bytes: u32,
        min_one_batch: bool,
    ) -> Result<ReadResult, ReadError> {
        self.read_from(offset, max_bytes, min_one_batch, true)
    }

    pub(crate) fn read_isolated_impl(
        &self,
        offset: i64,
        max_bytes: u32,
        min_one_batch: bool,
        isolation: crate::Isolation,
    ) -> Result<ReadResult, ReadError> {
        self.read_isolated_from(offset, max_bytes, min_one_batch, isolation, false)
    }

    /// As [`Log::read_isolated`]; `cached_only`: never wait for the volume, fail with
    /// [`ReadError::WouldBlock`] instead when something the read needs (batch headers,
    /// sparse or transaction indexes) is not in memory or the page cache.
    pub(crate) fn read_isolated_from(
        &self,
        offset: i64,
        max_bytes: u32,
        min_one_batch: bool,
        isolation: crate::Isolation,
        cached_only: bool,
    ) -> Result<ReadResult, ReadError> {
        let committed = isolation == crate::Isolation::ReadCommitted;
        // One look at the log for the data and its aborted transactions: a segment removed
        // in between (retention, DeleteRecords, a cleaner's swap) still lists the aborted
        // transactions of the data it gave, as Kafka's read does from the segment it read.
        // The view holds the segments, so their files stay until it is dropped.
        let view = self.visible(committed);
        let (mut r, upper) =
            self.read_bounded(&view, offset, max_bytes, min_one_batch, true, cached_only)?;
        if committed {
            #[cfg(test)]
            if r.slice.is_some() {
                let hook = self.faults.lock().read_committed_gap.take();
                if let Some(hook) = hook {
                    (hook.0)(self);
                }
            }
            let aborted = if r.slice.is_some() {
                if cached_only && !aborted_loaded(&view.all, offset) {
                    return Err(ReadError::WouldBlock {
                        tp: self.tp.clone(),
                    });
                }
                self.collect_aborted(&view.all, offset, upper)
                    .map_err(|source| ReadError::Io {
                        tp: self.tp.clone(),
                        source,
                    })?
            } else {
                Vec::new()
            };
            r.aborted = Some(aborted);
        }
        Ok(r)
    }

    /// Rebuild the transaction index of `seg` from the log (its `.txnindex` was found
    /// damaged after the open): see [`rebuild_walkback`].
    pub(crate) fn rebuild_txn_index(
        &self,
        seg: &Arc<Segment>,
    ) -> io::Result<Arc<Vec<sluice_format::txn::TxnIndexEntry>>> {
        let (segs, log_start) = {
            let s = self.shared.read();
            (s.segments.clone(), s.log_start)
        };
        let Some(idx) = segs.iter().position(|x| Arc::ptr_eq(x, seg)) else {
            return Ok(Arc::new(Vec::new()));
        };
        let out = rebuild_walkback(&segs, idx, log_start)?;
        // The segment lies below the recovery point (an open loads the others' indexes):
        // no later flush syncs what is rewritten here, so it is synced now, file and name.
        let mut t = seg.txn.lock();
        self.gate_io()?;
        t.file = None;
        t.replace(&seg.dir, seg.base_offset, out)?;
        t.sync(&seg.dir, seg.base_offset)?;
        sync_dir(&seg.dir)?;
        t.load(&seg.dir, seg.base_offset)
    }

    /// Kafka's `collectAbortedTransactions(fetchOffset, upperBoundOffset)` over `segs` (the
    /// segments the read found its data in, [`View::all`]): the aborted transactions whose
    /// marker is at or after `fetch_offset` and whose first offset is below `upper`, from
    /// the segment holding `fetch_offset` on, until an entry's last stable offset reaches
    /// `upper` (no later transaction can overlap the range).
    fn collect_aborted(
        &self,
        segs: &[Arc<Segment>],
        fetch_offset: i64,
        upper: i64,
    ) -> io::Result<Vec<crate::AbortedTxn>> {
        let from = segs
            .partition_point(|s| s.base_offset <= fetch_offset)
            .saturating_sub(1);
        let mut out = Vec::new();
        for seg in &segs[from..] {
            let entries = match seg.aborted_txns() {
                Ok(e) => e,
                Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                    tracing::warn!(tp = ?self.tp, segment = seg.base_offset, error = %e,
                        "damaged transaction index; rebuilding it from the log");
                    self.rebuild_txn_index(seg)?
                }
                Err(e) => return Err(e),
            };
            for e in entries.iter() {
                if e.last_offset >= fetch_offset && e.first_offset < upper {
                    out.push(crate::AbortedTxn {
                        producer_id: e.producer_id,
                        first_offset: e.first_offset,
                    });
                }
                if e.last_stable_offset >= upper {
                    return Ok(out);
                }
            }
        }
        Ok(out)
    }

    /// A read of everything appended, past the published or synced mark too: what this
    /// broker's own coordinator wrote (`Log::read_appended`).
    pub(crate) fn read_appended_impl(
        &self,
        offset: i64,
        max_bytes: u32,
    ) -> Result<ReadResult, ReadError> {
        let view = {
            let s = self.shared.read();
            let (lso, _) = stable_mark(&s);
            View {
                segs: s.segments.clone(),
                all: s.segments.clone(),
                log_start: s.log_start,
                log_end: s.leo,
                end: s.leo,
                active_size: s.active_size,
                hw: high_watermark_of(&s),
                lso,
            }
        };
        self.read_bounded(&view, offset, max_bytes, true, true, false)
            .map(|(r, _)| r)
    }

    /// `use_recent`: answer a read of the active segment from its recent batches when they
    /// can (tests compare the answers with and without).
    pub(crate) fn read_from(
        &self,
        offset: i64,
        max_bytes: u32,
        min_one_batch: bool,
        use_recent: bool,
    ) -> Result<ReadResult, ReadError> {
        let view = self.visible(false);
        self.read_bounded(&view, offset, max_bytes, min_one_batch, use_recent, false)
            .map(|(r, _)| r)
    }

    pub(crate) fn offset_for_timestamp_impl(&self, ts: i64) -> io::Result<Option<(i64, i64)>> {
        let (segs, log_start, _leo, active_size) = self.snapshot();
        let interval = self.interval();
        for (i, seg) in segs.iter().enumerate() {
            if seg.next_offset() <= log_start {
                continue;
            }
            let (max_ts, _) = seg.timestamps(interval)?;
            if max_ts < ts {
                continue;
            }
            let limit = Self::seg_limit(&segs, i, active_size);
            let from_off = seg.lookup_time_offset(ts, interval)?.max(log_start);
            let start = seg.lookup_position(from_off, limit, interval)?;
            let log = seg.log.get()?;
            let mut scanner = BatchScanner::new(log.clone(), start, limit, false);
            loop {
                let (pos, h) = match scanner.next_batch() {
                    Ok(Some(x)) => x,
                    Ok(None) => break,
                    Err(e) => return Err(e.into_io()),
                };
                if h.last_offset() < log_start || h.max_timestamp < ts {
                    continue;
                }
                if h.compression_codec() == 0 {
                    let mut b = vec![0u8; h.total_len()];
                    log.read_exact_at(&mut b, pos)?;
                    if let Ok(recs) = record_timestamps(&b) {
                        for (delta, rts) in recs {
                            let o = h.base_offset + i64::from(delta);
                            if o >= log_start && rts >= ts {
                                return Ok(Some((o, rts)));
                            }
                        }
                    }
                }
                return Ok(Some((h.base_offset.max(log_start), h.max_timestamp)));
            }
        }
        Ok(None)
    }

    pub(crate) fn max_timestamp_impl(&self) -> Option<(i64, i64)> {
        let (segs, log_start, _, active_size) = self.snapshot();
        let interval = self.interval();
        let mut best: Option<(usize, i64, i64)> = None;
        for (i, s) in segs.iter().enumerate() {
            if s.next_offset() <= log_start {
                continue;
            }
            let (max_ts, off_max_ts) = match s.timestamps(interval) {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(tp = ?self.tp, segment = s.base_offset, error = %e,
                        "could not read a segment's largest timestamp");
                    return None;
                }
            };
            if max_ts < 0 {
                continue;
            }
            if best.is_none_or(|b| max_ts > b.1) {
                best = Some((i, max_ts, off_max_ts));
            }
        }
        let (i, max_ts, offset) = best?;
        // Segment metadata knows the batch; Kafka answers with the record. Refine within the
        // batch when it is uncompressed (a compressed batch answers with the batch's offset).
        let refined = self
            .record_with_timestamp(&segs, i, active_size, offset, max_ts)
            .ok()
            .flatten();
        Some((max_ts, refined.unwrap_or(offset).max(log_start)))
    }

    /// The offset of the first record carrying `ts` in the uncompressed batch containing
    /// `offset` of segment `i`.
    fn record_with_timestamp(
        &self,
        segs: &[Arc<Segment>],
        i: usize,
        active_size: u64,
        offset: i64,
        ts: i64,
    ) -> io::Result<Option<i64>> {
        let seg = &segs[i];
        let limit = Self::seg_limit(segs, i, active_size);
        let start = seg.lookup_position(offset, limit, self.interval())?;
        let log = seg.log.get()?;
        let mut scanner = BatchScanner::new(log.clone(), start, limit, false);
        while let Some((pos, h)) = scanner.next_batch().map_err(|e| e.into_io())? {
            if h.last_offset() < offset {
                continue;
            }
            if h.base_offset > offset || h.compression_codec() != 0 {
                return Ok(None);
            }
            let mut b = vec![0u8; h.total_len()];
            log.read_exact_at(&mut b, pos)?;
            let found = record_timestamps(&b)
                .ok()
                .and_then(|recs| recs.into_iter().find(|(_, rts)| *rts == ts))
                .map(|(delta, _)| h.base_offset + i64::from(delta));
            return Ok(found);
        }
        Ok(None)
    }

    // ------------------------------------------------------------------------------------
    // Flush (its steps: `log/flush.rs`)
    // ------------------------------------------------------------------------------------

    /// Keep the recovery point within about `interval_ms` of the log end: when at least
    /// `min_bytes` were appended to the active segment since it last moved here, and
    /// `interval_ms` passed, a producer snapshot at the log end, then a flush of everything
    /// ([`FlushScope::All`]), which moves the recovery point to at least the snapshot's
    /// offset. A restart after a crash then validates only what lies past the recovery point
    /// (`Segment::resume_point`) and replays producer state from the snapshot. Acks mean what
    /// they meant: this adds a durable point, it waits for no append. Returns whether it ran.
    pub(crate) fn advance_recovery_point_impl(
        &self,
        now_ms: i64,
        min_bytes: u64,
        interval_ms: i64,
    ) -> io::Result<bool> {
        if self.failure.lock().is_some() || !self.writable() {
            return Ok(false);
        }
        {
            let last = self.rp_followed.lock();
            if now_ms.saturating_sub(last.at_ms) < interval_ms {
                return Ok(false);
            }
            let s = self.shared.read();
            let Some(active) = s.segments.last() else {
                return Ok(false);
            };
            let since = if active.base_offset == last.base {
                s.active_size.saturating_sub(last.size)
            } else {
                s.active_size
            };
            if since < min_bytes || s.recovery_point >= s.leo {
                return Ok(false);
            }
        }
        // The state as of the log end, written under the writer lock as a roll writes its own
        // (nothing is appended past it meanwhile, and the log does not move to another dir).
        let (leo, base, size) = {
            let w = self.writer.lock();
            let (leo, base, size) = {
                let s = self.shared.read();
                let base = s.segments.last().map_or(s.leo, |a| a.base_offset);
                (s.leo, base, s.active_size)
            };
            self.write_producer_snapshot(&w, leo, None);
            (leo, base, size)
        };
        // The snapshot is made durable here, apart from the data: it holds no record, so a
        // failure to write or fsync it (a full volume) fails no log, as the flush's fsync of a
        // roll's snapshot does; it is removed and the recovery point stays (tried again later).
        if self.snapshots_unsynced.lock().contains(&leo) {
            let dir = self.dir();
            #[cfg(test)]
            let synced = crate::faults::fire(
                &mut self.faults.lock().snapshot_sync,
                rustix::io::Errno::NOSPC,
            );
            #[cfg(not(test))]
            let synced = Ok(());
            let synced = synced
                .and_then(|()| crate::snapshots::sync(&dir, leo))
                .and_then(|()| sync_dir(&dir));
            match synced {
                Ok(()) => self.snapshots_durable(&[leo]),
                Err(e) => {
                    tracing::warn!(tp = ?self.tp, offset = leo, error = %e,
                        "could not make a producer snapshot at the log end durable; removing it");
                    // Not past the write gate: after a takeover the name may be the new
                    // owner's (its acquisition rolls at the log end this owner left).
                    if self.gate().is_ok() {
                        crate::snapshots::remove_offset(&dir, leo);
                    }
                    self.snapshots_unsynced.lock().retain(|o| *o != leo);
                    self.snapshot_crcs.lock().retain(|(o, _)| *o != leo);
                    return Ok(false);
                }
            }
        } else {
            // Not written (a full volume): nothing to trust at the log end yet.
            return Ok(false);
        }
        self.flush_impl(FlushScope::All)?;
        *self.rp_followed.lock() = Followed {
            at_ms: now_ms,
            base,
            size,
        };
        Ok(true)
    }

    // ------------------------------------------------------------------------------------
    // Retention and deletion (the maintenance round's steps: `log/maintain.rs`)
    // ------------------------------------------------------------------------------------

    pub(crate) fn delete_records_impl(&self, offset: i64) -> Result<i64, ReadError> {
        let w = self.writer.lock();
        self.gate().map_err(ReadError::Fenced)?;
        let (log_start, leo) = {
            let s = self.shared.read();
            (s.log_start, s.leo)
        };
        if offset > leo || offset < 0 {
            return Err(ReadError::OffsetOutOfRange {
                tp: self.tp.clone(),
                requested: offset,
                log_start,
                log_end: leo,
            });
        }
        if offset <= log_start {
            return Ok(log_start);
        }
        self.shared.write().log_start = offset;
        let epochs_moved = self.epochs.lock().truncate_from_start(offset);
        drop(w);
        if epochs_moved {
            self.persist_epochs();
        }
        self.delete_below_log_start();
        Ok(self.shared.read().log_start)
    }

    /// Write `leader-epoch-checkpoint` as the cache holds it now. Its `fsync`s can take a
    /// device cache flush, so neither the writer nor the cache's lock is held here when the
    /// log start moved (every retention deletion): appends take both. Writers of the file
    /// take turns, each writing what the cache held when its turn came, so the newest
    /// content lands last. A failure is logged: the cache is rebuilt from the batches'
    /// epochs where recovery scans, and a stale first entry only starts below the log start.
    fn persist_epochs(&self) {
        let _turn = self.epoch_file.lock();
        if let Err(e) = self.gate() {
            // Not written: no flush may move the recovery point past the epoch until a
            // later write succeeds (a fenced log never flushes again anyway).
            self.epochs_unpersisted.store(true, Ordering::Release);
            tracing::debug!(tp = ?self.tp, "leader-epoch-checkpoint not written: {e}");
            return;
        }
        let (path, text) = self.epochs.lock().contents();
        match crate::fsutil::write_atomic(&path, text.as_bytes()) {
            Ok(()) => self.epochs_unpersisted.store(false, Ordering::Release),
            Err(e) => {
                self.epochs_unpersisted.store(true, Ordering::Release);
                tracing::warn!(tp = ?self.tp, error = %e, "could not write leader-epoch-checkpoint");
            }
        }
    }

    /// Whether `leader-epoch-checkpoint` holds every epoch the log knows (a failed write is
    /// tried again here). Until it does, no flush moves the recovery point: a recovery that
    /// starts past an epoch's first batch never sees where it began.
    fn epochs_durable(&self) -> bool {
        if !self.epochs_unpersisted.load(Ordering::Acquire) {
            return true;
        }
        self.persist_epochs();
        !self.epochs_unpersisted.load(Ordering::Acquire)
    }

    /// Delete sealed segments whose successor starts at or below the log start.
    fn delete_below_log_start(&self) {
        let (segs, log_start) = {
            let s = self.shared.read();
            (s.segments.clone(), s.log_start)
        };
        let n = segs
            .windows(2)
            .take_while(|w| w[1].base_offset <= log_start)
            .count();
        if n > 0 {
            self.delete_oldest(segs[n - 1].base_offset, "log start offset");
        }
    }

    /// Remove the oldest segments up to the one based at `last_base` from the log (never the
    /// active one) and schedule their files for deletion.
    fn delete_oldest(&self, last_base: i64, why: &str) {
        let mut w = self.writer.lock();
        if let Err(e) = self.gate() {
            tracing::debug!(tp = ?self.tp, reason = why, "segments not deleted: {e}");
            return;
        }
        let removed: Vec<Arc<Segment>> = {
            let mut s = self.shared.write();
            let sealed = s.segments.len().saturating_sub(1);
            let n = s.segments[..sealed]
                .iter()
                .take_while(|seg| seg.base_offset <= last_base)
                .count();
            if n == 0 {
                return;
            }
            let removed = s.segments[..n].to_vec();
            s.segments = Arc::new(s.segments[n..].to_vec());
            let first = s.segments[0].base_offset;
            if first > s.log_start {
                s.log_start = first;
            }
            s.dir_dirty = true;
            removed
        };
        let new_start = self.shared.read().log_start;
        let epochs_moved = self.epochs.lock().truncate_from_start(new_start);
        w.producers.truncate_head(new_start);
        drop(w);
        if epochs_moved {
            self.persist_epochs();
        }
        // Renames by name: not while a cleaned segment is being switched in (cleaner/swap.rs).
        let files = self.files_lock.lock();
        let mut retired = Vec::with_capacity(removed.len());
        for seg in removed {
            tracing::info!(tp = ?self.tp, segment = seg.base_offset, reason = why, "deleting segment");
            let mut attempt = Attempt::default();
            // Through the gate again: the writer lock was let go since it was asked. A refused
            // rename is left (the partition's owner deletes the files).
            let renamed = match self.gate_io().and_then(|()| seg.rename_deleted(None)) {
                Ok(()) => true,
                Err(e) if Fenced::in_io(&e).is_some() => false,
                Err(e) => {
                    attempt.failed(
                        self.del.retry,
                        &self.del.counters,
                        crate::fsutil::now_ms(),
                        &seg_path(&seg.dir, seg.base_offset, SegmentFileKind::Log),
                        &e,
                    );
                    false
                }
            };
            self.del.counters.added();
            retired.push(PendingSegment {
                dir: seg.dir.clone(),
                base: seg.base_offset,
                seg: Some(seg),
                renamed,
                attempt,
                tag: None,
            });
        }
        drop(files);
        self.pending.lock().extend(retired);
        self.reap_pending(crate::fsutil::now_ms());
    }

    /// Unlink deleted segments nobody holds any more (each when its retry is due). Returns
    /// true if none remain, and the time the next retry is due.
    ///
    /// The renames and the unlinks pass the write gate: once this broker may no longer write
    /// the partition's files they are left as they are, for the partition's next owner, whose
    /// open removes every `*.deleted` file it finds (`log/loader.rs`). A former owner must not
    /// unlink them: a rename it made after a takeover (one that passed the gate, then stalled
    /// past the deadline) may have given a `.deleted` name to a segment the new owner serves.
    pub(crate) fn reap_pending(&self, now_ms: i64) -> (bool, Option<i64>) {
        let mut pending = self.pending.lock();
        let del = &self.del;
        let mut next = None;
        pending.retain_mut(|p| {
            if !p.attempt.due(now_ms) {
                next = crate::deferred::earliest(next, p.attempt.next_at());
                return true;
            }
            if !self.writable() {
                // Not this broker's to rename or unlink any more: left as they are.
                return true;
            }
            let path = seg_path(&p.dir, p.base, SegmentFileKind::Log);
            if !p.renamed {
                let _files = self.files_lock.lock();
                let renamed = match &p.seg {
                    Some(seg) => seg.rename_deleted(p.tag.as_deref()),
                    None => rename_deleted_in(&p.dir, p.base, p.tag.as_deref()),
                };
                match renamed {
                    Ok(()) => p.renamed = true,
                    Err(e) => {
                        p.attempt
                            .failed(del.retry, &del.counters, now_ms, &path, &e);
                        next = crate::deferred::earliest(next, p.attempt.next_at());
                        return true;
                    }
                }
            }
            if let Some(seg) = &p.seg {
                // A fetch in flight (or a read snapshot) still holds the segment: wait. Only
                // this process's own handles count; they are closed before the unlink.
                if Arc::strong_count(seg) > 1 || seg.log.in_use() {
                    return true;
                }
            }
            // Close our handles first: never unlink a file this process holds open.
            p.seg = None;
            match unlink_deleted_in(&p.dir, p.base, p.tag.as_deref()) {
                Ok(()) => {
                    p.attempt.finished(&path);
                    del.counters.done(&p.attempt);
                    false
                }
                Err(e) => {
                    p.attempt
                        .failed(del.retry, &del.counters, now_ms, &path, &e);
                    next = crate::deferred::earliest(next, p.attempt.next_at());
                    true
                }
            }
        });
        (pending.is_empty(), next)
    }

    /// Take the deleted segments that still wait for their last reader (a move hands them to
    /// the removal of the old directory).
    pub(crate) fn take_pending(&self) -> Vec<PendingSegment> {
        std::mem::take(&mut *self.pending.lock())
    }

    /// Write the index files a first use found invalid and rebuilt in memory
    /// (`Segment::ensure_loaded`), each under the write gate, and sync them (they lie below
    /// the recovery point, where no flush syncs them). One that fails stays marked, for the
    /// next round.
    fn write_rebuilt_indexes(&self, interval: u64) {
        let segs = self.shared.read().segments.clone();
        for seg in segs.iter().filter(|s| s.meta.read().index_rewrite) {
            // Under the writer lock too: a move to another log dir copies the index files
            // under it (`relocate.rs`), and must not copy them emptied half-way.
            let written = seg.ensure_loaded(interval).and_then(|(oi, ti)| {
                let _files = self.files_lock.lock();
                let _writer = self.writer.lock();
                self.gate_io()?;
                seg.write_index_files(&oi, &ti, true)
            });
            match written {
                Ok(()) => seg.meta.write().index_rewrite = false,
                Err(e) => {
                    tracing::warn!(tp = ?self.tp, segment = seg.base_offset, error = %e,
                        "could not write rebuilt index files");
                    return;
                }
            }
        }
    }

    pub(crate) fn size_bytes_impl(&self) -> u64 {
        let (segs, _, _, active_size) = self.snapshot();
        let n = segs.len();
        segs.iter()
            .enumerate()
            .map(|(i, s)| if i + 1 == n { active_size } else { s.size() })
            .sum()
    }

    /// For a deleted log whose directory was renamed away: when no reader holds any file of
    /// it any more, drop every segment (closing the files) and return true; the directory can
    /// then be removed. Readers that come later find an empty log.
    pub(crate) fn release_files(&self) -> bool {
        {
            // Segments deleted earlier are in the directory too (renamed or not): their
            // removal is the directory's, once their readers are done.
            let mut pending = self.pending.lock();
            if pending.iter().any(|p| {
                p.seg
                    .as_ref()
                    .is_some_and(|s| Arc::strong_count(s) > 1 || s.log.in_use())
            }) {
                return false;
            }
            for p in pending.drain(..) {
                self.del.counters.done(&p.attempt);
            }
        }
        let mut s = self.shared.write();
        // The list itself may be held by an in-flight read.
        if Arc::strong_count(&s.segments) > 1 {
            return false;
        }
        let free = s
            .segments
            .iter()
            .all(|seg| Arc::strong_count(seg) == 1 && !seg.log.in_use());
        if free {
            s.segments = Arc::new(Vec::new());
        }
        free
    }

    pub(crate) fn mark_deleted(&self) {
        self.deleted.store(true, Ordering::Release);
        // Its files are closed, not removed: in a shared directory the next owner's open
        // removes them (this broker writes nothing there any more).
        self.drop_spare();
    }

    /// Close the spare's files, if any (an open of the partition removes them).
    pub(crate) fn drop_spare(&self) {
        drop(self.spare.lock().take());
    }

    /// Mark deleted while holding the writer lock (so no move switches directories at the
    /// same time); returns the directory the log is in.
    pub(crate) fn mark_deleted_locked(&self) -> PathBuf {
        let _w = self.writer.lock();
        self.deleted.store(true, Ordering::Release);
        self.drop_spare();
        self.dir()
    }

    /// Rename the directory of this deleted log to `target` (a `-delete` name), through the
    /// write gate (asked under the writer lock, immediately before), and only while it holds
    /// this log's topic's files (`log::retire_dir`). Ok(false) if it does not.
    pub(crate) fn retire_dir(&self, target: &Path) -> io::Result<bool> {
        let _w = self.writer.lock();
        self.gate_io()?;
        retire_dir(&self.dir(), target, self.topic_id)
    }

    pub(crate) fn end_offset_for_epoch_impl(&self, epoch: i32) -> Option<(i32, i64)> {
        let leo = self.shared.read().leo;
        self.epochs
            .lock()
            .end_offset_for(epoch, leo, self.leader_epoch())
    }

    pub(crate) fn epoch_entries(&self) -> Vec<(i32, i64)> {
        self.epochs.lock().entries().to_vec()
    }

    pub(crate) fn recovery_point(&self) -> i64 {
        self.shared.read().recovery_point
    }
}

/// Rename the partition directory `path` to `target` (a unique `-delete` name) if it holds
/// the files of topic `topic_id`, as its `partition.metadata` says before and after the
/// rename. Ok(false) if it does not (or is gone): in a shared log dir the name may belong to
/// another incarnation of the topic by now (deleted and created again, its new owner put the
/// old directory aside and made its own). Should the name change hands between the check and
/// the rename, the directory moved is not ours: it is put back, and nothing in it is touched.
fn retire_dir(path: &Path, target: &Path, topic_id: uuid::Uuid) -> io::Result<bool> {
    retire_dir_holding(path, target, Some(topic_id))
}

/// What a partition directory's `partition.metadata` says: None if the directory is not
/// there; `Some(None)` if it is there without the file (a Kafka log dir from before topic
/// ids, never opened here); `Some(Some(id))`. A file that cannot be read or parsed is an
/// error: nothing is decided on it.
pub(crate) fn read_dir_topic_id(dir: &Path) -> io::Result<Option<Option<uuid::Uuid>>> {
    match std::fs::read_to_string(dir.join(PARTITION_METADATA)) {
        Ok(t) => parse_partition_metadata(&t)
            .map(|id| Some(Some(uuid::Uuid::from_bytes(id))))
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => match std::fs::metadata(dir) {
            Ok(_) => Ok(Some(None)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// [`retire_dir`] for a directory whose `partition.metadata` names `holding` (None: has
/// none), as read before and after the rename.
pub(crate) fn retire_dir_holding(
    path: &Path,
    target: &Path,
    holding: Option<uuid::Uuid>,
) -> io::Result<bool> {
    if read_dir_topic_id(path)? != Some(holding) {
        return Ok(false);
    }
    match std::fs::rename(path, target) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    }
    if read_dir_topic_id(target).ok() != Some(Some(holding)) {
        tracing::error!(dir = %path.display(), "the partition directory changed hands while it was being deleted; putting it back");
        if let Err(e) = std::fs::rename(target, path) {
            tracing::error!(dir = %target.display(), to = %path.display(), error = %e,
                "could not put a partition directory back; it is left where it is");
        }
        return Ok(false);
    }
    if let Some(root) = path.parent() {
        if let Err(e) = sync_dir(root) {
            tracing::warn!(dir = %root.display(), error = %e, "fsync of log dir failed");
        }
    }
    Ok(true)
}

/// How long a partition goes without appends before maintenance flushes its active
/// segment's index files ([`Log::maintain`]).
pub(crate) const IDLE_FLUSH_MS: i64 = 10_000;

/// Max timestamp of the first batch (one header read), for segment.ms.
/// The size of a sealed segment's valid data, found without reading all of it: from the batch
/// its last offset index entry points at (if that batch is below `next_base`; otherwise from
/// the start) to the first batch that reaches `next_base`, is damaged, or is cut short; with
/// the position of a valid batch reaching `next_base`, if that is where it stopped.
pub(crate) fn verified_sealed_size(
    seg: &Segment,
    file_size: u64,
    next_base: i64,
) -> io::Result<(u64, Option<u64>)> {
    let below = |h: &BatchHeader| h.last_offset() < next_base;
    let index_file = seg.index_file.get()?;
    let log = seg.log.get()?;
    let ilen = index_file.metadata()?.len();
    let mut start = 0;
    if ilen >= OFFSET_INDEX_ENTRY_LEN as u64 {
        let mut b = [0u8; OFFSET_INDEX_ENTRY_LEN];
        index_file.read_exact_at(&mut b, ilen - OFFSET_INDEX_ENTRY_LEN as u64)?;
        if let Some(e) = OffsetIndexEntry::decode(&b) {
            let pos = u64::try_from(e.position).unwrap_or(u64::MAX);
            if pos < file_size {
                let mut probe = BatchScanner::new(&*log, pos, file_size, false);
                if let Ok(Some((at, h))) = probe.next_batch() {
                    if at == pos && below(&h) {
                        start = pos;
                    }
                }
            }
        }
    }
    let mut scanner = BatchScanner::new(&*log, start, file_size, false);
    let mut end = start;
    loop {
        match scanner.next_batch() {
            Ok(Some((pos, h))) if below(&h) => end = pos + h.total_len() as u64,
            Ok(Some((pos, _))) => return Ok((end, Some(pos))),
            Ok(None) | Err(ScanError::Corrupt { .. }) => return Ok((end, None)),
            Err(ScanError::Io(e)) => return Err(e),
        }
    }
}

/// Every transaction index [`Log::collect_aborted`] may read from `fetch_offset` on, in
/// `segs`, is in memory.
fn aborted_loaded(segs: &[Arc<Segment>], fetch_offset: i64) -> bool {
    let from = segs
        .partition_point(|s| s.base_offset <= fetch_offset)
        .saturating_sub(1);
    segs[from..].iter().all(|s| s.txns_loaded())
}

/// The transaction index of `segs[idx]` from the log alone: each ABORT marker in it whose
/// producer had a transaction open gets an entry, its first offset found by walking back
/// over the producer's batches to its previous marker or non-transactional batch (through
/// earlier segments if need be). The entries' last stable offset is the log start offset,
/// which never ends a search for aborted transactions early.
pub(crate) fn rebuild_walkback(
    segs: &[Arc<Segment>],
    idx: usize,
    log_start: i64,
) -> io::Result<Vec<sluice_format::txn::TxnIndexEntry>> {
    use crate::segment::txn_events;
    use crate::txn::TxnEvent;
    type Events = Vec<(i64, i64, u64, TxnEvent)>;
    let seg = &segs[idx];
    let here = txn_events(&*seg.log.get()?, seg.size())?;
    let mut earlier: Vec<Events> = Vec::new();
    let mut out = Vec::new();
    for (k, &(pid, offset, _, ev)) in here.iter().enumerate() {
        let TxnEvent::Marker(c) = ev else { continue };
        if c.control_type != sluice_format::txn::CONTROL_ABORT {
            continue;
        }
        let mut first = None;
        let mut walk = |evs: &[(i64, i64, u64, TxnEvent)]| -> bool {
            for &(p, o, _, e) in evs.iter().rev() {
                if p != pid {
                    continue;
                }
                match e {
                    TxnEvent::Data => first = Some(o),
                    _ => return true,
                }
            }
            false
        };
        let mut done = walk(&here[..k]);
        let mut j = 0;
        while !done && j < idx {
            if earlier.len() <= j {
                let s = &segs[idx - 1 - j];
                earlier.push(txn_events(&*s.log.get()?, s.size())?);
            }
            done = walk(&earlier[j]);
            j += 1;
        }
        if let Some(first) = first {
            out.push(sluice_format::txn::TxnIndexEntry {
                producer_id: pid,
                first_offset: first,
                last_offset: offset,
                last_stable_offset: log_start,
            });
        }
    }
    Ok(out)
}

/// The segment's share of `segment.jitter.ms`: as Kafka's, below the smaller of it and
/// `segment.ms`; a hash of the partition and the segment's base offset rather than a random
/// draw, so that it is the same every time the segment is asked (and after a restart).
fn roll_jitter_ms(tp: &TopicPartition, base_offset: i64, cfg: &LogConfig) -> i64 {
    use std::hash::{Hash, Hasher};
    let max = cfg.segment_jitter_ms.min(cfg.segment_ms);
    if max <= 0 {
        return 0;
    }
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (&tp.topic, tp.partition, base_offset).hash(&mut h);
    (h.finish() % max as u64) as i64
}

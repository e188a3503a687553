//! One log segment: `<base>.log` plus its `.index` and `.timeindex`, with the indexes held in
//! memory (loaded lazily for sealed segments) and appended to their files with plain writes.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use sluice_format::index::{
    decode_offset_index, decode_time_index, lookup_offset, lookup_time, valid_offset_index_prefix,
    valid_time_index_prefix,
};
use sluice_format::names::DELETED_SUFFIX;
use sluice_format::{
    segment_file_name, validate_batch, BatchHeader, FormatError, OffsetIndexEntry, SegmentFileKind,
    TimeIndexEntry, HEADER_LEN, OFFSET_INDEX_ENTRY_LEN, TIME_INDEX_ENTRY_LEN,
};

use crate::deferred::Attempt;
use crate::filecache::CachedFile;
use crate::recent::RecentBatches;

/// Read size of a header scan (fetch path, index rebuild).
pub(crate) const SCAN_CHUNK: usize = 16 * 1024;
/// Read size of a verifying (CRC) scan.
pub(crate) const VERIFY_CHUNK: usize = 1024 * 1024;

/// Bookkeeping that decides where sparse index entries go. The same rules run on append and
/// on rebuild, so a rebuilt index equals the one written while appending.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IndexCursor {
    pub base: i64,
    pub bytes_since: u64,
    pub max_ts: i64,
    pub off_max_ts: i64,
    pub last_off_rel: Option<i32>,
    pub last_time: Option<TimeIndexEntry>,
}

impl IndexCursor {
    pub(crate) fn new(base: i64) -> IndexCursor {
        IndexCursor {
            base,
            bytes_since: 0,
            max_ts: -1,
            off_max_ts: base,
            last_off_rel: None,
            last_time: None,
        }
    }

    fn rel(&self, offset: i64) -> i32 {
        // Callers guarantee offsets within [base, base + i32::MAX] (roll / recovery checks).
        i32::try_from(offset - self.base).unwrap_or(i32::MAX)
    }

    /// Account one batch at byte `pos`; returns the index entries to append.
    pub(crate) fn observe(
        &mut self,
        pos: u64,
        h: &BatchHeader,
        interval: u64,
    ) -> (Option<OffsetIndexEntry>, Option<TimeIndexEntry>) {
        if h.max_timestamp > self.max_ts {
            self.max_ts = h.max_timestamp;
            self.off_max_ts = h.last_offset();
        }
        let mut out = (None, None);
        if self.bytes_since > interval {
            let rel = self.rel(h.last_offset());
            if self.last_off_rel.is_none_or(|l| rel > l) {
                out.0 = Some(OffsetIndexEntry {
                    relative_offset: rel,
                    position: i32::try_from(pos).unwrap_or(i32::MAX),
                });
                self.last_off_rel = Some(rel);
            }
            out.1 = self.maybe_time_entry();
            self.bytes_since = 0;
        }
        self.bytes_since += h.total_len() as u64;
        out
    }

    /// A time index entry for the max timestamp so far, if larger than the last one.
    pub(crate) fn maybe_time_entry(&mut self) -> Option<TimeIndexEntry> {
        if self.max_ts < 0 {
            return None;
        }
        let last_ts = self.last_time.map_or(-1, |e| e.timestamp);
        if self.max_ts > last_ts {
            let e = TimeIndexEntry {
                timestamp: self.max_ts,
                relative_offset: self.rel(self.off_max_ts),
            };
            self.last_time = Some(e);
            Some(e)
        } else {
            None
        }
    }
}

/// `SegMeta::max_ts` of a segment whose time index was not read yet ([`Segment::unopened`]).
pub(crate) const MAX_TS_UNREAD: i64 = i64::MIN;

/// Mutable state of a segment, behind a short lock.
#[derive(Debug)]
pub(crate) struct SegMeta {
    /// Bytes of whole batches (for the active segment the log's `active_size` is what readers
    /// may see; this can run ahead of it while an append is being published).
    pub size: u64,
    /// Offset after the last batch (the base offset when empty).
    pub next_offset: i64,
    /// None until loaded (sealed segments load lazily).
    pub offset_index: Option<Arc<Vec<OffsetIndexEntry>>>,
    pub time_index: Option<Arc<Vec<TimeIndexEntry>>>,
    pub max_ts: i64,
    pub off_max_ts: i64,
    /// Timestamp that segment.ms counts from (first batch's max timestamp, else creation).
    pub rolling_ts: i64,
    /// File modification time (used by retention when no batch has a timestamp).
    pub mtime_ms: i64,
    /// The newest batches appended by this process, for reads at the tail (active segment
    /// only; emptied when the segment is sealed).
    pub recent: RecentBatches,
    /// Offset and time index entries known to be in the index files: the rest of the
    /// in-memory indexes (the active segment's newest entries) is written in groups
    /// ([`INDEX_WRITE_ENTRIES`]), when the segment is sealed and by a full flush. Lower than
    /// the truth is safe (entries are rewritten with the same bytes).
    pub index_on_disk: (usize, usize),
    /// The index files were found invalid on first use and rebuilt in memory
    /// ([`Segment::ensure_loaded`]); the log's maintenance writes them, under the write gate
    /// (a read never writes a partition's files).
    pub index_rewrite: bool,
}

impl SegMeta {
    /// Indexes just read from the index files, or rebuilt and written to them.
    pub(crate) fn set_indexes_as_on_disk(
        &mut self,
        oi: Vec<OffsetIndexEntry>,
        ti: Vec<TimeIndexEntry>,
    ) {
        self.index_on_disk = (oi.len(), ti.len());
        self.offset_index = Some(Arc::new(oi));
        self.time_index = Some(Arc::new(ti));
    }
}

/// Index entries of the active segment held back before they are written to the index files
/// together. Until then they live only in memory, which is enough: the active segment lies
/// past the recovery point, and recovery rebuilds its indexes from the data.
pub(crate) const INDEX_WRITE_ENTRIES: usize = 128;

#[derive(Debug)]
pub(crate) struct Segment {
    pub base_offset: i64,
    pub dir: PathBuf,
    /// The segment's files, opened on demand under the cap (`filecache.rs`).
    pub log: CachedFile,
    pub index_file: CachedFile,
    pub time_file: CachedFile,
    pub meta: RwLock<SegMeta>,
    /// The aborted transactions whose ABORT marker is in this segment (`.txnindex`).
    pub txn: parking_lot::Mutex<crate::txn::TxnIndex>,
}

/// A scan failure: I/O, or the data is not a valid batch at `pos`.
#[derive(Debug)]
pub(crate) enum ScanError {
    Io(io::Error),
    Corrupt { pos: u64, err: FormatError },
}

impl From<io::Error> for ScanError {
    fn from(e: io::Error) -> Self {
        ScanError::Io(e)
    }
}

impl ScanError {
    pub(crate) fn into_io(self) -> io::Error {
        match self {
            ScanError::Io(e) => e,
            ScanError::Corrupt { pos, err } => io::Error::new(
                io::ErrorKind::InvalidData,
                format!("invalid batch at position {pos}: {err}"),
            ),
        }
    }
}

/// Whether the file system turned down `RWF_NOWAIT` (then [`pread_cached`] reads as `pread`).
static NOWAIT_UNSUPPORTED: AtomicBool = AtomicBool::new(false);

/// `pread` that never waits for the volume: `preadv2(RWF_NOWAIT)`, which copies what the
/// page cache holds from `pos` on and stops at the first page it does not (an error of kind
/// `WouldBlock` when that is the first one). A file system that cannot say (`EOPNOTSUPP`)
/// gets a plain `pread`, as before this existed.
pub(crate) fn pread_cached(file: &File, buf: &mut [u8], pos: u64) -> io::Result<usize> {
    #[cfg(target_os = "linux")]
    if !NOWAIT_UNSUPPORTED.load(Ordering::Relaxed) {
        use rustix::io::{Errno, ReadWriteFlags};
        let mut bufs = [io::IoSliceMut::new(buf)];
        match rustix::io::preadv2(file, &mut bufs, pos, ReadWriteFlags::NOWAIT) {
            Ok(n) => return Ok(n),
            Err(e) if e == Errno::OPNOTSUPP => NOWAIT_UNSUPPORTED.store(true, Ordering::Relaxed),
            Err(e) => return Err(e.into()),
        }
    }
    file.read_at(buf, pos)
}

/// The file a [`BatchScanner`] reads: borrowed, or a descriptor of the file cache held
/// while the scan lasts.
pub(crate) enum ScanFile<'a> {
    Borrowed(&'a File),
    Held(Arc<File>),
}

impl std::ops::Deref for ScanFile<'_> {
    type Target = File;
    fn deref(&self) -> &File {
        match self {
            ScanFile::Borrowed(f) => f,
            ScanFile::Held(f) => f,
        }
    }
}

impl<'a> From<&'a File> for ScanFile<'a> {
    fn from(f: &'a File) -> Self {
        ScanFile::Borrowed(f)
    }
}

impl From<Arc<File>> for ScanFile<'_> {
    fn from(f: Arc<File>) -> Self {
        ScanFile::Held(f)
    }
}

/// Walks the batches of a file region with buffered positional reads.
pub(crate) struct BatchScanner<'a> {
    file: ScanFile<'a>,
    pos: u64,
    end: u64,
    buf: Vec<u8>,
    buf_start: u64,
    chunk: usize,
    verify: bool,
    /// Read only what the page cache holds ([`BatchScanner::cached_only`]).
    cached_only: bool,
}

impl<'a> BatchScanner<'a> {
    /// `verify`: read every batch whole and check its CRC; otherwise only headers are read.
    pub(crate) fn new(file: impl Into<ScanFile<'a>>, start: u64, end: u64, verify: bool) -> Self {
        BatchScanner {
            file: file.into(),
            pos: start,
            end,
            buf: Vec::new(),
            buf_start: 0,
            chunk: if verify { VERIFY_CHUNK } else { SCAN_CHUNK },
            verify,
            cached_only: false,
        }
    }

    /// Never wait for the volume: a read of a page that is not in the page cache fails with
    /// an error of kind `WouldBlock` instead (the fetch path on a runtime thread).
    pub(crate) fn cached_only(mut self) -> Self {
        self.cached_only = true;
        self
    }

    pub(crate) fn position(&self) -> u64 {
        self.pos
    }

    fn fill(&mut self, pos: u64, need: usize) -> Result<(), ScanError> {
        let have_end = self.buf_start + self.buf.len() as u64;
        if pos >= self.buf_start && pos + need as u64 <= have_end {
            return Ok(());
        }
        let avail = usize::try_from(self.end - pos).unwrap_or(usize::MAX);
        let want = need.max(self.chunk).min(avail);
        self.buf.resize(want, 0);
        if self.cached_only {
            let got = match pread_cached(&self.file, &mut self.buf, pos) {
                Ok(n) => n,
                Err(e) => {
                    self.buf.clear();
                    return Err(ScanError::Io(e));
                }
            };
            if got < need {
                // Not cached (or the file ended early: the waiting read will say which).
                self.buf.clear();
                return Err(ScanError::Io(io::ErrorKind::WouldBlock.into()));
            }
            self.buf.truncate(got);
            self.buf_start = pos;
            return Ok(());
        }
        match self.file.read_exact_at(&mut self.buf, pos) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => {
                self.buf.clear();
                return Err(ScanError::Corrupt {
                    pos,
                    err: FormatError::Truncated {
                        needed: need,
                        available: 0,
                    },
                });
            }
            Err(e) => {
                self.buf.clear();
                return Err(ScanError::Io(e));
            }
        }
        self.buf_start = pos;
        Ok(())
    }

    fn slice(&self, pos: u64, len: usize) -> &[u8] {
        let s = (pos - self.buf_start) as usize;
        &self.buf[s..s + len]
    }

    /// The bytes of the batch `next_batch` just returned (a verifying scanner only: it holds
    /// the whole batch).
    pub(crate) fn batch_bytes(&self, pos: u64, h: &BatchHeader) -> Option<&[u8]> {
        let len = h.total_len();
        let have_end = self.buf_start + self.buf.len() as u64;
        (self.verify && pos >= self.buf_start && pos + len as u64 <= have_end)
            .then(|| self.slice(pos, len))
    }

    /// Next (position, header), None at the end of the region.
    pub(crate) fn next_batch(&mut self) -> Result<Option<(u64, BatchHeader)>, ScanError> {
        if self.pos >= self.end {
            return Ok(None);
        }
        let pos = self.pos;
        let remaining = self.end - pos;
        if remaining < HEADER_LEN as u64 {
            return Err(ScanError::Corrupt {
                pos,
                err: FormatError::Truncated {
                    needed: HEADER_LEN,
                    available: remaining as usize,
                },
            });
        }
        self.fill(pos, HEADER_LEN)?;
        let h = BatchHeader::parse(self.slice(pos, HEADER_LEN))
            .map_err(|err| ScanError::Corrupt { pos, err })?;
        let total = h.total_len() as u64;
        if total > remaining {
            return Err(ScanError::Corrupt {
                pos,
                err: FormatError::Truncated {
                    needed: total as usize,
                    available: remaining as usize,
                },
            });
        }
        if self.verify {
            self.fill(pos, total as usize)?;
            validate_batch(self.slice(pos, total as usize))
                .map_err(|err| ScanError::Corrupt { pos, err })?;
        }
        self.pos = pos + total;
        Ok(Some((pos, h)))
    }
}

/// The transactional events of the batches of `log[..size]` with a producer id: (producer,
/// offset, position, event). What a rebuild of a segment's transaction index from its `.log`
/// reads (`log::rebuild_walkback`); a scan of the segment's file, so it lives here, below
/// the log, and names only the transaction module's types.
pub(crate) fn txn_events(
    log: &File,
    size: u64,
) -> io::Result<Vec<(i64, i64, u64, crate::txn::TxnEvent)>> {
    use crate::txn::{read_marker, TxnEvent};
    let mut out = Vec::new();
    let mut scanner = BatchScanner::new(log, 0, size, false);
    while let Some((pos, h)) = scanner.next_batch().map_err(|e| e.into_io())? {
        if h.producer_id < 0 {
            continue;
        }
        let ev = if sluice_format::txn::is_txn_marker(&h) {
            match read_marker(log, pos, &h)? {
                Some(c) => TxnEvent::Marker(c),
                None => continue,
            }
        } else if h.is_control() {
            continue;
        } else if h.is_transactional() {
            TxnEvent::Data
        } else {
            TxnEvent::Plain
        };
        out.push((h.producer_id, h.base_offset, pos, ev));
    }
    Ok(out)
}

/// A segment removed from the log whose files wait for their last reader. `seg` is dropped
/// (closing its files) before they are unlinked.
#[derive(Debug)]
pub(crate) struct PendingSegment {
    pub seg: Option<Arc<Segment>>,
    pub dir: PathBuf,
    pub base: i64,
    pub renamed: bool,
    pub attempt: Attempt,
    /// The tag of the `.deleted` names (the cleaner's removals), see [`deleted_path`].
    pub tag: Option<String>,
}

/// The max timestamp of the first batch of `seg` (None when there is none or it cannot be
/// read): what an open may take as a loaded segment's roll time (`segment.ms`), and what the
/// cleaner's `max.compaction.lag.ms` check compares.
pub(crate) fn read_first_ts(seg: &Segment) -> Option<i64> {
    let mut scanner = BatchScanner::new(seg.log.get().ok()?, 0, seg.size(), false);
    match scanner.next_batch() {
        Ok(Some((_, h))) => Some(h.max_timestamp),
        _ => None,
    }
}

pub(crate) fn seg_path(dir: &Path, base: i64, kind: SegmentFileKind) -> PathBuf {
    dir.join(segment_file_name(base, kind))
}

/// Where the extent anchors of a new `.log` start: past any position a segment can hold
/// (Kafka's positions are 32-bit signed, so no segment reaches 2 GiB).
pub(crate) const ANCHOR_OFFSET: u64 = 1 << 31;
/// How many anchors: more than the 4 extents an ext4 inode holds itself.
pub(crate) const ANCHORS: u64 = 6;
/// Bytes of each anchor (one block), and the gap between two, so that they stay separate
/// extents.
const ANCHOR_BYTES: u64 = 4096;
const ANCHOR_GAP: u64 = 64 * 1024;

/// Give a new `.log` a few one-block unwritten extents far past any data
/// (`fallocate(FALLOC_FL_KEEP_SIZE)`: the file's length, and so everything that reads it,
/// is unchanged; the blocks go with the file).
///
/// Why: ext4 converts each piece of a file that writeback allocated after the write
/// completes, and merges it with its neighbour. When a file's extents fit into its inode
/// again (4 of them), ext4 moves them there and frees the extent tree's leaf block
/// (`ext4_ext_try_to_merge_up`). A segment's extent count hovers around 4 while it is young,
/// so its tree gains and loses a leaf again and again. On a volume mounted with `discard` and
/// no journal, each free is discarded there and then, behind the queued writes, while
/// appends to the same file wait for its lock: stalls of 0.5-2 s at 400k msg/s on this
/// project's test machine. With these anchors a segment keeps more than 4 extents, so the
/// leaf is never freed. Measured: ARCHITECTURE.md, the extent anchors' invariant (8d3fca0).
///
/// Best effort: a volume without `fallocate` (FUSE, some NFS servers) or without the room
/// is left alone. The cost is 6 blocks (and a leaf block) per segment, kept until the
/// segment is deleted.
fn anchor_extent_tree(log: &File) {
    use rustix::fs::{fallocate, FallocateFlags};
    for k in 0..ANCHORS {
        let at = ANCHOR_OFFSET + k * (ANCHOR_BYTES + ANCHOR_GAP);
        if fallocate(log, FallocateFlags::KEEP_SIZE, at, ANCHOR_BYTES).is_err() {
            return;
        }
    }
}

/// Suffix of a spare's files (`next.<token><kind suffix>.spare`): no Kafka broker or tool
/// reads them, and an open removes any it finds.
pub(crate) const SPARE_SUFFIX: &str = ".spare";

/// The files of the next segment and its producer snapshot, made ahead of a roll by
/// [`crate::Log`]'s preparation, off the append path: creating a file allocates an inode,
/// and the extent anchors take blocks, and under a saturated volume either can wait hundreds
/// of milliseconds for reads of the file system's bitmaps. A roll then only renames them
/// (`Segment::from_spare`). The token makes the names this open log's own: in a shared
/// directory another broker's spare (a former owner's) is never renamed by this one.
#[derive(Debug)]
pub(crate) struct Spare {
    pub(crate) dir: PathBuf,
    token: String,
    /// Which of the files exist (made and not yet taken). They are closed while they wait:
    /// every busy partition has a spare, and four descriptors each would cost more than the
    /// partition's own files.
    made: [bool; 4],
}

impl Spare {
    const KINDS: [SegmentFileKind; 4] = [
        SegmentFileKind::Log,
        SegmentFileKind::Index,
        SegmentFileKind::TimeIndex,
        SegmentFileKind::Snapshot,
    ];

    /// Create (or empty, if left over) the spare files in `dir`; `token` names them.
    pub(crate) fn create(dir: &Path, token: &str) -> io::Result<Spare> {
        let mut spare = Spare {
            dir: dir.to_path_buf(),
            token: token.to_string(),
            made: [false; 4],
        };
        for (i, kind) in Spare::KINDS.into_iter().enumerate() {
            let file = open_rw(&spare.path(kind))?;
            spare.made[i] = true;
            file.set_len(0)?;
            if kind == SegmentFileKind::Log {
                anchor_extent_tree(&file);
            }
        }
        Ok(spare)
    }

    pub(crate) fn path(&self, kind: SegmentFileKind) -> PathBuf {
        self.dir.join(format!(
            "next.{}{}{SPARE_SUFFIX}",
            self.token,
            kind.suffix()
        ))
    }

    /// Take the file of `kind`, opened (to rename it into use).
    pub(crate) fn take(&mut self, kind: SegmentFileKind) -> Option<File> {
        let i = Spare::KINDS.iter().position(|k| *k == kind)?;
        if !self.made[i] {
            return None;
        }
        let file = open_existing_rw(&self.path(kind)).ok()?;
        self.made[i] = false;
        Some(file)
    }

    /// Remove the files not taken (best effort: an open removes leftovers).
    pub(crate) fn discard(mut self) {
        for (i, kind) in Spare::KINDS.into_iter().enumerate() {
            if std::mem::take(&mut self.made[i]) {
                let path = self.path(kind);
                if let Err(e) = std::fs::remove_file(&path) {
                    if e.kind() != io::ErrorKind::NotFound {
                        tracing::warn!(path = %path.display(), error = %e, "could not remove a spare segment file");
                    }
                }
            }
        }
    }
}

/// A name part no other writer's spares have: the writer's epoch, process and count
/// (`.<epoch>-<process>-<n>`). Epochs grow with every acquisition, so two owners of a shared
/// directory never make the same name.
pub(crate) fn spare_token(epoch: i32) -> String {
    static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    format!(
        ".{epoch}-{}-{}",
        std::process::id(),
        MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    )
}

/// Rename `from` to `to` unless `to` exists. Where the file system does not take the flag
/// for that (NFS, some FUSE file systems answer EINVAL), a hard link then an unlink of
/// `from`: the link fails if `to` exists, atomically at the server, so a former owner's
/// stalled roll never replaces a file the new owner made meanwhile (a check then a rename
/// could). Only where links are refused too (EPERM, EOPNOTSUPP), a check then a plain
/// rename.
pub(crate) fn rename_no_replace(from: &Path, to: &Path) -> io::Result<()> {
    use rustix::fs::{renameat_with, RenameFlags, CWD};
    match renameat_with(CWD, from, CWD, to, RenameFlags::NOREPLACE) {
        Err(rustix::io::Errno::INVAL) | Err(rustix::io::Errno::NOSYS) => {
            match std::fs::hard_link(from, to) {
                Ok(()) => return std::fs::remove_file(from),
                // Links refused by the file system: the check and rename below.
                Err(e)
                    if matches!(
                        rustix::io::Errno::from_io_error(&e),
                        Some(rustix::io::Errno::PERM | rustix::io::Errno::NOTSUP)
                    ) => {}
                Err(e) => return Err(e),
            }
            if to.symlink_metadata().is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists", to.display()),
                ));
            }
            std::fs::rename(from, to)
        }
        r => r.map_err(io::Error::from),
    }
}

fn open_existing_rw(path: &Path) -> io::Result<File> {
    OpenOptions::new().read(true).write(true).open(path)
}

fn open_rw(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
}

/// Shared handles to a segment's in-memory indexes.
pub(crate) type LoadedIndexes = (Arc<Vec<OffsetIndexEntry>>, Arc<Vec<TimeIndexEntry>>);

/// Result of building indexes from the log file.
/// Where [`Segment::scan_rebuild_from`] starts: a batch boundary, and what a scan from the
/// segment's start would have computed up to it.
#[derive(Debug)]
pub(crate) struct ScanStart {
    pub pos: u64,
    pub cursor: IndexCursor,
    pub offset_index: Vec<OffsetIndexEntry>,
    pub time_index: Vec<TimeIndexEntry>,
    /// The segment's first batch's timestamp, when the scan starts past it and knows it.
    pub first_batch_ts: Option<i64>,
    /// The last offset of the batch at `pos`, when an index entry named it.
    pub batch_last_offset: Option<i64>,
}

impl ScanStart {
    pub(crate) fn at_base(base: i64) -> ScanStart {
        ScanStart {
            pos: 0,
            cursor: IndexCursor::new(base),
            offset_index: Vec::new(),
            time_index: Vec::new(),
            first_batch_ts: None,
            batch_last_offset: None,
        }
    }
}

pub(crate) struct Rebuilt {
    pub size: u64,
    pub next_offset: i64,
    pub offset_index: Vec<OffsetIndexEntry>,
    pub time_index: Vec<TimeIndexEntry>,
    pub cursor: IndexCursor,
    pub first_batch_ts: Option<i64>,
    /// Set when the scan stopped at an invalid batch (the data after `size` is to be cut).
    pub stopped: Option<(u64, FormatError)>,
    /// Set when the scan stopped at a valid batch reaching the next segment's base offset:
    /// bytes a former owner appended after a takeover sealed this segment (the data after
    /// `size` is to be cut; the later segments are sound).
    pub overlapped: Option<u64>,
}

impl Segment {
    /// Create a new empty segment (files truncated; a non-empty `.log` is refused). The
    /// `.log` is always a new file. At an open (`replace_empty`: the write gate, asked right
    /// before the removal), an empty one already there is removed first, since another
    /// process may hold it open with a write under way (in a
    /// shared directory, a former owner's active segment that a lagging directory listing did
    /// not show), and that write must land in its own file, not over this segment's batches.
    /// A roll never removes one: it is refused, and the log re-opened. A roll may be a former
    /// owner's, stalled between its check and its act while the new owner created that very
    /// file and appended acknowledged batches to it (docs/cluster.md, fencing point 2); the
    /// open that follows the refusal replaces an empty file it finds there.
    pub(crate) fn create(
        dir: &Path,
        base: i64,
        now_ms: i64,
        replace_empty: Option<&dyn Fn() -> io::Result<()>>,
    ) -> io::Result<Segment> {
        let log_path = seg_path(dir, base, SegmentFileKind::Log);
        let exclusive = || {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&log_path)
        };
        let log = match exclusive() {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                // Judged by an open, not a stat by name (an NFS attribute cache can
                // show another host's filled file as empty): `fsutil::len_at_open`.
                let len = crate::fsutil::len_at_open(&log_path)?;
                if len.is_some_and(|n| n != 0) || (len.is_some() && replace_empty.is_none()) {
                    return Err(io::Error::new(
                        io::ErrorKind::AlreadyExists,
                        format!(
                            "segment file {} already exists ({} bytes): another process made it",
                            log_path.display(),
                            len.unwrap_or(0)
                        ),
                    ));
                }
                if let (Some(_), Some(check)) = (len, replace_empty) {
                    // The write gate again, right before the removal: the file may be the
                    // active segment of an owner that acquired the partition since.
                    check()?;
                    std::fs::remove_file(&log_path)?;
                }
                exclusive()?
            }
            other => other?,
        };
        anchor_extent_tree(&log);
        let cache = crate::filecache::files();
        let log = cache.adopt(log_path, log)?;
        // Made empty before the cache takes them: nothing written through them yet.
        let index_path = seg_path(dir, base, SegmentFileKind::Index);
        let index_file = open_rw(&index_path)?;
        index_file.set_len(0)?;
        let index_file = cache.adopt(index_path, index_file)?;
        let time_path = seg_path(dir, base, SegmentFileKind::TimeIndex);
        let time_file = open_rw(&time_path)?;
        time_file.set_len(0)?;
        let time_file = cache.adopt(time_path, time_file)?;
        Ok(Segment::empty(
            dir, base, now_ms, log, index_file, time_file,
        ))
    }

    /// A new segment from a spare's files ([`Spare`]): renamed to the segment's names, never
    /// over an existing file. On an error the caller creates the segment as
    /// [`Segment::create`] does (which takes any file renamed so far as it is: empty).
    pub(crate) fn from_spare(
        spare: &mut Spare,
        dir: &Path,
        base: i64,
        now_ms: i64,
    ) -> io::Result<Segment> {
        if spare.dir != dir {
            return Err(io::Error::other("the spare is in another directory"));
        }
        // Opened before any is renamed: a failed open leaves the spare whole.
        let mut files = Vec::with_capacity(3);
        for (i, kind) in Spare::KINDS[..3].iter().copied().enumerate() {
            if !spare.made[i] {
                return Err(io::Error::other("spare used"));
            }
            files.push(CachedFile::open(&spare.path(kind), false)?);
        }
        for (i, (kind, file)) in Spare::KINDS[..3].iter().zip(&files).enumerate() {
            // Not renamed: still the spare's, and `Spare::discard` removes it.
            file.rename_with(&seg_path(dir, base, *kind), rename_no_replace)?;
            spare.made[i] = false;
        }
        let time_file = files.pop().expect("three files");
        let index_file = files.pop().expect("three files");
        let log = files.pop().expect("three files");
        Ok(Segment::empty(
            dir, base, now_ms, log, index_file, time_file,
        ))
    }

    fn empty(
        dir: &Path,
        base: i64,
        now_ms: i64,
        log: CachedFile,
        index_file: CachedFile,
        time_file: CachedFile,
    ) -> Segment {
        Segment {
            base_offset: base,
            dir: dir.to_path_buf(),
            log,
            index_file,
            time_file,
            meta: RwLock::new(SegMeta {
                size: 0,
                next_offset: base,
                offset_index: Some(Arc::new(Vec::new())),
                time_index: Some(Arc::new(Vec::new())),
                max_ts: -1,
                off_max_ts: base,
                rolling_ts: now_ms,
                mtime_ms: now_ms,
                recent: RecentBatches::default(),
                index_on_disk: (0, 0),
                index_rewrite: false,
            }),
            txn: parking_lot::Mutex::new(crate::txn::TxnIndex {
                entries: Some(Arc::new(Vec::new())),
                file: None,
            }),
        }
    }

    /// A sealed segment below the recovery point, taken without opening or reading its files:
    /// a `statx` of each of the three (size and modification time of the log; the files are
    /// opened on first use, and must then be the same files). `None` if an index file is
    /// missing (the caller opens it with [`Segment::open_files`] and rebuilds it). Its largest
    /// timestamp is read on first use ([`Segment::timestamps`]), its index files are checked
    /// in full when first loaded ([`Segment::ensure_loaded`]), and its transaction index is
    /// loaded on first use: an open's work does not grow with the segments it trusts.
    pub(crate) fn unopened(dir: &Path, base: i64, now_ms: i64) -> io::Result<Option<Segment>> {
        let (log, st) = CachedFile::unopened(&seg_path(dir, base, SegmentFileKind::Log))?;
        let mut index_files = Vec::with_capacity(2);
        for kind in [SegmentFileKind::Index, SegmentFileKind::TimeIndex] {
            match CachedFile::unopened(&seg_path(dir, base, kind)) {
                Ok((f, _)) => index_files.push(f),
                Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        let time_file = index_files.pop().expect("two index files");
        let index_file = index_files.pop().expect("two index files");
        // As `fsutil::mtime_ms`: a time before the epoch counts as now.
        let mtime = if st.st_mtime < 0 {
            now_ms
        } else {
            st.st_mtime
                .saturating_mul(1000)
                .saturating_add(i64::from(st.st_mtime_nsec as u32 / 1_000_000))
        };
        Ok(Some(Segment {
            base_offset: base,
            dir: dir.to_path_buf(),
            log,
            index_file,
            time_file,
            meta: RwLock::new(SegMeta {
                size: st.st_size as u64,
                next_offset: base,
                offset_index: None,
                time_index: None,
                max_ts: MAX_TS_UNREAD,
                off_max_ts: base,
                rolling_ts: mtime,
                mtime_ms: mtime,
                recent: RecentBatches::default(),
                index_on_disk: (0, 0),
                index_rewrite: false,
            }),
            txn: Default::default(),
        }))
    }

    /// Open the files of an existing segment without reading its content. Index files are
    /// created empty if missing (the caller then rebuilds them). Returns the segment and
    /// whether each index file already existed.
    pub(crate) fn open_files(dir: &Path, base: i64, now_ms: i64) -> io::Result<(Segment, bool)> {
        let log = CachedFile::open(&seg_path(dir, base, SegmentFileKind::Log), true)?;
        let (size, mtime) = {
            let f = log.get()?;
            (f.metadata()?.len(), crate::fsutil::mtime_ms(&f, now_ms))
        };
        let idx_path = seg_path(dir, base, SegmentFileKind::Index);
        let time_path = seg_path(dir, base, SegmentFileKind::TimeIndex);
        let existed = idx_path.exists() && time_path.exists();
        let index_file = CachedFile::open(&idx_path, true)?;
        let time_file = CachedFile::open(&time_path, true)?;
        Ok((
            Segment {
                base_offset: base,
                dir: dir.to_path_buf(),
                log,
                index_file,
                time_file,
                meta: RwLock::new(SegMeta {
                    size,
                    next_offset: base,
                    offset_index: None,
                    time_index: None,
                    max_ts: -1,
                    off_max_ts: base,
                    rolling_ts: now_ms,
                    mtime_ms: mtime,
                    recent: RecentBatches::default(),
                    index_on_disk: (0, 0),
                    index_rewrite: false,
                }),
                txn: Default::default(),
            },
            existed,
        ))
    }

    pub(crate) fn size(&self) -> u64 {
        self.meta.read().size
    }

    /// A file of the segment was written through the file cache since its last fsync.
    pub(crate) fn has_unsynced_writes(&self) -> bool {
        self.log.dirty() || self.index_file.dirty() || self.time_file.dirty()
    }

    /// The same segment opened from its copy in `dir` (a log moving to another log dir): new
    /// file handles, the in-memory state carried over.
    pub(crate) fn reopen_in(&self, dir: &Path) -> io::Result<Segment> {
        let log = CachedFile::open(&seg_path(dir, self.base_offset, SegmentFileKind::Log), true)?;
        let index_file = CachedFile::open(
            &seg_path(dir, self.base_offset, SegmentFileKind::Index),
            true,
        )?;
        let time_file = CachedFile::open(
            &seg_path(dir, self.base_offset, SegmentFileKind::TimeIndex),
            true,
        )?;
        let m = self.meta.read();
        Ok(Segment {
            base_offset: self.base_offset,
            dir: dir.to_path_buf(),
            log,
            index_file,
            time_file,
            meta: RwLock::new(SegMeta {
                size: m.size,
                next_offset: m.next_offset,
                offset_index: m.offset_index.clone(),
                time_index: m.time_index.clone(),
                max_ts: m.max_ts,
                off_max_ts: m.off_max_ts,
                rolling_ts: m.rolling_ts,
                mtime_ms: m.mtime_ms,
                recent: m.recent.clone(),
                index_on_disk: m.index_on_disk,
                index_rewrite: m.index_rewrite,
            }),
            txn: parking_lot::Mutex::new(crate::txn::TxnIndex {
                entries: self.txn.lock().entries.clone(),
                file: crate::txn::cached_existing(dir, self.base_offset)?,
            }),
        })
    }

    /// The segment's aborted transactions (loaded from its `.txnindex` on first use). A
    /// damaged file is an error of kind `InvalidData`: the caller rebuilds it from the log.
    pub(crate) fn aborted_txns(&self) -> io::Result<Arc<Vec<sluice_format::txn::TxnIndexEntry>>> {
        self.txn
            .lock()
            .load_checked(&self.dir, self.base_offset, || self.log.still_at_its_name())
    }

    /// The transaction index is in memory ([`Segment::aborted_txns`] reads no file).
    pub(crate) fn txns_loaded(&self) -> bool {
        self.txn.lock().entries.is_some()
    }

    /// The offset and time indexes are in memory ([`Segment::ensure_loaded`] reads no file).
    pub(crate) fn indexes_loaded(&self) -> bool {
        let m = self.meta.read();
        m.offset_index.is_some() && m.time_index.is_some()
    }

    pub(crate) fn next_offset(&self) -> i64 {
        self.meta.read().next_offset
    }

    /// Largest timestamp for retention (Kafka's largestTimestamp: the max batch timestamp, or
    /// the file's modification time when no batch carries one). A segment whose time index
    /// cannot be read counts as the newest there is: nothing is deleted or compacted on a
    /// guess.
    pub(crate) fn largest_timestamp(&self, interval: u64) -> i64 {
        match self.timestamps(interval) {
            Ok((max_ts, _)) if max_ts >= 0 => max_ts,
            Ok(_) => self.meta.read().mtime_ms,
            Err(e) => {
                tracing::warn!(segment = %seg_path(&self.dir, self.base_offset, SegmentFileKind::Log).display(),
                    error = %e, "could not read the segment's largest timestamp; keeping it");
                i64::MAX
            }
        }
    }

    /// The largest batch timestamp (-1: none) and the offset of its batch's last record, read
    /// from the time index's last entry the first time they are asked of a segment taken
    /// unread ([`Segment::unopened`]); from the whole index, rebuilt if need be, when that
    /// entry is not plausible.
    pub(crate) fn timestamps(&self, interval: u64) -> io::Result<(i64, i64)> {
        {
            let m = self.meta.read();
            if m.max_ts != MAX_TS_UNREAD {
                return Ok((m.max_ts, m.off_max_ts));
            }
        }
        // The indexes in memory if loaded (a rebuilt one may be being written to its file,
        // emptied first), else the time index's last entry on disk if plausible.
        let loaded = self.meta.read().time_index.clone();
        let size = self.size();
        let last = if let Some(ti) = loaded {
            ti.last().copied()
        } else if self.index_files_sane(size)? {
            self.last_time_entry_on_disk()?
        } else {
            let (_, ti) = self.ensure_loaded(interval)?;
            ti.last().copied()
        };
        let mut m = self.meta.write();
        if m.max_ts == MAX_TS_UNREAD {
            match last {
                Some(t) => {
                    m.max_ts = t.timestamp;
                    m.off_max_ts = self.base_offset + i64::from(t.relative_offset);
                }
                None => m.max_ts = -1,
            }
        }
        Ok((m.max_ts, m.off_max_ts))
    }

    /// Cheap sanity check of the index files as found on disk (like Kafka's sanityCheck):
    /// lengths multiples of the entry size, last entries plausible. Reads two entries.
    pub(crate) fn index_files_sane(&self, log_size: u64) -> io::Result<bool> {
        let (index_file, time_file) = (self.index_file.get()?, self.time_file.get()?);
        let ilen = index_file.metadata()?.len();
        let tlen = time_file.metadata()?.len();
        if ilen % OFFSET_INDEX_ENTRY_LEN as u64 != 0 || tlen % TIME_INDEX_ENTRY_LEN as u64 != 0 {
            return Ok(false);
        }
        if ilen > 0 {
            let mut b = [0u8; OFFSET_INDEX_ENTRY_LEN];
            index_file.read_exact_at(&mut b, ilen - OFFSET_INDEX_ENTRY_LEN as u64)?;
            let e = OffsetIndexEntry::decode(&b);
            if e.is_none_or(|e| {
                e.relative_offset < 0 || e.position < 0 || e.position as u64 >= log_size
            }) {
                return Ok(false);
            }
            if ilen > OFFSET_INDEX_ENTRY_LEN as u64 && e.is_some_and(|e| e.relative_offset == 0) {
                // Trailing zero entries: a preallocated index of a crashed Kafka.
                return Ok(false);
            }
        }
        if tlen > 0 {
            if log_size == 0 {
                return Ok(false);
            }
            let mut b = [0u8; TIME_INDEX_ENTRY_LEN];
            time_file.read_exact_at(&mut b, tlen - TIME_INDEX_ENTRY_LEN as u64)?;
            let e = TimeIndexEntry::decode(&b);
            if e.is_none_or(|e| e.relative_offset < 0 || e.timestamp < 0) {
                return Ok(false);
            }
            if tlen > TIME_INDEX_ENTRY_LEN as u64
                && e.is_some_and(|e| e.timestamp == 0 && e.relative_offset == 0)
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The last time index entry on disk (for the max timestamp of a lazily loaded segment).
    pub(crate) fn last_time_entry_on_disk(&self) -> io::Result<Option<TimeIndexEntry>> {
        let time_file = self.time_file.get()?;
        let tlen = time_file.metadata()?.len();
        if tlen < TIME_INDEX_ENTRY_LEN as u64 {
            return Ok(None);
        }
        let mut b = [0u8; TIME_INDEX_ENTRY_LEN];
        time_file.read_exact_at(&mut b, tlen - TIME_INDEX_ENTRY_LEN as u64)?;
        Ok(TimeIndexEntry::decode(&b))
    }

    /// Read both index files fully. Returns None if they are not entirely valid.
    pub(crate) fn read_index_files(
        &self,
        log_size: u64,
    ) -> io::Result<Option<(Vec<OffsetIndexEntry>, Vec<TimeIndexEntry>)>> {
        let (index_file, time_file) = (self.index_file.get()?, self.time_file.get()?);
        let ilen = index_file.metadata()?.len();
        let tlen = time_file.metadata()?.len();
        if ilen % OFFSET_INDEX_ENTRY_LEN as u64 != 0 || tlen % TIME_INDEX_ENTRY_LEN as u64 != 0 {
            return Ok(None);
        }
        let mut ib = vec![0u8; usize::try_from(ilen).unwrap_or(0)];
        index_file.read_exact_at(&mut ib, 0)?;
        let mut tb = vec![0u8; usize::try_from(tlen).unwrap_or(0)];
        time_file.read_exact_at(&mut tb, 0)?;
        let oi = decode_offset_index(&ib);
        let ti = decode_time_index(&tb);
        if valid_offset_index_prefix(&oi, log_size) != oi.len()
            || valid_time_index_prefix(&ti) != ti.len()
        {
            return Ok(None);
        }
        Ok(Some((oi, ti)))
    }

    /// Scan the log from 0 to `end` and compute the indexes. `verify` checks CRCs and offset
    /// monotonicity; the scan stops at the first invalid batch (reported in `stopped`).
    pub(crate) fn scan_rebuild(
        &self,
        end: u64,
        interval: u64,
        verify: bool,
        next_base: i64,
        on_batch: impl FnMut(&BatchHeader),
    ) -> io::Result<Rebuilt> {
        let start = ScanStart::at_base(self.base_offset);
        self.scan_rebuild_from(start, end, interval, verify, next_base, on_batch)
    }

    /// Where recovery of this segment may start when everything below `recovery_point` (an
    /// offset inside it) was durable, index entries included (a flush of everything moved
    /// the recovery point there): the last offset-index entry below the recovery point, with
    /// the entries up to it kept, as the scan from 0 would have made them. None when the
    /// index files say nothing usable (missing, damaged, no entry below the point): the
    /// segment is then recovered from its start.
    pub(crate) fn resume_point(
        &self,
        recovery_point: i64,
        log_size: u64,
    ) -> io::Result<Option<ScanStart>> {
        if recovery_point <= self.base_offset {
            return Ok(None);
        }
        let (index_file, time_file) = (self.index_file.get()?, self.time_file.get()?);
        let read = |f: &std::fs::File, entry: usize| -> io::Result<Vec<u8>> {
            let len = f.metadata()?.len();
            let len = len - len % entry as u64;
            let mut b = vec![0u8; usize::try_from(len).unwrap_or(0)];
            f.read_exact_at(&mut b, 0)?;
            Ok(b)
        };
        let mut oi = decode_offset_index(&read(&index_file, OFFSET_INDEX_ENTRY_LEN)?);
        let mut ti = decode_time_index(&read(&time_file, TIME_INDEX_ENTRY_LEN)?);
        // Entries past the recovery point may be torn or never written: only the valid
        // prefix below it counts. An entry names a batch by its last offset.
        let below = |rel: i32| self.base_offset + i64::from(rel) < recovery_point;
        oi.truncate(valid_offset_index_prefix(&oi, log_size));
        oi.truncate(oi.partition_point(|e| below(e.relative_offset)));
        let Some(last) = oi.last().copied() else {
            return Ok(None);
        };
        // The time entries made up to the batch of the last offset entry (a later one names a
        // batch after it).
        ti.truncate(valid_time_index_prefix(&ti));
        ti.truncate(ti.partition_point(|e| e.relative_offset <= last.relative_offset));
        let mut cursor = IndexCursor::new(self.base_offset);
        cursor.last_off_rel = Some(last.relative_offset);
        cursor.last_time = ti.last().copied();
        if let Some(t) = ti.last() {
            cursor.max_ts = t.timestamp;
            cursor.off_max_ts = self.base_offset + i64::from(t.relative_offset);
        }
        Ok(Some(ScanStart {
            pos: last.position as u64,
            cursor,
            offset_index: oi,
            time_index: ti,
            first_batch_ts: None,
            batch_last_offset: Some(self.base_offset + i64::from(last.relative_offset)),
        }))
    }

    /// [`Segment::scan_rebuild`] from `start`: the batches from `start.pos` to `end`, after
    /// the index entries `start` holds. A scan that resumes at an index entry stops at once
    /// (`stopped`) when the batch found there is not the one the entry names.
    pub(crate) fn scan_rebuild_from(
        &self,
        start: ScanStart,
        end: u64,
        interval: u64,
        verify: bool,
        next_base: i64,
        mut on_batch: impl FnMut(&BatchHeader),
    ) -> io::Result<Rebuilt> {
        let ScanStart {
            pos: start_pos,
            mut cursor,
            offset_index: mut oi,
            time_index: mut ti,
            mut first_batch_ts,
            mut batch_last_offset,
        } = start;
        // A scan from past the first batch does not see the segment's first timestamp.
        let sees_first = start_pos == 0;
        let mut scanner = BatchScanner::new(self.log.get()?, start_pos, end, verify);
        let mut next_offset = self.base_offset;
        let mut stopped = None;
        let mut overlapped = None;
        loop {
            match scanner.next_batch() {
                Ok(Some((pos, h))) if batch_last_offset.is_some_and(|l| l != h.last_offset()) => {
                    stopped = Some((
                        pos,
                        FormatError::Record(format!(
                            "the batch at the index entry's position ends at offset {}, not {}",
                            h.last_offset(),
                            batch_last_offset.unwrap_or_default()
                        )),
                    ));
                    break;
                }
                Ok(Some((pos, h))) if h.last_offset() >= next_base => {
                    overlapped = Some(pos);
                    break;
                }
                Ok(Some((pos, h))) => {
                    // Offsets must increase and stay addressable relative to the base.
                    let rel_ok = h.last_offset() >= self.base_offset
                        && h.last_offset() - self.base_offset <= i64::from(i32::MAX);
                    if h.base_offset < next_offset || !rel_ok {
                        stopped = Some((
                            pos,
                            FormatError::Record(format!(
                                "batch offset {} out of sequence (expected >= {next_offset})",
                                h.base_offset
                            )),
                        ));
                        break;
                    }
                    if first_batch_ts.is_none() && sees_first {
                        first_batch_ts = Some(h.max_timestamp);
                    }
                    batch_last_offset = None;
                    let (o, t) = cursor.observe(pos, &h, interval);
                    oi.extend(o);
                    ti.extend(t);
                    next_offset = h.next_offset();
                    on_batch(&h);
                }
                Ok(None) => break,
                Err(ScanError::Io(e)) => return Err(e),
                Err(ScanError::Corrupt { pos, err }) => {
                    stopped = Some((pos, err));
                    break;
                }
            }
        }
        let size = match (&stopped, overlapped) {
            (Some((pos, _)), _) => *pos,
            (None, Some(pos)) => pos,
            (None, None) => scanner.position(),
        };
        // Like Kafka's recover(): a final entry for the segment's max timestamp.
        ti.extend(cursor.maybe_time_entry());
        Ok(Rebuilt {
            size,
            next_offset,
            offset_index: oi,
            time_index: ti,
            cursor,
            first_batch_ts,
            stopped,
            overlapped,
        })
    }

    /// Replace the index files' content with `oi` / `ti`. With `always_cut` each file is cut to
    /// its new length whatever its length now (in a shared log dir a former owner's late
    /// entry may be landing); without, only a file of another length is cut.
    pub(crate) fn write_index_files(
        &self,
        oi: &[OffsetIndexEntry],
        ti: &[TimeIndexEntry],
        always_cut: bool,
    ) -> io::Result<()> {
        let mut ib = Vec::with_capacity(oi.len() * OFFSET_INDEX_ENTRY_LEN);
        for e in oi {
            ib.extend_from_slice(&e.encode());
        }
        let mut tb = Vec::with_capacity(ti.len() * TIME_INDEX_ENTRY_LEN);
        for e in ti {
            tb.extend_from_slice(&e.encode());
        }
        {
            // Written over in place, then cut to their length: never emptied first, so that a
            // crash in the middle leaves the entries a rewrite keeps (those below the recovery
            // point, which an open resumes from: `Segment::resume_point`) as they were.
            let (index_file, time_file) =
                (self.index_file.for_write()?, self.time_file.for_write()?);
            #[cfg(test)]
            crate::faults::rewrite_step("index")?;
            // Unless `always_cut`, a file of the right length is not cut (a cut to its own
            // length still changes its inode, which the fsync then writes: two more writes a
            // segment at an open after a crash).
            index_file.write_all_at(&ib, 0)?;
            #[cfg(test)]
            crate::faults::rewrite_step("index")?;
            if always_cut || index_file.metadata()?.len() != ib.len() as u64 {
                index_file.set_len(ib.len() as u64)?;
            }
            #[cfg(test)]
            crate::faults::rewrite_step("index")?;
            time_file.write_all_at(&tb, 0)?;
            #[cfg(test)]
            crate::faults::rewrite_step("index")?;
            if always_cut || time_file.metadata()?.len() != tb.len() as u64 {
                time_file.set_len(tb.len() as u64)?;
            }
        }
        // Synced here: a rebuild rewrites a sealed segment's files, which may lie below the
        // recovery point, where no flush syncs them again (a seal's writes are the only ones
        // a flush looks for there).
        self.index_file.sync_data()?;
        self.time_file.sync_data()
    }

    /// Write encoded offset- and time-index entries to the index files, each starting at
    /// entry number `from` (an empty tail writes nothing).
    pub(crate) fn write_index_tails(
        &self,
        (o_from, ob): (usize, &[u8]),
        (t_from, tb): (usize, &[u8]),
    ) -> io::Result<()> {
        if !ob.is_empty() {
            self.index_file
                .for_write()?
                .write_all_at(ob, (o_from * OFFSET_INDEX_ENTRY_LEN) as u64)?;
        }
        if !tb.is_empty() {
            self.time_file
                .for_write()?
                .write_all_at(tb, (t_from * TIME_INDEX_ENTRY_LEN) as u64)?;
        }
        Ok(())
    }

    /// Write the in-memory index entries that are not yet in the index files.
    pub(crate) fn write_pending_index(&self) -> io::Result<()> {
        // Encoded under the lock, without keeping a handle to the indexes (an append
        // publishing meanwhile would have to copy them).
        let (o_done, t_done, o_len, t_len, ob, tb) = {
            let m = self.meta.read();
            let (o_done, t_done) = m.index_on_disk;
            let oi = m.offset_index.as_deref().map_or(&[][..], |v| v.as_slice());
            let ti = m.time_index.as_deref().map_or(&[][..], |v| v.as_slice());
            let ob: Vec<u8> = oi
                .get(o_done..)
                .unwrap_or_default()
                .iter()
                .flat_map(|e| e.encode())
                .collect();
            let tb: Vec<u8> = ti
                .get(t_done..)
                .unwrap_or_default()
                .iter()
                .flat_map(|e| e.encode())
                .collect();
            (o_done, t_done, oi.len(), ti.len(), ob, tb)
        };
        self.write_index_tails((o_done, &ob), (t_done, &tb))?;
        if !ob.is_empty() || !tb.is_empty() {
            let mut m = self.meta.write();
            m.index_on_disk.0 = m.index_on_disk.0.max(o_len);
            m.index_on_disk.1 = m.index_on_disk.1.max(t_len);
        }
        Ok(())
    }

    /// Make sure the indexes are in memory (sealed segments load on first use). An index file
    /// that is not entirely valid is rebuilt from the log (in memory and on disk).
    pub(crate) fn ensure_loaded(&self, interval: u64) -> io::Result<LoadedIndexes> {
        let size = {
            let m = self.meta.read();
            if let (Some(o), Some(t)) = (&m.offset_index, &m.time_index) {
                return Ok((o.clone(), t.clone()));
            }
            m.size
        };
        let (oi, ti, rebuilt) = match self.read_index_files(size)? {
            Some((oi, ti)) => (oi, ti, false),
            None => {
                tracing::warn!(segment = %seg_path(&self.dir, self.base_offset, SegmentFileKind::Log).display(),
                    "index files invalid, rebuilding (written by the next maintenance round)");
                let r = self.scan_rebuild(size, interval, false, i64::MAX, |_| {})?;
                (r.offset_index, r.time_index, true)
            }
        };
        let mut m = self.meta.write();
        if m.offset_index.is_none() || m.time_index.is_none() {
            m.index_rewrite |= rebuilt;
        }
        let o = m.offset_index.get_or_insert_with(|| Arc::new(oi)).clone();
        let t = m.time_index.get_or_insert_with(|| Arc::new(ti)).clone();
        m.index_on_disk = (o.len(), t.len());
        Ok((o, t))
    }

    /// Start position for a scan looking for `offset`, among data below `limit`.
    pub(crate) fn lookup_position(
        &self,
        offset: i64,
        limit: u64,
        interval: u64,
    ) -> io::Result<u64> {
        let (oi, _) = self.ensure_loaded(interval)?;
        let visible = oi.partition_point(|e| (e.position as u64) < limit);
        Ok(lookup_offset(&oi[..visible], offset - self.base_offset)
            .map_or(0, |i| oi[i].position as u64))
    }

    /// Largest index entry position <= `pos` (and >= `floor`), for finding batch boundaries.
    pub(crate) fn boundary_at_or_below(
        &self,
        pos: u64,
        floor: u64,
        interval: u64,
    ) -> io::Result<u64> {
        let (oi, _) = self.ensure_loaded(interval)?;
        let n = oi.partition_point(|e| (e.position as u64) <= pos);
        Ok(n.checked_sub(1)
            .map_or(floor, |i| (oi[i].position as u64).max(floor)))
    }

    /// Offset to start scanning from for timestamp `ts`.
    pub(crate) fn lookup_time_offset(&self, ts: i64, interval: u64) -> io::Result<i64> {
        let (_, ti) = self.ensure_loaded(interval)?;
        Ok(lookup_time(&ti, ts).map_or(self.base_offset, |i| {
            self.base_offset + i64::from(ti[i].relative_offset)
        }))
    }

    /// Rename this segment's file of `kind` to `to` by `how`, which gets the file's current
    /// path for the files the cache holds (`.log`, `.index`, `.timeindex`) and None for the
    /// others (the caller knows their names); the cache re-opens the file under `to`.
    pub(crate) fn rename_kind(
        &self,
        kind: SegmentFileKind,
        to: &Path,
        how: impl FnOnce(Option<&Path>, &Path) -> io::Result<()>,
    ) -> io::Result<()> {
        let file = match kind {
            SegmentFileKind::Log => &self.log,
            SegmentFileKind::Index => &self.index_file,
            SegmentFileKind::TimeIndex => &self.time_file,
            SegmentFileKind::TxnIndex => {
                let mut t = self.txn.lock();
                t.load_before_rename(&self.dir, self.base_offset, || self.log.still_at_its_name());
                return match &t.file {
                    Some(f) => f.rename_with(to, |from, to| how(Some(from), to)),
                    None => how(None, to),
                };
            }
            _ => return how(None, to),
        };
        file.rename_with(to, |from, to| how(Some(from), to))
    }

    /// Rename the files to `*.deleted` (`<file>.<tag>.deleted` with a tag), as
    /// [`rename_deleted_in`] does, through the open-file cache so that a re-open of a file it
    /// closed finds it under its new name. Missing files are fine.
    pub(crate) fn rename_deleted(&self, tag: Option<&str>) -> io::Result<()> {
        let (dir, base) = (&self.dir, self.base_offset);
        // The aborted transactions into memory first, while the `.log` is under its name.
        self.txn
            .lock()
            .load_before_rename(dir, base, || self.log.still_at_its_name());
        let mut first_err = None;
        for kind in SEGMENT_KINDS {
            let to = deleted_path(dir, base, kind, tag);
            let renamed = match kind {
                SegmentFileKind::Log => self.log.rename(&to),
                SegmentFileKind::Index => self.index_file.rename(&to),
                SegmentFileKind::TimeIndex => self.time_file.rename(&to),
                SegmentFileKind::TxnIndex => {
                    let t = self.txn.lock();
                    match &t.file {
                        Some(f) => f.rename(&to),
                        None => std::fs::rename(seg_path(dir, base, kind), &to),
                    }
                }
                _ => std::fs::rename(seg_path(dir, base, kind), &to),
            };
            match renamed {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) if kind == SegmentFileKind::Log => return Err(e),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// A segment's file kinds, the `.log` first (`rename_deleted_in` relies on it).
pub(crate) const SEGMENT_KINDS: [SegmentFileKind; 4] = [
    SegmentFileKind::Log,
    SegmentFileKind::Index,
    SegmentFileKind::TimeIndex,
    SegmentFileKind::TxnIndex,
];

/// `<segment file>.deleted`, or `<segment file>.<tag>.deleted` for a tagged removal (the
/// cleaner's: a segment it replaces may be replaced again, or deleted by retention, while the
/// first one's files still wait for a reader, so each removal needs names of its own).
pub(crate) fn deleted_path(
    dir: &Path,
    base: i64,
    kind: SegmentFileKind,
    tag: Option<&str>,
) -> PathBuf {
    let mut d = seg_path(dir, base, kind).into_os_string();
    if let Some(tag) = tag {
        d.push(".");
        d.push(tag);
    }
    d.push(DELETED_SUFFIX);
    PathBuf::from(d)
}

/// Rename a segment's files to `*.deleted` (safe while they are open). Missing files are fine.
///
/// The `.log` goes first, and if it cannot be renamed nothing else is: a segment is either
/// still whole under its name or its `.log` is aside (an open treats it as removed, and a
/// cleaner's switch as begun). Renaming its indexes aside while its `.log` stayed would leave
/// a segment without its `.txnindex` after the loader removed the `.deleted` files: its
/// aborted records read as committed.
pub(crate) fn rename_deleted_in(dir: &Path, base: i64, tag: Option<&str>) -> io::Result<()> {
    let mut first_err = None;
    for kind in SEGMENT_KINDS {
        match std::fs::rename(
            seg_path(dir, base, kind),
            deleted_path(dir, base, kind, tag),
        ) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) if kind == SegmentFileKind::Log => return Err(e),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    first_err.map_or(Ok(()), Err)
}

/// Unlink a segment's `*.deleted` files. The caller must have dropped every handle to them
/// (the [`Segment`]); missing files are fine.
pub(crate) fn unlink_deleted_in(dir: &Path, base: i64, tag: Option<&str>) -> io::Result<()> {
    let mut first_err = None;
    for kind in SEGMENT_KINDS {
        match std::fs::remove_file(deleted_path(dir, base, kind, tag)) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    first_err.map_or(Ok(()), Err)
}

//! Reads of a partition another broker owns, straight from its files on the shared volume
//! (Kafka's KIP-392 fetch from a follower, with no copy): [`ReplicaReader`].
//!
//! The reader never writes: it opens the owner's `<base>.log` files read-only through the
//! partition-file cache (`filecache.rs`), reads `.index` and `.txnindex` files as hints and
//! entries, and creates, renames, removes or fsyncs nothing. What it may return is bounded by
//! the offsets the caller passes in ([`Published`], what the owner published as the caller
//! last learned it): never a batch whose last offset is at or past the bound, so whatever
//! the owner is writing past it (a torn batch, bytes a new owner will cut) is never parsed.
//!
//! What it keeps, all of it dropped by [`ReplicaReader::forget`] (and by a read that finds a
//! file gone or a header that does not parse below the bound):
//!
//! - the listing of the directory's `<base>.log` files, taken again only when a read needs
//!   a segment past the newest one it knows (the bound says there is more than that segment
//!   holds) or a file vanished;
//! - per segment, a short sorted list of batch starts it scanned (base offset, position), so
//!   that the next read starts its header scan near its offset instead of at the start;
//! - per sealed segment (not the newest listed), its `.index` entries as hints only (every
//!   hinted position is checked by parsing the batch header there) and its `.txnindex`
//!   entries.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;
use sluice_format::index::{decode_offset_index, lookup_offset, valid_offset_index_prefix};
use sluice_format::txn::{decode_txn_index, TxnIndexEntry, TXN_INDEX_ENTRY_LEN};
use sluice_format::{
    names::parse_offset_stem, parse_segment_file_name, BatchHeader, FormatError, OffsetIndexEntry,
    SegmentFileKind,
};

use crate::filecache::CachedFile;
use crate::segment::{seg_path, BatchScanner, ScanError};
use crate::{AbortedTxn, FileSlice, ReadError, ReadResult, TopicPartition};

/// What the partition's owner has published, as the reader last learned it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Published {
    pub log_start: i64,
    pub high_watermark: i64,
    pub last_stable: i64,
}

/// Bytes scanned between two batch starts a segment remembers.
const KNOWN_GAP_BYTES: u64 = 64 * 1024;
/// Batch starts a segment remembers at most (a 1 GiB segment at [`KNOWN_GAP_BYTES`] needs
/// 16,384; past the cap a scan starts from the nearest one kept).
const KNOWN_MAX: usize = 4096;
/// Largest `.index` file read as a hint (Kafka's default `segment.index.bytes`).
const INDEX_HINT_MAX_BYTES: u64 = 10 * 1024 * 1024;
/// Largest `.txnindex` file read (about two million aborted transactions in one segment);
/// a larger one is an error rather than an allocation of its size.
const TXN_INDEX_MAX_BYTES: u64 = 64 * 1024 * 1024;
/// ESTALE: the file handle of an NFS file removed or replaced by another client.
const ESTALE: i32 = 116;

/// Reads of a partition another broker owns, from its files on the shared volume. `Send +
/// Sync`: reads run concurrently, sharing what they learned of the files.
#[derive(Debug)]
pub struct ReplicaReader {
    tp: TopicPartition,
    dir: PathBuf,
    /// The topic incarnation whose files it reads, when given ([`ReplicaReader::of_topic`]).
    topic_id: Option<uuid::Uuid>,
    listing: Mutex<Option<Arc<Listing>>>,
}

/// The directory's segments as last listed, by base offset.
#[derive(Debug)]
struct Listing {
    segs: Vec<Arc<SegFiles>>,
}

/// One listed segment.
#[derive(Debug)]
struct SegFiles {
    base: i64,
    /// Device and inode of the `.log` when listed (a later listing keeps this object, and
    /// what it learned, only for the same file).
    id: (u64, u64),
    log: CachedFile,
    learned: Mutex<Learned>,
}

/// What reads learned of one segment.
#[derive(Debug, Default)]
struct Learned {
    /// Batch starts scanned: (offset, position), ascending in both, the offset at or below
    /// the base offset of the batch there and past every offset before it (the end of a
    /// returned range is kept with the offset after it, the next read's, before the batch
    /// there was read: the owner may not have written it yet).
    starts: Vec<(i64, u64)>,
    /// The `.index` entries (hints), once read; `index_read` even when there was none.
    index: Option<Arc<Vec<OffsetIndexEntry>>>,
    index_read: bool,
    /// The `.txnindex` entries, kept once the segment is sealed (a newer one is listed).
    txns: Option<Arc<Vec<TxnIndexEntry>>>,
}

impl Learned {
    /// The nearest remembered batch start whose base offset is at or below `offset`.
    fn start_at_or_below(&self, offset: i64) -> Option<(i64, u64)> {
        let n = self.starts.partition_point(|&(b, _)| b <= offset);
        n.checked_sub(1).map(|i| self.starts[i])
    }

    /// The furthest remembered batch start at or below position `limit` past `after`, with
    /// its base offset at or below `end`.
    fn start_below_position(&self, after: u64, limit: u64, end: i64) -> Option<(i64, u64)> {
        self.starts
            .iter()
            .rev()
            .find(|&&(b, p)| p > after && p <= limit && b <= end)
            .copied()
    }

    fn note(&mut self, base_offset: i64, pos: u64) {
        let i = self.starts.partition_point(|&(_, p)| p < pos);
        if self.starts.get(i).is_some_and(|&(_, p)| p == pos) {
            return;
        }
        // Offsets rise with positions: an entry that would break the order is not a batch
        // start of this file as it is now (a caller that did not forget a rewrite): dropped.
        let below_ok = i == 0 || self.starts[i - 1].0 < base_offset;
        let above_ok = self.starts.get(i).is_none_or(|&(b, _)| b > base_offset);
        if !below_ok || !above_ok {
            self.starts.clear();
        }
        if self.starts.len() >= KNOWN_MAX {
            return;
        }
        let i = self.starts.partition_point(|&(_, p)| p < pos);
        self.starts.insert(i, (base_offset, pos));
    }
}

/// Where the search for the batch holding an offset ended in one segment.
enum Found {
    /// The batch holding it (position, header), below the bound.
    Batch(u64, BatchHeader),
    /// The bound came first: nothing to return.
    Bound,
    /// The segment's file ended first (`short`: inside a batch) without reaching the bound.
    End { short: bool },
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// A file went away or was replaced under the reader (retention, DeleteRecords, a cleaner's
/// switch, a new owner): the listing is taken again.
fn vanished(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(ESTALE)
}

/// The base offset of a cleaner's swap file of a `.log` (`<base>.log.<tag>.swap`, or
/// Kafka's `<base>.log.swap`).
fn swap_base(name: &str) -> Option<i64> {
    let rest = name.strip_suffix(".swap")?;
    let (stem, rest) = rest.split_once('.')?;
    if rest != "log" && !rest.starts_with("log.") {
        return None;
    }
    parse_offset_stem(stem)
}

/// The whole file (at most `max` bytes; a file larger is an error), or None when absent.
fn read_small(path: &Path, max: u64) -> io::Result<Option<Vec<u8>>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    if len > max {
        return Err(invalid(format!(
            "{} is {len} bytes, more than {max}",
            path.display()
        )));
    }
    let mut b = vec![0u8; usize::try_from(len).unwrap_or(0)];
    let mut done = 0;
    // Read what is there: the owner may be cutting the file (an index rewrite).
    while done < b.len() {
        match file.read_at(&mut b[done..], done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    b.truncate(done);
    Ok(Some(b))
}

impl SegFiles {
    /// A position to scan from for the batch holding `offset`: a remembered batch start, or
    /// for a sealed segment the `.index` entry at or below it once its header there is
    /// checked (base offset in the segment and at or below `offset`), else the start.
    fn scan_start(
        &self,
        dir: &Path,
        file: &Arc<File>,
        size: u64,
        offset: i64,
        sealed: bool,
    ) -> u64 {
        let unread = sealed && !self.learned.lock().index_read;
        if unread {
            // Read outside the lock (other reads of the segment go on meanwhile).
            let index = self.read_index(dir, size).map(Arc::new);
            let mut l = self.learned.lock();
            if !l.index_read {
                l.index_read = true;
                l.index = index;
            }
        }
        let (known, index) = {
            let l = self.learned.lock();
            let known = l.start_at_or_below(offset);
            (known, if sealed { l.index.clone() } else { None })
        };
        let from_known = known.map_or(0, |(_, p)| p);
        let Some(entries) = index else {
            return from_known;
        };
        let rel = offset.saturating_sub(self.base);
        let Some(i) = lookup_offset(&entries, rel) else {
            return from_known;
        };
        let hint = u64::try_from(entries[i].position).unwrap_or(0);
        if hint <= from_known {
            return from_known;
        }
        match BatchScanner::new(file.clone(), hint, size, false).next_batch() {
            Ok(Some((_, h))) if h.base_offset >= self.base && h.base_offset <= offset => {
                self.learned.lock().note(h.base_offset, hint);
                hint
            }
            _ => {
                tracing::debug!(dir = %dir.display(), segment = self.base, position = hint,
                    "offset index entry does not point at a batch at or below the offset; scanning instead");
                let mut l = self.learned.lock();
                l.index = None;
                from_known
            }
        }
    }

    /// The `.index` entries of a sealed segment, as hints (None: none, or unreadable).
    fn read_index(&self, dir: &Path, size: u64) -> Option<Vec<OffsetIndexEntry>> {
        let path = seg_path(dir, self.base, SegmentFileKind::Index);
        match read_small(&path, INDEX_HINT_MAX_BYTES) {
            Ok(Some(b)) => {
                let mut entries = decode_offset_index(&b);
                entries.truncate(valid_offset_index_prefix(&entries, size));
                Some(entries)
            }
            Ok(None) => None,
            Err(e) => {
                tracing::debug!(path = %path.display(), error = %e, "offset index not read; scanning instead");
                None
            }
        }
    }

    /// Scan for the first batch whose last offset reaches `offset`, not past `end`.
    fn find(
        &self,
        dir: &Path,
        file: &Arc<File>,
        size: u64,
        offset: i64,
        end: i64,
        sealed: bool,
    ) -> io::Result<Found> {
        let start = self.scan_start(dir, file, size, offset, sealed);
        let mut batches = BatchScanner::new(file.clone(), start, size, false);
        // The offset after the batch before the next header: at or past the bound, the next
        // header is never read.
        let mut next: Option<i64> = None;
        let mut noted = start;
        loop {
            if next.is_some_and(|n| n >= end) {
                return Ok(Found::Bound);
            }
            match batches.next_batch() {
                Ok(Some((pos, h))) => {
                    if pos >= noted + KNOWN_GAP_BYTES {
                        self.learned.lock().note(h.base_offset, pos);
                        noted = pos;
                    }
                    if h.last_offset() >= offset {
                        if h.last_offset() >= end {
                            return Ok(Found::Bound);
                        }
                        self.learned.lock().note(h.base_offset, pos);
                        return Ok(Found::Batch(pos, h));
                    }
                    next = Some(h.next_offset());
                }
                Ok(None) => return Ok(Found::End { short: false }),
                Err(ScanError::Corrupt {
                    err: FormatError::Truncated { .. },
                    ..
                }) => return Ok(Found::End { short: true }),
                Err(e) => return Err(e.into_io()),
            }
        }
    }

    /// Where the whole batches from the one at `pos` (header `h`) end under `max_bytes` and
    /// below `end`, and the offset after the returned range (the first batch left out, or
    /// the bound): as [`crate::Log`]'s read extends its first batch. None: the first batch
    /// alone is over the cap and `min_one_batch` is not set.
    #[allow(clippy::too_many_arguments)]
    fn extent(
        &self,
        file: &Arc<File>,
        size: u64,
        pos: u64,
        h: &BatchHeader,
        max_bytes: u32,
        min_one_batch: bool,
        end: i64,
    ) -> io::Result<Option<(u64, i64)>> {
        let first_len = h.total_len() as u64;
        let max = u64::from(max_bytes);
        if first_len > max {
            return Ok(min_one_batch.then(|| (first_len, h.next_offset())));
        }
        let target = pos + max;
        let mut stop = pos + first_len;
        let mut next = h.next_offset();
        // Jump to the furthest remembered batch start under the cap and the bound: every
        // batch before it fits whole and lies below the bound.
        let jump = self.learned.lock().start_below_position(stop, target, end);
        if let Some((b, p)) = jump {
            stop = p;
            next = b;
        }
        let mut batches = BatchScanner::new(file.clone(), stop, size, false);
        let mut noted = stop;
        // Where the returned range ends is where the next read (at the offset after it)
        // starts: remembered with that offset.
        let ends_at = |stop: u64, next: i64| self.learned.lock().note(next, stop);
        loop {
            if next >= end {
                ends_at(stop, next);
                return Ok(Some((stop - pos, end)));
            }
            match batches.next_batch() {
                Ok(Some((p, b))) => {
                    if b.last_offset() >= end {
                        ends_at(stop, next);
                        return Ok(Some((stop - pos, end)));
                    }
                    let e = p + b.total_len() as u64;
                    if e > target {
                        self.learned.lock().note(b.base_offset, p);
                        return Ok(Some((stop - pos, b.base_offset)));
                    }
                    if p >= noted + KNOWN_GAP_BYTES {
                        self.learned.lock().note(b.base_offset, p);
                        noted = p;
                    }
                    stop = e;
                    next = b.next_offset();
                }
                // The file ends (or is seen to end: another client's writes not visible yet)
                // before the bound: what is here.
                Ok(None)
                | Err(ScanError::Corrupt {
                    err: FormatError::Truncated { .. },
                    ..
                }) => {
                    ends_at(stop, next);
                    return Ok(Some((stop - pos, next)));
                }
                Err(e) => return Err(e.into_io()),
            }
        }
    }

    /// The `.txnindex` entries (whole entries only: the owner may be appending one past the
    /// bound); none when there is no file and the `.log` is still the one listed.
    fn txn_entries(&self, dir: &Path, sealed: bool) -> io::Result<Arc<Vec<TxnIndexEntry>>> {
        if let Some(t) = &self.learned.lock().txns {
            return Ok(t.clone());
        }
        let path = seg_path(dir, self.base, SegmentFileKind::TxnIndex);
        let entries = match read_small(&path, TXN_INDEX_MAX_BYTES)? {
            Some(mut b) => {
                b.truncate(b.len() / TXN_INDEX_ENTRY_LEN * TXN_INDEX_ENTRY_LEN);
                decode_txn_index(&b, self.base)
                    .map_err(|e| invalid(format!("{}: {e}", path.display())))?
            }
            // No file: no aborted transaction.
            None => Vec::new(),
        };
        // Read by its name: it is this segment's only if the `.log` still is at its name
        // after (the segment went away, or the directory is another incarnation's).
        self.log.still_at_its_name()?;
        let entries = Arc::new(entries);
        if sealed {
            self.learned.lock().txns = Some(entries.clone());
        }
        Ok(entries)
    }
}

impl ReplicaReader {
    /// A reader of the partition `tp` whose files are in `dir`. No I/O here.
    pub fn new(tp: TopicPartition, dir: PathBuf) -> ReplicaReader {
        ReplicaReader {
            tp,
            dir,
            topic_id: None,
            listing: Mutex::new(None),
        }
    }

    /// The same, reading only while the directory holds the files of topic `id` (its
    /// `partition.metadata` says so at every listing): a topic deleted and created again
    /// under its name has other files at the same path, which no bound learned for the
    /// earlier one covers.
    pub fn of_topic(mut self, id: uuid::Uuid) -> ReplicaReader {
        self.topic_id = Some(id);
        self
    }

    /// An error unless the directory holds the files of the topic this reader is for.
    fn check_incarnation(&self) -> io::Result<()> {
        match self.topic_id {
            Some(id) if crate::manager::dir_topic_id(&self.dir) != Some(id) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} does not hold topic {id} any more", self.dir.display()),
            )),
            _ => Ok(()),
        }
    }

    pub fn topic_partition(&self) -> &TopicPartition {
        &self.tp
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Drop everything cached (the listing, open files, remembered positions and index
    /// entries): for when the owner changes, since a new owner may cut what lay past the old
    /// owner's published end and write other bytes there. Slices already returned keep their
    /// files open.
    pub fn forget(&self) {
        *self.listing.lock() = None;
    }

    /// Whole batches from the one holding `offset`, at most `max_bytes` (at least the first
    /// batch when `min_one_batch`), never a batch whose last offset is at or past the end:
    /// `published.last_stable` when `committed`, else `published.high_watermark`. As
    /// [`crate::Log::read_isolated`] answers, with the high watermark, log start and last
    /// stable offset taken from `published`, and under `committed` the aborted transactions
    /// overlapping the returned batches, from the segments' `.txnindex` files.
    ///
    /// Out of range below `published.log_start`, past `published.high_watermark`, or below
    /// the first segment on the volume. A file that vanished (or went stale) is looked for
    /// once more after the cached state is dropped; a header that does not parse below the
    /// bound is an error of kind `InvalidData`, and the cached state is dropped.
    pub fn read(
        &self,
        offset: i64,
        max_bytes: u32,
        min_one_batch: bool,
        committed: bool,
        published: Published,
    ) -> Result<ReadResult, ReadError> {
        let p = published;
        if offset < p.log_start || offset > p.high_watermark {
            return Err(self.out_of_range(offset, p.log_start, p));
        }
        let end = if committed {
            p.last_stable.min(p.high_watermark)
        } else {
            p.high_watermark
        };
        if offset >= end {
            return Ok(self.result(p, committed, None, Vec::new()));
        }
        let read = || self.read_below(offset, max_bytes, min_one_batch, committed, end, p);
        let e = match read() {
            Err(Failed::Io(e)) if vanished(&e) => {
                self.forget();
                match read() {
                    Err(Failed::Io(e)) if vanished(&e) => {
                        self.forget();
                        // Gone for good: below what is left of the log, or an error.
                        if let Ok(l) = self.relist() {
                            if let Some(first) = l.segs.first() {
                                if offset < first.base {
                                    return Err(self.out_of_range(offset, first.base, p));
                                }
                            }
                        }
                        Failed::Io(e)
                    }
                    Err(e) => e,
                    Ok(r) => return Ok(r),
                }
            }
            Err(e) => e,
            Ok(r) => return Ok(r),
        };
        match e {
            Failed::Below { first } => Err(self.out_of_range(offset, first, p)),
            Failed::Io(source) => {
                if source.kind() == io::ErrorKind::InvalidData {
                    self.forget();
                }
                Err(ReadError::Io {
                    tp: self.tp.clone(),
                    source,
                })
            }
        }
    }

    fn out_of_range(&self, offset: i64, log_start: i64, p: Published) -> ReadError {
        ReadError::OffsetOutOfRange {
            tp: self.tp.clone(),
            requested: offset,
            log_start: log_start.max(p.log_start),
            log_end: p.high_watermark,
        }
    }

    fn result(
        &self,
        p: Published,
        committed: bool,
        slice: Option<FileSlice>,
        aborted: Vec<AbortedTxn>,
    ) -> ReadResult {
        ReadResult {
            slice,
            high_watermark: p.high_watermark,
            log_start_offset: p.log_start,
            last_stable_offset: p.last_stable,
            aborted: committed.then_some(aborted),
        }
    }

    /// The listing as cached (false), or taken now (true).
    fn cached_listing(&self) -> io::Result<(Arc<Listing>, bool)> {
        if let Some(l) = self.listing.lock().clone() {
            return Ok((l, false));
        }
        Ok((self.relist()?, true))
    }

    /// List the directory's `<base>.log` files again, keeping what was learned of each one
    /// still there as the same file. A `.log` being switched by the cleaner (its swap file
    /// there, its name not), or one that vanishes between the listing and its `stat`, is an
    /// error of kind `NotFound`: the listing would miss offsets still in the log.
    fn relist(&self) -> io::Result<Arc<Listing>> {
        let old = self.listing.lock().clone();
        self.check_incarnation()?;
        let mut bases = Vec::new();
        let mut swaps = Vec::new();
        for entry in std::fs::read_dir(&self.dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            match parse_segment_file_name(name) {
                Some((base, SegmentFileKind::Log)) => bases.push(base),
                Some(_) => {}
                None => swaps.extend(swap_base(name)),
            }
        }
        bases.sort_unstable();
        if let Some(b) = swaps.iter().find(|b| bases.binary_search(b).is_err()) {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "segment {b} of {} is being switched by the log cleaner",
                    self.dir.display()
                ),
            ));
        }
        let mut segs = Vec::with_capacity(bases.len());
        for base in bases {
            let path = seg_path(&self.dir, base, SegmentFileKind::Log);
            let (log, st) = CachedFile::unopened_read_only(&path)?;
            let id = (st.st_dev, st.st_ino);
            let kept = old.as_ref().and_then(|l| {
                l.segs
                    .binary_search_by_key(&base, |s| s.base)
                    .ok()
                    .map(|i| l.segs[i].clone())
                    .filter(|s| s.id == id)
            });
            segs.push(kept.unwrap_or_else(|| {
                Arc::new(SegFiles {
                    base,
                    id,
                    log,
                    learned: Mutex::new(Learned::default()),
                })
            }));
        }
        // Checked again after: the files listed are the topic's if it held them before and
        // after (a new incarnation's directory replaces the whole directory, by rename).
        self.check_incarnation()?;
        let l = Arc::new(Listing { segs });
        *self.listing.lock() = Some(l.clone());
        Ok(l)
    }

    /// The read below `end` (> `offset`), once.
    fn read_below(
        &self,
        offset: i64,
        max_bytes: u32,
        min_one_batch: bool,
        committed: bool,
        end: i64,
        p: Published,
    ) -> Result<ReadResult, Failed> {
        let (mut listing, mut fresh) = self.cached_listing()?;
        // The segment holding the offset.
        let mut k = loop {
            match listing.segs.first() {
                Some(first) if offset >= first.base => {
                    break listing.segs.partition_point(|s| s.base <= offset) - 1;
                }
                first if fresh => {
                    let Some(first) = first else {
                        return Err(Failed::Io(io::Error::new(
                            io::ErrorKind::NotFound,
                            format!("no segment in {}", self.dir.display()),
                        )));
                    };
                    return Err(Failed::Below { first: first.base });
                }
                _ => {
                    listing = self.relist()?;
                    fresh = true;
                }
            }
        };
        // The segment holding the offset: where the aborted transactions are looked for.
        let from_base = listing.segs[k].base;
        // The batch holding it, in that segment or the next ones.
        let found = loop {
            let seg = listing.segs[k].clone();
            let sealed = k + 1 < listing.segs.len();
            let file = seg.log.get()?;
            let size = file.metadata()?.len();
            match seg.find(&self.dir, &file, size, offset, end, sealed)? {
                Found::Batch(pos, h) => break Some((seg, file, size, pos, h)),
                Found::Bound => break None,
                Found::End { short } if sealed => {
                    if short {
                        return Err(Failed::Io(invalid(format!(
                            "segment {} of {} ends inside a batch below the bound {end}",
                            seg.base,
                            self.dir.display()
                        ))));
                    }
                    k += 1;
                }
                // The newest segment known ends below the bound: the owner rolled since the
                // listing, or its writes are not visible here yet.
                Found::End { short } => {
                    if fresh {
                        break None;
                    }
                    listing = self.relist()?;
                    fresh = true;
                    let next = listing.segs.partition_point(|s| s.base <= seg.base);
                    if next == listing.segs.len() {
                        break None;
                    }
                    if short {
                        return Err(Failed::Io(invalid(format!(
                            "segment {} of {} ends inside a batch below the bound {end}",
                            seg.base,
                            self.dir.display()
                        ))));
                    }
                    k = next;
                }
            }
        };
        let Some((seg, file, size, pos, h)) = found else {
            return Ok(self.result(p, committed, None, Vec::new()));
        };
        let Some((len, upper)) = seg.extent(&file, size, pos, &h, max_bytes, min_one_batch, end)?
        else {
            return Ok(self.result(p, committed, None, Vec::new()));
        };
        let slice = FileSlice {
            file,
            position: pos,
            len: u32::try_from(len).unwrap_or(u32::MAX),
        };
        let aborted = if committed {
            let from = listing.segs.partition_point(|s| s.base < from_base);
            let segs = listing.segs[from..].to_vec();
            self.collect_aborted(segs, fresh, offset, upper, p.high_watermark)?
        } else {
            Vec::new()
        };
        Ok(self.result(p, committed, Some(slice), aborted))
    }

    /// The aborted transactions overlapping `[fetch_offset, upper)`, as the log's read lists
    /// them (Kafka's `collectAbortedTxns`): from the segment holding the fetch offset on,
    /// stopping at the first entry whose last stable offset reaches `upper`. An ABORT's entry
    /// is in the segment holding its marker, which may be newer than every segment listed
    /// (a marker below the high watermark, in a segment rolled since the listing): when the
    /// entries run out, the newest segment listed is checked to hold the offset before the
    /// high watermark `hw`, and the directory listed again if it does not.
    fn collect_aborted(
        &self,
        mut segs: Vec<Arc<SegFiles>>,
        mut fresh: bool,
        fetch_offset: i64,
        upper: i64,
        hw: i64,
    ) -> Result<Vec<AbortedTxn>, Failed> {
        let mut out = Vec::new();
        let mut i = 0;
        loop {
            while let Some(seg) = segs.get(i) {
                let entries = seg.txn_entries(&self.dir, i + 1 < segs.len())?;
                for e in entries.iter() {
                    if e.last_offset >= fetch_offset && e.first_offset < upper {
                        out.push(AbortedTxn {
                            producer_id: e.producer_id,
                            first_offset: e.first_offset,
                        });
                    }
                    if e.last_stable_offset >= upper {
                        return Ok(out);
                    }
                }
                i += 1;
            }
            let Some(last) = segs.last().cloned() else {
                return Ok(out);
            };
            if fresh || self.holds(&last, hw - 1, hw)? {
                return Ok(out);
            }
            let listing = self.relist()?;
            fresh = true;
            let newer = listing.segs.partition_point(|s| s.base <= last.base);
            segs.extend(listing.segs[newer..].iter().cloned());
        }
    }

    /// The segment holds a batch reaching `offset` below `end` (or one crossing `end`): no
    /// newer segment starts below `offset`.
    fn holds(&self, seg: &SegFiles, offset: i64, end: i64) -> io::Result<bool> {
        let file = seg.log.get()?;
        let size = file.metadata()?.len();
        Ok(
            match seg.find(&self.dir, &file, size, offset, end, false)? {
                Found::Batch(..) | Found::Bound => true,
                Found::End { .. } => false,
            },
        )
    }
}

/// Why one attempt of a read failed.
#[derive(Debug)]
enum Failed {
    Io(io::Error),
    /// The offset is below the first segment on the volume.
    Below {
        first: i64,
    },
}

impl From<io::Error> for Failed {
    fn from(e: io::Error) -> Self {
        Failed::Io(e)
    }
}

#[cfg(test)]
#[path = "replica_tests.rs"]
mod tests;

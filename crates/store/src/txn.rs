//! Transactions on one partition (Kafka's `ProducerStateManager` ongoing and unreplicated
//! transactions, and its `TransactionIndex`):
//!
//! - [`TxnState`]: the transactions open on the log, by first offset, and the completed ones
//!   whose marker is not yet below the high watermark (the published mark in cluster mode).
//!   The oldest of either is the first unstable offset; the last stable offset is that, or
//!   the high watermark. Each first offset carries where its batch starts in the files, so a
//!   read_committed fetch is cut there without reading a header.
//! - [`TxnIndex`]: a segment's aborted transactions, in memory and in `<base>.txnindex`
//!   (Kafka's layout, `sluice_format::txn`), the file created at the first ABORT of an open
//!   transaction in the segment. The `.log` is the truth: opening a log rebuilds the index of
//!   every segment it replays, and a damaged file is rebuilt, never trusted.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

use sluice_format::txn::{decode_txn_index, TxnIndexEntry, TXN_INDEX_ENTRY_LEN};
use sluice_format::{segment_file_name, SegmentFileKind};

use crate::filecache::CachedFile;
use crate::SyncedMark;

/// An open or unpublished transaction: its producer, and where its first batch starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TxnStart {
    pub producer_id: i64,
    pub first: SyncedMark,
    /// The marker's offset, once completed.
    pub last_offset: Option<i64>,
}

/// The transactions that keep the last stable offset down.
#[derive(Clone, Debug, Default)]
pub(crate) struct TxnState {
    /// Open transactions by first offset.
    pub ongoing: BTreeMap<i64, TxnStart>,
    /// Completed transactions whose marker is at or past the high watermark, by first offset.
    pub unpublished: BTreeMap<i64, TxnStart>,
}

impl TxnState {
    /// A transaction opened at `first` (its batch's offset, segment base and position).
    pub(crate) fn start(&mut self, producer_id: i64, first: SyncedMark) {
        self.ongoing.insert(
            first.offset,
            TxnStart {
                producer_id,
                first,
                last_offset: None,
            },
        );
    }

    /// The open transaction starting at `first_offset` ended with the marker at `last_offset`;
    /// it stays unstable until the high watermark `hw` passes the marker.
    pub(crate) fn complete(&mut self, first_offset: i64, last_offset: i64, hw: i64) {
        if let Some(mut t) = self.ongoing.remove(&first_offset) {
            if last_offset >= hw {
                t.last_offset = Some(last_offset);
                self.unpublished.insert(first_offset, t);
            }
        }
    }

    /// The high watermark moved to `hw`: completed transactions whose marker lies below it are
    /// stable (Kafka's `onHighWatermarkUpdated`).
    pub(crate) fn published_to(&mut self, hw: i64) {
        self.unpublished
            .retain(|_, t| t.last_offset.is_none_or(|l| l >= hw));
    }

    /// Kafka's `lastStableOffset(completedTxn)`: what the index entry of a transaction of
    /// `producer_id` ending at `last_offset` records: the first offset of the oldest other
    /// open transaction, else the marker's offset + 1.
    pub(crate) fn stable_after(&self, producer_id: i64, last_offset: i64) -> i64 {
        self.ongoing
            .values()
            .find(|t| t.producer_id != producer_id)
            .map_or(last_offset + 1, |t| t.first.offset)
    }
}

/// A segment's aborted-transaction index.
#[derive(Debug, Default)]
pub(crate) struct TxnIndex {
    /// The entries; None until loaded from the file (sealed segments of an opened log load
    /// on first use).
    pub entries: Option<Arc<Vec<TxnIndexEntry>>>,
    /// The `.txnindex`, under the partition-file cache (`crate::filecache`: closed while idle
    /// and clean, opened again on use). None while the segment has none, or it was not
    /// opened yet.
    pub file: Option<CachedFile>,
}

/// `<base>.txnindex` in `dir` (`segment::seg_path` of the kind, named here so that this
/// module, below the segment that holds a [`TxnIndex`], imports nothing of it).
fn txn_path(dir: &Path, base: i64) -> std::path::PathBuf {
    dir.join(segment_file_name(base, SegmentFileKind::TxnIndex))
}

/// Open `<base>.txnindex` in `dir` if it exists.
pub(crate) fn open_existing(dir: &Path, base: i64) -> io::Result<Option<File>> {
    match OpenOptions::new()
        .read(true)
        .write(true)
        .open(txn_path(dir, base))
    {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// `<base>.txnindex` in `dir` taken into the partition-file cache, if it exists.
pub(crate) fn cached_existing(dir: &Path, base: i64) -> io::Result<Option<CachedFile>> {
    open_existing(dir, base)?
        .map(|f| crate::filecache::files().adopt(txn_path(dir, base), f))
        .transpose()
}

/// The entries of an open `.txnindex` of the segment based at `base`; an error when damaged.
pub(crate) fn read_entries(file: &File, base: i64) -> io::Result<Vec<TxnIndexEntry>> {
    let len = usize::try_from(file.metadata()?.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "transaction index too large"))?;
    let mut b = vec![0u8; len];
    file.read_exact_at(&mut b, 0)?;
    decode_txn_index(&b, base).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

impl TxnIndex {
    /// The entries, loading them from `<base>.txnindex` in `dir` if need be (none when the
    /// file does not exist). A damaged file is an error of kind `InvalidData`.
    pub(crate) fn load(&mut self, dir: &Path, base: i64) -> io::Result<Arc<Vec<TxnIndexEntry>>> {
        self.load_checked(dir, base, || Ok(()))
    }

    /// [`TxnIndex::load`], where a file that is not there counts as an empty index only if
    /// `still_there` agrees that the segment's files are where they were (its `.log` under
    /// its name): a segment whose files were renamed away (a deletion, its directory moved)
    /// may have had one, and a read must fail rather than take its aborted transactions for
    /// none.
    pub(crate) fn load_checked(
        &mut self,
        dir: &Path,
        base: i64,
        still_there: impl Fn() -> io::Result<()>,
    ) -> io::Result<Arc<Vec<TxnIndexEntry>>> {
        if let Some(e) = &self.entries {
            return Ok(e.clone());
        }
        let entries = match &self.file {
            Some(f) => read_entries(&*f.get()?, base)?,
            None => match cached_existing(dir, base)? {
                Some(f) => {
                    let v = read_entries(&*f.get()?, base)?;
                    self.file = Some(f);
                    v
                }
                None => {
                    still_there()?;
                    Vec::new()
                }
            },
        };
        let e = Arc::new(entries);
        self.entries = Some(e.clone());
        Ok(e)
    }

    /// Before the file is renamed away (a deletion, a cleaning's swap): the entries into
    /// memory if they are not yet (an open loads a sealed segment's index on first use), so
    /// that a read_committed fetch still holding the segment finds them there rather than
    /// by a name that is gone. A damaged file stays unloaded: its first reader rebuilds it
    /// from the log, which the fetch holds.
    pub(crate) fn load_before_rename(
        &mut self,
        dir: &Path,
        base: i64,
        still_there: impl Fn() -> io::Result<()>,
    ) {
        if self.entries.is_none() {
            if let Err(e) = self.load_checked(dir, base, still_there) {
                tracing::debug!(dir = %dir.display(), segment = base, error = %e,
                    "transaction index not loaded before its rename");
            }
        }
    }

    /// Append one entry to the file (created if need be) and to memory.
    pub(crate) fn append(&mut self, dir: &Path, base: i64, entry: TxnIndexEntry) -> io::Result<()> {
        let mut entries = self.load(dir, base)?;
        if self.file.is_none() {
            self.file = Some(CachedFile::open(&txn_path(dir, base), true)?);
        }
        let file = self.file.as_ref().expect("opened above");
        let at = (entries.len() * TXN_INDEX_ENTRY_LEN) as u64;
        file.for_write()?.write_all_at(&entry.encode(), at)?;
        Arc::make_mut(&mut entries).push(entry);
        self.entries = Some(entries);
        Ok(())
    }

    /// Make the file hold exactly `entries` (removing it when there are none), and memory too.
    pub(crate) fn replace(
        &mut self,
        dir: &Path,
        base: i64,
        entries: Vec<TxnIndexEntry>,
    ) -> io::Result<()> {
        let bytes: Vec<u8> = entries.iter().flat_map(|e| e.encode()).collect();
        if entries.is_empty() {
            // An empty index is an absent file (as Kafka creates it lazily). The handle is
            // kept until the segment goes, so nothing is unlinked while held: truncate it.
            match &self.file {
                Some(f) => f.for_write()?.set_len(0)?,
                None => match std::fs::remove_file(txn_path(dir, base)) {
                    Ok(()) => {}
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                },
            }
        } else {
            if self.file.is_none() {
                self.file = Some(CachedFile::open(&txn_path(dir, base), true)?);
            }
            // Written over in place, then cut: never emptied first, so that a crash in the
            // middle leaves the entries a rewrite keeps as they were (an open resumed at the
            // recovery point takes those below the producer snapshot from the file).
            let f = self.file.as_ref().expect("opened above").for_write()?;
            #[cfg(test)]
            crate::faults::rewrite_step("txnindex")?;
            f.write_all_at(&bytes, 0)?;
            #[cfg(test)]
            crate::faults::rewrite_step("txnindex")?;
            f.set_len(bytes.len() as u64)?;
        }
        self.entries = Some(Arc::new(entries));
        Ok(())
    }

    /// fsync the file, if there is one: the open one, else `<base>.txnindex` in `dir` if it
    /// exists (written by an earlier process, whose writes may be in the page cache only).
    pub(crate) fn sync(&self, dir: &Path, base: i64) -> io::Result<()> {
        match &self.file {
            // Closed by the cache only while clean: nothing of it is left to sync then.
            Some(f) => f.sync_data(),
            None => match open_existing(dir, base)? {
                Some(f) => f.sync_data(),
                None => Ok(()),
            },
        }
    }
}

/// What a batch means for transactions, as a rebuild reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TxnEvent {
    /// A transactional data batch.
    Data,
    /// A data batch outside any transaction (its producer had none open).
    Plain,
    /// A transaction marker: its control type and coordinator epoch.
    Marker(sluice_format::txn::ControlRecord),
}

/// Read the control record of the marker batch at `pos` of `log` (None when unreadable: the
/// batch is then not counted as a marker, as a scan that cannot read it cannot either).
pub(crate) fn read_marker(
    log: &File,
    pos: u64,
    h: &sluice_format::BatchHeader,
) -> io::Result<Option<sluice_format::txn::ControlRecord>> {
    if h.total_len() > 64 * 1024 {
        return Ok(None);
    }
    let mut b = vec![0u8; h.total_len()];
    log.read_exact_at(&mut b, pos)?;
    Ok(sluice_format::txn::parse_control(&b, h).ok())
}

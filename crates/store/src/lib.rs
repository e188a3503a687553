//! The log store: partition logs in Apache Kafka's on-disk format.
//!
//! Owns: `<log.dir>/<topic>-<partition>/` directories, segment files (`.log`, `.index`,
//! `.timeindex`), `partition.metadata`, `leader-epoch-checkpoint`, per-log-dir
//! `meta.properties`, `recovery-point-offset-checkpoint`, `log-start-offset-checkpoint` and the
//! `.kafka_cleanshutdown` marker; recovery after a crash; retention; producer (idempotence)
//! state per partition.
//!
//! Does not own: sockets, Kafka error codes (the broker maps [`AppendError`] etc. to codes),
//! topic metadata (the coordination layer), configuration parsing.

use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::{Mutex, RwLock};

mod cache;
mod cleaner;
mod deferred;
mod epoch;
#[cfg(test)]
mod faults;
pub mod fds;
mod filecache;
mod fsutil;
mod gate;
mod log;
mod manager;
pub mod mutation;
mod producer;
mod recent;
pub mod recovery;
mod relocate;
mod replica;
mod sealed;
mod segment;
mod snapshots;
mod sys;
mod txn;
mod writeback;

pub mod volume;

#[cfg(test)]
mod gate_tests;
#[cfg(test)]
mod shared_tests;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod txn_tests;

pub use cache::DropStats;
pub use cleaner::{CleanStats, CleanerConfig};
pub use deferred::{DeleteRetry, DeletionStats};
pub use gate::{Fenced, WriteGate};
pub use manager::existing_cluster_id;
pub use replica::{Published, ReplicaReader};
pub use writeback::{WritebackEnd, WritebackStarted};

/// A topic name and partition index.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

/// Whether the log dirs are this broker's alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sharing {
    /// One broker (Kafka's layout): per-dir checkpoints, the clean-shutdown marker,
    /// `meta.properties` naming the node.
    Exclusive,
    /// Every broker of a cluster mounts the same dirs and serves the partitions it owns. The
    /// per-dir files (checkpoints, clean-shutdown marker) are neither read nor written, since
    /// no one broker owns them; `meta.properties` is checked for the cluster id only. An open
    /// recovers the log from its files: from the recovery point the previous owner recorded
    /// ([`LogManager::open_log_at`]) or from the start, cutting what a former owner appended
    /// past a takeover. Per-partition state is written only by the partition's owner.
    Shared,
}

/// `message.timestamp.type`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

/// The per-partition settings the store needs (resolved from topic overrides + broker defaults).
#[derive(Clone, Debug)]
pub struct LogConfig {
    /// `segment.bytes`: roll when the active segment would exceed this.
    pub segment_bytes: u64,
    /// `segment.ms`: roll when the active segment's first batch is older than this.
    pub segment_ms: i64,
    /// `segment.jitter.ms`: each segment's time roll comes a share of this earlier (as
    /// Kafka's, below `segment_ms`), so that partitions created together do not roll together.
    pub segment_jitter_ms: i64,
    /// `retention.ms`; -1 = unlimited.
    pub retention_ms: i64,
    /// `retention.bytes` per partition; -1 = unlimited.
    pub retention_bytes: i64,
    /// `index.interval.bytes`: bytes between sparse offset/time index entries.
    pub index_interval_bytes: u32,
    /// `segment.index.bytes`: max size of an index file; roll when full.
    pub segment_index_bytes: u32,
    /// `max.message.bytes`: largest record batch accepted.
    pub max_message_bytes: u32,
    /// `message.timestamp.type`.
    pub timestamp_type: TimestampType,
    /// `flush.messages`: fsync after this many appended records; i64::MAX = leave it to the OS.
    pub flush_messages: i64,
    /// `flush.ms`: fsync when the oldest unflushed append is this old; i64::MAX = never.
    pub flush_ms: i64,
    /// `cleanup.policy` and the compaction settings.
    pub cleanup: Cleanup,
}

/// `cleanup.policy` and the log cleaner's topic settings (Kafka's defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cleanup {
    /// `cleanup.policy` includes `compact`: the log cleaner keeps the newest record per key.
    pub compact: bool,
    /// `cleanup.policy` includes `delete`: time and size retention apply.
    pub delete: bool,
    /// `min.cleanable.dirty.ratio`: clean when the uncleaned share of the log exceeds this.
    pub min_cleanable_dirty_ratio: f64,
    /// `min.compaction.lag.ms`: records younger than this are not cleaned.
    pub min_compaction_lag_ms: i64,
    /// `max.compaction.lag.ms`: uncleaned records older than this make the log due whatever
    /// its dirty ratio.
    pub max_compaction_lag_ms: i64,
    /// `delete.retention.ms`: how long a tombstone stays after the first cleaning that keeps it.
    pub delete_retention_ms: i64,
}

impl Default for Cleanup {
    /// `cleanup.policy=delete` with Kafka's default compaction settings.
    fn default() -> Self {
        Cleanup {
            compact: false,
            delete: true,
            min_cleanable_dirty_ratio: 0.5,
            min_compaction_lag_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            delete_retention_ms: 86_400_000,
        }
    }
}

/// A point of a log: an offset, and where it ends in the files (the segment's base offset and
/// the byte position in it).
/// What a log's owner recorded of its sealed segments below `below` (the newest segment it
/// published data in): how many, and a hash of their base offsets and sizes
/// ([`Log::sealed_digest`]). A takeover given it ([`LogManager::open_log_recorded`]) trusts
/// those segments without reading them if its listing gives the same.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SealedDigest {
    pub below: i64,
    pub count: u64,
    pub hash: u64,
}

/// What a partition's previous owner recorded, for a takeover
/// ([`LogManager::open_log_recorded`]; [`LogManager::open_log_at`] has no `sealed`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Recorded {
    pub recovery_point: i64,
    pub newest_segment: i64,
    pub sealed: Option<SealedDigest>,
    /// The last cleaner switch the owner announced ([`WriteGate::announce_switch`]).
    pub switch: Option<CleanerSwitch>,
    /// The owner's newest durable producer snapshot at or below its recovery point
    /// ([`Log::vouched_snapshot`]): trusted by the next owner's open though not at a segment
    /// base, if the file there still has this CRC.
    pub snapshot: Option<SnapshotRef>,
}

/// A producer snapshot an owner vouches for: its offset and the CRC-32C its file carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotRef {
    pub offset: i64,
    pub crc: u32,
    /// The offset of the snapshot the owner wrote before it, if any: where the next owner's
    /// replay of producer history starts (only a position: that file is not trusted).
    pub previous: Option<i64>,
}

/// A cleaner switch, as announced before its swap files are made: the base offset of the
/// cleaned segment and the random part of its tag (`<base>-<id as 12 hex digits>`, the tag of
/// its `.swap` and `.deleted` names: `cleaner::swap`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CleanerSwitch {
    pub base: i64,
    pub id: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SyncedMark {
    pub offset: i64,
    pub base: i64,
    pub pos: u64,
}

impl SyncedMark {
    /// No mark yet.
    pub const NONE: SyncedMark = SyncedMark {
        offset: -1,
        base: -1,
        pos: 0,
    };
}

/// Who is appending: clients get producer-state checks and offset assignment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppendOrigin {
    /// A producer: validate, check idempotence sequences, assign offsets.
    Client,
    /// A coordinator writing for a producer (a TxnOffsetCommit's transactional batch on
    /// `__consumer_offsets`): the producer's epoch is checked and its transaction tracked,
    /// but its batches carry no sequence numbers (as Kafka's COORDINATOR origin).
    Coordinator,
}

/// The type of a transaction marker (Kafka's `ControlRecordType` ABORT = 0, COMMIT = 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlType {
    Abort,
    Commit,
}

/// A fetch's `isolation_level`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// Everything below the high watermark.
    ReadUncommitted,
    /// Whole batches below the last stable offset, with the aborted transactions in range.
    ReadCommitted,
}

/// An aborted transaction a read_committed fetch overlaps (Kafka's FetchResponse
/// `AbortedTransaction`): the consumer drops the producer's batches from `first_offset` up
/// to its ABORT marker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
}

/// One producer the log knows (DescribeProducers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerView {
    pub producer_id: i64,
    pub producer_epoch: i16,
    /// -1 when no batch of the current epoch is remembered.
    pub last_sequence: i32,
    /// When the producer last appended (ms).
    pub last_timestamp: i64,
    /// The coordinator epoch of its last marker, -1 before any.
    pub coordinator_epoch: i32,
    /// The first offset of its open transaction on this partition, -1 when none.
    pub current_txn_start_offset: i64,
}

/// Kafka's `VerificationGuard` (KIP-890 part 1): what ties the transaction coordinator's
/// verdict on a producer's transaction to the append it allows. A partition leader takes
/// the guard ([`Log::start_txn_verification`]) before it asks the coordinator whether the
/// producer's transaction holds the partition, and appends with it
/// ([`Log::append_verified`]); a marker for the producer written in between clears the
/// log's guard, so a verdict given before the marker cannot open a transaction after it.
/// Unique in the process: a guard of one log (or of a re-opened log's predecessor) never
/// matches another's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VerificationGuard(std::num::NonZeroU64);

impl VerificationGuard {
    fn new() -> VerificationGuard {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        VerificationGuard(std::num::NonZeroU64::new(n).unwrap_or(std::num::NonZeroU64::MIN))
    }
}

/// The result of a successful append.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendOutcome {
    /// Offset of the first record appended (or, for a duplicate, of the original batch).
    pub base_offset: i64,
    pub last_offset: i64,
    /// The LogAppendTime stamped into the batches, or -1 under CreateTime.
    pub log_append_time_ms: i64,
    pub log_start_offset: i64,
    /// True when the batch was a retry of one already in the log (nothing appended).
    pub duplicate: bool,
    /// True when `flush.messages` / `flush.ms` says this append must be fsynced before an
    /// acks=all answer (the broker then calls [`Log::flush`], group-committed). For a
    /// duplicate: a flush policy is set and the original is not yet below the synced offset
    /// (its own answer may never have arrived).
    pub flush_due: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum AppendError {
    /// Bad CRC, bad length, truncated batch.
    #[error("corrupt record batch for {tp:?}: {reason}")]
    Corrupt { tp: TopicPartition, reason: String },
    /// Magic other than 2, invalid field values (e.g. negative record count).
    #[error("invalid record batch for {tp:?}: {reason}")]
    Invalid { tp: TopicPartition, reason: String },
    #[error("record batch of {size} bytes for {tp:?} exceeds max.message.bytes {max}")]
    TooLarge {
        tp: TopicPartition,
        size: usize,
        max: u32,
    },
    #[error("out of order sequence for producer {producer_id} on {tp:?}: expected {expected}, got {got}")]
    OutOfOrderSequence {
        tp: TopicPartition,
        producer_id: i64,
        expected: i32,
        got: i32,
    },
    #[error("producer {producer_id} epoch {epoch} is fenced on {tp:?} (current {current})")]
    ProducerFenced {
        tp: TopicPartition,
        producer_id: i64,
        epoch: i16,
        current: i16,
    },
    /// A batch that does not fit the producer's transaction state (a non-transactional batch
    /// while its transaction is open).
    #[error("invalid transaction state of producer {producer_id} on {tp:?}: {reason}")]
    InvalidTxnState {
        tp: TopicPartition,
        producer_id: i64,
        reason: String,
    },
    /// A marker from a transaction coordinator older than the last one seen for the producer
    /// (Kafka's TRANSACTION_COORDINATOR_FENCED).
    #[error("marker for producer {producer_id} on {tp:?} has coordinator epoch {coordinator_epoch}, below the last seen {current}")]
    CoordinatorFenced {
        tp: TopicPartition,
        producer_id: i64,
        coordinator_epoch: i32,
        current: i32,
    },
    #[error("i/o error appending to {tp:?}: {source}")]
    Io {
        tp: TopicPartition,
        source: io::Error,
    },
    /// This broker may not write the partition's files now (the write gate, `gate.rs`):
    /// nothing was written.
    #[error(transparent)]
    Fenced(#[from] Fenced),
}

/// Why a log refuses writes until it is re-opened, which recovers it from what storage holds.
#[derive(Clone, Debug, thiserror::Error)]
pub enum LogFailure {
    /// An append failed part-way and its bytes could not be cut back: the `.log` may hold
    /// bytes past the log end, and nothing may be written after them.
    #[error("a failed write left bytes after position {size} of {path} that could not be cut back: {cause}")]
    UntrimmedWrite {
        path: PathBuf,
        size: u64,
        cause: String,
    },
    /// Its user marked it failed: state derived from the log (a coordinator's) went ahead of
    /// what the log holds, and is rebuilt from the log by re-opening it.
    #[error("{reason}")]
    Refused { reason: String },
    /// An `fsync` failed. The kernel may have dropped the dirty pages it could not write
    /// while keeping their contents readable, and a later `fsync` of the file can succeed
    /// without them: nothing at or past the synced offset may be trusted to be on storage.
    #[error(
        "fsync of {path} failed ({cause}); data at or past offset {synced} may never reach storage"
    )]
    SyncFailed {
        path: PathBuf,
        synced: i64,
        cause: String,
    },
}

/// The error of an append, roll or flush refused by a failed log (inside an [`io::Error`] of
/// kind `Other`; the broker answers such appends with a retriable storage error).
#[derive(Clone, Debug, thiserror::Error)]
#[error(
    "log {tp:?} refuses writes until it is re-opened and recovered from storage, because {failure}"
)]
pub struct LogFailed {
    pub tp: TopicPartition,
    pub failure: LogFailure,
}

#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(
        "offset {requested} out of range for {tp:?} (log start {log_start}, log end {log_end})"
    )]
    OffsetOutOfRange {
        tp: TopicPartition,
        requested: i64,
        log_start: i64,
        log_end: i64,
    },
    #[error("i/o error reading {tp:?}: {source}")]
    Io {
        tp: TopicPartition,
        source: io::Error,
    },
    /// Only from [`Log::read_cached`]: the read needs data that is not in memory or the page
    /// cache, and would have waited for the volume.
    #[error("reading {tp:?} would wait for the volume")]
    WouldBlock { tp: TopicPartition },
    /// Only from [`Log::delete_records_before`]: this broker may not write the partition's
    /// files now (the write gate, `gate.rs`).
    #[error(transparent)]
    Fenced(#[from] Fenced),
}

/// Scratch buffer of [`FileSlice::load`] where `sendfile` to `/dev/null` is refused.
const LOAD_SCRATCH_BYTES: usize = 256 * 1024;

fn ended_inside() -> io::Error {
    io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "segment file ended inside a fetched region",
    )
}

/// A region of a segment file: what a fetch hands back. Holding it keeps the file open (a
/// segment is never unlinked while a slice of it is alive). The server sends it to the client
/// from the file (`sendfile`, or `pread` for small regions).
#[derive(Clone, Debug)]
pub struct FileSlice {
    pub file: Arc<File>,
    pub position: u64,
    pub len: u32,
}

impl FileSlice {
    /// Read the region into memory (pread straight into fresh capacity, no zeroing; no mmap).
    pub fn read_bytes(&self) -> io::Result<Bytes> {
        self.read_range(0, self.len)
    }

    /// Bring the region into the page cache, waiting for the volume, without copying it out:
    /// `sendfile` to `/dev/null` (the kernel reads the pages in, and the null device takes
    /// them without a copy); where that is refused, reads into a scratch buffer. For a
    /// blocking thread, so that a runtime thread then sends the region from the page cache
    /// instead of waiting there for the volume (Kafka's KAFKA-7504 does the same).
    pub fn load(&self) -> io::Result<()> {
        static NULL: std::sync::OnceLock<Option<File>> = std::sync::OnceLock::new();
        let end = self.position + u64::from(self.len);
        let mut at = self.position;
        let null = NULL.get_or_init(|| File::options().write(true).open("/dev/null").ok());
        if let Some(null) = null {
            while at < end {
                let want = usize::try_from(end - at).unwrap_or(usize::MAX);
                match rustix::fs::sendfile(null, &*self.file, Some(&mut at), want) {
                    Ok(0) => return Err(ended_inside()),
                    Ok(_) => {}
                    Err(rustix::io::Errno::INTR) => {}
                    // Refused (EINVAL: a file system without splice reads): read it instead.
                    Err(_) => break,
                }
            }
        }
        let mut scratch = vec![0u8; LOAD_SCRATCH_BYTES.min(self.len as usize)];
        while at < end {
            let want = scratch
                .len()
                .min(usize::try_from(end - at).unwrap_or(usize::MAX));
            match rustix::io::pread(&*self.file, &mut scratch[..want], at)? {
                0 => return Err(ended_inside()),
                n => at += n as u64,
            }
        }
        Ok(())
    }

    /// Fill `buf` with the region's bytes from `from` bytes into it (`buf` no longer than
    /// what the region has left): for a caller that reuses one buffer for a region's chunks.
    pub fn read_into(&self, from: u32, buf: &mut [u8]) -> io::Result<()> {
        if u64::from(from) + buf.len() as u64 > u64::from(self.len) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "read past the end of a fetched region",
            ));
        }
        let start = self.position + u64::from(from);
        let mut done = 0;
        while done < buf.len() {
            let read = rustix::io::pread(&*self.file, &mut buf[done..], start + done as u64)?;
            if read == 0 {
                return Err(ended_inside());
            }
            done += read;
        }
        Ok(())
    }

    /// Read `len` bytes of the region from `from` bytes into it (clamped to the region).
    pub fn read_range(&self, from: u32, len: u32) -> io::Result<Bytes> {
        let from = from.min(self.len);
        let len = len.min(self.len - from) as usize;
        let start = self.position + u64::from(from);
        let mut buf: Vec<u8> = Vec::with_capacity(len);
        while buf.len() < len {
            let at = start + buf.len() as u64;
            let read =
                rustix::io::pread(&*self.file, rustix::buffer::spare_capacity(&mut buf), at)?;
            if read == 0 {
                return Err(ended_inside());
            }
        }
        // The allocation may be larger than asked for, and the read fills all of it.
        buf.truncate(len);
        Ok(Bytes::from(buf))
    }
}

#[derive(Clone, Debug)]
pub struct ReadResult {
    /// Whole record batches starting with the one containing the fetch offset; may be empty.
    pub slice: Option<FileSlice>,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// The last stable offset when the read was made.
    pub last_stable_offset: i64,
    /// Under [`Isolation::ReadCommitted`]: the aborted transactions overlapping the returned
    /// batches (empty when none); None under read-uncommitted.
    pub aborted: Option<Vec<AbortedTxn>>,
}

/// One partition's log. `Send + Sync`; appends are serialised inside, reads run concurrently.
#[derive(Debug)]
pub struct Log {
    tp: TopicPartition,
    /// The partition directory; changes only when the log moves to another log dir (under the
    /// writer lock).
    dir: RwLock<PathBuf>,
    topic_id: uuid::Uuid,
    config: RwLock<LogConfig>,
    /// Segment list, offsets and flush state: short critical sections only.
    shared: RwLock<log::Shared>,
    /// Serialises appends, rolls and segment deletion.
    writer: Mutex<log::Writer>,
    /// Serialises flushes (never held together with `writer`).
    flush_lock: Mutex<()>,
    /// Serialises renames of segment files by name: the cleaner's switch of a cleaned segment
    /// (taken before `writer`) and the renames of deleted segments (taken after `writer` is
    /// released, before `pending`). Appends never take it.
    files_lock: Mutex<()>,
    epochs: Mutex<epoch::EpochCache>,
    /// Held while `leader-epoch-checkpoint` is written (taken before `epochs`).
    epoch_file: Mutex<()>,
    /// The last write of `leader-epoch-checkpoint` failed: the file may lack an epoch that
    /// began since, which only a recovery that reads its batches finds again, so the recovery
    /// point does not move until a write succeeds (`Log::epochs_durable`).
    epochs_unpersisted: std::sync::atomic::AtomicBool,
    /// The next segment's files, made ahead of the roll (held while they are made; a roll
    /// only tries it, so it never waits for that).
    spare: Mutex<Option<segment::Spare>>,
    /// A producer snapshot was written since the old ones were last removed: the next
    /// [`Log::prepare_spare`] removes them, off the append path (removing a file can wait for
    /// the volume: on ext4 without a journal, mounted `discard`, the unlink discards).
    snapshots_unpruned: std::sync::atomic::AtomicBool,
    /// The recovery point the next open after a crash would be given (the checkpoint file
    /// last written, or the owner record in etcd): the prune keeps a snapshot at or below it.
    recorded_recovery_point: std::sync::atomic::AtomicI64,
    /// Offsets of the producer snapshots written and not yet fsynced with their directory
    /// entries: the next flush that covers the segments below one makes it durable
    /// (`Log::sync_snapshots`); pruning never removes one. Short critical sections only, never
    /// held through I/O (a roll on the append path adds to it).
    snapshots_unsynced: Mutex<Vec<i64>>,
    pending: Mutex<Vec<segment::PendingSegment>>,
    leader_epoch: std::sync::atomic::AtomicI32,
    deleted: std::sync::atomic::AtomicBool,
    del: Arc<deferred::DeleteCtx>,
    /// How far the page cache has been dropped behind (in memory only; see `cache.rs`). Held
    /// through a drop's I/O, which takes `flush_lock` (after it) around each `fdatasync`;
    /// never together with `writer`.
    drop_point: Mutex<cache::DropPoint>,
    /// What reads brought back into the page cache from below the drop point, for the next
    /// passes to advise out again (see `cache.rs`). Held only briefly, never through I/O.
    read_back: Mutex<cache::ReadBack>,
    /// Set by what can give the drop-behind work (an append, a read recorded below the drop
    /// point, a move to another log dir), taken by its pass ([`Log::take_cache_work`]): an
    /// idle log costs a pass one atomic swap, not a look at its segments.
    cache_work: std::sync::atomic::AtomicBool,
    /// The same for the broker's periodic flush check ([`Log::take_flush_work`]): set by an
    /// append, a roll, a config change and snapshots made durable (old ones to prune).
    flush_work: std::sync::atomic::AtomicBool,
    /// How far writeback of the log's data has been started and waited for (in memory only;
    /// see `writeback.rs`). Held only briefly, never through I/O.
    writeback_point: Mutex<cache::DropPoint>,
    /// Set when the log can no longer be written safely; it then refuses appends and rolls
    /// until it is re-opened (see [`LogFailure`]).
    failure: Mutex<Option<LogFailure>>,
    /// Asked immediately before every write to the log's files (`gate.rs`).
    gate: Arc<gate::GateSlot>,
    /// Bytes of segment data this log's open read and validated (recovery after an unclean
    /// shutdown or a takeover; 0 after a clean one).
    recovered_bytes: u64,
    /// Bytes appended since it was opened (batches as written; read for the broker's bytes-in
    /// balancing, `Log::appended_bytes`).
    appended: std::sync::atomic::AtomicU64,
    /// Where the active segment stood when the recovery point last followed the log end
    /// (`Log::advance_recovery_point`), and when.
    rp_followed: Mutex<log::Followed>,
    /// The CRC-32C of each of the newest snapshots this log wrote, by offset
    /// (`Log::vouched_snapshot`).
    snapshot_crcs: Mutex<Vec<(i64, u32)>>,
    /// The producer snapshot the open loaded, with its CRC, when it lay at the log end then:
    /// durable, and exactly the state the log started with (`Log::close_active` keeps it
    /// when the state is unchanged). Never vouched for: that is for snapshots it wrote. Cleared
    /// by any write at its offset: the file there is then another one, durable or not.
    loaded_end_snapshot: Mutex<Option<(i64, u32)>>,
    #[cfg(test)]
    faults: Mutex<faults::Faults>,
}

impl Log {
    pub fn topic_partition(&self) -> &TopicPartition {
        &self.tp
    }
    /// The partition directory (it changes when the log is moved to another log dir).
    pub fn dir(&self) -> PathBuf {
        self.dir.read().clone()
    }
    pub fn topic_id(&self) -> uuid::Uuid {
        self.topic_id
    }
    /// Bytes appended to this log since it was opened.
    pub fn appended_bytes(&self) -> u64 {
        self.appended.load(std::sync::atomic::Ordering::Relaxed)
    }
    /// Validate (magic 2, CRC-32C, sizes), check producer sequences, assign offsets (patching
    /// base offset, partition leader epoch and, under LogAppendTime, max timestamp in each batch
    /// header), write, index, roll if due. All batches in `records` are accepted or none.
    /// Transactional batches are not verified: one whose producer has no transaction open
    /// here opens one. A producer's batches from a client or a coordinator go through
    /// [`Log::append_verified`].
    pub fn append(
        &self,
        records: Bytes,
        origin: AppendOrigin,
        now_ms: i64,
    ) -> Result<AppendOutcome, AppendError> {
        self.append_impl(records, origin, None, now_ms)
    }
    /// [`Log::append`] under KIP-890's transaction verification: a transactional batch whose
    /// producer has no transaction open here at the batch's epoch (counting the batches
    /// before it in `records`) is refused with [`AppendError::InvalidTxnState`], nothing
    /// appended, unless `guard` is the producer's verification guard on this log, taken by
    /// [`Log::start_txn_verification`] before the coordinator was asked and not cleared
    /// since by a marker for the producer (Kafka's `UnifiedLog.append` with a
    /// `VerificationGuard`). Appending a transactional batch or marker of the producer clears
    /// its guard. A retry of a batch already in the log is answered as a duplicate first.
    pub fn append_verified(
        &self,
        records: Bytes,
        origin: AppendOrigin,
        guard: Option<VerificationGuard>,
        now_ms: i64,
    ) -> Result<AppendOutcome, AppendError> {
        self.append_impl(records, origin, Some(guard), now_ms)
    }
    /// Start (or join) the verification of `producer_id`'s transaction on this log, before the
    /// transaction coordinator is asked whether the transaction holds this partition (Kafka's
    /// `maybeStartTransactionVerification`). None when the producer has a transaction open
    /// here at `producer_epoch` (its batches need no verdict); else the guard its verdict
    /// must be appended with ([`Log::append_verified`]): the one under way, if a verification
    /// of the producer is (a concurrent request's), else a new one.
    /// `first_seq`: the first sequence of the batch to be appended with the verdict (None for
    /// the coordinator's own writes, TxnOffsetCommit).
    pub fn start_txn_verification(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        first_seq: Option<i32>,
        now_ms: i64,
    ) -> Option<VerificationGuard> {
        let mut w = self.writer.lock();
        if w.producers
            .get(producer_id)
            .is_some_and(|e| e.txn_first.is_some() && e.epoch == producer_epoch)
        {
            return None;
        }
        let v = w
            .verifying
            .entry(producer_id)
            .or_insert_with(|| producer::Verifying {
                guard: VerificationGuard::new(),
                started_ms: now_ms,
                lowest_seq: None,
                epoch: producer_epoch,
            });
        if producer_epoch > v.epoch {
            v.epoch = producer_epoch;
            v.lowest_seq = first_seq;
        } else if producer_epoch == v.epoch {
            v.lowest_seq = match (v.lowest_seq, first_seq) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        Some(v.guard)
    }
    /// Whole batches from the one containing `offset`, at most `max_bytes` unless
    /// `min_one_batch` (then the first batch is returned whole even if larger).
    pub fn read(
        &self,
        offset: i64,
        max_bytes: u32,
        min_one_batch: bool,
    ) -> Result<ReadResult, ReadError> {
        self.read_impl(offset, max_bytes, min_one_batch)
    }
    /// As [`Log::read`], up to the log end whatever readers may see (the published mark in
    /// cluster mode, the synced mark under `flush.messages=1`): for a coordinator loading the
    /// partition it writes, whose own latest appends must not be missed.
    pub fn read_appended(&self, offset: i64, max_bytes: u32) -> Result<ReadResult, ReadError> {
        self.read_appended_impl(offset, max_bytes)
    }
    /// As [`Log::read`]; under [`Isolation::ReadCommitted`] only whole batches below the last
    /// stable offset, and `aborted` lists the aborted transactions overlapping the returned
    /// range (Kafka's `collectAbortedTxns(fetchOffset, upperBoundOffset)`).
    pub fn read_isolated(
        &self,
        offset: i64,
        max_bytes: u32,
        min_one_batch: bool,
        isolation: Isolation,
    ) -> Result<ReadResult, ReadError> {
        self.read_isolated_impl(offset, max_bytes, min_one_batch, isolation)
    }
    /// As [`Log::read_isolated`], but never waits for the volume: when something the read
    /// needs (batch headers, sparse or transaction indexes) is in neither memory nor the page
    /// cache, [`ReadError::WouldBlock`] (checked with `preadv2(RWF_NOWAIT)`; on a file
    /// system that cannot say, the read waits as [`Log::read_isolated`] does). For the fetch
    /// path on a runtime thread, which then reads on a blocking thread (and
    /// [`FileSlice::load`]s what it found there): a consumer reading what was evicted must not
    /// hold up the requests that thread serves.
    pub fn read_cached(
        &self,
        offset: i64,
        max_bytes: u32,
        min_one_batch: bool,
        isolation: Isolation,
    ) -> Result<ReadResult, ReadError> {
        self.read_isolated_from(offset, max_bytes, min_one_batch, isolation, true)
    }
    /// Append one COMMIT or ABORT marker for the producer's transaction (Kafka's
    /// WriteTxnMarkers on a partition leader; the batch layout is in docs/log-format.md). It
    /// ends the producer's open transaction here, if any (a marker with none open is still
    /// written, as Kafka does). Refused with [`AppendError::ProducerFenced`] below the
    /// producer's epoch and [`AppendError::CoordinatorFenced`] below the last coordinator epoch
    /// seen for it; an epoch above the current one (KIP-890 bumps it at each end of a
    /// transaction) becomes the producer's. An ABORT of an open transaction adds an entry to
    /// the active segment's transaction index.
    pub fn append_marker(
        &self,
        producer_id: i64,
        producer_epoch: i16,
        coordinator_epoch: i32,
        control: ControlType,
        now_ms: i64,
    ) -> Result<AppendOutcome, AppendError> {
        self.append_marker_impl(
            producer_id,
            producer_epoch,
            coordinator_epoch,
            control,
            now_ms,
        )
    }
    /// Kafka's last stable offset: the first offset of the oldest transaction that is open, or
    /// completed with its marker not yet below the high watermark; else the high watermark.
    /// Never below the log start offset. Cheap (no I/O).
    pub fn last_stable_offset(&self) -> i64 {
        let s = self.shared.read();
        log::stable_mark(&s).0
    }
    /// Every producer the log knows, with its open transaction's first offset.
    /// True when `producer_id` has a transaction open on this log at `producer_epoch` (its
    /// first batch was appended; no marker yet). A batch of a later epoch is of a new
    /// transaction, even while the previous one's marker is still to come.
    pub fn has_open_transaction(&self, producer_id: i64, producer_epoch: i16) -> bool {
        self.writer
            .lock()
            .producers
            .get(producer_id)
            .is_some_and(|e| e.txn_first.is_some() && e.epoch == producer_epoch)
    }

    /// The sequence the log takes next from `producer_id` at `producer_epoch` (the one after
    /// its last batch), if it knows the producer at that epoch.
    pub fn next_sequence(&self, producer_id: i64, producer_epoch: i16) -> Option<i32> {
        let w = self.writer.lock();
        let e = w.producers.get(producer_id)?;
        if e.epoch != producer_epoch {
            return None;
        }
        e.batches.back().map(|b| {
            if b.last_seq == i32::MAX {
                0
            } else {
                b.last_seq + 1
            }
        })
    }

    pub fn producers(&self) -> Vec<ProducerView> {
        self.writer.lock().producers.views()
    }
    pub fn log_start_offset(&self) -> i64 {
        self.shared.read().log_start
    }
    pub fn log_end_offset(&self) -> i64 {
        self.shared.read().leo
    }
    /// Equal to the log end offset on a single broker (readers see acknowledged-or-not data
    /// exactly as Kafka with one in-sync replica); in cluster mode, the published mark's
    /// offset ([`Log::publish`]).
    pub fn high_watermark(&self) -> i64 {
        log::high_watermark_of(&self.shared.read())
    }
    /// Where the data made durable by the last successful flush ends (taken before a
    /// cluster member confirms its ownership, then published).
    pub fn synced_mark(&self) -> SyncedMark {
        self.shared.read().synced_mark
    }
    /// Bound reads to `mark` and what later calls publish (cluster mode): readers see data
    /// only once it is durable and the broker has confirmed it still owned the partition
    /// after it became so. Marks only move forward.
    pub fn publish(&self, mark: SyncedMark) {
        if mark == SyncedMark::NONE {
            // No flush since the open: nothing to say (publishing it would hide the whole log).
            return;
        }
        let mut s = self.shared.write();
        match s.published {
            Some(p) if p.offset >= mark.offset => {}
            _ => s.published = Some(mark),
        }
        // Completed transactions whose markers are now below the high watermark are stable.
        let hw = log::high_watermark_of(&s);
        s.txns.published_to(hw);
    }
    /// First offset whose batch max timestamp >= `timestamp_ms`, and that timestamp; uses the
    /// time index then scans batch headers. None when no such record.
    pub fn offset_for_timestamp(&self, timestamp_ms: i64) -> io::Result<Option<(i64, i64)>> {
        self.offset_for_timestamp_impl(timestamp_ms)
    }
    /// (max timestamp, offset of the record that carries it), for ListOffsets MAX_TIMESTAMP.
    pub fn max_timestamp(&self) -> Option<(i64, i64)> {
        self.max_timestamp_impl()
    }
    /// fsync data and indexes up to the current end; returns the new recovery point. A failed
    /// fsync fails the log ([`LogFailure::SyncFailed`]): this and every later flush, sync,
    /// append and roll fail until the log is re-opened.
    pub fn flush(&self) -> io::Result<i64> {
        self.flush_impl(log::FlushScope::All)
    }
    /// Make every record appended so far durable, for acknowledgements (acks=all under
    /// flush.messages / flush.ms): fsync the data, but not the active segment's index files,
    /// which recovery rebuilds from the data. The recovery point moves only to the active
    /// segment's base; [`Log::flush`] moves it to the end. Returns the recovery point. A
    /// failed fsync fails the log, as in [`Log::flush`].
    pub fn sync_appended(&self) -> io::Result<i64> {
        self.flush_impl(log::FlushScope::Appended)
    }
    /// Move the recovery point to the log end when the policy of
    /// [`recovery::set_follow_policy`] says it is due: a producer snapshot at the log end,
    /// then a flush of everything (what the write-behind wrote back makes the fsync cheap).
    /// Returns whether it moved; a failed fsync fails the log, as in [`Log::flush`].
    pub fn advance_recovery_point(&self, now_ms: i64) -> io::Result<bool> {
        match recovery::follow_policy() {
            Some((bytes, interval)) => self.advance_recovery_point_impl(now_ms, bytes, interval),
            None => Ok(false),
        }
    }
    /// The newest durable producer snapshot this log wrote at or below `upto`, with its CRC:
    /// what an owner records for the next owner's open to trust ([`Recorded::snapshot`]).
    pub fn vouched_snapshot(&self, upto: i64) -> Option<SnapshotRef> {
        self.vouched_snapshot_impl(upto)
    }
    /// fsync the sealed segments past the recovery point (data and index files) and move the
    /// recovery point to the active segment's base, as Kafka flushes a segment once it has
    /// rolled: a restart or takeover after a crash then validates the active segment only,
    /// whatever was written without a flush policy. Returns the recovery point; a failed
    /// fsync fails the log, as in [`Log::flush`].
    pub fn flush_sealed(&self) -> io::Result<i64> {
        self.flush_impl(log::FlushScope::Sealed)
    }
    /// True when sealed segments lie past the recovery point (the log rolled since its last
    /// flush) and the log has not failed: [`Log::flush_sealed`] has work to do.
    pub fn has_unflushed_sealed(&self) -> bool {
        if self.failure.lock().is_some() || self.is_closed() {
            return false;
        }
        let s = self.shared.read();
        s.segments
            .last()
            .is_some_and(|a| a.base_offset > s.recovery_point)
    }
    /// Offset below which the log data is durable (at least the recovery point).
    pub fn synced_offset(&self) -> i64 {
        self.shared.read().synced
    }
    /// True when `flush.ms` has passed since the oldest append not yet flushed: the broker's
    /// periodic flusher then calls [`Log::flush`] (Kafka's log flusher does the same). Never
    /// on a failed log ([`Log::failure`]), whose flushes all fail.
    pub fn flush_due_by_time(&self, now_ms: i64) -> bool {
        if self.failure.lock().is_some() {
            return false;
        }
        let flush_ms = self.config.read().flush_ms;
        let since = self.shared.read().unflushed_since;
        flush_ms != i64::MAX && since.is_some_and(|t| now_ms.saturating_sub(t) >= flush_ms)
    }
    /// DeleteRecords: raise the log start offset to `offset` (<= high watermark), deleting
    /// whole segments below it. Returns the new log start offset.
    pub fn delete_records_before(&self, offset: i64) -> Result<i64, ReadError> {
        self.delete_records_impl(offset)
    }
    /// Time- and size-based retention and time-based roll; called periodically.
    pub fn maintain(&self, now_ms: i64) -> io::Result<()> {
        self.maintain_impl(now_ms)
    }
    /// Change the log's configuration. Turning `flush.messages=1` on bounds reads at the
    /// synced mark from now on: what was readable past it is not until the next flush.
    pub fn set_config(&self, config: LogConfig) {
        let bounded = config.flush_messages == 1;
        if self.shared.read().sync_bounded != bounded {
            self.shared.write().sync_bounded = bounded;
        }
        *self.config.write() = config;
        self.flush_work
            .store(true, std::sync::atomic::Ordering::Release);
    }
    /// Readers see nothing past the synced mark (`flush.messages=1`): see [`Log::set_config`].
    pub fn sync_bounded(&self) -> bool {
        self.shared.read().sync_bounded
    }
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes_impl()
    }

    // ---- additions to the contract ----

    /// The leader epoch stamped into appended batches (set by `open_log`).
    pub fn leader_epoch(&self) -> i32 {
        self.leader_epoch.load(std::sync::atomic::Ordering::Acquire)
    }
    /// Change the leader epoch for subsequent appends; the first append under a newer epoch
    /// records it in `leader-epoch-checkpoint`.
    pub fn set_leader_epoch(&self, epoch: i32) {
        self.leader_epoch
            .store(epoch, std::sync::atomic::Ordering::Release);
    }
    /// OffsetForLeaderEpoch: (largest epoch <= `epoch`, its end offset), answered as Kafka's
    /// LeaderEpochFileCache.endOffsetFor does (an epoch older than every known one ends where
    /// the first known begins); None (UNDEFINED) for an epoch newer than the log's.
    pub fn end_offset_for_epoch(&self, epoch: i32) -> Option<(i32, i64)> {
        self.end_offset_for_epoch_impl(epoch)
    }
    /// The (epoch, start offset) entries of the leader epoch cache.
    pub fn leader_epoch_entries(&self) -> Vec<(i32, i64)> {
        self.epoch_entries()
    }
    /// What the owner record says of the sealed segments below `below` (the newest segment
    /// with published data), for the next owner ([`SealedDigest`]): their count and a hash of
    /// their base offsets and sizes. The active segment is never among them.
    pub fn sealed_digest(&self, below: i64) -> SealedDigest {
        let segs = self.shared.read().segments.clone();
        let sealed = &segs[..segs.len().saturating_sub(1)];
        sealed::digest(below, sealed.iter().map(|s| (s.base_offset, s.size())))
    }
    /// Bytes of segment data this log's open read and validated (0 after a clean shutdown).
    pub fn recovered_bytes(&self) -> u64 {
        self.recovered_bytes
    }
    /// Offset below which everything is known to be fsynced.
    pub fn recovery_point_offset(&self) -> i64 {
        self.recovery_point()
    }
    /// The recovery point was recorded where the next open after a crash reads it (the
    /// checkpoint file, or the owner record in etcd).
    /// The recovery point last recorded (see [`Log::recovery_point_recorded`]).
    pub(crate) fn recorded_recovery_point(&self) -> i64 {
        self.recorded_recovery_point
            .load(std::sync::atomic::Ordering::Acquire)
    }
    /// What is recorded for this log is `offset` now, even if lower (a re-open takes the
    /// failed log's; a move to another log dir starts with none there).
    pub(crate) fn reset_recorded_recovery_point(&self, offset: i64) {
        self.recorded_recovery_point
            .store(offset, std::sync::atomic::Ordering::Release);
    }
    pub fn recovery_point_recorded(&self, offset: i64) {
        use std::sync::atomic::Ordering;
        if self
            .recorded_recovery_point
            .fetch_max(offset, Ordering::AcqRel)
            < offset
        {
            // A snapshot kept for the old one may go now, at the next flush check.
            self.snapshots_unpruned.store(true, Ordering::Release);
            self.flush_work.store(true, Ordering::Release);
        }
    }
    /// Seal the active segment and start a new one (no-op when the active segment is empty).
    pub fn roll(&self, now_ms: i64) -> io::Result<()> {
        let mut w = self.writer.lock();
        self.roll_locked(&mut w, now_ms)
    }
    /// Number of segments (for tests and metrics).
    pub fn segment_count(&self) -> usize {
        self.shared.read().segments.len()
    }
    /// True once the log was closed or deleted through the manager (appends then fail).
    pub fn is_closed(&self) -> bool {
        self.deleted.load(std::sync::atomic::Ordering::Acquire)
    }
    /// Why the log refuses writes, if it does: it must be closed and re-opened, which
    /// recovers it from what storage holds.
    pub fn failure(&self) -> Option<LogFailure> {
        self.failure.lock().clone()
    }
    /// Fail the log (it refuses writes and flushes until re-opened): its user's state went
    /// ahead of what the log holds (an append it had already applied failed).
    pub fn mark_failed(&self, reason: String) {
        self.fail(LogFailure::Refused { reason });
    }

    // ---- page cache ----

    /// Bytes written after the page-cache drop point: what this log may hold in the page
    /// cache that [`Log::drop_cache_behind`] has not advised out. Cheap (no I/O).
    pub fn cache_undropped_bytes(&self) -> u64 {
        self.cache_undropped_bytes_impl()
    }
    /// Page-cache drop-behind: make everything between the drop point and `keep_bytes` before
    /// the end durable (`fdatasync` of each segment file concerned, skipped for data below the
    /// synced offset) and advise it out of the page cache (`POSIX_FADV_DONTNEED`: sealed
    /// segments whole, the segment holding the new point as a range), then move the drop
    /// point there. Blocking; call it off the async runtime. Never changes what recovery
    /// keeps (the recovery point does not move; index files are left alone). Each
    /// `fdatasync` runs under the flush lock; a failed one fails the log, as a flush's does
    /// (one that finds the file gone from the server only makes the next [`Log::flush`]
    /// fail). A no-op on a closed or deleted log and when fewer than `keep_bytes` lie after
    /// the drop point; an error on a failed log.
    pub fn drop_cache_behind(&self, keep_bytes: u64) -> io::Result<DropStats> {
        self.drop_cache_behind_impl(keep_bytes)
    }

    /// Advise out of the page cache what reads brought back from below the drop point (a
    /// consumer far behind, and the kernel's readahead for it) and what was recorded one call
    /// or more ago: in each segment concerned, everything up to the end of those reads. Reads
    /// recorded since the last call wait for the next one, so that a region read is normally
    /// sent before it is evicted. Returns the bytes of the reads advised out.
    /// Blocking (`fadvise`); call it off the async runtime, as often as the drop-behind.
    pub fn drop_read_back(&self) -> u64 {
        self.drop_read_back_impl()
    }

    /// Whether anything could have given the page-cache drop-behind work on this log since
    /// the last call (an append, a read below the drop point, a move); the flag is cleared.
    /// A pass that finds work it could not finish calls [`Log::keep_cache_work`].
    pub fn take_cache_work(&self) -> bool {
        self.cache_work
            .swap(false, std::sync::atomic::Ordering::AcqRel)
    }

    /// Reads recorded below the drop point that a later [`Log::drop_read_back`] advises out.
    pub fn read_back_pending(&self) -> bool {
        self.read_back.lock().pending()
    }

    /// The next drop-behind pass looks at this log again.
    pub fn keep_cache_work(&self) {
        self.cache_work
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Make the files of the next segment ahead of its roll (`segment::Spare`) once the
    /// active segment is half full, so that the roll, on the append path, only renames them;
    /// also removes producer snapshots past the newest kept once a roll wrote one. Blocking
    /// (it creates and removes files); call it off the async runtime, periodically. A no-op
    /// when a spare is ready, and on a closed, deleted or failed log. A failure is logged: the
    /// roll then creates the files.
    /// Returns whether a later call still has something to do (the spare could not be made
    /// now).
    pub fn prepare_spare(&self) -> bool {
        self.prepare_spare_impl()
    }

    /// Whether anything could have given the periodic flush check work on this log since the
    /// last call (an append, a roll, a config change, snapshots made durable); the flag is
    /// cleared. The check calls [`Log::keep_flush_work`] for what it leaves to a later pass.
    pub fn take_flush_work(&self) -> bool {
        self.flush_work
            .swap(false, std::sync::atomic::Ordering::AcqRel)
    }

    /// The next flush check looks at this log again.
    pub fn keep_flush_work(&self) {
        self.flush_work
            .store(true, std::sync::atomic::Ordering::Release);
    }

    /// Data not yet flushed under a finite `flush.ms`: a later flush check flushes it when
    /// due ([`Log::flush_due_by_time`]).
    pub fn flush_pending_by_time(&self) -> bool {
        self.config.read().flush_ms != i64::MAX && self.shared.read().unflushed_since.is_some()
    }

    /// Bytes appended after the writeback point: written to the page cache, not yet known to
    /// be written back to the volume. Cheap (no I/O).
    pub fn unwritten_bytes(&self) -> u64 {
        self.unwritten_bytes_impl()
    }
    /// Write-behind, phase 1 (see `writeback.rs`): when at least `min_bytes` lie after the
    /// writeback point, start writeback of all of them (`SYNC_FILE_RANGE_WRITE`) and return
    /// what was started; None otherwise, and on a closed log. An error on a failed log, or
    /// when the kernel refuses to start writeback (the log is not failed by that).
    pub fn start_writeback(
        &self,
        min_bytes: u64,
        end: WritebackEnd,
    ) -> io::Result<Option<WritebackStarted>> {
        self.start_writeback_impl(min_bytes, end)
    }
    /// Write-behind, phase 2: wait until what `started` queued is written back, then move
    /// the writeback point past it; returns its bytes. A failed wait fails the log, as a
    /// failed `fdatasync` does.
    pub fn finish_writeback(&self, started: WritebackStarted) -> io::Result<u64> {
        self.finish_writeback_impl(started)
    }
}

/// Kafka's `meta.properties` identity for a log directory.
#[derive(Clone, Debug)]
pub struct MetaProperties {
    pub node_id: i32,
    pub cluster_id: String,
}

/// A partition directory found on disk at start-up, not opened yet.
#[derive(Clone, Debug)]
pub struct DiscoveredLog {
    pub tp: TopicPartition,
    pub topic_id: Option<uuid::Uuid>,
    pub dir: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("log directory {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("log directory {path}: {reason}")]
    Invalid { path: PathBuf, reason: String },
}

/// All partition logs of this broker across its `log.dirs`.
///
/// A background thread (stopped when the manager is dropped) retries deferred deletions.
#[derive(Debug)]
pub struct LogManager {
    inner: Arc<manager::Inner>,
    reaper: Option<Reaper>,
    cleaner_threads: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

/// The background thread retrying deferred deletions.
#[derive(Debug)]
struct Reaper {
    stop: Arc<(Mutex<bool>, parking_lot::Condvar)>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for LogManager {
    fn drop(&mut self) {
        self.inner.cleaner.stop();
        for t in self.cleaner_threads.get_mut().drain(..) {
            let _ = t.join();
        }
        if let Some(r) = &mut self.reaper {
            *r.stop.0.lock() = true;
            r.stop.1.notify_all();
            if let Some(t) = r.thread.take() {
                let _ = t.join();
            }
        }
    }
}

fn clean_result(
    dir: Option<&PathBuf>,
    ran: Option<(TopicPartition, Result<CleanStats, cleaner::CleanStop>)>,
) -> Result<Option<CleanStats>, StoreError> {
    match ran {
        None | Some((_, Err(cleaner::CleanStop::Aborted(_)))) => Ok(None),
        Some((_, Ok(stats))) => Ok(Some(stats)),
        Some((_, Err(cleaner::CleanStop::Io(source)))) => Err(StoreError::Io {
            path: dir.cloned().unwrap_or_default(),
            source,
        }),
    }
}

fn start_reaper(inner: &Arc<manager::Inner>) -> Option<Reaper> {
    let weak = Arc::downgrade(inner);
    let stop = Arc::new((Mutex::new(false), parking_lot::Condvar::new()));
    let stop2 = stop.clone();
    // Pending removals that wait for a reader (not a failure) are polled at this pace.
    let poll_ms = inner.del.retry.initial_ms.clamp(10, 1000);
    let thread = std::thread::Builder::new()
        .name("sluice-reaper".into())
        .spawn(move || loop {
            let next = match weak.upgrade() {
                Some(inner) => inner.reap_all(fsutil::now_ms()),
                None => return,
            };
            let now = fsutil::now_ms();
            let wait_ms = next
                .map_or(poll_ms, |t| u64::try_from(t - now).unwrap_or(0))
                .clamp(10, poll_ms);
            let mut stopped = stop2.0.lock();
            if *stopped {
                return;
            }
            stop2
                .1
                .wait_for(&mut stopped, std::time::Duration::from_millis(wait_ms));
            if *stopped {
                return;
            }
        });
    match thread {
        Ok(t) => Some(Reaper {
            stop,
            thread: Some(t),
        }),
        Err(e) => {
            // Deletions are still retried by maintain().
            tracing::warn!(error = %e, "could not start the deferred-deletion thread");
            None
        }
    }
}

impl LogManager {
    /// Create missing dirs, read or write `meta.properties`, read checkpoints, note (and remove)
    /// the clean-shutdown marker, scan for partition directories (ignoring `.nfs*`,
    /// `.fuse_hidden*`, `*-delete` and other non-partition entries).
    pub fn open(dirs: Vec<PathBuf>, meta: MetaProperties) -> Result<LogManager, StoreError> {
        LogManager::open_with(dirs, meta, DeleteRetry::default())
    }
    /// [`LogManager::open`] with an explicit retry policy for deferred deletions.
    pub fn open_with(
        dirs: Vec<PathBuf>,
        meta: MetaProperties,
        retry: DeleteRetry,
    ) -> Result<LogManager, StoreError> {
        LogManager::open_sharing(dirs, meta, retry, Sharing::Exclusive)
    }

    /// Open log dirs that are this broker's alone, or shared with the other brokers of a
    /// cluster ([`Sharing`]).
    pub fn open_sharing(
        dirs: Vec<PathBuf>,
        meta: MetaProperties,
        retry: DeleteRetry,
        sharing: Sharing,
    ) -> Result<LogManager, StoreError> {
        let inner = Arc::new(manager::Inner::open(dirs, meta, retry, sharing)?);
        let reaper = start_reaper(&inner);
        Ok(LogManager {
            inner,
            reaper,
            cleaner_threads: Mutex::new(Vec::new()),
        })
    }
    /// Configure the log cleaner (compacted topics) and, with `log.cleaner.enable`, start its
    /// threads. Without this call no log is cleaned in the background.
    pub fn start_cleaner(&self, config: CleanerConfig) {
        let enable = config.enable;
        self.inner.cleaner.configure(config);
        let mut threads = self.cleaner_threads.lock();
        if enable && threads.is_empty() {
            *threads = cleaner::schedule::start_threads(&self.inner);
        }
    }
    /// Cluster mode: the check every write to a partition's files passes immediately before
    /// it writes (`gate.rs`): appends, rolls, snapshots, indexes and checkpoints, retention,
    /// DeleteRecords, the cleaner's swaps. Installed before any log is opened for writing.
    pub fn set_write_gate(&self, gate: Arc<dyn WriteGate>) {
        self.inner.gate.set(gate);
    }
    /// Clean the compacted log of `tp` now, whatever its dirty ratio, on this thread (with a
    /// key map of one cleaner thread's share). Returns what was done, None if the log is not
    /// open, not compacted, being cleaned, or has nothing cleanable.
    pub fn clean_log(&self, tp: &TopicPartition) -> Result<Option<CleanStats>, StoreError> {
        #[cfg(test)]
        return self.clean_log_at(tp, None);
        #[cfg(not(test))]
        {
            let config = self.inner.cleaner.config();
            let mut map = cleaner::OffsetMap::new(
                usize::try_from(config.dedupe_buffer_size / config.threads.max(1) as u64)
                    .unwrap_or(usize::MAX)
                    .min(i32::MAX as usize),
                config.io_buffer_load_factor,
            );
            let ran = self
                .inner
                .cleaner
                .run_once(&*self.inner, &mut map, Some(tp));
            clean_result(self.inner.dirs.first(), ran)
        }
    }
    /// [`LogManager::clean_log`], simulating a crash at a step of the segment swap.
    #[cfg(test)]
    pub(crate) fn clean_log_at(
        &self,
        tp: &TopicPartition,
        crash_at: Option<cleaner::CrashAt>,
    ) -> Result<Option<CleanStats>, StoreError> {
        let mut map = cleaner::OffsetMap::new(1 << 20, 0.9);
        let ran = self
            .inner
            .cleaner
            .run_once(&*self.inner, &mut map, Some(tp), crash_at);
        clean_result(self.inner.dirs.first(), ran)
    }
    /// Where the dirty part of `tp`'s log starts, as the cleaner knows it.
    pub fn cleaner_first_dirty(&self, tp: &TopicPartition) -> Option<i64> {
        self.inner
            .cleaner
            .first_dirty_of(|t| t == tp)
            .first()
            .map(|e| e.2)
    }
    /// Counters of deferred deletions (pending now, retries, ...), for metrics.
    pub fn deletion_stats(&self) -> DeletionStats {
        self.inner.del.counters.snapshot()
    }
    /// Move the log of `tp` to the log dir `dirs()[target]`: copy its files there while it
    /// keeps serving, switch over under the writer lock, then delete the old copy by the
    /// deferred-deletion rules. Blocks for the copy; a no-op if it is already there.
    pub fn move_log(&self, tp: &TopicPartition, target: usize) -> Result<(), StoreError> {
        self.inner.move_log(tp, target)
    }
    /// True while a move of `tp` is in progress.
    pub fn is_moving(&self, tp: &TopicPartition) -> bool {
        self.inner.moving.lock().contains(tp)
    }
    pub fn discovered(&self) -> Vec<DiscoveredLog> {
        self.inner.discovered.clone()
    }
    /// Open (recovering only what lies after the recovery point, unless shut down cleanly) or
    /// create (in the log dir holding the fewest partitions) the log of `tp`, owned under
    /// `leader_epoch`.
    pub fn open_log(
        &self,
        tp: &TopicPartition,
        topic_id: uuid::Uuid,
        config: LogConfig,
        leader_epoch: i32,
    ) -> Result<Arc<Log>, StoreError> {
        self.inner
            .open_log(tp, topic_id, config, leader_epoch, None)
    }
    /// Open a log of a shared log dir (cluster mode) whose previous owner recorded
    /// `recovery_point`: everything below it was durable when recorded, so only the segments
    /// from the one holding it are validated, and the tails of the sealed ones below it.
    /// `newest_segment` is the base of the newest segment it recorded publishing data in (0
    /// if none): a directory listing without a segment at or past it is refused as a stale
    /// view of the volume (an error: the takeover is tried again later).
    pub fn open_log_at(
        &self,
        tp: &TopicPartition,
        topic_id: uuid::Uuid,
        config: LogConfig,
        leader_epoch: i32,
        recovery_point: i64,
        newest_segment: i64,
    ) -> Result<Arc<Log>, StoreError> {
        self.open_log_recorded(
            tp,
            topic_id,
            config,
            leader_epoch,
            Recorded {
                recovery_point,
                newest_segment,
                sealed: None,
                switch: None,
                snapshot: None,
            },
        )
    }
    /// [`LogManager::open_log_at`] with what the previous owner recorded of its sealed
    /// segments: if the listing and the files' sizes give the same digest, the open reads
    /// none of them (no tail, stray or per-segment epoch check).
    pub fn open_log_recorded(
        &self,
        tp: &TopicPartition,
        topic_id: uuid::Uuid,
        config: LogConfig,
        leader_epoch: i32,
        recorded: Recorded,
    ) -> Result<Arc<Log>, StoreError> {
        self.inner.open_log(
            tp,
            topic_id,
            config,
            leader_epoch,
            Some(manager::Known {
                recovery_point: recorded.recovery_point,
                durable: recorded.recovery_point,
                newest_segment: recorded.newest_segment,
                sealed: recorded.sealed,
                switch: recorded.switch,
                snapshot: recorded.snapshot,
            }),
        )
    }
    pub fn get(&self, tp: &TopicPartition) -> Option<Arc<Log>> {
        self.inner.get(tp)
    }
    pub fn logs(&self) -> Vec<Arc<Log>> {
        self.inner.logs()
    }
    /// Every open log, in partition order, shared (made once per change of the set): for
    /// passes over all of them.
    pub fn logs_snapshot(&self) -> Arc<Vec<Arc<Log>>> {
        self.inner.logs_snapshot()
    }
    pub fn dirs(&self) -> &[PathBuf] {
        &self.inner.dirs
    }
    /// Place new partitions (those in no log dir yet) only in the log dirs `dirs` names (by
    /// index), while it names any: in a cluster, those on volumes this broker reaches
    /// directly.
    pub fn prefer_dirs(&self, dirs: Vec<usize>) {
        self.inner.reg.lock().preferred = dirs;
    }
    /// The index of the log dir `log` lies in.
    pub fn dir_index(&self, log: &Log) -> Option<usize> {
        let dir = log.dir();
        let parent = dir.parent()?;
        self.inner.dirs.iter().position(|d| d == parent)
    }
    /// The directory of `tp` in whichever log dir holds it with the files of topic
    /// `topic_id` (its `partition.metadata` says so): for reads of a partition another broker
    /// owns (`ReplicaReader`). None when no log dir has it (not created yet, or only another
    /// incarnation of the topic's).
    pub fn partition_dir(&self, tp: &TopicPartition, topic_id: uuid::Uuid) -> Option<PathBuf> {
        let name = format!("{}-{}", tp.topic, tp.partition);
        self.inner
            .dirs
            .iter()
            .map(|d| d.join(&name))
            .find(|d| manager::dir_topic_id(d) == Some(topic_id))
    }
    /// The first log dir whose `meta.properties` is not there: a volume that is not mounted
    /// (the bare mount point). Opens and re-opens wait while it is gone.
    pub fn volume_missing(&self) -> Option<PathBuf> {
        self.inner
            .dirs
            .iter()
            .find(|d| !d.join(manager::META_PROPERTIES).is_file())
            .cloned()
    }
    /// The `directory.id` of each log dir, from its `meta.properties` (None where the file,
    /// written by an older Kafka, has none).
    pub fn directory_ids(&self) -> Result<Vec<Option<String>>, StoreError> {
        self.inner
            .dirs
            .iter()
            .map(|d| manager::directory_id(d))
            .collect()
    }
    /// Release: flush and close, keep the data (ownership moves elsewhere).
    pub fn close_log(&self, tp: &TopicPartition) -> Result<(), StoreError> {
        self.inner.close_log(tp)
    }
    /// Stop serving a log another broker owns now (cluster mode), writing nothing but an
    /// fsync of what was appended.
    pub fn release_log(&self, tp: &TopicPartition) -> Result<(), StoreError> {
        self.inner.release_log(tp)
    }
    /// Re-open a failed log from what storage holds: see `manager::Inner::reopen_log`.
    pub fn reopen_log(
        &self,
        tp: &TopicPartition,
        config: LogConfig,
    ) -> Result<Option<Arc<Log>>, StoreError> {
        self.inner.reopen_log(tp, config)
    }
    /// A planned hand-over of `tp` to another broker (cluster mode): see
    /// `manager::Inner::hand_over_log`. Returns the recovery point, the log's end.
    pub fn hand_over_log(
        &self,
        tp: &TopicPartition,
        now_ms: i64,
    ) -> Result<Option<i64>, StoreError> {
        self.inner.hand_over_log(tp, now_ms)
    }
    /// Remove the partition from service at once and its files as soon as nothing holds
    /// them. In a shared log dir (cluster mode) the directory goes only through the log's
    /// write gate, and only while it holds this topic's files: otherwise it is left in place.
    pub fn delete_log(&self, tp: &TopicPartition) -> Result<(), StoreError> {
        self.inner.delete_log(tp)
    }
    /// The topic id `tp`'s directory names, if it is not `topic_id`: the files of another
    /// incarnation of the topic (deleted, its name taken again).
    pub fn stray_topic_id(&self, tp: &TopicPartition, topic_id: uuid::Uuid) -> Option<uuid::Uuid> {
        self.inner.stray_topic_id(tp, topic_id)
    }
    /// Put aside `tp`'s directory while it holds the files of the topic id `stray` (renamed
    /// to a `-delete` name, removed once nothing here holds it), asking `may_write`
    /// immediately before. Returns whether a directory was put aside.
    pub fn retire_stray_dir(
        &self,
        tp: &TopicPartition,
        stray: uuid::Uuid,
        may_write: &dyn Fn() -> Result<(), String>,
    ) -> Result<bool, StoreError> {
        self.inner.retire_stray_dir(tp, stray, may_write)
    }
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        self.inner.checkpoint()
    }
    /// Periodic maintenance of every log (retention, roll) plus pending file deletions.
    pub fn maintain(&self, now_ms: i64) {
        self.inner.maintain(now_ms)
    }
    /// Flush everything, checkpoint, write the clean-shutdown marker.
    pub fn shutdown(&self) -> Result<(), StoreError> {
        self.inner.shutdown(1)
    }
    /// [`LogManager::shutdown`], the logs sealed and flushed on up to `threads` threads at
    /// once (`num.recovery.threads.per.data.dir`, as Kafka flushes at shutdown): each log's
    /// seal is a few fsyncs, and one after the other 100,000 logs took 43 s.
    pub fn shutdown_on(&self, threads: usize) -> Result<(), StoreError> {
        self.inner.shutdown(threads)
    }
}

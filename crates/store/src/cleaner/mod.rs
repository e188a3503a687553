//! Log compaction (`cleanup.policy=compact`), as Apache Kafka's log cleaner does it
//! (docs/compaction.md).
//!
//! Layout:
//! - `offset_map.rs`: the bounded key-hash -> latest offset map of one cleaning;
//! - `filter.rs`: what is kept of one batch (a pure function);
//! - `clean.rs`: one cleaning of one log: the cleanable range, the map over its dirty part,
//!   the rewrite of the segments below its end in groups, each into a new segment;
//! - `swap.rs`: replacing a group of segments by the cleaned one, safe on NFS semantics;
//! - `recover.rs`: what an open does with the leftovers of a cleaning cut short by a crash;
//! - `schedule.rs`: the cleaner threads of a [`crate::LogManager`], choosing the dirtiest
//!   log, the `cleaner-offset-checkpoint` file, aborting a cleaning for a log being closed.
//!   The threads reach the manager through `schedule::Host`, which it implements (its
//!   `write_checkpoints` writes the file under the cleaner's checkpoint lock; the manager's
//!   checkpoint round writes it under the manager's own): the cleaner imports
//!   nothing of the manager, nor of the log (`log.rs`, `log/`); both import it.
//!
//! A cleaning never changes an offset: it only leaves records (and whole batches) out. It
//! never touches the active segment nor anything at or past the high watermark, the recovery
//! point, or a segment younger than `min.compaction.lag.ms`. Appends wait for it only during
//! the in-memory switch of the segment list.

mod clean;
mod filter;
mod offset_map;
pub(crate) mod recover;
pub(crate) mod schedule;
pub(crate) mod swap;

pub(crate) use clean::CleanCtx;
pub(crate) use offset_map::OffsetMap;

/// The broker's `log.cleaner.*` settings (Kafka's names and defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct CleanerConfig {
    /// `log.cleaner.enable` (default true): run the cleaner threads.
    pub enable: bool,
    /// `log.cleaner.threads` (default 1).
    pub threads: usize,
    /// `log.cleaner.dedupe.buffer.size` (default 134217728): memory of the key maps, over all
    /// cleaner threads.
    pub dedupe_buffer_size: u64,
    /// `log.cleaner.io.buffer.load.factor` (default 0.9): how full a key map gets.
    pub io_buffer_load_factor: f64,
    /// `log.cleaner.io.buffer.size` (default 524288): the I/O buffers of all cleaner threads
    /// (each thread writes its cleaned segment in chunks of half its share).
    pub io_buffer_size: usize,
    /// `log.cleaner.io.max.bytes.per.second` (default unlimited): read plus written bytes of
    /// all cleaner threads.
    pub io_max_bytes_per_second: f64,
    /// `log.cleaner.backoff.ms` (default 15000): sleep when no log needs cleaning.
    pub backoff_ms: u64,
    /// Largest records section of one batch the cleaner decompresses (Sluice's limit; a
    /// batch larger than this is kept as it is). Default 64 MiB.
    pub max_batch_decompressed_bytes: usize,
}

impl Default for CleanerConfig {
    fn default() -> Self {
        CleanerConfig {
            enable: true,
            threads: 1,
            dedupe_buffer_size: 128 * 1024 * 1024,
            io_buffer_load_factor: 0.9,
            io_buffer_size: 512 * 1024,
            io_max_bytes_per_second: f64::MAX,
            backoff_ms: 15_000,
            max_batch_decompressed_bytes: 64 * 1024 * 1024,
        }
    }
}

/// What one cleaning did (for logs and tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CleanStats {
    /// Segment groups rewritten.
    pub groups: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub batches_read: u64,
    pub batches_written: u64,
    /// Batches kept as they were because their records could not be read.
    pub batches_unreadable: u64,
}

/// Why a cleaning stopped before its end.
#[derive(Debug)]
pub(crate) enum CleanStop {
    /// The log is being closed, moved, deleted, released or failed, or the broker no longer
    /// owns it; nothing was replaced after the stop.
    Aborted(&'static str),
    Io(std::io::Error),
}

impl From<std::io::Error> for CleanStop {
    fn from(e: std::io::Error) -> Self {
        CleanStop::Io(e)
    }
}

/// Steps of a segment swap, where tests simulate a crash.
#[cfg(test)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CrashAt {
    /// The cleaned files are written and fsynced, still under their temporary names.
    Cleaned,
    /// Renamed to `.swap`; nothing else changed.
    Swapped,
    /// The old segments' files are renamed aside (`.deleted`); the swap files not yet in.
    OldRenamed,
    /// The cleaned segment's index files are in place, its `.log` still `.swap`.
    IndexesIn,
}

#[cfg(test)]
mod tests;

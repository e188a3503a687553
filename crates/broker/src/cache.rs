//! Page-cache drop-behind schedule (`sluice.log.cache.bytes`).
//!
//! The store does the work ([`Log::drop_cache_behind`]: `fdatasync`, then
//! `POSIX_FADV_DONTNEED`); this module decides when and how much. Every
//! [`CACHE_CHECK_INTERVAL`] a task looks at every open log, on a blocking thread so no
//! syscall runs on the runtime's workers; one pass at a time. A log's share of the budget is
//! `max(sluice.log.cache.bytes / open logs, sluice.log.cache.min.partition.bytes)`; a log is
//! dropped back to its share once more than `share + step` bytes were written after its drop
//! point, `step = max(share / 4, CACHE_MIN_STEP_BYTES)`, so each partition holds between
//! `share` and `share + step` of what the broker wrote (plus what one interval adds), and the
//! `fdatasync`s come in batches of at least `step`.
//!
//! Why: writing into new page-cache pages costs much more CPU than writing into pages just
//! freed (a VM first-touches guest memory), and a broker that is replaceable compute on shared
//! storage should not hog its machine's page cache. The price: consumers reading further back
//! than the kept tail read from storage.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use sluice_config::BrokerConfig;
use sluice_store::{DropStats, Log, TopicPartition};

use crate::Broker;

/// How often the open logs are checked for data to drop behind.
pub const CACHE_CHECK_INTERVAL: Duration = Duration::from_millis(200);

/// Smallest amount a log is dropped by at once (fewer, larger `fdatasync`s for small shares).
pub const CACHE_MIN_STEP_BYTES: u64 = 1 << 20;

/// Totals since start-up, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheDropTotals {
    /// Bytes of segment data advised out of the page cache.
    pub dropped_bytes: u64,
    /// `fdatasync` calls made for it.
    pub fdatasyncs: u64,
    /// Bytes that reads brought back from below the drop point and that were advised out
    /// again ([`Log::drop_read_back`]).
    pub read_back_bytes: u64,
    /// Drops that failed (each logged; a log's first failure in a row at WARN).
    pub errors: u64,
}

#[derive(Debug)]
pub(crate) struct DropBehind {
    /// None: disabled (`sluice.log.cache.bytes` = -1).
    budget: Option<u64>,
    min_partition: u64,
    dropped_bytes: AtomicU64,
    fdatasyncs: AtomicU64,
    read_back_bytes: AtomicU64,
    errors: AtomicU64,
    /// Logs whose last drop failed (warned about once until one succeeds).
    failing: Mutex<HashSet<TopicPartition>>,
    /// How many logs the last pass saw: when it changes, so does every log's share, and the
    /// next pass looks at them all.
    logs_seen: AtomicUsize,
}

/// (share, step) of one log when `logs` logs are open.
pub(crate) fn share_and_step(budget: u64, min_partition: u64, logs: usize) -> (u64, u64) {
    let n = u64::try_from(logs.max(1)).unwrap_or(u64::MAX);
    let share = (budget / n).max(min_partition);
    (share, (share / 4).max(CACHE_MIN_STEP_BYTES))
}

impl DropBehind {
    pub(crate) fn new(config: &BrokerConfig) -> DropBehind {
        DropBehind {
            budget: u64::try_from(config.log_cache_bytes).ok(),
            min_partition: config.log_cache_min_partition_bytes,
            dropped_bytes: AtomicU64::new(0),
            fdatasyncs: AtomicU64::new(0),
            read_back_bytes: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            failing: Mutex::new(HashSet::new()),
            logs_seen: AtomicUsize::new(usize::MAX),
        }
    }

    pub(crate) fn totals(&self) -> CacheDropTotals {
        CacheDropTotals {
            dropped_bytes: self.dropped_bytes.load(Ordering::Relaxed),
            fdatasyncs: self.fdatasyncs.load(Ordering::Relaxed),
            read_back_bytes: self.read_back_bytes.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
        }
    }

    /// One pass over `logs`. Blocking (`fdatasync`). A log is looked at only if something
    /// could have given it work since the last pass (`Log::take_cache_work`), or when the
    /// number of logs changed (every share with it).
    pub(crate) fn pass(&self, logs: &[Arc<Log>]) {
        let Some(budget) = self.budget else { return };
        let (share, step) = share_and_step(budget, self.min_partition, logs.len());
        let every = self.logs_seen.swap(logs.len(), Ordering::AcqRel) != logs.len();
        let mut pass = DropStats::default();
        let mut read_back = 0;
        for log in logs {
            if !log.take_cache_work() && !every {
                continue;
            }
            read_back += log.drop_read_back();
            if log.read_back_pending() {
                // Reads recorded are advised out one pass later.
                log.keep_cache_work();
            }
            if log.is_closed() || log.cache_undropped_bytes() <= share.saturating_add(step) {
                // Below the step it waits for more: the next append sets the flag again.
                continue;
            }
            let tp = log.topic_partition();
            match log.drop_cache_behind(share) {
                Ok(s) => {
                    pass += s;
                    let recovered = self.failing.lock().remove(tp);
                    if recovered {
                        tracing::info!(?tp, "page-cache drop-behind works again");
                    }
                }
                Err(e) => {
                    log.keep_cache_work();
                    self.errors.fetch_add(1, Ordering::Relaxed);
                    if self.failing.lock().insert(tp.clone()) {
                        tracing::warn!(?tp, error = %e, "page-cache drop-behind failed; the next flush of this partition reports it");
                    } else {
                        tracing::debug!(?tp, error = %e, "page-cache drop-behind failed again");
                    }
                }
            }
        }
        if read_back > 0 {
            self.read_back_bytes.fetch_add(read_back, Ordering::Relaxed);
        }
        if pass.dropped_bytes > 0 || pass.fdatasyncs > 0 {
            self.dropped_bytes
                .fetch_add(pass.dropped_bytes, Ordering::Relaxed);
            self.fdatasyncs
                .fetch_add(pass.fdatasyncs, Ordering::Relaxed);
            tracing::debug!(
                dropped_bytes = pass.dropped_bytes,
                fdatasyncs = pass.fdatasyncs,
                share,
                logs = logs.len(),
                "page-cache drop-behind pass"
            );
        }
    }
}

/// Start the drop-behind task (nothing when disabled). It stops once the broker is dropped.
pub(crate) fn start(broker: &Arc<Broker>) {
    if broker.cache.budget.is_none() {
        return;
    }
    crate::spawn_passes(
        broker,
        CACHE_CHECK_INTERVAL,
        "page-cache drop-behind",
        |b| {
            b.cache.pass(&b.logs.logs_snapshot());
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares() {
        const MIB: u64 = 1 << 20;
        // 1 GiB over 4 logs; step a quarter of the share.
        assert_eq!(
            share_and_step(1024 * MIB, 8 * MIB, 4),
            (256 * MIB, 64 * MIB)
        );
        // The floor wins with many logs; the step never goes below 1 MiB.
        assert_eq!(share_and_step(16 * MIB, 8 * MIB, 50), (8 * MIB, 2 * MIB));
        assert_eq!(share_and_step(16 * MIB, 0, 64), (256 * 1024, MIB));
        assert_eq!(share_and_step(16 * MIB, 8 * MIB, 0), (16 * MIB, 4 * MIB));
    }
}

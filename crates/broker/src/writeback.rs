//! Write-behind schedule and produce backpressure (`sluice.log.writeback.bytes`,
//! `sluice.log.unwritten.bytes.max`).
//!
//! The store does the I/O ([`Log::start_writeback`], [`Log::finish_writeback`]:
//! `sync_file_range`); this module decides when, and holds producers back when the volume
//! falls behind. One task runs passes one after another, each on a blocking thread: a pass
//! starts writeback of every log with at least a step unwritten, then waits for all of it. The
//! step is `sluice.log.writeback.bytes`, smaller with many logs (at most half the limit over
//! the open logs, at least [`MIN_STEP_BYTES`]), so that what waits below it stays within half
//! the limit; the active segment's partial last page waits for a later pass. While the
//! unwritten data is over the limit, a pass writes back everything, partial pages included. A pass takes as long as the volume needs for what it started, so the passes pace
//! themselves to the volume's rate: they start [`PASS_INTERVAL`] apart, or back to back when
//! one takes longer.
//!
//! Backpressure: the broker keeps an estimate of the data appended but not written back,
//! summed over its logs (recomputed by every pass, raised by every produce append in
//! between). While it is above `sluice.log.unwritten.bytes.max`, a produce request waits
//! before it is appended (the connection reads nothing more meanwhile, as with any produce
//! waiting for its turn), until a pass brings it below, or for at most the request's own
//! timeout. A pass keeps at most a sixteenth of the limit in flight and lowers the estimate
//! as each log's writeback completes, so a held producer waits for the excess to be written,
//! not for the whole pass. Producers that outrun the volume therefore see their latency rise
//! with the amount queued, instead of every thread that writes being stopped for seconds in
//! the kernel's dirty-page throttle once gigabytes of dirty pages have piled up.
//!
//! Why not leave it to the kernel: it starts writing only at its background threshold (10%
//! of memory by default) or after 30 s, then queues gigabytes at once, and each `fdatasync`
//! (a flush, the drop-behind) then waits behind all of it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use sluice_config::BrokerConfig;
use sluice_store::{Log, TopicPartition, WritebackEnd, WritebackStarted};
use tokio::sync::Notify;

use crate::Broker;

/// Smallest step a log is written back in (with many logs and a small limit).
const MIN_STEP_BYTES: u64 = 64 * 1024;

/// Least writeback a pass keeps in flight before it waits for the oldest log's (with a small
/// limit; else a sixteenth of the limit).
const WINDOW_MIN_BYTES: u64 = 8 * 1024 * 1024;

/// Pause between two writeback passes.
pub(crate) const PASS_INTERVAL: Duration = Duration::from_millis(10);

/// Totals since start-up, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WritebackTotals {
    /// Bytes written back by the write-behind.
    pub written_bytes: u64,
    /// Passes that started any writeback.
    pub passes: u64,
    /// Writebacks that failed (each logged; a failed wait fails its log).
    pub errors: u64,
    /// Data appended but not yet written back, at the last pass.
    pub unwritten_bytes: u64,
    /// Produce requests that waited for the write-behind (backpressure).
    pub produce_waits: u64,
    /// Total time produce requests waited for it, in microseconds.
    pub produce_wait_us: u64,
}

#[derive(Debug)]
pub(crate) struct WriteBehind {
    /// None: disabled (`sluice.log.writeback.bytes` = -1).
    step: Option<u64>,
    /// None: no backpressure (`sluice.log.unwritten.bytes.max` = -1, or write-behind disabled).
    limit: Option<u64>,
    /// Estimate of the data appended and not yet written back, over all logs.
    unwritten: AtomicU64,
    /// Woken after every pass.
    room: Notify,
    written_bytes: AtomicU64,
    passes: AtomicU64,
    errors: AtomicU64,
    produce_waits: AtomicU64,
    produce_wait_us: AtomicU64,
    /// Logs whose last writeback failed (warned about once until one succeeds).
    failing: Mutex<std::collections::HashSet<TopicPartition>>,
    /// Produce appends since start.
    appends: AtomicU64,
    /// `appends` when the last pass that started no writeback began (u64::MAX: the last
    /// pass started some). While it is still `appends`, a pass has nothing to do: the
    /// broker skips it, and with it the walk over every log (0.3 of a core per broker
    /// idle at 3,333 partitions, every 10 ms).
    quiet_at: AtomicU64,
}

impl WriteBehind {
    pub(crate) fn new(config: &BrokerConfig) -> WriteBehind {
        let step = u64::try_from(config.log_writeback_bytes).ok();
        WriteBehind {
            step,
            limit: step.and(u64::try_from(config.log_unwritten_bytes_max).ok()),
            unwritten: AtomicU64::new(0),
            room: Notify::new(),
            written_bytes: AtomicU64::new(0),
            passes: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            produce_waits: AtomicU64::new(0),
            produce_wait_us: AtomicU64::new(0),
            failing: Mutex::new(std::collections::HashSet::new()),
            appends: AtomicU64::new(0),
            quiet_at: AtomicU64::new(u64::MAX),
        }
    }

    /// Whether nothing was appended since a pass that found nothing to write back.
    pub(crate) fn idle(&self) -> bool {
        self.quiet_at.load(Ordering::Acquire) == self.appends.load(Ordering::Acquire)
    }

    pub(crate) fn totals(&self) -> WritebackTotals {
        WritebackTotals {
            written_bytes: self.written_bytes.load(Ordering::Relaxed),
            passes: self.passes.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            unwritten_bytes: self.unwritten.load(Ordering::Relaxed),
            produce_waits: self.produce_waits.load(Ordering::Relaxed),
            produce_wait_us: self.produce_wait_us.load(Ordering::Relaxed),
        }
    }

    /// A produce append of `bytes` (raises the estimate until the next pass recomputes it).
    pub(crate) fn appended(&self, bytes: u64) {
        self.appends.fetch_add(1, Ordering::AcqRel);
        if self.limit.is_some() {
            self.unwritten.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    /// What a produce request must wait for before it is appended: None while the unwritten
    /// data is within the limit (one atomic load), else a wait until a pass brings it below
    /// the limit or `timeout` passes (then the append goes ahead anyway).
    pub(crate) fn admit(
        self: &Arc<Self>,
        timeout: Duration,
    ) -> Option<Pin<Box<dyn Future<Output = ()> + Send>>> {
        let limit = self.limit?;
        if self.unwritten.load(Ordering::Relaxed) <= limit {
            return None;
        }
        let me = self.clone();
        Some(Box::pin(async move {
            let started = tokio::time::Instant::now();
            let deadline = started + timeout;
            loop {
                let room = me.room.notified();
                tokio::pin!(room);
                room.as_mut().enable();
                if me.unwritten.load(Ordering::Relaxed) <= limit {
                    break;
                }
                tokio::select! {
                    _ = room => {}
                    _ = tokio::time::sleep_until(deadline) => break,
                }
            }
            me.produce_waits.fetch_add(1, Ordering::Relaxed);
            let us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            me.produce_wait_us.fetch_add(us, Ordering::Relaxed);
        }))
    }

    /// One pass over `logs`. Blocking (waits for writeback).
    pub(crate) fn pass(&self, logs: &[Arc<Log>]) {
        let Some(step) = self.step else { return };
        let appends = self.appends.load(Ordering::Acquire);
        let mut any_started = false;
        // What waits below the step, over all logs, stays within half the limit: with many
        // logs each one is written back in smaller steps.
        let logs_n = u64::try_from(logs.len().max(1)).unwrap_or(u64::MAX);
        let (min, end) = match self.limit {
            // Over the limit (producers wait): everything, partial pages included, so the
            // unwritten data can come down to nothing whatever the limit.
            Some(limit) if self.unwritten.load(Ordering::Relaxed) > limit => (1, WritebackEnd::End),
            Some(limit) => (
                step.min(limit / 2 / logs_n).max(MIN_STEP_BYTES),
                WritebackEnd::PageBoundary,
            ),
            None => (step.max(MIN_STEP_BYTES), WritebackEnd::PageBoundary),
        };
        // Writeback in flight is bounded (a window of the limit): each log's wait, as it
        // completes, lowers the estimate and wakes the producers held back, so they go on as
        // soon as what is left falls below the limit. A pass over the limit writes back
        // everything (a second or more of the volume's time); started all at once, nothing
        // completed before all of it was queued, and every waiting producer stalled for it.
        let window = self
            .limit
            .map_or(u64::MAX, |l| (l / 16).max(WINDOW_MIN_BYTES));
        let mut started: std::collections::VecDeque<(&Arc<Log>, WritebackStarted)> =
            std::collections::VecDeque::new();
        let mut in_flight = 0u64;
        let mut written = 0;
        for log in logs {
            // A failed log waits to be re-opened (a new log); a closed one is going away.
            if log.is_closed() || log.failure().is_some() {
                continue;
            }
            match log.start_writeback(min, end) {
                Ok(Some(s)) => {
                    any_started = true;
                    in_flight += s.bytes;
                    started.push_back((log, s));
                }
                Ok(None) => {}
                Err(e) => self.failed(log, &e),
            }
            while in_flight > window {
                let Some((log, s)) = started.pop_front() else {
                    break;
                };
                in_flight -= s.bytes;
                written += self.finish(log, s);
            }
        }
        for (log, s) in started {
            written += self.finish(log, s);
        }
        if written > 0 {
            self.passes.fetch_add(1, Ordering::Relaxed);
            self.written_bytes.fetch_add(written, Ordering::Relaxed);
        }
        let now: u64 = logs
            .iter()
            .filter(|l| !l.is_closed() && l.failure().is_none())
            .map(|l| l.unwritten_bytes())
            .sum();
        self.unwritten.store(now, Ordering::Relaxed);
        self.quiet_at.store(
            if any_started { u64::MAX } else { appends },
            Ordering::Release,
        );
        self.room.notify_waiters();
    }

    /// Wait for a log's writeback; returns the bytes written back. Lowers the estimate by
    /// them and wakes the producers waiting for room.
    fn finish(&self, log: &Log, started: WritebackStarted) -> u64 {
        match log.finish_writeback(started) {
            Ok(n) => {
                if self.failing.lock().remove(log.topic_partition()) {
                    tracing::info!(tp = ?log.topic_partition(), "write-behind works again");
                }
                if self.limit.is_some() {
                    let _ =
                        self.unwritten
                            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                                Some(u.saturating_sub(n))
                            });
                    self.room.notify_waiters();
                }
                n
            }
            Err(e) => {
                self.failed(log, &e);
                0
            }
        }
    }

    fn failed(&self, log: &Log, e: &std::io::Error) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        let tp = log.topic_partition();
        if self.failing.lock().insert(tp.clone()) {
            tracing::warn!(?tp, error = %e, "write-behind failed; the next flush of this partition reports it");
        } else {
            tracing::debug!(?tp, error = %e, "write-behind failed again");
        }
    }
}

/// Start the write-behind task (nothing when disabled). It stops once the broker is dropped.
pub(crate) fn start(broker: &Arc<Broker>) {
    if broker.writeback.step.is_none() {
        return;
    }
    crate::spawn_passes(broker, PASS_INTERVAL, "write-behind", |b| {
        if !b.writeback.idle() {
            b.writeback.pass(&b.logs.logs());
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pass that starts no writeback makes the broker idle until the next append; one that
    /// started some does not (what it left is looked at again).
    #[test]
    fn passes_are_skipped_until_something_is_appended() {
        let wb = WriteBehind::new(&BrokerConfig::default());
        assert!(wb.step.is_some(), "write-behind is on by default");
        assert!(!wb.idle(), "the first pass runs");
        wb.pass(&[]);
        assert!(wb.idle());
        wb.appended(100);
        assert!(!wb.idle());
        wb.pass(&[]);
        assert!(wb.idle());
    }
}

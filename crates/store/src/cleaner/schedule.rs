//! The cleaner threads of a log manager (Kafka's `LogCleaner` threads and
//! `LogCleanerManager`): each picks the dirtiest compacted log whose dirty ratio exceeds its
//! `min.cleanable.dirty.ratio`, or whose uncleaned data is older than `max.compaction.lag.ms`,
//! cleans it, and records where the dirty part now starts: in memory, and on a single broker
//! in each log dir's `cleaner-offset-checkpoint` (Kafka's file and format). In a shared log
//! dir (cluster mode) no broker owns per-dir files: a new owner starts from the log start,
//! which costs one extra pass over the clean part.
//!
//! A log being closed, released, handed over, re-opened, deleted or moved is never cleaned:
//! those paths call [`Shared::abort_and_wait`] after marking the log, which stops a cleaning
//! under way (it checks between batches and again before the swap) and waits for it.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::{Condvar, Mutex, MutexGuard, RwLock};
use sluice_format::text::parse_offset_checkpoint;

use super::clean::Throttle;
use super::{CleanCtx, CleanStats, CleanStop, CleanerConfig, OffsetMap};
use crate::fsutil::now_ms;
use crate::{Log, TopicPartition};

/// Kafka's per-log-dir file of first dirty offsets.
pub(crate) const CLEANER_CHECKPOINT: &str = "cleaner-offset-checkpoint";

/// What the cleaner threads need of the log manager they run for. The manager (above the
/// cleaner) implements it, so that this module names nothing of the manager's: imports go
/// one way, manager -> cleaner.
pub(crate) trait Host: Send + Sync + 'static {
    /// The cleaner state shared with the threads.
    fn cleaner(&self) -> &Shared;
    /// The open logs.
    fn logs(&self) -> Vec<Arc<Log>>;
    /// The partitions being moved to another log dir right now (never cleaned).
    fn moving(&self) -> HashSet<TopicPartition>;
    /// Whether `tp` is being moved to another log dir right now.
    fn is_moving(&self, tp: &TopicPartition) -> bool;
    /// Write each log dir's `cleaner-offset-checkpoint` from [`Shared::first_dirty_of`]
    /// under [`Shared::lock_checkpoint`] (not in a shared log dir).
    fn write_cleaner_checkpoints(&self);
}

/// A failed cleaning makes its log wait this many backoffs before the next try.
const FAILURE_BACKOFFS: i64 = 10;

#[derive(Debug, Default)]
struct State {
    /// Logs being cleaned now, with their abort flags.
    in_progress: HashMap<TopicPartition, Arc<AtomicBool>>,
    /// Where each log's dirty part starts (absent: at its log start).
    first_dirty: HashMap<TopicPartition, i64>,
    /// Logs whose last cleaning failed, and when they may be tried again.
    failed_until: HashMap<TopicPartition, i64>,
}

/// The cleaner state a log manager shares with its cleaner threads.
pub(crate) struct Shared {
    config: RwLock<CleanerConfig>,
    /// Part of the temporary file names: unique to this process.
    pub(crate) token: String,
    state: Mutex<State>,
    /// Signalled when a cleaning ends.
    idle: Condvar,
    throttle: RwLock<Arc<Throttle>>,
    stop: AtomicBool,
    wake: (Mutex<()>, Condvar),
    checkpoint_lock: Mutex<()>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("cleaner::Shared")
            .field("token", &self.token)
            .finish_non_exhaustive()
    }
}

/// One cleaning picked by [`Shared::grab`].
struct Job {
    log: Arc<Log>,
    first_dirty: i64,
    abort: Arc<AtomicBool>,
}

/// Read a `cleaner-offset-checkpoint` (missing or unreadable: empty).
pub(crate) fn read_checkpoint(dir: &Path) -> HashMap<TopicPartition, i64> {
    let path = dir.join(CLEANER_CHECKPOINT);
    match std::fs::read_to_string(&path) {
        Ok(text) => match parse_offset_checkpoint(&text) {
            Ok(v) => v
                .into_iter()
                .map(|(topic, partition, o)| (TopicPartition { topic, partition }, o))
                .collect(),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "ignoring unreadable cleaner checkpoint");
                HashMap::new()
            }
        },
        Err(_) => HashMap::new(),
    }
}

impl Shared {
    pub(crate) fn new(first_dirty: HashMap<TopicPartition, i64>) -> Shared {
        let config = CleanerConfig::default();
        Shared {
            throttle: RwLock::new(Arc::new(Throttle::new(config.io_max_bytes_per_second))),
            config: RwLock::new(config),
            token: uuid::Uuid::new_v4().simple().to_string()[..12].to_string(),
            state: Mutex::new(State {
                first_dirty,
                ..State::default()
            }),
            idle: Condvar::new(),
            stop: AtomicBool::new(false),
            wake: (Mutex::new(()), Condvar::new()),
            checkpoint_lock: Mutex::new(()),
        }
    }

    pub(crate) fn configure(&self, config: CleanerConfig) {
        *self.throttle.write() = Arc::new(Throttle::new(config.io_max_bytes_per_second));
        *self.config.write() = config;
    }

    pub(crate) fn config(&self) -> CleanerConfig {
        self.config.read().clone()
    }

    /// Stop a cleaning of `tp` under way and wait until it has stopped (the log was marked
    /// closed, deleted or moving before: no new cleaning of it starts).
    pub(crate) fn abort_and_wait(&self, tp: &TopicPartition) {
        let mut st = self.state.lock();
        while let Some(flag) = st.in_progress.get(tp) {
            flag.store(true, Ordering::Release);
            self.idle.wait(&mut st);
        }
    }

    /// Forget a deleted log's first dirty offset.
    pub(crate) fn forget(&self, tp: &TopicPartition) {
        let mut st = self.state.lock();
        st.first_dirty.remove(tp);
        st.failed_until.remove(tp);
    }

    /// First dirty offsets of the logs in `tps`, for the checkpoint of their dir.
    pub(crate) fn first_dirty_of(
        &self,
        placed: impl Fn(&TopicPartition) -> bool,
    ) -> Vec<(String, i32, i64)> {
        let st = self.state.lock();
        let mut v: Vec<(String, i32, i64)> = st
            .first_dirty
            .iter()
            .filter(|(tp, _)| placed(tp))
            .map(|(tp, o)| (tp.topic.clone(), tp.partition, *o))
            .collect();
        v.sort();
        v
    }

    /// Stop the threads (they finish or abort their cleaning) and every cleaning under way.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        let st = self.state.lock();
        for flag in st.in_progress.values() {
            flag.store(true, Ordering::Release);
        }
        drop(st);
        let _g = self.wake.0.lock();
        self.wake.1.notify_all();
    }

    /// Wait until no cleaning is under way.
    pub(crate) fn wait_idle(&self) {
        let mut st = self.state.lock();
        while !st.in_progress.is_empty() {
            self.idle.wait(&mut st);
        }
    }

    /// Held while a `cleaner-offset-checkpoint` is written ([`Host::write_cleaner_checkpoints`]):
    /// one writer at a time.
    pub(crate) fn lock_checkpoint(&self) -> MutexGuard<'_, ()> {
        self.checkpoint_lock.lock()
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Pick the log to clean (`only`: that log, whatever its dirty ratio) and mark it in
    /// progress.
    fn grab(&self, host: &dyn Host, now: i64, only: Option<&TopicPartition>) -> Option<Job> {
        let logs = host.logs();
        let moving = host.moving();
        let mut st = self.state.lock();
        let mut best: Option<(f64, Arc<Log>, i64)> = None;
        for log in logs {
            let tp = log.topic_partition();
            if only.is_some_and(|o| o != tp) {
                continue;
            }
            let skip = !log.config.read().cleanup.compact
                || log.is_closed()
                || log.failure().is_some()
                || moving.contains(tp)
                || st.in_progress.contains_key(tp)
                || (only.is_none() && st.failed_until.get(tp).is_some_and(|t| now < *t));
            if skip {
                continue;
            }
            let c = log.cleanable(st.first_dirty.get(tp).copied(), now, false);
            if c.cleanable_bytes == 0 || c.first_uncleanable <= c.first_dirty {
                continue;
            }
            let min_ratio = log.config.read().cleanup.min_cleanable_dirty_ratio;
            let due = only.is_some() || c.overdue || c.ratio() > min_ratio;
            if due && best.as_ref().is_none_or(|b| c.ratio() > b.0) {
                best = Some((c.ratio(), log.clone(), c.first_dirty));
            }
        }
        let (_, log, first_dirty) = best?;
        let abort = Arc::new(AtomicBool::new(false));
        st.in_progress
            .insert(log.topic_partition().clone(), abort.clone());
        Some(Job {
            log,
            first_dirty,
            abort,
        })
    }

    fn finish(&self, tp: &TopicPartition, outcome: Option<i64>, failed: bool, now: i64) {
        let backoff = i64::try_from(self.config.read().backoff_ms).unwrap_or(i64::MAX);
        let mut st = self.state.lock();
        st.in_progress.remove(tp);
        if let Some(end) = outcome {
            st.first_dirty.insert(tp.clone(), end);
        }
        if failed {
            st.failed_until.insert(
                tp.clone(),
                now.saturating_add(backoff.saturating_mul(FAILURE_BACKOFFS)),
            );
        } else {
            st.failed_until.remove(tp);
        }
        self.idle.notify_all();
    }

    /// Clean one log (the dirtiest due one, or `only`) with `map`. Returns the log cleaned
    /// and what was done, None when no log was due.
    pub(crate) fn run_once(
        &self,
        host: &dyn Host,
        map: &mut OffsetMap,
        only: Option<&TopicPartition>,
        #[cfg(test)] crash_at: Option<super::CrashAt>,
    ) -> Option<(TopicPartition, Result<CleanStats, CleanStop>)> {
        let now = now_ms();
        let job = self.grab(host, now, only)?;
        let tp = job.log.topic_partition().clone();
        let config = self.config();
        let throttle = self.throttle.read().clone();
        let log = &job.log;
        let aborted = || {
            job.abort.load(Ordering::Acquire)
                || self.stopped()
                || log.is_closed()
                || log.failure().is_some()
                || !log.writable()
                || host.is_moving(&tp)
        };
        // The write gate (`crate::gate`), immediately before a cleaned segment replaces others.
        let owns = || log.writable();
        let mut ctx = CleanCtx {
            first_dirty: job.first_dirty,
            now_ms: now,
            map,
            throttle: &throttle,
            aborted: &aborted,
            owns: &owns,
            token: &self.token,
            io_buffer_bytes: (config.io_buffer_size / config.threads.max(1) / 2).max(4096),
            max_decompressed: config.max_batch_decompressed_bytes,
            #[cfg(test)]
            crash_at,
        };
        let result = log.clean(&mut ctx);
        let (outcome, failed) = match &result {
            Ok((end, _)) => (Some(*end), false),
            Err(CleanStop::Aborted(why)) => {
                tracing::info!(?tp, reason = why, "cleaning stopped");
                (None, false)
            }
            Err(CleanStop::Io(e)) => {
                tracing::warn!(?tp, error = %e, "cleaning failed; retrying later");
                (None, true)
            }
        };
        self.finish(&tp, outcome, failed, now_ms());
        if outcome.is_some() {
            host.write_cleaner_checkpoints();
        }
        Some((tp, result.map(|(_, s)| s)))
    }

    /// Sleep `backoff_ms` or until stopped.
    fn backoff(&self) {
        let ms = self.config.read().backoff_ms.max(10);
        let mut g = self.wake.0.lock();
        if !self.stopped() {
            self.wake.1.wait_for(&mut g, Duration::from_millis(ms));
        }
    }
}

/// Start `threads` cleaner threads for `host`; they stop when it is dropped or
/// [`Shared::stop`] is called.
pub(crate) fn start_threads<H: Host>(host: &Arc<H>) -> Vec<std::thread::JoinHandle<()>> {
    let config = host.cleaner().config();
    let threads = config.threads.max(1);
    let per_thread = usize::try_from(config.dedupe_buffer_size / threads as u64)
        .unwrap_or(usize::MAX)
        .min(i32::MAX as usize);
    let mut handles = Vec::new();
    for i in 0..threads {
        let weak: Weak<H> = Arc::downgrade(host);
        let load = config.io_buffer_load_factor;
        let spawned = std::thread::Builder::new()
            .name(format!("sluice-cleaner-{i}"))
            .spawn(move || {
                let mut map: Option<OffsetMap> = None;
                loop {
                    let Some(host) = weak.upgrade() else { return };
                    let cleaner = host.cleaner();
                    if cleaner.stopped() {
                        return;
                    }
                    let map = map.get_or_insert_with(|| OffsetMap::new(per_thread, load));
                    #[cfg(test)]
                    let ran = cleaner.run_once(&*host, map, None, None);
                    #[cfg(not(test))]
                    let ran = cleaner.run_once(&*host, map, None);
                    if ran.is_none() {
                        cleaner.backoff();
                    }
                }
            });
        match spawned {
            Ok(h) => handles.push(h),
            Err(e) => tracing::warn!(error = %e, "could not start a log cleaner thread"),
        }
    }
    handles
}

//! Long-polling fetches waiting for appends, by log: an append wakes only the fetches that
//! watch the log it appended to.
//!
//! A fetch registers one [`Notify`] with every log it reads and keeps it while it waits. The
//! registry holds it weakly, so a finished fetch needs no deregistration: its entries fail to
//! upgrade and are pruned when the log is next woken or registered with, and by [`sweep`].
//! Logs are keyed by the address of their `Arc`. While a fetch is registered it holds an `Arc`
//! to each log it watches, so an address cannot be reused by another log under a live entry;
//! a dead entry under a reused address upgrades to nothing and wakes no one.
//!
//! [`sweep`]: FetchWaiters::sweep

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use sluice_store::Log;
use tokio::sync::Notify;

#[derive(Debug, Default)]
pub(crate) struct FetchWaiters {
    by_log: Mutex<HashMap<usize, Vec<Weak<Notify>>>>,
}

fn key(log: &Arc<Log>) -> usize {
    Arc::as_ptr(log) as usize
}

impl FetchWaiters {
    /// Wake `waiter` on every later append to one of `logs` (until `waiter` is dropped).
    pub(crate) fn register<'a>(
        &self,
        logs: impl IntoIterator<Item = &'a Arc<Log>>,
        waiter: &Arc<Notify>,
    ) {
        let mut by_log = self.by_log.lock();
        for log in logs {
            let entries = by_log.entry(key(log)).or_default();
            entries.retain(|w| w.strong_count() > 0);
            entries.push(Arc::downgrade(waiter));
        }
    }

    /// Something was appended to `log`: wake the fetches watching it. A fetch that is not
    /// waiting at this moment keeps the wake-up for its next wait, so none is lost.
    pub(crate) fn wake(&self, log: &Arc<Log>) {
        let mut by_log = self.by_log.lock();
        let k = key(log);
        let Some(entries) = by_log.get_mut(&k) else {
            return;
        };
        entries.retain(|w| match w.upgrade() {
            Some(n) => {
                n.notify_one();
                true
            }
            None => false,
        });
        if entries.is_empty() {
            by_log.remove(&k);
        }
    }

    /// Drop the entries of finished fetches (periodic).
    pub(crate) fn sweep(&self) {
        self.by_log.lock().retain(|_, entries| {
            entries.retain(|w| w.strong_count() > 0);
            !entries.is_empty()
        });
    }

    #[cfg(test)]
    fn entries(&self) -> usize {
        self.by_log.lock().values().map(Vec::len).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{log_config, open_logs};

    fn logs(n: i32) -> (tempfile::TempDir, sluice_store::LogManager, Vec<Arc<Log>>) {
        open_logs(n, &log_config(i64::MAX, i64::MAX))
    }

    #[tokio::test]
    async fn an_append_wakes_only_the_fetches_watching_its_log() {
        let (_d, _m, logs) = logs(3);
        let w = FetchWaiters::default();
        let a = Arc::new(Notify::new());
        let b = Arc::new(Notify::new());
        w.register(&logs[0..2], &a);
        w.register(&logs[2..3], &b);

        w.wake(&logs[1]);
        // a holds the wake-up although it was not waiting yet; b got none.
        tokio::time::timeout(std::time::Duration::from_secs(5), a.notified())
            .await
            .expect("a woken");
        assert!(
            tokio::time::timeout(std::time::Duration::from_millis(50), b.notified())
                .await
                .is_err(),
            "b watches another log"
        );
        w.wake(&logs[2]);
        tokio::time::timeout(std::time::Duration::from_secs(5), b.notified())
            .await
            .expect("b woken");
    }

    #[tokio::test]
    async fn finished_fetches_are_pruned() {
        let (_d, _m, logs) = logs(2);
        let w = FetchWaiters::default();
        for _ in 0..100 {
            let n = Arc::new(Notify::new());
            w.register(&logs, &n);
        }
        // Each registration pruned the dead ones before it: one dead entry per log is left.
        assert_eq!(w.entries(), 2);
        let live = Arc::new(Notify::new());
        w.register(&logs[0..1], &live);
        assert_eq!(w.entries(), 2, "log 0: the live fetch; log 1: a dead one");
        w.wake(&logs[1]);
        assert_eq!(w.entries(), 1, "waking log 1 dropped its dead entry");
        w.sweep();
        assert_eq!(w.entries(), 1, "the live fetch stays");
        drop(live);
        w.sweep();
        assert_eq!(w.entries(), 0);
    }
}

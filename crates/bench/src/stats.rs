//! Counters and latency histograms shared by the producer and consumer tasks and read by the
//! reporter. Each task records into its own [`Recorder`] (one uncontended lock per batch, not
//! per record); the reporter merges them every interval.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use hdrhistogram::Histogram;
use parking_lot::Mutex;

/// Highest latency tracked: 10 minutes in microseconds (larger values are clamped).
pub const MAX_LATENCY_US: u64 = 600_000_000;

fn new_histogram() -> Histogram<u64> {
    // 3 significant digits, 1 µs .. 10 min: the bounds are constant and valid.
    Histogram::new_with_bounds(1, MAX_LATENCY_US, 3).unwrap_or_else(|_| unreachable!())
}

/// Interval, search-step and cumulative histograms of one kind of latency, for one task.
#[derive(Debug)]
pub struct Latency {
    pub interval: Histogram<u64>,
    /// Since the sustainable-rate search last judged a step.
    pub step: Histogram<u64>,
    pub total: Histogram<u64>,
}

impl Default for Latency {
    fn default() -> Self {
        Latency {
            interval: new_histogram(),
            step: new_histogram(),
            total: new_histogram(),
        }
    }
}

impl Latency {
    pub fn record(&mut self, us: u64) {
        let v = us.clamp(1, MAX_LATENCY_US);
        // Within bounds by the clamp above.
        let _ = self.interval.record(v);
        let _ = self.step.record(v);
        let _ = self.total.record(v);
    }

    /// Record `now - t` for every send time `t`. Records sent in one turn share a send time,
    /// so equal neighbours are recorded as one value with a count (the same histogram as
    /// recording each, at a fraction of the cost at millions of records per second).
    pub fn record_since(&mut self, now: u64, send_times: &[u64]) {
        let mut rest = send_times;
        while let Some(&t) = rest.first() {
            let run = rest.iter().take_while(|&&u| u == t).count();
            let v = now.saturating_sub(t).clamp(1, MAX_LATENCY_US);
            let n = run as u64;
            // Within bounds by the clamp above.
            let _ = self.interval.record_n(v, n);
            let _ = self.step.record_n(v, n);
            let _ = self.total.record_n(v, n);
            rest = &rest[run..];
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Which {
    Interval,
    Step,
    Total,
}

/// One task's latency recorder.
pub type Recorder = Arc<Mutex<Latency>>;

/// Counters of the whole run.
#[derive(Debug, Default)]
pub struct Counters {
    pub sent_msgs: AtomicU64,
    pub sent_bytes: AtomicU64,
    pub acked_msgs: AtomicU64,
    pub publish_errors: AtomicU64,
    pub consumed_msgs: AtomicU64,
    pub consumed_bytes: AtomicU64,
    /// Messages the consumers never read because retention deleted them first (a fetch
    /// answered OFFSET_OUT_OF_RANGE below the log start): they leave the backlog without
    /// being consumed.
    pub skipped_msgs: AtomicU64,
}

impl Counters {
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
    /// Messages acknowledged and neither consumed nor deleted unread.
    pub fn backlog(&self) -> u64 {
        Self::get(&self.acked_msgs)
            .saturating_sub(Self::get(&self.consumed_msgs))
            .saturating_sub(Self::get(&self.skipped_msgs))
    }
}

/// Every task's recorders, by kind.
#[derive(Debug, Default)]
pub struct Stats {
    pub counters: Counters,
    pub publish: Mutex<Vec<Recorder>>,
    pub end_to_end: Mutex<Vec<Recorder>>,
}

/// Percentiles of one histogram, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Percentiles {
    pub count: u64,
    pub avg: f64,
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl Percentiles {
    pub fn of(h: &Histogram<u64>) -> Percentiles {
        if h.is_empty() {
            return Percentiles::default();
        }
        let ms = |us: u64| us as f64 / 1000.0;
        Percentiles {
            count: h.len(),
            avg: h.mean() / 1000.0,
            p50: ms(h.value_at_quantile(0.5)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
        }
    }
}

impl Stats {
    pub fn publish_recorder(&self) -> Recorder {
        let r = Recorder::default();
        self.publish.lock().push(r.clone());
        r
    }
    pub fn end_to_end_recorder(&self) -> Recorder {
        let r = Recorder::default();
        self.end_to_end.lock().push(r.clone());
        r
    }

    fn merge(list: &Mutex<Vec<Recorder>>, which: Which) -> Histogram<u64> {
        let mut out = new_histogram();
        for r in list.lock().iter() {
            let mut l = r.lock();
            let h = match which {
                Which::Interval => &mut l.interval,
                Which::Step => &mut l.step,
                Which::Total => &mut l.total,
            };
            // Same bounds on both sides: adding cannot fail.
            let _ = out.add(&*h);
            if which != Which::Total {
                h.reset();
            }
        }
        out
    }

    /// (publish, end-to-end) percentiles since the last call; resets the interval histograms.
    pub fn take_interval(&self) -> (Percentiles, Percentiles) {
        (
            Percentiles::of(&Self::merge(&self.publish, Which::Interval)),
            Percentiles::of(&Self::merge(&self.end_to_end, Which::Interval)),
        )
    }

    /// Publish percentiles since the last call (the search's step); resets the step histograms.
    pub fn take_step(&self) -> Percentiles {
        Percentiles::of(&Self::merge(&self.publish, Which::Step))
    }

    /// (publish, end-to-end) histograms since the last [`Stats::reset_totals`].
    pub fn totals(&self) -> (Histogram<u64>, Histogram<u64>) {
        (
            Self::merge(&self.publish, Which::Total),
            Self::merge(&self.end_to_end, Which::Total),
        )
    }

    /// Forget the cumulative histograms (end of warm-up).
    pub fn reset_totals(&self) {
        for list in [&self.publish, &self.end_to_end] {
            for r in list.lock().iter() {
                r.lock().total.reset();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_since_equals_recording_each() {
        let times = [5, 5, 5, 7, 7, 5, 9, 20, 20, 20, 20, 1000, 2_000_000];
        let now = 1_000_000;
        let mut runs = Latency::default();
        runs.record_since(now, &times);
        let mut each = Latency::default();
        for t in times {
            each.record(now.saturating_sub(t));
        }
        assert_eq!(runs.total.len(), times.len() as u64);
        assert!(runs.total == each.total);
        assert!(runs.interval == each.interval);
    }
}

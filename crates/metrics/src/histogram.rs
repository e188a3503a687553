//! Histograms recorded with one relaxed atomic add per value (no lock, no allocation).
//!
//! - [`Histogram`]: Prometheus's kind, fixed upper bounds (`le`) chosen per metric, exported
//!   as `_bucket`/`_sum`/`_count`, for values recorded rarely (an fsync, a flush round).
//! - [`LatencyHistogram`]: log-linear buckets (8 per power of two, so a value is known within
//!   12.5%), from which quantiles are computed at scrape time, as Kafka's request-time
//!   percentiles are exported through the JMX exporter (`quantile="0.99"` gauges).

use std::sync::atomic::{AtomicU64, Ordering};

/// A Prometheus histogram over fixed upper bounds, counted in integer units (the exposition
/// scales them, e.g. microseconds to seconds).
#[derive(Debug)]
pub struct Histogram {
    /// Upper bounds, strictly increasing, in recorded units.
    bounds: &'static [u64],
    /// Count per bound (not cumulative), plus one past the last bound (`+Inf`).
    counts: Box<[AtomicU64]>,
    sum: AtomicU64,
}

/// A copy of a histogram's counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// (upper bound, cumulative count) per bound; the `+Inf` bucket is `count`.
    pub buckets: Vec<(u64, u64)>,
    pub sum: u64,
    pub count: u64,
}

impl Histogram {
    pub fn new(bounds: &'static [u64]) -> Histogram {
        debug_assert!(bounds.windows(2).all(|w| w[0] < w[1]));
        Histogram {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum: AtomicU64::new(0),
        }
    }

    pub fn record(&self, value: u64) {
        let i = self.bounds.partition_point(|b| *b < value);
        self.counts[i].fetch_add(1, Ordering::Relaxed);
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut cumulative = 0;
        let mut buckets = Vec::with_capacity(self.bounds.len());
        for (bound, count) in self.bounds.iter().zip(self.counts.iter()) {
            cumulative += count.load(Ordering::Relaxed);
            buckets.push((*bound, cumulative));
        }
        let count = cumulative + self.counts.last().map_or(0, |c| c.load(Ordering::Relaxed));
        HistogramSnapshot {
            buckets,
            sum: self.sum.load(Ordering::Relaxed),
            count,
        }
    }
}

/// Sub-buckets per power of two (2^3 = 8: a bucket spans at most 1/8 of its lower bound).
const SUB_BITS: u32 = 3;
const SUB: u64 = 1 << SUB_BITS;
/// Largest exponent kept; larger values land in the last bucket (2^36 us is 19 hours).
const MAX_EXP: u32 = 36;
/// Number of buckets of a [`LatencyHistogram`].
pub const LATENCY_BUCKETS: usize = (SUB + (MAX_EXP - SUB_BITS + 1) as u64 * SUB) as usize;

/// The bucket of `value`: values below 8 have one each; above, 8 per power of two.
pub fn latency_bucket(value: u64) -> usize {
    if value < SUB {
        return value as usize;
    }
    let exp = (63 - value.leading_zeros()).min(MAX_EXP);
    if exp == MAX_EXP && value >> (MAX_EXP + 1) > 0 {
        return LATENCY_BUCKETS - 1;
    }
    let sub = (value >> (exp - SUB_BITS)) & (SUB - 1);
    (SUB + u64::from(exp - SUB_BITS) * SUB + sub) as usize
}

/// The values bucket `i` holds: `[low, high)`.
pub fn latency_bucket_range(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < SUB {
        return (i, i + 1);
    }
    let exp = (i - SUB) / SUB + u64::from(SUB_BITS);
    let sub = (i - SUB) % SUB;
    let shift = exp - u64::from(SUB_BITS);
    ((SUB + sub) << shift, (SUB + sub + 1) << shift)
}

/// Log-linear buckets for request times (microseconds), from which quantiles are computed.
#[derive(Debug)]
pub struct LatencyHistogram {
    counts: Box<[AtomicU64]>,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            counts: (0..LATENCY_BUCKETS).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

impl LatencyHistogram {
    pub fn record(&self, value: u64) {
        self.counts[latency_bucket(value)].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts per bucket (not cumulative).
    pub fn snapshot(&self) -> Vec<u64> {
        self.counts
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect()
    }
}

/// The `q` quantile (0..=1) of bucket counts, as the middle of the bucket that holds it; None
/// when there are no values.
pub fn quantile(counts: &[u64], q: f64) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    // The rank of the value wanted, 1-based: the smallest value with at least q of all at or
    // below it.
    let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).max(1);
    let mut seen = 0;
    for (i, c) in counts.iter().enumerate() {
        seen += c;
        if seen >= rank {
            let (low, high) = latency_bucket_range(i);
            return Some((low as f64 + high as f64 - 1.0) / 2.0);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_value_lands_in_the_bucket_whose_range_holds_it() {
        let mut values: Vec<u64> = (0..5000).collect();
        for exp in 3..40 {
            let p = 1u64 << exp;
            values.extend([p - 1, p, p + 1, p + p / 3, p + p / 2]);
        }
        for v in values {
            let i = latency_bucket(v);
            assert!(i < LATENCY_BUCKETS, "{v}");
            let (low, high) = latency_bucket_range(i);
            if v < 1 << (MAX_EXP + 1) {
                assert!(low <= v && v < high, "{v} in bucket {i} [{low}, {high})");
                // Within 12.5% of its lower bound.
                assert!((high - low) * 8 <= low.max(8), "{v}: [{low}, {high})");
            } else {
                assert_eq!(i, LATENCY_BUCKETS - 1);
            }
        }
        // Buckets are contiguous.
        for i in 1..LATENCY_BUCKETS {
            assert_eq!(latency_bucket_range(i - 1).1, latency_bucket_range(i).0);
        }
    }

    #[test]
    fn quantiles_match_a_sorted_list_within_the_bucket_error() {
        let h = LatencyHistogram::default();
        // 1000 values 1..=1000 us, then 10 slow ones at 50 ms.
        let mut all: Vec<u64> = (1..=1000).collect();
        all.extend([50_000; 10]);
        for v in &all {
            h.record(*v);
        }
        all.sort_unstable();
        let counts = h.snapshot();
        for q in [0.5, 0.75, 0.95, 0.99, 0.999] {
            let rank = ((q * all.len() as f64).ceil() as usize).max(1);
            let exact = all[rank - 1] as f64;
            let got = quantile(&counts, q).unwrap();
            assert!(
                (got - exact).abs() <= exact / 8.0 + 1.0,
                "q{q}: {got} vs {exact}"
            );
        }
        assert_eq!(quantile(&[0; LATENCY_BUCKETS], 0.5), None);
    }

    #[test]
    fn prometheus_buckets_are_cumulative_and_upper_inclusive() {
        static BOUNDS: [u64; 3] = [10, 100, 1000];
        let h = Histogram::new(&BOUNDS);
        for v in [1, 10, 11, 100, 5000] {
            h.record(v);
        }
        let s = h.snapshot();
        assert_eq!(s.buckets, vec![(10, 2), (100, 4), (1000, 4)]);
        assert_eq!(s.count, 5);
        assert_eq!(s.sum, 5122);
    }
}

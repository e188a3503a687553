//! `sluice machine check`: how fast this machine copies memory, sampled over time. A broker at
//! its capacity on a small machine spends much of its CPU copying (socket buffers, the page
//! cache), so when the machine's own copy rate moves (a shared host's other tenants use the
//! same memory and caches, which steal time does not show), a benchmark's rate moves with it.
//! `bench/compare` runs this before every run, as it runs `sluice volume check`, so that a
//! spread between runs can be told from the machine's own.
//!
//! Every `interval` one 32 MiB copy, whose source and destination overflow the caches (DRAM),
//! and 128 copies of 256 KiB, in them (cache), are timed; [`summarize`] is pure and
//! unit-tested.

use std::fmt;
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Copied once per sample: source and destination together (64 MiB) are twice the
/// last-level cache of the machines this runs on (32 MiB of L3 on their AMD EPYC).
pub const DRAM_BYTES: usize = 32 << 20;
/// Copied [`CACHE_COPIES`] times per sample: fits in a core's L2.
pub const CACHE_BYTES: usize = 256 << 10;
const CACHE_COPIES: u32 = 128;

/// One sample: seconds since the start, and the two copy rates in GB/s (10^9 bytes).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub at_s: f64,
    pub dram_gb_s: f64,
    pub cache_gb_s: f64,
}

/// Take samples for `duration`, one every `interval` (the copies take a few milliseconds of
/// each; the rest of the interval is slept, so the check itself leaves the machine mostly idle).
pub fn sample(duration: Duration, interval: Duration) -> Vec<Sample> {
    let src = vec![1u8; DRAM_BYTES];
    let mut dst = vec![2u8; DRAM_BYTES];
    let start = Instant::now();
    let mut out = Vec::new();
    while start.elapsed() < duration {
        let at = start.elapsed().as_secs_f64();
        let t0 = Instant::now();
        dst.copy_from_slice(black_box(&src));
        black_box(&mut dst);
        let t1 = Instant::now();
        for _ in 0..CACHE_COPIES {
            dst[..CACHE_BYTES].copy_from_slice(black_box(&src[..CACHE_BYTES]));
            black_box(&mut dst);
        }
        let t2 = Instant::now();
        out.push(Sample {
            at_s: at,
            dram_gb_s: rate(DRAM_BYTES as f64, t1 - t0),
            cache_gb_s: rate(CACHE_BYTES as f64 * f64::from(CACHE_COPIES), t2 - t1),
        });
        if let Some(rest) = interval.checked_sub(t0.elapsed()) {
            std::thread::sleep(rest);
        }
    }
    out
}

fn rate(bytes: f64, took: Duration) -> f64 {
    bytes / took.as_secs_f64().max(1e-9) / 1e9
}

/// Percentiles of one copy rate, GB/s: over all samples, and the lowest and highest of the
/// per-second medians (how far the rate moves from one second to another).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
    pub second_min: f64,
    pub second_max: f64,
}

/// What [`sample`] saw.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub samples: usize,
    pub seconds: f64,
    pub dram: Spread,
    pub cache: Spread,
}

/// Summarize samples (None when there are none).
pub fn summarize(samples: &[Sample]) -> Option<Summary> {
    let last = samples.last()?;
    Some(Summary {
        samples: samples.len(),
        seconds: last.at_s.ceil().max(1.0),
        dram: spread(samples, |s| s.dram_gb_s),
        cache: spread(samples, |s| s.cache_gb_s),
    })
}

fn spread(samples: &[Sample], value: impl Fn(&Sample) -> f64) -> Spread {
    let (second_min, second_max) = samples
        .chunk_by(|a, b| a.at_s.floor() == b.at_s.floor())
        .map(|second| {
            let mut v: Vec<f64> = second.iter().map(&value).collect();
            v.sort_by(f64::total_cmp);
            quantile(&v, 0.5)
        })
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), x| {
            (lo.min(x), hi.max(x))
        });
    let mut all: Vec<f64> = samples.iter().map(&value).collect();
    all.sort_by(f64::total_cmp);
    Spread {
        median: quantile(&all, 0.5),
        p10: quantile(&all, 0.1),
        p90: quantile(&all, 0.9),
        second_min,
        second_max,
    }
}

/// The `q` quantile of sorted, non-empty `values` by nearest rank (the lower of two middle
/// values for the median of an even count).
fn quantile(values: &[f64], q: f64) -> f64 {
    let rank = (q * (values.len() - 1) as f64).floor() as usize;
    values[rank]
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "samples: {} over {:.0} s (one every {:.0} ms)",
            self.samples,
            self.seconds,
            1000.0 * self.seconds / self.samples as f64
        )?;
        for (name, size, s) in [
            ("memory copy (dram)", DRAM_BYTES, &self.dram),
            ("memory copy (cache)", CACHE_BYTES, &self.cache),
        ] {
            writeln!(
                f,
                "{name}: median {:.2} GB/s, p10 {:.2}, p90 {:.2}; per second {:.2} to {:.2} GB/s \
                 ({} KiB buffers)",
                s.median,
                s.p10,
                s.p90,
                s.second_min,
                s.second_max,
                size >> 10
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(at_s: f64, dram: f64) -> Sample {
        Sample {
            at_s,
            dram_gb_s: dram,
            cache_gb_s: 10.0 * dram,
        }
    }

    #[test]
    fn summary_gives_percentiles_and_the_range_of_per_second_medians() {
        // Second 0: 4, 5, 6 (median 5); second 1: 8, 9 (median 8); second 2: 7.
        let samples = [
            s(0.0, 4.0),
            s(0.3, 5.0),
            s(0.6, 6.0),
            s(1.0, 8.0),
            s(1.5, 9.0),
            s(2.2, 7.0),
        ];
        let sum = summarize(&samples).unwrap();
        assert_eq!(sum.samples, 6);
        assert_eq!(sum.seconds, 3.0);
        assert_eq!(sum.dram.median, 6.0);
        assert_eq!(sum.dram.p10, 4.0);
        assert_eq!(sum.dram.p90, 8.0);
        assert_eq!((sum.dram.second_min, sum.dram.second_max), (5.0, 8.0));
        assert_eq!((sum.cache.second_min, sum.cache.second_max), (50.0, 80.0));
        let text = sum.to_string();
        assert!(text.contains("memory copy (dram): median 6.00 GB/s, p10 4.00, p90 8.00; per second 5.00 to 8.00 GB/s"), "{text}");
    }

    #[test]
    fn no_samples_no_summary() {
        assert_eq!(summarize(&[]), None);
    }

    #[test]
    fn sampling_this_machine_gives_rates_for_each_interval() {
        let samples = sample(Duration::from_millis(300), Duration::from_millis(100));
        assert!((2..=4).contains(&samples.len()), "{samples:?}");
        for w in samples.windows(2) {
            assert!(w[1].at_s >= w[0].at_s + 0.09, "{samples:?}");
        }
        for x in &samples {
            assert!(x.dram_gb_s > 0.0 && x.dram_gb_s.is_finite(), "{x:?}");
            assert!(x.cache_gb_s > 0.0 && x.cache_gb_s.is_finite(), "{x:?}");
        }
    }
}

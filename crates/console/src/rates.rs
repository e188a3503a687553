//! Records appended per second, per partition, measured by the console itself from the end
//! offsets its pages read (the cluster's Kafka API has no throughput figure): the change of a
//! partition's end offset between two reads at least [`SPAN_MIN`] apart.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Shortest time between the two end offsets a rate is measured over.
const SPAN_MIN: Duration = Duration::from_secs(1);
/// Partitions whose last end offset is kept, at most (beyond it all are forgotten and
/// measured again).
const KEPT_MAX: usize = 200_000;

type Partition = (String, i32);

/// When an end offset was read, the offset, and the rate it gave.
type Sample = (Instant, i64, Option<f64>);

/// The end offsets last read, and the rate last measured.
#[derive(Debug, Default)]
pub(crate) struct Rates {
    seen: parking_lot::Mutex<HashMap<Partition, Sample>>,
}

impl Rates {
    /// Take these end offsets read now; the rate of each partition that has one.
    pub(crate) fn sample(
        &self,
        ends: impl IntoIterator<Item = (Partition, i64)>,
    ) -> HashMap<Partition, f64> {
        self.sample_at(Instant::now(), ends)
    }

    fn sample_at(
        &self,
        now: Instant,
        ends: impl IntoIterator<Item = (Partition, i64)>,
    ) -> HashMap<Partition, f64> {
        let mut seen = self.seen.lock();
        if seen.len() > KEPT_MAX {
            seen.clear();
        }
        let mut out = HashMap::new();
        for (tp, end) in ends {
            match seen.get(&tp).copied() {
                Some((at, before, _)) if now.saturating_duration_since(at) >= SPAN_MIN => {
                    let span = now.saturating_duration_since(at).as_secs_f64();
                    // A topic deleted and made again, or records deleted: no negative rate.
                    let rate = (end - before).max(0) as f64 / span;
                    out.insert(tp.clone(), rate);
                    seen.insert(tp, (now, end, Some(rate)));
                }
                Some((_, _, last)) => {
                    if let Some(r) = last {
                        out.insert(tp, r);
                    }
                }
                None => {
                    seen.insert(tp, (now, end, None));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_is_the_end_offsets_change_over_at_least_a_second() {
        let r = Rates::default();
        let t0 = Instant::now();
        let tp = || ("t".to_string(), 0);
        assert!(r.sample_at(t0, [(tp(), 100)]).is_empty());
        // Too soon: still none.
        assert!(r
            .sample_at(t0 + Duration::from_millis(500), [(tp(), 150)])
            .is_empty());
        let got = r.sample_at(t0 + Duration::from_secs(2), [(tp(), 300)]);
        assert_eq!(got[&tp()], 100.0);
        // Too soon after: the last rate again.
        let got = r.sample_at(t0 + Duration::from_millis(2100), [(tp(), 310)]);
        assert_eq!(got[&tp()], 100.0);
        // The offsets went back (re-created): zero, never negative.
        let got = r.sample_at(t0 + Duration::from_secs(4), [(tp(), 5)]);
        assert_eq!(got[&tp()], 0.0);
    }
}

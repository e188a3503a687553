//! What counting costs a request: the metric updates the server and the broker make for one
//! produce request and one fetch answer of `PARTITIONS` partitions of one topic (the shape of
//! the a40k benchmark: 100 partitions over 4 producers and 4 consumers), timed over many
//! iterations on one thread, then on two threads updating the same counters at once (the
//! broker's two worker threads on a 2-core machine: shared cache lines bounce).
//!
//! ```sh
//! cargo run --release -p sluice-metrics --example overhead
//! ```

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_metrics::{ErrorTally, FetchCounts, Metrics, ProduceCounts};

const PARTITIONS: usize = 25;
const ITERATIONS: u32 = 2_000_000;

/// The updates of one produce request and one fetch answer.
fn one_round(m: &Metrics, topic: &str) {
    // Server: request read, answered, timed; broker: per-topic counts, error codes.
    for (api, version) in [(0i16, 11i16), (1, 17)] {
        let started = Instant::now();
        m.request(api, version);
        let t = m.topic(topic);
        if api == 0 {
            let mut c = ProduceCounts::default();
            for _ in 0..PARTITIONS {
                c.add(1600, 1, false);
            }
            m.produced(Some(&t), &c);
        } else {
            let mut c = FetchCounts::default();
            for _ in 0..PARTITIONS {
                c.add(1600, false);
            }
            m.fetched(Some(&t), &c);
        }
        let mut tally = ErrorTally::new(m, api);
        for _ in 0..PARTITIONS {
            tally.count(0);
        }
        drop(tally);
        m.request_time(api, started.elapsed());
    }
}

fn run(threads: usize) -> Duration {
    let m = Arc::new(Metrics::new([0, 1], &["PLAINTEXT"]));
    let started = Instant::now();
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let m = m.clone();
            std::thread::spawn(move || {
                for _ in 0..ITERATIONS {
                    one_round(&m, "bench-topic");
                }
            })
        })
        .collect();
    for h in handles {
        let _ = h.join();
    }
    // Per round per thread.
    started.elapsed() / ITERATIONS
}

fn main() {
    for threads in [1, 2] {
        let per_round = run(threads);
        println!(
            "{threads} thread(s): {:.0} ns per produce request + fetch answer of {PARTITIONS} partitions (wall time per round per thread)",
            per_round.as_nanos() as f64
        );
    }
}

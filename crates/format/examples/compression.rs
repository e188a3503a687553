//! Broker-side compression measured: for each codec a topic's `compression.type` can name,
//! the ratio (batch bytes as produced uncompressed / batch bytes stored) and the CPU cost of
//! compressing (what the broker pays at produce time) and decompressing (what consumers pay),
//! on three kinds of payload:
//!
//! - `omb-random-0.5`: the benchmark's payloads (OpenMessaging Benchmark randomized payloads,
//!   1 KiB, first half random bytes, second half zeros: the workloads of bench/workloads);
//! - `json-events`: 400-600 byte JSON click events (ids, timestamps, URLs, user agents);
//! - `access-logs`: nginx-style access log lines.
//!
//! ```sh
//! cargo run --release -p sluice-format --features codecs --example compression [-- MIB]
//! ```
//!
//! Batches are 128 KiB of records (the benchmark drivers' batch.size), built as a producer
//! builds them; each codec compresses the records section exactly as the broker's
//! recompression does (`sluice_format::codec::compress`). CPU time is this thread's
//! (Linux).

use std::time::Duration;

use sluice_format::codec::{compress, decompress};
use sluice_format::BatchBuilder;

/// A small deterministic generator (xorshift64*), so every run measures the same bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

/// This thread's CPU time (Linux: the run time in /proc/thread-self/schedstat, in ns).
fn thread_cpu() -> Duration {
    let ns = std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0);
    Duration::from_nanos(ns)
}

const PAGES: &[&str] = &[
    "/",
    "/products",
    "/products/",
    "/cart",
    "/checkout",
    "/search?q=",
    "/account/orders",
    "/blog/",
    "/help/shipping",
    "/api/v2/items/",
];
const AGENTS: &[&str] = &[
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/15E148",
    "Mozilla/5.0 (X11; Linux x86_64; rv:125.0) Gecko/20100101 Firefox/125.0",
    "okhttp/4.12.0",
];
const EVENTS: &[&str] = &[
    "page_view",
    "add_to_cart",
    "search",
    "checkout",
    "login",
    "click",
];
const COUNTRIES: &[&str] = &["DE", "US", "FR", "GB", "JP", "BR", "IN", "NL"];

fn json_event(r: &mut Rng, ts: u64) -> Vec<u8> {
    let page = r.pick(PAGES);
    format!(
        "{{\"event_id\":\"{:016x}{:016x}\",\"ts\":{ts},\"type\":\"{}\",\"user_id\":{},\"session\":\"{:012x}\",\"url\":\"https://shop.example.com{page}{}\",\"referrer\":\"https://www.example.org/{}\",\"ua\":\"{}\",\"country\":\"{}\",\"amount\":{}.{:02},\"items\":{}}}",
        r.next(),
        r.next(),
        r.pick(EVENTS),
        r.below(5_000_000),
        r.next() & 0xffff_ffff_ffff,
        r.below(100_000),
        r.below(1000),
        r.pick(AGENTS),
        r.pick(COUNTRIES),
        r.below(500),
        r.below(100),
        r.below(10),
    )
    .into_bytes()
}

fn access_log(r: &mut Rng, ts: u64) -> Vec<u8> {
    let secs = ts / 1000;
    format!(
        "10.{}.{}.{} - - [24/Nov/2026:{:02}:{:02}:{:02} +0000] \"GET {}{} HTTP/1.1\" {} {} \"-\" \"{}\" rt={}.{:03} upstream=10.0.{}.{}:8080",
        r.below(256),
        r.below(256),
        r.below(256),
        (secs / 3600) % 24,
        (secs / 60) % 60,
        secs % 60,
        r.pick(PAGES),
        r.below(100_000),
        [200, 200, 200, 200, 304, 404, 500][r.below(7) as usize],
        r.below(50_000),
        r.pick(AGENTS),
        r.below(2),
        r.below(1000),
        r.below(4),
        r.below(256),
    )
    .into_bytes()
}

fn omb_payload(r: &mut Rng) -> Vec<u8> {
    let mut p = vec![0u8; 1024];
    for b in p.iter_mut().take(512) {
        *b = r.next() as u8;
    }
    p
}

/// A batch's records section and its whole uncompressed size.
type Batch = (Vec<u8>, usize);

/// Batches of about 128 KiB of records from `make`, `total` bytes in all; returns each
/// batch's records section (what a codec compresses) and the whole uncompressed batch size.
fn batches(total: usize, mut make: impl FnMut(&mut Rng, u64) -> Vec<u8>) -> Vec<Batch> {
    const BATCH: usize = 128 * 1024;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut out = Vec::new();
    let mut made = 0;
    let mut ts = 1_795_500_000_000u64;
    while made < total {
        let mut b = BatchBuilder::new();
        let mut size = 0;
        while size < BATCH {
            ts += rng.below(5);
            let v = make(&mut rng, ts);
            size += v.len() + 20;
            b = b.record(ts as i64, None, Some(&v));
        }
        let batch = b.build();
        made += batch.len();
        let len = batch.len();
        out.push((batch[sluice_format::HEADER_LEN..].to_vec(), len));
    }
    out
}

fn main() {
    let mib: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(64);
    let total = mib << 20;
    let payloads: Vec<(&str, Vec<Batch>)> = vec![
        ("omb-random-0.5", batches(total, |r, _| omb_payload(r))),
        ("json-events", batches(total, json_event)),
        ("access-logs", batches(total, access_log)),
    ];
    let codecs = [(1u8, "gzip"), (2, "snappy"), (3, "lz4"), (4, "zstd")];
    println!(
        "{:<15} {:<7} {:>7} {:>16} {:>18} {:>16}",
        "payload", "codec", "ratio", "compress MB/s", "CPU s per GB in", "decompress MB/s"
    );
    for (name, batches) in &payloads {
        let logical: usize = batches.iter().map(|(_, len)| len).sum();
        for (codec, codec_name) in codecs {
            let c0 = thread_cpu();
            let compressed: Vec<Vec<u8>> = batches
                .iter()
                .map(|(section, _)| compress(codec, section).expect("compress"))
                .collect();
            let c1 = thread_cpu();
            for ((section, _), c) in batches.iter().zip(&compressed) {
                let d = decompress(codec, c, section.len() + 1024).expect("decompress");
                assert_eq!(d.len(), section.len());
            }
            let c2 = thread_cpu();
            let physical: usize = compressed
                .iter()
                .map(|c| c.len() + sluice_format::HEADER_LEN)
                .sum();
            let mb = logical as f64 / 1e6;
            let comp_s = (c1 - c0).as_secs_f64().max(1e-9);
            let decomp_s = (c2 - c1).as_secs_f64().max(1e-9);
            println!(
                "{:<15} {:<7} {:>6.2}x {:>16.0} {:>18.2} {:>16.0}",
                name,
                codec_name,
                logical as f64 / physical as f64,
                mb / comp_s,
                comp_s / (mb / 1000.0),
                mb / decomp_s,
            );
        }
    }
}

//! Stable-toolchain fuzz runner: no libFuzzer, no coverage feedback. Runs a target on its seed
//! corpus, then on random and mutated inputs until the time is up. Exits 1 after a panic
//! (the input is saved as `artifacts/<target>/crash-<hash>`); aborts with the input saved as
//! `oom-<hash>` / `timeout-<hash>` on an allocation above the limit or a hung input.
//!
//! ```text
//! smoke [--seconds N] [--seed S] [--corpus DIR] [--artifacts DIR] [TARGET...]
//! smoke --repro TARGET FILE...        run TARGET on FILEs (a panic shows its backtrace)
//! smoke --write-corpus [DIR]          (re)write the built-in seeds to DIR/<target>/
//! smoke --typed-frame INPUT OUT        write the frame decode_request's typed view makes of INPUT
//! smoke --list
//! ```
//! Environment: SLUICE_FUZZ_MALLOC_LIMIT_MB (default 2048, like libFuzzer's -malloc_limit_mb),
//! SLUICE_FUZZ_TIMEOUT_SECS (per input, default 10).

use std::alloc::{GlobalAlloc, Layout, System};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

// ---------------------------------------------------------------------------------------------
// Guards: oversized allocations and hung inputs save the current input, then abort.
// ---------------------------------------------------------------------------------------------

static CURRENT_PTR: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static CURRENT_LEN: AtomicUsize = AtomicUsize::new(0);
static ARTIFACT_DIR: OnceLock<PathBuf> = OnceLock::new();
static MALLOC_LIMIT: AtomicUsize = AtomicUsize::new(usize::MAX);
static REPORTING: AtomicBool = AtomicBool::new(false);
/// Milliseconds since START at which the current input started; 0 = idle.
static INPUT_STARTED_MS: AtomicU64 = AtomicU64::new(0);
static START: OnceLock<Instant> = OnceLock::new();

fn now_ms() -> u64 {
    START.get_or_init(Instant::now).elapsed().as_millis() as u64 + 1
}

fn current_input() -> Vec<u8> {
    let p = CURRENT_PTR.load(Ordering::SeqCst);
    let n = CURRENT_LEN.load(Ordering::SeqCst);
    if p.is_null() {
        return Vec::new();
    }
    // SAFETY: set by `run_one` to a slice that outlives the target call, cleared after it.
    unsafe { std::slice::from_raw_parts(p, n) }.to_vec()
}

/// Save the current input as `<kind>-<hash>` and abort the process.
fn fatal(kind: &str, what: &str) -> ! {
    let input = current_input();
    let path = save_artifact(kind, &input);
    eprintln!("\n==smoke== FATAL {kind}: {what}");
    eprintln!("==smoke== input ({} bytes) saved to {}", input.len(), path.display());
    eprintln!("==smoke== hex: {}", hex_prefix(&input, 512));
    std::process::abort();
}

struct GuardAlloc;

unsafe impl GlobalAlloc for GuardAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.check(layout.size());
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.check(layout.size());
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.check(new_size);
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
}

impl GuardAlloc {
    fn check(&self, size: usize) {
        if size > MALLOC_LIMIT.load(Ordering::Relaxed)
            && !REPORTING.swap(true, Ordering::SeqCst)
        {
            // Allocating from here is fine: the guard is now off (REPORTING) and the
            // inner allocations go to the system allocator.
            MALLOC_LIMIT.store(usize::MAX, Ordering::SeqCst);
            fatal(
                "oom",
                &format!(
                    "allocation of {size} bytes exceeds the limit of {} MB\n{}",
                    limit_mb(),
                    std::backtrace::Backtrace::force_capture()
                ),
            );
        }
    }
}

#[global_allocator]
static GLOBAL: GuardAlloc = GuardAlloc;

fn limit_mb() -> usize {
    env_num("SLUICE_FUZZ_MALLOC_LIMIT_MB", 2048)
}

fn env_num(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

fn fnv(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn hex_prefix(data: &[u8], max: usize) -> String {
    let mut s: String = data.iter().take(max).map(|b| format!("{b:02x}")).collect();
    if data.len() > max {
        s.push_str("...");
    }
    s
}

fn save_artifact(kind: &str, data: &[u8]) -> PathBuf {
    let dir = ARTIFACT_DIR.get().cloned().unwrap_or_else(|| PathBuf::from("."));
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("{kind}-{:016x}", fnv(data)));
    if let Err(e) = std::fs::write(&path, data) {
        eprintln!("==smoke== could not write {}: {e}", path.display());
    }
    path
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
    fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

const MAX_LEN: usize = 4096;

const INTERESTING_32: &[i32] = &[
    0, 1, -1, 2, 7, 8, 12, 16, 49, 61, 62, 127, 128, 255, 256, 4096, 0x7fff, 0x8000, 0xffff,
    0x10000, i32::MAX, i32::MIN, i32::MAX - 1, i16::MIN as i32, i16::MAX as i32,
];

fn mutate(rng: &mut Rng, input: &mut Vec<u8>, pool: &[Vec<u8>]) {
    let n = 1 + rng.below(4);
    for _ in 0..n {
        let len = input.len();
        match rng.below(11) {
            0 if len > 0 => {
                let i = rng.below(len);
                input[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                input[i] = rng.next() as u8;
            }
            2 if len > 0 => {
                let i = rng.below(len);
                input[i] = input[i].wrapping_add(if rng.chance(2) { 1 } else { 255 });
            }
            3 => {
                // An interesting integer, big-endian, of width 1, 2, 4 or 8.
                let v = i64::from(INTERESTING_32[rng.below(INTERESTING_32.len())]);
                let width = [1usize, 2, 4, 8][rng.below(4)];
                if len >= width {
                    let at = rng.below(len - width + 1);
                    input[at..at + width].copy_from_slice(&v.to_be_bytes()[8 - width..]);
                }
            }
            4 if len >= 4 => {
                // A length field that matches the rest of the buffer (frames, batchLength,
                // arrays and strings all have them).
                let at = rng.below(len - 3);
                let rest = (len - at - 4) as i32 - rng.below(3) as i32;
                input[at..at + 4].copy_from_slice(&rest.to_be_bytes());
            }
            5 => {
                let at = rng.below(len + 1);
                let k = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..k).map(|_| rng.next() as u8).collect();
                input.splice(at..at, bytes);
            }
            6 if len > 0 => {
                let at = rng.below(len);
                let k = 1 + rng.below((len - at).min(16));
                input.drain(at..at + k);
            }
            7 if len > 0 => {
                // Duplicate a chunk somewhere else.
                let at = rng.below(len);
                let k = 1 + rng.below((len - at).min(64));
                let chunk = input[at..at + k].to_vec();
                let to = rng.below(len + 1);
                input.splice(to..to, chunk);
            }
            8 if !pool.is_empty() => {
                // Crossover: our prefix, another input's suffix.
                let other = &pool[rng.below(pool.len())];
                let cut = rng.below(input.len() + 1);
                let from = rng.below(other.len() + 1);
                input.truncate(cut);
                input.extend_from_slice(&other[from..]);
            }
            9 if !pool.is_empty() => {
                // Append another input whole (concatenated batches, trailing bytes).
                let other = &pool[rng.below(pool.len())];
                input.extend_from_slice(other);
            }
            10 if len > 0 => {
                input.truncate(rng.below(len));
            }
            _ => {}
        }
    }
    input.truncate(MAX_LEN);
}

fn random_input(rng: &mut Rng) -> Vec<u8> {
    let len = rng.below(256);
    (0..len).map(|_| rng.next() as u8).collect()
}

/// The message of the last panic (the hook records it instead of printing).
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

fn install_quiet_panic_hook() {
    std::panic::set_hook(Box::new(|info| {
        let bt = std::backtrace::Backtrace::force_capture();
        let msg = format!("{info}\n{bt}");
        if let Ok(mut g) = LAST_PANIC.lock() {
            *g = Some(msg);
        }
    }));
}

/// Run one input; Err(panic message) if the target panicked.
fn run_one(f: fn(&[u8]), input: &[u8]) -> Result<(), String> {
    CURRENT_PTR.store(input.as_ptr() as *mut u8, Ordering::SeqCst);
    CURRENT_LEN.store(input.len(), Ordering::SeqCst);
    INPUT_STARTED_MS.store(now_ms(), Ordering::SeqCst);
    let r = std::panic::catch_unwind(|| f(input));
    INPUT_STARTED_MS.store(0, Ordering::SeqCst);
    CURRENT_PTR.store(std::ptr::null_mut(), Ordering::SeqCst);
    CURRENT_LEN.store(0, Ordering::SeqCst);
    r.map_err(|_| {
        LAST_PANIC
            .lock()
            .ok()
            .and_then(|mut g| g.take())
            .unwrap_or_else(|| "panic (no message)".into())
    })
}

fn start_watchdog(timeout: Duration) {
    std::thread::spawn(move || loop {
        std::thread::sleep(Duration::from_millis(200));
        let started = INPUT_STARTED_MS.load(Ordering::SeqCst);
        if started != 0 {
            if now_ms().saturating_sub(started) > timeout.as_millis() as u64
                && !REPORTING.swap(true, Ordering::SeqCst)
            {
                fatal("timeout", &format!("one input ran longer than {timeout:?}"));
            }
        }
    });
}

fn read_dir_files(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.is_file() {
                if let Ok(d) = std::fs::read(&p) {
                    out.push((p, d));
                }
            }
        }
    }
    out.sort();
    out
}

// ---------------------------------------------------------------------------------------------
// Modes
// ---------------------------------------------------------------------------------------------

struct Opts {
    seconds: u64,
    seed: u64,
    corpus: PathBuf,
    artifacts: PathBuf,
    targets: Vec<String>,
}

/// Fuzz one target for `opts.seconds`. Returns false after a panic.
fn fuzz_target(name: &str, f: fn(&[u8]), opts: &Opts) -> bool {
    let _ = ARTIFACT_DIR.set(opts.artifacts.join(name));
    let t0 = Instant::now();
    let deadline = t0 + Duration::from_secs(opts.seconds);
    let mut rng = Rng(opts.seed | 1);

    let mut pool: Vec<Vec<u8>> = read_dir_files(&opts.corpus.join(name))
        .into_iter()
        .map(|(_, d)| d)
        .collect();
    let from_disk = pool.len();
    pool.extend(
        sluice_fuzz::seeds::all()
            .into_iter()
            .filter(|(t, _, _)| *t == name)
            .map(|(_, _, d)| d),
    );
    let mut seen = std::collections::HashSet::new();
    pool.retain(|d| seen.insert(d.clone()));
    let seeds = pool.len();
    let fail = |input: &[u8], msg: String| {
        let path = save_artifact("crash", input);
        eprintln!("\n==smoke== {name}: PANIC on input of {} bytes", input.len());
        eprintln!("==smoke== saved to {}", path.display());
        eprintln!("==smoke== hex: {}", hex_prefix(input, 512));
        eprintln!("==smoke== {msg}");
        eprintln!(
            "==smoke== reproduce: cargo run --release --no-default-features --bin smoke -- --repro {name} {}",
            path.display()
        );
    };

    let mut runs: u64 = 0;
    for input in pool.clone() {
        runs += 1;
        if let Err(msg) = run_one(f, &input) {
            fail(&input, msg);
            return false;
        }
    }
    // Mutated inputs are kept (without coverage feedback, at random) in a bounded ring after
    // the seeds, so mutations stack up over time.
    let keep_max = 512;
    let mut next_slot = 0usize;
    while Instant::now() < deadline {
        for _ in 0..256 {
            let input = if rng.chance(16) {
                random_input(&mut rng)
            } else {
                let mut x = pool[rng.below(pool.len())].clone();
                mutate(&mut rng, &mut x, &pool);
                x
            };
            runs += 1;
            if let Err(msg) = run_one(f, &input) {
                fail(&input, msg);
                return false;
            }
            if rng.chance(8) && !input.is_empty() {
                if pool.len() < seeds + keep_max {
                    pool.push(input);
                } else {
                    pool[seeds + next_slot] = input;
                    next_slot = (next_slot + 1) % keep_max;
                }
            }
        }
    }
    println!(
        "==smoke== {name}: ok, {runs} inputs in {:.1}s ({seeds} distinct seeds, {from_disk} files in {}), seed {}",
        t0.elapsed().as_secs_f64(),
        opts.corpus.join(name).display(),
        opts.seed
    );
    true
}

fn usage() -> ! {
    eprintln!(
        "usage: smoke [--seconds N] [--seed S] [--corpus DIR] [--artifacts DIR] [TARGET...]\n       smoke --repro TARGET FILE...\n       smoke --write-corpus [DIR]\n       smoke --typed-frame INPUT OUT\n       smoke --list"
    );
    std::process::exit(2);
}

fn main() {
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut args = std::env::args().skip(1);
    let mut opts = Opts {
        seconds: 20,
        seed: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1),
        corpus: manifest.join("corpus"),
        artifacts: manifest.join("artifacts"),
        targets: Vec::new(),
    };
    while let Some(a) = args.next() {
        match a.as_str() {
            "--list" => {
                for (n, _) in sluice_fuzz::TARGETS {
                    println!("{n}");
                }
                return;
            }
            "--write-corpus" => {
                let dir = args.next().map(PathBuf::from).unwrap_or_else(|| manifest.join("corpus"));
                for (t, name, data) in sluice_fuzz::seeds::all() {
                    let d = dir.join(t);
                    std::fs::create_dir_all(&d).expect("create corpus dir");
                    std::fs::write(d.join(&name), &data).expect("write seed");
                    println!("{t}/{name}: {} bytes", data.len());
                }
                return;
            }
            "--repro" => {
                let t = args.next().unwrap_or_else(|| usage());
                let f = sluice_fuzz::target(&t).unwrap_or_else(|| usage());
                let mut failed = false;
                for file in args.by_ref() {
                    let data = std::fs::read(&file).expect("read input");
                    println!("==smoke== {t} on {file} ({} bytes)", data.len());
                    // Default panic hook: message and (with RUST_BACKTRACE=1) backtrace.
                    if std::panic::catch_unwind(|| f(&data)).is_err() {
                        failed = true;
                    }
                }
                std::process::exit(i32::from(failed));
            }
            "--typed-frame" => {
                // The frame decode_request's second view makes of a libFuzzer input.
                let (Some(inp), Some(out)) = (args.next(), args.next()) else { usage() };
                let data = std::fs::read(&inp).expect("read input");
                let frame = sluice_fuzz::targets::typed_frame(&data).unwrap_or_default();
                std::fs::write(&out, &frame).expect("write frame");
                println!("{}", hex_prefix(&frame, 4096));
                return;
            }
            "--seconds" => opts.seconds = args.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| usage()),
            "--seed" => opts.seed = args.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| usage()),
            "--corpus" => opts.corpus = args.next().map(PathBuf::from).unwrap_or_else(|| usage()),
            "--artifacts" => opts.artifacts = args.next().map(PathBuf::from).unwrap_or_else(|| usage()),
            "-h" | "--help" => usage(),
            t if !t.starts_with('-') => opts.targets.push(t.to_string()),
            _ => usage(),
        }
    }
    if opts.targets.is_empty() {
        opts.targets = sluice_fuzz::TARGETS.iter().map(|(n, _)| n.to_string()).collect();
    }
    if opts.targets.len() > 1 {
        // ARTIFACT_DIR is process-wide; one target per process keeps an abort (oom/timeout)
        // from taking the other targets with it. scripts/fuzz runs one target per process.
        let mut ok = true;
        let exe = std::env::current_exe().expect("current exe");
        for t in &opts.targets {
            let status = std::process::Command::new(&exe)
                .args(["--seconds", &opts.seconds.to_string(), "--seed", &opts.seed.to_string()])
                .arg("--corpus")
                .arg(&opts.corpus)
                .arg("--artifacts")
                .arg(&opts.artifacts)
                .arg(t)
                .status()
                .expect("spawn smoke");
            ok &= status.success();
        }
        std::process::exit(i32::from(!ok));
    }
    let name = opts.targets[0].clone();
    let Some(f) = sluice_fuzz::target(&name) else {
        eprintln!("unknown target {name}; known: {:?}", sluice_fuzz::TARGETS.iter().map(|t| t.0).collect::<Vec<_>>());
        std::process::exit(2);
    };
    install_quiet_panic_hook();
    start_watchdog(Duration::from_secs(env_num("SLUICE_FUZZ_TIMEOUT_SECS", 10) as u64));
    MALLOC_LIMIT.store(limit_mb().saturating_mul(1 << 20), Ordering::SeqCst);
    let ok = fuzz_target(&name, f, &opts);
    std::process::exit(i32::from(!ok));
}

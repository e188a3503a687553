//! `sluice volume check PATH`: what a mount will do to a log directory.
//!
//! Everything happens in a hidden scratch directory `PATH/.sluice-volume-check-<id>` (ignored
//! by log loading) that is removed at the end, also on error (it may linger only while a
//! silly-renamed file of the test itself is still being released).
//!
//! Measured: whether a file unlinked while open is silly-renamed (`.nfs*`, `.fuse_hidden*`)
//! so that its directory cannot be removed until the last close; fsync latency (p50/p99) and
//! rate of small appends; what an fdatasync costs after a batch-sized append against after a
//! rewrite in place (the difference is the metadata the file system writes when a file
//! grows); sequential write and read throughput.

use std::fmt;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How much to measure.
#[derive(Clone, Copy, Debug)]
pub struct VolumeCheckOptions {
    /// Bytes written (and read back) for the throughput test.
    pub throughput_bytes: u64,
    /// Number of 4 KiB append + fsync rounds (the test also stops after `fsync_time_max`).
    pub fsync_rounds: usize,
    pub fsync_time_max: Duration,
    /// Rounds of each [`SYNC_WRITE_BYTES`] write + fdatasync cost test (appending, then
    /// rewriting in place); each also stops after `fsync_time_max`.
    pub sync_cost_rounds: usize,
}

impl Default for VolumeCheckOptions {
    fn default() -> Self {
        VolumeCheckOptions {
            throughput_bytes: 256 * 1024 * 1024,
            fsync_rounds: 500,
            fsync_time_max: Duration::from_secs(5),
            sync_cost_rounds: 400,
        }
    }
}

/// What happened to a file unlinked while open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnlinkBehaviour {
    /// POSIX: the name is gone at once and the directory can be removed.
    Posix,
    /// The file was renamed to `name` (NFS silly rename, FUSE hide) and the directory could
    /// not be removed until the last close; `cleared` says whether the leftover disappeared
    /// within the wait after the close.
    SillyRename { name: String, cleared: bool },
    /// The directory could not be removed for another reason.
    Other(String),
}

/// The measurements and the verdict.
#[derive(Clone, Debug)]
pub struct VolumeReport {
    pub path: PathBuf,
    pub unlink: UnlinkBehaviour,
    pub fsync_rounds: usize,
    pub fsync_p50_us: u64,
    pub fsync_p99_us: u64,
    pub fsync_per_sec: f64,
    /// [`SYNC_WRITE_BYTES`] appended to a growing file, then fdatasync.
    pub append_sync: SyncCost,
    /// [`SYNC_WRITE_BYTES`] written over data already on storage, then fdatasync.
    pub rewrite_sync: SyncCost,
    pub write_bytes: u64,
    pub write_mib_per_sec: f64,
    pub read_mib_per_sec: f64,
}

/// The write size of the sync cost test: the producer batch size of the benchmark drivers.
pub const SYNC_WRITE_BYTES: usize = 128 * 1024;

/// Latency and CPU time of one write + fdatasync round.
#[derive(Clone, Copy, Debug, Default)]
pub struct SyncCost {
    pub rounds: usize,
    pub p50_us: u64,
    pub p99_us: u64,
    /// CPU time of the calling thread per round (write and fdatasync), in microseconds.
    pub cpu_us: f64,
}

fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// `rounds` writes of [`SYNC_WRITE_BYTES`], each followed by fdatasync: appended to a new file,
/// or (`rewrite`) over a file of that size written and synced beforehand.
fn sync_cost(
    file: &Path,
    rounds: usize,
    time_max: Duration,
    rewrite: bool,
) -> io::Result<SyncCost> {
    let rounds = rounds.max(1);
    let block = vec![0x3cu8; SYNC_WRITE_BYTES];
    let f = File::create(file)?;
    if rewrite {
        let mut w = &f;
        for _ in 0..rounds {
            w.write_all(&block)?;
        }
        f.sync_all()?;
    }
    let mut lat = Vec::with_capacity(rounds);
    let mut cpu = Duration::ZERO;
    let started = Instant::now();
    let mut pos: u64 = 0;
    while lat.len() < rounds && started.elapsed() < time_max {
        let (t, c) = (Instant::now(), thread_cpu());
        f.write_all_at(&block, pos)?;
        f.sync_data()?;
        lat.push(t.elapsed());
        cpu += thread_cpu().saturating_sub(c);
        pos += SYNC_WRITE_BYTES as u64;
    }
    let n = lat.len();
    lat.sort_unstable();
    Ok(SyncCost {
        rounds: n,
        p50_us: percentile(&lat, 0.50),
        p99_us: percentile(&lat, 0.99),
        cpu_us: cpu.as_secs_f64() * 1e6 / n.max(1) as f64,
    })
}

/// Removes the scratch directory when dropped (best effort, retried briefly for leftovers).
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        for _ in 0..50 {
            match std::fs::remove_dir_all(&self.0) {
                Ok(()) => return,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return,
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
        eprintln!(
            "warning: could not remove {}; remove it by hand",
            self.0.display()
        );
    }
}

fn silly_rename_test(dir: &Path) -> io::Result<UnlinkBehaviour> {
    let sub = dir.join("unlink-test");
    std::fs::create_dir(&sub)?;
    let file = sub.join("segment.log");
    let mut f = File::create(&file)?;
    f.write_all(b"held open while unlinked")?;
    f.sync_all()?;
    std::fs::remove_file(&file)?;
    let leftovers: Vec<String> = std::fs::read_dir(&sub)?
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .collect();
    let rmdir_while_open = std::fs::remove_dir(&sub);
    drop(f);
    match (rmdir_while_open, leftovers.first()) {
        (Ok(()), _) => Ok(UnlinkBehaviour::Posix),
        (Err(_), Some(name)) => {
            // The NFS client / FUSE removes the leftover on last close; give it a moment.
            let deadline = Instant::now() + Duration::from_secs(5);
            let cleared = loop {
                match std::fs::remove_dir(&sub) {
                    Ok(()) => break true,
                    Err(_) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    Err(_) => break false,
                }
            };
            Ok(UnlinkBehaviour::SillyRename {
                name: name.clone(),
                cleared,
            })
        }
        (Err(e), None) => Ok(UnlinkBehaviour::Other(e.to_string())),
    }
}

fn percentile(sorted: &[Duration], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    u64::try_from(sorted[idx.min(sorted.len() - 1)].as_micros()).unwrap_or(u64::MAX)
}

/// Run every test in a scratch directory under `path`.
pub fn check_volume(path: &Path, opts: VolumeCheckOptions) -> io::Result<VolumeReport> {
    if !path.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{} is not a directory", path.display()),
        ));
    }
    let scratch = Scratch(path.join(format!(
        ".sluice-volume-check-{}",
        uuid::Uuid::new_v4().simple()
    )));
    std::fs::create_dir(&scratch.0)?;

    let unlink = silly_rename_test(&scratch.0)?;

    // fsync latency: 4 KiB appends, each followed by fdatasync (what flush.messages=1 does).
    let mut lat = Vec::with_capacity(opts.fsync_rounds);
    {
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(scratch.0.join("fsync.test"))?;
        let block = vec![0x5au8; 4096];
        let started = Instant::now();
        while lat.len() < opts.fsync_rounds.max(1) && started.elapsed() < opts.fsync_time_max {
            f.write_all(&block)?;
            let t = Instant::now();
            f.sync_data()?;
            lat.push(t.elapsed());
        }
    }
    let total: Duration = lat.iter().sum();
    let fsync_per_sec = if total.is_zero() {
        0.0
    } else {
        lat.len() as f64 / total.as_secs_f64()
    };
    lat.sort_unstable();

    let append_sync = sync_cost(
        &scratch.0.join("append.test"),
        opts.sync_cost_rounds,
        opts.fsync_time_max,
        false,
    )?;
    let rewrite_sync = sync_cost(
        &scratch.0.join("rewrite.test"),
        opts.sync_cost_rounds,
        opts.fsync_time_max,
        true,
    )?;

    // Sequential write (1 MiB writes, fsync at the end) and read back.
    let data_path = scratch.0.join("throughput.test");
    let chunk = vec![0xa5u8; 1024 * 1024];
    let t = Instant::now();
    {
        let mut f = File::create(&data_path)?;
        let mut left = opts.throughput_bytes;
        while left > 0 {
            let n = usize::try_from(left).unwrap_or(usize::MAX).min(chunk.len());
            f.write_all(&chunk[..n])?;
            left -= n as u64;
        }
        f.sync_all()?;
    }
    let write_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    {
        let mut f = File::open(&data_path)?;
        let mut buf = vec![0u8; 1024 * 1024];
        while f.read(&mut buf)? > 0 {}
    }
    let read_secs = t.elapsed().as_secs_f64();
    let mib = opts.throughput_bytes as f64 / (1024.0 * 1024.0);
    let rate = |secs: f64| if secs > 0.0 { mib / secs } else { 0.0 };
    let report = VolumeReport {
        path: path.to_path_buf(),
        unlink,
        fsync_rounds: lat.len(),
        fsync_p50_us: percentile(&lat, 0.50),
        fsync_p99_us: percentile(&lat, 0.99),
        fsync_per_sec,
        append_sync,
        rewrite_sync,
        write_bytes: opts.throughput_bytes,
        write_mib_per_sec: rate(write_secs),
        read_mib_per_sec: rate(read_secs),
    };
    drop(scratch);
    Ok(report)
}

/// An append's fdatasync taking longer than this many rewrites' gets a line in the verdict.
const APPEND_SYNC_PREMIUM: f64 = 1.3;

/// fsync p99 above this makes acks=all with a flush per message noticeably slow.
const SLOW_FSYNC_P99_US: u64 = 20_000;

impl VolumeReport {
    /// How many times longer (p50) an fdatasync after an append takes than one after a rewrite
    /// in place, when that is more than [`APPEND_SYNC_PREMIUM`] (None otherwise).
    pub fn append_sync_premium(&self) -> Option<f64> {
        let (a, o) = (
            self.append_sync.p50_us as f64,
            self.rewrite_sync.p50_us as f64,
        );
        (o > 0.0 && a / o > APPEND_SYNC_PREMIUM).then_some(a / o)
    }

    /// True when the mount silly-renames open files (NFS without preserve-unlink, FUSE).
    pub fn silly_renames(&self) -> bool {
        matches!(self.unlink, UnlinkBehaviour::SillyRename { .. })
    }
}

impl fmt::Display for VolumeReport {
    /// The report `sluice volume check` prints: the measurements, then the verdict.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "volume check of {}", self.path.display())?;
        self.fmt_unlink(f)?;
        self.fmt_measurements(f)?;
        writeln!(f, "verdict:")?;
        self.fmt_unlink_verdict(f)?;
        self.fmt_fsync_verdict(f)?;
        self.fmt_append_sync_verdict(f)
    }
}

impl VolumeReport {
    /// The line of what an unlink of an open file did.
    fn fmt_unlink(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.unlink {
            UnlinkBehaviour::Posix => writeln!(
                f,
                "  unlink while open:  POSIX (name gone at once, directory removable)"
            ),
            UnlinkBehaviour::SillyRename { name, cleared } => writeln!(
                f,
                "  unlink while open:  SILLY RENAME to {name}; directory not removable until last close{}",
                if *cleared { "" } else { " (leftover still present 5 s after close)" }
            ),
            UnlinkBehaviour::Other(e) => {
                writeln!(f, "  unlink while open:  directory not removable: {e}")
            }
        }
    }

    /// The lines of the timed measurements: fsync latency, the sync after an append and
    /// after a rewrite, sequential write and read throughput.
    fn fmt_measurements(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "  fsync (4 KiB):      p50 {:.2} ms, p99 {:.2} ms, {:.0} fsyncs/s ({} rounds)",
            self.fsync_p50_us as f64 / 1000.0,
            self.fsync_p99_us as f64 / 1000.0,
            self.fsync_per_sec,
            self.fsync_rounds
        )?;
        for (what, c) in [
            ("sync after append:", &self.append_sync),
            ("sync after rewrite:", &self.rewrite_sync),
        ] {
            writeln!(
                f,
                "  {what:<20}p50 {:.2} ms, p99 {:.2} ms, {:.0} us CPU ({} KiB write + fdatasync, {} rounds)",
                c.p50_us as f64 / 1000.0,
                c.p99_us as f64 / 1000.0,
                c.cpu_us,
                SYNC_WRITE_BYTES / 1024,
                c.rounds
            )?;
        }
        writeln!(
            f,
            "  sequential write:   {:.1} MiB/s ({} MiB, fsync included)",
            self.write_mib_per_sec,
            self.write_bytes / (1024 * 1024)
        )?;
        writeln!(
            f,
            "  sequential read:    {:.1} MiB/s (may be served from the client's page cache)",
            self.read_mib_per_sec
        )
    }

    /// The verdict on the unlink semantics: what deletions and moves do on this mount.
    fn fmt_unlink_verdict(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.unlink {
            UnlinkBehaviour::Posix => writeln!(
                f,
                "  - unlink semantics are POSIX: deletions and partition moves complete at once."
            ),
            UnlinkBehaviour::SillyRename { cleared, .. } => {
                writeln!(f, "  - this mount silly-renames files unlinked while open (NFS without server-side")?;
                writeln!(f, "    preserve-unlink, or FUSE). Apache Kafka takes a log directory offline when such")?;
                writeln!(f, "    a directory cannot be removed; Sluice defers and retries the removal (safe).")?;
                if !cleared {
                    writeln!(f, "  - the leftover outlived the last close: expect .nfs*/.fuse_hidden* files that")?;
                    writeln!(f, "    Sluice reclaims in the background.")?;
                }
                Ok(())
            }
            UnlinkBehaviour::Other(_) => writeln!(
                f,
                "  - directories cannot be removed reliably here; Sluice retries removals, but check the mount."
            ),
        }
    }

    /// The verdict on fsync latency (p99 over [`SLOW_FSYNC_P99_US`]: a flush per message is
    /// latency bound).
    fn fmt_fsync_verdict(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.fsync_p99_us > SLOW_FSYNC_P99_US {
            writeln!(
                f,
                "  - fsync p99 is high: acks=all with flush.messages=1 will be latency bound;"
            )?;
            writeln!(
                f,
                "    leave flushing to group commit (flush.ms) or use a faster volume."
            )
        } else {
            writeln!(
                f,
                "  - fsync latency is fine for flush-per-message (group-committed) durability."
            )
        }
    }

    /// The verdict on the cost of a sync after an append, printed only when it exceeds a
    /// rewrite's by [`APPEND_SYNC_PREMIUM`] ([`VolumeReport::append_sync_premium`]).
    fn fmt_append_sync_verdict(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(x) = self.append_sync_premium() {
            let cpu = self.append_sync.cpu_us / self.rewrite_sync.cpu_us.max(1.0);
            writeln!(
                f,
                "  - an fdatasync after an append takes {x:.1}x the time ({cpu:.1}x the CPU) of one"
            )?;
            for line in [
                "after a rewrite in place: the file system commits metadata (size, allocation)",
                "with each sync of a growing file, to its journal or in place. Segments only",
                "grow, so a flush per batch (flush.messages=1) pays it every time; a flush.ms",
                "interval pays it less often.",
            ] {
                writeln!(f, "    {line}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn check_cleans_up_and_reports_posix_on_a_local_dir() {
        let tmp = tempfile::tempdir().unwrap();
        let r = check_volume(
            tmp.path(),
            VolumeCheckOptions {
                throughput_bytes: 2 * 1024 * 1024,
                fsync_rounds: 5,
                fsync_time_max: Duration::from_secs(2),
                sync_cost_rounds: 5,
            },
        )
        .unwrap();
        assert_eq!(r.unlink, UnlinkBehaviour::Posix);
        assert!(r.fsync_rounds >= 1);
        assert!(r.append_sync.rounds >= 1 && r.rewrite_sync.rounds >= 1);
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
        assert!(r.to_string().contains("verdict"));
    }

    fn report(unlink: UnlinkBehaviour, fsync_p99_us: u64, append_p50_us: u64) -> VolumeReport {
        VolumeReport {
            path: PathBuf::from("/vol"),
            unlink,
            fsync_rounds: 100,
            fsync_p50_us: 1500,
            fsync_p99_us,
            fsync_per_sec: 640.0,
            append_sync: SyncCost {
                rounds: 20,
                p50_us: append_p50_us,
                p99_us: 9000,
                cpu_us: 300.0,
            },
            rewrite_sync: SyncCost {
                rounds: 20,
                p50_us: 2000,
                p99_us: 4000,
                cpu_us: 100.0,
            },
            write_bytes: 256 * 1024 * 1024,
            write_mib_per_sec: 812.34,
            read_mib_per_sec: 1999.95,
        }
    }

    /// The report as `sluice volume check` prints it, every verdict line included: POSIX
    /// unlinks with fast syncs, then a silly-renaming mount whose leftover stayed, with slow
    /// fsyncs and a costly append sync.
    #[test]
    fn the_report_prints_measurements_then_verdicts() {
        let fast = report(UnlinkBehaviour::Posix, 3000, 2100);
        let slow = report(
            UnlinkBehaviour::SillyRename {
                name: ".nfs0001".into(),
                cleared: false,
            },
            25_000,
            5000,
        );
        let cleared = report(
            UnlinkBehaviour::SillyRename {
                name: ".fuse_hidden0002".into(),
                cleared: true,
            },
            3000,
            2100,
        );
        let other = report(
            UnlinkBehaviour::Other("Directory not empty".into()),
            3000,
            2100,
        );
        let want = [
        concat!(
            "volume check of /vol\n",
            "  unlink while open:  POSIX (name gone at once, directory removable)\n",
            "  fsync (4 KiB):      p50 1.50 ms, p99 3.00 ms, 640 fsyncs/s (100 rounds)\n",
            "  sync after append:  p50 2.10 ms, p99 9.00 ms, 300 us CPU (128 KiB write + fdatasync, 20 rounds)\n",
            "  sync after rewrite: p50 2.00 ms, p99 4.00 ms, 100 us CPU (128 KiB write + fdatasync, 20 rounds)\n",
            "  sequential write:   812.3 MiB/s (256 MiB, fsync included)\n",
            "  sequential read:    2000.0 MiB/s (may be served from the client's page cache)\n",
            "verdict:\n",
            "  - unlink semantics are POSIX: deletions and partition moves complete at once.\n",
            "  - fsync latency is fine for flush-per-message (group-committed) durability.\n",
        ),
        concat!(
            "volume check of /vol\n",
            "  unlink while open:  SILLY RENAME to .nfs0001; directory not removable until last close (leftover still present 5 s after close)\n",
            "  fsync (4 KiB):      p50 1.50 ms, p99 25.00 ms, 640 fsyncs/s (100 rounds)\n",
            "  sync after append:  p50 5.00 ms, p99 9.00 ms, 300 us CPU (128 KiB write + fdatasync, 20 rounds)\n",
            "  sync after rewrite: p50 2.00 ms, p99 4.00 ms, 100 us CPU (128 KiB write + fdatasync, 20 rounds)\n",
            "  sequential write:   812.3 MiB/s (256 MiB, fsync included)\n",
            "  sequential read:    2000.0 MiB/s (may be served from the client's page cache)\n",
            "verdict:\n",
            "  - this mount silly-renames files unlinked while open (NFS without server-side\n",
            "    preserve-unlink, or FUSE). Apache Kafka takes a log directory offline when such\n",
            "    a directory cannot be removed; Sluice defers and retries the removal (safe).\n",
            "  - the leftover outlived the last close: expect .nfs*/.fuse_hidden* files that\n",
            "    Sluice reclaims in the background.\n",
            "  - fsync p99 is high: acks=all with flush.messages=1 will be latency bound;\n",
            "    leave flushing to group commit (flush.ms) or use a faster volume.\n",
            "  - an fdatasync after an append takes 2.5x the time (3.0x the CPU) of one\n",
            "    after a rewrite in place: the file system commits metadata (size, allocation)\n",
            "    with each sync of a growing file, to its journal or in place. Segments only\n",
            "    grow, so a flush per batch (flush.messages=1) pays it every time; a flush.ms\n",
            "    interval pays it less often.\n",
        ),
        concat!(
            "volume check of /vol\n",
            "  unlink while open:  SILLY RENAME to .fuse_hidden0002; directory not removable until last close\n",
            "  fsync (4 KiB):      p50 1.50 ms, p99 3.00 ms, 640 fsyncs/s (100 rounds)\n",
            "  sync after append:  p50 2.10 ms, p99 9.00 ms, 300 us CPU (128 KiB write + fdatasync, 20 rounds)\n",
            "  sync after rewrite: p50 2.00 ms, p99 4.00 ms, 100 us CPU (128 KiB write + fdatasync, 20 rounds)\n",
            "  sequential write:   812.3 MiB/s (256 MiB, fsync included)\n",
            "  sequential read:    2000.0 MiB/s (may be served from the client's page cache)\n",
            "verdict:\n",
            "  - this mount silly-renames files unlinked while open (NFS without server-side\n",
            "    preserve-unlink, or FUSE). Apache Kafka takes a log directory offline when such\n",
            "    a directory cannot be removed; Sluice defers and retries the removal (safe).\n",
            "  - fsync latency is fine for flush-per-message (group-committed) durability.\n",
        ),
        concat!(
            "volume check of /vol\n",
            "  unlink while open:  directory not removable: Directory not empty\n",
            "  fsync (4 KiB):      p50 1.50 ms, p99 3.00 ms, 640 fsyncs/s (100 rounds)\n",
            "  sync after append:  p50 2.10 ms, p99 9.00 ms, 300 us CPU (128 KiB write + fdatasync, 20 rounds)\n",
            "  sync after rewrite: p50 2.00 ms, p99 4.00 ms, 100 us CPU (128 KiB write + fdatasync, 20 rounds)\n",
            "  sequential write:   812.3 MiB/s (256 MiB, fsync included)\n",
            "  sequential read:    2000.0 MiB/s (may be served from the client's page cache)\n",
            "verdict:\n",
            "  - directories cannot be removed reliably here; Sluice retries removals, but check the mount.\n",
            "  - fsync latency is fine for flush-per-message (group-committed) durability.\n",
        ),
        ];
        for (r, want) in [fast, slow, cleared, other].iter().zip(want) {
            assert_eq!(r.to_string(), want);
        }
    }
}

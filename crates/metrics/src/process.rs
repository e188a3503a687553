//! The `process_*` metrics every Prometheus client library exports, read from `/proc/self`
//! (Linux), plus the process's storage I/O (`/proc/self/io`). Where a file cannot be read the
//! metric is left out rather than reported as zero.

use crate::exposition::{Exposition, Kind};
use crate::names;

/// One reading of the process's counters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ProcessStats {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<u64>,
    pub virtual_bytes: Option<u64>,
    pub open_fds: Option<u64>,
    pub max_fds: Option<u64>,
    pub start_time_seconds: Option<f64>,
    /// Bytes this process caused to be read from / written to storage (`/proc/self/io`).
    pub storage_read_bytes: Option<u64>,
    pub storage_write_bytes: Option<u64>,
}

/// Fields of `/proc/PID/stat` after the command name (which may hold spaces and parentheses):
/// the returned slice starts at field 3 (`state`).
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().collect())
}

/// Parse `/proc/self/stat` and `/proc/self/statm` text (pure, for tests).
pub fn parse_stat(
    stat: &str,
    statm: &str,
    ticks: u64,
    page: u64,
    boot_time: Option<u64>,
) -> ProcessStats {
    let mut s = ProcessStats::default();
    if let Some(f) = stat_fields(stat) {
        // Fields 14 (utime), 15 (stime), 22 (starttime), 23 (vsize), counted from 1; f[0] is 3.
        let field = |n: usize| f.get(n - 3).and_then(|v| v.parse::<u64>().ok());
        if let (Some(u), Some(st)) = (field(14), field(15)) {
            s.cpu_seconds = Some((u + st) as f64 / ticks as f64);
        }
        if let (Some(start), Some(boot)) = (field(22), boot_time) {
            s.start_time_seconds = Some(boot as f64 + start as f64 / ticks as f64);
        }
        s.virtual_bytes = field(23);
    }
    let mut m = statm.split_whitespace();
    let _size = m.next();
    s.resident_bytes = m
        .next()
        .and_then(|v| v.parse::<u64>().ok())
        .map(|p| p * page);
    s
}

/// `read_bytes` and `write_bytes` of `/proc/self/io` text.
pub fn parse_io(io: &str) -> (Option<u64>, Option<u64>) {
    let get = |key: &str| {
        io.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse::<u64>().ok())
    };
    (get("read_bytes:"), get("write_bytes:"))
}

/// Read the process's counters now.
pub fn read() -> ProcessStats {
    let ticks = rustix::param::clock_ticks_per_second().max(1);
    let page = rustix::param::page_size() as u64;
    let boot_time = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse::<u64>().ok())
    });
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let mut s = parse_stat(&stat, &statm, ticks, page, boot_time);
    s.open_fds = std::fs::read_dir("/proc/self/fd")
        .ok()
        .map(|d| d.count() as u64);
    s.max_fds = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    if let Ok(io) = std::fs::read_to_string("/proc/self/io") {
        (s.storage_read_bytes, s.storage_write_bytes) = parse_io(&io);
    }
    s
}

/// Write the process families.
pub fn expose(e: &mut Exposition, s: &ProcessStats) {
    let mut f = |name: &str, kind: Kind, help: &str, v: Option<f64>| {
        if let Some(v) = v {
            e.single(name, kind, help, v);
        }
    };
    f(
        names::PROCESS_CPU_SECONDS,
        Kind::Counter,
        "Total user and system CPU time spent in seconds.",
        s.cpu_seconds,
    );
    f(
        names::PROCESS_RESIDENT_MEMORY,
        Kind::Gauge,
        "Resident memory size in bytes.",
        s.resident_bytes.map(|v| v as f64),
    );
    f(
        names::PROCESS_VIRTUAL_MEMORY,
        Kind::Gauge,
        "Virtual memory size in bytes.",
        s.virtual_bytes.map(|v| v as f64),
    );
    f(
        names::PROCESS_OPEN_FDS,
        Kind::Gauge,
        "Number of open file descriptors.",
        s.open_fds.map(|v| v as f64),
    );
    f(
        names::PROCESS_MAX_FDS,
        Kind::Gauge,
        "Maximum number of open file descriptors.",
        s.max_fds.map(|v| v as f64),
    );
    f(
        names::PROCESS_START_TIME,
        Kind::Gauge,
        "Start time of the process since unix epoch in seconds.",
        s.start_time_seconds,
    );
    f(
        names::STORAGE_READ_BYTES,
        Kind::Counter,
        "Bytes the broker process caused to be read from storage (/proc/self/io read_bytes; page-cache hits are not counted).",
        s.storage_read_bytes.map(|v| v as f64),
    );
    f(
        names::STORAGE_WRITE_BYTES,
        Kind::Counter,
        "Bytes the broker process caused to be written to storage (/proc/self/io write_bytes).",
        s.storage_write_bytes.map(|v| v as f64),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_with_spaces_in_the_command_name() {
        let stat = "1234 (tokio (rt) x) S 1 1234 1234 0 -1 4194560 2000 0 0 0 250 50 0 0 20 0 \
                    5 0 1000 104857600 512 18446744073709551615";
        let s = parse_stat(
            stat,
            "25600 512 100 1 0 300 0",
            100,
            4096,
            Some(1_700_000_000),
        );
        assert_eq!(s.cpu_seconds, Some(3.0));
        assert_eq!(s.start_time_seconds, Some(1_700_000_010.0));
        assert_eq!(s.virtual_bytes, Some(104_857_600));
        assert_eq!(s.resident_bytes, Some(512 * 4096));
    }

    #[test]
    fn io_counters() {
        let io = "rchar: 10\nwchar: 20\nsyscr: 1\nsyscw: 2\nread_bytes: 4096\nwrite_bytes: 8192\ncancelled_write_bytes: 0\n";
        assert_eq!(parse_io(io), (Some(4096), Some(8192)));
        assert_eq!(parse_io(""), (None, None));
    }

    #[test]
    fn reading_this_process_finds_its_cpu_and_memory() {
        let s = read();
        if cfg!(target_os = "linux") {
            assert!(s.cpu_seconds.is_some());
            assert!(s.resident_bytes.unwrap_or(0) > 0);
            assert!(s.open_fds.unwrap_or(0) > 0);
        }
    }
}

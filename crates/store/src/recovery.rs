//! What the opens of this process recovered: the segment data they read and validated after
//! an unclean shutdown or at a takeover, and the time those opens took, for `/metrics`
//! (bytes over seconds is the rate recovery ran at).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

static BYTES: AtomicU64 = AtomicU64::new(0);
static NANOS: AtomicU64 = AtomicU64::new(0);

/// Totals since the process started.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RecoveryTotals {
    /// Bytes of segment data validated by opens that recovered.
    pub bytes: u64,
    /// Seconds those opens took, whole (listing, validation, rebuilt state).
    pub seconds: f64,
}

/// Count an open that validated `bytes` and took `took`.
pub(crate) fn add(bytes: u64, took: Duration) {
    BYTES.fetch_add(bytes, Ordering::Relaxed);
    NANOS.fetch_add(
        u64::try_from(took.as_nanos()).unwrap_or(u64::MAX),
        Ordering::Relaxed,
    );
}

/// What the opens of this process recovered so far.
pub fn totals() -> RecoveryTotals {
    RecoveryTotals {
        bytes: BYTES.load(Ordering::Relaxed),
        seconds: NANOS.load(Ordering::Relaxed) as f64 / 1e9,
    }
}

/// When the recovery point follows the log end (`Log::advance_recovery_point`): after this
/// many bytes appended to a partition's active segment, at most once per interval. 0 bytes:
/// off (the recovery point then moves at rolls, idle flushes and flush settings only).
static MOVE_BYTES: AtomicU64 = AtomicU64::new(0);
static MOVE_INTERVAL_MS: AtomicU64 = AtomicU64::new(1000);

/// Set how the recovery point follows the log end, for every log of this process: after
/// `min_bytes` appended to a partition's active segment (0: never), at most once per
/// `interval_ms`. The broker sets it at start from `sluice.log.recovery.point.*`.
pub fn set_follow_policy(min_bytes: u64, interval_ms: u64) {
    MOVE_BYTES.store(min_bytes, Ordering::Relaxed);
    MOVE_INTERVAL_MS.store(interval_ms, Ordering::Relaxed);
}

/// The policy [`set_follow_policy`] set: (min bytes, interval in ms), None when off.
pub(crate) fn follow_policy() -> Option<(u64, i64)> {
    let bytes = MOVE_BYTES.load(Ordering::Relaxed);
    let interval = MOVE_INTERVAL_MS.load(Ordering::Relaxed);
    (bytes > 0).then(|| (bytes, i64::try_from(interval).unwrap_or(i64::MAX)))
}

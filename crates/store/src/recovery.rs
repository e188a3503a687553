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

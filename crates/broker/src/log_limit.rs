//! Log lines that a flood must not multiply: at most one a second per kind (failed
//! authentications, authorization denials), the next line saying how many were left out.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// At most one log line a second of one kind.
#[derive(Debug)]
pub struct LogLimiter {
    /// What is counted, for the suffix: "failed authentication(s)".
    what: &'static str,
    last: parking_lot::Mutex<Option<Instant>>,
    left_out: AtomicU64,
}

/// How often a limited kind of line may be logged.
const LOG_EVERY: Duration = Duration::from_secs(1);

impl LogLimiter {
    pub const fn new(what: &'static str) -> LogLimiter {
        LogLimiter {
            what,
            last: parking_lot::Mutex::new(None),
            left_out: AtomicU64::new(0),
        }
    }

    /// Some(suffix) if a line may be logged now (the suffix counts those left out since the
    /// last line; empty when none were).
    pub fn admit(&self) -> Option<String> {
        let now = Instant::now();
        let mut last = self.last.lock();
        if last.is_some_and(|t| now.duration_since(t) < LOG_EVERY) {
            self.left_out.fetch_add(1, Ordering::Relaxed);
            return None;
        }
        *last = Some(now);
        Some(match self.left_out.swap(0, Ordering::Relaxed) {
            0 => String::new(),
            n => format!(" ({n} more {} since the last line)", self.what),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_a_second_and_the_next_counts_the_rest() {
        let limiter = LogLimiter::new("denial(s)");
        assert_eq!(limiter.admit().as_deref(), Some(""));
        assert_eq!(limiter.admit(), None);
        assert_eq!(limiter.admit(), None);
        *limiter.last.lock() = Some(Instant::now() - LOG_EVERY);
        assert_eq!(
            limiter.admit().as_deref(),
            Some(" (2 more denial(s) since the last line)")
        );
    }
}

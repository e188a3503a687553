//! A sleep precise to tens of microseconds, for the producers' `linger.ms`.
//!
//! tokio's timer wheel has a resolution of 1 ms and rounds a deadline up to the next tick, so
//! a batch lingering "1 ms" was sent 1-2 ms after its first record: up to a millisecond added
//! to the publish latency of every record that opened a batch, on any broker. A `timerfd`
//! (CLOCK_MONOTONIC, the clock of `Instant`) registered with tokio's reactor fires when asked
//! (within the kernel's timer slack, 50 µs by default) and costs no thread.

use std::io;
use std::os::fd::OwnedFd;

use rustix::io::Errno;
use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
    Timespec,
};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::time::Instant;

/// One timer; a task sleeps on it one deadline at a time.
#[derive(Debug)]
pub struct PreciseTimer {
    fd: AsyncFd<OwnedFd>,
}

impl PreciseTimer {
    /// A disarmed timer registered with the current tokio runtime.
    pub fn new() -> io::Result<PreciseTimer> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        // tokio 1.54 deprecates its safe constructors because a registered `T` could close
        // its descriptor behind the reactor's back; an `OwnedFd` moved into the `AsyncFd` can
        // not (it is closed only when the `AsyncFd` drops it, after deregistering), and the
        // replacement is an `unsafe fn`, which this workspace forbids.
        #[allow(deprecated)]
        let fd = AsyncFd::with_interest(fd, Interest::READABLE)?;
        Ok(PreciseTimer { fd })
    }

    /// Resolve at `deadline` (at once when it has passed). Cancel-safe: dropping the future
    /// leaves the timer armed, and the next call re-arms it and ignores a stale expiry.
    pub async fn sleep_until(&self, deadline: Instant) -> io::Result<()> {
        let now = Instant::now();
        if deadline <= now {
            return Ok(());
        }
        let d = deadline - now;
        let zero = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        let value = Timespec {
            tv_sec: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            tv_nsec: i64::from(d.subsec_nanos()),
        };
        timerfd_settime(
            self.fd.get_ref(),
            TimerfdTimerFlags::empty(),
            &Itimerspec {
                it_interval: zero,
                it_value: value,
            },
        )?;
        loop {
            let mut ready = self.fd.readable().await?;
            let mut expirations = [0u8; 8];
            match rustix::io::read(ready.get_inner(), &mut expirations) {
                // An expiry of an earlier deadline may still have been pending: the timer is
                // armed for this one, so keep waiting until it has passed.
                Ok(_) if Instant::now() >= deadline => return Ok(()),
                Ok(_) => {}
                Err(Errno::AGAIN) => ready.clear_ready(),
                Err(e) => return Err(e.into()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn resolves_at_the_deadline_not_before() {
        let t = PreciseTimer::new().unwrap();
        for us in [0u64, 150, 900, 2_500] {
            let deadline = Instant::now() + Duration::from_micros(us);
            t.sleep_until(deadline).await.unwrap();
            assert!(Instant::now() >= deadline, "woke before a {us} µs deadline");
        }
    }

    #[tokio::test]
    async fn a_cancelled_sleep_does_not_end_the_next_one_early() {
        let t = PreciseTimer::new().unwrap();
        // Armed for 1 ms, abandoned after 0.2 ms; its expiry becomes pending meanwhile.
        let _ = tokio::time::timeout(
            Duration::from_micros(200),
            t.sleep_until(Instant::now() + Duration::from_millis(1)),
        )
        .await;
        std::thread::sleep(Duration::from_millis(2));
        let deadline = Instant::now() + Duration::from_millis(20);
        t.sleep_until(deadline).await.unwrap();
        assert!(Instant::now() >= deadline);
    }
}

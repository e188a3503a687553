//! The run: create topics, start consumers and producers, warm up, optionally build and drain
//! a backlog, measure, report every interval, stop everything and delete the topics.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use hdrhistogram::Histogram;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::admin;
use crate::batch::{PayloadPool, Rng};
use crate::client::Connection;
use crate::config::{Driver, Workload};
use crate::consumer::Consumer;
use crate::producer::Producer;
use crate::stats::{Counters, Percentiles, Stats};

/// Longest wait for a new topic's partitions to have leaders.
const TOPIC_READY_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest stagger of the segment rolls ([`admin::stagger_rolls`]).
const STAGGER_TIMEOUT: Duration = Duration::from_secs(600);
/// Longest backlog build-up or drain phase.
const BACKLOG_PHASE_MAX: Duration = Duration::from_secs(3600);

/// What to run and how.
#[derive(Clone, Debug)]
pub struct Plan {
    pub workload: Workload,
    pub driver: Driver,
    pub bootstrap: String,
    pub report_interval: Duration,
    pub keep_topics: bool,
    /// With producerRate 0: run producers unthrottled (paced only by acknowledgements)
    /// instead of searching for the highest rate the consumers also sustain.
    pub unthrottled: bool,
    /// With producerRate 0: the publish latency a sustainable rate must keep, in
    /// milliseconds, at the percentile [`Plan::latency_percentile`].
    pub latency_bound_ms: f64,
    pub latency_percentile: LatencyPercentile,
    /// The brokers' segment size, to spread the partitions' rolls over time before the run
    /// ([`admin::stagger_rolls`]); 0: no stagger.
    pub stagger_segment_bytes: u64,
}

/// Default of [`Plan::latency_bound_ms`].
pub const DEFAULT_LATENCY_BOUND_MS: f64 = 100.0;

/// The publish-latency percentile that the sustainable-rate search, its windows and their
/// seconds are judged on against [`Plan::latency_bound_ms`]. Both are reported whichever
/// is judged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LatencyPercentile {
    P99,
    #[default]
    P999,
}

impl LatencyPercentile {
    pub fn parse(s: &str) -> Option<LatencyPercentile> {
        match s {
            "99" | "p99" => Some(LatencyPercentile::P99),
            "99.9" | "p99.9" | "p999" => Some(LatencyPercentile::P999),
            _ => None,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            LatencyPercentile::P99 => "p99",
            LatencyPercentile::P999 => "p99.9",
        }
    }

    /// This percentile of `p`, milliseconds.
    pub fn of(self, p: &Percentiles) -> f64 {
        match self {
            LatencyPercentile::P99 => p.p99,
            LatencyPercentile::P999 => p.p999,
        }
    }
}
/// How many windows the hold measures at most ([`Held::judge`]): it looks for the highest
/// rate a whole window holds, from the rate the search settled on, upwards while every
/// window held and downwards while none did, then between the two. Seven were too few for a
/// broker whose one-second steps pass at three times what a whole window holds (Kafka's
/// search settled at 130k-232k msg/s, its windows held at most 65k): coming down 5% a window,
/// none held.
const SETTLE_ATTEMPTS: u32 = 9;
/// How much lower the next window is after the first miss while none has held (than the
/// window's target, or than what it reached); each further miss in a row doubles it, up to
/// [`SETTLE_STEP_MAX`]. The first step bounds how precisely a hold coming down finds the
/// highest rate held when the search settled close to it: with 10% steps a run that held at
/// the settled rate and a run whose first window stalled once landed a whole step, 10%,
/// apart; the bisection that follows the first window held makes up for the larger steps.
const SETTLE_STEP: f64 = 0.05;
/// Largest step down while none has held.
const SETTLE_STEP_MAX: f64 = 0.4;
/// How much higher the next window is while every window held: the search's one-second
/// steps miss on one bad second, and then settle far below what a whole window holds (three
/// runs of one broker settled at 200k and 585k msg/s).
const SETTLE_RAISE: f64 = 0.25;
/// After this many raises in a row, each further raise is [`SETTLE_RAISE_FAST`]: searches
/// that settled at a fifth of what windows hold, after slow seconds in their first minute,
/// climbed 25% a window until the budget ran out, below the same broker's other runs: a
/// Sluice run from 75k msg/s at 447k still holding (others 541k-555k), a Kafka run from 94k
/// at 450k, its first miss (562k) the last window (others 475k-513k).
const SETTLE_RAISES_SLOW: u32 = 3;
const SETTLE_RAISE_FAST: f64 = 0.5;
/// Windows the hold may measure beyond [`SETTLE_ATTEMPTS`] once a window held and a higher
/// one missed, to halve the gap between them until it is within [`SETTLE_PRECISION`]: from
/// a raise's 50% that takes four.
const SETTLE_BISECT_EXTRA: u32 = 4;
/// The hold stops once the lowest rate missed is within this of the highest held.
const SETTLE_PRECISION: f64 = 0.05;
/// How many windows of a hold may be measured again after a stall ([`Held::judge`]): a
/// window that reached its rate without a growing backlog and missed the latency bound in at
/// most [`STALL_SHARE`] of its seconds is measured once more at the same rate, and that
/// second window decides. One stall of 0.1-1.2 s in a window, from the volume (a device
/// cache flush, seen in both brokers' traces), missed 17 of 88 Sluice windows at a fixed
/// rate the broker otherwise held and 6 of 15 of Kafka's; a hold that takes each such window
/// as its ceiling lands wherever the stall does (three runs of one build 22% apart). Not
/// counted in [`SETTLE_ATTEMPTS`].
const SETTLE_REMEASURE_MAX: u32 = 3;
/// Largest share of a window's seconds whose publish p99.9 missed the latency bound (or that
/// acknowledged nothing) for the window to count as one stall rather than an overload, under
/// which latency rises in most seconds.
const STALL_SHARE: f64 = 0.1;
/// Time at the rate to hold before each measured window of the search, for the backlog and
/// queues of what came before to drain.
const SETTLE_TIME: Duration = Duration::from_secs(3);
/// Longest wait before a measured window for the backlog to come down to
/// [`SETTLE_BACKLOG_S`] of the rate (a window that overran the broker leaves one behind, and
/// its consumers then read from storage; measured on top of it, the next window would judge
/// that backlog, not its own rate). A search that overran by half left 4-5 million messages, which consumers
/// reading from storage while producers went on at the rate had not cleared in 20 s.
const SETTLE_DRAIN_MAX: Duration = Duration::from_secs(90);
/// While a backlog drains before a window, producers run at this fraction of the window's
/// rate, so that consumers catch up in seconds rather than minutes; the window's rate is
/// then held for [`SETTLE_TIME`] before it is measured.
const SETTLE_DRAIN_RATE: f64 = 0.25;
/// Backlog, in seconds of the window's rate, that a drain before a window comes down to:
/// consumers at the tail, reading what is still in the page cache. Until 2026-11-27 the drain
/// stopped at a second of the rate ([`SEARCH_BACKLOG_S`]): windows after an overrun then began
/// with 0.7-0.8 million messages still to read, which for Sluice was most of its page-cache
/// budget (`sluice.log.cache.bytes`, then 1 GiB), so consumers of the partitions furthest behind
/// read from storage from the window's first second: in one run two such windows, at 759k
/// and 683k msg/s, collapsed (consumers at 446k and 392k) where the run's repeats held 671k
/// and 717k.
const SETTLE_BACKLOG_S: f64 = 0.1;
/// Time at [`SETTLE_DRAIN_RATE`] after a window that did not hold (and after the search),
/// backlog or not: what the broker queued while it was overrun (data written but not yet
/// on the volume, Sluice's up to `sluice.log.unwritten.bytes.max`, Kafka's dirty pages) is
/// written out here, at the volume's rate, instead of during the next window. Windows that
/// stepped down from an overrun otherwise failed at rates that a fresh fixed-rate run held
/// (300k msg/s: p99.9 of 200-880 ms in the hold, 17-37 ms in 50-110 s runs on their own).
const SETTLE_QUIET: Duration = Duration::from_secs(5);

/// First rate tried by the sustainable-rate search, msg/s over all producers.
const SEARCH_START_RATE: f64 = 50_000.0;
/// Steps at the start of the search, at [`SEARCH_PRIME_RATE`], that are not judged: a
/// broker's first seconds of load are its start-up, not its capacity. Kafka's first two
/// seconds at 15k msg/s had a publish p99.9 of 0.7 s and 0.3 s, then 4-50 ms (a JVM compiling
/// its produce path). One Kafka search judged from its first second missed from then on and
/// settled at 900 msg/s, and its hold climbed back only to 5.4k where other runs held
/// 33k-80k (its per-second log is gone, so which seconds sank it is not known).
const SEARCH_PRIME_STEPS: u32 = 5;
/// The rate of those steps, msg/s over all producers.
const SEARCH_PRIME_RATE: f64 = 10_000.0;
/// How often the search adjusts the rate.
const SEARCH_STEP: Duration = Duration::from_secs(1);
/// Slowest rate the search goes down to.
const SEARCH_MIN_RATE: f64 = 1_000.0;

/// The search for the highest sustainable rate (OMB's producerRate 0), a bisection as in
/// OMB's own search, during the warm-up: every [`SEARCH_STEP`] the step is judged. It
/// passed when producers reached the rate with a publish p99.9 within the latency bound and
/// consumers kept up (read at least 95% of it, the backlog grew by at most 5% of a step's
/// messages and is at most [`SEARCH_BACKLOG_S`] seconds' worth); it missed when producers
/// fell short, the p99.9 passed the bound, or the backlog grew (above that bound: did not
/// shrink). A step that drains an earlier backlog is not judged; one that missed the latency
/// bound only is tried again before the miss counts.
/// Passing rates raise the floor, missed rates lower the ceiling, and the next rate is
/// halfway between (growing by [`SEARCH_GROWTH`] while no ceiling is known). After a miss
/// the search first goes below the floor ([`SEARCH_RECOVERY_RATE`]) for up to
/// [`SEARCH_RECOVERY_STEPS`] steps in which a miss is not held against anything: what an
/// overrun left behind (a backlog, writes the broker queued) drains there, instead of
/// failing the next rates tried and driving the search far below what the broker holds. A
/// ceiling the rate keeps reaching is raised by [`SEARCH_PROBE`] (more with every pass in a
/// row), so the search follows a broker that speeds up (a JVM after its warm-up) as well as
/// one that slows down. It begins with [`SEARCH_PRIME_STEPS`] unjudged steps, and a miss
/// without a floor to return to goes down to 90% of what was reached but never below half
/// the rate: one stalled second (nothing acknowledged) would otherwise send it to the
/// slowest rate.
#[derive(Debug)]
struct RateSearch {
    total: f64,
    per_producer: Arc<AtomicU64>,
    producers: f64,
    at: Instant,
    acked: u64,
    consumed: u64,
    /// Messages deleted unread ([`Counters::skipped_msgs`]), for the backlog.
    skipped: u64,
    /// Highest rate that passed (0: none yet).
    floor: f64,
    /// Lowest rate that missed since the floor last passed it (None: none yet).
    ceiling: Option<f64>,
    /// Passes in a row at the ceiling: each doubles the next probe above it.
    probes: u32,
    /// Publish p99.9 a passing step must keep, in milliseconds.
    bound_ms: f64,
    percentile: LatencyPercentile,
    /// Steps left below the floor after a miss (see [`SEARCH_RECOVERY_STEPS`]), and the rate
    /// to try once they are over.
    recovering: Option<(u32, f64)>,
    /// The last step missed the latency bound only, and is being tried again.
    suspect: bool,
    /// Start-up steps left, not judged ([`SEARCH_PRIME_STEPS`]), and the rate after them.
    priming: u32,
    start: f64,
}

/// Steps below the floor after a missed step, at most, before the search goes on; the first
/// that passes ends them.
const SEARCH_RECOVERY_STEPS: u32 = 3;
/// The rate of those steps, as a fraction of the floor: far enough below what the broker
/// held for what the overrun queued to drain (at the floor itself, a broker at its capacity
/// would not drain it at all).
const SEARCH_RECOVERY_RATE: f64 = 0.8;
/// How much the rate grows after a pass while no ceiling is known. Doubling overran a broker
/// at 400k msg/s with 800k for a whole second: 400 MB queued that took seconds to drain.
const SEARCH_GROWTH: f64 = 1.5;

/// Backlog, in seconds of the current rate, above which a step cannot pass.
const SEARCH_BACKLOG_S: f64 = 1.0;
/// How far above a ceiling that keeps being reached the search probes again (doubling with
/// every further pass there, up to 8 times this).
const SEARCH_PROBE: f64 = 0.05;

impl RateSearch {
    /// A search over `producers` producers, each reading its share from `per_producer` (f64
    /// bits), at the priming rate first and then from `start` msg/s.
    fn new(
        start: f64,
        per_producer: Arc<AtomicU64>,
        producers: f64,
        bound_ms: f64,
        percentile: LatencyPercentile,
    ) -> RateSearch {
        let mut s = RateSearch {
            bound_ms,
            percentile,
            total: start,
            per_producer,
            producers,
            at: Instant::now(),
            acked: 0,
            consumed: 0,
            skipped: 0,
            floor: 0.0,
            ceiling: None,
            probes: 0,
            recovering: None,
            suspect: false,
            priming: SEARCH_PRIME_STEPS,
            start,
        };
        s.set(SEARCH_PRIME_RATE.min(start));
        s
    }

    fn set(&mut self, total: f64) {
        self.total = total.max(SEARCH_MIN_RATE);
        self.per_producer
            .store((self.total / self.producers).to_bits(), Ordering::Relaxed);
    }

    fn step(&mut self, stats: &Stats) {
        let now = Instant::now();
        let dt = now.duration_since(self.at).as_secs_f64();
        if dt < SEARCH_STEP.as_secs_f64() {
            return;
        }
        let c = &stats.counters;
        let (acked, consumed, skipped) = (
            Counters::get(&c.acked_msgs),
            Counters::get(&c.consumed_msgs),
            Counters::get(&c.skipped_msgs),
        );
        let published = (acked - self.acked) as f64 / dt;
        let read = (consumed - self.consumed) as f64 / dt;
        let backlog_of = |a: u64, c: u64, s: u64| a.saturating_sub(c).saturating_sub(s) as f64;
        let backlog_before = backlog_of(self.acked, self.consumed, self.skipped);
        let backlog = backlog_of(acked, consumed, skipped);
        let latency = self.percentile.of(&stats.take_step());
        let next = self.judge(dt, published, read, backlog_before, backlog, latency);
        self.set(next);
        self.at = now;
        self.acked = acked;
        self.consumed = consumed;
        self.skipped = skipped;
    }

    /// Judge one step (`dt` seconds at `self.total`, with the rates, backlogs and publish
    /// latency at the judged percentile in milliseconds measured over it) and return the
    /// next target.
    fn judge(
        &mut self,
        dt: f64,
        published: f64,
        read: f64,
        backlog_before: f64,
        backlog: f64,
        latency_ms: f64,
    ) -> f64 {
        if self.priming > 0 {
            self.priming -= 1;
            return if self.priming == 0 {
                self.start
            } else {
                self.total
            };
        }
        // Where a miss with no floor to return to goes: below what was reached, not below
        // half the rate.
        let restart = 0.9 * published.min(read).max(0.5 * self.total);
        let reached = published >= 0.95 * self.total && latency_ms <= self.bound_ms;
        // Above SEARCH_BACKLOG_S the backlog must shrink: consumers that only nearly keep up
        // would otherwise let it grow for the whole run.
        let growing = backlog - backlog_before > 0.05 * self.total * dt
            || read < 0.95 * self.total.min(published)
            || (backlog > SEARCH_BACKLOG_S * self.total && backlog >= backlog_before);
        let missed = !reached || growing;
        // A step that reached the rate and kept up but missed the latency bound is tried
        // again before it counts: one bad second (a burst of segment deletions, a stalled
        // write) would otherwise set a ceiling far below what the broker holds.
        let latency_only = missed && published >= 0.95 * self.total && !growing;
        if latency_only && !self.suspect && self.recovering.is_none() {
            self.suspect = true;
            return self.total;
        }
        self.suspect = false;
        if let Some((left, then)) = self.recovering {
            // Below the floor after a miss. A pass ends the recovery: the search goes on with
            // the rate it was about to try. A miss is what the overrun left behind, until the
            // steps run out: then the floor itself does not hold any more (a first second
            // into an empty page cache passes rates the disk cannot sustain), so it is
            // forgotten and the search starts again below what was reached.
            if !missed {
                self.recovering = None;
                return then;
            }
            if left > 1 {
                self.recovering = Some((left - 1, then));
                return self.total;
            }
            self.recovering = None;
            self.floor = 0.0;
            self.probes = 0;
            self.ceiling = Some(self.ceiling.map_or(self.total, |c| c.min(self.total)));
            return restart;
        }
        if !missed {
            if backlog > SEARCH_BACKLOG_S * self.total {
                // Draining an earlier backlog: hold the rate until it is gone.
                return self.total;
            }
            // Passed: the floor comes up; halfway to the ceiling, or grow without one.
            self.floor = self.total;
            return match self.ceiling {
                None => self.total * SEARCH_GROWTH,
                Some(c) if c <= self.total * (1.0 + SEARCH_PROBE) => {
                    let step = (SEARCH_PROBE * f64::from(1u32 << self.probes.min(3))).min(1.0);
                    self.probes += 1;
                    let raised = self.total * (1.0 + step);
                    self.ceiling = Some(raised);
                    raised
                }
                Some(c) => (self.total + c) / 2.0,
            };
        }
        // Missed: the ceiling comes down to this rate. With a floor below it, recover below
        // the floor, then try halfway between the two.
        self.probes = 0;
        self.ceiling = Some(self.ceiling.map_or(self.total, |c| c.min(self.total)));
        if self.floor > 0.0 && self.floor < self.total {
            self.recovering = Some((SEARCH_RECOVERY_STEPS, (self.floor + self.total) / 2.0));
            return SEARCH_RECOVERY_RATE * self.floor;
        }
        // No floor, or the floor itself missed (conditions changed): start below what was
        // reached.
        self.floor = 0.0;
        restart
    }

    /// The rate to hold once the search ends: the highest that passed since conditions last
    /// changed, else 90% of the current target.
    fn settled(&self) -> f64 {
        if self.floor > 0.0 {
            self.floor
        } else {
            0.9 * self.total
        }
    }
}

/// How the measured windows at fixed rates went, for the sustainable-rate search.
#[derive(Clone, Copy, Debug)]
pub struct Held {
    /// The rate of the window reported: the highest one held, else the last one tried (msg/s
    /// over all producers).
    pub target: f64,
    /// Windows measured.
    pub attempts: u32,
    /// The reported window kept the latency bound, reached the rate and did not let the
    /// backlog grow.
    pub sustained: bool,
    pub latency_bound_ms: f64,
    pub latency_percentile: LatencyPercentile,
    /// Windows measured again after a stall ([`SETTLE_REMEASURE_MAX`]).
    pub remeasured: u32,
    /// Windows at the reported rate that missed (a stall measured again), and the highest
    /// publish latency of any window at that rate, milliseconds: set by the run once the
    /// hold is done, so that a stall measured again is still reported.
    pub missed_at_target: u32,
    pub max_at_target_ms: f64,
    /// Seconds measured in windows that reached their rate without the backlog growing (the
    /// broker kept pace; only latency could miss), and how many of those missed the latency
    /// bound: how often a broker stalls below its capacity, which decides how far apart
    /// runs of the hold can land (a window holds only between stalls).
    pub paced_seconds: u32,
    pub paced_seconds_over: u32,
    /// The highest rate a window held (0: none), and the lowest one that did not.
    highest_held: f64,
    lowest_missed: Option<f64>,
    /// The window being judged measures a rate again after a stall.
    remeasuring: bool,
}

/// A measured window of the hold, as [`Held::judge`] sees it.
#[derive(Clone, Copy, Debug)]
struct Window {
    /// Acknowledged and consumed msg/s over the window.
    published: f64,
    read: f64,
    /// Publish latency at the judged percentile, milliseconds.
    latency: f64,
    /// Backlog (acknowledged, not consumed, not deleted unread) at its start and end,
    /// messages.
    backlog_before: f64,
    backlog_after: f64,
    /// Messages retention deleted before the consumers read them, during the window: the
    /// consumers fell a whole retention behind, however the backlog looks at its end.
    skipped: f64,
    /// The window's seconds, and how many of them missed the latency bound (a publish
    /// latency at the judged percentile over it, or nothing acknowledged).
    seconds: u32,
    seconds_over: u32,
}

impl Held {
    fn new(target: f64, latency_bound_ms: f64, latency_percentile: LatencyPercentile) -> Held {
        Held {
            target,
            attempts: 0,
            sustained: false,
            latency_bound_ms,
            latency_percentile,
            remeasured: 0,
            missed_at_target: 0,
            max_at_target_ms: 0.0,
            paced_seconds: 0,
            paced_seconds_over: 0,
            highest_held: 0.0,
            lowest_missed: None,
            remeasuring: false,
        }
    }

    /// Judge a window measured at `self.target`: it held if it reached the rate, kept the
    /// latency bound and did not let the backlog grow. Returns whether it held, and the
    /// next rate to measure (None: the hold is done; `target` and `sustained` are then the
    /// highest rate held, or the last one tried when none held).
    ///
    /// While every window held, the next is [`SETTLE_RAISE`] higher ([`SETTLE_RAISE_FAST`]
    /// after [`SETTLE_RAISES_SLOW`] raises). While none held, the
    /// next is [`SETTLE_STEP`] lower (doubling with every miss in a row, up to
    /// [`SETTLE_STEP_MAX`]) than this one's target, or than what the window reached
    /// when it fell short (a window far over the broker's rate would otherwise take many
    /// steps), but not below half the target; what it reached is the publish rate when the
    /// window overran (the backlog grew: its consumers fell behind to read from storage,
    /// and their rate says little about reading at the tail; the next window starts after
    /// the backlog drained), else the lower of the publish and read rates. Once one held and
    /// one missed, the next is halfway between, until they are within
    /// [`SETTLE_PRECISION`] of each other or [`SETTLE_ATTEMPTS`] windows were measured
    /// ([`SETTLE_BISECT_EXTRA`] more once one held and one missed).
    ///
    /// A window that missed on one stall only (it reached the rate, the backlog did not
    /// grow, and at most [`STALL_SHARE`] of its seconds missed the bound) is measured again
    /// at the same rate, up to [`SETTLE_REMEASURE_MAX`] times in a hold; the second window
    /// decides, whatever it misses on.
    fn judge(&mut self, w: &Window) -> (bool, Option<f64>) {
        self.attempts += 1;
        let grew = w.backlog_after > w.backlog_before.max(SEARCH_BACKLOG_S * self.target) * 1.05
            || w.skipped > 0.0;
        let reached = w.published >= 0.95 * self.target;
        // Kept pace: reached the rate without a growing backlog.
        let paced = reached && !grew;
        let held = paced && w.latency <= self.latency_bound_ms;
        if paced {
            self.paced_seconds += w.seconds;
            self.paced_seconds_over += w.seconds_over;
        }
        let stalled =
            paced && !held && f64::from(w.seconds_over) <= STALL_SHARE * f64::from(w.seconds);
        if stalled && !self.remeasuring && self.remeasured < SETTLE_REMEASURE_MAX {
            self.remeasured += 1;
            self.remeasuring = true;
            return (false, Some(self.target));
        }
        self.remeasuring = false;
        // Windows at distinct rates (a window measured again is not counted).
        let rates = self.attempts - self.remeasured;
        if held {
            self.highest_held = self.highest_held.max(self.target);
        } else {
            self.lowest_missed = Some(
                self.lowest_missed
                    .map_or(self.target, |m| m.min(self.target)),
            );
        }
        let budget = if self.highest_held > 0.0 && self.lowest_missed.is_some() {
            SETTLE_ATTEMPTS + SETTLE_BISECT_EXTRA
        } else {
            SETTLE_ATTEMPTS
        };
        let next = match self.lowest_missed {
            _ if rates >= budget => None,
            // Every window so far held: this was raise number `rates`.
            None if rates <= SETTLE_RAISES_SLOW => Some(self.target * (1.0 + SETTLE_RAISE)),
            None => Some(self.target * (1.0 + SETTLE_RAISE_FAST)),
            Some(_) if self.highest_held == 0.0 => {
                let reached = if grew {
                    w.published
                } else {
                    w.published.min(w.read)
                };
                let doublings = (rates - 1).min(4);
                let step = (SETTLE_STEP * f64::from(1u32 << doublings)).min(SETTLE_STEP_MAX);
                Some((1.0 - step) * self.target.min(reached.max(0.5 * self.target)))
            }
            Some(missed) if missed <= self.highest_held * (1.0 + SETTLE_PRECISION) => None,
            Some(missed) => Some((self.highest_held + missed) / 2.0),
        };
        match next {
            Some(rate) => self.target = rate,
            None if self.highest_held > 0.0 => {
                self.target = self.highest_held;
                self.sustained = true;
            }
            None => {}
        }
        (held, next)
    }
}

/// One reporting interval.
#[derive(Clone, Debug)]
pub struct Interval {
    pub phase: &'static str,
    /// Seconds since the start of the run (end of the interval).
    pub t: f64,
    pub publish_rate: f64,
    pub publish_mb: f64,
    pub consume_rate: f64,
    pub consume_mb: f64,
    pub backlog_msgs: u64,
    pub publish_errors: u64,
    pub publish_latency: Percentiles,
    pub e2e_latency: Percentiles,
}

/// The whole run's result.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub plan: Plan,
    pub started_unix_s: u64,
    pub measured_s: f64,
    pub publish_rate: f64,
    pub publish_mb: f64,
    pub consume_rate: f64,
    pub consume_mb: f64,
    pub publish_errors: u64,
    /// Messages retention deleted before the consumers read them, over the whole run.
    pub skipped_msgs: u64,
    pub publish_latency: Percentiles,
    pub e2e_latency: Percentiles,
    pub backlog: Option<Backlog>,
    /// With producerRate 0 (and no --unthrottled): the rate the search settled on and
    /// whether the measured window held it.
    pub held: Option<Held>,
    /// Bytes of record batches published over the whole run (warm-up and backlog included),
    /// for per-byte costs measured over the whole run.
    pub total_publish_bytes: u64,
    pub intervals: Vec<Interval>,
}

#[derive(Clone, Copy, Debug)]
pub struct Backlog {
    pub target_bytes: u64,
    pub built_bytes: u64,
    pub build_s: f64,
    pub drain_s: f64,
    pub drain_msgs_per_s: f64,
    pub drain_mb_per_s: f64,
}

struct Snapshot {
    at: Instant,
    acked: u64,
    sent_bytes: u64,
    consumed: u64,
    consumed_bytes: u64,
    skipped: u64,
    errors: u64,
}

impl Snapshot {
    fn take(stats: &Stats) -> Snapshot {
        let c = &stats.counters;
        Snapshot {
            at: Instant::now(),
            acked: Counters::get(&c.acked_msgs),
            sent_bytes: Counters::get(&c.sent_bytes),
            consumed: Counters::get(&c.consumed_msgs),
            consumed_bytes: Counters::get(&c.consumed_bytes),
            skipped: Counters::get(&c.skipped_msgs),
            errors: Counters::get(&c.publish_errors),
        }
    }

    /// Messages acknowledged and neither consumed nor deleted unread.
    fn backlog(&self) -> u64 {
        self.acked
            .saturating_sub(self.consumed)
            .saturating_sub(self.skipped)
    }
}

const MB: f64 = 1024.0 * 1024.0;

struct Reporter {
    stats: Arc<Stats>,
    start: Instant,
    last: Snapshot,
    intervals: Vec<Interval>,
}

impl Reporter {
    fn tick(&mut self, phase: &'static str) -> Interval {
        let now = Snapshot::take(&self.stats);
        let dt = now.at.duration_since(self.last.at).as_secs_f64().max(1e-9);
        let (publish_latency, e2e_latency) = self.stats.take_interval();
        let i = Interval {
            phase,
            t: now.at.duration_since(self.start).as_secs_f64(),
            publish_rate: (now.acked - self.last.acked) as f64 / dt,
            publish_mb: (now.sent_bytes - self.last.sent_bytes) as f64 / dt / MB,
            consume_rate: (now.consumed - self.last.consumed) as f64 / dt,
            consume_mb: (now.consumed_bytes - self.last.consumed_bytes) as f64 / dt / MB,
            backlog_msgs: now.backlog(),
            publish_errors: now.errors - self.last.errors,
            publish_latency,
            e2e_latency,
        };
        println!(
            "[{:>6.1}s {:<7}] pub {:>9.0} msg/s {:>7.1} MB/s | cons {:>9.0} msg/s {:>7.1} MB/s | backlog {:>9} msg | err {} | pub lat ms avg {:.2} p50 {:.2} p99 {:.2} p99.9 {:.2} max {:.2} | e2e ms p50 {:.2} p99 {:.2} p99.9 {:.2} max {:.2}",
            i.t, phase, i.publish_rate, i.publish_mb, i.consume_rate, i.consume_mb, i.backlog_msgs,
            i.publish_errors, i.publish_latency.avg, i.publish_latency.p50, i.publish_latency.p99,
            i.publish_latency.p999, i.publish_latency.max, i.e2e_latency.p50, i.e2e_latency.p99,
            i.e2e_latency.p999, i.e2e_latency.max
        );
        self.last = now;
        self.intervals.push(i.clone());
        i
    }
}

fn slug(s: &str) -> String {
    let out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    out.split('-')
        .filter(|p| !p.is_empty())
        .collect::<Vec<_>>()
        .join("-")
        .chars()
        .take(40)
        .collect()
}

/// Run the plan against the broker.
pub async fn execute(plan: Plan) -> Result<Outcome> {
    let w = &plan.workload;
    let d = &plan.driver;
    let started_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let bootstrap = Connection::connect(&plan.bootstrap).await?;
    let run_id = format!(
        "{:06x}",
        Rng::new(crate::producer::now_us()).next_u64() & 0xff_ffff
    );
    let topics: Vec<String> = (0..w.topics)
        .map(|i| format!("bench-{}-{run_id}-{i}", slug(&w.name)))
        .collect();
    println!(
        "sluice bench: workload {:?}, driver {:?}, broker {}, topics {} x {} partitions, {} B messages, {} producer(s)/topic, {} x {} consumer(s)/topic, rate {}",
        w.name, d.name, plan.bootstrap, w.topics, w.partitions_per_topic, w.message_size,
        w.producers_per_topic, w.subscriptions_per_topic, w.consumer_per_subscription,
        if w.producer_rate > 0.0 { format!("{} msg/s", w.producer_rate) } else { "max (unthrottled)".into() }
    );
    admin::create_topics(
        &bootstrap,
        &topics,
        w.partitions_per_topic,
        d.replication_factor,
        &d.topic_config,
    )
    .await
    .context("creating the workload's topics")?;
    let layouts = admin::wait_for_layout(
        &bootstrap,
        &topics,
        w.partitions_per_topic,
        TOPIC_READY_TIMEOUT,
    )
    .await?;

    let result = measure(&plan, &layouts, started_unix_s).await;

    if !plan.keep_topics {
        if let Err(e) = admin::delete_topics(&bootstrap, &topics).await {
            eprintln!("sluice bench: could not delete the benchmark topics: {e:#}");
        }
    }
    result
}

async fn connect_all(layout: &admin::TopicLayout) -> Result<BTreeMap<i32, Arc<Connection>>> {
    let mut conns = BTreeMap::new();
    for leader in layout.leaders.iter() {
        if !conns.contains_key(leader) {
            let addr = &layout.brokers[leader];
            conns.insert(*leader, Connection::connect(addr).await?);
        }
    }
    Ok(conns)
}

/// Drive the workload on the topics of `layouts`, in the run's steps: start the consumers and
/// producers, warm up (with producerRate 0, the sustainable-rate search steers the rate
/// meanwhile), build and drain a backlog if asked, measure (with a search: windows at fixed
/// rates until the hold is done), stop every task, and report the measured window.
async fn measure(
    plan: &Plan,
    layouts: &[admin::TopicLayout],
    started_unix_s: u64,
) -> Result<Outcome> {
    let w = &plan.workload;
    let mut tasks = Tasks::new(w)?;
    // The search sets the producers' rate itself, from its priming rate on.
    let search = (w.producer_rate == 0.0 && !plan.unthrottled).then(|| {
        RateSearch::new(
            SEARCH_START_RATE,
            tasks.per_producer.clone(),
            f64::from(w.producer_count()),
            plan.latency_bound_ms,
            plan.latency_percentile,
        )
    });
    for layout in layouts {
        tasks.spawn_topic(plan, layout).await?;
    }
    let mut run = Running::start(tasks, search, plan.report_interval);
    run.warm_up(w.warmup_duration).await?;
    let backlog = if w.consumer_backlog_size_gb > 0.0 {
        Some(run.build_and_drain_backlog(w).await?)
    } else {
        None
    };
    // With a search: it ends with the warm-up (and the backlog), and the measured windows
    // hold the rates the hold chooses (no adjustment).
    let mut searched = run.search.take();
    let mut held = None;
    if let Some(s) = &mut searched {
        held = Some(run.end_search(s, plan).await?);
    }
    let window = run
        .measured_window(plan, searched.as_mut().zip(held.as_mut()))
        .await?;
    let stats = run.tasks.stats.clone();
    let intervals = run.stop().await?;
    let out = outcome(
        plan,
        started_unix_s,
        &stats,
        &window,
        backlog,
        held,
        intervals,
    );
    print_result(&out);
    Ok(out)
}

/// The workload's producer and consumer tasks, and what they share.
struct Tasks {
    stats: Arc<Stats>,
    producers: JoinSet<Result<()>>,
    consumers: JoinSet<Result<()>>,
    stop_producers: Arc<AtomicBool>,
    stop_consumers: Arc<AtomicBool>,
    /// Lets the consumers go: false while a backlog is to be built with them held back.
    resume_tx: watch::Sender<bool>,
    resume_rx: watch::Receiver<bool>,
    pool: Arc<PayloadPool>,
    /// Each producer's rate, msg/s (f64 bits): the workload's, or the search's.
    per_producer: Arc<AtomicU64>,
}

impl Tasks {
    /// No task yet; the payloads made (or read from the payload file).
    fn new(w: &Workload) -> Result<Tasks> {
        let backlog_wanted = w.consumer_backlog_size_gb > 0.0;
        let (resume_tx, resume_rx) = watch::channel(!backlog_wanted);
        let pool = Arc::new(PayloadPool::new(
            w.message_size as usize,
            w.payload_file.as_deref(),
            w.use_randomized_payloads,
            w.random_bytes_ratio,
            w.randomized_payload_pool_size as usize,
            0x5eed,
        )?);
        Ok(Tasks {
            stats: Arc::new(Stats::default()),
            producers: JoinSet::new(),
            consumers: JoinSet::new(),
            stop_producers: Arc::new(AtomicBool::new(false)),
            stop_consumers: Arc::new(AtomicBool::new(false)),
            resume_tx,
            resume_rx,
            pool,
            per_producer: Arc::new(AtomicU64::new(
                (w.producer_rate / f64::from(w.producer_count())).to_bits(),
            )),
        })
    }

    /// Start one topic's tasks: probe where its partitions start, stagger their segment
    /// rolls if asked, then start its consumers and its producers.
    async fn spawn_topic(&mut self, plan: &Plan, layout: &admin::TopicLayout) -> Result<()> {
        let conns = connect_all(layout).await?;
        let mut start_offsets =
            admin::probe_partitions(&conns, layout, TOPIC_READY_TIMEOUT).await?;
        if plan.stagger_segment_bytes > 0 {
            stagger(plan, layout, &conns, &mut start_offsets).await?;
        }
        self.spawn_consumers(plan, layout, &start_offsets).await?;
        self.spawn_producers(plan, layout).await
    }

    /// Each subscription's consumers, reading the topic from `start_offsets`: consumer `c`
    /// of `k` reads partitions `c`, `c + k`, ... ([`consumer_partitions`]), with one fetch
    /// loop (and connection) per leader of them.
    async fn spawn_consumers(
        &mut self,
        plan: &Plan,
        layout: &admin::TopicLayout,
        start_offsets: &[i64],
    ) -> Result<()> {
        let w = &plan.workload;
        for _sub in 0..w.subscriptions_per_topic {
            let k = w.consumer_per_subscription as usize;
            for c in 0..k {
                for (leader, partitions) in
                    consumer_partitions(c, k, &layout.leaders, start_offsets)
                {
                    let conn = Connection::connect(&layout.brokers[&leader]).await?;
                    self.consumers.spawn(
                        Consumer {
                            topic: layout.name.clone(),
                            partitions,
                            conn,
                            driver: plan.driver.clone(),
                            stats: self.stats.clone(),
                            stop: self.stop_consumers.clone(),
                            resume: self.resume_rx.clone(),
                        }
                        .run(),
                    );
                }
            }
        }
        Ok(())
    }

    /// The topic's producers, each with its own connections to the partitions' leaders and
    /// its own seed, at the rate in [`Tasks::per_producer`].
    async fn spawn_producers(&mut self, plan: &Plan, layout: &admin::TopicLayout) -> Result<()> {
        let w = &plan.workload;
        for i in 0..w.producers_per_topic {
            self.producers.spawn(
                Producer {
                    topic: layout.name.clone(),
                    leaders: layout.leaders.clone(),
                    conns: connect_all(layout).await?,
                    rate: self.per_producer.clone(),
                    driver: plan.driver.clone(),
                    key_distributor: w.key_distributor,
                    pool: self.pool.clone(),
                    stats: self.stats.clone(),
                    stop: self.stop_producers.clone(),
                    seed: u64::from(i) * 7919 + 1,
                }
                .run(),
            );
        }
        Ok(())
    }
}

/// The partitions consumer `c` of a subscription's `k` reads (`c`, `c + k`, ... of the
/// partitions whose leaders `leaders` lists), with their start offsets, grouped by leader.
fn consumer_partitions(
    c: usize,
    k: usize,
    leaders: &[i32],
    start_offsets: &[i64],
) -> BTreeMap<i32, Vec<(i32, i64)>> {
    let mut by_leader: BTreeMap<i32, Vec<(i32, i64)>> = BTreeMap::new();
    for p in (c..leaders.len()).step_by(k) {
        by_leader
            .entry(leaders[p])
            .or_default()
            .push((p as i32, start_offsets[p]));
    }
    by_leader
}

/// Spread the topic's segment rolls over time ([`admin::stagger_rolls`]) and say how.
async fn stagger(
    plan: &Plan,
    layout: &admin::TopicLayout,
    conns: &BTreeMap<i32, Arc<Connection>>,
    start_offsets: &mut [i64],
) -> Result<()> {
    let n = layout.leaders.len();
    let t = Instant::now();
    let bytes = admin::stagger_rolls(
        conns,
        layout,
        plan.stagger_segment_bytes,
        plan.workload.message_size as usize,
        start_offsets,
        STAGGER_TIMEOUT,
    )
    .await?;
    println!(
        "sluice bench: {}: segment rolls staggered, partition p of {n} given p/{n} of {:.1} MB ({:.0} MB in {:.1} s)",
        layout.name,
        plan.stagger_segment_bytes as f64 / 1e6,
        bytes as f64 / 1e6,
        t.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Messages acknowledged and neither consumed nor deleted unread, now.
fn backlog_msgs(s: &Stats) -> f64 {
    s.counters.backlog() as f64
}

/// A measured window: the counters at its start and end, its latency histograms, and how
/// many of its seconds there were and missed the latency bound.
struct Measured {
    start: Snapshot,
    end: Snapshot,
    publish: Histogram<u64>,
    e2e: Histogram<u64>,
    seconds: u32,
    seconds_over: u32,
}

impl Measured {
    /// The window's length in seconds (never 0).
    fn secs(&self) -> f64 {
        self.end
            .at
            .duration_since(self.start.at)
            .as_secs_f64()
            .max(1e-9)
    }
}

/// The workload under way: its tasks, the reporter with its ticker, and the search while it
/// steers the producers' rate.
struct Running {
    tasks: Tasks,
    rep: Reporter,
    ticker: tokio::time::Interval,
    search: Option<RateSearch>,
}

impl Running {
    /// Start reporting, every `report_interval` from now.
    fn start(tasks: Tasks, search: Option<RateSearch>, report_interval: Duration) -> Running {
        let start = Instant::now();
        let rep = Reporter {
            stats: tasks.stats.clone(),
            start,
            last: Snapshot::take(&tasks.stats),
            intervals: Vec::new(),
        };
        Running {
            tasks,
            rep,
            ticker: tokio::time::interval_at(start + report_interval, report_interval),
            search,
        }
    }

    /// Wait until `until` holds or `deadline` passes, reporting every interval as phase
    /// `name` and letting the search (while there is one) judge its steps; fails as soon as
    /// a producer or consumer task ends, as none should before it is stopped.
    async fn phase(
        &mut self,
        name: &'static str,
        deadline: Instant,
        mut until: impl FnMut(&Stats) -> bool,
    ) -> Result<()> {
        loop {
            if until(&self.tasks.stats) {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(());
            }
            let poll = (deadline - now).min(Duration::from_millis(100));
            tokio::select! {
                _ = self.ticker.tick() => { self.rep.tick(name); }
                Some(r) = self.tasks.producers.join_next() => { check_task("producer", r)?; bail!("a producer stopped early"); }
                Some(r) = self.tasks.consumers.join_next() => { check_task("consumer", r)?; bail!("a consumer stopped early"); }
                _ = tokio::time::sleep(poll) => {}
            }
            if let Some(s) = self.search.as_mut() {
                s.step(&self.tasks.stats);
            }
        }
    }

    /// The warm-up, if any. Its last part is reported too, unless the ticker has just
    /// reported it (an interval of a few milliseconds gives rates that mean nothing); the
    /// ticker then starts afresh.
    async fn warm_up(&mut self, duration: Duration) -> Result<()> {
        if duration.is_zero() {
            return Ok(());
        }
        println!("warm-up for {:.0} s", duration.as_secs_f64());
        self.phase("warmup", Instant::now() + duration, |_| false)
            .await?;
        if self.rep.last.at.elapsed() >= Duration::from_millis(500) {
            self.rep.tick("warmup");
        }
        self.ticker.reset();
        Ok(())
    }

    /// Build a backlog of `consumerBacklogSizeGB` with the consumers held back, then let
    /// them go and drain it down to `backlogDrainRatio` of it while the producers keep
    /// publishing; each phase ends after [`BACKLOG_PHASE_MAX`] at the latest.
    async fn build_and_drain_backlog(&mut self, w: &Workload) -> Result<Backlog> {
        let stats = self.tasks.stats.clone();
        let target_bytes = (w.consumer_backlog_size_gb * 1024.0 * 1024.0 * 1024.0) as u64;
        let msg = u64::from(w.message_size);
        let backlog_bytes = |s: &Stats| s.counters.backlog() * msg;
        println!(
            "building a backlog of {:.2} GB with the consumers held back",
            w.consumer_backlog_size_gb
        );
        let t0 = Instant::now();
        self.phase("backlog", t0 + BACKLOG_PHASE_MAX, |s| {
            backlog_bytes(s) >= target_bytes
        })
        .await?;
        let built_bytes = backlog_bytes(&stats);
        let build_s = t0.elapsed().as_secs_f64();
        let empty_level = ((1.0 - w.backlog_drain_ratio) * target_bytes as f64) as u64;
        println!(
            "backlog of {:.2} GB built in {build_s:.1} s; draining to {:.2} GB",
            built_bytes as f64 / 1e9,
            empty_level as f64 / 1e9
        );
        let consumed0 = Counters::get(&stats.counters.consumed_msgs);
        let consumed_bytes0 = Counters::get(&stats.counters.consumed_bytes);
        let _ = self.tasks.resume_tx.send(true);
        let t1 = Instant::now();
        self.phase("drain", t1 + BACKLOG_PHASE_MAX, |s| {
            backlog_bytes(s) <= empty_level
        })
        .await?;
        let drain_s = t1.elapsed().as_secs_f64().max(1e-9);
        let drained = Counters::get(&stats.counters.consumed_msgs) - consumed0;
        let drained_bytes = Counters::get(&stats.counters.consumed_bytes) - consumed_bytes0;
        let b = Backlog {
            target_bytes,
            built_bytes,
            build_s,
            drain_s,
            drain_msgs_per_s: drained as f64 / drain_s,
            drain_mb_per_s: drained_bytes as f64 / drain_s / MB,
        };
        println!(
            "backlog drained in {:.1} s: {:.0} msg/s, {:.1} MB/s (producers kept publishing)",
            b.drain_s, b.drain_msgs_per_s, b.drain_mb_per_s
        );
        Ok(b)
    }

    /// The end of the search: producers at the rate it settled on, after what its last
    /// probes may have left behind (a backlog, full queues) drained. The hold starts there.
    async fn end_search(&mut self, s: &mut RateSearch, plan: &Plan) -> Result<Held> {
        let rate = s.settled();
        println!(
            "sustainable-rate search settled on {rate:.0} msg/s (publish {} bound {} ms)",
            plan.latency_percentile.label(),
            plan.latency_bound_ms
        );
        s.set(rate);
        self.settle(s, rate, true).await?;
        Ok(Held::new(
            rate,
            plan.latency_bound_ms,
            plan.latency_percentile,
        ))
    }

    /// Before a measured window at `rate`: after an overrun, or with a backlog of more than
    /// a second of the rate, slow producers to [`SETTLE_DRAIN_RATE`] of it until consumers
    /// have caught up ([`SETTLE_BACKLOG_S`]; at most [`SETTLE_DRAIN_MAX`]) and, after an
    /// overrun, [`SETTLE_QUIET`] has passed; then hold the rate for [`SETTLE_TIME`], and say
    /// so when the window still starts with a backlog.
    async fn settle(&mut self, searched: &mut RateSearch, rate: f64, overrun: bool) -> Result<()> {
        let stats = self.tasks.stats.clone();
        let drained = |s: &Stats| backlog_msgs(s) <= SEARCH_BACKLOG_S * rate;
        if overrun || !drained(&stats) {
            let (before, t0) = (backlog_msgs(&stats), Instant::now());
            searched.set(SETTLE_DRAIN_RATE * rate);
            self.phase("settle", t0 + SETTLE_DRAIN_MAX, |s| {
                backlog_msgs(s) <= SETTLE_BACKLOG_S * rate
                    && (!overrun || t0.elapsed() >= SETTLE_QUIET)
            })
            .await?;
            println!(
                "at {:.0} msg/s for {:.1} s: backlog {before:.0} -> {:.0} msg",
                SETTLE_DRAIN_RATE * rate,
                t0.elapsed().as_secs_f64(),
                backlog_msgs(&stats),
            );
            searched.set(rate);
        }
        self.phase("settle", Instant::now() + SETTLE_TIME, |_| false)
            .await?;
        if !drained(&stats) {
            println!(
                "the window starts with a backlog of {:.0} msg ({:.1} s of the rate)",
                backlog_msgs(&stats),
                backlog_msgs(&stats) / rate
            );
        }
        Ok(())
    }

    /// The window reported. Without a search, the one measured window. With one, the hold
    /// measures windows at the rates [`Held::judge`] chooses, letting the backlog and queues
    /// of each drain before the next ([`Running::settle`]), until it is done; the window
    /// reported is then the one at the highest rate held, else the last.
    async fn measured_window(
        &mut self,
        plan: &Plan,
        mut hold: Option<(&mut RateSearch, &mut Held)>,
    ) -> Result<Measured> {
        let mut windows = Vec::new();
        loop {
            let m = self.measure_window(plan).await?;
            let Some((s, h)) = &mut hold else {
                return Ok(m);
            };
            let tried = h.target;
            let (ok, next) = judge_window(h, &m, plan);
            windows.push((tried, ok, m));
            let Some(rate) = next else {
                return Ok(reported_window(h, windows));
            };
            s.set(rate);
            // Let the backlog and queues of the window drain before measuring again.
            self.settle(s, rate, !ok).await?;
        }
    }

    /// Measure one window of `testDurationMinutes`, the totals restarted. Its seconds are
    /// judged one by one as well (over the bound at the judged percentile, or nothing
    /// acknowledged), to tell one stall from an overload ([`Held::judge`]).
    async fn measure_window(&mut self, plan: &Plan) -> Result<Measured> {
        let stats = self.tasks.stats.clone();
        stats.reset_totals();
        let _ = stats.take_step();
        let start = Snapshot::take(&stats);
        let test_duration = plan.workload.test_duration;
        println!("measuring for {:.0} s", test_duration.as_secs_f64());
        let end = Instant::now() + test_duration;
        let (mut seconds, mut seconds_over) = (0u32, 0u32);
        while Instant::now() < end {
            self.phase("test", (Instant::now() + SEARCH_STEP).min(end), |_| false)
                .await?;
            let second = stats.take_step();
            seconds += 1;
            if second.count == 0 || plan.latency_percentile.of(&second) > plan.latency_bound_ms {
                seconds_over += 1;
            }
        }
        let end = Snapshot::take(&stats);
        let (publish, e2e) = stats.totals();
        Ok(Measured {
            start,
            end,
            publish,
            e2e,
            seconds,
            seconds_over,
        })
    }

    /// Stop the producers and wait for them to end, then the consumers (let go if they were
    /// still held back); a task that failed fails the run. Returns the intervals reported.
    async fn stop(mut self) -> Result<Vec<Interval>> {
        self.tasks.stop_producers.store(true, Ordering::Relaxed);
        while let Some(r) = self.tasks.producers.join_next().await {
            check_task("producer", r)?;
        }
        self.tasks.stop_consumers.store(true, Ordering::Relaxed);
        let _ = self.tasks.resume_tx.send(true);
        while let Some(r) = self.tasks.consumers.join_next().await {
            check_task("consumer", r)?;
        }
        Ok(self.rep.intervals)
    }
}

/// Judge a window of the hold measured at its target ([`Held::judge`]) and say how it went.
/// Returns whether it held and the next rate to measure (None: the hold is done).
fn judge_window(h: &mut Held, m: &Measured, plan: &Plan) -> (bool, Option<f64>) {
    let secs = m.secs();
    let (m0, m1) = (&m.start, &m.end);
    let backlog = |m: &Snapshot| m.backlog() as f64;
    let publish = Percentiles::of(&m.publish);
    let (seconds, seconds_over) = (m.seconds, m.seconds_over);
    let window = Window {
        published: (m1.acked - m0.acked) as f64 / secs,
        read: (m1.consumed - m0.consumed) as f64 / secs,
        latency: plan.latency_percentile.of(&publish),
        backlog_before: backlog(m0),
        backlog_after: backlog(m1),
        skipped: (m1.skipped - m0.skipped) as f64,
        seconds,
        seconds_over,
    };
    let tried = h.target;
    let (ok, next) = h.judge(&window);
    println!(
        "rate {tried:.0} msg/s {} (publish {:.0} msg/s, read {:.0} msg/s, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms, {seconds_over} of {seconds} s over the bound, backlog {:.0} -> {:.0} msg{}){}",
        if ok { "held" } else { "not held" },
        window.published,
        window.read,
        publish.p99,
        publish.p999,
        publish.max,
        window.backlog_before,
        window.backlog_after,
        if window.skipped > 0.0 {
            format!(", {:.0} msg deleted by retention unread", window.skipped)
        } else {
            String::new()
        },
        match next {
            Some(rate) if rate == tried => {
                format!("; one stall only: measuring again at {rate:.0} msg/s")
            }
            Some(rate) => format!("; measuring at {rate:.0} msg/s"),
            None if h.sustained => format!("; highest rate held: {:.0} msg/s", h.target),
            None => "; none held, giving up".to_string(),
        }
    );
    (ok, next)
}

/// Once the hold is done: the windows (rate tried, held, window) at the rate reported count
/// their misses and their highest publish latency into `h`, so that a stall measured again
/// is still reported; the window reported is the one that held at that rate, else the last.
fn reported_window(h: &mut Held, mut windows: Vec<(f64, bool, Measured)>) -> Measured {
    for (rate, ok, m) in &windows {
        if *rate == h.target {
            h.missed_at_target += u32::from(!ok);
            h.max_at_target_ms = h.max_at_target_ms.max(Percentiles::of(&m.publish).max);
        }
    }
    let at = windows
        .iter()
        .position(|(rate, ok, _)| h.sustained && *ok && *rate == h.target)
        .unwrap_or(windows.len() - 1);
    windows.swap_remove(at).2
}

/// The run's result: rates and latencies over the measured window `m`, totals over the
/// whole run (messages deleted unread, bytes published).
fn outcome(
    plan: &Plan,
    started_unix_s: u64,
    stats: &Stats,
    m: &Measured,
    backlog: Option<Backlog>,
    held: Option<Held>,
    intervals: Vec<Interval>,
) -> Outcome {
    let secs = m.secs();
    let (m0, m1) = (&m.start, &m.end);
    Outcome {
        plan: plan.clone(),
        started_unix_s,
        measured_s: secs,
        publish_rate: (m1.acked - m0.acked) as f64 / secs,
        publish_mb: (m1.sent_bytes - m0.sent_bytes) as f64 / secs / MB,
        consume_rate: (m1.consumed - m0.consumed) as f64 / secs,
        consume_mb: (m1.consumed_bytes - m0.consumed_bytes) as f64 / secs / MB,
        publish_errors: m1.errors - m0.errors,
        skipped_msgs: Counters::get(&stats.counters.skipped_msgs),
        publish_latency: Percentiles::of(&m.publish),
        e2e_latency: Percentiles::of(&m.e2e),
        backlog,
        held,
        total_publish_bytes: Counters::get(&stats.counters.sent_bytes),
        intervals,
    }
}

/// Print the run's result line (and the messages retention deleted unread, if any).
fn print_result(out: &Outcome) {
    let p = &out.publish_latency;
    let e = &out.e2e_latency;
    println!(
        "result over {:.1} s: pub {:.0} msg/s {:.1} MB/s | cons {:.0} msg/s {:.1} MB/s | errors {} | pub lat ms avg {:.2} p50 {:.2} p99 {:.2} p99.9 {:.2} max {:.2} | e2e ms avg {:.2} p50 {:.2} p99 {:.2} p99.9 {:.2} max {:.2}",
        out.measured_s, out.publish_rate, out.publish_mb, out.consume_rate, out.consume_mb,
        out.publish_errors, p.avg, p.p50, p.p99, p.p999, p.max, e.avg, e.p50, e.p99, e.p999, e.max
    );
    if out.skipped_msgs > 0 {
        println!(
            "retention deleted {} msg before the consumers read them (over the whole run)",
            out.skipped_msgs
        );
    }
}

fn check_task(
    what: &str,
    r: std::result::Result<Result<()>, tokio::task::JoinError>,
) -> Result<()> {
    match r {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(e.context(format!("{what} failed"))),
        Err(e) => bail!("{what} task failed: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A search from the start rate, one producer, the default latency bound.
    fn search() -> RateSearch {
        RateSearch::new(
            SEARCH_START_RATE,
            Arc::new(AtomicU64::new(0)),
            1.0,
            DEFAULT_LATENCY_BOUND_MS,
            LatencyPercentile::P999,
        )
    }

    #[test]
    fn the_judged_percentile_is_the_one_named() {
        let p = Percentiles {
            p99: 40.0,
            p999: 120.0,
            ..Percentiles::default()
        };
        let p99 = LatencyPercentile::parse("99").unwrap();
        let p999 = LatencyPercentile::parse("99.9").unwrap();
        assert_eq!((p99.of(&p), p999.of(&p)), (40.0, 120.0));
        assert_eq!(LatencyPercentile::default(), p999);
        assert_eq!(LatencyPercentile::parse("p99"), Some(p99));
        assert_eq!(LatencyPercentile::parse("95"), None);
        // A step within the bound at p99 but not at p99.9 passes only when p99 is judged.
        for (percentile, passes) in [(p99, true), (p999, false)] {
            let mut s = RateSearch::new(
                SEARCH_START_RATE,
                Arc::new(AtomicU64::new(0)),
                1.0,
                DEFAULT_LATENCY_BOUND_MS,
                percentile,
            );
            s.priming = 0;
            s.total = 100_000.0;
            let next = s.judge(1.0, 100_000.0, 100_000.0, 0.0, 0.0, percentile.of(&p));
            assert_eq!(next > 100_000.0, passes, "{percentile:?}: next {next}");
        }
    }

    /// A hold from `target`, the default latency bound on the default percentile.
    fn held_from(target: f64) -> Held {
        Held::new(
            target,
            DEFAULT_LATENCY_BOUND_MS,
            LatencyPercentile::default(),
        )
    }

    /// Run the search against a simulated system for `steps` one-second steps; `capacity(i)`
    /// is what producers and consumers can do in step `i`. Returns the rate the search would
    /// settle on after each step.
    fn simulate(steps: usize, capacity: impl Fn(usize) -> f64) -> Vec<f64> {
        // Latency is fine up to 80% of the capacity.
        simulate_with_latency(steps, capacity, 0.8)
    }

    /// Throughput up to `capacity(step)`; publish p99 within the 100 ms bound up to
    /// `knee` x the capacity, far above it beyond.
    fn simulate_with_latency(steps: usize, capacity: impl Fn(usize) -> f64, knee: f64) -> Vec<f64> {
        let mut s = search();
        let mut backlog = 0.0f64;
        let mut settled = Vec::new();
        for i in 0..steps {
            let cap = capacity(i);
            let published = s.total.min(cap);
            // Consumers read what is published plus the backlog, up to the capacity.
            let read = (published + backlog).min(cap);
            let before = backlog;
            backlog = (backlog + published - read).max(0.0);
            let p99 = if s.total <= knee * cap { 5.0 } else { 800.0 };
            let next = s.judge(1.0, published, read, before, backlog, p99);
            s.set(next);
            settled.push(s.settled());
        }
        settled
    }

    #[test]
    fn search_recovers_below_the_floor_after_an_overrun() {
        // A broker that holds 400k with a p99.9 within the bound, and whose every overrun
        // stalls (half the rate acknowledged, a p99.9 far past the bound) and leaves two
        // seconds of the same behind it (writes it queued), whatever the rate then.
        let cap = 400_000.0;
        let mut s = search();
        let mut slow_for = 0;
        let mut settled = Vec::new();
        for _ in 0..40 {
            let mut published = s.total.min(cap);
            let p999 = if s.total > cap {
                slow_for = 2;
                published *= 0.5;
                800.0
            } else if slow_for > 0 {
                slow_for -= 1;
                published *= 0.5;
                800.0
            } else {
                5.0
            };
            let next = s.judge(1.0, published, published, 0.0, 0.0, p999);
            s.set(next);
            settled.push(s.settled());
        }
        assert!(
            settled[30..].iter().all(|r| *r > 300_000.0 && *r <= cap),
            "{settled:?}"
        );
    }

    /// A 20 s window whose latency, when it misses the bound, misses it in every second
    /// (an overload).
    fn window(published: f64, read: f64, latency: f64, backlog: (f64, f64)) -> Window {
        Window {
            published,
            read,
            latency,
            backlog_before: backlog.0,
            backlog_after: backlog.1,
            skipped: 0.0,
            seconds: 20,
            seconds_over: if latency > DEFAULT_LATENCY_BOUND_MS {
                20
            } else {
                0
            },
        }
    }

    /// A 20 s window at `rate` that missed the bound in `over` seconds (one stall: 1 or 2).
    fn stalled(rate: f64, over: u32) -> Window {
        Window {
            seconds_over: over,
            ..window(rate, rate, 700.0, (0.0, 0.0))
        }
    }

    #[test]
    fn a_window_that_missed_on_one_stall_is_measured_again_and_the_second_decides() {
        let held = window(300_000.0, 300_000.0, 40.0, (0.0, 0.0));
        // A stall (2 of 20 s over the bound): the same rate again, and a window that holds
        // there makes it the highest held so far.
        let mut h = held_from(300_000.0);
        assert_eq!(h.judge(&stalled(300_000.0, 2)), (false, Some(300_000.0)));
        let (ok, next) = h.judge(&held);
        assert!(ok);
        assert_eq!(next.map(f64::round), Some(375_000.0));
        assert_eq!((h.attempts, h.remeasured), (2, 1));
        // The second window stalls as well: the rate missed, 5% lower next (the step of a
        // first miss: the window measured again does not count as a rate tried).
        let mut h = held_from(300_000.0);
        h.judge(&stalled(300_000.0, 1));
        assert_eq!(
            h.judge(&stalled(300_000.0, 1)).1.map(f64::round),
            Some(285_000.0)
        );
        // An overload (latency over the bound in 3 s of 20 and more), a backlog that grew or
        // a rate not reached is not a stall: no second window.
        for w in [
            stalled(300_000.0, 3),
            window(300_000.0, 300_000.0, 700.0, (0.0, 2_000_000.0)),
            window(250_000.0, 250_000.0, 700.0, (0.0, 0.0)),
        ] {
            let mut h = held_from(300_000.0);
            let (ok, next) = h.judge(&w);
            assert!(
                !ok && next.is_some_and(|r| r < 300_000.0),
                "{w:?} -> {next:?}"
            );
        }
        // At most SETTLE_REMEASURE_MAX windows of a hold are measured again.
        let mut h = held_from(300_000.0);
        let mut again = 0;
        for _ in 0..20 {
            let rate = h.target;
            match h.judge(&stalled(rate, 1)).1 {
                Some(next) if next == rate => again += 1,
                Some(_) => {}
                None => break,
            }
        }
        assert_eq!(again, SETTLE_REMEASURE_MAX);
        assert_eq!(h.attempts, SETTLE_ATTEMPTS + SETTLE_REMEASURE_MAX);
        assert!(!h.sustained);
    }

    #[test]
    fn paced_seconds_count_the_windows_the_broker_kept_pace_in() {
        let mut h = held_from(300_000.0);
        // Kept pace: a stall (2 of 20 s over), then a window that held.
        h.judge(&stalled(300_000.0, 2));
        h.judge(&window(300_000.0, 300_000.0, 40.0, (0.0, 0.0)));
        assert_eq!((h.paced_seconds, h.paced_seconds_over), (40, 2));
        // Did not: the backlog grew, or the rate was not reached; their seconds over the
        // bound are an overload's, not stalls below capacity.
        let rate = h.target;
        h.judge(&window(rate, rate, 700.0, (0.0, 2_000_000.0)));
        let rate = h.target;
        h.judge(&window(0.8 * rate, 0.8 * rate, 700.0, (0.0, 0.0)));
        assert_eq!((h.paced_seconds, h.paced_seconds_over), (40, 2));
        // Kept pace and missed on latency in most seconds: counted.
        let rate = h.target;
        h.judge(&window(rate, rate, 700.0, (0.0, 0.0)));
        assert_eq!((h.paced_seconds, h.paced_seconds_over), (60, 22));
    }

    /// Run the hold against a broker that holds `capacity` msg/s with a p99.9 within the
    /// bound, whose windows past it miss (the latency), starting at `settled`. Returns the
    /// rates tried and the hold's outcome.
    fn hold(settled: f64, capacity: f64) -> (Vec<f64>, Held) {
        let mut h = held_from(settled);
        let mut tried = Vec::new();
        loop {
            let rate = h.target;
            tried.push(rate.round());
            // Past the capacity producers are held back: a little over it is acknowledged.
            let (published, p999) = if rate <= capacity {
                (rate, 40.0)
            } else {
                (rate.min(1.1 * capacity), 300.0)
            };
            let (ok, next) = h.judge(&window(published, published, p999, (0.0, 0.0)));
            assert_eq!(ok, rate <= capacity);
            if next.is_none() {
                return (tried, h);
            }
        }
    }

    #[test]
    fn hold_finds_the_highest_rate_a_window_holds_from_either_side() {
        // From far below (the search missed on one bad second): up 25% a window, 50% after
        // three raises, then halfway between, to within 5% (or the windows run out).
        let (tried, h) = hold(200_000.0, 445_000.0);
        assert_eq!(
            tried,
            [
                200_000.0, 250_000.0, 312_500.0, 390_625.0, 585_938.0, 488_281.0, 439_453.0,
                463_867.0, 451_660.0
            ]
        );
        assert!(h.sustained && h.target.round() == 439_453.0, "{h:?}");
        // From above (a search a buffer fooled): down 5%, then 10%, then between.
        let (tried, h) = hold(500_000.0, 445_000.0);
        assert_eq!(
            tried,
            [500_000.0, 465_025.0, 418_523.0, 441_774.0, 453_399.0]
        );
        assert!(h.sustained && h.target.round() == 441_774.0, "{h:?}");
        // Wherever the search settled, runs end within 10% of each other.
        let ends: Vec<f64> = [150_000.0, 250_000.0, 380_000.0, 450_000.0, 600_000.0]
            .iter()
            .map(|s| hold(*s, 445_000.0).1.target)
            .collect();
        let (lo, hi) = ends
            .iter()
            .fold((f64::MAX, 0.0f64), |(l, h), r| (l.min(*r), h.max(*r)));
        assert!(hi <= 445_000.0 && hi / lo <= 1.1, "{ends:?}");
        // Nothing held: the last window tried is reported, not held.
        let (tried, h) = hold(400_000.0, 10.0);
        assert_eq!(tried.len() as u32, SETTLE_ATTEMPTS);
        assert!(
            !h.sustained && h.target.round() == *tried.last().unwrap(),
            "{h:?}"
        );
    }

    #[test]
    fn a_window_whose_consumers_lost_messages_to_retention_did_not_hold() {
        // Consumers a whole retention behind restart from the log start: the messages
        // deleted unread leave the backlog without being read, so its end can look flat.
        let mut h = held_from(1_000_000.0);
        let w = Window {
            skipped: 2_000_000.0,
            ..window(1_000_000.0, 1_000_000.0, 40.0, (100_000.0, 100_000.0))
        };
        let (ok, next) = h.judge(&w);
        assert!(!ok && next.is_some_and(|r| r < 1_000_000.0), "{next:?}");
        assert_eq!(h.paced_seconds, 0);
    }

    #[test]
    fn hold_climbs_from_a_search_that_settled_far_too_low() {
        // Searches that settled at 75k-94k msg/s after slow seconds in their first minute,
        // where windows held 450k-570k: 25% a window, the budget ran out at 447k still
        // holding, or at 450k on the first miss (562k) with no window between.
        let capacity = 530_000.0;
        for settled in [75_000.0, 94_276.0, 124_523.0, 200_000.0] {
            let (tried, h) = hold(settled, capacity);
            assert!(
                h.sustained
                    && h.target <= capacity
                    && h.target * (1.0 + SETTLE_PRECISION) >= capacity,
                "settled {settled}: {tried:?} -> {h:?}"
            );
            assert!(tried.len() as u32 <= SETTLE_ATTEMPTS + SETTLE_BISECT_EXTRA);
        }
    }

    #[test]
    fn hold_comes_down_from_a_search_that_settled_far_too_high() {
        // Kafka: one-second steps passed at 232k msg/s, whole windows reach any rate but
        // keep the latency bound only up to the capacity. The steps down grow (5%, 10%,
        // 20%, 40%) until a window holds, then the hold bisects.
        for capacity in [40_000.0, 65_000.0, 100_000.0, 150_000.0] {
            let mut h = held_from(232_000.0);
            let mut tried = Vec::new();
            loop {
                let rate = h.target;
                tried.push(rate.round());
                let p999 = if rate <= capacity { 40.0 } else { 300.0 };
                let (_, next) = h.judge(&window(rate, rate, p999, (0.0, 0.0)));
                if next.is_none() {
                    break;
                }
            }
            assert!(
                h.sustained && h.target <= capacity && h.target >= 0.9 * capacity,
                "capacity {capacity}: {tried:?} -> {h:?}"
            );
            if capacity == 65_000.0 {
                assert_eq!(
                    tried[..5],
                    [232_000.0, 220_400.0, 198_360.0, 158_688.0, 95_213.0]
                );
            }
        }
    }

    #[test]
    fn hold_steps_down_from_what_a_window_reached() {
        let next = |target: f64, w: Window| held_from(target).judge(&w);
        // Held: rate reached, p99.9 within the bound, backlog a second's worth at most.
        let (ok, _) = next(
            300_000.0,
            window(299_000.0, 299_000.0, 40.0, (0.0, 200_000.0)),
        );
        assert!(ok);
        // Only the latency missed: 5% lower.
        let (ok, rate) = next(300_000.0, window(300_000.0, 300_000.0, 150.0, (0.0, 0.0)));
        assert!(!ok);
        assert_eq!(rate.map(f64::round), Some(285_000.0));
        // Producers and consumers fell short without a growing backlog: 5% below the lower.
        let (_, rate) = next(300_000.0, window(250_000.0, 240_000.0, 40.0, (0.0, 0.0)));
        assert_eq!(rate.map(f64::round), Some(228_000.0));
        // An overrun (the backlog grew by millions, consumers reading from storage at 180k):
        // 5% below what was published, not below the consumers' rate.
        let (_, rate) = next(
            430_000.0,
            window(300_000.0, 180_000.0, 2000.0, (10_000.0, 2_500_000.0)),
        );
        assert_eq!(rate.map(f64::round), Some(285_000.0));
        // Never below half the target.
        let (_, rate) = next(400_000.0, window(50_000.0, 50_000.0, 2000.0, (0.0, 0.0)));
        assert_eq!(rate.map(f64::round), Some(190_000.0));
    }

    #[test]
    fn one_slow_second_does_not_set_the_ceiling() {
        // A broker that holds 400k with its latency within the bound, except for one second
        // of a 300 ms p99.9 (a burst of segment deletions) at step 2, whatever the rate.
        let cap = 400_000.0;
        let mut s = search();
        let mut settled = Vec::new();
        for i in 0..30 {
            let published = s.total.min(cap);
            let p999 = if i == SEARCH_PRIME_STEPS as usize + 2 || s.total > cap {
                300.0
            } else {
                5.0
            };
            let next = s.judge(1.0, published, published, 0.0, 0.0, p999);
            s.set(next);
            settled.push(s.settled());
        }
        assert!(
            settled[12..].iter().all(|r| *r > 340_000.0 && *r <= cap),
            "{settled:?}"
        );
    }

    #[test]
    fn a_start_up_stall_neither_sets_a_ceiling_nor_sinks_the_search() {
        // Kafka's first seconds of load: two seconds of a 0.7 s and 0.3 s p99.9 with little
        // acknowledged, then 100k msg/s within the bound. The priming steps take them.
        let cap = 100_000.0;
        let run = |stalls: &[usize]| {
            let mut s = search();
            let mut tried = Vec::new();
            let mut settled = Vec::new();
            for i in 0..40 {
                tried.push(s.total);
                let stalled = stalls.contains(&i);
                let published = if stalled { 0.1 } else { 1.0 } * s.total.min(cap);
                let p999 = if stalled || s.total > cap { 700.0 } else { 5.0 };
                let next = s.judge(1.0, published, published, 0.0, 0.0, p999);
                s.set(next);
                settled.push(s.settled());
            }
            (tried, settled)
        };
        let (tried, settled) = run(&[0, 1]);
        let primed = SEARCH_PRIME_STEPS as usize;
        assert!(
            tried[..primed].iter().all(|r| *r == SEARCH_PRIME_RATE),
            "{tried:?}"
        );
        assert_eq!(tried[primed], SEARCH_START_RATE);
        assert!(
            settled[30..].iter().all(|r| *r > 80_000.0 && *r <= cap),
            "{settled:?}"
        );
        // The same two seconds once judged (right after the priming): each miss with
        // little reached takes the rate down to 90% of half, not to the slowest rate (1k),
        // and the search climbs back.
        let (tried, settled) = run(&[primed, primed + 1]);
        let lowest = tried[primed..].iter().copied().fold(f64::MAX, f64::min);
        assert!(lowest >= 0.45 * 0.45 * SEARCH_START_RATE, "{tried:?}");
        assert!(
            settled[30..].iter().all(|r| *r > 80_000.0 && *r <= cap),
            "{settled:?}"
        );
    }

    #[test]
    fn search_settles_near_capacity() {
        let t = simulate_with_latency(40, |_| 1_000_000.0, 1.0);
        let last = &t[30..];
        assert!(
            last.iter().all(|r| *r > 800_000.0 && *r < 1_200_000.0),
            "{t:?}"
        );
    }

    #[test]
    fn search_settles_below_the_latency_knee() {
        // Throughput up to 1M, but the p99 bound holds only up to 600k.
        let t = simulate_with_latency(40, |_| 1_000_000.0, 0.6);
        let last = &t[30..];
        assert!(
            last.iter().all(|r| *r > 450_000.0 && *r < 700_000.0),
            "{t:?}"
        );
    }

    #[test]
    fn search_comes_down_when_a_passed_rate_stops_holding() {
        // A first fast burst passes 4M; afterwards the system does 2M.
        let burst = SEARCH_PRIME_STEPS as usize + 14;
        let t = simulate(45, |i| if i < burst { 8_000_000.0 } else { 2_000_000.0 });
        assert!(t[..burst].iter().any(|r| *r >= 4_000_000.0), "{t:?}");
        let last = &t[30..];
        assert!(
            last.iter().all(|r| *r < 2_400_000.0 && *r > 1_500_000.0),
            "{t:?}"
        );
    }

    #[test]
    fn a_subscriptions_consumers_share_its_partitions_round_robin_by_leader() {
        let leaders = [1, 2, 1, 2, 1];
        let start = [10, 11, 12, 13, 14];
        let of = |c| consumer_partitions(c, 2, &leaders, &start);
        assert_eq!(
            of(0),
            BTreeMap::from([(1, vec![(0, 10), (2, 12), (4, 14)])])
        );
        assert_eq!(of(1), BTreeMap::from([(2, vec![(1, 11), (3, 13)])]));
        // More consumers than partitions: the last ones read nothing.
        assert!(consumer_partitions(5, 6, &leaders, &start).is_empty());
        let one = consumer_partitions(0, 1, &leaders, &start);
        assert_eq!(one[&1], [(0, 10), (2, 12), (4, 14)]);
        assert_eq!(one[&2], [(1, 11), (3, 13)]);
    }
}

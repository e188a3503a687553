//! Incremental fetch sessions (KIP-227): the broker remembers which partitions a consumer
//! fetches so later requests only name what changed, and responses only carry partitions with
//! news (records, an error, or a moved high watermark / log start offset).
//!
//! The rules, as Kafka's FetchManager keeps them:
//! - epoch 0 is a full fetch that opens a new session; a session id sent with it names the
//!   client's previous session, which is closed (this is how a client resets its session
//!   after an error);
//! - epoch -1 (final) closes the named session and fetches without one;
//! - any other epoch must be the session's next one. The epoch advances when the request is
//!   accepted, not when it is answered, and the session stays in the cache while the fetch
//!   waits: a fetch abandoned by its client (a closed connection, a cancelled request) leaves
//!   a session the client can go on with, or reset.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use uuid::Uuid;

/// Sessions held at most (Kafka's max.incremental.fetch.session.cache.slots default).
pub(crate) const MAX_SESSIONS: usize = 1000;
/// A session not used for this long is dropped.
const SESSION_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// One partition a fetch reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Target {
    pub(crate) topic: String,
    pub(crate) topic_id: Uuid,
    pub(crate) partition: i32,
    pub(crate) fetch_offset: i64,
    pub(crate) max_bytes: i32,
    /// The leader epoch the client believes current (KIP-320); -1: no check.
    pub(crate) current_leader_epoch: i32,
    /// The log start offset the fetcher says it has (a read replica's poll: the one it
    /// knows; -1 from consumers).
    pub(crate) log_start: i64,
    /// What was last reported to the client: (high watermark, log start offset, last stable
    /// offset).
    pub(crate) reported: Option<(i64, i64, i64)>,
}

#[derive(Debug)]
struct Session {
    /// The epoch the next request must carry.
    next_epoch: i32,
    targets: Vec<Target>,
    last_used: Instant,
}

/// The request a fetch holds on its session: answered with [`FetchSessions::finish`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ticket {
    pub(crate) id: i32,
    /// The session's next epoch once this request was accepted.
    next_epoch: i32,
}

#[derive(Debug, Default)]
pub(crate) struct FetchSessions {
    inner: Mutex<Inner>,
    evictions: AtomicU64,
}

#[derive(Debug, Default)]
struct Inner {
    next_id: i32,
    sessions: HashMap<i32, Session>,
}

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum SessionError {
    NotFound,
    InvalidEpoch,
}

/// The epoch after `epoch` (wrapping to 1, never to 0 or -1).
fn next(epoch: i32) -> i32 {
    epoch.checked_add(1).filter(|n| *n > 0).unwrap_or(1)
}

impl FetchSessions {
    /// Open a session for a full fetch (epoch 0), closing `previous` (the client's session
    /// before it reset; 0: none). Returns the ticket, whose id is 0 ("no session", which
    /// clients accept) only if the cache holds no session at all to make room with.
    pub(crate) fn create(&self, previous: i32, targets: Vec<Target>) -> Ticket {
        let mut inner = self.inner.lock();
        if previous != 0 {
            inner.sessions.remove(&previous);
        }
        if inner.sessions.len() >= MAX_SESSIONS {
            let oldest = inner
                .sessions
                .iter()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(id, _)| *id);
            if let Some(id) = oldest {
                inner.sessions.remove(&id);
                self.evictions.fetch_add(1, Ordering::Relaxed);
            }
        }
        let mut id = next(inner.next_id);
        while inner.sessions.contains_key(&id) {
            id = next(id);
        }
        inner.next_id = id;
        inner.sessions.insert(
            id,
            Session {
                next_epoch: 1,
                targets,
                last_used: Instant::now(),
            },
        );
        Ticket { id, next_epoch: 1 }
    }

    /// Accept an incremental fetch at `epoch` on session `id`: `change` applies the request's
    /// added, changed and forgotten partitions to the session, whose epoch advances. Returns
    /// the ticket and the partitions the fetch reads.
    pub(crate) fn begin(
        &self,
        id: i32,
        epoch: i32,
        change: impl FnOnce(&mut Vec<Target>),
    ) -> Result<(Ticket, Vec<Target>), SessionError> {
        let mut inner = self.inner.lock();
        let session = inner.sessions.get_mut(&id).ok_or(SessionError::NotFound)?;
        if session.next_epoch != epoch {
            return Err(SessionError::InvalidEpoch);
        }
        change(&mut session.targets);
        session.next_epoch = next(epoch);
        session.last_used = Instant::now();
        Ok((
            Ticket {
                id,
                next_epoch: session.next_epoch,
            },
            session.targets.clone(),
        ))
    }

    /// Remember what the answer to `ticket`'s request reported, unless a later request on
    /// the session was accepted meanwhile (it holds the newer state) or the session is gone.
    pub(crate) fn finish(&self, ticket: Ticket, targets: Vec<Target>) {
        if let Some(s) = self.inner.lock().sessions.get_mut(&ticket.id) {
            if s.next_epoch == ticket.next_epoch {
                s.targets = targets;
                s.last_used = Instant::now();
            }
        }
    }

    pub(crate) fn remove(&self, id: i32) {
        self.inner.lock().sessions.remove(&id);
    }

    pub(crate) fn expire(&self) {
        let now = Instant::now();
        self.inner
            .lock()
            .sessions
            .retain(|_, s| now.duration_since(s.last_used) < SESSION_IDLE_TIMEOUT);
    }

    /// (sessions held, partitions they hold, sessions evicted to make room since start).
    pub(crate) fn stats(&self) -> (usize, usize, u64) {
        let inner = self.inner.lock();
        let partitions = inner.sessions.values().map(|s| s.targets.len()).sum();
        (
            inner.sessions.len(),
            partitions,
            self.evictions.load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(partition: i32, offset: i64) -> Target {
        Target {
            topic: "t".into(),
            topic_id: Uuid::nil(),
            partition,
            fetch_offset: offset,
            max_bytes: 1024,
            current_leader_epoch: -1,
            log_start: -1,
            reported: None,
        }
    }

    #[test]
    fn epoch_advances_when_accepted_and_a_reset_closes_the_old_session() {
        let s = FetchSessions::default();
        let t = s.create(0, vec![target(0, 0)]);
        assert_eq!(
            s.begin(t.id, 0, |_| {}).unwrap_err(),
            SessionError::InvalidEpoch
        );
        // A fetch that is never answered (its client went away) still moved the epoch.
        let (_lost, _) = s.begin(t.id, 1, |_| {}).unwrap();
        assert_eq!(
            s.begin(t.id, 1, |_| {}).unwrap_err(),
            SessionError::InvalidEpoch
        );
        let (t2, read) = s.begin(t.id, 2, |v| v.push(target(1, 5))).unwrap();
        assert_eq!(read.len(), 2);
        s.finish(t2, read);
        // The client resets: epoch 0 with its old id opens a new session and closes the old.
        let fresh = s.create(t.id, vec![target(0, 7)]);
        assert_ne!(fresh.id, t.id);
        assert_eq!(
            s.begin(t.id, 3, |_| {}).unwrap_err(),
            SessionError::NotFound
        );
        assert!(s.begin(fresh.id, 1, |_| {}).is_ok());
        assert_eq!(s.stats().0, 1);
    }

    #[test]
    fn an_answer_overtaken_by_a_later_request_does_not_overwrite_it() {
        let s = FetchSessions::default();
        let t = s.create(0, vec![target(0, 0)]);
        let (slow, mut slow_targets) = s.begin(t.id, 1, |_| {}).unwrap();
        let (fast, mut fast_targets) = s.begin(t.id, 2, |v| v[0].fetch_offset = 9).unwrap();
        fast_targets[0].reported = Some((9, 0, 9));
        s.finish(fast, fast_targets);
        slow_targets[0].reported = Some((3, 0, 3));
        s.finish(slow, slow_targets);
        let (_, now) = s.begin(t.id, 3, |_| {}).unwrap();
        assert_eq!(now[0].fetch_offset, 9);
        assert_eq!(now[0].reported, Some((9, 0, 9)));
    }

    #[test]
    fn a_full_cache_evicts_the_least_recently_used() {
        let s = FetchSessions::default();
        let first = s.create(0, Vec::new());
        for _ in 1..MAX_SESSIONS {
            s.create(0, Vec::new());
        }
        s.begin(first.id, 1, |_| {}).unwrap();
        let newest = s.create(0, Vec::new());
        assert_eq!(s.stats(), (MAX_SESSIONS, 0, 1));
        assert!(
            s.begin(first.id, 2, |_| {}).is_ok(),
            "the recently used one stays"
        );
        assert!(s.begin(newest.id, 1, |_| {}).is_ok());
    }
}

//! Incremental fetch sessions (KIP-227): the broker remembers which partitions a consumer
//! fetches so later requests only name what changed, and responses only carry partitions with
//! news (records, an error, or a moved high watermark / log start offset).

use std::collections::HashMap;
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
    /// What was last reported to the client: (high watermark, log start offset, last stable
    /// offset).
    pub(crate) reported: Option<(i64, i64, i64)>,
}

#[derive(Debug)]
pub(crate) struct Session {
    /// The epoch the next request must carry.
    pub(crate) next_epoch: i32,
    pub(crate) targets: Vec<Target>,
    last_used: Instant,
}

#[derive(Debug, Default)]
pub(crate) struct FetchSessions {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    next_id: i32,
    sessions: HashMap<i32, Session>,
}

pub(crate) enum SessionError {
    NotFound,
    InvalidEpoch,
}

impl FetchSessions {
    /// Create a session for a full fetch; returns its id (0 if the cache is full and nothing
    /// could be evicted, meaning "no session", which clients accept).
    pub(crate) fn create(&self, targets: Vec<Target>) -> i32 {
        let mut inner = self.inner.lock();
        if inner.sessions.len() >= MAX_SESSIONS {
            let oldest = inner
                .sessions
                .iter()
                .min_by_key(|(_, s)| s.last_used)
                .map(|(id, _)| *id);
            if let Some(id) = oldest {
                inner.sessions.remove(&id);
            }
        }
        inner.next_id = inner.next_id.checked_add(1).filter(|n| *n > 0).unwrap_or(1);
        let id = inner.next_id;
        inner.sessions.insert(
            id,
            Session {
                next_epoch: 1,
                targets,
                last_used: Instant::now(),
            },
        );
        id
    }

    /// Take a session out for an incremental fetch at `epoch`; give it back with [`put`].
    pub(crate) fn take(&self, id: i32, epoch: i32) -> Result<Session, SessionError> {
        let mut inner = self.inner.lock();
        let session = inner.sessions.get(&id).ok_or(SessionError::NotFound)?;
        if session.next_epoch != epoch {
            return Err(SessionError::InvalidEpoch);
        }
        inner.sessions.remove(&id).ok_or(SessionError::NotFound)
    }

    pub(crate) fn put(&self, id: i32, mut session: Session) {
        session.last_used = Instant::now();
        session.next_epoch = session
            .next_epoch
            .checked_add(1)
            .filter(|n| *n > 0)
            .unwrap_or(1);
        self.inner.lock().sessions.insert(id, session);
    }

    pub(crate) fn remove(&self, id: i32) {
        self.inner.lock().sessions.remove(&id);
    }

    /// Remember what a full fetch reported, for the next incremental one.
    pub(crate) fn update_reported(&self, id: i32, targets: Vec<Target>) {
        if let Some(s) = self.inner.lock().sessions.get_mut(&id) {
            s.targets = targets;
        }
    }

    pub(crate) fn expire(&self) {
        let now = Instant::now();
        self.inner
            .lock()
            .sessions
            .retain(|_, s| now.duration_since(s.last_used) < SESSION_IDLE_TIMEOUT);
    }
}

//! KIP-392 read replicas on a shared volume: this broker serves fetches of partitions other
//! brokers own, straight from their files, never past what their owner has published
//! (docs/cluster.md, "Read replicas").
//!
//! A partition is read here once a consumer fetches it ([`Readers::replica`]): a
//! [`Replica`] holds the store's reader of its directory and the owner and leader epoch the
//! cluster's records named then. What the owner has published (high watermark, last stable
//! offset, log start) is learned by one long-polling task per owner ([`poll_owner`]): a
//! Fetch from this broker (a follower's, `replica_id` this node) naming every partition read
//! here that the owner owns, with the high watermark and log start this broker knows; the
//! owner reads no records for it and answers when one of them moved, or after
//! [`POLL_WAIT`]. Until the first answer a replica has nothing to serve (its fetches wait,
//! then are answered NOT_LEADER_OR_FOLLOWER, and the client goes back to the owner); when the
//! owner stops answering it serves up to the last offsets it learned for [`ANSWER_STALE`],
//! then nothing. As an owner, this broker notes the log start each reader's poll says it
//! knows ([`Readers::note_poll`]): a DeleteRecords is answered once every reader knows the
//! new one (`apis/delete_records.rs`). A replica whose owner
//! or epoch changed in the records is dropped at once (the next fetch makes a new one): a new
//! owner may cut what lay past the old one's published end and write other bytes there.
//! Replicas nobody fetched for [`IDLE`] are dropped.

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, RequestKind, ResponseKind};
use kafka_protocol::ResponseError;
use parking_lot::Mutex;
use sluice_store::{Published, ReplicaReader, TopicPartition};
use tokio::sync::Notify;

use crate::Broker;

/// How long the owner holds a poll without news.
pub(crate) const POLL_WAIT: Duration = Duration::from_millis(500);
/// A replica nobody fetched for this long is dropped (and its owner no longer polled for it).
const IDLE: Duration = Duration::from_secs(60);
/// How long a new replica waits for its owner's first answer before its fetches are sent
/// back to the owner.
const FIRST_ANSWER: Duration = Duration::from_secs(1);
/// A replica whose owner has not answered for this long serves nothing (see
/// [`Replica::stale`]).
const ANSWER_STALE: Duration = Duration::from_secs(5);
/// As an owner: a reader that has not polled a partition for this long (twice
/// [`ANSWER_STALE`]: it has stopped serving it) is not waited for.
const READER_GONE: Duration = Duration::from_secs(10);
/// As an owner: how long a reader that was sent consumers may take to start polling.
const SEND_TRIAL: Duration = Duration::from_secs(3);
/// As an owner: after this long a reader that did not poll is sent consumers again.
const SEND_RETRY: Duration = Duration::from_secs(30);
/// As an owner: entries of [`Readers::may_send`] kept before old ones are swept.
const SENT_MAX: usize = 100_000;
/// Wait after a failed poll before the next.
const RETRY: Duration = Duration::from_millis(200);
/// Fetch version of the polls: 13, topics by id, so that an answer about another
/// incarnation of a topic's name is never taken for this one's.
const POLL_VERSION: i16 = 13;

/// One partition another broker owns, read here.
#[derive(Debug)]
pub(crate) struct Replica {
    pub(crate) tp: TopicPartition,
    pub(crate) reader: ReplicaReader,
    /// The topic incarnation, owner and leader epoch the records named when this replica
    /// was made.
    pub(crate) topic_id: uuid::Uuid,
    pub(crate) owner: i32,
    pub(crate) epoch: i32,
    /// When it was made: one that has learned nothing from its owner within
    /// [`FIRST_ANSWER`] answers NOT_LEADER_OR_FOLLOWER, and its consumers go to the owner.
    created: Instant,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// What the owner had published at its last answer; None before the first.
    published: Option<Published>,
    /// When the owner last answered.
    answered_at: Option<Instant>,
    last_used: Instant,
    /// Fetches waiting here for news (held weakly: a finished fetch needs no removal).
    waiters: Vec<Weak<Notify>>,
}

impl Replica {
    /// What the owner has published, as last learned; None before the first answer.
    pub(crate) fn published(&self) -> Option<Published> {
        self.state.lock().published
    }

    /// Whether it has waited longer than [`FIRST_ANSWER`] for its owner's first answer.
    pub(crate) fn unanswered(&self) -> bool {
        self.published().is_none() && self.created.elapsed() >= FIRST_ANSWER
    }

    /// Wake `waiter` when what the owner published changes (until `waiter` is dropped).
    pub(crate) fn register(&self, waiter: &Arc<Notify>) {
        let mut s = self.state.lock();
        s.waiters.retain(|w| w.strong_count() > 0);
        s.waiters.push(Arc::downgrade(waiter));
    }

    /// Whether its owner has not answered for [`ANSWER_STALE`]: it serves nothing then (its
    /// consumers go to the owner), since the owner stops waiting for it after
    /// [`READER_GONE`] (DeleteRecords, [`Readers::readers_behind`]).
    pub(crate) fn stale(&self) -> bool {
        self.state
            .lock()
            .answered_at
            .is_some_and(|t| t.elapsed() >= ANSWER_STALE)
    }

    /// Take an owner's answer. Never backwards: an owner's published offsets only grow, and
    /// two polls (the first one and the long one, on different connections) may answer out
    /// of order, so each offset is the larger of what was known and what was answered.
    fn learn(&self, answered: Published) {
        let mut s = self.state.lock();
        s.answered_at = Some(Instant::now());
        let published = match s.published {
            Some(p) => Published {
                log_start: p.log_start.max(answered.log_start),
                high_watermark: p.high_watermark.max(answered.high_watermark),
                last_stable: p.last_stable.max(answered.last_stable),
            },
            None => answered,
        };
        if s.published == Some(published) {
            return;
        }
        s.published = Some(published);
        s.waiters.retain(|w| match w.upgrade() {
            Some(n) => {
                n.notify_one();
                true
            }
            None => false,
        });
    }
}

/// The replicas this broker reads, and the owners it polls.
#[derive(Debug, Default)]
pub(crate) struct Readers {
    parts: Mutex<HashMap<TopicPartition, Arc<Replica>>>,
    /// Owners with a poll task running.
    polled: Mutex<BTreeSet<i32>>,
    /// Record bytes served from replicas.
    pub(crate) bytes: AtomicU64,
    /// Polls sent to owners.
    polls: AtomicU64,
    /// Fetch answers that named a preferred read replica (as an owner).
    pub(crate) redirects: AtomicU64,
    /// As an owner: the log start each reader's last poll of a partition said it knows, and
    /// when (a DeleteRecords is answered once every reader knows its new start).
    polled_by: Mutex<HashMap<(uuid::Uuid, i32), PolledBy>>,
    /// As an owner: when it first sent consumers of a partition to a reader, by (topic id,
    /// partition, reader) ([`Readers::may_send`]).
    sent: Mutex<HashMap<(uuid::Uuid, i32, i32), Instant>>,
}

/// As an owner, per reader node: the log start its last poll of a partition said it knows,
/// and when.
type PolledBy = HashMap<i32, (i64, Instant)>;

/// What the metrics page shows of the read replicas.
#[derive(Debug, Default)]
pub(crate) struct Totals {
    pub(crate) partitions: usize,
    pub(crate) bytes: u64,
    pub(crate) polls: u64,
    pub(crate) redirects: u64,
}

impl Readers {
    /// As an owner: reader `node` polled these partitions (topic id, partition, the log start
    /// it says it knows). A `whole` poll (the long one, not a new replica's first) names every
    /// partition the reader reads from this broker: it no longer reads the others.
    pub(crate) fn note_poll(&self, node: i32, polled: &[(uuid::Uuid, i32, i64)], whole: bool) {
        let now = Instant::now();
        let mut by = self.polled_by.lock();
        if whole {
            let named: std::collections::HashSet<(uuid::Uuid, i32)> =
                polled.iter().map(|(id, p, _)| (*id, *p)).collect();
            by.retain(|key, readers| {
                if !named.contains(key) {
                    readers.remove(&node);
                }
                !readers.is_empty()
            });
        }
        for (id, p, log_start) in polled {
            by.entry((*id, *p))
                .or_default()
                .insert(node, (*log_start, now));
        }
    }

    /// As an owner: whether a reader that polled partition `partition` of topic `topic_id`
    /// within [`READER_GONE`] still knows a log start below `start` (those gone longer are
    /// forgotten here).
    pub(crate) fn readers_behind(&self, topic_id: uuid::Uuid, partition: i32, start: i64) -> bool {
        let mut by = self.polled_by.lock();
        let tp = (topic_id, partition);
        let Some(readers) = by.get_mut(&tp) else {
            return false;
        };
        readers.retain(|_, (_, at)| at.elapsed() < READER_GONE);
        let behind = readers.values().any(|(known, _)| *known < start);
        if readers.is_empty() {
            by.remove(&tp);
        }
        behind
    }

    /// As an owner: whether consumers of a partition may be sent to reader `node`: it polls
    /// it (within [`ANSWER_STALE`]), or it was first sent them less than [`SEND_TRIAL`] ago
    /// (time to start polling), or [`SEND_RETRY`] ago or more (tried again). A reader that was
    /// sent consumers and does not poll (it cannot reach this broker) is not sent more in
    /// between: they are served here.
    pub(crate) fn may_send(&self, topic_id: uuid::Uuid, partition: i32, node: i32) -> bool {
        let polls = self
            .polled_by
            .lock()
            .get(&(topic_id, partition))
            .and_then(|r| r.get(&node).map(|(_, at)| at.elapsed() < ANSWER_STALE))
            .unwrap_or(false);
        if polls {
            return true;
        }
        let mut sent = self.sent.lock();
        if sent.len() > SENT_MAX {
            sent.retain(|_, at| at.elapsed() < SEND_RETRY);
        }
        let at = sent
            .entry((topic_id, partition, node))
            .or_insert_with(Instant::now);
        if at.elapsed() >= SEND_RETRY {
            *at = Instant::now();
        }
        at.elapsed() < SEND_TRIAL
    }

    pub(crate) fn totals(&self) -> Totals {
        Totals {
            partitions: self.parts.lock().len(),
            bytes: self.bytes.load(Ordering::Relaxed),
            polls: self.polls.load(Ordering::Relaxed),
            redirects: self.redirects.load(Ordering::Relaxed),
        }
    }

    /// The replica of `tp` (of topic `topic_id`) to serve a fetch from, owned by `owner` at
    /// `epoch` as the records say now: the one kept if it was made for that incarnation,
    /// owner and epoch, else a new one on the partition's directory (None: no log dir holds
    /// it), and the owner's poll task started if none runs.
    pub(crate) fn replica(
        &self,
        broker: &Broker,
        tp: &TopicPartition,
        (topic_id, owner, epoch): (uuid::Uuid, i32, i32),
    ) -> Option<Arc<Replica>> {
        let key = (topic_id, owner, epoch);
        if let Some(r) = self.parts.lock().get(tp) {
            if (r.topic_id, r.owner, r.epoch) == key {
                r.state.lock().last_used = Instant::now();
                return Some(r.clone());
            }
        }
        // Looked up outside the lock (it reads the volume).
        let dir = broker.logs.partition_dir(tp, topic_id)?;
        let made = Arc::new(Replica {
            tp: tp.clone(),
            reader: ReplicaReader::new(tp.clone(), dir).of_topic(topic_id),
            topic_id,
            owner,
            epoch,
            created: Instant::now(),
            state: Mutex::new(State {
                published: None,
                answered_at: None,
                last_used: Instant::now(),
                waiters: Vec::new(),
            }),
        });
        let replica = {
            let mut parts = self.parts.lock();
            match parts.get(tp) {
                // Made meanwhile by another fetch.
                Some(r) if (r.topic_id, r.owner, r.epoch) == key => r.clone(),
                _ => {
                    parts.insert(tp.clone(), made.clone());
                    made.clone()
                }
            }
        };
        if let Some(b) = broker.arc() {
            if Arc::ptr_eq(&replica, &made) {
                // Its first offsets at once, not after the owner's poll in flight returns.
                tokio::spawn(first_answer(Arc::downgrade(&b), made.clone()));
            }
            if self.polled.lock().insert(owner) {
                tokio::spawn(poll_owner(Arc::downgrade(&b), owner));
            }
        }
        Some(replica)
    }

    /// The replicas the poll of `owner` names: those made for it whose records still name it
    /// at their epoch and that were fetched within [`IDLE`]; the others are dropped.
    fn of_owner(&self, broker: &Broker, owner: i32) -> Vec<Arc<Replica>> {
        let mut parts = self.parts.lock();
        parts.retain(|tp, r| {
            let current =
                broker.owner_of(&tp.topic, tp.partition) == Some((r.topic_id, r.owner, r.epoch));
            current && r.state.lock().last_used.elapsed() < IDLE
        });
        let mut of: Vec<Arc<Replica>> = parts
            .values()
            .filter(|r| r.owner == owner)
            .cloned()
            .collect();
        // One entry per topic in the poll.
        of.sort_by_key(|r| (r.topic_id, r.tp.partition));
        of
    }

    /// Drop `replica` if its directory is no longer where the partition's files are (its
    /// owner moved it to another log dir): the next fetch makes one on the new directory.
    pub(crate) fn drop_if_moved(&self, broker: &Broker, replica: &Arc<Replica>) {
        let now = broker.logs.partition_dir(&replica.tp, replica.topic_id);
        if now.as_deref() != Some(replica.reader.dir()) {
            self.drop_replica(replica);
        }
    }

    /// Drop the replica of `tp` if it is `replica` (its owner refused it: moved, or fenced).
    fn drop_replica(&self, replica: &Arc<Replica>) {
        let mut parts = self.parts.lock();
        if parts
            .get(&replica.tp)
            .is_some_and(|r| Arc::ptr_eq(r, replica))
        {
            parts.remove(&replica.tp);
        }
    }
}

/// Poll `owner` for what it published of the partitions read here, until none is left (or
/// the broker is gone).
async fn poll_owner(weak: Weak<Broker>, owner: i32) {
    loop {
        let Some(broker) = weak.upgrade() else {
            return;
        };
        let replicas = broker.readers.of_owner(&broker, owner);
        if replicas.is_empty() {
            // Gone from the set under the parts' lock order: a replica made after this
            // check starts a new task.
            let mut polled = broker.readers.polled.lock();
            if broker.readers.of_owner(&broker, owner).is_empty() {
                polled.remove(&owner);
                return;
            }
            continue;
        }
        let request = poll_request(broker.node_id(), &replicas);
        broker.readers.polls.fetch_add(1, Ordering::Relaxed);
        let answer = broker
            .call_reader_peer(owner, RequestKind::Fetch(request))
            .await;
        match answer {
            Ok(ResponseKind::Fetch(r)) if r.error_code == 0 => {
                if !learn_all(&broker, &replicas, r) {
                    // Only refusals (an epoch the owner does not have yet): not at once again.
                    drop(broker);
                    tokio::time::sleep(RETRY).await;
                }
            }
            Ok(ResponseKind::Fetch(r)) => {
                tracing::debug!(
                    owner,
                    code = r.error_code,
                    "read replicas: the owner refused a poll"
                );
                drop(broker);
                tokio::time::sleep(RETRY).await;
            }
            Ok(_) => {
                drop(broker);
                tokio::time::sleep(RETRY).await;
            }
            Err(e) => {
                tracing::debug!(owner, "read replicas: polling the owner failed: {e}");
                drop(broker);
                tokio::time::sleep(RETRY).await;
            }
        }
    }
}

/// A new replica's first offsets: a poll of it alone that the owner answers at once, on the
/// connection of the other calls to it (held only that long), since the long poll of its
/// owner may be in flight without it for up to [`POLL_WAIT`].
async fn first_answer(weak: Weak<Broker>, replica: Arc<Replica>) {
    let Some(broker) = weak.upgrade() else {
        return;
    };
    let mut request = poll_request(broker.node_id(), std::slice::from_ref(&replica));
    request.max_wait_ms = 0;
    let (api, version) = poll_call();
    let owner = replica.owner;
    match broker
        .call_peer(owner, api, version, RequestKind::Fetch(request))
        .await
    {
        Ok(ResponseKind::Fetch(r)) if r.error_code == 0 => {
            learn_all(&broker, std::slice::from_ref(&replica), r);
        }
        Ok(_) => {}
        Err(e) => tracing::debug!(owner, "read replicas: a first poll failed: {e}"),
    }
}

/// A follower's Fetch naming every replica, at the high watermark and log start it knows
/// (none yet: -1, which the owner always answers at once), reading nothing.
fn poll_request(node: i32, replicas: &[Arc<Replica>]) -> FetchRequest {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for r in replicas {
        let known = r.published();
        let mut fp = FetchPartition::default();
        fp.partition = r.tp.partition;
        fp.current_leader_epoch = r.epoch;
        fp.fetch_offset = known.map_or(-1, |p| p.high_watermark);
        fp.log_start_offset = known.map_or(-1, |p| p.log_start);
        fp.partition_max_bytes = 0;
        match topics.last_mut() {
            Some(t) if t.topic_id == r.topic_id => t.partitions.push(fp),
            _ => {
                let mut t = FetchTopic::default();
                t.topic_id = r.topic_id;
                t.partitions.push(fp);
                topics.push(t);
            }
        }
    }
    let mut req = FetchRequest::default();
    req.replica_id = BrokerId(node);
    req.max_wait_ms = POLL_WAIT.as_millis() as i32;
    req.min_bytes = 1;
    req.max_bytes = 0;
    req.isolation_level = 0;
    req.session_id = 0;
    req.session_epoch = -1;
    req.topics = topics;
    req
}

/// Take what the owner answered: offsets into each replica named, and a replica the owner
/// refused (it moved, or the epoch changed) dropped. Whether any offsets were learned.
fn learn_all(
    broker: &Broker,
    replicas: &[Arc<Replica>],
    r: kafka_protocol::messages::FetchResponse,
) -> bool {
    let mut learned = false;
    for t in r.responses {
        for pd in t.partitions {
            let Some(replica) = replicas
                .iter()
                .find(|x| x.topic_id == t.topic_id && x.tp.partition == pd.partition_index)
            else {
                continue;
            };
            if pd.error_code != 0 || pd.high_watermark < 0 {
                if pd.error_code != ResponseError::UnknownLeaderEpoch.code() {
                    broker.readers.drop_replica(replica);
                }
                continue;
            }
            learned = true;
            replica.learn(Published {
                log_start: pd.log_start_offset,
                high_watermark: pd.high_watermark,
                last_stable: if pd.last_stable_offset >= 0 {
                    pd.last_stable_offset
                } else {
                    pd.high_watermark
                },
            });
        }
    }
    learned
}

/// The POLL_VERSION of the Fetch a reader's poll sends, for the peer call.
pub(crate) fn poll_call() -> (ApiKey, i16) {
    (ApiKey::Fetch, POLL_VERSION)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn id(topic: &str) -> uuid::Uuid {
        uuid::Uuid::from_u128(topic.bytes().map(u128::from).sum())
    }

    fn replica(
        topic: &str,
        partition: i32,
        epoch: i32,
        published: Option<Published>,
    ) -> Arc<Replica> {
        let tp = TopicPartition {
            topic: topic.into(),
            partition,
        };
        Arc::new(Replica {
            reader: ReplicaReader::new(tp.clone(), "/nonexistent".into()),
            tp,
            topic_id: id(topic),
            owner: 2,
            epoch,
            created: Instant::now(),
            state: Mutex::new(State {
                published,
                answered_at: None,
                last_used: Instant::now(),
                waiters: Vec::new(),
            }),
        })
    }

    #[test]
    fn a_poll_names_each_replica_at_what_it_knows_and_reads_nothing() {
        let known = Published {
            log_start: 5,
            high_watermark: 40,
            last_stable: 30,
        };
        let rs = [
            replica("a", 0, 3, Some(known)),
            replica("a", 1, 4, None),
            replica("b", 0, 1, None),
        ];
        let req = poll_request(7, &rs);
        assert_eq!(req.replica_id.0, 7);
        assert_eq!(req.max_wait_ms, POLL_WAIT.as_millis() as i32);
        assert_eq!(req.session_epoch, -1, "sessionless");
        let ids: Vec<_> = req.topics.iter().map(|t| t.topic_id).collect();
        assert_eq!(ids, [id("a"), id("b")]);
        let a = &req.topics[0].partitions;
        assert_eq!(
            (
                a[0].partition,
                a[0].fetch_offset,
                a[0].log_start_offset,
                a[0].current_leader_epoch
            ),
            (0, 40, 5, 3)
        );
        // Nothing known yet: -1, which the owner answers at once.
        assert_eq!((a[1].fetch_offset, a[1].log_start_offset), (-1, -1));
        assert!(req
            .topics
            .iter()
            .flat_map(|t| &t.partitions)
            .all(|p| p.partition_max_bytes == 0));
    }

    /// Found by an adversary on 0d6bb4e, since fixed: a replica learns from two polls that
    /// are not ordered with each other, its [`first_answer`] (on the `call_peer` connection)
    /// and its owner's [`poll_owner`] (on the reader connection). An answer the owner computed
    /// before a DeleteRecords, arriving after one computed after it (and after the next poll
    /// told the owner the new start, which acknowledged the DeleteRecords), put the replica's
    /// log start back below the acknowledged offset. Now nothing learned goes backwards.
    #[test]
    fn a_replica_never_goes_back_below_a_log_start_it_learned() {
        let r = replica("a", 0, 1, None);
        let before = Published {
            log_start: 0,
            high_watermark: 100,
            last_stable: 100,
        };
        let after = Published {
            log_start: 50,
            ..before
        };
        r.learn(after); // the long poll's answer, computed after the DeleteRecords
        r.learn(before); // first_answer's, computed before it, delivered later
        assert_eq!(r.published(), Some(after));
    }

    #[test]
    fn learning_wakes_waiters_only_when_something_moved() {
        let r = replica("a", 0, 1, None);
        let waiter = Arc::new(Notify::new());
        r.register(&waiter);
        let p = Published {
            log_start: 0,
            high_watermark: 10,
            last_stable: 10,
        };
        r.learn(p);
        assert_eq!(r.published(), Some(p));
        // The wake-up is kept for the next wait: it completes at once.
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let woke = |w: &Arc<Notify>| {
            rt.block_on(async {
                tokio::time::timeout(Duration::from_millis(50), w.notified())
                    .await
                    .is_ok()
            })
        };
        assert!(woke(&waiter));
        r.learn(p);
        assert!(!woke(&waiter), "the same offsets again wake no one");
        r.learn(Published {
            high_watermark: 11,
            ..p
        });
        assert!(woke(&waiter));
    }
}

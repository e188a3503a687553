//! The write gate: one check that every write to a partition's files passes.
//!
//! In a cluster, a partition's files are written by its owner only, and a broker that lost
//! a partition (its lease could not be renewed, a takeover, a release) must write nothing
//! more into them: not an append, a roll, a producer snapshot, an index or checkpoint, a
//! retention deletion, a cleaned segment's swap. The store cannot know who owns what; the
//! broker can. So the broker installs a [`WriteGate`] on the [`crate::LogManager`], and every
//! mutation of a log's files asks it, under the log's writer lock, immediately before it
//! writes (`Log::gate`). A single broker installs none: every write passes.
//!
//! Architecture invariant: every write to a partition's files after the log was opened passes
//! [`Log::gate`] first, on the same thread, with no wait in between but the writes of one
//! step (a seal's cuts and index writes ask once; a roll asks again before its new segment's
//! files appear, a deletion before each rename). The opening itself (recovery, which may cut
//! and rewrite) is fenced by the acquisition that precedes it (the owner record's epoch is
//! bumped in etcd before the files are read) and asks the gate before each of its steps that
//! write (`loader.rs`, `may_write`), since recovery may outlast the write deadline.
//!
//! What the gate cannot stop is a write that passed it and then stalled in the kernel past
//! the broker's deadline; docs/cluster.md's fencing section says why that write cannot harm
//! the next owner (it starts a new segment past everything it recovered).

use std::fmt;
use std::io;
use std::sync::Arc;

use parking_lot::RwLock;

use crate::{Log, TopicPartition};

/// Decides whether this process may write a partition's files now.
pub trait WriteGate: Send + Sync + fmt::Debug {
    /// Ok if this process may write `tp`'s files now, the log of the topic `topic_id` having
    /// been opened (or acquired again) under `leader_epoch`; otherwise why not. The topic id
    /// tells the incarnations of a topic name apart (a topic deleted and created again starts
    /// its epochs anew).
    fn check(
        &self,
        tp: &TopicPartition,
        topic_id: uuid::Uuid,
        leader_epoch: i32,
    ) -> Result<(), String>;

    /// Record, where the next owner of `tp` will read it, the cleaner switch about to begin
    /// (`switch`), after the same check as [`WriteGate::check`]: Ok once recorded. A next
    /// owner's open makes that switch's first rename aside impossible whatever its listing
    /// shows (`cleaner::recover`), as that rename may stall in flight past the takeover. A
    /// single broker has no next owner: the default records nothing.
    fn announce_switch(
        &self,
        tp: &TopicPartition,
        topic_id: uuid::Uuid,
        leader_epoch: i32,
        switch: crate::CleanerSwitch,
    ) -> Result<(), String> {
        self.check(tp, topic_id, leader_epoch)?;
        let _ = switch;
        Ok(())
    }
}

/// The gate installed on a log manager, shared by all its logs (none: every write passes).
#[derive(Debug, Default)]
pub(crate) struct GateSlot(RwLock<Option<Arc<dyn WriteGate>>>);

impl GateSlot {
    pub(crate) fn set(&self, gate: Arc<dyn WriteGate>) {
        *self.0.write() = Some(gate);
    }

    pub(crate) fn check(
        &self,
        tp: &TopicPartition,
        topic_id: uuid::Uuid,
        leader_epoch: i32,
    ) -> Result<(), String> {
        if crate::mutation::active(crate::mutation::Mutation::OpenGate) {
            return Ok(());
        }
        match &*self.0.read() {
            None => Ok(()),
            Some(g) => g.check(tp, topic_id, leader_epoch),
        }
    }

    pub(crate) fn announce_switch(
        &self,
        tp: &TopicPartition,
        topic_id: uuid::Uuid,
        leader_epoch: i32,
        switch: crate::CleanerSwitch,
    ) -> Result<(), String> {
        match &*self.0.read() {
            None => Ok(()),
            Some(g) => g.announce_switch(tp, topic_id, leader_epoch, switch),
        }
    }
}

/// A write refused by the gate: this broker may no longer write the partition's files.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{tp:?}: this broker may not write the partition's files: {reason}")]
pub struct Fenced {
    pub tp: TopicPartition,
    pub reason: String,
}

impl Fenced {
    /// The refusal inside an `io::Error` (the paths that return one), if it is one.
    pub fn in_io(e: &io::Error) -> Option<&Fenced> {
        e.get_ref().and_then(|inner| inner.downcast_ref::<Fenced>())
    }
}

impl Log {
    /// Ask the write gate whether this process may write the log's files now. Every write to
    /// them calls this immediately before it writes (see the module doc).
    pub(crate) fn gate(&self) -> Result<(), Fenced> {
        self.gate
            .check(&self.tp, self.topic_id, self.leader_epoch())
            .map_err(|reason| Fenced {
                tp: self.tp.clone(),
                reason,
            })
    }

    /// [`WriteGate::announce_switch`] for this log.
    pub(crate) fn announce_switch(&self, switch: crate::CleanerSwitch) -> Result<(), Fenced> {
        self.gate
            .announce_switch(&self.tp, self.topic_id, self.leader_epoch(), switch)
            .map_err(|reason| Fenced {
                tp: self.tp.clone(),
                reason,
            })
    }

    /// [`Log::gate`] for the paths that return an `io::Error`.
    pub(crate) fn gate_io(&self) -> io::Result<()> {
        self.gate().map_err(io::Error::other)
    }

    /// True if the write gate lets this process write the log's files now (the group and
    /// transaction coordinators ask before they answer from what they hold in memory).
    pub fn writable(&self) -> bool {
        self.gate().is_ok()
    }
}

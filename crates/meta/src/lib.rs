//! The coordination layer: what topics exist, their partitions, topic-level config overrides,
//! who owns each partition under which epoch, and producer-id allocation.
//!
//! Owns: the metadata store, behind one API ([`Meta`]): [`EmbeddedStore`], a small file inside
//! the first log directory that needs no other process (a single broker), or [`EtcdStore`],
//! the same records plus membership and partition ownership in etcd (the shared-storage
//! cluster, `cluster.rs`; its client is `etcd.rs`). Client quotas (`quotas.rs`), SCRAM
//! credentials (`scram.rs`) and ACLs (`acls.rs`) are kept beside the topics, each one record
//! changed atomically (`record.rs`: a file rewritten atomically, or one etcd key changed by
//! compare-and-swap).
//! Does not own: partition data (the log store) or Kafka error codes (the broker).
//!
//! Architecture invariant: a broker serves a partition only under an ownership epoch it got
//! from the store ([`EmbeddedStore::acquire_partition`], [`EtcdStore::acquire`]); every
//! acquisition bumps the epoch, and the epoch is stamped into every batch the broker appends
//! (Kafka's partition leader epoch). Only this crate talks to etcd.

pub mod acls;
pub mod broker_configs;
pub mod cluster;
mod entity_configs;
pub mod etcd;
pub mod load;
pub mod quotas;
mod record;
pub mod scram;

pub use acls::AclSet;
pub use cluster::{
    BrokerInfo, ClusterView, ClusterWatch, DeletedTopic, Endpoint, EtcdStore, Owner, OwnerRecord,
    Renewal, Switch,
};
pub use etcd::EtcdLink;
pub use quotas::{ClientQuotas, QuotaAlteration, QuotaEntity};
pub use scram::{ScramAlteration, ScramCredentials, StoredScram};

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;
use uuid::Uuid;

/// How many producer ids one allocation reserves (persisted once per block).
pub(crate) const PRODUCER_ID_BLOCK: i64 = 1000;

#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    #[error("metadata file {path}: {source}")]
    Io { path: PathBuf, source: io::Error },
    #[error("metadata file {path} line {line}: {reason}")]
    Parse {
        path: PathBuf,
        line: usize,
        reason: String,
    },
    #[error("topic {0} already exists")]
    TopicExists(String),
    #[error("topic {0} does not exist")]
    UnknownTopic(String),
    #[error("etcd: {0}")]
    Etcd(String),
    /// etcd refuses this broker (its certificate, its credentials, its user's permissions)
    /// or a setting of the link cannot be used: asking again will not help.
    #[error("etcd: {0}")]
    EtcdRefused(String),
    /// The log dirs are not the cluster's shared volume ([`EtcdStore::check_volume`]).
    #[error("{0}")]
    WrongVolume(String),
    #[error("topic {topic} has {current} partitions; cannot change to {requested}")]
    InvalidPartitions {
        topic: String,
        current: i32,
        requested: i32,
    },
}

/// One topic as the metadata store knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicMeta {
    pub name: String,
    pub id: Uuid,
    /// Ownership (leader) epoch of each partition; its length is the partition count.
    pub epochs: Vec<i32>,
    /// The broker owning each partition (-1: none yet); same length as `epochs`. The embedded
    /// store leaves it empty: its one broker owns everything ([`Meta`] fills it in).
    pub owners: Vec<i32>,
    /// Topic-level config overrides (Kafka names), already validated.
    pub configs: BTreeMap<String, String>,
}

impl TopicMeta {
    pub fn partitions(&self) -> i32 {
        self.epochs.len() as i32
    }
}

#[derive(Debug, Default)]
struct State {
    cluster_id: String,
    topics: BTreeMap<String, TopicMeta>,
    /// First producer id not yet reserved on disk.
    producer_id_reserved: i64,
    /// Next producer id to hand out (< producer_id_reserved).
    producer_id_next: i64,
}

/// The embedded metadata store: one text file, rewritten atomically (write, fsync, rename).
#[derive(Debug)]
pub struct EmbeddedStore {
    path: PathBuf,
    state: Mutex<State>,
    /// Dynamic broker configs, in a file of their own (`broker_configs.rs`).
    broker_configs: broker_configs::BrokerConfigFile,
}

/// Valid Kafka topic name: 1..=249 chars of `[a-zA-Z0-9._-]`, not `.` or `..`.
pub fn validate_topic_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("topic name is empty".into());
    }
    if name == "." || name == ".." {
        return Err(format!("topic name {name:?} is not allowed"));
    }
    if name.len() > 249 {
        return Err(format!(
            "topic name is {} characters long; the limit is 249",
            name.len()
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!("topic name {name:?} contains {c:?}; only ASCII letters, digits, '.', '_' and '-' are allowed"));
    }
    Ok(())
}

/// A new random cluster id in Kafka's form (URL-safe base64 of 16 bytes, no padding).
pub fn new_cluster_id() -> String {
    base64_url(Uuid::new_v4().as_bytes())
}

fn base64_url(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn escape(value: &str) -> String {
    value.replace('\\', "\\\\").replace('\n', "\\n")
}

fn unescape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

impl EmbeddedStore {
    /// Open (or create) the store in `dir`. `cluster_id` is used only when creating: an existing
    /// store keeps its own.
    pub fn open(
        dir: &Path,
        cluster_id: impl FnOnce() -> String,
    ) -> Result<EmbeddedStore, MetaError> {
        create_dir_all_durable(dir).map_err(|source| MetaError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = dir.join("metadata.v1");
        let state = match fs::read_to_string(&path) {
            Ok(text) => parse(&path, &text)?,
            Err(e) if e.kind() == io::ErrorKind::NotFound => State {
                cluster_id: cluster_id(),
                ..State::default()
            },
            Err(source) => return Err(MetaError::Io { path, source }),
        };
        let store = EmbeddedStore {
            path,
            state: Mutex::new(state),
            broker_configs: broker_configs::BrokerConfigFile::open(dir)?,
        };
        store.persist(&store.state.lock())?;
        Ok(store)
    }

    pub fn cluster_id(&self) -> String {
        self.state.lock().cluster_id.clone()
    }

    /// Retire the store in `dir` after its records moved into a cluster's etcd: the directory
    /// is renamed to `__sluice_meta.imported` beside it, so no single broker serves those
    /// records again. False if it was not there (another broker retired it first).
    pub fn retire(dir: &Path) -> Result<bool, MetaError> {
        let to = dir.with_file_name("__sluice_meta.imported");
        match fs::rename(dir, &to) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(MetaError::Io {
                path: dir.to_path_buf(),
                source,
            }),
        }
    }

    pub fn topics(&self) -> Vec<TopicMeta> {
        self.state.lock().topics.values().cloned().collect()
    }

    pub fn topic(&self, name: &str) -> Option<TopicMeta> {
        self.state.lock().topics.get(name).cloned()
    }

    pub fn topic_by_id(&self, id: Uuid) -> Option<TopicMeta> {
        self.state
            .lock()
            .topics
            .values()
            .find(|t| t.id == id)
            .cloned()
    }

    /// Register a topic. `id` is given when adopting a partition directory that already names
    /// its topic id; otherwise a new one is drawn.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
        id: Option<Uuid>,
    ) -> Result<TopicMeta, MetaError> {
        let mut state = self.state.lock();
        if state.topics.contains_key(name) {
            return Err(MetaError::TopicExists(name.to_string()));
        }
        if partitions < 1 {
            return Err(MetaError::InvalidPartitions {
                topic: name.to_string(),
                current: 0,
                requested: partitions,
            });
        }
        let topic = TopicMeta {
            name: name.to_string(),
            id: id.unwrap_or_else(Uuid::new_v4),
            epochs: vec![0; partitions as usize],
            owners: Vec::new(),
            configs,
        };
        let mut next = clone_state(&state);
        next.topics.insert(name.to_string(), topic.clone());
        self.persist(&next)?;
        *state = next;
        Ok(topic)
    }

    pub fn delete_topic(&self, name: &str) -> Result<TopicMeta, MetaError> {
        let mut state = self.state.lock();
        let mut next = clone_state(&state);
        let removed = next
            .topics
            .remove(name)
            .ok_or_else(|| MetaError::UnknownTopic(name.to_string()))?;
        self.persist(&next)?;
        *state = next;
        Ok(removed)
    }

    /// Grow a topic to `partitions` partitions (Kafka never shrinks).
    pub fn add_partitions(&self, name: &str, partitions: i32) -> Result<TopicMeta, MetaError> {
        let mut state = self.state.lock();
        let mut next = clone_state(&state);
        let topic = next
            .topics
            .get_mut(name)
            .ok_or_else(|| MetaError::UnknownTopic(name.to_string()))?;
        if partitions <= topic.partitions() {
            return Err(MetaError::InvalidPartitions {
                topic: name.to_string(),
                current: topic.partitions(),
                requested: partitions,
            });
        }
        topic.epochs.resize(partitions as usize, 0);
        let result = topic.clone();
        self.persist(&next)?;
        *state = next;
        Ok(result)
    }

    /// Replace a topic's config overrides.
    pub fn set_topic_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicMeta, MetaError> {
        let mut state = self.state.lock();
        let mut next = clone_state(&state);
        let topic = next
            .topics
            .get_mut(name)
            .ok_or_else(|| MetaError::UnknownTopic(name.to_string()))?;
        topic.configs = configs;
        let result = topic.clone();
        self.persist(&next)?;
        *state = next;
        Ok(result)
    }

    /// Take ownership of every partition of every topic at once (start-up): bumps each epoch
    /// with a single write. Returns the topics with their new epochs.
    pub fn acquire_all(&self) -> Result<Vec<TopicMeta>, MetaError> {
        let mut state = self.state.lock();
        let mut next = clone_state(&state);
        for topic in next.topics.values_mut() {
            for epoch in &mut topic.epochs {
                *epoch += 1;
            }
        }
        self.persist(&next)?;
        *state = next;
        Ok(state.topics.values().cloned().collect())
    }

    /// Take ownership of one partition: bump and return its epoch.
    pub fn acquire_partition(&self, name: &str, partition: i32) -> Result<i32, MetaError> {
        let mut state = self.state.lock();
        let mut next = clone_state(&state);
        let topic = next
            .topics
            .get_mut(name)
            .ok_or_else(|| MetaError::UnknownTopic(name.to_string()))?;
        let epoch = topic
            .epochs
            .get_mut(partition as usize)
            .ok_or_else(|| MetaError::UnknownTopic(format!("{name}-{partition}")))?;
        *epoch += 1;
        let result = *epoch;
        self.persist(&next)?;
        *state = next;
        Ok(result)
    }

    /// Take ownership of partitions `partitions` of topic `name` with a single write (a topic
    /// created, partitions added): bumps and returns their epochs, in order. One write instead
    /// of one per partition: each rewrites and fsyncs the whole file.
    pub fn acquire_partitions(
        &self,
        name: &str,
        partitions: std::ops::Range<i32>,
    ) -> Result<Vec<i32>, MetaError> {
        let mut state = self.state.lock();
        let mut next = clone_state(&state);
        let topic = next
            .topics
            .get_mut(name)
            .ok_or_else(|| MetaError::UnknownTopic(name.to_string()))?;
        let mut result = Vec::with_capacity(partitions.len());
        for partition in partitions {
            let epoch = usize::try_from(partition)
                .ok()
                .and_then(|p| topic.epochs.get_mut(p))
                .ok_or_else(|| MetaError::UnknownTopic(format!("{name}-{partition}")))?;
            *epoch += 1;
            result.push(*epoch);
        }
        self.persist(&next)?;
        *state = next;
        Ok(result)
    }

    /// A producer id never handed out before by this store.
    pub fn next_producer_id(&self) -> Result<i64, MetaError> {
        let mut state = self.state.lock();
        if state.producer_id_next >= state.producer_id_reserved {
            let mut next = clone_state(&state);
            next.producer_id_reserved =
                next.producer_id_next.max(next.producer_id_reserved) + PRODUCER_ID_BLOCK;
            self.persist(&next)?;
            *state = next;
        }
        let id = state.producer_id_next;
        state.producer_id_next += 1;
        Ok(id)
    }

    fn persist(&self, state: &State) -> Result<(), MetaError> {
        let mut text = String::new();
        text.push_str("# Sluice embedded metadata, format 1. Rewritten atomically; do not edit while running.\n");
        text.push_str(&format!("cluster {}\n", state.cluster_id));
        text.push_str(&format!("producer_ids {}\n", state.producer_id_reserved));
        for t in state.topics.values() {
            let epochs: Vec<String> = t.epochs.iter().map(i32::to_string).collect();
            text.push_str(&format!("topic {} {} {}\n", t.name, t.id, epochs.join(",")));
            for (k, v) in &t.configs {
                text.push_str(&format!("config {} {} {}\n", t.name, k, escape(v)));
            }
        }
        record::write_file_atomically(&self.path, text.as_bytes())
    }
}

/// `create_dir_all`, with the entry of every directory it creates fsynced in its parent (on a
/// local disk a new directory is lost in a crash until then). The store's log dirs have the
/// same (`sluice_store`'s `fsutil::create_dir_all_durable`); the crates share no I/O code.
fn create_dir_all_durable(dir: &Path) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut at = Some(dir);
    while let Some(d) = at.filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
        missing.push(d);
        at = d.parent();
    }
    for d in missing.into_iter().rev() {
        match fs::create_dir(d) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
        if let Some(parent) = d.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::File::open(parent)?.sync_all()?;
        }
    }
    Ok(())
}

fn acquired_one_by_one() -> MetaError {
    MetaError::Etcd("a cluster member acquires partitions as they are assigned".into())
}

/// The metadata store a broker uses: the embedded one (single broker, which owns every
/// partition) or etcd (cluster).
#[derive(Debug)]
pub enum Meta {
    Embedded { store: EmbeddedStore, node_id: i32 },
    Etcd(EtcdStore),
}

impl Meta {
    fn owned_by_me(&self, mut t: TopicMeta) -> TopicMeta {
        if let Meta::Embedded { node_id, .. } = self {
            t.owners = vec![*node_id; t.epochs.len()];
        }
        t
    }

    pub fn cluster_id(&self) -> String {
        match self {
            Meta::Embedded { store, .. } => store.cluster_id(),
            Meta::Etcd(s) => s.cluster_id(),
        }
    }

    /// The etcd store, in cluster mode.
    pub fn etcd(&self) -> Option<&EtcdStore> {
        match self {
            Meta::Embedded { .. } => None,
            Meta::Etcd(s) => Some(s),
        }
    }

    pub fn topics(&self) -> Vec<TopicMeta> {
        match self {
            Meta::Embedded { store, .. } => store
                .topics()
                .into_iter()
                .map(|t| self.owned_by_me(t))
                .collect(),
            Meta::Etcd(s) => s.topics(),
        }
    }

    pub fn topic(&self, name: &str) -> Option<TopicMeta> {
        match self {
            Meta::Embedded { store, .. } => store.topic(name).map(|t| self.owned_by_me(t)),
            Meta::Etcd(s) => s.topic(name),
        }
    }

    /// Create a topic. In cluster mode its partitions are spread over the live brokers (their
    /// owners acquire them); the embedded store's one broker owns them at once.
    pub fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        configs: BTreeMap<String, String>,
        id: Option<Uuid>,
    ) -> Result<TopicMeta, MetaError> {
        match self {
            Meta::Embedded { store, .. } => store
                .create_topic(name, partitions, configs, id)
                .map(|t| self.owned_by_me(t)),
            Meta::Etcd(s) => {
                let owners = cluster::spread_new_partitions(&s.view(), partitions);
                s.create_topic(name, partitions, configs, &owners, id, &[])
            }
        }
    }

    pub fn delete_topic(&self, name: &str) -> Result<TopicMeta, MetaError> {
        match self {
            Meta::Embedded { store, .. } => store.delete_topic(name),
            Meta::Etcd(s) => s.delete_topic(name),
        }
    }

    pub fn add_partitions(&self, name: &str, partitions: i32) -> Result<TopicMeta, MetaError> {
        match self {
            Meta::Embedded { store, .. } => store
                .add_partitions(name, partitions)
                .map(|t| self.owned_by_me(t)),
            Meta::Etcd(s) => {
                let current = s.topic(name).map_or(0, |t| t.partitions());
                let owners =
                    cluster::spread_new_partitions(&s.view(), (partitions - current).max(0));
                s.add_partitions(name, partitions, &owners)
            }
        }
    }

    pub fn set_topic_configs(
        &self,
        name: &str,
        configs: BTreeMap<String, String>,
    ) -> Result<TopicMeta, MetaError> {
        match self {
            Meta::Embedded { store, .. } => store
                .set_topic_configs(name, configs)
                .map(|t| self.owned_by_me(t)),
            Meta::Etcd(s) => s.set_topic_configs(name, configs),
        }
    }

    /// A single broker takes every partition at start-up (see
    /// [`EmbeddedStore::acquire_all`]); in a cluster, partitions are acquired one by one as
    /// they are assigned ([`EtcdStore::acquire`]).
    pub fn acquire_all(&self) -> Result<Vec<TopicMeta>, MetaError> {
        match self {
            Meta::Embedded { store, .. } => Ok(store
                .acquire_all()?
                .into_iter()
                .map(|t| self.owned_by_me(t))
                .collect()),
            Meta::Etcd(_) => Err(acquired_one_by_one()),
        }
    }

    /// See [`EmbeddedStore::acquire_partition`]; single broker only.
    pub fn acquire_partition(&self, name: &str, partition: i32) -> Result<i32, MetaError> {
        match self {
            Meta::Embedded { store, .. } => store.acquire_partition(name, partition),
            Meta::Etcd(_) => Err(acquired_one_by_one()),
        }
    }

    /// See [`EmbeddedStore::acquire_partitions`]; single broker only.
    pub fn acquire_partitions(
        &self,
        name: &str,
        partitions: std::ops::Range<i32>,
    ) -> Result<Vec<i32>, MetaError> {
        match self {
            Meta::Embedded { store, .. } => store.acquire_partitions(name, partitions),
            Meta::Etcd(_) => Err(acquired_one_by_one()),
        }
    }

    pub fn next_producer_id(&self) -> Result<i64, MetaError> {
        match self {
            Meta::Embedded { store, .. } => store.next_producer_id(),
            Meta::Etcd(s) => s.next_producer_id(),
        }
    }
}

fn clone_state(s: &State) -> State {
    State {
        cluster_id: s.cluster_id.clone(),
        topics: s.topics.clone(),
        producer_id_reserved: s.producer_id_reserved,
        producer_id_next: s.producer_id_next,
    }
}

fn parse(path: &Path, text: &str) -> Result<State, MetaError> {
    let mut state = State::default();
    for (i, line) in text.lines().enumerate() {
        let err = |reason: &str| MetaError::Parse {
            path: path.to_path_buf(),
            line: i + 1,
            reason: reason.to_string(),
        };
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let mut parts = line.splitn(4, ' ');
        match parts.next() {
            Some("cluster") => {
                state.cluster_id = parts
                    .next()
                    .ok_or_else(|| err("missing cluster id"))?
                    .to_string()
            }
            Some("producer_ids") => {
                let n = parts
                    .next()
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| err("bad producer id block"))?;
                // Ids below the reserved mark may have been handed out before a crash.
                state.producer_id_reserved = n;
                state.producer_id_next = n;
            }
            Some("topic") => {
                let name = parts.next().ok_or_else(|| err("missing topic name"))?;
                let id = parts
                    .next()
                    .and_then(|s| Uuid::parse_str(s).ok())
                    .ok_or_else(|| err("bad topic id"))?;
                let epochs = parts
                    .next()
                    .ok_or_else(|| err("missing epochs"))?
                    .split(',')
                    .map(|e| e.parse::<i32>())
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|_| err("bad epoch"))?;
                state.topics.insert(
                    name.to_string(),
                    TopicMeta {
                        name: name.to_string(),
                        id,
                        epochs,
                        owners: Vec::new(),
                        configs: BTreeMap::new(),
                    },
                );
            }
            Some("config") => {
                let name = parts.next().ok_or_else(|| err("missing topic name"))?;
                let key = parts.next().ok_or_else(|| err("missing config name"))?;
                let value = unescape(parts.next().unwrap_or(""));
                state
                    .topics
                    .get_mut(name)
                    .ok_or_else(|| err("config for unknown topic"))?
                    .configs
                    .insert(key.to_string(), value);
            }
            _ => return Err(err("unknown record")),
        }
    }
    Ok(state)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_through_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path(), new_cluster_id).unwrap();
        let cluster = store.cluster_id();
        let mut configs = BTreeMap::new();
        configs.insert("retention.ms".to_string(), "1000".to_string());
        configs.insert("weird".to_string(), "a b\nc\\d".to_string());
        let t = store
            .create_topic("orders", 3, configs.clone(), None)
            .unwrap();
        store.add_partitions("orders", 5).unwrap();
        assert_eq!(store.acquire_partition("orders", 4).unwrap(), 1);
        assert_eq!(
            store.acquire_partitions("orders", 3..5).unwrap(),
            vec![1, 2]
        );
        assert!(
            store.acquire_partitions("orders", 4..6).is_err(),
            "partition 5 does not exist"
        );
        assert_eq!(
            store.topic("orders").unwrap().epochs,
            vec![0, 0, 0, 1, 2],
            "nothing written by a refusal"
        );
        let p1 = store.next_producer_id().unwrap();
        drop(store);

        let store = EmbeddedStore::open(dir.path(), || "other".into()).unwrap();
        assert_eq!(store.cluster_id(), cluster);
        let again = store.topic("orders").unwrap();
        assert_eq!(again.id, t.id);
        assert_eq!(again.epochs, vec![0, 0, 0, 1, 2]);
        assert_eq!(again.configs, configs);
        assert!(store.next_producer_id().unwrap() > p1);
        let all = store.acquire_all().unwrap();
        assert_eq!(all[0].epochs, vec![1, 1, 1, 2, 3]);
    }

    #[test]
    fn errors() {
        let dir = tempfile::tempdir().unwrap();
        let store = EmbeddedStore::open(dir.path(), new_cluster_id).unwrap();
        store.create_topic("a", 2, BTreeMap::new(), None).unwrap();
        assert!(matches!(
            store.create_topic("a", 1, BTreeMap::new(), None),
            Err(MetaError::TopicExists(_))
        ));
        assert!(matches!(
            store.add_partitions("a", 2),
            Err(MetaError::InvalidPartitions { .. })
        ));
        assert!(matches!(
            store.delete_topic("b"),
            Err(MetaError::UnknownTopic(_))
        ));
        assert!(validate_topic_name("ok.name_-1").is_ok());
        assert!(validate_topic_name("bad/name").is_err());
        assert!(validate_topic_name("..").is_err());
        assert!(validate_topic_name(&"x".repeat(250)).is_err());
    }

    #[test]
    fn cluster_id_shape() {
        let id = new_cluster_id();
        assert_eq!(id.len(), 22);
        assert!(id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
    }
}

//! The log manager: log directories, their identity and checkpoint files, partition
//! placement, and deferred deletion of partition directories.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Condvar, Mutex};
use sluice_format::text::{
    format_offset_checkpoint, format_properties, parse_offset_checkpoint, parse_partition_metadata,
    parse_properties, uuid_to_kafka_string,
};

use crate::cleaner::schedule::{Host, CLEANER_CHECKPOINT};
use crate::deferred::{
    earliest, is_silly_renamed, reclaim_leftover, remove_tree, Attempt, DeleteCtx, DeleteRetry,
    PendingPath,
};
use crate::fsutil::{now_ms, sync_dir, write_atomic};
use crate::gate::Fenced;
use crate::log::{read_dir_topic_id, retire_dir_holding, OpenParams, PARTITION_METADATA};
use crate::segment::Segment;
use crate::{DiscoveredLog, Log, LogConfig, MetaProperties, StoreError, TopicPartition};

pub(crate) const META_PROPERTIES: &str = "meta.properties";
pub(crate) const RECOVERY_POINT_CHECKPOINT: &str = "recovery-point-offset-checkpoint";
pub(crate) const LOG_START_CHECKPOINT: &str = "log-start-offset-checkpoint";
pub(crate) const CLEAN_SHUTDOWN_MARKER: &str = ".kafka_cleanshutdown";
/// Kafka's KRaft metadata log topic; its directory is never ours.
pub(crate) const METADATA_TOPIC: &str = "__cluster_metadata";

/// What storage is known to hold of a log being opened: a takeover's recovery point recorded
/// by the previous owner, or a failed log's being re-opened.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Known {
    /// Where recovery starts: everything below it was durable when recorded.
    pub(crate) recovery_point: i64,
    /// The log must reach this offset (a re-open: what the failed log synced), or the open is
    /// refused rather than serve less.
    pub(crate) durable: i64,
    /// The newest segment the previous owner published data in (0: none recorded). A shared
    /// directory whose listing shows no segment at or past it is a stale view (an NFS client's
    /// cached listing): the open is refused until the view catches up, rather than serve
    /// the older files without the segments it does not list.
    pub(crate) newest_segment: i64,
    /// What the previous owner recorded of its sealed segments (`crate::sealed`).
    pub(crate) sealed: Option<crate::SealedDigest>,
    /// The last cleaner switch a previous owner announced (`cleaner::recover`).
    pub(crate) switch: Option<crate::CleanerSwitch>,
    /// The producer snapshot the previous owner vouched for (`crate::Recorded::snapshot`).
    pub(crate) snapshot: Option<crate::SnapshotRef>,
}

#[derive(Debug)]
pub(crate) struct DirState {
    /// The marker was present at open.
    pub clean: bool,
    pub recovery_points: HashMap<TopicPartition, i64>,
    pub log_starts: HashMap<TopicPartition, i64>,
    /// What this process last wrote to each checkpoint file of the dir: one that would not
    /// change is not written again (each write is two `fsync`s).
    pub written: HashMap<&'static str, String>,
}

#[derive(Debug)]
pub(crate) struct PendingDir {
    /// Where the directory is now.
    pub path: PathBuf,
    /// Where it is to be renamed to (`*-delete`), if the rename has not happened yet.
    pub rename_to: Option<PathBuf>,
    /// A deleted log: its files are released (closed) before the directory is removed.
    pub log: Option<Arc<Log>>,
    /// Segments of the directory (a log that moved away) that readers may still hold.
    pub waiting: Vec<Arc<Segment>>,
    pub attempt: Attempt,
}

impl PendingDir {
    fn new(path: PathBuf) -> PendingDir {
        PendingDir {
            path,
            rename_to: None,
            log: None,
            waiting: Vec::new(),
            attempt: Attempt::default(),
        }
    }
}

#[derive(Debug, Default)]
pub(crate) struct Registry {
    /// Ordered, so that the periodic passes get every log in partition order without a sort
    /// (and without copying the names: at 100,000 partitions that copy and sort, five times a
    /// second, was most of an idle broker's CPU).
    pub logs: std::collections::BTreeMap<TopicPartition, Arc<Log>>,
    /// `logs`' values in order, made by the first [`Registry::snapshot`] after a change: the
    /// periodic passes share it instead of each collecting every log.
    snapshot: Option<Arc<Vec<Arc<Log>>>>,
    /// Which log dir (index) each known partition lives in.
    pub placement: HashMap<TopicPartition, usize>,
    /// Partitions being opened right now.
    pub opening: HashSet<TopicPartition>,
    /// Partitions opened at least once since start (their dir's marker no longer applies).
    pub opened_once: HashSet<TopicPartition>,
    /// Partitions closed cleanly by close_log (reopen without recovery).
    pub closed_clean: HashSet<TopicPartition>,
    /// The log dirs (indexes) a new partition is placed in when it is in none yet: those on
    /// volumes this broker reaches directly ([`crate::LogManager::prefer_dirs`]); empty, all.
    pub preferred: Vec<usize>,
}

impl Registry {
    pub(crate) fn insert_log(&mut self, tp: TopicPartition, log: Arc<Log>) -> Option<Arc<Log>> {
        self.snapshot = None;
        self.logs.insert(tp, log)
    }

    pub(crate) fn remove_log(&mut self, tp: &TopicPartition) -> Option<Arc<Log>> {
        let removed = self.logs.remove(tp);
        if removed.is_some() {
            self.snapshot = None;
        }
        removed
    }

    /// Every open log, in partition order.
    pub(crate) fn snapshot(&mut self) -> Arc<Vec<Arc<Log>>> {
        self.snapshot
            .get_or_insert_with(|| Arc::new(self.logs.values().cloned().collect()))
            .clone()
    }
}

/// Parse `<topic>-<partition>` as Kafka does; None for anything else (including the
/// `-delete`, `-future` and `-stray` forms, hidden entries and the metadata log).
pub(crate) fn parse_partition_dir(name: &str) -> Option<TopicPartition> {
    if name.starts_with('.')
        || name.ends_with("-delete")
        || name.ends_with("-future")
        || name.ends_with("-stray")
    {
        return None;
    }
    let idx = name.rfind('-')?;
    let (topic, part) = (&name[..idx], &name[idx + 1..]);
    if topic.is_empty() || topic.len() > 249 || topic == METADATA_TOPIC {
        return None;
    }
    if !topic
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        return None;
    }
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let partition: i32 = part.parse().ok()?;
    Some(TopicPartition {
        topic: topic.to_string(),
        partition,
    })
}

/// `<topic>-<partition>.<uuid-hex>-delete` directories left by an unfinished deletion.
pub(crate) fn is_delete_dir(name: &str) -> bool {
    let Some(stem) = name.strip_suffix("-delete") else {
        return false;
    };
    let Some(dot) = stem.rfind('.') else {
        return false;
    };
    let (tp, id) = (&stem[..dot], &stem[dot + 1..]);
    !id.is_empty()
        && !id.contains(char::is_whitespace)
        && tp.contains('-')
        && !tp.contains(char::is_whitespace)
}

/// `<topic>-<partition>.<uuid-hex>-future` directories: the copy of a move that did not
/// finish (the original is still in place, so the copy is garbage).
pub(crate) fn is_future_dir(name: &str) -> bool {
    name.strip_suffix("-future")
        .is_some_and(|stem| is_delete_dir(&format!("{stem}-delete")))
}

/// Name for a directory scheduled for deletion (topic cut so the name fits in 255 bytes).
pub(crate) fn delete_dir_name(tp: &TopicPartition) -> String {
    suffixed_dir_name(tp, "delete")
}

/// Name for the copy of a partition being moved into another log dir.
pub(crate) fn future_dir_name(tp: &TopicPartition) -> String {
    suffixed_dir_name(tp, "future")
}

fn suffixed_dir_name(tp: &TopicPartition, what: &str) -> String {
    let id = uuid::Uuid::new_v4().simple().to_string();
    let suffix = format!("-{}.{id}-{what}", tp.partition);
    let mut keep = tp.topic.len().min(255usize.saturating_sub(suffix.len()));
    while !tp.topic.is_char_boundary(keep) {
        keep -= 1;
    }
    format!("{}{suffix}", &tp.topic[..keep])
}

/// The topic id a partition directory's `partition.metadata` names, if it has a readable one.
pub(crate) fn dir_topic_id(dir: &Path) -> Option<uuid::Uuid> {
    std::fs::read_to_string(dir.join(PARTITION_METADATA))
        .ok()
        .and_then(|t| parse_partition_metadata(&t).ok())
        .map(uuid::Uuid::from_bytes)
}

fn read_checkpoint(path: &Path) -> HashMap<TopicPartition, i64> {
    match std::fs::read_to_string(path) {
        Ok(text) => match parse_offset_checkpoint(&text) {
            Ok(entries) => entries
                .into_iter()
                .map(|(topic, partition, o)| (TopicPartition { topic, partition }, o))
                .collect(),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "ignoring unreadable checkpoint file");
                HashMap::new()
            }
        },
        Err(e) => {
            if e.kind() != io::ErrorKind::NotFound {
                tracing::warn!(path = %path.display(), error = %e, "could not read checkpoint file");
            }
            HashMap::new()
        }
    }
}

/// The `cluster.id` recorded in an existing `meta.properties` of any of `dirs` (a log
/// directory written by Kafka or an earlier Sluice), read before the store is opened.
pub fn existing_cluster_id(dirs: &[PathBuf]) -> Option<String> {
    dirs.iter().find_map(|d| {
        let text = std::fs::read_to_string(d.join(META_PROPERTIES)).ok()?;
        parse_properties(&text)
            .into_iter()
            .find(|(k, _)| k == "cluster.id")
            .map(|(_, v)| v)
    })
}

/// The `directory.id` recorded in `dir`'s `meta.properties`.
pub(crate) fn directory_id(dir: &Path) -> Result<Option<String>, StoreError> {
    let path = dir.join(META_PROPERTIES);
    let text = std::fs::read_to_string(&path).map_err(|source| StoreError::Io { path, source })?;
    Ok(parse_properties(&text)
        .into_iter()
        .find(|(k, _)| k == "directory.id")
        .map(|(_, v)| v))
}

/// Read or create `meta.properties`. An existing file is kept as it is (it may have been
/// written by Apache Kafka) but must name the same cluster and node.
pub(crate) fn ensure_meta_properties(
    dir: &Path,
    meta: &MetaProperties,
    shared: bool,
) -> Result<(), StoreError> {
    let path = dir.join(META_PROPERTIES);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let props: HashMap<String, String> = parse_properties(&text).into_iter().collect();
            if let Some(cid) = props.get("cluster.id") {
                if cid != &meta.cluster_id {
                    return Err(StoreError::Invalid {
                        path: path.clone(),
                        reason: format!(
                            "cluster.id {cid} does not match the configured {}",
                            meta.cluster_id
                        ),
                    });
                }
            }
            if let Some(nid) = props.get("node.id").or_else(|| props.get("broker.id")) {
                // A shared log dir is every broker's: the node id of whoever wrote the file
                // first (or of the single broker it was converted from) binds none of them.
                if !shared && nid.trim() != meta.node_id.to_string() {
                    return Err(StoreError::Invalid {
                        path: path.clone(),
                        reason: format!(
                            "node.id {nid} does not match the configured {}",
                            meta.node_id
                        ),
                    });
                }
            }
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let dir_id = uuid_to_kafka_string(uuid::Uuid::new_v4().as_bytes());
            let mut entries = vec![("version", "1".to_string())];
            if !shared {
                entries.push(("node.id", meta.node_id.to_string()));
            }
            entries.push(("cluster.id", meta.cluster_id.clone()));
            entries.push(("directory.id", dir_id));
            let content = format_properties("Written by sluice", &entries);
            if !shared {
                return write_atomic(&path, content.as_bytes())
                    .map_err(|source| StoreError::Io { path, source });
            }
            // Brokers starting together on a fresh shared dir all get here: each writes its own
            // temporary file and links it into place, which fails for all but the first (a
            // shared temporary name let one broker rename another's file away). The others
            // then check the winner's file.
            let tmp = dir.join(format!(
                "{META_PROPERTIES}.{}-{}.tmp",
                std::process::id(),
                uuid::Uuid::new_v4().simple()
            ));
            let linked = std::fs::write(&tmp, content.as_bytes())
                .and_then(|()| std::fs::File::open(&tmp)?.sync_all())
                .and_then(|()| std::fs::hard_link(&tmp, &path));
            let _ = std::fs::remove_file(&tmp);
            match linked {
                Ok(()) => sync_dir(dir).map_err(|source| StoreError::Io { path, source }),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    ensure_meta_properties(dir, meta, shared)
                }
                Err(source) => Err(StoreError::Io { path, source }),
            }
        }
        Err(source) => Err(StoreError::Io { path, source }),
    }
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub dirs: Vec<PathBuf>,
    pub states: Vec<Mutex<DirState>>,
    pub discovered: Vec<DiscoveredLog>,
    pub reg: Mutex<Registry>,
    pub opened: Condvar,
    pub pending_dirs: Mutex<Vec<PendingDir>>,
    /// Silly-renamed files (`.nfs*`, `.fuse_hidden*`) found in log dirs, to reclaim.
    pub leftovers: Mutex<Vec<PendingPath>>,
    /// Partitions being moved to another log dir right now.
    pub moving: Mutex<HashSet<TopicPartition>>,
    pub checkpoint_lock: Mutex<()>,
    pub del: Arc<DeleteCtx>,
    /// Log dirs shared with other brokers (cluster mode): see [`crate::Sharing`].
    pub shared: bool,
    /// The log cleaner's state (compacted topics; `cleaner/schedule.rs`).
    pub cleaner: crate::cleaner::schedule::Shared,
    /// The write gate every log of this manager asks before it writes (`gate.rs`).
    pub gate: Arc<crate::gate::GateSlot>,
}

/// What the listings of the log dirs found at start: the partitions, the log dir each lives
/// in, and the directories a deletion or a move left (`*-delete`, `*-future`).
#[derive(Debug, Default)]
struct Discovery {
    discovered: Vec<DiscoveredLog>,
    placement: HashMap<TopicPartition, usize>,
    pending_dirs: Vec<PendingDir>,
    /// Every `<topic>-<partition>` directory listed, by partition, in log dir order: the
    /// copy each partition is served from is chosen once every dir is listed
    /// ([`Discovery::choose_copies`]).
    copies: Vec<(TopicPartition, usize, PathBuf)>,
}

/// Opens the log dir `dirs[idx]` at start: creates it (durably), checks or writes its
/// `meta.properties` (a dir of another cluster, or of another node on a single broker, is
/// never used), consumes its clean-shutdown marker, reads its checkpoint files and lists its
/// partitions into `found`. Everything here runs before any partition of the dir is opened,
/// so each open finds the marker and the recovery points as the last shutdown left them
/// (docs/log-format.md, "Recovery invariants").
fn open_dir(
    idx: usize,
    dirs: &[PathBuf],
    meta: &MetaProperties,
    shared: bool,
    found: &mut Discovery,
    first_dirty: &mut HashMap<TopicPartition, i64>,
) -> Result<DirState, StoreError> {
    let dir = &dirs[idx];
    let ioe = |source: io::Error| StoreError::Io {
        path: dir.clone(),
        source,
    };
    crate::fsutil::create_dir_all_durable(dir).map_err(ioe)?;
    ensure_meta_properties(dir, meta, shared)?;
    let clean = take_clean_marker(dir, shared).map_err(ioe)?;
    if !shared {
        first_dirty.extend(crate::cleaner::schedule::read_checkpoint(dir));
    }
    let (recovery_points, log_starts) = read_dir_checkpoints(dir, shared);
    list_partition_dirs(idx, dirs, shared, found).map_err(ioe)?;
    tracing::info!(dir = %dir.display(), clean, "log dir opened");
    Ok(DirState {
        clean,
        recovery_points,
        log_starts,
        written: HashMap::new(),
    })
}

/// Consumes `dir`'s clean-shutdown marker: true if it was there. The marker vouches for the
/// shutdown before this start only (docs/log-format.md, "Recovery invariants": after a clean
/// shutdown every segment is trusted), so it is removed, and its removal made durable,
/// before any log of the dir is opened: a crash from here on is recovered from. A shared log
/// dir's per-dir files belong to no broker (docs/cluster.md, "Per-directory files on a
/// shared volume"): there every open recovers, and a marker is neither trusted nor removed.
fn take_clean_marker(dir: &Path, shared: bool) -> io::Result<bool> {
    let marker = dir.join(CLEAN_SHUTDOWN_MARKER);
    let clean = !shared && marker.exists();
    if clean {
        std::fs::remove_file(&marker)?;
        sync_dir(dir)?;
    }
    Ok(clean)
}

/// `dir`'s recovery points and log start offsets, from its checkpoint files (docs/log-format.md,
/// "Recovery invariants": everything below a recovery point was fsynced before the checkpoint
/// recorded it). A shared log dir has none: each owner records its recovery point in etcd
/// (docs/cluster.md, "Per-directory files on a shared volume").
fn read_dir_checkpoints(
    dir: &Path,
    shared: bool,
) -> (HashMap<TopicPartition, i64>, HashMap<TopicPartition, i64>) {
    if shared {
        (HashMap::new(), HashMap::new())
    } else {
        (
            read_checkpoint(&dir.join(RECOVERY_POINT_CHECKPOINT)),
            read_checkpoint(&dir.join(LOG_START_CHECKPOINT)),
        )
    }
}

/// Lists the partition directories of the log dir `dirs[idx]` into `found`: each
/// `<topic>-<partition>` as a copy to choose from ([`Discovery::choose_copies`]), and every
/// `*-delete` and `*-future` directory for the deferred deletion (an unfinished deletion, or
/// an unfinished copy whose original is intact: docs/log-format.md, "Deletion"); in a shared
/// log dir a `*-future` one may be another broker's copy in progress, and is left alone.
/// Anything else is not a partition's and is left alone (docs/log-format.md, "Directory
/// layout").
fn list_partition_dirs(
    idx: usize,
    dirs: &[PathBuf],
    shared: bool,
    found: &mut Discovery,
) -> io::Result<()> {
    for entry in std::fs::read_dir(&dirs[idx])? {
        let entry = entry?;
        let Ok(ft) = entry.file_type() else { continue };
        if !ft.is_dir() {
            continue;
        }
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if is_future_dir(name) && shared {
            // Maybe the copy another broker is making right now: its own move removes it if
            // it fails; one left by a crash stays (docs/log-format.md, "Deletion").
            tracing::debug!(dir = %entry.path().display(), "leaving a move's copy in a shared log dir");
            continue;
        }
        if is_delete_dir(name) || is_future_dir(name) {
            found.pending_dirs.push(PendingDir::new(entry.path()));
            continue;
        }
        let Some(tp) = parse_partition_dir(name) else {
            tracing::debug!(entry = %entry.path().display(), "ignoring entry in log dir");
            continue;
        };
        found.copies.push((tp, idx, entry.path()));
    }
    Ok(())
}

impl Discovery {
    /// Chooses, for each partition listed, the copy it is served from. One copy is served
    /// wherever it is. Of several, one a move left as its old copy
    /// ([`crate::relocate::superseded`]: a crash came between the new copy taking its name
    /// and the old one's rename) is never served, and on a broker of its own it is deleted.
    /// Two other copies of the same topic id have no rule to tell the current one: a broker
    /// of its own refuses the start, naming both, as Kafka's does; in shared log dirs the
    /// first is served, with a warning (the acquisition's checks against what the owner
    /// recorded refuse a stale one). Copies of different topic ids (an incarnation of the
    /// topic deleted and created again) are served from the first, as before, with a warning.
    fn choose_copies(&mut self, shared: bool) -> Result<(), StoreError> {
        let mut by_tp: HashMap<TopicPartition, Vec<(usize, PathBuf)>> = HashMap::new();
        let mut order = Vec::new();
        for (tp, idx, path) in std::mem::take(&mut self.copies) {
            let e = by_tp.entry(tp.clone()).or_default();
            if e.is_empty() {
                order.push(tp);
            }
            e.push((idx, path));
        }
        for tp in order {
            let copies = by_tp.remove(&tp).unwrap_or_default();
            let (idx, dir) = self.choose_copy(&tp, copies, shared)?;
            self.placement.insert(tp.clone(), idx);
            self.discovered.push(DiscoveredLog {
                topic_id: dir_topic_id(&dir),
                tp,
                dir,
            });
        }
        Ok(())
    }

    fn choose_copy(
        &mut self,
        tp: &TopicPartition,
        mut copies: Vec<(usize, PathBuf)>,
        shared: bool,
    ) -> Result<(usize, PathBuf), StoreError> {
        if copies.len() == 1 {
            return Ok(copies.remove(0));
        }
        let (old, mut current): (Vec<_>, Vec<_>) = copies
            .into_iter()
            .partition(|(_, d)| crate::relocate::superseded(d));
        if current.is_empty() {
            // Marks naming each other: none tells the current copy.
            current = old.clone();
        } else {
            for (_, dir) in &old {
                self.retire_old_copy(tp, dir, &current[0].1, shared);
            }
        }
        let first = current[0].clone();
        let first_id = dir_topic_id(&first.1);
        for (_, dir) in &current[1..] {
            if !shared && first_id.is_some() && dir_topic_id(dir) == first_id {
                return Err(StoreError::Invalid {
                    path: dir.clone(),
                    reason: format!(
                        "partition {}-{} of the same topic id is in {} and in {}, and no move \
                         left either as its old copy: remove the stale one",
                        tp.topic,
                        tp.partition,
                        first.1.display(),
                        dir.display()
                    ),
                });
            }
            tracing::warn!(?tp, first = %first.1.display(), duplicate = %dir.display(),
                "partition found in more than one log dir; using the first");
        }
        Ok(first)
    }

    /// A move's old copy `dir`, found beside the current one (`serving`): deleted on a broker
    /// of its own; in a shared log dir left to the partition's owner.
    fn retire_old_copy(&mut self, tp: &TopicPartition, dir: &Path, serving: &Path, shared: bool) {
        if shared {
            tracing::warn!(?tp, dir = %dir.display(), serving = %serving.display(),
                "an interrupted move's old copy is left to its owner; serving the new one");
            return;
        }
        tracing::warn!(?tp, dir = %dir.display(), serving = %serving.display(),
            "deleting the old copy an interrupted move left behind");
        let root = dir.parent().map(Path::to_path_buf).unwrap_or_default();
        self.pending_dirs.push(PendingDir {
            rename_to: Some(root.join(delete_dir_name(tp))),
            ..PendingDir::new(dir.to_path_buf())
        });
    }
}

/// The shared log dir (index) holding the partition directory `name`: the first whose copy is
/// not a move's old copy, else the first holding one
/// ([`Discovery::choose_copies`]).
fn shared_copy(dirs: &[PathBuf], name: &str) -> Option<usize> {
    let held: Vec<usize> = (0..dirs.len())
        .filter(|&i| dirs[i].join(name).is_dir())
        .collect();
    held.iter()
        .copied()
        .find(|&i| !crate::relocate::superseded(&dirs[i].join(name)))
        .or(held.first().copied())
}

/// True if `tp` names a partition directory Kafka would make: a topic of 1 to 249 characters
/// of `[A-Za-z0-9._-]`, not `.` or `..`, and a partition >= 0 (docs/log-format.md, "Directory
/// layout"). Nothing else is ever made a directory name in a log dir.
fn legal_topic_partition(tp: &TopicPartition) -> bool {
    let legal = !tp.topic.is_empty()
        && tp.topic.len() <= 249
        && tp.topic != "."
        && tp.topic != ".."
        && tp
            .topic
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-');
    legal && tp.partition >= 0
}

/// How [`Inner::claim_open`] leaves a partition.
#[derive(Debug)]
enum Claim {
    /// It is open already: its log.
    Open(Arc<Log>),
    /// Claimed for the caller to open (in `Registry::opening`).
    ToOpen(Slot),
}

/// Where a claimed partition is opened, and how.
#[derive(Debug)]
struct Slot {
    /// The log dir (index) it is placed in.
    idx: usize,
    /// Its directory there.
    dir: PathBuf,
    /// It may be opened as cleanly shut down (no recovery).
    clean: bool,
}

/// The log dir for `tp`, recorded in `reg.placement`: where it was placed before, else where
/// a shared dir holds it already (`found`), else the one of the `dirs` log dirs holding the
/// fewest partitions (the first of those), among `reg.preferred` when it names any. Once
/// placed, a partition is opened in that log dir only: its directory is never made in a
/// second one.
fn place(reg: &mut Registry, tp: &TopicPartition, found: Option<usize>, dirs: usize) -> usize {
    let idx = match reg.placement.get(tp).copied().or(found) {
        Some(i) => i,
        None => {
            let mut counts = vec![0usize; dirs];
            for &i in reg.placement.values() {
                counts[i] += 1;
            }
            let preferred: Vec<usize> = reg
                .preferred
                .iter()
                .copied()
                .filter(|&i| i < dirs)
                .collect();
            let among: Vec<usize> = if preferred.is_empty() {
                (0..dirs).collect()
            } else {
                preferred
            };
            among
                .into_iter()
                .min_by_key(|&i| (counts[i], i))
                .unwrap_or(0)
        }
    };
    reg.placement.insert(tp.clone(), idx);
    idx
}

/// The open `log` of a partition opened again: it must be of the topic `topic_id` (a topic
/// deleted and created again under its name has another id, and is never served from the
/// old one's log); it takes `config` and `leader_epoch` up.
fn take_up(
    log: Arc<Log>,
    topic_id: uuid::Uuid,
    config: LogConfig,
    leader_epoch: i32,
) -> Result<Arc<Log>, StoreError> {
    if log.topic_id() != topic_id {
        return Err(StoreError::Invalid {
            path: log.dir().to_path_buf(),
            reason: format!(
                "log has topic id {} but {topic_id} was requested",
                log.topic_id()
            ),
        });
    }
    log.set_config(config);
    log.set_leader_epoch(leader_epoch);
    Ok(log)
}

/// The opened `log`, unless it ends below `required`, the offset storage was known to hold (a
/// takeover's recorded recovery point, a re-open's synced offset): then it is marked deleted,
/// so that it writes nothing more, and the open is refused rather than serve less
/// (docs/cluster.md, "Per-directory files on a shared volume": an acquisition never serves
/// less than storage was known to hold).
fn refuse_short_log(log: Log, required: Option<i64>) -> Result<Log, StoreError> {
    if let Some(durable) = required.filter(|&d| log.log_end_offset() < d) {
        log.mark_deleted();
        return Err(StoreError::Invalid {
            path: log.dir(),
            reason: format!(
                "storage holds offsets up to {} but offsets up to {durable} were made \
                 durable: refusing to serve less",
                log.log_end_offset()
            ),
        });
    }
    Ok(log)
}

impl Inner {
    /// Opens the log dirs `dirs` ([`open_dir`] each, in order), then sweeps the leftovers of
    /// silly renames and reaps what deletions left. No partition is opened here
    /// ([`Inner::open_log`] does that).
    pub(crate) fn open(
        dirs: Vec<PathBuf>,
        meta: MetaProperties,
        retry: DeleteRetry,
        sharing: crate::Sharing,
    ) -> Result<Inner, StoreError> {
        let shared = sharing == crate::Sharing::Shared;
        if dirs.is_empty() {
            return Err(StoreError::Invalid {
                path: PathBuf::new(),
                reason: "no log directories configured".into(),
            });
        }
        let mut states = Vec::new();
        let mut found = Discovery::default();
        let mut first_dirty = HashMap::new();
        for idx in 0..dirs.len() {
            let state = open_dir(idx, &dirs, &meta, shared, &mut found, &mut first_dirty)?;
            states.push(Mutex::new(state));
        }
        found.choose_copies(shared)?;
        let Discovery {
            mut discovered,
            placement,
            pending_dirs,
            ..
        } = found;
        discovered.sort_by(|a, b| a.tp.cmp(&b.tp));
        let del = Arc::new(DeleteCtx {
            retry,
            ..DeleteCtx::default()
        });
        for _ in &pending_dirs {
            del.counters.added();
        }
        let inner = Inner {
            dirs,
            states,
            discovered,
            reg: Mutex::new(Registry {
                placement,
                ..Registry::default()
            }),
            opened: Condvar::new(),
            pending_dirs: Mutex::new(pending_dirs),
            leftovers: Mutex::new(Vec::new()),
            moving: Mutex::new(HashSet::new()),
            checkpoint_lock: Mutex::new(()),
            del,
            shared,
            cleaner: crate::cleaner::schedule::Shared::new(first_dirty),
            gate: Arc::default(),
        };
        // Leftovers of silly renames, in the log dir roots and in every partition directory:
        // on a single broker, each partition directory's at its open (every partition found
        // is opened, `Log::open` lists it anyway); in a shared log dir, of partitions other
        // brokers may own, now.
        for dir in &inner.dirs {
            inner.sweep_leftovers(dir);
        }
        if shared {
            for d in &inner.discovered {
                inner.sweep_leftovers(&d.dir);
            }
        }
        inner.reap_all(now_ms());
        Ok(inner)
    }

    /// Opens the log of `tp`, or returns the one open ([`take_up`]). The name is checked
    /// ([`legal_topic_partition`]), the partition claimed so that it is opened by one thread
    /// at a time and open at most once ([`Inner::claim_open`]), opened from its files
    /// ([`Inner::open_claimed`]), and the claim ended ([`Inner::finish_open`]).
    pub(crate) fn open_log(
        &self,
        tp: &TopicPartition,
        topic_id: uuid::Uuid,
        config: LogConfig,
        leader_epoch: i32,
        known: Option<Known>,
    ) -> Result<Arc<Log>, StoreError> {
        if !legal_topic_partition(tp) {
            return Err(StoreError::Invalid {
                path: self.dirs[0].clone(),
                reason: format!("illegal topic partition {tp:?}"),
            });
        }
        let name = format!("{}-{}", tp.topic, tp.partition);
        // In shared dirs another broker may have created the partition after this one
        // started: its files are where they are, whatever this broker would have chosen.
        let found = if self.shared {
            shared_copy(&self.dirs, &name)
        } else {
            None
        };
        let slot = match self.claim_open(tp, &name, found) {
            Claim::Open(log) => return take_up(log, topic_id, config, leader_epoch),
            Claim::ToOpen(slot) => slot,
        };
        let result = self.open_claimed(tp, slot, topic_id, config, leader_epoch, known);
        self.finish_open(tp, &result);
        result
    }

    /// Claims `tp` (directory `name`) for opening, waiting while another thread opens it: a
    /// partition is opened by one thread at a time and open at most once, so no two logs of
    /// this process write one directory. Returns its log if it is open already; otherwise
    /// marks it opening, places it ([`place`]) and decides whether it opens as cleanly shut
    /// down: never in a shared dir (every open there recovers), and on a single broker after
    /// a clean `close_log`, or at its first open since start in a log dir whose clean-shutdown
    /// marker was there (docs/log-format.md, "Recovery invariants").
    fn claim_open(&self, tp: &TopicPartition, name: &str, found: Option<usize>) -> Claim {
        let mut reg = self.reg.lock();
        loop {
            if let Some(log) = reg.logs.get(tp) {
                return Claim::Open(log.clone());
            }
            if !reg.opening.contains(tp) {
                break;
            }
            self.opened.wait(&mut reg);
        }
        reg.opening.insert(tp.clone());
        // In shared dirs the copy found now wins over where this broker placed the partition
        // before: another broker may have moved it since.
        if let Some(i) = found.filter(|_| self.shared) {
            reg.placement.insert(tp.clone(), i);
        }
        let idx = place(&mut reg, tp, found, self.dirs.len());
        let first_open = reg.opened_once.insert(tp.clone());
        let closed_clean = reg.closed_clean.remove(tp);
        let clean = !self.shared && (closed_clean || (first_open && self.states[idx].lock().clean));
        Claim::ToOpen(Slot {
            idx,
            dir: self.dirs[idx].join(name),
            clean,
        })
    }

    /// Opens the claimed partition `tp` from its files: from the recovery point `known`
    /// names (a takeover's, a re-open's) or its log dir's checkpoint, once storage was found
    /// to be what it was known to hold ([`Inner::check_known_storage`]), and refused if the
    /// opened log ends below what was made durable ([`refuse_short_log`]).
    fn open_claimed(
        &self,
        tp: &TopicPartition,
        slot: Slot,
        topic_id: uuid::Uuid,
        config: LogConfig,
        leader_epoch: i32,
        known: Option<Known>,
    ) -> Result<Arc<Log>, StoreError> {
        let (rp, ls) = {
            let st = self.states[slot.idx].lock();
            (
                known
                    .map(|k| k.recovery_point)
                    .or_else(|| st.recovery_points.get(tp).copied()),
                st.log_starts.get(tp).copied(),
            )
        };
        // An open refused before it lists the directory still notes its silly-renamed
        // leftovers (no start-up sweep does on a single broker).
        let dir = slot.dir.clone();
        let required = match self.check_known_storage(slot.idx, &slot.dir, known) {
            Ok(required) => required,
            Err(e) => {
                self.sweep_leftovers(&dir);
                return Err(e);
            }
        };
        let mut leftovers = Vec::new();
        let opened = Log::open(
            OpenParams {
                dir: slot.dir,
                tp: tp.clone(),
                topic_id,
                config,
                leader_epoch,
                recovery_point: rp,
                newest_segment: known.map_or(0, |k| k.newest_segment),
                sealed: known.and_then(|k| k.sealed),
                switch: known.and_then(|k| k.switch),
                vouched_snapshot: known.and_then(|k| k.snapshot),
                log_start: ls,
                clean: slot.clean,
                now_ms: now_ms(),
                del: self.del.clone(),
                shared: self.shared,
                gate: self.gate.clone(),
            },
            &mut leftovers,
        );
        self.note_leftovers(leftovers);
        if opened.is_err() {
            self.sweep_leftovers(&dir);
        }
        Ok(Arc::new(refuse_short_log(opened?, required)?))
    }

    /// Refuses, before anything is written, to open a partition where storage is not what it
    /// was known to hold (docs/cluster.md, "Per-directory files on a shared volume": an
    /// acquisition never serves less than storage was known to hold; ARCHITECTURE.md, the
    /// re-open of a failed log): a log dir without its `meta.properties`, or no partition
    /// directory where offsets were made durable. Returns the offset the opened log must
    /// reach, if any ([`refuse_short_log`]).
    fn check_known_storage(
        &self,
        idx: usize,
        dir: &Path,
        known: Option<Known>,
    ) -> Result<Option<i64>, StoreError> {
        // What storage is known to hold (a takeover's recovery point, from the previous
        // owner; a re-open's synced offset) is found, or the open refuses rather than
        // serve less: a volume that went away (an unmounted export, a file system process
        // that died) leaves the bare mount point, where the partition would open empty.
        let required = known.map(|k| k.durable).filter(|&d| d > 0);
        // The dir's identity is checked at each open in a shared dir (an acquisition: its
        // previous owner may have recorded no recovery point yet) and at each re-open.
        if (self.shared || known.is_some()) && !self.dirs[idx].join(META_PROPERTIES).is_file() {
            return Err(StoreError::Invalid {
                path: self.dirs[idx].clone(),
                reason: "no meta.properties in this log dir: refusing to open a partition \
                         in it (is the volume mounted?)"
                    .into(),
            });
        }
        if let Some(durable) = required {
            if !dir.is_dir() {
                return Err(StoreError::Invalid {
                    path: dir.to_path_buf(),
                    reason: format!(
                        "the partition's directory is not there, but offsets up to {durable} \
                         were made durable: refusing to open it empty (is the volume mounted?)"
                    ),
                });
            }
        }
        Ok(required)
    }

    /// Ends the claim of [`Inner::claim_open`]: an opened log joins the registry, and the
    /// threads waiting for the partition wake, to find it open or, after a failed open, to
    /// open it themselves.
    fn finish_open(&self, tp: &TopicPartition, result: &Result<Arc<Log>, StoreError>) {
        let mut reg = self.reg.lock();
        reg.opening.remove(tp);
        if let Ok(log) = result {
            reg.insert_log(tp.clone(), log.clone());
        }
        self.opened.notify_all();
    }

    fn dir_index_of(&self, tp: &TopicPartition) -> Option<usize> {
        self.reg.lock().placement.get(tp).copied()
    }

    pub(crate) fn close_log(&self, tp: &TopicPartition) -> Result<(), StoreError> {
        let Some(log) = self.reg.lock().remove_log(tp) else {
            return Ok(());
        };
        let ioe = |source: io::Error| StoreError::Io {
            path: log.dir().to_path_buf(),
            source,
        };
        log.mark_deleted();
        self.cleaner.abort_and_wait(tp);
        let flushed = log
            .flush()
            .and_then(|_| log.close_active())
            .and_then(|()| log.flush());
        if let Some(idx) = self.dir_index_of(tp) {
            let mut st = self.states[idx].lock();
            st.recovery_points.insert(tp.clone(), log.recovery_point());
            st.log_starts.insert(tp.clone(), log.log_start_offset());
        }
        flushed.map_err(ioe)?;
        self.reg.lock().closed_clean.insert(tp.clone());
        self.checkpoint()
    }

    /// Stop serving `tp` because another broker owns it now (cluster mode): the log leaves
    /// this broker's registry at once (appends to it fail from now on), its appended data is
    /// fsynced, and nothing else is written: the new owner has sealed the segment this broker
    /// was appending to, and owns every file of the partition from now on.
    pub(crate) fn release_log(&self, tp: &TopicPartition) -> Result<(), StoreError> {
        let Some(log) = self.reg.lock().remove_log(tp) else {
            return Ok(());
        };
        log.mark_deleted();
        self.cleaner.abort_and_wait(tp);
        log.sync_appended().map_err(|source| StoreError::Io {
            path: log.dir().to_path_buf(),
            source,
        })?;
        Ok(())
    }

    /// Re-open a failed log (a failed fsync, or a failed write that could not be cut back)
    /// from what storage holds: it is opened again, unclean, from its recovery point (where
    /// the last successful fsync left it), which advises the segments it validates out of the
    /// page cache first, and the failed one is closed. Returns the new log (None if this
    /// broker did not serve `tp`); if the open fails, the failed log stays, for a later try.
    pub(crate) fn reopen_log(
        &self,
        tp: &TopicPartition,
        config: LogConfig,
    ) -> Result<Option<Arc<Log>>, StoreError> {
        let Some(log) = self.reg.lock().logs.get(tp).cloned() else {
            return Ok(None);
        };
        // A move in flight switches the failed log to its copy and then deletes the directory
        // a re-open would take: the re-open waits for a later attempt.
        if self.moving.lock().contains(tp) {
            return Err(StoreError::Invalid {
                path: log.dir(),
                reason: "the partition is being moved to another log dir; re-opened after the move"
                    .into(),
            });
        }
        // A re-open rewrites the partition's files: only through the write gate (in a
        // cluster, the broker acquires a failed log again instead, bumping its epoch).
        log.gate_io().map_err(|source| StoreError::Io {
            path: log.dir().to_path_buf(),
            source,
        })?;
        self.reg.lock().remove_log(tp);
        // A cleaning of the failed log stops (it checks the failure) before the re-open
        // reads the files.
        self.cleaner.abort_and_wait(tp);
        // Its spare files are closed before the open removes them.
        log.drop_spare();
        let rp = log.recovery_point();
        if let Some(idx) = self.dir_index_of(tp) {
            let mut st = self.states[idx].lock();
            st.recovery_points.insert(tp.clone(), rp);
            st.log_starts.insert(tp.clone(), log.log_start_offset());
        }
        self.reg.lock().closed_clean.remove(tp);
        // What the failed log made durable must be found: `open_log` refuses a volume that
        // went away rather than open the partition empty on the bare mount point.
        let known = Known {
            recovery_point: rp,
            durable: log.synced_offset(),
            // This broker's own view of the files it wrote.
            newest_segment: 0,
            sealed: None,
            switch: None,
            snapshot: None,
        };
        // Appends go to a new segment: recovery may have cut the failed log's active segment
        // short, and positions in it that a reader of the failed log may still be sending
        // (its file regions are sent after the read) must not get other bytes.
        let opened = self
            .open_log(tp, log.topic_id(), config, log.leader_epoch(), Some(known))
            .and_then(|new| match new.roll(now_ms()) {
                Ok(()) => Ok(new),
                Err(source) => {
                    self.reg.lock().remove_log(tp);
                    new.mark_deleted();
                    Err(StoreError::Io {
                        path: new.dir().to_path_buf(),
                        source,
                    })
                }
            });
        match opened {
            Ok(new) => {
                // Its open took the failed log's recovery point, which may not be recorded.
                new.reset_recorded_recovery_point(log.recorded_recovery_point());
                log.mark_deleted_locked();
                Ok(Some(new))
            }
            Err(e) => {
                // Still failed (storage still refuses, a full disk): served as it was, and
                // re-opened at a later attempt.
                self.reg.lock().insert_log(tp.clone(), log);
                Err(e)
            }
        }
    }

    /// Hand `tp` over to the broker that owns it next (cluster mode, a planned move): the log
    /// leaves this broker's registry and refuses appends (any append under way finishes
    /// first), its active segment is sealed and everything, index files included, is made
    /// durable, so that the next owner has nothing to recover. Returns the recovery point,
    /// the log's end (None if this broker did not serve `tp`).
    pub(crate) fn hand_over_log(
        &self,
        tp: &TopicPartition,
        now_ms: i64,
    ) -> Result<Option<i64>, StoreError> {
        let Some(log) = self.reg.lock().remove_log(tp) else {
            return Ok(None);
        };
        log.mark_deleted_locked();
        self.cleaner.abort_and_wait(tp);
        log.roll(now_ms)
            .and_then(|()| log.flush())
            .map(Some)
            .map_err(|source| StoreError::Io {
                path: log.dir().to_path_buf(),
                source,
            })
    }

    pub(crate) fn delete_log(&self, tp: &TopicPartition) -> Result<(), StoreError> {
        let (log, idx) = {
            let mut reg = self.reg.lock();
            let log = reg.remove_log(tp);
            let idx = reg.placement.remove(tp);
            reg.closed_clean.remove(tp);
            (log, idx)
        };
        let Some(idx) = idx else { return Ok(()) };
        {
            let mut st = self.states[idx].lock();
            st.recovery_points.remove(tp);
            st.log_starts.remove(tp);
        }
        let path = match &log {
            // Marked under the writer lock: a move of this log either finished (and the
            // directory is the new one) or will not switch.
            Some(l) => l.mark_deleted_locked(),
            None => self.dirs[idx].join(format!("{}-{}", tp.topic, tp.partition)),
        };
        self.cleaner.abort_and_wait(tp);
        self.cleaner.forget(tp);
        let idx = path
            .parent()
            .and_then(|p| self.dirs.iter().position(|d| d == p))
            .unwrap_or(idx);
        if !path.exists() {
            return Ok(());
        }
        let target = self.dirs[idx].join(delete_dir_name(tp));
        if self.shared {
            return self.delete_shared(tp, log, &path, &target);
        }
        let pending = match std::fs::rename(&path, &target) {
            Ok(()) => {
                if let Err(e) = sync_dir(&self.dirs[idx]) {
                    tracing::warn!(dir = %self.dirs[idx].display(), error = %e, "fsync of log dir failed");
                }
                PendingDir {
                    log,
                    ..PendingDir::new(target)
                }
            }
            Err(e) => {
                let mut p = PendingDir {
                    rename_to: Some(target),
                    log,
                    ..PendingDir::new(path)
                };
                p.attempt
                    .failed(self.del.retry, &self.del.counters, now_ms(), &p.path, &e);
                p
            }
        };
        self.del.counters.added();
        self.pending_dirs.lock().push(pending);
        // Best effort checkpoint so a restart does not see stale entries.
        if let Err(e) = self.checkpoint() {
            tracing::warn!(error = %e, "checkpoint after delete failed");
        }
        self.reap_dirs(now_ms());
        Ok(())
    }

    /// `delete_log` in a shared log dir (cluster mode). The partition's name may be another
    /// broker's by now (the topic created again), so the directory is renamed away only
    /// through the write gate of the deleted log (`Log::retire_dir`: this broker still holds
    /// the partition under the log's epoch, and its write deadline has not passed) and only
    /// while it holds the deleted topic's files. Otherwise it is left in place, for the broker
    /// the deletion names in etcd, or the next owner of a partition of that name
    /// (`Inner::retire_stray_dir`); a rename that fails is not retried by name either.
    fn delete_shared(
        &self,
        tp: &TopicPartition,
        log: Option<Arc<Log>>,
        path: &Path,
        target: &Path,
    ) -> Result<(), StoreError> {
        let Some(l) = &log else {
            // Not open here: not this broker's to remove.
            return Ok(());
        };
        match l.retire_dir(target) {
            Ok(true) => {}
            Ok(false) => {
                tracing::info!(?tp, dir = %path.display(), "the deleted partition's directory no longer holds its files; left alone");
                return Ok(());
            }
            Err(e) if Fenced::in_io(&e).is_some() => {
                tracing::info!(?tp, dir = %path.display(), "the deleted partition's directory is left in place: {e}");
                return Ok(());
            }
            Err(e) => {
                tracing::warn!(?tp, dir = %path.display(), error = %e, "could not rename the deleted partition's directory; it is left in place");
                return Ok(());
            }
        }
        self.del.counters.added();
        self.pending_dirs.lock().push(PendingDir {
            log,
            ..PendingDir::new(target.to_path_buf())
        });
        self.reap_dirs(now_ms());
        Ok(())
    }

    /// The topic id in the `partition.metadata` of `tp`'s directory (in whichever log dir
    /// holds it), if it names another topic than `topic_id`: the files of another incarnation
    /// of the topic (cluster mode: one deleted, its name taken again since).
    pub(crate) fn stray_topic_id(
        &self,
        tp: &TopicPartition,
        topic_id: uuid::Uuid,
    ) -> Option<uuid::Uuid> {
        let name = format!("{}-{}", tp.topic, tp.partition);
        let dir = self
            .dirs
            .iter()
            .map(|d| d.join(&name))
            .find(|d| d.is_dir())?;
        dir_topic_id(&dir).filter(|id| *id != topic_id)
    }

    /// Put aside the directory of `tp` holding the files of the topic id `stray` (another
    /// incarnation of the topic, deleted): renamed to a `-delete` name while it holds them
    /// (`log::retire_dir`), then removed by the deferred deletion. `may_write` is asked immediately
    /// before the rename: the broker's right to write the directory of that name now (the
    /// partition held, its write deadline not passed). Returns whether a directory was put
    /// aside.
    pub(crate) fn retire_stray_dir(
        &self,
        tp: &TopicPartition,
        stray: uuid::Uuid,
        may_write: &dyn Fn() -> Result<(), String>,
    ) -> Result<bool, StoreError> {
        let name = format!("{}-{}", tp.topic, tp.partition);
        for (idx, root) in self.dirs.iter().enumerate() {
            let path = root.join(&name);
            // A directory without `partition.metadata` (imported from a Kafka before topic
            // ids and never opened here) holds the deleted topic's files too: the caller may
            // write the name only while the deletion names it for it, so no newer topic of
            // the name has opened (and stamped) the directory. One that cannot be read is
            // left for a later try, never taken for someone else's.
            let holding = match read_dir_topic_id(&path).map_err(|source| StoreError::Io {
                path: path.clone(),
                source,
            })? {
                None => continue,
                Some(Some(id)) if id != stray => continue,
                Some(holding) => holding,
            };
            {
                let reg = self.reg.lock();
                if reg.opening.contains(tp) || reg.logs.get(tp).is_some_and(|l| l.dir() == path) {
                    return Err(StoreError::Invalid {
                        path,
                        reason: "the directory is open here".into(),
                    });
                }
            }
            let target = self.dirs[idx].join(delete_dir_name(tp));
            may_write().map_err(|reason| StoreError::Invalid {
                path: path.clone(),
                reason,
            })?;
            match retire_dir_holding(&path, &target, holding) {
                Ok(true) => {}
                Ok(false) => return Ok(false),
                Err(source) => return Err(StoreError::Io { path, source }),
            }
            tracing::info!(?tp, %stray, dir = %path.display(), "put aside the directory of a deleted topic of this name; it is removed once nothing here holds it");
            self.del.counters.added();
            self.pending_dirs.lock().push(PendingDir::new(target));
            self.reap_dirs(now_ms());
            return Ok(true);
        }
        Ok(false)
    }

    /// Remove deleted partition directories nobody holds any more (each when its retry is
    /// due). Returns when the next retry is due.
    pub(crate) fn reap_dirs(&self, now: i64) -> Option<i64> {
        let mut pending = self.pending_dirs.lock();
        let del = &self.del;
        let mut next = None;
        // Open files of the host, read at most once per pass and only if needed.
        let mut open = None;
        pending.retain_mut(|p| {
            if !p.attempt.due(now) {
                next = earliest(next, p.attempt.next_at());
                return true;
            }
            if let Some(target) = p.rename_to.clone() {
                match std::fs::rename(&p.path, &target) {
                    Ok(()) => {
                        p.path = target;
                        p.rename_to = None;
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {
                        p.attempt.finished(&p.path);
                        del.counters.done(&p.attempt);
                        return false;
                    }
                    Err(e) => {
                        p.attempt.failed(del.retry, &del.counters, now, &p.path, &e);
                        next = earliest(next, p.attempt.next_at());
                        return true;
                    }
                }
            }
            // Our own handles first: wait for the last reader, then close everything.
            if let Some(log) = &p.log {
                if !log.release_files() {
                    return true;
                }
            }
            if p.waiting
                .iter()
                .any(|s| Arc::strong_count(s) > 1 || s.log.in_use())
            {
                return true;
            }
            p.waiting.clear();
            p.log = None;
            // No write gate here, and none is needed for a deleted partition: `p.path` is a
            // `-delete` name (this broker's, unique: `delete_dir_name`, or found at start-up),
            // and no broker opens a partition under such a name (`open_log` opens
            // `<topic>-<partition>` only; `Inner::open` skips them). In a shared log dir a
            // directory gets that name only through the write gate and while it holds the
            // deleted topic's files (`log::retire_dir`), so no new owner's file is in it.
            match remove_tree(&p.path, &del.counters, &mut open) {
                Ok(()) => {
                    tracing::info!(dir = %p.path.display(), "deleted partition directory");
                    p.attempt.finished(&p.path);
                    del.counters.done(&p.attempt);
                    false
                }
                Err(e) => {
                    p.attempt.failed(del.retry, &del.counters, now, &p.path, &e);
                    next = earliest(next, p.attempt.next_at());
                    true
                }
            }
        });
        next
    }

    /// Note the silly-renamed files (`.nfs*`, `.fuse_hidden*`) directly in `dir`.
    pub(crate) fn sweep_leftovers(&self, dir: &Path) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut found = Vec::new();
        for e in entries.flatten() {
            let name = e.file_name();
            if name.to_str().is_some_and(is_silly_renamed)
                && e.file_type().is_ok_and(|t| t.is_file())
            {
                found.push(e.path());
            }
        }
        self.note_leftovers(found);
    }

    /// Note the silly-renamed files `found` for removal once nothing holds them.
    fn note_leftovers(&self, found: Vec<PathBuf>) {
        if found.is_empty() {
            return;
        }
        let mut list = self.leftovers.lock();
        for path in found {
            if !list.iter().any(|l| l.path == path) {
                tracing::info!(file = %path.display(), "silly-renamed leftover found; it is removed once nothing holds it");
                self.del.counters.added();
                list.push(PendingPath {
                    path,
                    attempt: Attempt::default(),
                });
            }
        }
    }

    /// Reclaim leftovers nobody on this host holds. Returns when the next retry is due.
    pub(crate) fn reap_leftovers(&self, now: i64) -> Option<i64> {
        let mut list = self.leftovers.lock();
        if list.is_empty() {
            return None;
        }
        let del = &self.del;
        let mut next = None;
        let mut open = None;
        list.retain_mut(|l| {
            if !l.attempt.due(now) {
                next = earliest(next, l.attempt.next_at());
                return true;
            }
            let existed = l.path.exists();
            match reclaim_leftover(&l.path, &mut open) {
                Ok(true) => {
                    if existed {
                        del.counters.reclaimed();
                        tracing::info!(file = %l.path.display(), "reclaimed silly-renamed leftover");
                    }
                    del.counters.done(&l.attempt);
                    false
                }
                Ok(false) => {
                    // Held by a process on this host; its last close removes it. Check back.
                    l.attempt.failed(
                        del.retry,
                        &del.counters,
                        now,
                        &l.path,
                        &"held open by a process on this host",
                    );
                    next = earliest(next, l.attempt.next_at());
                    true
                }
                Err(e) => {
                    l.attempt.failed(del.retry, &del.counters, now, &l.path, &e);
                    next = earliest(next, l.attempt.next_at());
                    true
                }
            }
        });
        next
    }

    /// One pass over every pending removal: deleted segments of open logs, deleted or moved
    /// partition directories, leftovers. Returns when the next retry is due.
    pub(crate) fn reap_all(&self, now: i64) -> Option<i64> {
        let mut next = None;
        for log in self.logs_snapshot().iter() {
            next = earliest(next, log.reap_pending(now).1);
        }
        next = earliest(next, self.reap_dirs(now));
        earliest(next, self.reap_leftovers(now))
    }

    /// Move the log of `tp` into log dir `target` (an index into `dirs`): copy, switch under
    /// the writer lock, then remove the old directory by the deferred-deletion rules.
    pub(crate) fn move_log(&self, tp: &TopicPartition, target: usize) -> Result<(), StoreError> {
        let Some(target_dir) = self.dirs.get(target).cloned() else {
            return Err(StoreError::Invalid {
                path: PathBuf::new(),
                reason: format!("no log dir with index {target}"),
            });
        };
        let log = self.get(tp).ok_or_else(|| StoreError::Invalid {
            path: target_dir.clone(),
            reason: format!("{tp:?} is not open on this broker"),
        })?;
        // A move rewrites and removes the partition's files: only through the write gate.
        log.gate_io().map_err(|source| StoreError::Io {
            path: log.dir(),
            source,
        })?;
        if log.dir().parent() == Some(target_dir.as_path()) {
            return Ok(());
        }
        if !self.moving.lock().insert(tp.clone()) {
            tracing::info!(?tp, "a move of this partition is already in progress");
            return Ok(());
        }
        // No cleaning while the files are copied (the cleaner checks `moving`).
        self.cleaner.abort_and_wait(tp);
        let result = self.move_log_inner(tp, &log, target, &target_dir);
        self.moving.lock().remove(tp);
        result
    }

    fn move_log_inner(
        &self,
        tp: &TopicPartition,
        log: &Arc<Log>,
        target: usize,
        target_dir: &Path,
    ) -> Result<(), StoreError> {
        let future = target_dir.join(future_dir_name(tp));
        let final_dir = target_dir.join(format!("{}-{}", tp.topic, tp.partition));
        tracing::info!(?tp, from = %log.dir().display(), to = %final_dir.display(), "moving partition");
        let retired = match log.copy_and_switch(&future, &final_dir) {
            Ok(r) => r,
            Err(source) => {
                tracing::warn!(?tp, error = %source, "moving partition failed; it stays where it was");
                self.del.counters.added();
                self.pending_dirs.lock().push(PendingDir::new(future));
                self.reap_dirs(now_ms());
                return Err(StoreError::Io {
                    path: final_dir,
                    source,
                });
            }
        };
        #[cfg(test)]
        if crate::relocate::crash::here(crate::relocate::crash::At::AfterSwitch) {
            return Ok(());
        }
        let old_idx = {
            let mut reg = self.reg.lock();
            let old = reg.placement.get(tp).copied();
            if reg.logs.get(tp).is_some_and(|l| Arc::ptr_eq(l, log)) {
                reg.placement.insert(tp.clone(), target);
            }
            old
        };
        if let Some(old) = old_idx.filter(|&o| o != target) {
            let (rp, ls) = {
                let mut st = self.states[old].lock();
                (st.recovery_points.remove(tp), st.log_starts.remove(tp))
            };
            let mut st = self.states[target].lock();
            if let Some(rp) = rp {
                st.recovery_points.insert(tp.clone(), rp);
            }
            if let Some(ls) = ls {
                st.log_starts.insert(tp.clone(), ls);
            }
        }
        // The old copy: renamed out of the way at once (safe while open), removed after its
        // last reader; by a broker that still owns the partition only (in a shared log dir
        // the old copy, marked, may be what a new owner opened since).
        if let Err(e) = log.gate_io() {
            tracing::warn!(?tp, dir = %retired.old_dir.display(), error = %e,
                "the partition was lost during its move; its old copy is left to the new owner");
            return Ok(());
        }
        let old_root = retired
            .old_dir
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let target_name = old_root.join(delete_dir_name(tp));
        let mut pending = match std::fs::rename(&retired.old_dir, &target_name) {
            Ok(()) => {
                if let Err(e) = sync_dir(&old_root) {
                    tracing::warn!(dir = %old_root.display(), error = %e, "fsync of log dir failed");
                }
                PendingDir::new(target_name)
            }
            Err(e) => {
                let mut p = PendingDir {
                    rename_to: Some(target_name),
                    ..PendingDir::new(retired.old_dir.clone())
                };
                p.attempt
                    .failed(self.del.retry, &self.del.counters, now_ms(), &p.path, &e);
                p
            }
        };
        pending.waiting = retired.segments;
        for p in retired.pending {
            // Now covered by the directory's removal.
            self.del.counters.done(&p.attempt);
            pending.waiting.extend(p.seg);
        }
        self.del.counters.added();
        self.pending_dirs.lock().push(pending);
        if let Err(e) = self.checkpoint() {
            tracing::warn!(error = %e, "checkpoint after move failed");
        }
        tracing::info!(?tp, to = %final_dir.display(), "moved partition");
        self.reap_dirs(now_ms());
        Ok(())
    }

    pub(crate) fn checkpoint(&self) -> Result<(), StoreError> {
        if self.shared {
            // No broker owns a shared dir's checkpoint files (see `Sharing::Shared`).
            return Ok(());
        }
        let _g = self.checkpoint_lock.lock();
        let (logs, placement) = {
            let reg = self.reg.lock();
            (reg.logs.clone(), reg.placement.clone())
        };
        let mut first_err = None;
        for (idx, dir) in self.dirs.iter().enumerate() {
            let (mut rps, mut starts) = {
                let st = self.states[idx].lock();
                (st.recovery_points.clone(), st.log_starts.clone())
            };
            // Keep entries only for partitions still placed here.
            rps.retain(|tp, _| placement.get(tp) == Some(&idx));
            starts.retain(|tp, _| placement.get(tp) == Some(&idx));
            for (tp, log) in &logs {
                if placement.get(tp) == Some(&idx) {
                    rps.insert(tp.clone(), log.recovery_point());
                    starts.insert(tp.clone(), log.log_start_offset());
                }
            }
            {
                let mut st = self.states[idx].lock();
                st.recovery_points = rps.clone();
                st.log_starts = starts.clone();
            }
            let to_vec = |m: &HashMap<TopicPartition, i64>| {
                let mut v: Vec<(String, i32, i64)> = m
                    .iter()
                    .map(|(tp, o)| (tp.topic.clone(), tp.partition, *o))
                    .collect();
                v.sort();
                v
            };
            let cleaner = self
                .cleaner
                .first_dirty_of(|tp| placement.get(tp) == Some(&idx));
            for (name, text) in [
                (CLEANER_CHECKPOINT, format_offset_checkpoint(&cleaner)),
                (
                    RECOVERY_POINT_CHECKPOINT,
                    format_offset_checkpoint(&to_vec(&rps)),
                ),
                (
                    LOG_START_CHECKPOINT,
                    format_offset_checkpoint(&to_vec(&starts)),
                ),
            ] {
                let recorded = || {
                    if name == RECOVERY_POINT_CHECKPOINT {
                        for (tp, log) in &logs {
                            if let Some(rp) =
                                rps.get(tp).filter(|_| placement.get(tp) == Some(&idx))
                            {
                                log.recovery_point_recorded(*rp);
                            }
                        }
                    }
                };
                if self.states[idx].lock().written.get(name) == Some(&text) {
                    recorded();
                    continue;
                }
                let path = dir.join(name);
                match write_atomic(&path, text.as_bytes()) {
                    Ok(()) => {
                        self.states[idx].lock().written.insert(name, text);
                        recorded();
                    }
                    Err(source) => {
                        tracing::warn!(path = %path.display(), error = %source, "checkpoint write failed");
                        self.states[idx].lock().written.remove(name);
                        first_err.get_or_insert(StoreError::Io { path, source });
                    }
                }
            }
        }
        first_err.map_or(Ok(()), Err)
    }

    pub(crate) fn logs(&self) -> Vec<Arc<Log>> {
        self.reg.lock().snapshot().as_ref().clone()
    }

    /// [`Inner::logs`], shared: what the periodic passes walk.
    pub(crate) fn logs_snapshot(&self) -> Arc<Vec<Arc<Log>>> {
        self.reg.lock().snapshot()
    }

    pub(crate) fn get(&self, tp: &TopicPartition) -> Option<Arc<Log>> {
        self.reg.lock().logs.get(tp).cloned()
    }

    pub(crate) fn maintain(&self, now_ms: i64) {
        for log in self.logs() {
            if let Err(e) = log.maintain(now_ms) {
                tracing::warn!(tp = ?log.topic_partition(), error = %e, "log maintenance failed");
            }
        }
        for dir in &self.dirs {
            self.sweep_leftovers(dir);
        }
        self.reap_dirs(now_ms);
        self.reap_leftovers(now_ms);
    }

    /// Seals and flushes every log (on up to `threads` threads, each taking the next log),
    /// then writes the checkpoints and, in each log dir where every log was flushed, the
    /// clean-shutdown marker.
    pub(crate) fn shutdown(&self, threads: usize) -> Result<(), StoreError> {
        self.cleaner.stop();
        self.cleaner.wait_idle();
        let mut failed_dirs = HashSet::new();
        let mut first_err = None;
        let placement = self.reg.lock().placement.clone();
        let logs = self.logs();
        let failures = Mutex::new(Vec::new());
        let next = std::sync::atomic::AtomicUsize::new(0);
        let work = || loop {
            let k = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let Some(log) = logs.get(k) else { return };
            let res = log
                .flush()
                .and_then(|_| log.close_active())
                .and_then(|()| log.flush());
            if let Err(source) = res {
                tracing::error!(tp = ?log.topic_partition(), error = %source, "flush at shutdown failed");
                failures.lock().push((k, source));
            }
        };
        std::thread::scope(|scope| {
            for _ in 1..threads.clamp(1, logs.len().max(1)) {
                scope.spawn(work);
            }
            work();
        });
        let mut failures = failures.into_inner();
        // The first error reported is the first log's, as one after the other.
        failures.sort_by_key(|(k, _)| *k);
        for (k, source) in failures {
            let log = &logs[k];
            if let Some(&i) = placement.get(log.topic_partition()) {
                failed_dirs.insert(i);
            }
            first_err.get_or_insert(StoreError::Io {
                path: log.dir().to_path_buf(),
                source,
            });
        }
        if let Err(e) = self.checkpoint() {
            first_err.get_or_insert(e);
            failed_dirs.extend(0..self.dirs.len());
        }
        self.reap_dirs(now_ms());
        for (idx, dir) in self.dirs.iter().enumerate() {
            if failed_dirs.contains(&idx) || self.shared {
                continue;
            }
            let path = dir.join(CLEAN_SHUTDOWN_MARKER);
            if let Err(source) = write_atomic(&path, br#"{"version":0,"brokerEpoch":-1}"#) {
                first_err.get_or_insert(StoreError::Io { path, source });
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

/// What the cleaner threads ask of the manager (`cleaner/schedule.rs`): the cleaner names
/// nothing of the manager's, so imports go one way (manager -> cleaner).
impl Host for Inner {
    fn cleaner(&self) -> &crate::cleaner::schedule::Shared {
        &self.cleaner
    }

    fn logs(&self) -> Vec<Arc<Log>> {
        Inner::logs(self)
    }

    fn moving(&self) -> HashSet<TopicPartition> {
        self.moving.lock().clone()
    }

    fn is_moving(&self, tp: &TopicPartition) -> bool {
        self.moving.lock().contains(tp)
    }

    /// Write each log dir's `cleaner-offset-checkpoint` (not in a shared log dir), and record
    /// what was written where [`Inner::checkpoint`] compares before writing it again.
    fn write_cleaner_checkpoints(&self) {
        if self.shared {
            return;
        }
        let _g = self.cleaner.lock_checkpoint();
        let placement = self.reg.lock().placement.clone();
        for (idx, dir) in self.dirs.iter().enumerate() {
            let entries = self
                .cleaner
                .first_dirty_of(|tp| placement.get(tp) == Some(&idx));
            let path = dir.join(CLEANER_CHECKPOINT);
            let text = format_offset_checkpoint(&entries);
            // What the log manager's checkpoints compare with before writing it again.
            let mut st = self.states[idx].lock();
            st.written.remove(CLEANER_CHECKPOINT);
            drop(st);
            match write_atomic(&path, text.as_bytes()) {
                Ok(()) => {
                    self.states[idx]
                        .lock()
                        .written
                        .insert(CLEANER_CHECKPOINT, text);
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cleaner checkpoint write failed")
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(topic: &str, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }

    #[test]
    fn only_names_kafka_would_make_are_legal() {
        for ok in [tp("orders", 0), tp("a.b_C-9", 7), tp(&"t".repeat(249), 0)] {
            assert!(legal_topic_partition(&ok), "{ok:?}");
        }
        for bad in [
            tp("", 0),
            tp(".", 0),
            tp("..", 0),
            tp("a/b", 0),
            tp("caf\u{e9}", 0),
            tp("a b", 0),
            tp(&"t".repeat(250), 0),
            tp("orders", -1),
        ] {
            assert!(!legal_topic_partition(&bad), "{bad:?}");
        }
    }

    #[test]
    fn a_partition_is_placed_once_in_the_log_dir_holding_fewest() {
        let mut reg = Registry::default();
        for (t, i) in [("a", 0), ("b", 0), ("c", 1)] {
            reg.placement.insert(tp(t, 0), i);
        }
        // Placed 2, 1, 0: dir 2; then 2, 1, 1: the first of the fewest; then 2, 2, 1.
        assert_eq!(place(&mut reg, &tp("new", 0), None, 3), 2);
        assert_eq!(place(&mut reg, &tp("new", 1), None, 3), 1);
        assert_eq!(place(&mut reg, &tp("new", 2), None, 3), 2);
        assert_eq!(reg.placement.get(&tp("new", 0)), Some(&2));
        // Where a shared dir holds it already, whatever the counts say.
        assert_eq!(place(&mut reg, &tp("found", 0), Some(0), 3), 0);
        // Once placed, always there.
        assert_eq!(place(&mut reg, &tp("a", 0), Some(2), 3), 0);
        assert_eq!(place(&mut reg, &tp("new", 0), None, 3), 2);
        // With preferred dirs (on volumes reached directly), among those only.
        reg.preferred = vec![0, 1];
        assert_eq!(place(&mut reg, &tp("pref", 0), None, 3), 1);
        assert_eq!(place(&mut reg, &tp("pref", 1), None, 3), 0);
        // Found elsewhere: opened where it is.
        assert_eq!(place(&mut reg, &tp("pref", 2), Some(2), 3), 2);
    }

    #[test]
    fn the_clean_shutdown_marker_is_consumed_once_and_never_in_a_shared_dir() {
        let d = tempfile::tempdir().unwrap();
        let marker = d.path().join(CLEAN_SHUTDOWN_MARKER);
        std::fs::write(&marker, b"{}").unwrap();
        assert!(take_clean_marker(d.path(), false).unwrap());
        assert!(
            !marker.exists(),
            "a marker left would vouch for the next crash"
        );
        assert!(!take_clean_marker(d.path(), false).unwrap());
        // A shared dir's per-dir files are no broker's: not trusted, not removed.
        std::fs::write(&marker, b"{}").unwrap();
        assert!(!take_clean_marker(d.path(), true).unwrap());
        assert!(marker.exists());
    }

    #[test]
    fn listing_finds_each_partition_once_and_the_leftover_dirs() {
        let roots = [tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap()];
        let dirs: Vec<PathBuf> = roots.iter().map(|d| d.path().to_path_buf()).collect();
        let mkdir = |i: usize, name: &str| std::fs::create_dir(dirs[i].join(name)).unwrap();
        mkdir(0, "t-0");
        mkdir(0, &delete_dir_name(&tp("t", 1)));
        mkdir(0, &future_dir_name(&tp("t", 2)));
        mkdir(0, "__cluster_metadata-0");
        mkdir(0, "not a partition");
        std::fs::write(dirs[0].join("t-3"), b"a file").unwrap();
        mkdir(1, "t-0");
        mkdir(1, "u-5");
        let mut found = Discovery::default();
        list_partition_dirs(0, &dirs, false, &mut found).unwrap();
        list_partition_dirs(1, &dirs, false, &mut found).unwrap();
        found.choose_copies(false).unwrap();
        let mut listed: Vec<_> = found
            .discovered
            .iter()
            .map(|d| (d.tp.clone(), d.dir.clone()))
            .collect();
        listed.sort();
        assert_eq!(
            listed,
            vec![
                (tp("t", 0), dirs[0].join("t-0")),
                (tp("u", 5), dirs[1].join("u-5")),
            ]
        );
        assert_eq!(found.placement.get(&tp("t", 0)), Some(&0));
        assert_eq!(found.placement.get(&tp("u", 5)), Some(&1));
        assert_eq!(found.placement.len(), 2);
        assert_eq!(found.pending_dirs.len(), 2, "the -delete and -future dirs");
    }
}

//! Partition files opened on demand, under a cap (`sluice.log.open.files.max`).
//!
//! A segment's `.log`, `.index`, `.timeindex` and `.txnindex` are each a [`CachedFile`]: a
//! path and, while it is open, a descriptor. Every use asks the file ([`CachedFile::get`]),
//! which opens it again if the cache closed it. When more than the cap are open, opening one first closes
//! others, least recently used first (a clock sweep), that nothing else holds and that are
//! clean. Nothing about what is written, fsynced or acknowledged changes:
//!
//! - A file is closed only while no one but the cache holds its descriptor (a fetch in flight
//!   holds one in its `FileSlice`), so deletion's rule is kept as it was: a segment's files are
//!   unlinked only once the segment is dropped, which closes them.
//! - A file is closed only while everything written through the descriptor was fsynced
//!   through it ([`CachedFile::for_write`] counts writes, [`CachedFile::sync_data`] what they
//!   covered). A writeback error is reported to the descriptors open when it happened, so a
//!   descriptor closed with unsynced data could lose one (on NFS `close` itself flushes and
//!   may fail), and an fsync through a descriptor opened later would not see it.
//! - A file is opened again by the path it was last renamed to through it
//!   ([`CachedFile::rename`]), and only if it is still the same file (device and inode): a
//!   file renamed or replaced behind its back is an error, never another file's data.
//!
//! The cap is soft: when every open file is in use or dirty the cache opens one more rather
//! than fail, and says so once in a while. One cache serves the process ([`files`]), as the
//! open-files limit is the process's.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Weak};

use parking_lot::Mutex;

/// The process's cache of partition files. Unlimited until the broker sets its cap
/// ([`FileCache::set_max`]).
pub(crate) fn files() -> &'static Arc<FileCache> {
    static FILES: LazyLock<Arc<FileCache>> = LazyLock::new(|| FileCache::new(initial_max()));
    &FILES
}

/// No cap, except that the crate's tests can be run with one (`SLUICE_STORE_FILES_MAX=8
/// cargo test -p sluice-store`), so that every test's files are closed and opened again.
fn initial_max() -> usize {
    #[cfg(test)]
    if let Some(n) = std::env::var("SLUICE_STORE_FILES_MAX")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        return n;
    }
    usize::MAX
}

/// Counters of the partition-file cache ([`crate::fds::partition_files`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FileCacheStats {
    /// Partition files open now.
    pub open: u64,
    /// The cap.
    pub max: u64,
    /// Files opened again after the cache had closed them.
    pub reopened: u64,
    /// Files the cache closed to stay under its cap.
    pub closed: u64,
    /// Files opened past the cap because none could be closed (all in use or dirty).
    pub over_cap: u64,
}

#[derive(Debug)]
pub(crate) struct FileCache {
    max: AtomicUsize,
    open: AtomicUsize,
    clock: Mutex<Clock>,
    reopened: AtomicU64,
    closed: AtomicU64,
    over_cap: AtomicU64,
    over_cap_logged: Mutex<Option<std::time::Instant>>,
}

/// The open files, swept round by a hand (entries of dropped files are removed as met).
#[derive(Debug, Default)]
struct Clock {
    slots: Vec<Weak<Slot>>,
    hand: usize,
}

#[derive(Debug)]
struct Slot {
    cache: Arc<FileCache>,
    /// Used since the hand last passed (the clock's second chance).
    used: AtomicBool,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    path: PathBuf,
    file: Option<Arc<File>>,
    /// Device and inode of the file, checked at every re-open.
    id: (u64, u64),
    /// Writes begun through this file, and how many of them a successful fsync covered.
    writes: u64,
    synced: u64,
    /// Opened at least once ([`CachedFile::unopened`] makes one that was not).
    opened: bool,
    /// Opened read-only: a file of a partition another broker owns (`replica.rs`).
    read_only: bool,
}

impl State {
    fn closable(&self) -> bool {
        self.writes == self.synced
            && self
                .file
                .as_ref()
                .is_some_and(|f| Arc::strong_count(f) == 1)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        if self.state.get_mut().file.is_some() {
            self.cache.open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// One partition file, opened on demand.
#[derive(Debug)]
pub(crate) struct CachedFile(Arc<Slot>);

fn identity(file: &File) -> io::Result<(u64, u64)> {
    let st = rustix::fs::fstat(file)?;
    Ok((st.st_dev, st.st_ino))
}

/// A descriptor taken for a write ([`CachedFile::for_write`]); the write is counted when it
/// is dropped.
pub(crate) struct WriteGuard<'a> {
    file: Arc<File>,
    of: &'a CachedFile,
}

impl std::ops::Deref for WriteGuard<'_> {
    type Target = File;
    fn deref(&self) -> &File {
        &self.file
    }
}

impl Drop for WriteGuard<'_> {
    fn drop(&mut self) {
        self.of.0.state.lock().writes += 1;
    }
}

impl FileCache {
    pub(crate) fn new(max: usize) -> Arc<FileCache> {
        Arc::new(FileCache {
            max: AtomicUsize::new(max.max(1)),
            open: AtomicUsize::new(0),
            clock: Mutex::new(Clock::default()),
            reopened: AtomicU64::new(0),
            closed: AtomicU64::new(0),
            over_cap: AtomicU64::new(0),
            over_cap_logged: Mutex::new(None),
        })
    }

    pub(crate) fn set_max(&self, max: usize) {
        self.max.store(max.max(1), Ordering::Relaxed);
    }

    pub(crate) fn stats(&self) -> FileCacheStats {
        FileCacheStats {
            open: self.open.load(Ordering::Relaxed) as u64,
            max: self.max.load(Ordering::Relaxed) as u64,
            reopened: self.reopened.load(Ordering::Relaxed),
            closed: self.closed.load(Ordering::Relaxed),
            over_cap: self.over_cap.load(Ordering::Relaxed),
        }
    }

    /// Take a file just opened (or created) at `path` into the cache, clean.
    pub(crate) fn adopt(self: &Arc<Self>, path: PathBuf, file: File) -> io::Result<CachedFile> {
        let id = identity(&file)?;
        self.make_room();
        let slot = Arc::new(Slot {
            cache: self.clone(),
            used: AtomicBool::new(true),
            state: Mutex::new(State {
                path,
                file: Some(Arc::new(file)),
                id,
                writes: 0,
                synced: 0,
                opened: true,
                read_only: false,
            }),
        });
        self.open.fetch_add(1, Ordering::Relaxed);
        self.register(&slot);
        Ok(CachedFile(slot))
    }

    fn register(&self, slot: &Arc<Slot>) {
        let mut c = self.clock.lock();
        if c.slots.len() > 2 * self.open.load(Ordering::Relaxed) + 1024 {
            c.slots.retain(|w| w.strong_count() > 0);
        }
        c.slots.push(Arc::downgrade(slot));
    }

    /// Close files until fewer than the cap are open, if it is reached: least recently used
    /// first, only those nothing else holds and that are clean, down to a sixteenth under the
    /// cap so that the sweep is not run for every open. Called by an open before it opens.
    fn make_room(&self) {
        let max = self.max.load(Ordering::Relaxed);
        if self.open.load(Ordering::Relaxed) < max {
            return;
        }
        let low = (max - max / 16).saturating_sub(1);
        let mut closing = Vec::new();
        {
            let mut c = self.clock.lock();
            let mut visits = 2 * c.slots.len() + 1;
            while self.open.load(Ordering::Relaxed) > low && visits > 0 && !c.slots.is_empty() {
                visits -= 1;
                let i = c.hand % c.slots.len();
                let Some(slot) = c.slots[i].upgrade() else {
                    c.slots.swap_remove(i);
                    continue;
                };
                if slot.used.swap(false, Ordering::Relaxed) {
                    c.hand = i + 1;
                    continue;
                }
                let closed = match slot.state.try_lock() {
                    Some(mut st) if st.closable() => {
                        closing.push(st.file.take());
                        true
                    }
                    _ => false,
                };
                if closed {
                    self.open.fetch_sub(1, Ordering::Relaxed);
                    self.closed.fetch_add(1, Ordering::Relaxed);
                    c.slots.swap_remove(i);
                } else {
                    c.hand = i + 1;
                }
            }
        }
        // Closed outside the lock (on NFS a close may wait for the server).
        drop(closing);
        if self.open.load(Ordering::Relaxed) >= max {
            self.over_cap.fetch_add(1, Ordering::Relaxed);
            let mut logged = self.over_cap_logged.lock();
            if logged.is_none_or(|t| t.elapsed() >= std::time::Duration::from_secs(10)) {
                *logged = Some(std::time::Instant::now());
                tracing::warn!(
                    open = self.open.load(Ordering::Relaxed),
                    max,
                    "every open partition file is in use or has unsynced writes: opening one past sluice.log.open.files.max"
                );
            }
        }
    }
}

impl CachedFile {
    /// Open `path` read-write, creating it if `create`, into the process's cache.
    pub(crate) fn open(path: &Path, create: bool) -> io::Result<CachedFile> {
        let cache = files();
        cache.make_room();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(false)
            .open(path)?;
        cache.adopt(path.to_path_buf(), file)
    }

    /// The file at `path`, not opened yet: one `statx` by name, whose device and inode the
    /// first use checks as a re-open does ([`CachedFile::get`]), and whose size and
    /// modification time are returned. A log's open takes its sealed segments below the
    /// recovery point so, to cost nothing per segment until one is used.
    pub(crate) fn unopened(path: &Path) -> io::Result<(CachedFile, rustix::fs::Stat)> {
        Self::unopened_as(path, false)
    }

    /// [`CachedFile::unopened`], opened read-only on use: a file another broker writes
    /// (`replica.rs`), which this one never writes through the descriptor.
    pub(crate) fn unopened_read_only(path: &Path) -> io::Result<(CachedFile, rustix::fs::Stat)> {
        Self::unopened_as(path, true)
    }

    fn unopened_as(path: &Path, read_only: bool) -> io::Result<(CachedFile, rustix::fs::Stat)> {
        let st = rustix::fs::stat(path)?;
        let cache = files();
        let slot = Arc::new(Slot {
            cache: cache.clone(),
            used: AtomicBool::new(false),
            state: Mutex::new(State {
                path: path.to_path_buf(),
                file: None,
                id: (st.st_dev, st.st_ino),
                writes: 0,
                synced: 0,
                opened: false,
                read_only,
            }),
        });
        Ok((CachedFile(slot), st))
    }

    /// The file's descriptor, opened again if the cache closed it.
    pub(crate) fn get(&self) -> io::Result<Arc<File>> {
        let slot = &self.0;
        slot.used.store(true, Ordering::Relaxed);
        let mut st = slot.state.lock();
        if let Some(f) = &st.file {
            return Ok(f.clone());
        }
        slot.cache.make_room();
        let file = OpenOptions::new()
            .read(true)
            .write(!st.read_only)
            .open(&st.path)?;
        if identity(&file)? != st.id {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{} is no longer the file this segment had open (renamed or replaced)",
                    st.path.display()
                ),
            ));
        }
        let file = Arc::new(file);
        st.file = Some(file.clone());
        let again = std::mem::replace(&mut st.opened, true);
        drop(st);
        slot.cache.open.fetch_add(1, Ordering::Relaxed);
        if again {
            slot.cache.reopened.fetch_add(1, Ordering::Relaxed);
        }
        slot.cache.register(slot);
        Ok(file)
    }

    /// The descriptor if the file is open now (a read that must not wait for the volume
    /// takes the slow path otherwise).
    pub(crate) fn get_if_open(&self) -> Option<Arc<File>> {
        self.0.used.store(true, Ordering::Relaxed);
        self.0.state.lock().file.clone()
    }

    /// The descriptor, for a write: the file is dirty (never closed by the cache) until an
    /// fsync through it covers this write. The write is counted when the guard is dropped,
    /// after it was made: an fsync that began before it then does not count it as covered
    /// (while the guard lives the descriptor is in use, so the cache does not close it).
    pub(crate) fn for_write(&self) -> io::Result<WriteGuard<'_>> {
        let file = self.get()?;
        Ok(WriteGuard { file, of: self })
    }

    /// `fdatasync` through the descriptor; on success every write begun before it is clean.
    pub(crate) fn sync_data(&self) -> io::Result<()> {
        let (file, writes) = {
            let st = self.0.state.lock();
            match &st.file {
                Some(f) => (f.clone(), st.writes),
                // Closed: the cache closes only clean files, and no write opens one without
                // counting itself.
                None => return Ok(()),
            }
        };
        file.sync_data()?;
        let mut st = self.0.state.lock();
        st.synced = st.synced.max(writes);
        Ok(())
    }

    /// Written through since the last fsync through it.
    pub(crate) fn dirty(&self) -> bool {
        let st = self.0.state.lock();
        st.writes != st.synced
    }

    /// Someone besides the cache holds the descriptor (a fetch in flight, a read snapshot).
    pub(crate) fn in_use(&self) -> bool {
        self.0
            .state
            .lock()
            .file
            .as_ref()
            .is_some_and(|f| Arc::strong_count(f) > 1)
    }

    /// Rename the file to `to`, which a later re-open then uses (under the file's lock, so no
    /// open races the rename).
    pub(crate) fn rename(&self, to: &Path) -> io::Result<()> {
        self.rename_with(to, |from, to| std::fs::rename(from, to))
    }

    /// [`CachedFile::rename`] by `how` (a rename that must not replace `to`).
    pub(crate) fn rename_with(
        &self,
        to: &Path,
        how: impl FnOnce(&Path, &Path) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut st = self.0.state.lock();
        how(&st.path, to)?;
        st.path = to.to_path_buf();
        Ok(())
    }

    /// Ok if the file's current name (the one it was last renamed to through this cache)
    /// still names this file; an error of kind `NotFound` if it names nothing or another file
    /// (renamed or deleted behind the cache's back: its directory moved or deleted, or
    /// another log object over the same files renamed it).
    pub(crate) fn still_at_its_name(&self) -> io::Result<()> {
        let st = self.0.state.lock();
        let found = match rustix::fs::stat(&st.path) {
            Ok(s) => (s.st_dev, s.st_ino) == st.id,
            Err(e) if e == rustix::io::Errno::NOENT => false,
            Err(e) => return Err(e.into()),
        };
        if found {
            Ok(())
        } else {
            Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{} is no longer the file this segment has",
                    st.path.display()
                ),
            ))
        }
    }

    /// Whether the file is open now.
    #[cfg(test)]
    pub(crate) fn is_open(&self) -> bool {
        self.0.state.lock().file.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    /// A cache of its own (the process's is shared by every test of the crate).
    fn open_in(cache: &Arc<FileCache>, path: &Path) -> CachedFile {
        cache.make_room();
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .expect("open");
        cache.adopt(path.to_path_buf(), f).expect("adopt")
    }

    fn open_count(files: &[CachedFile]) -> usize {
        files.iter().filter(|f| f.is_open()).count()
    }

    #[test]
    fn stays_under_its_cap_and_reopens_on_use() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = FileCache::new(8);
        let files: Vec<CachedFile> = (0..40)
            .map(|i| {
                let f = open_in(&cache, &dir.path().join(format!("f{i}")));
                f.for_write()
                    .expect("write")
                    .write_all_at(&[i as u8], 0)
                    .expect("write");
                f.sync_data().expect("sync");
                f
            })
            .collect();
        assert!(cache.stats().open <= 8, "{:?}", cache.stats());
        assert_eq!(open_count(&files), cache.stats().open as usize);
        // Every file reads back its own byte, opened again as needed, the cap kept.
        for (i, f) in files.iter().enumerate() {
            let mut b = [0u8; 1];
            f.get()
                .expect("get")
                .read_exact_at(&mut b, 0)
                .expect("read");
            assert_eq!(b[0], i as u8);
            assert!(cache.stats().open <= 8, "{:?}", cache.stats());
        }
        assert!(cache.stats().reopened > 0 && cache.stats().closed > 0);
        // Dropping a file closes it and gives its place back.
        drop(files);
        assert_eq!(cache.stats().open, 0);
    }

    #[test]
    fn never_closes_a_held_or_dirty_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = FileCache::new(4);
        let held_file = open_in(&cache, &dir.path().join("held"));
        let held = held_file.get().expect("get");
        let dirty = open_in(&cache, &dir.path().join("dirty"));
        dirty
            .for_write()
            .expect("write")
            .write_all_at(b"x", 0)
            .expect("write");
        assert!(dirty.dirty());
        let others: Vec<CachedFile> = (0..20)
            .map(|i| open_in(&cache, &dir.path().join(format!("o{i}"))))
            .collect();
        assert!(held_file.is_open() && held_file.in_use());
        assert!(dirty.is_open());
        // The cap holds with the two pinned (the others are clean and unheld).
        assert!(cache.stats().open <= 4, "{:?}", cache.stats());
        // Once synced and let go, they may be closed like the others.
        dirty.sync_data().expect("sync");
        assert!(!dirty.dirty());
        drop(held);
        assert!(!held_file.in_use());
        let more: Vec<CachedFile> = (0..20)
            .map(|i| open_in(&cache, &dir.path().join(format!("m{i}"))))
            .collect();
        assert!(!dirty.is_open() && !held_file.is_open());
        drop((others, more));
    }

    #[test]
    fn a_write_after_the_sync_began_stays_dirty() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = FileCache::new(4);
        let f = open_in(&cache, &dir.path().join("f"));
        f.for_write().expect("write");
        // A sync covers the writes begun before it only.
        let (file, writes) = {
            let st = f.0.state.lock();
            (st.file.clone().expect("open"), st.writes)
        };
        f.for_write().expect("write");
        file.sync_data().expect("sync");
        {
            let mut st = f.0.state.lock();
            st.synced = st.synced.max(writes);
        }
        assert!(f.dirty());
        f.sync_data().expect("sync");
        assert!(!f.dirty());
    }

    #[test]
    fn follows_its_renames_and_refuses_a_replaced_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = FileCache::new(1);
        let a = open_in(&cache, &dir.path().join("a"));
        a.for_write().expect("w").write_all_at(b"A", 0).expect("w");
        a.sync_data().expect("sync");
        a.rename(&dir.path().join("a.deleted")).expect("rename");
        // Closed by the next open (cap 1), then opened again under its new name.
        let b = open_in(&cache, &dir.path().join("b"));
        assert!(!a.is_open());
        let mut buf = [0u8; 1];
        a.get()
            .expect("reopen")
            .read_exact_at(&mut buf, 0)
            .expect("read");
        assert_eq!(&buf, b"A");
        // A file put in its place behind its back is not taken for it.
        drop(b);
        let c = open_in(&cache, &dir.path().join("c"));
        assert!(!a.is_open());
        std::fs::write(dir.path().join("z"), b"Z").expect("write");
        std::fs::rename(dir.path().join("z"), dir.path().join("a.deleted")).expect("rename");
        let err = a.get().expect_err("replaced");
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        drop(c);
    }

    #[test]
    fn a_closed_file_is_not_opened_for_a_read_that_must_not_wait() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = FileCache::new(1);
        let a = open_in(&cache, &dir.path().join("a"));
        assert!(a.get_if_open().is_some());
        let _b = open_in(&cache, &dir.path().join("b"));
        assert!(a.get_if_open().is_none());
        assert!(a.get().is_ok());
    }

    /// A write counted before it is made would be taken for synced by an fsync that runs
    /// between the count and the write (the appender holds the writer lock, a flush only the
    /// flush lock): the cache could then close the descriptor that would report its writeback
    /// error (adversary finding on 3a5d161). It is counted once made.
    #[test]
    fn a_write_made_after_a_concurrent_sync_began_stays_dirty() {
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = FileCache::new(4);
        let f = open_in(&cache, &dir.path().join("f"));
        // The appender: counted, not yet written.
        let w = f.for_write().expect("for_write");
        // The flush, concurrently.
        f.sync_data().expect("sync");
        // The appender's write, after the fsync.
        w.write_all_at(b"not synced", 0).expect("write");
        drop(w);
        assert!(
            f.dirty(),
            "a write made after the only fsync is taken for synced"
        );
        let _others: Vec<CachedFile> = (0..8)
            .map(|i| open_in(&cache, &dir.path().join(format!("o{i}"))))
            .collect();
        assert!(f.is_open(), "closed with a write no fsync covered");
    }

    /// Not closed: the identity checked at a re-open is (device, inode number), and ext4 and
    /// xfs reuse a freed number at once: a file removed and created again under the
    /// segment's name by another broker can be opened as the segment's (adversary finding on
    /// 3a5d161; the write gate and the end of stale reads at the write deadline keep a
    /// deposed broker from using it; docs/configuration.md, Open files).
    #[test]
    #[ignore = "a known gap: (device, inode) identity at a re-open; an inode number can be reused"]
    fn a_file_replaced_by_one_with_a_reused_inode_number_is_refused() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let cache = FileCache::new(1);
        let path = dir.path().join("00000000000000000000.log");
        let a = open_in(&cache, &path);
        a.for_write().expect("w").write_all_at(b"A", 0).expect("w");
        a.sync_data().expect("sync");
        let ino = std::fs::metadata(&path).expect("stat").ino();
        let _b = open_in(&cache, &dir.path().join("b"));
        assert!(!a.is_open());
        // Another broker deletes it and makes a new file under the same name.
        let mut reused = false;
        for _ in 0..16 {
            std::fs::remove_file(&path).expect("remove");
            std::fs::write(&path, b"Z").expect("create");
            if std::fs::metadata(&path).expect("stat").ino() == ino {
                reused = true;
                break;
            }
        }
        assert!(
            reused,
            "precondition: this file system did not reuse the inode number (tmpfs?)"
        );
        if let Ok(file) = a.get() {
            let mut b = [0u8; 1];
            file.read_exact_at(&mut b, 0).expect("read");
            panic!("another file opened as this one (reads {:?})", b[0] as char);
        }
    }
}

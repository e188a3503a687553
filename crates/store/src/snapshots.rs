//! Producer-state snapshot files (`<offset>.snapshot`, Kafka's format: `sluice_format::snapshot`)
//! in a partition directory.
//!
//! A log writes one at every roll (for the new segment's base, under the writer lock, so the
//! state is exactly that of the log end), when its active segment is sealed at shutdown
//! (unless the log was never written to, or the one at the end holds exactly that state,
//! [`same_at`], and is one the log loaded or wrote: `Log::close_active`), and at open after
//! it rebuilt the state from the log start.
//! Opening a log loads the newest readable snapshot at or below the log end and replays the
//! batches from its offset on: producer state (idempotence, epoch fencing) then survives any
//! number of rolls, where a rebuild from the newest segments alone forgot producers that had
//! not written lately.
//!
//! A roll writes its snapshot without fsync (the append path waits for no fsync of it); the
//! flush that follows the roll makes it durable, after the segments below it ([`sync`], as
//! Kafka flushes the snapshot with the rolled segment), and a close makes its own durable at
//! once. A snapshot that a crash tore or lost fails its CRC or is missing, and the open falls
//! back to an older one, or with none to a replay from the log start (`Log::open`). One above
//! the log end (the log was cut back by recovery) is removed at open. Only the newest
//! [`SNAPSHOTS_KEPT`] durable ones are kept, with the newest durable one at or below the
//! recorded recovery point and every one not yet durable (`Log::prune_snapshots`, off the
//! append path), so once one was flushed a crash always leaves one, and an open after a
//! crash finds one to replay from below what it recovers. No snapshot file is held open under its snapshot name when it may be removed
//! (a spare's is closed before its rename; [`sync`] opens only one not yet durable, which
//! pruning leaves), so removing one is safe on NFS.

use std::io;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use sluice_format::names::{parse_segment_file_name, segment_file_name, SegmentFileKind};
use sluice_format::snapshot::{decode_snapshot, encode_snapshot};

use crate::producer::ProducerStates;

/// Snapshot files kept per partition (the newest; a torn newest one leaves the one before).
pub(crate) const SNAPSHOTS_KEPT: usize = 2;

fn snapshot_path(dir: &Path, offset: i64) -> PathBuf {
    dir.join(segment_file_name(offset, SegmentFileKind::Snapshot))
}

/// Offsets of the snapshot files in `dir`, ascending (what they hold is not read).
pub(crate) fn offsets(dir: &Path) -> io::Result<Vec<i64>> {
    list(dir)
}

/// Offsets of the snapshot files in `dir`, ascending.
fn list(dir: &Path) -> io::Result<Vec<i64>> {
    let mut v = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if let Some(name) = entry.file_name().to_str() {
            if let Some((offset, SegmentFileKind::Snapshot)) = parse_segment_file_name(name) {
                v.push(offset);
            }
        }
    }
    v.sort_unstable();
    Ok(v)
}

/// Remove the snapshot file at `offset` (a missing one is no error; a failure is logged).
pub(crate) fn remove_offset(dir: &Path, offset: i64) {
    remove(dir, offset)
}

fn remove(dir: &Path, offset: i64) {
    let path = snapshot_path(dir, offset);
    if let Err(e) = std::fs::remove_file(&path) {
        if e.kind() != io::ErrorKind::NotFound {
            tracing::warn!(path = %path.display(), error = %e, "could not remove a producer snapshot");
        }
    }
}

/// How many times a placement removes a file it finds at the snapshot's name and tries again.
const PLACE_ATTEMPTS: usize = 4;

/// Write the snapshot of `producers` as of `offset`. Older snapshots are left for [`prune`],
/// off the append path: removing a file can wait for the volume.
///
/// The bytes go first into a file of this writer's own: `spare` (the roll's, made ahead:
/// `crate::segment::Spare`) or a new `<offset>.snapshot.<epoch>-<process>-<n>.spare`. Then
/// `check` (the write gate), then a rename to the snapshot's name that never replaces a file
/// there ([`crate::segment::rename_no_replace`]). A file found there is this writer's own
/// older one at the same offset (an open's rebuilt state, then the acquisition's roll) or a
/// former owner's that landed late; it is removed and the rename tried again, after the gate
/// once more. So a former owner's write that passed its gate and stalled in flight never
/// lands in a new owner's snapshot: it never opens one by its name (a write in place could
/// truncate and fill the file the new owner made since), and its rename either finds its own
/// file gone (every open of a shared directory removes the `.spare` files it lists) or the
/// name taken (docs/cluster.md, fencing point 2).
pub(crate) fn write(
    dir: &Path,
    offset: i64,
    producers: &ProducerStates,
    epoch: i32,
    spare: Option<(std::fs::File, PathBuf)>,
    check: &dyn Fn() -> io::Result<()>,
) -> io::Result<u32> {
    use std::os::unix::fs::FileExt;
    let bytes = encode_snapshot(&producers.to_snapshot());
    let crc = crc_of(&bytes).unwrap_or_default();
    let path = snapshot_path(dir, offset);
    let (file, from) = match spare {
        Some(spare) => spare,
        None => {
            let mut from = path.clone().into_os_string();
            from.push(crate::segment::spare_token(epoch));
            from.push(crate::segment::SPARE_SUFFIX);
            let from = PathBuf::from(from);
            let file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&from)?;
            (file, from)
        }
    };
    let placed = file.write_all_at(&bytes, 0).and_then(|()| {
        drop(file);
        place(&from, &path, check)
    });
    if placed.is_err() {
        let _ = std::fs::remove_file(&from);
    }
    placed.map(|()| crc)
}

/// The CRC of the snapshot file at `offset` when it holds exactly the snapshot of
/// `producers` (the bytes [`write`] would write); None when it differs, is missing or cannot
/// be read.
pub(crate) fn same_at(dir: &Path, offset: i64, producers: &ProducerStates) -> Option<u32> {
    let on_disk = std::fs::read(snapshot_path(dir, offset)).ok()?;
    let bytes = encode_snapshot(&producers.to_snapshot());
    (on_disk == bytes).then(|| crc_of(&bytes)).flatten()
}

/// The CRC-32C a snapshot file's bytes carry (Kafka's format: after the 2-byte version).
pub(crate) fn crc_of(bytes: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(bytes.get(2..6)?.try_into().ok()?))
}

/// Rename `from` to `path` without replacing a file there; one found there is removed and
/// the rename tried again ([`write`]), `check` asked before each try.
fn place(from: &Path, path: &Path, check: &dyn Fn() -> io::Result<()>) -> io::Result<()> {
    for _ in 0..PLACE_ATTEMPTS {
        check()?;
        #[cfg(test)]
        if stall(Box::new({
            let (from, path) = (from.to_path_buf(), path.to_path_buf());
            move || crate::segment::rename_no_replace(&from, &path)
        })) {
            return Ok(());
        }
        match crate::segment::rename_no_replace(from, path) {
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                tracing::debug!(path = %path.display(), "a producer snapshot is already at this offset; replacing it");
                // Asked again: a rename that stalled past this writer's deadline and found
                // the name taken by the new owner must not remove the new owner's file.
                check()?;
                match std::fs::remove_file(path) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e),
                    _ => {}
                }
            }
            placed => return placed,
        }
    }
    Err(io::Error::other(format!(
        "{} was there again after {PLACE_ATTEMPTS} removals",
        path.display()
    )))
}

/// Test builds: a placement's rename, kept to run later ([`STALLED`]).
#[cfg(test)]
pub(crate) type Landing = Box<dyn FnOnce() -> io::Result<()>>;

#[cfg(test)]
thread_local! {
    /// Test builds: the next snapshot placement on this thread stalls in flight after its
    /// gate check: its rename is kept in [`STALLED`] for the test to run later.
    pub(crate) static STALL_NEXT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    pub(crate) static STALLED: std::cell::RefCell<Vec<Landing>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Test builds: keep `landing` for later instead of running it, if a stall is armed.
#[cfg(test)]
fn stall(landing: Landing) -> bool {
    if !STALL_NEXT.with(|s| s.replace(false)) {
        return false;
    }
    STALLED.with(|s| s.borrow_mut().push(landing));
    true
}

/// fsync the snapshot as of `offset` (its directory entry is the caller's to fsync). One
/// removed meanwhile is no error: nothing is left to make durable.
pub(crate) fn sync(dir: &Path, offset: i64) -> io::Result<()> {
    let file = match std::fs::File::open(snapshot_path(dir, offset)) {
        Ok(file) => file,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    file.sync_data()?;
    #[cfg(test)]
    SYNCED.with(|s| s.borrow_mut().push(offset));
    Ok(())
}

/// fsync the snapshots at `offsets` in `dir`, every one it holds (an open: what a previous
/// process wrote may never have been fsynced, and it must not count as durable when the
/// prune keeps the newest durable ones).
pub(crate) fn sync_every(dir: &Path, offsets: &[i64]) -> io::Result<()> {
    for &offset in offsets {
        sync(dir, offset)?;
    }
    Ok(())
}

#[cfg(test)]
thread_local! {
    /// Test builds: the offsets of the snapshots this thread fsynced.
    pub(crate) static SYNCED: std::cell::RefCell<Vec<i64>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Remove the durable snapshots older than the newest [`SNAPSHOTS_KEPT`] durable ones, but
/// never the newest durable one at or below `recovery_point` (the one recorded for the next
/// open): an open after a crash rebuilds the transaction indexes of the segments it recovers
/// by an exact replay from it (`Log::open`), as Kafka recovers each segment from the snapshot
/// at or below its base, so that it need not walk back over older segments. One listed in `unsynced`
/// (written, not yet fsynced; read after the directory is listed, so a snapshot written
/// meanwhile is either in it or newer than every one listed) is neither removed nor counted:
/// a crash that loses it leaves the durable ones.
pub(crate) fn prune(dir: &Path, unsynced: &Mutex<Vec<i64>>, recovery_point: i64) -> io::Result<()> {
    let all = list(dir)?;
    let unsynced = unsynced.lock().clone();
    let durable: Vec<i64> = all
        .iter()
        .rev()
        .filter(|o| !unsynced.contains(o))
        .copied()
        .collect();
    let below = durable.iter().copied().find(|&o| o <= recovery_point);
    for &old in durable.iter().skip(SNAPSHOTS_KEPT) {
        if Some(old) != below {
            remove(dir, old);
        }
    }
    Ok(())
}

/// Remove the snapshots whose offset `keep` refuses.
pub(crate) fn remove_unless(dir: &Path, keep: impl Fn(i64) -> bool) -> io::Result<Vec<i64>> {
    let mut removed = Vec::new();
    for offset in list(dir)? {
        if !keep(offset) {
            remove(dir, offset);
            removed.push(offset);
        }
    }
    Ok(removed)
}

/// The newest readable snapshot at or below `offset` that `trusted` takes (asked first with
/// its offset alone, then with the bytes read, which are the bytes loaded), removing
/// nothing: its offset and the state it holds.
pub(crate) fn read_at_or_below(
    dir: &Path,
    offset: i64,
    trusted: &dyn Fn(i64, Option<&[u8]>) -> bool,
) -> Option<(i64, ProducerStates)> {
    let all = list(dir).ok()?;
    all.iter()
        .rev()
        .filter(|o| **o <= offset && trusted(**o, None))
        .find_map(|&o| {
            let bytes = std::fs::read(snapshot_path(dir, o)).ok()?;
            if !trusted(o, Some(&bytes)) {
                return None;
            }
            let entries = decode_snapshot(&bytes).ok()?;
            Some((o, ProducerStates::from_snapshot(&entries)))
        })
}

/// The newest readable snapshot at or below `log_end` that `trusted` takes (asked first with
/// its offset alone, then with the bytes read, which are the bytes loaded): its
/// offset and the state it holds. Snapshots above `log_end`, and unreadable ones met on the
/// way, are removed; `removed` is set when any was (the caller makes the removal durable).
/// One above `log_end` that cannot be removed, or a listing that fails, is an error: left in
/// place, such a snapshot would be loaded once the log grows past it, describing batches that
/// were never stored.
///
/// `listed`: the directory's snapshots as [`offsets`] listed them just before (a listing that
/// fails is an error too: one past `log_end` it would have shown stays); those removed are
/// taken out of it, so that it stays the directory's.
pub(crate) fn load_newest(
    dir: &Path,
    listed: &mut Vec<i64>,
    log_end: i64,
    trusted: &dyn Fn(i64, Option<&[u8]>) -> bool,
    removed: &mut bool,
) -> io::Result<Option<(i64, ProducerStates, u32)>> {
    let all = listed.clone();
    for &offset in all.iter().rev() {
        if offset > log_end {
            match std::fs::remove_file(snapshot_path(dir, offset)) {
                Ok(()) => {
                    *removed = true;
                    listed.retain(|o| *o != offset);
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => listed.retain(|o| *o != offset),
                Err(e) => {
                    return Err(io::Error::new(
                        e.kind(),
                        format!("could not remove the producer snapshot at {offset}, past the log end {log_end}: {e}"),
                    ))
                }
            }
            continue;
        }
        if !trusted(offset, None) {
            continue;
        }
        let path = snapshot_path(dir, offset);
        let bytes = match std::fs::read(&path) {
            // Trusted for what it holds, read once: the bytes checked are the bytes loaded.
            Ok(b) if !trusted(offset, Some(&b)) => continue,
            read => read,
        };
        match bytes.map_err(|e| e.to_string()).and_then(|b| {
            let crc = crc_of(&b).unwrap_or_default();
            decode_snapshot(&b)
                .map(|entries| (entries, crc))
                .map_err(|e| e.to_string())
        }) {
            Ok((entries, crc)) => {
                return Ok(Some((offset, ProducerStates::from_snapshot(&entries), crc)))
            }
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "unreadable producer snapshot; removing it and using an older one");
                match std::fs::remove_file(&path) {
                    Err(e) if e.kind() != io::ErrorKind::NotFound => {
                        tracing::warn!(path = %path.display(), error = %e, "could not remove a producer snapshot");
                    }
                    _ => listed.retain(|o| *o != offset),
                }
                *removed = true;
            }
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::cell::Cell;

    use super::*;

    /// A placement whose write gate closes while its rename is in flight, and whose rename
    /// then finds the name taken (the new owner placed its own snapshot there), leaves the
    /// new owner's file alone: the gate is asked again before the removal.
    #[test]
    fn a_placement_refused_after_its_rename_removes_nothing() {
        let d = tempfile::tempdir().unwrap();
        let path = snapshot_path(d.path(), 5);
        std::fs::write(&path, b"the new owner's").unwrap();
        let from = d.path().join("5.snapshot.spare");
        std::fs::write(&from, b"a former owner's").unwrap();
        let asked = Cell::new(0);
        let check = || {
            asked.set(asked.get() + 1);
            if asked.get() == 1 {
                Ok(())
            } else {
                Err(io::Error::other("fenced"))
            }
        };
        assert!(place(&from, &path, &check).is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"the new owner's");
    }
}

//! Small file-system helpers.

use std::fs::{File, OpenOptions};
use std::io::{self, IoSlice, Write};
#[cfg(test)]
use std::os::unix::fs::FileExt;
use std::path::Path;

/// Write `content` to `path` atomically: `<path>.tmp`, fsync, rename, fsync the directory.
pub(crate) fn write_atomic(path: &Path, content: &[u8]) -> io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)?;
        f.write_all(content)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)?;
    if let Some(parent) = path.parent() {
        sync_dir(parent)?;
    }
    Ok(())
}

/// Most buffers one `pwritev` takes (Linux's IOV_MAX).
const IOV_MAX: usize = 1024;

/// Write every byte of `bufs`, in order, at `offset` of `file`: `pwritev` calls of up to
/// [`IOV_MAX`] buffers, resumed after short writes and interrupts. Returns the bytes written.
/// `bufs` is advanced past what was written.
pub(crate) fn write_all_vectored_at(
    file: &File,
    mut bufs: &mut [IoSlice<'_>],
    mut offset: u64,
) -> io::Result<usize> {
    let len: usize = bufs.iter().map(|b| b.len()).sum();
    let mut total = 0;
    while total < len {
        let n = bufs.len().min(IOV_MAX);
        match rustix::io::pwritev(file, &bufs[..n], offset) {
            Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
            Ok(w) => {
                total += w;
                offset += w as u64;
                IoSlice::advance_slices(&mut bufs, w);
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(total)
}

#[cfg(test)]
thread_local! {
    /// Test builds: every directory this thread fsyncs, with the names it held then.
    pub(crate) static SYNCED_DIRS: std::cell::RefCell<Vec<(std::path::PathBuf, Vec<String>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// Test builds: a predicate on names ([`LISTING_HIDES`]).
#[cfg(test)]
pub(crate) type NameFilter = Box<dyn Fn(&str) -> bool>;

#[cfg(test)]
thread_local! {
    /// Test builds: names a directory listing on this thread leaves out (an NFS client's
    /// cached listing), while lookups by name still find them ([`listing_hides`]).
    pub(crate) static LISTING_HIDES: std::cell::RefCell<Option<NameFilter>> =
        const { std::cell::RefCell::new(None) };
}

/// Test builds: whether a listing leaves `name` out ([`LISTING_HIDES`]); never otherwise.
pub(crate) fn listing_hides(name: &str) -> bool {
    #[cfg(test)]
    {
        LISTING_HIDES.with(|h| h.borrow().as_ref().is_some_and(|f| f(name)))
    }
    #[cfg(not(test))]
    {
        let _ = name;
        false
    }
}

/// fsync a directory so that entries created or renamed in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    if crate::mutation::active(crate::mutation::Mutation::SkipDirFsync) {
        return Ok(());
    }
    #[cfg(test)]
    SYNCED_DIRS.with(|s| {
        let names = std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .filter_map(|e| e.file_name().into_string().ok())
                    .collect()
            })
            .unwrap_or_default();
        s.borrow_mut().push((dir.to_path_buf(), names));
    });
    match File::open(dir) {
        Ok(f) => match f.sync_all() {
            Ok(()) => Ok(()),
            // Some file systems refuse fsync on directories; nothing more can be done there.
            Err(e) if e.raw_os_error() == Some(22) => Ok(()),
            Err(e) => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// `create_dir_all`, with every directory it creates made durable: its entry in its parent
/// is fsynced (on a local disk a new directory, and everything in it, is lost in a crash until
/// then; an NFS server makes it stable before it answers).
pub(crate) fn create_dir_all_durable(dir: &Path) -> io::Result<()> {
    let mut missing = Vec::new();
    let mut at = Some(dir);
    while let Some(d) = at {
        if d.as_os_str().is_empty() || d.exists() {
            break;
        }
        missing.push(d);
        at = d.parent();
    }
    for d in missing.into_iter().rev() {
        match std::fs::create_dir(d) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
        if let Some(parent) = d.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(parent)?;
        }
    }
    Ok(())
}

/// The length of the file at `path` as an open of it reports it: the length to trust before
/// acting on a file another host may have written. An NFS client answers a `stat` by name
/// from its attribute cache (another host's appends of the last seconds unseen: a file full
/// of acknowledged batches looks empty), while an open revalidates the attributes of the file
/// it opens (close-to-open consistency), so `fstat` after `open` gives the size the server
/// has. `Ok(None)`: no such file.
pub(crate) fn len_at_open(path: &Path) -> io::Result<Option<u64>> {
    match File::open(path) {
        Ok(f) => Ok(Some(f.metadata()?.len())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Current wall-clock time in milliseconds since the epoch.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// The modification time of a file in ms, or `fallback`.
pub(crate) fn mtime_ms(f: &File, fallback: i64) -> i64 {
    f.metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .and_then(|d| i64::try_from(d.as_millis()).ok())
        .unwrap_or(fallback)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn vectored_write_takes_more_buffers_than_one_call_does() {
        let d = tempfile::tempdir().unwrap();
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(d.path().join("f"))
            .unwrap();
        f.write_all_at(b"head", 0).unwrap();
        // 3 x IOV_MAX buffers of 1..=7 bytes, so calls end mid-way through the list.
        let chunks: Vec<Vec<u8>> = (0..3 * IOV_MAX)
            .map(|i| vec![(i % 251) as u8; 1 + i % 7])
            .collect();
        let mut bufs: Vec<IoSlice<'_>> = chunks.iter().map(|c| IoSlice::new(c)).collect();
        let n = write_all_vectored_at(&f, &mut bufs, 4).unwrap();
        let expected: Vec<u8> = chunks.concat();
        assert_eq!(n, expected.len());
        let got = std::fs::read(d.path().join("f")).unwrap();
        assert_eq!(&got[..4], b"head");
        assert_eq!(&got[4..], &expected[..]);
    }
}

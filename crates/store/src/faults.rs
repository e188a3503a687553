//! Test-only fault injection, per log: the next operation of a kind fails as a full disk or a
//! failing storage server would make it fail. The store has no file-system trait; these few
//! seams sit where its write and sync paths call the kernel, and exist in test builds only.

use std::io;

use rustix::io::Errno;

/// Armed faults of one log; each fires once.
#[derive(Debug, Default)]
pub(crate) struct Faults {
    /// The next append's data write puts this many bytes in the `.log`, then fails (ENOSPC).
    pub data_write: Option<usize>,
    /// The next index write of an append (after its data write) fails (EIO).
    pub index_write: bool,
    /// The next cut of the `.log` back to its recorded end fails (EIO).
    pub truncate: bool,
    /// The next `fdatasync` of a segment's `.log` by a flush fails (EIO).
    pub flush_sync: bool,
    /// The next `fdatasync` of the producer snapshot the recovery point follows the log end
    /// with fails (ENOSPC).
    pub snapshot_sync: bool,
    /// The next `fdatasync` of the page-cache drop-behind fails (EIO).
    pub drop_sync: bool,
    /// The next `fdatasync` of the page-cache drop-behind finds the file gone (ESTALE).
    pub drop_sync_gone: bool,
    /// The next wait for writeback of the write-behind fails (EIO).
    pub writeback_wait: bool,
    /// Run once by the next read_committed read that returns data, between finding its data
    /// and listing its aborted transactions (a retention, DeleteRecords, roll or swap
    /// landing there).
    pub read_committed_gap: Option<Hook>,
}

/// A test's code run at one of the seams above, on the log concerned.
pub(crate) struct Hook(pub Box<dyn FnOnce(&crate::Log) + Send>);

impl std::fmt::Debug for Hook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hook")
    }
}

/// Fire (and disarm) a boolean fault.
pub(crate) fn fire(armed: &mut bool, errno: Errno) -> io::Result<()> {
    if std::mem::take(armed) {
        return Err(errno.into());
    }
    Ok(())
}

thread_local! {
    /// A rewrite of one kind of file stops after this many of its steps (see
    /// [`rewrite_step`]), as a crash would leave it on storage.
    static REWRITE_STOP: std::cell::Cell<Option<(&'static str, u32)>> =
        const { std::cell::Cell::new(None) };
}

/// Make the next rewrites of files of `kind` ("index" for a segment's offset and time
/// indexes, "txnindex") on this thread stop after `steps` of their writes and cuts, failing
/// with EIO: what reached storage is what a crash there leaves.
pub(crate) fn stop_rewrite_after(kind: &'static str, steps: u32) {
    REWRITE_STOP.with(|c| c.set(Some((kind, steps))));
}

/// One step (a write or a cut) of a rewrite of a file of `kind`: fails once the armed count
/// of steps ([`stop_rewrite_after`]) is used up.
pub(crate) fn rewrite_step(kind: &'static str) -> io::Result<()> {
    REWRITE_STOP.with(|c| match c.get() {
        Some((k, 0)) if k == kind => {
            c.set(None);
            Err(io::Error::from_raw_os_error(Errno::IO.raw_os_error()))
        }
        Some((k, n)) if k == kind => {
            c.set(Some((k, n - 1)));
            Ok(())
        }
        _ => Ok(()),
    })
}

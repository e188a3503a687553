//! The one system call the log store needs that `rustix` does not wrap: `sync_file_range(2)`.
//!
//! This is the only `unsafe` code in the workspace (every other crate forbids it; this crate
//! denies it everywhere but here). The call takes a borrowed open file, two integers and a
//! flag word, and touches no memory of ours, so the wrapper is safe for any argument.

use std::fs::File;
use std::os::fd::AsRawFd;

use rustix::io::Errno;

/// `SYNC_FILE_RANGE_WRITE`: start writeback of the range's dirty pages, without waiting for it
/// (it may wait for room in the device's request queue: that is the backpressure we want).
pub(crate) const START_WRITE: u32 = 2;
/// `SYNC_FILE_RANGE_WAIT_AFTER`: wait until writeback of the range's pages has completed.
pub(crate) const WAIT_AFTER: u32 = 4;

/// `sync_file_range(fd, offset, len, flags)`: neither durable (no metadata, no device cache
/// flush) nor a substitute for `fdatasync`, only a way to start and to wait for writeback of
/// a byte range. A wait may report (and so clear, for this open file) a writeback error:
/// callers must treat its failure like a failed `fdatasync`.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub(crate) fn sync_file_range(file: &File, offset: u64, len: u64, flags: u32) -> Result<(), Errno> {
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return Err(Errno::INVAL);
    };
    // SAFETY: the descriptor is open for the whole call (borrowed from `file`), and the
    // system call reads no memory of this process.
    let rc = unsafe { libc::sync_file_range(file.as_raw_fd(), offset, len, flags) };
    if rc == 0 {
        Ok(())
    } else {
        Err(Errno::from_io_error(&std::io::Error::last_os_error()).unwrap_or(Errno::IO))
    }
}

/// Elsewhere there is no such call: writeback is left to the kernel.
#[cfg(not(target_os = "linux"))]
pub(crate) fn sync_file_range(_: &File, _: u64, _: u64, _: u32) -> Result<(), Errno> {
    Ok(())
}

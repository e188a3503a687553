//! One record of the metadata store read, changed and written back atomically: the form that
//! client quotas (`quotas.rs`), SCRAM credentials (`scram.rs`) and ACLs (`acls.rs`) share.
//!
//! - single broker: a file beside the embedded store's, rewritten atomically (write a
//!   temporary file, fsync, rename over, fsync the directory) under a lock of the record's
//!   own, so two changes in one process never lose each other;
//! - cluster: one etcd key, changed only by compare-and-swap on its mod revision (or on its
//!   absence), retried from a fresh read when another broker changed it in between.
//!
//! A change is a function from the record as read to the record to write and what the caller
//! wants back (say, the ACLs a DeleteAcls filter removed). In a cluster it may run more than
//! once: it must compute from what it is given, nothing else.

use std::fs;
use std::io::{self, Write};
use std::path::Path;

use parking_lot::Mutex;

use crate::etcd::{Compare, Op};
use crate::{EtcdStore, MetaError};

/// How often a compare-and-swap of an etcd record is tried before giving up.
const CAS_ATTEMPTS_MAX: usize = 20;

/// How a record reads and writes: its decoding (given where it was read, for messages) and
/// its encoding. `decode` of what `encode` wrote gives the record back.
pub(crate) struct Codec<T> {
    pub(crate) decode: fn(&[u8], &str) -> Result<T, MetaError>,
    pub(crate) encode: fn(&T) -> Vec<u8>,
    /// What the record holds, for the error when it kept changing ("the ACLs").
    pub(crate) what: &'static str,
}

/// Read the record in the file at `path` (`T::default()` if there is none yet).
pub(crate) fn read_file<T: Default>(path: &Path, codec: &Codec<T>) -> Result<T, MetaError> {
    match fs::read(path) {
        Ok(bytes) => (codec.decode)(&bytes, &path.display().to_string()).map_err(|e| match e {
            MetaError::Etcd(reason) => MetaError::Parse {
                path: path.to_path_buf(),
                line: 0,
                reason,
            },
            other => other,
        }),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(T::default()),
        Err(source) => Err(MetaError::Io {
            path: path.to_path_buf(),
            source,
        }),
    }
}

/// Apply `change` to the record in the file at `path` and write the result atomically;
/// `lock` serializes the read-modify-write of this record within the process. Returns the
/// record written and what `change` returned.
pub(crate) fn update_file<T: Default, R>(
    path: &Path,
    lock: &Mutex<()>,
    codec: &Codec<T>,
    change: impl FnOnce(T) -> (T, R),
) -> Result<(T, R), MetaError> {
    let _one = lock.lock();
    let (next, out) = change(read_file(path, codec)?);
    write_file_atomically(path, &(codec.encode)(&next))?;
    Ok((next, out))
}

/// Replaces the file at `path` with `bytes`, atomically and durably: written to
/// `<file name>.tmp` beside it and fsynced, renamed over `path`, the rename made durable by an
/// fsync of the directory (one that cannot be opened for it, on file systems that do not
/// support that, is not an error). A reader sees the old contents or the new, and a crash
/// leaves one of them, never a part. Every file the metadata store writes is written by this.
pub(crate) fn write_file_atomically(path: &Path, bytes: &[u8]) -> Result<(), MetaError> {
    let io_err = |source| MetaError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(".tmp");
    let tmp = path.with_file_name(tmp_name);
    let mut file = fs::File::create(&tmp).map_err(io_err)?;
    file.write_all(bytes).map_err(io_err)?;
    file.sync_all().map_err(io_err)?;
    drop(file);
    fs::rename(&tmp, path).map_err(io_err)?;
    if let Some(dir) = path.parent() {
        if let Ok(d) = fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}

impl EtcdStore {
    /// The record at `key` (a linearizable read; `T::default()` if there is none yet).
    pub(crate) fn read_record<T: Default>(
        &self,
        key: &str,
        codec: &Codec<T>,
    ) -> Result<T, MetaError> {
        match self.etcd.get(key).map_err(crate::cluster::etcd_err)? {
            Some(kv) => (codec.decode)(&kv.value, key),
            None => Ok(T::default()),
        }
    }

    /// Apply `change` to the record at `key` by compare-and-swap, from a fresh read each
    /// attempt. Returns the record written and what `change` returned on the attempt that
    /// wrote it.
    pub(crate) fn update_record<T: Default, R>(
        &self,
        key: &str,
        codec: &Codec<T>,
        mut change: impl FnMut(T) -> (T, R),
    ) -> Result<(T, R), MetaError> {
        for _ in 0..CAS_ATTEMPTS_MAX {
            let kv = self.etcd.get(key).map_err(crate::cluster::etcd_err)?;
            let (current, compare) = match &kv {
                Some(kv) => (
                    (codec.decode)(&kv.value, key)?,
                    Compare::ModRevision(key.to_string(), kv.mod_revision),
                ),
                None => (T::default(), Compare::CreateRevision(key.to_string(), 0)),
            };
            let (next, out) = change(current);
            let written = self
                .etcd
                .txn(
                    &[compare],
                    &[Op::Put {
                        key: key.to_string(),
                        value: (codec.encode)(&next),
                        lease: 0,
                    }],
                    &[],
                )
                .map_err(crate::cluster::etcd_err)?;
            if written {
                return Ok((next, out));
            }
        }
        Err(MetaError::Etcd(format!(
            "{} kept changing while being altered; try again",
            codec.what
        )))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn codec() -> Codec<Vec<u32>> {
        Codec {
            decode: |bytes, what| {
                serde_json::from_slice(bytes)
                    .map_err(|e| MetaError::Etcd(format!("{what} does not parse: {e}")))
            },
            encode: |v| serde_json::to_vec(v).unwrap_or_default(),
            what: "the numbers",
        }
    }

    #[test]
    fn a_file_record_is_changed_in_place_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("numbers.json");
        let lock = Mutex::new(());
        assert!(read_file(&path, &codec()).unwrap().is_empty());
        let (after, was) = update_file(&path, &lock, &codec(), |mut v| {
            let n = v.len();
            v.push(7);
            (v, n)
        })
        .unwrap();
        assert_eq!((after, was), (vec![7], 0));
        assert_eq!(read_file(&path, &codec()).unwrap(), vec![7]);
        assert!(!dir.path().join("numbers.json.tmp").exists());
        std::fs::write(&path, b"{").unwrap();
        assert!(matches!(
            read_file(&path, &codec()),
            Err(MetaError::Parse { .. })
        ));
    }
}

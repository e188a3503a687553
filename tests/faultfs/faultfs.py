"""faultfs: a FUSE file system that simulates what a host crash does to unsynced data.

It is mounted over a backing directory (one mount per simulated host)::

    python tests/faultfs/faultfs.py BACKING MOUNTPOINT --control SOCKET_OR_DIR

and controlled over a unix socket (``--control``; a directory means ``DIR/control.sock``)
through :class:`FaultFSControl` or ``faultfs.py ctl SOCKET COMMAND``. Tests usually start it
with :func:`mount_faultfs`.

Model
-----
* The backing directory is the *disk*. Data written through the mount and not yet fsynced
  is the *page cache*: it stays in this process's memory, per file (keyed by the backing
  inode, so renames and hard links follow it), as an ordered list of pending writes and
  truncates plus an overlay of dirty ranges and a pending size. Reads and ``stat`` see the
  backing file overlaid with the pending data, exactly as a normal file system would show it.
* ``fsync``/``fdatasync`` of a file writes that file's pending data to the backing file and
  fsyncs it there. Nothing else makes data durable: not ``close``, not time (no background
  writeback), unless the ``writeback`` control command is sent or ``--writeback-bytes`` is
  exceeded (then everything pending is written back, as the kernel may do at any time).
* Truncates (``truncate``, ``ftruncate``, ``O_TRUNC``) are *data*: they are pending like
  writes, in order with them, and only an fsync of the file makes them durable. This is
  stricter than ext4 (whose journal commits a truncate within seconds) but it is what POSIX
  promises, and it keeps the one rule simple: what survives a crash is what was synced.
* Metadata operations (create, mkdir, unlink, rmdir, rename, link, symlink) depend on the
  mount's metadata model (``--metadata``). ``sync`` (the default): they go straight to the
  backing directory and are durable at once, as on an NFS server (NFSv3 makes CREATE, REMOVE
  and RENAME stable before it answers) or a journaling file system committing synchronously;
  a file created and written but never fsynced survives a crash with its synced size (0).
  ``dirsync``: as POSIX promises on a local disk, each is durable only once every directory
  it changed was fsynced after it; until then a crash undoes it, newest first (a created file
  or directory disappears with its contents, an unlinked or replaced file comes back, a rename
  goes back). Unlinked and replaced files wait in ``BACKING/.faultfs-stash`` (hidden from the
  mount) until then. chmod, chown and utimens are durable at once in both.
* An unlinked (or renamed-over) file that is still open is renamed to ``.fuse_hiddenXXXX`` by
  libfuse (``hard_remove`` off, the default) and removed on its last close: the silly-rename
  semantics of NFS and bindfs. Its holder keeps reading and writing it. Pending data of a
  file whose last link and last handle are gone is forgotten.
* Files are opened with ``direct_io``: the kernel keeps no page cache of its own over this
  mount, so after a simulated crash every reader sees the post-crash contents at once, and
  the kernel's attribute/entry caching is off for the same reason (every lookup, stat and
  listing reaches this process; the model below caches here instead, where it is counted).

A lagging view: an NFS client's reader-side caches (``--attr-cache-ms N``, ``attr-cache N``)
------------------------------------------------------------------------------------------
Off by default (N = 0): every host sees every other host's changes at once, which no NFS
client promises. With N > 0 the mount behaves as a Linux NFS client with
``acregmin=acregmax=acdirmin=acdirmax=N/1000`` and its dentry cache (``lookupcache=all``):

* What is cached, each entry for N ms from when it was fetched from the server (the backing
  directory), never renewed by being used:
  - *names* (the dentry cache): what a lookup of a path found, an inode or ENOENT. A negative
    entry keeps a file another host created since invisible to ``stat`` and ``open``; a
    positive one keeps a file another host unlinked or renamed away visible to ``stat``.
  - *attributes* of an inode (size, mtime, ...: the attribute cache), for ``stat`` by name
    and ``fstat`` of an open file: another host's appends and truncates are not seen.
  - *directory listings* (``readdir``): another host's creates, unlinks and renames in the
    directory are not listed / still listed. Stricter than Linux, whose close-to-open check
    at ``opendir`` drops a cached listing once the directory's change attribute moved: here
    ``opendir`` revalidates nothing, as with ``nocto`` or a server whose directory
    timestamps are too coarse to show the change.
* What revalidates:
  - expiry: an entry older than N ms is fetched again at its next use. When an inode's
    attributes have expired its name is looked up again with them (an NFS client would ask
    for the old file handle's attributes first; renamed-over files differ, see below).
  - close-to-open: ``open`` (and ``create``) of a file fetches the opened file's attributes
    afresh, so ``fstat`` after ``open`` gives the size the server has. The name itself is
    resolved by the lookup before the open, from the cache: opening a name the cache says
    does not exist fails with ENOENT (``O_CREAT`` then creates it: a file another host made
    meanwhile is opened, not truncated, without ``O_EXCL``). Opening a name the cache still
    has but the server no longer does answers ESTALE once; the kernel then looks the name up
    afresh and retries (an ``O_CREAT`` open creates the file anew, empty), as Linux does
    after NFS's ESTALE.
  - this host's own changes: a create, unlink, rename, mkdir, rmdir, link, chmod, write,
    truncate or fsync through this mount drops the entries it touches (the names, their
    directories' listings and attributes, the inodes' attributes), as an NFS client updates
    its caches from its own requests' replies; the next use fetches them, and with them
    whatever other hosts changed there. This host's unsynced writes are always seen by it.
* Not cached: file contents. Reads go to the server (``direct_io``), so data another host
  wrote (and fsynced) is read as it is now, up to whatever size the reader believes.
  Simplifications: a renamed-over name whose cached entry still names the old inode opens
  the new file (an NFS client opens the old inode while it exists); stale entries do not
  make attributes of different names of one inode disagree.
* ``attr-cache N`` changes N at run time (the entries already cached are judged by the new
  N); ``attr-cache 0`` and ``clear-faults`` turn it off and empty every cache;
  ``attr-cache N --prime`` empties the caches and then caches the whole volume as it is now
  (every name, attribute and listing: as if this host had just walked it, a broker's startup
  scan, ``du`` or a backup agent), so that for the next N ms this host sees the volume as it
  was then, except what it changed or opened itself.
* ``stats`` reports ``attr_cache_ms`` and ``cache``: how many answers each cache served
  (``names_served``, ``negative_served``, ``attrs_served``, ``listings_served``) and how many
  cached answers hid another host's change, checked against the backing directory at the
  time: ``name_hidden`` (a negative lookup of a name that exists), ``name_gone`` (a name
  that no longer exists, or names another inode), ``attrs_stale`` (a regular file's size or
  mtime differs), ``listing_stale`` (a listing lacks or has extra names), ``open_estale``,
  and ``cto_refreshed`` (an open found its file's cached attributes stale and refreshed
  them). Each of those is also an event (``seq``, wall-clock ``t``, ``kind``, ``path``; for
  listings the names hidden and gone, for sizes the cached and the real one): ``stats``
  shows the newest 20 and ``cache_seq``, ``cache-events [--since SEQ]`` the newest 5000.

Faults (control commands)
-------------------------
``crash``
    Drop every pending write and truncate of every file (what losing power does to the page
    cache). The mount keeps working: a broker restarted on it sees the "rebooted" disk.
``crash --torn [N]``
    Keep only a prefix of each file's pending data, in write order: the first N bytes of its
    pending writes (the write that crosses N is cut), or a random number in ``[0, pending]``
    per file when N is not given (``--seed`` makes it repeatable). Truncates inside the kept
    prefix are kept. The kept part is written to the backing file; the rest is dropped.
``fail-next-fsync [--count K] [--match SUBSTRING]``
    The next K fsync/fdatasync calls (of files whose path contains SUBSTRING) fail with EIO,
    and the pending data each would have made durable is dropped: reads show the last synced
    contents from then on. This is the PostgreSQL "fsyncgate" lesson: after a failed
    writeback, Linux marks the dirty pages clean (or drops them), reports the error once, and
    a retried fsync then succeeds without the data ever reaching the disk. (Linux may still
    serve the lost data from its cache until eviction; here it is dropped at once, so the loss
    shows without a crash.)
``enospc on|off``
    While on, every write fails with ENOSPC (and ``statfs`` shows no free space).
``slow-unlink SECONDS``
    Every unlink waits SECONDS before it is done (0: none), as one does on a volume that
    discards the freed blocks synchronously, or over a slow network. Other operations go on
    meanwhile.
``clear-faults``
    ENOSPC off, no armed fsync failures, no unlink delay, the attribute cache off.
``attr-cache N [--prime]``
    The lagging view above: names, attributes and listings cached for N ms (0: off).
``writeback``
    Write every pending byte to the backing files (as ``sync`` would on a normal system).
``stats``
    Pending files and bytes, fsync counts, injected faults, crashes.

Not simulated: reordering of metadata operations other than the undo above (``dirsync``
treats a directory fsync as making every earlier change of that directory durable), partial
sector writes inside one write other than the prefix rule above,
read errors, latency other than ``slow-unlink``, mmap of files (``direct_io``), xattrs, locks
across hosts (POSIX and flock locks are handled by the kernel, per mount).

Client side (importable without libfuse): :func:`mount_faultfs`, :class:`FaultFSMount`,
:class:`FaultFSControl`. The FUSE server part imports ``mfusepy`` (libfuse 3 via ctypes)
only when started.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import ctypes
import ctypes.util
import errno
import json
import os
import random
import shutil
import socket
import socketserver
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple, Union

__all__ = ["FaultFSControl", "FaultFSMount", "FaultFSError", "mount_faultfs", "main"]

SCRIPT = Path(__file__).resolve()


class FaultFSError(RuntimeError):
    """A control command failed, or the mount could not be started or stopped."""


# ==========================================================================
# Pending state of one file
# ==========================================================================


class PendingFile:
    """Unsynced data of one backing inode.

    ``ops``: pending ``("w", offset, bytes)`` and ``("t", length)`` in arrival order (what a
    torn crash replays a prefix of). ``starts``/``bufs``: the dirty ranges, sorted, disjoint
    and non-adjacent (what reads overlay). ``base``: how many bytes of the backing file are
    still visible (the smallest truncate since the last sync); ``size``: the visible size.
    Invariant: ``base <= size``; no dirty range reaches past ``size``.
    """

    __slots__ = ("wfd", "base", "size", "ops", "starts", "bufs", "pending_bytes", "path")

    def __init__(self, wfd: int, path: str):
        self.wfd = wfd  # our own fd on the backing inode: keeps it (and its number) alive
        self.base = self.size = os.fstat(wfd).st_size
        self.ops: List[tuple] = []
        self.starts: List[int] = []
        self.bufs: List[bytearray] = []
        self.pending_bytes = 0
        self.path = path  # last path it was written through (for stats and --match)

    def write(self, off: int, data: bytes) -> None:
        self.ops.append(("w", off, data))
        self.pending_bytes += len(data)
        end = off + len(data)
        starts, bufs = self.starts, self.bufs
        # ranges that overlap or touch [off, end]
        i = bisect.bisect_left(starts, off)
        if i > 0 and starts[i - 1] + len(bufs[i - 1]) >= off:
            i -= 1
        j = bisect.bisect_right(starts, end)  # ranges i..j-1 touch
        if i == j:
            starts.insert(i, off)
            bufs.insert(i, bytearray(data))
        elif j == i + 1 and starts[i] <= off:
            # one range: overwrite in place or extend it (the append case)
            buf = bufs[i]
            rel = off - starts[i]
            buf[rel:rel + len(data)] = data
        else:
            s0 = min(starts[i], off)
            last_end = starts[j - 1] + len(bufs[j - 1])
            merged = bytearray(max(last_end, end) - s0)
            for k in range(i, j):
                rel = starts[k] - s0
                merged[rel:rel + len(bufs[k])] = bufs[k]
            merged[off - s0:end - s0] = data
            starts[i:j] = [s0]
            bufs[i:j] = [merged]
        if end > self.size:
            self.size = end

    def truncate(self, length: int) -> None:
        self.ops.append(("t", length))
        if length < self.base:
            self.base = length
        starts, bufs = self.starts, self.bufs
        i = bisect.bisect_left(starts, length)
        del starts[i:], bufs[i:]
        if i > 0 and starts[i - 1] + len(bufs[i - 1]) > length:
            del bufs[i - 1][length - starts[i - 1]:]
        self.size = length

    def read(self, fd: int, size: int, off: int) -> bytes:
        end = min(off + size, self.size)
        if off >= end:
            return b""
        out = bytearray(end - off)
        b_end = min(end, self.base)
        if off < b_end:
            got = os.pread(fd, b_end - off, off)
            out[:len(got)] = got
        starts, bufs = self.starts, self.bufs
        i = bisect.bisect_right(starts, off)
        if i > 0:
            i -= 1
        while i < len(starts) and starts[i] < end:
            s, buf = starts[i], bufs[i]
            lo, hi = max(s, off), min(s + len(buf), end)
            if lo < hi:
                out[lo - off:hi - off] = buf[lo - s:hi - s]
            i += 1
        return bytes(out)

    def apply_all(self) -> None:
        """Make the backing file equal to the visible contents (state as a whole). Without a
        pending truncate only the dirty ranges are written, as a client writes back dirty
        pages: what another host (mount) wrote elsewhere in the file, or past this host's
        idea of its end, stays."""
        fd = self.wfd
        truncated = any(op[0] == "t" for op in self.ops)
        if truncated and self.base < os.fstat(fd).st_size:
            os.ftruncate(fd, self.base)
        for s, buf in zip(self.starts, self.bufs):
            _pwrite_all(fd, buf, s)
        if truncated and os.fstat(fd).st_size != self.size:
            os.ftruncate(fd, self.size)

    def apply_prefix(self, keep: int) -> int:
        """Replay the pending ops in order until ``keep`` bytes of writes; returns bytes kept."""
        fd, kept = self.wfd, 0
        for op in self.ops:
            # Nothing after the cut point reaches storage, a truncate no more than a write.
            if kept >= keep:
                break
            if op[0] == "t":
                os.ftruncate(fd, op[1])
                continue
            _, off, data = op
            n = min(len(data), keep - kept)
            _pwrite_all(fd, memoryview(data)[:n], off)
            kept += n
        return kept

    def close(self) -> None:
        try:
            os.close(self.wfd)
        except OSError:
            pass


def _pwrite_all(fd: int, data, off: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, off)
        view, off = view[n:], off + n


# ==========================================================================
# The FUSE operations
# ==========================================================================


class _Handle:
    __slots__ = ("fd", "key")

    def __init__(self, fd: int, key: Tuple[int, int]):
        self.fd, self.key = fd, key


def _key(st: os.stat_result) -> Tuple[int, int]:
    return (st.st_dev, st.st_ino)


def _attrs(st: os.stat_result) -> dict:
    attrs = {k: getattr(st, k) for k in (
        "st_mode", "st_ino", "st_nlink", "st_uid", "st_gid", "st_size", "st_blocks",
        "st_atime_ns", "st_mtime_ns", "st_ctime_ns")}
    for k in ("st_atime", "st_mtime", "st_ctime"):
        attrs[k] = attrs.pop(k + "_ns")
    attrs["st_blksize"] = st.st_blksize
    attrs["st_rdev"] = st.st_rdev
    return attrs


_libc = None


def _renameat2(old: str, new: str, flags: int) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    AT_FDCWD = -100
    if _libc.renameat2(AT_FDCWD, os.fsencode(old), AT_FDCWD, os.fsencode(new), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), old)


UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2


class FaultOps:
    """The FUSE operations (mfusepy high-level API, paths relative to the mount)."""

    use_ns = True

    def __init__(self, backing: str, writeback_bytes: int = 0, metadata: str = "sync",
                 attr_cache_ms: float = 0):
        self.root = os.path.realpath(backing)
        if metadata not in METADATA_MODELS:
            raise ValueError(f"metadata model {metadata!r}: one of {METADATA_MODELS}")
        # "dirsync": a create, unlink, rename, mkdir or rmdir is durable once every directory
        # it changed was fsynced after it; until then a crash undoes it (newest first).
        self.metadata = metadata
        self.meta_ops: List[_MetaOp] = []
        self.meta_seq = 0
        self._mu = threading.RLock()
        self.handles: Dict[int, _Handle] = {}
        self.open_count: Dict[Tuple[int, int], int] = {}
        self.files: Dict[Tuple[int, int], PendingFile] = {}
        self.next_fh = 1
        self.writeback_bytes = writeback_bytes
        self.pending_total = 0
        # faults
        self.enospc = False
        self.unlink_delay = 0.0
        self.fail_fsyncs = 0
        self.fail_match: Optional[str] = None
        self.counters = dict(writes=0, fsyncs=0, fsyncs_failed_injected=0, enospc_injected=0,
                             crashes=0, torn_crashes=0, bytes_dropped=0, bytes_kept_torn=0,
                             writebacks=0, unlinks=0, metadata_undone=0)
        # The NFS client's reader-side caches (module doc, "attr-cache"); 0: off.
        self.attr_cache_s = max(0.0, attr_cache_ms / 1000.0)
        # mount path -> (fetched, inode key or None: a negative entry)
        self.dcache: Dict[str, Tuple[float, Optional[Tuple[int, int]]]] = {}
        # inode key -> (fetched, attributes as getattr answers them)
        self.acache: Dict[Tuple[int, int], Tuple[float, dict]] = {}
        # directory mount path -> (fetched, readdir's answer)
        self.lcache: Dict[str, Tuple[float, list]] = {}
        self.cache_counters = dict((k, 0) for k in CACHE_COUNTERS)
        self.cache_events: "collections.deque" = collections.deque(maxlen=CACHE_EVENTS)
        self.cache_seq = 0

    # ---- helpers ---------------------------------------------------------

    def _real(self, path: str) -> str:
        return os.path.join(self.root, path.lstrip("/"))

    # ---- the metadata journal ("dirsync") --------------------------------------

    def _stash_path(self) -> str:
        self.meta_seq += 1
        d = os.path.join(self.root, STASH)
        os.makedirs(d, exist_ok=True)
        return os.path.join(d, str(self.meta_seq))

    def _journal(self, kind: str, paths, undo, commit=None) -> None:
        """A metadata change of ``paths`` (mount-relative): in "sync" it is durable at once
        (``commit`` runs now); in "dirsync" it waits for an fsync of each parent directory."""
        if self.metadata == "sync":
            if commit is not None:
                commit()
            return
        self.meta_seq += 1
        dirs = {_parent(p) for p in paths}
        self.meta_ops.append(_MetaOp(self.meta_seq, kind, tuple(paths), dirs, undo, commit))

    def _dir_synced(self, path: str) -> None:
        d = _norm(path)
        left = []
        for op in self.meta_ops:
            op.dirs.discard(d)
            if op.dirs:
                left.append(op)
            elif op.commit is not None:
                op.commit()
        self.meta_ops = left

    def _stash(self, real: str) -> str:
        """Move ``real`` aside (an unlink or a replaced rename target not yet durable)."""
        to = self._stash_path()
        os.rename(real, to)
        return to

    def _unstash_commit(self, stashed: str):
        def commit():
            try:
                st = os.lstat(stashed)
            except FileNotFoundError:
                return
            if stat.S_ISDIR(st.st_mode):
                shutil.rmtree(stashed, ignore_errors=True)
            else:
                os.unlink(stashed)
                self._forget_if_gone(_key(st))
        return commit

    def _pending_for(self, key, path: str, fd_for_write: Optional[int]) -> PendingFile:
        pf = self.files.get(key)
        if pf is None:
            if fd_for_write is not None:
                wfd = os.dup(fd_for_write)
            else:
                try:
                    wfd = os.open(self._real(path), os.O_RDWR)
                except PermissionError:
                    wfd = os.open(self._real(path), os.O_WRONLY)
            pf = PendingFile(wfd, path)
            self.files[key] = pf
        pf.path = path
        return pf

    def _drop(self, key) -> int:
        pf = self.files.pop(key, None)
        if pf is None:
            return 0
        self.pending_total -= pf.pending_bytes
        pf.close()
        return pf.pending_bytes

    def _forget_if_gone(self, key) -> None:
        """Pending data of a file with no link and no open handle can never be seen again."""
        pf = self.files.get(key)
        if pf is None or self.open_count.get(key, 0) > 0:
            return
        try:
            if os.fstat(pf.wfd).st_nlink > 0:
                return
        except OSError:
            pass
        self._drop(key)

    def _writeback_all(self) -> int:
        n = 0
        for key in list(self.files):
            pf = self.files.pop(key)
            pf.apply_all()
            os.fsync(pf.wfd)
            n += pf.pending_bytes
            pf.close()
        self.pending_total = 0
        self.counters["writebacks"] += 1
        return n

    # ---- lifecycle ---------------------------------------------------------

    def init_with_config(self, conn, config) -> None:
        if config is not None:  # libfuse 3
            config.direct_io = 1
            config.use_ino = 1
            config.hard_remove = 0
            config.attr_timeout = 0.0
            config.entry_timeout = 0.0
            config.negative_timeout = 0.0

    # ---- attributes ----------------------------------------------------------

    def getattr(self, path: str, fh: Optional[int] = None) -> dict:
        with self._mu:
            h = self.handles.get(fh) if fh else None
            if self.attr_cache_s > 0:
                key, attrs = self._cached_getattr(path, h)
            else:
                st = os.fstat(h.fd) if h is not None else os.lstat(self._real(path))
                key, attrs = _key(st), _attrs(st)
            pf = self.files.get(key) if stat.S_ISREG(attrs["st_mode"]) else None
            if pf is not None:
                # this host's own unsynced writes: always seen by this host
                attrs = dict(attrs, st_size=pf.size, st_blocks=max(attrs["st_blocks"], (pf.size + 511) // 512))
            return attrs

    # ---- the NFS client's reader-side caches ("attr-cache") ---------------------

    def _cache_event(self, kind: str, path: str, **detail) -> None:
        """A cached answer that differs from what the server (the backing directory) holds."""
        self.cache_counters[kind] += 1
        self.cache_seq += 1
        self.cache_events.append({"seq": self.cache_seq, "t": round(time.time(), 3), "kind": kind,
                                  "path": path, **detail})

    def _cached_getattr(self, path: str, h: Optional[_Handle]):
        """A lookup and the attributes of what it names, from the caches while they are
        younger than the cache time; recording every answer that hides a change of another
        host (the backing directory says otherwise)."""
        now, ttl = time.monotonic(), self.attr_cache_s
        if h is not None:  # fstat of an open file: the inode's attributes
            e = self.acache.get(h.key)
            if e is not None and now - e[0] < ttl:
                self.cache_counters["attrs_served"] += 1
                self._check_attrs(path, e[1], os.fstat(h.fd))
                return h.key, e[1]
            st = os.fstat(h.fd)
            self.acache[h.key] = (now, _attrs(st))
            return h.key, self.acache[h.key][1]
        p, real = _norm(path), self._real(path)
        d = self.dcache.get(p)
        if d is not None and now - d[0] < ttl:
            if d[1] is None:
                self.cache_counters["negative_served"] += 1
                if os.path.lexists(real):
                    self._cache_event("name_hidden", p)
                raise OSError(errno.ENOENT, "cached negative lookup", path)
            key = d[1]
            e = self.acache.get(key)
            if e is not None and now - e[0] < ttl:
                self.cache_counters["names_served"] += 1
                self.cache_counters["attrs_served"] += 1
                try:
                    st = os.lstat(real)
                except FileNotFoundError:
                    st = None
                if st is None or _key(st) != key:
                    self._cache_event("name_gone", p, replaced=st is not None)
                else:
                    self._check_attrs(p, e[1], st)
                return key, e[1]
            # the inode's attributes expired: revalidated, and the name with them (below)
        try:
            st = os.lstat(real)
        except FileNotFoundError:
            self.dcache[p] = (now, None)
            raise
        key, attrs = _key(st), _attrs(st)
        self.dcache[p] = (now, key)
        self.acache[key] = (now, attrs)
        return key, attrs

    def _check_attrs(self, path: str, cached: dict, st: os.stat_result) -> None:
        if not stat.S_ISREG(st.st_mode):
            return  # a directory's own size and times: its listing says what changed
        if cached["st_size"] != st.st_size or cached["st_mtime"] != st.st_mtime_ns:
            self._cache_event("attrs_stale", _norm(path), cached_size=cached["st_size"], size=st.st_size)

    def _cto_open(self, path: str, fd: int) -> None:
        """Close-to-open: an open revalidates the attributes of the file it opened."""
        now = time.monotonic()
        st = os.fstat(fd)
        key = _key(st)
        old = self.acache.get(key)
        if old is not None and now - old[0] < self.attr_cache_s and stat.S_ISREG(st.st_mode) and (
                old[1]["st_size"] != st.st_size or old[1]["st_mtime"] != st.st_mtime_ns):
            self._cache_event("cto_refreshed", _norm(path), cached_size=old[1]["st_size"], size=st.st_size)
        self.acache[key] = (now, _attrs(st))
        self.dcache[_norm(path)] = (now, key)

    def _changed(self, *paths: str, keys=(), tree: bool = False) -> None:
        """This host changed these names (or the inodes ``keys``): it sees its own changes at
        once, as an NFS client updates its caches from its own requests' replies. The names,
        their directories' listings and attributes are dropped (``tree``: everything under
        them too, a directory renamed or removed)."""
        if self.attr_cache_s <= 0 and not self.dcache and not self.lcache:
            return
        for p in map(_norm, paths):
            parent = _parent(p)
            for d in (p, parent):
                self.dcache.pop(d, None)
                self.lcache.pop(d, None)
            if tree:
                pre = p.rstrip("/") + "/"
                for c in (self.dcache, self.lcache):
                    for k in [k for k in c if k.startswith(pre)]:
                        del c[k]
        for k in keys:
            self.acache.pop(k, None)

    def _changed_key(self, key) -> None:
        self.acache.pop(key, None)

    def _prime(self) -> int:
        """Cache every name, attribute and listing of the volume as it is now (as if this host
        had just walked it: a broker's startup scan, ``du``, a backup agent)."""
        now, n = time.monotonic(), 0
        for top, dirs, files in os.walk(self.root):
            rel = _norm(os.path.relpath(top, self.root)) if top != self.root else "/"
            if rel == "/":
                dirs[:] = [d for d in dirs if d != STASH]
            self.lcache[rel] = (now, self._scan_dir(rel))
            for name in dirs + files:
                p = _norm(os.path.join(rel, name))
                try:
                    st = os.lstat(os.path.join(top, name))
                except FileNotFoundError:
                    continue
                self.dcache[p] = (now, _key(st))
                self.acache[_key(st)] = (now, _attrs(st))
                n += 1
        return n

    def _set_attr_cache(self, ms: float, prime: bool = False) -> dict:
        self.attr_cache_s = max(0.0, float(ms) / 1000.0)
        if self.attr_cache_s == 0 or prime:
            self.dcache.clear()
            self.acache.clear()
            self.lcache.clear()
        primed = self._prime() if prime and self.attr_cache_s > 0 else 0
        return {"attr_cache_ms": round(self.attr_cache_s * 1000), "primed": primed}

    def access(self, path: str, amode: int) -> int:
        if not os.access(self._real(path), amode):
            raise OSError(errno.EACCES, "access")
        return 0

    def chmod(self, path: str, mode: int) -> int:
        os.chmod(self._real(path), mode)
        with self._mu:
            self._changed(path)
        return 0

    def chown(self, path: str, uid: int, gid: int) -> int:
        os.chown(self._real(path), uid, gid, follow_symlinks=False)
        with self._mu:
            self._changed(path)
        return 0

    def utimens(self, path: str, times=None) -> int:
        real = self._real(path)
        if times is None:
            os.utime(real, follow_symlinks=False)
            with self._mu:
                self._changed(path, keys=[_key(os.lstat(real))])
            return 0
        st = os.lstat(real)
        now = time.time_ns()
        cur = (st.st_atime_ns, st.st_mtime_ns)
        ns = tuple(c if t == UTIME_OMIT else now if t == UTIME_NOW else t for t, c in zip(times, cur))
        os.utime(real, ns=ns, follow_symlinks=False)
        with self._mu:
            self._changed(path, keys=[_key(st)])
        return 0

    def statfs(self, path: str) -> dict:
        sv = os.statvfs(self._real(path))
        out = {k: getattr(sv, k) for k in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail",
                                            "f_files", "f_ffree", "f_favail", "f_flag", "f_namemax")}
        if self.enospc:
            out["f_bfree"] = out["f_bavail"] = 0
        return out

    # ---- directories and names (durable at once) -----------------------------

    def readdir(self, path: str, fh: int):
        with self._mu:
            if self.attr_cache_s <= 0:
                return self._scan_dir(path)
            p, now = _norm(path), time.monotonic()
            e = self.lcache.get(p)
            if e is not None and now - e[0] < self.attr_cache_s:
                self.cache_counters["listings_served"] += 1
                cached = {x[0] for x in e[1]}
                try:
                    truth = {x[0] for x in self._scan_dir(path)}
                except FileNotFoundError:
                    truth = set()
                if cached != truth:
                    self._cache_event("listing_stale", p, hidden=sorted(truth - cached)[:20],
                                      gone=sorted(cached - truth)[:20])
                return e[1]
            out = self._scan_dir(path)
            self.lcache[p] = (now, out)
            return out

    def _scan_dir(self, path: str) -> list:
        # with use_ino, an entry needs its inode number: glibc skips entries whose d_ino is 0
        real = self._real(path)
        st = os.lstat(real)
        out = [(".", {"st_mode": st.st_mode, "st_ino": st.st_ino}, 0)]
        st = os.lstat(os.path.dirname(real.rstrip("/")) if path.strip("/") else real)
        out.append(("..", {"st_mode": st.st_mode, "st_ino": st.st_ino}, 0))
        with os.scandir(real) as it:
            for e in it:
                if e.name == STASH and not path.strip("/"):
                    continue  # the metadata journal's own
                mode = (stat.S_IFDIR if e.is_dir(follow_symlinks=False) else
                        stat.S_IFLNK if e.is_symlink() else
                        stat.S_IFREG if e.is_file(follow_symlinks=False) else
                        stat.S_IFMT & os.lstat(e.path).st_mode)
                out.append((e.name, {"st_mode": mode, "st_ino": e.inode()}, 0))
        return out

    def _created(self, path: str) -> None:
        real = self._real(path)
        self._changed(path)

        def undo():
            try:
                if os.path.isdir(real) and not os.path.islink(real):
                    shutil.rmtree(real)
                else:
                    os.unlink(real)
            except FileNotFoundError:
                pass
        self._journal("create", [path], undo)

    def mkdir(self, path: str, mode: int) -> int:
        with self._mu:
            os.mkdir(self._real(path), mode)
            self._created(path)
        return 0

    def rmdir(self, path: str) -> int:
        with self._mu:
            real = self._real(path)
            self._changed(path, tree=True)
            if self.metadata == "sync":
                os.rmdir(real)
                return 0
            if any(os.scandir(real)):
                raise OSError(errno.ENOTEMPTY, "rmdir")
            stashed = self._stash(real)
            self._journal("rmdir", [path], lambda: os.rename(stashed, real), self._unstash_commit(stashed))
        return 0

    def mknod(self, path: str, mode: int, dev: int) -> int:
        with self._mu:
            os.mknod(self._real(path), mode, dev)
            self._created(path)
        return 0

    def symlink(self, target: str, source: str) -> int:
        with self._mu:
            os.symlink(source, self._real(target))
            self._created(target)
        return 0

    def readlink(self, path: str) -> str:
        return os.readlink(self._real(path))

    def link(self, target: str, source: str) -> int:
        with self._mu:
            os.link(self._real(source), self._real(target))
            self._created(target)
            self._changed(source, keys=[_key(os.lstat(self._real(source)))])
        return 0

    def unlink(self, path: str) -> int:
        with self._mu:
            self.counters["unlinks"] += 1
        if self.unlink_delay > 0:
            time.sleep(self.unlink_delay)  # outside the lock: other operations go on
        with self._mu:
            real = self._real(path)
            st = os.lstat(real)
            self._changed(path, keys=[_key(st)])
            if self.metadata == "sync":
                os.unlink(real)
                self._forget_if_gone(_key(st))
                return 0
            stashed = self._stash(real)
            self._journal("unlink", [path], lambda: os.rename(stashed, real), self._unstash_commit(stashed))
        return 0

    def rename(self, old: str, new: str, flags: int = 0) -> int:
        with self._mu:
            real_old, real_new = self._real(old), self._real(new)
            try:
                st_new = os.lstat(real_new)
            except FileNotFoundError:
                st_new = None
            st_old = os.lstat(real_old)
            self._changed(old, new, keys=[_key(st_old)] + ([_key(st_new)] if st_new else []),
                          tree=stat.S_ISDIR(st_old.st_mode) or bool(st_new and stat.S_ISDIR(st_new.st_mode)))
            if self.metadata == "dirsync" and flags & RENAME_EXCHANGE:
                _renameat2(real_old, real_new, flags)
                self._journal("exchange", [old, new], lambda: _renameat2(real_old, real_new, RENAME_EXCHANGE))
                return 0
            if self.metadata == "dirsync" and st_new is not None and not flags & RENAME_NOREPLACE:
                # The replaced file is moved aside: a crash before the directories are
                # fsynced brings it back.
                stashed = self._stash(real_new)

                def undo():
                    os.rename(real_new, real_old)
                    os.rename(stashed, real_new)
                self._rename(real_old, real_new, flags)
                self._journal("rename", [old, new], undo, self._unstash_commit(stashed))
                return 0
            self._rename(real_old, real_new, flags)
            if self.metadata == "dirsync":
                self._journal("rename", [old, new], lambda: os.rename(real_new, real_old))
            elif st_new is not None:
                self._forget_if_gone(_key(st_new))
        return 0

    @staticmethod
    def _rename(real_old: str, real_new: str, flags: int) -> None:
        if flags:
            _renameat2(real_old, real_new, flags)
        else:
            os.rename(real_old, real_new)

    def fsyncdir(self, path: str, datasync: int, fh: int) -> int:
        fd = os.open(self._real(path), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        with self._mu:
            self._dir_synced(path)
        return 0

    # ---- files ---------------------------------------------------------------

    def _register(self, fd: int, path: str) -> int:
        st = os.fstat(fd)
        key = _key(st)
        fh = self.next_fh
        self.next_fh += 1
        self.handles[fh] = _Handle(fd, key)
        self.open_count[key] = self.open_count.get(key, 0) + 1
        return fh

    def _open_backing(self, real: str, flags: int, extra: int = 0, mode: int = 0o666) -> int:
        # Always O_RDWR when allowed (an fsync through a read-only handle must be able to
        # write the pending data); never O_APPEND (offsets come from the kernel) nor O_TRUNC
        # (a truncate is pending data).
        try:
            return os.open(real, os.O_RDWR | extra, mode)
        except (PermissionError, IsADirectoryError):
            return os.open(real, (flags & os.O_ACCMODE) | extra, mode)

    def open(self, path: str, flags: int) -> int:
        with self._mu:
            try:
                fd = self._open_backing(self._real(path), flags)
            except FileNotFoundError:
                d = self.dcache.get(_norm(path))
                if self.attr_cache_s > 0 and d is not None and d[1] is not None:
                    # The name came from the cache and is gone on the server: NFS answers
                    # ESTALE, and the kernel looks the name up afresh and tries once more
                    # (an O_CREAT open then creates it).
                    self.dcache.pop(_norm(path), None)
                    self._cache_event("open_estale", _norm(path))
                    raise OSError(errno.ESTALE, "stale file handle", path)
                raise
            if self.attr_cache_s > 0:
                self._cto_open(path, fd)
            fh = self._register(fd, path)
            if flags & os.O_TRUNC and (flags & os.O_ACCMODE) != os.O_RDONLY:
                self.truncate(path, 0, fh)
            return fh

    def create(self, path: str, mode: int, flags: int = os.O_WRONLY) -> int:
        with self._mu:
            existed = os.path.lexists(self._real(path))
            fd = self._open_backing(self._real(path), flags, os.O_CREAT | (flags & os.O_EXCL), mode)
            fh = self._register(fd, path)
            if not existed:
                self._created(path)
            if self.attr_cache_s > 0:
                self._cto_open(path, fd)
            if flags & os.O_TRUNC:
                self.truncate(path, 0, fh)
            return fh

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        with self._mu:
            h = self.handles[fh]
            pf = self.files.get(h.key)
            if pf is None:
                return os.pread(h.fd, size, offset)
            return pf.read(h.fd, size, offset)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        with self._mu:
            if self.enospc:
                self.counters["enospc_injected"] += 1
                raise OSError(errno.ENOSPC, "injected ENOSPC")
            h = self.handles[fh]
            self._changed_key(h.key)
            pf = self._pending_for(h.key, path, h.fd)
            pf.write(offset, data)
            self.pending_total += len(data)
            self.counters["writes"] += 1
            if self.writeback_bytes and self.pending_total > self.writeback_bytes:
                self._writeback_all()
            return len(data)

    def truncate(self, path: str, length: int, fh: Optional[int] = None) -> int:
        with self._mu:
            h = self.handles.get(fh) if fh else None
            if h is not None:
                key, fd = h.key, h.fd
            else:
                st = os.stat(self._real(path))
                if stat.S_ISDIR(st.st_mode):
                    raise OSError(errno.EISDIR, "truncate")
                key, fd = _key(st), None
            self._changed_key(key)
            if key not in self.files and fd is not None:
                if _acc(fd) == os.O_RDONLY:
                    fd = None  # need a writable fd of our own
            self._pending_for(key, path, fd).truncate(length)
            return 0

    def flush(self, path: str, fh: int) -> int:
        return 0  # close() makes nothing durable

    def release(self, path: str, fh: int) -> int:
        with self._mu:
            h = self.handles.pop(fh, None)
            if h is None:
                return 0
            os.close(h.fd)
            n = self.open_count.get(h.key, 1) - 1
            if n > 0:
                self.open_count[h.key] = n
            else:
                self.open_count.pop(h.key, None)
                self._forget_if_gone(h.key)
            return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        with self._mu:
            h = self.handles[fh]
            self._changed_key(h.key)
            self.counters["fsyncs"] += 1
            if self.fail_fsyncs > 0 and (self.fail_match is None or self.fail_match in (path or "")):
                self.fail_fsyncs -= 1
                self.counters["fsyncs_failed_injected"] += 1
                self.counters["bytes_dropped"] += self._drop(h.key)
                raise OSError(errno.EIO, "injected fsync failure")
            pf = self.files.pop(h.key, None)
            if pf is None:
                fd = os.dup(h.fd)
            else:
                self.pending_total -= pf.pending_bytes
                try:
                    pf.apply_all()
                except OSError:
                    pf.close()
                    raise
                fd = pf.wfd
        # the backing fsync outside the lock: other operations go on meanwhile
        try:
            if datasync:
                os.fdatasync(fd)
            else:
                os.fsync(fd)
        finally:
            os.close(fd)
        return 0

    # ---- control ---------------------------------------------------------------

    def control(self, req: dict) -> dict:
        op = req.get("op")
        with self._mu:
            if op == "ping":
                return {}
            if op == "stats":
                return self._stats()
            if op == "crash":
                return self._crash(req.get("torn"), req.get("seed"))
            if op == "fail_next_fsync":
                self.fail_fsyncs = int(req.get("count", 1))
                self.fail_match = req.get("match")
                return {}
            if op == "enospc":
                self.enospc = bool(req.get("on", True))
                return {}
            if op == "slow_unlink":
                self.unlink_delay = max(0.0, float(req.get("seconds", 0)))
                return {}
            if op == "clear_faults":
                self.enospc, self.fail_fsyncs, self.fail_match = False, 0, None
                self.unlink_delay = 0.0
                self._set_attr_cache(0)
                return {}
            if op == "cache_events":
                since = int(req.get("since", 0))
                return {"events": [e for e in self.cache_events if e["seq"] > since], "seq": self.cache_seq}
            if op == "attr_cache":
                return self._set_attr_cache(req.get("ms", 0), bool(req.get("prime", False)))
            if op == "writeback":
                return {"bytes": self._writeback_all()}
        raise FaultFSError(f"unknown control op {op!r}")

    def _stats(self) -> dict:
        return dict(self.counters,
                    pending_files=len(self.files),
                    pending_bytes=self.pending_total,
                    pending=[{"path": pf.path, "bytes": pf.pending_bytes, "size": pf.size}
                             for pf in self.files.values()],
                    enospc=self.enospc,
                    fail_fsyncs_armed=self.fail_fsyncs,
                    attr_cache_ms=round(self.attr_cache_s * 1000),
                    cache={**self.cache_counters, "entries": len(self.dcache) + len(self.lcache)},
                    cache_events=list(self.cache_events)[-20:],
                    cache_seq=self.cache_seq,
                    open_handles=len(self.handles))

    def _crash(self, torn, seed) -> dict:
        rng = random.Random(seed)
        files = []
        for key in list(self.files):
            pf = self.files.pop(key)
            kept = 0
            try:
                if torn is not None and torn is not False:
                    keep = rng.randint(0, pf.pending_bytes) if torn is True else int(torn)
                    kept = pf.apply_prefix(keep)
            finally:
                pf.close()
            files.append({"path": pf.path, "pending": pf.pending_bytes, "kept": kept})
            self.counters["bytes_dropped"] += pf.pending_bytes - kept
            self.counters["bytes_kept_torn"] += kept
        self.pending_total = 0
        # Metadata changes not yet durable are undone, newest first ("dirsync").
        undone = []
        for op in reversed(self.meta_ops):
            try:
                op.undo()
                undone.append({"kind": op.kind, "paths": list(op.paths)})
            except OSError as e:
                undone.append({"kind": op.kind, "paths": list(op.paths), "error": str(e)})
        self.meta_ops = []
        self.counters["metadata_undone"] += len(undone)
        self.counters["crashes"] += 1
        if torn is not None and torn is not False:
            self.counters["torn_crashes"] += 1
        return {"files": files, "metadata_undone": undone}


STASH = ".faultfs-stash"
# what the attr-cache model counts (stats): answers served from a cache, and those of them that
# hid a change another host made (the backing directory said otherwise)
CACHE_COUNTERS = ("names_served", "negative_served", "attrs_served", "listings_served",
                  "name_hidden", "name_gone", "attrs_stale", "listing_stale", "open_estale",
                  "cto_refreshed")
CACHE_EVENTS = 5000  # the newest cached answers that hid something (``cache-events``)
METADATA_MODELS = ("sync", "dirsync")
RENAME_NOREPLACE = 1
RENAME_EXCHANGE = 2


def _norm(path: str) -> str:
    return "/" + path.strip("/")


def _parent(path: str) -> str:
    return _norm(os.path.dirname(_norm(path)))


class _MetaOp:
    """A metadata change not yet durable: the directories still to be fsynced, how to undo it
    (a crash), what to finish when it is durable (remove what it moved aside)."""

    def __init__(self, seq, kind, paths, dirs, undo, commit):
        self.seq, self.kind, self.paths, self.dirs = seq, kind, paths, dirs
        self.undo, self.commit = undo, commit


def _acc(fd: int) -> int:
    import fcntl
    return fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE


# ==========================================================================
# Server: control socket + FUSE loop
# ==========================================================================


def _control_path(arg: str) -> str:
    return os.path.join(arg, "control.sock") if os.path.isdir(arg) else arg


def _serve_control(ops: FaultOps, path: str) -> socketserver.BaseServer:
    class Handler(socketserver.StreamRequestHandler):
        def handle(self):
            for line in self.rfile:
                try:
                    reply = {"ok": True, **ops.control(json.loads(line))}
                except Exception as e:  # reported to the client, the server goes on
                    reply = {"ok": False, "error": f"{type(e).__name__}: {e}"}
                self.wfile.write(json.dumps(reply).encode() + b"\n")
                self.wfile.flush()

    if os.path.exists(path):
        os.unlink(path)
    server = socketserver.ThreadingUnixStreamServer(path, Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="faultfs-control", daemon=True).start()
    return server


def _exit_with_parent(mountpoint: str) -> None:
    """Unmount (which ends the FUSE loop) once the parent process is gone, so that a test
    run killed before its teardown leaves no mount and no process behind."""
    ppid = os.getppid()

    def watch():
        while os.getppid() == ppid:
            time.sleep(1.0)
        _lazy_unmount(mountpoint)
        time.sleep(5.0)
        os._exit(1)

    threading.Thread(target=watch, name="faultfs-parent-watch", daemon=True).start()


def serve(backing: str, mountpoint: str, control: str, writeback_bytes: int = 0,
          debug: bool = False, exit_with_parent: bool = False, metadata: str = "sync",
          attr_cache_ms: float = 0) -> None:
    if ctypes.util.find_library("fuse3") and "FUSE_LIBRARY_PATH" not in os.environ:
        os.environ.setdefault("FUSE_LIBRARY_NAME", "fuse3")
    import mfusepy  # libfuse via ctypes; imported here so that clients need no libfuse

    class _FUSE(mfusepy.FUSE):
        # mfusepy drops rename's flags (RENAME_NOREPLACE / RENAME_EXCHANGE): pass them on.
        def rename_fuse_3(self, old: bytes, new: bytes, flags: int) -> int:
            return self.operations.rename(old.decode(self.encoding, self.errors),
                                          new.decode(self.encoding, self.errors), flags)

    ops = FaultOps(backing, writeback_bytes=writeback_bytes, metadata=metadata, attr_cache_ms=attr_cache_ms)
    server = _serve_control(ops, _control_path(control))
    if exit_with_parent:
        _exit_with_parent(os.path.realpath(mountpoint))
    try:
        _FUSE(ops, mountpoint, foreground=True, debug=debug, fsname="faultfs", subtype="faultfs",
              direct_io=True, use_ino=True, attr_timeout=0, entry_timeout=0, negative_timeout=0)
    finally:
        server.shutdown()
        server.server_close()
        try:
            os.unlink(_control_path(control))
        except OSError:
            pass


# ==========================================================================
# Client side
# ==========================================================================


class FaultFSControl:
    """Talks to a running faultfs over its control socket (one connection per command)."""

    def __init__(self, socket_path: Union[str, os.PathLike], timeout: float = 30.0):
        self.socket_path = _control_path(os.fspath(socket_path))
        self.timeout = timeout

    def call(self, op: str, **args) -> dict:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(self.timeout)
            s.connect(self.socket_path)
            s.sendall(json.dumps({"op": op, **args}).encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    raise FaultFSError(f"faultfs control: connection closed during {op}")
                buf += chunk
        reply = json.loads(buf)
        if not reply.pop("ok"):
            raise FaultFSError(f"faultfs control {op}: {reply.get('error')}")
        return reply

    def ping(self) -> None:
        self.call("ping")

    def crash(self, torn: Union[None, bool, int] = None, seed: Optional[int] = None) -> dict:
        """Drop all unsynced data. ``torn=True``: keep a random prefix of each file's pending
        writes; ``torn=N``: keep the first N bytes of each. Returns
        ``{"files": [{"path", "pending", "kept"}]}``."""
        return self.call("crash", torn=torn, seed=seed)

    def fail_next_fsync(self, count: int = 1, match: Optional[str] = None) -> None:
        """The next ``count`` fsyncs (of paths containing ``match``) fail with EIO and drop
        the data they would have synced."""
        self.call("fail_next_fsync", count=count, match=match)

    def enospc(self, on: bool = True) -> None:
        self.call("enospc", on=on)

    def slow_unlink(self, seconds: float) -> None:
        """Every unlink from now on waits ``seconds`` first (0: none)."""
        self.call("slow_unlink", seconds=seconds)

    def clear_faults(self) -> None:
        self.call("clear_faults")

    def attr_cache(self, ms: float, prime: bool = False) -> dict:
        """Cache names, attributes and listings for ``ms`` milliseconds from now on (0: off,
        every cache emptied); ``prime``: first cache the whole volume as it is now. Returns
        ``{"attr_cache_ms", "primed"}`` (entries cached by the priming walk)."""
        return self.call("attr_cache", ms=ms, prime=prime)

    def cache_events(self, since: int = 0) -> List[dict]:
        """The cached answers that hid another host's change (module doc), newer than the
        sequence number ``since`` (each event has its ``seq``; ``stats()["cache_seq"]`` is the
        newest); the newest 5000 are kept."""
        return self.call("cache_events", since=since)["events"]

    def writeback(self) -> int:
        """Write every pending byte to the backing files; returns how many."""
        return self.call("writeback")["bytes"]

    def stats(self) -> dict:
        return self.call("stats")


def _fusermount() -> List[str]:
    for name in ("fusermount3", "fusermount"):
        if shutil.which(name):
            return [name]
    return []


def _is_mounted(path: str) -> bool:
    path = os.path.realpath(path)
    try:
        with open("/proc/self/mounts") as f:
            return any(line.split()[1] == path for line in f)
    except OSError:
        return os.path.ismount(path)


def _lazy_unmount(mnt: str) -> None:
    fm = _fusermount()
    for cmd in ([*fm, "-u", "-z", mnt] if fm else None, ["umount", "-l", mnt]):
        if cmd and shutil.which(cmd[0]) and _is_mounted(mnt):
            subprocess.run(cmd, capture_output=True, timeout=30)


class FaultFSMount(FaultFSControl):
    """A running faultfs process and its mount; a context manager that always unmounts.

    Attributes: ``backing``, ``mountpoint``, ``socket_path``, ``log_path``, ``proc``.
    Control methods are those of :class:`FaultFSControl` (``crash``, ``fail_next_fsync``,
    ``enospc``, ``clear_faults``, ``writeback``, ``stats``).
    """

    def __init__(self, backing, mountpoint, control=None, log_path=None,
                 start_timeout: float = 20.0, stop_timeout: float = 10.0,
                 writeback_bytes: int = 0, python: Optional[str] = None, metadata: str = "sync",
                 attr_cache_ms: float = 0):
        self.backing = Path(backing)
        self.metadata = metadata
        self.attr_cache_ms = attr_cache_ms
        self.mountpoint = Path(mountpoint)
        self._tmp = None
        if control is None:
            # unix socket paths are limited to 107 bytes: keep it short, outside the mount
            self._tmp = tempfile.mkdtemp(prefix="faultfs-")
            control = os.path.join(self._tmp, "control.sock")
        super().__init__(control)
        self.log_path = Path(log_path) if log_path else Path(self._tmp or tempfile.mkdtemp(prefix="faultfs-")) / "faultfs.log"
        self.start_timeout, self.stop_timeout = start_timeout, stop_timeout
        self.writeback_bytes = writeback_bytes
        self.python = python or sys.executable
        self.proc: Optional[subprocess.Popen] = None

    def start(self) -> "FaultFSMount":
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        cmd = [self.python, str(SCRIPT), str(self.backing), str(self.mountpoint),
               "--control", self.socket_path, "--writeback-bytes", str(self.writeback_bytes),
               "--metadata", self.metadata, "--attr-cache-ms", str(self.attr_cache_ms),
               "--exit-with-parent"]
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + self.start_timeout
        while True:
            if self.proc.poll() is not None:
                self._cleanup()
                raise FaultFSError(f"faultfs exited with {self.proc.returncode} at start:\n{self.log_tail()}")
            if _is_mounted(str(self.mountpoint)) and os.path.exists(self.socket_path):
                try:
                    self.ping()
                    return self
                except OSError:
                    pass
            if time.monotonic() > deadline:
                self.stop()
                raise FaultFSError(f"faultfs not mounted after {self.start_timeout}s:\n{self.log_tail()}")
            time.sleep(0.05)

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_bytes()[-n:].decode(errors="replace")
        except OSError:
            return ""

    def unmount(self) -> None:
        self.stop()

    def stop(self) -> None:
        """Unmount (``fusermount3 -u``, retried for a while if busy, then lazily) and end the
        process (SIGTERM, then SIGKILL). Bounded; never raises for a mount already gone."""
        mnt = str(self.mountpoint)
        fm = _fusermount()
        deadline = time.monotonic() + self.stop_timeout
        while fm and _is_mounted(mnt) and time.monotonic() < deadline:
            if subprocess.run(fm + ["-u", mnt], capture_output=True, timeout=30).returncode == 0:
                break
            time.sleep(0.2)
        _lazy_unmount(mnt)
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=5)
        _lazy_unmount(mnt)  # the process is gone: a dead FUSE mount must not stay behind
        self._cleanup()

    def _cleanup(self) -> None:
        log = getattr(self, "_log", None)
        if log is not None:
            log.close()
            self._log = None
        if self._tmp and Path(self._tmp) not in self.log_path.parents:
            shutil.rmtree(self._tmp, ignore_errors=True)  # only the control socket was there

    def __enter__(self) -> "FaultFSMount":
        if self.proc is None:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def mount_faultfs(backing, mountpoint, control=None, **kwargs) -> FaultFSMount:
    """Start faultfs over ``backing`` at ``mountpoint`` and wait (bounded) until it serves.

    Returns a :class:`FaultFSMount`; use it as a context manager, or call ``.stop()``.
    Keyword arguments: ``log_path``, ``start_timeout``, ``stop_timeout``, ``writeback_bytes``,
    ``metadata`` ("sync" or "dirsync", see the module doc), ``attr_cache_ms`` (the NFS client's
    reader-side caches, see the module doc; 0: off), ``python`` (the interpreter that has
    mfusepy; default: this one).
    """
    return FaultFSMount(backing, mountpoint, control, **kwargs).start()


# ==========================================================================
# Command line
# ==========================================================================


def _ctl_main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(prog="faultfs.py ctl", description="send a command to a running faultfs")
    p.add_argument("socket")
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("crash")
    c.add_argument("--torn", nargs="?", const=True, type=int, default=None,
                   help="keep a prefix of each file's pending writes: N bytes, or random")
    c.add_argument("--seed", type=int)
    f = sub.add_parser("fail-next-fsync")
    f.add_argument("--count", type=int, default=1)
    f.add_argument("--match")
    e = sub.add_parser("enospc")
    e.add_argument("state", choices=["on", "off"])
    u = sub.add_parser("slow-unlink")
    u.add_argument("seconds", type=float)
    ac = sub.add_parser("attr-cache")
    ac.add_argument("ms", type=float, help="cache time in milliseconds (0: off)")
    ac.add_argument("--prime", action="store_true", help="first cache the whole volume as it is now")
    ce = sub.add_parser("cache-events")
    ce.add_argument("--since", type=int, default=0)
    for name in ("stats", "writeback", "clear-faults", "ping"):
        sub.add_parser(name)
    a = p.parse_args(argv)
    ctl = FaultFSControl(a.socket)
    if a.cmd == "crash":
        out = ctl.crash(torn=a.torn, seed=a.seed)
    elif a.cmd == "fail-next-fsync":
        out = ctl.call("fail_next_fsync", count=a.count, match=a.match)
    elif a.cmd == "enospc":
        out = ctl.call("enospc", on=a.state == "on")
    elif a.cmd == "slow-unlink":
        out = ctl.call("slow_unlink", seconds=a.seconds)
    elif a.cmd == "attr-cache":
        out = ctl.attr_cache(a.ms, prime=a.prime)
    elif a.cmd == "cache-events":
        out = ctl.cache_events(a.since)
    else:
        out = ctl.call(a.cmd.replace("-", "_"))
    print(json.dumps(out, indent=2))
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "ctl":
        return _ctl_main(argv[1:])
    p = argparse.ArgumentParser(
        prog="faultfs.py",
        description="FUSE file system keeping unsynced writes in memory, with crash and fault "
                    "injection (see the module docstring). 'faultfs.py ctl SOCKET ...' controls it.")
    p.add_argument("backing")
    p.add_argument("mountpoint")
    p.add_argument("--control", required=True, help="control unix socket path (or a directory for DIR/control.sock)")
    p.add_argument("--writeback-bytes", type=int, default=0,
                   help="write everything back once this many bytes are pending (0: never)")
    p.add_argument("--exit-with-parent", action="store_true",
                   help="unmount and exit when the parent process is gone (mount_faultfs sets it)")
    p.add_argument("--metadata", choices=METADATA_MODELS, default="sync",
                   help="sync: creates, unlinks and renames are durable at once (an NFS server, a "
                        "journaling file system committing synchronously); dirsync: only once "
                        "their directory is fsynced, and a crash undoes the others")
    p.add_argument("--attr-cache-ms", type=float, default=0,
                   help="model an NFS client's reader-side caches: names (also negative), "
                        "attributes and directory listings are served from cache for this many "
                        "ms, so other hosts' changes stay unseen that long (0: off, the default)")
    p.add_argument("--debug", action="store_true", help="libfuse debug output")
    a = p.parse_args(argv)
    serve(a.backing, a.mountpoint, a.control, writeback_bytes=a.writeback_bytes, debug=a.debug,
          exit_with_parent=a.exit_with_parent, metadata=a.metadata, attr_cache_ms=a.attr_cache_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())

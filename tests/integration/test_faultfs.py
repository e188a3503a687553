"""faultfs (tests/faultfs): the crash-simulating FUSE file system itself.

What survives a simulated crash must be exactly what was fsynced; reads before the crash must
show exactly what a normal file system shows. Both are checked against a byte model of each
file, with explicit cases for the faults (torn crash, failed fsync, ENOSPC), open-file
unlink/rename (silly rename), and real programs (dd, cp) on the mount. Broker-independent: it
runs the same under either target. Skipped only when the machine has no /dev/fuse.
"""

from __future__ import annotations

import errno
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the faultfs package

from faultfs import FaultFSError, mount_faultfs  # noqa: E402


@pytest.fixture
def ffs(tmp_path):
    """A faultfs mount over tmp_path/backing at tmp_path/mnt; always unmounted at teardown."""
    if not os.path.exists("/dev/fuse"):
        pytest.skip("FUSE unavailable: no /dev/fuse")
    m = mount_faultfs(tmp_path / "backing", tmp_path / "mnt", log_path=tmp_path / "faultfs.log")
    try:
        yield m
    finally:
        m.stop()
        assert m.proc.poll() is not None, "faultfs process still running after stop()"


def _read(path: Path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _write(fd: int, data: bytes, off: int) -> None:
    assert os.pwrite(fd, data, off) == len(data)


def _open(path: Path, flags: int = os.O_RDWR | os.O_CREAT) -> int:
    return os.open(path, flags, 0o644)


class FileModel:
    """What a file holds: ``visible`` (what reads must show) and ``synced`` (what a crash leaves)."""

    def __init__(self):
        self.visible = bytearray()
        self.synced = b""

    def write(self, off: int, data: bytes) -> None:
        if off > len(self.visible):
            self.visible.extend(b"\0" * (off - len(self.visible)))
        self.visible[off:off + len(data)] = data

    def truncate(self, n: int) -> None:
        if n < len(self.visible):
            del self.visible[n:]
        else:
            self.visible.extend(b"\0" * (n - len(self.visible)))

    def sync(self) -> None:
        self.synced = bytes(self.visible)

    def crash(self) -> None:
        self.visible = bytearray(self.synced)


# ---------------------------------------------------------------------------
# what survives a crash
# ---------------------------------------------------------------------------


def test_crash_keeps_exactly_what_was_synced(ffs):
    path = ffs.mountpoint / "a.log"
    fd = _open(path)
    try:
        os.write(fd, b"A" * 1000)
        os.fsync(fd)
        os.write(fd, b"B" * 500)
        # before the crash: reads and stat see the pending write, the disk does not have it
        assert _read(path) == b"A" * 1000 + b"B" * 500
        assert os.stat(path).st_size == 1500
        assert _read(ffs.backing / "a.log") == b"A" * 1000
        assert ffs.stats()["pending_bytes"] == 500
        ffs.crash()
        assert _read(path) == b"A" * 1000
        assert os.stat(path).st_size == 1000
        # the mount goes on after the crash, as a rebooted host would
        os.pwrite(fd, b"C" * 10, 1000)
        os.fdatasync(fd)
    finally:
        os.close(fd)
    assert _read(path) == b"A" * 1000 + b"C" * 10
    ffs.crash()
    assert _read(path) == b"A" * 1000 + b"C" * 10


def test_unsynced_new_file_survives_empty_and_closed_files_keep_pending_data(ffs):
    # create is metadata (durable at once); the data is not; close() syncs nothing
    path = ffs.mountpoint / "new"
    path.write_bytes(b"never synced")
    assert _read(path) == b"never synced"
    ffs.crash()
    assert path.exists() and _read(path) == b""


def test_several_files_appends_overwrites_truncates_against_a_model(ffs):
    """Random writes (appends, holes, overwrites in the middle), truncates (shrink, extend,
    path and fd), fsyncs and fdatasyncs on several files through several descriptors; after
    each step reads must equal the model, and after each crash the content must equal the
    last synced state."""
    rng = random.Random(17)
    names = ["f0", "f1", "f2"]
    models = {n: FileModel() for n in names}
    fds = {n: [_open(ffs.mountpoint / n), _open(ffs.mountpoint / n)] for n in names}
    try:
        for round_ in range(4):
            for step in range(150):
                n = rng.choice(names)
                m, fd = models[n], rng.choice(fds[n])
                r = rng.random()
                size = len(m.visible)
                if r < 0.35:  # append
                    data = rng.randbytes(rng.randint(1, 5000))
                    _write(fd, data, size)
                    m.write(size, data)
                elif r < 0.6:  # overwrite in the middle (or past the end: a hole)
                    off = rng.randint(0, size + 3000)
                    data = rng.randbytes(rng.randint(1, 3000))
                    _write(fd, data, off)
                    m.write(off, data)
                elif r < 0.7:  # truncate: through the fd or by path
                    k = rng.randint(0, size + 2000)
                    if rng.random() < 0.5:
                        os.ftruncate(fd, k)
                    else:
                        os.truncate(ffs.mountpoint / n, k)
                    m.truncate(k)
                elif r < 0.8:
                    (os.fsync if rng.random() < 0.5 else os.fdatasync)(fd)
                    m.sync()
                else:  # a read at a random place, through any descriptor
                    off = rng.randint(0, size + 10)
                    ln = rng.randint(0, 9000)
                    assert os.pread(fd, ln, off) == bytes(m.visible[off:off + ln]), (round_, step, n)
            for n in names:
                assert _read(ffs.mountpoint / n) == bytes(models[n].visible), (round_, n)
                assert os.stat(ffs.mountpoint / n).st_size == len(models[n].visible)
            ffs.crash()
            for n in names:
                models[n].crash()
                assert _read(ffs.mountpoint / n) == models[n].synced, (round_, n)
                assert _read(ffs.backing / n) == models[n].synced, (round_, n)
    finally:
        for n in names:
            for fd in fds[n]:
                os.close(fd)


def test_truncate_of_a_closed_file_is_pending_until_fsync(ffs):
    path = ffs.mountpoint / "t"
    path.write_bytes(b"x" * 100)
    fd = os.open(path, os.O_RDONLY)  # fsync through a read-only descriptor works too
    os.fsync(fd)
    os.close(fd)
    os.truncate(path, 10)
    assert _read(path) == b"x" * 10
    ffs.crash()
    assert _read(path) == b"x" * 100
    # O_TRUNC is a truncate too
    with open(path, "wb") as f:
        f.write(b"new")
    assert _read(path) == b"new"
    ffs.crash()
    assert _read(path) == b"x" * 100


def test_writeback_makes_everything_durable(ffs):
    (ffs.mountpoint / "w").write_bytes(b"data")
    assert ffs.writeback() == 4
    ffs.crash()
    assert _read(ffs.mountpoint / "w") == b"data"


# ---------------------------------------------------------------------------
# torn crash
# ---------------------------------------------------------------------------


def _replay(base: bytes, writes, keep: int) -> bytes:
    m = FileModel()
    m.write(0, base)
    for off, data in writes:
        if keep <= 0:
            break
        m.write(off, data[:keep])
        keep -= len(data)
    return bytes(m.visible)


def test_torn_crash_keeps_a_prefix_of_the_pending_writes(ffs):
    path = ffs.mountpoint / "torn"
    base = b"S" * 4096
    writes = [(4096, b"1" * 1000), (100, b"2" * 50), (5096, b"3" * 3000), (8000, b"4" * 10)]
    total = sum(len(d) for _, d in writes)
    for keep in (0, 1, 999, 1000, 1030, 2500, total, total + 100):
        path.write_bytes(b"")
        fd = _open(path)
        try:
            os.write(fd, base)
            os.fsync(fd)
            for off, data in writes:
                _write(fd, data, off)
            out = ffs.crash(torn=keep)
            [f] = out["files"]
            assert f["pending"] == total and f["kept"] == min(keep, total)
            assert _read(path) == _replay(base, writes, keep), keep
        finally:
            os.close(fd)

    # random prefixes (repeatable with a seed), per file; the reported kept count is the truth
    for seed in range(5):
        for name in ("r0", "r1"):
            (ffs.mountpoint / name).write_bytes(b"")
        fds = [_open(ffs.mountpoint / name) for name in ("r0", "r1")]
        try:
            for fd in fds:
                for off, data in writes:
                    _write(fd, data, off)
            out = ffs.crash(torn=True, seed=seed)
            kept = {f["path"]: f["kept"] for f in out["files"]}
            assert set(kept) == {"/r0", "/r1"}
            for name in ("r0", "r1"):
                assert 0 <= kept["/" + name] <= total
                assert _read(ffs.mountpoint / name) == _replay(b"", writes, kept["/" + name])
        finally:
            for fd in fds:
                os.close(fd)


def test_torn_crash_keeps_truncates_in_order(ffs):
    path = ffs.mountpoint / "tt"
    fd = _open(path)
    try:
        os.write(fd, b"a" * 100)
        os.fsync(fd)
        os.ftruncate(fd, 20)          # pending op 1 (no bytes)
        _write(fd, b"b" * 30, 20)     # pending op 2
        _write(fd, b"c" * 30, 50)     # pending op 3
        ffs.crash(torn=40)            # truncate + all of b + 10 bytes of c
        assert _read(path) == b"a" * 20 + b"b" * 30 + b"c" * 10
    finally:
        os.close(fd)


def test_torn_crash_drops_a_truncate_after_the_cut_point(ffs):
    path = ffs.mountpoint / "tc"
    fd = _open(path)
    try:
        os.write(fd, b"a" * 10)
        os.fsync(fd)
        _write(fd, b"b" * 30, 10)     # pending op 1
        os.ftruncate(fd, 5)           # pending op 2, after the cut point below
        ffs.crash(torn=30)            # all of b, nothing after it
        assert _read(path) == b"a" * 10 + b"b" * 30
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------
# failed fsync, ENOSPC
# ---------------------------------------------------------------------------


def test_failed_fsync_reports_eio_and_the_data_is_gone(ffs):
    path = ffs.mountpoint / "f"
    fd = _open(path)
    try:
        os.write(fd, b"synced")
        os.fsync(fd)
        os.write(fd, b"-lost")
        ffs.fail_next_fsync()
        with pytest.raises(OSError) as e:
            os.fsync(fd)
        assert e.value.errno == errno.EIO
        # the kernel dropped the dirty pages: the retry "succeeds" with nothing to write
        assert _read(path) == b"synced"
        os.fsync(fd)
        ffs.crash()
        assert _read(path) == b"synced"
        assert ffs.stats()["fsyncs_failed_injected"] == 1
    finally:
        os.close(fd)


def test_failed_fsync_can_target_one_path(ffs):
    a, b = _open(ffs.mountpoint / "a.index"), _open(ffs.mountpoint / "b.log")
    try:
        os.write(a, b"index")
        os.write(b, b"log")
        ffs.fail_next_fsync(match=".log")
        os.fsync(a)  # not matched: succeeds, and the fault stays armed
        with pytest.raises(OSError) as e:
            os.fdatasync(b)
        assert e.value.errno == errno.EIO
        ffs.crash()
        assert _read(ffs.mountpoint / "a.index") == b"index"
        assert _read(ffs.mountpoint / "b.log") == b""
    finally:
        os.close(a)
        os.close(b)


def test_enospc_fails_writes(ffs):
    path = ffs.mountpoint / "full"
    fd = _open(path)
    try:
        os.write(fd, b"before")
        ffs.enospc(True)
        with pytest.raises(OSError) as e:
            os.write(fd, b"x" * 4096)
        assert e.value.errno == errno.ENOSPC
        assert os.statvfs(ffs.mountpoint).f_bavail == 0
        ffs.enospc(False)
        os.write(fd, b"-after")
        os.fsync(fd)
    finally:
        os.close(fd)
    assert _read(path) == b"before-after"
    assert ffs.stats()["enospc_injected"] == 1


def test_slow_unlink_holds_up_the_unlink_only(ffs):
    import threading

    slow, other = ffs.mountpoint / "slow", ffs.mountpoint / "other"
    slow.write_bytes(b"s")
    other.write_bytes(b"o")
    ffs.slow_unlink(3.0)
    before = ffs.stats()["unlinks"]
    t = threading.Thread(target=os.unlink, args=(slow,))
    t.start()
    assert _eventually(lambda: ffs.stats()["unlinks"] > before), "the unlink never reached faultfs"
    # While it waits, other operations (and the control socket) are served.
    fd = _open(other)
    try:
        _write(fd, b"-more", 1)
        os.fsync(fd)
    finally:
        os.close(fd)
    assert _read(other) == b"o-more"
    assert t.is_alive(), "the unlink did not wait"
    t.join(30)
    assert not t.is_alive() and not slow.exists()
    ffs.clear_faults()
    before = ffs.stats()["unlinks"]
    os.unlink(other)
    assert ffs.stats()["unlinks"] == before + 1 and not other.exists()


def test_unknown_control_command_is_an_error(ffs):
    with pytest.raises(FaultFSError):
        ffs.call("no-such-command")


# ---------------------------------------------------------------------------
# open files: unlink and rename (silly rename), hard links
# ---------------------------------------------------------------------------


def _eventually(cond, timeout: float = 10.0) -> bool:
    """FUSE RELEASE is sent asynchronously after close() returns: wait for it, bounded."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _hidden(directory: Path) -> list:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith(".fuse_hidden"))


def test_unlinked_open_file_keeps_working_for_its_holder(ffs):
    path = ffs.mountpoint / "seg.log"
    fd = _open(path)
    try:
        os.write(fd, b"old")
        os.fsync(fd)
        os.write(fd, b"+pending")
        os.unlink(path)
        assert not path.exists()
        assert len(_hidden(ffs.backing)) == 1  # libfuse's silly rename, as bindfs and NFS
        assert os.pread(fd, 100, 0) == b"old+pending"
        os.write(fd, b"+more")
        os.fsync(fd)
        assert os.pread(fd, 100, 0) == b"old+pending+more"
        assert os.fstat(fd).st_size == len(b"old+pending+more")
    finally:
        os.close(fd)
    assert _eventually(lambda: _hidden(ffs.backing) == []), _hidden(ffs.backing)
    assert ffs.stats()["pending_files"] == 0


def test_unlinked_closed_file_forgets_its_pending_data(ffs):
    path = ffs.mountpoint / "gone"
    path.write_bytes(b"pending only")
    assert ffs.stats()["pending_files"] == 1
    os.unlink(path)
    assert ffs.stats()["pending_files"] == 0
    path.write_bytes(b"")  # a new file, maybe with the old inode number: no stale data
    assert _read(path) == b""


def test_rename_of_open_files(ffs):
    src, dst = ffs.mountpoint / "x.cleaned", ffs.mountpoint / "x.log"
    dst.write_bytes(b"target")
    os.fsync(held := os.open(dst, os.O_RDONLY))
    fd = _open(src)
    try:
        os.write(fd, b"renamed while open, pending")
        os.rename(src, dst)  # over a file that is itself open: it is hidden, not lost
        assert _read(dst) == b"renamed while open, pending"
        assert os.pread(held, 100, 0) == b"target"
        assert len(_hidden(ffs.backing)) == 1
        os.fsync(fd)  # pending data follows the inode, not the name
        ffs.crash()
        assert _read(dst) == b"renamed while open, pending"
        assert _read(ffs.backing / "x.log") == b"renamed while open, pending"
    finally:
        os.close(fd)
        os.close(held)
    assert _eventually(lambda: _hidden(ffs.backing) == []), _hidden(ffs.backing)


def test_directories_and_hard_links(ffs):
    d = ffs.mountpoint / "topic-0"
    d.mkdir()
    (d / "a").write_bytes(b"1")
    os.link(d / "a", d / "b")
    with open(d / "b", "ab") as f:
        f.write(b"2")
        os.fsync(f.fileno())
    assert _read(d / "a") == b"12"
    assert sorted(p.name for p in d.iterdir()) == ["a", "b"]
    os.unlink(d / "a")
    os.unlink(d / "b")
    d.rmdir()
    assert not (ffs.backing / "topic-0").exists()


def test_append_mode(ffs):
    path = ffs.mountpoint / "app"
    path.write_bytes(b"head")
    with open(path, "ab") as f:
        f.write(b"-tail")
        f.flush()
        os.fsync(f.fileno())
        f.write(b"-lost")
    assert _read(path) == b"head-tail-lost"
    ffs.crash()
    # an fsync covers the whole file, whichever descriptor wrote the data
    assert _read(path) == b"head-tail"


# ---------------------------------------------------------------------------
# real programs
# ---------------------------------------------------------------------------


def test_dd_cp_and_fsync_by_another_process(ffs, tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(random.Random(1).randbytes(3 * 1024 * 1024 + 123))
    data = _read(src)
    mnt = ffs.mountpoint
    subprocess.run(["dd", f"if={src}", f"of={mnt / 'dd.bin'}", "bs=64k", "status=none"],
                   check=True, timeout=60)
    subprocess.run(["cp", str(mnt / "dd.bin"), str(mnt / "copy.bin")], check=True, timeout=60)
    assert _read(mnt / "dd.bin") == data and _read(mnt / "copy.bin") == data
    assert ffs.stats()["pending_bytes"] == 2 * len(data)
    # fsync from another process, which opens the file read-only
    subprocess.run([sys.executable, "-c",
                    "import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)",
                    str(mnt / "dd.bin")], check=True, timeout=60)
    ffs.crash()
    assert _read(mnt / "dd.bin") == data
    assert _read(mnt / "copy.bin") == b""
    # a pipeline of small writes (many FUSE requests) also works
    subprocess.run(f"head -c 200000 {src} | dd of={mnt / 'small.bin'} bs=512 status=none "
                   f"conv=fsync", shell=True, check=True, timeout=60)
    ffs.crash()
    assert _read(mnt / "small.bin") == data[:200000]


# ---------------------------------------------------------------------------
# metadata: durable at once ("sync"), or once its directory is fsynced ("dirsync")
# ---------------------------------------------------------------------------


@pytest.fixture
def dffs(tmp_path):
    if not os.path.exists("/dev/fuse"):
        pytest.fail("FUSE unavailable: no /dev/fuse (scripts/test installs fuse3)")
    m = mount_faultfs(tmp_path / "dbacking", tmp_path / "dmnt", log_path=tmp_path / "dfaultfs.log",
                      metadata="dirsync")
    try:
        yield m
    finally:
        m.stop()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _synced_file(path: Path, data: bytes) -> None:
    fd = _open(path)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def test_dirsync_a_crash_undoes_what_no_directory_fsync_covered(dffs):
    root = dffs.mountpoint
    (root / "d").mkdir()
    _fsync_dir(root)
    _synced_file(root / "d" / "kept", b"k")
    _synced_file(root / "d" / "gone", b"g")
    _synced_file(root / "d" / "old", b"o")
    _synced_file(root / "d" / "target", b"t")
    _fsync_dir(root / "d")                      # kept, gone, old and target are durable
    (root / "d" / "gone").unlink()              # unlink not synced: comes back
    (root / "d" / "new").write_bytes(b"n")      # create not synced: disappears
    os.rename(root / "d" / "old", root / "d" / "renamed")        # rename not synced: goes back
    _synced_file(root / "d" / "tmp", b"T")
    os.rename(root / "d" / "tmp", root / "d" / "target")         # replaces target, not synced
    (root / "e").mkdir()                        # mkdir not synced: disappears with its contents
    _synced_file(root / "e" / "inner", b"i")
    _fsync_dir(root / "e")
    assert sorted(p.name for p in (root / "d").iterdir()) == ["kept", "new", "renamed", "target"]
    out = dffs.crash()
    assert len(out["metadata_undone"]) >= 6, out
    assert sorted(p.name for p in (root / "d").iterdir()) == ["gone", "kept", "old", "target"]
    assert (root / "d" / "target").read_bytes() == b"t"
    assert (root / "d" / "gone").read_bytes() == b"g"
    assert not (root / "e").exists()
    assert ".faultfs-stash" not in [p.name for p in root.iterdir()]


def test_dirsync_a_directory_fsync_makes_its_changes_durable(dffs):
    root = dffs.mountpoint
    _synced_file(root / "a", b"a")
    _synced_file(root / "b", b"b")
    _fsync_dir(root)
    (root / "a").unlink()
    os.rename(root / "b", root / "c")
    _synced_file(root / "d", b"d")
    _fsync_dir(root)
    dffs.crash()
    assert sorted(p.name for p in root.iterdir()) == ["c", "d"]
    assert not any((dffs.backing / ".faultfs-stash").iterdir()), "unlinked files were removed"


def test_sync_metadata_is_durable_at_once(ffs):
    root = ffs.mountpoint
    _synced_file(root / "a", b"a")
    os.rename(root / "a", root / "b")
    out = ffs.crash()
    assert out["metadata_undone"] == []
    assert [p.name for p in root.iterdir()] == ["b"]


# ---------------------------------------------------------------------------
# a lagging view: the NFS client's reader-side caches (attr-cache)
# ---------------------------------------------------------------------------

# The cache time of host B in these tests. FAULTFS_TEST_LAG_MS=0 runs them with the model off:
# then each of them fails (the change of host A is seen at once), which shows they test it.
LAG_MS = int(os.environ.get("FAULTFS_TEST_LAG_MS", "3000"))


@pytest.fixture
def hosts(tmp_path):
    """Two hosts' mounts (A, B) of one backing directory; B caches for LAG_MS."""
    if not os.path.exists("/dev/fuse"):
        pytest.skip("FUSE unavailable: no /dev/fuse")
    backing = tmp_path / "backing"
    a = mount_faultfs(backing, tmp_path / "a", log_path=tmp_path / "a.log")
    try:
        b = mount_faultfs(backing, tmp_path / "b", log_path=tmp_path / "b.log", attr_cache_ms=LAG_MS)
    except BaseException:
        a.stop()
        raise
    try:
        yield a, b
    finally:
        b.stop()
        a.stop()


def _synced_append(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        assert os.write(fd, data) == len(data)
        os.fsync(fd)
    finally:
        os.close(fd)


def _until_true(cond, timeout: float) -> float:
    """Seconds until ``cond()`` held (polled every 50 ms), or fail after ``timeout``."""
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < timeout, f"still false after {timeout} s"
        time.sleep(0.05)
    return time.monotonic() - t0


def test_lagging_view_hides_another_hosts_create_from_listing_and_lookup(hosts):
    a, b = hosts
    (a.mountpoint / "d").mkdir()
    assert os.listdir(b.mountpoint / "d") == []  # B lists the directory and looks the name up
    assert not (b.mountpoint / "d" / "x").exists()
    t0 = time.monotonic()
    _synced_append(a.mountpoint / "d" / "x", b"data")
    assert os.listdir(b.mountpoint / "d") == [], "B's listing shows A's create at once"
    assert not (b.mountpoint / "d" / "x").exists(), "B's lookup finds A's create at once"
    with pytest.raises(FileNotFoundError):
        open(b.mountpoint / "d" / "x", "rb")  # an open of a name cached as absent fails
    assert time.monotonic() - t0 < LAG_MS / 1000, "too slow to check within the cache time"
    waited = _until_true(lambda: (b.mountpoint / "d" / "x").exists(), LAG_MS / 1000 + 10)
    assert os.listdir(b.mountpoint / "d") == ["x"]
    assert (b.mountpoint / "d" / "x").read_bytes() == b"data"
    assert waited > 0
    cache = b.stats()["cache"]
    assert cache["name_hidden"] >= 2 and cache["listing_stale"] >= 1 and cache["negative_served"] >= 2, cache
    events = b.cache_events()
    assert {"kind": "listing_stale", "path": "/d", "hidden": ["x"], "gone": []}.items() <= events[0].items(), events
    assert [e["seq"] for e in b.cache_events(since=events[0]["seq"])] == [e["seq"] for e in events[1:]]


def test_lagging_view_keeps_a_stale_size_until_expiry_but_open_revalidates(hosts):
    a, b = hosts
    for name in ("x", "y"):
        _synced_append(a.mountpoint / name, b"12345")
        assert os.stat(b.mountpoint / name).st_size == 5  # cached by B
    t0 = time.monotonic()
    for name in ("x", "y"):
        _synced_append(a.mountpoint / name, b"678")
    assert os.stat(b.mountpoint / "x").st_size == 5, "B's stat sees A's fsynced append at once"
    assert os.stat(b.mountpoint / "y").st_size == 5
    # close-to-open: the open fetches the size afresh, and the data is read as it is now
    with open(b.mountpoint / "x", "rb") as f:
        assert os.fstat(f.fileno()).st_size == 8
        assert f.read() == b"12345678"
    assert os.stat(b.mountpoint / "x").st_size == 8  # the inode's attributes were refreshed
    assert time.monotonic() - t0 < LAG_MS / 1000, "too slow to check within the cache time"
    # without an open, the stale size stays until the cache time is over
    assert os.stat(b.mountpoint / "y").st_size == 5
    _until_true(lambda: os.stat(b.mountpoint / "y").st_size == 8, LAG_MS / 1000 + 10)
    cache = b.stats()["cache"]
    assert cache["attrs_stale"] >= 2 and cache["cto_refreshed"] >= 1, cache


def test_lagging_view_still_lists_a_file_another_host_unlinked(hosts):
    a, b = hosts
    _synced_append(a.mountpoint / "x", b"x")
    _synced_append(a.mountpoint / "y", b"y")
    assert sorted(os.listdir(b.mountpoint)) == ["x", "y"]
    assert os.stat(b.mountpoint / "x").st_size == 1
    assert os.stat(b.mountpoint / "y").st_size == 1
    t0 = time.monotonic()
    (a.mountpoint / "x").unlink()
    (a.mountpoint / "y").unlink()
    assert sorted(os.listdir(b.mountpoint)) == ["x", "y"], "B's listing drops A's unlink at once"
    assert os.stat(b.mountpoint / "x").st_size == 1, "B's lookup misses A's unlink at once"
    # An open of the gone name: ESTALE, then a fresh lookup (as the kernel retries an NFS
    # open): not found, and an O_CREAT open creates it anew, empty.
    with pytest.raises(FileNotFoundError):
        open(b.mountpoint / "x", "rb")
    fd = os.open(b.mountpoint / "y", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        assert os.fstat(fd).st_size == 0
    finally:
        os.close(fd)
    assert time.monotonic() - t0 < LAG_MS / 1000, "too slow to check within the cache time"
    assert sorted(os.listdir(a.mountpoint)) == ["y"]
    # B's own create refreshed its listing of the directory: only x is still listed, until expiry
    assert sorted(os.listdir(b.mountpoint)) == ["y"]
    _until_true(lambda: not (b.mountpoint / "x").exists(), LAG_MS / 1000 + 10)
    cache = b.stats()["cache"]
    assert cache["name_gone"] >= 1 and cache["listing_stale"] >= 1 and cache["open_estale"] >= 2, cache


def test_lagging_view_sees_its_own_changes_at_once_and_turns_off(hosts):
    """B's own creates, writes, renames and unlinks are seen by B at once (an NFS client
    updates its caches from its own replies); ``attr-cache 0`` shows everything at once,
    ``--prime`` caches the volume as it is. (Passes with the model off too.)"""
    a, b = hosts
    d = b.mountpoint
    assert os.listdir(d) == []
    _synced_append(d / "own", b"abc")
    assert os.listdir(d) == ["own"] and os.stat(d / "own").st_size == 3
    _synced_append(d / "own", b"de")
    assert os.stat(d / "own").st_size == 5
    os.rename(d / "own", d / "moved")
    assert os.listdir(d) == ["moved"] and not (d / "own").exists()
    (d / "moved").unlink()
    assert os.listdir(d) == []
    _synced_append(a.mountpoint / "other", b"o")
    b.attr_cache(0)
    assert os.listdir(d) == ["other"], "attr-cache 0 shows the volume as it is"
    if LAG_MS:
        out = b.attr_cache(LAG_MS, prime=True)
        assert out["primed"] == 1 and out["attr_cache_ms"] == LAG_MS, out
    (a.mountpoint / "other").unlink()
    if LAG_MS:
        assert os.listdir(d) == ["other"], "a primed cache shows the volume as it was"
        assert b.stats()["attr_cache_ms"] == LAG_MS
    b.clear_faults()
    assert os.listdir(d) == [] and b.stats()["attr_cache_ms"] == 0


def test_a_writeback_writes_only_the_dirty_ranges_over_another_hosts_data(hosts):
    """Host A's unsynced writes into a file host B has since extended and fsynced: A's fsync
    writes its dirty range only (an NFS client writing back dirty pages), B's bytes past it
    stay; only a truncate A made cuts the file. (Independent of the attribute cache.)"""
    a, b = hosts
    fa = os.open(a.mountpoint / "f", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        assert os.pwrite(fa, b"A" * 10, 0) == 10  # pending in A's page cache
        fb = os.open(b.mountpoint / "f", os.O_RDWR)
        try:
            assert os.pwrite(fb, b"B" * 30, 0) == 30
            os.fsync(fb)
        finally:
            os.close(fb)
        os.fsync(fa)
    finally:
        os.close(fa)
    assert (a.backing / "f").read_bytes() == b"A" * 10 + b"B" * 20
    fa = os.open(a.mountpoint / "f", os.O_RDWR)
    try:
        os.ftruncate(fa, 5)
        os.fsync(fa)
    finally:
        os.close(fa)
    assert (a.backing / "f").read_bytes() == b"A" * 5

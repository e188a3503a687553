"""Support for the NFS-semantics tests: bindfs mounts, a foreign file holder,
live producers/consumers, and two Kafka requests spoken by hand
(AlterReplicaLogDirs v1, DescribeLogDirs v1) that no installed Python client offers.

bindfs (FUSE, default options) renames a file that is unlinked (or renamed over)
while open to ``.fuse_hiddenNNNN`` and removes it only on its last close, so the
directory cannot be removed meanwhile: the same semantics as an NFS client's
silly rename (``.nfsXXXX``).
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import List, Optional

import pytest

from harness import HarnessError, producer, wait_until

# --------------------------------------------------------------------------
# bindfs mounts
# --------------------------------------------------------------------------


def _unmount(mnt: Path) -> None:
    for cmd in (["fusermount", "-u", "-z", str(mnt)], ["umount", "-l", str(mnt)]):
        if shutil.which(cmd[0]) and subprocess.run(cmd, capture_output=True).returncode == 0:
            return


def _is_mounted(mnt: Path) -> bool:
    try:
        with open("/proc/self/mounts") as f:
            return any(line.split()[1] == str(mnt) for line in f)
    except OSError:
        return False


@pytest.fixture
def bindfs_mounts(tmp_path):
    """``bindfs_mounts(n)`` -> [(source_dir, mount_point)] * n; unmounted at teardown (always).

    Fails (never skips) when bindfs or FUSE is unavailable: scripts/test installs bindfs, and
    a check that is skipped proves nothing.
    """
    if shutil.which("bindfs") is None:
        pytest.fail("bindfs not installed (scripts/test installs it: apt-get install -y bindfs)")
    if not os.path.exists("/dev/fuse"):
        pytest.fail("FUSE unavailable: no /dev/fuse")
    made: List[Path] = []

    def mount(n: int):
        out = []
        for i in range(n):
            src = tmp_path / f"nfs-src{i}"
            mnt = tmp_path / f"nfs-mnt{i}"
            src.mkdir()
            mnt.mkdir()
            r = subprocess.run(["bindfs", str(src), str(mnt)], capture_output=True, text=True)
            if r.returncode != 0:
                raise HarnessError(f"bindfs {src} {mnt} failed: {r.stderr}")
            made.append(mnt)
            wait_until(lambda: _is_mounted(mnt), 10, f"bindfs mount at {mnt}")
            out.append((src, mnt))
        return out

    yield mount
    for mnt in reversed(made):
        _unmount(mnt)


# --------------------------------------------------------------------------
# a foreign process holding a file open
# --------------------------------------------------------------------------


class ForeignHandle:
    """Another process holding ``path`` open until ``release()`` (or teardown)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.proc = subprocess.Popen(
            [sys.executable, "-c",
             "import sys; f = open(sys.argv[1], 'rb'); f.read(1); print('held', flush=True); "
             "sys.stdin.read(); f.close()", str(self.path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )
        line = self.proc.stdout.readline().strip()
        if line != "held":
            self.release()
            raise HarnessError(f"foreign holder of {path} did not start")

    def release(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@pytest.fixture
def foreign_handle():
    made: List[ForeignHandle] = []

    def hold(path: Path) -> ForeignHandle:
        h = ForeignHandle(path)
        made.append(h)
        return h

    yield hold
    for h in made:
        h.release()


# --------------------------------------------------------------------------
# live traffic
# --------------------------------------------------------------------------


class LiveProducer:
    """Produces to ``topic`` (round robin over ``partitions``) with acks=all until stopped.

    ``acked[(partition)]`` holds the values whose delivery was acknowledged.
    Delivery errors are counted, not fatal (a deleted topic's producer sees them).
    """

    def __init__(self, bootstrap: str, topic: str, partitions: int, value_size: int = 200,
                 pause: float = 0.002):
        self.topic = topic
        self.partitions = partitions
        self.acked = {p: [] for p in range(partitions)}
        self.errors = 0
        self.sent = 0
        self._stop = threading.Event()
        self._p = producer(bootstrap, acks="all", **{"linger.ms": 5, "message.timeout.ms": 30000})
        self._pad = b"x" * value_size
        self._pause = pause
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        i = 0
        while not self._stop.is_set():
            part = i % self.partitions
            value = b"%d:" % i + self._pad

            def cb(err, msg, part=part, value=value):
                if err is None:
                    self.acked[part].append(value)
                else:
                    self.errors += 1

            try:
                self._p.produce(self.topic, value=value, partition=part, on_delivery=cb)
                self.sent += 1
                i += 1
            except BufferError:
                pass
            self._p.poll(0)
            time.sleep(self._pause)
        self._p.flush(60)

    def stop(self):
        self._stop.set()
        self._t.join(90)

    def total_acked(self) -> int:
        return sum(len(v) for v in self.acked.values())


class LiveConsumer:
    """Keeps fetching ``topic`` partitions from the beginning until stopped; errors counted."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, **conf):
        from harness import consumer

        self.count = 0
        self.errors = 0
        self._stop = threading.Event()
        self._c = consumer(bootstrap, **{"enable.partition.eof": False, **conf})
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        self._c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.is_set():
            for m in self._c.consume(num_messages=500, timeout=0.2):
                if m.error() is None:
                    self.count += 1
                else:
                    self.errors += 1
        self._c.close()

    def stop(self):
        self._stop.set()
        self._t.join(60)
        assert not self._t.is_alive(), "the consumer thread did not end"


def wait_for_acks(prod: LiveProducer, at_least: int, timeout: float = 60) -> None:
    wait_until(lambda: prod.total_acked() >= at_least, timeout,
               f"{at_least} acknowledged records on {prod.topic}")


def assert_all_acked_readable(bootstrap: str, prod: LiveProducer) -> None:
    """Every acknowledged value of every partition is still readable, in order."""
    from harness import consume_partitions

    total = prod.total_acked()
    msgs = consume_partitions(bootstrap, prod.topic, range(prod.partitions), expected=total, timeout=120)
    got = {p: [] for p in range(prod.partitions)}
    for m in msgs:
        got[m.partition()].append(m.value())
    for p, acked in prod.acked.items():
        present = set(got[p])
        missing = [v[:20] for v in acked if v not in present]
        assert not missing, f"{len(missing)} acknowledged records of {prod.topic}-{p} lost, e.g. {missing[:3]}"


# --------------------------------------------------------------------------
# files on the underlying (source) directories
# --------------------------------------------------------------------------


def leftovers(*roots: Path) -> list:
    """Silly-renamed files, ``*-delete`` / ``*-future`` dirs and ``*.deleted`` files under ``roots``."""
    out = []
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root):
            for d in dirnames:
                if d.endswith("-delete") or d.endswith("-future"):
                    out.append(os.path.join(dirpath, d))
            for f in filenames:
                if f.startswith(".fuse_hidden") or f.startswith(".nfs") or f.endswith(".deleted"):
                    out.append(os.path.join(dirpath, f))
    return sorted(out)


def silly_files(*roots: Path) -> list:
    return [p for p in leftovers(*roots) if os.path.basename(p).startswith((".fuse_hidden", ".nfs"))]


def segment_logs(partition_dir: Path) -> list:
    return sorted(p for p in Path(partition_dir).glob("*.log"))


# --------------------------------------------------------------------------
# AlterReplicaLogDirs v1 / DescribeLogDirs v1 by hand
# --------------------------------------------------------------------------

ALTER_REPLICA_LOG_DIRS = 34
DESCRIBE_LOG_DIRS = 35


def _string(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


class _Reader:
    def __init__(self, data: bytes):
        self.d = data
        self.i = 0

    def take(self, fmt: str):
        v = struct.unpack_from(fmt, self.d, self.i)
        self.i += struct.calcsize(fmt)
        return v[0]

    def string(self) -> Optional[str]:
        n = self.take(">h")
        if n < 0:
            return None
        s = self.d[self.i:self.i + n].decode()
        self.i += n
        return s


def _request(bootstrap: str, api_key: int, version: int, body: bytes, timeout: float = 30) -> _Reader:
    host, port = bootstrap.rsplit(":", 1)
    header = struct.pack(">hhi", api_key, version, 7) + _string("sluice-it")
    frame = header + body
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        n = struct.unpack(">i", _recv(s, 4))[0]
        data = _recv(s, n)
    r = _Reader(data)
    assert r.take(">i") == 7, "correlation id mismatch"
    return r


def _recv(s: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise HarnessError("connection closed by the broker")
        buf += chunk
    return buf


def alter_replica_log_dirs(bootstrap: str, moves: dict) -> dict:
    """``moves``: {log_dir_path: {topic: [partitions]}} -> {(topic, partition): error_code}."""
    body = struct.pack(">i", len(moves))
    for path, topics in moves.items():
        body += _string(str(path)) + struct.pack(">i", len(topics))
        for topic, parts in topics.items():
            body += _string(topic) + struct.pack(">i", len(parts))
            body += b"".join(struct.pack(">i", p) for p in parts)
    r = _request(bootstrap, ALTER_REPLICA_LOG_DIRS, 1, body)
    r.take(">i")  # throttle
    out = {}
    for _ in range(r.take(">i")):
        topic = r.string()
        for _ in range(r.take(">i")):
            p = r.take(">i")
            out[(topic, p)] = r.take(">h")
    return out


def describe_log_dirs(bootstrap: str) -> dict:
    """-> {log_dir: {"error": code, "partitions": {(topic, p): (size, is_future)}}}."""
    r = _request(bootstrap, DESCRIBE_LOG_DIRS, 1, struct.pack(">i", -1))
    r.take(">i")  # throttle
    out = {}
    for _ in range(r.take(">i")):
        err = r.take(">h")
        d = r.string()
        parts = {}
        for _ in range(r.take(">i")):
            topic = r.string()
            for _ in range(r.take(">i")):
                p = r.take(">i")
                size = r.take(">q")
                r.take(">q")  # offset lag
                fut = r.take(">?")
                parts[(topic, p)] = (size, fut)
        out[d] = {"error": err, "partitions": parts}
    return out


def dir_of(bootstrap: str, topic: str, partition: int) -> Optional[str]:
    """The log dir DescribeLogDirs reports for a (non-future) replica."""
    for d, info in describe_log_dirs(bootstrap).items():
        v = info["partitions"].get((topic, partition))
        if v is not None and not v[1]:
            return d
    return None


def assert_serving(broker, dirs) -> None:
    """The broker process is up, answers, and no log directory is offline."""
    assert broker.running, f"broker exited (code {broker.last_exit})"
    info = describe_log_dirs(broker.bootstrap)
    for d in dirs:
        assert str(d) in info, f"log dir {d} missing from DescribeLogDirs: {sorted(info)}"
        assert info[str(d)]["error"] == 0, f"log dir {d} reported error {info[str(d)]['error']} (offline)"

"""The fault-injection run of issue 17: a queue workload against one Sluice broker or a
three-broker cluster while a schedule of faults rotates over the processes and the disks.

    python tests/integration/faults.py --minutes N [--brokers 1|3] [--seed S] [--workdir DIR]

(``scripts/faults`` installs what it needs and runs this.) Every broker's log dir is a faultfs
mount (tests/faultfs; one mount per simulated host, all over one backing directory in a
cluster). Workloads (values unique, see queue_checker.py):

- one broker: ``all+flush`` (acks=all, idempotent, topic ``flush.messages=1``: the guaranteed
  one), ``all-noflush`` (acks=all, idempotent, no flush policy) and ``acks1`` (acks=1, no
  flush policy);
- cluster: ``all`` (acks=all, idempotent: the guaranteed one; a cluster fsyncs acks=all before
  the acknowledgement) and ``acks1``.

Consumers: one assigned to every partition of every topic from the start (``live``), and a
group member (``subscribe()``, auto-commit, closed and re-created from its committed offsets
every ~20 s) on the guaranteed topic. Faults (a shuffled rotation, a quiet period after each):
``kill`` (SIGKILL, restart), ``pause`` (SIGSTOP/SIGCONT), ``crash`` (SIGKILL, then the host's
faultfs drops every unsynced write, plain or torn; restart), ``fsync-eio`` (the host's next
fsync fails; the broker re-opens the failed log from storage by itself, docs/reliability.md),
``enospc`` (faultfs fails writes for a while), ``disk-full`` (the hosts' data lives on a small
ext4 volume on a loop device; a ballast file takes every free block for a while, so writes and
the write-back of fsyncs fail with ENOSPC; skipped with a message where loop devices cannot be
used), ``unmount`` (the host's faultfs stopped under the running broker, its unsynced writes
with it, then mounted again), and in a cluster ``etcd-stop`` (etcd SIGTERMed and started
again), ``etcd-cutoff`` (one broker's etcd connection, through a TCP proxy on 127.0.0.1,
black-holed for longer than the lease) and ``lagging-view`` (one host's mount sees the volume as
it was up to N ms before, N in 1-30 s: faultfs's model of an NFS client's attribute, name and
listing caches, close-to-open kept; meanwhile both other brokers go one after the other, so
that the lagging host acquires partitions whose newest files it does not see). Then every
fault is healed, producers flush, a final
read takes everything, and History.check() reports.

The group consumers (the group member and the transform chain's) and the etcd proxies are
child processes (child_consumer.py, tcp_proxy.py): a librdkafka call that blocks while
holding Python's lock (a group rebalance callback in ``consume()`` or ``close()``) can stall
only its own process, a call that hangs is reported as a ``client-hung`` note and its process
killed. Every process started here is killed in ``finally``; every wait is bounded.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # tests/, for the faultfs package

import harness  # noqa: E402
from queue_checker import CHECKS, History  # noqa: E402
# one broker's etcd connection goes through a TcpProxy, a process of its own (tcp_proxy.py)
from tcp_proxy import TcpProxy  # noqa: E402
# the group consumers (subscribe()) run in child processes (child_consumer.py)
from child_consumer import ChildConsumer, ClientGone, kill_all as kill_child_consumers  # noqa: E402

PARTITIONS = 3
LEASE_MS = 3000
# A producer client with records outstanding and no delivery report for this long is replaced
# (reported with the fatal errors).
WEDGED_PRODUCER_S = 60
# Records per transaction of the transactional workload (spread over the partitions).
TXN_RECORDS = 5
# Every partition of a guaranteed workload acknowledges again within this many seconds of a
# fault being healed (a failover takes 3-4 s, a broker restart under load up to ~10 s here).
AVAILABILITY_S = 45
# Harness findings that are violations: a broker that exited by itself or did not start, a
# partition that did not recover by itself, a group consumer that did not catch up.
VIOLATING_FINDINGS = ("broker-died", "broker-start-failed", "partition-unavailable",
                      "group-consumer-behind", "transform-behind")
# librdkafka's own log lines (connection refused, ...) are expected under faults: errors only
QUIET = {"log_level": 2}
# The rack of the consumers that observe a cluster run (broker 2's): see Env.reader_conf.
READER_RACK = "rack-2"

SINGLE_FAULTS = ("kill", "pause", "crash", "fsync-eio", "enospc", "disk-full", "unmount")
# the loop-device volume the hosts' data lives on (disk-full fills it)
VOLUME_MB = int(os.environ.get("SLUICE_FAULTS_VOLUME_MB", "2048"))
CLUSTER_FAULTS = SINGLE_FAULTS + ("etcd-stop", "etcd-cutoff", "lagging-view")
# lagging-view: the lagging host's cache time (faultfs attr-cache), milliseconds
LAG_VIEW_MS = (1000, 30000)
# what faultfs counts as a cached answer that hid another host's change
CACHE_HID = ("name_hidden", "name_gone", "attrs_stale", "listing_stale", "open_estale")
CACHE_SERVED = ("names_served", "negative_served", "attrs_served", "listings_served")


def eos_logger():
    """librdkafka's log lines about its idempotence state (producer id, epoch, drains and
    bumps) to stderr, the rest of its debug output dropped."""
    import logging
    logger = logging.getLogger("faults.rdkafka-eos")
    if not logger.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[rdkafka %(asctime)s] %(message)s"))
        handler.addFilter(lambda r: any(w in r.getMessage() for w in ("PID", "epoch", "Epoch", "drain", "bump")))
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
    return logger


def log(msg: str) -> None:
    print(f"[faults {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# a small real volume (a loop device) under the hosts' data
# --------------------------------------------------------------------------

class LoopVolume:
    """An ext4 file system in a sparse image file, loop-mounted at ``mountpoint``: a disk that
    really fills up (the ``disk-full`` fault). ``LoopVolume.unavailable()`` says why one cannot
    be made here (not root, no loop devices, no mkfs.ext4), or None."""

    def __init__(self, image: Path, mountpoint: Path, size_mb: int):
        self.image, self.mountpoint, self.size_mb = image, mountpoint, size_mb
        self.mounted = False

    @staticmethod
    def unavailable() -> Optional[str]:
        if os.geteuid() != 0:
            return "not root (loop devices need root)"
        if not os.path.exists("/dev/loop-control"):
            return "no /dev/loop-control"
        for tool in ("mkfs.ext4", "mount", "umount"):
            if shutil.which(tool) is None:
                return f"{tool} not installed"
        return None

    def start(self) -> "LoopVolume":
        import subprocess
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        with open(self.image, "wb") as f:
            f.truncate(self.size_mb << 20)
        for cmd in (["mkfs.ext4", "-q", "-F", "-m", "0", str(self.image)],
                    ["mount", "-o", "loop", str(self.image), str(self.mountpoint)]):
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
            if r.returncode != 0:
                raise harness.HarnessError(f"{' '.join(cmd)} failed: {r.stderr.strip()}")
        self.mounted = True
        return self

    def fill(self) -> int:
        """Take every free block with a ballast file; returns its size."""
        path = self.mountpoint / "ballast"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            st = os.statvfs(self.mountpoint)
            free = st.f_bavail * st.f_frsize
            try:
                os.posix_fallocate(fd, 0, max(free, 1))
            except OSError:
                pass
            size = os.fstat(fd).st_size
            chunk = b"\0" * (1 << 20)
            while True:  # whatever fallocate left (it may stop short of the last blocks)
                try:
                    size += os.pwrite(fd, chunk, size)
                except OSError:
                    break
            return size
        finally:
            os.close(fd)

    def free(self) -> None:
        try:
            (self.mountpoint / "ballast").unlink()
        except FileNotFoundError:
            pass

    def stop(self, keep_image: bool = False) -> None:
        import subprocess
        if self.mounted:
            for cmd in (["umount", str(self.mountpoint)], ["umount", "-l", str(self.mountpoint)]):
                if subprocess.run(cmd, capture_output=True, timeout=60).returncode == 0:
                    break
            self.mounted = False
        if not keep_image:
            try:
                self.image.unlink()
            except FileNotFoundError:
                pass


# --------------------------------------------------------------------------
# the system under test
# --------------------------------------------------------------------------

class Env:
    """Brokers on faultfs mounts (and etcd, proxies in a cluster). ``hosts[i]``: broker i's
    process and mount."""

    def __init__(self, workdir: Path, n: int, seed: int, broker_config: Optional[Dict[str, str]] = None):
        from faultfs import mount_faultfs

        self.workdir = workdir
        self.n = n
        self.cluster = n > 1
        self.volume: Optional[LoopVolume] = None
        self.unavailable: Dict[str, str] = {}
        why = LoopVolume.unavailable()
        if why is None:
            try:
                self.volume = LoopVolume(workdir / "volume.img", workdir / "volume", VOLUME_MB).start()
            except (harness.HarnessError, OSError) as e:
                why = str(e)
        if self.volume is None:
            self.unavailable["disk-full"] = why
            log(f"no disk-full fault: a loop-device volume cannot be made here ({why})")
        # the hosts' shared data: on the loop volume when there is one
        self.backing = (self.volume.mountpoint if self.volume else workdir) / "disk"
        self.mounts = []
        self.brokers: List[harness.SluiceBroker] = []
        self.etcd = None
        self.proxies: List[TcpProxy] = []
        self.findings: List[dict] = []
        # Bytes each broker served as a read replica (sluice_read_replica_bytes_total), over
        # all its processes: [banked from processes gone, the current one's last value].
        self.metrics_ports: List[int] = []
        self.replica_bytes: Dict[int, List[float]] = {}
        self.group_id: Optional[str] = None  # the group consumer's group
        self.paused: set = set()
        self.etcd_paused = False
        if not harness.SLUICE_BIN.is_file():
            wait_for_binary()
        # One broker's volume is a local disk: a create, unlink or rename is durable only once
        # its directory is fsynced. A cluster's is NFS: the server makes them stable before it
        # answers (and the three mounts share one backing directory).
        self.metadata = "sync" if self.cluster else "dirsync"
        # A cluster's brokers are in racks of their own, and the consumers that observe the
        # run (live, group, transform) are in broker 2's: they read the partitions brokers 1
        # and 3 own through broker 2, a read replica (docs/cluster.md), under every fault.
        # The final checks read from the owners.
        self.reader_conf: Dict[str, str] = {"client.rack": READER_RACK} if self.cluster else {}
        for i in range(n):
            self.mounts.append(mount_faultfs(self.backing, workdir / f"host{i + 1}" / "mnt",
                                             log_path=workdir / f"host{i + 1}" / "faultfs.log",
                                             metadata=self.metadata))
        if self.cluster:
            from cluster_support import EtcdServer
            self.etcd = EtcdServer(workdir / "etcd").start()
            prefix = f"/sluice-faults-{seed}-{os.getpid()}"
        for i in range(n):
            props = {"num.partitions": PARTITIONS, "auto.create.topics.enable": "false",
                     "group.initial.rebalance.delay.ms": 0}
            if self.cluster:
                proxy = TcpProxy(self.etcd.client_port)
                self.proxies.append(proxy)
                props.update({
                    "node.id": i + 1,
                    "sluice.cluster.etcd.endpoints": proxy.endpoint,
                    "sluice.cluster.etcd.prefix": prefix,
                    "sluice.cluster.lease.ms": LEASE_MS,
                    "sluice.cluster.poll.ms": 100,
                    "broker.rack": f"rack-{i + 1}",
                })
                self.metrics_ports.append(harness.free_port())
                props["sluice.metrics.listener"] = f"127.0.0.1:{self.metrics_ports[-1]}"
            props.update(broker_config or {})
            b = harness.SluiceBroker(workdir / f"host{i + 1}", log_dir=self.mounts[i].mountpoint,
                                     overrides=props, name=f"broker{i + 1}")
            self.brokers.append(b)
        for b in self.brokers:
            self.start_broker(b, "initial start")
        if self.cluster:
            harness.wait_until(lambda: len(self.live_brokers()) == n, 60, f"{n} brokers in the metadata")

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers)

    def live_brokers(self) -> list:
        return sorted(harness.admin(self.bootstrap).list_topics(timeout=10).brokers)

    def finding(self, kind: str, **detail) -> None:
        detail["kind"] = kind
        detail["t"] = round(time.monotonic() - T0, 1)
        self.findings.append(detail)
        log(f"FINDING {kind}: {json.dumps(detail, default=str)[:2000]}")

    def start_broker(self, b, why: str) -> None:
        for attempt in range(3):
            if not harness.SLUICE_BIN.is_file():
                wait_for_binary()
            try:
                b.start(timeout=90)
                return
            except harness.HarnessError as e:
                self.finding("broker-start-failed", broker=b.name, after=why, attempt=attempt + 1,
                             log_tail=harness.tail(b.log_file, 40), error=str(e)[:500])
                b.kill()
                time.sleep(2)
        raise harness.HarnessError(f"{b.name} does not start after {why}")

    def restart_graceful(self, b, why: str) -> None:
        try:
            b.stop(timeout=30)
        except harness.HarnessError as e:
            self.finding("unclean-stop", broker=b.name, after=why, error=str(e)[:1500])
            b.kill()
        self.start_broker(b, why)

    def sample_replica_reads(self) -> None:
        """Note what each broker has served as a read replica so far (a restarted broker
        counts from 0 again: what its former process served is banked)."""
        for i, port in enumerate(self.metrics_ports):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    text = r.read().decode()
            except OSError:
                continue  # down or paused now
            m = re.search(r"^sluice_read_replica_bytes_total (\S+)$", text, re.M)
            if not m:
                continue
            value = float(m.group(1))
            banked, last = self.replica_bytes.setdefault(i + 1, [0.0, 0.0])
            if value < last:
                banked += last
            self.replica_bytes[i + 1] = [banked, value]

    def replica_bytes_served(self) -> Dict[str, float]:
        """By broker (node id as a string, as the result's JSON keeps it)."""
        return {str(b): banked + last for b, (banked, last) in self.replica_bytes.items()}

    def check_alive(self, why: str) -> None:
        """A broker that exited by itself (on a failed fsync, a full disk, an unmount, a bug)
        is a finding, whatever fault comes next; it is started again."""
        for i, b in enumerate(self.brokers):
            if b.proc is not None and not b.running and i not in self.paused:
                b.kill()
                self.finding("broker-died", broker=b.name, exit=b.last_exit, noticed=why,
                             log_tail=harness.tail(b.log_file, 40))
                self.start_broker(b, f"died ({why})")

    def crash_all(self) -> int:
        """Every host crashes at once: each broker is killed, then its faultfs mount drops
        what was not fsynced; the brokers start again. Returns the bytes dropped."""
        self.check_alive("before the final crash")
        for b in self.brokers:
            b.kill()
        dropped = 0
        for m in self.mounts:
            dropped += sum(f["pending"] - f["kept"] for f in m.crash()["files"])
        for b in self.brokers:
            self.start_broker(b, "the final crash")
        log(f"every host crashed before the final read: {dropped} unsynced bytes dropped")
        return dropped

    def heal(self) -> None:
        """Undo whatever fault may still be in effect."""
        for i, b in enumerate(self.brokers):
            if i in self.paused and b.running:
                os.kill(b.pid, signal.SIGCONT)
            self.paused.discard(i)
        for m in self.mounts:
            m.clear_faults()
        if self.volume is not None:
            self.volume.free()
        for p in self.proxies:
            p.blackhole(False)
        if self.etcd is not None:
            if self.etcd_paused and self.etcd.proc is not None:
                os.kill(self.etcd.proc.pid, signal.SIGCONT)
                self.etcd_paused = False
            if self.etcd.proc is None or self.etcd.proc.poll() is not None:
                self.etcd.proc = None
                self.etcd.start()
        for b in self.brokers:
            if not b.running:
                if b.proc is not None:  # died by itself
                    b.kill()
                    self.finding("broker-died", broker=b.name, exit=b.last_exit,
                                 log_tail=harness.tail(b.log_file, 40))
                self.start_broker(b, "heal")

    def close(self, keep_data: bool = False) -> None:
        """Stop everything; with ``keep_data`` the loop volume's image stays (unmounted)."""
        for i, b in enumerate(self.brokers):
            try:
                if b.running and i in self.paused:
                    os.kill(b.pid, signal.SIGCONT)
            except OSError:
                pass
            b.kill()
        for p in self.proxies:
            p.close()
        if self.etcd is not None:
            if self.etcd.proc is not None:
                try:
                    os.kill(self.etcd.proc.pid, signal.SIGCONT)
                except OSError:
                    pass
            self.etcd.kill()
        for m in self.mounts:
            m.stop()
        if self.volume is not None:
            self.volume.stop(keep_image=keep_data)


def wait_for_binary(timeout: float = 300) -> None:
    harness.wait_until(lambda: harness.SLUICE_BIN.is_file(), timeout, f"{harness.SLUICE_BIN} (being rebuilt?)",
                       interval=2)
    time.sleep(2)


# --------------------------------------------------------------------------
# workload
# --------------------------------------------------------------------------

T0 = time.monotonic()


def now() -> float:
    return time.monotonic() - T0


class Workload:
    def __init__(self, name: str, topic: str, guaranteed: bool, topic_config: dict, producer_conf: dict,
                 rate: float):
        self.name, self.topic, self.guaranteed = name, topic, guaranteed
        self.topic_config, self.producer_conf, self.rate = topic_config, producer_conf, rate


def workloads_for(cluster: bool, run_id: str, rate: float) -> List[Workload]:
    idem = {"acks": "all", "enable.idempotence": True}
    one = {"acks": "1", "enable.idempotence": False}
    if cluster:
        return [
            Workload("all", f"faults-all-{run_id}", True, {}, idem, rate),
            Workload("acks1", f"faults-acks1-{run_id}", False, {}, one, rate),
        ]
    return [
        Workload("all+flush", f"faults-allflush-{run_id}", True, {"flush.messages": "1"}, idem, rate),
        Workload("all-noflush", f"faults-allnoflush-{run_id}", False, {}, idem, rate),
        Workload("acks1", f"faults-acks1-{run_id}", False, {}, one, rate),
    ]


class Producer:
    """Sends WORKLOAD:INSTANCE:SEQ to partition SEQ % PARTITIONS at a steady rate; a producer
    whose idempotence state turned fatal is replaced by a new instance."""

    def __init__(self, env: Env, wl: Workload, hist: History):
        self.env, self.wl, self.hist = env, wl, hist
        self.stop_flag = threading.Event()
        self.instance = 0
        self.fatal: Optional[str] = None
        self.last_report = time.monotonic()
        self.last_ack: Dict[int, float] = {}
        self.p = self._new()
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"produce-{wl.name}")

    def _new(self):
        self.instance += 1
        self.seq = 0
        self.fatal = None
        self.last_report = time.monotonic()

        def on_error(err):
            if err.fatal():
                self.fatal = str(err)

        conf = {**QUIET, "linger.ms": 5, "message.timeout.ms": 60000, "request.timeout.ms": 10000,
                "topic.metadata.refresh.interval.ms": 1000, "error_cb": on_error}
        conf.update(self.wl.producer_conf)
        if conf.get("enable.idempotence"):
            # the idempotent producer's state changes (new producer ids and epochs, with why):
            # what a duplicate or a fatal error needs explained
            conf.update({"debug": "eos", "log_level": 7, "logger": eos_logger()})
        return harness.producer(self.env.bootstrap, **conf)

    def _on_delivery(self, err, msg):
        self.last_report = time.monotonic()
        value = msg.value().decode()
        if err is not None:
            self.hist.on_fail(self.wl.name, value, f"{err.name()}" + (", fatal" if err.fatal() else ""))
        else:
            t = now()
            self.hist.on_ack(self.wl.name, value, msg.partition(), msg.offset(), t)
            self.last_ack[msg.partition()] = t

    def _poll(self, timeout: float) -> None:
        try:
            self.p.poll(timeout)
        except Exception as e:  # noqa: BLE001 - confluent-kafka raises a fatal error from poll()
            if self.fatal is None:
                self.fatal = f"poll raised {e!r}"

    def _run(self):
        next_t = time.monotonic()
        while not self.stop_flag.is_set():
            outstanding = len(self.p)
            if (self.fatal is None and outstanding
                    and time.monotonic() - self.last_report > WEDGED_PRODUCER_S):
                # librdkafka was seen to stop sending to a partition for good ("wait for
                # outstanding requests to finish before producing to new leader") after a burst
                # of broker restarts, while a new client produced to the same broker at once.
                self.fatal = (f"wedged: no delivery report for {WEDGED_PRODUCER_S} s with "
                              f"{outstanding} record(s) outstanding")
            if self.fatal is not None:
                self.hist.producer_fatal.append((self.wl.name, now(), self.fatal))
                log(f"producer {self.wl.name}#{self.instance} fatal: {self.fatal}; new instance")
                old = self.p
                try:
                    old.purge()
                    old.flush(5)
                except Exception:  # noqa: BLE001 - a fatal producer may refuse these too
                    pass
                self.p = self._new()
            delay = next_t - time.monotonic()
            if delay > 0:
                self._poll(min(delay, 0.05))
                continue
            value = f"{self.wl.name}:{self.instance}:{self.seq}"
            try:
                self.p.produce(self.wl.topic, value=value.encode(), partition=self.seq % PARTITIONS,
                               on_delivery=self._on_delivery)
            except BufferError:
                self._poll(0.05)
                continue
            except Exception as e:  # noqa: BLE001 - a fatal producer refuses; replaced above
                if self.fatal is None:
                    self.fatal = f"produce raised {e!r}"
                continue
            self.hist.on_send(self.wl.name)
            self.seq += 1
            next_t += 1.0 / self.wl.rate
            if next_t < time.monotonic() - 1:
                next_t = time.monotonic()  # do not burst after a stall
            self._poll(0)

    def start(self):
        self.thread.start()
        return self

    def finish(self, timeout: float) -> int:
        self.stop_flag.set()
        self.thread.join(timeout=15)
        try:
            remaining = self.p.flush(timeout)
            if remaining:
                self.p.purge()
                self.p.flush(5)
        except Exception as e:  # noqa: BLE001 - fatal at the very end
            self.hist.producer_fatal.append((self.wl.name, now(), f"at the final flush: {e!r}"))
            remaining = len(self.p)
        return remaining


class LiveConsumer:
    """assign() of every partition of every topic from the beginning; every record is an
    observation. Offset-out-of-range resets to the earliest offset (a truncated log)."""

    def __init__(self, env: Env, wls: List[Workload], hist: History):
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition
        self.hist = hist
        self.by_topic = {w.topic: w.name for w in wls}
        self.c = harness.consumer(env.bootstrap, **{**QUIET, "enable.partition.eof": False,
                                                    "topic.metadata.refresh.interval.ms": 1000,
                                                    **env.reader_conf})
        self.c.assign([TopicPartition(w.topic, p, OFFSET_BEGINNING) for w in wls for p in range(PARTITIONS)])
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name="live-consumer")

    def _run(self):
        while not self.stop_flag.is_set():
            try:
                batch = self.c.consume(num_messages=500, timeout=0.2)
            except Exception as e:  # noqa: BLE001 - counted, and consuming goes on
                self.hist.consumer_errors[f"live raised {type(e).__name__}"] += 1
                time.sleep(0.5)
                continue
            for m in batch:
                if m.error() is not None:
                    self.hist.consumer_errors[f"live {m.error().name()}"] += 1
                    continue
                self.hist.on_read(self.by_topic[m.topic()], m.value().decode(), m.partition(), m.offset(),
                                  "live", now())
        self.c.close()

    def start(self):
        self.thread.start()
        return self

    def finish(self):
        self.stop_flag.set()
        self.thread.join(timeout=30)


def group_client(env: "Env", name: str, conf: dict) -> ChildConsumer:
    """A group consumer (subscribe()) in a child process of its own. confluent_kafka's
    rebalance callback (in consume() and close()) holds Python's lock while it waits on
    librdkafka without a bound; a consumer that hung there in this process stopped every
    thread of the harness. Now only the thread that calls it waits, with a bound: a call that
    does not return in time is a ``client-hung`` finding (a note, with the child's stacks), and
    the child is killed (like a crashed application: its membership expires)."""
    return ChildConsumer(conf, name, env.workdir / "hung-clients.txt",
                         on_hang=lambda detail: env.finding("client-hung", **detail))


class GroupConsumer:
    """A group member (subscribe(), a synchronous commit of what it read every 500 ms) on one
    topic, closed and re-created every ``regroup_s`` so that it resumes from its committed
    offsets, which must be at or past what its coordinator reported committed before. The
    consumer lives in a child process (:func:`group_client`)."""

    def __init__(self, env: Env, wl: Workload, hist: History, group: str, regroup_s: float):
        self.env, self.wl, self.hist, self.group, self.regroup_s = env, wl, hist, group, regroup_s
        self.stop_flag = threading.Event()
        self.max_offset: Dict[int, int] = {}
        # partition -> the highest offset the coordinator reported committed before a close
        self.committed_floor: Dict[int, int] = {}
        self.generations = 0
        self.thread = threading.Thread(target=self._run, daemon=True, name="group-consumer")

    def _consumer(self):
        self.generations += 1
        c = group_client(self.env, f"group consumer #{self.generations}", {
            **QUIET, "bootstrap.servers": self.env.bootstrap, "broker.address.family": "v4",
            "group.id": self.group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
            "heartbeat.interval.ms": 1000, "topic.metadata.refresh.interval.ms": 1000,
            **self.env.reader_conf})
        try:
            c.subscribe([self.wl.topic])
        except BaseException:
            c.kill()
            raise
        return c

    def _close(self, c) -> None:
        self._note_committed(c)
        # No commit at close (auto-commit is off): what the coordinator reported committed
        # above is what the next member must start from.
        try:
            c.close()
        except ClientGone:
            pass  # reported (a client-hung note) if it hung
        except Exception as e:  # noqa: BLE001 - counted
            self.hist.consumer_errors[f"group close raised {type(e).__name__}"] += 1

    def _note_committed(self, c) -> None:
        """The offsets the coordinator says are committed, before a member closes: the next
        member must not start below them (a committed offset never goes back or vanishes)."""
        self._commit(c)
        try:
            for tp in c.committed(c.assignment(), timeout=5):
                if tp.error is None and tp.offset >= 0:
                    self.committed_floor[tp.partition] = max(self.committed_floor.get(tp.partition, -1),
                                                             tp.offset)
        except Exception:  # noqa: BLE001 - unknown now: the floor stays as it was
            pass

    def _commit(self, c) -> None:
        """Commit what was read, synchronously (one commit at a time, so none lands after a
        newer one); a failed commit is counted and the next one covers it."""
        from confluent_kafka import KafkaError
        try:
            c.commit(asynchronous=False)
        except ClientGone:
            pass  # reported; the member is replaced
        except Exception as e:  # noqa: BLE001 - under faults a commit may fail
            err = e.args[0] if e.args and isinstance(e.args[0], KafkaError) else None
            if err is not None and err.code() == KafkaError._NO_OFFSET:
                return  # nothing read since the last commit
            self.hist.consumer_errors[f"group commit {err.name() if err else type(e).__name__}"] += 1

    def _run(self):
        c = None
        since = committed_at = time.monotonic()
        first: Dict[int, int] = {}
        while not self.stop_flag.is_set():
            if c is not None and c.gone:  # it hung in a call and was killed: a new member
                c = None
            if c is None:
                try:
                    c = self._consumer()
                except Exception as e:  # noqa: BLE001 - counted, and tried again
                    self.hist.consumer_errors[f"group start raised {type(e).__name__}"] += 1
                    time.sleep(1)
                    continue
                since = time.monotonic()
                first = {}
            if time.monotonic() - since > self.regroup_s:
                self._close(c)
                c = None
                continue
            if time.monotonic() - committed_at > 0.5:
                self._commit(c)
                committed_at = time.monotonic()
            try:
                batch = c.consume(num_messages=500, timeout=0.2)
            except ClientGone:
                continue
            except Exception as e:  # noqa: BLE001 - counted, and consuming goes on
                self.hist.consumer_errors[f"group raised {type(e).__name__}"] += 1
                time.sleep(0.5)
                continue
            for m in batch:
                if m.error() is not None:
                    self.hist.consumer_errors[f"group {m.error().name()}"] += 1
                    continue
                self.hist.on_read(self.wl.name, m.value().decode(), m.partition(), m.offset(), "group", now())
                if m.partition() not in first:
                    first[m.partition()] = m.offset()
                    floor = self.committed_floor.get(m.partition(), -1)
                    if m.offset() < floor:
                        self.hist.on_group_regressed(self.wl.name, m.partition(), floor, m.offset())
                if m.offset() > self.max_offset.get(m.partition(), -1):
                    self.max_offset[m.partition()] = m.offset()
        if c is not None:
            self._close(c)

    def start(self):
        self.thread.start()
        return self

    def finish(self):
        self.stop_flag.set()
        self.thread.join(timeout=60)


def commit_transaction(p, errors: Counter) -> None:
    """commit_transaction, tried again (up to three times) on a retriable error."""
    from confluent_kafka import KafkaException
    for attempt in range(3):
        try:
            p.commit_transaction(30)
            return
        except KafkaException as e:
            if not e.args[0].retriable() or attempt == 2:
                raise
            errors[f"commit retry {e.args[0].name()}"] += 1


class TxnProducer:
    """Transactions of TXN_RECORDS records each, spread over the partitions of one topic, one
    after another; every fourth is aborted on purpose. Records are ``INSTANCE:TXN:K``. What
    each transaction ended as, as the client saw it: committed (commit_transaction
    returned), aborted (abort_transaction returned) or unknown (neither could be confirmed: a
    fatal error, a commit that timed out)."""

    def __init__(self, env: "Env", topic: str, run_id: str):
        self.env, self.topic, self.tid = env, topic, f"faults-txn-{run_id}"
        self.stop_flag = threading.Event()
        self.instance = 0
        self.committed: set = set()
        self.aborted: set = set()
        self.unknown: set = set()
        self.errors: Counter = Counter()
        self.retired: list = []  # fenced producers, kept until the run ends
        self.thread = threading.Thread(target=self._run, daemon=True, name="txn-producer")

    def _new(self):
        from confluent_kafka import Producer
        self.instance += 1
        p = Producer({**QUIET, "bootstrap.servers": self.env.bootstrap, "broker.address.family": "v4",
                      "transactional.id": self.tid, "transaction.timeout.ms": 30000,
                      "message.timeout.ms": 30000, "linger.ms": 5,
                      "topic.metadata.refresh.interval.ms": 1000})
        p.init_transactions(60)
        return p

    def _run(self):
        from confluent_kafka import KafkaException
        p, tno = None, 0
        while not self.stop_flag.is_set():
            try:
                if p is None:
                    p = self._new()
            except KafkaException as e:
                self.errors[f"init {e.args[0].name()}"] += 1
                time.sleep(1)
                continue
            tno += 1
            txn = f"{self.instance}:{tno}"
            abort = tno % 4 == 0
            try:
                p.begin_transaction()
                for k in range(TXN_RECORDS):
                    p.produce(self.topic, value=f"{txn}:{k}".encode(), partition=k % PARTITIONS)
                    p.poll(0)
            except KafkaException as e:
                # Nothing of it can have been committed: abort it (or fence it by a new instance).
                self.errors[f"produce {e.args[0].name()}"] += 1
                abort = True
            except BufferError:
                abort = True
            try:
                if abort:
                    p.abort_transaction(30)
                    self.aborted.add(txn)
                else:
                    self._commit(p, txn)
            except KafkaException as e:
                err = e.args[0]
                self.errors[f"end {err.name()}"] += 1
                if err.txn_requires_abort() and not err.fatal():
                    try:
                        p.abort_transaction(30)
                        self.aborted.add(txn)
                        continue
                    except KafkaException:
                        pass
                self.unknown.add(txn)
                # A new instance fences this one (init_transactions). The old one is kept, not
                # freed: destroying a producer fenced mid-transaction can block for good
                # (TransformChain._retire).
                self.retired.append(p)
                p = None
            time.sleep(0.1)

    def _commit(self, p, txn: str) -> None:
        commit_transaction(p, self.errors)
        self.committed.add(txn)

    def start(self):
        self.thread.start()
        return self

    def finish(self):
        self.stop_flag.set()
        self.thread.join(timeout=120)


def check_transactions(env: "Env", tp: TxnProducer, timeout: float = 180) -> dict:
    """Read the transactional topic read_committed, from the start: every committed
    transaction whole and once, no record of an aborted one, an unknown one all or nothing."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition
    c = harness.consumer(env.bootstrap, **{**QUIET, "enable.partition.eof": True,
                                          "isolation.level": "read_committed"})
    seen: Counter = Counter()
    try:
        c.assign([TopicPartition(tp.topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        eof = set()
        deadline = time.monotonic() + timeout
        while len(eof) < PARTITIONS and time.monotonic() < deadline:
            for m in c.consume(num_messages=5000, timeout=0.5):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        eof.add(m.partition())
                    continue
                eof.discard(m.partition())
                seen[m.value().decode()] += 1
    finally:
        c.close()
    by_txn: Dict[str, list] = {}
    for v, n in seen.items():
        inst, tno, k = v.split(":")
        by_txn.setdefault(f"{inst}:{tno}", []).append((int(k), n))
    lost = [t for t in tp.committed if len(by_txn.get(t, [])) < TXN_RECORDS]
    duplicated = [t for t, ks in by_txn.items() if any(n > 1 for _, n in ks)]
    aborted_visible = [t for t in tp.aborted if t in by_txn]
    partial = [t for t in tp.unknown if 0 < len(by_txn.get(t, [])) < TXN_RECORDS]
    strangers = [t for t in by_txn if t not in tp.committed | tp.aborted | tp.unknown]
    return {"committed": len(tp.committed), "aborted": len(tp.aborted), "unknown": len(tp.unknown),
            "txn_lost": len(lost), "txn_duplicated": len(duplicated),
            "txn_aborted_visible": len(aborted_visible), "txn_partial": len(partial),
            "txn_never_sent": len(strangers),
            "examples": {"lost": sorted(lost)[:5], "duplicated": duplicated[:5],
                         "aborted_visible": aborted_visible[:5], "partial": partial[:5]},
            "errors": dict(tp.errors.most_common(8))}


# a chain producer call hangs when it has not returned this long after its own timeout
PRODUCER_CALL_MARGIN_S = 15.0


class ProducerHung(Exception):
    """A producer call of the chain did not return in time (reported as ``client-hung``)."""


class TransformChain:
    """Consume-transform-produce exactly once, as a Kafka Streams or librdkafka EOS application
    does it: a read_committed consumer of group G reads the guaranteed workload's topic, and
    each batch it read is produced to the output topic (``PARTITION:OFFSET`` of each input
    record, to the same partition) in a transaction that also commits G's offsets
    (send_offsets_to_transaction). After an abort the consumer goes back to G's committed
    offsets; after a fatal error a new producer instance fences the old one and a new consumer
    rejoins. Whatever the outcome of a transaction as the client saw it, its output and its
    offsets are one: every input record below G's final committed offset is in the output
    exactly once, and none at or past it (:func:`check_transform`)."""

    def __init__(self, env: "Env", in_topic: str, out_topic: str, run_id: str):
        self.env, self.in_topic, self.out_topic = env, in_topic, out_topic
        self.group = self.tid = f"faults-ctp-{run_id}"
        self.stop_flag = threading.Event()
        self.commits = 0
        self.aborts = 0
        self.errors: Counter = Counter()
        # input partition -> the offset G's last transaction that this client saw committed
        # committed (what the drain waits for)
        self.positions: Dict[int, int] = {}
        # fenced (consumer, producer) pairs, kept until the run ends (`_retire`)
        self.retired: list = []
        self.instances = 0
        self.last_commit_t: Optional[float] = None
        self.thread = threading.Thread(target=self._run, daemon=True, name="transform")

    def _new(self):
        from confluent_kafka import Producer
        self.instances += 1
        c = group_client(self.env, f"transform consumer #{self.instances}", harness.consumer_conf(
            self.env.bootstrap, **{**QUIET, "group.id": self.group, "isolation.level": "read_committed",
                                   "enable.partition.eof": False, "session.timeout.ms": 10000,
                                   **self.env.reader_conf}))
        try:
            c.subscribe([self.in_topic])
            # SLUICE_FAULTS_CHAIN_DEBUG=eos,... : librdkafka debug contexts of the chain's
            # producer, into the run's clients.stderr (to trace a chain that falls behind).
            debug = os.environ.get("SLUICE_FAULTS_CHAIN_DEBUG")
            p = Producer({**QUIET, "bootstrap.servers": self.env.bootstrap, "broker.address.family": "v4",
                          "transactional.id": self.tid, "transaction.timeout.ms": 30000,
                          "message.timeout.ms": 30000, "linger.ms": 5,
                          "topic.metadata.refresh.interval.ms": 1000,
                          **({"debug": debug, "log_level": 7} if debug else {})})
            p.init_transactions(60)
        except BaseException:
            self._close(c)
            raise
        return c, p

    def _rewind(self, c) -> None:
        """Back to G's committed offsets (what the aborted transaction read is read again)."""
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition
        parts = c.assignment()
        if not parts:
            return
        for tp in c.committed(parts, timeout=30):
            c.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else OFFSET_BEGINNING))

    def _close(self, c) -> None:
        if c is not None:
            try:
                c.close()
            except Exception:  # noqa: BLE001 - ClientGone (a hang is reported), or a consumer of a
                pass           # dead broker that failed to leave

    def _retire(self, c, p) -> None:
        """Let go of a fenced pair without waiting on it: the consumer (a child process) leaves
        its group from a thread of its own, and the producer is not freed during the run: the
        destruction of a producer fenced mid-transaction can block for good when a broker went
        away. A consumer close that hangs is reported and its process killed
        (:func:`group_client`)."""
        self.retired.append((c, p))
        if c is not None:
            threading.Thread(target=self._close, args=(c,), daemon=True,
                             name="transform-retire").start()

    def _run(self):
        from confluent_kafka import KafkaException
        c = p = None
        while not self.stop_flag.is_set():
            try:
                if p is None:
                    c, p = self._new()
            except KafkaException as e:
                self.errors[f"init {e.args[0].name()}"] += 1
                c, p = None, None
                time.sleep(1)
                continue
            except ClientGone:
                self.errors["init: consumer gone"] += 1
                c, p = None, None
                time.sleep(1)
                continue
            try:
                msgs = [m for m in c.consume(num_messages=200, timeout=0.5) if m.error() is None]
                if not msgs:
                    continue
                p.begin_transaction()
                for m in msgs:
                    p.produce(self.out_topic, value=f"{m.partition()}:{m.offset()}".encode(),
                              partition=m.partition())
                    p.poll(0)
                positions = c.position(c.assignment())
                group_metadata = c.consumer_group_metadata()
                self._bounded("send_offsets_to_transaction",
                              lambda: p.send_offsets_to_transaction(positions, group_metadata, 30), 30)
                commit_transaction(p, self.errors)
                self.commits += 1
                self.last_commit_t = round(time.monotonic() - T0, 1)
                for tp in positions:
                    if tp.offset >= 0:
                        self.positions[tp.partition] = tp.offset
            except KafkaException as e:
                err = e.args[0]
                self.errors[f"{err.name()}"] += 1
                if err.txn_requires_abort() and not err.fatal():
                    try:
                        p.abort_transaction(30)
                        self.aborts += 1
                        self._rewind(c)
                        continue
                    except KafkaException as e2:
                        self.errors[f"abort {e2.args[0].name()}"] += 1
                    except ClientGone:
                        self.errors["rewind: consumer gone"] += 1
                # A new instance fences this one; a new consumer starts from G's offsets.
                self._retire(c, p)
                c, p = None, None
            except ClientGone:
                # The consumer hung (reported) and was killed; the producer's transaction, if
                # one is open, is aborted when a new instance fences it.
                self.errors["consumer gone"] += 1
                self._retire(None, p)
                c, p = None, None
            except ProducerHung:
                # Reported; the producer is kept (its call still blocks a thread of its own)
                # and a new instance fences its transaction.
                self.errors["producer hung"] += 1
                self._retire(c, p)
                c, p = None, None
            except BufferError:
                self.errors["BufferError"] += 1
                time.sleep(0.1)
        self._close(c)


    def _bounded(self, call: str, fn, timeout: float):
        """``fn()``, a producer call with its own ``timeout``, in a thread of its own, waited for
        ``timeout`` plus :data:`PRODUCER_CALL_MARGIN_S`. librdkafka's
        ``send_offsets_to_transaction`` waits for the group coordinator's connection without
        a bound once that coordinator's broker left the metadata and came back (librdkafka
        issues 5456 and 5511): a broker that is killed and restarted leaves it blocked for
        good. A call that does not return in time is a ``client-hung`` note, and the chain goes
        on with a new instance, as an application would after restarting its producer."""
        box: dict = {}

        def run():
            try:
                box["value"] = fn()
            except BaseException as e:  # noqa: BLE001 - raised again in the caller
                box["error"] = e

        t = threading.Thread(target=run, daemon=True, name=f"transform-{call}")
        started = time.monotonic()
        t.start()
        t.join(timeout + PRODUCER_CALL_MARGIN_S)
        if t.is_alive():
            self.env.finding("client-hung", client=f"transform producer #{self.instances}", call=call,
                             waited_s=round(time.monotonic() - started), stacks="",
                             known="librdkafka issues 5456 and 5511")
            raise ProducerHung(call)
        if "error" in box:
            raise box["error"]
        return box.get("value")

    def start(self):
        self.thread.start()
        return self

    def doing(self) -> dict:
        """Where the chain's thread is now (its Python stack) and when it last committed: what a
        ``transform-behind`` finding needs to tell a client stuck in a call from a chain that
        reads nothing."""
        import traceback
        frame = sys._current_frames().get(self.thread.ident)
        stack = traceback.format_stack(frame)[-6:] if frame is not None else []
        return {"stack": [line.strip() for line in stack], "commits": self.commits,
                "last_commit_t": self.last_commit_t, "errors": dict(self.errors)}

    def drain(self, ends: Dict[int, int], timeout: float = 90) -> bool:
        """Wait until G's offsets (as committed by this client) reach ``ends``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(self.positions.get(p, -1) >= o for p, o in ends.items()):
                return True
            time.sleep(0.5)
        return False

    def finish(self):
        self.stop_flag.set()
        self.thread.join(timeout=120)


def end_offsets(env: "Env", topic: str, timeout: float = 60) -> Dict[int, int]:
    """Each partition's high watermark, retried through transient errors."""
    from confluent_kafka import KafkaException, TopicPartition
    c = harness.consumer(env.bootstrap, **QUIET)
    try:
        out: Dict[int, int] = {}
        deadline = time.monotonic() + timeout
        for p in range(PARTITIONS):
            while p not in out:
                try:
                    out[p] = c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.5)
        return out
    finally:
        c.close()


def check_transform(env: "Env", tc: TransformChain, input_offsets: Dict[int, set], timeout: float = 180) -> dict:
    """After the final crash: G's committed offsets, and the output read read_committed from
    the start. ``input_offsets``: the offsets of the input topic's records, per partition, from
    its final read."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition
    from confluent_kafka import KafkaException
    g = harness.consumer(env.bootstrap, **{**QUIET, "group.id": tc.group})
    unreadable = ""
    try:
        committed = {tp.partition: tp.offset for tp in g.committed(
            [TopicPartition(tc.in_topic, p) for p in range(PARTITIONS)], timeout=60)}
    except KafkaException as e:
        # A healed broker answers OffsetFetch within a minute; one that cannot (say, offsets of a
        # transaction whose markers were given up stay unstable) fails the check, not the run.
        committed, unreadable = {}, str(e.args[0] if e.args else e)
    finally:
        g.close()
    c = harness.consumer(env.bootstrap, **{**QUIET, "enable.partition.eof": True,
                                          "isolation.level": "read_committed"})
    seen: Counter = Counter()
    try:
        c.assign([TopicPartition(tc.out_topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        eof = set()
        deadline = time.monotonic() + timeout
        while len(eof) < PARTITIONS:
            if time.monotonic() > deadline:
                raise harness.HarnessError(f"reading {tc.out_topic}: EOF on {sorted(eof)} only after {timeout}s")
            for m in c.consume(num_messages=5000, timeout=0.5):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        eof.add(m.partition())
                    continue
                eof.discard(m.partition())
                p, o = m.value().decode().split(":")
                seen[(int(p), int(o))] += 1
    finally:
        c.close()
    below = {(p, o) for p, offs in input_offsets.items() for o in offs if o < committed.get(p, -1)}
    lost = sorted(below - set(seen))
    duplicated = sorted(k for k, n in seen.items() if n > 1)
    beyond = sorted(k for k in seen if k[1] >= committed.get(k[0], -1))
    return {"commits": tc.commits, "aborts": tc.aborts, "committed_offsets": committed,
            "input_below_committed": len(below), "output": sum(seen.values()),
            "ctp_lost": len(lost), "ctp_duplicated": len(duplicated), "ctp_past_offsets": len(beyond),
            "ctp_offsets_unreadable": int(bool(unreadable)), "offsets_error": unreadable,
            "examples": {"lost": lost[:5], "duplicated": duplicated[:5], "past_offsets": beyond[:5]},
            "errors": dict(tc.errors.most_common(8))}


# Exactly-once checks of the consume-transform-produce workload (all are violations).
CTP_CHECKS = ("ctp_lost", "ctp_duplicated", "ctp_past_offsets", "ctp_offsets_unreadable")


# Exactly-once checks of the transactional workload (all are violations).
EOS_CHECKS = ("txn_lost", "txn_duplicated", "txn_aborted_visible", "txn_partial", "txn_never_sent")


def final_read(env: Env, wl: Workload, hist: History, timeout: float = 180) -> None:
    """Every partition of ``wl`` from its start to its end (EOF), tolerating transient errors."""
    from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition
    c = harness.consumer(env.bootstrap, **{**QUIET, "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(wl.topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        records = []
        eof = set()
        deadline = time.monotonic() + timeout
        while len(eof) < PARTITIONS:
            if time.monotonic() > deadline:
                raise harness.HarnessError(f"final read of {wl.topic}: EOF on {sorted(eof)} only "
                                           f"after {timeout}s ({len(records)} records)")
            for m in c.consume(num_messages=5000, timeout=0.5):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        eof.add(m.partition())
                    else:
                        hist.consumer_errors[f"final {err.name()}"] += 1
                    continue
                eof.discard(m.partition())
                records.append((m.partition(), m.offset(), m.value().decode()))
        hist.on_final(wl.name, records)
    finally:
        c.close()


# --------------------------------------------------------------------------
# the fault schedule
# --------------------------------------------------------------------------

class Nemesis:
    def __init__(self, env: Env, rng: random.Random, kinds, quiet=(3.0, 6.0), active=(2.0, 6.0),
                 availability_s: float = AVAILABILITY_S):
        self.env, self.rng, self.kinds = env, rng, list(kinds)
        self.quiet, self.active = quiet, active
        self.availability_s = availability_s
        self.counts: Counter = Counter()
        # injections that took effect (a failed fsync that fired, an ENOSPC a write met, a
        # crash that dropped unsynced bytes); kinds without such a measure count every one
        self.effective: Counter = Counter()
        self.timeline: List[dict] = []
        self.stalls: List[dict] = []

    def _dur(self, lo=None, hi=None) -> float:
        a, b = self.active
        return self.rng.uniform(lo if lo is not None else a, hi if hi is not None else b)

    def run(self, deadline: float, producers: List[Producer]) -> None:
        order: list = []
        # until the deadline, and at least once over every kind
        while time.monotonic() < deadline or len(self.counts) < len(self.kinds):
            if not order:
                order = list(self.kinds)
                self.rng.shuffle(order)
            kind = order.pop(0)
            host = self.rng.randrange(self.env.n)
            self.env.check_alive(f"before {kind}")
            t_start = now()
            detail = getattr(self, "_" + kind.replace("-", "_"))(host)
            healed = now()
            ev = {"kind": kind, "host": host + 1, "start": round(t_start, 1), "healed": round(healed, 1)}
            ev.update(detail or {})
            self.timeline.append(ev)
            self.counts[kind] += 1
            if (detail or {}).get("effective", True):
                self.effective[kind] += 1
            log(f"fault {kind} host{host + 1} {t_start:.1f}-{healed:.1f}s {detail or ''}")
            time.sleep(self.rng.uniform(*self.quiet))
            self.env.sample_replica_reads()
            self.env.check_alive(f"after {kind}")
            self._check_available(kind, host, healed, producers)

    def _check_available(self, kind: str, host: int, healed: float, producers: List["Producer"]) -> None:
        """Every partition of a guaranteed workload acknowledges again after a fault is healed:
        those without an acknowledgement at the end of the quiet period are reported (stalls),
        and one still without after ``availability_s`` is a finding (the broker did not recover by
        itself). The next fault waits for it."""
        for pr in producers:
            if not pr.wl.guaranteed:
                continue

            def stalled():
                return [p for p in range(PARTITIONS) if pr.last_ack.get(p, -1) < healed]

            if not stalled():
                continue
            self.stalls.append({"after": kind, "host": host + 1, "healed": round(healed, 1),
                                "workload": pr.wl.name, "partitions": stalled()})
            while stalled() and now() - healed < self.availability_s:
                time.sleep(0.2)
            if stalled():
                self.env.finding("partition-unavailable", after=kind, host=host + 1,
                                 healed=round(healed, 1), workload=pr.wl.name, partitions=stalled(),
                                 seconds=self.availability_s)

    # each fault: inject, hold, heal; returns details for the timeline
    def _kill(self, h):
        b = self.env.brokers[h]
        b.kill()
        time.sleep(self._dur(0.5, 3))
        self.env.start_broker(b, "kill")

    def _pause(self, h):
        b = self.env.brokers[h]
        # in a cluster, longer than the lease half the time: the paused broker becomes a zombie
        d = self._dur(1, 2.5) if (not self.env.cluster or self.rng.random() < 0.5) else self._dur(4, 7)
        os.kill(b.pid, signal.SIGSTOP)
        self.env.paused.add(h)
        time.sleep(d)
        os.kill(b.pid, signal.SIGCONT)
        self.env.paused.discard(h)
        return {"paused_s": round(d, 1)}

    def _crash(self, h):
        b, m = self.env.brokers[h], self.env.mounts[h]
        b.kill()  # kill BEFORE the crash (tests/faultfs/README.md)
        torn = self.rng.random() < 0.5
        res = m.crash(torn=True, seed=self.rng.randrange(1 << 30)) if torn else m.crash()
        files = res.get("files", [])
        dropped = sum(f["pending"] - f["kept"] for f in files)
        time.sleep(self._dur(0.5, 2))
        self.env.start_broker(b, "crash")
        # One broker's contrast workloads always leave unsynced data, so a crash that dropped
        # none did nothing a kill does not; a cluster fsyncs every workload's data within a
        # group-commit round, and a crash between rounds rightly finds nothing to drop.
        return {"torn": torn, "files": len(files), "dropped_bytes": dropped,
                "effective": dropped > 0 or self.env.cluster}

    def _fsync_eio(self, h):
        m = self.env.mounts[h]
        match = self.rng.choice(["faults-", None])  # a data topic's files, or any file
        before = m.stats()
        m.fail_next_fsync(count=1, match=match)
        time.sleep(self._dur())
        after = m.stats()
        m.clear_faults()
        # a failed fsync fails the log until it is re-opened, which the broker does by itself
        # (docs/reliability.md): no restart
        failed = after["fsyncs_failed_injected"] - before.get("fsyncs_failed_injected", 0)
        return {"match": match, "failed_fsyncs": failed, "effective": failed > 0,
                "dropped_bytes": after["bytes_dropped"] - before.get("bytes_dropped", 0)}

    def _unmount(self, h):
        # the host's mount of the volume goes away under the running broker (its file system
        # process ends, unsynced writes with it; an NFS export unmounted): the broker sees the
        # bare mount point until it is mounted again, and must serve nothing less meanwhile
        from faultfs import mount_faultfs
        m = self.env.mounts[h]
        before = m.stats()
        m.stop_timeout = 1.0  # busy (the broker's open files): unmounted lazily after 1 s
        m.stop()
        d = self._dur()
        time.sleep(d)
        self.env.mounts[h] = mount_faultfs(m.backing, m.mountpoint, log_path=m.log_path,
                                           metadata=self.env.metadata)
        return {"away_s": round(d, 1), "unsynced_bytes": before.get("pending_bytes", 0)}

    def _enospc(self, h):
        m = self.env.mounts[h]
        before = m.stats()
        m.enospc(True)
        time.sleep(self._dur())
        m.enospc(False)
        hits = m.stats()["enospc_injected"] - before.get("enospc_injected", 0)
        return {"enospc_hits": hits, "effective": hits > 0}

    def _disk_full(self, h):
        # the shared volume itself fills up: every host sees it (on NFS: the export is full)
        size = self.env.volume.fill()
        time.sleep(self._dur())
        self.env.volume.free()
        return {"ballast_mb": size >> 20}

    def _etcd_stop(self, h):
        e = self.env.etcd
        e.stop()
        time.sleep(self._dur(2, 6))
        e.start()

    def _etcd_cutoff(self, h):
        d = self._dur(LEASE_MS / 1000 + 1, LEASE_MS / 1000 + 4)
        # Half the time the broker cut off is the one coordinating the group (its clients
        # still reach it): a deposed coordinator must write nothing and answer nothing.
        aimed = False
        if self.env.group_id and self.rng.random() < 0.5:
            from cluster_support import coordinator_of
            try:
                node = coordinator_of(self.env.bootstrap, self.env.group_id)
            except Exception:  # noqa: BLE001 - unknown now: the host drawn stays
                node = -1
            if 1 <= node <= self.env.n:
                h, aimed = node - 1, True
        self.env.proxies[h].blackhole(True)
        time.sleep(d)
        self.env.proxies[h].blackhole(False)
        return {"cut_s": round(d, 1), "coordinator": aimed, "host_cut": h + 1}

    def _lagging_view(self, h):
        """Host h's view of the volume lags: its faultfs mount caches names (also negative
        lookups), sizes and listings for N ms (an NFS client's attribute and dentry caches,
        close-to-open kept) and re-caches the whole volume every N ms (as if something walked
        it), so it sees the volume as it was up to N ms before. Meanwhile both other brokers
        go, one after the other: the first is killed, or paused past the lease and then let
        run again (a zombie: a write it had passed the write gate with lands in the segment
        the second sealed), so that the second acquires some of its partitions and starts new
        segments h does not see; then the second is killed, paused past the lease, or cut off
        from etcd, so that h, alone, acquires everything, its view stale. Then both come back and the cache is turned off. Took effect: h's cache
        answered lookups or listings in the window; the detail says how many answers hid
        another host's change, and which of h's acquisitions met one."""
        env = self.env
        m, b = env.mounts[h], env.brokers[h]
        x1, x2 = self.rng.sample([i for i in range(env.n) if i != h], 2)
        lag_ms = round(self.rng.uniform(*LAG_VIEW_MS))
        first = self.rng.choice(["kill", "pause"])
        second = self.rng.choice(["kill", "pause", "cutoff"])
        st0 = m.stats()
        seq0, before = st0.get("cache_seq", 0), st0.get("cache", {})
        t_start = time.time()
        stop = threading.Event()
        primes = [m.attr_cache(lag_ms, prime=True)["primed"]]

        def reprime():
            while not stop.wait(lag_ms / 1000):
                try:
                    primes.append(m.attr_cache(lag_ms, prime=True)["primed"])
                except Exception:  # noqa: BLE001 - the next one, or the end of the window
                    pass
        th = threading.Thread(target=reprime, daemon=True, name="lagging-view-prime")
        th.start()
        x1b, x2b = env.brokers[x1], env.brokers[x2]
        try:
            if first == "kill":
                x1b.kill()
            else:
                os.kill(x1b.pid, signal.SIGSTOP)
                env.paused.add(x1)
            # x1's partitions move to h and to x2, whose new segments h does not see
            time.sleep(LEASE_MS / 1000 + self._dur(1.5, 3))
            if first == "pause":
                os.kill(x1b.pid, signal.SIGCONT)  # a zombie now: what it had under way lands
                env.paused.discard(x1)
                time.sleep(self._dur(0.3, 1))
            if second == "kill":
                x2b.kill()
            elif second == "pause":
                os.kill(x2b.pid, signal.SIGSTOP)
                env.paused.add(x2)
            else:
                env.proxies[x2].blackhole(True)
            # h alone: it acquires every partition, x2's new ones among them
            time.sleep(LEASE_MS / 1000 + self._dur(2, 4))
        finally:
            if second == "kill":
                env.start_broker(x2b, "lagging-view")
            elif second == "pause":
                os.kill(x2b.pid, signal.SIGCONT)
                env.paused.discard(x2)
            else:
                env.proxies[x2].blackhole(False)
            if first == "kill":
                env.start_broker(x1b, "lagging-view")
            elif x1 in env.paused:  # interrupted while it was paused
                os.kill(x1b.pid, signal.SIGCONT)
                env.paused.discard(x1)
            stop.set()
            th.join(timeout=10)
            m.attr_cache(0)
        t_end = time.time()
        after = m.stats().get("cache", {})
        delta = {k: after.get(k, 0) - before.get(k, 0) for k in CACHE_SERVED + CACHE_HID + ("cto_refreshed",)}
        events = m.cache_events(seq0)
        acquired = acquisitions(b, t_start, t_end)
        hidden_at = []
        for a in acquired:
            evs = [e for e in events if (e["path"] + "/").startswith(f"/{a['dir']}/")
                   and a["t0"] - 0.05 <= e["t"] <= a["t1"] + 0.05]
            if evs:
                hidden_at.append({
                    "tp": a["dir"], "epoch": a["epoch"], "log_end": a["log_end"],
                    "kinds": dict(Counter(e["kind"] for e in evs)),
                    # what the acquisition did not see: names missing from its listings,
                    # names listed but gone, names it opened gone (ESTALE), stale sizes
                    "unlisted": sorted({n for e in evs for n in e.get("hidden", ())}),
                    "listed_gone": sorted({n for e in evs for n in e.get("gone", ())}),
                    "estale": sorted({e["path"] for e in evs if e["kind"] == "open_estale"}),
                    "stale_sizes": sorted({(e["path"], e["cached_size"], e["size"]) for e in evs
                                           if e["kind"] == "attrs_stale"})[:6]})
        served = sum(delta[k] for k in CACHE_SERVED)
        problems = [line for line in b.log_text().splitlines()
                    if (" WARN " in line or " ERROR " in line) and t_start <= _log_time(line) <= t_end + 1]
        # every name an open found gone in the window (O_CREAT then made it anew, empty)
        estale = sorted({e["path"] for e in events if e["kind"] == "open_estale"})
        return {"lag_ms": lag_ms, "down": [x1 + 1, x2 + 1], "first": first, "second": second,
                "primes": len(primes),
                "estale": estale[:20],
                "cache": delta, "hid": sum(delta[k] for k in CACHE_HID),
                "acquired": len(acquired), "acquired_while_hidden": len(hidden_at),
                "hidden_at_acquisition": hidden_at[:12], "broker_warnings": problems[:15],
                "effective": served > 0}


def _log_time(line: str) -> float:
    """The wall-clock time of a broker log line (tracing's RFC 3339 UTC stamp), or 0."""
    import datetime
    try:
        ts = line.split(None, 1)[0].rstrip("Z")
        return datetime.datetime.strptime(ts[:26], "%Y-%m-%dT%H:%M:%S.%f").replace(
            tzinfo=datetime.timezone.utc).timestamp()
    except (ValueError, IndexError):
        return 0.0


def acquisitions(b, t0: float, t1: float) -> List[dict]:
    """The partitions broker ``b`` acquired between wall-clock times t0 and t1 (its log's
    ``acquired partition`` lines): directory name, epoch, log end, and when the acquisition
    ran (``t0``-``t1``)."""
    import re
    pat = re.compile(r'acquired partition tp=TopicPartition \{ topic: "([^"]+)", partition: (\d+) \} '
                     r'epoch=(\d+) log_end=(-?\d+) millis=(\d+)')
    out = []
    for line in b.log_text().splitlines():
        mt = pat.search(line)
        if not mt:
            continue
        t = _log_time(line)
        if t0 <= t <= t1:
            out.append({"dir": f"{mt.group(1)}-{mt.group(2)}", "epoch": int(mt.group(3)),
                        "log_end": int(mt.group(4)), "t0": t - int(mt.group(5)) / 1000, "t1": t})
    return out


# --------------------------------------------------------------------------
# one run
# --------------------------------------------------------------------------

def run(seconds: float, brokers: int = 1, seed: int = 1, workdir: Optional[Path] = None, rate: float = 150,
        quiet=(3.0, 6.0), active=(2.0, 6.0), regroup_s: float = 20.0, kinds=None,
        availability_s: float = AVAILABILITY_S, broker_config: Optional[Dict[str, str]] = None) -> dict:
    """Start the system, run the workload for ``seconds`` of faults, heal, drain, check."""
    global T0
    T0 = time.monotonic()
    raise_fd_limit()
    rng = random.Random(seed)
    own_workdir = workdir is None
    workdir = Path(workdir or tempfile.mkdtemp(prefix=f"sluice-faults-{brokers}b-{seed}-"))
    workdir.mkdir(parents=True, exist_ok=True)
    run_id = f"{seed}"
    env = None
    result: dict = {"brokers": brokers, "seed": seed, "seconds": seconds, "workdir": str(workdir),
                    "binary": binary_stamp(), "git_head": git_head()}
    # What the client library writes to fd 2 (librdkafka's assertion text before an abort) is
    # kept in the workdir: pytest's capture file of a worker that died with it is lost.
    saved_stderr = os.dup(2)
    clients_stderr = os.open(workdir / "clients.stderr", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(clients_stderr, 2)
    try:
        env = Env(workdir, brokers, seed, broker_config)
        wls = workloads_for(env.cluster, run_id, rate)
        for w in wls:
            harness.create_topic(env.bootstrap, w.topic, partitions=PARTITIONS, config=w.topic_config, timeout=60)
        txn_topic = f"faults-txn-{run_id}"
        harness.create_topic(env.bootstrap, txn_topic, partitions=PARTITIONS,
                             config={} if env.cluster else {"flush.messages": "1"}, timeout=60)
        hist = History([w.name for w in wls])
        producers = [Producer(env, w, hist).start() for w in wls]
        live = LiveConsumer(env, wls, hist).start()
        txns = TxnProducer(env, txn_topic, run_id).start()
        guaranteed = next(w for w in wls if w.guaranteed)
        ctp_topic = f"faults-ctp-{run_id}"
        harness.create_topic(env.bootstrap, ctp_topic, partitions=PARTITIONS,
                             config={} if env.cluster else {"flush.messages": "1"}, timeout=60)
        transform = TransformChain(env, guaranteed.topic, ctp_topic, run_id).start()
        env.group_id = f"faults-group-{run_id}"
        group = GroupConsumer(env, guaranteed, hist, env.group_id, regroup_s).start()
        time.sleep(3)  # a quiet start
        kinds = [k for k in kinds or (CLUSTER_FAULTS if env.cluster else SINGLE_FAULTS) if k not in env.unavailable]
        result["unavailable"] = env.unavailable
        nemesis = Nemesis(env, rng, kinds, quiet, active, availability_s)
        log(f"faults for {seconds:.0f}s against {brokers} broker(s), seed {seed}, workdir {workdir}")
        nemesis.run(time.monotonic() + seconds, producers)
        env.sample_replica_reads()
        log("healing")
        env.heal()
        harness.wait_until(lambda: all(harness.topic_partitions(env.bootstrap, w.topic) and all(
            x.leader >= 0 for x in harness.topic_partitions(env.bootstrap, w.topic).values()) for w in wls),
            90, "every partition led")
        time.sleep(3)
        unacked = {}
        for pr in producers:
            unacked[pr.wl.name] = pr.finish(90)
        txns.finish()
        live.finish()
        ends = end_offsets(env, guaranteed.topic)
        if not transform.drain(ends):
            env.finding("transform-behind", positions=dict(transform.positions), ends=ends,
                        **transform.doing())
        transform.finish()
        # Every host crashes before the final read (what was not fsynced is dropped), so that
        # what was acknowledged is read from storage, not from faultfs's unsynced overlay.
        result["final_crash_dropped_bytes"] = env.crash_all()
        harness.wait_until(lambda: all(harness.topic_partitions(env.bootstrap, w.topic) and all(
            x.leader >= 0 for x in harness.topic_partitions(env.bootstrap, w.topic).values()) for w in wls),
            90, "every partition led after the final crash")
        for w in wls:
            final_read(env, w, hist)
        result["transactions"] = check_transactions(env, txns)
        input_offsets: Dict[int, set] = {}
        for (p, o) in hist.final[guaranteed.name]:
            input_offsets.setdefault(p, set()).add(o)
        result["transform"] = check_transform(env, transform, input_offsets)
        last = {}
        for (p, o) in hist.final[guaranteed.name]:
            last[p] = max(last.get(p, -1), o)
        try:
            harness.wait_until(lambda: all(group.max_offset.get(p, -1) >= o for p, o in last.items()), 90,
                               "the group consumer to reach the end of every partition")
        except harness.HarnessError as e:
            env.finding("group-consumer-behind", detail=str(e), max_offset=dict(group.max_offset), ends=last)
        group.finish()
        result.update({
            "faults": dict(nemesis.counts),
            "effective": dict(nemesis.effective),
            "timeline": nemesis.timeline,
            "stalls": nemesis.stalls,
            "workloads": {w.name: dict(hist.check(w.name), guaranteed=w.guaranteed, topic=w.topic,
                                       unacked_at_end=unacked[w.name]) for w in wls},
            "producer_fatal": hist.producer_fatal,
            "consumer_errors": dict(hist.consumer_errors),
            "group_generations": group.generations,
            "findings": env.findings,
            "read_replica_bytes": env.replica_bytes_served() if env.cluster else None,
            "broker_logs": [str(b.log_file) for b in env.brokers],
        })
        result["violations"] = violations(result)
        return result
    finally:
        os.dup2(saved_stderr, 2)
        os.close(saved_stderr)
        os.close(clients_stderr)
        kill_child_consumers()  # any still running (a run that ended early)
        if env is not None:
            for b in env.brokers:
                # keep the errors and warnings of each broker in the result
                result.setdefault("broker_log_errors", {})[b.name] = [
                    line for line in b.log_text().splitlines() if " ERROR " in line or " WARN " in line][-40:]
            env.close(keep_data=bool(result.get("violations"))
                      or os.environ.get("SLUICE_FAULTS_KEEP", "0") != "0")
        result["elapsed_s"] = round(time.monotonic() - T0, 1)
        if binary_stamp() != result["binary"]:
            result["binary_at_end"] = binary_stamp()  # rebuilt during the run: restarts used both
        if own_workdir and not result.get("violations") and os.environ.get("SLUICE_FAULTS_KEEP", "0") == "0":
            shutil.rmtree(workdir / "disk", ignore_errors=True)  # (on the loop volume: gone with it)


def binary_stamp() -> str:
    try:
        st = harness.SLUICE_BIN.stat()
        return f"{harness.SLUICE_BIN} built {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(st.st_mtime))} UTC"
    except OSError:
        return f"{harness.SLUICE_BIN} missing"


def git_head() -> str:
    import subprocess
    try:
        return subprocess.run(["git", "-C", str(harness.REPO_ROOT), "log", "-1", "--format=%h %cI"],
                              capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "?"


def violations(result: dict) -> Dict[str, int]:
    """The checks a guaranteed workload must pass, with their counts (non-zero: a violation)."""
    out = {}
    for name, r in result["workloads"].items():
        if r["guaranteed"]:
            for c in CHECKS:
                if r[c]:
                    out[f"{name}.{c}"] = r[c]
            if not r["acked"]:
                out[f"{name}.nothing_acknowledged"] = 1
    eos = result.get("transactions")
    if eos is not None:
        for c in EOS_CHECKS:
            if eos[c]:
                out[f"transactions.{c}"] = eos[c]
        if not eos["committed"]:
            out["transactions.nothing_committed"] = 1
    ctp = result.get("transform")
    if ctp is not None:
        for c in CTP_CHECKS:
            if ctp[c]:
                out[f"transform.{c}"] = ctp[c]
        if not ctp["commits"] or not ctp["input_below_committed"]:
            out["transform.nothing_committed"] = 1
    for kind, n in Counter(f["kind"] for f in result.get("findings", [])).items():
        if kind in VIOLATING_FINDINGS:
            out[kind] = n
    # The observing consumers read through broker 2 (READER_RACK): a cluster run in which it
    # served nothing as a read replica did not test read replicas at all.
    served = result.get("read_replica_bytes")
    if served is not None and not served.get("2"):
        out["read_replicas_unused"] = 1
    if result.get("unavailable"):
        out["fault_kinds_not_injected"] = len(result["unavailable"])
    without_effect = [k for k in result.get("faults", {}) if not result.get("effective", {}).get(k)]
    if without_effect:
        out["fault_kinds_without_effect"] = len(without_effect)
    return out


def table(result: dict) -> str:
    lines = [f"fault run: {result['brokers']} broker(s), seed {result['seed']}, "
             f"{result['seconds'] / 60:.1f} min of faults, {result.get('elapsed_s', 0):.0f} s in all",
             f"binary: {result.get('binary')}" + (f"; rebuilt during the run: {result['binary_at_end']}"
                                                  if result.get("binary_at_end") else "")
             + f"; git HEAD at the start {result.get('git_head')}"]
    lines.append("")
    lines.append("| fault | injected | took effect |")
    lines.append("| --- | ---: | ---: |")
    for k, v in sorted(result.get("faults", {}).items()):
        lines.append(f"| {k} | {v} | {result.get('effective', {}).get(k, 0)} |")
    lines.append(f"| total | {sum(result.get('faults', {}).values())} |")
    lines.append("")
    cols = ["sent", "acked", "failed", "unacked_at_end", "lost", "duplicated", "reordered",
            "inconsistent_offsets", "vanished", "vanished_acked", "group_missed", "uncounted",
            "group_offset_regressed"]
    heads = ["sent", "acked", "failed", "unacked", "lost", "dup", "reordered", "offset reused",
             "vanished", "of them acked", "group missed", "uncounted", "group started below its commit"]
    lines.append("| workload | " + " | ".join(heads) + " |")
    lines.append("| --- |" + " ---: |" * len(heads))
    for name, r in result.get("workloads", {}).items():
        label = name + (" (guaranteed)" if r["guaranteed"] else "")
        cells = []
        for c in cols:
            v = r.get(c, "")
            if c == "group_missed" and not r.get("group_read"):
                v = "-"
            cells.append(str(v))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    if result.get("unavailable"):
        lines.append(f"faults not injected (unavailable here): {result['unavailable']}")
    eos = result.get("transactions")
    if eos:
        lines.append("transactions (read_committed): " + ", ".join(
            f"{k} {eos[k]}" for k in ("committed", "aborted", "unknown", *EOS_CHECKS)))
    ctp = result.get("transform")
    if ctp:
        lines.append("consume-transform-produce (read_committed): " + ", ".join(
            f"{k} {ctp[k]}" for k in ("commits", "aborts", "input_below_committed", "output", *CTP_CHECKS)))
    if result.get("read_replica_bytes") is not None:
        lines.append("bytes served as a read replica, by broker: " + ", ".join(
            f"{b}: {int(v)}" for b, v in sorted(result["read_replica_bytes"].items())))
    lines.append(f"violations of the guarantees: {result.get('violations') or 'none'}")
    if result.get("producer_fatal"):
        lines.append(f"fatal producer errors: {len(result['producer_fatal'])}: {result['producer_fatal'][:3]}")
    if result.get("stalls"):
        lines.append(f"partitions with no acknowledgement in the quiet period after a fault: {len(result['stalls'])}")
    if result.get("findings"):
        lines.append(f"harness findings: {Counter(f['kind'] for f in result['findings'])}")
    for f in result.get("findings", []):
        if f["kind"] == "client-hung":
            if f.get("known"):
                lines.append(f"note: {f['client']}: {f['call']}() did not return in {f['waited_s']} s "
                             f"(at {f['t']} s; {f['known']}); a new instance replaced it")
                continue
            lines.append(f"note: {f['client']}: {f['call']}() did not return in {f['waited_s']} s "
                         f"(at {f['t']} s), its process was killed; stacks: {f['stacks']}"
                         + (f", librdkafka frames: {' '.join(f['c_frames'])}" if f.get("c_frames") else ""))
    return "\n".join(lines)


# --------------------------------------------------------------------------
# self-test: deliberately broken brokers that the suite must catch
# --------------------------------------------------------------------------

# Violations that say the harness could not do its job, not that the broker broke a guarantee:
# a variant caught only by these was not caught.
HARNESS_HEALTH = ("fault_kinds_not_injected", "fault_kinds_without_effect", "read_replicas_unused")

# Each broken variant (crates/store/src/mutation.rs) and the check that must catch it: a short
# fault run (which must report a violation), or an integration test file (which must fail).
SELF_TEST = (
    ("skip-fsync", {"faults": {"brokers": 1, "kinds": ["crash"], "seconds": 25}}),
    ("skip-dir-fsync", {"faults": {"brokers": 1, "kinds": ["crash"], "seconds": 25}}),
    ("exit-on-enospc", {"faults": {"brokers": 1, "kinds": ["enospc"], "seconds": 15}}),
    ("no-reopen", {"faults": {"brokers": 1, "kinds": ["fsync-eio"], "seconds": 15}}),
    ("open-gate", {"pytest": "test_cluster_fencing.py"}),
    ("forget-commit-marker", {"faults": {"brokers": 1, "kinds": ["kill"], "seconds": 15}}),
    ("unsynced-offsets-marker",
     {"pytest": "test_transactions.py::test_a_committed_transactions_offsets_survive_a_host_crash"}),
    ("unsynced-share-state",
     {"pytest": "test_share_groups.py::test_accepted_records_survive_a_host_crash"}),
)


def self_test(mutations_bin: Path, workdir: Path, seed: int = 1, only: Optional[str] = None) -> List[dict]:
    """Run each broken variant of SELF_TEST (or the one named ``only``) against its check; one
    row per variant: ``{"variant", "caught_by"}`` (empty: not caught)."""
    import subprocess
    rows = []
    saved_bin, saved_env = harness.SLUICE_BIN, os.environ.get("SLUICE_MUTATION")
    try:
        harness.SLUICE_BIN = Path(mutations_bin)
        for variant, how in SELF_TEST:
            if only is not None and variant != only:
                continue
            os.environ["SLUICE_MUTATION"] = variant
            caught: List[str] = []
            if "faults" in how:
                f = how["faults"]
                res = run(f["seconds"], brokers=f["brokers"], seed=seed, workdir=workdir / variant, rate=100,
                          quiet=(2.0, 3.0), active=(1.5, 3.0), regroup_s=10, kinds=f["kinds"],
                          availability_s=20)
                caught = [k for k in res.get("violations", {}) if k not in HARNESS_HEALTH]
            else:
                env = {**os.environ, "SLUICE_BIN": str(mutations_bin)}
                r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                                    str(HERE / how["pytest"])], cwd=HERE, env=env, capture_output=True,
                                   text=True, timeout=900)
                # Caught only by an assertion of the test, not by the harness failing to run it.
                first = next((l for l in r.stdout.splitlines() if l.startswith("E ")), "")
                if r.returncode == 1 and "AssertionError" in first:
                    caught = [f"{how['pytest']}: {first[1:].strip()[:200]}"]
            log(f"self-test {variant}: {'caught by ' + ', '.join(caught) if caught else 'NOT CAUGHT'}")
            rows.append({"variant": variant, "caught_by": caught})
    finally:
        harness.SLUICE_BIN = saved_bin
        if saved_env is None:
            os.environ.pop("SLUICE_MUTATION", None)
        else:
            os.environ["SLUICE_MUTATION"] = saved_env
    return rows


def raise_fd_limit() -> None:
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, help="minutes of faults")
    ap.add_argument("--self-test", metavar="BIN", type=Path, default=None,
                    help="run each deliberately broken variant (a binary built with --features "
                         "sluice/mutations) against the check that must catch it; exit 0 only if "
                         "every one is caught")
    ap.add_argument("--brokers", type=int, choices=(1, 3), default=1)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--rate", type=float, default=150, help="records/s per workload")
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None, help="write the full result here")
    ap.add_argument("--kinds", default=None,
                    help="comma-separated fault kinds (default: every kind of the mode; one broker: "
                         f"{','.join(SINGLE_FAULTS)}; a cluster adds "
                         f"{','.join(k for k in CLUSTER_FAULTS if k not in SINGLE_FAULTS)})")
    ap.add_argument("--broker-config", action="append", default=[], metavar="KEY=VALUE",
                    help="a broker property for every broker (repeatable), e.g. "
                         "sluice.cluster.death.probe.enable=true")
    args = ap.parse_args(argv)
    broker_config = {}
    for kv in args.broker_config:
        key, sep, value = kv.partition("=")
        if not sep or not key:
            ap.error(f"--broker-config wants KEY=VALUE, not {kv!r}")
        broker_config[key] = value
    seed = args.seed if args.seed is not None else random.randrange(1 << 20)
    if args.self_test is not None:
        workdir = args.workdir or Path(tempfile.mkdtemp(prefix="sluice-faults-self-test-"))
        rows = self_test(args.self_test, workdir, seed=args.seed or 1)
        print("| broken variant | caught by |")
        print("| --- | --- |")
        for r in rows:
            print(f"| {r['variant']} | {', '.join(r['caught_by']) or 'NOT CAUGHT'} |")
        return 0 if all(r["caught_by"] for r in rows) else 1
    if args.minutes is None:
        ap.error("--minutes is required (or --self-test BIN)")

    def on_term(*_):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    kinds = args.kinds.split(",") if args.kinds else None
    unknown = sorted(set(kinds or ()) - set(CLUSTER_FAULTS if args.brokers > 1 else SINGLE_FAULTS))
    if unknown:
        ap.error(f"unknown fault kinds for {args.brokers} broker(s): {','.join(unknown)}")
    res = run(args.minutes * 60, brokers=args.brokers, seed=seed, workdir=args.workdir, rate=args.rate,
              kinds=kinds, broker_config=broker_config)
    out = args.json or Path(res["workdir"]) / "result.json"
    out.write_text(json.dumps(res, indent=1, default=str))
    print(table(res))
    print(f"\nfull result (examples, timeline, broker errors): {out}")
    extra = "".join(f" --broker-config {kv}" for kv in args.broker_config)
    print(f"reproduce: scripts/faults --minutes {args.minutes:g} --brokers {args.brokers} --seed {seed}{extra}")
    return 1 if res.get("violations") else 0


if __name__ == "__main__":
    sys.exit(main())

"""A real etcd server and Sluice brokers in cluster mode sharing one log directory.

`EtcdServer` runs Debian's etcd on free 127.0.0.1 ports in a directory of the test, plain or over
TLS (and with its authentication enabled, `enable_auth`), and can be stopped and started again
on the same data. `start_cluster` starts N Sluice brokers with
`sluice.cluster.etcd.endpoints` pointing at it, each with its own node id and listener, all on
the same `log.dirs`.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Optional

import harness

ETCD_BIN = shutil.which("etcd") or "/usr/bin/etcd"


class EtcdServer:
    """``tls``: ``{"cert": .., "key": .., "ca": .., "client_cert_auth": bool}`` serves the client
    port over TLS (etcd's --cert-file, --key-file; with client_cert_auth, --trusted-ca-file
    ``ca`` and --client-cert-auth);
    ``client``: the PEM files (``ca``, and ``cert``/``key`` for --client-cert-auth) this
    harness talks to it with. ``args``: more etcd flags."""

    def __init__(self, work_dir: Path, tls: Optional[dict] = None, client: Optional[dict] = None,
                 args: tuple = ()):
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.client_port = harness.free_port()
        self.peer_port = harness.free_port()
        while self.peer_port == self.client_port:
            self.peer_port = harness.free_port()
        self.endpoint = f"127.0.0.1:{self.client_port}"
        self.tls, self.client, self.args = tls, client or {}, tuple(args)
        self.url = f"{'https' if tls else 'http'}://{self.endpoint}"
        self.token: Optional[str] = None
        self.root_password: Optional[str] = None
        self.log_file = self.work_dir / "etcd.log"
        self.proc: Optional[subprocess.Popen] = None

    def start(self, timeout: float = 30) -> "EtcdServer":
        peer = f"http://127.0.0.1:{self.peer_port}"
        cmd = [
            ETCD_BIN,
            "--name", "sluice-test",
            "--data-dir", str(self.work_dir / "data"),
            "--listen-client-urls", self.url,
            "--advertise-client-urls", self.url,
            "--listen-peer-urls", peer,
            "--initial-advertise-peer-urls", peer,
            "--initial-cluster", f"sluice-test={peer}",
        ]
        if self.tls:
            cmd += ["--cert-file", str(self.tls["cert"]), "--key-file", str(self.tls["key"])]
            if self.tls.get("client_cert_auth"):
                # (a --trusted-ca-file alone turns client certificate checks on too)
                cmd += ["--trusted-ca-file", str(self.tls["ca"]), "--client-cert-auth"]
        cmd += list(self.args)
        log = open(self.log_file, "ab")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        log.close()

        def healthy():
            if self.proc.poll() is not None:
                raise harness.HarnessError(f"etcd exited: {harness.tail(self.log_file, 30)}")
            import urllib.request
            with urllib.request.urlopen(f"{self.url}/health", timeout=1, context=self._ssl()) as r:
                return b"true" in r.read()

        harness.wait_until(healthy, timeout, "etcd to become healthy")
        return self

    @property
    def endpoints_property(self) -> str:
        """``sluice.cluster.etcd.endpoints``: ``host:port`` for a plain etcd, its URL for TLS."""
        return self.url if self.tls else self.endpoint

    def _ssl(self):
        if not self.tls:
            return None
        import ssl
        ctx = ssl.create_default_context(cafile=str(self.client["ca"]))
        if self.client.get("cert"):
            ctx.load_cert_chain(str(self.client["cert"]), str(self.client["key"]))
        return ctx

    def call(self, path: str, body: dict) -> dict:
        """POST ``body`` to etcd's JSON gateway (as root, once authentication is enabled; an
        expired token is renewed)."""
        import json
        import urllib.error
        import urllib.request

        def post():
            headers = {"Content-Type": "application/json"}
            if self.token:
                headers["Authorization"] = self.token
            req = urllib.request.Request(f"{self.url}{path}", data=json.dumps(body).encode(), headers=headers)
            with urllib.request.urlopen(req, timeout=5, context=self._ssl()) as r:
                return json.loads(r.read())

        try:
            return post()
        except urllib.error.HTTPError as e:
            if e.code != 401 or self.root_password is None:
                raise
        self.token = None
        self.token = self.call("/v3/auth/authenticate", {"name": "root", "password": self.root_password})["token"]
        return post()

    def enable_auth(self, root_password: str, users: dict) -> None:
        """etcd's authentication, as `etcdctl user add`, `role add`, `role grant-permission
        --prefix`, `user grant-role` and `auth enable` set it up: a root user, and for each
        ``users`` entry ``name: (password, prefix)`` a user whose role may read and write the
        keys under ``prefix``. The harness then talks to etcd as root."""
        import base64

        def b64(b: bytes) -> str:
            return base64.b64encode(b).decode()

        self.call("/v3/auth/user/add", {"name": "root", "password": root_password})
        self.call("/v3/auth/user/grant", {"user": "root", "role": "root"})
        for name, (password, prefix) in users.items():
            role = f"{name}-role"
            start = prefix.encode()
            self.call("/v3/auth/role/add", {"name": role})
            self.call("/v3/auth/role/grant", {"name": role, "perm": {
                "permType": "READWRITE", "key": b64(start), "range_end": b64(start[:-1] + bytes([start[-1] + 1]))}})
            self.call("/v3/auth/user/add", {"name": name, "password": password})
            self.call("/v3/auth/user/grant", {"user": name, "role": role})
        self.call("/v3/auth/enable", {})
        self.root_password = root_password
        self.token = self.call("/v3/auth/authenticate", {"name": "root", "password": root_password})["token"]

    def keys(self, prefix: str) -> list:
        """The keys under ``prefix`` (etcd's JSON gateway, a linearizable range read)."""
        import base64

        def b64(b: bytes) -> str:
            return base64.b64encode(b).decode()

        start = prefix.encode()
        end = start[:-1] + bytes([start[-1] + 1])
        kvs = self.call("/v3/kv/range", {"key": b64(start), "range_end": b64(end), "keys_only": True}).get("kvs", [])
        return [base64.b64decode(kv["key"]).decode() for kv in kvs]

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=20)
        self.proc = None

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=20)
            self.proc = None


def cluster_overrides(etcd: EtcdServer, node_id: int, log_dir: Path, prefix: str, **extra) -> dict:
    props = {
        "node.id": node_id,
        "log.dirs": str(log_dir),
        "sluice.cluster.etcd.endpoints": etcd.endpoints_property,
        "sluice.cluster.etcd.prefix": prefix,
        # Short enough that a failover fits a test, long enough for a loaded 2-core machine.
        "sluice.cluster.lease.ms": 3000,
        "sluice.cluster.poll.ms": 100,
        "group.initial.rebalance.delay.ms": 0,
    }
    props.update(extra)
    return props


def start_cluster(broker_factory, etcd: EtcdServer, log_dir, n: int = 3, prefix: str = "/sluice-test",
                  **extra) -> list:
    """``n`` brokers; ``log_dir`` is the shared directory, or a function of the node id giving
    each broker's path to it (its own mount of the shared volume)."""
    dir_of = log_dir if callable(log_dir) else (lambda _node: log_dir)
    brokers = []
    for node in range(1, n + 1):
        brokers.append(broker_factory(
            overrides=cluster_overrides(etcd, node, dir_of(node), prefix, **extra),
            log_dir=dir_of(node), kind="sluice", name=f"node{node}",
        ))
    bootstrap = bootstrap_of(brokers)
    harness.wait_until(lambda: len(live_brokers(bootstrap)) == n, 30, f"{n} brokers in the cluster's metadata")
    return brokers


def bootstrap_of(brokers) -> str:
    return ",".join(b.bootstrap for b in brokers if b.running)


def live_brokers(bootstrap: str) -> list:
    md = harness.admin(bootstrap).list_topics(timeout=10)
    return sorted(md.brokers)


def leaders(bootstrap: str, topic: str) -> dict:
    """partition -> leader id, from the metadata of any live broker (-1: none)."""
    parts = harness.topic_partitions(bootstrap, topic)
    if parts is None:
        return {}
    return {p: m.leader for p, m in parts.items()}


DESCRIBE_LINE = re.compile(
    r"Topic:\s*(\S+)\s+Partition:\s*(\d+)\s+Leader:\s*(-?\d+)\s+Replicas:\s*([\d,]*)\s+Isr:\s*([\d,]*)")


def describe_partitions(kafka_tool, bootstrap: str, topic: str) -> dict:
    """`kafka-topics --describe`: partition -> (leader, replicas, isr)."""
    res = kafka_tool(harness.TOPIC_COMMAND, "--bootstrap-server", bootstrap, "--describe", "--topic", topic).check()
    out = {}
    for m in DESCRIBE_LINE.finditer(res.out):
        out[int(m.group(2))] = (int(m.group(3)), m.group(4), m.group(5))
    return out


def wait_all_led(bootstrap: str, topic: str, partitions: int, exclude=(), timeout: float = 30) -> dict:
    def ok():
        ls = leaders(bootstrap, topic)
        if len(ls) == partitions and all(l >= 0 and l not in exclude for l in ls.values()):
            return ls
        return None

    return harness.wait_until(ok, timeout, f"every partition of {topic} led by a live broker")


class KafkaNode(harness.KafkaBroker):
    """One combined broker+controller of a three-node static KRaft quorum of Apache Kafka (for
    the side-by-side cluster benchmarks). ``voters``: ``1@host:port,2@...``."""

    heap = os.environ.get("KAFKA_HEAP", "1g")

    def __init__(self, work_dir: Path, node_id: int, voters: str, cluster_id: str, controller_port: int):
        super().__init__(work_dir, log_dir=Path(work_dir) / "data", name=f"kafka{node_id}")
        self.node_id, self.voters, self.cluster_id = node_id, voters, cluster_id
        self.controller_port = controller_port

    def properties(self) -> dict:
        props = super().properties()
        props.pop("controller.quorum.bootstrap.servers", None)
        props.update({
            "node.id": self.node_id,
            "controller.quorum.voters": self.voters,
            "offsets.topic.replication.factor": 3,
            "transaction.state.log.replication.factor": 3,
            "transaction.state.log.min.isr": 2,
            "share.coordinator.state.topic.replication.factor": 3,
            "share.coordinator.state.topic.min.isr": 2,
        })
        return props

    def prepare(self) -> None:
        res = harness.kafka_tool(harness.STORAGE_TOOL, "format", "-t", self.cluster_id, "-c",
                                 str(self.config_file), timeout=harness.TOOL_TIMEOUT)
        res.check("kafka-storage format")


def kafka_cluster(work: Path, n: int = 3) -> list:
    """``n`` Kafka nodes (not started) forming one KRaft quorum."""
    ports = [harness.free_port() for _ in range(n)]
    voters = ",".join(f"{i + 1}@127.0.0.1:{p}" for i, p in enumerate(ports))
    cid = harness.kafka_uuid()
    return [KafkaNode(work / f"kafka{i + 1}", i + 1, voters, cid, ports[i]) for i in range(n)]


def start_all(nodes, timeout: float = 180) -> None:
    """Start brokers at once (a KRaft quorum starts only when a majority of it runs)."""
    import threading
    errors = []

    def start(n):
        try:
            n.start(timeout=timeout)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"{n.name}: {e}")

    threads = [threading.Thread(target=start, args=(n,)) for n in nodes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise harness.HarnessError("; ".join(errors))


def coordinator_of(bootstrap: str, group: str) -> int:
    """The coordinator ``group`` is sent to by the first broker of ``bootstrap`` (FindCoordinator
    v1), -1 if none is available."""
    import struct
    from nfs_support import _request, _string
    r = _request(bootstrap.split(",")[0], 10, 1, _string(group) + struct.pack(">b", 0))
    r.take(">i")  # throttle
    code = r.take(">h")
    r.string()
    node = r.take(">i")
    return node if code == 0 else -1

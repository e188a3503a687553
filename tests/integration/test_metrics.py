"""Operations endpoints (issue 20): /metrics, /healthz, /readyz on sluice.metrics.listener.

- The HTTP listener answers GET /healthz and /readyz, refuses other methods, paths and
  malformed requests with a status, and closes the connection.
- Consumer lag: librdkafka produces records with chosen timestamps, a group consumes and
  commits part of them; /metrics reports kafka_exporter's lag in records exactly and the lag
  in seconds from the timestamp of the first unconsumed record.
- Logical bytes (records uncompressed) and physical bytes appended, per topic, for
  uncompressed, gzip and lz4 producer batches and a topic the broker recompresses to zstd.
- A real Prometheus (Debian's package; scripts/test installs it) scrapes the broker every
  second while librdkafka and Kafka's own producer-perf-test (the Java client) produce and a
  group consumes; every expression of ops/grafana/sluice-dashboard.json and of
  ops/prometheus/sluice-alerts.yml (the latter without its threshold) returns data through
  Prometheus's HTTP API, and `promtool check rules` passes.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer

import harness

pytestmark = pytest.mark.sluice_only

DASHBOARD = harness.REPO_ROOT / "ops" / "grafana" / "sluice-dashboard.json"
RULES = harness.REPO_ROOT / "ops" / "prometheus" / "sluice-alerts.yml"


def http(port: int, raw: bytes, timeout: float = 10.0) -> tuple[int, dict, bytes]:
    """Send ``raw`` to 127.0.0.1:port and read the whole answer (the server closes)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(raw)
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {k.lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    return status, headers, body


def get(port: int, path: str) -> tuple[int, bytes]:
    status, _, body = http(port, f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return status, body


def samples(port: int) -> list[tuple[str, dict, float]]:
    status, body = get(port, "/metrics")
    assert status == 200
    out = []
    for line in body.decode().splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$', line)
        assert m, f"not a sample line: {line!r}"
        labels = dict(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ""))
        out.append((m.group(1), labels, float(m.group(4))))
    return out


def value(ss, name: str, **labels) -> float | None:
    for n, l, v in ss:
        if n == name and all(l.get(k) == str(x) for k, x in labels.items()) and (
            labels or "topic" not in l
        ):
            return v
    return None


@pytest.fixture
def metrics_broker(broker_factory):
    port = harness.free_port()
    b = broker_factory(
        overrides={
            "sluice.metrics.listener": f"127.0.0.1:{port}",
            # acks=all answers after an fsync: the fsync and group-commit metrics have data.
            "log.flush.interval.messages": 1,
        }
    )
    b.metrics_port = port
    return b


def test_health_endpoints_and_bad_requests(metrics_broker):
    port = metrics_broker.metrics_port
    assert get(port, "/healthz") == (200, b"ok\n")
    assert get(port, "/readyz") == (200, b"ready\n")
    status, headers, body = http(port, b"HEAD /metrics HTTP/1.1\r\n\r\n")
    assert status == 200 and body == b"" and int(headers["content-length"]) > 0
    assert headers["content-type"].startswith("text/plain; version=0.0.4")
    status, headers, _ = http(port, b"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n")
    assert status == 405 and headers["allow"] == "GET, HEAD"
    assert http(port, b"GET /nope HTTP/1.1\r\n\r\n")[0] == 404
    assert http(port, b"hello there\r\n\r\n")[0] == 400
    assert http(port, b"GET /metrics HTTP/3\r\n\r\n")[0] == 505
    assert http(port, b"GET /metrics HTTP/1.1\r\n" + b"X: " + b"a" * 20000 + b"\r\n\r\n")[0] == 431
    # The broker still serves Kafka clients and metrics afterwards.
    assert get(port, "/healthz")[0] == 200


def test_consumer_lag_in_records_and_seconds(metrics_broker, topic):
    port = metrics_broker.metrics_port
    harness.create_topic(metrics_broker.bootstrap, topic, partitions=1)
    now_ms = int(time.time() * 1000)
    age_ms = 3_600_000  # records an hour old
    n, consumed = 1000, 400
    p = Producer({"bootstrap.servers": metrics_broker.bootstrap, "linger.ms": 5})
    for i in range(n):
        # One record per millisecond, from an hour ago.
        p.produce(topic, value=b"v%d" % i, partition=0, timestamp=now_ms - age_ms + i)
    assert p.flush(30) == 0
    group = f"lag-{topic}"
    c = Consumer(
        {
            "bootstrap.servers": metrics_broker.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        c.subscribe([topic])
        got = 0
        last = None
        deadline = time.time() + 60
        while got < consumed and time.time() < deadline:
            for m in c.consume(num_messages=consumed - got, timeout=1.0):
                if m.error() is None:
                    got += 1
                    last = m
        assert got == consumed, f"consumed {got} of {consumed}"
        c.commit(message=last, asynchronous=False)  # commits offset 400
        live = samples(port)
        assert value(live, "kafka_consumergroup_members", consumergroup=group) == 1
    finally:
        c.close()
    ss = samples(port)
    assert value(ss, "kafka_consumergroup_lag", consumergroup=group, topic=topic, partition=0) == n - consumed
    assert value(ss, "kafka_consumergroup_current_offset", consumergroup=group, topic=topic, partition=0) == consumed
    assert value(ss, "kafka_consumergroup_lag_sum", consumergroup=group, topic=topic) == n - consumed
    # The first unconsumed record (offset 400) was stamped an hour ago plus 400 ms.
    expected = (time.time() * 1000 - (now_ms - age_ms + consumed)) / 1000
    seconds = value(ss, "kafka_consumergroup_lag_seconds", consumergroup=group, topic=topic, partition=0)
    assert seconds is not None and abs(seconds - expected) < 30, (seconds, expected)
    assert value(ss, "kafka_consumergroup_lag_seconds_max", consumergroup=group) == seconds
    assert value(ss, "kafka_log_log_logendoffset", topic=topic, partition=0) == n
    assert value(ss, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) == n
    assert value(ss, "kafka_server_replicamanager_partitioncount") >= 1


def test_logical_and_physical_bytes_in(metrics_broker, topic):
    """Logical bytes (records uncompressed) against physical bytes (as written) per topic:
    equal for uncompressed batches; for gzip batches from the frame's stated size, for lz4
    ones (librdkafka states no size) from a decompression (a topic's first MiB of such batches
    is all measured; later ones are sampled, as the unit tests check), and for a topic whose
    compression.type makes the broker recompress, from the decoded records."""
    port = metrics_broker.metrics_port
    n, size = 2000, 1000
    payload = n * size
    cases = {
        f"{topic}-none": ("none", {}),
        f"{topic}-gzip": ("gzip", {}),
        f"{topic}-lz4": ("lz4", {}),
        f"{topic}-zstd": ("none", {"compression.type": "zstd"}),
    }
    for name, (codec, config) in cases.items():
        harness.create_topic(metrics_broker.bootstrap, name, partitions=1, config=config)
        p = Producer(
            {"bootstrap.servers": metrics_broker.bootstrap, "compression.type": codec, "linger.ms": 20}
        )
        for i in range(n):
            event = b'{"user": %6d, "action": "click", "page": "/products/%04d", "ok": true}' % (i % 97, i % 13)
            p.produce(name, value=(event * 20)[:size], key=b"%d" % i)
            if i % 500 == 0:
                p.poll(0)
        assert p.flush(30) == 0
    ss = samples(port)
    for name, (codec, config) in cases.items():
        logical = value(ss, "sluice_topic_logical_bytes_in_total", topic=name)
        physical = value(ss, "sluice_topic_physical_bytes_in_total", topic=name)
        on_disk = value(ss, "kafka_log_log_size", topic=name, partition=0)
        assert physical == on_disk, (name, physical, on_disk)
        # Records add their key, lengths and deltas (under 20 bytes each), batches 61 bytes.
        assert payload < logical < payload * 1.1, (name, logical)
        if codec == "none" and not config:
            assert logical == physical, name
        else:
            assert physical * 2 < logical, (name, physical, logical)
    # The broker-wide series sum the topics.
    total_logical = value(ss, "sluice_topic_logical_bytes_in_total")
    assert total_logical >= sum(
        value(ss, "sluice_topic_logical_bytes_in_total", topic=t) for t in cases
    )


# ---- a real Prometheus -------------------------------------------------------------------


def prometheus_bin(name: str) -> str:
    path = shutil.which(name) or f"/usr/bin/{name}"
    if not Path(path).exists():
        pytest.fail(f"{name} is needed: scripts/test installs Debian's prometheus package")
    return path


@pytest.fixture
def prometheus(tmp_path, metrics_broker):
    port = harness.free_port()
    work = tmp_path / "prometheus"
    work.mkdir()
    shutil.copy(RULES, work / "sluice-alerts.yml")
    (work / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "rule_files:\n  - sluice-alerts.yml\n"
        "scrape_configs:\n  - job_name: sluice\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{metrics_broker.metrics_port}']\n"
    )
    log = open(work / "prometheus.log", "wb")
    proc = subprocess.Popen(
        [
            prometheus_bin("prometheus"),
            f"--config.file={work / 'prometheus.yml'}",
            f"--storage.tsdb.path={work / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"

    def ready():
        try:
            with urllib.request.urlopen(base + "/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    try:
        harness.wait_until(ready, 60, "Prometheus ready")
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        log.close()


def query(base: str, expr: str) -> list:
    url = base + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as r:
        body = json.load(r)
    assert body["status"] == "success", body
    return body["data"]["result"]


def dashboard_exprs() -> list[tuple[str, str]]:
    dash = json.loads(DASHBOARD.read_text())
    assert dash["templating"]["list"][0]["type"] == "datasource"
    assert "__inputs" not in dash
    out = []
    for panel in dash["panels"]:
        for t in panel.get("targets", []):
            assert panel["datasource"]["uid"] == "${datasource}"
            expr = t["expr"].replace("$__rate_interval", "30s").replace("$instance", ".*")
            out.append((panel["title"], expr))
    return out


THRESHOLD = re.compile(r"\s*(==|!=|>=|<=|>|<)\s*[0-9.eE+-]+\s*$")


def rule_exprs() -> list[tuple[str, str]]:
    text = RULES.read_text()
    names = re.findall(r"^\s*- alert: (\S+)\s*\n\s*expr: (.+)$", text, re.M)
    assert len(names) >= 5
    return [(name, THRESHOLD.sub("", expr)) for name, expr in names]


def test_prometheus_scrapes_and_every_dashboard_and_rule_expression_has_data(
    metrics_broker, prometheus, kafka_tool, topic, tmp_path
):
    rc = subprocess.run([prometheus_bin("promtool"), "check", "rules", str(RULES)], capture_output=True, text=True)
    assert rc.returncode == 0, rc.stdout + rc.stderr

    harness.create_topic(metrics_broker.bootstrap, topic, partitions=2)
    stop = threading.Event()
    errors: list = []

    def produce():
        p = Producer({"bootstrap.servers": metrics_broker.bootstrap, "acks": "all", "linger.ms": 2})
        i = 0
        while not stop.is_set():
            p.produce(topic, value=b"x" * 200, key=b"%d" % i)
            i += 1
            if i % 200 == 0:
                p.poll(0)
                time.sleep(0.02)
        p.flush(30)

    def consume():
        c = Consumer(
            {
                "bootstrap.servers": metrics_broker.bootstrap,
                "group.id": f"dash-{topic}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": True,
                "auto.commit.interval.ms": 500,
            }
        )
        try:
            c.subscribe([topic])
            while not stop.is_set():
                c.consume(num_messages=100, timeout=0.5)
                time.sleep(0.05)  # slower than the producer: the group lags
        except Exception as e:  # noqa: BLE001 - reported by the test
            errors.append(e)
        finally:
            c.close()

    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for t in threads:
        t.start()
    try:
        # The Java client too: Kafka's producer-perf-test, acks=all.
        kafka_tool(
            harness.PRODUCER_PERF,
            "--topic", topic,
            "--num-records", "20000",
            "--record-size", "100",
            "--throughput", "4000",
            "--producer-props", f"bootstrap.servers={metrics_broker.bootstrap}", "acks=all",
        ).check()
        missing: dict = {}
        exprs = [("dashboard: " + t, e) for t, e in dashboard_exprs()] + [
            ("rule: " + n, e) for n, e in rule_exprs()
        ]

        def all_have_data():
            missing.clear()
            for what, expr in exprs:
                if not query(prometheus, expr):
                    missing[what] = expr
            return not missing

        try:
            harness.wait_until(all_have_data, 90, "every expression returns data", interval=2)
        except harness.HarnessError:
            pytest.fail("expressions without data:\n" + "\n".join(f"{k}: {v}" for k, v in missing.items()))
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not errors, errors
    # The scrape itself is healthy.
    up = query(prometheus, 'up{job="sluice"}')
    assert up and up[0]["value"][1] == "1"


# ---- DescribeLogDirs v4: the volume's total and usable bytes (KIP-827) -------------------


def _uvarint(data: bytes, i: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def describe_log_dirs_v4(bootstrap: str) -> dict:
    """DescribeLogDirs v4 (flexible) by hand: {log_dir: (error, total_bytes, usable_bytes)}."""
    import struct

    client = b"sluice-it"
    header = struct.pack(">hhih", 35, 4, 11, len(client)) + client + b"\x00"
    body = b"\x00" + b"\x00"  # topics: null (every partition); no tagged fields
    frame = header + body
    host, port = bootstrap.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = s.recv(65536)
            assert chunk, "connection closed"
            data += chunk
    d = data[4:]
    assert struct.unpack_from(">i", d, 0)[0] == 11
    i = 4
    _, i = _uvarint(d, i)  # header tagged fields
    i += 4  # throttle
    assert struct.unpack_from(">h", d, i)[0] == 0
    i += 2
    n, i = _uvarint(d, i)
    out = {}
    for _ in range(n - 1):
        err = struct.unpack_from(">h", d, i)[0]
        i += 2
        ln, i = _uvarint(d, i)
        log_dir = d[i:i + ln - 1].decode()
        i += ln - 1
        topics, i = _uvarint(d, i)
        for _ in range(topics - 1):
            ln, i = _uvarint(d, i)
            i += ln - 1
            parts, i = _uvarint(d, i)
            for _ in range(parts - 1):
                i += 4 + 8 + 8 + 1
                _, i = _uvarint(d, i)
            _, i = _uvarint(d, i)
        total, usable = struct.unpack_from(">qq", d, i)
        i += 16
        _, i = _uvarint(d, i)
        out[log_dir] = (err, total, usable)
    return out


def test_describe_log_dirs_reports_the_volume(metrics_broker, topic):
    import os

    harness.create_topic(metrics_broker.bootstrap, topic, partitions=1)
    dirs = describe_log_dirs_v4(metrics_broker.bootstrap)
    err, total, usable = dirs[str(metrics_broker.log_dir)]
    st = os.statvfs(metrics_broker.log_dir)
    assert err == 0
    assert total == st.f_blocks * st.f_frsize
    # Others write to this volume meanwhile: usable is within 5% of what statvfs says now.
    assert abs(usable - st.f_bavail * st.f_frsize) <= 0.05 * total
    assert 0 < usable <= total
    ss = samples(metrics_broker.metrics_port)
    assert value(ss, "sluice_log_dir_total_bytes", log_dir=str(metrics_broker.log_dir)) == total


# ---- a cluster: each broker exports its own ----------------------------------------------


def test_cluster_brokers_each_export_their_own(broker_factory, tmp_path, topic):
    from cluster_support import EtcdServer, bootstrap_of, cluster_overrides, leaders, live_brokers, wait_all_led

    partitions = 6
    etcd = EtcdServer(tmp_path / "etcd").start()
    try:
        shared = tmp_path / "shared"
        brokers = []
        for node in (1, 2, 3):
            overrides = cluster_overrides(etcd, node, shared, "/sluice-metrics-test")
            port = harness.free_port()
            overrides["sluice.metrics.listener"] = f"127.0.0.1:{port}"
            b = broker_factory(overrides=overrides, log_dir=shared, kind="sluice", name=f"node{node}")
            b.metrics_port = port
            brokers.append(b)
        bootstrap = bootstrap_of(brokers)
        harness.wait_until(lambda: len(live_brokers(bootstrap)) == 3, 30, "3 brokers in the cluster's metadata")
        harness.create_topic(bootstrap, topic, partitions=partitions)
        wait_all_led(bootstrap, topic, partitions)
        p = harness.producer(bootstrap, **{"acks": "all"})
        records = [{"value": b"%d" % i, "partition": i % partitions} for i in range(300)]
        harness.produce_all(p, topic, records)
        led = leaders(bootstrap, topic)
        for b in brokers:
            assert get(b.metrics_port, "/readyz") == (200, b"ready\n")
        per_broker = {node: samples(b.metrics_port) for node, b in zip((1, 2, 3), brokers)}
        controllers = 0
        for node, ss in per_broker.items():
            mine = {int(l["partition"]) for n, l, _ in ss if n == "kafka_log_log_size" and l["topic"] == topic}
            assert mine == {p for p, leader in led.items() if leader == node}, (node, mine, led)
            assert value(ss, "kafka_server_replicamanager_leadercount") == value(
                ss, "kafka_server_replicamanager_partitioncount"
            )
            assert value(ss, "kafka_controller_kafkacontroller_offlinepartitionscount") == 0
            assert value(ss, "sluice_partition_acquisitions_total") >= len(mine)
            info = [l for n, l, _ in ss if n == "sluice_broker_info"]
            assert info and info[0]["mode"] == "cluster" and info[0]["node_id"] == str(node)
            controllers += value(ss, "kafka_controller_kafkacontroller_activecontrollercount")
        assert controllers == 1
        total_in = sum(
            value(ss, "kafka_server_brokertopicmetrics_messagesin_total", topic=topic) or 0
            for ss in per_broker.values()
        )
        assert total_in == len(records)
    finally:
        etcd.kill()


def test_cluster_coordinator_reports_lag_of_partitions_other_brokers_own(broker_factory, tmp_path, topic):
    """Two brokers on one volume: the group's coordinator reports lag in records and seconds
    for every partition, those the other broker owns included (asked with a Fetch)."""
    from confluent_kafka import TopicPartition
    from cluster_support import EtcdServer, bootstrap_of, cluster_overrides, leaders, live_brokers, wait_all_led

    partitions, n = 4, 200
    etcd = EtcdServer(tmp_path / "etcd").start()
    try:
        shared = tmp_path / "shared"
        brokers = {}
        for node in (1, 2):
            overrides = cluster_overrides(etcd, node, shared, "/sluice-lag-test")
            port = harness.free_port()
            overrides["sluice.metrics.listener"] = f"127.0.0.1:{port}"
            overrides["sluice.metrics.lag.remote.cache.ms"] = 0
            b = broker_factory(overrides=overrides, log_dir=shared, kind="sluice", name=f"node{node}")
            b.metrics_port = port
            brokers[node] = b
        bootstrap = bootstrap_of(list(brokers.values()))
        harness.wait_until(lambda: len(live_brokers(bootstrap)) == 2, 30, "2 brokers in the cluster's metadata")
        harness.create_topic(bootstrap, topic, partitions=partitions)
        wait_all_led(bootstrap, topic, partitions)
        led = leaders(bootstrap, topic)
        assert set(led.values()) == {1, 2}, led
        now_ms = int(time.time() * 1000)
        age_ms = 3_600_000
        p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        for part in range(partitions):
            for i in range(n):
                p.produce(topic, value=b"v%d" % i, partition=part, timestamp=now_ms - age_ms + i)
        assert p.flush(30) == 0
        group = f"lag-{topic}"
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
        committed = {part: 50 * (part + 1) for part in range(partitions)}  # 50, 100, 150, 200
        try:
            c.commit(offsets=[TopicPartition(topic, part, o) for part, o in committed.items()], asynchronous=False)
        finally:
            c.close()
        expected_lags = {part: n - o for part, o in committed.items()}

        def lag_rows(node):
            ss = samples(brokers[node].metrics_port)
            return ss, {
                int(l["partition"]): v
                for name, l, v in ss
                if name == "kafka_consumergroup_lag" and l.get("consumergroup") == group
            }

        def coordinator_reports_all():
            # The coordinator is the broker that reports the group (while the cluster settles
            # after start, the __consumer_offsets partition may still move once).
            for node in brokers:
                ss, lags = lag_rows(node)
                if lags:
                    return node, ss, lags
            return None

        coordinator, ss, lags = harness.wait_until(
            lambda: (r := coordinator_reports_all()) and r[2] == expected_lags and r,
            30,
            "the coordinator reports the lag of every partition",
        )
        other = 3 - coordinator
        # The point of the test: a partition whose lag the coordinator reported was owned by the
        # other broker before and after (``led`` alone cannot show it: it was read before the
        # group existed, and the assertion above spread it over both brokers).
        now = leaders(bootstrap, topic)
        theirs = [p for p in range(partitions) if led[p] == other and now.get(p) == other]
        assert theirs, f"no partition owned by broker {other} throughout (coordinator {coordinator}): {led} then {now}"
        for part, o in committed.items():
            seconds = value(ss, "kafka_consumergroup_lag_seconds", consumergroup=group, topic=topic, partition=part)
            if o == n:
                assert seconds == 0, (part, seconds)
            else:
                # The first unconsumed record was stamped an hour ago plus o ms.
                expected = (time.time() * 1000 - (now_ms - age_ms + o)) / 1000
                assert seconds is not None and abs(seconds - expected) < 30, (part, led[part], seconds, expected)
            assert value(ss, "kafka_consumergroup_current_offset", consumergroup=group, topic=topic, partition=part) == o
        assert value(ss, "kafka_consumergroup_lag_sum", consumergroup=group, topic=topic) == sum(
            n - o for o in committed.values()
        )
        # The other broker does not coordinate the group: it reports no lag for it.
        assert lag_rows(other)[1] == {}
    finally:
        etcd.kill()

"""`sluice stats` and `sluice size` (issue 20), run as an operator runs them.

- `sluice stats` against one live broker while librdkafka produces to a topic the broker
  recompresses with zstd: one row per interval with records and bytes in, a logical to
  physical ratio above 1, and the Minimums / Averages / Maximums footer consistent with
  the rows.
- Against two brokers: the summed row and `--per-broker` rows, checked on a gauge whose
  value is known exactly (each broker's consumer lag) and on which broker has traffic.
- `sluice size` with the storage throughput given: the table's arithmetic, as the issue's
  formula (max cluster produce <= storage throughput x brokers / copies) and the brokers and
  capacity a target needs; with `--path`, measured on the volume; bad options refused.
"""

from __future__ import annotations

import math
import re
import subprocess
import threading
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import harness

pytestmark = pytest.mark.sluice_only

COLUMNS = [
    "cpu", "prod/s", "fetch/s", "msg-in/s", "in/s", "out/s", "log:phys",
    "st-read/s", "st-write/s", "fsync/s", "fsync-p99", "conns", "lag",
]
SCALE = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3,
         "TB": 1024**4, "%": 1, "us": 1, "ms": 1000}


def number(cell: str) -> float:
    """A cell of the table as a number (bytes, counts, microseconds, percent, ratio)."""
    if cell == "-":
        return 0.0
    if cell.endswith(":1"):
        return float(cell[:-2])
    m = re.fullmatch(r"([0-9.]+)([A-Za-z%]*)", cell)
    assert m, f"not a table cell: {cell!r}"
    return float(m.group(1)) * SCALE[m.group(2)]


def sluice(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([str(harness.SLUICE_BIN), *args], capture_output=True, text=True, timeout=timeout)


def parse_stats(out: str, labelled: bool = False) -> tuple[list, dict]:
    """Rows (label, {column: value}) and the footer {Minimums|Averages|Maximums: {column: value}}."""
    lines = out.splitlines()
    assert lines[0].split() == (["broker"] if labelled else []) + COLUMNS, lines[0]

    def cells(line):
        parts = line.split()
        label = parts[0] if labelled and len(parts) == len(COLUMNS) + 1 else ""
        values = parts[-len(COLUMNS):]
        return label, {c: number(v) for c, v in zip(COLUMNS, values)}

    rows, footer = [], {}
    i = 1
    while not lines[i].startswith("="):
        rows.append(cells(lines[i]))
        i += 1
    rest = lines[i + 1:]
    for j in range(0, len(rest) - 1, 2):
        key = rest[j].split()[0].rstrip(":")
        footer[key] = cells(rest[j + 1])[1]
    return rows, footer


def metrics_broker(broker_factory):
    port = harness.free_port()
    b = broker_factory(overrides={"sluice.metrics.listener": f"127.0.0.1:{port}"})
    b.metrics_port = port
    return b


def keep_producing(bootstrap: str, topic: str, stop: threading.Event):
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "acks": 1})
    event = b'{"user": 4711, "action": "view", "page": "/catalog/shoes", "ms": 12}' * 8
    while not stop.is_set():
        for _ in range(200):
            p.produce(topic, value=event)
        p.poll(0)
        time.sleep(0.01)
    p.flush(30)


def test_stats_against_one_broker_under_load(broker_factory, topic):
    b = metrics_broker(broker_factory)
    harness.create_topic(b.bootstrap, topic, partitions=2, config={"compression.type": "zstd"})
    stop = threading.Event()
    t = threading.Thread(target=keep_producing, args=(b.bootstrap, topic, stop))
    t.start()
    try:
        time.sleep(1)  # the producer has connected and is sending
        r = sluice("stats", f"127.0.0.1:{b.metrics_port}", "--interval", "0.5", "--count", "4")
    finally:
        stop.set()
        t.join()
    assert r.returncode == 0, r.stderr
    rows, footer = parse_stats(r.stdout)
    assert len(rows) == 4, r.stdout
    assert set(footer) == {"Minimums", "Averages", "Maximums"}, r.stdout
    assert "Averages for 4 samples:" in r.stdout
    for _, row in rows:
        assert row["msg-in/s"] > 0 and row["in/s"] > 0 and row["prod/s"] > 0, r.stdout
        # zstd on repeated JSON: far more logical than physical bytes.
        assert row["log:phys"] > 2, r.stdout
        assert row["conns"] >= 1
    for c in COLUMNS:
        values = [row[c] for _, row in rows]
        # The footer is of the printed rows (rounded as printed: compare loosely).
        lo, hi = min(values), max(values)
        assert footer["Minimums"][c] <= footer["Averages"][c] * 1.06 + 1e-9, (c, r.stdout)
        assert footer["Averages"][c] <= footer["Maximums"][c] * 1.06 + 1e-9, (c, r.stdout)
        assert math.isclose(footer["Maximums"][c], hi, rel_tol=0.06, abs_tol=1e-9), (c, r.stdout)
        assert math.isclose(footer["Minimums"][c], lo, rel_tol=0.06, abs_tol=1e-9), (c, r.stdout)


def lag_on(b, topic: str, n: int, committed: int) -> None:
    """Produce n records to `topic` on broker `b` and commit `committed` for a group."""
    harness.create_topic(b.bootstrap, topic, partitions=1)
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 5})
    for i in range(n):
        p.produce(topic, value=b"%d" % i)
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": f"g-{topic}", "enable.auto.commit": False})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, committed)], asynchronous=False)
    finally:
        c.close()


def test_stats_against_two_brokers_summed_and_per_broker(broker_factory, topic):
    a, b = metrics_broker(broker_factory), metrics_broker(broker_factory)
    lag_on(a, topic, 300, 100)  # lag 200
    lag_on(b, topic, 50, 20)  # lag 30
    addrs = [f"127.0.0.1:{a.metrics_port}", f"127.0.0.1:{b.metrics_port}"]
    stop = threading.Event()
    t = threading.Thread(target=keep_producing, args=(a.bootstrap, topic + "-load", stop))
    t.start()
    try:
        time.sleep(1)
        summed = sluice("stats", *addrs, "-i", "0.5", "-n", "3")
        per = sluice("stats", *addrs, "-i", "0.5", "-n", "2", "--per-broker")
    finally:
        stop.set()
        t.join()
    assert summed.returncode == 0, summed.stderr
    rows, footer = parse_stats(summed.stdout)
    assert len(rows) == 3
    for _, row in rows:
        assert row["lag"] == 230, summed.stdout
        assert row["msg-in/s"] > 0, summed.stdout
    assert footer["Averages"]["lag"] == 230

    assert per.returncode == 0, per.stderr
    rows, footer = parse_stats(per.stdout, labelled=True)
    assert len(rows) == 4, per.stdout  # 2 intervals x 2 brokers
    label_a, label_b = addrs[0][-10:], addrs[1][-10:]
    by = {label_a: [], label_b: []}
    for label, row in rows:
        by[label].append(row)
    assert len(by[label_a]) == 2 and len(by[label_b]) == 2, per.stdout
    assert all(r["lag"] == 200 and r["msg-in/s"] > 0 for r in by[label_a]), per.stdout
    assert all(r["lag"] == 30 and r["msg-in/s"] == 0 for r in by[label_b]), per.stdout
    assert footer["Maximums"]["lag"] == 200 and footer["Minimums"]["lag"] == 30

    # A listener that is not there: an error, not a table.
    bad = sluice("stats", f"127.0.0.1:{harness.free_port()}", "-n", "1")
    assert bad.returncode != 0 and "cannot connect" in bad.stderr


def size_table(out: str) -> dict:
    rows = {}
    for line in out.splitlines():
        m = re.match(r"^(Kafka RF=\d|Sluice)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+)$", line)
        if m:
            rows[m.group(1)] = (int(m.group(2)), int(m.group(3)), m.group(4), m.group(5))
    return rows


def test_size_with_the_storage_throughput_given_and_measured(tmp_path):
    storage, brokers, target, headroom, hours, ratio = 400.0, 4, 500.0, 0.2, 12.0, 2.5
    r = sluice(
        "size", "--storage-mbps", "400", "--brokers", "4", "--target-mbps", "500",
        "--headroom", "0.2", "--retention-hours", "12", "--compression-ratio", "2.5",
    )
    assert r.returncode == 0, r.stderr
    rows = size_table(r.stdout)
    assert set(rows) == {"Kafka RF=3", "Kafka RF=2", "Kafka RF=1", "Sluice"}, r.stdout
    for name, copies in [("Kafka RF=3", 3), ("Kafka RF=2", 2), ("Kafka RF=1", 1), ("Sluice", 1)]:
        c, max_mbps, needed, capacity = rows[name]
        assert c == copies
        # max cluster produce <= storage throughput x brokers / copies
        assert max_mbps == round(storage * brokers / copies), (name, r.stdout)
        # brokers for the target: ceil(target x copies / (storage x (1 - headroom)))
        assert int(needed) == math.ceil(target * copies / (storage * (1 - headroom))), (name, r.stdout)
        # capacity: target x retention x copies / compression ratio, in TB
        assert float(capacity) == pytest.approx(target * 1e6 * hours * 3600 * copies / ratio / 1e12, abs=0.051)
    # RF=3: 1500/320 -> 5 brokers, 25.9 TB; Sluice: 2 brokers, 8.6 TB.
    assert rows["Kafka RF=3"][2:] == ("5", "25.9") and rows["Sluice"][2:] == ("2", "8.6"), r.stdout

    # Measured on the volume (a small run): the table uses the measured throughput.
    m = sluice("size", "--path", str(tmp_path), "--size-mb", "16", "--brokers", "2", timeout=120)
    assert m.returncode == 0, m.stderr
    assert re.search(r"^Measured .*sequential write \d+ MiB/s", m.stdout, re.M), m.stdout
    per_broker = float(re.search(r"Storage throughput per broker: (\d+) MB/s", m.stdout).group(1))
    rows = size_table(m.stdout)
    assert rows["Sluice"][1] == pytest.approx(per_broker * 2, abs=2)
    assert rows["Kafka RF=3"][1] == pytest.approx(per_broker * 2 / 3, abs=2)
    assert rows["Sluice"][2] == "-" and rows["Sluice"][3] == "-"  # no target given

    for bad in (["size"], ["size", "--storage-mbps", "100", "--headroom", "1"],
                ["size", "--storage-mbps", "-5"], ["size", "--storage-mbps", "100", "--brokers", "0"]):
        e = sluice(*bad)
        assert e.returncode != 0 and e.stderr.strip(), bad

"""Consumer groups with real clients: three librdkafka members share 12 partitions fairly;
a member leaves, another is SIGKILLed, and the survivors take over their partitions; the
broker is restarted mid-consumption; with synchronous commits after each record every record
is consumed exactly once across the group. Both protocols (classic with cooperative-sticky,
and KIP-848 `group.protocol=consumer`)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import harness

PARTITIONS = 12
BATCH = 240
SCRIPT = Path(__file__).with_name("group_consumer.py")


class Member:
    def __init__(self, bootstrap, topic, group, protocol):
        self.proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), bootstrap, topic, group, protocol],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        self.assigned: set = set()
        self.records: list = []
        # (seen at, "REC" or "UNCOMMITTED", partition, offset, value) of each record consumed.
        self.consumed: list = []
        self.errors: list = []
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        threading.Thread(target=lambda: self.errors.extend(self.proc.stderr), daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            parts = line.split()
            with self.lock:
                if parts and parts[0] == "ASSIGNED":
                    self.assigned = {int(p) for p in parts[1].split(",")} if len(parts) > 1 else set()
                elif parts and parts[0] in ("REC", "UNCOMMITTED"):
                    self.records.append(parts[3])
                    self.consumed.append((time.monotonic(), parts[0], int(parts[1]), int(parts[2]), parts[3]))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=30)
        self.reader.join(timeout=10)

    def kill(self):
        self.proc.kill()
        self.proc.wait(timeout=10)
        self.reader.join(timeout=10)
        with self.lock:
            self.assigned = set()


def wait_assignment(members, sizes, what):
    def ok():
        got = [len(m.assigned) for m in members]
        union = set().union(*(m.assigned for m in members))
        return sorted(got) == sorted(sizes) and len(union) == PARTITIONS
    harness.wait_until(ok, 60, what)


def all_records(members):
    out = []
    for m in members:
        with m.lock:
            out.extend(m.records)
    return out


def produce_batch(bootstrap, topic, tag):
    p = harness.producer(bootstrap)
    harness.produce_all(p, topic, [{"partition": i % PARTITIONS, "value": f"{tag}-{i}".encode()} for i in range(BATCH)])
    return {f"{tag}-{i}" for i in range(BATCH)}


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
@pytest.mark.broker_config(**{
    "group.initial.rebalance.delay.ms": 0,
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.session.timeout.ms": 6000,
})
def test_group_fair_share_failover_restart_exactly_once(broker, topic, protocol):
    harness.create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    group = f"g-{protocol}"
    members = [Member(broker.bootstrap, topic, group, protocol) for _ in range(3)]
    try:
        wait_assignment(members, [4, 4, 4], "3 members with 4 partitions each")
        expected = produce_batch(broker.bootstrap, topic, "a")
        harness.wait_until(lambda: len(all_records(members)) >= len(expected), 60, "batch a consumed")

        # A member leaves cleanly: the other two split its partitions.
        members[0].stop()
        wait_assignment(members[1:], [6, 6], "2 members with 6 partitions each")
        expected |= produce_batch(broker.bootstrap, topic, "b")
        harness.wait_until(lambda: len(all_records(members)) >= len(expected), 60, "batch b consumed")

        # A member is SIGKILLed: the survivor takes everything within the session timeout.
        members[1].kill()
        wait_assignment(members[2:], [12], "the survivor owns all 12 partitions")
        expected |= produce_batch(broker.bootstrap, topic, "c")
        harness.wait_until(lambda: len(all_records(members)) >= len(expected), 60, "batch c consumed")

        # The broker restarts mid-consumption; consumers resume at their committed offsets.
        expected |= produce_batch(broker.bootstrap, topic, "d")
        broker.stop()
        broker.start()
        expected |= produce_batch(broker.bootstrap, topic, "e")
        harness.wait_until(lambda: set(all_records(members)) >= expected, 90, "batches d and e consumed")
    finally:
        for m in members:
            if m.proc.poll() is None:
                m.stop()
    got = all_records(members)
    again = consumed_after_commit(members)
    assert not again, (
        f"{len(again)} records consumed again after their offset was committed, e.g. "
        f"{again[:5]}; failed commits: {[e.strip() for m in members for e in m.errors][-20:]}"
    )
    assert set(got) == expected


def consumed_after_commit(members):
    """The records some member consumed after one had committed them, each with every one of
    its consumptions as (member, what, partition, offset). A record whose commit failed
    (UNCOMMITTED) may be read again by the partition's next owner, as in Kafka."""
    seen: dict = {}
    for i, m in enumerate(members):
        with m.lock:
            for at, what, partition, offset, value in m.consumed:
                seen.setdefault(value, []).append((at, i, what, partition, offset))
    out = []
    for value, uses in seen.items():
        uses.sort()
        first_commit = next((k for k, u in enumerate(uses) if u[2] == "REC"), None)
        if first_commit is not None and first_commit < len(uses) - 1:
            out.append((value, [u[1:] for u in uses]))
    return out


SESSION_TIMEOUT_MS = 6000


@pytest.mark.skipif(not harness.kafka_libs_present(), reason="Kafka jars not installed")
@pytest.mark.broker_config(**{
    "group.initial.rebalance.delay.ms": 0,
    "group.consumer.heartbeat.interval.ms": 500,
    "group.consumer.session.timeout.ms": SESSION_TIMEOUT_MS,
})
def test_sigkilled_java_consumer_protocol_member_is_replaced_within_session_timeout(broker, topic):
    """A Java consumer (kafka-console-consumer, group.protocol=consumer) shares the group with
    two librdkafka members; SIGKILLed, it sends no leave: the broker expires its session and
    the survivors take its partitions."""
    harness.create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    group = f"g-java-{topic}"
    java = subprocess.Popen(
        harness.java_cmd(
            harness.CONSOLE_CONSUMER, "--bootstrap-server", broker.bootstrap, "--topic", topic,
            "--group", group, "--from-beginning", "--consumer-property", "group.protocol=consumer",
            "--property", "print.partition=true",
            jvm_opts=harness.FAST_START_JVM,
        ),
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
    )
    java_lines: list = []
    reader = threading.Thread(target=lambda: java_lines.extend(java.stdout), daemon=True)
    reader.start()
    members = [Member(broker.bootstrap, topic, group, "consumer") for _ in range(2)]
    try:
        # Three members of a 12-partition topic: the Java one holds the 4 the others lack.
        wait_assignment_partial(members, [4, 4], 8, "2 librdkafka members with 4 partitions each")
        expected = produce_batch(broker.bootstrap, topic, "j")
        harness.wait_until(
            lambda: sum(1 for l in list(java_lines) if "j-" in l) > 0, 60,
            "the Java member consumes from its partitions",
        )
        harness.wait_until(
            lambda: len(set(all_records(members)) & expected) >= 8 * BATCH // PARTITIONS, 60,
            "the librdkafka members consume theirs",
        )
        java.kill()
        java.wait(timeout=10)
        killed = time.monotonic()
        wait_assignment(members, [6, 6], "the survivors own all 12 partitions")
        elapsed = time.monotonic() - killed
        # Session timeout plus a few heartbeat intervals to reconcile.
        assert elapsed < SESSION_TIMEOUT_MS / 1000 + 5, f"took {elapsed:.1f}s"
        expected |= produce_batch(broker.bootstrap, topic, "k")
        harness.wait_until(
            lambda: set(all_records(members)) >= {v for v in expected if v.startswith("k-")}, 60,
            "the survivors consume every partition",
        )
    finally:
        if java.poll() is None:
            java.kill()
            java.wait(timeout=10)
        for m in members:
            m.stop()


def wait_assignment_partial(members, sizes, total, what):
    def ok():
        got = [len(m.assigned) for m in members]
        union = set().union(*(m.assigned for m in members))
        return sorted(got) == sorted(sizes) and len(union) == total
    harness.wait_until(ok, 60, what)

"""Sluice in cluster mode: three brokers on one shared log directory, coordinated through a
real etcd. Leaders spread over the brokers, every broker routes clients to the owner, a
SIGKILLed broker's partitions are served by the survivors with no acknowledged record lost,
a joining broker takes a fair share, and a SIGTERMed one hands its partitions over."""

from __future__ import annotations

import threading
import time
from collections import defaultdict

import pytest

import harness
from cluster_support import (EtcdServer, bootstrap_of, describe_partitions, leaders, start_cluster,
                             wait_all_led)

pytestmark = pytest.mark.sluice_only

PARTITIONS = 6


@pytest.fixture
def etcd(tmp_path):
    server = EtcdServer(tmp_path / "etcd").start()
    yield server
    server.kill()


class Load:
    """An idempotent acks=all librdkafka producer sending ``i`` to partition ``i % PARTITIONS``
    in a thread, recording every acknowledgement (value -> (partition, offset, time))."""

    def __init__(self, bootstrap: str, topic: str):
        self.topic = topic
        self.acked: dict = {}
        self.errors: list = []
        self.lock = threading.Lock()
        self.stop_flag = threading.Event()
        self.p = harness.producer(bootstrap, **{
            "acks": "all", "enable.idempotence": True, "linger.ms": 2,
            "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 1000,
        })
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err, msg):
        with self.lock:
            if err is not None:
                self.errors.append(str(err))
                return
            value = msg.value().decode()
            assert value not in self.acked, f"{value} acknowledged twice"
            self.acked[value] = (msg.partition(), msg.offset(), time.monotonic())

    def _run(self):
        i = 0
        while not self.stop_flag.is_set():
            try:
                self.p.produce(self.topic, value=str(i).encode(), partition=i % PARTITIONS,
                               on_delivery=self._on_delivery)
                i += 1
            except BufferError:
                pass
            self.p.poll(0.001 if i % 20 else 0.005)
        self.sent = i

    def start(self):
        self.thread.start()
        return self

    def finish(self, timeout: float = 90) -> None:
        self.stop_flag.set()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive()
        remaining = self.p.flush(timeout)
        assert remaining == 0, f"{remaining} records never acknowledged"


def check_all_readable(bootstrap: str, topic: str, acked: dict) -> None:
    """Every acknowledged record is read back at its partition and offset, once, and each
    partition holds its values in the order they were sent."""
    msgs = harness.consume_partitions(bootstrap, topic, range(PARTITIONS), expected=len(acked), timeout=120)
    seen = {}
    by_partition = defaultdict(list)
    for m in msgs:
        value = m.value().decode()
        assert value not in seen, f"{value} read twice: at {seen[value]} and {(m.partition(), m.offset())}"
        seen[value] = (m.partition(), m.offset())
        by_partition[m.partition()].append((m.offset(), int(value)))
    lost = [v for v in acked if v not in seen]
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {lost[:5]}"
    moved = [(v, acked[v][:2], seen[v]) for v in acked if seen[v] != acked[v][:2]]
    assert not moved, f"records read at other offsets than acknowledged: {moved[:5]}"
    for p, rows in by_partition.items():
        values = [v for _, v in sorted(rows)]
        assert values == sorted(values), f"partition {p} out of order"


def test_leaders_spread_and_every_broker_routes_to_the_owner(broker_factory, etcd, tmp_path, kafka_tool, topic):
    shared = tmp_path / "shared"
    brokers = start_cluster(broker_factory, etcd, shared)
    # Replicas are logical: a replication factor up to the broker count is accepted.
    kafka_tool(harness.TOPIC_COMMAND, "--bootstrap-server", brokers[0].bootstrap, "--create", "--topic", topic,
               "--partitions", str(PARTITIONS), "--replication-factor", "3").check()
    bootstrap = bootstrap_of(brokers)
    wait_all_led(bootstrap, topic, PARTITIONS)
    desc = describe_partitions(kafka_tool, brokers[2].bootstrap, topic)
    assert sorted(desc) == list(range(PARTITIONS)), desc
    assert {leader for leader, _, _ in desc.values()} == {1, 2, 3}, desc
    for leader, replicas, isr in desc.values():
        # One logical replica, the owner, which is its whole ISR: nothing under-replicated.
        assert replicas == str(leader) and isr == str(leader), desc
    res = kafka_tool(harness.TOPIC_COMMAND, "--bootstrap-server", bootstrap, "--describe",
                     "--under-replicated-partitions").check()
    assert topic not in res.out, res.out

    # Each client talks to one broker only for bootstrap; the owners take the data.
    records = [{"value": str(i).encode(), "partition": i % PARTITIONS} for i in range(600)]
    for b in brokers:
        p = harness.producer(b.bootstrap, **{"acks": "all", "enable.idempotence": True})
        harness.produce_all(p, topic, records[:200])
        records = records[200:]
    for b in brokers:
        got = harness.consume_partitions(b.bootstrap, topic, range(PARTITIONS), expected=600)
        assert sorted(int(m.value()) for m in got) == list(range(600))
    # All partitions are in the one shared directory.
    assert all((shared / f"{topic}-{p}").is_dir() for p in range(PARTITIONS))


def test_sigkill_failover_loses_no_acknowledged_record(broker_factory, etcd, tmp_path, topic):
    brokers = start_cluster(broker_factory, etcd, tmp_path / "shared")
    bootstrap = bootstrap_of(brokers)
    harness.create_topic(bootstrap, topic, partitions=PARTITIONS)
    before = wait_all_led(bootstrap, topic, PARTITIONS)
    load = Load(bootstrap, topic).start()
    time.sleep(2)
    victim = brokers[1]
    victim_parts = [p for p, leader in before.items() if leader == 2]
    assert victim_parts, before
    killed_at = time.monotonic()
    victim.kill()
    after = wait_all_led(bootstrap_of(brokers), topic, PARTITIONS, exclude=(2,), timeout=60)
    led_at = time.monotonic()
    time.sleep(2)
    load.finish()
    # Failover time: from the kill to the first acknowledgement on every partition it owned.
    firsts = []
    for p in victim_parts:
        times = [t for (part, _, t) in load.acked.values() if part == p and t > killed_at]
        assert times, f"nothing acknowledged on partition {p} after the failover"
        firsts.append(min(times) - killed_at)
    print(f"\nfailover: partitions {victim_parts} led elsewhere after {led_at - killed_at:.2f}s; "
          f"first acknowledged produce after {max(firsts):.2f}s; {len(load.acked)} records acknowledged")
    assert 2 not in after.values()
    check_all_readable(bootstrap_of(brokers), topic, load.acked)


def test_join_takes_a_share_and_sigterm_hands_over(broker_factory, etcd, tmp_path, topic):
    shared = tmp_path / "shared"
    brokers = start_cluster(broker_factory, etcd, shared, n=2)
    harness.create_topic(bootstrap_of(brokers), topic, partitions=PARTITIONS)
    wait_all_led(bootstrap_of(brokers), topic, PARTITIONS)
    load = Load(bootstrap_of(brokers), topic).start()
    time.sleep(1)

    # A third broker joins and gets a fair share (balancing is on by default).
    from cluster_support import cluster_overrides
    brokers.append(broker_factory(overrides=cluster_overrides(etcd, 3, shared, "/sluice-test"),
                                  log_dir=shared, kind="sluice", name="node3"))

    def balanced():
        counts = defaultdict(int)
        for leader in leaders(bootstrap_of(brokers), topic).values():
            counts[leader] += 1
        return sorted(counts.items()) == [(1, 2), (2, 2), (3, 2)]

    harness.wait_until(balanced, 30, "two partitions on each of three brokers")
    time.sleep(1)

    # SIGTERM: a controlled shutdown hands the partitions over before the process exits.
    brokers[0].stop()
    wait_all_led(bootstrap_of(brokers), topic, PARTITIONS, exclude=(1,), timeout=30)
    time.sleep(1)
    load.finish()
    assert not load.errors, f"delivery errors: {load.errors[:5]}"
    assert "left the cluster" in brokers[0].log_text()
    check_all_readable(bootstrap_of(brokers), topic, load.acked)

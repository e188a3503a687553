"""Bytes-in balancing (docs/cluster.md, "Balancing"): six one-partition topics on three brokers,
two each; the two busy ones land on one broker, and the controller, seeing that broker take
far more bytes in than the others, swaps one of them for a quiet partition of the quietest
broker. Partition counts stay even, every acknowledged record is read back, and once apart
nothing moves again."""

import re
import threading
import time

import pytest

import harness
from cluster_support import cluster_overrides, bootstrap_of, live_brokers, wait_all_led

pytestmark = pytest.mark.sluice_only

TOPICS = [f"bytes-{c}" for c in "abcdef"]


class Busy:
    """An acks=all producer writing 1 KiB values to some one-partition topics as fast as it
    is acknowledged, recording every acknowledgement per topic."""

    def __init__(self, bootstrap: str, topics):
        self.topics = list(topics)
        self.acked = {t: [] for t in self.topics}
        self.errors = []
        self.stop_flag = threading.Event()
        self.p = harness.producer(bootstrap, **{
            "acks": "all", "enable.idempotence": True, "linger.ms": 5,
            "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 1000,
        })
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err, msg):
        if err is not None:
            self.errors.append(str(err))
        else:
            self.acked[msg.topic()].append(msg.value()[:12].decode())

    def _run(self):
        i = 0
        pad = b"x" * 1012
        while not self.stop_flag.is_set():
            for t in self.topics:
                try:
                    self.p.produce(t, value=b"%012d" % i + pad, partition=0, on_delivery=self._on_delivery)
                    i += 1
                except BufferError:
                    self.p.poll(0.01)
            self.p.poll(0)
        self.p.flush(60)

    def start(self):
        self.thread.start()
        return self

    def finish(self):
        self.stop_flag.set()
        self.thread.join(90)


def owners_of(bootstrap: str) -> dict:
    out = {}
    for t in TOPICS:
        out[t] = wait_all_led(bootstrap, t, 1, timeout=60)[0]
    return out


def test_busy_partitions_on_one_broker_are_spread_by_bytes_in(broker_factory, etcd, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    brokers = []
    for node in (1, 2, 3):
        brokers.append(broker_factory(
            overrides=cluster_overrides(etcd, node, shared, "/sluice-bytes", **{
                "sluice.cluster.balance.bytes.window.ms": 1000,
                "sluice.cluster.balance.bytes.interval.ms": 3000,
                # 64 KiB/s: well under what one busy partition takes here, well over the
                # quiet ones (nothing).
                "sluice.cluster.balance.bytes.threshold": 65536,
            }),
            log_dir=shared, kind="sluice", name=f"node{node}"))
    bootstrap = bootstrap_of(brokers)
    harness.wait_until(lambda: len(live_brokers(bootstrap)) == 3, 30, "3 brokers")
    for t in TOPICS:
        harness.create_topic(bootstrap, t, partitions=1)
    owners = owners_of(bootstrap)
    per = {b: sorted(t for t, o in owners.items() if o == b) for b in (1, 2, 3)}
    assert all(len(ts) == 2 for ts in per.values()), per
    # The two topics of one broker become the busy ones.
    hot_broker = 1
    hot = per[hot_broker]
    busy = Busy(bootstrap, hot).start()

    def apart():
        o = owners_of(bootstrap)
        return o if o[hot[0]] != o[hot[1]] else None

    after = harness.wait_until(apart, 90, "the two busy partitions on different brokers", interval=0.5)
    # A swap: every broker still owns two.
    counts = {b: sum(1 for o in after.values() if o == b) for b in (1, 2, 3)}
    assert counts == {1: 2, 2: 2, 3: 2}, (counts, after)
    moved_log = "".join(b.log_text() for b in brokers)
    assert re.search(r"moved partition for bytes in", moved_log), "no move logged as one for bytes in"
    # Apart, nothing moves again while the load goes on (several intervals).
    time.sleep(10)
    assert owners_of(bootstrap) == after
    busy.finish()
    assert not busy.errors, busy.errors[:5]
    for t in hot:
        acked = busy.acked[t]
        assert len(acked) > 100, f"{t}: only {len(acked)} acknowledged"
        msgs = harness.consume_partitions(bootstrap, t, [0], expected=len(acked), timeout=120)
        seen = [m.value()[:12].decode() for m in msgs]
        missing = set(acked) - set(seen)
        assert not missing, f"{t}: {len(missing)} acknowledged records lost"
        assert len(seen) == len(set(seen)), f"{t}: records read twice"

"""Write-behind and produce backpressure (issue 22): `sluice.log.writeback.bytes`,
`sluice.log.unwritten.bytes.max`.

- With the defaults, what librdkafka produces is written back by the broker itself: its
  written-back counter reaches the bytes produced (give or take the last pass) and the
  unwritten gauge comes back down, with no errors.
- With a limit of 1 byte every produce request finds the limit passed and waits for a
  write-behind pass: the producer still gets every record acknowledged, in order, a consumer
  reads them all back, and the broker counts the waits.
- With the write-behind disabled (-1) nothing is written back by the broker, nothing waits,
  and produce and fetch work as before.

Latency and the kernel's own counters (Dirty, Writeback, threads in the dirty-page throttle)
are measured by bench/compare, not asserted here.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer

import harness
from test_metrics import samples, value

pytestmark = pytest.mark.sluice_only

RECORDS = 20_000
VALUE = b"w" * 1000


def start(broker_factory, **overrides):
    port = harness.free_port()
    b = broker_factory(overrides={"sluice.metrics.listener": f"127.0.0.1:{port}", **overrides})
    b.metrics_port = port
    return b


def produce_all(bootstrap: str, topic: str) -> list:
    """RECORDS values i:VALUE to partition 0, acks=all; returns the delivery errors."""
    errors = []
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 2,
                  "batch.size": 262144})

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    for i in range(RECORDS):
        p.produce(topic, value=b"%d:" % i + VALUE, partition=0, on_delivery=on_delivery)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0, "records left unacknowledged"
    return errors


def consume_all(bootstrap: str, topic: str) -> list:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got = []
    deadline = time.time() + 60
    try:
        while len(got) < RECORDS and time.time() < deadline:
            m = c.poll(1.0)
            if m is None or m.error():
                continue
            got.append(int(m.value().split(b":", 1)[0]))
    finally:
        c.close()
    return got


def wait_for(port: int, name: str, pred, timeout: float = 20.0) -> float:
    deadline = time.time() + timeout
    v = None
    while time.time() < deadline:
        v = value(samples(port), name)
        if v is not None and pred(v):
            return v
        time.sleep(0.2)
    raise AssertionError(f"{name} = {v} after {timeout} s")


def test_write_behind_writes_back_what_was_produced(broker_factory, topic):
    b = start(broker_factory)
    harness.create_topic(b.bootstrap, topic, partitions=1)
    assert produce_all(b.bootstrap, topic) == []
    produced = RECORDS * len(VALUE)
    # The broker wrote back the record data itself, but for what waits below one step
    # (sluice.log.writeback.bytes, 1 MiB) for more to come.
    wait_for(b.metrics_port, "sluice_writeback_bytes_total", lambda v: v >= produced - (1 << 20))
    wait_for(b.metrics_port, "sluice_log_unwritten_bytes", lambda v: v < 1 << 20)
    assert value(samples(b.metrics_port), "sluice_writeback_errors_total") == 0
    assert consume_all(b.bootstrap, topic) == list(range(RECORDS))


def test_produce_waits_for_the_write_behind_over_the_limit(broker_factory, topic):
    b = start(broker_factory, **{"sluice.log.unwritten.bytes.max": 1})
    harness.create_topic(b.bootstrap, topic, partitions=1)
    assert produce_all(b.bootstrap, topic) == []
    ss = samples(b.metrics_port)
    assert value(ss, "sluice_produce_backpressure_waits_total") > 0
    assert value(ss, "sluice_produce_backpressure_seconds_total") > 0
    assert consume_all(b.bootstrap, topic) == list(range(RECORDS))


def test_write_behind_disabled(broker_factory, topic):
    b = start(broker_factory, **{"sluice.log.writeback.bytes": -1, "sluice.log.unwritten.bytes.max": 1})
    harness.create_topic(b.bootstrap, topic, partitions=1)
    assert produce_all(b.bootstrap, topic) == []
    ss = samples(b.metrics_port)
    assert value(ss, "sluice_writeback_bytes_total") == 0
    assert value(ss, "sluice_produce_backpressure_waits_total") == 0
    assert consume_all(b.bootstrap, topic) == list(range(RECORDS))

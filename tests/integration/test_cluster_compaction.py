"""Compacted topics in cluster mode: the Java client (Kafka's console producer) writes keyed
records and tombstones to a compacted topic of a three-broker cluster on one shared directory;
the owner's cleaner compacts it; after the owner is SIGKILLed, the new owner (which starts
cleaning from the log start: the first dirty offset is not shared) serves the compacted log,
takes more keyed records and compacts them too. Every key's newest value stays at its offset,
tombstones go after delete.retention.ms, and offsets only increase."""

from __future__ import annotations

import time

import pytest

import harness
from cluster_support import bootstrap_of, start_cluster, wait_all_led

pytestmark = pytest.mark.sluice_only

KEYS = 30
SEGMENT_MS = 1000
DELETE_RETENTION_MS = 2000
NULL = "NULL"


@pytest.fixture
def etcd(tmp_path):
    from cluster_support import EtcdServer
    server = EtcdServer(tmp_path / "etcd").start()
    yield server
    server.kill()


def java_produce(bootstrap: str, topic: str, pairs) -> None:
    """key|value lines through Kafka's console producer (the Java client); NULL: a tombstone."""
    lines = "".join(f"{k}|{NULL if v is None else v}\n" for k, v in pairs)
    harness.kafka_tool(
        harness.CONSOLE_PRODUCER, "--bootstrap-server", bootstrap, "--topic", topic,
        "--reader-property", "parse.key=true",
        "--reader-property", "key.separator=|",
        "--reader-property", f"null.marker={NULL}",
        "--command-property", "acks=all",
        input=lines,
    ).check("console producer")


def read_all(bootstrap: str, topic: str) -> list:
    msgs = harness.consume_partitions(bootstrap, topic, [0], timeout=60)
    return [(m.offset(), m.key().decode(), None if m.value() is None else m.value().decode()) for m in msgs]


def wait_compacted(bootstrap: str, topic: str, newest: dict, timeout: float = 60) -> list:
    """Roll segments with filler records until only each key's newest value is left (and no
    tombstone past delete.retention.ms); returns the log's records."""
    p = harness.producer(bootstrap, **{"acks": "all", "linger.ms": 0})
    deadline = time.monotonic() + timeout
    n = 0
    while True:
        harness.produce_all(p, topic, [{"partition": 0, "key": b"filler-%d" % n, "value": b"f"}])
        n += 1
        got = read_all(bootstrap, topic)
        keyed = [(o, k, v) for o, k, v in got if not k.startswith("filler")]
        keys = [k for _, k, _ in keyed]
        live = {k for k, v in newest.items() if v is not None}
        if len(keys) == len(set(keys)) and set(keys) == live:
            return got
        if time.monotonic() > deadline:
            raise harness.HarnessError(
                f"not compacted within {timeout:.0f} s: {len(keyed)} keyed records for {len(live)} live keys")
        time.sleep(SEGMENT_MS / 1000 + 0.2)


def newest_offsets(bootstrap: str, topic: str, newest: dict) -> dict:
    """key -> (offset, value) of the newest record of each key, as the log holds it now."""
    out = {}
    for o, k, v in read_all(bootstrap, topic):
        if k in newest:
            out[k] = (o, v)
    return out


def test_compaction_in_a_cluster_and_after_a_failover(broker_factory, etcd, tmp_path, topic):
    brokers = start_cluster(broker_factory, etcd, tmp_path / "shared", **{"log.cleaner.backoff.ms": 200})
    bootstrap = bootstrap_of(brokers)
    harness.create_topic(bootstrap, topic, partitions=1, config={
        "cleanup.policy": "compact",
        "segment.ms": str(SEGMENT_MS),
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": str(DELETE_RETENTION_MS),
    })
    owner = wait_all_led(bootstrap, topic, 1)[0]

    newest: dict = {}
    for r in range(4):
        pairs = [(f"key-{k:02d}", None if (r == 3 and k % 5 == 0) else f"v{r}-{k:02d}") for k in range(KEYS)]
        java_produce(bootstrap, topic, pairs)
        newest.update(dict(pairs))
        time.sleep(SEGMENT_MS / 1000 + 0.1)
    written = 4 * KEYS
    before = newest_offsets(bootstrap, topic, newest)
    got = wait_compacted(bootstrap, topic, newest)
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets)), "offsets increase"
    assert len([1 for _, k, _ in got if not k.startswith("filler")]) < written, "older values were removed"
    by_key = {k: (o, v) for o, k, v in got}
    for key, value in newest.items():
        if value is None:
            assert key not in by_key, f"tombstoned {key} gone after delete.retention.ms"
        else:
            assert by_key[key] == (before[key][0], value), f"{key}: newest value at its own offset"

    # The owner dies; the new owner serves the compacted log and compacts what comes next.
    victim = brokers[owner - 1]
    victim.kill()
    bootstrap = bootstrap_of(brokers)
    new_owner = wait_all_led(bootstrap, topic, 1, exclude=(owner,), timeout=60)[0]
    assert new_owner != owner
    pairs = [(f"key-{k:02d}", f"after-{k:02d}") for k in range(0, KEYS, 2)]
    java_produce(bootstrap, topic, pairs)
    newest.update(dict(pairs))
    time.sleep(SEGMENT_MS / 1000 + 0.1)
    before = newest_offsets(bootstrap, topic, newest)
    got = wait_compacted(bootstrap, topic, newest)
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets)), "offsets increase"
    by_key = {k: (o, v) for o, k, v in got}
    for key, value in newest.items():
        if value is not None:
            assert by_key[key] == (before[key][0], value), f"{key}: newest value at its own offset"
    log = victim.log_text()
    assert "panicked" not in log
    for b in brokers:
        if b.running:
            assert "panicked" not in b.log_text()

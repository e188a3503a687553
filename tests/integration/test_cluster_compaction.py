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


def high_watermark(bootstrap: str, topic: str) -> int:
    from confluent_kafka import TopicPartition
    c = harness.consumer(bootstrap)
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1]
    finally:
        c.close()


def keyed_offsets(got: list) -> list:
    return [o for o, k, _ in got if not k.startswith("filler")]


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
    # The rounds lie one after the other: 4 * KEYS records, the last round's key k at offset
    # 3 * KEYS + k. So every record below 3 * KEYS is a superseded value the cleaner must remove.
    assert high_watermark(bootstrap, topic) == written
    before = newest_offsets(bootstrap, topic, newest)
    live = sorted(k for k, v in newest.items() if v is not None)
    assert {k: before[k][0] for k in live} == {k: 3 * KEYS + int(k[4:]) for k in live}, before
    got = wait_compacted(bootstrap, topic, newest)
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets)), "offsets increase"
    left = [o for o in keyed_offsets(got) if o < 3 * KEYS]
    assert not left, f"{len(left)} superseded records not cleaned, e.g. offsets {left[:10]}"
    assert keyed_offsets(got) == [before[k][0] for k in live], "only the live keys' newest records are left"
    by_key = {k: (o, v) for o, k, v in got}
    for key, value in newest.items():
        if value is None:
            assert key not in by_key, f"tombstoned {key} gone after delete.retention.ms"
        else:
            assert by_key[key] == (before[key][0], value), f"{key}: newest value at its own offset"

    # Each switch was announced in the owner record before its swap files were made: the
    # record names the last one (its cleaned segment's base and the random part of its tag).
    import base64
    import json
    key = f"/sluice-test/owners/{topic}/0"
    kvs = etcd.call("/v3/kv/range", {"key": base64.b64encode(key.encode()).decode()}).get("kvs", [])
    record = json.loads(base64.b64decode(kvs[0]["value"]))
    assert record.get("switch", {}).get("base", -1) >= 0 and record["switch"]["id"] > 0, record

    # The owner dies; the new owner serves the compacted log and compacts what comes next.
    victim = brokers[owner - 1]
    victim.kill()
    bootstrap = bootstrap_of(brokers)
    wait_all_led(bootstrap, topic, 1, exclude=(owner,), timeout=60)
    # The even keys get newer values: their values of the last round (kept by the first
    # cleaning, at 3 * KEYS + k) are superseded; the new owner's cleaner must remove them.
    superseded = {3 * KEYS + k for k in range(0, KEYS, 2) if newest[f"key-{k:02d}"] is not None}
    assert superseded <= set(o for o, _ in by_key.values())
    pairs = [(f"key-{k:02d}", f"after-{k:02d}") for k in range(0, KEYS, 2)]
    java_produce(bootstrap, topic, pairs)
    newest.update(dict(pairs))
    time.sleep(SEGMENT_MS / 1000 + 0.1)
    before = newest_offsets(bootstrap, topic, newest)
    got = wait_compacted(bootstrap, topic, newest)
    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets)), "offsets increase"
    left = sorted(superseded & set(keyed_offsets(got)))
    assert not left, f"{len(left)} records superseded after the failover not cleaned, e.g. offsets {left[:10]}"
    by_key = {k: (o, v) for o, k, v in got}
    for key, value in newest.items():
        if value is None:
            assert key not in by_key, f"tombstoned {key} came back after the failover"
        else:
            assert by_key[key] == (before[key][0], value), f"{key}: newest value at its own offset"
    assert "panicked" not in victim.log_text()
    survivors = [b for b in brokers if b is not victim]
    assert all(b.running for b in survivors), "a surviving broker exited"
    for b in survivors:
        assert "panicked" not in b.log_text()

"""librdkafka (confluent-kafka) produce/consume round trip with every compression codec."""

import os
import time

import pytest

from harness import consume_partitions, create_topic, produce_all, producer

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N = 300
PARTITIONS = 2


def make_records(base_ts):
    recs = []
    for i in range(N):
        if i % 3 == 0:
            value = (f"compressible-{i}-" * 200).encode()  # ~3-4 KB, repetitive
        elif i % 3 == 1:
            value = os.urandom(64 + i)  # incompressible binary
        else:
            value = f"small {i} \u00e9\u2713".encode()
        headers = [("idx", str(i).encode()), ("kind", b"t%d" % (i % 3))]
        if i % 5 == 0:
            headers.append(("empty", b""))
            headers.append(("dup", b"1"))
            headers.append(("dup", b"2"))  # repeated header keys are kept in order
        recs.append({
            "partition": i % PARTITIONS,
            "key": None if i % 7 == 0 else f"key-{i}".encode(),
            "value": value,
            "headers": headers,
            "timestamp": base_ts + i,
        })
    return recs


@pytest.mark.parametrize("codec", CODECS)
def test_round_trip_with_codec(broker, topic, codec):
    from confluent_kafka import TIMESTAMP_CREATE_TIME

    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    base_ts = (int(time.time() * 1000) - 120_000) // 1000 * 1000
    recs = make_records(base_ts)
    p = producer(broker.bootstrap, **{"compression.type": codec, "linger.ms": 20, "batch.num.messages": 50,
                                      "acks": "all", "enable.idempotence": True})
    delivered = produce_all(p, topic, recs)

    msgs = consume_partitions(broker.bootstrap, topic, range(PARTITIONS), expected=N)
    assert len(msgs) == N
    by_part = {q: [m for m in msgs if m.partition() == q] for q in range(PARTITIONS)}
    for q in range(PARTITIONS):
        sent = [r for r in recs if r["partition"] == q]
        got = by_part[q]
        assert [m.offset() for m in got] == list(range(len(sent)))
        assert [m.offset() for m in delivered if m.partition() == q] == list(range(len(sent)))
        for r, m in zip(sent, got):
            assert m.value() == r["value"]
            assert m.key() == r["key"]
            assert (m.headers() or []) == r["headers"]
            assert m.timestamp() == (TIMESTAMP_CREATE_TIME, r["timestamp"])


@pytest.mark.parametrize("codec", ["gzip", "zstd"])
def test_compressed_batches_stored_compressed(broker, topic, codec):
    """With the topic's default compression.type=producer, the broker keeps the producer's
    compressed batches: the segment files are far smaller than the raw payload."""
    create_topic(broker.bootstrap, topic, partitions=1)
    value = b"sluice-" * 1000  # 7000 bytes, highly compressible
    n = 500
    p = producer(broker.bootstrap, **{"compression.type": codec, "linger.ms": 50, "batch.num.messages": 100})
    produce_all(p, topic, [{"partition": 0, "value": value} for _ in range(n)])
    on_disk = sum(f.stat().st_size for f in (broker.log_dir / f"{topic}-0").glob("*.log"))
    raw = n * len(value)
    assert 0 < on_disk < raw // 10, (on_disk, raw)
    msgs = consume_partitions(broker.bootstrap, topic, [0], expected=n)
    assert len(msgs) == n and all(m.value() == value for m in msgs)

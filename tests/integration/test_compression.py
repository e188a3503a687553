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


def _codecs_on_disk(log_file):
    """Compression codec of every batch in a segment file (attributes bits 0-2 at byte 21)."""
    data = log_file.read_bytes()
    codecs, pos = [], 0
    while pos + 61 <= len(data):
        length = int.from_bytes(data[pos + 8:pos + 12], "big")
        codecs.append(int.from_bytes(data[pos + 21:pos + 23], "big") & 7)
        pos += 12 + length
    return codecs


@pytest.mark.parametrize("topic_codec,producer_codec,expected_id", [("zstd", "none", 4), ("uncompressed", "gzip", 0), ("lz4", "snappy", 3)])
def test_topic_compression_type_recompresses(broker, topic, topic_codec, producer_codec, expected_id):
    """A topic's compression.type other than `producer` makes the broker recompress batches
    into that codec, keeping every record (values, keys, headers, timestamps) intact."""
    create_topic(broker.bootstrap, topic, partitions=1, config={"compression.type": topic_codec})
    base_ts = (int(time.time() * 1000) - 60_000) // 1000 * 1000
    recs = [{"partition": 0, "key": f"k{i}".encode(), "value": (f"v{i}-" * 50).encode(),
             "headers": [("i", str(i).encode())], "timestamp": base_ts + i} for i in range(200)]
    p = producer(broker.bootstrap, **{"compression.type": producer_codec, "linger.ms": 20, "acks": "all"})
    produce_all(p, topic, recs)
    msgs = consume_partitions(broker.bootstrap, topic, [0], expected=len(recs))
    assert [(m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in msgs] == \
        [(r["key"], r["value"], r["headers"], r["timestamp"]) for r in recs]
    codecs = _codecs_on_disk(next((broker.log_dir / f"{topic}-0").glob("*.log")))
    assert codecs and all(c == expected_id for c in codecs), codecs

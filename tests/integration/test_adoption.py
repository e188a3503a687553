"""Adoption: Sluice takes over a log directory written by real Apache Kafka.

Needs both the Kafka jars and the Sluice binary, so it runs only when the target is Sluice.
"""

import time

import pytest

from harness import consume_partitions, create_topic, produce_all, producer

PARTITIONS = 3
N = 3000


@pytest.mark.sluice_only
def test_sluice_adopts_kafka_log_dir(broker_factory, topic):
    kafka = broker_factory(kind="kafka", name="kafka-origin")
    create_topic(kafka.bootstrap, topic, partitions=PARTITIONS, config={"segment.bytes": "1048576"})
    base_ts = (int(time.time() * 1000) - 3_600_000) // 1000 * 1000
    recs = [{"partition": i % PARTITIONS, "key": b"key-%d" % i, "value": b"value-%06d-" % i + b"x" * (i % 900),
             "headers": [("n", b"%d" % i)], "timestamp": base_ts + i} for i in range(N)]
    # two producers: uncompressed and lz4, so both kinds of batches are on disk
    produce_all(producer(kafka.bootstrap, acks="all"), topic, recs[: N // 2])
    produce_all(producer(kafka.bootstrap, acks="all", **{"compression.type": "lz4"}), topic, recs[N // 2:])
    before = consume_partitions(kafka.bootstrap, topic, range(PARTITIONS), expected=N)
    assert len(before) == N
    kafka.stop()  # clean shutdown

    sluice = broker_factory(kind="sluice", log_dir=kafka.log_dir, name="sluice-adopter")
    after = consume_partitions(sluice.bootstrap, topic, range(PARTITIONS), expected=N)

    def view(msgs):
        return sorted((m.partition(), m.offset(), m.key(), m.value(), tuple(m.headers() or ()), m.timestamp())
                      for m in msgs)

    assert len(after) == N
    assert view(after) == view(before)

    # and it keeps appending where Kafka stopped
    ends = {q: sum(1 for r in recs if r["partition"] == q) for q in range(PARTITIONS)}
    more = produce_all(producer(sluice.bootstrap, acks="all"), topic,
                       [{"partition": q, "value": b"after-adoption"} for q in range(PARTITIONS)])
    assert sorted((m.partition(), m.offset()) for m in more) == sorted(ends.items())

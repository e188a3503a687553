"""kafka-producer-perf-test: 1,000,000 x 1 KiB records with acks=1 and acks=all
(idempotent, the Java producer's default), then every record is accounted for with
kafka-get-offsets and read back by librdkafka with assign()."""

import re
import time

import pytest

from harness import (GET_OFFSETS, PRODUCER_PERF, THROUGHPUT_JVM, HarnessError, consumer, create_topic,
                     parse_offsets)

NUM_RECORDS = 1_000_000
RECORD_SIZE = 1024
PARTITIONS = 2


def read_all(bootstrap, topic, ends, timeout=300):
    """Read every partition from offset 0 to its end offset; check density and sizes.

    Returns the number of records read.
    """
    from confluent_kafka import KafkaError, TopicPartition

    c = consumer(bootstrap, **{"fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 8388608})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in ends])
        next_off = {p: 0 for p in ends}
        bad_sizes = 0
        deadline = time.monotonic() + timeout
        while any(next_off[p] < ends[p] for p in ends):
            if time.monotonic() > deadline:
                raise HarnessError(f"read {next_off} of {ends} within {timeout}s")
            for m in c.consume(num_messages=20000, timeout=1.0):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise HarnessError(f"consume error: {err}")
                p, off = m.partition(), m.offset()
                assert off == next_off[p], f"partition {p}: expected offset {next_off[p]}, got {off}"
                next_off[p] = off + 1
                if len(m.value()) != RECORD_SIZE:
                    bad_sizes += 1
        assert bad_sizes == 0, f"{bad_sizes} records without {RECORD_SIZE}-byte values"
        assert next_off == ends
        return sum(next_off.values())
    finally:
        c.close()


@pytest.mark.long
@pytest.mark.parametrize("acks", ["1", "all"])
def test_producer_perf_million_records(kafka_tool, broker, topic, acks):
    create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    res = kafka_tool(
        PRODUCER_PERF,
        "--topic", topic,
        "--num-records", str(NUM_RECORDS),
        "--record-size", str(RECORD_SIZE),
        "--throughput", "-1",
        "--producer-props", f"bootstrap.servers={broker.bootstrap}", f"acks={acks}",
        "linger.ms=5", "batch.size=262144", "buffer.memory=67108864",
        jvm_opts=THROUGHPUT_JVM,
        timeout=400,
    )
    res.check("producer perf test")
    final = [l for l in res.out.splitlines() if "records sent" in l and "ms avg latency" in l]
    assert final, res.out
    sent = int(re.match(r"\s*(\d+) records sent", final[-1]).group(1))
    assert sent == NUM_RECORDS, final[-1]
    assert "Exception" not in res.err, res.err[-3000:]

    # kafka-get-offsets: latest offsets add up to exactly one million, earliest are 0
    latest = parse_offsets(kafka_tool(GET_OFFSETS, "--bootstrap-server", broker.bootstrap, "--topic", topic,
                                      "--time", "-1").check().out)
    earliest = parse_offsets(kafka_tool(GET_OFFSETS, "--bootstrap-server", broker.bootstrap, "--topic", topic,
                                        "--time", "-2").check().out)
    assert sorted(latest) == [(topic, p) for p in range(PARTITIONS)]
    assert sum(latest.values()) == NUM_RECORDS, latest
    assert set(earliest.values()) == {0}, earliest

    # librdkafka reads every record back (assign(), no group)
    ends = {p: o for (_, p), o in latest.items()}
    assert read_all(broker.bootstrap, topic, ends) == NUM_RECORDS

"""Console producer -> console consumer (org.apache.kafka.tools.ConsoleProducer /
org.apache.kafka.tools.consumer.ConsoleConsumer) with keys, headers and --partition."""

import pytest

from harness import CONSOLE_CONSUMER, CONSOLE_PRODUCER, GET_OFFSETS, create_topic, parse_offsets

# (headers, key, value); values avoid the separators used below (tab, '|').
RECORDS = [
    ([("h1", "v1"), ("h2", "v2")], "k1", "hello"),
    ([("trace", "abc-123")], "k2", "world with spaces"),
    ([("h1", "x")], "k1", "h\u00e9llo w\u00f6rld \u2713"),
    ([("a", "1"), ("b", "2"), ("c", "3")], "k3", "{\"json\": [1, 2, 3]}"),
    ([("only", "header")], "k2", "second for k2"),
] + [([("n", str(i))], f"key-{i % 7}", f"value-{i:04d}") for i in range(40)]


def producer_input(records):
    lines = []
    for headers, key, value in records:
        hdr = ",".join(f"{k}:{v}" for k, v in headers)
        lines.append(f"{hdr}\t{key}|{value}")
    return "\n".join(lines) + "\n"


def console_produce(kafka_tool, broker, topic, records):
    res = kafka_tool(
        CONSOLE_PRODUCER, "--bootstrap-server", broker.bootstrap, "--topic", topic,
        "--reader-property", "parse.key=true",
        "--reader-property", "key.separator=|",
        "--reader-property", "parse.headers=true",
        "--command-property", "acks=all",
        input=producer_input(records),
    )
    res.check("console producer")
    return res


def console_consume(kafka_tool, broker, topic, partition, *extra, idle_timeout_ms=30000):
    res = kafka_tool(
        CONSOLE_CONSUMER, "--bootstrap-server", broker.bootstrap, "--topic", topic,
        "--partition", str(partition), *extra,
        "--formatter-property", "print.key=true",
        "--formatter-property", "print.headers=true",
        "--formatter-property", "print.partition=true",
        "--formatter-property", "print.offset=true",
        "--timeout-ms", str(idle_timeout_ms),
    )
    res.check("console consumer")
    out = []
    for line in res.out.splitlines():
        if not line:
            continue
        part, off, hdrs, key, value = line.split("\t", 4)
        assert part.startswith("Partition:") and off.startswith("Offset:"), line
        headers = [] if hdrs == "NO_HEADERS" else [tuple(h.split(":", 1)) for h in hdrs.split(",")]
        out.append((int(part.split(":")[1]), int(off.split(":")[1]), (headers, key, value)))
    return out, res


def end_offsets(kafka_tool, broker, topic):
    res = kafka_tool(GET_OFFSETS, "--bootstrap-server", broker.bootstrap, "--topic", topic, "--time", "-1")
    res.check("get offsets")
    return {p: o for (t, p), o in parse_offsets(res.out).items() if t == topic}


def test_console_round_trip_keys_headers_partitions(kafka_tool, broker, topic):
    create_topic(broker.bootstrap, topic, partitions=3)
    console_produce(kafka_tool, broker, topic, RECORDS)

    ends = end_offsets(kafka_tool, broker, topic)
    assert sorted(ends) == [0, 1, 2]
    assert sum(ends.values()) == len(RECORDS)

    got = []
    key_partition = {}
    for p, end in sorted(ends.items()):
        if end == 0:
            continue
        msgs, res = console_consume(kafka_tool, broker, topic, p, "--from-beginning", "--max-messages", str(end))
        assert f"Processed a total of {end} messages" in res.err, res.err
        assert [m[0] for m in msgs] == [p] * end
        assert [m[1] for m in msgs] == list(range(end)), "offsets are dense from 0"
        for _, _, rec in msgs:
            # the default partitioner maps a key to one partition
            assert key_partition.setdefault(rec[1], p) == p, f"key {rec[1]} in two partitions"
        got.extend(rec for _, _, rec in msgs)

    # every record came back exactly once, with its key and headers (in order)
    assert sorted(got) == sorted(RECORDS)
    # per-key order is preserved
    for key in {r[1] for r in RECORDS}:
        assert [r for r in got if r[1] == key] == [r for r in RECORDS if r[1] == key]


def test_console_consumer_offset_and_max_messages(kafka_tool, broker, topic):
    create_topic(broker.bootstrap, topic, partitions=1)
    records = [([("i", str(i))], f"k{i}", f"v{i}") for i in range(10)]
    console_produce(kafka_tool, broker, topic, records)

    msgs, _ = console_consume(kafka_tool, broker, topic, 0, "--offset", "4", "--max-messages", "3")
    assert [(m[1], m[2]) for m in msgs] == [(4, records[4]), (5, records[5]), (6, records[6])]

    # --timeout-ms ends a consumer that reached the end without --max-messages
    msgs, res = console_consume(kafka_tool, broker, topic, 0, "--from-beginning",
                                  idle_timeout_ms=5000)
    assert [m[2] for m in msgs] == records

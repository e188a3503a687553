"""kafka-topics --describe over DescribeTopicPartitions (API 75).

Kafka 4's admin client describes topics with DescribeTopicPartitions when the broker offers
it (test_api_versions.py checks that Sluice does), paging with a cursor at most
`--partition-size-limit-per-response` partitions at a time.
"""

from __future__ import annotations

import re

import harness
from harness import TOPIC_COMMAND, create_topic

PARTITION_LINE = re.compile(
    r"^\s*Topic: (\S+)\tPartition: (\d+)\tLeader: (-?\d+)\tReplicas: ([\d,]*)\tIsr: ([\d,]*)\tElr: ([\d,]*)"
    r"\tLastKnownElr: ([\d,]*)\s*$"
)


def described(out: str) -> dict:
    """(topic, partition) -> (leader, replicas, isr) from kafka-topics --describe output."""
    parts = {}
    for line in out.splitlines():
        m = PARTITION_LINE.match(line)
        if m:
            parts[(m.group(1), int(m.group(2)))] = (int(m.group(3)), m.group(4), m.group(5))
    return parts


def test_describe_pages_through_partitions(kafka_tool, broker, topic):
    a, b = f"{topic}-a", f"{topic}-b"
    create_topic(broker.bootstrap, a, partitions=3)
    create_topic(broker.bootstrap, b, partitions=2)
    for limit in ("1", "2", "2000"):
        res = kafka_tool(TOPIC_COMMAND, "--bootstrap-server", broker.bootstrap, "--describe",
                         "--topic", f"{topic}-.*", "--partition-size-limit-per-response", limit)
        res.check(f"kafka-topics --describe (limit {limit})")
        parts = described(res.out)
        expected = {(a, p) for p in range(3)} | {(b, p) for p in range(2)}
        assert set(parts) == expected, res.describe(f"limit {limit}")
        for (t, p), (leader, replicas, isr) in parts.items():
            assert leader == 1 and replicas == "1" and isr == "1", res.describe(f"{t}-{p}")
        for t, n in ((a, 3), (b, 2)):
            assert re.search(rf"^Topic: {re.escape(t)}\tTopicId: \S+\tPartitionCount: {n}\t", res.out, re.M), \
                res.describe(t)


def test_describe_all_topics_includes_internal_ones(kafka_tool, broker, topic):
    create_topic(broker.bootstrap, topic, partitions=1)
    # A group's FindCoordinator creates __consumer_offsets.
    c = harness.consumer(broker.bootstrap, **{"group.id": f"{topic}-g"})
    try:
        c.subscribe([topic])
        harness.wait_until(lambda: c.poll(0.5) is not None or c.assignment(), 60, "the group's assignment",
                           interval=0)
    finally:
        c.close()
    res = kafka_tool(TOPIC_COMMAND, "--bootstrap-server", broker.bootstrap, "--describe")
    res.check("kafka-topics --describe")
    topics = {t for (t, _) in described(res.out)}
    assert topic in topics and "__consumer_offsets" in topics, res.describe()
    res = kafka_tool(TOPIC_COMMAND, "--bootstrap-server", broker.bootstrap, "--describe", "--exclude-internal")
    res.check("kafka-topics --describe --exclude-internal")
    topics_without = {t for (t, _) in described(res.out)}
    assert topic in topics_without and "__consumer_offsets" not in topics_without, res.describe()


def test_describe_unknown_topic_fails(kafka_tool, broker):
    res = kafka_tool(TOPIC_COMMAND, "--bootstrap-server", broker.bootstrap, "--describe", "--topic",
                     "no-such-topic-dtp")
    assert res.rc != 0 and "does not exist" in res.out + res.err, res.describe()

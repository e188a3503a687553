"""OffsetCommit and OffsetFetch v10 (topics named by id, KIP-848) with the Java consumer of
`group.protocol=consumer`, which uses them once it knows every topic's id: what it commits,
a second consumer of the group resumes from, and kafka-consumer-groups (by name) reports."""

import re

import harness
from harness import CONSOLE_CONSUMER, create_topic, produce_all, producer
from test_metrics import samples

GROUPS_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
PARTITIONS = 3
RECORDS = 60


def consume(kafka_tool, bootstrap, topic, group, max_messages, timeout_ms=None):
    args = [CONSOLE_CONSUMER, "--bootstrap-server", bootstrap, "--topic", topic, "--group", group,
            "--from-beginning", "--max-messages", str(max_messages),
            "--consumer-property", "group.protocol=consumer"]
    if timeout_ms:
        args += ["--timeout-ms", str(timeout_ms)]
    res = kafka_tool(*args, timeout=120)
    return [l for l in res.out.splitlines() if l.startswith("v")], res


def requests_at(port, api, version):
    return sum(v for name, labels, v in samples(port)
               if name == "kafka_network_requestmetrics_requests_total"
               and labels.get("request") == api and labels.get("version") == str(version))


def test_consumer_protocol_commits_and_resumes_by_topic_id(broker_factory, kafka_tool, topic):
    port = harness.free_port()
    b = broker_factory(overrides={"sluice.metrics.listener": f"127.0.0.1:{port}"})
    create_topic(b.bootstrap, topic, partitions=PARTITIONS)
    p = producer(b.bootstrap)
    produce_all(p, topic, [{"partition": i % PARTITIONS, "value": f"v{i}".encode()} for i in range(RECORDS)])
    group = f"{topic}-g"
    got, res = consume(kafka_tool, b.bootstrap, topic, group, RECORDS)
    assert len(got) == RECORDS, res
    if harness.TARGET == "sluice":  # the request metrics of Sluice's metrics listener
        assert requests_at(port, "OffsetCommit", 10) > 0, "the Java consumer committed by topic id"

    # A second member of the group resumes where the first committed: only the new record.
    produce_all(p, topic, [{"partition": 1, "value": b"v-after"}])
    got, res = consume(kafka_tool, b.bootstrap, topic, group, 2, timeout_ms=15000)
    assert got == ["v-after"], res
    if harness.TARGET == "sluice":
        assert requests_at(port, "OffsetFetch", 10) > 0, "the Java consumer fetched offsets by topic id"

    # The admin tool reads the same offsets by name.
    res = kafka_tool(GROUPS_COMMAND, "--bootstrap-server", b.bootstrap, "--describe", "--group", group,
                     timeout=120).check("kafka-consumer-groups --describe")
    offsets = {}
    for line in res.out.splitlines():
        cols = line.split()
        if len(cols) >= 5 and cols[1] == topic and re.fullmatch(r"\d+", cols[2]):
            offsets[int(cols[2])] = int(cols[3])
    per = RECORDS // PARTITIONS
    assert offsets == {0: per, 1: per + 1, 2: per}, res.out

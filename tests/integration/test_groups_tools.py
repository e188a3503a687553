"""Consumer groups through Kafka's own tools: kafka-console-consumer --group,
kafka-consumer-perf-test, and kafka-consumer-groups (list, describe with lag, members,
state, reset-offsets, delete-offsets, delete)."""

from __future__ import annotations

import re

import pytest

import harness

GROUPS_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
PARTITIONS = 3
RECORDS = 300

pytestmark = pytest.mark.broker_config(**{"group.initial.rebalance.delay.ms": 0})


def produce(bootstrap, topic, n=RECORDS, partitions=PARTITIONS):
    harness.create_topic(bootstrap, topic, partitions=partitions)
    p = harness.producer(bootstrap)
    harness.produce_all(p, topic, [{"partition": i % partitions, "value": f"v{i}".encode()} for i in range(n)])


def groups_tool(kafka_tool, bootstrap, *args):
    return kafka_tool(GROUPS_COMMAND, "--bootstrap-server", bootstrap, *args, timeout=120)


def describe_rows(text):
    """(topic, partition) -> (current offset, log end offset, lag) from --describe output."""
    rows = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[2].isdigit():
            rows[(parts[1], int(parts[2]))] = (parts[3], parts[4], parts[5])
    return rows


def test_console_consumer_group_commits_and_tool_shows_lag(broker, topic, kafka_tool):
    produce(broker.bootstrap, topic)
    group = f"g-{topic}"
    r = kafka_tool(
        harness.CONSOLE_CONSUMER, "--bootstrap-server", broker.bootstrap, "--topic", topic,
        "--group", group, "--from-beginning", "--max-messages", str(RECORDS), timeout=120,
    ).check("console consumer")
    assert len([l for l in r.out.splitlines() if l.startswith("v")]) == RECORDS

    r = groups_tool(kafka_tool, broker.bootstrap, "--list").check("--list")
    assert group in r.out.split()

    r = groups_tool(kafka_tool, broker.bootstrap, "--describe", "--group", group).check("--describe")
    rows = describe_rows(r.out)
    assert set(rows) == {(topic, p) for p in range(PARTITIONS)}, r.out
    assert all(lag == "0" and cur == end for cur, end, lag in rows.values()), r.out

    # More records: lag appears, computed from the committed offsets.
    p = harness.producer(broker.bootstrap)
    harness.produce_all(p, topic, [{"partition": 0, "value": b"x"} for _ in range(10)])
    r = groups_tool(kafka_tool, broker.bootstrap, "--describe", "--group", group).check("--describe")
    assert describe_rows(r.out)[(topic, 0)][2] == "10", r.out

    r = groups_tool(kafka_tool, broker.bootstrap, "--describe", "--group", group, "--state").check("--state")
    assert "Empty" in r.out, r.out
    r = groups_tool(kafka_tool, broker.bootstrap, "--describe", "--group", group, "--members").check("--members")
    assert "has no active members" in r.out or "CONSUMER-ID" in r.out, r.out


def test_reset_offsets_and_delete(broker, topic, kafka_tool):
    produce(broker.bootstrap, topic)
    group = f"g-{topic}"
    base = ["--reset-offsets", "--group", group, "--topic", topic]

    # Dry run changes nothing (there are no committed offsets yet).
    r = groups_tool(kafka_tool, broker.bootstrap, *base, "--to-latest", "--dry-run").check("dry-run")
    assert str(RECORDS // PARTITIONS) in r.out, r.out
    r = groups_tool(kafka_tool, broker.bootstrap, "--describe", "--group", group)
    assert not describe_rows(r.out), r.out

    groups_tool(kafka_tool, broker.bootstrap, *base, "--to-latest", "--execute").check("to-latest")
    rows = describe_rows(groups_tool(kafka_tool, broker.bootstrap, "--describe", "--group", group).out)
    assert len(rows) == PARTITIONS, rows
    assert all(cur == str(RECORDS // PARTITIONS) for cur, _, _ in rows.values()), rows

    groups_tool(kafka_tool, broker.bootstrap, *base, "--shift-by", "-7", "--execute").check("shift-by")
    rows = describe_rows(groups_tool(kafka_tool, broker.bootstrap, "--describe", "--group", group).out)
    assert len(rows) == PARTITIONS, rows
    assert all(cur == str(RECORDS // PARTITIONS - 7) and lag == "7" for cur, _, lag in rows.values()), rows

    groups_tool(kafka_tool, broker.bootstrap, *base, "--to-earliest", "--execute").check("to-earliest")
    rows = describe_rows(groups_tool(kafka_tool, broker.bootstrap, "--describe", "--group", group).out)
    assert len(rows) == PARTITIONS, rows
    assert all(cur == "0" for cur, _, _ in rows.values()), rows

    groups_tool(kafka_tool, broker.bootstrap, *base, "--to-datetime", "2999-01-01T00:00:00.000", "--execute").check("to-datetime")
    rows = describe_rows(groups_tool(kafka_tool, broker.bootstrap, "--describe", "--group", group).out)
    assert len(rows) == PARTITIONS, rows
    assert all(cur == str(RECORDS // PARTITIONS) for cur, _, _ in rows.values()), rows

    r = groups_tool(kafka_tool, broker.bootstrap, "--delete-offsets", "--group", group, "--topic", f"{topic}:0").check("delete-offsets")
    rows = describe_rows(groups_tool(kafka_tool, broker.bootstrap, "--describe", "--group", group).out)
    assert (topic, 0) not in rows or rows[(topic, 0)][0] == "-", rows
    assert (topic, 1) in rows

    groups_tool(kafka_tool, broker.bootstrap, "--delete", "--group", group).check("delete")
    r = groups_tool(kafka_tool, broker.bootstrap, "--list").check("--list")
    assert group not in r.out.split()


def test_consumer_perf_test_with_group(broker, topic, kafka_tool):
    produce(broker.bootstrap, topic, n=2000)
    r = kafka_tool(
        harness.CONSUMER_PERF, "--bootstrap-server", broker.bootstrap, "--topic", topic,
        "--messages", "2000", "--group", f"perf-{topic}", "--timeout", "60000", timeout=180,
    ).check("consumer perf test")
    # The data line: start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, ...
    data = [l for l in r.out.splitlines() if re.match(r"^\d{4}-", l)]
    assert data and int(data[-1].split(",")[4].strip()) >= 2000, r.out


def test_java_consumer_with_kip848_protocol(broker, topic, kafka_tool):
    produce(broker.bootstrap, topic)
    group = f"g848-{topic}"
    r = kafka_tool(
        harness.CONSOLE_CONSUMER, "--bootstrap-server", broker.bootstrap, "--topic", topic,
        "--group", group, "--from-beginning", "--max-messages", str(RECORDS),
        "--consumer-property", "group.protocol=consumer", timeout=120,
    ).check("console consumer, group.protocol=consumer")
    assert len([l for l in r.out.splitlines() if l.startswith("v")]) == RECORDS
    rows = describe_rows(groups_tool(kafka_tool, broker.bootstrap, "--describe", "--group", group).check("--describe").out)
    assert set(rows) == {(topic, p) for p in range(PARTITIONS)}, rows
    assert all(lag == "0" for _, _, lag in rows.values()), rows

"""Kafka's `kafka-dump-log --offsets-decoder` (DumpLogSegments) decodes the broker's
__consumer_offsets segments: offset commits, classic group metadata and the KIP-848 consumer
group records, written by a classic and a group.protocol=consumer Java consumer."""

from __future__ import annotations

import json
import re

import pytest

import harness

PARTITIONS = 3
RECORDS = 90

pytestmark = [
    pytest.mark.skipif(not harness.kafka_libs_present(), reason="Kafka jars not installed"),
    # One __consumer_offsets partition holds every group (Kafka's harness already uses 1).
    pytest.mark.broker_config(**{
        "group.initial.rebalance.delay.ms": 0,
        "offsets.topic.num.partitions": 1,
    }),
]

RECORD_RE = re.compile(r"^\| offset: \d+ .*? key: (.*?) payload: (.*)$")


def consume(kafka_tool, bootstrap, topic, group, protocol):
    r = kafka_tool(
        harness.CONSOLE_CONSUMER, "--bootstrap-server", bootstrap, "--topic", topic,
        "--group", group, "--from-beginning", "--max-messages", str(RECORDS),
        "--consumer-property", f"group.protocol={protocol}", timeout=120,
    ).check(f"console consumer, group.protocol={protocol}")
    assert len([l for l in r.out.splitlines() if l.startswith("v")]) == RECORDS


def test_dump_log_decodes_consumer_offsets(broker, topic, kafka_tool):
    harness.create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    p = harness.producer(broker.bootstrap)
    harness.produce_all(p, topic, [{"partition": i % PARTITIONS, "value": f"v{i}".encode()} for i in range(RECORDS)])
    consume(kafka_tool, broker.bootstrap, topic, f"classic-{topic}", "classic")
    consume(kafka_tool, broker.bootstrap, topic, f"kip848-{topic}", "consumer")
    broker.stop()

    logs = sorted((broker.log_dir / "__consumer_offsets-0").glob("*.log"))
    assert logs
    keys = []
    for log in logs:
        res = kafka_tool(harness.DUMP_LOG_SEGMENTS, "--files", str(log), "--offsets-decoder", timeout=180)
        res.check("kafka-dump-log --offsets-decoder")
        text = res.out + res.err
        assert "Exception" not in text and "Error" not in text and "Unknown" not in text, text[:5000]
        for line in res.out.splitlines():
            m = RECORD_RE.match(line)
            if m:
                key = json.loads(m.group(1))
                payload = m.group(2)
                keys.append(key)
                if payload != "<DELETE>":
                    json.loads(payload)  # the value decoded to JSON
    types = {str(k.get("type")) for k in keys}
    groups = {k.get("data", {}).get("group") for k in keys}
    # 1 OffsetCommit, 2 GroupMetadata, 3 ConsumerGroupMetadata, 5 ConsumerGroupMemberMetadata,
    # 6/7 target assignment, 8 current assignment (Kafka names the types by key version).
    assert {"1", "2"} <= types, types
    assert {"3", "5", "6", "7", "8"} <= types, types
    assert {f"classic-{topic}", f"kip848-{topic}"} <= groups, groups

"""kafka-topics (org.apache.kafka.tools.TopicCommand) against the broker under test."""

import re

from harness import TOPIC_COMMAND, wait_until


def topics(kafka_tool, broker, *args, timeout=120):
    return kafka_tool(TOPIC_COMMAND, "--bootstrap-server", broker.bootstrap, *args, timeout=timeout)


def listed(kafka_tool, broker):
    res = topics(kafka_tool, broker, "--list").check("kafka-topics --list")
    return set(res.out.split())


def describe(kafka_tool, broker, topic):
    """Return (partition count, {config: value}, [partition ids]) from kafka-topics --describe."""
    res = topics(kafka_tool, broker, "--describe", "--topic", topic).check("kafka-topics --describe")
    header = [l for l in res.out.splitlines() if l.startswith(f"Topic: {topic}\t") and "PartitionCount:" in l]
    assert len(header) == 1, res.out
    count = int(re.search(r"PartitionCount:\s*(\d+)", header[0]).group(1))
    rf = int(re.search(r"ReplicationFactor:\s*(\d+)", header[0]).group(1))
    assert rf == 1, header[0]
    cfg_text = re.search(r"Configs:\s*(.*)$", header[0]).group(1).strip()
    configs = dict(kv.split("=", 1) for kv in cfg_text.split(",") if kv)
    parts = sorted(int(m) for m in re.findall(r"\tPartition:\s*(\d+)\s+Leader:\s*1\b", res.out))
    return count, configs, parts


def test_create_describe_list(kafka_tool, broker, topic):
    res = topics(kafka_tool, broker, "--create", "--topic", topic, "--partitions", "3",
                 "--replication-factor", "1",
                 "--config", "retention.ms=3600000", "--config", "segment.bytes=1048576")
    res.check("kafka-topics --create")
    assert f"Created topic {topic}." in res.out

    count, configs, parts = describe(kafka_tool, broker, topic)
    assert count == 3
    assert parts == [0, 1, 2], "every partition described, led by node 1"
    assert configs.get("retention.ms") == "3600000", configs
    assert configs.get("segment.bytes") == "1048576", configs

    assert topic in listed(kafka_tool, broker)


def test_create_existing_topic_fails(kafka_tool, broker, topic):
    topics(kafka_tool, broker, "--create", "--topic", topic, "--partitions", "1").check()
    res = topics(kafka_tool, broker, "--create", "--topic", topic, "--partitions", "1")
    assert res.rc != 0, res.describe("second --create")
    assert "already exists" in (res.out + res.err), res.describe("second --create")
    # --if-not-exists makes it a no-op success
    topics(kafka_tool, broker, "--create", "--if-not-exists", "--topic", topic, "--partitions", "1").check()


def test_describe_missing_topic_fails(kafka_tool, broker):
    res = topics(kafka_tool, broker, "--describe", "--topic", "no-such-topic-here")
    assert res.rc != 0, res.describe("describe missing")
    assert "does not exist" in (res.out + res.err), res.describe("describe missing")


def test_alter_partitions(kafka_tool, broker, topic):
    topics(kafka_tool, broker, "--create", "--topic", topic, "--partitions", "2").check()
    assert describe(kafka_tool, broker, topic)[0] == 2

    topics(kafka_tool, broker, "--alter", "--topic", topic, "--partitions", "5").check("kafka-topics --alter")
    # metadata propagation is asynchronous in Kafka: bounded wait for the new count
    count, _, parts = wait_until(lambda: (lambda d: d if d[0] == 5 else None)(describe(kafka_tool, broker, topic)),
                                 60, "partition count 5", interval=1)
    assert parts == [0, 1, 2, 3, 4]

    # shrinking is refused
    res = topics(kafka_tool, broker, "--alter", "--topic", topic, "--partitions", "3")
    assert res.rc != 0, res.describe("shrink partitions")
    assert describe(kafka_tool, broker, topic)[0] == 5


def test_delete(kafka_tool, broker, topic):
    keep = topic + "-keep"
    topics(kafka_tool, broker, "--create", "--topic", topic, "--partitions", "2").check()
    topics(kafka_tool, broker, "--create", "--topic", keep, "--partitions", "1").check()
    assert {topic, keep} <= listed(kafka_tool, broker)

    topics(kafka_tool, broker, "--delete", "--topic", topic).check("kafka-topics --delete")
    wait_until(lambda: topic not in listed(kafka_tool, broker), 60, f"{topic} gone from --list", interval=1)
    assert keep in listed(kafka_tool, broker), "deleting one topic must not delete another"
    res = topics(kafka_tool, broker, "--describe", "--topic", topic)
    assert res.rc != 0, res.describe("describe deleted topic")


def test_clients_cannot_append_to_internal_topics(broker, topic):
    """Only their coordinators write __consumer_offsets and __transaction_state: a client's
    produce to them is refused with INVALID_TOPIC_EXCEPTION (Kafka's "Cannot append to
    internal topic"), so nothing a client sends is replayed into group or transaction state
    at the next load."""
    import harness
    from confluent_kafka import KafkaError, TopicPartition

    harness.create_topic(broker.bootstrap, topic, partitions=1)
    c = harness.consumer(broker.bootstrap, **{"group.id": f"{topic}-g"})
    try:
        c.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)  # creates __consumer_offsets
    finally:
        c.close()
    p = harness.producer(broker.bootstrap, **{"enable.idempotence": False, "retries": 0})
    got = []
    p.produce("__consumer_offsets", key=b"k", value=b"v", partition=0, on_delivery=lambda err, msg: got.append(err))
    assert p.flush(30) == 0
    assert len(got) == 1 and got[0] is not None and got[0].code() == KafkaError.TOPIC_EXCEPTION, got

"""Dynamic broker configs: kafka-configs --entity-type brokers --alter/--describe, cluster-wide
(--entity-default) and per broker, their sources and synonyms, taking effect on live topics
without a restart, kept across a restart, read-only names refused with Kafka's error; and in
cluster mode a change made through one broker seen and applied by another."""

import json
import re
import time

import pytest

from harness import CONFIG_COMMAND, create_topic, producer, produce_all, wait_until, consumer

from confluent_kafka import TopicPartition


def configs(kafka_tool, bootstrap, *args):
    return kafka_tool(CONFIG_COMMAND, "--bootstrap-server", bootstrap, *args)


def parse(out: str) -> dict:
    """``  name=value sensitive=... synonyms={...}`` lines -> {name: (value, synonyms)}."""
    res = {}
    for line in out.splitlines():
        m = re.match(r"^\s+([a-zA-Z0-9._-]+)=(.*?) sensitive=(true|false) synonyms=\{(.*)\}\s*$", line)
        if m:
            res[m.group(1)] = (m.group(2), m.group(4))
    return res


def describe(kafka_tool, bootstrap, *entity, all_=False):
    args = ["--describe", "--entity-type", *entity]
    if all_:
        args.append("--all")
    res = configs(kafka_tool, bootstrap, *args).check("kafka-configs --describe")
    return parse(res.out), res.out


def alter(kafka_tool, bootstrap, *entity_and_change):
    return configs(kafka_tool, bootstrap, "--alter", "--entity-type", *entity_and_change)


REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
DEFAULT = ("brokers", "--entity-default")
BROKER1 = ("brokers", "--entity-name", "1")


@pytest.mark.broker_config(**{"log.segment.bytes": 2097152})
def test_alter_describe_delete_with_sources_and_restart(kafka_tool, broker, topic):
    b = broker.bootstrap
    alter(kafka_tool, b, *DEFAULT, "--add-config", "log.retention.ms=3600000,num.io.threads=4").check()
    res = alter(kafka_tool, b, *BROKER1, "--add-config", "log.segment.bytes=3145728,message.max.bytes=2000000")
    res.check()
    assert "Completed updating config for broker 1." in res.out, res.out

    cfg, out = describe(kafka_tool, b, *DEFAULT)
    assert "Default configs for brokers in the cluster are:" in out, out
    assert cfg["log.retention.ms"] == ("3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000"), out
    assert cfg["num.io.threads"] == ("4", "DYNAMIC_DEFAULT_BROKER_CONFIG:num.io.threads=4"), out

    cfg, out = describe(kafka_tool, b, *BROKER1)
    assert cfg["log.segment.bytes"] == ("3145728", "DYNAMIC_BROKER_CONFIG:log.segment.bytes=3145728, "
                                        "STATIC_BROKER_CONFIG:log.segment.bytes=2097152, "
                                        "DEFAULT_CONFIG:log.segment.bytes=1073741824"), out
    assert cfg["message.max.bytes"] == ("2000000", "DYNAMIC_BROKER_CONFIG:message.max.bytes=2000000, "
                                        "DEFAULT_CONFIG:message.max.bytes=1048588"), out
    assert "log.retention.ms" not in cfg, "only this broker's own dynamic configs without --all"

    cfg, out = describe(kafka_tool, b, *BROKER1, all_=True)
    assert cfg["log.retention.ms"][0] == "3600000", out
    assert cfg["log.retention.ms"][1].startswith("DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000, "), out
    assert cfg["log.retention.hours"] == ("168", "DEFAULT_CONFIG:log.retention.hours=168"), out

    # A topic without overrides inherits them, with Kafka's sources.
    create_topic(b, topic, partitions=1)
    cfg, out = describe(kafka_tool, b, "topics", "--entity-name", topic, all_=True)
    assert cfg["retention.ms"][0] == "3600000", out
    assert cfg["retention.ms"][1].startswith("DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000"), out
    assert cfg["segment.bytes"][0] == "3145728", out
    assert cfg["segment.bytes"][1].startswith("DYNAMIC_BROKER_CONFIG:log.segment.bytes=3145728, "
                                              "STATIC_BROKER_CONFIG:log.segment.bytes=2097152"), out
    assert cfg["max.message.bytes"][0] == "2000000", out

    # Kept across a restart.
    broker.restart()
    cfg, out = describe(kafka_tool, b, *BROKER1)
    assert cfg["log.segment.bytes"][0] == "3145728", out
    cfg, out = describe(kafka_tool, b, *DEFAULT)
    assert cfg["log.retention.ms"][0] == "3600000", out

    # Deleted: back to the static value and the default.
    alter(kafka_tool, b, *BROKER1, "--delete-config", "log.segment.bytes,message.max.bytes").check()
    alter(kafka_tool, b, *DEFAULT, "--delete-config", "log.retention.ms,num.io.threads").check()
    cfg, out = describe(kafka_tool, b, *BROKER1)
    assert "log.segment.bytes" not in cfg and "message.max.bytes" not in cfg, out
    cfg, out = describe(kafka_tool, b, *DEFAULT)
    assert "log.retention.ms" not in cfg and "num.io.threads" not in cfg, out
    cfg, out = describe(kafka_tool, b, "topics", "--entity-name", topic, all_=True)
    assert cfg["retention.ms"] == ("604800000", ""), out  # Kafka lists from log.retention.ms on
    assert cfg["segment.bytes"][0] == "2097152", out


def test_read_only_and_invalid_configs_are_refused(kafka_tool, broker):
    b = broker.bootstrap
    for entity in (BROKER1, DEFAULT):
        res = alter(kafka_tool, b, *entity, "--add-config", "num.partitions=3")
        assert res.rc != 0, res.describe()
        assert "InvalidRequestException: Cannot update these configs dynamically: [num.partitions]" in res.err, res.err
    res = alter(kafka_tool, b, *BROKER1, "--add-config", "log.retention.hours=5")
    assert "Cannot update these configs dynamically: [log.retention.hours]" in res.err, res.describe()
    res = alter(kafka_tool, b, *DEFAULT, "--add-config", "listener.security.protocol.map=PLAINTEXT:PLAINTEXT")
    assert "Cannot update these configs at default cluster level, broker id must be specified: "\
        "[listener.security.protocol.map]" in res.err, res.describe()
    res = alter(kafka_tool, b, *BROKER1, "--add-config", "log.segment.bytes=100")
    assert res.rc != 0 and "InvalidRequestException" in res.err and "log.segment.bytes" in res.err, res.describe()
    cfg, out = describe(kafka_tool, b, *BROKER1)
    assert cfg == {}, out
    cfg, out = describe(kafka_tool, b, *DEFAULT)
    assert "num.partitions" not in cfg and "log.segment.bytes" not in cfg, out


def _segments(broker, topic, partition=0) -> int:
    return len(list((broker.log_dir / f"{topic}-{partition}").glob("*.log")))


def _log_start(bootstrap, topic, partition=0) -> int:
    c = consumer(bootstrap)
    try:
        low, _high = c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return low
    finally:
        c.close()


RECORD = b"x" * 10_000


def _produce_mb(bootstrap, topic, mb: float, partition=0):
    p = producer(bootstrap, **{"linger.ms": 5, "compression.type": "none"})
    produce_all(p, topic, [{"value": RECORD, "partition": partition} for _ in range(int(mb * 100))])


@pytest.mark.broker_config(**{"log.retention.check.interval.ms": 1000})
def test_changed_defaults_apply_to_live_topics(kafka_tool, broker, topic):
    """A topic without an override picks up a changed log.* default at once (the next roll and
    retention check use it); a topic that overrides it keeps its own."""
    b = broker.bootstrap
    kept = topic + "-kept"
    create_topic(b, topic, partitions=1)
    create_topic(b, kept, partitions=1, config={"retention.ms": "604800000"})
    alter(kafka_tool, b, *DEFAULT, "--add-config", "log.segment.bytes=1048576").check()
    _produce_mb(b, topic, 3.5)
    _produce_mb(b, kept, 3.5)
    assert _segments(broker, topic) >= 3, list((broker.log_dir / f"{topic}-0").iterdir())
    assert _segments(broker, kept) >= 3
    assert _log_start(b, topic) == 0

    alter(kafka_tool, b, *DEFAULT, "--add-config", "log.retention.ms=1000").check()
    wait_until(lambda: _log_start(b, topic) > 0, 30, "the new retention default to delete old segments")
    time.sleep(2)
    assert _log_start(b, kept) == 0, "the topic's own retention.ms still applies"
    alter(kafka_tool, b, *DEFAULT, "--delete-config", "log.retention.ms,log.segment.bytes").check()


# ---------------------------------------------------------------- cluster mode (etcd)

@pytest.mark.sluice_only
def test_cluster_change_through_one_broker_applies_on_another(broker_factory, etcd, tmp_path, kafka_tool, topic):
    from cluster_support import leaders, start_cluster, wait_all_led

    shared = tmp_path / "shared"
    shared.mkdir()
    n1, n2 = start_cluster(broker_factory, etcd, shared, n=2)
    create_topic(n1.bootstrap, topic, partitions=2)
    wait_all_led(n1.bootstrap, topic, 2)
    # Broker 2 must own a partition, whatever the placement did: partition 1 is moved there
    # (and partition 0 to broker 1) with kafka-reassign-partitions, which pins them.
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": [p + 1], "log_dirs": ["any"]} for p in (0, 1)]}))
    kafka_tool(REASSIGN, "--bootstrap-server", n1.bootstrap, "--execute",
               "--reassignment-json-file", str(plan)).check("kafka-reassign-partitions --execute")

    def placed():
        now = leaders(n1.bootstrap, topic)
        assert now == {0: 1, 1: 2}, now
        return now

    wait_until(placed, 30, "partition 1 owned by broker 2, partition 0 by broker 1")
    p2 = 1

    # Through broker 1 only: the cluster-wide default, and broker 2's own config.
    alter(kafka_tool, n1.bootstrap, *DEFAULT, "--add-config", "log.segment.bytes=1048576").check()
    alter(kafka_tool, n1.bootstrap, "brokers", "--entity-name", "2", "--add-config",
          "log.roll.jitter.ms=5").check()

    def seen_on_2():
        cfg, _ = describe(kafka_tool, n2.bootstrap, "brokers", "--entity-name", "2", all_=True)
        return (cfg["log.segment.bytes"][1].startswith("DYNAMIC_DEFAULT_BROKER_CONFIG:log.segment.bytes=1048576")
                and cfg["log.roll.jitter.ms"][0] == "5")
    wait_until(seen_on_2, 30, "broker 2 to describe the change made through broker 1")
    cfg, out = describe(kafka_tool, n2.bootstrap, "topics", "--entity-name", topic, all_=True)
    assert cfg["segment.bytes"][0] == "1048576", out

    # Broker 2 applies it: its partition rolls at 1 MiB.
    _produce_mb(n2.bootstrap, topic, 3.5, partition=p2)
    assert _segments(n2, topic, p2) >= 3, list((shared / f"{topic}-{p2}").iterdir())
    assert leaders(n1.bootstrap, topic)[p2] == 2

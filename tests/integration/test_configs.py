"""kafka-configs (kafka.admin.ConfigCommand): DescribeConfigs / IncrementalAlterConfigs."""

import os
import re

import pytest

from harness import CONFIG_COMMAND, TOPIC_COMMAND, create_topic, wait_until


def configs(kafka_tool, broker, *args):
    return kafka_tool(CONFIG_COMMAND, "--bootstrap-server", broker.bootstrap, *args)


def parse_describe(out: str) -> dict:
    """``  name=value sensitive=... synonyms={...}`` lines -> {name: value}."""
    res = {}
    for line in out.splitlines():
        m = re.match(r"^\s+([a-zA-Z0-9._-]+)=(.*?) sensitive=(true|false) synonyms=\{(.*)\}\s*$", line)
        if m:
            res[m.group(1)] = (m.group(2), m.group(4))
    return res


def describe_topic(kafka_tool, broker, topic, *extra):
    res = configs(kafka_tool, broker, "--describe", "--entity-type", "topics", "--entity-name", topic, *extra)
    res.check("kafka-configs --describe topics")
    return parse_describe(res.out), res.out


def test_describe_topic_shows_override(kafka_tool, broker, topic):
    create_topic(broker.bootstrap, topic, partitions=1, config={"retention.ms": "3600000"})
    cfg, out = describe_topic(kafka_tool, broker, topic)
    assert f"Dynamic configs for topic {topic} are:" in out, out
    assert cfg["retention.ms"][0] == "3600000", out
    assert "DYNAMIC_TOPIC_CONFIG:retention.ms=3600000" in cfg["retention.ms"][1], out
    # only the override is dynamic; defaults are not listed without --all
    assert "segment.bytes" not in cfg, out


def test_alter_add_and_delete_config(kafka_tool, broker, topic):
    create_topic(broker.bootstrap, topic, partitions=2)
    cfg, out = describe_topic(kafka_tool, broker, topic)
    assert "max.message.bytes" not in cfg and "retention.ms" not in cfg, out

    res = configs(kafka_tool, broker, "--alter", "--entity-type", "topics", "--entity-name", topic,
                  "--add-config", "max.message.bytes=2000000,retention.ms=7200000")
    res.check("kafka-configs --alter --add-config")
    assert f"Completed updating config for topic {topic}." in res.out, res.out

    cfg, out = describe_topic(kafka_tool, broker, topic)
    assert cfg["max.message.bytes"][0] == "2000000", out
    assert cfg["retention.ms"][0] == "7200000", out

    # the effective value also shows in kafka-topics --describe
    topics_out = kafka_tool(TOPIC_COMMAND, "--bootstrap-server", broker.bootstrap, "--describe",
                            "--topic", topic).check().out
    assert "max.message.bytes=2000000" in topics_out, topics_out

    res = configs(kafka_tool, broker, "--alter", "--entity-type", "topics", "--entity-name", topic,
                  "--delete-config", "retention.ms")
    res.check("kafka-configs --alter --delete-config")
    cfg, out = describe_topic(kafka_tool, broker, topic)
    assert "retention.ms" not in cfg, out
    assert cfg["max.message.bytes"][0] == "2000000", "deleting one override keeps the others"


def test_alter_rejects_invalid_value(kafka_tool, broker, topic):
    create_topic(broker.bootstrap, topic, partitions=1)
    res = configs(kafka_tool, broker, "--alter", "--entity-type", "topics", "--entity-name", topic,
                  "--add-config", "retention.ms=not-a-number")
    assert res.rc != 0, res.describe("invalid retention.ms")
    cfg, out = describe_topic(kafka_tool, broker, topic)
    assert "retention.ms" not in cfg, out


@pytest.mark.broker_config(**{"log.segment.bytes": 2097152, "log.retention.ms": 86400000})
def test_describe_broker_and_inherited_topic_defaults(kafka_tool, broker, topic):
    res = configs(kafka_tool, broker, "--describe", "--entity-type", "brokers", "--entity-name", "1")
    res.check("kafka-configs --describe brokers")
    assert "Dynamic configs for broker 1 are:" in res.out, res.out

    res = configs(kafka_tool, broker, "--describe", "--entity-type", "brokers", "--entity-name", "1", "--all")
    res.check("kafka-configs --describe brokers --all")
    cfg = parse_describe(res.out)
    assert "All configs for broker 1 are:" in res.out, res.out
    assert cfg["log.segment.bytes"][0] == "2097152", res.out
    assert "STATIC_BROKER_CONFIG:log.segment.bytes=2097152" in cfg["log.segment.bytes"][1], res.out
    assert cfg["log.retention.ms"][0] == "86400000", res.out
    assert cfg["node.id"][0] == "1", res.out

    # a topic without overrides inherits the broker's values
    create_topic(broker.bootstrap, topic, partitions=1)
    cfg, out = describe_topic(kafka_tool, broker, topic, "--all")
    assert cfg["segment.bytes"][0] == "2097152", out
    assert cfg["retention.ms"][0] == "86400000", out


@pytest.mark.sluice_only
@pytest.mark.broker_config(**{"sluice.worker.threads": 1})
def test_worker_threads_setting(kafka_tool, broker, topic):
    """sluice.worker.threads=1: the runtime reports one worker, DescribeConfigs shows the
    setting, and records produced over several connections all read back."""
    from harness import consume_partitions, produce_all, producer

    # The listener is bound before the broker logs its start line, so wait for the line.
    wait_until(lambda: "with 1 worker thread(s)" in broker.log_text(), 10,
               "the broker to log its worker thread count")
    res = configs(kafka_tool, broker, "--describe", "--entity-type", "brokers", "--entity-name", "1", "--all")
    res.check("kafka-configs --describe brokers --all")
    assert parse_describe(res.out)["sluice.worker.threads"][0] == "1", res.out

    create_topic(broker.bootstrap, topic, partitions=3)
    records = [{"key": b"%d" % i, "value": b"v%06d" % i, "partition": i % 3} for i in range(3000)]
    producers = [producer(broker.bootstrap, **{"linger.ms": 2}) for _ in range(3)]
    for n, p in enumerate(producers):
        produce_all(p, topic, records[n::3])
    got = consume_partitions(broker.bootstrap, topic, range(3), expected=len(records))
    assert sorted(m.value() for m in got) == sorted(r["value"] for r in records)


@pytest.mark.sluice_only
def test_worker_threads_default_is_one_per_cpu(broker):
    # What tokio's default reads (Rust's available_parallelism): the CPUs this process may
    # run on, bounded by a cgroup v2 CPU quota when there is one.
    cpus = len(os.sched_getaffinity(0))
    try:
        quota, period = open("/sys/fs/cgroup/cpu.max").read().split()
        if quota != "max":
            cpus = min(cpus, max(1, int(quota) // int(period)))
    except (OSError, ValueError):
        pass
    wait_until(lambda: f"with {cpus} worker thread(s)" in broker.log_text(), 10,
               "the broker to log its worker thread count")

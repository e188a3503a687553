"""Feature flags and the cluster APIs of Kafka's tools: kafka-features describe, upgrade,
downgrade (UpdateFeatures, kept across a restart and taken up by every broker of a cluster,
transactions then run at the new transaction.version), ListConfigResources through
kafka-configs and kafka-client-metrics, and kafka-cluster unregister (UnregisterBroker)."""

import re
import signal
import socket
import struct
import time

import pytest

import harness
from harness import CONFIG_COMMAND, create_topic, wait_until

FEATURES = "org.apache.kafka.tools.FeatureCommand"
CLUSTER_TOOL = "org.apache.kafka.tools.ClusterTool"
CLIENT_METRICS = "org.apache.kafka.tools.ClientMetricsCommand"

LINE = re.compile(r"^Feature: (\S+)\s+SupportedMinVersion: (\S+)\s+SupportedMaxVersion: (\S+)\s+"
                  r"FinalizedVersionLevel: (\S+)\s+Epoch: (\S+)")


def describe(kafka_tool, bootstrap) -> dict:
    """feature -> (min, max, finalized, epoch) as `kafka-features describe` prints them."""
    res = kafka_tool(FEATURES, "--bootstrap-server", bootstrap, "describe").check("kafka-features describe")
    out = {}
    for line in res.out.splitlines():
        m = LINE.match(line)
        if m:
            out[m.group(1)] = m.groups()[1:]
    assert out, res.out
    return out


INVALID_REQUEST = 42


def unregister_raw(port: int, broker_id: int):
    """UnregisterBroker v0 to the broker at `port`: (error code, error message)."""
    client_id = b"unregister-test"
    body = struct.pack(">hhih", 64, 0, 9, len(client_id)) + client_id + b"\x00"
    body += struct.pack(">i", broker_id) + b"\x00"
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(struct.pack(">i", len(body)) + body)
        data = b""
        while len(data) < 4 or len(data) < 4 + struct.unpack(">i", data[:4])[0]:
            chunk = s.recv(65536)
            assert chunk, "connection closed"
            data += chunk
    frame = data[4:]
    correlation, tags, _throttle, code = struct.unpack(">ibih", frame[:11])
    assert (correlation, tags) == (9, 0)
    n, shift, i = 0, 0, 11  # compact nullable string: its length + 1, an unsigned varint
    while True:
        n |= (frame[i] & 0x7F) << shift
        i += 1
        if not frame[i - 1] & 0x80:
            break
        shift += 7
    return code, frame[i:i + n - 1].decode() if n else ""


def features(kafka_tool, bootstrap, *args):
    return kafka_tool(FEATURES, "--bootstrap-server", bootstrap, *args)


def test_kafka_features_describe_upgrade_downgrade(kafka_tool, broker):
    b = broker.bootstrap
    before = describe(kafka_tool, b)
    assert before["transaction.version"][:3] == ("0", "2", "2"), before
    assert before["group.version"][:3] == ("0", "1", "1"), before

    # Refused as Kafka's controller refuses them, and nothing changes.
    res = features(kafka_tool, b, "upgrade", "--feature", "transaction.version=3")
    assert res.rc != 0 and "only supports versions 0-2" in res.out, res
    res = features(kafka_tool, b, "upgrade", "--feature", "transaction.version=1")
    assert res.rc != 0 and "Can't downgrade the version of this feature" in res.out, res
    res = features(kafka_tool, b, "downgrade", "--feature", "transaction.version=1", "--dry-run")
    assert res.rc == 0 and "transaction.version can be downgraded to 1." in res.out, res
    # Levels unchanged (Kafka's epoch is its metadata log's offset, which moves on its own).
    levels = lambda d: {f: v[:3] for f, v in d.items()}  # noqa: E731
    assert levels(describe(kafka_tool, b)) == levels(before)

    res = features(kafka_tool, b, "downgrade", "--feature", "transaction.version=1")
    assert "transaction.version was downgraded to 1." in res.check().out, res
    after = describe(kafka_tool, b)
    assert after["transaction.version"][2] == "1", after
    assert int(after["transaction.version"][3]) > int(before["transaction.version"][3]), (before, after)

    # Disabled, then upgraded back; group.version disabled.
    features(kafka_tool, b, "disable", "--feature", "group.version").check("kafka-features disable")
    assert describe(kafka_tool, b)["group.version"][2] == "0"
    if harness.TARGET == "sluice":
        broker.restart()
        kept = describe(kafka_tool, b)
        assert kept["transaction.version"][2] == "1" and kept["group.version"][2] == "0", kept
    features(kafka_tool, b, "upgrade", "--feature", "transaction.version=2", "--feature",
             "group.version=1").check("kafka-features upgrade")
    back = describe(kafka_tool, b)
    assert back["transaction.version"][2] == "2" and back["group.version"][2] == "1", back


def _group_errors(bootstrap, topic, group, protocol, seconds=15):
    """Poll a confluent_kafka consumer of `protocol` in `group` until it gets a record or
    `seconds` pass; returns (records, error texts)."""
    c = harness.consumer(bootstrap, **{"group.id": group, "group.protocol": protocol,
                                      "auto.offset.reset": "earliest"})
    errors, got = [], 0
    try:
        c.subscribe([topic])
        deadline = time.time() + seconds
        while time.time() < deadline and not got:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                errors.append(str(m.error()))
                if errors and protocol == "consumer":
                    break
            else:
                got += 1
    finally:
        c.close()
    return got, errors


def test_group_version_0_turns_the_consumer_protocol_off(kafka_tool, broker, topic):
    """At group.version 0 ConsumerGroupHeartbeat is answered UNSUPPORTED_VERSION, as Kafka
    answers it; the classic protocol keeps working; back at 1 the consumer protocol works."""
    b = broker.bootstrap
    create_topic(b, topic)
    harness.produce_all(harness.producer(b), topic, [{"value": b"v"}])
    features(kafka_tool, b, "disable", "--feature", "group.version").check("kafka-features disable")
    got, errors = _group_errors(b, topic, f"{topic}-848", "consumer")
    assert got == 0 and any("API version not supported" in e for e in errors), (got, errors)
    assert _group_errors(b, topic, f"{topic}-classic", "classic")[0] == 1
    features(kafka_tool, b, "upgrade", "--feature", "group.version=1").check("kafka-features upgrade")
    assert _group_errors(b, topic, f"{topic}-848b", "consumer")[0] == 1


@pytest.mark.skipif(harness.TARGET != "sluice", reason="the cluster half is Sluice's")
def test_transactions_follow_a_live_transaction_version_change_in_a_cluster(
        broker_factory, etcd, tmp_path, kafka_tool, topic):
    """transaction.version set to 1 through one broker is taken up by the other (its
    ApiVersions answer), and Java transactional producers then commit exactly once through
    the version-1 path."""
    from cluster_support import start_cluster, wait_all_led, bootstrap_of
    import test_transactions as t

    shared = tmp_path / "shared"
    shared.mkdir()
    n1, n2 = start_cluster(broker_factory, etcd, shared, n=2)
    features(kafka_tool, n1.bootstrap, "downgrade", "--feature", "transaction.version=1").check()
    wait_until(lambda: describe(kafka_tool, n2.bootstrap)["transaction.version"][2] == "1", 30,
               "broker 2 to finalize transaction.version 1")
    bootstrap = bootstrap_of([n1, n2])
    create_topic(n1.bootstrap, topic, partitions=t.PARTITIONS)
    wait_all_led(n1.bootstrap, topic, t.PARTITIONS)
    lines = t.run_java_program(tmp_path, "produce", "TxnClient", "produce", bootstrap, topic, t.PARTITIONS,
                               t.PRODUCERS, t.TXNS, t.PER_TXN, timeout=180)
    committed, _ = t.produced_keys([l.split(" ") for l in lines])
    rc = t.read(bootstrap, topic, range(t.PARTITIONS), "read_committed")
    t.assert_committed_exactly_once(rc, committed, "read_committed after a live change to transaction.version 1")


def test_list_config_resources_through_the_tools(kafka_tool, broker, topic):
    b = broker.bootstrap
    create_topic(b, topic)
    res = kafka_tool(CONFIG_COMMAND, "--bootstrap-server", b, "--describe", "--entity-type", "client-metrics")
    assert res.rc == 0 and "does not support" not in res.out + res.err, res
    res = kafka_tool(CLIENT_METRICS, "--bootstrap-server", b, "--list")
    assert res.rc == 0, res
    assert res.out.strip() == "", res
    # Groups: listed from ListGroups and ListConfigResources(GROUP) together.
    res = kafka_tool(CONFIG_COMMAND, "--bootstrap-server", b, "--describe", "--entity-type", "groups")
    assert res.rc == 0, res


def test_kafka_cluster_unregister_of_an_unknown_broker(kafka_tool, broker):
    res = kafka_tool(CLUSTER_TOOL, "unregister", "--bootstrap-server", broker.bootstrap, "--id", "77")
    assert res.rc != 0 and "Broker ID 77 is not currently registered" in res.out + res.err, res


@pytest.mark.skipif(harness.TARGET != "sluice", reason="Kafka unregisters a running broker")
def test_kafka_cluster_unregister_refuses_a_running_single_broker(kafka_tool, broker):
    res = kafka_tool(CLUSTER_TOOL, "unregister", "--bootstrap-server", broker.bootstrap, "--id", "1")
    assert res.rc != 0 and "Broker 1 cannot be unregistered now" in res.out + res.err, res


@pytest.mark.skipif(harness.TARGET != "sluice", reason="a Sluice cluster on etcd")
def test_kafka_cluster_unregister_in_a_cluster(broker_factory, etcd, tmp_path, kafka_tool, topic):
    """A running broker, which may still write, is refused. A broker that stopped answering
    (SIGSTOP: its listener still accepts, so no probe finds it dead) is unregistered once its
    lease has gone unrenewed past its write deadline, before the lease runs out: its
    partitions move; resumed, it registers again; nothing acknowledged is lost."""
    from cluster_support import start_cluster, wait_all_led, live_brokers, leaders, bootstrap_of

    shared = tmp_path / "shared"
    shared.mkdir()
    n1, n2, n3 = start_cluster(broker_factory, etcd, shared, n=3,
                               **{"sluice.cluster.lease.ms": 30000})
    create_topic(n1.bootstrap, topic, partitions=6)
    wait_all_led(n1.bootstrap, topic, 6)
    assert 3 in leaders(n1.bootstrap, topic).values()
    bootstrap = bootstrap_of([n1, n2, n3])
    harness.produce_all(harness.producer(bootstrap, acks="all"), topic,
                        [{"partition": i % 6, "value": f"before-{i}".encode()} for i in range(60)])

    def unregister(node):
        return kafka_tool(CLUSTER_TOOL, "unregister", "--bootstrap-server", n1.bootstrap, "--id", str(node))

    res = unregister(2)
    assert res.rc != 0 and "Broker 2 cannot be unregistered now" in res.out + res.err, res
    n3.proc.send_signal(signal.SIGSTOP)
    try:
        # Sent to broker 1 directly: the admin client would send it to whichever broker its
        # metadata names, broker 3 among them, which does not answer while stopped.
        code, message = unregister_raw(n1.port, 3)
        assert (code, "may still write" in message) == (INVALID_REQUEST, True), (code, message)
        deadline = time.time() + 40
        while code != 0:
            assert time.time() < deadline and code == INVALID_REQUEST, (code, message)
            time.sleep(1)
            code, message = unregister_raw(n1.port, 3)
        wait_until(lambda: set(leaders(n1.bootstrap, topic).values()) <= {1, 2}, 30,
                   "broker 3's partitions to move after its unregistration")
    finally:
        n3.proc.send_signal(signal.SIGCONT)
    wait_until(lambda: "registered in the cluster again" in n3.log_text(), 60, "broker 3 to register again")
    wait_until(lambda: live_brokers(n1.bootstrap) == [1, 2, 3], 30, "every broker back in the metadata")
    harness.produce_all(harness.producer(bootstrap, acks="all"), topic,
                        [{"partition": i % 6, "value": f"after-{i}".encode()} for i in range(60)])
    c = harness.consumer(bootstrap, **{"group.id": f"{topic}-check", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    seen = set()
    deadline = time.time() + 60
    while len(seen) < 120 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen.add(m.value().decode())
    c.close()
    expected = {f"before-{i}" for i in range(60)} | {f"after-{i}" for i in range(60)}
    assert seen == expected, sorted(expected - seen)[:10]

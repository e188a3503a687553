"""Several listeners per broker (Kafka's `listeners`, `advertised.listeners`,
`listener.security.protocol.map`, `inter.broker.listener.name`): a client is given the addresses
of the listener it came in on, in Metadata, DescribeCluster and FindCoordinator, on one broker
and in a cluster; brokers call each other on the inter-broker listener.

Each broker has an INTERNAL listener on 127.0.0.1 and an EXTERNAL one on 127.0.0.2 (another
loopback address, bound on its own): a client of EXTERNAL that were given an INTERNAL address
would reach the broker at 127.0.0.1, and the checks below tell the two apart. The test of one
broker runs against Apache Kafka too (SLUICE_TEST_TARGET=kafka).
"""

from __future__ import annotations

import subprocess

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

import harness
from harness import consume_partitions, create_topic, produce_all, producer, wait_until

EXTERNAL_HOST = "127.0.0.2"


def two_listeners(b, **extra) -> dict:
    """INTERNAL on the harness's port, EXTERNAL on another port of 127.0.0.2."""
    b.external_port = harness.free_port()
    b.external = f"{EXTERNAL_HOST}:{b.external_port}"
    props = {
        "listeners": f"INTERNAL://127.0.0.1:{b.port},EXTERNAL://{b.external}",
        "advertised.listeners": f"INTERNAL://127.0.0.1:{b.port},EXTERNAL://{b.external}",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "inter.broker.listener.name": "INTERNAL",
    }
    if b.kind == "kafka":
        props["listeners"] += f",CONTROLLER://127.0.0.1:{b.controller_port}"
        props["listener.security.protocol.map"] += ",CONTROLLER:PLAINTEXT"
    props.update(extra)
    return props


def brokers_seen(bootstrap: str) -> set:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return {(b.id, f"{b.host}:{b.port}") for b in md.brokers.values()}


def cluster_nodes(bootstrap: str) -> set:
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the answer
    d = admin.describe_cluster(request_timeout=10).result(timeout=15)
    return {(n.id, f"{n.host}:{n.port}") for n in d.nodes}


def coordinator(bootstrap: str, group: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    d = admin.describe_consumer_groups([group], request_timeout=10)[group].result(timeout=15)
    return f"{d.coordinator.host}:{d.coordinator.port}"


def committed_through(bootstrap: str, group: str, topic: str) -> int:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    req = ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])
    res = admin.list_consumer_group_offsets([req], request_timeout=10)[group].result(timeout=15)
    return res.topic_partitions[0].offset


def consume_as_group(bootstrap: str, topic: str, group: str, expected: int) -> int:
    """Read records as a member of ``group`` until ``expected`` arrived or 60 s passed, and
    commit them; returns how many were read."""
    import time

    c = harness.consumer(bootstrap, **{"group.id": group, "auto.offset.reset": "earliest",
                                       "enable.auto.commit": False})
    try:
        c.subscribe([topic])
        n, last = 0, None
        deadline = time.monotonic() + 60
        while n < expected and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                n, last = n + 1, m
        if last is not None:
            c.commit(message=last, asynchronous=False)
        return n
    finally:
        c.close()


def test_each_listener_answers_with_its_own_addresses(broker_factory, topic):
    b = broker_factory(start=False)
    b.overrides.update(two_listeners(b))
    b.start()
    assert brokers_seen(b.bootstrap) == {(1, b.bootstrap)}
    assert brokers_seen(b.external) == {(1, b.external)}
    assert cluster_nodes(b.external) == {(1, b.external)}

    # A group whose client bootstraps on EXTERNAL finds its coordinator there, and commits.
    create_topic(b.external, topic, partitions=1)
    produce_all(producer(b.external), topic, [{"value": b"v%d" % i, "partition": 0} for i in range(50)])
    group = f"{topic}-g"
    assert consume_as_group(b.external, topic, group, 50) == 50
    assert coordinator(b.external, group) == b.external
    assert coordinator(b.bootstrap, group) == b.bootstrap
    wait_until(lambda: committed_through(b.external, group, topic) == 50, 30, "the group's commit")


@pytest.mark.sluice_only
def test_a_cluster_gives_each_listener_its_own_addresses(broker_factory, tmp_path, topic):
    from cluster_support import EtcdServer, cluster_overrides

    etcd = EtcdServer(tmp_path / "etcd").start()
    try:
        shared = tmp_path / "shared"
        brokers = []
        for node in (1, 2, 3):
            b = broker_factory(start=False, log_dir=shared, kind="sluice", name=f"node{node}")
            b.overrides.update(cluster_overrides(etcd, node, shared, "/listeners"))
            b.overrides.update(two_listeners(b))
            b.start()
            brokers.append(b)
        internal = {(n + 1, b.bootstrap) for n, b in enumerate(brokers)}
        external = {(n + 1, b.external) for n, b in enumerate(brokers)}
        wait_until(lambda: brokers_seen(brokers[0].bootstrap) == internal, 30, "three brokers on INTERNAL")
        for b in brokers:
            assert brokers_seen(b.external) == external
            assert brokers_seen(b.bootstrap) == internal
            assert cluster_nodes(b.external) == external

        # A transaction through EXTERNAL: its coordinator sends the markers to the partitions'
        # owners on INTERNAL; a read_committed consumer on EXTERNAL reads every record.
        bootstrap = ",".join(b.external for b in brokers)
        create_topic(bootstrap, topic, partitions=3)
        p = producer(bootstrap, **{"transactional.id": f"{topic}-txn"})
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(30):
            p.produce(topic, value=b"t%d" % i, partition=i % 3)
        p.commit_transaction(30)
        got = consume_partitions(bootstrap, topic, range(3), expected=30, **{"isolation.level": "read_committed"})
        assert sorted(m.value() for m in got) == sorted(b"t%d" % i for i in range(30))
        group = f"{topic}-g"
        assert consume_as_group(bootstrap, topic, group, 30) == 30
        assert coordinator(bootstrap, group) in {b.external for b in brokers}
    finally:
        etcd.kill()


@pytest.mark.sluice_only
@pytest.mark.parametrize("props,message", [
    ({"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT", "listeners": "OTHER://127.0.0.1:{port}"},
     "no security protocol is defined for listener OTHER"),
    ({"listener.security.protocol.map": "PLAINTEXT:TLS"}, "unknown security protocol"),
    ({"inter.broker.listener.name": "NOPE"}, "it must name one of the listeners"),
])
def test_listener_misconfigurations_are_refused_with_their_reason(tmp_path, props, message):
    port = harness.free_port()
    conf = {"node.id": 1, "listeners": f"PLAINTEXT://127.0.0.1:{port}", "log.dirs": str(tmp_path / "data")}
    conf.update({k: v.format(port=port) for k, v in props.items()})
    harness.write_properties(tmp_path / "server.properties", conf)
    p = subprocess.run([str(harness.SLUICE_BIN), "serve", "--config", str(tmp_path / "server.properties")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert message in p.stdout + p.stderr, p.stdout + p.stderr

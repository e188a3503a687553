"""ACLs with Kafka's StandardAuthorizer semantics (`authorizer.class.name`, `super.users`,
`allow.everyone.if.no.acl.found`), managed with Kafka's own `kafka-acls` and enforced on the
requests of real clients: librdkafka and Kafka's console tools logged in with SCRAM.

Each broker has a PLAINTEXT listener on the harness's port, whose principal (User:ANONYMOUS) is
a super user: the harness and the tests manage users, topics and ACLs through it, as an
operator's internal listener would. Clients under test log in on a SASL_PLAINTEXT listener
named SECURE. The tests not marked sluice_only run against Apache Kafka too
(SLUICE_TEST_TARGET=kafka), configured the same way, to show the answers are Kafka's.
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

import harness
from harness import CONSOLE_CONSUMER, CONSOLE_PRODUCER, create_topic, produce_all
from test_sasl import SCRAM_JAAS, add_scram_user, java_sasl_config, rdkafka_sasl

ACL_COMMAND = "org.apache.kafka.tools.AclCommand"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def acl_broker(broker_factory, super_users: str = "User:ANONYMOUS", **extra):
    """A broker with the authorizer on: PLAINTEXT (a super user's) on the harness port, SCRAM
    on ``b.sasl_bootstrap``."""
    b = broker_factory(start=False)
    b.sasl_port = harness.free_port()
    b.sasl_bootstrap = f"127.0.0.1:{b.sasl_port}"
    listeners = f"PLAINTEXT://127.0.0.1:{b.port},SECURE://127.0.0.1:{b.sasl_port}"
    protocols = "PLAINTEXT:PLAINTEXT,SECURE:SASL_PLAINTEXT"
    advertised = listeners
    if b.kind == "kafka":
        listeners += f",CONTROLLER://127.0.0.1:{b.controller_port}"
        protocols += ",CONTROLLER:PLAINTEXT"
    b.overrides.update({
        "listeners": listeners,
        "advertised.listeners": advertised,
        "listener.security.protocol.map": protocols,
        "listener.name.secure.sasl.enabled.mechanisms": "SCRAM-SHA-256",
        "listener.name.secure.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": super_users,
    })
    b.overrides.update(extra)
    b.start()
    return b


def acls(kafka_tool, b, *args, check: str | None = None):
    """Run kafka-acls against ``b``'s PLAINTEXT (super user) listener."""
    res = kafka_tool(ACL_COMMAND, "--bootstrap-server", b.bootstrap, *args)
    return res.check(check or f"kafka-acls {' '.join(args)}")


def user(kafka_tool, b, name: str) -> dict:
    """A SCRAM-SHA-256 user ``name`` (password ``<name>-secret``) and librdkafka's settings for it."""
    add_scram_user(kafka_tool, b, name, f"{name}-secret")
    conf = rdkafka_sasl("SCRAM-SHA-256", name, f"{name}-secret")
    harness.wait_until(lambda: can_list_topics(b.sasl_bootstrap, conf), 30, f"{name} logs in")
    return conf


def user_tool(kafka_tool, b, tmp_path: Path, name: str):
    """The user ``name`` (as ``user``): librdkafka's settings for it, and a runner of Kafka's
    tools logged in as it on ``b``'s SASL listener (``run(TOOL_CLASS, *args)``: the ToolResult,
    unchecked)."""
    rdkafka = user(kafka_tool, b, name)
    conf = str(java_sasl_config(tmp_path, "SCRAM-SHA-256", name, f"{name}-secret"))

    def run(tool: str, *args: str) -> harness.ToolResult:
        return kafka_tool(tool, "--bootstrap-server", b.sasl_bootstrap, "--command-config", conf, *args, timeout=90)
    return rdkafka, run


def listed_acls(out: str) -> set:
    """kafka-acls' listing as (resource type, name, pattern type, principal, operation,
    permission) tuples."""
    got, resource = set(), None
    for line in out.splitlines():
        if m := re.search(r"ResourcePattern\(resourceType=(\w+), name=(.*), patternType=(\w+)\)", line):
            resource = m.groups()
        elif m := re.search(r"\(principal=(.+), host=.+, operation=(\w+), permissionType=(\w+)\)", line):
            assert resource, out
            got.add((*resource, *m.groups()))
    return got


def can_list_topics(bootstrap: str, conf: dict) -> bool:
    from confluent_kafka.admin import AdminClient

    AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4", **conf}).list_topics(timeout=5)
    return True


def produce_error(bootstrap: str, conf: dict, topic: str, **extra) -> str | None:
    """Produce one record: None if delivered, else the error's name (TOPIC_AUTHORIZATION_FAILED)."""
    p = harness.producer(bootstrap, **{"message.timeout.ms": 15000, "log_level": 0}, **conf, **extra)
    try:
        produce_all(p, topic, [{"value": b"x", "partition": 0}], flush_timeout=30)
        return None
    except Exception as e:  # noqa: BLE001
        m = re.search(r"code=([A-Z_]+)", str(e))
        return m.group(1) if m else str(e)


def group_consume_error(bootstrap: str, conf: dict, topic: str, group: str, want: int = 1,
                        timeout: float = 40) -> str | None:
    """Consume ``want`` records in group ``group``: None if they came, else the first error's name."""
    c = harness.consumer(bootstrap, **{"group.id": group, "enable.partition.eof": False,
                                       "auto.offset.reset": "earliest", "log_level": 0}, **conf)
    try:
        c.subscribe([topic])
        got = 0
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in c.consume(num_messages=100, timeout=1):
                if m.error() is not None:
                    if m.error().name() in ("TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED"):
                        return m.error().name()
                    continue
                got += 1
            if got >= want:
                return None
        return f"only {got} records in {timeout}s"
    finally:
        c.close()


def test_kafka_acls_adds_lists_and_removes(broker_factory, kafka_tool, topic):
    b = acl_broker(broker_factory)
    acls(kafka_tool, b, "--add", "--allow-principal", "User:alice", "--operation", "Read",
         "--operation", "Describe", "--topic", topic)
    acls(kafka_tool, b, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", f"{topic}-g")
    acls(kafka_tool, b, "--add", "--allow-principal", "User:alice", "--operation", "Write",
         "--transactional-id", f"{topic}-tx")
    acls(kafka_tool, b, "--add", "--allow-principal", "User:alice", "--operation", "Write",
         "--resource-pattern-type", "prefixed", "--topic", f"{topic}-pre")
    acls(kafka_tool, b, "--add", "--allow-principal", "User:alice", "--operation", "IdempotentWrite", "--cluster")
    acls(kafka_tool, b, "--add", "--deny-principal", "User:bob", "--operation", "Write", "--topic", topic)
    acls(kafka_tool, b, "--add", "--allow-principal", "User:alice", "--operation", "Describe",
         "--delegation-token", f"{topic}-dt")
    # Adding the same ACL again changes nothing.
    acls(kafka_tool, b, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", f"{topic}-g")

    out = acls(kafka_tool, b, "--list").out
    assert f"ResourcePattern(resourceType=TOPIC, name={topic}, patternType=LITERAL)" in out, out
    assert f"ResourcePattern(resourceType=GROUP, name={topic}-g, patternType=LITERAL)" in out, out
    assert f"ResourcePattern(resourceType=TRANSACTIONAL_ID, name={topic}-tx, patternType=LITERAL)" in out, out
    assert f"ResourcePattern(resourceType=TOPIC, name={topic}-pre, patternType=PREFIXED)" in out, out
    assert "ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)" in out, out
    assert "(principal=User:bob, host=*, operation=WRITE, permissionType=DENY)" in out, out
    assert out.count("(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)") == 2, out
    assert f"ResourcePattern(resourceType=DELEGATION_TOKEN, name={topic}-dt, patternType=LITERAL)" in out, out
    out = acls(kafka_tool, b, "--list", "--delegation-token", f"{topic}-dt").out
    assert "(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)" in out, out
    assert f"name={topic}-tx" not in out, out

    # --list of one topic; MATCH (--resource-pattern-type match) finds the prefixed ACL too.
    out = acls(kafka_tool, b, "--list", "--topic", topic).out
    assert "operation=DESCRIBE" in out and "User:bob" in out and "patternType=PREFIXED" not in out, out
    out = acls(kafka_tool, b, "--list", "--topic", f"{topic}-pre-x", "--resource-pattern-type", "match").out
    assert f"name={topic}-pre, patternType=PREFIXED" in out, out
    out = acls(kafka_tool, b, "--list", "--principal", "User:bob").out
    assert "User:bob" in out and "User:alice" not in out, out

    acls(kafka_tool, b, "--remove", "--force", "--deny-principal", "User:bob", "--operation", "Write", "--topic", topic)
    acls(kafka_tool, b, "--remove", "--force", "--resource-pattern-type", "prefixed", "--topic", f"{topic}-pre")
    out = acls(kafka_tool, b, "--list").out
    assert "User:bob" not in out and "PREFIXED" not in out, out
    assert f"name={topic}-tx" in out, out
    # A filter for every ACL of a resource removes them all.
    acls(kafka_tool, b, "--remove", "--force", "--topic", topic)
    out = acls(kafka_tool, b, "--list", "--topic", topic).out
    assert "principal=" not in out, out


def test_no_acls_no_access_then_grants(broker_factory, kafka_tool, topic, tmp_path):
    b = acl_broker(broker_factory)
    create_topic(b.bootstrap, topic, partitions=1)
    alice = user(kafka_tool, b, "alice")
    group = f"{topic}-g"
    # librdkafka: no ACL, no produce.
    assert produce_error(b.sasl_bootstrap, alice, topic) == "TOPIC_AUTHORIZATION_FAILED"
    # The Java console producer: TopicAuthorizationException.
    conf = java_sasl_config(tmp_path, "SCRAM-SHA-256", "alice", "alice-secret")
    res = kafka_tool(CONSOLE_PRODUCER, "--bootstrap-server", b.sasl_bootstrap, "--topic", topic,
                     "--command-config", str(conf), input="refused\n", timeout=90)
    assert "TopicAuthorizationException" in res.err or "Not authorized to access topics" in res.err, res.describe()

    acls(kafka_tool, b, "--add", "--allow-principal", "User:alice", "--producer", "--topic", topic)
    assert produce_error(b.sasl_bootstrap, alice, topic) is None
    res = kafka_tool(CONSOLE_PRODUCER, "--bootstrap-server", b.sasl_bootstrap, "--topic", topic,
                     "--command-config", str(conf), input="".join(f"v{i}\n" for i in range(5)))
    res.check("kafka-console-producer after the grant")

    # Reading the topic without a group ACL: GROUP_AUTHORIZATION_FAILED; with it but without
    # READ on the topic: TOPIC_AUTHORIZATION_FAILED.
    assert group_consume_error(b.sasl_bootstrap, alice, topic, group) == "GROUP_AUTHORIZATION_FAILED"
    acls(kafka_tool, b, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", group)
    assert group_consume_error(b.sasl_bootstrap, alice, topic, group) == "TOPIC_AUTHORIZATION_FAILED"
    res = kafka_tool(CONSOLE_CONSUMER, "--bootstrap-server", b.sasl_bootstrap, "--command-config", str(conf),
                     "--topic", topic, "--group", group, "--from-beginning", "--max-messages", "1",
                     "--timeout-ms", "20000", timeout=90)
    assert "TopicAuthorizationException" in res.err or "Not authorized to access topics" in res.err, res.describe()
    acls(kafka_tool, b, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic)
    assert group_consume_error(b.sasl_bootstrap, alice, topic, group, want=6) is None
    res = kafka_tool(CONSOLE_CONSUMER, "--bootstrap-server", b.sasl_bootstrap, "--command-config", str(conf),
                     "--topic", topic, "--group", f"{group}", "--from-beginning", "--max-messages", "6",
                     "--timeout-ms", "30000")
    res.check("kafka-console-consumer after the grants")


def test_deny_beats_allow_and_super_users_bypass(broker_factory, kafka_tool, topic):
    b = acl_broker(broker_factory, super_users="User:ANONYMOUS;User:root")
    for t in (topic, f"{topic}-secret"):
        create_topic(b.bootstrap, t, partitions=1)
    alice = user(kafka_tool, b, "alice")
    root = user(kafka_tool, b, "root")
    acls(kafka_tool, b, "--add", "--allow-principal", "User:*", "--operation", "All", "--topic", "*")
    acls(kafka_tool, b, "--add", "--deny-principal", "User:alice", "--operation", "Write",
         "--topic", f"{topic}-secret")
    acls(kafka_tool, b, "--add", "--deny-principal", "User:root", "--operation", "All", "--topic", f"{topic}-secret")
    assert produce_error(b.sasl_bootstrap, alice, topic) is None
    assert produce_error(b.sasl_bootstrap, alice, f"{topic}-secret") == "TOPIC_AUTHORIZATION_FAILED"
    # A super user is allowed whatever an ACL denies.
    assert produce_error(b.sasl_bootstrap, root, f"{topic}-secret") is None


def test_allow_everyone_if_no_acl_found(broker_factory, kafka_tool, topic):
    b = acl_broker(broker_factory, **{"allow.everyone.if.no.acl.found": "true"})
    create_topic(b.bootstrap, topic, partitions=1)
    alice = user(kafka_tool, b, "alice")
    assert produce_error(b.sasl_bootstrap, alice, topic) is None
    # Once an ACL names the topic, the ACLs decide it (for anyone they do not name: no).
    acls(kafka_tool, b, "--add", "--allow-principal", "User:bob", "--operation", "Write", "--topic", topic)
    assert produce_error(b.sasl_bootstrap, alice, topic) == "TOPIC_AUTHORIZATION_FAILED"


def test_transactional_producer_needs_its_transactional_id(broker_factory, kafka_tool, topic):
    from confluent_kafka import KafkaException

    b = acl_broker(broker_factory)
    create_topic(b.bootstrap, topic, partitions=1)
    alice = user(kafka_tool, b, "alice")
    acls(kafka_tool, b, "--add", "--allow-principal", "User:alice", "--producer", "--topic", topic)
    txn = f"{topic}-tx"

    def init() -> str | None:
        p = harness.producer(b.sasl_bootstrap, **{"transactional.id": txn, "log_level": 0}, **alice)
        try:
            p.init_transactions(20)
        except KafkaException as e:
            return e.args[0].name()
        p.begin_transaction()
        p.produce(topic, value=b"in-a-transaction", partition=0)
        p.commit_transaction(30)
        return None

    assert init() == "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
    acls(kafka_tool, b, "--add", "--allow-principal", "User:alice", "--operation", "Write",
         "--operation", "Describe", "--transactional-id", txn)
    assert init() is None


def test_acls_survive_a_restart(broker_factory, kafka_tool, topic):
    b = acl_broker(broker_factory)
    create_topic(b.bootstrap, topic, partitions=1)
    alice = user(kafka_tool, b, "alice")
    acls(kafka_tool, b, "--add", "--deny-principal", "User:alice", "--operation", "Write", "--topic", topic)
    acls(kafka_tool, b, "--add", "--allow-principal", "User:alice", "--operation", "All", "--topic", "*")
    assert produce_error(b.sasl_bootstrap, alice, topic) == "TOPIC_AUTHORIZATION_FAILED"
    b.restart()
    out = acls(kafka_tool, b, "--list", "--topic", topic).out
    assert "(principal=User:alice, host=*, operation=WRITE, permissionType=DENY)" in out, out
    harness.wait_until(lambda: can_list_topics(b.sasl_bootstrap, alice), 30, "alice logs in again")
    assert produce_error(b.sasl_bootstrap, alice, topic) == "TOPIC_AUTHORIZATION_FAILED"
    assert produce_error(b.sasl_bootstrap, alice, f"{topic}-other",
                         **{"allow.auto.create.topics": True}) is None


@pytest.mark.sluice_only
def test_without_an_authorizer_the_acl_apis_are_disabled_and_nothing_is_refused(broker_factory, kafka_tool, topic):
    b = broker_factory()
    res = kafka_tool(ACL_COMMAND, "--bootstrap-server", b.bootstrap, "--list")
    assert "SecurityDisabledException" in res.err + res.out, res.describe()
    create_topic(b.bootstrap, topic, partitions=1)
    assert produce_error(b.bootstrap, {}, topic) is None


@pytest.mark.sluice_only
def test_an_acl_made_through_one_broker_is_enforced_by_another(broker_factory, kafka_tool, tmp_path, topic):
    from cluster_support import EtcdServer, cluster_overrides, live_brokers

    etcd = EtcdServer(tmp_path / "etcd").start()
    try:
        shared = tmp_path / "shared"
        brokers = []
        for node in (1, 2, 3):
            b = broker_factory(start=False, log_dir=shared, kind="sluice", name=f"node{node}")
            b.sasl_port = harness.free_port()
            b.sasl_bootstrap = f"127.0.0.1:{b.sasl_port}"
            b.overrides.update(cluster_overrides(etcd, node, shared, "/acls"))
            listeners = f"PLAINTEXT://127.0.0.1:{b.port},SECURE://{b.sasl_bootstrap}"
            b.overrides.update({
                "listeners": listeners,
                "advertised.listeners": listeners,
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_PLAINTEXT",
                "inter.broker.listener.name": "PLAINTEXT",
                "listener.name.secure.sasl.enabled.mechanisms": "SCRAM-SHA-256",
                "listener.name.secure.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
                "authorizer.class.name": STANDARD_AUTHORIZER,
                # Brokers call each other on PLAINTEXT: their principal must be a super user.
                "super.users": "User:ANONYMOUS",
            })
            b.start()
            brokers.append(b)
        bootstrap = ",".join(b.bootstrap for b in brokers)
        harness.wait_until(lambda: len(live_brokers(bootstrap)) == 3, 30, "three brokers")
        create_topic(bootstrap, topic, partitions=3)
        alice = user(kafka_tool, brokers[0], "alice")
        harness.wait_until(lambda: can_list_topics(brokers[2].sasl_bootstrap, alice), 30, "alice on broker 3")
        only3 = brokers[2].sasl_bootstrap
        acls(kafka_tool, brokers[0], "--add", "--allow-principal", "User:alice", "--producer", "--topic", topic)
        # Enforced by broker 3 at once (its next read of the cluster's records).
        harness.wait_until(lambda: produce_error(only3, alice, topic) is None, 10, "broker 3 allows alice")
        out = acls(kafka_tool, brokers[2], "--list", "--topic", topic).out
        assert "User:alice" in out, out
        acls(kafka_tool, brokers[1], "--add", "--deny-principal", "User:alice", "--operation", "Write", "--topic", topic)
        harness.wait_until(lambda: produce_error(only3, alice, topic) == "TOPIC_AUTHORIZATION_FAILED", 10,
                           "broker 3 denies alice")
    finally:
        etcd.kill()


def test_admin_tools_of_a_user_without_acls_are_refused(broker_factory, kafka_tool, topic, tmp_path):
    """Kafka's admin tools run by a user no ACL names: topic creation and deletion, topic
    configs described and altered, log dirs described and the ACLs listed are each refused with
    Kafka's authorization error, and a topic it may not DESCRIBE is missing from its list."""
    from harness import CONFIG_COMMAND, LOG_DIRS, TOPIC_COMMAND
    b = acl_broker(broker_factory)
    create_topic(b.bootstrap, topic, partitions=1)
    _, run = user_tool(kafka_tool, b, tmp_path, "alice")

    def refused(tool, *args, said):
        res = run(tool, *args)
        text = res.out + res.err
        assert said in text, f"{tool} {' '.join(args)}: expected {said!r}\n{res.describe()}"
        return text

    refused(TOPIC_COMMAND, "--create", "--topic", f"{topic}-new", "--partitions", "1",
            said="TopicAuthorizationException")
    # kafka-configs looks the topic up first: one alice may not DESCRIBE does not exist for it.
    refused(CONFIG_COMMAND, "--describe", "--entity-type", "topics", "--entity-name", topic,
            said="doesn't exist")
    refused(CONFIG_COMMAND, "--alter", "--entity-type", "topics", "--entity-name", topic,
            "--add-config", "retention.ms=1000", said="TopicAuthorizationException")
    refused(LOG_DIRS, "--describe", "--topic-list", topic, said="ClusterAuthorizationException")
    refused(ACL_COMMAND, "--list", said="ClusterAuthorizationException")
    listed = run(TOPIC_COMMAND, "--list").check("kafka-topics --list by alice")
    assert topic not in listed.out.split(), listed.out
    res = run(TOPIC_COMMAND, "--delete", "--topic", topic)
    assert res.rc != 0, res.describe()
    # Still there for the super user.
    assert topic in harness.admin(b.bootstrap).list_topics(timeout=10).topics


def test_authorized_operations_are_answered(broker_factory, kafka_tool, topic):
    """DescribeCluster and DescribeTopics with authorized operations: everything for a super
    user, nothing on the cluster for a user no ACL names, and on a topic what its ACLs allow
    (READ, with the DESCRIBE it implies)."""
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import AclOperation, AdminClient
    b = acl_broker(broker_factory)
    create_topic(b.bootstrap, topic, partitions=1)
    alice = user(kafka_tool, b, "alice")
    acls(kafka_tool, b, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic)
    admin = AdminClient({"bootstrap.servers": b.bootstrap, "broker.address.family": "v4"})
    ops = admin.describe_cluster(include_authorized_operations=True).result(timeout=15).authorized_operations
    assert {AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.CREATE} <= set(ops or []), ops
    theirs = AdminClient({"bootstrap.servers": b.sasl_bootstrap, "broker.address.family": "v4", **alice})
    ops = theirs.describe_cluster(include_authorized_operations=True).result(timeout=15).authorized_operations
    assert not ops, ops
    t = theirs.describe_topics(TopicCollection([topic]), include_authorized_operations=True)[topic].result(timeout=15)
    assert set(t.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}, t.authorized_operations


@pytest.mark.sluice_only
def test_authorizer_decisions_and_acls_are_counted_in_metrics(broker_factory, kafka_tool, topic):
    """/metrics: the authorizer's denied and allowed decisions and the number of ACLs, under
    Kafka's authorizer-metrics names (as counters)."""
    import urllib.request
    port = harness.free_port()
    b = acl_broker(broker_factory, **{"sluice.metrics.listener": f"127.0.0.1:{port}"})

    def metric(name: str) -> float:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            text = r.read().decode()
        m = re.search(rf"^{name}(?:{{[^}}]*}})? (\S+)$", text, re.M)
        assert m, f"{name} missing: {text[-1500:]}"
        return float(m.group(1))

    create_topic(b.bootstrap, topic, partitions=1)
    alice = user(kafka_tool, b, "alice")
    denied = metric("kafka_server_authorizer_metrics_authorization_denied_total")
    assert produce_error(b.sasl_bootstrap, alice, topic) == "TOPIC_AUTHORIZATION_FAILED"
    harness.wait_until(lambda: metric("kafka_server_authorizer_metrics_authorization_denied_total") > denied,
                       10, "a denial counted")
    assert metric("kafka_server_authorizer_metrics_acls_total_count") == 0
    acls(kafka_tool, b, "--add", "--allow-principal", "User:alice", "--producer", "--topic", topic)
    harness.wait_until(lambda: metric("kafka_server_authorizer_metrics_acls_total_count") >= 2, 10, "the ACLs counted")
    allowed = metric("kafka_server_authorizer_metrics_authorization_allowed_total")
    assert produce_error(b.sasl_bootstrap, alice, topic) is None
    assert metric("kafka_server_authorizer_metrics_authorization_allowed_total") > allowed


@pytest.mark.sluice_only
def test_a_secured_cluster_with_the_authorizer_on(broker_factory, kafka_tool, tmp_path, topic):
    """Three brokers as a secured Kafka cluster is set up: brokers log in to each other with
    SASL (PLAIN, as User:broker, a super user) on the inter-broker listener, clients on a SASL
    listener, the authorizer on, and no right for the anonymous principal of the plaintext
    listener. An admin (a super user) creates the topic, the user and the ACLs with Kafka's
    tools; the user's transactions span partitions other brokers own (their markers go over
    the inter-broker listener), and the group coordinator reports the group's lag of the
    partitions other brokers own, asked over that listener with the broker's principal."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    from cluster_support import EtcdServer, cluster_overrides, live_brokers
    from test_metrics import samples, value

    plain_jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
                  'password="broker-secret" user_broker="broker-secret" user_admin="admin-secret";')
    etcd = EtcdServer(tmp_path / "etcd").start()
    try:
        shared = tmp_path / "shared"
        brokers = []
        for node in (1, 2, 3):
            b = broker_factory(start=False, log_dir=shared, kind="sluice", name=f"node{node}")
            b.internal = f"127.0.0.1:{harness.free_port()}"
            b.sasl_bootstrap = f"127.0.0.1:{harness.free_port()}"
            b.metrics_port = harness.free_port()
            b.overrides.update(cluster_overrides(etcd, node, shared, "/secured"))
            listeners = f"EXTERNAL://127.0.0.1:{b.port},INTERNAL://{b.internal},SECURE://{b.sasl_bootstrap}"
            b.overrides.update({
                "listeners": listeners,
                "advertised.listeners": listeners,
                "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,SECURE:SASL_PLAINTEXT",
                "inter.broker.listener.name": "INTERNAL",
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
                "listener.name.internal.plain.sasl.jaas.config": plain_jaas,
                "listener.name.secure.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
                "listener.name.secure.plain.sasl.jaas.config": plain_jaas,
                "listener.name.secure.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
                "authorizer.class.name": STANDARD_AUTHORIZER,
                "super.users": "User:broker;User:admin",
                "sluice.metrics.listener": f"127.0.0.1:{b.metrics_port}",
                "sluice.metrics.lag.remote.cache.ms": 0,
            })
            b.start()
            brokers.append(b)
        bootstrap = ",".join(b.bootstrap for b in brokers)
        harness.wait_until(lambda: len(live_brokers(bootstrap)) == 3, 30, "three brokers")
        secure = ",".join(b.sasl_bootstrap for b in brokers)
        admin_conf = rdkafka_sasl("PLAIN", "admin", "admin-secret")
        admin_file = java_sasl_config(tmp_path, "PLAIN", "admin", "admin-secret")

        # The plaintext listener's anonymous principal may do nothing.
        anonymous = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})
        refused = anonymous.create_topics([NewTopic(f"{topic}-anon", 1, 1)])[f"{topic}-anon"].exception(30)
        assert refused is not None and refused.args[0].name() == "TOPIC_AUTHORIZATION_FAILED", refused

        admin = AdminClient({"bootstrap.servers": secure, "broker.address.family": "v4", **admin_conf})
        admin.create_topics([NewTopic(topic, 6, 1)])[topic].result(30)

        def owners():
            parts = admin.list_topics(topic, timeout=10).topics[topic].partitions
            return {p: m.leader for p, m in parts.items()}

        harness.wait_until(lambda: len(o := owners()) == 6 and all(l >= 0 for l in o.values()), 30,
                           "every partition led")

        def tool(cls, *args):
            return kafka_tool(cls, "--bootstrap-server", brokers[0].sasl_bootstrap,
                              "--command-config", str(admin_file), *args)

        tool(harness.CONFIG_COMMAND, "--alter", "--add-config", "SCRAM-SHA-512=[password=frank-secret]",
             "--entity-type", "users", "--entity-name", "frank").check("kafka-configs adds frank")
        group, txn = f"{topic}-group", f"{topic}-txn"
        tool(ACL_COMMAND, "--add", "--allow-principal", "User:frank", "--producer", "--topic", topic,
             "--transactional-id", txn).check("kafka-acls --producer")
        tool(ACL_COMMAND, "--add", "--allow-principal", "User:frank", "--consumer", "--topic", topic,
             "--group", group).check("kafka-acls --consumer")
        frank = rdkafka_sasl("SCRAM-SHA-512", "frank", "frank-secret")
        harness.wait_until(lambda: can_list_topics(brokers[2].sasl_bootstrap, frank), 30, "frank on broker 3")

        p = harness.producer(secure, **{"transactional.id": txn}, **frank)
        p.init_transactions(30)
        for t in range(3):
            p.begin_transaction()
            for i in range(60):
                p.produce(topic, value=b"%d-%d" % (t, i), partition=i % 6)
            p.commit_transaction(30)
        got = harness.consume_partitions(secure, topic, range(6), expected=180,
                                         **{"isolation.level": "read_committed", "group.id": group}, **frank)
        assert sorted(m.value() for m in got) == sorted(b"%d-%d" % (t, i) for t in range(3) for i in range(60))

        committed = {part: 3 * (part + 1) for part in range(6)}
        c = Consumer({"bootstrap.servers": secure, "broker.address.family": "v4", "group.id": group,
                      "enable.auto.commit": False, **frank})
        try:
            c.commit(offsets=[TopicPartition(topic, part, o) for part, o in committed.items()], asynchronous=False)
        finally:
            c.close()
        # Each partition: 30 records and 3 commit markers.
        expected = {part: 33 - o for part, o in committed.items()}

        def reported():
            for b in brokers:
                ss = samples(b.metrics_port)
                lags = {int(l["partition"]): v for name, l, v in ss
                        if name == "kafka_consumergroup_lag" and l.get("consumergroup") == group}
                if lags:
                    return b, lags
            return None

        coordinator, lags = harness.wait_until(lambda: (r := reported()) and r[1] == expected and r, 30,
                                               "the coordinator reports the lag of every partition")
        node = brokers.index(coordinator) + 1
        led = owners()
        assert any(o != node for o in led.values()), (node, led)
        logs = "".join(b.log_text() for b in brokers)
        assert "SASL login to" not in logs, logs[-3000:]
    finally:
        etcd.kill()


def test_records_quotas_and_reassignments_need_their_acls(broker_factory, kafka_tool, topic, tmp_path):
    """DeleteRecords, client quotas and partition reassignments through Kafka's tools, by a
    user no ACL names, are refused with Kafka's authorization errors; each works once the ACL
    Kafka asks for is granted (DELETE on the topic; ALTER_CONFIGS and DESCRIBE_CONFIGS on the
    cluster; DESCRIBE on the cluster)."""
    import json
    from harness import CONFIG_COMMAND, DELETE_RECORDS
    reassign = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
    b = acl_broker(broker_factory)
    create_topic(b.bootstrap, topic, partitions=1)
    p = harness.producer(b.bootstrap)
    produce_all(p, topic, [{"value": b"r%d" % i, "partition": 0} for i in range(5)])
    _, as_alice = user_tool(kafka_tool, b, tmp_path, "alice")
    plan = tmp_path / "delete.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 3}]}))

    def run(tool, *args):
        res = as_alice(tool, *args)
        return res, res.out + res.err

    def refused(tool, *args, said):
        res, text = run(tool, *args)
        assert said in text, f"{tool} {' '.join(args)}: expected {said!r}\n{res.describe()}"

    def works(tool, *args, says=None):
        res, text = run(tool, *args)
        assert res.rc == 0 and "Exception" not in text, res.describe()
        if says:
            assert says in text, res.describe()

    def grant(*args):
        acls(kafka_tool, b, "--add", "--allow-principal", "User:alice", *args)

    quota = ("--alter", "--entity-type", "clients", "--entity-name", "c1", "--add-config", "producer_byte_rate=1048576")
    refused(DELETE_RECORDS, "--offset-json-file", str(plan), said="TopicAuthorizationException")
    refused(CONFIG_COMMAND, *quota, said="ClusterAuthorizationException")
    refused(CONFIG_COMMAND, "--describe", "--entity-type", "clients", said="ClusterAuthorizationException")
    refused(reassign, "--list", said="ClusterAuthorizationException")
    assert harness.admin(b.bootstrap).list_topics(topic, timeout=10).topics[topic].partitions

    grant("--operation", "Delete", "--operation", "Describe", "--topic", topic)
    works(DELETE_RECORDS, "--offset-json-file", str(plan), says="low_watermark: 3")
    grant("--operation", "AlterConfigs", "--operation", "DescribeConfigs", "--cluster")
    works(CONFIG_COMMAND, *quota)
    works(CONFIG_COMMAND, "--describe", "--entity-type", "clients", says="producer_byte_rate=1048576")
    grant("--operation", "Describe", "--cluster")
    works(reassign, "--list")


def test_implied_operations_as_clients_see_them(broker_factory, kafka_tool, topic, tmp_path):
    """StandardAuthorizer's implied operations through real clients: an ALLOW of READ, WRITE,
    DELETE or ALTER on a topic lets its principal DESCRIBE it (Metadata, ListOffsets), one of
    ALTER_CONFIGS lets it DESCRIBE_CONFIGS (READ does not), ALL allows everything, ALTER on the
    cluster allows DESCRIBE on it (DescribeAcls); no implied ALLOW overrides a DENY of DESCRIBE,
    and a DENY of READ leaves the DESCRIBE an ALLOW of READ implies."""
    from harness import CONFIG_COMMAND, GET_OFFSETS, TOPIC_COMMAND
    b = acl_broker(broker_factory)
    # Alice's ACLs on each topic (-: DENY).
    grants = {"read": ["Read"], "write": ["Write"], "delete": ["Delete"], "alter": ["Alter"],
              "configs": ["Read", "AlterConfigs"], "all": ["All"], "denied": ["All", "-Describe"],
              "unread": ["Read", "-Read"]}
    for suffix, ops in grants.items():
        create_topic(b.bootstrap, f"{topic}-{suffix}", partitions=1)
        for permission, denied in (("allow", False), ("deny", True)):
            mine = [op.lstrip("-") for op in ops if op.startswith("-") == denied]
            if mine:
                acls(kafka_tool, b, "--add", f"--{permission}-principal", "User:alice", "--topic",
                     f"{topic}-{suffix}", *[a for op in mine for a in ("--operation", op)])
    produce_all(harness.producer(b.bootstrap), f"{topic}-read",
                [{"value": b"r%d" % i, "partition": 0} for i in range(3)])
    alice, run = user_tool(kafka_tool, b, tmp_path, "alice")

    # Metadata: every topic alice may DESCRIBE, by implication or by ALL; not the denied one.
    listed = run(TOPIC_COMMAND, "--list").check("kafka-topics --list by alice").out.split()
    described = ("read", "write", "delete", "alter", "configs", "all", "unread")
    assert sorted(t for t in listed if t.startswith(topic)) == sorted(f"{topic}-{s}" for s in described), listed
    # ListOffsets (kafka-get-offsets of every topic alice lists) needs DESCRIBE too.
    out = run(GET_OFFSETS, "--topic", f"{topic}-.*").check("kafka-get-offsets by alice").out
    assert sorted(out.split()) == sorted(f"{topic}-{s}:0:{3 if s == 'read' else 0}" for s in described), out
    # READ: a consumer in a group it may READ (FindCoordinator asks DESCRIBE of the group; the
    # topic's Metadata and ListOffsets DESCRIBE, Fetch READ).
    acls(kafka_tool, b, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", f"{topic}-g")
    assert group_consume_error(b.sasl_bootstrap, alice, f"{topic}-read", f"{topic}-g", want=3) is None
    # WRITE and ALL: a producer (its Metadata request needs DESCRIBE); ALL with DESCRIBE denied: no.
    assert produce_error(b.sasl_bootstrap, alice, f"{topic}-write") is None
    assert produce_error(b.sasl_bootstrap, alice, f"{topic}-all") is None
    assert produce_error(b.sasl_bootstrap, alice, f"{topic}-denied") == "TOPIC_AUTHORIZATION_FAILED"
    # DESCRIBE_CONFIGS: implied by ALTER_CONFIGS, not by READ; kafka-topics --describe asks
    # for DESCRIBE and DESCRIBE_CONFIGS, which ALL allows.
    res = run(CONFIG_COMMAND, "--describe", "--entity-type", "topics", "--entity-name", f"{topic}-configs")
    assert f"Dynamic configs for topic {topic}-configs are:" in res.check("kafka-configs by alice").out, res.out
    res = run(CONFIG_COMMAND, "--describe", "--entity-type", "topics", "--entity-name", f"{topic}-read")
    assert res.rc != 0 and "TopicAuthorizationException" in res.err, res.describe()
    out = run(TOPIC_COMMAND, "--describe", "--topic", f"{topic}-all").check("kafka-topics --describe by alice").out
    assert f"Topic: {topic}-all\tTopicId:" in out and "Partition: 0" in out, out
    # The cluster: ALTER implies DESCRIBE (kafka-acls --list).
    res = run(ACL_COMMAND, "--list")
    assert "ClusterAuthorizationException" in res.out + res.err, res.describe()
    acls(kafka_tool, b, "--add", "--allow-principal", "User:alice", "--operation", "Alter", "--cluster")
    out = run(ACL_COMMAND, "--list", "--topic", f"{topic}-denied").check("kafka-acls --list by alice").out
    assert listed_acls(out) == {("TOPIC", f"{topic}-denied", "LITERAL", "User:alice", op, perm)
                                for op, perm in (("ALL", "ALLOW"), ("DESCRIBE", "DENY"))}, out


def test_any_and_match_filters_list_and_remove_what_kafka_does(broker_factory, kafka_tool, topic):
    """kafka-acls --list and --remove with --resource-pattern-type match (every binding that
    applies to a topic of that name: the literal name, the wildcard `*`, prefixes of it) and any
    (the name exactly, whatever the pattern type), each answering or removing several bindings."""
    b = acl_broker(broker_factory)
    name, other = f"{topic}-orders", f"{topic}-other"
    bindings = [  # (pattern type, name, principal, operation)
        ("LITERAL", name, "User:alice", "READ"),
        ("PREFIXED", name, "User:alice", "WRITE"),
        ("PREFIXED", f"{topic}-", "User:bob", "READ"),
        ("LITERAL", "*", "User:carol", "DESCRIBE"),
        ("LITERAL", other, "User:alice", "READ"),
        ("PREFIXED", other, "User:bob", "WRITE"),
        ("PREFIXED", f"{name}-eu", "User:bob", "DESCRIBE"),
    ]
    for pattern, resource, principal, op in bindings:
        acls(kafka_tool, b, "--add", "--allow-principal", principal, "--operation", op.capitalize(),
             "--resource-pattern-type", pattern.lower(), "--topic", resource)
    acls(kafka_tool, b, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", name)
    topics = {("TOPIC", n, pt, p, op, "ALLOW") for pt, n, p, op in bindings}
    group = ("GROUP", name, "LITERAL", "User:alice", "READ", "ALLOW")

    def listing(*args) -> set:
        return listed_acls(acls(kafka_tool, b, "--list", *args).out)

    def on(*names) -> set:
        return {t for t in topics if t[1] in names}

    assert listing() == topics | {group}
    assert listing("--topic", name, "--resource-pattern-type", "match") == on(name, f"{topic}-", "*")
    assert listing("--topic", name, "--resource-pattern-type", "any") == on(name)
    prefixed = {t for t in on(name) if t[2] == "PREFIXED"}
    assert listing("--topic", name, "--resource-pattern-type", "prefixed") == prefixed
    # Removing by MATCH: the literal, prefixed and wildcard bindings that apply to the name.
    acls(kafka_tool, b, "--remove", "--force", "--topic", name, "--resource-pattern-type", "match")
    topics -= on(name, f"{topic}-", "*")
    assert listing() == topics | {group}
    # Removing by ANY: the literal and the prefixed binding of that exact name.
    acls(kafka_tool, b, "--remove", "--force", "--topic", other, "--resource-pattern-type", "any")
    topics -= on(other)
    assert listing() == topics | {group} and len(topics) == 1, topics


def test_write_txn_markers_need_cluster_action(broker_factory, kafka_tool, topic, tmp_path):
    """WriteTxnMarkers, as `kafka-transactions abort` sends it (Admin.abortTransaction, to the
    partition's leader): from a user without CLUSTER_ACTION on the cluster it is refused with
    CLUSTER_AUTHORIZATION_FAILED and the transaction stays open; a super user's writes the
    ABORT marker, as does a user granted CLUSTER_ACTION, or ALTER (which Kafka takes too)."""
    from harness import TRANSACTIONS_COMMAND
    from test_transactions import table, watermarks
    b = acl_broker(broker_factory)
    create_topic(b.bootstrap, topic, partitions=3)
    # A transaction left open on every partition: records 0-1 of each, unstable.
    p = harness.producer(b.bootstrap, **{"transactional.id": f"{topic}-tx", "transaction.timeout.ms": 600000,
                                             "log_level": 0})
    p.init_transactions(30)
    p.begin_transaction()
    produce_all(p, topic, [{"value": b"open", "partition": part} for part in range(3) for _ in range(2)])
    (open_txn,) = table(kafka_tool(TRANSACTIONS_COMMAND, "--bootstrap-server", b.bootstrap, "describe-producers",
                                   "--topic", topic, "--partition", "0").check("describe-producers").out)
    _, run = user_tool(kafka_tool, b, tmp_path, "alice")
    # Describe on the topic: the admin client looks its leader up first.
    acls(kafka_tool, b, "--add", "--allow-principal", "User:alice", "--operation", "Describe", "--topic", topic)

    def abort(runner, partition: int) -> harness.ToolResult:
        return runner(TRANSACTIONS_COMMAND, "abort", "--topic", topic, "--partition", str(partition),
                      "--producer-id", open_txn["ProducerId"], "--producer-epoch", open_txn["ProducerEpoch"],
                      "--coordinator-epoch", open_txn["LatestCoordinatorEpoch"])

    def super_user(tool, *args) -> harness.ToolResult:
        return kafka_tool(tool, "--bootstrap-server", b.bootstrap, *args)

    def stable_to(partition: int) -> int:
        return watermarks(b.bootstrap, topic, partition, "read_committed")[1]

    res = abort(run, 0)
    assert res.rc != 0 and "failed due to cluster authorization error" in res.err, res.describe()
    assert stable_to(0) == 0
    abort(super_user, 0).check("kafka-transactions abort by a super user")
    assert stable_to(0) == 3  # the ABORT marker at 2
    acls(kafka_tool, b, "--add", "--allow-principal", "User:alice", "--operation", "ClusterAction", "--cluster")
    abort(run, 1).check("kafka-transactions abort with CLUSTER_ACTION")
    assert stable_to(1) == 3
    acls(kafka_tool, b, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "ClusterAction",
         "--cluster")
    assert "failed due to cluster authorization error" in abort(run, 2).err
    acls(kafka_tool, b, "--add", "--allow-principal", "User:alice", "--operation", "Alter", "--cluster")
    abort(run, 2).check("kafka-transactions abort with ALTER")
    assert stable_to(2) == 3

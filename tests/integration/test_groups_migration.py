"""Online migration of a non-empty group between the classic and the consumer (KIP-848)
protocol, as Kafka 4.x does it (`group.consumer.migration.policy`, default bidirectional).

A rolling upgrade: three Java consumers (kafka-console-consumer, group.protocol=classic)
consume a 12-partition topic while a producer keeps producing; one by one each is replaced by
a group.protocol=consumer Java consumer (started first, then the old one is stopped). The
first consumer-protocol member converts the group; the classic members keep consuming through
JoinGroup/SyncGroup/Heartbeat against the consumer group. Then the rolling downgrade back:
when the last consumer-protocol member leaves, the group becomes a classic group again. After
every step kafka-consumer-groups --describe --members --verbose must show every partition
owned by exactly one member with fair shares; at the end the producer stops and the
committed offsets must reach the log end of every partition (every record consumed). A
librdkafka classic member (cooperative-sticky) joins the mixed group on the way, and the
broker restarts while the group is mixed.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import harness

GROUPS_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
PARTITIONS = 12
SCRIPT = Path(__file__).with_name("group_consumer.py")

pytestmark = [
    pytest.mark.skipif(not harness.kafka_libs_present(), reason="Kafka jars not installed"),
    pytest.mark.broker_config(**{
        "group.initial.rebalance.delay.ms": 0,
        # One __consumer_offsets partition, dumped at the end.
        "offsets.topic.num.partitions": 1,
        # Kafka refuses a heartbeat interval below its minimum; Sluice ignores the minimum.
        "group.consumer.min.heartbeat.interval.ms": 500,
        "group.consumer.heartbeat.interval.ms": 500,
        "group.consumer.min.session.timeout.ms": 6000,
        "group.consumer.session.timeout.ms": 6000,
    }),
]


class JavaMember:
    """kafka-console-consumer in the group with the given group.protocol."""

    def __init__(self, bootstrap, topic, group, protocol):
        self.protocol = protocol
        props = [f"group.protocol={protocol}", "client.id=" + f"java-{protocol}-{id(self) % 100000}"]
        if protocol == "classic":
            props += ["session.timeout.ms=6000", "heartbeat.interval.ms=500"]
        args = ["--bootstrap-server", bootstrap, "--topic", topic, "--group", group, "--from-beginning"]
        for p in props:
            args += ["--consumer-property", p]
        self.proc = subprocess.Popen(
            harness.java_cmd(harness.CONSOLE_CONSUMER, *args, jvm_opts=harness.FAST_START_JVM),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )

    def stop(self):
        """SIGTERM: the console consumer closes its consumer, which leaves the group."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


class RdkafkaMember:
    """A librdkafka classic member (cooperative-sticky), see group_consumer.py."""

    def __init__(self, bootstrap, topic, group):
        self.protocol = "classic"
        self.proc = subprocess.Popen(
            [sys.executable, str(SCRIPT), bootstrap, topic, group, "classic"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    kill = stop


class Producer:
    """Keeps producing small records to every partition until stopped."""

    def __init__(self, bootstrap, topic):
        self.p = harness.producer(bootstrap)
        self.topic = topic
        self.sent = 0
        self.errors = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        i = 0
        while not self.stopping.is_set():
            for _ in range(PARTITIONS):
                self.p.produce(self.topic, value=f"r{i}".encode(), partition=i % PARTITIONS,
                               on_delivery=self._delivered)
                i += 1
            self.p.poll(0)
            time.sleep(0.05)
        self.p.flush(60)

    def _delivered(self, err, msg):
        if err is not None:
            self.errors.append(err)
        else:
            self.sent += 1

    def stop(self):
        self.stopping.set()
        self.thread.join(timeout=90)


def groups_tool(kafka_tool, bootstrap, *args):
    return kafka_tool(GROUPS_COMMAND, "--bootstrap-server", bootstrap, *args, timeout=120)


def members_view(kafka_tool, bootstrap, group):
    """member id -> set of partitions, from --describe --members --verbose (both group types;
    a consumer group shows the current assignment first, then the target)."""
    r = groups_tool(kafka_tool, bootstrap, "--describe", "--group", group, "--members", "--verbose")
    if r.rc != 0:
        return None, r.out + r.err
    members = {}
    header = None
    for line in r.out.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "GROUP":
            header = parts
            continue
        if header is None or parts[0] != group:
            continue
        member = parts[1]
        # Assignments are written "topic:p,p,..." (possibly several topics) or "-".
        assigned = set()
        for tok in parts[header.index("#PARTITIONS") + 1:]:
            m = re.fullmatch(r"[^:\s]+:([\d,]+)", tok)
            if m:
                assigned |= {int(p) for p in m.group(1).split(",")}
                break  # the first assignment column is the current one
        members[member] = assigned
    return members, r.out


def member_hosts(kafka_tool, bootstrap, group):
    """The HOST column of --describe --members."""
    r = groups_tool(kafka_tool, bootstrap, "--describe", "--group", group, "--members").check("--members")
    hosts = []
    header = None
    for line in r.out.splitlines():
        parts = line.split()
        if parts and parts[0] == "GROUP":
            header = parts
        elif header and parts and parts[0] == group:
            hosts.append(parts[header.index("HOST")])
    return hosts


def group_type(kafka_tool, bootstrap, group):
    r = groups_tool(kafka_tool, bootstrap, "--list", "--type").check("--list --type")
    for line in r.out.splitlines():
        parts = line.split()
        if parts and parts[0] == group:
            return parts[1].lower()
    return None


def wait_fair(kafka_tool, bootstrap, group, n, what, timeout=120):
    """Until n members own every partition exactly once, with fair shares."""
    last = {}

    def ok():
        members, out = members_view(kafka_tool, bootstrap, group)
        last["out"] = out
        if members is None or len(members) != n:
            return False
        owned = [p for ps in members.values() for p in ps]
        fair = {PARTITIONS // n, -(-PARTITIONS // n)}
        return (sorted(owned) == list(range(PARTITIONS))
                and all(len(ps) in fair for ps in members.values()))

    try:
        harness.wait_until(ok, timeout, what, interval=1.0)
    except Exception as e:
        raise AssertionError(f"{e}\nlast describe:\n{last.get('out')}") from None


def wait_caught_up(kafka_tool, bootstrap, group, topic, timeout=120):
    last = {}

    def ok():
        r = groups_tool(kafka_tool, bootstrap, "--describe", "--group", group)
        last["out"] = r.out + r.err
        rows = {}
        for line in r.out.splitlines():
            parts = line.split()
            if len(parts) >= 6 and parts[1] == topic and parts[2].isdigit():
                rows[int(parts[2])] = (parts[3], parts[4], parts[5])
        return len(rows) == PARTITIONS and all(cur == end and lag == "0" for cur, end, lag in rows.values())

    try:
        harness.wait_until(ok, timeout, "committed offsets reach the log end", interval=1.0)
    except Exception as e:
        raise AssertionError(f"{e}\nlast describe:\n{last.get('out')}") from None


def test_rolling_upgrade_and_downgrade_of_a_live_group(broker, topic, kafka_tool):
    harness.create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    group = f"mig-{topic}"
    members = []
    producer = Producer(broker.bootstrap, topic)
    try:
        classic = [JavaMember(broker.bootstrap, topic, group, "classic") for _ in range(3)]
        members += classic
        wait_fair(kafka_tool, broker.bootstrap, group, 3, "3 classic members, 4 partitions each")
        assert group_type(kafka_tool, broker.bootstrap, group) == "classic"
        # The client host is the peer address, as Kafka reports it.
        assert member_hosts(kafka_tool, broker.bootstrap, group) == ["/127.0.0.1"] * 3

        # Rolling upgrade.
        upgraded = []
        for i, old in enumerate(classic):
            new = JavaMember(broker.bootstrap, topic, group, "consumer")
            members.append(new)
            upgraded.append(new)
            wait_fair(kafka_tool, broker.bootstrap, group, 4, f"upgrade step {i}: 4 members, 3 partitions each")
            assert group_type(kafka_tool, broker.bootstrap, group) == "consumer"
            assert member_hosts(kafka_tool, broker.bootstrap, group) == ["/127.0.0.1"] * 4
            if i == 1:
                # A librdkafka classic member joins the mixed group, then leaves.
                rd = RdkafkaMember(broker.bootstrap, topic, group)
                members.append(rd)
                wait_fair(kafka_tool, broker.bootstrap, group, 5, "a librdkafka classic member in the mixed group")
                rd.stop()
                wait_fair(kafka_tool, broker.bootstrap, group, 4, "the librdkafka member left")
                # The broker restarts with the group mixed: it reloads as a consumer group
                # with its classic members, who carry on.
                broker.stop()
                broker.start()
                wait_fair(kafka_tool, broker.bootstrap, group, 4, "the mixed group after a restart")
                assert group_type(kafka_tool, broker.bootstrap, group) == "consumer"
            old.stop()
            wait_fair(kafka_tool, broker.bootstrap, group, 3, f"upgrade step {i}: the classic member left")
        assert group_type(kafka_tool, broker.bootstrap, group) == "consumer"

        # Rolling downgrade.
        for i, old in enumerate(upgraded):
            new = JavaMember(broker.bootstrap, topic, group, "classic")
            members.append(new)
            wait_fair(kafka_tool, broker.bootstrap, group, 4, f"downgrade step {i}: 4 members")
            old.stop()
            wait_fair(kafka_tool, broker.bootstrap, group, 3, f"downgrade step {i}: the consumer member left")
        assert group_type(kafka_tool, broker.bootstrap, group) == "classic"

        producer.stop()
        assert not producer.errors, producer.errors[:5]
        assert producer.sent > 0
        wait_caught_up(kafka_tool, broker.bootstrap, group, topic)
    finally:
        producer.stop()
        for m in members:
            m.kill()

    # Kafka's own decoder reads every record the migration wrote, including the classic
    # members' metadata in the consumer group's member records.
    broker.stop()
    classic_members = 0
    for log in sorted((broker.log_dir / "__consumer_offsets-0").glob("*.log")):
        res = kafka_tool(harness.DUMP_LOG_SEGMENTS, "--files", str(log), "--offsets-decoder", timeout=180)
        res.check("kafka-dump-log --offsets-decoder")
        assert "Error" not in res.out and "Exception" not in res.out, res.out[:5000]
        classic_members += len(re.findall(r'"classicMemberMetadata":\{', res.out))
    assert classic_members > 0

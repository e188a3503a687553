"""Sluice in cluster mode: three brokers on one shared log directory, coordinated through a
real etcd. Leaders spread over the brokers, every broker routes clients to the owner, a
SIGKILLed broker's partitions are served by the survivors with no acknowledged record lost,
a joining broker takes a fair share, and a SIGTERMed one hands its partitions over. The
failover, pause, join/SIGTERM and reassignment tests also run with each broker on its own
bindfs (FUSE) mount of the shared directory, which, like NFS clients, do not share a page
cache (the `volume` fixture)."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest

import harness
from cluster_support import (EtcdServer, bootstrap_of, describe_partitions, leaders, live_brokers, start_cluster,
                             wait_all_led)

pytestmark = pytest.mark.sluice_only

PARTITIONS = 6


@pytest.fixture(params=["plain", "bindfs"])
def volume(request, tmp_path):
    """``volume(node)``: the path through which broker ``node`` sees the shared log directory.
    ``plain``: one directory for all; ``bindfs``: each broker its own bindfs (FUSE) mount of it,
    which, like NFS clients, do not share a page cache and silly-rename open files."""
    import shutil
    import subprocess
    from nfs_support import _is_mounted, _unmount

    shared = tmp_path / "shared"
    shared.mkdir()
    if request.param == "plain":
        yield lambda _node: shared
        return
    if shutil.which("bindfs") is None or not Path("/dev/fuse").exists():
        pytest.fail("bindfs or FUSE unavailable (scripts/test installs bindfs; a check that is skipped proves nothing)")
    mounts: dict = {}

    def mount_for(node: int) -> Path:
        if node not in mounts:
            mnt = tmp_path / f"mount{node}"
            mnt.mkdir()
            r = subprocess.run(["bindfs", str(shared), str(mnt)], capture_output=True, text=True)
            if r.returncode != 0:
                raise harness.HarnessError(f"bindfs {shared} {mnt} failed: {r.stderr}")
            harness.wait_until(lambda: _is_mounted(mnt), 10, f"bindfs mount at {mnt}")
            mounts[node] = mnt
        return mounts[node]

    yield mount_for
    for mnt in mounts.values():
        _unmount(mnt)


class Load:
    """An idempotent acks=all librdkafka producer sending ``i`` to partition ``i % PARTITIONS``
    in a thread, recording every acknowledgement (value -> (partition, offset, time))."""

    def __init__(self, bootstrap: str, topic: str, debug: str | None = None):
        self.topic = topic
        self.acked: dict = {}
        self.errors: list = []
        self.twice: list = []
        self.client_log: list = []
        self.lock = threading.Lock()
        self.stop_flag = threading.Event()
        extra = {}
        if debug:
            import logging

            load = self

            class Keep(logging.Handler):
                def emit(self, record):
                    load.client_log.append(record.getMessage())

            logger = logging.getLogger(f"load-{topic}")
            logger.setLevel(logging.DEBUG)
            logger.addHandler(Keep())
            extra = {"debug": debug, "logger": logger}
        self.p = harness.producer(bootstrap, **{
            "acks": "all", "enable.idempotence": True, "linger.ms": 2,
            "message.timeout.ms": 60000, "topic.metadata.refresh.interval.ms": 1000, **extra,
        })
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _on_delivery(self, err, msg):
        with self.lock:
            if err is not None:
                self.errors.append(str(err))
                return
            value = msg.value().decode()
            if value in self.acked:
                self.twice.append(value)
            offset = msg.offset()
            self.acked[value] = (msg.partition(), offset if offset is not None and offset >= 0 else None,
                                 time.monotonic())

    def _run(self):
        i = 0
        while not self.stop_flag.is_set():
            try:
                self.p.produce(self.topic, value=str(i).encode(), partition=i % PARTITIONS,
                               on_delivery=self._on_delivery)
                i += 1
            except BufferError:
                pass
            self.p.poll(0.001 if i % 20 else 0.005)
        self.sent = i

    def start(self):
        self.thread.start()
        return self

    def finish(self, timeout: float = 90) -> None:
        self.stop_flag.set()
        self.thread.join(timeout=10)
        assert not self.thread.is_alive()
        remaining = self.p.flush(timeout)
        assert remaining == 0, f"{remaining} records never acknowledged"
        assert not self.twice, f"acknowledged twice: {self.twice[:5]}"
        # Every record is acknowledged in the end: a failover costs retries, not deliveries.
        assert not self.errors, f"delivery errors: {self.errors[:5]}"


def check_all_readable(bootstrap: str, topic: str, acked: dict) -> None:
    """Every acknowledged record is read back at its partition and offset, once, and each
    partition holds its values in the order they were sent."""
    msgs = harness.consume_partitions(bootstrap, topic, range(PARTITIONS), expected=len(acked), timeout=120)
    seen = {}
    by_partition = defaultdict(list)
    for m in msgs:
        value = m.value().decode()
        assert value not in seen, f"{value} read twice: at {seen[value]} and {(m.partition(), m.offset())}"
        seen[value] = (m.partition(), m.offset())
        by_partition[m.partition()].append((m.offset(), int(value)))
    lost = [v for v in acked if v not in seen]
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {lost[:5]}"
    misplaced = [v for v in acked if seen[v][0] != acked[v][0]]
    assert not misplaced, f"records in another partition than acknowledged: {misplaced[:5]}"
    # librdkafka reports some records delivered without an offset (None): those it knows were
    # written because the broker accepted later sequence numbers after a lost response.
    moved = [(v, acked[v][:2], seen[v]) for v in acked
             if acked[v][1] is not None and seen[v] != acked[v][:2]]
    assert not moved, f"records read at other offsets than acknowledged: {moved[:5]}"
    for p, rows in by_partition.items():
        values = [v for _, v in sorted(rows)]
        assert values == sorted(values), f"partition {p} out of order"


def test_leaders_spread_and_every_broker_routes_to_the_owner(broker_factory, etcd, tmp_path, kafka_tool, topic):
    shared = tmp_path / "shared"
    brokers = start_cluster(broker_factory, etcd, shared)
    # Replicas are logical: a replication factor up to the broker count is accepted.
    kafka_tool(harness.TOPIC_COMMAND, "--bootstrap-server", brokers[0].bootstrap, "--create", "--topic", topic,
               "--partitions", str(PARTITIONS), "--replication-factor", "3").check()
    bootstrap = bootstrap_of(brokers)
    wait_all_led(bootstrap, topic, PARTITIONS)
    desc = describe_partitions(kafka_tool, brokers[2].bootstrap, topic)
    assert sorted(desc) == list(range(PARTITIONS)), desc
    assert {leader for leader, _, _ in desc.values()} == {1, 2, 3}, desc
    for leader, replicas, isr in desc.values():
        # One logical replica, the owner, which is its whole ISR: nothing under-replicated.
        assert replicas == str(leader) and isr == str(leader), desc
    res = kafka_tool(harness.TOPIC_COMMAND, "--bootstrap-server", bootstrap, "--describe",
                     "--under-replicated-partitions").check()
    assert topic not in res.out, res.out

    # Each client talks to one broker only for bootstrap; the owners take the data.
    records = [{"value": str(i).encode(), "partition": i % PARTITIONS} for i in range(600)]
    for b in brokers:
        p = harness.producer(b.bootstrap, **{"acks": "all", "enable.idempotence": True})
        harness.produce_all(p, topic, records[:200])
        records = records[200:]
    for b in brokers:
        got = harness.consume_partitions(b.bootstrap, topic, range(PARTITIONS), expected=600)
        assert sorted(int(m.value()) for m in got) == list(range(600))
    # All partitions are in the one shared directory.
    assert all((shared / f"{topic}-{p}").is_dir() for p in range(PARTITIONS))


def test_sigkill_failover_loses_no_acknowledged_record(volume, broker_factory, etcd, topic):
    brokers = start_cluster(broker_factory, etcd, volume, **PROBE)
    bootstrap = bootstrap_of(brokers)
    harness.create_topic(bootstrap, topic, partitions=PARTITIONS)
    before = wait_all_led(bootstrap, topic, PARTITIONS)
    load = Load(bootstrap, topic).start()
    time.sleep(2)
    victim = brokers[1]
    victim_parts = [p for p, leader in before.items() if leader == 2]
    assert victim_parts, before
    killed_at = time.monotonic()
    victim.kill()
    after = wait_all_led(bootstrap_of(brokers), topic, PARTITIONS, exclude=(2,), timeout=60)
    led_at = time.monotonic()
    # Its partitions are led elsewhere, but it is still listed among the brokers (as Kafka
    # lists a broker until broker.session.timeout.ms, 9 s, after its last heartbeat): clients
    # keep their connection object, and one restarted meanwhile never leaves their view.
    assert live_brokers(bootstrap_of(brokers)) == [1, 2, 3]
    time.sleep(2)
    load.finish()
    # Failover time: from the kill to the first acknowledgement on every partition it owned.
    firsts = []
    for p in victim_parts:
        times = [t for (part, _, t) in load.acked.values() if part == p and t > killed_at]
        assert times, f"nothing acknowledged on partition {p} after the failover"
        firsts.append(min(times) - killed_at)
    print(f"\nfailover: partitions {victim_parts} led elsewhere after {led_at - killed_at:.2f}s; "
          f"first acknowledged produce after {max(firsts):.2f}s; {len(load.acked)} records acknowledged")
    # The dead broker stays gone: once the load is over no partition names it (or no one) as
    # its leader, and once broker.session.timeout.ms has passed the cluster's metadata lists
    # only the survivors. (``after`` cannot show it: wait_all_led returned it because it
    # excluded broker 2.)
    final = leaders(bootstrap_of(brokers), topic)
    assert sorted(final) == list(range(PARTITIONS)) and set(final.values()) <= {1, 3}, final
    harness.wait_until(lambda: live_brokers(bootstrap_of(brokers)) == [1, 3], 20,
                       "the dead broker out of the metadata after broker.session.timeout.ms")
    assert time.monotonic() - killed_at > 8, "the dead broker left the metadata before its session timed out"
    check_all_readable(bootstrap_of(brokers), topic, load.acked)
    # Its listener refused after it had accepted: a survivor took the process for gone and
    # revoked its lease instead of waiting for it to expire (sluice.cluster.death.probe.enable).
    assert any(PROCESS_GONE in b.log_text() for b in (brokers[0], brokers[2])), \
        "no survivor revoked the killed broker's lease"


# What a broker logs when its death probe takes another broker's process for gone.
PROCESS_GONE = "its process is gone; revoking its lease"
# The death probe (sluice.cluster.death.probe.enable) is on by default; these tests say so.
PROBE = {"sluice.cluster.death.probe.enable": "true"}


def test_join_takes_a_share_and_sigterm_hands_over(volume, broker_factory, etcd, topic):
    brokers = start_cluster(broker_factory, etcd, volume, n=2, **PROBE)
    harness.create_topic(bootstrap_of(brokers), topic, partitions=PARTITIONS)
    wait_all_led(bootstrap_of(brokers), topic, PARTITIONS)
    load = Load(bootstrap_of(brokers), topic).start()
    time.sleep(1)

    # A third broker joins and gets a fair share (balancing is on by default).
    from cluster_support import cluster_overrides
    brokers.append(broker_factory(overrides=cluster_overrides(etcd, 3, volume(3), "/sluice-test", **PROBE),
                                  log_dir=volume(3), kind="sluice", name="node3"))

    def balanced():
        counts = defaultdict(int)
        for leader in leaders(bootstrap_of(brokers), topic).values():
            counts[leader] += 1
        return sorted(counts.items()) == [(1, 2), (2, 2), (3, 2)]

    harness.wait_until(balanced, 30, "two partitions on each of three brokers")
    time.sleep(1)

    # SIGTERM: a controlled shutdown hands the partitions over before the process exits.
    brokers[0].stop()
    wait_all_led(bootstrap_of(brokers), topic, PARTITIONS, exclude=(1,), timeout=30)
    time.sleep(1)
    load.finish()
    assert not load.errors, f"delivery errors: {load.errors[:5]}"
    assert "left the cluster" in brokers[0].log_text()
    check_all_readable(bootstrap_of(brokers), topic, load.acked)
    # It left before its listener closed: nobody took it for dead.
    assert not any(PROCESS_GONE in b.log_text() for b in brokers[1:])


def test_sigstopped_owner_steps_down_and_loses_nothing(volume, broker_factory, etcd, topic):
    """An owner paused (SIGSTOP) past its lease: its partitions move; when it resumes it must
    not get an acknowledgement out for data the new owner does not have, and it says in its
    log that it stepped down."""
    import signal

    brokers = start_cluster(broker_factory, etcd, volume, **PROBE)
    bootstrap = bootstrap_of(brokers)
    harness.create_topic(bootstrap, topic, partitions=PARTITIONS)
    before = wait_all_led(bootstrap, topic, PARTITIONS)
    assert 2 in before.values(), before
    load = Load(bootstrap, topic).start()
    time.sleep(2)
    paused = brokers[1]
    paused.proc.send_signal(signal.SIGSTOP)
    try:
        others = ",".join(b.bootstrap for b in (brokers[0], brokers[2]))
        wait_all_led(others, topic, PARTITIONS, exclude=(2,), timeout=60)
        time.sleep(1)
    finally:
        paused.proc.send_signal(signal.SIGCONT)
    # It resumes, finds its lease gone (or, first, its write deadline passed unrenewed: the
    # same step-down, found before etcd answers), releases everything and joins again.
    stepped_down = ("the etcd lease expired", "the etcd lease was not renewed before the write deadline")
    harness.wait_until(lambda: any(m in paused.log_text() for m in stepped_down), 30,
                       "the paused broker to notice it lost its lease")
    time.sleep(3)
    load.finish()
    check_all_readable(bootstrap_of(brokers), topic, load.acked)
    # A paused process still has its listener (the kernel accepts for it): its lease expired,
    # nobody took it for dead.
    assert not any(PROCESS_GONE in b.log_text() for b in (brokers[0], brokers[2]))


def test_etcd_outage_stops_acknowledgements_and_service_resumes(broker_factory, etcd, tmp_path, topic):
    """With etcd down longer than the lease no broker can confirm ownership, so nothing is
    acknowledged (availability goes, safety stays); when etcd is back, service resumes and
    every acknowledged record is there."""
    brokers = start_cluster(broker_factory, etcd, tmp_path / "shared")
    bootstrap = bootstrap_of(brokers)
    harness.create_topic(bootstrap, topic, partitions=PARTITIONS)
    wait_all_led(bootstrap, topic, PARTITIONS)
    load = Load(bootstrap, topic).start()
    time.sleep(2)
    etcd.stop()
    stopped_at = time.monotonic()
    time.sleep(5)  # longer than the 3 s lease
    # etcd serves before it reports itself healthy: the outage ends when it is started again.
    restarted_at = time.monotonic()
    etcd.start()
    # Requests already confirmed when etcd went away may still be answered for a moment.
    # A copy: the producer's delivery callbacks add to load.acked from their own thread.
    during = [v for v, (_, _, t) in list(load.acked.items()) if stopped_at + 1.0 < t < restarted_at]
    assert not during, f"{len(during)} records acknowledged while etcd was down, e.g. {during[:5]}"
    wait_all_led(bootstrap_of(brokers), topic, PARTITIONS, timeout=60)

    def acked_after_restart():
        return any(t > restarted_at for (_, _, t) in list(load.acked.values()))

    harness.wait_until(acked_after_restart, 60, "an acknowledgement after etcd came back")
    time.sleep(1)
    load.finish()
    check_all_readable(bootstrap_of(brokers), topic, load.acked)


def _group_consume(bootstrap: str, topic: str, group: str, count: int, timeout: float = 60) -> set:
    """Consume ``count`` records as a member of ``group`` (subscribe), commit, leave."""
    c = harness.consumer(bootstrap, **{"group.id": group, "enable.auto.offset.store": True,
                                       "enable.partition.eof": False, "session.timeout.ms": 10000})
    got = set()
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(got) < count:
            assert time.monotonic() < deadline, f"group {group} got {len(got)} of {count} records"
            for m in c.consume(num_messages=min(100, count - len(got)), timeout=0.5):
                assert m.error() is None, m.error()
                got.add(int(m.value()))
        c.commit(asynchronous=False)
    finally:
        c.close()
    return got


def test_single_broker_dir_becomes_a_cluster_without_copying(broker_factory, etcd, tmp_path, topic):
    shared = tmp_path / "shared"
    single = broker_factory(log_dir=shared, kind="sluice", name="single",
                            overrides={"group.initial.rebalance.delay.ms": 0})
    harness.create_topic(single.bootstrap, topic, partitions=3, config={"retention.ms": "86400000"})
    records = [{"value": str(i).encode(), "partition": i % 3} for i in range(300)]
    harness.produce_all(harness.producer(single.bootstrap, acks="all"), topic, records)
    first = _group_consume(single.bootstrap, topic, "converted", 120)
    single.stop()
    segment_files = sorted(p.name for p in shared.glob(f"{topic}-*/*.log"))

    brokers = start_cluster(broker_factory, etcd, shared)
    bootstrap = bootstrap_of(brokers)
    wait_all_led(bootstrap, topic, 3)
    assert (shared / "__sluice_meta.imported").is_dir()
    assert not (shared / "__sluice_meta").exists()
    # The same files, now served by the cluster (new segments start at each takeover).
    assert set(segment_files) <= {p.name for p in shared.glob(f"{topic}-*/*.log")}
    got = harness.consume_partitions(bootstrap, topic, range(3), expected=300)
    assert sorted(int(m.value()) for m in got) == list(range(300))
    # Topic configs came along, and the group continues from its committed offsets.
    a = harness.admin(bootstrap)
    from confluent_kafka.admin import ConfigResource
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    conf = a.describe_configs([res])[res].result(timeout=30)
    assert conf["retention.ms"].value == "86400000"
    rest = _group_consume(bootstrap, topic, "converted", 300 - len(first))
    assert not (first & rest), f"records consumed twice: {sorted(first & rest)[:5]}"
    assert first | rest == set(range(300))


REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"
LEADER_ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"


def test_reassign_partitions_and_leader_election_tools_move_ownership(volume, broker_factory, etcd, tmp_path,
                                                                         kafka_tool, topic):
    """kafka-reassign-partitions (--generate, --execute, --verify, --cancel) and
    kafka-leader-election, unchanged, under producer load: a move is an ownership change."""
    import json

    brokers = start_cluster(broker_factory, etcd, volume)
    bootstrap = bootstrap_of(brokers)
    harness.create_topic(bootstrap, topic, partitions=PARTITIONS)
    before = wait_all_led(bootstrap, topic, PARTITIONS)
    load = Load(bootstrap, topic).start()
    time.sleep(1)

    topics_json = tmp_path / "topics.json"
    topics_json.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    gen = kafka_tool(REASSIGN, "--bootstrap-server", bootstrap, "--generate", "--topics-to-move-json-file",
                     str(topics_json), "--broker-list", "1,2").check()
    assert "Proposed partition reassignment configuration" in gen.out, gen.out

    # Move every partition to broker 3.
    plan = {"version": 1, "partitions": [{"topic": topic, "partition": p, "replicas": [3], "log_dirs": ["any"]}
                                         for p in range(PARTITIONS)]}
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    execute = kafka_tool(REASSIGN, "--bootstrap-server", bootstrap, "--execute",
                         "--reassignment-json-file", str(plan_file)).check()
    assert "Successfully started partition reassignment" in execute.out, execute.out + execute.err
    # Every partition goes to broker 3, the plan's one replica, and is described so.
    def all_on_3():
        now = leaders(bootstrap, topic)
        assert now == {p: 3 for p in range(PARTITIONS)}, now
        return now

    harness.wait_until(all_on_3, 30, "every partition led by broker 3, the plan's replica")
    desc = describe_partitions(kafka_tool, bootstrap, topic)
    assert {p: (leader, replicas) for p, (leader, replicas, _) in desc.items()} == {
        p: (3, "3") for p in range(PARTITIONS)}, desc

    def verified():
        res = kafka_tool(REASSIGN, "--bootstrap-server", bootstrap, "--verify",
                         "--reassignment-json-file", str(plan_file)).check()
        return res if res.out.count("is completed") == PARTITIONS else None

    res = harness.wait_until(verified, 30, "--verify to report every reassignment completed")
    assert "still in progress" not in res.out

    # Pinned: balancing leaves them on broker 3.
    time.sleep(1)
    assert set(leaders(bootstrap, topic).values()) == {3}

    # Nothing is under way any more: a cancel has nothing to cancel.
    cancel = kafka_tool(REASSIGN, "--bootstrap-server", bootstrap, "--cancel",
                        "--reassignment-json-file", str(plan_file))
    assert cancel.rc == 0, cancel.out + cancel.err
    assert "None of the specified partition reassignments are active" in cancel.out, cancel.out

    # A target naming a broker that does not exist is refused.
    bad = {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [9]}]}
    bad_file = tmp_path / "bad.json"
    bad_file.write_text(json.dumps(bad))
    refused = kafka_tool(REASSIGN, "--bootstrap-server", bootstrap, "--execute",
                         "--reassignment-json-file", str(bad_file))
    assert refused.rc != 0 and "Unknown broker id 9" in refused.out + refused.err, refused.out

    # Every partition already has its one (preferred) replica as leader.
    election = kafka_tool(LEADER_ELECTION, "--bootstrap-server", bootstrap, "--election-type", "preferred",
                          "--topic", topic, "--partition", "0")
    assert "Valid replica already elected" in election.out + election.err, election.out + election.err

    time.sleep(1)
    load.finish()
    assert not load.errors, f"delivery errors: {load.errors[:5]}"
    check_all_readable(bootstrap, topic, load.acked)
    assert set(before.values()) == {1, 2, 3}


VERIFIABLE_PRODUCER = "org.apache.kafka.tools.VerifiableProducer"
VERIFIABLE_CONSUMER = "org.apache.kafka.tools.VerifiableConsumer"


def _events(path):
    import json
    out = []
    for line in path.read_text(errors="replace").splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def test_java_producer_and_group_consumer_across_a_failover(broker_factory, etcd, tmp_path, topic):
    """Kafka's own verifiable producer (Java, idempotent, acks=all) and verifiable consumer (a
    consumer group committing its offsets) while the broker owning a third of the partitions,
    and perhaps the group's coordinator, is SIGKILLed: every acknowledged record is consumed at
    the offset it was acknowledged at, and the group carries on from its committed offsets."""
    import signal
    import subprocess

    brokers = start_cluster(broker_factory, etcd, tmp_path / "shared")
    bootstrap = bootstrap_of(brokers)
    harness.create_topic(bootstrap, topic, partitions=PARTITIONS)
    before = wait_all_led(bootstrap, topic, PARTITIONS)
    victim_parts = [p for p, leader in before.items() if leader == 2]
    assert victim_parts, before
    produced_log, consumed_log = tmp_path / "producer.out", tmp_path / "consumer.out"
    procs = []
    try:
        with open(consumed_log, "wb") as out:
            procs.append(subprocess.Popen(harness.java_cmd(
                VERIFIABLE_CONSUMER, "--bootstrap-server", bootstrap, "--topic", topic, "--group-id", "verifiable",
                "--reset-policy", "earliest", "--verbose", "--session-timeout", "10000"),
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True))
        with open(produced_log, "wb") as out:
            procs.append(subprocess.Popen(harness.java_cmd(
                VERIFIABLE_PRODUCER, "--bootstrap-server", bootstrap, "--topic", topic, "--throughput", "1000",
                "--acks", "-1"),
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True))
        harness.wait_until(lambda: sum(1 for e in _events(produced_log) if e.get("name") == "producer_send_success") > 500,
                           60, "the verifiable producer to get acknowledgements")
        acked_before_kill = {(e["partition"], e["offset"]) for e in _events(produced_log)
                             if e.get("name") == "producer_send_success"}
        killed_at = time.monotonic()
        brokers[1].kill()
        wait_all_led(bootstrap_of(brokers), topic, PARTITIONS, exclude=(2,), timeout=60)
        print(f"\nleaders moved {time.monotonic() - killed_at:.2f}s after the kill")

        def acked_after_kill(part):
            return any(e.get("name") == "producer_send_success" and e["partition"] == part
                       and (e["partition"], e["offset"]) not in acked_before_kill for e in _events(produced_log))
        # Each moved partition acknowledges again (the client finds the new owner at its next
        # metadata refresh); the assertion below fails with the partition if one never does.
        try:
            harness.wait_until(lambda: all(acked_after_kill(part) for part in victim_parts), 60,
                               "the killed broker's partitions to acknowledge again")
        except harness.HarnessError:
            pass
        time.sleep(1)
        procs[1].send_signal(signal.SIGTERM)
        procs[1].wait(timeout=60)
        successes = [e for e in _events(produced_log) if e.get("name") == "producer_send_success"]
        acked = {(e["partition"], e["offset"]): e["value"] for e in successes}
        assert len(acked) == len(successes), "two records acknowledged at the same partition and offset"
        # The producer got through the failover: the killed broker's partitions took records
        # again under their new owners.
        for part in victim_parts:
            assert any(p == part and (p, o) not in acked_before_kill for p, o in acked), \
                f"nothing acknowledged on partition {part} after its broker was killed"

        def consumed():
            got = {}
            for e in _events(consumed_log):
                if e.get("name") == "record_data":
                    got.setdefault((e["partition"], e["offset"]), []).append(e["value"])
            return got if all(k in got for k in acked) else None

        got = harness.wait_until(consumed, 120, "the group to consume every acknowledged record")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
    wrong = [(k, acked[k], got[k]) for k in acked if any(v != acked[k] for v in got[k])]
    assert not wrong, f"offsets that served another record than acknowledged: {wrong[:5]}"
    # Values are increasing integers: each partition holds them in order.
    for part in range(PARTITIONS):
        values = [int(v[0]) for (p, _), v in sorted(got.items()) if p == part]
        assert values == sorted(values), f"partition {part} out of order"
    again = sum(len(v) - 1 for v in got.values())
    commits = [e for e in _events(consumed_log) if e.get("name") == "offsets_committed" and e.get("success")]
    assert commits, "the group committed nothing"
    print(f"{len(acked)} records acknowledged, all consumed; {again} delivered again after the group's rebalance")


def test_replacement_with_the_dead_brokers_node_id_serves_at_once(broker_factory, etcd, tmp_path, topic):
    """The published validation's scenario: a broker dies and a replacement process with its
    node.id starts on the same volume. It takes over the registration (fencing the dead
    process) and serves its partitions without waiting for the old lease to expire."""
    brokers = start_cluster(broker_factory, etcd, tmp_path / "shared",
                            **{"sluice.cluster.lease.ms": 30000, "sluice.cluster.balance.enable": "false"})
    bootstrap = bootstrap_of(brokers)
    harness.create_topic(bootstrap, topic, partitions=PARTITIONS)
    before = wait_all_led(bootstrap, topic, PARTITIONS)
    theirs = [p for p, o in before.items() if o == 2]
    assert theirs, before
    load = Load(bootstrap, topic).start()
    time.sleep(1)
    brokers[1].kill()
    killed_at = time.monotonic()
    # A partition directory etcd does not know (a deleted topic's leftover) is not brought back.
    (tmp_path / "shared" / "ghost-0").mkdir()
    brokers[1].start()
    # With a 30 s lease the survivors would wait 30 s; the replacement serves long before.
    harness.wait_until(lambda: all(any(part == p and t > killed_at for (part, _, t) in list(load.acked.values()))
                                   for p in theirs), 25, "acknowledgements on the replaced broker's partitions")
    print(f"\nreplacement serving {time.monotonic() - killed_at:.2f}s after the kill (lease 30 s)")
    assert leaders(bootstrap, topic) == before
    assert "ghost" not in harness.admin(bootstrap).list_topics(timeout=10).topics
    load.finish()
    check_all_readable(bootstrap, topic, load.acked)


@pytest.mark.parametrize("lease_ms", [30000, 3000], ids=["lease-alive", "lease-expired"])
def test_a_replaced_process_that_resumes_writes_nothing_and_stays_out(broker_factory, etcd, tmp_path, topic,
                                                                       lease_ms):
    """A broker is paused and a replacement process with its node.id starts (on another port).
    When the paused process resumes, its lease either still lives (30 s: it renews, but the
    registration is the replacement's) or has expired (3 s, paused longer): either way it must
    stop writing at once, let go of everything and never register again (which would fence
    the replacement)."""
    import signal

    from cluster_support import cluster_overrides
    shared = tmp_path / "shared"
    brokers = start_cluster(broker_factory, etcd, shared, n=2,
                            **{"sluice.cluster.lease.ms": lease_ms, "sluice.cluster.balance.enable": "false"})
    bootstrap = bootstrap_of(brokers)
    harness.create_topic(bootstrap, topic, partitions=PARTITIONS)
    before = wait_all_led(bootstrap, topic, PARTITIONS)
    theirs = [p for p, o in before.items() if o == 2]
    assert theirs, before
    old = brokers[1]
    old.proc.send_signal(signal.SIGSTOP)
    try:
        new = broker_factory(overrides=cluster_overrides(etcd, 2, shared, "/sluice-test",
                                                         **{"sluice.cluster.lease.ms": lease_ms,
                                                            "sluice.cluster.balance.enable": "false"}),
                             log_dir=shared, kind="sluice", name="node2-replacement")
        survivors = bootstrap_of([brokers[0], new])
        load = Load(survivors, topic).start()
        harness.wait_until(lambda: all(any(part == p for (part, _, _) in list(load.acked.values()))
                                       for p in theirs), 30, "the replacement serving node 2's partitions")
        time.sleep(lease_ms / 1000 * 1.5 if lease_ms < 10000 else 0)  # the paused one's lease expires
    finally:
        old.proc.send_signal(signal.SIGCONT)
    harness.wait_until(lambda: "another process registered with this node.id" in old.log_text(), 30,
                       "the resumed process to find it was replaced")
    acked_then = len(load.acked)
    harness.wait_until(lambda: len(load.acked) > acked_then + 200, 30, "acknowledgements after the resume")
    load.finish()
    # The replacement still holds node 2's registration and partitions.
    assert [b for b in live_brokers(survivors)] == [1, 2]
    assert leaders(survivors, topic) == before
    assert "registered in the cluster" not in old.log_text().split("another process registered")[-1]
    check_all_readable(survivors, topic, load.acked)


def test_a_takeover_waits_for_a_volume_that_is_not_mounted(broker_factory, etcd, tmp_path, topic):
    """A broker whose mount of the shared volume has gone (unmounted under it: it sees the bare
    mount point) is the only one left when the other dies. It must not serve the dead broker's
    partitions empty from offset 0, nor record a recovery point that forgets the acknowledged
    records: it takes nothing over (it has left the cluster until its volume is back), says
    why, and once the volume is mounted again it joins and takes them over with every
    acknowledged record."""
    import shutil
    import subprocess
    from nfs_support import _is_mounted, _unmount

    if shutil.which("bindfs") is None or not Path("/dev/fuse").exists():
        pytest.fail("bindfs or FUSE unavailable (scripts/test installs bindfs; a check that is skipped proves nothing)")
    shared, mnt = tmp_path / "shared", tmp_path / "mount2"
    shared.mkdir()
    mnt.mkdir()

    def mount():
        r = subprocess.run(["bindfs", str(shared), str(mnt)], capture_output=True, text=True)
        if r.returncode != 0:
            raise harness.HarnessError(f"bindfs {shared} {mnt} failed: {r.stderr}")
        harness.wait_until(lambda: _is_mounted(mnt), 10, f"bindfs mount at {mnt}")

    mount()
    try:
        brokers = start_cluster(broker_factory, etcd, lambda node: shared if node == 1 else mnt, n=2,
                                **{"sluice.cluster.balance.enable": "false"})
        bootstrap = bootstrap_of(brokers)
        harness.create_topic(bootstrap, topic, partitions=2)
        before = wait_all_led(bootstrap, topic, 2)
        theirs = [p for p, o in before.items() if o == 1]
        assert theirs and len(theirs) < 2, before
        on_delivery = harness.Deliveries()
        acked, errors = on_delivery.acked, on_delivery.errors

        p = harness.producer(bootstrap, **{"acks": "all", "enable.idempotence": True, "linger.ms": 0,
                                           "message.timeout.ms": 90000,
                                           "topic.metadata.refresh.interval.ms": 1000})
        for i in range(200):
            p.produce(topic, value=f"before-{i}".encode(), partition=i % 2, on_delivery=on_delivery)
        assert p.flush(60) == 0 and len(acked) == 200, errors[:5]

        _unmount(mnt)  # lazily: broker 2's open files still work; new paths find the bare dir
        harness.wait_until(lambda: not _is_mounted(mnt), 10, "the mount gone")
        brokers[0].kill()
        survivor = brokers[1]
        harness.wait_until(lambda: "its volume is not mounted" in survivor.log_text(), 60,
                           "a refused takeover in the survivor's log")
        for i in range(40):
            p.produce(topic, value=f"after-{i}".encode(), partition=theirs[0], on_delivery=on_delivery)
            p.poll(0)
        time.sleep(2)
        p.poll(0)
        assert not any(v.startswith("after-") for v in acked), "acknowledged while its files were not there"
        assert not any(mnt.glob(f"{topic}-*")), "the takeover created the partition in the bare mount point"
        assert survivor.running, "the survivor exited"

        mount()
        assert p.flush(90) == 0, "records still unacknowledged after the volume came back"
        assert not errors, errors[:5]
        assert len(acked) == 240
        after = sorted(o for v, (part, o) in acked.items() if v.startswith("after-"))
        assert after == list(range(100, 140)), after[:5]
        assert harness.read_back(survivor.bootstrap, topic, [0, 1], expected=len(acked), timeout=60) == acked
    finally:
        _unmount(mnt)


def test_a_broker_on_a_bare_mount_point_does_not_join(broker_factory, etcd, tmp_path, topic):
    """A broker started where the shared volume is not mounted (an empty directory) must not
    join the cluster: it would take partitions over and serve them empty. Its log dir's fresh
    meta.properties has another directory.id than the one the cluster recorded in etcd, so it
    stops at startup and says why; the cluster goes on serving."""
    from cluster_support import cluster_overrides

    shared, bare = tmp_path / "shared", tmp_path / "bare"
    brokers = start_cluster(broker_factory, etcd, shared, n=1)
    bootstrap = bootstrap_of(brokers)
    harness.create_topic(bootstrap, topic, partitions=2)
    wait_all_led(bootstrap, topic, 2)
    bare.mkdir()
    stray = broker_factory(overrides=cluster_overrides(etcd, 2, bare, "/sluice-test"), log_dir=bare,
                           kind="sluice", name="node2", start=False)
    with pytest.raises(harness.HarnessError):
        stray.start(timeout=30)
    assert "not the cluster's shared volume" in stray.log_text()
    assert not any(bare.glob(f"{topic}-*"))
    assert leaders(bootstrap, topic) == {0: 1, 1: 1}
    assert [b.id for b in harness.admin(bootstrap).list_topics(timeout=10).brokers.values()] == [1]


def test_a_broker_whose_volume_goes_away_leaves_and_its_partitions_move(broker_factory, etcd, tmp_path, topic):
    """One broker's mount of the shared volume goes away under load (its faultfs stops: the
    bare mount point is left, unsynced writes lost) while the other still sees the volume. That
    broker leaves the cluster, so its partitions move to the one that can serve them, with no
    acknowledged record lost; when its mount is back it joins again."""
    import sys
    if not Path("/dev/fuse").exists():
        pytest.fail("FUSE unavailable: no /dev/fuse (a check that is skipped proves nothing)")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the faultfs package
    from faultfs import mount_faultfs

    shared, mnt = tmp_path / "shared", tmp_path / "mount2"
    shared.mkdir()
    mount = mount_faultfs(shared, mnt, log_path=tmp_path / "faultfs.log", stop_timeout=1.0)
    try:
        brokers = start_cluster(broker_factory, etcd, lambda node: shared if node == 1 else mnt, n=2,
                                **{"sluice.cluster.balance.enable": "false"})
        bootstrap = bootstrap_of(brokers)
        harness.create_topic(bootstrap, topic, partitions=PARTITIONS)
        before = wait_all_led(bootstrap, topic, PARTITIONS)
        theirs = [p for p, o in before.items() if o == 2]
        assert theirs and len(theirs) < PARTITIONS, before
        load = Load(bootstrap, topic).start()
        time.sleep(2)
        gone_at = time.monotonic()
        mount.stop()
        wait_all_led(bootstrap, topic, PARTITIONS, exclude=(2,), timeout=60)
        assert "leaving the cluster while the shared volume is not mounted" in brokers[1].log_text()
        time.sleep(2)
        # It stays out while its volume is gone: broker 1 leads everything, and once
        # broker.session.timeout.ms has passed the cluster's metadata no longer lists broker 2.
        assert leaders(bootstrap, topic) == {p: 1 for p in range(PARTITIONS)}
        harness.wait_until(lambda: live_brokers(bootstrap) == [1], 20, "broker 2 out of the metadata")
        for p in theirs:
            assert any(part == p and t > gone_at for (part, _, t) in list(load.acked.values())), \
                f"nothing acknowledged on partition {p} after its broker's volume went away"
        assert brokers[1].running, "the broker without its volume exited"

        mount = mount_faultfs(shared, mnt, log_path=tmp_path / "faultfs2.log", stop_timeout=1.0)
        harness.wait_until(lambda: live_brokers(bootstrap) == [1, 2], 30, "the broker back in the cluster")
        load.finish()
        check_all_readable(bootstrap, topic, load.acked)
    finally:
        mount.stop()


def test_admin_requests_right_after_the_controller_dies_reach_a_live_broker(broker_factory, etcd, tmp_path, topic):
    """The etcd controller is SIGKILLed; a client that asks a survivor for metadata before the
    dead broker's lease ends must not be told to send admin requests to the dead one (librdkafka's
    admin client would retry its address until the request times out). Any broker applies them."""
    brokers = start_cluster(broker_factory, etcd, tmp_path / "shared", n=2)
    bootstrap = bootstrap_of(brokers)
    harness.create_topic(bootstrap, topic, partitions=4)
    wait_all_led(bootstrap, topic, 4)
    # Make node 2 the controller: node 1 campaigns first, so stop it until node 2 has taken over.
    brokers[0].kill()
    harness.wait_until(lambda: "became the controller" in brokers[1].log_text(), 30, "node 2 to become the controller")
    brokers[0].start()
    brokers[1].kill()
    admin = harness.admin(brokers[0].bootstrap)
    t0 = time.monotonic()
    admin.delete_topics([topic], operation_timeout=20)[topic].result(timeout=20)
    harness.create_topic(brokers[0].bootstrap, f"{topic}-after", partitions=2)
    # Within the dead broker's lease (3 s) and a round trip: the requests never waited for it.
    print(f"delete and create answered {time.monotonic() - t0:.2f} s after the controller died")
    assert topic not in harness.admin(brokers[0].bootstrap).list_topics(timeout=10).topics


def test_a_takeover_through_a_lagging_view_keeps_a_segment_it_sees_as_empty(broker_factory, etcd, tmp_path, topic):
    """Found by the 30-minute fault run of seed 75 (ctp_lost 1615: faults-ctp-75-0's segment
    10757, filled with acknowledged transactions by broker 1, was replaced by broker 3 as an
    empty last segment). A takeover whose host sees the volume through a lagging NFS view (its
    attribute cache primed while the owner's active segment was still empty) lists that
    segment, so the stale-view check passes, but a stat by name says it is empty; the open
    must judge it by the size an open reports (close-to-open), or it replaces the file and
    every acknowledged record in it is gone."""
    import sys
    if not Path("/dev/fuse").exists():
        pytest.fail("FUSE unavailable: no /dev/fuse (a check that is skipped proves nothing)")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the faultfs package
    from cluster_support import cluster_overrides
    from faultfs import mount_faultfs

    shared, mnt = tmp_path / "shared", tmp_path / "lagging"
    shared.mkdir()
    mount = mount_faultfs(shared, mnt, log_path=tmp_path / "faultfs.log", stop_timeout=1.0)
    try:
        no_balance = {"sluice.cluster.balance.enable": "false", **PROBE}
        (owner,) = start_cluster(broker_factory, etcd, shared, n=1, **no_balance)
        harness.create_topic(bootstrap_of([owner]), topic, partitions=1)
        wait_all_led(bootstrap_of([owner]), topic, 1)
        active = sorted((shared / f"{topic}-0").glob("*.log"))
        assert [p.stat().st_size for p in active] == [0], active
        # The lagging host walks the volume now: the active segment is cached as empty.
        assert mount.attr_cache(120_000, prime=True)["primed"] > 0
        p = harness.producer(bootstrap_of([owner]), acks="all", **{"enable.idempotence": True})
        values = [f"v{i}" for i in range(50)]
        harness.produce_all(p, topic, [{"value": v, "partition": 0} for v in values])
        assert active[0].stat().st_size > 0
        assert (mnt / f"{topic}-0" / active[0].name).stat().st_size == 0, "the view does not lag"

        taker = broker_factory(overrides=cluster_overrides(etcd, 2, mnt, "/sluice-test", **no_balance),
                               log_dir=mnt, kind="sluice", name="node2")
        harness.wait_until(lambda: live_brokers(bootstrap_of([owner])) == [1, 2], 30, "broker 2 registered")
        owner.kill()
        wait_all_led(bootstrap_of([taker]), topic, 1, exclude=(1,), timeout=60)
        got = harness.consume_partitions(bootstrap_of([taker]), topic, [0], timeout=30)
        assert [m.value().decode() for m in got] == values, \
            f"{len(got)} of {len(values)} acknowledged records served after the takeover"
        replaced = [line for line in taker.log_text().splitlines()
                    if "replacing the files of an empty last segment" in line and f'"{topic}"' in line]
        assert not replaced, replaced
    finally:
        mount.stop()


def test_a_broker_started_before_etcd_waits_for_it(broker_factory, tmp_path, topic):
    """A broker started while etcd does not answer yet (both starting, or etcd briefly
    unreachable) keeps trying it, as a Kafka broker waits for its controller quorum, and serves
    once etcd is up; one whose etcd never answers exits after
    `initial.broker.registration.timeout.ms`, saying why. (A fault run's broker, restarted
    while its etcd proxy was not accepting, exited at its first refused connection.)"""
    from cluster_support import cluster_overrides

    etcd = EtcdServer(tmp_path / "etcd")  # not started yet
    shared = tmp_path / "shared"
    shared.mkdir()
    try:
        early = broker_factory(overrides=cluster_overrides(etcd, 1, shared, "/sluice-late"), log_dir=shared,
                               kind="sluice", name="node1", start=False)
        started: list = []
        t = threading.Thread(target=lambda: started.append(early.start(timeout=90)), daemon=True)
        t.start()
        # `early.proc` is set by the starting thread once Popen returns, which can be after the
        # process wrote its first lines.
        harness.wait_until(lambda: early.proc is not None and "etcd does not answer yet" in early.log_text(), 30,
                           "the broker to say it waits for etcd")
        assert early.running, "the broker exited while etcd was down"
        etcd.start()
        t.join(90)
        assert started, f"the broker did not come up once etcd answered:\n{early.log_text()[-2000:]}"
        harness.create_topic(early.bootstrap, topic, partitions=1)
        wait_all_led(early.bootstrap, topic, 1)
        harness.produce_all(harness.producer(early.bootstrap, acks="all"), topic, [{"value": b"v"}])

        # An etcd that never answers: given up after the timeout, with the reason.
        lost = EtcdServer(tmp_path / "etcd-never")
        alone = tmp_path / "alone"
        alone.mkdir()
        never = broker_factory(overrides=cluster_overrides(lost, 2, alone, "/sluice-late", **{
            "initial.broker.registration.timeout.ms": 1500}), log_dir=alone, kind="sluice", name="node2",
            start=False)
        with pytest.raises(harness.HarnessError):
            never.start(timeout=60)
        assert "etcd does not answer yet" in never.log_text()
        assert not never.running
    finally:
        etcd.kill()


def test_an_owner_rolling_fast_is_never_acquired_again(broker_factory, etcd, tmp_path, topic):
    """Every roll rewrites the owner record (its recovery point, newest segment and sealed
    segments). The reconciliation that read the cluster's records between that write and the
    broker taking in its answer saw a record of its own it did not hold, and acquired the
    partition again in place: a new epoch, and every confirmation in flight failed. With
    1 MiB segments under load it re-acquired one partition hundreds of times in a minute.
    Here time rolls (segment.ms 20) make a record write every maintenance round."""
    shared = tmp_path / "shared"
    brokers = start_cluster(broker_factory, etcd, shared, n=1)
    bootstrap = bootstrap_of(brokers)
    harness.create_topic(bootstrap, topic, partitions=1, config={"segment.ms": "20"})
    wait_all_led(bootstrap, topic, 1)
    p = harness.producer(bootstrap, **{"acks": "all", "enable.idempotence": True, "linger.ms": 5})
    failed = []
    # The window is the broker's own threads being scheduled late: busy processes of the
    # test's (3 on this project's 2-core machine made the fault show in every run before the
    # fix) keep the cores contended while it produces.
    import subprocess
    import sys
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(3)]
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            for _ in range(50):
                p.produce(topic, value=b"x" * 512, on_delivery=lambda err, _m: err and failed.append(err))
            p.poll(0.01)
    finally:
        for b in busy:
            b.kill()
            b.wait()
    assert p.flush(60) == 0
    assert not failed, failed[:3]
    segments = len(list((shared / f"{topic}-0").glob("*.log")))
    # leader-epoch-checkpoint: version, count, then "epoch start_offset" per epoch.
    lines = (shared / f"{topic}-0" / "leader-epoch-checkpoint").read_text().split("\n")
    epochs = [int(line.split()[0]) for line in lines[2:] if line.strip()]
    print(f"\n{segments} segments; epochs {epochs}")
    assert segments > 50
    assert epochs and max(epochs) <= 3, epochs
    assert "ownership changed before the acknowledgement" not in brokers[0].log_text()


def test_the_partition_budget_holds_across_the_cluster(broker_factory, etcd, tmp_path, topic):
    # Each broker publishes its partition budget in its registration: topics past what the
    # live brokers hold together are refused, partitions are placed under each broker's
    # budget, and a dead broker's partitions are still served by the survivors, past theirs.
    from confluent_kafka import KafkaError
    from confluent_kafka.admin import NewTopic

    budget, per_topic = 100, 40
    shared = tmp_path / "shared"
    shared.mkdir()
    brokers = start_cluster(broker_factory, etcd, shared,
                            **{**PROBE, "sluice.broker.partitions.max": str(budget)})
    bootstrap = bootstrap_of(brokers)
    a = harness.admin(bootstrap)
    created, refusal = [], None
    for i in range(3 * budget // per_topic + 1):
        name = f"{topic}-{i}"
        try:
            a.create_topics([NewTopic(name, num_partitions=per_topic, replication_factor=1)],
                            request_timeout=60)[name].result(timeout=60)
            created.append(name)
        except Exception as e:  # noqa: BLE001 - the KafkaException carries the error
            refusal = e.args[0]
            break
    assert refusal is not None, "every topic was created: the cluster's budget was never reached"
    assert refusal.code() == KafkaError.POLICY_VIOLATION, refusal
    assert "live brokers' budgets" in refusal.str(), refusal.str()
    md = a.list_topics(timeout=30).topics
    total = sum(len(t.partitions) for t in md.values())
    assert total <= 3 * budget, (total, sorted(md))
    assert total + per_topic > 3 * budget, f"a topic that fits was refused ({total} partitions)"
    owned = defaultdict(int)
    for name in created:
        for leader in wait_all_led(bootstrap, name, per_topic).values():
            owned[leader] += 1
    print(f"{len(created)} topics of {per_topic} created, {total} partitions in all; owned {dict(owned)}")
    assert all(n <= budget for n in owned.values()), owned

    brokers[1].kill()
    for name in created:
        wait_all_led(bootstrap_of(brokers), name, per_topic, exclude=(2,), timeout=60)


def test_failovers_never_make_the_idempotent_producer_bump_its_epoch(broker_factory, etcd, tmp_path, topic):
    # A partition's new owner is named by Metadata as soon as it is assigned. A produce request
    # reaching it before it acquired the partition waits for the acquisition: answered
    # NOT_LEADER_OR_FOLLOWER, the producer's next pipelined request would be refused as out
    # of order once the partition is acquired, and librdkafka then bumps its producer epoch
    # and sends its unacknowledged records again under new sequence numbers, so that those the
    # dead owner had appended are written twice (seen by the fault suite, seed 101).
    shared = tmp_path / "shared"
    shared.mkdir()
    brokers = start_cluster(broker_factory, etcd, shared, **PROBE)
    harness.create_topic(bootstrap_of(brokers), topic, partitions=PARTITIONS)
    wait_all_led(bootstrap_of(brokers), topic, PARTITIONS)
    load = Load(bootstrap_of(brokers), topic, debug="eos").start()
    for victim in (brokers[0], brokers[1], brokers[2], brokers[0]):
        time.sleep(1.5)
        node = int(victim.name.removeprefix("node"))
        victim.kill()
        wait_all_led(bootstrap_of(brokers), topic, PARTITIONS, exclude=(node,), timeout=60)
        victim.start()
        harness.wait_until(lambda: len(live_brokers(bootstrap_of(brokers))) == 3, 60, "the broker back")
    time.sleep(2)
    load.finish()
    check_all_readable(bootstrap_of(brokers), topic, load.acked)
    bumps = [line for line in load.client_log if "bumped epoch" in line or "skipped sequence" in line]
    assert not bumps, bumps[:5]

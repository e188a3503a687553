"""Read replicas on a shared volume (KIP-392, issue 58): in a three-broker cluster with one
broker per rack, a consumer with client.rack is sent by each partition's owner to the broker
in its rack (Fetch's preferred_read_replica), which serves the partition straight from the
shared files without owning it, never past what the owner published. Checked on the brokers'
metrics (bytes served by read replicas, redirects by owners) and against what a consumer of
the owners reads: the same records at the same offsets, read_uncommitted and read_committed,
and through an owner's kill. With `replica.selector.class` the leader's, nothing changes."""

import re
import time
import urllib.request

import pytest

import harness
from cluster_support import bootstrap_of, cluster_overrides, live_brokers, wait_all_led

pytestmark = pytest.mark.sluice_only

RACKS = {1: "rack-a", 2: "rack-b", 3: "rack-c"}


def racked_cluster(broker_factory, etcd, tmp_path, **extra):
    shared = tmp_path / "shared"
    shared.mkdir()
    brokers, ports = {}, {}
    for node, rack in RACKS.items():
        ports[node] = harness.free_port()
        brokers[node] = broker_factory(
            overrides=cluster_overrides(etcd, node, shared, "/sluice-reads", **{
                "broker.rack": rack, "sluice.metrics.listener": f"127.0.0.1:{ports[node]}", **extra}),
            log_dir=shared, kind="sluice", name=f"node{node}")
    bootstrap = bootstrap_of(brokers.values())
    harness.wait_until(lambda: len(live_brokers(bootstrap)) == 3, 30, "3 brokers")
    return brokers, ports


def metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    assert m, f"{name} missing"
    return float(m.group(1))


def owners_of(bootstrap: str, topic: str, partitions: int) -> dict:
    return wait_all_led(bootstrap, topic, partitions, timeout=60)


def read_all(bootstrap: str, topic: str, partitions: int, expected: int, **conf) -> dict:
    """partition -> [(offset, value)] read with assign() from the beginning."""
    msgs = harness.consume_partitions(bootstrap, topic, range(partitions), expected=expected, timeout=90,
                                      **{"fetch.wait.max.ms": 100, **conf})
    out: dict = {}
    for m in msgs:
        out.setdefault(m.partition(), []).append((m.offset(), m.value()))
    return out


def test_a_consumer_reads_from_the_broker_in_its_rack(broker_factory, etcd, tmp_path, topic):
    brokers, ports = racked_cluster(broker_factory, etcd, tmp_path)
    bootstrap = bootstrap_of(brokers.values())
    harness.create_topic(bootstrap, topic, partitions=3)
    owners = owners_of(bootstrap, topic, 3)
    records = [{"value": b"v%d" % i, "partition": i % 3} for i in range(3000)]
    harness.produce_all(harness.producer(bootstrap, acks="all"), topic, records)

    # Metadata lists every racked broker as an in-sync replica, the owner first (the Java
    # client follows a preferred read replica only to a broker listed as a replica).
    md = harness.admin(bootstrap).list_topics(topic, timeout=10).topics[topic]
    for p, pm in md.partitions.items():
        assert pm.leader == owners[p]
        assert pm.replicas[0] == owners[p] and sorted(pm.replicas) == [1, 2, 3], pm.replicas
        assert sorted(pm.isrs) == [1, 2, 3]

    truth = read_all(bootstrap, topic, 3, 3000)
    assert sum(len(v) for v in truth.values()) == 3000

    before = {n: metric(ports[n], "sluice_read_replica_bytes_total") for n in RACKS}
    redirects = {n: metric(ports[n], "sluice_preferred_replica_redirects_total") for n in RACKS}
    got = read_all(bootstrap, topic, 3, 3000, **{"client.rack": "rack-b"})
    assert got == truth
    # Broker 2 (rack-b) served the partitions it does not own; the other owners sent the
    # consumer there.
    not_owned = [p for p, o in owners.items() if o != 2]
    assert not_owned, owners
    assert metric(ports[2], "sluice_read_replica_bytes_total") > before[2]
    for p in not_owned:
        assert metric(ports[owners[p]], "sluice_preferred_replica_redirects_total") > redirects[owners[p]]
    # An owner in the consumer's rack sends it nowhere.
    assert metric(ports[2], "sluice_preferred_replica_redirects_total") == redirects[2]
    assert metric(ports[2], "sluice_read_replica_partitions") == len(not_owned)


def test_read_committed_through_a_replica_sees_what_the_owner_gives(broker_factory, etcd, tmp_path, topic):
    from confluent_kafka import Producer

    brokers, _ports = racked_cluster(broker_factory, etcd, tmp_path)
    bootstrap = bootstrap_of(brokers.values())
    harness.create_topic(bootstrap, topic, partitions=3)
    owners_of(bootstrap, topic, 3)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-tx"})
    p.init_transactions(30)
    for t in range(12):
        p.begin_transaction()
        for i in range(50):
            p.produce(topic, value=b"t%d-%d" % (t, i), partition=i % 3)
        if t % 3 == 2:
            p.flush(30)  # written, then aborted (librdkafka drops what it has not sent)
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    committed = 8 * 50
    truth = read_all(bootstrap, topic, 3, committed, **{"isolation.level": "read_committed"})
    assert sum(len(v) for v in truth.values()) == committed
    assert not any(v.startswith(b"t2-") for vs in truth.values() for _, v in vs)
    got = read_all(bootstrap, topic, 3, committed, **{"isolation.level": "read_committed", "client.rack": "rack-c"})
    assert got == truth
    # read_uncommitted (librdkafka's default is read_committed) through the replica gives
    # every record, aborted ones included, as the owners do.
    uncommitted = {"isolation.level": "read_uncommitted"}
    everything = read_all(bootstrap, topic, 3, 600, **uncommitted)
    assert sum(len(v) for v in everything.values()) == 600
    assert read_all(bootstrap, topic, 3, 600, **uncommitted, **{"client.rack": "rack-c"}) == everything


def test_a_replica_reader_keeps_reading_through_an_owners_kill(broker_factory, etcd, tmp_path, topic):
    """A consumer in rack-c reads a partition owned in rack-a through broker 3 while records
    keep coming; broker 1 is killed mid-way. Every acknowledged record is read once, in offset
    order, nothing skipped or repeated."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    brokers, ports = racked_cluster(broker_factory, etcd, tmp_path, **{"sluice.cluster.death.probe.enable": "true"})
    bootstrap = bootstrap_of(brokers.values())
    harness.create_topic(bootstrap, topic, partitions=3)
    owners = owners_of(bootstrap, topic, 3)
    part = next(p for p, o in owners.items() if o == 1)
    prod = harness.producer(bootstrap, acks="all")
    acked = []

    def produce(n, start):
        vals = [b"r%d" % i for i in range(start, start + n)]
        for v in vals:
            prod.produce(topic, value=v, partition=part,
                         on_delivery=lambda err, m: err is None and acked.append(m.value()))
        prod.flush(60)

    produce(500, 0)
    c = harness.consumer(bootstrap, **{"client.rack": "rack-c", "fetch.wait.max.ms": 100})
    seen = []
    try:
        c.assign([TopicPartition(topic, part, OFFSET_BEGINNING)])

        def drain(until):
            deadline = time.monotonic() + 90
            while len(seen) < until and time.monotonic() < deadline:
                for m in c.consume(num_messages=1000, timeout=0.5):
                    if m.error() is None:
                        seen.append((m.offset(), m.value()))
        drain(500)
        assert metric(ports[3], "sluice_read_replica_bytes_total") > 0
        brokers[1].kill()
        wait_all_led(bootstrap_of([brokers[2], brokers[3]]), topic, 3, exclude=(1,), timeout=60)
        produce(500, 500)
        drain(len(acked))
    finally:
        c.close()
    offsets = [o for o, _ in seen]
    assert offsets == sorted(set(offsets)), "records repeated or out of order"
    assert offsets == list(range(offsets[0], offsets[0] + len(offsets))), "records skipped"
    assert sorted(v for _, v in seen) == sorted(acked)


def test_java_consumer_follows_the_preferred_read_replica(broker_factory, etcd, tmp_path, topic):
    brokers, ports = racked_cluster(broker_factory, etcd, tmp_path)
    bootstrap = bootstrap_of(brokers.values())
    harness.create_topic(bootstrap, topic, partitions=3)
    owners = owners_of(bootstrap, topic, 3)
    records = [{"value": b"v%d" % i, "partition": i % 3} for i in range(900)]
    harness.produce_all(harness.producer(bootstrap, acks="all"), topic, records)
    before = metric(ports[2], "sluice_read_replica_bytes_total")
    prog = harness.JavaProgram(tmp_path, "rack-b-consumer", "RackConsumer", bootstrap, f"{topic}-g", topic, "rack-b")
    try:
        def read():
            return {(int(w[1]), int(w[2])) for w in prog.words("REC")}
        harness.wait_until(lambda: len(read()) >= 900, 90, "every record read by the Java consumer")
        assert len(read()) == 900
        assert {p for p, _ in read()} == {0, 1, 2}
    finally:
        prog.terminate()
    if any(o != 2 for o in owners.values()):
        assert metric(ports[2], "sluice_read_replica_bytes_total") > before


def test_the_leader_selector_keeps_reads_on_the_owner(broker_factory, etcd, tmp_path, topic):
    brokers, ports = racked_cluster(broker_factory, etcd, tmp_path, **{
        "replica.selector.class": "org.apache.kafka.common.replica.LeaderSelector"})
    bootstrap = bootstrap_of(brokers.values())
    harness.create_topic(bootstrap, topic, partitions=3)
    owners = owners_of(bootstrap, topic, 3)
    harness.produce_all(harness.producer(bootstrap), topic, [{"value": b"x", "partition": p} for p in range(3)])
    md = harness.admin(bootstrap).list_topics(topic, timeout=10).topics[topic]
    assert {p: pm.replicas for p, pm in md.partitions.items()} == {p: [o] for p, o in owners.items()}
    assert sum(len(v) for v in read_all(bootstrap, topic, 3, 3, **{"client.rack": "rack-b"}).values()) == 3
    for n in RACKS:
        assert metric(ports[n], "sluice_read_replica_bytes_total") == 0
        assert metric(ports[n], "sluice_preferred_replica_redirects_total") == 0


def _reader_consumer(bootstrap: str, topic: str, part: int, rack: str, start=None):
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    c = harness.consumer(bootstrap, **{"client.rack": rack, "fetch.wait.max.ms": 100,
                                       "isolation.level": "read_uncommitted", "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, part, OFFSET_BEGINNING if start is None else start)])
    return c


def _drain(c, seen: list, until: int, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while len(seen) < until and time.monotonic() < deadline:
        for m in c.consume(num_messages=1000, timeout=0.5):
            if m.error() is None:
                seen.append((m.offset(), m.value()))


def _reading_through_broker_3(broker_factory, etcd, tmp_path, topic, **extra):
    """Three racked brokers; 500 records in a partition broker 1 owns, read by a rack-c
    consumer through broker 3. Returns (brokers, ports, bootstrap, owners, partition, producer,
    consumer, the (offset, value) pairs read)."""
    brokers, ports = racked_cluster(broker_factory, etcd, tmp_path, **extra)
    bootstrap = bootstrap_of(brokers.values())
    harness.create_topic(bootstrap, topic, partitions=3)
    owners = owners_of(bootstrap, topic, 3)
    part = next(p for p, o in owners.items() if o == 1)
    prod = harness.producer(bootstrap, acks="all")
    harness.produce_all(prod, topic, [{"value": b"a%d" % i, "partition": part} for i in range(500)])
    c = _reader_consumer(bootstrap, topic, part, "rack-c")
    seen: list = []
    try:
        _drain(c, seen, 500)
        assert len(seen) == 500
        assert metric(ports[3], "sluice_read_replica_bytes_total") > 0
    except BaseException:
        c.close()
        raise
    return brokers, ports, bootstrap, owners, part, prod, c, seen


def test_a_killed_reader_sends_its_consumers_back_to_the_owner(broker_factory, etcd, tmp_path, topic):
    """A consumer in rack-c reads a partition owned in rack-a through broker 3; broker 3 is
    killed; the consumer goes on reading from the owner, nothing skipped or repeated."""
    brokers, _ports, bootstrap, _owners, part, prod, c, seen = _reading_through_broker_3(
        broker_factory, etcd, tmp_path, topic, **{"sluice.cluster.death.probe.enable": "true"})
    try:
        brokers[3].kill()
        harness.produce_all(prod, topic, [{"value": b"b%d" % i, "partition": part} for i in range(500)])
        _drain(c, seen, 1000)
    finally:
        c.close()
    assert [o for o, _ in seen] == list(range(1000))


def test_a_reader_follows_delete_records_and_retention(broker_factory, etcd, tmp_path, topic):
    """Records deleted below a new log start on the owner (DeleteRecords) are not served by
    the reader once it learned the new start: a consumer of the reader positioned below it is
    reset as a consumer of the owner would be (auto.offset.reset=earliest: to the new start),
    and reads on from there."""
    from confluent_kafka import TopicPartition

    brokers, _ports = racked_cluster(broker_factory, etcd, tmp_path, **{"log.segment.bytes": 1 << 20})
    bootstrap = bootstrap_of(brokers.values())
    harness.create_topic(bootstrap, topic, partitions=1)
    owner = owners_of(bootstrap, topic, 1)[0]
    other = next(n for n in RACKS if n != owner)
    prod = harness.producer(bootstrap, acks="all")
    # About 4 MB: four segments, the first ones wholly below the new start.
    harness.produce_all(prod, topic, [{"value": b"x%04d" % i + bytes(2000), "partition": 0} for i in range(2000)])
    truth = read_all(bootstrap, topic, 1, 2000, **{"isolation.level": "read_uncommitted"})[0]
    got = read_all(bootstrap, topic, 1, 2000, **{"isolation.level": "read_uncommitted", "client.rack": RACKS[other]})[0]
    assert got == truth
    a = harness.admin(bootstrap)
    a.delete_records([TopicPartition(topic, 0, 1500)], request_timeout=30)[TopicPartition(topic, 0, 1500)].result()
    # Positioned below the new start: reset to it, as by the owner.
    c = _reader_consumer(bootstrap, topic, 0, RACKS[other], start=0)
    seen: list = []
    try:
        _drain(c, seen, 500)
    finally:
        c.close()
    assert [o for o, _ in seen] == list(range(1500, 2000))
    assert seen == [(o, v) for o, v in truth if o >= 1500]


REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


def test_a_reader_follows_a_planned_move_and_the_tools_see_one_replica(broker_factory, etcd, tmp_path,
                                                                       kafka_tool, topic):
    """kafka-reassign-partitions moves a partition read through a reader (rack-c consumer, owner
    in rack-a) to broker 2 while records keep coming: the consumer reads every record once, in
    order; kafka-topics --describe shows the owner as the one replica, and --verify reports the
    move completed."""
    import json

    from cluster_support import describe_partitions

    _brokers, _ports, bootstrap, _owners, part, prod, c, seen = _reading_through_broker_3(
        broker_factory, etcd, tmp_path, topic)
    try:
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps({"version": 1, "partitions": [
            {"topic": topic, "partition": part, "replicas": [2], "log_dirs": ["any"]}]}))
        kafka_tool(REASSIGN, "--bootstrap-server", bootstrap, "--execute", "--reassignment-json-file",
                   str(plan)).check()
        harness.wait_until(lambda: owners_of(bootstrap, topic, 3)[part] == 2, 30, "the partition owned by 2")
        harness.produce_all(prod, topic, [{"value": b"b%d" % i, "partition": part} for i in range(500)])
        _drain(c, seen, 1000)

        def verified():
            res = kafka_tool(REASSIGN, "--bootstrap-server", bootstrap, "--verify",
                             "--reassignment-json-file", str(plan)).check()
            return res if "is completed" in res.out else None
        harness.wait_until(verified, 30, "--verify to report the move completed")
        desc = describe_partitions(kafka_tool, bootstrap, topic)
        assert desc[part][:2] == (2, "2"), desc
    finally:
        c.close()
    assert [o for o, _ in seen] == list(range(1000))


def test_a_reader_serves_a_compacted_topic_consistently(broker_factory, etcd, tmp_path, topic):
    """A compacted topic read through a reader while the owner's cleaner rewrites it: every
    record the reader's consumer gets is the one produced at its offset, in offset order, and
    the latest value of every key is among them."""
    from confluent_kafka import Producer

    brokers, _ports = racked_cluster(broker_factory, etcd, tmp_path, **{"log.cleaner.backoff.ms": 200})
    bootstrap = bootstrap_of(brokers.values())
    harness.create_topic(bootstrap, topic, partitions=1, config={
        "cleanup.policy": "compact", "segment.bytes": str(1 << 20), "min.cleanable.dirty.ratio": "0.01",
        "segment.ms": "500"})
    owner = owners_of(bootstrap, topic, 1)[0]
    other = next(n for n in RACKS if n != owner)
    produced: dict = {}
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})

    def produce(n, start):
        for i in range(start, start + n):
            key, value = b"k%03d" % (i % 100), b"v%06d" % i + bytes(1000)
            p.produce(topic, key=key, value=value, partition=0,
                      on_delivery=lambda err, m: err is None and produced.__setitem__(m.offset(), (m.key(), m.value())))
        p.flush(60)

    produce(3000, 0)
    c = _reader_consumer(bootstrap, topic, 0, RACKS[other])
    seen: list = []
    try:
        deadline = time.monotonic() + 90
        rounds, next_round = 0, time.monotonic()
        while time.monotonic() < deadline:
            if rounds < 10 and time.monotonic() >= next_round:
                # More of the same keys: segments keep rolling and the cleaner keeps switching.
                produce(300, 3000 + 300 * rounds)
                rounds, next_round = rounds + 1, time.monotonic() + 1
            for m in c.consume(num_messages=200, timeout=0.2):
                if m.error() is None:
                    seen.append((m.offset(), m.key(), m.value()))
            if rounds == 10 and seen and seen[-1][0] >= max(produced):
                break
    finally:
        c.close()
    offsets = [o for o, _, _ in seen]
    assert offsets == sorted(set(offsets)), "records repeated or out of order"
    for o, k, v in seen:
        assert produced.get(o) == (k, v), f"offset {o}: read {k!r}, produced {produced.get(o, (None,))[0]!r}"
    # The reader crossed the cleaner's work: it read compacted segments (offsets it skipped).
    assert len(offsets) < len(produced), (len(offsets), len(produced))
    latest = {}
    for o in sorted(produced):
        latest[produced[o][0]] = o
    assert set(latest.values()) <= set(offsets)


# Found by an adversary on 42c0382 (the first version of read replicas), since fixed.


def test_adv_reassign_verify_reports_a_move_completed_with_read_replicas(broker_factory, etcd, tmp_path,
                                                                          kafka_tool, topic):
    """Found by an adversary on 42c0382, since fixed. docs/cluster.md 'Moving partitions by hand': `kafka-reassign-partitions --verify`
    reports a move completed once the new owner acquired the partition. With read replicas
    on (broker.rack set, the default selector) Metadata/DescribeTopics list every racked
    broker as a replica, so the tool compares [owner, readers...] to the plan's [N] and
    never reports the move completed."""
    import json

    brokers, _ports = racked_cluster(broker_factory, etcd, tmp_path)
    bootstrap = bootstrap_of(brokers.values())
    harness.create_topic(bootstrap, topic, partitions=1)
    owners = owners_of(bootstrap, topic, 1)
    target = next(n for n in RACKS if n != owners[0])
    plan = {"version": 1, "partitions": [{"topic": topic, "partition": 0, "replicas": [target],
                                          "log_dirs": ["any"]}]}
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    execute = kafka_tool(REASSIGN, "--bootstrap-server", bootstrap, "--execute",
                         "--reassignment-json-file", str(plan_file)).check()
    assert "Successfully started partition reassignment" in execute.out, execute.out + execute.err
    harness.wait_until(lambda: owners_of(bootstrap, topic, 1)[0] == target or None, 30, "the move")

    last = {}

    def verified():
        res = kafka_tool(REASSIGN, "--bootstrap-server", bootstrap, "--verify",
                         "--reassignment-json-file", str(plan_file))
        last["out"] = res.out + res.err
        return res if "is completed" in res.out else None

    try:
        harness.wait_until(verified, 30, "--verify to report the reassignment completed")
    except Exception:
        raise AssertionError("--verify never reported the move completed: " + last.get("out", ""))



def test_adv_a_replica_follows_its_partition_moved_to_another_log_dir(broker_factory, etcd, tmp_path, topic):
    """Found by an adversary on 42c0382, since fixed. Claim 3 through AlterReplicaLogDirs on the owner (several shared log dirs, docs/cluster.md
    'Per-directory files'): readers.rs makes a Replica's ReplicaReader on the directory it
    found at the replica's making (Readers::replica, partition_dir) and keeps it while the
    topic id, owner and epoch are unchanged. A move between log dirs changes none of them, so
    broker 3 keeps reading the old directory, which the owner no longer writes (then
    removes): the rack-c consumer reads nothing past the move."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition
    from nfs_support import alter_replica_log_dirs, dir_of

    shared1, shared2 = tmp_path / "shared1", tmp_path / "shared2"
    shared1.mkdir()
    shared2.mkdir()
    brokers, ports = {}, {}
    for node, rack in RACKS.items():
        ports[node] = harness.free_port()
        brokers[node] = broker_factory(
            overrides=cluster_overrides(etcd, node, shared1, "/sluice-reads", **{
                "log.dirs": f"{shared1},{shared2}", "broker.rack": rack,
                "sluice.metrics.listener": f"127.0.0.1:{ports[node]}"}),
            log_dir=shared1, kind="sluice", name=f"node{node}")
    bootstrap = bootstrap_of(brokers.values())
    harness.wait_until(lambda: len(live_brokers(bootstrap)) == 3, 30, "3 brokers")
    harness.create_topic(bootstrap, topic, partitions=3)
    owners = owners_of(bootstrap, topic, 3)
    part = next(p for p, o in owners.items() if o != 3)
    owner = brokers[owners[part]]
    prod = harness.producer(bootstrap, acks="all")
    acked = []

    def produce(start, n):
        for i in range(start, start + n):
            prod.produce(topic, value=b"r%d" % i, partition=part,
                         on_delivery=lambda err, m: err is None and acked.append(m.value()))
        prod.flush(60)

    produce(0, 500)
    c = harness.consumer(bootstrap, **{"client.rack": "rack-c", "fetch.wait.max.ms": 100})
    seen = []
    try:
        c.assign([TopicPartition(topic, part, OFFSET_BEGINNING)])

        def drain(until, secs):
            deadline = time.monotonic() + secs
            while len(seen) < until and time.monotonic() < deadline:
                for m in c.consume(num_messages=1000, timeout=0.5):
                    if m.error() is None:
                        seen.append((m.offset(), m.value()))
        drain(500, 60)
        assert len(seen) == 500
        assert metric(ports[3], "sluice_read_replica_bytes_total") > 0
        origin = dir_of(owner.bootstrap, topic, part)
        target = str(shared2) if origin == str(shared1) else str(shared1)
        assert alter_replica_log_dirs(owner.bootstrap, {target: {topic: [part]}}) == {(topic, part): 0}
        harness.wait_until(lambda: dir_of(owner.bootstrap, topic, part) == target, 60, "the move between log dirs")
        produce(500, 500)
        drain(1000, 60)
    finally:
        c.close()
    offsets = [o for o, _ in seen]
    assert offsets == sorted(set(offsets)), "records repeated or out of order"
    assert len(seen) == len(acked) == 1000, f"read {len(seen)} of {len(acked)} acknowledged records"


def test_adv_reassign_generate_works_with_read_replicas(broker_factory, etcd, tmp_path, kafka_tool, topic):
    """Found by an adversary on 42c0382, since fixed. Same root cause as the --verify finding: `kafka-reassign-partitions --generate` takes a
    partition's replication factor from the replicas Metadata lists, now [owner, readers...]
    (3 in a three-rack cluster), so a plan for a broker list of two fails ('Replication factor:
    3 larger than available brokers: 2'), where without racks it proposes one."""
    import json

    brokers, _ports = racked_cluster(broker_factory, etcd, tmp_path)
    bootstrap = bootstrap_of(brokers.values())
    harness.create_topic(bootstrap, topic, partitions=3)
    owners_of(bootstrap, topic, 3)
    topics_json = tmp_path / "topics.json"
    topics_json.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    gen = kafka_tool(REASSIGN, "--bootstrap-server", bootstrap, "--generate", "--topics-to-move-json-file",
                     str(topics_json), "--broker-list", "1,2")
    assert gen.rc == 0 and "Proposed partition reassignment configuration" in gen.out, gen.out + gen.err


def test_adv_without_racks_a_non_owner_still_refuses_a_consumers_fetch(broker_factory, etcd, tmp_path, topic):
    """Found by an adversary on 42c0382, since fixed. Claim 4 (nothing changes for clusters without broker.rack): fetch.rs `source()` makes a
    read replica for any consumer fetch of a partition another broker owns whenever
    `replica.selector.class` is not the leader's (the default), whatever the racks and the
    Fetch version. So in a cluster without broker.rack, a Fetch v4 (before KIP-392's v11;
    Kafka's followers refuse it) sent to a non-owner is no longer answered
    NOT_LEADER_OR_FOLLOWER: it is answered with no error (nothing yet, then the records)."""
    from test_cluster_fencing import fetch_error

    shared = tmp_path / "shared"
    shared.mkdir()
    brokers = {}
    for node in RACKS:
        brokers[node] = broker_factory(
            overrides=cluster_overrides(etcd, node, shared, "/sluice-reads"),
            log_dir=shared, kind="sluice", name=f"node{node}")
    bootstrap = bootstrap_of(brokers.values())
    harness.wait_until(lambda: len(live_brokers(bootstrap)) == 3, 30, "3 brokers")
    harness.create_topic(bootstrap, topic, partitions=1)
    owner = owners_of(bootstrap, topic, 1)[0]
    harness.produce_all(harness.producer(bootstrap, acks="all"), topic, [{"value": b"x", "partition": 0}] * 10)
    other = next(n for n in RACKS if n != owner)
    codes = []
    for _ in range(3):
        codes.append(fetch_error(brokers[other].bootstrap, topic, 0))
        time.sleep(1.2)
    assert codes == [6, 6, 6], f"Fetch v4 to non-owner {other} answered {codes} (6: NOT_LEADER_OR_FOLLOWER)"


def test_adv_a_replica_serves_records_deleted_records_removed(broker_factory, etcd, tmp_path, topic):
    """Found by an adversary on 42c0382, since fixed. DeleteRecords on the owner moves its log start without waking the read replicas' polls
    (fetch.rs: a poll waits on fetch_waiters, which DeleteRecords does not wake; only an HWM
    move or POLL_WAIT answers it), so for up to 500 ms after DeleteRecords is acknowledged
    a reader still serves the records below the new log start, which the owner refuses
    (OFFSET_OUT_OF_RANGE); Kafka acknowledges DeleteRecords only once every replica's log
    start has moved (its low watermark)."""
    from confluent_kafka import TopicPartition

    brokers, ports = racked_cluster(broker_factory, etcd, tmp_path)
    bootstrap = bootstrap_of(brokers.values())
    harness.create_topic(bootstrap, topic, partitions=1)
    owners = owners_of(bootstrap, topic, 1)
    if owners[0] == 3:
        pytest.skip("partition owned in rack-c")
    prod = harness.producer(bootstrap, acks="all")
    harness.produce_all(prod, topic, [{"value": b"w%d" % i, "partition": 0} for i in range(200)])
    assert sum(len(v) for v in read_all(bootstrap, topic, 1, 200, **{"client.rack": "rack-c"}).values()) == 200
    admin = harness.admin(bootstrap)
    c = harness.consumer(bootstrap, **{"client.rack": "rack-c", "fetch.wait.max.ms": 50,
                                       "auto.offset.reset": "error"})
    served_deleted = []
    try:
        end = 200
        for i in range(12):
            harness.produce_all(prod, topic, [{"value": b"n%d-%d" % (i, j), "partition": 0} for j in range(20)])
            end += 20
            time.sleep(0.05)
            cut = end - 10
            admin.delete_records([TopicPartition(topic, 0, cut)], request_timeout=30)[
                TopicPartition(topic, 0, cut)].result(timeout=30)
            # DeleteRecords is acknowledged: nothing below `cut` may be read any more.
            c.assign([TopicPartition(topic, 0, cut - 5)])
            deadline = time.monotonic() + 1.5
            while time.monotonic() < deadline:
                for m in c.consume(num_messages=100, timeout=0.1):
                    if m.error() is None and m.offset() < cut:
                        served_deleted.append((i, cut, m.offset()))
            c.unassign()
    finally:
        c.close()
    assert not served_deleted, f"records below an acknowledged DeleteRecords' offset read: {served_deleted[:10]}"


# Found by an adversary on 0d6bb4e (the second round), since fixed.

def test_adv2_delete_records_on_a_recreated_topic_waits_for_the_old_incarnations_readers(
        broker_factory, etcd, tmp_path, topic):
    """Found by an adversary on 0d6bb4e, since fixed. Adversary 2 (claim 4, DeleteRecords answers): an owner notes a reader's polls by topic
    NAME (readers.rs `polled_by: HashMap<TopicPartition, ..>`, `note_poll` from fetch.rs
    handle), and forgets a reader only READER_GONE (10 s) after its last poll. After a topic
    is deleted and re-created under the same name, the old incarnation's readers (whose
    replicas were dropped with it: nobody reads the new topic through them) still count as
    readers "behind" any new log start, so DeleteRecords on the new topic waits up to 10 s
    and, with a shorter timeout, is answered REQUEST_TIMED_OUT although no broker reads it
    but its owner (on main: answered at once)."""
    from confluent_kafka import TopicPartition

    parts = 12
    brokers, _ports = racked_cluster(broker_factory, etcd, tmp_path)
    bootstrap = bootstrap_of(brokers.values())
    harness.create_topic(bootstrap, topic, partitions=parts)
    old_owners = owners_of(bootstrap, topic, parts)
    prod = harness.producer(bootstrap, acks="all")
    harness.produce_all(prod, topic, [{"value": b"o%d" % i, "partition": i % parts} for i in range(parts * 10)])
    # Every partition read through a reader (rack-b reads through 2, rack-c through 3).
    for rack in ("rack-b", "rack-c"):
        got = read_all(bootstrap, topic, parts, parts * 10, **{"client.rack": rack})
        assert sum(len(v) for v in got.values()) == parts * 10
    admin = harness.admin(bootstrap)
    admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=30)
    harness.wait_until(lambda: topic not in admin.list_topics(timeout=10).topics, 30, "topic gone")
    deleted_at = time.monotonic()
    # Owners are assigned round robin: one-partition topics until the next partition goes
    # to the old topic's first owner, so that the re-created partitions have their old owners.
    for i in range(3):
        dummy = f"{topic}-shift{i}"
        harness.create_topic(bootstrap, dummy, partitions=1)
        if owners_of(bootstrap, dummy, 1)[0] % 3 + 1 == old_owners[0]:
            break
    for attempt in range(50):
        try:
            harness.create_topic(bootstrap, topic, partitions=parts)
            break
        except Exception:  # noqa: BLE001 (still being deleted)
            time.sleep(0.1)
    new_owners = owners_of(bootstrap, topic, parts)
    same = [p for p in range(parts) if new_owners[p] == old_owners[p]]
    if not same:
        pytest.skip(f"no partition re-created on its old owner: {old_owners} {new_owners}")
    harness.produce_all(prod, topic, [{"value": b"n%d" % i, "partition": p} for p in same for i in range(20)])
    tps = [TopicPartition(topic, p, 10) for p in same]
    started = time.monotonic()
    futures = admin.delete_records(tps, request_timeout=30, operation_timeout=3)
    errors = {}
    for tp, f in futures.items():
        try:
            f.result(timeout=30)
        except Exception as e:  # noqa: BLE001
            errors[tp.partition] = str(e)
    took = time.monotonic() - started
    assert not errors and took < 2.5, (
        f"DeleteRecords on a topic nobody reads but its owners ({time.monotonic() - deleted_at:.1f} s after "
        f"the old incarnation's deletion) took {took:.1f} s, errors {errors}")


def test_adv2_an_owner_keeps_sending_consumers_to_a_reader_that_cannot_poll_it(
        broker_factory, etcd, tmp_path, topic):
    """Found by an adversary on 0d6bb4e, since fixed. Adversary 2 (claim 3, liveness): the owner names a preferred read replica from the
    brokers registered with reads on in the consumer's rack (fetch.rs `preferred_replica`,
    lib.rs `read_replicas`), whether or not that broker is polling it (the owner knows:
    readers.rs `polled_by`). A reader whose polls cannot reach its owner (here: the owner's
    inter-broker listener black-holed, its client listener and etcd fine) turns stale after
    ANSWER_STALE and answers NOT_LEADER_OR_FOLLOWER (fetch.rs `read_replica`); the consumer
    goes back to the owner, which sends it to the same reader again, forever: records the
    owner holds and serves are never read (Kafka's leader prefers only a caught-up replica,
    and a follower that stops fetching leaves the ISR after replica.lag.time.max.ms)."""
    from tcp_proxy import TcpProxy

    shared = tmp_path / "shared"
    shared.mkdir()
    brokers, proxies = {}, {}
    try:
        for node, rack in RACKS.items():
            b = broker_factory(start=False, log_dir=shared, kind="sluice", name=f"node{node}")
            internal = harness.free_port()
            proxies[node] = TcpProxy(internal)
            b.overrides.update(cluster_overrides(etcd, node, shared, "/sluice-reads", **{"broker.rack": rack}))
            b.overrides.update({
                "listeners": f"PLAINTEXT://127.0.0.1:{b.port},INTERNAL://127.0.0.1:{internal}",
                "advertised.listeners":
                    f"PLAINTEXT://127.0.0.1:{b.port},INTERNAL://127.0.0.1:{proxies[node].port}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:PLAINTEXT",
                "inter.broker.listener.name": "INTERNAL",
            })
            b.start()
            brokers[node] = b
        bootstrap = bootstrap_of(brokers.values())
        harness.wait_until(lambda: len(live_brokers(bootstrap)) == 3, 30, "3 brokers")
        harness.create_topic(bootstrap, topic, partitions=1)
        owner = owners_of(bootstrap, topic, 1)[0]
        reader = next(n for n in RACKS if n != owner)
        prod = harness.producer(bootstrap, acks="all")
        harness.produce_all(prod, topic, [{"value": b"a%d" % i, "partition": 0} for i in range(200)])
        c = _reader_consumer(bootstrap, topic, 0, RACKS[reader])
        seen: list = []
        try:
            _drain(c, seen, 200)
            assert len(seen) == 200
            # Only broker-to-broker traffic to the owner stops; clients reach it as before.
            proxies[owner].blackhole(True)
            harness.produce_all(prod, topic, [{"value": b"b%d" % i, "partition": 0} for i in range(200)])
            _drain(c, seen, 400, timeout=60)
        finally:
            c.close()
        # The owner serves all of them to a consumer without a rack.
        direct = read_all(bootstrap, topic, 1, 400)[0]
        assert [o for o, _ in direct] == list(range(400))
        assert [o for o, _ in seen] == list(range(400)), (
            f"read {len(seen)} of 400 records in 60 s with the owner {owner} reachable by clients")
    finally:
        for p in proxies.values():
            p.close()


def test_adv2_a_consumer_is_not_sent_to_a_reader_without_its_listener(broker_factory, etcd, tmp_path, topic):
    """Found by an adversary on 0d6bb4e, since fixed. Adversary 2 (claim 3): the owner chooses the preferred read replica among every live
    racked broker with reads on (fetch.rs `preferred_replica`, lib.rs `read_replicas`),
    whatever listener the consumer came in on; Metadata on that listener leaves out a
    broker without it (lib.rs `live_endpoints`, as Kafka). Kafka's leader considers only
    replicas with an endpoint on the client's listener (`getPartitionReplicaEndpoints(tp,
    listenerName)`). Here broker 2 (rack-b) has no EXTERNAL listener: a rack-b consumer on
    EXTERNAL is sent to broker 2, which it cannot find, and the owner gives it nothing, ever
    (librdkafka: "preferred replica (2) currently unknown")."""
    from confluent_kafka import OFFSET_BEGINNING, TopicPartition

    shared = tmp_path / "shared"
    shared.mkdir()
    brokers, external = {}, {}
    for node, rack in RACKS.items():
        b = broker_factory(start=False, log_dir=shared, kind="sluice", name=f"node{node}")
        b.overrides.update(cluster_overrides(etcd, node, shared, "/sluice-reads", **{"broker.rack": rack}))
        if node != 2:
            external[node] = f"127.0.0.2:{harness.free_port()}"
            b.overrides.update({
                "listeners": f"PLAINTEXT://127.0.0.1:{b.port},EXTERNAL://{external[node]}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{b.port},EXTERNAL://{external[node]}",
                "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,EXTERNAL:PLAINTEXT",
                "inter.broker.listener.name": "PLAINTEXT",
            })
        b.start()
        brokers[node] = b
    bootstrap = bootstrap_of(brokers.values())
    harness.wait_until(lambda: len(live_brokers(bootstrap)) == 3, 30, "3 brokers")
    harness.create_topic(bootstrap, topic, partitions=3)
    owners = owners_of(bootstrap, topic, 3)
    part = next((p for p, o in owners.items() if o != 2), None)
    if part is None:
        pytest.skip("every partition owned by broker 2")
    prod = harness.producer(bootstrap, acks="all")
    harness.produce_all(prod, topic, [{"value": b"e%d" % i, "partition": part} for i in range(100)])
    ext_bootstrap = ",".join(external.values())
    # Without a rack, a consumer on EXTERNAL reads them all from the owner.
    direct = harness.consume_partitions(ext_bootstrap, topic, [part], expected=100, timeout=30)
    assert sorted(m.offset() for m in direct) == list(range(100))
    c = harness.consumer(ext_bootstrap, **{"client.rack": "rack-b", "fetch.wait.max.ms": 100,
                                           "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, part, OFFSET_BEGINNING)])
    seen: list = []
    try:
        _drain(c, seen, 100, timeout=30)
    finally:
        c.close()
    assert [o for o, _ in seen] == list(range(100)), (
        f"a rack-b consumer on EXTERNAL read {len(seen)} of 100 records from owner {owners[part]} in 30 s")

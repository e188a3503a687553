"""Fencing in a cluster: a broker cut off from etcd, while its clients still reach it, writes
nothing into the partitions another broker took over, and its coordinators send clients away
(issue 51). Three brokers on one shared directory, each reaching etcd through its own TCP proxy
so that one can be cut off alone."""

from __future__ import annotations

import struct
import time

import pytest
from confluent_kafka import TopicPartition as TP

import harness
from cluster_support import bootstrap_of, cluster_overrides, coordinator_of, live_brokers, start_cluster, wait_all_led
from nfs_support import _request, _string
from tcp_proxy import TcpProxy

pytestmark = pytest.mark.sluice_only

FETCH = 1
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
NOT_LEADER_OR_FOLLOWER = 6
NOT_COORDINATOR = 16
COORDINATOR_NOT_AVAILABLE = 15


@pytest.fixture
def proxy_factory():
    """TcpProxy(port), each closed (its process gone) after the test."""
    made = []

    def make(port: int) -> TcpProxy:
        made.append(TcpProxy(port))
        return made[-1]

    yield make
    for p in made:
        p.close()


def offset_commit(bootstrap: str, group: str, topic: str, partition: int, offset: int) -> int:
    """OffsetCommit v2 of one offset, as a group without members commits (generation -1):
    the partition's error code."""
    body = (_string(group) + struct.pack(">i", -1) + _string("") + struct.pack(">q", -1)
            + struct.pack(">i", 1) + _string(topic) + struct.pack(">i", 1)
            + struct.pack(">iqh", partition, offset, -1))
    r = _request(bootstrap, OFFSET_COMMIT, 2, body, timeout=60)
    assert r.take(">i") == 1
    r.string()
    assert r.take(">i") == 1
    assert r.take(">i") == partition
    return r.take(">h")


def offset_fetch(bootstrap: str, group: str, topic: str, partition: int) -> tuple:
    """OffsetFetch v3 of one partition: (group error code, partition error code, offset)."""
    body = _string(group) + struct.pack(">i", 1) + _string(topic) + struct.pack(">ii", 1, partition)
    r = _request(bootstrap, OFFSET_FETCH, 3, body, timeout=60)
    r.take(">i")  # throttle
    topics = r.take(">i")
    code, offset = 0, -1
    if topics:  # none when the whole group failed (its error code follows)
        assert topics == 1
        r.string()
        assert r.take(">i") == 1
        assert r.take(">i") == partition
        offset = r.take(">q")
        r.string()
        code = r.take(">h")
    return r.take(">h"), code, offset


def fetch_error(bootstrap: str, topic: str, partition: int) -> int:
    """Fetch v4 of one partition from offset 0, without waiting: its error code."""
    body = (struct.pack(">iiiib", -1, 0, 1, 1 << 20, 0) + struct.pack(">i", 1) + _string(topic)
            + struct.pack(">i", 1) + struct.pack(">iqi", partition, 0, 1 << 20))
    r = _request(bootstrap, FETCH, 4, body, timeout=60)
    r.take(">i")  # throttle
    assert r.take(">i") == 1
    r.string()
    assert r.take(">i") == 1
    assert r.take(">i") == partition
    return r.take(">h")


def committed(bootstrap: str, group: str, topic: str) -> int:
    c = harness.consumer(bootstrap, **{"group.id": group})
    try:
        return c.committed([TP(topic, 0)], timeout=30)[0].offset
    finally:
        c.close()


def test_a_coordinator_cut_off_from_etcd_writes_nothing_and_offsets_survive(broker_factory, etcd, proxy_factory,
                                                                           tmp_path, topic):
    """The broker coordinating ``__consumer_offsets-0`` is cut off from etcd; another takes the
    partition over. Commits sent to the cut-off broker afterwards are refused with
    NOT_COORDINATOR and written nowhere: neither appended, nor snapshotted (the snapshot raises
    the log start, which removes the segments below it), nor rolled (segments roll every
    second here); OffsetFetch is refused too, and the partition's records are no longer
    served (NOT_LEADER_OR_FOLLOWER). A group whose offsets were committed before the move keeps them through a
    reload of the partition by the next owner."""
    shared = tmp_path / "shared"
    proxies, brokers = {}, []
    for node in (1, 2, 3):
        proxy = proxy_factory(etcd.client_port)
        proxies[node] = proxy
        props = cluster_overrides(etcd, node, shared, "/sluice-fencing", **{
            "sluice.cluster.etcd.endpoints": proxy.endpoint,
            "offsets.topic.num.partitions": 1,
            "sluice.offsets.snapshot.interval.records": 5,
            "log.cleaner.enable": "false",
            "log.roll.ms": 1000,
        })
        brokers.append(broker_factory(overrides=props, log_dir=shared, kind="sluice", name=f"node{node}"))
    bootstrap = bootstrap_of(brokers)
    harness.wait_until(lambda: len(live_brokers(bootstrap)) == 3, 30, "3 brokers in the cluster's metadata")
    harness.create_topic(bootstrap, topic, partitions=1)

    c = harness.consumer(bootstrap, **{"group.id": "kept"})
    c.commit(offsets=[TP(topic, 0, 42)], asynchronous=False)
    c.close()
    assert committed(bootstrap, "kept", topic) == 42
    time.sleep(2.5)  # a segment or two past the commit (log.roll.ms)
    cut = coordinator_of(bootstrap, "kept")
    zombie = brokers[cut - 1]
    others = [b for b in brokers if b is not zombie]
    proxies[cut].blackhole(True)
    try:
        harness.wait_until(lambda: coordinator_of(bootstrap_of(others), "kept") not in (-1, cut), 60,
                           "another broker coordinating the group")
        new_owner_id = coordinator_of(bootstrap_of(others), "kept")
        assert new_owner_id not in (-1, cut), new_owner_id

        # The cut-off broker still answers its clients, but no longer as the coordinator.
        codes = [offset_commit(zombie.bootstrap, "zombie-group", topic, 0, 1000 + i) for i in range(12)]
        assert set(codes) <= {NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE}, codes
        group_code, code, _ = offset_fetch(zombie.bootstrap, "kept", topic, 0)
        assert NOT_COORDINATOR in (group_code, code), (group_code, code)
        # Nor does it serve the partition's records: it could not write them either.
        assert fetch_error(zombie.bootstrap, "__consumer_offsets", 0) == NOT_LEADER_OR_FOLLOWER
        time.sleep(3)  # time rolls and maintenance on the cut-off broker, were they to write
    finally:
        proxies[cut].blackhole(False)

    # The next owner loads the partition again from the files: a controlled shutdown hands it
    # over to a live broker, which reads it from the shared directory.
    new_owner = brokers[new_owner_id - 1]
    new_owner.stop()
    live = [b for b in brokers if b.running]
    harness.wait_until(lambda: coordinator_of(bootstrap_of(live), "kept") not in (-1, new_owner_id), 60,
                       "a coordinator after the hand-over")
    assert committed(bootstrap_of(live), "kept", topic) == 42
    assert committed(bootstrap_of(live), "zombie-group", topic) < 0, "a refused commit was kept"


def _owner_record(etcd, key: str) -> dict:
    import base64
    import json
    kvs = etcd.call("/v3/kv/range", {"key": base64.b64encode(key.encode()).decode()}).get("kvs", [])
    assert len(kvs) == 1, f"no owner record at {key}"
    return json.loads(base64.b64decode(kvs[0]["value"]))


def _put(etcd, key: str, value: dict) -> None:
    import base64
    import json
    etcd.call("/v3/kv/put", {"key": base64.b64encode(key.encode()).decode(),
                             "value": base64.b64encode(json.dumps(value).encode()).decode()})


def test_a_log_continued_past_removed_segments_is_read_by_real_clients(broker_factory, etcd, tmp_path, topic,
                                                                       kafka_tool):
    """Damage in a shared directory's log, with segments after it, is cut and those segments
    removed; before removing them the open makes the log continue past their base offsets with
    a segment holding one batch of no records over those offsets (docs/cluster.md, Fencing
    point 2). librdkafka and the Java console consumer read across that batch, and new records
    go past it."""
    shared = tmp_path / "shared"
    shared.mkdir()
    (node,) = start_cluster(broker_factory, etcd, shared, n=1, **{"sluice.cluster.balance.enable": "false"})
    bootstrap = bootstrap_of([node])
    harness.create_topic(bootstrap, topic, partitions=1, config={"segment.bytes": str(1 << 20)})
    wait_all_led(bootstrap, topic, 1)
    p = harness.producer(bootstrap, acks="all", **{"linger.ms": 0, "batch.num.messages": 1})
    first = [f"first-{i:03d}-" + "x" * 60_000 for i in range(80)]
    for v in first:  # one batch each
        harness.produce_all(p, topic, [{"value": v, "partition": 0}])
    pdir = shared / f"{topic}-0"
    segments = sorted(pdir.glob("*.log"))
    assert len(segments) >= 4, segments
    node.kill()

    # The record's recovery point lags (as after a crash before it was written): the next open
    # validates every segment. A host crash damaged the last batch of the second segment.
    key = f"/sluice-test/owners/{topic}/0"
    record = _owner_record(etcd, key)
    record["recovery_point"] = 0
    record.pop("sealed", None)
    _put(etcd, key, record)
    damaged = segments[1]
    data = bytearray(damaged.read_bytes())
    data[-1] ^= 0xFF
    damaged.write_bytes(bytes(data))
    later = [int(s.stem) for s in segments[2:]]

    node.start()
    wait_all_led(bootstrap, topic, 1, timeout=60)
    assert "the log continues past the segments removed after the damage" in node.log_text_since_start(), \
        harness.tail(node.log_file)
    # Every record before the damaged batch, then new ones past the removed bases.
    before = harness.consume_partitions(bootstrap, topic, [0], timeout=60)
    kept = [m.value().decode() for m in before]
    assert kept == first[:len(kept)] and 0 < len(kept) < len(first), kept
    new = [f"new-{i}" for i in range(5)]
    acked = harness.produce_all(harness.producer(bootstrap, acks="all"), topic,
                                [{"value": v, "partition": 0} for v in new])
    assert min(m.offset() for m in acked) > max(later), \
        f"a new record at or below a removed base: {[m.offset() for m in acked]}, removed {later}"

    got = harness.consume_partitions(bootstrap, topic, [0], expected=len(kept) + len(new), timeout=60)
    assert [m.value().decode() for m in got] == kept + new
    res = kafka_tool(harness.CONSOLE_CONSUMER, "--bootstrap-server", bootstrap, "--topic", topic,
                     "--from-beginning", "--max-messages", str(len(kept) + len(new)), "--timeout-ms", "30000",
                     timeout=120)
    res.check("kafka-console-consumer across the batch of no records")
    assert res.out.split() == kept + new, res.describe()[-3000:]

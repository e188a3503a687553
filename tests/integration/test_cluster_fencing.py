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
from cluster_support import bootstrap_of, cluster_overrides, coordinator_of, live_brokers
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
def etcd(tmp_path):
    from cluster_support import EtcdServer
    server = EtcdServer(tmp_path / "etcd").start()
    yield server
    server.kill()


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

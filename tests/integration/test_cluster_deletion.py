"""Deleting topics in a cluster (issue 51): a topic deleted while the broker owning a partition
of it is down, then created again under the same name, comes online empty (the old partition
directory is put aside, its data never served), and the down broker removes what is left of a
deleted topic once it is back, as Kafka removes stray logs at start-up. Two brokers on one
shared directory, a real etcd."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

import harness
from cluster_support import bootstrap_of, leaders, start_cluster, wait_all_led

pytestmark = pytest.mark.sluice_only

PARTITIONS = 4
# From re-creating the topic to records acknowledged on every partition: the broker that was
# down has to be out of the cluster first (its lease, 3 s here), then the survivor acquires.
ONLINE_WITHIN_S = 30


def produce(bootstrap: str, topic: str, prefix: str, n: int, timeout: float = 60) -> dict:
    """``n`` acks=all records over every partition: value -> (partition, offset)."""
    p = harness.producer(bootstrap, **{"acks": "all", "enable.idempotence": True,
                                       "message.timeout.ms": int(timeout * 1000),
                                       "topic.metadata.refresh.interval.ms": 500})
    records = [{"value": f"{prefix}-{i}".encode(), "partition": i % PARTITIONS} for i in range(n)]
    delivered = harness.produce_all(p, topic, records, flush_timeout=timeout)
    return {m.value().decode(): (m.partition(), m.offset()) for m in delivered}


def partition_dirs(shared: Path, topic: str) -> list:
    """Every directory of the shared log dir that holds (or held) a partition of ``topic``."""
    return sorted(d.name for d in shared.iterdir() if d.is_dir() and d.name.startswith(f"{topic}-"))


@pytest.mark.parametrize("metadata", ["stamped", "absent"])
def test_a_topic_deleted_while_its_owner_is_down_comes_back_empty(broker_factory, etcd, tmp_path, topic, metadata):
    shared = tmp_path / "shared"
    brokers = start_cluster(broker_factory, etcd, shared, n=2)
    bootstrap = bootstrap_of(brokers)
    kept = f"{topic}-gone"  # deleted and not created again
    for t in (topic, kept):
        harness.create_topic(bootstrap, t, partitions=PARTITIONS)
        wait_all_led(bootstrap, t, PARTITIONS)
    old = produce(bootstrap, topic, "old", 200)
    produce(bootstrap, kept, "old", 200)
    owners = leaders(bootstrap, topic)
    assert set(owners.values()) == {1, 2}, f"the test needs partitions on both brokers: {owners}"
    kept_owners = leaders(bootstrap, kept)
    down, survivor = brokers[1], brokers[0]
    old_dirs = {p: (shared / f"{topic}-{p}" / "partition.metadata").read_text() for p in range(PARTITIONS)}

    down.kill()
    admin = harness.admin(survivor.bootstrap)
    for t in (topic, kept):
        admin.delete_topics([t], operation_timeout=30)[t].result(timeout=30)
    # The survivor's own partitions go with the deletion; the down broker's stay for now.
    harness.wait_until(
        lambda: all(not (shared / f"{t}-{p}").exists()
                    for t, of in ((topic, owners), (kept, kept_owners)) for p, o in of.items() if o == 1),
        30, "the survivor's partitions of the deleted topics removed")

    if metadata == "absent":
        # As a log dir from a Kafka before topic ids leaves it: nothing names the deleted
        # topic in the directories left, and an open would stamp them as the new topic's.
        for p in range(PARTITIONS):
            (shared / f"{topic}-{p}" / "partition.metadata").unlink(missing_ok=True)
    created = time.monotonic()
    harness.create_topic(survivor.bootstrap, topic, partitions=PARTITIONS)
    new = produce(survivor.bootstrap, topic, "new", 200, timeout=ONLINE_WITHIN_S)
    online_s = time.monotonic() - created
    assert online_s < ONLINE_WITHIN_S, online_s
    # Only the new topic's records, from offset 0 on: nothing of the deleted one is served.
    got = harness.read_back(survivor.bootstrap, topic, range(PARTITIONS), expected=len(new))
    assert got == new, f"read {len(got)} records, {sorted(set(got) - set(new))[:5]} not written now"
    assert all(off < 200 // PARTITIONS for _, off in got.values()), "offsets continue the deleted topic's"
    assert not set(got) & set(old)
    for p in range(PARTITIONS):
        md = (shared / f"{topic}-{p}" / "partition.metadata").read_text()
        assert md != old_dirs[p], f"partition {p} still has the deleted topic's directory"
    # The directories put aside are removed: only the new topic's are left. The other deleted
    # topic's directories of the broker that is down go too, once its lease is gone: the
    # controller puts them aside (test_a_deleted_topic_of_a_broker_that_never_returns_is_removed).
    expected = sorted(f"{topic}-{p}" for p in range(PARTITIONS))
    harness.wait_until(lambda: partition_dirs(shared, topic) == expected, 30,
                       "only the new topic's directories")

    # The broker that was down comes back to find nothing of the deleted topics to serve.
    down.start()
    harness.wait_until(lambda: not any((shared / f"{kept}-{p}").exists() for p in range(PARTITIONS)), 30,
                       f"the deleted topic's directories removed (have {partition_dirs(shared, kept)})")
    harness.wait_until(lambda: not [d for d in partition_dirs(shared, topic) if d.endswith("-delete")], 30,
                       "no directory left aside")
    # And the new topic is still served, whole.
    assert harness.read_back(bootstrap_of(brokers), topic, range(PARTITIONS), expected=len(new)) == new


def test_a_topic_created_again_with_fewer_partitions_lets_go_of_the_rest(broker_factory, etcd, tmp_path, topic):
    """Deleted and created again at once with fewer partitions (AdminClient calls back to back,
    so an owner's next view can show the new topic and never the deletion): the owner lets go
    of every partition of the deleted topic, those past the new count too, and their
    directories are removed; a partition it kept open would keep writing into a directory a
    later owner of that name uses."""
    from confluent_kafka.admin import NewTopic
    shared = tmp_path / "shared"
    brokers = start_cluster(broker_factory, etcd, shared, n=2)
    bootstrap = bootstrap_of(brokers)
    harness.create_topic(bootstrap, topic, partitions=8)
    wait_all_led(bootstrap, topic, 8)
    owners = leaders(bootstrap, topic)
    assert any(o == 2 and p >= 4 for p, o in owners.items()), f"the test needs one of 4-7 on broker 2: {owners}"
    # Both calls to broker 1 while broker 2 is paused (well within its lease): its next view
    # shows the new topic and never the deletion.
    admin = harness.admin(brokers[0].bootstrap)
    os.kill(brokers[1].pid, signal.SIGSTOP)
    try:
        admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=30)
        created = admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)])[topic]
        time.sleep(0.5)
    finally:
        os.kill(brokers[1].pid, signal.SIGCONT)
    created.result(timeout=30)
    wait_all_led(bootstrap, topic, 4)
    produce(bootstrap, topic, "new", 40)
    extra = [f"{topic}-{p}" for p in range(4, 8)]
    harness.wait_until(lambda: not [d for d in extra if (shared / d).exists()], 30,
                       f"the deleted topic's partitions 4-7 let go of and removed (have {partition_dirs(shared, topic)})")


def test_a_deleted_topic_is_not_brought_back_by_its_owner_restarting_into_an_empty_cluster(
        broker_factory, etcd, tmp_path, topic):
    """The only topic is deleted while the broker owning some of its partitions is down. That
    broker starts again into a cluster with no topic left: its directories of the deleted topic
    are leftovers to remove, not a log directory to adopt (a cluster with no topic adopts the
    directories it finds, so that a Kafka log directory can be brought in)."""
    shared = tmp_path / "shared"
    # A long lease and no death probe: the broker that is down stays a member until it is back
    # (its new process replaces its registration), so nobody else removes its directories
    # first and its own start meets them.
    brokers = start_cluster(broker_factory, etcd, shared, n=2,
                            **{"sluice.cluster.lease.ms": 30000, "sluice.cluster.death.probe.enable": "false"})
    bootstrap = bootstrap_of(brokers)
    harness.create_topic(bootstrap, topic, partitions=PARTITIONS)
    wait_all_led(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, "old", 200)
    owners = leaders(bootstrap, topic)
    assert set(owners.values()) == {1, 2}, f"the test needs partitions on both brokers: {owners}"
    down, survivor = brokers[1], brokers[0]
    down.kill()
    admin = harness.admin(survivor.bootstrap)
    admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=30)
    assert topic not in admin.list_topics(timeout=30).topics
    harness.wait_until(lambda: all(not (shared / f"{topic}-{p}").exists() for p, o in owners.items() if o == 1),
                       30, "the survivor's partitions of the deleted topic removed")
    assert any((shared / f"{topic}-{p}").exists() for p, o in owners.items() if o == 2)

    down.start()
    harness.wait_until(lambda: not any((shared / f"{topic}-{p}").exists() for p in range(PARTITIONS)), 30,
                       f"the deleted topic's directories removed (have {partition_dirs(shared, topic)})")
    for b in brokers:
        listed = harness.admin(b.bootstrap).list_topics(timeout=30).topics
        assert topic not in listed, f"broker at {b.bootstrap} lists the deleted topic again"
    assert "imported topic into the cluster" not in down.log_text()


def test_a_deleted_topic_of_a_broker_that_never_returns_is_removed(broker_factory, etcd, tmp_path, topic):
    """A topic deleted while a broker owning some of its partitions is down, and that broker
    never comes back: once its lease is gone (so it writes nothing more), the controller puts
    its directories of the deleted topic aside and clears the deletion record; neither stays
    forever."""
    shared = tmp_path / "shared"
    brokers = start_cluster(broker_factory, etcd, shared, n=2)
    bootstrap = bootstrap_of(brokers)
    harness.create_topic(bootstrap, topic, partitions=PARTITIONS)
    wait_all_led(bootstrap, topic, PARTITIONS)
    produce(bootstrap, topic, "old", 200)
    owners = leaders(bootstrap, topic)
    assert set(owners.values()) == {1, 2}, f"the test needs partitions on both brokers: {owners}"
    brokers[1].kill()
    admin = harness.admin(brokers[0].bootstrap)
    admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=30)
    # The deletion is recorded, naming the broker that is down for its partitions.
    assert [k for k in etcd.keys("/sluice-test/") if "/deleted/" in k]
    harness.wait_until(lambda: not partition_dirs(shared, topic), 30,
                       f"every directory of the deleted topic removed (have {partition_dirs(shared, topic)})")
    harness.wait_until(lambda: not [k for k in etcd.keys("/sluice-test/") if "/deleted/" in k], 30,
                       "the deletion record cleared")

"""A slow volume holds up only the request that waits for it: topic deletion, whose unlinks
took seconds on a volume that discards freed blocks synchronously (or over a slow network),
runs off the threads that serve produce and fetch requests."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import harness

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the faultfs package

from faultfs import mount_faultfs  # noqa: E402

pytestmark = pytest.mark.skipif(harness.TARGET != "sluice", reason="Sluice's request threads")


def test_topic_deletion_on_a_slow_volume_holds_up_no_other_client(broker_factory, tmp_path, topic):
    if not os.path.exists("/dev/fuse"):
        pytest.skip("FUSE unavailable: no /dev/fuse")
    mount = mount_faultfs(tmp_path / "backing", tmp_path / "mnt", log_path=tmp_path / "faultfs.log")
    broker = None
    try:
        # One thread serves every connection: anything that blocks it holds up every client.
        # No auto-creation: the clients' metadata requests would create the victim again.
        broker = broker_factory(log_dir=tmp_path / "mnt" / "data",
                                overrides={"sluice.worker.threads": 1, "auto.create.topics.enable": "false"})
        victim, survivor = f"{topic}-victim", f"{topic}-survivor"
        harness.create_topic(broker.bootstrap, victim, partitions=4)
        harness.create_topic(broker.bootstrap, survivor, partitions=1)
        p = harness.producer(broker.bootstrap, acks="all", **{"linger.ms": 0})
        harness.produce_all(p, victim, [{"value": f"v{i}".encode(), "partition": i % 4} for i in range(40)])

        # Each unlink now takes a quarter of a second: deleting the victim's files (several
        # per partition) takes seconds.
        mount.slow_unlink(0.25)
        a = harness.admin(broker.bootstrap)  # kept: a dropped client would not send the request
        deleted = a.delete_topics([victim], operation_timeout=120, request_timeout=120)[victim]
        unlinks = mount.stats()["unlinks"]
        harness.wait_until(lambda: mount.stats()["unlinks"] >= unlinks + 2, 30, "the deletion's first unlinks")
        # A new client, on a new connection, produces to another topic meanwhile.
        q = harness.producer(broker.bootstrap, acks="all", **{"linger.ms": 0})
        acked = harness.produce_all(q, survivor, [{"value": f"s{i}".encode()} for i in range(20)])
        still_deleting = not deleted.done()
        deleted.result(timeout=120)
        mount.slow_unlink(0)

        # Every record to the other topic was acknowledged, at offsets 0-19 of its fresh partition.
        at = [(m.partition(), m.offset()) for m in acked]
        assert at == [(0, i) for i in range(20)], at
        assert still_deleting, (
            "the produce to another topic was acknowledged only once the deletion had finished: "
            "the deletion held the thread that serves requests")
        assert harness.topic_partitions(broker.bootstrap, victim) is None
        assert harness.read_back(broker.bootstrap, survivor, [0], expected=20) == {
            f"s{i}": (0, i) for i in range(20)}
        assert broker.running, "the broker exited"
    finally:
        if broker is not None:
            broker.stop()
        mount.stop()

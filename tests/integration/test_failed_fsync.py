"""A failed fsync takes a partition's log offline until it is re-opened from what storage holds
(docs/reliability.md). The broker re-opens it by itself, without a restart: producers see
retriable errors for a moment, then every record is acknowledged once, and what a consumer
reads is exactly what was acknowledged, at the offsets acknowledged."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

import harness

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the faultfs package

from faultfs import mount_faultfs  # noqa: E402

pytestmark = pytest.mark.skipif(harness.TARGET != "sluice", reason="Sluice's behaviour after a failed fsync")


def _failed_fsync_run(broker_factory, tmp_path, topic, overrides, recovered_line: str):
    mount = harness.crash_fs(tmp_path)
    broker = None
    try:
        broker = broker_factory(log_dir=tmp_path / "mnt" / "data", overrides=overrides)
        harness.create_topic(broker.bootstrap, topic, partitions=1, config={"flush.messages": "1"})
        on_delivery = harness.Deliveries()
        acked, errors = on_delivery.acked, on_delivery.errors

        p = harness.producer(broker.bootstrap, **{"acks": "all", "enable.idempotence": True,
                                                  "linger.ms": 0, "message.timeout.ms": 60000})

        def send(values):
            for v in values:
                p.produce(topic, value=v.encode(), partition=0, on_delivery=on_delivery)
                p.poll(0)
            assert p.flush(90) == 0, "records still unacknowledged"

        send([f"before-{i}" for i in range(50)])
        # The next fsync of the partition's files fails (faultfs drops what it would have
        # synced, as a kernel may): the log is failed from then on.
        mount.fail_next_fsync(match=f"{topic}-0/")
        send([f"after-{i}" for i in range(50)])

        assert not errors, errors[:5]
        assert len(acked) == 100
        text = broker.log_text()
        assert "log refuses writes until it is re-opened" in text, "the fsync failure was not seen"
        assert recovered_line in text, f"no {recovered_line!r} in the broker's log"
        assert broker.running, "the broker exited"

        # Read back: every acknowledged record once, at its acknowledged offset.
        assert harness.read_back(broker.bootstrap, topic, [0], expected=len(acked)) == acked
    finally:
        if broker is not None:
            broker.kill()
        mount.stop()


def test_a_failed_fsync_is_recovered_in_place(broker_factory, tmp_path, topic):
    _failed_fsync_run(broker_factory, tmp_path, topic, None, "re-opened a failed log")


def test_a_failed_fsync_in_a_cluster_is_recovered_by_acquiring_the_partition_again(broker_factory, tmp_path,
                                                                                    topic):
    """In a cluster the failed log is not re-opened in place: the owner lets it go and acquires
    the partition again (a new epoch in etcd before the files are read), so the recovery that
    rewrites its files is fenced like every other write (docs/cluster.md, Fencing)."""
    from cluster_support import EtcdServer, cluster_overrides
    etcd = EtcdServer(tmp_path / "etcd").start()
    try:
        overrides = cluster_overrides(etcd, 1, tmp_path / "mnt" / "data", "/sluice-failed-fsync")
        _failed_fsync_run(broker_factory, tmp_path, topic, overrides,
                          "a failed log is let go and acquired again")
    finally:
        etcd.kill()


def test_writes_refused_for_space_keep_the_idempotent_producers_epoch(broker_factory, tmp_path, topic):
    """While the volume refuses writes (ENOSPC), a librdkafka idempotent producer with several
    requests in flight gets the same retriable storage error for every one of them, retries
    them in order once there is space, and keeps its producer epoch. If the requests behind
    the failed one were refused as out of order, librdkafka would bump the epoch and re-send
    every partition's unanswered batches under new sequences: a batch that had been written
    but whose answer was lost (a broker restart, a failover) is then written twice. A cluster
    fault run duplicated a record exactly so."""
    import logging
    import threading

    mount = harness.crash_fs(tmp_path)
    broker = None
    try:
        broker = broker_factory(log_dir=tmp_path / "mnt" / "data")
        harness.create_topic(broker.bootstrap, topic, partitions=2)
        eos_lines: list = []

        class Collect(logging.Handler):
            def emit(self, record):
                eos_lines.append(record.getMessage())

        logger = logging.getLogger(f"rdkafka-eos-{topic}")
        logger.addHandler(Collect())
        logger.setLevel(logging.DEBUG)
        logger.propagate = False
        on_delivery = harness.Deliveries()
        acked, errors = on_delivery.acked, on_delivery.errors

        p = harness.producer(broker.bootstrap, **{
            "acks": "all", "enable.idempotence": True, "linger.ms": 0,
            "max.in.flight.requests.per.connection": 5, "message.timeout.ms": 60000,
            "debug": "eos", "log_level": 7, "logger": logger})
        refused = threading.Event()
        sent = 0
        start = time.monotonic()
        # Records to both partitions, one request each, for 1.5 s before, 2 s during and 1.5 s
        # after the refusal: requests are in flight when the first write fails.
        while time.monotonic() - start < 5:
            elapsed = time.monotonic() - start
            if 1.5 <= elapsed < 3.5 and not refused.is_set():
                mount.enospc(True)
                refused.set()
            elif elapsed >= 3.5 and refused.is_set():
                mount.enospc(False)
                refused.clear()
            p.produce(topic, value=f"r-{sent}".encode(), partition=sent % 2, on_delivery=on_delivery)
            sent += 1
            p.poll(0)
            time.sleep(0.002)
        if refused.is_set():
            mount.enospc(False)
        assert p.flush(90) == 0, "records still unacknowledged"

        assert mount.stats()["enospc_injected"] > 0, "no write was refused: the test proved nothing"
        assert not errors, errors[:5]
        assert len(acked) == sent
        bumps = [line for line in eos_lines if "bump" in line.lower()]
        assert not bumps, f"the producer bumped its epoch: {bumps[:3]}"

        assert harness.read_back(broker.bootstrap, topic, [0, 1], expected=len(acked)) == acked
    finally:
        if broker is not None:
            broker.kill()
        mount.stop()


def test_a_failed_log_waits_for_its_volume_to_come_back(broker_factory, tmp_path, topic):
    """The volume goes away under a running broker (the file system process dies, an export
    is unmounted: the bare mount point is left). The partition's log fails at its next write,
    and the broker does not re-open it on the empty mount point (which would serve an empty
    log, from offset 0, where acknowledged records were): it keeps the partition offline and
    says why, and once the volume is back it re-opens the log with everything that was
    acknowledged."""
    mount = harness.crash_fs(tmp_path, stop_timeout=1.0)
    backing, mnt = mount.backing, mount.mountpoint
    broker = None
    try:
        broker = broker_factory(log_dir=mnt / "data")
        harness.create_topic(broker.bootstrap, topic, partitions=1, config={"flush.messages": "1"})
        on_delivery = harness.Deliveries()
        acked, errors = on_delivery.acked, on_delivery.errors

        p = harness.producer(broker.bootstrap, **{"acks": "all", "enable.idempotence": True,
                                                  "linger.ms": 0, "message.timeout.ms": 90000})
        for i in range(50):
            p.produce(topic, value=f"before-{i}".encode(), partition=0, on_delivery=on_delivery)
        assert p.flush(60) == 0, "records still unacknowledged"
        assert len(acked) == 50

        mount.stop()  # the broker's files stay open on a dead mount; the mount point is bare
        for i in range(20):
            p.produce(topic, value=f"after-{i}".encode(), partition=0, on_delivery=on_delivery)
            p.poll(0)
        deadline = time.monotonic() + 30
        while "its volume is not mounted" not in broker.log_text():
            assert time.monotonic() < deadline, "no refused re-open in the broker log"
            assert broker.running, "the broker exited"
            p.poll(0.2)
        assert len(acked) == 50, "a record was acknowledged while the volume was away"
        assert not list(mnt.iterdir()), "the broker wrote into the bare mount point"

        mount = mount_faultfs(backing, mnt, log_path=tmp_path / "faultfs2.log")
        assert p.flush(90) == 0, "records still unacknowledged after the volume came back"
        assert not errors, errors[:5]
        assert len(acked) == 70
        assert "re-opened a failed log" in broker.log_text(), "the log was not re-opened"

        assert harness.read_back(broker.bootstrap, topic, [0], expected=len(acked)) == acked
        assert [acked[f"before-{i}"] for i in range(50)] == [(0, o) for o in range(50)]
    finally:
        if broker is not None:
            broker.kill()
        mount.stop()


def test_a_commit_whose_fsync_fails_is_retried_by_the_java_consumer(broker_factory, tmp_path, topic):
    """A failed fsync of `__consumer_offsets` answers the commits waiting on it with a code the
    clients retry after finding the coordinator again (NOT_COORDINATOR, as Kafka's group
    coordinator maps a storage error), not KAFKA_STORAGE_ERROR, which the Java consumer's
    commitSync reports as "Unexpected error in commit". The commit is retried once the log is
    re-opened, and the group's offset at the end is the last one committed."""
    mount = harness.crash_fs(tmp_path)
    broker = None
    try:
        broker = broker_factory(log_dir=tmp_path / "mnt" / "data")
        harness.create_topic(broker.bootstrap, topic, partitions=1)
        group = f"{topic}-g"
        prog = harness.JavaProgram(tmp_path, "commits", "CommitLoop", broker.bootstrap, topic, group, 60, 50)
        prog.wait_for(lambda lines: sum(l.startswith("COMMITTED") for l in lines) >= 10, 120, "ten commits")
        mount.fail_next_fsync(match="__consumer_offsets-")
        lines = prog.finish(180)
        assert lines[-1] == "OK", prog.describe()
        assert "log refuses writes until it is re-opened" in broker.log_text(), "the fsync failure was not seen"
        from confluent_kafka import TopicPartition
        c = harness.consumer(broker.bootstrap, **{"group.id": group})
        try:
            committed = c.committed([TopicPartition(topic, 0)], timeout=30)
        finally:
            c.close()
        assert committed[0].offset == 60, committed
    finally:
        if broker is not None:
            broker.kill()
        mount.stop()

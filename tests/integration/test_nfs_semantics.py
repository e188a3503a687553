"""Safe on NFS semantics: every operation that deletes or replaces data, with the
log dirs on bindfs mounts (FUSE, default options: a file unlinked while open is
renamed to ``.fuse_hidden*`` and removed on last close, so its directory cannot
be removed meanwhile, exactly like an NFS client's silly rename).

Each test runs the operation with live producers and consumers, most of them
with a "foreign handle": another process holding a segment of the partition
being deleted or moved open during the operation and releasing it later. They
assert that the broker stays up and keeps serving, no log directory goes
offline, no acknowledged record of a surviving partition is lost, and every
leftover is gone within a bounded time after the handle closes.

The same scenario against Apache Kafka: test_nfs_kafka_comparison.py.
"""

import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from harness import (CONFIG_COMMAND, SLUICE_BIN, admin, consumer, create_topic, kafka_tool, produce_all, producer,
                     topic_partitions, wait_until)
from nfs_support import (LiveConsumer, LiveProducer, alter_replica_log_dirs, assert_all_acked_readable,  # noqa: F401
                         assert_serving, bindfs_mounts, dir_of, foreign_handle, leftovers, segment_logs,
                         silly_files, wait_for_acks)

pytestmark = pytest.mark.sluice_only

# Fast retention checks and deferred-deletion retries so the suite stays short.
NFS_BROKER = {
    "log.retention.check.interval.ms": 500,
    "auto.create.topics.enable": "false",
    "sluice.delete.retry.initial.ms": 100,
    "sluice.delete.retry.max.ms": 1000,
}
SEGMENT_BYTES = 1048576  # the minimum segment.bytes
LEFTOVER_TIMEOUT = 30  # seconds for leftovers to go once nothing holds them


def start_on_mounts(broker_factory, mounts, **extra):
    dirs = [m for _, m in mounts]
    b = broker_factory(overrides={"log.dirs": ",".join(map(str, dirs)), **NFS_BROKER, **extra}, log_dir=dirs[0])
    return b, dirs, [s for s, _ in mounts]


def partition_dir(mounts, topic, partition):
    """(source dir, mount dir) of a partition, found on the underlying file systems."""
    for src, mnt in mounts:
        d = src / f"{topic}-{partition}"
        if d.is_dir():
            return d, mnt / d.name
    raise AssertionError(f"{topic}-{partition} not found in any log dir")


def fill(bootstrap, topic, partition, mib, value_size=1000):
    p = producer(bootstrap, acks="all", **{"linger.ms": 20, "batch.size": 65536})
    n = mib * 1024 * 1024 // value_size
    produce_all(p, topic, [{"partition": partition, "value": b"%08d" % i + b"v" * (value_size - 8)} for i in range(n)])
    return n


def watermarks(bootstrap, topic, partition):
    from confluent_kafka import TopicPartition

    c = consumer(bootstrap)
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        c.close()


def finish_with_release(broker, dirs, srcs, handles, survivors=()):
    """The operation happened with handles held: leftovers exist, the broker serves. Then release."""
    wait_until(lambda: silly_files(*srcs), 30, "a silly-renamed (.fuse_hidden) file while the foreign handle is held")
    assert_serving(broker, dirs)
    for prod in survivors:
        before = prod.total_acked()
        wait_for_acks(prod, before + 50)
    for h in handles:
        h.release()
    wait_until(lambda: not leftovers(*srcs), LEFTOVER_TIMEOUT,
               "every leftover to be gone after the foreign handle closed",
               interval=0.5)
    assert_serving(broker, dirs)


def assert_logged_deferral(broker):
    text = broker.log_text()
    assert "removal deferred" in text, "the deferral was not logged"
    assert "deferred removal completed" in text, "completion of the deferred removal was not logged"
    assert "panicked" not in text


def test_delete_topic_with_foreign_handle_and_live_fetch(bindfs_mounts, broker_factory, foreign_handle, topic):
    mounts = bindfs_mounts(2)
    broker, dirs, srcs = start_on_mounts(broker_factory, mounts)
    victim, survivor = f"{topic}-victim", f"{topic}-survivor"
    create_topic(broker.bootstrap, victim, partitions=2, config={"segment.bytes": str(SEGMENT_BYTES)})
    create_topic(broker.bootstrap, survivor, partitions=2)
    fill(broker.bootstrap, victim, 0, 2)
    fill(broker.bootstrap, victim, 1, 1)

    prod = LiveProducer(broker.bootstrap, survivor, 2)
    cons = LiveConsumer(broker.bootstrap, survivor, 2)
    fetching_victim = LiveConsumer(broker.bootstrap, victim, 2, **{"max.partition.fetch.bytes": 16384})
    try:
        wait_for_acks(prod, 100)
        _, vmnt = partition_dir(mounts, victim, 0)
        held = foreign_handle(segment_logs(vmnt)[0])
        wait_until(lambda: fetching_victim.count > 100, 30, "the victim's consumer to be mid-fetch")

        a = admin(broker.bootstrap)
        res = a.delete_topics([victim], operation_timeout=30)
        res[victim].result(timeout=30)
        # Gone from clients' view at once.
        assert topic_partitions(broker.bootstrap, victim) is None

        finish_with_release(broker, dirs, srcs, [held], survivors=[prod])
    finally:
        fetching_victim.stop()
        prod.stop()
        cons.stop()
    assert prod.errors == 0, f"{prod.errors} produce errors on the surviving topic"
    assert_all_acked_readable(broker.bootstrap, prod)
    assert cons.count > 0
    assert_logged_deferral(broker)


@pytest.mark.parametrize("kind", ["time", "size"])
def test_retention_with_foreign_handle(bindfs_mounts, broker_factory, foreign_handle, topic, kind):
    mounts = bindfs_mounts(2)
    broker, dirs, srcs = start_on_mounts(broker_factory, mounts)
    retained, survivor = f"{topic}-r", f"{topic}-s"
    create_topic(broker.bootstrap, retained, partitions=1, config={"segment.bytes": str(SEGMENT_BYTES)})
    create_topic(broker.bootstrap, survivor, partitions=1)
    n = fill(broker.bootstrap, retained, 0, 4)
    _, rmnt = partition_dir(mounts, retained, 0)
    held = foreign_handle(segment_logs(rmnt)[0])
    # Retention is switched on only now: set at creation, it could remove the oldest segment
    # between listing it and the foreign process opening it.
    retention = "retention.ms=3000" if kind == "time" else f"retention.bytes={2 * SEGMENT_BYTES}"
    kafka_tool(CONFIG_COMMAND, "--bootstrap-server", broker.bootstrap, "--alter", "--entity-type", "topics",
               "--entity-name", retained, "--add-config", retention).check("kafka-configs --alter")

    prod = LiveProducer(broker.bootstrap, survivor, 1)
    reader = LiveConsumer(broker.bootstrap, retained, 1, **{"max.partition.fetch.bytes": 16384})
    try:
        wait_until(lambda: watermarks(broker.bootstrap, retained, 0)[0] > 0, 60,
                   f"retention ({kind}) to delete the oldest segments")
        finish_with_release(broker, dirs, srcs, [held], survivors=[prod])
        # One more record: time retention may have removed every record by now (the idle
        # active segment rolls and expires too, as Kafka's does), and the reader must read it.
        produce_all(producer(broker.bootstrap, acks="all"), retained, [{"partition": 0, "value": b"after"}])
        # The reader started from the beginning while retention removed it: it resets to the
        # new log start, which can take longer than the removal itself. Bounded, not assumed.
        wait_until(lambda: reader.count > 0, 60, "the consumer of the retained topic to read a record")
    finally:
        reader.stop()
        prod.stop()
    assert prod.errors == 0, f"{prod.errors} produce errors during the deletions"
    low, high = watermarks(broker.bootstrap, retained, 0)
    assert high == n + 1 and 0 < low <= n
    assert_all_acked_readable(broker.bootstrap, prod)
    assert "panicked" not in broker.log_text()


def test_delete_records_while_consumer_mid_fetch_with_foreign_handle(bindfs_mounts, broker_factory,
                                                                     foreign_handle, topic):
    from confluent_kafka import TopicPartition

    mounts = bindfs_mounts(2)
    broker, dirs, srcs = start_on_mounts(broker_factory, mounts)
    create_topic(broker.bootstrap, topic, partitions=1, config={"segment.bytes": str(SEGMENT_BYTES)})
    n = fill(broker.bootstrap, topic, 0, 4)
    _, mnt = partition_dir(mounts, topic, 0)
    held = foreign_handle(segment_logs(mnt)[0])
    # A consumer in the middle of reading the segments being deleted (small fetches).
    reader = LiveConsumer(broker.bootstrap, topic, 1, **{"max.partition.fetch.bytes": 8192})
    prod = LiveProducer(broker.bootstrap, topic, 1)
    try:
        wait_until(lambda: reader.count > 200, 30, "the consumer to be mid-fetch")
        cut = n - 100
        a = admin(broker.bootstrap)
        fut = a.delete_records([TopicPartition(topic, 0, cut)], request_timeout=30)
        res = list(fut.values())[0].result(timeout=30)
        assert res.low_watermark == cut
        finish_with_release(broker, dirs, srcs, [held], survivors=[prod])
    finally:
        reader.stop()
        prod.stop()
    assert reader.count > 200
    assert prod.errors == 0, f"{prod.errors} produce errors during the deletion"
    low, _ = watermarks(broker.bootstrap, topic, 0)
    assert low == cut
    # Everything acknowledged after the cut is still there.
    acked_after = {v for v in prod.acked[0]}
    from harness import consume_partitions

    got = {m.value() for m in consume_partitions(broker.bootstrap, topic, [0], timeout=120)}
    assert acked_after <= got, f"{len(acked_after - got)} acknowledged records lost"


def test_move_partition_between_log_dirs_with_foreign_handle(bindfs_mounts, broker_factory, foreign_handle, topic):
    mounts = bindfs_mounts(2)
    broker, dirs, srcs = start_on_mounts(broker_factory, mounts)
    create_topic(broker.bootstrap, topic, partitions=1, config={"segment.bytes": str(SEGMENT_BYTES)})
    n = fill(broker.bootstrap, topic, 0, 3)
    src_dir, mnt_dir = partition_dir(mounts, topic, 0)
    origin = mnt_dir.parent
    target = next(d for d in dirs if d != origin)
    assert dir_of(broker.bootstrap, topic, 0) == str(origin)
    held = foreign_handle(segment_logs(mnt_dir)[0])

    prod = LiveProducer(broker.bootstrap, topic, 1)
    reader = LiveConsumer(broker.bootstrap, topic, 1, **{"max.partition.fetch.bytes": 16384})
    try:
        wait_for_acks(prod, 100)
        assert alter_replica_log_dirs(broker.bootstrap, {str(target): {topic: [0]}}) == {(topic, 0): 0}
        wait_until(lambda: dir_of(broker.bootstrap, topic, 0) == str(target), 60,
                   f"DescribeLogDirs to show {topic}-0 in {target}")
        finish_with_release(broker, dirs, srcs, [held], survivors=[prod])
    finally:
        reader.stop()
        prod.stop()
    assert prod.errors == 0, f"{prod.errors} produce errors during the move"
    assert reader.count > 0 and reader.errors == 0, (reader.count, reader.errors)
    assert not src_dir.exists()
    assert_all_acked_readable(broker.bootstrap, prod)
    assert watermarks(broker.bootstrap, topic, 0)[1] == n + prod.total_acked()
    assert_logged_deferral(broker)

    # The move is durable: after a restart the partition is read from the new dir.
    broker.restart()
    assert dir_of(broker.bootstrap, topic, 0) == str(target)
    assert watermarks(broker.bootstrap, topic, 0)[1] == n + prod.total_acked()
    assert_all_acked_readable(broker.bootstrap, prod)


def test_alter_replica_log_dirs_errors(bindfs_mounts, broker_factory, topic):
    mounts = bindfs_mounts(2)
    broker, dirs, _ = start_on_mounts(broker_factory, mounts)
    create_topic(broker.bootstrap, topic, partitions=1)
    res = alter_replica_log_dirs(broker.bootstrap, {"/nonexistent/dir": {topic: [0]},
                                                    str(dirs[1]): {"no-such-topic": [0]}})
    assert res == {(topic, 0): 57, ("no-such-topic", 0): 3}  # LOG_DIR_NOT_FOUND, UNKNOWN_TOPIC_OR_PARTITION


def test_startup_tolerates_and_reclaims_leftovers(bindfs_mounts, broker_factory, foreign_handle, topic):
    """.nfs* / .fuse_hidden* files of a dead process, in log dir roots and partition dirs, and an
    unfinished move's -future dir: start-up ignores them for loading and reclaims them once
    nothing holds them."""
    mounts = bindfs_mounts(2)
    broker, dirs, srcs = start_on_mounts(broker_factory, mounts)
    create_topic(broker.bootstrap, topic, partitions=2, config={"segment.bytes": str(SEGMENT_BYTES)})
    n0 = fill(broker.bootstrap, topic, 0, 2)
    broker.stop()

    src0, mnt0 = partition_dir(mounts, topic, 0)
    # Leftovers of a dead process (written on the underlying dirs, as a crashed client leaves them).
    planted = [srcs[0] / ".nfs00000000deadbeef00000001", srcs[1] / ".fuse_hidden0000000a00000001",
               src0 / ".fuse_hidden0000000b00000002", src0 / ".nfs0000000000c0ffee00000003"]
    for p in planted:
        p.write_bytes(b"leftover")
    future = srcs[1] / f"{topic}-0.{uuid.uuid4().hex}-future"
    future.mkdir()
    (future / "00000000000000000000.log").write_bytes(b"partial copy")
    # One leftover still held by a live process: kept until released.
    held_path = srcs[0] / ".nfs0000000000000abc00000009"
    held_path.write_bytes(b"held")
    held = foreign_handle(Path(str(held_path).replace(str(srcs[0]), str(dirs[0]))))

    broker.start()
    assert watermarks(broker.bootstrap, topic, 0)[1] == n0
    wait_until(lambda: not [p for p in planted if p.exists()] and not future.exists(), LEFTOVER_TIMEOUT,
               "dead leftovers to be reclaimed")
    assert held_path.exists(), "a leftover still held open was removed"
    held.release()
    wait_until(lambda: not held_path.exists(), LEFTOVER_TIMEOUT, "the released leftover to be reclaimed")
    assert_serving(broker, dirs)
    assert len(list(re.finditer("reclaimed silly-renamed leftover", broker.log_text()))) >= len(planted)


def test_volume_check_reports_the_silly_rename_of_a_fuse_mount(bindfs_mounts):
    """``sluice volume check`` on a bindfs mount: it sees the silly rename, measures the
    fdatasync after an append and after a rewrite, and leaves nothing behind."""
    [(src, mnt)] = bindfs_mounts(1)
    r = subprocess.run([str(SLUICE_BIN), "volume", "check", str(mnt), "--size-mb", "4"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert re.search(r"unlink while open:\s+SILLY RENAME to \.fuse_hidden", out), out
    for what in ("sync after append:", "sync after rewrite:"):
        m = re.search(what + r"\s+p50 ([0-9.]+) ms, p99 ([0-9.]+) ms, (\d+) us CPU .*, (\d+) rounds\)", out)
        assert m, out
        assert 0 < float(m.group(1)) <= float(m.group(2)) and int(m.group(4)) >= 1, out
    assert "verdict:" in out and "Sluice defers and retries the removal" in out, out
    assert list(src.iterdir()) == [], list(src.iterdir())


def test_a_roll_on_a_mount_renames_the_files_made_ahead_of_it(bindfs_mounts, broker_factory, topic):
    """Once the active segment is half full the broker makes the next segment's files ahead of
    the roll (docs/log-format.md). bindfs, like NFS, refuses rename(2)'s RENAME_NOREPLACE; the
    roll still renames them in (after a check of its own): the new segment's .log is the
    spare's file, and no spare is left behind."""
    mounts = bindfs_mounts(1)
    broker, dirs, srcs = start_on_mounts(broker_factory, mounts)
    create_topic(broker.bootstrap, topic, partitions=1, config={"segment.bytes": str(SEGMENT_BYTES)})
    pdir = srcs[0] / f"{topic}-0"
    p = producer(broker.bootstrap, acks="all", **{"linger.ms": 5})
    produce_all(p, topic, [{"partition": 0, "value": b"a" * 1000}] * 600)

    def spare_log():
        found = [f for f in pdir.iterdir() if f.name.endswith(".log.spare")]
        return found[0] if found else None

    spare = wait_until(spare_log, 15, "the next segment's files, made once the active segment is half full")
    spare_ino = spare.stat().st_ino
    produce_all(p, topic, [{"partition": 0, "value": b"b" * 1000}] * 600)
    logs = sorted(pdir.glob("*.log"))
    assert len(logs) == 2, [f.name for f in pdir.iterdir()]
    assert logs[1].stat().st_ino == spare_ino, "the roll renamed the spare's .log into place"
    assert not [f.name for f in pdir.iterdir() if f.name.endswith(".spare")]
    assert "could not rename the spare" not in broker.log_text()
    assert watermarks(broker.bootstrap, topic, 0) == (0, 1200)

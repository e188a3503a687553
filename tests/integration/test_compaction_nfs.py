"""Compaction on NFS semantics: the scenario that takes Apache Kafka 4.3.1 down.

The broker's log dir is a bindfs mount (FUSE, default options: a file unlinked while open is
renamed to ``.fuse_hidden*`` and removed at its last close, so its directory cannot be
removed meanwhile, like an NFS client's silly rename). A compacted topic with small segments
(``segment.ms``) is cleaned again and again while another process holds files of the
partition open (like a second NFS client, or a backup tool) and a consumer reads it, all
within ``file.delete.delay.ms``: every cleaning replaces the segments the previous one wrote,
which are still held. Then the topic is deleted, its ``file.delete.delay.ms`` longer than the
broker's ``log.segment.delete.delay.ms`` (what shut down every Kafka broker of the cluster in
issue 19's measurement).

Sluice must stay up and keep serving another topic throughout (produce and consume), log no
error (no log going offline or failing), keep every key's newest value through the cleanings,
and leave no silly-renamed or renamed-aside leftover once the foreign handles close.
The same scenario against Apache Kafka (opt-in, xfail): test_nfs_kafka_comparison.py.
"""

import re
import time

import pytest

from harness import (HarnessError, admin, consume_partitions, create_topic, produce_all, producer, topic_partitions,
                     wait_until)
from nfs_support import (LiveConsumer, LiveProducer, assert_all_acked_readable,  # noqa: F401
                         assert_serving, bindfs_mounts, foreign_handle, leftovers, silly_files, wait_for_acks)
from test_nfs_semantics import LEFTOVER_TIMEOUT, NFS_BROKER, partition_dir

pytestmark = pytest.mark.sluice_only

KEYS = 50
SEGMENT_MS = 1000
CLEANINGS = 3  # cleanings that replace files held open from outside
SEGMENT_DELETE_DELAY_MS = 1000  # the broker's log.segment.delete.delay.ms
FILE_DELETE_DELAY_MS = 60000  # the topic's file.delete.delay.ms: longer, and every cleaning falls within it
ERROR_LINE = re.compile(r"^\S+\s+ERROR\b.*$", re.M)


def base_segment_inode(src_partition_dir):
    """The inode of the partition's first segment (a cleaning replaces it with a new file).
    None if there is none, or if it was swapped away between listing and stat (the caller
    asks again at its next round)."""
    logs = sorted(src_partition_dir.glob("*.log"))
    try:
        return logs[0].stat().st_ino if logs else None
    except FileNotFoundError:
        return None


def hold_current_files(hold, mnt_partition_dir, handles):
    """Open the partition's current segment and index files through the mount, as another
    client would; a file swapped away between listing and opening is skipped."""
    for path in sorted(mnt_partition_dir.iterdir()):
        if path.suffix not in (".log", ".index", ".timeindex"):
            continue
        try:
            handles.append(hold(path))
        except HarnessError:
            pass


def produce_round(p, topic, r, newest) -> set:
    """Round ``r``: a value for every key. Returns the round's offsets."""
    recs = [{"partition": 0, "key": b"key-%02d" % k, "value": b"value-%d-%02d-" % (r, k) + b"v" * 200}
            for k in range(KEYS)]
    offsets = set()
    for rec, msg in zip(recs, produce_all(p, topic, recs)):
        newest[rec["key"]] = (msg.offset(), rec["value"])
        offsets.add(msg.offset())
    return offsets


def run_scenario(broker, src, mnt, hold, topic):
    """The whole scenario on ``broker`` (log dir: the bindfs mount ``mnt`` of ``src``).

    Returns the live producer and consumer of the surviving topic, stopped.
    """
    compacted, survivor = f"{topic}-c", f"{topic}-s"
    create_topic(broker.bootstrap, compacted, partitions=1, config={
        "cleanup.policy": "compact",
        "segment.ms": str(SEGMENT_MS),
        "min.cleanable.dirty.ratio": "0.01",
        "file.delete.delay.ms": str(FILE_DELETE_DELAY_MS),
    })
    create_topic(broker.bootstrap, survivor, partitions=1)
    src_dir, mnt_dir = partition_dir([(src, mnt)], compacted, 0)

    p = producer(broker.bootstrap, acks="all", **{"linger.ms": 5})
    newest = {}
    handles = []
    live = LiveProducer(broker.bootstrap, survivor, 1)
    live_reader = LiveConsumer(broker.bootstrap, survivor, 1)
    # A consumer reading the compacted partition with small fetches while it is cleaned.
    compacted_reader = LiveConsumer(broker.bootstrap, compacted, 1, **{"max.partition.fetch.bytes": 4096})
    try:
        wait_for_acks(live, 50)
        # Rounds of the same keys, one segment each (segment.ms rolls at the next append),
        # until the cleaner has replaced the first segment CLEANINGS times while the files it
        # replaced are held open from outside.
        inodes = []
        rounds = []  # each round's offsets
        r = 0
        deadline = time.monotonic() + 60
        while len(inodes) <= CLEANINGS:
            rounds.append(produce_round(p, compacted, r, newest))
            r += 1
            ino = base_segment_inode(src_dir)
            if r >= 2 and ino is not None and (not inodes or ino != inodes[-1]):
                inodes.append(ino)
                hold_current_files(hold, mnt_dir, handles)
            if time.monotonic() > deadline:
                raise HarnessError(f"{len(inodes) - 1} cleanings of {compacted}-0 within 60 s, {CLEANINGS} expected; "
                                   f"files: {sorted(x.name for x in src_dir.iterdir())}")
            time.sleep(SEGMENT_MS / 1000 + 0.1)

        # The replaced files that were held are silly-renamed (cleanings replaced them).
        wait_until(lambda: len(silly_files(src)) >= 2, 30, "silly-renamed (.fuse_hidden) files of replaced segments")
        # Only files held from outside are: the broker unlinks its own files after closing them,
        # and renames nothing over an open file.
        assert len(silly_files(src)) <= len(handles), f"{silly_files(src)} with {len(handles)} files held"
        assert_serving(broker, [mnt])
        assert compacted_reader.errors == 0, f"{compacted_reader.errors} errors reading {compacted} while cleaned"
        assert compacted_reader.count > 0, f"the reader of {compacted} read nothing while it was cleaned"

        # Older values were cleaned away: every round before the last two (the last is in the
        # active segment, the one before it was rolled by the last) is superseded by a round
        # the cleaner can see, so once it has cleaned what is cleanable none of it is left.
        assert len(rounds) >= 3, rounds
        superseded = set().union(*rounds[:-2])

        def superseded_cleaned():
            got = consume_partitions(broker.bootstrap, compacted, [0], timeout=30)
            left = sorted(superseded & {m.offset() for m in got})
            assert not left, f"{len(left)} of {len(superseded)} superseded records left, e.g. offsets {left[:10]}"
            return got

        got = wait_until(superseded_cleaned, 30, "the cleaner to remove the superseded values")
        # Every key's newest value is at its offset (the last record read of each key).
        by_key = {m.key(): (m.offset(), m.value()) for m in got}
        assert by_key == newest

        # Delete the topic while its files are still held and its reader is mid-fetch;
        # file.delete.delay.ms (topic) > log.segment.delete.delay.ms (broker).
        hold_current_files(hold, mnt_dir, handles)
        a = admin(broker.bootstrap)
        a.delete_topics([compacted], operation_timeout=30)[compacted].result(timeout=30)
        assert topic_partitions(broker.bootstrap, compacted) is None
        wait_until(lambda: not src_dir.exists(), 30, f"{src_dir.name} to leave its name")
        # Past the broker's segment deletion delay, with the handles still held.
        time.sleep(SEGMENT_DELETE_DELAY_MS / 1000 * 3)
        assert silly_files(src), "the held files of the deleted topic are silly-renamed"
        assert_serving(broker, [mnt])
        before = live.total_acked()
        wait_for_acks(live, before + 50)

        for h in handles:
            h.release()
        wait_until(lambda: not leftovers(src), LEFTOVER_TIMEOUT,
                   "every leftover to be gone after the foreign handles closed", interval=0.5)
        assert_serving(broker, [mnt])
        before = live.total_acked()
        wait_for_acks(live, before + 50)
    finally:
        for h in handles:
            h.release()
        compacted_reader.stop()
        live_reader.stop()
        live.stop()
    return live, live_reader


def test_repeated_cleaning_and_topic_deletion_with_foreign_handles(bindfs_mounts, broker_factory, foreign_handle,
                                                                   topic):
    [(src, mnt)] = bindfs_mounts(1)
    broker = broker_factory(log_dir=mnt, overrides={
        "log.dirs": str(mnt), **NFS_BROKER,
        "log.cleaner.backoff.ms": 200,
        "log.segment.delete.delay.ms": SEGMENT_DELETE_DELAY_MS,
    })
    live, live_reader = run_scenario(broker, src, mnt, foreign_handle, topic)

    assert live.errors == 0, f"{live.errors} produce errors on {live.topic}"
    assert live_reader.errors == 0 and live_reader.count > 0
    assert_all_acked_readable(broker.bootstrap, live)
    text = broker.log_text()
    errors = ERROR_LINE.findall(text)
    assert not errors, f"error lines in the broker log: {errors[:5]}"
    assert "panicked" not in text
    assert "removal deferred" in text and "deferred removal completed" in text

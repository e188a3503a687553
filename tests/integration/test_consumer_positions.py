"""Consumer positions that clients validate or re-add (issue 21, item 4).

The Java client (tests/java/EpochPositions.java) and librdkafka:

- a seek to an offset with a leader epoch is validated with OffsetForLeaderEpoch and then read
  (with the epoch of the records; and with an epoch older than any in the log, which Kafka
  answers with the start of the log's first epoch, where the client then resumes);
- a partition paused, or assigned away, leaves the consumer's incremental fetch session
  (forgotten topics) while records arrive, and is read from where it was once resumed or
  assigned back;
- a group member unsubscribes and subscribes again and reads what came meanwhile.
"""

from __future__ import annotations

import time

import pytest

import harness

PARTITIONS = 2


def produce_range(bootstrap: str, topic: str, first: int, last: int) -> None:
    p = harness.producer(bootstrap, **{"enable.idempotence": True})
    harness.produce_all(p, topic, [{"partition": part, "value": f"p{part}-{i}".encode()}
                                   for part in range(PARTITIONS) for i in range(first, last)])


@pytest.fixture
def filled(broker, topic):
    harness.create_topic(broker.bootstrap, topic, partitions=PARTITIONS)
    produce_range(broker.bootstrap, topic, 0, 100)
    return broker, topic


def got_lines(prog) -> list:
    return [(int(w[1]), int(w[2]), int(w[3]), int(w[4])) for w in prog.words("GOT")]


def run_case(tmp_path, broker, topic, case: str, produce_on_waiting: bool) -> list:
    prog = harness.JavaProgram(tmp_path, case, "EpochPositions", broker.bootstrap, topic, case)
    try:
        if produce_on_waiting:
            prog.wait_line("WAITING", 90)
            produce_range(broker.bootstrap, topic, 100, 150)
        lines = prog.finish(120)
    finally:
        prog.kill()
    assert "OK" in lines, prog.describe()
    return got_lines(prog)


def test_java_seek_with_leader_epoch(filled, tmp_path):
    broker, topic = filled
    got = run_case(tmp_path, broker, topic, "seek-epoch", produce_on_waiting=False)
    # The seek with the records' epoch reads 50-99.
    assert got[0] == (0, 50, 99, 50), got
    if len(got) > 1:
        # An epoch older than any in the log (only when the records' epoch is above 0: Kafka
        # 4.3 writes epoch 0 on a new topic, Sluice the partition's ownership epoch): the
        # broker answers with where the oldest known epoch starts (offset 0), below the
        # position, so the client detects truncation and resumes from there.
        assert got[1] == (0, 0, 99, 100), got


@pytest.mark.parametrize("case", ["pause-resume", "assign-back", "resubscribe"])
def test_java_partition_leaves_and_rejoins_fetch_session(filled, tmp_path, case):
    broker, topic = filled
    got = run_case(tmp_path, broker, topic, case, produce_on_waiting=True)
    assert (0, 0, 99, 100) in got and (1, 0, 99, 100) in got, got
    if case == "resubscribe":
        # Read again from the committed offsets: 100..149 of both partitions.
        assert got[-2:] == [(0, 100, 149, 50), (1, 100, 149, 50)], got
    else:
        assert (1, 100, 149, 50) in got, got
        assert got[-1] == (0, 100, 149, 50), got


def test_librdkafka_seek_with_leader_epoch_and_pause_resume(filled):
    """librdkafka validates a position with a leader epoch (TopicPartition(leader_epoch=...)) and
    re-adds a paused partition to its fetch session."""
    from confluent_kafka import TopicPartition

    broker, topic = filled
    msgs = harness.consume_partitions(broker.bootstrap, topic, [0], expected=100)
    epoch = msgs[50].leader_epoch()
    assert epoch is not None and epoch >= 0

    c = harness.consumer(broker.bootstrap, **{"enable.partition.eof": False})
    try:
        c.assign([TopicPartition(topic, 0, 50, leader_epoch=epoch), TopicPartition(topic, 1, 0)])
        got = {0: [], 1: []}

        def read_until(pred, what):
            deadline = time.monotonic() + 30
            while not pred():
                assert time.monotonic() < deadline, f"{what}: got {[(p, len(v)) for p, v in got.items()]}"
                for m in c.consume(num_messages=1000, timeout=0.5):
                    assert m.error() is None, m.error()
                    got[m.partition()].append(m.offset())

        read_until(lambda: len(got[0]) >= 50 and len(got[1]) >= 100, "the seek with an epoch")
        assert got[0] == list(range(50, 100))
        assert got[1] == list(range(100))

        c.pause([TopicPartition(topic, 0)])
        for _ in range(4):
            c.consume(num_messages=1000, timeout=0.25)
        produce_range(broker.bootstrap, topic, 100, 150)
        read_until(lambda: len(got[1]) >= 150, "partition 1 while 0 is paused")
        assert len(got[0]) == 50
        c.resume([TopicPartition(topic, 0)])
        read_until(lambda: len(got[0]) >= 100, "partition 0 after resume")
        assert got[0] == list(range(50, 150))
        assert got[1] == list(range(150))
    finally:
        c.close()

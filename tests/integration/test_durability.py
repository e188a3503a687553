"""SIGKILL the broker repeatedly under acks=all load with flush.messages=1, restart it, and
check that every acknowledged record is still readable: no gaps, no duplicate offsets, and no
acknowledged record stored twice; once with the page cache kept (SIGKILL), once with everything
not fsynced dropped at each kill (faultfs's crash), which is what tests the fsyncs."""

from __future__ import annotations

import random
from collections import Counter
import threading
import time
import urllib.request

import pytest
from confluent_kafka import KafkaException

import harness

ROUNDS = 4
# A kill right after an fsync leaves nothing unsynced to drop: the host-crash test goes on
# until one crash did drop something (a kill lands between a write and its fsync in most).
MAX_CRASH_ROUNDS = 12
PARTITIONS = 3


def test_acknowledged_records_survive_sigkill(broker, topic):
    _kill_restart_rounds(broker, topic)


@pytest.mark.sluice_only
def test_acknowledged_records_survive_a_host_crash(broker_factory, tmp_path, topic):
    """As above, but each kill also drops everything not fsynced (faultfs's crash: the broker's
    host lost its page cache), data and directory entries alike (``dirsync``: a create or
    rename not covered by an fsync of its directory is undone), so an acknowledgement given
    before its fsync is caught; SIGKILL alone keeps the page cache and cannot tell."""
    mount = harness.crash_fs(tmp_path, metadata="dirsync")
    try:
        # One recovery thread per partition: every restart recovers them all at once.
        metrics_port = harness.free_port()
        broker = broker_factory(log_dir=tmp_path / "mnt" / "data",
                                overrides={"num.recovery.threads.per.data.dir": str(PARTITIONS),
                                           "sluice.metrics.listener": f"127.0.0.1:{metrics_port}"})
        dropped = _kill_restart_rounds(broker, topic, crash=lambda: mount.crash())
        assert dropped > 0, "no crash dropped unsynced data: the test proved nothing"
        assert f"threads={PARTITIONS}" in broker.log_text(), "the partitions were not recovered in parallel"
        assert _metric(metrics_port, "sluice_log_recovered_bytes_total") > 0, "no recovery counted in /metrics"
        assert _metric(metrics_port, "sluice_log_recovery_seconds_total") > 0
        broker.kill()
    finally:
        mount.stop()


def _metric(port: int, name: str) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
    raise AssertionError(f"{name} not on /metrics")


def _kill_restart_rounds(broker, topic, crash=None) -> int:
    """SIGKILL the broker under load ROUNDS times (each time followed by ``crash()``, if given,
    before the restart; with it, more rounds until a crash dropped unsynced bytes, at most
    MAX_CRASH_ROUNDS), then read everything back. Returns the bytes the crashes dropped."""
    harness.create_topic(broker.bootstrap, topic, partitions=PARTITIONS, config={"flush.messages": "1"})
    acked: dict = {}  # value -> (partition, offset)
    twice: list = []
    errors: list = []
    lock = threading.Lock()
    rng = random.Random(7)
    dropped = 0

    def on_delivery(err, msg):
        # No assertion here: this runs on the client's thread; the test checks ``twice``.
        if err is None:
            with lock:
                value = msg.value().decode()
                if value in acked:
                    twice.append(value)
                acked[value] = (msg.partition(), msg.offset())

    rnd = -1
    while True:
        rnd += 1
        enough = rnd >= ROUNDS and (crash is None or dropped > 0)
        if enough or rnd >= MAX_CRASH_ROUNDS:
            break
        at_start = len(acked)
        p = harness.producer(
            broker.bootstrap,
            **{"acks": "all", "enable.idempotence": True, "linger.ms": 2, "message.timeout.ms": 60000},
        )
        stop = threading.Event()
        # With crashes, large records: the broker's writes take long enough (faultfs is a
        # user-space file system) that a kill finds some written and not yet fsynced, which is
        # what the crash must drop for the round to test anything.
        pad = "x" * (16384 if crash is not None else 0)

        def produce_loop():
            i = 0
            while not stop.is_set():
                try:
                    p.produce(topic, value=f"r{rnd}-{i}-{pad}".encode(), partition=i % PARTITIONS,
                              on_delivery=on_delivery)
                    i += 1
                except BufferError:
                    pass
                except KafkaException as e:
                    # Not a retriable state (the client thinks the partition is gone, or its
                    # idempotence state is fatal): the test fails on it, from its own thread.
                    errors.append(e)
                    return
                p.poll(0.001 if i % 50 else 0.01)

        t = threading.Thread(target=produce_loop, daemon=True)
        t.start()
        time.sleep(1.0 + rng.random() * 1.5)
        broker.kill()
        if crash is not None:
            dropped += sum(f["pending"] - f["kept"] for f in crash()["files"])
        stop.set()
        t.join(timeout=10)
        assert not t.is_alive()
        assert not errors, f"round {rnd}: the producer failed: {errors[0]}"
        broker.start()
        # Whatever the producer still holds is retried against the restarted broker.
        remaining = p.flush(60)
        assert remaining == 0, f"round {rnd}: {remaining} records never acknowledged after restart"
        assert len(acked) > at_start, f"round {rnd}: nothing was acknowledged"

    assert not twice, f"acknowledged twice: {twice[:5]}"
    assert len(acked) > 100, f"only {len(acked)} records acknowledged; the load did not run"
    msgs = harness.consume_partitions(broker.bootstrap, topic, range(PARTITIONS), timeout=120)
    stored: dict = {}
    by_partition: dict = {p: [] for p in range(PARTITIONS)}
    for m in msgs:
        key = (m.partition(), m.offset())
        assert key not in stored, f"offset {key} read twice"
        stored[key] = m.value().decode()
        by_partition[m.partition()].append(m.offset())
    for part, offsets in by_partition.items():
        offsets.sort()
        assert offsets == list(range(len(offsets))), f"partition {part} has gaps: {offsets[:5]}..."
    lost = [(v, pos) for v, pos in acked.items() if stored.get(pos) != v]
    assert not lost, f"{len(lost)} acknowledged records lost or changed, e.g. {lost[:5]}"
    counts = Counter(stored.values())
    dup = [v for v in acked if counts[v] > 1]
    assert not dup, f"acknowledged records stored twice: {dup[:5]}"
    return dropped


@pytest.mark.sluice_only
def test_rolled_segments_move_the_recovery_point(broker_factory, topic):
    """Without any flush setting, a segment is flushed once it has rolled and the recovery
    point checkpoint follows within seconds, so a restart after a crash re-validates only the
    active segment, however much was written (bench/restart-recovery measures it). Sluice only:
    Apache Kafka 4.3 left its recovery-point checkpoint empty here for 15 s, even with
    log.flush.offset.checkpoint.interval.ms=1000."""
    broker = broker_factory(overrides={"log.flush.offset.checkpoint.interval.ms": 1000})
    harness.create_topic(broker.bootstrap, topic, partitions=1, config={"segment.bytes": str(1 << 20), "flush.messages": "1"})
    p = harness.producer(broker.bootstrap, **{"acks": "1", "linger.ms": 5})
    harness.produce_all(p, topic, [{"value": b"v" * 1000, "partition": 0}] * 5000)
    pdir = broker.log_dir / f"{topic}-0"
    bases = sorted(int(f.stem) for f in pdir.glob("*.log"))
    assert len(bases) >= 4, f"the appends rolled: {bases}"
    checkpoint = broker.log_dir / "recovery-point-offset-checkpoint"

    def recovery_point():
        if not checkpoint.exists():
            return None
        for line in checkpoint.read_text().splitlines()[2:]:
            t, part, offset = line.split()
            if t == topic and part == "0" and int(offset) >= bases[-1]:
                return int(offset)
        return None

    rp = harness.wait_until(recovery_point, 15, f"a recovery point of {topic}-0 at the active base {bases[-1]}")
    assert rp <= 5000


def _aborted_then_committed(broker, topic) -> None:
    """A topic of one partition with `flush.messages=1`: a transaction of 10 records aborted,
    then one of 5 committed (offsets 0-9, the ABORT at 10, 11-15, the COMMIT at 16)."""
    harness.create_topic(broker.bootstrap, topic, partitions=1, config={"flush.messages": "1"})
    p = harness.producer(broker.bootstrap, **{"transactional.id": f"{topic}-t", "acks": "all"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.produce(topic, value=b"aborted-%d" % i, partition=0)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(topic, value=b"committed-%d" % i, partition=0)
    p.commit_transaction(30)


@pytest.mark.sluice_only
def test_an_aborted_transaction_survives_recovery_then_a_host_crash(broker_factory, tmp_path, topic):
    """An aborted transaction's entry in the transaction index outlives a SIGKILL, the recovery
    at restart (which moves the recovery point to the log end), and then a host crash that
    drops everything not fsynced: a read_committed consumer still skips the aborted records.
    Found by the 3-broker fault run of 2026-11-29 (seed 63): the recovery fsynced a segment's
    data and offset indexes but not its transaction index, and the recovery point it recorded
    vouched for the lost entry."""
    mount = harness.crash_fs(tmp_path, metadata="dirsync")
    try:
        broker = broker_factory(log_dir=tmp_path / "mnt" / "data",
                                overrides={"log.flush.offset.checkpoint.interval.ms": 300,
                                           "transaction.state.log.num.partitions": 1})
        _aborted_then_committed(broker, topic)

        def committed_read():
            got = harness.consume_partitions(broker.bootstrap, topic, [0], expected=len(want), timeout=60,
                                             **{"isolation.level": "read_committed"})
            return sorted(m.value() for m in got)

        want = sorted(b"committed-%d" % i for i in range(5))
        assert committed_read() == want
        # SIGKILL keeps the page cache: the restart recovers the partition from the data and
        # its recovery point moves to the log end, in the checkpoint too. Then the segment
        # rolls by age before anything more is appended to it (as a new owner's first append
        # does in a cluster): the new segment starts with a producer snapshot, from which the
        # next open replays, so nothing rebuilds the first segment's transaction index.
        broker.kill()
        broker.start()
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

        res = ConfigResource(ConfigResource.Type.TOPIC, topic,
                             incremental_configs=[ConfigEntry("segment.ms", "100",
                                                              incremental_operation=AlterConfigOpType.SET)])
        a = harness.admin(broker.bootstrap)
        a.incremental_alter_configs([res])[res].result(timeout=30)
        time.sleep(0.5)
        plain = harness.producer(broker.bootstrap, **{"acks": "all"})
        harness.produce_all(plain, topic, [{"value": b"after", "partition": 0}])
        pdir = broker.log_dir / f"{topic}-0"
        assert len(list(pdir.glob("*.log"))) >= 2, "the log did not roll"
        want = sorted(want + [b"after"])
        checkpoint = broker.log_dir / "recovery-point-offset-checkpoint"

        def past_first_segment():
            text = checkpoint.read_text() if checkpoint.exists() else ""
            return any(line.split()[:2] == [topic, "0"] and int(line.split()[2]) >= 17
                       for line in text.splitlines()[2:])

        harness.wait_until(past_first_segment, 30, "the recovery point checkpoint past the first segment")
        time.sleep(1)
        broker.kill()
        dropped = sum(f["pending"] - f["kept"] for f in mount.crash()["files"])
        broker.start()
        assert committed_read() == want, f"aborted records read as committed (the crash dropped {dropped} bytes)"
        broker.kill()
    finally:
        mount.stop()


@pytest.mark.sluice_only
def test_an_aborted_transaction_survives_a_failed_fsync_of_its_index(broker_factory, tmp_path, topic):
    """The fsync of a sealed segment's transaction index fails (EIO; faultfs drops what it
    held, as Linux marks the pages clean): the log fails and is re-opened, and the re-open
    rebuilds that segment's index from the log rather than trust the producer snapshot its
    roll wrote above it. Found by an adversarial review of 1901eb8."""
    mount = harness.crash_fs(tmp_path)
    try:
        broker = broker_factory(log_dir=tmp_path / "mnt" / "data",
                                overrides={"transaction.state.log.num.partitions": 1})
        _aborted_then_committed(broker, topic)
        want = sorted([b"committed-%d" % i for i in range(5)] + [b"after"])

        # The next append rolls (segment.ms), and the flush after it fails on the sealed
        # segment's transaction index.
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

        res = ConfigResource(ConfigResource.Type.TOPIC, topic,
                             incremental_configs=[ConfigEntry("segment.ms", "100",
                                                              incremental_operation=AlterConfigOpType.SET)])
        a = harness.admin(broker.bootstrap)  # kept until the answer
        a.incremental_alter_configs([res])[res].result(timeout=30)
        time.sleep(0.5)
        mount.fail_next_fsync(match=".txnindex")
        plain = harness.producer(broker.bootstrap, **{"acks": "all", "enable.idempotence": True,
                                                      "message.timeout.ms": 60000})
        harness.produce_all(plain, topic, [{"value": b"after", "partition": 0}])
        assert mount.stats()["fsyncs_failed_injected"] == 1, "the fsync of the index did not fail"
        harness.wait_until(lambda: "re-opened a failed log" in broker.log_text(), 30, "the failed log re-opened")
        got = harness.consume_partitions(broker.bootstrap, topic, [0], expected=len(want), timeout=60,
                                         **{"isolation.level": "read_committed"})
        assert sorted(m.value() for m in got) == want
        broker.kill()
    finally:
        mount.stop()

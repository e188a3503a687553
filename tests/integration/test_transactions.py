"""Transactions and exactly-once, with real clients: the Java producer and consumer
(tests/java/TxnClient.java, TxnCopier.java), librdkafka (confluent_kafka), Kafka Streams
with exactly_once_v2 (tests/java/TxnWordCount.java), and Kafka's own tools
(kafka-console-consumer --isolation-level, kafka-transactions, kafka-dump-log).

What every test holds a broker to: a read_committed reader never sees a record of an aborted
(or fenced, or timed-out) transaction and sees each committed record once, in order; a
read_uncommitted reader sees both; the last stable offset (LSO) stops before the first open
transaction; a new producer with a transactional.id fences the old one and ends its open
transaction at once; the coordinator aborts a transaction left open past its
transaction.timeout.ms; offsets sent with sendOffsetsToTransaction move with the commit only.

The Java programs print machine-readable lines (see each file's header) parsed here.
"""

from __future__ import annotations

import random
import re
import struct
import time
from collections import Counter, defaultdict

import pytest

import harness
from harness import (CONSOLE_CONSUMER, DUMP_LOG_SEGMENTS, TRANSACTIONS_COMMAND, HarnessError, JavaProgram,
                     consume_partitions, create_topic, produce_all, producer, run_java_program, wait_until)

# The coordinator looks for timed-out transactions every 10 s by default; 1 s keeps the
# timeout tests short.
TIMEOUT_SCAN = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000}


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory):
    """One broker for the whole module (a JVM start less per test against Kafka): each test has
    topics and transactional.ids of its own; the tests that restart or stop it start it again."""
    cls = harness.BROKER_CLASSES[harness.TARGET]
    b = cls(tmp_path_factory.mktemp("shared-broker"), overrides=TIMEOUT_SCAN, name=f"{harness.TARGET}-shared")
    try:
        b.start()
        yield b
    finally:
        b.cleanup()


@pytest.fixture
def sbroker(request, shared_broker):
    """``shared_broker``, its log attached to this test's report if it fails."""
    request.node._sluice_brokers = [shared_broker]
    if not shared_broker.running:  # an earlier test failed while it was stopped
        shared_broker.start()
    return shared_broker


def read(bootstrap: str, topic: str, partitions, isolation: str, expected=None, timeout: float = 60,
         raw: bool = False) -> list:
    """Every record of ``partitions`` with librdkafka under ``isolation`` (to EOF: the LSO for
    read_committed, the high watermark for read_uncommitted), as (partition, offset, key, value),
    key and value decoded as UTF-8 unless ``raw``."""
    msgs = consume_partitions(bootstrap, topic, partitions, expected=expected, timeout=timeout,
                              **{"isolation.level": isolation})
    if raw:
        return [(m.partition(), m.offset(), m.key(), m.value()) for m in msgs]
    return [(m.partition(), m.offset(), (m.key() or b"").decode(), (m.value() or b"").decode()) for m in msgs]


def watermarks(bootstrap: str, topic: str, partition: int, isolation: str) -> tuple:
    """(low, high) by ListOffsets under ``isolation``: high is the LSO for read_committed."""
    from confluent_kafka import TopicPartition
    c = harness.consumer(bootstrap, **{"isolation.level": isolation})
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
    finally:
        c.close()


def txn_tool(kafka_tool, bootstrap: str, *args) -> harness.ToolResult:
    return kafka_tool(TRANSACTIONS_COMMAND, "--bootstrap-server", bootstrap, *args)


def table(text: str) -> list:
    """kafka-transactions' output (a header row, then rows; cells padded, tab-separated) as
    dicts keyed by the header."""
    rows = [[c.strip() for c in line.rstrip("\t").split("\t")] for line in text.splitlines() if line.strip()]
    assert rows, f"no header in {text!r}"
    header = rows[0]
    for r in rows[1:]:
        assert len(r) == len(header), f"row {r} does not match header {header}"
    return [dict(zip(header, r)) for r in rows[1:]]


def assert_committed_exactly_once(records: list, expected_keys_by_partition: dict, what: str) -> None:
    """``records`` (partition, offset, key, value) hold exactly the expected committed keys,
    once each, each partition's in the expected order, and nothing of an aborted transaction."""
    aborted = [r for r in records if r[3].startswith("abort-")]
    assert not aborted, f"{what}: {len(aborted)} records of aborted transactions visible, e.g. {aborted[:3]}"
    counts = Counter(r[2] for r in records)
    twice = [k for k, n in counts.items() if n > 1]
    assert not twice, f"{what}: records seen more than once: {twice[:5]}"
    expected_all = {k for ks in expected_keys_by_partition.values() for k in ks}
    missing = expected_all - set(counts)
    extra = set(counts) - expected_all
    assert not missing, f"{what}: {len(missing)} committed records missing, e.g. {sorted(missing)[:5]}"
    assert not extra, f"{what}: unexpected records {sorted(extra)[:5]}"
    for p, keys in expected_keys_by_partition.items():
        got = [r[2] for r in sorted(records) if r[0] == p]
        # Each producer's records in its own order (two producers interleave in a partition).
        for prefix in {k.split("-", 1)[0] for k in keys}:
            mine = [k for k in got if k.startswith(prefix + "-")]
            assert mine == [k for k in keys if k.startswith(prefix + "-")], f"{what}: partition {p} out of order"


# --------------------------------------------------------------------------
# 1. Java transactional producer; read_committed / read_uncommitted readers; LSO
# --------------------------------------------------------------------------

PARTITIONS = 3
PRODUCERS, TXNS, PER_TXN = 2, 9, 12


def produced_keys(lines: list, partitions: int = PARTITIONS) -> tuple:
    """Committed and aborted keys by partition, from TxnClient produce's COMMIT/ABORT lines."""
    committed, aborted = defaultdict(list), defaultdict(list)
    ended = {}
    for w in lines:
        if w[0] in ("COMMIT", "ABORT"):
            ended[(int(w[1]), int(w[2]))] = w[0]
    assert len(ended) == PRODUCERS * TXNS, f"every transaction ends: {sorted(ended.items())}"
    for k in range(PRODUCERS):
        for i in range(TXNS):
            assert ended[(k, i)] == ("ABORT" if i % 3 == 1 else "COMMIT")
            for j in range(PER_TXN):
                (aborted if i % 3 == 1 else committed)[j % partitions].append(f"p{k}-t{i}-r{j}")
    return committed, aborted


def test_java_producer_read_committed_and_uncommitted(sbroker, kafka_tool, topic, tmp_path):
    create_topic(sbroker.bootstrap, topic, partitions=PARTITIONS)
    lines = run_java_program(tmp_path, "produce", "TxnClient", "produce", sbroker.bootstrap, topic, PARTITIONS,
                             PRODUCERS, TXNS, PER_TXN, timeout=120)
    committed, aborted = produced_keys([l.split(" ") for l in lines])
    n_committed = sum(map(len, committed.values()))
    n_aborted = sum(map(len, aborted.values()))

    # librdkafka, read_committed: the committed records only, once, in order.
    rc = read(sbroker.bootstrap, topic, range(PARTITIONS), "read_committed")
    assert_committed_exactly_once(rc, committed, "librdkafka read_committed")

    # read_uncommitted: both, each once; the control records (markers) are never delivered.
    ru = read(sbroker.bootstrap, topic, range(PARTITIONS), "read_uncommitted", expected=n_committed + n_aborted)
    assert len(ru) == n_committed + n_aborted, len(ru)
    assert Counter(r[3].split("-", 1)[0] for r in ru) == {"commit": n_committed, "abort": n_aborted}
    # The markers take offsets: each partition's offsets have gaps (one per transaction).
    for p in range(PARTITIONS):
        offs = [r[1] for r in ru if r[0] == p]
        assert offs[-1] + 1 > len(offs), f"partition {p}: no offset used by a control record"

    # Java console consumer, read_committed: exactly the committed records.
    res = kafka_tool(CONSOLE_CONSUMER, "--bootstrap-server", sbroker.bootstrap, "--topic", topic,
                     "--from-beginning", "--isolation-level", "read_committed", "--max-messages", str(n_committed),
                     "--timeout-ms", "30000", "--formatter-property", "print.key=true",
                     "--formatter-property", "print.partition=true", "--formatter-property", "print.offset=true",
                     timeout=90)
    res.check("kafka-console-consumer --isolation-level read_committed")
    java = []
    for line in res.out.splitlines():
        m = re.match(r"^Partition:(\d+)\tOffset:(\d+)\t(\S+)\t(\S+)$", line)
        assert m, f"unexpected console consumer line {line!r}"
        java.append((int(m.group(1)), int(m.group(2)), m.group(3), m.group(4)))
    assert_committed_exactly_once(java, committed, "Java console consumer read_committed")
    assert sorted(java) == sorted(rc), "the Java and librdkafka readers agree on offsets"

    # And the Java consumer read to its read_committed end offsets by itself.
    lines = run_java_program(tmp_path, "consume", "TxnClient", "consume", sbroker.bootstrap, topic, "read_committed")
    java2 = [(int(w[1]), int(w[2]), w[3], w[4]) for w in (l.split(" ") for l in lines) if w[0] == "REC"]
    assert sorted(java2) == sorted(rc)


def test_list_offsets_by_isolation_level_stop_before_an_open_transaction(sbroker, topic, tmp_path):
    create_topic(sbroker.bootstrap, topic, partitions=1)
    hang = JavaProgram(tmp_path, "hang", "TxnClient", "hang", sbroker.bootstrap, topic, 0, f"{topic}-open",
                       60000, 5, 4)
    try:
        hang.wait_line("OPEN", 60)
        # 5 committed records (0-4), their COMMIT marker (5), 4 records of the open one (6-9).
        lines = run_java_program(tmp_path, "offsets", "TxnClient", "offsets", sbroker.bootstrap, topic, 0)
        w = [l for l in lines if l.startswith("OFFSETS ")][0].split(" ")[1:]
        got = dict(x.split("=") for x in w)
        assert got == {"admin_committed": "6", "admin_uncommitted": "10", "consumer_committed": "6",
                       "consumer_uncommitted": "10"}, got
        assert watermarks(sbroker.bootstrap, topic, 0, "read_committed") == (0, 6)
        assert watermarks(sbroker.bootstrap, topic, 0, "read_uncommitted") == (0, 10)
        rc = read(sbroker.bootstrap, topic, [0], "read_committed")
        assert [r[3] for r in rc] == [f"before-{n}" for n in range(5)]
        ru = read(sbroker.bootstrap, topic, [0], "read_uncommitted", expected=9)
        assert [r[3] for r in ru] == [f"before-{n}" for n in range(5)] + [f"open-{n}" for n in range(4)]
    finally:
        hang.kill()


# --------------------------------------------------------------------------
# 2. consume-transform-produce in Java, the process SIGKILLed and the broker restarted
# --------------------------------------------------------------------------

COPY_RECORDS = 1200


def test_consume_transform_produce_exactly_once_across_kill_and_broker_restart(sbroker, topic, tmp_path):
    """The copier SIGKILLed and started again; then the broker stopped and started, and
    SIGKILLed and started, while the copier works: the output holds every input once."""
    src, dst, group, txn_id = f"{topic}-in", f"{topic}-out", f"{topic}-group", f"{topic}-copier"
    create_topic(sbroker.bootstrap, src, partitions=PARTITIONS)
    create_topic(sbroker.bootstrap, dst, partitions=PARTITIONS)
    inputs = [{"partition": i % PARTITIONS, "key": f"k{i}".encode(), "value": f"v{i}".encode()}
              for i in range(COPY_RECORDS)]
    produce_all(producer(sbroker.bootstrap, acks="all"), src, inputs)

    def copier(n):
        return JavaProgram(tmp_path, f"copier{n}", "TxnCopier", sbroker.bootstrap, src, dst, group, txn_id, 30, 250)

    def committed_by(prog):
        return max((int(w[2]) for w in prog.words("COMMIT")), default=0)

    first = copier(1)
    try:
        first.wait_for(lambda _: committed_by(first) >= COPY_RECORDS // 4, 90, "a quarter copied")
    finally:
        first.kill()  # SIGKILL, most likely inside a transaction
    done_before = committed_by(first)
    assert done_before < COPY_RECORDS, "the copier must be killed mid-way (make it slower)"

    second = copier(2)
    try:
        second.wait_for(lambda _: committed_by(second) >= COPY_RECORDS // 4, 120, "another quarter copied")
        sbroker.stop()
        assert not second.words("DONE"), "the broker must restart while the copier is at work (make it slower)"
        commits_before_restart = len(second.words("COMMIT"))
        sbroker.start()
        # Then a crash: the broker SIGKILLed mid-transaction, and started again.
        second.wait_for(lambda _: len(second.words("COMMIT")) >= commits_before_restart + 3, 120,
                        "transactions committed after the restart")
        commits_before_crash = len(second.words("COMMIT"))
        sbroker.kill()
        assert not second.words("DONE"), "the broker must be killed while the copier is at work (make it slower)"
        sbroker.start()
        lines = second.finish(180)
    finally:
        second.kill()
    # The copier worked on across the crash too (the wait above showed it did across the restart).
    assert len(second.words("COMMIT")) > commits_before_crash, "no transaction committed after the broker's crash"
    retries = [l for l in lines if l.startswith("RETRY ")]
    print(f"\nfirst copier committed {done_before} records before SIGKILL; the second "
          f"{committed_by(second)}, retried {len(retries)} times across the broker restart: {retries[:3]}")

    out = read(sbroker.bootstrap, dst, range(PARTITIONS), "read_committed", expected=COPY_RECORDS, timeout=90)
    counts = Counter(r[3] for r in out)
    twice = [v for v, n in counts.items() if n > 1]
    assert not twice, f"{len(twice)} records copied twice, e.g. {twice[:5]}"
    expected = {f"out:v{i}" for i in range(COPY_RECORDS)}
    missing = expected - set(counts)
    assert not missing, f"{len(missing)} records never copied, e.g. {sorted(missing)[:5]}"
    assert set(counts) == expected
    for r in out:
        i = int(r[3][len("out:v"):])
        assert r[0] == i % PARTITIONS and r[2] == f"k{i}", r
    for p in range(PARTITIONS):
        seq = [int(r[3][len("out:v"):]) for r in sorted(out) if r[0] == p]
        assert seq == sorted(seq), f"output partition {p} out of input order"
    # The group's offsets were committed with the transactions: at the end of the input.
    from confluent_kafka import TopicPartition
    c = harness.consumer(sbroker.bootstrap, **{"group.id": group})
    try:
        offs = c.committed([TopicPartition(src, p) for p in range(PARTITIONS)], timeout=30)
    finally:
        c.close()
    assert sorted(tp.offset for tp in offs) == sorted(len(range(p, COPY_RECORDS, PARTITIONS))
                                                      for p in range(PARTITIONS)), offs


# --------------------------------------------------------------------------
# 3. librdkafka transactional producer with send_offsets_to_transaction
# --------------------------------------------------------------------------

def test_librdkafka_transactions_with_offsets(sbroker, topic):
    from confluent_kafka import OFFSET_INVALID, TopicPartition

    src, dst, group = f"{topic}-in", f"{topic}-out", f"{topic}-group"
    create_topic(sbroker.bootstrap, src, partitions=1)
    create_topic(sbroker.bootstrap, dst, partitions=2)
    n = 100
    produce_all(producer(sbroker.bootstrap), src, [{"value": f"v{i}".encode()} for i in range(n)])

    p = producer(sbroker.bootstrap, **{"transactional.id": f"{topic}-rk", "transaction.timeout.ms": 60000})
    p.init_transactions(60)
    c = harness.consumer(sbroker.bootstrap, **{"group.id": group, "isolation.level": "read_committed",
                                              "enable.partition.eof": False})
    c.subscribe([src])
    done = 0
    aborted = 0
    last_committed = OFFSET_INVALID  # nothing committed yet
    deadline = time.monotonic() + 90
    try:
        while done < n:
            assert time.monotonic() < deadline, f"copied {done} of {n}"
            msgs = [m for m in c.consume(num_messages=20, timeout=1) if m.error() is None]
            if not msgs:
                continue
            # A transaction that is aborted: junk records and offsets far ahead; neither may stick.
            p.begin_transaction()
            for i in range(5):
                p.produce(dst, value=f"abort-{aborted}-{i}".encode(), partition=i % 2)
            # librdkafka's abort purges what it has not sent yet: make the records reach the log.
            assert p.flush(30) == 0
            p.send_offsets_to_transaction([TopicPartition(src, 0, msgs[-1].offset() + 1000)],
                                          c.consumer_group_metadata(), 30)
            p.abort_transaction(30)
            aborted += 1
            # The aborted offset did not stick: the group's offset is still the last commit's.
            after_abort = c.committed([TopicPartition(src, 0)], timeout=30)[0].offset
            assert after_abort == last_committed, (after_abort, last_committed)
            # The real one: the batch, and the positions after it, committed together.
            p.begin_transaction()
            for m in msgs:
                p.produce(dst, value=b"out:" + m.value(), partition=int(m.value()[1:]) % 2)
            p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
            p.commit_transaction(30)
            done += len(msgs)
            committed = c.committed([TopicPartition(src, 0)], timeout=30)[0].offset
            assert committed == msgs[-1].offset() + 1, "the group's offset moved with the commit only"
            last_committed = committed
    finally:
        c.close()
    assert done == n and aborted >= 1
    out = read(sbroker.bootstrap, dst, [0, 1], "read_committed")
    assert not [r for r in out if r[3].startswith("abort-")]
    assert Counter(r[3] for r in out) == Counter(f"out:v{i}" for i in range(n))
    for part in (0, 1):
        seq = [int(r[3][5:]) for r in sorted(out) if r[0] == part]
        assert seq == [i for i in range(n) if i % 2 == part]
    # read_uncommitted reads the aborted transactions' records too: they reached the log, and
    # read_committed left them out.
    everything = read(sbroker.bootstrap, dst, [0, 1], "read_uncommitted", expected=n + 5 * aborted)
    assert Counter(r[3] for r in everything) == Counter(
        [f"out:v{i}" for i in range(n)] + [f"abort-{a}-{i}" for a in range(aborted) for i in range(5)])


def test_plain_commit_newer_than_a_transactions_offsets_wins_across_a_restart(sbroker, topic):
    """A transaction's offset (100) is written, then a plain OffsetCommit (50) of the same group
    and partition, then the transaction commits: the record newer in __consumer_offsets wins
    (Kafka 4.3.1 reports 50), and still does after the broker reloads the partition."""
    from confluent_kafka import TopicPartition

    group = f"{topic}-group"
    create_topic(sbroker.bootstrap, topic, partitions=1)
    produce_all(producer(sbroker.bootstrap), topic, [{"value": f"v{i}".encode()} for i in range(200)])
    p = producer(sbroker.bootstrap, **{"transactional.id": f"{topic}-rk", "transaction.timeout.ms": 60000})
    # Not subscribed: its commits carry no member (generation -1), on an empty group.
    c = harness.consumer(sbroker.bootstrap, **{"group.id": group})
    try:
        p.init_transactions(60)
        p.begin_transaction()
        p.send_offsets_to_transaction([TopicPartition(topic, 0, 100)], c.consumer_group_metadata(), 30)
        c.commit(offsets=[TopicPartition(topic, 0, 50)], asynchronous=False)
        p.commit_transaction(30)
        committed = c.committed([TopicPartition(topic, 0)], timeout=30)[0].offset
        assert committed == 50, "the plain commit is newer in the log than the transaction's offset"
    finally:
        c.close()
    sbroker.restart()
    c = harness.consumer(sbroker.bootstrap, **{"group.id": group})
    try:
        committed = c.committed([TopicPartition(topic, 0)], timeout=30)[0].offset
        assert committed == 50, "the same offset after __consumer_offsets is loaded again"
    finally:
        c.close()


@pytest.mark.sluice_only
def test_a_committed_transactions_offsets_survive_a_host_crash(broker_factory, tmp_path, topic):
    """A transaction that wrote records (to a topic with no flush policy) and a group's offsets
    commits; the host then crashes, losing whatever was not fsynced (faultfs): after the
    restart its records are read_committed and the group's offset is committed, stable. Every
    marker is fsynced before the transaction completes, with the records before it, whatever
    the partition's flush policy (the fault suite found the marker on __consumer_offsets lost,
    and the offsets aborted by the producer's next transaction, after a failed fsync)."""
    from confluent_kafka import TopicPartition
    mount = harness.crash_fs(tmp_path, metadata="dirsync")
    try:
        broker = broker_factory(log_dir=tmp_path / "mnt" / "data")
        group = f"{topic}-group"
        create_topic(broker.bootstrap, topic, partitions=1)
        p = producer(broker.bootstrap, **{"transactional.id": f"{topic}-tx", "transaction.timeout.ms": 60000})
        c = harness.consumer(broker.bootstrap, **{"group.id": group, "isolation.level": "read_committed"})
        try:
            p.init_transactions(60)
            p.begin_transaction()
            for i in range(10):
                p.produce(topic, value=f"v{i}".encode(), partition=0)
            p.send_offsets_to_transaction([TopicPartition(topic, 0, 42)], c.consumer_group_metadata(), 30)
            p.commit_transaction(30)
            # The transaction completes before the crash: a new instance's InitProducerId
            # waits for it (CONCURRENT_TRANSACTIONS until its Complete record is on storage),
            # so the crash cannot make the coordinator write its markers again.
            again = producer(broker.bootstrap, **{"transactional.id": f"{topic}-tx"})
            again.init_transactions(60)
            assert c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset == 42
        finally:
            c.close()
        broker.kill()
        dropped = sum(f["pending"] - f["kept"] for f in mount.crash()["files"])
        broker.start()
        got = read(broker.bootstrap, topic, [0], "read_committed", expected=10)
        assert sorted(v for (_, _, _, v) in got) == sorted(f"v{i}" for i in range(10))
        c = harness.consumer(broker.bootstrap, **{"group.id": group, "isolation.level": "read_committed"})
        try:
            committed = None
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and committed != 42:
                try:
                    committed = c.committed([TopicPartition(topic, 0)], timeout=10)[0].offset
                except Exception as e:  # noqa: BLE001 - UNSTABLE_OFFSET_COMMIT while pending
                    committed = repr(e)
                    time.sleep(0.5)
            assert committed == 42, (f"the committed transaction's offset after the host crash: {committed} "
                                     f"({dropped} unsynced bytes dropped)")
        finally:
            c.close()
        broker.kill()
    finally:
        mount.stop()


# --------------------------------------------------------------------------
# 4. zombie fencing
# --------------------------------------------------------------------------

def test_java_zombie_is_fenced_and_its_records_never_visible(sbroker, topic, tmp_path):
    create_topic(sbroker.bootstrap, topic, partitions=1)
    lines = run_java_program(tmp_path, "fence", "TxnClient", "fence", sbroker.bootstrap, topic, f"{topic}-id", 10)
    fenced = {w[1]: w for w in (l.split(" ") for l in lines) if w[0] in ("FENCED", "NOT_FENCED")}
    assert fenced["commit"][0] == "FENCED", lines
    assert fenced["commit"][2] == "org.apache.kafka.common.errors.ProducerFencedException", fenced["commit"]
    assert fenced["send"][0] == "FENCED", lines
    assert "DONE" in lines
    rc = read(sbroker.bootstrap, topic, [0], "read_committed")
    assert [r[3] for r in rc] == [f"live-{n}" for n in range(10)]
    ru = read(sbroker.bootstrap, topic, [0], "read_uncommitted", expected=20)
    assert [r[3] for r in ru] == [f"zombie-{n}" for n in range(10)] + [f"live-{n}" for n in range(10)]


def test_librdkafka_zombie_gets_a_fatal_fenced_error(sbroker, topic):
    from confluent_kafka import KafkaError, KafkaException

    create_topic(sbroker.bootstrap, topic, partitions=1)
    conf = {"transactional.id": f"{topic}-id", "transaction.timeout.ms": 60000}
    zombie = producer(sbroker.bootstrap, **conf)
    zombie.init_transactions(60)
    zombie.begin_transaction()
    produce_all(zombie, topic, [{"value": f"zombie-{n}".encode(), "partition": 0} for n in range(10)])
    live = producer(sbroker.bootstrap, **conf)
    live.init_transactions(60)
    with pytest.raises(KafkaException) as exc:
        zombie.commit_transaction(30)
    err = exc.value.args[0]
    print(f"\nthe fenced librdkafka producer's commit: {err.name()} ({err.code()}) fatal={err.fatal()}: {err.str()}")
    assert err.fatal(), err
    assert err.code() == KafkaError._FENCED, err
    live.begin_transaction()
    produce_all(live, topic, [{"value": f"live-{n}".encode(), "partition": 0} for n in range(10)])
    live.commit_transaction(30)
    del zombie, live  # librdkafka handles: closed here, not after the broker is gone
    rc = read(sbroker.bootstrap, topic, [0], "read_committed")
    assert [r[3] for r in rc] == [f"live-{n}" for n in range(10)]


# --------------------------------------------------------------------------
# 5. kafka-transactions: list, describe, describe-producers, find-hanging, abort
# --------------------------------------------------------------------------

def test_transactions_tool_and_abort_of_a_hanging_transaction(sbroker, kafka_tool, topic, tmp_path):
    create_topic(sbroker.bootstrap, topic, partitions=1)
    txn_id = f"{topic}-hanging"
    # A long timeout: the coordinator would not end this transaction within the test.
    hang = JavaProgram(tmp_path, "hang", "TxnClient", "hang", sbroker.bootstrap, topic, 0, txn_id, 600000, 3, 4)
    try:
        hang.wait_line("OPEN", 60)
    finally:
        hang.kill()  # SIGKILL: the transaction stays open
    # records 0-2, COMMIT marker 3, open transaction from 4 (records 4-7)
    bs = sbroker.bootstrap

    listing = table(txn_tool(kafka_tool, bs, "list").check("kafka-transactions list").out)
    mine = [r for r in listing if r["TransactionalId"] == txn_id]
    assert list(listing[0]) == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    assert len(mine) == 1 and mine[0]["TransactionState"] == "Ongoing", listing
    assert mine[0]["Coordinator"] == "1", mine
    producer_id = mine[0]["ProducerId"]

    desc = table(txn_tool(kafka_tool, bs, "describe", "--transactional-id", txn_id).check("describe").out)
    assert len(desc) == 1, desc
    d = desc[0]
    assert list(d) == ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                       "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                       "TopicPartitions"], d
    assert (d["CoordinatorId"], d["TransactionalId"], d["ProducerId"], d["TransactionState"],
            d["TransactionTimeoutMs"], d["TopicPartitions"]) == ("1", txn_id, producer_id, "Ongoing", "600000",
                                                                f"{topic}-0"), d
    assert int(d["CurrentTransactionStartTimeMs"]) <= time.time() * 1000 and int(d["TransactionDurationMs"]) >= 0

    prods = table(txn_tool(kafka_tool, bs, "describe-producers", "--topic", topic, "--partition", "0")
                  .check("describe-producers").out)
    assert prods and list(prods[0]) == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                                        "LastTimestamp", "CurrentTransactionStartOffset"], prods
    assert len(prods) == 1, prods
    pr = prods[0]
    assert pr["ProducerId"] == producer_id and pr["ProducerEpoch"] == d["ProducerEpoch"], (pr, d)
    assert pr["CurrentTransactionStartOffset"] == "4", pr
    assert pr["LastSequence"] == "3", pr  # 4 records of the open transaction, sequences 0-3
    start_offset = int(pr["CurrentTransactionStartOffset"])

    # The coordinator knows this open transaction and its partition: it is not hanging, by
    # broker or by topic, even with no minimum age.
    for scope in (("--broker-id", "1"), ("--topic", topic, "--partition", "0")):
        res = txn_tool(kafka_tool, bs, "find-hanging", *scope, "--max-transaction-timeout", "0").check("find-hanging")
        assert table(res.out) == [], res.out
        assert res.out.split() == ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                                   "StartOffset", "LastTimestamp", "Duration(min)"], res.out

    # No open transaction starts elsewhere.
    bad = txn_tool(kafka_tool, bs, "abort", "--topic", topic, "--partition", "0", "--start-offset", "2")
    assert bad.rc == 1 and "Could not find any open transactions starting at offset 2" in bad.err, bad.describe()
    assert watermarks(bs, topic, 0, "read_committed") == (0, 4)

    txn_tool(kafka_tool, bs, "abort", "--topic", topic, "--partition", "0", "--start-offset",
             str(start_offset)).check("kafka-transactions abort")
    # An ABORT marker at 8: the partition is stable to its end.
    assert watermarks(bs, topic, 0, "read_committed") == (0, 9)
    assert watermarks(bs, topic, 0, "read_uncommitted") == (0, 9)
    after = table(txn_tool(kafka_tool, bs, "describe-producers", "--topic", topic, "--partition", "0").check().out)
    assert [r["CurrentTransactionStartOffset"] for r in after] == ["None"], after

    # read_committed readers get past it, to records committed later by another producer.
    run_java_program(tmp_path, "after", "TxnClient", "init", bs, topic, 0, f"{topic}-other", 2)
    rc = read(bs, topic, [0], "read_committed")
    assert [r[3] for r in rc] == ["before-0", "before-1", "before-2", "after-0", "after-1"], rc


# --------------------------------------------------------------------------
# 6. an open transaction of a dead producer: timed out by the coordinator, or fenced at once
# --------------------------------------------------------------------------

def test_dead_producers_transaction_times_out_or_is_fenced_by_init(sbroker, kafka_tool, topic, tmp_path):
    bs = sbroker.bootstrap
    timed, fenced = f"{topic}-timeout", f"{topic}-fenced"
    create_topic(bs, timed, partitions=1)
    create_topic(bs, fenced, partitions=1)

    # a) transaction.timeout.ms 5 s: aborted by the coordinator once it expires.
    hang = JavaProgram(tmp_path, "hang-timeout", "TxnClient", "hang", bs, timed, 0, timed, 5000, 2, 3)
    try:
        hang.wait_line("OPEN", 60)
        open_at = time.monotonic()
    finally:
        hang.kill()
    assert watermarks(bs, timed, 0, "read_committed") == (0, 3)  # 2 records, COMMIT, open from 3
    wait_until(lambda: watermarks(bs, timed, 0, "read_committed") == (0, 7), 30,
               "the coordinator to abort the timed-out transaction (ABORT marker at 6)")
    waited = time.monotonic() - open_at
    print(f"\ntimed-out transaction aborted {waited:.1f} s after it was flushed (timeout 5 s)")
    assert waited > 3.5, "aborted before its transaction.timeout.ms"
    assert [r[3] for r in read(bs, timed, [0], "read_committed")] == ["before-0", "before-1"]
    d = table(txn_tool(kafka_tool, bs, "describe", "--transactional-id", timed).check().out)[0]
    assert d["TransactionState"] in ("CompleteAbort", "Empty"), d
    assert d["TopicPartitions"] == "", d

    # b) a long timeout, but a new producer with the same transactional.id fences it at once.
    hang = JavaProgram(tmp_path, "hang-fenced", "TxnClient", "hang", bs, fenced, 0, fenced, 600000, 2, 3)
    try:
        hang.wait_line("OPEN", 60)
    finally:
        hang.kill()
    started = time.monotonic()
    lines = run_java_program(tmp_path, "init", "TxnClient", "init", bs, fenced, 0, fenced, 2)
    took = time.monotonic() - started
    init_ms = int([l for l in lines if l.startswith("INIT ")][0].split(" ")[1])
    print(f"initTransactions of the successor took {init_ms} ms (the program {took:.1f} s)")
    assert init_ms < 30000
    rc = read(bs, fenced, [0], "read_committed")
    assert [r[3] for r in rc] == ["before-0", "before-1", "after-0", "after-1"], rc
    ru = read(bs, fenced, [0], "read_uncommitted", expected=7)
    assert [r[3] for r in ru] == ["before-0", "before-1", "open-0", "open-1", "open-2", "after-0", "after-1"]


# --------------------------------------------------------------------------
# 7. Kafka Streams, exactly_once_v2, across a broker restart
# --------------------------------------------------------------------------

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]


def test_kafka_streams_exactly_once_v2_word_count_across_broker_restart(sbroker, topic, tmp_path):
    src, dst, app = f"{topic}-lines", f"{topic}-counts", f"{topic}-app"
    create_topic(sbroker.bootstrap, src, partitions=2)
    create_topic(sbroker.bootstrap, dst, partitions=2)
    rnd = random.Random(7)
    lines = [" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 6))) for _ in range(400)]
    expected = Counter(w for line in lines for w in line.split())
    half = len(lines) // 2
    produce_all(producer(sbroker.bootstrap, acks="all"), src, [{"value": l.encode()} for l in lines[:half]])

    def counts():
        """Every count record of the output, read_committed, by word in offset order."""
        seen = defaultdict(list)
        for _, _, k, v in sorted(read(sbroker.bootstrap, dst, [0, 1], "read_committed", raw=True)):
            seen[k.decode()].append(struct.unpack(">q", v)[0])
        return seen

    app_proc = JavaProgram(tmp_path, "streams", "TxnWordCount", sbroker.bootstrap, src, dst, app,
                           str(tmp_path / "streams-state"), jvm_opts=("-Xmx512m",))
    try:
        app_proc.wait_for(lambda ls: "STATE RUNNING" in ls, 120, "the Streams application RUNNING")
        wait_until(lambda: sum(len(v) for v in counts().values()) > 0, 90, "the first committed counts")
        sbroker.restart()
        produce_all(producer(sbroker.bootstrap, acks="all"), src, [{"value": l.encode()} for l in lines[half:]])

        def final():
            if app_proc.proc.poll() is not None:
                raise HarnessError(f"Streams exited:\n{app_proc.describe()}")
            got = counts()
            return got if {k: v[-1] for k, v in got.items()} == dict(expected) else None

        got = wait_until(final, 150, "the final counts", interval=1)
    except HarnessError as e:
        raise HarnessError(f"{e}\n{app_proc.describe()}") from None
    finally:
        app_proc.terminate(45)
    # No update applied twice or lost: each word's counts are 1, 2, ..., n, once each.
    for word, seq in got.items():
        assert seq == list(range(1, expected[word] + 1)), f"{word}: {seq}"
    states = [l for l in app_proc.lines() if l.startswith("STATE ")]
    print(f"\nStreams states: {' '.join(s.split(' ')[1] for s in states)}")


# --------------------------------------------------------------------------
# 8. kafka-dump-log: control batches, the .txnindex, the transaction log
# --------------------------------------------------------------------------

MARKER_RE = re.compile(r"^\| offset: (\d+) .*endTxnMarker: (COMMIT|ABORT) coordinatorEpoch: (\d+)")


def test_dump_log_shows_markers_aborted_index_and_transaction_log(sbroker, kafka_tool, topic, tmp_path):
    create_topic(sbroker.bootstrap, topic, partitions=1)
    # One producer: transaction 0 committed (0-4, COMMIT 5), 1 aborted (6-10, ABORT 11),
    # 2 committed (12-16, COMMIT 17).
    run_java_program(tmp_path, "produce", "TxnClient", "produce", sbroker.bootstrap, topic, 1, 1, 3, 5)
    assert len(read(sbroker.bootstrap, topic, [0], "read_committed")) == 10
    sbroker.stop()  # clean: every file complete; the next test's sbroker starts it again

    pdir = sbroker.log_dir / f"{topic}-0"
    log = sorted(pdir.glob("*.log"))[0]
    res = kafka_tool(DUMP_LOG_SEGMENTS, "--files", str(log), "--deep-iteration", timeout=120).check("dump .log")
    markers = [(int(m.group(1)), m.group(2)) for m in map(MARKER_RE.match, res.out.splitlines()) if m]
    assert markers == [(5, "COMMIT"), (11, "ABORT"), (17, "COMMIT")], res.out[:4000]
    batches = [l for l in res.out.splitlines() if l.startswith("baseOffset:")]
    assert len(batches) >= 6, batches
    assert all("isTransactional: true" in b for b in batches), batches
    control = [b for b in batches if "isControl: true" in b]
    assert [int(b.split()[1]) for b in control] == [5, 11, 17], control

    txnindex = log.with_suffix(".txnindex")
    assert txnindex.exists(), sorted(p.name for p in pdir.iterdir())
    res = kafka_tool(DUMP_LOG_SEGMENTS, "--files", str(txnindex), timeout=120).check("dump .txnindex")
    aborted = [l for l in res.out.splitlines() if "producerId" in l]
    assert len(aborted) == 1, res.out
    # "version: 0 producerId: P firstOffset: 6 lastOffset: 11 lastStableOffset: 12": the last
    # offset is the ABORT marker's; the LSO is the one once the marker was written (nothing
    # else open: the offset after it).
    fields = dict(re.findall(r"(\w+): (-?\d+)", aborted[0]))
    assert (fields["firstOffset"], fields["lastOffset"], fields["lastStableOffset"]) == ("6", "11", "12"), aborted[0]

    # The coordinator's log: the transactional.id's states up to CompleteCommit.
    txn_id = f"txn-client-{topic}-0"
    segs = [s for s in sorted(sbroker.log_dir.glob("__transaction_state-*/*.log")) if s.stat().st_size > 0]
    assert segs, "no __transaction_state segment with data"
    res = kafka_tool(DUMP_LOG_SEGMENTS, "--files", ",".join(map(str, segs)), "--transaction-log-decoder",
                     timeout=120).check("dump --transaction-log-decoder")
    mine = [l for l in res.out.splitlines() if txn_id in l]
    assert mine, res.out[:4000]
    # The decoder prints TransactionLogValue as JSON with the state as a number.
    states = [TXN_STATES[int(x)] for x in re.findall(r'"transactionStatus":(\d+)', "\n".join(mine))]
    print(f"\n{txn_id} in the transaction log: {' '.join(states)}")
    # Kafka 4.3: Empty Ongoing PrepareCommit CompleteCommit Ongoing PrepareAbort CompleteAbort
    # Ongoing PrepareCommit CompleteCommit
    assert states[0] == "Empty" and states[-1] == "CompleteCommit", states
    for ended in (["Ongoing", "PrepareCommit", "CompleteCommit"], ["Ongoing", "PrepareAbort", "CompleteAbort"]):
        assert any(states[i:i + 3] == ended for i in range(len(states))), states
    epochs = [int(x) for x in re.findall(r'"producerEpoch":(\d+)', "\n".join(mine))]
    assert epochs == sorted(epochs), epochs


# TransactionState ids as written in __transaction_state (TransactionState.java).
TXN_STATES = {0: "Empty", 1: "Ongoing", 2: "PrepareCommit", 3: "PrepareAbort", 4: "CompleteCommit",
              5: "CompleteAbort", 6: "Dead", 7: "PrepareEpochFence"}


# --------------------------------------------------------------------------
# 10. transaction version 1: the form of Kafka's older clients, and of Kafka 4.x clients when
#     the cluster finalizes transaction.version below 2
# --------------------------------------------------------------------------

@pytest.mark.skipif(harness.TARGET != "sluice", reason="sluice.transaction.version is Sluice's")
def test_java_transactions_under_transaction_version_1(broker_factory, kafka_tool, topic, tmp_path):
    """With transaction.version finalized at 1 the Java client adds partitions and offsets
    itself (AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit < v5), keeps its epoch across
    transactions, and the broker verifies each transactional partition with the coordinator
    (KIP-890 part 1) before the first append."""
    b = broker_factory(overrides={"sluice.transaction.version": 1, **TIMEOUT_SCAN})
    create_topic(b.bootstrap, topic, partitions=PARTITIONS)
    lines = run_java_program(tmp_path, "produce", "TxnClient", "produce", b.bootstrap, topic, PARTITIONS,
                             PRODUCERS, TXNS, PER_TXN, timeout=120)
    committed, _ = produced_keys([l.split(" ") for l in lines])
    rc = read(b.bootstrap, topic, range(PARTITIONS), "read_committed")
    assert_committed_exactly_once(rc, committed, "read_committed under transaction.version 1")

    src, dst, group, txn_id = f"{topic}-in", f"{topic}-out", f"{topic}-group", f"{topic}-copier"
    create_topic(b.bootstrap, src, partitions=PARTITIONS)
    create_topic(b.bootstrap, dst, partitions=PARTITIONS)
    n = 300
    produce_all(producer(b.bootstrap, acks="all"), src,
                [{"partition": i % PARTITIONS, "key": f"k{i}".encode(), "value": f"v{i}".encode()} for i in range(n)])
    copier = JavaProgram(tmp_path, "copier", "TxnCopier", b.bootstrap, src, dst, group, txn_id, 30, 0)
    try:
        copier.finish(180)
    finally:
        copier.kill()
    out = read(b.bootstrap, dst, range(PARTITIONS), "read_committed", expected=n, timeout=90)
    assert Counter(r[3] for r in out) == Counter(f"out:v{i}" for i in range(n))
    # Under version 1 the epoch stays put across transactions (no KIP-890 bump).
    res = txn_tool(kafka_tool, b.bootstrap, "describe", "--transactional-id", txn_id)
    res.check("kafka-transactions describe")
    row = table(res.out)[0]
    assert row["ProducerEpoch"] == "0", row

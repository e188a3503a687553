"""Transactions on a Sluice cluster (three brokers on one shared log directory, etcd): the
transaction coordinator of a transactional.id and the owners of the partitions it writes are
different brokers, and the coordinator's broker is SIGKILLed while a transaction is open.

Whatever the next coordinator does with the open transaction (completes the commit the
producer asks for, or aborts it), a read_committed reader sees either all of its records once
or none, never an aborted record, and every committed record exactly once. The coordinator is
found the way operators find it: `kafka-transactions describe` (CoordinatorId, through
FindCoordinator), partition owners from the metadata. The Java programs are those of
test_transactions.py (tests/java/TxnClient.java)."""

from __future__ import annotations

import time

import pytest

import harness
from cluster_support import bootstrap_of, leaders, start_cluster, wait_all_led
from harness import TRANSACTIONS_COMMAND, JavaProgram, run_java_program, wait_until
from test_transactions import (PRODUCERS, TXNS, PER_TXN, assert_committed_exactly_once, produced_keys, read,
                               table, watermarks)

pytestmark = pytest.mark.sluice_only

PARTITIONS = 6


def coordinator_of(kafka_tool, bootstrap: str, txn_id: str) -> dict:
    res = kafka_tool(TRANSACTIONS_COMMAND, "--bootstrap-server", bootstrap, "describe", "--transactional-id",
                     txn_id).check("kafka-transactions describe")
    rows = table(res.out)
    assert len(rows) == 1, res.out
    return rows[0]


def test_transactions_span_owners_other_than_the_coordinator(broker_factory, etcd, tmp_path, kafka_tool, topic):
    """Two Java producers write interleaved committed and aborted transactions over six
    partitions owned by three brokers; each transactional.id has one coordinator, so most of
    the partitions it writes are owned elsewhere. read_committed (Java and librdkafka, through
    any broker) sees the committed records once, in order."""
    brokers = start_cluster(broker_factory, etcd, tmp_path / "shared")
    bootstrap = bootstrap_of(brokers)
    harness.create_topic(bootstrap, topic, partitions=PARTITIONS)
    owners = wait_all_led(bootstrap, topic, PARTITIONS)
    assert set(owners.values()) == {1, 2, 3}, owners
    lines = run_java_program(tmp_path, "produce", "TxnClient", "produce", bootstrap, topic, PARTITIONS,
                             PRODUCERS, TXNS, PER_TXN, timeout=180)
    committed, _ = produced_keys([l.split(" ") for l in lines], partitions=PARTITIONS)
    for k in range(PRODUCERS):
        d = coordinator_of(kafka_tool, bootstrap, f"txn-client-{topic}-{k}")
        coordinator = int(d["CoordinatorId"])
        assert coordinator in (1, 2, 3), d
        # Producer k's committed records lie in partitions owned by brokers other than its
        # coordinator (the point of the test), read back below.
        written = {p for p, keys in committed.items() if any(key.startswith(f"p{k}-") for key in keys)}
        elsewhere = {p for p in written if owners[p] != coordinator}
        assert elsewhere, f"producer {k} wrote only partitions its coordinator {coordinator} owns: {written}"
    for b in brokers:
        rc = read(b.bootstrap, topic, range(PARTITIONS), "read_committed")
        assert_committed_exactly_once(rc, committed, f"librdkafka read_committed via {b.name}")
    lines = run_java_program(tmp_path, "consume", "TxnClient", "consume", bootstrap, topic, "read_committed")
    java = [(int(w[1]), int(w[2]), w[3], w[4]) for w in (l.split(" ") for l in lines) if w[0] == "REC"]
    assert_committed_exactly_once(java, committed, "Java read_committed")


def _open_transaction_on_a_partition_owned_elsewhere(kafka_tool, bootstrap, topic, txn_id, tmp_path):
    """Registers ``txn_id`` (one committed record in a topic of its own), finds its coordinator,
    and returns (coordinator id, a partition of ``topic`` owned by another broker)."""
    harness.create_topic(bootstrap, f"{topic}-register", partitions=1)
    run_java_program(tmp_path, f"register-{txn_id}", "TxnClient", "init", bootstrap, f"{topic}-register", 0, txn_id, 1)
    coordinator = int(coordinator_of(kafka_tool, bootstrap, txn_id)["CoordinatorId"])
    owners = leaders(bootstrap, topic)
    elsewhere = sorted(p for p, o in owners.items() if o != coordinator and o >= 0)
    assert elsewhere, f"every partition owned by the coordinator {coordinator}: {owners}"
    return coordinator, elsewhere[0]


def test_coordinator_killed_mid_transaction_then_the_producer_commits(broker_factory, etcd, tmp_path, kafka_tool,
                                                                         topic):
    """A live producer's transaction is open (records flushed to a partition owned by another
    broker) when the coordinator's broker is SIGKILLed. The producer then commits: through the
    next coordinator the commit completes (all records visible once) or fails and is aborted
    (none visible); the producer's next transaction commits either way."""
    brokers = start_cluster(broker_factory, etcd, tmp_path / "shared")
    bootstrap = bootstrap_of(brokers)
    harness.create_topic(bootstrap, topic, partitions=PARTITIONS)
    wait_all_led(bootstrap, topic, PARTITIONS)
    txn_id = f"{topic}-held"
    coordinator, partition = _open_transaction_on_a_partition_owned_elsewhere(kafka_tool, bootstrap, topic, txn_id,
                                                                             tmp_path)
    go = tmp_path / "go"
    held = JavaProgram(tmp_path, "held", "TxnClient", "hold", bootstrap, topic, partition, txn_id, 60000, 20, go)
    try:
        held.wait_line("OPEN", 90)
        before = watermarks(bootstrap, topic, partition, "read_committed")
        brokers[coordinator - 1].kill()
        survivors = bootstrap_of(brokers)
        wait_all_led(survivors, topic, PARTITIONS, exclude=(coordinator,), timeout=60)
        # The open transaction still holds the partition's LSO back.
        assert watermarks(survivors, topic, partition, "read_committed") == before
        go.touch()
        lines = held.finish(180)
    finally:
        held.kill()
    new_coordinator = int(coordinator_of(kafka_tool, survivors, txn_id)["CoordinatorId"])
    assert new_coordinator != coordinator
    print(f"\ncoordinator {coordinator} killed, partition {partition} owned elsewhere; next coordinator "
          f"{new_coordinator}; producer: {[l for l in lines if l.split(' ')[0] != 'OPEN']}")
    rc = [r[3] for r in read(survivors, topic, [partition], "read_committed")]
    assert "NEXT_COMMIT" in lines, lines
    if "COMMIT" in lines:
        assert rc == [f"held-{n}" for n in range(20)] + ["next-0", "next-1"], rc
    else:
        assert "ABORT" in lines, lines
        assert rc == ["next-0", "next-1"], rc
    # Either way the held records are in the log, once each: what read_committed shows of them
    # (all or none) is the transaction's outcome, not records that never arrived or came twice.
    ru = [r[3] for r in read(survivors, topic, [partition], "read_uncommitted")]
    assert ru == [f"held-{n}" for n in range(20)] + ["next-0", "next-1"], ru


def test_coordinator_killed_with_a_dead_producers_open_transaction(broker_factory, etcd, tmp_path, kafka_tool,
                                                                    topic):
    """The producer is SIGKILLed with its transaction open, then the coordinator's broker too:
    the next coordinator aborts the transaction when its transaction.timeout.ms (10 s) runs
    out, and read_committed readers get past it to later committed records."""
    brokers = start_cluster(broker_factory, etcd, tmp_path / "shared",
                            **{"transaction.abort.timed.out.transaction.cleanup.interval.ms": 1000})
    bootstrap = bootstrap_of(brokers)
    harness.create_topic(bootstrap, topic, partitions=PARTITIONS)
    wait_all_led(bootstrap, topic, PARTITIONS)
    txn_id = f"{topic}-dead"
    coordinator, partition = _open_transaction_on_a_partition_owned_elsewhere(kafka_tool, bootstrap, topic, txn_id,
                                                                             tmp_path)
    hang = JavaProgram(tmp_path, "hang", "TxnClient", "hang", bootstrap, topic, partition, txn_id, 10000, 3, 4)
    try:
        hang.wait_line("OPEN", 90)
    finally:
        hang.kill()
    # before-0..2, COMMIT marker, open-0..3 from offset 4
    assert watermarks(bootstrap, topic, partition, "read_committed") == (0, 4)
    brokers[coordinator - 1].kill()
    survivors = bootstrap_of(brokers)
    wait_all_led(survivors, topic, PARTITIONS, exclude=(coordinator,), timeout=60)
    wait_until(lambda: watermarks(survivors, topic, partition, "read_committed") == (0, 9), 60,
               "the next coordinator to abort the timed-out transaction (ABORT marker at 8)")
    d = coordinator_of(kafka_tool, survivors, txn_id)
    assert d["TransactionState"] in ("CompleteAbort", "Empty") and int(d["CoordinatorId"]) != coordinator, d
    run_java_program(tmp_path, "after", "TxnClient", "init", survivors, topic, partition, f"{topic}-other", 2)
    rc = [r[3] for r in read(survivors, topic, [partition], "read_committed")]
    assert rc == ["before-0", "before-1", "before-2", "after-0", "after-1"], rc
    ru = [r[3] for r in read(survivors, topic, [partition], "read_uncommitted", expected=9)]
    assert ru == ["before-0", "before-1", "before-2"] + [f"open-{n}" for n in range(4)] + ["after-0", "after-1"], ru

"""franz-go, the Go client (tests/franz): fetch sessions that hold through group churn, partitions
added to a consumed topic, and a seek with the leader epoch of a fetched batch.

Fetch-session errors are counted by the broker (Fetch responses answered
INVALID_FETCH_SESSION_EPOCH or FETCH_SESSION_ID_NOT_FOUND, kafka_network_requestmetrics_errors_total)
and by the client (the resets it logs). Kafka answers none in these runs; a client that resets its
session in a loop (the bug these tests were written for) answers thousands.
"""

from __future__ import annotations

import re
import subprocess
import urllib.request

import pytest

import harness

RECORDS = 5000
# records, stages, partitions, members, poll pause ms, timeout s
ARGS = [RECORDS, 2, 4, 3, 5, 240]
SESSION_ERRORS = ("INVALID_FETCH_SESSION_EPOCH", "FETCH_SESSION_ID_NOT_FOUND")


def lines(stdout: str, tag: str) -> list:
    return [l.split()[1:] for l in stdout.splitlines() if l.startswith(tag + " ")]


def result(stdout: str) -> dict:
    r = lines(stdout, "RESULT")
    return dict(kv.split("=", 1) for kv in r[0]) if r else {}


class Target:
    """One Sluice broker, a three-broker Sluice cluster on one shared directory, or Kafka."""

    def __init__(self, brokers):
        self.brokers = brokers
        self.bootstrap = ",".join(b.bootstrap for b in brokers)


@pytest.fixture(params=["single", "cluster"])
def franz_broker(request, broker_factory, tmp_path):
    if harness.TARGET == "kafka":
        if request.param == "cluster":
            pytest.skip("the cluster variant is Sluice's (Kafka's single node is the reference)")
        return Target([broker_factory(overrides={"group.initial.rebalance.delay.ms": 0})])
    if request.param == "single":
        port = harness.free_port()
        b = broker_factory(overrides={"group.initial.rebalance.delay.ms": 0,
                                      "sluice.metrics.listener": f"127.0.0.1:{port}"})
        b.metrics_port = port
        return Target([b])
    from cluster_support import EtcdServer, bootstrap_of, cluster_overrides, live_brokers

    etcd = EtcdServer(tmp_path / "etcd").start()
    request.addfinalizer(etcd.kill)
    shared = tmp_path / "shared"
    brokers = []
    for node in (1, 2, 3):
        port = harness.free_port()
        b = broker_factory(overrides=cluster_overrides(etcd, node, shared, "/franz",
                                                       **{"sluice.metrics.listener": f"127.0.0.1:{port}"}),
                           log_dir=shared, kind="sluice", name=f"node{node}")
        b.metrics_port = port
        brokers.append(b)
    harness.wait_until(lambda: len(live_brokers(bootstrap_of(brokers))) == 3, 30, "3 brokers in the metadata")
    return Target(brokers)


def session_errors(target: Target) -> dict:
    """Fetch responses the brokers answered with a fetch-session error, by error (Sluice)."""
    found = {e: 0.0 for e in SESSION_ERRORS}
    for broker in target.brokers:
        if not hasattr(broker, "metrics_port"):
            continue
        with urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=10) as r:
            text = r.read().decode()
        for m in re.finditer(r'^kafka_network_requestmetrics_errors_total\{request="Fetch",error="([A-Z_]+)"\} (\S+)$',
                             text, re.M):
            if m.group(1) in found:
                found[m.group(1)] += float(m.group(2))
    return found


def run(*cmd, timeout: float) -> subprocess.CompletedProcess:
    p = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"{p.stdout}\n{p.stderr[-5000:]}"
    return p


@pytest.mark.parametrize("variant,txn", [("cooperative", False), ("consumer-uniform", False), ("eager", True)])
def test_franz_chain_survives_churn_without_session_resets(franz_broker, topic, variant, txn):
    """The churn chain of test_group_churn with franz-go's consumers (and, with txn, its
    GroupTransactSession): every record comes out of the chain, every step ends stable, and no
    fetch session was reset by an error."""
    cmd = harness.franz_cmd("chain", franz_broker.bootstrap, variant, topic, *ARGS, *(["txn"] if txn else []))
    p = run(*cmd, timeout=360)
    r = result(p.stdout)
    assert r, p.stdout
    steps = [(s[1], s[2]) for s in lines(p.stdout, "STABLE")]
    assert steps == [("join", "1"), ("join", "2"), ("join", "3"), ("leave", "2"), ("leave", "1")], p.stdout
    assert int(r["distinct"]) == RECORDS, f"records lost in the chain\n{p.stdout}"
    if txn:
        # Read committed at the chain's end, each stage's offsets in its transactions: exactly once.
        assert int(r["read"]) == RECORDS, f"duplicates in a transactional chain\n{p.stdout}"
    assert int(r["session_resets"]) == 0, f"the client reset its fetch session\n{p.stdout}\n{p.stderr[-3000:]}"
    errors = session_errors(franz_broker)
    assert not any(errors.values()), f"fetch-session errors answered: {errors}"


def test_franz_txn_chain_sees_every_revocation_of_idle_members(franz_broker, topic):
    """The transactional chain with no records: its GroupTransactSession members never end a
    transaction, and franz-go passes a revocation on to the program only once between two
    End calls, so from the second eager rebalance on the members' revocations go unreported.
    The chain takes each member's partitions from its SyncGroup assignment, so every step
    still ends stable (it counted old and new partitions together, never stable, before)."""
    cmd = harness.franz_cmd("chain", franz_broker.bootstrap, "eager", topic, 0, *ARGS[1:-1], 120, "txn")
    p = run(*cmd, timeout=240)
    steps = [(s[1], s[2]) for s in lines(p.stdout, "STABLE")]
    assert steps == [("join", "1"), ("join", "2"), ("join", "3"), ("leave", "2"), ("leave", "1")], p.stdout


def test_franz_picks_up_added_partitions_when_told(franz_broker, topic):
    """A direct consumer told its metadata changed (ForceMetadataRefresh) reads a record
    produced to a partition added after it started, well within its metadata max age (5 min)."""
    p = run(*harness.franz_cmd("add-partitions", franz_broker.bootstrap, topic), timeout=300)
    picked = lines(p.stdout, "PICKED_UP")
    assert picked, p.stdout
    # A bound on behaviour, not a timing: picked up at the refresh it was told to make, not
    # at the next periodic one (minutes later).
    assert int(picked[0][0]) < 30_000, p.stdout


def test_franz_seek_past_a_batch_with_its_leader_epoch(franz_broker, topic):
    """A gzip batch larger than the consumer's MaxDecompressBatchBytes stops the partition with
    an error naming the batch's next offset and leader epoch; SetOffsets with that epoch and
    offset reads on at once (the Go program allows 10 s)."""
    p = run(*harness.franz_cmd("skip-batch", franz_broker.bootstrap, topic), timeout=120)
    assert lines(p.stdout, "SKIPPED"), p.stdout
    too_large = lines(p.stdout, "TOO_LARGE")[0]
    assert too_large[0] == "offset=1" and too_large[2] == "next=201", p.stdout
    assert lines(p.stdout, "SESSION_RESETS") == [["0"]], p.stdout
    assert not any(session_errors(franz_broker).values())

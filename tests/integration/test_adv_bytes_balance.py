"""Found by an adversary on 14e850c, since fixed (a load is used only when steady over a
whole window and measured over the partitions the owner records give its broker). Claim 2:
"with steady loads repeated rounds converge (nothing moves back and forth)".

The planner (crates/meta/src/load.rs, plan_load_moves) assumes that with no move under way
the published loads describe the ownership the view holds. They lag by up to a window: the
old owner's P/load record keeps naming a partition it handed over (and counting its bytes)
until its next window ends, and the new owner leaves it out until the window after next
(crates/broker/src/load.rs). Nothing relates sluice.cluster.balance.bytes.interval.ms to
...window.ms (both accepted here: 1000 and 4000), so each round plans on records made before
the last round's moves: a busy partition is swapped away and swapped back, round after round,
under a steady load."""

import time

import pytest

import harness
from cluster_support import cluster_overrides, bootstrap_of, live_brokers
from test_bytes_balance import Busy, TOPICS, owners_of

pytestmark = pytest.mark.sluice_only


def test_adv_steady_load_partitions_move_back_and_forth(broker_factory, etcd, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    brokers = []
    for node in (1, 2, 3):
        brokers.append(broker_factory(
            overrides=cluster_overrides(etcd, node, shared, "/sluice-advbytes", **{
                "sluice.cluster.balance.bytes.window.ms": 4000,
                "sluice.cluster.balance.bytes.interval.ms": 1000,
                "sluice.cluster.balance.bytes.threshold": 65536,
            }),
            log_dir=shared, kind="sluice", name=f"node{node}"))
    bootstrap = bootstrap_of(brokers)
    harness.wait_until(lambda: len(live_brokers(bootstrap)) == 3, 30, "3 brokers")
    for t in TOPICS:
        harness.create_topic(bootstrap, t, partitions=1)
    owners = owners_of(bootstrap)
    per = {b: sorted(t for t, o in owners.items() if o == b) for b in (1, 2, 3)}
    assert all(len(ts) == 2 for ts in per.values()), per
    hot = per[1]
    busy = Busy(bootstrap, hot).start()
    # Every owner each topic had, in order, while the load is steady.
    history = {t: [o] for t, o in owners.items()}
    deadline = time.time() + 40
    try:
        while time.time() < deadline:
            for t, o in owners_of(bootstrap).items():
                if history[t][-1] != o:
                    history[t].append(o)
            time.sleep(0.3)
    finally:
        busy.finish()
    back = {t: h for t, h in history.items() if len(h) != len(set(h))}
    moved_log = "".join(b.log_text() for b in brokers)
    n_moves = moved_log.count("moved partition for bytes in")
    assert not back, (
        f"under a steady load partitions went back to a broker they had left: {back} "
        f"({n_moves} moves for bytes in logged; all owners: {history})")

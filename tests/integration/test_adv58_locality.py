"""Adversarial findings on fdf3d7a (storage-aware ownership)."""

import time

import pytest

import harness
from cluster_support import bootstrap_of, cluster_overrides, leaders, live_brokers, wait_all_led

pytestmark = pytest.mark.sluice_only

DELAY_MS = 20000
PARTITIONS = 6


def test_adv58_a_direct_broker_coming_back_gets_partitions_before_the_locality_delay(
        broker_factory, etcd, tmp_path, topic):
    """Found by an adversary on fdf3d7a, since fixed. Two log dirs on two storage nodes; brokers 1 and 2
    both reach filer-1 directly, broker 3 reaches filer-2. A topic's partitions go to the
    three (each made on its owner's direct volume). Broker 2 is killed: its filer-1
    partitions go to broker 1, the other live broker reaching filer-1. Broker 2 restarts
    (a new lease): docs/cluster.md says a broker with direct access that comes back "gets
    partitions back once it has been registered for sluice.cluster.locality.delay.ms"
    (20 s here). plan_assignments' per-group balancing counts broker 2 as a member of the
    (topic, filer-1) group whether or not it is settled (crates/meta/src/cluster.rs,
    plan_assignments, the balancing loop over `members`), so partitions move to it in the
    controller's first rounds after it registers."""
    shared = tmp_path / "shared"
    dirs = [shared / "filer-1", shared / "filer-2"]
    for d in dirs:
        d.mkdir(parents=True)
    nodes = {1: "filer-1", 2: "filer-1", 3: "filer-2"}
    brokers = {}
    for node, reach in nodes.items():
        brokers[node] = broker_factory(
            overrides=cluster_overrides(etcd, node, shared, "/sluice-adv58", **{
                "log.dirs": ",".join(str(d) for d in dirs),
                "sluice.volume.storage.nodes": f"{dirs[0]}:filer-1,{dirs[1]}:filer-2",
                "sluice.broker.storage.nodes": reach,
                "sluice.cluster.locality.delay.ms": DELAY_MS}),
            log_dir=shared, kind="sluice", name=f"node{node}")
    bootstrap = bootstrap_of(brokers.values())
    harness.wait_until(lambda: len(live_brokers(bootstrap)) == 3, 30, "3 brokers")
    harness.create_topic(bootstrap, topic, partitions=PARTITIONS)
    owners = wait_all_led(bootstrap, topic, PARTITIONS, timeout=60)
    assert 2 in owners.values(), owners
    time.sleep(2)

    brokers[2].kill()
    others = bootstrap_of([brokers[1], brokers[3]])
    wait_all_led(others, topic, PARTITIONS, exclude=(2,), timeout=60)
    time.sleep(2)

    started = time.monotonic()
    brokers[2].start()
    harness.wait_until(lambda: 2 in live_brokers(bootstrap_of(brokers.values())), 30, "broker 2 back")
    # Well inside the delay (counted from the restart, so from before its registration).
    early = []
    while time.monotonic() - started < DELAY_MS / 1000 / 2:
        # Asked of brokers 1 and 3 only (not the restarted broker itself).
        ls = leaders(others, topic)
        if any(o == 2 for o in ls.values()):
            early.append((round(time.monotonic() - started, 1), ls))
            break
        time.sleep(0.3)
    assert not early, (
        f"broker 2 owned partitions {early[0][0]} s after its restart began, before "
        f"sluice.cluster.locality.delay.ms ({DELAY_MS} ms): {early[0][1]}")


def test_adv58_a_new_topic_moves_off_its_direct_brokers_and_back(broker_factory, etcd, tmp_path, topic):
    """Found by an adversary on fdf3d7a, since fixed. Brokers 1 and 2 reach filer-1 and filer-2 directly,
    broker 3 neither; broker 3 starts first (the controller) and the topic is created
    through it. spread_new_partitions gives every partition to 1 and 2, but the controller's
    round on the view of the creation (no owner has recorded `volume` yet) puts them all in
    the group of unknown volume, whose candidates are every live broker, and balancing plans
    moves to broker 3 (crates/meta/src/cluster.rs, plan_assignments, `group_of(None)`). Once
    broker 3 has acquired them it records their volume, they are "misplaced", and they move
    back: hand-overs for a topic creation in a cluster where no broker came or went."""
    shared = tmp_path / "shared"
    dirs = [shared / "filer-1", shared / "filer-2"]
    for d in dirs:
        d.mkdir(parents=True)
    nodes = {3: "", 1: "filer-1", 2: "filer-2"}
    brokers = {}
    for node, reach in nodes.items():
        brokers[node] = broker_factory(
            overrides=cluster_overrides(etcd, node, shared, "/sluice-adv58b", **{
                "log.dirs": ",".join(str(d) for d in dirs),
                "sluice.volume.storage.nodes": f"{dirs[0]}:filer-1,{dirs[1]}:filer-2",
                "sluice.broker.storage.nodes": reach,
                "sluice.cluster.locality.delay.ms": 0}),
            log_dir=shared, kind="sluice", name=f"node{node}")
        if node == 3:
            time.sleep(2)
    bootstrap = bootstrap_of(brokers.values())
    harness.wait_until(lambda: len(live_brokers(bootstrap)) == 3, 30, "3 brokers")
    time.sleep(2)
    n = 24
    harness.create_topic(bootstrap_of([brokers[3]]), topic, partitions=n)
    owners = wait_all_led(bootstrap, topic, n, timeout=60)
    time.sleep(8)
    moved = []
    for node, b in brokers.items():
        log = (tmp_path / f"node{node}" / f"node{node}.log")
        if log.exists():
            moved += [line for line in log.read_text().splitlines()
                      if "assigned partition" in line and f"topic={topic} " in line]
    # Where each partition's directory was made, against its first owner's direct volume.
    made = {p: [i for i, d in enumerate(dirs) if (d / f"{topic}-{p}").is_dir()] for p in range(n)}
    wrong = {p: made[p] for p in range(n) if made[p] != [owners[p] - 1]}
    assert not moved and not wrong, (
        f"{len(moved)} moves after creating the topic (owners at first {owners}); partitions "
        f"whose directory is not on their first owner's direct volume (log dir index): {wrong}\n"
        + "\n".join(moved[:12]))


def test_adv58_a_controller_failover_settles_a_direct_broker_that_just_came_back(
        broker_factory, etcd, tmp_path, topic):
    """Found by an adversary on fdf3d7a, since fixed. Brokers 1 and 2 reach filer-1 and filer-2 directly,
    broker 3 neither; broker 3 starts first (the controller). Broker 1 is killed: filer-1's
    partitions go to 2 and 3. Broker 1 restarts (a new lease) and, well inside
    sluice.cluster.locality.delay.ms (30 s), the controller (3) dies. The new controller's
    first round counts every registered broker as settled (crates/broker/src/locality.rs,
    Settling::settled: `_ if first => long_ago`), broker 1 included although it registered a
    few seconds ago, so filer-1's partitions that broker 2 serves (alive, not orphans) move to
    broker 1 at once: moves back to a direct broker that has not been registered for the
    delay, and a controller failover during a rolling restart undoes the delay."""
    delay_ms = 30000
    shared = tmp_path / "shared"
    dirs = [shared / "filer-1", shared / "filer-2"]
    for d in dirs:
        d.mkdir(parents=True)
    nodes = {3: "", 1: "filer-1", 2: "filer-2"}
    brokers = {}
    for node, reach in nodes.items():
        brokers[node] = broker_factory(
            overrides=cluster_overrides(etcd, node, shared, "/sluice-adv58c", **{
                "log.dirs": ",".join(str(d) for d in dirs),
                "sluice.volume.storage.nodes": f"{dirs[0]}:filer-1,{dirs[1]}:filer-2",
                "sluice.broker.storage.nodes": reach,
                "sluice.cluster.locality.delay.ms": delay_ms}),
            log_dir=shared, kind="sluice", name=f"node{node}")
        if node == 3:
            time.sleep(2)
    bootstrap = bootstrap_of(brokers.values())
    harness.wait_until(lambda: len(live_brokers(bootstrap)) == 3, 30, "3 brokers")
    n = 12
    harness.create_topic(bootstrap, topic, partitions=n)
    wait_all_led(bootstrap, topic, n, timeout=60)
    time.sleep(5)
    on = {p: [i for i, d in enumerate(dirs) if (d / f"{topic}-{p}").is_dir()] for p in range(n)}
    first = [p for p in range(n) if on[p] == [0]]
    assert first, on

    brokers[1].kill()
    survivors = bootstrap_of([brokers[2], brokers[3]])
    wait_all_led(survivors, topic, n, exclude=(1,), timeout=60)
    time.sleep(3)
    during = leaders(survivors, topic)
    on_2 = [p for p in first if during[p] == 2]
    if not on_2:
        pytest.skip(f"no filer-1 partition landed on broker 2: {during}")

    restarted = time.monotonic()
    brokers[1].start()
    harness.wait_until(lambda: 1 in live_brokers(bootstrap_of([brokers[2]])), 30, "broker 1 back")
    brokers[3].kill()
    early = None
    while time.monotonic() - restarted < 15:
        ls = leaders(bootstrap_of([brokers[2]]), topic)
        if any(ls.get(p) == 1 for p in on_2):
            early = (round(time.monotonic() - restarted, 1), ls)
            break
        time.sleep(0.3)
    assert early is None, (
        f"filer-1 partitions {on_2}, served by live broker 2, moved to broker 1 {early[0]} s "
        f"after its restart, before sluice.cluster.locality.delay.ms ({delay_ms} ms): {early[1]}")

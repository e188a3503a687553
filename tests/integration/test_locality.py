"""Storage-aware ownership (docs/cluster.md, "Owners next to their storage"): two shared log
dirs declared on two storage nodes (`sluice.volume.storage.nodes`), broker 1 reaching the first
directly, broker 2 the second, broker 3 neither (`sluice.broker.storage.nodes`). Owners land on
the direct brokers, new partitions are made on a volume their owner reaches directly, a
volume whose direct broker is dead is served by the others (locality never costs
availability), and its partitions move back once that broker has been back for
`sluice.cluster.locality.delay.ms`, with every acknowledged record readable once."""

import re
import time
import urllib.request

import pytest

import harness
from cluster_support import bootstrap_of, cluster_overrides, live_brokers, wait_all_led
from test_cluster import PARTITIONS, Load, check_all_readable

pytestmark = pytest.mark.sluice_only

DELAY_MS = 6000


def metrics_text(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def direct_flags(port: int, topic: str) -> dict:
    """partition -> the owner's sluice_partition_direct, from one broker's metrics."""
    return {int(p): v == "1" for p, v in re.findall(
        rf'^sluice_partition_direct{{topic="{re.escape(topic)}",partition="(\d+)"}} (\S+)$',
        metrics_text(port), re.M)}


def volume_of(dirs, topic: str, partition: int) -> int:
    found = [i for i, d in enumerate(dirs) if (d / f"{topic}-{partition}").is_dir()]
    assert len(found) == 1, f"{topic}-{partition} in log dirs {found}"
    return found[0]


def test_owners_sit_next_to_their_storage_and_stay_available_without_it(broker_factory, etcd, tmp_path, topic):
    shared = tmp_path / "shared"
    dirs = [shared / "filer-1", shared / "filer-2"]
    for d in dirs:
        d.mkdir(parents=True)
    nodes = {1: "filer-1", 2: "filer-2", 3: ""}
    brokers, ports = {}, {}
    for node, reach in nodes.items():
        ports[node] = harness.free_port()
        brokers[node] = broker_factory(
            overrides=cluster_overrides(etcd, node, shared, "/sluice-locality", **{
                "log.dirs": ",".join(str(d) for d in dirs),
                "sluice.volume.storage.nodes": f"{dirs[0]}:filer-1,{dirs[1]}:filer-2",
                "sluice.broker.storage.nodes": reach,
                "sluice.cluster.locality.delay.ms": DELAY_MS,
                "sluice.metrics.listener": f"127.0.0.1:{ports[node]}"}),
            log_dir=shared, kind="sluice", name=f"node{node}")
    bootstrap = bootstrap_of(brokers.values())
    harness.wait_until(lambda: len(live_brokers(bootstrap)) == 3, 30, "3 brokers")
    assert 'sluice_log_dir_direct{log_dir="%s",storage_node="filer-1"} 1' % dirs[0] in metrics_text(ports[1])
    assert 'sluice_log_dir_direct{log_dir="%s",storage_node="filer-1"} 0' % dirs[0] in metrics_text(ports[3])

    # New partitions go to the brokers with direct access, each made on its owner's volume.
    harness.create_topic(bootstrap, topic, partitions=PARTITIONS)
    owners = wait_all_led(bootstrap, topic, PARTITIONS, timeout=60)
    assert set(owners.values()) == {1, 2}, owners
    on = {p: volume_of(dirs, topic, p) for p in range(PARTITIONS)}
    assert all(on[p] == owners[p] - 1 for p in owners), (owners, on)
    for node in (1, 2):
        mine = [p for p, o in owners.items() if o == node]
        harness.wait_until(lambda: direct_flags(ports[node], topic) == {p: True for p in mine}, 30,
                           f"broker {node}'s metrics: its partitions direct")
    assert "sluice_partitions_indirect 0" in metrics_text(ports[3])

    load = Load(bootstrap, topic).start()
    time.sleep(2)
    # The only broker reaching filer-1 dies: its partitions are served by the others at once.
    first = sorted(p for p, v in on.items() if v == 0)
    brokers[1].kill()
    killed_at = time.monotonic()
    during = wait_all_led(bootstrap_of([brokers[2], brokers[3]]), topic, PARTITIONS, exclude=(1,), timeout=60)
    assert {during[p] for p in first} <= {2, 3}
    harness.wait_until(lambda: all(any(part == p and t > killed_at + 1 for (part, _, t) in list(load.acked.values()))
                                   for p in first), 60, "acknowledgements on filer-1's partitions without broker 1")
    indirect = sum(float(re.search(r"^sluice_partitions_indirect (\S+)$", metrics_text(ports[n]), re.M).group(1))
                   for n in (2, 3))
    assert indirect == len(first), indirect

    # Back: after the delay its partitions move back to it, a few at a time, under load.
    before_start = time.monotonic()
    brokers[1].start()
    seen_back = []

    def home():
        ls = wait_all_led(bootstrap_of(brokers.values()), topic, PARTITIONS, timeout=30)
        if not seen_back and any(ls[p] == 1 for p in first):
            seen_back.append(time.monotonic())
        return ls if all(ls[p] == (1 if on[p] == 0 else 2) for p in ls) else None

    final = harness.wait_until(home, 90, "filer-1's partitions back on broker 1", interval=0.2)
    # Seen back after the move, which came at least the delay after broker 1 registered
    # again, which was after before_start.
    assert seen_back[0] - before_start >= DELAY_MS / 1000, \
        f"moved back {seen_back[0] - before_start:.1f} s after the restart began, before the locality delay"
    assert set(final.values()) == {1, 2}
    time.sleep(1)
    load.finish()
    check_all_readable(bootstrap_of(brokers.values()), topic, load.acked)
    # Partitions never moved between volumes: a move is of ownership, not of files.
    assert {p: volume_of(dirs, topic, p) for p in range(PARTITIONS)} == on


def test_volume_check_of_a_broker_config_names_each_log_dirs_storage_node(tmp_path):
    """``sluice volume check --config``: every log dir of that broker, with its declared
    storage node and whether the broker reaches it directly, then the volume's figures."""
    import subprocess

    dirs = [tmp_path / "a", tmp_path / "b", tmp_path / "c"]
    for d in dirs:
        d.mkdir()
    props = tmp_path / "server.properties"
    props.write_text("node.id=2\n"
                     f"log.dirs={','.join(str(d) for d in dirs)}\n"
                     f"sluice.volume.storage.nodes={dirs[0]}:filer-1,{dirs[1]}:filer-2\n"
                     "sluice.broker.storage.nodes=filer-2\n")
    r = subprocess.run([str(harness.SLUICE_BIN), "volume", "check", "--config", str(props), "--size-mb", "2"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stdout.splitlines() if line.startswith("log dir ")]
    assert lines == [f"log dir {dirs[0]} (broker 2): storage node filer-1, indirect",
                     f"log dir {dirs[1]} (broker 2): storage node filer-2, direct",
                     f"log dir {dirs[2]} (broker 2): storage node -, not declared"], r.stdout
    assert r.stdout.count("verdict:") == 3 and r.stdout.count("fsync (4 KiB):") == 3, r.stdout
    # A dir the broker does not have is refused with a clear error.
    props.write_text(f"log.dirs={dirs[0]}\nsluice.volume.storage.nodes=/elsewhere:filer-1\n")
    r = subprocess.run([str(harness.SLUICE_BIN), "volume", "check", "--config", str(props)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "sluice.volume.storage.nodes" in r.stderr and "not one of log.dirs" in r.stderr, \
        r.stderr

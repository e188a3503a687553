"""bench/compare end to end, briefly: Apache Kafka and Sluice each run the (a) 10k workload
twice (alternating which goes first) and the perf tools twice, and the summary has every run,
the medians with their ranges, and Sluice/Kafka ratios. With a disk budget, both brokers run
(a) with the same retention settings, and the perf tools without them; settings given for one
broker reach every run of that broker only. The figures of so short a run mean
nothing; what is checked is that the comparison measures both brokers and reports it."""

import json
import re
import subprocess
import sys

import pytest

from harness import REPO_ROOT

PERF_RECORDS = 20_000
SETTINGS = {"kafka": ("num.io.threads", "2"), "sluice": ("sluice.worker.threads", "1")}


@pytest.mark.long
def test_compare_repeats_alternate_and_report_medians(tmp_path):
    out = tmp_path / "results"
    cmd = [sys.executable, str(REPO_ROOT / "bench" / "compare"), "--only", "a10k,perf", "--repeat", "2",
           "--duration", "3", "--warmup", "1", "--perf-records", str(PERF_RECORDS), "--no-build",
           "--disk-budget-gb", "0.5", "--volume-check-mb", "32", "--machine-check-s", "2", "--sluice-config", "sluice.worker.threads=1",
           "--kafka-config", "num.io.threads=2", "--out", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]

    # Repeats go round all the scenarios; kafka goes first in the first round, sluice in the second.
    starts = re.findall(r"==> (a10k|perf) on (kafka|sluice): .*\(run (\d) of 2\)", p.stdout)
    assert starts == [("a10k", "kafka", "1"), ("a10k", "sluice", "1"), ("perf", "kafka", "1"),
                      ("perf", "sluice", "1"), ("a10k", "sluice", "2"), ("a10k", "kafka", "2"),
                      ("perf", "sluice", "2"), ("perf", "kafka", "2")], p.stdout[-3000:]

    summary = json.loads((out / "summary.json").read_text())
    assert summary["meta"]["repeat"] == 2
    assert summary["meta"]["disk_budget_gb"] == 0.5
    # 0.5 GiB over 100 partitions is 5.4 MB each: segments at their 16 MiB floor, and one
    # segment's worth retained.
    bounds = {"log.retention.bytes": str(16 << 20), "log.segment.bytes": str(16 << 20),
              "log.retention.check.interval.ms": "5000", "log.segment.delete.delay.ms": "1000"}
    for kind in ("kafka", "sluice"):
        for i in (1, 2):
            for sid, bounded in (("a10k", True), ("perf", False)):
                text = (out / f"work-{sid}-{kind}-{i}" / "server.properties").read_text()
                props = dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))
                for k, v in bounds.items():
                    assert (props.get(k) == v) if bounded else (k not in props), (sid, kind, k, props.get(k))
                # Each broker's own settings, in every run, and not the other's.
                other = "sluice" if kind == "kafka" else "kafka"
                key, value = SETTINGS[kind]
                assert props.get(key) == value and SETTINGS[other][0] not in props, (sid, kind, props)
            if kind == "sluice":
                assert "with 1 worker thread(s)" in (out / f"work-a10k-sluice-{i}" / "sluice.log").read_text()
    assert summary["meta"]["settings"] == {"sluice": {"sluice.worker.threads": "1"},
                                           "kafka": {"num.io.threads": "2"}}
    for kind in ("kafka", "sluice"):
        runs = summary["results"]["a10k"][kind]
        assert len(runs) == 2
        for i, r in enumerate(runs, 1):
            assert "error" not in r, r
            # The volume was checked before the run.
            assert r["volume"]["write_mib_s"] > 0 and r["volume"]["append_sync_p99_ms"] > 0, r["volume"]
            # And the machine's memory copy rate.
            m = r["machine"]
            for kind_ in ("dram", "cache"):
                assert 0 < m[f"{kind_}_p10_gb_s"] <= m[f"{kind_}_median_gb_s"] <= m[f"{kind_}_p90_gb_s"], m
                assert 0 < m[f"{kind_}_second_min_gb_s"] <= m[f"{kind_}_second_max_gb_s"], m
            assert r["publish_rate_msgs"] > 0 and r["publish_errors"] == 0, r
            assert r["broker_cpu_measured_s"] > 0 and r["broker_peak_rss_mb"] > 0, r
            assert 0 <= r["machine_steal_pct"] <= 100, r
            # What the volume did during the run: the data dir's block device was found.
            d = r["device_run"]
            assert d["write_mb_s"] >= 0 and 0 <= d["busy_pct"] <= 100 and "write_ms_per_request" in d, d
            assert (out / f"a10k-{kind}-{i}.json").is_file()
        perf = summary["results"]["perf"][kind]
        assert len(perf) == 2
        for r in perf:
            assert r["producer"]["records"] == PERF_RECORDS and r["producer"]["rate_msgs"] > 0, r
            assert r["consumer"]["records"] == PERF_RECORDS, r

    table = (out / "summary.md").read_text()
    assert "Sluice settings: sluice.worker.threads=1." in table and "Kafka settings: num.io.threads=2." in table
    row = next(line for line in table.splitlines() if "| publish msg/s |" in line)
    # | a10k | publish msg/s | K med (K min-K max) | S med (S min-S max) | ratio |
    cells = [c.strip() for c in row.strip("|").split("|")]
    num = r"[\d,]+\.\d"
    for c in cells[2:4]:
        m = re.fullmatch(rf"({num}) \(({num})-({num})\)", c)
        assert m, row
        med, lo, hi = (float(x.replace(",", "")) for x in m.groups())
        assert lo <= med <= hi, row
    med = {k: sum(r["publish_rate_msgs"] for r in summary["results"]["a10k"][k]) / 2 for k in ("kafka", "sluice")}
    assert cells[2].startswith(f"{med['kafka']:,.1f} ("), row
    assert cells[4] == f"{med['sluice'] / med['kafka']:.2f}x", row
    assert "median (min-max)" in table
    assert "| machine memory copy GB/s before the run (dram, median) |" in table, table
    assert "| volume busy % (whole run) |" in table, table
    spread = next(line for line in table.splitlines() if line.startswith("- a10k: Sluice's 2 runs"))
    assert re.search(r"\((\d+\.\d)% apart\); the volume's write rate before them [\d,]+ to [\d,]+ MiB/s "
                     r"\(\d+\.\d% apart\); the volume's mean write request during them [\d.]+ to [\d.]+ ms "
                     r"\(\d+\.\d% apart\); the machine's memory copy rate before them [\d.]+ to [\d.]+ GB/s", spread), spread


def test_a_run_stops_at_the_disk_floor_and_its_data_goes(tmp_path):
    """A floor above the volume's free space stops the run at once: the broker and the client
    are killed, the run is reported as failed with why, and its data dir is removed. Without
    --disk-budget-gb the budget is a third of the free space, and says so."""
    out = tmp_path / "results"
    cmd = [sys.executable, str(REPO_ROOT / "bench" / "compare"), "--only", "a10k", "--targets", "sluice",
           "--duration", "30", "--warmup", "30", "--no-build", "--disk-floor-gb", "1000000", "--out", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert re.search(r"disk budget [\d.]+ GB per run: a third of the [\d.]+ GB free", p.stderr + p.stdout)
    summary = json.loads((out / "summary.json").read_text())
    (run,) = summary["results"]["a10k"]["sluice"]
    assert run["error"].startswith("stopped: ") and "below the 1e+06 GB floor" in run["error"], run
    assert 0 < summary["meta"]["disk_budget_gb"] < 1e6
    assert not (out / "data-a10k-sluice").exists()
    assert "| a10k | error | stopped: " in (out / "summary.md").read_text()


def load_compare():
    """bench/compare as a module (it has no .py suffix)."""
    import importlib.machinery
    import importlib.util
    loader = importlib.machinery.SourceFileLoader("bench_compare", str(REPO_ROOT / "bench" / "compare"))
    spec = importlib.util.spec_from_loader("bench_compare", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_the_windows_of_a_hold_run_one_kernel_sampler_at_a_time():
    """The search's hold announces each of its windows with "measuring for": each window's
    sampler of the kernel's counters replaces the last one's instead of running beside it (a
    sampler left running per window loaded the machine the later windows measured), and none
    runs after the result or after the client ended without one."""
    import os
    import threading

    compare = load_compare()

    def samplers() -> int:
        return sum(1 for t in threading.enumerate() if t.name == "kernel-sampler" and t.is_alive())

    assert samplers() == 0
    marks = compare.WindowMarks(os.getpid(), REPO_ROOT)
    for _ in range(3):
        marks.on_line("measuring for 20 s")
        assert samplers() == 1
    import time
    deadline = time.monotonic() + 10
    while not marks.sampler.dirty and time.monotonic() < deadline:
        time.sleep(0.02)
    marks.on_line("result over 20.0 s")
    assert samplers() == 0
    counters = marks.marks["kernel_counters"]
    assert counters["dirty_peak_mb"] is not None, counters
    assert marks.marks["end"] >= marks.marks["start"]
    # The volume's counters at both marks (this file's device is a listed block device).
    assert marks.marks["device_start"] is not None and marks.marks["device_end"] is not None, marks.marks
    marks.on_line("measuring for 20 s")
    assert samplers() == 1
    marks.close()
    assert samplers() == 0


def test_the_spread_line_says_how_often_each_run_stalled_while_keeping_pace():
    """Next to how far apart a broker's runs are, the share of the seconds it kept pace in
    (hold windows that reached their rate without a growing backlog) whose publish p99.9
    missed the bound: a broker that stalls below its capacity holds a window only between
    stalls, and that, not the method, then sets its spread."""
    compare = load_compare()

    def run(rate, seconds, over):
        return {"publish_rate_msgs": rate,
                "held": {"sustained": True, "paced_seconds": seconds, "paced_seconds_over": over}}

    results = {"b": {"kafka": [run(150_000, 160, 12), run(248_000, 180, 42), run(183_000, 200, 64)],
                     "sluice": [run(1_000_000, 120, 0), run(1_030_000, 100, 1)]}}
    lines = compare.spreads(results, ["kafka", "sluice"])
    kafka = next(line for line in lines if line.startswith("b: Kafka's 3 runs NOT within 10%"))
    assert kafka.endswith("seconds over the latency bound while keeping pace, per run: 8%, 23%, 32%"), kafka
    sluice = next(line for line in lines if line.startswith("b: Sluice's 2 runs within 10%"))
    assert sluice.endswith("per run: 0%, 1%"), sluice
    # A run without a hold (a fixed rate) has no such share, and the line says nothing of it.
    results["b"]["sluice"][1].pop("held")
    sluice = next(line for line in compare.spreads(results, ["sluice"]) if line.startswith("b: Sluice's"))
    assert "keeping pace" not in sluice, sluice


def test_quick_runs_keep_the_rate_searches_warm_up():
    """--quick shortens every run's warm-up to 15 s except the rate searches' (b, c, d-sync),
    which keep a minute: a JVM's first 45 s under load are slower than the rest, and a hold
    whose first window fell in them missed it at a rate its later windows held. --warmup,
    when given, is every run's, the searches' too."""
    import argparse
    compare = load_compare()

    def lengths(**given):
        args = argparse.Namespace(quick=False, duration=None, warmup=None)
        vars(args).update(given)
        compare.run_lengths(args)
        return args.duration, args.warmup, args.search_warmup

    assert lengths(quick=True) == (20, 15, compare.SEARCH_WARMUP_QUICK_S)
    assert compare.SEARCH_WARMUP_QUICK_S >= 60
    assert lengths(quick=True, warmup=40) == (20, 40, 40)
    assert lengths(quick=True, duration=60) == (60, 15, compare.SEARCH_WARMUP_QUICK_S)
    # Without --quick, the workload's own warm-up (None: sluice bench reads it from the file).
    assert lengths() == (None, None, None)
    assert lengths(warmup=30) == (None, 30, 30)

"""The fault suite's checker against histories written by hand (no broker): every check it
reports is shown to fire on the one anomaly it names, and to stay quiet on a clean history, so
that a fault run passing means something (issue 52)."""

from __future__ import annotations

import pytest

import faults
from queue_checker import CHECKS, History

WL = "g"
PARTITIONS = 2


def clean(n: int = 20) -> History:
    """``n`` records sent, acknowledged, read live and by the group, and all in the final read."""
    h = History([WL])
    final = []
    next_offset = [0] * PARTITIONS
    for seq in range(n):
        v = f"{WL}:0:{seq}"
        p = seq % PARTITIONS
        o = next_offset[p]
        next_offset[p] += 1
        h.on_send(WL)
        h.on_ack(WL, v, p, o, float(seq))
        h.on_read(WL, v, p, o, "live", float(seq))
        h.on_read(WL, v, p, o, "group", float(seq))
        final.append((p, o, v))
    h.final_records = final
    return h


def finish(h: History) -> dict:
    h.on_final(WL, getattr(h, "final_records", []))
    return h.check(WL)


def test_a_clean_history_passes_every_check():
    r = finish(clean())
    assert {c: r[c] for c in CHECKS} == {c: 0 for c in CHECKS}
    assert r["acked"] == 20 and r["sent"] == 20


def test_an_acknowledged_record_missing_from_the_final_read_is_lost():
    h = clean()
    h.final_records = [r for r in h.final_records if r[2] != f"{WL}:0:7"]
    r = finish(h)
    assert r["lost"] == 1
    # It was read during the run too: it vanished as well.
    assert r["vanished"] == 1 and r["vanished_acked"] == 1


def test_a_value_at_two_offsets_is_duplicated():
    h = clean()
    v = f"{WL}:0:4"
    h.final_records.append((0, 10, v))
    assert finish(h)["duplicated"] == 1


def test_a_later_value_of_one_producer_at_a_lower_offset_is_reordered():
    h = History([WL])
    order = [0, 1, 3, 2, 4]  # seq 3 stored before seq 2
    for seq in range(5):
        h.on_send(WL)
        h.on_ack(WL, f"{WL}:0:{seq}", 0, None, float(seq))
    h.final_records = [(0, o, f"{WL}:0:{seq}") for o, seq in enumerate(order)]
    r = finish(h)
    assert r["reordered"] == 1 and r["lost"] == 0


def test_one_offset_with_two_values_is_inconsistent():
    h = clean()
    h.on_read(WL, f"{WL}:0:9", 0, 0, "live", 99.0)
    assert finish(h)["inconsistent_offsets"] == 1


def test_a_group_consumer_that_read_nothing_missed_everything():
    h = History([WL])
    final = []
    for seq in range(10):
        v = f"{WL}:0:{seq}"
        h.on_send(WL)
        h.on_ack(WL, v, 0, seq, float(seq))
        final.append((0, seq, v))
    h.final_records = final
    assert finish(h)["group_missed"] == 10


def test_a_record_neither_acknowledged_nor_failed_is_uncounted():
    h = clean()
    h.on_send(WL)  # sent, and its callback never came
    assert finish(h)["uncounted"] == 1
    h = clean()
    h.on_send(WL)
    h.on_fail(WL, f"{WL}:0:20", "Local: Purged in queue")
    assert finish(h)["uncounted"] == 0


def test_a_group_member_starting_below_its_commit_regressed():
    h = clean()
    h.on_group_regressed(WL, 0, 8, 5)
    assert finish(h)["group_offset_regressed"] == 1


def result_of(h: History, **extra) -> dict:
    r = finish(h)
    r["guaranteed"] = True
    return {"workloads": {WL: r}, **extra}


@pytest.mark.parametrize("check", CHECKS)
def test_each_check_of_a_guaranteed_workload_is_a_violation(check):
    r = result_of(clean())
    assert faults.violations(r) == {}
    r["workloads"][WL][check] = 1
    assert faults.violations(r) == {f"{WL}.{check}": 1}


def test_a_guaranteed_workload_with_nothing_acknowledged_is_a_violation():
    assert faults.violations(result_of(History([WL]))) == {f"{WL}.nothing_acknowledged": 1}


def test_a_fault_kind_that_never_took_effect_is_reported():
    r = result_of(clean(), faults={"crash": 3, "fsync-eio": 4}, effective={"crash": 3})
    assert faults.violations(r) == {"fault_kinds_without_effect": 1}
    r = result_of(clean(), faults={"crash": 3}, effective={"crash": 3}, unavailable=["disk-full"])
    assert faults.violations(r) == {"fault_kinds_not_injected": 1}


def test_a_broker_that_died_by_itself_is_a_violation():
    r = result_of(clean(), findings=[{"kind": "broker-died", "detail": "exit 1"}])
    assert faults.violations(r) == {"broker-died": 1}

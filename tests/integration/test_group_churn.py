"""A chain of consumer groups under membership churn (issue 21, item 3): behaviour, not timing.

Two groups in a chain (group 0 reads topic 0 and produces every record on to topic 1, group 1
on to topic 2), each starting with one member; records are produced to topic 0, then members are
added one at a time up to three and removed one at a time, each step waiting until every group
is stable again (every partition owned by exactly one live member, fair shares). The chain
commits after its producer's flush, so it promises at least once: every record comes out of the
chain's end, duplicates allowed. Timings are bench/churn-compare's job; the timeout here is
only a bound.

librdkafka (tests/integration/churn_chain.py) runs the classic eager and cooperative variants
and the consumer protocol with the uniform assignor; the Java client
(tests/java/ChurnChain.java) static members (leaving with LeaveGroup) and the consumer protocol
with the range assignor.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import harness

RECORDS = 5000
ARGS = [RECORDS, 2, 4, 3, 5, 240]  # records, stages, partitions, members, poll pause ms, timeout s
CHAIN_PY = Path(__file__).resolve().parent / "churn_chain.py"


def result(stdout: str) -> dict:
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            return dict(kv.split("=", 1) for kv in line.split()[1:])
    return {}


def check(stdout: str, what: str) -> None:
    r = result(stdout)
    assert r, f"{what}: no result\n{stdout}"
    steps = [l.split() for l in stdout.splitlines() if l.startswith("STABLE ")]
    # Joins up to three members, then leaves down to one, each followed by a stable group.
    assert [(s[2], s[3]) for s in steps] == [("join", "1"), ("join", "2"), ("join", "3"), ("leave", "2"),
                                             ("leave", "1")], stdout
    assert int(r["distinct"]) == RECORDS, f"{what}: records lost in the chain\n{stdout}"
    assert int(r["read"]) >= RECORDS, stdout


@pytest.mark.broker_config(**{"group.initial.rebalance.delay.ms": 0})
@pytest.mark.parametrize("variant", ["eager", "cooperative", "consumer-uniform"])
def test_librdkafka_chain_survives_churn(broker, topic, variant):
    p = subprocess.run([sys.executable, str(CHAIN_PY), broker.bootstrap, variant, topic, *map(str, ARGS)],
                       capture_output=True, text=True, timeout=360)
    assert p.returncode == 0, f"{p.stdout}\n{p.stderr[-5000:]}"
    check(p.stdout, variant)


@pytest.mark.broker_config(**{"group.initial.rebalance.delay.ms": 0})
@pytest.mark.parametrize("variant", ["static", "consumer-range"])
def test_java_chain_survives_churn(broker, topic, tmp_path, variant):
    lines = harness.run_java_program(tmp_path, variant, "ChurnChain", broker.bootstrap, variant, topic,
                                     *map(str, ARGS), timeout=360, jvm_opts=("-Xmx512m",))
    check("\n".join(lines), variant)

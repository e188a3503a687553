"""kafka-transactions list --transactional-id-pattern (ListTransactions v2, KIP-1152).

The pattern must match the whole transactional id; one that does not compile is refused
with INVALID_REGULAR_EXPRESSION (Kafka 4.3.1 compiles it with RE2/J, so lookaround is refused
too).
"""

from __future__ import annotations

import harness
from harness import TRANSACTIONS_COMMAND


def listed(kafka_tool, broker, *args) -> tuple:
    res = kafka_tool(TRANSACTIONS_COMMAND, "--bootstrap-server", broker.bootstrap, "list", *args)
    ids = {line.split()[0] for line in res.out.splitlines()[1:] if line.strip()}
    return res, ids


def test_list_transactions_by_pattern(kafka_tool, broker, topic):
    a, b = f"{topic}-txa-1", f"{topic}-txb-1"
    for tid in (a, b):
        harness.producer(broker.bootstrap, **{"transactional.id": tid}).init_transactions(60)
    res, ids = listed(kafka_tool, broker)
    assert {a, b} <= ids, res.describe("list")
    res, ids = listed(kafka_tool, broker, "--transactional-id-pattern", f"{topic}-txa-.*")
    assert ids == {a}, res.describe("list txa")
    res, ids = listed(kafka_tool, broker, "--transactional-id-pattern", f"{topic}-tx[ab]-1")
    assert ids == {a, b}, res.describe("list tx[ab]")
    res, ids = listed(kafka_tool, broker, "--transactional-id-pattern", "txa")
    assert res.rc == 0 and ids == set(), res.describe("a pattern matching part of an id only")
    for bad in ("(", "(?=x)x.*"):
        res, _ = listed(kafka_tool, broker, "--transactional-id-pattern", bad)
        assert res.rc != 0 and "INVALID_REGULAR_EXPRESSION" in res.out + res.err, res.describe(bad)

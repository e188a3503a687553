"""The API table of docs/compatibility.md against the ApiVersions answers of both brokers.

The document's table lists, per API key, the version range a real Apache Kafka 4.3.1 broker
advertises and the one Sluice advertises. These tests ask the brokers (a raw ApiVersions v3
request, as clients send first) and fail on any key or range the table does not state, so
the document cannot drift from either broker.
"""

from __future__ import annotations

import re
import socket
import struct

import pytest

import harness

DOC = harness.REPO_ROOT / "docs" / "compatibility.md"
ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*(\w+)\s*\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|\s*(\w+)\s*\|")
STATUSES = {"same", "older", "partial", "no"}


def parse_range(text: str):
    """``"0-13"`` -> (0, 13), ``"4"`` -> (4, 4), ``"-"`` -> None."""
    text = text.strip()
    if text == "-":
        return None
    lo, _, hi = text.partition("-")
    return (int(lo), int(hi or lo))


def doc_table() -> dict:
    """key -> (name, kafka range, sluice range, status) from the document's table."""
    rows = {}
    for line in DOC.read_text().splitlines():
        m = ROW.match(line)
        if not m:
            continue
        key = int(m.group(1))
        assert key not in rows, f"API key {key} is listed twice in {DOC.name}"
        rows[key] = (m.group(2), parse_range(m.group(3)), parse_range(m.group(4)), m.group(5))
    assert len(rows) > 40, f"could not parse the API table of {DOC.name}"
    return rows


def _uvarint(b: bytes, i: int):
    shift = value = 0
    while True:
        x = b[i]
        i += 1
        value |= (x & 0x7F) << shift
        if not x & 0x80:
            return value, i
        shift += 7


def api_versions(port: int) -> dict:
    """key -> (min, max) from an ApiVersions v3 answer (flexible request, header v0 answer)."""
    client_id = b"api-versions-test"
    body = struct.pack(">hhi", 18, 3, 7) + struct.pack(">h", len(client_id)) + client_id + b"\x00"
    body += b"\x07sluice" + b"\x021" + b"\x00"  # software name and version, no tags
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(struct.pack(">i", len(body)) + body)

        def recv(n: int) -> bytes:
            out = b""
            while len(out) < n:
                chunk = s.recv(n - len(out))
                if not chunk:
                    raise EOFError("connection closed")
                out += chunk
            return out

        frame = recv(struct.unpack(">i", recv(4))[0])
    correlation_id, error = struct.unpack(">ih", frame[:6])
    assert correlation_id == 7 and error == 0, (correlation_id, error)
    count, i = _uvarint(frame, 6)
    out = {}
    for _ in range(count - 1):
        key, lo, hi = struct.unpack(">hhh", frame[i:i + 6])
        _, i = _uvarint(frame, i + 6)  # the entry's tagged fields (none)
        out[key] = (lo, hi)
    return out


def compare(advertised: dict, column: int, who: str) -> list:
    """Differences between a broker's answer and the document's column for it."""
    table = doc_table()
    problems = []
    for key, rng in sorted(advertised.items()):
        row = table.get(key)
        if row is None:
            problems.append(f"{who} advertises API key {key} {rng}, which {DOC.name} does not list")
        elif row[column] != rng:
            problems.append(f"{who} advertises {row[0]} ({key}) as {rng}, {DOC.name} says {row[column]}")
    for key, row in sorted(table.items()):
        if row[column] is not None and key not in advertised:
            problems.append(f"{DOC.name} says {who} advertises {row[0]} ({key}) {row[column]}; it does not")
    return problems


def test_the_document_is_consistent():
    for key, (name, kafka, sluice, status) in doc_table().items():
        assert status in STATUSES, f"{name} ({key}): unknown status {status!r}"
        assert kafka is not None, f"{name} ({key}): every listed API is one Kafka advertises"
        if status == "same":
            assert sluice == kafka, f"{name} ({key}) is marked same but the ranges differ"
        elif status == "no":
            assert sluice is None, f"{name} ({key}) is marked no but has a Sluice range"
        else:
            assert sluice is not None, f"{name} ({key}) is marked {status} without a Sluice range"
            if status == "older":
                assert sluice[1] < kafka[1], f"{name} ({key}) is marked older but is not"


def test_kafka_advertises_what_the_document_says(broker_factory):
    kafka = broker_factory(kind="kafka")
    problems = compare(api_versions(kafka.port), 1, "Kafka")
    assert not problems, "\n".join(problems)


@pytest.mark.sluice_only
def test_sluice_advertises_what_the_document_says(broker):
    problems = compare(api_versions(broker.port), 2, "Sluice")
    assert not problems, "\n".join(problems)

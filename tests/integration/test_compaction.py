"""Compacted topics: keyed records and tombstones from a real client (librdkafka); after the
broker's cleaner ran, every key's newest value is there at its offset, older values are gone,
tombstoned keys are gone after delete.retention.ms, and Kafka's DumpLogSegments reads the
cleaned segments."""

import re
import time

import pytest

from harness import DUMP_LOG_SEGMENTS, HarnessError, consume_partitions, create_topic, produce_all, producer

KEYS = 40
ROUNDS = 5
SEGMENT_MS = 1000
DELETE_RETENTION_MS = 2000

BATCH_RE = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .* isvalid: (\w+)")
RECORD_RE = re.compile(r"^\| offset: (\d+) ")


def read_all(bootstrap, topic):
    msgs = consume_partitions(bootstrap, topic, [0], timeout=30)
    return [(m.offset(), m.key().decode(), None if m.value() is None else m.value().decode()) for m in msgs]


@pytest.mark.broker_config(**{"log.cleaner.backoff.ms": "200"})
def test_compaction_keeps_the_newest_value_per_key(broker, topic, kafka_tool):
    create_topic(broker.bootstrap, topic, partitions=1, config={
        "cleanup.policy": "compact",
        "segment.ms": str(SEGMENT_MS),
        "min.cleanable.dirty.ratio": "0.01",
        "delete.retention.ms": str(DELETE_RETENTION_MS),
    })
    p = producer(broker.bootstrap, **{"linger.ms": 5, "acks": "all"})
    newest = {}
    written = set()  # offsets of every keyed record and tombstone
    for r in range(ROUNDS):
        recs = []
        for k in range(KEYS):
            tomb = r == ROUNDS - 1 and k % 4 == 0
            recs.append({"partition": 0, "key": b"key-%02d" % k,
                         "value": None if tomb else b"value-%d-%02d" % (r, k),
                         "headers": [("round", b"%d" % r)]})
        for rec, msg in zip(recs, produce_all(p, topic, recs)):
            newest[rec["key"].decode()] = (msg.offset(), None if rec["value"] is None else rec["value"].decode())
            written.add(msg.offset())
        # The next append rolls the segment (segment.ms), so this round's data gets cleanable.
        time.sleep(SEGMENT_MS / 1000 + 0.1)

    # Fillers roll segments (and make the log dirty again) until the cleaner has removed the
    # older values and, past delete.retention.ms, the tombstones.
    fillers = {}
    deadline = time.monotonic() + 40
    while True:
        msg = produce_all(p, topic, [{"partition": 0, "key": b"filler-%d" % len(fillers), "value": b"f"}])[0]
        fillers[msg.key().decode()] = msg.offset()
        got = read_all(broker.bootstrap, topic)
        keys = [k for _, k, _ in got if not k.startswith("filler")]
        if len(keys) == len(set(keys)) and all(v is not None for _, k, v in got if not k.startswith("filler")):
            break
        if time.monotonic() > deadline:
            raise HarnessError(f"not compacted within 40 s: {len(got)} records, {len(keys)} keyed ones")
        time.sleep(SEGMENT_MS / 1000 + 0.2)

    offsets = [o for o, _, _ in got]
    assert offsets == sorted(set(offsets)), "offsets increase"
    # The cleaner ran: every value an older round wrote (superseded by the last round) is gone.
    live = {o for o, v in newest.values() if v is not None}
    tombstones = {o for o, v in newest.values() if v is None}
    superseded = written - live - tombstones
    assert len(superseded) == (ROUNDS - 1) * KEYS, "the rounds before the last are superseded"
    left = superseded & set(offsets)
    assert not left, f"{len(left)} superseded records not cleaned, e.g. offsets {sorted(left)[:10]}"
    by_key = {k: (o, v) for o, k, v in got}
    for key, (offset, value) in newest.items():
        if value is None:
            assert key not in by_key, f"tombstoned {key} is gone after delete.retention.ms"
        else:
            assert by_key[key] == (offset, value), f"{key}: the newest value at its own offset"
    for key, offset in fillers.items():
        assert by_key[key][0] == offset
    # Nothing else is left: the live keys' newest records and the fillers (each key once).
    assert offsets == sorted(live | set(fillers.values())), "only the newest values and the fillers are left"

    broker.stop()
    pdir = broker.log_dir / f"{topic}-0"
    logs = sorted(pdir.glob("*.log"))
    dumped = []
    batches = 0
    for log in logs:
        res = kafka_tool(DUMP_LOG_SEGMENTS, "--files", str(log), "--deep-iteration", timeout=180)
        res.check("DumpLogSegments")
        for line in res.out.splitlines():
            b = BATCH_RE.match(line)
            if b:
                batches += 1
                assert b.group(4) == "true", line
            r = RECORD_RE.match(line)
            if r:
                dumped.append(int(r.group(1)))
    assert batches, f"no batch line in the dump of {[log.name for log in logs]}"
    assert dumped == offsets, "the dump tool reads the cleaned segments, every record at its offset"

"""On-disk format: after producing and a clean stop, Kafka's own DumpLogSegments tool
reads the broker's segment files (.log deep iteration, offset/time index verification)."""

import re
import time

from harness import DUMP_LOG_SEGMENTS, consume_partitions, create_topic, produce_all, producer

N_PLAIN = 1500
N_GZIP = 1500
N = N_PLAIN + N_GZIP
VALUE_SIZE = 1000

BATCH_RE = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .*?position: (\d+) "
                      r"(?:CreateTime|LogAppendTime): (-?\d+) size: (\d+) magic: (\d+) compresscodec: (\w+) "
                      r"crc: (-?\d+) isvalid: (\w+)")
RECORD_RE = re.compile(r"^\| offset: (\d+) (?:CreateTime|LogAppendTime): (-?\d+) keySize: (-?\d+) valueSize: (-?\d+)")


def dump(kafka_tool, *args):
    res = kafka_tool(DUMP_LOG_SEGMENTS, *args, timeout=180)
    res.check("DumpLogSegments " + " ".join(args))
    return res


def test_dump_log_segments_reads_broker_files(kafka_tool, broker, topic):
    create_topic(broker.bootstrap, topic, partitions=1, config={"segment.bytes": "1048576"})
    base_ts = (int(time.time() * 1000) - 600_000) // 1000 * 1000
    recs = [{"partition": 0, "key": b"k%05d" % i, "value": (b"%05d" % i) * (VALUE_SIZE // 5),
             "headers": [("i", b"%d" % i)], "timestamp": base_ts + i} for i in range(N)]
    produce_all(producer(broker.bootstrap, **{"linger.ms": 10, "acks": "all", "batch.size": 16384}), topic, recs[:N_PLAIN])
    produce_all(producer(broker.bootstrap, **{"linger.ms": 10, "acks": "all", "batch.size": 16384,
                                               "compression.type": "gzip"}),
                topic, recs[N_PLAIN:])
    # sanity: the broker serves them before we look at its files
    assert consume_partitions(broker.bootstrap, topic, [0], expected=N, keep=False) == N

    broker.stop()  # clean shutdown (raises unless the exit is clean)

    pdir = broker.log_dir / f"{topic}-0"
    logs = sorted(pdir.glob("*.log"))
    # ~1.5 MB uncompressed + the gzip part with segment.bytes=1 MiB: at least one roll
    assert len(logs) >= 2, f"segments should roll: {sorted(pdir.iterdir())}"

    offsets = []
    codecs = set()
    for log in logs:
        out = dump(kafka_tool, "--files", str(log), "--deep-iteration").out
        batches = [BATCH_RE.match(l) for l in out.splitlines() if l.startswith("baseOffset:")]
        assert batches and all(batches), out[:3000]
        assert int(batches[0].group(1)) == int(log.stem), "segment named after its first offset"
        seg_offsets = []
        expected_pos = 0
        for b in batches:
            base, last, count, pos, _, size, magic, codec, _, valid = b.groups()
            assert valid == "true", b.group(0)
            assert magic == "2", b.group(0)
            assert int(pos) == expected_pos, "batches are contiguous in the file"
            expected_pos += int(size)
            codecs.add(codec)
            assert int(last) - int(base) + 1 == int(count), b.group(0)
        assert expected_pos == log.stat().st_size, "no trailing garbage after the last batch"
        for line in out.splitlines():
            m = RECORD_RE.match(line)
            if m:
                off, ts, ksize, vsize = map(int, m.groups())
                seg_offsets.append(off)
                assert ts == base_ts + off, line
                assert ksize == 6 and vsize == VALUE_SIZE, line
        assert sum(int(b.group(3)) for b in batches) == len(seg_offsets)
        offsets.extend(seg_offsets)
    assert offsets == list(range(N)), "every record once, in order, across all segments"
    assert {"none", "gzip"} <= {c.lower() for c in codecs}, codecs

    for log in logs:
        index, timeindex = log.with_suffix(".index"), log.with_suffix(".timeindex")
        assert index.exists() and timeindex.exists(), sorted(pdir.iterdir())
        res = dump(kafka_tool, "--files", f"{index},{timeindex}", "--verify-index-only")
        text = res.out + res.err
        assert "mismatch" not in text.lower(), text[:3000]
        assert "out of order" not in text.lower(), text[:3000]
        res = dump(kafka_tool, "--files", f"{index},{timeindex}", "--index-sanity-check")
        for f in (index, timeindex):
            assert f"{f} passed sanity check" in res.out or f"{f} is empty." in res.out, res.out
    # small batches: a 1 MiB segment gets a sparse index entry every ~4 KiB
    entries = dump(kafka_tool, "--files", str(logs[0].with_suffix(".index"))).out
    assert len(re.findall(r"^offset: \d+ position: \d+", entries, re.M)) > 10, entries[:2000]


SNAPSHOT_ENTRY_RE = re.compile(r"producerId: (\d+) producerEpoch: (\d+) .*?lastSequence: (\d+) lastOffset: (\d+)")


def test_dump_log_segments_reads_producer_snapshots(kafka_tool, broker, topic):
    """Producer-state snapshots (`<offset>.snapshot`, written at every roll and at shutdown)
    are in Kafka's format: its dump tool reads them, and they name the idempotent producer
    that wrote the segments, with its last sequence and offset below the snapshot's offset."""
    create_topic(broker.bootstrap, topic, partitions=1, config={"segment.bytes": "1048576"})
    p = producer(broker.bootstrap, **{"enable.idempotence": True, "linger.ms": 10, "acks": "all"})
    produce_all(p, topic, [{"partition": 0, "value": b"v" * VALUE_SIZE} for _ in range(3000)])
    broker.stop()

    pdir = broker.log_dir / f"{topic}-0"
    first = dump(kafka_tool, "--files", str(sorted(pdir.glob("*.log"))[0])).out
    pids = set(re.findall(r"producerId: (\d+) producerEpoch: (\d+)", first))
    assert len(pids) == 1, first[:2000]
    snapshots = sorted(pdir.glob("*.snapshot"))
    assert snapshots, f"no producer snapshot in {sorted(f.name for f in pdir.iterdir())}"
    for snap in snapshots:
        out = dump(kafka_tool, "--files", str(snap)).out
        entries = [SNAPSHOT_ENTRY_RE.search(l) for l in out.splitlines() if "producerId:" in l]
        assert entries and all(entries), out[:2000]
        assert {(m.group(1), m.group(2)) for m in entries} == pids, out[:2000]
        for m in entries:
            assert int(m.group(4)) < int(snap.stem), f"{snap.name}: {m.group(0)}"
            assert int(m.group(3)) <= int(m.group(4)), m.group(0)

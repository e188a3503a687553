"""kafka-get-offsets (GetOffsetShell), kafka-log-dirs (LogDirsCommand) and
kafka-delete-records (DeleteRecordsCommand)."""

import json
import time

from harness import (DELETE_RECORDS, GET_OFFSETS, LOG_DIRS, consume_partitions, create_topic, parse_offsets,
                     produce_all, producer)


def get_offsets(kafka_tool, broker, topic, time_spec):
    res = kafka_tool(GET_OFFSETS, "--bootstrap-server", broker.bootstrap, "--topic", topic, "--time", str(time_spec))
    res.check(f"get offsets --time {time_spec}")
    return {p: o for (t, p), o in parse_offsets(res.out).items() if t == topic}


def produce_timestamped(broker, topic, per_partition, base_ts, step_ms):
    """Produce ``per_partition[p]`` records to each partition p with CreateTime base_ts + i*step_ms[p]."""
    p = producer(broker.bootstrap, acks="all", **{"linger.ms": 0})
    recs = []
    for part, n in per_partition.items():
        for i in range(n):
            recs.append({"partition": part, "key": f"k{part}-{i}".encode(), "value": f"v{part}-{i}".encode(),
                         "timestamp": base_ts + i * step_ms[part]})
    delivered = produce_all(p, topic, recs)
    # every partition's offsets are dense from 0, in send order
    for part, n in per_partition.items():
        assert [m.offset() for m in delivered if m.partition() == part] == list(range(n))
    return recs


def test_get_offsets_latest_earliest_and_by_timestamp(kafka_tool, broker, topic):
    create_topic(broker.bootstrap, topic, partitions=3)
    base = (int(time.time() * 1000) - 3_600_000) // 1000 * 1000
    produce_timestamped(broker, topic, {0: 10, 1: 5}, base, {0: 1000, 1: 2000})

    assert get_offsets(kafka_tool, broker, topic, -1) == {0: 10, 1: 5, 2: 0}
    assert get_offsets(kafka_tool, broker, topic, -2) == {0: 0, 1: 0, 2: 0}
    # first offset whose timestamp >= T: p0 has base+i*1000, p1 has base+i*2000
    by_ts = get_offsets(kafka_tool, broker, topic, base + 3500)
    assert by_ts.get(0) == 4 and by_ts.get(1) == 2, by_ts
    assert by_ts.get(2) is None, "an empty partition has no offset for a timestamp"
    assert get_offsets(kafka_tool, broker, topic, base)[0] == 0
    assert get_offsets(kafka_tool, broker, topic, base + 9000)[0] == 9
    # later than every record: no offset
    late = get_offsets(kafka_tool, broker, topic, base + 60_000)
    assert late.get(0) is None and late.get(1) is None, late


def test_get_offsets_max_timestamp(kafka_tool, broker, topic):
    """--time -3 (max-timestamp): offset of the record with the largest timestamp."""
    create_topic(broker.bootstrap, topic, partitions=1)
    base = (int(time.time() * 1000) - 3_600_000) // 1000 * 1000
    p = producer(broker.bootstrap, acks="all")
    stamps = [base + 5000, base + 1000, base + 9000, base + 2000, base + 3000]  # max at offset 2
    produce_all(p, topic, [{"partition": 0, "value": b"x%d" % i, "timestamp": ts} for i, ts in enumerate(stamps)])
    assert get_offsets(kafka_tool, broker, topic, -3) == {0: 2}


def test_log_dirs_describe(kafka_tool, broker, topic):
    create_topic(broker.bootstrap, topic, partitions=3)
    p = producer(broker.bootstrap, acks="all")
    produce_all(p, topic, [{"partition": i % 3, "value": b"x" * (100 + i)} for i in range(90)])

    res = kafka_tool(LOG_DIRS, "--bootstrap-server", broker.bootstrap, "--describe", "--topic-list", topic)
    res.check("kafka-log-dirs --describe")
    json_lines = [l for l in res.out.splitlines() if l.startswith("{")]
    assert len(json_lines) == 1, res.out
    doc = json.loads(json_lines[0])
    brokers = doc["brokers"]
    assert [b["broker"] for b in brokers] == [1], doc
    dirs = brokers[0]["logDirs"]
    assert [d["logDir"] for d in dirs] == [str(broker.log_dir)], doc
    assert dirs[0]["error"] is None, doc
    parts = {p["partition"]: p for p in dirs[0]["partitions"]}
    assert set(parts) == {f"{topic}-{i}" for i in range(3)}, doc
    for name, info in parts.items():
        assert info["size"] > 0, info
        assert info["isFuture"] is False, info
        # the reported size is the size of the partition's segment files
        on_disk = sum(f.stat().st_size for f in (broker.log_dir / name).glob("*.log"))
        assert info["size"] == on_disk, (name, info, on_disk)


def test_delete_records(kafka_tool, broker, topic, tmp_path):
    create_topic(broker.bootstrap, topic, partitions=2)
    base = (int(time.time() * 1000) - 60_000) // 1000 * 1000
    recs = produce_timestamped(broker, topic, {0: 10, 1: 4}, base, {0: 10, 1: 10})

    spec = tmp_path / "delete.json"
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 0, "offset": 6}]}))
    res = kafka_tool(DELETE_RECORDS, "--bootstrap-server", broker.bootstrap, "--offset-json-file", str(spec))
    res.check("kafka-delete-records")
    assert f"partition: {topic}-0\tlow_watermark: 6" in res.out, res.out

    assert get_offsets(kafka_tool, broker, topic, -2) == {0: 6, 1: 0}
    assert get_offsets(kafka_tool, broker, topic, -1) == {0: 10, 1: 4}

    msgs = consume_partitions(broker.bootstrap, topic, [0], expected=4)
    assert [m.offset() for m in msgs] == [6, 7, 8, 9]
    assert [m.value() for m in msgs] == [r["value"] for r in recs if r["partition"] == 0][6:]

    # deleting past the high watermark is refused
    spec.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 1, "offset": 100}]}))
    res = kafka_tool(DELETE_RECORDS, "--bootstrap-server", broker.bootstrap, "--offset-json-file", str(spec))
    assert res.rc != 0 or f"partition: {topic}-1\terror: " in res.out, res.describe("delete past HW")
    assert "low_watermark" not in res.out, res.describe("delete past HW")
    assert get_offsets(kafka_tool, broker, topic, -2) == {0: 6, 1: 0}

    # the new log start offset survives a restart
    broker.restart()
    assert get_offsets(kafka_tool, broker, topic, -2) == {0: 6, 1: 0}
    assert get_offsets(kafka_tool, broker, topic, -1) == {0: 10, 1: 4}

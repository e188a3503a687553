"""Page-cache drop-behind (sluice.log.cache.bytes): with a 16 MiB budget, ~200 MB produced to a
2-partition topic leaves at most the budget (plus the drop step) of its segment files in the
page cache, as util-linux fincore sees it, and every record still reads back intact from the
beginning, read from the volume on blocking threads (the broker's cold-read counters say so);
with -1 (Kafka's behaviour) what was written stays cached."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

import harness
from test_metrics import samples, value

pytestmark = pytest.mark.sluice_only

MIB = 1 << 20
BUDGET = 16 * MIB
MIN_PARTITION = 8 * MIB  # sluice.log.cache.min.partition.bytes default
MIN_STEP = 1 * MIB  # sluice_broker::CACHE_MIN_STEP_BYTES
PARTITIONS = 2
VALUE_LEN = 1024
SEGMENT_BYTES = 16 * MIB


def fincore_bin() -> str:
    path = shutil.which("fincore") or "/usr/bin/fincore"
    if not Path(path).exists():
        pytest.fail("fincore (util-linux) is needed: scripts/test installs it")
    return path


def resident(files: list) -> int:
    """Page-cache resident bytes of ``files`` (fincore RES)."""
    total = 0
    for f in files:
        try:
            out = subprocess.run(
                [fincore_bin(), "--bytes", "--noheadings", "--raw", "-o", "RES", str(f)],
                check=True, capture_output=True, text=True, timeout=30,
            ).stdout
        except subprocess.CalledProcessError:
            if not Path(f).exists():  # rolled away or deleted meanwhile
                continue
            raise
        total += int(out.strip() or 0)
    return total


def segment_files(log_dir: Path, topic: str) -> list:
    return sorted(Path(log_dir).glob(f"{topic}-*/*.log"))


def value_of(i: int) -> bytes:
    return (b"%010d|" % i) * (VALUE_LEN // 11) + b"#" * (VALUE_LEN % 11)


def produce(bootstrap: str, topic: str, n: int) -> None:
    p = harness.producer(bootstrap, **{
        "acks": "1", "linger.ms": 5, "batch.size": 1048576, "compression.type": "none",
        "queue.buffering.max.kbytes": 262144,
    })
    errors = []

    def on_delivery(err, _msg):
        if err is not None:
            errors.append(err)

    for i in range(n):
        while True:
            try:
                p.produce(topic, key=b"%d" % i, value=value_of(i), partition=i % PARTITIONS,
                          on_delivery=on_delivery)
                break
            except BufferError:
                p.poll(0.05)
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(120) == 0, "records still undelivered"
    assert not errors, errors[:3]


def consume_and_check(bootstrap: str, topic: str, n: int, timeout: float = 300) -> None:
    """Read both partitions from offset 0 to the end; every record in order with its value."""
    from confluent_kafka import KafkaError, TopicPartition

    c = harness.consumer(bootstrap, **{"fetch.max.bytes": 52428800, "max.partition.fetch.bytes": 8388608})
    try:
        c.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        next_off = {p: 0 for p in range(PARTITIONS)}
        ends = {p: len(range(p, n, PARTITIONS)) for p in range(PARTITIONS)}
        seen = 0
        deadline = time.monotonic() + timeout
        while next_off != ends:
            if time.monotonic() > deadline:
                raise harness.HarnessError(f"read {next_off} of {ends} within {timeout}s")
            for m in c.consume(num_messages=10000, timeout=1.0):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        continue
                    raise harness.HarnessError(f"consume error: {err}")
                part, off = m.partition(), m.offset()
                assert off == next_off[part], f"partition {part}: expected offset {next_off[part]}, got {off}"
                i = int(m.key())
                assert i == off * PARTITIONS + part, f"partition {part} offset {off} holds record {i}"
                assert m.value() == value_of(i), f"record {i} changed"
                next_off[part] = off + 1
                seen += 1
        assert seen == n
    finally:
        c.close()


@pytest.mark.parametrize(
    "cache_bytes, records",
    [(BUDGET, 200_000), (-1, 100_000)],
    ids=["budget-16MiB", "disabled"],
)
def test_page_cache_drop_behind(broker_factory, topic, cache_bytes, records):
    fincore_bin()
    port = harness.free_port()
    broker = broker_factory(overrides={"sluice.log.cache.bytes": cache_bytes,
                                       "sluice.metrics.listener": f"127.0.0.1:{port}"})
    harness.create_topic(broker.bootstrap, topic, partitions=PARTITIONS,
                         config={"segment.bytes": str(SEGMENT_BYTES)})
    produce(broker.bootstrap, topic, records)
    written = records * VALUE_LEN

    files = segment_files(broker.log_dir, topic)
    assert len(files) > 2 * PARTITIONS, f"expected several segments per partition, got {files}"
    if cache_bytes < 0:
        time.sleep(2)
        res = resident(segment_files(broker.log_dir, topic))
        # Nothing dropped: what was just written is still cached (the assertion below for the
        # budget is not vacuous).
        print(f"drop-behind off: {res} of {written} bytes resident")
        assert res > written // 2, f"only {res} of ~{written} bytes resident without drop-behind"
    else:
        open_logs = sum(1 for d in Path(broker.log_dir).iterdir() if d.is_dir() and d.name.rsplit("-", 1)[-1].isdigit())
        share = max(BUDGET // max(open_logs, 1), MIN_PARTITION)
        step = max(share // 4, MIN_STEP)
        # Each partition holds at most share + step after the last pass, plus the folio its
        # drop point cuts through (the kernel keeps it whole; up to 2 MiB) and a partial last
        # page per file.
        bound = PARTITIONS * (share + step + 2 * MIB) + len(files) * 4096
        time.sleep(2)
        deadline = time.monotonic() + 10
        res = resident(segment_files(broker.log_dir, topic))
        while res > bound and time.monotonic() < deadline:
            time.sleep(0.5)
            res = resident(segment_files(broker.log_dir, topic))
        assert res <= bound, f"{res} bytes of {topic} resident, more than {bound} (budget {BUDGET})"
        print(f"budget {BUDGET}: {res} bytes resident (bound {bound}) after writing {written}")
        # The tail is kept.
        assert res >= PARTITIONS * share // 2, f"only {res} bytes resident; the tail should be kept"

    consume_and_check(broker.bootstrap, topic, records)
    if cache_bytes >= 0:
        # What was dropped was read from the volume off the runtime threads: fetches read
        # again on a blocking thread, their regions read there too.
        ss = samples(port)
        cold = {n: value(ss, n) for n in ("sluice_fetch_cold_requests_total",
                                          "sluice_fetch_cold_partition_reads_total",
                                          "sluice_fetch_cold_bytes_total")}
        print(f"cold reads: {cold}")
        assert cold["sluice_fetch_cold_requests_total"] > 0, cold
        assert cold["sluice_fetch_cold_partition_reads_total"] >= cold["sluice_fetch_cold_requests_total"], cold
        # Not all of what was dropped: a cold read's readahead brings in what the next
        # fetches read.
        assert cold["sluice_fetch_cold_bytes_total"] > 0, cold
        # What the consumer read back is advised out again by the next passes: the budget
        # still holds after the whole log was read from the beginning.
        deadline = time.monotonic() + 10
        res = resident(segment_files(broker.log_dir, topic))
        while res > bound and time.monotonic() < deadline:
            time.sleep(0.5)
            res = resident(segment_files(broker.log_dir, topic))
        read_back = value(samples(port), "sluice_page_cache_read_back_dropped_bytes_total")
        print(f"after reading it all back: {res} bytes resident (bound {bound}), {read_back} read-back bytes dropped")
        assert read_back > 0
        assert res <= bound, f"{res} bytes of {topic} resident after reading it back, more than {bound}"

"""A failed fsync takes a partition's log offline until it is re-opened from what storage holds
(docs/reliability.md). The broker re-opens it by itself, without a restart: producers see
retriable errors for a moment, then every record is acknowledged once, and what a consumer
reads is exactly what was acknowledged, at the offsets acknowledged."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

import harness

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for the faultfs package

from faultfs import mount_faultfs  # noqa: E402

pytestmark = pytest.mark.skipif(harness.TARGET != "sluice", reason="Sluice's behaviour after a failed fsync")


def test_a_failed_fsync_is_recovered_in_place(broker_factory, tmp_path, topic):
    if not os.path.exists("/dev/fuse"):
        pytest.skip("FUSE unavailable: no /dev/fuse")
    mount = mount_faultfs(tmp_path / "backing", tmp_path / "mnt", log_path=tmp_path / "faultfs.log")
    broker = None
    try:
        broker = broker_factory(log_dir=tmp_path / "mnt" / "data")
        harness.create_topic(broker.bootstrap, topic, partitions=1, config={"flush.messages": "1"})
        acked: dict = {}
        errors: list = []

        def on_delivery(err, msg):
            if err is None:
                acked[msg.value().decode()] = msg.offset()
            else:
                errors.append(str(err))

        p = harness.producer(broker.bootstrap, **{"acks": "all", "enable.idempotence": True,
                                                  "linger.ms": 0, "message.timeout.ms": 60000})

        def send(values):
            for v in values:
                p.produce(topic, value=v.encode(), partition=0, on_delivery=on_delivery)
                p.poll(0)
            assert p.flush(90) == 0, "records still unacknowledged"

        send([f"before-{i}" for i in range(50)])
        # The next fsync of the partition's files fails (faultfs drops what it would have
        # synced, as a kernel may): the log is failed from then on.
        mount.fail_next_fsync(match=f"{topic}-0/")
        send([f"after-{i}" for i in range(50)])

        assert not errors, errors[:5]
        assert len(acked) == 100
        text = broker.log_text()
        assert "log refuses writes until it is re-opened" in text, "the fsync failure was not seen"
        assert "re-opened a failed log" in text, "the log was not re-opened in place"
        assert broker.running, "the broker exited"

        # Read back: every acknowledged record once, at its acknowledged offset.
        got: dict = {}
        for m in harness.consume_partitions(broker.bootstrap, topic, [0], expected=len(acked)):
            value = m.value().decode()
            assert value not in got, f"{value} read twice"
            got[value] = m.offset()
        assert got == acked
    finally:
        if broker is not None:
            broker.kill()
        mount.stop()

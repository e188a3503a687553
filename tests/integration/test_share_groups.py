"""Share groups (KIP-932) with Kafka's Java KafkaShareConsumer and tools: records of one
partition shared among consumers, acquisition locks, redelivery, the delivery limit, RENEW,
group configs, and the state kept across a restart. Runs against Sluice and Apache Kafka."""

import time

import harness
from harness import CONFIG_COMMAND, JavaProgram, create_topic, produce_all, producer

SHARE_GROUPS_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"
LOCK_MS = 15000  # the smallest lock a group may set (group.share.min.record.lock.duration.ms)


def set_group_config(kafka_tool, bootstrap, group, *configs):
    kafka_tool(CONFIG_COMMAND, "--bootstrap-server", bootstrap, "--entity-type", "groups",
               "--entity-name", group, "--alter", "--add-config", ",".join(configs),
               timeout=120).check("kafka-configs --alter (group)")


def recs(prog):
    """(offset, delivery count, value) of every record `prog` printed."""
    return [(int(w[2]), int(w[3]), w[4]) for w in prog.words("REC")]


def start(tmp_path, name, bootstrap, group, topic, mode, *extra):
    return JavaProgram(tmp_path, name, "ShareConsume", bootstrap, group, topic, mode, *extra)


def stop(*progs):
    for p in progs:
        p.kill()


def wait_until(pred, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_consumers_share_one_partition_and_locks_expire(broker_factory, kafka_tool, topic, tmp_path):
    b = broker_factory()
    create_topic(b.bootstrap, topic, partitions=1)
    group = f"{topic}-share"
    set_group_config(kafka_tool, b.bootstrap, group, "share.auto.offset.reset=earliest",
                     f"share.record.lock.duration.ms={LOCK_MS}")
    p = producer(b.bootstrap, **{"linger.ms": 0})
    n, batch = 300, 10

    def produce_batch(first):
        produce_all(p, topic, [{"partition": 0, "value": f"v{i}".encode()} for i in range(first, first + batch)])

    # One consumer takes the first batch and holds it without acknowledging, then dies.
    produce_batch(0)
    holder = start(tmp_path, "holder", b.bootstrap, group, topic, "hold")
    try:
        held = holder.wait_for(lambda ls: [l for l in ls if l.startswith("REC")], 60, "the holder's records")
    finally:
        holder.kill()
    held = {int(l.split()[2]) for l in held}
    killed_at = time.monotonic()

    # Three consumers share the partition: each record goes to one of them; together they
    # get all of it, the holder's records again once their locks expired.
    # Each takes 300 ms over a poll's records, so the others take the batches produced meanwhile.
    consumers = [start(tmp_path, f"c{i}", b.bootstrap, group, topic, "accept", "300") for i in range(3)]
    try:
        for c in consumers:
            c.wait_for(lambda ls: "READY" in ls, 60, "the consumer's first poll")
        for first in range(batch, n, batch):  # one batch at a time, as the consumers poll
            produce_batch(first)
            time.sleep(0.05)
        def all_seen():
            got = [r for c in consumers for r in recs(c)]
            return got if len({o for o, _, _ in got}) >= n else None
        got = wait_until(all_seen, 90, "every record delivered")
        offsets = [o for o, _, _ in got]
        assert sorted(set(offsets)) == list(range(n))
        per = [{o for o, _, _ in recs(c)} for c in consumers]
        # Disjoint: no record was delivered to two consumers (nothing expired in between:
        # each commits at once).
        assert len(offsets) == len(set(offsets)), "a record was delivered twice"
        assert sum(1 for s in per if s) >= 2, f"the records were not shared: {[len(s) for s in per]}"
        redelivered = {o: d for o, d, _ in got if o in held}
        assert redelivered and all(d == 2 for d in redelivered.values()), redelivered
        assert all(d == 1 for o, d, _ in got if o not in held)
        if harness.TARGET == "sluice":
            # Sluice releases them when their lock expires; Kafka 4.3 already when the dead
            # consumer's connection closes (docs/share-groups.md).
            assert time.monotonic() - killed_at >= LOCK_MS / 1000 - 1, "held records came back before their lock expired"
    finally:
        stop(*consumers)


def test_reject_release_and_the_delivery_limit(broker_factory, kafka_tool, topic, tmp_path):
    b = broker_factory()
    create_topic(b.bootstrap, topic, partitions=1)
    p = producer(b.bootstrap)
    rejected_group, released_group = f"{topic}-rej", f"{topic}-rel"
    for g in (rejected_group, released_group):
        set_group_config(kafka_tool, b.bootstrap, g, "share.auto.offset.reset=earliest")
    produce_all(p, topic, [{"partition": 0, "value": f"v{i}".encode()} for i in range(10)])

    # REJECT archives at once: delivered once, never again.
    rej = start(tmp_path, "rej", b.bootstrap, rejected_group, topic, "reject")
    # RELEASE makes a record available again until the delivery limit (5) archives it.
    rel = start(tmp_path, "rel", b.bootstrap, released_group, topic, "release")
    try:
        wait_until(lambda: len(recs(rel)) >= 50, 90, "five deliveries of every record")
        time.sleep(3)  # nothing more comes
        got = recs(rel)
        assert len(got) == 50, got
        assert sorted({d for _, d, _ in got}) == [1, 2, 3, 4, 5]
        got = recs(rej)
        assert sorted(o for o, _, _ in got) == list(range(10)), got
    finally:
        stop(rej, rel)
    # A new record after them is delivered: the start moved past the archived ones.
    produce_all(p, topic, [{"partition": 0, "value": b"after"}])
    again = start(tmp_path, "again", b.bootstrap, released_group, topic, "accept")
    try:
        got = again.wait_for(lambda ls: [l for l in ls if l.startswith("REC")], 60, "the new record")
        time.sleep(2)
        assert [(o, v) for o, _, v in recs(again)] == [(10, "after")]
    finally:
        stop(again)


def test_renew_keeps_a_slow_record(broker_factory, kafka_tool, topic, tmp_path):
    b = broker_factory()
    create_topic(b.bootstrap, topic, partitions=1)
    group = f"{topic}-renew"
    set_group_config(kafka_tool, b.bootstrap, group, "share.auto.offset.reset=earliest",
                     f"share.record.lock.duration.ms={LOCK_MS}")
    produce_all(producer(b.bootstrap), topic, [{"partition": 0, "value": b"slow"}])
    slow = start(tmp_path, "slow", b.bootstrap, group, topic, "renew", str(LOCK_MS + 8000))
    try:
        slow.wait_for(lambda ls: any(l.startswith("REC") for l in ls), 60, "the slow record")
        other = start(tmp_path, "other", b.bootstrap, group, topic, "accept")
        try:
            # Accepted 23 s after it was got, past its first lock's end (15 s): renewed, it was
            # not delivered again, to the other consumer or to itself.
            slow.wait_for(lambda ls: "ACKED" in ls, 60, "the final accept")
            assert sum(l == "RENEWED" for l in slow.lines()) >= 5
            time.sleep(3)
            assert recs(other) == []
            assert [(o, d) for o, d, _ in recs(slow)] == [(0, 1)]
        finally:
            stop(other)
    finally:
        stop(slow)


def test_share_state_survives_a_restart(broker_factory, kafka_tool, topic, tmp_path):
    if harness.TARGET != "sluice":
        import pytest
        pytest.skip("restarts a Sluice broker")
    b = broker_factory()
    create_topic(b.bootstrap, topic, partitions=1)
    group = f"{topic}-durable"
    set_group_config(kafka_tool, b.bootstrap, group, "share.auto.offset.reset=earliest")
    p = producer(b.bootstrap)
    produce_all(p, topic, [{"partition": 0, "value": f"v{i}".encode()} for i in range(20)])
    c = start(tmp_path, "first", b.bootstrap, group, topic, "accept")
    try:
        c.wait_for(lambda ls: sum(l.startswith("REC") for l in ls) >= 20 and "ACKED" in ls, 60,
                   "every record accepted")
    finally:
        c.kill()
    b.kill()
    b.start()
    produce_all(producer(b.bootstrap), topic, [{"partition": 0, "value": b"new"}])
    c = start(tmp_path, "second", b.bootstrap, group, topic, "accept")
    try:
        c.wait_for(lambda ls: any(l.startswith("REC") for l in ls), 60, "the new record")
        time.sleep(2)
        assert [(o, v) for o, _, v in recs(c)] == [(20, "new")], "accepted records came back"
    finally:
        c.kill()
    res = kafka_tool(SHARE_GROUPS_COMMAND, "--bootstrap-server", b.bootstrap, "--list",
                     timeout=120).check("kafka-share-groups --list")
    assert group in res.out.split()

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


def java_hash(s: str) -> int:
    h = 0
    units = [int.from_bytes(s.encode("utf-16-be")[i:i + 2], "big") for i in range(0, len(s.encode("utf-16-be")), 2)]
    for u in units:
        h = (h * 31 + u) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def state_owners(bootstrap, topic, group):
    """Partition of `topic` to (its owner, the owner of the __share_group_state partition
    holding its share state for `group`: Kafka's placement, Java's hash of
    "group:topicId:partition" over that topic's partitions)."""
    from confluent_kafka import TopicCollection
    a = harness.admin(bootstrap)
    tid = str(a.describe_topics(TopicCollection([topic]))[topic].result().topic_id)
    md = a.list_topics(timeout=10)
    state = md.topics["__share_group_state"].partitions
    owners = {}
    for p, m in md.topics[topic].partitions.items():
        h = java_hash(f"{group}:{tid}:{p}")
        h = 0 if h == -(1 << 31) else abs(h)
        owners[p] = (m.leader, state[h % len(state)].leader)
    return owners


def state_placed_apart(bootstrap, topic, group):
    """The partitions of `topic` whose share state (for `group`) lives in a partition of
    __share_group_state owned by another broker than the partition itself."""
    return [(p, leader, owner) for p, (leader, owner) in state_owners(bootstrap, topic, group).items()
            if owner != leader]


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

    # One consumer takes the first batch and dies holding it: its records come back as soon
    # as its connection closed (as Kafka releases them), to a second one, which holds them,
    # alive, without acknowledging. (In this order: a holder's client may fetch once more
    # after its first records, and take what is produced meanwhile; the dead one's records
    # are all there is to take when the second starts.)
    produce_batch(0)
    dead = start(tmp_path, "dead-holder", b.bootstrap, group, topic, "hold")
    try:
        lost = dead.wait_for(lambda ls: [l for l in ls if l.startswith("REC")], 60, "the dead holder's records")
    finally:
        dead.kill()
    killed_at = time.monotonic()
    lost = {int(l.split()[2]) for l in lost}
    assert lost == set(range(batch)), lost
    alive = start(tmp_path, "alive-holder", b.bootstrap, group, topic, "hold")
    taken = alive.wait_for(lambda ls: [l for l in ls if l.startswith("REC")], 60, "the live holder's records")
    held_at = time.monotonic()
    assert held_at - killed_at < LOCK_MS / 1000 - 1, "the dead consumer's records waited for their lock"
    held = {int(l.split()[2]): int(l.split()[3]) for l in taken}
    assert held == {o: 2 for o in lost}, held

    # Three consumers share the partition: each record goes to one of them; together they
    # get all of it, the live holder's once their locks expired.
    # Each takes 300 ms over a poll's records, so the others take the batches produced meanwhile.
    consumers = [start(tmp_path, f"c{i}", b.bootstrap, group, topic, "accept", "300") for i in range(3)]
    try:
        def seen(offsets):
            return {o for c in consumers for o, _, _ in recs(c)} & offsets
        for c in consumers:
            c.wait_for(lambda ls: "READY" in ls, 60, "the consumer's first poll")
        # One batch at a time, over some seconds: Kafka gives a member its partitions at a
        # heartbeat after it joined, so the last to join takes a few seconds to fetch.
        for first in range(batch, n, batch):
            produce_batch(first)
            time.sleep(0.25)
        if time.monotonic() - held_at < LOCK_MS / 1000 - 1:
            assert not seen(lost), "the live holder's records came back before their lock expired"
        def all_seen():
            got = [r for c in consumers for r in recs(c)]
            return got if len({o for o, _, _ in got}) >= n else None
        got = wait_until(all_seen, 90, "every record delivered")
        assert time.monotonic() - held_at >= LOCK_MS / 1000 - 1
        offsets = [o for o, _, _ in got]
        assert sorted(set(offsets)) == list(range(n))
        per = [{o for o, _, _ in recs(c)} for c in consumers]
        # Disjoint: no record was delivered to two consumers (nothing expired in between:
        # each commits at once).
        assert len(offsets) == len(set(offsets)), "a record was delivered twice"
        assert sum(1 for s in per if s) >= 2, f"the records were not shared: {[len(s) for s in per]}"
        again = {o: d for o, d, _ in got if o in lost}
        assert again == {o: 3 for o in lost}, again
        # The live holder's client may have fetched once more after its first records: what
        # it took then came back at its lock's expiry, a second delivery. Nothing else did.
        prefetched = sorted(o for o, d, _ in got if o not in lost and d != 1)
        assert all(d == 2 for o, d, _ in got if o in prefetched), got
        assert len(prefetched) <= 50, prefetched
    finally:
        stop(alive, *consumers)


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
    # kafka-share-groups --describe: nothing left to deliver (lag 0), the start past the
    # archived records (Sluice moves it past the accepted last one too, to 11; Kafka 4.3
    # reports 10, with that record acknowledged).
    res = kafka_tool(SHARE_GROUPS_COMMAND, "--bootstrap-server", b.bootstrap, "--describe",
                     "--group", released_group, timeout=120).check("kafka-share-groups --describe")
    rows = [l.split() for l in res.out.splitlines() if l.split()[:2] == [released_group, topic]]
    assert len(rows) == 1 and rows[0][2] == "0" and rows[0][3] in ("10", "11") and rows[0][4] == "0", res.out


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


def test_accepted_records_survive_a_host_crash(broker_factory, kafka_tool, topic, tmp_path):
    """Records a share consumer accepted (its commit answered) are not delivered again after
    the host crashes, losing whatever was not fsynced (faultfs): each acknowledgement's state
    is fsynced in __share_group_state before it is answered."""
    if harness.TARGET != "sluice":
        import pytest
        pytest.skip("crashes a Sluice broker's host")
    mount = harness.crash_fs(tmp_path, metadata="dirsync")
    try:
        b = broker_factory(log_dir=tmp_path / "mnt" / "data")
        # The records themselves are fsynced: what is checked is the share state.
        create_topic(b.bootstrap, topic, partitions=1, config={"flush.messages": "1"})
        group = f"{topic}-crash"
        set_group_config(kafka_tool, b.bootstrap, group, "share.auto.offset.reset=earliest")
        produce_all(producer(b.bootstrap), topic, [{"partition": 0, "value": f"v{i}".encode()} for i in range(20)])
        c = start(tmp_path, "before", b.bootstrap, group, topic, "accept")
        try:
            c.wait_for(lambda ls: len({o for o, _, _ in recs(c)}) >= 20 and "ACKED" in ls, 60, "every record accepted")
        finally:
            c.terminate()
        b.kill()
        dropped = sum(f["pending"] - f["kept"] for f in mount.crash()["files"])
        b.start()
        produce_all(producer(b.bootstrap), topic, [{"partition": 0, "value": b"new"}])
        c = start(tmp_path, "after", b.bootstrap, group, topic, "accept")
        try:
            c.wait_for(lambda ls: any(l.startswith("REC") for l in ls), 60, "a record after the crash")
            time.sleep(3)  # anything more would come now
            got = [(o, v) for o, _, v in recs(c)]
        finally:
            c.kill()
        assert got == [(20, "new")], f"accepted records delivered again after the host crash " \
                                     f"({dropped} unsynced bytes dropped): {got[:10]}"
        b.kill()
    finally:
        mount.stop()


def share_tool(kafka_tool, bootstrap, *args, check=True):
    res = kafka_tool(SHARE_GROUPS_COMMAND, "--bootstrap-server", bootstrap, *args, timeout=120)
    return res.check(f"kafka-share-groups {' '.join(args)}") if check else res


def start_offsets(kafka_tool, bootstrap, group, topic, lag=False):
    """Partition to START-OFFSET (`lag`: to LAG) as `kafka-share-groups --describe --offsets`
    prints it."""
    out = share_tool(kafka_tool, bootstrap, "--describe", "--offsets", "--group", group).out
    col = 4 if lag else 3
    return {int(w[2]): w[col] for w in (l.split() for l in out.splitlines()) if w[:2] == [group, topic]}


def test_offsets_reset_and_deleted_through_the_tool(broker_factory, kafka_tool, topic, tmp_path):
    """kafka-share-groups --reset-offsets (earliest, latest) and --delete-offsets take effect
    on an empty group: the next consumer starts where they say; a group with a member is
    refused; --delete removes the group."""
    b = broker_factory()
    create_topic(b.bootstrap, topic, partitions=1)
    group = f"{topic}-reset"
    set_group_config(kafka_tool, b.bootstrap, group, "share.auto.offset.reset=earliest")
    p = producer(b.bootstrap)
    produce_all(p, topic, [{"partition": 0, "value": f"v{i}".encode()} for i in range(20)])

    def consume(name, expected):
        """A consumer that accepts records until it has `expected` (offset, value) pairs, then
        leaves the group (SIGTERM closes it); what it got."""
        c = start(tmp_path, name, b.bootstrap, group, topic, "accept")
        try:
            c.wait_for(lambda ls: len({o for o, _, _ in recs(c)}) >= len(expected) and "ACKED" in ls, 60,
                       f"{name}: {len(expected)} records")
            time.sleep(2)  # anything more would come now
        finally:
            c.terminate()
        got = sorted({(o, v) for o, _, v in recs(c)})
        assert got == sorted(expected), (name, got)
        return c

    everything = [(i, f"v{i}") for i in range(20)]
    consume("first", everything)
    # Everything done with (Kafka moves the start offset lazily: only the lag is certain).
    assert start_offsets(kafka_tool, b.bootstrap, group, topic, lag=True) == {0: "0"}

    # Back to the earliest offset: every record is delivered again, as a first delivery.
    share_tool(kafka_tool, b.bootstrap, "--reset-offsets", "--group", group, "--topic", topic,
               "--to-earliest", "--execute")
    assert start_offsets(kafka_tool, b.bootstrap, group, topic) == {0: "0"}
    assert start_offsets(kafka_tool, b.bootstrap, group, topic, lag=True) == {0: "20"}
    again = consume("after-earliest", everything)
    assert {d for _, d, _ in recs(again)} == {1}, recs(again)

    # A group with a member is refused, and nothing changes.
    holder = start(tmp_path, "member", b.bootstrap, group, topic, "accept")
    try:
        holder.wait_for(lambda ls: "READY" in ls, 60, "the member's first poll")
        res = share_tool(kafka_tool, b.bootstrap, "--reset-offsets", "--group", group, "--topic", topic,
                         "--to-earliest", "--execute", check=False)
        assert res.rc != 0 and "is not empty" in res.out + res.err, (res.rc, res.out, res.err)
    finally:
        holder.terminate()
    assert start_offsets(kafka_tool, b.bootstrap, group, topic, lag=True) == {0: "0"}

    # To the latest offset: only what is produced after it is delivered.
    share_tool(kafka_tool, b.bootstrap, "--reset-offsets", "--group", group, "--topic", topic,
               "--to-latest", "--execute")
    produce_all(p, topic, [{"partition": 0, "value": b"new"}])
    consume("after-latest", [(20, "new")])

    # Deleted: the group starts again by its share.auto.offset.reset (earliest).
    res = share_tool(kafka_tool, b.bootstrap, "--delete-offsets", "--group", group, "--topic", topic)
    assert "Successful" in res.out, res.out
    assert start_offsets(kafka_tool, b.bootstrap, group, topic) == {}
    consume("after-delete", everything + [(20, "new")])

    # And the group itself, once empty.
    res = share_tool(kafka_tool, b.bootstrap, "--delete", "--group", group)
    assert "was successful" in res.out, res.out
    listed = share_tool(kafka_tool, b.bootstrap, "--list").out.split()
    assert group not in listed, listed


def test_cluster_keeps_share_state_across_an_owner_kill_and_a_planned_move(broker_factory, kafka_tool, etcd,
                                                                            topic, tmp_path):
    """Three brokers on one shared directory: share partitions are led by their topic
    partition's owner, their state written to whichever broker owns its __share_group_state
    partition (WriteShareGroupState between brokers). What was accepted is not delivered again
    after the owner of partitions is SIGKILLed, nor after another hands its partitions over
    (SIGTERM); records a dead consumer held come back."""
    if harness.TARGET != "sluice":
        import pytest
        pytest.skip("a Sluice cluster")
    from cluster_support import (bootstrap_of, cluster_overrides, coordinator_of, leaders, live_brokers,
                                 wait_all_led)
    from test_metrics import samples
    shared = tmp_path / "shared"
    shared.mkdir()
    metrics = {node: harness.free_port() for node in (1, 2, 3)}
    brokers = [broker_factory(overrides=cluster_overrides(etcd, node, shared, "/sluice-test", **{
        "sluice.cluster.death.probe.enable": "true",
        "sluice.metrics.listener": f"127.0.0.1:{metrics[node]}"}),
        log_dir=shared, kind="sluice", name=f"node{node}") for node in (1, 2, 3)]
    bootstrap = bootstrap_of(brokers)
    harness.wait_until(lambda: len(live_brokers(bootstrap)) == 3, 30, "three brokers")
    partitions = 6
    create_topic(bootstrap, topic, partitions=partitions)
    wait_all_led(bootstrap, topic, partitions)
    group = f"{topic}-cluster"
    set_group_config(kafka_tool, bootstrap, group, "share.auto.offset.reset=earliest")
    p = producer(bootstrap, **{"linger.ms": 0})

    def produce(tag, n):
        produce_all(p, topic, [{"partition": i % partitions, "value": f"{tag}{i}".encode()} for i in range(n)])

    def consume_exactly(name, expected, timeout=90):
        c = start(tmp_path, name, bootstrap_of(brokers), group, topic, "accept")
        try:
            wait_until(lambda: len({v for _, _, v in recs(c)}) >= len(expected) and "ACKED" in c.lines(),
                       timeout, f"{name}: {len(expected)} records")
            time.sleep(3)  # anything more would come now
            got = [v for _, _, v in recs(c)]
            assert sorted(got) == sorted(expected), (name, sorted(set(got) ^ set(expected))[:10])
        finally:
            c.terminate()  # leaves the group: an empty group's offsets can be reset

    produce("a", 120)
    consume_exactly("first", [f"a{i}" for i in range(120)])
    # Where each share partition's state lives (Kafka's placement: Java's hash of
    # "group:topicId:partition" over __share_group_state's partitions) against who owns the
    # topic partition: where they differ, the state was written between brokers.
    remote = sum(v for node in metrics for name, labels, v in samples(metrics[node])
                 if name == "kafka_network_requestmetrics_requests_total"
                 and labels.get("request") == "WriteShareGroupState")
    split = state_placed_apart(bootstrap, topic, group)
    assert (remote > 0) == bool(split), (remote, split)

    # Reset to the earliest offsets at the group's coordinator, which resets each state where
    # it lives (InitializeShareGroupState between brokers); the partitions' owners load it
    # again and everything comes back.
    def requests(api):
        return sum(v for node in metrics for name, labels, v in samples(metrics[node])
                   if name == "kafka_network_requestmetrics_requests_total" and labels.get("request") == api)
    share_tool(kafka_tool, bootstrap, "--reset-offsets", "--group", group, "--topic", topic,
               "--to-earliest", "--execute")
    consume_exactly("after-reset", [f"a{i}" for i in range(120)])
    coordinator = coordinator_of(bootstrap, group)
    elsewhere = [p for p, (_, owner) in state_owners(bootstrap, topic, group).items() if owner != coordinator]
    assert (requests("InitializeShareGroupState") > 0) == bool(elsewhere), elsewhere

    # The owner of some partitions dies: their share state is where it was written.
    victim = leaders(bootstrap, topic)[0]
    brokers[victim - 1].kill()
    wait_all_led(bootstrap_of(brokers), topic, partitions, exclude=(victim,), timeout=60)
    produce("b", 60)
    consume_exactly("after-kill", [f"b{i}" for i in range(60)])

    # A consumer holds records and dies; another broker hands its partitions over.
    produce("c", 60)
    holder = start(tmp_path, "holder", bootstrap_of(brokers), group, topic, "hold")
    try:
        holder.wait_for(lambda ls: any(l.startswith("REC") for l in ls), 60, "the holder's records")
    finally:
        holder.kill()
    held = {w[4] for w in holder.words("REC")}
    mover = next(b for b in brokers if b.running)
    mover.stop()
    wait_all_led(bootstrap_of(brokers), topic, partitions, exclude=(victim, int(mover.name[-1])), timeout=60)
    # The held records of partitions that moved come back at once (the delivery attempt ended
    # with the move), the others after their lock: every record is delivered, none twice to
    # the last consumer, none accepted before.
    consume_exactly("after-move", [f"c{i}" for i in range(60)], timeout=120)
    assert held, "the holder got nothing"
    # kafka-share-groups --describe at the group's coordinator reads every partition's
    # state where it lives (ReadShareGroupStateSummary between brokers): 240 records done with.
    res = kafka_tool(SHARE_GROUPS_COMMAND, "--bootstrap-server", bootstrap_of(brokers), "--describe",
                     "--group", group, timeout=120).check("kafka-share-groups --describe")
    rows = {int(l.split()[2]): int(l.split()[3]) for l in res.out.splitlines() if l.split()[:2] == [group, topic]}
    assert sorted(rows) == list(range(partitions)), res.out
    assert sum(rows.values()) == 240, res.out

    # Deleted with its state. (The tool lists the groups of every broker in Metadata, which
    # names a departed broker for broker.session.timeout.ms, as Kafka does.)
    harness.wait_until(lambda: len(live_brokers(bootstrap_of(brokers))) == 1, 30, "one broker listed")
    res = share_tool(kafka_tool, bootstrap_of(brokers), "--delete", "--group", group)
    assert "was successful" in res.out, res.out
    assert group not in share_tool(kafka_tool, bootstrap_of(brokers), "--list").out.split()


def test_librdkafka_share_consumers(broker_factory, kafka_tool, topic):
    """librdkafka's share consumer (confluent-kafka's ShareConsumer, a preview there): two of
    them accept every record of the partition once between them."""
    from confluent_kafka import ShareConsumer
    b = broker_factory()
    create_topic(b.bootstrap, topic, partitions=1)
    group = f"{topic}-rdk"
    set_group_config(kafka_tool, b.bootstrap, group, "share.auto.offset.reset=earliest")
    p = producer(b.bootstrap, **{"linger.ms": 0})
    for first in range(0, 60, 10):
        produce_all(p, topic, [{"partition": 0, "value": f"v{i}".encode()} for i in range(first, first + 10)])
    consumers = [ShareConsumer({"bootstrap.servers": b.bootstrap, "broker.address.family": "v4",
                                "group.id": group, "share.acknowledgement.mode": "explicit"})
                 for _ in range(2)]
    got = []
    try:
        for c in consumers:
            c.subscribe([topic])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(got) < 60:
            for c in consumers:
                msgs = c.poll(0.5) or []
                for m in msgs:
                    assert m.error() is None, m.error()
                    got.append(m.offset())
                    c.acknowledge(m)
                if msgs:
                    c.commit_sync()
        time.sleep(2)
        for c in consumers:  # nothing more comes
            for m in c.poll(0.5) or []:
                got.append(m.offset())
    finally:
        for c in consumers:
            c.close()
    assert sorted(got) == list(range(60)), got


def test_large_batches_are_acquired_whole_and_intact(broker_factory, kafka_tool, topic):
    """Batches far larger than a broker's first read of the log (Sluice reads a share fetch's
    records a window at a time, doubling): a share consumer gets every record once, each
    value whole, while another holds and releases some in the middle."""
    from confluent_kafka import AcknowledgeType, ShareConsumer
    b = broker_factory()
    create_topic(b.bootstrap, topic, partitions=1)
    group = f"{topic}-big"
    set_group_config(kafka_tool, b.bootstrap, group, "share.auto.offset.reset=earliest")
    p = producer(b.bootstrap, **{"linger.ms": 0})
    n, size = 40, 200 * 1024

    def value(i):
        return (f"v{i}:".encode() * (size // 4))[:size]

    for i in range(n):
        produce_all(p, topic, [{"partition": 0, "value": value(i)}])

    def share_consumer():
        c = ShareConsumer({"bootstrap.servers": b.bootstrap, "broker.address.family": "v4",
                           "group.id": group, "share.acknowledgement.mode": "explicit"})
        c.subscribe([topic])
        return c

    got = {}
    first = share_consumer()
    rest = None
    try:
        # The first consumer takes what one poll gives and releases every other record.
        deadline = time.monotonic() + 60
        msgs = []
        while not msgs and time.monotonic() < deadline:
            msgs = first.poll(0.5) or []
        assert msgs, "nothing fetched"
        released = set()
        for m in msgs:
            assert m.error() is None, m.error()
            if m.offset() % 2:
                released.add(m.offset())
                first.acknowledge(m, AcknowledgeType.RELEASE)
            else:
                got[m.offset()] = m.value()
                first.acknowledge(m)
        first.commit_sync()
        rest = share_consumer()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(got) < n:
            for m in rest.poll(0.5) or []:
                assert m.error() is None, m.error()
                assert m.offset() not in got, f"record {m.offset()} delivered twice"
                got[m.offset()] = m.value()
                rest.acknowledge(m)
            rest.commit_sync()
    finally:
        first.close()
        if rest is not None:
            rest.close()
    assert sorted(got) == list(range(n)), sorted(got)
    bad = [o for o, v in got.items() if v != value(o)]
    assert not bad, f"records {bad} came back altered"


def test_read_committed_share_group_skips_aborted_and_open_transactions(broker_factory, kafka_tool, topic,
                                                                         tmp_path):
    """A share group with share.isolation.level=read_committed gets the records of committed
    transactions and plain records, never those of an aborted transaction, and those of an
    open transaction only once it commits; a read_uncommitted group gets everything."""
    from confluent_kafka import Producer
    b = broker_factory()
    create_topic(b.bootstrap, topic, partitions=1)
    committed, uncommitted = f"{topic}-rc", f"{topic}-ru"
    set_group_config(kafka_tool, b.bootstrap, committed, "share.auto.offset.reset=earliest",
                     "share.isolation.level=read_committed")
    set_group_config(kafka_tool, b.bootstrap, uncommitted, "share.auto.offset.reset=earliest")
    bad = kafka_tool(CONFIG_COMMAND, "--bootstrap-server", b.bootstrap, "--entity-type", "groups",
                     "--entity-name", committed, "--alter", "--add-config", "share.isolation.level=serializable",
                     timeout=120)
    assert bad.rc != 0 and "share.isolation.level" in bad.out + bad.err, bad

    txp = Producer({"bootstrap.servers": b.bootstrap, "broker.address.family": "v4",
                    "transactional.id": f"{topic}-tx"})
    txp.init_transactions(30)

    def transaction(values, commit):
        txp.begin_transaction()
        for v in values:
            txp.produce(topic, value=v.encode(), partition=0)
        txp.flush(30)
        if commit is True:
            txp.commit_transaction(30)
        elif commit is False:
            txp.abort_transaction(30)

    plain = producer(b.bootstrap, **{"linger.ms": 0})
    transaction(["c1", "c2"], True)
    transaction(["a1", "a2", "a3"], False)
    produce_all(plain, topic, [{"partition": 0, "value": b"p1"}])
    transaction(["c3"], True)
    transaction(["o1", "o2"], None)  # left open
    produce_all(plain, topic, [{"partition": 0, "value": b"p2"}])  # behind the open one

    rc = start(tmp_path, "read-committed", b.bootstrap, committed, topic, "accept")
    ru = start(tmp_path, "read-uncommitted", b.bootstrap, uncommitted, topic, "accept")
    try:
        def values(prog):
            return sorted(v for _, _, v in recs(prog))
        wait_until(lambda: values(rc) == ["c1", "c2", "c3", "p1"], 60, "the committed records")
        wait_until(lambda: values(ru) == sorted(["c1", "c2", "a1", "a2", "a3", "p1", "c3", "o1", "o2", "p2"]),
                   60, "every record, read uncommitted")
        time.sleep(2)
        assert values(rc) == ["c1", "c2", "c3", "p1"], "a record of an open or aborted transaction"
        txp.commit_transaction(30)
        wait_until(lambda: values(rc) == sorted(["c1", "c2", "c3", "p1", "o1", "o2", "p2"]), 60,
                   "the open transaction's records once it committed")
        time.sleep(1)
        assert sorted(values(rc)) == sorted(["c1", "c2", "c3", "p1", "o1", "o2", "p2"]), values(rc)
    finally:
        stop(rc, ru)


def test_by_duration_starts_at_the_first_record_within_the_duration(broker_factory, kafka_tool, topic, tmp_path):
    """share.auto.offset.reset=by_duration:PT1H: a share group reading a partition for the
    first time starts at its first record no older than an hour; a malformed duration is
    refused."""
    b = broker_factory()
    create_topic(b.bootstrap, topic, partitions=1)
    group = f"{topic}-dur"
    now = int(time.time() * 1000)
    p = producer(b.bootstrap, **{"linger.ms": 0})
    produce_all(p, topic, [{"partition": 0, "value": f"old{i}".encode(), "timestamp": now - 2 * 3600_000 + i}
                           for i in range(5)])
    produce_all(p, topic, [{"partition": 0, "value": f"new{i}".encode(), "timestamp": now - 60_000 + i}
                           for i in range(5)])
    bad = kafka_tool(CONFIG_COMMAND, "--bootstrap-server", b.bootstrap, "--entity-type", "groups",
                     "--entity-name", group, "--alter", "--add-config", "share.auto.offset.reset=by_duration:1H",
                     timeout=120)
    assert bad.rc != 0 and "share.auto.offset.reset" in bad.out + bad.err, bad
    set_group_config(kafka_tool, b.bootstrap, group, "share.auto.offset.reset=by_duration:PT1H")
    c = start(tmp_path, "by-duration", b.bootstrap, group, topic, "accept")
    try:
        wait_until(lambda: len(recs(c)) >= 5, 60, "the records of the last hour")
        time.sleep(2)
        assert sorted(v for _, _, v in recs(c)) == [f"new{i}" for i in range(5)], recs(c)
        assert sorted(o for o, _, _ in recs(c)) == list(range(5, 10))
    finally:
        stop(c)

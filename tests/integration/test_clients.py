"""Other client stacks: kafka-python (pure Python) round trip, and data surviving restarts."""

import time

from harness import consume_partitions, create_topic, produce_all, producer


def test_kafka_python_round_trip(broker, topic):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    create_topic(broker.bootstrap, topic, partitions=2)
    p = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=5)
    sent = []
    try:
        for i in range(200):
            fut = p.send(topic, key=b"k%d" % i, value=b"v%d" % i, partition=i % 2,
                         headers=[("h", b"%d" % i)])
            sent.append(fut)
        p.flush(timeout=60)
        metas = [f.get(timeout=60) for f in sent]
    finally:
        p.close(timeout=10)
    for q in (0, 1):
        assert [m.offset for m in metas if m.partition == q] == list(range(100))

    c = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, group_id=None,
                      consumer_timeout_ms=15000)
    try:
        tps = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        got = []
        deadline = time.monotonic() + 60
        while len(got) < 200 and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=1000).values():
                got.extend(recs)
    finally:
        c.close()
    assert len(got) == 200
    for r in got:
        i = int(r.key[1:])
        assert r.partition == i % 2 and r.offset == i // 2
        assert r.value == b"v%d" % i
        assert list(r.headers) == [("h", b"%d" % i)]


def test_data_survives_clean_restart_and_sigkill(broker, topic):
    create_topic(broker.bootstrap, topic, partitions=2)
    recs = [{"partition": i % 2, "value": b"before-%d" % i} for i in range(100)]
    produce_all(producer(broker.bootstrap, acks="all"), topic, recs)

    broker.restart()  # SIGTERM + start
    msgs = consume_partitions(broker.bootstrap, topic, [0, 1], expected=100)
    assert sorted(m.value() for m in msgs) == sorted(r["value"] for r in recs)

    more = [{"partition": i % 2, "value": b"after-%d" % i} for i in range(50)]
    delivered = produce_all(producer(broker.bootstrap, acks="all"), topic, more)
    assert sorted((m.partition(), m.offset()) for m in delivered) == sorted(
        [(0, 50 + j) for j in range(25)] + [(1, 50 + j) for j in range(25)])

    broker.kill()  # SIGKILL: acknowledged data is in the OS page cache / on disk
    broker.start()
    msgs = consume_partitions(broker.bootstrap, topic, [0, 1], expected=150)
    assert len(msgs) == 150
    assert sorted(m.value() for m in msgs) == sorted(r["value"] for r in recs + more)
    for q in (0, 1):
        assert [m.offset() for m in msgs if m.partition() == q] == list(range(75))

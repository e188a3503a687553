"""Client quotas: kafka-configs --entity-type clients|users (DescribeClientQuotas,
AlterClientQuotas) and their enforcement (produce and fetch byte rates, request time).

The rate checks are behaviour checks, not timings of the broker: a librdkafka client that
produces or consumes as fast as it can for a few seconds under a 200 KB/s quota must move well
under ten times the quota (a client id without one moves more than that in 2 s), and must be
told about it (librdkafka's `throttle` statistic). The brokers measure rates over
`quota.window.num=2` windows of one second, so the first second's allowance is one second of
quota (with Kafka's default of 11 windows, a client may send ten seconds' worth at once).
"""

from __future__ import annotations

import json
import re
import socket
import struct
import time

import pytest

import harness
from harness import CONFIG_COMMAND, create_topic

QUOTA = 200_000  # bytes per second
RATE_WINDOW = {"quota.window.num": 2, "quota.window.size.seconds": 1}


def configs(kafka_tool, broker, *args):
    return kafka_tool(CONFIG_COMMAND, "--bootstrap-server", broker.bootstrap, *args)


def describe(kafka_tool, broker, *entity) -> str:
    return configs(kafka_tool, broker, "--describe", *entity).check("kafka-configs --describe").out


def alter(kafka_tool, broker, *args):
    return configs(kafka_tool, broker, "--alter", *args)


# ---- a raw AlterClientQuotas v0 request (kafka-configs cannot send validate_only or keys it
# does not know) -----------------------------------------------------------------------------

def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def _nstr(s):
    return struct.pack(">h", -1) if s is None else _str(s)


def alter_client_quotas(port: int, entries, validate_only: bool):
    """``entries``: [(entity [(type, name|None)], ops [(key, value, remove)])] ->
    [(error code, message)] per entry."""
    body = struct.pack(">hhi", 49, 0, 11) + _str("quota-test")
    body += struct.pack(">i", len(entries))
    for entity, ops in entries:
        body += struct.pack(">i", len(entity))
        for t, n in entity:
            body += _str(t) + _nstr(n)
        body += struct.pack(">i", len(ops))
        for k, v, remove in ops:
            body += _str(k) + struct.pack(">d?", v, remove)
    body += struct.pack(">?", validate_only)
    with socket.create_connection(("127.0.0.1", port), timeout=20) as s:
        s.sendall(struct.pack(">i", len(body)) + body)

        def recv(n):
            out = b""
            while len(out) < n:
                chunk = s.recv(n - len(out))
                assert chunk, "connection closed"
                out += chunk
            return out

        frame = recv(struct.unpack(">i", recv(4))[0])
    i = 8  # correlation id, throttle time
    (count,) = struct.unpack_from(">i", frame, i)
    i += 4
    out = []

    def read_nstr():
        nonlocal i
        (n,) = struct.unpack_from(">h", frame, i)
        i += 2
        if n < 0:
            return None
        v = frame[i:i + n].decode()
        i += n
        return v

    for _ in range(count):
        (code,) = struct.unpack_from(">h", frame, i)
        i += 2
        message = read_nstr()
        (n,) = struct.unpack_from(">i", frame, i)
        i += 4
        for _ in range(n):
            read_nstr()
            read_nstr()
        out.append((code, message))
    return out


INVALID_REQUEST = 42


def test_kafka_configs_alter_describe_delete(kafka_tool, broker):
    alter(kafka_tool, broker, "--entity-type", "clients", "--entity-name", "c1",
          "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048").check("alter client")
    alter(kafka_tool, broker, "--entity-type", "users", "--entity-default",
          "--add-config", "request_percentage=12.5").check("alter default user")
    alter(kafka_tool, broker, "--entity-type", "users", "--entity-name", "alice",
          "--entity-type", "clients", "--entity-default",
          "--add-config", "producer_byte_rate=5000").check("alter user + default client")
    alter(kafka_tool, broker, "--entity-type", "clients", "--entity-default",
          "--add-config", "consumer_byte_rate=4096").check("alter default client")

    out = describe(kafka_tool, broker, "--entity-type", "clients", "--entity-name", "c1")
    assert "client-id 'c1'" in out and "consumer_byte_rate=2048.0" in out \
        and "producer_byte_rate=1024.0" in out, out
    out = describe(kafka_tool, broker, "--entity-type", "clients")
    assert "client-id 'c1'" in out and "the default client-id are consumer_byte_rate=4096.0" in out, out
    assert "alice" not in out, out
    out = describe(kafka_tool, broker, "--entity-type", "users")
    assert "the default user-principal are request_percentage=12.5" in out, out
    out = describe(kafka_tool, broker, "--entity-type", "users", "--entity-name", "alice",
                   "--entity-type", "clients", "--entity-default")
    assert re.search(r"user-principal 'alice', the default client-id are producer_byte_rate=5000.0", out), out

    alter(kafka_tool, broker, "--entity-type", "clients", "--entity-name", "c1",
          "--delete-config", "producer_byte_rate").check("delete one key")
    out = describe(kafka_tool, broker, "--entity-type", "clients", "--entity-name", "c1")
    assert "consumer_byte_rate=2048.0" in out and "producer_byte_rate" not in out, out
    alter(kafka_tool, broker, "--entity-type", "clients", "--entity-name", "c1",
          "--delete-config", "consumer_byte_rate").check("delete the last key")
    out = describe(kafka_tool, broker, "--entity-type", "clients", "--entity-name", "c1")
    assert "_rate" not in out, out

    # Bad values: Kafka's INVALID_REQUEST, nothing stored.
    for bad, why in (("producer_byte_rate=1.5", "cannot be a fractional value"),
                     ("consumer_byte_rate=0", "must be greater than 0")):
        res = alter(kafka_tool, broker, "--entity-type", "clients", "--entity-name", "c2",
                    "--add-config", bad)
        assert res.rc != 0 and "InvalidRequestException" in res.err and why in res.err, res.describe(bad)
    out = describe(kafka_tool, broker, "--entity-type", "clients")
    assert "c2" not in out, out


def test_unknown_keys_bad_entities_and_validate_only(kafka_tool, broker):
    c3 = [("client-id", "c3")]
    # validate_only checks and stores nothing.
    assert alter_client_quotas(broker.port, [(c3, [("producer_byte_rate", 1000.0, False)])], True) == [(0, None)]
    out = describe(kafka_tool, broker, "--entity-type", "clients")
    assert "c3" not in out, out
    results = alter_client_quotas(broker.port, [
        (c3, [("no_such_quota", 1.0, False)]),
        ([("group", "g")], [("producer_byte_rate", 1.0, False)]),
        ([("user", "")], [("producer_byte_rate", 1.0, False)]),
        ([], [("producer_byte_rate", 1.0, False)]),
        ([("client-id", "c4")], [("producer_byte_rate", 1.0, False), ("producer_byte_rate", 2.0, False)]),
        ([("client-id", "c5")], [("request_percentage", 0.5, False)]),
    ], False)
    # Kafka answers in no particular order (a map by entity).
    assert sorted(code for code, _ in results) == [0] + [INVALID_REQUEST] * 5, results
    assert any("no_such_quota" in (m or "") for _, m in results), results
    out = describe(kafka_tool, broker, "--entity-type", "clients")
    assert "client-id 'c5' are request_percentage=0.5" in out and "c3" not in out and "c4" not in out, out


@pytest.mark.broker_config(**RATE_WINDOW)
def test_producer_byte_rate_is_enforced(kafka_tool, broker, topic):
    create_topic(broker.bootstrap, topic, partitions=1)
    alter(kafka_tool, broker, "--entity-type", "clients", "--entity-name", "q-producer",
          "--add-config", f"producer_byte_rate={QUOTA}").check("set the quota")
    sent, throttle_max = produce_flat_out(broker.bootstrap, topic, "q-producer", seconds=5)
    assert 0 < sent < 10 * QUOTA, f"{sent} bytes in 5 s under a {QUOTA} B/s quota"
    assert throttle_max > 0, "librdkafka saw no throttle time"
    # Another client id is not limited.
    sent, throttle_max = produce_flat_out(broker.bootstrap, topic, "q-free", seconds=2)
    assert sent > 10 * QUOTA and throttle_max == 0, sent


@pytest.mark.broker_config(**RATE_WINDOW)
def test_consumer_byte_rate_is_enforced(kafka_tool, broker, topic):
    create_topic(broker.bootstrap, topic, partitions=1)
    # Batches of one or two records: a fetch answers at least one whole batch, and one batch
    # larger than the quota allows in a window would be throttled every time (on Kafka too).
    p = harness.producer(broker.bootstrap, **{"linger.ms": 5, "batch.size": 20_000})
    harness.produce_all(p, topic, [{"value": bytes(10_000)} for _ in range(600)])  # 6 MB
    alter(kafka_tool, broker, "--entity-type", "users", "--entity-default",
          "--entity-type", "clients", "--entity-name", "q-consumer",
          "--add-config", f"consumer_byte_rate={QUOTA}").check("set the quota")
    got, throttle_max = consume_flat_out(broker.bootstrap, topic, "q-consumer", seconds=5)
    assert 0 < got < 10 * QUOTA, f"{got} bytes in 5 s under a {QUOTA} B/s quota"
    assert throttle_max > 0, "librdkafka saw no throttle time"
    # Deleting the quota lifts the limit at once (no restart).
    alter(kafka_tool, broker, "--entity-type", "users", "--entity-default",
          "--entity-type", "clients", "--entity-name", "q-consumer",
          "--delete-config", "consumer_byte_rate").check("delete the quota")
    got, _ = consume_flat_out(broker.bootstrap, topic, "q-consumer", seconds=3)
    assert got >= 6_000_000, got


def test_request_percentage_throttles(kafka_tool, broker, topic):
    create_topic(broker.bootstrap, topic, partitions=1)
    alter(kafka_tool, broker, "--entity-type", "users", "--entity-name", "ANONYMOUS",
          "--add-config", "request_percentage=0.01").check("set the quota")
    _, throttle_max = produce_flat_out(broker.bootstrap, topic, "q-requests", seconds=3, size=100,
                                       linger_ms=0)
    assert throttle_max > 0, "librdkafka saw no throttle time"


def test_quotas_survive_a_restart(kafka_tool, broker):
    alter(kafka_tool, broker, "--entity-type", "users", "--entity-name", "bob",
          "--entity-type", "clients", "--entity-name", "app",
          "--add-config", "producer_byte_rate=777").check("alter")
    broker.restart()
    out = describe(kafka_tool, broker, "--entity-type", "users", "--entity-name", "bob",
                   "--entity-type", "clients", "--entity-name", "app")
    assert "producer_byte_rate=777.0" in out, out


@pytest.mark.sluice_only
def test_cluster_quota_set_through_one_broker_is_enforced_by_another(kafka_tool, broker_factory, tmp_path, topic):
    from cluster_support import EtcdServer, start_cluster, wait_all_led

    etcd = EtcdServer(tmp_path / "etcd").start()
    try:
        shared = tmp_path / "shared"
        shared.mkdir()
        brokers = start_cluster(broker_factory, etcd, shared, n=2, prefix="/sluice-quotas-test",
                                **RATE_WINDOW)
        bootstrap = ",".join(b.bootstrap for b in brokers)
        create_topic(bootstrap, topic, partitions=1)
        leader = wait_all_led(bootstrap, topic, 1)[0]
        # start_cluster gives node ids 1..n in order: the partition's owner, and the other one.
        owner, other = brokers[leader - 1], brokers[2 - leader]
        alter(kafka_tool, other, "--entity-type", "clients", "--entity-name", "q-cluster",
              "--add-config", f"producer_byte_rate={QUOTA}").check("set the quota on another broker")
        out = describe(kafka_tool, owner, "--entity-type", "clients")
        harness.wait_until(
            lambda: f"producer_byte_rate={QUOTA}.0" in describe(kafka_tool, owner, "--entity-type", "clients"),
            10, "the owner to learn the quota")
        sent, throttle_max = produce_flat_out(owner.bootstrap, topic, "q-cluster", seconds=5)
        assert 0 < sent < 10 * QUOTA, f"{sent} bytes in 5 s under a {QUOTA} B/s quota"
        assert throttle_max > 0, out
    finally:
        etcd.kill()


# ---- clients -------------------------------------------------------------------------------

def _throttle_max(stats: list) -> int:
    return max((b.get("throttle", {}).get("max", 0) for s in stats for b in s.get("brokers", {}).values()),
               default=0)


def produce_flat_out(bootstrap: str, topic: str, client_id: str, seconds: float, size: int = 10_000,
                     linger_ms: int = 5):
    """Produce as fast as librdkafka lets us for ``seconds``: (payload bytes acknowledged in that
    time, the largest throttle time librdkafka reported)."""
    stats: list = []
    p = harness.producer(bootstrap, **{
        "client.id": client_id, "acks": 1, "linger.ms": linger_ms,
        # Requests of at most 100 KB: with librdkafka's default of 1 MB, the first request alone
        # is five seconds of quota, and what a client moves in 5 s before throttling stops it
        # (that request and the next one already in flight) nears ten times the quota.
        "batch.size": 100_000,
        "statistics.interval.ms": 200, "stats_cb": lambda s: stats.append(json.loads(s)),
    })
    acked = [0]
    deadline = time.monotonic() + seconds

    def delivered(err, msg):
        if err is None and time.monotonic() < deadline:
            acked[0] += len(msg.value())

    payload = bytes(size)
    while time.monotonic() < deadline:
        try:
            p.produce(topic, payload, on_delivery=delivered)
        except BufferError:
            p.poll(0.05)
        p.poll(0)
    p.poll(0.5)  # a last statistics callback
    p.purge()
    p.flush(5)
    return acked[0], _throttle_max(stats)


def consume_flat_out(bootstrap: str, topic: str, client_id: str, seconds: float):
    """Read partition 0 from the start for ``seconds``: (payload bytes, largest throttle)."""
    from confluent_kafka import TopicPartition

    stats: list = []
    c = harness.consumer(bootstrap, **{
        "client.id": client_id, "statistics.interval.ms": 200,
        "stats_cb": lambda s: stats.append(json.loads(s)), "enable.partition.eof": False,
    })
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.1)
            if m is not None and m.error() is None:
                got += len(m.value())
        c.poll(0.3)
    finally:
        c.close()
    return got, _throttle_max(stats)

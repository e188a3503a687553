"""SASL listeners (`listener.security.protocol.map` NAME:SASL_PLAINTEXT or NAME:SASL_SSL) configured
as Kafka users configure them: `sasl.enabled.mechanisms`, JAAS per mechanism, SCRAM users made
with `kafka-configs`. librdkafka and the Java client (Kafka's console tools) log in with PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512; a wrong password gets SASL_AUTHENTICATION_FAILED; a 3-broker
cluster calls itself over a SASL inter-broker listener; bad input on the SASL port closes the
connection.

Each broker keeps its PLAINTEXT listener on the harness's port (the harness checks it is up, and
the tests manage users through it) and gets a SASL listener named SECURE on another port. The
tests not marked sluice_only run against Apache Kafka too (SLUICE_TEST_TARGET=kafka).
"""

from __future__ import annotations

import re
import socket
import struct
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

import harness
from harness import CONFIG_COMMAND, CONSOLE_CONSUMER, CONSOLE_PRODUCER, consume_partitions, create_topic, produce_all

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required;'
MECHANISMS = "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512"


def sasl_broker(broker_factory, certs: Path | None = None, **extra):
    """A broker with PLAINTEXT on the harness port and SASL (SASL_SSL with ``certs``) on
    ``b.sasl_bootstrap``."""
    b = broker_factory(start=False)
    b.sasl_port = harness.free_port()
    b.sasl_bootstrap = f"127.0.0.1:{b.sasl_port}"
    protocol = "SASL_SSL" if certs else "SASL_PLAINTEXT"
    listeners = f"PLAINTEXT://127.0.0.1:{b.port},SECURE://127.0.0.1:{b.sasl_port}"
    advertised = listeners
    protocols = f"PLAINTEXT:PLAINTEXT,SECURE:{protocol}"
    if b.kind == "kafka":
        listeners += f",CONTROLLER://127.0.0.1:{b.controller_port}"
        protocols += ",CONTROLLER:PLAINTEXT"
    b.overrides.update({
        "listeners": listeners,
        "advertised.listeners": advertised,
        "listener.security.protocol.map": protocols,
        "listener.name.secure.sasl.enabled.mechanisms": MECHANISMS,
        "listener.name.secure.plain.sasl.jaas.config": PLAIN_JAAS,
        "listener.name.secure.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.secure.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
    })
    if certs:
        b.overrides.update({"listener.name.secure.ssl.keystore.type": "PEM",
                            "listener.name.secure.ssl.keystore.location": str(certs / "broker.pem")})
    if b.kind == "sluice":
        b.metrics_port = harness.free_port()
        b.overrides["sluice.metrics.listener"] = f"127.0.0.1:{b.metrics_port}"
    b.overrides.update(extra)
    b.start()
    return b


def rdkafka_sasl(mechanism: str, user: str, password: str, certs: Path | None = None) -> dict:
    conf = {"security.protocol": "SASL_SSL" if certs else "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password}
    if certs:
        conf["ssl.ca.location"] = str(certs / "ca.pem")
    return conf


def java_sasl_config(tmp_path: Path, mechanism: str, user: str, password: str, certs: Path | None = None) -> Path:
    module = ("org.apache.kafka.common.security.plain.PlainLoginModule" if mechanism == "PLAIN"
              else "org.apache.kafka.common.security.scram.ScramLoginModule")
    lines = [f"security.protocol={'SASL_SSL' if certs else 'SASL_PLAINTEXT'}",
             f"sasl.mechanism={mechanism}",
             f'sasl.jaas.config={module} required username="{user}" password="{password}";']
    if certs:
        lines += ["ssl.truststore.type=PEM", f"ssl.truststore.location={certs / 'ca.pem'}"]
    f = tmp_path / f"client-{mechanism}-{user}-{password}.properties"
    f.write_text("\n".join(lines) + "\n")
    return f


def add_scram_user(kafka_tool, b, user: str, password: str, mechanism: str = "SCRAM-SHA-256",
                   iterations: int | None = None) -> None:
    spec = f"iterations={iterations},password={password}" if iterations else f"password={password}"
    res = kafka_tool(CONFIG_COMMAND, "--bootstrap-server", b.bootstrap, "--alter", "--add-config",
                     f"{mechanism}=[{spec}]", "--entity-type", "users", "--entity-name", user)
    res.check(f"kafka-configs --add-config {mechanism} for {user}")


def can_log_in(bootstrap: str, conf: dict, timeout: float = 10) -> bool:
    """Whether librdkafka gets metadata with these settings (an authentication error: no)."""
    from confluent_kafka.admin import AdminClient

    errors: list = []
    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4",
                         "error_cb": errors.append, **conf})
    try:
        admin.list_topics(timeout=timeout)
        return True
    except Exception:  # noqa: BLE001
        return False


def auth_error(bootstrap: str, conf: dict, timeout: float = 15) -> str:
    """The authentication error librdkafka reports with these settings (fails if none comes
    within ``timeout``: a refused login must not hang)."""
    from confluent_kafka import KafkaError

    errors: list = []
    p = harness.producer(bootstrap, error_cb=errors.append, log_level=0, **conf)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        p.poll(0.2)
        auth = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
        if auth:
            return auth[0].str()
    raise AssertionError(f"no authentication error within {timeout}s, got {errors}")


def failed_authentications(b, listener: str = "SECURE") -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{b.metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    m = re.search(r'^kafka_server_socket_server_metrics_failed_authentication_total\{listener="%s",'
                  r'networkProcessor="0"\} (\S+)$' % listener, text, re.M)
    assert m, text[-2000:]
    return float(m.group(1))


def test_librdkafka_with_plain_and_scram(broker_factory, kafka_tool, topic):
    b = sasl_broker(broker_factory)
    add_scram_user(kafka_tool, b, "alice", "alice-secret", "SCRAM-SHA-256", iterations=8192)
    add_scram_user(kafka_tool, b, "bob", "bob-secret", "SCRAM-SHA-512")
    create_topic(b.bootstrap, topic, partitions=2)
    logins = [("PLAIN", "alice", "alice-secret"), ("SCRAM-SHA-256", "alice", "alice-secret"),
              ("SCRAM-SHA-512", "bob", "bob-secret")]
    expected = []
    for mechanism, user, password in logins:
        records = [{"value": f"{mechanism}-{i}".encode(), "partition": i % 2} for i in range(50)]
        produce_all(harness.producer(b.sasl_bootstrap, **rdkafka_sasl(mechanism, user, password)), topic, records)
        expected += [r["value"] for r in records]
    for mechanism, user, password in logins:
        got = consume_partitions(b.sasl_bootstrap, topic, range(2), expected=len(expected),
                                 **rdkafka_sasl(mechanism, user, password))
        assert sorted(m.value() for m in got) == sorted(expected)
    # A consumer group over SASL (FindCoordinator answers with the SASL listener).
    c = harness.consumer(b.sasl_bootstrap, **{"group.id": f"{topic}-g", "enable.partition.eof": False},
                         **rdkafka_sasl("SCRAM-SHA-512", "bob", "bob-secret"))
    try:
        c.subscribe([topic])
        n = 0
        deadline = time.monotonic() + 60
        while n < len(expected) and time.monotonic() < deadline:
            for m in c.consume(num_messages=500, timeout=1):
                if m.error() is None:
                    n += 1
        assert n == len(expected)
    finally:
        c.close()


def test_java_console_tools_with_plain_and_scram(broker_factory, kafka_tool, topic, tmp_path):
    b = sasl_broker(broker_factory)
    add_scram_user(kafka_tool, b, "carol", "carol-secret", "SCRAM-SHA-512")
    create_topic(b.bootstrap, topic, partitions=1)
    for mechanism, user, password in [("PLAIN", "alice", "alice-secret"), ("SCRAM-SHA-512", "carol", "carol-secret")]:
        conf = java_sasl_config(tmp_path, mechanism, user, password)
        lines = "".join(f"{mechanism}-{i}\n" for i in range(20))
        res = kafka_tool(CONSOLE_PRODUCER, "--bootstrap-server", b.sasl_bootstrap, "--topic", topic,
                         "--command-config", str(conf), input=lines)
        res.check(f"kafka-console-producer with {mechanism}")
    conf = java_sasl_config(tmp_path, "SCRAM-SHA-512", "carol", "carol-secret")
    res = kafka_tool(CONSOLE_CONSUMER, "--bootstrap-server", b.sasl_bootstrap, "--command-config", str(conf),
                     "--topic", topic, "--from-beginning", "--max-messages", "40", "--timeout-ms", "30000")
    res.check("kafka-console-consumer with SCRAM-SHA-512")
    assert sorted(res.out.split()) == sorted([f"PLAIN-{i}" for i in range(20)] + [f"SCRAM-SHA-512-{i}" for i in range(20)])
    # The Java client told of a wrong password: an authentication error, not a hang.
    bad = java_sasl_config(tmp_path, "PLAIN", "alice", "wrong")
    res = kafka_tool(CONSOLE_CONSUMER, "--bootstrap-server", b.sasl_bootstrap, "--command-config", str(bad),
                     "--topic", topic, "--from-beginning", "--max-messages", "1", "--timeout-ms", "20000",
                     timeout=90)
    assert "Processed a total of 0 messages" in res.err, res.describe()
    assert "SaslAuthenticationException: Authentication failed: Invalid username or password" in res.err, \
        res.describe()


def test_kafka_configs_manages_scram_users(broker_factory, kafka_tool, topic, target):
    b = sasl_broker(broker_factory)
    create_topic(b.bootstrap, topic, partitions=1)
    conf256 = rdkafka_sasl("SCRAM-SHA-256", "dave", "dave-secret")
    assert not can_log_in(b.sasl_bootstrap, conf256, timeout=5)
    add_scram_user(kafka_tool, b, "dave", "dave-secret", "SCRAM-SHA-256", iterations=8192)
    add_scram_user(kafka_tool, b, "dave", "dave-secret", "SCRAM-SHA-512", iterations=4096)
    res = kafka_tool(CONFIG_COMMAND, "--bootstrap-server", b.bootstrap, "--describe", "--entity-type", "users",
                     "--entity-name", "dave").check("kafka-configs --describe")
    assert "SCRAM credential configs for user-principal 'dave' are SCRAM-SHA-256=iterations=8192, " \
           "SCRAM-SHA-512=iterations=4096" in res.out, res.out
    # Listing every user.
    res = kafka_tool(CONFIG_COMMAND, "--bootstrap-server", b.bootstrap, "--describe", "--entity-type", "users"
                     ).check("kafka-configs --describe all users")
    assert "user-principal 'dave'" in res.out, res.out
    produce_all(harness.producer(b.sasl_bootstrap, **conf256), topic, [{"value": b"v", "partition": 0}])
    assert can_log_in(b.sasl_bootstrap, rdkafka_sasl("SCRAM-SHA-512", "dave", "dave-secret"))
    # Changing the password: the old one no longer logs in.
    add_scram_user(kafka_tool, b, "dave", "new-secret", "SCRAM-SHA-256", iterations=4096)
    assert can_log_in(b.sasl_bootstrap, rdkafka_sasl("SCRAM-SHA-256", "dave", "new-secret"))
    assert not can_log_in(b.sasl_bootstrap, conf256, timeout=5)
    # Iterations outside Kafka's limits are refused with Kafka's message.
    res = kafka_tool(CONFIG_COMMAND, "--bootstrap-server", b.bootstrap, "--alter", "--add-config",
                     "SCRAM-SHA-256=[iterations=100000,password=x]", "--entity-type", "users", "--entity-name", "dave")
    assert res.rc != 0 and "Too many iterations" in res.out + res.err, res.describe()
    # Deleting: describe says it does not exist, and logging in fails.
    res = kafka_tool(CONFIG_COMMAND, "--bootstrap-server", b.bootstrap, "--alter", "--delete-config",
                     "SCRAM-SHA-256", "--entity-type", "users", "--entity-name", "dave")
    res.check("kafka-configs --delete-config SCRAM-SHA-256")
    res = kafka_tool(CONFIG_COMMAND, "--bootstrap-server", b.bootstrap, "--describe", "--entity-type", "users",
                     "--entity-name", "dave").check("kafka-configs --describe after a deletion")
    assert "SCRAM-SHA-512=iterations=4096" in res.out and "SCRAM-SHA-256" not in res.out, res.out
    assert not can_log_in(b.sasl_bootstrap, rdkafka_sasl("SCRAM-SHA-256", "dave", "new-secret"), timeout=5)
    res = kafka_tool(CONFIG_COMMAND, "--bootstrap-server", b.bootstrap, "--alter", "--delete-config",
                     "SCRAM-SHA-512", "--entity-type", "users", "--entity-name", "dave")
    res.check("kafka-configs --delete-config SCRAM-SHA-512")
    assert not can_log_in(b.sasl_bootstrap, rdkafka_sasl("SCRAM-SHA-512", "dave", "dave-secret"), timeout=5)
    # Deleting what does not exist: Kafka's error.
    res = kafka_tool(CONFIG_COMMAND, "--bootstrap-server", b.bootstrap, "--alter", "--delete-config",
                     "SCRAM-SHA-512", "--entity-type", "users", "--entity-name", "dave")
    assert res.rc != 0 and "Attempt to delete a user credential that does not exist" in res.out + res.err, \
        res.describe()
    # Credentials survive a restart.
    add_scram_user(kafka_tool, b, "erin", "erin-secret", "SCRAM-SHA-512")
    erin = rdkafka_sasl("SCRAM-SHA-512", "erin", "erin-secret")
    assert can_log_in(b.sasl_bootstrap, erin)
    if target == "sluice":
        b.restart()
        assert can_log_in(b.sasl_bootstrap, erin)


def test_wrong_password_is_refused_with_kafkas_error(broker_factory, kafka_tool, target):
    b = sasl_broker(broker_factory)
    add_scram_user(kafka_tool, b, "alice", "alice-secret", "SCRAM-SHA-256")
    before = failed_authentications(b) if target == "sluice" else 0
    msg = auth_error(b.sasl_bootstrap, rdkafka_sasl("PLAIN", "alice", "wrong"))
    assert "Authentication failed: Invalid username or password" in msg, msg
    msg = auth_error(b.sasl_bootstrap, rdkafka_sasl("SCRAM-SHA-256", "alice", "wrong"))
    assert "Authentication failed during authentication due to invalid credentials with SASL mechanism " \
           "SCRAM-SHA-256" in msg, msg
    msg = auth_error(b.sasl_bootstrap, rdkafka_sasl("SCRAM-SHA-256", "nobody", "x"))
    assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in msg, msg
    if target == "sluice":
        harness.wait_until(lambda: failed_authentications(b) >= before + 3, 15, "failed authentications counted")
        assert "SASL authentication failed" in b.log_text()


def kafka_request(api_key: int, version: int, correlation: int, body: bytes, client: bytes = b"t") -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation, len(client)) + client
    frame = header + body
    return struct.pack(">i", len(frame)) + frame


def read_frame(s: socket.socket) -> bytes | None:
    def exact(n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = s.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    head = exact(4)
    if head is None:
        return None
    return exact(struct.unpack(">i", head)[0])


def closed(s: socket.socket) -> bool:
    s.settimeout(10)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True


def kstr(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def kbytes(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


@pytest.mark.sluice_only
def test_bad_input_on_the_sasl_port(broker_factory, topic):
    b = sasl_broker(broker_factory)
    addr = ("127.0.0.1", b.sasl_port)
    before = failed_authentications(b)
    # A Metadata request before authentication: closed, with a log line.
    with socket.create_connection(addr, timeout=10) as s:
        s.sendall(kafka_request(3, 1, 1, struct.pack(">i", -1)))
        assert closed(s)
    harness.wait_until(lambda: "Unexpected Kafka request of type Metadata during SASL handshake" in b.log_text(),
                       10, "the log line of a request before authentication")
    # An unknown mechanism: UNSUPPORTED_SASL_MECHANISM (33) with the enabled list, then closed.
    with socket.create_connection(addr, timeout=10) as s:
        s.sendall(kafka_request(17, 1, 7, kstr("GSSAPI")))
        resp = read_frame(s)
        assert resp is not None
        correlation, code, count = struct.unpack(">ihi", resp[:10])
        assert (correlation, code, count) == (7, 33, 3)
        assert b"PLAIN" in resp and b"SCRAM-SHA-256" in resp and b"SCRAM-SHA-512" in resp
        assert closed(s)
    # A handshake, then a request that is not SaslAuthenticate: closed.
    with socket.create_connection(addr, timeout=10) as s:
        s.sendall(kafka_request(17, 1, 1, kstr("PLAIN")))
        assert struct.unpack(">ih", read_frame(s)[:6]) == (1, 0)
        s.sendall(kafka_request(3, 1, 2, struct.pack(">i", -1)))
        assert closed(s)
    # Garbage PLAIN bytes: SASL_AUTHENTICATION_FAILED (58) with Kafka's message, then closed.
    with socket.create_connection(addr, timeout=10) as s:
        s.sendall(kafka_request(17, 1, 1, kstr("PLAIN")))
        read_frame(s)
        s.sendall(kafka_request(36, 0, 2, kbytes(b"\xff\xfe garbage")))
        resp = read_frame(s)
        correlation, code = struct.unpack(">ih", resp[:6])
        assert (correlation, code) == (2, 58)
        assert b"Invalid SASL/PLAIN response: expected 3 tokens, got 1" in resp
        assert closed(s)
    # Garbage SCRAM bytes.
    with socket.create_connection(addr, timeout=10) as s:
        s.sendall(kafka_request(17, 1, 1, kstr("SCRAM-SHA-256")))
        read_frame(s)
        s.sendall(kafka_request(36, 1, 2, kbytes(b"n,,n=\x00,r=" + b"\x01" * 100)))
        resp = read_frame(s)
        assert struct.unpack(">ih", resp[:6]) == (2, 58)
        assert closed(s)
    # An oversize frame before authentication (over sasl.server.max.receive.size): closed.
    with socket.create_connection(addr, timeout=10) as s:
        s.sendall(struct.pack(">i", 10 << 20) + b"\x00" * 64)
        assert closed(s)
    # Not a Kafka frame at all.
    with socket.create_connection(addr, timeout=10) as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        assert closed(s)
    # SaslHandshake v0: the PLAIN token comes raw (size-prefixed, no header), as Kafka 0.10 clients send it.
    with socket.create_connection(addr, timeout=10) as s:
        s.sendall(kafka_request(17, 0, 1, kstr("PLAIN")))
        assert struct.unpack(">ih", read_frame(s)[:6]) == (1, 0)
        s.sendall(kbytes(b"\x00alice\x00alice-secret"))
        assert read_frame(s) == b""
        # Authenticated: a Metadata request is answered.
        s.sendall(kafka_request(3, 1, 2, struct.pack(">i", -1)))
        resp = read_frame(s)
        assert resp is not None and struct.unpack(">i", resp[:4]) == (2,)
    # A SaslHandshake on the PLAINTEXT listener: ILLEGAL_SASL_STATE (34), the connection stays.
    with socket.create_connection(("127.0.0.1", b.port), timeout=10) as s:
        s.sendall(kafka_request(17, 1, 1, kstr("PLAIN")))
        assert struct.unpack(">ih", read_frame(s)[:6]) == (1, 34)
    # Each failure counted; their log lines at most one a second.
    harness.wait_until(lambda: failed_authentications(b) >= before + 7, 10, "seven failed authentications")
    # The broker still serves.
    assert can_log_in(b.sasl_bootstrap, rdkafka_sasl("PLAIN", "alice", "alice-secret"))


@pytest.mark.sluice_only
@pytest.mark.parametrize("props,message", [
    ({"listener.name.secure.sasl.enabled.mechanisms": None}, "GSSAPI is Kafka's default"),
    ({"listener.name.secure.sasl.enabled.mechanisms": "PLAIN,GSSAPI"}, "GSSAPI is not served"),
    ({"listener.name.secure.plain.sasl.jaas.config": PLAIN_JAAS.rstrip(";")}, "not terminated by semi-colon"),
    ({"listener.name.secure.plain.sasl.jaas.config": None}, "needs its users"),
    ({"listener.name.secure.plain.sasl.jaas.config": "org.example.Login required;"}, "which Sluice does not serve"),
    ({"inter.broker.listener.name": "SECURE"}, "sasl.mechanism.inter.broker.protocol"),
])
def test_sasl_misconfigurations_are_refused_with_their_reason(tmp_path, props, message):
    port, sasl_port = harness.free_port(), harness.free_port()
    conf = {"node.id": 1, "log.dirs": str(tmp_path / "data"),
            "listeners": f"PLAINTEXT://127.0.0.1:{port},SECURE://127.0.0.1:{sasl_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_PLAINTEXT",
            "listener.name.secure.sasl.enabled.mechanisms": "PLAIN",
            "listener.name.secure.plain.sasl.jaas.config": PLAIN_JAAS}
    for k, v in props.items():
        if v is None:
            conf.pop(k, None)
        else:
            conf[k] = v
    harness.write_properties(tmp_path / "server.properties", conf)
    p = subprocess.run([str(harness.SLUICE_BIN), "serve", "--config", str(tmp_path / "server.properties")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert message in p.stdout + p.stderr, p.stdout + p.stderr
    assert "admin-secret" not in p.stdout + p.stderr


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    from test_tls import openssl

    d = tmp_path_factory.mktemp("certs")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
            "-days", "2", "-subj", "/CN=sluice-test-ca", cwd=d)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "broker.key", "-out", "broker.csr",
            "-subj", "/CN=localhost", cwd=d)
    (d / "broker.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", "broker.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "broker.crt", "-days", "2", "-extfile", "broker.ext", cwd=d)
    (d / "broker.pem").write_text((d / "broker.key").read_text() + (d / "broker.crt").read_text())
    return d


def test_sasl_ssl(broker_factory, kafka_tool, certs, tmp_path, topic):
    """SASL_SSL: TLS first, then SASL, for librdkafka and the Java tools."""
    b = sasl_broker(broker_factory, certs=certs)
    add_scram_user(kafka_tool, b, "alice", "alice-secret", "SCRAM-SHA-256")
    create_topic(b.bootstrap, topic, partitions=2)
    records = [{"value": b"%05d" % i * 100, "partition": i % 2} for i in range(200)]
    produce_all(harness.producer(b.sasl_bootstrap, **rdkafka_sasl("SCRAM-SHA-256", "alice", "alice-secret", certs)),
                topic, records)
    got = consume_partitions(b.sasl_bootstrap, topic, range(2), expected=200,
                             **rdkafka_sasl("PLAIN", "alice", "alice-secret", certs))
    assert sorted(m.value() for m in got) == sorted(r["value"] for r in records)
    conf = java_sasl_config(tmp_path, "SCRAM-SHA-256", "alice", "alice-secret", certs)
    res = kafka_tool(CONSOLE_CONSUMER, "--bootstrap-server", b.sasl_bootstrap, "--command-config", str(conf),
                     "--topic", topic, "--from-beginning", "--max-messages", "200", "--timeout-ms", "30000",
                     "--formatter-property", "print.value=false", "--formatter-property", "print.partition=true")
    res.check("kafka-console-consumer over SASL_SSL")
    assert len(res.out.split()) == 200
    msg = auth_error(b.sasl_bootstrap, rdkafka_sasl("PLAIN", "alice", "wrong", certs))
    assert "Invalid username or password" in msg


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_java_producer_and_consumer_over_sasl_ssl(broker_factory, kafka_tool, certs, tmp_path, topic, mechanism):
    """The Java console producer and consumer over SASL_SSL with each mechanism."""
    b = sasl_broker(broker_factory, certs=certs)
    if mechanism.startswith("SCRAM"):
        add_scram_user(kafka_tool, b, "alice", "alice-secret", mechanism)
    create_topic(b.bootstrap, topic, partitions=1)
    conf = str(java_sasl_config(tmp_path, mechanism, "alice", "alice-secret", certs))
    values = [f"{mechanism}-{i}" for i in range(50)]
    harness.wait_until(lambda: kafka_tool(CONSOLE_PRODUCER, "--bootstrap-server", b.sasl_bootstrap,
                                          "--producer.config", conf, "--topic", topic,
                                          input="".join(v + "\n" for v in values), timeout=90).rc == 0,
                       60, f"the Java producer logs in with {mechanism}")
    res = kafka_tool(CONSOLE_CONSUMER, "--bootstrap-server", b.sasl_bootstrap, "--command-config", conf,
                     "--topic", topic, "--from-beginning", "--max-messages", "50", "--timeout-ms", "30000")
    res.check(f"kafka-console-consumer over SASL_SSL with {mechanism}")
    assert res.out.split()[:50] == values, res.out[:500]


@pytest.mark.sluice_only
def test_session_lifetime_and_reauthentication(broker_factory, kafka_tool, topic, tmp_path):
    """connections.max.reauth.ms (KIP-368): the Java client re-authenticates on its connection
    before the session ends, and keeps consuming."""
    b = sasl_broker(broker_factory, **{"listener.name.secure.connections.max.reauth.ms": "3000"})
    create_topic(b.bootstrap, topic, partitions=1)
    produce_all(harness.producer(b.bootstrap), topic, [{"value": b"m%d" % i, "partition": 0} for i in range(5)])
    conf = java_sasl_config(tmp_path, "PLAIN", "alice", "alice-secret")
    # The console consumer polls for 12 s with a 3 s session: it re-authenticates several times.
    res = kafka_tool(CONSOLE_CONSUMER, "--bootstrap-server", b.sasl_bootstrap, "--command-config", str(conf),
                     "--topic", topic, "--from-beginning", "--timeout-ms", "12000", timeout=90)
    assert sorted(res.out.split()) == sorted("m%d" % i for i in range(5)), res.describe()
    assert "session expired" not in b.log_text(), b.log_text()[-3000:]
    # A raw client that authenticates and does not re-authenticate is closed at its first
    # request after the session ended.
    with socket.create_connection(("127.0.0.1", b.sasl_port), timeout=10) as s:
        s.sendall(kafka_request(17, 1, 1, kstr("PLAIN")))
        read_frame(s)
        s.sendall(kafka_request(36, 1, 2, kbytes(b"\x00alice\x00alice-secret")))
        resp = read_frame(s)
        correlation, code = struct.unpack(">ih", resp[:6])
        assert (correlation, code) == (2, 0)
        assert struct.unpack(">q", resp[-8:]) == (3000,)  # session_lifetime_ms
        time.sleep(3.5)
        s.sendall(kafka_request(3, 1, 3, struct.pack(">i", -1)))
        assert closed(s)
    harness.wait_until(lambda: "session" in b.log_text() and "expired" in b.log_text(), 10, "the expiry log line")


@pytest.mark.sluice_only
@pytest.mark.parametrize("inter", ["PLAIN", "SCRAM-SHA-512"])
def test_cluster_with_a_sasl_inter_broker_listener(broker_factory, kafka_tool, tmp_path, topic, inter):
    """Brokers log in to each other with PLAIN, or with SCRAM as a user created through the
    cluster, on a SASL_PLAINTEXT inter-broker listener: the transaction markers a coordinator
    sends to other owners go over it, and a SCRAM user created through one broker logs in on
    another."""
    from cluster_support import EtcdServer, cluster_overrides, live_brokers

    etcd = EtcdServer(tmp_path / "etcd").start()
    try:
        shared = tmp_path / "shared"
        brokers = []
        for node in (1, 2, 3):
            b = broker_factory(start=False, log_dir=shared, kind="sluice", name=f"node{node}")
            b.internal = f"127.0.0.1:{harness.free_port()}"
            b.sasl_port = harness.free_port()
            b.sasl_bootstrap = f"127.0.0.1:{b.sasl_port}"
            b.overrides.update(cluster_overrides(etcd, node, shared, "/sasl"))
            listeners = f"EXTERNAL://127.0.0.1:{b.port},INTERNAL://{b.internal},SECURE://{b.sasl_bootstrap}"
            b.overrides.update({
                "listeners": listeners,
                "advertised.listeners": listeners,
                "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,INTERNAL:SASL_PLAINTEXT,SECURE:SASL_PLAINTEXT",
                "inter.broker.listener.name": "INTERNAL",
                "sasl.mechanism.inter.broker.protocol": inter,
                "listener.name.internal.sasl.enabled.mechanisms": inter,
                "listener.name.internal.plain.sasl.jaas.config":
                    'org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
                    'password="broker-secret" user_broker="broker-secret";',
                "listener.name.internal.scram-sha-512.sasl.jaas.config":
                    'org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
                    'password="broker-secret";',
                "listener.name.secure.sasl.enabled.mechanisms": "SCRAM-SHA-512",
                "listener.name.secure.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
            })
            b.start()
            brokers.append(b)
        bootstrap = ",".join(b.bootstrap for b in brokers)
        harness.wait_until(lambda: len(live_brokers(bootstrap)) == 3, 30, "three brokers")
        if inter.startswith("SCRAM"):
            # The brokers' own user, created through the plaintext listener.
            add_scram_user(kafka_tool, brokers[0], "broker", "broker-secret", inter)
        # A user created through broker 1 logs in on broker 3 (its SASL listener alone).
        add_scram_user(kafka_tool, brokers[0], "frank", "frank-secret", "SCRAM-SHA-512")
        frank = rdkafka_sasl("SCRAM-SHA-512", "frank", "frank-secret")
        harness.wait_until(lambda: can_log_in(brokers[2].sasl_bootstrap, frank, timeout=3), 30,
                           "frank logs in on broker 3")
        # Transactions across the brokers, by a client on the SASL listeners.
        create_topic(bootstrap, topic, partitions=6)
        secure = ",".join(b.sasl_bootstrap for b in brokers)
        p = harness.producer(secure, **{"transactional.id": f"{topic}-txn"}, **frank)
        p.init_transactions(30)
        for t in range(3):
            p.begin_transaction()
            for i in range(60):
                p.produce(topic, value=b"%d-%d" % (t, i), partition=i % 6)
            p.commit_transaction(30)
        got = consume_partitions(secure, topic, range(6), expected=180,
                                 **{"isolation.level": "read_committed"}, **frank)
        assert sorted(m.value() for m in got) == sorted(b"%d-%d" % (t, i) for t in range(3) for i in range(60))
        logs = "".join(b.log_text() for b in brokers)
        assert "SASL login to" not in logs, logs[-3000:]
        assert "SASL authentication failed" not in logs, logs[-3000:]
    finally:
        etcd.kill()


@pytest.mark.sluice_only
def test_a_flood_of_failed_logins(broker_factory):
    """Sixty wrong-password PLAIN logins at once: each is answered SASL_AUTHENTICATION_FAILED
    no sooner than `connection.failed.authentication.delay.ms` and closed, counted in
    /metrics, logged at most about once a second (the next line says how many were left out),
    and the broker goes on serving a right login and plaintext clients. The listener takes
    PLAIN without TLS, which the start-up log warns about."""
    import threading
    delay_ms = 600
    b = sasl_broker(broker_factory, **{"connection.failed.authentication.delay.ms": str(delay_ms)})
    assert "takes SASL/PLAIN without TLS" in b.log_text()
    before = failed_authentications(b)
    lines_before = b.log_text().count("SASL authentication failed")
    answers: list = []

    def wrong_login():
        with socket.create_connection(("127.0.0.1", b.sasl_port), timeout=30) as s:
            s.sendall(kafka_request(17, 1, 1, kstr("PLAIN")))
            read_frame(s)
            sent = time.monotonic()
            s.sendall(kafka_request(36, 0, 2, kbytes(b"\0alice\0wrong")))
            resp = read_frame(s)
            answers.append((resp is not None and struct.unpack(">ih", resp[:6]) == (2, 58),
                            time.monotonic() - sent, closed(s)))

    started = time.monotonic()
    threads = [threading.Thread(target=wrong_login) for _ in range(60)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    elapsed = time.monotonic() - started
    assert len(answers) == 60, answers
    assert all(refused and shut for refused, _, shut in answers), answers
    assert min(waited for _, waited, _ in answers) >= delay_ms / 1000 * 0.9, answers
    harness.wait_until(lambda: failed_authentications(b) >= before + 60, 15, "sixty failed authentications counted")
    time.sleep(1.5)  # the limiter's last line
    lines = b.log_text().count("SASL authentication failed") - lines_before
    assert 1 <= lines <= elapsed + 3, f"{lines} log lines for 60 failed logins in {elapsed:.1f} s"
    assert can_log_in(b.sasl_bootstrap, rdkafka_sasl("PLAIN", "alice", "alice-secret"))
    assert harness.admin(b.bootstrap).list_topics(timeout=10) is not None

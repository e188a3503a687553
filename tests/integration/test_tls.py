"""TLS listeners (`listener.security.protocol.map` NAME:SSL with Kafka's `ssl.*` settings): the Java
client and Kafka's tools, and librdkafka, over TLS with a certificate made by openssl; mutual TLS
(`ssl.client.auth=required`) refusing a client without a certificate; misconfigurations refused
at startup with their reason.

Each broker keeps its PLAINTEXT listener on the harness's port (the harness checks it is up) and
gets an SSL listener on another port. The tests not marked sluice_only run against Apache Kafka
too (SLUICE_TEST_TARGET=kafka), configured the same way; what only Sluice shows (its metrics and
log lines) is checked on Sluice alone.
"""

from __future__ import annotations

import re
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

import harness
from harness import CONSOLE_CONSUMER, TOPIC_COMMAND, consume_partitions, create_topic, produce_all


def openssl(*args, cwd: Path) -> None:
    p = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, f"openssl {' '.join(args)}:\n{p.stderr}"


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    """A CA, a broker certificate for 127.0.0.1 and localhost, and a client certificate, as an
    operator makes them with openssl (keys unencrypted, PKCS#8)."""
    d = tmp_path_factory.mktemp("certs")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
            "-days", "2", "-subj", "/CN=sluice-test-ca", cwd=d)
    for name, subject, ext in [
        ("broker", "/CN=localhost/O=sluice", "subjectAltName=IP:127.0.0.1,DNS:localhost"),
        ("client", "/CN=alice/OU=apps/O=sluice", "extendedKeyUsage=clientAuth"),
    ]:
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
                "-subj", subject, cwd=d)
        (d / f"{name}.ext").write_text(ext + "\n")
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=d)
        # Kafka's PEM keystore: the key and the chain in one file.
        (d / f"{name}.pem").write_text((d / f"{name}.key").read_text() + (d / f"{name}.crt").read_text())
    return d


def tls_broker(broker_factory, certs: Path, **ssl):
    """A broker with PLAINTEXT on the harness port and SSL on ``b.tls_port``."""
    b = broker_factory(start=False)
    b.tls_port = harness.free_port()
    b.tls_bootstrap = f"127.0.0.1:{b.tls_port}"
    listeners = f"PLAINTEXT://127.0.0.1:{b.port},SSL://127.0.0.1:{b.tls_port}"
    b.overrides.update({
        "listeners": listeners,
        "advertised.listeners": listeners,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs / "broker.pem"),
    })
    if b.kind == "kafka":
        b.overrides.update({
            "listeners": listeners + f",CONTROLLER://127.0.0.1:{b.controller_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL,CONTROLLER:PLAINTEXT",
        })
    else:
        b.metrics_port = harness.free_port()
        b.overrides["sluice.metrics.listener"] = f"127.0.0.1:{b.metrics_port}"
    b.overrides.update(ssl)
    b.start()
    return b


def rdkafka_ssl(certs: Path, client_cert: bool = False) -> dict:
    conf = {"security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem")}
    if client_cert:
        conf.update({"ssl.certificate.location": str(certs / "client.crt"),
                     "ssl.key.location": str(certs / "client.key")})
    return conf


def java_ssl_config(tmp_path: Path, certs: Path, client_cert: bool = False) -> Path:
    lines = ["security.protocol=SSL", "ssl.truststore.type=PEM", f"ssl.truststore.location={certs / 'ca.pem'}"]
    if client_cert:
        lines += ["ssl.keystore.type=PEM", f"ssl.keystore.location={certs / 'client.pem'}"]
    f = tmp_path / ("client-mtls.properties" if client_cert else "client-ssl.properties")
    f.write_text("\n".join(lines) + "\n")
    return f


def failed_authentications(b) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{b.metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    m = re.search(r'^kafka_server_socket_server_metrics_failed_authentication_total\{listener="SSL",'
                  r'networkProcessor="0"\} (\S+)$', text, re.M)
    assert m, text[-2000:]
    return float(m.group(1))


def test_java_tools_and_librdkafka_over_tls(broker_factory, certs, tmp_path, kafka_tool, topic):
    b = tls_broker(broker_factory, certs)
    # librdkafka: produce and read back over TLS; records large enough that a fetch's record
    # regions are read and encrypted (no sendfile on a TLS connection).
    create_topic(b.bootstrap, topic, partitions=2)
    records = [{"key": b"k%d" % i, "value": (b"%06d" % i) * 200, "partition": i % 2} for i in range(600)]
    produce_all(harness.producer(b.tls_bootstrap, **rdkafka_ssl(certs)), topic, records)
    got = consume_partitions(b.tls_bootstrap, topic, range(2), expected=600, **rdkafka_ssl(certs))
    assert sorted(m.value() for m in got) == sorted(r["value"] for r in records)

    # The Java client: kafka-topics and the console consumer with a PEM truststore.
    conf = java_ssl_config(tmp_path, certs)
    res = kafka_tool(TOPIC_COMMAND, "--bootstrap-server", b.tls_bootstrap, "--command-config", str(conf),
                     "--describe", "--topic", topic)
    res.check("kafka-topics --describe over TLS")
    assert "PartitionCount: 2" in res.out, res.out
    res = kafka_tool(CONSOLE_CONSUMER, "--bootstrap-server", b.tls_bootstrap, "--command-config", str(conf),
                     "--topic", topic, "--from-beginning", "--max-messages", "600", "--timeout-ms", "30000",
                     "--formatter-property", "print.value=false", "--formatter-property", "print.key=true")
    res.check("kafka-console-consumer over TLS")
    assert sorted(res.out.split()) == sorted("k%d" % i for i in range(600))
    if b.kind == "sluice":
        assert failed_authentications(b) == 0


def test_mutual_tls_refuses_a_client_without_a_certificate(broker_factory, certs, tmp_path, kafka_tool, topic):
    b = tls_broker(broker_factory, certs, **{"ssl.client.auth": "required",
                                             "ssl.truststore.type": "PEM",
                                             "ssl.truststore.location": str(certs / "ca.pem")})
    create_topic(b.bootstrap, topic, partitions=1)
    # With the client certificate: librdkafka and the Java tools work.
    produce_all(harness.producer(b.tls_bootstrap, **rdkafka_ssl(certs, client_cert=True)), topic,
                [{"value": b"m%d" % i, "partition": 0} for i in range(20)])
    got = consume_partitions(b.tls_bootstrap, topic, [0], expected=20, **rdkafka_ssl(certs, client_cert=True))
    assert len(got) == 20
    res = kafka_tool(TOPIC_COMMAND, "--bootstrap-server", b.tls_bootstrap, "--command-config",
                     str(java_ssl_config(tmp_path, certs, client_cert=True)), "--list")
    res.check("kafka-topics --list with a client certificate")
    assert topic in res.out.split()

    # Without one: the handshake fails, the client gets no metadata (Sluice counts and logs it).
    sluice = b.kind == "sluice"
    before = failed_authentications(b) if sluice else 0
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": b.tls_bootstrap, **rdkafka_ssl(certs)})
    with pytest.raises(Exception):
        admin.list_topics(timeout=5)
    if sluice:
        harness.wait_until(lambda: failed_authentications(b) > before, 15, "a failed authentication counted")
        assert "TLS handshake failed" in b.log_text()
    del admin  # it would go on trying

    # Plaintext bytes on the TLS port: the connection is closed, the broker goes on.
    with socket.create_connection(("127.0.0.1", b.tls_port), timeout=10) as s:
        s.sendall(b"\x00\x00\x00\x10" + b"\x00" * 16)
        s.settimeout(10)
        try:
            while s.recv(4096):
                pass
        except ConnectionResetError:
            pass
    assert len(consume_partitions(b.tls_bootstrap, topic, [0], expected=20,
                                  **rdkafka_ssl(certs, client_cert=True))) == 20
    if not sluice:
        return

    # A connection closed before its first byte (a liveness check: the cluster's death probe,
    # a load balancer's) is no failed handshake: not counted, not logged as one.
    harness.wait_until(lambda: _unchanged_for_a_second(lambda: failed_authentications(b)), 30,
                       "no more failed authentications")
    before, logged = failed_authentications(b), b.log_text().count("TLS handshake failed")
    for _ in range(5):
        socket.create_connection(("127.0.0.1", b.tls_port), timeout=10).close()
    assert len(consume_partitions(b.tls_bootstrap, topic, [0], expected=20,
                                  **rdkafka_ssl(certs, client_cert=True))) == 20
    assert failed_authentications(b) == before
    assert b.log_text().count("TLS handshake failed") == logged


def _unchanged_for_a_second(read) -> bool:
    before = read()
    time.sleep(1)
    return read() == before


@pytest.mark.sluice_only
@pytest.mark.parametrize("props,message", [
    ({}, "needs a keystore"),
    ({"ssl.keystore.location": "{certs}/broker.pem", "ssl.keystore.type": "JKS"}, "JKS keystores are Java's own format"),
    ({"ssl.keystore.location": "{certs}/broker.pem", "ssl.client.auth": "required"}, "has no truststore"),
    ({"ssl.keystore.location": "{certs}/broker.pem", "ssl.enabled.protocols": "TLSv1.1"}, "only TLSv1.2 and TLSv1.3"),
    ({"ssl.keystore.location": "{certs}/broker.pem", "ssl.cipher.suites": "TLS_RSA_WITH_NULL_SHA"},
     "which is not served"),
    ({"ssl.keystore.location": "{certs}/ca.pem"}, "cannot read a private key"),
    ({"ssl.keystore.location": "{certs}/nope.pem", "ssl.keystore.type": "PEM"}, "cannot read"),
])
def test_tls_misconfigurations_are_refused_with_their_reason(tmp_path, certs, props, message):
    port, tls_port = harness.free_port(), harness.free_port()
    conf = {"node.id": 1, "log.dirs": str(tmp_path / "data"),
            "listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{tls_port}"}
    conf.update({k: v.format(certs=certs) for k, v in props.items()})
    harness.write_properties(tmp_path / "server.properties", conf)
    p = subprocess.run([str(harness.SLUICE_BIN), "serve", "--config", str(tmp_path / "server.properties")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert message in p.stdout + p.stderr, p.stdout + p.stderr


def _handshake(port: int, certs: Path, version=None, ciphers=None):
    """A TLS handshake with the broker's SSL port from Python's ssl module: the protocol
    version and cipher negotiated, or the SSLError raised."""
    import ssl
    ctx = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    if version is not None:
        ctx.minimum_version = ctx.maximum_version = version
    if ciphers is not None:
        ctx.set_ciphers(ciphers)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                return tls.version(), tls.cipher()[0]
    except ssl.SSLError as e:
        return e


def test_enabled_protocols_and_cipher_suites_are_what_a_connection_can_negotiate(broker_factory, certs):
    """`ssl.enabled.protocols` and `ssl.cipher.suites` restrict what a client can negotiate,
    not only what starts: TLS 1.3 refused by a listener enabled for TLS 1.2 only, and a TLS
    1.2 suite outside the list refused while the listed one is taken."""
    import ssl
    b = tls_broker(broker_factory, certs, **{
        "ssl.enabled.protocols": "TLSv1.2",
        "ssl.cipher.suites": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"})
    assert isinstance(_handshake(b.tls_port, certs, ssl.TLSVersion.TLSv1_3), ssl.SSLError)
    assert _handshake(b.tls_port, certs, ssl.TLSVersion.TLSv1_2) == ("TLSv1.2", "ECDHE-RSA-AES128-GCM-SHA256")
    refused = _handshake(b.tls_port, certs, ssl.TLSVersion.TLSv1_2, ciphers="ECDHE-RSA-AES256-GCM-SHA384")
    assert isinstance(refused, ssl.SSLError), refused
    # Unrestricted, the same client gets TLS 1.3.
    b2 = tls_broker(broker_factory, certs)
    assert _handshake(b2.tls_port, certs)[0] == "TLSv1.3"


@pytest.mark.sluice_only
def test_brokers_call_each_other_over_mutual_tls(broker_factory, certs, tmp_path, topic):
    """A cluster whose inter-broker listener is SSL with client certificates required: the
    transaction markers a coordinator sends to the partitions' owners go over it, and clients
    on the PLAINTEXT listener read a committed transaction in full."""
    from cluster_support import EtcdServer, cluster_overrides, live_brokers

    etcd = EtcdServer(tmp_path / "etcd").start()
    try:
        shared = tmp_path / "shared"
        brokers = []
        for node in (1, 2, 3):
            b = broker_factory(start=False, log_dir=shared, kind="sluice", name=f"node{node}")
            b.internal = f"127.0.0.1:{harness.free_port()}"
            b.overrides.update(cluster_overrides(etcd, node, shared, "/tls"))
            b.overrides.update({
                "listeners": f"EXTERNAL://127.0.0.1:{b.port},INTERNAL://{b.internal}",
                "advertised.listeners": f"EXTERNAL://127.0.0.1:{b.port},INTERNAL://{b.internal}",
                "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,INTERNAL:SSL",
                "inter.broker.listener.name": "INTERNAL",
                "listener.name.internal.ssl.keystore.location": str(certs / "broker.pem"),
                "listener.name.internal.ssl.truststore.location": str(certs / "ca.pem"),
                "listener.name.internal.ssl.client.auth": "required",
            })
            b.start()
            brokers.append(b)
        bootstrap = ",".join(b.bootstrap for b in brokers)
        harness.wait_until(lambda: len(live_brokers(bootstrap)) == 3, 30, "three brokers")
        create_topic(bootstrap, topic, partitions=6)
        p = harness.producer(bootstrap, **{"transactional.id": f"{topic}-txn"})
        p.init_transactions(30)
        for t in range(3):
            p.begin_transaction()
            for i in range(60):
                p.produce(topic, value=b"%d-%d" % (t, i), partition=i % 6)
            p.commit_transaction(30)
        got = consume_partitions(bootstrap, topic, range(6), expected=180,
                                 **{"isolation.level": "read_committed"})
        assert sorted(m.value() for m in got) == sorted(b"%d-%d" % (t, i) for t in range(3) for i in range(60))
        logs = "".join(b.log_text() for b in brokers)
        assert "TLS handshake failed" not in logs, logs[-3000:]
    finally:
        etcd.kill()

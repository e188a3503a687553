"""TLS certificates replaced without a restart (issue 55), and `ssl.client.auth=requested`.

A listener's keystore is changed with Kafka's own `kafka-configs --entity-type brokers
--entity-name <id> --alter --add-config listener.name.<listener>.ssl.keystore.location=...`:
connections opened afterwards get the new certificate (the served certificate's fingerprint is
read with Python's ssl module), connections opened before go on with the old one. A keystore
replaced in place is taken up when the same config is set again. Updates Kafka refuses (a wrong
password, a missing file, a certificate with another subject or fewer alternative names, a
keystore setting without the listener prefix) are refused with Kafka's error and the listener
keeps its certificate. With `ssl.client.auth=requested` a client without a certificate is
User:ANONYMOUS and one with a certificate its mapped subject.

Everything is made at test time with openssl. Each broker keeps a PLAINTEXT listener on the
harness's port (User:ANONYMOUS, a super user where ACLs are on). The tests not marked
sluice_only run against Apache Kafka too (SLUICE_TEST_TARGET=kafka), configured the same way.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import ssl
import struct
import subprocess
from pathlib import Path

import pytest

import harness
from harness import CONFIG_COMMAND, TOPIC_COMMAND, consume_partitions, create_topic, produce_all
from test_acls import STANDARD_AUTHORIZER, acls, produce_error

PASSWORD = "store-secret"
OTHER_PASSWORD = "other-secret"
SUBJECT = "/CN=localhost/O=sluice"
SANS = "subjectAltName=IP:127.0.0.1,DNS:localhost"


def run(*cmd, cwd: Path) -> None:
    p = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"{' '.join(cmd)}:\n{p.stdout}\n{p.stderr}"


def ca(d: Path, name: str) -> None:
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
        f"{name}.pem", "-days", "2", "-subj", f"/CN=sluice-test-{name}", cwd=d)


def signed(d: Path, name: str, subject: str, ext: str, by: str = "ca", password: str = PASSWORD) -> None:
    """A new key ``name``.key and its certificate ``name``.crt signed by CA ``by``; the two as a
    PEM keystore ``name``.pem and a PKCS12 keystore ``name``.p12 (store and key password
    ``password``)."""
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
        "-subj", subject, cwd=d)
    (d / f"{name}.ext").write_text(ext + "\n")
    run("openssl", "x509", "-req", "-in", f"{name}.csr", "-CA", f"{by}.pem", "-CAkey", f"{by}.key",
        "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=d)
    (d / f"{name}.pem").write_text((d / f"{name}.key").read_text() + (d / f"{name}.crt").read_text())
    run("openssl", "pkcs12", "-export", "-in", f"{name}.crt", "-inkey", f"{name}.key", "-certfile", f"{by}.pem",
        "-name", "broker", "-out", f"{name}.p12", "-passout", f"pass:{password}", cwd=d)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    """A CA and, each with a key of its own: the broker's first certificate (``old``), its
    successor (``new``: same subject and names), one with a password of its own, one with
    another subject, one with fewer alternative names, one from another CA; client
    certificates for alice and eve, and one of another CA (mallory)."""
    d = tmp_path_factory.mktemp("pki")
    ca(d, "ca")
    ca(d, "ca2")
    signed(d, "old", SUBJECT, SANS)
    signed(d, "new", SUBJECT, SANS)
    signed(d, "newpw", SUBJECT, SANS, password=OTHER_PASSWORD)
    signed(d, "renamed", "/CN=elsewhere/O=sluice", SANS)
    signed(d, "fewer", SUBJECT, "subjectAltName=IP:127.0.0.1")
    signed(d, "foreign", SUBJECT, SANS, by="ca2")
    signed(d, "alice", "/C=US/O=Acme/OU=eng/CN=Alice", "extendedKeyUsage=clientAuth")
    signed(d, "eve", "/O=Evil/CN=eve", "extendedKeyUsage=clientAuth")
    signed(d, "mallory", "/CN=mallory", "extendedKeyUsage=clientAuth", by="ca2")
    # A truststore with both CAs, for clients that must reach a broker whatever it serves.
    (d / "both.pem").write_text((d / "ca.pem").read_text() + (d / "ca2.pem").read_text())
    return d


def fingerprint_of(pki: Path, name: str) -> str:
    der = ssl.PEM_cert_to_DER_cert((pki / f"{name}.crt").read_text())
    return hashlib.sha256(der).hexdigest()


def served(port: int, pki: Path, client: str | None = None) -> str:
    """The SHA-256 fingerprint of the certificate a new connection to ``port`` gets (checked
    against both CAs; names not checked)."""
    ctx = ssl.create_default_context(cafile=str(pki / "both.pem"))
    ctx.check_hostname = False
    if client:
        ctx.load_cert_chain(str(pki / f"{client}.crt"), str(pki / f"{client}.key"))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        with ctx.wrap_socket(s) as t:
            return hashlib.sha256(t.getpeercert(binary_form=True)).hexdigest()


def wait_served(port: int, pki: Path, name: str, client: str | None = None, timeout: float = 30) -> None:
    want = fingerprint_of(pki, name)
    harness.wait_until(lambda: served(port, pki, client) == want, timeout, f"port {port} to serve {name}.crt")


class OpenConnection:
    """A TLS connection kept open across a keystore change, speaking ApiVersions v0."""

    def __init__(self, port: int, pki: Path):
        ctx = ssl.create_default_context(cafile=str(pki / "both.pem"))
        ctx.check_hostname = False
        self.sock = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=15))
        self.fingerprint = hashlib.sha256(self.sock.getpeercert(binary_form=True)).hexdigest()
        self.correlation = 0

    def api_versions(self) -> int:
        """Send ApiVersions v0, return its error code."""
        self.correlation += 1
        client = b"tls-reload-test"
        body = struct.pack(">hhih", 18, 0, self.correlation, len(client)) + client
        self.sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", self._read(4))[0]
        frame = self._read(size)
        correlation, error = struct.unpack(">ih", frame[:6])
        assert correlation == self.correlation
        return error

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            assert chunk, "connection closed"
            buf += chunk
        return buf

    def close(self) -> None:
        self.sock.close()


def tls_broker(broker_factory, pki: Path, start: bool = True, **extra):
    """PLAINTEXT on the harness port, SSL on ``b.tls_port`` with the PKCS12 keystore old.p12
    (server.properties' plain ssl.* settings) and the CA as truststore."""
    b = broker_factory(start=False)
    b.tls_port = harness.free_port()
    b.tls_bootstrap = f"127.0.0.1:{b.tls_port}"
    listeners = f"PLAINTEXT://127.0.0.1:{b.port},SSL://127.0.0.1:{b.tls_port}"
    protocols = "PLAINTEXT:PLAINTEXT,SSL:SSL"
    advertised = listeners
    if b.kind == "kafka":
        listeners += f",CONTROLLER://127.0.0.1:{b.controller_port}"
        protocols += ",CONTROLLER:PLAINTEXT"
    b.overrides.update({
        "listeners": listeners,
        "advertised.listeners": advertised,
        "listener.security.protocol.map": protocols,
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(pki / "old.p12"),
        "ssl.keystore.password": PASSWORD,
        "ssl.key.password": PASSWORD,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki / "ca.pem"),
    })
    b.overrides.update(extra)
    if start:
        b.start()
    return b


def alter(kafka_tool, b, *configs: str, node: int = 1, bootstrap: str | None = None):
    return kafka_tool(CONFIG_COMMAND, "--bootstrap-server", bootstrap or b.bootstrap, "--entity-type", "brokers",
                      "--entity-name", str(node), "--alter", "--add-config", ",".join(configs))


def describe(kafka_tool, b, node: int = 1) -> str:
    return kafka_tool(CONFIG_COMMAND, "--bootstrap-server", b.bootstrap, "--entity-type", "brokers",
                      "--entity-name", str(node), "--describe").check("kafka-configs --describe").out


def keystore(pki: Path, name: str, password: str = PASSWORD, listener: str = "ssl") -> list:
    p = f"listener.name.{listener}."
    return [f"{p}ssl.keystore.location={pki / name}", f"{p}ssl.keystore.password={password}",
            f"{p}ssl.key.password={password}"]


def rdkafka_ssl(pki: Path, who: str | None = None, ca_file: str = "ca.pem") -> dict:
    conf = {"security.protocol": "SSL", "ssl.ca.location": str(pki / ca_file)}
    if who:
        conf.update({"ssl.certificate.location": str(pki / f"{who}.crt"),
                     "ssl.key.location": str(pki / f"{who}.key")})
    return conf


def test_keystore_altered_with_kafka_configs(broker_factory, pki, tmp_path, kafka_tool, topic):
    """A librdkafka producer and a raw TLS connection open; the keystore altered to a new key
    and certificate: a new connection gets the new certificate, the open ones go on; the
    password is never shown; a restart keeps the new keystore."""
    b = tls_broker(broker_factory, pki)
    create_topic(b.bootstrap, topic, partitions=1)
    assert served(b.tls_port, pki) == fingerprint_of(pki, "old")
    producer = harness.producer(b.tls_bootstrap, **rdkafka_ssl(pki))
    produce_all(producer, topic, [{"value": b"before", "partition": 0}])
    open_conn = OpenConnection(b.tls_port, pki)
    assert open_conn.api_versions() == 0

    alter(kafka_tool, b, *keystore(pki, "new.p12")).check("kafka-configs --alter the keystore")
    wait_served(b.tls_port, pki, "new")
    # The connections opened before the change go on, with the certificate they began with.
    assert open_conn.fingerprint == fingerprint_of(pki, "old")
    assert open_conn.api_versions() == 0
    produce_all(producer, topic, [{"value": b"after", "partition": 0}])
    open_conn.close()
    # New clients: librdkafka and the Java tools trust the new certificate (same CA).
    got = consume_partitions(b.tls_bootstrap, topic, [0], expected=2, **rdkafka_ssl(pki))
    assert sorted(m.value() for m in got) == [b"after", b"before"]
    conf = tmp_path / "client.properties"
    conf.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={pki / 'ca.pem'}\n")
    res = kafka_tool(TOPIC_COMMAND, "--bootstrap-server", b.tls_bootstrap, "--command-config", str(conf), "--list")
    res.check("kafka-topics --list over TLS after the change")
    assert topic in res.out.split()

    out = describe(kafka_tool, b)
    assert f"listener.name.ssl.ssl.keystore.location={pki / 'new.p12'}" in out, out
    assert "listener.name.ssl.ssl.keystore.password=null sensitive=true" in out, out
    assert PASSWORD not in out, out

    # A password of the key's own, and back.
    alter(kafka_tool, b, *keystore(pki, "newpw.p12", OTHER_PASSWORD)).check("kafka-configs --alter (newpw)")
    wait_served(b.tls_port, pki, "newpw")
    b.restart()
    wait_served(b.tls_port, pki, "newpw")


def test_keystore_replaced_in_place_is_taken_up_when_set_again(broker_factory, pki, tmp_path, kafka_tool):
    """The keystore file overwritten with another: nothing changes until the same config is
    set again, as on Kafka (which compares the file's modification time)."""
    live = tmp_path / "live.p12"
    shutil.copy(pki / "old.p12", live)
    b = tls_broker(broker_factory, pki)
    alter(kafka_tool, b, f"listener.name.ssl.ssl.keystore.location={live}").check("kafka-configs --alter")
    assert served(b.tls_port, pki) == fingerprint_of(pki, "old")
    shutil.copy(pki / "new.p12", live)
    st = live.stat()
    os.utime(live, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    assert served(b.tls_port, pki) == fingerprint_of(pki, "old")
    alter(kafka_tool, b, f"listener.name.ssl.ssl.keystore.location={live}").check("kafka-configs --alter again")
    wait_served(b.tls_port, pki, "new")

    # Replaced in place by a keystore of another subject: Sluice refuses the update as it
    # refuses a new path (Kafka accepts it, logs the failure and keeps the certificate).
    shutil.copy(pki / "renamed.p12", live)
    st = live.stat()
    os.utime(live, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    res = alter(kafka_tool, b, f"listener.name.ssl.ssl.keystore.location={live}")
    if b.kind == "sluice":
        assert res.rc != 0 and "Keystore DistinguishedName does not match" in res.out + res.err, res.describe()
    else:
        res.check("kafka-configs --alter (Kafka accepts it)")
    assert served(b.tls_port, pki) == fingerprint_of(pki, "new")


@pytest.mark.parametrize("configs,reason", [
    (lambda pki: keystore(pki, "new.p12", "wrong-password"), "password"),
    (lambda pki: keystore(pki, "missing.p12"), "missing.p12"),
    (lambda pki: keystore(pki, "renamed.p12"), "Keystore DistinguishedName does not match"),
    (lambda pki: keystore(pki, "fewer.p12"), "Keystore SubjectAltNames do not match"),
], ids=["wrong-password", "missing-file", "other-subject", "fewer-names"])
def test_bad_keystore_updates_are_refused(broker_factory, pki, kafka_tool, configs, reason):
    """Kafka's INVALID_REQUEST ("Invalid dynamic configuration"); the listener keeps its
    certificate and nothing is stored."""
    b = tls_broker(broker_factory, pki)
    res = alter(kafka_tool, b, *configs(pki))
    assert res.rc != 0, res.describe()
    text = res.out + res.err
    assert "InvalidRequestException" in text and "Invalid dynamic configuration" in text, res.describe()
    if b.kind == "sluice":
        assert reason in text, res.describe()
        assert "wrong-password" not in b.log_text() and PASSWORD not in b.log_text()
    assert served(b.tls_port, pki) == fingerprint_of(pki, "old")
    assert "keystore" not in describe(kafka_tool, b)


def test_keystore_settings_need_the_listener_prefix(broker_factory, pki, kafka_tool):
    b = tls_broker(broker_factory, pki)
    res = alter(kafka_tool, b, f"ssl.keystore.location={pki / 'new.p12'}")
    assert res.rc != 0, res.describe()
    assert ("These security configs can be dynamically updated only per-listener using the listener prefix: "
            "[ssl.keystore.location]") in res.out + res.err, res.describe()
    assert served(b.tls_port, pki) == fingerprint_of(pki, "old")


def test_subject_change_allowed_by_ssl_allow_dn_changes(broker_factory, pki, kafka_tool):
    b = tls_broker(broker_factory, pki, **{"listener.name.ssl.ssl.allow.dn.changes": "true"})
    alter(kafka_tool, b, *keystore(pki, "renamed.p12")).check("kafka-configs --alter (another subject)")
    wait_served(b.tls_port, pki, "renamed")
    # The names are still checked.
    res = alter(kafka_tool, b, *keystore(pki, "fewer.p12"))
    assert res.rc != 0 and "Invalid dynamic configuration" in res.out + res.err, res.describe()


def test_inline_pem_keystore_altered(broker_factory, pki, tmp_path, kafka_tool):
    """A listener whose keystore is inline PEM (ssl.keystore.certificate.chain and
    ssl.keystore.key) is given another one with kafka-configs --add-config-file; neither value
    is shown by --describe."""
    def one_line(name: str) -> str:
        return (pki / name).read_text().strip().replace("\n", "\\n")

    b = tls_broker(broker_factory, pki, start=False)
    for k in ("ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password"):
        b.overrides.pop(k)
    b.overrides.update({
        "listener.name.ssl.ssl.keystore.type": "PEM",
        "listener.name.ssl.ssl.keystore.certificate.chain": one_line("old.crt"),
        "listener.name.ssl.ssl.keystore.key": one_line("old.key"),
    })
    b.start()
    assert served(b.tls_port, pki) == fingerprint_of(pki, "old")
    change = tmp_path / "new-keystore.properties"
    change.write_text(f"listener.name.ssl.ssl.keystore.certificate.chain={one_line('new.crt')}\n"
                      f"listener.name.ssl.ssl.keystore.key={one_line('new.key')}\n")
    kafka_tool(CONFIG_COMMAND, "--bootstrap-server", b.bootstrap, "--entity-type", "brokers", "--entity-name", "1",
               "--alter", "--add-config-file", str(change)).check("kafka-configs --add-config-file")
    wait_served(b.tls_port, pki, "new")
    out = describe(kafka_tool, b)
    assert "listener.name.ssl.ssl.keystore.key=null sensitive=true" in out, out
    assert "listener.name.ssl.ssl.keystore.certificate.chain=null sensitive=true" in out, out
    assert "BEGIN" not in out, out


def test_client_auth_requested(broker_factory, pki, tmp_path, kafka_tool, topic):
    """`ssl.client.auth=requested`: a client without a certificate connects as User:ANONYMOUS
    (a super user here), one with a certificate is its mapped subject (alice may write by her
    ACL, eve has none)."""
    b = tls_broker(broker_factory, pki, **{
        "ssl.client.auth": "requested",
        "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=([^,]+),OU=eng,O=Acme,C=US$/$1/L,DEFAULT",
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": "User:ANONYMOUS",
    })
    create_topic(b.bootstrap, topic, partitions=1)
    acls(kafka_tool, b, "--add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", topic)

    assert produce_error(b.tls_bootstrap, rdkafka_ssl(pki), topic) is None
    assert produce_error(b.tls_bootstrap, rdkafka_ssl(pki, "alice"), topic) is None
    assert produce_error(b.tls_bootstrap, rdkafka_ssl(pki, "eve"), topic) == "TOPIC_AUTHORIZATION_FAILED"
    # Mallory's certificate is of a CA the broker does not name in its request for one:
    # librdkafka (OpenSSL) does not send it, and she is User:ANONYMOUS, as with Kafka.
    assert produce_error(b.tls_bootstrap, rdkafka_ssl(pki, "mallory"), topic) is None

    # The Java client without a keystore.
    conf = tmp_path / "client.properties"
    conf.write_text(f"security.protocol=SSL\nssl.truststore.type=PEM\nssl.truststore.location={pki / 'ca.pem'}\n")
    res = kafka_tool(TOPIC_COMMAND, "--bootstrap-server", b.tls_bootstrap, "--command-config", str(conf), "--list")
    res.check("kafka-topics --list without a client certificate")
    assert topic in res.out.split()
    if b.kind == "sluice":
        harness.wait_until(lambda: "Principal = User:CN=eve,O=Evil is Denied" in b.log_text(), 15,
                           "eve's denial logged")


# ---------------------------------------------------------------- cluster mode (etcd)

@pytest.mark.sluice_only
def test_cluster_update_for_one_broker_applies_to_it(broker_factory, pki, tmp_path, kafka_tool, topic):
    """Two brokers whose inter-broker listener is SSL with client certificates required: broker
    2's keystore altered through broker 1 (kafka-configs sends it to broker 2): broker 2 serves
    the new certificate, broker 1 still the old one, and transactions (markers between the
    brokers) go on. A keystore of another CA is refused on the inter-broker listener: the
    other broker's truststore would not accept it."""
    from cluster_support import EtcdServer, cluster_overrides, live_brokers

    etcd = EtcdServer(tmp_path / "etcd").start()
    try:
        shared = tmp_path / "shared"
        brokers = []
        for node in (1, 2):
            b = broker_factory(start=False, log_dir=shared, kind="sluice", name=f"node{node}")
            b.internal_port = harness.free_port()
            internal = f"127.0.0.1:{b.internal_port}"
            b.overrides.update(cluster_overrides(etcd, node, shared, "/tls-reload"))
            b.overrides.update({
                "listeners": f"EXTERNAL://127.0.0.1:{b.port},INTERNAL://{internal}",
                "advertised.listeners": f"EXTERNAL://127.0.0.1:{b.port},INTERNAL://{internal}",
                "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,INTERNAL:SSL",
                "inter.broker.listener.name": "INTERNAL",
                "listener.name.internal.ssl.keystore.location": str(pki / "old.pem"),
                "listener.name.internal.ssl.truststore.location": str(pki / "ca.pem"),
                "listener.name.internal.ssl.client.auth": "required",
            })
            b.start()
            brokers.append(b)
        n1, n2 = brokers
        bootstrap = ",".join(b.bootstrap for b in brokers)
        harness.wait_until(lambda: len(live_brokers(bootstrap)) == 2, 30, "two brokers")

        res = alter(kafka_tool, n1, "listener.name.internal.ssl.keystore.location=" + str(pki / "foreign.pem"), node=2)
        assert res.rc != 0 and "not trusted by the old truststore" in res.out + res.err, res.describe()

        alter(kafka_tool, n1, "listener.name.internal.ssl.keystore.location=" + str(pki / "new.pem"),
              node=2).check("kafka-configs --alter broker 2's keystore through broker 1")
        wait_served(n2.internal_port, pki, "new", client="alice")
        assert served(n1.internal_port, pki, client="alice") == fingerprint_of(pki, "old")
        assert "listener.name.internal.ssl.keystore.location" not in describe(kafka_tool, n1, node=1)
        assert f"listener.name.internal.ssl.keystore.location={pki / 'new.pem'}" in describe(kafka_tool, n2, node=2)

        create_topic(bootstrap, topic, partitions=4)
        p = harness.producer(bootstrap, **{"transactional.id": f"{topic}-txn"})
        p.init_transactions(30)
        for t in range(2):
            p.begin_transaction()
            for i in range(40):
                p.produce(topic, value=b"%d-%d" % (t, i), partition=i % 4)
            p.commit_transaction(30)
        got = consume_partitions(bootstrap, topic, range(4), expected=80, **{"isolation.level": "read_committed"})
        assert sorted(m.value() for m in got) == sorted(b"%d-%d" % (t, i) for t in range(2) for i in range(40))
        logs = "".join(b.log_text() for b in brokers)
        assert "TLS handshake failed" not in logs, logs[-3000:]
    finally:
        etcd.kill()

"""Mutual TLS principals and PKCS12 stores (issue 55): on an SSL listener with
`ssl.client.auth=required`, a client's principal is its certificate's subject as Java prints it
(RFC 2253), mapped by `ssl.principal.mapping.rules`, and ACLs are decided on it; the broker's
keystore and truststore are PKCS12 files made by `openssl pkcs12 -export` and by `keytool`.

Everything is made at test time (openssl, and keytool from the JDK the tools run on); no key is
committed. Each broker keeps a PLAINTEXT listener on the harness's port, whose principal
(User:ANONYMOUS) is a super user: the tests manage topics and ACLs through it. The tests not
marked sluice_only run against Apache Kafka too (SLUICE_TEST_TARGET=kafka), configured the same
way: the principals' names, the denials and the stores are Kafka's.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

import harness
from harness import CONSOLE_CONSUMER, CONSOLE_PRODUCER, create_topic
from test_acls import STANDARD_AUTHORIZER, acls, group_consume_error, produce_error

PASSWORD = "store-secret"

# The rules of the SSL listener: Alice's subject is rewritten by the RULE (lower-cased), any
# other by DEFAULT.
RULES = r"RULE:^CN=([^,]+),OU=eng,O=Acme,C=US$/$1@eng/L,DEFAULT"
ALICE = "User:alice@eng"                         # CN=Alice,OU=eng,O=Acme,C=US, by the RULE
BOB = r"User:CN=bob\, jr,OU=ops+UID=b1,O=Acme"   # by DEFAULT: escapes and a multi-valued RDN
EVE = "User:CN=eve,O=Evil"                       # no ACL


def run(*cmd, cwd: Path) -> None:
    p = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"{' '.join(cmd)}:\n{p.stdout}\n{p.stderr}"


def openssl(*args, cwd: Path) -> None:
    run("openssl", *args, cwd=cwd)


def signed(d: Path, name: str, subject: str, ext: str, multivalue: bool = False) -> None:
    """``name``.key (PKCS#8, unencrypted) and ``name``.crt signed by the CA."""
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", subject, "-utf8", *(["-multivalue-rdn"] if multivalue else []), cwd=d)
    (d / f"{name}.ext").write_text(ext + "\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=d)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    """A CA; the broker's certificate for 127.0.0.1 in PKCS12 keystores made three ways
    (OpenSSL 3's defaults: PBES2/AES-256 and a SHA-256 MAC; OpenSSL's legacy SHA-1/3DES; keytool);
    a PKCS12 truststore made by keytool; client certificates for alice, bob and eve."""
    d = tmp_path_factory.mktemp("pki")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
            "-days", "2", "-subj", "/CN=sluice-test-ca", cwd=d)
    signed(d, "broker", "/CN=localhost/O=sluice", "subjectAltName=IP:127.0.0.1,DNS:localhost")
    openssl("pkcs12", "-export", "-in", "broker.crt", "-inkey", "broker.key", "-certfile", "ca.pem",
            "-name", "broker", "-out", "broker.p12", "-passout", f"pass:{PASSWORD}", cwd=d)
    openssl("pkcs12", "-export", "-in", "broker.crt", "-inkey", "broker.key", "-name", "broker",
            "-keypbe", "PBE-SHA1-3DES", "-certpbe", "PBE-SHA1-3DES", "-macalg", "sha1",
            "-out", "broker-legacy.p12", "-passout", f"pass:{PASSWORD}", cwd=d)
    # keytool's own: a key pair made by keytool, its request signed by the CA, imported back.
    run("keytool", "-genkeypair", "-keystore", "broker-keytool.p12", "-storetype", "PKCS12", "-storepass", PASSWORD,
        "-alias", "broker", "-keyalg", "RSA", "-keysize", "2048", "-dname", "CN=localhost,O=sluice", cwd=d)
    run("keytool", "-certreq", "-keystore", "broker-keytool.p12", "-storepass", PASSWORD, "-alias", "broker",
        "-file", "broker-keytool.csr", cwd=d)
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    openssl("x509", "-req", "-in", "broker-keytool.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "broker-keytool.crt", "-days", "2", "-extfile", "san.ext", cwd=d)
    run("keytool", "-importcert", "-noprompt", "-keystore", "broker-keytool.p12", "-storepass", PASSWORD,
        "-alias", "ca", "-file", "ca.pem", cwd=d)
    run("keytool", "-importcert", "-noprompt", "-keystore", "broker-keytool.p12", "-storepass", PASSWORD,
        "-alias", "broker", "-file", "broker-keytool.crt", cwd=d)
    run("keytool", "-importcert", "-noprompt", "-keystore", "truststore.p12", "-storetype", "PKCS12",
        "-storepass", PASSWORD, "-alias", "ca", "-file", "ca.pem", cwd=d)
    signed(d, "alice", "/C=US/O=Acme/OU=eng/CN=Alice", "extendedKeyUsage=clientAuth")
    signed(d, "bob", "/O=Acme/OU=ops+UID=b1/CN=bob, jr", "extendedKeyUsage=clientAuth", multivalue=True)
    signed(d, "eve", "/O=Evil/CN=eve", "extendedKeyUsage=clientAuth")
    # The Java client's keystore: alice's key and certificate as PKCS12.
    openssl("pkcs12", "-export", "-in", "alice.crt", "-inkey", "alice.key", "-name", "alice",
            "-out", "alice.p12", "-passout", f"pass:{PASSWORD}", cwd=d)
    return d


def mtls_broker(broker_factory, pki: Path, keystore: str = "broker.p12", authorizer: bool = True, **extra):
    """PLAINTEXT (a super user's) on the harness port and an SSL listener requiring client
    certificates on ``b.tls_bootstrap``, with a PKCS12 keystore and truststore and RULES as
    that listener's own mapping rules."""
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
        "ssl.keystore.location": str(pki / keystore),
        "ssl.keystore.password": PASSWORD,
        "ssl.key.password": PASSWORD,
        "ssl.truststore.type": "PKCS12",
        "ssl.truststore.location": str(pki / "truststore.p12"),
        "ssl.truststore.password": PASSWORD,
        "ssl.client.auth": "required",
        "listener.name.ssl.ssl.principal.mapping.rules": RULES,
    })
    if authorizer:
        b.overrides.update({"authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS"})
    b.overrides.update(extra)
    b.start()
    return b


def rdkafka_mtls(pki: Path, who: str) -> dict:
    return {"security.protocol": "SSL", "ssl.ca.location": str(pki / "ca.pem"),
            "ssl.certificate.location": str(pki / f"{who}.crt"), "ssl.key.location": str(pki / f"{who}.key")}


def test_certificate_principals_decide_acls(broker_factory, pki, kafka_tool, topic):
    """librdkafka with client certificates: alice (named by a RULE) and bob (by DEFAULT, a
    subject with escapes and a multi-valued RDN) produce and consume under ACLs naming them;
    eve's certificate is valid, but her principal has no ACL: TOPIC_AUTHORIZATION_FAILED."""
    b = mtls_broker(broker_factory, pki)
    create_topic(b.bootstrap, topic, partitions=1)
    for principal in (ALICE, BOB):
        acls(kafka_tool, b, "--add", "--allow-principal", principal, "--operation", "Write",
             "--operation", "Read", "--topic", topic)
        acls(kafka_tool, b, "--add", "--allow-principal", principal, "--operation", "Read",
             "--group", f"{topic}-g")
    listed = acls(kafka_tool, b, "--list", "--topic", topic).out
    assert "principal=User:alice@eng" in listed and r"principal=User:CN=bob\, jr,OU=ops+UID=b1,O=Acme" in listed, listed

    for who in ("alice", "bob"):
        conf = rdkafka_mtls(pki, who)
        assert produce_error(b.tls_bootstrap, conf, topic) is None, who
        assert group_consume_error(b.tls_bootstrap, conf, topic, f"{topic}-g", want=1) is None, who

    eve = rdkafka_mtls(pki, "eve")
    assert produce_error(b.tls_bootstrap, eve, topic) == "TOPIC_AUTHORIZATION_FAILED"
    assert group_consume_error(b.tls_bootstrap, eve, topic, f"{topic}-g") in (
        "TOPIC_AUTHORIZATION_FAILED", "GROUP_AUTHORIZATION_FAILED")
    # Eve's denial names her principal as the broker built it (Kafka's authorizer log words).
    if b.kind == "sluice":
        harness.wait_until(lambda: f"Principal = {EVE} is Denied" in b.log_text(), 15, "eve's denial logged")


@pytest.mark.parametrize("keystore", ["broker.p12", "broker-legacy.p12", "broker-keytool.p12"])
def test_java_tools_with_pkcs12_stores_over_mutual_tls(broker_factory, pki, tmp_path, kafka_tool, topic, keystore):
    """The Java client and Kafka's console tools with a PKCS12 keystore (alice's) and truststore
    against a broker whose keystore is PKCS12 as OpenSSL 3 makes it, as OpenSSL makes it with the
    legacy SHA-1/3DES scheme, or as keytool makes it."""
    b = mtls_broker(broker_factory, pki, keystore=keystore, authorizer=False)
    create_topic(b.bootstrap, topic, partitions=1)
    conf = tmp_path / "client.properties"
    conf.write_text("\n".join([
        "security.protocol=SSL",
        "ssl.truststore.type=PKCS12", f"ssl.truststore.location={pki / 'truststore.p12'}",
        f"ssl.truststore.password={PASSWORD}",
        "ssl.keystore.type=PKCS12", f"ssl.keystore.location={pki / 'alice.p12'}",
        f"ssl.keystore.password={PASSWORD}", f"ssl.key.password={PASSWORD}",
    ]) + "\n")
    lines = [f"line-{i}" for i in range(50)]
    kafka_tool(CONSOLE_PRODUCER, "--bootstrap-server", b.tls_bootstrap, "--command-config", str(conf),
               "--topic", topic, input="\n".join(lines) + "\n").check("console producer over mTLS")
    res = kafka_tool(CONSOLE_CONSUMER, "--bootstrap-server", b.tls_bootstrap, "--command-config", str(conf),
                     "--topic", topic, "--partition", "0", "--offset", "earliest", "--max-messages", "50",
                     "--timeout-ms", "30000")
    res.check("console consumer over mTLS")
    assert res.out.split() == lines


@pytest.mark.sluice_only
@pytest.mark.parametrize("props,message", [
    ({"ssl.keystore.location": "{pki}/broker.p12", "ssl.keystore.type": "PKCS12",
      "ssl.keystore.password": "wrong"}, "does not open with the password given (its integrity check or decryption failed): check ssl.keystore.password"),
    ({"ssl.keystore.location": "{pki}/broker.p12", "ssl.keystore.password": PASSWORD,
      "ssl.truststore.location": "{pki}/truststore.p12", "ssl.truststore.password": "wrong",
      "ssl.client.auth": "required"}, "check ssl.truststore.password"),
    ({"ssl.keystore.location": "{pki}/truststore.p12", "ssl.keystore.type": "PKCS12",
      "ssl.keystore.password": PASSWORD}, "holds no private key"),
    ({"ssl.keystore.location": "{pki}/broker.p12", "ssl.keystore.password": PASSWORD,
      "ssl.principal.mapping.rules": "RULE:^CN=(.*)$/$1"}, "Invalid rule: `RULE:^CN=(.*)$/$1`"),
    ({"ssl.keystore.location": "{pki}/broker.p12", "ssl.keystore.password": PASSWORD,
      "listener.name.ssl.ssl.principal.mapping.rules": "RULE:^CN=(?=x)(.*)$/$1/"}, "not a regular expression"),
])
def test_store_and_rule_mistakes_stop_startup(tmp_path, pki, props, message):
    port, tls_port = harness.free_port(), harness.free_port()
    conf = {"node.id": 1, "log.dirs": str(tmp_path / "data"),
            "listeners": f"PLAINTEXT://127.0.0.1:{port},SSL://127.0.0.1:{tls_port}"}
    conf.update({k: v.format(pki=pki) for k, v in props.items()})
    harness.write_properties(tmp_path / "server.properties", conf)
    p = subprocess.run([str(harness.SLUICE_BIN), "serve", "--config", str(tmp_path / "server.properties")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert message in p.stdout + p.stderr, p.stdout + p.stderr
    assert PASSWORD not in p.stdout + p.stderr and "wrong" not in p.stdout + p.stderr


@pytest.mark.sluice_only
def test_a_certificate_no_rule_names_is_refused(broker_factory, pki, topic):
    """Rules without DEFAULT that name only alice: eve's connection is closed after the
    handshake (Kafka fails the connection when no rule applies), logged, and alice goes on."""
    b = mtls_broker(broker_factory, pki, authorizer=False,
                    **{"listener.name.ssl.ssl.principal.mapping.rules": r"RULE:^CN=Alice,.*$/alice/"})
    create_topic(b.bootstrap, topic, partitions=1)
    assert produce_error(b.tls_bootstrap, rdkafka_mtls(pki, "alice"), topic) is None
    assert produce_error(b.tls_bootstrap, rdkafka_mtls(pki, "eve"), topic) is not None
    harness.wait_until(lambda: "no ssl.principal.mapping.rules apply to the client certificate's subject "
                               "CN=eve,O=Evil" in b.log_text(), 15, "the refusal logged")

"""Brokers and a secured etcd (issue 55, item 5): a cluster whose link to etcd is mutual TLS
(etcd started with --cert-file, --key-file, --trusted-ca-file and --client-cert-auth, https
URLs), and one whose etcd has its authentication enabled (a root user, a user whose role may
read and write the cluster's prefix, short-lived JWT tokens that the brokers must renew),
each producing and consuming through a real Kafka client across the brokers. A broker that
etcd refuses (a CA that did not sign etcd's certificate, a client certificate etcd does not
take, none at all, a wrong password, no user, a user without access to the prefix) stops at
startup with a line naming the setting and a non-zero exit, without waiting out
initial.broker.registration.timeout.ms. What looks like an etcd that does not answer (plain
HTTP to a TLS port, TLS to a plain one) is waited for, with a hint naming the scheme to write.

The CAs, certificates and the JWT signing key are made with openssl at test time; no key is
committed.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

import harness
from cluster_support import EtcdServer, leaders, live_brokers, start_cluster

pytestmark = pytest.mark.sluice_only

BROKER_PASSWORD = "broker-s3cret-pw"
PARTITIONS = 4
# A refused broker must not wait for etcd: this is far longer than it may take to exit.
REGISTRATION_TIMEOUT_MS = 120000
REFUSAL_EXIT_S = 30


def openssl(*args, cwd: Path) -> None:
    p = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, f"openssl {' '.join(args)}:\n{p.stdout}\n{p.stderr}"


def ca(d: Path, name: str) -> None:
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.pem",
            "-days", "2", "-subj", f"/CN={name}", cwd=d)


def signed(d: Path, ca_name: str, name: str, ext: str) -> None:
    """``name``.key and ``name``.crt signed by ``ca_name``, and ``name``.pem holding both (the
    form of a PEM keystore: the key and the chain in one file)."""
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr",
            "-subj", f"/CN={name}", cwd=d)
    (d / f"{name}.ext").write_text(ext + "\n")
    openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca_name}.pem", "-CAkey", f"{ca_name}.key",
            "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext", cwd=d)
    (d / f"{name}.pem").write_text((d / f"{name}.key").read_text() + (d / f"{name}.crt").read_text())


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    """etcd's CA and its server certificate for 127.0.0.1; a broker client certificate from it;
    a second CA that signed nothing etcd knows, and a client certificate from that one; the
    key pair etcd signs JWT tokens with."""
    d = tmp_path_factory.mktemp("etcd-pki")
    ca(d, "etcd-ca")
    signed(d, "etcd-ca", "etcd-server", "subjectAltName=IP:127.0.0.1,DNS:localhost")
    signed(d, "etcd-ca", "broker", "extendedKeyUsage=clientAuth")
    ca(d, "rogue-ca")
    signed(d, "rogue-ca", "rogue-broker", "extendedKeyUsage=clientAuth")
    openssl("genrsa", "-out", "jwt.key", "2048", cwd=d)
    openssl("rsa", "-in", "jwt.key", "-pubout", "-out", "jwt.pub", cwd=d)
    return d


def etcd_tls(pki: Path, client_cert_auth: bool) -> dict:
    return {"cert": pki / "etcd-server.crt", "key": pki / "etcd-server.key", "ca": pki / "etcd-ca.pem",
            "client_cert_auth": client_cert_auth}


@pytest.fixture(scope="module")
def mtls_etcd(pki, tmp_path_factory):
    """etcd serving its clients over TLS and requiring their certificates."""
    server = EtcdServer(tmp_path_factory.mktemp("etcd-mtls"), tls=etcd_tls(pki, True),
                        client={"ca": pki / "etcd-ca.pem", "cert": pki / "broker.crt",
                                "key": pki / "broker.key"}).start()
    yield server
    server.kill()


@pytest.fixture(scope="module")
def auth_etcd(pki, tmp_path_factory):
    """etcd over TLS (no client certificates) with authentication enabled: user ``broker`` may
    read and write ``/secured/``; ``outsider`` only ``/elsewhere/``. Tokens are JWTs that live
    2 s (whole seconds: 1-2 s), so a broker renews its token all the time."""
    server = EtcdServer(tmp_path_factory.mktemp("etcd-auth"), tls=etcd_tls(pki, False),
                        client={"ca": pki / "etcd-ca.pem"},
                        args=("--auth-token", f"jwt,pub-key={pki / 'jwt.pub'},priv-key={pki / 'jwt.key'},"
                                              "sign-method=RS256,ttl=2s")).start()
    server.enable_auth("root-pw", {"broker": (BROKER_PASSWORD, "/secured/"),
                                   "outsider": ("outsider-pw", "/elsewhere/")})
    yield server
    server.kill()


def mtls_settings(pki: Path, etcd: EtcdServer, **extra) -> dict:
    props = {
        "sluice.cluster.etcd.endpoints": etcd.url,
        "sluice.cluster.etcd.ssl.truststore.location": str(pki / "etcd-ca.pem"),
        "sluice.cluster.etcd.ssl.keystore.location": str(pki / "broker.pem"),
    }
    props.update(extra)
    return props


def auth_settings(pki: Path, etcd: EtcdServer, **extra) -> dict:
    props = {
        "sluice.cluster.etcd.endpoints": etcd.url,
        "sluice.cluster.etcd.ssl.truststore.location": str(pki / "etcd-ca.pem"),
        "sluice.cluster.etcd.username": "broker",
        "sluice.cluster.etcd.password": BROKER_PASSWORD,
    }
    props.update(extra)
    return props


def produce_and_consume_across(brokers: list, topic: str, tag: str) -> None:
    """Create ``topic`` through the first broker, wait until both brokers own some of its
    partitions, produce through the first and read everything back through the second."""
    first, second = brokers[0].bootstrap, brokers[1].bootstrap
    harness.create_topic(first, topic, partitions=PARTITIONS)

    def spread():
        owners = leaders(second, topic)
        return len(owners) == PARTITIONS and set(owners.values()) == {1, 2}

    harness.wait_until(spread, 30, f"the partitions of {topic} owned by both brokers")
    p = harness.producer(first, acks="all", **{"enable.idempotence": True})
    harness.produce_all(p, topic, [{"value": f"{tag}-{i}".encode(), "partition": i % PARTITIONS}
                                   for i in range(200)])
    got = harness.read_back(second, topic, range(PARTITIONS), expected=200)
    assert sorted(got) == sorted(f"{tag}-{i}" for i in range(200))


def refused_start(broker_factory, tmp_path, settings: dict) -> str:
    """Start a broker that etcd (or its settings) refuses: it must exit non-zero long before
    the registration timeout. Returns its log."""
    b = broker_factory(overrides={"node.id": 9, "log.dirs": str(tmp_path / "refused"),
                                  "initial.broker.registration.timeout.ms": REGISTRATION_TIMEOUT_MS,
                                  **settings},
                       log_dir=tmp_path / "refused", name="refused", start=False)
    started = time.monotonic()
    with pytest.raises(harness.HarnessError, match=r"exited with code [1-9]"):
        b.start(timeout=REFUSAL_EXIT_S)
    assert time.monotonic() - started < REFUSAL_EXIT_S
    return b.log_file.read_text(errors="replace")


def test_a_cluster_over_mutual_tls(pki, mtls_etcd, broker_factory, tmp_path, topic):
    shared = tmp_path / "shared"
    brokers = start_cluster(broker_factory, mtls_etcd, shared, n=2, prefix="/mtls",
                            **mtls_settings(pki, mtls_etcd))
    produce_and_consume_across(brokers, topic, "mtls")
    keys = mtls_etcd.keys("/mtls/")
    assert "/mtls/brokers/1" in keys and "/mtls/brokers/2" in keys, keys
    assert any(k.startswith(f"/mtls/owners/{topic}/") for k in keys), keys


@pytest.mark.parametrize("case", ["untrusted-ca", "no-client-certificate", "rogue-client-certificate",
                                  "plain-http"])
def test_a_broker_etcd_refuses_over_tls_stops_at_startup(case, pki, mtls_etcd, broker_factory, tmp_path):
    settings = mtls_settings(pki, mtls_etcd)
    if case == "untrusted-ca":
        settings["sluice.cluster.etcd.ssl.truststore.location"] = str(pki / "rogue-ca.pem")
        expected = ["not signed by a CA in sluice.cluster.etcd.ssl.truststore.location"]
    elif case == "no-client-certificate":
        del settings["sluice.cluster.etcd.ssl.keystore.location"]
        expected = ["etcd asks for a client certificate", "sluice.cluster.etcd.ssl.keystore.location"]
    elif case == "rogue-client-certificate":
        settings["sluice.cluster.etcd.ssl.keystore.location"] = str(pki / "rogue-broker.pem")
        expected = ["etcd refused this broker's client certificate", "sluice.cluster.etcd.ssl.keystore.location"]
    else:
        # Plain HTTP to a TLS port gets no answer at all; that could also be an etcd going
        # down, so the broker keeps trying until the registration timeout, with a hint.
        del settings["sluice.cluster.etcd.ssl.keystore.location"]
        del settings["sluice.cluster.etcd.ssl.truststore.location"]
        settings["sluice.cluster.etcd.endpoints"] = f"http://{mtls_etcd.endpoint}"
        settings["initial.broker.registration.timeout.ms"] = 1500
        expected = [f"if etcd serves TLS there, write https://{mtls_etcd.endpoint}"]
    log = refused_start(broker_factory, tmp_path, settings)
    for text in expected:
        assert text in log, log


def test_a_cluster_with_etcd_authentication(pki, auth_etcd, broker_factory, tmp_path, topic):
    shared = tmp_path / "shared"
    brokers = start_cluster(broker_factory, auth_etcd, shared, n=2, prefix="/secured",
                            **auth_settings(pki, auth_etcd))
    produce_and_consume_across(brokers, topic, "auth")
    # Every token the brokers hold has expired by now: requests, the watch and the leases
    # go on with new ones.
    time.sleep(3)
    assert live_brokers(brokers[0].bootstrap) == [1, 2]
    produce_and_consume_across(brokers, f"{topic}-later", "later")
    assert any(k.startswith(f"/secured/owners/{topic}-later/") for k in auth_etcd.keys("/secured/"))

    # The password is a password: DescribeConfigs shows that it is set, never its value, and
    # no broker logs it.
    from confluent_kafka.admin import ConfigResource, ResourceType
    res = ConfigResource(ResourceType.BROKER, "1")
    admin = harness.admin(brokers[0].bootstrap)
    entries = admin.describe_configs([res])[res].result(timeout=30)
    password = entries["sluice.cluster.etcd.password"]
    assert password.is_sensitive and password.value is None
    assert entries["sluice.cluster.etcd.username"].value == "broker"
    for b in brokers:
        assert BROKER_PASSWORD not in b.log_file.read_text(errors="replace")


@pytest.mark.parametrize("case", ["wrong-password", "no-login", "no-access-to-the-prefix"])
def test_a_broker_etcd_refuses_to_authenticate_stops_at_startup(case, pki, auth_etcd, broker_factory, tmp_path):
    settings = auth_settings(pki, auth_etcd, **{"sluice.cluster.etcd.prefix": "/secured"})
    if case == "wrong-password":
        settings["sluice.cluster.etcd.password"] = "not-the-password"
        expected = ["etcd refused the user name or password", "sluice.cluster.etcd.username=broker"]
    elif case == "no-login":
        del settings["sluice.cluster.etcd.username"]
        del settings["sluice.cluster.etcd.password"]
        expected = ["etcd has authentication enabled: set sluice.cluster.etcd.username and sluice.cluster.etcd.password"]
    else:
        settings["sluice.cluster.etcd.username"] = "outsider"
        settings["sluice.cluster.etcd.password"] = "outsider-pw"
        expected = ["etcd user outsider may not read and write the cluster's keys"]
    log = refused_start(broker_factory, tmp_path, settings)
    for text in expected:
        assert text in log, log
    assert "not-the-password" not in log


def test_tls_to_a_plain_etcd_is_told_to_write_http(pki, broker_factory, tmp_path):
    # A plain etcd drops a TLS handshake without an answer, as an etcd going down would: the
    # broker keeps trying until the registration timeout, with a hint.
    etcd = EtcdServer(tmp_path / "etcd").start()
    try:
        log = refused_start(broker_factory, tmp_path, {
            "sluice.cluster.etcd.endpoints": f"https://{etcd.endpoint}",
            "sluice.cluster.etcd.ssl.truststore.location": str(pki / "etcd-ca.pem"),
            "initial.broker.registration.timeout.ms": 1500})
    finally:
        etcd.kill()
    assert f"if etcd serves plain HTTP there, write http://{etcd.endpoint}" in log, log


def test_a_bad_endpoint_is_refused_naming_the_property(broker_factory, tmp_path):
    log = refused_start(broker_factory, tmp_path, {"sluice.cluster.etcd.endpoints": "https//etcd-1:2379"})
    assert "sluice.cluster.etcd.endpoints" in log and "https//etcd-1:2379" in log, log

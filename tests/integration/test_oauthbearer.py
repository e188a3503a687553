"""SASL/OAUTHBEARER on a SASL_PLAINTEXT listener, configured as on a Kafka broker: Kafka's
default validator (unsecured tokens, `alg: none`, with its `unsecuredValidator*` JAAS options),
and Kafka's secured validator (`OAuthBearerValidatorCallbackHandler`: RS256 JWTs checked against
a JWKS file, expected audience and issuer).

Clients: Kafka's console tools (the Java client) with unsecured tokens and with a signed JWT read
from a file (`FileJwtRetriever`, KIP-1139); librdkafka with its unsecured tokens
(`enable.sasl.oauthbearer.unsecure.jwt`) and with signed tokens given by `oauth_cb` (wrong
signature, wrong audience, expired: refused with Kafka's `{"status":"invalid_token"}`;
short-lived tokens: re-authentication, KIP-368). Keys are made with openssl; tokens are signed
with `openssl dgst -sha256 -sign`.

Tests not marked sluice_only run against Apache Kafka too (SLUICE_TEST_TARGET=kafka), which
needs the JWKS file and token files listed in its system properties
`org.apache.kafka.sasl.oauthbearer.allowed.urls` / `...allowed.files` (Sluice has no such list:
server.properties is trusted).
"""

from __future__ import annotations

import base64
import json
import socket
import struct
import subprocess
import time
from pathlib import Path

import pytest

import harness
from harness import CONSOLE_CONSUMER, CONSOLE_PRODUCER, FAST_START_JVM, consume_partitions, create_topic, produce_all
from test_sasl import certs, closed, failed_authentications, kafka_request, kbytes, kstr, read_frame  # noqa: F401

LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
SECURED_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
LOGIN_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
FILE_RETRIEVER = "org.apache.kafka.common.security.oauthbearer.FileJwtRetriever"
AUDIENCE = "sluice-test"
ISSUER = "https://idp.sluice.test"


def b64u(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unsecured_token(claims: dict) -> str:
    return f"{b64u(json.dumps({'alg': 'none'}).encode())}.{b64u(json.dumps(claims).encode())}."


class Signer:
    """An RSA key (openssl) that signs RS256 JWTs, and its JWK."""

    def __init__(self, d: Path, kid: str):
        self.kid = kid
        self.key = d / f"{kid}.key"
        subprocess.run(["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048",
                        "-out", str(self.key)], check=True, capture_output=True)
        out = subprocess.run(["openssl", "rsa", "-in", str(self.key), "-noout", "-modulus"], check=True,
                             capture_output=True, text=True).stdout
        modulus = bytes.fromhex(out.strip().split("=", 1)[1])
        self.jwk = {"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig", "n": b64u(modulus), "e": "AQAB"}

    def token(self, claims: dict, kid: str | None = None) -> str:
        header = {"alg": "RS256", "typ": "JWT", "kid": kid or self.kid}
        signing_input = f"{b64u(json.dumps(header).encode())}.{b64u(json.dumps(claims).encode())}"
        sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", str(self.key)], input=signing_input.encode(),
                             check=True, capture_output=True).stdout
        return f"{signing_input}.{b64u(sig)}"


def claims(sub: str = "alice", lifetime_s: int = 600, **extra) -> dict:
    now = int(time.time())
    c = {"sub": sub, "iat": now, "exp": now + lifetime_s, "aud": AUDIENCE, "iss": ISSUER, "scope": "kafka"}
    c.update(extra)
    return {k: v for k, v in c.items() if v is not None}


@pytest.fixture(scope="module")
def keys(tmp_path_factory) -> dict:
    """Two keys: `good` is in the JWKS file, `other` is not (same kid as good, to forge)."""
    d = tmp_path_factory.mktemp("jwks")
    good = Signer(d, "k1")
    other = Signer(d, "k1-forged")
    jwks = d / "jwks.json"
    jwks.write_text(json.dumps({"keys": [good.jwk]}))
    return {"dir": d, "good": good, "other": other, "jwks": jwks}


def oauth_broker(broker_factory, jaas_options: str = "", jwks: Path | str | None = None, **extra):
    """A broker with PLAINTEXT on the harness port and OAUTHBEARER on ``b.sasl_bootstrap``
    (secured, against the key set ``jwks``, a file or a URL, when given)."""
    b = broker_factory(start=False)
    b.sasl_port = harness.free_port()
    b.sasl_bootstrap = f"127.0.0.1:{b.sasl_port}"
    listeners = f"PLAINTEXT://127.0.0.1:{b.port},SECURE://127.0.0.1:{b.sasl_port}"
    advertised = listeners
    protocols = "PLAINTEXT:PLAINTEXT,SECURE:SASL_PLAINTEXT"
    if b.kind == "kafka":
        listeners += f",CONTROLLER://127.0.0.1:{b.controller_port}"
        protocols += ",CONTROLLER:PLAINTEXT"
    b.overrides.update({
        "listeners": listeners,
        "advertised.listeners": advertised,
        "listener.security.protocol.map": protocols,
        "listener.name.secure.sasl.enabled.mechanisms": "OAUTHBEARER",
        # The login part (unsecuredLoginStringClaim_sub) is what Kafka's broker logs in with
        # itself; Sluice ignores it.
        "listener.name.secure.oauthbearer.sasl.jaas.config":
            f'{LOGIN_MODULE} required unsecuredLoginStringClaim_sub="admin" {jaas_options};',
    })
    if jwks is not None:
        url = jwks.as_uri() if isinstance(jwks, Path) else jwks
        b.overrides.update({
            "listener.name.secure.oauthbearer.sasl.server.callback.handler.class": SECURED_HANDLER,
            "listener.name.secure.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": url,
            "listener.name.secure.oauthbearer.sasl.oauthbearer.expected.audience": AUDIENCE,
            "listener.name.secure.oauthbearer.sasl.oauthbearer.expected.issuer": ISSUER,
        })
        if b.kind == "kafka":
            b.jvm_options.append(f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={url}")
    if b.kind == "sluice":
        b.metrics_port = harness.free_port()
        b.overrides["sluice.metrics.listener"] = f"127.0.0.1:{b.metrics_port}"
    b.overrides.update(extra)
    b.start()
    return b


def java_unsecured_config(tmp_path: Path, sub: str, options: str = "") -> Path:
    f = tmp_path / f"client-unsecured-{sub}.properties"
    f.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
                 f'sasl.jaas.config={LOGIN_MODULE} required unsecuredLoginStringClaim_sub="{sub}" {options};\n')
    return f


def java_file_token_config(tmp_path: Path, token: str, name: str) -> tuple[Path, tuple]:
    """A Java client that reads its JWT from a file (FileJwtRetriever), and the JVM options
    Kafka 4 needs to let it read that file."""
    token_file = tmp_path / f"{name}.jwt"
    token_file.write_text(token)
    f = tmp_path / f"client-{name}.properties"
    f.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n"
                 f"sasl.login.callback.handler.class={LOGIN_HANDLER}\n"
                 f"sasl.oauthbearer.jwt.retriever.class={FILE_RETRIEVER}\n"
                 f"sasl.oauthbearer.token.endpoint.url={token_file.as_uri()}\n"
                 f"sasl.jaas.config={LOGIN_MODULE} required;\n")
    jvm = (*FAST_START_JVM, f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.files={token_file}",
           f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={token_file.as_uri()}")
    return f, jvm


def rdkafka_unsecured(principal: str, extra: str = "") -> dict:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.method": "default", "enable.sasl.oauthbearer.unsecure.jwt": True,
            "sasl.oauthbearer.config": f"principal={principal} {extra}".strip()}


def rdkafka_token(make_token, calls: list | None = None) -> dict:
    """librdkafka with a token from ``make_token()`` (called again whenever librdkafka wants a
    fresh one) through ``oauth_cb``; each call is recorded in ``calls``."""
    def cb(_config):
        token, exp = make_token()
        if calls is not None:
            calls.append(time.time())
        return token, exp, "ignored-by-the-broker", {}

    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER", "oauth_cb": cb}


def auth_error(bootstrap: str, conf: dict, timeout: float = 20) -> str:
    """The authentication error librdkafka reports with these settings (fails if none comes)."""
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


def test_java_console_tools_with_unsecured_tokens(broker_factory, kafka_tool, topic, tmp_path):
    b = oauth_broker(broker_factory)
    create_topic(b.bootstrap, topic, partitions=1)
    conf = java_unsecured_config(tmp_path, "alice")
    lines = "".join(f"unsecured-{i}\n" for i in range(20))
    kafka_tool(CONSOLE_PRODUCER, "--bootstrap-server", b.sasl_bootstrap, "--topic", topic,
               "--command-config", str(conf), input=lines).check("kafka-console-producer with OAUTHBEARER")
    res = kafka_tool(CONSOLE_CONSUMER, "--bootstrap-server", b.sasl_bootstrap, "--command-config", str(conf),
                     "--topic", topic, "--from-beginning", "--max-messages", "20", "--timeout-ms", "30000")
    res.check("kafka-console-consumer with OAUTHBEARER")
    assert sorted(res.out.split()) == sorted(f"unsecured-{i}" for i in range(20))


def test_librdkafka_with_unsecured_tokens(broker_factory, topic):
    b = oauth_broker(broker_factory)
    create_topic(b.bootstrap, topic, partitions=2)
    conf = rdkafka_unsecured("alice")
    records = [{"value": b"r%d" % i, "partition": i % 2} for i in range(100)]
    produce_all(harness.producer(b.sasl_bootstrap, **conf), topic, records)
    got = consume_partitions(b.sasl_bootstrap, topic, range(2), expected=100, **conf)
    assert sorted(m.value() for m in got) == sorted(r["value"] for r in records)


def test_unsecured_validator_options(broker_factory):
    """unsecuredValidatorRequiredScope and unsecuredValidatorPrincipalClaimName, as Kafka's
    default validator takes them: a token without the scope gets insufficient_scope."""
    b = oauth_broker(broker_factory, 'unsecuredValidatorRequiredScope="produce"')
    assert harness_can_log_in(b.sasl_bootstrap, rdkafka_unsecured("alice", "scope=produce,other"))
    msg = auth_error(b.sasl_bootstrap, rdkafka_unsecured("alice", "scope=other"))
    assert '{"status":"insufficient_scope", "scope":"[produce]"}' in msg, msg


def harness_can_log_in(bootstrap: str, conf: dict, timeout: float = 15) -> bool:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4", **conf})
    try:
        admin.list_topics(timeout=timeout)
        return True
    except Exception:  # noqa: BLE001
        return False


def test_java_client_with_a_signed_jwt_from_a_file(broker_factory, kafka_tool, keys, topic, tmp_path):
    b = oauth_broker(broker_factory, jwks=keys["jwks"])
    create_topic(b.bootstrap, topic, partitions=1)
    conf, jvm = java_file_token_config(tmp_path, keys["good"].token(claims("alice")), "alice")
    lines = "".join(f"signed-{i}\n" for i in range(20))
    kafka_tool(CONSOLE_PRODUCER, "--bootstrap-server", b.sasl_bootstrap, "--topic", topic,
               "--command-config", str(conf), input=lines, jvm_opts=jvm).check("console producer with a JWT")
    res = kafka_tool(CONSOLE_CONSUMER, "--bootstrap-server", b.sasl_bootstrap, "--command-config", str(conf),
                     "--topic", topic, "--from-beginning", "--max-messages", "20", "--timeout-ms", "30000",
                     jvm_opts=jvm)
    res.check("console consumer with a JWT")
    assert sorted(res.out.split()) == sorted(f"signed-{i}" for i in range(20))
    # A token signed by another key under the same kid: Kafka's invalid_token, no records.
    forged, jvm = java_file_token_config(tmp_path, keys["other"].token(claims("alice"), kid="k1"), "forged")
    res = kafka_tool(CONSOLE_CONSUMER, "--bootstrap-server", b.sasl_bootstrap, "--command-config", str(forged),
                     "--topic", topic, "--from-beginning", "--max-messages", "1", "--timeout-ms", "20000",
                     jvm_opts=jvm, timeout=90)
    assert "Processed a total of 0 messages" in res.err, res.describe()
    assert '{"status":"invalid_token"}' in res.err, res.describe()


def test_signed_tokens_refused_with_kafkas_error(broker_factory, keys, topic, target):
    """librdkafka with signed tokens from oauth_cb: a good one logs in; a wrong signature, a
    wrong audience, a wrong issuer, an expired token, alg none each get invalid_token."""
    b = oauth_broker(broker_factory, jwks=keys["jwks"])
    good = keys["good"]
    assert harness_can_log_in(b.sasl_bootstrap, rdkafka_token(lambda: (good.token(claims()), time.time() + 600)))
    before = failed_authentications(b) if target == "sluice" else 0
    bad = {
        "wrong signature": keys["other"].token(claims(), kid="k1"),
        "unknown kid": keys["other"].token(claims()),
        "wrong audience": good.token(claims(aud="someone-else")),
        "wrong issuer": good.token(claims(iss="https://evil.example")),
        "expired": good.token(claims(lifetime_s=-120)),
        "alg none": unsecured_token(claims()),
    }
    for what, token in bad.items():
        msg = auth_error(b.sasl_bootstrap, rdkafka_token(lambda t=token: (t, time.time() + 600)))
        assert '{"status":"invalid_token"}' in msg, f"{what}: {msg}"
    if target == "sluice":
        harness.wait_until(lambda: failed_authentications(b) >= before + len(bad), 15, "failures counted")
        # The reasons are logged (at most a line a second: the first one surely).
        log = b.log_text()
        assert "OAUTHBEARER token refused: Could not validate the access token: JWS signature is invalid" in log, \
            log[-3000:]


def test_reauthentication_with_short_lived_tokens(broker_factory, keys, topic, target, monkeypatch):
    """A session ends when its token expires (KIP-368): librdkafka, given 10 s tokens, fetches
    new ones and re-authenticates its connections; records keep flowing for 25 s. (Shorter
    tokens leave librdkafka too little time between its token refresh, at 80% of the token's
    life, and its re-authentication, at 90% of the session's, on a busy machine.)"""
    # Sluice says at debug level when a re-authentication succeeds.
    monkeypatch.setenv("RUST_LOG", "info,sluice_broker::sasl=debug")
    b = oauth_broker(broker_factory, jwks=keys["jwks"])
    create_topic(b.bootstrap, topic, partitions=1)
    good = keys["good"]
    calls: list = []
    def fresh():
        # librdkafka is told the expiry the token carries (whole seconds), not a later one it
        # would refresh too late for.
        c = claims(lifetime_s=10)
        return good.token(c), c["exp"]

    conf = rdkafka_token(fresh, calls)
    errors: list = []
    p = harness.producer(b.sasl_bootstrap, error_cb=errors.append, **conf)
    delivered: list = []
    sent = 0
    deadline = time.monotonic() + 25
    while time.monotonic() < deadline:
        p.produce(topic, value=b"%d" % sent, partition=0,
                  on_delivery=lambda err, msg: delivered.append(err is None and msg.error() is None))
        sent += 1
        p.poll(0.1)
    assert p.flush(30) == 0
    assert len(delivered) == sent and all(delivered), (sent, delivered.count(True), errors)
    assert len(calls) >= 3, calls
    got = consume_partitions(b.bootstrap, topic, range(1), expected=sent)
    assert len(got) == sent
    if target == "sluice":
        log = b.log_text()
        assert "expired" not in log, log[-3000:]
        assert log.count("SASL re-authentication succeeded") >= 2, log[-3000:]


class JwksServer:
    """A JSON Web Key Set served over HTTP (HTTPS with ``certs``) from this process; ``keys``
    can be changed while it runs."""

    def __init__(self, keys: list, certs: Path | None = None):
        import http.server
        import ssl
        import threading

        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                body = json.dumps({"keys": server.keys}).encode()
                server.fetches += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.keys = keys
        self.fetches = 0
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        scheme = "http"
        if certs is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(certs / "broker.crt"), str(certs / "broker.key"))
            self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}/oauth2/keys"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_jwks_over_http_with_key_rotation(broker_factory, keys, tmp_path):
    """The key set from an HTTP endpoint; a token signed with a key added to it later is
    accepted once the broker has fetched it again (an unknown kid asks for a refresh)."""
    server = JwksServer([keys["good"].jwk])
    try:
        b = oauth_broker(broker_factory, jwks=server.url)
        good = keys["good"]
        harness.wait_until(lambda: harness_can_log_in(
            b.sasl_bootstrap, rdkafka_token(lambda: (good.token(claims()), time.time() + 600)), timeout=5),
            30, "a login with the key served over HTTP")
        newer = Signer(tmp_path, "k2")
        conf = rdkafka_token(lambda: (newer.token(claims()), time.time() + 600))
        assert not harness_can_log_in(b.sasl_bootstrap, conf, timeout=5)
        server.keys = [good.jwk, newer.jwk]
        harness.wait_until(lambda: harness_can_log_in(b.sasl_bootstrap, conf, timeout=5), 60,
                           "a login with the key added to the set")
    finally:
        server.close()


@pytest.mark.sluice_only
def test_jwks_over_https(broker_factory, keys, certs, monkeypatch):
    """HTTPS: the server's certificate is checked against SSL_CERT_FILE (else the system's CA
    bundle)."""
    server = JwksServer([keys["good"].jwk], certs=certs)
    try:
        monkeypatch.setenv("SSL_CERT_FILE", str(certs / "ca.pem"))
        b = oauth_broker(broker_factory, jwks=server.url)
        good = keys["good"]
        harness.wait_until(lambda: harness_can_log_in(
            b.sasl_bootstrap, rdkafka_token(lambda: (good.token(claims()), time.time() + 600)), timeout=5),
            30, "a login with the key served over HTTPS")
        assert server.fetches >= 1
    finally:
        server.close()
    # Without the CA: the fetch fails (logged), and no token is accepted.
    server = JwksServer([keys["good"].jwk], certs=certs)
    try:
        monkeypatch.setenv("SSL_CERT_FILE", str(keys["jwks"]))
        b = oauth_broker(broker_factory, jwks=server.url)
        harness.wait_until(lambda: "JSON Web Key Set not loaded" in b.log_text(), 15, "the failed fetch logged")
        assert not harness_can_log_in(
            b.sasl_bootstrap, rdkafka_token(lambda: (keys["good"].token(claims()), time.time() + 600)), timeout=5)
    finally:
        server.close()


def test_jwks_file_replaced(broker_factory, keys, tmp_path):
    """A JWKS file replaced in place is read again: a token of the new key logs in."""
    jwks = tmp_path / "rotating.json"
    jwks.write_text(json.dumps({"keys": [keys["good"].jwk]}))
    b = oauth_broker(broker_factory, jwks=jwks)
    newer = Signer(tmp_path, "k3")
    conf = rdkafka_token(lambda: (newer.token(claims()), time.time() + 600))
    assert not harness_can_log_in(b.sasl_bootstrap, conf, timeout=5)
    jwks.write_text(json.dumps({"keys": [keys["good"].jwk, newer.jwk]}))
    harness.wait_until(lambda: harness_can_log_in(b.sasl_bootstrap, conf, timeout=5), 60,
                       "a login with the key added to the file")


def test_java_client_reauthenticates_with_short_lived_unsecured_tokens(broker_factory, kafka_tool, topic, tmp_path,
                                                                       target, monkeypatch):
    """The Java client's unsecured tokens living 10 s (unsecuredLoginLifetimeSeconds): the console
    consumer keeps its connections for 25 s, logging in again with fresh tokens (KIP-368), and
    reads what a producer writes meanwhile."""
    monkeypatch.setenv("RUST_LOG", "info,sluice_broker::sasl=debug")
    b = oauth_broker(broker_factory)
    create_topic(b.bootstrap, topic, partitions=1)
    conf = java_unsecured_config(tmp_path, "alice", 'unsecuredLoginLifetimeSeconds="10"')
    consumer = subprocess.Popen(
        harness.java_cmd(CONSOLE_CONSUMER, "--bootstrap-server", b.sasl_bootstrap, "--command-config", str(conf),
                         "--topic", topic, "--from-beginning", "--timeout-ms", "25000", jvm_opts=FAST_START_JVM),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        p = harness.producer(b.bootstrap)
        for i in range(25):
            produce_all(p, topic, [{"value": b"t%d" % i, "partition": 0}])
            time.sleep(1)
        out, err = consumer.communicate(timeout=120)
    finally:
        if consumer.poll() is None:
            consumer.kill()
    assert out.split() == ["t%d" % i for i in range(25)], err[-3000:]
    assert "SaslAuthenticationException" not in err, err[-3000:]
    if target == "sluice":
        log = b.log_text()
        assert "expired" not in log, log[-3000:]
        assert log.count("SASL re-authentication succeeded") >= 2, log[-3000:]


def test_the_tokens_subject_is_the_principal_under_acls(broker_factory, kafka_tool, keys, topic):
    """A signed token's `sub` is the principal the authorizer sees (`User:<sub>`): bob may not
    write the topic until an ACL names him."""
    from test_acls import STANDARD_AUTHORIZER, acls, produce_error

    b = oauth_broker(broker_factory, jwks=keys["jwks"], **{
        "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:ANONYMOUS"})
    create_topic(b.bootstrap, topic, partitions=1)
    good = keys["good"]
    bob = rdkafka_token(lambda: (good.token(claims("bob")), time.time() + 600))
    assert produce_error(b.sasl_bootstrap, bob, topic) == "TOPIC_AUTHORIZATION_FAILED"
    acls(kafka_tool, b, "--add", "--allow-principal", "User:bob", "--operation", "Write", "--operation", "Describe",
         "--topic", topic)
    harness.wait_until(lambda: produce_error(b.sasl_bootstrap, bob, topic) is None, 30, "bob writes after the ACL")
    carol = rdkafka_token(lambda: (good.token(claims("carol")), time.time() + 600))
    assert produce_error(b.sasl_bootstrap, carol, topic) == "TOPIC_AUTHORIZATION_FAILED"


def oauth_raw_handshake(s: socket.socket, version: int = 1) -> None:
    s.sendall(kafka_request(17, 1, 1, kstr("OAUTHBEARER")))
    assert struct.unpack(">ih", read_frame(s)[:6]) == (1, 0)


def first_message(token: str) -> bytes:
    return b"n,,\x01auth=Bearer " + token.encode() + b"\x01\x01"


def test_session_lifetime_is_the_token_or_the_mechanisms_limit(broker_factory):
    """SaslAuthenticate's session_lifetime_ms: the shorter of the token's life and
    `listener.name.<l>.oauthbearer.connections.max.reauth.ms` (Kafka's per-mechanism form)."""
    b = oauth_broker(broker_factory, **{"listener.name.secure.oauthbearer.connections.max.reauth.ms": "2000"})

    def lifetime(exp: float) -> int:
        token = unsecured_token({"sub": "alice", "iat": int(time.time()), "exp": exp})
        with socket.create_connection(("127.0.0.1", b.sasl_port), timeout=10) as s:
            oauth_raw_handshake(s)
            s.sendall(kafka_request(36, 1, 2, kbytes(first_message(token))))
            resp = read_frame(s)
            assert struct.unpack(">ih", resp[:6]) == (2, 0), resp
            return struct.unpack(">q", resp[-8:])[0]

    assert lifetime(time.time() + 600) == 2000
    assert 1000 < lifetime(time.time() + 1.5) < 2000


@pytest.mark.sluice_only
def test_bad_tokens_on_the_wire(broker_factory, topic):
    """The exchange byte by byte: an invalid token gets the JSON status as a challenge, then the
    failure after the client's ^A; a malformed message gets Kafka's generic failure; a session
    ends when its token expires; nothing of it stops the broker."""
    b = oauth_broker(broker_factory)
    addr = ("127.0.0.1", b.sasl_port)
    before = failed_authentications(b)
    expired = unsecured_token({"sub": "alice", "exp": int(time.time()) - 10})
    with socket.create_connection(addr, timeout=10) as s:
        oauth_raw_handshake(s)
        s.sendall(kafka_request(36, 1, 2, kbytes(first_message(expired))))
        resp = read_frame(s)
        assert struct.unpack(">ih", resp[:6]) == (2, 0)
        assert b'{"status":"invalid_token"}' in resp
        s.sendall(kafka_request(36, 1, 3, kbytes(b"\x01")))
        resp = read_frame(s)
        assert struct.unpack(">ih", resp[:6]) == (3, 58)
        assert b'{"status":"invalid_token"}' in resp
        assert closed(s)
    for garbage in [b"", b"\xff\xfe", b"n,,\x01auth=Bearer\x01\x01", b"y,,\x01auth=Bearer a.b.\x01\x01",
                    first_message("x" * 400_000), b"n,,\x01auth=Bearer a.b.\x01" + b"k=v\x01" * 10_000 + b"\x01"]:
        with socket.create_connection(addr, timeout=10) as s:
            oauth_raw_handshake(s)
            s.sendall(kafka_request(36, 1, 2, kbytes(garbage)))
            resp = read_frame(s)
            assert resp is not None
            code = struct.unpack(">ih", resp[:6])[1]
            if code == 58:
                assert b"due to invalid credentials with SASL mechanism OAUTHBEARER" in resp, resp[:300]
            else:
                # A well-formed message whose token is refused: the JSON challenge first.
                assert code == 0 and b"invalid_token" in resp, resp[:300]
                s.sendall(kafka_request(36, 1, 3, kbytes(b"\x01")))
                assert struct.unpack(">ih", read_frame(s)[:6]) == (3, 58)
            assert closed(s)
    # A token that ends in 3 s: the session lifetime says so, and a request after it closes.
    short = unsecured_token({"sub": "alice", "iat": int(time.time()), "exp": int(time.time()) + 3})
    with socket.create_connection(addr, timeout=10) as s:
        oauth_raw_handshake(s)
        s.sendall(kafka_request(36, 1, 2, kbytes(first_message(short))))
        resp = read_frame(s)
        assert struct.unpack(">ih", resp[:6]) == (2, 0)
        lifetime = struct.unpack(">q", resp[-8:])[0]
        assert 1000 < lifetime <= 3000, lifetime
        s.sendall(kafka_request(3, 1, 3, struct.pack(">i", -1)))
        assert struct.unpack(">i", read_frame(s)[:4]) == (3,)
        time.sleep(lifetime / 1000 + 0.5)
        s.sendall(kafka_request(3, 1, 4, struct.pack(">i", -1)))
        assert closed(s)
    harness.wait_until(lambda: failed_authentications(b) >= before + 7, 10, "failures counted")
    assert harness_can_log_in(b.sasl_bootstrap, rdkafka_unsecured("alice"))


@pytest.mark.sluice_only
@pytest.mark.parametrize("props,message", [
    ({"listener.name.secure.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": "file:///etc/hostname"},
     "would be validated unsecured"),
    ({"listener.name.secure.oauthbearer.sasl.server.callback.handler.class": SECURED_HANDLER},
     "sasl.oauthbearer.jwks.endpoint.url is required"),
    ({"listener.name.secure.oauthbearer.sasl.server.callback.handler.class": SECURED_HANDLER,
      "sasl.oauthbearer.jwks.endpoint.url": "file:///nonexistent/jwks.json"}, "doesn't exist"),
    ({"listener.name.secure.oauthbearer.sasl.server.callback.handler.class": SECURED_HANDLER,
      "sasl.oauthbearer.jwks.endpoint.url": "file:///etc/hostname"}, "does not load"),
    ({"listener.name.secure.oauthbearer.sasl.server.callback.handler.class": "com.example.Handler"},
     "cannot be loaded"),
    ({"listener.name.secure.oauthbearer.sasl.jaas.config":
      f'{LOGIN_MODULE} required unsecuredValidatorAllowableClockSkewMs="-5";'}, "must not be negative"),
    ({"inter.broker.listener.name": "SECURE", "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER"},
     "do not log in to each other with OAUTHBEARER"),
])
def test_oauthbearer_misconfigurations_are_refused(tmp_path, props, message):
    port, sasl_port = harness.free_port(), harness.free_port()
    conf = {"node.id": 1, "log.dirs": str(tmp_path / "data"),
            "listeners": f"PLAINTEXT://127.0.0.1:{port},SECURE://127.0.0.1:{sasl_port}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_PLAINTEXT",
            "listener.name.secure.sasl.enabled.mechanisms": "OAUTHBEARER"}
    conf.update(props)
    harness.write_properties(tmp_path / "server.properties", conf)
    p = subprocess.run([str(harness.SLUICE_BIN), "serve", "--config", str(tmp_path / "server.properties")],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert message in p.stdout + p.stderr, p.stdout + p.stderr

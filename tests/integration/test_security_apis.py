"""ACL and delegation-token tools against a broker without an authorizer or SASL.

A default Kafka broker (no `authorizer.class.name`, PLAINTEXT listener) answers the ACL APIs
with SECURITY_DISABLED and the delegation-token APIs with DELEGATION_TOKEN_REQUEST_NOT_ALLOWED;
Sluice answers the same, so the tools report the same error instead of a lost connection.
"""

from __future__ import annotations

ACL_COMMAND = "org.apache.kafka.tools.AclCommand"
TOKEN_COMMAND = "org.apache.kafka.tools.DelegationTokenCommand"


def test_kafka_acls_reports_security_disabled(kafka_tool, broker, topic):
    res = kafka_tool(ACL_COMMAND, "--bootstrap-server", broker.bootstrap, "--list")
    assert "No Authorizer is configured" in res.out + res.err, res.describe("kafka-acls --list")
    res = kafka_tool(ACL_COMMAND, "--bootstrap-server", broker.bootstrap, "--add", "--allow-principal",
                     "User:alice", "--operation", "Read", "--topic", topic)
    assert "No Authorizer is configured" in res.out + res.err, res.describe("kafka-acls --add")
    res = kafka_tool(ACL_COMMAND, "--bootstrap-server", broker.bootstrap, "--remove", "--force",
                     "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic)
    assert "No Authorizer is configured" in res.out + res.err, res.describe("kafka-acls --remove")


def test_kafka_delegation_tokens_are_not_allowed_on_plaintext(kafka_tool, broker, tmp_path):
    config = tmp_path / "admin.properties"
    config.write_text("")  # the tool requires one; PLAINTEXT, no SASL
    res = kafka_tool(TOKEN_COMMAND, "--bootstrap-server", broker.bootstrap, "--command-config", str(config),
                     "--describe")
    assert res.rc != 0, res.describe("kafka-delegation-tokens --describe")
    assert "DelegationTokenDisabledException" in res.out + res.err or \
        "not allowed on PLAINTEXT" in res.out + res.err, res.describe("kafka-delegation-tokens --describe")

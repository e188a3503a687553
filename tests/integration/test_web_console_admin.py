"""The web console's administration pages and its logins (issue 59), in Debian's Chromium
driven by Playwright for Python, checked against Kafka's own tools:

- With a SASL listener the console asks for a login, checked by the brokers against the same
  SCRAM credentials: a wrong password is refused, and a user sees and may do only what the
  authorizer lets that user see and do (ACLs made with kafka-acls). Logged out, nothing is
  served.
- ACLs added and deleted in the browser are what kafka-acls lists; SCRAM users and client
  quotas (set and removed in the browser too) are what kafka-configs describes.
- Transactions: the list and a transaction's description are what kafka-transactions
  reports; a hanging transaction (its producer killed) is found among a partition's open
  transactions and aborted in the browser, after which read_committed readers get past it.
- Dynamic broker configs set and deleted in the browser are what kafka-configs describes.
- KIP-848 and share groups show their members and offsets as the tools do.
- In a three-broker cluster each broker's console checks logins and shows every coordinator's
  transactions and every owner's records.
"""

from __future__ import annotations

import time

import pytest

import harness
from harness import CONFIG_COMMAND, TRANSACTIONS_COMMAND, JavaProgram, create_topic
from test_acls import ACL_COMMAND, acl_broker, can_list_topics
from test_sasl import add_scram_user, rdkafka_sasl
from test_transactions import table as tool_table
from test_transactions import watermarks
from test_web_console import browser, console_broker, csrf_cookie, page, submit, table  # noqa: F401  (fixtures)

pytestmark = pytest.mark.sluice_only


def login(page, console: str, user: str, password: str) -> None:
    page.goto(f"{console}/login")
    page.fill("input[name=user]", user)
    page.fill("input[name=password]", password)
    submit(page, "button:has-text('Log in')")


def test_logins_are_checked_by_the_brokers_and_each_user_sees_what_its_acls_allow(broker_factory, kafka_tool,
                                                                                page, topic):
    port = harness.free_port()
    b = acl_broker(broker_factory, "User:ANONYMOUS;User:admin",
                   **{"sluice.console.listener": f"127.0.0.1:{port}", "allow.everyone.if.no.acl.found": "false",
                      "sluice.console.session.recheck.ms": 1000, "sluice.console.sessions.per.user.max": 2})
    console = f"http://127.0.0.1:{port}"
    visible, hidden = f"{topic}-visible", f"{topic}-hidden"
    create_topic(b.bootstrap, visible)
    create_topic(b.bootstrap, hidden)
    add_scram_user(kafka_tool, b, "admin", "admin-secret")
    add_scram_user(kafka_tool, b, "alice", "alice-secret", iterations=8192)
    harness.wait_until(lambda: can_list_topics(b.sasl_bootstrap, rdkafka_sasl("SCRAM-SHA-256", "alice",
                                                                              "alice-secret")), 30, "alice logs in")
    kafka_tool(ACL_COMMAND, "--bootstrap-server", b.bootstrap, "--add", "--allow-principal", "User:alice",
               "--operation", "Describe", "--operation", "Read", "--topic", visible).check("kafka-acls --add")

    # Nothing is served without a login: pages lead to the login page, actions are refused.
    page.goto(f"{console}/topics")
    assert page.url == f"{console}/login"
    r = page.request.post(f"{console}/topics", form={"csrf": "x", "name": "t", "partitions": "1"},
                          max_redirects=0)
    assert r.status == 401

    login(page, console, "alice", "wrong-password")
    assert page.url == f"{console}/login"
    assert "Login failed" in page.inner_text("p.error")
    page.goto(f"{console}/topics")
    assert page.url == f"{console}/login"

    login(page, console, "alice", "alice-secret")
    assert page.url == f"{console}/"
    assert page.inner_text("nav .user") == "alice"
    page.goto(f"{console}/topics?q={topic}")
    assert [r[0] for r in table(page, "#topics")] == [visible]
    # Creating a topic needs CREATE, which alice lacks: the authorizer's answer.
    page.fill("input[name=name]", f"{topic}-new")
    submit(page, "button:has-text('Create')")
    assert "TopicAuthorizationFailed" in page.inner_text("#create-error")
    # The ACL page needs DESCRIBE on the cluster.
    page.goto(f"{console}/security")
    assert "ClusterAuthorizationFailed" in page.inner_text("main")

    # A super user adds and deletes an ACL in the browser; kafka-acls sees each.
    admin = page.context.browser.new_context().new_page()
    login(admin, console, "admin", "admin-secret")
    admin.goto(f"{console}/security")
    users = {r[0]: r[1] for r in table(admin, "#users")}
    assert users["alice"] == "SCRAM-SHA-256 (8192 iterations)", users
    assert sorted(r[:6] for r in table(admin, "#acls")) == [
        [f"TOPIC {visible}", "LITERAL", "User:alice", "*", "DESCRIBE", "ALLOW"],
        [f"TOPIC {visible}", "LITERAL", "User:alice", "*", "READ", "ALLOW"]]
    admin.select_option("#create-acl select[name=resource_type]", label="TOPIC")
    admin.fill("#create-acl input[name=resource_name]", hidden)
    admin.fill("#create-acl input[name=principal]", "User:alice")
    admin.select_option("#create-acl select[name=operation]", label="DESCRIBE")
    submit(admin, "button:has-text('Add ACL')")
    listed = kafka_tool(ACL_COMMAND, "--bootstrap-server", b.bootstrap, "--list", "--topic", hidden).check().out
    assert "principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW" in listed, listed
    # alice now sees the hidden topic too.
    page.goto(f"{console}/topics?q={topic}")
    assert sorted(r[0] for r in table(page, "#topics")) == sorted([visible, hidden])

    row = [r for r in table(admin, "#acls") if r[0] == f"TOPIC {hidden}"]
    assert len(row) == 1
    submit(admin, f"#acls tr:has-text('{hidden}') button:has-text('Delete')")
    listed = kafka_tool(ACL_COMMAND, "--bootstrap-server", b.bootstrap, "--list", "--topic", hidden).check().out
    assert "User:alice" not in listed, listed

    # A KIP-848 group of the hidden topic, which alice may describe as a group: as on Kafka,
    # its members (who would name the topic) are not shown to her.
    hidden_group = f"{topic}-hidden-848"
    kafka_tool(ACL_COMMAND, "--bootstrap-server", b.bootstrap, "--add", "--allow-principal", "User:alice",
               "--operation", "Describe", "--group", hidden_group).check("kafka-acls --add group")
    c = harness.consumer(b.bootstrap, **{"group.id": hidden_group, "group.protocol": "consumer"})
    c.subscribe([hidden])
    try:
        harness.wait_until(lambda: c.poll(0.5) is None and bool(c.assignment()), 30, "an assignment")
        admin.goto(f"{console}/group?id={hidden_group}")
        assert len(table(admin, "#members")) == 1
        page.goto(f"{console}/group?id={hidden_group}")
        assert "TopicAuthorizationFailed" in page.inner_text("main"), page.inner_text("main")
        assert page.locator("#members").count() == 0
    finally:
        c.close()

    # Logged out, the session's cookie names nothing.
    submit(page, "button:has-text('Log out')")
    assert page.url == f"{console}/login"
    page.goto(f"{console}/topics")
    assert page.url == f"{console}/login"

    # At most two logins of one user: a third ends the least recently used.
    contexts = [page.context.browser.new_context() for _ in range(3)]
    pages = [ctx.new_page() for ctx in contexts]
    for pg in pages:
        login(pg, console, "alice", "alice-secret")
        assert pg.url == f"{console}/"
    for pg, kept in zip(pages, (False, True, True)):
        pg.goto(f"{console}/topics")
        assert (pg.url == f"{console}/topics") == kept, pg.url

    # A password changed with kafka-configs ends the logins that used the old one, once the
    # brokers are asked again (sluice.console.session.recheck.ms, 1 s here).
    add_scram_user(kafka_tool, b, "alice", "new-secret")
    time.sleep(1.5)
    pages[2].goto(f"{console}/topics")
    assert pages[2].url == f"{console}/login"
    login(pages[2], console, "alice", "new-secret")
    assert pages[2].url == f"{console}/"
    for ctx in contexts:
        ctx.close()
    admin.context.close()


def test_a_hanging_transaction_is_found_and_aborted_in_the_browser(broker_factory, kafka_tool, page, topic,
                                                                    tmp_path):
    b = console_broker(broker_factory)
    bs = b.bootstrap
    create_topic(bs, topic, partitions=1)
    txn_id = f"{topic}-hanging"
    hang = JavaProgram(tmp_path, "hang", "TxnClient", "hang", bs, topic, 0, txn_id, 600000, 3, 4)
    try:
        hang.wait_line("OPEN", 60)
    finally:
        hang.kill()  # SIGKILL: its transaction stays open
    # records 0-2, COMMIT marker 3, the open transaction's records 4-7
    listing = tool_table(kafka_tool(TRANSACTIONS_COMMAND, "--bootstrap-server", bs, "list").check().out)
    tool_rows = sorted([r["TransactionalId"], r["Coordinator"], r["ProducerId"], r["TransactionState"]]
                       for r in listing)
    page.goto(f"{b.console}/transactions")
    assert sorted(table(page, "#transactions")) == tool_rows

    page.click(f"text={txn_id}")
    desc = tool_table(kafka_tool(TRANSACTIONS_COMMAND, "--bootstrap-server", bs, "describe",
                                 "--transactional-id", txn_id).check().out)[0]
    shown = {r[0]: r[1] for r in table(page, "#transaction")}
    assert (shown["State"], shown["Producer id"], shown["Producer epoch"], shown["Partitions"]) == \
        (desc["TransactionState"], desc["ProducerId"], desc["ProducerEpoch"], f"{topic}-0")

    page.click(f"text={topic}-0")
    rows = table(page, "#open-transactions")
    assert len(rows) == 1 and rows[0][0] == "0" and rows[0][1] == desc["ProducerId"] and rows[0][4] == "4", rows
    assert watermarks(bs, topic, 0, "read_committed") == (0, 4)

    submit(page, "#open-transactions button:has-text('Abort')")
    assert table(page, "#open-transactions") == []
    # The ABORT marker at 8: the partition is stable to its end, as after kafka-transactions abort.
    assert watermarks(bs, topic, 0, "read_committed") == (0, 9)
    after = tool_table(kafka_tool(TRANSACTIONS_COMMAND, "--bootstrap-server", bs, "describe-producers",
                                  "--topic", topic, "--partition", "0").check().out)
    assert [r["CurrentTransactionStartOffset"] for r in after] == ["None"], after

    # Nothing more to abort: the broker's answer, and the partition unchanged.
    token = next(c["value"] for c in page.context.cookies() if c["name"] == csrf_cookie(b))
    for start, why in (("4", "no open transaction starts at offset 4"),
                       ("-1", "-1 is not the start offset of a transaction")):
        r = page.request.post(f"{b.console}/transactions/abort", max_redirects=0, form={
            "csrf": token, "topic": topic, "partition": "0", "start": start})
        assert r.status == 400 and why in r.text(), r.text()
    assert watermarks(bs, topic, 0, "read_committed") == (0, 9)


def test_quotas_and_dynamic_broker_configs_match_kafka_configs(broker_factory, kafka_tool, page, topic):
    b = console_broker(broker_factory)
    kafka_tool(CONFIG_COMMAND, "--bootstrap-server", b.bootstrap, "--alter", "--add-config",
               "producer_byte_rate=1048576,consumer_byte_rate=2097152", "--entity-type", "users",
               "--entity-name", f"{topic}-user").check("kafka-configs quotas")
    kafka_tool(CONFIG_COMMAND, "--bootstrap-server", b.bootstrap, "--alter", "--add-config",
               "request_percentage=50", "--entity-type", "clients", "--entity-default").check()
    page.goto(f"{b.console}/security")
    quotas = {r[0]: r[1] for r in table(page, "#quotas")}
    assert quotas[f"user {topic}-user"] == "consumer_byte_rate=2097152 producer_byte_rate=1048576", quotas
    assert quotas["client-id (default)"] == "request_percentage=50", quotas
    assert "no authorizer" in page.inner_text("main")

    # A quota set, then removed, in the browser: what kafka-configs describes.
    page.select_option("#set-quota select[name=entity_type]", "user")
    page.fill("#set-quota input[name=entity_name]", f"{topic}-web")
    page.select_option("#set-quota select[name=key]", "producer_byte_rate")
    page.fill("#set-quota input[name=value]", "4096")
    submit(page, "button:has-text('Set quota')")
    describe = ("--describe", "--entity-type", "users", "--entity-name", f"{topic}-web")
    out = kafka_tool(CONFIG_COMMAND, "--bootstrap-server", b.bootstrap, *describe).check().out
    assert "producer_byte_rate=4096.0" in out, out
    assert {r[0]: r[1] for r in table(page, "#quotas")}[f"user {topic}-web"] == "producer_byte_rate=4096"
    page.select_option("#set-quota select[name=entity_type]", "user")
    page.fill("#set-quota input[name=entity_name]", f"{topic}-web")
    page.select_option("#set-quota select[name=key]", "producer_byte_rate")
    submit(page, "button:has-text('Set quota')")
    out = kafka_tool(CONFIG_COMMAND, "--bootstrap-server", b.bootstrap, *describe).check().out
    assert "producer_byte_rate" not in out, out
    page.fill("#set-quota input[name=value]", "lots")
    submit(page, "button:has-text('Set quota')")
    assert '"lots" is not a number' in page.inner_text("#security-error")

    # Cluster-wide, then for broker 1 alone, in the browser; kafka-configs describes each.
    page.goto(f"{b.console}/brokers/configs")
    page.fill("#set-broker-config input[name=config]", "log.cleaner.backoff.ms")
    page.fill("#set-broker-config input[name=value]", "20000")
    submit(page, "button:has-text('Set config')")
    page.select_option("#set-broker-config select[name=broker]", "1")
    page.fill("#set-broker-config input[name=config]", "log.cleaner.backoff.ms")
    page.fill("#set-broker-config input[name=value]", "25000")
    submit(page, "button:has-text('Set config')")
    out = kafka_tool(CONFIG_COMMAND, "--bootstrap-server", b.bootstrap, "--describe", "--entity-type", "brokers",
                     "--entity-default").check().out
    assert "log.cleaner.backoff.ms=20000" in out, out
    out = kafka_tool(CONFIG_COMMAND, "--bootstrap-server", b.bootstrap, "--describe", "--entity-type", "brokers",
                     "--entity-name", "1").check().out
    assert "log.cleaner.backoff.ms=25000" in out, out
    rows = {r[0]: r[1:] for r in table(page, "#broker-1")}
    assert rows["log.cleaner.backoff.ms"] == ["25000", "DYNAMIC_BROKER_CONFIG"], rows

    # Deleted for broker 1: the cluster-wide value is in force again.
    page.select_option("#set-broker-config select[name=broker]", "1")
    page.fill("#set-broker-config input[name=config]", "log.cleaner.backoff.ms")
    submit(page, "button:has-text('Set config')")
    out = kafka_tool(CONFIG_COMMAND, "--bootstrap-server", b.bootstrap, "--describe", "--entity-type", "brokers",
                     "--entity-name", "1").check().out
    assert "log.cleaner.backoff.ms" not in out, out
    rows = {r[0]: r[1:] for r in table(page, "#broker-1")}
    assert rows["log.cleaner.backoff.ms"] == ["20000", "DYNAMIC_DEFAULT_BROKER_CONFIG"], rows

    # A config the broker refuses: its error on the page, nothing changed.
    page.fill("#set-broker-config input[name=config]", "log.cleaner.backoff.ms")
    page.fill("#set-broker-config input[name=value]", "not-a-number")
    submit(page, "button:has-text('Set config')")
    assert 'invalid value "not-a-number"' in page.inner_text("#configs-error")
    rows = {r[0]: r[1:] for r in table(page, "#broker-1")}
    assert rows["log.cleaner.backoff.ms"] == ["20000", "DYNAMIC_DEFAULT_BROKER_CONFIG"], rows


def test_kip848_and_share_group_pages_match_the_tools(broker_factory, kafka_tool, page, topic, tmp_path):
    from test_share_groups import set_group_config, start, start_offsets, stop

    b = console_broker(broker_factory)
    create_topic(b.bootstrap, topic, partitions=2)
    p = harness.producer(b.bootstrap)
    harness.produce_all(p, topic, [{"value": f"v{i}", "partition": i % 2} for i in range(20)])

    # A KIP-848 consumer (librdkafka, group.protocol=consumer) stays a member; its group has
    # committed 10 of partition 0 and 3 of partition 1.
    group = f"{topic}-848"
    c = harness.consumer(b.bootstrap, **{"group.id": group, "group.protocol": "consumer",
                                         "enable.auto.commit": False, "client.id": "console-848"})
    c.subscribe([topic])
    got, deadline = 0, time.time() + 60
    while got < 20 and time.time() < deadline:
        m = c.poll(1)
        if m is not None and m.error() is None:
            got += 1
    assert got == 20
    from confluent_kafka import TopicPartition
    c.commit(offsets=[TopicPartition(topic, 0, 10), TopicPartition(topic, 1, 3)], asynchronous=False)
    try:
        page.goto(f"{b.console}/group?id={group}")
        assert page.inner_text("#state") == "Stable"
        members = table(page, "#members")
        assert len(members) == 1 and members[0][1] == "console-848", members
        assert sorted(members[0][3].split()) == [f"{topic}-0", f"{topic}-1"], members
        offsets = {r[0]: r for r in table(page, "#offsets")}
        assert offsets[f"{topic}-0"][1:5] == ["10", "10", "0", "0"], offsets
        assert offsets[f"{topic}-1"][1:4] == ["3", "10", "7"], offsets
        assert int(offsets[f"{topic}-1"][4]) >= 0 and offsets[f"{topic}-1"][5] == "console-848", offsets
    finally:
        c.close()

    # A share group with one Java KafkaShareConsumer that accepted every record.
    share = f"{topic}-share"
    set_group_config(kafka_tool, b.bootstrap, share, "share.auto.offset.reset=earliest")
    consumer = start(tmp_path, "share", b.bootstrap, share, topic, "accept")
    try:
        consumer.wait_for(lambda ls: len([l for l in ls if l.startswith("REC")]) >= 20 and "ACKED" in ls, 90,
                          "the share consumer's records")
        starts = {}
        harness.wait_until(lambda: starts.update(start_offsets(kafka_tool, b.bootstrap, share, topic)) or
                           starts == {0: "10", 1: "10"}, 60, "every record acknowledged")
        page.goto(f"{b.console}/group?id={share}")
        assert page.inner_text("#state") == "Stable"
        members = table(page, "#members")
        assert len(members) == 1 and sorted(members[0][3].split()) == [f"{topic}-0", f"{topic}-1"], members
        shown = {int(r[0].rsplit("-", 1)[1]): r[1] for r in table(page, "#offsets")}
        assert shown == {0: starts[0], 1: starts[1]}, (shown, starts)
        assert page.inner_text("#total-lag") == "Lag, all partitions: 0 record(s)."
    finally:
        stop(consumer)


def test_logins_and_transactions_on_every_broker_of_a_cluster(broker_factory, kafka_tool, etcd, tmp_path, page,
                                                              topic):
    """Three brokers on etcd, each with a SCRAM listener and its console: a user logs in on
    each console, checked by that broker; each lists the transactions of every coordinator
    and reads a partition another broker owns, as that user."""
    from cluster_support import cluster_overrides, live_brokers, wait_all_led
    from test_sasl import SCRAM_JAAS

    shared = tmp_path / "shared"
    shared.mkdir()
    brokers, consoles = [], []
    for node in (1, 2, 3):
        b = broker_factory(start=False, log_dir=shared, kind="sluice", name=f"node{node}")
        b.sasl_bootstrap = f"127.0.0.1:{harness.free_port()}"
        console_port = harness.free_port()
        listeners = f"EXTERNAL://127.0.0.1:{b.port},SECURE://{b.sasl_bootstrap}"
        b.overrides.update(cluster_overrides(etcd, node, shared, "/console-logins"))
        b.overrides.update({
            "listeners": listeners,
            "advertised.listeners": listeners,
            "listener.security.protocol.map": "EXTERNAL:PLAINTEXT,SECURE:SASL_PLAINTEXT",
            "inter.broker.listener.name": "EXTERNAL",
            "listener.name.secure.sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "listener.name.secure.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
            "sluice.console.listener": f"127.0.0.1:{console_port}",
        })
        b.start()
        brokers.append(b)
        consoles.append(f"http://127.0.0.1:{console_port}")
    bootstrap = ",".join(b.bootstrap for b in brokers)
    harness.wait_until(lambda: len(live_brokers(bootstrap)) == 3, 30, "three brokers")
    add_scram_user(kafka_tool, brokers[0], "frank", "frank-secret", "SCRAM-SHA-512")
    frank = rdkafka_sasl("SCRAM-SHA-512", "frank", "frank-secret")
    harness.wait_until(lambda: can_list_topics(brokers[2].sasl_bootstrap, frank), 30, "frank logs in on broker 3")
    create_topic(bootstrap, topic, partitions=6)
    led = wait_all_led(bootstrap, topic, 6)
    secure = ",".join(b.sasl_bootstrap for b in brokers)
    ids = [f"{topic}-txn-{i}" for i in range(3)]
    for txn_id in ids:
        p = harness.producer(secure, **{"transactional.id": txn_id}, **frank)
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(6):
            p.produce(topic, value=f"{txn_id}-{i}", partition=i)
        p.commit_transaction(30)
    listing = tool_table(kafka_tool(TRANSACTIONS_COMMAND, "--bootstrap-server", bootstrap, "list").check().out)
    expected = sorted([r["TransactionalId"], r["Coordinator"]] for r in listing if r["TransactionalId"] in ids)
    assert len(expected) == 3, listing

    for node, console in zip((1, 2, 3), consoles):
        login(page, console, "frank", "wrong")
        assert page.url == f"{console}/login" and "Login failed" in page.inner_text("p.error")
        login(page, console, "frank", "frank-secret")
        assert page.inner_text("nav .user") == "frank"
        page.goto(f"{console}/transactions")
        shown = sorted([r[0], r[1]] for r in table(page, "#transactions") if r[0] in ids)
        assert shown == expected, (node, shown, expected)
        other = next(pt for pt, leader in led.items() if leader != node)
        page.goto(f"{console}/topics/{topic}/messages?partition={other}&offset=0")
        assert sorted(r[4] for r in table(page, "#messages")) == sorted(f"{t}-{other}" for t in ids)
        submit(page, "button:has-text('Log out')")

"""The web console (issue 59, sluice.console.listener) in a real browser: Debian's Chromium
driven by Playwright for Python (scripts/test installs both; no browser is downloaded).

- Its pages show what Kafka's own tools report for the same state: kafka-topics and
  GetOffsetShell for a topic's partitions and offsets, kafka-consumer-groups for a group's
  committed offsets and lag.
- Create a topic and produce a record with key and headers in the browser; librdkafka reads
  the record back as it was produced, and the browser finds it on the messages page.
- Record bytes that hold HTML and script are shown as text, never run.
- Actions without this browser's CSRF token (another site's form, a plain POST) and any action
  on a read-only console are refused, and change nothing.
- In a three-broker cluster every broker's console shows the whole cluster: all brokers,
  the leaders Metadata names, and the records of partitions other brokers own.
"""

from __future__ import annotations

import http.server
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
from confluent_kafka import TopicPartition

import harness
from cluster_support import bootstrap_of, cluster_overrides, leaders, wait_all_led
from harness import GET_OFFSETS, create_topic, parse_offsets

pytestmark = pytest.mark.sluice_only

GROUPS_COMMAND = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"],
        )
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context()
    pg = context.new_page()
    dialogs = []
    pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    pg.dialogs = dialogs
    yield pg
    context.close()


def console_broker(broker_factory, **extra):
    port = harness.free_port()
    overrides = {"sluice.console.listener": f"127.0.0.1:{port}", "group.initial.rebalance.delay.ms": 0}
    overrides.update(extra)
    b = broker_factory(overrides=overrides)
    b.console = f"http://127.0.0.1:{port}"
    return b


def csrf_cookie(b) -> str:
    """The name of the CSRF cookie of ``b``'s console (each console's cookies carry its port)."""
    return "sluice_csrf_" + b.console.rsplit(":", 1)[1]


def submit(page, button: str) -> None:
    """Click a form's button and wait for the page it leads to."""
    with page.expect_navigation():
        page.click(button)


def table(page, selector: str) -> list:
    """The text of each body row's cells of the table ``selector``."""
    return page.eval_on_selector_all(
        f"{selector} tbody tr",
        "rows => rows.map(r => Array.from(r.cells).map(c => c.innerText.trim()))",
    )


def test_pages_show_what_the_kafka_tools_report(broker_factory, kafka_tool, page, topic):
    b = console_broker(broker_factory)
    create_topic(b.bootstrap, topic, partitions=3)
    p = harness.producer(b.bootstrap)
    harness.produce_all(p, topic, [{"key": f"k{i}", "value": f"v{i}", "partition": i % 3} for i in range(30)])
    group = f"{topic}-g"
    c = harness.consumer(b.bootstrap, **{"group.id": group, "enable.auto.commit": False})
    c.assign([TopicPartition(topic, i, 0) for i in range(3)])
    got = 0
    deadline = time.time() + 30
    while got < 30 and time.time() < deadline:
        m = c.poll(1)
        if m is not None and m.error() is None:
            got += 1
    assert got == 30
    # Committed: 10, 4 and 0 of each partition's 10 records.
    c.commit(offsets=[TopicPartition(topic, 0, 10), TopicPartition(topic, 1, 4), TopicPartition(topic, 2, 0)],
             asynchronous=False)
    c.close()

    page.goto(f"{b.console}/topics?q={topic}")
    rows = {r[0]: r for r in table(page, "#topics")}
    assert rows[topic][1:3] == ["3", "30"], rows
    # Lag over every group: 0 + 6 + 10 (checked against kafka-consumer-groups below); no rate
    # before a second view.
    assert rows[topic][4:] == ["-", "16"], rows
    harness.produce_all(p, topic, [{"value": "more", "partition": i % 3} for i in range(30)])
    time.sleep(1.2)
    page.reload()
    rows = {r[0]: r for r in table(page, "#topics")}
    assert rows[topic][2] == "60" and 0 < float(rows[topic][4]) <= 30 / 1.2 and rows[topic][5] == "46", rows

    res = kafka_tool(GET_OFFSETS, "--bootstrap-server", b.bootstrap, "--topic", topic, "--time", "-1")
    res.check("get offsets")
    ends = {p_: o for (t, p_), o in parse_offsets(res.out).items() if t == topic}

    page.click(f"text={topic}")
    parts = table(page, "#partitions")
    assert {int(r[0]): int(r[4]) for r in parts} == ends
    assert all(r[1] == "1" for r in parts)

    res = kafka_tool(GROUPS_COMMAND, "--bootstrap-server", b.bootstrap, "--describe", "--group", group)
    res.check("describe group")
    tool_lag = {}
    for line in res.out.splitlines():
        f = line.split()
        if len(f) >= 6 and f[1] == topic:
            tool_lag[int(f[2])] = (int(f[3]), int(f[4]), int(f[5]))
    assert tool_lag, res.out
    assert sum(v[2] for v in tool_lag.values()) == 46, tool_lag
    page.goto(f"{b.console}/groups?q={group}")
    assert [r[0] for r in table(page, "#groups")] == [group]
    page.click(f"text={group}")
    console_lag = {int(r[0].rsplit("-", 1)[1]): (int(r[1]), int(r[2]), int(r[3])) for r in table(page, "#offsets")}
    assert console_lag == tool_lag
    assert page.inner_text("#total-lag") == f"Lag, all partitions: {sum(v[2] for v in tool_lag.values())} record(s)."

    page.goto(b.console)
    brokers = table(page, "#brokers")
    assert len(brokers) == 1 and brokers[0][0] == "1" and brokers[0][3] == "controller"


def test_create_a_topic_and_produce_in_the_browser_then_read_it_with_librdkafka(broker_factory, kafka_tool,
                                                                               page, topic):
    b = console_broker(broker_factory)
    page.goto(f"{b.console}/topics")
    page.fill("input[name=name]", topic)
    page.fill("input[name=partitions]", "2")
    page.fill("textarea[name=configs]", "retention.ms=123456789\ncleanup.policy=delete")
    submit(page, "button:has-text('Create')")
    assert page.url.endswith(f"/topics/{topic}")
    assert len(table(page, "#partitions")) == 2
    configs = {r[0]: r for r in table(page, "#configs")}
    assert configs["retention.ms"][1:] == ["123456789", "DYNAMIC_TOPIC_CONFIG"]

    res = kafka_tool(harness.TOPIC_COMMAND, "--bootstrap-server", b.bootstrap, "--describe", "--topic", topic)
    res.check("describe topic")
    assert "PartitionCount: 2" in res.out and "retention.ms=123456789" in res.out

    # Creating it again: the broker's error, shown on the page.
    page.goto(f"{b.console}/topics")
    page.fill("input[name=name]", topic)
    submit(page, "button:has-text('Create')")
    assert "TopicAlreadyExists" in page.inner_text("#create-error")

    page.goto(f"{b.console}/topics/{topic}/messages?partition=1")
    page.fill("input[name=key]", "order-7")
    page.fill("textarea[name=headers]", "source=console\ntrace=abc")
    page.fill("textarea[name=value]", '{"amount": 12, "currency": "EUR"}')
    submit(page, "button:has-text('Produce to partition 1')")
    rows = table(page, "#messages")
    assert len(rows) == 1 and rows[0][0] == "0" and rows[0][2] == "order-7"
    assert "source: console" in rows[0][3] and '"amount": 12' in rows[0][4]

    c = harness.consumer(b.bootstrap, **{"group.id": f"{topic}-reader"})
    c.assign([TopicPartition(topic, 1, 0)])
    m = None
    deadline = time.time() + 30
    while m is None and time.time() < deadline:
        got = c.poll(1)
        if got is not None and got.error() is None:
            m = got
    c.close()
    assert m is not None
    assert m.key() == b"order-7" and m.value() == b'{"amount": 12, "currency": "EUR"}'
    assert m.headers() == [("source", b"console"), ("trace", b"abc")]

    # Shown as pretty-printed JSON, and found again from a time.
    page.goto(f"{b.console}/topics/{topic}/messages?partition=1&offset=0&format=json")
    assert '"amount": 12,\n  "currency": "EUR"' in table(page, "#messages")[0][4].replace("\r", "")
    page.goto(f"{b.console}/topics/{topic}/messages?partition=1&timestamp={m.timestamp()[1]}")
    assert [r[0] for r in table(page, "#messages")] == ["0"]


def test_record_bytes_holding_html_are_shown_never_run(broker_factory, page, topic):
    b = console_broker(broker_factory)
    create_topic(b.bootstrap, topic)
    evil = "<script>window.__xss = 1; alert('xss')</script><img src=x onerror=\"window.__xss=2\">"
    p = harness.producer(b.bootstrap)
    harness.produce_all(p, topic, [{"key": evil, "value": evil, "headers": [(evil, evil.encode())]}])
    page.goto(f"{b.console}/topics/{topic}/messages")
    page.wait_for_load_state("load")
    assert page.evaluate("window.__xss") is None
    assert page.dialogs == []
    row = table(page, "#messages")[0]
    assert row[2] == evil and row[4] == evil and evil in row[3]
    assert page.locator("#messages script").count() == 0
    assert page.locator("#messages img").count() == 0


class _Site(http.server.BaseHTTPRequestHandler):
    """Another site: a page whose form posts to the console."""

    target = ""

    def do_GET(self):  # noqa: N802
        form = (f'<form id="f" method="post" action="{self.target}/topics">'
                '<input name="csrf" value="guessed"><input name="name" value="planted">'
                '<input name="partitions" value="1"></form>'
                '<script>document.getElementById("f").submit()</script>')
        body = form.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def post(url: str, fields: dict, cookie: str | None = None):
    data = urllib.parse.urlencode(fields).encode()
    req = urllib.request.Request(url, data=data, method="POST")
    if cookie:
        req.add_header("Cookie", cookie)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_actions_without_the_token_and_on_a_read_only_console_are_refused(broker_factory, page):
    b = console_broker(broker_factory)
    # The browser has been on the console: it holds a cookie another site's form would carry
    # if the cookie allowed it.
    page.goto(f"{b.console}/topics")
    _Site.target = b.console
    site = http.server.ThreadingHTTPServer(("127.0.0.1", harness.free_port()), _Site)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    try:
        with page.expect_response(lambda r: r.request.method == "POST") as answer:
            page.goto(f"http://localhost:{site.server_address[1]}/")
        assert answer.value.status == 403
    finally:
        site.shutdown()
    # A POST with a token but not the cookie's, and one with neither.
    assert post(f"{b.console}/topics", {"csrf": "0" * 64, "name": "planted"},
                cookie=f"{csrf_cookie(b)}=" + "1" * 64)[0] == 403
    assert post(f"{b.console}/topics", {"csrf": "", "name": "planted"})[0] == 403
    assert post(f"{b.console}/topics/planted/messages", {"csrf": "", "partition": "0", "value": "x"})[0] == 403
    md = harness.admin(b.bootstrap).list_topics(timeout=10)
    assert "planted" not in md.topics

    ro = console_broker(broker_factory, **{"sluice.console.read.only": "true"})
    page.goto(f"{ro.console}/topics")
    assert page.locator("form.action").count() == 0
    token = next(c["value"] for c in page.context.cookies() if c["name"] == csrf_cookie(ro))
    status, body = post(f"{ro.console}/topics", {"csrf": token, "name": "planted", "partitions": "1"},
                        cookie=f"{csrf_cookie(ro)}={token}")
    assert status == 403 and "read-only" in body
    assert "planted" not in harness.admin(ro.bootstrap).list_topics(timeout=10).topics


def test_every_broker_of_a_cluster_shows_the_whole_cluster(broker_factory, etcd, tmp_path, page, topic):
    ports = {n: harness.free_port() for n in (1, 2, 3)}
    shared = tmp_path / "shared"
    shared.mkdir()
    brokers = []
    for node in (1, 2, 3):
        o = cluster_overrides(etcd, node, shared, "/console-test",
                              **{"sluice.console.listener": f"127.0.0.1:{ports[node]}"})
        brokers.append(broker_factory(overrides=o, log_dir=shared, kind="sluice", name=f"node{node}"))
    bootstrap = bootstrap_of(brokers)
    harness.wait_until(lambda: len(harness.admin(bootstrap).list_topics(timeout=10).brokers) == 3, 30,
                       "3 brokers in the metadata")
    create_topic(bootstrap, topic, partitions=6)
    led = wait_all_led(bootstrap, topic, 6)
    assert len(set(led.values())) > 1, led
    p = harness.producer(bootstrap)
    harness.produce_all(p, topic, [{"value": f"p{i % 6}-r{i // 6}", "partition": i % 6} for i in range(60)])

    for node in (1, 2, 3):
        console = f"http://127.0.0.1:{ports[node]}"
        page.goto(console)
        brokers_shown = table(page, "#brokers")
        assert sorted(r[0] for r in brokers_shown) == ["1", "2", "3"]
        # Every broker's log directory, as its DescribeLogDirs reports it: the shared volume.
        dirs = table(page, "#log-dirs")
        assert sorted(r[0] for r in dirs) == ["1", "2", "3"] and {r[1] for r in dirs} == {str(shared)}, dirs
        # Every broker's own figures, the others' read from their consoles: records went in
        # at each leader.
        figures = {r[0].split()[0]: r for r in table(page, "#broker-figures")}
        assert sorted(figures) == ["1", "2", "3"] and all(len(r) == 11 for r in figures.values()), figures
        assert figures[str(node)][0] == f"{node} (this one)"
        # The ownership records: each broker leading a partition of the topic owns some.
        owners = {r[1] for r in table(page, "#ownership")}
        assert {str(l) for l in led.values()} <= owners, (owners, led)
        for leader in set(led.values()):
            assert figures[str(leader)][4] != "0 B", figures
        assert sum(1 for r in brokers_shown if r[3] == "controller") == 1
        assert page.locator("#moves").count() == 1
        page.goto(f"{console}/topics/{topic}")
        now = leaders(bootstrap, topic)
        assert {int(r[0]): int(r[1]) for r in table(page, "#partitions")} == now
        assert all(r[5] == "10" for r in table(page, "#partitions"))
        # A partition another broker leads: its records, read through its leader.
        other = next(pt for pt, l in now.items() if l != node)
        page.goto(f"{console}/topics/{topic}/messages?partition={other}&offset=0")
        assert [r[4] for r in table(page, "#messages")] == [f"p{other}-r{i}" for i in range(10)]


def java_group_read(kafka_tool, bootstrap: str, topic: str, group: str, n: int) -> list:
    """Kafka's console consumer (the Java client) in ``group``: ``n`` values, from the
    group's committed offsets (the earliest where it has none); it commits as it closes."""
    res = kafka_tool(harness.CONSOLE_CONSUMER, "--bootstrap-server", bootstrap, "--topic", topic,
                     "--group", group, "--max-messages", str(n), "--timeout-ms", "20000",
                     "--from-beginning")
    assert f"Processed a total of {n} messages" in res.err, (res.out, res.err)
    return res.out.split()


def test_reset_a_groups_offsets_and_a_java_consumer_resumes_there(broker_factory, kafka_tool, page, topic):
    b = console_broker(broker_factory)
    create_topic(b.bootstrap, topic, partitions=2)
    p = harness.producer(b.bootstrap)
    harness.produce_all(p, topic, [{"value": f"p{i % 2}-r{i // 2}", "partition": i % 2} for i in range(20)])
    group = f"{topic}-g"
    assert len(java_group_read(kafka_tool, b.bootstrap, topic, group, 20)) == 20

    page.goto(f"{b.console}/group?id={group}")
    assert page.inner_text("#state") == "Empty"
    assert [r[1:4] for r in table(page, "#offsets")] == [["10", "10", "0"], ["10", "10", "0"]]
    # The exact offsets, pre-filled with the committed ones: set 7 and 3.
    assert page.input_value(f"input[name='offset:0:{topic}']") == "10"
    page.fill(f"input[name='offset:0:{topic}']", "7")
    page.fill(f"input[name='offset:1:{topic}']", "3")
    submit(page, "button:has-text('Reset offsets')")
    assert [r[1:4] for r in table(page, "#offsets")] == [["7", "10", "3"], ["3", "10", "7"]]

    got = java_group_read(kafka_tool, b.bootstrap, topic, group, 10)
    assert sorted(got) == sorted([f"p0-r{i}" for i in range(7, 10)] + [f"p1-r{i}" for i in range(3, 10)])

    # To the earliest: the Java consumer reads everything again.
    page.goto(f"{b.console}/group?id={group}")
    page.select_option("select[name=to]", "earliest")
    submit(page, "button:has-text('Reset offsets')")
    assert [r[1] for r in table(page, "#offsets")] == ["0", "0"]
    assert len(java_group_read(kafka_tool, b.bootstrap, topic, group, 20)) == 20

    # With an active member: no reset form, and the delete is refused by the coordinator.
    c = harness.consumer(b.bootstrap, **{"group.id": group, "enable.auto.commit": False})
    c.subscribe([topic])
    harness.wait_until(lambda: (c.poll(0.2), c.assignment())[1], 30, "an assignment")
    try:
        page.goto(f"{b.console}/group?id={group}")
        assert page.locator("#reset-closed").count() == 1
        assert page.locator("#reset").count() == 0
        submit(page, "button:has-text('Delete group')")
        assert "NonEmptyGroup" in page.inner_text("#group-error")
    finally:
        c.close()
    harness.wait_until(lambda: "Empty" in urllib.request.urlopen(f"{b.console}/group?id={group}").read().decode(),
                       30, "the group empty")
    page.goto(f"{b.console}/group?id={group}")
    submit(page, "button:has-text('Delete group')")
    assert page.url.endswith("/groups")
    res = kafka_tool(GROUPS_COMMAND, "--bootstrap-server", b.bootstrap, "--list")
    res.check("list groups")
    assert group not in res.out.split()


def test_search_finds_keys_values_and_headers_and_stops_at_its_limits(broker_factory, page, topic):
    b = console_broker(broker_factory)
    create_topic(b.bootstrap, topic)
    n = 100_000
    needles = {12_345: {"key": "needle-1"}, 54_321: {"value": "a needle-2 in a value"},
               99_000: {"headers": [("trace", b"needle-3")]}}
    recs = []
    for i in range(n):
        r = {"key": f"k{i}", "value": f"value-{i}", "partition": 0}
        r.update(needles.get(i, {}))
        recs.append(r)
    p = harness.producer(b.bootstrap, **{"linger.ms": 50, "batch.num.messages": 10000, "compression.type": "lz4"})
    harness.produce_all(p, topic, recs)

    base = f"{b.console}/topics/{topic}/messages?partition=0"
    page.goto(f"{base}&search=needle")
    assert [r[0] for r in table(page, "#messages")] == ["12345", "54321", "99000"]
    summary = page.inner_text("#search-summary")
    assert summary.startswith(f"Scanned {n} of {n} record(s) (offsets 0 to {n})") and "3 match(es)." in summary

    page.goto(f"{base}&search=" + urllib.parse.quote(r"^needle-\d$") + "&regex=on")
    assert [r[0] for r in table(page, "#messages")] == ["12345", "99000"]  # a key and a header value

    page.goto(f"{base}&search=needle&limit=1")
    assert [r[0] for r in table(page, "#messages")] == ["12345"]

    # Stopped by the records limit: 20,000 read, of 100,000.
    page.goto(f"{base}&search=needle&scan=20000")
    assert [r[0] for r in table(page, "#messages")] == ["12345"]
    assert "Scanned 20000 of 100000" in page.inner_text("#search-summary")
    assert "stopped at the records limit" in page.inner_text("#search-summary")
    # From an offset.
    page.goto(f"{base}&search=needle&offset=50000")
    assert [r[0] for r in table(page, "#messages")] == ["54321", "99000"]
    # A bad expression: a clear answer.
    page.goto(f"{base}&search=(&regex=on")
    assert "not a regular expression" in page.inner_text("#read-error")


def test_administer_a_topic_configs_partitions_records_and_deletion(broker_factory, kafka_tool, page, topic):
    b = console_broker(broker_factory)
    create_topic(b.bootstrap, topic, partitions=2)
    p = harness.producer(b.bootstrap)
    harness.produce_all(p, topic, [{"value": f"v{i}", "partition": 0} for i in range(10)])
    page.goto(f"{b.console}/topics/{topic}")

    page.fill("#set-config input[name=config]", "retention.bytes")
    page.fill("#set-config input[name=value]", "7777777")
    submit(page, "button:has-text('Set config')")
    configs = {r[0]: r for r in table(page, "#configs")}
    assert configs["retention.bytes"][1:] == ["7777777", "DYNAMIC_TOPIC_CONFIG"]
    res = kafka_tool(harness.CONFIG_COMMAND, "--bootstrap-server", b.bootstrap, "--describe",
                     "--entity-type", "topics", "--entity-name", topic)
    res.check("describe configs")
    assert "retention.bytes=7777777" in res.out
    # Back to the default: an empty value deletes the override.
    page.fill("#set-config input[name=config]", "retention.bytes")
    submit(page, "button:has-text('Set config')")
    assert {r[0]: r for r in table(page, "#configs")}["retention.bytes"][2] == "DEFAULT_CONFIG"
    # A config the broker refuses: its error on the page.
    page.fill("#set-config input[name=config]", "retention.bytes")
    page.fill("#set-config input[name=value]", "lots")
    submit(page, "button:has-text('Set config')")
    assert "InvalidConfig" in page.inner_text("#admin-error")

    page.fill("#add-partitions input[name=count]", "5")
    submit(page, "button:has-text('Add partitions')")
    assert len(table(page, "#partitions")) == 5
    res = kafka_tool(harness.TOPIC_COMMAND, "--bootstrap-server", b.bootstrap, "--describe", "--topic", topic)
    assert "PartitionCount: 5" in res.out

    page.select_option("#delete-records select[name=partition]", "0")
    page.fill("#delete-records input[name=offset]", "4")
    submit(page, "button:has-text('Delete records')")
    assert table(page, "#partitions")[0][3:5] == ["4", "10"]
    res = kafka_tool(GET_OFFSETS, "--bootstrap-server", b.bootstrap, "--topic", topic, "--time", "-2")
    assert parse_offsets(res.out)[(topic, 0)] == 4

    page.fill("#delete-topic input[name=confirm]", "not-the-name")
    submit(page, "button:has-text('Delete topic')")
    assert "nothing was deleted" in page.inner_text("#admin-error")
    page.fill("#delete-topic input[name=confirm]", topic)
    submit(page, "button:has-text('Delete topic')")
    assert page.url.endswith("/topics"), page.inner_text("main")
    harness.wait_until(lambda: topic not in harness.admin(b.bootstrap).list_topics(timeout=10).topics, 30,
                       "the topic gone")


def test_a_request_naming_another_host_is_refused(broker_factory):
    """DNS rebinding: a page of another site whose name now resolves to the console gets
    nothing, not even a page to read a token from."""
    b = console_broker(broker_factory, **{"sluice.console.hosts": "console.example.com"})
    for host, status in (("evil.example:80", 421), ("console.example.com", 200), ("localhost", 200)):
        req = urllib.request.Request(f"{b.console}/topics", headers={"Host": host})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                got = r.status
        except urllib.error.HTTPError as e:
            got = e.code
        assert got == status, host


def test_a_batch_that_decompresses_past_the_bound_is_reported_and_the_broker_stays_up(broker_factory, page, topic):
    b = console_broker(broker_factory)
    create_topic(b.bootstrap, topic)
    p = harness.producer(b.bootstrap, **{"compression.type": "zstd", "message.max.bytes": 100_000_000})
    harness.produce_all(p, topic, [{"value": b"\0" * (40 << 20)}, {"value": b"small"}])
    page.goto(f"{b.console}/topics/{topic}/messages?offset=0")
    assert "not read" in page.inner_text("main")
    page.goto(f"{b.console}/topics/{topic}/messages?offset=0&search=small")
    assert "not read" in page.inner_text("main")
    # The next record is read from its own offset.
    page.goto(f"{b.console}/topics/{topic}/messages?offset=1")
    assert [r[4] for r in table(page, "#messages")] == ["small"]
    assert b.proc.poll() is None


def test_live_tail_shows_each_new_record_of_its_partition_as_text(broker_factory, page, topic):
    b = console_broker(broker_factory)
    create_topic(b.bootstrap, topic, partitions=2)
    p = harness.producer(b.bootstrap)
    harness.produce_all(p, topic, [{"value": "before", "partition": 1}])
    page.goto(f"{b.console}/topics/{topic}/messages?partition=1")
    page.click("#tail-link")
    # Polled from here: the console's CSP refuses the eval a page-side wait would need.
    harness.wait_until(lambda: page.inner_text("#tail-status").startswith("Live from offset 1"), 15, "the tail")
    evil = "<img src=x onerror=\"window.__xss=1\"><script>window.__xss=2</script>"
    harness.produce_all(p, topic, [{"key": f"k{i}", "value": evil if i == 1 else f"v{i}", "headers": [("h", b"x")],
                                    "partition": 1} for i in range(3)] + [{"value": "elsewhere", "partition": 0}])
    harness.wait_until(lambda: len(table(page, "#tail")) >= 3, 15, "three records in the tail")
    time.sleep(1.5)  # a record of partition 0 would have come by now
    rows = table(page, "#tail")
    assert [r[0] for r in rows] == ["1", "2", "3"], rows
    assert [r[2] for r in rows] == ["k0", "k1", "k2"] and rows[0][3] == "h: x" and rows[0][4] == "v0", rows
    assert rows[1][4] == evil
    assert page.evaluate("window.__xss") is None


def test_a_broker_with_live_tails_open_stops_cleanly(broker_factory, topic):
    """A live tail's answer never ends by itself: stopping the broker ends it (SIGTERM, within
    a few seconds) instead of waiting on the browser."""
    import socket

    b = console_broker(broker_factory)
    create_topic(b.bootstrap, topic)
    host, port = b.console.rsplit("/", 1)[1].split(":")
    tails = []
    for _ in range(3):
        s = socket.create_connection((host, int(port)), timeout=10)
        s.sendall(f"GET /topics/{topic}/tail/events?partition=0 HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        assert b"event: live" in s.recv(4096) or b"event: live" in s.recv(4096)
        tails.append(s)
    started = time.monotonic()
    assert b.stop(timeout=20) in b.clean_exit_codes()
    assert time.monotonic() - started < 10
    for s in tails:
        s.close()

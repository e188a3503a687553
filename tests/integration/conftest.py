"""Fixtures for the Sluice integration tests.

Target selection: SLUICE_TEST_TARGET=sluice (default) runs the tests against
``target/release/sluice serve --config FILE``; SLUICE_TEST_TARGET=kafka runs the
very same tests against a real single-node Apache Kafka (KRaft) started from
the Maven jars in tests/.deps/kafka-libs.

Markers:
  @pytest.mark.broker_config(**props)  extra server.properties for ``broker``
  @pytest.mark.sluice_only             skipped unless the target is sluice
  @pytest.mark.kafka_only              skipped unless the target is kafka
"""

from __future__ import annotations

import re

import pytest

import harness
from harness import BROKER_CLASSES, TARGET


def pytest_report_header(config):
    libs = "present" if harness.kafka_libs_present() else "MISSING"
    return [f"broker under test: {TARGET} (SLUICE_TEST_TARGET); kafka jars: {libs} ({harness.KAFKA_LIBS})"]


def pytest_runtest_setup(item):
    if item.get_closest_marker("sluice_only") and TARGET != "sluice":
        pytest.skip("Sluice-only test (SLUICE_TEST_TARGET != sluice)")
    if item.get_closest_marker("kafka_only") and TARGET != "kafka":
        pytest.skip("Kafka-only test (SLUICE_TEST_TARGET != kafka)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On failure, attach the tail of every broker log this test started."""
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for b in getattr(item, "_sluice_brokers", []):
            rep.sections.append(
                (f"{b.kind} broker '{b.name}' output (last 150 lines of {b.log_file})", harness.tail(b.log_file, 150))
            )


@pytest.fixture(scope="session")
def target() -> str:
    return TARGET


@pytest.fixture
def broker_factory(request, tmp_path):
    """Start brokers: ``broker_factory(overrides=None, log_dir=None, kind=None, name=None, start=True)``.

    ``kind`` defaults to the target under test ("sluice" or "kafka"). Every
    broker is SIGKILLed (if still running) and its own data dir removed at teardown.
    """
    started = []
    request.node._sluice_brokers = started

    def make(overrides=None, log_dir=None, kind=None, name=None, start=True):
        kind = kind or TARGET
        name = name or f"{kind}{len(started) + 1}"
        cls = BROKER_CLASSES[kind]
        b = cls(tmp_path / name, log_dir=log_dir, overrides=overrides, name=name)
        started.append(b)
        if start:
            b.start()
        return b

    yield make
    errors = []
    for b in reversed(started):
        try:
            b.cleanup()
        except Exception as e:  # noqa: BLE001
            errors.append(f"{b}: {e!r}")
    if errors:
        raise harness.HarnessError("broker cleanup failed: " + "; ".join(errors))


@pytest.fixture
def broker(request, broker_factory):
    """The broker under test, started on a free port with a fresh log dir.

    Has .bootstrap, .log_dir, .stop(), .kill(), .restart(), .log_file.
    """
    overrides = {}
    for m in reversed(list(request.node.iter_markers("broker_config"))):
        overrides.update(m.kwargs)
    return broker_factory(overrides=overrides)


@pytest.fixture
def etcd(tmp_path):
    """A real etcd of the test's own, on free ports (cluster mode)."""
    from cluster_support import EtcdServer

    server = EtcdServer(tmp_path / "etcd").start()
    yield server
    server.kill()


@pytest.fixture
def kafka_tool():
    """``kafka_tool(CLASS, *args, input=None, timeout=120)`` -> ToolResult(rc, out, err)."""
    if not harness.kafka_libs_present():
        pytest.fail(f"Kafka jars missing in {harness.KAFKA_LIBS}: run scripts/test to fetch them")
    return harness.kafka_tool


@pytest.fixture
def topic(request) -> str:
    """A topic name unique to this test (legal Kafka topic characters only)."""
    name = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name).strip("-.")
    return f"it-{name}"[:200]

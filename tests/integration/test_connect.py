"""Kafka Connect against the broker: a real distributed worker (connect-runtime and
connect-file from Maven Central, ``ConnectDistributed``) runs a FileStreamSource connector
(file -> topic) and a FileStreamSink connector (topic -> file). The worker keeps its
connector configs, source offsets and statuses in three internal topics it creates itself
with ``cleanup.policy=compact`` (and refuses to start if they are not compacted).

The worker is stopped with SIGTERM and started again; more lines are appended while it is
down. The sink file must end with every line exactly once, in order: the source resumed from
the offset it stored (not from the start of the file), and the sink from its group's
committed offset. Connectors are created and watched through the worker's REST API.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter

import pytest

from harness import (BROKER_LOG4J, FAST_START_JVM, HarnessError, admin, consume_partitions, create_topic,
                     free_port, java_cmd, tail, wait_until, write_properties)

CONNECT_MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"
SOURCE_CLASS = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK_CLASS = "org.apache.kafka.connect.file.FileStreamSinkConnector"
WORKER_START_TIMEOUT = 60


class ConnectWorker:
    """A Kafka Connect distributed worker process; its output goes to ``log_file``."""

    def __init__(self, work_dir, bootstrap: str, group: str):
        self.work_dir = work_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config_topic = f"{group}-configs"
        self.offset_topic = f"{group}-offsets"
        self.status_topic = f"{group}-status"
        self.props_file = work_dir / "worker.properties"
        self.log_file = work_dir / "connect.log"
        self.proc = None
        write_properties(self.props_file, {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "config.storage.topic": self.config_topic,
            "offset.storage.topic": self.offset_topic,
            "status.storage.topic": self.status_topic,
            "config.storage.replication.factor": 1,
            "offset.storage.replication.factor": 1,
            "status.storage.replication.factor": 1,
            "offset.storage.partitions": 5,
            "status.storage.partitions": 1,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "listeners": self.url,
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": self.port,
            # The connectors are on the classpath (tests/.deps/kafka-libs) with ServiceLoader
            # manifests: no scan of a plugin.path.
            "plugin.discovery": "service_load",
            "offset.flush.interval.ms": 1000,
            "scheduled.rebalance.max.delay.ms": 0,
        })

    def start(self) -> None:
        cmd = java_cmd(CONNECT_MAIN, str(self.props_file), jvm_opts=FAST_START_JVM, log4j=BROKER_LOG4J)
        with open(self.log_file, "ab") as log:
            log.write(f"===== test: start: {' '.join(cmd)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         cwd=self.work_dir, start_new_session=True)

        def ready():
            if self.proc.poll() is not None:
                raise HarnessError(f"Connect worker exited with {self.proc.returncode}:\n{tail(self.log_file, 80)}")
            return self.get("/") is not None

        wait_until(ready, WORKER_START_TIMEOUT, "the Connect worker's REST API", interval=0.5)

    def stop(self, timeout: float = 60) -> int:
        """SIGTERM: the worker stops its tasks (committing their offsets) and leaves the group."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise HarnessError(f"Connect worker ignored SIGTERM for {timeout:.0f}s:\n{tail(self.log_file, 80)}")
        # The JVM exits with 128+SIGTERM after running the shutdown hook.
        assert rc in (0, 143), f"Connect worker exited with {rc}:\n{tail(self.log_file, 80)}"
        return rc

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)

    def request(self, method: str, path: str, body=None):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": "application/json", "Accept": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            text = r.read().decode()
            return json.loads(text) if text else {}

    def get(self, path: str):
        try:
            return self.request("GET", path)
        except (urllib.error.URLError, ConnectionError, OSError):
            return None

    def write(self, method: str, path: str, body) -> None:
        """A POST or PUT, retried while the worker is (re)joining its group (409)."""
        def attempt():
            try:
                self.request(method, path, body)
                return True
            except urllib.error.HTTPError as e:
                if e.code == 409:  # rebalance in progress
                    return False
                raise HarnessError(f"{method} {path}: {e.code} {e.read().decode(errors='replace')}")

        wait_until(attempt, 60, f"{method} {path} to be accepted", interval=0.5)

    def create_connector(self, name: str, config: dict) -> None:
        self.write("POST", "/connectors", {"name": name, "config": config})

    def wait_running(self, name: str, timeout: float = 60) -> None:
        def running():
            st = self.get(f"/connectors/{name}/status")
            if not st:
                return False
            tasks = st.get("tasks", [])
            for t in tasks:
                if t["state"] == "FAILED":
                    raise HarnessError(f"task of {name} failed: {t.get('trace', '')[:3000]}")
            return st["connector"]["state"] == "RUNNING" and tasks and all(t["state"] == "RUNNING" for t in tasks)

        try:
            wait_until(running, timeout, f"connector {name} and its task RUNNING", interval=0.5)
        except HarnessError as e:
            raise HarnessError(f"{e}\n--- worker log ---\n{tail(self.log_file, 80)}") from None


@pytest.fixture
def connect_worker(tmp_path, broker):
    made = []

    def make(group: str) -> ConnectWorker:
        d = tmp_path / "connect"
        d.mkdir(exist_ok=True)
        w = ConnectWorker(d, broker.bootstrap, group)
        made.append(w)
        return w

    yield make
    for w in made:
        w.kill()
        # Shown in the report of a failing test only (captured teardown output).
        print(f"--- Connect worker log (last 120 lines of {w.log_file}) ---\n{tail(w.log_file, 120)}")


def sink_lines(path) -> list:
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


def append_lines(path, lines) -> None:
    with open(path, "a") as f:
        f.write("".join(line + "\n" for line in lines))
        f.flush()
        os.fsync(f.fileno())


def internal_records(bootstrap: str, topic: str) -> list:
    """Every record of every partition of ``topic``: [(key, value)]."""
    md = admin(bootstrap).list_topics(topic=topic, timeout=10)
    parts = sorted(md.topics[topic].partitions)
    msgs = consume_partitions(bootstrap, topic, parts, timeout=30)
    return [(m.key(), m.value()) for m in msgs]


def source_offset(bootstrap: str, offset_topic: str, connector: str, source_file) -> int:
    """The newest position the source connector stored for ``source_file`` (-1: none yet)."""
    pos = -1
    for key, value in internal_records(bootstrap, offset_topic):
        if key is None or value is None:
            continue
        k = json.loads(key)  # ["connector", {"filename": FILE}]
        if k[0] == connector and k[1].get("filename") == str(source_file):
            pos = json.loads(value)["position"]
    return pos


def committed_offset(bootstrap: str, group: str, topic: str) -> int:
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    a = admin(bootstrap)  # kept referenced until the answer is in
    fut = a.list_consumer_group_offsets(
        [ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])], request_timeout=10)
    res = fut[group].result(timeout=15)
    return res.topic_partitions[0].offset


def end_offset(bootstrap: str, topic: str) -> int:
    from confluent_kafka import TopicPartition

    from harness import consumer

    c = consumer(bootstrap)
    try:
        return c.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        c.close()


def cleanup_policies(bootstrap: str, topics) -> dict:
    from confluent_kafka.admin import ConfigResource, ResourceType

    a = admin(bootstrap)  # kept referenced until the answers are in
    futs = a.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in topics],
                                             request_timeout=15)
    return {res.name: fut.result(timeout=15)["cleanup.policy"].value for res, fut in futs.items()}


# As the Kafka target's harness sets it: a new group's first rebalance does not wait 3 s.
@pytest.mark.broker_config(**{"group.initial.rebalance.delay.ms": 0})
def test_file_source_and_sink_resume_after_a_worker_restart(broker, connect_worker, tmp_path, topic):
    group = f"connect-{uuid.uuid4().hex[:8]}"
    source_file, sink_file = tmp_path / "source.txt", tmp_path / "sink.txt"
    first = [f"line {i:04d} {uuid.uuid4().hex}" for i in range(200)]
    second = [f"line {i:04d} {uuid.uuid4().hex}" for i in range(200, 350)]
    append_lines(source_file, first)
    # One partition, so the sink sees the lines in file order.
    create_topic(broker.bootstrap, topic, partitions=1)

    worker = connect_worker(group)
    worker.start()
    source_config = {"connector.class": SOURCE_CLASS, "tasks.max": "1", "file": str(source_file), "topic": topic}
    worker.create_connector("file-source", source_config)
    worker.create_connector("file-sink", {
        "connector.class": SINK_CLASS, "tasks.max": "1", "file": str(sink_file), "topics": topic,
    })
    worker.wait_running("file-source")
    worker.wait_running("file-sink")
    wait_until(lambda: len(sink_lines(sink_file)) >= len(first), 60, "the first lines in the sink file", interval=0.5)
    assert sink_lines(sink_file) == first

    # Connect created its internal topics compacted (it checks that itself at start-up too).
    internal = [worker.config_topic, worker.offset_topic, worker.status_topic]
    assert cleanup_policies(broker.bootstrap, internal) == {t: "compact" for t in internal}

    # Both connectors' progress is stored before the stop (offset.flush.interval.ms), so the
    # restart below resumes from it.
    size = source_file.stat().st_size
    wait_until(lambda: source_offset(broker.bootstrap, worker.offset_topic, "file-source", source_file) == size,
               30, f"the source's stored position to reach {size}", interval=0.5)
    wait_until(lambda: committed_offset(broker.bootstrap, "connect-file-sink", topic) == len(first), 30,
               "the sink's committed offset to reach the end of the topic", interval=0.5)
    worker.stop()

    append_lines(source_file, second)
    worker.start()
    worker.wait_running("file-source")
    worker.wait_running("file-sink")
    expected = first + second
    wait_until(lambda: len(sink_lines(sink_file)) >= len(expected), 60, "every line in the sink file", interval=0.5)

    # A reconfiguration writes the source's config records again (superseded ones for the
    # cleaner) and restarts its task, which resumes from its stored position once more.
    worker.write("PUT", "/connectors/file-source/config", {**source_config, "batch.size": "500"})
    third = [f"line {i:04d} {uuid.uuid4().hex}" for i in range(350, 400)]
    append_lines(source_file, third)
    expected += third
    wait_until(lambda: len(sink_lines(sink_file)) >= len(expected), 60, "the last lines in the sink file",
               interval=0.5)
    # Nothing more arrives: the source never read the file again from the start.
    time.sleep(2)
    got = sink_lines(sink_file)
    assert got == expected, (
        f"sink holds {len(got)} lines, {len(expected)} expected; "
        f"duplicated: {[line for line, n in Counter(got).items() if n > 1][:5]}")
    assert end_offset(broker.bootstrap, topic) == len(expected), "each line was produced once"

    # The internal topics hold superseded records (a key written again) for the cleaner.
    wait_until(lambda: source_offset(broker.bootstrap, worker.offset_topic, "file-source", source_file)
               == source_file.stat().st_size, 30, "the source's final position to be stored", interval=0.5)
    offsets = Counter(k for k, _ in internal_records(broker.bootstrap, worker.offset_topic))
    assert max(offsets.values()) >= 2, f"offset records per key: {offsets}"
    configs = Counter(k for k, _ in internal_records(broker.bootstrap, worker.config_topic))
    assert configs[b"connector-file-source"] >= 2, f"config records per key: {configs}"
    worker.stop()

"""Process harness for the Sluice integration tests.

Starts the broker under test (Sluice, or real Apache Kafka in KRaft mode from
the Maven jars), runs Kafka's Java CLI tools, and offers small bounded-wait
helpers. Everything here talks to real processes over real sockets on
127.0.0.1; nothing is mocked.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Callable, Iterable, Mapping, NamedTuple, Optional

REPO_ROOT = Path(__file__).resolve().parents[2]
KAFKA_DIR = REPO_ROOT / "tests" / "kafka"
KAFKA_LIBS = Path(os.environ.get("SLUICE_KAFKA_LIBS", REPO_ROOT / "tests" / ".deps" / "kafka-libs"))
TOOLS_LOG4J = KAFKA_DIR / "log4j2-quiet.xml"
BROKER_LOG4J = KAFKA_DIR / "log4j2-broker.xml"


def _default_sluice_bin() -> Path:
    target_dir = Path(os.environ.get("CARGO_TARGET_DIR") or "target")
    if not target_dir.is_absolute():
        target_dir = REPO_ROOT / target_dir
    return target_dir / "release" / "sluice"


SLUICE_BIN = Path(os.environ.get("SLUICE_BIN") or _default_sluice_bin())

TARGETS = ("sluice", "kafka")
TARGET = os.environ.get("SLUICE_TEST_TARGET", "sluice").strip().lower()
if TARGET not in TARGETS:
    raise RuntimeError(f"SLUICE_TEST_TARGET must be one of {TARGETS}, got {TARGET!r}")

START_TIMEOUT = float(os.environ.get("SLUICE_TEST_START_TIMEOUT", "60"))
STOP_TIMEOUT = float(os.environ.get("SLUICE_TEST_STOP_TIMEOUT", "45"))
TOOL_TIMEOUT = float(os.environ.get("SLUICE_TEST_TOOL_TIMEOUT", "120"))
KEEP_DATA = os.environ.get("SLUICE_TEST_KEEP", "") not in ("", "0")


class HarnessError(AssertionError):
    pass


# --------------------------------------------------------------------------
# small utilities
# --------------------------------------------------------------------------

# Ports handed out by free_port: below Linux's default ephemeral range (32768-60999), so that
# no client's outgoing connection takes one between free_port and the bind of whatever it was
# for, and split between the pytest-xdist workers (scripts/test runs two), so that two workers
# never hand out the same port. Within a slice, ports go round from a random start.
PORT_RANGE = (20000, 32000)
_port_cursor: Optional[int] = None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, from this process's slice of
    PORT_RANGE (a bench/compare run by a test inherits its worker's slice)."""
    global _port_cursor
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    span = (PORT_RANGE[1] - PORT_RANGE[0]) // max(workers, 1)
    low = PORT_RANGE[0] + (int(worker) if worker.isdigit() else 0) % max(workers, 1) * span
    if _port_cursor is None:
        _port_cursor = int.from_bytes(os.urandom(2), "little")
    for _ in range(span):
        _port_cursor += 1
        port = low + _port_cursor % span
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise HarnessError(f"no free port in {low}-{low + span - 1}")


def port_open(port: int, host: str = "127.0.0.1", timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_until(pred: Callable[[], object], timeout: float, what: str, interval: float = 0.2):
    """Poll ``pred`` until it returns a truthy value; raise after ``timeout`` s.

    Returns the truthy value. Exceptions raised by ``pred`` count as "not yet";
    the last one is reported on timeout.
    """
    deadline = time.monotonic() + timeout
    last_exc: Optional[BaseException] = None
    last_val: object = None
    while True:
        try:
            last_val = pred()
            if last_val:
                return last_val
        except Exception as e:  # noqa: BLE001 - reported below
            last_exc = e
        if time.monotonic() >= deadline:
            detail = f"; last error: {last_exc!r}" if last_exc else f"; last value: {last_val!r}"
            raise HarnessError(f"timed out after {timeout:.0f}s waiting for {what}{detail}")
        time.sleep(interval)


def tail(path: Path, lines: int = 200) -> str:
    try:
        data = Path(path).read_text(errors="replace").splitlines()
    except OSError as e:
        return f"<cannot read {path}: {e}>"
    return "\n".join(data[-lines:])


def write_properties(path: Path, props: Mapping[str, object]) -> None:
    with open(path, "w") as f:
        for k, v in props.items():
            f.write(f"{k}={v}\n")


def kafka_uuid() -> str:
    """A random Kafka Uuid string (url-safe base64 of 16 bytes, no padding)."""
    while True:
        s = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not s.startswith("-"):
            return s


# --------------------------------------------------------------------------
# Kafka CLI tools
# --------------------------------------------------------------------------

def kafka_libs_present() -> bool:
    return KAFKA_LIBS.is_dir() and any(KAFKA_LIBS.glob("kafka-tools-*.jar")) and any(
        KAFKA_LIBS.glob("kafka_2.13-*.jar")
    )


def java_cmd(main_class: str, *args: str, jvm_opts: Iterable[str] = (), log4j: Path = TOOLS_LOG4J,
             classes: Optional[Path] = None) -> list:
    if not kafka_libs_present():
        raise HarnessError(
            f"Kafka jars not found in {KAFKA_LIBS}; run scripts/test (or "
            "mvn -q -f tests/kafka/pom.xml dependency:copy-dependencies "
            "-DoutputDirectory=$PWD/tests/.deps/kafka-libs)"
        )
    java = os.environ.get("JAVA", "java")
    return [
        java,
        *jvm_opts,
        "-Djava.awt.headless=true",
        f"-Dlog4j2.configurationFile={log4j}",
        "-cp",
        # The test classes after the jars: a class-data archive made with the jars alone
        # (``tool_archive``) is still valid for a classpath that extends theirs.
        str(KAFKA_LIBS / "*") + (f"{os.pathsep}{classes}" if classes else ""),
        main_class,
        *[str(a) for a in args],
    ]


# Short-lived admin tools: C1 JIT only roughly halves JVM start-up time.
FAST_START_JVM = ("-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
# Tools that push or pull a lot of data (perf tests).
THROUGHPUT_JVM = ("-Xmx1g",)


def tool_archive(jvm_opts: Iterable[str]) -> tuple:
    """JVM options that start a short-lived Kafka tool from a class-data archive (CDS, JDK 13+:
    the Kafka jars' classes parsed and verified once), and the archive to make when there is
    none yet: (options, file the JVM writes at exit, archive). One archive per JVM, jar set and
    options, in tests/.deps/cds; made by the first tool run that exits 0 (its classes: the
    admin client's, shared by every tool), then shared by every JVM with those options. A
    tool then starts in about half the CPU time. ``SLUICE_TEST_CDS=0`` turns it off. The JVM's
    own CDS messages are off (at warning level they go to stdout, where tools' output is read).
    """
    if os.environ.get("SLUICE_TEST_CDS", "1") == "0":
        return [], None, None
    import hashlib

    java = shutil.which(os.environ.get("JAVA", "java"))
    if not java:
        return [], None, None
    h = hashlib.sha256()
    java = os.path.realpath(java)
    h.update(f"{java} {os.stat(java).st_mtime_ns} {tuple(jvm_opts)}".encode())
    for jar in sorted(KAFKA_LIBS.glob("*.jar")):
        st = jar.stat()
        h.update(f"{jar.name} {st.st_size} {st.st_mtime_ns}\n".encode())
    cds = REPO_ROOT / "tests" / ".deps" / "cds"
    archive = cds / f"tools-{h.hexdigest()[:16]}.jsa"
    if archive.exists():
        return ["-Xlog:cds*=off", f"-XX:SharedArchiveFile={archive}"], None, None
    cds.mkdir(parents=True, exist_ok=True)
    making = cds / f"{archive.stem}.{os.getpid()}.{uuid.uuid4().hex[:8]}.making"
    return ["-Xlog:cds*=off", f"-XX:ArchiveClassesAtExit={making}"], making, archive


def keep_tool_archive(making: Optional[Path], archive: Optional[Path], rc: int) -> None:
    """After a tool run that was making the archive (``tool_archive``): put it in place if the
    tool exited 0 (a concurrent maker's is replaced whole), else drop it."""
    if making is None or not making.exists():
        return
    if rc == 0:
        os.replace(making, archive)
    else:
        making.unlink(missing_ok=True)


class ToolResult(NamedTuple):
    rc: int
    out: str
    err: str

    def describe(self, cmd: str = "") -> str:
        return f"{cmd} exited {self.rc}\n--- stdout ---\n{self.out}\n--- stderr ---\n{self.err}"

    def check(self, cmd: str = "") -> "ToolResult":
        if self.rc != 0:
            raise HarnessError(self.describe(cmd))
        return self


def kafka_tool(
    main_class: str,
    *args: str,
    input: Optional[str] = None,
    timeout: float = TOOL_TIMEOUT,
    jvm_opts: Iterable[str] = FAST_START_JVM,
    cwd: Optional[Path] = None,
) -> ToolResult:
    """Run a Kafka CLI tool class from the Maven jars; return (rc, stdout, stderr).

    The process is killed if it outlives ``timeout`` seconds (HarnessError).
    The default JVM options favour start-up time (C1 only); pass
    ``jvm_opts=THROUGHPUT_JVM`` for tools that move a lot of data.
    """
    cds, making, archive = tool_archive(jvm_opts)
    cmd = java_cmd(main_class, *args, jvm_opts=[*jvm_opts, *cds])
    try:
        p = subprocess.run(
            cmd,
            input=input,
            stdin=None if input is not None else subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=cwd,
        )
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        raise HarnessError(
            f"{main_class} {' '.join(map(str, args))} did not finish in {timeout:.0f}s (killed)\n"
            f"--- stdout ---\n{out[-5000:]}\n--- stderr ---\n{err[-5000:]}"
        ) from None
    keep_tool_archive(making, archive, p.returncode)
    return ToolResult(p.returncode, p.stdout, p.stderr)


# --------------------------------------------------------------------------
# The franz-go program of the tests (tests/franz, a Go module)
# --------------------------------------------------------------------------

FRANZ_DIR = REPO_ROOT / "tests" / "franz"


def built_once(name: str, sources: list, build: Callable[[Path], None]) -> Path:
    """What ``build(out)`` makes of ``sources``, in tests/.deps/NAME-<hash of the sources>:
    made once per change of them (a lock keeps two test workers from building at once; a
    build that fails leaves nothing), older builds removed."""
    import fcntl
    import hashlib

    h = hashlib.sha256()
    for f in sorted(sources):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    deps = REPO_ROOT / "tests" / ".deps"
    deps.mkdir(parents=True, exist_ok=True)
    out = deps / f"{name}-{h.hexdigest()[:16]}"
    with open(deps / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not out.exists():
            tmp = deps / f"{name}.building-{os.getpid()}"
            try:
                build(tmp)
                tmp.rename(out)
            finally:
                if tmp.is_dir():
                    shutil.rmtree(tmp, ignore_errors=True)
                else:
                    tmp.unlink(missing_ok=True)
            for old in deps.glob(f"{name}-*"):
                if old == out:
                    continue
                if old.is_dir():
                    shutil.rmtree(old, ignore_errors=True)
                else:
                    old.unlink(missing_ok=True)
    return out


def franz_bin() -> Path:
    """The franz-go scenarios (tests/franz) built with ``go build`` (``built_once``); the Go
    module proxy supplies franz-go (go.sum pins it)."""
    def build(out: Path) -> None:
        go = shutil.which("go") or "/usr/local/go/bin/go"
        if not Path(go).exists():
            raise HarnessError("go not found: the franz-go scenarios need the Go toolchain")
        p = subprocess.run([go, "build", "-o", str(out), "."], cwd=FRANZ_DIR, capture_output=True,
                           text=True, timeout=600)
        if p.returncode != 0:
            raise HarnessError(f"go build of tests/franz failed:\n{p.stdout}\n{p.stderr}")

    sources = [f for f in FRANZ_DIR.iterdir() if f.suffix in (".go", ".mod", ".sum")]
    return built_once("franz", sources, build)


def franz_cmd(scenario: str, *args) -> list:
    """The command running franz-go scenario ``scenario`` (see tests/franz/main.go)."""
    return [str(franz_bin()), scenario, *map(str, args)]


# --------------------------------------------------------------------------
# Java programs of the tests (tests/java/*.java)
# --------------------------------------------------------------------------

JAVA_DIR = REPO_ROOT / "tests" / "java"


def java_classes() -> Path:
    """``tests/java/*.java`` compiled against the Kafka jars with ``javac`` (``built_once``):
    each program start then saves the second or so of CPU that Java's source launcher spends
    compiling it in memory."""
    sources = sorted(JAVA_DIR.glob("*.java"))

    def build(out: Path) -> None:
        java = os.environ.get("JAVA", "java")
        javac = shutil.which("javac") if java == "java" else str(Path(java).with_name("javac"))
        if not javac or not Path(javac).exists():
            raise HarnessError("javac not found: the tests' Java programs need a JDK (17+)")
        p = subprocess.run([javac, "-nowarn", "-d", str(out), "-cp", str(KAFKA_LIBS / "*"),
                            *map(str, sources)], capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise HarnessError(f"javac of tests/java failed:\n{p.stdout}\n{p.stderr}")

    return built_once("java", sources, build)


def java_program_cmd(program: str, *args: str, jvm_opts: Iterable[str] = FAST_START_JVM,
                     log4j: Path = TOOLS_LOG4J) -> list:
    """The command running ``tests/java/PROGRAM.java``, compiled once (``java_classes``).
    Same JVM conventions as ``java_cmd`` (log4j config: warnings on stderr)."""
    name = program[:-len(".java")] if program.endswith(".java") else program
    if not (JAVA_DIR / f"{name}.java").is_file():
        raise HarnessError(f"no Java program {JAVA_DIR / name}.java")
    # The tools' archive where one is made (a program may be killed: it never makes one).
    cds, making, _ = tool_archive(jvm_opts)
    cds = cds if making is None else []
    return java_cmd(name, *args, jvm_opts=[*jvm_opts, *cds], log4j=log4j, classes=java_classes())


class JavaProgram:
    """A test's Java program in the background: stdout to ``work_dir/NAME.out`` (the program's
    machine-readable lines), stderr to ``NAME.err``; its own process group, so ``kill()`` is a
    SIGKILL of the whole JVM."""

    def __init__(self, work_dir: Path, name: str, program: str, *args: str,
                 jvm_opts: Iterable[str] = FAST_START_JVM):
        self.name = name
        self.cmd = java_program_cmd(program, *args, jvm_opts=jvm_opts)
        work_dir = Path(work_dir)
        work_dir.mkdir(parents=True, exist_ok=True)
        self.out_file = work_dir / f"{name}.out"
        self.err_file = work_dir / f"{name}.err"
        with open(self.out_file, "ab") as out, open(self.err_file, "ab") as err:
            self.proc = subprocess.Popen(self.cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                         start_new_session=True)

    def lines(self) -> list:
        try:
            return self.out_file.read_text(errors="replace").splitlines()
        except OSError:
            return []

    def words(self, first: str) -> list:
        """The output lines starting with the word ``first``, split on spaces."""
        return [l.split(" ") for l in self.lines() if l.split(" ", 1)[0] == first]

    def describe(self) -> str:
        return (f"{self.name} ({' '.join(self.cmd[-8:])}) rc={self.proc.poll()}\n--- stdout (tail) ---\n"
                f"{tail(self.out_file, 30)}\n--- stderr (tail) ---\n{tail(self.err_file, 60)}")

    def wait_for(self, pred: Callable[[list], object], timeout: float, what: str):
        """Wait until ``pred(lines)`` is truthy; fail early if the program exits first."""
        def check():
            v = pred(self.lines())
            if v:
                return v
            if self.proc.poll() is not None:
                v = pred(self.lines())
                if v:
                    return v
                raise HarnessError(f"{self.name} exited before {what}:\n{self.describe()}")
            return None

        try:
            return wait_until(check, timeout, what)
        except HarnessError as e:
            if "exited before" in str(e):
                raise
            raise HarnessError(f"{e}\n{self.describe()}") from None

    def wait_line(self, first: str, timeout: float) -> list:
        """The first output line starting with the word ``first`` (split), once it is there."""
        return self.wait_for(lambda lines: next((l.split(" ") for l in lines if l.split(" ", 1)[0] == first), None),
                             timeout, f"a {first!r} line from {self.name}")

    def wait(self, timeout: float) -> int:
        """Wait for the exit; kill and fail after ``timeout`` s. Returns the exit code."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise HarnessError(f"{self.name} did not exit within {timeout:.0f}s (killed)\n{self.describe()}") from None

    def finish(self, timeout: float) -> list:
        """Wait for a clean exit (rc 0) and return the output lines."""
        rc = self.wait(timeout)
        if rc != 0:
            raise HarnessError(f"{self.name} exited with {rc}\n{self.describe()}")
        return self.lines()

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=30)

    def terminate(self, timeout: float = 30) -> int:
        """SIGTERM (the JVM runs its shutdown hooks); SIGKILL after ``timeout`` s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise HarnessError(f"{self.name} ignored SIGTERM for {timeout:.0f}s (killed)\n{self.describe()}") from None


def run_java_program(work_dir: Path, name: str, program: str, *args: str, timeout: float = TOOL_TIMEOUT,
                     jvm_opts: Iterable[str] = FAST_START_JVM) -> list:
    """Run a test's Java program to its end; return its stdout lines (HarnessError unless rc 0)."""
    prog = JavaProgram(work_dir, name, program, *args, jvm_opts=jvm_opts)
    return prog.finish(timeout)


# Tool class names (Kafka 4.x).
TOPIC_COMMAND = "org.apache.kafka.tools.TopicCommand"
CONFIG_COMMAND = "kafka.admin.ConfigCommand"
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance"
CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance"
GET_OFFSETS = "org.apache.kafka.tools.GetOffsetShell"
LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand"
DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand"
DUMP_LOG_SEGMENTS = "org.apache.kafka.tools.DumpLogSegments"
STORAGE_TOOL = "kafka.tools.StorageTool"
KAFKA_MAIN = "kafka.Kafka"
TRANSACTIONS_COMMAND = "org.apache.kafka.tools.TransactionsCommand"


# --------------------------------------------------------------------------
# brokers
# --------------------------------------------------------------------------

class Broker:
    """A broker process on 127.0.0.1 with its own log dir.

    Attributes: ``bootstrap`` ("127.0.0.1:PORT"), ``port``, ``log_dir`` (data),
    ``work_dir`` (config + captured output), ``log_file`` (stdout+stderr).
    """

    kind = "?"

    def __init__(self, work_dir: Path, log_dir: Optional[Path] = None,
                 overrides: Optional[Mapping[str, object]] = None, name: str = "broker"):
        self.name = name
        self.work_dir = Path(work_dir)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.owns_log_dir = log_dir is None
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix=f"sluice-it-{self.kind}-"))
        if not self.log_dir.exists():
            # As an operator's mkdir, durable long before the broker starts (a file system
            # that keeps directory entries until their directory is fsynced, such as faultfs
            # with metadata="dirsync", would otherwise lose it in the first crash).
            self.log_dir.mkdir(parents=True)
            fd = os.open(self.log_dir.parent, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self.overrides = dict(overrides or {})
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.config_file = self.work_dir / "server.properties"
        self.log_file = self.work_dir / f"{self.name}.log"
        self.proc: Optional[subprocess.Popen] = None
        self._log_fh = None
        self.starts = 0
        self.last_exit: Optional[int] = None

    # -- to override ------------------------------------------------------
    def properties(self) -> dict:
        raise NotImplementedError

    def command(self) -> list:
        raise NotImplementedError

    def prepare(self) -> None:
        """One-time work before the first start (e.g. formatting storage)."""

    def env(self) -> dict:
        return dict(os.environ)

    def clean_exit_codes(self) -> tuple:
        return (0,)

    # -- lifecycle --------------------------------------------------------
    def start(self, timeout: float = START_TIMEOUT) -> "Broker":
        if self.running:
            raise HarnessError(f"{self.name} already running")
        props = self.properties()
        props.update(self.overrides)
        write_properties(self.config_file, props)
        if self.starts == 0:
            self.prepare()
        self._log_fh = open(self.log_file, "ab")
        self._log_fh.seek(0, os.SEEK_END)
        self._start_offset = self._log_fh.tell()
        self._log_fh.write(f"===== harness: start #{self.starts + 1}: {' '.join(self.command())}\n".encode())
        self._log_fh.flush()
        self.proc = subprocess.Popen(
            self.command(),
            stdin=subprocess.DEVNULL,
            stdout=self._log_fh,
            stderr=subprocess.STDOUT,
            cwd=self.work_dir,
            env=self.env(),
            start_new_session=True,
        )
        self.starts += 1
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.kill()
            raise
        return self

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            rc = self.proc.poll()
            if rc is not None:
                raise HarnessError(
                    f"{self.name} ({self.kind}) exited with code {rc} before accepting connections "
                    f"on {self.bootstrap}; log {self.log_file}:\n{tail(self.log_file, 60)}"
                )
            if port_open(self.port):
                return
            if time.monotonic() >= deadline:
                raise HarnessError(
                    f"{self.name} ({self.kind}) did not accept connections on {self.bootstrap} "
                    f"within {timeout:.0f}s; log {self.log_file}:\n{tail(self.log_file, 60)}"
                )
            time.sleep(0.1)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> Optional[int]:
        return self.proc.pid if self.proc else None

    def _reap(self, rc: Optional[int]) -> None:
        self.last_exit = rc
        self.proc = None
        if self._log_fh:
            self._log_fh.write(f"===== harness: process exited with {rc}\n".encode())
            self._log_fh.close()
            self._log_fh = None

    def stop(self, timeout: float = STOP_TIMEOUT) -> int:
        """Graceful stop (SIGTERM). Waits up to ``timeout`` s and returns the exit code.

        If the broker does not exit in time it is SIGKILLed and HarnessError is raised.
        A non-clean exit code raises HarnessError too (after the process is gone).
        """
        if self.proc is None:
            return self.last_exit if self.last_exit is not None else 0
        proc = self.proc
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._kill_group(proc)
            rc = proc.wait(timeout=30)
            self._reap(rc)
            raise HarnessError(f"{self.name} ({self.kind}) ignored SIGTERM for {timeout:.0f}s; SIGKILLed")
        self._reap(rc)
        if rc not in self.clean_exit_codes():
            raise HarnessError(
                f"{self.name} ({self.kind}) exited with code {rc} on SIGTERM; log {self.log_file}:\n"
                f"{tail(self.log_file, 60)}"
            )
        return rc

    def kill(self) -> None:
        """SIGKILL the broker (no clean shutdown)."""
        if self.proc is None:
            return
        proc = self.proc
        self._kill_group(proc)
        try:
            rc = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:  # pragma: no cover - kernel trouble
            rc = None
        self._reap(rc)

    @staticmethod
    def _kill_group(proc: subprocess.Popen) -> None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                proc.kill()
            except ProcessLookupError:
                pass

    def restart(self, timeout: float = START_TIMEOUT) -> "Broker":
        """Graceful stop (if running) then start again on the same port and log dir."""
        if self.running:
            self.stop()
        return self.start(timeout)

    def cleanup(self) -> None:
        """Kill the process (if any) and remove the data dir we created."""
        self.kill()
        if self.owns_log_dir and not KEEP_DATA:
            shutil.rmtree(self.log_dir, ignore_errors=True)

    def log_text(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")
        except OSError:
            return ""

    def log_text_since_start(self) -> str:
        """Captured output of the current (or last) run only."""
        try:
            with open(self.log_file, "rb") as f:
                f.seek(getattr(self, "_start_offset", 0))
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} {self.bootstrap} log_dir={self.log_dir}>"


class SluiceBroker(Broker):
    kind = "sluice"

    def properties(self) -> dict:
        return {
            "node.id": 1,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "log.dirs": str(self.log_dir),
        }

    def command(self) -> list:
        return [str(SLUICE_BIN), "serve", "--config", str(self.config_file)]

    def env(self) -> dict:
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "info")
        env.setdefault("RUST_BACKTRACE", "1")
        env.setdefault("NO_COLOR", "1")  # plain text in the captured log
        return env

    def prepare(self) -> None:
        if not SLUICE_BIN.is_file():
            raise HarnessError(f"Sluice binary {SLUICE_BIN} not found; run cargo build --release -p sluice")

    def wait_ready(self, timeout: float) -> None:
        # The listeners are bound before the broker opens its logs and joins its cluster (the
        # kernel queues connections meanwhile), so an open port does not mean it started: a
        # start that fails while opening would look ready. The broker logs each listener
        # once it is open; wait for this start's line too.
        deadline = time.monotonic() + timeout
        super().wait_ready(timeout)

        while "worker thread(s)" not in self.log_text_since_start():
            rc = self.proc.poll()
            if rc is not None:
                raise HarnessError(
                    f"{self.name} ({self.kind}) exited with code {rc} while opening; "
                    f"log {self.log_file}:\n{tail(self.log_file, 60)}"
                )
            if time.monotonic() >= deadline:
                raise HarnessError(
                    f"{self.name} ({self.kind}) did not log its listeners within {timeout:.0f}s; "
                    f"log {self.log_file}:\n{tail(self.log_file, 60)}"
                )
            time.sleep(0.05)


class KafkaBroker(Broker):
    """Real Apache Kafka, single node, KRaft combined broker+controller."""

    kind = "kafka"
    heap = os.environ.get("SLUICE_TEST_KAFKA_HEAP", "512m")

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        # More JVM options (system properties a test's configuration needs).
        self.jvm_options: list = []
        self.controller_port = free_port()
        while self.controller_port == self.port:
            self.controller_port = free_port()
        self.cluster_id = kafka_uuid()

    def properties(self) -> dict:
        return {
            "process.roles": "broker,controller",
            "node.id": 1,
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "controller.quorum.bootstrap.servers": f"127.0.0.1:{self.controller_port}",
            "log.dirs": str(self.log_dir),
            "num.partitions": 1,
            "offsets.topic.replication.factor": 1,
            "offsets.topic.num.partitions": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            "group.initial.rebalance.delay.ms": 0,
        }

    def command(self) -> list:
        return java_cmd(
            KAFKA_MAIN,
            str(self.config_file),
            jvm_opts=(f"-Xmx{self.heap}", f"-Xms{self.heap}", "-XX:+UseG1GC", *self.jvm_options),
            log4j=BROKER_LOG4J,
        )

    def clean_exit_codes(self) -> tuple:
        # The JVM exits with 128+SIGTERM after running Kafka's shutdown hook.
        return (0, 143)

    def prepare(self) -> None:
        if (self.log_dir / "meta.properties").exists():
            return  # already formatted (e.g. adopting an existing dir)
        res = kafka_tool(
            STORAGE_TOOL, "format", "--standalone", "-t", self.cluster_id, "-c", str(self.config_file),
            timeout=TOOL_TIMEOUT,
        )
        with open(self.log_file, "ab") as f:
            f.write(f"===== harness: storage format rc={res.rc}\n{res.out}{res.err}\n".encode())
        res.check("kafka-storage format")

    def wait_ready(self, timeout: float) -> None:
        super().wait_ready(timeout)
        # The PLAINTEXT acceptor opens near the end of startup; also wait for
        # this start's "Kafka Server started" line before tests hit it.
        def started():
            if self.proc.poll() is not None:
                raise HarnessError(f"{self.name} exited with {self.proc.poll()}")
            return "Kafka Server started" in self.log_text_since_start()

        wait_until(started, timeout, f"{self.name} to log 'Kafka Server started'")


BROKER_CLASSES = {"sluice": SluiceBroker, "kafka": KafkaBroker}


# --------------------------------------------------------------------------
# client helpers (confluent-kafka / librdkafka)
# --------------------------------------------------------------------------

def admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap, "broker.address.family": "v4"})


def create_topic(bootstrap: str, name: str, partitions: int = 1, config: Optional[Mapping[str, str]] = None,
                 timeout: float = 30, replication_factor: int = 1) -> None:
    """Create a topic with the CreateTopics API and wait until its metadata shows all partitions."""
    from confluent_kafka.admin import NewTopic

    a = admin(bootstrap)
    fut = a.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                  config=dict(config or {}))],
        request_timeout=timeout, operation_timeout=timeout,
    )
    fut[name].result(timeout=timeout)
    wait_for_partitions(bootstrap, name, partitions, timeout)


def topic_partitions(bootstrap: str, name: str, timeout: float = 10) -> Optional[dict]:
    md = admin(bootstrap).list_topics(topic=name, timeout=timeout)
    t = md.topics.get(name)
    if t is None or t.error is not None:
        return None
    return t.partitions


def wait_for_partitions(bootstrap: str, name: str, partitions: int, timeout: float = 30) -> None:
    def ok():
        p = topic_partitions(bootstrap, name)
        return p is not None and len(p) == partitions and all(x.leader >= 0 for x in p.values())

    wait_until(ok, timeout, f"metadata of topic {name} with {partitions} partitions and leaders")


def producer(bootstrap: str, **conf):
    from confluent_kafka import Producer

    base = {"bootstrap.servers": bootstrap, "broker.address.family": "v4"}
    base.update(conf)
    return Producer(base)


def produce_all(p, topic: str, records: list, flush_timeout: float = 60) -> list:
    """Produce ``records`` (dicts of Producer.produce kwargs) and wait for every delivery report.

    Returns the delivered confluent_kafka.Message objects in send order.
    Raises on any delivery error.
    """
    delivered: list = [None] * len(records)
    errors: list = []

    def cb_for(i):
        def cb(err, msg):
            if err is not None:
                errors.append((i, err))
            else:
                delivered[i] = msg
        return cb

    for i, r in enumerate(records):
        while True:
            try:
                p.produce(topic, on_delivery=cb_for(i), **r)
                break
            except BufferError:
                p.poll(0.1)
        p.poll(0)
    remaining = p.flush(flush_timeout)
    if remaining:
        raise HarnessError(f"{remaining} messages still undelivered after {flush_timeout}s")
    if errors:
        raise HarnessError(f"{len(errors)} delivery errors, first: {errors[:3]}")
    return delivered


def consumer(bootstrap: str, **conf):
    from confluent_kafka import Consumer

    return Consumer(consumer_conf(bootstrap, **conf))


def consumer_conf(bootstrap: str, **conf) -> dict:
    """The configuration ``consumer()`` gives confluent_kafka's Consumer."""
    base = {
        "bootstrap.servers": bootstrap,
        "broker.address.family": "v4",
        # librdkafka requires a group.id for the Consumer object, but with
        # assign() and no commits it never talks to a group coordinator.
        "group.id": "sluice-it-unused",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "enable.partition.eof": True,
    }
    base.update(conf)
    return base


class Deliveries:
    """A producer's delivery callback that keeps what was acknowledged (value -> (partition,
    offset)) and the delivery errors."""

    def __init__(self):
        self.acked: dict = {}
        self.errors: list = []

    def __call__(self, err, msg):
        if err is None:
            self.acked[msg.value().decode()] = (msg.partition(), msg.offset())
        else:
            self.errors.append(str(err))


def read_back(bootstrap: str, topic: str, partitions: Iterable[int], expected: int, timeout: float = 60) -> dict:
    """Every record of ``partitions`` from the beginning: value -> (partition, offset), each value
    read once (a value read twice fails)."""
    got: dict = {}
    for m in consume_partitions(bootstrap, topic, partitions, expected=expected, timeout=timeout):
        value = m.value().decode()
        assert value not in got, f"{value} read twice: at {got[value]} and {(m.partition(), m.offset())}"
        got[value] = (m.partition(), m.offset())
    return got


def consume_partitions(bootstrap: str, topic: str, partitions: Iterable[int], expected: Optional[int] = None,
                       timeout: float = 60, start_offset: Optional[int] = None, keep: bool = True,
                       **conf) -> list:
    """Read every partition from ``start_offset`` (default: beginning) to its end with assign().

    Stops when every partition reported EOF (and at least ``expected`` messages arrived, if given),
    or raises after ``timeout`` s. Returns messages (or just the count if keep=False).
    """
    from confluent_kafka import KafkaError, OFFSET_BEGINNING, TopicPartition

    c = consumer(bootstrap, **conf)
    parts = list(partitions)
    try:
        off = OFFSET_BEGINNING if start_offset is None else start_offset
        c.assign([TopicPartition(topic, p, off) for p in parts])
        msgs: list = []
        count = 0
        eof: set = set()
        deadline = time.monotonic() + timeout
        while True:
            if len(eof) == len(parts) and (expected is None or count >= expected):
                break
            if time.monotonic() > deadline:
                raise HarnessError(
                    f"consuming {topic} {parts}: got {count} messages"
                    f"{'' if expected is None else f' of {expected}'} and EOF on {sorted(eof)} within {timeout}s"
                )
            batch = c.consume(num_messages=10000, timeout=0.5)
            for m in batch:
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        eof.add(m.partition())
                        continue
                    raise HarnessError(f"consume error on {topic}: {err}")
                eof.discard(m.partition())
                count += 1
                if keep:
                    msgs.append(m)
        return msgs if keep else count
    finally:
        c.close()


def all_partitions(bootstrap: str, topic: str) -> list:
    p = topic_partitions(bootstrap, topic)
    if p is None:
        raise HarnessError(f"topic {topic} not in metadata")
    return sorted(p)


def parse_offsets(text: str) -> dict:
    """Parse GetOffsetShell output lines ``topic:partition:offset`` -> {(topic, partition): offset}."""
    res = {}
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        topic, part, off = line.rsplit(":", 2)
        res[(topic, int(part))] = int(off) if off != "" else None
    return res


def crash_fs(tmp_path, metadata: str = "sync", **kw):
    """A faultfs mount (tests/faultfs: unsynced data is volatile, ``crash()`` drops it) over
    ``tmp_path/backing`` at ``tmp_path/mnt``; fails (never skips) without /dev/fuse, which
    scripts/test installs. The caller stops it (``mount.stop()``)."""
    import sys
    from pathlib import Path

    import pytest
    if not os.path.exists("/dev/fuse"):
        pytest.fail("FUSE unavailable: no /dev/fuse (scripts/test installs fuse3)")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for faultfs
    from faultfs import mount_faultfs
    return mount_faultfs(tmp_path / "backing", tmp_path / "mnt", log_path=tmp_path / "faultfs.log",
                         metadata=metadata, **kw)

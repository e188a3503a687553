"""A librdkafka group consumer in a process of its own, called from the harness.

confluent_kafka runs a group rebalance callback (during ``consume()`` and ``close()``) holding
Python's lock, and its fallback there calls ``rd_kafka_rebalance_protocol()`` and
``rd_kafka_assign()``, which wait without a bound on librdkafka's main thread; both have been
seen to never return (librdkafka issues 4041 and 4884). In the harness's process that stops
every thread of the harness. ``ChildConsumer`` keeps such a consumer in a child process
(``python child_consumer.py CONTROL_FD PPID``) and forwards the calls the fault run makes,
each waited for with a bound: a call that does not return in time is reported (the
``on_hang`` callback; the child's Python stacks go to its stderr, and with gdb installed every
thread's C and Python stacks to the ``stacks`` file), the child is killed (as an application
that crashed: its group membership expires) and the call raises :class:`ClientGone`. The child exits when its control socket reaches EOF
and is SIGKILLed when the harness dies (child_process.py).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Callable, Optional

from child_process import spawn_tied, tie_to_parent

HERE = Path(__file__).resolve().parent

# a call hangs when it has not returned this long after its own librdkafka timeout (a call
# without one: after this long)
CALL_MARGIN_S = 30.0

# the ChildConsumers whose process may still run
_live: set = set()


def kill_all() -> None:
    """Kill every child consumer still running (the end of a fault run, however it ended)."""
    for c in list(_live):
        c.kill()


class ClientGone(Exception):
    """The consumer's process hung in a call (and was killed) or died."""


class Message:
    """What the fault run reads of a confluent_kafka Message."""

    __slots__ = ("_topic", "_partition", "_offset", "_value", "_error")

    def __init__(self, topic, partition, offset, value, error):
        self._topic, self._partition, self._offset, self._value = topic, partition, offset, value
        self._error = error

    def topic(self):
        return self._topic

    def partition(self):
        return self._partition

    def offset(self):
        return self._offset

    def value(self):
        return self._value

    def error(self):
        if self._error is None:
            return None
        from confluent_kafka import KafkaError
        return KafkaError(*self._error)


class Partition:
    """A TopicPartition answer (``committed()``): topic, partition, offset, error."""

    __slots__ = ("topic", "partition", "offset", "leader_epoch", "error")

    def __init__(self, topic, partition, offset, leader_epoch, error):
        from confluent_kafka import KafkaError
        self.topic, self.partition, self.offset, self.leader_epoch = topic, partition, offset, leader_epoch
        self.error = None if error is None else KafkaError(*error)

    def topic_partition(self):
        from confluent_kafka import TopicPartition
        if self.leader_epoch is None:
            return TopicPartition(self.topic, self.partition, self.offset)
        return TopicPartition(self.topic, self.partition, self.offset, leader_epoch=self.leader_epoch)


def _calling_thread_frames(bt: str) -> list:
    """From gdb's ``thread apply all bt``: the innermost C functions of the thread running the
    call (the one in confluent_kafka's ``Consumer_`` code, else thread 1), down to it."""
    import re
    threads = re.split(r"\n(?=Thread \d+ )", bt)
    chosen = next((t for t in threads if "Consumer_" in t), None)
    if chosen is None:
        chosen = next((t for t in threads if t.startswith("Thread 1 ")), "")
    frames = []
    for line in chosen.splitlines():
        m = re.match(r"#\d+\s+(?:0x[0-9a-f]+ in )?([\w.\[\]]+) \(", line)
        if m:
            frames.append(m.group(1))
            if m.group(1).startswith("Consumer_"):
                break
    return frames[:16]


def _tp_out(tp) -> tuple:
    err = getattr(tp, "error", None)
    return (tp.topic, tp.partition, tp.offset, getattr(tp, "leader_epoch", None),
            None if err is None else _err_out(err))


def _err_out(err) -> tuple:
    return (err.code(), err.str(), err.fatal(), err.retriable(), err.txn_requires_abort())


def _tp_in(t):
    from confluent_kafka import TopicPartition
    topic, partition, offset, leader_epoch = t[:4]
    if leader_epoch is None:
        return TopicPartition(topic, partition, offset)
    return TopicPartition(topic, partition, offset, leader_epoch=leader_epoch)


class ChildConsumer:
    """``confluent_kafka.Consumer(conf)`` in a child process: subscribe, consume, commit
    (synchronous), committed, assignment, position, seek, consumer_group_metadata, close.
    TopicPartition arguments are confluent_kafka's; answers are :class:`Partition` (with
    ``topic_partition()``) and :class:`Message`. One call at a time."""

    def __init__(self, conf: dict, name: str, stacks: Path,
                 on_hang: Optional[Callable[[dict], None]] = None, margin: float = CALL_MARGIN_S):
        self.name, self.stacks, self.on_hang, self.margin = name, Path(stacks), on_hang, margin
        self.lock = threading.Lock()
        self.gone: Optional[str] = None
        self.closed = False
        ours, theirs = socket.socketpair()
        try:
            self.proc = spawn_tied([sys.executable, str(HERE / "child_consumer.py"), str(theirs.fileno()),
                                    str(os.getpid())],
                                   pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
        finally:
            theirs.close()
        self.conn = Connection(ours.detach())
        _live.add(self)
        try:
            self._call("init", conf, wait=self.margin)
        except BaseException:
            self.kill()
            raise

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _call(self, method: str, *args, wait: float):
        """``method(*args)`` in the child; an answer not there within ``wait`` seconds is a
        hang (reported, the child killed, ClientGone)."""
        from confluent_kafka import KafkaError, KafkaException
        with self.lock:
            if self.gone is not None:
                raise ClientGone(f"{self.name}: {self.gone}")
            try:
                self.conn.send((method, args))
                ready = self.conn.poll(wait)
                reply = self.conn.recv() if ready else None
            except (OSError, EOFError) as e:
                self.gone = f"died ({type(e).__name__}; exit {self.proc.poll()}) in {method}()"
                self.kill()
                raise ClientGone(f"{self.name}: {self.gone}") from None
            if reply is None:
                self.gone = f"{method}() did not return in {wait:.0f} s"
                detail = self._hung(method, wait)
                if self.on_hang is not None:
                    self.on_hang(detail)
                raise ClientGone(f"{self.name}: {self.gone}")
        kind, value = reply
        if kind == "ok":
            return value
        if kind == "kafka":
            raise KafkaException(KafkaError(*value))
        if kind == "buffer":
            raise BufferError(value)
        raise RuntimeError(f"{self.name}: {method}() raised {value}")

    def _hung(self, method: str, waited: float) -> dict:
        """The child's stacks (Python's to its stderr, by faulthandler on SIGUSR1; every
        thread's C and Python stacks to ``self.stacks`` by gdb, when installed); then the child
        is killed."""
        pid = self.proc.pid
        try:
            os.kill(pid, signal.SIGUSR1)
            time.sleep(1)
        except OSError:
            pass
        frames = []
        gdb = shutil.which("gdb")
        if gdb:
            try:
                r = subprocess.run([gdb, "-p", str(pid), "-batch", "-iex", "add-auto-load-safe-path /",
                                    "-ex", "thread apply all bt", "-ex", "thread apply all py-bt"],
                                   capture_output=True, text=True, timeout=120)
                with open(self.stacks, "a") as f:
                    f.write(f"\n==== gdb -p {pid} ({self.name}, {method}() hung) ====\n{r.stdout}\n{r.stderr}\n")
                frames = _calling_thread_frames(r.stdout)
            except (OSError, subprocess.SubprocessError):
                pass
        self.kill()
        return {"client": self.name, "call": method, "waited_s": round(waited), "pid": pid,
                "stacks": str(self.stacks), "c_frames": frames}

    def kill(self) -> None:
        _live.discard(self)
        try:
            self.proc.kill()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.SubprocessError):
            pass
        try:
            self.conn.close()
        except OSError:
            pass

    # the Consumer calls the fault run makes

    def subscribe(self, topics) -> None:
        self._call("subscribe", list(topics), wait=self.margin)

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list:
        return [Message(*m) for m in self._call("consume", num_messages, timeout,
                                                 wait=max(timeout, 0) + self.margin)]

    def commit(self, asynchronous: bool = False) -> None:
        assert not asynchronous, "only synchronous commits are forwarded"
        self._call("commit", wait=4 * self.margin)  # no timeout of its own

    def committed(self, partitions, timeout: float = 10) -> list:
        return [Partition(*t) for t in self._call("committed", [_tp_out(tp) for tp in partitions], timeout,
                                                   wait=timeout + self.margin)]

    def assignment(self) -> list:
        return [Partition(*t).topic_partition() for t in self._call("assignment", wait=self.margin)]

    def position(self, partitions) -> list:
        return [Partition(*t).topic_partition()
                for t in self._call("position", [_tp_out(tp) for tp in partitions], wait=self.margin)]

    def seek(self, tp) -> None:
        self._call("seek", _tp_out(tp), wait=self.margin)

    def consumer_group_metadata(self):
        return self._call("consumer_group_metadata", wait=self.margin)

    def close(self, wait: float = 2 * CALL_MARGIN_S) -> None:
        """Leave the group and end the process; a close that does not return within ``wait``
        seconds is reported and the process killed (ClientGone)."""
        if self.closed:
            return
        self.closed = True
        try:
            self._call("close", wait=wait)
        finally:
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            self.kill()


# --------------------------------------------------------------------------
# the child process
# --------------------------------------------------------------------------

def _serve(conn: Connection) -> None:
    from confluent_kafka import Consumer, KafkaException

    c = None
    while True:
        try:
            method, args = conn.recv()
        except (EOFError, OSError):
            os._exit(0)  # the harness is gone: no close (that could block)
        try:
            if method == "init":
                c = Consumer(args[0])
                value = None
            elif method == "subscribe":
                c.subscribe(args[0])
                value = None
            elif method == "consume":
                value = []
                for m in c.consume(num_messages=args[0], timeout=args[1]):
                    err = m.error()
                    value.append((m.topic(), m.partition(), m.offset(), m.value(),
                                  None if err is None else (err.code(), err.str())))
            elif method == "commit":
                c.commit(asynchronous=False)
                value = None
            elif method == "committed":
                value = [_tp_out(tp) for tp in c.committed([_tp_in(t) for t in args[0]], timeout=args[1])]
            elif method == "assignment":
                value = [_tp_out(tp) for tp in c.assignment()]
            elif method == "position":
                value = [_tp_out(tp) for tp in c.position([_tp_in(t) for t in args[0]])]
            elif method == "seek":
                c.seek(_tp_in(args[0]))
                value = None
            elif method == "consumer_group_metadata":
                value = c.consumer_group_metadata()
            elif method == "close":
                c.close()
                conn.send(("ok", None))
                os._exit(0)
            else:
                raise ValueError(f"unknown call {method}")
            reply = ("ok", value)
        except KafkaException as e:
            reply = ("kafka", _err_out(e.args[0]))
        except BufferError as e:
            reply = ("buffer", str(e))
        except Exception as e:  # noqa: BLE001 - handed to the caller
            reply = ("error", repr(e))
        conn.send(reply)


def main(argv) -> int:
    import faulthandler
    fd, ppid = int(argv[1]), int(argv[2])
    tie_to_parent(ppid)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    _serve(Connection(fd))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

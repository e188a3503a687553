"""A TCP proxy in a process of its own that can black-hole a broker's etcd connection.

``TcpProxy(upstream_port)`` (used by faults.py and test_cluster_fencing.py) starts
``python tcp_proxy.py UPSTREAM_PORT CONTROL_FD PPID`` and controls it over a socket pair, one
command a line, each answered ``ok`` once it took effect. The proxy is a process, not threads
of the harness, so that nothing the harness's own process does (a client library call that
blocks holding Python's lock) can stall the brokers' etcd connections. It exits when its
control socket reaches EOF, and is SIGKILLed when the harness dies (child_process.py).
"""

from __future__ import annotations

import errno
import os
import select
import socket
import subprocess
import sys
import threading
from pathlib import Path

from child_process import spawn_tied, tie_to_parent

HERE = Path(__file__).resolve().parent

# bytes held per direction before the proxy stops reading that side
BUFFER_LIMIT = 1 << 20


class TcpProxy:
    """127.0.0.1:port -> upstream. ``blackhole(True)``: bytes stop flowing both ways (nothing is
    read, nothing is closed, new connections are accepted and left waiting), as if the network
    dropped every packet; ``blackhole(False)``: everything flows again. Both return once the
    proxy process has done it."""

    def __init__(self, upstream_port: int, timeout: float = 30):
        ours, theirs = socket.socketpair()
        try:
            self.proc = spawn_tied([sys.executable, str(HERE / "tcp_proxy.py"), str(upstream_port),
                                    str(theirs.fileno()), str(os.getpid())],
                                   pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
        finally:
            theirs.close()
        self.upstream = ("127.0.0.1", upstream_port)
        self.ctl = ours
        self.ctl.settimeout(timeout)
        self.replies = ours.makefile("rb")
        self.lock = threading.Lock()
        self.closed = False
        try:
            first = self._line()
        except BaseException:
            self.close()
            raise
        if not first.startswith("port "):
            self.close()
            raise RuntimeError(f"tcp_proxy: unexpected first line {first!r}")
        self.port = int(first.split()[1])
        self.endpoint = f"127.0.0.1:{self.port}"

    def _line(self) -> str:
        line = self.replies.readline()
        if not line:
            raise RuntimeError(f"tcp_proxy (pid {self.proc.pid}) exited: {self.proc.poll()}")
        return line.decode().strip()

    def _request(self, command: str) -> None:
        with self.lock:
            if self.closed:
                raise RuntimeError("tcp_proxy: closed")
            self.ctl.sendall(command.encode() + b"\n")
            reply = self._line()
        if reply != "ok":
            raise RuntimeError(f"tcp_proxy: {command!r} answered {reply!r}")

    def blackhole(self, on: bool) -> None:
        self._request(f"blackhole {1 if on else 0}")

    def close(self) -> None:
        """Every connection closed and the process gone (idempotent)."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            try:
                self.ctl.settimeout(5)
                self.ctl.sendall(b"close\n")
                self.replies.readline()
            except OSError:
                pass
            for f in (self.replies, self.ctl):
                try:
                    f.close()
                except OSError:
                    pass
        try:
            self.proc.wait(timeout=5)
        except Exception:  # noqa: BLE001 - TimeoutExpired: it goes anyway
            self.proc.kill()
            self.proc.wait()


# --------------------------------------------------------------------------
# the proxy process
# --------------------------------------------------------------------------

class _Pair:
    """A client connection and, once the proxy flows, its upstream connection."""

    def __init__(self, client: socket.socket):
        self.c = client
        self.u = None
        self.connecting = False
        self.to_u = bytearray()
        self.to_c = bytearray()
        self.eof_c = self.eof_u = False

    def close(self) -> None:
        for s in (self.c, self.u):
            if s is not None:
                try:
                    s.close()
                except OSError:
                    pass


def serve(upstream_port: int, ctl: socket.socket) -> None:
    upstream = ("127.0.0.1", upstream_port)
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("127.0.0.1", 0))
    lst.listen(64)
    lst.setblocking(False)
    ctl.sendall(f"port {lst.getsockname()[1]}\n".encode())
    flowing = True
    pairs: list = []
    pending = b""

    def drop(p: _Pair) -> None:
        p.close()
        pairs.remove(p)

    while True:
        # While black-holed only the control socket and the listener are watched: nothing is
        # read from or written to a proxied connection, and none is closed.
        readers = [ctl, lst]
        writers = []
        if flowing:
            for p in list(pairs):
                if p.u is None:
                    p.u = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    p.u.setblocking(False)
                    rc = p.u.connect_ex(upstream)
                    if rc not in (0, errno.EINPROGRESS):
                        drop(p)  # upstream down: the client sees its connection closed
                        continue
                    p.connecting = rc != 0
                if p.connecting:
                    writers.append(p.u)
                    continue
                if not p.eof_c and len(p.to_u) < BUFFER_LIMIT:
                    readers.append(p.c)
                if not p.eof_u and len(p.to_c) < BUFFER_LIMIT:
                    readers.append(p.u)
                if p.to_u:
                    writers.append(p.u)
                if p.to_c:
                    writers.append(p.c)
        readable, writable, _ = select.select(readers, writers, [], 1.0)
        if ctl in readable:
            data = ctl.recv(4096)
            if not data:
                return  # the harness is gone, or closed us
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                cmd = line.decode().split()
                if cmd == ["blackhole", "1"]:
                    flowing = False
                elif cmd == ["blackhole", "0"]:
                    flowing = True
                elif cmd == ["close"]:
                    for p in list(pairs):
                        drop(p)
                    ctl.sendall(b"ok\n")
                    return
                else:
                    ctl.sendall(f"unknown command {line!r}\n".encode())
                    continue
                ctl.sendall(b"ok\n")
        if lst in readable:
            while True:
                try:
                    c, _ = lst.accept()
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:
                    break
                c.setblocking(False)
                pairs.append(_Pair(c))  # connected upstream once flowing
        if not flowing:
            continue  # what select found ready is left unread until the proxy flows again
        for p in list(pairs):
            try:
                if p.connecting:
                    if p.u in writable:
                        err = p.u.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                        if err:
                            drop(p)
                            continue
                        p.connecting = False
                    continue
                if p.c in readable:
                    data = p.c.recv(65536)
                    if data:
                        p.to_u += data
                    else:
                        p.eof_c = True
                if p.u in readable:
                    data = p.u.recv(65536)
                    if data:
                        p.to_c += data
                    else:
                        p.eof_u = True
                if p.to_u and p.u in writable:
                    del p.to_u[:p.u.send(p.to_u)]
                if p.to_c and p.c in writable:
                    del p.to_c[:p.c.send(p.to_c)]
                # one side closed: the other gets what was in flight, then both are closed
                if (p.eof_c and not p.to_u) or (p.eof_u and not p.to_c):
                    drop(p)
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                drop(p)


def main(argv) -> int:
    upstream_port, ctl_fd, ppid = int(argv[1]), int(argv[2]), int(argv[3])
    tie_to_parent(ppid)
    serve(upstream_port, socket.socket(fileno=ctl_fd))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

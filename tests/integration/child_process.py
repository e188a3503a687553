"""Helper processes of the test harness that cannot outlive it.

``spawn_tied(argv)`` starts a process (a Python program of this directory: ``tcp_proxy.py``,
``child_consumer.py``) whose first act is ``tie_to_parent()``: Linux then SIGKILLs it when the
harness dies, however it dies (SIGKILL included), and whatever the helper is doing (a helper
stuck in C code holding its own interpreter's lock cannot notice that its control pipe reached
EOF). The signal is tied to the thread that forked the helper, not to the process, so every
helper is forked by one thread here that lives as long as the process.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import threading

_requests: "queue.Queue" = queue.Queue()
_lock = threading.Lock()
_spawner = None

PR_SET_PDEATHSIG = 1


def _spawn_loop() -> None:
    while True:
        argv, kwargs, box, done = _requests.get()
        try:
            box.append(subprocess.Popen(argv, **kwargs))
        except BaseException as e:  # noqa: BLE001 - handed to the caller
            box.append(e)
        done.set()


def spawn_tied(argv, **popen_kwargs) -> subprocess.Popen:
    """``subprocess.Popen(argv, **popen_kwargs)`` from the spawning thread; ``argv`` must run a
    program that calls ``tie_to_parent(int(PPID))`` first, where PPID is ``str(os.getpid())``
    (passed by the caller)."""
    global _spawner
    with _lock:
        if _spawner is None or not _spawner.is_alive():
            _spawner = threading.Thread(target=_spawn_loop, daemon=True, name="child-spawner")
            _spawner.start()
    box: list = []
    done = threading.Event()
    _requests.put((argv, popen_kwargs, box, done))
    done.wait()
    if isinstance(box[0], BaseException):
        raise box[0]
    return box[0]


def tie_to_parent(ppid: int) -> None:
    """In the helper: be SIGKILLed when the harness (pid ``ppid``) dies; exit now if it already
    has. Ctrl-C in a terminal goes to the harness alone (it stops its helpers)."""
    import ctypes
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if os.getppid() != ppid:
        os._exit(1)

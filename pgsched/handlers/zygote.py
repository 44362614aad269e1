"""The worker's side of its zygote: one fresh Python process per worker (the
``forkserver`` pattern) that has imported pgsched's handler code and the ``--import``
modules once and forks every Python handler's child (:func:`pgsched.handlers.python_child.main`).
No SQL here.

Why: a child started as a new interpreter costs about 0.18 s of CPU and 37 MB before its
first call (pgsched and psycopg imported again), and a worker of 16 slots starts 16 of
them; a fork of the zygote costs about a millisecond and shares the imported code. The
zygote is single-threaded and holds no connection and no login, so forking it is safe,
where forking the worker (threads, open psycopg connections, the login in memory) is not.

It dies with the worker (PR_SET_PDEATHSIG, tied to the one thread that starts it, and
the end of its socket) and its children die with it (their own PR_SET_PDEATHSIG). The
worker cannot wait for a grandchild: the zygote reaps each child and reports its exit
status, which :meth:`Zygote.exit_status` waits for.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .python_child import encode

_PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
_BOOT = (
    "import sys; sys.path.insert(0, {parent!r}); "
    "from pgsched.handlers.python_child import main; main({fd})"
)
# Seconds a new zygote may take to import its modules (--import ones included).
READY_TIMEOUT = 60.0


class ZygoteGone(Exception):
    """The zygote ended (or could not start): no child can be forked by it."""


class Zygote:
    """One zygote process, started by :meth:`start` with environment ``env``; ``init``:
    what it is told first (path, parent, allowed and preloaded modules, memory limit)."""

    def __init__(self, env: Mapping[str, str], init: dict[str, Any]):
        self.env, self.init = dict(env), init
        self.proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._forks: queue.Queue[int | None] = queue.Queue()
        self._forking = threading.Lock()
        self._exits: dict[int, int] = {}
        self._changed = threading.Condition()
        self.gone = False

    def start(self) -> None:
        """Start the zygote and wait until it is ready. Raises ZygoteGone."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-u",
                    "-c",
                    _BOOT.format(parent=_PACKAGE_PARENT, fd=theirs.fileno()),
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                pass_fds=(theirs.fileno(),),
                env=self.env,
                start_new_session=True,
            )
        finally:
            theirs.close()
        self._sock = mine
        mine.send(encode({"init": self.init}))
        mine.settimeout(READY_TIMEOUT)
        try:
            ready = mine.recv(1 << 16)
        except OSError:
            ready = b""
        mine.settimeout(None)
        if not ready:
            self.gone = True
            code = self.proc.wait()
            raise ZygoteGone(f"the Python handlers' zygote did not start: exit status {code}")
        threading.Thread(target=self._read, daemon=True, name="pgsched-python-zygote").start()

    def _read(self) -> None:
        assert self._sock is not None
        while True:
            try:
                data = self._sock.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                break
            message = json.loads(data)
            if "pid" in message:
                self._forks.put(message["pid"])
            elif "exit" in message:
                with self._changed:
                    self._exits[message["exit"]] = message["status"]
                    self._changed.notify_all()
        with self._changed:
            self.gone = True
            self._changed.notify_all()
        self._forks.put(None)

    def fork(self, fds: list[int]) -> int:
        """A new child, given ``fds`` (its call input, its replies, its stdout, its stderr:
        the caller closes its copies); its pid. Raises ZygoteGone."""
        if self.gone or self._sock is None:
            raise ZygoteGone("the Python handlers' zygote has ended")
        with self._forking:  # one request and its answer at a time
            try:
                socket.send_fds(self._sock, [b"fork"], fds)
            except OSError as exc:
                raise ZygoteGone(f"the Python handlers' zygote has ended: {exc}") from None
            pid = self._forks.get()
        if pid is None:
            raise ZygoteGone("the Python handlers' zygote has ended")
        return pid

    def exit_status(self, pid: int, timeout: float) -> int | None:
        """How child ``pid`` ended (negative: the signal), once the zygote reaped it;
        None if it did not within ``timeout`` seconds (or the zygote is gone)."""
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exits or self.gone, timeout)
            return self._exits.pop(pid, None)

    def close(self) -> None:
        """End the zygote (its children die with it) and reap it."""
        if self._sock is not None:
            try:
                self._sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._sock.close()
        if self.proc is not None:
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait()

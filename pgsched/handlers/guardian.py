"""Ends what a worker started when the worker ends: a small process per worker.

A command's own child dies with its worker by ``PR_SET_PDEATHSIG`` (:mod:`pgsched.handlers.containment`),
but PDEATHSIG does not pass to grandchildren, and a command that double-forks or calls
``setsid`` leaves its process group. A SIGKILLed worker's commands used to run on beside
the copies the leader's rescue started elsewhere (issue 15: 44 commands finished twice in
one run). So each worker starts a guardian: ``python -S -I`` running
:mod:`pgsched.handlers.guardian_main` as a script (a little of the standard library, no
site-packages: about 10 MB resident, 0.4 % of a core while it watches a host of 140
processes), in a session of its own (a terminal's Ctrl-C or a ``killpg`` of the worker's
group does not reach it), which ignores SIGINT, SIGTERM and SIGHUP: it ends when the
worker does.

It notices the worker's end at once: a pidfd of the worker (pidfd_open(2)) turns readable
when the worker exits, whatever killed it; the pipe it reads from the worker (its stdin)
reaches EOF; its parent changes (the fallback without pidfds, looked at every second).
Then it kills what the worker started, SIGKILL at once after a death, SIGTERM first and
SIGKILL after a grace when the worker stops cleanly (the worker has ended its running
commands by then: what is left are processes commands left in the background, which must
not outlive the worker either). A process is the worker's when, started after the
guardian (never the embedded PostgreSQL of ``pgsched dev``, started before):

- its environment carries the worker's token (``PGSCHED_WORKER_TOKEN``, /proc/PID/environ:
  proc(5)): the worker puts it in ``os.environ``, so subprocesses of Python tasks inherit
  it, and every command gets it whatever its task's env says. It survives ``setsid`` and
  double forks; or
- it is in the session of a running command (the worker tells the guardian each command's
  session id, its pid, and forgets it when the command ends: a session id is never reused
  while one of its processes lives) or in the worker's own session, if it leads one; or
- it was seen among the worker's descendants (the guardian scans /proc every second and
  remembers each by pid and start time, so a reused pid is not mistaken for it); this
  catches a child of a Python task that cleared its environment; or
- its parent is such a process.

It never kills itself, pid 1, or any of its ancestors (the worker while it stops, the
process that started the worker, a test runner). It kills in rounds until a scan finds
none left alive (zombies do not count): what forks meanwhile is found in the next round.
Not caught: a process that clears its environment, leaves the session and loses its parent
within a second of starting (only a PID namespace or a cgroup would catch it: DESIGN
"Trust boundaries", bubblewrap); a setuid program the worker's user may not signal.
"""

from __future__ import annotations

import logging
import os
import secrets
import subprocess
import sys
import threading
import time

from ..login import CREDENTIAL_ENV
from . import guardian_main
from .guardian_main import KILL_PATIENCE, SCAN_INTERVAL, TOKEN_VAR

__all__ = ["SCAN_INTERVAL", "TOKEN_VAR", "Guardian", "active"]

log = logging.getLogger("pgsched.handlers.guardian")

_active: Guardian | None = None
_active_lock = threading.Lock()


def active() -> Guardian | None:
    """The guardian of this process's worker, while one is started (one per process: its
    token lives in the process-wide ``os.environ``)."""
    return _active


class Guardian:
    """The worker side: starts the guardian process, tells it of command sessions, stops it.

    :meth:`start` spawns it and sets ``PGSCHED_WORKER_TOKEN`` in ``os.environ``;
    :meth:`watch` / :meth:`forget` pass a command's session id (its pid); :meth:`stop` asks
    it to end what is left (SIGTERM, SIGKILL after ``grace`` seconds) and waits for it. Writes
    never block a slot: the pipe is non-blocking, and a guardian that died is started again
    (with the sessions still watched).
    """

    def __init__(self) -> None:
        self.token = f"{os.getpid()}-{secrets.token_hex(16)}"
        # processes started before this instant (clock ticks since boot: proc(5), field 22
        # of /proc/PID/stat) are never the worker's
        self.since = int(time.clock_gettime(time.CLOCK_BOOTTIME) * os.sysconf("SC_CLK_TCK"))
        self._lock = threading.Lock()
        self._sessions: set[int] = set()
        self._proc: subprocess.Popen[bytes] | None = None
        self._pipe: int | None = None
        self._stopped = False

    @property
    def mark(self) -> dict[str, str]:
        """The environment entry that makes a process this worker's."""
        return {TOKEN_VAR: self.token}

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @classmethod
    def start(cls) -> Guardian:
        """Start this process's guardian and make it :func:`active`. Raises OSError when it
        cannot be started (no /proc, no Python to run it), RuntimeError when one runs."""
        global _active
        with _active_lock:
            if _active is not None:
                raise RuntimeError("a guardian already runs in this process")
            if not os.path.isdir("/proc/self"):
                raise OSError("no /proc: a guardian cannot tell the worker's processes")
            guardian = cls()
            guardian._spawn()
            os.environ[TOKEN_VAR] = guardian.token
            _active = guardian
        threading.Thread(target=guardian._watch, daemon=True, name="pgsched-guardian-watch").start()
        return guardian

    def _watch(self) -> None:
        """Start the guardian again as soon as it exits while the worker runs (killed on its
        own, OOM): a worker killed after its guardian must not leave its commands behind.
        Waiting for it here finds that at once, not at the next command's start or end."""
        while True:
            proc = self._proc
            if proc is None:
                return
            proc.wait()
            with self._lock:
                if self._stopped:
                    return
                if self._proc is proc:  # not already started again by _send
                    self._respawn()

    def _spawn(self) -> None:
        read, write = os.pipe()
        # nor does it get the worker's login (it starts nothing, but runs beside commands)
        env = {k: v for k, v in os.environ.items() if k != TOKEN_VAR and k not in CREDENTIAL_ENV}
        try:
            self._proc = subprocess.Popen(
                [
                    sys.executable,
                    "-S",
                    "-I",
                    os.path.abspath(guardian_main.__file__),
                    str(os.getpid()),
                    self.token,
                    str(self.since),
                    _log_format(),
                ],
                stdin=read,
                stdout=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
                close_fds=True,
            )
        finally:
            os.close(read)
        os.set_blocking(write, False)
        self._pipe = write
        for sid in self._sessions:
            self._send(f"+ {sid}\n", respawn=False)

    def watch(self, sid: int) -> None:
        """A command started in session ``sid``: what runs in it is the worker's."""
        with self._lock:
            self._sessions.add(sid)
            self._send(f"+ {sid}\n")

    def forget(self, sid: int) -> None:
        """The command of session ``sid`` has ended (what it left behind carries the token)."""
        with self._lock:
            self._sessions.discard(sid)
            self._send(f"- {sid}\n")

    def _send(self, line: str, respawn: bool = True) -> None:
        """Under ``_lock``. Lines are under PIPE_BUF: written whole or not at all."""
        if self._pipe is None or self._stopped:
            return
        try:
            os.write(self._pipe, line.encode())
        except BlockingIOError:
            log.warning(
                "the guardian is not reading (its pipe is full): %r not passed on; commands still "
                "carry the worker's token",
                line.strip(),
            )
        except BrokenPipeError:
            if respawn:
                self._respawn()

    def _respawn(self) -> None:
        """Under ``_lock``: the guardian exited; start another (it is told the sessions
        still watched)."""
        assert self._proc is not None
        self._proc.poll()
        log.warning(
            "the guardian (pid %s) exited with %s; starting another",
            self._proc.pid,
            self._proc.returncode,
        )
        if self._pipe is not None:
            os.close(self._pipe)
            self._pipe = None
        try:
            self._spawn()
        except OSError as exc:
            log.error(
                "could not start another guardian (%s): commands may outlive this worker", exc
            )

    def stop(self, grace: float) -> None:
        """The worker is stopping: the guardian ends what is left of the worker's processes
        (SIGTERM, SIGKILL after ``grace`` seconds) and exits; waits for it. Idempotent."""
        global _active
        with self._lock:
            if self._stopped:
                return
            if self._pipe is not None:
                try:
                    os.set_blocking(self._pipe, True)
                    os.write(self._pipe, f"stop {grace}\n".encode())
                except OSError:
                    pass  # it is gone: nothing more to do
                os.close(self._pipe)
                self._pipe = None
            self._stopped = True
        with _active_lock:
            if _active is self:
                _active = None
                if os.environ.get(TOKEN_VAR) == self.token:
                    del os.environ[TOKEN_VAR]
        if self._proc is not None:
            try:
                self._proc.wait(grace + KILL_PATIENCE + 5)
            except subprocess.TimeoutExpired:
                log.warning("the guardian (pid %s) did not exit; leaving it", self._proc.pid)


def _log_format() -> str:
    """``json`` when this process logs JSON lines (``--log-format json``), else ``text``:
    the guardian writes its few lines to the same stderr in the same form."""
    from ..logs import JsonFormatter

    handlers = logging.getLogger().handlers
    return "json" if any(isinstance(h.formatter, JsonFormatter) for h in handlers) else "text"

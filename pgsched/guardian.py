"""Ends what a worker started when the worker ends: a small process per worker.

A command's own child dies with its worker by ``PR_SET_PDEATHSIG`` (:mod:`pgsched.runner`),
but PDEATHSIG does not pass to grandchildren, and a command that double-forks or calls
``setsid`` leaves its process group. A SIGKILLed worker's commands used to run on beside
the copies the leader's rescue started elsewhere (issue 15: 44 commands finished twice in
one run). So each worker starts a guardian: ``python -S -I`` running this file as a
script (stdlib only, no site-packages: about 8 MB and 70 ms to start), in a session of its
own (a terminal's Ctrl-C or a ``killpg`` of the worker's group does not reach it), which
ignores SIGINT, SIGTERM and SIGHUP: it ends when the worker does.

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
import select
import signal
import subprocess
import sys
import threading
import time
from typing import Any

TOKEN_VAR = "PGSCHED_WORKER_TOKEN"

# How often the guardian looks at the worker's descendants (seconds): one /proc scan costs
# about 18 µs per process on the host (1.3 ms for 73 processes on the development machine).
SCAN_INTERVAL = 1.0

# A round of kills that does not empty the set within this many seconds is given up on
# (a process stuck in uninterruptible sleep): logged, with what was left.
KILL_PATIENCE = 30.0

log = logging.getLogger("pgsched.guardian")

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
        return guardian

    def _spawn(self) -> None:
        read, write = os.pipe()
        env = {k: v for k, v in os.environ.items() if k != TOKEN_VAR}
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-S", "-I", os.path.abspath(__file__), str(os.getpid()), self.token,
                 str(self.since), _log_format()],
                stdin=read, stdout=subprocess.DEVNULL, env=env, start_new_session=True, close_fds=True)
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
            log.warning("the guardian is not reading (its pipe is full): %r not passed on; commands still "
                        "carry the worker's token", line.strip())
        except BrokenPipeError:
            if not respawn:
                return
            assert self._proc is not None
            log.warning("the guardian (pid %s) exited with %s; starting another", self._proc.pid, self._proc.poll())
            os.close(self._pipe)
            self._pipe = None
            try:
                self._spawn()
            except OSError as exc:
                log.error("could not start another guardian (%s): commands may outlive this worker", exc)

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
    from .logs import JsonFormatter

    handlers = logging.getLogger().handlers
    return "json" if any(isinstance(h.formatter, JsonFormatter) for h in handlers) else "text"


# -- the guardian process (stdlib only: run as ``python -S -I guardian.py``) -----------------


def _scan() -> dict[int, tuple[bytes, int, int, int]]:
    """Every process: pid -> (state, ppid, session id, start time in clock ticks since
    boot); proc(5): fields 3, 4, 6 and 22 of /proc/PID/stat (after the command name, which
    may hold spaces and parentheses: split after its last ')')."""
    procs = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
            procs[int(entry)] = (fields[0], int(fields[1]), int(fields[3]), int(fields[19]))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return procs


def _carries(pid: int, needle: bytes) -> bool:
    """Whether /proc/PID/environ (the environment the process was started with) holds
    ``needle`` (``\\0NAME=value\\0``)."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in b"\0" + f.read()
    except OSError:
        return False  # gone, or not ours to read (then not ours to kill either)


def _children(procs: dict[int, tuple[bytes, int, int, int]]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for pid, (_, ppid, _, _) in procs.items():
        out.setdefault(ppid, []).append(pid)
    return out


def _descendants(seeds: set[int], children: dict[int, list[int]]) -> set[int]:
    found, todo = set(seeds), list(seeds)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


class _Watch:
    """What the guardian knows of its worker's processes."""

    def __init__(self, worker: int, token: str, since: int) -> None:
        self.worker, self.since = worker, since
        self.needle = f"\0{TOKEN_VAR}={token}\0".encode()
        self.sessions: set[int] = set()
        self.seen: dict[int, int] = {}  # pid -> start time: once a descendant of the worker

    def look(self) -> None:
        """Remember the worker's descendants (those started after the guardian) as they are now."""
        procs = _scan()
        children = _children(procs)
        # a session no live process is in may be reused (a new process with that pid that
        # calls setsid): a command whose "-" never came is forgotten here
        self.sessions &= {sid for state, _, sid, _ in procs.values() if state not in (b"Z", b"X")}
        young = {pid for pid in children.get(self.worker, ()) if procs[pid][3] >= self.since}
        self.seen = {pid: procs[pid][3] for pid in _descendants(young, children)
                     if pid in procs and procs[pid][3] >= self.since} | {
            pid: start for pid, start in self.seen.items() if pid in procs and procs[pid][3] == start}

    def targets(self) -> set[int]:
        """The live processes that are the worker's now (module docstring), less the guardian,
        pid 1 and the guardian's ancestors."""
        procs = _scan()
        me = os.getpid()
        spared = {me, 1}
        pid = me
        while pid in procs and procs[pid][1] not in spared:
            pid = procs[pid][1]
            spared.add(pid)
        seeds = set()
        for pid, (state, _, sid, start) in procs.items():
            if start < self.since or state in (b"Z", b"X") or pid in spared:
                continue
            if (sid in self.sessions or sid == self.worker or self.seen.get(pid) == start
                    or _carries(pid, self.needle)):
                seeds.add(pid)
        found = _descendants(seeds, _children(procs))
        return {pid for pid in found if pid in procs and procs[pid][0] not in (b"Z", b"X")} - spared

    def end(self, grace: float) -> int:
        """Kill the worker's processes until none is left: SIGTERM and up to ``grace``
        seconds for them to go, then SIGKILL in rounds. How many were signalled."""
        signalled: set[int] = set()
        if grace > 0:
            left = self.targets()
            _signal(left, signal.SIGTERM)
            signalled |= left
            deadline = time.monotonic() + grace
            while left and time.monotonic() < deadline:
                time.sleep(0.02)
                left = self.targets()
        give_up = time.monotonic() + KILL_PATIENCE
        while left := self.targets():
            if time.monotonic() > give_up:
                log.error("still alive after %.0fs of SIGKILL: %s", KILL_PATIENCE, sorted(left))
                break
            _signal(left, signal.SIGKILL)
            signalled |= left
            time.sleep(0.005)
        return len(signalled)


def _signal(pids: set[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None  # Linux before 5.3: the parent is looked at instead


def _setup_log(fmt: str) -> None:
    """As pgsched.logs sets up the worker's (this process imports no pgsched)."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        import json
        from datetime import datetime, timezone

        class Json(logging.Formatter):
            def format(self, record: logging.LogRecord) -> str:
                return json.dumps({"ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(),
                                   "level": record.levelname.lower(), "logger": record.name,
                                   "message": record.getMessage(), "pid": record.process})

        handler.setFormatter(Json())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    logging.raiseExceptions = False  # a closed stderr must not stop the kills


def main(argv: list[str]) -> int:
    """``guardian.py WORKER_PID TOKEN SINCE FORMAT``; reads ``+ SID``, ``- SID`` and
    ``stop GRACE`` lines on stdin."""
    worker, token, since, fmt = int(argv[1]), argv[2], int(argv[3]), argv[4]
    _setup_log(fmt)
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # it ends when the worker does
    watch = _Watch(worker, token, since)
    pidfd = _open_pidfd(worker)
    watched: list[Any] = [0] + ([pidfd] if pidfd is not None else [])
    pending = b""
    grace: float | None = None  # None: the worker died
    next_look = 0.0
    while os.getppid() == worker:
        ready, _, _ = select.select(watched, [], [], max(0.0, next_look - time.monotonic()))
        if pidfd is not None and pidfd in ready:
            break
        if 0 in ready:
            data = os.read(0, 4096)
            if not data:
                break  # EOF without a stop: the worker is gone
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                what, _, value = line.decode().partition(" ")
                if what == "+":
                    watch.sessions.add(int(value))
                elif what == "-":
                    watch.sessions.discard(int(value))
                elif what == "stop":
                    grace = float(value)
            if grace is not None:
                break
        if time.monotonic() >= next_look:
            watch.look()
            next_look = time.monotonic() + SCAN_INTERVAL
    began = time.monotonic()
    killed = watch.end(grace or 0.0)
    if grace is None:
        log.warning("worker %s died: killed %d of its process(es) in %.3fs", worker, killed,
                    time.monotonic() - began)
    elif killed:
        log.info("worker %s stopped: ended %d process(es) it had left running", worker, killed)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""The guardian's own program: run by each worker as ``python -S -I guardian_main.py``
(:mod:`pgsched.handlers.guardian` says why and what it kills). It imports only what it needs of the
standard library and nothing of pgsched or site-packages, so it stays small (about 10 MB
resident, against 17 MB with logging and subprocess imported) and starts in about 20 ms.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from datetime import UTC

TOKEN_VAR = "PGSCHED_WORKER_TOKEN"

# How often the guardian looks at the worker's descendants (seconds): one /proc scan costs
# about 18 µs per process on the host (1.3 ms for 73 processes on the development machine).
SCAN_INTERVAL = 1.0

# A round of kills that does not empty the set within this many seconds is given up on
# (a process stuck in uninterruptible sleep): logged, with what was left.
KILL_PATIENCE = 30.0


def scan() -> dict[int, tuple[bytes, int, int, int]]:
    """Every process: pid -> (state, ppid, session id, start time in clock ticks since
    boot); proc(5): fields 3, 4, 6 and 22 of /proc/PID/stat (after the command name, which
    may hold spaces and parentheses: split after its last ')'). Also the containment's
    (:func:`pgsched.handlers.containment.kill_group`): this file imports no pgsched, not
    the other way round."""
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


def children_of(procs: dict[int, tuple[bytes, int, int, int]]) -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for pid, (_, ppid, _, _) in procs.items():
        out.setdefault(ppid, []).append(pid)
    return out


def descendants(seeds: set[int], children: dict[int, list[int]]) -> set[int]:
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
        procs = scan()
        children = children_of(procs)
        # a session no live process is in may be reused (a new process with that pid that
        # calls setsid): a command whose "-" never came is forgotten here
        self.sessions &= {sid for state, _, sid, _ in procs.values() if state not in (b"Z", b"X")}
        young = {pid for pid in children.get(self.worker, ()) if procs[pid][3] >= self.since}
        self.seen = {
            pid: procs[pid][3]
            for pid in descendants(young, children)
            if pid in procs and procs[pid][3] >= self.since
        } | {
            pid: start
            for pid, start in self.seen.items()
            if pid in procs and procs[pid][3] == start
        }

    def targets(self) -> set[int]:
        """The live processes that are the worker's now (module docstring), less the guardian,
        pid 1 and the guardian's ancestors."""
        procs = scan()
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
            if (
                sid in self.sessions
                or sid == self.worker
                or self.seen.get(pid) == start
                or _carries(pid, self.needle)
            ):
                seeds.add(pid)
        found = descendants(seeds, children_of(procs))
        return {pid for pid in found if pid in procs and procs[pid][0] not in (b"Z", b"X")} - spared

    def end(self, grace: float, fmt: str) -> int:
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
                _say(
                    fmt,
                    "error",
                    f"still alive after {KILL_PATIENCE:.0f}s of SIGKILL: {sorted(left)}",
                )
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


def _say(fmt: str, level: str, message: str) -> None:
    """One log line on stderr, in the form pgsched.logs gives the worker's (``text`` or
    ``json``), without the logging module (about 2 MB of this small process)."""
    now = time.time()
    if fmt == "json":
        import json
        from datetime import datetime

        line = json.dumps(
            {
                "ts": datetime.fromtimestamp(now, UTC).isoformat(),
                "level": level,
                "logger": "pgsched.handlers.guardian",
                "message": message,
                "pid": os.getpid(),
            }
        )
    else:
        stamp = (
            time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + f",{int(now % 1 * 1000):03d}"
        )
        line = f"{stamp} {level.upper():<7} pgsched.handlers.guardian: {message}"
    try:
        os.write(2, (line + "\n").encode())
    except OSError:
        pass  # a closed stderr must not stop the kills


def main(argv: list[str]) -> int:
    """``guardian_main.py WORKER_PID TOKEN SINCE FORMAT``; reads ``+ SID``, ``- SID`` and
    ``stop GRACE`` lines on stdin."""
    worker, token, since, fmt = int(argv[1]), argv[2], int(argv[3]), argv[4]
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # it ends when the worker does
    watch = _Watch(worker, token, since)
    pidfd = _open_pidfd(worker)
    watched = [0] + ([pidfd] if pidfd is not None else [])
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
    killed = watch.end(grace or 0.0, fmt)
    if grace is None:
        _say(
            fmt,
            "warning",
            f"worker {worker} died: killed {killed} of its process(es) in "
            f"{time.monotonic() - began:.3f}s",
        )
    elif killed:
        _say(
            fmt, "info", f"worker {worker} stopped: ended {killed} process(es) it had left running"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

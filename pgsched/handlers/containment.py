"""A command's processes, contained: they die with the worker, and a timeout or stop ends
all of them. No SQL here.

A command runs in a new session, so its process group is its alone: :func:`kill_group`
sends SIGTERM to the whole group, then SIGKILL after a grace period, and what left the
group (``setsid``, a double fork) is found by the mark in its environment
(``PGSCHED_COMMAND_MARK``, one per command).

A command dies with its worker: its own process is SIGKILLed when the worker's thread that
started it exits (``PR_SET_PDEATHSIG``, prctl(2)), and the worker's guardian
(:mod:`pgsched.handlers.guardian`) is told its session and gives it the worker's token, so that
what it starts dies too. The prctl is made by ``setpriv --pdeathsig KILL`` (util-linux
2.33 or later) run in front of the command; only without it by a preexec function
(:func:`die_with_worker`). Measured through a real worker (concurrency 4, 500 ``true``
commands, 2 shared cores): 480–660 a second before, 700–820 with the guardian alone,
340–370 with setpriv, 105–140 with a preexec function, which makes subprocess fork instead
of vfork and run Python in the child (CPython's after-fork handlers, copy-on-write of what
they touch) while the slot waits for the exec. setpriv leaves a window before its prctl
(the worker dying then) that the preexec function's :func:`os.getppid` check closes; the
guardian covers it.
"""

from __future__ import annotations

import ctypes
import functools
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable

from .guardian_main import children_of, descendants, scan

# Each command's environment carries a mark of its own (a random value): what it starts
# inherits it, also what leaves its process group, so a timeout or stop can find it.
MARK_VAR = "PGSCHED_COMMAND_MARK"

PR_SET_PDEATHSIG = 1  # prctl(2), <linux/prctl.h>

try:  # resolved here, in the parent: the child between fork and exec only calls it
    _prctl: Callable[..., int] | None = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    _prctl = None


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` still runs. Zombies do not count: orphans of the
    group are reaped by init, which in a container may take its time, and a dead process
    holds nothing (proc(5): field 3 of /proc/PID/stat is the state, field 5 the group)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True  # no procfs: assume the worst
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


def _marked(mark: str | None) -> list[int]:
    """The live processes whose environment (/proc/PID/environ, as they were started:
    proc(5)) carries ``PGSCHED_COMMAND_MARK=mark``; none for no mark."""
    if mark is None:
        return []
    needle = f"\0{MARK_VAR}={mark}\0".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if needle not in b"\0" + f.read():
                    continue
            with open(f"/proc/{entry}/stat", "rb") as f:
                if f.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
        except (OSError, IndexError):
            continue  # gone, or not ours
        found.append(int(entry))
    return found


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _tree(root: int, known: dict[int, int]) -> dict[int, int]:
    """``known`` (pid -> start time) still alive as the same processes, with every live
    descendant of ``root`` and of them: what a command started, also what left its session
    and cleared its environment (``setsid env -i ...``), which neither the group nor the
    mark finds. Taken before the first signal, while the parents that link it still live,
    and kept across rounds: a process whose parent died is reparented to init."""
    procs = scan()
    tree = {p: t for p, t in known.items() if p in procs and procs[p][3] == t}
    tree |= {p: procs[p][3] for p in descendants({root, *tree}, children_of(procs)) - {root}}
    return {p: t for p, t in tree.items() if p in procs and procs[p][0] != b"Z"}


def kill_group(
    pgid: int, grace: float, leader: subprocess.Popen | None = None, mark: str | None = None
) -> None:
    """SIGTERM the process group ``pgid``; SIGKILL it if anything is left after ``grace``
    seconds. ``leader`` (the group's first process, our child) is reaped while waiting, so
    its zombie does not count as alive. ``mark``: the command's ``PGSCHED_COMMAND_MARK``;
    every process carrying it goes too, also what left the group (``setsid``, a double
    fork): else it would run on beside the next attempt. So does every descendant of the
    group's leader (pid ``pgid``), found before the first signal: what left the group and
    cleared its environment as well (attack 19, tests/e2e/test_attack19_escape.py)."""
    tree = _tree(pgid, {})
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    _signal([*_marked(mark), *tree], signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if leader is not None:
            leader.poll()
        tree = _tree(pgid, tree)
        if not _group_alive(pgid) and not _marked(mark) and not tree:
            return
        time.sleep(0.02)
    if _group_alive(pgid):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for _ in range(100):  # rounds: what forks meanwhile carries the mark too
        tree = _tree(pgid, tree)
        strays = [*_marked(mark), *tree]
        if not strays:
            return
        _signal(strays, signal.SIGKILL)
        time.sleep(0.01)


def die_with_worker(parent_pid: int) -> None:
    """In the child, between fork and exec: be SIGKILLed when the worker's thread that
    forked it exits (``PR_SET_PDEATHSIG``, prctl(2): tied to the forking thread, and a slot
    thread lives as long as its command; kept across execve, except of a set-user-ID
    program). If the worker died before the prctl took, the parent is already another
    process: exit, the command never starts."""
    if _prctl is not None:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(137)  # 128 + SIGKILL: as if the signal had come


@functools.cache
def setpriv_path() -> str | None:
    """setpriv(1), when it knows ``--pdeathsig`` (util-linux 2.33 and later); looked up once."""
    path = shutil.which("setpriv")
    if path is None:
        return None
    try:
        usage = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return path if "--pdeathsig" in usage else None

"""Runs one attempt of a command handler (shell or argv) and says how it ended. No SQL here.

Commands (shell and argv handlers) run in a new session, so their process group is
theirs alone: a timeout sends SIGTERM to the whole group, then SIGKILL after a grace
period, and nothing the command started is left behind: what left the group (``setsid``,
a double fork) is found by the mark in its environment (``PGSCHED_COMMAND_MARK``, one per
command). stdout and stderr are read line by line and handed to a :class:`LogSink` with
the time each line arrived.

A command dies with its worker: its own process is SIGKILLed when the worker's thread that
started it exits (``PR_SET_PDEATHSIG``, prctl(2)), and the worker's guardian
(:mod:`pgsched.handlers.guardian`) is told its session and gives it the worker's token, so that
what it starts dies too. The prctl is made by ``setpriv --pdeathsig KILL`` (util-linux
2.33 or later) run in front of the command; only without it by a preexec function
(:func:`_die_with_worker`). Measured through a real worker (concurrency 4, 500 ``true``
commands, 2 shared cores): 480–660 a second before, 700–820 with the guardian alone,
340–370 with setpriv, 105–140 with a preexec function, which makes subprocess fork instead
of vfork and run Python in the child (CPython's after-fork handlers, copy-on-write of what
they touch) while the slot waits for the exec. setpriv leaves a window before its prctl
(the worker dying then) that the preexec function's :func:`os.getppid` check closes; the
guardian covers it.

Python handlers are :mod:`.python`'s; :mod:`.output` collects what both print.
"""

from __future__ import annotations

import ctypes
import functools
import json
import os
import secrets
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..jsontext import has_nul
from . import Outcome, StopSignal, guardian
from .output import LogSink, storable_text

MAX_LINE_BYTES = 64 * 1024

# Each command's environment carries a mark of its own (a random value): what it starts
# inherits it, also what leaves its process group, so a timeout or stop can find it.
MARK_VAR = "PGSCHED_COMMAND_MARK"

PR_SET_PDEATHSIG = 1  # prctl(2), <linux/prctl.h>

try:  # resolved here, in the parent: the child between fork and exec only calls it
    _prctl: Callable[..., int] | None = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):  # not Linux
    _prctl = None


def _pump(pipe: Any, stream: str, sink: LogSink) -> None:
    """Hand each line to ``sink``; a line over MAX_LINE_BYTES is logged in pieces, and
    is no command result (only a whole line is)."""
    whole = True  # the previous piece ended its line
    with pipe:
        while True:
            chunk = pipe.readline(MAX_LINE_BYTES)
            if not chunk:
                return
            ends = chunk.endswith(b"\n")
            sink.write(
                stream,
                chunk.decode("utf-8", errors="replace").rstrip("\r\n"),
                whole_line=whole and (ends or len(chunk) < MAX_LINE_BYTES),
            )
            whole = ends


def _feed(pipe: Any, data: bytes) -> None:
    try:
        with pipe:
            pipe.write(data)
    except (BrokenPipeError, OSError):
        pass  # the command did not read all of its input: cron does not mind either


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


def kill_group(
    pgid: int, grace: float, leader: subprocess.Popen | None = None, mark: str | None = None
) -> None:
    """SIGTERM the process group ``pgid``; SIGKILL it if anything is left after ``grace``
    seconds. ``leader`` (the group's first process, our child) is reaped while waiting, so
    its zombie does not count as alive. ``mark``: the command's ``PGSCHED_COMMAND_MARK``;
    every process carrying it goes too, also what left the group (``setsid``, a double
    fork): else it would run on beside the next attempt."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    _signal(_marked(mark), signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if leader is not None:
            leader.poll()
        if not _group_alive(pgid) and not _marked(mark):
            return
        time.sleep(0.02)
    if _group_alive(pgid):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    for _ in range(100):  # rounds: what forks meanwhile carries the mark too
        strays = _marked(mark)
        if not strays:
            return
        _signal(strays, signal.SIGKILL)
        time.sleep(0.01)


def _die_with_worker(parent_pid: int) -> None:
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
def _setpriv() -> str | None:
    """setpriv(1), when it knows ``--pdeathsig`` (util-linux 2.33 and later); looked up once."""
    path = shutil.which("setpriv")
    if path is None:
        return None
    try:
        usage = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return path if "--pdeathsig" in usage else None


# The start gate of a command spawned without a preexec function (one made subprocess fork
# the whole worker instead of vfork: 4-5 times fewer spawns a second in a busy worker). A
# POSIX shell, exec'd between setpriv and the command, is the child's last step before the
# command: past the deadline ($1, CLOCK_BOOTTIME centiseconds as /proc/uptime counts them,
# proc(5)) it prints the refusal line ($2, unique to this spawn, so no command's own output
# can pass for it) and exits 125 without starting the command; else it execs the command.
_START_GATE = (
    "read up _ </proc/uptime; up=${up%.*}${up#*.}; "
    'if [ "$up" -gt "$1" ]; then printf "%s\\n" "$2"; exit 125; fi; shift 2; exec "$@"'
)
GATE_REFUSED = 125


class StartDeadlinePassed(Exception):
    """The command was not started: its start deadline (``start_by``, CLOCK_MONOTONIC
    seconds) had passed when the child was about to exec it (the worker was frozen, or
    slow, between proving its lease and the fork). Nothing of the command ran."""


class _LateStart(Exception):
    """Raised in the child between fork and exec: subprocess reports it to the parent as
    SubprocessError and the command never runs."""


def _check_start_deadline(start_by: float | None) -> None:
    """In the child, between fork and exec: refuse to exec once ``start_by`` (CLOCK_MONOTONIC
    seconds, one clock for the whole host, so the parent's reading and the child's agree) has
    passed. This is the last instant before the command starts: a worker stopped (SIGSTOP, a
    paused VM) after its parent-side check but before the fork wakes past the deadline and
    starts nothing; its lease may have been rescued meanwhile (issue 15, item 2)."""
    if start_by is not None and time.monotonic() > start_by:
        raise _LateStart()


def _child_setup(parent_pid: int, start_by: float | None = None) -> Callable[[], None]:
    """The preexec_fn of a command's child where setpriv(1) is missing: every step the child
    takes before exec (die with the worker, then the start deadline)."""

    def setup() -> None:
        _die_with_worker(parent_pid)
        _check_start_deadline(start_by)

    return setup


def _spawn(
    argv: list[str],
    env: Mapping[str, str],
    start_by: float | None = None,
    refusal: str | None = None,
) -> tuple[list[str], Callable[[], None] | None]:
    """The argv and preexec function that start ``argv`` with PR_SET_PDEATHSIG set, and,
    given ``start_by``, not once it has passed: under setpriv when it is there and
    ``argv[0]`` can be found (else the OSError of a command that cannot start says why, as
    without setpriv), the deadline checked by the start gate (``refusal``: the line it prints
    when it refuses); else both in a preexec function (:func:`_child_setup`)."""
    setpriv = _setpriv()
    if setpriv is not None and shutil.which(argv[0], path=env.get("PATH", os.defpath)):
        if start_by is None or refusal is None:
            return [setpriv, "--pdeathsig", "KILL", "--", *argv], None
        boot_by = start_by + time.clock_gettime(time.CLOCK_BOOTTIME) - time.monotonic()
        return [
            setpriv,
            "--pdeathsig",
            "KILL",
            "--",
            "/bin/sh",
            "-c",
            _START_GATE,
            "pgsched-start-gate",
            str(int(boot_by * 100)),
            refusal,
            *argv,
        ], None
    return argv, _child_setup(os.getpid(), start_by)


def run_command(
    argv: list[str],
    *,
    env: Mapping[str, str],
    stdin: str | None,
    timeout: float | None,
    sink: LogSink,
    kill_grace: float = 5.0,
    on_tick: Callable[[], None] | None = None,
    stop: StopSignal | None = None,
    stop_grace: float = 1.0,
    start_by: float | None = None,
) -> Outcome:
    """Run ``argv`` to completion in its own process group.

    ``start_by`` (CLOCK_MONOTONIC seconds, ``time.monotonic()``): the child checks it
    between fork and exec and refuses to start the command once it has passed; then this
    raises :class:`StartDeadlinePassed` and nothing ran.

    ``timeout`` (seconds, None = none) ends it by killing the group (SIGTERM, then SIGKILL
    after ``kill_grace`` s); a set ``stop`` event does the same with ``stop_grace``.
    ``on_tick`` is called about every 200 ms while it runs (the worker flushes logs there).
    A non-zero exit is ``failed``; a death by signal N reports exit code ``128 + N`` as
    shells do.

    Processes the command leaves running in the background may hold its output open. Their
    output is read until the timeout (then they are killed with the group) or, without a
    timeout, for 5 more seconds; the outcome is the command's own exit status either way. A
    process that leaves the group (``setsid``, a double fork) is killed with it by the
    command's mark, unless it also cleared its environment; it dies with the worker anyway
    (:mod:`pgsched.handlers.guardian`).

    With a guardian running (:func:`pgsched.handlers.guardian.active`), the command gets the
    worker's token in its environment, whatever ``env`` says, and its session is watched
    while it runs.
    """
    mark = secrets.token_hex(8)
    env = {**env, MARK_VAR: mark}
    guard = guardian.active()
    if guard is not None:
        env.update(guard.mark)
    # a nonce of its own, never in the command's environment (the mark is): only the gate's
    # argv holds it, and the command's exec replaces that, so no command can print it
    refusal = f"pgsched: not started: its start deadline had passed ({secrets.token_hex(16)})"
    try:
        args, setup = _spawn(argv, env, start_by, refusal)
        proc = subprocess.Popen(
            args,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(env),
            start_new_session=True,
            close_fds=True,
            preexec_fn=setup,
        )
    except subprocess.SubprocessError as exc:  # the child's setup raised: it never exec'd
        if start_by is not None and time.monotonic() > start_by:
            raise StartDeadlinePassed(
                f"start deadline passed before {argv[0]!r} was started"
            ) from exc
        return Outcome("failed", error=f"could not start {argv[0]!r}: {exc}")
    except OSError as exc:  # shells: 127 command not found, 126 found but not executable
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        return Outcome(
            "failed", exit_code=code, error=f"could not start {argv[0]!r}: {exc.strerror or exc}"
        )
    if guard is not None:
        guard.watch(proc.pid)  # its session id: start_new_session made it the leader
    pumps = [
        threading.Thread(target=_pump, args=(proc.stdout, "stdout", sink), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, "stderr", sink), daemon=True),
    ]
    if stdin is not None:
        data = stdin if stdin.endswith("\n") or not stdin else stdin + "\n"  # cronie adds it
        pumps.append(threading.Thread(target=_feed, args=(proc.stdin, data.encode()), daemon=True))
    for t in pumps:
        t.start()
    deadline = time.monotonic() + timeout if timeout else None
    reason = None
    while proc.poll() is None:
        if deadline is not None and time.monotonic() >= deadline:
            reason = "timed_out"
        elif stop is not None and stop.is_set():
            reason = "stopped"
        if reason:
            kill_group(proc.pid, kill_grace if reason == "timed_out" else stop_grace, proc, mark)
            break
        try:
            proc.wait(0.2)
        except subprocess.TimeoutExpired:
            pass
        if on_tick:
            on_tick()
    code = proc.wait()
    if start_by is not None and code == GATE_REFUSED:
        for t in pumps:  # the gate's one line, then EOF
            t.join(1.0)
        if sink.last_stdout == refusal:
            raise StartDeadlinePassed(f"start deadline passed before {argv[0]!r} was started")
    if guard is not None:  # what it left running carries the token
        guard.forget(proc.pid)
    # Output may still be held open by children the command left running: read until EOF,
    # but not past the deadline (then the rest of the group goes) nor 5 s without one.
    for t in pumps:
        end = deadline if deadline and not reason else time.monotonic() + 5.0
        while t.is_alive() and time.monotonic() < end:
            t.join(0.2)
            if on_tick:
                on_tick()
        if t.is_alive() and not reason and deadline:
            sink.write(
                "system",
                "the command exited but left processes holding its output; "
                "they were killed at the timeout",
            )
            kill_group(proc.pid, kill_grace, proc, mark)
            t.join(1.0)
        elif t.is_alive() and not reason:
            sink.write(
                "system",
                "the command exited; stopped reading output that background processes still hold",
            )
            break
    sink.close()
    exit_code = code if code >= 0 else 128 - code
    if reason == "timed_out":
        return Outcome(
            "timed_out", exit_code, f"timed out after {timeout:g}s; process group killed"
        )
    if reason == "stopped":
        return Outcome("failed", exit_code, "stopped by the worker; process group killed")
    if code == 0:
        return Outcome("succeeded", 0, result=command_result(sink.last_stdout))
    if code < 0:
        return Outcome("failed", exit_code, f"killed by signal {signal.Signals(-code).name}")
    return Outcome("failed", exit_code, f"exited with code {code}")


def command_result(line: str | None) -> Any:
    """A command's result: its last non-blank stdout line, as JSON when it parses as JSON
    that PostgreSQL can store (``{"rows": 3}``, ``42``, ``true``), else as the text itself;
    None without output, or when that line was longer than MAX_LINE_BYTES. (As Airflow's
    BashOperator pushes the last line of output as its XCom.)"""
    if line is None:
        return None
    text = storable_text(line.strip())
    try:
        value = json.loads(text, parse_constant=_not_json)  # NaN and Infinity are not JSON
        # what PostgreSQL's jsonb cannot hold (1e999 is infinite; NUL characters) stays text
        stored = json.dumps(value, allow_nan=False, ensure_ascii=False)
        stored.encode("utf-8")  # a lone surrogate ("\ud800") raises here
        if has_nul(stored):
            return text
    except ValueError:
        return text
    return value


def _not_json(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")

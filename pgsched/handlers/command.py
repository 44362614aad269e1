"""Runs one attempt of a command handler (shell or argv) and says how it ended. No SQL here.

Commands (shell and argv handlers) run in a new session, so their process group is theirs
alone: a timeout or a stop ends the whole group and what left it (:mod:`.containment`), and
the child dies with its worker. It is started under :mod:`.start_gate`, which refuses to
start it once its start deadline has passed. stdout and stderr are read line by line and
handed to a :class:`LogSink` with the time each line arrived.

Python handlers are :mod:`.python`'s; :mod:`.output` collects what both print.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from ..jsontext import has_nul
from . import Outcome, StopSignal, guardian
from .containment import MARK_VAR, kill_group
from .isolation import Isolation
from .limit_kills import ending, limit_error
from .output import LogSink, storable_text
from .start_gate import GATE_REFUSED, StartDeadlinePassed, spawn_args

MAX_LINE_BYTES = 64 * 1024


# stderr lines kept to tell which resource limit ended a command (.limit_kills)
STDERR_TAIL = 5


def _pump(pipe: Any, stream: str, sink: LogSink, tail: deque[str] | None = None) -> None:
    """Hand each line to ``sink`` (and keep the last ones in ``tail``); a line over
    MAX_LINE_BYTES is logged in pieces, and is no command result (only a whole line is)."""
    whole = True  # the previous piece ended its line
    with pipe:
        while True:
            chunk = pipe.readline(MAX_LINE_BYTES)
            if not chunk:
                return
            ends = chunk.endswith(b"\n")
            text = chunk.decode("utf-8", errors="replace").rstrip("\r\n")
            sink.write(stream, text, whole_line=whole and (ends or len(chunk) < MAX_LINE_BYTES))
            if tail is not None:
                tail.append(text)
            whole = ends


def _feed(pipe: Any, data: bytes) -> None:
    try:
        with pipe:
            pipe.write(data)
    except (BrokenPipeError, OSError):
        pass  # the command did not read all of its input: cron does not mind either


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
    isolation: Isolation | None = None,
    workdir: str | None = None,
) -> Outcome:
    """Run ``argv`` to completion in its own process group.

    ``isolation`` (:mod:`.isolation`, None or level none: as before) wraps it in the
    sandbox, its user and its limits, in ``workdir`` (its scratch directory, then also its
    working directory); an attempt ended by a limit says which (:mod:`.limit_kills`).

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
    command's mark, or, when it also cleared its environment, as a descendant of the
    command found before the first signal (not one whose parents had all exited by then);
    it dies with the worker anyway (:mod:`pgsched.handlers.guardian`).

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
    isolated = isolation is not None and isolation.isolated
    if isolated and not shutil.which(argv[0], path=env.get("PATH", os.defpath)):
        return Outcome("failed", exit_code=127, error=f"could not start {argv[0]!r}: not found")
    wrapped = isolation.wrap(argv, workdir) if isolation is not None and workdir else argv
    try:
        args, setup = spawn_args(wrapped, env, start_by, refusal)
        proc = subprocess.Popen(
            args,
            cwd=workdir,
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
    tail: deque[str] = deque(maxlen=STDERR_TAIL)
    pumps = [
        threading.Thread(target=_pump, args=(proc.stdout, "stdout", sink), daemon=True),
        threading.Thread(target=_pump, args=(proc.stderr, "stderr", sink, tail), daemon=True),
    ]
    if stdin is not None:
        data = stdin if stdin.endswith("\n") or not stdin else stdin + "\n"  # cronie adds it
        pumps.append(threading.Thread(target=_feed, args=(proc.stdin, data.encode()), daemon=True))
    for t in pumps:
        t.start()
    deadline = time.monotonic() + timeout if timeout else None
    reason = None
    cpu: list[float] = []  # the CPU seconds it and the processes it waited for spent
    while _reap(proc, cpu) is None:
        if deadline is not None and time.monotonic() >= deadline:
            reason = "timed_out"
        elif stop is not None and stop.is_set():
            reason = "stopped"
        if reason:
            kill_group(proc.pid, kill_grace if reason == "timed_out" else stop_grace, proc, mark)
            break
        for _ in range(10):  # 200 ms, or less once it ends
            if _reap(proc, cpu) is not None:
                break
            time.sleep(0.02)
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
    if isolated and isolation is not None:
        sandbox = isolation.level == "sandbox"  # bwrap does not wait for it: no rusage then
        ended = ending(
            code,
            list(tail),
            isolation.limits,
            cpu_used=None if sandbox else _sum(cpu),
            bwrap=sandbox,
        )
        named = limit_error(ended, list(tail), isolation.limits)
        if named is not None:
            return Outcome("failed", exit_code, named)
        if ended.signal is not None and code > 0:  # a shell's or bwrap's 128 + N
            name = signal.Signals(ended.signal).name
            return Outcome("failed", exit_code, f"killed by signal {name}{ended.caveat(code)}")
    if code < 0:
        return Outcome("failed", exit_code, f"killed by signal {signal.Signals(-code).name}")
    return Outcome("failed", exit_code, f"exited with code {code}")


def _reap(proc: subprocess.Popen[bytes], cpu: list[float]) -> int | None:
    """``proc.poll()`` by wait4(2), which also tells the CPU time the child and the
    processes it waited for spent (appended to ``cpu``): what tells a command that exits
    152 from one the CPU limit's SIGXCPU ended (:mod:`.limit_kills`)."""
    if proc.returncode is not None:
        return proc.returncode
    try:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
    except ChildProcessError:  # reaped elsewhere (kill_group's wait): Popen knows its status
        return proc.poll()
    if pid == 0:
        return None
    cpu.append(usage.ru_utime + usage.ru_stime)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode


def _sum(cpu: list[float]) -> float | None:
    return sum(cpu) if cpu else None


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

"""Runs one attempt of a handler and says how it ended. No SQL here.

Commands (shell and argv handlers) run in a new session, so their process group is
theirs alone: a timeout sends SIGTERM to the whole group, then SIGKILL after a grace
period, and nothing the command started is left behind. stdout and stderr are read line
by line and handed to a :class:`LogSink` with the time each line arrived.

Python handlers run in a thread of the worker. A timeout marks the attempt ``timed_out``
and frees its slot, but Python cannot kill a thread: the call goes on in the background
until it returns, and its result is discarded.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

MAX_LINE_BYTES = 64 * 1024


@dataclass
class Outcome:
    """How an attempt ended: ``state`` is succeeded, failed or timed_out; ``exit_code`` for
    commands; ``error`` a one-paragraph reason; ``result`` JSON-serialisable or None."""

    state: str
    exit_code: int | None = None
    error: str | None = None
    result: Any = None


class LogSink:
    """Collects captured lines (thread-safe) until the owner drains them.

    Each line is ``(seq, stream, logged_at, text)``; ``seq`` counts from 1 per attempt.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lines: list[tuple[int, str, datetime, str]] = []
        self._seq = 0
        self.tail: collections.deque[str] = collections.deque(maxlen=3)

    def write(self, stream: str, text: str) -> None:
        with self._lock:
            self._seq += 1
            self._lines.append((self._seq, stream, datetime.now(timezone.utc), text))
            self.tail.append(text)

    def drain(self) -> list[tuple[int, str, datetime, str]]:
        with self._lock:
            lines, self._lines = self._lines, []
            return lines


def _pump(pipe: Any, stream: str, sink: LogSink) -> None:
    with pipe:
        while True:
            chunk = pipe.readline(MAX_LINE_BYTES)
            if not chunk:
                return
            sink.write(stream, chunk.decode("utf-8", errors="replace").rstrip("\r\n"))


def _feed(pipe: Any, data: bytes) -> None:
    try:
        with pipe:
            pipe.write(data)
    except (BrokenPipeError, OSError):
        pass  # the command did not read all of its input: cron does not mind either


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_group(pgid: int, grace: float, leader: subprocess.Popen | None = None) -> None:
    """SIGTERM the process group ``pgid``; SIGKILL it if anything is left after ``grace``
    seconds. ``leader`` (the group's first process, our child) is reaped while waiting, so
    its zombie does not count as alive."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if leader is not None:
            leader.poll()
        if not _group_alive(pgid):
            return
        time.sleep(0.02)
    if _group_alive(pgid):
        try:
            os.killpg(pgid, signal.SIGKILL)
        except ProcessLookupError:
            return


def run_command(argv: list[str], *, env: Mapping[str, str], stdin: str | None,
                timeout: float | None, sink: LogSink, kill_grace: float = 5.0,
                on_tick: Callable[[], None] | None = None,
                stop: threading.Event | None = None) -> Outcome:
    """Run ``argv`` to completion in its own process group.

    ``timeout`` (seconds, None = none) and a set ``stop`` event both end it by killing the
    group (SIGTERM, then SIGKILL after ``kill_grace`` s). ``on_tick`` is called about every
    200 ms while it runs (the worker flushes logs there). A non-zero exit is ``failed``; a
    death by signal N reports exit code ``128 + N`` as shells do.
    """
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(env),
                                start_new_session=True, close_fds=True)
    except OSError as exc:
        return Outcome("failed", exit_code=127, error=f"could not start {argv[0]!r}: {exc.strerror or exc}")
    pumps = [threading.Thread(target=_pump, args=(proc.stdout, "stdout", sink), daemon=True),
             threading.Thread(target=_pump, args=(proc.stderr, "stderr", sink), daemon=True)]
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
            kill_group(proc.pid, kill_grace, proc)
            break
        try:
            proc.wait(0.2)
        except subprocess.TimeoutExpired:
            pass
        if on_tick:
            on_tick()
    code = proc.wait()
    # Output may still be held open by children the command left running: read until EOF,
    # but not past the deadline (then the group goes too) nor 5 s when there is none.
    for t in pumps:
        limit = (deadline - time.monotonic()) if deadline and not reason else 5.0
        t.join(max(limit, 0.5))
        if t.is_alive() and deadline and not reason:
            reason = "timed_out"
            kill_group(proc.pid, kill_grace, proc)
            t.join(1.0)
    exit_code = code if code >= 0 else 128 - code
    if reason == "timed_out":
        return Outcome("timed_out", exit_code, f"timed out after {timeout:g}s; process group killed")
    if reason == "stopped":
        return Outcome("failed", exit_code, "stopped by the worker; process group killed")
    if code == 0:
        return Outcome("succeeded", 0)
    if code < 0:
        return Outcome("failed", exit_code, f"killed by signal {signal.Signals(-code).name}")
    return Outcome("failed", exit_code, f"exited with code {code}")


def run_python(func: Callable[..., Any], params: Mapping[str, Any], *, timeout: float | None,
               sink: LogSink) -> Outcome:
    """Call ``func(**params)`` in a thread; its return value is the result (must be JSON).

    An exception is ``failed`` with its traceback in the log and its last line as the error.
    """
    box: dict[str, Any] = {}

    def call() -> None:
        try:
            box["result"] = func(**params)
        except BaseException as exc:  # the handler's failure is the attempt's, not ours
            box["error"] = f"{type(exc).__name__}: {exc}"
            for line in traceback.format_exc().splitlines():
                sink.write("stderr", line)

    thread = threading.Thread(target=call, daemon=True, name=f"pgsched-task-{getattr(func, '__name__', 'task')}")
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        return Outcome("timed_out", error=f"timed out after {timeout:g}s (the Python call cannot be killed and was abandoned)")
    if "error" in box:
        return Outcome("failed", error=box["error"])
    return Outcome("succeeded", result=box.get("result"))

"""Python handlers in child processes of the worker (``--python-isolation process``, the
default): a pool of children, one per running slot at most, each started once and reused,
running :func:`.python_child.serve`. A timeout or a stop kills the child (its session:
SIGTERM, SIGKILL after ``grace``), whatever the call is doing, a loop in Python or a call
blocked in C; a crash or a memory error ends only that child. A killed or dead child is
replaced by a new one at the next call. No SQL here.

A child serves one tenant only: what a handler leaves in it (module globals, open files,
monkeypatching, threads) is never seen by another tenant's handler. Idle children are
kept per tenant; a call of a tenant with none idle gets a new child, and an idle child of
another tenant is ended meanwhile (in the background), so the children stay as many as
the slots that ran at once.

Children are forked by the worker's zygote (:mod:`.zygote`), a fresh interpreter started
once, never by the worker itself: the worker is multithreaded and holds open psycopg
connections; a forked worker would inherit their sockets, the pool's memory (the login in
it) and every lock another thread held at the fork (logging's, the pool's: a deadlock
waiting to happen in the child). The zygote gets only what it is given: the worker's
environment less every credential variable, standard input from /dev/null, its socket;
each child its two protocol pipes and its output pipes. Not multiprocessing itself: its
messages are pickles, and the worker, which holds the login, would unpickle (run) what
task code sent.

Children die with the worker: the zygote's PR_SET_PDEATHSIG is tied to the one thread of
the pool that starts it, and each child's to the zygote. The guardian (:mod:`.guardian`)
knows them by the worker's token in their environment.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..context import checked
from ..secret_refs import Masker
from . import Outcome, StopSignal
from .child_process import Child, ChildDied, died
from .output import LogSink
from .python import NOT_STARTED
from .zygote import Zygote, ZygoteGone

log = logging.getLogger(__name__)

# How often a running call looks at its stop signal and flushes its log (seconds).
POLL = 0.05
TICK = 0.2


class ProcessPool:
    """The children of one worker. ``env``: their environment (the worker's, less its
    credentials); ``allowed_modules``: the worker's ``--import`` list (imported by each
    child at its start, and the only modules tasks may come from); ``grace``: seconds
    between SIGTERM and SIGKILL; ``memory_limit``: bytes of address space per child
    (RLIMIT_AS), None for none. ``locks(row)``: the execution's lock session."""

    def __init__(
        self,
        env: Mapping[str, str],
        allowed_modules: tuple[str, ...],
        grace: float,
        memory_limit: int | None = None,
    ):
        self.env, self.allowed_modules, self.grace = dict(env), allowed_modules, grace
        self.memory_limit = memory_limit
        self._idle: dict[str | None, list[Child]] = {}  # by the tenant each served
        self._mutex = threading.Lock()
        self._closed = False
        self._zygote: Zygote | None = None
        # the one thread that starts the zygote: its PR_SET_PDEATHSIG is tied to it
        self._starter = concurrent.futures.ThreadPoolExecutor(1, "pgsched-python-start")
        # ends the idle children of another tenant, off the slot that needs a new child
        self._recycler = concurrent.futures.ThreadPoolExecutor(1, "pgsched-python-recycle")

    def start(self) -> None:
        """Start the zygote now, in the background: the first call then waits for no
        import (a fresh interpreter takes about 0.18 s)."""
        self._starter.submit(self._ensure)

    def _ensure(self) -> Zygote:
        """The running zygote, started first if there is none (or it ended). Run only in
        the starter thread, which makes it one at a time."""
        if self._zygote is None or self._zygote.gone:
            if self._zygote is not None:
                self._zygote.close()
            self._zygote = Zygote(
                self.env,
                {
                    "path": sys.path,
                    "parent": os.getpid(),
                    "allowed": self.allowed_modules,
                    "preload": self.allowed_modules,
                    "memory": self.memory_limit,
                },
            )
            self._zygote.start()
        return self._zygote

    def _take(self, tenant: str | None) -> Child:
        """An idle child that served ``tenant`` only, else a new one (an idle child of
        another tenant, if any, is ended instead of kept: never reused across tenants)."""
        with self._mutex:
            mine = self._idle.get(tenant)
            if mine:
                return mine.pop()
            stale = next((idle.pop() for idle in self._idle.values() if idle), None)
        if stale is not None:
            try:
                self._recycler.submit(stale.close, self.grace)
            except RuntimeError:  # the pool is closing
                stale.close(self.grace)
        child = Child(self._starter.submit(self._ensure).result())
        child.tenant = tenant
        return child

    def _give_back(self, child: Child) -> None:
        with self._mutex:
            if not self._closed:
                self._idle.setdefault(child.tenant, []).append(child)
                return
        child.close(self.grace)

    def run(
        self,
        row: dict[str, Any],
        sink: LogSink,
        stop: StopSignal,
        start_by: Callable[[], float | None],
        on_tick: Callable[[], None],
        locks: Any,
        params: dict[str, Any] | None = None,
    ) -> Outcome:
        """One attempt of ``row`` (an ``execution_claim`` row) in a child: its outcome as
        the thread mode's (:mod:`.watchdog`) would be, ``failed`` when stopped (for the
        caller to name); NOT_STARTED when ``start_by()`` (the CLOCK_MONOTONIC instant the
        call may start by) gives None or passed. ``locks``: the execution's
        :class:`~pgsched.worker.execution_locks.ExecutionLocks`, used for the child;
        ``params``: the call's params with its secret references resolved (None: the row's
        own, as stored)."""
        try:
            child = self._take(row.get("tenant"))
        except (ZygoteGone, OSError) as exc:
            sink.close()
            return Outcome("failed", error=f"the handler's process could not start: {exc}")
        keep = False
        _hold(child, sink)
        try:
            if params is not None:
                row = {**row, "params": json.dumps(params)}
            outcome, keep = self._call(child, row, sink, stop, start_by, on_tick, locks)
            return outcome
        finally:
            sink.close()
            if keep:
                child.calls += 1
                self._give_back(child)
            else:
                child.close(self.grace)

    def _call(
        self,
        child: Child,
        row: dict[str, Any],
        sink: LogSink,
        stop: StopSignal,
        start_by: Callable[[], float | None],
        on_tick: Callable[[], None],
        locks: Any,
    ) -> tuple[Outcome, bool]:
        child.drain_output(None)  # what it printed between calls is no attempt's
        timeout = row["timeout_seconds"]
        while True:
            start = start_by()
            if start is None:
                return NOT_STARTED, True
            try:
                child.send(
                    {
                        "call": {
                            "target": row["python_target"],
                            "params": row["params"],
                            "dag": row.get("dag_run_id") is not None,
                            "start_by": start,
                            "execution_id": row["id"],
                            "tenant": row.get("tenant"),
                            "attempt": row.get("attempt"),
                            "scheduled_at": row.get("scheduled_at"),
                            "task": row.get("task_name"),
                        }
                    }
                )
            except OSError:  # BrokenPipe: it died between calls
                return _died(child, sink), False
            deadline = time.monotonic() + timeout if timeout else None
            next_tick = time.monotonic() + TICK
            while True:
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    child.drain_output(sink)
                    sink.write("system", f"timed out after {timeout:g}s: its process is killed")
                    return Outcome(
                        "timed_out", error=f"timed out after {timeout:g}s; its process was killed"
                    ), False
                if stop.is_set():
                    child.drain_output(sink)
                    return Outcome("failed", error="stopped; its process was killed"), False
                if now >= next_tick:
                    with contextlib.suppress(Exception):  # retried at the next tick or the end
                        on_tick()
                    next_tick = now + TICK
                wait = min(POLL, next_tick - now, (deadline - now) if deadline else POLL)
                try:
                    messages = child.wait(wait, sink)
                except ChildDied:
                    return _died(child, sink), False
                for message in messages:
                    if "lock" in message:
                        _serve_lock(child, locks, *message["lock"])
                        continue
                    if _reported(message, sink):
                        continue
                    child.drain_output(sink)
                    if "system" in message:
                        sink.write("system", message["system"])
                    if "not_started" in message:
                        break
                    return _outcome(message)
                else:
                    continue
                break  # not started: prove the lease again, as the thread mode does

    def close(self) -> None:
        """End every idle child (a running one is ended by its slot's stop)."""
        with self._mutex:
            self._closed = True
            idle = [child for children in self._idle.values() for child in children]
            self._idle = {}
        for child in idle:
            child.close(self.grace)
        self._recycler.shutdown(wait=True)
        self._starter.shutdown(wait=True)  # a start under way ends first
        if self._zygote is not None:
            self._zygote.close()


def _hold(child: Child, sink: LogSink) -> None:
    """Mask this call's output (and so its outcome, :mod:`pgsched.worker.executor`) with the
    secrets of every call the child served before as well as its own, and have the child
    remember them all: a thread or a process an earlier call left running prints into this
    call's log, or between calls into the worker's, and may print what it was given then
    (another execution's secret, maybe another tenant's: attack 19,
    tests/e2e/test_attack19_child_reuse.py)."""
    held = child.held
    if isinstance(held, Masker):
        sink.mask = held | sink.mask if isinstance(sink.mask, Masker) else held
    if isinstance(sink.mask, Masker):
        child.held = sink.mask


def _reported(message: dict[str, Any], sink: LogSink) -> bool:
    """A progress report or a log line of the task's context (pgsched.context), kept for
    the attempt's next flush; checked again here (the child runs task code). Whether the
    message was one."""
    if "progress" in message:
        with contextlib.suppress(Exception):  # not a report the handler could have made
            sink.report(*checked(*message["progress"]))
        return True
    if "log" in message:
        sink.write("stderr", str(message["log"]))
        return True
    return False


def _outcome(message: dict[str, Any]) -> tuple[Outcome, bool]:
    took = message.get("took")
    if "result" in message:
        return Outcome("succeeded", result=message["result"], took=took), True
    if "failed" in message:
        return Outcome("failed", error=message["failed"]), True
    error, types = message["error"]
    # a MemoryError may leave the child's heap at its limit: a new child for the next call
    keep = "builtins.MemoryError" not in types and "MemoryError" not in types
    outcome = Outcome("failed", error=error, error_type=types[0], error_types=tuple(types))
    outcome.took = took
    return outcome, keep


def _died(child: Child, sink: LogSink) -> Outcome:
    child.drain_output(sink)
    how = died(child)
    sink.write("system", f"the handler's process died: {how}")
    return Outcome("failed", error=f"the handler's process died: {how}")


def _serve_lock(child: Child, locks: Any, op: str, args: list[Any]) -> None:
    """A lock request of the child's task, made on the execution's session here, in a
    thread of its own (a lock wait must not keep the slot from seeing its timeout)."""

    def serve() -> None:
        from ..errors import PgschedError

        try:
            reply: dict[str, Any] = {"value": getattr(locks, op)(*args)}
        except PgschedError as exc:
            reply = {"raise": [type(exc).__name__, str(exc)]}
        except Exception as exc:
            reply = {"raise": ["PgschedError", f"{type(exc).__name__}: {exc}"]}
        with contextlib.suppress(OSError):  # the child was killed meanwhile
            child.send(reply)

    if op not in ("acquire", "try_acquire", "release", "held"):
        op, args = "held", []
    threading.Thread(target=serve, daemon=True, name="pgsched-python-lock").start()

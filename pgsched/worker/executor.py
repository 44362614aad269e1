"""The executor: a fixed set of slot threads that take buffered executions, run their
handlers (:mod:`pgsched.handlers`) and hand each outcome on, one way, to the recorder.
No SQL here: the start gate is the heartbeat's, every write the recorder's, the fetch of
sealed secrets the resolver's (:mod:`.secret_resolver`).

Python handlers run in a child process of the worker's pool (``python_isolation``
process: :mod:`pgsched.handlers.process_pool`) or in the slot thread itself under one
watchdog thread (``thread``): the task's ``python_isolation`` (migration 0035) when it has
one, else the worker's. Commands run in their own process group. A slot thread hands a final
outcome to the writer without waiting for it; a retry is written by the slot itself, so
twice as many threads as slots run: one blocked on the database wakes another for
buffered work meanwhile.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime

from ..clock import DatabaseClock
from ..db import Row
from ..errors import PgschedError
from ..handlers import Outcome
from ..handlers.command import run_command
from ..handlers.isolation import Isolation
from ..handlers.output import LogSink
from ..handlers.process_pool import ProcessPool
from ..handlers.python import NOT_STARTED, PythonHandler
from ..handlers.run_as import RunAsRefused
from ..handlers.start_gate import StartDeadlinePassed
from ..secret_refs import Masker, SecretUnresolved, secret_variable
from .config import MAX_ENV_PARAMS, PRIVATE_ENV, WorkerConfig
from .execution_locks import ExecutionLocks, bound
from .heartbeat import Heartbeat
from .holdings import NAP, Holdings, Slot
from .outcome import as_ended, handed_back
from .recorder import Recorder
from .secret_resolver import SecretResolver

log = logging.getLogger(__name__)

# The outcome handed on for an execution whose slot was ended before its handler started
# (``slot.reason`` says why).
_NEVER_STARTED = Outcome("failed", error="stopped before it started")

# What opens a secret reference (pgsched/secret_refs.py): text without it has none to resolve.
_REFERENCE = "{{secret:"


class Executor:
    """The slots of one worker. ``poke()`` tells the claimer a slot freed up; ``python``:
    the Python handler, once the worker runs (its watchdog is a thread)."""

    def __init__(
        self,
        config: WorkerConfig,
        holdings: Holdings,
        clock: DatabaseClock,
        heartbeat: Heartbeat,
        recorder: Recorder,
        poke: Callable[[], None],
    ):
        self.config, self.holdings, self.clock = config, holdings, clock
        self.heartbeat, self.recorder, self.poke = heartbeat, recorder, poke
        self.python: PythonHandler | None = None
        #: the children Python handlers run in (``python_isolation`` process), once the
        #: worker runs (every worker has one; a thread worker's starts at its first use);
        #: None: none was given, and a task asking for process isolation fails, saying so
        self.pool: ProcessPool | None = None
        #: the DSN a Python task's locks are taken on (pgsched.locks.for_execution), once
        #: the worker runs; each execution's own, closed when it ends (execution_locks)
        self.lock_dsn: str | None = None
        self._locks: dict[int, ExecutionLocks] = {}
        self._locks_mutex = threading.Lock()
        #: resolves secret references (the worker sets it); None: references stay as written
        self.secrets: SecretResolver | None = None

    def start(self) -> None:
        """Start twice ``concurrency`` slot threads (see the module's docstring)."""
        for i in range(2 * self.config.concurrency):
            threading.Thread(target=self.slot_loop, daemon=True, name=f"pgsched-slot-{i}").start()

    def slot_loop(self) -> None:
        """One slot thread: takes buffered executions while a slot is free, until closing;
        none while the worker may have been declared dead (until a heartbeat tells)."""
        h = self.holdings
        while True:
            with h.ready:
                while not h.closing and not (
                    h.buffer
                    and h.running < self.config.concurrency
                    and not h.may_be_dead()
                    and h.wanted(self.config.python_isolation == "process")
                ):
                    # a heartbeat's answer wakes all (Holdings.confirm_alive); a slot left
                    # asleep beside buffered work looks again soon (a running call may stall)
                    h.ready.wait(NAP if h.buffer else None)
                if h.closing:
                    return
                row = h.buffer.popleft()
                h.starting[row["id"]] = row["lease_id"]
                h.running += 1
                if h.buffer and h.running < self.config.concurrency and h.spread():
                    h.ready.notify()
            self.poke()
            if not self.execute(row):
                return  # its Python call was abandoned: another thread has taken this slot over

    def execute(self, row: Row) -> bool:
        """Run one execution taken off the buffer (counted in ``running``) and hand its
        outcome on; False when the Python call was abandoned (the thread that records it
        carries on as this slot)."""
        h = self.holdings
        sink = LogSink(
            self.config.max_output_lines, self.config.max_output_bytes, now=self.clock.now
        )
        began = time.monotonic()
        started = self.clock.at(began)
        slot = Slot(row["lease_id"])
        with h.lock:
            h.active[row["id"]] = slot
            h.starting.pop(row["id"], None)
            revoked = (row["id"], row["lease_id"]) in h.revoked
            h.revoked.discard((row["id"], row["lease_id"]))
            early = row["id"] in h.early_cancels
            h.early_cancels.discard(row["id"])
        if revoked:
            slot.end("lease_lost")
        elif early or row.get("cancel_requested_at") is not None:
            slot.end("cancel")
        elif h.hard_stop.is_set():
            slot.end("handback")
        elif row.get("confirm_start"):
            confirmed = self.recorder.confirm_start(row)
            if not confirmed:
                slot.end("handback" if confirmed is None else "lease_lost")
        if slot.reason is not None:  # never started
            self._finish(row, sink, slot, started, _NEVER_STARTED)
            return True
        try:
            log.debug(
                "execution %s (%s) attempt %s started", row["id"], row["task_name"], row["attempt"]
            )
            outcome = self._run_handler(row, sink, slot, started)
        except BaseException as exc:  # even SystemExit from an imported module: record it
            log.exception("execution %s: the handler raised out of the worker thread", row["id"])
            outcome = Outcome("failed", error=f"internal error: {type(exc).__name__}: {exc}")
        if outcome is None:
            return False
        if outcome is NOT_STARTED:  # its start could not be proven: slot.reason says why
            self._finish(row, sink, slot, started, _NEVER_STARTED)
            return True
        took = time.monotonic() - began if outcome.took is None else outcome.took
        h.avg_run = took if h.avg_run is None else 0.9 * h.avg_run + 0.1 * took
        self._finish(row, sink, slot, started, outcome)
        return True

    def _resume(
        self, row: Row, sink: LogSink, slot: Slot, started: datetime, outcome: Outcome
    ) -> None:
        """A new thread for an abandoned Python call: records it, then serves as the slot."""
        self._finish(row, sink, slot, started, outcome)
        self.slot_loop()

    def _finish(
        self, row: Row, sink: LogSink, slot: Slot, started: datetime, outcome: Outcome
    ) -> None:
        """The handler is done: release its locks, free its slot and hand the outcome, as
        ended, to the recorder (it stays held, in ``recording``, until written)."""
        h = self.holdings
        with self._locks_mutex:
            locks = self._locks.pop(row["id"], None)
        if locks is not None:  # before the end is recorded: whoever sees it ended may take them
            locks.close()
        with h.lock:
            h.running -= 1
            slot.ended = (
                True  # from now on a heartbeat's lost_ids naming it may be its own write's doing
            )
            if slot.reason != "lease_lost":
                h.recording += 1
        self.poke()
        if slot.reason == "lease_lost":
            log.warning(
                "execution %s attempt %s stopped: this worker no longer holds its lease (declared dead, "
                "or the execution was taken back); nothing recorded here",
                row["id"],
                row["attempt"],
            )
            with h.lock:
                h.forget(row["id"], slot)
            return
        if isinstance(sink.mask, Masker):  # no resolved secret leaves in an error or result
            outcome = sink.mask.outcome(outcome)
        outcome = as_ended(outcome, slot.reason)
        once: list[bool] = []

        def settled() -> None:  # once only, even when a failed recording is recorded again
            with h.lock:
                if once:
                    return
                once.append(True)
                h.recording -= 1
                h.forget(row["id"], slot)
            self.poke()

        self.recorder.end(row, sink, outcome, started, handed_back(slot.reason, outcome), settled)

    def _run_handler(
        self, row: Row, sink: LogSink, slot: Slot, started: datetime
    ) -> Outcome | None:
        kind = row["handler_kind"]
        if kind == "python":
            assert self.python is not None and self.lock_dsn is not None
            params = None
            if self.secrets is not None and _REFERENCE in row["params"]:
                try:
                    resolved = self.secrets.resolve(
                        row["tenant"], None, json.loads(row["params"]), task_id=row["task_id"]
                    )
                except PgschedError as exc:
                    return _unresolved(exc)
                sink.mask, params = resolved.mask, resolved.params
            locks = ExecutionLocks(self.lock_dsn, row["id"], row.get("tenant"))
            with self._locks_mutex:
                self._locks[row["id"]] = locks
            where = row.get("python_isolation") or self.config.python_isolation
            if where == "thread" and self.config.python_memory_limit is not None:
                return _thread_refused(row)
            if where == "process":
                if self.pool is None:
                    return Outcome(
                        "failed",
                        error="python_isolation 'process': this worker has no process pool "
                        "for Python handlers",
                    )
                return self.pool.run(
                    row,
                    sink,
                    slot,
                    lambda: self.heartbeat.start_by(row, slot),
                    on_tick=lambda: self.recorder.flush_logs(row, sink),
                    locks=locks,
                    params=params,
                )
            with bound(locks):
                return self.python.run(
                    row,
                    sink,
                    slot,
                    lambda: self.heartbeat.start_by(row, slot),
                    on_tick=lambda: self.recorder.flush_logs(row, sink),
                    on_abandon=lambda outcome: self._resume(row, sink, slot, started, outcome),
                    params=params,
                )
        if kind == "dag":  # never enqueued (enqueue_v1 refuses it); say so if one appears
            return Outcome(
                "failed",
                error=f"task {row['task_name']!r} is a DAG: it starts DAG runs and is not run",
            )
        return self._run_command(row, sink, slot)

    def _run_command(self, row: Row, sink: LogSink, slot: Slot) -> Outcome | None:
        """A shell or argv command, isolated as the worker was told (``config.isolation``):
        then as its user, in a scratch directory of its own, from an environment of its own.
        A crontab user the worker does not allow fails it for good (never run as another)."""
        try:  # its user, its own limits and network (0032)
            iso = self.config.isolation.for_task(row)
        except RunAsRefused as exc:
            return Outcome("failed", error=str(exc), retryable=False)
        ignored = self.config.isolation.ignored(row)
        if ignored:  # where its writer looks for why a limit did not hold
            sink.write("system", ignored)
        with iso.scratch() if iso.isolated else contextlib.nullcontext() as workdir:
            if workdir is not None:
                env = iso.env(workdir)
            else:
                env = {
                    k: v
                    for k, v in os.environ.items()
                    if k not in PRIVATE_ENV and not secret_variable(k)
                }
            return self._start_command(row, sink, slot, iso, env, workdir)

    def _start_command(
        self,
        row: Row,
        sink: LogSink,
        slot: Slot,
        iso: Isolation,
        env: dict[str, str],
        workdir: str | None,
    ) -> Outcome | None:
        task_env = row["env"] or {}
        if self.secrets is not None and any(_REFERENCE in v for v in task_env.values()):
            try:
                resolved = self.secrets.resolve(row["tenant"], task_env, None)
            except PgschedError as exc:
                return _unresolved(exc)
            sink.mask, task_env = resolved.mask, resolved.env or {}
        env.update(task_env)
        env.update(
            PGSCHED_EXECUTION_ID=str(row["id"]),
            PGSCHED_TASK=row["task_name"],
            PGSCHED_ATTEMPT=str(row["attempt"]),
            PGSCHED_SCHEDULED_AT=row["scheduled_at"].isoformat(),
        )
        params_file = None
        encoded = row["params"]  # JSON text as PostgreSQL wrote it (jsonb: an object)
        if len(encoded.encode("utf-8")) <= MAX_ENV_PARAMS:
            env["PGSCHED_PARAMS"] = encoded
        else:  # Linux refuses to start a program with one variable over 128 KB
            with tempfile.NamedTemporaryFile(
                "w",
                prefix="pgsched-params-",
                suffix=".json",
                delete=False,
                encoding="utf-8",
                dir=workdir,  # an isolated command sees its scratch, not the worker's /tmp
            ) as f:
                iso.give(f.fileno())
                f.write(encoded)
            params_file = env["PGSCHED_PARAMS_FILE"] = f.name
        if row.get("dag_run_id") is not None:
            env["PGSCHED_DAG_RUN_ID"] = str(row["dag_run_id"])
        if row["handler_kind"] == "shell":
            shell = task_env.get("SHELL", "/bin/sh")
            argv = [shell, "-c", row["command"]]
        else:
            argv = list(row["argv"])
        try:
            while True:
                start_by = self.heartbeat.start_by(row, slot)
                if start_by is None:
                    return NOT_STARTED
                try:
                    return run_command(
                        argv,
                        env=env,
                        stdin=row["stdin"],
                        timeout=row["timeout_seconds"],
                        sink=sink,
                        kill_grace=self.config.kill_grace,
                        on_tick=lambda: self.recorder.flush_logs(row, sink),
                        stop=slot,
                        stop_grace=self.config.stop_grace,
                        start_by=start_by,
                        isolation=iso,
                        workdir=workdir,
                    )
                except StartDeadlinePassed:
                    log.info(
                        "execution %s: not started yet: its start deadline passed before the command's "
                        "exec (the worker was frozen or slow); proving its lease again",
                        row["id"],
                    )
        finally:
            if params_file:
                os.unlink(params_file)


def _unresolved(exc: PgschedError) -> Outcome:
    """The outcome of an attempt whose secret references did not resolve: a reference that
    does not (missing, malformed, unreadable, no key) fails it for good, naming the
    reference; the database away fails this attempt only (the next may fetch them)."""
    if isinstance(exc, SecretUnresolved):
        return Outcome("failed", error=str(exc), retryable=False)
    return Outcome("failed", error=f"secrets could not be fetched: {exc}")


def _thread_refused(row: Row) -> Outcome:
    """The attempt of a task asking for the thread mode on a worker that caps its Python
    children's memory: the thread would run in the worker, under no cap, so whoever may
    define a task would choose its way out of the worker operator's limit (attack 20)."""
    return Outcome(
        "failed",
        error=f"python_isolation 'thread': task {row.get('task_name')!r} asks to run in the "
        "worker process, but this worker caps each Python handler's memory "
        "(--python-memory-limit), which a thread would escape; its handler was not run. "
        "Set the task's python_isolation to process or worker "
        "(pgsched task update NAME --python-isolation worker)",
        retryable=False,
    )

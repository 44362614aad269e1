"""The worker process: claims ready executions, runs them, records how they ended.

Wake-ups come from ``LISTEN pgsched_execution`` on a dedicated connection, with a slow
poll as the fallback (a notification is lost when a connection drops). Claims are batched
and sized to the free slots (``execution_claim``: SKIP LOCKED, priority then run_at). Each
attempt ends in one transaction that writes the attempt row and either moves the execution
to history or puts it back in the queue for a retry. One heartbeat per interval per
worker, not per execution.

Every claim carries a lease id; an outcome is stored only while the lease is still held,
so a worker that was declared dead (and whose executions were rescued by the scheduler
leader) can never record over the rescued attempt. Such a worker learns it at its next
heartbeat: it stops what it was running and registers afresh. Cancel requests arrive by
``NOTIFY pgsched_cancel`` (and, should a notification be missed, with the heartbeat).
"""

from __future__ import annotations

import inspect
import json
import logging
import os
import queue
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from . import app as app_module
from .db import Database, Row, Session, connect
from .errors import ConnectionFailed, PgschedError, TransientError
from .retry import backoff_seconds
from .runner import LogSink, Outcome, run_command, run_python, storable_text

log = logging.getLogger(__name__)

# Params larger than this (bytes of JSON) reach a command in a file (PGSCHED_PARAMS_FILE)
# instead of PGSCHED_PARAMS: Linux caps one environment variable at 128 KB (MAX_ARG_STRLEN).
MAX_ENV_PARAMS = 96 * 1024


@dataclass
class WorkerConfig:
    """``queues`` to serve; ``concurrency`` executions at once; ``poll_interval``,
    ``heartbeat_interval`` and ``kill_grace`` (after a timeout's SIGTERM) in seconds;
    ``stop_grace``: the same after a cancel or a hand-back; ``shutdown_timeout``: how long a
    stopping worker lets running executions finish before killing them and handing them
    back to the queue; ``max_output_lines`` / ``max_output_bytes``: output kept per attempt;
    ``record_retry_seconds``: how long the end of an attempt is retried while the database
    is unreachable."""

    queues: list[str] = field(default_factory=lambda: ["default"])
    concurrency: int = 4
    poll_interval: float = 2.0
    heartbeat_interval: float = 5.0
    kill_grace: float = 5.0
    stop_grace: float = 0.5
    shutdown_timeout: float = 30.0
    max_output_lines: int = 10_000
    max_output_bytes: int = 10 * 1024 * 1024
    record_retry_seconds: float = 300.0
    allowed_modules: tuple[str, ...] = ()
    name: str | None = None


# pgsched's own settings are not the task's business (PGSCHED_DSN may carry a password).
PRIVATE_ENV = frozenset({"PGSCHED_DSN", "PGSCHED_HOME", "PGSCHED_TENANT", "PGSCHED_TEST_DSN"})


def _now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass
class _Slot:
    """One running execution: ``stop`` ends it early; ``reason`` says why (``cancel``,
    ``handback`` when the worker stops, ``lease_lost`` when it was declared dead)."""

    stop: threading.Event = field(default_factory=threading.Event)
    reason: str | None = None

    def end(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self.stop.set()


class Worker:
    """One worker: ``run(stop)`` blocks until ``stop`` is set, then drains and returns.

    ``on_finish(row, outcome, tail, final)`` is called after each attempt is recorded, with
    the last lines of its output and the state the execution ended in (None: it will be
    retried); ``pgsched dev`` prints from it.
    """

    def __init__(self, db: Database, config: WorkerConfig,
                 on_finish: Callable[[Row, Outcome, list[str], str | None], None] | None = None):
        self.db = db
        self.config = config
        self.on_finish = on_finish
        self.id: int | None = None
        self.wake = threading.Event()
        self.hard_stop = threading.Event()
        self.urgent = threading.Event()
        self._done = threading.Event()
        self._running = 0
        self._lock = threading.Lock()
        self._active: dict[int, _Slot] = {}
        self._early_cancels: set[int] = set()  # cancels that came before their execution's slot
        self.completer: _Completer | None = None
        self._recording = 0  # executions whose handler is done and whose outcome is being written

    # -- lifecycle ---------------------------------------------------------------------
    def _register(self) -> None:
        cfg = self.config
        host = socket.gethostname()
        row = self.db.one("worker_register", name=cfg.name or f"{host}:{os.getpid()}", hostname=host,
                          pid=os.getpid(), queues=cfg.queues, concurrency=cfg.concurrency,
                          heartbeat_interval=cfg.heartbeat_interval)
        assert row is not None
        self.id = row["id"]

    def run(self, stop: threading.Event) -> None:
        cfg = self.config
        self._register()
        log.info("worker %s started: queues=%s concurrency=%d", self.id, ",".join(cfg.queues), cfg.concurrency)
        helpers = [threading.Thread(target=self._listen, args=(stop,), daemon=True, name="pgsched-listen"),
                   threading.Thread(target=self._heartbeat, args=(stop,), daemon=True, name="pgsched-heartbeat")]
        for t in helpers:
            t.start()
        # twice the slots: threads that record an outcome leave their slot to the next handler
        pool = ThreadPoolExecutor(max_workers=2 * cfg.concurrency, thread_name_prefix="pgsched-exec")
        self.completer = _Completer(self.db, lambda: self.id)
        try:
            while not stop.is_set():
                self.wake.clear()
                claimed = self._claim_and_start(pool)
                if claimed and self._free() > 0:
                    continue  # there may be more ready right now
                deadline = time.monotonic() + cfg.poll_interval
                while not (stop.is_set() or self.wake.is_set()) and time.monotonic() < deadline:
                    self.wake.wait(0.25)
        finally:
            self._drain(pool)
            self.completer.close()
            self._done.set()
            try:
                self.db.exec("worker_stop", id=self.id)
            except PgschedError as exc:
                log.warning("could not mark worker %s stopped: %s", self.id, exc)
            log.info("worker %s stopped", self.id)

    def _drain(self, pool: ThreadPoolExecutor) -> None:
        deadline = time.monotonic() + self.config.shutdown_timeout
        if self._running:
            log.info("worker %s: waiting up to %.0fs for %d running execution(s)", self.id,
                     self.config.shutdown_timeout, self._running)
        while self._running and time.monotonic() < deadline and not self.urgent.is_set():
            time.sleep(0.05)
        if self._running:
            log.warning("worker %s: stopping %d execution(s) still running; they go back to the queue",
                        self.id, self._running)
            self._end_all("handback")
        pool.shutdown(wait=True)

    def stop_now(self) -> None:
        """Second signal: stop waiting for running executions; kill their process groups
        (1 s grace) and hand them back to the queue."""
        self.urgent.set()
        self._end_all("handback")

    def _end_all(self, reason: str) -> None:
        if reason == "handback":
            self.hard_stop.set()
        with self._lock:
            slots = list(self._active.values())
        for slot in slots:
            slot.end(reason)

    def cancel(self, execution_id: int) -> bool:
        """End a running execution of this worker as cancelled (kill its process group);
        False when this worker does not hold it."""
        with self._lock:
            slot = self._active.get(execution_id)
            if slot is None:
                # Perhaps claimed but not started yet: remember it briefly (the claim and
                # the heartbeat also carry the request).
                self._early_cancels.add(execution_id)
                if len(self._early_cancels) > 10_000:
                    self._early_cancels.clear()
                return False
        log.info("execution %s: cancel requested; stopping it", execution_id)
        slot.end("cancel")
        return True

    def _free(self) -> int:
        """Slots free for new executions: ``concurrency`` handlers at once; outcomes being
        recorded take no slot, unless more than ``concurrency`` of them are (the database is
        slow or away): then the worker stops claiming instead of piling work up."""
        with self._lock:
            return self.config.concurrency - self._running - max(0, self._recording - self.config.concurrency)

    # -- background helpers -------------------------------------------------------------
    def _listen(self, stop: threading.Event) -> None:
        backoff = 0.5
        while not stop.is_set():
            try:
                conn = connect(self.db.dsn, application_name="pgsched worker listen")
                with conn:
                    Session(conn).exec("worker_listen")
                    Session(conn).exec("worker_listen_cancel")
                    backoff = 0.5
                    self.wake.set()  # anything enqueued while we were not listening
                    while not stop.is_set():
                        for note in conn.notifies(timeout=1.0, stop_after=1):
                            if note.channel == "pgsched_cancel":
                                self._cancel_payload(note.payload)
                            else:
                                self.wake.set()
            except (psycopg.Error, PgschedError) as exc:
                if stop.is_set():
                    return  # stopping anyway (the embedded server may be going down with us)
                log.warning("worker listener lost its connection (%s); retrying in %.1fs", exc, backoff)
                stop.wait(backoff)
                backoff = min(backoff * 2, 10.0)

    def _heartbeat(self, stop: threading.Event) -> None:
        # Until the worker has drained and stopped (not merely been asked to stop): a
        # draining worker is alive and must not look dead.
        # Its own connection: a pool busy with output flushes must not delay the heartbeat.
        conn: psycopg.Connection[Row] | None = None
        while not self._done.wait(self.config.heartbeat_interval):
            try:
                if conn is None or conn.closed:
                    conn = connect(self.db.dsn, application_name="pgsched worker heartbeat")
                row = Session(conn).one("worker_heartbeat", id=self.id, running=self._running)
            except (psycopg.Error, PgschedError) as exc:
                log.warning("worker %s heartbeat failed: %s", self.id, exc)
                if conn is not None:
                    conn.close()
                conn = None
                continue
            assert row is not None
            if not row["alive"]:
                self._declared_dead()
                continue
            for execution_id in row["cancel_ids"]:
                self.cancel(execution_id)
        if conn is not None:
            conn.close()

    def _cancel_payload(self, payload: str) -> None:
        try:
            self.cancel(int(payload))
        except ValueError:
            log.warning("ignoring a cancel notification with payload %r", payload)

    def _declared_dead(self) -> None:
        """The scheduler leader declared this worker dead (it missed heartbeats) and put
        its executions back in the queue: stop running them (their outcomes would be
        rejected anyway) and carry on under a new registration."""
        with self._lock:
            lost = sorted(self._active)
        log.error("worker %s was declared dead (missed heartbeats); its executions %s were rescued "
                  "elsewhere: stopping them here and registering again", self.id, lost or "(none)")
        self._end_all("lease_lost")
        try:
            self._register()
            log.info("worker registered again as %s", self.id)
        except PgschedError as exc:
            log.warning("worker could not register again yet: %s", exc)

    # -- claiming and running -----------------------------------------------------------
    def _claim_and_start(self, pool: ThreadPoolExecutor) -> int:
        free = self._free()
        if free <= 0:
            return 0
        try:
            rows = self.db.many("execution_claim", queues=self.config.queues, limit=free,
                                worker_id=self.id, now=None)
        except PgschedError as exc:
            log.warning("claim failed: %s", exc)
            return 0
        for row in rows:
            with self._lock:
                self._running += 1
            pool.submit(self._execute, row)
        return len(rows)

    def _execute(self, row: Row) -> None:
        sink = LogSink(self.config.max_output_lines, self.config.max_output_bytes)
        started = _now()
        slot = _Slot()
        with self._lock:
            self._active[row["id"]] = slot
            early = row["id"] in self._early_cancels
            self._early_cancels.discard(row["id"])
        if early or row.get("cancel_requested_at") is not None:
            slot.end("cancel")
        elif self.hard_stop.is_set():
            slot.end("handback")
        recording = False
        try:
            try:
                log.debug("execution %s (%s) attempt %s started", row["id"], row["task_name"], row["attempt"])
                outcome = self._run_handler(row, sink, slot)
            except BaseException as exc:  # even SystemExit from an imported module: record it
                log.exception("execution %s: the handler raised out of the worker thread", row["id"])
                outcome = Outcome("failed", error=f"internal error: {type(exc).__name__}: {exc}")
            if slot.reason == "lease_lost":
                log.warning("execution %s attempt %s stopped: this worker was declared dead and the execution "
                            "was rescued; nothing recorded here", row["id"], row["attempt"])
                return
            if slot.reason == "cancel":
                outcome = Outcome("cancelled", outcome.exit_code, "cancelled on request"
                                  + (f" ({outcome.error})" if outcome.error else ""))
            # The handler is done: its slot takes the next execution while this thread
            # records the outcome (the claim and the write overlap instead of alternating).
            with self._lock:
                self._running -= 1
                self._recording += 1
                recording = True
            self.wake.set()
            self._flush_logs(row, sink, final=True)
            self._record(row, outcome, started, list(sink.tail), handback=slot.reason == "handback")
        except BaseException as exc:
            log.exception("execution %s: recording the outcome failed", row["id"])
            try:  # never leave it 'running': record the failure itself
                self._record(row, Outcome("failed", error=f"internal error recording the outcome: "
                                          f"{type(exc).__name__}: {storable_text(str(exc))[:500]}"),
                             started, [], handback=False)
            except BaseException:
                log.exception("execution %s: recording the failure failed too", row["id"])
        finally:
            with self._lock:
                if recording:
                    self._recording -= 1
                else:
                    self._running -= 1
                self._active.pop(row["id"], None)
            self.wake.set()

    def _run_handler(self, row: Row, sink: LogSink, slot: _Slot) -> Outcome:
        kind = row["handler_kind"]
        params = row["params"] or {}
        if kind == "python":
            try:
                func = app_module.resolve(row["python_target"], self.config.allowed_modules)
            except PgschedError as exc:
                return Outcome("failed", error=str(exc))
            if "upstream" in params and row.get("dag_run_id") is not None and not _takes(func, "upstream"):
                params = {k: v for k, v in params.items() if k != "upstream"}
            return run_python(func, params, timeout=row["timeout_seconds"], sink=sink, stop=slot.stop,
                              on_tick=lambda: self._flush_logs(row, sink), grace=self.config.stop_grace)
        if kind == "dag":  # never enqueued (enqueue_v1 refuses it); say so if one appears
            return Outcome("failed", error=f"task {row['task_name']!r} is a DAG: it starts DAG runs and is not run")
        env = {k: v for k, v in os.environ.items() if k not in PRIVATE_ENV}
        env.update(row["env"] or {})
        env.update(PGSCHED_EXECUTION_ID=str(row["id"]), PGSCHED_TASK=row["task_name"],
                   PGSCHED_ATTEMPT=str(row["attempt"]), PGSCHED_SCHEDULED_AT=row["scheduled_at"].isoformat())
        params_file = None
        encoded = json.dumps(params)
        if len(encoded.encode("utf-8")) <= MAX_ENV_PARAMS:
            env["PGSCHED_PARAMS"] = encoded
        else:  # Linux refuses to start a program with one variable over 128 KB
            with tempfile.NamedTemporaryFile("w", prefix="pgsched-params-", suffix=".json", delete=False,
                                             encoding="utf-8") as f:
                f.write(encoded)
            params_file = env["PGSCHED_PARAMS_FILE"] = f.name
        if row.get("dag_run_id") is not None:
            env["PGSCHED_DAG_RUN_ID"] = str(row["dag_run_id"])
        if kind == "shell":
            shell = (row["env"] or {}).get("SHELL", "/bin/sh")
            argv = [shell, "-c", row["command"]]
        else:
            argv = list(row["argv"])
        try:
            return run_command(argv, env=env, stdin=row["stdin"], timeout=row["timeout_seconds"], sink=sink,
                               kill_grace=self.config.kill_grace, on_tick=lambda: self._flush_logs(row, sink),
                               stop=slot.stop, stop_grace=self.config.stop_grace)
        finally:
            if params_file:
                os.unlink(params_file)

    def _flush_logs(self, row: Row, sink: LogSink, final: bool = False) -> None:
        """Store collected output, at most 1,000 lines per statement. Lines that cannot be
        stored now are kept for the next flush; the final flush retries like the outcome."""
        give_up = time.monotonic() + (self.config.record_retry_seconds if final else 0)
        delay = 0.5
        while lines := sink.drain(1000):
            seq, stream, logged_at, text = (list(c) for c in zip(*lines, strict=True))
            try:
                self.db.exec("execution_log_insert", id=row["id"], attempt=row["attempt"], tenant=row["tenant"],
                             seq=seq, stream=stream, logged_at=logged_at, line=text)
            except (ConnectionFailed, TransientError) as exc:
                sink.requeue(lines)
                if time.monotonic() >= give_up or self.urgent.is_set():
                    if final:
                        log.warning("execution %s: %d log line(s) not stored: %s", row["id"], len(lines), exc)
                    return
                time.sleep(delay)
                delay = min(delay * 2, 10.0)
            except PgschedError as exc:
                log.warning("execution %s: %d log line(s) not stored: %s", row["id"], len(lines), exc)

    def _record(self, row: Row, outcome: Outcome, started: datetime, tail: list[str], handback: bool) -> None:
        """Record the attempt's end, retrying for ``record_retry_seconds`` while the database
        is unreachable (a blip must not leave the execution 'running')."""
        finished = _now()
        stopped = handback and outcome.state == "failed"
        outcome = _storable(outcome)
        give_up = time.monotonic() + self.config.record_retry_seconds
        delay = 0.5
        fell_back = False
        while True:
            try:
                final, retry_at, budget = self._store_outcome(row, outcome, finished, stopped, started)
                break
            except _ClaimLost:
                log.error("execution %s attempt %s: outcome %s rejected: lease %s is no longer held by worker %s "
                          "(declared dead; the execution was rescued)", row["id"], row["attempt"], outcome.state,
                          row["lease_id"], self.id)
                return
            except (ConnectionFailed, TransientError) as exc:
                if time.monotonic() >= give_up:
                    log.error("execution %s: gave up recording outcome %s after %.0fs: %s", row["id"],
                              outcome.state, self.config.record_retry_seconds, exc)
                    return
                log.warning("execution %s: could not record %s yet (%s); retrying in %.1fs",
                            row["id"], outcome.state, exc, delay)
                time.sleep(delay)
                delay = min(delay * 2, 10.0)
            except PgschedError as exc:
                if fell_back:
                    log.error("execution %s: could not record outcome %s: %s", row["id"], outcome.state, exc)
                    return
                fell_back = True
                # The database refused a value of the outcome: record the failure instead, so
                # the execution never stays 'running'.
                log.error("execution %s: outcome %s refused by the database (%s); recording it as failed",
                          row["id"], outcome.state, exc)
                outcome = Outcome("failed", outcome.exit_code, f"outcome not storable: {exc}")
        level = logging.INFO if outcome.state == "succeeded" else logging.WARNING
        what = "handed back" if stopped else outcome.state + (" (dead-letter queue)" if final == "dead" else "")
        log.log(level, "execution %s %s attempt %s/%s %s in %.2fs%s%s%s", row["id"], row["task_name"], row["attempt"],
                row["max_attempts"], what, (finished - started).total_seconds(),
                f": {outcome.error}" if outcome.error else "",
                f"; next attempt at {retry_at:%H:%M:%S}" if retry_at else "",
                f" (delayed {budget:.0f}s by the retry budget)" if budget else "")
        if self.on_finish:
            self.on_finish(row, outcome, tail, final)

    def _final_state(self, row: Row, outcome: Outcome, stopped: bool) -> str | None:
        """None to retry, else the state the execution ends in: the outcome's own for
        success and cancel; ``dead`` (the dead-letter queue) for a failure that is not
        retried, because its attempts are used up or the task marks it not retryable."""
        if stopped:
            return None
        if outcome.state in ("succeeded", "cancelled"):
            return outcome.state
        if outcome.exit_code is not None and outcome.exit_code in (row["no_retry_exit_codes"] or ()):
            return "dead"
        if set(outcome.error_types) & set(row["no_retry_exceptions"] or ()) or any(
                t.rsplit(".", 1)[-1] in (row["no_retry_exceptions"] or ()) for t in outcome.error_types):
            return "dead"
        return None if row["attempt"] < row["max_attempts"] else "dead"

    def _store_outcome(self, row: Row, outcome: Outcome, finished: datetime, stopped: bool,
                       started: datetime) -> tuple[str | None, datetime | None, float | None]:
        """One transaction: the attempt row, then the move to history or back to the queue.
        Returns (final state or None, when the next attempt may run, the retry budget's
        delay in seconds). A handed-back execution (``stopped``) gets its lost attempt back
        and is not subject to the budget. Raises _ClaimLost when this worker no longer holds
        the lease."""
        final = self._final_state(row, outcome, stopped)
        retry_at = budget = None
        lease = dict(id=row["id"], lease_id=row["lease_id"])
        if final is not None and self.completer is not None:
            moved = self.completer.finish(dict(
                id=row["id"], lease_id=row["lease_id"], state=final, finished_at=finished,
                exit_code=outcome.exit_code, error=outcome.error,
                result=Jsonb(outcome.result) if outcome.result is not None else None,
                attempt_state=outcome.state, started_at=row["started_at"] or started,
                error_type=outcome.error_type))
            if not moved:
                raise _ClaimLost()
            return final, None, None
        with self.db.transaction() as tx:
            if final is None:
                asked = tx.one("execution_cancel_requested", **lease)
                if asked is not None and asked["requested"]:
                    final = "cancelled"  # asked while this attempt ended: never start another
            if final is None:
                proposed = finished
                if not stopped:
                    proposed += timedelta(seconds=backoff_seconds(
                        row["retry_policy"], row["attempt"], row["retry_base_seconds"], row["retry_max_seconds"]))
                    slot = tx.one("execution_retry_slot", proposed=proposed)
                    assert slot is not None
                    retry_at = slot["run_at"]
                    budget = (retry_at - proposed).total_seconds() or None
                else:
                    retry_at = proposed
            tx.exec("execution_attempt_insert", tenant=row["tenant"], state="lost" if stopped else outcome.state,
                    started_at=row["started_at"] or started, finished_at=finished, worker_id=self.id,
                    attempt=row["attempt"], exit_code=outcome.exit_code, error=outcome.error,
                    error_type=outcome.error_type, next_run_at=retry_at, budget_delay_seconds=budget, **lease)
            # The move comes last, right before COMMIT: a DAG node's finish locks its run
            # (settling downstream) and should hold that lock for no round trip more. When
            # the lease is no longer held, nothing is written at all: the exception rolls
            # back the attempt row too (the rescue has already written it as 'lost').
            if final is None:
                done = tx.exec("execution_retry", run_at=retry_at, extra_attempts=1 if stopped else 0,
                               budget_delay_seconds=budget, **lease)
            else:
                done = tx.exec("execution_finish", state=final, finished_at=finished,
                               exit_code=outcome.exit_code, error=outcome.error,
                               result=Jsonb(outcome.result) if outcome.result is not None else None, **lease)
            if not done:
                raise _ClaimLost()
        return final, retry_at, budget


class _Completer:
    """Group commit of final outcomes. Threads that end an execution for good hand their
    outcome here and wait; one thread writes everything handed in meanwhile (up to
    ``max_batch``) in one transaction of one statement (``execution_finish_many``), so a
    busy worker pays one round trip and one WAL flush for many executions instead of each.
    An idle worker's outcome is written at once: no batching delay.

    A batch the database refuses is split and each outcome tried alone, so one bad value
    fails only its own execution."""

    def __init__(self, db: Database, worker_id: Callable[[], int | None], max_batch: int = 500):
        self.db, self.worker_id, self.max_batch = db, worker_id, max_batch  # the id changes on re-registering
        self.queue: queue.SimpleQueue[tuple[dict[str, Any], Future[bool]] | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, daemon=True, name="pgsched-complete")
        self.thread.start()

    def finish(self, item: dict[str, Any]) -> bool:
        """Write one final outcome (``item``: the columns of ``execution_finish_many``, one
        value each); True when moved, False when the lease was lost. Raises what writing it
        raised (ConnectionFailed, TransientError, PgschedError)."""
        done: Future[bool] = Future()
        self.queue.put((item, done))
        return done.result()

    def close(self) -> None:
        self.queue.put(None)
        self.thread.join(10)

    def _loop(self) -> None:
        while True:
            first = self.queue.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < self.max_batch:
                try:
                    nxt = self.queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self.queue.put(None)  # stop after this batch
                    break
                batch.append(nxt)
            self._write(batch)

    def _write(self, batch: list[tuple[dict[str, Any], Future[bool]]]) -> None:
        try:
            with self.db.transaction() as tx:
                rows = tx.many("execution_finish_many", worker_id=self.worker_id(),
                               **{k: [item[k] for item, _ in batch] for k in batch[0][0]})
        except (ConnectionFailed, TransientError) as exc:
            for _, done in batch:
                done.set_exception(exc)
            return
        except PgschedError as exc:
            if len(batch) == 1:
                batch[0][1].set_exception(exc)
                return
            for one in batch:  # find the outcome the database refuses: each alone
                self._write([one])
            return
        except BaseException as exc:  # never leave a waiting thread hanging
            for _, done in batch:
                done.set_exception(exc)
            return
        moved = {r["id"] for r in rows}
        for item, done in batch:
            done.set_result(item["id"] in moved)


def _takes(func: Any, name: str) -> bool:
    """Whether ``func`` accepts a keyword argument ``name`` (by name or ``**kwargs``). A DAG
    node's function gets ``upstream`` (its upstream nodes' results) only if it takes it."""
    try:
        parameters = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _storable(outcome: Outcome) -> Outcome:
    """The outcome with what PostgreSQL cannot store removed or turned into a failure: NUL
    characters in the error text; a result that is not strict JSON (NaN, infinities,
    objects json cannot encode) or holds a NUL character."""
    error = storable_text(outcome.error) if outcome.error else outcome.error
    if outcome.result is not None:
        try:
            text = json.dumps(outcome.result, allow_nan=False)
        except (TypeError, ValueError) as exc:
            return Outcome("failed", outcome.exit_code, f"result is not JSON ({exc}): {outcome.result!r:.200}")
        if "\\u0000" in text:
            return Outcome("failed", outcome.exit_code, "result contains a NUL character, which PostgreSQL refuses")
    return Outcome(outcome.state, outcome.exit_code, error, outcome.result, outcome.error_type, outcome.error_types)


class _ClaimLost(Exception):
    """The execution was taken from this worker (rescued) before it finished."""


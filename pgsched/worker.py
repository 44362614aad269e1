"""The worker process: claims ready executions, runs them, records how they ended.

One claimer thread owns a dedicated connection that LISTENs (``pgsched_execution``,
``pgsched_cancel``) and claims: a notification is answered by a claim on that same
connection, with no hop to another thread; a slow poll is the fallback (a notification is
lost when a connection drops). Work due later (a retry's backoff, a run enqueued for later)
wakes it when due, by the database's clock (:mod:`pgsched.due`). Claims
(``execution_claim``: SKIP LOCKED, priority then run_at, each queue read from its own
front) fill a small local buffer sized to the free slots plus a prefetch, so a slot that
ends an execution takes the next one without waiting for a claim round trip. The prefetch
grows only while handlers are short (a buffered execution waits about
``PREFETCH_HORIZON`` seconds for its slot, on average) and is capped by
``WorkerConfig.prefetch``.

A buffered execution is claimed like a running one (state running, this worker's id, a
lease): when the worker dies, the leader's rescue puts it back in the queue. On a clean
stop the buffer is handed back at once (``execution_unclaim``: no attempt used, none
recorded). Its timeout, and its recorded start, count from when a slot starts it. The
start is written to the database only when the claim asks (``confirm_start``: a rescue
could not tell whether an earlier claim had started it), so that the next rescue charges
a lost attempt only to an execution that ran (migration 0008).

A fixed set of slot threads runs the executions; Python handlers are called in the slot
thread itself under one watchdog thread (timeouts, cancels), commands in their own process
group. Final outcomes go to one writer thread (group commit, :mod:`pgsched.completer`)
without the slot waiting for it; a retry is written by the slot in one transaction. One
heartbeat per interval per worker, not per execution.

Every claim carries a lease id; an outcome is stored only while the lease is still held,
so a worker that was declared dead (and whose executions were rescued by the scheduler
leader) can never record over the rescued attempt. Such a worker learns it at its next
heartbeat: it stops what it was running, drops its buffer and registers afresh. Cancel
requests arrive by ``NOTIFY pgsched_cancel`` (and, should a notification be missed, with
the heartbeat).

Connections that go silent (a proxy that stops forwarding, a half-open socket) must not
block the worker: the claimer's and the heartbeat's statements have deadlines
(:mod:`pgsched.deadline`; the heartbeat's at most one interval, so that a new connection
beats before the lease lapses), and the claimer's are cut when the worker stops. The
heartbeat also watches that the claimer goes round its loop (:mod:`pgsched.liveness`): a
claimer stalled past its limit is logged, reported in the worker row and its connection
cut; still stalled one limit later, the worker exits with EXIT_CLAIMER_STALLED for its
supervisor to start it again.

A start is proven last (issue 15, item 2): right before a command's exec (in the child,
between fork and exec) or a Python handler's first line, the worker must be able to show
a heartbeat the database confirmed at most HEARTBEAT_STALE intervals ago; when it cannot
(it was frozen, or waited long on the database), one statement proves the lease and
renews the heartbeat first (``worker_start_proof``). A woken worker therefore never starts
what was rescued from it meanwhile.

Lost replies (issue 15, item 1): a statement may commit although its reply never arrives
(the server went away in between). After the claimer reconnects, the worker hands back
what the database gives it but it does not know (``execution_held``: a claim whose reply
was lost). Each heartbeat reports what it holds and returns what the database no longer
gives it (``lost_ids``): those are stopped, dropped from the buffer, or not started. An
outcome write that lost its connection and then finds its lease gone first looks for its
own earlier try's attempt row before calling the lease lost.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import select
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from . import app as app_module
from .claims import TaskDefinitions, give_back
from .clock import ClockProbe, DatabaseClock
from .completer import Completer
from .db import CONNECT_TIMEOUT, Database, Row, Session, connect, has_nul
from .deadline import STATEMENT_DEADLINE, Deadline
from .due import NextDue
from .errors import ConnectionFailed, ConnectionSilent, PgschedError, TransientError
from .guardian import Guardian
from .handlers import Outcome
from .handlers.command import StartDeadlinePassed, run_command
from .handlers.output import LogSink, storable_text
from .handlers.python import NOT_STARTED as _NOT_STARTED
from .handlers.python import guarded as _guarded
from .handlers.python import takes as _takes
from .handlers.watchdog import Watchdog
from .liveness import BACK, GIVE_UP, STALLED, Liveness
from .retry import backoff_seconds

_Completer = Completer  # its former name here

log = logging.getLogger(__name__)

# Params larger than this (bytes of JSON) reach a command in a file (PGSCHED_PARAMS_FILE)
# instead of PGSCHED_PARAMS: Linux caps one environment variable at 128 KB (MAX_ARG_STRLEN).
MAX_ENV_PARAMS = 96 * 1024

# Prefetch (executions claimed beyond the free slots) is at most what the slots get through
# in this many seconds, judged from the recent handler durations: enough to cover a claim
# round trip or ten, never long tasks piling up in one worker while another is idle.
PREFETCH_HORIZON = 0.05

# Another slot thread is woken for buffered executions only while they would wait longer
# than this (seconds of handler time per running slot): waking a thread costs more than a
# no-op handler, so very short handlers are run back to back by the threads already awake.
SPREAD_SECONDS = 0.005

# Outcomes waiting for the writer beyond this many take slots away from claims (the
# database is slow or away: stop claiming instead of piling work up).
RECORD_BACKLOG = 256

# A slot starts no buffered execution while the last heartbeat the database answered
# "alive" was sent more than this many heartbeat intervals ago (the leader declares a worker
# dead after worker_dead_after_heartbeats, 3 by default): the worker may have been declared
# dead meanwhile (stopped by SIGSTOP, a long pause, the database away) and its buffer
# rescued, so starting one would run it beside its rescued copy. Slots wait for the next
# heartbeat to tell.
HEARTBEAT_STALE = 2.0

# The exit status of a worker whose claimer stayed stalled after its connection was cut
# (sysexits' EX_SOFTWARE): its supervisor starts it again, the leader rescues its executions.
EXIT_CLAIMER_STALLED = 70

# Successes logged at INFO per second at most; the rest are counted into the next line.
SUCCESS_LINES_PER_SECOND = 20


@dataclass
class WorkerConfig:
    """``queues`` to serve; ``concurrency`` executions at once; ``poll_interval``,
    ``heartbeat_interval`` and ``kill_grace`` (after a timeout's SIGTERM) in seconds;
    ``stop_grace``: the same after a cancel or a hand-back; ``shutdown_timeout``: how long a
    stopping worker lets running executions finish before killing them and handing them
    back to the queue; ``max_output_lines`` / ``max_output_bytes``: output kept per attempt;
    ``record_retry_seconds``: how long the end of an attempt is retried while the database
    is unreachable; ``prefetch``: executions claimed at most ahead of the free slots (0:
    claim only for free slots); ``statement_deadline``: seconds a statement of the claimer
    (and of the heartbeat, at most one interval) may go without a reply before its
    connection is cut and opened again (0: none; the claimer's are still cut when the worker
    stops, and its liveness still watched)."""

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
    prefetch: int = 100
    statement_deadline: float = STATEMENT_DEADLINE

    def claimer_limit(self) -> float:
        """Seconds the claimer may go without a turn of its loop before the heartbeat
        finds it stalled: 3 polls, plus the longest one step may take (a statement up to
        its deadline, or a connection attempt up to CONNECT_TIMEOUT)."""
        return 3 * self.poll_interval + max(self.statement_deadline, CONNECT_TIMEOUT)


# pgsched's own settings are not the task's business (PGSCHED_DSN may carry a password).
PRIVATE_ENV = frozenset({"PGSCHED_DSN", "PGSCHED_HOME", "PGSCHED_TENANT", "PGSCHED_TEST_DSN"})


def _start_order(row: Row) -> tuple[int, datetime, int]:
    return row["priority"], row["run_at"], row["id"]


def _buffer_in_order(buffer: collections.deque[Row], rows: list[Row]) -> None:
    """Add claimed ``rows`` (in start order, as execution_claim returns them) to ``buffer``
    so that slots take the highest priority first, as the queue would have given them: a
    later claim may bring executions that go before some already buffered (an execution of
    priority 1 enqueued behind a buffer of priority-9 ones). Kept sorted; the buffer holds
    at most free slots plus the prefetch, so a sort is cheap."""
    if buffer and _start_order(rows[0]) < _start_order(buffer[-1]):
        ordered = sorted([*buffer, *rows], key=_start_order)
        buffer.clear()
        buffer.extend(ordered)
    else:
        buffer.extend(rows)


class _Slot:
    """One running execution: :meth:`end` stops it early (the handler sees ``is_set()``);
    ``reason`` says why (``cancel``, ``handback`` when the worker stops, ``lease_lost`` when
    the database no longer gives it this worker: declared dead, or taken back). ``lease_id``
    is its claim's; ``ended``: its handler is done and its outcome is being written (a
    heartbeat's ``lost_ids`` then names it because its own write moved it). No Event per
    execution: creating one showed in the profile."""

    __slots__ = ("reason", "lease_id", "ended")

    def __init__(self, lease_id: int) -> None:
        self.reason: str | None = None
        self.lease_id = lease_id
        self.ended = False

    def end(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason

    def is_set(self) -> bool:
        return self.reason is not None


class Worker:
    """One worker: ``run(stop)`` blocks until ``stop`` is set, then drains and returns.

    ``on_finish(row, outcome, tail, final)`` is called after each attempt is recorded, with
    the last lines of its output and the state the execution ended in (None: it will be
    retried); ``pgsched dev`` prints from it. It may be called from the writer thread.
    """

    def __init__(self, db: Database, config: WorkerConfig,
                 on_finish: Callable[[Row, Outcome, list[str], str | None], None] | None = None):
        self.db = db
        self.config = config
        self.on_finish = on_finish
        self.id: int | None = None
        self.hard_stop = threading.Event()
        self.urgent = threading.Event()
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)  # a buffered execution and a free slot
        self._buffer: collections.deque[Row] = collections.deque()  # claimed, not started
        self._unclaiming: list[Row] = []  # taken off the buffer to hand back; not handed back yet
        self._closing = False  # slots take nothing more from the buffer
        self._running = 0  # executions whose handler runs
        self._recording = 0  # executions whose handler is done and whose outcome is being written
        self._active: dict[int, _Slot] = {}
        self._starting: dict[int, int] = {}  # id -> lease: taken off the buffer by a slot, not in _active yet
        self._revoked: set[tuple[int, int]] = set()  # (id, lease) of _starting that the database no longer gives us
        self._early_cancels: set[int] = set()  # cancels that came before their execution's slot
        self._maybe_more = True  # the queue may hold ready executions: the last claim was full, or a notification
        self._avg_run: float | None = None  # recent handler duration (s), for the prefetch
        self._alive_at = time.monotonic()  # when the last heartbeat (or registration) confirmed by the database was sent
        self._wake_r, self._wake_w = os.pipe()  # tells the claimer a slot freed up
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._poked = False
        self._successes = _SuccessLog()
        self._functions: dict[str, Callable[..., Any]] = {}  # python_target -> function, once resolved
        self.completer: Completer | None = None
        self.watchdog: Watchdog | None = None
        # Instants this worker records (when a slot started an execution, when it ended,
        # its output lines) are the database's, never this host's clock (DESIGN "Time").
        self.clock = DatabaseClock()
        self._claimer = Liveness(config.claimer_limit())  # the heartbeat watches it
        self._claim_deadline: Deadline | None = None
        self._stall_reported: float | None = None  # what the worker row says (None: not stalled)

    # -- lifecycle ---------------------------------------------------------------------
    def _register(self) -> None:
        cfg = self.config
        host = socket.gethostname()
        sent = time.monotonic()
        probe = ClockProbe()  # its round trip is unknown yet: the offset is within one
        row = self.db.one("worker_register", name=cfg.name or f"{host}:{os.getpid()}", hostname=host,
                          pid=os.getpid(), queues=cfg.queues, concurrency=cfg.concurrency,
                          heartbeat_interval=cfg.heartbeat_interval, **probe.send())
        assert row is not None
        self.id = row["id"]
        self.clock.read(row["now"], sent, time.monotonic())
        self._confirm_alive(sent)

    def _confirm_alive(self, sent: float) -> None:
        """The database confirmed this registration alive by a statement sent at ``sent``
        (monotonic seconds): slots may start buffered executions again."""
        with self._ready:
            self._alive_at = max(self._alive_at, sent)
            self._ready.notify_all()

    def _may_be_dead(self) -> bool:
        """Whether the leader may have declared this worker dead since its last confirmed
        heartbeat (HEARTBEAT_STALE); under ``_lock``."""
        return time.monotonic() - self._alive_at > HEARTBEAT_STALE * self.config.heartbeat_interval

    def run(self, stop: threading.Event) -> None:
        cfg = self.config
        self._register()
        log.info("worker %s started: queues=%s concurrency=%d", self.id, ",".join(cfg.queues), cfg.concurrency)
        guard = _start_guardian(self.id)
        self.completer = Completer(self.db, lambda: self.id, retry_seconds=cfg.record_retry_seconds)
        self.watchdog = Watchdog()
        threading.Thread(target=self._heartbeat, args=(stop,), daemon=True, name="pgsched-heartbeat").start()
        # twice the slots: a thread that blocks on the database (a retry, a last log flush)
        # wakes another for buffered work meanwhile (final outcomes go to the writer, no wait)
        for i in range(2 * cfg.concurrency):
            threading.Thread(target=self._slot_loop, daemon=True, name=f"pgsched-slot-{i}").start()
        try:
            self._claim_loop(stop)
        finally:
            self._hand_back_buffer()
            self._drain()
            if guard is not None:  # what the commands left running goes too
                guard.stop(cfg.stop_grace)
            self.completer.close(cfg.record_retry_seconds + 10)
            self._done.set()
            try:
                self.db.exec("worker_stop", id=self.id)
            except PgschedError as exc:
                log.warning("could not mark worker %s stopped: %s", self.id, exc)
            with self._lock:
                self._poked = True  # no more pokes: the pipe's descriptors may be reused once closed
                os.close(self._wake_r)
                os.close(self._wake_w)
            log.info("worker %s stopped", self.id)

    def _drain(self) -> None:
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
        while self._running or self._recording:  # ended, they record (a retry after a database blip)
            time.sleep(0.02)

    def stop_now(self) -> None:
        """Second signal: stop waiting for running executions; kill their process groups
        (1 s grace) and hand them back to the queue."""
        self.urgent.set()
        if self.completer is not None:
            self.completer.stopping.set()
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
                # Perhaps claimed but not started yet (in the buffer): remember it briefly
                # (the claim and the heartbeat also carry the request).
                self._early_cancels.add(execution_id)
                if len(self._early_cancels) > 10_000:
                    self._early_cancels.clear()
                return False
        log.info("execution %s: cancel requested; stopping it", execution_id)
        slot.end("cancel")
        return True

    # -- claiming ----------------------------------------------------------------------
    def _prefetch(self) -> int:
        avg = self._avg_run
        if avg is None or not self.config.prefetch:
            return 0
        return min(self.config.prefetch, int(self.config.concurrency * PREFETCH_HORIZON / max(avg, 1e-6)))

    def _claim_size(self) -> int:
        """How many to claim now (0: not now); under ``_lock``. Free slots are
        ``concurrency`` less running handlers, less outcomes waiting for the writer beyond
        RECORD_BACKLOG. A claim fills the free slots and the prefetch; it is sent when a slot would
        otherwise wait, or when half the prefetch is gone (fewer, larger claims)."""
        cfg = self.config
        free = cfg.concurrency - self._running - max(0, self._recording - max(RECORD_BACKLOG, cfg.concurrency))
        extra = self._prefetch()
        want = free + extra - len(self._buffer)
        if want <= 0 or (len(self._buffer) >= free and 2 * want < extra):
            return 0
        return want

    def _excess(self) -> list[Row]:
        """Buffered executions to hand back now, taken off the buffer's end (the last
        claimed); under ``_lock``. The prefetch shrinks when handlers turn out slower than
        those it was sized on (a run of short tasks, then long ones): what was claimed ahead
        then waits long here while another worker may be idle. Handed back once the buffer
        holds more than twice the free slots and prefetch, plus ``concurrency`` (no churn
        while the estimate wavers)."""
        cfg = self.config
        free = max(0, cfg.concurrency - self._running)
        keep = 2 * (free + self._prefetch()) + cfg.concurrency
        if self._closing or len(self._buffer) <= keep:
            return []
        return [self._buffer.pop() for _ in range(len(self._buffer) - keep)]

    def _free(self) -> int:
        with self._lock:
            return self._claim_size()

    def _poke(self) -> None:
        """Wake the claimer if it should claim now (a slot freed up, the queue may hold more)."""
        with self._lock:
            if self._poked or not self._maybe_more or self._claim_size() <= 0:
                return
            self._poked = True
            try:  # under the lock: never after run() closed the pipe
                os.write(self._wake_w, b"x")
            except (BlockingIOError, OSError):
                pass

    def _notified(self, channel: str, payload: str) -> None:
        if channel == "pgsched_cancel":
            try:
                self.cancel(int(payload))
            except ValueError:
                log.warning("ignoring a cancel notification with payload %r", payload)
        else:
            self._maybe_more = True

    def _claim_loop(self, stop: threading.Event) -> None:
        """Until ``stop``: LISTEN and claim on one dedicated connection; reconnects with
        backoff when it breaks."""
        backoff = 0.5
        # No deadline (0) still cuts a stopping worker's statement and lets the heartbeat cut a stalled one.
        deadline = self._claim_deadline = Deadline(self.config.statement_deadline or float("inf"), name="claim",
                                                   stop=stop)
        try:
            while not stop.is_set():
                self._claimer.went_round()
                try:
                    conn = connect(self.db.dsn, application_name="pgsched worker listen", deadline=deadline)
                    with conn:
                        conn.add_notify_handler(lambda n: self._notified(n.channel, n.payload))
                        Session(conn, deadline).exec("worker_listen")
                        Session(conn, deadline).exec("worker_listen_cancel")
                        backoff = 0.5
                        self._maybe_more = True  # anything enqueued while we were not listening
                        self._reconcile(Session(conn, deadline))
                        self._serve(conn, stop)
                except (psycopg.Error, PgschedError) as exc:
                    if stop.is_set():
                        return  # stopping anyway (the embedded server may be going down with us)
                    log.warning("worker listener lost its connection (%s); retrying in %.1fs", exc, backoff)
                    self._claimer.went_round()  # the wait is a turn, not a stall
                    stop.wait(backoff)
                    backoff = min(backoff * 2, 10.0)
        finally:
            self._claimer.retire()  # stopped on purpose: the drain that follows is no stall

    def _serve(self, conn: psycopg.Connection[Row], stop: threading.Event) -> None:
        session = Session(conn, self._claim_deadline)
        tasks = TaskDefinitions()
        next_poll = 0.0
        due = NextDue(self.config.poll_interval)
        while not stop.is_set():
            self._claimer.went_round()
            conn.pgconn.consume_input()  # notifications already received: handled now
            while note := conn.pgconn.notifies():
                self._notified(note.relname.decode(), note.extra.decode())
            now = time.monotonic()
            if now >= next_poll:
                self._maybe_more, next_poll = True, now + self.config.poll_interval
            if due.passed(now):
                self._maybe_more = True
            with self._lock:
                want = self._claim_size() if self._maybe_more else 0
                excess = self._excess()
            if excess or self._unclaiming:
                self._unclaim(session, excess)
            if want > 0:
                self._maybe_more = False  # a notification during the claim sets it again
                try:
                    sent = time.monotonic()
                    me = self.id  # the registration that claims (the heartbeat registers anew when declared dead)
                    rows = tasks.claim(session, queues=self.config.queues, limit=want, worker_id=me)
                except ConnectionFailed:
                    raise
                except PgschedError as exc:
                    log.warning("claim failed: %s", exc)
                    stop.wait(min(self.config.poll_interval, 1.0))
                    continue
                if len(rows) == want:
                    self._maybe_more = True  # there may be more ready right now
                for row in rows:
                    row["claimed_by"] = me  # a fresh heartbeat of a later registration proves nothing of it
                if rows:
                    self.clock.read(rows[0]["started_at"], sent, time.monotonic())  # the claim's now()
                    due.claimed()
                    with self._ready:
                        _buffer_in_order(self._buffer, rows)
                        self._ready.notify()  # who takes one wakes another if worth it (_slot_loop)
                if not self._maybe_more:  # about to wait (no notification came meanwhile)
                    self._look_up_due(session, due)
                continue
            timeout = due.wait(now, min(0.25, max(next_poll - now, 0)))
            ready, _, _ = select.select([conn.fileno(), self._wake_r], [], [], timeout)
            if self._wake_r in ready:
                try:
                    os.read(self._wake_r, 4096)
                except BlockingIOError:
                    pass
                with self._lock:  # after the read: a poke from now on writes again
                    self._poked = False

    def _reconcile(self, session: Session) -> None:
        """After the claimer (re)connects: hand back what the database gives this worker
        (``execution_held``) but the worker does not know it holds (buffered, being handed
        back, starting, running, having its end written), matched by id and lease. Such an
        execution was claimed by a statement whose reply was lost with the connection (the
        server went away between the commit and the reply): left alone it would stay
        'running' under a live worker that never runs it, and running it blind would start
        it with nothing known of it but its id. The leader's rescue takes such executions
        back too, after two heartbeats that leave them out (migration 0015); this is
        at once and costs no attempt. Raises ConnectionFailed (the claimer reconnects and
        reconciles again)."""
        if self.id is None:
            return
        held = session.many("execution_held", worker_id=self.id)
        if not held:
            return
        with self._lock:  # after the query: what settles meanwhile is handed back by lease, a no-op
            known = {(r["id"], r["lease_id"]) for r in (*self._buffer, *self._unclaiming)}
            known.update(self._starting.items())
            known.update((i, slot.lease_id) for i, slot in self._active.items())
        unknown = [r for r in held if (r["id"], r["lease_id"]) not in known]
        if not unknown:
            return
        try:
            back = give_back(session, unknown)
        except ConnectionFailed:
            raise
        except PgschedError as exc:
            log.warning("worker %s: could not hand back %d execution(s) claimed by a statement whose reply was "
                        "lost (%s); tried again at the next reconnect, and the leader's rescue takes them back",
                        self.id, len(unknown), exc)
            return
        log.warning("worker %s: handed back %d execution(s) %s that a claim whose reply was lost with the "
                    "connection had given it; they run from the queue", self.id, len(back),
                    sorted(r["id"] for r in back))

    def _look_up_due(self, session: Session, due: NextDue) -> None:
        """Ask when the earliest pending execution of this worker's queues is due
        (``execution_next_due``, by the database's clock), so that the claimer wakes then
        rather than at its next poll. Only before the claimer waits: a busy worker's full
        claims never pay this round trip. When the question fails, the poll still wakes it."""
        try:
            row = session.one("execution_next_due", queues=self.config.queues)
        except ConnectionFailed:
            raise  # the claimer reconnects
        except PgschedError as exc:
            log.warning("could not look up when the next execution is due: %s", exc)
            return
        due.learn(row["seconds"] if row else None, time.monotonic(), row["future_seconds"] if row else None)

    def _unclaim(self, session: Session, rows: list[Row]) -> None:
        """Hand ``rows`` (taken off the buffer) back to the queue as if never claimed. When
        that fails they are not run here (the hand-back may have been committed): they are
        tried again (the lease makes it idempotent), at the latest when the worker stops."""
        self._unclaiming.extend(rows)
        try:
            back = give_back(session, self._unclaiming)
        except ConnectionFailed:
            raise  # the claimer reconnects, then tries again
        except PgschedError as exc:
            log.warning("worker %s: could not hand back %d buffered execution(s) yet: %s", self.id,
                        len(self._unclaiming), exc)
            return
        gone = len(self._unclaiming) - len(back)
        self._unclaiming.clear()
        log.info("worker %s: handed back %d buffered execution(s): handlers got slower than the prefetch "
                 "was sized for%s", self.id, len(back),
                 f" ({gone} more no longer held: handed back by an earlier try whose reply was lost, or taken "
                 "back by the leader)" if gone > 0 else "")

    def _hand_back_buffer(self) -> None:
        """On stopping: slots take nothing more; what is buffered goes back to the queue as
        if never claimed (no attempt used, none recorded)."""
        with self._ready:
            self._closing = True
            rows = [*self._buffer, *self._unclaiming]
            self._buffer.clear()
            self._unclaiming.clear()
            self._ready.notify_all()
        if not rows:
            return
        try:
            back = give_back(self.db, rows)
            log.info("worker %s: handed back %d claimed execution(s) that had not started", self.id, len(back))
        except PgschedError as exc:
            log.warning("worker %s: could not hand back %d claimed execution(s) (%s); the leader's rescue will",
                        self.id, len(rows), exc)

    # -- background helpers -------------------------------------------------------------
    def _heartbeat(self, stop: threading.Event) -> None:
        # Until the worker has drained and stopped (not merely been asked to stop): a
        # draining worker is alive and must not look dead.
        # Its own connection: a pool busy with output flushes must not delay the heartbeat.
        conn: psycopg.Connection[Row] | None = None
        probe = ClockProbe()  # this host's clock offset from the database, reported with each beat
        # At most one interval: a silent connection is replaced, and the beat sent again,
        # before the leader's dead limit (3 intervals) runs out.
        interval = self.config.heartbeat_interval
        deadline = Deadline(min(self.config.statement_deadline or interval, interval), name="heartbeat")
        wait = interval
        while True:
            waited_from = time.monotonic()
            if self._done.wait(wait):
                break
            late = time.monotonic() - waited_from - wait
            if late > 1.0:  # this process was frozen, not its claimer alone
                self._claimer.paused(late)
            wait = interval
            stall = self._watch_claimer()
            try:
                if conn is None or conn.closed:
                    conn = connect(self.db.dsn, application_name="pgsched worker heartbeat", deadline=deadline)
                session = Session(conn, deadline)
                holding = self._holding()
                sent = time.monotonic()
                row = session.one("worker_heartbeat", id=self.id, running=self._running,
                                  held=sorted({i for i, _ in holding}), **probe.send())
                probe.received()
                if row is not None:
                    self.clock.read(row["now"], sent, time.monotonic())
                if stall is not None:
                    session.exec("worker_claimer_stalled", id=self.id, seconds=stall or None)
                    self._stall_reported = stall or None
            except (psycopg.Error, PgschedError) as exc:
                log.warning("worker %s heartbeat failed: %s", self.id, exc)
                if conn is not None:
                    conn.close()
                conn = None
                if isinstance(exc, ConnectionSilent):
                    wait = 0  # a silent connection, not a database away: beat at once on a new one
                continue
            assert row is not None
            if not row["alive"]:
                self._declared_dead()
                continue
            self._confirm_alive(sent)
            if row["lost_ids"]:
                lost = set(row["lost_ids"])
                self._lost({(i, lease) for i, lease in holding if i in lost})
            for execution_id in row["cancel_ids"]:
                self.cancel(execution_id)
        if conn is not None:
            conn.close()

    def _watch_claimer(self) -> float | None:
        """The heartbeat's look at the claimer (:mod:`pgsched.liveness`): log, cut and
        report a stall, or exit the process when cutting did not help. Returns what the
        worker row should say and does not yet: the seconds the claimer is stalled for, 0
        when it is back (the heartbeat writes NULL), None when nothing is to be written."""
        state = self._claimer.check()
        stalled = self._claimer.stalled_for()
        limit = self._claimer.limit
        if state == STALLED:
            cut = self._claim_deadline.cut() if self._claim_deadline is not None else 0
            log.error("worker %s: its claimer has not gone round its loop for %.1fs (limit %.1fs): its queues are "
                      "not served; %s", self.id, stalled, limit,
                      "its connection was cut so that it opens another" if cut
                      else "it was not waiting for the database, so nothing could be cut")
            return stalled
        if state == GIVE_UP:
            log.critical("worker %s: its claimer is still stalled (%.1fs), one limit after the stall was found; exiting "
                         "with status %d so that a supervisor starts the worker again (the leader rescues its "
                         "executions)", self.id, stalled, EXIT_CLAIMER_STALLED)
            logging.shutdown()
            os._exit(EXIT_CLAIMER_STALLED)
        if state == BACK:
            log.warning("worker %s: its claimer goes round its loop again", self.id)
            return 0.0
        if self._stall_reported is not None and self._claimer.stalled_at is None:
            return 0.0  # back, but the report that said so failed: say it again
        if self._stall_reported is None and self._claimer.stalled_at is not None:
            return stalled  # stalled, and not reported yet
        return None

    def _held(self) -> list[int]:
        """Ids of every execution this worker holds: buffered, being handed back, taken by a
        slot, running, or having its end written. The heartbeat reports them; the leader's
        rescue takes back one this worker holds in the database but leaves out of two
        reports in a row (a claim whose reply never arrived: migration 0015)."""
        return [i for i, _ in self._holding()]

    def _holding(self) -> list[tuple[int, int]]:
        """(id, lease) of every execution this worker holds, as :meth:`_held`."""
        with self._lock:
            return [*((r["id"], r["lease_id"]) for r in self._buffer),
                    *((r["id"], r["lease_id"]) for r in self._unclaiming), *self._starting.items(),
                    *((i, slot.lease_id) for i, slot in self._active.items())]

    def _lost(self, lost: set[tuple[int, int]]) -> None:
        """The heartbeat says the database no longer gives this worker these (id, lease)
        that it held when the heartbeat was composed (``lost_ids``): taken back by the
        leader's rescue, or moved by hand. A buffered one is dropped, one being handed back
        is forgotten, one a slot is about to start is not started, and one whose handler
        runs is stopped (``lease_lost``: nothing recorded, its outcome would be refused).
        One whose outcome is being written, or was written since (no longer held here), is
        left alone: its own write moved it. (One being handed back is left to the hand-back,
        which its lost lease makes a no-op.)"""
        with self._lock:
            kept = [r for r in self._buffer if (r["id"], r["lease_id"]) not in lost]
            dropped = len(self._buffer) - len(kept)
            if dropped:
                self._buffer.clear()
                self._buffer.extend(kept)
            revoked = {(i, lease) for i, lease in lost if self._starting.get(i) == lease}
            self._revoked |= revoked
            stopped = [(i, slot) for i, slot in self._active.items()
                       if (i, slot.lease_id) in lost and not slot.ended and slot.reason is None]
        for _, slot in stopped:
            slot.end("lease_lost")
        if dropped or revoked or stopped:
            log.error("worker %s no longer holds execution(s) %s in the database (taken back while this worker "
                      "held them): %d dropped from the buffer, %d not started, %d stopped; nothing is recorded "
                      "for them here", self.id, sorted({i for i, _ in lost}), dropped, len(revoked), len(stopped))

    def _forget(self, execution_id: int, slot: _Slot) -> None:
        """Under ``_lock``: ``slot`` no longer runs ``execution_id``. Only that slot's entry
        goes: a copy of the same execution claimed afresh since (rescued from this worker,
        then claimed by it again) has its own slot under the same id, which the old slot's
        end must not remove from what the heartbeat reports as held (the leader would take
        the new copy back from a live worker, which would claim it again, and so on)."""
        if self._active.get(execution_id) is slot:
            del self._active[execution_id]

    def _declared_dead(self) -> None:
        """The scheduler leader declared this worker dead (it missed heartbeats) and put
        its executions back in the queue: stop running them (their outcomes would be
        rejected anyway) and carry on under a new registration."""
        with self._lock:
            lost = sorted(self._active)
        log.error("worker %s was declared dead (missed heartbeats); its executions %s were rescued "
                  "elsewhere: stopping them here and registering again", self.id, lost or "(none)")
        with self._lock:
            self._buffer.clear()  # claimed under the old registration: rescued as well
        with self._lock:
            stopping = dict(self._active)
        self._end_all("lease_lost")
        # Register again (and so claim again) only once what ran under the old registration
        # has stopped: the rescued copies may come back to this very worker, and must not
        # run beside the copies still being killed here.
        give_up = time.monotonic() + self.config.stop_grace + self.config.kill_grace + 2.0
        while time.monotonic() < give_up:
            with self._lock:
                if not any(self._active.get(i) is slot for i, slot in stopping.items()):
                    break
            time.sleep(0.02)
        else:
            log.warning("worker %s: %d execution(s) of the old registration still stopping; registering again "
                        "anyway", self.id, sum(self._active.get(i) is slot for i, slot in stopping.items()))
        try:
            self._register()
            log.info("worker registered again as %s", self.id)
        except PgschedError as exc:
            log.warning("worker could not register again yet: %s", exc)

    # -- running -----------------------------------------------------------------------
    def _slot_loop(self) -> None:
        """One slot thread: takes buffered executions while a slot is free, until closing;
        none while the worker may have been declared dead (until a heartbeat tells)."""
        while True:
            with self._ready:
                while not self._closing and not (self._buffer and self._running < self.config.concurrency
                                                 and not self._may_be_dead()):
                    self._ready.wait()  # a heartbeat's answer wakes all (_confirm_alive)
                if self._closing:
                    return
                row = self._buffer.popleft()
                self._starting[row["id"]] = row["lease_id"]
                self._running += 1
                if self._buffer and self._running < self.config.concurrency and self._spread():
                    self._ready.notify()
            self._poke()
            if not self._execute(row):
                return  # its Python call was abandoned: another thread has taken this slot over

    def _spread(self) -> bool:
        avg = self._avg_run
        return avg is None or len(self._buffer) * avg > SPREAD_SECONDS * max(self._running, 1)

    def _wake_slot(self) -> None:
        """This thread is about to block on the database: another takes buffered work."""
        with self._ready:
            if self._buffer and self._running < self.config.concurrency:
                self._ready.notify()

    def _execute(self, row: Row) -> bool:
        """Run one execution and hand its outcome on; False when the Python call was
        abandoned (the thread that recorded it carries on as this slot)."""
        sink = LogSink(self.config.max_output_lines, self.config.max_output_bytes, now=self.clock.now)
        began = time.monotonic()
        started = self.clock.at(began)
        slot = _Slot(row["lease_id"])
        with self._lock:
            self._active[row["id"]] = slot
            self._starting.pop(row["id"], None)
            revoked = (row["id"], row["lease_id"]) in self._revoked
            self._revoked.discard((row["id"], row["lease_id"]))
            early = row["id"] in self._early_cancels
            self._early_cancels.discard(row["id"])
        if revoked:
            slot.end("lease_lost")
        elif early or row.get("cancel_requested_at") is not None:
            slot.end("cancel")
        elif self.hard_stop.is_set():
            slot.end("handback")
        elif row.get("confirm_start"):
            confirmed = self._confirm_start(row)
            if not confirmed:
                slot.end("handback" if confirmed is None else "lease_lost")
        if slot.reason is not None:  # never started
            self._finish(row, sink, slot, started, Outcome("failed", error="stopped before it started"))
            return True
        try:
            log.debug("execution %s (%s) attempt %s started", row["id"], row["task_name"], row["attempt"])
            outcome = self._run_handler(row, sink, slot, started)
        except BaseException as exc:  # even SystemExit from an imported module: record it
            log.exception("execution %s: the handler raised out of the worker thread", row["id"])
            outcome = Outcome("failed", error=f"internal error: {type(exc).__name__}: {exc}")
        if outcome is None:
            return False
        if outcome is _NOT_STARTED:  # its start could not be proven: slot.reason says why
            self._finish(row, sink, slot, started, Outcome("failed", error="stopped before it started"))
            return True
        took = time.monotonic() - began
        self._avg_run = took if self._avg_run is None else 0.9 * self._avg_run + 0.1 * took
        self._finish(row, sink, slot, started, outcome)
        return True

    def _confirm_start(self, row: Row) -> bool | None:
        """Record that a slot starts ``row`` now (``execution_confirm_start``), for an
        execution whose claim asks for it: a rescue could not tell whether an earlier claim
        had started it, and must be able to next time (migration 0008). True: recorded, run
        it. False: the claim is no longer held (rescued); do not run it. None: the database
        refused it, or stayed unreachable for ``record_retry_seconds``, or the worker is
        stopping: hand it back unstarted. Only such executions pay this write."""
        self._wake_slot()
        give_up = time.monotonic() + self.config.record_retry_seconds
        delay = 0.5
        while True:
            try:
                if self.db.exec("execution_confirm_start", id=row["id"], lease_id=row["lease_id"]):
                    return True
                log.warning("execution %s attempt %s: not started: its claim was no longer held when its start "
                            "was to be recorded", row["id"], row["attempt"])
                return False
            except PgschedError as exc:
                if (not isinstance(exc, (ConnectionFailed, TransientError)) or time.monotonic() >= give_up
                        or self.hard_stop.is_set()):
                    log.warning("execution %s: could not record its start (%s); handing it back", row["id"], exc)
                    return None
                time.sleep(delay)
                delay = min(delay * 2, 10.0)

    def _start_by(self, row: Row, slot: _Slot) -> float | None:
        """Called last before a slot starts ``row``: the CLOCK_MONOTONIC instant (seconds)
        until which it may start it, or None when it must not (``slot.reason`` set: its lease
        is lost, the worker stops, or it was cancelled).

        A worker may start an execution only while the leader cannot have declared it dead:
        the last statement the database confirmed it alive by was sent at most HEARTBEAT_STALE
        intervals ago (the leader waits worker_dead_after_heartbeats, 3). Checking that when a
        slot takes a row off the buffer was not enough: a worker frozen (SIGSTOP) between that
        and the start woke and started executions already rescued and run elsewhere. So this
        is the last thing before the start, and the instant it returns is checked once more in
        the command's child between fork and exec (runner.run_command's ``start_by``) or right
        before a Python handler's first line. When the worker cannot show a fresh heartbeat,
        the start is proven against the database first (``worker_start_proof``: the worker
        alive and still holding the execution under this lease; its heartbeat renewed), and the
        deadline counts from that statement's send time."""
        limit = HEARTBEAT_STALE * self.config.heartbeat_interval
        give_up = time.monotonic() + self.config.record_retry_seconds
        delay = 0.5
        while True:
            with self._lock:
                if slot.reason is None and row.get("claimed_by", self.id) != self.id:
                    slot.end("lease_lost")  # claimed by a registration declared dead since: rescued
                if slot.reason is not None:
                    return None
                start_by = self._alive_at + limit
            if time.monotonic() <= start_by:
                return start_by
            self._wake_slot()
            sent = time.monotonic()
            try:
                proof = self.db.one("worker_start_proof", worker_id=self.id, id=row["id"], lease_id=row["lease_id"])
            except PgschedError as exc:
                if (not isinstance(exc, (ConnectionFailed, TransientError)) or time.monotonic() >= give_up
                        or self.hard_stop.is_set()):
                    log.warning("execution %s: could not prove its lease before starting it (%s); handing it back",
                                row["id"], exc)
                    slot.end("handback")
                    return None
                time.sleep(delay)
                delay = min(delay * 2, 10.0)
                continue
            assert proof is not None  # an aggregate row, always one
            if not proof["held"]:
                log.warning("execution %s attempt %s: not started: %s", row["id"], row["attempt"],
                            "its claim is no longer held by this worker" if proof["alive"]
                            else f"worker {self.id} was declared dead meanwhile (its executions rescued)")
                slot.end("lease_lost")
                return None
            self.clock.read(proof["now"], sent, time.monotonic())
            self._confirm_alive(sent)

    def _resume(self, row: Row, sink: LogSink, slot: _Slot, started: datetime, outcome: Outcome) -> None:
        """A new thread for an abandoned Python call: records it, then serves as the slot."""
        self._finish(row, sink, slot, started, outcome)
        self._slot_loop()

    def _finish(self, row: Row, sink: LogSink, slot: _Slot, started: datetime, outcome: Outcome) -> None:
        """The handler is done: free its slot and record the outcome (``_settled`` runs once
        it is written, perhaps later in the writer's thread)."""
        with self._lock:
            self._running -= 1
            slot.ended = True  # from now on a heartbeat's lost_ids naming it may be its own write's doing
            if slot.reason != "lease_lost":
                self._recording += 1
        self._poke()
        if slot.reason == "lease_lost":
            log.warning("execution %s attempt %s stopped: this worker no longer holds its lease (declared dead, "
                        "or the execution was taken back); nothing recorded here", row["id"], row["attempt"])
            with self._lock:
                self._forget(row["id"], slot)
            return
        if slot.reason == "cancel":
            outcome = Outcome("cancelled", outcome.exit_code, "cancelled on request"
                              + (f" ({outcome.error})" if outcome.error else ""))

        once: list[bool] = []

        def settled() -> None:  # once only, even when a failed recording is recorded again
            with self._lock:
                if once:
                    return
                once.append(True)
                self._recording -= 1
                self._forget(row["id"], slot)
            self._poke()

        try:
            if sink.pending():
                self._wake_slot()
                self._flush_logs(row, sink, final=True)
            self._record(row, outcome, started, list(sink.tail), slot.reason == "handback", settled)
        except BaseException as exc:
            log.exception("execution %s: recording the outcome failed", row["id"])
            try:  # never leave it 'running': record the failure itself
                self._record(row, Outcome("failed", error=f"internal error recording the outcome: "
                                          f"{type(exc).__name__}: {storable_text(str(exc))[:500]}"),
                             started, [], False, settled, fell_back=True)
            except BaseException:
                log.exception("execution %s: recording the failure failed too", row["id"])
                settled()

    def _run_handler(self, row: Row, sink: LogSink, slot: _Slot, started: datetime) -> Outcome | None:
        kind = row["handler_kind"]
        if kind == "python":
            params = json.loads(row["params"])  # JSON text (execution_claim): decoded here, by the slot
            func = self._functions.get(row["python_target"])
            if func is None:
                try:
                    func = app_module.resolve(row["python_target"], self.config.allowed_modules)
                except PgschedError as exc:
                    return Outcome("failed", error=str(exc))
                self._functions[row["python_target"]] = func
            if "upstream" in params and row.get("dag_run_id") is not None and not _takes(func, "upstream"):
                params = {k: v for k, v in params.items() if k != "upstream"}
            assert self.watchdog is not None
            while True:
                start_by = self._start_by(row, slot)
                if start_by is None:
                    return _NOT_STARTED
                outcome = self.watchdog.call(_guarded(func, start_by), params, timeout=row["timeout_seconds"],
                                             sink=sink, stop=slot, on_tick=lambda: self._flush_logs(row, sink),
                                             grace=self.config.stop_grace,
                                             on_abandon=lambda outcome: self._resume(row, sink, slot, started,
                                                                                     outcome))
                if outcome is None or outcome.result is not _NOT_STARTED:
                    return outcome  # (the sentinel is returned only by the guard, never stored)
        if kind == "dag":  # never enqueued (enqueue_v1 refuses it); say so if one appears
            return Outcome("failed", error=f"task {row['task_name']!r} is a DAG: it starts DAG runs and is not run")
        env = {k: v for k, v in os.environ.items() if k not in PRIVATE_ENV}
        env.update(row["env"] or {})
        env.update(PGSCHED_EXECUTION_ID=str(row["id"]), PGSCHED_TASK=row["task_name"],
                   PGSCHED_ATTEMPT=str(row["attempt"]), PGSCHED_SCHEDULED_AT=row["scheduled_at"].isoformat())
        params_file = None
        encoded = row["params"]  # JSON text as PostgreSQL wrote it (jsonb: an object)
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
            while True:
                start_by = self._start_by(row, slot)
                if start_by is None:
                    return _NOT_STARTED
                try:
                    return run_command(argv, env=env, stdin=row["stdin"], timeout=row["timeout_seconds"],
                                       sink=sink, kill_grace=self.config.kill_grace,
                                       on_tick=lambda: self._flush_logs(row, sink), stop=slot,
                                       stop_grace=self.config.stop_grace, start_by=start_by)
                except StartDeadlinePassed:
                    log.info("execution %s: not started yet: its start deadline passed before the command's "
                             "exec (the worker was frozen or slow); proving its lease again", row["id"])
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

    def _record(self, row: Row, outcome: Outcome, started: datetime, tail: list[str], handback: bool,
                settled: Callable[[], None], fell_back: bool = False) -> None:
        """Record the attempt's end, then call ``settled()``. A final outcome goes to the
        writer (group commit) and this returns at once; a retry is written here, retried
        for ``record_retry_seconds`` while the database is unreachable (a blip must not
        leave the execution 'running'). An outcome the database refuses is recorded as a
        failure instead (``fell_back``: this is that failure)."""
        finished = max(self.clock.now(), started)  # a better reading of the clock may have come meanwhile
        stopped = handback and outcome.state == "failed"
        outcome = _storable(outcome)
        final = self._final_state(row, outcome, stopped)
        if final is not None and self.completer is not None:
            def written(result: bool | BaseException) -> None:
                try:
                    if result is True:
                        self._recorded(row, outcome, started, finished, final, None, None, tail, stopped)
                    elif result is False:
                        self._claim_lost(row, outcome)
                    elif not isinstance(result, (ConnectionFailed, TransientError)) and not fell_back:
                        log.error("execution %s: outcome %s refused by the database (%s); recording it as failed",
                                  row["id"], outcome.state, result)
                        self._record(row, Outcome("failed", outcome.exit_code, f"outcome not storable: {result}"),
                                     started, tail, False, settled, fell_back=True)
                        return
                    else:
                        log.error("execution %s: could not record outcome %s: %s", row["id"], outcome.state, result)
                except Exception:
                    log.exception("execution %s: recording the outcome failed", row["id"])
                settled()

            self.completer.submit(dict(
                id=row["id"], lease_id=row["lease_id"], state=final, finished_at=finished,
                exit_code=outcome.exit_code, error=outcome.error,
                result=outcome.result, attempt_state=outcome.state, started_at=started,
                error_type=outcome.error_type), written)
            return
        self._wake_slot()
        try:
            give_up = time.monotonic() + self.config.record_retry_seconds
            delay = 0.5
            uncertain = False  # a try lost its connection: it may have committed unheard
            while True:
                try:
                    try:
                        final, retry_at, budget = self._store_outcome(row, outcome, finished, stopped, started)
                        break
                    except _ClaimLost:
                        earlier = self._earlier_try(row, outcome, finished, stopped, started) if uncertain else None
                        if earlier is None:
                            self._claim_lost(row, outcome)
                            return
                        final, retry_at, budget = earlier
                        log.info("execution %s attempt %s: outcome %s was recorded by an earlier try whose reply "
                                 "was lost with its connection", row["id"], row["attempt"], outcome.state)
                        break
                except (ConnectionFailed, TransientError) as exc:
                    uncertain = uncertain or isinstance(exc, ConnectionFailed)
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
                    # The database refused a value of the outcome: record the failure instead,
                    # so the execution never stays 'running'.
                    log.error("execution %s: outcome %s refused by the database (%s); recording it as failed",
                              row["id"], outcome.state, exc)
                    outcome = Outcome("failed", outcome.exit_code, f"outcome not storable: {exc}")
            self._recorded(row, outcome, started, finished, final, retry_at, budget, tail, stopped)
        finally:
            settled()

    def _earlier_try(self, row: Row, outcome: Outcome, finished: datetime, stopped: bool,
                     started: datetime) -> tuple[str | None, datetime | None, float | None] | None:
        """After a try of :meth:`_store_outcome` lost its connection and a later one found the
        lease gone: whether the earlier try committed (``execution_attempt_recorded``: the
        attempt row it wrote, with this worker, the lease and the very finished_at). Returns
        what it decided (final state or None, the next attempt's run_at, the retry budget's
        delay in seconds), or None when it did not commit (the execution was taken back).
        Raises ConnectionFailed / TransientError."""
        found = self.db.one("execution_attempt_recorded", id=row["id"], lease_id=row["lease_id"], worker_id=self.id,
                            finished_at=finished, started_at=started, state="lost" if stopped else outcome.state)
        if found is None:
            return None
        final = found["final"]
        return final, None if final is not None else found["next_run_at"], found["budget_delay_seconds"]

    def _claim_lost(self, row: Row, outcome: Outcome) -> None:
        log.error("execution %s attempt %s: outcome %s rejected: lease %s is no longer held by worker %s "
                  "(declared dead, or the execution taken back: the leader's rescue ran it elsewhere)", row["id"], row["attempt"], outcome.state,
                  row["lease_id"], self.id)

    def _recorded(self, row: Row, outcome: Outcome, started: datetime, finished: datetime, final: str | None,
                  retry_at: datetime | None, budget: float | None, tail: list[str], stopped: bool) -> None:
        """Log the recorded outcome (successes at most SUCCESS_LINES_PER_SECOND a second)
        and tell ``on_finish``."""
        what = "handed back" if stopped else outcome.state + (" (dead-letter queue)" if final == "dead" else "")
        args = (row["id"], row["task_name"], row["attempt"], row["max_attempts"], what,
                (finished - started).total_seconds(), f": {outcome.error}" if outcome.error else "",
                f"; next attempt at {retry_at:%H:%M:%S}" if retry_at else "",
                f" (delayed {budget:.0f}s by the retry budget)" if budget else "")
        if outcome.state == "succeeded":
            self._successes.log("execution %s %s attempt %s/%s %s in %.2fs%s%s%s", *args)
        else:
            log.warning("execution %s %s attempt %s/%s %s in %.2fs%s%s%s", *args)
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
                exit_code=outcome.exit_code, error=outcome.error, result=outcome.result,
                attempt_state=outcome.state, started_at=started, error_type=outcome.error_type))
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
                    # counted from backoff_from_attempt: a dead-letter retry starts afresh
                    proposed += timedelta(seconds=backoff_seconds(
                        row["retry_policy"], row["attempt"] - row["backoff_from_attempt"],
                        row["retry_base_seconds"], row["retry_max_seconds"]))
                    slot = tx.one("execution_retry_slot", proposed=proposed)
                    assert slot is not None
                    retry_at = slot["run_at"]
                    budget = (retry_at - proposed).total_seconds() or None
                else:
                    retry_at = proposed
            tx.exec("execution_attempt_insert", tenant=row["tenant"], state="lost" if stopped else outcome.state,
                    started_at=started, finished_at=finished, worker_id=self.id,
                    attempt=row["attempt"], exit_code=outcome.exit_code, error=outcome.error,
                    error_type=outcome.error_type, next_run_at=retry_at, budget_delay_seconds=budget, **lease)
            # The move comes last, right before COMMIT: a DAG node's finish locks its run
            # (settling downstream) and should hold that lock for no round trip more. When
            # the lease is no longer held, nothing is written at all: the exception rolls
            # back the attempt row too (the rescue has already written it as 'lost').
            if final is None:
                done = tx.exec("execution_retry", run_at=retry_at, extra_attempts=1 if stopped else 0,
                               budget_delay_seconds=budget, **lease)
                if done:  # an UPDATE: no NOTIFY from the insert trigger, so wake idle workers
                    tx.exec("execution_wake")  # (they look up its run_at: pgsched.due)
            else:
                done = tx.exec("execution_finish", state=final, finished_at=finished,
                               exit_code=outcome.exit_code, error=outcome.error,
                               result=Jsonb(outcome.result) if outcome.result is not None else None, **lease)
            if not done:
                raise _ClaimLost()
        return final, retry_at, budget


class _SuccessLog:
    """INFO lines for successes, at most SUCCESS_LINES_PER_SECOND a second: at thousands of
    executions a second a line each cost more than the executions (the log handler's lock
    showed in the profile). The next line logged says how many were left out."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.second = self.lines = self.skipped = 0

    def log(self, msg: str, *args: Any) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        now = int(time.monotonic())
        with self.lock:
            if now != self.second:
                self.second, self.lines = now, 0
            if self.lines >= SUCCESS_LINES_PER_SECOND:
                self.skipped += 1
                return
            self.lines += 1
            skipped, self.skipped = self.skipped, 0
        if skipped:
            msg, args = msg + " (%d more succeeded meanwhile, not logged one by one)", (*args, skipped)
        log.info(msg, *args)

def _start_guardian(worker_id: int | None) -> Guardian | None:
    """Start this worker's guardian (:mod:`pgsched.guardian`) and say what containment the
    worker's commands have; None when it could not start (then only the PDEATHSIG of each
    command's own child holds)."""
    try:
        guard = Guardian.start()
    except (OSError, RuntimeError) as exc:
        log.warning("worker %s: commands die with the worker only in part: pdeathsig of each command's own "
                    "process, no guardian for what it starts (%s)", worker_id, exc)
        return None
    log.info("worker %s: commands die with the worker: pdeathsig + guardian (pid %s)", worker_id, guard.pid)
    return guard


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
        if has_nul(text):
            return Outcome("failed", outcome.exit_code, "result contains a NUL character, which PostgreSQL refuses")
    return Outcome(outcome.state, outcome.exit_code, error, outcome.result, outcome.error_type, outcome.error_types)


class _ClaimLost(Exception):
    """The execution was taken from this worker (rescued) before it finished."""

"""The worker's liveness: one heartbeat per interval on a connection of its own, and the
start gate that lets a slot start an execution only while the worker is known alive.

Each beat (``worker_heartbeat``) reports what the worker holds (``held``) and returns
whether the database still takes it for alive, the executions it no longer gives the
worker (``lost_ids``: stopped, dropped or not started here) and cancels asked for (missed
notifications). A worker declared dead stops what it ran, drops its buffer and registers
again once the old registration's executions have stopped. The beat also watches the
claimer (:mod:`pgsched.liveness`): a claimer stalled past its limit is logged, reported
in the worker row and its connection cut; still stalled one limit later, the process
exits with EXIT_CLAIMER_STALLED for its supervisor to start it again.

A start is proven last (issue 15, item 2): right before a command's exec or a Python
handler's first line, the worker must be able to show a heartbeat the database confirmed
at most HEARTBEAT_STALE intervals ago; when it cannot, one statement proves the lease and
renews the heartbeat first (``worker_start_proof``).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

import psycopg

from ..clock import ClockProbe, DatabaseClock
from ..db import Database, Row, Session, connect
from ..deadline import Deadline
from ..errors import ConnectionSilent, PgschedError
from ..liveness import BACK, GIVE_UP, STALLED, Liveness
from .config import EXIT_CLAIMER_STALLED, HEARTBEAT_STALE, WorkerConfig
from .holdings import Holdings, Slot
from .retries import with_retries

log = logging.getLogger(__name__)


class Heartbeat:
    """The heartbeat of one worker. ``worker_id()``: its current registration;
    ``register()``: registers it afresh (after it was declared dead); ``claimer`` and
    ``claim_deadline()``: the claimer's liveness and the deadline of its statements, to
    watch and cut; ``done``: set once the worker has drained and stopped (a draining worker
    is alive and must not look dead), which ends :meth:`run`."""

    def __init__(
        self,
        db: Database,
        config: WorkerConfig,
        holdings: Holdings,
        clock: DatabaseClock,
        worker_id: Callable[[], int | None],
        register: Callable[[], None],
        claimer: Liveness,
        claim_deadline: Callable[[], Deadline | None],
        done: threading.Event,
    ):
        self.db, self.config, self.holdings, self.clock = db, config, holdings, clock
        self.worker_id, self.register, self.claimer, self.claim_deadline = (
            worker_id,
            register,
            claimer,
            claim_deadline,
        )
        self.done = done
        self._stall_reported: float | None = None  # what the worker row says (None: not stalled)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, daemon=True, name="pgsched-heartbeat")
        self._thread.start()

    def run(self) -> None:
        """Beat every ``heartbeat_interval`` seconds until ``done``."""
        # Its own connection: a pool busy with output flushes must not delay the heartbeat.
        conn: psycopg.Connection[Row] | None = None
        probe = ClockProbe()  # this host's clock offset from the database, reported with each beat
        # At most one interval: a silent connection is replaced, and the beat sent again,
        # before the leader's dead limit (3 intervals) runs out.
        interval = self.config.heartbeat_interval
        deadline = Deadline(
            min(self.config.statement_deadline or interval, interval), name="heartbeat"
        )
        wait = interval
        while True:
            waited_from = time.monotonic()
            if self.done.wait(wait):
                break
            late = time.monotonic() - waited_from - wait
            if late > 1.0:  # this process was frozen, not its claimer alone
                self.claimer.paused(late)
            wait = interval
            stall = self._watch_claimer()
            me = self.worker_id()
            try:
                if conn is None or conn.closed:
                    conn = connect(
                        self.db.dsn, application_name="pgsched worker heartbeat", deadline=deadline
                    )
                session = Session(conn, deadline)
                holding = self.holdings.holding()
                sent = time.monotonic()
                row = session.one(
                    "worker_heartbeat",
                    id=me,
                    running=self.holdings.running,
                    held=sorted({i for i, _ in holding}),
                    **probe.send(),
                )
                probe.received()
                if row is not None:
                    self.clock.read(row["now"], sent, time.monotonic())
                if stall is not None:
                    session.exec("worker_claimer_stalled", id=me, seconds=stall or None)
                    self._stall_reported = stall or None
            except (psycopg.Error, PgschedError) as exc:
                log.warning("worker %s heartbeat failed: %s", me, exc)
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
            self.holdings.confirm_alive(sent)
            if row["lost_ids"]:
                lost = set(row["lost_ids"])
                self.holdings.lost({(i, lease) for i, lease in holding if i in lost}, me)
            for execution_id in row["cancel_ids"]:
                self.holdings.cancel(execution_id)
        if conn is not None:
            conn.close()

    def _watch_claimer(self) -> float | None:
        """The heartbeat's look at the claimer (:mod:`pgsched.liveness`): log, cut and
        report a stall, or exit the process when cutting did not help. Returns what the
        worker row should say and does not yet: the seconds the claimer is stalled for, 0
        when it is back (the heartbeat writes NULL), None when nothing is to be written."""
        state = self.claimer.check()
        stalled = self.claimer.stalled_for()
        limit = self.claimer.limit
        me = self.worker_id()
        if state == STALLED:
            claim_deadline = self.claim_deadline()
            cut = claim_deadline.cut() if claim_deadline is not None else 0
            log.error(
                "worker %s: its claimer has not gone round its loop for %.1fs (limit %.1fs): its queues are "
                "not served; %s",
                me,
                stalled,
                limit,
                "its connection was cut so that it opens another"
                if cut
                else "it was not waiting for the database, so nothing could be cut",
            )
            return stalled
        if state == GIVE_UP:
            log.critical(
                "worker %s: its claimer is still stalled (%.1fs), one limit after the stall was found; exiting "
                "with status %d so that a supervisor starts the worker again (the leader rescues its "
                "executions)",
                me,
                stalled,
                EXIT_CLAIMER_STALLED,
            )
            logging.shutdown()
            os._exit(EXIT_CLAIMER_STALLED)
        if state == BACK:
            log.warning("worker %s: its claimer goes round its loop again", me)
            return 0.0
        if self._stall_reported is not None and self.claimer.stalled_at is None:
            return 0.0  # back, but the report that said so failed: say it again
        if self._stall_reported is None and self.claimer.stalled_at is not None:
            return stalled  # stalled, and not reported yet
        return None

    def _declared_dead(self) -> None:
        """The scheduler leader declared this worker dead (it missed heartbeats) and put
        its executions back in the queue: stop running them (their outcomes would be
        rejected anyway) and carry on under a new registration."""
        h = self.holdings
        with h.lock:
            lost = sorted(h.active)
        log.error(
            "worker %s was declared dead (missed heartbeats); its executions %s were rescued "
            "elsewhere: stopping them here and registering again",
            self.worker_id(),
            lost or "(none)",
        )
        with h.lock:
            h.buffer.clear()  # claimed under the old registration: rescued as well
        stopping = h.end_all("lease_lost")
        # Register again (and so claim again) only once what ran under the old registration
        # has stopped: the rescued copies may come back to this very worker, and must not
        # run beside the copies still being killed here.
        give_up = time.monotonic() + self.config.stop_grace + self.config.kill_grace + 2.0
        while time.monotonic() < give_up:
            with h.lock:
                if not any(h.active.get(i) is slot for i, slot in stopping.items()):
                    break
            time.sleep(0.02)
        else:
            log.warning(
                "worker %s: %d execution(s) of the old registration still stopping; registering again "
                "anyway",
                self.worker_id(),
                sum(h.active.get(i) is slot for i, slot in stopping.items()),
            )
        try:
            self.register()
            log.info("worker registered again as %s", self.worker_id())
        except PgschedError as exc:
            log.warning("worker could not register again yet: %s", exc)

    def start_by(self, row: Row, slot: Slot) -> float | None:
        """Called last before a slot starts ``row``: the CLOCK_MONOTONIC instant (seconds)
        until which it may start it, or None when it must not (``slot.reason`` set: its lease
        is lost, the worker stops, or it was cancelled).

        A worker may start an execution only while the leader cannot have declared it dead:
        the last statement the database confirmed it alive by was sent at most HEARTBEAT_STALE
        intervals ago (the leader waits worker_dead_after_heartbeats, 3). Checking that when a
        slot takes a row off the buffer was not enough: a worker frozen (SIGSTOP) between that
        and the start woke and started executions already rescued and run elsewhere. So this
        is the last thing before the start, and the instant it returns is checked once more in
        the command's child between fork and exec (``run_command``'s ``start_by``) or right
        before a Python handler's first line (:func:`pgsched.handlers.python.guarded`). When
        the worker cannot show a fresh heartbeat, the start is proven against the database
        first (``worker_start_proof``: the worker alive and still holding the execution under
        this lease; its heartbeat renewed), and the deadline counts from that statement's
        send time. The proof is retried while the database is unreachable, for
        ``record_retry_seconds``, unless the worker stops: then it is handed back."""
        try:
            return with_retries(
                lambda _: self._start_by(row, slot),
                seconds=self.config.record_retry_seconds,
                stopping=self.holdings.hard_stop.is_set,
            )
        except PgschedError as exc:
            log.warning(
                "execution %s: could not prove its lease before starting it (%s); handing it back",
                row["id"],
                exc,
            )
            slot.end("handback")
            return None

    def _start_by(self, row: Row, slot: Slot) -> float | None:
        """One try of :meth:`start_by`; raises what ``worker_start_proof`` raised."""
        h = self.holdings
        limit = HEARTBEAT_STALE * self.config.heartbeat_interval
        while True:
            me = self.worker_id()
            with h.lock:
                if slot.reason is None and row.get("claimed_by", me) != me:
                    slot.end("lease_lost")  # claimed by a registration declared dead since: rescued
                if slot.reason is not None:
                    return None
                start_by = h.alive_at + limit
            if time.monotonic() <= start_by:
                return start_by
            h.wake_slot()
            sent = time.monotonic()
            proof = self.db.one(
                "worker_start_proof", worker_id=me, id=row["id"], lease_id=row["lease_id"]
            )
            assert proof is not None  # an aggregate row, always one
            if not proof["held"]:
                log.warning(
                    "execution %s attempt %s: not started: %s",
                    row["id"],
                    row["attempt"],
                    "its claim is no longer held by this worker"
                    if proof["alive"]
                    else f"worker {me} was declared dead meanwhile (its executions rescued)",
                )
                slot.end("lease_lost")
                return None
            self.clock.read(proof["now"], sent, time.monotonic())
            h.confirm_alive(sent)

"""The claimer: one thread on a dedicated connection that LISTENs (``pgsched_execution``,
``pgsched_cancel``) and claims into the worker's buffer (:mod:`.holdings`).

A notification is answered by a claim on that same connection, with no hop to another
thread; a slow poll is the fallback (a notification is lost when a connection drops).
Work due later (a retry's backoff, a run enqueued for later) wakes it when due, by the
database's clock (:mod:`pgsched.worker.due`). Claims (``execution_claim``: SKIP LOCKED, priority
then run_at, each queue read from its own front) fill a small buffer sized to the free
slots plus a prefetch, so a slot that ends an execution takes the next one without
waiting for a claim round trip. The prefetch grows only while handlers are short (a
buffered execution waits about PREFETCH_HORIZON seconds for its slot, on average) and is
capped by ``WorkerConfig.prefetch``; what it claimed too much of is handed back.

A buffered execution is claimed like a running one (state running, this worker's id, a
lease): when the worker dies, the leader's rescue puts it back in the queue. On a clean
stop the buffer is handed back at once (``execution_unclaim``: no attempt used, none
recorded). After it (re)connects, the claimer hands back what the database gives the
worker but the worker does not know it holds (a claim whose reply was lost: issue 15).

Its statements have a deadline (:mod:`pgsched.deadline`) and are cut when the worker
stops; it marks each turn of its loop (:mod:`pgsched.liveness`) for the heartbeat to watch.
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
from collections.abc import Callable

import psycopg

from ..clock import DatabaseClock
from ..db import Database, Row, Session, connect
from ..deadline import Deadline
from ..errors import ConnectionFailed, PgschedError
from ..liveness import Liveness
from .claims import TaskDefinitions, give_back
from .config import PREFETCH_HORIZON, RECORD_BACKLOG, WorkerConfig
from .due import NextDue
from .holdings import Holdings
from .newcomers import Newcomers

log = logging.getLogger(__name__)


def wakes(payload: str, tenants: tuple[str, ...] | None) -> bool:
    """Whether a ``pgsched_execution`` notification with ``payload`` may bring work to a
    worker of ``tenants`` (None: every tenant). An INSERT's names its tenant (migration
    0020); an empty one (a retry, a hand-back, a rescue) may be anyone's."""
    return not payload or tenants is None or payload in tenants


class Claimer:
    """The claimer of one worker. ``worker_id()``: its current registration (a new one
    after it was declared dead); ``liveness``: its turns, watched by the heartbeat;
    ``deadline``: that of its statements while :meth:`run` runs (the heartbeat cuts it)."""

    def __init__(
        self,
        db: Database,
        config: WorkerConfig,
        holdings: Holdings,
        clock: DatabaseClock,
        worker_id: Callable[[], int | None],
    ):
        self.db, self.config, self.holdings, self.clock, self.worker_id = (
            db,
            config,
            holdings,
            clock,
            worker_id,
        )
        self.liveness = Liveness(config.claimer_limit())
        self.deadline: Deadline | None = None
        # the queue may hold ready executions: the last claim was full, or a notification
        self._maybe_more = True
        self._wake_r, self._wake_w = os.pipe()  # tells the claimer a slot freed up
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._poked = False  # under holdings.lock
        self._newcomers = Newcomers(config.poll_interval)  # claimed for at once (.newcomers)
        # ids named by pgsched_cancel notifications, not acted on until the database says a
        # cancel was asked: any login of the database may NOTIFY (docs/security.md)
        self._cancel_hints: set[int] = set()

    # -- sizing (under holdings.lock) ----------------------------------------------------
    def _prefetch(self) -> int:
        avg = self.holdings.avg_run
        if avg is None or not self.config.prefetch:
            return 0
        return min(
            self.config.prefetch, int(self.config.concurrency * PREFETCH_HORIZON / max(avg, 1e-6))
        )

    def _claim_size(self) -> int:
        """How many to claim now (0: not now). Free slots are ``concurrency`` less running
        handlers, less outcomes waiting for the writer beyond RECORD_BACKLOG. A claim fills
        the free slots and the prefetch; it is sent when a slot would otherwise wait, or
        when half the prefetch is gone (fewer, larger claims)."""
        cfg, h = self.config, self.holdings
        free = (
            cfg.concurrency - h.running - max(0, h.recording - max(RECORD_BACKLOG, cfg.concurrency))
        )
        extra = self._prefetch()
        want = free + extra - len(h.buffer)
        if want <= 0 or (len(h.buffer) >= free and 2 * want < extra):
            return 0
        return want

    def _claim_now(self) -> tuple[int, list[str] | None, bool]:
        """What to claim now (under holdings.lock): how many, of which tenants (None: every
        tenant), whether for a newcomer (:mod:`.newcomers`: one row of that tenant alone)."""
        want = self._claim_size() if self._maybe_more else 0
        if want > 0:
            self._newcomers.clear()
            return want, self._tenants(), False
        tenant = None if self.holdings.closing else self._newcomers.take(time.monotonic())
        return (0, None, False) if tenant is None else (1, [tenant], True)

    def _excess(self) -> list[Row]:
        """Buffered executions to hand back now, taken off the buffer's end (the last
        claimed). The prefetch shrinks when handlers turn out slower than those it was
        sized on (a run of short tasks, then long ones): what was claimed ahead then waits
        long here while another worker may be idle. Handed back once the buffer holds more
        than twice the free slots and prefetch, plus ``concurrency`` (no churn while the
        estimate wavers)."""
        cfg, h = self.config, self.holdings
        free = max(0, cfg.concurrency - h.running)
        keep = 2 * (free + self._prefetch()) + cfg.concurrency
        if h.closing or len(h.buffer) <= keep:
            return []
        return [h.buffer.pop() for _ in range(len(h.buffer) - keep)]

    def poke(self) -> None:
        """Wake the claimer if it should claim now (a slot freed up, the queue may hold more)."""
        with self.holdings.lock:
            if self._poked or not self._maybe_more or self._claim_size() <= 0:
                return
            self._poked = True
            try:  # under the lock: never after close() closed the pipe
                os.write(self._wake_w, b"x")
            except (BlockingIOError, OSError):
                pass

    def close(self) -> None:
        """No more pokes: the pipe's descriptors may be reused once closed."""
        with self.holdings.lock:
            self._poked = True
            os.close(self._wake_r)
            os.close(self._wake_w)

    def _tenants(self) -> list[str] | None:
        return None if self.config.tenants is None else list(self.config.tenants)

    def _notified(self, channel: str, payload: str) -> None:
        if channel == "pgsched_cancel":
            try:
                self._cancel_hints.add(int(payload))
            except ValueError:
                log.warning("ignoring a cancel notification with payload %r", payload)
        elif wakes(payload, self.config.tenants):
            self._maybe_more = True
            if self._newcomers.wants(payload, time.monotonic()):
                with self.holdings.lock:
                    if all(r.get("tenant") != payload for r in self.holdings.buffer):
                        self._newcomers.add(payload)

    # -- the loop ------------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        """Until ``stop``: LISTEN and claim on one dedicated connection; reconnects with
        backoff when it breaks."""
        backoff = 0.5
        # No deadline (0) still cuts a stopping worker's statement and lets the heartbeat cut a stalled one.
        deadline = self.deadline = Deadline(
            self.config.statement_deadline or float("inf"), name="claim", stop=stop
        )
        try:
            while not stop.is_set():
                self.liveness.went_round()
                try:
                    conn = connect(
                        self.db.dsn, application_name="pgsched worker listen", deadline=deadline
                    )
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
                    log.warning(
                        "worker listener lost its connection (%s); retrying in %.1fs", exc, backoff
                    )
                    self.liveness.went_round()  # the wait is a turn, not a stall
                    stop.wait(backoff)
                    backoff = min(backoff * 2, 10.0)
        finally:
            self.liveness.retire()  # stopped on purpose: the drain that follows is no stall

    def _serve(self, conn: psycopg.Connection[Row], stop: threading.Event) -> None:
        h = self.holdings
        session = Session(conn, self.deadline)
        tasks = TaskDefinitions()
        next_poll = 0.0
        due = NextDue(self.config.poll_interval)
        while not stop.is_set():
            self.liveness.went_round()
            conn.pgconn.consume_input()  # notifications already received: handled now
            while note := conn.pgconn.notifies():
                self._notified(note.relname.decode(), note.extra.decode())
            if self._cancel_hints:
                self._cancel_asked(session)
            now = time.monotonic()
            if now >= next_poll:
                self._maybe_more, next_poll = True, now + self.config.poll_interval
            if due.passed(now):
                self._maybe_more = True
            with h.lock:
                want, claim_tenants, newcomer = self._claim_now()
                excess = self._excess()
            if excess or h.unclaiming:
                self._unclaim(session, excess)
            if want > 0:
                if not newcomer:  # a newcomer's claim leaves the usual one to come as it would
                    self._maybe_more = False  # a notification during the claim sets it again
                try:
                    sent = time.monotonic()
                    me = self.worker_id()  # the registration that claims (the heartbeat registers anew when declared dead)
                    rows = tasks.claim(
                        session,
                        queues=self.config.queues,
                        tenants=claim_tenants,
                        limit=want,
                        worker_id=me,
                    )
                except ConnectionFailed:
                    raise
                except PgschedError as exc:
                    log.warning("claim failed: %s", exc)
                    stop.wait(min(self.config.poll_interval, 1.0))
                    continue
                if newcomer and not rows and claim_tenants:
                    self._newcomers.found_nothing(claim_tenants[0], time.monotonic())
                if len(rows) == want and not newcomer:
                    self._maybe_more = True  # there may be more ready right now
                for row in rows:  # a fresh heartbeat of a later registration proves nothing of it
                    row["claimed_by"] = me
                if rows:  # the claim's now()
                    self.clock.read(rows[0]["started_at"], sent, time.monotonic())
                    due.claimed()
                    h.add(rows)
                # about to wait (no notification came meanwhile)
                if not self._maybe_more and not newcomer:
                    self._look_up_due(session, due)
                continue
            timeout = due.wait(now, min(0.25, max(next_poll - now, 0)))
            timeout = self._newcomers.wait(now, timeout)  # the next newcomer's claim
            ready, _, _ = select.select([conn.fileno(), self._wake_r], [], [], timeout)
            if self._wake_r in ready:
                try:
                    os.read(self._wake_r, 4096)
                except BlockingIOError:
                    pass
                with h.lock:  # after the read: a poke from now on writes again
                    self._poked = False

    def _cancel_asked(self, session: Session) -> None:
        """Cancel the executions of the notifications received whose cancel the database
        has (``cancel_requested_at``, set by cancel_v1 in the caller's tenant); a
        notification naming anything else is ignored. One lost with a failed statement
        is caught by the heartbeat, which carries the cancels asked for (worker_heartbeat)."""
        ids, self._cancel_hints = sorted(self._cancel_hints), set()
        for row in session.many("execution_cancel_asked", ids=ids):
            self.holdings.cancel(row["id"])

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
        me = self.worker_id()
        if me is None:
            return
        held = session.many("execution_held", worker_id=me)
        if not held:
            return
        known = set(
            self.holdings.holding()
        )  # after the query: what settles meanwhile is handed back by lease, a no-op
        unknown = [r for r in held if (r["id"], r["lease_id"]) not in known]
        if not unknown:
            return
        try:
            back = give_back(session, unknown)
        except ConnectionFailed:
            raise
        except PgschedError as exc:
            log.warning(
                "worker %s: could not hand back %d execution(s) claimed by a statement whose reply was "
                "lost (%s); tried again at the next reconnect, and the leader's rescue takes them back",
                me,
                len(unknown),
                exc,
            )
            return
        log.warning(
            "worker %s: handed back %d execution(s) %s that a claim whose reply was lost with the "
            "connection had given it; they run from the queue",
            me,
            len(back),
            sorted(r["id"] for r in back),
        )

    def _look_up_due(self, session: Session, due: NextDue) -> None:
        """Ask when the earliest pending execution of this worker's queues (of its tenants) is due
        (``execution_next_due``, by the database's clock), so that the claimer wakes then
        rather than at its next poll. Only before the claimer waits: a busy worker's full
        claims never pay this round trip. When the question fails, the poll still wakes it."""
        try:
            row = session.one(
                "execution_next_due", queues=self.config.queues, tenants=self._tenants()
            )
        except ConnectionFailed:
            raise  # the claimer reconnects
        except PgschedError as exc:
            log.warning("could not look up when the next execution is due: %s", exc)
            return
        due.learn(
            row["seconds"] if row else None,
            time.monotonic(),
            row["future_seconds"] if row else None,
            row["free_seconds"] if row else None,
        )

    def _unclaim(self, session: Session, rows: list[Row]) -> None:
        """Hand ``rows`` (taken off the buffer) back to the queue as if never claimed. When
        that fails they are not run here (the hand-back may have been committed): they are
        tried again (the lease makes it idempotent), at the latest when the worker stops."""
        h = self.holdings
        h.unclaiming.extend(rows)
        try:
            back = give_back(session, h.unclaiming)
        except ConnectionFailed:
            raise  # the claimer reconnects, then tries again
        except PgschedError as exc:
            log.warning(
                "worker %s: could not hand back %d buffered execution(s) yet: %s",
                self.worker_id(),
                len(h.unclaiming),
                exc,
            )
            return
        gone = len(h.unclaiming) - len(back)
        h.unclaiming.clear()
        log.info(
            "worker %s: handed back %d buffered execution(s): handlers got slower than the prefetch "
            "was sized for%s",
            self.worker_id(),
            len(back),
            f" ({gone} more no longer held: handed back by an earlier try whose reply was lost, or taken "
            "back by the leader)"
            if gone > 0
            else "",
        )

    def hand_back_buffer(self) -> None:
        """On stopping: slots take nothing more; what is buffered goes back to the queue as
        if never claimed (no attempt used, none recorded)."""
        rows = self.holdings.close()
        if not rows:
            return
        try:
            back = give_back(self.db, rows)
            log.info(
                "worker %s: handed back %d claimed execution(s) that had not started",
                self.worker_id(),
                len(back),
            )
        except PgschedError as exc:
            log.warning(
                "worker %s: could not hand back %d claimed execution(s) (%s); the leader's rescue will",
                self.worker_id(),
                len(rows),
                exc,
            )

"""Leadership: who of the running schedulers leads, and for which term.

The leader holds ``pg_try_advisory_lock`` of the leader key on a dedicated connection (it
dies with the connection, so a crashed leader frees it at once); standbys try again every
``standby_retry`` seconds and end the session of a leader that holds the lock without
heartbeating for ``leader_timeout`` seconds (:func:`end_stale_leader`). Each election
records a new term (``epoch``), fenced (:func:`elect`, :func:`fence`): once a term has
begun, nothing is written under an older one. :class:`LeaderHeartbeat` says, from its own
thread and connection, that the leader is alive.

The leader's and the term's advisory keys come from the database's secret seed
(``pgsched_internal.internal_key_v1``, migration 0027), in the statements that take them:
no tenant's login can compute them, so none can hold them (:func:`internal_key` reads one,
for the installation's logins and tests).
"""

from __future__ import annotations

import logging
import threading

import psycopg

from ..db import Database, Row, Session, connect
from ..deadline import Deadline
from ..errors import PgschedError

# Every scheduler module logs as "pgsched.scheduler", the name its log lines always had.
log = logging.getLogger("pgsched.scheduler")

# Seconds a statement (or the election's transaction) on the leader's lock connection may go
# without a reply before its socket is cut (pgsched.deadline): the election may wait up to
# _FENCE_WAIT_MS for each session of an older term it ends.
LOCK_DEADLINE = 60.0
# How long an election waits for each session it ends to exit (pg_terminate_backend).
_FENCE_WAIT_MS = 5000


class TermOver(PgschedError):
    """This scheduler's term is no longer the current one: another scheduler was elected
    since. Nothing was written; the old leader stands by. Raised by :func:`tick` and
    :func:`rescue` when given an epoch; it never leaves the scheduler process."""


def fence(tx: Session, epoch: int | None) -> None:
    """The first two statements of a transaction that writes under ``epoch``: the term key
    shared, then the check that ``epoch`` is current (sql/scheduler.sql explains why two).
    Raises TermOver when it is not; does nothing for ``epoch`` None (outside every term)."""
    if epoch is None:
        return
    tx.exec("scheduler_term_share")
    row = tx.one("scheduler_term_current", epoch=epoch)
    if not (row and row["current"]):
        raise TermOver(f"term {epoch} is over: another scheduler was elected since")


def internal_key(db: Database | Session, purpose: str) -> int:
    """The advisory key of one of pgsched's own locks (``purpose``: leader, term, usage,
    alert, rollup; migration 0027), from the secret seed. Only an installation-wide login
    (pgsched_instance, the owner) may ask: a tenant's gets PgschedError (insufficient
    privilege)."""
    row = db.one("scheduler_internal_key", purpose=purpose)
    assert row is not None  # a function's value: one row
    return int(row["key"])


def try_lock(lock: Session) -> bool:
    """Whether the session ``lock`` holds the leader lock now (taken if free)."""
    row = lock.one("scheduler_try_lock")
    return bool(row and row["acquired"])


def end_stale_leader(db: Database, leader_timeout: float) -> list[Row]:
    """End the session of a leader that holds the lock but has not heartbeated for
    ``leader_timeout`` seconds (a hung process, not a dead one), freeing the lock. Returns
    the leaders ended (``holder``, ``epoch``, ``silent_seconds``, ``pid``), each logged."""
    hung = db.many("scheduler_end_stale_leader", seconds=leader_timeout)
    for row in hung:
        log.error(
            "leader %s (term %s) has not heartbeated for %.1fs although it holds the lock: "
            "ended its session (pid %s) to take over",
            row["holder"],
            row["epoch"],
            row["silent_seconds"],
            row["pid"],
        )
    return hung


def elect(lock: Session, holder: str, stop: threading.Event) -> int | None:
    """Record a new term for ``holder``, whose session ``lock`` holds the leader lock, once
    no transaction of an older term can write any more: the sessions holding the term key
    are ended (an old leader's, frozen or slow; each waited for up to 5 s to exit), then the
    key is taken exclusively in the election's own transaction, tried again every 50 ms
    until granted. Returns the new term, or None when ``stop`` was set first. Raises
    PgschedError when the lock session fails."""
    announced = False
    while not stop.is_set():
        with lock.transaction() as tx:
            for ended in tx.many("scheduler_fence_end", wait_ms=_FENCE_WAIT_MS):
                log.warning(
                    "ended session %s of an older term, which could still write (%s)",
                    ended["pid"],
                    "it exited" if ended["ended"] else "it has not exited yet",
                )
            taken = tx.one("scheduler_fence_take")
            if taken and taken["fenced"]:
                elected = tx.one("scheduler_elect", holder=holder)
                assert elected is not None  # INSERT ... ON CONFLICT DO UPDATE RETURNING: one row
                return int(elected["epoch"])
        if not announced:
            log.warning(
                "scheduler %s waits for an older term's transactions to end before leading", holder
            )
            announced = True
        stop.wait(0.05)
    return None


class LeaderHeartbeat:
    """Every ``interval`` seconds while started, on a connection of its own (never the
    pool's: a busy pool must not make a busy leader look hung): term ``epoch``'s leader is
    alive (``scheduler_leader_heartbeat``). A process that hangs stops this too, so a
    standby can tell a hung leader from a busy one. Ends by itself once another term has
    begun. ``start()``/``stop()`` may be called twice; a statement without a reply for
    ``leader_timeout`` seconds has its connection cut and opened again."""

    def __init__(self, dsn: str, epoch: int, leader_timeout: float, interval: float = 1.0):
        self.dsn, self.epoch, self.leader_timeout, self.interval = (
            dsn,
            epoch,
            leader_timeout,
            interval,
        )
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, daemon=True, name="pgsched-leader-heartbeat"
            )
            self._thread.start()

    def stop(self) -> None:
        """Tell it to stop (its thread ends after its statement in progress)."""
        self._stop.set()

    def beat(self, conn: psycopg.Connection[Row], deadline: Deadline) -> bool:
        """One heartbeat on ``conn``; False when another term has begun."""
        return (
            Session(conn, deadline).one("scheduler_leader_heartbeat", epoch=self.epoch) is not None
        )

    def _run(self) -> None:
        conn: psycopg.Connection[Row] | None = None
        deadline = Deadline(self.leader_timeout, name="leader heartbeat", stop=self._stop)
        try:
            while not self._stop.is_set():
                try:
                    if conn is None or conn.closed:
                        conn = connect(self.dsn, application_name="pgsched scheduler heartbeat")
                    if not self.beat(conn, deadline):
                        return  # another term has begun; the leader finds out at its ping
                except (psycopg.Error, PgschedError) as exc:
                    log.warning("leader heartbeat failed: %s", exc)
                    if conn is not None:
                        conn.close()
                    conn = None
                self._stop.wait(self.interval)
        finally:
            if conn is not None:
                conn.close()

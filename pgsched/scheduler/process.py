"""One scheduler process: campaigns for leadership, and while it leads, ticks and runs the
leader's services (:class:`Scheduler`); its settings (:class:`SchedulerConfig`).

Leadership rests on the lock connection alone: a pooled connection that breaks (ended
from outside, a restart) fails that one statement, which is tried again, and the leader
leads on while its lock connection answers. Between ticks it sleeps until the earliest
``next_fire_at`` or a ``pgsched_task`` notification, whichever is first, on the lock
connection.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from dataclasses import dataclass

import psycopg

from .. import webhooks
from ..clock import Clock, ClockProbe, ServerClock
from ..db import Database, Session, connect
from ..deadline import Deadline
from ..errors import PgschedError, TransientError
from ..service import IntervalService, stop_all
from .access_prune import AccessPrune
from .leadership import LOCK_DEADLINE, LeaderHeartbeat, TermOver, elect, end_stale_leader, try_lock
from .observe import AlertDetection, StatsRollUp
from .partitions import Partitions
from .rescue import Rescue
from .tick import tick
from .usage import UsageJob
from .worker_prune import WorkerPrune

log = logging.getLogger("pgsched.scheduler")  # the name its log lines always had

#: seconds a standing-down leader waits for its services to end their rounds (the old
#: scheduler did not wait for them; a healthy round takes milliseconds)
SERVICE_STOP_WAIT = 1.0
#: seconds the leader waits before it tries again a task whose window lock an enqueue held
#: (tick's ``busy``): an application's transaction may stay open for a while
BUSY_RETRY = 1.0


@dataclass
class SchedulerConfig:
    """``batch``: tasks per tick transaction; ``max_sleep``: longest sleep between ticks
    (seconds; the poll fallback); ``retention_days``: history kept (days, UTC);
    ``premake_days``: partitions created ahead; ``maintenance_interval`` seconds;
    ``rescue_interval``: how often (seconds) the leader looks for dead workers, in its own
    thread (a worker's executions are taken back at most worker_dead_after_heartbeats x its
    heartbeat interval + this after its last heartbeat);
    ``leader_timeout``: seconds a leader may go without heartbeating (every second, from
    its own thread) before a standby ends its session and takes over; ``parallel``:
    connections that take batches of a burst at once (a burst's work is the database's,
    and while workers drain on the same cores its statements mostly wait for CPU: 100,000
    fires took 18.0 s on 2 connections and 10.1 s on 4, docs/performance.md);
    ``observe_interval``: how often (seconds) the leader rolls up statistics and detects
    alerts (its webhook sender runs in its own thread all the while); ``usage_interval``:
    how often (seconds) the leader measures tenants' compute and log bytes against their
    quotas and raises quota alerts (:mod:`pgsched.scheduler.usage`)."""

    batch: int = 1000
    max_sleep: float = 5.0
    standby_retry: float = 1.0
    retention_days: int = 30
    premake_days: int = 3
    maintenance_interval: float = 3600.0
    rescue_interval: float = 1.0
    leader_timeout: float = 10.0
    parallel: int = 4
    observe_interval: float = 60.0
    usage_interval: float = 60.0
    name: str | None = None


class Scheduler:
    """One scheduler process: ``run(stop)`` blocks until ``stop`` is set. ``clock`` (default:
    the database's, :class:`~pgsched.clock.ServerClock`) gives the instant each tick fires
    at and the services run at."""

    def __init__(self, db: Database, config: SchedulerConfig, clock: Clock | None = None):
        self.db = db
        self.config = config
        self.clock = clock or ServerClock(db)
        self.holder = config.name or f"{socket.gethostname()}:{os.getpid()}"
        self.epoch: int | None = None
        self.node_id: int | None = None
        self._probe = ClockProbe()  # this host's clock offset from the database, sent with _seen
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def services(self, epoch: int) -> list[IntervalService]:
        """The leader's services for term ``epoch``, not started: the webhook sender, the
        statistics roll-up, alert detection, the usage job, the rescue, the registry of workers, the web
        admin's audit events and sessions and, last,
        the partitions (whose first round the leader runs itself before its first tick)."""
        c, db, clock = self.config, self.db, self.clock
        return [
            webhooks.Sender(db, clock=clock),
            StatsRollUp(db, clock, c.observe_interval),
            AlertDetection(db, clock, c.observe_interval),
            UsageJob(db, clock, c.usage_interval),
            Rescue(db, clock, epoch, c.rescue_interval),
            WorkerPrune(db, clock, c.maintenance_interval),
            AccessPrune(db, clock, c.maintenance_interval),
            Partitions(db, clock, c.retention_days, c.premake_days, c.maintenance_interval),
        ]

    def start(self) -> None:
        """Run :meth:`run` in a daemon thread until :meth:`stop` (for a program that embeds
        a scheduler; the CLI runs ``run(stop)`` itself). Does nothing while it runs."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self.run, args=(self._stop,), daemon=True, name="pgsched-scheduler"
        )
        self._thread.start()

    def stop(self, timeout: float = 15.0) -> None:
        """Stop what :meth:`start` started and wait up to ``timeout`` seconds for it (it
        stands down and marks itself stopped). Safe to call twice, and before start."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def run(self, stop: threading.Event) -> None:
        """Campaign and, while leading, tick, until ``stop`` is set."""
        self.node_id = None
        try:
            self._run(stop)
        finally:
            if self.node_id is not None:
                try:
                    self.db.exec("scheduler_node_stop", id=self.node_id)
                except PgschedError as exc:
                    log.warning("could not mark scheduler %s stopped: %s", self.holder, exc)
            log.info("scheduler %s stopped", self.holder)

    def _seen(self, role: str) -> None:
        """Record this process in ``scheduler_node`` (for status and failover figures)."""
        try:
            if self.node_id is None:
                row = self.db.one(
                    "scheduler_node_register",
                    name=self.holder,
                    hostname=socket.gethostname(),
                    pid=os.getpid(),
                )
                assert row is not None
                self.node_id = row["id"]
            self.db.exec(
                "scheduler_node_seen",
                id=self.node_id,
                role=role,
                epoch=self.epoch,
                **self._probe.send(),
            )
            self._probe.received()
        except PgschedError as exc:
            log.warning("scheduler %s could not record itself as %s: %s", self.holder, role, exc)

    def _run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                conn = connect(self.db.dsn, application_name="pgsched scheduler leader")
            except PgschedError as exc:
                log.warning("scheduler cannot reach the database (%s); retrying", exc)
                stop.wait(self.config.standby_retry)
                continue
            try:
                with conn:
                    # a lock connection gone silent (a proxy that stopped forwarding) must not
                    # hang the leader while its heartbeat thread, on another connection, beats on
                    self._campaign(
                        Session(conn, Deadline(LOCK_DEADLINE, name="leader lock", stop=stop)), stop
                    )
            except (psycopg.Error, PgschedError) as exc:
                if self.epoch is not None:
                    log.error("leader connection lost (%s): no longer leading", exc)
                self.epoch = None
                stop.wait(self.config.standby_retry)

    def _campaign(self, lock: Session, stop: threading.Event) -> None:
        """Stand by until the leader lock is ours, then lead one term."""
        announced = False
        while not stop.is_set():
            if try_lock(lock):
                break
            if not announced:
                log.info("scheduler %s is standby; another scheduler leads", self.holder)
                announced = True
            self._seen("standby")
            end_stale_leader(self.db, self.config.leader_timeout)
            stop.wait(self.config.standby_retry)
        else:
            return
        self.epoch = elect(lock, self.holder, stop)
        if self.epoch is None:
            return
        log.info("scheduler %s is leader (term %d)", self.holder, self.epoch)
        heartbeat = LeaderHeartbeat(self.db.dsn, self.epoch, self.config.leader_timeout)
        heartbeat.start()
        *others, partitions = services = self.services(self.epoch)
        for service in others:
            service.start()
        try:
            self._lead(lock, stop, partitions)
        finally:
            # Services first, while the heartbeat still says this leader lives, and only
            # briefly: a round stuck on a lock must not hold the leader lock (and the
            # standby) for long; the round's own transaction ends it safely later.
            busy = stop_all(services, SERVICE_STOP_WAIT)
            if busy:
                log.info(
                    "scheduler %s stands down; still ending a round: %s",
                    self.holder,
                    ", ".join(busy),
                )
            heartbeat.stop()

    def _lead(self, lock: Session, stop: threading.Event, partitions: IntervalService) -> None:
        """Tick until ``stop``, the term ends (TermOver: stand by) or the lock connection
        fails (its error is raised: campaign again). Errors of pooled connections are
        logged and the work tried again: leadership rests on the lock connection alone.
        The first round of ``partitions`` runs here, before the first tick (the day's
        partitions exist before anything fires), then in its own thread."""
        lock.exec("scheduler_listen")
        while not stop.is_set():
            ping = lock.one("scheduler_ping")  # raises if the lock connection is gone: stop acting
            assert ping is not None
            self._seen("leader")
            if not partitions.running:
                partitions.start(delay=partitions.round(ping["now"]) or 0.0)  # the database's clock
            try:
                busy: list[int] = []  # windowed tasks left due: their window lock was held
                tick(
                    self.db,
                    self.epoch,
                    self.clock.now(),
                    self.config.batch,
                    self.config.parallel,
                    busy,
                )
            except TermOver as exc:
                log.error("%s: no longer leading; standing by", exc)
                break
            except (
                TransientError
            ) as exc:  # a deadlock or serialization failure: its batch rolled back
                log.warning(
                    "scheduler tick gave way to another transaction (%s); ticking again", exc
                )
                stop.wait(0.05)
                continue
            except (PgschedError, psycopg.Error) as exc:
                # A pooled connection broke (ended from outside, a restart): this leader still
                # holds the lock if the ping above answers, so it ticks again on another one.
                log.warning("scheduler tick failed (%s); ticking again", exc)
                stop.wait(0.1)
                continue
            except Exception:
                log.exception("scheduler tick failed; retrying in %.1fs", self.config.standby_retry)
                stop.wait(self.config.standby_retry)
                continue
            lock.exec("scheduler_record_tick", epoch=self.epoch)
            self._sleep(lock, stop, busy)
        self.epoch = None

    def _sleep(self, lock: Session, stop: threading.Event, busy: list[int]) -> None:
        """Until the earliest task is due (the database says in how many seconds: no host
        clock is compared with a stored time), at most ``max_sleep``; a notification or a
        dropped connection ends it early. Tasks the tick left due (``busy``: their window
        lock was held) are tried again after ``BUSY_RETRY`` seconds, not at once."""
        wait = min(self.config.max_sleep, BUSY_RETRY) if busy else self.config.max_sleep
        try:
            row = self.db.one("scheduler_next_due_except", busy=busy)
        except PgschedError as exc:  # a pooled connection: not leadership's business
            log.warning("could not read when the next task is due (%s)", exc)
            row, wait = None, min(wait, self.config.standby_retry)
        if row and row["seconds"] is not None:
            wait = min(wait, max(row["seconds"], 0.0))
        if wait <= 0:
            return
        # Sleep on the lock connection: a notification or a dropped connection wakes us.
        deadline = time.monotonic() + wait
        while not stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            for _ in lock.conn.notifies(timeout=min(left, 0.5), stop_after=1):
                return

"""The scheduler process: turns due schedules into executions, and keeps history
partitions in shape. Any number may run; one leads.

Leadership is ``pg_try_advisory_lock`` held on a dedicated connection (it dies with the
connection, so a crashed leader frees it at once); standbys retry every second. Each
election records a new term (``epoch``) that the leader writes on the executions it
creates. Correctness does not rest on leadership: an execution is unique on (task,
scheduled time), so a second leader would hit the constraint, not run a fire twice.

Terms are fenced: every transaction that creates or requeues anything under a term (a
tick's batch, a rescue) first takes the term key (:data:`TERM_LOCK_KEY`) shared and then
checks, in a later statement, that its term is still the current one; an election ends the
sessions holding that key, takes it exclusively, and only then records the new term. So an
old leader, frozen mid-tick (SIGSTOP, a paused VM) or merely slow to notice, holds no task
back from the new one and creates nothing once the new term has begun: its tick finds its
term over, creates nothing, and it stands by (:class:`TermOver`). Leadership rests on the
lock connection alone: a pooled connection that breaks (ended from outside, a restart)
fails that one statement, which is tried again, and the leader leads on while its lock
connection answers. The pool's transactions idle for ``leader_timeout`` are ended by the
server (the CLI sets idle_in_transaction_session_timeout), so a frozen scheduler's locks
do not outlive the time after which it counts as hung even when no standby runs.

Rescue runs in its own thread every ``rescue_interval`` seconds, whatever the tick sleeps:
a worker's executions are taken back at most ``worker_dead_after_heartbeats`` x its
heartbeat interval + ``rescue_interval`` after its last heartbeat (16 s with the defaults,
4 s with a 1 s heartbeat); a new leader first waits one full dead-worker window.

A tick locks the front of ``task_next_fire_idx`` (due tasks) with SKIP LOCKED, grouped by
the schedule and due time they share; computes each group's fires once; inserts their
executions and moves each ``next_fire_at`` on in the task's time zone in one statement,
and commits: one NOTIFY per tick. Missed fires after downtime collapse into one catch-up
run (misfire policy ``once``). Between ticks it sleeps until the earliest ``next_fire_at``
or a ``pgsched_task`` notification, whichever is first.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import NamedTuple

import psycopg

from . import alerts, stats, webhooks
from .clock import ClockProbe
from .db import Database, Row, Session, connect
from .deadline import Deadline
from .errors import PgschedError, TransientError
from .schedule import Schedule
from .taskspec import schedule_of as _schedule

log = logging.getLogger(__name__)

# pg_advisory_lock key of the leader ('pgsched' + 2): one key per purpose.
LEADER_LOCK_KEY = 0x7067736368656402
# Key of the term fence ('pgsched' + 3): held shared by each transaction that writes under a
# term, exclusively by an election (sql/scheduler.sql, scheduler_term_share).
TERM_LOCK_KEY = 0x7067736368656403
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
    alerts (its webhook sender runs in its own thread all the while)."""

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
    name: str | None = None


def _plan(row: dict, compute: Callable[[Schedule], datetime | None]) -> tuple[datetime | None, str | None]:
    """``compute(schedule)`` for one task; (None, reason) when it cannot be computed or a
    cron/interval schedule has no next fire (the task is then paused, not retried forever,
    and the reason is stored on it: ``task.pause_reason``)."""
    try:
        nxt = compute(_schedule(row))
    except PgschedError as exc:  # a stored time zone the tz database has dropped: names the field
        return None, str(exc)
    except Exception as exc:  # one task's bad data must not stop every other task
        return None, f"{type(exc).__name__}: {exc}"
    if nxt is None and row["schedule_kind"] in ("cron", "interval"):
        return None, "the schedule has no next fire time"
    return nxt, None


@dataclass(frozen=True)
class Misfire:
    """How missed fires are handled (the ``setting`` table): ``grace`` seconds late before
    a fire counts as missed (policy ``skip``); ``cap``: most catch-up runs per task (policy
    ``all``)."""

    grace: float = 60.0
    cap: int = 100

    @classmethod
    def load(cls, db: Database | Session) -> Misfire:
        values = {r["name"]: r["value"] for r in db.many("scheduler_settings")}
        return cls(float(values.get("misfire_grace_seconds", 60)), int(values.get("misfire_all_cap", 100)))


class CatchUp(NamedTuple):
    """What a due task does at a tick (:func:`catch_up`): the fire times to ``run`` now,
    its ``next`` fire time (after now; None: never again), how many due fires are
    ``missed`` and not run, and the ``latest`` due fire, which becomes its ``last_fire_at``
    (no fire at or before it is ever created again: migration 0010)."""

    run: list[datetime]
    next: datetime | None
    missed: int
    latest: datetime


def catch_up(schedule: Schedule, policy: str, due_at: datetime, now: datetime, misfire: Misfire) -> CatchUp:
    """For a task due at ``due_at`` (UTC) and ticked at the database's ``now``: which of
    its due fires (``due_at`` and every fire after it up to ``now``) run.

    Policies (the field's: APScheduler's coalesce, Quartz's misfire instructions):
    ``once`` runs one, for the latest due fire (Quartz's fire-once-now, APScheduler's
    coalesce); ``skip`` runs only a fire that is on time, i.e. the latest due fire when it
    is at most ``misfire.grace`` seconds late, and nothing else; ``all`` runs every due
    fire, at most ``misfire.cap`` of them (the earliest). Every due fire not run counts as
    missed, however many: the count is exact (:meth:`Schedule.walk`).
    """
    span = schedule.walk(due_at, now)
    due, latest = 1 + span.fires, span.latest or due_at
    if policy == "all":
        run, at = [due_at], due_at
        while len(run) < min(misfire.cap, due) and (nxt := schedule.next_after(at)) is not None:
            run.append(nxt)
            at = nxt
    elif policy == "skip":
        run = [latest] if (now - latest).total_seconds() <= misfire.grace else []
    else:
        run = [latest]
    return CatchUp(run, span.next, due - len(run), latest)


def tick(db: Database, epoch: int | None, now: datetime, batch: int = 1000, parallel: int = 1) -> int:
    """Fire every task due at ``now`` (UTC), as its misfire policy says; plan tasks that
    have no next fire time.

    Returns the number of executions created or found already created (a fire some other
    leader already inserted counts too). Each batch of ``batch`` tasks is one transaction,
    fenced by ``epoch`` (see the module docstring): it raises :class:`TermOver`, having
    written nothing, once the database records another term (``epoch`` None: a tick outside
    every term, for tests and tools). When a batch comes back full (a burst), up to
    ``parallel`` connections take batches at once: SKIP LOCKED gives each its own tasks,
    and the database's row work, most of a burst's time, spreads over its cores. An error
    of any batch is raised once all have stopped (:class:`TermOver` first).
    """
    memo = _Memo(now)
    fired, full = _tick_batch(db, epoch, now, batch, memo)
    if not full:
        return fired
    counts: list[int] = []
    errors: list[BaseException] = []

    def drain() -> None:
        total, more = 0, True
        try:
            while more and not errors:
                n, more = _tick_batch(db, epoch, now, batch, memo)
                total += n
        except Exception as exc:  # raised in the caller's thread below, not lost in a helper's
            errors.append(exc)
        counts.append(total)

    helpers = [threading.Thread(target=drain, name=f"pgsched-tick-{i}") for i in range(1, max(parallel, 1))]
    for t in helpers:
        t.start()
    try:
        drain()
    finally:
        for t in helpers:
            t.join()
    if errors:
        raise next((e for e in errors if isinstance(e, TermOver)), errors[0])
    return fired + sum(counts)


def _fence(tx: Session, epoch: int | None) -> None:
    """The first two statements of a transaction that writes under ``epoch``: the term key
    shared, then the check that ``epoch`` is current (sql/scheduler.sql explains why two).
    Raises TermOver when it is not."""
    if epoch is None:
        return
    tx.exec("scheduler_term_share", key=TERM_LOCK_KEY)
    row = tx.one("scheduler_term_current", epoch=epoch)
    if not (row and row["current"]):
        raise TermOver(f"term {epoch} is over: another scheduler was elected since")


_MEMO_SIZE = 10_000


class _Memo:
    """Tasks that share a schedule share its fire times: computed once per tick (a burst
    of 100,000 tasks on a few expressions is a few computations, not 100,000)."""

    def __init__(self, now: datetime):
        self.now = now
        self.planned: dict[tuple, CatchUp] = {}
        self.firsts: dict[tuple, datetime | None] = {}

    def first(self, s: Schedule, fired_through: datetime | None) -> datetime | None:
        """:meth:`Schedule.first_fire` at this tick's ``now``, for a task that last fired
        at ``fired_through``."""
        key = (s.kind, s.expr, s.tz, s.anchor)
        if key not in self.firsts:
            if len(self.firsts) >= _MEMO_SIZE:
                self.firsts.clear()
            self.firsts[key] = s.first_fire(self.now)
        first = self.firsts[key]
        if first is not None and fired_through is not None and first <= fired_through:
            return s.first_fire(self.now, fired_through)  # not shared: rare (a resumed task)
        return first

    def catch_up(self, s: Schedule, policy: str, due_at: datetime, misfire: Misfire) -> CatchUp:
        key = (s.kind, s.expr, s.tz, s.anchor, policy, due_at)
        found = self.planned.get(key)
        if found is None:
            if len(self.planned) >= _MEMO_SIZE:  # all different: memory stays flat
                self.planned.clear()
            found = self.planned[key] = catch_up(s, policy, due_at, self.now, misfire)
        return found


# A tick that fires more tasks than this logs one line for the batch, not one per task.
_LOG_EACH_UP_TO = 20


def _tick_batch(db: Database, epoch: int | None, now: datetime, batch: int, memo: _Memo) -> tuple[int, bool]:
    """One transaction of :func:`tick`: plan up to ``batch`` unplanned tasks and fire up to
    ``batch`` due ones. Returns (executions created, whether a batch came back full).

    Due tasks come grouped by schedule and due time (``scheduler_due_groups``): the fire
    times are computed once per group and all of the batch's fires are one statement
    (``scheduler_fire``), so a burst costs Python nothing per task."""
    fired = 0
    with db.transaction() as tx:
        _fence(tx, epoch)
        broken: list[int] = []  # tasks to pause, with the reason of each in ``why``
        why: list[str] = []
        unplanned = tx.many("scheduler_unplanned_tasks", limit=batch)
        if unplanned:
            firsts = []
            for row in unplanned:
                def first(s: Schedule, row: dict = row) -> datetime | None:
                    return memo.first(s, row["last_fire_at"])
                nxt, problem = _plan(row, first)
                if problem:
                    log.error("task %s: cannot plan its schedule (%s); pausing it", row["name"], problem)
                    broken.append(row["id"])
                    why.append(f"the scheduler cannot compute its schedule: {problem}")
                firsts.append(nxt)
            tx.exec("task_plan", ids=[r["id"] for r in unplanned], next_fire_at=firsts,
                    fired_at=[None] * len(unplanned), missed=[0] * len(unplanned))
        groups = tx.many("scheduler_due_groups", now=now, limit=batch, names=_LOG_EACH_UP_TO)
        due = sum(g["tasks"] for g in groups)
        if groups:
            misfire = Misfire.load(tx)
            each = due <= _LOG_EACH_UP_TO
            nexts, missed, fired_through, run_group, run_at = [], [], [], [], []
            dag_ids: list[int] = []
            dag_fires: list[datetime] = []
            for n, group in enumerate(groups, 1):
                due_at = group["next_fire_at"]
                decided = CatchUp([due_at], None, 0, due_at)

                def plan(s: Schedule, group: dict = group) -> datetime | None:
                    nonlocal decided
                    decided = memo.catch_up(s, group["misfire_policy"], group["next_fire_at"], misfire)
                    return decided.next
                nxt, problem = _plan(group, plan)
                if problem:
                    for name in _names(tx, group):
                        log.error("task %s: cannot compute its next fire (%s); pausing it after this fire",
                                  name, problem)
                    members = _ids(group["ids"])
                    broken += members
                    why += [f"the scheduler cannot compute its next fire: {problem}"] * len(members)
                    decided = CatchUp([due_at], None, 0, due_at)
                runs, lost = decided.run, decided.missed
                if lost:
                    for name in _names(tx, group):
                        log.warning("task %s: %d missed fire(s) not run (misfire policy %s)", name, lost,
                                    group["misfire_policy"])
                for fire in runs:
                    run_group.append(n)
                    run_at.append(fire)
                    if each:
                        for name in group["names"]:
                            log.info("fired %s for %s", name, fire.isoformat())
                if group["dags"]:  # some of the group may be DAGs' tasks (dag runs, not executions)
                    for task_id in _ids(group["ids"]):
                        dag_ids += [task_id] * len(runs)
                        dag_fires += runs
                nexts.append(nxt)
                missed.append(lost)
                fired_through.append(decided.latest)
                fired += group["tasks"] * len(runs)
            if not each and run_at:
                log.info("fired %d task(s) due from %s to %s", due, min(run_at).isoformat(),
                         max(run_at).isoformat())
            ids = [g["ids"] for g in groups]
            # The fires first, then last_fire_at moves past them: the insert's statement
            # trigger checks each fire against the task's last_fire_at (migration 0010).
            tx.exec("scheduler_fire", ids=ids, run_group=run_group, run_at=run_at, epoch=epoch)
            if dag_ids:
                for run in tx.many("scheduler_fire_dags", ids=dag_ids, fire_at=dag_fires, epoch=epoch):
                    if run["run_id"] is not None:
                        log.info("DAG %s: run %s started for %s", run["name"], run["run_id"],
                                 run["fire_at"].isoformat())
            tx.exec("scheduler_advance", ids=ids, next_fire_at=nexts, fired_at=fired_through, missed=missed)
        if broken:
            tx.exec("task_disable", ids=broken, reasons=why)
    return fired, due >= batch or len(unplanned) >= batch


def _ids(text: str) -> list[int]:
    """Task ids from the text of a bigint[] (``{1,2,3}``)."""
    inner = text.strip("{}")
    return [int(i) for i in inner.split(",")] if inner else []


def _names(tx: Session, group: dict) -> list[str]:
    """Every task name of a due group (the query gives the first few)."""
    if len(group["names"]) >= group["tasks"]:
        return list(group["names"])
    return [r["name"] for r in tx.many("scheduler_task_names", ids=group["ids"])]


def rescue(db: Database, epoch: int | None = None) -> list[dict]:
    """Declare workers silent for too long dead and put what they ran back in the queue
    (``pgsched.rescue_v1``: every running execution without a live holder that reports
    it, migration 0015), waking the workers in the same transaction when any is pending
    again; cancel what is left running of stopping DAG runs (``pgsched.dag_sweep_v1``).
    Returns one row per execution: id, worker, outcome (requeued, unclaimed: back in the
    queue as if never claimed, because it surely never started, dropped: such an execution
    of a task deleted meanwhile, dead or cancelled; the rules are in migration 0008).
    ``epoch``: the term it runs under, fenced as a tick's batch (raises TermOver)."""
    with db.transaction() as tx:
        _fence(tx, epoch)
        rows = tx.many("scheduler_rescue")
        unclaimed = [r["execution_id"] for r in rows if r["outcome"] == "unclaimed"]
        if unclaimed:
            dropped = {r["id"] for r in tx.many("scheduler_rescue_drop_deleted", ids=unclaimed)}
            for r in rows:
                if r["execution_id"] in dropped:
                    r["outcome"] = "dropped"
        if any(r["outcome"] in ("requeued", "unclaimed") for r in rows):
            tx.exec("execution_wake")  # pending again by UPDATE: the insert trigger sends none
    for r in rows:
        log.warning("rescued execution %s from dead worker %s: %s", r["execution_id"], r["worker_id"], r["outcome"])
    swept = db.one("scheduler_dag_sweep")
    if swept and swept["cancelled"]:
        log.info("cancelled %d execution(s) of stopping DAG runs", swept["cancelled"])
    return rows


def maintain_partitions(db: Database, now: datetime, retention_days: int, premake_days: int,
                        lock_timeout_ms: int = 500) -> dict:
    """Create the daily partitions from yesterday to ``premake_days`` ahead, drop those
    that ended more than ``retention_days`` before ``now`` (never one holding a live
    execution), and count rows in the DEFAULT partitions. Returns what it did.

    Each step waits at most ``lock_timeout_ms`` for a lock (DETACH needs the parent
    exclusively); a partition it could not lock in time is listed under ``busy`` and tried
    again next time.
    """
    today: date = now.astimezone(timezone.utc).date()
    report: dict = {"created": [], "dropped": [], "kept_live": [], "busy": []}
    try:
        with db.transaction() as tx:
            tx.one("partition_lock_timeout", ms=lock_timeout_ms)
            report["created"] = [r["partition_name"] for r in tx.many(
                "partition_ensure", from_day=today - timedelta(days=1), days=premake_days + 2)]
    except TransientError:
        report["busy"].append("(creating partitions)")
    for part in db.many("partition_expired", cutoff=now - timedelta(days=retention_days)):
        if part["live"]:
            report["kept_live"].append(part["partition_name"])
            continue
        try:
            with db.transaction() as tx:
                tx.one("partition_lock_timeout", ms=lock_timeout_ms)
                row = tx.one("partition_drop", partition_name=part["partition_name"], parent=part["parent"])
            (report["dropped"] if row and row["dropped"] else report["kept_live"]).append(part["partition_name"])
        except TransientError:
            report["busy"].append(part["partition_name"])
    strays = db.one("partition_default_rows") or {}
    report["default_rows"] = {k: v for k, v in strays.items() if v}
    if report["created"] or report["dropped"]:
        log.info("partitions: created %d, dropped %d", len(report["created"]), len(report["dropped"]))
    if report["kept_live"]:
        log.warning("partitions past retention kept because they hold live executions: %s", report["kept_live"])
    if report["busy"]:
        log.warning("partition maintenance gave way to busy tables (will retry): %s", report["busy"])
    if report["default_rows"]:
        log.warning("rows outside every daily partition (in the DEFAULT partitions): %s", report["default_rows"])
    return report


def prune_workers(db: Database) -> int:
    """Remove the rows of workers stopped or dead for longer than the
    ``worker_retention_days`` setting (7) that hold no running execution
    (``pgsched.worker_prune_v1``); the rescue never needed them (migration 0015). Returns
    how many were removed. Part of the leader's maintenance."""
    row = db.one("scheduler_worker_prune")
    pruned = int(row["pruned"]) if row else 0
    if pruned:
        log.info("removed %d row(s) of workers stopped long ago", pruned)
    return pruned


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
            for ended in tx.many("scheduler_fence_end", key=TERM_LOCK_KEY, wait_ms=_FENCE_WAIT_MS):
                log.warning("ended session %s of an older term, which could still write (%s)", ended["pid"],
                            "it exited" if ended["ended"] else "it has not exited yet")
            taken = tx.one("scheduler_fence_take", key=TERM_LOCK_KEY)
            if taken and taken["fenced"]:
                elected = tx.one("scheduler_elect", holder=holder)
                assert elected is not None  # INSERT ... ON CONFLICT DO UPDATE RETURNING: one row
                return int(elected["epoch"])
        if not announced:
            log.warning("scheduler %s waits for an older term's transactions to end before leading", holder)
            announced = True
        stop.wait(0.05)
    return None


def observe(db: Database) -> None:
    """The leader's observability chores: the statistics roll-up, then alert detection
    (each its own transaction; a failure is logged and tried again next time)."""
    try:
        stats.roll_up(db)
    except PgschedError as exc:
        log.error("statistics roll-up failed: %s", exc)
    try:
        alerts.detect(db)
    except PgschedError as exc:
        log.error("alert detection failed: %s", exc)


class Scheduler:
    """One scheduler process: ``run(stop)`` blocks until ``stop`` is set."""

    def __init__(self, db: Database, config: SchedulerConfig):
        self.db = db
        self.config = config
        self.holder = config.name or f"{socket.gethostname()}:{os.getpid()}"
        self.epoch: int | None = None
        self._clock = ClockProbe()  # this host's clock offset from the database, sent with _seen

    def run(self, stop: threading.Event) -> None:
        self.node_id: int | None = None
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
                row = self.db.one("scheduler_node_register", name=self.holder, hostname=socket.gethostname(),
                                  pid=os.getpid())
                assert row is not None
                self.node_id = row["id"]
            self.db.exec("scheduler_node_seen", id=self.node_id, role=role, epoch=self.epoch,
                         **self._clock.send())
            self._clock.received()
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
                    self._campaign(Session(conn, Deadline(LOCK_DEADLINE, name="leader lock", stop=stop)), stop)
            except (psycopg.Error, PgschedError) as exc:
                if self.epoch is not None:
                    log.error("leader connection lost (%s): no longer leading", exc)
                self.epoch = None
                stop.wait(self.config.standby_retry)

    def _campaign(self, lock: Session, stop: threading.Event) -> None:
        announced = False
        while not stop.is_set():
            row = lock.one("scheduler_try_lock", key=LEADER_LOCK_KEY)
            if row and row["acquired"]:
                break
            if not announced:
                log.info("scheduler %s is standby; another scheduler leads", self.holder)
                announced = True
            self._seen("standby")
            for hung in self.db.many("scheduler_end_stale_leader", key=LEADER_LOCK_KEY,
                                     seconds=self.config.leader_timeout):
                log.error("leader %s (term %s) has not heartbeated for %.1fs although it holds the lock: "
                          "ended its session (pid %s) to take over", hung["holder"], hung["epoch"],
                          hung["silent_seconds"], hung["pid"])
            stop.wait(self.config.standby_retry)
        else:
            return
        self.epoch = elect(lock, self.holder, stop)
        if self.epoch is None:
            return
        log.info("scheduler %s is leader (term %d)", self.holder, self.epoch)
        leading = threading.Event()
        beat = threading.Thread(target=self._leader_heartbeat, args=(self.epoch, leading, stop), daemon=True,
                                name="pgsched-leader-heartbeat")
        beat.start()
        sender = webhooks.Sender(self.db)
        sender.start()
        observer = threading.Thread(target=self._observe, args=(leading, stop), daemon=True,
                                    name="pgsched-observer")
        observer.start()
        rescuer = threading.Thread(target=self._rescue, args=(self.epoch, leading, stop), daemon=True,
                                   name="pgsched-rescue")
        rescuer.start()
        try:
            self._lead(lock, stop)
        finally:
            leading.set()  # the heartbeat, observer and rescue threads end
            sender.stop()

    def _observe(self, done: threading.Event, stop: threading.Event) -> None:
        """Every ``observe_interval`` while leading, in its own thread (a slow roll-up
        never delays a tick): :func:`observe`."""
        while not (done.is_set() or stop.is_set()):
            observe(self.db)
            done.wait(self.config.observe_interval)

    def _rescue(self, epoch: int, done: threading.Event, stop: threading.Event) -> None:
        """While leading, in its own thread: :func:`rescue` every ``rescue_interval``
        seconds, whatever the tick sleeps (it slept up to ``max_sleep`` with nothing due,
        and rescued only when it woke: a dead worker was noticed up to 5 s late). First the
        new leader's grace (``scheduler_rescue_grace``): workers that could not heartbeat
        while there was no leader or no database get one full window to be heard again."""
        grace: float | None = None
        while grace is None and not (done.is_set() or stop.is_set()):
            try:
                row = self.db.one("scheduler_rescue_grace")
                grace = float(row["seconds"]) if row else 0.0
            except PgschedError as exc:
                log.warning("could not read the rescue grace (%s); trying again", exc)
                done.wait(self.config.rescue_interval)
        if grace:
            done.wait(grace)
        while not (done.is_set() or stop.is_set()):
            try:
                rescue(self.db, epoch)
            except TermOver as exc:
                log.warning("rescue stopped: %s", exc)  # the tick finds out too, and stands by
                return
            except PgschedError as exc:
                log.error("rescue of dead workers' executions failed: %s", exc)
            done.wait(self.config.rescue_interval)

    def _leader_heartbeat(self, epoch: int, done: threading.Event, stop: threading.Event) -> None:
        """Every second, on its own connection: this leader is alive. A process that hangs
        stops this too, so a standby can tell a hung leader from a busy one."""
        conn: psycopg.Connection[Row] | None = None
        beat_deadline = Deadline(self.config.leader_timeout, name="leader heartbeat", stop=stop)
        try:
            while not (done.is_set() or stop.is_set()):
                try:
                    if conn is None or conn.closed:
                        conn = connect(self.db.dsn, application_name="pgsched scheduler heartbeat")
                    if Session(conn, beat_deadline).one("scheduler_leader_heartbeat", epoch=epoch) is None:
                        return  # another term has begun; the main loop finds out at its ping
                except (psycopg.Error, PgschedError) as exc:
                    log.warning("leader heartbeat failed: %s", exc)
                    if conn is not None:
                        conn.close()
                    conn = None
                done.wait(1.0)
        finally:
            if conn is not None:
                conn.close()

    def _lead(self, lock: Session, stop: threading.Event) -> None:
        """Tick until ``stop``, the term ends (TermOver: stand by) or the lock connection
        fails (its error is raised: campaign again). Errors of pooled connections are
        logged and the work tried again: leadership rests on the lock connection alone."""
        lock.exec("scheduler_listen")
        next_maintenance = 0.0
        while not stop.is_set():
            ping = lock.one("scheduler_ping")  # raises if the lock connection is gone: stop acting
            assert ping is not None
            now = ping["now"]  # the database's clock decides, never this host's
            self._seen("leader")
            if time.monotonic() >= next_maintenance:
                next_maintenance = time.monotonic() + self._maintain(now)
            try:
                tick(self.db, self.epoch, self.db.now(), self.config.batch, self.config.parallel)
            except TermOver as exc:
                log.error("%s: no longer leading; standing by", exc)
                break
            except TransientError as exc:  # a deadlock or serialization failure: its batch rolled back
                log.warning("scheduler tick gave way to another transaction (%s); ticking again", exc)
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
            self._sleep(lock, stop)
        self.epoch = None

    def _maintain(self, now: datetime) -> float:
        """The leader's maintenance (partitions, then the registry of workers); returns the
        seconds until the next (a minute when something failed or gave way)."""
        interval = self.config.maintenance_interval
        try:
            done = maintain_partitions(self.db, now, self.config.retention_days, self.config.premake_days)
            if done["busy"]:
                interval = min(interval, 60.0)
        except PgschedError as exc:
            log.error("partition maintenance failed: %s", exc)
            interval = min(interval, 60.0)
        try:
            prune_workers(self.db)
        except PgschedError as exc:
            log.error("removing rows of workers stopped long ago failed: %s", exc)
            interval = min(interval, 60.0)
        return interval

    def _sleep(self, lock: Session, stop: threading.Event) -> None:
        """Until the earliest task is due (the database says in how many seconds: no host
        clock is compared with a stored time), at most ``max_sleep``; a notification or a
        dropped connection ends it early."""
        wait = self.config.max_sleep
        try:
            row = self.db.one("scheduler_next_due")
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

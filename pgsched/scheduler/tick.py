"""The tick: turns due schedules into executions, in one transaction per batch.

A tick locks the front of ``task_next_fire_idx`` (due tasks) with SKIP LOCKED, grouped by
the schedule and due time they share; computes each group's fires once
(:mod:`pgsched.scheduler.catch_up`, pure); inserts their executions and moves each
``next_fire_at`` on in the task's time zone in one statement, and commits: one NOTIFY per
tick. Missed fires after downtime are handled by each task's misfire policy (``once``:
they collapse into one catch-up run). Each batch is fenced by the leader's term
(:func:`pgsched.scheduler.leadership.fence`).
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime

from ..db import Database, Session
from ..schedule import Schedule
from .catch_up import CatchUp, Memo, Misfire, plan
from .leadership import TermOver, fence

log = logging.getLogger("pgsched.scheduler")  # the name its log lines always had


def tick(
    db: Database,
    epoch: int | None,
    now: datetime,
    batch: int = 1000,
    parallel: int = 1,
    busy: list[int] | None = None,
) -> int:
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

    The tick never waits for a windowed task's window lock (migration 0027): a task whose
    lock an enqueue in a transaction not yet ended holds is left due, nothing of it fired
    and its next fire time not moved, its id appended to ``busy`` (when given) and logged;
    a later tick fires it, once.
    """
    memo = Memo(now)
    busy = [] if busy is None else busy
    fired, full = _tick_batch(db, epoch, now, batch, memo, busy)
    if not full:
        return fired
    counts: list[int] = []
    errors: list[BaseException] = []

    def drain() -> None:
        total, more = 0, True
        try:
            while more and not errors:
                n, more = _tick_batch(db, epoch, now, batch, memo, busy)
                total += n
        except Exception as exc:  # raised in the caller's thread below, not lost in a helper's
            errors.append(exc)
        counts.append(total)

    helpers = [
        threading.Thread(target=drain, name=f"pgsched-tick-{i}") for i in range(1, max(parallel, 1))
    ]
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


# A tick that fires more tasks than this logs one line for the batch, not one per task.
_LOG_EACH_UP_TO = 20


def _tick_batch(
    db: Database, epoch: int | None, now: datetime, batch: int, memo: Memo, busy: list[int]
) -> tuple[int, bool]:
    """One transaction of :func:`tick`: plan up to ``batch`` unplanned tasks and fire up to
    ``batch`` due ones. Returns (executions created, whether a batch came back full); the
    windowed tasks whose window lock was busy are appended to ``busy``.

    Due tasks come grouped by schedule and due time (``scheduler_due_groups``): the fire
    times are computed once per group and all of the batch's fires are one statement
    (``scheduler_fire``), so a burst costs Python nothing per task."""
    fired = 0
    with db.transaction() as tx:
        fence(tx, epoch)
        broken: list[int] = []  # tasks to pause, with the reason of each in ``why``
        why: list[str] = []
        unplanned = tx.many("scheduler_unplanned_tasks", limit=batch)
        if unplanned:
            firsts = []
            for row in unplanned:

                def first(s: Schedule, row: dict = row) -> datetime | None:
                    return memo.first(s, row["last_fire_at"])

                nxt, problem = plan(row, first)
                if problem:
                    log.error(
                        "task %s: cannot plan its schedule (%s); pausing it", row["name"], problem
                    )
                    broken.append(row["id"])
                    why.append(f"the scheduler cannot compute its schedule: {problem}")
                firsts.append(nxt)
            tx.exec(
                "task_plan",
                ids=[r["id"] for r in unplanned],
                next_fire_at=firsts,
                fired_at=[None] * len(unplanned),
                missed=[0] * len(unplanned),
            )
        groups = tx.many("scheduler_due_groups", now=now, limit=batch, names=_LOG_EACH_UP_TO)
        due = sum(g["tasks"] for g in groups)
        if groups:
            misfire = Misfire.of({r["name"]: r["value"] for r in tx.many("scheduler_settings")})
            each = due <= _LOG_EACH_UP_TO
            nexts, missed, fired_through, run_group, run_at = [], [], [], [], []
            dag_ids: list[int] = []
            dag_fires: list[datetime] = []
            for n, group in enumerate(groups, 1):
                due_at = group["next_fire_at"]
                decided = CatchUp([due_at], None, 0, due_at)

                def decide(s: Schedule, group: dict = group) -> datetime | None:
                    nonlocal decided
                    decided = memo.catch_up(
                        s, group["misfire_policy"], group["next_fire_at"], misfire
                    )
                    return decided.next

                nxt, problem = plan(group, decide)
                if problem:
                    for name in _names(tx, group):
                        log.error(
                            "task %s: cannot compute its next fire (%s); pausing it after this fire",
                            name,
                            problem,
                        )
                    members = _ids(group["ids"])
                    broken += members
                    why += [f"the scheduler cannot compute its next fire: {problem}"] * len(members)
                    decided = CatchUp([due_at], None, 0, due_at)
                runs, lost = decided.run, decided.missed
                if lost:
                    for name in _names(tx, group):
                        log.warning(
                            "task %s: %d missed fire(s) not run (misfire policy %s)",
                            name,
                            lost,
                            group["misfire_policy"],
                        )
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
                log.info(
                    "fired %d task(s) due from %s to %s",
                    due,
                    min(run_at).isoformat(),
                    max(run_at).isoformat(),
                )
            ids = [g["ids"] for g in groups]
            # The fires first, then last_fire_at moves past them: the insert's statement
            # trigger checks each fire against the task's last_fire_at (migration 0010).
            tx.exec("scheduler_fire", ids=ids, run_group=run_group, run_at=run_at, epoch=epoch)
            held: list[int] = []  # windowed tasks whose window lock was busy (0027)
            if any(g["windowed"] for g in groups):  # overlap policies, unique windows (0022)
                windowed = tx.one(
                    "scheduler_fire_windowed",
                    ids=ids,
                    run_group=run_group,
                    run_at=run_at,
                    epoch=epoch,
                )
                assert windowed is not None  # an aggregate: one row
                held = list(windowed["busy"] or [])
                skipped = windowed["fires"] - windowed["busy_fires"] - (windowed["made"] or 0)
                if skipped > 0:
                    log.info(  # the "fired" lines above count these fires too
                        "%d fire(s) recorded skipped (a run of the task still live: its "
                        "overlap policy, or its unique window)",
                        skipped,
                    )
                if held:
                    fired -= windowed["busy_fires"]
                    busy += held
                    for row in tx.many("scheduler_task_names", ids=_array(held)):
                        log.info(
                            "task %s: its window lock is held (an enqueue of the task or "
                            "its key in a transaction not yet ended); its fire is left for a "
                            "later tick",
                            row["name"],
                        )
            if dag_ids:
                for run in tx.many(
                    "scheduler_fire_dags", ids=dag_ids, fire_at=dag_fires, epoch=epoch
                ):
                    if run["run_id"] is not None:
                        log.info(
                            "DAG %s: run %s started for %s",
                            run["name"],
                            run["run_id"],
                            run["fire_at"].isoformat(),
                        )
            tx.exec(
                "scheduler_advance",
                ids=ids,
                next_fire_at=nexts,
                fired_at=fired_through,
                missed=missed,
                busy=held,
            )
        if broken:
            tx.exec("task_disable", ids=broken, reasons=why)
    return fired, due >= batch or len(unplanned) >= batch


def _array(ids: list[int]) -> str:
    """The text of a bigint[] (``{1,2,3}``), as ``scheduler_task_names`` takes ids."""
    return "{" + ",".join(str(i) for i in ids) + "}"


def _ids(text: str) -> list[int]:
    """Task ids from the text of a bigint[] (``{1,2,3}``)."""
    inner = text.strip("{}")
    return [int(i) for i in inner.split(",")] if inner else []


def _names(tx: Session, group: dict) -> list[str]:
    """Every task name of a due group (the query gives the first few)."""
    if len(group["names"]) >= group["tasks"]:
        return list(group["names"])
    return [r["name"] for r in tx.many("scheduler_task_names", ids=group["ids"])]

"""Dashboard numbers: what a tenant's tasks and executions are doing, from SQL over the
real tables (``sql/stats.sql``).

Units: counts are integers; durations are seconds (float); instants are aware UTC
``datetime``. Definitions:

- *latency* (schedule-to-start) is ``started_at - run_at`` of a finished execution: from
  when it was due (``run_at``: its fire time for a first attempt, the end of the backoff
  for a retry) to when its last attempt started. ``scheduled_at`` is not used because a
  retried execution keeps its original fire time, which would count backoff as lateness.
- *duration* is ``finished_at - started_at`` (the last attempt).
- *last hour* is ``[now - 1 h, now)`` of ``finished_at``, read from raw rows (index
  ``execution_history_finished_idx``); percentiles there are exact (``percentile_cont``).
- *last day* is the current UTC hour and the 23 before it: whole hours come from the
  hourly roll-up (``stats_hourly``, kept by the scheduler leader each minute), hours it
  has not made final come from raw rows, so the counts are exact either way.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

from .db import Database, Session
from .lifecycle import ExecutionState
from .schedule import zone
from .stores.tasks import get as get_task
from .task_rows import schedule_of

FAILED = tuple(
    s.value for s in (ExecutionState.FAILED, ExecutionState.TIMED_OUT, ExecutionState.DEAD)
)


@dataclass
class Window:
    """Executions finished in a window: counts by final state; ``success_rate`` is
    succeeded / (succeeded + failed + timed_out + dead), None when there were none;
    ``throughput_per_minute`` counts every final state."""

    by_state: dict[str, int]
    total: int
    success_rate: float | None
    throughput_per_minute: float

    @classmethod
    def of(cls, by_state: dict[str, int], minutes: float) -> Window:
        total = sum(by_state.values())
        ok = by_state.get("succeeded", 0)
        judged = ok + sum(by_state.get(s, 0) for s in FAILED)
        return cls(
            by_state,
            total,
            ok / judged if judged else None,
            total / minutes if minutes > 0 else 0.0,
        )


@dataclass
class Percentiles:
    """p50/p95/p99 in seconds (None when no execution started in the window) and how many
    executions they were taken over."""

    p50: float | None
    p95: float | None
    p99: float | None
    samples: int


@dataclass
class Dashboard:
    """A tenant's dashboard. ``tasks``: active / paused / deleted counts;
    ``last_hour`` / ``last_day``: :class:`Window`; ``latency`` / ``duration``: last hour's
    :class:`Percentiles` (seconds); ``queues``: per queue ``{"ready", "scheduled",
    "running"}`` counts; ``running``; ``dead_letter`` (executions in the DLQ);
    ``missed_fires`` (fires the misfire policies did not run, all time); ``alerts_open``;
    ``leader`` (holder name or None), ``leader_heartbeat_age`` (seconds), ``standbys``,
    ``workers`` (live worker processes); ``now`` the instant it was computed for."""

    now: datetime
    tasks: dict[str, int]
    last_hour: Window
    last_day: Window
    latency: Percentiles
    duration: Percentiles
    queues: dict[str, dict[str, int]]
    running: int
    dead_letter: int
    missed_fires: int
    alerts_open: int
    leader: str | None
    leader_heartbeat_age: float | None
    standbys: int
    workers: int
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values (instants as ISO 8601 strings)."""
        out = asdict(self)
        out["now"] = self.now.isoformat()
        return out


def _percentiles(values: list[float] | None, samples: int) -> Percentiles:
    if not values or samples == 0:
        return Percentiles(None, None, None, 0)
    return Percentiles(values[0], values[1], values[2], samples)


def _counts(rows: list[dict], into: dict[str, int] | None = None) -> dict[str, int]:
    out = dict(into or {})
    for r in rows:
        out[r["state"]] = out.get(r["state"], 0) + int(r["executions"])
    return out


def last_day_counts(db: Database | Session, tenant: str, now: datetime) -> dict[str, int]:
    """Executions finished in the current UTC hour of ``now`` and the 23 before, by state:
    roll-up rows for the hours it has made final, raw rows after them."""
    hour = now.replace(minute=0, second=0, microsecond=0)
    start = hour - timedelta(hours=23)
    state = db.one("stats_rollup_boundary")
    boundary = state["dirty_from"] if state else None
    boundary = start if boundary is None else min(max(boundary, start), hour)
    counts = _counts(db.many("stats_rollup_window", tenant=tenant, since=start, until=boundary))
    return _counts(db.many("stats_window", tenant=tenant, since=boundary, until=now), counts)


def dashboard(db: Database, tenant: str = "default", *, now: datetime | None = None) -> Dashboard:
    """The dashboard numbers of ``tenant`` at ``now`` (default: the database's clock), read
    in one repeatable-read snapshot so that they agree with each other."""
    with db.transaction() as tx:
        tx.exec("stats_snapshot")
        now = now or tx.now()
        hour_ago = now - timedelta(hours=1)
        tasks = tx.one("stats_tasks", tenant=tenant) or {}
        hour = _counts(tx.many("stats_window", tenant=tenant, since=hour_ago, until=now))
        day = last_day_counts(tx, tenant, now)
        pct = tx.one("stats_percentiles", tenant=tenant, since=hour_ago, until=now) or {}
        queues = {
            r["queue"]: {"ready": r["ready"], "scheduled": r["scheduled"], "running": r["running"]}
            for r in tx.many("stats_queues", tenant=tenant, now=now)
        }
        dead = tx.one("stats_dead_letter", tenant=tenant) or {}
        cluster = tx.one("stats_cluster", tenant=tenant, now=now) or {}
    day_minutes = (
        now - now.replace(minute=0, second=0, microsecond=0)
    ).total_seconds() / 60 + 23 * 60
    started = int(pct.get("started") or 0)
    return Dashboard(
        now=now,
        tasks={k: int(tasks.get(k) or 0) for k in ("active", "paused", "deleted")},
        last_hour=Window.of(hour, 60.0),
        last_day=Window.of(day, day_minutes),
        latency=_percentiles(pct.get("latency"), started),
        duration=_percentiles(pct.get("duration"), started),
        queues=queues,
        running=sum(q["running"] for q in queues.values()),
        dead_letter=int(dead.get("dead") or 0),
        missed_fires=int(tasks.get("missed_fires") or 0),
        alerts_open=int(cluster.get("alerts_open") or 0),
        leader=cluster.get("leader"),
        leader_heartbeat_age=cluster.get("leader_heartbeat_age"),
        standbys=int(cluster.get("standbys") or 0),
        workers=int(cluster.get("workers") or 0),
    )


def roll_up(db: Database, keep_hours: int = 48) -> int:
    """Recompute the hourly roll-up's open hours from history and fold hours older than
    ``keep_hours`` into the all-time totals (``pgsched_internal.stats_rollup_v1``). Idempotent; run
    each minute by the scheduler leader. Returns the hourly rows written."""
    row = db.one("stats_rollup", keep_hours=keep_hours)
    return int(row["written"]) if row else 0


def task_trend(
    db: Database,
    task: str,
    tenant: str = "default",
    *,
    hours: int = 24,
    now: datetime | None = None,
) -> list[dict[str, Any]]:
    """Per hour of ``scheduled_at`` over the last ``hours`` hours, for a chart of task
    ``task``: ``hour`` (UTC), ``executions``, ``failures``, ``latency_avg``,
    ``latency_p95``, ``duration_avg``, ``duration_p95`` (seconds; None without started
    executions). Hours without executions are left out. Raises NotFound."""
    row = get_task(db, task, tenant)
    since = (now or db.now()) - timedelta(hours=hours)
    return db.many("stats_task_hourly", task_id=row["id"], tenant=tenant, since=since)


def task_recent(
    db: Database, task: str, tenant: str = "default", *, limit: int = 50
) -> list[dict[str, Any]]:
    """The last ``limit`` finished executions of ``task``, newest first: ``id``, ``state``,
    ``scheduled_at``, ``started_at``, ``finished_at``, ``latency`` and ``duration``
    (seconds; None when it never started). Raises NotFound."""
    row = get_task(db, task, tenant)
    return db.many("stats_task_recent", task_id=row["id"], tenant=tenant, limit=limit)


def next_fires(
    task_row: dict[str, Any], count: int = 5, *, after: datetime
) -> list[dict[str, datetime]]:
    """The next ``count`` fire times of a stored task row after ``after`` (the database's
    clock, ``db.now()``):
    ``{"utc": instant in UTC, "local": the same instant in the task's time zone}``. Empty
    for a task without a schedule, a paused one included (it shows what would fire)."""
    schedule = schedule_of(task_row)
    tz = zone(task_row["timezone"])
    times = schedule.upcoming(after, count)
    return [{"utc": t, "local": t.astimezone(tz)} for t in times]

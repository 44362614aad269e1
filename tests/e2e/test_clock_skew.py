"""Hosts whose clocks are minutes off change nothing: real ``pgsched`` processes (a client,
a scheduler, a worker) run under ``faketime`` with their wall clock shifted by five minutes
either way, against a database whose clock is right. Every fire happens at its instant
(never early, never late, never twice) and every recorded time is the database's.

libfaketime (Debian package ``faketime``, preloaded: ``tests.helpers.clock_off``) shifts
what the process reads as the time of day. "On time" allows for a loaded machine's lag
(``LAG``): a process that went by its own clock would be five minutes off.
"""

from __future__ import annotations

import itertools
import json
from datetime import datetime, timedelta

import pytest

from ..helpers import cli, clock_off, finished, trigger, wait_until

pytestmark = pytest.mark.e2e

SKEWS = [300, -300]  # seconds the host clocks are off: five minutes ahead, five behind
LAG = timedelta(seconds=5)  # the most a tick or a start may lag on a busy 2-core machine


def skewed_cli(dsn: str, seconds: int, *args: str):
    return cli(dsn, *args, env=clock_off(seconds))


def create(dsn: str, skew: int, name: str, *schedule: str) -> dict:
    """``pgsched task create NAME --command true SCHEDULE --json`` run with its clock off by
    ``skew`` seconds: the task as it planned it (instants parsed)."""
    row = json.loads(
        skewed_cli(
            dsn, skew, "task", "create", name, "--command", "true", *schedule, "--json"
        ).stdout
    )
    return {
        k: datetime.fromisoformat(v) if k in ("next_fire_at", "schedule_anchor") and v else v
        for k, v in row.items()
    }


def db_now(sql):
    return sql.execute("SELECT now() AS now").fetchone()["now"]


@pytest.mark.parametrize("skew", SKEWS)
def test_a_client_and_a_scheduler_with_clocks_off_fire_on_time_once(dsn, sql, start, skew):
    scheduler = start("scheduler", "--max-sleep", "0.5", env=clock_off(skew))
    wait_until(
        lambda: sql.execute(
            "SELECT 1 FROM pgsched.leader WHERE last_tick_at IS NOT NULL"
        ).fetchone(),
        message="the scheduler to lead",
    )
    # the client (its clock off too) plans the first fires: from the database's clock
    # (misfire all: a tick that lags on a busy machine still makes every fire)
    before = db_now(sql)
    created = create(dsn, skew, "second", "--cron", "* * * * * *", "--misfire", "all")
    assert before < created["next_fire_at"] <= db_now(sql) + timedelta(seconds=1)
    before = db_now(sql)
    every = create(dsn, skew, "every", "--every", "2s", "--misfire", "all")
    assert before - timedelta(seconds=1) <= every["schedule_anchor"] <= db_now(sql)
    before = db_now(sql)
    soon = create(dsn, skew, "soon", "--at", "+3s")
    assert (
        before + timedelta(seconds=2) <= soon["next_fire_at"] <= db_now(sql) + timedelta(seconds=3)
    )
    wait_until(
        lambda: (
            sql.execute("""SELECT count(*) AS n FROM pgsched.execution e JOIN pgsched.task t
                                      ON t.id = e.task_id WHERE t.name = 'second'""").fetchone()[
                "n"
            ]
            >= 8
        ),
        timeout=30,
        message="eight per-second fires",
    )
    scheduler.stop()
    rows = sql.execute("""SELECT t.name, e.scheduled_at, e.created_at FROM pgsched.execution e
                          JOIN pgsched.task t ON t.id = e.task_id ORDER BY t.name, e.scheduled_at""").fetchall()
    by_task: dict[str, list] = {}
    for r in rows:
        # never early: made at or after its instant by the database's clock; never late
        assert timedelta(0) <= r["created_at"] - r["scheduled_at"] < LAG, r
        by_task.setdefault(r["name"], []).append(r["scheduled_at"])
    seconds = by_task["second"]
    assert seconds == sorted(set(seconds))  # none twice
    assert all(
        b - a == timedelta(seconds=1) for a, b in itertools.pairwise(seconds)
    )  # none skipped
    assert seconds[0] == created["next_fire_at"]  # nothing fired as a catch-up of a skewed plan
    assert by_task["soon"] == [soon["next_fire_at"]]
    assert by_task["every"][0] == every["next_fire_at"]
    stored = sql.execute("SELECT missed_fires FROM pgsched.task WHERE name = 'second'").fetchone()
    assert stored["missed_fires"] == 0


@pytest.mark.parametrize("skew", SKEWS)
def test_a_worker_with_its_clock_off_records_the_database_times_and_retries_on_them(
    dsn, sql, start, skew
):
    cli(
        dsn,
        "task",
        "create",
        "flaky",
        "--command",
        'echo "attempt $PGSCHED_ATTEMPT"; test "$PGSCHED_ATTEMPT" -ge 2',
        "--max-attempts",
        "2",
        "--retry-policy",
        "fixed",
        "--retry-base",
        "3",
    )
    start("worker", "--poll-interval", "0.2", "--heartbeat-interval", "1", env=clock_off(skew))
    ident = trigger(dsn, "flaky")
    done = finished(sql, ident)
    now = db_now(sql)
    assert done["state"] == "succeeded"
    first, second = sql.execute(
        "SELECT * FROM pgsched.execution_attempt WHERE execution_id = %s ORDER BY attempt", [ident]
    ).fetchall()
    # the attempts' times lie on the database's time line, in order
    assert done["created_at"] <= first["started_at"] <= first["finished_at"] < second["started_at"]
    assert second["started_at"] <= second["finished_at"] <= done["finished_at"] <= now
    # the retry was due 3 s after the first attempt ended, by the database's clock, and ran
    # then (a slot's start is the worker's reading of the database's clock, moved on by its
    # monotonic clock: within a few milliseconds, pgsched.clock.DatabaseClock)
    assert first["next_run_at"] - first["finished_at"] == timedelta(seconds=3)
    assert -timedelta(milliseconds=20) <= second["started_at"] - first["next_run_at"] < LAG
    # history lands in today's partition by the database's date, not in DEFAULT
    stray = sql.execute("SELECT count(*) AS n FROM pgsched.execution_history_default").fetchone()
    assert stray["n"] == 0
    lines = sql.execute(
        "SELECT attempt, logged_at, line FROM pgsched.execution_log WHERE execution_id = %s "
        "ORDER BY attempt, seq",
        [ident],
    ).fetchall()
    assert [(r["attempt"], r["line"]) for r in lines] == [(1, "attempt 1"), (2, "attempt 2")]
    for r, attempt in zip(lines, (first, second), strict=True):
        assert (
            attempt["started_at"] - timedelta(seconds=0.5)
            <= r["logged_at"]
            <= attempt["finished_at"]
        )


@pytest.mark.parametrize("skew", SKEWS)
def test_processes_with_clocks_off_raise_no_lateness_alert(dsn, sql, start, skew):
    """A leader that judges lateness and a worker that records starts, both five minutes
    off: a task that runs on time opens no missed-schedule alert (misfire all: a tick that
    lags on a busy machine makes every fire, so none counts as missed)."""
    cli(dsn, "task", "create", "punctual", "--command", "true", "--every", "1s", "--misfire", "all")
    start("scheduler", "--max-sleep", "0.5", "--observe-interval", "0.5", env=clock_off(skew))
    start("worker", "--poll-interval", "0.2", env=clock_off(skew))
    wait_until(
        lambda: (
            sql.execute("SELECT count(*) AS n FROM pgsched.execution_history").fetchone()["n"] >= 6
        ),
        timeout=30,
        message="six runs",
    )
    # several detections have run meanwhile (every 0.5 s); wait for one more after the runs
    checked = sql.execute("SELECT checked_at FROM pgsched.alert_state").fetchone()
    wait_until(
        lambda: sql.execute("SELECT checked_at FROM pgsched.alert_state").fetchone() != checked,
        timeout=10,
        message="another alert detection",
    )
    late = sql.execute(
        """SELECT max(started_at - run_at) AS worst FROM pgsched.execution_history"""
    ).fetchone()
    assert late["worst"] < LAG
    assert sql.execute("SELECT kind, details FROM pgsched.alert").fetchall() == []

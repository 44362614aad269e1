"""Attacks on the unique windows and overlap policies of issue 18 (migration 0022) by
tenant B's own logins. Each test asserts the safe behaviour: it fails while the attack
works."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import psycopg
from psycopg import errors as pg_errors

from pgsched import scheduler
from pgsched.db import Database

from ..factories import make_task
from ..tenancy import login as _as


def hold_window_keys(conn: psycopg.Connection, tenant: str, ids: int = 500) -> int:
    """What B can do knowing only A's name (every wake-up notification carries it): hold
    the window lock of every task id up to ``ids`` (ids come from one shared sequence;
    B sees its own). No seed: hashtextextended(..., 0)."""
    return conn.execute(
        "SELECT count(pg_advisory_lock(hashtextextended('pgsched.window ' || %s || ' task ' || g, 0))) AS n "
        "FROM generate_series(1, %s) g",
        [tenant, ids],
    ).fetchone()["n"]


def test_attack18_another_tenant_cannot_hold_a_tasks_window_lock(dsn, sql, ab):
    """B's application login holds the unseeded window keys of A's task ids. A's own
    enqueue of its `unique pending` task then waits for ever (cut here at 3 s), and so does
    the scheduler's tick that fires it: the tick fires every tenant's schedules in that
    transaction, so one tenant stops every tenant's schedules (docs/security.md names the
    leader's key as such a number, not these)."""
    a, b, _ = ab
    db = Database.connect(dsn, max_size=4)
    try:
        now = sql.execute("SELECT date_trunc('minute', now()) AS t").fetchone()["t"]
        make_task(
            db,
            "sync",
            tenant=a.name,
            unique_policy="pending",
            schedule_kind="cron",
            schedule="* * * * *",
            now=now,
        )
        other = make_task(db, "other", schedule_kind="cron", schedule="* * * * *", now=now)
        with _as(b.app) as hostile:
            assert hold_window_keys(hostile, a.name) == 500
            with _as(a.app) as c:
                c.execute("SET statement_timeout = '3s'")
                started = time.monotonic()
                try:
                    c.execute("SELECT pgsched.enqueue_v1('sync')").fetchone()
                    enqueue_error = None
                except pg_errors.QueryCanceled as e:
                    enqueue_error = e
                enqueue_wait = time.monotonic() - started

            ticked: list = []
            tick = threading.Thread(
                target=lambda: ticked.append(scheduler.tick(db, None, now + timedelta(minutes=1))),
                daemon=True,
            )
            tick.start()
            tick.join(5)
            stalled = tick.is_alive()
            other_fired = sql.execute(
                "SELECT count(*) AS n FROM pgsched.execution WHERE task_id = %s", [other["id"]]
            ).fetchone()["n"]
        tick.join(30)  # B's session ended: the tick goes on
        fired_after = sql.execute(
            "SELECT count(*) AS n FROM pgsched.execution WHERE task_id = %s", [other["id"]]
        ).fetchone()["n"]
    finally:
        db.close()
    assert enqueue_error is None and enqueue_wait < 1.0 and not stalled and other_fired, (
        f"A's enqueue waited {enqueue_wait:.1f} s ({enqueue_error}); the scheduler's tick "
        f"stalled for 5 s: {stalled}; the default tenant's schedule fired meanwhile: {other_fired} "
        f"(once B let go: {fired_after}, the tick returned {ticked})"
    )


def test_attack18_a_tenants_engine_cannot_insert_past_its_unique_window(sql, ab):
    """`unique pending` is said to hold on every way in; a raw INSERT of the engine's is
    only marked (execution_windowed), never checked: B's engine login inserts three pending
    runs of its own `unique pending` task, and three wait."""
    _, b, _ = ab
    sql.execute(
        "UPDATE pgsched.task SET unique_policy = 'pending' WHERE tenant = %s AND name = 'job'",
        [b.name],
    )
    with _as(b.engine) as c:
        task = c.execute("SELECT id, queue FROM pgsched.task WHERE name = 'job'").fetchone()
        for _ in range(3):
            try:
                c.execute(
                    "INSERT INTO pgsched.execution (tenant, task_id, scheduled_at, run_at, "
                    "trigger, priority, queue, params, max_attempts) "
                    "VALUES (%s, %s, now(), now(), 'api', 5, %s, '{}', 1)",
                    [b.name, task["id"], task["queue"]],
                )
            except psycopg.errors.Error:
                pass  # refused: safe
        pending = c.execute(
            "SELECT count(*) AS n FROM pgsched.execution WHERE task_id = %s AND state = 'pending'",
            [task["id"]],
        ).fetchone()["n"]
    assert pending <= 1, f"{pending} pending executions of a `unique pending` task"

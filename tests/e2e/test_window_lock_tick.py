"""The scheduler's tick never waits for a window lock (migration 0027), with a real
``pgsched scheduler``: an application enqueues `import` for account 1 in a transaction it
keeps open for 3 s, holding the window of the key `account:1`, which the scheduled task
`sync` (every second, `unique pending` by key) shares. Meanwhile the other schedules go on
firing and `sync` is left due, logged; once the transaction ends `sync` fires again, each
fire time once."""

from __future__ import annotations

import time

import psycopg
import pytest
from psycopg.rows import dict_row

from ..helpers import cli, wait_until

pytestmark = pytest.mark.e2e


def schedule_fires(sql, name: str) -> list:
    """The scheduled fire times of task ``name``, made or recorded skipped, oldest first."""
    return [
        r["scheduled_at"]
        for r in sql.execute(
            "SELECT x.scheduled_at FROM (SELECT task_id, scheduled_at, trigger FROM pgsched.execution "
            "UNION ALL SELECT task_id, scheduled_at, trigger FROM pgsched.execution_history) x "
            "JOIN pgsched.task t ON t.id = x.task_id WHERE t.name = %s AND x.trigger = 'schedule' "
            "ORDER BY x.scheduled_at",
            [name],
        )
    ]


def test_a_window_lock_held_by_an_open_enqueue_stalls_no_schedule(dsn, sql, start):
    cli(dsn, "task", "create", "import", "--command", "true")
    for name in ("sync", "other"):
        cli(dsn, "task", "create", name, "--command", "true", "--every", "1s")
    sql.execute(
        "UPDATE pgsched.task SET concurrency_key = 'account:{account}', unique_policy = 'pending', "
        "unique_scope = 'key', params = '{\"account\": 1}' WHERE name IN ('import', 'sync')"
    )
    scheduler = start("scheduler", "--max-sleep", "0.2")
    wait_until(lambda: len(schedule_fires(sql, "sync")) >= 1, timeout=30, message="sync fires")
    app = psycopg.connect(dsn, row_factory=dict_row)  # a transaction, kept open
    try:
        app.execute("SELECT pgsched.enqueue_v1('import', '{\"account\": 1}')")
        held_at = len(schedule_fires(sql, "sync"))
        others_before = len(schedule_fires(sql, "other"))
        time.sleep(3)  # the transaction an application keeps open: nothing to wait on
        sync_held, others_held = len(schedule_fires(sql, "sync")), len(schedule_fires(sql, "other"))
        logged = "its window lock is held" in scheduler.output
    finally:
        app.rollback()
        app.close()
    wait_until(
        lambda: len(schedule_fires(sql, "sync")) > sync_held,
        timeout=30,
        message="sync fires once the window lock is free",
    )
    fires = schedule_fires(sql, "sync")
    assert others_held - others_before >= 2, "the other schedule stalled behind the window lock"
    assert sync_held <= held_at + 1  # at most a fire made before the enqueue took the lock
    assert logged, scheduler.output[-3000:]
    assert len(fires) == len(set(fires)), f"a fire time made twice: {fires}"

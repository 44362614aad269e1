"""The usage job in a real ``pgsched scheduler`` process (issue 18; migration 0025): a
tenant over its compute quota gets nothing started by a real worker, with the reason shown
and a quota alert; raising the quota starts its work at the next usage run."""

from __future__ import annotations

import time

import pytest

from ..helpers import cli, wait_until

pytestmark = pytest.mark.e2e


def test_work_over_a_compute_quota_waits_and_starts_at_the_next_run_once_raised(dsn, sql, start):
    sql.execute(
        "UPDATE pgsched.tenant SET max_compute_minutes_per_month = 0 WHERE name = 'default'"
    )
    start("scheduler", "--usage-interval", "0.5")
    start("worker", "--poll-interval", "30")
    wait_until(
        lambda: (
            sql.execute(
                "SELECT over FROM pgsched.tenant_usage WHERE tenant = 'default'"
            ).fetchone()["over"]
            == ["compute_minutes"]
        ),
        message="the usage job holds the tenant",
    )
    cli(dsn, "task", "create", "job", "--command", "true")
    cli(dsn, "task", "trigger", "job")
    # three usage runs and the worker's claims after the trigger: still waiting
    before = sql.execute("SELECT now() AS t").fetchone()["t"]
    wait_until(
        lambda: (
            sql.execute(
                "SELECT count(*) AS n FROM pgsched.alert WHERE kind = 'quota' AND resolved_at IS NULL"
            ).fetchone()["n"]
            == 1
            and sql.execute("SELECT now() - %s > interval '1.5 s' AS ok", [before]).fetchone()["ok"]
        ),
        message="a quota alert and 1.5 s",
    )
    [waiting] = sql.execute(
        "SELECT state, pgsched_internal.wait_reason_v1(e) AS why FROM pgsched.execution e"
    ).fetchall()
    assert waiting == {
        "state": "pending",
        "why": "tenant default is over its quota of 0 compute minutes this month",
    }
    raised = time.monotonic()
    sql.execute(
        "UPDATE pgsched.tenant SET max_compute_minutes_per_month = 1000 WHERE name = 'default'"
    )
    wait_until(
        lambda: (
            sql.execute(
                "SELECT count(*) AS n FROM pgsched.execution_history WHERE state = 'succeeded'"
            ).fetchone()["n"]
            == 1
        ),
        message="the held execution ran",
    )
    # woken by the usage run's notification, not the worker's 30 s poll
    assert time.monotonic() - raised < 10
    wait_until(
        lambda: (
            sql.execute(
                "SELECT count(*) AS n FROM pgsched.alert WHERE kind = 'quota' AND resolved_at IS NULL"
            ).fetchone()["n"]
            == 0
        ),
        message="the quota alert resolved",
    )

"""In a real browser: a task whose time zone the tz database dropped (its page renders with
the scheduler's reason, the operator fixes the zone on it and the task runs again), and
the dashboard's health section with a worker whose clock is five minutes ahead (under
libfaketime) and a session left idle in a transaction."""

from __future__ import annotations

import re

import psycopg

from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec

from ..helpers import Process, clock_off, wait_until
from .conftest import Stack, Visitor


def about_300(text: str) -> bool:
    """Whether ``text`` shows an offset of +300 s, give or take a second."""
    return any(abs(float(x) - 300) < 1 for x in re.findall(r"\+(\d+\.\d{3}) s", text))


def test_a_task_in_a_dropped_zone_shows_why_and_the_operator_fixes_it_on_its_page(
    stack: Stack, visitor: Visitor
):
    page = visitor.page
    tasks.create(
        stack.db,
        TaskSpec(
            name="browser-pacific",
            command="echo fired",
            schedule_kind="cron",
            schedule="* * * * * *",
        ),
    )
    stack.sql.execute(
        "UPDATE pgsched.task SET timezone = 'US/Pacific-New', next_fire_at = NULL "
        "WHERE name = 'browser-pacific' AND deleted_at IS NULL"
    )
    stack.sql.execute("SELECT pg_notify('pgsched_task', '')")  # wake the scheduler
    wait_until(
        lambda: (
            stack.one(
                "SELECT paused_by FROM pgsched.task WHERE name = 'browser-pacific' "
                "AND deleted_at IS NULL"
            )["paused_by"]
            == "scheduler"
        ),
        message="the scheduler pauses it",
    )

    visitor.go("/tasks?name=browser-pacific")
    assert "by the scheduler:" in page.inner_text("table")
    visitor.shot("tasks-paused-by-scheduler")
    response = page.goto(stack.url + "/tasks/browser-pacific")
    assert response is not None and response.status == 200
    alert = page.inner_text("section[role=alert]")
    assert (
        "Paused by the scheduler" in alert and "'US/Pacific-New' is not an IANA time zone" in alert
    )
    assert "pgsched task update browser-pacific --tz ZONE" in alert
    visitor.shot("task-paused-by-scheduler")

    page.fill("#fix-tz", "America/Los_Angeles")
    page.click("form[action='/tasks/timezone'] button[type=submit]")
    page.wait_for_selector("text=the task is resumed")
    row = stack.one(
        "SELECT enabled, timezone, paused_by FROM pgsched.task WHERE name = 'browser-pacific' "
        "AND deleted_at IS NULL"
    )
    assert row == {"enabled": True, "timezone": "America/Los_Angeles", "paused_by": None}
    assert page.query_selector("section[role=alert]") is None
    visitor.shot("task-fixed")
    wait_until(
        lambda: (
            stack.one(
                "SELECT count(*) AS n FROM pgsched.execution_history h JOIN pgsched.task t "
                "ON t.id = h.task_id WHERE t.name = 'browser-pacific' AND h.state = 'succeeded'"
            )["n"]
            > 0
        ),
        timeout=20,
        message="it runs again",
    )
    tasks.delete(stack.db, "browser-pacific")


def test_the_dashboard_shows_a_skewed_clock_and_an_old_snapshot_with_their_warnings(
    stack: Stack, visitor: Visitor, tmp_path
):
    page = visitor.page
    skewed = Process(
        stack.dsn,
        "worker",
        "--queue",
        "nothing",
        "--heartbeat-interval",
        "1",
        log_dir=tmp_path,
        env=clock_off(300),
    )
    left = psycopg.connect(stack.dsn, application_name="report left open")
    try:
        left.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        left.execute("SELECT count(*) FROM pgsched.execution").fetchone()
        stack.sql.execute(
            "UPDATE pgsched.setting SET value = '1' WHERE name = 'snapshot_age_warn_seconds'"
        )
        wait_until(
            lambda: (
                (
                    stack.one(
                        "SELECT clock_round_trip_seconds AS trip FROM pgsched.worker WHERE pid = %s "
                        "AND state = 'running'",
                        skewed.proc.pid,
                    )
                    or {}
                ).get("trip")
                is not None
            ),
            message="the skewed worker beats",
        )
        wait_until(
            lambda: stack.one(
                "SELECT now() - xact_start > interval '1 second' AS old FROM pg_stat_activity "
                "WHERE pid = %s",
                left.info.backend_pid,
            )["old"],
            message="a second to pass",
        )

        visitor.go("/")  # a new load (the sign-in left the tab on the dashboard as it was then)
        health = page.inner_text("#health ~ section.grid")
        assert "largest clock offset" in health and about_300(health)
        warnings = [w.inner_text() for w in page.query_selector_all("p.warning")]
        assert any("its clock is 300." in w and "ahead of the database" in w for w in warnings), (
            warnings
        )
        assert any(f"pid {left.info.backend_pid} 'report left open'" in w for w in warnings), (
            warnings
        )
        visitor.shot("dashboard-health")
        visitor.go("/workers")
        assert about_300(page.inner_text("td.num.error"))
        visitor.shot("workers-clock-offset")
        visitor.go("/scheduler")
        visitor.shot("scheduler")
    finally:
        left.close()
        skewed.stop()
        stack.sql.execute(
            "UPDATE pgsched.setting SET value = '300' WHERE name = 'snapshot_age_warn_seconds'"
        )

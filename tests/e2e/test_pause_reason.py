"""A task whose time zone the tz database dropped, with a real scheduler and worker: the
scheduler pauses it and stores why, ``pgsched task show`` / ``task list`` (text and
``--json``) show the reason and the fix, and ``pgsched task update NAME --tz ZONE``
resumes it: it runs again."""

from __future__ import annotations

import json

from ..helpers import cli, wait_until


def test_a_task_in_a_dropped_zone_is_paused_with_its_reason_and_runs_again_once_its_zone_is_fixed(
    dsn, sql, start
):
    cli(dsn, "task", "create", "pacific", "--command", "echo fired", "--cron", "* * * * * *")
    # As a task created when tzdata still had the zone, before an upgrade dropped it.
    sql.execute(
        "UPDATE pgsched.task SET timezone = 'US/Pacific-New', next_fire_at = NULL WHERE name = 'pacific'"
    )
    start("scheduler", "--max-sleep", "0.5")
    start("worker", "--poll-interval", "0.5")

    paused = wait_until(
        lambda: sql.execute(
            "SELECT * FROM pgsched.task WHERE name = 'pacific' AND paused_by = 'scheduler'"
        ).fetchone(),
        message="the scheduler pauses it",
    )

    assert (
        paused["enabled"] is False
        and "'US/Pacific-New' is not an IANA time zone" in paused["pause_reason"]
    )
    shown = json.loads(cli(dsn, "task", "show", "pacific", "--json").stdout)
    assert (shown["paused_by"], shown["pause_reason"], shown["upcoming"]) == (
        "scheduler",
        paused["pause_reason"],
        [],
    )
    assert shown["paused_at"] == paused["paused_at"].isoformat()
    assert shown["schedule_problem"].startswith(
        "timezone: 'US/Pacific-New' is not an IANA time zone"
    )
    assert (
        "pgsched task update pacific --tz ZONE" in shown["fix"]
        and "that resumes it" in shown["fix"]
    )
    text = cli(dsn, "task", "show", "pacific").stdout
    assert "paused by the scheduler at " in text and paused["pause_reason"] in text
    assert "to fix it: give it a schedule that works: pgsched task update pacific --tz ZONE" in text
    listed = cli(dsn, "task", "list").stdout
    assert (
        "paused by scheduler" in listed and f"warning: pacific: {paused['pause_reason']}" in listed
    )
    [row] = json.loads(cli(dsn, "task", "list", "--json").stdout)
    assert (row["paused_by"], row["pause_reason"]) == ("scheduler", paused["pause_reason"])
    nxt = cli(dsn, "task", "next", "pacific", check=False)
    assert (
        nxt.returncode == 1 and "timezone: 'US/Pacific-New' is not an IANA time zone" in nxt.stderr
    )
    assert "Traceback" not in nxt.stderr
    assert (
        sql.execute(
            "SELECT count(*) AS n FROM pgsched.execution_all e JOIN pgsched.task t ON t.id = e.task_id "
            "WHERE t.name = 'pacific'"
        ).fetchone()["n"]
        == 0
    )

    updated = cli(dsn, "task", "update", "pacific", "--tz", "America/Los_Angeles").stdout

    assert "(resumed: the scheduler had paused it)" in updated
    fixed = sql.execute("SELECT * FROM pgsched.task WHERE name = 'pacific'").fetchone()
    assert (fixed["enabled"], fixed["paused_by"], fixed["pause_reason"], fixed["paused_at"]) == (
        True,
        None,
        None,
        None,
    )
    ran = wait_until(
        lambda: sql.execute(
            "SELECT h.* FROM pgsched.execution_history h JOIN pgsched.task t "
            "ON t.id = h.task_id WHERE t.name = 'pacific' AND h.state = 'succeeded' "
            "LIMIT 1"
        ).fetchone(),
        timeout=20,
        message="it runs again",
    )
    assert ran["trigger"] == "schedule"
    assert "paused" not in cli(dsn, "task", "list").stdout

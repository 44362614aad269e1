"""Why a task is paused (migration 0011): the scheduler stores its reason when it cannot
compute a task's schedule (a zone the tz database dropped), every pause and resume keeps
paused_at / paused_by / pause_reason true, and fixing the schedule resumes a task the
scheduler paused, not one an operator paused."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest

from pgsched import scheduler
from pgsched.errors import ValidationError
from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec

# One connection in a transaction rolled back after each test (tests/conftest.py: tx);
# the tests that ask for dsn, or are marked clone, get a database of their own.
pytestmark = pytest.mark.rolled_back

T0 = datetime(2026, 1, 15, 10, 0, tzinfo=UTC)
DROPPED = ("US/Pacific-New", "Mars/Olympus")  # a zone tzdata dropped in 2020, one it never had


def stored(sql, name: str) -> dict:
    return sql.execute(
        "SELECT * FROM pgsched.task WHERE name = %s AND deleted_at IS NULL", [name]
    ).fetchone()


def hourly(db, name: str, **fields) -> dict:
    row = tasks.create(
        db,
        TaskSpec(name=name, command="true", schedule_kind="cron", schedule="0 * * * *", **fields),
        now=T0,
    )
    assert row is not None
    return row


def pause_fields(row: dict) -> tuple:
    return (
        row["enabled"],
        row["paused_by"],
        row["pause_reason"] is not None,
        row["paused_at"] is not None,
    )


@pytest.mark.parametrize("zone", DROPPED)
def test_the_scheduler_stores_why_it_paused_a_task_whose_zone_the_tz_database_lacks(db, sql, zone):
    due = hourly(db, "due")  # planned: it fires at 11:00, then cannot compute the next fire
    hourly(db, "resumed")  # unplanned (as after a resume): it cannot be planned at all
    sql.execute("UPDATE pgsched.task SET timezone = %s", [zone])
    sql.execute("UPDATE pgsched.task SET next_fire_at = NULL WHERE name = 'resumed'")
    before = sql.execute("SELECT now() AS t").fetchone()["t"]

    scheduler.tick(db, 1, datetime(2026, 1, 15, 11, 0, 1, tzinfo=UTC))

    for name, step in (("due", "next fire"), ("resumed", "schedule")):
        row = stored(sql, name)
        assert pause_fields(row) == (False, "scheduler", True, True), row
        assert row["paused_at"] >= before and row["next_fire_at"] is None
        assert row["pause_reason"].startswith(
            f"the scheduler cannot compute its {step}: timezone: {zone!r} is not an IANA time zone"
        ), row["pause_reason"]
    fired = sql.execute(
        "SELECT count(*) AS n FROM pgsched.execution WHERE task_id = %s", [due["id"]]
    ).fetchone()
    assert fired["n"] == 1  # its due fire ran; only the next could not be computed


def test_every_pause_and_resume_keeps_the_pause_fields_true(db, sql):
    hourly(db, "job")
    assert pause_fields(stored(sql, "job")) == (True, None, False, False)
    tasks.pause(db, "job")
    assert pause_fields(stored(sql, "job")) == (False, "operator", False, True)
    tasks.resume(db, "job")
    assert pause_fields(stored(sql, "job")) == (True, None, False, False)
    hourly(db, "born-paused", enabled=False)
    assert pause_fields(stored(sql, "born-paused")) == (False, "operator", False, True)
    # a plain UPDATE, as an application may write one
    sql.execute("UPDATE pgsched.task SET enabled = false WHERE name = 'job'")
    assert pause_fields(stored(sql, "job")) == (False, "operator", False, True)
    sql.execute("UPDATE pgsched.task SET enabled = true WHERE name = 'job'")
    assert pause_fields(stored(sql, "job")) == (True, None, False, False)
    # the scheduler's own pause, then a resume that clears its reason
    job = stored(sql, "job")
    db.exec("task_disable", ids=[job["id"]], reasons=["why"])
    assert pause_fields(stored(sql, "job")) == (False, "scheduler", True, True)
    tasks.resume(db, "job")
    assert pause_fields(stored(sql, "job")) == (True, None, False, False)
    # an enabled task cannot carry a pause reason
    with pytest.raises(psycopg.errors.CheckViolation, match="task_pause_only_when_paused"):
        sql.execute("UPDATE pgsched.task SET pause_reason = 'stale' WHERE name = 'job'")


def test_fixing_the_zone_resumes_a_task_the_scheduler_paused_and_plans_its_next_fire(db, sql):
    hourly(db, "report")
    sql.execute("UPDATE pgsched.task SET timezone = 'US/Pacific-New', next_fire_at = NULL")
    scheduler.tick(db, 1, T0)
    assert stored(sql, "report")["paused_by"] == "scheduler"
    # any other change is refused while the zone is broken, naming the zone
    with pytest.raises(
        ValidationError, match="timezone: 'US/Pacific-New' is not an IANA time zone"
    ):
        tasks.update(db, "report", {"command": "echo fixed"}, now=T0)

    row = tasks.update(db, "report", {"timezone": "America/Los_Angeles"}, now=T0)

    assert pause_fields(row) == (True, None, False, False)
    assert row["next_fire_at"] == datetime(2026, 1, 15, 11, 0, tzinfo=UTC)  # 03:00 in Los Angeles
    assert scheduler.tick(db, 1, datetime(2026, 1, 15, 11, 0, 1, tzinfo=UTC)) == 1


def test_an_update_keeps_a_task_an_operator_paused_paused(db, sql):
    hourly(db, "held")
    tasks.pause(db, "held")

    row = tasks.update(db, "held", {"timezone": "Europe/Berlin"}, now=T0)

    assert pause_fields(row) == (False, "operator", False, True) and row["next_fire_at"] is None


def test_an_update_that_leaves_the_schedule_alone_does_not_resume_a_task_the_scheduler_paused(
    db, sql
):
    hourly(db, "broken")
    job = stored(sql, "broken")
    db.exec(
        "task_disable",
        ids=[job["id"]],
        reasons=["the scheduler cannot compute its schedule: croniter"],
    )

    row = tasks.update(db, "broken", {"command": "echo other"}, now=T0)

    assert pause_fields(row) == (False, "scheduler", True, True)

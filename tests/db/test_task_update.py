"""tasks.update: a definition changes in one transaction, validated as at create; a new
schedule or zone is planned afresh and wakes the scheduler; bad input writes nothing."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest

from pgsched import scheduler
from pgsched.errors import NotFound, ValidationError
from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec

from ..helpers import notifications_until_marker

# One connection in a transaction rolled back after each test (tests/conftest.py: tx);
# the tests that ask for dsn, or are marked clone, get a database of their own.
pytestmark = pytest.mark.rolled_back

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
T1 = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)


def stored(sql, name="report"):
    return sql.execute(
        "SELECT * FROM pgsched.task WHERE name = %s AND deleted_at IS NULL", [name]
    ).fetchone()


@pytest.fixture
def report(db):
    return tasks.create(
        db,
        TaskSpec(
            name="report",
            command="echo hi",
            schedule_kind="cron",
            schedule="0 9 * * *",
            timeout_seconds=30,
        ),
        now=T0,
    )


@pytest.mark.clone("updated_at must be later than created_at: now() must advance")
def test_a_new_cron_and_zone_is_planned_from_now(db, sql, report):
    assert report["next_fire_at"] == datetime(2026, 1, 2, 9, 0, tzinfo=UTC)
    row = tasks.update(
        db, "report", {"schedule": "0 9 LW * *", "timezone": "Europe/Berlin"}, now=T1
    )
    # The last weekday of January 2026 is Friday the 30th; 09:00 CET is 08:00Z.
    assert row["next_fire_at"] == datetime(2026, 1, 30, 8, 0, tzinfo=UTC)
    assert (row["schedule_expr"], row["timezone"]) == ("0 9 LW * *", "Europe/Berlin")
    assert (
        stored(sql)["next_fire_at"] == row["next_fire_at"]
        and row["updated_at"] > report["updated_at"]
    )


def test_an_interval_is_anchored_at_the_update(db, sql, report):
    row = tasks.update(db, "report", {"schedule_kind": "interval", "schedule": "15m"}, now=T1)
    assert (row["schedule_kind"], row["schedule_anchor"]) == ("interval", T1)
    assert row["next_fire_at"] == datetime(2026, 1, 10, 12, 15, tzinfo=UTC)


def test_other_changes_keep_the_plan(db, sql, report):
    row = tasks.update(
        db,
        "report",
        {"command": "echo bye", "priority": 2, "timeout_seconds": None, "params": {"full": True}},
        now=T1,
    )
    assert row["next_fire_at"] == report["next_fire_at"]
    assert (row["command"], row["priority"], row["timeout_seconds"], row["params"]) == (
        "echo bye",
        2,
        None,
        {"full": True},
    )


def test_a_new_handler_kind_clears_the_old_handler(db, sql, report):
    row = tasks.update(db, "report", {"handler_kind": "argv", "argv": ["echo", "hi"]}, now=T1)
    assert (row["handler_kind"], row["command"], row["argv"]) == ("argv", None, ["echo", "hi"])


def test_removing_the_schedule_stops_the_plan(db, sql, report):
    row = tasks.update(db, "report", {"schedule_kind": "none", "schedule": None}, now=T1)
    assert (row["schedule_kind"], row["schedule_expr"], row["next_fire_at"]) == ("none", None, None)


def test_a_paused_task_stays_paused_and_unplanned(db, sql, report):
    tasks.pause(db, "report")
    row = tasks.update(db, "report", {"schedule": "*/5 * * * *"}, now=T1)
    assert (row["enabled"], row["next_fire_at"]) == (False, None)


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"schedule": "0 0 30 2 *"}, "schedule", "day-of-month 30 never occurs in month 2"),
        ({"schedule": "0 9 * * L"}, "schedule", "day-of-week L"),
        ({"schedule": "61 * * * *"}, "schedule", "minute 61 is out of range 0-59"),
        ({"timezone": "Mars/Olympus"}, "timezone", "Mars/Olympus"),
        ({"priority": 0}, "priority", "from 1"),
        ({"handler_kind": "shell", "command": "  "}, "command", "required"),
        ({"name": "other"}, "name", "cannot be updated"),
        ({"enabled": False}, "enabled", "cannot be updated"),
    ],
)
def test_bad_changes_name_the_field_and_write_nothing(db, sql, report, changes, field, words):
    before = stored(sql)
    with pytest.raises(ValidationError) as caught:
        tasks.update(db, "report", changes, now=T1)
    assert str(caught.value).startswith(f"{field}:") and words in str(caught.value)
    assert stored(sql) == before


def test_an_unknown_task_is_not_found(db):
    with pytest.raises(NotFound, match="no task named 'nope'"):
        tasks.update(db, "nope", {"priority": 2})


def test_a_schedule_change_wakes_the_scheduler_and_others_do_not(db, sql, dsn, report):
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute("LISTEN pgsched_task")
        tasks.update(db, "report", {"description": "nightly report"}, now=T1)
        assert notifications_until_marker(listener, sql, "pgsched_task") == []
        tasks.update(db, "report", {"timezone": "Asia/Tokyo"}, now=T1)
        assert notifications_until_marker(listener, sql, "pgsched_task") == [""]


def finish_all(sql) -> None:
    """Move every live execution to history as succeeded, as a worker would: from then on
    the live unique (task_id, scheduled_at) no longer holds their fires."""
    sql.execute("""WITH done AS (DELETE FROM pgsched.execution RETURNING *)
                   INSERT INTO pgsched.execution_history (id, tenant, task_id, scheduled_at, run_at, state,
                          trigger, priority, queue, params, attempt, max_attempts, created_at, finished_at)
                   SELECT id, tenant, task_id, scheduled_at, run_at, 'succeeded', trigger, priority, queue,
                          params, 1, max_attempts, created_at, now() FROM done""")


def fires(sql, name="report") -> list[datetime]:
    return [
        r["scheduled_at"]
        for r in sql.execute(
            """SELECT e.scheduled_at FROM pgsched.execution_all e JOIN pgsched.task t ON t.id = e.task_id
            WHERE t.name = %s AND e.trigger = 'schedule' ORDER BY e.scheduled_at""",
            [name],
        ).fetchall()
    ]


def test_a_one_shot_moved_back_to_an_instant_it_already_ran_does_not_run_again(db, sql):
    at = datetime(2026, 1, 1, 12, 5, tzinfo=UTC)
    tasks.create(
        db,
        TaskSpec(name="report", command="true", schedule_kind="once", schedule=at.isoformat()),
        now=T0,
    )
    scheduler.tick(db, 1, at)
    finish_all(sql)
    for instant in (
        at,
        datetime(2026, 1, 1, 12, 1, tzinfo=UTC),
    ):  # the same instant, or one before it
        row = tasks.update(
            db,
            "report",
            {"schedule": instant.isoformat()},
            now=datetime(2026, 1, 1, 12, 6, tzinfo=UTC),
        )
        assert row["next_fire_at"] is None and row["last_fire_at"] == at
        scheduler.tick(db, 1, datetime(2026, 1, 1, 12, 7, tzinfo=UTC))
        assert fires(sql) == [at]
    later = datetime(2026, 1, 1, 12, 30, tzinfo=UTC)
    assert tasks.update(db, "report", {"schedule": later.isoformat()})["next_fire_at"] == later
    scheduler.tick(db, 1, later)
    assert fires(sql) == [at, later]


def test_a_re_plan_from_a_clock_behind_the_last_fire_never_repeats_a_fire(db, sql, report):
    """The task fired at 09:00 on Jan 2; its definition is then updated by a process whose
    "now" is a day behind (a clock set back): the plan starts after the last fire."""
    scheduler.tick(db, 1, datetime(2026, 1, 2, 9, 0, 1, tzinfo=UTC))
    finish_all(sql)
    row = tasks.update(
        db, "report", {"schedule": "0 9,10 * * *"}, now=datetime(2026, 1, 1, 9, 30, tzinfo=UTC)
    )
    assert row["next_fire_at"] == datetime(2026, 1, 2, 10, 0, tzinfo=UTC)
    scheduler.tick(db, 1, datetime(2026, 1, 2, 10, 0, 1, tzinfo=UTC))
    assert fires(sql) == [
        datetime(2026, 1, 2, 9, 0, tzinfo=UTC),
        datetime(2026, 1, 2, 10, 0, tzinfo=UTC),
    ]


def test_the_database_refuses_a_plan_at_or_before_the_last_fire_and_a_watermark_moved_back(
    db, sql, report
):
    scheduler.tick(db, 1, datetime(2026, 1, 2, 9, 0, 1, tzinfo=UTC))
    last = stored(sql)["last_fire_at"]
    assert last == datetime(2026, 1, 2, 9, 0, tzinfo=UTC)
    with pytest.raises(psycopg.errors.CheckViolation, match="task_next_fire_after_last"):
        sql.execute("UPDATE pgsched.task SET next_fire_at = last_fire_at WHERE name = 'report'")
    with pytest.raises(psycopg.errors.CheckViolation, match="cannot move back"):
        sql.execute(
            "UPDATE pgsched.task SET last_fire_at = last_fire_at - interval '1 day' WHERE name = 'report'"
        )
    with pytest.raises(psycopg.errors.CheckViolation, match="cannot move back"):
        sql.execute("UPDATE pgsched.task SET last_fire_at = NULL WHERE name = 'report'")
    assert stored(sql)["last_fire_at"] == last
    # moving it on is allowed (the scheduler does, every tick)
    sql.execute(
        "UPDATE pgsched.task SET last_fire_at = last_fire_at + interval '1 hour' WHERE name = 'report'"
    )


def test_a_one_shot_given_a_new_instant_after_it_ran_fires_after_a_pause_and_resume(db, sql):
    at = datetime(2026, 1, 1, 12, 5, tzinfo=UTC)
    tasks.create(
        db,
        TaskSpec(name="report", command="true", schedule_kind="once", schedule=at.isoformat()),
        now=T0,
    )
    scheduler.tick(db, 1, at)
    finish_all(sql)
    later = datetime(2026, 1, 1, 12, 30, tzinfo=UTC)
    assert tasks.update(db, "report", {"schedule": later.isoformat()})["next_fire_at"] == later
    tasks.pause(db, "report")
    tasks.resume(db, "report")
    assert stored(sql)["next_fire_at"] == later
    scheduler.tick(db, 1, datetime(2026, 1, 1, 12, 31, tzinfo=UTC))
    assert fires(sql) == [at, later]
    tasks.pause(db, "report")  # once it ran, a resume plans nothing more
    tasks.resume(db, "report")
    scheduler.tick(db, 1, datetime(2026, 1, 1, 13, 0, tzinfo=UTC))
    assert fires(sql) == [at, later] and stored(sql)["next_fire_at"] is None


def test_a_one_shot_that_ran_given_a_new_instant_while_paused_fires_after_the_resume(db, sql):
    at = datetime(2026, 1, 1, 12, 5, tzinfo=UTC)
    tasks.create(
        db,
        TaskSpec(name="report", command="true", schedule_kind="once", schedule=at.isoformat()),
        now=T0,
    )
    scheduler.tick(db, 1, at)
    finish_all(sql)
    tasks.pause(db, "report")
    later = datetime(2026, 1, 1, 14, 0, tzinfo=UTC)
    assert (
        tasks.update(db, "report", {"schedule": later.isoformat()})["next_fire_at"] == later
    )  # planned, paused
    scheduler.tick(db, 1, later)
    assert fires(sql) == [at]  # not while paused
    tasks.resume(db, "report")
    scheduler.tick(db, 1, datetime(2026, 1, 1, 14, 0, 1, tzinfo=UTC))
    assert fires(sql) == [at, later]

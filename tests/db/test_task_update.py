"""tasks.update: a definition changes in one transaction, validated as at create; a new
schedule or zone is planned afresh and wakes the scheduler; bad input writes nothing."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest

from pgsched import tasks
from pgsched.errors import NotFound, ValidationError
from pgsched.tasks import TaskSpec

from ..helpers import notifications_until_marker

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
T1 = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)


def stored(sql, name="report"):
    return sql.execute("SELECT * FROM pgsched.task WHERE name = %s AND deleted_at IS NULL", [name]).fetchone()


@pytest.fixture
def report(db):
    return tasks.create(db, TaskSpec(name="report", command="echo hi", schedule_kind="cron",
                                     schedule="0 9 * * *", timeout_seconds=30), now=T0)


def test_a_new_cron_and_zone_is_planned_from_now(db, sql, report):
    assert report["next_fire_at"] == datetime(2026, 1, 2, 9, 0, tzinfo=UTC)
    row = tasks.update(db, "report", {"schedule": "0 9 LW * *", "timezone": "Europe/Berlin"}, now=T1)
    # The last weekday of January 2026 is Friday the 30th; 09:00 CET is 08:00Z.
    assert row["next_fire_at"] == datetime(2026, 1, 30, 8, 0, tzinfo=UTC)
    assert (row["schedule_expr"], row["timezone"]) == ("0 9 LW * *", "Europe/Berlin")
    assert stored(sql)["next_fire_at"] == row["next_fire_at"] and row["updated_at"] > report["updated_at"]


def test_an_interval_is_anchored_at_the_update(db, sql, report):
    row = tasks.update(db, "report", {"schedule_kind": "interval", "schedule": "15m"}, now=T1)
    assert (row["schedule_kind"], row["schedule_anchor"]) == ("interval", T1)
    assert row["next_fire_at"] == datetime(2026, 1, 10, 12, 15, tzinfo=UTC)


def test_other_changes_keep_the_plan(db, sql, report):
    row = tasks.update(db, "report", {"command": "echo bye", "priority": 2, "timeout_seconds": None,
                                      "params": {"full": True}}, now=T1)
    assert row["next_fire_at"] == report["next_fire_at"]
    assert (row["command"], row["priority"], row["timeout_seconds"], row["params"]) == (
        "echo bye", 2, None, {"full": True})


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


@pytest.mark.parametrize(("changes", "field", "words"), [
    ({"schedule": "0 0 30 2 *"}, "schedule", "day-of-month 30 never occurs in month 2"),
    ({"schedule": "0 9 * * L"}, "schedule", "day-of-week L"),
    ({"schedule": "61 * * * *"}, "schedule", "minute 61 is out of range 0-59"),
    ({"timezone": "Mars/Olympus"}, "timezone", "Mars/Olympus"),
    ({"priority": 0}, "priority", "from 1"),
    ({"handler_kind": "shell", "command": "  "}, "command", "required"),
    ({"name": "other"}, "name", "cannot be updated"),
    ({"enabled": False}, "enabled", "cannot be updated"),
])
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

"""A task whose time zone the tz database dropped, in every web face: the task page
renders (200) with the scheduler's reason and the fix, the list marks it, the REST API
returns the reason, and an operator's fix (the page's form, or PATCH) resumes it. Also
the health parts of the dashboard, workers and scheduler pages."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pgsched import scheduler
from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec

from .conftest import csrf_of
from .test_pages import signed  # noqa: F401  (a fixture)

DROPPED = "US/Pacific-New"


@pytest.fixture
def broken(db, sql) -> dict:
    """A cron task in a zone the tz database dropped, paused by a real scheduler tick."""
    tasks.create(
        db, TaskSpec(name="pacific", command="echo hi", schedule_kind="cron", schedule="0 3 * * *")
    )
    sql.execute(
        "UPDATE pgsched.task SET timezone = %s, next_fire_at = NULL WHERE name = 'pacific'",
        [DROPPED],
    )
    scheduler.tick(db, 1, datetime.now(UTC))
    row = tasks.get(db, "pacific")
    assert (row["enabled"], row["paused_by"]) == (False, "scheduler")
    return row


def test_the_task_page_of_a_zone_the_tz_database_dropped_renders_with_the_reason_and_the_fix(
    broken,
    signed,  # noqa: F811 (a fixture)
):
    for role in ("viewer", "operator"):
        page = signed(role).get("/tasks/pacific")
        assert page.status_code == 200, page.text[:500]
        assert "Paused by the scheduler" in page.text
        assert f"timezone: &#39;{DROPPED}&#39; is not an IANA time zone" in page.text
        assert (
            "pgsched task update pacific --tz ZONE" in page.text and "that resumes it" in page.text
        )
        assert "not in the tz database" in page.text
        assert ('action="/tasks/timezone"' in page.text) is (role == "operator")
    listing = signed("viewer").get("/tasks").text
    assert "by the scheduler:" in listing and 'href="/tasks/pacific">why, and the fix' in listing


def test_an_operator_fixes_the_zone_on_the_page_and_the_task_is_resumed(broken, signed, sql):  # noqa: F811
    operator = signed("operator")
    token = csrf_of(operator.get("/tasks/pacific").text)
    bad = operator.post(
        "/tasks/timezone", data={"csrf_token": token, "name": "pacific", "timezone": "Mars/Olympus"}
    )
    assert (
        bad.status_code == 422
        and "timezone: &#39;Mars/Olympus&#39; is not an IANA time zone" in bad.text
    )
    assert (
        sql.execute("SELECT enabled FROM pgsched.task WHERE name = 'pacific'").fetchone()["enabled"]
        is False
    )

    fixed = operator.post(
        "/tasks/timezone",
        data={"csrf_token": token, "name": "pacific", "timezone": "America/Los_Angeles"},
    )

    assert fixed.status_code == 303 and fixed.headers["location"] == "/tasks/pacific?done=fixed"
    row = sql.execute("SELECT * FROM pgsched.task WHERE name = 'pacific'").fetchone()
    assert (row["enabled"], row["timezone"], row["paused_by"], row["pause_reason"]) == (
        True,
        "America/Los_Angeles",
        None,
        None,
    )
    assert row["next_fire_at"] is not None
    page = operator.get("/tasks/pacific?done=fixed").text
    assert "the task is resumed" in page and "Paused by the scheduler" not in page
    assert "local time (America/Los_Angeles)" in page  # its next fires are computed again
    viewer = signed("viewer")
    assert (
        viewer.post(
            "/tasks/timezone",
            data={
                "csrf_token": csrf_of(viewer.get("/tasks").text),
                "name": "pacific",
                "timezone": "UTC",
            },
        ).status_code
        == 403
    )


def test_the_rest_api_shows_the_reason_and_a_patch_of_the_zone_resumes_it(broken, api):
    viewer = api("viewer")
    got = viewer.get("/api/v1/tasks/pacific")
    assert got.status_code == 200
    body = got.json()
    assert (body["enabled"], body["paused_by"]) == (False, "scheduler") and DROPPED in body[
        "pause_reason"
    ]
    [listed] = viewer.get("/api/v1/tasks").json()["items"]
    assert (listed["state"], listed["paused_by"]) == ("paused", "scheduler") and DROPPED in listed[
        "pause_reason"
    ]
    assert viewer.get("/api/v1/tasks/pacific/executions").status_code == 200

    patched = api("operator").patch("/api/v1/tasks/pacific", json={"timezone": "Europe/Berlin"})

    assert patched.status_code == 200, patched.text
    fixed = patched.json()
    assert (fixed["enabled"], fixed["timezone"], fixed["paused_by"], fixed["pause_reason"]) == (
        True,
        "Europe/Berlin",
        None,
        None,
    )


def test_an_enabled_task_whose_zone_is_gone_renders_without_fires_instead_of_an_error(
    db,
    sql,
    signed,  # noqa: F811 (a fixture)
):
    # Before a scheduler has seen it (no scheduler runs, or the zone went with a tzdata
    # upgrade on the web host only).
    tasks.create(
        db, TaskSpec(name="mars", command="true", schedule_kind="cron", schedule="*/5 * * * *")
    )
    sql.execute("UPDATE pgsched.task SET timezone = 'Mars/Olympus' WHERE name = 'mars'")

    page = signed("viewer").get("/tasks/mars")

    assert page.status_code == 200
    assert (
        "Its fire times cannot be computed" in page.text and "They cannot be computed" in page.text
    )
    assert "that resumes it" not in page.text  # it is not paused


def test_the_dashboard_workers_and_scheduler_pages_show_clock_offsets_and_the_warning(
    db,
    sql,
    signed,  # noqa: F811 (a fixture)
):
    sql.execute(
        "INSERT INTO pgsched.worker (name, hostname, pid, queues, concurrency, clock_offset_seconds, "
        "clock_round_trip_seconds) VALUES ('skewed', 'far-host', 7, '{default}', 1, 300.25, 0.002), "
        "('fine', 'near-host', 8, '{default}', 1, 0.004, 0.002)"
    )
    sql.execute(
        "INSERT INTO pgsched.scheduler_node (name, hostname, pid, role, clock_offset_seconds) "
        "VALUES ('standby-1', 'behind-host', 9, 'standby', -42.5)"
    )
    viewer = signed("viewer", instance=True)  # clock offsets span tenants

    dashboard = viewer.get("/").text

    assert "+300.250 s" in dashboard and "+0.004 s" in dashboard and "-42.500 s" in dashboard
    assert (
        "worker" in dashboard
        and "far-host: its clock is 300.2 s ahead of the database" in dashboard
    )
    assert "behind-host: its clock is 42.5 s behind the database" in dashboard
    assert "near-host: its clock" not in dashboard
    assert "Nothing holds back the cleanup of dead rows." in dashboard
    workers = viewer.get("/workers").text
    assert (
        '<td class="num error">+300.250 s</td>' in workers
        and '<td class="num">+0.004 s</td>' in workers
    )
    assert '<td class="num error">-42.500 s</td>' in viewer.get("/scheduler").text

"""A cron expression the web admin or the REST API refuses: the answer names the field,
the value and why (issue 14), as the CLI does, and nothing is written."""

from __future__ import annotations

import pytest
from markupsafe import escape

from ..factories import make_task
from .test_api import V
from .test_pages import post, signed  # noqa: F401 (signed is a fixture)

REFUSED = [
    ("0 0 31 2 *", "day-of-month 31 never occurs in month 2 (February has at most 29 days)"),
    ("0 0 30 4,6,9,11 *", None),  # accepted: the 30th exists in those months
    (
        "0 0 31 4,6,9,11 *",
        (
            "day-of-month 31 never occurs in months 4,6,9,11 (April, June, September and November "
            "have 30 days)"
        ),
    ),
    ("0 60 * * *", "hour 60 is out of range 0-23"),
    ("1,60 * * * *", "minute 60 is out of range 0-59 (in 1,60)"),
]


@pytest.mark.parametrize(("expr", "reason"), REFUSED)
def test_the_api_refuses_a_cron_expression_naming_field_value_and_why(api, db, sql, expr, reason):
    op = api("operator")
    created = op.post(
        f"{V}/tasks",
        json={"name": "x", "command": "true", "schedule_kind": "cron", "schedule": expr},
    )
    if reason is None:
        assert created.status_code == 201, created.text
        return
    assert created.status_code == 422, created.text
    assert created.json()["error"] == {
        "code": "validation",
        "field": "schedule",
        "message": f"schedule: '{expr}' is not a usable cron expression: {reason}",
    }
    make_task(db, "job", schedule_kind="cron", schedule="0 9 * * *")
    before = sql.execute("SELECT * FROM pgsched.task ORDER BY id").fetchall()
    updated = op.patch(f"{V}/tasks/job", json={"schedule_kind": "cron", "schedule": expr})
    assert updated.status_code == 422 and updated.json()["error"]["message"].endswith(reason), (
        updated.text
    )
    assert (
        sql.execute("SELECT * FROM pgsched.task ORDER BY id").fetchall() == before
    )  # nothing written


@pytest.mark.parametrize(("expr", "reason"), [r for r in REFUSED if r[1]])
def test_the_task_form_shows_the_refusal_and_keeps_what_was_typed(
    db,
    sql,
    signed,  # noqa: F811 (the fixture imported above)
    expr,
    reason,
):
    page = post(
        signed("operator"),
        "/tasks/create",
        name="bad",
        command="true",
        schedule_kind="cron",
        schedule=expr,
        timezone="UTC",
    )
    assert page.status_code == 422
    assert escape(f"schedule: '{expr}' is not a usable cron expression: {reason}") in page.text
    assert f'value="{expr}"' in page.text
    assert sql.execute("SELECT count(*) AS n FROM pgsched.task").fetchone()["n"] == 0

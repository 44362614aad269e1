"""The limits' pages on the test database: ``/queues`` shows each queue's limits, counts,
pause and workers; an operator pauses (with a reason), resumes and sets limits there, each
recorded in pgsched.queue as the signed-in token; a viewer sees but is refused (403); a bad
field is shown beside it (422) and changes nothing; no CSRF token, no change. ``/quotas``
and the dashboard show a tenant's use of its quotas; an instance admin sets them. A
pending execution's page says why a limit holds it."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import pytest
from starlette.testclient import TestClient

from pgsched.stores import limits, tasks
from pgsched.web.credentials import create_token

from ..factories import make_task
from .conftest import csrf_of, sign_in


@pytest.fixture
def signed(app, db) -> Iterator[Callable[..., tuple[TestClient, int]]]:
    """``signed(role, tenant="default", instance=False)``: (a client signed in with a new
    token of that role, the token's id)."""
    clients: list[TestClient] = []

    def make(role: str, tenant: str = "default", instance: bool = False):
        token, row = create_token(db, role=role, tenant=tenant, instance=instance)
        c = TestClient(app, follow_redirects=False)
        clients.append(c)
        assert sign_in(c, token=token).status_code == 303
        return c, row["id"]

    yield make
    for c in clients:
        c.close()


def post(client: TestClient, path: str, **fields: str):
    """POST a form as the browser does: with the CSRF token of the queues page."""
    return client.post(path, data={"csrf_token": csrf_of(client.get("/queues").text), **fields})


def queue_row(sql, name: str = "imports", tenant: str = "default") -> dict | None:
    return sql.execute(
        "SELECT max_running, rate_limit, rate_period_seconds, paused_at, paused_by, pause_reason "
        "FROM pgsched.queue WHERE tenant = %s AND name = %s",
        [tenant, name],
    ).fetchone()


@pytest.fixture
def imports(db) -> int:
    """A task in queue ``imports`` with one execution due now (no worker runs it)."""
    make_task(db, "load", queue="imports")
    return tasks.trigger(db, "load")


def test_the_queues_page_shows_each_queue_and_a_viewer_may_not_act(db, sql, signed, imports):
    limits.queue_set_limits(db, "default", "imports", max_running=4)
    viewer, _ = signed("viewer")
    page = viewer.get("/queues")
    assert page.status_code == 200
    assert 'id="queue-imports"' in page.text and "of 4" in page.text
    assert 'action="/queues/imports/pause"' not in page.text  # no buttons for a viewer
    assert 'href="/queues"' in page.text  # in the navigation bar
    token = csrf_of(viewer.get("/queues").text)
    for path, fields in (
        ("/queues/imports/pause", {"reason": "no"}),
        ("/queues/imports/resume", {}),
        ("/queues/imports/limits", {"max_running": "1"}),
    ):
        refused = viewer.post(path, data={"csrf_token": token, **fields})
        assert refused.status_code == 403, path
    row = queue_row(sql)
    assert row is not None and (row["max_running"], row["paused_at"]) == (4, None)


def test_an_operator_pauses_with_a_reason_the_execution_says_why_and_resumes(
    db, sql, signed, imports
):
    operator, token_id = signed("operator")
    assert queue_row(sql) is None  # a queue with work and no row yet

    paused = post(operator, "/queues/imports/pause", reason="vendor maintenance")

    assert paused.status_code == 303 and paused.headers["location"] == "/queues?done=queue_paused"
    row = queue_row(sql)
    assert row is not None and row["paused_at"] is not None
    assert (row["paused_by"], row["pause_reason"]) == (f"token {token_id}", "vendor maintenance")
    page = operator.get("/queues").text
    assert "vendor maintenance" in page and f"token {token_id}" in page
    assert 'action="/queues/imports/resume"' in page
    execution = operator.get(f"/executions/{imports}").text
    assert "queue imports is paused: vendor maintenance" in execution

    resumed = post(operator, "/queues/imports/resume")

    assert resumed.status_code == 303
    row = queue_row(sql)
    assert row is not None and (row["paused_at"], row["paused_by"], row["pause_reason"]) == (
        None,
        None,
        None,
    )
    assert "queue imports is paused" not in operator.get(f"/executions/{imports}").text


def test_a_pause_reason_too_long_is_shown_at_the_field_and_nothing_is_paused(
    db, sql, signed, imports
):
    operator, _ = signed("operator")
    refused = post(operator, "/queues/imports/pause", reason="x" * 501)
    assert refused.status_code == 422
    assert re.search(r'id="err-imports-reason">reason: .*at most 500', refused.text)
    assert queue_row(sql) is None


def test_an_operator_sets_limits_as_the_cli_writes_them_and_a_bad_field_is_shown_beside_it(
    db, sql, signed, imports
):
    operator, _ = signed("operator")
    saved = post(operator, "/queues/imports/limits", max_running="3", rate_limit="60/1m")
    assert saved.status_code == 303
    assert queue_row(sql) == {
        "max_running": 3,
        "rate_limit": 60,
        "rate_period_seconds": 60.0,
        "paused_at": None,
        "paused_by": None,
        "pause_reason": None,
    }
    page = operator.get("/queues").text
    # the current limits as the form takes them, in the card and in the fields
    assert '<span class="rate" title="at most 60 starts in any 1m">60/1m</span>' in page
    assert 'name="max_running" inputmode="numeric" value="3"' in page
    assert 'name="rate_limit" value="60/1m"' in page
    for fields, at, message in (
        ({"max_running": "lots"}, "max_running", "max_running: &#39;lots&#39; must be an integer"),
        ({"max_running": "0"}, "max_running", "max_running: &#39;0&#39; must be an integer from 1"),
        ({"rate_limit": "5"}, "rate_limit", "rate_limit: &#39;5&#39; must be N/PERIOD"),
        ({"rate_limit": "5/-1"}, "rate_limit", "rate_limit: &#39;5/-1&#39; must have a period"),
        (
            {"rate_limit": "5/400d"},
            "rate_limit",
            "rate_limit: &#39;5/400d&#39; must have a period from 0.001 seconds (1 ms) to 366 "
            "days (31622400 seconds)",
        ),
    ):
        refused = post(operator, "/queues/imports/limits", **({"max_running": "3"} | fields))
        assert refused.status_code == 422, fields
        assert f'id="err-imports-{at}">{message}' in refused.text, fields
        assert f'value="{fields[at]}"' in refused.text  # what was typed is kept
        assert queue_row(sql)["rate_limit"] == 60  # type: ignore[index]
    # below a second, as the database takes it; none as the CLI writes it
    assert post(operator, "/queues/imports/limits", rate_limit="5/0.5s").status_code == 303
    assert queue_row(sql)["rate_period_seconds"] == 0.5  # type: ignore[index]
    assert 'value="5/0.5s"' in operator.get("/queues").text
    cleared = post(operator, "/queues/imports/limits", max_running="none", rate_limit="")
    assert cleared.status_code == 303
    row = queue_row(sql)
    assert row is not None
    assert (row["max_running"], row["rate_limit"], row["rate_period_seconds"]) == (None, None, None)


def test_an_action_without_the_csrf_token_changes_nothing(db, sql, signed, imports):
    operator, _ = signed("operator")
    for token in (None, "not-the-token"):
        data = {"reason": "x"} | ({"csrf_token": token} if token else {})
        refused = operator.post("/queues/imports/pause", data=data)
        assert refused.status_code == 403 and "csrf_token" in refused.text
    assert queue_row(sql) is None


def test_a_tenant_sees_its_own_queues_only(db, sql, signed, imports):
    make_task(db, "other-load", queue="secret-queue", tenant="other")
    tasks.trigger(db, "other-load", tenant="other")
    mine, _ = signed("operator")
    theirs, _ = signed("operator", tenant="other")
    assert "secret-queue" not in mine.get("/queues").text
    page = theirs.get("/queues").text
    assert "secret-queue" in page and 'id="queue-imports"' not in page
    # the other tenant pausing "imports" pauses its own queue of that name, not default's
    assert post(theirs, "/queues/imports/pause", reason="theirs").status_code == 303
    assert queue_row(sql) is None and queue_row(sql, tenant="other") is not None


def test_quotas_label_at_quota_and_over_and_an_instance_admin_sets_them(db, sql, signed, imports):
    sql.execute(
        "UPDATE pgsched.tenant SET max_running = 0, max_starts_per_hour = 3, "
        "max_log_bytes = 1000 WHERE name = 'default'"
    )
    sql.execute(
        "UPDATE pgsched.tenant_usage SET log_bytes = 250, hour_starts = 5, "
        "hour_start = date_trunc('hour', now(), 'UTC') WHERE tenant = 'default'"
    )
    make_task(db, "o", tenant="other")  # registers tenant other
    viewer, _ = signed("viewer")
    page = viewer.get("/quotas")
    assert page.status_code == 200
    assert 'id="tenant-default"' in page.text and 'id="tenant-other"' not in page.text
    # running 0 of max_running 0: at the quota (its work waits), not over it
    at = re.search(r'<tr class="at-quota" data-quota="max_running">.*?</tr>', page.text, re.S)
    assert at is not None and ">at quota</span>" in at.group(0) and ">over<" not in at.group(0)
    # 5 starts this hour of a quota of 3 (lowered below the use): over
    over = re.search(r'<tr class="over" data-quota="max_starts_per_hour">.*?</tr>', page.text, re.S)
    assert over is not None and ">over</span>" in over.group(0)
    logs = re.search(r'<tr class="" data-quota="log_bytes">.*?</tr>', page.text, re.S)
    assert logs is not None and 'value="25.0"' in logs.group(0) and ">ok</span>" in logs.group(0)
    assert "250 bytes" in logs.group(0) and "1 kB" in logs.group(0)
    assert 'action="/quotas/default"' not in page.text
    dashboard = viewer.get("/").text
    assert 'id="dashboard-quotas"' in dashboard
    at = re.search(r'<tr class="at-quota" data-quota="max_running">.*?</tr>', dashboard, re.S)
    assert at is not None and ">at quota</span>" in at.group(0) and ">over<" not in at.group(0)
    assert '<tr class="over" data-quota="max_starts_per_hour">' in dashboard
    execution = viewer.get(f"/executions/{imports}").text
    assert "tenant default started its quota of 3 executions this hour (UTC)" in execution

    tenant_admin, _ = signed("admin")
    fields = {
        "max_running": "5",
        "max_starts_per_hour": "",
        "max_compute_minutes_per_month": "100",
        "max_log_bytes": "100GB",
        "weight": "3",
    }
    refused = tenant_admin.post(
        "/quotas/default", data={"csrf_token": csrf_of(tenant_admin.get("/quotas").text), **fields}
    )
    assert refused.status_code == 403
    assert sql.execute(
        "SELECT max_running FROM pgsched.tenant WHERE name = 'default'"
    ).fetchone() == {"max_running": 0}

    admin, _ = signed("admin", instance=True)
    listing = admin.get("/quotas").text
    assert 'id="tenant-other"' in listing and 'action="/quotas/default"' in listing
    assert 'name="max_log_bytes" value="1kB"' in listing  # the quota as the form takes it
    token = csrf_of(listing)
    for bad_fields, at_field, message in (
        ({"weight": "101"}, "weight", "weight: &#39;101&#39; must be an integer from 1 to 100"),
        ({"weight": ""}, "weight", "weight: &#39;&#39; must be an integer from 1 to 100"),
        (
            {"max_log_bytes": "lots"},
            "max_log_bytes",
            "max_log_bytes: &#39;lots&#39; must be a size like 100GB",
        ),
        ({"max_running": "-2"}, "max_running", "max_running: &#39;-2&#39; must be an integer"),
    ):
        bad = admin.post("/quotas/default", data={"csrf_token": token, **fields, **bad_fields})
        assert bad.status_code == 422, bad_fields
        assert f'id="err-default-{at_field}">{message}' in bad.text, bad_fields
        assert f'name="{at_field}"' in bad.text and f'value="{bad_fields[at_field]}"' in bad.text
    saved = admin.post("/quotas/default", data={"csrf_token": token, **fields})
    assert saved.status_code == 303
    assert sql.execute(
        "SELECT max_running, max_starts_per_hour, max_compute_minutes_per_month, max_log_bytes, "
        "weight FROM pgsched.tenant WHERE name = 'default'"
    ).fetchone() == {
        "max_running": 5,
        "max_starts_per_hour": None,
        "max_compute_minutes_per_month": 100,
        "max_log_bytes": 100 * 10**9,
        "weight": 3,
    }
    page = admin.get("/quotas").text
    assert 'name="max_log_bytes" value="100GB"' in page
    assert re.search(r'data-quota="log_bytes">.*?<td class="num">100 GB</td>', page, re.S)
    assert (
        admin.post(
            "/quotas/default", data={"csrf_token": token, **fields, "max_running": "none"}
        ).status_code
        == 303
    )
    assert sql.execute(
        "SELECT max_running FROM pgsched.tenant WHERE name = 'default'"
    ).fetchone() == {"max_running": None}

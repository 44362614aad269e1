"""The queues and quotas REST API and the limits' ``/metrics`` gauges on the test
database: each change is asserted in pgsched.queue / pgsched.tenant, recorded as the
calling token; a viewer is refused changes, a tenant's admin the quotas (the
installation's); bad fields are 422 naming the field; a tenant reads and scrapes only its
own. Then the same through a real web login under row-level security."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families
from psycopg import sql as pgsql
from starlette.testclient import TestClient

from pgsched.db import Database
from pgsched.stores import limits, tasks
from pgsched.web.app import create_app
from pgsched.web.credentials import create_token

from ..db.test_claim import register
from ..factories import make_task
from ..tenancy import drop_roles, login_dsn

Q = "/api/v1/queues"


def client_of(app, db, role: str, tenant: str = "default", instance: bool = False):
    """(a client with a new token's Bearer header, the token's id)."""
    token, row = create_token(db, role=role, tenant=tenant, instance=instance)
    return TestClient(app, headers={"Authorization": f"Bearer {token}"}), row["id"]


def queue_row(sql, name: str = "imports", tenant: str = "default") -> dict | None:
    return sql.execute(
        "SELECT max_running, rate_limit, rate_period_seconds, paused_at IS NOT NULL AS paused, "
        "paused_by, pause_reason FROM pgsched.queue WHERE tenant = %s AND name = %s",
        [tenant, name],
    ).fetchone()


@pytest.fixture
def imports(db) -> int:
    make_task(db, "load", queue="imports")
    return tasks.trigger(db, "load")


def test_an_operator_pauses_resumes_and_limits_a_queue(app, db, sql, imports):
    op, token_id = client_of(app, db, "operator")
    listed = op.get(Q)
    assert listed.status_code == 200
    (item,) = [q for q in listed.json()["items"] if q["name"] == "imports"]
    assert (item["ready"], item["running"], item["paused_at"]) == (1, 0, None)

    paused = op.post(f"{Q}/imports/pause", json={"reason": "vendor maintenance"})
    assert paused.status_code == 200, paused.text
    assert paused.json()["pause_reason"] == "vendor maintenance"
    assert queue_row(sql) == {
        "max_running": None,
        "rate_limit": None,
        "rate_period_seconds": None,
        "paused": True,
        "paused_by": f"token {token_id}",
        "pause_reason": "vendor maintenance",
    }
    got = op.get(f"{Q}/imports").json()
    assert got["paused_by"] == f"token {token_id}" and got["waiting"] == 1

    assert op.post(f"{Q}/imports/resume").status_code == 200
    assert queue_row(sql)["paused"] is False  # type: ignore[index]

    patched = op.patch(
        f"{Q}/imports", json={"max_running": 2, "rate_limit": 5, "rate_period_seconds": 30}
    )
    assert patched.status_code == 200 and patched.json()["max_running"] == 2
    row = queue_row(sql)
    assert row is not None and (
        row["max_running"],
        row["rate_limit"],
        row["rate_period_seconds"],
    ) == (2, 5, 30.0)
    # a field left out stays; null removes the limit
    assert op.patch(f"{Q}/imports", json={"max_running": None}).status_code == 200
    row = queue_row(sql)
    assert row is not None and (row["max_running"], row["rate_limit"]) == (None, 5)


def test_an_executions_json_says_why_it_waits_and_resuming_no_queue_is_404(app, db, sql, imports):
    """GET /api/v1/executions/{id} carries the wait reason the page and `execution show`
    give (null when nothing holds it back); resuming a queue that does not exist is a 404,
    as on the command line, not a queue made empty."""
    op, _ = client_of(app, db, "operator")
    reason = op.get(f"/api/v1/executions/{imports}").json()["wait_reason"]
    assert reason == "no running worker serves queue imports of tenant default", reason
    register(db, queues=("imports",))  # the web's login reads the worker through the definer
    assert op.get(f"/api/v1/executions/{imports}").json()["wait_reason"] is None
    assert op.post(f"{Q}/imports/pause", json={"reason": "vendor maintenance"}).status_code == 200
    reason = op.get(f"/api/v1/executions/{imports}").json()["wait_reason"]
    assert reason == "queue imports is paused: vendor maintenance", reason
    refused = op.post(f"{Q}/nosuch/resume")
    assert refused.status_code == 404, refused.text
    assert "nosuch" in refused.text and queue_row(sql, "nosuch") is None
    quota = op.patch(f"{Q}/imports", json={"max_running": -1})
    assert "or null for no limit" in quota.text and "None" not in quota.text


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"max_running": 0}, "max_running"),
        ({"max_running": "3"}, "max_running"),
        ({"rate_limit": None, "rate_period_seconds": 5}, "rate_limit"),
        ({"rate_period_seconds": -1}, "rate_period_seconds"),
        ({"rate_limit": 1, "rate_period_seconds": 0.0009}, "rate_period_seconds"),
        ({"rate_limit": 1, "rate_period_seconds": 366 * 86400 + 1}, "rate_period_seconds"),
        ({"burst": 1}, "burst"),
        ({}, "body"),
    ],
)
def test_bad_limits_are_422_naming_the_field_and_change_nothing(app, db, sql, imports, body, field):
    op, _ = client_of(app, db, "operator")
    refused = op.patch(f"{Q}/imports", json=body)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"]["field"] == field
    if field == "rate_period_seconds":  # the range the database holds, as every face says it
        assert "from 0.001 seconds (1 ms) to 366 days (31622400 seconds)" in refused.text
    assert queue_row(sql) is None


def test_a_viewer_reads_but_may_not_change_a_queue(app, db, sql, imports):
    viewer, _ = client_of(app, db, "viewer")
    assert viewer.get(f"{Q}/imports").status_code == 200
    assert viewer.get(f"{Q}/nowhere").status_code == 404
    assert viewer.post(f"{Q}/imports/pause", json={"reason": "x"}).status_code == 403
    assert viewer.post(f"{Q}/imports/resume").status_code == 403
    assert viewer.patch(f"{Q}/imports", json={"max_running": 1}).status_code == 403
    assert queue_row(sql) is None
    assert viewer.post(f"{Q}/imports/pause", json={"reason": 5}).status_code == 403
    op, _ = client_of(app, db, "operator")
    bad = op.post(f"{Q}/imports/pause", json={"reason": 5})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "reason"


def test_quotas_are_read_by_the_tenant_and_set_by_an_instance_admin(app, db, sql, imports):
    make_task(db, "o", tenant="other")
    viewer, _ = client_of(app, db, "viewer")
    mine = viewer.get("/api/v1/quotas")
    assert mine.status_code == 200 and mine.json()["tenant"] == "default"
    assert (
        client_of(app, db, "viewer", "other")[0].get("/api/v1/quotas").json()["tenant"] == "other"
    )

    tenant_admin, _ = client_of(app, db, "admin")
    refused = tenant_admin.patch("/api/v1/tenants/default/quotas", json={"max_running": 1})
    assert refused.status_code == 403
    admin, _ = client_of(app, db, "admin", instance=True)
    bad = admin.patch("/api/v1/tenants/default/quotas", json={"weight": 0})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "weight"
    assert admin.patch("/api/v1/tenants/nobody/quotas", json={"weight": 2}).status_code == 404
    saved = admin.patch(
        "/api/v1/tenants/other/quotas", json={"max_running": 7, "max_log_bytes": None, "weight": 4}
    )
    assert saved.status_code == 200, saved.text
    assert saved.json()["max_running"] == 7
    assert sql.execute(
        "SELECT max_running, max_log_bytes, weight FROM pgsched.tenant WHERE name = 'other'"
    ).fetchone() == {"max_running": 7, "max_log_bytes": None, "weight": 4}


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith(
            (
                "pgsched_tenant_",
                "pgsched_queue_paused",
                "pgsched_queue_max",
                "pgsched_queue_waiting",
            )
        )
    }


def test_metrics_show_quota_use_and_queue_limits_per_tenant(app, db, sql, imports):
    make_task(db, "o", tenant="other", queue="theirs")
    tasks.trigger(db, "o", tenant="other")
    limits.queue_pause(db, "default", "imports", "maintenance")
    limits.queue_set_limits(db, "default", "imports", max_running=3)
    sql.execute(
        "UPDATE pgsched.tenant SET max_running = 0, max_log_bytes = 100 WHERE name = 'default'"
    )
    sql.execute(
        "UPDATE pgsched.tenant_usage SET log_bytes = 150, over = '{log_bytes}' WHERE tenant = 'default'"
    )
    viewer, _ = client_of(app, db, "viewer")
    got = samples(viewer.get("/metrics").text)
    t = (("tenant", "default"),)
    assert got[("pgsched_tenant_running", t)] == 0
    assert got[("pgsched_tenant_max_running", t)] == 0
    assert got[("pgsched_tenant_log_bytes", t)] == 150
    assert got[("pgsched_tenant_max_log_bytes", t)] == 100
    assert ("pgsched_tenant_max_starts_per_hour", t) not in got  # none: no series
    over = {
        q: got[("pgsched_tenant_quota_over", (("quota", q), ("tenant", "default")))]
        for q in ("max_running", "max_starts_per_hour", "compute_minutes", "log_bytes")
    }
    assert over == {
        "max_running": 1,
        "max_starts_per_hour": 0,
        "compute_minutes": 0,
        "log_bytes": 1,
    }
    q = (("queue", "imports"), ("tenant", "default"))
    assert got[("pgsched_queue_paused", q)] == 1
    assert got[("pgsched_queue_max_running", q)] == 3
    assert got[("pgsched_queue_waiting", q)] == 1
    assert all(dict(labels).get("tenant") == "default" for _, labels in got)

    every = samples(client_of(app, db, "viewer", instance=True)[0].get("/metrics").text)
    assert every[("pgsched_queue_paused", (("queue", "theirs"), ("tenant", "other")))] == 0
    assert ("pgsched_tenant_running", (("tenant", "other"),)) in every


@pytest.fixture
def web_login(sql, dsn) -> Iterator[str]:
    role = f"web_{uuid.uuid4().hex[:8]}"
    sql.execute(
        pgsql.SQL("CREATE ROLE {} LOGIN IN ROLE pgsched_web").format(pgsql.Identifier(role))
    )
    try:
        yield login_dsn(dsn, role)
    finally:
        drop_roles(dsn, [role])


def test_on_a_real_web_login_a_tenant_acts_on_and_sees_its_own_alone(web_login, db, sql, imports):
    make_task(db, "o", tenant="other", queue="theirs")
    tasks.trigger(db, "o", tenant="other")
    web_db = Database.connect(web_login, max_size=4)
    try:
        app = create_app(web_db, secret="k" * 43)
        op, token_id = client_of(app, db, "operator")
        assert {q["name"] for q in op.get(Q).json()["items"]} == {"imports"}
        assert op.post(f"{Q}/imports/pause", json={"reason": "rls"}).status_code == 200
        assert queue_row(sql)["paused_by"] == f"token {token_id}"  # type: ignore[index]
        assert op.get("/api/v1/quotas").json()["tenant"] == "default"
        scraped = samples(op.get("/metrics").text)
        assert scraped and all(dict(labels)["tenant"] == "default" for _, labels in scraped)
        # the web login acting for every tenant (an instance admin) may set quotas
        admin, _ = client_of(app, db, "admin", instance=True)
        assert admin.patch("/api/v1/tenants/other/quotas", json={"weight": 9}).status_code == 200
        assert sql.execute("SELECT weight FROM pgsched.tenant WHERE name = 'other'").fetchone() == {
            "weight": 9
        }
    finally:
        web_db.close()

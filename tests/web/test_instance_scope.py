"""The instance scope (issue 17, item 6): what spans tenants (the workers and schedulers with
their hosts and queues, a forced failover, the installation-wide metrics) is an instance
principal's; a tenant's admin gets 403 there and keeps its own tenant's pages as before.

Every route of the app is declared here as an instance route or a tenant's: a route added
later and in neither set fails the first test, so it cannot be left out by mistake."""

from __future__ import annotations

import psycopg
from starlette.routing import Route

from pgsched.web.app import routes
from pgsched.web.credentials import authenticate_token, create_token

from ..factories import make_task
from .test_metrics_route import executions_by_task
from .test_pages import signed  # noqa: F401  (a fixture)

V = "/api/v1"

# (method, path) of every route that spans tenants
INSTANCE_ROUTES = {
    ("GET", "/workers"),
    ("GET", "/scheduler"),
    ("GET", V + "/workers"),
    ("GET", V + "/scheduler"),
    ("POST", V + "/scheduler/failover"),
    # a tenant's quotas are the installation's to set (issue 18; test_limits_pages/_api)
    ("POST", "/quotas/{tenant}"),
    ("PATCH", V + "/tenants/{tenant}/quotas"),
}
# instance routes whose answer to the bare call below is not a 200: what they need (a
# form's CSRF token, a body) comes after the role check, which they passed
GOT_IN = {("POST", "/quotas/{tenant}"): 403, ("PATCH", V + "/tenants/{tenant}/quotas"): 422}
# every other route: a tenant principal's (it sees its tenant's rows alone); /metrics and
# metrics/summary give the figures that span tenants to instance principals only (below)
TENANT_ROUTES = {
    ("GET", "/login"),
    ("POST", "/login"),
    ("POST", "/logout"),
    ("GET", "/"),
    ("GET", "/tasks"),
    ("POST", "/tasks/create"),
    ("POST", "/tasks/trigger"),
    ("POST", "/tasks/pause"),
    ("POST", "/tasks/resume"),
    ("POST", "/tasks/delete"),
    ("POST", "/tasks/timezone"),
    ("GET", "/tasks/{name:path}"),
    ("GET", "/executions"),
    ("GET", "/executions/{id}"),
    ("POST", "/executions/{id}/cancel"),
    ("POST", "/executions/{id}/retry"),
    ("GET", "/dags"),
    ("POST", "/dags/trigger"),
    ("GET", "/dags/runs/{id}"),
    ("GET", "/dags/{name:path}"),
    ("GET", "/dlq"),
    ("GET", "/queues"),
    ("POST", "/queues/{name}/pause"),
    ("POST", "/queues/{name}/resume"),
    ("POST", "/queues/{name}/limits"),
    ("GET", "/quotas"),
    ("GET", V + "/queues"),
    ("GET", V + "/queues/{name}"),
    ("PATCH", V + "/queues/{name}"),
    ("POST", V + "/queues/{name}/pause"),
    ("POST", V + "/queues/{name}/resume"),
    ("GET", V + "/quotas"),
    ("GET", "/dlq/retry-all"),
    ("POST", "/dlq/retry-all"),
    ("POST", "/dlq/{id}/retry"),
    ("POST", "/dlq/{id}/delete"),
    ("GET", V + "/tasks"),
    ("POST", V + "/tasks"),
    ("POST", V + "/tasks/{name:path}/trigger"),
    ("POST", V + "/tasks/{name:path}/pause"),
    ("POST", V + "/tasks/{name:path}/resume"),
    ("GET", V + "/tasks/{name:path}/executions"),
    ("GET", V + "/tasks/{name:path}"),
    ("PATCH", V + "/tasks/{name:path}"),
    ("DELETE", V + "/tasks/{name:path}"),
    ("GET", V + "/executions"),
    ("GET", V + "/executions/{id}"),
    ("GET", V + "/executions/{id}/logs"),
    ("POST", V + "/executions/{id}/cancel"),
    ("POST", V + "/executions/{id}/retry"),
    ("GET", V + "/dag-runs"),
    ("GET", V + "/dag-runs/{id}"),
    ("GET", V + "/metrics/summary"),
    ("GET", V + "/dlq"),
    ("POST", V + "/dlq/retry-all"),
    ("POST", V + "/dlq/{id}/retry"),
    ("DELETE", V + "/dlq/{id}"),
    ("GET", V + "/tokens"),
    ("POST", V + "/tokens"),
    ("DELETE", V + "/tokens/{id}"),
    ("GET", V + "/openapi.json"),
    ("GET", "/metrics"),
    # the audit log: a tenant admin reads its tenant's events, an instance admin every one's
    ("GET", "/account"),
    ("POST", "/account/sign-out-everywhere"),
    ("POST", "/account/password"),
    ("POST", "/users/sign-out"),
    ("GET", "/audit"),
    ("GET", V + "/audit"),
    # where a tenant's quota alerts go: its admin's, and the database refuses another
    # tenant's (tests/db/test_tenant_alert_webhook.py, test_alert_webhook_pages.py)
    ("POST", "/quotas/{tenant}/webhook"),
    ("GET", V + "/tenants/{tenant}/alert-webhook"),
    ("PUT", V + "/tenants/{tenant}/alert-webhook"),
    # a tenant's secrets: its admins' (an instance admin's are its own tenant's)
    ("GET", "/secrets"),
    ("POST", "/secrets"),
    ("GET", "/secrets/{name}/delete"),
    ("POST", "/secrets/{name}/delete"),
}


def app_routes() -> set[tuple[str, str]]:
    return {
        (method, r.path)
        for r in routes()
        if isinstance(r, Route)
        for method in (r.methods or ())
        if method != "HEAD"
    }


def test_every_route_is_declared_an_instance_route_or_a_tenants():
    found = app_routes()
    assert not INSTANCE_ROUTES & TENANT_ROUTES
    assert sorted(found - INSTANCE_ROUTES - TENANT_ROUTES) == [], "declare these routes above"
    assert sorted((INSTANCE_ROUTES | TENANT_ROUTES) - found) == [], "no such routes any more"


def call(client, method: str, path: str):
    return client.request(method, path)


def test_a_tenant_admin_gets_403_on_every_instance_route_and_an_instance_admin_gets_in(
    api,
    signed,  # noqa: F811 (a fixture)
    dsn,
):
    tenant_api, instance_api = api("admin", "acme"), api("admin", "acme", instance=True)
    tenant_page, instance_page = signed("admin", "acme"), signed("admin", "acme", instance=True)
    with psycopg.connect(dsn, autocommit=True) as leader:  # a leader for the failover to end
        leader.execute("SELECT pg_advisory_lock(pgsched_internal.internal_key_v1('leader'))")
        for method, path in sorted(INSTANCE_ROUTES):
            page = not path.startswith(V)
            refused = call(tenant_page if page else tenant_api, method, path)
            assert refused.status_code == 403, (method, path, refused.text[:300])
            if not page:
                assert refused.json()["error"]["code"] == "forbidden"
                assert "instance" in refused.json()["error"]["message"]
        for method, path in sorted(INSTANCE_ROUTES):
            page = not path.startswith(V)
            answer = call(instance_page if page else instance_api, method, path)
            expected = GOT_IN.get((method, path), 202 if path.endswith("/failover") else 200)
            assert answer.status_code == expected, (method, path, answer.text[:300])


def test_an_instance_viewer_reads_the_cluster_views_but_only_an_instance_admin_fails_over(api):
    viewer = api("viewer", instance=True)
    assert viewer.get(V + "/workers").status_code == 200
    assert viewer.post(V + "/scheduler/failover").status_code == 403


def test_the_nav_and_the_dashboard_show_a_tenant_admin_only_its_tenant(
    signed,  # noqa: F811 (a fixture)
    db,
    sql,
):
    sql.execute(
        "INSERT INTO pgsched.worker (name, hostname, pid, queues, concurrency, "
        "clock_offset_seconds) VALUES ('w', 'secret-host', 7, '{q}', 1, 0.5)"
    )
    tenant = signed("admin", "acme").get("/").text
    instance = signed("admin", "acme", instance=True).get("/").text
    for href in ('href="/workers"', 'href="/scheduler"'):
        assert href not in tenant and href in instance
    assert "secret-host" not in tenant and "secret-host" in instance  # health: clock offsets
    assert "live workers" not in tenant and "live workers" in instance
    assert 'href="/tasks"' in tenant and ">instance</span>" in instance


def test_the_summary_gives_the_figures_that_span_tenants_to_instance_principals_only(api):
    tenant = api("viewer", "acme").get(V + "/metrics/summary").json()
    instance = api("viewer", "acme", instance=True).get(V + "/metrics/summary").json()
    for field in ("workers", "leader", "standbys", "leader_heartbeat_age"):
        assert field not in tenant and field in instance
    assert tenant["tasks"] == instance["tasks"]  # the tenant's own figures for both


def test_a_tenant_scrape_has_its_tenant_alone_and_an_instance_scrape_every_tenant(api, db, sql):
    make_task(db, "ours", tenant="acme")
    make_task(db, "theirs", tenant="other")
    for tenant in ("acme", "other"):
        sql.execute(
            "INSERT INTO pgsched.execution (task_id, tenant, scheduled_at, run_at) "
            "SELECT id, tenant, now(), now() FROM pgsched.task WHERE tenant = %s",
            [tenant],
        )
    sql.execute(
        "INSERT INTO pgsched.worker (name, hostname, pid, queues, concurrency) "
        "VALUES ('w', 'secret-host', 7, '{q}', 1)"
    )
    tenant = api("viewer", "acme").get("/metrics").text
    instance = api("viewer", "acme", instance=True).get("/metrics").text
    assert 'tenant="acme"' in tenant and 'tenant="other"' not in tenant
    assert 'tenant="acme"' in instance and 'tenant="other"' in instance
    for family in (
        "pgsched_worker_heartbeat_age_seconds",
        "pgsched_leader",
        "pgsched_clock_offset_seconds",
        "pgsched_oldest_snapshot_holder",
    ):
        assert f"# TYPE {family} " not in tenant and f"# TYPE {family} " in instance
    assert executions_by_task(tenant) == {}  # nothing finished yet: no roll-up rows


def test_only_an_instance_admin_makes_an_instance_token(api, db):
    refused = api("admin", "acme").post(V + "/tokens", json={"role": "viewer", "instance": True})
    assert refused.status_code == 403 and "instance" in refused.json()["error"]["message"]
    made = api("admin", "acme", instance=True).post(
        V + "/tokens", json={"role": "viewer", "instance": True}
    )
    assert made.status_code == 201 and made.json()["instance"] is True
    who = authenticate_token(db, made.json()["token"])
    assert who is not None and who.instance and who.tenant == "acme"
    plain = api("admin", "acme").post(V + "/tokens", json={"role": "viewer"})
    assert plain.status_code == 201 and plain.json()["instance"] is False
    bad = api("admin", "acme").post(V + "/tokens", json={"role": "viewer", "instance": "yes"})
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "instance"
    _, row = create_token(db, role="viewer", tenant="acme", instance=True)
    assert row["instance"] is True

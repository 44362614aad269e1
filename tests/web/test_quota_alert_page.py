"""A quota alert (the usage job, migration 0025) on the dashboard: the tenant's users see
it, with no task, and another tenant's users do not."""

from __future__ import annotations

from pgsched.scheduler.usage import measure

from .test_pages import signed  # noqa: F401  (the fixture)


def test_the_dashboard_shows_a_quota_alert_to_its_tenant_only(db, sql, signed):  # noqa: F811
    sql.execute("INSERT INTO pgsched.tenant (name, max_log_bytes) VALUES ('acme', 1)")
    sql.execute(
        "INSERT INTO pgsched.execution_log (execution_id, attempt, tenant, seq, stream, logged_at,"
        " line) VALUES (1, 1, 'acme', 1, 'stdout', now(), 'more than one byte')"
    )
    measure(db)
    page = signed("viewer", "acme").get("/")
    assert page.status_code == 200
    alert = '<span class="state state-failed">quota</span>'  # the alert's kind, in its row
    assert alert in page.text and "log_bytes" in page.text and "/tasks/None" not in page.text
    other = signed("viewer").get("/")  # tenant default
    # (its dashboard lists its own quotas, log_bytes among them, but no alert of acme's)
    assert other.status_code == 200 and alert not in other.text and "acme" not in other.text

"""A tenant's own alert webhook (migration 0034): a quota alert that opens is queued to it
in the usage run's statement and POSTed by the sender; who may set it is decided by the
database (the installation, the web acting for the tenant; not a worker's or an
application's login)."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import errors as pg_errors
from psycopg import sql as pgsql
from psycopg.rows import dict_row

from pgsched import webhooks
from pgsched.cli import main
from pgsched.errors import NotFound, ValidationError
from pgsched.scheduler.usage import measure
from pgsched.stores import tenants

from ..factories import make_task
from ..tenancy import login_dsn
from .test_alerts import Receiver, receiver  # noqa: F401 (a fixture)
from .test_claim import claim, register

SET = "SELECT * FROM pgsched_internal.tenant_alert_webhook_set_v1(%s, %s)"


def _reach_max_running(db, sql, tenant: str) -> None:
    sql.execute("INSERT INTO pgsched.tenant (name, max_running) VALUES (%s, 1)", [tenant])
    make_task(db, "job", tenant=tenant)
    sql.execute("SELECT pgsched.enqueue_v1('job', tenant => %s)", [tenant])
    claim(db, register(db))


def test_a_quota_alert_is_posted_to_the_tenants_webhook(db, sql, receiver):  # noqa: F811
    _reach_max_running(db, sql, "t1")
    row = tenants.set_alert_webhook(db, "t1", receiver.url + "/quota")
    assert row == {"tenant": "t1", "alert_webhook": receiver.url + "/quota"}
    [opened] = measure(db)
    assert opened["change"] == "opened"
    [delivery] = sql.execute(
        "SELECT tenant, task_id, event, url, payload FROM pgsched.webhook_delivery"
    ).fetchall()
    assert delivery["tenant"] == "t1" and delivery["task_id"] is None
    assert (delivery["event"], delivery["url"]) == ("quota", receiver.url + "/quota")
    alert_id = sql.execute("SELECT id FROM pgsched.alert WHERE kind = 'quota'").fetchone()["id"]
    assert delivery["payload"]["alert_id"] == alert_id
    assert delivery["payload"]["details"] == {"quota": "running", "used": 1, "limit": 1}
    measure(db)  # still at quota: the alert stays open, nothing more is sent
    assert sql.execute("SELECT count(*) AS n FROM pgsched.webhook_delivery").fetchone()["n"] == 1
    webhooks.send_due(db)
    [got] = receiver.received
    assert (got["path"], got["event"]) == ("/quota", "quota")
    assert got["body"]["tenant"] == "t1" and got["body"]["details"]["quota"] == "running"


def test_without_a_webhook_the_alert_opens_and_nothing_is_queued(db, sql):
    _reach_max_running(db, sql, "t1")
    assert tenants.alert_webhook(db, "t1")["alert_webhook"] is None
    assert [c["change"] for c in measure(db)] == ["opened"]
    assert sql.execute("SELECT count(*) AS n FROM pgsched.webhook_delivery").fetchone()["n"] == 0


@pytest.mark.parametrize(
    "url", ["ftp://example.com/x", "example.com/hook", "http://", "http://a b/c", "h" * 3000]
)
def test_a_bad_url_is_refused_naming_the_field_and_nothing_changes(db, sql, url):
    sql.execute("INSERT INTO pgsched.tenant (name) VALUES ('t1')")
    tenants.set_alert_webhook(db, "t1", "https://hooks.example.com/a")
    with pytest.raises(ValidationError, match="alert_webhook"):
        tenants.set_alert_webhook(db, "t1", url)
    assert tenants.alert_webhook(db, "t1")["alert_webhook"] == "https://hooks.example.com/a"
    with pytest.raises(NotFound, match="no tenant 'nope'"):
        tenants.set_alert_webhook(db, "nope", "https://hooks.example.com/a")


def test_the_database_refuses_a_url_the_check_does_not_allow(sql):
    sql.execute("INSERT INTO pgsched.tenant (name) VALUES ('t1')")
    with pytest.raises(pg_errors.CheckViolation, match="tenant_alert_webhook_check"):
        sql.execute("UPDATE pgsched.tenant SET alert_webhook = 'file:///etc/passwd'")


def test_the_cli_shows_sets_and_clears_it(dsn):
    run = CliRunner().invoke
    base = ["--dsn", dsn]
    assert run(main, [*base, "tenant", "create", "acme"]).exit_code == 0
    out = run(main, [*base, "tenant", "webhook", "set", "acme", "https://hooks.example.com/q"])
    assert out.exit_code == 0, out.output
    assert "alerts to https://hooks.example.com/q" in out.output
    out = run(main, [*base, "tenant", "webhook", "show", "acme", "--json"])
    assert '"alert_webhook": "https://hooks.example.com/q"' in out.output
    out = run(main, [*base, "tenant", "webhook", "set", "acme", "gopher://x"])
    assert out.exit_code != 0 and "alert_webhook" in out.output and "gopher://x" in out.output
    out = run(main, [*base, "tenant", "webhook", "set", "acme", "none"])
    assert "alerts to nowhere" in out.output


def test_only_the_installation_and_the_web_for_its_tenant_may_set_it(dsn, ab):
    a, b, made = ab
    web = f"web_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(
            pgsql.SQL("CREATE ROLE {} LOGIN IN ROLE pgsched_web").format(pgsql.Identifier(web))
        )
    made.append(web)
    for login in (a.engine, a.app):  # a worker or an application has no say in it
        with psycopg.connect(login, autocommit=True) as c:
            with pytest.raises(pg_errors.InsufficientPrivilege):
                c.execute(SET, [a.name, "https://evil.example.com/"])
    with psycopg.connect(login_dsn(dsn, web), row_factory=dict_row) as c:
        with c.transaction():
            c.execute("SELECT set_config('pgsched.tenant', %s, true)", [a.name])
            assert (
                c.execute(SET, [a.name, "https://hooks.example.com/a"]).fetchone()["alert_webhook"]
                == "https://hooks.example.com/a"
            )
        with c.transaction():
            c.execute("SELECT set_config('pgsched.tenant', %s, true)", [a.name])
            with pytest.raises(pg_errors.InsufficientPrivilege, match="alert webhook of tenant"):
                c.execute(SET, [b.name, "https://evil.example.com/"])
    with psycopg.connect(a.engine, row_factory=dict_row) as c:  # a tenant's login reads its own
        rows = c.execute("SELECT name, alert_webhook FROM pgsched.tenant").fetchall()
    assert rows == [{"name": a.name, "alert_webhook": "https://hooks.example.com/a"}]
    with psycopg.connect(dsn, row_factory=dict_row) as c:
        assert c.execute(
            "SELECT alert_webhook FROM pgsched.tenant WHERE name = %s", [b.name]
        ).fetchone() == {"alert_webhook": None}

"""pgsched's own processes logged in as a tenant's roles (issue 17, migration 0018): a worker
whose engine login is tenant A's runs A's work and never B's, whatever it asks for; the web
admin logged in as a pgsched_web role shows a tenant's user that tenant's rows only,
because the database filters them, not only the web's queries."""

from __future__ import annotations

import json
import signal
import time

import psycopg
import pytest
from psycopg import sql as pgsql

from pgsched.web.server import free_port

from ..helpers import Process, cli, fetch, wait_until
from ..tenancy import login_dsn, two_tenants

pytestmark = pytest.mark.e2e


@pytest.fixture
def tenants_ab(dsn):
    with two_tenants(dsn) as ab:
        yield ab


def _state(sql, ident: int) -> str | None:
    row = sql.execute("SELECT state FROM pgsched.execution_all WHERE id = %s", [ident]).fetchone()
    return row["state"] if row else None


def test_a_worker_on_a_tenants_engine_login_runs_that_tenants_work_only(sql, tenants_ab, start):
    a, b, _ = tenants_ab
    a_id = sql.execute("SELECT pgsched.enqueue_v1('job', tenant => %s) AS id", [a.name]).fetchone()
    b_id = sql.execute("SELECT pgsched.enqueue_v1('job', tenant => %s) AS id", [b.name]).fetchone()
    worker = start("worker", "--poll-interval", "0.2", env={"PGSCHED_DSN": a.engine})
    wait_until(
        lambda: _state(sql, a_id["id"]) == "succeeded" and _state(sql, a.pending_id) == "succeeded",
        timeout=30,
        message=lambda: f"A's executions to run; worker output:\n{worker.output}",
    )
    time.sleep(1.5)  # several polls: B's would have been claimed by now
    assert _state(sql, b_id["id"]) == "pending"
    assert _state(sql, b.pending_id) == "pending"
    assert (
        sql.execute(
            "SELECT count(*) AS n FROM pgsched.execution_all WHERE tenant = %s AND state <> 'pending' "
            "AND trigger <> 'dag' AND state <> 'dead'",
            [b.name],
        ).fetchone()["n"]
        == 0
    )
    assert worker.proc.poll() is None, worker.output


def test_the_web_on_a_web_login_shows_each_tenant_only_its_own_rows(dsn, sql, tenants_ab, tmp_path):
    a, b, extra = tenants_ab
    extra.append(role := f"web_{a.name}")
    sql.execute(
        pgsql.SQL("CREATE ROLE {} LOGIN IN ROLE pgsched_web").format(pgsql.Identifier(role))
    )
    token_a = cli(dsn, "--tenant", a.name, "token", "create", "--role", "admin").stdout.strip()
    port = free_port("127.0.0.1", 18700)
    web = Process(login_dsn(dsn, role), "web", "--port", str(port), log_dir=tmp_path)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until(
            lambda: fetch(base + "/login")[0] == 200, timeout=30, message="the web to answer"
        )
        status, body = fetch(base + "/api/v1/tasks", token_a)
        assert status == 200, body
        assert sorted(t["name"] for t in json.loads(body)["items"]) == ["etl", "job"]  # A's
        status, body = fetch(base + f"/api/v1/executions/{b.pending_id}", token_a)
        assert status == 404, body
        status, body = fetch(base + f"/api/v1/executions/{a.pending_id}", token_a)
        assert status == 200, body
        for page in ("/", "/tasks", "/executions", "/dlq", "/dags"):
            status, body = fetch(base + page, token_a)
            assert status == 200, (page, body[-2000:], web.output[-3000:])
            assert b.name not in body, page
    finally:
        assert web.stop(signal.SIGTERM) == 0, web.output
    with psycopg.connect(login_dsn(dsn, role)) as c:  # the web's login alone sees nothing
        assert c.execute("SELECT count(*) FROM pgsched.task").fetchone()[0] == 0


def test_the_scheduler_and_a_worker_on_the_documented_logins_fire_and_run_a_schedule(
    dsn, sql, tenants_ab, start
):
    """docs/security.md's deployment: the scheduler on an engine login of the whole
    installation (it fires every tenant's schedules, and maintains the history partitions
    through the owner's functions), a worker on tenant A's engine login. Neither is a
    superuser or the owner."""
    a, b, extra = tenants_ab
    extra.append(role := f"sched_{a.name}")
    sql.execute(
        pgsql.SQL("CREATE ROLE {} LOGIN IN ROLE pgsched_engine, pgsched_instance").format(
            pgsql.Identifier(role)
        )
    )
    for t in (a, b):
        cli(dsn, "--tenant", t.name, "task", "create", "tick", "--every", "1s", "--command", "true")
    scheduler = start("scheduler", "--max-sleep", "0.2", env={"PGSCHED_DSN": login_dsn(dsn, role)})
    worker = start("worker", "--poll-interval", "0.2", env={"PGSCHED_DSN": a.engine})
    runs = (
        "SELECT count(*) AS n FROM pgsched.execution_history h JOIN pgsched.task k "
        "ON k.id = h.task_id WHERE k.name = 'tick' AND k.tenant = %s AND h.state = 'succeeded'"
    )
    wait_until(
        lambda: sql.execute(runs, [a.name]).fetchone()["n"] >= 2,
        timeout=30,
        message=lambda: f"A's schedule to fire and run twice; worker:\n{worker.output}",
    )
    fired_b = sql.execute(
        "SELECT count(*) AS n FROM pgsched.execution e JOIN pgsched.task k ON k.id = e.task_id "
        "WHERE k.name = 'tick' AND k.tenant = %s",
        [b.name],
    ).fetchone()["n"]
    assert fired_b >= 1  # the scheduler fired B's schedule too (an instance login)
    assert sql.execute(runs, [b.name]).fetchone()["n"] == 0  # and nobody ran it
    # the leader's services (partitions, roll-up, alerts, webhooks, rescue) ran on the
    # engine's rights, and the worker's writes too
    time.sleep(2)
    for proc in (scheduler, worker):
        assert "permission denied" not in proc.output and "ERROR" not in proc.output, proc.output


def test_a_cancel_notification_from_another_tenants_login_cancels_nothing(
    dsn, sql, tenants_ab, start
):
    """Any login may NOTIFY pgsched_cancel with any id: an application of A names B's running
    execution. The worker asks the database first, and the execution runs on; a cancel
    asked through cancel_v1 by B still ends it at once."""
    a, b, _ = tenants_ab
    cli(dsn, "--tenant", b.name, "task", "create", "sleeper", "--command", "sleep 60")
    ident = sql.execute(
        "SELECT pgsched.enqueue_v1('sleeper', tenant => %s) AS id", [b.name]
    ).fetchone()["id"]
    start("worker", "--poll-interval", "0.2", "--all-tenants")
    wait_until(lambda: _state(sql, ident) == "running", timeout=30, message="the sleeper runs")
    with psycopg.connect(a.app, autocommit=True) as c:
        c.execute("SELECT pg_notify('pgsched_cancel', %s)", [str(ident)])
    time.sleep(2)
    assert _state(sql, ident) == "running"
    with psycopg.connect(b.app, autocommit=True) as c:
        assert c.execute("SELECT pgsched.cancel_v1(%s)", [ident]).fetchone()[0] == "cancelling"
    wait_until(
        lambda: _state(sql, ident) == "cancelled", timeout=10, message="the real cancel to end it"
    )

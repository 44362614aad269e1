"""The SQL API of limits (migration 0024) and the limits' store: each function as the
installation's login, as tenant A's own logins for A, refused for B's queue and for
quotas; the web naming who paused; validation errors naming field and value; waiting work
counted; the tenant's workers woken by a resume, a limit and a quota."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from psycopg import errors as pg_errors
from psycopg import sql as pgsql
from psycopg.rows import dict_row

from pgsched.db import Database
from pgsched.errors import NotFound, PermissionDenied, ValidationError
from pgsched.stores import limits

from ..helpers import notifications_until_marker
from ..tenancy import login_dsn, two_tenants


@pytest.fixture
def ab(dsn):
    """Tenants A and B (tests/tenancy.py), each with a pending execution in queue
    'default'."""
    with two_tenants(dsn) as (a, b, made):
        yield a, b, made


@pytest.fixture
def web_login(dsn, ab):
    """A login of the web (pgsched_web, in no tenant): acts for the tenant its transaction
    sets."""
    role = f"web_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(
            pgsql.SQL("CREATE ROLE {} LOGIN IN ROLE pgsched_web").format(pgsql.Identifier(role))
        )
    ab[2].append(role)
    return login_dsn(dsn, role)


def _as(dsn: str):
    return psycopg.connect(dsn, autocommit=True, row_factory=dict_row)


def test_the_installation_pauses_resumes_and_limits_any_tenants_queue(db, sql, ab):
    _, b, _ = ab
    row = limits.queue_pause(db, b.name, "reports", "vendor maintenance")
    user = sql.execute("SELECT session_user AS u").fetchone()["u"]
    assert row["tenant"] == b.name and row["name"] == "reports"
    assert row["paused_at"] is not None and row["paused_by"] == f"login {user}"
    assert row["pause_reason"] == "vendor maintenance"
    again = limits.queue_pause(db, b.name, "reports", None)  # paused stays paused, as it was
    assert (again["paused_at"], again["pause_reason"]) == (row["paused_at"], "vendor maintenance")

    row = limits.queue_set_limits(
        db, b.name, "reports", max_running=4, rate_limit=60, rate_period_seconds=60
    )
    assert (row["max_running"], row["rate_limit"], row["rate_period_seconds"]) == (4, 60, 60.0)
    row = limits.queue_set_limits(db, b.name, "reports", rate_limit=30)  # the rest is left
    assert (row["max_running"], row["rate_limit"], row["rate_period_seconds"]) == (4, 30, 60.0)
    row = limits.queue_set_limits(db, b.name, "reports", max_running=None)
    assert (row["max_running"], row["rate_limit"]) == (None, 30)
    row = limits.queue_set_limits(db, b.name, "reports", rate_limit=None)
    assert (row["rate_limit"], row["rate_period_seconds"]) == (None, None)
    assert row["paused_at"] is not None  # limits leave the pause alone

    row = limits.queue_resume(db, b.name, "reports")
    assert (row["paused_at"], row["paused_by"], row["pause_reason"]) == (None, None, None)
    stored = sql.execute(
        "SELECT * FROM pgsched.queue WHERE tenant = %s AND name = 'reports'", [b.name]
    ).fetchone()
    assert stored["paused_at"] is None and stored["max_running"] is None


def test_a_tenants_own_logins_change_its_queues_and_not_anothers(sql, ab):
    a, b, _ = ab
    with _as(a.app) as c:
        r = c.execute("SELECT * FROM pgsched.queue_pause_v1('imports', 'too busy')").fetchone()
        assert (r["tenant"], r["paused_by"]) == (a.name, f"login {a.roles[0]}")
        r = c.execute("SELECT * FROM pgsched.queue_set_limits_v1('imports', 2)").fetchone()
        assert (r["tenant"], r["max_running"]) == (a.name, 2)
        r = c.execute("SELECT * FROM pgsched.queue_resume_v1('imports')").fetchone()
        assert r["paused_at"] is None
        for call in (
            "SELECT * FROM pgsched.queue_pause_v1('imports', tenant => %s)",
            "SELECT * FROM pgsched.queue_resume_v1('imports', tenant => %s)",
            "SELECT * FROM pgsched.queue_set_limits_v1('imports', 1, tenant => %s)",
        ):
            with pytest.raises(pg_errors.InsufficientPrivilege, match=r"acts for tenant .* only"):
                c.execute(call, [b.name])
        # an application may not say someone else paused
        with pytest.raises(pg_errors.InsufficientPrivilege, match=r"by: role .* may not say"):
            c.execute("SELECT * FROM pgsched.queue_pause_v1('imports', by => 'user admin')")
    # the engine login through the store, as a worker pool's operator would
    engine = Database.connect(a.engine, max_size=1)
    try:
        row = limits.queue_pause(engine, a.name, "default", "deploy")
        assert row["paused_by"] == f"login {a.roles[1]}"
        assert row["ready"] >= 1 and row["waiting"] == row["ready"]  # A's pending runs: paused
        assert {q["tenant"] for q in limits.queues(engine)} == {a.name}  # B's are not seen
        with pytest.raises(PermissionDenied, match=r"acts for tenant .* only"):
            limits.queue_pause(engine, b.name, "default", None)
        with pytest.raises(PermissionDenied):
            limits.queue_set_limits(engine, b.name, "default", max_running=1)
    finally:
        engine.close()
    assert (
        sql.execute(
            "SELECT count(*) AS n FROM pgsched.queue WHERE tenant = %s", [b.name]
        ).fetchone()["n"]
        == 0
    )


def test_the_web_names_who_paused_and_acts_for_the_tenant_it_set(ab, web_login):
    a, b, _ = ab
    with _as(web_login) as c:
        with c.transaction():
            c.execute("SELECT set_config('pgsched.tenant', %s, true)", [a.name])
            r = c.execute(
                "SELECT * FROM pgsched.queue_pause_v1('default', 'deploy', by => 'user alice')"
            ).fetchone()
            assert (r["tenant"], r["paused_by"]) == (a.name, "user alice")
            with pytest.raises(pg_errors.InsufficientPrivilege):
                c.execute("SELECT * FROM pgsched.queue_pause_v1('default', tenant => %s)", [b.name])
        with c.transaction():
            c.execute("SELECT set_config('pgsched.tenant', %s, true)", [a.name])
            with pytest.raises(
                pg_errors.InsufficientPrivilege, match="quotas are the installation"
            ):
                c.execute(
                    "SELECT * FROM pgsched.tenant_set_quotas_v1(%s, max_running => 5)", [a.name]
                )
        with c.transaction():  # the web acting for every tenant: an instance principal
            c.execute("SELECT set_config('pgsched.tenant', '*', true)")
            r = c.execute(
                "SELECT * FROM pgsched.tenant_set_quotas_v1(%s, max_running => 5)", [b.name]
            ).fetchone()
            assert (r["name"], r["max_running"]) == (b.name, 5)
            with pytest.raises(pg_errors.InvalidParameterValue, match="by: 'alice' must be a kind"):
                c.execute(
                    "SELECT * FROM pgsched.queue_pause_v1('x', tenant => %s, by => 'alice')",
                    [a.name],
                )


def test_quotas_are_read_by_the_tenant_and_set_by_the_installation_only(db, sql, ab):
    a, b, _ = ab
    before = limits.tenant_quotas(db, a.name)  # made by 0021's defaults for a new tenant
    assert before["max_running"] == 100 and before["max_starts_per_hour"] == 10_000
    assert (before["running"], before["hour_starts"], before["over"]) == (0, 0, [])
    row = limits.tenant_set_quotas(db, a.name, max_running=3, max_log_bytes=None, weight=2)
    assert (row["max_running"], row["max_log_bytes"], row["weight"]) == (3, None, 2)
    assert row["max_starts_per_hour"] == 10_000  # left
    row = limits.tenant_set_quotas(db, a.name, max_running=None)
    assert row["max_running"] is None and row["weight"] == 2
    with _as(a.app) as c:
        own = c.execute("SELECT * FROM pgsched.tenant_usage_v1()").fetchone()
        assert (own["name"], own["weight"], own["max_running"]) == (a.name, 2, None)
        with pytest.raises(pg_errors.InsufficientPrivilege, match=r"acts for tenant .* only"):
            c.execute("SELECT * FROM pgsched.tenant_usage_v1(%s)", [b.name])
        with pytest.raises(pg_errors.InsufficientPrivilege, match="quotas are the installation"):
            c.execute(
                "SELECT * FROM pgsched.tenant_set_quotas_v1(%s, max_running => 1000)", [a.name]
            )
    engine = Database.connect(a.engine, max_size=1)
    try:
        assert limits.tenant_quotas(engine, a.name)["weight"] == 2
        with pytest.raises(PermissionDenied):
            limits.tenant_set_quotas(engine, a.name, max_running=1000)
    finally:
        engine.close()
    assert sql.execute(
        "SELECT max_running FROM pgsched.tenant WHERE name = %s", [a.name]
    ).fetchone() == {"max_running": None}
    with pytest.raises(NotFound, match="tenant: no tenant 'nobody'"):
        limits.tenant_quotas(db, "nobody")
    with pytest.raises(NotFound, match="tenant: no tenant 'nobody'"):
        limits.tenant_set_quotas(db, "nobody", weight=1)


def test_usage_counts_running_from_the_rows_and_this_hours_starts(db, sql, ab):
    a, _, _ = ab
    sql.execute(
        "UPDATE pgsched.execution SET state = 'running', worker_id = NULL WHERE tenant = %s",
        [a.name],
    )
    sql.execute(
        "UPDATE pgsched.tenant_usage SET hour_start = date_trunc('hour', now(), 'UTC'), "
        "hour_starts = 7, over = '{log_bytes}' WHERE tenant = %s",
        [a.name],
    )
    running = sql.execute(
        "SELECT count(*) AS n FROM pgsched.execution WHERE tenant = %s AND state = 'running'",
        [a.name],
    ).fetchone()["n"]
    row = limits.tenant_quotas(db, a.name)
    assert running >= 2  # its pending job run and DAG node
    assert (row["running"], row["hour_starts"], row["over"]) == (running, 7, ["log_bytes"])
    sql.execute(
        "UPDATE pgsched.tenant_usage SET hour_start = date_trunc('hour', now(), 'UTC') - interval '1 hour' "
        "WHERE tenant = %s",
        [a.name],
    )
    assert (
        limits.tenant_quotas(db, a.name)["hour_starts"] == 0
    )  # last hour's starts are not this hour's


def test_waiting_counts_the_ready_rows_a_limit_holds_back(db, sql, ab):
    a, _, _ = ab
    for _ in range(3):
        sql.execute("SELECT pgsched.enqueue_v1('job', tenant => %s)", [a.name])
    first = limits.queue(db, a.name, "default")
    ready = first["ready"]  # the three, A's pending job run and its DAG's first node
    assert (ready, first["waiting"], first["running"]) == (5, 0, 0)
    sql.execute(
        "UPDATE pgsched.execution SET state = 'running' WHERE id = (SELECT min(id) FROM pgsched.execution "
        "WHERE tenant = %s AND state = 'pending')",
        [a.name],
    )
    row = limits.queue_set_limits(db, a.name, "default", max_running=1)
    assert (row["running"], row["ready"], row["waiting"]) == (1, ready - 1, ready - 1)
    row = limits.queue_set_limits(db, a.name, "default", max_running=2)
    assert row["waiting"] == 0


def test_a_queue_with_nothing_is_not_found_and_resuming_it_changes_nothing(db, sql, ab):
    a, _, _ = ab
    with pytest.raises(NotFound, match="queue: no queue 'quiet'"):
        limits.queue(db, a.name, "quiet")
    with pytest.raises(NotFound, match="queue: no queue 'quiet'"):  # every face alike
        limits.queue_resume(db, a.name, "quiet")
    assert (
        sql.execute("SELECT count(*) AS n FROM pgsched.queue WHERE name = 'quiet'").fetchone()["n"]
        == 0
    )


def test_resume_limits_and_quotas_wake_the_tenants_workers(db, sql, dsn, ab):
    a, _, _ = ab
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute("LISTEN pgsched_execution")
        limits.queue_pause(db, a.name, "default", None)
        assert notifications_until_marker(listener, sql) == []  # a pause frees nothing
        limits.queue_resume(db, a.name, "default")
        limits.queue_set_limits(db, a.name, "default", max_running=5)
        limits.tenant_set_quotas(db, a.name, max_running=50)
        assert notifications_until_marker(listener, sql) == [a.name] * 3


@pytest.mark.parametrize(
    ("call", "message"),
    [
        ("queue_pause_v1('bad queue')", "queue_name: 'bad queue' must be 1-64 characters"),
        ("queue_pause_v1(NULL)", "queue_name: NULL must be"),
        ("queue_pause_v1('q', repeat('x', 501))", "reason: 'xxx"),
        ("queue_set_limits_v1('q', 0)", "max_running: 0 must be an integer from 1"),
        ("queue_set_limits_v1('q', rate_limit => -1, rate_period_seconds => 1)", "rate_limit: -1"),
        (
            "queue_set_limits_v1('q', rate_limit => 5, rate_period_seconds => 0)",
            "rate_period_seconds: 0 must",
        ),
        (
            "queue_set_limits_v1('q', rate_limit => 5)",
            "rate_period_seconds: a rate limit of 5 needs",
        ),
        ("queue_set_limits_v1('q', rate_period_seconds => 5)", "rate_limit: a period of 5 s needs"),
        ("queue_set_limits_v1('q', clear => '{rate}')", "clear: 'rate' is not a limit of a queue"),
        (
            "queue_set_limits_v1('q', 2, clear => '{max_running}')",
            "max_running: 2 given and cleared",
        ),
        (
            "tenant_set_quotas_v1('default', max_running => -1)",
            "max_running: -1 must be an integer from 0",
        ),
        (
            "tenant_set_quotas_v1('default', weight => 101)",
            "weight: 101 must be an integer from 1 to 100",
        ),
        ("tenant_set_quotas_v1('default', clear => '{weight}')", "clear: 'weight' is not a quota"),
    ],
)
def test_bad_arguments_are_refused_naming_the_field_and_value(sql, call, message):
    with pytest.raises(pg_errors.InvalidParameterValue) as raised:
        sql.execute(f"SELECT * FROM pgsched.{call}")
    assert str(raised.value.diag.message_primary).startswith(message)


def test_the_store_checks_its_input_before_the_database(db):
    cases = [
        (lambda: limits.queue_pause(db, "default", "bad queue", None), "queue: 'bad queue'"),
        (lambda: limits.queue_set_limits(db, "default", "q", max_running=0), "max_running: 0"),
        (
            lambda: limits.queue_set_limits(db, "default", "q", max_running=True),
            "max_running: True",
        ),
        (
            lambda: limits.queue_set_limits(db, "default", "q", rate_limit=2**31),
            "rate_limit: 2147483648",
        ),
        (
            lambda: limits.queue_set_limits(
                db, "default", "q", rate_limit=5, rate_period_seconds=0
            ),
            "rate_period_seconds: 0",
        ),
        (
            lambda: limits.queue_set_limits(
                db, "default", "q", rate_limit=None, rate_period_seconds=5
            ),
            "rate_limit: None removes the rate limit",
        ),
        (
            lambda: limits.queue_set_limits(db, "default", "q", rate_limit=5),
            "rate_limit: 5 needs rate_period_seconds too: queue 'q' has no rate limit",
        ),
        (
            lambda: limits.queue_set_limits(db, "default", "q", rate_period_seconds=5),
            "rate_period_seconds: 5.0 needs rate_limit too",
        ),
        (lambda: limits.tenant_set_quotas(db, "default", weight=None), "weight: None"),
        (lambda: limits.tenant_set_quotas(db, "default", speed=3), "speed: 3 is not a quota"),
        (lambda: limits.tenant_set_quotas(db, "default", max_log_bytes=-5), "max_log_bytes: -5"),
        (lambda: limits.tenant_quotas(db, "no tenant"), "tenant: 'no tenant'"),
    ]
    for call, message in cases:
        with pytest.raises(ValidationError, match=message.replace("(", r"\(")):
            call()


def test_a_queue_listing_shows_limits_work_and_workers(db, sql, ab):
    a, b, _ = ab
    sql.execute(
        "INSERT INTO pgsched.worker (name, hostname, pid, queues, concurrency, tenants) "
        "VALUES ('w', 'h', 1, '{default,spare}', 4, %s)",
        [[a.name]],
    )
    limits.queue_set_limits(db, a.name, "empty", max_running=1)
    rows = {(r["tenant"], r["name"]): r for r in limits.queues(db)}
    assert {(a.name, "default"), (a.name, "spare"), (a.name, "empty"), (b.name, "default")} <= set(
        rows
    )
    assert rows[(a.name, "default")]["workers"] == 1 and rows[(b.name, "default")]["workers"] == 0
    assert rows[(a.name, "spare")]["ready"] == 0 and rows[(a.name, "empty")]["max_running"] == 1
    assert [r["name"] for r in limits.queues(db, b.name)] == ["default"]


def test_status_reads_only_the_tenants_a_login_may_see(db, ab):
    a, b, _ = ab
    limits.tenant_set_quotas(db, b.name, max_running=0)
    limits.queue_pause(db, b.name, "default", "B's own business")
    assert [
        t["tenant"] for t in limits.tenants_at_quota(db) if t["tenant"] in (a.name, b.name)
    ] == [b.name]
    assert [(q["tenant"], q["ready"]) for q in limits.paused_queues(db)] == [(b.name, 2)]
    engine = Database.connect(a.engine, max_size=1)
    try:
        assert limits.tenants_at_quota(engine) == []
        assert limits.paused_queues(engine) == []
        limits.tenant_set_quotas(db, a.name, max_running=0)
        assert [(t["tenant"], t["at"]) for t in limits.tenants_at_quota(engine)] == [
            (a.name, ["max_running"])
        ]
    finally:
        engine.close()

"""Tenants isolated by PostgreSQL itself (issue 17, migration 0018): each test connects as a
real login role of tenant A and attacks tenant B's rows through every door there is: each
table and view, each documented function, the plain INSERT INTO run_request, the engine's
functions. The superuser connection only sets up and checks B's rows afterwards."""

from __future__ import annotations

import json

import psycopg
import pytest
from psycopg import errors as pg_errors
from psycopg import sql as pgsql
from psycopg.rows import dict_row

from ..tenancy import drop_roles, login_dsn, two_tenants

PUBLIC_FUNCTIONS = {
    # name: a call of it aimed at tenant B, given B's ids ({b} is B's name)
    "enqueue_v1": "SELECT pgsched.enqueue_v1('job', tenant => {b})",
    "enqueue_v2": "SELECT * FROM pgsched.enqueue_v2('job', tenant => {b})",
    "enqueue_many_v1": "SELECT pgsched.enqueue_many_v1('job', ARRAY['{{}}'::jsonb], tenant => {b})",
    "enqueue_many_v2": "SELECT pgsched.enqueue_many_v2('job', '[{{}}]'::jsonb, tenant => {b})",
    "trigger_v1": "SELECT pgsched.trigger_v1('job', tenant => {b})",
    "pause_v1": "SELECT pgsched.pause_v1('job', tenant => {b})",
    "resume_v1": "SELECT pgsched.resume_v1('job', tenant => {b})",
    "cancel_v1": "SELECT pgsched.cancel_v1({pending}, tenant => {b})",
    "dlq_retry_v1": "SELECT pgsched.dlq_retry_v1({dead}, tenant => {b})",
    "dlq_retry_all_v1": "SELECT pgsched.dlq_retry_all_v1(tenant => {b})",
    "dlq_purge_v1": "SELECT pgsched.dlq_purge_v1(tenant => {b})",
    "dag_trigger_v1": "SELECT pgsched.dag_trigger_v1('etl', tenant => {b})",
    "dag_cancel_v1": "SELECT pgsched.dag_cancel_v1({run}, tenant => {b})",
    "dag_rerun_v1": "SELECT pgsched.dag_rerun_v1({run}, tenant => {b})",
    "execution_v1": "SELECT * FROM pgsched.execution_v1({dead}, tenant => {b})",
    # the masked reads of migration 0031 (tests/db/test_masking.py tries them further)
    "execution_v2": "SELECT * FROM pgsched.execution_v2({dead}, tenant => {b})",
    "task_v1": "SELECT * FROM pgsched.task_v1('job', tenant => {b})",
    # the read with progress of migration 0038 (what App.wait reads)
    "execution_v3": "SELECT * FROM pgsched.execution_v3({dead}, tenant => {b})",
    # the locks of migration 0023 (tests/db/test_locks.py tries them further)
    "lock_try_v1": "SELECT pgsched.lock_try_v1('x', tenant => {b})",
    "lock_wait_v1": "SELECT pgsched.lock_wait_v1('x', 0.1, tenant => {b})",
    "lock_release_v1": "SELECT pgsched.lock_release_v1('x', tenant => {b})",
    "lock_list_v1": "SELECT * FROM pgsched.lock_list_v1(tenant => {b})",
    "queue_pause_v1": "SELECT * FROM pgsched.queue_pause_v1('default', tenant => {b})",
    "queue_resume_v1": "SELECT * FROM pgsched.queue_resume_v1('default', tenant => {b})",
    "queue_set_limits_v1": "SELECT * FROM pgsched.queue_set_limits_v1('default', 1, tenant => {b})",
    "tenant_usage_v1": "SELECT * FROM pgsched.tenant_usage_v1({b})",
    "tenant_set_quotas_v1": "SELECT * FROM pgsched.tenant_set_quotas_v1({b}, max_running => 0)",
    # the secrets of migration 0029 (tests/db/test_secrets.py tries them further)
    "secret_set_v1": "SELECT pgsched.secret_set_v1('x', decode(repeat('00', 16), 'hex'), "
    "decode(repeat('00', 12), 'hex'), '0123456789abcdef', tenant => {b})",
    "secret_list_v1": "SELECT * FROM pgsched.secret_list_v1(tenant => {b})",
    "secret_delete_v1": "SELECT pgsched.secret_delete_v1('x', tenant => {b})",
}

# The same calls with B's ids but no tenant: they act in the caller's own tenant A, where
# B's ids are not found.
BY_ID = {
    "cancel_v1": "SELECT pgsched.cancel_v1({pending})",
    "dlq_retry_v1": "SELECT pgsched.dlq_retry_v1({dead})",
    "dag_cancel_v1": "SELECT pgsched.dag_cancel_v1({run})",
    "dag_rerun_v1": "SELECT pgsched.dag_rerun_v1({run})",
    "execution_v1": "SELECT * FROM pgsched.execution_v1({dead})",
    "execution_v2": "SELECT * FROM pgsched.execution_v2({dead})",
    "execution_v3": "SELECT * FROM pgsched.execution_v3({dead})",
}


@pytest.fixture
def tenants_ab(dsn):
    with two_tenants(dsn) as ab:
        yield ab


def _b_state(sql, b) -> dict:
    """What the attacks must leave as it was: B's rows, counted and read."""
    return sql.execute(
        """SELECT (SELECT count(*) FROM pgsched.execution WHERE tenant = %(t)s) AS queued,
                  (SELECT state FROM pgsched.execution WHERE id = %(p)s) AS pending,
                  (SELECT state FROM pgsched.execution_history WHERE id = %(d)s) AS dead,
                  (SELECT state FROM pgsched.dag_run WHERE id = %(r)s) AS run,
                  (SELECT count(*) FROM pgsched.dag_run WHERE tenant = %(t)s) AS runs,
                  (SELECT enabled FROM pgsched.task WHERE id = %(k)s) AS enabled""",
        {"t": b.name, "p": b.pending_id, "d": b.dead_id, "r": b.run_id, "k": b.task_id},
    ).fetchone()


def _relations(sql) -> list[str]:
    return [
        r["rel"]
        for r in sql.execute(
            "SELECT c.oid::regclass::text AS rel FROM pg_class c "
            "WHERE c.relnamespace IN ('pgsched'::regnamespace, 'pgsched_internal'::regnamespace) "
            "AND c.relkind IN ('r', 'p', 'v') ORDER BY 1"
        ).fetchall()
    ]


def test_an_application_login_reads_no_table_or_view_at_all(sql, tenants_ab):
    a, _b, _ = tenants_ab
    relations = _relations(sql)
    assert "pgsched.web_key" in relations and "pgsched.execution_history_default" in relations
    readable = []
    with psycopg.connect(a.app, autocommit=True) as c:
        for rel in relations:
            try:
                c.execute(pgsql.SQL("SELECT 1 FROM {} LIMIT 1").format(pgsql.SQL(rel)))
                if rel != "pgsched.run_request":  # returns no rows by definition
                    readable.append(rel)
            except pg_errors.InsufficientPrivilege:
                pass
    assert readable == []


def test_an_application_login_cannot_write_a_table_directly(sql, tenants_ab):
    a, b, _ = tenants_ab
    with psycopg.connect(a.app, autocommit=True) as c:
        for statement in (
            "INSERT INTO pgsched.execution (tenant, task_id, scheduled_at, run_at, trigger, queue) "
            f"VALUES ('{b.name}', {b.task_id}, now(), now(), 'api', 'default')",
            f"UPDATE pgsched.task SET command = 'id' WHERE id = {b.task_id}",
            "DELETE FROM pgsched.web_key",
            f"INSERT INTO pgsched.tenant_role VALUES ('x', '{b.name}', 'app')",
        ):
            with pytest.raises(pg_errors.InsufficientPrivilege):
                c.execute(statement)


@pytest.mark.parametrize("name", sorted(PUBLIC_FUNCTIONS))
def test_every_public_function_refuses_another_tenant(sql, tenants_ab, name):
    a, b, _ = tenants_ab
    before = _b_state(sql, b)
    call = PUBLIC_FUNCTIONS[name].format(
        b=f"'{b.name}'", pending=b.pending_id, dead=b.dead_id, run=b.run_id
    )
    with psycopg.connect(a.app, autocommit=True) as c:
        with pytest.raises(pg_errors.InsufficientPrivilege, match=r"acts for tenant .* only"):
            c.execute(call)
        if name in BY_ID:  # B's ids without a tenant: looked up in A, not found
            with pytest.raises(pg_errors.NoDataFound):
                c.execute(BY_ID[name].format(pending=b.pending_id, dead=b.dead_id, run=b.run_id))
    assert _b_state(sql, b) == before


def test_the_documented_functions_all_are_tried(sql):
    """A new public function must be added to the attack above."""
    names = {
        r["proname"]
        for r in sql.execute(
            "SELECT proname FROM pg_proc WHERE pronamespace = 'pgsched'::regnamespace"
        ).fetchall()
    }
    assert names == set(PUBLIC_FUNCTIONS)


def test_every_public_function_is_definer_with_a_pinned_search_path_and_not_public(sql):
    rows = sql.execute(
        "SELECT p.proname, p.prosecdef, p.proconfig, "
        "has_function_privilege('public', p.oid, 'EXECUTE') AS public_may "
        "FROM pg_proc p WHERE p.pronamespace = 'pgsched'::regnamespace"
    ).fetchall()
    assert rows and all(r["prosecdef"] for r in rows)
    assert all(r["proconfig"] == ["search_path=pg_catalog, pgsched, pg_temp"] for r in rows)
    assert not any(r["public_may"] for r in rows)


def test_an_application_login_enqueues_and_inserts_run_requests_in_its_own_tenant_only(
    sql, tenants_ab
):
    a, b, _ = tenants_ab
    before = _b_state(sql, b)
    with psycopg.connect(a.app, autocommit=True, row_factory=dict_row) as c:
        own = c.execute("SELECT pgsched.enqueue_v1('job') AS id").fetchone()["id"]
        req = c.execute(
            "INSERT INTO pgsched.run_request (task, params) VALUES ('job', '{\"x\": 1}') "
            "RETURNING execution_id, tenant"
        ).fetchone()
        assert req["tenant"] == a.name
        with pytest.raises(pg_errors.InsufficientPrivilege):
            c.execute("INSERT INTO pgsched.run_request (task, tenant) VALUES ('job', %s)", [b.name])
        with pytest.raises(pg_errors.InsufficientPrivilege, match="trigger"):
            c.execute("SELECT pgsched.enqueue_v1('job', trigger => 'schedule')")
        with pytest.raises(pg_errors.InsufficientPrivilege):  # the engine's functions
            c.execute(
                "SELECT pgsched_internal.enqueue_v1('job', NULL, NULL, NULL, NULL, %s, 'api')",
                [b.name],
            )
    with psycopg.connect(a.app, autocommit=True, row_factory=dict_row) as c:  # and reads them
        mine = c.execute("SELECT * FROM pgsched.execution_v1(%s)", [own]).fetchone()
        assert (mine["task"], mine["state"], mine["trigger"]) == ("job", "pending", "api")
        dead = c.execute("SELECT * FROM pgsched.execution_v1(%s)", [a.dead_id]).fetchone()
        assert (dead["state"], dead["error"]) == ("dead", "boom")
    rows = sql.execute(
        "SELECT id, tenant, task_id FROM pgsched.execution WHERE id IN (%s, %s) ORDER BY id",
        [own, req["execution_id"]],
    ).fetchall()
    assert [(r["tenant"], r["task_id"]) for r in rows] == [(a.name, a.task_id)] * 2
    assert _b_state(sql, b) == before


def test_a_login_in_no_tenant_may_do_nothing(sql, dsn, tenants_ab):
    a, b, extra = tenants_ab
    extra.append(role := f"stray_{a.name}")
    sql.execute(
        pgsql.SQL("CREATE ROLE {} LOGIN IN ROLE pgsched_app").format(pgsql.Identifier(role))
    )
    with psycopg.connect(login_dsn(dsn, role), autocommit=True) as c:
        with pytest.raises(pg_errors.InsufficientPrivilege, match="acts for no tenant"):
            c.execute("SELECT pgsched.enqueue_v1('job', tenant => %s)", [b.name])


def _tenant_tables(sql) -> list[str]:
    return [
        r["rel"]
        for r in sql.execute(
            "SELECT c.oid::regclass::text AS rel FROM pg_class c WHERE c.relnamespace = "
            "'pgsched'::regnamespace AND c.relrowsecurity AND NOT c.relispartition ORDER BY 1"
        ).fetchall()
    ]


def _visible(conn, rel: str, tenant_of: dict[str, str]) -> set[str]:
    """The tenants of the rows of ``rel`` this connection sees."""
    column = tenant_of.get(rel, "tenant")
    rows = conn.execute(
        pgsql.SQL(f"SELECT DISTINCT {column} AS t FROM {rel} x")
    ).fetchall()  # names from pg_class
    return {r[0] for r in rows}


# tables whose rows belong to a parent's tenant: how to name it
PARENT_TENANT = {
    "pgsched.tenant": "x.name",  # a tenant's own row: its quotas (0028)
    "pgsched.dag_node": "(SELECT d.tenant FROM pgsched.dag d WHERE d.id = x.dag_id)",
    "pgsched.dag_node_run": "(SELECT r.tenant FROM pgsched.dag_run r WHERE r.id = x.run_id)",
    "pgsched.task_alerting": "(SELECT k.tenant FROM pgsched.task k WHERE k.id = x.task_id)",
}


def test_the_web_login_sees_only_the_tenant_its_transaction_set(sql, dsn, tenants_ab):
    a, b, extra = tenants_ab
    extra.append(role := f"web_{a.name}")
    sql.execute(
        pgsql.SQL("CREATE ROLE {} LOGIN IN ROLE pgsched_web").format(pgsql.Identifier(role))
    )
    sql.execute(
        "INSERT INTO pgsched.task_alerting (task_id, on_failure) VALUES (%s, 'https://a'), (%s, 'https://b')",
        [a.task_id, b.task_id],
    )
    tables = _tenant_tables(sql)
    assert {
        "pgsched.task",
        "pgsched.execution",
        "pgsched.execution_history",
        "pgsched.dag_run",
        "pgsched.dag_node_run",
        "pgsched.alert",
    } <= set(tables)
    with psycopg.connect(login_dsn(dsn, role)) as c:
        seen_unset = {rel: _visible(c, rel, PARENT_TENANT) for rel in tables}
        c.rollback()
        c.execute("SELECT set_config('pgsched.tenant', %s, true)", [a.name])
        seen_a = {rel: _visible(c, rel, PARENT_TENANT) for rel in tables}
        with pytest.raises(pg_errors.InsufficientPrivilege):  # RLS: a row of B refused
            c.execute(
                "INSERT INTO pgsched.execution (tenant, task_id, scheduled_at, run_at, trigger, "
                "queue) VALUES (%s, %s, now(), now(), 'api', 'default')",
                [b.name, b.task_id],
            )
        c.rollback()
        with pytest.raises(pg_errors.InsufficientPrivilege):
            c.execute("SELECT pgsched.enqueue_v1('job', tenant => %s)", [b.name])
        c.rollback()
        c.execute("SELECT set_config('pgsched.tenant', '*', true)")
        seen_all = {rel: _visible(c, rel, PARENT_TENANT) for rel in tables}
        c.rollback()
        assert c.execute("SELECT count(*) FROM pgsched.web_key").fetchone() is not None
    assert all(not seen for seen in seen_unset.values())
    assert {rel: seen for rel, seen in seen_a.items() if b.name in seen} == {}
    for rel in (
        "pgsched.task",
        "pgsched.execution",
        "pgsched.execution_history",
        "pgsched.dag_run",
        "pgsched.dag_node_run",
        "pgsched.task_alerting",
    ):
        assert seen_a[rel] == {a.name}, rel
        assert {a.name, b.name} <= seen_all[rel], rel


def test_a_tenants_engine_login_sees_only_its_tenant_and_no_credentials(sql, tenants_ab):
    a, b, _ = tenants_ab
    tables = _tenant_tables(sql)
    with psycopg.connect(a.engine, autocommit=True) as c:
        c.execute("SELECT set_config('pgsched.tenant', %s, false)", [b.name])  # no effect
        seen = {rel: _visible(c, rel, PARENT_TENANT) for rel in tables}
        for secret in ("pgsched.web_key", "pgsched.web_user", "pgsched.api_token"):
            with pytest.raises(pg_errors.InsufficientPrivilege):
                c.execute(pgsql.SQL("SELECT * FROM {}").format(pgsql.SQL(secret)))
        with pytest.raises(pg_errors.InsufficientPrivilege):  # partitions only via parents
            c.execute("SELECT * FROM pgsched.execution_history_default")
        with pytest.raises(pg_errors.InsufficientPrivilege):
            c.execute("SELECT pgsched.cancel_v1(%s, tenant => %s)", [b.pending_id, b.name])
        # the map of logins to tenants, the tenants and the migrations are the owner's to
        # write: a login that could write the map could put itself in B
        for write in (
            f"UPDATE pgsched.tenant_role SET tenant = '{b.name}'",
            f"INSERT INTO pgsched.tenant_role VALUES (current_user, '{b.name}', 'engine')",
            "DELETE FROM pgsched.tenant_role",
            "INSERT INTO pgsched.tenant (name) VALUES ('mine')",
            "DELETE FROM pgsched.schema_migration",
        ):
            with pytest.raises(pg_errors.InsufficientPrivilege):
                c.execute(write)
        assert c.execute("SELECT pgsched_internal.session_tenant_v1()").fetchone()[0] == a.name
    assert {rel: s for rel, s in seen.items() if b.name in s} == {}
    assert seen["pgsched.execution"] == {a.name}
    assert seen["pgsched.tenant"] == {a.name}  # its own quotas only (0028)


def test_an_execution_must_be_in_its_tasks_tenant(sql, tenants_ab):
    a, b, _ = tenants_ab
    with pytest.raises(pg_errors.CheckViolation, match="belongs to tenant"):
        sql.execute(
            "INSERT INTO pgsched.execution (tenant, task_id, scheduled_at, run_at, trigger, queue) "
            "VALUES (%s, %s, now(), now(), 'api', 'default')",
            [a.name, b.task_id],
        )


def test_every_object_belongs_to_the_owner_and_public_has_nothing(sql):
    rows = sql.execute(
        """SELECT c.oid::regclass::text AS rel, pg_get_userbyid(c.relowner) AS owner,
                  has_table_privilege('public', c.oid, 'SELECT,INSERT,UPDATE,DELETE') AS public_may
             FROM pg_class c
            WHERE c.relnamespace IN ('pgsched'::regnamespace, 'pgsched_internal'::regnamespace)
              AND c.relkind IN ('r', 'p', 'v', 'S')"""
    ).fetchall()
    assert rows
    assert [r["rel"] for r in rows if r["owner"] != "pgsched_owner"] == []
    assert [r["rel"] for r in rows if r["public_may"]] == []
    fns = sql.execute(
        "SELECT p.oid::regprocedure::text AS fn FROM pg_proc p WHERE p.pronamespace IN "
        "('pgsched'::regnamespace, 'pgsched_internal'::regnamespace) AND "
        "(pg_get_userbyid(p.proowner) <> 'pgsched_owner' OR "
        "has_function_privilege('public', p.oid, 'EXECUTE'))"
    ).fetchall()
    assert fns == []


def test_every_table_with_a_tenant_is_under_row_level_security_or_declared(sql):
    """A new table with a tenant column gets row-level security from secure_v1(); only the
    instance's tables and the web's own (sign-in looks across tenants) are left out, and
    those the engine cannot read when they hold credentials."""
    rows = sql.execute(
        """SELECT c.relname::text AS name, c.relrowsecurity AS rls,
                  has_table_privilege('pgsched_engine', c.oid, 'SELECT') AS engine_may
             FROM pg_class c
            WHERE c.relnamespace = 'pgsched'::regnamespace AND c.relkind IN ('r', 'p')
              AND NOT c.relispartition
              AND EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'tenant')"""
    ).fetchall()
    unguarded = {r["name"] for r in rows if not r["rls"]}
    assert unguarded == {"leader", "api_token", "web_user"} | {
        r["name"] for r in rows if r["name"].startswith("web_") and not r["rls"]
    }
    assert not any(r["engine_may"] for r in rows if r["name"] in ("api_token", "web_user"))


def test_a_tenants_login_is_made_mapped_and_dropped_with_its_tenant(sql, db, dsn):
    from pgsched.errors import PgschedError
    from pgsched.stores import tenants

    tenant, role = "tz_login", "app_tz_login"
    try:
        made = tenants.create(db, tenant, logins=((role, "app"),), password="s3cret")
        assert made["made"] and made["logins"] == [{"role": role, "purpose": "app", "made": True}]
        assert tenants.create(db, tenant)["made"] is False  # again: nothing happens
        listed = {r["name"]: r for r in tenants.list_all(db)}
        assert listed[tenant]["logins"] == [f"{role}:app"]
        assert sql.execute(
            "SELECT pg_has_role(%s, 'pgsched_app', 'MEMBER') AS m", [role]
        ).fetchone()["m"]
        with psycopg.connect(login_dsn(dsn, role), autocommit=True) as c:  # in its tenant
            with pytest.raises(pg_errors.NoDataFound, match=f"in tenant '{tenant}'"):
                c.execute("SELECT pgsched.enqueue_v1('nothing')")
        sql.execute(
            "INSERT INTO pgsched.api_token (tenant, role, name, token_sha256) "
            "VALUES (%s, 'viewer', 'left', sha256('left'::bytea))",
            [tenant],
        )
        with pytest.raises(PgschedError, match=r"still has 1 token; .* revoke the tokens"):
            tenants.delete(db, tenant)  # its token would go on working
        sql.execute("UPDATE pgsched.api_token SET revoked_at = now() WHERE tenant = %s", [tenant])
        with psycopg.connect(login_dsn(dsn, role), autocommit=True) as open_session:
            assert tenants.delete(db, tenant, drop_logins=True) == [role]
            with pytest.raises(psycopg.OperationalError):  # its sessions ended with it
                open_session.execute("SELECT 1")
        assert not sql.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [role]).fetchone()
        assert tenant not in {r["name"] for r in tenants.list_all(db)}
    finally:
        drop_roles(dsn, [role])


def test_tenant_list_counts_tasks_as_the_task_list_does(db, tenants_ab):
    """A DAG's node tasks are part of their DAG: tenant A has the task job and the DAG etl
    (whose own task and two node tasks are not counted as tasks)."""
    from pgsched.stores import tenants

    a, _, _ = tenants_ab
    row = {r["name"]: r for r in tenants.list_all(db)}[a.name]
    assert (row["tasks"], row["dags"]) == (1, 1)


def test_the_cli_on_a_tenants_login_acts_in_that_tenant_without_being_told(dsn, tenants_ab):
    from ..helpers import cli

    a, _, _ = tenants_ab
    listed = cli(a.engine, "task", "list", "--json")
    assert sorted(t["name"] for t in json.loads(listed.stdout)) == ["etl", "job"]
    refused = cli(a.app, "task", "list", check=False)
    assert refused.returncode == 1 and "application's login (pgsched_app)" in refused.stderr

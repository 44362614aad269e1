"""Viewers do not see what they should not (issue 19, item 4; migration 0031): env values and
sensitive params are masked in SQL for a session that may not read them, with real login
roles; the raw table stays out of an application's reach; an edit that sends the mask back
keeps the secret."""

from __future__ import annotations

import uuid

import psycopg
import pytest
from psycopg import sql as pgsql
from psycopg.types.json import Jsonb

from pgsched.db import Database
from pgsched.masking import MASK
from pgsched.stores import executions, tasks

from ..factories import make_task
from ..tenancy import drop_roles, login, login_dsn

SECRETS = ("hunter2-env", "tok-param-1", "pw-nested-2", "cust-marked-3", "run-secret-4")
ENV = {"DB_PASSWORD": SECRETS[0], "PLAIN": "also-masked"}
PARAMS = {
    "api_token": SECRETS[1],
    "jobs": [{"name": "a", "Credentials": {"Password": SECRETS[2]}}],
    "customer": SECRETS[3],
    "region": "eu-west",
    "by_ref": "{{secret:db}}",
}


@pytest.fixture
def acme(dsn):
    """Tenant acme with an application login and a task holding secrets in env and params
    (``customer`` marked sensitive), and one execution run with a secret param. Yields
    (tenant, the app login's DSN, its role name, the execution id)."""
    tag = uuid.uuid4().hex[:8]
    name, app = f"acme_{tag}", f"acme_app_{tag}"
    db = Database.connect(dsn, max_size=2)
    try:
        from pgsched.stores import tenants

        tenants.create(db, name, logins=((app, "app"),))
        make_task(db, "job", tenant=name, env=ENV, params=PARAMS, sensitive_params=["Customer"])
        run = tasks.trigger(db, "job", params={"run_secret": SECRETS[4]}, tenant=name)
        yield name, login_dsn(dsn, app), app, run
    finally:
        db.close()
        drop_roles(dsn, [app])


def _text(row: object) -> str:
    return repr(row)


def test_the_mask_is_the_one_the_python_side_restores(sql):
    assert sql.execute("SELECT pgsched_internal.mask_v1() AS m").fetchone()["m"] == MASK


def test_params_are_masked_by_name_at_any_depth_by_mark_and_case(sql):
    got = sql.execute(
        "SELECT pgsched_internal.params_masked_v1(%s, %s) AS p", [Jsonb(PARAMS), ["CUSTOMER"]]
    ).fetchone()["p"]
    assert got == {
        "api_token": MASK,
        "jobs": [{"name": "a", "Credentials": MASK}],
        "customer": MASK,
        "region": "eu-west",
        "by_ref": "{{secret:db}}",
    }
    names = ["password", "PASSWD", "client_secret", "x-auth", "apiKey", "api_key",
             "private_key", "db_dsn", "Token", "credential"]  # fmt: skip
    for key in names:
        doc = sql.execute(
            "SELECT pgsched_internal.params_masked_v1(%s, '{}') AS p", [Jsonb({key: "v"})]
        ).fetchone()["p"]
        assert doc == {key: MASK}, key
    assert sql.execute(
        "SELECT pgsched_internal.params_masked_v1(%s, '{}') AS p", [Jsonb({"region": "v"})]
    ).fetchone()["p"] == {"region": "v"}


def test_a_document_nested_10000_deep_is_masked_whole_below_32_levels(sql):
    deep = '{"a": ' + "[" * 10_000 + '{"password": "deep-secret"}' + "]" * 10_000 + "}"
    got = sql.execute(
        "SELECT pgsched_internal.params_masked_v1(%s::jsonb, '{}')::text AS p", [deep]
    ).fetchone()["p"]
    assert "deep-secret" not in got and MASK in got


def test_an_application_login_sees_masks_and_may_not_read_the_table(dsn, acme):
    _tenant, app_dsn, _, run = acme
    with login(app_dsn) as c:
        task = c.execute("SELECT * FROM pgsched.task_v1('job')").fetchone()
        assert task["env"] == {"DB_PASSWORD": MASK, "PLAIN": MASK}
        assert task["params"]["region"] == "eu-west" and task["params"]["customer"] == MASK
        execution = c.execute("SELECT * FROM pgsched.execution_v2(%s)", [run]).fetchone()
        assert execution["params"]["run_secret"] == MASK
        for secret in SECRETS:
            assert secret not in _text(task) + _text(execution)
        for column in ("env", "params", "*"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute(f"SELECT {column} FROM pgsched.task")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            c.execute("SELECT params FROM pgsched.execution_all")
        c.execute("SET pgsched.reveal = 'on'")  # asking is not enough: only the web's counts
        assert (
            c.execute("SELECT env FROM pgsched.task_v1('job')").fetchone()["env"]["PLAIN"] == MASK
        )


def test_a_member_of_pgsched_secret_reader_sees_the_values(dsn, acme):
    _tenant, app_dsn, app, run = acme
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(pgsql.SQL("GRANT pgsched_secret_reader TO {}").format(pgsql.Identifier(app)))
    with login(app_dsn) as c:
        task = c.execute("SELECT * FROM pgsched.task_v1('job')").fetchone()
        assert task["env"] == ENV and task["params"] == PARAMS
        execution = c.execute("SELECT * FROM pgsched.execution_v2(%s)", [run]).fetchone()
        assert execution["params"]["run_secret"] == SECRETS[4]
        c.execute("SET pgsched.reveal = 'off'")  # any login may ask to see less
        assert (
            c.execute("SELECT env FROM pgsched.task_v1('job')").fetchone()["env"]["PLAIN"] == MASK
        )


def test_the_web_login_shows_values_only_in_a_transaction_that_reveals(dsn, acme):
    tenant, _, _, run = acme
    web = f"web_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(
            pgsql.SQL("CREATE ROLE {} LOGIN IN ROLE pgsched_web").format(pgsql.Identifier(web))
        )
    db = Database.connect(login_dsn(dsn, web), max_size=2)
    try:
        viewer, admin = db.acting_for(tenant), db.acting_for(tenant, reveal=True)
        shown = [tasks.get(viewer, "job", tenant), tasks.list_tasks(viewer, tenant)]
        shown.append(executions.get(viewer, run, tenant))
        for secret in SECRETS:
            assert secret not in _text(shown)
        assert tasks.get(viewer, "job", tenant)["env"]["DB_PASSWORD"] == MASK
        assert tasks.get(admin, "job", tenant)["env"] == ENV
        assert executions.get(admin, run, tenant)["params"]["run_secret"] == SECRETS[4]
    finally:
        db.close()
        drop_roles(dsn, [web])


def test_an_update_that_sends_the_masks_back_keeps_the_secrets(dsn, acme):
    tenant, _, _, _ = acme
    web = f"web_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute(
            pgsql.SQL("CREATE ROLE {} LOGIN IN ROLE pgsched_web").format(pgsql.Identifier(web))
        )
    db = Database.connect(login_dsn(dsn, web), max_size=2)
    try:
        operator = db.acting_for(tenant)
        shown = tasks.get(operator, "job", tenant)
        params = {**shown["params"], "region": "us-east"}
        env = {**shown["env"], "NEW": "n"}
        tasks.update(operator, "job", {"env": env, "params": params}, tenant=tenant)
        stored = tasks.get(db.acting_for(tenant, reveal=True), "job", tenant)
        assert stored["env"] == {**ENV, "NEW": "n"}
        assert stored["params"] == {**PARAMS, "region": "us-east"}
    finally:
        db.close()
        drop_roles(dsn, [web])


def test_a_retry_by_a_masked_operator_runs_the_real_params(dsn, acme):
    tenant, _, _, run = acme
    db = Database.connect(dsn, max_size=2)
    try:
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute(
                "SELECT pgsched_internal.finish_v1(e, 'failed', 'boom') "
                "FROM pgsched.execution e WHERE e.id = %s",
                [run],
            )
        operator = db.acting_for(tenant)
        row = executions.get(operator, run, tenant)
        assert row["params"]["run_secret"] == MASK
        again = executions.retry(operator, row, tenant, how="api").execution_id
        assert executions.get(db, again, tenant)["params"]["run_secret"] == SECRETS[4]
    finally:
        db.close()

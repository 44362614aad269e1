"""Who sets and deletes a tenant's secrets (migration 0036): its engine login (the CLI of
its operators), the web login (its admins) and the installation; never an application's
login (pgsched_app), which enqueues and reads. Every attempt connects as a real login role
(tests/tenancy.py), through the SQL functions and through the CLI."""

from __future__ import annotations

import base64
import os
import uuid

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import errors as pg_errors
from psycopg import sql as pgsql

from pgsched.cli import main
from pgsched.secret_keys import Keyring
from pgsched.stores import secrets as store

from ..tenancy import drop_roles, login, login_dsn, two_tenants

KEY = os.urandom(32)
RING = Keyring([KEY])
SET = (
    "SELECT pgsched.secret_set_v1('db-url', decode(repeat('00', 16), 'hex'), "
    "decode(repeat('00', 12), 'hex'), '0123456789abcdef')"
)


@pytest.fixture
def tenants_ab(dsn):
    with two_tenants(dsn) as ab:
        yield ab


def _names(db, tenant: str) -> list[str]:
    return [r["name"] for r in store.list_secrets(db, tenant)]


def test_an_application_login_may_not_set_nor_delete_its_tenants_secrets(db, tenants_ab):
    a, _, _ = tenants_ab
    store.set_secret(db, RING, a.name, "kept", "value-of-a")
    with login(a.app) as c:
        with pytest.raises(pg_errors.InsufficientPrivilege, match="an application's"):
            c.execute(SET)
        with pytest.raises(pg_errors.InsufficientPrivilege, match="an application's"):
            c.execute("SELECT pgsched.secret_delete_v1('kept')")
        listed = c.execute("SELECT secret_name FROM pgsched.secret_list_v1()").fetchall()
        assert [r["secret_name"] for r in listed] == ["kept"]  # names stay readable
    assert _names(db, a.name) == ["kept"]


def test_the_cli_with_the_tenants_engine_login_sets_and_deletes(db, tenants_ab):
    a, _, _ = tenants_ab
    env = {"PGSCHED_SECRET_KEY": base64.b64encode(KEY).decode()}

    def secret(dsn: str, *args: str):
        return CliRunner().invoke(
            main, ["--dsn", dsn, "secret", *args], input="s3cr3t-value\n", env=env
        )

    # the CLI itself needs more than an application's login (it reads the schema); the SQL
    # functions refusing it is the test above
    refused = secret(a.app, "set", "db-url", "--stdin")
    assert refused.exit_code == 1 and "An application's login" in refused.output
    made = secret(a.engine, "set", "db-url", "--stdin")
    assert made.exit_code == 0, made.output
    assert _names(db, a.name) == ["db-url"]
    assert secret(a.engine, "delete", "db-url").exit_code == 0
    assert _names(db, a.name) == []


def test_the_web_login_and_the_installation_still_set_and_delete(dsn, db, sql, tenants_ab):
    a, _, roles = tenants_ab
    web = f"web_{uuid.uuid4().hex[:8]}"
    roles.append(web)
    sql.execute(pgsql.SQL("CREATE ROLE {} LOGIN IN ROLE pgsched_web").format(pgsql.Identifier(web)))
    with psycopg.connect(login_dsn(dsn, web), autocommit=True) as c:
        c.execute("SELECT set_config('pgsched.tenant', %s, false)", [a.name])
        c.execute(SET)
        assert _names(db, a.name) == ["db-url"]
        c.execute("SELECT pgsched.secret_delete_v1('db-url')")
    assert _names(db, a.name) == []
    assert store.set_secret(db, RING, a.name, "x", "v") is True  # the installation
    store.delete_secret(db, a.name, "x")
    drop_roles(dsn, [web])

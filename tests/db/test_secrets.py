"""A tenant's secrets in PostgreSQL (migration 0029): set, listed and deleted through the
public functions, reachable by no table right, fetched sealed by a worker of their own
tenant only, and bound to their tenant and name (a ciphertext copied to another row does
not open). Every attack connects as a real login role (tests/tenancy.py)."""

from __future__ import annotations

import os
import uuid

import psycopg
import pytest
from psycopg import errors as pg_errors
from psycopg import sql as pgsql

from pgsched.db import Database
from pgsched.errors import NotFound, PermissionDenied, ValidationError
from pgsched.secret_keys import Keyring
from pgsched.secret_refs import SecretUnresolved
from pgsched.stores import secrets as store
from pgsched.worker.secret_resolver import SecretResolver

from ..factories import make_task
from ..tenancy import drop_roles, login, login_dsn, two_tenants

RING = Keyring([os.urandom(32)])


@pytest.fixture
def tenants_ab(dsn):
    with two_tenants(dsn) as ab:
        yield ab


def test_set_list_and_delete_show_no_value_nor_ciphertext(db, sql):
    assert store.set_secret(db, RING, "default", "db-url", "postgres://pw") is True
    assert store.set_secret(db, RING, "default", "db-url", "postgres://pw2") is False
    assert store.set_secret(db, RING, "default", "a.token", "t") is True
    rows = store.list_secrets(db, "default")
    assert [r["name"] for r in rows] == ["a.token", "db-url"]
    assert set(rows[1]) == {
        "name",
        "key_id",
        "created_at",
        "created_by",
        "updated_at",
        "updated_by",
    }
    assert rows[1]["key_id"] == RING.current_id and rows[1]["updated_by"].startswith("login ")
    stored = sql.execute("SELECT * FROM pgsched_internal.secret WHERE name = 'db-url'").fetchone()
    assert b"postgres" not in bytes(stored["ciphertext"])
    assert RING.open(
        "default", "db-url", store.fetch_sealed(db, "default", ["db-url"])["db-url"]
    ) == ("postgres://pw2")
    store.delete_secret(db, "default", "db-url")
    with pytest.raises(NotFound, match="no secret 'db-url' in tenant 'default'"):
        store.delete_secret(db, "default", "db-url")
    with pytest.raises(ValidationError, match="name: 'a b' must be"):
        store.set_secret(db, RING, "default", "a b", "v")
    with pytest.raises(ValidationError, match="value"):
        store.set_secret(db, RING, "default", "x", "")
    with pytest.raises(NotFound, match="no tenant 'nowhere'"):
        store.set_secret(db, RING, "nowhere", "x", "v")


def test_a_tenants_logins_reach_their_own_secrets_only(dsn, db, sql, tenants_ab):
    a, b, roles = tenants_ab
    store.set_secret(db, RING, a.name, "only-a", "value-of-a")
    store.set_secret(db, RING, b.name, "only-b", "value-of-b")
    for who in (a.app, a.engine):
        with login(who) as c:
            with pytest.raises(pg_errors.InsufficientPrivilege):
                c.execute("SELECT * FROM pgsched_internal.secret")
            listed = c.execute("SELECT secret_name FROM pgsched.secret_list_v1()").fetchall()
            assert [r["secret_name"] for r in listed] == ["only-a"]
            for call in (
                "SELECT * FROM pgsched.secret_list_v1(tenant => %s)",
                "SELECT pgsched.secret_delete_v1('only-b', tenant => %s)",
            ):
                with pytest.raises(pg_errors.InsufficientPrivilege, match="acts for tenant"):
                    c.execute(call, [b.name])
    with login(a.app) as c, pytest.raises(pg_errors.InsufficientPrivilege):
        c.execute("SELECT * FROM pgsched_internal.secret_fetch_v1(NULL, ARRAY['only-a'])")
    with login(a.engine) as c:
        with pytest.raises(pg_errors.InsufficientPrivilege, match="acts for tenant"):
            c.execute(
                "SELECT * FROM pgsched_internal.secret_fetch_v1(%s, ARRAY['only-b'])", [b.name]
            )
        own = c.execute(
            "SELECT secret_name FROM pgsched_internal.secret_fetch_v1(%s, ARRAY['only-a', 'only-b'])",
            [a.name],
        ).fetchall()
        assert [r["secret_name"] for r in own] == ["only-a"]
    # the web reads every table under row-level security, but fetches no sealed secret
    web = f"web_{uuid.uuid4().hex[:8]}"
    roles.append(web)
    sql.execute(pgsql.SQL("CREATE ROLE {} LOGIN IN ROLE pgsched_web").format(pgsql.Identifier(web)))
    with psycopg.connect(login_dsn(dsn, web), autocommit=True) as c:
        c.execute("SELECT set_config('pgsched.tenant', %s, false)", [a.name])
        with pytest.raises(pg_errors.InsufficientPrivilege):
            c.execute("SELECT * FROM pgsched_internal.secret")
        with pytest.raises(pg_errors.InsufficientPrivilege, match="no worker's"):
            c.execute(
                "SELECT * FROM pgsched_internal.secret_fetch_v1(%s, ARRAY['only-a'])", [a.name]
            )
    drop_roles(dsn, [web])


def test_a_worker_of_another_tenant_cannot_resolve_a_tenants_secret(db, tenants_ab):
    a, b, _ = tenants_ab
    store.set_secret(db, RING, a.name, "only-a", "value-of-a")
    env = {"X": "{{secret:only-a}}"}
    own, other = Database.connect(a.engine, max_size=1), Database.connect(b.engine, max_size=1)
    try:
        resolved = SecretResolver(own, RING).resolve(a.name, env, None)
        assert resolved.env == {"X": "value-of-a"}
        resolver = SecretResolver(other, RING)
        with pytest.raises(SecretUnresolved, match=f"no secret 'only-a' in tenant '{b.name}'"):
            resolver.resolve(b.name, env, None)
        with pytest.raises(PermissionDenied, match="acts for tenant"):
            resolver.resolve(a.name, env, None)
    finally:
        own.close()
        other.close()


def test_a_ciphertext_copied_to_another_tenant_or_name_does_not_open(db, sql, tenants_ab):
    a, b, _ = tenants_ab
    store.set_secret(db, RING, a.name, "db", "value-of-a")
    for tenant, name in ((b.name, "db"), (a.name, "db2")):
        sql.execute(
            "INSERT INTO pgsched_internal.secret (tenant, name, ciphertext, nonce, key_id, "
            "created_by, updated_by) SELECT %s, %s, ciphertext, nonce, key_id, 'x', 'x' "
            "FROM pgsched_internal.secret WHERE tenant = %s AND name = 'db'",
            [tenant, name, a.name],
        )
    resolver = SecretResolver(db, RING)
    assert resolver.resolve(a.name, {"X": "{{secret:db}}"}, None).env == {"X": "value-of-a"}
    with pytest.raises(SecretUnresolved, match=f"does not open .* for tenant '{b.name}'"):
        resolver.resolve(b.name, {"X": "{{secret:db}}"}, None)
    with pytest.raises(SecretUnresolved, match=r"\{\{secret:db2\}\}: secret 'db2'.*does not open"):
        resolver.resolve(a.name, {"X": "{{secret:db2}}"}, None)
    # and one sealed under a key this worker lacks says which
    with pytest.raises(SecretUnresolved, match=f"sealed with key {RING.current_id}"):
        SecretResolver(db, Keyring([os.urandom(32)])).resolve(a.name, {"X": "{{secret:db}}"}, None)


def test_a_delete_names_the_live_tasks_that_reference_the_secret(db, sql):
    store.set_secret(db, RING, "default", "db_pw", "hunter2")
    store.set_secret(db, RING, "default", "dbXpw", "other")
    make_task(db, "uses-env", env={"PW": "{{secret:db_pw}}"})
    make_task(db, "uses-params", handler_kind="python", python_target="m:f",
              command=None, params={"dsn": "postgres://u:{{secret:db_pw}}@h/db"})  # fmt: skip
    make_task(db, "uses-another", env={"PW": "{{secret:dbXpw}}"})  # '_' is no wildcard
    make_task(db, "gone", env={"PW": "{{secret:db_pw}}"})
    sql.execute("UPDATE pgsched.task SET deleted_at = now() WHERE name = 'gone'")
    assert store.delete_secret(db, "default", "db_pw") == ["uses-env", "uses-params"]
    assert store.delete_secret(db, "default", "dbXpw") == ["uses-another"]

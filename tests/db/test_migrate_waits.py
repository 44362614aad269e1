"""A migrate that waits for a lock says who holds it, and with --lock-timeout gives up naming
them (pgsched/migrate_waits.py): any login, an application's too, may take the migrator's
advisory key or hold a table a migration alters in an open transaction."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from pgsched import migrate
from pgsched.errors import MigrationError

from ..tenancy import login


def _role(dsn: str) -> str:
    return str(conninfo_to_dict(dsn)["user"])


def test_an_app_login_holding_the_migrators_key_is_named_and_the_wait_bounded(dsn, ab):
    a, _, _ = ab
    said: list[str] = []
    with login(a.app) as hostile:
        hostile.execute("SET application_name = 'squatter'")
        hostile.execute("SELECT pg_advisory_lock(%s)", [migrate.MIGRATION_LOCK_KEY])
        pid = hostile.info.backend_pid
        started = time.monotonic()
        with pytest.raises(MigrationError) as caught:
            migrate.migrate(dsn, lock_timeout=2.5, say=said.append)
        waited = time.monotonic() - started
    message = str(caught.value)
    assert "the migration lock" in message and "--lock-timeout" in message
    assert f"pid {pid}" in message and f"login {_role(a.app)}" in message
    assert "application 'squatter'" in message
    assert 2.5 <= waited < 10
    assert said and f"pid {pid}" in said[0] and said[0].startswith("migrate: waiting for a lock")


def test_a_wait_for_a_table_an_open_transaction_reads_is_bounded_and_leaves_nothing(dsn, ab):
    a, _, _ = ab
    known = migrate.load()
    extra = migrate.Migration(
        len(known) + 1, "add_a_column", "ALTER TABLE pgsched.task ADD zz int;"
    )
    with login(a.app, autocommit=False) as reader:
        reader.execute("SELECT * FROM pgsched.task_v1('job')").fetchall()  # holds pgsched.task
        with pytest.raises(MigrationError) as caught:
            migrate.migrate(dsn, known + [extra], lock_timeout=2.5, say=lambda _: None)
        pid = reader.info.backend_pid
    message = str(caught.value)
    assert f"migration {extra.version:04d}_add_a_column needs (it was rolled back)" in message
    assert f"pid {pid}" in message and f"login {_role(a.app)}" in message
    with psycopg.connect(dsn) as c:
        assert c.execute("SELECT max(version) FROM pgsched.schema_migration").fetchone() == (
            len(known),
        )
        assert c.execute(
            "SELECT count(*) FROM pg_attribute WHERE attrelid = 'pgsched.task'::regclass "
            "AND attname = 'zz'"
        ).fetchone() == (0,)


def test_without_a_timeout_it_waits_saying_who_holds_it_then_goes_on(dsn, ab):
    a, _, _ = ab
    known = migrate.load()
    extra = migrate.Migration(len(known) + 1, "after_the_wait", "SELECT 1;")
    said: list[str] = []
    hostile = login(a.app)
    hostile.execute("SELECT pg_advisory_lock(%s)", [migrate.MIGRATION_LOCK_KEY])
    threading.Timer(3.5, hostile.close).start()
    applied = migrate.migrate(dsn, known + [extra], say=said.append)
    assert [m.version for m in applied] == [extra.version]
    assert said and f"login {_role(a.app)}" in said[0]

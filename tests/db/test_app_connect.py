"""``App.connect()`` installs pgsched's schema in a database that has none (the README's
example runs against a fresh database), and refuses one whose schema is behind or ahead
of the code rather than upgrading it under processes that may be running on it."""

from __future__ import annotations

import psycopg
import pytest

from pgsched import App, migrate
from pgsched.errors import SchemaAhead, SchemaBehind


def applied(dsn: str) -> list[int]:
    with psycopg.connect(dsn) as conn:
        rows = conn.execute("SELECT version FROM pgsched.schema_migration ORDER BY version")
        return [r[0] for r in rows]


def test_a_fresh_database_gets_the_schema(empty_dsn):
    db = App(empty_dsn).connect()
    try:
        assert db.one("task_get", name="nothing", tenant="default") is None  # the schema is there
    finally:
        db.close()
    assert applied(empty_dsn) == [m.version for m in migrate.load()]


def test_a_schema_behind_is_refused_not_upgraded(empty_dsn):
    known = migrate.load()
    migrate.migrate(empty_dsn, known[:-1])
    with pytest.raises(
        SchemaBehind, match=rf"lacks migrations \[{known[-1].version}\]: run 'pgsched migrate'"
    ):
        App(empty_dsn).connect()
    assert applied(empty_dsn) == [m.version for m in known[:-1]]


def test_a_schema_ahead_is_refused(dsn):
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO pgsched.schema_migration (version, name, checksum) VALUES (9999, 'future', 'x')"
        )
    with pytest.raises(SchemaAhead, match=r"\[9999\]"):
        App(dsn).connect()

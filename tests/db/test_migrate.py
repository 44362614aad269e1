"""The migrator against a real database: apply, re-apply, checksums, newer schemas,
and ten concurrent migrate processes."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from pgsched import migrate
from pgsched.db import Database
from pgsched.errors import ChecksumMismatch, SchemaAhead, SchemaBehind

from ..helpers import REPO


def test_migrate_applies_all_then_nothing(empty_dsn, sql):
    known = migrate.load()
    applied = migrate.migrate(empty_dsn)
    assert [m.version for m in applied] == [m.version for m in known]
    assert migrate.migrate(empty_dsn) == []
    with psycopg.connect(empty_dsn) as conn:
        rows = conn.execute(
            "SELECT version, checksum FROM pgsched.schema_migration ORDER BY version"
        ).fetchall()
    assert rows == [(m.version, m.checksum) for m in known]


def test_changed_applied_migration_is_refused(empty_dsn):
    known = migrate.load()
    migrate.migrate(empty_dsn)
    edited = [replace(known[0], sql=known[0].sql + "\n-- edited\n")] + known[1:]
    with pytest.raises(ChecksumMismatch, match="0001_initial was changed"):
        migrate.migrate(empty_dsn, edited)


def test_newer_schema_is_refused(empty_dsn):
    known = migrate.load()
    extra = migrate.Migration(len(known) + 1, "from_the_future", "SELECT 1;")
    migrate.migrate(empty_dsn, known + [extra])
    with pytest.raises(SchemaAhead, match=str(len(known) + 1)):
        migrate.migrate(empty_dsn, known)
    db = Database.connect(empty_dsn)
    try:
        with db.transaction() as tx, pytest.raises(SchemaAhead):
            migrate.require_current(tx)
    finally:
        db.close()


def test_processes_refuse_a_schema_behind(empty_dsn):
    db = Database.connect(empty_dsn)
    try:
        with db.transaction() as tx, pytest.raises(SchemaBehind, match="pgsched migrate"):
            migrate.require_current(tx)
    finally:
        db.close()
    proc = subprocess.run(
        [sys.executable, "-m", "pgsched", "--dsn", empty_dsn, "task", "list"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "run 'pgsched migrate'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_failed_migration_leaves_nothing(empty_dsn):
    known = migrate.load()
    broken = migrate.Migration(
        len(known) + 1, "broken", "CREATE TABLE pgsched.half (x int);\nSELECT 1/0;"
    )
    with pytest.raises(migrate.MigrationError, match="rolled back"):
        migrate.migrate(empty_dsn, known + [broken])
    with psycopg.connect(empty_dsn) as conn:
        assert conn.execute("SELECT to_regclass('pgsched.half')").fetchone() == (None,)
        assert conn.execute("SELECT max(version) FROM pgsched.schema_migration").fetchone() == (
            len(known),
        )


def test_ten_concurrent_migrate_processes_leave_one_correct_schema(empty_dsn):
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "pgsched", "--dsn", empty_dsn, "migrate"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        for _ in range(10)
    ]
    results = [(p.communicate(timeout=120), p.returncode) for p in procs]
    results = [(code, out, err) for (out, err), code in results]
    assert all(code == 0 for code, _, _ in results), results
    applied = [out for _, out, _ in results if "applied 0001_initial" in out]
    assert len(applied) == 1, results
    assert sum("schema is up to date" in out for _, out, _ in results) == 9
    with psycopg.connect(empty_dsn) as conn:
        assert conn.execute("SELECT count(*) FROM pgsched.schema_migration").fetchone() == (
            len(migrate.load()),
        )
        tables = {
            r[0]
            for r in conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = 'pgsched' AND c.relkind IN ('r', 'p', 'v')"
            ).fetchall()
        }
    assert {
        "task",
        "execution",
        "execution_history",
        "execution_attempt",
        "execution_log",
        "worker",
        "leader",
        "run_request",
        "schema_migration",
    } <= tables


def test_migrate_creates_the_history_partitions_around_today(empty_dsn):
    """Workers record outcomes from their first minute: the partitions for today exist
    before any scheduler runs (else rows meet a partition being attached)."""
    migrate.migrate(empty_dsn)
    today = datetime.now(UTC).date()
    with psycopg.connect(empty_dsn) as conn:
        names = {
            r[0]
            for r in conn.execute(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "WHERE c.relname ~ '^execution_history_p[0-9]{8}$'"
            )
        }
    assert {
        f"execution_history_p{today + timedelta(days=d):%Y%m%d}" for d in (-1, 0, 1, 2, 3)
    } <= names

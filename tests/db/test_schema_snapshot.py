"""sql/schema.sql is what the migrations make: a freshly migrated database, dumped the way
tests/schema_snapshot.py dumps it, is the checked-in file line for line."""

from __future__ import annotations

import difflib

import pytest

from pgsched import migrate

from .. import schema_snapshot


def test_the_checked_in_schema_dump_is_what_the_migrations_make(empty_dsn):
    checked_in = schema_snapshot.SNAPSHOT.read_text() if schema_snapshot.SNAPSHOT.exists() else ""
    major = schema_snapshot.server_major(empty_dsn)
    if checked_in and schema_snapshot.snapshot_major(checked_in) != major:
        pytest.skip(
            f"sql/schema.sql was dumped on PostgreSQL {schema_snapshot.snapshot_major(checked_in)}, "
            f"this server is {major}: pg_dump writes some definitions differently"
        )
    migrate.migrate(empty_dsn)
    made = schema_snapshot.dump(empty_dsn)
    if made != checked_in:
        diff = "".join(
            difflib.unified_diff(
                checked_in.splitlines(keepends=True),
                made.splitlines(keepends=True),
                "sql/schema.sql (checked in)",
                "what the migrations make",
                n=2,
            )
        )
        pytest.fail(
            f"sql/schema.sql is stale; regenerate it with\n    {schema_snapshot.COMMAND}\n"
            f"and commit it with the migration. The difference:\n{diff}",
            pytrace=False,
        )


def test_the_dump_leaves_out_what_varies_between_runs_and_machines(empty_dsn):
    migrate.migrate(empty_dsn)
    made = schema_snapshot.dump(empty_dsn)
    assert "CREATE TABLE pgsched.execution_history_default" in made  # the DEFAULT partitions stay
    for varying in (
        "\\restrict",
        "\\unrestrict",
        "Dumped from database version",
        "Owner: postgres",
        "\nGRANT ",  # privileges (a function body may say GRANT: secure_v1 does)
        "\nREVOKE ",
        "_p2",
    ):
        assert varying not in made, varying
    assert "CREATE FUNCTION pgsched.enqueue_v1(" in made
    assert "CREATE FUNCTION pgsched_internal.rescue_v1(" in made

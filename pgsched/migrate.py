"""Applies ``migrations/NNNN_name.sql`` in order: each file in its own transaction,
all under one advisory lock, each recorded in ``pgsched.schema_migration`` with the
SHA-256 of its text.

Rules (graphile-worker's migrator is the model): a changed file that was already applied
is an error (:class:`~pgsched.errors.ChecksumMismatch`); a database that holds versions
this code does not know is refused (:class:`~pgsched.errors.SchemaAhead`); processes other
than ``migrate`` refuse a database that is behind (:class:`~pgsched.errors.SchemaBehind`).
Concurrent migrators queue on the lock and the later ones find nothing to do.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import psycopg

from .db import Session, connect, translated
from .errors import ChecksumMismatch, MigrationError, SchemaAhead, SchemaBehind, TransientError
from .migrate_waits import BlockerWatch, describe
from .resources import resource_dir

log = logging.getLogger(__name__)

# pg_advisory_lock key of the migrator: 'pgsched' as bytes, one purpose per key.
MIGRATION_LOCK_KEY = 0x7067736368656401
MIN_SERVER_VERSION = 140000
_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True)
class Migration:
    """One migration file: ``version`` (int), ``name``, ``sql`` text and its ``checksum``."""

    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load(folder: Path | None = None) -> list[Migration]:
    """The migration files of ``folder`` (default: the shipped ``migrations/``), in order.

    Raises MigrationError for a misnamed file or a gap in the numbering.
    """
    folder = folder or resource_dir("migrations")
    found = []
    for path in sorted(folder.glob("*.sql")):
        match = _FILE.match(path.name)
        if not match:
            raise MigrationError(f"migration file {path.name!r} is not named NNNN_snake_case.sql")
        found.append(Migration(int(match[1]), match[2], path.read_text()))
    for expected, migration in enumerate(found, 1):
        if migration.version != expected:
            raise MigrationError(
                f"migration {migration.version:04d} found where {expected:04d} was expected"
            )
    return found


@dataclass(frozen=True)
class Status:
    """Where a database stands: ``applied`` and ``pending`` versions, and ``ahead``: versions
    the database has that this code does not."""

    applied: list[int]
    pending: list[int]
    ahead: list[int]


def _check(applied: list[dict], known: list[Migration]) -> Status:
    by_version = {m.version: m for m in known}
    ahead = [row["version"] for row in applied if row["version"] not in by_version]
    for row in applied:
        migration = by_version.get(row["version"])
        if migration and migration.checksum != row["checksum"]:
            raise ChecksumMismatch(
                f"migration {row['version']:04d}_{row['name']} was changed after it was applied "
                f"(checksum {row['checksum'][:12]} in the database, {migration.checksum[:12]} on disk); "
                "applied migrations must never be edited: add a new one"
            )
    done = {row["version"] for row in applied}
    return Status(
        sorted(done & by_version.keys()), [m.version for m in known if m.version not in done], ahead
    )


def status(session: Session, known: list[Migration] | None = None) -> Status:
    """Compare the database behind ``session`` with the migration files. Read-only."""
    known = known if known is not None else load()
    row = session.one("migration_table_exists")
    applied = session.many("migration_applied") if row and row["present"] else []
    return _check(applied, known)


def require_current(session: Session) -> None:
    """Refuse to run against a schema that is behind or ahead of this code.

    Raises SchemaBehind (run ``pgsched migrate``), SchemaAhead or ChecksumMismatch.
    """
    st = status(session)
    if st.ahead:
        raise SchemaAhead(
            f"the database has migrations {st.ahead} that this pgsched does not know; "
            "upgrade pgsched before running it against this database"
        )
    if st.pending:
        raise SchemaBehind(f"the database lacks migrations {st.pending}: run 'pgsched migrate'")


def migrate(
    dsn: str,
    known: list[Migration] | None = None,
    *,
    lock_timeout: float | None = None,
    say: Callable[[str], None] | None = None,
) -> list[Migration]:
    """Apply every pending migration to the database at ``dsn``; return those applied.
    Then, when that brings it to this code's latest migration, create the history
    partitions from yesterday to 3 days ahead, if missing.

    Safe to run from many processes at once (they serialise on an advisory lock). While it
    waits for a lock (that one, or a table's another session's open transaction holds), it
    calls ``say`` (default: a warning in the log) with who holds it every few seconds
    (:mod:`pgsched.migrate_waits`); ``lock_timeout`` (seconds; None waits for ever) bounds
    each such wait. Raises SchemaAhead, ChecksumMismatch, MigrationError (server older than
    14; a lock waited for past ``lock_timeout``, naming who held it; a migration that failed:
    its transaction is rolled back and nothing of it remains).
    """
    known = known if known is not None else load()
    conn = connect(dsn, autocommit=True, application_name="pgsched migrate")
    session = Session(conn)
    try:
        version = session.one("migration_server_version")
        if version and version["version"] < MIN_SERVER_VERSION:
            raise MigrationError(
                f"PostgreSQL {version['version']} is too old: pgsched needs 14 or newer"
            )
        if lock_timeout is not None:
            session.exec("migration_set_lock_timeout", ms=max(1, round(lock_timeout * 1000)))
        pid = conn.info.backend_pid
        with BlockerWatch(dsn, pid, say or log.warning) as watch:
            return _migrate_locked(conn, session, known, watch, lock_timeout)
    finally:
        conn.close()


def _migrate_locked(
    conn: psycopg.Connection[Any],
    session: Session,
    known: list[Migration],
    watch: BlockerWatch,
    lock_timeout: float | None,
) -> list[Migration]:
    """migrate's work under its advisory lock, watched by ``watch``."""
    try:
        session.exec("migration_lock", key=MIGRATION_LOCK_KEY)
    except TransientError as exc:  # Session translates psycopg's errors
        if not isinstance(exc.__cause__, psycopg.errors.LockNotAvailable):
            raise
        what = "the migration lock (another migrate, or a login holding its key)"
        raise _timed_out(what, watch, lock_timeout) from exc
    try:
        session.exec("migration_bootstrap")
        session.exec("migration_bootstrap_table")
        st = _check(session.many("migration_applied"), known)
        if st.ahead:
            raise SchemaAhead(
                f"the database has migrations {st.ahead} that this pgsched does not "
                "know; refusing to migrate it with older code"
            )
        applied = []
        for migration in known:
            if migration.version not in st.pending:
                continue
            log.info("applying migration %04d_%s", migration.version, migration.name)
            try:
                with conn.transaction():
                    session.exec(
                        "migration_record",
                        version=migration.version,
                        name=migration.name,
                        checksum=migration.checksum,
                    )
                    conn.execute(migration.sql.encode())  # a whole file: simple protocol
            except psycopg.errors.LockNotAvailable as exc:
                raise _timed_out(
                    f"a lock migration {migration.version:04d}_{migration.name} needs "
                    "(it was rolled back)",
                    watch,
                    lock_timeout,
                ) from exc
            except psycopg.Error as exc:
                raise MigrationError(
                    f"migration {migration.version:04d}_{migration.name} failed "
                    f"and was rolled back: {exc}"
                ) from exc
            applied.append(migration)
        # Today's history partitions exist before any worker records an outcome (the
        # leader keeps them ahead from then on). The query calls the function where this
        # code's migrations put it (0017 moved it to pgsched_internal), so a database
        # migrated only part of the way (a test's prefix of the migrations) gets them
        # from the migrate that completes it.
        if max((m.version for m in known), default=0) >= len(load()):
            today = session.now().date()  # the database's day (UTC), not this host's
            with translated():
                session.many("partition_ensure", from_day=today - timedelta(days=1), days=5)
        return applied
    finally:
        with translated():
            if not conn.closed:
                session.exec("migration_unlock", key=MIGRATION_LOCK_KEY)


def _timed_out(what: str, watch: BlockerWatch, lock_timeout: float | None) -> MigrationError:
    held = describe(watch.last) or f"a session not seen (the watch reads every {watch.every} s)"
    return MigrationError(
        f"migrate: waited {lock_timeout} s (--lock-timeout) for {what}, held by {held}; "
        "end that session (SELECT pg_terminate_backend(pid)) or try again"
    )

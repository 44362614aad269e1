"""The database boundary: a connection pool, named queries by name, and translation of
psycopg errors into :mod:`pgsched.errors`.

Usage::

    db = Database.connect(dsn)
    rows = db.many("task_list", tenant="default")
    with db.transaction() as tx:          # one transaction per state change
        tx.one("task_pause", name="nightly", tenant="default")

Timestamps go in and come out as timezone-aware ``datetime`` in UTC (the session time
zone is set to UTC on every connection). ``db.now()`` is the database's clock, the only one
that decides when anything happens.

An error of a named query carries a note (PEP 678) naming the query and its file and
line, ``query 'task_pause' (sql/task.sql:36)``, on the psycopg error and on the pgsched
error it is translated to (whose ``__cause__`` is the psycopg error).

Every connection has TCP keepalives and a TCP user timeout (KEEPALIVES) unless its DSN sets
them, so a server that vanished is noticed; a statement on a connection given a
:class:`~pgsched.deadline.Deadline` is also cut when its reply does not come in time (a
peer that acknowledges and forwards nothing), and raises ConnectionSilent.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from . import queries
from .clock import ServerClock
from .deadline import Deadline, above_server_timeout, unwatched
from .errors import (
    ConnectionFailed,
    ConnectionSilent,
    DatabaseError,
    NotFound,
    PermissionDenied,
    TransientError,
)

log = logging.getLogger(__name__)

Row = dict[str, Any]


# SQLSTATE classes (PostgreSQL manual, appendix A "Error Codes"): 08 connection exception,
# 57P01-57P03 the server is shutting down or starting; 40 transaction rollback and 55P03
# lock not available are races worth retrying.
_CONNECTION_STATES = ("08", "57P01", "57P02", "57P03")
_TRANSIENT_STATES = ("40", "55P03")


# A NUL in JSON text from json.dumps is \u0000 after an even number of backslashes (an odd
# number means the backslash before "u0000" is itself escaped: the text "\u0000").


def _translate(exc: psycopg.Error) -> Exception:
    """Map a psycopg error to a pgsched error with a one-line message."""
    message = (
        exc.diag.message_primary if exc.diag and exc.diag.message_primary else str(exc)
    ).strip()
    state = exc.sqlstate or ""
    if (isinstance(exc, psycopg.OperationalError) and not state) or state.startswith(
        _CONNECTION_STATES
    ):
        return ConnectionFailed(f"database unreachable: {message}")
    if state.startswith(_TRANSIENT_STATES):
        return TransientError(
            f"{message} (a race with another transaction; it may succeed if tried again)"
        )
    if isinstance(exc, pg_errors.CheckViolation) and "partition constraint" in message:
        # A row routed to a DEFAULT partition while the partition for its range was being
        # attached (the leader's maintenance): routed again, it lands in the new partition.
        return TransientError(
            f"{message} (a partition was attached meanwhile; it succeeds if tried again)"
        )
    if isinstance(exc, pg_errors.NoDataFound):
        return NotFound(message)
    if isinstance(exc, pg_errors.InsufficientPrivilege):
        return PermissionDenied(message)
    return DatabaseError(message)


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """Re-raise psycopg errors inside the block as pgsched errors, with the psycopg error's
    notes (the query that failed and its file and line) and the error itself as the
    ``__cause__``."""
    try:
        yield
    except psycopg.Error as exc:
        translation = _translate(exc)
        for note in getattr(exc, "__notes__", ()):
            translation.add_note(note)
        raise translation from exc


def _note_query(exc: BaseException, query: queries.Query) -> None:
    """Add to ``exc`` (keeping its type, so ``except psycopg.errors.X`` still catches it) a
    note naming ``query`` and where its text is: ``query 'task_pause' (sql/task.sql:36)``.
    Shown under a traceback (PEP 678); ``str(exc)``, the one line the CLI prints, is unchanged."""
    note = f"query {query.name!r} (sql/{query.source})"
    if note not in getattr(exc, "__notes__", ()):
        exc.add_note(note)


# Every session pgsched opens: instants in UTC, and dates in the ISO style, the only one
# psycopg parses (a server or database set to DateStyle 'SQL, DMY' made every command fail).
_SESSION = "SET TIME ZONE 'UTC'; SET DateStyle = 'ISO, YMD'"
SESSION_SETTINGS = _SESSION  # for a connection opened elsewhere (pgsched.waiting's async one)


# Seconds a connection attempt may take (libpq's connect_timeout, which psycopg applies to
# the whole attempt).
CONNECT_TIMEOUT = 10

# TCP settings of every connection, unless the DSN sets them (libpq parameters:
# https://www.postgresql.org/docs/current/libpq-connect.html; no-ops on a Unix socket). An
# idle connection whose server vanished (a host gone, a dropped NAT entry) is found after
# 10 s + 3 probes 5 s apart; data sent and not acknowledged for 30 s (tcp_user_timeout, in
# milliseconds) breaks the connection, where Linux retransmits for about 15 minutes. Neither
# finds a peer that acknowledges and forwards nothing: statement deadlines do (deadline.py).
KEEPALIVES = {
    "keepalives": "1",
    "keepalives_idle": "10",
    "keepalives_interval": "5",
    "keepalives_count": "3",
    "tcp_user_timeout": "30000",
}


def tcp_settings(dsn: str) -> dict[str, Any]:
    """The KEEPALIVES that ``dsn`` does not set itself (connection keywords passed beside a
    DSN override it, so only the missing ones are). Raises psycopg.ProgrammingError for a
    DSN that cannot be parsed."""
    given = psycopg.conninfo.conninfo_to_dict(dsn)
    return {k: v for k, v in KEEPALIVES.items() if given.get(k) is None}


def _configure(conn: psycopg.Connection, idle_in_transaction_timeout: float | None = None) -> None:
    conn.execute(_SESSION)
    if idle_in_transaction_timeout is not None:
        conn.execute(
            sql.SQL("SET idle_in_transaction_session_timeout = {}").format(
                sql.Literal(max(1, round(idle_in_transaction_timeout * 1000)))
            )
        )
    conn.commit()


def connect(
    dsn: str,
    *,
    autocommit: bool = True,
    application_name: str = "pgsched",
    deadline: Deadline | None = None,
) -> psycopg.Connection[Row]:
    """Open one dedicated connection (LISTEN, the leader's advisory lock, migrations), with
    KEEPALIVES; ``deadline`` watches its first statements (run statements on it through
    ``Session(conn, deadline)``). Raises ConnectionFailed when the server cannot be reached
    within CONNECT_TIMEOUT seconds, ConnectionSilent when it does not answer the session's
    settings within the deadline."""
    with translated():
        conn = psycopg.connect(
            dsn,
            autocommit=autocommit,
            row_factory=dict_row,
            application_name=application_name,
            connect_timeout=CONNECT_TIMEOUT,
            **tcp_settings(dsn),
        )
        try:
            with deadline.watch(conn) if deadline else unwatched(conn):
                conn.execute(_SESSION)
        except BaseException:
            conn.close()
            raise
        return conn


class Session:
    """Named queries run on one connection (inside a transaction or in autocommit); with a
    ``deadline``, each statement (each transaction, up to its COMMIT) is cut when it
    overruns it, and raises ConnectionSilent."""

    def __init__(self, conn: psycopg.Connection[Row], deadline: Deadline | None = None):
        self.conn = conn
        self._watch = deadline.watch if deadline is not None else unwatched
        #: the tenant to set for this transaction before its first query (Database.acting_for),
        #: and whether it reads sensitive values ("on"/"off": pgsched.reveal, migration 0031)
        self.pending_tenant: str | None = None
        self.pending_reveal = "off"

    def _run(self, query_name: str, expect: str, params: Mapping[str, Any]) -> Any:
        query = queries.get(query_name)
        if query.cardinality != expect:
            raise TypeError(f"query {query_name!r} is :{query.cardinality}, called as :{expect}")
        if self.pending_tenant is not None and not query.text.lstrip().startswith(
            "SET TRANSACTION"
        ):
            # after a SET TRANSACTION, which must come before any query
            tenant, self.pending_tenant = self.pending_tenant, None
            self.one("session_act_for", tenant=tenant, reveal=self.pending_reveal)
        with translated(), self._watch(self.conn):
            try:
                cur = self.conn.execute(query.text, params, binary=query.binary)
                if expect == "one":
                    return cur.fetchone()
                if expect == "many":
                    return cur.fetchall()
                return cur.rowcount
            except psycopg.Error as exc:
                _note_query(exc, query)
                raise

    def one(self, query_name: str, /, **params: Any) -> Row | None:
        """Run a ``:one`` query; the row, or None when there is none."""
        return self._run(query_name, "one", params)

    def many(self, query_name: str, /, **params: Any) -> list[Row]:
        """Run a ``:many`` query; all rows."""
        return self._run(query_name, "many", params)

    def exec(self, query_name: str, /, **params: Any) -> int:
        """Run an ``:exec`` query; the number of rows it touched."""
        return self._run(query_name, "exec", params)

    def now(self) -> datetime:
        """The database's clock: PostgreSQL's ``now()`` as an aware UTC ``datetime`` (the
        start of the current transaction; on an autocommit connection or a pool, of this
        statement). Every instant that decides when something fires, retries or counts as
        late comes from here or from ``now()`` in SQL, never from the host's clock, which
        may be minutes off (DESIGN.md, "Time"). The same as :class:`pgsched.clock.ServerClock`
        on this session, which services are given."""
        return ServerClock(self).now()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Session]:
        """This connection inside one transaction: committed on success, rolled back on
        any exception. The deadline, if any, watches the whole transaction (its statements
        and its COMMIT), not each statement."""
        with translated(), self._watch(self.conn), self.conn.transaction():
            yield Session(self.conn)


class Database(Session):
    """A pool of connections (autocommit); each call outside :meth:`transaction` is one
    statement in its own transaction."""

    def __init__(self, pool: ConnectionPool, dsn: str, deadline: Deadline | None = None):
        self.pool = pool
        self.dsn = dsn
        self.deadline = deadline
        self._server_timeout: float | None = None

    @classmethod
    def connect(
        cls,
        dsn: str,
        *,
        min_size: int = 1,
        max_size: int = 4,
        application_name: str = "pgsched",
        idle_in_transaction_timeout: float | None = None,
        statement_deadline: float | None = None,
    ) -> Database:
        """Open a pool on ``dsn`` (its connections with KEEPALIVES). ``idle_in_transaction_timeout``
        (seconds): the server
        ends a connection of the pool whose transaction waits that long for its next
        statement (PostgreSQL's idle_in_transaction_session_timeout), releasing its locks: a
        worker frozen mid-transaction (SIGSTOP, a paused VM) must not keep the rescue from its
        executions, nor hold the retry budget's lock from every other worker.
        ``statement_deadline`` (seconds; None: none): a statement, or a transaction up to its
        COMMIT, without a reply for that long (or 5 s past the server's own
        statement_timeout, if that is longer) has its connection shut down and raises
        ConnectionSilent; the pool's other connections are then replaced too (they most
        likely went silent with it). Raises ConnectionFailed if the server is unreachable
        within 10 seconds."""
        pool = ConnectionPool(
            dsn,
            min_size=min_size,
            max_size=max_size,
            open=False,
            kwargs={
                "row_factory": dict_row,
                "application_name": application_name,
                "autocommit": True,
                **tcp_settings(dsn),
            },
            configure=functools.partial(
                _configure, idle_in_transaction_timeout=idle_in_transaction_timeout
            ),
            timeout=30,
            name="pgsched",
        )
        try:
            pool.open(wait=True, timeout=10)
        except Exception as exc:  # psycopg_pool raises PoolTimeout: unreachable server
            pool.close()
            raise ConnectionFailed(f"database unreachable at {_redact(dsn)}: {exc}") from exc
        db = cls(pool, dsn)
        if statement_deadline is not None:
            db.deadline = Deadline(
                above_server_timeout(statement_deadline, db.server_statement_timeout()),
                name=f"{application_name} pool",
            )
        return db

    def close(self) -> None:
        self.pool.close()

    def server_statement_timeout(self) -> float:
        """The server's statement_timeout for this database's sessions (seconds; 0: none),
        read once (``session_statement_timeout``). Raises what ``one`` raises."""
        if self._server_timeout is None:
            row = self.one("session_statement_timeout")
            assert row is not None  # SELECT returns one row
            self._server_timeout = row["seconds"]
        return self._server_timeout

    def _run(self, query_name: str, expect: str, params: Mapping[str, Any]) -> Any:
        # One statement alone is its own transaction (autocommit): one round trip, where a
        # BEGIN and a COMMIT around it made three (a third of a busy writer's waits)
        if self.tenant is not None:
            with self.transaction() as tx:
                return tx._run(query_name, expect, params)
        try:
            with translated(), self.pool.connection() as conn:
                return Session(conn, self.deadline)._run(query_name, expect, params)  # type: ignore[arg-type]
        except ConnectionSilent:
            self.pool.drain()  # the pool's other connections most likely went silent with this one
            raise

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Session]:
        """A connection from the pool inside one transaction: committed on success,
        rolled back on any exception; the deadline, if any, watches the whole transaction."""
        try:
            with translated(), self.pool.connection() as conn:
                with Session(conn, self.deadline).transaction() as tx:  # type: ignore[arg-type]  # dict_row
                    tx.pending_tenant = self.tenant
                    tx.pending_reveal = "on" if self.reveal else "off"
                    yield tx
        except ConnectionSilent:
            self.pool.drain()
            raise

    #: the tenant every transaction of this pool acts for (pgsched.tenant), or None
    tenant: str | None = None
    #: whether those transactions read sensitive values (pgsched.reveal, migration 0031)
    reveal: bool = False

    def acting_for(self, tenant: str, *, reveal: bool = False) -> Database:
        """This pool, with every statement run in a transaction that first sets
        ``pgsched.tenant`` to ``tenant`` (``"*"``: every tenant) for that transaction only:
        what row-level security shows a web login (migration 0018, docs/security.md).
        Nothing stays set on the pooled connection after it. Costs a BEGIN, the setting
        and a COMMIT around each statement; no effect for a login that row-level security
        does not restrict (a superuser, the owner) or that is mapped to a tenant.

        ``reveal`` sets ``pgsched.reveal`` beside it: ``"on"`` lets a web login read env and
        sensitive params values, ``"off"`` (the default) shows them masked to any login
        (migration 0031, docs/security.md "Sensitive values and who sees them")."""
        scoped = Database(self.pool, self.dsn, self.deadline)
        scoped._server_timeout = self._server_timeout
        scoped.tenant = tenant
        scoped.reveal = reveal
        return scoped


def _redact(dsn: str) -> str:
    """``dsn`` with any password replaced by ``***``, safe to print."""
    try:
        info = psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "<unparsable DSN>"
    if info.get("password"):
        info["password"] = "***"
    return psycopg.conninfo.make_conninfo("", **{k: v for k, v in info.items() if v is not None})

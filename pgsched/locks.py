"""Distributed locks for task code: "only one of these at a time across the fleet".

A thin face over the SQL functions of migration 0023 (``pgsched.lock_try_v1``,
``lock_wait_v1``, ``lock_release_v1``, ``lock_list_v1``; docs/sql-api.md): PostgreSQL
advisory locks under names of the caller's tenant, so tenant A's ``"x"`` and tenant B's
``"x"`` are two locks and neither tenant can take, wait on or release the other's. The
tenant is the login's (a tenant's login acts for its own tenant only); ``tenant=`` is for
an installation-wide login acting for one.

Two scopes, PostgreSQL's (manual, "Advisory Locks"):

- ``session``: held by the connection until released (as often as it was taken: a
  session that takes a lock twice holds it twice) or until the connection ends, however
  it ends; use a dedicated connection, not one of a pool in transaction mode (PgBouncer).
- ``transaction``: held until the current transaction commits or rolls back; not
  released early.

``conn`` is any psycopg 3 connection to the pgsched database. Inside a Python task,
:func:`for_execution` gives locks that the worker releases when the execution ends,
however it ends (:mod:`pgsched.worker.execution_locks`)::

    with pgsched.locks.lock(conn, "nightly-report", timeout=10):
        ...  # no other session of this tenant holds "nightly-report" meanwhile
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.rows import dict_row

from . import queries
from .db import translated
from .errors import LockTimeout, ValidationError

if TYPE_CHECKING:
    from .worker.execution_locks import ExecutionLocks

SCOPES = ("session", "transaction")


def _check(scope: str, timeout: float | None) -> None:
    if scope not in SCOPES:
        raise ValidationError("scope", scope, "is not a lock scope; use session or transaction")
    if timeout is not None and (
        isinstance(timeout, bool) or not math.isfinite(timeout) or timeout < 0
    ):
        raise ValidationError(
            "timeout", timeout, "is not a number of seconds >= 0 (None: no limit)"
        )


class _On:
    """Named queries (sql/lock.sql) on the caller's connection, whatever its row factory:
    rows come back as dicts."""

    def __init__(self, conn: psycopg.Connection[Any]):
        self.conn = conn

    def _cursor(self, query_name: str, expect: str, params: dict[str, Any]) -> Any:
        query = queries.get(query_name)
        assert query.cardinality == expect, (query_name, query.cardinality)
        cur = self.conn.cursor(row_factory=dict_row)
        return cur.execute(query.text, params)

    def one(self, query_name: str, /, **params: Any) -> dict[str, Any]:
        with translated(), self._cursor(query_name, "one", params) as cur:
            row = cur.fetchone()
        assert row is not None  # a SELECT of a function returns one row
        return row

    def many(self, query_name: str, /, **params: Any) -> list[dict[str, Any]]:
        with translated(), self._cursor(query_name, "many", params) as cur:
            return cur.fetchall()


def try_lock(
    conn: psycopg.Connection[Any], name: str, *, scope: str = "session", tenant: str | None = None
) -> bool:
    """Take lock ``name`` if no other session holds it; whether it was got. Raises
    ValidationError for a bad scope, DatabaseError (from the database) for a name that is
    empty or longer than 256 characters, PermissionDenied for another tenant's."""
    _check(scope, None)
    return bool(_On(conn).one("lock_try", name=name, scope=scope, tenant=tenant)["got"])


def wait_lock(
    conn: psycopg.Connection[Any],
    name: str,
    timeout: float | None,
    *,
    scope: str = "session",
    tenant: str | None = None,
) -> bool:
    """Take lock ``name``, waiting up to ``timeout`` seconds (None: as long as it takes; 0:
    only try); whether it was got. The wait is PostgreSQL's own queue of waiters
    (lock_timeout bounds it), so a freed lock goes to a waiter at once."""
    _check(scope, timeout)
    return bool(
        _On(conn).one("lock_wait", name=name, timeout=timeout, scope=scope, tenant=tenant)["got"]
    )


def acquire(
    conn: psycopg.Connection[Any],
    name: str,
    timeout: float | None = None,
    *,
    scope: str = "session",
    tenant: str | None = None,
) -> None:
    """:func:`wait_lock`, raising :class:`~pgsched.errors.LockTimeout` (naming the lock
    and the wait) when it was not got."""
    if not wait_lock(conn, name, timeout, scope=scope, tenant=tenant):
        raise LockTimeout(name, timeout or 0.0)


def release(conn: psycopg.Connection[Any], name: str, *, tenant: str | None = None) -> bool:
    """Release one hold of this session on lock ``name`` (session scope); False when the
    session held none (a transaction's lock is not released early: False)."""
    return bool(_On(conn).one("lock_release", name=name, tenant=tenant)["released"])


@contextlib.contextmanager
def lock(
    conn: psycopg.Connection[Any],
    name: str,
    timeout: float | None = None,
    *,
    tenant: str | None = None,
) -> Iterator[None]:
    """Hold session lock ``name`` for the block: waits up to ``timeout`` seconds (None: no
    limit) or raises LockTimeout; released when the block ends. A connection that broke
    meanwhile released it with its session: the block's own error, if any, is raised."""
    acquire(conn, name, timeout, tenant=tenant)
    try:
        yield
    finally:
        if not conn.closed and not conn.broken:
            release(conn, name, tenant=tenant)


@contextlib.contextmanager
def transaction_lock(
    conn: psycopg.Connection[Any],
    name: str,
    timeout: float | None = None,
    *,
    tenant: str | None = None,
) -> Iterator[None]:
    """A transaction (``conn.transaction()``) that holds lock ``name`` from its start to its
    commit or rollback: waits up to ``timeout`` seconds or raises LockTimeout."""
    with conn.transaction():
        acquire(conn, name, timeout, scope="transaction", tenant=tenant)
        yield


def held(conn: psycopg.Connection[Any], *, tenant: str | None = None) -> list[dict[str, Any]]:
    """The locks of the caller's tenant (``tenant="*"``: every tenant's, for an
    installation-wide login), held and waited for by any session: dicts of ``tenant``,
    ``name``, ``key`` (the advisory lock's bigint key), ``granted`` (False: waiting),
    ``pid``, ``waiting_since`` (UTC instant, or None), ``application_name``,
    ``execution_id`` (the running execution whose worker session holds it, if any)."""
    return _On(conn).many("lock_list", tenant=tenant)


def for_execution() -> ExecutionLocks:
    """Inside a Python task: the locks of the running execution, released by the worker
    when the execution ends, however it ends (success, failure, timeout, cancel, a worker
    killed). Raises PgschedError outside of one. See
    :class:`pgsched.worker.execution_locks.ExecutionLocks`."""
    from .worker.execution_locks import current

    return current()

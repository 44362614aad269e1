"""Waiting for an execution's end from an application: :meth:`pgsched.App.wait` and
:meth:`pgsched.App.wait_async` (docs/observability.md, "Progress and waiting for a
result"). One dedicated connection LISTENs on ``pgsched_execution_done`` (migration 0038:
one notification per statement that finishes executions, naming their ids) and reads the
execution through ``pgsched.execution_v3``, which shows a login only its own tenant's; a
read every :data:`FALLBACK_POLL` seconds covers a notification lost with a connection.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
from psycopg.rows import dict_row

from . import db, queries
from .errors import PgschedError, ValidationError

#: seconds between reads while no notification names the execution (a lost one)
FALLBACK_POLL = 5.0


class ExecutionFailed(PgschedError):
    """The execution waited for ended other than ``succeeded``: ``state`` (failed,
    timed_out, cancelled, ...) and ``error``, the error text stored with it."""

    def __init__(self, execution_id: int, state: str, error: str | None):
        self.execution_id, self.state, self.error = execution_id, state, error
        super().__init__(f"execution {execution_id} ended {state}: {error or 'no error text'}")


def resolve_dsn(dsn: str | None) -> str:
    """``dsn``, else ``PGSCHED_DSN``, else the embedded default (as App.connect)."""
    import os

    found = dsn or os.environ.get("PGSCHED_DSN")
    if not found:
        from . import embedded

        found = embedded.start()
    return found


def _checked(execution_id: Any, timeout: Any) -> None:
    if isinstance(execution_id, bool) or not isinstance(execution_id, int) or execution_id < 1:
        raise ValidationError("execution_id", execution_id, "must be a positive integer")
    if timeout is not None and (
        isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0
    ):
        raise ValidationError("timeout", timeout, "must be a number of seconds >= 0, or None")


def _answer(row: dict[str, Any]) -> Any:
    """The result of a finished execution, or its ExecutionFailed."""
    if row["state"] == "succeeded":
        return row["result"]
    raise ExecutionFailed(row["id"], row["state"], row["error"])


def _names(payload: str, execution_id: int) -> bool:
    return payload == "*" or str(execution_id) in payload.split(",")


def _timed_out(execution_id: int, timeout: float | None, row: dict[str, Any]) -> TimeoutError:
    return TimeoutError(
        f"execution {execution_id} did not end within {timeout:g}s (it is {row['state']})"
    )


def wait(dsn: str, execution_id: int, timeout: float | None, tenant: str | None) -> Any:
    """The result of execution ``execution_id`` once it ends (see App.wait)."""
    _checked(execution_id, timeout)
    deadline = None if timeout is None else time.monotonic() + timeout
    conn = db.connect(dsn, application_name="pgsched wait")
    try:
        session = db.Session(conn)
        session.exec("execution_done_listen")  # before the first read: no end goes unheard
        while True:
            row = session.one("execution_wait_read", id=execution_id, tenant=tenant)
            assert row is not None  # (execution_v3 raises no_data_found: NotFound)
            if row["finished_at"] is not None:
                return _answer(row)
            left = FALLBACK_POLL if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise _timed_out(execution_id, timeout, row)
            with db.translated():
                for note in conn.notifies(timeout=min(left, FALLBACK_POLL)):
                    if _names(note.payload, execution_id):
                        break
    finally:
        conn.close()


async def wait_async(dsn: str, execution_id: int, timeout: float | None, tenant: str | None) -> Any:
    """:func:`wait` on psycopg's AsyncConnection: the event loop is never blocked."""
    _checked(execution_id, timeout)
    loop_time = time.monotonic
    deadline = None if timeout is None else loop_time() + timeout
    listen, read = queries.get("execution_done_listen"), queries.get("execution_wait_read")
    with db.translated():
        conn = await psycopg.AsyncConnection.connect(
            dsn,
            autocommit=True,
            row_factory=dict_row,
            application_name="pgsched wait",
            connect_timeout=db.CONNECT_TIMEOUT,
            **db.tcp_settings(dsn),
        )
    try:
        with db.translated():
            await conn.execute(db.SESSION_SETTINGS)
            await conn.execute(listen.text)
            while True:
                cur = await conn.execute(read.text, {"id": execution_id, "tenant": tenant})
                row = await cur.fetchone()
                assert row is not None
                if row["finished_at"] is not None:
                    return _answer(row)
                left = FALLBACK_POLL if deadline is None else deadline - loop_time()
                if left <= 0:
                    raise _timed_out(execution_id, timeout, row)
                async for note in conn.notifies(timeout=min(left, FALLBACK_POLL)):
                    if _names(note.payload, execution_id):
                        break
    finally:
        await conn.close()

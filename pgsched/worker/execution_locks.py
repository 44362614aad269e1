"""The locks of one execution of a Python task: held on a database session of their own,
opened at the first lock and ended when the execution ends, however it ends.

A Python task runs in the worker's slot thread (:mod:`pgsched.handlers.watchdog`); the
executor binds an :class:`ExecutionLocks` to that thread for the call
(:func:`bound`), and the task reaches it with :func:`pgsched.locks.for_execution`. The
executor closes it the moment the handler is done, before the outcome is recorded: on
success, failure, timeout and cancel alike, and also for a call abandoned after its stop
(its stuck lock wait is cancelled first). A worker that dies (SIGKILL, a lost host) loses
the session with it, and PostgreSQL releases its advisory locks at once (manual,
"Advisory Locks"). The session's application_name is ``pgsched execution <id>``, which
``pgsched lock list`` shows as the execution that holds the lock.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from typing import Any

import psycopg

from .. import db, locks
from ..errors import PgschedError

log = logging.getLogger(__name__)

# Seconds close() waits for a statement in flight to return after cancelling it, before
# it ends the session from another connection instead.
CLOSE_WAIT = 5.0

_bound = threading.local()


class ExecutionLocks:
    """The locks of execution ``execution_id`` of ``tenant``, on ``dsn`` (the worker's
    login). Every method may be called from the task's thread; :meth:`close` from any."""

    def __init__(self, dsn: str, execution_id: int, tenant: str | None):
        self.dsn, self.execution_id, self.tenant = dsn, execution_id, tenant
        self._mutex = threading.Lock()  # one statement at a time on the session
        self._conn: psycopg.Connection[Any] | None = None
        self._closed = False

    def _session(self) -> psycopg.Connection[Any]:
        if self._closed:
            raise PgschedError(
                f"execution {self.execution_id} has ended: its locks were released and it "
                "may take no more"
            )
        if self._conn is None:
            self._conn = db.connect(
                self.dsn, application_name=f"pgsched execution {self.execution_id}"
            )
        return self._conn

    def acquire(self, name: str, timeout: float | None = None) -> None:
        """Take lock ``name`` (session scope), waiting up to ``timeout`` seconds (None: no
        limit); held until :meth:`release` or the end of the execution. Raises LockTimeout."""
        with self._mutex:
            locks.acquire(self._session(), name, timeout, tenant=self.tenant)

    def try_acquire(self, name: str) -> bool:
        """Take lock ``name`` if it is free; whether it was got (held as by acquire)."""
        with self._mutex:
            return locks.try_lock(self._session(), name, tenant=self.tenant)

    def release(self, name: str) -> bool:
        """Release one hold of lock ``name`` before the execution ends; False when none."""
        with self._mutex:
            if self._conn is None or self._closed:
                return False
            return locks.release(self._conn, name, tenant=self.tenant)

    @contextlib.contextmanager
    def lock(self, name: str, timeout: float | None = None) -> Iterator[None]:
        """Hold lock ``name`` for the block (waits up to ``timeout`` s or raises
        LockTimeout); released when the block ends, or with the execution."""
        self.acquire(name, timeout)
        try:
            yield
        finally:
            try:
                self.release(name)
            except PgschedError:  # a broken session: its locks went with it
                self.close()

    def held(self) -> list[dict[str, Any]]:
        """The tenant's locks as :func:`pgsched.locks.held` lists them."""
        with self._mutex:
            return locks.held(self._session(), tenant=self.tenant)

    def close(self) -> None:
        """End the session: every lock of the execution is released. Idempotent. A statement
        in flight (a lock wait of a task that timed out) is cancelled first."""
        self._closed = True
        conn = self._conn
        if conn is None:
            return
        if not self._mutex.acquire(blocking=False):
            with contextlib.suppress(Exception):
                conn.cancel()
            if not self._mutex.acquire(timeout=CLOSE_WAIT):
                self._terminate(conn.info.backend_pid)
                return  # the stuck thread finds its connection broken
        try:
            conn.close()
        finally:
            self._mutex.release()

    def _terminate(self, pid: int) -> None:
        log.warning(
            "execution %s: its lock session (pid %s) is still busy %gs after a cancel; ending it",
            self.execution_id,
            pid,
            CLOSE_WAIT,
        )
        try:
            with db.connect(self.dsn, application_name="pgsched execution locks") as other:
                db.Session(other).one("lock_session_end", pid=pid)
        except PgschedError as exc:
            log.error("execution %s: could not end its lock session: %s", self.execution_id, exc)


def current() -> ExecutionLocks:
    """The locks of the execution this thread runs (:func:`bound`); raises PgschedError
    outside of a Python task run by a worker."""
    found: ExecutionLocks | None = getattr(_bound, "locks", None)
    if found is None:
        raise PgschedError(
            "pgsched.locks.for_execution(): not inside a Python task run by a pgsched worker "
            "(outside one, use pgsched.locks.lock(conn, name) on a connection of your own)"
        )
    return found


@contextlib.contextmanager
def bound(execution_locks: ExecutionLocks) -> Iterator[None]:
    """Bind ``execution_locks`` to this thread for the block (the call of the task)."""
    before = getattr(_bound, "locks", None)
    _bound.locks = execution_locks
    try:
        yield
    finally:
        _bound.locks = before

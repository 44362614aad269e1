"""A Python task's locks (pgsched/worker/execution_locks.py), on a tenant's real engine
login: one session per execution, opened at the first lock, and closing it releases every
lock of the execution, even while the task's thread waits for one."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.rows import dict_row

from pgsched import locks
from pgsched.errors import PgschedError
from pgsched.worker.execution_locks import ExecutionLocks, bound

from ..helpers import wait_for
from ..tenancy import Tenant, two_tenants


@pytest.fixture
def a(dsn: str) -> Iterator[Tenant]:
    with two_tenants(dsn) as (a, _b, _):
        yield a


def _connect(dsn: str) -> psycopg.Connection:
    return psycopg.connect(dsn, autocommit=True, row_factory=dict_row)


def test_no_session_until_the_first_lock_and_closing_releases_them_all(a, sql):
    mine = ExecutionLocks(a.engine, 41, a.name)
    named = "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = %s"
    assert sql.execute(named, ["pgsched execution 41"]).fetchone()["n"] == 0
    with _connect(a.app) as other:
        mine.acquire("one")
        assert mine.try_acquire("two")
        assert sql.execute(named, ["pgsched execution 41"]).fetchone()["n"] == 1
        assert not locks.try_lock(other, "one") and not locks.try_lock(other, "two")
        with mine.lock("three", timeout=1):
            assert not locks.try_lock(other, "three")
        assert locks.try_lock(other, "three") and locks.release(other, "three")
        mine.close()
        mine.close()  # twice: nothing more
        assert wait_for(lambda: locks.try_lock(other, "one") and locks.try_lock(other, "two"))
    with pytest.raises(PgschedError, match="execution 41 has ended"):
        mine.acquire("one")


def test_closing_ends_a_wait_in_flight(a, sql):
    mine = ExecutionLocks(a.engine, 42, a.name)
    errors: list[BaseException] = []
    with _connect(a.app) as holder:
        assert locks.try_lock(holder, "x")

        def wait() -> None:
            try:
                mine.acquire("x")  # no limit
            except PgschedError as exc:
                errors.append(exc)

        t = threading.Thread(target=wait)
        t.start()
        wait_for(
            lambda: sql.execute(
                "SELECT 1 FROM pg_stat_activity WHERE application_name = 'pgsched execution 42' "
                "AND wait_event_type = 'Lock'"
            ).fetchone(),
            what="the execution to wait for its lock",
        )
        began = time.monotonic()
        mine.close()
        t.join(10)
        assert not t.is_alive() and time.monotonic() - began < 3
        assert errors  # the task's wait ended with an error, not with the lock
        assert [r["granted"] for r in locks.held(holder)] == [True]  # no waiter left


def test_a_task_reaches_its_execution_locks_only_while_bound():
    with pytest.raises(PgschedError, match="not inside a Python task"):
        locks.for_execution()
    mine = ExecutionLocks("postgresql://unused", 43, "a")
    with bound(mine):
        assert locks.for_execution() is mine
    with pytest.raises(PgschedError):
        locks.for_execution()

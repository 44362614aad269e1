"""Distributed locks for task code (migration 0023, pgsched/locks.py): try, wait with a
timeout, release, session and transaction scope, keys from names; each tenant's locks its
own, tried as the tenants' real logins (tests/tenancy.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import errors as pg_errors
from psycopg.rows import dict_row

from pgsched import locks
from pgsched.errors import DatabaseError, LockTimeout, PermissionDenied, ValidationError

from ..helpers import wait_for, waiting_on_a_lock
from ..tenancy import Tenant, two_tenants


@pytest.fixture
def ab(dsn: str) -> Iterator[tuple[Tenant, Tenant]]:
    with two_tenants(dsn) as (a, b, _):
        yield a, b


def connect(dsn: str, name: str = "pgsched-test") -> psycopg.Connection:
    return psycopg.connect(dsn, autocommit=True, row_factory=dict_row, application_name=name)


def test_try_takes_a_free_lock_and_refuses_a_held_one_until_it_is_released(ab):
    a, _b = ab
    with connect(a.app) as one, connect(a.app) as two:
        assert locks.try_lock(one, "report") is True
        assert locks.try_lock(two, "report") is False
        assert locks.try_lock(two, "other report") is True  # another name, another lock
        assert locks.release(two, "report") is False  # not its hold
        assert locks.release(one, "report") is True
        assert locks.release(one, "report") is False  # released once, held no more
        assert locks.try_lock(two, "report") is True


def test_a_session_lock_ends_with_its_session(ab):
    a, _b = ab
    with connect(a.app) as waiter:
        holder = connect(a.app)
        assert locks.try_lock(holder, "x")
        assert not locks.try_lock(waiter, "x")
        holder.close()
        assert wait_for(lambda: locks.try_lock(waiter, "x"), timeout=5)


def test_wait_gives_up_after_its_timeout_and_raises_lock_timeout(ab):
    a, _b = ab
    with connect(a.app) as holder, connect(a.app) as waiter:
        assert locks.try_lock(holder, "x")
        began = time.monotonic()
        assert locks.wait_lock(waiter, "x", 0.3) is False
        took = time.monotonic() - began
        assert 0.3 <= took < 2.0
        with pytest.raises(LockTimeout, match=r"lock 'x': not got in 0.2 s"):
            with locks.lock(waiter, "x", timeout=0.2):
                pytest.fail("ran without the lock")
        # the caller's own lock_timeout is as it was
        assert waiter.execute("SHOW lock_timeout").fetchone()["lock_timeout"] == "0"


def test_a_waiter_gets_the_lock_the_moment_it_is_released(ab, sql):
    a, _b = ab
    got: list[float] = []
    with connect(a.app) as holder, connect(a.app, "lock-waiter") as waiter:
        assert locks.try_lock(holder, "x")

        def wait() -> None:
            got.append(float(locks.wait_lock(waiter, "x", 30)))
            got.append(time.monotonic())

        t = threading.Thread(target=wait)
        t.start()
        wait_for(lambda: waiting_on_a_lock(sql, "lock-waiter"), what="the waiter to wait")
        released = time.monotonic()
        assert locks.release(holder, "x")
        t.join(10)
        assert got[0] == 1.0 and got[1] - released < 1.0
        assert not locks.try_lock(holder, "x")  # the waiter holds it now


def test_the_wait_keeps_a_transactions_lock_timeout_and_a_null_timeout_waits(ab):
    a, _b = ab
    with connect(a.app) as c:
        with c.transaction():
            c.execute("SET LOCAL lock_timeout = '7s'")
            assert locks.wait_lock(c, "x", 0.5, scope="transaction")
            assert c.execute("SHOW lock_timeout").fetchone()["lock_timeout"] == "7s"
        assert locks.wait_lock(c, "y", None)  # free: no wait at all


def test_a_transaction_lock_lasts_until_commit_or_rollback_and_is_not_released_early(ab):
    a, _b = ab
    with connect(a.app) as one, connect(a.app) as two:
        with locks.transaction_lock(one, "batch", timeout=1):
            assert not locks.try_lock(two, "batch")
            assert locks.release(one, "batch") is False  # not early
            assert not locks.try_lock(two, "batch")
        assert locks.try_lock(two, "batch", scope="transaction")  # autocommit: at once freed
        with pytest.raises(RuntimeError):
            with one.transaction():
                assert locks.try_lock(one, "batch", scope="transaction")
                assert not locks.try_lock(two, "batch")
                raise RuntimeError("rolled back")
        assert locks.try_lock(two, "batch")


def test_the_tenants_locks_of_one_name_never_collide_and_neither_reaches_the_other(ab):
    a, b = ab
    with connect(a.app) as a_app, connect(b.app) as b_app, connect(b.engine) as b_engine:
        assert locks.try_lock(a_app, "x")
        assert locks.try_lock(b_app, "x")  # B's "x" is not A's
        assert not locks.try_lock(b_engine, "x")  # B's engine login is B: B's "x" is held
        assert locks.release(a_app, "x")
        assert locks.release(a_app, "x") is False
        # B's lock is still held: A's release reached A's key only
        assert not locks.try_lock(b_engine, "x")
        for call in (
            lambda: locks.try_lock(a_app, "x", tenant=b.name),
            lambda: locks.wait_lock(a_app, "x", 0.1, tenant=b.name),
            lambda: locks.release(a_app, "x", tenant=b.name),
            lambda: locks.held(a_app, tenant=b.name),
            lambda: locks.held(a_app, tenant="*"),
        ):
            with pytest.raises(PermissionDenied, match=r"acts for tenant .* only"):
                call()
        assert not locks.try_lock(b_engine, "x")


def test_keys_are_not_pgsched_own_nor_computable_without_the_seed(ab, sql):
    a, _b = ab
    with connect(a.app) as c:
        assert locks.try_lock(c, "limits")
        key = locks.held(c)[0]["key"]
        for text in (f"pgsched.lock {a.name} limits", f"pgsched.limits {a.name}"):
            plain = sql.execute("SELECT hashtextextended(%s, 0) AS k", [text]).fetchone()["k"]
            assert plain != key
        # the claim's tenant lock is free while the tenant holds its own locks
        assert sql.execute(
            "SELECT pg_try_advisory_xact_lock(hashtextextended('pgsched.limits ' || %s, 0)) AS ok",
            [a.name],
        ).fetchone()["ok"]
        for statement in (
            "SELECT seed FROM pgsched_internal.lock_seed",
            "SELECT * FROM pgsched_internal.lock_name",
        ):
            with pytest.raises(pg_errors.InsufficientPrivilege):
                c.execute(statement)
    with connect(a.engine) as c, pytest.raises(pg_errors.InsufficientPrivilege):
        c.execute("SELECT pgsched_internal.lock_key_v1(%s, 'limits')", [a.name])


def test_the_list_shows_the_tenants_own_locks_holders_and_waiters(ab, sql):
    a, b = ab
    with (
        connect(a.app, "a-holder") as holder,
        connect(a.app, "a-waiter") as waiter,
        connect(b.app) as b_app,
    ):
        assert locks.try_lock(holder, "nightly")
        assert locks.try_lock(b_app, "b's own")
        t = threading.Thread(target=locks.wait_lock, args=(waiter, "nightly", 30))
        t.start()
        try:
            wait_for(lambda: waiting_on_a_lock(sql, "a-waiter"), what="the waiter to wait")
            rows = locks.held(b_app)
            assert [(r["tenant"], r["name"], r["granted"]) for r in rows] == [
                (b.name, "b's own", True)
            ]
            rows = locks.held(holder)
            assert [(r["name"], r["granted"], r["pid"]) for r in rows] == [
                ("nightly", True, holder.info.backend_pid),
                ("nightly", False, waiter.info.backend_pid),
            ]
            assert rows[0]["waiting_since"] is None and rows[1]["waiting_since"] is not None
            assert rows[0]["application_name"] == "a-holder" and rows[0]["execution_id"] is None
            everyone = {(r["tenant"], r["name"]) for r in locks.held(sql, tenant="*")}
            assert everyone == {(a.name, "nightly"), (b.name, "b's own")}
        finally:
            locks.release(holder, "nightly")
            t.join(10)


def test_the_holder_named_for_a_running_execution_is_shown_with_it(ab, sql):
    a, _b = ab
    sql.execute("UPDATE pgsched.execution SET state = 'running' WHERE id = %s", [a.pending_id])
    with connect(a.engine, f"pgsched execution {a.pending_id}") as c:
        assert locks.try_lock(c, "x")
        assert [r["execution_id"] for r in locks.held(c)] == [a.pending_id]


def test_bad_input_names_the_field_and_the_value(ab, sql):
    a, _b = ab
    with pytest.raises(
        DatabaseError, match="tenant: a lock is one tenant's; name the tenant, not '\\*'"
    ):
        locks.try_lock(sql, "x", tenant="*")  # an installation's login: '*' lists, never locks
    with connect(a.app) as c:
        with pytest.raises(ValidationError, match="scope: 'forever' is not a lock scope"):
            locks.try_lock(c, "x", scope="forever")
        with pytest.raises(ValidationError, match="timeout: -1 is not a number of seconds"):
            locks.wait_lock(c, "x", -1)
        with pytest.raises(pg_errors.InvalidParameterValue, match="scope: 'forever'"):
            c.execute("SELECT pgsched.lock_try_v1('x', 'forever')")
        with pytest.raises(pg_errors.InvalidParameterValue, match="timeout_seconds: NaN"):
            c.execute("SELECT pgsched.lock_wait_v1('x', 'NaN')")
        with pytest.raises(pg_errors.InvalidParameterValue, match="name: a lock needs a name"):
            c.execute("SELECT pgsched.lock_try_v1('')")
        with pytest.raises(pg_errors.InvalidParameterValue, match=r"\(300 characters\)"):
            c.execute("SELECT pgsched.lock_try_v1(repeat('n', 300))")


def test_old_names_are_pruned_when_a_new_one_is_recorded_but_not_a_held_ones(ab, sql):
    a, _b = ab
    with connect(a.app) as c:
        assert locks.try_lock(c, "held for long")
        assert locks.try_lock(c, "done long ago") and locks.release(c, "done long ago")
        sql.execute("UPDATE pgsched_internal.lock_name SET taken_at = now() - interval '8 days'")
        assert locks.try_lock(c, "new")
        names = sql.execute("SELECT name FROM pgsched_internal.lock_name ORDER BY name").fetchall()
        assert [r["name"] for r in names] == ["held for long", "new"]

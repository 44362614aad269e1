"""Attacks on the tenants' locks of issue 18 (migration 0023) by tenant B's own logins.
Each test asserts the safe behaviour: it fails while the attack works."""

from __future__ import annotations

import pytest
from psycopg import errors as pg_errors

from ..tenancy import login as _as


def test_attack18_a_lock_take_that_fails_leaves_no_lock_held(ab):
    """lock_try_v1 takes the session lock first and records its name after: when the
    record fails (a read-only transaction, as docs/limits.md says it must; a statement
    timeout, any error there), the call raises, yet the session keeps the lock, as a
    session-level advisory lock survives a rollback. The caller, told it failed, never
    releases it; lock_list_v1 does not show it (its name was not recorded); every other
    session of the tenant now finds the lock taken until this connection ends (a pooled
    one: never)."""
    _, b, _ = ab
    with _as(b.app) as c, _as(b.app) as other:
        with pytest.raises(pg_errors.ReadOnlySqlTransaction):
            with c.transaction():
                c.execute("SET TRANSACTION READ ONLY")
                c.execute("SELECT pgsched.lock_try_v1('nightly')")
        held = c.execute(
            "SELECT count(*) AS n FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()"
        ).fetchone()["n"]
        listed = c.execute("SELECT count(*) AS n FROM pgsched.lock_list_v1()").fetchone()["n"]
        got = other.execute("SELECT pgsched.lock_try_v1('nightly') AS got").fetchone()["got"]
    assert held == 0 and got, (
        f"after a failed take the session holds {held} advisory lock(s), listed {listed} "
        f"times; another session of the tenant got 'nightly': {got}"
    )

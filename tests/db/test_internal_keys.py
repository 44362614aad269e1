"""pgsched's own advisory keys come from the secret seed (migration 0027,
``internal_key_v1``): a tenant's login can neither compute them nor read the seed, holding
the old constant keys stalls nothing, and the scheduler's tick never waits for a window
lock that an enqueue in an open transaction holds."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import psycopg
import pytest
from psycopg import errors as pg_errors
from psycopg.rows import dict_row

from pgsched import scheduler
from pgsched.db import Database, Session, connect

from ..factories import make_task
from ..tenancy import login as _as

# The keys pgsched took before 0027, computable by any login.
OLD_KEYS = {
    "leader": 0x7067736368656402,
    "term and retry budget": 0x7067736368656403,
    "roll-up": 0x7067736368656404,
    "alert": 0x7067736368656405,
}
PURPOSES = ["leader", "term", "usage", "alert", "rollup", "retry budget"]


def test_a_tenants_logins_can_neither_compute_an_internal_key_nor_read_the_seed(ab):
    _, b, _ = ab
    for login in (b.engine, b.app):
        with _as(login) as c:
            for statement in (
                "SELECT pgsched_internal.internal_key_v1('leader')",
                "SELECT pgsched_internal.internal_key_v1('window', 'x task 1')",
                "SELECT seed FROM pgsched_internal.lock_seed",
            ):
                with pytest.raises(pg_errors.InsufficientPrivilege):
                    c.execute(statement)
    with _as(b.engine) as c:  # who holds the leader lock is everyone's to know, not its key
        assert (
            c.execute("SELECT count(*) AS n FROM pgsched_internal.leader_sessions_v1()").fetchone()[
                "n"
            ]
            == 0
        )


def test_each_purpose_has_a_key_of_its_own_and_none_is_an_old_constant(db):
    keys = [scheduler.internal_key(db, p) for p in PURPOSES]
    assert len(set(keys)) == len(PURPOSES)
    assert not set(keys) & set(OLD_KEYS.values())
    with pytest.raises(Exception, match="purpose"):
        scheduler.internal_key(db, "leaders")


def test_a_tenants_engine_locks_its_own_dag_apply_and_not_anothers(ab):
    a, b, _ = ab
    with _as(b.engine) as c:
        with c.transaction():
            c.execute("SELECT pgsched_internal.dag_lock_v1(%s, 'etl')", [b.name])
        with pytest.raises(pg_errors.InsufficientPrivilege):
            c.execute("SELECT pgsched_internal.dag_lock_v1(%s, 'etl')", [a.name])


def test_a_tenants_retry_budget_lock_delays_no_other_tenants_retries(sql, ab):
    """The retry budget's lock is per tenant of the caller: B's worker inside a long
    transaction that computed a retry slot holds B's; A's worker computes its own at once."""
    a, b, _ = ab
    with _as(b.engine) as hb, _as(a.engine) as ca:
        ca.execute("SET statement_timeout = '3s'")
        with hb.transaction():
            hb.execute("SELECT pgsched_internal.retry_slot_v1(now())")
            started = time.monotonic()
            assert ca.execute("SELECT pgsched_internal.retry_slot_v1(now()) AS s").fetchone()["s"]
            assert time.monotonic() - started < 1.0
    assert sql.execute("SELECT pgsched_internal.retry_slot_v1(now()) AS s").fetchone()["s"]


def test_holding_the_old_keys_from_a_tenant_login_blocks_no_election_nor_tick(dsn, sql, ab):
    """B's engine login holds every key pgsched used before 0027 (the leader's, the term
    fence's, the roll-up's, the alert job's): a scheduler still takes the leader lock, is
    elected, and ticks under its term."""
    _, b, _ = ab
    with _as(b.engine) as hostile:
        for key in OLD_KEYS.values():
            hostile.execute("SELECT pg_advisory_lock(%s)", [key])
        conn = connect(dsn, application_name="test election")
        db = Database.connect(dsn, max_size=2)
        try:
            lock = Session(conn)
            assert scheduler.leadership.try_lock(lock)
            stop, elected = threading.Event(), []
            thread = threading.Thread(
                target=lambda: elected.append(scheduler.elect(lock, "test", stop)), daemon=True
            )
            thread.start()
            thread.join(15)
            stop.set()
            assert elected and elected[0] is not None, "no election within 15 s"
            now = sql.execute("SELECT date_trunc('minute', now()) AS t").fetchone()["t"]
            task = make_task(
                db, "every-minute", schedule_kind="cron", schedule="* * * * *", now=now
            )
            assert scheduler.tick(db, elected[0], now + timedelta(minutes=1)) == 1
            assert (
                sql.execute(
                    "SELECT count(*) AS n FROM pgsched.execution WHERE task_id = %s", [task["id"]]
                ).fetchone()["n"]
                == 1
            )
            assert db.one("scheduler_leader")["lock_held"] is True
        finally:
            db.close()
            conn.close()


@pytest.mark.parametrize("end", ["commit", "rollback"])
def test_a_tick_leaves_a_task_whose_window_lock_an_open_enqueue_holds_for_a_later_tick(
    dsn, sql, end
):
    """An application enqueues task `import` for account 1 inside its own transaction and
    keeps it open: that transaction holds the window lock of the key `account:1`, which the
    scheduled task `sync` shares (`unique pending` by key: one pending run per account). A
    tick meanwhile does not wait for it: the other task fires, `sync` is left due (its next
    fire time where it was, its id in busy). Once the transaction ends, the next tick deals
    with the held fire, once: made (the enqueue rolled back) or recorded skipped (its pending
    run holds the window); a third tick adds nothing."""
    db = Database.connect(dsn, max_size=4)
    try:
        now = sql.execute("SELECT date_trunc('minute', now()) AS t").fetchone()["t"]
        make_task(db, "import")
        held = make_task(db, "sync", schedule_kind="cron", schedule="* * * * *", now=now)
        sql.execute(
            "UPDATE pgsched.task SET concurrency_key = 'account:{account}', unique_policy = "
            "'pending', unique_scope = 'key', params = '{\"account\": 1}' "
            "WHERE name IN ('import', 'sync')"
        )
        other = make_task(db, "other", schedule_kind="cron", schedule="* * * * *", now=now)
        fire_at = now + timedelta(minutes=1)
        app = psycopg.connect(dsn, row_factory=dict_row)  # a transaction, not autocommit
        try:
            app.execute("SELECT pgsched.enqueue_v1('import', '{\"account\": 1}')")
            busy: list[int] = []
            ticked: list[int] = []
            started = time.monotonic()
            thread = threading.Thread(
                target=lambda: ticked.append(scheduler.tick(db, None, fire_at, busy=busy)),
                daemon=True,
            )
            thread.start()
            thread.join(10)
            took = time.monotonic() - started
            assert not thread.is_alive(), "the tick waited for the enqueue's window lock"
            assert took < 5 and busy == [held["id"]] and ticked == [1]
            assert fires(sql, other["id"], fire_at) == 1
            assert fires(sql, held["id"], fire_at) == 0
            row = sql.execute(
                "SELECT next_fire_at, last_fire_at FROM pgsched.task WHERE id = %s", [held["id"]]
            ).fetchone()
            assert row["next_fire_at"] == fire_at and (row["last_fire_at"] or now) < fire_at
        finally:
            getattr(app, end)()
            app.close()
        busy = []
        scheduler.tick(db, None, fire_at, busy=busy)
        assert busy == []
        assert fires(sql, held["id"], fire_at) == 1
        made = sql.execute(
            "SELECT count(*) AS n FROM pgsched.execution WHERE task_id = %s AND trigger = 'schedule'",
            [held["id"]],
        ).fetchone()["n"]
        assert made == (1 if end == "rollback" else 0)  # else recorded skipped: one pending
        scheduler.tick(db, None, fire_at)
        assert fires(sql, held["id"], fire_at) == 1 and fires(sql, other["id"], fire_at) == 1
        assert sql.execute(
            "SELECT next_fire_at FROM pgsched.task WHERE id = %s", [held["id"]]
        ).fetchone()["next_fire_at"] == fire_at + timedelta(minutes=1)
    finally:
        db.close()


def fires(sql, task_id: int, at) -> int:
    """The fires of ``task_id`` for ``at``, made (live or history) or recorded skipped."""
    return sql.execute(
        "SELECT (SELECT count(*) FROM pgsched.execution WHERE task_id = %(t)s AND scheduled_at = %(at)s "
        "AND trigger = 'schedule') + (SELECT count(*) FROM pgsched.execution_history WHERE "
        "task_id = %(t)s AND scheduled_at = %(at)s AND trigger = 'schedule') AS n",
        {"t": task_id, "at": at},
    ).fetchone()["n"]

"""Work due later, on a real database: execution_next_due answers the seconds until the
earliest pending run_at of a worker's queues by the database's clock, and every way an
UPDATE makes an execution pending again (a rescue, a hand-back) wakes the workers, as an
INSERT does through its trigger."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from pgsched import scheduler
from pgsched.stores import tasks
from pgsched.worker.claims import give_back

from ..factories import T0, make_task
from ..helpers import notifications_until_marker
from .test_claim import claim, register

# One connection in a transaction rolled back after each test (tests/conftest.py: tx);
# the tests that ask for dsn, or are marked clone, get a database of their own.
pytestmark = pytest.mark.rolled_back


@pytest.fixture
def listener(dsn):
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("LISTEN pgsched_execution")
        yield conn


def next_due(db, *queues: str) -> float | None:
    return db.one("execution_next_due", queues=list(queues), tenants=None)["seconds"]


def db_now(sql):
    return sql.execute("SELECT now() AS t").fetchone()["t"]


def test_the_next_due_time_is_the_earliest_pending_run_at_of_the_queues_served(db, sql):
    make_task(db, "job", now=T0)
    make_task(db, "other", queue="other", now=T0)
    assert next_due(db, "default") is None  # nothing pending
    now = db_now(sql)
    tasks.trigger(db, "job", run_at=now + timedelta(seconds=300), priority=1)
    tasks.trigger(db, "job", run_at=now + timedelta(seconds=30), priority=9)  # later in claim order
    tasks.trigger(db, "other", run_at=now + timedelta(seconds=5))  # a queue not served
    seconds = next_due(db, "default")
    assert 29 < seconds <= 30
    assert 4 < next_due(db, "default", "other") <= 5
    assert 4 < next_due(db, "other", "other") <= 5


def test_a_ready_execution_is_due_now_and_a_claimed_one_not_at_all(db, sql):
    make_task(db, "job", now=T0)
    worker = register(db)
    tasks.trigger(db, "job", run_at=db_now(sql) - timedelta(seconds=2))
    assert -2.5 < next_due(db, "default") <= -2  # ready, not claimed (by anyone yet)
    [row] = claim(db, worker)
    assert row and next_due(db, "default") is None  # running: not pending


def test_the_rescue_wakes_the_workers_when_it_puts_executions_back(db, sql, listener):
    """The leader's rescue makes a dead worker's executions pending by UPDATE, which the
    insert trigger does not see: its transaction notifies instead, so idle workers claim
    them at once, not at their next poll."""
    make_task(db, "job", now=T0)
    worker = register(db)
    tasks.trigger(db, "job")
    assert notifications_until_marker(listener, sql) == ["default"]  # the insert's own (its tenant)
    claim(db, worker)
    assert scheduler.rescue(db) == []  # the worker is alive: nothing back, no wake-up
    assert notifications_until_marker(listener, sql) == []
    sql.execute("UPDATE pgsched.worker SET last_heartbeat_at = now() - interval '1 hour'")
    assert [r["outcome"] for r in scheduler.rescue(db)] == ["requeued"]
    assert notifications_until_marker(listener, sql) == [""]


def test_a_hand_back_wakes_the_workers(db, sql, listener):
    """A stopping worker's buffer goes back to the queue by UPDATE (execution_unclaim): the
    same transaction notifies, and once only for many executions."""
    make_task(db, "job", now=T0)
    worker = register(db)
    tasks.enqueue_many(db, "job", [{"n": i} for i in range(3)])
    rows = claim(db, worker)
    assert notifications_until_marker(listener, sql) == ["default"]  # the insert's own (its tenant)
    assert sorted(r["id"] for r in give_back(db, rows)) == sorted(r["id"] for r in rows)
    assert notifications_until_marker(listener, sql) == [""]
    assert give_back(db, rows) == []  # no longer held: nothing back, no wake-up
    assert notifications_until_marker(listener, sql) == []
    states = sql.execute("SELECT state, attempt FROM pgsched.execution").fetchall()
    assert states == [{"state": "pending", "attempt": 0}] * 3


def test_the_next_due_time_still_to_come_is_told_beside_one_that_is_held(db, sql):
    make_task(db, "job", now=T0)
    now = db_now(sql)
    tasks.trigger(db, "job", run_at=now - timedelta(seconds=3))  # due: a transaction may hold it
    tasks.trigger(db, "job", run_at=now + timedelta(seconds=20))
    row = db.one("execution_next_due", queues=["default"], tenants=None)
    assert -3.5 < row["seconds"] <= -3 and 19 < row["future_seconds"] <= 20
    sql.execute("DELETE FROM pgsched.execution WHERE run_at < now()")
    row = db.one("execution_next_due", queues=["default"], tenants=None)
    assert 19 < row["seconds"] <= 20 and 19 < row["future_seconds"] <= 20


def test_work_due_later_in_another_front_than_the_held_row_is_told(db, sql):
    """The held row is due in (default, 1); what comes next is in (default, 5) and on
    another queue: both are told, not only what follows in the held row's own front."""
    make_task(db, "job", now=T0)
    make_task(db, "other", queue="other", now=T0)
    now = db_now(sql)
    tasks.trigger(db, "job", run_at=now - timedelta(seconds=1), priority=1)
    tasks.trigger(db, "job", run_at=now + timedelta(seconds=60), priority=1)
    tasks.trigger(db, "job", run_at=now + timedelta(seconds=5), priority=5)
    tasks.trigger(db, "other", run_at=now + timedelta(seconds=3))
    assert 4 < db.one("execution_next_due", queues=["default"], tenants=None)["future_seconds"] <= 5
    assert (
        2
        < db.one("execution_next_due", queues=["default", "other"], tenants=None)["future_seconds"]
        <= 3
    )

"""Terms are fenced (``scheduler.elect``, the first statements of every tick batch and
rescue): an election ends the sessions of an older term that may still write, and nothing
is created under a term that is no longer current."""

from __future__ import annotations

import threading
from datetime import timedelta

import psycopg
import pytest
from psycopg.rows import dict_row

from pgsched import scheduler
from pgsched.db import Session, connect
from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec

# One connection in a transaction rolled back after each test (tests/conftest.py: tx);
# the tests that ask for dsn, or are marked clone, get a database of their own.
pytestmark = pytest.mark.rolled_back


@pytest.fixture
def lock(dsn):
    """The election's session (a scheduler's dedicated lock connection)."""
    conn = connect(dsn, application_name="test election")
    try:
        yield Session(conn)
    finally:
        conn.close()


def elect_within(lock: Session, seconds: float = 15.0) -> int | None:
    """``scheduler.elect`` run in a thread, given ``seconds`` to finish (then stopped)."""
    stop, result = threading.Event(), []
    thread = threading.Thread(target=lambda: result.append(scheduler.elect(lock, "test", stop)))
    thread.start()
    thread.join(seconds)
    stop.set()
    thread.join()
    return result[0] if result else None


def test_an_election_ends_an_older_terms_open_transaction_and_then_begins(dsn, lock, sql):
    assert elect_within(lock) == 1
    # A leader of term 1 frozen inside a tick: its transaction holds the term key shared,
    # and a task row, and waits for its next statement for ever.
    frozen = psycopg.connect(dsn, row_factory=dict_row)
    frozen.execute("SELECT pg_advisory_xact_lock_shared(pgsched_internal.internal_key_v1('term'))")
    frozen_pid = frozen.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"]
    try:
        assert elect_within(lock) == 2
        gone = sql.execute(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE pid = %s", [frozen_pid]
        ).fetchone()
        assert gone["n"] == 0
        with pytest.raises(psycopg.OperationalError):
            frozen.execute("SELECT 1")
    finally:
        frozen.close()
    assert sql.execute("SELECT epoch FROM pgsched.leader").fetchone()["epoch"] == 2


def test_a_tick_or_rescue_under_an_older_term_creates_nothing(db, lock, sql):
    assert elect_within(lock) == 1
    assert elect_within(lock) == 2
    now = db.now()
    tasks.create(
        db,
        TaskSpec(name="due", command="true", schedule_kind="interval", schedule="60"),
        now=now - timedelta(minutes=5),
    )
    with pytest.raises(scheduler.TermOver):
        scheduler.tick(db, 1, now)
    with pytest.raises(scheduler.TermOver):
        scheduler.rescue(db, 1)
    assert sql.execute("SELECT count(*) AS n FROM pgsched.execution").fetchone()["n"] == 0
    assert scheduler.tick(db, 2, now) == 1
    assert [
        r["leader_epoch"] for r in sql.execute("SELECT leader_epoch FROM pgsched.execution")
    ] == [2]
    assert scheduler.rescue(db, 2) == []


def test_a_bursts_parallel_batches_under_an_older_term_create_nothing(db, lock, sql):
    assert elect_within(lock) == 1
    assert elect_within(lock) == 2
    now = db.now()
    sql.execute(
        "INSERT INTO pgsched.task (name, schedule_kind, schedule_expr, handler_kind, command, next_fire_at) "
        "SELECT 'burst-' || g, 'interval', '3600', 'shell', 'true', %s FROM generate_series(1, 50) g",
        [now - timedelta(seconds=1)],
    )
    with pytest.raises(scheduler.TermOver):
        scheduler.tick(db, 1, now, batch=10, parallel=4)
    assert sql.execute("SELECT count(*) AS n FROM pgsched.execution").fetchone()["n"] == 0
    assert scheduler.tick(db, 2, now, batch=10, parallel=4) == 50

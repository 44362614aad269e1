"""Group commit of final outcomes (completer.Completer and execution_finish_many): many
executions moved to history in one statement, each only while its lease is held, and a
value the database refuses failing only its own execution."""

from __future__ import annotations

from concurrent.futures import Future
from datetime import UTC, datetime

import pytest

from pgsched import scheduler
from pgsched.errors import PgschedError
from pgsched.stores import tasks
from pgsched.worker.completer import Completer, finish_params

from ..factories import T0, make_task
from .test_claim import claim, register


def item(row, state="succeeded", **extra):
    return (
        dict(
            id=row["id"],
            lease_id=row["lease_id"],
            state=state,
            finished_at=datetime.now(UTC),
            exit_code=0,
            error=None,
            result=None,
            attempt_state=state,
            started_at=row["started_at"],
            error_type=None,
        )
        | extra
    )


def claimed_then_rescued(db, sql, n, keep=None):
    """``n`` executions of task "job" claimed by a new worker, which then goes silent; the
    leader's rescue takes them back, except those whose ids are in ``keep`` (hidden from
    it). Returns (worker id, claimed rows)."""
    make_task(db, now=T0)
    worker = register(db)
    for _ in range(n):
        tasks.trigger(db, "job")
    rows = claim(db, worker, limit=n)
    sql.execute(
        "UPDATE pgsched.worker SET last_heartbeat_at = now() - interval '1 minute' WHERE id = %s",
        [worker],
    )
    hidden = [r["id"] for r in rows if keep is not None and not keep(r, rows)]
    # Hidden by holding their rows while the rescue runs (it skips locked rows): a running
    # execution without a worker is rescued too since migration 0015.
    with sql.transaction():
        sql.execute("SELECT id FROM pgsched.execution WHERE id = ANY(%s) FOR UPDATE", [hidden])
        scheduler.rescue(db)
    return worker, rows


def test_one_statement_moves_every_execution_whose_lease_is_held(db, sql):
    worker, rows = claimed_then_rescued(
        db, sql, 5, keep=lambda r, rows: r is rows[0]
    )  # only one is rescued
    items = [item(r) for r in rows]
    moved = db.one("execution_finish_many", worker_id=worker, **finish_params(items))["moved"]
    assert sorted(moved) == sorted(r["id"] for r in rows[1:])
    hist = sql.execute("SELECT id, state FROM pgsched.execution_history ORDER BY id").fetchall()
    assert [(h["id"], h["state"]) for h in hist] == [(r["id"], "succeeded") for r in rows[1:]]
    attempts = sql.execute(
        "SELECT execution_id, state FROM pgsched.execution_attempt ORDER BY execution_id"
    ).fetchall()
    assert [(a["execution_id"], a["state"]) for a in attempts] == [(rows[0]["id"], "lost")] + [
        (r["id"], "succeeded") for r in rows[1:]
    ]  # the rescued one keeps only its 'lost' attempt


def test_a_refused_value_fails_only_its_own_execution(db, sql):
    make_task(db, now=T0)
    worker = register(db)
    for _ in range(3):
        tasks.trigger(db, "job")
    rows = claim(db, worker, limit=3)
    completer = Completer(db, lambda: worker)
    try:
        good: Future[bool] = Future()
        bad: Future[bool] = Future()

        def into(future):
            return lambda r: (
                future.set_exception(r) if isinstance(r, BaseException) else future.set_result(r)
            )

        completer.queue.put(
            (item(rows[0]), into(good))
        )  # queued together: one batch, split on refusal
        completer.queue.put((item(rows[1], state="bogus"), into(bad)))
        assert completer.finish(item(rows[2])) is True
        assert good.result(5) is True
        with pytest.raises(PgschedError, match="check"):
            bad.result(5)
    finally:
        completer.close()
    states = {
        r["id"]: r["state"] for r in sql.execute("SELECT id, state FROM pgsched.execution_all")
    }
    assert states == {
        rows[0]["id"]: "succeeded",
        rows[1]["id"]: "running",
        rows[2]["id"]: "succeeded",
    }


def test_a_batch_whose_leases_were_all_lost_moves_nothing(db, sql):
    """Every execution of the batch was rescued meanwhile: the statement still returns its
    one row, an empty array, and the completer settles each outcome as not stored."""
    worker, rows = claimed_then_rescued(db, sql, 3)
    assert (
        db.one("execution_finish_many", worker_id=worker, **finish_params([item(r) for r in rows]))[
            "moved"
        ]
        == []
    )
    assert db.one("execution_finish_many", worker_id=worker, items="[]")["moved"] == []
    completer = Completer(db, lambda: worker)
    try:
        assert [completer.finish(item(r)) for r in rows] == [False, False, False]
    finally:
        completer.close()
    assert sql.execute("SELECT count(*) AS n FROM pgsched.execution_history").fetchone()["n"] == 0
    assert {a["state"] for a in sql.execute("SELECT state FROM pgsched.execution_attempt")} == {
        "lost"
    }


def test_a_split_batch_reports_lost_refused_and_stored_outcomes_each_their_own_way(db, sql):
    worker, rows = claimed_then_rescued(
        db, sql, 3, keep=lambda r, rows: r is rows[0]
    )  # rows[0]'s lease is gone
    completer = Completer(db, lambda: worker)
    try:
        futures: list[Future] = [Future() for _ in rows]

        def into(future):
            return lambda r: (
                future.set_exception(r) if isinstance(r, BaseException) else future.set_result(r)
            )

        completer.queue.put((item(rows[0]), into(futures[0])))
        completer.queue.put((item(rows[1], state="bogus"), into(futures[1])))
        completer.queue.put((item(rows[2]), into(futures[2])))
        assert futures[0].result(5) is False
        with pytest.raises(PgschedError, match="check"):
            futures[1].result(5)
        assert futures[2].result(5) is True
    finally:
        completer.close()
    hist = sql.execute("SELECT id, state FROM pgsched.execution_history").fetchall()
    assert [(h["id"], h["state"]) for h in hist] == [(rows[2]["id"], "succeeded")]

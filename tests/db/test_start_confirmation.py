"""Migration 0008 on a real database: the rescue of a dead worker's executions charges a
lost attempt only to one that surely started (its start recorded), hands back as never
claimed one that surely did not (its start had to be recorded and was not), and, when it
cannot tell, records the loss without counting it and asks the next worker to record the
start."""

from __future__ import annotations

import pytest

from pgsched import scheduler
from pgsched.stores import tasks

from .test_claim import claim, register
from .test_reliability_sql import T0, attempts, running, silence

# One connection in a transaction rolled back after each test (tests/conftest.py: tx);
# the tests that ask for dsn, or are marked clone, get a database of their own.
pytestmark = pytest.mark.rolled_back


def confirm(db, row) -> int:
    return db.exec("execution_confirm_start", id=row["id"], lease_id=row["lease_id"])


def live(sql, execution_id):
    return sql.execute("SELECT * FROM pgsched.execution WHERE id = %s", [execution_id]).fetchone()


def rescued_once(db, sql, worker) -> dict:
    """Declare ``worker`` dead; the one rescue row."""
    silence(sql, worker)
    [row] = scheduler.rescue(db)
    return row


def lost_unknown(db, sql, name="job", **fields):
    """An execution lost once with a worker that never recorded its start: requeued with
    confirm_start set. Returns its id."""
    worker, (first,) = running(db, sql, name=name, **fields)
    assert (
        first["confirm_start"] is False
    )  # a first claim asks for nothing: no write on the hot path
    assert rescued_once(db, sql, worker)["outcome"] == "requeued"
    return first["id"]


def test_a_start_not_known_is_recorded_lost_without_counting_and_confirmation_asked(db, sql):
    worker, (first,) = running(db, sql, max_attempts=1)
    assert rescued_once(db, sql, worker) == {
        "execution_id": first["id"],
        "worker_id": worker,
        "outcome": "requeued",
    }
    row = live(sql, first["id"])
    assert {
        k: row[k]
        for k in (
            "state",
            "attempt",
            "max_attempts",
            "lost_attempts",
            "confirm_start",
            "start_confirmed_at",
            "worker_id",
            "lease_id",
        )
    } == {
        "state": "pending",
        "attempt": 1,
        "max_attempts": 2,
        "lost_attempts": 0,
        "confirm_start": True,
        "start_confirmed_at": None,
        "worker_id": None,
        "lease_id": None,
    }
    [lost] = attempts(sql, first["id"])
    assert (lost["attempt"], lost["state"], lost["worker_id"], lost["lease_id"]) == (
        1,
        "lost",
        worker,
        first["lease_id"],
    )
    assert (
        "start was not recorded" in lost["error"]
        and "does not count toward max_lost_attempts" in lost["error"]
    )


def test_a_start_that_had_to_be_recorded_and_was_not_goes_back_as_never_claimed(db, sql):
    ident = lost_unknown(db, sql)
    before = live(sql, ident)
    worker = register(db, "second")
    [again] = claim(db, worker)
    assert (again["id"], again["attempt"], again["confirm_start"]) == (ident, 2, True)
    assert rescued_once(db, sql, worker)["outcome"] == "unclaimed"
    row = live(sql, ident)
    assert {
        k: row[k]
        for k in (
            "state",
            "attempt",
            "max_attempts",
            "lost_attempts",
            "confirm_start",
            "run_at",
            "started_at",
            "worker_id",
            "lease_id",
        )
    } == {
        "state": "pending",
        "attempt": 1,
        "max_attempts": 2,
        "lost_attempts": 0,
        "confirm_start": True,
        "run_at": before["run_at"],
        "started_at": None,
        "worker_id": None,
        "lease_id": None,
    }
    assert [a["attempt"] for a in attempts(sql, ident)] == [
        1
    ]  # no attempt row for the one never started


def test_a_recorded_start_makes_the_loss_count(db, sql):
    ident = lost_unknown(db, sql)
    worker = register(db, "second")
    [again] = claim(db, worker)
    assert confirm(db, again) == 1
    confirmed_at = live(sql, ident)["start_confirmed_at"]
    assert confirmed_at is not None
    assert rescued_once(db, sql, worker)["outcome"] == "requeued"
    row = live(sql, ident)
    assert {
        k: row[k]
        for k in (
            "state",
            "attempt",
            "max_attempts",
            "lost_attempts",
            "confirm_start",
            "start_confirmed_at",
        )
    } == {
        "state": "pending",
        "attempt": 2,
        "max_attempts": 3,
        "lost_attempts": 1,
        "confirm_start": True,
        "start_confirmed_at": None,
    }
    second = attempts(sql, ident)[1]
    assert (second["attempt"], second["state"], second["started_at"]) == (2, "lost", confirmed_at)
    assert "while running attempt 2" in second["error"] and "does not count" not in second["error"]


def test_one_rescue_applies_each_rule_to_its_own_execution(db, sql):
    """Three executions held by one dead worker: one never asked to confirm, one asked and
    started, one asked and never started."""
    make = [lost_unknown(db, sql, name=f"job{i}") for i in (1, 2)]
    worker, (fresh,) = running(db, sql, name="job3")
    held = claim(db, worker)
    assert sorted(r["id"] for r in held) == sorted(make)
    started = next(r for r in held if r["id"] == make[0])
    assert confirm(db, started) == 1
    silence(sql, worker)
    outcomes = {r["execution_id"]: r["outcome"] for r in scheduler.rescue(db)}
    assert outcomes == {fresh["id"]: "requeued", make[0]: "requeued", make[1]: "unclaimed"}
    lost = {
        i: (r["lost_attempts"], r["attempt"], r["confirm_start"])
        for i in outcomes
        for r in [live(sql, i)]
    }
    assert lost == {fresh["id"]: (0, 1, True), make[0]: (1, 2, True), make[1]: (0, 1, True)}


def test_one_that_never_started_is_dropped_when_its_task_was_deleted_meanwhile(db, sql):
    """Held unstarted by a worker while its task was deleted (a delete drops only pending
    executions): the rescue drops it as the worker's own hand-back would (execution_unclaim),
    rather than making it pending for another worker to run a deleted task."""
    ident = lost_unknown(db, sql)
    worker = register(db, "second")
    [_held] = claim(db, worker)  # the second worker holds it, unstarted
    assert tasks.delete(db, "job") == 0  # held: not pending, so kept
    assert rescued_once(db, sql, worker) == {
        "execution_id": ident,
        "worker_id": worker,
        "outcome": "dropped",
    }
    assert live(sql, ident) is None
    assert claim(db, register(db, "third")) == []
    assert [a["attempt"] for a in attempts(sql, ident)] == [1]  # the first loss only


def test_a_start_recorded_after_the_rescue_finds_no_claim(db, sql):
    ident = lost_unknown(db, sql)
    worker = register(db, "second")
    [again] = claim(db, worker)
    assert rescued_once(db, sql, worker)["outcome"] == "unclaimed"
    assert confirm(db, again) == 0  # the worker must not run it
    assert live(sql, ident)["start_confirmed_at"] is None


def test_every_way_back_to_the_queue_clears_the_recorded_start(db, sql):
    ident = lost_unknown(db, sql)
    worker = register(db, "second")
    [row] = claim(db, worker)
    assert confirm(db, row) == 1
    assert db.many("execution_unclaim", id=[ident], lease_id=[row["lease_id"]]) == [{"id": ident}]
    assert (live(sql, ident)["start_confirmed_at"], live(sql, ident)["confirm_start"]) == (
        None,
        True,
    )
    [row] = claim(db, worker)
    assert confirm(db, row) == 1
    assert (
        db.exec(
            "execution_retry",
            id=ident,
            lease_id=row["lease_id"],
            run_at=T0,
            extra_attempts=0,
            budget_delay_seconds=None,
        )
        == 1
    )
    assert live(sql, ident)["start_confirmed_at"] is None
    [row] = claim(db, worker)
    assert row["confirm_start"] is True and live(sql, ident)["start_confirmed_at"] is None


def test_a_worker_runs_an_execution_that_asks_only_once_its_start_is_recorded(db, sql, tmp_path):
    """Executor.execute on a claim with confirm_start: rescued before its slot got to it, it
    is not run (nor recorded); still held, it is run once."""
    from pgsched.worker import Worker, WorkerConfig

    marker = tmp_path / "ran"
    ident = lost_unknown(db, sql)
    sql.execute(
        "UPDATE pgsched.task SET command = %s WHERE name = 'job'", [f"echo ran >> {marker}"]
    )
    worker = Worker(db, WorkerConfig())
    worker._register()
    [row] = claim(db, worker.id)
    assert row["confirm_start"]
    assert (
        rescued_once(db, sql, worker.id)["outcome"] == "unclaimed"
    )  # while it waited in the buffer
    worker.holdings.running = 1  # as the slot that took it from the buffer
    assert worker.executor.execute(row)
    assert not marker.exists()
    assert live(sql, ident)["state"] == "pending" and len(attempts(sql, ident)) == 1

    worker._register()
    [row] = claim(db, worker.id)
    worker.holdings.running = 1
    assert worker.executor.execute(row)
    assert marker.read_text() == "ran\n"
    assert [a["state"] for a in attempts(sql, ident)] == ["lost", "succeeded"]

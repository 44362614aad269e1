"""The reliability SQL of migration 0002 on a real database: rescue of dead workers'
executions, cancel, the dead-letter queue, the retry budget, and misfire policies."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from pgsched import scheduler
from pgsched.errors import NotFound
from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec

from ..factories import make_task
from ..helpers import notifications_until_marker
from .test_claim import claim, finish, register

# One connection in a transaction rolled back after each test (tests/conftest.py: tx);
# the tests that ask for dsn, or are marked clone, get a database of their own.
pytestmark = pytest.mark.rolled_back

T0 = datetime(2025, 1, 15, 10, 0, tzinfo=UTC)


def running(db, sql, n=1, name="job", worker=None, **fields):
    """n executions of a new task, claimed by ``worker`` (a new one by default)."""
    make_task(db, name, **fields, now=T0)
    worker = worker or register(db)
    for _ in range(n):
        tasks.trigger(db, name, run_at=T0)
    return worker, claim(db, worker, limit=n, now=T0)


def silence(sql, worker, seconds=60):
    sql.execute(
        "UPDATE pgsched.worker SET last_heartbeat_at = now() - make_interval(secs => %s) WHERE id = %s",
        [seconds, worker],
    )


def state_of(sql, execution_id):
    return sql.execute(
        "SELECT * FROM pgsched.execution_all WHERE id = %s", [execution_id]
    ).fetchone()


def attempts(sql, execution_id):
    return sql.execute(
        "SELECT * FROM pgsched.execution_attempt WHERE execution_id = %s ORDER BY attempt, started_at",
        [execution_id],
    ).fetchall()


# --- rescue ---------------------------------------------------------------------------


def test_a_silent_worker_is_declared_dead_and_its_executions_requeued_once(db, sql):
    worker, claimed = running(db, sql, n=2, max_attempts=1)
    alive, _ = running(db, sql, n=1, name="other")
    silence(sql, worker, seconds=16)  # heartbeat interval 5 s: dead after 15 s
    rescued = scheduler.rescue(db)
    assert sorted((r["execution_id"], r["worker_id"], r["outcome"]) for r in rescued) == sorted(
        (c["id"], worker, "requeued") for c in claimed
    )
    states = {r["id"]: r["state"] for r in sql.execute("SELECT id, state FROM pgsched.worker")}
    assert states == {worker: "dead", alive: "running"}
    for c in claimed:
        row = state_of(sql, c["id"])
        assert (
            row["state"],
            row["worker_id"],
            row["attempt"],
            row["max_attempts"],
            row["lost_attempts"],
        ) == (
            "pending",
            None,
            1,
            2,
            0,
        )  # the lost attempt does not use up its one try; its start was not
        # recorded, so the loss does not count either (tests/db/test_start_confirmation.py)
        [lost] = attempts(sql, c["id"])
        assert (lost["state"], lost["worker_id"], lost["lease_id"]) == (
            "lost",
            worker,
            c["lease_id"],
        )
        assert f"worker {worker} was lost" in lost["error"]
    assert scheduler.rescue(db) == []  # exactly once
    # The dead worker's late outcome is rejected: its lease is gone.
    assert finish(db, claimed[0]["id"], claimed[0]["lease_id"]) == 0
    assert state_of(sql, claimed[0]["id"])["state"] == "pending"


def test_a_worker_within_three_heartbeats_is_left_alone(db, sql):
    worker, claimed = running(db, sql)
    silence(sql, worker, seconds=14)
    assert scheduler.rescue(db) == []
    assert state_of(sql, claimed[0]["id"])["state"] == "running"


def test_an_execution_lost_three_times_after_it_started_is_dead(db, sql):
    """max_lost_attempts (3) counted losses: the first loss, whose start was not recorded,
    does not count; each later one was started on the record (migration 0008)."""
    worker, (first,) = running(db, sql)
    for round_ in range(4):
        silence(sql, worker)
        [r] = scheduler.rescue(db)
        assert r["outcome"] == ("requeued" if round_ < 3 else "dead")
        if round_ < 3:
            worker = register(db, f"w{round_}")
            [held] = claim(db, worker)
            assert held["id"] == first["id"] and held["confirm_start"]
            assert db.exec("execution_confirm_start", id=held["id"], lease_id=held["lease_id"]) == 1
    row = state_of(sql, first["id"])
    assert (row["state"], row["lost_attempts"], row["attempt"]) == ("dead", 3, 4)
    assert "lost 3 times" in row["error"]
    tries = attempts(sql, first["id"])
    assert [a["state"] for a in tries] == ["lost"] * 4
    assert ["does not count" in a["error"] for a in tries] == [True, False, False, False]


def test_a_rescued_execution_whose_cancel_was_asked_is_cancelled(db, sql):
    worker, (first,) = running(db, sql)
    assert (
        sql.execute("SELECT pgsched.cancel_v1(%s) AS o", [first["id"]]).fetchone()["o"]
        == "cancelling"
    )
    silence(sql, worker)
    assert [r["outcome"] for r in scheduler.rescue(db)] == ["cancelled"]
    assert state_of(sql, first["id"])["state"] == "cancelled"


# --- cancel ---------------------------------------------------------------------------


def test_cancel_of_a_pending_execution_ends_it_at_once(db, sql):
    make_task(db, now=T0)
    ident = tasks.trigger(db, "job", run_at=T0 + timedelta(days=1))
    assert sql.execute("SELECT pgsched.cancel_v1(%s) AS o", [ident]).fetchone()["o"] == "cancelled"
    row = state_of(sql, ident)
    assert (row["state"], row["attempt"], row["error"]) == (
        "cancelled",
        0,
        "cancelled while pending",
    )
    assert sql.execute("SELECT count(*) AS n FROM pgsched.execution").fetchone()["n"] == 0
    # again: it has ended, nothing changes
    assert sql.execute("SELECT pgsched.cancel_v1(%s) AS o", [ident]).fetchone()["o"] == "finished"


def test_cancel_of_a_running_execution_tells_its_worker(db, sql, dsn):
    worker, (first,) = running(db, sql)
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute("LISTEN pgsched_cancel")
        assert (
            sql.execute("SELECT pgsched.cancel_v1(%s) AS o", [first["id"]]).fetchone()["o"]
            == "cancelling"
        )
        assert notifications_until_marker(listener, sql, "pgsched_cancel") == [str(first["id"])]
    row = state_of(sql, first["id"])
    assert row["state"] == "running" and row["cancel_requested_at"] is not None
    beat = db.one(
        "worker_heartbeat", id=worker, running=1, held=[], host_time=None, round_trip=None
    )
    assert beat.pop("now") is not None  # the database's clock, for the worker's records
    assert beat == {
        "alive": True,
        "cancel_ids": [first["id"]],
        "lost_ids": [],
    }  # for a worker that missed the NOTIFY


def test_cancel_of_an_unknown_execution_names_it(db):
    with pytest.raises(NotFound, match="no execution 999"):
        db.one("execution_cancel", id=999, tenant="default")


def test_a_dead_worker_learns_it_from_its_heartbeat(db, sql):
    worker, _ = running(db, sql)
    silence(sql, worker)
    scheduler.rescue(db)
    beat = db.one(
        "worker_heartbeat", id=worker, running=1, held=[], host_time=None, round_trip=None
    )
    assert {k: beat[k] for k in ("alive", "cancel_ids")} == {"alive": False, "cancel_ids": []}


# --- dead-letter queue ----------------------------------------------------------------


def dead(db, sql, name="job", key=None, **fields):
    """An execution of a new task that failed for good."""
    make_task(db, name, **fields, now=T0)
    ident = tasks.trigger(db, name, run_at=T0, idempotency_key=key)
    worker = register(db, f"w-{name}")
    (c,) = claim(db, worker, now=T0)
    assert (
        finish(
            db,
            ident,
            c["lease_id"],
            state="dead",
            exit_code=3,
            error="exited with code 3",
            finished_at=datetime.now(UTC),
        )
        == 1
    )
    return ident


def test_dlq_retry_gives_a_fresh_set_of_attempts_and_keeps_the_old(db, sql):
    ident = dead(db, sql, max_attempts=2)
    sql.execute(
        """INSERT INTO pgsched.execution_attempt (execution_id, attempt, state, started_at, finished_at)
                   VALUES (%s, 1, 'failed', now(), now())""",
        [ident],
    )
    assert db.one("dlq_retry", id=ident, tenant="default")["id"] == ident
    row = state_of(sql, ident)
    assert (row["state"], row["attempt"], row["max_attempts"], row["worker_id"]) == (
        "pending",
        1,
        3,
        None,
    )
    assert len(attempts(sql, ident)) == 1
    worker = register(db, "again")
    (c,) = claim(db, worker, now=datetime.now(UTC))
    assert (c["id"], c["attempt"]) == (ident, 2)
    with pytest.raises(NotFound, match="not in the dead-letter queue"):
        db.one("dlq_retry", id=ident, tenant="default")


def test_dlq_retry_of_a_key_that_has_since_succeeded_is_skipped(db, sql):
    ident = dead(db, sql, key="invoice-7")
    other = tasks.trigger(db, "job", run_at=T0, idempotency_key="invoice-7")
    worker = register(db, "w2")
    (c,) = claim(db, worker, now=T0)
    assert c["id"] == other and finish(db, other, c["lease_id"]) == 1
    db.one("dlq_retry", id=ident, tenant="default")
    row = state_of(sql, ident)
    assert row["state"] == "skipped" and f"already taken by execution {other}" in row["error"]
    assert sql.execute("SELECT count(*) AS n FROM pgsched.execution").fetchone()["n"] == 0


@pytest.mark.clone("purges what finished before now(): now() must advance")
def test_dlq_retry_all_and_purge(db, sql):
    a, b = dead(db, sql, "a"), dead(db, sql, "b")
    c = dead(db, sql, "c")
    assert db.one("dlq_retry_all", task="a", tenant="default")["retried"] == 1
    assert state_of(sql, a)["state"] == "pending" and state_of(sql, b)["state"] == "dead"
    sql.execute(
        "UPDATE pgsched.execution_history SET finished_at = now() - interval '8 days' WHERE id = %s",
        [b],
    )
    assert db.one("dlq_purge", seconds=7 * 86400.0, tenant="default")["purged"] == 1
    assert state_of(sql, b) is None and state_of(sql, c)["state"] == "dead"
    assert db.one("dlq_purge", seconds=0.0, tenant="default")["purged"] == 1
    assert db.many("dlq_list", tenant="default", task=None, limit=10) == []


# --- retry budget ---------------------------------------------------------------------


def test_retries_over_the_budget_move_to_a_later_minute(db, sql):
    sql.execute("UPDATE pgsched.setting SET value = '2' WHERE name = 'retry_budget_min_per_minute'")
    sql.execute("UPDATE pgsched.setting SET value = '0' WHERE name = 'retry_budget_ratio'")
    make_task(db, now=T0)
    minute = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(minutes=2)
    soon = minute + timedelta(seconds=10)
    slot = lambda: db.one("execution_retry_slot", proposed=soon)["run_at"]  # noqa: E731
    assert slot() == soon  # nothing queued yet
    for _ in range(2):
        ident = tasks.trigger(db, "job", run_at=minute + timedelta(seconds=50))
        sql.execute(
            "UPDATE pgsched.execution SET attempt = 1 WHERE id = %s", [ident]
        )  # a queued retry
    assert slot() == minute + timedelta(minutes=1)  # this minute is full: delayed, never dropped
    sql.execute("UPDATE pgsched.setting SET value = '3' WHERE name = 'retry_budget_min_per_minute'")
    assert slot() == soon


def test_retries_already_started_in_a_minute_count_against_it(db, sql):
    sql.execute("UPDATE pgsched.setting SET value = '1' WHERE name = 'retry_budget_min_per_minute'")
    sql.execute("UPDATE pgsched.setting SET value = '0' WHERE name = 'retry_budget_ratio'")
    make_task(db, now=T0)
    ident = tasks.trigger(db, "job", run_at=T0)
    now = datetime.now(UTC)
    sql.execute(
        """INSERT INTO pgsched.execution_attempt (execution_id, attempt, state, started_at, finished_at)
                   VALUES (%s, 2, 'failed', %s, %s)""",
        [ident, now, now],
    )  # a retry ran this minute
    proposed = now + timedelta(seconds=1)
    expected = (
        proposed
        if proposed.minute != now.minute
        else now.replace(second=0, microsecond=0) + timedelta(minutes=1)
    )
    assert db.one("execution_retry_slot", proposed=proposed)["run_at"] == expected


# --- misfire policies -----------------------------------------------------------------


def at(minute: int, second: int = 0) -> datetime:
    return T0.replace(minute=minute, second=second)


@pytest.mark.parametrize(
    ("policy", "fires", "missed"),
    [
        ("once", [at(6)], 5),  # one run, for the latest missed instant (10:06)
        ("all", [at(m) for m in range(1, 7)], 0),
        ("skip", [at(6)], 5),  # 10:06 is 30 s late: within the grace, it runs
    ],
)
def test_misfire_policies_after_downtime(db, sql, policy, fires, missed):
    task = tasks.create(
        db,
        TaskSpec(
            name="minutely",
            command="true",
            schedule_kind="cron",
            schedule="* * * * *",
            misfire_policy=policy,
        ),
        now=at(0, 30),
    )
    assert task["next_fire_at"] == at(1)
    # the scheduler was down from 10:00:30 until 10:06:30
    scheduler.tick(db, 1, at(6, 30))
    rows = sql.execute(
        "SELECT scheduled_at FROM pgsched.execution ORDER BY scheduled_at"
    ).fetchall()
    assert [r["scheduled_at"] for r in rows] == fires
    row = sql.execute("SELECT next_fire_at, missed_fires FROM pgsched.task").fetchone()
    assert (row["next_fire_at"], row["missed_fires"]) == (at(7), missed)


def test_misfire_all_is_capped(db, sql):
    sql.execute("UPDATE pgsched.setting SET value = '3' WHERE name = 'misfire_all_cap'")
    tasks.create(
        db,
        TaskSpec(
            name="minutely",
            command="true",
            schedule_kind="cron",
            schedule="* * * * *",
            misfire_policy="all",
        ),
        now=at(0, 30),
    )
    scheduler.tick(db, 1, at(6, 30))
    rows = sql.execute(
        "SELECT scheduled_at FROM pgsched.execution ORDER BY scheduled_at"
    ).fetchall()
    assert [r["scheduled_at"] for r in rows] == [at(1), at(2), at(3)]
    row = sql.execute("SELECT next_fire_at, missed_fires FROM pgsched.task").fetchone()
    assert (row["next_fire_at"], row["missed_fires"]) == (at(7), 3)


def test_skip_runs_a_fire_that_is_only_a_little_late(db, sql):
    tasks.create(
        db,
        TaskSpec(
            name="minutely",
            command="true",
            schedule_kind="cron",
            schedule="* * * * *",
            misfire_policy="skip",
        ),
        now=at(0, 30),
    )
    scheduler.tick(db, 1, at(1, 20))  # 20 s late, within the 60 s grace
    rows = sql.execute("SELECT scheduled_at FROM pgsched.execution").fetchall()
    assert [r["scheduled_at"] for r in rows] == [at(1)]


def test_dlq_retry_of_a_deleted_tasks_execution_is_refused(db, sql):
    ident = dead(db, sql, "doomed")
    tasks.delete(db, "doomed")
    with pytest.raises(Exception, match="belongs to a deleted task"):
        db.one("dlq_retry", id=ident, tenant="default")
    assert db.one("dlq_retry_all", task=None, tenant="default")["retried"] == 0
    assert state_of(sql, ident)["state"] == "dead"


def test_a_new_leader_waits_one_dead_worker_window(db, sql):
    assert db.one("scheduler_rescue_grace")["seconds"] == 0  # no workers: nothing to wait for
    register(db, "slow")  # heartbeat interval 5 s
    assert db.one("scheduler_rescue_grace")["seconds"] == 15


def test_an_attempt_that_ends_after_a_cancel_is_not_retried(db, sql):
    """The cancel arrives after the worker has stopped listening for it (the attempt failed
    on its own): the worker must not queue another attempt."""
    from pgsched.handlers import Outcome
    from pgsched.worker import Worker, WorkerConfig
    from pgsched.worker.outcome import finished_attempt

    worker = Worker(db, WorkerConfig())
    worker._register()
    make_task(db, max_attempts=3, now=T0)
    ident = tasks.trigger(db, "job", run_at=T0)
    (row,) = claim(db, worker.id)
    assert sql.execute("SELECT pgsched.cancel_v1(%s) AS o", [ident]).fetchone()["o"] == "cancelling"
    now = datetime.now(UTC)
    attempt = finished_attempt(
        row,
        Outcome("failed", 1, "exited with code 1"),
        stopped=False,
        started_at=now,
        finished_at=now,
    )
    assert attempt.final is None  # a retry, until the write finds the cancel
    written = worker.recorder.write(attempt)
    assert (written.final, written.retry_at) == ("cancelled", None)
    assert state_of(sql, ident)["state"] == "cancelled"
    assert [a["state"] for a in attempts(sql, ident)] == ["failed"]


def test_dlq_retry_all_and_purge_at_once_each_skip_what_the_other_holds(db, sql, dsn):
    ids = [dead(db, sql, f"t{i}") for i in range(4)]
    with psycopg.connect(dsn, autocommit=False) as other:
        # another session is retrying the first two (rows locked, not yet committed)
        other.execute(
            "SELECT id FROM pgsched.execution_history WHERE id = ANY(%s) FOR UPDATE", [ids[:2]]
        )
        assert db.one("dlq_purge", seconds=0.0, tenant="default")["purged"] == 2
        assert db.one("dlq_retry_all", task=None, tenant="default")["retried"] == 0
        other.rollback()
    assert [state_of(sql, i)["state"] for i in ids[:2]] == ["dead", "dead"]
    assert [state_of(sql, i) for i in ids[2:]] == [None, None]

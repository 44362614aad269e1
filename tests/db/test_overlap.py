"""Overlap policies of scheduled tasks (issue 18, item 5; migration 0022) on a real
database: the scheduler's tick, with the clock passed in, fires a task whose previous
execution is still pending or running; ``skip`` records the fire as a skipped execution
that says why, ``queue_one`` keeps at most one waiting, ``allow`` runs every fire. Catch-up
fires (misfire policy ``all``) obey the same; manual triggers are not held back."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pgsched import scheduler
from pgsched.errors import ValidationError
from pgsched.stores import tasks

from ..factories import make_task
from .test_claim import claim, finish, register

# One connection in a transaction rolled back after each test (tests/conftest.py: tx).
pytestmark = pytest.mark.rolled_back


def at(minute: int, second: int = 0) -> datetime:
    return datetime(2025, 1, 15, 10, minute, second, tzinfo=UTC)


def every_minute(db, name: str = "sync", **fields) -> dict:
    return make_task(db, name, schedule_kind="cron", schedule="* * * * *", now=at(0), **fields)


def live(sql, task_id: int) -> list[tuple[int, str, str]]:
    """(id, state, trigger) of the task's pending and running executions, by id."""
    rows = sql.execute(
        "SELECT id, state, trigger FROM pgsched.execution WHERE task_id = %s ORDER BY id",
        [task_id],
    ).fetchall()
    return [(r["id"], r["state"], r["trigger"]) for r in rows]


def skipped(sql, task_id: int) -> list[tuple[datetime, str]]:
    """(scheduled_at, error) of the task's skipped executions, by scheduled time."""
    rows = sql.execute(
        "SELECT scheduled_at, error FROM pgsched.execution_history "
        "WHERE task_id = %s AND state = 'skipped' ORDER BY scheduled_at",
        [task_id],
    ).fetchall()
    return [(r["scheduled_at"], r["error"]) for r in rows]


def start(db, execution_id: int) -> int:
    """Claim the execution (the only one due) for a worker; return its lease."""
    (row,) = [
        r
        for r in claim(db, register(db, f"w{execution_id}"), now=at(59))
        if r["id"] == execution_id
    ]
    return row["lease_id"]


def test_skip_records_a_fire_while_the_previous_execution_is_pending_or_running(db, sql):
    task = every_minute(db, overlap_policy="skip")
    scheduler.tick(db, 7, at(1))
    [(first, _, _)] = live(sql, task["id"])

    scheduler.tick(db, 7, at(2))  # the 10:01 run has not started
    lease = start(db, first)
    scheduler.tick(db, 7, at(3))  # it runs
    assert live(sql, task["id"]) == [(first, "running", "schedule")]
    assert skipped(sql, task["id"]) == [
        (at(2), f"overlap policy skip: execution {first} of this task is pending"),
        (at(3), f"overlap policy skip: execution {first} of this task is running"),
    ]

    assert finish(db, first, lease) == 1
    scheduler.tick(db, 7, at(4))  # nothing live: the fire runs
    [(fourth, state, _)] = live(sql, task["id"])
    assert fourth != first and state == "pending"
    assert task_row(sql, task["id"])["last_fire_at"] == at(4)


def test_queue_one_keeps_one_waiting_execution_besides_the_running_one(db, sql):
    task = every_minute(db, overlap_policy="queue_one")
    scheduler.tick(db, 7, at(1))
    [(first, _, _)] = live(sql, task["id"])
    start(db, first)

    scheduler.tick(db, 7, at(2))  # one running: this one waits
    [_, (second, state, _)] = live(sql, task["id"])
    assert state == "pending"
    scheduler.tick(db, 7, at(3))  # one waits already: no backlog grows
    scheduler.tick(db, 7, at(4))
    assert live(sql, task["id"]) == [
        (first, "running", "schedule"),
        (second, "pending", "schedule"),
    ]
    why = f"overlap policy queue_one: execution {second} of this task already waits"
    assert skipped(sql, task["id"]) == [(at(3), why), (at(4), why)]


def test_queue_one_starts_the_waiting_execution_only_when_the_running_one_ends(db, sql):
    task = every_minute(db, overlap_policy="queue_one")
    scheduler.tick(db, 7, at(1))
    [(first, _, _)] = live(sql, task["id"])
    lease = start(db, first)
    scheduler.tick(db, 7, at(2))
    [_, (second, _, _)] = live(sql, task["id"])

    worker = register(db, "more")
    assert claim(db, worker, now=at(59)) == []  # a free worker, a due run: it waits its turn
    reason = sql.execute(
        "SELECT pgsched_internal.wait_reason_v1(e) AS why FROM pgsched.execution e WHERE e.id = %s",
        [second],
    ).fetchone()["why"]
    assert reason == "task sync runs one execution at a time (overlap policy queue_one)"
    assert finish(db, first, lease) == 1
    assert [r["id"] for r in claim(db, worker, now=at(59))] == [second]


def test_allow_runs_every_fire_as_before(db, sql):
    task = every_minute(db)
    assert task["overlap_policy"] == "allow" and not task["windowed"]
    scheduler.tick(db, 7, at(1))
    [(first, _, _)] = live(sql, task["id"])
    start(db, first)
    scheduler.tick(db, 7, at(2))
    scheduler.tick(db, 7, at(3))
    assert [s for _, s, _ in live(sql, task["id"])] == ["running", "pending", "pending"]
    assert skipped(sql, task["id"]) == []


@pytest.mark.parametrize(
    ("policy", "queued"), [("skip", 0), ("queue_one", 1)], ids=["skip", "queue_one"]
)
def test_catch_up_fires_obey_the_overlap_policy(db, sql, policy, queued):
    task = every_minute(db, overlap_policy=policy, misfire_policy="all")
    scheduler.tick(db, 7, at(1))
    [(first, _, _)] = live(sql, task["id"])
    start(db, first)

    scheduler.tick(db, 7, at(6))  # 10:02 to 10:06 missed while the scheduler was down
    waiting = [i for i, s, _ in live(sql, task["id"]) if s == "pending"]
    assert len(waiting) == queued
    assert [s for s, _ in skipped(sql, task["id"])] == [at(m) for m in range(2 + queued, 7)]
    assert task_row(sql, task["id"])["last_fire_at"] == at(6)


def test_a_manual_trigger_is_not_held_back_and_counts_for_the_next_fire(db, sql):
    task = every_minute(db, overlap_policy="skip")
    manual = tasks.enqueue(db, "sync")  # the policy is the schedule's: a manual run runs
    assert not manual.deduplicated
    again = tasks.enqueue(db, "sync")
    assert not again.deduplicated and again.execution_id != manual.execution_id

    scheduler.tick(db, 7, at(1))  # two manual runs wait: the fire is skipped
    assert [t for _, _, t in live(sql, task["id"])] == ["manual", "manual"]
    [(when, why)] = skipped(sql, task["id"])
    assert when == at(1) and why.startswith(
        f"overlap policy skip: execution {manual.execution_id} "
    )


def test_a_policy_set_later_counts_the_executions_made_before(db, sql):
    task = every_minute(db)
    scheduler.tick(db, 7, at(1))
    [(first, _, _)] = live(sql, task["id"])
    start(db, first)

    tasks.update(db, "sync", {"overlap_policy": "skip"})
    scheduler.tick(db, 7, at(2))
    assert live(sql, task["id"]) == [(first, "running", "schedule")]
    assert [s for s, _ in skipped(sql, task["id"])] == [at(2)]


def test_a_skipped_fire_is_not_fired_again_by_a_second_tick(db, sql):
    task = every_minute(db, overlap_policy="skip")
    scheduler.tick(db, 7, at(1))
    scheduler.tick(db, 7, at(2))
    scheduler.tick(db, 7, at(2))  # the same instant again (a second leader's tick, a retry)
    assert len(skipped(sql, task["id"])) == 1 and len(live(sql, task["id"])) == 1


def test_a_bad_overlap_policy_names_the_field_and_value(db):
    with pytest.raises(ValidationError) as caught:
        every_minute(db, overlap_policy="sometimes")
    assert str(caught.value).startswith("overlap_policy: 'sometimes' must be one of allow, skip")
    make_task(db, "plain")
    with pytest.raises(ValidationError, match="overlap_policy: 'never'"):
        tasks.update(db, "plain", {"overlap_policy": "never"})
    assert tasks.get(db, "plain")["overlap_policy"] == "allow"


def task_row(sql, task_id: int) -> dict:
    return sql.execute("SELECT * FROM pgsched.task WHERE id = %s", [task_id]).fetchone()


def declared_sync() -> None:
    """A task declared in code with an overlap policy (the App test below)."""


def test_a_task_declared_in_code_gets_its_policy(db):
    from pgsched import App

    app = App()
    app.task("declared", every="1m", overlap="queue_one", unique_period=30)(declared_sync)
    with pytest.raises(ValidationError, match="overlap_policy: 'sometimes'"):
        app.task("bad", overlap="sometimes")(declared_sync)
    assert app.sync(db) == ["declared"]
    row = tasks.get(db, "declared")
    assert (row["overlap_policy"], row["unique_period_seconds"]) == ("queue_one", 30.0)

"""Claiming and finishing executions (execution_claim, execution_finish) on a real database."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import pytest
from psycopg.types.json import Jsonb

from pgsched.db import Database
from pgsched.errors import PgschedError
from pgsched.stores import tasks
from pgsched.worker.claims import TaskDefinitions

from ..factories import make_execution, make_task
from ..helpers import wait_until

# One connection in a transaction rolled back after each test (tests/conftest.py: tx);
# the tests that ask for dsn, or are marked clone, get a database of their own.
pytestmark = pytest.mark.rolled_back

T0 = datetime(2025, 1, 15, 10, 0, tzinfo=UTC)


def register(db, name: str = "w", queues=("default",)) -> int:
    row = db.one(
        "worker_register",
        name=name,
        hostname="testhost",
        pid=4242,
        queues=list(queues),
        tenants=None,
        concurrency=4,
        heartbeat_interval=5.0,
        host_time=None,
        round_trip=None,
    )
    return row["id"]


def enqueue(db, name: str = "job", *, run_at: datetime, priority: int | None = None) -> int:
    return tasks.trigger(db, name, run_at=run_at, priority=priority)


def claim(
    db, worker_id: int, limit: int = 10, queues=("default",), now: datetime | None = None
) -> list[dict]:
    return TaskDefinitions().claim(
        db, queues=list(queues), limit=limit, worker_id=worker_id, now=now
    )


def live(sql, execution_id: int) -> dict | None:
    return sql.execute("SELECT * FROM pgsched.execution WHERE id = %s", [execution_id]).fetchone()


def test_claim_takes_priority_first_then_oldest_run_at(db):
    make_task(db, now=T0)
    worker = register(db)
    late_urgent = enqueue(db, run_at=T0 - timedelta(minutes=1), priority=1)
    old_normal = enqueue(db, run_at=T0 - timedelta(hours=2), priority=5)
    new_normal = enqueue(db, run_at=T0 - timedelta(hours=1), priority=5)
    early_urgent = enqueue(db, run_at=T0 - timedelta(minutes=30), priority=1)
    lazy = enqueue(db, run_at=T0 - timedelta(days=1), priority=10)
    order = [
        r["id"]
        for r in claim(db, worker, limit=1)
        + claim(db, worker, limit=2)
        + claim(db, worker, limit=10)
    ]
    assert order == [early_urgent, late_urgent, old_normal, new_normal, lazy]


def test_one_claim_returns_its_rows_in_the_order_they_are_to_start(db, sql):
    """A worker starts a batch in the order the claim returns it; an UPDATE returns rows in
    no particular order (with a hash join on a table of some size, a worker ran a batch's
    priority-9 executions before its priority-2 ones)."""
    make_task(db, now=T0)
    worker = register(db)
    sql.execute(
        "SELECT pgsched.enqueue_many_v2('job', (SELECT jsonb_agg('{}'::jsonb) FROM generate_series(1, 2000)),"
        " %s, 9)",
        (T0 - timedelta(hours=1),),
    )
    urgent = [enqueue(db, run_at=T0 - timedelta(minutes=1), priority=2) for _ in range(5)]
    older_urgent = enqueue(db, run_at=T0 - timedelta(minutes=2), priority=2)
    sql.execute("ANALYZE pgsched.execution")
    rows = claim(db, worker, limit=200, now=T0)
    assert [r["id"] for r in rows[:6]] == [older_urgent, *urgent]
    assert [r["id"] for r in rows[6:]] == sorted(r["id"] for r in rows[6:])


def test_params_come_as_json_text_and_a_non_object_as_an_empty_object(db, sql):
    """execution_claim returns params as JSON text for the slot to decode; a value that is
    not an object (only a raw INSERT into pgsched.execution can store one) comes as {}, as
    the worker treated null and [] before, so a Python handler is still called with no
    params instead of failing on func(**None)."""
    task = make_task(db, now=T0)
    worker = register(db)
    stored = [
        '{"a": [1, 2], "\u00e9": 123456789012345678901234567890}',
        "null",
        "[]",
        '"text"',
        "5",
    ]
    for value in stored:
        make_execution(sql, task["id"], scheduled_at=T0, params=value)
    rows = sorted(claim(db, worker, now=T0), key=lambda r: r["id"])
    assert [json.loads(r["params"]) for r in rows] == [
        {"a": [1, 2], "\u00e9": 123456789012345678901234567890},
        {},
        {},
        {},
        {},
    ]


def test_claim_marks_rows_running_for_this_worker(db, sql):
    make_task(db, params={"n": 1}, max_attempts=3, timeout_seconds=5, now=T0)
    worker = register(db)
    execution_id = enqueue(db, run_at=T0)
    now = T0 + timedelta(seconds=3)
    [row] = claim(db, worker, now=now)
    assert row["id"] == execution_id
    assert (row["attempt"], row["max_attempts"], row["started_at"]) == (1, 3, now)
    assert (row["task_name"], row["handler_kind"], row["command"]) == ("job", "shell", "true")
    assert json.loads(row["params"]) == {"n": 1}  # JSON text: the slot that runs it decodes it
    assert row["timeout_seconds"] == 5
    stored = live(sql, execution_id)
    assert stored["state"] == "running"
    assert stored["attempt"] == 1
    assert stored["worker_id"] == worker
    assert stored["started_at"] == now
    assert claim(db, worker, now=now) == []  # running rows are not claimed again


def test_a_claim_sends_a_task_definition_only_when_the_claimer_does_not_hold_it(db, sql):
    """TaskDefinitions: the first claim of a task carries its definition; later claims of
    the unchanged task carry none (the worker's copy is used); a change to the task is
    sent with the next claim."""
    make_task(db, env={"A": "1"}, retry_policy="linear", no_retry_exit_codes=[3], now=T0)
    worker = register(db)
    for _ in range(3):
        enqueue(db, run_at=T0)
    held = TaskDefinitions()
    [first] = held.claim(db, queues=["default"], limit=1, worker_id=worker, now=T0)
    assert (
        first["command"],
        first["env"],
        first["retry_policy"],
        first["no_retry_exit_codes"],
    ) == ("true", {"A": "1"}, "linear", [3])
    version = sql.execute(
        "SELECT xmin::text::bigint AS v FROM pgsched.task WHERE name = 'job'"
    ).fetchone()["v"]
    [raw] = db.many(
        "execution_claim",
        queues=["default"],
        tenants=None,
        limit=1,
        worker_id=worker,
        now=T0,
        known_task_ids=[first["task_id"]],
        known_task_versions=[version],
    )
    assert raw["task"] is None and raw["task_version"] == version  # not sent again
    tasks.update(db, "job", {"command": "echo v2"})
    [second] = held.claim(db, queues=["default"], limit=1, worker_id=worker, now=T0)
    assert (second["command"], second["env"], second["task_name"]) == ("echo v2", {"A": "1"}, "job")


def test_claimed_definitions_stay_current_past_the_held_limit_and_after_updates(db, sql):
    """More tasks than a claimer holds (held_max 8 here, 12 tasks): after claims that evict
    and re-read, and updates to some tasks between claims, every claimed row carries its
    task's definition as stored at the claim, never another task's or an older one."""
    sql.execute("""INSERT INTO pgsched.task (name, handler_kind, command, env)
                   SELECT 'job-' || i, 'shell', 'echo ' || i, jsonb_build_object('N', i::text)
                     FROM generate_series(1, 12) i""")
    worker = register(db)
    held = TaskDefinitions(held_max=8)
    for round_ in range(4):
        for i in range(1, 13):
            enqueue(db, f"job-{i}", run_at=T0)
        for i in range(1 + round_, 13, 3):  # a different third of the tasks each round
            tasks.update(db, f"job-{i}", {"command": f"echo {i} v{round_}"})
        rows = held.claim(db, queues=["default"], limit=5, worker_id=worker, now=T0)
        rows += held.claim(db, queues=["default"], limit=100, worker_id=worker, now=T0)
        stored = {
            r["id"]: (r["command"], r["env"])
            for r in sql.execute("SELECT t.id, t.command, t.env FROM pgsched.task t")
        }
        assert len(rows) == 12
        assert {r["task_id"]: (r["command"], r["env"]) for r in rows} == {
            r["task_id"]: stored[r["task_id"]] for r in rows
        }, round_
        assert len(held._held) <= 8


def test_claim_with_the_database_clock(db, sql):
    make_task(db, now=T0)
    worker = register(db)
    execution_id = enqueue(db, run_at=T0)
    before = sql.execute("SELECT now() AS t").fetchone()["t"]
    [row] = claim(db, worker, now=None)
    assert row["id"] == execution_id
    assert row["started_at"] >= before


def test_future_run_at_is_not_claimed_until_it_is_due(db):
    make_task(db, now=T0)
    worker = register(db)
    future = enqueue(db, run_at=T0 + timedelta(minutes=10))
    assert claim(db, worker, now=T0) == []
    assert claim(db, worker, now=T0 + timedelta(minutes=9, seconds=59)) == []
    assert [r["id"] for r in claim(db, worker, now=T0 + timedelta(minutes=10))] == [future]


def test_future_run_at_is_not_claimed_with_the_database_clock(db):
    make_task(db, now=T0)
    worker = register(db)
    enqueue(db, run_at=datetime.now(UTC) + timedelta(hours=1))
    assert claim(db, worker, now=None) == []


def test_claim_only_takes_the_asked_queues(db, sql):
    make_task(db, "a", queue="alpha", now=T0)
    make_task(db, "b", queue="beta", now=T0)
    make_task(db, "c", queue="gamma", now=T0)
    a = enqueue(db, "a", run_at=T0)
    b = enqueue(db, "b", run_at=T0)
    c = enqueue(db, "c", run_at=T0)
    worker = register(db, queues=("alpha", "gamma"))
    assert claim(db, worker, queues=("beta-not",), now=T0) == []
    assert sorted(r["id"] for r in claim(db, worker, queues=("alpha", "gamma"), now=T0)) == [a, c]
    assert live(sql, b)["state"] == "pending"
    assert [r["id"] for r in claim(db, worker, queues=("beta",), now=T0)] == [b]


def test_claim_honours_the_limit(db, sql):
    make_task(db, now=T0)
    worker = register(db)
    for i in range(7):
        enqueue(db, run_at=T0 - timedelta(seconds=i))
    assert len(claim(db, worker, limit=3, now=T0)) == 3
    assert (
        sql.execute(
            "SELECT count(*) AS n FROM pgsched.execution WHERE state = 'running'"
        ).fetchone()["n"]
        == 3
    )
    assert len(claim(db, worker, limit=3, now=T0)) == 3
    assert len(claim(db, worker, limit=3, now=T0)) == 1
    assert claim(db, worker, limit=3, now=T0) == []


@pytest.mark.clone("claims from several threads at once")
def test_concurrent_claims_never_share_an_execution(db, sql):
    make_task(db, now=T0)
    total = 200
    sql.execute(
        "SELECT pgsched.enqueue_v1('job', jsonb_build_object('i', g), %s - g * interval '1 ms') "
        "FROM generate_series(1, %s) g",
        [T0, total],
    )
    workers = [register(db, f"w{i}") for i in range(4)]
    start = threading.Barrier(len(workers))

    def run(worker: int) -> list[int]:
        start.wait(10)  # all claim at once
        ids = []
        while rows := claim(db, worker, limit=7, now=T0):
            ids.extend(r["id"] for r in rows)
        return ids

    with ThreadPoolExecutor(len(workers)) as pool:
        futures = {w: pool.submit(run, w) for w in workers}
        claimed = {
            w: f.result(timeout=60) for w, f in futures.items()
        }  # re-raises a thread's error
    every = [i for ids in claimed.values() for i in ids]
    assert len(every) == total
    assert len(set(every)) == total  # no execution was claimed twice
    owners = sql.execute("SELECT id, worker_id, attempt, state FROM pgsched.execution").fetchall()
    assert all(r["state"] == "running" and r["attempt"] == 1 for r in owners)
    assert {r["id"]: r["worker_id"] for r in owners} == {
        i: w for w, ids in claimed.items() for i in ids
    }


def finish(
    db,
    execution_id: int,
    lease_id: int | None,
    state: str = "succeeded",
    finished_at: datetime = T0 + timedelta(minutes=1),
    **extra,
) -> int:
    values = {"exit_code": 0, "error": None, "result": None} | extra
    return db.exec(
        "execution_finish",
        id=execution_id,
        lease_id=lease_id,
        state=state,
        finished_at=finished_at,
        **values,
    )


def test_finish_moves_a_running_execution_to_history(db, sql):
    task = make_task(db, params={"n": 1}, now=T0)
    worker = register(db)
    execution_id = enqueue(db, run_at=T0)
    (claimed,) = claim(db, worker, now=T0 + timedelta(seconds=1))
    assert (
        finish(
            db,
            execution_id,
            claimed["lease_id"],
            state="failed",
            exit_code=3,
            error="exited with code 3",
            result=Jsonb({"rows": 2}),
        )
        == 1
    )
    assert live(sql, execution_id) is None
    row = sql.execute(
        "SELECT * FROM pgsched.execution_history WHERE id = %s", [execution_id]
    ).fetchone()
    assert row["task_id"] == task["id"]
    assert row["state"] == "failed"
    assert (row["exit_code"], row["error"], row["result"]) == (3, "exited with code 3", {"rows": 2})
    assert (row["attempt"], row["worker_id"]) == (1, worker)
    assert row["started_at"] == T0 + timedelta(seconds=1)
    assert row["finished_at"] == T0 + timedelta(minutes=1)
    assert (row["scheduled_at"], row["run_at"], row["params"], row["trigger"]) == (
        T0,
        T0,
        {"n": 1},
        "manual",
    )


def test_finish_without_the_current_lease_changes_nothing(db, sql):
    make_task(db, now=T0)
    worker = register(db, "holder")
    execution_id = enqueue(db, run_at=T0)
    (claimed,) = claim(db, worker, now=T0)
    before = live(sql, execution_id)
    assert before["lease_id"] == claimed["lease_id"] is not None
    for stale in (claimed["lease_id"] - 1, claimed["lease_id"] + 1, None):
        assert finish(db, execution_id, stale) == 0
    assert live(sql, execution_id) == before
    assert sql.execute("SELECT count(*) AS n FROM pgsched.execution_history").fetchone()["n"] == 0
    assert finish(db, execution_id, claimed["lease_id"]) == 1  # the holder still can


def test_every_claim_gets_a_new_lease(db, sql):
    make_task(db, now=T0)
    worker = register(db)
    ids = [enqueue(db, run_at=T0) for _ in range(3)]
    leases = [r["lease_id"] for r in claim(db, worker, now=T0)]
    assert len(set(leases)) == 3 and None not in leases
    sql.execute(
        "UPDATE pgsched.execution SET state = 'pending', lease_id = NULL WHERE id = %s", [ids[0]]
    )
    (again,) = claim(db, worker, now=T0)
    assert again["id"] == ids[0] and again["lease_id"] not in leases


def test_a_dead_worker_claims_nothing(db, sql):
    make_task(db, now=T0)
    worker = register(db)
    enqueue(db, run_at=T0)
    sql.execute("UPDATE pgsched.worker SET state = 'dead' WHERE id = %s", [worker])
    assert claim(db, worker, now=T0) == []
    assert sql.execute("SELECT state FROM pgsched.execution").fetchone()["state"] == "pending"


def test_finish_of_a_pending_execution_changes_nothing(db, sql):
    make_task(db, now=T0)
    worker = register(db)
    execution_id = enqueue(db, run_at=T0)
    sql.execute(
        "UPDATE pgsched.execution SET worker_id = %s, attempt = 1 WHERE id = %s",
        [worker, execution_id],
    )
    assert finish(db, execution_id, None) == 0
    assert live(sql, execution_id)["state"] == "pending"


def test_a_finished_execution_is_not_claimed_again(db):
    make_task(db, now=T0)
    worker = register(db)
    execution_id = enqueue(db, run_at=T0)
    (claimed,) = claim(db, worker, now=T0)
    assert finish(db, execution_id, claimed["lease_id"]) == 1
    assert finish(db, execution_id, claimed["lease_id"]) == 0  # only once
    assert claim(db, worker, now=T0 + timedelta(days=1)) == []


def test_a_worker_frozen_inside_a_transaction_does_not_keep_its_execution_from_the_rescue(
    dsn, db, sql
):
    """A worker stopped (SIGSTOP, a paused VM) between two statements of a transaction holds
    its execution's row lock: the rescue (SKIP LOCKED) would pass the execution by for as long
    as the worker stays frozen. The worker's pool ends such a transaction on the server."""
    make_task(db, now=T0)
    execution = enqueue(db, run_at=T0)
    worker = register(db)
    [row] = claim(db, worker, now=T0)
    frozen = Database.connect(dsn, max_size=1, idle_in_transaction_timeout=0.5)
    try:
        with pytest.raises(PgschedError):
            with frozen.transaction() as tx:  # as _store_outcome begins a retry
                assert (
                    tx.one("execution_cancel_requested", id=execution, lease_id=row["lease_id"])
                    is not None
                )
                sql.execute(
                    "UPDATE pgsched.worker SET last_heartbeat_at = now() - interval '1 hour' WHERE id = %s",
                    (worker,),
                )
                rescued = wait_until(
                    lambda: sql.execute("SELECT * FROM pgsched_internal.rescue_v1()").fetchall(),
                    timeout=10,
                    message="the frozen transaction ended and its execution rescued",
                )
        assert [(r["execution_id"], r["outcome"]) for r in rescued] == [(execution, "requeued")]
    finally:
        frozen.close()

"""The rescue takes back what no live worker reports, whatever the worker registry holds
(migration 0015), and the leader's maintenance prunes rows of long-dead workers
(``scheduler.prune_workers``). Claims, heartbeats and the rescue are the real statements,
on the database's clock."""

from __future__ import annotations

from pgsched import scheduler
from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec

from .test_claim import claim, register


def running(db, name: str, worker: int, n: int = 1) -> list[dict]:
    """``n`` executions of a new task, claimed now (the database's clock) by ``worker``."""
    tasks.create(db, TaskSpec(name=name, command="true"))
    for _ in range(n):
        tasks.trigger(db, name)
    return claim(db, worker, limit=n)


def report(db, worker: int, held: list[int]) -> None:
    """One heartbeat of ``worker`` saying it holds ``held``."""
    beat = db.one(
        "worker_heartbeat", id=worker, running=len(held), held=held, host_time=None, round_trip=None
    )
    assert beat["alive"]


def live(sql, ident: int) -> dict:
    return sql.execute(
        "SELECT state, worker_id FROM pgsched.execution WHERE id = %s", [ident]
    ).fetchone()


def test_an_execution_whose_worker_row_was_deleted_is_rescued(db, sql):
    worker = register(db)
    [held] = running(db, "orphan", worker)
    sql.execute("DELETE FROM pgsched.worker WHERE id = %s", [worker])  # an operator's clean-up, say
    assert [(r["execution_id"], r["worker_id"], r["outcome"]) for r in scheduler.rescue(db)] == [
        (held["id"], worker, "requeued")
    ]
    assert live(sql, held["id"]) == {"state": "pending", "worker_id": None}
    [lost] = sql.execute(
        "SELECT state, error FROM pgsched.execution_attempt WHERE execution_id = %s", [held["id"]]
    ).fetchall()
    assert lost["state"] == "lost" and f"worker {worker} was lost" in lost["error"]


def test_a_live_worker_that_leaves_an_execution_out_of_two_reports_loses_it_and_keeps_what_it_reports(
    db, sql
):
    worker = register(db)
    unknown, known = running(
        db, "job", worker, n=2
    )  # its claim's reply "never arrived" for the first
    report(db, worker, [known["id"]])  # one report without it: its claim might still be on its way
    assert scheduler.rescue(db) == []
    report(db, worker, [known["id"]])  # the second: it was claimed before the first report
    rescued = scheduler.rescue(db)
    assert [(r["execution_id"], r["worker_id"], r["outcome"]) for r in rescued] == [
        (unknown["id"], worker, "requeued")
    ]
    assert live(sql, unknown["id"]) == {"state": "pending", "worker_id": None}
    assert live(sql, known["id"]) == {"state": "running", "worker_id": worker}
    [lost] = sql.execute(
        "SELECT error FROM pgsched.execution_attempt WHERE execution_id = %s", [unknown["id"]]
    ).fetchall()
    assert "alive, no longer reports" in lost["error"]
    assert (
        sql.execute("SELECT state FROM pgsched.worker WHERE id = %s", [worker]).fetchone()["state"]
        == "running"
    )
    report(db, worker, [known["id"]])
    assert scheduler.rescue(db) == []  # what it reports stays its own, however many reports


def test_pruning_removes_only_workers_stopped_long_ago_that_hold_nothing(db, sql):
    old_stopped, old_dead, old_holding, recent, alive = (
        register(db, name=n) for n in ("old-stopped", "old-dead", "old-holding", "recent", "alive")
    )
    [held] = running(db, "held", old_holding)
    sql.execute(
        "UPDATE pgsched.worker SET state = 'stopped', stopped_at = now() - interval '8 days' "
        "WHERE id = ANY(%s)",
        [[old_stopped, old_holding]],
    )
    sql.execute(
        "UPDATE pgsched.worker SET state = 'dead', stopped_at = now() - interval '8 days' WHERE id = %s",
        [old_dead],
    )
    sql.execute(
        "UPDATE pgsched.worker SET state = 'stopped', stopped_at = now() - interval '6 days' WHERE id = %s",
        [recent],
    )
    sql.execute(
        "UPDATE pgsched.worker SET started_at = now() - interval '30 days' WHERE id = %s", [alive]
    )
    assert scheduler.prune_workers(db) == 2
    left = {r["id"] for r in sql.execute("SELECT id FROM pgsched.worker")}
    assert left == {old_holding, recent, alive}
    # The one that still holds a running execution is kept until the rescue has taken it back.
    assert [r["outcome"] for r in scheduler.rescue(db)] == ["requeued"]
    assert live(sql, held["id"])["state"] == "pending"
    assert scheduler.prune_workers(db) == 1
    assert {r["id"] for r in sql.execute("SELECT id FROM pgsched.worker")} == {recent, alive}

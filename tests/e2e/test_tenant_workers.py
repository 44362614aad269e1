"""Workers bound to tenants, as real ``pgsched worker`` processes (issue 17, item 4): tenants
a and b each have a task on a queue named ``q``; a worker ``--tenant a`` runs only a's
executions and b's stay pending, untouched; ``--all-tenants`` runs both; without either a
worker serves the global ``--tenant`` ($PGSCHED_TENANT, else ``default``) alone. The worker
row and ``pgsched status --json`` say which tenants each worker serves."""

from __future__ import annotations

import json
import time

import pytest

from pgsched.stores import tasks

from ..factories import make_task
from ..helpers import cli, wait_until
from ..tenancy import two_tenants

pytestmark = pytest.mark.e2e


def enqueue(db, tenant: str, n: int = 3) -> list[int]:
    return [tasks.trigger(db, "job", tenant=tenant) for _ in range(n)]


def rows(sql, ids: list[int]) -> list[dict]:
    """The live and finished rows of ``ids``: (tenant, state, worker_id, attempt)."""
    return sql.execute(
        "SELECT id, tenant, state, worker_id, attempt FROM pgsched.execution_all "
        "WHERE id = ANY(%s) ORDER BY id",
        [ids],
    ).fetchall()


def succeeded(sql, ids: list[int]) -> bool:
    found = rows(sql, ids)
    return len(found) == len(ids) and all(r["state"] == "succeeded" for r in found)


def untouched(sql, ids: list[int]) -> bool:
    """Pending, never claimed (no attempt, no worker), no attempt row."""
    found = rows(sql, ids)
    attempts = sql.execute(
        "SELECT count(*) AS n FROM pgsched.execution_attempt WHERE execution_id = ANY(%s)", [ids]
    ).fetchone()["n"]
    return (
        len(found) == len(ids)
        and all((r["state"], r["worker_id"], r["attempt"]) == ("pending", None, 0) for r in found)
        and attempts == 0
    )


def worker_row(sql, proc) -> dict:
    return wait_until(
        lambda: sql.execute(
            "SELECT id, tenants FROM pgsched.worker WHERE pid = %s AND state = 'running'",
            [proc.proc.pid],
        ).fetchone(),
        message="the worker registered",
    )


def both_tenants(db) -> None:
    for tenant in ("a", "b"):
        make_task(db, "job", tenant=tenant, queue="q", command="echo $PGSCHED_TASK")


def test_a_worker_of_tenant_a_runs_only_as_executions_and_one_of_every_tenant_runs_bs(
    dsn, db, sql, start
):
    both_tenants(db)
    theirs = enqueue(db, "b")  # older than a's: first in the queue 'q', whatever the tenant
    mine = enqueue(db, "a")
    a_worker = start("worker", "--tenant", "a", "--queue", "q", "--poll-interval", "0.2")
    assert worker_row(sql, a_worker)["tenants"] == ["a"]
    wait_until(lambda: succeeded(sql, mine), timeout=30, message="a's executions succeed")
    # Time passes on purpose: the worker polls 5 times a second and b's executions were
    # ready before a's; a claim that took them would have done so long before now.
    time.sleep(1.0)
    assert untouched(sql, theirs), rows(sql, theirs)
    status = json.loads(cli(dsn, "status", "--json").stdout)
    assert [w["tenants"] for w in status["workers"]] == [["a"]]
    assert status["unserved_queues"] == [{"tenant": "b", "queue": "q"}]
    later = enqueue(db, "a", 1)  # a's new work still reaches it while b's waits
    wait_until(lambda: succeeded(sql, later), timeout=30, message="a's next execution")
    assert untouched(sql, theirs)

    every = start("worker", "--all-tenants", "--queue", "q", "--poll-interval", "0.2")
    assert worker_row(sql, every)["tenants"] is None
    wait_until(lambda: succeeded(sql, theirs), timeout=30, message="b's executions succeed")
    assert {r["worker_id"] for r in rows(sql, theirs)} == {worker_row(sql, every)["id"]}
    assert "tenants=(all)" in cli(dsn, "status").stdout


def test_without_a_tenant_a_worker_serves_the_global_tenant_alone(dsn, db, sql, start):
    make_task(db, "job", queue="q")  # tenant 'default'
    both_tenants(db)
    default, of_a, of_b = enqueue(db, "default", 2), enqueue(db, "a", 2), enqueue(db, "b", 2)
    plain = start("worker", "--queue", "q", "--poll-interval", "0.2")
    assert worker_row(sql, plain)["tenants"] == ["default"]
    wait_until(lambda: succeeded(sql, default), timeout=30, message="default's executions")
    by_env = start("worker", "--queue", "q", "--poll-interval", "0.2", env={"PGSCHED_TENANT": "b"})
    assert worker_row(sql, by_env)["tenants"] == ["b"]
    wait_until(lambda: succeeded(sql, of_b), timeout=30, message="b's executions")
    time.sleep(1.0)  # on purpose: two workers polling 5 times a second had their chance at a's
    assert untouched(sql, of_a)


def test_serving_every_tenant_and_named_tenants_at_once_is_refused(dsn):
    out = cli(dsn, "worker", "--tenant", "a", "--all-tenants", check=False)
    assert out.returncode != 0
    assert "--all-tenants serves every tenant; drop --tenant a" in out.stderr


def test_on_a_tenants_engine_login_a_worker_serves_that_tenant_and_refuses_another(dsn, sql, start):
    """A login mapped to tenant A (migration 0018) sees no other tenant's rows: a worker on it
    serves A without being told, and one told to serve B or every tenant refuses to start
    (it would claim nothing of them) instead of idling."""
    with two_tenants(dsn) as (a, b, _):
        worker = start("worker", "--poll-interval", "0.2", env={"PGSCHED_DSN": a.engine})
        assert worker_row(sql, worker)["tenants"] == [a.name]
        wait_until(lambda: succeeded(sql, [a.pending_id]), timeout=30, message="a's execution")
        for asked in (["--tenant", b.name], ["--all-tenants"]):
            refused = cli(None, "worker", *asked, check=False, env={"PGSCHED_DSN": a.engine})
            assert refused.returncode == 1, refused.stderr
            assert f"acts for tenant {a.name!r} only" in refused.stderr
        worker.stop()
        assert untouched(sql, [b.pending_id])

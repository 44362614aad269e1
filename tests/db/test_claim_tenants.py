"""Claims by tenant (migration 0020, execution_claim, execution_next_due): a queue is named
within its tenant, so a worker of tenant A claims (A, q) and never B's executions on a
queue of the same name; a worker of every tenant claims both; another tenant's backlog
costs a tenant-bound claim nothing (buffers, EXPLAIN ANALYZE); an INSERT's wake-up names
its tenant and a worker of other tenants lets it pass."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest

from pgsched.stores import tasks
from pgsched.worker.claimer import wakes
from pgsched.worker.claims import TaskDefinitions

from ..factories import T0, make_task
from ..helpers import notifications_until_marker
from .claim_plans import explain_claim
from .test_claim_queues import flat

pytestmark = pytest.mark.rolled_back

BACKLOG = 100_000


def register(db, tenants: list[str] | None, queues=("q",)) -> int:
    row = db.one(
        "worker_register",
        name="w",
        hostname="testhost",
        pid=4242,
        queues=list(queues),
        tenants=tenants,
        concurrency=4,
        heartbeat_interval=5.0,
        host_time=None,
        round_trip=None,
    )
    return row["id"]


def claim(db, worker: int, tenants: list[str] | None, limit: int = 10, queues=("q",)):
    return TaskDefinitions().claim(
        db, queues=list(queues), tenants=tenants, limit=limit, worker_id=worker, now=T0
    )


def two_tenants(db, n: int = 3) -> dict[str, list[int]]:
    """Task 'job' on queue 'q' in tenants a and b, with ``n`` ready executions each."""
    ids: dict[str, list[int]] = {}
    for tenant in ("a", "b"):
        make_task(db, "job", tenant=tenant, queue="q", now=T0)
        ids[tenant] = [
            tasks.trigger(db, "job", tenant=tenant, run_at=T0 - timedelta(minutes=5 - k))
            for k in range(n)
        ]
    return ids


def states(sql, ids: list[int]) -> set[str]:
    return {
        r["state"]
        for r in sql.execute("SELECT state FROM pgsched.execution WHERE id = ANY(%s)", [ids])
    }


def test_a_worker_of_tenant_a_claims_only_as_queue_and_bs_stay_pending(db, sql):
    ids = two_tenants(db)
    worker = register(db, ["a"])
    rows = claim(db, worker, ["a"])
    assert sorted(r["id"] for r in rows) == ids["a"]
    assert {r["tenant"] for r in rows} == {"a"}
    assert claim(db, worker, ["a"]) == []  # B's ready executions on 'q' are not A's
    assert states(sql, ids["b"]) == {"pending"}
    assert states(sql, ids["a"]) == {"running"}


def test_a_worker_of_every_tenant_claims_both_in_one_order(db, sql):
    two_tenants(db)
    worker = register(db, None)
    rows = claim(db, worker, None)
    expected = [
        r["id"]
        for r in sql.execute("SELECT id FROM pgsched.execution ORDER BY priority, run_at, id")
    ]
    assert [r["id"] for r in rows] == expected and len(expected) == 6
    assert {r["tenant"] for r in rows} == {"a", "b"}


def test_a_worker_of_two_named_tenants_claims_both_and_no_third(db, sql):
    ids = two_tenants(db)
    make_task(db, "job", tenant="c", queue="q", now=T0)
    theirs = tasks.trigger(db, "job", tenant="c", run_at=T0 - timedelta(hours=1))  # oldest
    worker = register(db, ["a", "b"])
    rows = claim(db, worker, ["b", "a", "b"])
    assert sorted(r["id"] for r in rows) == sorted(ids["a"] + ids["b"])
    order = sql.execute(
        "SELECT id FROM pgsched.execution WHERE tenant <> 'c' ORDER BY priority, run_at, id"
    )
    assert [r["id"] for r in rows] == [r["id"] for r in order]  # a's and b's interleaved
    assert states(sql, [theirs]) == {"pending"}


def test_the_next_due_of_a_tenant_bound_worker_is_its_tenants_own(db):
    make_task(db, "job", tenant="a", queue="q", now=T0)
    make_task(db, "job", tenant="b", queue="q", now=T0)
    tasks.trigger(db, "job", tenant="b", run_at=db.now() + timedelta(seconds=5))

    def due(tenants):
        return db.one("execution_next_due", queues=["q"], tenants=tenants)

    assert due(["a"]) == {
        "seconds": None,
        "future_seconds": None,
        "free_seconds": None,
    }  # nothing of A's pending
    assert 3 < due(None)["seconds"] <= 5 and 3 < due(["a", "b"])["future_seconds"] <= 5
    tasks.trigger(db, "job", tenant="a", run_at=db.now() + timedelta(seconds=60))
    assert 55 < due(["a"])["seconds"] <= 60


def test_an_inserts_wake_up_names_its_tenant_and_other_tenants_workers_let_it_pass(dsn, db, sql):
    make_task(db, "job", tenant="a", queue="q", now=T0)
    make_task(db, "job", tenant="b", queue="q", now=T0)
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute("LISTEN pgsched_execution")
        tasks.trigger(db, "job", tenant="b")
        assert notifications_until_marker(listener, sql) == ["b"]
        # one statement of both tenants' executions: one wake-up per tenant
        sql.execute(
            "INSERT INTO pgsched.execution (task_id, tenant, scheduled_at, run_at, queue) "
            "SELECT id, tenant, now(), now(), 'q' FROM pgsched.task WHERE name = 'job'"
        )
        assert sorted(notifications_until_marker(listener, sql)) == ["a", "b"]
    assert not wakes("b", ("a",))
    assert wakes("a", ("a",)) and wakes("b", None)
    assert wakes("", ("a",))  # a retry's, a hand-back's, a rescue's: may be anyone's


def fill(sql, tenant: str, n: int, *, oldest) -> None:
    sql.execute(
        """INSERT INTO pgsched.execution (task_id, tenant, scheduled_at, run_at, queue)
                   SELECT t.id, t.tenant, %(oldest)s, %(oldest)s + g * interval '1 ms', 'q'
                     FROM pgsched.task t, generate_series(1, %(n)s) g
                    WHERE t.name = 'job' AND t.tenant = %(tenant)s""",
        {"tenant": tenant, "n": n, "oldest": oldest},
    )


def claim_plan(dsn: str, worker: int, tenants: list[str] | None) -> tuple[dict, list[int]]:
    """EXPLAIN (ANALYZE, BUFFERS) of one claim (rolled back): the buffers of ``picked``
    and of the whole statement, the indexes its scans used, and the ids it claimed."""
    params = {
        "queues": ["q"],
        "tenants": tenants,
        "limit": 10,
        "worker_id": worker,
        "now": T0,
        "known_task_ids": [],
        "known_task_versions": [],
    }
    return explain_claim(dsn, params)


def test_another_tenants_backlog_on_the_same_queue_costs_a_tenant_bound_claim_nothing(dsn, db, sql):
    """100,000 ready executions of tenant b on 'q', older than a's: a claim of a worker of
    tenant a reads a's fronts alone (execution_ready_tenant_idx) and touches what it touched
    without them; so does a worker of every tenant, which takes from both."""
    make_task(db, "job", tenant="a", queue="q", now=T0)
    make_task(db, "job", tenant="b", queue="q", now=T0)
    fill(sql, "a", 50, oldest=T0 - timedelta(hours=1))
    worker = register(db, ["a"])
    sql.execute("VACUUM ANALYZE pgsched.execution")
    before, ids_before = claim_plan(dsn, worker, ["a"])
    fill(sql, "b", BACKLOG, oldest=T0 - timedelta(days=1))
    sql.execute("VACUUM ANALYZE pgsched.execution")
    after, ids_after = claim_plan(dsn, worker, ["a"])
    every, ids_every = claim_plan(dsn, worker, None)
    print("tenant a alone", before, "beside b's backlog", after, "every tenant", every)
    assert ids_after == ids_before and len(ids_before) == 10
    assert flat(before, after, 10, 1), (before, after)
    on_executions = {i for i in after["indexes"] if i.startswith("execution")}
    assert on_executions <= {"execution_ready_tenant_idx", "execution_pkey"}
    # a worker of every tenant reads each tenant's fronts too (the fair share, migration
    # 0021): b's backlog is older, yet the claim takes half from a
    assert {i for i in every["indexes"] if i.startswith("execution")} <= {
        "execution_ready_tenant_idx",
        "execution_pkey",  # the claimed rows read back by id (0026)
    }
    tenants_of = sql.execute(
        "SELECT tenant, count(*) AS n FROM pgsched.execution WHERE id = ANY(%s) GROUP BY tenant"
        " ORDER BY tenant",
        [ids_every],
    ).fetchall()
    assert tenants_of == [{"tenant": "a", "n": 5}, {"tenant": "b", "n": 5}]

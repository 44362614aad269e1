"""What a tenant's engine login may write on pgsched.execution itself (migration 0028): not
the claim's part (moving rows to running, what the claim wrote on a running row), not past
the enqueue's unique windows, and compute is counted by the database's clock whatever its
worker reports; every way the worker writes (sql/execution.sql) still works on such a login.
Every test acts as real tenant logins (tests/tenancy.py)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg import errors as pg_errors

from pgsched.db import Session
from pgsched.worker.completer import finish_params

from ..tenancy import login as _as
from ..tenancy import login_dsn, own_worker
from .test_group_commit import item


def claim(conn: psycopg.Connection, worker: int, limit: int = 10) -> list[dict]:
    return Session(conn).many(
        "execution_claim",
        worker_id=worker,
        queues=["default"],
        tenants=None,
        limit=limit,
        now=None,
        known_task_ids=None,
        known_task_versions=None,
    )


def computed(sql, tenant: str) -> float:
    """Compute seconds counted for ``tenant`` and not yet taken by the usage job."""
    return sql.execute(
        "SELECT coalesce(sum(compute_seconds), 0) AS s FROM pgsched.usage_delta WHERE tenant = %s",
        [tenant],
    ).fetchone()["s"]


RAW = (
    "INSERT INTO pgsched.execution (tenant, task_id, scheduled_at, run_at, trigger, queue, params) "
    "VALUES (%s, %s, now(), now(), 'api', 'default', '{}') RETURNING id, windowed"
)


def test_a_tenants_engine_login_starts_nothing_but_through_the_claim(sql, ab):
    _, b, _ = ab
    with _as(b.engine) as c:
        worker = own_worker(c, b.name)
        with pytest.raises(pg_errors.InsufficientPrivilege, match=r"to running: the claim"):
            c.execute(
                "UPDATE pgsched.execution SET state = 'running', worker_id = %s, attempt = 1, "
                "started_at = now(), lease_id = 1 WHERE id = %s",
                [worker, b.pending_id],
            )
        with pytest.raises(
            pg_errors.InsufficientPrivilege, match="insert an execution in state 'running'"
        ):
            c.execute(
                "INSERT INTO pgsched.execution (tenant, task_id, scheduled_at, run_at, state, "
                "worker_id, attempt, started_at, lease_id) "
                "VALUES (%s, %s, now(), now(), 'running', %s, 1, now(), 1)",
                [b.name, b.task_id, worker],
            )
        # ON CONFLICT DO UPDATE is an UPDATE: held alike
        with pytest.raises(pg_errors.InsufficientPrivilege):
            c.execute(
                "INSERT INTO pgsched.execution (id, tenant, task_id, scheduled_at, run_at) "
                "VALUES (%s, %s, %s, now(), now()) "
                "ON CONFLICT (id) DO UPDATE SET state = 'running', started_at = now()",
                [b.pending_id, b.name, b.task_id],
            )
        claimed = claim(c, worker)  # the claim itself, as the same login
    assert b.pending_id in {r["id"] for r in claimed}
    assert sql.execute(
        "SELECT hour_starts FROM pgsched.tenant_usage WHERE tenant = %s", [b.name]
    ).fetchone()["hour_starts"] == len(claimed)


def test_what_the_claim_wrote_on_a_running_row_stays_the_claims(sql, ab):
    a, b, _ = ab
    sql.execute(
        "UPDATE pgsched.task SET concurrency_key = 'k' WHERE tenant = %s AND name = 'job'",
        [b.name],
    )
    with _as(b.engine) as c:
        worker = own_worker(c, b.name)
        [row] = [r for r in claim(c, worker) if r["id"] == b.pending_id]
        for change in (
            "started_at = now() + interval '1 hour'",
            "started_at = NULL",
            "attempt = 0",
            "lease_id = lease_id + 1",
            "queue = 'elsewhere'",
            "concurrency_key = 'other'",
        ):
            with pytest.raises(pg_errors.InsufficientPrivilege, match="of running execution"):
                c.execute(f"UPDATE pgsched.execution SET {change} WHERE id = %s", [row["id"]])
        # a pending row: not to another task (a windowed one's, past its window), not out
        # of its window
        other = c.execute(
            "SELECT id FROM pgsched.task WHERE tenant = %s AND name <> 'job' LIMIT 1", [b.name]
        ).fetchone()["id"]
        made = c.execute(RAW, [b.name, b.task_id]).fetchone()["id"]
        with pytest.raises(pg_errors.InsufficientPrivilege, match="to another task"):
            c.execute("UPDATE pgsched.execution SET task_id = %s WHERE id = %s", [other, made])
        sql.execute("UPDATE pgsched.execution SET windowed = true WHERE id = %s", [made])
        with pytest.raises(pg_errors.InsufficientPrivilege, match="unique window"):
            c.execute("UPDATE pgsched.execution SET windowed = false WHERE id = %s", [made])
        # what a worker does write: its start confirmed, the row's own fields otherwise
        assert Session(c).exec("execution_confirm_start", id=row["id"], lease_id=row["lease_id"])
        c.execute("UPDATE pgsched.execution SET priority = 1, run_at = now() WHERE id = %s", [made])
    after = sql.execute(
        "SELECT started_at, attempt, lease_id, start_confirmed_at IS NOT NULL AS confirmed "
        "FROM pgsched.execution WHERE id = %s",
        [row["id"]],
    ).fetchone()
    assert (after["started_at"], after["attempt"], after["lease_id"]) == (
        row["started_at"],
        row["attempt"],
        row["lease_id"],
    )
    assert after["confirmed"]
    # the installation may (tests, repairs)
    sql.execute("UPDATE pgsched.execution SET attempt = 7 WHERE id = %s", [row["id"]])
    with _as(a.engine) as c:  # another tenant's login sees none of it to change
        cur = c.execute("UPDATE pgsched.execution SET attempt = 0 WHERE id = %s", [row["id"]])
        assert cur.rowcount == 0


def test_a_tenants_raw_insert_is_held_by_its_tasks_unique_window(sql, ab):
    _, b, _ = ab
    sql.execute(
        "UPDATE pgsched.task SET unique_policy = 'pending' WHERE tenant = %s AND name = 'job'",
        [b.name],
    )  # b.pending_id is pending: it holds the window
    with _as(b.engine) as c:
        with pytest.raises(
            pg_errors.UniqueViolation,
            match=rf"unique window: execution {b.pending_id} of this task is pending; an enqueue",
        ):
            c.execute(RAW, [b.name, b.task_id])
        c.execute("DELETE FROM pgsched.execution WHERE id = %s", [b.pending_id])
        made = c.execute(RAW, [b.name, b.task_id]).fetchone()
        assert made["windowed"]  # counted by the next enqueue's window
        with pytest.raises(pg_errors.UniqueViolation):
            c.execute(RAW, [b.name, b.task_id])
        # as the enqueue answers it
        dedup = c.execute(
            "INSERT INTO pgsched.run_request (task) VALUES ('job') "
            "RETURNING execution_id, deduplicated, dedup_reason"
        ).fetchone()
        assert dedup == {
            "execution_id": made["id"],
            "deduplicated": True,
            "dedup_reason": "unique_pending",
        }
        c.execute("DELETE FROM pgsched.execution WHERE id = %s", [made["id"]])
        # two rows in one statement: the second sees the first
        with pytest.raises(pg_errors.UniqueViolation):
            c.execute(
                "INSERT INTO pgsched.execution (tenant, task_id, scheduled_at, run_at) "
                "SELECT %s, %s, now(), now() FROM generate_series(1, 2)",
                [b.name, b.task_id],
            )
    pending = sql.execute(
        "SELECT count(*) AS n FROM pgsched.execution WHERE task_id = %s AND state = 'pending'",
        [b.task_id],
    ).fetchone()["n"]
    assert pending == 0


def test_a_raw_insert_within_a_unique_period_is_held_too(sql, ab):
    _, b, _ = ab
    sql.execute(
        "UPDATE pgsched.task SET unique_period_seconds = 3600 WHERE tenant = %s AND name = 'job'",
        [b.name],
    )
    with _as(b.engine) as c:
        first = c.execute(RAW, [b.name, b.task_id]).fetchone()["id"]
        c.execute("DELETE FROM pgsched.execution WHERE id = %s", [first])  # not pending now
        with pytest.raises(pg_errors.UniqueViolation, match=f"execution {first} of this task"):
            c.execute(RAW, [b.name, b.task_id])
    with _as(b.app) as c:
        got = c.execute("SELECT * FROM pgsched.enqueue_v2('job')").fetchone()
    assert (got["execution_id"], got["dedup_reason"]) == (first, "unique_period")
    # the period over (its row gone): two rows in one statement, the second within the
    # first's period
    sql.execute("DELETE FROM pgsched.unique_period WHERE tenant = %s", [b.name])
    with _as(b.engine) as c:
        with pytest.raises(pg_errors.UniqueViolation, match="of this statement"):
            c.execute(
                "INSERT INTO pgsched.execution (tenant, task_id, scheduled_at, run_at) "
                "SELECT %s, %s, now(), now() FROM generate_series(1, 2)",
                [b.name, b.task_id],
            )
        one = c.execute(RAW, [b.name, b.task_id]).fetchone()["id"]
    assert sql.execute(
        "SELECT execution_id FROM pgsched.unique_period WHERE tenant = %s", [b.name]
    ).fetchone() == {"execution_id": one}


def test_a_plain_insert_of_a_one_shot_run_still_works_for_a_tenants_logins(sql, ab):
    """README: `INSERT INTO pgsched.run_request (task) VALUES ('backup')`; and a raw INSERT
    of a pending execution of a task without a window, as before."""
    _, b, _ = ab
    made = []
    for login in (b.app, b.engine):
        with _as(login) as c:
            made.append(
                c.execute(
                    "INSERT INTO pgsched.run_request (task, params) VALUES ('job', '{\"n\": 1}') "
                    "RETURNING execution_id, deduplicated"
                ).fetchone()
            )
    with _as(b.engine) as c:
        raw = c.execute(RAW, [b.name, b.task_id]).fetchone()
    assert [m["deduplicated"] for m in made] == [False, False] and not raw["windowed"]
    rows = sql.execute(
        "SELECT tenant, state FROM pgsched.execution WHERE id = ANY (%s)",
        [[m["execution_id"] for m in made] + [raw["id"]]],
    ).fetchall()
    assert rows == [{"tenant": b.name, "state": "pending"}] * 3


def test_the_workers_writes_work_on_a_tenants_engine_login_and_compute_is_the_databases(sql, ab):
    """Claim, confirm a start, retry, hand back, group-commit finishes (lying about the
    attempt's times), a DAG's next node made at its upstream's finish: each as B's engine
    login. Compute counts each row from its claim to the statement that moved it out of
    running."""
    _, b, _ = ab
    with _as(b.app) as c:
        c.execute("SELECT pgsched.enqueue_many_v1('job', array_fill('{}'::jsonb, ARRAY[2]))")
    # the DAG's second node is of a task with a unique window that holds: a DAG's own
    # enqueue of its node is not an enqueue the window refuses (0022: it counts it)
    load = sql.execute(
        "SELECT n.task_id FROM pgsched.dag_node_run n WHERE n.run_id = %s AND n.node_id = 'load'",
        [b.run_id],
    ).fetchone()["task_id"]
    sql.execute("UPDATE pgsched.task SET unique_policy = 'pending' WHERE id = %s", [load])
    sql.execute(  # due tomorrow: it holds the window, no claim takes it
        "INSERT INTO pgsched.execution (tenant, task_id, scheduled_at, run_at) "
        "VALUES (%s, %s, now() + interval '1 day', now() + interval '1 day')",
        [b.name, load],
    )
    with _as(b.engine) as c:
        worker = own_worker(c, b.name)
        rows = claim(c, worker)
        assert len(rows) == 4  # job x3, the DAG's extract
        extract = next(r for r in rows if r["dag_run_id"] == b.run_id)
        jobs = [r for r in rows if r["dag_run_id"] is None]
        assert Session(c).exec(
            "execution_confirm_start", id=jobs[0]["id"], lease_id=jobs[0]["lease_id"]
        )
        time.sleep(1.0)
        retried = Session(c).exec(
            "execution_retry",
            id=jobs[0]["id"],
            lease_id=jobs[0]["lease_id"],
            run_at=datetime.now(UTC) + timedelta(hours=1),
            extra_attempts=0,
            budget_delay_seconds=None,
        )
        handed = Session(c).many(
            "execution_unclaim", id=[jobs[1]["id"]], lease_id=[jobs[1]["lease_id"]]
        )
        states = {
            r["id"]: (r["state"], r["attempt"])
            for r in sql.execute(
                "SELECT id, state, attempt FROM pgsched.execution WHERE id = ANY (%s)",
                [[jobs[0]["id"], jobs[1]["id"]]],
            ).fetchall()
        }
        assert states == {jobs[0]["id"]: ("pending", 1), jobs[1]["id"]: ("pending", 0)}
        lies = [
            item(r, started_at=r["started_at"], finished_at=r["started_at"])
            for r in (jobs[2], extract)
        ]
        moved = Session(c).one("execution_finish_many", worker_id=worker, **finish_params(lies))
        # a transaction held open from the claim to the finish: its now() stays the claim's
        c.autocommit = False
        [again] = claim(c, worker, limit=1)
        time.sleep(1.0)
        Session(c).one("execution_finish_many", worker_id=worker, **finish_params([item(again)]))
        c.commit()
    assert retried == 1 and [h["id"] for h in handed] == [jobs[1]["id"]]
    assert sorted(moved["moved"]) == sorted([jobs[2]["id"], extract["id"]])
    node = sql.execute(
        "SELECT n.state, e.state AS execution_state, e.windowed FROM pgsched.dag_node_run n "
        "JOIN pgsched.execution e ON e.id = n.execution_id WHERE n.run_id = %s AND n.node_id = 'load'",
        [b.run_id],
    ).fetchone()
    assert node == {"state": "queued", "execution_state": "pending", "windowed": True}
    # 4 rows left running after >= 1 s each (the retried, the handed back, the two lied
    # about), and one more after >= 1 s in a transaction begun before its claim
    assert computed(sql, b.name) >= 5.0


def test_the_rescue_of_a_dead_workers_running_rows_counts_their_compute(sql, ab):
    _, b, _ = ab
    with _as(b.engine) as c:
        worker = own_worker(c, b.name)
        rows = claim(c, worker)
    time.sleep(0.5)
    sql.execute(
        "UPDATE pgsched.worker SET last_heartbeat_at = now() - interval '1 day' WHERE id = %s",
        [worker],
    )
    rescued = sql.execute("SELECT * FROM pgsched_internal.rescue_v1()").fetchall()
    assert {r["execution_id"] for r in rescued} == {r["id"] for r in rows}
    assert computed(sql, b.name) >= 0.5 * len(rows)


def test_a_tenants_logins_read_their_own_quotas_only_even_after_the_grants_are_made_again(
    sql, dsn, ab
):
    a, b, extra = ab
    sql.execute("SELECT pgsched_internal.secure_v1()")  # as every later migration does
    sql.execute("SELECT pgsched.tenant_set_quotas_v1(%s, max_running => 7)", [b.name])
    with _as(b.engine) as c:
        seen = c.execute("SELECT name, max_running FROM pgsched.tenant").fetchall()
        assert c.execute("SELECT max_running FROM pgsched.tenant_usage_v1()").fetchone() == {
            "max_running": 7
        }
    assert seen == [{"name": b.name, "max_running": 7}]
    extra.append(role := f"web_{a.name}")
    sql.execute(f'CREATE ROLE "{role}" LOGIN IN ROLE pgsched_web')
    with _as(login_dsn(dsn, role), autocommit=False) as c:
        assert c.execute("SELECT name FROM pgsched.tenant").fetchall() == []  # none set
        c.execute("SELECT set_config('pgsched.tenant', %s, true)", [a.name])
        assert c.execute("SELECT name FROM pgsched.tenant").fetchall() == [{"name": a.name}]
        c.rollback()
        c.execute("SELECT set_config('pgsched.tenant', '*', true)")
        names = {r["name"] for r in c.execute("SELECT name FROM pgsched.tenant").fetchall()}
        assert {a.name, b.name} <= names

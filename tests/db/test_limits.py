"""Limits that hold across the fleet (migration 0021, pgsched_internal.execution_claim_v1):
eight claimers on eight connections drain executions at once while a ninth connection
samples what runs; no limit is ever exceeded, by the database's count or by the claimers'
own. And the rest of what a limit promises: the fair share across tenants, paused queues,
rate windows, the hourly quota, the reason a waiting execution gives, the wake-up when a
limit frees."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, timedelta

import psycopg
import pytest
from psycopg.rows import dict_row

from pgsched.db import Session
from pgsched.limits import format_rate
from pgsched.stores import tasks
from pgsched.worker.claims import TaskDefinitions
from pgsched.worker.completer import finish_params

from ..factories import T0, make_task
from ..helpers import notifications_until_marker
from .test_claim import claim, register
from .test_group_commit import item as finish_item

CLAIMERS = 8


def item(row: dict, finished_at) -> dict:
    """A succeeded outcome of claimed ``row``, finished at ``finished_at`` (the database's)."""
    return finish_item(row, finished_at=finished_at)


@dataclass
class Drain:
    """What the claimers saw: the most they held at once per scope (their own records),
    the most the sampler counted running per scope (the database's), every claim's rows."""

    held_max: Counter = field(default_factory=Counter)
    running_max: Counter = field(default_factory=Counter)
    samples: int = 0
    claimed: list[dict] = field(default_factory=list)
    errors: list[BaseException] = field(default_factory=list)


def drain(dsn: str, db, total: int, scope_of, sample_sql: str, *, hold: float = 0.003) -> Drain:
    """Eight threads, each a worker on a connection of its own, claim (3 at a time) and
    finish (after ``hold`` seconds) until ``total`` executions ran; meanwhile a sampler
    counts what runs with ``sample_sql`` (rows of scope, n) as often as it can. ``scope_of``
    maps a claimed row to the scopes it counts in (a list of names)."""
    out = Drain()
    lock = threading.Lock()
    held: Counter = Counter()
    done = threading.Event()
    start = threading.Barrier(CLAIMERS + 1)
    workers = [register(db, f"w{i}") for i in range(CLAIMERS)]

    def claimer(worker: int) -> None:
        try:
            with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
                session, defs = Session(conn), TaskDefinitions()
                start.wait(30)
                while not done.is_set():
                    rows = defs.claim(session, queues=["default", "q"], limit=3, worker_id=worker)
                    if not rows:
                        time.sleep(0.001)
                        continue
                    with lock:
                        out.claimed.extend(rows)
                        for r in rows:
                            for s in scope_of(r):
                                held[s] += 1
                                out.held_max[s] = max(out.held_max[s], held[s])
                    time.sleep(hold * random.random())
                    with lock:  # no longer held by the handler before the database hears it
                        for r in rows:
                            for s in scope_of(r):
                                held[s] -= 1
                    now = conn.execute("SELECT clock_timestamp() AS t").fetchone()["t"]
                    session.one(
                        "execution_finish_many",
                        worker_id=worker,
                        **finish_params([item(r, now) for r in rows]),
                    )
        except BaseException as exc:
            out.errors.append(exc)
            done.set()

    def sampler() -> None:
        with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
            start.wait(30)
            while not done.is_set():
                for r in conn.execute(sample_sql).fetchall():
                    out.running_max[r["scope"]] = max(out.running_max[r["scope"]], r["n"])
                out.samples += 1
                left = conn.execute(
                    "SELECT (SELECT count(*) FROM pgsched.execution)"
                    " + (SELECT count(*) FROM pgsched.execution_history WHERE false) AS n"
                ).fetchone()["n"]
                if left == 0:
                    done.set()

    threads = [threading.Thread(target=claimer, args=(w,)) for w in workers]
    threads.append(threading.Thread(target=sampler))
    for t in threads:
        t.start()
    deadline = time.monotonic() + 120
    for t in threads:
        t.join(max(0.1, deadline - time.monotonic()))
    done.set()
    for t in threads:
        t.join(5)
    assert not out.errors, out.errors
    assert len(out.claimed) == total  # everything ran, once
    assert len({r["id"] for r in out.claimed}) == total
    return out


def enqueue(sql, task: str, n: int, *, params: str = "jsonb_build_object('i', g)") -> None:
    sql.execute(
        f"SELECT pgsched.enqueue_v1(%s, {params}, now() - interval '1 s') FROM generate_series(1, %s) g",
        [task, n],
    )


def test_a_tenant_quota_of_running_executions_holds_across_eight_claimers(dsn, db, sql):
    sql.execute("INSERT INTO pgsched.tenant (name, max_running) VALUES ('t1', 5)")
    make_task(db, "job", tenant="t1")
    sql.execute(
        "SELECT pgsched.enqueue_v1('job', '{}', now(), tenant => 't1') FROM generate_series(1, 150)"
    )
    out = drain(
        dsn,
        db,
        150,
        lambda r: ["t1"],
        "SELECT tenant AS scope, count(*)::int AS n FROM pgsched.execution"
        " WHERE state = 'running' GROUP BY tenant",
    )
    print(out.running_max, out.held_max, out.samples)
    assert out.running_max["t1"] <= 5 and out.held_max["t1"] <= 5
    assert max(out.running_max["t1"], out.held_max["t1"]) == 5  # reached, never passed
    assert out.samples > 20


def test_queue_task_and_key_caps_hold_across_eight_claimers(dsn, db, sql):
    """One drain with every cap at once: queue q runs at most 4, task capped runs at most 2,
    each customer key at most 1 (three keys of task keyed), the other task of q is free."""
    sql.execute("INSERT INTO pgsched.queue (tenant, name, max_running) VALUES ('default', 'q', 4)")
    make_task(db, "capped", queue="q")
    make_task(db, "keyed")
    make_task(db, "free", queue="q")
    sql.execute(
        "UPDATE pgsched.task SET max_running = 2 WHERE name = 'capped';"
        "UPDATE pgsched.task SET concurrency_key = 'customer:{c}', key_max_running = 1"
        " WHERE name = 'keyed'"
    )
    enqueue(sql, "capped", 60)
    enqueue(sql, "free", 60)
    enqueue(sql, "keyed", 60, params="jsonb_build_object('c', g %% 3)")
    keys = {
        r["id"]: r["concurrency_key"]
        for r in sql.execute("SELECT id, concurrency_key FROM pgsched.execution").fetchall()
    }
    assert set(keys.values()) == {None, "customer:0", "customer:1", "customer:2"}
    names = {
        r["id"]: r["name"] for r in sql.execute("SELECT id, name FROM pgsched.task").fetchall()
    }

    def scopes(row):
        s = []
        if row["task_name"] in ("capped", "free"):
            s.append("queue q")
        if row["task_name"] == "capped":
            s.append("task capped")
        if keys[row["id"]]:
            s.append(keys[row["id"]])
        return s

    out = drain(
        dsn,
        db,
        180,
        scopes,
        """SELECT 'queue q' AS scope, count(*)::int AS n FROM pgsched.execution
            WHERE state = 'running' AND queue = 'q'
           UNION ALL
           SELECT 'task capped', count(*) FROM pgsched.execution e JOIN pgsched.task t ON t.id = e.task_id
            WHERE e.state = 'running' AND t.name = 'capped'
           UNION ALL
           SELECT concurrency_key, count(*) FROM pgsched.execution
            WHERE state = 'running' AND concurrency_key IS NOT NULL GROUP BY concurrency_key""",
    )
    print(out.running_max, out.held_max, out.samples, names)
    assert out.running_max["queue q"] <= 4 and out.held_max["queue q"] <= 4
    assert out.running_max["task capped"] <= 2 and out.held_max["task capped"] <= 2
    for k in ("customer:0", "customer:1", "customer:2"):
        assert out.running_max[k] <= 1 and out.held_max[k] <= 1, k
    # the caps were reached (by one count or the other), not merely unmet
    assert max(out.held_max["queue q"], out.running_max["queue q"]) == 4
    assert max(out.held_max["task capped"], out.running_max["task capped"]) == 2


def test_a_rate_limit_holds_in_every_sliding_window(dsn, db, sql):
    """Queue q: at most 10 starts in any 0.5 s; 30 executions take at least three windows,
    and no window holds more than 10 starts (the claims' own started_at)."""
    sql.execute(
        "INSERT INTO pgsched.queue (tenant, name, rate_limit, rate_period_seconds)"
        " VALUES ('default', 'q', 10, 0.5)"
    )
    make_task(db, "job", queue="q")
    enqueue(sql, "job", 30)
    out = drain(dsn, db, 30, lambda r: [], "SELECT 'none' AS scope, 0 AS n")
    starts = sorted(r["started_at"] for r in out.claimed)
    for i, s in enumerate(starts):
        inside = [t for t in starts[i:] if t - s < timedelta(seconds=0.5)]
        assert len(inside) <= 10, (s, inside)
    assert starts[-1] - starts[0] >= timedelta(seconds=1.0)


def test_a_claim_shares_itself_across_tenants_by_rank(db, sql):
    """Tenant a has 1,000 ready executions of priority 1, b one of priority 10 and c two:
    a claim of 6 takes b's and c's at once, the rest from a; a's priority 1 jumps no tenant."""
    for t in ("a", "b", "c"):
        sql.execute("INSERT INTO pgsched.tenant (name, max_running) VALUES (%s, NULL)", [t])
        make_task(db, "job", tenant=t, now=T0)
    sql.execute(
        "SELECT pgsched.enqueue_v1('job', '{}', %s, priority => 1, tenant => 'a') FROM generate_series(1, 1000)",
        [T0 - timedelta(hours=1)],
    )
    sql.execute("SELECT pgsched.enqueue_v1('job', '{}', %s, priority => 10, tenant => 'b')", [T0])
    sql.execute(
        "SELECT pgsched.enqueue_v1('job', '{}', %s, tenant => 'c') FROM generate_series(1, 2)", [T0]
    )
    worker = register(db)
    rows = TaskDefinitions().claim(db, queues=["default"], limit=6, worker_id=worker, now=T0)
    assert Counter(r["tenant"] for r in rows) == {"a": 3, "b": 1, "c": 2}
    first_three = {r["tenant"] for r in rows[:3]}
    assert first_three == {"a", "b", "c"}  # rank 1 of each tenant starts first


def test_a_paused_queue_is_not_claimed_from_until_resumed(db, sql):
    make_task(db, "job", queue="q", now=T0)
    tasks.trigger(db, "job", run_at=T0 - timedelta(minutes=1))
    sql.execute(
        "INSERT INTO pgsched.queue (tenant, name, paused_at, paused_by, pause_reason)"
        " VALUES ('default', 'q', now(), 'operator', 'maintenance')"
    )
    worker = register(db, queues=("q",))
    assert claim(db, worker, queues=("q",), now=T0) == []
    reason = sql.execute(
        "SELECT pgsched_internal.wait_reason_v1(e) AS r FROM pgsched.execution e"
    ).fetchone()["r"]
    assert reason == "queue q is paused: maintenance"
    sql.execute("UPDATE pgsched.queue SET paused_at = NULL, paused_by = NULL, pause_reason = NULL")
    assert len(claim(db, worker, queues=("q",), now=T0)) == 1


def test_the_hourly_quota_counts_starts_and_says_why_work_waits(db, sql):
    sql.execute("INSERT INTO pgsched.tenant (name, max_starts_per_hour) VALUES ('t1', 3)")
    make_task(db, "job", tenant="t1")
    sql.execute(
        "SELECT pgsched.enqueue_v1('job', '{}', now(), tenant => 't1') FROM generate_series(1, 5)"
    )
    worker = register(db)
    got = TaskDefinitions().claim(db, queues=["default"], limit=10, worker_id=worker)
    assert len(got) == 3
    usage = sql.execute("SELECT * FROM pgsched.tenant_usage WHERE tenant = 't1'").fetchone()
    assert usage["hour_starts"] == 3
    reasons = {
        r["r"]
        for r in sql.execute(
            "SELECT pgsched_internal.wait_reason_v1(e) AS r FROM pgsched.execution e WHERE state = 'pending'"
        ).fetchall()
    }
    top = usage["hour_start"] + timedelta(hours=1)
    [reason] = reasons
    assert reason.startswith("tenant t1 started its quota of 3 executions this hour (UTC); ")
    assert f"a start is free at {top:%Y-%m-%d %H:%M:%S} UTC (in " in reason  # 0030
    wait = sql.execute("SELECT * FROM pgsched.limit_wait WHERE tenant = 't1'").fetchone()
    assert wait["free_at"] == top


def test_a_rate_reason_names_its_period_and_when_a_start_is_free(db, sql):
    """0030: "started its rate limit of 2 per 1m; a start is free at <the oldest start in
    the window + 60 s> UTC (in N s)", for a queue's, a task's and a key's rate alike."""
    make_task(db, "job", queue="q")
    sql.execute(
        "UPDATE pgsched.task SET key_rate_limit = 2, key_rate_period_seconds = 90,"
        " concurrency_key = 'acme' WHERE name = 'job'"
    )
    sql.execute(
        "INSERT INTO pgsched.queue (tenant, name, rate_limit, rate_period_seconds)"
        " VALUES ('default', 'q', 2, 60)"
    )
    for _ in range(3):
        tasks.trigger(db, "job")
    worker = register(db, queues=("q",))
    assert len(claim(db, worker, queues=("q",))) == 2
    first = sql.execute(
        "SELECT min(started_at) AS at FROM pgsched.rate_start WHERE scope = 'queue'"
    ).fetchone()["at"]
    why = _pending_reason(sql)
    free = (first + timedelta(seconds=60)).astimezone(UTC)
    assert why.startswith("queue q started its rate limit of 2 per 1m; a start is free at ")
    assert f"free at {free:%Y-%m-%d %H:%M:%S} UTC (in " in why
    assert 55 <= int(why.rsplit("(in ", 1)[1].split(" ")[0]) <= 60
    # the queue's rate lifted: the key's (90 s: "90s") holds it, with its own free time
    sql.execute("UPDATE pgsched.queue SET rate_limit = NULL, rate_period_seconds = NULL")
    why = _pending_reason(sql)
    free = (first + timedelta(seconds=90)).astimezone(UTC)
    assert why.startswith("key acme started its rate limit of 2 per 90s; a start is free at ")
    assert f"free at {free:%Y-%m-%d %H:%M:%S} UTC" in why


def _pending_reason(sql) -> str:
    """The wait reason of the one pending execution."""
    return sql.execute(
        "SELECT pgsched_internal.wait_reason_v1(e) AS r FROM pgsched.execution e"
        " WHERE state = 'pending'"
    ).fetchone()["r"]


@pytest.mark.parametrize(
    "seconds, text",
    [
        (60, "1m"),
        (3600, "1h"),
        (86400, "1d"),
        (172800, "2d"),
        (90, "90s"),
        (7200, "2h"),
        (0.5, "0.5s"),
        (1, "1s"),
        (5400, "90m"),
    ],
)
def test_a_period_reads_as_the_cli_writes_it(sql, seconds, text):
    """period_text_v1 and pgsched.limits.format_rate agree (one rule, two languages)."""
    got = sql.execute("SELECT pgsched_internal.period_text_v1(%s) AS t", [seconds]).fetchone()["t"]
    assert got == text
    assert format_rate(7, seconds) == f"7/{text}"


def test_reasons_name_each_limit_that_holds_work(db, sql):
    make_task(db, "job")
    sql.execute("UPDATE pgsched.task SET max_running = 1, concurrency_key = 'k' WHERE name = 'job'")
    for _ in range(2):
        tasks.trigger(db, "job")
    worker = register(db)
    assert len(claim(db, worker)) == 1
    [pending] = sql.execute(
        "SELECT pgsched_internal.wait_reason_v1(e) AS r, concurrency_key FROM pgsched.execution e"
        " WHERE state = 'pending'"
    ).fetchall()
    assert pending == {
        "r": "task job runs its limit of 1 at once (max_running)",
        "concurrency_key": "k",
    }


@pytest.mark.clone("LISTEN, and notifications sent at commit")
def test_a_finish_that_frees_a_limit_wakes_the_tenants_workers(dsn, db, sql):
    """Work held by a limit is recorded (limit_wait); the statement that moves a running
    execution to history notifies that tenant's workers, so the held work starts at once."""
    make_task(db, "job")
    sql.execute("UPDATE pgsched.task SET max_running = 1 WHERE name = 'job'")
    for _ in range(2):
        tasks.trigger(db, "job")
    worker = register(db)
    [running] = claim(db, worker)
    assert claim(db, worker) == []
    assert sql.execute("SELECT tenant FROM pgsched.limit_wait").fetchall() == [
        {"tenant": "default"}
    ]
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute("LISTEN pgsched_execution")
        now = sql.execute("SELECT clock_timestamp() AS t").fetchone()["t"]
        db.one("execution_finish_many", worker_id=worker, **finish_params([item(running, now)]))
        assert "default" in notifications_until_marker(listener, sql)
    [second] = claim(db, worker)
    assert second["id"] != running["id"]
    # nothing waits any more: the claim cleared the record, and finishes notify no one
    assert sql.execute("SELECT count(*) AS n FROM pgsched.limit_wait").fetchone()["n"] == 0
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute("LISTEN pgsched_execution")
        now = sql.execute("SELECT clock_timestamp() AS t").fetchone()["t"]
        db.one("execution_finish_many", worker_id=worker, **finish_params([item(second, now)]))
        assert notifications_until_marker(listener, sql) == []


def test_a_tenants_login_claims_for_its_own_tenant_and_worker_only(dsn, db, sql):
    """The claim is a definer function: it checks itself what row-level security checked
    before. A tenant's engine login claims nothing of another tenant's, nor for a worker
    registered for another tenant; for its own worker it claims its own tenant's only."""
    from ..tenancy import two_tenants

    with two_tenants(dsn) as (a, b, _):
        sql.execute("UPDATE pgsched.tenant SET max_running = NULL")

        def register_for(tenant: str) -> int:
            return db.one(
                "worker_register",
                name=tenant,
                hostname="h",
                pid=1,
                queues=["default"],
                tenants=[tenant],
                concurrency=4,
                heartbeat_interval=5.0,
                host_time=None,
                round_trip=None,
            )["id"]

        bs, as_ = register_for(b.name), register_for(a.name)
        with psycopg.connect(a.engine, autocommit=True, row_factory=dict_row) as conn:
            session = Session(conn)
            for tenants_asked in ([b.name], None, [a.name, b.name]):
                assert (
                    TaskDefinitions().claim(
                        session, queues=["default"], tenants=tenants_asked, limit=5, worker_id=bs
                    )
                    == []
                )
            assert (
                TaskDefinitions().claim(
                    session, queues=["default"], tenants=[b.name], limit=5, worker_id=as_
                )
                == []
            )
            mine = TaskDefinitions().claim(
                session, queues=["default"], tenants=None, limit=5, worker_id=as_
            )
        assert {r["tenant"] for r in mine} == {a.name} and mine
        theirs = sql.execute(
            "SELECT count(*) AS n FROM pgsched.execution WHERE tenant = %s AND state = 'running'",
            [b.name],
        ).fetchone()
        assert theirs["n"] == 0

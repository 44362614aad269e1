"""Limits under 0026's claim rounds: a claim of many calls one tenant up to four times
(rounds 2 to 4 for what the others left), each round's picks moved to running and
counted before the next. Eight claimers on eight connections, claims of 8 across three
tenants of weights 1, 100 and 1 with every kind of limit at once, a ninth connection
sampling what runs. (0021's single-tenant drains: tests/db/test_limits.py.)"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter

import psycopg
from psycopg.rows import dict_row

from pgsched.db import Session
from pgsched.worker.claims import TaskDefinitions
from pgsched.worker.completer import finish_params

from ..factories import make_task
from .test_claim import register
from .test_limits import item

CLAIMERS = 8
SECONDS = 5.0

SAMPLE = """
SELECT e.tenant || ' running' AS scope, count(*)::int AS n FROM pgsched.execution e
 WHERE e.state = 'running' GROUP BY e.tenant
UNION ALL
SELECT 'q', count(*) FROM pgsched.execution WHERE state = 'running' AND tenant = 'u2' AND queue = 'q'
UNION ALL
SELECT 'capped', count(*) FROM pgsched.execution e JOIN pgsched.task t ON t.id = e.task_id
 WHERE e.state = 'running' AND t.name = 'capped'
UNION ALL
SELECT e.concurrency_key, count(*) FROM pgsched.execution e
 WHERE e.state = 'running' AND e.concurrency_key IS NOT NULL GROUP BY e.concurrency_key"""


def test_attack26_every_limit_holds_when_rounds_call_a_tenant_again(dsn, db, sql):
    """u1 (weight 1): at most 5 running, 40 starts an hour. u2 (weight 100): queue q at
    most 3 running, its task capped at most 2, each key of task keyed at most 1, task
    rated at most 20 starts a minute. u3 (weight 1): no limit. Claims of 8 for 5 s:
    no sample and no claimer's own count ever passes a cap, u1 starts exactly its 40,
    rated exactly its 20, and u3 is not starved by u2's weight."""
    sql.execute(
        "INSERT INTO pgsched.tenant (name, max_running, max_starts_per_hour, weight) VALUES"
        " ('u1', 5, 40, 1), ('u2', NULL, NULL, 100), ('u3', NULL, NULL, 1)"
    )
    sql.execute("INSERT INTO pgsched.queue (tenant, name, max_running) VALUES ('u2', 'q', 3)")
    for tenant, task, queue in [
        ("u1", "job", "default"),
        ("u2", "capped", "q"),
        ("u2", "free", "q"),
        ("u2", "keyed", "default"),
        ("u2", "rated", "default"),
        ("u3", "job", "default"),
    ]:
        make_task(db, task, tenant=tenant, queue=queue)
    sql.execute(
        "UPDATE pgsched.task SET max_running = 2 WHERE name = 'capped';"
        "UPDATE pgsched.task SET concurrency_key = 'k:{c}', key_max_running = 1"
        " WHERE name = 'keyed';"
        "UPDATE pgsched.task SET rate_limit = 20, rate_period_seconds = 60 WHERE name = 'rated'"
    )
    for tenant, task, n in [
        ("u1", "job", 300),
        ("u2", "capped", 200),
        ("u2", "free", 200),
        ("u2", "keyed", 200),
        ("u2", "rated", 200),
        ("u3", "job", 3000),
    ]:
        sql.execute(
            "SELECT pgsched.enqueue_v1(%s, jsonb_build_object('c', g %% 2), now() - interval '1 s',"
            " tenant => %s) FROM generate_series(1, %s) g",
            [task, tenant, n],
        )
    keys = {
        r["id"]: (r["tenant"], r["name"], r["concurrency_key"])
        for r in sql.execute(
            "SELECT e.id, e.tenant, t.name, e.concurrency_key FROM pgsched.execution e"
            " JOIN pgsched.task t ON t.id = e.task_id"
        ).fetchall()
    }

    def scopes(row: dict) -> list[str]:
        tenant, name, key = keys[row["id"]]
        s = [f"{tenant} running"]
        if tenant == "u2" and name in ("capped", "free"):
            s.append("q")
        if name == "capped":
            s.append("capped")
        if key:
            s.append(key)
        return s

    lock = threading.Lock()
    held: Counter = Counter()
    held_max: Counter = Counter()
    running_max: Counter = Counter()
    claimed: list[dict] = []
    errors: list[BaseException] = []
    done = threading.Event()
    start = threading.Barrier(CLAIMERS + 1)
    workers = [register(db, f"w{i}", queues=("default", "q")) for i in range(CLAIMERS)]

    def claimer(worker: int) -> None:
        try:
            with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
                session, defs = Session(conn), TaskDefinitions()
                start.wait(30)
                while not done.is_set():
                    rows = defs.claim(session, queues=["default", "q"], limit=8, worker_id=worker)
                    if not rows:
                        time.sleep(0.002)
                        continue
                    with lock:
                        claimed.extend(rows)
                        for r in rows:
                            for s in scopes(r):
                                held[s] += 1
                                held_max[s] = max(held_max[s], held[s])
                    time.sleep(0.004 * random.random())
                    with lock:
                        for r in rows:
                            for s in scopes(r):
                                held[s] -= 1
                    now = conn.execute("SELECT clock_timestamp() AS t").fetchone()["t"]
                    session.one(
                        "execution_finish_many",
                        worker_id=worker,
                        **finish_params([item(r, now) for r in rows]),
                    )
        except BaseException as exc:
            errors.append(exc)
            done.set()

    threads = [threading.Thread(target=claimer, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    samples = 0
    with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
        start.wait(30)
        until = time.monotonic() + SECONDS
        while time.monotonic() < until and not done.is_set():
            for r in conn.execute(SAMPLE).fetchall():
                running_max[r["scope"]] = max(running_max[r["scope"]], r["n"])
            samples += 1
    done.set()
    for t in threads:
        t.join(30)
    assert not errors, errors
    assert len({r["id"] for r in claimed}) == len(claimed)
    starts = Counter(keys[r["id"]][0] for r in claimed)
    rated = sum(1 for r in claimed if keys[r["id"]][1] == "rated")
    print(running_max, held_max, samples, starts, rated)
    caps = {"u1 running": 5, "q": 3, "capped": 2, "k:0": 1, "k:1": 1}
    over = {
        s: (running_max[s], held_max[s])
        for s, cap in caps.items()
        if running_max[s] > cap or held_max[s] > cap
    }
    assert not over, f"caps passed (sampled, held): {over}"
    assert starts["u1"] == 40, starts
    assert rated == 20, rated
    usage = sql.execute("SELECT hour_starts FROM pgsched.tenant_usage WHERE tenant = 'u1'")
    assert usage.fetchone()["hour_starts"] == 40
    assert starts["u3"] >= 100, starts  # weight 1 beside 100: a share, not nothing
    assert samples > 20

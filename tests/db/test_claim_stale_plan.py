"""A claim stays cheap beside another tenant's flood before any ANALYZE has seen it (the
fairness benchmark of issue 18: claims for tenant b took seconds each under tenant a's
100,000-row flood, holding b's lock all the while, until autovacuum analyzed the table).
With the statistics of a small table, the planner read a tenant's front on the queue-first
index (execution_ready_queue_idx) and filtered the other tenant's rows out one by one;
migration 0021 drops that index, so a tenant's front has one index to be read on. And
PostgreSQL 15 found the first pending tenant with a plain min() over the whole index, where
a LIMIT 1 in index order reads one entry. The plans are the ones a worker's long-lived
connection keeps: made while the table was small (plan_cache_mode = force_generic_plan
keeps the first), and fresh ones."""

from __future__ import annotations

import json
from datetime import timedelta

import psycopg
import pytest
from psycopg.rows import dict_row

from pgsched import queries

from ..factories import T0, make_task
from .claim_plans import SETTINGS, buffers, nodes
from .test_claim_tenants import BACKLOG, fill, register


@pytest.mark.parametrize("plans", ["force_generic_plan", "force_custom_plan"])
@pytest.mark.parametrize(
    "small",
    [200, 1],
    ids=["200 rows never analyzed", "one row analyzed"],  # the second: a worker's first claims
)
def test_a_claim_planned_on_a_small_table_stays_cheap_beside_a_flood(small, plans, dsn, db, sql):
    make_task(db, "job", tenant="a", queue="q", now=T0)
    make_task(db, "job", tenant="b", queue="q", now=T0)
    fill(sql, "b", small, oldest=T0 - timedelta(hours=1))
    if small == 1:  # as autovacuum leaves a table a worker drains as fast as work comes
        sql.execute("VACUUM ANALYZE pgsched.execution")
    sql.execute("ALTER TABLE pgsched.execution SET (autovacuum_enabled = false)")
    worker = register(db, None)
    params = {
        "queues": ["q"],
        "tenants": None,
        "limit": 10,
        "worker_id": worker,
        "now": T0,
        "known_task_ids": [],
        "known_task_versions": [],
    }
    text = queries.get("execution_claim").text
    with psycopg.connect(dsn, row_factory=dict_row) as conn:
        conn.execute(f"SET plan_cache_mode = {plans}")
        for _ in range(8):  # plans made while the table is small (generic after five)
            assert len(conn.execute(text, params).fetchall()) == min(small, 10)
            conn.rollback()
        fill(sql, "a", BACKLOG, oldest=T0 - timedelta(days=1))  # older than b's; no ANALYZE
        notices: list[str] = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("LOAD 'auto_explain'")
        for name, value in SETTINGS.items():
            conn.execute(f"SET auto_explain.{name} = {value}")
        claimed = conn.execute(text, params).fetchall()
        conn.rollback()
    assert {r["tenant"] for r in claimed} == {"a", "b"} and len(claimed) == 10
    plans_seen = [json.loads(m[m.index("{") :]) for m in notices if "{" in m]
    call = [p for p in plans_seen if "SELECT * FROM pgsched_internal." in p["Query Text"]]
    filtered = [
        (n.get("Index Name"), n["Rows Removed by Filter"])
        for p in plans_seen
        for n in nodes(p["Plan"])
        if n.get("Rows Removed by Filter", 0) > 100
    ]
    assert not filtered, filtered  # no scan passes over the flood's rows one by one
    assert buffers(call[-1]["Plan"]) < 600, {
        p["Query Text"][:60]: buffers(p["Plan"]) for p in plans_seen
    }

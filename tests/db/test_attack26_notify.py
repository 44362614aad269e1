"""Attacks on the worker's newcomer claim (pgsched/worker/claimer.py ``_claim_now``,
beside migration 0026): a ``pgsched_execution`` notification naming a tenant the buffer
holds nothing of brings a claim of one even with the buffer full. Any login may NOTIFY
(docs/security.md), so tenant B's application login drives a real claimer of the
installation here. Each test asserts the safe behaviour: it fails while the attack works."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from psycopg.rows import dict_row

from pgsched.clock import DatabaseClock
from pgsched.db import Database
from pgsched.worker.claimer import Claimer
from pgsched.worker.config import WorkerConfig
from pgsched.worker.holdings import Holdings

from ..tenancy import two_tenants

FLOOD_SECONDS = 3.0


@pytest.fixture
def ab(dsn):
    with two_tenants(dsn) as (a, b, made):
        yield a, b, made


def test_attack26_a_notify_flood_does_not_make_a_full_worker_claim_and_hand_back(dsn, sql, ab):
    """A worker of every tenant, its two slots busy (no free slot, no prefetch: it claims
    nothing until a slot frees). A has 200 runs ready and a quota of 50 starts an hour.
    B's application login sends NOTIFY pgsched_execution, B's name as payload (B has
    nothing ready, so the buffer never holds any of B's), as fast as it can for 3 s.

    Each notification is a "newcomer": a claim of one, which takes A's next run (the fair
    share's lowest tag), counts it in A's hourly quota, vtime and rate windows, and
    buffers it past the worker's keep; the next turn hands it back (execution_unclaim,
    which refunds none of those). So B's notifications make the worker claim without end
    and burn A's quota with starts that never ran: A then waits for the next hour.
    Safe: a flood of notifications brings at most a few claims (here at most 5 starts)."""
    a, b, _ = ab
    sql.execute("DELETE FROM pgsched.execution WHERE tenant = %s AND state = 'pending'", [b.name])
    sql.execute("SELECT pgsched.tenant_set_quotas_v1(%s, max_starts_per_hour => 50)", [a.name])
    sql.execute(
        "SELECT pgsched.enqueue_many_v1('job', array_fill('{}'::jsonb, ARRAY[200]), tenant => %s)",
        [a.name],
    )
    worker = sql.execute(
        "INSERT INTO pgsched.worker (name, hostname, pid, queues, tenants, concurrency, "
        "heartbeat_interval) VALUES ('all', 'h', 1, '{default}', NULL, 2, 5) RETURNING id"
    ).fetchone()["id"]
    config = WorkerConfig(queues=["default"], tenants=None, concurrency=2, prefetch=0)
    holdings = Holdings(config)
    holdings.running = 2  # both slots busy with long handlers
    db = Database.connect(dsn, max_size=2)
    claimer = Claimer(db, config, holdings, DatabaseClock(), lambda: worker)
    stop = threading.Event()
    thread = threading.Thread(target=claimer.run, args=(stop,))
    sent = 0
    try:
        thread.start()
        time.sleep(1.0)  # listening, its first claim (of nothing: no free slot) done
        with psycopg.connect(b.app, autocommit=True, row_factory=dict_row) as hostile:
            until = time.monotonic() + FLOOD_SECONDS
            while time.monotonic() < until:
                hostile.execute("SELECT pg_notify('pgsched_execution', %s)", [b.name])
                sent += 1
        time.sleep(0.5)
    finally:
        stop.set()
        thread.join(10)
        claimer.close()
        db.close()
    usage = sql.execute(
        "SELECT hour_starts, vtime FROM pgsched.tenant_usage WHERE tenant = %s", [a.name]
    ).fetchone()
    running = sql.execute(
        "SELECT count(*) AS n FROM pgsched.execution WHERE tenant = %s AND state = 'running'",
        [a.name],
    ).fetchone()["n"]
    assert usage["hour_starts"] <= 5, (
        f"B's {sent} notifications in {FLOOD_SECONDS:.0f} s made the full worker claim "
        f"{usage['hour_starts']} of A's starts ({usage['hour_starts'] / FLOOD_SECONDS:.0f}/s; "
        f"A's hourly quota 50; {running} still held, the rest handed back; vtime {usage['vtime']})"
    )

"""Attacks on the worker's newcomer claim (pgsched/worker/claimer.py ``_claim_now``,
beside migration 0026): a ``pgsched_execution`` notification naming a tenant the buffer
holds nothing of brings a claim of one even with the buffer full. Any login may NOTIFY
(docs/security.md), so tenant B's application login drives a real claimer of the
installation here. Each test asserts the safe behaviour: it fails while the attack works."""

from __future__ import annotations

import threading
import time

import psycopg
from psycopg.rows import dict_row

from pgsched.clock import DatabaseClock
from pgsched.db import Database
from pgsched.worker.claimer import Claimer
from pgsched.worker.config import WorkerConfig
from pgsched.worker.holdings import Holdings

from ..factories import make_task

FLOOD_SECONDS = 3.0


def full_worker(dsn: str, sql, during) -> None:
    """A claimer of a worker of every tenant, both its slots busy (no free slot, no
    prefetch: it claims nothing until a slot frees), run while ``during()`` runs."""
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
    try:
        thread.start()
        time.sleep(1.0)  # listening, its first claim (of nothing: no free slot) done
        during()
        time.sleep(0.5)
    finally:
        stop.set()
        thread.join(10)
        claimer.close()
        db.close()


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
    sent = 0

    def flood() -> None:
        nonlocal sent
        with psycopg.connect(b.app, autocommit=True, row_factory=dict_row) as hostile:
            until = time.monotonic() + FLOOD_SECONDS
            while time.monotonic() < until:
                hostile.execute("SELECT pg_notify('pgsched_execution', %s)", [b.name])
                sent += 1

    full_worker(dsn, sql, flood)
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


def test_attack26_a_tenant_waiting_at_its_quota_does_not_make_every_finish_a_claim(dsn, sql, ab):
    """No hostile login: B is at its hourly quota (0 starts an hour, work pending), so it
    is in limit_wait, and every statement that ends an execution anywhere (a DELETE from
    pgsched.execution: execution_limit_freed) notifies B's name. A full worker's buffer
    holds nothing of B (B can start nothing), so each of those notifications is a
    newcomer claim of one: it takes A's next run (B's limit still holds B) and the
    worker hands it back, counted in A's hourly quota, vtime and rate windows each time.
    Here the other tenant's finishes (20 a second, one per statement) stand for the rest
    of the fleet. Safe: a tenant waiting at a limit for the hour does not turn the fleet's
    finishes into claims and hand-backs (at most 5 starts of A's)."""
    a, b, _ = ab
    sql.execute("SELECT pgsched.tenant_set_quotas_v1(%s, max_starts_per_hour => 0)", [b.name])
    sql.execute(
        "SELECT pgsched.enqueue_many_v1('job', array_fill('{}'::jsonb, ARRAY[200]), tenant => %s)",
        [a.name],
    )
    other = Database.connect(dsn, max_size=1)
    try:
        make_task(other, "job")  # the other tenant's ('default'), whose runs end meanwhile
    finally:
        other.close()
    sql.execute("SELECT pgsched.enqueue_many_v1('job', array_fill('{}'::jsonb, ARRAY[200]))")
    w = sql.execute(  # a claim for B alone, as its workers make: B waits at its quota
        "INSERT INTO pgsched.worker (name, hostname, pid, queues, tenants, concurrency, "
        "heartbeat_interval) VALUES ('b', 'h', 1, '{default}', NULL, 2, 5) RETURNING id"
    ).fetchone()["id"]
    sql.execute(
        "SELECT * FROM pgsched_internal.execution_claim_v1(%s, '{default}', ARRAY[%s], 1,"
        " NULL, NULL, NULL)",
        [w, b.name],
    )
    assert b.name in {r["tenant"] for r in sql.execute("SELECT tenant FROM pgsched.limit_wait")}
    ends = 0

    def finishes() -> None:
        nonlocal ends
        with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as fleet:
            until = time.monotonic() + FLOOD_SECONDS
            while time.monotonic() < until:
                fleet.execute(
                    "DELETE FROM pgsched.execution WHERE id = (SELECT min(id) FROM"
                    " pgsched.execution WHERE tenant = 'default' AND state = 'pending')"
                )
                ends += 1
                time.sleep(0.05)

    full_worker(dsn, sql, finishes)
    starts = sql.execute(
        "SELECT hour_starts FROM pgsched.tenant_usage WHERE tenant = %s", [a.name]
    ).fetchone()["hour_starts"]
    assert starts <= 5, (
        f"{ends} finishes elsewhere, B waiting at its quota: the full worker claimed "
        f"{starts} of A's runs and handed them back"
    )

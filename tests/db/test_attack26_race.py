"""Attacks on the fair share of migration 0026 under concurrent claims: eight claimers on
eight connections (as tests/db/test_limits.py drains), each a worker of every tenant.
Each test asserts the safe behaviour: it fails while the attack works."""

from __future__ import annotations

import threading

import psycopg
from psycopg.rows import dict_row

from pgsched.db import Session
from pgsched.worker.claims import TaskDefinitions

from .test_claim_tenants import register
from .test_fair_share import backlog, no_quotas

CLAIMERS = 8


def claim_ones(dsn: str, workers: list[int], times: int) -> list[BaseException]:
    """Each worker, on a connection of its own, claims one row ``times`` times at once with
    the others (the server's clock). Returns the errors raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(len(workers))

    def run(worker: int) -> None:
        try:
            with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
                session, defs = Session(conn), TaskDefinitions()
                start.wait(30)
                for _ in range(times):
                    defs.claim(session, queues=["q"], limit=1, worker_id=worker)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    return errors


def test_attack26_concurrent_claims_charge_every_start_to_the_virtual_time(dsn, db, sql):
    """Tenants a and b, weight 1, both with a backlog; eight workers of every tenant claim
    one row at a time, 60 each. Every start of a tenant counts 1/weight to its vtime, so
    each tenant's vtime is at least its starts. The claim reads the candidates' vtimes
    before it locks them (its first statement) and charges from what it read: a claim
    that read a's vtime while another claim served a, and locked a once that one had
    committed, writes a's vtime back from the old value, dropping the other's charge (a
    lost update). A tenant whose charges are lost takes more than its weight."""
    backlog(db, "a", 400)
    backlog(db, "b", 400)
    no_quotas(sql)
    workers = [register(db, None) for _ in range(CLAIMERS)]
    assert claim_ones(dsn, workers, 60) == []
    rows = sql.execute(
        "SELECT e.tenant, count(*)::int AS starts, u.vtime FROM pgsched.execution e"
        " JOIN pgsched.tenant_usage u ON u.tenant = e.tenant"
        " WHERE e.state = 'running' GROUP BY e.tenant, u.vtime ORDER BY e.tenant"
    ).fetchall()
    assert sum(r["starts"] for r in rows) == CLAIMERS * 60
    lost = {r["tenant"]: r["starts"] - r["vtime"] for r in rows if r["vtime"] < r["starts"]}
    assert not lost, f"starts not charged to the virtual time: {lost}; {rows}"

"""Attacks on the fair share of migration 0026 under concurrent claims: eight claimers on
eight connections (as tests/db/test_limits.py drains), each a worker of every tenant.
Each test asserts the safe behaviour: it fails while the attack works."""

from __future__ import annotations

import threading

import psycopg
from psycopg.rows import dict_row

from pgsched.db import Session
from pgsched.worker.claims import TaskDefinitions

from ..tenancy import two_tenants
from .test_attack18_claim import CLAIM, own_worker
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


def test_attack26_a_tenants_own_claimers_cannot_shed_its_virtual_time(dsn, sql):
    """B's engine login runs eight claimers of its own (its workers, its tenant only),
    claiming one at a time: the same lost update, now under B's control, drops B's own
    charges, so B's vtime lags its starts and B takes more than its weight on the
    installation's workers of every tenant, at A's expense."""
    with two_tenants(dsn) as (_a, b, _):
        sql.execute(
            "SELECT pgsched.enqueue_many_v1('job', array_fill('{}'::jsonb, ARRAY[600]),"
            " tenant => %s)",
            [b.name],
        )
        sql.execute("UPDATE pgsched.tenant SET max_running = NULL, max_starts_per_hour = NULL")
        errors: list[BaseException] = []
        start = threading.Barrier(CLAIMERS)

        def run() -> None:
            try:
                with psycopg.connect(b.engine, autocommit=True, row_factory=dict_row) as conn:
                    worker = own_worker(conn, b.name)
                    start.wait(30)
                    for _ in range(60):
                        conn.execute(CLAIM.replace("10, %s", "1, %s"), [worker, None]).fetchall()
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=run) for _ in range(CLAIMERS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert errors == []
        row = sql.execute(
            "SELECT (SELECT count(*) FROM pgsched.execution e WHERE e.tenant = u.tenant"
            " AND e.state = 'running')::int AS starts, u.vtime"
            " FROM pgsched.tenant_usage u WHERE u.tenant = %s",
            [b.name],
        ).fetchone()
        assert row["starts"] == CLAIMERS * 60
        assert row["vtime"] >= row["starts"], f"B shed {row['starts'] - row['vtime']} of {row}"

"""Attacks on the claim of issue 18 (pgsched_internal.execution_claim_v1, migration 0021)
by tenant B's own logins. Each test asserts the safe behaviour: it fails while the attack
works."""

from __future__ import annotations

import time

import psycopg
from psycopg import errors as pg_errors

from ..tenancy import login as _as
from ..tenancy import own_worker

CLAIM = (
    "SELECT * FROM pgsched_internal.execution_claim_v1(%s, '{default}', NULL, 10, %s, NULL, NULL)"
)


def test_attack18_a_tenants_engine_cannot_forge_the_claims_clock_past_its_hourly_quota(sql, ab):
    """The installation gives B 2 starts an hour. B's engine login passes p_now (the
    claim's clock, meant for tests and the installation) an hour ahead per claim: each
    claim sees a new clock hour, and B starts 10 in one real hour. The rows it claims get
    started_at in the future too (which also zeroes their compute: see test_attack18_usage)."""
    _, b, _ = ab
    sql.execute("SELECT pgsched.tenant_set_quotas_v1(%s, max_starts_per_hour => 2)", [b.name])
    sql.execute(
        "SELECT pgsched.enqueue_many_v1('job', array_fill('{}'::jsonb, ARRAY[10]), tenant => %s)",
        [b.name],
    )
    with _as(b.engine) as c:
        worker = own_worker(c, b.name)
        c.execute(CLAIM, [worker, None]).fetchall()  # the honest claim: 2, the quota
        for hours in range(1, 5):
            c.execute(
                CLAIM.replace("%s, NULL, NULL)", "now() + make_interval(hours => %s), NULL, NULL)"),
                [worker, hours],
            ).fetchall()
    running = sql.execute(
        "SELECT count(*) AS n, max(started_at) > now() + interval '1 minute' AS future "
        "FROM pgsched.execution WHERE tenant = %s AND state = 'running'",
        [b.name],
    ).fetchone()
    assert running["n"] <= 2, (
        f"B started {running['n']} executions in one hour against its quota of 2 "
        f"(started_at in the future: {running['future']})"
    )


def test_attack18_a_tenant_cannot_hold_anothers_claim_lock(sql, ab):
    """Finding 7. 0021's claim took a per-tenant advisory key, hashtextextended('pgsched.limits
    ' || A, 0), that B's application login could compute (A's name is in every wake-up
    notification) and hold: A's own worker's claim then waited for ever, and a worker
    serving every tenant passed A over on every claim. Since 0026 the claim's lock is A's
    tenant_usage row (FOR NO KEY UPDATE SKIP LOCKED); B's logins hold the old key and try
    to lock that row, and A's claims go on at once."""
    a, b, _ = ab
    sql.execute(
        "SELECT pgsched.enqueue_many_v1('job', array_fill('{}'::jsonb, ARRAY[4]), tenant => %s)",
        [a.name],
    )
    with _as(b.app) as hostile, _as(b.engine) as hostile_engine, _as(a.engine) as c:
        hostile.execute(
            "SELECT pg_advisory_lock(hashtextextended('pgsched.limits ' || %s, 0))", [a.name]
        )
        # no login of a tenant locks a row of tenant_usage: the app has no privilege on it,
        # the engine no UPDATE policy (row-level security applies UPDATE's policies to a
        # locking SELECT), so its own row is not locked either
        held = []
        for login in (hostile, hostile_engine):
            login.execute("BEGIN")
            try:
                held += login.execute(
                    "SELECT tenant FROM pgsched.tenant_usage FOR KEY SHARE"
                ).fetchall()
            except pg_errors.InsufficientPrivilege:
                login.execute("ROLLBACK")
                login.execute("BEGIN")
        assert held == []
        # a worker of the installation, serving every tenant, first
        instance = sql.execute(
            "INSERT INTO pgsched.worker (name, hostname, pid, queues, tenants, concurrency, "
            "heartbeat_interval) VALUES ('all', 'h', 1, '{default}', NULL, 4, 5) RETURNING id"
        ).fetchone()["id"]
        every = sql.execute(CLAIM.replace("10, %s", "4, %s"), [instance, None]).fetchall()
        worker = own_worker(c, a.name)
        c.execute("SET statement_timeout = '3s'")
        started = time.monotonic()
        rows = c.execute(CLAIM, [worker, None]).fetchall()
        waited = time.monotonic() - started
    seen = sorted({r["tenant"] for r in every})
    assert a.name in seen and b.name in seen, f"a worker of every tenant claimed for {seen} only"
    assert rows and waited < 1.0, f"A's own worker claimed {len(rows)}, waiting {waited:.1f} s"


def test_attack18_a_tenants_engine_cannot_start_work_past_its_quotas_without_the_claim(sql, ab):
    """The claim (a definer function) holds the installation's tenant quotas; but B's
    engine login keeps the UPDATE on pgsched.execution it had before 0021, so it moves its
    pending rows to running itself, with its worker and a lease, and finishes them as any
    claim's: a quota of 1 at once and 1 start an hour, 6 running, none counted."""
    _, b, _ = ab
    sql.execute(
        "SELECT pgsched.tenant_set_quotas_v1(%s, max_running => 1, max_starts_per_hour => 1)",
        [b.name],
    )
    sql.execute(
        "SELECT pgsched.enqueue_many_v1('job', array_fill('{}'::jsonb, ARRAY[5]), tenant => %s)",
        [b.name],
    )
    with _as(b.engine) as c:
        worker = own_worker(c, b.name)
        try:
            c.execute(
                "UPDATE pgsched.execution SET state = 'running', worker_id = %s, "
                "attempt = attempt + 1, started_at = now(), "
                "lease_id = nextval('pgsched.lease_id_seq') "
                "WHERE state = 'pending' AND run_at <= now()",
                [worker],
            )
        except psycopg.errors.InsufficientPrivilege:
            pass  # the safe answer
        usage = c.execute("SELECT running, hour_starts FROM pgsched.tenant_usage_v1()").fetchone()
    assert usage["running"] <= 1, (
        f"B runs {usage['running']} executions against its quota of 1 at once "
        f"({usage['hour_starts']} starts counted this hour, quota 1)"
    )


def test_attack18_a_heavier_tenant_does_not_starve_a_lighter_one_claim_by_claim(sql, ab):
    """Fair share by weight: B has weight 2, A weight 1, both with a backlog. A worker at
    capacity claims one at a time (its free slots). Each claim ranks B's picks 1/2, 2/2 and
    A's 1/1, and takes the first: B's 1/2, every time. B should get two thirds of the
    starts; it gets all of them, and A none, for as long as B has work ready (a weight of
    100 does the same to any claim of fewer than 100)."""
    a, b, _ = ab
    sql.execute("UPDATE pgsched.tenant SET max_running = NULL, max_starts_per_hour = NULL")
    sql.execute("SELECT pgsched.tenant_set_quotas_v1(%s, weight => 2)", [b.name])
    for t in (a, b):
        sql.execute(
            "SELECT pgsched.enqueue_many_v1('job', array_fill('{}'::jsonb, ARRAY[20]), tenant => %s)",
            [t.name],
        )
    worker = sql.execute(
        "INSERT INTO pgsched.worker (name, hostname, pid, queues, tenants, concurrency, "
        "heartbeat_interval) VALUES ('all', 'h', 1, '{default}', NULL, 4, 5) RETURNING id"
    ).fetchone()["id"]
    got = []
    for _ in range(9):
        got += sql.execute(
            "SELECT tenant FROM pgsched_internal.execution_claim_v1(%s, '{default}', NULL, 1, "
            "NULL, NULL, NULL)",
            [worker],
        ).fetchall()
    of_a = sum(r["tenant"] == a.name for r in got)
    assert of_a >= 2, f"of 9 claims of one, A (weight 1, beside B of weight 2) got {of_a}"


def test_attack18_a_claim_of_one_does_not_lock_and_read_every_tenant(dsn, sql):
    """Many tenants with work ready: a worker of every tenant asks for one execution. The
    claim try-locks every candidate tenant and runs claim_tenant_v1 for each (up to
    p_limit rows of each read FOR UPDATE), then keeps one: with 200 tenants a claim of one
    took about 230 ms here and held 201 tenant locks to its end, so a second worker's claim
    finds every lock taken and waits; claims are serial across the fleet, their cost
    growing with the number of tenants."""
    from pgsched.db import Database
    from pgsched.stores import tenants

    from ..factories import make_task

    db = Database.connect(dsn, max_size=2)
    try:
        for i in range(200):
            tenants.create(db, f"m{i:03d}")
            make_task(db, "job", tenant=f"m{i:03d}")
    finally:
        db.close()
    sql.execute("UPDATE pgsched.tenant SET max_running = NULL, max_starts_per_hour = NULL")
    sql.execute(
        "SELECT pgsched.enqueue_many_v1('job', array_fill('{}'::jsonb, ARRAY[5]), tenant => name) "
        "FROM pgsched.tenant WHERE name LIKE 'm%'"
    )
    worker = sql.execute(
        "INSERT INTO pgsched.worker (name, hostname, pid, queues, tenants, concurrency, "
        "heartbeat_interval) VALUES ('all', 'h', 1, '{default}', NULL, 4, 5) RETURNING id"
    ).fetchone()["id"]
    one = "SELECT * FROM pgsched_internal.execution_claim_v1(%s, '{default}', NULL, 1, NULL, NULL, NULL)"
    sql.execute(one, [worker]).fetchall()  # plans made
    with sql.transaction():
        started = time.monotonic()
        assert len(sql.execute(one, [worker]).fetchall()) == 1
        took = time.monotonic() - started
        # the tenants this claim holds: the tenant_usage rows another session cannot lock
        with _as(dsn) as other:
            free = other.execute(
                "SELECT count(*) AS n FROM (SELECT FROM pgsched.tenant_usage "
                "WHERE tenant LIKE 'm%' FOR NO KEY UPDATE SKIP LOCKED) f"
            ).fetchone()["n"]
        locks = 200 - free
    assert took < 0.05 and locks <= 2, (
        f"a claim of one among 200 tenants took {took * 1000:.0f} ms and held {locks} tenant locks"
    )

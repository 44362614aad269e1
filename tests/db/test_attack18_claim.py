"""Attacks on the claim of issue 18 (pgsched_internal.execution_claim_v1, migration 0021)
by tenant B's own logins. Each test asserts the safe behaviour: it fails while the attack
works."""

from __future__ import annotations

import psycopg
import pytest
from psycopg.rows import dict_row

from ..tenancy import two_tenants


@pytest.fixture
def ab(dsn):
    with two_tenants(dsn) as (a, b, made):
        yield a, b, made


def _as(dsn: str) -> psycopg.Connection:
    return psycopg.connect(dsn, autocommit=True, row_factory=dict_row)


def own_worker(conn: psycopg.Connection, tenant: str) -> int:
    """A worker registered by the tenant's own engine login, as `pgsched worker` does."""
    return conn.execute(
        "INSERT INTO pgsched.worker (name, hostname, pid, queues, tenants, concurrency, "
        "heartbeat_interval) VALUES ('w', 'h', 1, '{default}', ARRAY[%s], 4, 5) RETURNING id",
        [tenant],
    ).fetchone()["id"]


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

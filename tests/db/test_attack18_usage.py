"""Attacks on the usage job and the compute quota of issue 18 (migrations 0021, 0025) by
tenant B's own logins. Each test asserts the safe behaviour: it fails while the attack
works."""

from __future__ import annotations

import time

from pgsched.db import Database, Session
from pgsched.scheduler import usage
from pgsched.worker.completer import finish_params

from ..tenancy import login as _as
from .test_group_commit import item


def test_attack18_a_tenant_cannot_keep_the_usage_job_from_running(dsn, sql, ab):
    """B's application login holds hashtextextended('pgsched.usage', 0), the usage job's
    unseeded try-lock: every run of the leader's job then does nothing, so B (and every
    tenant) is never marked over its compute or log quota, and no quota alert opens."""
    _, b, _ = ab
    sql.execute(
        "SELECT pgsched.tenant_set_quotas_v1(%s, max_compute_minutes_per_month => 0)", [b.name]
    )
    db = Database.connect(dsn, max_size=2)
    try:
        with _as(b.app) as hostile:
            hostile.execute("SELECT pg_advisory_lock(hashtextextended('pgsched.usage', 0))")
            for _ in range(3):
                usage.measure(db)
            over = sql.execute(
                "SELECT over, measured_at FROM pgsched.tenant_usage WHERE tenant = %s", [b.name]
            ).fetchone()
    finally:
        db.close()
    assert "compute_minutes" in over["over"], (
        f"three usage runs measured nothing while B held the usage lock: {over}"
    )


def test_attack18_a_tenants_worker_cannot_report_its_compute_away(sql, ab):
    """Compute is finished_at - started_at as B's own engine login reports them in the
    finish: B claims, runs 1.5 s, and reports the attempt as started when it finished, so
    its compute this month stays 0 (a finish a month ahead, or a claim with a forged p_now,
    does the same)."""
    _, b, _ = ab
    with _as(b.engine) as c:
        worker = c.execute(
            "INSERT INTO pgsched.worker (name, hostname, pid, queues, tenants, concurrency, "
            "heartbeat_interval) VALUES ('w', 'h', 1, '{default}', ARRAY[%s], 4, 5) RETURNING id",
            [b.name],
        ).fetchone()["id"]
        (row,) = c.execute(
            "SELECT * FROM pgsched_internal.execution_claim_v1(%s, '{default}', NULL, 1, NULL, NULL, NULL)",
            [worker],
        ).fetchall()
        time.sleep(1.5)  # the run
        lie = item(row, finished_at=row["started_at"], started_at=row["started_at"])
        Session(c).one("execution_finish_many", worker_id=worker, **finish_params([lie]))
    counted = sql.execute(
        "SELECT coalesce(sum(compute_seconds), 0) AS s FROM pgsched.usage_delta WHERE tenant = %s",
        [b.name],
    ).fetchone()["s"]
    assert counted >= 1.0, f"B ran 1.5 s and was counted {counted} s of compute"

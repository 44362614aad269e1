"""Why a pending execution has not started, beyond the limits (migration 0033,
pgsched_internal.pending_reason_v1): a retry's backoff, a run enqueued for later, a queue
no live worker serves, and a tenant's login that asks about shared workers it cannot see."""

from __future__ import annotations

import re

import psycopg
from psycopg.rows import dict_row

from pgsched.stores import limits, tasks

from ..factories import make_task
from .test_claim import register

NO_WORKER = "no running worker serves queue default of tenant default"
AT = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(in (\d+) s\)"


def pending(db) -> int:
    make_task(db, "job")
    return tasks.trigger(db, "job")


def test_a_due_run_that_no_live_worker_serves_says_so(db, sql):
    ident = pending(db)
    assert limits.wait_reason(db, "default", ident) == NO_WORKER
    other = register(db, "imports-only", queues=("imports",))
    assert limits.wait_reason(db, "default", ident) == NO_WORKER  # serves another queue
    worker = register(db)
    assert limits.wait_reason(db, "default", ident) is None
    assert limits.wait_reasons(db, "default", [ident]) == {}
    # a worker whose heartbeat is three intervals old no longer counts as serving
    sql.execute(
        "UPDATE pgsched.worker SET last_heartbeat_at = now() - interval '16 s' WHERE id = %s",
        [worker],
    )
    assert limits.wait_reasons(db, "default", [ident]) == {ident: NO_WORKER}
    sql.execute("UPDATE pgsched.worker SET state = 'stopped' WHERE id = %s", [other])
    assert limits.wait_reason(db, "default", ident) == NO_WORKER


def test_a_worker_of_other_tenants_does_not_serve(db, sql):
    ident = pending(db)
    db.one(
        "worker_register",
        name="others",
        hostname="testhost",
        pid=4243,
        queues=["default"],
        tenants=["acme"],
        concurrency=4,
        heartbeat_interval=5.0,
        host_time=None,
        round_trip=None,
    )
    assert limits.wait_reason(db, "default", ident) == NO_WORKER


def test_a_limit_is_named_before_the_missing_worker(db, sql):
    ident = pending(db)
    sql.execute("SELECT pgsched.queue_pause_v1('default', 'vendor maintenance')")
    assert limits.wait_reason(db, "default", ident) == "queue default is paused: vendor maintenance"


def test_a_run_enqueued_for_later_says_when_it_is_due(db, sql):
    ident = pending(db)
    register(db)
    sql.execute(
        "UPDATE pgsched.execution SET run_at = now() + interval '90 s' WHERE id = %s", [ident]
    )
    reason = limits.wait_reason(db, "default", ident)
    assert reason is not None
    m = re.fullmatch("due at " + AT, reason)
    assert m and 88 <= int(m.group(1)) <= 90, reason


def test_a_retry_in_backoff_says_which_attempt_waits_and_until_when(db, sql):
    ident = pending(db)
    sql.execute(
        "UPDATE pgsched.execution SET attempt = 1, run_at = now() + interval '30 s',"
        " budget_delay_seconds = 12 WHERE id = %s",
        [ident],
    )
    reason = limits.wait_reason(db, "default", ident)
    assert reason is not None
    m = re.fullmatch(
        "attempt 1 failed; attempt 2 waits out its retry backoff until "
        + AT
        + r" \(12 s of it for the retry budget\)",
        reason,
    )
    assert m and 28 <= int(m.group(1)) <= 30, reason


def test_a_tenants_login_sees_a_shared_worker_serve_it_and_may_not_ask_for_another(dsn, db, ab):
    """The login sees, under row-level security, only workers dedicated to its tenant; the
    reason still counts a shared one (tenants NULL), and the definer answers nothing about
    another tenant's queues."""
    a, b, _ = ab
    query = (
        "SELECT pgsched_internal.pending_reason_v1(e) AS r FROM pgsched.execution e WHERE id = %s"
    )
    with psycopg.connect(a.engine, autocommit=True, row_factory=dict_row) as c:
        assert c.execute("SELECT count(*) AS n FROM pgsched.worker").fetchone() == {"n": 0}
        assert c.execute(query, [a.pending_id]).fetchone() == {
            "r": f"no running worker serves queue default of tenant {a.name}"
        }
        register(db, "shared")  # every tenant
        assert c.execute("SELECT count(*) AS n FROM pgsched.worker").fetchone() == {"n": 0}
        assert c.execute(query, [a.pending_id]).fetchone() == {"r": None}
        asks = "SELECT pgsched_internal.queue_served_v1(%s, 'default') AS s"
        assert c.execute(asks, [a.name]).fetchone() == {"s": True}
        assert c.execute(asks, [b.name]).fetchone() == {"s": None}

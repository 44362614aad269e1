"""The leader's usage job (pgsched/scheduler/usage.py, sql/usage.sql, migration 0025):
compute seconds of the month's attempts and stored log bytes counted exactly and
incrementally, the slow quotas held in the claim and lifted at the next run, an alert once
per crossing of any quota, seen by its tenant alone."""

from __future__ import annotations

import json

import psycopg
import pytest
from click.testing import CliRunner
from psycopg.rows import dict_row

from pgsched.cli import main
from pgsched.db import Session
from pgsched.limits import Quota, SlowQuota
from pgsched.scheduler.usage import measure
from pgsched.worker.completer import finish_params

from ..factories import make_task
from ..helpers import notifications_until_marker
from ..tenancy import two_tenants
from .test_claim import claim, register
from .test_group_commit import item as finish_item


def attempt(sql, tenant: str, secs: float, end: str | None = None) -> None:
    """An execution of ``tenant`` that ran ``secs`` seconds by the database's clock: a row
    claimed ``secs`` seconds ago (its started_at) that leaves running now, as a finish moves
    it (compute counts from the claim to the statement that moves the row out of running,
    migration 0028; the worker's reported times count for nothing). ``end``: an SQL instant
    in the past instead, when such a statement wrote its delta (a statement cannot run in
    the past), counted only now."""
    if end is not None:
        sql.execute(
            f"INSERT INTO pgsched.usage_delta (tenant, month_start, compute_seconds)"
            f" VALUES (%s, date_trunc('month', {end}, 'UTC'), %s)",
            [tenant, secs],
        )
        return
    task = sql.execute(
        "SELECT id FROM pgsched.task WHERE tenant = %s AND name = 'ran'", [tenant]
    ).fetchone() or make_task(Session(sql), "ran", tenant=tenant)
    made = sql.execute(
        "INSERT INTO pgsched.execution (tenant, task_id, scheduled_at, run_at, state, attempt,"
        " started_at, lease_id) VALUES (%s, %s, now(), now(), 'running', 1,"
        " statement_timestamp() - make_interval(secs => %s), 1) RETURNING id",
        [tenant, task["id"], secs],
    ).fetchone()
    sql.execute("DELETE FROM pgsched.execution WHERE id = %s", [made["id"]])


def ran(secs: float):
    """Seconds counted for an attempt() of ``secs``: the statements between its claim and
    its end take a little time of their own."""
    return pytest.approx(secs, abs=0.5)


def log_lines(sql, tenant: str, lines: list[str], at: str = "now()") -> None:
    sql.execute(
        "INSERT INTO pgsched.execution_log (execution_id, attempt, tenant, seq, stream, logged_at,"
        f" line) SELECT 1, 1, %s, o, 'stdout', {at}, l FROM unnest(%s::text[]) WITH ORDINALITY u(l, o)",
        [tenant, lines],
    )


def usage(sql, tenant: str) -> dict:
    return sql.execute(
        "SELECT month_start, compute_seconds, log_bytes, over, alerted, measured_at"
        " FROM pgsched.tenant_usage WHERE tenant = %s",
        [tenant],
    ).fetchone()


def quota_alerts(sql, tenant: str) -> list[dict]:
    return sql.execute(
        "SELECT details->>'quota' AS quota, resolved_at IS NULL AS open FROM pgsched.alert"
        " WHERE tenant = %s AND kind = 'quota' ORDER BY id",
        [tenant],
    ).fetchall()


def test_totals_are_exact_this_months_compute_and_every_stored_log_byte(db, sql):
    sql.execute("INSERT INTO pgsched.tenant (name) VALUES ('t1'), ('t2')")
    attempt(sql, "t1", 10)
    attempt(sql, "t1", 20.5)
    attempt(sql, "t2", 7)
    # ended last month: not this month's compute
    attempt(sql, "t1", 1000, end="date_trunc('month', now(), 'UTC') - interval '1 hour'")
    log_lines(sql, "t1", ["hello", "été"])  # 5 + 5 bytes (é is two in UTF-8)
    measure(db)
    u1, u2 = usage(sql, "t1"), usage(sql, "t2")
    assert u1["compute_seconds"] == ran(30.5) and u2["compute_seconds"] == ran(7)
    assert u1["log_bytes"] == 10 and u2["log_bytes"] == 0
    month = sql.execute("SELECT date_trunc('month', now(), 'UTC') AS m").fetchone()["m"]
    assert u1["month_start"] == month and u1["over"] == [] and u1["measured_at"] is not None
    # nothing new: nothing changes, and the counted deltas are gone
    measure(db)
    assert usage(sql, "t1") == u1
    assert sql.execute("SELECT count(*) AS n FROM pgsched.usage_delta").fetchone()["n"] == 0
    # new work adds to the totals; deleted lines come off them
    attempt(sql, "t1", 4.5)
    log_lines(sql, "t1", ["x" * 100])
    sql.execute("DELETE FROM pgsched.execution_log WHERE line = 'hello'")
    measure(db)
    assert usage(sql, "t1")["compute_seconds"] == ran(35.0)
    assert usage(sql, "t1")["log_bytes"] == 105


def test_a_write_not_yet_committed_is_counted_once_at_the_run_after_its_commit(dsn, db, sql):
    sql.execute("INSERT INTO pgsched.tenant (name) VALUES ('t1')")
    attempt(sql, "t1", 1)
    with psycopg.connect(dsn, row_factory=dict_row) as other:  # a transaction left open
        attempt(other, "t1", 100)
        measure(db)
        assert usage(sql, "t1")["compute_seconds"] == ran(1)
        other.commit()
    measure(db)
    measure(db)
    assert usage(sql, "t1")["compute_seconds"] == ran(101)


def test_a_new_month_starts_compute_from_zero_and_keeps_the_log_bytes(db, sql):
    sql.execute("INSERT INTO pgsched.tenant (name, max_compute_minutes_per_month) VALUES ('t1', 1)")
    # as last month's runs left it: over its compute, 50 log bytes
    sql.execute(
        "UPDATE pgsched.tenant_usage SET month_start = date_trunc('month', now(), 'UTC') - interval"
        " '1 month', compute_seconds = 5000, log_bytes = 50, over = '{compute_minutes}',"
        " alerted = '{compute_minutes}' WHERE tenant = 't1'"
    )
    # an attempt of last month counted only now: last month's, not this one's
    attempt(sql, "t1", 30, end="date_trunc('month', now(), 'UTC') - interval '1 minute'")
    attempt(sql, "t1", 12)
    changes = measure(db)
    u = usage(sql, "t1")
    assert u["compute_seconds"] == ran(12) and u["log_bytes"] == 50 and u["over"] == []
    assert {(c["change"], c["quota"]) for c in changes} >= {("released", None)}


def test_over_a_slow_quota_the_claim_takes_nothing_and_work_waits_until_back_under(dsn, db, sql):
    sql.execute("INSERT INTO pgsched.tenant (name, max_compute_minutes_per_month) VALUES ('t1', 1)")
    make_task(db, "job", tenant="t1")
    sql.execute("SELECT pgsched.enqueue_v1('job', '{}', now() - interval '1 s', tenant => 't1')")
    worker = register(db)
    attempt(sql, "t1", 61)  # past one minute
    changes = measure(db)
    assert ("held", "t1", "compute_minutes") in {
        (c["change"], c["tenant"], c["quota"]) for c in changes
    }
    assert usage(sql, "t1")["over"] == [SlowQuota.COMPUTE_MINUTES]
    assert claim(db, worker) == []
    [why] = sql.execute(
        "SELECT pgsched_internal.wait_reason_v1(e) AS r FROM pgsched.execution e"
    ).fetchall()
    assert why["r"] == "tenant t1 is over its quota of 1 compute minutes this month"
    assert sql.execute("SELECT state FROM pgsched.execution").fetchone()["state"] == "pending"
    # the quota raised: the next run lifts the hold and wakes the tenant's workers
    sql.execute("UPDATE pgsched.tenant SET max_compute_minutes_per_month = 2 WHERE name = 't1'")
    with psycopg.connect(dsn, autocommit=True) as listener:
        listener.execute("LISTEN pgsched_execution")
        changes = measure(db)
        assert "t1" in notifications_until_marker(listener, sql)
    assert ("released", "t1") in {(c["change"], c["tenant"]) for c in changes}
    assert len(claim(db, worker)) == 1


def test_log_bytes_over_their_quota_hold_work_until_pruned_lines_bring_them_under(db, sql):
    sql.execute("INSERT INTO pgsched.tenant (name, max_log_bytes) VALUES ('t1', 100)")
    make_task(db, "job", tenant="t1")
    sql.execute("SELECT pgsched.enqueue_v1('job', '{}', now() - interval '1 s', tenant => 't1')")
    worker = register(db)
    log_lines(sql, "t1", ["y" * 60, "z" * 60])
    measure(db)
    assert usage(sql, "t1")["over"] == [SlowQuota.LOG_BYTES]
    assert claim(db, worker) == []
    assert (
        sql.execute(
            "SELECT pgsched_internal.wait_reason_v1(e) AS r FROM pgsched.execution e"
        ).fetchone()["r"]
        == "tenant t1 is over its quota of 100 stored log bytes"
    )
    sql.execute("DELETE FROM pgsched.execution_log WHERE line LIKE 'z%'")
    measure(db)
    assert usage(sql, "t1")["log_bytes"] == 60 and usage(sql, "t1")["over"] == []
    assert len(claim(db, worker)) == 1


def test_a_dropped_log_partition_takes_its_bytes_off_the_tenants_usage(db, sql):
    sql.execute("INSERT INTO pgsched.tenant (name) VALUES ('t1')")
    day = "date_trunc('day', now(), 'UTC') - interval '40 days'"
    [name] = [
        r["p"]
        for r in sql.execute(
            f"SELECT pgsched_internal.partition_ensure_v1(({day})::date, 1) AS p"
        ).fetchall()
        if r["p"].startswith("execution_log")
    ]
    log_lines(sql, "t1", ["old" * 10], at=f"{day} + interval '1 hour'")
    log_lines(sql, "t1", ["new"])
    measure(db)
    assert usage(sql, "t1")["log_bytes"] == 33
    assert sql.execute(
        "SELECT pgsched_internal.partition_drop_v1(%s, 'execution_log') AS d", [name]
    ).fetchone()["d"]
    measure(db)
    assert usage(sql, "t1")["log_bytes"] == 3


def test_reaching_a_quota_alerts_once_per_crossing(db, sql):
    sql.execute("INSERT INTO pgsched.tenant (name, max_running) VALUES ('t1', 1)")
    make_task(db, "job", tenant="t1")
    sql.execute(
        "SELECT pgsched.enqueue_v1('job', '{}', now() - interval '1 s', tenant => 't1')"
        " FROM generate_series(1, 2)"
    )
    worker = register(db)
    [first] = claim(db, worker)
    opened = measure(db)
    assert [(c["change"], c["quota"]) for c in opened] == [("opened", Quota.RUNNING)]
    assert opened[0]["details"] == {"quota": "running", "used": 1, "limit": 1}
    measure(db)
    measure(db)
    assert quota_alerts(sql, "t1") == [{"quota": "running", "open": True}]
    assert usage(sql, "t1")["alerted"] == ["running"] and usage(sql, "t1")["over"] == []
    now = sql.execute("SELECT clock_timestamp() AS t").fetchone()["t"]
    db.one(
        "execution_finish_many",
        worker_id=worker,
        **finish_params([finish_item(first, finished_at=now)]),
    )
    assert [c["change"] for c in measure(db)] == ["resolved"]
    claim(db, worker)  # the second reaches the quota again: a second crossing
    measure(db)
    assert quota_alerts(sql, "t1") == [
        {"quota": "running", "open": False},
        {"quota": "running", "open": True},
    ]


def test_a_tenant_sees_its_own_quota_alerts_and_no_other_tenants(dsn, db, sql):
    with two_tenants(dsn) as (a, b, _):
        sql.execute("UPDATE pgsched.tenant SET max_log_bytes = 1 WHERE name = %s", [a.name])
        with psycopg.connect(a.engine) as conn:  # as its worker writes a line: counted
            conn.execute(
                "INSERT INTO pgsched.execution_log (execution_id, attempt, tenant, seq, stream,"
                " logged_at, line) VALUES (%s, 1, %s, 1, 'stdout', now(), 'too many bytes')",
                [a.pending_id, a.name],
            )
        measure(db)
        assert usage(sql, a.name)["log_bytes"] == 14
        assert quota_alerts(sql, a.name) == [{"quota": "log_bytes", "open": True}]
        for login, tenant, seen in ((a.engine, a.name, 1), (b.engine, b.name, 0)):
            with psycopg.connect(login, row_factory=dict_row) as conn:
                rows = conn.execute(
                    "SELECT tenant FROM pgsched.alert WHERE kind = 'quota'"
                ).fetchall()
                assert rows == [{"tenant": a.name}] * seen, tenant
                # and no tenant's login writes its own usage down
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(
                        "INSERT INTO pgsched.usage_delta (tenant, log_bytes) VALUES (%s, -1000)",
                        [tenant],
                    )


def test_alert_list_prints_the_tenants_quota_alerts(dsn, db, sql):
    sql.execute("INSERT INTO pgsched.tenant (name, max_log_bytes) VALUES ('t1', 1)")
    log_lines(sql, "t1", ["two bytes or more"])
    measure(db)
    runner = CliRunner()
    got = runner.invoke(main, ["--dsn", dsn, "--tenant", "t1", "alert", "list", "--json"])
    assert got.exit_code == 0, got.output
    [row] = json.loads(got.output)
    assert row["kind"] == "quota" and row["task_name"] is None and row["resolved_at"] is None
    assert row["details"] == {"quota": "log_bytes", "used": 17, "limit": 1}
    text = runner.invoke(main, ["--dsn", dsn, "--tenant", "t1", "alert", "list"])
    assert text.exit_code == 0 and "log_bytes" in text.output
    other = runner.invoke(main, ["--dsn", dsn, "alert", "list", "--json"])  # tenant default
    assert json.loads(other.output) == []


def test_a_second_run_beside_one_in_progress_counts_nothing(dsn, db, sql):
    """Two leaders for a moment: the run that finds the usage lock taken does nothing (two
    at once would each write a total computed from the row as it was before the other:
    one run's deltas would be lost); the next run counts them once."""
    sql.execute("INSERT INTO pgsched.tenant (name) VALUES ('t1')")
    attempt(sql, "t1", 5)
    with psycopg.connect(dsn) as other:
        other.execute("SELECT pg_advisory_xact_lock(pgsched_internal.internal_key_v1('usage'))")
        assert measure(db) == []
        assert usage(sql, "t1")["compute_seconds"] == 0
    measure(db)
    assert usage(sql, "t1")["compute_seconds"] == ran(5)


def test_the_hourly_quota_alerts_when_reached_and_resolves_in_the_next_hour(db, sql):
    sql.execute("INSERT INTO pgsched.tenant (name, max_starts_per_hour) VALUES ('t1', 10)")
    sql.execute(
        "UPDATE pgsched.tenant_usage SET hour_start = date_trunc('hour', now(), 'UTC'),"
        " hour_starts = 10 WHERE tenant = 't1'"
    )
    assert [(c["change"], c["quota"]) for c in measure(db)] == [("opened", "starts_per_hour")]
    # the claims' count is of the hour before: a new hour, under the quota again
    sql.execute("UPDATE pgsched.tenant_usage SET hour_start = hour_start - interval '1 hour'")
    assert [(c["change"], c["quota"]) for c in measure(db)] == [("resolved", "starts_per_hour")]
    assert usage(sql, "t1")["alerted"] == []

"""pgsched.health against a real server: the sessions that hold back the cleanup horizon
(their pid, application name, state, age) and the clock offsets the heartbeats store,
with the warnings past their thresholds; and the same in /metrics."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg.rows import dict_row

from pgsched import health, metrics
from pgsched.clock import ClockProbe
from pgsched.db import Database

from ..helpers import wait_until
from .test_metrics import scrape

# One connection in a transaction rolled back after each test (tests/conftest.py: tx);
# the tests that ask for dsn, or are marked clone, get a database of their own.
pytestmark = pytest.mark.rolled_back


def _open_snapshot(dsn: str, application_name: str) -> psycopg.Connection:
    """A session left idle in a REPEATABLE READ transaction that has read a table: its
    snapshot (backend_xmin) stays until it ends."""
    conn = psycopg.connect(dsn, application_name=application_name, row_factory=dict_row)
    conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
    conn.execute("SELECT count(*) FROM pgsched.execution").fetchone()
    return conn


def _activity(sql: psycopg.Connection, pid: int) -> dict:
    row = sql.execute(
        "SELECT xact_start, state, backend_xmin::text AS xmin FROM pg_stat_activity WHERE pid = %s",
        [pid],
    ).fetchone()
    assert row is not None
    return row


def test_a_session_idle_in_transaction_is_the_oldest_snapshot_with_its_pid_age_and_state(
    db: Database, dsn: str, sql: psycopg.Connection
) -> None:
    assert health.check(db).snapshot_holders == []  # a fresh database: nothing is held
    with _open_snapshot(dsn, "report left open") as left:
        pid = left.info.backend_pid
        seen = _activity(sql, pid)
        assert seen["state"] == "idle in transaction" and seen["xmin"] is not None

        checked = health.check(db)

        oldest = checked.oldest_snapshot
        assert oldest is not None
        assert (oldest.kind, oldest.pid, oldest.application_name, oldest.state) == (
            "session",
            pid,
            "report left open",
            "idle in transaction",
        )
        assert oldest.since == seen["xact_start"]
        now = sql.execute("SELECT now() AS t").fetchone()["t"]
        assert (
            oldest.age_seconds is not None
            and abs(oldest.age_seconds - (now - oldest.since).total_seconds()) < 1
        )
        assert oldest.xid_age >= 0
        assert not oldest.warn and checked.warnings == []  # under the default 300 s
        assert checked.snapshot_age_warn_seconds == 300

        sql.execute(
            "UPDATE pgsched.setting SET value = '1' WHERE name = 'snapshot_age_warn_seconds'"
        )
        warned = wait_until(lambda: health.check(db).warnings, message="the warning past 1 s")
        assert [w["kind"] for w in warned] == ["old_snapshot"]
        assert f"pid {pid} 'report left open'" in warned[0]["message"]
        assert f"pg_terminate_backend({pid})" in warned[0]["message"]

        m = scrape(db)
        [(labels, one)] = m["pgsched_oldest_snapshot_holder"].items()
        assert one == 1 and dict(labels) == {
            "kind": "session",
            "pid": str(pid),
            "application_name": "report left open",
            "usename": dict(labels)["usename"],
            "state": "idle in transaction",
        }
        assert m["pgsched_oldest_snapshot_age_seconds"][()] > 1
        assert m["pgsched_snapshot_age_warn_seconds"][()] == 1
        assert m["pgsched_health_warnings"][(("kind", "old_snapshot"),)] == 1
        assert m["pgsched_health_warnings"][(("kind", "clock_offset"),)] == 0

    # ended: nothing holds the horizon any more
    wait_until(
        lambda: (
            sql.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone() is None
        ),
        message="the session to end",
    )
    checked = health.check(db)
    assert checked.snapshot_holders == [] and checked.warnings == []
    fresh = {
        f.name: f.samples for f in metrics.families(db)
    }  # scrape() would answer from its 5 s cache
    assert fresh["pgsched_oldest_snapshot_holder"] == []
    assert [s.value for s in fresh["pgsched_oldest_snapshot_age_seconds"]] == [0]


def test_a_read_committed_transaction_that_wrote_holds_the_horizon_by_its_transaction_id(
    db: Database, dsn: str, sql: psycopg.Connection
) -> None:
    # Between statements a READ COMMITTED transaction has no snapshot (backend_xmin is
    # empty), but its transaction id still keeps every newer dead row from VACUUM.
    with psycopg.connect(dsn, application_name="wrote and waits") as conn:
        conn.execute("UPDATE pgsched.setting SET updated_at = now() WHERE name = 'misfire_all_cap'")
        pid = conn.info.backend_pid
        row = sql.execute(
            "SELECT backend_xmin::text AS xmin, backend_xid::text AS xid FROM pg_stat_activity "
            "WHERE pid = %s",
            [pid],
        ).fetchone()
        assert row["xmin"] is None and row["xid"] is not None

        [holder] = health.check(db).snapshot_holders

        assert (holder.pid, holder.application_name, holder.state) == (
            pid,
            "wrote and waits",
            "idle in transaction",
        )
        conn.rollback()


def test_the_oldest_of_several_comes_first_and_other_databases_sessions_are_left_out(
    db: Database, dsn: str, empty_dsn: str, sql: psycopg.Connection
) -> None:
    with _open_snapshot(dsn, "first") as first:
        wait_until(
            lambda: sql.execute(
                "SELECT now() - xact_start > interval '0.2 seconds' AS ok "
                "FROM pg_stat_activity WHERE pid = %s",
                [first.info.backend_pid],
            ).fetchone()["ok"],
            message="the first to be 0.2 s old",
        )
        with (
            _open_snapshot(dsn, "second"),
            psycopg.connect(empty_dsn, application_name="elsewhere") as other,
        ):
            other.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
            other.execute("SELECT 1").fetchone()  # a snapshot in another database

            holders = health.check(db).snapshot_holders

            assert [h.application_name for h in holders] == ["first", "second"]
            assert holders[0].age_seconds > holders[1].age_seconds


@pytest.mark.clone("health.check opens a REPEATABLE READ transaction of its own")
def test_a_heartbeat_stores_the_hosts_clock_offset_and_an_offset_past_the_threshold_is_warned(
    db: Database, sql: psycopg.Connection
) -> None:
    worker = db.one(
        "worker_register",
        name="skewed",
        hostname="h",
        pid=1,
        queues=["default"],
        tenants=None,
        concurrency=1,
        heartbeat_interval=5,
        host_time=None,
        round_trip=None,
    )
    assert worker is not None
    ahead = datetime.now(UTC) + timedelta(seconds=300)
    db.one(
        "worker_heartbeat", id=worker["id"], running=0, held=[], host_time=ahead, round_trip=0.002
    )
    sql.execute(
        "INSERT INTO pgsched.scheduler_node (name, hostname, pid, role) VALUES ('s', 'h2', 2, 'standby')"
    )
    node = sql.execute("SELECT id FROM pgsched.scheduler_node").fetchone()["id"]
    probe = ClockProbe()
    db.exec("scheduler_node_seen", id=node, role="standby", epoch=None, **probe.send())

    checked = health.check(db)

    by_kind = {c.kind: c for c in checked.clock_offsets}
    assert (
        abs(by_kind["worker"].offset_seconds - 300) < 1
        and by_kind["worker"].round_trip_seconds == 0.002
    )
    assert (
        abs(by_kind["scheduler"].offset_seconds) < 1
        and by_kind["scheduler"].round_trip_seconds is None
    )
    assert by_kind["worker"].warn and not by_kind["scheduler"].warn
    [warning] = checked.warnings
    assert (
        warning["kind"] == "clock_offset"
        and "worker" in warning["message"]
        and "300." in warning["message"]
    )
    assert "ahead of the database" in warning["message"]
    m = scrape(db)
    assert (
        abs(
            m["pgsched_clock_offset_seconds"][
                (("name", f"skewed ({worker['id']})"), ("process", "worker"))
            ]
            - 300
        )
        < 1
    )
    assert m["pgsched_health_warnings"][(("kind", "clock_offset"),)] == 1
    assert m["pgsched_clock_offset_warn_seconds"][()] == 1

    sql.execute("UPDATE pgsched.setting SET value = '600' WHERE name = 'clock_offset_warn_seconds'")
    assert health.check(db).warnings == []


def test_a_stopped_or_silent_process_is_not_listed(db: Database, sql: psycopg.Connection) -> None:
    sql.execute(
        "INSERT INTO pgsched.worker (name, hostname, pid, queues, concurrency, clock_offset_seconds, "
        "last_heartbeat_at, state) VALUES "
        "('silent', 'h', 1, '{default}', 1, 500, now() - interval '1 minute', 'running'), "
        "('stopped', 'h', 2, '{default}', 1, 500, now(), 'stopped')"
    )
    sql.execute(
        "INSERT INTO pgsched.scheduler_node (name, hostname, pid, role, last_seen_at, clock_offset_seconds) "
        "VALUES ('gone', 'h', 3, 'standby', now() - interval '1 minute', 500)"
    )

    checked = health.check(db)

    assert checked.clock_offsets == [] and checked.warnings == []

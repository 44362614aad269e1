"""History partition maintenance (pgsched.scheduler.maintain_partitions and the
partition_ensure_v1, partition_expired_v1 and partition_drop_v1 functions) on a real database."""

from __future__ import annotations

import time
from datetime import UTC, date, datetime, timedelta, timezone

import psycopg
import psycopg.sql
import pytest

from pgsched import scheduler
from pgsched.scheduler import maintain_partitions
from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec

# One connection in a transaction rolled back after each test (tests/conftest.py: tx);
# the tests that ask for dsn, or are marked clone, get a database of their own.
pytestmark = pytest.mark.rolled_back

PARENTS = ("execution_history", "execution_attempt", "execution_log")
NOW = datetime(2030, 3, 10, 12, 0, tzinfo=UTC)


def day_name(parent: str, day: date) -> str:
    return f"{parent}_p{day:%Y%m%d}"


def names(parents, days) -> set[str]:
    return {day_name(p, d) for p in parents for d in days}


def days_from(first: date, count: int) -> list[date]:
    return [first + timedelta(days=i) for i in range(count)]


@pytest.fixture(autouse=True)
def no_dated_partitions(sql):
    """These tests run the clock in 2030: start them without the partitions of the real
    days that ``pgsched migrate`` creates."""
    for name in partitions(sql):
        sql.execute(psycopg.sql.SQL("DROP TABLE pgsched.{}").format(psycopg.sql.Identifier(name)))


def partitions(sql) -> set[str]:
    """Dated partitions attached to the three history tables."""
    rows = sql.execute(
        """
        SELECT c.relname FROM pg_inherits i
          JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent
         WHERE p.relnamespace = 'pgsched'::regnamespace AND p.relname = ANY(%s)
           AND c.relname ~ '_p[0-9]{8}$'""",
        [list(PARENTS)],
    ).fetchall()
    return {r["relname"] for r in rows}


def tables(sql) -> set[str]:
    """Every pgsched table whose name looks like a dated partition, attached or not."""
    rows = sql.execute(
        "SELECT relname FROM pg_class WHERE relnamespace = 'pgsched'::regnamespace "
        "AND relkind IN ('r', 'p') AND relname ~ '_p[0-9]{8}$'"
    ).fetchall()
    return {r["relname"] for r in rows}


def insert_history(sql, execution_id: int, finished_at: datetime) -> str:
    return sql.execute(
        """
        INSERT INTO pgsched.execution_history (id, task_id, scheduled_at, run_at, state, trigger,
            priority, queue, params, attempt, max_attempts, created_at, finished_at)
        VALUES (%(id)s, 1, %(t)s, %(t)s, 'succeeded', 'api', 5, 'default', '{}', 1, 1, %(t)s, %(t)s)
        RETURNING tableoid::regclass::text AS part""",
        {"id": execution_id, "t": finished_at},
    ).fetchone()["part"]


def insert_attempt(sql, execution_id: int, started_at: datetime) -> str:
    return sql.execute(
        """
        INSERT INTO pgsched.execution_attempt
               (execution_id, attempt, state, started_at, finished_at)
        VALUES (%(id)s, 1, 'failed', %(t)s, %(t)s)
        RETURNING tableoid::regclass::text AS part""",
        {"id": execution_id, "t": started_at},
    ).fetchone()["part"]


def insert_log(sql, execution_id: int, logged_at: datetime) -> str:
    return sql.execute(
        """
        INSERT INTO pgsched.execution_log (execution_id, attempt, seq, stream, logged_at, line)
        VALUES (%(id)s, 1, 1, 'stdout', %(t)s, 'hello')
        RETURNING tableoid::regclass::text AS part""",
        {"id": execution_id, "t": logged_at},
    ).fetchone()["part"]


def test_creates_daily_partitions_from_yesterday_to_premake_days_ahead(db, sql):
    assert partitions(sql) == set()
    report = scheduler.maintain_partitions(db, NOW, retention_days=30, premake_days=3)
    expected = names(PARENTS, days_from(date(2030, 3, 9), 5))  # 9th (yesterday) .. 13th
    assert set(report["created"]) == expected
    assert len(report["created"]) == 15
    assert partitions(sql) == expected
    assert report["dropped"] == [] and report["kept_live"] == [] and report["default_rows"] == {}


def test_partition_bounds_are_utc_days(db, sql):
    report = scheduler.maintain_partitions(db, NOW, retention_days=30, premake_days=1)
    assert set(report["created"]) == names(PARENTS, days_from(date(2030, 3, 9), 3))
    bounds = sql.execute("""
        SELECT pg_get_expr(relpartbound, oid) AS b FROM pg_class
         WHERE relname = 'execution_history_p20300310'""").fetchone()["b"]
    assert bounds == "FOR VALUES FROM ('2030-03-10 00:00:00+00') TO ('2030-03-11 00:00:00+00')"
    assert (
        insert_history(sql, 1, datetime(2030, 3, 10, 23, 59, 59, 999999, tzinfo=UTC))
        == "pgsched.execution_history_p20300310"
    )
    assert (
        insert_history(sql, 2, datetime(2030, 3, 11, 0, 0, tzinfo=UTC))
        == "pgsched.execution_history_p20300311"
    )
    # 00:30 in Berlin on the 11th is 23:30Z on the 10th.
    berlin = datetime(2030, 3, 11, 0, 30, tzinfo=timezone(timedelta(hours=1)))
    assert insert_history(sql, 3, berlin) == "pgsched.execution_history_p20300310"


def test_is_idempotent(db, sql):
    first = scheduler.maintain_partitions(db, NOW, retention_days=30, premake_days=3)
    before = partitions(sql)
    again = scheduler.maintain_partitions(db, NOW, retention_days=30, premake_days=3)
    assert again == {"created": [], "dropped": [], "kept_live": [], "busy": [], "default_rows": {}}
    assert partitions(sql) == before == set(first["created"])
    # A few hours later on the same day: still nothing to do.
    assert scheduler.maintain_partitions(db, NOW + timedelta(hours=10), 30, 3)["created"] == []


def test_forty_days_later_new_partitions_exist_rows_land_in_them_and_old_ones_are_gone(db, sql):
    old = set(scheduler.maintain_partitions(db, NOW, retention_days=30, premake_days=3)["created"])
    later = NOW + timedelta(days=40)  # 2030-04-19 12:00Z
    report = scheduler.maintain_partitions(db, later, retention_days=30, premake_days=3)

    new = names(PARENTS, days_from(date(2030, 4, 18), 5))
    assert set(report["created"]) == new
    # Everything made on the 10th ended by the 14th, before the cutoff (2030-03-20 12:00Z).
    assert set(report["dropped"]) == old
    assert report["kept_live"] == []
    assert partitions(sql) == new
    assert tables(sql) == new  # detached and dropped, not just detached

    assert insert_history(sql, 1, later) == "pgsched.execution_history_p20300419"
    assert insert_attempt(sql, 1, later) == "pgsched.execution_attempt_p20300419"
    assert insert_log(sql, 1, later) == "pgsched.execution_log_p20300419"
    assert insert_log(sql, 1, later + timedelta(days=3)) == "pgsched.execution_log_p20300422"


def test_retention_keeps_partitions_that_have_not_fully_expired(db, sql):
    scheduler.maintain_partitions(db, NOW, retention_days=30, premake_days=3)
    # Cutoff 2030-03-12 12:00Z: the 9th, 10th and 11th ended before it; the 12th has not.
    report = scheduler.maintain_partitions(
        db, NOW + timedelta(days=32), retention_days=30, premake_days=0
    )
    assert set(report["dropped"]) == names(PARENTS, days_from(date(2030, 3, 9), 3))
    assert names(PARENTS, [date(2030, 3, 12), date(2030, 3, 13)]) <= partitions(sql)


def test_a_partition_holding_a_live_execution_is_kept(db, sql):
    tasks.create(db, TaskSpec(name="flaky", command="false", max_attempts=3), now=NOW)
    live = tasks.trigger(db, "flaky")  # pending again after a failed first attempt
    finished = live + 1000
    scheduler.maintain_partitions(db, NOW, retention_days=30, premake_days=3)
    assert insert_attempt(sql, live, NOW) == "pgsched.execution_attempt_p20300310"
    assert insert_log(sql, live, NOW) == "pgsched.execution_log_p20300310"
    assert insert_history(sql, finished, NOW) == "pgsched.execution_history_p20300310"
    assert (
        insert_attempt(sql, finished, NOW + timedelta(days=1))
        == "pgsched.execution_attempt_p20300311"
    )

    report = scheduler.maintain_partitions(
        db, NOW + timedelta(days=40), retention_days=30, premake_days=3
    )

    kept = {"execution_attempt_p20300310", "execution_log_p20300310"}
    assert set(report["kept_live"]) == kept
    assert kept.isdisjoint(report["dropped"])
    assert {"execution_history_p20300310", "execution_attempt_p20300311"} <= set(report["dropped"])
    assert kept <= partitions(sql)
    assert "execution_history_p20300310" not in tables(sql)
    assert (
        sql.execute(
            "SELECT count(*) AS n FROM pgsched.execution_attempt WHERE execution_id = %s", [live]
        ).fetchone()["n"]
        == 1
    )

    # Once the execution is finished, the next maintenance drops what was kept.
    sql.execute("DELETE FROM pgsched.execution WHERE id = %s", [live])
    report = scheduler.maintain_partitions(
        db, NOW + timedelta(days=40), retention_days=30, premake_days=3
    )
    assert set(report["dropped"]) == kept
    assert report["kept_live"] == []
    assert tables(sql).isdisjoint(kept)


def test_stray_rows_are_reported_then_moved_into_their_new_partition(db, sql):
    scheduler.maintain_partitions(db, NOW, retention_days=30, premake_days=3)
    stray_time = NOW + timedelta(days=10)  # 2030-03-20: no partition yet
    assert insert_history(sql, 1, stray_time) == "pgsched.execution_history_default"
    assert (
        insert_history(sql, 2, stray_time + timedelta(hours=1))
        == "pgsched.execution_history_default"
    )
    assert insert_attempt(sql, 1, stray_time) == "pgsched.execution_attempt_default"
    beyond = NOW + timedelta(days=100)
    assert insert_log(sql, 1, beyond) == "pgsched.execution_log_default"

    report = scheduler.maintain_partitions(db, NOW, retention_days=30, premake_days=3)
    assert report["created"] == []
    assert report["default_rows"] == {
        "execution_history": 2,
        "execution_attempt": 1,
        "execution_log": 1,
    }

    # Ten days later the partitions of the 20th are made: the strays move into them.
    report = scheduler.maintain_partitions(db, stray_time, retention_days=30, premake_days=3)
    assert {"execution_history_p20300320", "execution_attempt_p20300320"} <= set(report["created"])
    assert report["default_rows"] == {"execution_log": 1}  # still outside every partition
    rows = sql.execute(
        "SELECT id, tableoid::regclass::text AS part FROM pgsched.execution_history ORDER BY id"
    ).fetchall()
    assert rows == [
        {"id": 1, "part": "pgsched.execution_history_p20300320"},
        {"id": 2, "part": "pgsched.execution_history_p20300320"},
    ]
    assert (
        sql.execute(
            "SELECT tableoid::regclass::text AS part FROM pgsched.execution_attempt"
        ).fetchone()["part"]
        == "pgsched.execution_attempt_p20300320"
    )
    for parent in ("execution_history", "execution_attempt"):
        assert (
            sql.execute(f"SELECT count(*) AS n FROM pgsched.{parent}_default").fetchone()["n"] == 0
        )
    # The moved rows are still found through the parent's indexes and constraints.
    assert (
        sql.execute(
            "SELECT count(*) AS n FROM pgsched.execution_history WHERE id = 1 AND finished_at = %s",
            [stray_time],
        ).fetchone()["n"]
        == 1
    )


def test_retention_gives_way_to_a_reader_instead_of_stalling_inserts(db, sql, dsn):
    """DETACH needs the parent exclusively; a long reader must not make maintenance queue
    an exclusive lock that every insert then waits behind."""
    now = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)
    maintain_partitions(db, now, retention_days=30, premake_days=1)
    reader = psycopg.connect(dsn)
    try:
        reader.execute(
            "SELECT count(*) FROM pgsched.execution_history"
        )  # holds ACCESS SHARE until commit
        later = now + timedelta(days=40)
        began = time.monotonic()
        report = maintain_partitions(
            db, later, retention_days=30, premake_days=1, lock_timeout_ms=200
        )
        # It gave up within the lock timeout per partition instead of queueing behind the
        # reader (where every insert into history would have queued behind it in turn).
        assert time.monotonic() - began < 10
        assert any(name.startswith("execution_history_p2026") for name in report["busy"])
    finally:
        reader.close()
    report = maintain_partitions(db, later, retention_days=30, premake_days=1)
    assert report["busy"] == [] and any(
        n.startswith("execution_history_p2026010") for n in report["dropped"]
    )

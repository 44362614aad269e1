"""Dashboard numbers (pgsched.stats) against rows seeded in a real database, checked by
SQL written here, independently of sql/stats.sql."""

from __future__ import annotations

import psycopg
import pytest

from pgsched import stats
from pgsched.db import Database
from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec
from tests.helpers import utc

STATES = ("succeeded", "succeeded", "succeeded", "failed", "timed_out", "dead", "cancelled")


def seed(
    sql: psycopg.Connection,
    task_id: int,
    n: int,
    *,
    tenant: str = "default",
    ago_from: float = 0,
    ago_to: float = 3000,
    unstarted_every: int = 11,
) -> None:
    """``n`` finished executions of ``task_id`` with finished_at spread over [now - ago_to,
    now - ago_from] seconds, assorted states, latencies (0-10 s) and durations (0-12 s);
    every ``unstarted_every``-th never started (cancelled while pending)."""
    sql.execute(
        """
        INSERT INTO pgsched.execution_history (id, tenant, task_id, scheduled_at, run_at, state, trigger,
            priority, queue, params, attempt, max_attempts, created_at, started_at, finished_at)
        SELECT nextval('pgsched.execution_id_seq'), %(tenant)s, %(task)s, f - d - l, f - d - l,
               CASE WHEN i %% %(every)s = 0 THEN 'cancelled' ELSE (%(states)s::text[])[1 + i %% 7] END,
               'schedule', 5, CASE WHEN i %% 2 = 0 THEN 'default' ELSE 'other' END, '{}', 1, 1, f - d - l,
               CASE WHEN i %% %(every)s = 0 THEN NULL ELSE f - d END, f
          FROM generate_series(1, %(n)s) AS i,
               LATERAL (SELECT now() - make_interval(secs => %(from)s + (%(to)s - %(from)s) * i / %(n)s::float8) AS f,
                               make_interval(secs => (i * 13 %% 47) / 4.0) AS d,
                               make_interval(secs => (i * 37 %% 101) / 10.0) AS l) AS x
        """,
        {
            "tenant": tenant,
            "task": task_id,
            "n": n,
            "from": ago_from,
            "to": ago_to,
            "every": unstarted_every,
            "states": list(STATES),
        },
    )


@pytest.fixture
def task_id(db: Database) -> int:
    row = tasks.create(
        db, TaskSpec(name="report", command="true", schedule_kind="cron", schedule="*/5 * * * *")
    )
    assert row is not None
    return int(row["id"])


def test_percentiles_agree_with_an_independent_computation(
    db: Database, sql: psycopg.Connection, task_id: int
) -> None:
    seed(sql, task_id, 997, ago_from=5, ago_to=3400)
    seed(sql, task_id, 50, ago_from=3700, ago_to=7000)  # outside the last hour
    other = tasks.create(db, TaskSpec(name="report", command="true", tenant="acme"))
    assert other is not None
    seed(sql, other["id"], 200, tenant="acme", ago_from=5, ago_to=3000)
    now = sql.execute("SELECT now() AS now").fetchone()["now"]  # type: ignore[index]

    board = stats.dashboard(db, "default", now=now)

    expected = sql.execute(
        """
        SELECT count(*) AS n,
               percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - run_at)) AS p50,
               percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - run_at)) AS p95,
               percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM started_at - run_at)) AS p99,
               percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM finished_at - started_at)) AS d99
          FROM pgsched.execution_history
         WHERE tenant = 'default' AND started_at IS NOT NULL
           AND finished_at >= %(now)s - interval '1 hour' AND finished_at < %(now)s
        """,
        {"now": now},
    ).fetchone()
    assert expected is not None and expected["n"] > 800
    assert board.latency.samples == expected["n"]
    assert board.latency.p50 == pytest.approx(expected["p50"], abs=1e-9)
    assert board.latency.p95 == pytest.approx(expected["p95"], abs=1e-9)
    assert board.latency.p99 == pytest.approx(expected["p99"], abs=1e-9)
    assert board.duration.p99 == pytest.approx(expected["d99"], abs=1e-9)
    assert board.latency.p50 < board.latency.p95 < board.latency.p99  # spread, not one value


def test_counts_rates_queues_and_last_day_through_the_rollup(
    db: Database, sql: psycopg.Connection, task_id: int
) -> None:
    seed(sql, task_id, 300, ago_from=5, ago_to=3000)
    seed(sql, task_id, 400, ago_from=4000, ago_to=18 * 3600)
    seed(sql, task_id, 30, ago_from=25 * 3600, ago_to=30 * 3600)  # before the day window
    assert stats.roll_up(db) > 0
    seed(sql, task_id, 20, ago_from=1, ago_to=4)  # after the roll-up: read raw
    sql.execute(
        "INSERT INTO pgsched.execution (task_id, scheduled_at, run_at, queue) VALUES "
        "(%(t)s, now() - interval '1 minute', now() - interval '1 minute', 'default'), "
        "(%(t)s, now() + interval '1 hour', now() + interval '1 hour', 'default'), "
        "(%(t)s, now(), now(), 'other')",
        {"t": task_id},
    )
    now = sql.execute("SELECT now() AS now").fetchone()["now"]  # type: ignore[index]

    board = stats.dashboard(db, "default", now=now)

    def raw(since: str) -> dict[str, int]:
        rows = sql.execute(
            f"SELECT state, count(*) AS n FROM pgsched.execution_history WHERE tenant = 'default' "
            f"AND finished_at >= {since} AND finished_at < %(now)s GROUP BY state",
            {"now": now},
        ).fetchall()
        return {r["state"]: r["n"] for r in rows}

    hour = raw("%(now)s - interval '1 hour'")
    day = raw("date_trunc('hour', %(now)s) - interval '23 hours'")
    assert board.last_hour.by_state == hour
    assert board.last_day.by_state == day
    assert sum(day.values()) > sum(hour.values())
    judged = sum(hour.get(s, 0) for s in ("succeeded", "failed", "timed_out", "dead"))
    assert board.last_hour.success_rate == pytest.approx(hour["succeeded"] / judged)
    assert board.last_hour.throughput_per_minute == pytest.approx(sum(hour.values()) / 60)
    assert board.queues == {
        "default": {"ready": 1, "scheduled": 1, "running": 0},
        "other": {"ready": 1, "scheduled": 0, "running": 0},
    }
    dead = sql.execute(
        "SELECT count(*) AS n FROM pgsched.execution_history WHERE state = 'dead'"
    ).fetchone()
    assert dead is not None and board.dead_letter == dead["n"] > 0
    assert board.tasks == {"active": 1, "paused": 0, "deleted": 0}


def test_rollup_is_idempotent_and_counts_each_final_hour_once(
    db: Database, sql: psycopg.Connection, task_id: int
) -> None:
    seed(sql, task_id, 200, ago_from=5, ago_to=20 * 3600)

    def counted() -> tuple:
        """What the counters see: totals of final hours + hourly rows not final yet."""
        row = sql.execute(
            "SELECT sum(executions) AS n, sum(latency_sum) AS lat FROM ("
            " SELECT executions, latency_sum FROM pgsched.stats_total UNION ALL"
            " SELECT executions, latency_sum FROM pgsched.stats_hourly"
            "  WHERE hour >= (SELECT dirty_from FROM pgsched.stats_rollup_state)) x"
        ).fetchone()
        assert row is not None
        return row["n"], round(row["lat"], 6)

    stats.roll_up(db)
    first = counted()
    assert first[0] == 200
    stats.roll_up(db)
    stats.roll_up(db)
    assert counted() == first  # final hours are added to the totals once
    hourly = sql.execute("SELECT sum(executions) AS n FROM pgsched.stats_hourly").fetchone()
    assert hourly is not None and hourly["n"] == 200  # the last day stays hour by hour too
    seed(sql, task_id, 7, ago_from=1, ago_to=2)
    stats.roll_up(db)
    assert counted()[0] == 207
    buckets = sql.execute(
        "SELECT latency_le, started FROM pgsched.stats_hourly ORDER BY hour DESC LIMIT 1"
    ).fetchone()
    assert buckets is not None
    le = buckets["latency_le"]
    assert (
        le == sorted(le) and le[-1] == buckets["started"]
    )  # cumulative, all under the 3600 s bound


def test_task_trend_and_next_fires(db: Database, sql: psycopg.Connection, task_id: int) -> None:
    seed(sql, task_id, 60, ago_from=5, ago_to=3 * 3600)
    trend = stats.task_trend(db, "report")
    assert sum(h["executions"] for h in trend) == 60
    assert all(h["latency_p95"] is None or h["latency_p95"] >= 0 for h in trend)
    recent = stats.task_recent(db, "report", limit=10)
    assert len(recent) == 10
    assert [r["scheduled_at"] for r in recent] == sorted(
        (r["scheduled_at"] for r in recent), reverse=True
    )

    row = tasks.create(
        db,
        TaskSpec(
            name="paris",
            command="true",
            schedule_kind="cron",
            schedule="30 2 * * *",
            timezone="Europe/Paris",
        ),
    )
    assert row is not None
    fires = stats.next_fires(row, after=utc(2026, 12, 1, 12))
    assert [f["utc"] for f in fires] == [
        utc(2026, 12, d, 1, 30) for d in range(2, 7)
    ]  # CET is UTC+1
    assert [(f["local"].hour, f["local"].minute, str(f["local"].tzinfo)) for f in fires] == [
        (2, 30, "Europe/Paris")
    ] * 5


def test_tasks_are_counted_as_the_task_list_shows_them(
    db: Database, sql: psycopg.Connection
) -> None:
    """A DAG counts as one task (its schedule task); its node tasks are not tasks of their
    own on the dashboard, as in `task list` and the Tasks page."""
    from pgsched import dag as dag_module
    from pgsched.stores import dags

    tasks.create(db, TaskSpec(name="plain", command="true"))
    dags.apply(
        db,
        dag_module.parse(
            {
                "name": "etl",
                "nodes": [
                    {"id": "a", "command": "true"},
                    {"id": "b", "command": "true", "depends_on": ["a"]},
                ],
            }
        ),
    )
    listed = db.many("task_list", tenant="default", search=None, limit=100, dag_nodes=False)
    board = stats.dashboard(db)
    assert board.tasks["active"] == len(listed) == 2
    assert (
        sql.execute("SELECT count(*) AS n FROM pgsched.task WHERE deleted_at IS NULL").fetchone()[
            "n"
        ]
        == 4
    )

"""/metrics (pgsched.metrics): the text exposition parsed with prometheus_client's own
parser, every value compared with the database state it stands for."""

from __future__ import annotations

from collections import defaultdict

import psycopg
from prometheus_client.parser import text_string_to_metric_families

from pgsched import alerts, metrics, stats
from pgsched.db import Database
from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec
from tests.db.test_stats import seed
from tests.factories import make_execution, make_task


def scrape(db: Database, tenant: str | None = None) -> dict[str, dict[tuple, float]]:
    body, content_type = metrics.render(db, tenant)
    assert content_type.startswith("text/plain")
    out: dict[str, dict[tuple, float]] = defaultdict(dict)
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out[s.name][tuple(sorted(s.labels.items()))] = s.value
    return out


def test_metrics_equal_the_database(db: Database, sql: psycopg.Connection) -> None:
    a = tasks.create(db, TaskSpec(name="alpha", command="true"))
    b = tasks.create(
        db, TaskSpec(name="beta", command="true", schedule_kind="cron", schedule="* * * * *")
    )
    assert a is not None and b is not None
    seed(sql, a["id"], 120, ago_from=5, ago_to=5 * 3600)
    seed(sql, b["id"], 30, ago_from=5, ago_to=600)
    sql.execute("UPDATE pgsched.execution_history SET attempt = 3 WHERE id % 5 = 0")
    stats.roll_up(db)
    sql.execute(
        "INSERT INTO pgsched.execution (task_id, scheduled_at, run_at, queue) VALUES "
        "(%(a)s, now(), now(), 'default'), (%(a)s, now(), now(), 'default'), "
        "(%(a)s, now() + interval '1 day', now() + interval '1 day', 'default')",
        {"a": a["id"]},
    )
    sql.execute(
        "UPDATE pgsched.task SET missed_fires = 4, next_fire_at = now() - interval '10 minutes' "
        "WHERE name = 'beta'"
    )
    alerts.detect(db)
    sql.execute(
        "INSERT INTO pgsched.worker (name, hostname, pid, queues, concurrency, last_heartbeat_at) "
        "VALUES ('w1', 'h', 1, '{default}', 2, now() - interval '7 seconds')"
    )
    sql.execute(
        "INSERT INTO pgsched.leader (epoch, holder, elected_at, heartbeat_at) "
        "VALUES (3, 'node-a', now(), now() - interval '2 seconds')"
    )
    sql.execute(
        "INSERT INTO pgsched.scheduler_node (name, hostname, pid, role, epoch) VALUES "
        "('node-a', 'h', 1, 'leader', 3), ('node-b', 'h', 2, 'standby', NULL)"
    )

    m = scrape(db)

    by_task_state = {
        (r["name"], r["state"]): r["n"]
        for r in sql.execute(
            "SELECT t.name, h.state, count(*) AS n FROM pgsched.execution_history h "
            "JOIN pgsched.task t ON t.id = h.task_id GROUP BY 1, 2"
        ).fetchall()
    }
    got = {(dict(k)["task"], dict(k)["state"]): v for k, v in m["pgsched_executions_total"].items()}
    assert got == by_task_state
    retries = sql.execute("SELECT sum(attempt - 1) AS n FROM pgsched.execution_history").fetchone()
    assert (
        retries is not None
        and m["pgsched_retries_total"][(("tenant", "default"),)] == retries["n"] > 0
    )

    # histogram: every bucket is the count of started executions at or under its bound
    le_counts = m["pgsched_schedule_to_start_seconds_bucket"]
    for labels, value in le_counts.items():
        bound = dict(labels)["le"]
        expected = sql.execute(
            "SELECT count(*) AS n FROM pgsched.execution_history WHERE started_at IS NOT NULL"
            + ("" if bound == "+Inf" else " AND extract(epoch FROM started_at - run_at) <= %(b)s"),
            {"b": float(bound)},
        ).fetchone()
        assert expected is not None and value == expected["n"], bound
    total = sql.execute(
        "SELECT sum(extract(epoch FROM finished_at - started_at))::float8 AS s, count(started_at) AS n "
        "FROM pgsched.execution_history"
    ).fetchone()
    assert total is not None
    assert (
        abs(m["pgsched_execution_duration_seconds_sum"][(("tenant", "default"),)] - total["s"])
        < 1e-6
    )
    assert m["pgsched_execution_duration_seconds_count"][(("tenant", "default"),)] == total["n"]

    tq = (("queue", "default"), ("tenant", "default"))
    assert m["pgsched_queue_depth"][tq] == 2 and m["pgsched_queue_scheduled"][tq] == 1
    assert m["pgsched_running"][tq] == 0
    dead = sql.execute(
        "SELECT count(*) AS n FROM pgsched.execution_history WHERE state = 'dead'"
    ).fetchone()
    assert (
        dead is not None
        and m["pgsched_dead_letter_size"][(("tenant", "default"),)] == dead["n"] > 0
    )
    assert m["pgsched_missed_schedules_total"][(("tenant", "default"),)] == 4
    assert m["pgsched_alerts_active"][(("kind", "missed_schedule"), ("tenant", "default"))] == 1
    assert m["pgsched_leader"] == {(("node", "node-a"),): 1.0, (("node", "node-b"),): 0.0}
    [(worker, age)] = m["pgsched_worker_heartbeat_age_seconds"].items()
    assert dict(worker)["worker"].startswith("w1") and 7 <= age < 30
    assert 2 <= m["pgsched_leader_heartbeat_age_seconds"][(("node", "node-a"),)] < 30


def test_task_labels_are_capped_and_the_rest_summed_as_other(
    db: Database, sql: psycopg.Connection
) -> None:
    ids = {}
    for name, n in (("big", 40), ("mid", 20), ("small", 10), ("tiny", 5)):
        row = tasks.create(db, TaskSpec(name=name, command="true"))
        assert row is not None
        ids[name] = row["id"]
        seed(sql, row["id"], n, ago_from=5, ago_to=3000, unstarted_every=1000)
    sql.execute("UPDATE pgsched.setting SET value = '2' WHERE name = 'metrics_task_limit'")
    stats.roll_up(db)

    m = scrape(db, "default")

    per_task: dict[str, float] = defaultdict(float)
    for labels, v in m["pgsched_executions_total"].items():
        per_task[dict(labels)["task"]] += v
    assert dict(per_task) == {"big": 40, "mid": 20, "other": 15}


def test_scrapes_within_the_cache_time_do_not_read_again(
    db: Database, sql: psycopg.Connection
) -> None:
    collector = metrics.DatabaseCollector(db, "default", ttl=60)
    first = list(collector.collect())
    make_execution(sql, make_task(db, "late")["id"])
    assert list(collector.collect()) == first  # cached
    collector.ttl = 0
    depth = next(f for f in collector.collect() if f.name == "pgsched_queue_depth")
    assert [s.value for s in depth.samples] == [1]

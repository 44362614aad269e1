"""Limits across real worker processes (issue 18): eight ``pgsched worker`` processes of
four slots each drain executions under a queue cap, a task cap and a per-key cap; every
handler records when it ran by the database's clock (clock_timestamp() on its own
connection) into a table of the test's, and a sampler counts what the database holds
running. No limit is passed by either count; and work that waits for a limit starts as
soon as the limit frees, woken by the finish's notification, not by a poll (the workers
poll every 30 seconds)."""

from __future__ import annotations

import json
import statistics
import textwrap
import threading
import time

import psycopg
import pytest
from psycopg.rows import dict_row

from ..helpers import cli, wait_until

pytestmark = pytest.mark.e2e

MODULE = textwrap.dedent('''
    import time
    import psycopg
    from pgsched import App

    app = App()

    @app.task()
    def probe(dsn, scope, seconds, i=0):
        """Records its run by the database's clock: a row when it starts, its end when it
        ends (seconds later)."""
        with psycopg.connect(dsn, autocommit=True) as conn:
            run = conn.execute(
                "INSERT INTO limit_probe (scope, started) VALUES (%s, clock_timestamp()) RETURNING id",
                [scope],
            ).fetchone()[0]
            time.sleep(seconds)
            conn.execute("UPDATE limit_probe SET ended = clock_timestamp() WHERE id = %s", [run])
''')


@pytest.fixture
def tasks_dir(tmp_path):
    (tmp_path / "limittasks.py").write_text(MODULE)
    return tmp_path


def create(dsn: str, name: str, params: dict, *args: str) -> None:
    cli(dsn, "task", "create", name, "--python", "limittasks:probe", "--params",
        json.dumps(params), *args)  # fmt: skip


def most_at_once(rows: list[dict]) -> int:
    """The most intervals [started, ended] of ``rows`` that overlap at one instant."""
    edges = sorted([(r["started"], 1) for r in rows] + [(r["ended"], -1) for r in rows],
                   key=lambda e: (e[0], e[1]))  # fmt: skip
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def test_caps_hold_across_eight_worker_processes(dsn, sql, start, tasks_dir):
    sql.execute(
        "CREATE TABLE limit_probe (id bigserial PRIMARY KEY, scope text, started timestamptz,"
        " ended timestamptz)"
    )
    create(dsn, "queued", {"dsn": dsn, "scope": "queue", "seconds": 0.05}, "--queue", "q")
    create(dsn, "capped", {"dsn": dsn, "scope": "task", "seconds": 0.05})
    create(dsn, "keyed", {"dsn": dsn, "scope": "key", "seconds": 0.05})
    sql.execute(
        "INSERT INTO pgsched.queue (tenant, name, max_running) VALUES ('default', 'q', 3);"
        "UPDATE pgsched.task SET max_running = 2 WHERE name = 'capped';"
        "UPDATE pgsched.task SET concurrency_key = 'one', key_max_running = 1 WHERE name = 'keyed'"
    )
    for name in ("queued", "capped", "keyed"):
        sql.execute(
            "SELECT pgsched.enqueue_v1(%s, run_at => now()) FROM generate_series(1, 40)", [name]
        )
    most: dict[str, int] = {}
    stop = threading.Event()

    def sample() -> None:
        with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
            while not stop.is_set():
                for r in conn.execute(
                    """SELECT t.name, count(*)::int AS n FROM pgsched.execution e
                         JOIN pgsched.task t ON t.id = e.task_id
                        WHERE e.state = 'running' GROUP BY t.name"""
                ).fetchall():
                    most[r["name"]] = max(most.get(r["name"], 0), r["n"])

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        for _ in range(8):
            start("worker", "--concurrency", "4", "--queue", "default", "--queue", "q",
                  "--poll-interval", "30", "--pythonpath", str(tasks_dir))  # fmt: skip
        wait_until(
            lambda: (
                sql.execute("SELECT count(*) AS n FROM pgsched.execution_history").fetchone()["n"]
                == 120
            ),
            timeout=120,
            message="all 120 executions end",
        )
    finally:
        stop.set()
        sampler.join()
    states = sql.execute(
        "SELECT state, count(*)::int AS n FROM pgsched.execution_history GROUP BY state"
    ).fetchall()
    assert states == [{"state": "succeeded", "n": 120}]
    runs = sql.execute("SELECT * FROM limit_probe").fetchall()
    by = {s: [r for r in runs if r["scope"] == s] for s in ("queue", "task", "key")}
    seen = {s: most_at_once(rows) for s, rows in by.items()}
    print("handlers at once", seen, "database's running at most", most)
    assert {s: len(rows) for s, rows in by.items()} == {"queue": 40, "task": 40, "key": 40}
    assert seen["queue"] <= 3 and most["queued"] <= 3
    assert seen["task"] <= 2 and most["capped"] <= 2
    assert seen["key"] <= 1 and most["keyed"] <= 1
    assert seen["queue"] == 3 and seen["task"] == 2  # reached, with 32 slots free to pass them


def test_work_waiting_for_a_limit_starts_when_it_frees_not_at_a_poll(dsn, sql, start, tasks_dir):
    """Task one (max_running 1) runs 2.5 s a time: each next run starts within 100 ms of the
    end of the one before (the median of four gaps), on three workers polling every 30 s:
    the finish's statement notifies the tenant's workers (execution_limit_freed). Without
    that, the workers' retries of work they see due but cannot claim are seconds apart by
    then (pgsched.worker.due: doubling from 10 ms)."""
    sql.execute(
        "CREATE TABLE limit_probe (id bigserial PRIMARY KEY, scope text, started timestamptz,"
        " ended timestamptz)"
    )
    create(dsn, "one", {"dsn": dsn, "scope": "one", "seconds": 2.5}, "--max-attempts", "1")
    sql.execute("UPDATE pgsched.task SET max_running = 1 WHERE name = 'one'")
    for _ in range(3):
        start("worker", "--concurrency", "2", "--poll-interval", "30",
              "--pythonpath", str(tasks_dir))  # fmt: skip
    wait_until(
        lambda: (
            sql.execute(
                "SELECT count(*) AS n FROM pgsched.worker WHERE state = 'running'"
            ).fetchone()["n"]
            == 3
        ),
        timeout=30,
        message="three workers registered",
    )
    time.sleep(1)  # all three listening and idle
    sql.execute("SELECT pgsched.enqueue_v1('one', run_at => now()) FROM generate_series(1, 5)")
    wait_until(
        lambda: (
            sql.execute("SELECT count(*) AS n FROM pgsched.execution_history").fetchone()["n"] == 5
        ),
        timeout=60,
        message="five runs end",
    )
    probes = sql.execute("SELECT * FROM limit_probe ORDER BY started").fetchall()
    assert most_at_once(probes) == 1
    claims = [
        r["started_at"]
        for r in sql.execute(
            "SELECT started_at FROM pgsched.execution_history ORDER BY started_at"
        ).fetchall()
    ]
    # each claim after the first follows the end of the run before it
    gaps = [(claims[i + 1] - probes[i]["ended"]).total_seconds() for i in range(len(probes) - 1)]
    print("claim after the previous end, seconds:", [round(g, 3) for g in gaps])
    assert all(g > -0.05 for g in gaps)  # never claimed while the other ran (clock slack)
    assert statistics.median(gaps) < 0.1
    assert max(gaps) < 2  # not a 30 s poll

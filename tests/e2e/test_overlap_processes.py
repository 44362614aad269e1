"""Overlap policies with real processes (issue 18, item 5): a ``pgsched scheduler`` fires two
tasks every second whose runs take 3 s, on a ``pgsched worker`` with slots to spare.
``skip``: never two live at once, the fires in between recorded skipped; ``queue_one``: one
running and at most one waiting, never a growing backlog. A sampler reads the live
executions from the database as fast as it can while they run."""

from __future__ import annotations

import itertools
import threading

import psycopg
import pytest
from psycopg.rows import dict_row

from ..helpers import cli, wait_until

pytestmark = pytest.mark.e2e


def test_skip_and_queue_one_under_a_long_running_task(dsn, sql, start):
    for name, policy in (("skipper", "skip"), ("queuer", "queue_one")):
        cli(dsn, "task", "create", name, "--command", "sleep 3", "--every", "1s",
            "--overlap", policy)  # fmt: skip
    worst: dict[tuple[str, str], int] = {}
    stop = threading.Event()

    def sample() -> None:
        with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as conn:
            while not stop.is_set():
                rows = conn.execute(
                    """SELECT t.name,
                              count(e.id) FILTER (WHERE e.state = 'pending')::int AS pending,
                              count(e.id) FILTER (WHERE e.state = 'running')::int AS running,
                              count(e.id)::int AS live
                         FROM pgsched.task t
                         LEFT JOIN pgsched.execution e ON e.task_id = t.id
                        WHERE t.name IN ('skipper', 'queuer')
                        GROUP BY t.name"""
                ).fetchall()
                for r in rows:
                    for what in ("pending", "running", "live"):
                        key = (r["name"], what)
                        worst[key] = max(worst.get(key, 0), r[what])

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        start("scheduler", "--max-sleep", "0.2")
        start("worker", "--concurrency", "4", "--poll-interval", "0.5")

        def done(name: str) -> int:
            return sql.execute(
                "SELECT count(*) AS n FROM pgsched.execution_history h JOIN pgsched.task t "
                "ON t.id = h.task_id WHERE t.name = %s AND h.state = 'succeeded'",
                [name],
            ).fetchone()["n"]

        wait_until(
            lambda: done("skipper") >= 2 and done("queuer") >= 2,
            timeout=60,
            message="two runs of each task end",
        )
    finally:
        stop.set()
        sampler.join()
    runs = sql.execute(
        """SELECT t.name, h.state, h.started_at, h.finished_at, h.error
             FROM pgsched.execution_history h JOIN pgsched.task t ON t.id = h.task_id
            ORDER BY h.started_at NULLS LAST"""
    ).fetchall()
    by = {n: [r for r in runs if r["name"] == n] for n in ("skipper", "queuer")}
    print("at most at once", worst)
    # skip: one live at a time, whatever its state; the fires in between are recorded
    assert worst[("skipper", "live")] == 1 and worst[("skipper", "running")] == 1
    skipped = [r for r in by["skipper"] if r["state"] == "skipped"]
    assert len(skipped) >= 2
    assert all(r["error"].startswith("overlap policy skip: execution ") for r in skipped)
    ran = [r for r in by["skipper"] if r["state"] == "succeeded"]
    assert all(a["finished_at"] <= b["started_at"] for a, b in itertools.pairwise(ran))
    # queue_one: one running, at most one waiting behind it
    assert worst[("queuer", "running")] == 1 and worst[("queuer", "pending")] == 1
    assert worst[("queuer", "live")] == 2
    skipped = [r for r in by["queuer"] if r["state"] == "skipped"]
    assert len(skipped) >= 2
    assert all(r["error"].startswith("overlap policy queue_one: ") for r in skipped)
    live = sql.execute(
        "SELECT count(*) AS n FROM pgsched.execution e JOIN pgsched.task t ON t.id = e.task_id "
        "WHERE t.name = 'queuer' AND e.state = 'pending'"
    ).fetchone()["n"]
    assert live <= 1

"""Locks for task code on real worker processes (pgsched/worker/execution_locks.py): a
Python task's lock is held by one execution at a time across workers, and is released
when its execution ends, however it ends (its worker SIGKILLed, its timeout); and
``pgsched lock run`` for commands."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading

import psycopg
import pytest
from psycopg.rows import dict_row

from pgsched import locks

from ..helpers import cli, wait_for

pytestmark = pytest.mark.e2e

MODULE = textwrap.dedent("""
    import time
    import psycopg
    from pgsched import App, locks

    app = App()

    def record(dsn, what):
        ident = locks.for_execution().execution_id
        with psycopg.connect(dsn, autocommit=True) as c:
            if what == "entered":
                c.execute("INSERT INTO public.lock_run (execution_id, entered_at) "
                          "VALUES (%s, clock_timestamp())", [ident])
            else:
                c.execute("UPDATE public.lock_run SET left_at = clock_timestamp() "
                          "WHERE execution_id = %s", [ident])

    @app.task()
    def exclusive(dsn, hold):
        with locks.for_execution().lock("shared", timeout=120):
            record(dsn, "entered")
            time.sleep(hold)
            record(dsn, "left")

    @app.task()
    def keep(dsn):
        locks.for_execution().acquire("kept", timeout=5)  # held until the execution ends
        record(dsn, "entered")
        while True:
            time.sleep(0.05)
""")


@pytest.fixture
def module_dir(tmp_path, sql):
    (tmp_path / "locktasks.py").write_text(MODULE)
    sql.execute(
        "CREATE TABLE public.lock_run (execution_id bigint PRIMARY KEY, entered_at timestamptz, "
        "left_at timestamptz)"
    )
    return tmp_path


def _worker(start, module_dir, concurrency: int = 2):
    return start(
        "worker",
        "--concurrency",
        str(concurrency),
        "--poll-interval",
        "0.5",
        "--pythonpath",
        str(module_dir),
    )


def _enqueue(sql, task: str, params: dict, n: int = 1) -> list[int]:
    rows = sql.execute(
        "SELECT pgsched.enqueue_many_v1(%s, array_fill(%s::jsonb, ARRAY[%s])) AS id",
        [task, json.dumps(params), n],
    ).fetchall()
    return [r["id"] for r in rows]


def _held(sql, name: str) -> list[dict]:
    return [r for r in locks.held(sql, tenant="default") if r["name"] == name]


def test_one_execution_at_a_time_holds_the_lock_across_workers(dsn, sql, start, module_dir):
    cli(dsn, "task", "create", "exclusive", "--python", "locktasks:exclusive")
    for _ in range(3):
        _worker(start, module_dir)
    ids = _enqueue(sql, "exclusive", {"dsn": dsn, "hold": 0.15}, n=12)
    samples: list[list[dict]] = []
    done = threading.Event()

    def sample() -> None:
        with psycopg.connect(dsn, autocommit=True, row_factory=dict_row) as c:
            while not done.is_set():
                samples.append(_held(c, "shared"))

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        wait_for(
            lambda: (
                sql.execute(
                    "SELECT count(*) AS n FROM pgsched.execution_history "
                    "WHERE id = ANY(%s) AND state = 'succeeded'",
                    [ids],
                ).fetchone()["n"]
                == len(ids)
            ),
            timeout=90,
            what="every execution to succeed",
        )
    finally:
        done.set()
        sampler.join()
    runs = sql.execute(
        "SELECT execution_id, entered_at, left_at FROM public.lock_run ORDER BY entered_at"
    ).fetchall()
    assert len(runs) == len(ids) and all(r["left_at"] for r in runs)
    for before, after in itertools.pairwise(runs):
        assert after["entered_at"] >= before["left_at"], (before, after)  # never two inside
    # the database never showed two holders; it did show waiters, and named the holder
    assert max(sum(r["granted"] for r in s) for s in samples) == 1
    assert max(sum(not r["granted"] for r in s) for s in samples) >= 1
    holders = {r["execution_id"] for s in samples for r in s if r["granted"]}
    assert holders - {None} and holders - {None} <= set(ids)


def test_the_lock_of_a_killed_worker_is_free_again(dsn, sql, start, module_dir):
    cli(dsn, "task", "create", "keep", "--python", "locktasks:keep")
    worker = _worker(start, module_dir, concurrency=1)
    (ident,) = _enqueue(sql, "keep", {"dsn": dsn})
    held = wait_for(lambda: _held(sql, "kept"), timeout=30, what="the task to hold its lock")
    assert [(r["granted"], r["execution_id"]) for r in held] == [(True, ident)]
    assert not locks.try_lock(sql, "kept", tenant="default")
    worker.proc.send_signal(signal.SIGKILL)
    worker.proc.wait(10)
    assert wait_for(lambda: locks.try_lock(sql, "kept", tenant="default"), timeout=10)


def test_the_lock_of_an_execution_that_timed_out_is_released(dsn, sql, start, module_dir):
    cli(dsn, "task", "create", "keep", "--python", "locktasks:keep", "--timeout", "2")
    _worker(start, module_dir, concurrency=1)
    (ident,) = _enqueue(sql, "keep", {"dsn": dsn})
    held = wait_for(lambda: _held(sql, "kept"), timeout=30, what="the task to hold its lock")
    assert held[0]["execution_id"] == ident
    wait_for(
        lambda: sql.execute(
            "SELECT 1 FROM pgsched.execution_history WHERE id = %s", [ident]
        ).fetchone(),
        timeout=30,
        what="the execution to end",
    )
    attempt = sql.execute(
        "SELECT state FROM pgsched.execution_attempt WHERE execution_id = %s", [ident]
    ).fetchone()
    assert attempt["state"] == "timed_out"
    # released before its end was recorded: free at once, with the worker still up
    assert _held(sql, "kept") == []
    assert locks.try_lock(sql, "kept", tenant="default")


def test_lock_run_runs_the_command_holding_the_lock_or_exits_75(dsn, sql):
    assert locks.try_lock(sql, "deploy", tenant="default")
    out = cli(
        dsn, "lock", "run", "deploy", "--timeout", "0.3", "--", "touch", "/nonexistent", check=False
    )
    assert out.returncode == 75
    assert "lock 'deploy': not got in 0.3 s" in out.stderr and "touch was not run" in out.stderr
    assert locks.release(sql, "deploy", tenant="default")
    out = cli(
        dsn, "lock", "run", "deploy", "--", sys.executable, "-c", "raise SystemExit(3)", check=False
    )
    assert out.returncode == 3
    assert locks.try_lock(sql, "deploy", tenant="default")  # released after it
    assert locks.release(sql, "deploy", tenant="default")

    proc = subprocess.Popen(
        [sys.executable, "-m", "pgsched", "lock", "run", "deploy", "--", "sleep", "60"],
        env={**os.environ, "PGSCHED_DSN": dsn},
    )
    try:
        held = wait_for(lambda: _held(sql, "deploy"), timeout=30, what="lock run to hold it")
        assert held[0]["application_name"] == "pgsched lock run"
        listed = json.loads(cli(dsn, "lock", "list", "--json").stdout)
        assert [(r["name"], r["granted"]) for r in listed] == [("deploy", True)]
        assert "deploy" in cli(dsn, "lock", "list").stdout
        proc.send_signal(signal.SIGTERM)  # passed on to sleep
        assert proc.wait(20) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
    assert wait_for(lambda: locks.try_lock(sql, "deploy", tenant="default"), timeout=5)


def test_the_lock_of_a_cancelled_execution_is_released(dsn, sql, start, module_dir):
    cli(dsn, "task", "create", "keep", "--python", "locktasks:keep")
    _worker(start, module_dir, concurrency=1)
    (ident,) = _enqueue(sql, "keep", {"dsn": dsn})
    wait_for(lambda: _held(sql, "kept"), timeout=30, what="the task to hold its lock")
    cli(dsn, "execution", "cancel", str(ident))
    wait_for(
        lambda: sql.execute(
            "SELECT 1 FROM pgsched.execution_history WHERE id = %s", [ident]
        ).fetchone(),
        timeout=30,
        what="the execution to end",
    )
    attempt = sql.execute(
        "SELECT state FROM pgsched.execution_attempt WHERE execution_id = %s", [ident]
    ).fetchone()
    assert attempt["state"] == "cancelled"
    assert _held(sql, "kept") == []
    assert locks.try_lock(sql, "kept", tenant="default")


def test_lock_run_stops_the_command_when_its_session_is_lost(dsn, sql, tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "pgsched", "lock", "run", "deploy", "--", "sleep", "60"],
        env={**os.environ, "PGSCHED_DSN": dsn},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        (held,) = wait_for(lambda: _held(sql, "deploy"), timeout=30, what="lock run to hold it")
        sql.execute("SELECT pg_terminate_backend(%s)", [held["pid"]])
        # the lock is free at once (another may take it): the command must not run on
        assert wait_for(lambda: locks.try_lock(sql, "deploy", tenant="default"), timeout=10)
        assert proc.wait(30) == 1
        assert "the session holding lock 'deploy' was lost" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()

"""A worker under stress: output floods, background children, a database connection
dropped mid-run, and being stopped with one or two signals."""

from __future__ import annotations

import signal
import time

import pytest

from ..helpers import cli, finished, trigger, wait_until

pytestmark = pytest.mark.e2e


def log_lines(sql, ident: int) -> list[dict]:
    return sql.execute(
        "SELECT stream, line FROM pgsched.execution_log WHERE execution_id = %s ORDER BY attempt, seq",
        (ident,),
    ).fetchall()


def test_output_beyond_the_cap_is_counted_not_stored(dsn, sql, start):
    cli(dsn, "task", "create", "chatty", "--command", "seq 1 5000; printf 'no newline at the end'")
    start("worker", "--max-output-lines", "100", "--poll-interval", "0.5")
    ident = trigger(dsn, "chatty")
    assert finished(sql, ident)["state"] == "succeeded"
    lines = log_lines(sql, ident)
    assert [r["line"] for r in lines[:100]] == [str(n) for n in range(1, 101)]
    assert lines[100] == {"stream": "system", "line": lines[100]["line"]}
    assert lines[100]["line"].startswith("output truncated: 4901 more line(s)")
    assert len(lines) == 101


def test_a_background_child_does_not_turn_success_into_a_timeout(dsn, sql, start):
    cli(
        dsn,
        "task",
        "create",
        "forks",
        "--timeout",
        "3",
        "--command",
        "(sleep 30; echo late) & echo main-done",
    )
    start("worker", "--poll-interval", "0.5", "--kill-grace", "1")
    ident = trigger(dsn, "forks")
    done = finished(sql, ident)
    assert (done["state"], done["exit_code"]) == ("succeeded", 0)
    lines = [r["line"] for r in log_lines(sql, ident)]
    assert lines[0] == "main-done" and "late" not in lines
    assert any(
        "left processes holding its output; they were killed at the timeout" in line
        for line in lines
    )


def test_an_outcome_survives_the_worker_losing_its_database_connections(dsn, sql, start):
    cli(dsn, "task", "create", "steady", "--command", "echo before; sleep 2; echo after")
    worker = start("worker", "--poll-interval", "0.5")
    ident = trigger(dsn, "steady")
    wait_until(
        lambda: sql.execute(
            "SELECT state FROM pgsched.execution WHERE id = %s AND state = 'running'", (ident,)
        ).fetchone(),
        message="running",
    )
    killed = sql.execute(
        "SELECT count(pg_terminate_backend(pid)) AS n FROM pg_stat_activity "
        "WHERE datname = current_database() AND pid <> pg_backend_pid() "
        "AND application_name LIKE 'pgsched%%'"
    ).fetchone()["n"]
    assert killed >= 1
    done = finished(sql, ident)
    assert done["state"] == "succeeded"
    assert [r["line"] for r in log_lines(sql, ident) if r["stream"] == "stdout"] == [
        "before",
        "after",
    ]
    assert "could not record" not in worker.output and "not stored" not in worker.output


def test_sigterm_drains_then_hands_back_without_using_up_an_attempt(dsn, sql, start):
    cli(dsn, "task", "create", "long", "--command", "echo started; sleep 60")
    worker = start("worker", "--poll-interval", "0.5", "--shutdown-timeout", "1")
    ident = trigger(dsn, "long")
    wait_until(
        lambda: any(r["line"] == "started" for r in log_lines(sql, ident)), message="started"
    )
    begin = time.monotonic()
    assert worker.stop(signal.SIGTERM) == 0
    assert time.monotonic() - begin < 6
    row = sql.execute(
        "SELECT state, attempt, max_attempts, worker_id FROM pgsched.execution WHERE id = %s",
        (ident,),
    ).fetchone()
    assert row == {"state": "pending", "attempt": 1, "max_attempts": 2, "worker_id": None}
    attempt = sql.execute(
        "SELECT state FROM pgsched.execution_attempt WHERE execution_id = %s", (ident,)
    ).fetchone()
    assert attempt["state"] == "lost"
    assert sql.execute("SELECT state FROM pgsched.worker").fetchone()["state"] == "stopped"


def test_a_second_signal_stops_at_once_and_hands_back(dsn, sql, start):
    cli(dsn, "task", "create", "longer", "--command", "echo started; sleep 60")
    worker = start("worker", "--poll-interval", "0.5", "--shutdown-timeout", "300")
    ident = trigger(dsn, "longer")
    wait_until(
        lambda: any(r["line"] == "started" for r in log_lines(sql, ident)), message="started"
    )
    worker.proc.send_signal(signal.SIGTERM)
    wait_until(lambda: "waiting up to 300s" in worker.output, message="draining")
    begin = time.monotonic()
    worker.proc.send_signal(signal.SIGTERM)
    worker.proc.wait(15)
    assert time.monotonic() - begin < 5
    row = sql.execute("SELECT state FROM pgsched.execution WHERE id = %s", (ident,)).fetchone()
    assert row == {"state": "pending"}
    assert sql.execute("SELECT state FROM pgsched.worker").fetchone()["state"] == "stopped"

"""Python tasks on a real worker: what they print is captured; results and errors that
PostgreSQL cannot store, and modules that blow up on import, end as failures instead of
leaving the execution 'running' or the slot taken; a hung call does not hold up shutdown."""

from __future__ import annotations

import json
import signal
import textwrap
import time

import pytest

from ..helpers import cli, wait_until

pytestmark = pytest.mark.e2e

MODULE = textwrap.dedent("""
    import sys, time
    from pgsched import App

    app = App()

    @app.task()
    def chatty():
        print("to stdout")
        print("to stderr", file=sys.stderr)
        sys.stdout.write("no newline")
        return {"ok": True}

    @app.task()
    def nan_result():
        return {"x": float("nan")}

    @app.task()
    def nul_result():
        return "a\\x00b"

    @app.task()
    def nul_error():
        raise ValueError("boom \\x00 nul")

    @app.task()
    def forever():
        print("sleeping", flush=True)
        time.sleep(3600)

    @app.task()
    def env():
        import os
        return sorted(k for k in os.environ if k.startswith("PGSCHED"))
""")


@pytest.fixture
def module_dir(tmp_path):
    (tmp_path / "pytasks.py").write_text(MODULE)
    (tmp_path / "exploding.py").write_text("raise SystemExit('bye')\n")
    return tmp_path


def run(dsn, sql, name: str, target: str, timeout: float = 20) -> dict:
    cli(dsn, "task", "create", name, "--python", target)
    ident = json.loads(cli(dsn, "task", "trigger", name, "--json").stdout)["execution_id"]
    return wait_until(
        lambda: sql.execute(
            "SELECT * FROM pgsched.execution_history WHERE id = %s", (ident,)
        ).fetchone(),
        timeout=timeout,
        message=name,
    )


def lines(sql, ident: int) -> list[tuple[str, str]]:
    return [
        (r["stream"], r["line"])
        for r in sql.execute(
            "SELECT stream, line FROM pgsched.execution_log WHERE execution_id = %s ORDER BY seq",
            (ident,),
        ).fetchall()
    ]


def test_prints_are_captured_and_unstorable_outcomes_fail_cleanly(dsn, sql, start, module_dir):
    start("worker", "--concurrency", "1", "--poll-interval", "0.5", "--pythonpath", str(module_dir))
    done = run(dsn, sql, "chatty", "pytasks:chatty")
    assert done["state"] == "succeeded" and done["result"] == {"ok": True}
    assert lines(sql, done["id"]) == [
        ("stdout", "to stdout"),
        ("stderr", "to stderr"),
        ("stdout", "no newline"),
    ]

    for name, reason in (
        ("nan_result", "result is not JSON"),
        ("nul_result", "result contains a NUL character"),
    ):
        done = run(dsn, sql, name, f"pytasks:{name}")
        assert done["state"] == "dead" and reason in done["error"], done["error"]
    done = run(dsn, sql, "nul_error", "pytasks:nul_error")
    assert done["state"] == "dead" and done["error"] == "ValueError: boom  nul"

    # An import that raises SystemExit fails that execution; the single slot is free again.
    done = run(dsn, sql, "exploding", "exploding:anything")
    assert done["state"] == "dead" and "failed while importing: SystemExit: bye" in done["error"]
    assert run(dsn, sql, "after", "pytasks:chatty")["state"] == "succeeded"

    # The worker's own settings (PGSCHED_DSN may carry a password) do not reach tasks.
    assert "PGSCHED_DSN" not in run(dsn, sql, "env", "pytasks:env")["result"]


def test_a_hung_python_call_does_not_hold_up_shutdown(dsn, sql, start, module_dir):
    worker = start(
        "worker",
        "--poll-interval",
        "0.5",
        "--shutdown-timeout",
        "1",
        "--pythonpath",
        str(module_dir),
    )
    cli(dsn, "task", "create", "forever", "--python", "pytasks:forever")
    ident = json.loads(cli(dsn, "task", "trigger", "forever", "--json").stdout)["execution_id"]
    wait_until(lambda: ("stdout", "sleeping") in lines(sql, ident), message="the call to start")
    began = time.monotonic()
    assert worker.stop(signal.SIGTERM) == 0
    assert time.monotonic() - began < 8
    row = sql.execute(
        "SELECT state, worker_id FROM pgsched.execution WHERE id = %s", (ident,)
    ).fetchone()
    assert row == {"state": "pending", "worker_id": None}  # handed back
    assert sql.execute("SELECT state FROM pgsched.worker").fetchone()["state"] == "stopped"

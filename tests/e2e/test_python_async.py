"""Async handlers do not exist yet, and a real worker says so: a plain function that
returns a coroutine fails its attempt with a clear TypeError (the coroutine is closed
unrun, not stored, and Python's "never awaited" warning does not appear), a task whose
module declares an ``async def`` with ``@app.task`` fails on import naming it, and
``asyncio.run`` inside a plain ``def`` is the way that works."""

from __future__ import annotations

import json
import textwrap

import pytest

from ..helpers import cli, wait_until

pytestmark = pytest.mark.e2e

MODULE = textwrap.dedent("""
    import asyncio
    from pgsched import App

    app = App()


    async def double(n):
        await asyncio.sleep(0)
        return {"doubled": n * 2}


    @app.task()
    def forgot_to_run_it(n: int = 21):
        return double(n)


    @app.task()
    def runs_it(n: int = 21):
        return asyncio.run(double(n))
""")

ASYNC_MODULE = textwrap.dedent("""
    from pgsched import App

    app = App()


    @app.task()
    async def fetch():
        return 1
""")


def run(dsn, sql, name: str, target: str) -> dict:
    cli(dsn, "task", "create", name, "--python", target)
    ident = json.loads(cli(dsn, "task", "trigger", name, "--json").stdout)["execution_id"]
    return wait_until(
        lambda: sql.execute(
            "SELECT * FROM pgsched.execution_history WHERE id = %s", (ident,)
        ).fetchone(),
        timeout=30,
        message=name,
    )


def test_a_coroutine_returned_by_a_plain_function_fails_its_attempt_clearly(
    dsn, sql, start, tmp_path
):
    (tmp_path / "coro_tasks.py").write_text(MODULE)
    (tmp_path / "async_tasks.py").write_text(ASYNC_MODULE)
    worker = start("worker", "--poll-interval", "0.5", "--pythonpath", str(tmp_path))

    done = run(dsn, sql, "forgot", "coro_tasks:forgot_to_run_it")
    error = (
        "TypeError: forgot_to_run_it returned coroutine object instead of a result: async "
        "handlers are not supported yet; make it a plain def that runs the coroutine, e.g. "
        "return asyncio.run(...)"
    )
    assert (done["state"], done["result"], done["error"]) == ("dead", None, error)
    attempt = sql.execute(
        "SELECT state, error_type FROM pgsched.execution_attempt WHERE execution_id = %s",
        [done["id"]],
    ).fetchone()
    assert attempt == {"state": "failed", "error_type": "TypeError"}
    assert sql.execute(
        "SELECT stream, line FROM pgsched.execution_log WHERE execution_id = %s", [done["id"]]
    ).fetchall() == [{"stream": "system", "line": error.removeprefix("TypeError: ")}]

    done = run(dsn, sql, "runs-it", "coro_tasks:runs_it")
    assert (done["state"], done["result"]) == ("succeeded", {"doubled": 42})

    done = run(dsn, sql, "fetch", "async_tasks:fetch")
    assert done["state"] == "dead"
    assert done["error"] == (
        "python_target: 'async_tasks:fetch' failed while importing: ValidationError: "
        "python_target: 'async_tasks:fetch' is an async def function: @app.task does not support "
        "async handlers yet; make it a plain def (it may run its coroutine with asyncio.run(...) "
        "and return the result)"
    )
    assert "never awaited" not in worker.output

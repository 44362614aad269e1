"""A task's own ``python_isolation`` (migration 0035; issue 19, item 2), on real workers:
a task asking for ``thread`` runs in the worker process even on a process worker, one
asking for ``process`` runs in a child even on a thread worker (whose pool starts at that
first call), and a task without one runs where its worker says. At a timeout the thread
task's call blocked in C is abandoned, as the thread mode documents, while the process
task's child is killed. The options are stored, shown, put back to the worker's, and bad
values refused naming the field and the value."""

from __future__ import annotations

import json
import textwrap

import pytest

from pgsched.errors import ValidationError
from pgsched.taskspec import TaskSpec

from ..helpers import alive, cli, finished, trigger, wait_for

pytestmark = pytest.mark.e2e

MODULE = textwrap.dedent("""
    import os, select
    from pgsched import App

    app = App()

    @app.task()
    def pid():
        return os.getpid()

    @app.task()
    def selecting():
        print("pid", os.getpid(), flush=True)
        select.select([], [], [], 3600)  # blocked in C: TaskInterrupted never lands
""")


@pytest.fixture
def module_dir(tmp_path):
    (tmp_path / "isotasks.py").write_text(MODULE)
    return tmp_path


def _worker(start, module_dir, mode: str):
    return start(
        "worker",
        *("--concurrency", "2", "--poll-interval", "0.5"),
        *("--pythonpath", str(module_dir), "--python-isolation", mode),
    )


def _create(dsn, name: str, function: str, *options: str) -> None:
    cli(dsn, "task", "create", name, "--python", f"isotasks:{function}", *options)


def _started_pid(sql, ident: int) -> int:
    line = wait_for(
        lambda: sql.execute(
            "SELECT line FROM pgsched.execution_log WHERE execution_id = %s AND line LIKE 'pid %%'",
            [ident],
        ).fetchone(),
        timeout=30,
        what=f"execution {ident} to start",
    )
    return int(line["line"].split()[1])


def _attempt(sql, ident: int) -> dict:
    return sql.execute(
        "SELECT state, error FROM pgsched.execution_attempt WHERE execution_id = %s", [ident]
    ).fetchone()


@pytest.mark.parametrize("worker_mode", ["process", "thread"])
def test_each_task_runs_where_it_asks_whatever_its_worker_does(
    dsn, sql, start, module_dir, worker_mode
):
    _create(dsn, "in-thread", "pid", "--python-isolation", "thread")
    _create(dsn, "in-process", "pid", "--python-isolation", "process")
    _create(dsn, "as-worker", "pid")
    worker = _worker(start, module_dir, worker_mode)
    ran = {}
    for name in ("in-thread", "in-process", "as-worker", "in-process"):
        done = finished(sql, trigger(dsn, name))
        assert done["state"] == "succeeded", done
        ran.setdefault(name, set()).add(done["result"])
    assert ran["in-thread"] == {worker.proc.pid}
    (child,) = ran["in-process"]  # one child, reused
    assert child != worker.proc.pid and alive(child)
    assert ran["as-worker"] == ({child} if worker_mode == "process" else {worker.proc.pid})


@pytest.mark.parametrize("worker_mode", ["process", "thread"])
def test_a_thread_task_is_abandoned_at_its_timeout_and_a_process_task_killed(
    dsn, sql, start, module_dir, worker_mode
):
    _create(dsn, "stuck-thread", "selecting", "--timeout", "1", "--python-isolation", "thread")
    _create(dsn, "stuck-process", "selecting", "--timeout", "1", "--python-isolation", "process")
    worker = _worker(start, module_dir, worker_mode)
    in_thread, in_process = trigger(dsn, "stuck-thread"), trigger(dsn, "stuck-process")
    assert _started_pid(sql, in_thread) == worker.proc.pid
    child = _started_pid(sql, in_process)
    assert child != worker.proc.pid
    assert finished(sql, in_process)["state"] == "dead"
    killed = _attempt(sql, in_process)
    assert killed["state"] == "timed_out" and "its process was killed" in killed["error"]
    assert not alive(child)
    assert finished(sql, in_thread)["state"] == "dead"
    abandoned = _attempt(sql, in_thread)
    assert abandoned["state"] == "timed_out", abandoned
    assert abandoned["error"].endswith("TaskInterrupted raised in the call (abandoned)")
    logged = sql.execute(
        "SELECT line FROM pgsched.execution_log WHERE execution_id = %s AND stream = 'system'",
        [in_thread],
    ).fetchall()
    assert any("it was abandoned" in r["line"] for r in logged), logged
    assert worker.proc.poll() is None  # the worker runs on, its call in the background


def test_the_option_is_stored_shown_put_back_and_checked(dsn, sql):
    _create(dsn, "iso", "pid", "--python-isolation", "thread")
    shown = json.loads(cli(dsn, "task", "show", "iso", "--json").stdout)
    assert shown["python_isolation"] == "thread"
    assert "thread" in next(
        line
        for line in cli(dsn, "task", "show", "iso").stdout.splitlines()
        if line.startswith("python_isolation")
    )
    cli(dsn, "task", "update", "iso", "--python-isolation", "process")
    stored = "SELECT python_isolation FROM pgsched.task WHERE name = 'iso'"
    assert sql.execute(stored).fetchone()["python_isolation"] == "process"
    updated = cli(dsn, "task", "update", "iso", "--python-isolation", "worker", "--json")
    assert json.loads(updated.stdout)["python_isolation"] is None
    assert sql.execute(stored).fetchone()["python_isolation"] is None
    shown_text = cli(dsn, "task", "show", "iso").stdout.splitlines()
    assert [line.split() for line in shown_text if line.startswith("python_isolation")] == [
        ["python_isolation", "worker"]
    ]
    bad = cli(dsn, "task", "update", "iso", "--python-isolation", "fork", check=False)
    assert bad.returncode != 0 and "--python-isolation" in bad.stderr and "fork" in bad.stderr
    with pytest.raises(ValidationError, match=r"python_isolation.*'fork'"):
        TaskSpec(
            name="t", handler_kind="python", python_target="m:f", python_isolation="fork"
        ).validate()

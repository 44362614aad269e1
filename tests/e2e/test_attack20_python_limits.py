"""Attack 20 on the per-task python_isolation (migration 0035): a task of a tenant asked
for ``thread`` on a worker that caps each Python child's memory (--python-memory-limit),
and its handler ran inside the worker with no cap at all: whoever may define a task
escaped the limit the worker's operator set. Such a worker now fails that attempt for good,
saying why, and runs the task's handler nowhere; the worker lives on."""

from __future__ import annotations

import textwrap

import pytest

from ..helpers import alive, cli, finished, trigger

pytestmark = pytest.mark.e2e

MODULE = textwrap.dedent("""
    import os
    from pgsched import App

    app = App()

    @app.task()
    def where():
        return os.getpid()
""")


def test_a_task_cannot_leave_its_workers_python_memory_limit_by_asking_for_a_thread(
    dsn, sql, start, tmp_path
):
    (tmp_path / "limtasks.py").write_text(MODULE)
    worker = start(
        "worker",
        *("--concurrency", "1", "--poll-interval", "0.5", "--pythonpath", str(tmp_path)),
        *("--python-isolation", "process", "--python-memory-limit", "512MiB"),
    )
    cli(dsn, "task", "create", "escape", "--python", "limtasks:where")
    cli(dsn, "task", "update", "escape", "--python-isolation", "thread", "--max-attempts", "3")
    row = finished(sql, trigger(dsn, "escape"), timeout=60)
    assert row["state"] == "dead", row  # for good: another attempt would be refused too
    assert row["attempt"] == 1 and row["result"] is None, row
    assert "python_isolation 'thread'" in row["error"] and "--python-memory-limit" in row["error"]
    assert alive(worker.proc.pid)
    cli(dsn, "task", "update", "escape", "--python-isolation", "worker")
    row = finished(sql, trigger(dsn, "escape"), timeout=60)
    assert row["state"] == "succeeded" and row["result"] != worker.proc.pid, row

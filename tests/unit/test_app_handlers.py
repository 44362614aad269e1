"""What ``@app.task`` and ``@app.node`` accept (issue 14): an ``async def`` is refused at
decoration time, naming the function and what to write instead; a script run directly
declares its tasks under its file name, which workers import; a function no worker could
import (``python -c``, a nested function) is refused with the reason."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from pgsched import App
from pgsched.app import resolve
from pgsched.errors import ValidationError

ASYNC = (
    "is an async def function: @app.task does not support async handlers yet; make it a plain def "
    "(it may run its coroutine with asyncio.run(...) and return the result)"
)


async def fetch(region: str = "eu") -> dict:
    return {"region": region}


async def stream():
    yield 1


def test_an_async_def_task_is_refused_naming_the_function_and_what_to_do():
    app = App()
    with pytest.raises(ValidationError) as caught:
        app.task(schedule="*/5 * * * *")(fetch)
    assert str(caught.value) == f"python_target: '{__name__}:fetch' {ASYNC}"
    assert caught.value.field == "python_target" and app.specs == {}
    with pytest.raises(ValidationError, match="stream' is an async def function"):
        app.task()(stream)  # an async generator is no handler either
    assert app.specs == {}


def test_an_async_def_node_is_refused_too():
    app = App()
    with pytest.raises(
        ValidationError, match=r"python: '.*:fetch' is an async def function: @app.node does not"
    ):
        app.node()(fetch)
    with pytest.raises(
        ValidationError, match=r"nodes\[a\].python: '.*:fetch' is an async def function"
    ):
        app.dag({"name": "d", "nodes": [{"id": "a", "python": fetch}]})


def test_a_worker_refuses_an_async_function_registered_behind_the_decorators_back(
    tmp_path, monkeypatch
):
    (tmp_path / "sneaky_tasks.py").write_text(
        textwrap.dedent("""
        async def job():
            return 1
        job.__pgsched_task__ = "sneaky_tasks:job"  # as a decorator of an older pgsched left it
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(
        ValidationError,
        match="'sneaky_tasks:job' is an async def function: async handlers are not supported yet",
    ):
        resolve("sneaky_tasks:job")


def script(tmp_path, name: str, *args: str) -> subprocess.CompletedProcess:
    (tmp_path / name).write_text(
        textwrap.dedent("""
        from pgsched import App

        app = App()

        @app.task()
        def refresh():
            return 1

        print(app.specs["refresh"].python_target, app.specs["refresh"].source)
    """)
    )
    return subprocess.run(
        [sys.executable, *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_script_run_directly_declares_its_tasks_under_its_file_name(tmp_path):
    run = script(tmp_path, "tasks.py", "tasks.py")
    assert (run.returncode, run.stdout) == (0, "tasks:refresh python:tasks\n"), run.stderr
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    run = script(tmp_path, "pkg/jobs.py", "-m", "pkg.jobs")  # python -m: the module it ran
    assert (run.returncode, run.stdout) == (0, "pkg.jobs:refresh python:pkg.jobs\n"), run.stderr


@pytest.mark.parametrize("name", ["my-tasks.py", "class.py"])
def test_a_script_whose_name_is_no_module_name_is_refused(tmp_path, name):
    run = script(tmp_path, name, name)
    assert run.returncode == 1
    assert (
        "ValidationError: python_target: '__main__:refresh' is defined where no worker can "
        "import it (an interactive session, python -c, or a script whose file name is not a "
        "module name): define tasks in a module file such as tasks.py"
    ) in run.stderr


def test_a_nested_function_is_refused():
    app = App()

    def inner():
        return 1

    with pytest.raises(
        ValidationError, match="is defined inside a function, where no worker can import it"
    ):
        app.task()(inner)


def plain() -> int:
    return 1


def test_a_task_declares_where_its_python_runs_and_a_bad_value_is_refused():
    """``@app.task(python_isolation=...)`` (migration 0035): stored with the task by sync;
    None, the default, is the worker's."""
    app = App()
    app.task("in-thread", python_isolation="thread")(plain)
    app.task("as-worker")(plain)
    assert app.specs["in-thread"].python_isolation == "thread"
    assert app.specs["as-worker"].python_isolation is None
    with pytest.raises(ValidationError) as caught:
        app.task("bad", python_isolation="fork")(plain)
    assert caught.value.field == "python_isolation" and "'fork'" in str(caught.value)
    assert "bad" not in app.specs

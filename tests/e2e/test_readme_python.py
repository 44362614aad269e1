"""The README's Python example runs as written: each ```python block of README.md is
saved under the file name its first line gives (``# tasks.py: ...``) and run with
``python FILE`` against a fresh, empty database; the tasks it stores are then triggered
and run by a real ``pgsched worker`` started as the README says, and each ends
``succeeded`` with the result its function returns. So the README cannot drift again."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys

import psycopg
import pytest
from psycopg.rows import dict_row

from ..helpers import REPO, Process, cli, wait_until

pytestmark = pytest.mark.e2e

BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)
FILE_NAME = re.compile(r"#\s*([A-Za-z_][A-Za-z0-9_]*)\.py\b")


def readme_blocks() -> list[tuple[str, str]]:
    """(module name, code) of each Python block in README.md."""
    found = []
    for i, code in enumerate(BLOCK.findall((REPO / "README.md").read_text())):
        named = FILE_NAME.match(code.splitlines()[0])
        found.append((named[1] if named else f"readme_block_{i}", code))
    return found


@pytest.fixture
def sql_of():
    """``sql_of(dsn)``: an autocommit connection to ``dsn``, closed after the test."""
    opened: list[psycopg.Connection] = []

    def connect(dsn: str) -> psycopg.Connection:
        opened.append(psycopg.connect(dsn, autocommit=True, row_factory=dict_row))
        return opened[-1]

    yield connect
    for conn in opened:
        conn.close()


def test_the_readme_has_the_python_example_with_sync_and_connect():
    blocks = readme_blocks()
    assert blocks, "README.md has no ```python block"
    assert any("app.sync(app.connect())" in code for _, code in blocks)
    assert "--pythonpath" in readme_worker()


def readme_worker() -> list[str]:
    """The arguments of the ``pgsched worker`` command the README gives for its Python
    example (the first after the ``From Python`` heading), without its comment."""
    text = (REPO / "README.md").read_text()
    section = text[text.index("### From Python") :]
    line = re.search(r"^pgsched worker (.+?)\s*(#.*)?$", section, re.M)
    assert line, "README.md's From Python section starts no worker"
    return shlex.split(line.group(1))


@pytest.mark.parametrize(("module", "code"), readme_blocks())
def test_each_readme_python_block_runs_as_written_and_a_worker_runs_its_tasks(
    empty_dsn, sql_of, tmp_path, module, code
):
    (tmp_path / f"{module}.py").write_text(code)
    env = {"PGSCHED_DSN": empty_dsn, "PATH": "/usr/bin:/bin"}

    def run_script() -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, f"{module}.py"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            check=False,
            text=True,
            timeout=120,
        )

    first = run_script()
    assert first.returncode == 0, first.stderr
    sql = sql_of(empty_dsn)
    stored = sql.execute(
        "SELECT name, python_target, schedule_kind, next_fire_at FROM pgsched.task "
        "WHERE python_target LIKE %s ORDER BY name",
        [f"{module}:%"],
    ).fetchall()
    assert stored, f"running {module}.py stored no task: {first.stdout}"
    assert all(t["schedule_kind"] == "none" or t["next_fire_at"] is not None for t in stored)
    names = [t["name"] for t in stored]
    assert f"created: {names}" in first.stdout or first.stdout == ""
    again = run_script()  # idempotent: a second run creates nothing and changes nothing
    assert again.returncode == 0, again.stderr
    assert "created: []" in again.stdout or again.stdout == ""
    assert [
        t["name"]
        for t in sql.execute(
            "SELECT name FROM pgsched.task WHERE python_target LIKE %s ORDER BY name",
            [f"{module}:%"],
        )
    ] == names

    # what each function returns with its defaults, computed by importing the module apart
    expected = {}
    for t in stored:
        attr = t["python_target"].partition(":")[2]
        out = subprocess.run(
            [sys.executable, "-c", f"import json, {module}; print(json.dumps({module}.{attr}()))"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        expected[t["name"]] = json.loads(out.stdout)

    args = [str(tmp_path) if a == "." else a for a in readme_worker()]  # as the README says
    worker = Process(empty_dsn, "worker", *args, "--poll-interval", "0.5", log_dir=tmp_path)
    try:
        ids = {
            name: json.loads(cli(empty_dsn, "task", "trigger", name, "--json").stdout)[
                "execution_id"
            ]
            for name in names
        }
        done = wait_until(
            lambda: (
                (
                    rows := sql.execute(
                        "SELECT id, state, result FROM pgsched.execution_history "
                        "WHERE id = ANY(%s)",
                        [list(ids.values())],
                    ).fetchall()
                )
                and len(rows) == len(ids)
                and rows
            ),
            timeout=60,
            message="the README's tasks to finish",
        )
        by_id = {r["id"]: r for r in done}
        assert {n: (by_id[i]["state"], by_id[i]["result"]) for n, i in ids.items()} == {
            n: ("succeeded", expected[n]) for n in names
        }, worker.output
    finally:
        worker.stop()

"""Params reach handlers end to end as JSON text (execution_claim returns e.params::text):
a Python handler gets them decoded, a command gets PostgreSQL's text in PGSCHED_PARAMS,
or in the file PGSCHED_PARAMS_FILE names when the text is over 96 KB."""

from __future__ import annotations

import hashlib
import json
import sys
import textwrap

import pytest

from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec

from ..helpers import finished, wait_until

pytestmark = pytest.mark.e2e

MODULE = textwrap.dedent("""
    from pgsched import App

    app = App()

    @app.task()
    def echo(**params):
        return params
""")

READER = (
    "import hashlib, json, os, sys\n"
    "text = os.environ.get('PGSCHED_PARAMS')\n"
    "where = 'env'\n"
    "if text is None:\n"
    "    text, where = open(os.environ['PGSCHED_PARAMS_FILE'], encoding='utf-8').read(), 'file'\n"
    "p = json.loads(text)\n"
    "print(where, hashlib.sha256(json.dumps(p, sort_keys=True).encode()).hexdigest())\n"
)

CASES = {
    "unicode": {"s": "héllo ✓ 日本 \U0001f600", "q": 'a "quoted" \\ back'},
    "numbers": {"big": 123456789012345678901234567890, "huge": 10**400, "neg": -0.5, "f": 1.25},
    "nested": {"a": {"b": [1, {"c": None, "d": [True, False]}]}, "e": []},
    "empty": {},
    "large": {"blob": "x" * 120_000, "u": "é" * 10},
}


def digest(p):
    return hashlib.sha256(json.dumps(p, sort_keys=True).encode()).hexdigest()


@pytest.fixture
def module_dir(tmp_path):
    (tmp_path / "echotasks.py").write_text(MODULE)
    (tmp_path / "reader.py").write_text(READER)
    return tmp_path


def test_params_reach_python_handlers_and_commands_intact(db, dsn, sql, start, module_dir):
    tasks.create(db, TaskSpec(name="py", handler_kind="python", python_target="echotasks:echo"))
    tasks.create(
        db,
        TaskSpec(
            name="cmd", handler_kind="argv", argv=[sys.executable, str(module_dir / "reader.py")]
        ),
    )
    start("worker", "--concurrency", "2", "--poll-interval", "0.5", "--pythonpath", str(module_dir))
    for label, params in CASES.items():
        ident = tasks.trigger(db, "py", params=params)
        done = finished(sql, ident)
        assert done["state"] == "succeeded", (label, done["error"])
        assert sql.execute(
            "SELECT result = params AS same FROM pgsched.execution_history WHERE id = %s", [ident]
        ).fetchone()["same"], label
        assert done["result"] == params, label

        ident = tasks.trigger(db, "cmd", params=params)
        done = finished(sql, ident)
        assert done["state"] == "succeeded", (label, done["error"])
        out = wait_until(
            lambda: sql.execute(
                "SELECT line FROM pgsched.execution_log WHERE execution_id = %s AND stream = 'stdout'",
                [ident],
            ).fetchone(),
            message=label,
        )["line"]
        where = "file" if label == "large" else "env"
        assert out == f"{where} {digest(params)}", label

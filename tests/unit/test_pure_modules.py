"""The pure core (task specs, schedules, cron, retry, DAG definitions and rules, crontab
parsing, the vocabularies, the rule from an ended attempt to its execution's state)
imports no database driver and no face: each module is imported alone in a fresh interpreter and the modules it loaded are checked."""

from __future__ import annotations

import subprocess
import sys

import pytest

PURE = [
    "pgsched",
    "pgsched.taskspec",
    "pgsched.task_kinds",
    "pgsched.task_checks",
    "pgsched.task_rows",
    "pgsched.enqueued",
    "pgsched.windows",
    "pgsched.schedule",
    "pgsched.retry",
    "pgsched.crontab",
    "pgsched.jsontext",
    "pgsched.masking",
    "pgsched.errors",
    "pgsched.lifecycle",
    "pgsched.roles",
    "pgsched.cron",
    "pgsched.cron.fields",
    "pgsched.cron.days",
    "pgsched.cron.dst",
    "pgsched.cron.fires",
    "pgsched.cron.walk",
    "pgsched.cron.expression",
    "pgsched.dag",
    "pgsched.dag.definition",
    "pgsched.dag.loading",
    "pgsched.dag.validation",
    "pgsched.dag.graph",
    "pgsched.dag.rules",
    "pgsched.lazy",
    "pgsched.worker.outcome",
    "pgsched.settings",
    "pgsched.secret_refs",
    "pgsched.secret_keys",
]
FORBIDDEN = ("psycopg", "psycopg_pool", "starlette", "jinja2", "click")


@pytest.mark.parametrize("module", PURE)
def test_a_pure_module_loads_no_driver_and_no_face(module):
    probe = (
        f"import sys, {module}\n"
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r}))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", f"importing {module} loaded {out.stdout.strip()}"


def test_the_package_still_gives_its_public_names():
    probe = (
        "from pgsched import App, PgschedError, TaskInterrupted, ValidationError\n"
        "import pgsched\n"
        "print(App.__module__, PgschedError.__module__, TaskInterrupted.__name__, ValidationError.__name__)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [
        "pgsched.app",
        "pgsched.errors",
        "TaskInterrupted",
        "ValidationError",
    ]


def test_an_unknown_name_is_an_attribute_error():
    import pgsched

    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        pgsched.Nope  # noqa: B018


def test_dir_lists_the_lazy_names():
    probe = (
        "import pgsched, pgsched.worker\n"
        "print({'App', 'TaskInterrupted'} <= set(dir(pgsched)), 'Worker' in dir(pgsched.worker))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["True", "True"]

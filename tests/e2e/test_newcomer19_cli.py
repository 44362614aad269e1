"""A newcomer's findings on issue 19's sandbox and secrets, through the CLI a user types:
a task's own limits on a worker that does not isolate are said to be ignored (by ``task
show`` and in the execution's log); ``task show`` says network in ``--network``'s words;
``--json`` prints UTF-8 as it is; secret references are checked at ``task create``; ``task
update --env`` merges (``--unset-env``, ``--env-replace``)."""

from __future__ import annotations

import json

import pytest

from pgsched.stores import tasks

from ..helpers import cli, finished, wait_for

pytestmark = pytest.mark.e2e


def test_a_tasks_own_limits_on_a_worker_that_does_not_isolate_are_said_to_be_ignored(
    db, dsn, sql, start
):
    cli(dsn, "task", "create", "capped", "--command", "echo ran", "--limit-cpu", "5s",
        "--network", "deny")  # fmt: skip
    shown = cli(dsn, "task", "show", "capped").stdout
    assert "network            deny" in shown and "network True" not in shown, shown
    assert "apply only on a worker that isolates its commands" in shown, shown
    plain = cli(dsn, "task", "create", "plain", "--command", "true").stdout
    assert plain and "network            worker" in cli(dsn, "task", "show", "plain").stdout
    assert "isolates" not in cli(dsn, "task", "show", "plain").stdout
    worker = start("worker", "--poll-interval", "0.5")
    wait_for(lambda: "isolation:" in worker.output, 30, what=lambda: worker.output)
    ident = tasks.trigger(db, "capped")
    assert finished(sql, ident)["state"] == "succeeded"
    lines = [
        r["line"]
        for r in sql.execute(
            "SELECT line FROM pgsched.execution_log WHERE execution_id = %s AND stream = 'system'",
            (ident,),
        )
    ]
    assert any(
        "this task's own cpu 5s; network deny not applied" in line and "--isolation none" in line
        for line in lines
    ), lines


def test_json_output_is_utf8_as_it_is(dsn):
    cli(dsn, "task", "create", "cafe", "--command", "true", "--description", "naïve • ✓")
    out = cli(dsn, "task", "show", "cafe", "--json").stdout
    assert '"description": "naïve • ✓"' in out and "\\u" not in out, out
    assert json.loads(out)["description"] == "naïve • ✓"
    listed = cli(dsn, "task", "list", "--json").stdout
    assert "naïve • ✓" in listed


def test_secret_references_are_checked_at_create(dsn):
    bad = cli(dsn, "task", "create", "typo", "--command", "true",
              "--env", "DB={{secret:has space}}", check=False)  # fmt: skip
    assert bad.returncode != 0, bad
    assert "env.DB" in bad.stderr and "{{secret:has space}}" in bad.stderr, bad.stderr
    assert "typo" not in cli(dsn, "task", "list").stdout
    made = cli(dsn, "task", "create", "later", "--command", "true",
               "--env", "DB=postgresql://app:{{secret:db-pw}}@db/app",
               "--env", "TOKEN={{secret:env:api}}")  # fmt: skip
    assert "created task later" in made.stdout
    assert "env.DB references {{secret:db-pw}}, which tenant 'default' has no secret" in (
        made.stderr
    ), made.stderr
    assert "api" not in made.stderr  # a provider's secret is the worker's: not checked here
    bad_param = cli(dsn, "task", "create", "py", "--python", "m:f",
                    "--params", '{"k": ["{{secret:"]}', check=False)  # fmt: skip
    assert bad_param.returncode != 0 and "params.k" in bad_param.stderr, bad_param.stderr


def test_update_env_merges_and_unsets_and_replaces(dsn, sql):
    def env() -> dict:
        return sql.execute("SELECT env FROM pgsched.task WHERE name = 'e'").fetchone()["env"]

    cli(dsn, "task", "create", "e", "--command", "true", "--env", "A=1", "--env", "B=2")
    cli(dsn, "task", "update", "e", "--env", "C=3", "--env", "A=10")
    assert env() == {"A": "10", "B": "2", "C": "3"}
    unset = cli(dsn, "task", "update", "e", "--unset-env", "B", "--unset-env", "NOT_THERE")
    assert env() == {"A": "10", "C": "3"}
    assert "NOT_THERE: not in task e's environment" in unset.stderr, unset.stderr
    clash = cli(dsn, "task", "update", "e", "--env", "A=2", "--unset-env", "A", check=False)
    assert clash.returncode != 0 and "'A' is also given by --env" in clash.stderr, clash.stderr
    assert env() == {"A": "10", "C": "3"}
    cli(dsn, "task", "update", "e", "--env-replace", "--env", "Z=26")
    assert env() == {"Z": "26"}
    lone = cli(dsn, "task", "update", "e", "--env-replace", check=False)
    assert lone.returncode != 0 and "or --no-env to remove every variable" in lone.stderr
    for name in ("BAD NAME", "1ST", "A-B"):  # a shell would drop them from the environment
        bad = cli(dsn, "task", "update", "e", "--env", f"{name}=1", check=False)
        assert bad.returncode != 0 and f"env: {name!r} is not a variable name" in bad.stderr
    assert env() == {"Z": "26"}
    both = cli(dsn, "task", "update", "e", "--no-env", "--unset-env", "Z", check=False)
    assert both.returncode != 0 and "unset_env" in both.stderr, both.stderr
    assert "--unset-env" in cli(dsn, "task", "update", "--help").stdout

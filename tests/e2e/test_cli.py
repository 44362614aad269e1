"""The CLI as a user meets it: one-line errors naming the field and value, nothing
half-written, --json listings, dry runs."""

from __future__ import annotations

import json

import pytest

from ..conftest import SHARED
from ..helpers import cli

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize(("args", "expected"), [
    (["--command", "true", "--cron", "61 * * * *"], "schedule: '61 * * * *'"),
    (["--command", "true", "--cron", "* * * *"], "has 4 fields"),
    (["--command", "true", "--every", "0s"], "schedule: '0s' must be a positive interval"),
    (["--command", "true", "--every", "5 parsecs"], "schedule: '5 parsecs'"),
    (["--command", "true", "--cron", "@daily", "--tz", "Mars/Olympus"], "timezone: 'Mars/Olympus'"),
    (["--command", "true", "--priority", "11"], "priority: 11"),
    (["--command", "true", "--params", "[1, 2]"], "params: '[1, 2]' must be a JSON object"),
    (["--command", "true", "--params", "{oops"], "params: '{oops' is not valid JSON"),
    (["--command", "true", "--queue", "bad queue"], "queue: 'bad queue'"),
    (["--command", "true", "--timeout", "-1"], "timeout_seconds: -1.0"),
    (["--command", "true", "--at", "tomorrow-ish"], "at: 'tomorrow-ish'"),
    (["--command", "true", "--argv", "[\"ls\"]"], "handler: ['command', 'argv']"),
    (["--python", "no_colon_here"], "python_target: 'no_colon_here'"),
    ([], "give exactly one of --command, --argv, --python"),
])
def test_bad_task_input_is_one_line_naming_field_and_value(dsn, sql, args, expected):
    proc = cli(dsn, "task", "create", "bad", *args, check=False)
    assert proc.returncode == 1
    assert expected in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert sql.execute("SELECT count(*) AS n FROM pgsched.task").fetchone()["n"] == 0


def test_duplicate_name_unknown_task_and_unknown_execution(dsn, sql):
    cli(dsn, "task", "create", "once-only", "--command", "true")
    proc = cli(dsn, "task", "create", "once-only", "--command", "false", check=False)
    assert proc.returncode == 1 and "name: 'once-only' already exists" in proc.stderr
    for args in (["task", "trigger", "ghost"], ["task", "pause", "ghost"], ["task", "show", "ghost"],
                 ["task", "delete", "ghost"]):
        proc = cli(dsn, *args, check=False)
        assert proc.returncode == 1 and "'ghost'" in proc.stderr, (args, proc.stderr)
    proc = cli(dsn, "execution", "show", "999999", check=False)
    assert proc.returncode == 1 and "999999" in proc.stderr
    assert sql.execute("SELECT count(*) AS n FROM pgsched.execution").fetchone()["n"] == 0


def test_unreachable_database_is_one_clear_line():
    proc = cli("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2", "task", "list", check=False)
    assert proc.returncode == 1 and "database unreachable" in proc.stderr and "Traceback" not in proc.stderr


def test_listings_take_json_and_lifecycle_commands_work(dsn, sql):
    cli(dsn, "task", "create", "nightly", "--command", "echo hi", "--cron", "30 2 * * *", "--tz", "Europe/Paris")
    tasks = json.loads(cli(dsn, "task", "list", "--json").stdout)
    assert [t["name"] for t in tasks] == ["nightly"] and tasks[0]["timezone"] == "Europe/Paris"
    shown = json.loads(cli(dsn, "task", "show", "nightly", "--json").stdout)
    assert len(shown["upcoming"]) == 5
    assert cli(dsn, "task", "pause", "nightly").stdout.strip() == "paused nightly"
    assert sql.execute("SELECT enabled FROM pgsched.task").fetchone()["enabled"] is False
    cli(dsn, "task", "resume", "nightly")
    assert sql.execute("SELECT enabled FROM pgsched.task").fetchone()["enabled"] is True
    ident = json.loads(cli(dsn, "task", "trigger", "nightly", "--json").stdout)["execution_id"]
    rows = json.loads(cli(dsn, "execution", "list", "--json").stdout)
    assert [(r["id"], r["state"], r["trigger"]) for r in rows] == [(ident, "pending", "manual")]
    assert "pending" in cli(dsn, "execution", "list").stdout
    out = cli(dsn, "task", "delete", "nightly").stdout
    assert "1 pending execution(s) dropped" in out
    assert json.loads(cli(dsn, "task", "list", "--json").stdout) == []
    assert json.loads(cli(dsn, "status", "--json").stdout)["workers"] == []


def test_import_dry_run_writes_nothing_and_reports_every_line(dsn, sql, tmp_path):
    out = cli(dsn, "import-crontab", "--system", "--dry-run", str(SHARED / "data" / "crontabs" / "munin.cron.d")).stdout
    assert out.count("would create") == 4
    assert "MAILTO=root" in out and "sends no mail" in out
    assert sql.execute("SELECT count(*) AS n FROM pgsched.task").fetchone()["n"] == 0
    bad = tmp_path / "mixed"
    bad.write_text("SHELL=/bin/bash\n* * * * * echo ok\n61 * * * * echo bad minute\n@reboot echo boot\nnonsense\n")
    result = json.loads(cli(dsn, "import-crontab", str(bad), "--json").stdout)
    by_line = {line["line_no"]: line for line in result["lines"]}
    assert by_line[2]["action"] == "created"
    assert by_line[3]["action"] == "problem" and "'61'" in by_line[3]["reason"]
    assert by_line[4]["action"] == "problem" and "@reboot" in by_line[4]["reason"]
    assert by_line[5]["action"] == "problem" and "line 5" in by_line[5]["reason"]
    task = sql.execute("SELECT env, command FROM pgsched.task").fetchone()
    assert task == {"env": {"SHELL": "/bin/bash"}, "command": "echo ok"}


def test_help_is_there():
    out = cli(None, "--help").stdout
    for command in ("dev", "migrate", "scheduler", "worker", "status", "task", "execution", "import-crontab"):
        assert command in out
    assert "--concurrency" in cli(None, "worker", "--help").stdout

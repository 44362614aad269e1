"""The CLI as a user meets it: one-line errors naming the field and value, nothing
half-written, --json listings, dry runs."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from ..conftest import crontab_file
from ..helpers import cli

pytestmark = pytest.mark.e2e


BAD_DEFINITIONS = [
    (["--command", "true", "--cron", "61 * * * *"], "schedule: '61 * * * *'"),
    (["--command", "true", "--cron", "* * * *"], "has 4 fields"),
    (
        ["--command", "true", "--every", "0s"],
        "schedule: '0s' must be an interval from 1 second to 3650 days",
    ),
    (
        ["--command", "true", "--every", "1e-300"],
        "schedule: '1e-300' must be an interval from 1 second",
    ),
    (
        ["--command", "true", "--every", "99999999999d"],
        "schedule: '99999999999d' must be an interval",
    ),
    (
        ["--command", "true", "--cron", "0 0 31 2 *"],
        (
            "schedule: '0 0 31 2 *' is not a usable cron expression: day-of-month 31 never occurs in "
            "month 2"
        ),
    ),
    (["--command", "true", "--cron", "5-1 * * * *"], "minute 5-1 is a reversed range"),
    (["--command", "true", "--cron", "1,60 * * * *"], "minute 60 is out of range 0-59 (in 1,60)"),
    (
        ["--command", "true", "--cron", "0 9 31W 4,6 *"],
        "day-of-month 31W never occurs in months 4,6 (April and June have 30 days)",
    ),
    (["--command", "true", "--cron", ""], "schedule: '' is required for a cron schedule"),
    (["--command", ""], "command: '' is required for a shell task"),
    (["--command", "true", "--timeout", "inf"], "timeout_seconds: inf must be a number of seconds"),
    (["--command", "true", "--timeout", "nan"], "timeout_seconds: nan must be a number of seconds"),
    (
        ["--command", "true", "--retry-base", "nan"],
        "retry_base_seconds: nan must be a number of seconds",
    ),
    (
        ["--command", "true", "--max-attempts", "99999999999"],
        "max_attempts: 99999999999 must be an integer from 1",
    ),
    (
        ["--command", "true", "--params", '{"a": NaN}'],
        "params: {'a': nan} is not valid JSON for PostgreSQL",
    ),
    (["--command", "true", "--params", '{"a": "x\\u0000"}'], "contains a NUL character"),
    (["--argv", '{"a": 1}'], "argv: {'a': 1} must be a non-empty list of strings"),
    (["--command", "true", "--at", "+99999999d"], "at: '+99999999d' is not an ISO 8601 timestamp"),
    (["--command", "true", "--queue", "q\n"], "queue: 'q\\n' must be 1-64 characters"),
    (["--command", "true", "--every", "5 parsecs"], "schedule: '5 parsecs'"),
    (["--command", "true", "--cron", "@daily", "--tz", "Mars/Olympus"], "timezone: 'Mars/Olympus'"),
    (["--command", "true", "--priority", "11"], "priority: 11"),
    (["--command", "true", "--params", "[1, 2]"], "params: '[1, 2]' must be a JSON object"),
    (["--command", "true", "--params", "{oops"], "params: '{oops' is not valid JSON"),
    (["--command", "true", "--queue", "bad queue"], "queue: 'bad queue'"),
    (["--command", "true", "--timeout", "-1"], "timeout_seconds: -1.0"),
    (["--command", "true", "--at", "tomorrow-ish"], "at: 'tomorrow-ish'"),
    (["--command", "true", "--argv", '["ls"]'], "handler: ['command', 'argv']"),
    (["--python", "no_colon_here"], "python_target: 'no_colon_here'"),
    (["--command", "true", "--cron", "0 9 * * 5#6"], "day-of-week 5#6 has occurrence 6"),
]


@pytest.mark.parametrize(
    ("args", "expected"),
    [*BAD_DEFINITIONS, ([], "handler: give one of --command, --argv, --python")],
)
def test_bad_task_input_is_one_line_naming_field_and_value(dsn, sql, args, expected):
    proc = cli(dsn, "task", "create", "bad", *args, check=False)
    assert proc.returncode == 1
    assert expected in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert sql.execute("SELECT count(*) AS n FROM pgsched.task").fetchone()["n"] == 0


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        *BAD_DEFINITIONS,
        ([], "update: nothing to change"),
        (
            ["--every", "5m", "--no-schedule"],
            "schedule: ['every', 'no_schedule'] give at most one of",
        ),
        (
            ["--timeout", "5", "--no-timeout"],
            "timeout: 5.0 give --timeout or --no-timeout, not both",
        ),
    ],
)
def test_bad_update_is_one_line_naming_field_and_value_and_changes_nothing(
    dsn, sql, args, expected
):
    cli(dsn, "task", "create", "good", "--command", "true", "--cron", "0 9 * * *")
    before = sql.execute("SELECT * FROM pgsched.task").fetchall()
    proc = cli(dsn, "task", "update", "good", *args, check=False)
    assert proc.returncode == 1
    assert expected in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
    assert sql.execute("SELECT * FROM pgsched.task").fetchall() == before


def test_task_update_changes_only_what_is_given(dsn, sql):
    cli(
        dsn,
        "task",
        "create",
        "nightly",
        "--command",
        "backup",
        "--cron",
        "0 2 * * *",
        "--priority",
        "3",
    )
    out = cli(
        dsn, "task", "update", "nightly", "--cron", "0 2 L * *", "--tz", "America/New_York"
    ).stdout
    assert out.startswith("updated task nightly (schedule, timezone); next fire: ")
    row = json.loads(cli(dsn, "task", "update", "nightly", "--env", "A=1", "--json").stdout)
    assert (row["schedule_expr"], row["timezone"], row["command"], row["priority"], row["env"]) == (
        "0 2 L * *",
        "America/New_York",
        "backup",
        3,
        {"A": "1"},
    )
    shown = json.loads(cli(dsn, "task", "show", "nightly", "--json").stdout)
    for text in shown["upcoming"]:  # 02:00 New York time on the last day of a month
        local = datetime.fromisoformat(text).astimezone(ZoneInfo("America/New_York"))
        assert (local.hour, local.minute, (local + timedelta(days=1)).day) == (2, 0, 1), text
    assert len(shown["upcoming"]) == 5


def test_a_name_with_a_trailing_newline_is_refused(dsn, sql):
    proc = cli(dsn, "task", "create", "nl\n", "--command", "true", check=False)
    assert proc.returncode == 1 and "name: 'nl\\n' must be" in proc.stderr
    assert sql.execute("SELECT count(*) AS n FROM pgsched.task").fetchone()["n"] == 0


def test_naive_at_is_read_in_the_task_time_zone(dsn, sql):
    cli(
        dsn,
        "task",
        "create",
        "berlin-once",
        "--command",
        "true",
        "--at",
        "2031-12-01T09:00:00",
        "--tz",
        "Europe/Berlin",
    )
    row = sql.execute("SELECT next_fire_at FROM pgsched.task").fetchone()
    assert row["next_fire_at"].isoformat() == "2031-12-01T08:00:00+00:00"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["scheduler", "--retention-days", "-1"], "-1 is not in the range 1<=x<=36500"),
        (["scheduler", "--batch", "0"], "0 is not in the range 1<=x<=100000"),
        (["worker", "--poll-interval", "nan"], "'nan' is not between 0.05 and 3600 seconds"),
        (["worker", "--heartbeat-interval", "0"], "'0' is not between 0.5 and 3600 seconds"),
        (["worker", "--shutdown-timeout", "-5"], "'-5' is not between 0 and 86400 seconds"),
        (["worker", "--queue", ""], "queue: '' must be 1-64 characters"),
    ],
)
def test_process_flags_are_checked_before_anything_runs(dsn, args, message):
    proc = cli(dsn, *args, check=False, timeout=30)
    assert proc.returncode in (1, 2) and message in proc.stderr, proc.stderr


def test_a_crontab_that_is_not_utf8_is_one_line(dsn, tmp_path):
    bad = tmp_path / "latin1"
    bad.write_bytes("# caf\xe9\n* * * * * echo ok\n".encode("latin-1"))
    proc = cli(dsn, "import-crontab", str(bad), check=False)
    assert proc.returncode == 1 and "is not UTF-8 text (byte 5 is 0xe9)" in proc.stderr


def test_duplicate_name_unknown_task_and_unknown_execution(dsn, sql):
    cli(dsn, "task", "create", "once-only", "--command", "true")
    proc = cli(dsn, "task", "create", "once-only", "--command", "false", check=False)
    assert proc.returncode == 1 and "name: 'once-only' already exists" in proc.stderr
    for args in (
        ["task", "trigger", "ghost"],
        ["task", "pause", "ghost"],
        ["task", "show", "ghost"],
        ["task", "delete", "ghost"],
    ):
        proc = cli(dsn, *args, check=False)
        assert proc.returncode == 1 and "'ghost'" in proc.stderr, (args, proc.stderr)
    proc = cli(dsn, "execution", "show", "999999", check=False)
    assert proc.returncode == 1 and "999999" in proc.stderr
    assert sql.execute("SELECT count(*) AS n FROM pgsched.execution").fetchone()["n"] == 0


def test_unreachable_database_is_one_clear_line():
    proc = cli(
        "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2", "task", "list", check=False
    )
    assert (
        proc.returncode == 1
        and "database unreachable" in proc.stderr
        and "Traceback" not in proc.stderr
    )


def test_listings_take_json_and_lifecycle_commands_work(dsn, sql):
    cli(
        dsn,
        "task",
        "create",
        "nightly",
        "--command",
        "echo hi",
        "--cron",
        "30 2 * * *",
        "--tz",
        "Europe/Paris",
    )
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
    out = cli(
        dsn, "import-crontab", "--system", "--dry-run", str(crontab_file("munin.cron.d"))
    ).stdout
    assert out.count("would create") == 4
    assert "MAILTO=root" in out and "sends no mail" in out
    assert sql.execute("SELECT count(*) AS n FROM pgsched.task").fetchone()["n"] == 0
    bad = tmp_path / "mixed"
    bad.write_text(
        "SHELL=/bin/bash\n* * * * * echo ok\n61 * * * * echo bad minute\n@reboot echo boot\nnonsense\n"
    )
    result = json.loads(cli(dsn, "import-crontab", str(bad), "--json", "--allow-problems").stdout)
    by_line = {line["line_no"]: line for line in result["lines"]}
    assert by_line[2]["action"] == "created"
    assert by_line[3]["action"] == "problem"
    assert by_line[3]["reason"] == "line 3: minute 61 is out of range 0-59"
    assert by_line[4]["action"] == "problem" and "@reboot" in by_line[4]["reason"]
    assert by_line[5]["action"] == "problem" and "line 5" in by_line[5]["reason"]
    task = sql.execute("SELECT env, command FROM pgsched.task").fetchone()
    assert task == {
        "env": {"SHELL": "/bin/bash", "PATH": "/usr/bin:/bin"},
        "command": "echo ok",
    }  # crontab(5)


def test_import_dry_run_shows_zone_environment_and_stdin(dsn, sql, tmp_path):
    path = tmp_path / "jobs"
    path.write_text(
        'CRON_TZ=Europe/Berlin\nGREETING="hello there"\n30 2 * * 1-5 cat %first%second\\%\n'
    )
    out = cli(dsn, "import-crontab", "--dry-run", str(path)).stdout.splitlines()
    assert (
        out[0].startswith("line 3: would create jobs-") and "[30 2 * * 1-5 Europe/Berlin]" in out[0]
    )
    assert out[1] == (
        "    env: SHELL=/bin/sh PATH=/usr/bin:/bin CRON_TZ=Europe/Berlin GREETING='hello there'"
    )
    assert out[2] == "    stdin: 'first\\nsecond%'"
    assert sql.execute("SELECT count(*) AS n FROM pgsched.task").fetchone()["n"] == 0


def test_help_is_there():
    out = cli(None, "--help").stdout
    for command in (
        "dev",
        "migrate",
        "scheduler",
        "worker",
        "status",
        "task",
        "execution",
        "import-crontab",
    ):
        assert command in out
    assert "--concurrency" in cli(None, "worker", "--help").stdout


def test_cron_next_needs_no_database_and_prints_utc_and_local():
    unreachable = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1"
    out = cli(
        unreachable,
        "cron",
        "next",
        "30 2 * * *",
        "--tz",
        "Europe/Berlin",
        "--after",
        "2025-10-25T12:00",
        "-n",
        "2",
    ).stdout.splitlines()
    # 02:30 happens twice on 2025-10-26 in Berlin; a fixed-time job runs once (cron(8)).
    assert out == [
        "2025-10-26 00:30:00Z   2025-10-26T02:30:00+02:00 Europe/Berlin",
        "2025-10-27 01:30:00Z   2025-10-27T02:30:00+01:00 Europe/Berlin",
    ]
    data = json.loads(
        cli(
            unreachable,
            "cron",
            "next",
            "@hourly",
            "-n",
            "2",
            "--after",
            "2026-01-01T00:00Z",
            "--json",
        ).stdout
    )
    assert [f["utc"] for f in data["fires"]] == [
        "2026-01-01T01:00:00+00:00",
        "2026-01-01T02:00:00+00:00",
    ]
    for expr, reason in [
        ("0 0 30 2 *", ("day-of-month 30 never occurs in month 2 (February has at most 29 days)")),
        (
            "0 0 31 4,6,9,11 *",
            (
                "day-of-month 31 never occurs in months 4,6,9,11 "
                "(April, June, September and November have 30 "
                "days)"
            ),
        ),
        ("60 * * * *", "minute 60 is out of range 0-59"),
        ("* * * * 1,9#2", "day-of-week 9 is out of range 0-7 (in 1,9#2)"),
    ]:
        proc = cli(unreachable, "cron", "next", expr, check=False)
        assert proc.returncode == 1 and proc.stdout == "", proc
        assert proc.stderr == (
            f"Error: schedule: '{expr}' is not a usable cron expression: {reason}\n"
        )


def test_task_next_uses_the_stored_schedule_and_zone(dsn):
    cli(
        dsn,
        "task",
        "create",
        "ny",
        "--command",
        "true",
        "--cron",
        "0 9 * * mon-fri",
        "--tz",
        "America/New_York",
    )
    out = json.loads(
        cli(dsn, "task", "next", "ny", "-n", "3", "--after", "2026-03-06T12:00", "--json").stdout
    )
    # Friday 2026-03-06 09:00 has passed; Monday 9 March is the first day of EDT (UTC-4).
    assert [f["utc"] for f in out["fires"]] == [
        "2026-03-09T13:00:00+00:00",
        "2026-03-10T13:00:00+00:00",
        "2026-03-11T13:00:00+00:00",
    ]


def test_reimporting_an_edited_crontab_reports_then_replaces_the_old_tasks(dsn, sql, tmp_path):
    path = tmp_path / "backup.cron"
    path.write_text("MAILTO=a@example.com\n0 1 * * * /usr/local/bin/backup%--full\n")
    cli(dsn, "import-crontab", str(path))
    path.write_text("MAILTO=b@example.com\n0 1 * * * /usr/local/bin/backup%--full\n")
    out = cli(dsn, "import-crontab", str(path)).stdout
    assert "1 task(s) from an earlier import of backup.cron match no line now and still run" in out
    assert (
        sql.execute("SELECT count(*) AS n FROM pgsched.task WHERE deleted_at IS NULL").fetchone()[
            "n"
        ]
        == 2
    )
    out = cli(dsn, "import-crontab", str(path), "--replace", "--tz", "Europe/Berlin").stdout
    assert out.count("deleted backup.cron-") == 2 and "[0 1 * * * Europe/Berlin]" in out
    [live] = sql.execute(
        "SELECT name, timezone, env, stdin FROM pgsched.task WHERE deleted_at IS NULL"
    ).fetchall()
    assert (live["timezone"], live["env"]["MAILTO"], live["stdin"]) == (
        "Europe/Berlin",
        "b@example.com",
        "--full",
    )
    # A changed command no longer gets the crontab's stdin, once told so.
    row = json.loads(
        cli(
            dsn,
            "task",
            "update",
            live["name"],
            "--command",
            "backup.sh",
            "--no-stdin",
            "--no-env",
            "--json",
        ).stdout
    )
    assert (row["command"], row["stdin"], row["env"]) == ("backup.sh", None, {})

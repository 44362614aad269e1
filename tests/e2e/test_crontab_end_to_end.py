"""The walking skeleton's proof: real Debian crontabs imported with the CLI, every task
triggered, run by a real ``pgsched worker`` process and recorded with the exit code and
output that the same command gives when run directly."""

from __future__ import annotations

import os
import subprocess

import pytest

from pgsched.crontab import parse_crontab
from pgsched.importer import task_name

from ..conftest import crontab_file
from ..helpers import cli, wait_until
from .conftest import sandboxed

pytestmark = pytest.mark.e2e

FILES = ["debian-crontab", "sysstat.cron.d"]
CRON_ENV = {
    "SHELL": "/bin/sh",
    "PATH": "/usr/bin:/bin",
}  # crontab(5): what cron sets unless the file does


def direct_run(entry) -> tuple[int, list[str]]:
    """Run a crontab entry's command directly, as cron would, in the same sandbox."""
    env = {**os.environ, **CRON_ENV, **entry.env}
    shell = entry.env.get("SHELL", "/bin/sh")
    stdin = None if entry.stdin is None else entry.stdin + "\n"
    proc = subprocess.run(
        sandboxed([shell, "-c", entry.command]),
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    return proc.returncode, sorted(proc.stdout.splitlines() + proc.stderr.splitlines())


def test_debian_crontabs_import_trigger_and_run(dsn, sql, start):
    start("scheduler", "--max-sleep", "0.5")
    start("worker", "--concurrency", "4", "--poll-interval", "0.5", wrap=sandboxed)

    entries = {}
    for name in FILES:
        path = crontab_file(name)
        parsed = parse_crontab(path.read_text(), system=True)
        assert parsed.problems == []
        out = cli(dsn, "import-crontab", "--system", str(path)).stdout
        assert f"{len(parsed.entries)} created, 0 unchanged" in out, out
        for entry in parsed.entries:
            entries[task_name(str(path), entry)] = entry
    assert len(entries) == 6

    # Re-import changes nothing.
    before = sql.execute("SELECT id, name, updated_at FROM pgsched.task ORDER BY id").fetchall()
    for name in FILES:
        out = cli(dsn, "import-crontab", "--system", str(crontab_file(name))).stdout
        assert "0 created" in out and "unchanged" in out, out
    assert (
        sql.execute("SELECT id, name, updated_at FROM pgsched.task ORDER BY id").fetchall()
        == before
    )

    stored = {r["name"]: r for r in sql.execute("SELECT * FROM pgsched.task").fetchall()}
    assert set(stored) == set(entries)
    for name, entry in entries.items():
        row = stored[name]
        assert (row["schedule_kind"], row["schedule_expr"]) == ("cron", entry.schedule)
        assert row["command"] == entry.command and row["run_as_user"] == entry.user
        assert row["env"] == {**CRON_ENV, **entry.env} and row["next_fire_at"] is not None

    ids = {}
    for name in entries:
        out = cli(dsn, "task", "trigger", name, "--json").stdout
        ids[name] = int(__import__("json").loads(out)["execution_id"])

    def finished():
        rows = sql.execute(
            "SELECT id, state, exit_code FROM pgsched.execution_history WHERE id = ANY(%s)",
            (list(ids.values()),),
        ).fetchall()
        return rows if len(rows) == len(ids) else None

    done = {
        r["id"]: r
        for r in wait_until(finished, timeout=60, message="all triggered executions to finish")
    }
    for name, entry in entries.items():
        code, lines = direct_run(entry)
        got = done[ids[name]]
        assert got["exit_code"] == code, (name, entry.command)
        assert got["state"] == (
            "succeeded" if code == 0 else "dead"
        )  # failed for good: the dead-letter queue
        logged = sql.execute(
            "SELECT line FROM pgsched.execution_log WHERE execution_id = %s ORDER BY seq",
            (ids[name],),
        ).fetchall()
        assert sorted(r["line"] for r in logged) == lines, (name, entry.command)
        attempts = sql.execute(
            "SELECT state, exit_code, worker_id FROM pgsched.execution_attempt "
            "WHERE execution_id = %s",
            (ids[name],),
        ).fetchall()
        assert len(attempts) == 1 and attempts[0]["exit_code"] == code and attempts[0]["worker_id"]

    # The sandboxed daily job really ran through run-parts, and its output was captured.
    daily = next(n for n, e in entries.items() if "cron.daily" in e.command)
    daily_lines = [
        r["line"]
        for r in sql.execute(
            "SELECT line FROM pgsched.execution_log WHERE execution_id = %s", (ids[daily],)
        ).fetchall()
    ]
    assert "cron.daily job ran in /" in daily_lines

    # And the CLI shows them.
    shown = cli(dsn, "execution", "show", str(ids[daily])).stdout
    assert "succeeded" in shown and "attempts:" in shown
    logs = cli(dsn, "execution", "logs", str(ids[daily])).stdout
    assert "cron.daily job ran in /" in logs

"""``pgsched execution logs`` on a log longer than one read."""

from __future__ import annotations

from datetime import UTC, datetime

from click.testing import CliRunner

from pgsched.cli import executions, main
from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec


def test_a_long_log_is_printed_whole_in_order(db, dsn, monkeypatch):
    monkeypatch.setattr(executions, "LOG_BATCH", 3)
    tasks.create(db, TaskSpec(name="job", command="echo hi"))
    ident = tasks.trigger(db, "job")
    now = datetime.now(UTC)
    db.exec(
        "execution_log_insert",
        id=ident,
        attempt=1,
        tenant="default",
        seq=list(range(1, 8)),
        stream=["stdout"] * 7,
        logged_at=[now] * 7,
        line=[f"line {i}" for i in range(1, 8)],
    )
    printed = CliRunner().invoke(main, ["--dsn", dsn, "execution", "logs", str(ident)])
    assert printed.exit_code == 0, printed.output
    assert [row.rsplit(": ", 1)[1] for row in printed.output.splitlines()] == [
        f"line {i}" for i in range(1, 8)
    ]

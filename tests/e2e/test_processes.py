"""Real scheduler and worker processes: interval timing, plain-INSERT wake-up, timeouts
that kill the whole process group, Python tasks, and leadership between two schedulers."""

from __future__ import annotations

import json
import os
import re
import signal
import time
from datetime import UTC, datetime, timedelta

import psutil
import pytest

from ..helpers import REPO, cli, wait_until

pytestmark = pytest.mark.e2e


def history(sql, task: str) -> list[dict]:
    return sql.execute(
        "SELECT h.* FROM pgsched.execution_history h JOIN pgsched.task t ON t.id = h.task_id "
        "WHERE t.name = %s ORDER BY h.scheduled_at",
        (task,),
    ).fetchall()


def test_interval_task_fires_on_time_three_times_in_a_row(dsn, sql, start):
    cli(dsn, "task", "create", "tick", "--command", "echo tick", "--every", "2s")
    task = sql.execute(
        "SELECT schedule_anchor, next_fire_at FROM pgsched.task WHERE name = 'tick'"
    ).fetchone()
    assert task["next_fire_at"] == task["schedule_anchor"] + timedelta(seconds=2)
    start("scheduler", "--max-sleep", "5")
    start("worker", "--poll-interval", "5")
    runs = wait_until(
        lambda: (r := history(sql, "tick")) and len(r) >= 3 and r,
        timeout=20,
        message="three interval fires",
    )
    first = runs[0]["scheduled_at"]
    assert (first - task["schedule_anchor"]).total_seconds() % 2 == 0
    for k, run in enumerate(runs[:3]):
        assert run["scheduled_at"] == first + timedelta(
            seconds=2 * k
        )  # consecutive, no drift, no gap
        assert run["state"] == "succeeded" and run["exit_code"] == 0
        lag = (run["started_at"] - run["scheduled_at"]).total_seconds()
        assert 0 <= lag < 1.0, f"fire {k} started {lag:.3f}s after its time"


def test_plain_insert_one_shot_runs_within_a_second(dsn, sql, start):
    cli(dsn, "task", "create", "adhoc", "--command", 'echo "got $PGSCHED_PARAMS"')
    # A long poll interval: only the NOTIFY from the INSERT can wake the worker in time.
    worker = start("worker", "--poll-interval", "30")
    wait_until(
        lambda: (
            "started" in worker.output
            and sql.execute(
                "SELECT count(*) AS n FROM pgsched.worker WHERE state = 'running'"
            ).fetchone()["n"]
        ),
        message="worker up",
    )
    # Time passes on purpose: the listener wakes once at start (its first claim), and an
    # INSERT during that claim would be found by it rather than by the NOTIFY this test is
    # about. No outside sign tells "in its wait" from "between its first statements" (its
    # session is idle in both), so this is a pause; too short a one only lets the test pass
    # through the first claim, it never fails it.
    time.sleep(0.3)
    row = sql.execute(
        "INSERT INTO pgsched.run_request (task, params) VALUES ('adhoc', '{\"n\": 7}') "
        "RETURNING execution_id"
    ).fetchone()
    inserted = time.monotonic()
    done = wait_until(
        lambda: sql.execute(
            "SELECT * FROM pgsched.execution_history WHERE id = %s", (row["execution_id"],)
        ).fetchone(),
        timeout=5,
    )
    assert time.monotonic() - inserted < 1.5
    assert done["trigger"] == "insert" and done["state"] == "succeeded"
    assert (done["started_at"] - done["created_at"]).total_seconds() < 1.0
    line = sql.execute(
        "SELECT line FROM pgsched.execution_log WHERE execution_id = %s", (row["execution_id"],)
    ).fetchone()["line"]
    assert json.loads(line.removeprefix("got ")) == {"n": 7}


def _group_members(pgid: int) -> list[psutil.Process]:
    members = []
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                members.append(p)
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
    return members


@pytest.mark.parametrize("ignores_term", [False, True], ids=["sigterm", "sigkill-after-grace"])
def test_timeout_kills_the_whole_process_group(dsn, sql, start, ignores_term):
    trap = "trap '' TERM; " if ignores_term else ""
    cli(
        dsn,
        "task",
        "create",
        "hang",
        "--timeout",
        "1",
        "--command",
        f"{trap}echo $$; sleep 300 & sleep 301; echo not reached",
    )
    # A command that obeys SIGTERM must not be made to wait out a long grace period.
    start("worker", "--kill-grace", "1" if ignores_term else "10", "--poll-interval", "0.5")
    ident = json.loads(cli(dsn, "task", "trigger", "hang", "--json").stdout)["execution_id"]
    pgid = int(
        wait_until(
            lambda: sql.execute(
                "SELECT line FROM pgsched.execution_log WHERE execution_id = %s", (ident,)
            ).fetchone(),
            message="the command's pid",
        )["line"]
    )
    assert len(_group_members(pgid)) >= 2  # the shell and its sleeps are running
    done = wait_until(
        lambda: sql.execute(
            "SELECT * FROM pgsched.execution_history WHERE id = %s", (ident,)
        ).fetchone(),
        timeout=15,
    )
    assert done["state"] == "dead"  # its one attempt timed out: the dead-letter queue
    assert done["exit_code"] == 128 + (signal.SIGKILL if ignores_term else signal.SIGTERM)
    assert "timed out after 1s" in done["error"]
    took = (done["finished_at"] - done["started_at"]).total_seconds()
    assert 1.0 <= took < (2.0 + 1.5 if ignores_term else 3.0), took
    assert _group_members(pgid) == []  # zombies may wait for init to reap them; nothing runs
    attempt = sql.execute(
        "SELECT state FROM pgsched.execution_attempt WHERE execution_id = %s", (ident,)
    ).fetchone()
    assert attempt["state"] == "timed_out"


def test_python_task_gets_params_and_stores_its_result(dsn, sql, start):
    cli(
        dsn,
        "task",
        "create",
        "greet",
        "--python",
        "hello_tasks:greet",
        "--params",
        '{"name": "ops"}',
    )
    start("worker", "--poll-interval", "0.5", "--pythonpath", str(REPO / "examples"))
    ident = json.loads(
        cli(dsn, "task", "trigger", "greet", "--params", '{"name": "e2e"}', "--json").stdout
    )
    done = wait_until(
        lambda: sql.execute(
            "SELECT * FROM pgsched.execution_history WHERE id = %s", (ident["execution_id"],)
        ).fetchone()
    )
    assert done["state"] == "succeeded"
    assert done["result"]["greeting"] == "hello, e2e"
    # Only functions registered with @app.task run; the standard library is never imported.
    for name, target, reason in (
        ("sneaky", "hello_tasks:App", "not a function registered with @app.task"),
        ("zen", "this:s", "is in the standard library"),
    ):
        cli(dsn, "task", "create", name, "--python", target)
        ident = json.loads(cli(dsn, "task", "trigger", name, "--json").stdout)["execution_id"]
        done = wait_until(
            lambda: sql.execute(
                "SELECT * FROM pgsched.execution_history WHERE id = %s", (ident,)
            ).fetchone()
        )
        assert done["state"] == "dead" and reason in done["error"], done["error"]


def test_one_leader_and_a_standby_takes_over_after_sigkill(dsn, sql, start):
    first = start("scheduler", "--max-sleep", "0.5")
    wait_until(lambda: "is leader" in first.output, message="first leader")
    second = start("scheduler", "--max-sleep", "0.5")
    wait_until(lambda: "is standby" in second.output, message="standby")
    term = sql.execute("SELECT epoch FROM pgsched.leader").fetchone()["epoch"]
    status = json.loads(cli(dsn, "status", "--json").stdout)
    assert status["leader"]["epoch"] == term and [s["pid"] for s in status["standbys"]] == [
        second.proc.pid
    ]
    assert "standby schedulers: 1" in cli(dsn, "status").stdout
    first.proc.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    wait_until(lambda: "is leader" in second.output, timeout=10, message="standby takes over")
    assert time.monotonic() - killed < 3.0
    assert sql.execute("SELECT epoch FROM pgsched.leader").fetchone()["epoch"] == term + 1
    out = cli(dsn, "status").stdout
    assert f"term {term + 1}" in out
    # Partitions run from yesterday to 3 days ahead (UTC). The fixture's migrate may have run
    # before midnight, leaving one more day at the start: check the range, not the count.
    today = datetime.now(UTC).date()
    match = re.search(
        r"history partitions: (\d+) daily, (\d{8}) to (\d{8}) \(UTC\); DEFAULT partitions empty",
        out,
    )
    assert match, out
    first_day, last_day = (
        datetime.strptime(d, "%Y%m%d").replace(tzinfo=UTC).date() for d in match.group(2, 3)
    )
    assert first_day <= today - timedelta(days=1) and last_day >= today + timedelta(days=3), out
    assert int(match.group(1)) == (last_day - first_day).days + 1

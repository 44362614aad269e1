"""Reliability on real processes: cancel within a second (commands and Python tasks),
retry policies' run_at sequences, failures that are not retried, the dead-letter queue
round trip, and a worker declared dead that cannot record over the rescued attempt."""

from __future__ import annotations

import itertools
import json
import os
import signal
import textwrap
import time

import psutil
import pytest

from ..helpers import cli, finished, trigger, wait_until

pytestmark = pytest.mark.e2e


def attempts(sql, ident: int) -> list[dict]:
    return sql.execute(
        "SELECT * FROM pgsched.execution_attempt WHERE execution_id = %s ORDER BY attempt, started_at",
        (ident,),
    ).fetchall()


def group_alive(pgid: int) -> bool:
    for p in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(p.pid) == pgid and p.status() != psutil.STATUS_ZOMBIE:
                return True
        except (ProcessLookupError, psutil.NoSuchProcess):
            pass
    return False


def test_cancel_of_a_running_command_ends_it_within_a_second(dsn, sql, start):
    cli(
        dsn,
        "task",
        "create",
        "long",
        "--command",
        "echo $$; sleep 60 & sleep 61",
        "--max-attempts",
        "3",
    )
    start("worker", "--poll-interval", "0.5")
    ident = trigger(dsn, "long")
    pgid = int(
        wait_until(
            lambda: sql.execute(
                "SELECT line FROM pgsched.execution_log WHERE execution_id = %s", (ident,)
            ).fetchone(),
            message="the command's pid",
        )["line"]
    )
    assert group_alive(pgid)
    asked = time.monotonic()
    assert (
        sql.execute("SELECT pgsched.cancel_v1(%s) AS o", (ident,)).fetchone()["o"] == "cancelling"
    )
    done = finished(sql, ident)
    took = time.monotonic() - asked
    print(f"cancel to recorded: {took:.3f}s")
    assert took < 1.0
    assert (done["state"], done["attempt"]) == (
        "cancelled",
        1,
    )  # not retried, though 3 attempts were allowed
    assert not group_alive(pgid)
    assert [a["state"] for a in attempts(sql, ident)] == ["cancelled"]
    # From the CLI, on a second run: it waits for the worker and says so.
    ident = trigger(dsn, "long")
    wait_until(
        lambda: sql.execute(
            "SELECT 1 FROM pgsched.execution_log WHERE execution_id = %s", (ident,)
        ).fetchone()
    )
    assert (
        cli(dsn, "execution", "cancel", str(ident)).stdout.strip() == f"execution {ident} cancelled"
    )
    assert (
        cli(dsn, "execution", "cancel", str(ident)).stdout.strip()
        == f"execution {ident} had already ended: cancelled"
    )


PY_MODULE = textwrap.dedent("""
    import pathlib, time
    from pgsched import App, TaskInterrupted

    app = App()

    @app.task()
    def busy(marker):
        try:
            while True:
                time.sleep(0.01)
        except TaskInterrupted:
            pathlib.Path(marker).write_text("interrupted")
            raise

    @app.task()
    def surrogate():
        print("bad \\ud800 char")
        raise ValueError("bad \\udcff")

    @app.task()
    def picky(kind):
        raise {"value": ValueError, "key": KeyError}[kind]("bad input")
""")


def test_cancel_and_timeout_interrupt_a_python_task(dsn, sql, start, tmp_path):
    (tmp_path / "pyjobs.py").write_text(PY_MODULE)
    marker = tmp_path / "marker"
    cli(
        dsn,
        "task",
        "create",
        "busy",
        "--python",
        "pyjobs:busy",
        "--params",
        json.dumps({"marker": str(marker)}),
    )
    # the thread mode: TaskInterrupted is raised in the call, so its finally runs (the
    # process mode kills the call's child: tests/e2e/test_python_processes.py)
    start(
        "worker", "--poll-interval", "0.5", "--pythonpath", str(tmp_path),
        "--python-isolation", "thread",
    )  # fmt: skip
    ident = trigger(dsn, "busy")
    wait_until(
        lambda: sql.execute(
            "SELECT 1 FROM pgsched.execution WHERE id = %s AND state = 'running'", (ident,)
        ).fetchone()
    )
    asked = time.monotonic()
    sql.execute("SELECT pgsched.cancel_v1(%s)", (ident,))
    done = finished(sql, ident)
    assert time.monotonic() - asked < 1.0
    assert done["state"] == "cancelled" and marker.read_text() == "interrupted"
    marker.unlink()
    cli(dsn, "task", "update", "busy", "--timeout", "0.5")
    done = finished(sql, trigger(dsn, "busy"))
    assert done["state"] == "dead" and "timed out after 0.5s" in done["error"]
    assert marker.read_text() == "interrupted"


def test_failures_marked_not_retryable_go_straight_to_the_dead_letter_queue(
    dsn, sql, start, tmp_path
):
    (tmp_path / "pyjobs.py").write_text(PY_MODULE)
    cli(
        dsn,
        "task",
        "create",
        "usage",
        "--command",
        "exit 2",
        "--max-attempts",
        "3",
        "--retry-base",
        "0.1",
        "--no-retry-exit-codes",
        "2,64",
    )
    cli(
        dsn,
        "task",
        "create",
        "picky",
        "--python",
        "pyjobs:picky",
        "--max-attempts",
        "3",
        "--retry-base",
        "0.1",
        "--no-retry-exceptions",
        "ValueError",
    )
    start("worker", "--poll-interval", "0.5", "--pythonpath", str(tmp_path))
    usage = finished(sql, trigger(dsn, "usage"))
    assert (usage["state"], usage["attempt"], usage["exit_code"]) == ("dead", 1, 2)
    value = finished(
        sql,
        json.loads(
            cli(dsn, "task", "trigger", "picky", "--params", '{"kind": "value"}', "--json").stdout
        )["execution_id"],
    )
    assert (value["state"], value["attempt"]) == ("dead", 1)
    assert [a["error_type"] for a in attempts(sql, value["id"])] == ["ValueError"]
    key = finished(
        sql,
        json.loads(
            cli(dsn, "task", "trigger", "picky", "--params", '{"kind": "key"}', "--json").stdout
        )["execution_id"],
    )
    assert (key["state"], key["attempt"]) == ("dead", 3)  # KeyError is retried

    # The dead-letter queue round trip, from the CLI.
    listed = json.loads(cli(dsn, "dlq", "list", "--json").stdout)
    assert sorted(r["id"] for r in listed) == sorted([usage["id"], value["id"], key["id"]])
    cli(dsn, "task", "update", "usage", "--command", "echo fixed")
    assert (
        cli(dsn, "dlq", "retry", str(usage["id"])).stdout.strip()
        == f"execution {usage['id']} is queued again"
    )
    again = finished(sql, usage["id"])
    assert (again["state"], again["attempt"], again["max_attempts"]) == ("succeeded", 2, 4)
    assert [(a["attempt"], a["state"]) for a in attempts(sql, usage["id"])] == [
        (1, "failed"),
        (2, "succeeded"),
    ]
    assert (
        cli(dsn, "dlq", "retry", "--all", "--task", "picky").stdout.strip()
        == "retried 2 dead execution(s) of picky"
    )
    wait_until(lambda: len(json.loads(cli(dsn, "dlq", "list", "--json").stdout)) == 2, timeout=30)
    assert json.loads(cli(dsn, "dlq", "purge", "--all", "--json").stdout) == {"purged": 2}
    assert json.loads(cli(dsn, "dlq", "list", "--json").stdout) == []


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("fixed", [0.4, 0.4, 0.4]),
        ("linear", [0.4, 0.8, 1.2]),
        ("exponential", [0.4, 0.8, 1.6]),
        ("exponential_jitter", [0.4, 0.8, 1.6]),  # upper bounds: a uniform draw from 0
    ],
)
def test_retry_policies_produce_their_run_at_sequence(dsn, sql, start, policy, expected):
    cli(
        dsn,
        "task",
        "create",
        "flaky",
        "--command",
        "exit 1",
        "--max-attempts",
        "4",
        "--retry-policy",
        policy,
        "--retry-base",
        "0.4",
        "--retry-max",
        "60",
    )
    start("worker", "--poll-interval", "0.2")
    done = finished(sql, trigger(dsn, "flaky"))
    assert (done["state"], done["attempt"]) == ("dead", 4)
    rows = attempts(sql, done["id"])
    assert [r["state"] for r in rows] == ["failed"] * 4
    delays = [(r["next_run_at"] - r["finished_at"]).total_seconds() for r in rows[:3]]
    print(policy, [round(d, 3) for d in delays])
    if policy == "exponential_jitter":
        assert all(0 <= d <= bound for d, bound in zip(delays, expected, strict=True))
    else:
        assert delays == pytest.approx(expected, abs=0.002)
    assert rows[3]["next_run_at"] is None
    for before, after in itertools.pairwise(rows):  # no attempt starts before its run_at
        assert after["started_at"] >= before["next_run_at"]


def test_a_worker_declared_dead_cannot_record_over_the_rescued_attempt(dsn, sql, start):
    cli(dsn, "task", "create", "slow", "--command", "sleep 2; echo done")
    start("scheduler", "--max-sleep", "0.5")
    first = start(
        "worker", "--poll-interval", "0.5", "--heartbeat-interval", "0.5", "--concurrency", "1"
    )
    ident = trigger(dsn, "slow")
    row = wait_until(
        lambda: sql.execute(
            "SELECT * FROM pgsched.execution WHERE id = %s AND state = 'running'", (ident,)
        ).fetchone()
    )
    first_worker = row["worker_id"]
    first.proc.send_signal(signal.SIGSTOP)  # silent: no heartbeats, but not gone
    try:
        wait_until(
            lambda: (
                sql.execute(
                    "SELECT state FROM pgsched.worker WHERE id = %s", (first_worker,)
                ).fetchone()["state"]
                == "dead"
            ),
            timeout=15,
            message="the leader declares the stopped worker dead",
        )
        start("worker", "--poll-interval", "0.5", "--concurrency", "1")
        wait_until(
            lambda: sql.execute(
                "SELECT 1 FROM pgsched.execution WHERE id = %s AND state = 'running' "
                "AND worker_id <> %s",
                (ident, first_worker),
            ).fetchone(),
            message="another worker runs the rescued execution",
        )
    finally:
        first.proc.send_signal(signal.SIGCONT)
    done = finished(sql, ident)
    assert done["state"] == "succeeded" and done["worker_id"] != first_worker
    assert [(a["state"], a["worker_id"] == first_worker) for a in attempts(sql, ident)] == [
        ("lost", True),
        ("succeeded", False),
    ]
    wait_until(lambda: "was declared dead" in first.output, message="the first worker notices")
    assert first.proc.poll() is None  # it carries on, registered afresh
    wait_until(
        lambda: (
            sql.execute(
                "SELECT count(*) AS n FROM pgsched.worker WHERE state = 'running'"
            ).fetchone()["n"]
            == 2
        ),
        message="the first worker registered again",
    )
    # The rescued attempt's output is kept under its own number; the outcome is attempt 2's.
    lines = sql.execute(
        "SELECT attempt, line FROM pgsched.execution_log WHERE execution_id = %s AND attempt = 2",
        (ident,),
    ).fetchall()
    assert lines == [{"attempt": 2, "line": "done"}]
    assert (
        "outcome succeeded rejected: lease" in first.output
        or "nothing recorded here" in first.output
    )


def test_a_leader_whose_lock_connection_breaks_stops_leading(dsn, sql, start):
    leader = start("scheduler", "--max-sleep", "0.5")
    wait_until(lambda: "is leader (term 1)" in leader.output, message="leader")
    killed = sql.execute(
        "SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity "
        "WHERE application_name = 'pgsched scheduler leader' AND datname = current_database()"
    ).fetchall()
    assert [r["ok"] for r in killed] == [True]
    wait_until(lambda: "no longer leading" in leader.output, message="the leader notices")
    # It campaigns again, and wins a new term: never two terms at once.
    wait_until(lambda: "is leader (term 2)" in leader.output, message="a new term")
    status = json.loads(cli(dsn, "status", "--json").stdout)
    assert (status["leader"]["epoch"], status["leader"]["lock_held"]) == (2, True)


def test_text_python_cannot_encode_never_leaves_an_execution_running(dsn, sql, start, tmp_path):
    """Lone surrogates (valid in a Python str, not in UTF-8) in output and in the error."""
    (tmp_path / "pyjobs.py").write_text(PY_MODULE)
    cli(dsn, "task", "create", "surrogate", "--python", "pyjobs:surrogate")
    start("worker", "--poll-interval", "0.5", "--pythonpath", str(tmp_path))
    done = finished(sql, trigger(dsn, "surrogate"))
    assert done["state"] == "dead" and done["error"] == "ValueError: bad \ufffd"
    lines = [
        r["line"]
        for r in sql.execute(
            "SELECT line FROM pgsched.execution_log WHERE execution_id = %s ORDER BY seq",
            (done["id"],),
        )
    ]
    assert lines[0] == "bad \ufffd char"


def test_a_hung_leader_is_replaced_and_steps_down_when_it_wakes(dsn, sql, start):
    first = start("scheduler", "--max-sleep", "0.5", "--leader-timeout", "3")
    wait_until(lambda: "is leader (term 1)" in first.output, message="first leader")
    second = start("scheduler", "--max-sleep", "0.5", "--leader-timeout", "3")
    wait_until(lambda: "is standby" in second.output, message="standby")
    first.proc.send_signal(signal.SIGSTOP)  # hung: its lock connection stays open
    stopped = time.monotonic()
    try:
        wait_until(
            lambda: "is leader (term 2)" in second.output,
            timeout=20,
            message="the standby takes over",
        )
        took = time.monotonic() - stopped
        print(f"hung leader replaced after {took:.1f}s (leader timeout 3 s)")
        assert took < 3 + 4
        assert "has not heartbeated" in second.output
    finally:
        first.proc.send_signal(signal.SIGCONT)
    wait_until(
        lambda: "no longer leading" in first.output,
        message="the old leader steps down when it wakes",
    )
    wait_until(lambda: first.output.count("is standby") >= 1, message="and stands by")
    leader = json.loads(cli(dsn, "status", "--json").stdout)["leader"]
    assert (leader["epoch"], leader["lock_held"]) == (2, True) and str(second.proc.pid) in leader[
        "holder"
    ]
    assert leader["heartbeat_age_seconds"] < 3
    assert "heartbeat" in cli(dsn, "status").stdout.splitlines()[0]

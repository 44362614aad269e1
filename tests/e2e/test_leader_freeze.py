"""A frozen or replaced leader holds nothing back and creates nothing under its old term;
leadership rests on the lock connection alone (issue 15, item 4). Real scheduler
processes, SIGSTOP/SIGCONT, sessions ended from outside."""

from __future__ import annotations

import json
import signal
import time
from datetime import timedelta

import pytest

from ..helpers import cli, wait_until

pytestmark = pytest.mark.e2e

# A tick of this many tasks due at once takes a few seconds on the development machine
# (30 batches of 1,000 on 4 connections), long enough to be caught in the middle.
BURST = 30_000

# A session of the leader's pool in a tick's transaction: it holds rows of pgsched.task
# FOR UPDATE (a RowShareLock on the table, and a transaction id for the row locks).
IN_TICK = """
SELECT a.pid FROM pg_stat_activity a
  JOIN pg_locks l ON l.pid = a.pid AND l.locktype = 'relation' AND l.mode = 'RowShareLock'
                 AND l.relation = 'pgsched.task'::regclass
 WHERE a.datname = current_database() AND a.application_name = 'pgsched scheduler'
   AND a.backend_xid IS NOT NULL
"""


def burst(sql, seconds_ahead: float) -> object:
    """BURST yearly tasks (no worker runs them) due together ``seconds_ahead`` from the
    database's now; their due instant."""
    due = sql.execute(
        "SELECT date_trunc('second', now()) + make_interval(secs => %s) AS t", [seconds_ahead]
    ).fetchone()["t"]
    sql.execute(
        """
        INSERT INTO pgsched.task (name, schedule_kind, schedule_expr, timezone, handler_kind, command, next_fire_at)
        SELECT 'burst-' || g, 'cron', '0 0 1 1 *', 'UTC', 'shell', 'true', %s FROM generate_series(1, %s) g""",
        [due, BURST],
    )
    sql.execute("ANALYZE pgsched.task")
    return due


def fired(sql, due) -> dict:
    return sql.execute(
        "SELECT count(*) AS n, count(DISTINCT task_id) AS tasks, "
        "count(*) FILTER (WHERE leader_epoch = 1) AS term1, max(created_at) AS last "
        "FROM pgsched.execution WHERE scheduled_at = %s",
        [due],
    ).fetchone()


def term(sql) -> dict:
    return sql.execute("SELECT epoch, elected_at FROM pgsched.leader").fetchone()


def test_a_leader_frozen_mid_tick_holds_no_fire_back_and_creates_nothing_once_replaced(
    dsn, sql, start
):
    first = start("scheduler", "--max-sleep", "0.5", "--leader-timeout", "2")
    wait_until(lambda: "is leader (term 1)" in first.output, message="first leader")
    second = start("scheduler", "--max-sleep", "0.5", "--leader-timeout", "2")
    wait_until(lambda: "is standby" in second.output, message="standby")
    due = burst(sql, 3)
    wait_until(
        lambda: sql.execute(IN_TICK).fetchall(),
        timeout=30,
        interval=0.005,
        message="the leader inside a tick transaction",
    )
    first.proc.send_signal(signal.SIGSTOP)  # frozen with its tick's transaction open
    frozen_at = time.monotonic()
    try:
        wait_until(
            lambda: term(sql)["epoch"] == 2,
            timeout=30,
            interval=0.01,
            message="the standby takes over",
        )
        took = time.monotonic() - frozen_at
        # The election committed after every transaction of term 1 had ended: what term 1
        # made is final from here on.
        made_by_term1 = fired(sql, due)["term1"]
        elected = term(sql)["elected_at"]
        # Every fire exists soon after the takeover, the old leader still frozen: none is
        # held back by its row locks (before the fix its locked batches waited for SIGCONT).
        everything = wait_until(
            lambda: (f := fired(sql, due))["tasks"] == BURST and f,
            timeout=10,
            message="every fire of the burst, with the old leader frozen",
        )
        print(
            f"frozen leader replaced after {took:.1f}s (leader timeout 2 s); all {BURST} fires made "
            f"{(everything['last'] - elected).total_seconds():.2f}s after the takeover, "
            f"{(everything['last'] - due).total_seconds():.2f}s after they were due; "
            f"{made_by_term1} by term 1 before it froze"
        )
        assert everything["last"] - elected < timedelta(seconds=10)
    finally:
        first.proc.send_signal(signal.SIGCONT)
    wait_until(
        lambda: "no longer leading" in first.output,
        message="the old leader steps down when it wakes",
    )
    wait_until(lambda: "is standby" in first.output, message="and stands by")
    after = fired(sql, due)
    assert after["term1"] == made_by_term1  # nothing under the old term after the new one began
    assert (after["n"], after["tasks"]) == (BURST, BURST)  # each fire once
    leader = json.loads(cli(dsn, "status", "--json").stdout)["leader"]
    assert (leader["epoch"], leader["lock_held"]) == (2, True) and str(second.proc.pid) in leader[
        "holder"
    ]


def test_a_leader_whose_lock_session_ends_mid_burst_creates_nothing_under_its_old_term(
    dsn, sql, start
):
    # Small batches: the old leader's tick is still going long after the standby took over.
    first = start("scheduler", "--max-sleep", "0.5", "--batch", "50")
    wait_until(lambda: "is leader (term 1)" in first.output, message="first leader")
    second = start("scheduler", "--max-sleep", "0.5")
    wait_until(lambda: "is standby" in second.output, message="standby")
    due = burst(sql, 3)
    wait_until(
        lambda: sql.execute(IN_TICK).fetchall(),
        timeout=30,
        interval=0.005,
        message="the leader inside a tick transaction",
    )
    # The session that holds the leader lock (the standby's lock connection has its name too).
    ended = sql.execute(
        "SELECT pg_terminate_backend(pid) AS ok FROM pgsched_internal.leader_sessions_v1() AS l(pid)"
    ).fetchall()
    assert [r["ok"] for r in ended] == [True]
    wait_until(
        lambda: term(sql)["epoch"] == 2, timeout=30, interval=0.01, message="the standby takes over"
    )
    made_by_term1 = fired(sql, due)["term1"]
    wait_until(
        lambda: fired(sql, due)["tasks"] == BURST, timeout=30, message="every fire of the burst"
    )
    wait_until(lambda: "no longer leading" in first.output, message="the old leader steps down")
    after = fired(sql, due)
    print(f"term 1 made {made_by_term1} of {BURST} fires, term 2 the rest")
    assert (
        after["term1"] == made_by_term1
    )  # its tick went on, but created nothing once term 2 began
    assert (after["n"], after["tasks"]) == (BURST, BURST)


def test_a_pooled_connection_ended_from_outside_does_not_end_the_term(dsn, sql, start):
    cli(dsn, "task", "create", "every-second", "--command", "true", "--cron", "* * * * * *")
    leader = start("scheduler", "--max-sleep", "0.2")
    wait_until(lambda: "is leader (term 1)" in leader.output, message="leader")
    for _ in range(6):
        ticked = sql.execute("SELECT last_tick_at FROM pgsched.leader").fetchone()["last_tick_at"]
        wait_until(
            lambda: (
                sql.execute("SELECT last_tick_at FROM pgsched.leader").fetchone()["last_tick_at"]
                != ticked
            ),
            message="a tick",
        )
        # Every connection of its pool, not its lock or heartbeat connection
        # ('pgsched scheduler leader', 'pgsched scheduler heartbeat').
        ended = sql.execute(
            "SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity "
            "WHERE application_name = 'pgsched scheduler' AND datname = current_database()"
        ).fetchall()
        assert ended and all(r["ok"] for r in ended)
    since = sql.execute("SELECT now() AS t").fetchone()["t"]
    wait_until(
        lambda: (
            sql.execute(
                "SELECT count(*) AS n FROM pgsched.execution WHERE scheduled_at > %s", [since]
            ).fetchone()["n"]
            >= 2
        ),
        message="fires go on",
    )
    assert term(sql)["epoch"] == 1
    assert "no longer leading" not in leader.output and "is standby" not in leader.output

"""Rescue on time with nothing due (issue 15, items 5 and 7): the leader rescues on its
own cadence, not when its tick wakes, so a dead worker's executions are taken back within
the documented time; and its maintenance prunes rows of long-dead workers. Real
processes, a SIGKILLed worker."""

from __future__ import annotations

import signal
import time

import pytest

from ..helpers import cli, trigger, wait_until

pytestmark = pytest.mark.e2e

HEARTBEAT = 1.0  # --heartbeat-interval of the worker
DEAD_AFTER = 3  # worker_dead_after_heartbeats (the default setting)
RESCUE_INTERVAL = 1.0  # SchedulerConfig.rescue_interval (the default)
# What the bound allows beyond its two terms: a rescue's own statement (milliseconds), the
# rescue thread's wake-up and the heartbeat's own statement on a loaded 2-core machine
# (each well under 0.1 s when measured), with room for a scheduling stall of a few hundred
# milliseconds. The leader's tick sleeps 5 s with nothing due (--max-sleep), so a rescue
# that waited for the tick would miss this by a second or more.
MARGIN = 0.5


def test_a_killed_workers_execution_is_requeued_within_the_documented_time_with_nothing_due(
    dsn, sql, start
):
    # Default --max-sleep (5 s): nothing is due, so the tick sleeps its longest.
    leader = start("scheduler")
    wait_until(lambda: "is leader (term 1)" in leader.output, message="leader")
    # Elected before any worker ran: its start-up grace (one dead-worker window of the
    # running workers, scheduler_rescue_grace) was 0, and has passed.
    cli(dsn, "task", "create", "long", "--command", "sleep 60")
    worker = start("worker", "--heartbeat-interval", str(HEARTBEAT), "--poll-interval", "0.5")
    ident = trigger(dsn, "long")
    row = wait_until(
        lambda: sql.execute(
            "SELECT worker_id FROM pgsched.execution WHERE id = %s AND state = 'running'", [ident]
        ).fetchone(),
        message="it runs",
    )
    # Kill it just after the leader's loop woke: a rescue done at the tick's wake-ups would
    # wait a whole sleep (5 s) for the next one.
    seen = sql.execute(
        "SELECT last_seen_at FROM pgsched.scheduler_node WHERE role = 'leader'"
    ).fetchone()
    wait_until(
        lambda: (
            sql.execute(
                "SELECT last_seen_at FROM pgsched.scheduler_node WHERE role = 'leader'"
            ).fetchone()["last_seen_at"]
            != seen["last_seen_at"]
        ),
        timeout=10,
        interval=0.01,
        message="the leader's loop wakes",
    )
    worker.stop(signal.SIGKILL)
    killed = time.monotonic()
    wait_until(
        lambda: (
            sql.execute("SELECT state FROM pgsched.execution WHERE id = %s", [ident]).fetchone()[
                "state"
            ]
            == "pending"
        ),
        timeout=20,
        interval=0.02,
        message="the rescue requeues it",
    )
    requeued = time.monotonic() - killed
    lost = sql.execute(
        """
        SELECT extract(epoch FROM a.finished_at - w.last_heartbeat_at)::float8 AS after_heartbeat
          FROM pgsched.execution_attempt a JOIN pgsched.worker w ON w.id = a.worker_id
         WHERE a.execution_id = %s AND a.state = 'lost'""",
        [ident],
    ).fetchone()
    bound = DEAD_AFTER * HEARTBEAT + RESCUE_INTERVAL
    print(
        f"requeued {requeued:.2f}s after SIGKILL, {lost['after_heartbeat']:.2f}s after the last heartbeat "
        f"(documented: at most {bound:.0f}s after it)"
    )
    assert lost["after_heartbeat"] <= bound + MARGIN
    assert requeued <= bound + MARGIN
    assert (
        sql.execute(
            "SELECT state FROM pgsched.worker WHERE id = %s", [row["worker_id"]]
        ).fetchone()["state"]
        == "dead"
    )


def test_the_leader_prunes_rows_of_workers_stopped_long_ago(dsn, sql, start):
    sql.execute("""
        INSERT INTO pgsched.worker (name, hostname, pid, queues, concurrency, heartbeat_interval, state, started_at,
                                    last_heartbeat_at, stopped_at)
        VALUES ('old', 'h', 1, '{default}', 1, 5, 'stopped', now() - interval '9 days', now() - interval '8 days',
                now() - interval '8 days'),
               ('recent', 'h', 2, '{default}', 1, 5, 'dead', now() - interval '2 days', now() - interval '1 day',
                now() - interval '1 day')""")
    leader = start("scheduler")
    wait_until(lambda: "is leader (term 1)" in leader.output, message="leader")
    wait_until(
        lambda: [r["name"] for r in sql.execute("SELECT name FROM pgsched.worker")] == ["recent"],
        message="the leader's maintenance removes the row of the worker stopped 8 days ago",
    )
    assert "removed 1 row(s) of workers stopped long ago" in leader.output

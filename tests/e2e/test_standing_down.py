"""A leader asked to stop while one of its services is stuck in a round (here the
statistics roll-up, waiting on a lock) hands over promptly. Found by an attack on issue 16:
the restructured leader stopped its heartbeat, then waited stop_all's 10 s for the stuck
service while holding the leader lock (the standby led after 10.6 s; with
--leader-timeout 3 it ended the "hung" leader's session and logged an ERROR). Before the
restructure the observer thread was not waited for and the standby led within 1.5 s; now
the leader waits 1 s for its services, heartbeating meanwhile."""

from __future__ import annotations

import threading
import time

import psycopg

from ..helpers import wait_until, waiting_on_a_lock


def test_sigterm_of_a_leader_with_a_stuck_service_hands_over_promptly(dsn, sql, start):
    first = start("scheduler", "--observe-interval", "1")
    wait_until(lambda: "is leader (term 1)" in first.output, message="first leader")
    second = start("scheduler", "--observe-interval", "1")
    wait_until(lambda: "is standby" in second.output, message="standby")

    release = threading.Event()

    def hold() -> None:
        with psycopg.connect(dsn) as c:
            c.execute("LOCK TABLE pgsched.stats_hourly IN ACCESS EXCLUSIVE MODE")
            release.wait(30)

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    try:
        wait_until(
            lambda: waiting_on_a_lock(sql, "pgsched scheduler"),
            message="the roll-up waiting on the lock",
        )
        began = time.monotonic()
        first.proc.send_signal(15)
        wait_until(
            lambda: "is leader (term 2)" in second.output, timeout=30, message="second leads"
        )
        took = time.monotonic() - began
    finally:
        release.set()
        holder.join()
    assert took < 3.0, f"the standby led {took:.1f}s after the leader was asked to stop"
    assert "has not heartbeated" not in second.output

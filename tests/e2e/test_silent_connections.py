"""A worker whose connections go silent (a proxy between it and the server stops forwarding
while every socket stays open and acknowledged) notices, opens new connections and serves
its queue again; SIGTERM stops it although its claim is blocked (issue 15, item 6).

The worker reaches the server through tests/silent_proxy.py; the test enqueues and checks
on its own direct connection."""

from __future__ import annotations

import re
import signal
import time

import pytest

from ..helpers import cli, finished, trigger, wait_until
from ..silent_proxy import SilentProxy

pytestmark = pytest.mark.e2e

LISTEN = "pgsched worker listen"
HEARTBEAT = "pgsched worker heartbeat"


@pytest.fixture
def proxy(dsn):
    """Asked for before ``start``: closed after the worker stopped, so it stops cleanly."""
    p = SilentProxy(dsn)
    yield p
    p.close()


def _worker_up(sql, proxy) -> None:
    wait_until(
        lambda: (
            proxy.open_connections(LISTEN)
            and proxy.open_connections(HEARTBEAT)
            and sql.execute("SELECT 1 FROM pgsched.worker WHERE state = 'running'").fetchone()
        ),
        message="the worker registered, listening and heartbeating",
    )


def test_a_worker_whose_connections_all_go_silent_recovers_and_runs_what_comes_after(
    dsn, sql, proxy, start
):
    cli(dsn, "task", "create", "after", "--command", "echo ran")
    worker = start(
        "worker",
        "--poll-interval",
        "0.5",
        "--heartbeat-interval",
        "1",
        "--statement-deadline",
        "2",
        env={"PGSCHED_DSN": proxy.dsn},
    )
    assert (
        finished(sql, trigger(dsn, "after"))["state"] == "succeeded"
    )  # its pool has been used too
    _worker_up(sql, proxy)
    assert proxy.blackhole() >= 3  # the claimer's, the heartbeat's and the pool's
    began = time.monotonic()
    ident = trigger(dsn, "after")
    done = finished(sql, ident, timeout=30)
    took = time.monotonic() - began
    started = sql.execute(
        "SELECT extract(epoch FROM started_at - created_at)::float8 AS s "
        "FROM pgsched.execution_history WHERE id = %s",
        (ident,),
    ).fetchone()["s"]
    print(f"enqueued after the blackhole: started after {started:.2f}s, recorded after {took:.2f}s")
    assert done["state"] == "succeeded"
    # Bound: the next poll (0.5 s), the claim's deadline (2 s) and a watchdog tick, a new
    # connection and a claim: started within 4 s; its end recorded within one more pool
    # deadline (the pool's connections are silent too): 10 s in all, with slack for a busy CI host.
    assert started < 4.0
    assert took < 10.0
    assert "no reply within the claim statement deadline (2s)" in worker.output
    assert worker.proc.poll() is None  # recovered in place, not restarted
    # the heartbeat replaced its connection too, and the worker is still alive in the database
    wait_until(
        lambda: sql.execute(
            "SELECT 1 FROM pgsched.worker WHERE state = 'running' AND "
            "last_heartbeat_at > now() - interval '2 seconds'"
        ).fetchone(),
        message="heartbeats go on",
    )


def test_sigterm_stops_a_worker_whose_claim_connection_is_silent(dsn, sql, proxy, start):
    # The default statement deadline (30 s): the claim is cut because the worker stops.
    worker = start(
        "worker",
        "--poll-interval",
        "0.2",
        "--heartbeat-interval",
        "1",
        "--shutdown-timeout",
        "2",
        env={"PGSCHED_DSN": proxy.dsn},
    )
    _worker_up(sql, proxy)
    assert proxy.blackhole(LISTEN) == 1
    wait_until(lambda: proxy.dropped(LISTEN) > 0, message="a claim sent that is never answered")
    began = time.monotonic()
    assert worker.stop(signal.SIGTERM, timeout=40) == 0
    took = time.monotonic() - began
    print(f"SIGTERM with the claim blocked: exited after {took:.2f}s")
    assert took < 4.0  # the cut after 1 s in flight and a watchdog tick, then a clean stop
    assert sql.execute("SELECT state FROM pgsched.worker").fetchone()["state"] == "stopped"


def test_without_a_deadline_the_heartbeat_finds_the_stalled_claimer_reports_and_recovers_it(
    dsn, sql, proxy, start
):
    cli(dsn, "task", "create", "after", "--command", "echo ran")
    worker = start(
        "worker",
        "--poll-interval",
        "0.5",
        "--heartbeat-interval",
        "1",
        "--statement-deadline",
        "0",
        env={"PGSCHED_DSN": proxy.dsn},
    )
    _worker_up(sql, proxy)
    assert proxy.blackhole(LISTEN) == 1
    began = time.monotonic()
    ident = trigger(dsn, "after")
    # the limit: 3 polls + the 10 s connect timeout = 11.5 s, seen at the next heartbeat
    wait_until(
        lambda: sql.execute(
            "SELECT 1 FROM pgsched.worker WHERE claimer_stalled_since IS NOT NULL"
        ).fetchone(),
        timeout=20,
        interval=0.02,
        message="the stall reported in the worker row",
    )
    detected = time.monotonic() - began
    done = finished(sql, ident, timeout=20)
    recovered = time.monotonic() - began
    wait_until(
        lambda: sql.execute(
            "SELECT 1 FROM pgsched.worker WHERE state = 'running' AND claimer_stalled_since IS NULL"
        ).fetchone(),
        message="the report cleared once the claimer goes round again",
    )
    print(
        f"no deadline: stall reported after {detected:.2f}s, the execution recorded after {recovered:.2f}s"
    )
    assert done["state"] == "succeeded"
    assert 11.0 <= detected < 14.5
    assert recovered < detected + 3.0
    assert "its claimer has not gone round its loop" in worker.output
    assert "its connection was cut so that it opens another" in worker.output
    assert worker.proc.poll() is None


def test_status_shows_a_stalled_claimer(dsn, sql):
    sql.execute(
        "INSERT INTO pgsched.worker (name, hostname, pid, queues, concurrency, claimer_stalled_since) "
        "VALUES ('w1', 'h', 1, '{default}', 4, now() - interval '40 seconds')"
    )
    out = cli(dsn, "status").stdout
    assert re.search(r"claimer stalled for 4\ds: its queues are not served", out), out

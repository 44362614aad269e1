"""A worker frozen (SIGSTOP) past its dead limit while holding buffered work, then woken
(SIGCONT), starts nothing stale: issue 15, item 2. Its slots check the lease as the last
thing before a start (in the command's child between fork and exec; right before a Python
handler's first line), and a worker that cannot show a fresh heartbeat proves the start
against the database first (``worker_start_proof``).

The side effect is a line "execution_id attempt start_time" appended by every command as it
starts; it is compared with ``execution_history.finished_at``: the time line is this host's,
and the database is local, so both clocks are one.
"""

from __future__ import annotations

import collections
import json
import signal
import time

import psycopg
import pytest

from ..helpers import cli, wait_until
from .test_chaos import wait_for_history_partitions

pytestmark = pytest.mark.e2e

CYCLES = 4
BATCH = 100  # executions enqueued per cycle
CONCURRENCY = 2

# A slot's start of an execution whose claim asks for it (confirm_start: it was rescued
# once) records the start first, and this statement waits while the test holds the row.
CONFIRM_START = "UPDATE pgsched.execution SET start_confirmed_at"


def _worker_id(sql, pid: int) -> int | None:
    row = sql.execute(
        "SELECT max(id) AS id FROM pgsched.worker WHERE pid = %s AND state = 'running'", (pid,)
    ).fetchone()
    return row["id"]


def _held(sql, worker_id: int) -> int:
    return sql.execute(
        "SELECT count(*) AS n FROM pgsched.execution WHERE worker_id = %s AND state = 'running'",
        (worker_id,),
    ).fetchone()["n"]


def _slots_waiting(sql) -> int:
    return sql.execute(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() "
        "AND wait_event_type = 'Lock' AND starts_with(query, %s)",
        (CONFIRM_START,),
    ).fetchone()["n"]


def _freeze_in_the_window(dsn: str, sql, worker, worker_id: int, ids: list[int]) -> None:
    """SIGSTOP ``worker`` while it holds more than its slots and one of its slots, having
    taken an execution off the buffer, waits to record its start: the test holds the rows
    the worker holds (FOR UPDATE) and lets them go once the worker is stopped. Tried again
    with fresh work until a slot is caught there (the buffer may drain before the lock)."""
    for _ in range(20):
        with psycopg.connect(dsn) as holder:
            if (
                holder.execute(
                    "SELECT count(*) FROM pgsched.execution WHERE state = 'pending'"
                ).fetchone()[0]
                < 20
            ):
                ids += [
                    r[0]
                    for r in holder.execute(
                        "SELECT pgsched.enqueue_v1('stamp') FROM generate_series(1, %s)", (BATCH,)
                    ).fetchall()
                ]
                # as if rescued once: each start is recorded before it runs (migration 0008)
                holder.execute(
                    "UPDATE pgsched.execution SET confirm_start = true WHERE state = 'pending'"
                )
                holder.commit()
            wait_until(
                lambda: _held(sql, worker_id) > CONCURRENCY,
                timeout=30,
                interval=0.005,
                message="the worker holds more than its slots (a buffer)",
            )
            holder.execute(
                "SELECT 1 FROM pgsched.execution WHERE worker_id = %s AND state = 'running' "
                "FOR UPDATE",
                (worker_id,),
            )
            try:
                wait_until(lambda: _slots_waiting(sql), timeout=1, interval=0.005)
            except AssertionError:
                holder.rollback()  # its buffer had drained: again
                continue
            worker.proc.send_signal(signal.SIGSTOP)
            holder.rollback()
            return
    raise AssertionError("no slot of the worker was caught waiting to record a start")


def test_a_worker_woken_after_a_freeze_starts_nothing_already_run_elsewhere(
    dsn, sql, start, tmp_path
):
    """Four cycles: a worker (concurrency 2, a prefetch of 20, heartbeat 1 s: dead after 3 s)
    runs short commands beside a second worker. While it holds more than its slots, the
    test holds its rows' locks until one of its slots, having taken an execution off the
    buffer, waits to record that start (the window between a slot's check and the start,
    held open so that every cycle hits it), SIGSTOPs it, lets the locks go, waits until the
    leader has declared it dead, rescued what it held and the second worker has run all of
    it, then SIGCONTs it. Claim: no command of an execution starts after that execution
    succeeded (a start of another attempt after the success, or a second start of the
    succeeding attempt), and every execution succeeded exactly once."""
    marker = tmp_path / "starts"
    marker.touch()
    # bash's $EPOCHREALTIME: the start time without another fork
    cli(
        dsn,
        "task",
        "create",
        "stamp",
        "--argv",
        json.dumps(
            [
                "bash",
                "-c",
                f'echo "$PGSCHED_EXECUTION_ID $PGSCHED_ATTEMPT $EPOCHREALTIME" >> {marker}',
            ]
        ),
    )
    start("scheduler", "--max-sleep", "0.5")
    wait_for_history_partitions(sql)
    args = (
        "--concurrency",
        str(CONCURRENCY),
        "--heartbeat-interval",
        "1",
        "--poll-interval",
        "0.5",
    )
    frozen = start("worker", *args, "--prefetch", "20")
    start("worker", *args)
    began = time.monotonic()
    ids: list[int] = []
    frozen_ids = []
    for cycle in range(CYCLES):
        me = wait_until(lambda: _worker_id(sql, frozen.proc.pid), message="the worker registered")
        frozen_ids.append(me)
        _freeze_in_the_window(dsn, sql, frozen, me, ids)
        # the locks are gone: the waiting start is recorded, its reply waits for the frozen worker
        try:
            wait_until(
                lambda: (
                    sql.execute("SELECT state FROM pgsched.worker WHERE id = %s", (me,)).fetchone()[
                        "state"
                    ]
                    == "dead"
                ),
                timeout=30,
                message=f"cycle {cycle}: the frozen worker declared dead",
            )
            wait_until(lambda: _held(sql, me) == 0, timeout=30, message="what it held rescued")
            wait_until(
                lambda: (
                    sql.execute("SELECT count(*) AS n FROM pgsched.execution").fetchone()["n"] == 0
                ),
                timeout=60,
                message=f"cycle {cycle}: the other worker ran everything",
            )
        finally:
            frozen.proc.send_signal(signal.SIGCONT)
        # woken, it learns at its next heartbeat that it was declared dead and registers again
        wait_until(
            lambda: (w := _worker_id(sql, frozen.proc.pid)) is not None and w > me,
            timeout=30,
            message="the woken worker registered again",
        )
    took = time.monotonic() - began

    succeeded = {
        r["id"]: r
        for r in sql.execute(
            "SELECT id, attempt, extract(epoch FROM finished_at)::float8 AS finished FROM pgsched.execution_history "
            "WHERE state = 'succeeded'"
        )
    }
    assert set(succeeded) == set(ids)
    once = sql.execute(
        "SELECT execution_id, count(*) AS n FROM pgsched.execution_attempt "
        "WHERE state = 'succeeded' GROUP BY execution_id"
    ).fetchall()
    assert {r["execution_id"]: r["n"] for r in once} == dict.fromkeys(ids, 1)
    lines = [
        (int(i), int(a), float(t))
        for i, a, t in (line.split() for line in marker.read_text().splitlines())
    ]
    # A start of another attempt after the success is a stale start; the succeeding attempt's
    # own line is compared by count (its start and its recorded end are milliseconds apart,
    # and the end is the worker's estimate of the database's clock: pgsched.clock).
    late = [
        (i, a, t)
        for i, a, t in lines
        if a != succeeded[i]["attempt"] and t > succeeded[i]["finished"]
    ]
    own = collections.Counter((i, a) for i, a, _ in lines if a == succeeded[i]["attempt"])
    late += [(i, a, n) for (i, a), n in own.items() if n > 1]
    rescued = sql.execute(
        "SELECT count(*) AS n FROM pgsched.execution_attempt WHERE state = 'lost' "
        "AND worker_id = ANY(%s)",
        (frozen_ids,),
    ).fetchone()["n"]
    refused = frozen.output.count("not started: worker") + frozen.output.count(
        "stopped: this worker no longer"
    )
    print(
        f"\nfreeze: {CYCLES} cycles, {len(ids)} executions in {took:.1f}s; {rescued} attempts rescued from the "
        f"frozen worker; {len(lines)} starts ({len(lines) - len({i for i, _, _ in lines})} beyond one per "
        f"execution); {refused} starts refused on waking; {len(late)} started after their execution had "
        f"succeeded: {late[:10]}"
    )
    assert late == [], "commands started after their execution had succeeded elsewhere"

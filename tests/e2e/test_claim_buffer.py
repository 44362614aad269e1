"""Executions a worker claimed ahead into its local buffer, not started yet: SIGKILL leaves
them to the leader's rescue, SIGTERM hands them back at once without using up an attempt;
either way every execution succeeds exactly once."""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from ..helpers import cli, sessions_ended, wait_until

pytestmark = pytest.mark.e2e

RUNS = 400
CONCURRENCY = 2


def running_of(sql, worker_id: int) -> int:
    return sql.execute(
        "SELECT count(*) AS n FROM pgsched.execution WHERE worker_id = %s AND state = 'running'",
        (worker_id,),
    ).fetchone()["n"]


def buffered_worker(sql, start) -> tuple[object, int]:
    """A worker with claimed executions beyond its slots (its buffer is not empty)."""
    worker = start(
        "worker",
        "--concurrency",
        str(CONCURRENCY),
        "--prefetch",
        "20",
        "--poll-interval",
        "0.5",
        "--heartbeat-interval",
        "0.5",
    )
    row = wait_until(
        lambda: sql.execute(
            "SELECT worker_id FROM pgsched.execution WHERE worker_id IS NOT NULL LIMIT 1"
        ).fetchone(),
        message="the worker claims",
    )
    wait_until(
        lambda: running_of(sql, row["worker_id"]) > CONCURRENCY,
        timeout=30,
        message="more claimed than slots (a buffer)",
    )
    return worker, row["worker_id"]


def all_done(sql, ids: list[int]) -> list[dict]:
    return wait_until(
        lambda: (
            (
                rows := sql.execute(
                    "SELECT id, state, attempt, max_attempts FROM pgsched.execution_history WHERE id = ANY(%s)",
                    (ids,),
                ).fetchall()
            )
            and len(rows) == len(ids)
            and rows
        ),
        timeout=120,
        message="every run in history",
    )


def succeeded_attempts(sql, ids: list[int]) -> dict[int, int]:
    rows = sql.execute(
        "SELECT execution_id, count(*) AS n FROM pgsched.execution_attempt "
        "WHERE execution_id = ANY(%s) AND state = 'succeeded' GROUP BY execution_id",
        (ids,),
    )
    return {r["execution_id"]: r["n"] for r in rows}


@pytest.fixture
def stamp(dsn, tmp_path) -> Path:
    marker = tmp_path / "ran"
    cli(dsn, "task", "create", "stamp", "--command", f'echo "$PGSCHED_EXECUTION_ID" >> {marker}')
    return marker


class Gate:
    """A task whose handler blocks while the gate is closed: with both slots blocked, the
    buffer cannot drain into them however late the worker gets to a signal (under load its
    slot threads ran ten buffered executions before the SIGTERM handler did)."""

    def __init__(self, dsn: str, folder: Path) -> None:
        self.marker, self.blocked, self.open_file = (
            folder / "ran",
            folder / "blocked",
            folder / "open",
        )
        self.open()
        cli(
            dsn,
            "task",
            "create",
            "stamp",
            "--command",
            f'echo "$PGSCHED_EXECUTION_ID" >> {self.marker}; '
            f'if [ ! -e {self.open_file} ]; then echo "$PGSCHED_EXECUTION_ID" >> {self.blocked}; '
            f"while [ ! -e {self.open_file} ]; do sleep 0.02; done; fi",
        )

    def open(self) -> None:
        self.open_file.touch()

    def close_on_every_slot(self) -> None:
        """Close the gate and wait until every slot is blocked at it."""
        self.open_file.unlink()
        wait_until(
            lambda: self.blocked.exists() and len(self.blocked.read_text().split()) == CONCURRENCY,
            timeout=30,
            message="every slot blocked at the gate",
        )


@pytest.fixture
def gate(dsn, tmp_path) -> Gate:
    return Gate(dsn, tmp_path)


def handed_back(worker) -> int:
    found = re.search(
        r"handed back (\d+) claimed execution\(s\) that had not started", worker.output
    )
    return int(found[1]) if found else 0


def starts(marker: Path) -> dict[int, int]:
    counts: dict[int, int] = {}
    for line in marker.read_text().split():
        counts[int(line)] = counts.get(int(line), 0) + 1
    return counts


def test_sigkill_leaves_buffered_executions_to_the_rescue(dsn, sql, start, stamp):
    ids = [
        r["id"]
        for r in sql.execute(
            "SELECT pgsched.enqueue_v1('stamp') AS id FROM generate_series(1, %s)", (RUNS,)
        ).fetchall()
    ]
    worker, first = buffered_worker(sql, start)
    worker.proc.send_signal(signal.SIGKILL)
    worker.proc.wait(10)
    sessions_ended(sql, "pgsched worker")  # seen under load: 5 outcomes committed after the count
    held = running_of(sql, first)
    assert held > CONCURRENCY  # more than its slots: its buffer too
    start("scheduler", "--max-sleep", "0.5")  # its leader rescues the dead worker's executions
    start("worker", "--concurrency", "4", "--poll-interval", "0.5")
    rows = all_done(sql, ids)
    assert {r["state"] for r in rows} == {"succeeded"}
    assert succeeded_attempts(sql, ids) == dict.fromkeys(ids, 1)  # each succeeded exactly once
    rescued = [r for r in rows if r["attempt"] == 2]
    assert len(rescued) == held and all(
        r["max_attempts"] == 2 for r in rescued
    )  # the lost attempt is given back
    counts = starts(stamp)
    assert set(counts) == set(ids) and max(counts.values()) <= 2
    # What the first worker had started (running, or done with its outcome not yet written)
    # may run again; what it held in its buffer had not started, and runs exactly once.
    started = {
        int(i) for i in re.findall(r"execution (\d+) \(stamp\) attempt 1 started", worker.output)
    }
    assert {i for i, n in counts.items() if n > 1} <= started
    never_started = {r["id"] for r in rescued} - started
    assert never_started and all(counts[i] == 1 for i in never_started)


def test_sigterm_hands_buffered_executions_back_without_an_attempt(dsn, sql, start, gate):
    ids = [
        r["id"]
        for r in sql.execute(
            "SELECT pgsched.enqueue_v1('stamp') AS id FROM generate_series(1, %s)", (RUNS,)
        ).fetchall()
    ]
    worker, first = buffered_worker(sql, start)
    gate.close_on_every_slot()
    assert running_of(sql, first) > CONCURRENCY
    worker.proc.send_signal(signal.SIGTERM)
    wait_until(lambda: handed_back(worker), timeout=30, message="the buffer handed back")
    assert running_of(sql, first) == CONCURRENCY  # all but the two blocked at the gate
    gate.open()
    assert worker.proc.wait(30) == 0
    assert running_of(sql, first) == 0
    pending = sql.execute(
        "SELECT attempt, max_attempts, worker_id, lease_id FROM pgsched.execution"
    ).fetchall()
    assert pending and all(
        r == {"attempt": 0, "max_attempts": 1, "worker_id": None, "lease_id": None} for r in pending
    )
    assert (
        sql.execute(
            "SELECT count(*) AS n FROM pgsched.execution_attempt WHERE state <> 'succeeded'"
        ).fetchone()["n"]
        == 0
    )  # nothing lost, nothing recorded for the handed back
    start("worker", "--concurrency", "4", "--poll-interval", "0.5")
    rows = all_done(sql, ids)
    assert {(r["state"], r["attempt"], r["max_attempts"]) for r in rows} == {("succeeded", 1, 1)}
    assert succeeded_attempts(sql, ids) == dict.fromkeys(ids, 1)
    assert starts(gate.marker) == dict.fromkeys(
        ids, 1
    )  # a clean stop: every run started exactly once


def test_a_worker_declared_dead_starts_nothing_it_had_buffered(dsn, sql, start, tmp_path):
    """SIGSTOP past the dead-worker limit, then SIGCONT: the leader rescued everything the
    worker held, buffer included; the worker must not start a buffered execution under its
    old claim (a second run beside the rescued one) before its heartbeat learns it is dead."""
    marker = tmp_path / "stamped"
    cli(
        dsn,
        "task",
        "create",
        "stamp",
        "--command",
        f'echo "$PGSCHED_EXECUTION_ID $PGSCHED_ATTEMPT $(date +%s.%N)" >> {marker}',
    )
    ids = [
        r["id"]
        for r in sql.execute(
            "SELECT pgsched.enqueue_v1('stamp') AS id FROM generate_series(1, %s)", (RUNS,)
        ).fetchall()
    ]
    worker, first = buffered_worker(sql, start)
    worker.proc.send_signal(signal.SIGSTOP)
    try:
        start("scheduler", "--max-sleep", "0.5")  # declares it dead after 3 missed beats, rescues
        # one rescue takes them all (but one whose row the stopped worker's open transaction locks)
        wait_until(
            lambda: (
                sql.execute(
                    "SELECT count(*) AS n FROM pgsched.execution_attempt WHERE state = 'lost' "
                    "AND worker_id = %s",
                    (first,),
                ).fetchone()["n"]
                > 0
            ),
            timeout=30,
            message="the stopped worker declared dead and its executions rescued",
        )
    finally:
        # what it had begun to start before it was stopped (its output is complete meanwhile)
        begun = {
            (int(i), int(a))
            for i, a in re.findall(
                r"execution (\d+) \(stamp\) attempt (\d+) started", worker.output
            )
        }
        worker.proc.send_signal(signal.SIGCONT)
    rows = all_done(sql, ids)
    assert {r["state"] for r in rows} == {"succeeded"}
    lost = {
        (r["execution_id"], r["attempt"]): r["rescued"]
        for r in sql.execute(
            "SELECT execution_id, attempt, extract(epoch FROM finished_at)::float8 AS rescued "
            "FROM pgsched.execution_attempt WHERE state = 'lost'"
        )
    }
    assert len(lost) > CONCURRENCY  # its buffer was rescued too
    late = []
    for line in marker.read_text().splitlines():
        execution, attempt, at = line.split()
        rescued = lost.get((int(execution), int(attempt)))
        if (
            rescued is not None
            and float(at) > rescued
            and (int(execution), int(attempt)) not in begun
        ):
            late.append(line)
    assert late == [], "attempts started by the worker after they were rescued from it"


def test_a_deleted_tasks_buffered_executions_are_not_handed_back_to_the_queue(
    dsn, sql, start, gate
):
    """A task deleted while a worker holds its executions in the buffer, then the worker
    stops: what it hands back must not be left pending for a worker (a delete drops the
    task's pending executions)."""
    sql.execute("SELECT pgsched.enqueue_v1('stamp') FROM generate_series(1, %s)", (RUNS,))
    worker, first = buffered_worker(sql, start)
    gate.close_on_every_slot()
    assert running_of(sql, first) > CONCURRENCY
    assert "deleted stamp" in cli(dsn, "task", "delete", "stamp").stdout
    worker.proc.send_signal(signal.SIGTERM)
    wait_until(lambda: handed_back(worker), timeout=30, message="the buffer handed back")
    gate.open()
    assert worker.proc.wait(30) == 0
    left = sql.execute(
        "SELECT e.id, e.state FROM pgsched.execution e JOIN pgsched.task t ON t.id = e.task_id "
        "WHERE t.name = 'stamp'"
    ).fetchall()
    assert left == []
    ran = starts(gate.marker)  # only what had started before the delete ran
    assert (
        len(ran)
        == sql.execute("SELECT count(*) AS n FROM pgsched.execution_history").fetchone()["n"]
    )


def test_a_worker_hands_back_what_it_claimed_ahead_when_its_handlers_turn_slow(dsn, sql, start):
    """Short tasks size a large prefetch; long ones queued behind them were claimed into the
    buffer under it. Once the worker sees they are long, it hands back what it claimed
    ahead, and a second worker takes its share instead of idling."""
    cli(dsn, "task", "create", "fast", "--command", "true")
    cli(dsn, "task", "create", "slow", "--command", "sleep 3")
    sql.execute("SELECT pgsched.enqueue_v1('fast') FROM generate_series(1, 600)")
    slow = [
        r["id"]
        for r in sql.execute("SELECT pgsched.enqueue_v1('slow') AS id FROM generate_series(1, 40)")
    ]
    start("worker", "--concurrency", str(CONCURRENCY), "--poll-interval", "0.5")
    first = wait_until(
        lambda: sql.execute(
            "SELECT worker_id FROM pgsched.execution WHERE id = ANY(%s) "
            "AND worker_id IS NOT NULL LIMIT 1",
            (slow,),
        ).fetchone(),
        timeout=60,
        message="the first worker claims slow ones",
    )["worker_id"]
    start("worker", "--concurrency", str(CONCURRENCY), "--poll-interval", "0.5")
    # Before: it kept every slow one it had claimed ahead (17 of 40) for 3 s each two at a time.
    wait_until(
        lambda: running_of(sql, first) <= 2 * CONCURRENCY,
        timeout=10,
        message="the first worker keeps no more than its slots' worth ahead",
    )
    rows = all_done(sql, slow)
    assert {r["state"] for r in rows} == {"succeeded"} and {r["attempt"] for r in rows} == {1}

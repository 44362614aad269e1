"""Work due later starts on time on real workers, not at their next poll: a retry after its
backoff, a run enqueued for later and a DAG node's retry start within 100 ms of their
run_at; an idle worker learns of a retry another worker wrote, of executions the leader's
rescue put back and of those a stopping worker handed back.

The workers here poll every 30 or 60 seconds (one case at the default 2), so a poll
cannot be what starts anything on time. Each handler records when it started by the
database's clock (its own connection's ``backend_start``), compared with the run_at the
database holds: no host clock is read."""

from __future__ import annotations

import json
import signal
import textwrap

import psycopg
import pytest

from ..helpers import cli, clock_off, finished, wait_until

pytestmark = pytest.mark.e2e

ON_TIME = 0.1  # seconds after run_at

MODULE = textwrap.dedent('''
    import os, time
    import psycopg
    from pgsched import App

    app = App()

    def started(dsn):
        """When this call started by the database's clock (seconds since the epoch): the
        moment its connection was opened."""
        with psycopg.connect(dsn, autocommit=True) as conn:
            return conn.execute("SELECT extract(epoch FROM backend_start)::float8"
                                " FROM pg_stat_activity WHERE pid = pg_backend_pid()").fetchone()[0]

    def first_time(marker):
        if os.path.exists(marker):
            return False
        open(marker, "w").close()
        return True

    @app.task()
    def stamp(dsn):
        return started(dsn)

    @app.task()
    def flaky(dsn, marker, go=None):
        """Fails the first time (after the file ``go`` exists, when given), then returns
        when it started."""
        at = started(dsn)
        if first_time(marker):
            while go and not os.path.exists(go):
                time.sleep(0.01)
            raise RuntimeError("the first attempt fails")
        return at

    @app.task()
    def stuck(dsn, marker):
        """Hangs the first time (its worker is killed or stopped), then returns when it
        started."""
        at = started(dsn)
        if first_time(marker):
            time.sleep(300)
        return at

    @app.node()
    def flaky_node(dsn, marker):
        return flaky(dsn, marker)
''')


@pytest.fixture
def tasks_dir(tmp_path):
    (tmp_path / "duetasks.py").write_text(MODULE)
    return tmp_path


def worker(start, tasks_dir, *args: str, poll: float = 30, **kwargs):
    return start(
        "worker", "--poll-interval", str(poll), "--pythonpath", str(tasks_dir), *args, **kwargs
    )


def create(dsn, name: str, target: str, params: dict, *args: str) -> None:
    cli(
        dsn,
        "task",
        "create",
        name,
        "--python",
        f"duetasks:{target}",
        "--params",
        json.dumps(params),
        *args,
    )


def enqueue(sql, task: str, seconds_ahead: float = 0) -> int:
    return sql.execute(
        "SELECT pgsched.enqueue_v1(%s, run_at => now() + make_interval(secs => %s)) AS id",
        [task, seconds_ahead],
    ).fetchone()["id"]


def lateness(row: dict) -> float:
    """Seconds from the execution's (last) run_at to the start its handler recorded."""
    assert row["state"] == "succeeded", row
    return row["result"] - row["run_at"].timestamp()


def attempts(sql, ident: int) -> list[dict]:
    return sql.execute(
        "SELECT * FROM pgsched.execution_attempt WHERE execution_id = %s ORDER BY attempt", [ident]
    ).fetchall()


def test_a_retry_after_a_20_second_backoff_starts_on_time(dsn, sql, start, tasks_dir):
    create(
        dsn,
        "flaky",
        "flaky",
        {"dsn": dsn, "marker": str(tasks_dir / "failed")},
        "--max-attempts",
        "2",
        "--retry-policy",
        "fixed",
        "--retry-base",
        "20",
    )
    worker(start, tasks_dir)
    ident = enqueue(sql, "flaky")
    done = finished(sql, ident, timeout=60)
    first, second = attempts(sql, ident)
    assert (first["state"], second["state"]) == ("failed", "succeeded")
    assert done["run_at"] == first["next_run_at"]  # the retry ran for the time the failure set
    assert 19 < (first["next_run_at"] - first["finished_at"]).total_seconds() < 21
    late = lateness(done)
    print(f"retry started {late * 1000:.1f} ms after its run_at")
    assert 0 <= late <= ON_TIME


@pytest.mark.parametrize(("shift", "poll"), [(None, 30), (420, 30), (-420, 30), (None, 2)])
def test_a_run_enqueued_for_later_starts_on_time(dsn, sql, start, tasks_dir, shift, poll):
    """Also on a worker whose clock is 7 minutes off (faketime): the wait is the database's
    answer in seconds, never the host's clock against a stored run_at. And at the default
    poll interval (2 s), whose claims and lookups change nothing (the old worker was then
    late by up to 2 s: on time by luck, 1 in 20)."""
    create(dsn, "stamp", "stamp", {"dsn": dsn})
    worker(start, tasks_dir, poll=poll, env=clock_off(shift) if shift else None)
    ident = enqueue(sql, "stamp", 5)
    late = lateness(finished(sql, ident, timeout=40))
    print(
        f"run enqueued 5 s ahead started {late * 1000:.1f} ms after its run_at"
        f" (worker clock {shift or 0:+d} s, poll {poll} s)"
    )
    assert 0 <= late <= ON_TIME


def test_a_run_enqueued_for_later_starts_on_time_beside_a_due_one_another_transaction_holds(
    dsn, sql, start, tasks_dir
):
    """An application's transaction holds a due execution (a cancel inside a longer
    transaction, SELECT ... FOR UPDATE, a foreign key from its own table): the worker
    cannot claim it and retries less and less often, but a run enqueued for later is still
    woken for on time (the held row once hid every later due time)."""
    create(dsn, "stamp", "stamp", {"dsn": dsn})
    cli(dsn, "task", "create", "held", "--command", "true")
    held = enqueue(sql, "held", 0.5)
    with psycopg.connect(dsn) as app:
        app.execute("SELECT 1 FROM pgsched.execution WHERE id = %s FOR UPDATE", [held])
        worker(start, tasks_dir)
        began = sql.execute("SELECT now() AS t").fetchone()["t"]
        # by twelve seconds on, the worker's retries of the held row are about five seconds apart
        wait_until(
            lambda: (sql.execute("SELECT now() AS t").fetchone()["t"] - began).total_seconds() > 12,
            timeout=30,
            message="twelve seconds of the held row",
        )
        ident = enqueue(sql, "stamp", 3)
        late = lateness(finished(sql, ident, timeout=40))
        app.rollback()
    print(f"run enqueued 3 s ahead beside a held one started {late * 1000:.1f} ms after its run_at")
    assert 0 <= late <= ON_TIME


def test_a_dag_nodes_retry_starts_on_time(dsn, sql, start, tasks_dir):
    dag = {
        "name": "due",
        "nodes": [
            {"id": "first", "python": "duetasks:stamp", "params": {"dsn": dsn}},
            {
                "id": "flaky",
                "python": "duetasks:flaky_node",
                "depends_on": ["first"],
                "max_attempts": 2,
                "retry_policy": "fixed",
                "retry_base": 3,
                "params": {"dsn": dsn, "marker": str(tasks_dir / "failed")},
            },
        ],
    }
    (tasks_dir / "due.json").write_text(json.dumps(dag))
    cli(dsn, "dag", "apply", str(tasks_dir / "due.json"))
    worker(start, tasks_dir)
    run_id = json.loads(cli(dsn, "dag", "trigger", "due", "--json").stdout)["run_id"]
    node = wait_until(
        lambda: sql.execute(
            "SELECT * FROM pgsched.dag_node_run WHERE run_id = %s AND node_id = 'flaky'"
            " AND state = 'succeeded'",
            [run_id],
        ).fetchone(),
        timeout=40,
        message="the flaky node to succeed",
    )
    done = finished(sql, node["execution_id"])
    first, _ = attempts(sql, node["execution_id"])
    assert first["state"] == "failed" and done["run_at"] == first["next_run_at"]
    late = lateness(done)
    print(f"DAG node retry started {late * 1000:.1f} ms after its run_at")
    assert 0 <= late <= ON_TIME


def listening(sql, workers: int) -> bool:
    """Whether ``workers`` workers are idle and waiting: each claimer has asked when the
    next execution is due (execution_next_due) since it last claimed."""
    return (
        sql.execute("""SELECT count(*) AS n FROM pg_stat_activity
                           WHERE datname = current_database() AND state = 'idle'
                             AND application_name = 'pgsched worker listen'
                             AND query LIKE '%%clock_timestamp()%%'""").fetchone()["n"]
        == workers
    )


def test_an_idle_worker_learns_of_a_retry_another_worker_wrote(dsn, sql, start, tasks_dir):
    """A runs the first attempt; B is idle. The attempt fails only once B waits, and A is
    SIGKILLed as soon as the failure is recorded: B, which polls once a minute, starts the
    retry on time (the retry's transaction notified it; the retry is an UPDATE, which the
    insert trigger does not see)."""
    go = tasks_dir / "go"
    create(
        dsn,
        "flaky",
        "flaky",
        {"dsn": dsn, "marker": str(tasks_dir / "failed"), "go": str(go)},
        "--max-attempts",
        "2",
        "--retry-policy",
        "fixed",
        "--retry-base",
        "3",
    )
    a = worker(start, tasks_dir, poll=60)
    ident = enqueue(sql, "flaky")
    wait_until(lambda: (go.parent / "failed").exists(), message="A to run the first attempt")
    b = worker(start, tasks_dir, poll=60)
    wait_until(lambda: listening(sql, 2), message="both workers to wait")
    go.touch()
    wait_until(lambda: attempts(sql, ident), message="the first attempt to be recorded")
    a.stop(signal.SIGKILL)
    done = finished(sql, ident, timeout=30)
    ran = sql.execute(
        "SELECT w.pid FROM pgsched.execution_attempt x"
        "  JOIN pgsched.worker w ON w.id = x.worker_id"
        " WHERE x.execution_id = %s ORDER BY x.attempt",
        [ident],
    ).fetchall()
    assert [r["pid"] for r in ran] == [a.proc.pid, b.proc.pid]
    late = lateness(done)
    print(f"retry written by A started on B {late * 1000:.1f} ms after its run_at")
    assert 0 <= late <= ON_TIME


def test_an_idle_worker_starts_what_the_rescue_put_back_at_once(dsn, sql, start, tasks_dir):
    """A holds an execution and is SIGKILLed; the leader's rescue puts it back (an UPDATE,
    run_at = the rescue's now()): B, idle and polling once a minute, starts it on time."""
    create(dsn, "stuck", "stuck", {"dsn": dsn, "marker": str(tasks_dir / "stuck")})
    start("scheduler", "--max-sleep", "0.5")
    a = worker(start, tasks_dir, "--heartbeat-interval", "0.5", poll=60)
    ident = enqueue(sql, "stuck")
    wait_until(lambda: (tasks_dir / "stuck").exists(), message="A to start the execution")
    worker(start, tasks_dir, poll=60)
    wait_until(lambda: listening(sql, 2), message="both workers to wait")
    a.stop(signal.SIGKILL)
    done = finished(sql, ident, timeout=30)
    lost, _ = attempts(sql, ident)
    assert lost["state"] == "lost"
    late = lateness(done)
    print(f"rescued execution started {late * 1000:.1f} ms after its run_at (the rescue)")
    assert 0 <= late <= ON_TIME


def test_an_idle_worker_starts_what_a_stopping_worker_handed_back(dsn, sql, start, tasks_dir):
    """A is stopped (SIGTERM) while it runs an execution and, past its shutdown timeout,
    hands it back (pending again by UPDATE, run_at = then): B, idle and polling once a
    minute, starts it on time."""
    create(dsn, "stuck", "stuck", {"dsn": dsn, "marker": str(tasks_dir / "stuck")})
    a = worker(start, tasks_dir, "--shutdown-timeout", "0.2", poll=60)
    ident = enqueue(sql, "stuck")
    wait_until(lambda: (tasks_dir / "stuck").exists(), message="A to start the execution")
    worker(start, tasks_dir, poll=60)
    wait_until(lambda: listening(sql, 2), message="both workers to wait")
    a.stop(signal.SIGTERM)
    done = finished(sql, ident, timeout=30)
    back, _ = attempts(sql, ident)
    assert back["state"] == "lost"
    late = lateness(done)
    print(f"handed-back execution started {late * 1000:.1f} ms after its run_at")
    assert 0 <= late <= ON_TIME

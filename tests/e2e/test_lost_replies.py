"""Replies lost after the server committed (issue 15, item 1): the worker must neither call
its own committed outcome a rescue, nor keep running what the database no longer gives it.

Lost replies are made real by a TCP proxy between the worker and PostgreSQL that, once
armed, throws away the first server message holding a given pattern and cuts that
connection: the statement ran and committed on the server, and the worker only sees its
connection break.
"""

from __future__ import annotations

import collections
import json
import os
import random
import socket
import threading
import time
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ..helpers import cli, wait_until

pytestmark = pytest.mark.e2e


class ReplyDropper:
    """A proxy to the server of ``dsn``; :attr:`dsn` reaches the same database through it.
    :meth:`drop` arms it: the first server-to-client chunk containing ``pattern`` is
    discarded and its connection closed (both ways)."""

    def __init__(self, dsn: str) -> None:
        info = conninfo_to_dict(dsn)
        host, port = info.get("host") or "localhost", int(info.get("port") or 5432)
        self._upstream = (
            (socket.AF_UNIX, f"{host}/.s.PGSQL.{port}")
            if host.startswith("/")
            else (socket.AF_INET, (host if host != "localhost" else "127.0.0.1", port))
        )
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.dsn = make_conninfo(dsn, host="127.0.0.1", port=str(self._listener.getsockname()[1]))
        self._lock = threading.Lock()
        self._patterns: list[bytes] = []
        self.dropped: list[bytes] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def drop(self, pattern: bytes) -> None:
        with self._lock:
            self._patterns.append(pattern)

    def close(self) -> None:
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            family, address = self._upstream
            server = socket.socket(family, socket.SOCK_STREAM)
            server.connect(address)
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, replies: bool) -> None:
        try:
            while data := source.recv(65536):
                if replies:
                    with self._lock:
                        hit = next((p for p in self._patterns if p in data), None)
                        if hit is not None:
                            self._patterns.remove(hit)
                            self.dropped.append(hit)
                    if hit is not None:
                        break  # the reply is never forwarded
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()


@pytest.fixture
def dropper(dsn):
    proxy = ReplyDropper(dsn)
    yield proxy
    proxy.close()


# The reply of execution_finish_many (the writer's group commit) names its column "moved";
# that of the retry transaction's COMMIT is the command tag COMMIT.
FINISH_REPLY = b"moved\x00"
COMMIT_REPLY = b"COMMIT\x00"


def test_outcomes_whose_replies_were_lost_are_recognised_as_recorded(
    dsn, sql, start, dropper, tmp_path
):
    """A task fails once, then succeeds. The reply of the retry's transaction (attempt 1,
    failed) and that of the group commit of the success (attempt 2) are lost after the
    server committed them. Claim: the worker logs both as recorded by its earlier try, never
    that its lease was lost (no scheduler runs: nothing was rescued), and the execution ends
    succeeded with one failed and one succeeded attempt."""
    flag = tmp_path / "failed-once"
    cli(
        dsn,
        "task",
        "create",
        "flaky",
        "--command",
        f"test -e {flag} || {{ touch {flag}; exit 3; }}",
        "--max-attempts",
        "2",
        "--retry-base",
        "0.2",
        "--retry-policy",
        "fixed",
    )
    worker = start(
        "worker",
        "--concurrency",
        "1",
        "--heartbeat-interval",
        "1",
        "--poll-interval",
        "0.5",
        env={"PGSCHED_DSN": dropper.dsn},
    )
    wait_until(
        lambda: sql.execute(
            "SELECT count(*) AS n FROM pgsched.worker WHERE state = 'running'"
        ).fetchone()["n"],
        message="the worker registered",
    )
    dropper.drop(COMMIT_REPLY)
    dropper.drop(FINISH_REPLY)
    ident = sql.execute("SELECT pgsched.enqueue_v1('flaky') AS id").fetchone()["id"]
    done = wait_until(
        lambda: sql.execute(
            "SELECT state, attempt FROM pgsched.execution_history WHERE id = %s", (ident,)
        ).fetchone(),
        timeout=60,
        message="the execution ends",
    )
    attempts = sql.execute(
        "SELECT attempt, state FROM pgsched.execution_attempt WHERE execution_id = %s "
        "ORDER BY attempt",
        (ident,),
    ).fetchall()
    # the worker logs the end after the commit the test saw
    logs = wait_until(
        lambda: (out := worker.output).count("recorded by an earlier try") >= 2 and out,
        timeout=10,
        message="both outcomes logged as recorded",
    )
    print(
        f"\nlost replies: {sorted(dropper.dropped)}; "
        f"{logs.count('recorded by an earlier try')} recognised as recorded; "
        f"{logs.count('is no longer held')} reported as a lost lease"
    )
    assert sorted(dropper.dropped) == sorted([COMMIT_REPLY, FINISH_REPLY])  # both replies were lost
    assert done == {"state": "succeeded", "attempt": 2}
    assert [(a["attempt"], a["state"]) for a in attempts] == [(1, "failed"), (2, "succeeded")]
    assert "is no longer held" not in logs
    assert "outcome failed was recorded by an earlier try" in logs  # the retry's transaction
    assert (
        f"the outcome(s) of execution(s) [{ident}] were recorded by an earlier try" in logs
    )  # the group commit


# A claim's reply (execution_claim) carries the column task_version.
CLAIM_REPLY = b"task_version\x00"


def test_executions_of_a_claim_whose_reply_was_lost_are_handed_back(
    dsn, sql, start, dropper, tmp_path
):
    """The reply of a claim that gave the worker executions is lost after the server
    committed it: the executions are 'running' under a live worker that never heard of
    them. Claim: once its claimer has reconnected, the worker hands them back (it does not
    run them blind), and every execution then runs once, at attempt 1 (the hand-back costs
    no attempt); none stays 'running' although no scheduler runs (no rescue could take them
    back)."""
    marker = tmp_path / "runs"
    marker.touch()
    cli(
        dsn,
        "task",
        "create",
        "short",
        "--argv",
        json.dumps(["bash", "-c", f'echo "$PGSCHED_EXECUTION_ID $PGSCHED_ATTEMPT" >> {marker}']),
    )
    # polls once a minute: the claim after arming is the one the NOTIFY of the enqueue asks for
    worker = start(
        "worker",
        "--concurrency",
        "2",
        "--heartbeat-interval",
        "1",
        "--poll-interval",
        "60",
        env={"PGSCHED_DSN": dropper.dsn},
    )
    # its claimer idle: its first claim came back empty and it asked when work is due
    wait_until(
        lambda: sql.execute(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = 'pgsched worker listen' AND state = 'idle' "
            "AND query LIKE '%%future_seconds%%'"
        ).fetchone()["n"],
        message="the worker's claimer waits",
    )
    dropper.drop(CLAIM_REPLY)
    ids = [
        r["id"]
        for r in sql.execute("SELECT pgsched.enqueue_v1('short') AS id FROM generate_series(1, 5)")
    ]
    wait_until(lambda: dropper.dropped, message="a claim's reply dropped")
    rows = wait_until(
        lambda: (
            (
                r := sql.execute(
                    "SELECT id, state, attempt FROM pgsched.execution_history WHERE id = ANY(%s)",
                    (ids,),
                ).fetchall()
            )
            and len(r) == 5
            and r
        ),
        timeout=30,
        message="every execution ran",
    )
    runs = collections.Counter(tuple(line.split()) for line in marker.read_text().splitlines())
    print(
        f"\nlost claim reply: {worker.output.count('that a claim whose reply was lost')} hand-back(s)"
    )
    assert {(r["state"], r["attempt"]) for r in rows} == {("succeeded", 1)}
    assert runs == {(str(i), "1"): 1 for i in ids}
    assert "that a claim whose reply was lost with the connection had given it" in worker.output


def _lines(path: Path) -> list[tuple[int, int, str]]:
    return [
        (int(i), int(a), what)
        for i, a, what in (line.split() for line in path.read_text().splitlines())
    ]


def test_a_worker_stops_and_drops_what_the_database_no_longer_gives_it(dsn, sql, start, tmp_path):
    """A worker (concurrency 2, a prefetch of 20) has both slots blocked in commands and a
    buffer behind them, when the database takes all of it back (the leader's rescue of
    executions a live worker leaves out of its reports, rescue_v1 of migration 0015, run
    while its report says it holds nothing). Claim: at its next heartbeat (lost_ids) it
    kills the blocked commands and drops its buffer, so that no command of the taken
    attempts ends and none of the buffered ones starts under the lease taken from it;
    every execution then succeeds once, at its next attempt."""
    marker, gate = tmp_path / "lines", tmp_path / "open"
    gate.touch()
    cli(
        dsn,
        "task",
        "create",
        "gated",
        "--argv",
        json.dumps(
            [
                "bash",
                "-c",
                (
                    f'echo "$PGSCHED_EXECUTION_ID $PGSCHED_ATTEMPT start" >> {marker}; '
                    f"trap 'echo \"$PGSCHED_EXECUTION_ID $PGSCHED_ATTEMPT killed\" >> {marker}; exit 143' TERM; "
                    f"while [ ! -e {gate} ]; do sleep 0.02; done; "
                    f'echo "$PGSCHED_EXECUTION_ID $PGSCHED_ATTEMPT end" >> {marker}'
                ),
            ]
        ),
    )
    # polls once a minute: what the take-back makes pending waits for the NOTIFY below
    start(
        "worker",
        "--concurrency",
        "2",
        "--prefetch",
        "20",
        "--heartbeat-interval",
        "1",
        "--poll-interval",
        "60",
    )
    warm = [
        r["id"]
        for r in sql.execute("SELECT pgsched.enqueue_v1('gated') AS id FROM generate_series(1, 20)")
    ]
    wait_until(
        lambda: (
            sql.execute("SELECT count(*) AS n FROM pgsched.execution_history").fetchone()["n"] == 20
        ),
        timeout=30,
        message="short runs teach the worker to prefetch",
    )
    gate.unlink()
    ids = [
        r["id"]
        for r in sql.execute("SELECT pgsched.enqueue_v1('gated') AS id FROM generate_series(1, 30)")
    ]
    worker_id = wait_until(
        lambda: sql.execute(
            "SELECT worker_id FROM pgsched.execution WHERE state = 'running' GROUP BY worker_id "
            "HAVING count(*) > 2"
        ).fetchone(),
        timeout=30,
        message="a buffer behind the slots",
    )["worker_id"]
    wait_until(
        lambda: sum(1 for i, a, w in _lines(marker) if i in ids and w == "start") == 2,
        timeout=30,
        message="both slots blocked",
    )
    with sql.transaction():
        sql.execute(
            "UPDATE pgsched.worker SET held = '{}', held_prev_at = now(), held_at = now() WHERE id = %s",
            (worker_id,),
        )
        taken = sql.execute("SELECT * FROM pgsched_internal.rescue_v1()").fetchall()
    assert len(taken) > 2 and {r["outcome"] for r in taken} == {"requeued"}
    taken_ids = {r["execution_id"] for r in taken}
    # at its next heartbeat the worker kills the two commands blocked at the closed gate
    wait_until(
        lambda: sum(1 for i, _, w in _lines(marker) if i in taken_ids and w == "killed") == 2,
        timeout=15,
        message="the blocked commands killed",
    )
    gate.touch()
    sql.execute("SELECT pg_notify('pgsched_execution', '')")
    wait_until(
        lambda: sql.execute("SELECT count(*) AS n FROM pgsched.execution").fetchone()["n"] == 0,
        timeout=60,
        message="everything ran",
    )
    succeeded = {
        r["id"]: r["attempt"]
        for r in sql.execute(
            "SELECT id, attempt FROM pgsched.execution_history WHERE state = 'succeeded'"
        )
    }
    assert set(succeeded) == set(warm) | set(ids)
    stale = [(i, a, w) for i, a, w in _lines(marker) if i in taken_ids and a != succeeded[i]]
    print(f"\ntaken back: {len(taken)} executions; stale lines: {stale}")
    assert sorted(w for _, _, w in stale) == ["killed", "killed", "start", "start"], (
        "only the two blocked commands started under the taken leases, and were killed"
    )
    assert all(succeeded[i] == 2 for i in taken_ids)


# test_immediate_restarts_leave_nothing_running_that_no_worker_runs
RESTARTS = 15
ENQUEUE_EVERY = 0.01  # seconds between enqueues of ENQUEUE_BATCH: a drain that spans the restarts
ENQUEUE_BATCH = 1
TOTAL = 500


def _set_fsync(dsn: str, on: bool, reload: bool = True) -> bool:
    """Set the server's fsync on or off, now (``reload``) or from its next start; False
    while the server is away."""
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"ALTER SYSTEM SET fsync = {'on' if on else 'off'}")
            if reload:
                conn.execute("SELECT pg_reload_conf()")
    except psycopg.OperationalError:
        return False
    return True


def test_immediate_restarts_leave_nothing_running_that_no_worker_runs(dsn, start, tmp_path):
    """PostgreSQL is restarted with ``pg_ctl restart -m immediate`` 8 times while 2 workers
    (concurrency 4) drain 400 short commands enqueued as they go: every backend ends at once,
    so a claim (or an outcome) can commit with its reply never sent. No scheduler runs, so no
    rescue can tidy up behind the workers: what they do not reconcile themselves stays.
    Claim: every execution ends in history 'succeeded', with exactly one succeeded attempt,
    its command ran exactly once, and none stays 'running' after the drain."""
    from .test_chaos import _embedded_server, _restart_postgres, query, try_query

    data_dir = Path(query(dsn, "SHOW data_directory")[0]["data_directory"])
    server = _embedded_server(data_dir) if (data_dir / "postmaster.pid").exists() else None
    if server is None:
        pytest.skip("restarting PostgreSQL is done only to the session's own embedded server")
    rng = random.Random(int(os.environ.get("CHAOS_SEED") or time.time_ns() % 2**32))
    marker = tmp_path / "runs"
    marker.touch()
    cli(
        dsn,
        "task",
        "create",
        "short",
        "--argv",
        json.dumps(["bash", "-c", f'echo "$PGSCHED_EXECUTION_ID $PGSCHED_ATTEMPT" >> {marker}']),
    )
    workers = [
        start("worker", "--concurrency", "4", "--heartbeat-interval", "1", "--poll-interval", "0.5")
        for _ in range(2)
    ]
    enqueued = [0]
    stop = threading.Event()

    def enqueue() -> None:  # on its own connection, reconnecting across the restarts
        conn = None
        while enqueued[0] < TOTAL and not stop.is_set():
            try:
                conn = conn or psycopg.connect(dsn, autocommit=True, connect_timeout=5)
                conn.execute(
                    "SELECT pgsched.enqueue_v1('short') FROM generate_series(1, %s)",
                    (ENQUEUE_BATCH,),
                )
                enqueued[0] += (
                    ENQUEUE_BATCH  # a reply lost here leaves more: the checks count the table
                )
            except psycopg.OperationalError:
                if conn is not None:
                    conn.close()
                conn = None
            stop.wait(ENQUEUE_EVERY)  # pacing, not a wait for a condition
        if conn is not None:
            conn.close()

    feeder = threading.Thread(target=enqueue, daemon=True)
    wait_until(
        lambda: (
            query(dsn, "SELECT count(*) AS n FROM pgsched.worker WHERE state = 'running'")[0]["n"]
            == 2
        ),
        message="both workers registered",
    )
    # The window in which a reply is lost after the commit is the commit's WAL flush: the
    # session's server runs without fsync (tests/conftest.py), which shrinks it to
    # microseconds; a production server flushes, and so does this one while the workers
    # run. It starts without (a start after a crash with fsync on first syncs every file of
    # the data directory: seconds on this machine), then turns it on.
    _set_fsync(dsn, True)
    began = time.monotonic()
    feeder.start()
    took = []
    try:
        for _ in range(RESTARTS):
            stop.wait(rng.uniform(0.2, 0.5))  # chaos pacing
            _set_fsync(dsn, False, reload=False)
            took.append(_restart_postgres(data_dir, server, "immediate"))
            wait_until(lambda: _set_fsync(dsn, True), message="fsync on again")
        feeder.join(30)
    finally:
        stop.set()
        feeder.join(30)
        wait_until(lambda: _set_fsync(dsn, False), timeout=30, message="fsync off again")
    restarted = time.monotonic()
    live = "SELECT count(*) FILTER (WHERE state = 'running') AS running, count(*) AS live FROM pgsched.execution"
    try:
        wait_until(
            lambda: (r := try_query(dsn, live)) is not None and r[0]["live"] == 0,
            timeout=45,
            interval=0.2,
            message="every execution finished",
        )
    finally:
        left = query(dsn, live)[0]
        logs = "\n".join(w.output for w in workers)
        print(
            f"\nimmediate restarts: {len(took)} (each {min(took):.2f}-{max(took):.2f}s); "
            f"{query(dsn, 'SELECT count(*) AS n FROM pgsched.execution_history')[0]['n']} executions; "
            f"drained {time.monotonic() - restarted:.1f}s after the last restart, "
            f"{time.monotonic() - began:.1f}s in all; left live {left['live']}, running {left['running']}; "
            f"handed back after a lost claim reply: {logs.count('that a claim whose reply was lost')} time(s); "
            f"outcomes recognised as recorded: {logs.count('recorded by an earlier try')}; "
            f"'no longer held': {logs.count('is no longer held')}"
        )
    totals = query(
        dsn,
        "SELECT count(*) AS n, count(DISTINCT id) AS d, "
        "count(*) FILTER (WHERE state = 'succeeded') AS ok FROM pgsched.execution_history",
    )[0]
    assert totals["n"] == totals["d"] == totals["ok"] >= TOTAL
    once = query(
        dsn,
        "SELECT execution_id, count(*) AS n FROM pgsched.execution_attempt "
        "WHERE state = 'succeeded' GROUP BY execution_id",
    )
    assert len(once) == totals["n"] and {r["n"] for r in once} == {1}
    runs = collections.Counter(line.split()[0] for line in marker.read_text().splitlines())
    assert len(runs) == totals["n"] and set(runs.values()) == {1}, "a command ran twice"
    assert "is no longer held" not in logs  # nothing was rescued: no outcome was refused
    for w in workers:
        assert w.proc.poll() is None, f"a worker exited {w.proc.returncode}"

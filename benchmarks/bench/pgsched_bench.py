"""pgsched's side of ``benchmarks/run.py``: one measurement per call, on a database that
run.py created for it (empty; migrated here), results as JSON lines on stdout.

    python benchmarks/bench/pgsched_bench.py PART --dsn DSN [options]

Parts:

- ``enqueue-bulk``: N runs of one task through ``tasks.enqueue_many`` (one statement,
  ``pgsched.enqueue_many_v1``) in chunks of ``--chunk``.
- ``enqueue-single``: N ``SELECT pgsched.enqueue_v1(...)``, one autocommit transaction each,
  one after the other on one connection (``--api python``: ``tasks.trigger`` instead).
- ``drain``: N runs of the no-op Python task ``bench-job`` (``--task``: another, e.g.
  ``bench-sleep``, 10 ms) queued (untimed, then ANALYZE), with ``--python-isolation``;
  a fresh ``pgsched worker`` process is started and the clock runs from its start until
  every run is in ``pgsched.execution_history``; also the steady rate (first start to last
  finish, from the rows' timestamps), the rate of the first and the last tenth (from
  ``finished_at``) and the worker's peak RSS (with its children, sampled with psutil).
- ``latency``: an idle worker; one ``enqueue_v1`` of ``bench-stamp`` every 1/``--rate`` s
  for ``--duration`` s; enqueue-to-start = the handler's ``time.time()`` (its result) minus
  the client's ``time.time()`` just before the enqueue call.
- ``burst``: ``--tasks`` cron tasks (``* * * * *``, Python no-op) inserted by SQL with
  ``next_fire_at`` = the coming minute; ``pgsched scheduler`` and ``--workers`` workers
  running; time from that minute until every fire's execution exists (committed), and until
  the last one started; the scheduler's peak RSS.
- ``claim-backlog``: claims on 'default' (and by a worker of 'default' and 'urgent') timed
  with and without ``--backlog`` ready executions on another queue, 'bulk'; the ratio of
  the medians (flat: about 1) and the buffers one claim touches.
- ``fill-history``: ``--rows`` rows of finished executions put into
  ``pgsched.execution_history`` (daily partitions of the last ``--days`` days, made with
  ``pgsched_internal.partition_ensure_v1``), for the history-flatness drain that follows.

Exit status 1 when a measurement failed: nothing is printed for it.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BENCHMARKS = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(
    0, str(BENCHMARKS)
)  # noop_tasks, as the worker imports it (--pythonpath benchmarks)
try:
    import pgsched  # noqa: F401
except ImportError:  # a checkout that is not installed
    sys.path.insert(0, str(BENCHMARKS.parent))

import common
import noop_tasks
import psycopg
from psycopg.rows import dict_row

from pgsched import migrate as migrations
from pgsched import queries
from pgsched.db import Database, Session
from pgsched.stores import tasks
from pgsched.worker.claims import TaskDefinitions

SYSTEM = "pgsched"
BenchFailed = common.BenchFailed


# --- database set-up ------------------------------------------------------------------


def prepare(dsn: str) -> Database:
    """Migrate, create the partitions the leader would (none runs in most parts), and store
    the benchmark tasks."""
    migrations.migrate(dsn)
    db = Database.connect(dsn, max_size=2, application_name="pgsched bench driver")
    today = datetime.now(UTC).date()
    db.many("partition_ensure", from_day=today - timedelta(days=1), days=5)
    noop_tasks.app.sync(db)
    return db


def scalar(conn: psycopg.Connection[Any], sql: str, params: Any = None) -> Any:
    row = conn.execute(sql, params).fetchone()
    assert row is not None
    return row[0]


def bulk_enqueue(db: Database, task: str, n: int, chunk: int = 1000) -> list[int]:
    ids: list[int] = []
    for start in range(0, n, chunk):
        k = min(chunk, n - start)
        ids += tasks.enqueue_many(db, task, [{"seq": start + i} for i in range(k)])
    if len(ids) != n:
        raise BenchFailed(f"enqueue_many returned {len(ids)} ids for {n} runs")
    return ids


# --- processes ------------------------------------------------------------------------


class Proc:
    """``python -m pgsched ARGS`` in a session of its own, logging to a file; stopped with
    SIGTERM (then SIGKILL) by :meth:`stop`."""

    def __init__(self, dsn: str, args: list[str], log_dir: Path, tag: str):
        self.log_path = log_dir / f"{tag}.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115  (closed in stop)
        self.args = args
        env = {**os.environ, "PGSCHED_DSN": dsn}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pgsched", *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
            cwd=str(BENCHMARKS),
            preexec_fn=common.die_with_parent,
        )

    def dead(self) -> str | None:
        if self.proc.poll() is None:
            return None
        return f"pgsched {self.args[0]} exited with {self.proc.returncode}; its log ends:\n{self.tail()}"

    def tail(self, lines: int = 25) -> str:
        self._log.flush()
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout: float = 20.0) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
            except ProcessLookupError:
                pass
        self._log.close()


def log_dir(args: argparse.Namespace) -> Path:
    if args.keep_logs:
        path = Path(args.keep_logs)
        path.mkdir(parents=True, exist_ok=True)
        return path
    return Path(tempfile.mkdtemp(prefix="pgsched-bench-"))


def worker_args(concurrency: int, extra: list[str] | None = None) -> list[str]:
    return [
        "worker",
        "--concurrency",
        str(concurrency),
        "--pythonpath",
        str(BENCHMARKS),
        *(extra or []),
    ]


def wait_listening(
    conn: psycopg.Connection[Any], procs: list[Proc], count: int, timeout: float = 60
) -> None:
    """Until ``count`` workers are registered and their LISTEN connections are up (the
    connection's last statement is a LISTEN, or a claim, or the next-due lookup that follows
    a claim that came up short, sql/execution.sql execution_next_due: the worker claims on it
    after its LISTENs)."""

    def ready() -> bool:
        return bool(
            scalar(
                conn,
                "SELECT (SELECT count(*) FROM pgsched.worker WHERE state = 'running') >= %s "
                "AND (SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name = 'pgsched worker listen' AND (query ILIKE 'LISTEN%%' "
                "OR query ILIKE 'WITH asked%%' OR query ILIKE 'WITH RECURSIVE pending(tenant)%%'))"
                " >= %s",
                (count, count),
            )
        )

    common.wait_until(
        ready,
        timeout,
        f"{count} worker(s) to start and listen",
        poll=0.05,
        alive=lambda: next((d for p in procs if (d := p.dead())), None),
    )


def warm_up(db: Database, conn: psycopg.Connection[Any], procs: list[Proc], runs: int) -> None:
    """A few no-op runs before the clock starts: the workers import the task module and open
    their pool connections."""
    tasks.enqueue_many(db, "bench-warmup", [{} for _ in range(runs)])
    common.wait_until(
        lambda: not scalar(conn, "SELECT EXISTS (SELECT 1 FROM pgsched.execution)"),
        60,
        "the warm-up runs",
        alive=lambda: next((d for p in procs if (d := p.dead())), None),
    )


# --- parts ----------------------------------------------------------------------------


def part_enqueue_bulk(args: argparse.Namespace) -> None:
    db = prepare(args.dsn)
    try:
        t = time.perf_counter()
        bulk_enqueue(db, "bench-job", args.n, args.chunk)
        elapsed = time.perf_counter() - t
        with psycopg.connect(args.dsn) as conn:
            count = scalar(conn, "SELECT count(*) FROM pgsched.execution")
    finally:
        db.close()
    if count != args.n:
        raise BenchFailed(f"enqueue-bulk: {count} in the queue, expected {args.n}")
    common.emit(
        SYSTEM,
        "enqueue_bulk",
        f"tasks.enqueue_many, chunks of {args.chunk}",
        n=args.n,
        seconds=round(elapsed, 3),
        jobs_per_s=round(args.n / elapsed, 1),
    )


def part_enqueue_single(args: argparse.Namespace) -> None:
    db = prepare(args.dsn)
    try:
        if args.api == "python":
            t = time.perf_counter()
            for i in range(args.n):
                tasks.trigger(db, "bench-job", params={"seq": i}, how="api")
            elapsed = time.perf_counter() - t
            config = "tasks.trigger (Python API, a pool connection, one transaction each)"
        else:
            from psycopg.types.json import Jsonb

            with psycopg.connect(args.dsn, autocommit=True) as conn:
                t = time.perf_counter()
                for i in range(args.n):
                    conn.execute(
                        "SELECT pgsched.enqueue_v1(%s, %s)", ("bench-job", Jsonb({"seq": i}))
                    )
                elapsed = time.perf_counter() - t
            config = "SELECT pgsched.enqueue_v1(...), autocommit, one connection"
        with psycopg.connect(args.dsn) as conn:
            count = scalar(conn, "SELECT count(*) FROM pgsched.execution")
    finally:
        db.close()
    if count != args.n:
        raise BenchFailed(f"enqueue-single: {count} in the queue, expected {args.n}")
    common.emit(
        SYSTEM,
        "enqueue_single",
        config,
        n=args.n,
        seconds=round(elapsed, 3),
        jobs_per_s=round(args.n / elapsed, 1),
    )


def part_drain(args: argparse.Namespace) -> None:
    """Also the history-flatness and memory parts (``--part``); with ``--reuse`` the database
    is already migrated and may hold history (fill-history)."""
    db = prepare(args.dsn)
    logs = log_dir(args)
    worker: Proc | None = None
    conn = psycopg.connect(args.dsn, autocommit=True)
    try:
        history_rows = scalar(conn, "SELECT count(*) FROM pgsched.execution_history")
        conn.execute("VACUUM ANALYZE pgsched.execution")
        ids = bulk_enqueue(db, args.task, args.n)
        conn.execute("ANALYZE pgsched.execution")
        lo, hi = min(ids), max(ids)
        extra = ["--log-level", args.worker_log_level] if args.worker_log_level else []
        if args.poll_interval:
            extra += ["--poll-interval", str(args.poll_interval)]
        if args.python_isolation:
            extra += ["--python-isolation", args.python_isolation]
        common.index_only_polls(conn)
        postmaster = common.server_pid(conn)
        server_cpu = common.cpu_seconds([postmaster])
        started = time.perf_counter()
        worker = Proc(args.dsn, worker_args(args.concurrency, extra), logs, "worker")
        sampler = common.RssSampler(worker.proc.pid)
        done = common.wait_until(
            lambda: (
                not scalar(
                    conn,
                    "SELECT EXISTS (SELECT 1 FROM pgsched.execution WHERE "
                    "state = 'pending') OR EXISTS (SELECT 1 FROM "
                    "pgsched.execution WHERE state = 'running')",
                )
            ),
            args.timeout,
            f"the worker to drain {args.n} runs",
            alive=worker.dead,
            poll=common.poll_interval(args.n),
        )
        wall = done - started
        # CPU per run, worker and server (its start and warm-up included: a fresh worker is
        # what is timed); the server's includes this script's polls and background workers
        cpu = {
            "worker_cpu_us_per_run": round(common.cpu_seconds([worker.proc.pid]) * 1e6 / args.n, 1),
            "server_cpu_us_per_run": round(
                (common.cpu_seconds([postmaster]) - server_cpu) * 1e6 / args.n, 1
            ),
        }
        peak = sampler.stop()
        worker.stop()
        worker = None
        check = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE state = 'succeeded' AND attempt = 1), "
            "extract(epoch FROM min(started_at)), extract(epoch FROM max(finished_at)) "
            "FROM pgsched.execution_history WHERE id BETWEEN %s AND %s",
            (lo, hi),
        ).fetchone()
        assert check is not None
        rows, ok, first_start, last_finish = check
        if not rows == ok == args.n:
            raise BenchFailed(
                f"drain: {rows} runs in history, {ok} succeeded at the first attempt; "
                f"expected {args.n}"
            )
        finishes = [
            float(r[0])
            for r in conn.execute(
                "SELECT extract(epoch FROM finished_at) FROM pgsched.execution_history "
                "WHERE id BETWEEN %s AND %s",
                (lo, hi),
            )
        ]
        spread = common.tenths(finishes)
        steady = (args.n - 1) / max(float(last_finish) - float(first_start), 1e-9)
        config = args.config or f"worker --concurrency {args.concurrency}"
        metrics: dict[str, Any] = {
            "n": args.n,
            "seconds": round(wall, 3),
            "jobs_per_s": round(args.n / wall, 1),
            "steady_jobs_per_s": round(steady, 1),
            "peak_rss_mib": common.mib(peak),
            "history_rows_before": history_rows,
            "concurrency": args.concurrency,
            **cpu,
        }
        metrics.update({k: v for k, v in spread.items() if k != "jobs_per_s"})
        common.emit(SYSTEM, args.part, config, **metrics)
    finally:
        if worker is not None:
            worker.stop()
        conn.close()
        db.close()
        if not args.keep_logs:
            import shutil

            shutil.rmtree(logs, ignore_errors=True)


def part_latency(args: argparse.Namespace) -> None:
    db = prepare(args.dsn)
    logs = log_dir(args)
    worker: Proc | None = None
    conn = psycopg.connect(args.dsn, autocommit=True)
    try:
        worker = Proc(args.dsn, worker_args(args.concurrency), logs, "worker")
        wait_listening(conn, [worker], 1)
        warm_up(db, conn, [worker], 5)
        time.sleep(0.5)  # idle: the worker waits on LISTEN
        from psycopg.types.json import Jsonb

        sent = common.paced_producer_sync(
            lambda seq: scalar(
                conn, "SELECT pgsched.enqueue_v1('bench-stamp', %s)", (Jsonb({"seq": seq}),)
            ),
            args.rate,
            args.duration,
        )
        ids = {v[2]: (v[0], v[1]) for v in sent.values()}
        common.wait_until(
            lambda: not scalar(conn, "SELECT EXISTS (SELECT 1 FROM pgsched.execution)"),
            60,
            "the latency runs to finish",
            alive=worker.dead,
        )
        worker.stop()
        worker = None
        rows = conn.execute(
            "SELECT id, state, (result #>> '{}')::float8 FROM pgsched.execution_history "
            "WHERE id = ANY(%s)",
            (list(ids),),
        ).fetchall()
        if len(rows) != len(ids) or any(r[1] != "succeeded" for r in rows):
            raise BenchFailed(
                f"latency: {len(rows)} of {len(ids)} runs in history, "
                f"{sum(r[1] == 'succeeded' for r in rows)} succeeded"
            )
        from_call = [(r[2] - ids[r[0]][0]) * 1000 for r in rows]
        from_commit = [(r[2] - ids[r[0]][1]) * 1000 for r in rows]
        enqueue_ms = [(t1 - t0) * 1000 for t0, t1 in ids.values()]
        common.emit(
            SYSTEM,
            "latency",
            f"worker --concurrency {args.concurrency}, idle (LISTEN)",
            sent=len(ids),
            received=len(rows),
            rate=args.rate,
            duration=args.duration,
            enqueue_to_start=common.latency_summary(from_call),
            commit_to_start=common.latency_summary(from_commit),
            enqueue_call=common.latency_summary(enqueue_ms),
        )
    finally:
        if worker is not None:
            worker.stop()
        conn.close()
        db.close()
        if not args.keep_logs:
            import shutil

            shutil.rmtree(logs, ignore_errors=True)


def next_minute(after: datetime) -> datetime:
    return (after + timedelta(minutes=1)).replace(second=0, microsecond=0)


def part_burst(args: argparse.Namespace) -> None:
    db = prepare(args.dsn)
    logs = log_dir(args)
    procs: list[Proc] = []
    scheduler: Proc | None = None
    conn = psycopg.connect(args.dsn, autocommit=True)
    try:
        n = args.tasks
        # The coming minute, far enough ahead for the insert and the processes to start.
        # --due-second (the smoke run) fires every second instead, so as not to wait for
        # a minute to begin: the same code path, without up to a minute of idling.
        lead = 12 + n / 15000
        if args.due_second:
            expr = "* * * * * *"
            fire = (datetime.now(UTC) + timedelta(seconds=lead + 1)).replace(microsecond=0)
        else:
            expr = "* * * * *"
            fire = next_minute(datetime.now(UTC) + timedelta(seconds=lead))
        t = time.perf_counter()
        conn.execute(
            """
            INSERT INTO pgsched.task (name, schedule_kind, schedule_expr, timezone, handler_kind, python_target,
                                      next_fire_at, source)
            SELECT 'burst-' || g, 'cron', %s, 'UTC', 'python', 'noop_tasks:noop', %s, 'benchmark'
              FROM generate_series(1, %s) AS g""",
            (expr, fire, n),
        )
        conn.execute("VACUUM ANALYZE pgsched.task")
        insert_s = time.perf_counter() - t
        if (fire - datetime.now(UTC)).total_seconds() < 4:
            raise BenchFailed(
                f"burst: inserting {n} tasks took {insert_s:.1f} s, past the minute chosen"
            )
        scheduler = Proc(args.dsn, ["scheduler"], logs, "scheduler")
        procs.append(scheduler)
        sampler = common.RssSampler(scheduler.proc.pid)
        for i in range(args.workers):
            procs.append(Proc(args.dsn, worker_args(args.concurrency), logs, f"worker-{i}"))
        workers = procs[1:]
        wait_listening(conn, workers, args.workers)
        common.wait_until(
            lambda: bool(
                scalar(
                    conn,
                    "SELECT EXISTS (SELECT 1 FROM pgsched.leader l "
                    "JOIN pgsched.scheduler_node s ON s.epoch = l.epoch "
                    "AND s.role = 'leader')",
                )
            ),
            60,
            "the scheduler to lead",
            alive=scheduler.dead,
            poll=0.1,
        )
        if workers:
            warm_up(db, conn, workers, 4 * args.workers)
        idle_wait = (fire - datetime.now(UTC)).total_seconds() - 0.5
        if idle_wait < 0:
            raise BenchFailed("burst: the processes took longer to start than the lead allowed")
        time.sleep(idle_wait)
        rss_before = sampler.sample()
        common.index_only_polls(conn)
        # Every fire exists once no task is still due at the minute: the tick inserts a
        # batch's executions and moves its next_fire_at on in one transaction.
        common.wait_until(
            lambda: (
                not scalar(
                    conn,
                    "SELECT EXISTS (SELECT 1 FROM pgsched.task WHERE enabled "
                    "AND deleted_at IS NULL AND next_fire_at IS NOT NULL "
                    "AND next_fire_at <= %s)",
                    (fire,),
                )
            ),
            args.timeout,
            f"the scheduler to fire {n} tasks",
            poll=0.05,
            alive=lambda: next((d for p in procs if (d := p.dead())), None),
        )
        created_seen = (datetime.now(UTC) - fire).total_seconds()
        peak = sampler.stop()
        scheduler.stop()  # before the next minute fires them all again
        if not workers:  # the scheduler alone: the fires wait in the queue
            row = conn.execute(
                "SELECT count(*), count(DISTINCT task_id), extract(epoch FROM max(created_at) - %(m)s) "
                "FROM pgsched.execution WHERE trigger = 'schedule' AND scheduled_at = %(m)s",
                {"m": fire},
            ).fetchone()
            assert row is not None
            count, distinct, created_at_s = row
            if not count == distinct == n:
                raise BenchFailed(
                    f"burst: {count} runs queued for {fire:%H:%M} ({distinct} tasks); expected {n}"
                )
            common.emit(
                SYSTEM,
                "burst",
                f"{n:,} cron tasks due at once; the scheduler alone (no worker)",
                tasks=n,
                to_last_created_s=round(created_seen, 3),
                to_last_created_at_s=round(float(created_at_s), 3),
                scheduler_peak_rss_mib=common.mib(peak),
                scheduler_rss_before_mib=common.mib(rss_before),
                insert_tasks_s=round(insert_s, 2),
            )
            return
        common.wait_until(
            lambda: (
                not scalar(
                    conn,
                    "SELECT EXISTS (SELECT 1 FROM pgsched.execution WHERE "
                    "state = 'pending') OR EXISTS (SELECT 1 FROM pgsched.execution "
                    "WHERE state = 'running')",
                )
            ),
            args.timeout,
            f"{args.workers} workers to run {n} fires",
            poll=0.1,
            alive=lambda: next((d for p in workers if (d := p.dead())), None),
        )
        # Fires for later minutes (a scheduler still busy with this minute's when the next
        # one came) are counted apart; the figures are about this minute's fires.
        row = conn.execute(
            "SELECT count(*), count(*) FILTER (WHERE state = 'succeeded'), count(DISTINCT task_id), "
            "extract(epoch FROM max(created_at) - %(m)s), extract(epoch FROM max(started_at) - %(m)s), "
            "extract(epoch FROM min(started_at) - %(m)s), "
            "(SELECT count(*) FROM pgsched.execution_history WHERE trigger = 'schedule' AND scheduled_at <> %(m)s) "
            "FROM pgsched.execution_history WHERE trigger = 'schedule' AND scheduled_at = %(m)s",
            {"m": fire},
        ).fetchone()
        assert row is not None
        count, ok, distinct, created_at_s, last_started_s, first_started_s, later = row
        if not count == ok == distinct == n:
            raise BenchFailed(
                f"burst: {count} runs in history for {fire:%H:%M} ({ok} succeeded, {distinct} tasks); "
                f"expected {n}, one per task"
            )
        common.emit(
            SYSTEM,
            "burst",
            f"{n:,} cron tasks due at once; scheduler + {args.workers} workers "
            f"--concurrency {args.concurrency} (Python no-op)",
            tasks=n,
            to_last_created_s=round(created_seen, 3),
            to_last_created_at_s=round(float(created_at_s), 3),
            to_first_started_s=round(float(first_started_s), 3),
            to_last_started_s=round(float(last_started_s), 3),
            scheduler_peak_rss_mib=common.mib(peak),
            scheduler_rss_before_mib=common.mib(rss_before),
            insert_tasks_s=round(insert_s, 2),
            later_minute_fires=later,
        )
    finally:
        for p in procs:
            p.stop()
        conn.close()
        db.close()
        if not args.keep_logs:
            import shutil

            shutil.rmtree(logs, ignore_errors=True)


def part_claim_backlog(args: argparse.Namespace) -> None:
    """Claims on 'default' (and by a worker of 'default' and 'urgent') with and without
    ``--backlog`` ready executions on queue 'bulk', older than default's (the order an index
    without the queue would read them in). Each condition runs ``--claims`` claims of
    ``--limit`` on a fresh ``--n`` ready executions per queue (vacuumed), each claim timed
    alone on one autocommit connection (``TaskDefinitions.claim``, as the worker's claimer);
    what it claimed is deleted after it, untimed, as finishing would. The conditions
    alternate ``--rounds`` times (the backlog is inserted and deleted each round), so drift
    on a shared machine hits both. Also the buffers one claim touches (EXPLAIN ANALYZE)."""
    db = prepare(args.dsn)
    conn = psycopg.connect(args.dsn, autocommit=True)
    claimer = psycopg.connect(args.dsn, autocommit=True, row_factory=dict_row)
    try:
        conn.execute("""INSERT INTO pgsched.task (name, handler_kind, command, queue)
                        VALUES ('bench-urgent', 'shell', 'true', 'urgent'), ('bench-bulk', 'shell', 'true', 'bulk')""")
        worker = db.one(
            "worker_register",
            name="bench claimer",
            hostname="bench",
            pid=os.getpid(),
            queues=["default", "urgent"],
            tenants=None,
            concurrency=args.limit,
            heartbeat_interval=3600.0,
            host_time=None,
            round_trip=None,
        )
        assert worker is not None
        sets = {"one": ["default"], "two": ["default", "urgent"]}
        times: dict[tuple[str, bool], list[float]] = {
            (k, b): [] for k in sets for b in (False, True)
        }
        buffers: dict[tuple[str, bool], int] = {}

        def fill(task: str, queue: str, n: int, age: str) -> None:
            conn.execute(
                """INSERT INTO pgsched.execution (task_id, scheduled_at, run_at, queue)
                            SELECT t.id, now() - %(age)s::interval, now() - %(age)s::interval + g * interval '1 ms',
                                   %(queue)s
                              FROM pgsched.task t, generate_series(1, %(n)s) g WHERE t.name = %(task)s""",
                {"task": task, "queue": queue, "n": n, "age": age},
            )

        def measure(name: str, backlog: bool) -> None:
            conn.execute("DELETE FROM pgsched.execution WHERE queue <> 'bulk'")
            fill("bench-job", "default", args.n, "1 hour")
            fill("bench-urgent", "urgent", args.n, "30 minutes")
            conn.execute("VACUUM ANALYZE pgsched.execution")
            text = queries.get("execution_claim").text
            params = {
                "queues": sets[name],
                "tenants": None,
                "limit": args.limit,
                "worker_id": worker["id"],
                "now": None,
                "known_task_ids": [],
                "known_task_versions": [],
            }
            with claimer.transaction(force_rollback=True):
                plan = claimer.execute(
                    "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + text, params
                ).fetchone()
            top = next(iter(plan.values()))[0]["Plan"]
            buffers[(name, backlog)] = top["Shared Hit Blocks"] + top["Shared Read Blocks"]
            held = TaskDefinitions()
            session = Session(claimer)
            for _ in range(args.claims):
                t = time.perf_counter()
                rows = held.claim(
                    session, queues=sets[name], limit=args.limit, worker_id=worker["id"]
                )
                times[(name, backlog)].append(time.perf_counter() - t)
                if len(rows) != args.limit:
                    raise BenchFailed(
                        f"claim-backlog: a claim of {args.limit} on {sets[name]} got {len(rows)}"
                    )
                conn.execute(
                    "DELETE FROM pgsched.execution WHERE id = ANY(%s)", ([r["id"] for r in rows],)
                )

        for _ in range(args.rounds):
            for backlog in (False, True):
                conn.execute("DELETE FROM pgsched.execution WHERE queue = 'bulk'")
                if backlog:
                    fill("bench-bulk", "bulk", args.backlog, "1 day")
                for name in sets:
                    measure(name, backlog)
        ms = {key: statistics.median(v) * 1000 for key, v in times.items()}
    finally:
        claimer.close()
        conn.close()
        db.close()
    common.emit(
        SYSTEM,
        "backlog",
        f"claims of {args.limit} on 'default' (and 'default'+'urgent'), "
        f"{args.claims} per condition x {args.rounds} rounds, beside {args.backlog:,} ready on 'bulk'",
        without_ms=round(ms[("one", False)], 3),
        with_ms=round(ms[("one", True)], 3),
        ratio=round(ms[("one", True)] / ms[("one", False)], 3),
        two_without_ms=round(ms[("two", False)], 3),
        two_with_ms=round(ms[("two", True)], 3),
        two_ratio=round(ms[("two", True)] / ms[("two", False)], 3),
        buffers={f"{k}{'_backlog' if b else ''}": v for (k, b), v in buffers.items()},
        backlog=args.backlog,
        claims=args.claims,
        limit=args.limit,
    )


def part_fill_history(args: argparse.Namespace) -> None:
    """``--rows`` finished runs of ``bench-job`` spread evenly over the daily partitions of
    the last ``--days`` days, today included (so today's partition, where new finishes go,
    holds its share too)."""
    db = prepare(args.dsn)
    try:
        with psycopg.connect(args.dsn, autocommit=True) as conn:
            today = datetime.now(UTC).date()
            conn.execute(
                "SELECT pgsched_internal.partition_ensure_v1(%s, %s)",
                (today - timedelta(days=args.days - 1), args.days + 4),
            )
            task_id = scalar(
                conn, "SELECT id FROM pgsched.task WHERE name = 'bench-job' AND deleted_at IS NULL"
            )
            midnight = datetime.combine(today, datetime.min.time(), UTC)
            t = time.perf_counter()
            per_day, extra = divmod(args.rows, args.days)
            lo = 1
            for d in range(args.days):  # the oldest day first; today last
                day = midnight - timedelta(days=args.days - 1 - d)
                # a whole past day, or today from midnight to a minute ago
                span = (
                    86400.0
                    if d < args.days - 1
                    else max((datetime.now(UTC) - midnight).total_seconds() - 60, 1)
                )
                count = per_day + (1 if d < extra else 0)
                hi = lo + count - 1
                conn.execute(
                    """
                    INSERT INTO pgsched.execution_history (id, tenant, task_id, scheduled_at, run_at, state, trigger,
                        priority, queue, params, attempt, max_attempts, worker_id, created_at, started_at,
                        finished_at, result)
                    SELECT g, 'default', %(task)s, f - interval '2 ms', f - interval '2 ms', 'succeeded', 'api',
                           5, 'default', jsonb_build_object('seq', g), 1, 1, 1, f - interval '2 ms',
                           f - interval '1 ms', f, NULL
                      FROM generate_series(%(lo)s::bigint, %(hi)s::bigint) AS g,
                           LATERAL (SELECT %(day)s::timestamptz
                                           + (g - %(lo)s) * (%(span)s::float8 / %(count)s) * interval '1 second'
                                           AS f) x
                """,
                    {"task": task_id, "lo": lo, "hi": hi, "day": day, "span": span, "count": count},
                )
                lo = hi + 1
            conn.execute(
                "SELECT setval('pgsched.execution_id_seq', greatest(%s, "
                "(SELECT last_value FROM pgsched.execution_id_seq)))",
                (args.rows + 1,),
            )
            conn.execute("VACUUM ANALYZE pgsched.execution_history")
            elapsed = time.perf_counter() - t
            rows = scalar(conn, "SELECT count(*) FROM pgsched.execution_history")
            default_rows = scalar(conn, "SELECT count(*) FROM pgsched.execution_history_default")
            size = int(
                scalar(
                    conn,
                    "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_inherits i "
                    "JOIN pg_class c ON c.oid = i.inhrelid "
                    "WHERE i.inhparent = 'pgsched.execution_history'::regclass",
                )
            )
            today_rows = scalar(
                conn,
                "SELECT count(*) FROM pgsched.execution_history WHERE finished_at >= %s",
                (midnight,),
            )
    finally:
        db.close()
    if rows < args.rows or default_rows:
        raise BenchFailed(
            f"fill-history: {rows} rows in history ({default_rows} in the DEFAULT partition); "
            f"expected {args.rows} in daily partitions"
        )
    common.log(
        f"history: {rows:,} rows over {args.days} daily partitions ({today_rows:,} today), "
        f"{size / 2**30:.2f} GiB with indexes, in {elapsed:.0f} s"
    )
    common.emit(
        SYSTEM,
        "fill_history",
        f"{args.rows:,} rows",
        rows=rows,
        today_rows=today_rows,
        gib=round(size / 2**30, 2),
        seconds=round(elapsed, 1),
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "cmd",
        choices=[
            "enqueue-bulk",
            "enqueue-single",
            "drain",
            "latency",
            "burst",
            "fill-history",
            "claim-backlog",
        ],
    )
    p.add_argument("--dsn", required=True)
    p.add_argument("--n", type=int, default=20000)
    p.add_argument("--chunk", type=int, default=1000)
    p.add_argument("--api", choices=["sql", "python"], default="sql")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--poll-interval", type=float, default=None)
    p.add_argument("--worker-log-level", default=None)
    p.add_argument(
        "--python-isolation",
        choices=["process", "thread"],
        default=None,
        help="drain: the worker's --python-isolation (default: the worker's default)",
    )
    p.add_argument(
        "--task",
        default="bench-job",
        help="drain: the Python task drained (bench-job: no-op; bench-sleep: 10 ms)",
    )
    p.add_argument(
        "--part", dest="part_name", default="drain", help="part name to report a drain under"
    )
    p.add_argument("--config", default=None, help="config label to report a drain under")
    p.add_argument("--rate", type=float, default=50)
    p.add_argument("--duration", type=float, default=20)
    p.add_argument("--tasks", type=int, default=100_000)
    p.add_argument("--workers", type=int, default=4)
    p.add_argument(
        "--due-second",
        action="store_true",
        help="burst: tasks fire every second, due at a second soon (no wait for the next minute)",
    )
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--days", type=int, default=10)
    p.add_argument(
        "--backlog", type=int, default=100_000, help="claim-backlog: ready executions on 'bulk'"
    )
    p.add_argument(
        "--claims",
        type=int,
        default=200,
        help="claim-backlog: claims timed per condition and round",
    )
    p.add_argument("--limit", type=int, default=10, help="claim-backlog: executions per claim")
    p.add_argument(
        "--rounds", type=int, default=2, help="claim-backlog: times the conditions alternate"
    )
    p.add_argument("--timeout", type=float, default=600)
    p.add_argument("--keep-logs", metavar="DIR", help="keep the pgsched processes' logs in DIR")
    args = p.parse_args()
    args.part = args.part_name
    warnings.simplefilter("ignore")
    fn = {
        "enqueue-bulk": part_enqueue_bulk,
        "enqueue-single": part_enqueue_single,
        "drain": part_drain,
        "latency": part_latency,
        "burst": part_burst,
        "fill-history": part_fill_history,
        "claim-backlog": part_claim_backlog,
    }[args.cmd]
    common.main_guard(lambda: fn(args))


if __name__ == "__main__":
    main()

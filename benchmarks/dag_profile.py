#!/usr/bin/env python3
"""Where a DAG node's scheduling time goes, next to a plain execution's. Companion of
``dag_overhead.py`` (same server handling, same layered DAG, same no-op handler).

    python benchmarks/dag_profile.py [--dsn DSN] [--nodes 1000] [--width 10] [--concurrency 4]

Three looks, each on a fresh database:

1. serial: this script plays one worker slot in-process, with the worker's own named
   queries: claim one execution (``execution_claim``), then end it in one transaction as
   ``Worker._store_outcome`` does for a success (``execution_finish`` +
   ``execution_attempt_insert``, committed). Nothing runs concurrently, so the times are the
   SQL cost of claiming and finishing a node, without waits. With ``track_functions = all``
   (needs a superuser; the embedded server's is one) the engine's functions are timed by
   PostgreSQL itself (``pg_stat_user_functions``).
2. explain: ``EXPLAIN (ANALYZE, BUFFERS)`` of one ``execution_finish`` of a plain execution
   and of a DAG node in the middle of the run (rolled back), to see the trigger's share.
3. concurrent: the real workloads of ``dag_overhead.py`` (a ``pgsched worker`` process),
   while ``pg_stat_activity`` is sampled every ``--sample-ms``: how many of the worker's
   pool connections are, on average, running on CPU, waiting for a lock, for I/O (WAL), or
   idle in a transaction (waiting for the worker's Python), and which statements wait.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import dag_overhead as bench
import noop_tasks
import psycopg
from psycopg.rows import dict_row

from pgsched import dag as dag_module
from pgsched import migrate as migrations
from pgsched import queries
from pgsched.db import Database
from pgsched.stores import dagruns, dags
from pgsched.worker.claims import TaskDefinitions

ENGINE_FUNCTIONS = (
    "dag_execution_finished_v1",
    "dag_propagate_v1",
    "dag_enqueue_v1",
    "dag_decide_v1",
    "dag_close_v1",
    "dag_condition_v1",
    "execution_inserted_v1",
)


def ms(values: list[float]) -> str:
    values = sorted(values)
    p90, p99 = values[int(0.9 * (len(values) - 1))], values[int(0.99 * (len(values) - 1))]
    return (
        f"median {statistics.median(values) * 1000:.2f}, mean {statistics.fmean(values) * 1000:.2f}, "
        f"p90 {p90 * 1000:.2f}, p99 {p99 * 1000:.2f}"
    )


def fresh(server: bench.Server, tag: str, track_functions: bool) -> tuple[str, Database]:
    dsn = server.create_database(tag)
    if track_functions:
        name = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
        server.admin.execute(f"ALTER DATABASE \"{name}\" SET track_functions = 'all'")
    migrations.migrate(dsn)
    db = Database.connect(dsn, max_size=2, application_name="pgsched profile")
    today = datetime.now(UTC).date()
    db.many("partition_ensure", from_day=today - timedelta(days=1), days=5)
    noop_tasks.app.sync(db)
    return dsn, db


# --- 1 and 2: serial, in-process --------------------------------------------------------


def play_worker(db: Database, limit: int, explain_at: int | None = None) -> dict[str, Any]:
    """Claim and finish executions one at a time until none is ready; time both steps."""
    registered = db.one(
        "worker_register",
        name="profile",
        hostname="profile",
        pid=0,
        queues=["default"],
        tenants=None,
        concurrency=1,
        heartbeat_interval=3600.0,
        host_time=None,
        round_trip=None,
    )
    assert registered is not None
    worker = registered["id"]
    claims, finishes, explain = [], [], None
    parts: dict[str, list[float]] = {"finish statement": [], "attempt insert": [], "commit": []}
    done = 0
    while done < limit:
        t = time.perf_counter()
        rows = TaskDefinitions().claim(db, queues=["default"], limit=1, worker_id=worker)
        claims.append(time.perf_counter() - t)
        if not rows:
            break
        row = rows[0]
        finished = datetime.now(UTC)
        params = {
            "id": row["id"],
            "lease_id": row["lease_id"],
            "state": "succeeded",
            "finished_at": finished,
            "exit_code": None,
            "error": None,
            "result": None,
        }
        if explain_at is not None and done == explain_at:
            explain = explain_finish(db, params)
        t = time.perf_counter()
        with db.transaction() as tx:
            assert tx.exec("execution_finish", **params) == 1
            t1 = time.perf_counter()
            tx.exec(
                "execution_attempt_insert",
                tenant=row["tenant"],
                state="succeeded",
                started_at=row["started_at"],
                finished_at=finished,
                worker_id=worker,
                attempt=row["attempt"],
                exit_code=None,
                error=None,
                error_type=None,
                next_run_at=None,
                budget_delay_seconds=None,
                id=row["id"],
                lease_id=row["lease_id"],
            )
            t2 = time.perf_counter()
        t3 = time.perf_counter()
        finishes.append(t3 - t)
        parts["finish statement"].append(t1 - t)
        parts["attempt insert"].append(t2 - t1)
        parts["commit"].append(t3 - t2)
        done += 1
    return {
        "claims": claims,
        "finishes": finishes,
        "done": done,
        "explain": explain,
        "parts": parts,
    }


def explain_finish(db: Database, params: dict[str, Any]) -> str:
    """EXPLAIN ANALYZE of execution_finish with these params, rolled back."""
    text = queries.get("execution_finish").text
    with db.pool.connection() as conn:
        cur = psycopg.ClientCursor(conn)
        try:
            cur.execute("BEGIN")
            cur.execute("EXPLAIN (ANALYZE, BUFFERS, TIMING) " + text, params)
            plan = "\n".join(
                r[0] if isinstance(r, tuple) else next(iter(r.values())) for r in cur.fetchall()
            )
        finally:
            cur.execute("ROLLBACK")
    return plan


def serial(server: bench.Server, args: argparse.Namespace) -> None:
    track = bool(
        bench.scalar(server.admin, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
    )
    n = args.nodes
    print(f"## 1. serial: one slot played in-process, {n} executions each (times in ms)\n")
    dsn, db = fresh(server, "serial_plain", track)
    try:
        with db.transaction() as tx:
            tx.conn.execute(
                "INSERT INTO pgsched.run_request (task) SELECT 'bench-noop' FROM generate_series(1, %s)",
                [n],
            )
        plain = play_worker(db, n, explain_at=n // 2)
    finally:
        db.close()
        server.drop_database(dsn)
    dsn, db = fresh(server, "serial_dag", track)
    try:
        dags.apply(db, dag_module.parse(bench.dag_definition(n, args.width)))
        with psycopg.connect(dsn, autocommit=True) as conn:
            # Baseline of the function counters (apply and migrate do not call the engine).
            before = function_stats(conn) if track else {}
        t = time.perf_counter()
        run_id = dagruns.trigger(db, bench.DAG_NAME)
        trigger = time.perf_counter() - t
        dag = play_worker(db, n, explain_at=n // 2)
        with db.transaction() as tx:
            run = tx.conn.execute(
                "SELECT state, remaining FROM pgsched.dag_run WHERE id = %s", [run_id]
            ).fetchone()
        db.close()  # backends exit: their function statistics are flushed
        time.sleep(0.3)
        with psycopg.connect(dsn, autocommit=True) as conn:
            after = function_stats(conn) if track else {}
    finally:
        if not db.pool.closed:
            db.close()
        server.drop_database(dsn)
    if plain["done"] != n or dag["done"] != n or run is None or run["state"] != "succeeded":
        raise bench.BenchError(
            f"serial: plain {plain['done']}, dag {dag['done']} of {n} done; run {run}"
        )
    print(f"- plain claim:  {ms(plain['claims'])}")
    print(f"- DAG claim:    {ms(dag['claims'])}")
    print(f"- plain finish: {ms(plain['finishes'])} (execution_finish + attempt row + commit)")
    print(
        f"- DAG finish:   {ms(dag['finishes'])} (the same; the trigger settles the node and its downstream)"
    )
    for part in plain["parts"]:
        print(f"    - {part}: plain {ms(plain['parts'][part])}; DAG {ms(dag['parts'][part])}")
    added = statistics.fmean(dag["finishes"]) - statistics.fmean(plain["finishes"])
    print(
        f"- DAG trigger statement ({n} node rows + roots): {trigger * 1000:.1f} ms once = "
        f"{trigger / n * 1000:.3f} ms per node"
    )
    per_node = {
        k: 1000 * (statistics.fmean(r["claims"]) + statistics.fmean(r["finishes"]))
        for k, r in (("plain", plain), ("dag", dag))
    }
    print(
        f"- serial cost per node, claim + finish: plain {per_node['plain']:.2f} ms, DAG {per_node['dag']:.2f} ms "
        f"({per_node['dag'] / per_node['plain']:.2f}×) "
        f"(+{added * 1000:.2f} ms in the finishing transaction)"
    )
    if track:
        print(
            "\nEngine functions over the whole serial DAG run (pg_stat_user_functions, track_functions = all):\n"
        )
        print("| function | calls | total ms | self ms | total per node ms |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for name in ENGINE_FUNCTIONS:
            a, b = (
                after.get(name),
                before.get(name, {"calls": 0, "total_time": 0.0, "self_time": 0.0}),
            )
            if a is None:
                continue
            calls = a["calls"] - b["calls"]
            total = a["total_time"] - b["total_time"]
            self_ = a["self_time"] - b["self_time"]
            print(f"| {name} | {calls} | {total:.1f} | {self_:.1f} | {total / n:.3f} |")
    else:
        print("\n(track_functions needs a superuser: function timings skipped)")
    print(
        "\n## 2. EXPLAIN ANALYZE of execution_finish, the node in the middle of the run (rolled back)\n"
    )
    for label, result in (("plain execution", plain), ("DAG node", dag)):
        lines = [
            ln
            for ln in (result["explain"] or "").splitlines()
            if "Trigger" in ln or "Execution Time" in ln or "Planning Time" in ln
        ]
        print(f"{label}:")
        for ln in lines:
            print(f"    {ln.strip()}")
    print()


def function_stats(conn: psycopg.Connection) -> dict[str, dict[str, float]]:
    rows = conn.execute(
        "SELECT funcname, calls, total_time, self_time FROM pg_stat_user_functions "
        "WHERE schemaname IN ('pgsched', 'pgsched_internal')"
    ).fetchall()
    return {r[0]: {"calls": r[1], "total_time": r[2], "self_time": r[3]} for r in rows}


# --- 3: concurrent, sampled --------------------------------------------------------------


class Sampler(threading.Thread):
    """Samples pg_stat_activity of the benchmark databases: what each worker pool
    connection (application_name 'pgsched worker') is doing."""

    def __init__(self, dsn: str, every: float):
        super().__init__(daemon=True)
        self.conn = psycopg.connect(dsn, autocommit=True, row_factory=dict_row)
        self.every = every
        self.stop = threading.Event()
        self.samples = 0
        self.kinds: collections.Counter[str] = collections.Counter()
        self.waits: collections.Counter[tuple[str, str]] = collections.Counter()

    def run(self) -> None:
        sql = (
            "SELECT state, wait_event_type, wait_event, left(regexp_replace(query, '\\s+', ' ', 'g'), 60) AS q "
            "FROM pg_stat_activity WHERE datname LIKE 'pgsched_bench_%' AND application_name = 'pgsched worker' "
            "AND pid <> pg_backend_pid()"
        )
        while not self.stop.is_set():
            rows = self.conn.execute(sql).fetchall()
            self.samples += 1
            for r in rows:
                if r["state"] == "active":
                    kind = (
                        f"active, waiting: {r['wait_event_type']}"
                        if r["wait_event_type"]
                        else "active, on CPU"
                    )
                    if r["wait_event_type"]:
                        self.waits[(f"{r['wait_event_type']}:{r['wait_event']}", r["q"])] += 1
                else:
                    kind = r["state"] or "unknown"
                    if kind == "idle in transaction":  # what it last ran (and may hold locks of)
                        self.waits[("idle in transaction after", r["q"])] += 1
                self.kinds[kind] += 1
            time.sleep(self.every)
        self.conn.close()


class SampledBench(bench.Bench):
    sampler: Sampler | None = None

    def _sampled(self, call: Any, *a: Any) -> Any:
        self.sampler = Sampler(self.server.dsn, self.args.sample_ms / 1000.0)
        self.sampler.start()
        try:
            return call(*a)
        finally:
            self.sampler.stop.set()
            self.sampler.join()

    def _plain(self, *a: Any) -> Any:
        return self._sampled(super()._plain, *a)

    def _dag(self, *a: Any) -> Any:
        return self._sampled(super()._dag, *a)


def concurrent(server: bench.Server, args: argparse.Namespace, logs: Path) -> None:
    print(
        f"## 3. concurrent: a real `pgsched worker --concurrency {args.concurrency}`, pg_stat_activity sampled "
        f"every {args.sample_ms:g} ms\n"
    )
    args.poll_ms, args.timeout, args.breakdown, args.keep_databases = 5.0, 600.0, True, False
    if args.synchronous_commit != "on":
        create = server.create_database

        def create_with_setting(tag: str) -> str:
            dsn = create(tag)
            name = psycopg.conninfo.conninfo_to_dict(dsn)["dbname"]
            server.admin.execute(
                f'ALTER DATABASE "{name}" SET synchronous_commit = {args.synchronous_commit}'
            )
            return dsn

        server.create_database = create_with_setting  # type: ignore[method-assign]
        print(f"(synchronous_commit = {args.synchronous_commit} on these databases)\n")
    runner = SampledBench(args, server, logs)
    print("Average number of the worker's pool connections in each state during the timed span:\n")
    print(
        "| workload | wall s | active, on CPU | waiting: Lock | waiting: LWLock | waiting: IO | other waits | "
        "idle in transaction | idle |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    tops = {}
    for key, label in bench.WORKLOADS[1:]:
        result = runner.run(key, 1)
        s = runner.sampler
        assert s is not None
        avg = {k: v / max(s.samples, 1) for k, v in s.kinds.items()}
        other = sum(
            v
            for k, v in avg.items()
            if k.startswith("active, waiting")
            and not any(k.endswith(x) for x in (": Lock", ": LWLock", ": IO"))
        )
        print(
            f"| {label} | {result.wall:.2f} | {avg.get('active, on CPU', 0):.2f} | "
            f"{avg.get('active, waiting: Lock', 0):.2f} | {avg.get('active, waiting: LWLock', 0):.2f} | "
            f"{avg.get('active, waiting: IO', 0):.2f} | {other:.2f} | {avg.get('idle in transaction', 0):.2f} | "
            f"{avg.get('idle', 0):.2f} |"
        )
        tops[label] = (s.waits.most_common(7), s.samples)
        if key == "dag":
            print(
                "\nDAG node timeline (ms, median / p90): "
                + "; ".join(
                    f"{k.replace('_', ' ')} {m:.1f} / {p:.1f}"
                    for k, (m, p, _) in result.extra["breakdown"].items()
                )
            )
    for label, (waits, samples) in tops.items():
        print(
            f"\nTop waits, {label} ({samples} samples; share of samples with a connection in that wait):"
        )
        for (event, query), count in waits:
            print(f"    {count / samples:5.1%}  {event:28s} {query}")
    print()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dsn")
    p.add_argument("--nodes", type=int, default=1000)
    p.add_argument("--width", type=int, default=10)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--sample-ms", type=float, default=2.0)
    p.add_argument(
        "--synchronous-commit",
        choices=["on", "off"],
        default="on",
        help="section 3 only: the databases' synchronous_commit (off shows what the WAL flush costs)",
    )
    p.add_argument("--skip", choices=["serial", "concurrent"], action="append", default=[])
    args = p.parse_args()
    logs = Path(tempfile.mkdtemp(prefix="pgsched-profile-logs-"))
    server = None
    failed = True
    try:
        server = bench.Server(args.dsn)
        print(
            f"# DAG overhead profile: {args.nodes} nodes, layers of {args.width}; PostgreSQL {server.version}\n"
        )
        if "serial" not in args.skip:
            serial(server, args)
        if "concurrent" not in args.skip:
            concurrent(server, args, logs)
        failed = False
        return 0
    except (bench.BenchError, psycopg.Error, bench.PgschedError) as exc:
        print(f"FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        if server is not None:
            server.close()
        if failed:
            print(f"worker logs kept in {logs}", file=sys.stderr)
        else:
            shutil.rmtree(logs, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

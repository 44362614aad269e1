"""pgsched's limits and fair share (issue 18) for ``benchmarks/run.py``: one measurement per
call, on a database run.py made for it (empty; migrated here), results as JSON lines.

    python benchmarks/bench/pgsched_limits.py PART --dsn DSN [options]

Parts:

- ``fairness``: tenants ``a`` and ``b`` (made with the tenants' store, weight 1, quotas
  NULL so that none binds) and ``--workers`` real ``pgsched worker --tenant a --tenant b``
  processes. Phase 1: ``b`` alone, one ``bench-job`` every 100 ms (``--interval``) for
  ``--seconds``. Phase 2: ``a`` floods ``--rows`` ready executions (``tasks.enqueue_many``,
  chunks of ``--chunk``, as fast as one connection goes), then ``b`` again every 100 ms
  while the workers drain ``a``. Schedule-to-start of each of ``b``'s runs is
  ``started_at - run_at`` of its history row (the database's clock; ``started_at`` is when
  a worker's slot started it). Reports both phases' p50/p99 (ms), the ratio of the p99s,
  how many of ``a``'s runs were still ready when ``b``'s last run was enqueued (the two
  overlapped only if some were), and ``a``'s drain rate.
- ``limits-drain``: the drain of ``pgsched_bench.py drain`` (the same no-op ``bench-job``
  rows, one fresh worker) with ``--limits off``, or ``on``: limits configured that do not
  bind, set with plain SQL on migration 0021's columns: the tenant's quotas, its queue
  ``default``'s ``max_running`` and rate limit, the task's ``max_running``, and a
  concurrency key template ``job:{seq}`` rendered per row with a high ``key_max_running``.

Exit status 1 when a measurement failed: nothing is printed for it.
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import sys
import time
import warnings
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import common
import pgsched_bench as bench  # sets up the paths to pgsched and noop_tasks
import psycopg

from pgsched.stores import tasks, tenants

SYSTEM = "pgsched"
TENANTS = ("a", "b")
BenchFailed = common.BenchFailed


# --- fairness ---------------------------------------------------------------------------


def make_tenants(db: bench.Database, conn: psycopg.Connection[Any]) -> None:
    """Tenants ``a`` and ``b`` with no quota that binds (a new tenant's defaults, 100 at once
    and 10,000 starts an hour, would hold back a 100,000-row flood) and the benchmark's
    tasks in each."""
    for name in TENANTS:
        tenants.create(db, name)
        for spec in bench.noop_tasks.app.specs.values():
            tasks.create(db, dataclasses.replace(spec, tenant=name), if_absent=True)
    conn.execute(
        "UPDATE pgsched.tenant SET max_running = NULL, max_starts_per_hour = NULL, "
        "max_compute_minutes_per_month = NULL, max_log_bytes = NULL WHERE name = ANY(%s)",
        (list(TENANTS),),
    )


def paced_b(
    db: bench.Database, seconds: float, interval: float, first_seq: int
) -> dict[int, tuple[float, float]]:
    """Tenant b's runs, one every ``interval`` s for ``seconds`` s (open loop):
    {execution id: (wall time before the enqueue call, wall time after it returned)}, s."""
    sent = common.paced_producer_sync(
        lambda seq: (
            tasks.enqueue(
                db, "bench-job", params={"seq": first_seq + seq}, tenant="b", how="api"
            ).execution_id
        ),
        1.0 / interval,
        seconds,
    )
    return {v[2]: (v[0], v[1]) for v in sent.values()}


def schedule_to_start_ms(
    conn: psycopg.Connection[Any], sent: dict[int, tuple[float, float]]
) -> tuple[list[float], dict[str, dict[str, float]]]:
    """b's schedule-to-start (ms) and where it went, hop by hop, each summarised:
    ``enqueue`` from run_at (the enqueue's now()) to the enqueue call's return (its commit
    and the reply), ``wake`` from that return to the claim's now() (notification, the
    worker's threads, the claim's start). The clocks are one machine's."""
    ids = list(sent)
    rows = conn.execute(
        "SELECT id, state, extract(epoch FROM started_at - run_at) * 1000, "
        "extract(epoch FROM run_at), extract(epoch FROM started_at) "
        "FROM pgsched.execution_history WHERE id = ANY(%s)",
        (ids,),
    ).fetchall()
    if len(rows) != len(ids) or any(r[1] != "succeeded" for r in rows):
        raise BenchFailed(
            f"fairness: {len(rows)} of b's {len(ids)} runs in history, "
            f"{sum(r[1] == 'succeeded' for r in rows)} succeeded"
        )
    enqueue = [(sent[r[0]][1] - float(r[3])) * 1000 for r in rows]
    wake = [(float(r[4]) - sent[r[0]][1]) * 1000 for r in rows]
    hops = {"enqueue": common.latency_summary(enqueue), "wake": common.latency_summary(wake)}
    return [float(r[2]) for r in rows], hops


def flood(db: bench.Database, n: int, chunk: int) -> list[int]:
    """Tenant a's ``n`` ready runs, ``chunk`` per statement: their ids."""
    ids: list[int] = []
    for start in range(0, n, chunk):
        k = min(chunk, n - start)
        ids += tasks.enqueue_many(
            db, "bench-job", [{"seq": start + i} for i in range(k)], tenant="a"
        )
    if len(ids) != n:
        raise BenchFailed(f"fairness: enqueue_many returned {len(ids)} ids for {n} runs")
    return ids


def drained(conn: psycopg.Connection[Any]) -> bool:
    return not bench.scalar(
        conn,
        "SELECT EXISTS (SELECT 1 FROM pgsched.execution WHERE state = 'pending') "
        "OR EXISTS (SELECT 1 FROM pgsched.execution WHERE state = 'running')",
    )


def part_fairness(args: argparse.Namespace) -> None:
    db = bench.prepare(args.dsn)
    logs = bench.log_dir(args)
    workers: list[bench.Proc] = []
    conn = psycopg.connect(args.dsn, autocommit=True)

    def dead() -> str | None:
        return next((d for p in workers if (d := p.dead())), None)

    try:
        make_tenants(db, conn)
        # --a-rate bounds a's drain (the machine keeps headroom, a keeps its backlog); none
        # is set otherwise, also where a run before this one on the same database set it
        conn.execute(
            "INSERT INTO pgsched.queue AS q (tenant, name, rate_limit, rate_period_seconds) "
            "VALUES ('a', 'default', %(rate)s, %(period)s) ON CONFLICT (tenant, name) "
            "DO UPDATE SET rate_limit = %(rate)s, rate_period_seconds = %(period)s",
            {"rate": args.a_rate, "period": 1 if args.a_rate else None},
        )
        extra = ["--tenant", "a", "--tenant", "b"]
        if args.prefetch is not None:
            extra += ["--prefetch", str(args.prefetch)]
        for i in range(args.workers):
            workers.append(
                bench.Proc(args.dsn, bench.worker_args(args.concurrency, extra), logs, f"worker{i}")
            )
        bench.wait_listening(conn, workers, args.workers)
        for name in TENANTS:
            tasks.enqueue_many(db, "bench-warmup", [{} for _ in range(10)], tenant=name)
        common.wait_until(lambda: drained(conn), 60, "the warm-up runs", alive=dead)
        time.sleep(0.5)  # idle: the workers wait on LISTEN, as a quiet fleet does

        b_alone = paced_b(db, args.seconds, args.interval, first_seq=0)
        common.wait_until(lambda: drained(conn), 60, "b's runs", alive=dead)
        alone, alone_hops = schedule_to_start_ms(conn, b_alone)

        flood_started = time.perf_counter()
        a_ids = flood(db, args.rows, args.chunk)
        flood_s = time.perf_counter() - flood_started
        if args.analyze_after_flood:  # a diagnosis: what autovacuum does a minute later
            conn.execute("ANALYZE pgsched.execution")
        b_ids = paced_b(db, args.seconds, args.interval, first_seq=10**6)
        a_left = bench.scalar(
            conn,
            "SELECT count(*) FROM pgsched.execution WHERE tenant = 'a' AND state = 'pending'",
        )
        done = common.wait_until(
            lambda: drained(conn),
            args.timeout,
            f"the workers to drain a's {args.rows} runs",
            alive=dead,
            poll=common.poll_interval(args.rows),
        )
        loaded, loaded_hops = schedule_to_start_ms(conn, b_ids)
        count = bench.scalar(
            conn,
            "SELECT count(*) FROM pgsched.execution_history WHERE tenant = 'a' "
            "AND state = 'succeeded' AND attempt = 1 AND id BETWEEN %s AND %s",
            (min(a_ids), max(a_ids)),
        )
        if count != args.rows:
            raise BenchFailed(f"fairness: {count} of a's {args.rows} runs succeeded once")
        one, two = common.latency_summary(alone), common.latency_summary(loaded)
        common.emit(
            SYSTEM,
            "fairness",
            f"{args.workers} workers --concurrency {args.concurrency} --tenant a --tenant b"
            + ("" if args.prefetch is None else f" --prefetch {args.prefetch}")
            + (", ANALYZE after the flood" if args.analyze_after_flood else "")
            + (f", a's queue at {args.a_rate:,} starts/s" if args.a_rate else "")
            + "; "
            f"b every {args.interval * 1000:g} ms for {args.seconds:g} s; a floods {args.rows:,}",
            alone=one,
            loaded=two,
            alone_hops=alone_hops,
            loaded_hops=loaded_hops,
            p99_ratio=round(two["p99_ms"] / max(one["p99_ms"], 1e-3), 2),
            b_runs=len(b_ids),
            a_rows=args.rows,
            a_left_at_b_end=int(a_left),
            flood_insert_s=round(flood_s, 2),
            a_jobs_per_s=round(args.rows / (done - flood_started), 1),
        )
    finally:
        for w in workers:
            w.stop()
        conn.close()
        db.close()
        if not args.keep_logs:
            shutil.rmtree(logs, ignore_errors=True)


# --- the drain with limits --------------------------------------------------------------

# Each limit alone (``--limits queue,key``: some of them, to see what each costs); ``on``
# is all of them. 'default' kept no quotas through migration 0021; high ones here.
LIMITS_SQL = {
    "tenant": "UPDATE pgsched.tenant SET max_running = 100000, max_starts_per_hour = 100000000, "
    "max_compute_minutes_per_month = 100000000, max_log_bytes = 1000000000000 "
    "WHERE name = 'default'",
    "queue": "INSERT INTO pgsched.queue AS q (tenant, name, max_running) "
    "VALUES ('default', 'default', 10000) "
    "ON CONFLICT (tenant, name) DO UPDATE SET max_running = 10000",
    "rate": "INSERT INTO pgsched.queue AS q (tenant, name, rate_limit, rate_period_seconds) "
    "VALUES ('default', 'default', %(rate)s, %(period)s) ON CONFLICT (tenant, name) "
    "DO UPDATE SET rate_limit = %(rate)s, rate_period_seconds = %(period)s",
    "task": "UPDATE pgsched.task SET max_running = 10000 WHERE name = 'bench-job'",
    "key": "UPDATE pgsched.task SET concurrency_key = 'job:{seq}', key_max_running = 1000 "
    "WHERE name = 'bench-job'",
}
LIMITS_SAID = {
    "tenant": "tenant quotas 100,000 at once",
    "queue": "queue max_running 10,000",
    "rate": "queue rate limit {rate:,}/{period:g} s",
    "task": "task max_running 10,000",
    "key": "key 'job:{{seq}}' key_max_running 1,000",
}


def chosen_limits(text: str) -> list[str]:
    """``--limits``: off, on (every one) or a comma-separated subset of LIMITS_SQL."""
    if text == "off":
        return []
    if text == "on":
        return list(LIMITS_SQL)
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in names if t not in LIMITS_SQL]
    if bad or not names:
        raise BenchFailed(f"--limits {text!r}: must be on, off or some of {', '.join(LIMITS_SQL)}")
    return names


def part_limits_drain(args: argparse.Namespace) -> None:
    """The drain part itself, on a database whose limits are set first (the key template
    must be there before the rows are enqueued: the enqueue renders it)."""
    names = chosen_limits(args.limits)
    if names:
        db = bench.prepare(args.dsn)
        values = {"rate": args.rate_limit, "period": args.rate_period}
        try:
            with psycopg.connect(args.dsn, autocommit=True) as conn:
                for name in names:
                    conn.execute(LIMITS_SQL[name], values)
        finally:
            db.close()
        args.config = "limits configured, none binding: " + "; ".join(
            LIMITS_SAID[name].format(**values) for name in names
        )
    else:
        args.config = "no limits (as migration 0021 leaves 'default')"
    args.part = "limits"
    bench.part_drain(args)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("cmd", choices=["fairness", "limits-drain"])
    p.add_argument("--dsn", required=True)
    p.add_argument("--rows", type=int, default=100_000, help="fairness: a's flood")
    p.add_argument("--seconds", type=float, default=20, help="fairness: each phase of b")
    p.add_argument("--interval", type=float, default=0.1, help="fairness: s between b's runs")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument(
        "--prefetch",
        type=int,
        default=None,
        help="fairness: the workers' --prefetch (default theirs)",
    )
    p.add_argument(
        "--analyze-after-flood",
        action="store_true",
        help="fairness: ANALYZE the executions once a's flood is in (default: leave it to "
        "autovacuum, as a fleet does)",
    )
    p.add_argument("--chunk", type=int, default=5000)
    p.add_argument(
        "--a-rate",
        type=int,
        help="fairness: a rate limit on a's queue (starts per second), so that a's drain "
        "leaves the machine headroom while a's backlog stays",
    )
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--n", type=int, default=20000, help="limits-drain: runs drained")
    p.add_argument(
        "--limits", default="off", help="limits-drain: off, on, or some of " + ",".join(LIMITS_SQL)
    )
    p.add_argument("--rate-limit", type=int, default=100_000, help="limits-drain: starts")
    p.add_argument("--rate-period", type=float, default=1.0, help="limits-drain: seconds")
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--keep-logs", metavar="DIR", help="keep the pgsched processes' logs in DIR")
    args = p.parse_args()
    # what part_drain reads besides these
    args.worker_log_level, args.poll_interval = None, None
    args.python_isolation, args.task = None, "bench-job"  # part_drain's own defaults
    warnings.simplefilter("ignore")
    fn = {"fairness": part_fairness, "limits-drain": part_limits_drain}[args.cmd]
    common.main_guard(lambda: fn(args))


if __name__ == "__main__":
    main()

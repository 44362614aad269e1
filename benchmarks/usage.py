#!/usr/bin/env python3
"""Cost of one run of the leader's usage job (pgsched/scheduler/usage.py) against the size
of the month's history, and what its compute trigger adds to the statement that finishes
executions; on a real PostgreSQL.

    python benchmarks/usage.py [--dsn DSN] [--attempts 1000000] [--tenants 100]
                               [--per-run 1000] [--repeats 10] [--smoke]

In a freshly migrated database with ``--tenants`` tenants (each with every quota set, and a
task), seeds this month's finished attempts (and as many log lines) up to 10,000 and then up
to ``--attempts``; at each size it times ``--repeats`` usage runs, each after ``--per-run``
running executions finished and as many log lines written in statements of 100 rows (a
worker's group commit): the work of one interval. Compute is counted from each running
row's started_at to the statement that moves it out of running (migration 0028), so the
attempts seeded are history only. Then it times 200 finishing statements (a DELETE of 100
running rows) with the compute trigger (usage_left) and 200 without, interleaved, for rows
of one tenant and of ``--tenants`` (one delta row per tenant in a statement: the worst
case). Prints milliseconds per run (median, worst) per history size, and microseconds per
100-row statement with and without the trigger. The totals are checked against the rows
(a mismatch exits non-zero).
Without ``--dsn`` a throwaway embedded PostgreSQL is used (see ``dag_overhead.py``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent / "bench"))

from server import Server

from pgsched import migrate
from pgsched.db import Database
from pgsched.scheduler.usage import measure

# attempts ids from %(first)s, %(n)s of them, this month, 0-12 s long, spread over tenants
ATTEMPTS = """
INSERT INTO pgsched.execution_attempt (execution_id, attempt, tenant, state, started_at, finished_at)
SELECT i, 1, 'tenant-' || (i %% %(tenants)s), 'succeeded', x.f - make_interval(secs => (i %% 13)), x.f
  FROM generate_series(%(first)s::bigint, %(first)s::bigint + %(n)s - 1) AS i,
       LATERAL (SELECT greatest(date_trunc('month', now(), 'UTC'),
                                now() - make_interval(secs => 86400.0 * 20 * i / %(scale)s)) AS f) AS x
"""
# running executions ids from %(first)s (their lease), %(n)s of them, claimed 0-12 s ago
RUNNING = """
INSERT INTO pgsched.execution (tenant, task_id, scheduled_at, run_at, state, attempt, started_at, lease_id)
SELECT k.tenant, k.id, now(), now(), 'running', 1, statement_timestamp() - make_interval(secs => (i %% 13)), i
  FROM generate_series(%(first)s::bigint, %(first)s::bigint + %(n)s - 1) AS i
  JOIN pgsched.task k ON k.tenant = 'tenant-' || (i %% %(tenants)s) AND k.name = 'job'
"""
# the finish's move out of running (execution_finish_many deletes the rows it moves)
FINISH = "DELETE FROM pgsched.execution WHERE state = 'running'"
LINES = """
INSERT INTO pgsched.execution_log (execution_id, attempt, tenant, seq, stream, logged_at, line)
SELECT i, 1, 'tenant-' || (i %% %(tenants)s), 1, 'stdout', now(), 'line ' || i
  FROM generate_series(%(first)s::bigint, %(first)s::bigint + %(n)s - 1) AS i
"""


def write(conn: psycopg.Connection, sql: str, first: int, n: int, tenants: int, step: int) -> None:
    for at in range(first, first + n, step):
        conn.execute(
            sql,
            {"first": at, "n": min(step, first + n - at), "tenants": tenants, "scale": 10**7},
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dsn", help="PostgreSQL server (the role must be able to CREATE DATABASE)")
    p.add_argument("--attempts", type=int, default=1_000_000)
    p.add_argument("--tenants", type=int, default=100)
    p.add_argument("--per-run", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--smoke", action="store_true", help="20,000 attempts, 3 repeats")
    args = p.parse_args(argv)
    if args.smoke:
        args.attempts, args.repeats = 20_000, 3
    server = Server(args.dsn)
    try:
        dsn = server.create_database("usage")
        migrate.migrate(dsn)
        db = Database.connect(dsn, max_size=2)
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(
                    "INSERT INTO pgsched.tenant (name, max_running, max_starts_per_hour,"
                    " max_compute_minutes_per_month, max_log_bytes)"
                    " SELECT 'tenant-' || i, 100, 10000, 50000000, 100000000000"
                    " FROM generate_series(0, %s - 1) i",
                    [args.tenants],
                )
                conn.execute(
                    "INSERT INTO pgsched.task (tenant, name, handler_kind, command)"
                    " SELECT name, 'job', 'shell', 'true' FROM pgsched.tenant WHERE name LIKE 'tenant-%'"
                )
                written = 1
                ran = 0.0  # the seconds the running rows finished were claimed before their finish
                slack = 0.0  # what the statements between their claim and finish took

                def finish(first: int, n: int, tenants: int, timed: list[float] | None) -> None:
                    nonlocal ran, slack
                    for at in range(first, first + n, 100):
                        start = time.perf_counter()
                        write(conn, RUNNING, at, min(100, first + n - at), tenants, 100)
                        mid = time.perf_counter()
                        conn.execute(FINISH)
                        end = time.perf_counter()
                        if timed is not None:
                            timed.append((end - mid) * 1e6)
                        ran += sum(i % 13 for i in range(at, min(at + 100, first + n)))
                        slack += (end - start) * min(100, first + n - at)

                print(
                    "| attempts and executions this month | usage run, median ms | worst ms | runs |"
                )
                print("|---:|---:|---:|---:|")
                for size in sorted({min(10_000, args.attempts), args.attempts}):
                    seed = size - (written - 1)
                    write(conn, ATTEMPTS, written, seed, args.tenants, 100_000)
                    write(conn, LINES, written, seed, args.tenants, 100_000)
                    written += seed
                    conn.execute("VACUUM ANALYZE")
                    measure(db)  # counts the seed's log lines
                    times = []
                    for _ in range(args.repeats):
                        finish(written, args.per_run, args.tenants, None)
                        write(conn, LINES, written, args.per_run, args.tenants, 100)
                        written += args.per_run
                        start = time.perf_counter()
                        measure(db)
                        times.append((time.perf_counter() - start) * 1000)
                    print(
                        f"| {written - 1:,} | {statistics.median(times):.1f} | {max(times):.1f}"
                        f" | {args.repeats} |"
                    )
                row = conn.execute(
                    "SELECT (SELECT sum(compute_seconds) FROM pgsched.tenant_usage) AS counted,"
                    " (SELECT sum(log_bytes) FROM pgsched.tenant_usage) AS bytes,"
                    " (SELECT sum(octet_length(line)) FROM pgsched.execution_log) AS real_bytes"
                ).fetchone()
                assert row is not None
                counted = float(row[0])
                if not ran - 1e-3 <= counted <= ran + slack + 1e-3 or int(row[1]) != int(row[2]):
                    print(
                        f"error: counted {counted} s and {row[1]} bytes, the rows {ran} s"
                        f" (+ at most {slack:.3f}), {row[2]} bytes"
                    )
                    return 1
                print()
                print("| 100-row finishing statement | tenants in it | median µs |")
                print("|---|---:|---:|")
                for tenants in (1, args.tenants):
                    times_by: dict[str, list[float]] = {"ENABLE": [], "DISABLE": []}
                    for _ in range(10):  # interleaved, so that neither gets the warmer cache
                        for action, out in times_by.items():
                            conn.execute(
                                f"ALTER TABLE pgsched.execution {action} TRIGGER usage_left"
                            )
                            finish(written, 2000, tenants, out)
                            written += 2000
                    for action, label in (
                        ("ENABLE", "with the compute trigger"),
                        ("DISABLE", "without"),
                    ):
                        print(
                            f"| {label} | {tenants} | {statistics.median(times_by[action]):.0f} |"
                        )
                conn.execute("ALTER TABLE pgsched.execution ENABLE TRIGGER usage_left")
        finally:
            db.close()
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

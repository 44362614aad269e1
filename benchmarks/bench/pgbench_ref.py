"""The pgbench reference of ``benchmarks/run.py``: the rate PostgreSQL itself sustains on
this machine for the same work as a drain, without any queue library.

    python pgbench_ref.py batch --dsn URI --pgbench PATH [--clients 1] [--n 20000] [--script claim100_2tx]
    python pgbench_ref.py lifecycle --dsn URI --pgbench PATH [--clients 1] [--seconds 15] [--script job_1tx]

``batch``: N jobs bulk-inserted into ``pgb_jobs`` (``pgbench/schema.sql``; untimed, then
VACUUM ANALYZE), then ``pgbench -M prepared -c C -j C -t N/100/C -f pgbench/SCRIPT.sql``:
each client claims 100 jobs with ``FOR UPDATE SKIP LOCKED`` and completes them, until all
are done. Rate = N ÷ pgbench's wall time (process start to exit); every job must end done.

``lifecycle`` (extra, the research's scripts): INSERT + SKIP LOCKED claim + complete of
one job per pgbench transaction (``job_1tx``) or as three autocommit transactions
(``job_3tx``), for ``--seconds``; jobs done ÷ seconds.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common
import psycopg

SQL = Path(__file__).resolve().parent / "pgbench"
BenchFailed = common.BenchFailed
LABELS = {
    "claim100_2tx": "claim 100 (SKIP LOCKED), then complete them: 2 commits per 100 jobs",
    "claim100_1tx": "claim 100 (SKIP LOCKED) and complete them in 1 transaction",
    "job_1tx": "INSERT + claim 1 + complete, 1 transaction per job",
    "job_3tx": "INSERT + claim 1 + complete, 3 transactions per job",
}


def run_pgbench(pgbench: str, dsn: str, args: list[str]) -> tuple[float, str]:
    t = time.perf_counter()
    proc = subprocess.run(
        [pgbench, "-n", "-M", "prepared", *args, dsn],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        raise BenchFailed(f"pgbench exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    return wall, proc.stdout + proc.stderr


def tps(output: str) -> float | None:
    m = re.search(r"^tps = ([\d.]+)", output, re.MULTILINE)
    return float(m.group(1)) if m else None


def version(pgbench: str) -> str:
    return subprocess.run(
        [pgbench, "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()


def cmd_batch(args: argparse.Namespace) -> None:
    per_client = max(1, math.ceil(args.n / 100 / args.clients))
    n = per_client * 100 * args.clients
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute((SQL / "schema.sql").read_text())
        conn.execute(
            "INSERT INTO pgb_jobs (payload) SELECT jsonb_build_object('seq', g) "
            "FROM generate_series(1, %s) g",
            (n,),
        )
        conn.execute("VACUUM ANALYZE pgb_jobs")
        wall, out = run_pgbench(
            args.pgbench,
            args.dsn,
            [
                "-c",
                str(args.clients),
                "-j",
                str(args.clients),
                "-t",
                str(per_client),
                "-f",
                str(SQL / f"{args.script}.sql"),
            ],
        )
        done, left = conn.execute(
            "SELECT count(*) FILTER (WHERE status = 2), count(*) FILTER (WHERE status <> 2) "
            "FROM pgb_jobs"
        ).fetchone()
    if done != n or left:
        raise BenchFailed(f"pgbench {args.script}: {done} of {n} jobs done, {left} not")
    scripts = tps(out)
    common.emit(
        "pgbench",
        "drain",
        f"{LABELS[args.script]}, {args.clients} client{'s' * (args.clients > 1)}",
        n=n,
        seconds=round(wall, 3),
        jobs_per_s=round(n / wall, 1),
        pgbench_jobs_per_s=round(scripts * 100, 1) if scripts else None,
        clients=args.clients,
        version=version(args.pgbench),
    )


def cmd_lifecycle(args: argparse.Namespace) -> None:
    with psycopg.connect(args.dsn, autocommit=True) as conn:
        conn.execute((SQL / "schema.sql").read_text())
        conn.execute("VACUUM ANALYZE pgb_jobs")
        _, out = run_pgbench(
            args.pgbench,
            args.dsn,
            [
                "-c",
                str(args.clients),
                "-j",
                str(args.clients),
                "-T",
                str(args.seconds),
                "-f",
                str(SQL / f"{args.script}.sql"),
            ],
        )
        done = conn.execute("SELECT count(*) FROM pgb_jobs WHERE status = 2").fetchone()[0]
    if not done:
        raise BenchFailed(f"pgbench {args.script}: no job done")
    common.emit(
        "pgbench",
        "lifecycle",
        f"{LABELS[args.script]}, {args.clients} client{'s' * (args.clients > 1)}",
        seconds=args.seconds,
        jobs_per_s=round(done / args.seconds, 1),
        tps=tps(out),
        clients=args.clients,
        version=version(args.pgbench),
    )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("cmd", choices=["batch", "lifecycle"])
    p.add_argument("--dsn", required=True)
    p.add_argument("--pgbench", required=True)
    p.add_argument("--clients", type=int, default=1)
    p.add_argument("--n", type=int, default=20000)
    p.add_argument("--seconds", type=int, default=15)
    p.add_argument("--script", default=None)
    args = p.parse_args()
    args.script = args.script or ("claim100_2tx" if args.cmd == "batch" else "job_1tx")
    common.main_guard(lambda: (cmd_batch if args.cmd == "batch" else cmd_lifecycle)(args))


if __name__ == "__main__":
    main()

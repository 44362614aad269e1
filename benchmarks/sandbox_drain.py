"""The cost of isolating commands (issue 19, item 1): the drain rate of ``true`` commands by
one real ``pgsched worker`` at each ``--isolation`` level, interleaved over the repeats.

    python benchmarks/sandbox_drain.py [--n 1000] [--repeats 3] [--concurrency 4]
        [--levels none,rlimits,sandbox] [--dsn DSN]

For each repeat and level (in an order rotated per repeat, so that drift on a shared
machine hits each alike): a fresh database, ``--n`` runs of a shell task ``true`` enqueued
(untimed), a fresh worker started, and the clock from its start until the last run is in
history; also the steady rate from the rows' own timestamps (first start to last finish,
the database's clock), which leaves out the worker's start. Prints a Markdown table of
medians (min-max) with each level's steady rate beside ``none``'s. Run as root for the
sandbox to use nobody (as CI does); a worker that cannot isolate refuses to start and the
level is reported failed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "bench"))
sys.path.insert(0, str(HERE.parent))

import psycopg
from server import Server

from pgsched import migrate
from pgsched.db import Database
from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec


def drain(uri: str, level: str, n: int, concurrency: int, logs: Path) -> dict[str, float]:
    migrate.migrate(uri)
    db = Database.connect(uri, max_size=2, application_name="sandbox bench")
    tasks.create(db, TaskSpec(name="bench-true", command="true"))
    for start in range(0, n, 1000):
        tasks.enqueue_many(
            db, "bench-true", [{"seq": i} for i in range(start, min(n, start + 1000))]
        )
    db.close()
    conn = psycopg.connect(uri, autocommit=True)
    conn.execute("VACUUM ANALYZE pgsched.execution")
    log = open(logs / f"worker-{level}-{time.monotonic_ns()}.log", "w")  # noqa: SIM115
    began = time.perf_counter()
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pgsched",
            "worker",
            "--isolation",
            level,
            "--concurrency",
            str(concurrency),
            "--poll-interval",
            "0.2",
        ],
        env={**os.environ, "PGSCHED_DSN": uri},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        while conn.execute("SELECT count(*) FROM pgsched.execution_history").fetchone()[0] < n:
            if worker.poll() is not None:
                raise RuntimeError(f"the {level} worker exited {worker.returncode}: {log.name}")
            time.sleep(0.05)
        wall = time.perf_counter() - began
    finally:
        worker.terminate()
        worker.wait(60)
        log.close()
    ok, span = conn.execute(
        "SELECT count(*) FILTER (WHERE state = 'succeeded'), "
        "extract(epoch FROM max(finished_at) - min(started_at)) FROM pgsched.execution_history"
    ).fetchone()
    conn.close()
    if ok != n:
        raise RuntimeError(f"{level}: {ok} of {n} runs succeeded")
    return {"wall_rate": n / wall, "steady_rate": n / float(span)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--levels", default="none,rlimits,sandbox")
    p.add_argument("--dsn", default=None)
    args = p.parse_args()
    levels = args.levels.split(",")
    server = Server(args.dsn)
    results: dict[str, list[dict[str, float]]] = {lv: [] for lv in levels}
    logs = Path(tempfile.mkdtemp(prefix="pgsched-sandbox-bench-"))
    try:
        for r in range(args.repeats):
            for level in levels[r % len(levels) :] + levels[: r % len(levels)]:
                uri = server.create_database(f"sandbox_{level}")
                try:
                    m = drain(uri, level, args.n, args.concurrency, logs)
                finally:
                    server.drop_database(uri)
                results[level].append(m)
                print(
                    f"repeat {r + 1} {level}: {m['wall_rate']:.0f}/s from start, "
                    f"{m['steady_rate']:.0f}/s steady",
                    file=sys.stderr,
                )
    finally:
        server.close()

    def cell(level: str, key: str) -> str:
        values = [m[key] for m in results[level]]
        return f"{statistics.median(values):.0f} ({min(values):.0f}-{max(values):.0f})"

    base = statistics.median(m["steady_rate"] for m in results[levels[0]])
    print(
        f"\n`{' '.join(sys.argv)}`: {args.n} `true` commands, --concurrency "
        f"{args.concurrency}, {args.repeats} repeats, {os.cpu_count()} cores\n"
    )
    print(
        f"| --isolation | runs/s from the worker's start | runs/s steady | steady vs {levels[0]} |"
    )
    print("| --- | --- | --- | --- |")
    for level in levels:
        steady = statistics.median(m["steady_rate"] for m in results[level])
        print(
            f"| {level} | {cell(level, 'wall_rate')} | {cell(level, 'steady_rate')} | "
            f"{steady / base:.2f}x |"
        )


if __name__ == "__main__":
    main()

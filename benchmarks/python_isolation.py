#!/usr/bin/env python3
"""Python handlers in child processes beside threads (issue 19, item 2): the drain of a
fresh worker (``bench/pgsched_bench.py drain``) with ``--python-isolation process`` and
``thread``, for the no-op handler (``bench-job``) and a 10 ms one (``bench-sleep``).

    python benchmarks/python_isolation.py [--dsn URI] [--repeats 3] [--n 20000]
                                          [--sleep-n 4000] [--concurrency 16]

Each measurement runs in a fresh database of its own (an embedded PostgreSQL without
``--dsn``), one after the other, in an order rotated per repeat so that drift on a shared
machine hits both modes alike. Prints a Markdown table: the median runs/s of each mode
(with the range), the worker's CPU per run (its children's included: they are reaped by
the worker) and the process/thread ratio; the target is a ratio of at least 0.8 for the
no-op handler. Exit status 0, 1 when a drain failed.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "bench"))

import common
from server import Server

MODES = ("thread", "process")


def drain(uri: str, task: str, n: int, mode: str, concurrency: int) -> dict[str, Any]:
    argv = [
        sys.executable,
        str(HERE / "bench" / "pgsched_bench.py"),
        "drain",
        "--dsn",
        uri,
        "--n",
        str(n),
        "--concurrency",
        str(concurrency),
        "--task",
        task,
        "--python-isolation",
        mode,
        "--config",
        f"{task} {mode}",
    ]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=900, cwd=HERE.parent)
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        raise common.BenchFailed(f"{task} {mode}: exit {out.returncode}\n{out.stderr[-2000:]}")
    return lines[-1]["metrics"] if "metrics" in lines[-1] else lines[-1]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dsn", default=None)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--n", type=int, default=20_000, help="no-op runs per drain")
    p.add_argument("--sleep-n", type=int, default=4_000, help="10 ms runs per drain")
    p.add_argument("--concurrency", type=int, default=16)
    args = p.parse_args(argv)
    server = Server(args.dsn)
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    work = [
        (t, n, m) for t, n in (("bench-job", args.n), ("bench-sleep", args.sleep_n)) for m in MODES
    ]
    try:
        for repeat in range(args.repeats):
            order = work[repeat % 2 :] + work[: repeat % 2]
            for task, n, mode in order:
                uri = server.create_database(f"iso{repeat}")
                try:
                    metrics = drain(uri, task, n, mode, args.concurrency)
                finally:
                    server.drop_database(uri)
                results.setdefault((task, mode), []).append(metrics)
                print(
                    f"repeat {repeat + 1}: {task} {mode}: {metrics['jobs_per_s']:,.0f} runs/s, "
                    f"worker CPU {metrics['worker_cpu_us_per_run']:.0f} µs/run, "
                    f"peak RSS {metrics['peak_rss_mib']} MiB",
                    file=sys.stderr,
                )
    except common.BenchFailed as exc:
        print(f"FAILED: {exc}", file=sys.stderr)
        return 1
    finally:
        server.close()
    print(
        f"| handler ({args.concurrency} slots) | threads (runs/s) | processes (runs/s) "
        "| processes / threads | worker CPU per run, threads → processes | peak RSS (MiB) |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for task, label in (("bench-job", "no-op"), ("bench-sleep", "10 ms sleep")):
        rate = {m: [r["jobs_per_s"] for r in results[(task, m)]] for m in MODES}
        cpu = {
            m: statistics.median(r["worker_cpu_us_per_run"] for r in results[(task, m)])
            for m in MODES
        }
        rss = {m: statistics.median(r["peak_rss_mib"] for r in results[(task, m)]) for m in MODES}
        med = {m: statistics.median(rate[m]) for m in MODES}
        cells = [f"{med[m]:,.0f} ({min(rate[m]):,.0f}–{max(rate[m]):,.0f})" for m in MODES]
        print(
            f"| {label} | {cells[0]} | {cells[1]} | {med['process'] / med['thread']:.2f} "
            f"| {cpu['thread']:.0f} → {cpu['process']:.0f} µs | {rss['thread']} → {rss['process']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

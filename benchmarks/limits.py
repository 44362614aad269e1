"""The limits and fair share parts of ``run.py`` (issue 18): their options, measurements,
report rows and targets. run.py imports this module; the measurements themselves are
``bench/pgsched_limits.py`` subprocesses. pgsched only: the peers have no tenants.

- ``fairness``: tenant A floods ``--fairness-rows`` ready executions (100,000; smoke
  2,000) while tenant B enqueues one every 100 ms for ``--fairness-seconds`` (20; smoke 5);
  B's schedule-to-start p50/p99 beside B alone. Target: B's p99 ≤ 2× its unloaded p99.
  Measured twice: the flood as a fleet meets it, and with the table analyzed once the
  flood is in (what autovacuum does about a minute later).
- ``limits``: the drain of ``--n`` no-op runs with no limits and with limits configured
  that do not bind, interleaved over the repeats. Target: within 10% (≥ 90% of the rate
  without).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent / "bench"
PARTS = ["fairness", "limits"]
TARGETS = ("fairness", "limits")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--fairness-rows",
        type=int,
        help="fairness: tenant A's flood of ready executions (default 100,000; smoke 2,000)",
    )
    p.add_argument(
        "--fairness-seconds",
        type=float,
        help="fairness: seconds of each phase of tenant B's runs (default 20; smoke 5)",
    )


def set_defaults(args: argparse.Namespace) -> None:
    args.fairness_rows = args.fairness_rows or (2_000 if args.smoke else 100_000)
    args.fairness_seconds = args.fairness_seconds or (5.0 if args.smoke else 20.0)


def add_plan(add: Callable[..., None], args: argparse.Namespace, drain_timeout: float) -> None:
    """``add(part, system, role, argv, timeout)`` for each measurement (run.py's ``add``)."""
    script = [sys.executable, str(BENCH / "pgsched_limits.py")]
    timeout = max(900.0, args.fairness_rows / 50)
    # best: the flood as a fleet meets it (autovacuum analyzes the table a minute later);
    # analyzed: with the statistics of the flooded table at once
    for role, more in (("best", []), ("analyzed", ["--analyze-after-flood"])):
        add(
            "fairness",
            "pgsched",
            role,
            script
            + [
                "fairness",
                "--rows",
                str(args.fairness_rows),
                "--seconds",
                f"{args.fairness_seconds:g}",
                "--concurrency",
                str(args.pgsched_concurrency),
                "--timeout",
                str(timeout),
                *more,
            ],
            timeout + 2 * args.fairness_seconds + 300,
        )
    for role in ("nolimits", "limits"):
        add(
            "limits",
            "pgsched",
            role,
            script
            + [
                "limits-drain",
                "--limits",
                "on" if role == "limits" else "off",
                "--n",
                str(args.n),
                "--concurrency",
                str(args.pgsched_concurrency),
                "--timeout",
                str(drain_timeout),
            ],
            drain_timeout + 120,
        )


def rows(row: Callable[..., Any], args: argparse.Namespace) -> list[Any]:
    """The report's rows, made with run.py's ``Row``."""
    b = {"pgsched": "best"}
    every = f"one run every 100 ms for {args.fairness_seconds:g} s"
    return [
        row(
            "fairness",
            f"tenant B's schedule-to-start p50, B alone, {every} (ms)",
            "alone.p50_ms",
            b,
            higher=False,
            fmt="ms",
        ),
        row("fairness", "… B alone, p99 (ms)", "alone.p99_ms", b, higher=False, fmt="ms"),
        row(
            "fairness",
            f"… p50 while tenant A's flood of {args.fairness_rows:,} ready runs drains (ms)",
            "loaded.p50_ms",
            b,
            higher=False,
            fmt="ms",
        ),
        row("fairness", "… beside A's flood, p99 (ms)", "loaded.p99_ms", b, higher=False, fmt="ms"),
        row(
            "fairness",
            "… of which B's own enqueue (run_at to its commit's reply), p99 beside the flood (ms)",
            "loaded_hops.enqueue.p99_ms",
            b,
            higher=False,
            fmt="ms",
        ),
        row(
            "fairness",
            "… and the wake (that reply to the claim's now()), p99 beside the flood (ms)",
            "loaded_hops.wake.p99_ms",
            b,
            higher=False,
            fmt="ms",
        ),
        row(
            "fairness",
            "… p99 beside A's flood ÷ p99 alone",
            "p99_ratio",
            b,
            higher=False,
            fmt="ratio",
            target="fairness",
        ),
        row(
            "fairness",
            "… A's runs still ready when B's last run was enqueued (runs)",
            "a_left_at_b_end",
            b,
        ),
        row(
            "fairness",
            "… the same with ANALYZE once A's flood is in: p50 beside the flood (ms)",
            "loaded.p50_ms",
            {"pgsched": "analyzed"},
            higher=False,
            fmt="ms",
        ),
        row(
            "fairness",
            "… p99 beside the flood (ms)",
            "loaded.p99_ms",
            {"pgsched": "analyzed"},
            higher=False,
            fmt="ms",
        ),
        row(
            "fairness",
            "… p99 beside the flood ÷ p99 alone (the same run's)",
            "p99_ratio",
            {"pgsched": "analyzed"},
            higher=False,
            fmt="ratio",
            target="fairness",
        ),
        row(
            "limits",
            f"drain of {args.n:,} no-op runs, no limits (runs/s)",
            "jobs_per_s",
            {"pgsched": "nolimits"},
        ),
        row(
            "limits",
            "… with tenant, queue, task and key limits configured, none binding (runs/s)",
            "jobs_per_s",
            {"pgsched": "limits"},
            target="limits",
        ),
    ]


def verdict(
    target: str, own: float, median: Callable[[str, str, str, str], float | None]
) -> tuple[bool, str] | None:
    """(met, text) of a target of this module; None when its baseline was not measured.
    ``median(part, system, role, metric)`` is the report's."""
    if target == "fairness":
        return own <= 2.0, f"{own:.2f}× B's unloaded p99, target ≤ 2×" + (
            "" if own <= 2 else f" ({own / 2:.1f}× over)"
        )
    base = median("limits", "pgsched", "nolimits", "jobs_per_s")
    if base is None:
        return None
    r = own / base
    return r >= 0.9, f"{r * 100:.1f}% of the rate without limits, target ≥ 90%"

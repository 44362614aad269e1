"""The benchmarks' smoke variants run here, so they cannot rot: tiny sizes, correctness
asserted by the scripts themselves (exit 0 only when every run was correct). The figures
they print are not checked: timing belongs to the full runs (docs/performance.md)."""

from __future__ import annotations

import subprocess
import sys

from ..conftest import dsn_for
from ..helpers import REPO


def test_dag_overhead_smoke(pg_server):
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "dag_overhead.py"),
            "--smoke",
            "--dsn",
            dsn_for(pg_server, "postgres"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "| DAG run |" in proc.stdout and "DAG per-node overhead" in proc.stdout


def test_run_smoke_on_pgsched_and_the_pgbench_reference(pg_server, tmp_path):
    """The side-by-side benchmark at tiny sizes (peers are left out here: their own
    environment is installed from PyPI on the first full run)."""
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "run.py"),
            "--smoke",
            "--systems",
            "pgsched,pgbench",
            "--dsn",
            dsn_for(pg_server, "postgres"),
            "--results",
            str(tmp_path / "smoke.jsonl"),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "claim throughput: drain of 500, empty history" in proc.stdout
    assert "scheduler burst, 1,000 cron tasks" in proc.stdout
    assert "beside 10,000 ready executions on queue 'bulk'" in proc.stdout
    assert "tenant A's flood of 2,000 ready runs" in proc.stdout
    assert "limits configured, none binding" in proc.stdout
    assert "Targets:" in proc.stdout and (tmp_path / "smoke.jsonl").stat().st_size > 0

"""benchmarks/observability.py's smoke run, so that it cannot rot: the script checks its
own counts and exits non-zero on a mismatch. Timings belong to the full run."""

from __future__ import annotations

import subprocess
import sys

from ..conftest import dsn_for
from ..helpers import REPO


def test_observability_benchmark_smoke(pg_server):
    proc = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks" / "observability.py"),
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
    assert "| stats.dashboard |" in proc.stdout and "| metrics.families (a scrape) |" in proc.stdout
    assert "| `/executions?state=cancelled` |" in proc.stdout and "| `/metrics` |" in proc.stdout

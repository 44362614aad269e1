"""The benchmarks' smoke variants run here, so they cannot rot: tiny sizes, correctness
asserted by the scripts themselves (exit 0 only when every run was correct). The figures
they print are not checked: timing belongs to the full runs (docs/performance.md)."""

from __future__ import annotations

import subprocess
import sys

from ..conftest import dsn_for
from ..helpers import REPO


def test_dag_overhead_smoke(pg_server):
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "dag_overhead.py"), "--smoke",
                           "--dsn", dsn_for(pg_server, "postgres")],
                          capture_output=True, text=True, timeout=300, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "| DAG run |" in proc.stdout and "DAG per-node overhead" in proc.stdout

"""``pgsched dev``, the newcomer's first command: embedded PostgreSQL with no DSN, the
examples, scheduler and worker in one process, Ctrl-C stops cleanly, data is reused."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
import signal
import subprocess
import sys

import pytest

from ..helpers import cli, wait_until

pytestmark = pytest.mark.e2e


def start_dev(home, log):
    env = {k: v for k, v in os.environ.items() if k != "PGSCHED_DSN"}
    env["PGSCHED_HOME"] = str(home)
    return subprocess.Popen([sys.executable, "-m", "pgsched", "dev"], stdout=log, stderr=subprocess.STDOUT,
                            env=env, text=True)


def test_dev_on_the_embedded_default(tmp_path):
    # Not under pytest's basetemp (0700, reset by any concurrent pytest run): as root the
    # embedded server runs as its own user and must reach this folder.
    home = Path(tempfile.mkdtemp(prefix="pgsched-dev-home-"))
    log_path = tmp_path / "dev.log"
    with open(log_path, "w") as log:
        proc = start_dev(home, log)
        try:
            out = wait_until(lambda: "Ctrl-C to stop" in log_path.read_text() and log_path.read_text(),
                             timeout=60, message="dev banner")
            assert "applied 0001_initial" in out and "examples: 6 task(s) created" in out
            dsn = re.search(r"PGSCHED_DSN='([^']+)'", out).group(1)
            assert str(home) in dsn
            cli(dsn, "task", "trigger", "example-cron-clock")
            wait_until(lambda: re.search(r"ok   example-cron-clock .*\n\s+\| cron says: it is", log_path.read_text()),
                       timeout=20, message="the triggered example to be printed with its output")
            proc.send_signal(signal.SIGINT)
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert log_path.read_text().rstrip().endswith("stopped")

    # A second start reuses the data: nothing to migrate, examples already there.
    with open(log_path, "w") as log:
        proc = start_dev(home, log)
        try:
            out = wait_until(lambda: "Ctrl-C to stop" in log_path.read_text() and log_path.read_text(),
                             timeout=60, message="second dev banner")
            assert "schema: up to date" in out and "examples: already loaded" in out
            proc.send_signal(signal.SIGINT)
            assert proc.wait(30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            shutil.rmtree(home, ignore_errors=True)

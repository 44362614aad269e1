"""``pgsched dev``, the newcomer's first command: embedded PostgreSQL with no DSN, the
examples, scheduler and worker in one process, Ctrl-C stops cleanly, data is reused."""

from __future__ import annotations

import base64
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from pgsched.secret_keys import key_id

from ..helpers import cli, wait_until

pytestmark = pytest.mark.e2e


@contextlib.contextmanager
def dev_process(
    home: Path, log_path: Path, extra_env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen, str]]:
    """``pgsched dev`` with PGSCHED_HOME=home and no DSN (nor secret key, unless
    ``extra_env`` gives one); yields it and its banner once up, then stops it with SIGINT
    (as Ctrl-C does) and checks it exits cleanly."""
    env = {k: v for k, v in os.environ.items() if k != "PGSCHED_DSN" and "PGSCHED_SECRET" not in k}
    env["PGSCHED_HOME"] = str(home)
    env.update(extra_env or {})
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pgsched", "dev"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            text=True,
        )
        try:
            banner = wait_until(
                lambda: "Ctrl-C to stop" in log_path.read_text() and log_path.read_text(),
                timeout=60,
                message="dev banner",
            )
            yield proc, banner
            proc.send_signal(signal.SIGINT)
            try:
                code = proc.wait(30)
            except subprocess.TimeoutExpired:
                pytest.fail(
                    "dev did not stop within 30 s of SIGINT; its output:\n"
                    + log_path.read_text()[-4000:]
                )
            assert code == 0, log_path.read_text()[-4000:]
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert log_path.read_text().rstrip().endswith("stopped")


def test_dev_on_the_embedded_default(tmp_path):
    # Not under pytest's basetemp (0700, reset by any concurrent pytest run): as root the
    # embedded server runs as its own user and must reach this folder.
    home = Path(tempfile.mkdtemp(prefix="pgsched-dev-home-"))
    log_path = tmp_path / "dev.log"
    try:
        with dev_process(home, log_path) as (_, out):
            assert "applied 0001_initial" in out and "examples: 8 task(s) created" in out
            assert (
                "DAG documents" in out and "documents.classify" not in out
            )  # nodes are not listed
            # the banner's command needs no DSN: PGSCHED_HOME finds the same embedded server
            assert re.search(
                rf"in another terminal:  PGSCHED_HOME={re.escape(str(home))} \S*pgsched task list",
                out,
            )
            env = {"PGSCHED_HOME": str(home), "PGSCHED_DSN": ""}
            dsn = None
            listed = cli(dsn, "task", "list", "--json", env=env).stdout
            assert "example-cron-clock" in listed
            cli(dsn, "task", "trigger", "example-cron-clock", env=env)
            wait_until(
                lambda: re.search(
                    r"ok   example-cron-clock .*\n\s+\| cron says: it is", log_path.read_text()
                ),
                timeout=20,
                message="the triggered example to be printed with its output",
            )
            cli(dsn, "dag", "trigger", "documents", env=env)  # its Python nodes run on dev's worker
            wait_until(
                lambda: re.search(
                    r"ok   documents.invoice .*\"booked\": \"invoice-2025-0042.pdf\"[^\n]*\n"
                    r"(.*\n)*.*ok   documents.archive",
                    log_path.read_text(),
                ),
                timeout=20,
                message="the example DAG's nodes to be printed",
            )
            # the web admin's one-time link signs in as a local admin
            link = re.search(r"web admin:\s+(http://127\.0\.0\.1:\d+/login\?token=\S+)", out)
            assert link, out
            browser = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
            opened = urllib.request.Request(link.group(1), headers={"Sec-Fetch-Site": "none"})
            with browser.open(opened, timeout=10) as page:
                html = page.read().decode()
            assert page.url.endswith("/") and "Sign out" in html and "admin" in html
            # the summary says where the secrets' key comes from: here, nowhere
            assert "secrets:              no key (PGSCHED_SECRET_KEY or" in out, out
        # A second start reuses the data: nothing to migrate, examples already there.
        key = base64.b64encode(bytes(range(32))).decode()
        with dev_process(home, log_path, {"PGSCHED_SECRET_KEY": key}) as (_, out):
            assert "schema: up to date" in out and "examples: already loaded" in out
            assert (
                f"secrets:              key from PGSCHED_SECRET_KEY, id {key_id(bytes(range(32)))}"
                in out
            )
            assert key not in out
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_the_embedded_server_stops_with_the_last_live_process_after_one_was_killed(tmp_path):
    """The processes sharing the embedded server leave a list of themselves; one killed with
    SIGKILL never takes itself off. When the last live one exits, the server stops anyway."""
    home = Path(tempfile.mkdtemp(prefix="pgsched-embedded-home-"))
    env = {**{k: v for k, v in os.environ.items() if k != "PGSCHED_DSN"}, "PGSCHED_HOME": str(home)}
    postmaster = home / "pgdata" / "postmaster.pid"
    log_path = tmp_path / "worker.log"
    try:
        cli(None, "migrate", env={"PGSCHED_HOME": str(home), "PGSCHED_DSN": ""})
        with open(log_path, "w") as log:
            worker = subprocess.Popen(
                [sys.executable, "-m", "pgsched", "worker"],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        wait_until(
            lambda: "started: queues=default" in log_path.read_text(),
            timeout=60,
            message="the worker on the embedded server",
        )
        worker.kill()
        worker.wait()
        assert postmaster.exists()  # it shared the server, and did not leave
        cli(
            None, "task", "list", env={"PGSCHED_HOME": str(home), "PGSCHED_DSN": ""}
        )  # joins, then leaves
        wait_until(
            lambda: not postmaster.exists(), timeout=30, message="the embedded server to stop"
        )
    finally:
        if postmaster.exists():  # the fault: stop the server ourselves
            os.kill(int(postmaster.read_text().split()[0]), signal.SIGINT)
            wait_until(
                lambda: not postmaster.exists(), timeout=30, message="the leftover server to stop"
            )
        shutil.rmtree(home, ignore_errors=True)

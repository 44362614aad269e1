"""Fixtures that start real ``pgsched`` processes against the per-test database.

Workers that run the Debian crontabs run inside a private mount namespace (``unshare
-m``) where ``/etc/cron.daily`` and ``/etc/cron.weekly`` are replaced by a tmpfs holding
one harmless script: the real crontab lines run for real, but never the machine's own
daily jobs (apt, dpkg, man-db).
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from ..helpers import Process

SANDBOX_SETUP = r"""
set -e
for d in /etc/cron.daily /etc/cron.weekly; do
  if [ -d "$d" ]; then
    mount -t tmpfs pgsched-e2e "$d"
    printf '#!/bin/sh\necho "%s job ran in $(pwd)"\n' "$(basename $d)" > "$d/pgsched-e2e"
    chmod +x "$d/pgsched-e2e"
  fi
done
"""


def sandboxed(argv: list[str]) -> list[str]:
    """``argv`` run in a private mount namespace with the cron folders swapped out."""
    if shutil.which("unshare") is None:
        raise RuntimeError("the e2e crontab test needs unshare(1) (util-linux) and root")
    return [
        "unshare",
        "-m",
        "--propagation",
        "private",
        "sh",
        "-c",
        SANDBOX_SETUP + '\nexec "$@"',
        "sandbox",
        *argv,
    ]


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[list[Process]]:
    """Collects started processes; stops them (SIGTERM, then SIGKILL) after the test and
    prints their logs when it failed."""
    started: list[Process] = []
    yield started
    for proc in started:
        proc.stop()
        # captured by pytest and shown only when the test failed
        print(
            f"----- pgsched {' '.join(proc.args)} (exit {proc.proc.returncode}) -----\n{proc.output}"
        )


@pytest.fixture
def start(dsn: str, tmp_path: Path, processes: list[Process]):
    """``start("worker", "--concurrency", "4")`` starts ``pgsched worker ...`` on the test
    database and returns the :class:`Process`."""

    def _start(*args: str, env: dict | None = None, wrap=None) -> Process:
        proc = Process(dsn, *args, log_dir=tmp_path, env=env, wrap=wrap)
        processes.append(proc)
        return proc

    return _start

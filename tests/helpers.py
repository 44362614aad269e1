"""Test helpers: waiting on conditions (never a fixed sleep) and real pgsched processes."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


LIBFAKETIME = sorted(glob.glob("/usr/lib/*/faketime/libfaketimeMT.so.1"))


def clock_off(seconds: int) -> dict[str, str]:
    """The environment that runs a process with its wall clock ``seconds`` off (libfaketime,
    Debian package faketime), its monotonic clock left true, as a host whose clock is
    merely set wrong has it. Preloaded straight into the process rather than through the
    ``faketime`` wrapper, which forks and does not pass SIGTERM on: stopping the wrapper
    would leave the pgsched process running. ``tests/faketime/sitecustomize.py`` works
    around libfaketime's broken absolute sleeps (it explains)."""
    if not LIBFAKETIME:
        raise AssertionError("libfaketime is missing: apt-get install faketime")
    path = os.pathsep.join(
        p for p in (str(REPO / "tests" / "faketime"), os.environ.get("PYTHONPATH")) if p
    )
    return {
        "LD_PRELOAD": LIBFAKETIME[0],
        "FAKETIME": f"{seconds:+d}s",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        "PYTHONPATH": path,
    }


def utc(*args: int) -> datetime:
    """``datetime(*args)`` in UTC: expected instants written out by hand."""
    return datetime(*args, tzinfo=UTC)


def cron_fires(expr: str, tz: str, after: datetime, n: int) -> list[datetime | None]:
    """The next ``n`` fire times of ``expr`` in zone ``tz`` after ``after``, chained."""
    from pgsched import cron

    out: list[datetime | None] = []
    t: datetime | None = after
    for _ in range(n):
        t = cron.next_after(expr, tz, t) if t else None
        out.append(t)
    return out


def sessions_ended(sql: Any, application_name: str, timeout: float = 30.0) -> None:
    """Wait until no server session of this database has an application_name starting
    with ``application_name`` (e.g. ``pgsched worker``): after a SIGKILL, a commit the
    process sent just before it died can still land until its sessions end, so what it
    left is counted after that."""
    wait_until(
        lambda: (
            sql.execute(
                "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND starts_with(application_name, %s)",
                (application_name,),
            ).fetchone()["n"]
            == 0
        ),
        timeout=timeout,
        message=f"the sessions of {application_name!r} to end",
    )


def wait_for(
    predicate: Callable[[], Any],
    timeout: float = 15.0,
    interval: float = 0.05,
    what: str | Callable[[], str] = "condition",
) -> Any:
    """Poll ``predicate`` every ``interval`` seconds until it returns something truthy;
    return that. After ``timeout`` seconds raise AssertionError naming ``what`` (a string,
    or a callable giving one then, for a message that shows the state at the end) and the
    predicate's last value. The one way a test waits for something to happen: a fixed
    sleep is either too short on a loaded machine or too long everywhere else."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() >= deadline:
            break
        time.sleep(interval)
    raise AssertionError(
        f"timed out after {timeout}s waiting for {what() if callable(what) else what}; "
        f"last value: {last!r}"
    )


def wait_until(
    predicate: Callable[[], Any],
    timeout: float = 15.0,
    interval: float = 0.05,
    message: str = "condition",
) -> Any:
    """:func:`wait_for` under its older name (``message`` is ``what``), kept so that the
    200-odd calls need not change while pgsched/ is being restructured on other branches."""
    return wait_for(predicate, timeout=timeout, interval=interval, what=message)


def waiting_on_a_lock(sql: Any, application_name: str) -> bool:
    """Whether a session named ``application_name`` waits for a lock now (its
    pg_stat_activity row: wait_event_type 'Lock'): the proof that a concurrent statement
    blocks, where a fixed sleep only shows that it has not finished yet."""
    return (
        sql.execute(
            "SELECT count(*) AS n FROM pg_stat_activity WHERE application_name = %s "
            "AND wait_event_type = 'Lock'",
            [application_name],
        ).fetchone()["n"]
        >= 1
    )


def cli(
    dsn: str | None,
    *args: str,
    check: bool = True,
    env: dict | None = None,
    timeout: float = 60,
    wrap: Callable[[list[str]], list[str]] | None = None,
) -> subprocess.CompletedProcess:
    """Run ``python -m pgsched ARGS`` to completion against ``dsn`` (``wrap``: what runs
    the command line, e.g. under faketime)."""
    full_env = {**os.environ, **(env or {})}
    if dsn is not None:
        full_env["PGSCHED_DSN"] = dsn
    argv = [sys.executable, "-m", "pgsched", *args]
    proc = subprocess.run(
        wrap(argv) if wrap else argv, capture_output=True, text=True, env=full_env, timeout=timeout
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"pgsched {' '.join(args)} exited {proc.returncode}\n"
            f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
        )
    return proc


class Process:
    """A long-running ``pgsched`` process (scheduler, worker) whose stderr goes to a file."""

    def __init__(
        self,
        dsn: str,
        *args: str,
        log_dir: Path,
        env: dict | None = None,
        wrap: Callable[[list[str]], list[str]] | None = None,
        stdin: Any = None,
    ):
        self.args = args
        self.log_path = log_dir / f"{args[0]}-{time.monotonic_ns()}.log"
        self._log = open(self.log_path, "w")  # noqa: SIM115 (closed by stop(), after the process)
        argv = [sys.executable, "-m", "pgsched", "--log-level", "debug", *args]
        self.proc = subprocess.Popen(
            wrap(argv) if wrap else argv,
            stdin=stdin,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PGSCHED_DSN": dsn, **(env or {})},
        )

    @property
    def output(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text()

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode


def notifications_until_marker(
    listener: Any, sender: Any, channel: str = "pgsched_execution"
) -> list[str]:
    """Payloads on ``channel`` received by ``listener`` (a psycopg connection that LISTENs)
    up to a marker that ``sender`` sends on it after everything else.

    Notifications reach a listener in commit order, so once the marker arrives every
    earlier notification has arrived too: no fixed wait is needed to count them."""
    sender.execute("SELECT pg_notify(%s, 'marker')", [channel])
    payloads = []
    for notify in listener.notifies(timeout=10):
        if notify.payload == "marker":
            return payloads
        payloads.append(notify.payload)
    raise AssertionError(f"marker notification not received; got {payloads!r}")


def trigger(dsn: str, task: str) -> int:
    """Run ``task`` now through the CLI; the new execution's id."""
    import json

    return json.loads(cli(dsn, "task", "trigger", task, "--json").stdout)["execution_id"]


def finished(sql: Any, ident: int, timeout: float = 30) -> dict:
    """The history row of execution ``ident``, once it has ended."""
    return wait_until(
        lambda: sql.execute(
            "SELECT * FROM pgsched.execution_history WHERE id = %s", (ident,)
        ).fetchone(),
        timeout=timeout,
        message=f"execution {ident} ends",
    )


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie does not: init reaps orphans in its own time;
    proc(5): field 3 of /proc/PID/stat is the state). A process reaped between the open
    and the read makes the read fail with ESRCH (ProcessLookupError): gone too."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def fetch(url: str, token: str | None = None, timeout: float = 10) -> tuple[int, str]:
    """``(status, body)`` of a GET of ``url`` (with ``token`` as a Bearer token); ``(0, "")``
    when nothing answers, as while a server is starting."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        url, headers={"Authorization": f"Bearer {token}"} if token else {}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def log_line(sql: Any, execution_id: int, prefix: str, timeout: float = 30) -> str:
    """The first line of execution ``execution_id``'s log that starts with ``prefix``, waited
    for up to ``timeout`` seconds (``sql``: a connection with rows as dicts)."""
    row = wait_for(
        lambda: sql.execute(
            "SELECT line FROM pgsched.execution_log WHERE execution_id = %s AND line LIKE %s",
            (execution_id, prefix + "%"),
        ).fetchone(),
        timeout,
        what=f"execution {execution_id} prints {prefix!r}",
    )
    return row["line"]

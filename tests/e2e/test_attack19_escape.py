"""Attack 19 on what a timeout or a cancel ends (issue 19), on real workers: a command, or a
Python handler's child, starts a process that leaves its session (``setsid``) and clears its
environment (``env -i``), so neither the process group nor the command's mark finds it, and
then runs past its attempt's end. Each test asserts the secure outcome: the escapee is gone
within the kill grace, under each isolation level that has no PID namespace of its own."""

from __future__ import annotations

import contextlib
import os
import signal
import textwrap

import pytest

from pgsched.stores import tasks

from ..factories import make_task
from ..helpers import alive, cli, finished, log_line, trigger, wait_for

pytestmark = pytest.mark.e2e

WORKER = ("worker", "--poll-interval", "0.5", "--heartbeat-interval", "1", "--kill-grace", "1")

# the escapee: a new session, an empty environment (no mark, no token, no execution id)
ESCAPE = "setsid env -i /bin/sleep 300 & echo escapee $!; sleep 301"


def _session_and_env(pid: int) -> tuple[int, bytes]:
    with open(f"/proc/{pid}/stat", "rb") as f:
        session = int(f.read().rsplit(b")", 1)[1].split()[3])
    with open(f"/proc/{pid}/environ", "rb") as f:
        return session, f.read()


@contextlib.contextmanager
def _reaped(pids: list[int]):
    try:
        yield
    finally:  # a failing run must not leave its escapee behind
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("level", ["none", "rlimits"])
def test_attack19_a_commands_escapee_dies_at_its_timeout(db, sql, start, level):
    make_task(db, "escape", command=ESCAPE, timeout_seconds=2)
    extra = () if level == "none" else ("--isolation", level)
    worker = start(*WORKER, *extra)
    wait_for(lambda: "started" in worker.output, 30, what=lambda: worker.output)
    ident = tasks.trigger(db, "escape")
    pid = int(log_line(sql, ident, "escapee ").split()[1])
    pids = [pid]
    with _reaped(pids):
        wait_for(lambda: _session_and_env(pid)[0] == pid, 5, what="the escapee's own session")
        assert _session_and_env(pid)[1] == b""  # nothing of the mark's to find it by
        row = finished(sql, ident)
        assert row["state"] == "dead" and "timed out" in row["error"], row
        wait_for(lambda: not alive(pid), 3, what=f"escapee {pid} ends with its attempt")


PY_MODULE = textwrap.dedent("""
    import os, time
    from pgsched import App

    app = App()

    @app.task()
    def escape():
        pid = os.fork()
        if pid == 0:  # the grandchild: a session of its own, then sleep as a new program
            os.setsid()
            os.execve("/bin/sleep", ["sleep", "300"], {})
        print("escapee", pid, flush=True)
        time.sleep(300)
""")


def test_attack19_a_python_handlers_grandchild_dies_at_its_timeout(dsn, sql, start, tmp_path):
    (tmp_path / "escapetasks.py").write_text(PY_MODULE)
    cli(dsn, "task", "create", "escape", "--python", "escapetasks:escape", "--timeout", "2")
    worker = start(*WORKER, "--pythonpath", str(tmp_path))
    wait_for(lambda: "started" in worker.output, 30, what=lambda: worker.output)
    ident = trigger(dsn, "escape")
    pid = int(log_line(sql, ident, "escapee ").split()[1])
    with _reaped([pid]):
        wait_for(lambda: _session_and_env(pid)[0] == pid, 5, what="the grandchild's own session")
        row = finished(sql, ident)
        assert row["state"] == "dead" and "timed out" in row["error"], row
        wait_for(lambda: not alive(pid), 3, what=f"grandchild {pid} ends with its attempt")


# a daemon: its parent (a subshell) exits at once, so nothing links it to the command
DAEMON = "(setsid env -i /bin/sleep 300 & echo escapee $!); sleep 301"


@pytest.mark.parametrize(
    "level",
    [
        pytest.param(
            "rlimits",
            marks=pytest.mark.xfail(
                strict=True,
                reason="a daemon whose parents exited before the timeout is reparented to "
                "init with no mark: only a PID namespace (the sandbox) or a cgroup holds it; "
                "the guardian kills it with the worker at the latest (docs/security.md)",
            ),
        ),
        "sandbox",
    ],
)
def test_attack19_a_commands_daemon_dies_at_its_timeout(db, sql, start, level):
    make_task(db, "daemon", command=DAEMON, timeout_seconds=2)
    worker = start(*WORKER, "--isolation", level)
    wait_for(lambda: "started" in worker.output, 30, what=lambda: worker.output)
    ident = tasks.trigger(db, "daemon")
    inner = int(log_line(sql, ident, "escapee ").split()[1])
    found = [inner] if level == "rlimits" else []
    if level == "sandbox":  # $! is its pid in the sandbox's namespace: find it from the host
        found = wait_for(lambda: _sleepers_of(worker.proc.pid), 5, what="the daemon")
    with _reaped(found):
        row = finished(sql, ident)
        assert row["state"] == "dead" and "timed out" in row["error"], row
        wait_for(lambda: not any(map(alive, found)), 3, what=f"daemon {found} ends")


def _sleepers_of(worker: int) -> list[int]:
    """``sleep 300`` processes descending from the worker (seen from the host: in the
    sandbox, the daemon is reparented to bwrap's init, the worker's descendant)."""
    out = []
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if f.read() == b"/bin/sleep\x00300\x00" and _descends(int(entry), worker):
                    out.append(int(entry))
        except OSError:
            continue
    return out


def _descends(pid: int, ancestor: int) -> bool:
    while pid > 1:
        with open(f"/proc/{pid}/stat", "rb") as f:
            pid = int(f.read().rsplit(b")", 1)[1].split()[1])
        if pid == ancestor:
            return True
    return False

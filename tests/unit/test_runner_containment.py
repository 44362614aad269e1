"""A command's own process dies with the process that runs it (PR_SET_PDEATHSIG), even
without a guardian: run_command in a real child Python, SIGKILLed. A timeout or a stop
ends what left the command's process group too."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from datetime import UTC, datetime

import pytest

from pgsched.handlers.command import run_command
from pgsched.handlers.containment import setpriv_path
from pgsched.handlers.output import LogSink
from pgsched.handlers.start_gate import child_setup

from ..helpers import REPO, alive, wait_until

RUNNER = textwrap.dedent("""
    import sys
    from datetime import datetime, timezone
    from pgsched.handlers import start_gate
    from pgsched.handlers.command import run_command
    from pgsched.handlers.output import LogSink

    if sys.argv[2] == "preexec":  # as on a host without setpriv(1)
        start_gate.setpriv_path = lambda: None
    run_command(["sh", "-c", 'echo $$ > "$0"; exec sleep 300', sys.argv[1]], env={}, stdin=None, timeout=None,
                sink=LogSink(now=lambda: datetime.now(timezone.utc)))
""")


@pytest.mark.parametrize("how", ["setpriv", "preexec"])
def test_a_command_dies_with_the_process_that_runs_it(tmp_path, how):
    if how == "setpriv" and setpriv_path() is None:
        pytest.skip("no setpriv(1) with --pdeathsig (util-linux 2.33)")
    pid_file = tmp_path / "pid"
    runner = subprocess.Popen([sys.executable, "-c", RUNNER, str(pid_file), how], cwd=REPO)
    pid = None
    try:
        pid = int(
            wait_until(
                lambda: pid_file.exists() and pid_file.read_text().strip(), message="the command"
            )
        )
        assert alive(pid)

        def name() -> str:
            with open(f"/proc/{pid}/status") as f:
                return f.readline()

        # the command itself, exec'd by setpriv when there (the pid is written just before
        # the shell execs sleep: wait for the exec)
        wait_until(
            lambda: "sleep" in name(), timeout=5.0, interval=0.01, message="the shell to exec sleep"
        )
        runner.kill()
        wait_until(
            lambda: not alive(pid), timeout=2.0, interval=0.01, message="the command to die with it"
        )
    finally:
        runner.kill()
        runner.wait()
        if pid is not None and alive(pid):  # the test failed: leave no sleep behind
            os.kill(pid, signal.SIGKILL)


def test_a_child_whose_worker_died_before_the_prctl_took_never_starts_its_command():
    # the parent it was forked for (pid 1 here stands for "another process than ours") is gone
    child = subprocess.Popen(["sleep", "300"], preexec_fn=child_setup(parent_pid=1))
    try:
        assert child.wait(5) == 137
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("ending", ["timeout", "stop"])
def test_a_timeout_or_stop_ends_what_left_the_process_group(tmp_path, ending):
    pid_file = tmp_path / "pid"
    stop = threading.Event()
    if ending == "stop":
        threading.Thread(
            target=lambda: wait_until(pid_file.exists, message="the command") and stop.set(),
            daemon=True,
        ).start()
    command = """setsid sh -c 'echo $$ > "$0.tmp"; mv "$0.tmp" "$0"; exec sleep 300' "$F" &
                 (sleep 300 >/dev/null 2>&1 &); wait"""
    outcome = run_command(
        ["sh", "-c", command],
        env={**os.environ, "F": str(pid_file)},
        stdin=None,
        timeout=1.0 if ending == "timeout" else None,
        kill_grace=0.5,
        stop_grace=0.5,
        stop=stop,
        sink=LogSink(now=lambda: datetime.now(UTC)),
    )
    assert outcome.state == ("timed_out" if ending == "timeout" else "failed")
    pid = int(pid_file.read_text())
    try:
        assert not alive(pid), "the setsid'd process outlived its command's end"
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def _sink() -> LogSink:
    return LogSink(now=lambda: datetime.now(UTC))


def test_the_start_gate_refuses_a_command_whose_start_deadline_passed(tmp_path):
    """The deadline is checked in the child (between setpriv and the command): a command
    whose deadline passed before its spawn never runs, and run_command says so."""
    import time

    from pgsched.handlers.start_gate import StartDeadlinePassed

    ran = tmp_path / "ran"
    with pytest.raises(StartDeadlinePassed):
        run_command(
            ["sh", "-c", f"touch {ran}"],
            env={"PATH": "/usr/bin:/bin"},
            stdin=None,
            timeout=None,
            sink=_sink(),
            start_by=time.monotonic() - 0.05,
        )
    assert not ran.exists()
    outcome = run_command(
        ["sh", "-c", f"touch {ran}"],
        env={"PATH": "/usr/bin:/bin"},
        stdin=None,
        timeout=None,
        sink=_sink(),
        start_by=time.monotonic() + 5,
    )
    assert outcome.state == "succeeded" and ran.exists()


def test_a_command_that_exits_125_is_not_taken_for_a_refused_start():
    import time

    outcome = run_command(
        ["sh", "-c", "echo 'pgsched: not started: its start deadline had passed'; exit 125"],
        env={"PATH": "/usr/bin:/bin"},
        stdin=None,
        timeout=None,
        sink=_sink(),
        start_by=time.monotonic() + 5,
    )
    assert (outcome.state, outcome.exit_code) == ("failed", 125)

"""A worker's death ends what it ran (issue 15, item 3): its commands, what they start
in the background, what double-forks or leaves the session, and what Python tasks spawn
all die with it, so a rescued execution runs alone; and a worker's guardian kills nothing
that is not the worker's. Pids come from files the processes write."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from pgsched.handlers.guardian import SCAN_INTERVAL

from ..helpers import alive, cli, finished, trigger, wait_until

pytestmark = pytest.mark.e2e

WORKER = (
    "worker",
    "--heartbeat-interval",
    "1",
    "--poll-interval",
    "0.5",
    "--shutdown-timeout",
    "1",
)

# Each command writes the pids of what it starts into $D/NAME.*, then waits.
COMMANDS = {
    # a background grandchild in the command's own group
    "bg": 'echo $$ > "$D/bg.sh"; sleep 300 & echo $! > "$D/bg.child"; wait',
    # a new session (setsid), whose child is double-forked away from it (reparented to init)
    "detached": """setsid sh -c 'echo $$ > "$D/detached.leader"; (sleep 300 & echo $! > "$D/detached.orphan");
                   exec sleep 300' & wait""",
    # a new session with the environment cleared: only its parent and the guardian's scan tell
    "bare": 'setsid env -i /bin/sleep 300 & echo $! > "$D/bare.child"; wait',
}

MODULE = textwrap.dedent("""
    import os, subprocess, time
    from pgsched import App

    app = App()

    def note(d, name, pid):
        with open(os.path.join(d, name + ".tmp"), "w") as f:
            f.write(str(pid))
        os.rename(os.path.join(d, name + ".tmp"), os.path.join(d, name))

    @app.task()
    def spawner(d):
        note(d, "py.child", subprocess.Popen(["sleep", "300"]).pid)
        # neither the environment nor the session of the worker
        note(d, "py.bare", subprocess.Popen(["/bin/sleep", "300"], env={}, start_new_session=True).pid)
        pid = os.fork()  # no exec: it holds the worker's pipe to the guardian open
        if pid == 0:
            time.sleep(300)
            os._exit(0)
        note(d, "py.fork", pid)
        time.sleep(300)
""")


def started_at(pid: int) -> int | None:
    """Field 22 of /proc/PID/stat (clock ticks since boot), None when gone: with the pid,
    it names one process (a pid may be reused, never with the same start)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[19])
    except FileNotFoundError:
        return None


def age(pid: int) -> float:
    """Seconds since ``pid`` started (proc(5))."""
    start = started_at(pid)
    assert start is not None
    return time.clock_gettime(time.CLOCK_BOOTTIME) - start / os.sysconf("SC_CLK_TCK")


@pytest.fixture
def pids():
    """``pids(folder, names)`` waits for the pid files ``names`` and reads them. After the
    test, what is still alive of them (a failed test) is SIGKILLed."""
    seen: dict[int, int | None] = {}

    def _pids(folder: Path, names: list[str]) -> dict[str, int]:
        def read() -> dict[str, int] | None:
            found = {n: (folder / n).read_text().strip() for n in names if (folder / n).exists()}
            if len(found) < len(names) or not all(found.values()):
                return None
            return {n: int(v) for n, v in found.items()}

        got = wait_until(read, message=f"pid files {names}")
        seen.update((p, started_at(p)) for p in got.values())
        assert all(alive(p) for p in got.values()), got
        return got

    yield _pids
    for pid, start in seen.items():
        if start is not None and started_at(pid) == start and alive(pid):
            os.kill(pid, signal.SIGKILL)


def guardian_pid(worker) -> int:
    line = wait_until(
        lambda: re.search(
            r"commands die with the worker: pdeathsig \+ guardian \(pid (\d+)\)", worker.output
        ),
        message="the worker to say its containment",
    )
    return int(line.group(1))


@pytest.fixture
def bystanders(tmp_path):
    """Processes that are not the worker's: one the test runner started (in a session of its
    own, with a token of the same name but another value); reaped after the test."""
    procs = [
        subprocess.Popen(
            ["sleep", "300"],
            start_new_session=True,
            env={**os.environ, "PGSCHED_WORKER_TOKEN": "1-not-this-workers"},
        )
    ]
    yield procs
    for p in procs:
        p.kill()
        p.wait()


def test_a_sigkilled_worker_leaves_no_process_of_its_executions_alive(
    dsn, sql, start, tmp_path, bystanders, pids
):
    (tmp_path / "orphan_tasks.py").write_text(MODULE)
    for name, command in COMMANDS.items():
        cli(dsn, "task", "create", name, "--command", command, "--env", f"D={tmp_path}")
    cli(
        dsn,
        "task",
        "create",
        "spawner",
        "--python",
        "orphan_tasks:spawner",
        "--params",
        f'{{"d": "{tmp_path}"}}',
    )
    cli(
        dsn,
        "task",
        "create",
        "elsewhere",
        "--queue",
        "other",
        "--command",
        f'echo $$ > "{tmp_path}/other.sh"; exec sleep 300',
    )
    other = start(*WORKER, "--queue", "other")
    trigger(dsn, "elsewhere")
    theirs = pids(tmp_path, ["other.sh"])

    worker = start(*WORKER, "--concurrency", "4", "--pythonpath", str(tmp_path))
    guardian = guardian_pid(worker)
    for name in [*COMMANDS, "spawner"]:
        trigger(dsn, name)
    ours = pids(
        tmp_path,
        [
            "bg.sh",
            "bg.child",
            "detached.leader",
            "detached.orphan",
            "bare.child",
            "py.child",
            "py.bare",
            "py.fork",
        ],
    )
    # what neither carries the token nor stays in a watched session is known from the
    # guardian's scans of the worker's descendants: give it one
    wait_until(lambda: min(age(p) for p in ours.values()) > 2 * SCAN_INTERVAL, message="a scan")

    began = time.monotonic()
    worker.proc.kill()
    wait_until(
        lambda: not any(alive(p) for p in [*ours.values(), guardian]),
        timeout=2.0,
        interval=0.01,
        message="every process of the killed worker's executions to die",
    )
    print(f"\nlast orphan gone {time.monotonic() - began:.3f}s after the SIGKILL")
    worker.proc.wait(5)
    assert re.search(r"worker \d+ died: killed \d+ of its process\(es\)", worker.output)

    # nothing of another worker, nor of the test runner
    assert alive(theirs["other.sh"]) and other.proc.poll() is None
    assert all(p.poll() is None for p in bystanders)
    assert alive(guardian_pid(other))


TICKER = """
A=$PGSCHED_ATTEMPT; f="$D/ticks"
echo "start $A" >> "$f"
if [ "$A" = 1 ]; then
  setsid sh -c 'while :; do echo "tick 1" >> "$0"; sleep 0.05; done' "$f" &
  echo $! > "$D/ticker.detached"
  (while :; do echo "tick 1" >> "$f"; sleep 0.05; done) &
  echo $! > "$D/ticker.child"
  wait
fi
i=0; while [ $i -lt 20 ]; do echo "tick $A" >> "$f"; sleep 0.05; i=$((i+1)); done
echo "end $A" >> "$f"
"""


def test_the_rescued_copy_of_a_killed_workers_execution_runs_alone(dsn, sql, start, tmp_path, pids):
    cli(dsn, "task", "create", "ticker", "--command", TICKER, "--env", f"D={tmp_path}")
    start("scheduler", "--max-sleep", "0.5")
    first = start(*WORKER)
    ident = trigger(dsn, "ticker")
    ticks = tmp_path / "ticks"
    wait_until(
        lambda: ticks.exists() and ticks.read_text().count("tick 1") >= 4,
        message="attempt 1 to tick",
    )
    tickers = pids(tmp_path, ["ticker.detached", "ticker.child"])
    first.proc.kill()
    first.proc.wait(5)
    wait_until(
        lambda: not any(alive(p) for p in tickers.values()),
        timeout=2.0,
        interval=0.01,
        message="attempt 1's processes to die with their worker",
    )
    start(*WORKER)  # runs the rescued copy
    done = finished(sql, ident, timeout=30)
    assert done["state"] == "succeeded" and done["attempt"] == 2
    lines = ticks.read_text().splitlines()
    after = lines[lines.index("start 2") :]
    assert "tick 1" not in after, f"attempt 1 ran on beside its rescued copy: {after}"
    assert after == ["start 2", *["tick 2"] * 20, "end 2"]


def test_a_stopping_workers_guardian_ends_what_it_left_and_kills_nothing_else(
    dsn, sql, start, tmp_path, bystanders, pids
):
    cli(
        dsn,
        "task",
        "create",
        "leaves",
        "--command",
        f'sleep 300 >/dev/null 2>&1 & echo $! > "{tmp_path}/left"',
    )
    cli(
        dsn,
        "task",
        "create",
        "elsewhere",
        "--queue",
        "other",
        "--command",
        f'echo $$ > "{tmp_path}/other.sh"; exec sleep 300',
    )
    other = start(*WORKER, "--queue", "other")
    trigger(dsn, "elsewhere")
    theirs = pids(tmp_path, ["other.sh"])
    worker = start(*WORKER)
    guardian = guardian_pid(worker)
    assert finished(sql, trigger(dsn, "leaves"))["state"] == "succeeded"
    left = pids(tmp_path, ["left"])["left"]

    assert worker.stop(signal.SIGTERM) == 0
    assert not alive(guardian) and not alive(left)
    assert re.search(
        r"worker \d+ stopped: ended 1 process\(es\) it had left running", worker.output
    )
    assert alive(theirs["other.sh"]) and other.proc.poll() is None and alive(guardian_pid(other))
    assert all(p.poll() is None for p in bystanders)

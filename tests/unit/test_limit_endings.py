"""What ended a command, as its attempt's error says (pgsched/handlers/limit_kills.py), with
real commands under ``--isolation none``, ``rlimits`` and ``sandbox`` (root: they run as
nobody): a command that exits 152 by itself is not read as killed by SIGXCPU, one the CPU
limit kills is; a memory limit too small for a program to load is named; and what a worker
does not apply of a task's own settings, or refuses of its own (newcomer's findings, issue
19)."""

from __future__ import annotations

import os
import shutil
import signal
from datetime import UTC, datetime

import pytest

from pgsched.errors import ConfigError
from pgsched.handlers.command import run_command
from pgsched.handlers.isolation import Isolation, resolve
from pgsched.handlers.limit_kills import BWRAP, REPORTED, Ending, ending, limit_error
from pgsched.handlers.output import LogSink
from pgsched.handlers.rlimits import Limits

PY = "/usr/bin/python3"  # the system's, which nobody may run
root = pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists(PY), reason="needs root")


def _run(argv: list[str], iso: Isolation | None) -> str | None:
    sink = LogSink(now=lambda: datetime.now(UTC))
    if iso is None or not iso.isolated:
        return run_command(argv, env=dict(os.environ), stdin=None, timeout=30, sink=sink).error
    with iso.scratch() as scratch:
        return run_command(
            argv,
            env=iso.env(scratch),
            stdin=None,
            timeout=30,
            sink=sink,
            isolation=iso,
            workdir=scratch,
        ).error


SPIN = [PY, "-I", "-c", "while True: pass"]


@root
def test_a_command_that_exits_152_is_not_read_as_killed_by_the_cpu_limit():
    none = resolve("none")
    assert _run(["sh", "-c", "exit 152"], none) == "exited with code 152"
    assert _run(["sh", "-c", "kill -XCPU $$"], none) == "killed by signal SIGXCPU"
    rlimits = resolve("rlimits", limits=Limits(cpu=1))
    assert _run(["sh", "-c", "exit 152"], rlimits) == "exited with code 152"
    assert _run(SPIN, rlimits) == "killed: CPU time limit 1 s exceeded (SIGXCPU)"
    # a shell that did not exec what the limit killed: its 152, the CPU spent tells
    spun = _run(["sh", "-c", f"{PY} -I -c 'while True: pass'; exit $?"], rlimits)
    assert spun is not None and spun.startswith("killed: CPU time limit 1 s exceeded"), spun


@root
@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_under_bwrap_its_128_plus_n_is_said_to_be_ambiguous():
    sandbox = resolve("sandbox", limits=Limits(cpu=1))
    spun = _run(SPIN, sandbox)
    assert spun is not None and spun.startswith("killed: CPU time limit 1 s exceeded (SIGXCPU)")
    assert "a command that exits 152 itself reads the same" in spun
    assert _run(["sh", "-c", "exit 7"], sandbox) == "exited with code 7"


def test_an_exit_status_over_128_is_a_signal_only_when_something_says_so():
    cpu = Limits(cpu=2)
    assert ending(-24, [], cpu) == Ending(signal.SIGXCPU)
    assert ending(152, [], cpu, cpu_used=0.01) == Ending(None)  # exit 152, no CPU spent
    assert ending(152, [], cpu, cpu_used=2.0) == Ending(signal.SIGXCPU, REPORTED)
    assert ending(152, [], Limits()) == Ending(None)  # nothing says it: its exit status
    assert ending(137, ["sh: 1: Killed"], Limits()) == Ending(signal.SIGKILL, REPORTED)
    assert ending(152, [], cpu, bwrap=True) == Ending(signal.SIGXCPU, BWRAP)
    assert ending(130, [], Limits()) == Ending(None) and ending(200, [], cpu) == Ending(None)


@pytest.mark.parametrize(
    "line",
    [
        "/usr/bin/python3: error while loading shared libraries: libc.so.6: failed to map "
        "segment from shared object",
        "Fatal Python error: _PyMem_RawMalloc: out of memory",
        "Fatal Python error: init_import_site: Failed to import the site module: MemoryError",
        "Error occurred during initialization of VM: Could not reserve enough space for object "
        "heap",
        "OSError: [Errno 12] Cannot allocate memory: '/usr/lib/python3.11'",
    ],
)
def test_a_program_that_cannot_load_under_the_memory_limit_is_named(line):
    error = limit_error(None, ["Python path configuration:", line], Limits(memory=8 * 1024**2))
    assert error is not None and error.startswith("memory limit 8MB (address space, RLIMIT_AS)")


@root
def test_a_memory_limit_too_small_to_start_the_interpreter_is_named():
    for size in (6, 10, 12):  # the loader cannot map libc, or Python cannot start
        error = _run(
            [PY, "-I", "-c", "pass"], resolve("rlimits", limits=Limits(memory=size * 1024**2))
        )
        assert error is not None and f"memory limit {size}MB" in error, (size, error)


def test_what_a_worker_does_not_apply_of_a_tasks_own_settings_is_said():
    task = {"limit_cpu_seconds": 5, "limit_memory_bytes": 1024**3, "network": False}
    note = Isolation().ignored(task)
    assert note is not None and "cpu 5s, memory 1GB; network deny not applied" in note
    assert "--isolation none" in note
    assert Isolation().ignored({"network": None}) is None
    assert "network deny not applied" in str(Isolation(level="rlimits").ignored(task))
    assert Isolation(level="sandbox").ignored(task) is None


def test_allow_network_where_it_changes_nothing_is_refused_naming_both_options():
    for level in ("rlimits", "none"):
        with pytest.raises(ConfigError) as err:
            resolve(level, network=True)
        assert f"--allow-network with --isolation {level} changes nothing" in str(err.value)

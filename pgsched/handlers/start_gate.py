"""A command's start: its child started with the death signal set (under setpriv(1), or a
preexec function without it), and not once its start deadline has passed (the start gate
and its refusal). No SQL here.

A worker frozen between proving its lease and the fork (SIGSTOP, a paused VM) may wake past
its start deadline, when its lease may have been rescued meanwhile: the child checks the
deadline as its last step before the command and starts nothing then (issue 15, item 2).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Mapping

from .containment import die_with_worker, setpriv_path

# The start gate of a command spawned without a preexec function (one made subprocess fork
# the whole worker instead of vfork: 4-5 times fewer spawns a second in a busy worker). A
# POSIX shell, exec'd between setpriv and the command, is the child's last step before the
# command: past the deadline ($1, CLOCK_BOOTTIME centiseconds as /proc/uptime counts them,
# proc(5)) it prints the refusal line ($2, unique to this spawn, so no command's own output
# can pass for it) and exits 125 without starting the command; else it execs the command.
_START_GATE = (
    "read up _ </proc/uptime; up=${up%.*}${up#*.}; "
    'if [ "$up" -gt "$1" ]; then printf "%s\\n" "$2"; exit 125; fi; shift 2; exec "$@"'
)
GATE_REFUSED = 125


class StartDeadlinePassed(Exception):
    """The command was not started: its start deadline (``start_by``, CLOCK_MONOTONIC
    seconds) had passed when the child was about to exec it (the worker was frozen, or
    slow, between proving its lease and the fork). Nothing of the command ran."""


class _LateStart(Exception):
    """Raised in the child between fork and exec: subprocess reports it to the parent as
    SubprocessError and the command never runs."""


def _check_start_deadline(start_by: float | None) -> None:
    """In the child, between fork and exec: refuse to exec once ``start_by`` (CLOCK_MONOTONIC
    seconds, one clock for the whole host, so the parent's reading and the child's agree) has
    passed. This is the last instant before the command starts: a worker stopped (SIGSTOP, a
    paused VM) after its parent-side check but before the fork wakes past the deadline and
    starts nothing; its lease may have been rescued meanwhile (issue 15, item 2)."""
    if start_by is not None and time.monotonic() > start_by:
        raise _LateStart()


def child_setup(parent_pid: int, start_by: float | None = None) -> Callable[[], None]:
    """The preexec_fn of a command's child where setpriv(1) is missing: every step the child
    takes before exec (die with the worker, then the start deadline)."""

    def setup() -> None:
        die_with_worker(parent_pid)
        _check_start_deadline(start_by)

    return setup


def spawn_args(
    argv: list[str],
    env: Mapping[str, str],
    start_by: float | None = None,
    refusal: str | None = None,
) -> tuple[list[str], Callable[[], None] | None]:
    """The argv and preexec function that start ``argv`` with PR_SET_PDEATHSIG set, and,
    given ``start_by``, not once it has passed: under setpriv when it is there and
    ``argv[0]`` can be found (else the OSError of a command that cannot start says why, as
    without setpriv), the deadline checked by the start gate (``refusal``: the line it prints
    when it refuses); else both in a preexec function (:func:`child_setup`)."""
    setpriv = setpriv_path()
    if setpriv is not None and shutil.which(argv[0], path=env.get("PATH", os.defpath)):
        if start_by is None or refusal is None:
            return [setpriv, "--pdeathsig", "KILL", "--", *argv], None
        boot_by = start_by + time.clock_gettime(time.CLOCK_BOOTTIME) - time.monotonic()
        return [
            setpriv,
            "--pdeathsig",
            "KILL",
            "--",
            "/bin/sh",
            "-c",
            _START_GATE,
            "pgsched-start-gate",
            str(int(boot_by * 100)),
            refusal,
            *argv,
        ], None
    return argv, child_setup(os.getpid(), start_by)

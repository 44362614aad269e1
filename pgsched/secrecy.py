"""A running process's database login kept out of reach of the processes it starts (its
commands, their guardian): gone from its environment, wiped from what /proc shows of it,
and the process not dumpable. Called once by every long-running process
(:mod:`pgsched.node`), once the login has been read (:mod:`pgsched.login`), before any
task runs. docs/security.md, "What a task can see", says what a task still sees.

Why wipe the bytes in place. ``/proc/PID/environ`` and ``/proc/PID/cmdline`` do not show
``os.environ`` or ``sys.argv``: they show the memory of the process between the addresses
``env_start``..``env_end`` and ``arg_start``..``arg_end`` (proc(5), fields 48-51 of
/proc/PID/stat), where execve(2) laid out its environment and arguments. Removing a
variable (unsetenv(3)) only takes its pointer out of ``environ``; its bytes stay, and root
reads any process's environ whatever its dumpability (the CI runs as root), while every
user of the host reads its cmdline. So, as PostgreSQL's own ps_status.c and setproctitle
write over the argument area: first no live pointer is left into what is wiped (the
variables pgsched has read are removed; the two libpq reads again at each connection,
``PGSYSCONFDIR`` and, before libpq 18, ``PGSERVICEFILE``, are set again, which copies them
to the heap), then each value is
overwritten with NUL bytes where it lies. The alternative, the process exec'ing itself
once with the login handed over on a pipe, costs a second interpreter start on every
worker start and moves the window instead of closing it: between execve and the wipe (the
interpreter's start, about 0.1 s, before any task runs) the login shows either way.

``--dsn`` on the command line is wiped the same way (the value after ``--dsn``, or after
``--dsn=``) rather than refused: a DSN without a password (peer or trust authentication, a
passfile) is common there and harmless; one with a password is warned about, since other
users of the host could read it until the wipe: ``--dsn-file`` or ``PGSCHED_DSN`` is the
way to give one.

Not dumpable (``prctl(PR_SET_DUMPABLE, 0)``, prctl(2)): a process of the same user that is
not root (a command, which a worker runs as its own user) may no longer read this
process's /proc/PID/environ, mem, fd/, maps..., nor ptrace it; nor is a core dump written.
A child is dumpable again after its own execve, so the guardian can still read its
commands' environment. Root, and a process with CAP_SYS_PTRACE, read everything, memory
included, where the DSN lives in the connection pool: what runs as root is trusted.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from .login import CREDENTIAL_ENV, has_password, libpq_keyword
from .secret_refs import secret_variable

log = logging.getLogger(__name__)

PR_SET_DUMPABLE = 4  # prctl(2), <linux/prctl.h>
PR_GET_DUMPABLE = 3

#: What sys.argv holds instead of a --dsn value.
HIDDEN = "<hidden>"


@dataclass
class Concealed:
    """What :func:`conceal` did: the variables wiped from /proc/PID/environ, the
    ``--dsn`` values wiped from /proc/PID/cmdline, whether one carried a password, and
    whether the process is now not dumpable."""

    variables: list[str] = field(default_factory=list)
    arguments: int = 0
    argv_password: bool = False
    undumpable: bool = False


def conceal() -> Concealed:
    """Keep this process's login from what it starts and from /proc (see the module's
    docstring); idempotent. Called once the DSN carries libpq's credential variables
    (:func:`pgsched.login.with_credentials`, as the CLI's ``Context.dsn`` does): those with a
    keyword leave the environment. Logs a warning when a ``--dsn`` argument carried a password,
    and when /proc/self/stat does not tell the areas (then nothing can be wiped)."""
    done = Concealed()
    for name in CREDENTIAL_ENV & set(os.environ):
        value = os.environ.pop(name)
        if name.startswith("PG") and not name.startswith("PGSCHED_") and not libpq_keyword(name):
            os.environ[name] = value  # libpq reads it again: a copy on the heap, passed on to none
    areas = _areas()
    if areas is None:
        log.warning("/proc/self/stat shows no argument and environment areas: nothing wiped")
    else:
        arg_start, arg_end, env_start, env_end = areas
        done.variables = [
            kept[:-1].decode(errors="replace")
            for kept, _ in _wipe(env_start, env_end, _credential_variable)
        ]
        values = [value for _, value in _wipe(arg_start, arg_end, _dsn_argument)]
        done.arguments = len(values)
        done.argv_password = any(has_password(v.decode(errors="replace")) for v in values)
    _hide_in_sys_argv()
    done.undumpable = _set_undumpable()
    if done.argv_password:
        log.warning(
            "--dsn on the command line carried a password, which every user of this host could "
            "read in /proc/%d/cmdline until now: give it in a file (--dsn-file) or PGSCHED_DSN",
            os.getpid(),
        )
    return done


def _areas() -> tuple[int, int, int, int] | None:
    """``(arg_start, arg_end, env_start, env_end)`` of this process (proc(5): fields 48-51
    of /proc/PID/stat, after the command name, which may hold spaces and parentheses);
    None when they are not shown (Linux before 3.5, no procfs)."""
    try:
        with open("/proc/self/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        areas = tuple(int(x) for x in fields[45:49])
    except (OSError, IndexError, ValueError):
        return None
    if len(areas) != 4 or not all(areas) or areas[0] > areas[1] or areas[2] > areas[3]:
        return None
    return areas  # type: ignore[return-value]


def _credential_variable(entry: bytes, _previous: bytes | None) -> int | None:
    """Where the value of an environment entry ``NAME=value`` to wipe starts (after the
    ``=``: the name stays), or None to keep it."""
    name, eq, _ = entry.partition(b"=")
    text = name.decode(errors="replace")
    if eq and (text in CREDENTIAL_ENV or secret_variable(text)):  # a login, or a secret's key
        return len(name) + 1
    return None


def _dsn_argument(entry: bytes, previous: bytes | None) -> int | None:
    """Where the DSN in an argument starts: all of the one after ``--dsn``, or after
    ``--dsn=``; None for any other argument."""
    if previous == b"--dsn":
        return 0
    if entry.startswith(b"--dsn="):
        return len(b"--dsn=")
    return None


def _wipe(
    start: int, end: int, where: Callable[[bytes, bytes | None], int | None]
) -> list[tuple[bytes, bytes]]:
    """Overwrite with NUL bytes, in the memory ``start``..``end`` of this process (NUL
    separated entries), the part of each entry from the offset ``where(entry,
    previous_entry)`` returns (None: keep it); the terminating NULs stay, so the kernel
    still finds the end of the area. Returns ``(kept, wiped)`` of each entry wiped (an
    environment entry's kept part is ``NAME=``)."""
    block = ctypes.string_at(start, end - start)
    wiped: list[tuple[bytes, bytes]] = []
    offset, previous = 0, None
    for entry in block.split(b"\0"):
        at = where(entry, previous) if entry else None
        if at is not None and at < len(entry):
            ctypes.memset(start + offset + at, 0, len(entry) - at)
            wiped.append((entry[:at], entry[at:]))
        previous = entry
        offset += len(entry) + 1
    return wiped


def _hide_in_sys_argv() -> None:
    """The interpreter's own copies of the arguments (``sys.argv``, ``sys.orig_argv``):
    ``--dsn`` values replaced by :data:`HIDDEN`, so no log line or Python task prints
    them from there."""
    for argv in (sys.argv, getattr(sys, "orig_argv", [])):
        for i, arg in enumerate(argv):
            if i > 0 and argv[i - 1] == "--dsn":
                argv[i] = HIDDEN
            elif arg.startswith("--dsn="):
                argv[i] = f"--dsn={HIDDEN}"


def _set_undumpable() -> bool:
    """``prctl(PR_SET_DUMPABLE, 0)``; whether the process is now not dumpable (False where
    there is no prctl: not Linux)."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return False
    if prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        log.warning("prctl(PR_SET_DUMPABLE, 0) failed: %s", os.strerror(ctypes.get_errno()))
        return False
    return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0) == 0

"""Which resource limit ended a command, for its attempt's error. No SQL here.

A limit shows in one of two ways (setrlimit(2)): the kernel's signal (RLIMIT_CPU: SIGXCPU,
then SIGKILL at the hard limit a second later; RLIMIT_FSIZE: SIGXFSZ), which is certain; or
a call that fails (RLIMIT_AS: an allocation, ENOMEM; RLIMIT_NOFILE: open, EMFILE;
RLIMIT_NPROC: fork, EAGAIN), which the program itself reports or not. For those the error
names the limit when the command's last lines of stderr say what the C library, Python or
the shell print for that failure; a program that says nothing, or dies of it otherwise
(a SIGSEGV after an unchecked malloc), is reported by its exit status alone.
"""

from __future__ import annotations

import re
import signal

from .rlimits import Limits, human_size

# What programs print when the failing call is the one a limit refuses: strerror(3) of
# ENOMEM / EMFILE / EAGAIN, Python's exceptions, bash's and dash's fork messages.
_MEMORY = re.compile(
    r"MemoryError|Cannot allocate memory|out of memory|bad_alloc|memory exhausted", re.I
)
_NOFILE = re.compile(r"Too many open files")
_NPROC = re.compile(
    r"fork: (retry: )?Resource temporarily unavailable|[Cc]an(no|')t fork|BlockingIOError"
)
_FSIZE = re.compile(r"File too large")


def signal_of(code: int) -> int | None:
    """The signal that ended a command, from its exit status: a negative Popen returncode;
    or a code above 128 that names a signal, as bwrap (for the command it runs) and the
    shells (for the last command of ``sh -c``) exit ``128 + N`` for a child killed by signal
    N. A command that exits 152 itself is taken for one killed by SIGXCPU."""
    if code < 0:
        return -code
    if code > 128:
        try:
            return signal.Signals(code - 128).value
        except ValueError:
            return None
    return None


def limit_error(sig: int | None, stderr_tail: list[str], limits: Limits) -> str | None:
    """The error naming the limit that ended the command, or None when none is shown to
    have: ``killed: CPU time limit 2 s exceeded (SIGXCPU)``."""
    if sig == signal.SIGXCPU and limits.cpu is not None:
        return f"killed: CPU time limit {limits.cpu} s exceeded (SIGXCPU)"
    if sig == signal.SIGKILL and limits.cpu is not None:  # or the OOM killer: not told apart
        return (
            f"killed by SIGKILL: the CPU time limit {limits.cpu} s, if it ignored SIGXCPU (the "
            f"hard limit, {limits.cpu + 1} s, kills), or another kill (the OOM killer)"
        )
    if sig == signal.SIGXFSZ and limits.fsize is not None:
        return f"killed: file size limit {human_size(limits.fsize)} exceeded (SIGXFSZ)"
    checks = (
        (_MEMORY, limits.memory, "memory limit {} (address space, RLIMIT_AS) reached"),
        (_NOFILE, limits.nofile, "open files limit {} (RLIMIT_NOFILE) reached"),
        (_NPROC, limits.nproc, "process limit {} (RLIMIT_NPROC) reached"),
        (_FSIZE, limits.fsize, "file size limit {} (RLIMIT_FSIZE) reached"),
    )
    for line in reversed(stderr_tail):
        for pattern, value, text in checks:
            if value is not None and pattern.search(line):
                shown = human_size(value) if pattern in (_MEMORY, _FSIZE) else value
                return f"{text.format(shown)}: {line.strip()[:200]!r}"
    return None

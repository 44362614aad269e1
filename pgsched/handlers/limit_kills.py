"""Which resource limit ended a command, for its attempt's error. No SQL here.

A limit shows in one of two ways (setrlimit(2)): the kernel's signal (RLIMIT_CPU: SIGXCPU,
then SIGKILL at the hard limit a second later; RLIMIT_FSIZE: SIGXFSZ); or a call that fails
(RLIMIT_AS: an allocation or the loader's mapping of a program, ENOMEM; RLIMIT_NOFILE: open,
EMFILE; RLIMIT_NPROC: fork, EAGAIN), which the program itself reports or not. For those the
error names the limit when the command's last lines of stderr say what the C library, the
loader, Python or the shells print for that failure; a program that says nothing is
reported by its exit status alone (a SIGSEGV under a memory limit is said to be possibly
it: a program that cannot even be mapped, or an unchecked malloc).

Whether a signal ended the command (:func:`ending`): certain when the worker's own child
died of it (a negative Popen returncode: the wrappers exec, so an argv command is that
child). An exit status ``128 + N`` is the command's own, or its reporter's word for a death
by signal N (a shell's for a command it did not exec, bwrap's for what it ran): it is taken
for signal N only when something tells so, the shell's words for N in the stderr tail
("CPU time limit exceeded", "Killed"), or for the CPU limit's signals the CPU time the
command's processes spent (``wait4``'s rusage: under the limit, RLIMIT_CPU sent nothing).
Under bwrap the rusage is not the command's (bwrap does not wait for it), so bwrap's
``128 + N`` alone is read as signal N and the error says a command exiting ``128 + N``
itself reads the same: that is what remains ambiguous.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

from .rlimits import Limits, human_size

# What programs print when the failing call is the one a limit refuses: strerror(3) of
# ENOMEM / EMFILE / EAGAIN, the loader's ("error while loading shared libraries: libc.so.6:
# failed to map segment from shared object"), Python's exceptions and fatal errors, a JVM's,
# bash's and dash's fork messages.
_MEMORY = re.compile(
    r"MemoryError|Cannot allocate memory|out of memory|bad_alloc|memory exhausted"
    r"|failed to map segment|cannot map zero-fill pages|Could not reserve enough space"
    r"|Fatal Python error: .*memory|\bENOMEM\b",
    re.I,
)
_NOFILE = re.compile(r"Too many open files")
_NPROC = re.compile(
    r"fork: (retry: )?Resource temporarily unavailable|[Cc]an(no|')t fork|BlockingIOError"
)
_FSIZE = re.compile(r"File too large")

CERTAIN, REPORTED, BWRAP = "certain", "reported", "bwrap"


@dataclass(frozen=True)
class Ending:
    """How a command ended: ``signal`` (None: it exited) and on what ``basis`` that is
    said: :data:`CERTAIN` (its exit status says so), :data:`REPORTED` (a ``128 + N`` the
    shell's words or the CPU spent confirm) or :data:`BWRAP` (bwrap's ``128 + N`` alone)."""

    signal: int | None
    basis: str = CERTAIN

    def caveat(self, code: int) -> str:
        """What the error adds when only bwrap's exit status tells the signal."""
        if self.basis != BWRAP:
            return ""
        return f" (bwrap's exit status {code}: a command that exits {code} itself reads the same)"


def ending(
    code: int,
    stderr_tail: list[str],
    limits: Limits,
    *,
    cpu_used: float | None = None,
    bwrap: bool = False,
) -> Ending:
    """How a command with exit status ``code`` (Popen's returncode) ended; ``cpu_used``:
    the CPU seconds its processes spent (None: not known), ``bwrap``: bwrap ran it."""
    if code < 0:
        return Ending(-code)
    if code <= 128:
        return Ending(None)
    try:
        sig = signal.Signals(code - 128)
    except ValueError:
        return Ending(None)
    words = signal.strsignal(sig)
    if words and any(words in line for line in stderr_tail):  # dash: "Killed"
        return Ending(sig.value, REPORTED)
    if sig in (signal.SIGXCPU, signal.SIGKILL) and limits.cpu is not None and cpu_used is not None:
        if cpu_used >= limits.cpu - 0.1:  # the kernel's accounting ticks: a little slack
            return Ending(sig.value, REPORTED)
        if sig == signal.SIGXCPU:  # under the limit: RLIMIT_CPU sent nothing
            return Ending(None)
    return Ending(sig.value, BWRAP) if bwrap else Ending(None)


def limit_error(end: Ending | int | None, stderr_tail: list[str], limits: Limits) -> str | None:
    """The error naming the limit that ended the command, or None when none is shown to
    have: ``killed: CPU time limit 2 s exceeded (SIGXCPU)``. ``end``: :func:`ending`'s (a
    bare signal number: a certain one)."""
    if not isinstance(end, Ending):
        end = Ending(end)
    sig = end.signal
    caveat = end.caveat(128 + sig) if sig is not None else ""
    if sig == signal.SIGXCPU and limits.cpu is not None:
        return f"killed: CPU time limit {limits.cpu} s exceeded (SIGXCPU){caveat}"
    if sig == signal.SIGKILL and limits.cpu is not None:  # or the OOM killer: not told apart
        return (
            f"killed by SIGKILL: the CPU time limit {limits.cpu} s, if it ignored SIGXCPU (the "
            f"hard limit, {limits.cpu + 1} s, kills), or another kill (the OOM killer){caveat}"
        )
    if sig == signal.SIGXFSZ and limits.fsize is not None:
        return f"killed: file size limit {human_size(limits.fsize)} exceeded (SIGXFSZ){caveat}"
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
    if sig == signal.SIGSEGV and limits.memory is not None:
        return (
            f"killed by SIGSEGV: possibly the memory limit {human_size(limits.memory)} "
            "(address space, RLIMIT_AS): a program too big to be mapped under it, or one that "
            f"does not check an allocation{caveat}"
        )
    return None

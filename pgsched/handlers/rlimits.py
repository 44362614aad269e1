"""Resource limits of a command (setrlimit(2), set by prlimit(1) from util-linux) and the
worker options that give them (``--limit-cpu 60s --limit-memory 1GB``...). No SQL here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..errors import ValidationError

_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024**2, "mb": 1024**2}
_UNITS |= {"mib": 1024**2, "g": 1024**3, "gb": 1024**3, "gib": 1024**3, "t": 1024**4}
_UNITS |= {"tb": 1024**4, "tib": 1024**4}
_TIME_UNITS = {"": 1, "s": 1, "m": 60, "min": 60, "h": 3600}


def parse_size(name: str, text: str | None) -> int | None:
    """``"1GB"``, ``"512M"``, ``"65536"`` -> bytes (binary units: 1 GB = 1024**3 bytes, as
    ulimit(1) and prlimit count); None for None or ``"unlimited"``. Raises ValidationError
    naming ``name``."""
    if text is None or text.strip().lower() in ("", "unlimited"):
        return None
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    if m is None or m.group(2).lower() not in _UNITS or int(m.group(1)) == 0:
        raise ValidationError(name, text, "must be a positive size such as 512MB, 1GB or 65536")
    return int(m.group(1)) * _UNITS[m.group(2).lower()]


def parse_seconds(name: str, text: str | None) -> int | None:
    """``"60s"``, ``"2m"``, ``"90"`` -> whole seconds (RLIMIT_CPU counts whole seconds);
    None for None or ``"unlimited"``. Raises ValidationError naming ``name``."""
    if text is None or text.strip().lower() in ("", "unlimited"):
        return None
    m = re.fullmatch(r"\s*(\d+)\s*([a-zA-Z]*)\s*", text)
    if m is None or m.group(2).lower() not in _TIME_UNITS or int(m.group(1)) == 0:
        raise ValidationError(name, text, "must be a positive whole number of seconds: 60s, 2m")
    return int(m.group(1)) * _TIME_UNITS[m.group(2).lower()]


def parse_count(name: str, text: str | None) -> int | None:
    """``"1024"`` -> 1024; None for None or ``"unlimited"``. Raises ValidationError."""
    if text is None or text.strip().lower() in ("", "unlimited"):
        return None
    if not text.strip().isdigit() or int(text) == 0:
        raise ValidationError(name, text, "must be a positive whole number")
    return int(text)


@dataclass(frozen=True)
class Limits:
    """Resource limits of one command (None: not limited), each set as soft and hard limit
    by setrlimit(2) (getrlimit(2) says what each means): ``cpu`` seconds of CPU time
    (RLIMIT_CPU: SIGXCPU at the limit, SIGKILL one second later), ``memory`` bytes of
    address space (RLIMIT_AS: an allocation past it fails, which most programs report and
    exit on), ``nofile`` open descriptors (RLIMIT_NOFILE), ``nproc`` processes and threads
    of the command's user, all of them on the host (RLIMIT_NPROC: fork(2) fails with
    EAGAIN), ``fsize`` bytes of one file written (RLIMIT_FSIZE: SIGXFSZ)."""

    cpu: int | None = None
    memory: int | None = None
    nofile: int | None = None
    nproc: int | None = None
    fsize: int | None = None

    @classmethod
    def parse(
        cls,
        cpu: str | None = None,
        memory: str | None = None,
        nofile: str | None = None,
        nproc: str | None = None,
        fsize: str | None = None,
    ) -> Limits:
        """From the worker's options (``--limit-cpu 60s --limit-memory 1GB ...``)."""
        return cls(
            cpu=parse_seconds("limit_cpu", cpu),
            memory=parse_size("limit_memory", memory),
            nofile=parse_count("limit_nofile", nofile),
            nproc=parse_count("limit_nproc", nproc),
            fsize=parse_size("limit_fsize", fsize),
        )

    def any(self) -> bool:
        return any(
            v is not None for v in (self.cpu, self.memory, self.nofile, self.nproc, self.fsize)
        )

    def prlimit_args(self) -> list[str]:
        """prlimit(1)'s options for these limits (``SOFT:HARD``)."""
        out = []
        if self.cpu is not None:  # the hard limit a second later: SIGXCPU first, then SIGKILL
            out.append(f"--cpu={self.cpu}:{self.cpu + 1}")
        for opt, value in (
            ("as", self.memory),
            ("nofile", self.nofile),
            ("nproc", self.nproc),
            ("fsize", self.fsize),
        ):
            if value is not None:
                out.append(f"--{opt}={value}:{value}")
        return out

    def describe(self) -> str:
        parts = [
            f"cpu {self.cpu}s" if self.cpu is not None else None,
            f"memory {human_size(self.memory)}" if self.memory is not None else None,
            f"nofile {self.nofile}" if self.nofile is not None else None,
            f"nproc {self.nproc}" if self.nproc is not None else None,
            f"fsize {human_size(self.fsize)}" if self.fsize is not None else None,
        ]
        return ", ".join(p for p in parts if p) or "none"


NO_LIMITS = Limits()


def human_size(n: int | None) -> str:
    """Bytes as the largest binary unit that divides them: 1073741824 -> ``1GB``."""
    if n is None:
        return "unlimited"
    for unit, size in (("TB", 1024**4), ("GB", 1024**3), ("MB", 1024**2), ("KB", 1024)):
        if n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"


# a task's own limit fields (migration 0032) -> the Limits attribute each sets
_TASK_LIMITS = {
    "limit_cpu_seconds": "cpu",
    "limit_memory_bytes": "memory",
    "limit_nofile": "nofile",
    "limit_nproc": "nproc",
    "limit_fsize_bytes": "fsize",
}


def task_limits(worker: Limits, task: Mapping[str, Any]) -> Limits:
    """The limits of one task's commands: each of its ``limit_*`` (a claimed row's) that is
    set, else the worker's."""
    own = {attr: task.get(name) for name, attr in _TASK_LIMITS.items()}
    return replace(worker, **{k: v for k, v in own.items() if v is not None})

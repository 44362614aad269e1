"""The ``pgsched`` command line. It parses flags and prints; the work is done by the
library modules. See :mod:`pgsched.cli.root` for the group and its global options."""

from __future__ import annotations

from . import dags, dlq, executions, processes, schedules, tasks, web  # noqa: F401  (they register their commands)
from .root import main

__all__ = ["main", "run"]


def run() -> None:
    main(prog_name="pgsched")

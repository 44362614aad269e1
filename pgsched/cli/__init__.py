"""The ``pgsched`` command line. It parses flags and prints; the work is done by the
library modules. See :mod:`pgsched.cli.root` for the group and its global options; the
command modules are imported when their command is used (``root._Group.LAZY``)."""

from __future__ import annotations

from .root import main

__all__ = ["main", "run"]


def run() -> None:
    main(prog_name="pgsched")

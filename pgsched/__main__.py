"""``python -m pgsched``: the same as the ``pgsched`` command."""

from .cli import run

run()

"""Locates the folders pgsched ships beside its code: ``sql/``, ``migrations/``,
``templates/`` and ``examples/``.

In a wheel they live in ``pgsched/_resources/<name>`` (see ``pyproject.toml``'s
``force-include``); in a source checkout or an editable install they are the
repository's top-level folders. This is the one place that knows both.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    """Return the folder ``name`` (``"sql"``, ``"migrations"``, ``"templates"``,
    ``"examples"``), packaged copy first, then the source tree.

    Raises FileNotFoundError when neither exists (a broken install).
    """
    for candidate in (_PACKAGE / "_resources" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"pgsched resource folder {name!r} is missing from this install")

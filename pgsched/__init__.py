"""pgsched: a distributed task scheduler whose only infrastructure is one PostgreSQL
database. The Python API is :class:`App` and its ``@app.task`` decorator.

The names below are imported when first used (PEP 562), so that importing a pure module
(``pgsched.cron``, ``pgsched.taskspec``) does not load psycopg, Starlette or click."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import App
    from .errors import PgschedError, ValidationError
    from .handlers.python import TaskInterrupted

# public name -> the module that defines it
_LAZY = {
    "App": "pgsched.app",
    "PgschedError": "pgsched.errors",
    "TaskInterrupted": "pgsched.handlers.python",
    "ValidationError": "pgsched.errors",
}

__all__ = ["App", "PgschedError", "TaskInterrupted", "ValidationError"]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'pgsched' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value  # later look-ups skip this function
    return value

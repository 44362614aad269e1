"""pgsched: a distributed task scheduler whose only infrastructure is one PostgreSQL
database. The Python API is :class:`App` and its ``@app.task`` decorator.

The names below are imported when first used (PEP 562), so that importing a pure module
(``pgsched.cron``, ``pgsched.taskspec``) does not load psycopg, Starlette or click."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import exports

if TYPE_CHECKING:
    from .app import App
    from .context import Context
    from .errors import LockTimeout, PgschedError, ValidationError
    from .handlers.python import TaskInterrupted
    from .waiting import ExecutionFailed

# public name -> the module that defines it
_LAZY = {
    "App": "pgsched.app",
    "Context": "pgsched.context",
    "ExecutionFailed": "pgsched.waiting",
    "LockTimeout": "pgsched.errors",
    "PgschedError": "pgsched.errors",
    "TaskInterrupted": "pgsched.handlers.python",
    "ValidationError": "pgsched.errors",
}

__all__ = [
    "App",
    "Context",
    "ExecutionFailed",
    "LockTimeout",
    "PgschedError",
    "TaskInterrupted",
    "ValidationError",
]

__getattr__, __dir__ = exports(__name__, _LAZY)

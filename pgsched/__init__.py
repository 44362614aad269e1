"""pgsched: a distributed task scheduler whose only infrastructure is one PostgreSQL
database. The Python API is :class:`App` and its ``@app.task`` decorator."""

from .app import App
from .errors import PgschedError, ValidationError
from .handlers.python import TaskInterrupted

__all__ = ["App", "PgschedError", "TaskInterrupted", "ValidationError"]

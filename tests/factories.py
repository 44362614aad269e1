"""The rows tests start from: one factory per entity, every field a keyword with a default
that makes an ordinary, valid row, so a test names only what it is about.

- :func:`make_task`: a task stored the way pgsched stores one (``tasks.create``: validated,
  its first fire planned), a shell task running ``true`` unless told otherwise.
- :func:`make_execution`: an execution row inserted as it stands, for a test that needs
  rows pgsched's own paths would not make (a given state, queue, or instants in the past),
  or many of them at once.

Tests that need the engine's own enqueue (``tasks.trigger``, the SQL API) call it: these
factories are for the state a test begins in, not for what it checks.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from pgsched.stores import tasks
from pgsched.taskspec import TaskSpec

# The instant most database tests stand at; a fixed one, so that what they plan and claim
# is the same on every run.
T0 = datetime(2025, 1, 15, 10, 0, tzinfo=UTC)


def make_task(
    db: Any,
    name: str = "job",
    *,
    command: str | None = "true",
    now: datetime | None = None,
    **fields: Any,
) -> dict:
    """Create task ``name`` through ``tasks.create`` and return its stored row. ``fields``
    are TaskSpec's other fields (``schedule_kind``, ``schedule``, ``tenant``, ``queue``…);
    ``now`` is the instant its first fire is planned from (default: the database's clock).
    ``db`` is a Database or a Session (one connection, e.g. the ``tx`` fixture's)."""
    row = tasks.create(db, TaskSpec(name=name, command=command, **fields), now=now)
    assert row is not None  # create without if_absent returns the row or raises
    return row


def make_execution(
    sql: Any,
    task_id: int,
    *,
    scheduled_at: datetime | timedelta = timedelta(0),
    run_at: datetime | timedelta | None = None,
    **columns: Any,
) -> dict:
    """Insert one row into pgsched.execution for task ``task_id`` and return it (all its
    columns). ``scheduled_at`` and ``run_at`` are instants, or offsets from the server's
    ``now()`` (default: now() itself; ``run_at`` defaults to ``scheduled_at``); ``columns``
    are any other columns of the table (``queue``, ``state``, ``trigger``, ``params`` as
    JSON text…). ``sql`` is a psycopg connection with dict rows."""
    values = {
        "task_id": task_id,
        "scheduled_at": scheduled_at,
        "run_at": scheduled_at if run_at is None else run_at,
        **columns,
    }
    # An offset is added to now() in SQL: the server's clock (in this transaction), not ours.
    placeholders = [
        f"now() + %({k})s" if isinstance(v, timedelta) else f"%({k})s" for k, v in values.items()
    ]
    return sql.execute(
        f"INSERT INTO pgsched.execution ({', '.join(values)}) VALUES ({', '.join(placeholders)}) "
        "RETURNING *",
        values,
    ).fetchone()

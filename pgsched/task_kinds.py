"""The vocabularies of a task's fields (checked against the CHECK constraints by
tests/db/test_vocabularies.py): its handler kind, misfire policy and who paused it. Pure."""

from __future__ import annotations

from enum import StrEnum


class HandlerKind(StrEnum):
    """What runs when a task runs (``task.handler_kind``): a ``shell`` command, an ``argv``
    executed directly, a ``python`` function, or a ``dag`` (the schedule task of a DAG,
    which starts a run; made only by the DAG store)."""

    SHELL = "shell"
    ARGV = "argv"
    PYTHON = "python"
    DAG = "dag"


class MisfirePolicy(StrEnum):
    """What fires missed while no scheduler ran become (``task.misfire_policy``): see
    :class:`TaskSpec`."""

    SKIP = "skip"
    ONCE = "once"
    ALL = "all"


class PausedBy(StrEnum):
    """Who paused a task (``task.paused_by``): an ``operator``, or the ``scheduler``
    because it could not compute the task's schedule."""

    OPERATOR = "operator"
    SCHEDULER = "scheduler"


# the kinds a TaskSpec may have (``dag`` tasks are the DAG store's)
HANDLER_KINDS = tuple(k.value for k in HandlerKind if k is not HandlerKind.DAG)
MISFIRE_POLICIES = tuple(p.value for p in MisfirePolicy)

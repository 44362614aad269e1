"""The vocabularies of a task's fields (checked against the CHECK constraints by
tests/db/test_vocabularies.py): its handler kind, misfire policy, who paused it and where
its Python handler runs. Pure."""

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


class PythonIsolation(StrEnum):
    """Where a task's Python handler runs (``task.python_isolation``, migration 0035; NULL:
    the worker's ``--python-isolation``): in a child ``process`` of the worker's pool, killed
    on a timeout or stop, or in the worker's slot ``thread``, abandoned on a timeout while
    blocked in C code (docs/security.md, "Python handlers")."""

    PROCESS = "process"
    THREAD = "thread"


# the kinds a TaskSpec may have (``dag`` tasks are the DAG store's)
HANDLER_KINDS = tuple(k.value for k in HandlerKind if k is not HandlerKind.DAG)
MISFIRE_POLICIES = tuple(p.value for p in MisfirePolicy)
PYTHON_ISOLATIONS = tuple(p.value for p in PythonIsolation)

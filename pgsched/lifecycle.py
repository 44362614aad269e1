"""The lifecycles of pgsched's records: the values of each state, trigger and role column,
one :class:`~enum.StrEnum` per vocabulary. Pure (no database). The migrations hold the
same sets as CHECK constraints; ``tests/db/test_vocabularies.py`` proves them equal.

Members are ``str``: ``ExecutionState.DEAD == "dead"``, and they are passed to queries and
shown as their values.
"""

from __future__ import annotations

from enum import StrEnum


class ExecutionState(StrEnum):
    """An execution's state. ``pending`` and ``running`` are live (table ``execution``); the
    others are final (``execution_history``): ``dead`` is the dead-letter queue."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    SKIPPED = "skipped"
    DEAD = "dead"


# the values as plain text, in this order, for messages, choices and queries
LIVE_STATES = (ExecutionState.PENDING.value, ExecutionState.RUNNING.value)
FINAL_STATES = tuple(s.value for s in ExecutionState if s not in LIVE_STATES)


class ExecutionTrigger(StrEnum):
    """How an execution was made: by the scheduler's fire, by hand (CLI), through the REST
    API, by a plain INSERT of another application (``run_request``), or as a DAG node."""

    SCHEDULE = "schedule"
    MANUAL = "manual"
    API = "api"
    INSERT = "insert"
    DAG = "dag"


class AttemptState(StrEnum):
    """How one attempt ended (``execution_attempt.state``); ``lost``: its worker died or
    handed it back, see docs/reliability.md."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"
    LOST = "lost"


class DagRunState(StrEnum):
    """A DAG run's state: open (``running``, ``failing``, ``cancelling``) or final."""

    RUNNING = "running"
    FAILING = "failing"
    CANCELLING = "cancelling"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    PARTIALLY_SUCCEEDED = "partially_succeeded"
    CANCELLED = "cancelled"


RUN_OPEN_STATES = (
    DagRunState.RUNNING.value,
    DagRunState.FAILING.value,
    DagRunState.CANCELLING.value,
)
RUN_FINAL_STATES = tuple(s.value for s in DagRunState if s not in RUN_OPEN_STATES)


class DagRunTrigger(StrEnum):
    """How a DAG run was started."""

    SCHEDULE = "schedule"
    MANUAL = "manual"
    API = "api"
    RERUN = "rerun"


class NodeRunState(StrEnum):
    """A node's state in a run: ``waiting`` (upstream not settled), ``queued`` (its execution
    exists), then final; ``upstream_failed``: not run because of a failure upstream."""

    WAITING = "waiting"
    QUEUED = "queued"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"
    UPSTREAM_FAILED = "upstream_failed"
    CANCELLED = "cancelled"


class WorkerState(StrEnum):
    """A worker process as the registry knows it (``worker.state``)."""

    RUNNING = "running"
    STOPPED = "stopped"
    DEAD = "dead"


class SchedulerRole(StrEnum):
    """A scheduler process's role (``scheduler_node.role``)."""

    LEADER = "leader"
    STANDBY = "standby"
    STOPPED = "stopped"


class LogStream(StrEnum):
    """Where a captured log line came from; ``system`` lines are pgsched's own notes."""

    STDOUT = "stdout"
    STDERR = "stderr"
    SYSTEM = "system"

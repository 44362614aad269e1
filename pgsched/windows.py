"""A task's overlap policy and unique window (issue 18, items 5-6): their vocabularies and
validation. Pure (no database). Migration 0022 enforces them, under advisory locks, in
``pgsched_internal.window_check_v1`` (every enqueue path and the scheduler's fires); see
docs/limits.md, "Overlap policy" and "Unique windows".
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import Any

from .errors import ValidationError

MAX_PERIOD_SECONDS = 366 * 86400.0  # a unique period: at most a year


class OverlapPolicy(StrEnum):
    """What a scheduler's fire (a catch-up fire too) does while an execution of the task is
    live (``task.overlap_policy``): ``allow`` it; ``skip`` it (recorded as a skipped
    execution) while one is pending or running; ``queue_one``: the task runs one at a time
    (the claim holds the rest) with at most one waiting, a fire while one waits is skipped.
    Manual, API and INSERT enqueues are never skipped by it; they count as the previous
    execution for the next fire."""

    ALLOW = "allow"
    SKIP = "skip"
    QUEUE_ONE = "queue_one"


class UniquePolicy(StrEnum):
    """``pending``: at most one pending execution of the task's unique scope at a time
    (``task.unique_policy``); ``none``: no such window."""

    NONE = "none"
    PENDING = "pending"


class UniqueScope(StrEnum):
    """What a unique window counts (``task.unique_scope``, ``unique_period.scope``): the
    ``task``, or the execution's rendered concurrency ``key`` (shared by the tenant's tasks
    that render it)."""

    TASK = "task"
    KEY = "key"


OVERLAP_POLICIES = tuple(p.value for p in OverlapPolicy)
UNIQUE_POLICIES = tuple(p.value for p in UniquePolicy)
UNIQUE_SCOPES = tuple(s.value for s in UniqueScope)
# dedup_reason of an enqueue that a window answered with an existing execution
UNIQUE_PENDING = "unique_pending"
UNIQUE_PERIOD = "unique_period"
WINDOW_FIELDS = ("overlap_policy", "unique_policy", "unique_period_seconds", "unique_scope")


def check_windows(
    overlap_policy: object,
    unique_policy: object,
    unique_period_seconds: object,
    unique_scope: object,
    concurrency_key: object = "",
) -> None:
    """Raise ValidationError naming the first bad field: ``overlap_policy`` one of
    :data:`OVERLAP_POLICIES`; ``unique_policy`` one of :data:`UNIQUE_POLICIES`;
    ``unique_period_seconds`` None or seconds above 0, at most a year (a second enqueue of
    the scope within that many seconds of the last one made returns that one);
    ``unique_scope`` ``task`` or ``key``, and ``key`` only with a ``concurrency_key``
    (None: the task has none; ``""``: the caller does not know it, the database checks)."""
    if overlap_policy not in OVERLAP_POLICIES:
        raise ValidationError(
            "overlap_policy", overlap_policy, f"must be one of {', '.join(OVERLAP_POLICIES)}"
        )
    if unique_policy not in UNIQUE_POLICIES:
        raise ValidationError(
            "unique_policy", unique_policy, f"must be one of {', '.join(UNIQUE_POLICIES)}"
        )
    if unique_period_seconds is not None and not (
        isinstance(unique_period_seconds, (int, float))
        and not isinstance(unique_period_seconds, bool)
        and math.isfinite(unique_period_seconds)
        and 0 < unique_period_seconds <= MAX_PERIOD_SECONDS
    ):
        raise ValidationError(
            "unique_period_seconds",
            unique_period_seconds,
            f"must be a number of seconds above 0, at most {MAX_PERIOD_SECONDS:g}, or none",
        )
    if unique_scope not in UNIQUE_SCOPES:
        raise ValidationError(
            "unique_scope", unique_scope, f"must be one of {', '.join(UNIQUE_SCOPES)}"
        )
    if unique_scope == UniqueScope.KEY and concurrency_key is None:
        raise ValidationError(
            "unique_scope", unique_scope, "needs the task's concurrency_key (it has none)"
        )


def check_spec(spec: Any, concurrency_key: object) -> None:
    """:func:`check_windows` on a TaskSpec's fields, with the task's ``concurrency_key``."""
    check_windows(
        spec.overlap_policy,
        spec.unique_policy,
        spec.unique_period_seconds,
        spec.unique_scope,
        concurrency_key,
    )


def windows_of(spec: Any) -> dict[str, Any]:
    """The task columns of a spec's overlap policy and unique window, for
    ``task_windows_set``."""
    return {f: getattr(spec, f) for f in WINDOW_FIELDS}


def describe(row: Any) -> str:
    """One line for ``task show``: the task's overlap policy and unique window."""
    parts = [f"overlap {row['overlap_policy']}"]
    if row["unique_policy"] != UniquePolicy.NONE or row["unique_period_seconds"] is not None:
        window = []
        if row["unique_policy"] == UniquePolicy.PENDING:
            window.append("one pending")
        if row["unique_period_seconds"] is not None:
            window.append(f"one per {row['unique_period_seconds']:g} s")
        parts.append(f"unique: {' and '.join(window)} per {row['unique_scope']}")
    else:
        parts.append("unique: none")
    return ", ".join(parts)

"""What one enqueue did (:class:`Enqueued`) and the longest idempotency key. Pure."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Enqueued:
    """What one enqueue did (pgsched.enqueue_v2).

    ``execution_id``: the execution the call stands for. ``deduplicated``: False when a new
    pending execution was made; True when nothing new will run, because of the
    idempotency key, for ``dedup_reason``: ``"live"`` (an execution of this task with this
    key is pending or running: ``execution_id`` is that one) or ``"succeeded"`` (the key
    already succeeded in ``succeeded_execution_id``: ``execution_id`` is the ``skipped``
    execution recorded for this call). Keys belong to one task: the same key on another
    task deduplicates nothing. A task's unique window (:mod:`pgsched.windows`) answers
    ``"unique_pending"`` (``execution_id``: the pending execution of the task or key) or
    ``"unique_period"`` (``execution_id``: the last one made within the period).
    """

    execution_id: int
    deduplicated: bool = False
    dedup_reason: str | None = None
    succeeded_execution_id: int | None = None


MAX_KEY_LENGTH = 200

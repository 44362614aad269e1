"""Recognising an earlier try after a lost reply (issue 15, item 1;
:func:`earlier_try`): a write of an attempt's end that lost its connection may have
committed unheard. When a later try then finds the lease gone, the recorder first looks
for its own earlier try's attempt row (``execution_attempt_recorded``; the writer's
counterpart in :mod:`.completer`: ``execution_finish_many_recorded``) before calling the
lease lost.

The row is matched on the execution ``id``, ``lease_id``, this worker, the attempt's
state and its very ``started_at`` / ``finished_at`` (UTC instants); what it shows comes
back as the :class:`~.attempt_write.Written` the earlier try would have returned.
"""

from __future__ import annotations

from collections.abc import Callable

from ..db import Database
from .attempt_write import Written
from .outcome import FinishedAttempt


def earlier_try(
    db: Database, worker_id: Callable[[], int | None], attempt: FinishedAttempt
) -> Written | None:
    """After a try of :func:`.attempt_write.write_attempt` lost its connection and a later
    one found the lease gone: whether the earlier try committed
    (``execution_attempt_recorded``: the attempt row it wrote, with this worker, the lease
    and the very finished_at). None when it did not (the execution was taken back). Raises
    ConnectionFailed / TransientError."""
    row = attempt.row
    found = db.one(
        "execution_attempt_recorded",
        id=row["id"],
        lease_id=row["lease_id"],
        worker_id=worker_id(),
        finished_at=attempt.finished_at,
        started_at=attempt.started_at,
        state=attempt.attempt_state,
    )
    if found is None:
        return None
    final = found["final"]
    return Written(
        final,
        None if final is not None else found["next_run_at"],
        found["budget_delay_seconds"],
    )

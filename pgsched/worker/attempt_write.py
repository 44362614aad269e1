"""Writing an attempt's end in this thread (:func:`write_attempt`): one transaction, the
attempt row, then the execution's move to history or back to the queue, and what that
decided (:class:`Written`). A final outcome goes through the writer's
:meth:`~.completer.Completer.finish` instead, once the worker runs.

A retry's ``run_at`` is the attempt's ``finished_at`` (a UTC instant) plus the backoff
(:func:`pgsched.retry.backoff_seconds`), moved by the retry budget
(``execution_retry_slot``); ``budget`` is that move in seconds. :class:`ClaimLost`:
the lease was no longer held, and nothing was written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from psycopg.types.json import Jsonb

from ..db import Database
from ..retry import backoff_seconds
from .outcome import FinishedAttempt

if TYPE_CHECKING:
    from .completer import Completer


@dataclass(frozen=True)
class Written:
    """What a write of an attempt's end decided: ``final`` the state the execution ended in
    (None: queued again; ``cancelled`` when a cancel was asked meanwhile), ``retry_at``
    the next attempt's run_at, ``budget`` seconds the retry budget delayed it by."""

    final: str | None
    retry_at: datetime | None = None
    budget: float | None = None


class ClaimLost(Exception):
    """The execution was taken from this worker (rescued) before its end was written."""


def write_attempt(
    db: Database,
    completer: Completer | None,
    worker_id: Callable[[], int | None],
    attempt: FinishedAttempt,
) -> Written:
    """One transaction: the attempt row, then the move to history or back to the queue.
    A handed-back execution (``stopped``) gets its lost attempt back and is not subject
    to the retry budget. ``worker_id()`` is the worker's current registration;
    ``completer``: the writer, once the worker runs (it writes a final outcome). Raises
    ClaimLost when this worker no longer holds the lease (nothing written),
    ConnectionFailed / TransientError / PgschedError."""
    row, outcome, final = attempt.row, attempt.outcome, attempt.final
    lease = dict(id=row["id"], lease_id=row["lease_id"])
    if final is not None and completer is not None:
        if not completer.finish(attempt.finish_item()):
            raise ClaimLost()
        return Written(final)
    retry_at = budget = None
    with db.transaction() as tx:
        if final is None:
            asked = tx.one("execution_cancel_requested", **lease)
            if asked is not None and asked["requested"]:
                final = "cancelled"  # asked while this attempt ended: never start another
        if final is None:
            proposed = attempt.finished_at
            if not attempt.stopped:
                # counted from backoff_from_attempt: a dead-letter retry starts afresh
                proposed += timedelta(
                    seconds=backoff_seconds(
                        row["retry_policy"],
                        row["attempt"] - row["backoff_from_attempt"],
                        row["retry_base_seconds"],
                        row["retry_max_seconds"],
                    )
                )
                slot = tx.one("execution_retry_slot", proposed=proposed)
                assert slot is not None
                retry_at = slot["run_at"]
                budget = (retry_at - proposed).total_seconds() or None
            else:
                retry_at = proposed
        tx.exec(
            "execution_attempt_insert",
            tenant=row["tenant"],
            state=attempt.attempt_state,
            started_at=attempt.started_at,
            finished_at=attempt.finished_at,
            worker_id=worker_id(),
            attempt=row["attempt"],
            exit_code=outcome.exit_code,
            error=outcome.error,
            error_type=outcome.error_type,
            next_run_at=retry_at,
            budget_delay_seconds=budget,
            **lease,
        )
        # The move comes last, right before COMMIT: a DAG node's finish locks its run
        # (settling downstream) and should hold that lock for no round trip more. When
        # the lease is no longer held, nothing is written at all: the exception rolls
        # back the attempt row too (the rescue has already written it as 'lost').
        if final is None:
            done = tx.exec(
                "execution_retry",
                run_at=retry_at,
                extra_attempts=1 if attempt.stopped else 0,
                budget_delay_seconds=budget,
                **lease,
            )
            if done:  # an UPDATE: no NOTIFY from the insert trigger, so wake idle workers
                tx.exec("execution_wake")  # (they look up its run_at: pgsched.worker.due)
        else:
            done = tx.exec(
                "execution_finish",
                state=final,
                finished_at=attempt.finished_at,
                exit_code=outcome.exit_code,
                error=outcome.error,
                result=Jsonb(outcome.result) if outcome.result is not None else None,
                **lease,
            )
        if not done:
            raise ClaimLost()
    return Written(final, retry_at, budget)

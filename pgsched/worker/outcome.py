"""What an ended attempt means for its execution, decided once: the finished-attempt
record (:class:`FinishedAttempt`) and the final-state rule (:func:`final_state`).

Pure: no database, no clock, no psycopg. The executor hands in the handler's
:class:`~pgsched.handlers.Outcome` and why its slot was ended early, if it was; the
recorder writes the record as it is (a final state through the group commit, a retry in
one transaction) and calls nothing back to decide it again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..handlers import Outcome


def as_ended(outcome: Outcome, reason: str | None) -> Outcome:
    """The handler's ``outcome`` as the attempt ended: a slot ended by a cancel
    (``reason`` ``cancel``) ended ``cancelled``, whatever its handler said."""
    if reason != "cancel":
        return outcome
    return Outcome(
        "cancelled",
        outcome.exit_code,
        "cancelled on request" + (f" ({outcome.error})" if outcome.error else ""),
    )


def handed_back(reason: str | None, outcome: Outcome) -> bool:
    """Whether an attempt whose slot was ended for ``reason`` is recorded as handed back
    (``lost``, its attempt given back): the worker stopped it (``handback``) and it failed
    for that; one that ended on its own meanwhile keeps its outcome."""
    return reason == "handback" and outcome.state == "failed"


def final_state(row: Mapping[str, Any], outcome: Outcome, stopped: bool) -> str | None:
    """None to retry, else the state the execution ends in: the outcome's own for success
    and cancel; ``dead`` (the dead-letter queue) for a failure that is not retried, because
    its attempts are used up (``attempt`` of ``max_attempts``) or the task marks it not
    retryable (``no_retry_exit_codes``; ``no_retry_exceptions`` by qualified or bare class
    name) or the outcome says no attempt can mend it (``retryable`` False: a secret
    reference that does not resolve). ``stopped``: handed back by a stopping worker, always
    run again."""
    if stopped:
        return None
    if outcome.state in ("succeeded", "cancelled"):
        return outcome.state
    if not outcome.retryable:
        return "dead"
    if outcome.exit_code is not None and outcome.exit_code in (row["no_retry_exit_codes"] or ()):
        return "dead"
    if set(outcome.error_types) & set(row["no_retry_exceptions"] or ()) or any(
        t.rsplit(".", 1)[-1] in (row["no_retry_exceptions"] or ()) for t in outcome.error_types
    ):
        return "dead"
    return None if row["attempt"] < row["max_attempts"] else "dead"


@dataclass(frozen=True)
class FinishedAttempt:
    """One attempt's end as it is recorded. ``row``: the execution as claimed
    (``execution_claim``); ``outcome``: how it ended, storable; ``started_at`` /
    ``finished_at``: the database's instants (aware UTC); ``stopped``: handed back
    (recorded as ``lost``, the attempt given back); ``final``: the state the execution ends
    in, None when it is queued again (:func:`final_state`)."""

    row: dict[str, Any]  # a Row
    outcome: Outcome
    started_at: datetime
    finished_at: datetime
    stopped: bool
    final: str | None

    @property
    def attempt_state(self) -> str:
        """The state of the attempt row: the outcome's, ``lost`` when handed back."""
        return "lost" if self.stopped else self.outcome.state

    def finish_item(self) -> dict[str, Any]:
        """The columns of ``execution_finish_many`` for a final outcome (one value each of
        :data:`pgsched.worker.completer.FIELDS`)."""
        o = self.outcome
        return dict(
            id=self.row["id"],
            lease_id=self.row["lease_id"],
            state=self.final,
            finished_at=self.finished_at,
            exit_code=o.exit_code,
            error=o.error,
            result=o.result,
            attempt_state=o.state,
            started_at=self.started_at,
            error_type=o.error_type,
        )

    def summary(
        self, final: str | None, retry_at: datetime | None = None, budget: float | None = None
    ) -> tuple[str, tuple[Any, ...]]:
        """The log line of the recorded end (a format and its arguments): ``final`` the state
        the execution ended in as written (a cancel asked meanwhile makes a retry
        ``cancelled``), ``retry_at`` the next attempt's run_at, ``budget`` seconds the retry
        budget delayed it by."""
        row, o = self.row, self.outcome
        what = (
            "handed back"
            if self.stopped
            else o.state + (" (dead-letter queue)" if final == "dead" else "")
        )
        return "execution %s %s attempt %s/%s %s in %.2fs%s%s%s", (
            row["id"],
            row["task_name"],
            row["attempt"],
            row["max_attempts"],
            what,
            (self.finished_at - self.started_at).total_seconds(),
            f": {o.error}" if o.error else "",
            f"; next attempt at {retry_at:%H:%M:%S}" if retry_at else "",
            f" (delayed {budget:.0f}s by the retry budget)" if budget else "",
        )


def finished_attempt(
    row: dict[str, Any],
    outcome: Outcome,
    *,
    stopped: bool,
    started_at: datetime,
    finished_at: datetime,
) -> FinishedAttempt:
    """The record of an attempt of ``row`` that ended with ``outcome`` (storable:
    :func:`pgsched.worker.recorder.storable`), its final state decided here, once."""
    return FinishedAttempt(
        row, outcome, started_at, finished_at, stopped, final_state(row, outcome, stopped)
    )

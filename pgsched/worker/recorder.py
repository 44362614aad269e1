"""Every write of an attempt's end: its start confirmation (when its claim asks), its
output, and the attempt row with the execution's move, to history or back to the queue.

A final outcome goes to the writer thread (group commit, :mod:`.completer`) and the slot
does not wait for it; a retry is written here, in one transaction. Either is retried
while the database is unreachable (:func:`with_retries`, the one backoff loop of the
worker), for ``record_retry_seconds``: a blip must not leave an execution 'running'. An
outcome the database refuses is recorded as a failure instead.

Lost replies (issue 15, item 1): a write that lost its connection may have committed
unheard. When a later try then finds the lease gone, it first looks for its own earlier
try's attempt row (``execution_attempt_recorded``; the writer: ``_recorded`` many) before
calling the lease lost.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from psycopg.types.json import Jsonb

from ..clock import DatabaseClock
from ..db import Database, Row
from ..errors import ConnectionFailed, PgschedError, TransientError
from ..handlers import Outcome
from ..handlers.output import LogSink, storable_text
from ..jsontext import has_nul
from ..retry import backoff_seconds
from .config import SUCCESS_LINES_PER_SECOND, WorkerConfig
from .holdings import Holdings
from .outcome import FinishedAttempt, finished_attempt

if TYPE_CHECKING:
    from .completer import Completer

log = logging.getLogger(__name__)

T = TypeVar("T")

# Called after each attempt is recorded: (row, outcome, last output lines, final state or
# None when it will be retried). It may be called from the writer thread.
OnFinish = Callable[[Row, Outcome, list[str], str | None], None]


def with_retries(
    attempt: Callable[[bool], T],
    *,
    seconds: float,
    stopping: Callable[[], bool] | None = None,
    what: str | None = None,
) -> T:
    """``attempt(uncertain)`` until it returns, again after each ConnectionFailed or
    TransientError, waiting 0.5 s, doubling to 10 s, for at most ``seconds`` seconds
    (0: once) or until ``stopping()``; then that error is raised. Any other error is raised
    at once. ``uncertain``: an earlier try lost its connection, so it may have committed
    unheard (a TransientError rolled back). ``what`` (``could not record X``) is logged
    as a warning before each wait."""
    give_up = time.monotonic() + seconds
    delay = 0.5
    uncertain = False
    while True:
        try:
            return attempt(uncertain)
        except (ConnectionFailed, TransientError) as exc:
            uncertain = uncertain or isinstance(exc, ConnectionFailed)
            if time.monotonic() >= give_up or (stopping is not None and stopping()):
                raise
            if what is not None:
                log.warning("%s yet (%s); retrying in %.1fs", what, exc, delay)
            time.sleep(delay)
            delay = min(delay * 2, 10.0)


def storable(outcome: Outcome) -> Outcome:
    """The outcome with what PostgreSQL cannot store removed or turned into a failure: NUL
    characters in the error text; a result that is not strict JSON (NaN, infinities,
    objects json cannot encode) or holds a NUL character."""
    error = storable_text(outcome.error) if outcome.error else outcome.error
    if outcome.result is not None:
        try:
            text = json.dumps(outcome.result, allow_nan=False)
        except (TypeError, ValueError) as exc:
            return Outcome(
                "failed", outcome.exit_code, f"result is not JSON ({exc}): {outcome.result!r:.200}"
            )
        if has_nul(text):
            return Outcome(
                "failed",
                outcome.exit_code,
                "result contains a NUL character, which PostgreSQL refuses",
            )
    return Outcome(
        outcome.state,
        outcome.exit_code,
        error,
        outcome.result,
        outcome.error_type,
        outcome.error_types,
    )


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


class Recorder:
    """Writes what the attempts of one worker leave. ``worker_id()`` is the worker's
    current registration; ``urgent``: a second stop signal (output is not retried then);
    ``completer``: the writer, once the worker runs (without it final outcomes are written
    here too)."""

    def __init__(
        self,
        db: Database,
        config: WorkerConfig,
        holdings: Holdings,
        clock: DatabaseClock,
        worker_id: Callable[[], int | None],
        urgent: threading.Event,
        on_finish: OnFinish | None = None,
    ):
        self.db, self.config, self.holdings, self.clock = db, config, holdings, clock
        self.worker_id, self.urgent, self.on_finish = worker_id, urgent, on_finish
        self.completer: Completer | None = None
        self._successes = _SuccessLog()

    # -- before and while it runs ------------------------------------------------------
    def confirm_start(self, row: Row) -> bool | None:
        """Record that a slot starts ``row`` now (``execution_confirm_start``), for an
        execution whose claim asks for it: a rescue could not tell whether an earlier claim
        had started it, and must be able to next time (migration 0008). True: recorded, run
        it. False: the claim is no longer held (rescued); do not run it. None: the database
        refused it, or stayed unreachable for ``record_retry_seconds``, or the worker is
        stopping: hand it back unstarted. Only such executions pay this write."""
        self.holdings.wake_slot()
        try:
            done = with_retries(
                lambda _: self.db.exec(
                    "execution_confirm_start", id=row["id"], lease_id=row["lease_id"]
                ),
                seconds=self.config.record_retry_seconds,
                stopping=self.holdings.hard_stop.is_set,
            )
        except PgschedError as exc:
            log.warning(
                "execution %s: could not record its start (%s); handing it back", row["id"], exc
            )
            return None
        if done:
            return True
        log.warning(
            "execution %s attempt %s: not started: its claim was no longer held when its start "
            "was to be recorded",
            row["id"],
            row["attempt"],
        )
        return False

    def flush_logs(self, row: Row, sink: LogSink, final: bool = False) -> None:
        """Store collected output, at most 1,000 lines per statement. Lines that cannot be
        stored now are kept for the next flush; the final flush retries like the outcome."""

        def insert(batch: dict[str, Any]) -> Callable[[bool], Any]:
            return lambda _uncertain: self.db.exec("execution_log_insert", **batch)

        while lines := sink.drain(1000):
            seq, stream, logged_at, text = (list(c) for c in zip(*lines, strict=True))
            batch = dict(
                id=row["id"],
                attempt=row["attempt"],
                tenant=row["tenant"],
                seq=seq,
                stream=stream,
                logged_at=logged_at,
                line=text,
            )
            try:
                with_retries(
                    insert(batch),
                    seconds=self.config.record_retry_seconds if final else 0,
                    stopping=self.urgent.is_set,
                )
            except (ConnectionFailed, TransientError) as exc:
                sink.requeue(lines)
                if final:
                    log.warning(
                        "execution %s: %d log line(s) not stored: %s", row["id"], len(lines), exc
                    )
                return
            except PgschedError as exc:
                log.warning(
                    "execution %s: %d log line(s) not stored: %s", row["id"], len(lines), exc
                )

    # -- its end -----------------------------------------------------------------------
    def end(
        self,
        row: Row,
        sink: LogSink,
        outcome: Outcome,
        started: datetime,
        stopped: bool,
        settled: Callable[[], None],
    ) -> None:
        """The attempt of ``row`` ended with ``outcome`` (as ended: :func:`.outcome.as_ended`),
        ``stopped`` as :func:`.outcome.handed_back`: store its last output, then its end;
        ``settled()`` is called once when that is written or given up, perhaps later in the
        writer's thread. Whatever goes wrong, the execution is never left 'running': the
        failure is recorded instead."""
        try:
            if sink.pending():
                self.holdings.wake_slot()
                self.flush_logs(row, sink, final=True)
            self.record(row, outcome, started, list(sink.tail), stopped, settled)
        except BaseException as exc:
            log.exception("execution %s: recording the outcome failed", row["id"])
            try:  # never leave it 'running': record the failure itself
                self.record(
                    row,
                    Outcome(
                        "failed",
                        error=f"internal error recording the outcome: "
                        f"{type(exc).__name__}: {storable_text(str(exc))[:500]}",
                    ),
                    started,
                    [],
                    False,
                    settled,
                    fell_back=True,
                )
            except BaseException:
                log.exception("execution %s: recording the failure failed too", row["id"])
                settled()

    def record(
        self,
        row: Row,
        outcome: Outcome,
        started: datetime,
        tail: list[str],
        stopped: bool,
        settled: Callable[[], None],
        fell_back: bool = False,
    ) -> None:
        """Decide the attempt's record once (:func:`.outcome.finished_attempt`) and write it:
        a final one through the writer (this returns at once), a retry here. ``fell_back``:
        this is the failure recorded for an outcome the database refused."""
        finished = max(
            self.clock.now(), started
        )  # a better reading of the clock may have come meanwhile
        attempt = finished_attempt(
            row, storable(outcome), stopped=stopped, started_at=started, finished_at=finished
        )
        if attempt.final is not None and self.completer is not None:
            self.completer.submit(
                attempt.finish_item(),
                lambda result: self._written(attempt, result, tail, settled, fell_back),
            )
            return
        self.holdings.wake_slot()
        try:
            self._write_here(attempt, tail, fell_back)
        finally:
            settled()

    def _written(
        self,
        attempt: FinishedAttempt,
        result: bool | BaseException,
        tail: list[str],
        settled: Callable[[], None],
        fell_back: bool,
    ) -> None:
        """The writer's word on a final outcome: True moved, False the lease was lost, or
        the exception writing it raised."""
        row, outcome = attempt.row, attempt.outcome
        try:
            if result is True:
                self._recorded(attempt, Written(attempt.final), tail)
            elif result is False:
                self._claim_lost(attempt)
            elif not isinstance(result, (ConnectionFailed, TransientError)) and not fell_back:
                log.error(
                    "execution %s: outcome %s refused by the database (%s); recording it as failed",
                    row["id"],
                    outcome.state,
                    result,
                )
                self.record(
                    row,
                    Outcome("failed", outcome.exit_code, f"outcome not storable: {result}"),
                    attempt.started_at,
                    tail,
                    False,
                    settled,
                    fell_back=True,
                )
                return
            else:
                log.error(
                    "execution %s: could not record outcome %s: %s",
                    row["id"],
                    outcome.state,
                    result,
                )
        except Exception:
            log.exception("execution %s: recording the outcome failed", row["id"])
        settled()

    def _write_here(self, attempt: FinishedAttempt, tail: list[str], fell_back: bool) -> None:
        """Write ``attempt`` in this thread (:meth:`write`), retried while the database is
        unreachable; one the database refuses is written as a failure instead."""
        row = attempt.row

        def once(uncertain: bool) -> Written | None:
            try:
                return self.write(attempt)
            except ClaimLost:
                earlier = self._earlier_try(attempt) if uncertain else None
                if earlier is not None:
                    log.info(
                        "execution %s attempt %s: outcome %s was recorded by an earlier try whose reply "
                        "was lost with its connection",
                        row["id"],
                        row["attempt"],
                        attempt.outcome.state,
                    )
                return earlier

        while True:
            try:
                written = with_retries(
                    once,
                    seconds=self.config.record_retry_seconds,
                    what=f"execution {row['id']}: could not record {attempt.outcome.state}",
                )
            except (ConnectionFailed, TransientError) as exc:
                log.error(
                    "execution %s: gave up recording outcome %s after %.0fs: %s",
                    row["id"],
                    attempt.outcome.state,
                    self.config.record_retry_seconds,
                    exc,
                )
                return
            except PgschedError as exc:
                if fell_back:
                    log.error(
                        "execution %s: could not record outcome %s: %s",
                        row["id"],
                        attempt.outcome.state,
                        exc,
                    )
                    return
                fell_back = True
                # The database refused a value of the outcome: record the failure instead,
                # so the execution never stays 'running'.
                log.error(
                    "execution %s: outcome %s refused by the database (%s); recording it as failed",
                    row["id"],
                    attempt.outcome.state,
                    exc,
                )
                attempt = finished_attempt(
                    row,
                    Outcome("failed", attempt.outcome.exit_code, f"outcome not storable: {exc}"),
                    stopped=attempt.stopped,
                    started_at=attempt.started_at,
                    finished_at=attempt.finished_at,
                )
                continue
            if written is None:
                self._claim_lost(attempt)
            else:
                self._recorded(attempt, written, tail)
            return

    def write(self, attempt: FinishedAttempt) -> Written:
        """One transaction: the attempt row, then the move to history or back to the queue.
        A handed-back execution (``stopped``) gets its lost attempt back and is not subject
        to the retry budget. Raises ClaimLost when this worker no longer holds the lease
        (nothing written), ConnectionFailed / TransientError / PgschedError."""
        row, outcome, final = attempt.row, attempt.outcome, attempt.final
        lease = dict(id=row["id"], lease_id=row["lease_id"])
        if final is not None and self.completer is not None:
            if not self.completer.finish(attempt.finish_item()):
                raise ClaimLost()
            return Written(final)
        retry_at = budget = None
        with self.db.transaction() as tx:
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
                worker_id=self.worker_id(),
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

    def _earlier_try(self, attempt: FinishedAttempt) -> Written | None:
        """After a try of :meth:`write` lost its connection and a later one found the lease
        gone: whether the earlier try committed (``execution_attempt_recorded``: the attempt
        row it wrote, with this worker, the lease and the very finished_at). None when it did
        not (the execution was taken back). Raises ConnectionFailed / TransientError."""
        row = attempt.row
        found = self.db.one(
            "execution_attempt_recorded",
            id=row["id"],
            lease_id=row["lease_id"],
            worker_id=self.worker_id(),
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

    def _claim_lost(self, attempt: FinishedAttempt) -> None:
        row = attempt.row
        log.error(
            "execution %s attempt %s: outcome %s rejected: lease %s is no longer held by worker %s "
            "(declared dead, or the execution taken back: the leader's rescue ran it elsewhere)",
            row["id"],
            row["attempt"],
            attempt.outcome.state,
            row["lease_id"],
            self.worker_id(),
        )

    def _recorded(self, attempt: FinishedAttempt, written: Written, tail: list[str]) -> None:
        """Log the recorded end (successes at most SUCCESS_LINES_PER_SECOND a second) and
        tell ``on_finish``."""
        msg, args = attempt.summary(written.final, written.retry_at, written.budget)
        if attempt.outcome.state == "succeeded":
            self._successes.log(msg, *args)
        else:
            log.warning(msg, *args)
        if self.on_finish:
            self.on_finish(attempt.row, attempt.outcome, tail, written.final)


class _SuccessLog:
    """INFO lines for successes, at most SUCCESS_LINES_PER_SECOND a second: at thousands of
    executions a second a line each cost more than the executions (the log handler's lock
    showed in the profile). The next line logged says how many were left out."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.second = self.lines = self.skipped = 0

    def log(self, msg: str, *args: Any) -> None:
        if not log.isEnabledFor(logging.INFO):
            return
        now = int(time.monotonic())
        with self.lock:
            if now != self.second:
                self.second, self.lines = now, 0
            if self.lines >= SUCCESS_LINES_PER_SECOND:
                self.skipped += 1
                return
            self.lines += 1
            skipped, self.skipped = self.skipped, 0
        if skipped:
            msg, args = (
                msg + " (%d more succeeded meanwhile, not logged one by one)",
                (*args, skipped),
            )
        log.info(msg, *args)

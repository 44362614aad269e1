"""Every write of an attempt's end: its start confirmation (when its claim asks), its
output, and the attempt row with the execution's move, to history or back to the queue.
The writes themselves have modules of their own (:mod:`.start_confirmation`,
:mod:`.log_flush`, :mod:`.attempt_write`, :mod:`.lost_reply`); the :class:`Recorder`
decides which is made, when, and what is logged and told ``on_finish`` after.

A final outcome goes to the writer thread (group commit, :mod:`.completer`) and the slot
does not wait for it; a retry is written here, in one transaction. Either is retried
while the database is unreachable (:func:`.retries.with_retries`, the one backoff loop of
the worker), for ``record_retry_seconds``: a blip must not leave an execution 'running'.
An outcome the database refuses is recorded as a failure instead.

Lost replies (issue 15, item 1): a write that lost its connection may have committed
unheard; a later try that finds the lease gone first looks for its own earlier try's
attempt row (:mod:`.lost_reply`) before calling the lease lost.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..clock import DatabaseClock
from ..db import Database, Row
from ..errors import ConnectionFailed, PgschedError, TransientError
from ..handlers import Outcome
from ..handlers.output import LogSink, storable_text
from ..jsontext import has_nul
from . import attempt_write, log_flush, lost_reply, start_confirmation
from .attempt_write import ClaimLost, Written
from .config import SUCCESS_LINES_PER_SECOND, WorkerConfig
from .holdings import Holdings
from .outcome import FinishedAttempt, finished_attempt
from .retries import with_retries

if TYPE_CHECKING:
    from .completer import Completer

log = logging.getLogger(__name__)

# Called after each attempt is recorded: (row, outcome, last output lines, final state or
# None when it will be retried). It may be called from the writer thread.
OnFinish = Callable[[Row, Outcome, list[str], str | None], None]


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
        outcome.retryable,
    )


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
        """:func:`.start_confirmation.confirm_start`: True run it, False the claim is no
        longer held, None hand it back unstarted."""
        return start_confirmation.confirm_start(self.db, self.holdings, self.config, row)

    def flush_logs(self, row: Row, sink: LogSink, final: bool = False) -> None:
        """:func:`.log_flush.flush_logs`: store collected output; the final flush retries
        like the outcome."""
        log_flush.flush_logs(self.db, self.config, self.urgent, row, sink, final)

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
                earlier = (
                    lost_reply.earlier_try(self.db, self.worker_id, attempt) if uncertain else None
                )
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
        """:func:`.attempt_write.write_attempt` with this worker: one transaction, or the
        writer for a final outcome. Raises ClaimLost when the lease is no longer held."""
        return attempt_write.write_attempt(self.db, self.completer, self.worker_id, attempt)

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
        if self.on_finish:  # "lost": handed back, to run again with its attempt not counted
            final = "lost" if attempt.stopped else written.final
            self.on_finish(attempt.row, attempt.outcome, tail, final)


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

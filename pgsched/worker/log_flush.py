"""Log flushes (:func:`flush_logs`): an attempt's collected output stored in
``execution_log``, at most 1,000 lines per statement, and its handler's latest progress
report (``ctx.progress``) on the execution.

Lines come from a :class:`~pgsched.handlers.output.LogSink` as (seq, stream, logged_at
UTC instant, text); they are stored under the row's ``id``, ``attempt`` and ``tenant``.
A flush while the attempt runs is tried once (lines it cannot store are kept for the
next); the final one is retried for ``record_retry_seconds`` seconds
(:func:`.retries.with_retries`), unless a second stop signal comes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from ..db import Database, Row
from ..errors import ConnectionFailed, PgschedError, TransientError
from ..handlers.output import LogSink
from .config import WorkerConfig
from .retries import with_retries

log = logging.getLogger(__name__)


def flush_logs(
    db: Database,
    config: WorkerConfig,
    urgent: threading.Event,
    row: Row,
    sink: LogSink,
    final: bool = False,
) -> None:
    """Store collected output, at most 1,000 lines per statement. Lines that cannot be
    stored now are kept for the next flush; the final flush retries like the outcome.
    ``urgent``: a second stop signal (output is not retried then)."""

    def insert(batch: dict[str, Any]) -> Callable[[bool], Any]:
        return lambda _uncertain: db.exec("execution_log_insert", **batch)

    if (progress := sink.take_progress()) is not None:
        _write_progress(db, config, urgent, row, sink, progress, final)
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
                seconds=config.record_retry_seconds if final else 0,
                stopping=urgent.is_set,
            )
        except (ConnectionFailed, TransientError) as exc:
            sink.requeue(lines)
            if final:
                log.warning(
                    "execution %s: %d log line(s) not stored: %s", row["id"], len(lines), exc
                )
            return
        except PgschedError as exc:
            log.warning("execution %s: %d log line(s) not stored: %s", row["id"], len(lines), exc)


def _write_progress(
    db: Database,
    config: WorkerConfig,
    urgent: threading.Event,
    row: Row,
    sink: LogSink,
    progress: tuple[float, str | None],
    final: bool,
) -> None:
    """Store the handler's latest progress report on its execution (migration 0038): one
    write per flush at most, however often it reported (ticks are 0.2 s apart)."""
    fraction, message = progress
    try:
        with_retries(
            lambda _uncertain: db.exec(
                "execution_progress",
                id=row["id"],
                lease_id=row["lease_id"],
                progress=fraction,
                message=message,
            ),
            seconds=config.record_retry_seconds if final else 0,
            stopping=urgent.is_set,
        )
    except (ConnectionFailed, TransientError) as exc:
        sink.untake_progress(progress)
        if final:
            log.warning("execution %s: its progress was not stored: %s", row["id"], exc)
    except PgschedError as exc:
        log.warning("execution %s: its progress was not stored: %s", row["id"], exc)

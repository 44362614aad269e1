"""The start confirmation (:func:`confirm_start`): the write that records a slot starts an
execution now, for one whose claim asks for it (migration 0008), so that a later rescue
can tell whether this claim started it.

Row shape: a claimed execution (``execution_claim``; ``id``, ``lease_id``, ``attempt``).
Retried while the database is unreachable for ``record_retry_seconds`` seconds
(:func:`.retries.with_retries`), unless the worker stops hard.
"""

from __future__ import annotations

import logging

from ..db import Database, Row
from ..errors import PgschedError
from .config import WorkerConfig
from .holdings import Holdings
from .retries import with_retries

log = logging.getLogger(__name__)


def confirm_start(db: Database, holdings: Holdings, config: WorkerConfig, row: Row) -> bool | None:
    """Record that a slot starts ``row`` now (``execution_confirm_start``), for an
    execution whose claim asks for it: a rescue could not tell whether an earlier claim
    had started it, and must be able to next time (migration 0008). True: recorded, run
    it. False: the claim is no longer held (rescued); do not run it. None: the database
    refused it, or stayed unreachable for ``record_retry_seconds``, or the worker is
    stopping: hand it back unstarted. Only such executions pay this write."""
    holdings.wake_slot()
    try:
        done = with_retries(
            lambda _: db.exec("execution_confirm_start", id=row["id"], lease_id=row["lease_id"]),
            seconds=config.record_retry_seconds,
            stopping=holdings.hard_stop.is_set,
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

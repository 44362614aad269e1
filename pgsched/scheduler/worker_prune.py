"""The registry of workers: rows of workers stopped long ago removed, while leading."""

from __future__ import annotations

import logging
from datetime import datetime

from ..clock import Clock
from ..db import Database
from ..service import IntervalService

log = logging.getLogger("pgsched.scheduler")  # the name its log lines always had


def prune_workers(db: Database) -> int:
    """Remove the rows of workers stopped or dead for longer than the
    ``worker_retention_days`` setting (7) that hold no running execution
    (``pgsched_internal.worker_prune_v1``); the rescue never needed them (migration 0015). Returns
    how many were removed. Part of the leader's maintenance."""
    row = db.one("scheduler_worker_prune")
    pruned = int(row["pruned"]) if row else 0
    if pruned:
        log.info("removed %d row(s) of workers stopped long ago", pruned)
    return pruned


class WorkerPrune(IntervalService):
    """:func:`prune_workers` every ``interval`` seconds (an hour by default), a minute
    (or ``interval`` if shorter) after a round that failed."""

    name = "worker-prune"
    log = log
    failure = "removing rows of workers stopped long ago failed: %s"

    def __init__(self, db: Database, clock: Clock, interval: float = 3600.0):
        super().__init__(clock, interval, retry=min(interval, 60.0))
        self.db = db

    def run_once(self, now: datetime) -> int:
        """:func:`prune_workers`; ``now`` is not used (the statement judges age by the
        database's ``now()``)."""
        return prune_workers(self.db)

"""The web admin's access records kept bounded, while leading: audit events past their
retention and sessions that ended a day ago removed (migration 0019)."""

from __future__ import annotations

import logging
from datetime import datetime

from ..clock import Clock
from ..db import Database
from ..service import IntervalService

log = logging.getLogger("pgsched.scheduler")


def prune_access(db: Database) -> tuple[int, int]:
    """Remove audit events older than the ``audit_retention_days`` setting (90) and web
    sessions that ended (expired or were revoked) more than a day ago
    (``pgsched_internal.access_prune_v1``). Returns ``(events, sessions)`` removed. Part of the leader's maintenance."""
    row = db.one("audit_prune")  # one definer function: the engine login sees neither table whole
    counts = (int(row["events"]), int(row["sessions"])) if row else (0, 0)
    if any(counts):
        log.info("removed %d old audit event(s) and %d ended web session(s)", *counts)
    return counts


class AccessPrune(IntervalService):
    """:func:`prune_access` every ``interval`` seconds (an hour by default), a minute (or
    ``interval`` if shorter) after a round that failed."""

    name = "access-prune"
    log = log
    failure = "removing old audit events and ended web sessions failed: %s"

    def __init__(self, db: Database, clock: Clock, interval: float = 3600.0):
        super().__init__(clock, interval, retry=min(interval, 60.0))
        self.db = db

    def run_once(self, now: datetime) -> tuple[int, int]:
        """:func:`prune_access`; ``now`` is not used (the statements judge age by the
        database's ``now()``)."""
        return prune_access(self.db)

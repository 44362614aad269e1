"""The leader's observability chores, each a service of its own: the statistics roll-up
(:func:`pgsched.stats.roll_up`) and alert detection (:func:`pgsched.alerts.detect`), every
``observe_interval`` seconds (a slow roll-up never delays a tick, nor the alerts). The
webhook sender is :class:`pgsched.webhooks.Sender`."""

from __future__ import annotations

import logging
from datetime import datetime

from .. import alerts, stats
from ..clock import Clock
from ..db import Database, Row
from ..service import IntervalService

log = logging.getLogger("pgsched.scheduler")  # the name its log lines always had


class StatsRollUp(IntervalService):
    """:func:`pgsched.stats.roll_up` every ``interval`` seconds (a failure is logged and
    tried again at the next)."""

    name = "stats"
    log = log
    failure = "statistics roll-up failed: %s"

    def __init__(self, db: Database, clock: Clock, interval: float = 60.0):
        super().__init__(clock, interval)
        self.db = db

    def run_once(self, now: datetime) -> int:
        """The hourly rows written; ``now`` is not used (the roll-up's SQL reads ``now()``)."""
        return stats.roll_up(self.db)


class AlertDetection(IntervalService):
    """:func:`pgsched.alerts.detect` at the clock's ``now`` every ``interval`` seconds (a
    failure is logged and tried again at the next)."""

    name = "alerts"
    log = log
    failure = "alert detection failed: %s"

    def __init__(self, db: Database, clock: Clock, interval: float = 60.0):
        super().__init__(clock, interval)
        self.db = db

    def run_once(self, now: datetime) -> list[Row]:
        return alerts.detect(self.db, now)

"""The leader's usage job (issue 18; migrations 0021, 0025; docs/limits.md, "Compute and log
quotas: the usage job"): every ``usage_interval`` seconds it adds the compute seconds and
log bytes written since its last run to each tenant's ``tenant_usage``, marks the tenants
over a slow quota (:class:`pgsched.limits.SlowQuota`; the claim then takes nothing for
them, their work waits) and opens or resolves each tenant's ``quota`` alerts.

A run reads what was written since the last one (``usage_delta``, appended by statement
triggers where attempts and log lines are written), never the month's history: its cost
follows the work done in one interval, not the size of the history (benchmarks/usage.py).
"""

from __future__ import annotations

import logging
from datetime import datetime

from ..clock import Clock
from ..db import Database, Row
from ..service import IntervalService

log = logging.getLogger("pgsched.scheduler")


def measure(db: Database) -> list[Row]:
    """One usage run, in one transaction, by the database's ``now()``. Returns one row per
    change: ``change`` ('opened' or 'resolved': a quota alert; 'held': the tenant is over
    the slow quotas in ``quota``, comma-separated; 'released': it is under them all again,
    and its workers were notified), ``tenant``, ``quota`` (running, starts_per_hour,
    compute_minutes, log_bytes), ``details`` (an alert's ``used`` and ``limit``: executions,
    starts, minutes or bytes). Does nothing (returns []) while another run holds the lock."""
    with db.transaction() as tx:
        lock = tx.one("usage_lock")
        if not (lock and lock["locked"]):
            return []
        changes = tx.many("usage_measure")
    for c in changes:
        if c["change"] == "opened":
            log.warning(
                "quota alert: tenant %s reached its %s quota (%s of %s)",
                c["tenant"],
                c["quota"],
                c["details"]["used"],
                c["details"]["limit"],
            )
        elif c["change"] == "held":
            log.warning(
                "tenant %s is over its quota of %s: its work waits", c["tenant"], c["quota"]
            )
        elif c["change"] == "released":
            log.info("tenant %s is back under its quotas: its work starts again", c["tenant"])
    return changes


class UsageJob(IntervalService):
    """:func:`measure` every ``interval`` seconds (60 by default; a failure, such as a
    deadlock with a claim over a usage row, is logged and tried again at the next)."""

    name = "usage"
    log = log
    failure = "measuring tenant usage failed: %s"

    def __init__(self, db: Database, clock: Clock, interval: float = 60.0):
        super().__init__(clock, interval)
        self.db = db

    def run_once(self, now: datetime) -> list[Row]:
        """:func:`measure`; ``now`` is not used (the statement reads ``now()``)."""
        return measure(self.db)

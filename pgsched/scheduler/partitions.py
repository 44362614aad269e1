"""History partitions: created days ahead, dropped after the retention, while leading."""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime, timedelta

from ..clock import Clock
from ..db import Database
from ..errors import TransientError
from ..service import IntervalService

log = logging.getLogger("pgsched.scheduler")  # the name its log lines always had

# Seconds until partition maintenance is tried again after it failed or gave way to a lock.
RETRY = 60.0


def maintain_partitions(
    db: Database, now: datetime, retention_days: int, premake_days: int, lock_timeout_ms: int = 500
) -> dict:
    """Create the daily partitions from yesterday to ``premake_days`` ahead, drop those
    that ended more than ``retention_days`` before ``now`` (never one holding a live
    execution), and count rows in the DEFAULT partitions. Returns what it did.

    Each step waits at most ``lock_timeout_ms`` for a lock (DETACH needs the parent
    exclusively); a partition it could not lock in time is listed under ``busy`` and tried
    again next time.
    """
    today: date = now.astimezone(UTC).date()
    report: dict = {"created": [], "dropped": [], "kept_live": [], "busy": []}
    try:
        with db.transaction() as tx:
            tx.one("partition_lock_timeout", ms=lock_timeout_ms)
            report["created"] = [
                r["partition_name"]
                for r in tx.many(
                    "partition_ensure", from_day=today - timedelta(days=1), days=premake_days + 2
                )
            ]
    except TransientError:
        report["busy"].append("(creating partitions)")
    for part in db.many("partition_expired", cutoff=now - timedelta(days=retention_days)):
        if part["live"]:
            report["kept_live"].append(part["partition_name"])
            continue
        try:
            with db.transaction() as tx:
                tx.one("partition_lock_timeout", ms=lock_timeout_ms)
                row = tx.one(
                    "partition_drop", partition_name=part["partition_name"], parent=part["parent"]
                )
            (report["dropped"] if row and row["dropped"] else report["kept_live"]).append(
                part["partition_name"]
            )
        except TransientError:
            report["busy"].append(part["partition_name"])
    strays = db.one("partition_default_rows") or {}
    report["default_rows"] = {k: v for k, v in strays.items() if v}
    if report["created"] or report["dropped"]:
        log.info(
            "partitions: created %d, dropped %d", len(report["created"]), len(report["dropped"])
        )
    if report["kept_live"]:
        log.warning(
            "partitions past retention kept because they hold live executions: %s",
            report["kept_live"],
        )
    if report["busy"]:
        log.warning(
            "partition maintenance gave way to busy tables (will retry): %s", report["busy"]
        )
    if report["default_rows"]:
        log.warning(
            "rows outside every daily partition (in the DEFAULT partitions): %s",
            report["default_rows"],
        )
    return report


class Partitions(IntervalService):
    """:func:`maintain_partitions` every ``interval`` seconds (an hour by default), a
    minute (:data:`RETRY`, or ``interval`` if shorter) after a round that failed or found
    a partition busy. ``retention_days`` and ``premake_days`` as there."""

    name = "partitions"
    log = log
    failure = "partition maintenance failed: %s"

    def __init__(
        self,
        db: Database,
        clock: Clock,
        retention_days: int,
        premake_days: int,
        interval: float = 3600.0,
    ):
        super().__init__(clock, interval, retry=min(interval, RETRY))
        self.db, self.retention_days, self.premake_days = db, retention_days, premake_days

    def run_once(self, now: datetime) -> dict:
        return maintain_partitions(self.db, now, self.retention_days, self.premake_days)

    def next_wait(self, result: object) -> float:
        return self.retry if isinstance(result, dict) and result["busy"] else self.interval

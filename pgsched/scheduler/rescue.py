"""The rescue: executions of dead workers back in the queue, while leading.

A worker's executions are taken back at most ``worker_dead_after_heartbeats`` x its
heartbeat interval + ``rescue_interval`` after its last heartbeat (16 s with the defaults,
4 s with a 1 s heartbeat): :class:`Rescue` runs every ``rescue_interval`` seconds in its own
thread, whatever the tick sleeps; a new leader first waits one full dead-worker window.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime

from ..clock import Clock
from ..db import Database
from ..errors import PgschedError
from ..service import IntervalService
from .leadership import TermOver, fence

log = logging.getLogger("pgsched.scheduler")  # the name its log lines always had


def rescue(db: Database, epoch: int | None = None) -> list[dict]:
    """Declare workers silent for too long dead and put what they ran back in the queue
    (``pgsched_internal.rescue_v1``: every running execution without a live holder that reports
    it, migration 0015), waking the workers in the same transaction when any is pending
    again; cancel what is left running of stopping DAG runs (``pgsched_internal.dag_sweep_v1``).
    Returns one row per execution: id, worker, outcome (requeued, unclaimed: back in the
    queue as if never claimed, because it surely never started, dropped: such an execution
    of a task deleted meanwhile, dead or cancelled; the rules are in migration 0008).
    ``epoch``: the term it runs under, fenced as a tick's batch (raises TermOver)."""
    with db.transaction() as tx:
        fence(tx, epoch)
        rows = tx.many("scheduler_rescue")
        unclaimed = [r["execution_id"] for r in rows if r["outcome"] == "unclaimed"]
        if unclaimed:
            dropped = {r["id"] for r in tx.many("scheduler_rescue_drop_deleted", ids=unclaimed)}
            for r in rows:
                if r["execution_id"] in dropped:
                    r["outcome"] = "dropped"
        if any(r["outcome"] in ("requeued", "unclaimed") for r in rows):
            tx.exec("execution_wake")  # pending again by UPDATE: the insert trigger sends none
    for r in rows:
        log.warning(
            "rescued execution %s from dead worker %s: %s",
            r["execution_id"],
            r["worker_id"],
            r["outcome"],
        )
    swept = db.one("scheduler_dag_sweep")
    if swept and swept["cancelled"]:
        log.info("cancelled %d execution(s) of stopping DAG runs", swept["cancelled"])
    return rows


class Rescue(IntervalService):
    """While leading term ``epoch``: :func:`rescue` every ``interval`` seconds (it ran only
    when the tick woke, and the tick sleeps up to ``max_sleep`` with nothing due: a dead
    worker was noticed up to 5 s late). First the new leader's grace
    (``scheduler_rescue_grace``): workers that could not heartbeat while there was no
    leader or no database get one full window to be heard again. Ends when the term is
    over (the tick finds out too, and stands by)."""

    name = "rescue"
    log = log
    failure = "rescue of dead workers' executions failed: %s"

    def __init__(self, db: Database, clock: Clock, epoch: int | None, interval: float = 1.0):
        super().__init__(clock, interval)
        self.db = db
        self.epoch = epoch

    def run_once(self, now: datetime) -> list[dict]:
        """:func:`rescue` under this service's term. ``now`` is not used: the statements
        judge silence by the database's own ``now()``."""
        return rescue(self.db, self.epoch)

    def prepare(self, stop: threading.Event) -> bool:
        grace: float | None = None
        while grace is None and not stop.is_set():
            try:
                row = self.db.one("scheduler_rescue_grace")
                grace = float(row["seconds"]) if row else 0.0
            except PgschedError as exc:
                log.warning("could not read the rescue grace (%s); trying again", exc)
                stop.wait(self.interval)
        if grace:
            stop.wait(grace)
        return not stop.is_set()

    def ends_on(self, exc: Exception) -> bool:
        if isinstance(exc, TermOver):
            log.warning("rescue stopped: %s", exc)
            return True
        return False

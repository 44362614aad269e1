"""What one worker holds, under one lock: the buffer of claimed executions not started,
those being handed back, those a slot has taken and not started yet, and those whose
handler runs or whose end is being written. The claimer adds to it, the slots take from
it, the heartbeat reports it (``held``) and drops from it what the database no longer
gives the worker (``lost_ids``). Every execution is known by (id, lease id): a copy of the
same execution claimed afresh has a new lease.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from datetime import datetime

from ..db import Row
from .config import HEARTBEAT_STALE, SPREAD_SECONDS, WorkerConfig

log = logging.getLogger(__name__)


# A process worker's slots (Holdings.wanted): how many run short calls at least; after how
# many seconds a running call no longer counts as one; how long a slot left asleep beside
# buffered work waits before it looks again (a running call may have stalled meanwhile).
AWAKE = 2
FRESH = 1.0
NAP = 0.05


class Slot:
    """One running execution: :meth:`end` stops it early (the handler sees ``is_set()``);
    ``reason`` says why (``cancel``, ``handback`` when the worker stops, ``lease_lost`` when
    the database no longer gives it this worker: declared dead, or taken back). ``lease_id``
    is its claim's; ``ended``: its handler is done and its outcome is being written (a
    heartbeat's ``lost_ids`` then names it because its own write moved it). No Event per
    execution: creating one showed in the profile."""

    __slots__ = ("began", "ended", "lease_id", "reason")

    def __init__(self, lease_id: int) -> None:
        self.reason: str | None = None
        self.lease_id = lease_id
        self.ended = False
        self.began = time.monotonic()  # its handler's start, near enough (Holdings.wanted)

    def end(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason

    def is_set(self) -> bool:
        return self.reason is not None


def _start_order(row: Row) -> tuple[int, datetime, int]:
    return row["priority"], row["run_at"], row["id"]


def buffer_in_order(buffer: collections.deque[Row], rows: list[Row]) -> None:
    """Add claimed ``rows`` (in start order, as execution_claim returns them) to ``buffer``
    so that slots take each tenant's executions highest priority first, as the queue would
    have given them (a later claim may bring an execution of priority 1 enqueued behind a
    buffer of priority-9 ones), and take the tenants in turn: the buffer is a round over
    the tenants in it (in the order they first appear), each tenant's rows in start order
    (priority, run_at, id). So a tenant whose one execution is claimed while the worker
    holds a buffer of another tenant's flood waits for a free slot, not for the flood's
    buffered rows (the fair share of migration 0021 holds in the worker too, not only in
    the claim), and one tenant's priority-1 rows never pass another tenant's. The weights
    of the fair share decide how many rows of each tenant the claims bring; in the buffer
    each tenant's turn is one row. The buffer holds at most free slots plus the prefetch,
    so this is cheap; nothing is reordered when one tenant's rows come after its own."""
    items = [*buffer, *rows]
    tenants = {r.get("tenant") for r in items}
    if len(tenants) <= 1:
        last = _start_order(buffer[-1]) if buffer else None
        if last is None or all(_start_order(r) >= last for r in rows):
            buffer.extend(rows)
            return
        buffer.clear()
        buffer.extend(sorted(items, key=_start_order))
        return
    by_tenant: dict[object, list[Row]] = {}
    for r in items:
        by_tenant.setdefault(r.get("tenant"), []).append(r)
    queues = [sorted(own, key=_start_order) for own in by_tenant.values()]
    out: list[Row] = []
    for turn in range(max(len(q) for q in queues)):
        out.extend(q[turn] for q in queues if turn < len(q))
    buffer.clear()
    buffer.extend(out)


class Holdings:
    """The state the worker's parts share; every field under ``lock`` (``ready``: its
    condition, notified when a buffered execution and a free slot may meet)."""

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        self.lock = threading.Lock()
        self.ready = threading.Condition(self.lock)
        self.hard_stop = threading.Event()  # stopping now: running executions are handed back
        self.buffer: collections.deque[Row] = collections.deque()  # claimed, not started
        self.unclaiming: list[Row] = []  # taken off the buffer to hand back; not handed back yet
        self.closing = False  # slots take nothing more from the buffer
        self.running = 0  # executions whose handler runs
        self.recording = 0  # executions whose handler is done and whose outcome is being written
        self.active: dict[int, Slot] = {}
        self.starting: dict[
            int, int
        ] = {}  # id -> lease: taken off the buffer by a slot, not in active yet
        self.revoked: set[tuple[int, int]] = (
            set()
        )  # (id, lease) of starting that the database no longer gives us
        self.early_cancels: set[int] = set()  # cancels that came before their execution's slot
        self.avg_run: float | None = None  # recent handler duration (s), for the prefetch
        self.alive_at = (
            time.monotonic()
        )  # when the last statement the database confirmed alive was sent

    def confirm_alive(self, sent: float) -> None:
        """The database confirmed this registration alive by a statement sent at ``sent``
        (monotonic seconds): slots may start buffered executions again."""
        with self.ready:
            self.alive_at = max(self.alive_at, sent)
            self.ready.notify_all()

    def spread(self) -> bool:
        """Whether a slot that took buffered work wakes another (under ``lock``): when the
        work left would take a running slot more than ``SPREAD_SECONDS``."""
        avg = self.avg_run
        return avg is None or len(self.buffer) * avg > SPREAD_SECONDS * max(self.running, 1)

    def wanted(self, process: bool) -> bool:
        """Whether one more slot should start a buffered execution now (under
        ``lock``). On a thread worker (``process`` False), yes (the spread rule wakes slots).
        On a process worker, only as many slots run short calls as have work for
        ``SPREAD_SECONDS`` each, and at least ``AWAKE``: a slot awake stays awake while
        work is buffered, and each awake slot's call waits on a pipe beside the others on
        the same CPUs (16 of them made each no-op call take 3 ms, and the average the
        spread rule reads with it). A call that has run for ``FRESH`` seconds no longer
        counts: a stuck handler never keeps the others' work waiting longer."""
        if not process:
            return True
        now = time.monotonic()
        fresh = sum(1 for s in self.active.values() if not s.ended and now - s.began < FRESH)
        avg = self.avg_run
        return fresh < AWAKE or (
            avg is not None and len(self.buffer) * avg > SPREAD_SECONDS * fresh
        )

    def may_be_dead(self) -> bool:
        """Whether the leader may have declared this worker dead since its last confirmed
        heartbeat (HEARTBEAT_STALE); under ``lock``."""
        return time.monotonic() - self.alive_at > HEARTBEAT_STALE * self.config.heartbeat_interval

    def add(self, rows: list[Row]) -> None:
        """Buffer claimed ``rows`` in start order and wake a slot."""
        with self.ready:
            buffer_in_order(self.buffer, rows)
            self.ready.notify()  # who takes one wakes another if worth it (Executor.slot_loop)

    def close(self) -> list[Row]:
        """Slots take nothing more; returns what was buffered or being handed back (now
        no longer held here)."""
        with self.ready:
            self.closing = True
            rows = [*self.buffer, *self.unclaiming]
            self.buffer.clear()
            self.unclaiming.clear()
            self.ready.notify_all()
        return rows

    def holding(self) -> list[tuple[int, int]]:
        """(id, lease) of every execution this worker holds: buffered, being handed back,
        taken by a slot, running, or having its end written. The heartbeat reports the ids;
        the leader's rescue takes back one this worker holds in the database but leaves out
        of two reports in a row (a claim whose reply never arrived: migration 0015)."""
        with self.lock:
            return [
                *((r["id"], r["lease_id"]) for r in self.buffer),
                *((r["id"], r["lease_id"]) for r in self.unclaiming),
                *self.starting.items(),
                *((i, slot.lease_id) for i, slot in self.active.items()),
            ]

    def lost(self, lost: set[tuple[int, int]], worker_id: int | None) -> None:
        """The database no longer gives this worker these (id, lease) that it held when the
        heartbeat was composed (``lost_ids``): taken back by the leader's rescue, or moved
        by hand. A buffered one is dropped, one a slot is about to start is not started, and
        one whose handler runs is stopped (``lease_lost``: nothing recorded, its outcome
        would be refused). One whose outcome is being written, or was written since (no
        longer held here), is left alone: its own write moved it. (One being handed back is
        left to the hand-back, which its lost lease makes a no-op.)"""
        with self.lock:
            kept = [r for r in self.buffer if (r["id"], r["lease_id"]) not in lost]
            dropped = len(self.buffer) - len(kept)
            if dropped:
                self.buffer.clear()
                self.buffer.extend(kept)
            revoked = {(i, lease) for i, lease in lost if self.starting.get(i) == lease}
            self.revoked |= revoked
            stopped = [
                slot
                for i, slot in self.active.items()
                if (i, slot.lease_id) in lost and not slot.ended and slot.reason is None
            ]
        for slot in stopped:
            slot.end("lease_lost")
        if dropped or revoked or stopped:
            log.error(
                "worker %s no longer holds execution(s) %s in the database (taken back while this worker "
                "held them): %d dropped from the buffer, %d not started, %d stopped; nothing is recorded "
                "for them here",
                worker_id,
                sorted({i for i, _ in lost}),
                dropped,
                len(revoked),
                len(stopped),
            )

    def forget(self, execution_id: int, slot: Slot) -> None:
        """Under ``lock``: ``slot`` no longer runs ``execution_id``. Only that slot's entry
        goes: a copy of the same execution claimed afresh since (rescued from this worker,
        then claimed by it again) has its own slot under the same id, which the old slot's
        end must not remove from what the heartbeat reports as held (the leader would take
        the new copy back from a live worker, which would claim it again, and so on)."""
        if self.active.get(execution_id) is slot:
            del self.active[execution_id]

    def end_all(self, reason: str) -> dict[int, Slot]:
        """Stop every running execution (``reason`` as :meth:`Slot.end`); returns them.
        ``handback``: the worker stops now, and starts nothing more."""
        if reason == "handback":
            self.hard_stop.set()
        with self.lock:
            slots = dict(self.active)
        for slot in slots.values():
            slot.end(reason)
        return slots

    def cancel(self, execution_id: int) -> bool:
        """End a running execution as cancelled; False when no slot runs it here. One not
        started yet (buffered) is remembered briefly: the claim and the heartbeat also
        carry the request."""
        with self.lock:
            slot = self.active.get(execution_id)
            if slot is None:
                self.early_cancels.add(execution_id)
                if len(self.early_cancels) > 10_000:
                    self.early_cancels.clear()
                return False
        log.info("execution %s: cancel requested; stopping it", execution_id)
        slot.end("cancel")
        return True

    def wake_slot(self) -> None:
        """The calling thread is about to block on the database: another takes buffered work."""
        with self.ready:
            if self.buffer and self.running < self.config.concurrency:
                self.ready.notify()

"""The health of what pgsched runs on, as ``pgsched status``, the dashboard and ``/metrics``
show it (queries in ``sql/health.sql``; docs/observability.md, "Health"):

- **Clock offsets**: each live process's host clock minus the database's, in seconds, as
  measured with its heartbeat (:mod:`pgsched.clock`). Reported, never corrected for:
  every decision uses the database's clock. Warned about above the
  ``clock_offset_warn_seconds`` setting (1 s), either way.
- **Old snapshots**: what holds back the cleanup of dead rows (an open transaction with
  a snapshot or a transaction id, a prepared transaction, a replication slot's xmin), the
  oldest first. While one is held, VACUUM can remove no row version deleted after it
  began, so the hot ``execution`` table grows dead rows and every claim scans more of
  them. Warned about past the ``snapshot_age_warn_seconds`` setting (300 s), and for an
  inactive replication slot that holds an xmin (it holds it until it is dropped).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from .db import Database, Session

# Snapshot holders listed at most (the oldest first).
HOLDERS_SHOWN = 5


@dataclass
class ClockOffset:
    """One live process: ``kind`` ``worker`` or ``scheduler`` (``role`` leader or standby),
    ``id`` (its row in ``pgsched.worker`` / ``pgsched.scheduler_node``), ``name``,
    ``hostname``, ``pid``; ``offset_seconds``: its host's clock minus the database's
    (positive: the host is ahead; None until measured), ``round_trip_seconds`` of the
    measurement (the offset is within about half of it), ``measured_at`` (database time);
    ``warn``: the offset is above the threshold."""

    kind: str
    id: int
    name: str
    hostname: str
    pid: int
    role: str | None
    offset_seconds: float | None
    round_trip_seconds: float | None
    measured_at: datetime
    warn: bool = False

    @property
    def label(self) -> str:
        what = f"scheduler ({self.role})" if self.kind == "scheduler" else "worker"
        return f"{what} {self.id} {self.name}"


@dataclass
class SnapshotHolder:
    """One thing holding back the cleanup horizon: ``kind`` ``session``, ``prepared`` (a
    prepared transaction: ``detail`` is its gid) or ``replication_slot`` (``detail`` its
    name, ``state`` active or inactive); ``pid``, ``application_name``, ``usename``,
    ``client_addr``, ``state`` (``idle in transaction``, ``active``...) where known;
    ``since``: when its transaction began (None for a slot); ``age_seconds``; ``xid_age``:
    transactions begun since its horizon; ``warn``."""

    kind: str
    pid: int | None
    application_name: str | None
    usename: str | None
    client_addr: str | None
    state: str | None
    detail: str | None
    since: datetime | None
    age_seconds: float | None
    xid_age: int
    warn: bool = False

    @property
    def label(self) -> str:
        if self.kind == "prepared":
            return f"prepared transaction {self.detail!r} (owner {self.usename})"
        if self.kind == "replication_slot":
            return f"replication slot {self.detail!r} ({self.state})"
        app = f" {self.application_name!r}" if self.application_name else ""
        return f"pid {self.pid}{app} ({self.usename or self.detail})"


@dataclass
class Health:
    """``clock_offsets`` of the live processes; ``snapshot_holders`` (at most
    ``HOLDERS_SHOWN``, oldest first); the thresholds (seconds); ``warnings``: one
    ``{"kind": "clock_offset" | "old_snapshot", "message": ...}`` per problem."""

    clock_offsets: list[ClockOffset]
    clock_offset_warn_seconds: float
    snapshot_holders: list[SnapshotHolder]
    snapshot_age_warn_seconds: float
    warnings: list[dict[str, str]] = field(default_factory=list)

    @property
    def oldest_snapshot(self) -> SnapshotHolder | None:
        return self.snapshot_holders[0] if self.snapshot_holders else None

    @property
    def largest_clock_offset(self) -> ClockOffset | None:
        measured = [c for c in self.clock_offsets if c.offset_seconds is not None]
        return max(measured, key=lambda c: abs(c.offset_seconds or 0.0), default=None)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready values (instants stay ``datetime``: the CLI and API encode them)."""
        out = asdict(self)
        out["oldest_snapshot"] = out["snapshot_holders"][0] if self.snapshot_holders else None
        return out


def _clock_warning(c: ClockOffset, limit: float) -> str:
    assert c.offset_seconds is not None
    way = "ahead of" if c.offset_seconds > 0 else "behind"
    return (
        f"{c.label} on {c.hostname}: its clock is {abs(c.offset_seconds):.1f} s {way} the database's "
        f"(more than clock_offset_warn_seconds = {limit:g}). pgsched decides by the database's clock, "
        "but this host's logs and local times are off: fix its time synchronisation (NTP, chrony)"
    )


def _snapshot_warning(h: SnapshotHolder, limit: float) -> str:
    if h.kind == "replication_slot":
        return (
            f"{h.label} holds back the cleanup of dead rows ({h.xid_age} transactions) and is not in use: "
            f"drop it if its standby is gone (SELECT pg_drop_replication_slot('{h.detail}'))"
        )
    since = f" since {h.since.isoformat(timespec='seconds')}" if h.since else ""
    end = (
        f"COMMIT PREPARED or ROLLBACK PREPARED '{h.detail}'"
        if h.kind == "prepared"
        else f"end it (SELECT pg_terminate_backend({h.pid}))"
    )
    state = f", {h.state}," if h.kind == "session" and h.state else ""
    return (
        f"{h.label}{state} has held a snapshot for {h.age_seconds or 0:.0f} s{since} (more than "
        f"snapshot_age_warn_seconds = {limit:g}): VACUUM cannot remove dead rows meanwhile and "
        f'claims slow down; {end}. See docs/observability.md, "Old snapshots"'
    )


def check(db: Database | Session) -> Health:
    """Clock offsets of the live processes and the oldest snapshot holders, with warnings."""
    limits = db.one("health_thresholds") or {}
    clock_limit = float(limits.get("clock_offset_warn_seconds", 1.0))
    snapshot_limit = float(limits.get("snapshot_age_warn_seconds", 300.0))
    clocks = [ClockOffset(**r) for r in db.many("health_clock_offsets")]
    holders = [SnapshotHolder(**r) for r in db.many("health_snapshot_holders", limit=HOLDERS_SHOWN)]
    warnings = []
    for c in clocks:
        c.warn = c.offset_seconds is not None and abs(c.offset_seconds) > clock_limit
        if c.warn:
            warnings.append({"kind": "clock_offset", "message": _clock_warning(c, clock_limit)})
    for h in holders:
        h.warn = (h.age_seconds is not None and h.age_seconds > snapshot_limit) or (
            h.kind == "replication_slot" and h.state == "inactive"
        )
        if h.warn:
            warnings.append(
                {"kind": "old_snapshot", "message": _snapshot_warning(h, snapshot_limit)}
            )
    return Health(clocks, clock_limit, holders, snapshot_limit, warnings)

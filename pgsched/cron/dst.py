"""Clock changes: how cron(8) treats the hour a zone skips or repeats. Fixed-time jobs run
once when clocks fall back, wildcard jobs follow the wall clock; these helpers find the
instants a wall-clock reading stands for and the next fall-back. Instants are aware
``datetime``; readings are naive local times. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

# Longest stretch of wall-clock time a zone has ever repeated or skipped at once, with room.
MARGIN = timedelta(hours=3)


def just_before(day: date, zone: Any) -> datetime:
    """One second before ``day`` begins: naive, or in ``zone``. Computed on the UTC line,
    so it is a real instant even when the clock skips midnight, or the whole day before
    (Pacific/Apia skipped 30 December 2011)."""
    start = datetime.combine(day, time())
    if zone is None:
        return start - timedelta(seconds=1)
    return (start.replace(tzinfo=zone).astimezone(UTC) - timedelta(seconds=1)).astimezone(zone)


@dataclass(frozen=True)
class Stretch:
    start: datetime  # naive wall-clock readings, [start, end)
    end: datetime


def instants_showing(wall: datetime, zone: ZoneInfo) -> list[datetime]:
    """The UTC instants at which the clock in ``zone`` shows ``wall`` (naive): none in a
    skipped stretch, two in a repeated one."""
    out = []
    for fold in (0, 1):
        instant = wall.replace(tzinfo=zone, fold=fold).astimezone(UTC)
        if instant.astimezone(zone).replace(tzinfo=None) == wall and instant not in out:
            out.append(instant)
    return out


def fall_back_after(zone: ZoneInfo, after: datetime) -> tuple[datetime, Stretch] | None:
    """The clock falling back within ``MARGIN`` after ``after``: the instant it does, and
    the stretch of readings it shows again; None when it does not (zones change their
    offset at most once in such a span)."""
    before, later = (
        after.astimezone(zone).utcoffset(),
        (after + MARGIN).astimezone(zone).utcoffset(),
    )
    if before is None or later is None or later >= before:
        return None
    low, high = after, after + MARGIN  # the change lies in (low, high]: bisect to the second
    while high - low > timedelta(seconds=1):
        mid = low + (high - low) / 2
        if mid.astimezone(zone).utcoffset() == before:
            low = mid
        else:
            high = mid
    at = low.replace(microsecond=0) + timedelta(seconds=1)  # offsets change on whole seconds
    shown = at.astimezone(zone).replace(tzinfo=None)
    return at, Stretch(shown, shown + (before - later))


def fixed_time(expr: str) -> bool:
    """cron(8): a job whose minute and hour fields are both not wildcards runs once when
    the clock falls back; others follow the wall clock (both copies of the hour)."""
    if expr.startswith("@"):
        return expr != "@hourly"
    fields = expr.split()
    clock = fields[:3] if len(fields) == 6 else fields[:2]  # (second,) minute, hour
    return not any(f.startswith("*") for f in clock)


def second_copy(local: datetime) -> bool:
    """Whether the local time ``local`` lies in the second copy of a repeated hour (the
    clocks just fell back): PEP 495's ``fold=1`` where the two readings differ."""
    return local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()

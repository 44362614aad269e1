"""Schedules: when a task fires. Pure (no database).

Three kinds, each parsed from the text stored in ``task.schedule_expr``:

- ``cron``: a crontab(5) time specification (5 fields, 6 with a leading second, or an
  ``@nickname``), evaluated
  in the task's IANA time zone with croniter; fire times are returned as UTC instants.
- ``interval``: every N seconds (``"90"``, ``"30s"``, ``"5m"``, ``"1h30m"``, ``"1d"``),
  anchored at ``schedule_anchor``: fire times are ``anchor + k * interval``, so a late
  tick never shifts the ones after it (no drift).
- ``once``: one ISO 8601 instant (``"2026-12-01T09:00:00+01:00"``; no offset means the
  task's time zone).

All instants in and out are timezone-aware ``datetime`` in UTC.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from . import cron
from .errors import ValidationError

UTC = UTC


class ScheduleKind(StrEnum):
    """When a task fires (``task.schedule_kind``): see the module docstring; ``none``: only
    when triggered."""

    CRON = "cron"
    INTERVAL = "interval"
    ONCE = "once"
    NONE = "none"


KINDS = tuple(k.value for k in ScheduleKind)
_INTERVAL_PART = re.compile(r"(\d+(?:\.\d+)?)([smhd])")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
MIN_INTERVAL = 1.0  # seconds; the scheduler's resolution
MAX_INTERVAL = 3650 * 86400.0


# Files of the tz database that are no location's civil time: ``localtime`` and
# ``posixrules`` are each host's own setting (the same task would fire at other instants on
# another host), ``Factory`` is a placeholder ("-00"), and the ``right/`` tree counts leap
# seconds, so its 09:00 is 27 seconds off civil 09:00.
_NOT_CIVIL = re.compile(r"(?i)localtime|posixrules|factory|right/.*")


def zone(name: str) -> ZoneInfo:
    """The IANA time zone ``name`` (``"Europe/London"``). Raises ValidationError for an
    unknown zone, and for a name that is no location's civil time (``localtime``,
    ``posixrules``, ``Factory``, ``right/...``)."""
    if isinstance(name, str) and _NOT_CIVIL.fullmatch(name):
        raise ValidationError(
            "timezone",
            name,
            "is not a location's time zone (it is this host's own setting, "
            "a placeholder, or counts leap seconds); use one like 'UTC' or 'Europe/Berlin'",
        )
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationError(
            "timezone",
            name,
            "is not an IANA time zone in this host's tz database "
            "(misspelt, or dropped from tzdata); use one like 'UTC' or 'Europe/Berlin'",
        ) from None


def parse_interval(text: str, field: str = "schedule") -> float:
    """Seconds in an interval written as a number of seconds or as units
    (``"1h30m"``, ``"45s"``, ``"2d"``). Raises ValidationError naming ``field`` unless it
    is from 1 second to 3650 days."""
    seconds = interval_seconds(text, field)
    if not math.isfinite(seconds) or not MIN_INTERVAL <= seconds <= MAX_INTERVAL:
        raise ValidationError(
            field,
            text,
            f"must be an interval from {MIN_INTERVAL:g} second to {MAX_INTERVAL // 86400:g} days",
        )
    return seconds


def interval_seconds(text: str, field: str) -> float:
    """Seconds in an interval as :func:`parse_interval` reads it, unbounded (the caller
    bounds it, finite included: a rate limit's period takes 1 ms). Raises ValidationError
    naming ``field`` for text that is no interval."""
    value = text.strip().lower()
    try:
        seconds = float(value)
    except ValueError:
        parts = _INTERVAL_PART.findall(value)
        if not parts or "".join(n + u for n, u in parts) != value.replace(" ", ""):
            raise ValidationError(
                field,
                text,
                "is not an interval: use seconds or units like '30s', '5m', '1h30m', '1d'",
            ) from None
        seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    return seconds


def parse_once(text: str, tz: str) -> datetime:
    """The UTC instant of a ``once`` schedule; a naive timestamp is read in zone ``tz``.
    Raises ValidationError for text that is no ISO 8601 timestamp, and for a naive one
    that the clocks of ``tz`` skip (a spring-forward gap: no instant shows it; PEP 495
    would quietly move it by the gap). A time shown twice (clocks falling back) is its
    first showing."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValidationError(
            "schedule", text, "is not an ISO 8601 timestamp like '2026-12-01T09:00:00Z'"
        ) from None
    try:
        if when.tzinfo is None:
            local = when.replace(tzinfo=zone(tz))
            if local.astimezone(UTC).astimezone(local.tzinfo).replace(tzinfo=None) != when:
                raise ValidationError(
                    "schedule",
                    text,
                    f"does not exist in {tz}: the clocks skip that local "
                    "time (a daylight-saving change); give a time outside the gap, or an offset",
                )
            when = local
        return when.astimezone(UTC)
    except OverflowError:
        raise ValidationError("schedule", text, "is out of range") from None


def validate_cron(expr: str) -> str:
    """Normalise and check a cron expression (see :mod:`pgsched.cron`). Raises
    ValidationError naming the expression and what is wrong with it."""
    try:
        return cron.check(expr)
    except cron.CronError as exc:
        raise ValidationError("schedule", expr, f"is not a usable cron expression: {exc}") from None


class Span(NamedTuple):
    """What :meth:`Schedule.walk` found in a span of time: ``fires`` (how many), the
    ``latest`` of them (None when none) and the ``next`` fire after the span (None: never
    again)."""

    fires: int
    latest: datetime | None
    next: datetime | None


class Plan(NamedTuple):
    """What :meth:`Schedule.plan` gives a task: ``anchor`` (UTC, interval schedules only)
    and ``next_fire_at`` (UTC; None: nothing planned)."""

    anchor: datetime | None
    next_fire_at: datetime | None


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule. ``kind`` is one of :data:`KINDS`; ``expr`` the stored text;
    ``tz`` the IANA zone; ``anchor`` (UTC) the origin of an interval schedule."""

    kind: str
    expr: str | None
    tz: str = "UTC"
    anchor: datetime | None = None

    @classmethod
    def parse(
        cls, kind: str, expr: str | None, tz: str = "UTC", anchor: datetime | None = None
    ) -> Schedule:
        """Validate and normalise. Raises ValidationError naming the field and value."""
        zone(tz)
        if kind not in KINDS:
            raise ValidationError("schedule_kind", kind, f"must be one of {', '.join(KINDS)}")
        if kind == "none":
            return cls("none", None, tz)
        if expr is None or not str(expr).strip():
            raise ValidationError("schedule", expr, f"is required for a {kind} schedule")
        if kind == "cron":
            return cls(kind, validate_cron(expr), tz)
        if kind == "interval":
            parse_interval(expr)
            return cls(kind, expr.strip(), tz, anchor)
        parse_once(expr, tz)
        return cls(kind, expr.strip(), tz)

    def anchored_at(self, now: datetime) -> Schedule:
        """This schedule as planned at ``now`` (aware; the database's clock): an interval
        is anchored at ``now`` in whole seconds, so its fires are ``anchor + k *
        interval``; the other kinds have no anchor."""
        anchor = now.replace(microsecond=0) if self.kind == "interval" else None
        return Schedule(self.kind, self.expr, self.tz, anchor)

    def plan(
        self, now: datetime, fired_through: datetime | None = None, *, enabled: bool = True
    ) -> Plan:
        """What a task with this schedule stores when it is planned (created, updated, its
        DAG applied) at the database's ``now``: the anchor (:meth:`anchored_at`) and the
        first fire (:meth:`first_fire`, never at or before ``fired_through``). A paused
        task (not ``enabled``) has no next fire: it is planned when it resumes, from then,
        so missed fires are skipped; but a one-shot's plan is its instant whatever the
        time, kept through the pause."""
        planned = self.anchored_at(now)
        fire = planned.first_fire(now, fired_through) if enabled or self.kind == "once" else None
        return Plan(planned.anchor, fire)

    def next_after(self, after: datetime) -> datetime | None:
        """The first fire time strictly after ``after`` (aware), in UTC; None if the
        schedule never fires again (``once`` in the past, ``none``). Raises ValidationError
        on ``timezone`` for a cron schedule in a zone this host's tz database lacks."""
        after = after.astimezone(UTC)
        if self.kind == "cron":
            zone(self.tz)  # a stored zone the tz database no longer has: say so, naming it
            return cron.next_after(self.expr or "", self.tz, after)
        if self.kind == "interval":
            step = parse_interval(self.expr or "")
            anchor = (self.anchor or after).astimezone(UTC)
            elapsed = (after - anchor).total_seconds()
            k = max(0, math.floor(elapsed / step) + 1)
            nxt = anchor + timedelta(seconds=k * step)
            while nxt <= after:  # float rounding at exact multiples
                k += 1
                nxt = anchor + timedelta(seconds=k * step)
            return nxt
        if self.kind == "once":
            when = parse_once(self.expr or "", self.tz)
            return when if when > after else None
        return None

    def first_fire(self, now: datetime, fired_through: datetime | None = None) -> datetime | None:
        """When a newly planned (created, updated or resumed) task first fires, given the
        database's ``now`` and the latest fire instant the task has already dealt with
        (``fired_through``, its ``last_fire_at``: run or counted as missed; None when it
        never fired): a ``once`` task at its instant even if that has passed (it runs at
        once), others at their first fire after ``now``; never at or before
        ``fired_through``, so a re-plan can never bring back a fire that already ran (the
        database refuses it too: migration 0010)."""
        if self.kind == "once":
            when = parse_once(self.expr or "", self.tz)
            return when if fired_through is None or when > fired_through else None
        return self.next_after(now if fired_through is None else max(now, fired_through))

    def walk(self, after: datetime, until: datetime) -> Span:
        """The fires strictly after ``after`` and at or before ``until`` (aware, UTC): how
        many, the latest of them, and the first fire after ``until``. Counts exactly however
        long the span (an interval by arithmetic; cron a day at a time: see
        :func:`pgsched.cron.walk`), so a scheduler that was down for a month knows how many
        fires it missed. Raises what :meth:`next_after` raises."""
        after, until = after.astimezone(UTC), until.astimezone(UTC)
        if self.kind == "cron":
            zone(self.tz)  # as next_after: a zone the tz database lacks is named
            count, latest, nxt = cron.walk(self.expr or "", self.tz, after, until)
            return Span(count, latest, nxt)
        first = self.next_after(after)
        if first is None or first > until:
            return Span(0, None, first)
        if self.kind != "interval":
            return Span(1, first, self.next_after(first))
        step = timedelta(seconds=parse_interval(self.expr or ""))
        count = int((until - first) / step) + 1
        latest = first + (count - 1) * step
        while latest > until:  # rounding at exact multiples
            count, latest = count - 1, latest - step
        while latest + step <= until:
            count, latest = count + 1, latest + step
        return Span(count, latest, latest + step)

    def upcoming(self, after: datetime, count: int) -> list[datetime]:
        """The next ``count`` fire times after ``after``, UTC."""
        out: list[datetime] = []
        t: datetime | None = after
        while t is not None and len(out) < count:
            t = self.next_after(t)
            if t is not None:
                out.append(t)
        return out

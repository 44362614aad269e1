"""Fire times: the next fire of an expression after an instant, in an IANA zone, computed
with croniter on the canonical form of the expression and corrected where croniter
differs from cron(8) (the day rule, clock changes, the day items it lacks). Pure."""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from croniter import CroniterBadCronError, CroniterBadDateError, croniter

from .days import day_or, day_rule
from .dst import fall_back_after, fixed_time, instants_showing, just_before, second_copy
from .fields import NICKNAME_FIELDS, compact, expand, field_specs

# The Gregorian calendar repeats every 400 years: an expression that does not fire within
# 400 years of any instant never fires (cron(8) itself searches without a bound).
HORIZON_YEARS = 400


def next_after(expr: str, tz: str, after: datetime) -> datetime | None:
    """The first fire time of ``expr`` strictly after ``after`` (aware), read in the IANA
    zone ``tz``, as a UTC instant; None when there is none within the horizon."""
    zone = ZoneInfo(tz)
    try:
        if fixed_time(expr):
            # croniter walks aware local times: it runs a time skipped by a jump right after
            # the jump, as cron(8) does; only the second copy of a repeated time is dropped.
            for nxt in fires(expr, after.astimezone(zone)):
                if not second_copy(nxt):
                    return nxt.astimezone(UTC)
            return None
        return next_on_wall_clock(expr, zone, after)
    except (CroniterBadDateError, CroniterBadCronError, OverflowError, ValueError):
        return None  # no fire within the horizon, or none before the year 9999 ends


def fires(expr: str, base: datetime) -> Iterator[datetime]:
    """The local times (aware or naive, as ``base``) that match ``expr``, strictly after
    ``base``, in order, ending at the horizon. croniter walks the time fields; when the
    day fields hold ``L``, ``W`` or ``#`` items (which croniter reads only in part), it
    walks every day and :class:`Days` decides, jumping straight to the next matching day."""
    canonical = canonical_form(expr)
    options = dict(
        max_years_between_matches=HORIZON_YEARS,
        day_or=day_or(expr),
        second_at_beginning=len(canonical.split()) == 6,
    )
    days = day_rule(expr)
    it = iterator(canonical, base, options)
    while True:
        nxt = it.get_next(datetime)
        if days is None or days.match(nxt.date()):
            yield nxt
            continue
        day = days.next_date(nxt.date(), date(min(base.year + HORIZON_YEARS, 9999), 12, 31))
        if day is None:
            return
        it = iterator(canonical, just_before(day, base.tzinfo), options)


@functools.lru_cache(maxsize=4096)
def _template(canonical: str, day_or: bool, seconds: bool) -> croniter:
    return croniter(
        canonical,
        0,
        max_years_between_matches=HORIZON_YEARS,
        day_or=day_or,
        second_at_beginning=seconds,
    )


def iterator(canonical: str, base: datetime, options: dict[str, Any]) -> croniter:
    """A croniter for ``canonical`` starting at ``base``. Building one parses and expands
    the expression (about 1 ms, most of a scheduler tick's time); the expansion is made
    once per expression and copied, since walking only moves the copy's current time."""
    it = copy.copy(_template(canonical, options["day_or"], options["second_at_beginning"]))
    it.set_current(base, force=True)
    return it


@functools.lru_cache(maxsize=4096)
def canonical_form(expr: str) -> str:
    """``expr`` with every field written as an explicit list of numbers (nicknames spelled
    out), so croniter evaluates exactly the sets cron would: croniter mis-expands some
    forms, e.g. the one-value ranges ``31-31`` and ``12-12/5``."""
    fields = NICKNAME_FIELDS.get(expr, expr).split()
    if day_rule(expr) is not None:
        fields[-3] = fields[-1] = "*"  # Days decides the day; croniter walks every day
    return " ".join(
        compact(expand(text, *spec[1:]))
        for text, spec in zip(fields, field_specs(fields), strict=True)
    )


def next_on_wall_clock(expr: str, zone: ZoneInfo, after: datetime) -> datetime | None:
    """Wildcard jobs follow the wall clock (cron(8)): each matching local time fires at
    every instant the clock shows it: twice in a repeated interval, never in a skipped
    one. croniter walks naive wall-clock times from the reading at ``after``; each is
    mapped to its instants (PEP 495 folds), and a skipped stretch is jumped over whole.
    A clock that falls back within ``MARGIN`` after ``after`` shows earlier readings
    again: the first match in that repeated stretch competes too. (Only a fall-back that
    close matters: any later repeat comes after the first copy of its own reading.)"""
    reading = after.astimezone(zone).replace(tzinfo=None)
    best = None
    base = reading
    while best is None:
        wall = next(fires(expr, base), None)
        if wall is None:
            break
        instants = [i for i in instants_showing(wall, zone) if i > after]
        if instants:
            best = min(instants)
        else:  # the clock skips this reading: go on from the end of the skipped stretch
            base = max(
                wall,
                wall.replace(tzinfo=zone).astimezone(UTC).astimezone(zone).replace(tzinfo=None)
                - timedelta(seconds=1),
            )
    fall = fall_back_after(zone, after)
    if fall is not None:
        at, shown_again = fall  # from instant ``at`` the clock shows ``shown_again`` once more
        again = next(fires(expr, shown_again.start - timedelta(seconds=1)), None)
        if again is not None and again < shown_again.end:
            instant = at + (again - shown_again.start)
            if instant > after and (best is None or instant < best):
                best = instant
    return best

"""Cron expressions: the one module that knows cron. Pure (no database).

It checks an expression the way cronie's entry.c does (crontab(5): 5 fields, or 6 with a
leading second as in Quartz and Spring; numbers or names, ranges, steps on ``*`` or a
range, lists, the ``@`` nicknames; Quartz's ``L``, ``W`` and ``#`` day items) and
computes fire times with croniter in an IANA time zone, correcting croniter where it
differs from cron(8): the day-field rule, fixed-time jobs when clocks fall back, ranges
it mis-expands, and the day items it lacks. Everything else that reads cron (schedules, crontab import) goes through
here, so a correction lands in one place.
"""

from __future__ import annotations

import calendar
import copy
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

from croniter import CroniterBadCronError, CroniterBadDateError, croniter

NICKNAMES = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
_NUMBER_RE = re.compile(r"[0-9]+")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# The Gregorian calendar repeats every 400 years: an expression that does not fire within
# 400 years of any instant never fires (cron(8) itself searches without a bound).
_HORIZON_YEARS = 400


class CronError(ValueError):
    """An expression cron would reject, or one that can never fire. The message names the
    field, the value and why, in the field's terms: ``minute 60 is out of range 0-59``,
    ``minute 61 is out of range 0-59 (in 1,61)`` (a bad part of a field), ``day-of-month
    31 never occurs in month 2 (February has at most 29 days)``."""


def check(expr: str) -> str:
    """Validate ``expr`` and return it normalised (single spaces; nicknames lowercased; a
    day field of ``?`` written ``*``).

    Raises CronError for a wrong field count, a bad field, or an expression that never
    fires (``0 0 30 2 *``).
    """
    text = " ".join(expr.split())
    if not text:
        raise CronError("the expression is empty")
    if text.startswith("@"):
        if text.lower() not in NICKNAMES:
            raise CronError(f"unknown nickname '{text}' (expected one of {', '.join(NICKNAMES)})")
        return text.lower()
    fields = text.split(" ")
    if len(fields) not in (5, 6):
        raise CronError(f"'{text}' has {len(fields)} fields; cron needs 5 "
                        "(minute hour day-of-month month day-of-week), or 6 with a leading second")
    for i in (-3, -1):  # Quartz and Spring write '?' ("no specific value") in a day field
        if fields[i] == "?":
            fields[i] = "*"
    text = " ".join(fields)
    for value, spec in zip(fields, _specs(fields), strict=True):
        _check_field(value, *spec)
    if not croniter.is_valid(_canonical(text), second_at_beginning=len(fields) == 6):
        raise CronError(f"'{text}' is not a valid cron expression")
    if next_after(text, "UTC", datetime.now(timezone.utc)) is None:
        raise CronError(_why_never(fields))
    return text


def next_after(expr: str, tz: str, after: datetime) -> datetime | None:
    """The first fire time of ``expr`` strictly after ``after`` (aware), read in the IANA
    zone ``tz``, as a UTC instant; None when there is none within the horizon."""
    zone = ZoneInfo(tz)
    try:
        if _fixed_time(expr):
            # croniter walks aware local times: it runs a time skipped by a jump right after
            # the jump, as cron(8) does; only the second copy of a repeated time is dropped.
            for nxt in _fires(expr, after.astimezone(zone)):
                if not _second_copy(nxt):
                    return nxt.astimezone(timezone.utc)
            return None
        return _next_on_wall_clock(expr, zone, after)
    except (CroniterBadDateError, CroniterBadCronError, OverflowError, ValueError):
        return None  # no fire within the horizon, or none before the year 9999 ends


def _fires(expr: str, base: datetime) -> Iterator[datetime]:
    """The local times (aware or naive, as ``base``) that match ``expr``, strictly after
    ``base``, in order, ending at the horizon. croniter walks the time fields; when the
    day fields hold ``L``, ``W`` or ``#`` items (which croniter reads only in part), it
    walks every day and :class:`_Days` decides, jumping straight to the next matching day."""
    canonical = _canonical(expr)
    options = dict(max_years_between_matches=_HORIZON_YEARS, day_or=_day_or(expr),
                   second_at_beginning=len(canonical.split()) == 6)
    days = _day_rule(expr)
    it = _iterator(canonical, base, options)
    while True:
        nxt = it.get_next(datetime)
        if days is None or days.match(nxt.date()):
            yield nxt
            continue
        day = days.next_date(nxt.date(), date(min(base.year + _HORIZON_YEARS, 9999), 12, 31))
        if day is None:
            return
        it = _iterator(canonical, _just_before(day, base.tzinfo), options)


@functools.lru_cache(maxsize=4096)
def _template(canonical: str, day_or: bool, seconds: bool) -> croniter:
    return croniter(canonical, 0, max_years_between_matches=_HORIZON_YEARS, day_or=day_or,
                    second_at_beginning=seconds)


def _iterator(canonical: str, base: datetime, options: dict[str, Any]) -> croniter:
    """A croniter for ``canonical`` starting at ``base``. Building one parses and expands
    the expression (about 1 ms, most of a scheduler tick's time); the expansion is made
    once per expression and copied, since walking only moves the copy's current time."""
    it = copy.copy(_template(canonical, options["day_or"], options["second_at_beginning"]))
    it.set_current(base, force=True)
    return it


# Longest stretch of wall-clock time a zone has ever repeated or skipped at once, with room.
_MARGIN = timedelta(hours=3)


def _just_before(day: date, zone: Any) -> datetime:
    """One second before ``day`` begins: naive, or in ``zone``. Computed on the UTC line,
    so it is a real instant even when the clock skips midnight, or the whole day before
    (Pacific/Apia skipped 30 December 2011)."""
    start = datetime.combine(day, time())
    if zone is None:
        return start - timedelta(seconds=1)
    return (start.replace(tzinfo=zone).astimezone(timezone.utc) - timedelta(seconds=1)).astimezone(zone)


def _next_on_wall_clock(expr: str, zone: ZoneInfo, after: datetime) -> datetime | None:
    """Wildcard jobs follow the wall clock (cron(8)): each matching local time fires at
    every instant the clock shows it: twice in a repeated interval, never in a skipped
    one. croniter walks naive wall-clock times from the reading at ``after``; each is
    mapped to its instants (PEP 495 folds), and a skipped stretch is jumped over whole.
    A clock that falls back within ``_MARGIN`` after ``after`` shows earlier readings
    again: the first match in that repeated stretch competes too. (Only a fall-back that
    close matters: any later repeat comes after the first copy of its own reading.)"""
    reading = after.astimezone(zone).replace(tzinfo=None)
    best = None
    base = reading
    while best is None:
        wall = next(_fires(expr, base), None)
        if wall is None:
            break
        instants = [i for i in _instants(wall, zone) if i > after]
        if instants:
            best = min(instants)
        else:  # the clock skips this reading: go on from the end of the skipped stretch
            base = max(wall, wall.replace(tzinfo=zone).astimezone(timezone.utc).astimezone(zone)
                       .replace(tzinfo=None) - timedelta(seconds=1))
    fall = _fall_back_after(zone, after)
    if fall is not None:
        at, shown_again = fall  # from instant ``at`` the clock shows ``shown_again`` once more
        again = next(_fires(expr, shown_again.start - timedelta(seconds=1)), None)
        if again is not None and again < shown_again.end:
            instant = at + (again - shown_again.start)
            if instant > after and (best is None or instant < best):
                best = instant
    return best


@dataclass(frozen=True)
class _Stretch:
    start: datetime  # naive wall-clock readings, [start, end)
    end: datetime


def _instants(wall: datetime, zone: ZoneInfo) -> list[datetime]:
    """The UTC instants at which the clock in ``zone`` shows ``wall`` (naive): none in a
    skipped stretch, two in a repeated one."""
    out = []
    for fold in (0, 1):
        instant = wall.replace(tzinfo=zone, fold=fold).astimezone(timezone.utc)
        if instant.astimezone(zone).replace(tzinfo=None) == wall and instant not in out:
            out.append(instant)
    return out


def _fall_back_after(zone: ZoneInfo, after: datetime) -> tuple[datetime, _Stretch] | None:
    """The clock falling back within ``_MARGIN`` after ``after``: the instant it does, and
    the stretch of readings it shows again; None when it does not (zones change their
    offset at most once in such a span)."""
    before, later = after.astimezone(zone).utcoffset(), (after + _MARGIN).astimezone(zone).utcoffset()
    if before is None or later is None or later >= before:
        return None
    low, high = after, after + _MARGIN  # the change lies in (low, high]: bisect to the second
    while high - low > timedelta(seconds=1):
        mid = low + (high - low) / 2
        if mid.astimezone(zone).utcoffset() == before:
            low = mid
        else:
            high = mid
    at = low.replace(microsecond=0) + timedelta(seconds=1)  # offsets change on whole seconds
    shown = at.astimezone(zone).replace(tzinfo=None)
    return at, _Stretch(shown, shown + (before - later))


def _day_or(expr: str) -> bool:
    """crontab(5), as Vixie cron and cronie apply it: when both day fields are restricted a
    day matches if EITHER matches; a field that starts with ``*`` (``*``, ``*/2``) counts
    as unrestricted, and then both must match. croniter counts ``*/2`` as restricted, so
    this decides for it."""
    fields = _NICKNAME_FIELDS.get(expr, expr).split()
    dom, dow = fields[-3], fields[-1]
    return not (dom.startswith("*") or dow.startswith("*"))


def _fixed_time(expr: str) -> bool:
    """cron(8): a job whose minute and hour fields are both not wildcards runs once when
    the clock falls back; others follow the wall clock (both copies of the hour)."""
    if expr.startswith("@"):
        return expr != "@hourly"
    fields = expr.split()
    clock = fields[:3] if len(fields) == 6 else fields[:2]  # (second,) minute, hour
    return not any(f.startswith("*") for f in clock)


def _second_copy(local: datetime) -> bool:
    """Whether the local time ``local`` lies in the second copy of a repeated hour (the
    clocks just fell back): PEP 495's ``fold=1`` where the two readings differ."""
    return local.fold == 1 and local.replace(fold=0).utcoffset() != local.utcoffset()


# (name used in messages, lowest, highest, names or None); a name's value is
# its index + lowest.
_FIELDS = (
    ("minute", 0, 59, None),
    ("hour", 0, 23, None),
    ("day-of-month", 1, 31, None),
    ("month", 1, 12, _MONTHS),  # jan = 1
    ("day-of-week", 0, 7, _DAYS),  # sun = 0, and 7 is Sunday too
)


def _check_field(text: str, name: str, low: int, high: int, names: tuple[str, ...] | None) -> None:
    """Validate one time field (cronie entry.c get_list/get_range/get_number, plus the
    ``L``, ``W`` and ``#`` day items of Quartz). Raises CronError naming the field, the
    value that is wrong and why: ``minute 60 is out of range 0-59``; when the value is a
    part of the field, the field's text follows: ``hour 24 is out of range 0-23 (in 1-24)``."""
    for item in text.split(","):
        if not item:
            raise CronError(f"{name} {text} has an empty list element "
                            "(two commas, or one at an end)")
        special = _special(item, name)
        problem = special if isinstance(special, _Malformed) else None if special else _check_item(
            item, low, high, names)
        if problem:
            bad, predicate = problem
            raise CronError(f"{name} {bad} {predicate}" + ("" if bad == text else f" (in {text})"))


def _check_item(item: str, low: int, high: int, names: tuple[str, ...] | None) -> tuple[str, str] | None:
    """Return (offending text, predicate) for a bad (non-empty) list element, else None."""
    base, slash, step = item.partition("/")
    if slash:
        if base != "*" and "-" not in base:
            return item, "puts a step on a single value (a step needs '*' or a range)"
        if not _NUMBER_RE.fullmatch(step):
            return item, f"has step '{step}', which is not a number"
        if int(step) == 0:
            return item, "has step 0 (the step must be at least 1)"
    if base == "*":
        return None
    start_text, dash, end_text = base.partition("-")
    if not start_text:
        return item, "has a range with a missing start"
    if dash and not end_text:
        return item, "has a range with a missing end"
    start = _value(start_text, low, high, names)
    if isinstance(start, tuple):
        return start
    if dash:
        end = _value(end_text, low, high, names)
        if isinstance(end, tuple):
            return end
        if start > end:
            return item, f"is a reversed range ({start} > {end})"
    return None


def _value(text: str, low: int, high: int, names: tuple[str, ...] | None) -> int | tuple[str, str]:
    """A number in [low, high] or a 3-letter name; else (text, predicate)."""
    if _NUMBER_RE.fullmatch(text):
        number = int(text)
        return number if low <= number <= high else (text, f"is out of range {low}-{high}")
    if names and text.lower() in names:
        return names.index(text.lower()) + low
    kind = "a number" + (f" or a name ({names[0]}..{names[-1]})" if names else "")
    return text, f"is not {kind}"


# crontab(5): what each nickname stands for.
_NICKNAME_FIELDS = {"@yearly": "0 0 1 1 *", "@annually": "0 0 1 1 *", "@monthly": "0 0 1 * *",
                    "@weekly": "0 0 * * 0", "@daily": "0 0 * * *", "@midnight": "0 0 * * *",
                    "@hourly": "0 * * * *"}


def _expand(text: str, low: int, high: int, names: tuple[str, ...] | None) -> list[int]:
    """The values a (valid) field selects, sorted; day-of-week 7 becomes 0 (Sunday)."""
    values: set[int] = set()
    for item in text.split(","):
        base, _, step_text = item.partition("/")
        step = int(step_text) if step_text else 1
        if base == "*":
            start, end = low, high
        else:
            first, _, last = base.partition("-")
            lo = _value(first, low, high, names)
            hi = _value(last, low, high, names) if last else lo
            assert isinstance(lo, int) and isinstance(hi, int)  # check() has validated the field
            start, end = lo, hi
        values.update(range(start, end + 1, step))
    if names is _DAYS:
        values = {0 if v == 7 else v for v in values}
    return sorted(values)


@functools.lru_cache(maxsize=4096)
def _canonical(expr: str) -> str:
    """``expr`` with every field written as an explicit list of numbers (nicknames spelled
    out), so croniter evaluates exactly the sets cron would: croniter mis-expands some
    forms, e.g. the one-value ranges ``31-31`` and ``12-12/5``."""
    fields = _NICKNAME_FIELDS.get(expr, expr).split()
    if _day_rule(expr) is not None:
        fields[-3] = fields[-1] = "*"  # _Days decides the day; croniter walks every day
    return " ".join(_compact(_expand(text, *spec[1:])) for text, spec in zip(fields, _specs(fields), strict=True))


def _compact(values: list[int]) -> str:
    """Sorted values as a comma list, runs of 3 or more written ``a-b`` (short for croniter
    to parse; never the one-value ``a-a`` ranges it mis-reads)."""
    parts: list[str] = []
    run = [values[0]]
    for v in [*values[1:], None]:
        if v is not None and v == run[-1] + 1:
            run.append(v)
            continue
        parts.extend([f"{run[0]}-{run[-1]}"] if len(run) >= 3 else map(str, run))
        if v is not None:
            run = [v]
    return ",".join(parts)


def _specs(fields: list[str]) -> tuple[tuple[str, int, int, tuple[str, ...] | None], ...]:
    """The field specs for 5 fields, or 6 with a leading second (as Quartz and Spring)."""
    return ((("second", 0, 59, None),) if len(fields) == 6 else ()) + _FIELDS


# Quartz's day items (croniter reads some of them, cronsim others; pgsched decides all).
_DOM_SPECIAL = re.compile(r"(?i)(L)(?:-([0-9]+))?|([0-9]+)W|LW")
_DOW_SPECIAL = re.compile(r"(?i)([a-z0-9]+)(?:L|#([0-9]+))")


class _Malformed(NamedTuple):
    """A list element that is wrong, and what is wrong with it."""

    text: str
    predicate: str


def _special(item: str, field: str) -> tuple | None:
    """Parse an ``L``/``W``/``#`` item of a day field.

    Returns None when ``item`` is not one; else one of ``("last", n)`` (``L``, ``L-n``:
    the last day of the month, n days before it), ``("nearest", d)`` (``dW``: the weekday
    nearest day d, within the month), ``("last_weekday",)`` (``LW``), ``("last_dow", w)``
    (``wL``: the month's last weekday w), ``("nth_dow", w, k)`` (``w#k``: its k-th); or
    a :class:`_Malformed` when it is one but is malformed.
    """
    if field == "day-of-month":
        match = _DOM_SPECIAL.fullmatch(item)
        if not match:
            return None
        if item.upper() == "LW":
            return ("last_weekday",)
        if match.group(1):
            back = int(match.group(2) or 0)
            if match.group(2) is not None and not 1 <= back <= 30:
                return _Malformed(item, f"has offset {back}, out of range 1-30 (L-n: n days before the last day)")
            return ("last", back)
        day = int(match.group(3))
        if not 1 <= day <= 31:
            return _Malformed(item, f"has day {day}, out of range 1-31 (dW: the weekday nearest day d)")
        return ("nearest", day)
    if field == "day-of-week":
        if item.upper() == "L":
            return _Malformed(item, "is ambiguous ('L' alone is Saturday in Quartz); write 'sat', "
                                    "or e.g. '5L' for the last Friday of the month")
        match = _DOW_SPECIAL.fullmatch(item)
        if not match:
            return None
        weekday = _value(match.group(1), 0, 7, _DAYS)
        if isinstance(weekday, tuple):
            return _Malformed(*weekday)
        if match.group(2) is None:
            return ("last_dow", weekday % 7)
        nth = int(match.group(2))
        if not 1 <= nth <= 5:
            return _Malformed(item, f"has occurrence {nth}, out of range 1-5 (w#k: the k-th weekday w of the month)")
        return ("nth_dow", weekday % 7, nth)
    return None


@dataclass(frozen=True)
class _Days:
    """Which dates an expression with ``L``, ``W`` or ``#`` day items fires on.

    ``dom`` and ``dow`` hold each field's plain values (cron weekdays, Sunday = 0) and its
    special items (see :func:`_special`); ``months`` the month field's values; ``either``
    the day rule of :func:`_day_or` (a ``*`` field holds every value).
    """

    dom: frozenset[int]
    dom_special: tuple[tuple, ...]
    dow: frozenset[int]
    dow_special: tuple[tuple, ...]
    months: frozenset[int]
    either: bool

    def match(self, day: date) -> bool:
        """Whether the date ``day`` is a firing day (its month included)."""
        if day.month not in self.months:
            return False
        in_dom, in_dow = self._match_dom(day), self._match_dow(day)
        return in_dom or in_dow if self.either else in_dom and in_dow

    def next_date(self, after: date, limit: date) -> date | None:
        """The first firing date after ``after`` and not after ``limit``, or None."""
        day = after + timedelta(days=1)
        while day <= limit:
            if day.month not in self.months:
                day = date(day.year + day.month // 12, day.month % 12 + 1, 1)
            elif self.match(day):
                return day
            else:
                day += timedelta(days=1)
        return None

    def _match_dom(self, day: date) -> bool:
        last = calendar.monthrange(day.year, day.month)[1]
        if day.day in self.dom:
            return True
        for item in self.dom_special:
            if item[0] == "last" and day.day == last - item[1]:
                return True
            if item[0] == "nearest" and item[1] <= last and day.day == _nearest_weekday(day, item[1], last):
                return True
            if item[0] == "last_weekday" and day.day == _nearest_weekday(day, last, last):
                return True
        return False

    def _match_dow(self, day: date) -> bool:
        weekday = (day.weekday() + 1) % 7  # cron's numbering: Sunday = 0
        if weekday in self.dow:
            return True
        last = calendar.monthrange(day.year, day.month)[1]
        for item in self.dow_special:
            if item[1] != weekday:
                continue
            if item[0] == "last_dow" and day.day + 7 > last:
                return True
            if item[0] == "nth_dow" and (day.day - 1) // 7 + 1 == item[2]:
                return True
        return False


def _nearest_weekday(day: date, target: int, last: int) -> int:
    """Quartz's ``W``: the weekday (Monday-Friday) nearest day ``target`` of ``day``'s
    month, never crossing into another month: a Saturday moves to the Friday before
    (or to Monday the 3rd when it is the 1st), a Sunday to the Monday after (or to the
    Friday before when it is the month's last day ``last``)."""
    weekday = date(day.year, day.month, target).weekday()  # Monday = 0
    if weekday == 5:
        return target - 1 if target > 1 else target + 2
    if weekday == 6:
        return target + 1 if target < last else target - 2
    return target


@functools.lru_cache(maxsize=4096)
def _day_rule(expr: str) -> _Days | None:
    """A :class:`_Days` for a (valid) expression whose day fields hold ``L``, ``W`` or
    ``#`` items; None for the others, whose days croniter walks directly."""
    fields = _NICKNAME_FIELDS.get(expr, expr).split()
    specs = _specs(fields)
    items = {name: [(item, _special(item, name)) for item in fields[i].split(",")]
             for i, name in ((-3, "day-of-month"), (-1, "day-of-week"))}
    if not any(special for pairs in items.values() for _, special in pairs):
        return None

    def plain(name: str, index: int) -> frozenset[int]:
        texts = [item for item, special in items[name] if not special]
        return frozenset(_expand(",".join(texts), *specs[index][1:]) if texts else ())

    return _Days(dom=plain("day-of-month", -3), dom_special=tuple(s for _, s in items["day-of-month"] if s),
                 dow=plain("day-of-week", -1), dow_special=tuple(s for _, s in items["day-of-week"] if s),
                 months=frozenset(_expand(fields[-2], *specs[-2][1:])), either=_day_or(expr))


def walk(expr: str, tz: str, after: datetime, until: datetime) -> tuple[int, datetime | None, datetime | None]:
    """The fires of ``expr`` in zone ``tz`` strictly after ``after`` and at or before
    ``until`` (aware): how many, the latest (None when none), and the first fire after
    ``until`` (None when there is none within the horizon).

    Exact however long the span, without walking every fire: the time fields select the
    same readings on every matching day, so a matching local day that lies wholly inside
    the span, with no clock change on it or on the days either side (a reading skipped at
    23:30 runs at the next day's 00:00, as America/Nuuk's clocks jump from 23:00), holds
    ``seconds x minutes x hours`` fires, counted at once; other days (the span's first and
    last, and days near a clock change) are walked fire by fire. A month of a per-minute job is about 30 steps, not
    43,200 (a step, ``next_after``, costs about 0.1 ms)."""
    zone = ZoneInfo(tz)
    per_day, last_reading = _daily(expr)
    count, latest, at = 0, None, after
    while True:
        nxt = next_after(expr, tz, at)
        if nxt is None or nxt > until:
            return count, latest, nxt
        day = nxt.astimezone(zone).date()
        start = datetime.combine(day, time(), tzinfo=zone).astimezone(timezone.utc)
        end = datetime.combine(day + timedelta(days=1), time(), tzinfo=zone).astimezone(timezone.utc)
        if start > after and end <= until and _steady(zone, start, end):
            count += per_day
            latest = datetime.combine(day, last_reading, tzinfo=zone).astimezone(timezone.utc)
            at = end - timedelta(microseconds=1)
        else:
            count, latest, at = count + 1, nxt, nxt


def _steady(zone: ZoneInfo, start: datetime, end: datetime) -> bool:
    """Whether the local day from ``start`` to ``end`` (UTC instants of its midnights) is 24
    hours long and the clocks keep one offset from a day before it to a day after it."""
    if end - start != timedelta(days=1):
        return False
    offsets = {(at).astimezone(zone).utcoffset() for at in
               (start - timedelta(days=1), start, end - timedelta(seconds=1), end + timedelta(days=1))}
    return len(offsets) == 1


@functools.lru_cache(maxsize=4096)
def _daily(expr: str) -> tuple[int, time]:
    """For a (valid) expression: how many readings of the clock its time fields select in
    one day (``seconds x minutes x hours``), and the last of them."""
    fields = _canonical(expr).split()
    clock = fields[:-3]  # (second,) minute, hour
    specs = _specs(fields)[:len(clock)]
    values = [_expand(text, *spec[1:]) for text, spec in zip(clock, specs, strict=True)]
    if len(values) == 2:
        values.insert(0, [0])
    seconds, minutes, hours = values
    return len(seconds) * len(minutes) * len(hours), time(hours[-1], minutes[-1], seconds[-1])


# The most days each month can have (February: in a leap year).
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _why_never(fields: list[str]) -> str:
    """Why a valid expression (its fields, 5 or 6) that never fires does not, in the day
    fields' terms. Only the days can make it so: when both day fields are restricted a day
    matches either (and every weekday occurs in every month), so the cause is a
    day-of-month that no selected month has (``31`` in ``2``; ``L-30`` or ``30W`` in
    ``2``), or, when a day field starts with ``*`` and both must match (crontab(5)), a
    day-of-week no such day ever falls on (``15W`` is Monday to Friday, never ``*/6``)."""
    dom, month, dow = fields[-3:]
    months = _expand(month, 1, 12, _MONTHS)
    where = f"month {month}" if len(months) == 1 else f"months {month}"
    if not any(_occurs(dom, m) for m in months):
        offset = ", and L-n is n days before the last day" if re.search(r"(?i)L-", dom) else ""
        return f"day-of-month {dom} never occurs in {where} ({_lengths(months)}{offset})"
    return (f"day-of-week {dow} never falls on day-of-month {dom}"
            + ("" if month == "*" else f" in {where}")
            + " (a day field that starts with '*' makes a day match both, crontab(5))")


def _occurs(dom: str, month: int) -> bool:
    """Whether the day-of-month field ``dom`` (valid) selects a day month ``month`` has in
    some year."""
    days = _MONTH_DAYS[month - 1]

    def occurs(item: str) -> bool:
        special = _special(item, "day-of-month")
        if special is None:
            return _expand(item, 1, 31, None)[0] <= days
        if special[0] == "last":  # L-n: n days before the last day
            return special[1] < days
        if special[0] == "nearest":  # dW: only a day the month has
            return special[1] <= days
        return True  # LW

    return any(occurs(item) for item in dom.split(","))


def _lengths(months: list[int]) -> str:
    """``February has at most 29 days``, ``April, June and November have 30 days``..."""
    by_days: dict[int, list[str]] = {}
    for m in months:
        by_days.setdefault(_MONTH_DAYS[m - 1], []).append(calendar.month_name[m])
    parts = []
    for days, names in sorted(by_days.items()):
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        verb = "has" if len(names) == 1 else "have"
        parts.append(f"{listed} {verb} {'at most 29' if days == 29 else days} days")
    return "; ".join(parts)

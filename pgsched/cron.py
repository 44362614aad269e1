"""Cron expressions: the one module that knows cron. Pure (no database).

It checks an expression the way cronie's entry.c does (crontab(5): 5 fields, or 6 with a
leading second as in Quartz and Spring; numbers or names, ranges, steps on ``*`` or a
range, lists, the ``@`` nicknames) and computes fire
times with croniter in an IANA time zone, correcting croniter where it differs from
cron(8): when clocks fall back, a fixed-time job runs once, in the first copy of the
repeated hour. Everything else that reads cron (schedules, crontab import) goes through
here, so a correction lands in one place.
"""

from __future__ import annotations

import functools
import re
from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

from croniter import CroniterBadCronError, CroniterBadDateError, croniter

NICKNAMES = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
_NUMBER_RE = re.compile(r"[0-9]+")
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# A schedule must fire within this many years of when it is checked (leap days do).
_HORIZON_YEARS = 8


class CronError(ValueError):
    """An expression cron would reject, or one that can never fire. The message names the
    field and the value, e.g. ``minute field '61' is out of range 0-59``."""


def check(expr: str) -> str:
    """Validate ``expr`` and return it normalised (single spaces; nicknames lowercased).

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
    for value, spec in zip(fields, _specs(fields), strict=True):
        _check_field(value, *spec)
    if not croniter.is_valid(text, second_at_beginning=len(fields) == 6):
        raise CronError(f"'{text}' is not a valid cron expression")
    if next_after(text, "UTC", datetime.now(timezone.utc)) is None:
        raise CronError(f"'{text}' can never fire (no such date within {_HORIZON_YEARS} years)")
    return text


def next_after(expr: str, tz: str, after: datetime) -> datetime | None:
    """The first fire time of ``expr`` strictly after ``after`` (aware), read in the IANA
    zone ``tz``, as a UTC instant; None when there is none within the horizon."""
    zone = ZoneInfo(tz)
    canonical = _canonical(expr)
    seconds = len(canonical.split()) == 6
    options = dict(max_years_between_matches=_HORIZON_YEARS, day_or=_day_or(expr), second_at_beginning=seconds)
    try:
        if _fixed_time(expr):
            # croniter walks aware local times: it runs a time skipped by a jump right after
            # the jump, as cron(8) does; only the second copy of a repeated time is dropped.
            it = croniter(canonical, after.astimezone(zone), **options)
            while True:
                nxt = it.get_next(datetime)
                if not _second_copy(nxt):
                    return nxt.astimezone(timezone.utc)
        return _next_on_wall_clock(croniter, canonical, options, zone, after)
    except (CroniterBadDateError, CroniterBadCronError, OverflowError):
        return None


# Longest stretch of wall-clock time a zone has ever repeated or skipped at once, with room.
_MARGIN = timedelta(hours=3)


def _next_on_wall_clock(engine: type, canonical: str, options: dict, zone: ZoneInfo,
                        after: datetime) -> datetime | None:
    """Wildcard jobs follow the wall clock (cron(8)): each matching local time fires at
    every instant the clock shows it: twice in a repeated interval, never in a skipped
    one. croniter walks naive local times here; each is mapped to its instants (PEP 495
    folds) and the earliest one after ``after`` wins. Away from a clock change this is a
    single croniter step; near one, the walk covers ``_MARGIN`` on either side."""
    start = after.astimezone(zone).replace(tzinfo=None)
    if not _steady(zone, after):
        start -= _MARGIN  # a repeated interval may show earlier wall times again after ``after``
    it = engine(canonical, start, **options)
    best: datetime | None = None
    while True:
        wall = it.get_next(datetime)
        if best is not None and (_steady(zone, best) or wall > best.astimezone(zone).replace(tzinfo=None) + _MARGIN):
            return best
        for fold in (0, 1):
            instant = wall.replace(tzinfo=zone, fold=fold).astimezone(timezone.utc)
            if instant.astimezone(zone).replace(tzinfo=None) != wall:
                continue  # this wall time does not exist (the clock jumped over it)
            if instant > after and (best is None or instant < best):
                best = instant


def _steady(zone: ZoneInfo, instant: datetime) -> bool:
    """No clock change within ``_MARGIN`` of ``instant`` (zones change at most once in
    such a span)."""
    offsets = {(instant + k * _MARGIN).astimezone(zone).utcoffset() for k in (-1, 0, 1)}
    return len(offsets) == 1


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
    """Validate one time field (cronie entry.c get_list/get_range/get_number)."""
    for item in text.split(","):
        problem = _check_item(item, low, high, names)
        if problem:
            bad, predicate = problem
            subject = f"{name} field '{text}'" + ("" if bad == text else f": '{bad}'")
            raise CronError(f"{subject} {predicate}")


def _check_item(item: str, low: int, high: int, names: tuple[str, ...] | None) -> tuple[str, str] | None:
    """Return (offending text, predicate) for a bad list element, else None."""
    if not item:
        return item, "is an empty list element"
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
    if not start_text or (dash and not end_text):
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

"""Which days an expression fires on: crontab(5)'s rule for the two day fields, the dates
that Quartz's ``L``, ``W`` and ``#`` items select, and why an expression whose days never
occur does not fire. Pure."""

from __future__ import annotations

import calendar
import functools
import re
from dataclasses import dataclass
from datetime import date, timedelta

from .fields import MONTHS, NICKNAME_FIELDS, day_item, expand, field_specs


def day_or(expr: str) -> bool:
    """crontab(5), as Vixie cron and cronie apply it: when both day fields are restricted a
    day matches if EITHER matches; a field that starts with ``*`` (``*``, ``*/2``) counts
    as unrestricted, and then both must match. croniter counts ``*/2`` as restricted, so
    this decides for it."""
    fields = NICKNAME_FIELDS.get(expr, expr).split()
    dom, dow = fields[-3], fields[-1]
    return not (dom.startswith("*") or dow.startswith("*"))


@dataclass(frozen=True)
class Days:
    """Which dates an expression with ``L``, ``W`` or ``#`` day items fires on.

    ``dom`` and ``dow`` hold each field's plain values (cron weekdays, Sunday = 0) and its
    special items (see :func:`day_item`); ``months`` the month field's values; ``either``
    the day rule of :func:`day_or` (a ``*`` field holds every value).
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
            if (
                item[0] == "nearest"
                and item[1] <= last
                and day.day == nearest_weekday(day, item[1], last)
            ):
                return True
            if item[0] == "last_weekday" and day.day == nearest_weekday(day, last, last):
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


def nearest_weekday(day: date, target: int, last: int) -> int:
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
def day_rule(expr: str) -> Days | None:
    """A :class:`Days` for a (valid) expression whose day fields hold ``L``, ``W`` or
    ``#`` items; None for the others, whose days croniter walks directly."""
    fields = NICKNAME_FIELDS.get(expr, expr).split()
    specs = field_specs(fields)
    items = {
        name: [(item, day_item(item, name)) for item in fields[i].split(",")]
        for i, name in ((-3, "day-of-month"), (-1, "day-of-week"))
    }
    if not any(special for pairs in items.values() for _, special in pairs):
        return None

    def plain(name: str, index: int) -> frozenset[int]:
        texts = [item for item, special in items[name] if not special]
        return frozenset(expand(",".join(texts), *specs[index][1:]) if texts else ())

    return Days(
        dom=plain("day-of-month", -3),
        dom_special=tuple(s for _, s in items["day-of-month"] if s),
        dow=plain("day-of-week", -1),
        dow_special=tuple(s for _, s in items["day-of-week"] if s),
        months=frozenset(expand(fields[-2], *specs[-2][1:])),
        either=day_or(expr),
    )


# The most days each month can have (February: in a leap year).
MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def why_never(fields: list[str]) -> str:
    """Why a valid expression (its fields, 5 or 6) that never fires does not, in the day
    fields' terms. Only the days can make it so: when both day fields are restricted a day
    matches either (and every weekday occurs in every month), so the cause is a
    day-of-month that no selected month has (``31`` in ``2``; ``L-30`` or ``30W`` in
    ``2``), or, when a day field starts with ``*`` and both must match (crontab(5)), a
    day-of-week no such day ever falls on (``15W`` is Monday to Friday, never ``*/6``)."""
    dom, month, dow = fields[-3:]
    months = expand(month, 1, 12, MONTHS)
    where = f"month {month}" if len(months) == 1 else f"months {month}"
    if not any(_occurs(dom, m) for m in months):
        offset = ", and L-n is n days before the last day" if re.search(r"(?i)L-", dom) else ""
        return f"day-of-month {dom} never occurs in {where} ({_lengths(months)}{offset})"
    return (
        f"day-of-week {dow} never falls on day-of-month {dom}"
        + ("" if month == "*" else f" in {where}")
        + " (a day field that starts with '*' makes a day match both, crontab(5))"
    )


def _occurs(dom: str, month: int) -> bool:
    """Whether the day-of-month field ``dom`` (valid) selects a day month ``month`` has in
    some year."""
    days = MONTH_DAYS[month - 1]

    def occurs(item: str) -> bool:
        special = day_item(item, "day-of-month")
        if special is None:
            return expand(item, 1, 31, None)[0] <= days
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
        by_days.setdefault(MONTH_DAYS[m - 1], []).append(calendar.month_name[m])
    parts = []
    for days, names in sorted(by_days.items()):
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        verb = "has" if len(names) == 1 else "have"
        parts.append(f"{listed} {verb} {'at most 29' if days == 29 else days} days")
    return "; ".join(parts)

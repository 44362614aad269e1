"""The fields of a cron expression: their ranges and names, checking each field as cronie's
entry.c does (crontab(5)), Quartz's ``L``, ``W`` and ``#`` day items, and the values a
valid field selects. Pure."""

from __future__ import annotations

import re
from typing import NamedTuple


class CronError(ValueError):
    """An expression cron would reject, or one that can never fire. The message names the
    field, the value and why, in the field's terms: ``minute 60 is out of range 0-59``,
    ``minute 61 is out of range 0-59 (in 1,61)`` (a bad part of a field), ``day-of-month
    31 never occurs in month 2 (February has at most 29 days)``."""


NICKNAMES = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
_NUMBER_RE = re.compile(r"[0-9]+")
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


# (name used in messages, lowest, highest, names or None); a name's value is
# its index + lowest.
FIELDS = (
    ("minute", 0, 59, None),
    ("hour", 0, 23, None),
    ("day-of-month", 1, 31, None),
    ("month", 1, 12, MONTHS),  # jan = 1
    ("day-of-week", 0, 7, DAYS),  # sun = 0, and 7 is Sunday too
)


def check_field(text: str, name: str, low: int, high: int, names: tuple[str, ...] | None) -> None:
    """Validate one time field (cronie entry.c get_list/get_range/get_number, plus the
    ``L``, ``W`` and ``#`` day items of Quartz). Raises CronError naming the field, the
    value that is wrong and why: ``minute 60 is out of range 0-59``; when the value is a
    part of the field, the field's text follows: ``hour 24 is out of range 0-23 (in 1-24)``."""
    for item in text.split(","):
        if not item:
            raise CronError(
                f"{name} {text} has an empty list element (two commas, or one at an end)"
            )
        special = day_item(item, name)
        problem = (
            special
            if isinstance(special, Malformed)
            else None
            if special
            else _check_item(item, low, high, names)
        )
        if problem:
            bad, predicate = problem
            raise CronError(f"{name} {bad} {predicate}" + ("" if bad == text else f" (in {text})"))


def _check_item(
    item: str, low: int, high: int, names: tuple[str, ...] | None
) -> tuple[str, str] | None:
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
    start = field_value(start_text, low, high, names)
    if isinstance(start, tuple):
        return start
    if dash:
        end = field_value(end_text, low, high, names)
        if isinstance(end, tuple):
            return end
        if start > end:
            return item, f"is a reversed range ({start} > {end})"
    return None


def field_value(
    text: str, low: int, high: int, names: tuple[str, ...] | None
) -> int | tuple[str, str]:
    """A number in [low, high] or a 3-letter name; else (text, predicate)."""
    if _NUMBER_RE.fullmatch(text):
        number = int(text)
        return number if low <= number <= high else (text, f"is out of range {low}-{high}")
    if names and text.lower() in names:
        return names.index(text.lower()) + low
    kind = "a number" + (f" or a name ({names[0]}..{names[-1]})" if names else "")
    return text, f"is not {kind}"


# crontab(5): what each nickname stands for.
NICKNAME_FIELDS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def expand(text: str, low: int, high: int, names: tuple[str, ...] | None) -> list[int]:
    """The values a (valid) field selects, sorted; day-of-week 7 becomes 0 (Sunday)."""
    values: set[int] = set()
    for item in text.split(","):
        base, _, step_text = item.partition("/")
        step = int(step_text) if step_text else 1
        if base == "*":
            start, end = low, high
        else:
            first, _, last = base.partition("-")
            lo = field_value(first, low, high, names)
            hi = field_value(last, low, high, names) if last else lo
            assert isinstance(lo, int) and isinstance(hi, int)  # check() has validated the field
            start, end = lo, hi
        values.update(range(start, end + 1, step))
    if names is DAYS:
        values = {0 if v == 7 else v for v in values}
    return sorted(values)


def compact(values: list[int]) -> str:
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


def field_specs(fields: list[str]) -> tuple[tuple[str, int, int, tuple[str, ...] | None], ...]:
    """The field specs for 5 fields, or 6 with a leading second (as Quartz and Spring)."""
    return ((("second", 0, 59, None),) if len(fields) == 6 else ()) + FIELDS


# Quartz's day items (croniter reads some of them, cronsim others; pgsched decides all).
_DOM_SPECIAL = re.compile(r"(?i)(L)(?:-([0-9]+))?|([0-9]+)W|LW")
_DOW_SPECIAL = re.compile(r"(?i)([a-z0-9]+)(?:L|#([0-9]+))")


class Malformed(NamedTuple):
    """A list element that is wrong, and what is wrong with it."""

    text: str
    predicate: str


def day_item(item: str, field: str) -> tuple | None:
    """Parse an ``L``/``W``/``#`` item of a day field.

    Returns None when ``item`` is not one; else one of ``("last", n)`` (``L``, ``L-n``:
    the last day of the month, n days before it), ``("nearest", d)`` (``dW``: the weekday
    nearest day d, within the month), ``("last_weekday",)`` (``LW``), ``("last_dow", w)``
    (``wL``: the month's last weekday w), ``("nth_dow", w, k)`` (``w#k``: its k-th); or
    a :class:`Malformed` when it is one but is malformed.
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
                return Malformed(
                    item, f"has offset {back}, out of range 1-30 (L-n: n days before the last day)"
                )
            return ("last", back)
        day = int(match.group(3))
        if not 1 <= day <= 31:
            return Malformed(
                item, f"has day {day}, out of range 1-31 (dW: the weekday nearest day d)"
            )
        return ("nearest", day)
    if field == "day-of-week":
        if item.upper() == "L":
            return Malformed(
                item,
                "is ambiguous ('L' alone is Saturday in Quartz); write 'sat', "
                "or e.g. '5L' for the last Friday of the month",
            )
        match = _DOW_SPECIAL.fullmatch(item)
        if not match:
            return None
        weekday = field_value(match.group(1), 0, 7, DAYS)
        if isinstance(weekday, tuple):
            return Malformed(*weekday)
        if match.group(2) is None:
            return ("last_dow", weekday % 7)
        nth = int(match.group(2))
        if not 1 <= nth <= 5:
            return Malformed(
                item,
                f"has occurrence {nth}, out of range 1-5 (w#k: the k-th weekday w of the month)",
            )
        return ("nth_dow", weekday % 7, nth)
    return None

"""Checking a whole cron expression: the field count, each field, and that it can fire at
all. Pure."""

from __future__ import annotations

from datetime import UTC, datetime

from croniter import croniter

from .days import why_never
from .fields import NICKNAMES, CronError, check_field, field_specs
from .fires import canonical_form, next_after


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
        raise CronError(
            f"'{text}' has {len(fields)} fields; cron needs 5 "
            "(minute hour day-of-month month day-of-week), or 6 with a leading second"
        )
    for i in (-3, -1):  # Quartz and Spring write '?' ("no specific value") in a day field
        if fields[i] == "?":
            fields[i] = "*"
    text = " ".join(fields)
    for value, spec in zip(fields, field_specs(fields), strict=True):
        check_field(value, *spec)
    if not croniter.is_valid(canonical_form(text), second_at_beginning=len(fields) == 6):
        raise CronError(f"'{text}' is not a valid cron expression")
    if next_after(text, "UTC", datetime.now(UTC)) is None:
        raise CronError(why_never(fields))
    return text

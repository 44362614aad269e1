"""The checks every face shares for names (tasks, queues, tenants, tags, logins) and for
durations in seconds. Pure."""

from __future__ import annotations

import math
import re

from .errors import ValidationError

TASK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,199}")
QUEUE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
MAX_SECONDS = 366 * 86400.0  # timeouts and retry delays: at most a year


def check_name(field: str, value: object, pattern: re.Pattern[str] = QUEUE_NAME) -> None:
    """Raise ValidationError unless ``value`` is a string matching ``pattern`` whole."""
    if not isinstance(value, str) or not pattern.fullmatch(value):
        rule = (
            "1-200 characters: letters, digits and . _ : @ / - (starting with a letter or digit)"
            if pattern is TASK_NAME
            else "1-64 characters: letters, digits and . _ - (starting with a letter or digit)"
        )
        raise ValidationError(field, value, f"must be {rule}")


def check_seconds(field: str, value: object, *, allow_zero: bool = True) -> None:
    """Raise ValidationError unless ``value`` is a finite number of seconds within a year."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not (0 <= value <= MAX_SECONDS) or (value == 0 and not allow_zero):  # type: ignore[operator]
        raise ValidationError(
            field,
            value,
            f"must be a number of seconds from {0 if allow_zero else 'above 0'} to {MAX_SECONDS:g}",
        )

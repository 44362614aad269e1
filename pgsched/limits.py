"""The vocabulary of limits (migration 0021; docs/limits.md): the scopes, the slow quotas,
and how the faces write a limit (``4``, ``none``), a rate (``60/1m``) and a size
(``100GB``). Pure: no database here."""

from __future__ import annotations

import math
import re
from enum import StrEnum
from typing import Any

from .errors import ValidationError
from .schedule import interval_seconds

#: a task's limit fields (TaskSpec; migration 0021's task columns), written by the store's
#: task_limits_set beside the task's other fields
LIMIT_FIELDS = (
    "max_running",
    "rate_limit",
    "rate_period_seconds",
    "concurrency_key",
    "key_max_running",
    "key_rate_limit",
    "key_rate_period_seconds",
)


#: a task's own sandbox settings (TaskSpec; migration 0032's task columns), written by the
#: store's task_sandbox_set, and the most each limit may be (PostgreSQL's integer, bigint)
SANDBOX_LIMITS = {
    "limit_cpu_seconds": 2**31 - 1,
    "limit_memory_bytes": 2**63 - 1,
    "limit_nofile": 2**31 - 1,
    "limit_nproc": 2**31 - 1,
    "limit_fsize_bytes": 2**63 - 1,
}
SANDBOX_FIELDS = (*SANDBOX_LIMITS, "network")


def check_sandbox_fields(spec: Any) -> None:
    """A task's ``limit_*`` fields (whole numbers above 0, or None) and ``network`` (true,
    false or None; docs/security.md, "Sandbox"). Raises ValidationError naming the field."""
    for name, most in SANDBOX_LIMITS.items():
        value = getattr(spec, name)
        if value is not None and not (
            isinstance(value, int) and not isinstance(value, bool) and 0 < value <= most
        ):
            raise ValidationError(name, value, f"must be a whole number from 1 to {most}, or null")
    network = spec.network
    if network is not None and not isinstance(network, bool):
        raise ValidationError("network", network, "must be true, false or null")


class RateScope(StrEnum):
    """What a rate limit counts the starts of (pgsched.rate_start.scope): a queue of a
    tenant, a task, or a concurrency key of a tenant."""

    QUEUE = "queue"
    TASK = "task"
    KEY = "key"


class SlowQuota(StrEnum):
    """Tenant quotas measured by the leader's usage job rather than in the claim
    (pgsched.tenant_usage.over): a tenant over one takes no new work until it is back under."""

    COMPUTE_MINUTES = "compute_minutes"
    LOG_BYTES = "log_bytes"


# --- what the faces take: a limit, a rate, a size ----------------------------------------

#: what the command line says for "no limit"
NONE = "none"
INT_MAX = 2**31 - 1
BIGINT_MAX = 2**63 - 1
#: the bounds of a rate limit's period, in seconds: the database's (queue_set_limits_v1,
#: migration 0024: from 0.001, at most 31622400), which every face states in the words of
#: :data:`RATE_PERIOD_RANGE`
MIN_RATE_PERIOD_SECONDS = 0.001
MAX_RATE_PERIOD_SECONDS = 366 * 86400.0
RATE_PERIOD_RANGE = "from 0.001 seconds (1 ms) to 366 days (31622400 seconds)"
_BYTE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
#: a concurrency key template: text and {name} places (rendered by concurrency_key_v1)
_TEMPLATE = re.compile(r"(?:[^{}]|\{[^{}]+\})*")
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)")


def parse_count(
    field: str, text: str, low: int = 1, high: int = INT_MAX, none: bool = True
) -> int | None:
    """A limit or quota as the command line gives it: an integer from ``low`` to ``high``,
    or ``none`` (None: no limit) unless ``none`` is False. Raises ValidationError naming
    ``field``."""
    value = text.strip().lower()
    if value == NONE and none:
        return None
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or not low <= number <= high:
        unset = ", or 'none'" if none else ""
        raise ValidationError(field, text, f"must be an integer from {low} to {high}{unset}")
    return number


def parse_rate(field: str, text: str) -> tuple[int, float] | None:
    """A rate limit ``N/PERIOD``: N starts (from 1) per PERIOD, seconds or units
    (``60/1m``, ``10/30s``, ``1000/1h``, ``5/0.5s``, ``5/m``: one unit), a period of
    :data:`RATE_PERIOD_RANGE`; or ``none`` (None: no rate limit). Returns (N, period in
    seconds). Raises ValidationError naming ``field`` and the whole of ``text``."""
    value = text.strip().lower()
    if value == NONE:
        return None
    count, slash, period = value.partition("/")
    problem = "must be N/PERIOD like '60/1m' or '10/30s', or 'none'"
    if not slash or not count.strip() or not period.strip():
        raise ValidationError(field, text, problem)
    try:
        n = int(count)
    except ValueError:
        raise ValidationError(field, text, problem) from None
    if not 1 <= n <= INT_MAX:
        raise ValidationError(
            field, text, f"must start with a number of starts from 1 to {INT_MAX}"
        )
    period = period.strip()
    if period.isalpha():
        period = "1" + period
    try:
        seconds = interval_seconds(period, field)
    except ValidationError:
        raise ValidationError(
            field, text, "must have a period of seconds or units like '30s', '1m', '1h', '1d'"
        ) from None
    if not (
        math.isfinite(seconds) and MIN_RATE_PERIOD_SECONDS <= seconds <= MAX_RATE_PERIOD_SECONDS
    ):
        raise ValidationError(field, text, f"must have a period {RATE_PERIOD_RANGE}")
    return n, seconds


def parse_bytes(field: str, text: str) -> int | None:
    """A size: bytes, or a number with a unit (``100GB``: 10^9 bytes each; ``1.5GiB``:
    2^30; kB MB GB TB, KiB MiB GiB TiB), from 0; or ``none`` (None). Raises
    ValidationError naming ``field``."""
    value = text.strip().lower()
    if value == NONE:
        return None
    match = _SIZE.fullmatch(value)
    if match is None or match.group(2) not in _BYTE_UNITS:
        raise ValidationError(
            field, text, "must be a size like 100GB, 512MiB or 1000000, or 'none'"
        )
    size = int(float(match.group(1)) * _BYTE_UNITS[match.group(2)])
    if size > BIGINT_MAX:
        raise ValidationError(field, text, "is too large")
    return size


#: a tenant's quotas and their bounds (lowest, highest), as pgsched.tenant holds them; a
#: quota may be none (no quota), the weight (its share of a claim) may not
QUOTA_BOUNDS: dict[str, tuple[int, int]] = {
    "max_running": (0, INT_MAX),
    "max_starts_per_hour": (0, INT_MAX),
    "max_compute_minutes_per_month": (0, BIGINT_MAX),
    "max_log_bytes": (0, BIGINT_MAX),
    "weight": (1, 100),
}


def parse_quota(field: str, text: str) -> int | None:
    """A tenant's quota ``field`` (a key of :data:`QUOTA_BOUNDS`) as the faces write it:
    ``max_log_bytes`` a size (:func:`parse_bytes`), the others a count in their bounds
    (:func:`parse_count`; 0 starts nothing); ``none`` (None: no quota), which ``weight``
    refuses. Raises ValidationError naming ``field`` and ``text``."""
    low, high = QUOTA_BOUNDS[field]
    if field == "max_log_bytes":
        return parse_bytes(field, text)
    if field == "weight":
        return parse_count(field, text, low, high, none=False)
    return parse_count(field, text, low, high)


def format_rate(limit: int | None, period_seconds: float | None) -> str | None:
    """``60/1m`` for a rate limit of 60 per 60 s (the largest whole unit of the period),
    None for none."""
    if limit is None or period_seconds is None:
        return None
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if period_seconds >= size and period_seconds % size == 0:
            return f"{limit}/{int(period_seconds // size)}{unit}"
    return f"{limit}/{period_seconds:g}s"


def format_bytes(size: int | None, sep: str = "") -> str | None:
    """``100GB`` (whole decimal units where they fit, ``sep`` between number and unit:
    ``100 GB`` for a page), else bytes; None for none. :func:`parse_bytes` reads either."""
    if size is None:
        return None
    for unit, scale in (("TB", 10**12), ("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if size >= scale and size % scale == 0:
            return f"{size // scale}{sep}{unit}"
    return str(size)


def check_task_limits(
    max_running: object,
    rate_limit: object,
    rate_period_seconds: object,
    concurrency_key: object,
    key_max_running: object,
    key_rate_limit: object,
    key_rate_period_seconds: object,
) -> None:
    """The limits of a task (:class:`~pgsched.taskspec.TaskSpec`, issue 18): caps from 1
    or None; a rate limit and its period (seconds, :data:`RATE_PERIOD_RANGE`) together or not
    at all; a ``concurrency_key`` template of 1 to 200 characters (``customer:{id}``:
    each ``{name}`` is the execution's param), which key limits need. Raises
    ValidationError naming the first bad field and its value."""
    for field, value in (
        ("max_running", max_running),
        ("rate_limit", rate_limit),
        ("key_max_running", key_max_running),
        ("key_rate_limit", key_rate_limit),
    ):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= INT_MAX
        ):
            raise ValidationError(field, value, f"must be an integer from 1 to {INT_MAX}, or null")
    for field, value in (
        ("rate_period_seconds", rate_period_seconds),
        ("key_rate_period_seconds", key_rate_period_seconds),
    ):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if value is not None and (
            not ok or not MIN_RATE_PERIOD_SECONDS <= value <= MAX_RATE_PERIOD_SECONDS  # type: ignore[operator]
        ):
            raise ValidationError(field, value, f"must be seconds {RATE_PERIOD_RANGE}, or null")
    for limit, period, name in (
        (rate_limit, rate_period_seconds, "rate_limit"),
        (key_rate_limit, key_rate_period_seconds, "key_rate_limit"),
    ):
        if (limit is None) != (period is None):
            raise ValidationError(
                name, limit, f"and {name.replace('limit', 'period_seconds')} go together"
            )
    if concurrency_key is not None and (
        not isinstance(concurrency_key, str)
        or not 1 <= len(concurrency_key) <= 200
        or "\x00" in concurrency_key
    ):
        raise ValidationError(
            "concurrency_key", concurrency_key, "must be a template of 1 to 200 characters"
        )
    if concurrency_key is not None and not _TEMPLATE.fullmatch(concurrency_key):
        raise ValidationError(
            "concurrency_key",
            concurrency_key,
            "must be text with {param} places, each brace closed and no brace inside one "
            "(customer:{customer_id})",
        )
    if concurrency_key is None and (key_max_running is not None or key_rate_limit is not None):
        which = "key_max_running" if key_max_running is not None else "key_rate_limit"
        raise ValidationError(
            which, key_max_running or key_rate_limit, "needs a concurrency_key to count by"
        )


class Quota(StrEnum):
    """The tenant quotas a ``quota`` alert names (pgsched.alert.details->>'quota',
    pgsched.tenant_usage.alerted; migration 0025): executions at once, starts this clock
    hour, compute minutes this month, stored log bytes."""

    RUNNING = "running"
    STARTS_PER_HOUR = "starts_per_hour"
    COMPUTE_MINUTES = "compute_minutes"
    LOG_BYTES = "log_bytes"

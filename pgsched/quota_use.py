"""A tenant's use of each quota, as the web and ``/metrics`` show it: pure, from a row of
:func:`pgsched.stores.limits.tenant_quotas` (or ``limits_web_tenant_usage``, the same
columns for many tenants).

``max_running`` and ``max_starts_per_hour`` are reached when the use is at the quota
(the claim then takes nothing more: docs/limits.md); ``compute_minutes`` and
``log_bytes`` when the leader's usage job says so (``over``: at or past the quota), which
is what holds the tenant's claims. Every face labels a quota by :func:`state`: ``ok``,
``at quota`` (used = quota: work waits) or ``over`` (used > quota: a quota lowered below
the use, or use measured after it was reached).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

#: (quota key as ``over``/``at`` names it, column of the quota, column of the use, unit)
QUOTAS: tuple[tuple[str, str, str, str], ...] = (
    ("max_running", "max_running", "running", "executions at once"),
    ("max_starts_per_hour", "max_starts_per_hour", "hour_starts", "starts this hour (UTC)"),
    (
        "compute_minutes",
        "max_compute_minutes_per_month",
        "compute_minutes",
        "compute minutes this month (UTC)",
    ),
    ("log_bytes", "max_log_bytes", "log_bytes", "bytes of stored logs"),
)


@dataclass(frozen=True)
class Use:
    """One quota of a tenant: ``quota`` (a key of :data:`QUOTAS`), ``used``, ``limit``
    (None: no quota), ``unit`` (words), ``holds`` (it holds the tenant's claims now),
    ``percent`` (used of limit, 0 to 100, for a bar; None without a limit) and ``state``
    (:func:`state`)."""

    quota: str
    used: float
    limit: int | None
    unit: str
    holds: bool
    percent: float | None
    state: str | None


#: the labels of :func:`state`
OK, AT_QUOTA, OVER = "ok", "at quota", "over"


def state(used: float, limit: int | None, holds: bool = False) -> str | None:
    """How a quota is labelled: None without a quota; ``over`` when ``used`` passes
    ``limit``; ``at quota`` when it is at it, or the quota ``holds`` the tenant's claims
    (a slow quota the usage job judged reached); else ``ok``."""
    if limit is None:
        return None
    if used > limit:
        return OVER
    if used >= limit or holds:
        return AT_QUOTA
    return OK


def uses(row: dict[str, Any]) -> list[Use]:
    """The four quotas of one tenant's row, in the order of :data:`QUOTAS`."""
    over_slow = set(row.get("over") or ())
    out = []
    for quota, limit_col, used_col, unit in QUOTAS:
        limit, used = row.get(limit_col), float(row.get(used_col) or 0)
        if quota in ("compute_minutes", "log_bytes"):
            holds = quota in over_slow
        else:
            holds = limit is not None and used >= limit
        percent = None
        if limit is not None:
            percent = 100.0 if limit == 0 else min(100.0, 100.0 * used / limit)
        out.append(Use(quota, used, limit, unit, holds, percent, state(used, limit, holds)))
    return out

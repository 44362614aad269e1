"""The vocabulary of limits (migration 0021; docs/limits.md). Pure: no database here."""

from __future__ import annotations

from enum import StrEnum


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


class Quota(StrEnum):
    """The tenant quotas a ``quota`` alert names (pgsched.alert.details->>'quota',
    pgsched.tenant_usage.alerted; migration 0025): executions at once, starts this clock
    hour, compute minutes this month, stored log bytes."""

    RUNNING = "running"
    STARTS_PER_HOUR = "starts_per_hour"
    COMPUTE_MINUTES = "compute_minutes"
    LOG_BYTES = "log_bytes"

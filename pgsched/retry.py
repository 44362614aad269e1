"""Retry backoff: how long to wait before the next attempt. Pure.

Policies (the names users write): ``fixed`` (always ``base``), ``linear``
(``base * attempt``), ``exponential`` (``base * 2**(attempt-1)``) and
``exponential_jitter`` (exponential with "full jitter": a uniform draw between 0 and the
exponential delay, as AWS's backoff note recommends against thundering herds). Every
delay is capped at ``cap``. Seconds throughout.
"""

from __future__ import annotations

import random
from enum import StrEnum


class RetryPolicy(StrEnum):
    """How the delay grows from attempt to attempt (``task.retry_policy``): see above."""

    FIXED = "fixed"
    LINEAR = "linear"
    EXPONENTIAL = "exponential"
    EXPONENTIAL_JITTER = "exponential_jitter"


POLICIES = tuple(p.value for p in RetryPolicy)


def backoff_seconds(
    policy: str, attempt: int, base: float, cap: float, rng: random.Random | None = None
) -> float:
    """Delay in seconds after failed attempt number ``attempt`` (1 = the first try).

    Raises ValueError for an unknown policy or an attempt below 1.
    """
    if attempt < 1:
        raise ValueError(f"attempt must be 1 or more, got {attempt}")
    if policy == "fixed":
        delay = base
    elif policy == "linear":
        delay = base * attempt
    elif policy in ("exponential", "exponential_jitter"):
        delay = base * 2.0 ** min(attempt - 1, 62)
    else:
        raise ValueError(f"retry policy {policy!r} is not one of {', '.join(POLICIES)}")
    delay = min(delay, cap)
    if policy == "exponential_jitter":
        delay = (rng or random).uniform(0, delay)
    return delay

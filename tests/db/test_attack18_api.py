"""Attacks on the queue functions of issue 18 (migration 0024) by tenant B's own logins,
with bad input. Each test asserts the safe behaviour: it fails while the attack works."""

from __future__ import annotations

import pytest
from psycopg import errors as pg_errors

from ..tenancy import login as _as


def test_attack18_a_pause_reason_carries_no_control_characters(ab):
    """`by` is refused with a control character in it; the reason beside it is not. B's
    application pauses with a reason holding a newline and a terminal escape, which the
    installation's operator then sees in `pgsched status`, `queue list` and `execution
    show` (wait_reason): a forged second line, or the terminal cleared."""
    _, b, _ = ab
    reason = "deploy\n[pgsched] queue resumed by user admin\x1b[2J"
    with _as(b.app) as c:
        try:
            stored = c.execute(
                "SELECT pause_reason FROM pgsched.queue_pause_v1('q1', %s)", [reason]
            ).fetchone()["pause_reason"]
        except pg_errors.InvalidParameterValue:
            return  # refused: safe
    assert not any(ch in stored for ch in "\n\r\x1b"), f"stored reason: {stored!r}"


def test_attack18_a_rate_period_is_one_a_window_can_hold(ab):
    """rate_period_seconds must be "above 0": 1e-300 is, and is stored; the window it makes
    (make_interval(secs => 1e-300) is 0) holds no earlier start, so the limit reads as
    set (`queue list`: 1 per 1e-300 s) and bounds only one claim's own picks. Periods under a microsecond should be
    refused."""
    _, b, _ = ab
    with _as(b.app) as c:
        with pytest.raises(pg_errors.InvalidParameterValue):
            c.execute(
                "SELECT * FROM pgsched.queue_set_limits_v1('q1', rate_limit => 1, "
                "rate_period_seconds => 1e-300)"
            )


def test_attack18_a_tenants_login_reads_no_other_tenants_quotas(ab):
    """0021 put the quotas and the weight on pgsched.tenant, which every engine login reads
    whole (0018 granted SELECT for the tenant map): B's engine reads A's max_running,
    starts per hour, compute and log quotas and weight, what A's plan with the
    installation is. docs/limits.md: a tenant's logins read their own quotas."""
    a, b, _ = ab
    with _as(b.engine) as c:
        try:
            rows = c.execute(
                "SELECT name, max_running, max_starts_per_hour, weight FROM pgsched.tenant "
                "WHERE name = %s",
                [a.name],
            ).fetchall()
        except pg_errors.InsufficientPrivilege:
            rows = []
    assert rows == [], f"B's engine reads A's quotas: {rows}"

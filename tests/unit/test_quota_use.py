"""How every face labels a tenant's quota (pgsched/quota_use.py): ``ok`` under it, ``at
quota`` at it (the claim takes nothing more: work waits), ``over`` past it; and which
quotas hold the tenant's claims."""

from __future__ import annotations

from pgsched import quota_use


def row(**over: object) -> dict:
    base: dict = {
        "max_running": None,
        "running": 0,
        "max_starts_per_hour": None,
        "hour_starts": 0,
        "max_compute_minutes_per_month": None,
        "compute_minutes": 0.0,
        "max_log_bytes": None,
        "log_bytes": 0,
        "over": [],
    }
    return base | over


def states(r: dict) -> dict[str, tuple[str | None, bool]]:
    return {u.quota: (u.state, u.holds) for u in quota_use.uses(r)}


def test_a_tenant_exactly_at_its_quota_is_at_quota_not_over():
    got = states(row(max_running=5, running=5, max_starts_per_hour=100, hour_starts=100))
    assert got["max_running"] == ("at quota", True)
    assert got["max_starts_per_hour"] == ("at quota", True)


def test_under_is_ok_past_is_over_and_no_quota_has_no_label():
    got = states(row(max_running=5, running=4, max_starts_per_hour=10, hour_starts=12))
    assert got["max_running"] == ("ok", False)
    assert got["max_starts_per_hour"] == ("over", True)  # a quota lowered below the use
    assert got["compute_minutes"] == (None, False)


def test_a_quota_of_zero_with_nothing_used_is_at_quota():
    assert states(row(max_running=0))["max_running"] == ("at quota", True)


def test_slow_quotas_hold_as_the_usage_job_judged_and_are_labelled_by_their_use():
    got = states(
        row(
            max_compute_minutes_per_month=100,
            compute_minutes=100.0,
            max_log_bytes=1000,
            log_bytes=1500,
            over=["compute_minutes", "log_bytes"],
        )
    )
    assert got["compute_minutes"] == ("at quota", True)
    assert got["log_bytes"] == ("over", True)
    # measured under its quota, not judged over: ok, and holding nothing
    assert states(row(max_log_bytes=1000, log_bytes=10))["log_bytes"] == ("ok", False)
    # judged reached, then the quota was raised before the next measure: still holds
    assert states(row(max_log_bytes=10**6, log_bytes=10, over=["log_bytes"]))["log_bytes"] == (
        "at quota",
        True,
    )

"""Unit tests for pgsched.retry.backoff_seconds (pure)."""

from __future__ import annotations

import random

import pytest

from pgsched.retry import POLICIES, backoff_seconds


def delays(policy: str, attempts: range, base: float = 10.0, cap: float = 1e9) -> list[float]:
    return [backoff_seconds(policy, a, base, cap) for a in attempts]


def test_fixed_is_always_the_base():
    assert delays("fixed", range(1, 6)) == [10.0] * 5


def test_linear_grows_by_the_base():
    assert delays("linear", range(1, 6)) == [10.0, 20.0, 30.0, 40.0, 50.0]


def test_exponential_doubles_from_the_base():
    assert delays("exponential", range(1, 7)) == [10.0, 20.0, 40.0, 80.0, 160.0, 320.0]
    assert delays("exponential", range(1, 4), base=0.5) == [0.5, 1.0, 2.0]


def test_every_policy_is_capped():
    assert delays("exponential", range(1, 7), cap=60) == [10.0, 20.0, 40.0, 60.0, 60.0, 60.0]
    assert delays("linear", range(1, 5), cap=25) == [10.0, 20.0, 25.0, 25.0]
    assert delays("fixed", range(1, 3), cap=4) == [4.0, 4.0]


def test_exponential_of_a_huge_attempt_is_the_cap_not_an_overflow():
    assert backoff_seconds("exponential", 10_000, 10, 3600) == 3600
    assert backoff_seconds("exponential_jitter", 10_000, 10, 3600, random.Random(1)) <= 3600


def test_zero_base_means_no_wait():
    for policy in POLICIES:
        assert backoff_seconds(policy, 3, 0, 3600, random.Random(0)) == 0


def test_jitter_stays_between_zero_and_the_exponential_delay():
    rng = random.Random(20250115)
    for attempt in range(1, 12):
        bound = min(10.0 * 2 ** (attempt - 1), 600.0)
        draws = [backoff_seconds("exponential_jitter", attempt, 10, 600, rng) for _ in range(200)]
        assert all(0 <= d <= bound for d in draws), (attempt, bound, min(draws), max(draws))
        # Full jitter spreads over the whole range, not a sliver of it.
        assert min(draws) < bound * 0.1 and max(draws) > bound * 0.9, (
            attempt,
            min(draws),
            max(draws),
        )


def test_jitter_is_reproducible_with_a_seeded_random():
    first = [
        backoff_seconds("exponential_jitter", a, 10, 3600, random.Random(7)) for a in range(1, 8)
    ]
    again = [
        backoff_seconds("exponential_jitter", a, 10, 3600, random.Random(7)) for a in range(1, 8)
    ]
    assert first == again
    assert len(set(first)) == len(first)


@pytest.mark.parametrize("attempt", [0, -1])
def test_attempt_below_one_is_an_error(attempt):
    with pytest.raises(ValueError, match=f"got {attempt}"):
        backoff_seconds("fixed", attempt, 10, 60)


def test_unknown_policy_is_an_error_naming_it():
    with pytest.raises(ValueError, match="'quadratic'") as info:
        backoff_seconds("quadratic", 1, 10, 60)
    for policy in POLICIES:
        assert policy in str(info.value)

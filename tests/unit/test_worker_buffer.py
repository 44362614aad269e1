"""The worker's buffer of claimed executions stays in start order (priority, run_at, id)
within each tenant, and takes the tenants in turn (the fair share)."""

from __future__ import annotations

import collections
from datetime import UTC, datetime, timedelta

from pgsched.worker.holdings import buffer_in_order

T0 = datetime(2026, 11, 30, tzinfo=UTC)


def row(i: int, priority: int, minutes: int = 0, tenant: str = "default") -> dict:
    return {
        "id": i,
        "priority": priority,
        "run_at": T0 + timedelta(minutes=minutes),
        "tenant": tenant,
    }


def ids(buffer) -> list[int]:
    return [r["id"] for r in buffer]


def test_a_later_claim_of_lower_priority_goes_behind():
    buffer = collections.deque([row(1, 2), row(2, 5)])
    buffer_in_order(buffer, [row(3, 5, 1), row(4, 9)])
    assert ids(buffer) == [1, 2, 3, 4]


def test_a_later_claim_of_higher_priority_goes_in_front_of_what_waits():
    buffer = collections.deque([row(1, 9), row(2, 9, 1)])
    buffer_in_order(buffer, [row(3, 1), row(4, 9, 0)])
    assert ids(buffer) == [3, 1, 4, 2]


def test_into_an_empty_buffer_the_claim_order_is_kept():
    buffer: collections.deque = collections.deque()
    buffer_in_order(buffer, [row(5, 1), row(6, 3)])
    assert ids(buffer) == [5, 6]


def test_another_tenants_priority_1_claimed_later_does_not_pass_a_waiting_row():
    """b's row (priority 5) waits behind a's first; a's priority-1 rows of the next claim
    take a's own places and go behind b's (a tenant's priority is its own ordering)."""
    buffer = collections.deque([row(1, 5, tenant="a"), row(2, 5, tenant="b"), row(3, 5, 1, "a")])
    buffer_in_order(buffer, [row(4, 1, tenant="a"), row(5, 1, 1, tenant="a")])
    assert ids(buffer) == [4, 2, 5, 1, 3]
    assert [r["tenant"] for r in buffer] == ["a", "b", "a", "a", "a"]


def test_a_tenants_one_row_claimed_behind_anothers_buffered_flood_goes_next():
    """The fairness benchmark's case: a worker holds 100 of a's executions; b's one, claimed
    later, starts at the next free slot rather than after a's hundred."""
    buffer = collections.deque(row(i, 5, i, tenant="a") for i in range(1, 101))
    buffer_in_order(buffer, [row(200, 5, tenant="b")])
    assert ids(buffer)[:3] == [1, 200, 2]
    assert ids(buffer)[3:] == list(range(3, 101))


def test_tenants_take_turns_each_in_its_own_start_order():
    buffer = collections.deque([row(1, 5, tenant="a"), row(2, 5, 1, tenant="a")])
    buffer_in_order(buffer, [row(3, 9, tenant="b"), row(4, 1, tenant="b"), row(5, 1, 2, "a")])
    assert ids(buffer) == [5, 4, 1, 3, 2]  # a: 5 (priority 1), 1, 2; b: 4 (priority 1), 3

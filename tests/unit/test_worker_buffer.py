"""The worker's buffer of claimed executions stays in start order (priority, run_at, id)."""

from __future__ import annotations

import collections
from datetime import UTC, datetime, timedelta

from pgsched.worker.holdings import buffer_in_order

T0 = datetime(2026, 11, 30, tzinfo=UTC)


def row(i: int, priority: int, minutes: int = 0) -> dict:
    return {"id": i, "priority": priority, "run_at": T0 + timedelta(minutes=minutes)}


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

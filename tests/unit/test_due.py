"""NextDue (pgsched.worker.due): when the claimer wakes for work due later, from the database's
answer in seconds, on the monotonic clock."""

from __future__ import annotations

import pytest

from pgsched.worker.due import HELD_RETRY_FIRST, NextDue


def test_it_wakes_the_given_seconds_after_the_answer_was_received():
    due = NextDue(poll_interval=2.0)
    due.learn(20.0, received=100.0)
    assert due.wait(now=100.5, longest=0.25) == 0.25  # capped by the claimer's own bound
    assert due.wait(now=119.9, longest=0.25) == pytest.approx(0.1)
    assert not due.passed(119.99)
    assert due.passed(120.0)
    assert not due.passed(120.1)  # forgotten once passed: the next short claim asks again
    assert due.wait(now=120.1, longest=0.25) == 0.25


def test_nothing_pending_means_no_due_time():
    due = NextDue(poll_interval=2.0)
    due.learn(5.0, received=0.0)
    due.learn(None, received=1.0)
    assert due.at is None and not due.passed(10.0)
    assert due.wait(now=10.0, longest=1.5) == 1.5


def test_work_due_and_not_claimed_is_tried_at_once_then_less_and_less_often():
    """Due already but not claimed (held by a claim in flight, a lock, or this worker was
    declared dead): at once, then after 10, 20, 40 ms ..., never more than the poll interval
    apart; a claim that brings executions, or an answer in the future, starts over."""
    due = NextDue(poll_interval=0.5)
    delays = []
    for i in range(10):
        due.learn(-0.3 if i % 2 else 0.0, received=1000.0)
        delays.append(round(due.at - 1000.0, 6))
    first = HELD_RETRY_FIRST
    assert delays == [0.0, *(first * 2**k for k in range(6)), 0.5, 0.5, 0.5]
    due.claimed()
    due.learn(0.0, received=2000.0)
    assert due.at == 2000.0
    due.learn(-1.0, received=2000.0)
    assert due.at == 2000.0 + first
    due.learn(3.0, received=2000.0)
    due.learn(-1.0, received=2010.0)
    assert due.at == 2010.0  # at once again: the answer before was in the future


def test_work_held_by_another_transaction_never_hides_work_due_later():
    """A due row that a long transaction holds (SELECT ... FOR UPDATE, a foreign key from an
    application's table) is retried less and less often, up to the poll interval; a run
    due in five seconds is woken for on time all the same."""
    due = NextDue(poll_interval=30.0)
    for _ in range(12):  # held for a while: the retries are 10 s apart by now
        due.learn(-8.0, received=100.0)
    assert due.at - 100.0 > 5.0
    due.learn(-8.0, received=100.0, future=5.0)
    assert due.at == 105.0

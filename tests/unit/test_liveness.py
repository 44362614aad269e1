"""Liveness (pgsched.liveness): what the worker's heartbeat does about its claimer, from
when the claimer last went round its loop, on a clock the test moves."""

from __future__ import annotations

from pgsched.liveness import BACK, GIVE_UP, OK, STALLED, WAITING, Liveness
from pgsched.worker import WorkerConfig


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def test_a_loop_that_goes_round_is_ok():
    clock = Clock()
    live = Liveness(10.0, now=clock)
    for _ in range(5):
        clock.t += 9.0
        live.went_round()
        assert live.check() == OK


def test_a_stall_is_told_once_then_waited_on_then_given_up_one_limit_later():
    clock = Clock()
    live = Liveness(10.0, now=clock)
    clock.t += 10.0
    assert live.check() == OK  # at the limit, not past it
    clock.t += 0.5
    assert live.check() == STALLED
    assert live.stalled_for() == 10.5
    clock.t += 5.0
    assert live.check() == WAITING
    clock.t += 5.0
    assert live.check() == WAITING
    clock.t += 0.5
    assert live.check() == GIVE_UP


def test_a_loop_back_after_a_stall_is_told_once_and_then_ok():
    clock = Clock()
    live = Liveness(10.0, now=clock)
    clock.t += 11.0
    assert live.check() == STALLED
    clock.t += 1.0
    live.went_round()
    assert live.check() == BACK
    assert live.check() == OK
    clock.t += 11.0
    assert live.check() == STALLED  # a new stall is told again


def test_a_retired_loop_is_never_stalled():
    clock = Clock()
    live = Liveness(10.0, now=clock)
    live.retire()
    clock.t += 1000.0
    assert live.check() == OK


def test_the_claimers_limit_is_3_polls_plus_its_longest_step():
    assert WorkerConfig(poll_interval=2.0, statement_deadline=30.0).claimer_limit() == 36.0
    # a short deadline (or none) never makes a connection attempt (up to 10 s) look like a stall
    assert WorkerConfig(poll_interval=0.5, statement_deadline=2.0).claimer_limit() == 11.5
    assert WorkerConfig(poll_interval=0.5, statement_deadline=0).claimer_limit() == 11.5


def test_time_the_whole_process_was_frozen_is_no_stall():
    clock = Clock()
    live = Liveness(10.0, now=clock)
    clock.t += 60.0  # SIGSTOP, SIGCONT: the watcher wakes 59 s late
    live.paused(59.0)
    assert live.check() == OK
    clock.t += 10.5
    assert live.check() == STALLED  # what the claimer does after the freeze counts again

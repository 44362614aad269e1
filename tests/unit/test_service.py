"""pgsched.service.IntervalService: start/stop any number of times, run_once given the
clock's instant, a failing loop logged once and its recovery said, a round that ends the
service. A fake service and a fixed clock: no database."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime

import pytest

from pgsched.clock import FixedClock
from pgsched.errors import DatabaseError
from pgsched.service import IntervalService, stop_all

from ..helpers import utc, wait_until

T0 = utc(2030, 1, 1)


class Counting(IntervalService):
    """Fails its first ``failing`` rounds, then counts the instants it was given."""

    name = "counting"
    log = logging.getLogger("pgsched.test_service")
    failure = "counting failed: %s"

    def __init__(self, clock: FixedClock, failing: int = 0, error: Exception | None = None):
        super().__init__(clock, interval=0.01, retry=0.01)
        self.failing, self.error = failing, error or DatabaseError("the database is away")
        self.seen: list[datetime] = []

    def run_once(self, now: datetime) -> int:
        if self.failing:
            self.failing -= 1
            raise self.error
        self.seen.append(now)
        return len(self.seen)


def test_start_and_stop_may_each_be_called_twice_and_in_any_order():
    service = Counting(FixedClock(T0))
    service.stop()  # before start: nothing to stop
    service.start()
    first = service._thread
    service.start()  # running already: the same thread
    assert service._thread is first and service.running
    wait_until(lambda: service.seen, message="a round")
    service.stop()
    service.stop()
    assert not service.running
    service.start()  # again after a stop
    assert service.running and service._thread is not first
    stop_all([service, Counting(FixedClock(T0))])  # one never started among them
    assert not service.running


def test_each_round_is_given_the_clocks_instant():
    clock = FixedClock(T0)
    service = Counting(clock)
    assert service.run_once(T0) == 1
    assert service.round() == service.interval
    clock.advance(90)
    service.round()
    assert service.seen == [T0, T0, clock.now()] and clock.now() == utc(2030, 1, 1, 0, 1, 30)


def test_a_failing_loop_logs_once_retries_and_says_when_it_works_again(caplog):
    service = Counting(FixedClock(T0), failing=5)
    with caplog.at_level(logging.DEBUG, logger="pgsched.test_service"):
        service.start()
        try:
            wait_until(lambda: service.seen, message="a round that works")
        finally:
            service.stop()
    records = [
        (r.levelname, r.getMessage()) for r in caplog.records if r.name == "pgsched.test_service"
    ]
    assert records[0] == ("ERROR", "counting failed: the database is away")
    assert [level for level, _ in records[1:5]] == ["DEBUG"] * 4  # the retries: not logged again
    assert ("INFO", "counting works again after 5 failed round(s)") in records
    assert sum(1 for level, _ in records if level == "ERROR") == 1
    assert service.failures == 0


def test_a_bug_is_logged_with_its_traceback_once_and_the_loop_goes_on(caplog):
    service = Counting(FixedClock(T0), failing=3, error=KeyError("oops"))
    with caplog.at_level(logging.INFO, logger="pgsched.test_service"):
        for _ in range(4):
            service.round()
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and errors[0].exc_info is not None
    assert service.seen == [T0]


def test_a_round_whose_error_ends_the_service_stops_the_loop():
    class Ending(Counting):
        def ends_on(self, exc: Exception) -> bool:
            return isinstance(exc, LookupError)

    service = Ending(FixedClock(T0), failing=1, error=LookupError("term over"))
    assert service.round() is None
    service.failing = 1
    service.start()
    wait_until(lambda: not service.running, message="the loop to end by itself")
    assert service.seen == []


def test_prepare_returning_false_ends_the_service_before_any_round():
    class Refusing(Counting):
        def prepare(self, stop: threading.Event) -> bool:
            return False

    service = Refusing(FixedClock(T0))
    service.start()
    wait_until(lambda: not service.running, message="the loop to end")
    assert service.seen == []


def test_a_fixed_clock_refuses_a_naive_instant():
    with pytest.raises(ValueError, match="no time zone"):
        FixedClock(datetime(2030, 1, 1))


class _WallClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class _Slow(IntervalService):
    name = "slow"

    def __init__(self) -> None:
        super().__init__(_WallClock(), interval=0.05)
        self.release = threading.Event()
        self.rounds = 0

    def run_once(self, now: datetime) -> object:
        self.rounds += 1
        self.release.wait(5)
        return None


def test_start_after_a_stop_that_timed_out_leaves_the_service_running():
    """A stop that timed out while a round still ran, then a start: the service runs (the
    old loop ends after its round; the new one goes on). Found by an attack on issue 16:
    start() did nothing while the old thread lived, and that thread then stopped."""
    s = _Slow()
    s.start()
    wait_until(lambda: s.rounds == 1, message="the first round under way, blocked")
    s.stop(timeout=0.05)  # times out: the round still runs
    s.start()  # "after stop(), starts it again"
    s.release.set()  # the stuck round ends
    try:
        wait_until(lambda: s.rounds > 1, message="a round of the started service")
        assert s.running, "start() was the last call, yet the service has stopped"
    finally:
        s.stop()

"""pgsched.clock: ClockProbe (the host's estimate of when a statement reaches the server is
the time at sending plus half the previous round trip of the same statement) and
DatabaseClock (instants on the database's time line from its best reading of now())."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pgsched import clock
from pgsched.clock import ClockProbe, DatabaseClock


def test_the_first_send_has_no_round_trip_and_the_next_is_ahead_by_half_of_the_last(monkeypatch):
    ticks = [
        100.0,
        100.4,
        200.0,
    ]  # the monotonic clock: sent, answered (0.4 s), sent again (then stays)
    monkeypatch.setattr(
        clock.time, "monotonic", lambda: ticks.pop(0) if len(ticks) > 1 else ticks[0]
    )
    probe = ClockProbe()
    before = datetime.now(UTC)
    first = probe.send()
    assert first["round_trip"] is None and before <= first["host_time"] <= datetime.now(UTC)
    probe.received()
    assert probe.round_trip is not None and abs(probe.round_trip - 0.4) < 1e-9

    sent_at = datetime.now(UTC)
    second = probe.send()

    assert second["round_trip"] == probe.round_trip
    ahead = (second["host_time"] - sent_at).total_seconds()
    assert abs(ahead - 0.2) < 0.05


def test_an_answer_that_never_came_leaves_the_last_round_trip():
    probe = ClockProbe()
    probe.send()
    probe.received()
    known = probe.round_trip
    probe.send()  # the statement failed: no received()
    assert probe.send()["round_trip"] == known


def test_the_database_clock_maps_a_reading_onto_the_monotonic_clock():
    clock = DatabaseClock()
    with pytest.raises(RuntimeError, match="not been read"):
        clock.at(1.0)
    t = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    clock.read(t, sent=100.0, received=100.002)  # taken half-way, within 1 ms
    assert clock.at(100.001) == t
    assert clock.at(160.001) == t + timedelta(seconds=60)  # a host clock minutes off plays no part


def test_the_database_clock_keeps_its_best_reading_until_its_age_makes_it_worse():
    clock = DatabaseClock()
    t = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    clock.read(t, sent=100.0, received=100.002)  # error within 1 ms
    # a slow answer a second later (a claim of many rows, a busy server): within 40 ms only
    clock.read(t + timedelta(seconds=1.05), sent=101.0, received=101.08)
    assert clock.at(101.04) == t + timedelta(seconds=1.039)  # still the first reading's line
    # a fast one replaces it
    clock.read(t + timedelta(seconds=2.0005), sent=102.0, received=102.001)
    assert clock.at(102.0005) == t + timedelta(seconds=2.0005)
    # a slow one does too, once the best reading is old enough for drift to matter more
    clock.read(
        t + timedelta(seconds=302.05), sent=402.0, received=402.08
    )  # 300 s on: 150 ms of drift
    assert clock.at(402.04) == t + timedelta(seconds=302.05)


def test_a_server_clock_reads_now_through_the_clock_now_query():
    from pgsched.clock import ServerClock

    asked = []

    class Queries:
        def one(self, name, /, **params):
            asked.append(name)
            return {"now": datetime(2030, 1, 1, tzinfo=UTC)}

    assert ServerClock(Queries()).now() == datetime(2030, 1, 1, tzinfo=UTC)
    assert asked == ["clock_now"]


def test_a_fixed_clock_moves_only_when_told():
    from pgsched.clock import FixedClock

    clock = FixedClock(datetime(2030, 1, 1, tzinfo=UTC))
    assert clock.now() == clock.now() == datetime(2030, 1, 1, tzinfo=UTC)
    assert clock.advance(1.5) == datetime(2030, 1, 1, 0, 0, 1, 500000, tzinfo=UTC)
    clock.set(datetime(2031, 1, 1, tzinfo=UTC))
    assert clock.now().year == 2031

"""pgsched.clock.ClockProbe: the host's estimate of when a statement reaches the server is
the time at sending plus half the previous round trip of the same statement."""

from __future__ import annotations

from datetime import UTC, datetime

from pgsched import clock
from pgsched.clock import ClockProbe


def test_the_first_send_has_no_round_trip_and_the_next_is_ahead_by_half_of_the_last(monkeypatch):
    ticks = [100.0, 100.4, 200.0]  # the monotonic clock: sent, answered (0.4 s), sent again (then stays)
    monkeypatch.setattr(clock.time, "monotonic", lambda: ticks.pop(0) if len(ticks) > 1 else ticks[0])
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

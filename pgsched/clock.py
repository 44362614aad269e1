"""A process's clock offset from the database: measured, reported, never corrected for.

PostgreSQL's clock is the only clock pgsched decides by (docs/architecture.md, "Time");
a host whose clock is off changes nothing about when work runs, but its logs and whatever
it shows in its own time are off, so each live process reports how far off it is. The
measurement rides on a statement the process sends every few seconds anyway (the worker
heartbeat, the scheduler's ``scheduler_node_seen``): the statement carries the host's
wall-clock estimate of the instant it reaches the server, and the server stores that
minus its own ``statement_timestamp()``.

The estimate is the wall-clock time at sending plus half the previous round trip of the
same statement (the way NTP reads a server's clock, with the round trip taken from the
last exchange so that the offset is stored by the statement itself, not one later). Its
error is at most about half a round trip, and the round trip is stored beside it.
Pure: no database access.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta


class ClockProbe:
    """Times one repeated statement. ``send()`` before it, ``received()`` after its answer.

    ``round_trip`` is the last measured round trip in seconds (None before the first)."""

    def __init__(self) -> None:
        self.round_trip: float | None = None
        self._sent: float | None = None

    def send(self) -> dict[str, object]:
        """The statement's parameters: ``host_time`` (aware UTC ``datetime``: this host's
        estimate of when the statement reaches the server) and ``round_trip`` (seconds, the
        last round trip the estimate used; None the first time)."""
        self._sent = time.monotonic()
        ahead = (self.round_trip or 0.0) / 2
        return {"host_time": datetime.now(UTC) + timedelta(seconds=ahead),
                "round_trip": self.round_trip}

    def received(self) -> None:
        """The answer arrived: its round trip is used by the next ``send()``."""
        if self._sent is not None:
            self.round_trip = time.monotonic() - self._sent
            self._sent = None

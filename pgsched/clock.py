"""Clocks, as one process sees them. Pure (no database driver is imported here).

PostgreSQL's clock is the only clock pgsched decides and records by (DESIGN.md, "Time";
docs/architecture.md): a host's wall clock may be minutes off, so nothing pgsched records
or decides comes from it. Most times are taken by ``now()`` in the statement that records
them. Two things here bridge the host and the database:

- :class:`Clock`: what every service that decides by time is given. ``ServerClock`` asks
  the database (``SELECT now()``, one statement a reading) and is the one processes use;
  ``FixedClock`` is set by hand, for tests; ``HostClock`` is this host's wall clock, only
  for what needs no database at all (``pgsched cron next``: a preview of an expression).
- :class:`DatabaseClock`: a worker records when a slot started an execution and when it
  ended, which it writes only later, with the outcome. Such instants are put on the
  database's time line from the last reading of ``now()`` (every claim, heartbeat and
  registration returns one) moved on by the host's monotonic clock, which is never set and
  never jumps. The error is half a round trip plus the monotonic clock's drift since the
  reading (seconds apart): milliseconds, whatever the host's wall clock says.
- :class:`ClockProbe`: how far off the host's wall clock is, measured and reported, never
  corrected for. The measurement rides on a statement the process sends every few seconds
  anyway (the worker heartbeat, the scheduler's ``scheduler_node_seen``): the statement
  carries the host's wall-clock estimate of the instant it reaches the server, and the
  server stores that minus its own ``statement_timestamp()``. The estimate is the
  wall-clock time at sending plus half the previous round trip of the same statement (the
  way NTP reads a server's clock, with the round trip taken from the last exchange so that
  the offset is stored by the statement itself, not one later). Its error is at most about
  half a round trip, and the round trip is stored beside it.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

# How fast a host's monotonic clock and the database's clock may drift apart (seconds per
# second: 500 ppm, the most an NTP-disciplined clock slews), so how fast a reading's error
# bound grows with its age.
DRIFT = 5e-4


class Clock(Protocol):
    """A source of the current instant: ``now()`` is an aware UTC ``datetime``."""

    def now(self) -> datetime: ...


class _Queries(Protocol):
    def one(self, query_name: str, /, **params: Any) -> dict[str, Any] | None: ...


class ServerClock:
    """The database's clock: PostgreSQL's ``now()`` read through ``db`` (a
    :class:`pgsched.db.Database` or a ``Session``; named query ``clock_now``), as an aware
    UTC ``datetime``: the start of the current transaction (on a pool or an autocommit
    connection, of the reading's own statement). Every instant that decides when something
    fires, retries or counts as late comes from here or from ``now()`` in SQL, never from
    the host's clock, which may be minutes off (DESIGN.md, "Time"). Each reading is one
    round trip and raises what the statement raises (pgsched.errors)."""

    def __init__(self, db: _Queries):
        self.db = db

    def now(self) -> datetime:
        row = self.db.one("clock_now")
        assert row is not None  # SELECT now() returns one row
        return row["now"]


class FixedClock:
    """A clock that moves only when told: ``now()`` is ``at`` (aware) until ``set()`` or
    ``advance(seconds)``; for tests of code that takes a :class:`Clock`. Thread-safe."""

    def __init__(self, at: datetime):
        if at.tzinfo is None:
            raise ValueError(f"at: {at!r} has no time zone; give an aware instant")
        self._at = at
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._at

    def set(self, at: datetime) -> None:
        with self._lock:
            self._at = at

    def advance(self, seconds: float) -> datetime:
        """Move on by ``seconds``; returns the new instant."""
        with self._lock:
            self._at += timedelta(seconds=seconds)
            return self._at


class HostClock:
    """This host's wall clock (aware UTC). Decides nothing pgsched records: only for
    previews that have no database (``pgsched cron next``)."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class DatabaseClock:
    """Readings of the database's ``now()`` mapped onto this process's monotonic clock.

    ``read(db_now, sent, received)`` offers a reading: ``db_now`` (aware) taken by a
    statement sent at monotonic ``sent`` and answered at ``received`` (seconds, from
    ``time.monotonic()``); it counts as taken half-way, within half the round trip. The
    clock keeps the reading with the smallest error bound, as NTP keeps its best sample:
    half its round trip, growing by ``DRIFT`` per second of its age, so a slow answer (a
    claim of many rows, a busy server) never moves the time line by more than a fast one
    would allow. ``at(mono)`` is the database's instant at monotonic ``mono``; ``now()`` the
    current one. Readings may come from any thread (one assignment of a tuple each).
    Raises RuntimeError before the first one.
    """

    def __init__(self) -> None:
        self._reading: tuple[datetime, float, float] | None = (
            None  # (db_now, taken at, error bound)
        )

    def read(self, db_now: datetime, sent: float, received: float | None = None) -> None:
        """Offer a reading of the database's ``now()``; kept when it is the better one."""
        received = sent if received is None else received
        taken, bound = (sent + received) / 2, (received - sent) / 2
        held = self._reading
        if held is None or bound <= held[2] + DRIFT * (taken - held[1]):
            self._reading = (db_now, taken, bound)

    def at(self, mono: float) -> datetime:
        """The database's instant (aware, UTC) when the monotonic clock showed ``mono``."""
        if self._reading is None:
            raise RuntimeError("the database's clock has not been read yet")
        db_now, taken, _ = self._reading
        return db_now + timedelta(seconds=mono - taken)

    def now(self) -> datetime:
        """The database's current instant."""
        return self.at(time.monotonic())


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
        return {
            "host_time": datetime.now(UTC) + timedelta(seconds=ahead),
            "round_trip": self.round_trip,
        }

    def received(self) -> None:
        """The answer arrived: its round trip is used by the next ``send()``."""
        if self._sent is not None:
            self.round_trip = time.monotonic() - self._sent
            self._sent = None

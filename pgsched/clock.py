"""The database's clock as one process sees it. Pure (no database).

PostgreSQL's clock is the only clock (DESIGN.md, "Time"): a host's wall clock may be
minutes off, so nothing pgsched records or decides comes from it. Most times are taken
by ``now()`` in the statement that records them. A worker, though, records when a slot
started an execution and when it ended, which it learns only later, when it writes the
outcome: :class:`DatabaseClock` gives such instants on the database's time line, from
the last reading of ``now()`` (every claim and heartbeat returns one) moved on by the
host's monotonic clock, which is never set and never jumps. Its error is half a round
trip plus the monotonic clock's drift since the reading (seconds apart): milliseconds,
whatever the host's wall clock says.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta


class DatabaseClock:
    """Readings of the database's ``now()`` mapped onto this process's monotonic clock.

    ``read(db_now, sent, received)`` records a reading: ``db_now`` (aware) taken by a
    statement sent at monotonic ``sent`` and answered at ``received`` (seconds, from
    ``time.monotonic()``); it counts as taken half-way. ``at(mono)`` is the database's
    instant at monotonic ``mono``; ``now()`` the current one. Readings may come from any
    thread (one assignment of a tuple each). Raises RuntimeError before the first one.
    """

    def __init__(self) -> None:
        self._reading: tuple[datetime, float] | None = None

    def read(self, db_now: datetime, sent: float, received: float | None = None) -> None:
        """Record a reading of the database's ``now()``."""
        self._reading = (db_now, (sent + (sent if received is None else received)) / 2)

    def at(self, mono: float) -> datetime:
        """The database's instant (aware, UTC) when the monotonic clock showed ``mono``."""
        if self._reading is None:
            raise RuntimeError("the database's clock has not been read yet")
        db_now, taken = self._reading
        return db_now + timedelta(seconds=mono - taken)

    def now(self) -> datetime:
        """The database's current instant."""
        return self.at(time.monotonic())

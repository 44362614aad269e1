"""Whether a loop of another thread still goes round: the worker's heartbeat watches its
claimer with it (issue 15, item 6).

A claimer blocked on a connection that went silent starved its queues while the heartbeat
went on and told the leader the worker was fine. Now the claimer calls :meth:`Liveness.went_round`
at each turn of its loop (an attribute store: the claim path is hot), and the heartbeat
calls :meth:`Liveness.check` once per beat, which says what to do:

========== ===================================================================================
``ok``      it went round within ``limit`` seconds
``stalled`` it has not for ``limit`` seconds: log it, report it, and cut its connection so
            that it opens another (the first check past the limit only)
``waiting`` still stalled since it was cut, for less than ``limit`` seconds more
``give_up`` still stalled ``limit`` seconds after it was cut: the process must exit, so that
            a supervisor starts it again (its work is rescued by the leader)
``back``    it went round again after a stall: log it, clear the report
========== ===================================================================================

Times are seconds on the monotonic clock (durations, never instants).
"""

from __future__ import annotations

import time
from collections.abc import Callable

OK, STALLED, WAITING, GIVE_UP, BACK = "ok", "stalled", "waiting", "give_up", "back"


class Liveness:
    """One loop's progress. ``limit``: seconds without a turn after which it is stalled;
    ``now``: the clock (monotonic seconds; tests give their own)."""

    def __init__(self, limit: float, now: Callable[[], float] = time.monotonic):
        self.limit = limit
        self._now = now
        self.at = now()  # the last turn
        self.stalled_at: float | None = None  # when check() found it stalled and said so
        self._retired = False

    def went_round(self) -> None:
        """The loop turned (called by the watched thread)."""
        self.at = self._now()

    def paused(self, seconds: float) -> None:
        """The whole process was not running for ``seconds`` (SIGSTOP, a suspended VM: the
        watcher woke that much later than it meant to): that time is nobody's stall."""
        self.at = min(self.at + seconds, self._now())

    def retire(self) -> None:
        """The loop ended on purpose (the process is stopping): never stalled from now on."""
        self._retired = True

    def stalled_for(self) -> float:
        """Seconds since the last turn."""
        return self._now() - self.at

    def check(self) -> str:
        """What the watcher does now: one of OK, STALLED, WAITING, GIVE_UP, BACK."""
        now = self._now()
        if self._retired:
            return OK
        if self.stalled_at is not None and self.at > self.stalled_at:
            self.stalled_at = None
            return BACK
        if now - self.at <= self.limit:
            return OK
        if self.stalled_at is None:
            self.stalled_at = now
            return STALLED
        return GIVE_UP if now - self.stalled_at > self.limit else WAITING

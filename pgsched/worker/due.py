"""When work that is not ready yet is due: the claimer wakes for it instead of the next poll.

A NOTIFY wakes idle workers when executions are inserted, and a retry, a rescue or a
hand-back sends one too; but the work may be due later (a retry's backoff, a run enqueued
for later), so the claim that answers finds nothing ready. Before it waits, the claimer
asks the database how many seconds remain until the earliest pending ``run_at`` of its
queues (``execution_next_due``: the database's clock, never compared with the host's)
and wakes when they have passed on its own monotonic clock. Pure logic: the claimer
(:mod:`pgsched.worker`) does the asking.
"""

from __future__ import annotations

# An execution due already that the claim did not get is held: by another worker's claim in
# flight (it takes it), a transaction that locks it, or nothing this worker may claim (it was
# declared dead). The first time, the claimer claims again at once (it may have become due
# between the claim and the question); then after this many seconds, doubling up to the poll
# interval: never a busy loop.
HELD_RETRY_FIRST = 0.01


class NextDue:
    """The earliest due time the claimer knows of, in ``time.monotonic()`` seconds, or
    None (nothing pending: a notification or the poll wakes it). Not thread-safe: the
    claimer thread owns it."""

    def __init__(self, poll_interval: float) -> None:
        self.poll_interval = poll_interval
        self.at: float | None = None
        self._held = 0  # answers in a row that found work due and not claimed

    def learn(
        self,
        seconds: float | None,
        received: float,
        future: float | None = None,
        free: float | None = None,
    ) -> None:
        """The database answered ``seconds`` until the earliest pending run_at (None: none
        pending; 0 or less: one is due already but was not claimed), and ``future`` until
        the earliest still to come (None: none), received at ``received`` (monotonic
        seconds). The answer left the server after it was computed, so waking that many
        seconds after receiving it is never early by the database's clock. Work held by
        another transaction is retried less and less often, but never past the next work
        due: a held row must not hide a run due in five seconds. ``free``: seconds until
        a time window of a limit (a rate limit's, an hourly quota's) that holds due work
        back ends (None: none does); the claimer then tries again when it ends, at the
        latest (a finish that frees a limit wakes it by notification sooner)."""
        if seconds is None:
            self.at, self._held = None, 0
        elif seconds > 0:
            self.at, self._held = received + seconds, 0
        else:
            self._held += 1
            delay = 0.0 if self._held == 1 else HELD_RETRY_FIRST * 2 ** (self._held - 2)
            self.at = received + min(delay, self.poll_interval)
            if future is not None and future > 0:
                self.at = min(self.at, received + future)
            if free is not None and free > 0:
                self.at = min(self.at, received + free)

    def claimed(self) -> None:
        """A claim brought executions: a due one not claimed next time is tried at once."""
        self._held = 0

    def passed(self, now: float) -> bool:
        """Whether the due time has come by ``now`` (monotonic seconds); it is then
        forgotten: the claim that follows asks again if it comes up short."""
        if self.at is not None and now >= self.at:
            self.at = None
            return True
        return False

    def wait(self, now: float, longest: float) -> float:
        """Seconds to wait from ``now`` for the due time, at most ``longest``."""
        if self.at is None:
            return longest
        return max(0.0, min(longest, self.at - now))

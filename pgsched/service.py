"""Background services: a job that runs every so many seconds in a daemon thread of its
own, started and stopped by whoever composes the process (the scheduler leader's
maintenance: rescue, partitions, statistics, alerts, webhooks, the registry of workers).

A service's round is :meth:`IntervalService.run_once`, given the instant ``now`` (aware
UTC) read from its :class:`~pgsched.clock.Clock` just before; tests call it directly with
an instant of their own. The loop survives the database going away (Oban's lesson): a
failed round is logged once, not on every retry, then tried again after ``retry``
seconds, and the first round that works again says so. ``start()`` and ``stop()`` may
each be called any number of times, in any order.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from datetime import datetime

from .clock import Clock
from .errors import PgschedError


class IntervalService:
    """Runs :meth:`run_once` every ``interval`` seconds (the wait after a round is
    :meth:`next_wait` of its result), ``retry`` seconds after a failed one (default:
    ``interval``), until stopped.

    Subclasses set ``name`` (the thread is ``pgsched-<name>``; the logs call it so),
    ``log``, and ``failure`` (the line logged at ``failure_level`` when a round fails, with
    one ``%s`` for the error), and may override :meth:`prepare` (runs once in the thread
    before the first round), :meth:`next_wait` and :meth:`ends_on`.
    """

    name = "service"
    log = logging.getLogger("pgsched")
    failure = "%s"
    failure_level = logging.ERROR

    def __init__(self, clock: Clock, interval: float, retry: float | None = None):
        self.clock = clock
        self.interval = interval
        self.retry = interval if retry is None else retry
        self.failures = 0  # rounds in a row that failed
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # --- what a service does ------------------------------------------------------------

    def run_once(self, now: datetime) -> object:
        """One round at ``now`` (aware UTC); returns what it did (given to next_wait)."""
        raise NotImplementedError

    def prepare(self, stop: threading.Event) -> bool:
        """Before the first round, in the service's thread; False ends the service."""
        return True

    def next_wait(self, result: object) -> float:
        """Seconds from the end of a round that returned ``result`` to the next."""
        return self.interval

    def ends_on(self, exc: Exception) -> bool:
        """Whether a round that raised ``exc`` ends the service (it is then logged by the
        override) rather than being retried."""
        return False

    # --- start, stop, the loop -----------------------------------------------------------

    @property
    def running(self) -> bool:
        thread = self._thread
        return thread is not None and thread.is_alive()

    def start(self, delay: float = 0.0) -> None:
        """Run the loop in a daemon thread, the first round ``delay`` seconds from now. Does
        nothing while it runs already; after :meth:`stop` or :meth:`signal`, starts it
        again, also while the stopped loop's last round is still ending (that thread keeps
        its own stop flag and ends after its round)."""
        with self._guard:
            if self.running and not self._stop.is_set():
                return
            self._stop = threading.Event()
            self._thread = threading.Thread(
                target=self._loop,
                args=(self._stop, delay),
                daemon=True,
                name=f"pgsched-{self.name}",
            )
            self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the loop and wait up to ``timeout`` seconds for its round in progress to end.
        Safe to call twice, and before :meth:`start`."""
        self.signal()
        self.join(timeout)

    def signal(self) -> None:
        """Tell the loop to stop, without waiting for it (:meth:`join` waits)."""
        with self._guard:
            self._stop.set()

    def join(self, timeout: float) -> None:
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def round(self, now: datetime | None = None) -> float | None:
        """One round as the loop runs it (at ``now``, default the clock's), failures logged
        and counted: the seconds until the next, or None when the service ends."""
        try:
            result = self.run_once(self.clock.now() if now is None else now)
        except Exception as exc:
            if self.ends_on(exc):
                return None
            self._failed(exc)
            return self.retry
        if self.failures:
            self.log.info("%s works again after %d failed round(s)", self.name, self.failures)
            self.failures = 0
        return self.next_wait(result)

    def _failed(self, exc: Exception) -> None:
        self.failures += 1
        if self.failures > 1:  # said once already: the log is not a retry counter
            self.log.debug(self.failure, exc)
        elif isinstance(exc, PgschedError):  # the database's: a one-line message says it all
            self.log.log(self.failure_level, self.failure, exc)
        else:  # a bug: its traceback, once
            self.log.exception(self.failure, exc)

    def _loop(self, stop: threading.Event, delay: float) -> None:
        if not self.prepare(stop):
            return
        wait: float | None = delay
        while wait is not None and not stop.wait(wait):
            wait = self.round()


def stop_all(services: Iterable[IntervalService], timeout: float = 10.0) -> list[str]:
    """Stop ``services`` together: all are told first, then each is waited for, within
    ``timeout`` seconds in all. Returns the names of those still ending a round (their
    daemon threads end after it; every round is one transaction, so none is left half
    done)."""
    services = list(services)
    for service in services:
        service.signal()
    deadline = time.monotonic() + timeout
    for service in services:
        service.join(max(deadline - time.monotonic(), 0.0))
    return [service.name for service in services if service.running]

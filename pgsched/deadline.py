"""Client-side deadlines for statements: a statement whose reply has not come within its
deadline has its connection's socket shut down, so that the blocked call raises and the
caller reconnects.

Why: TCP keepalives and ``tcp_user_timeout`` (``db.KEEPALIVES``) find a peer that stopped
answering at the TCP level, but not one that keeps acknowledging and forwards nothing (a
proxy or middlebox that stopped forwarding, half of a NAT table that was lost): a psycopg
call then waits for ever. A worker's claimer blocked so starved its queues while its
heartbeat went on, and ignored SIGTERM (issue 15, item 6).

Usage::

    deadline = Deadline(30.0, name="claim")
    with deadline.watch(conn):       # one statement, or a transaction up to its COMMIT
        conn.execute(...)            # raises ConnectionSilent once cut

One watchdog thread per process serves every :class:`Deadline`. It wakes every ``tick``
seconds (a quarter of the shortest deadline, at most 1 s); a statement costs only a
registration in a set under a lock (about 1 µs, see docs/reliability.md). The watchdog
shuts the socket down on a duplicate of its descriptor (``socket.shutdown(SHUT_RDWR)`` on
``os.dup(conn.fileno())``): shutdown acts on the socket, not on a descriptor, so libpq sees
end of file, the call raises ``psycopg.OperationalError`` and libpq closes its own
descriptor as usual. It never touches a connection whose statement has ended: watches are
added and removed, and sockets shut down, under one lock, so a descriptor number reused
after the statement cannot be hit.

The deadline is measured on the monotonic clock: it is a duration, never an instant, so the
database's clock has nothing to say about it. A process that was frozen (SIGSTOP, a
suspended VM) would wake with every statement in flight past its deadline although their
replies may be waiting in the socket: the watchdog moves deadlines on by the time it was
itself not running beyond its tick.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from types import TracebackType
from typing import Any, Protocol

from .errors import ConnectionSilent

log = logging.getLogger(__name__)

# Seconds a statement of the engine (a worker's claims, heartbeats and pooled writes) may go
# without a reply by default: far above any it sends in health (milliseconds; a lock wait
# on a busy database a few seconds), far below "for ever".
STATEMENT_DEADLINE = 30.0

# Once its ``stop`` event is set, a Deadline's statements in flight for longer than this
# (seconds) are cut: a process asked to stop must not wait for a silent server, and a
# statement of a healthy one has ended by then.
STOP_GRACE = 1.0

# The watchdog moves deadlines on when it wakes more than this (seconds) after its tick: the
# process was frozen or starved of the CPU, not the statements.
FROZEN_AFTER = 1.0


class _Connection(Protocol):
    def fileno(self) -> int: ...


class Deadline:
    """Statements watched with one limit: ``seconds`` (> 0) from their start, on the
    monotonic clock. ``name`` says whose they are in the log. ``stop``: once set, a
    statement of this deadline in flight longer than STOP_GRACE is cut as well.
    ``cuts`` counts the statements it cut (by deadline, by stop, or by :meth:`cut`)."""

    def __init__(self, seconds: float, *, name: str, stop: threading.Event | None = None):
        if not seconds > 0:
            raise ValueError(f"a deadline must be positive, got {seconds!r} seconds")
        self.seconds = seconds
        self.name = name
        self.stop = stop
        self.cuts = 0
        _WATCHDOG.serve(self)

    def watch(self, conn: _Connection) -> _Watch:
        """A context manager around one statement (or one transaction) on ``conn``: within
        it, the statement is cut if it overruns. An exception leaving it after a cut is
        replaced by :class:`~pgsched.errors.ConnectionSilent` (a ``ConnectionFailed``)."""
        return _Watch(self, conn)

    def cut(self) -> int:
        """Cut every statement of this deadline in flight now, overrun or not (a stuck
        claimer's, found by the heartbeat); how many were cut."""
        return _WATCHDOG.cut_all(self)


class _Watch:
    __slots__ = ("conn", "deadline", "expires", "reason", "started")

    def __init__(self, deadline: Deadline, conn: _Connection):
        self.deadline = deadline
        self.conn = conn
        self.reason: str | None = None  # why it was cut, once it was

    def __enter__(self) -> _Watch:
        self.started = time.monotonic()
        self.expires = self.started + self.deadline.seconds
        with _WATCHDOG.lock:
            _WATCHDOG.watches.add(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with _WATCHDOG.lock:
            _WATCHDOG.watches.discard(self)
        if self.reason is not None and exc is not None and not isinstance(exc, ConnectionSilent):
            raise ConnectionSilent(
                f"database unreachable: {self.reason}; the connection was shut down "
                "(a new one is opened)"
            ) from exc


class _Watchdog:
    """The one thread that cuts overrun statements; started with the first Deadline."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.watches: set[_Watch] = set()
        self.tick = 1.0
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def serve(self, deadline: Deadline) -> None:
        with self.lock:
            if deadline.seconds / 4 < self.tick:
                self.tick = max(deadline.seconds / 4, 0.01)
                self._wake.set()  # sleep the shorter tick from now on
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, daemon=True, name="pgsched-deadline"
                )
                self._thread.start()

    def cut_all(self, deadline: Deadline) -> int:
        with self.lock:
            mine = [w for w in self.watches if w.deadline is deadline]
            cut = [
                self._cut(
                    watch,
                    f"the {deadline.name} connection was stuck (no reply for "
                    f"{time.monotonic() - watch.started:.1f}s)",
                )
                for watch in mine
            ]
        _log(cut)
        return len(mine)

    def _loop(self) -> None:
        woke = time.monotonic()
        while True:
            tick = self.tick
            self._wake.wait(tick)
            self._wake.clear()
            now = time.monotonic()
            late = now - woke - tick
            woke = now
            cut = []
            with self.lock:
                if late > FROZEN_AFTER:  # frozen: replies may be waiting unread
                    for watch in self.watches:
                        watch.expires += late
                        watch.started += late
                for watch in [w for w in self.watches if w.reason is None]:
                    stop = watch.deadline.stop
                    if now >= watch.expires:
                        cut.append(
                            self._cut(
                                watch,
                                f"no reply within the {watch.deadline.name} statement deadline "
                                f"({watch.deadline.seconds:g}s)",
                            )
                        )
                    elif stop is not None and stop.is_set() and now - watch.started >= STOP_GRACE:
                        cut.append(
                            self._cut(
                                watch,
                                f"stopping, and the {watch.deadline.name} statement had "
                                f"no reply for {now - watch.started:.1f}s",
                            )
                        )
            _log(cut)  # outside the lock: statements register meanwhile

    @staticmethod
    def _cut(watch: _Watch, reason: str) -> str:
        """Shut ``watch``'s socket down; under ``lock``, while its statement is in flight (so
        its descriptor is the connection's own). Returns the line to log."""
        watch.reason = reason
        watch.deadline.cuts += 1
        try:
            fd = os.dup(watch.conn.fileno())
        except Exception as exc:  # closed meanwhile: nothing to cut
            return f"{reason}: its connection could not be shut down ({exc})"
        try:
            with socket.socket(fileno=fd) as sock:
                sock.shutdown(socket.SHUT_RDWR)
        except OSError as exc:  # already shut down or reset
            return f"{reason}: its connection was already shut down ({exc})"
        return f"{reason}: its connection was shut down so that a new one is opened"


def _log(lines: list[str]) -> None:
    for line in lines:
        log.warning("%s", line)


_WATCHDOG = _Watchdog()


def above_server_timeout(seconds: float, server_timeout: float, margin: float = 5.0) -> float:
    """The deadline to use for statements that the server may end itself after
    ``server_timeout`` seconds (its ``statement_timeout``; 0: none): ``seconds``, or longer
    so that the server's own timeout fires first (by ``margin`` seconds) and the client
    never cuts a statement the server would have ended with a clear error."""
    return max(seconds, server_timeout + margin) if server_timeout > 0 else seconds


def unwatched(conn: Any) -> _NoWatch:
    """The watch of a statement that has no deadline: does nothing."""
    return _NO_WATCH


class _NoWatch:
    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NO_WATCH = _NoWatch()

"""Output capture: every line a handler prints, kept with the instant it arrived until the
worker stores it. :class:`LogSink` collects (thread-safe, capped per attempt);
:class:`ThreadOutput` routes what a Python task's thread prints to its sink. No SQL here.
"""

from __future__ import annotations

import collections
import contextlib
import io
import re
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def storable_text(text: str) -> str:
    """``text`` as PostgreSQL can store it: NUL characters removed, and lone surrogates
    (which Python strings may hold but UTF-8 cannot) replaced with U+FFFD."""
    text = text.replace("\x00", "")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = _SURROGATE.sub("\ufffd", text)
    return text


class LogSink:
    """Collects captured lines (thread-safe) until the owner drains them.

    Each line is ``(seq, stream, logged_at, text)``; ``seq`` counts from 1 per attempt;
    ``logged_at`` comes from ``now()`` (aware): the worker gives the database's clock.
    At most ``max_lines`` lines and ``max_bytes`` bytes of output are kept per attempt; the
    rest is read (so the command never blocks on a full pipe) and counted, and
    :meth:`close` adds one ``system`` line saying how much was dropped. NUL characters,
    which PostgreSQL text cannot hold, are removed. ``mask``, when the worker sets one
    (:class:`pgsched.secret_refs.Masker`), replaces the secrets an attempt resolved in each
    line before it is kept: nothing collected here holds one, not the tail nor the result.
    """

    def __init__(
        self,
        max_lines: int = 10_000,
        max_bytes: int = 10 * 1024 * 1024,
        *,
        now: Callable[[], datetime],
    ) -> None:
        self._now = now  # the database's clock (pgsched.clock): logged_at is the database's time
        self._lock = threading.Lock()
        self._lines: list[tuple[int, str, datetime, str]] = []
        self._seq = 0
        self._bytes = 0
        self.max_lines, self.max_bytes = max_lines, max_bytes
        self.dropped_lines = self.dropped_bytes = 0
        self.tail: collections.deque[str] = collections.deque(maxlen=3)
        self.last_stdout: str | None = None  # the last non-blank stdout line (a command's result)
        self.mask: Callable[[str], str] | None = None
        # the latest progress the handler reported (pgsched.context), until the worker writes it
        self._progress: tuple[float, str | None] | None = None

    def write(self, stream: str, text: str, whole_line: bool = True) -> None:
        """Collect one line of ``stream`` (stdout, stderr or system). ``whole_line`` False:
        a piece of a line too long to read at once (it cannot be the command's result)."""
        text = storable_text(text)
        if self.mask is not None:
            text = self.mask(text)
        size = len(text.encode("utf-8", errors="replace")) + 1
        with self._lock:
            if stream == "stdout" and text.strip():
                self.last_stdout = text if whole_line else None
            if stream != "system" and (
                self._seq >= self.max_lines or self._bytes + size > self.max_bytes
            ):
                self.dropped_lines += 1
                self.dropped_bytes += size
                return
            self._seq += 1
            self._bytes += size
            self._lines.append((self._seq, stream, self._now(), text))
            self.tail.append(text)

    def close(self) -> None:
        """Record how much output the caps dropped, if any."""
        if self.dropped_lines:
            self.write(
                "system",
                f"output truncated: {self.dropped_lines} more line(s), {self.dropped_bytes} "
                f"byte(s) not stored (limits: {self.max_lines} lines, {self.max_bytes} bytes)",
            )

    def drain(self, limit: int | None = None) -> list[tuple[int, str, datetime, str]]:
        """Take up to ``limit`` (all when None) of the oldest collected lines."""
        with self._lock:
            cut = len(self._lines) if limit is None else limit
            lines, self._lines = self._lines[:cut], self._lines[cut:]
            return lines

    def pending(self) -> bool:
        """Whether lines (or a progress report) wait to be drained."""
        return bool(self._lines) or self._progress is not None

    def report(self, fraction: float, message: str | None) -> None:
        """Keep the handler's latest progress (its message masked as a line is) for the next
        flush: a report replaces one not yet written (the worker coalesces them)."""
        if message is not None:
            message = storable_text(message)
            if self.mask is not None:
                message = self.mask(message)
        with self._lock:
            self._progress = (fraction, message)

    def take_progress(self) -> tuple[float, str | None] | None:
        """The progress report not yet written, if one is; it is taken."""
        with self._lock:
            progress, self._progress = self._progress, None
            return progress

    def untake_progress(self, progress: tuple[float, str | None]) -> None:
        """Put back a report that could not be written, unless a newer one came meanwhile."""
        with self._lock:
            if self._progress is None:
                self._progress = progress

    def requeue(self, lines: list[tuple[int, str, datetime, str]]) -> None:
        """Put back lines that could not be stored, ahead of the newer ones."""
        with self._lock:
            self._lines[:0] = lines


class ThreadOutput(io.TextIOBase):
    """Stands in for ``sys.stdout`` / ``sys.stderr``: what a thread running a Python task
    prints goes to that task's :class:`LogSink`, line by line; every other thread's output
    goes to the real stream. (Threads a task starts itself are not captured.)"""

    _current = threading.local()

    def __init__(self, real: Any, stream: str):
        self.real, self.stream = real, stream

    def write(self, text: str) -> int:
        sink = getattr(self._current, "sink", None)
        if sink is None:
            return self.real.write(text)
        pending = self._current.partial.get(self.stream, "") + text
        *lines, self._current.partial[self.stream] = pending.split("\n")
        for line in lines:
            sink.write(self.stream, line)
        return len(text)

    def flush(self) -> None:
        if getattr(self._current, "sink", None) is None:
            self.real.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.real.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.real, "encoding", "utf-8")

    @classmethod
    @contextlib.contextmanager
    def capture(cls, sink: LogSink) -> Iterator[None]:
        for name in ("stdout", "stderr"):
            if not isinstance(getattr(sys, name), cls):
                setattr(sys, name, cls(getattr(sys, name), name))
        cls._current.sink, cls._current.partial = sink, {}
        try:
            yield
        finally:
            for stream, rest in cls._current.partial.items():
                if rest:
                    sink.write(stream, rest)
            cls._current.sink = None

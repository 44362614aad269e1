"""The context a Python handler gets when it asks for it (a parameter named ``ctx``):
which execution runs (id, attempt, scheduled time, tenant, task), a logger whose lines go
to the execution's log, and :meth:`Context.progress` (docs/observability.md, "Progress
and waiting for a result"). No SQL here: what the handler reports goes to its
:class:`~pgsched.handlers.output.LogSink` (thread isolation) or over its child's pipe to
the worker (process isolation: the child holds no login), and the worker writes it.
"""

from __future__ import annotations

import inspect
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from .errors import ValidationError

#: the parameter a handler names to get its context
PARAMETER = "ctx"
#: the longest progress message stored (migration 0038)
MAX_MESSAGE = 500


def wants_context(func: Any) -> bool:
    """Whether ``func`` has a parameter named ``ctx`` it can be given by keyword (its
    ``**kwargs`` alone do not count: a handler that passes its params on gets none)."""
    try:
        parameters = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    p = parameters.get(PARAMETER)
    return p is not None and p.kind is not inspect.Parameter.POSITIONAL_ONLY


def utc(at: datetime | str | None) -> datetime | None:
    """``at`` (an aware instant, or its ISO 8601 text) in UTC."""
    if isinstance(at, str):
        at = datetime.fromisoformat(at)
    return None if at is None else at.astimezone(UTC)


def clashing(target: str) -> str:
    """Why a call whose params name ``ctx`` is refused when its handler takes a context."""
    return (
        f"params: the key {PARAMETER!r} is the context of {target}, which takes a {PARAMETER} "
        "parameter; rename the param"
    )


def checked(fraction: Any, message: Any = None) -> tuple[float, str | None]:
    """``(fraction, message)`` as stored, or ValidationError naming the field and value: a
    fraction is a number from 0 to 1, a message text of at most 500 characters or None."""
    if isinstance(fraction, bool) or not isinstance(fraction, int | float):
        raise ValidationError("progress", fraction, "must be a number from 0 to 1")
    if not math.isfinite(fraction) or not 0 <= fraction <= 1:
        raise ValidationError("progress", fraction, "must be from 0 to 1")
    if message is not None:
        if not isinstance(message, str):
            raise ValidationError("progress message", message, "must be text or None")
        if len(message) > MAX_MESSAGE:
            raise ValidationError(
                "progress message", message, f"is longer than {MAX_MESSAGE} characters"
            )
    return float(fraction), message


class _Lines(logging.Handler):
    """A logging handler that hands each formatted record, line by line, to ``write``."""

    def __init__(self, write: Callable[[str], None]) -> None:
        super().__init__()
        self.write = write
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)
        except Exception:
            self.handleError(record)
            return
        for line in text.split("\n"):
            self.write(line)


@dataclass
class Context:
    """What a handler knows about the execution it runs. ``report(fraction, message)`` and
    ``write_line(text)`` carry progress and log lines to the worker; a progress call less
    than ``min_interval`` seconds after the last one sent is kept, and sent by the next one
    or by :meth:`flush` (the worker calls it when the handler returns)."""

    execution_id: int
    attempt: int
    scheduled_at: datetime | None
    tenant: str | None
    task_name: str
    report: Callable[[float, str | None], None] = field(repr=False)
    write_line: Callable[[str], None] = field(repr=False)
    min_interval: float = 0.0
    logger: logging.Logger = field(init=False, repr=False)

    def __post_init__(self) -> None:
        # not logging.getLogger: a logger per execution would stay in logging's registry
        self.logger = logging.Logger(f"pgsched.task.{self.task_name}", logging.DEBUG)
        self.logger.addHandler(_Lines(self.write_line))
        self.logger.propagate = False
        self._mutex = threading.Lock()
        self._sent_at = -math.inf
        self._held: tuple[float, str | None] | None = None

    def progress(self, fraction: float, message: str | None = None) -> None:
        """Report how far the handler is: ``fraction`` from 0 to 1, ``message`` optional
        (e.g. ``ctx.progress(0.4, "step 2 of 5")``). Shown live in ``execution show``, the
        API and the web page; the latest report is kept on the execution."""
        value = checked(fraction, message)
        with self._mutex:
            now = time.monotonic()
            wait = self._sent_at + self.min_interval - now
            if wait > 0:
                if self._held is None:  # sent when the interval ends, if none comes after
                    timer = threading.Timer(wait, self.flush)
                    timer.daemon = True
                    timer.start()
                self._held = value
                return
            self._sent_at, self._held = now, None
        self.report(*value)

    def flush(self) -> None:
        """Send the progress call held back, if one is."""
        with self._mutex:
            held, self._held = self._held, None
            if held is not None:
                self._sent_at = time.monotonic()
        if held is not None:
            self.report(*held)

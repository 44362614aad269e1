"""The worker's one retry-with-backoff loop (:func:`with_retries`): a write tried again
while the database is unreachable, so that a blip does not lose it.

Waits are in seconds: 0.5 s first, doubled after each try up to 10 s, for at most the
``seconds`` a caller gives (``record_retry_seconds`` for an attempt's start and end, the
writer's group commit and the start gate's proof; 0, one try, for a log flush before the
last). Only ConnectionFailed and TransientError are retried; any other error is raised
at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from ..errors import ConnectionFailed, TransientError

log = logging.getLogger(__name__)

T = TypeVar("T")


def with_retries(
    attempt: Callable[[bool], T],
    *,
    seconds: float,
    stopping: Callable[[], bool] | None = None,
    what: str | None = None,
) -> T:
    """``attempt(uncertain)`` until it returns, again after each ConnectionFailed or
    TransientError, waiting 0.5 s, doubling to 10 s, for at most ``seconds`` seconds
    (0: once) or until ``stopping()``; then that error is raised. Any other error is raised
    at once. ``uncertain``: an earlier try lost its connection, so it may have committed
    unheard (a TransientError rolled back). ``what`` (``could not record X``) is logged
    as a warning before each wait."""
    give_up = time.monotonic() + seconds
    delay = 0.5
    uncertain = False
    while True:
        try:
            return attempt(uncertain)
        except (ConnectionFailed, TransientError) as exc:
            uncertain = uncertain or isinstance(exc, ConnectionFailed)
            if time.monotonic() >= give_up or (stopping is not None and stopping()):
                raise
            if what is not None:
                log.warning("%s yet (%s); retrying in %.1fs", what, exc, delay)
            time.sleep(delay)
            delay = min(delay * 2, 10.0)

"""Handlers: what runs one attempt of an execution and says how it ended, with no SQL.

:mod:`.command` runs shell and argv commands (their own process group, dying with the
worker); :mod:`.python` calls Python functions in a slot thread under :mod:`.watchdog`;
:mod:`.output` collects what either prints. Each returns an :class:`Outcome`; the worker
(:mod:`pgsched.worker`) decides and records what it means for the execution.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


class StopSignal(Protocol):
    """What tells a running handler to stop: a ``threading.Event`` or the worker's slot."""

    def is_set(self) -> bool: ...


@dataclass
class Outcome:
    """How an attempt ended: ``state`` is succeeded, failed, timed_out or cancelled;
    ``exit_code`` for commands; ``error`` a one-paragraph reason; ``result``
    JSON-serialisable or None; for a Python exception, ``error_type`` its qualified class
    name and ``error_types`` those of its class and every base class (for
    ``no_retry_exceptions``); ``retryable`` False: a failure another attempt cannot mend
    (a secret reference that does not resolve), never retried. ``took``: the seconds the
    handler itself ran, when known apart from its transport (a Python child measures its
    call: the round trip and the wait for a CPU are not the handler's), for the slots'
    spread rule (:mod:`pgsched.worker.executor`)."""

    state: str
    exit_code: int | None = None
    error: str | None = None
    result: Any = None
    error_type: str | None = None
    error_types: tuple[str, ...] = ()
    retryable: bool = True
    took: float | None = field(default=None, compare=False, repr=False)

"""The worker: claims ready executions, runs them, records how they ended.

Its parts, along an execution's one-way path (:mod:`.process` wires them):
:mod:`.claimer` (LISTEN, claim, the buffer, hand-backs), :mod:`.executor` (slot threads,
handlers), :mod:`.outcome` (what an ended attempt means: pure), :mod:`.recorder` (every
write of an attempt's end, made by :mod:`.start_confirmation`, :mod:`.log_flush`,
:mod:`.attempt_write` and :mod:`.lost_reply`) and :mod:`.completer` (the group commit of
final outcomes); beside them :mod:`.heartbeat` (liveness, the start gate, the claimer's
watch), :mod:`.holdings` (what the worker holds, under one lock) and :mod:`.retries` (the
one backoff loop of the writes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import exports

if TYPE_CHECKING:
    from .config import HEARTBEAT_STALE, PRIVATE_ENV, WorkerConfig
    from .process import Worker

# public name -> its module: imported when first used, so that the pure parts
# (pgsched.worker.outcome) load without the driver
__getattr__, __dir__ = exports(
    __name__,
    {
        "HEARTBEAT_STALE": ".config",
        "PRIVATE_ENV": ".config",
        "WorkerConfig": ".config",
        "Worker": ".process",
    },
)

__all__ = ["HEARTBEAT_STALE", "PRIVATE_ENV", "Worker", "WorkerConfig"]

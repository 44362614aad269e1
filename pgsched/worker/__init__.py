"""The worker: claims ready executions, runs them, records how they ended.

Its parts, along an execution's one-way path (:mod:`.process` wires them):
:mod:`.claimer` (LISTEN, claim, the buffer, hand-backs), :mod:`.executor` (slot threads,
handlers), :mod:`.outcome` (what an ended attempt means: pure), :mod:`.recorder` (every
write of an attempt's end) and :mod:`.completer` (the group commit of final outcomes);
beside them :mod:`.heartbeat` (liveness, the start gate, the claimer's watch) and
:mod:`.holdings` (what the worker holds, under one lock).
"""

from .config import HEARTBEAT_STALE, PRIVATE_ENV, WorkerConfig
from .holdings import (
    buffer_in_order as _buffer_in_order,  # its name here before the split (tests import it)
)
from .process import Worker

__all__ = ["HEARTBEAT_STALE", "PRIVATE_ENV", "Worker", "WorkerConfig", "_buffer_in_order"]

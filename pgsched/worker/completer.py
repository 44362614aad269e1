"""Group commit of final outcomes: one writer thread per worker moves every outcome handed
in meanwhile to history in one statement and one transaction (``execution_finish_many``),
so a busy worker pays one round trip and one WAL flush for many executions instead of
one each. An idle worker's outcome is written at once: there is no batching delay.

Handing an outcome in does not wait for the write (:meth:`Completer.submit`): the slot
that ran the execution takes its next one at once, and the writer calls back when the
outcome is stored, was rejected (the lease was lost), or could not be written.

A batch whose reply was lost (the connection broke: ConnectionFailed) may have committed.
Its retry then finds those leases gone, as it would after a rescue; before calling an
outcome rejected, the writer asks whether its own earlier try wrote it
(``execution_finish_many_recorded``: the attempt row with this worker, the lease and the
very finished_at it wrote), and if so calls it stored (issue 15, item 1).
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from datetime import datetime
from typing import Any

from ..db import Database
from ..errors import ConnectionFailed, PgschedError, TransientError
from .retries import with_retries

log = logging.getLogger(__name__)

# Called once per outcome, in the writer's thread: True when moved, False when the lease
# was no longer held, or the exception that writing it raised.
Done = Callable[[bool | BaseException], None]


FIELDS = (
    "id",
    "lease_id",
    "state",
    "finished_at",
    "exit_code",
    "error",
    "result",
    "attempt_state",
    "started_at",
    "error_type",
)


def finish_params(items: list[dict[str, Any]]) -> dict[str, str]:
    """The ``items`` parameter of ``execution_finish_many`` for outcomes given as dicts of
    FIELDS (instants as aware datetimes, ``result`` any JSON value or None). Raises
    ValueError / TypeError for a result that is not strict JSON."""
    return {
        "items": json.dumps(
            [
                [v.timestamp() if isinstance(v := item[k], datetime) else v for k in FIELDS]
                for item in items
            ],
            allow_nan=False,
        )
    }


class Completer:
    """The writer of one worker. ``worker_id()`` gives the worker's current id (it changes
    when the worker registers again); ``max_batch`` outcomes at most per statement;
    ``retry_seconds``: how long a batch is retried while the database is unreachable
    (ConnectionFailed, TransientError) before its outcomes are given up with the error.

    A batch the database refuses (a value it cannot store) is split and each outcome
    tried alone, so one bad value fails only its own execution."""

    def __init__(
        self,
        db: Database,
        worker_id: Callable[[], int | None],
        max_batch: int = 500,
        retry_seconds: float = 300.0,
    ):
        self.db, self.worker_id, self.max_batch = db, worker_id, max_batch
        self.retry_seconds = retry_seconds
        self.stopping = threading.Event()  # set: stop retrying an unreachable database
        self.queue: queue.SimpleQueue[tuple[dict[str, Any], Done] | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, daemon=True, name="pgsched-complete")
        self.thread.start()

    def submit(self, item: dict[str, Any], done: Done) -> None:
        """Hand in one final outcome (``item``: the columns of ``execution_finish_many``,
        one value each); returns at once, ``done`` is called when it is settled."""
        self.queue.put((item, done))

    def finish(self, item: dict[str, Any]) -> bool:
        """Write one final outcome and wait: True when moved, False when the lease was lost.
        Raises what writing it raised (ConnectionFailed, TransientError, PgschedError)."""
        result: Future[bool] = Future()
        self.submit(
            item,
            lambda r: (
                result.set_exception(r) if isinstance(r, BaseException) else result.set_result(r)
            ),
        )
        return result.result()

    def close(self, timeout: float | None = None) -> None:
        """Write what was handed in, then stop the writer thread."""
        self.queue.put(None)
        self.thread.join(timeout)

    def _loop(self) -> None:
        while True:
            first = self.queue.get()
            if first is None:
                return
            batch = [first]
            while len(batch) < self.max_batch:
                try:
                    nxt = self.queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self.queue.put(None)  # stop after this batch
                    break
                batch.append(nxt)
            self._write_retrying(batch)

    def _write_retrying(self, batch: list[tuple[dict[str, Any], Done]]) -> None:
        # TransientError rolled back (serialization, deadlock); a lost connection may not have
        try:
            with_retries(
                lambda uncertain: self._write(batch, uncertain),
                seconds=self.retry_seconds,
                stopping=self.stopping.is_set,
                what=f"could not record {len(batch)} outcome(s)",
            )
        except (ConnectionFailed, TransientError) as exc:
            _settle(batch, exc)

    def _write(self, batch: list[tuple[dict[str, Any], Done]], uncertain: bool = False) -> None:
        """Raises ConnectionFailed / TransientError for the whole batch; settles it otherwise.
        ``uncertain``: an earlier try of this batch lost its connection and may have
        committed; outcomes this try does not move are looked up before they are called
        rejected."""
        worker_id = self.worker_id()
        try:
            row = self.db.one(
                "execution_finish_many",
                worker_id=worker_id,
                **finish_params([item for item, _ in batch]),
            )
            moved = set(row["moved"]) if row is not None else set()  # one row always (an aggregate)
            missing = [item for item, _ in batch if item["id"] not in moved]
            if uncertain and missing:
                found = self.db.one(
                    "execution_finish_many_recorded", worker_id=worker_id, **finish_params(missing)
                )
                earlier = set(found["recorded"]) if found is not None else set()
                if earlier:
                    log.info(
                        "the outcome(s) of execution(s) %s were recorded by an earlier try whose reply was "
                        "lost with its connection",
                        sorted(earlier),
                    )
                    moved |= earlier
        except (ConnectionFailed, TransientError):
            raise
        except (PgschedError, ValueError, TypeError) as exc:
            if len(batch) == 1:
                _settle(batch, exc)
                return
            for one in batch:  # find the outcome the database refuses: each alone
                try:
                    self._write([one], uncertain)
                except (ConnectionFailed, TransientError) as again:
                    _settle([one], again)
            return
        except BaseException as exc:  # never leave an outcome unsettled
            _settle(batch, exc)
            return
        for item, done in batch:
            _call(done, item["id"] in moved)


def _settle(batch: list[tuple[dict[str, Any], Done]], exc: BaseException) -> None:
    for _, done in batch:
        _call(done, exc)


def _call(done: Done, result: bool | BaseException) -> None:
    try:
        done(result)
    except Exception:  # a callback's failure must not stop the writer
        log.exception("recording callback failed")

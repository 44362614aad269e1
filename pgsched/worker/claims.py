"""Claiming executions with their tasks' definitions cached in the worker.

A claimed execution needs its task's definition (handler, command or Python target,
environment, timeout, retry policy). Decoding it afresh with every claimed row was about a
sixth of a draining worker's CPU, although a batch of a hundred rows usually holds one or
a few tasks. :class:`TaskDefinitions` keeps the definitions it has seen, each at the version
it was read at (the task row's ``xmin``, which every change to the row renews), and tells
``execution_claim`` which it holds: the database sends a definition only for a task not
held, or held at an older version. :func:`give_back` returns claimed executions that never
started to the queue.
"""

from __future__ import annotations

from typing import Any

from ..db import Database, Row, Session

# Definitions held at most; the oldest read is dropped first. The ids and versions held are
# sent with every claim, so this stays small.
HELD_MAX = 256


class TaskDefinitions:
    """The task definitions one claimer has read, by task id. Not thread-safe: one claimer
    thread uses it."""

    def __init__(self, held_max: int = HELD_MAX) -> None:
        self.held_max = held_max
        self._held: dict[int, tuple[int, dict[str, Any]]] = {}  # task id → (xmin, definition)

    def claim(
        self,
        session: Session | Database,
        *,
        queues: list[str],
        tenants: tuple[str, ...] | list[str] | None = None,
        limit: int,
        worker_id: int | None,
        now: Any = None,
    ) -> list[Row]:
        """Claim up to ``limit`` ready executions of ``queues`` of ``tenants`` (None: of
        every tenant) for worker ``worker_id``
        (None, or a worker no longer registered: nothing is claimed; ``now``: an aware
        datetime, or None for the server's clock), in one statement on ``session``. Returns
        the claimed rows in start order (priority, run_at, id), ``params`` as JSON text
        (an object; decoded by whoever runs the execution), each with its task's
        definition merged in (``task_name``, ``handler_kind``, ``command``, ``argv``,
        ``python_target``, ``env``, ``stdin``, ``timeout_seconds``, ``retry_policy``,
        ``retry_base_seconds``, ``retry_max_seconds``, ``no_retry_exit_codes``,
        ``no_retry_exceptions``, and the sandbox's ``limit_*``, ``network`` and
        ``python_isolation`` and ``run_as_user``, read by a second statement for the
        definitions sent). Raises what ``Session.many`` raises."""
        ids = list(self._held)
        rows = session.many(
            "execution_claim",
            queues=queues,
            tenants=None if tenants is None else list(tenants),
            limit=limit,
            worker_id=worker_id,
            now=now,
            known_task_ids=ids,
            known_task_versions=[self._held[i][0] for i in ids],
        )
        fresh = {r["task_id"] for r in rows if r["task"] is not None}
        sandbox = {}  # their sandbox settings (migration 0032), once per definition read
        if fresh:
            sandbox = {x.pop("id"): x for x in session.many("task_sandbox", ids=list(fresh))}
        for row in rows:
            definition, version = row.pop("task"), row.pop("task_version")
            if definition is None:  # held at this version when the claim was sent
                definition = self._held[row["task_id"]][1]
            else:
                definition.update(sandbox.get(row["task_id"], {}))
                self._held.pop(row["task_id"], None)  # re-inserted last: the newest read
                self._held[row["task_id"]] = (version, definition)
            row.update(definition)
        while len(self._held) > self.held_max:  # after the rows: they may use what goes
            del self._held[next(iter(self._held))]
        return rows


def give_back(session: Session | Database, rows: list[Row]) -> list[Row]:
    """Hand claimed executions that never started back to the queue, as if never claimed
    (``execution_unclaim``: ``rows`` are claimed rows, their ``id`` and ``lease_id`` used;
    only those whose lease is still held), and wake the workers in the same transaction:
    an UPDATE back to pending sends no NOTIFY of its own, and idle workers would find them
    only at their next poll. Returns one row (``id``) per execution handed back, or dropped
    because its task was deleted meanwhile. Raises what ``Session.many`` raises."""
    with session.transaction() as tx:
        back = tx.many(
            "execution_unclaim", id=[r["id"] for r in rows], lease_id=[r["lease_id"] for r in rows]
        )
        if back:
            tx.exec("execution_wake")
    return back

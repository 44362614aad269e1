"""The execution store: reading executions (live and finished), their attempts and logs,
cancelling one, and the rule for running an ended one again. The faces (CLI, web pages,
REST API) call these instead of running queries of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ..db import Database, Row, Session
from ..errors import NotFound, ValidationError
from ..lifecycle import LIVE_STATES, ExecutionState, ExecutionTrigger
from . import dlq, tasks


def find(db: Database | Session, execution_id: int, tenant: str) -> Row | None:
    """Execution ``execution_id`` of ``tenant`` (live or in history, with its task's name),
    or None."""
    return db.one("execution_get", id=execution_id, tenant=tenant)


def get(db: Database | Session, execution_id: int, tenant: str) -> Row:
    """Execution ``execution_id`` of ``tenant``. Raises NotFound."""
    row = find(db, execution_id, tenant)
    if row is None:
        raise NotFound(f"execution: no execution {execution_id} in tenant {tenant!r}")
    return row


def attempts(db: Database | Session, execution_id: int) -> list[Row]:
    """The execution's attempts, first first."""
    return db.many("execution_attempts", id=execution_id)


def log_page(
    db: Database | Session, execution_id: int, after: tuple[int, int], limit: int
) -> list[Row]:
    """Up to ``limit`` log lines of the execution after ``after`` (attempt, seq), in order."""
    return db.many(
        "execution_log_page",
        id=execution_id,
        after_attempt=after[0],
        after_seq=after[1],
        limit=limit,
    )


def log_tail(db: Database | Session, execution_id: int, limit: int) -> list[Row]:
    """The last ``limit`` log lines of the execution, newest first."""
    return db.many("execution_log_tail", id=execution_id, limit=limit)


def recent(
    db: Database | Session,
    tenant: str,
    *,
    task: str | None = None,
    state: str | None = None,
    limit: int = 50,
) -> list[Row]:
    """The newest ``limit`` executions of ``tenant`` (of task ``task``, in ``state``)."""
    return db.many("execution_list", tenant=tenant, task=task, state=state, limit=limit)


def page(
    db: Database | Session,
    tenant: str,
    *,
    task: str | None = None,
    state: str | None = None,
    worker: int | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    before: int | None = None,
    limit: int = 50,
) -> list[Row]:
    """Up to ``limit`` executions of ``tenant``, newest id first, below id ``before``: of
    the task called ``task``, in ``state``, run by ``worker``, scheduled in [``start``,
    ``end``) (aware), each filter optional."""
    return db.many(
        "api_execution_list",
        tenant=tenant,
        task=task,
        state=state,
        worker=worker,
        before=before,
        limit=limit,
        **{"from": start, "to": end},
    )


def page_by_task_ids(
    db: Database | Session,
    tenant: str,
    task: str,
    *,
    state: str | None = None,
    worker: int | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    before: int | None = None,
    limit: int = 50,
) -> list[Row]:
    """:func:`page` for one task, found by the ids of every task of that name (the live one
    and deleted ones): a task with few executions is then read through its index, not by
    walking every id."""
    ids = (db.one("page_task_ids", tenant=tenant, name=task) or {}).get("ids") or []
    if not ids:
        return []
    return db.many(
        "page_task_executions",
        task_ids=ids,
        tenant=tenant,
        state=state,
        worker=worker,
        before=before,
        limit=limit,
        **{"from": start, "to": end},
    )


def cancel(db: Database | Session, execution_id: int, tenant: str) -> str:
    """Cancel an execution: ``cancelled`` (it was pending), ``cancelling`` (its worker is
    told to stop it) or ``finished`` (it had ended)."""
    row = db.one("execution_cancel", id=execution_id, tenant=tenant)
    assert row is not None
    return str(row["outcome"])


def retryable(row: Row) -> bool:
    """Whether :func:`retry` takes the execution ``row``: a dead one, or another that has
    ended and is not a DAG node (a node runs again with its run: ``pgsched dag rerun``)."""
    return row["state"] == ExecutionState.DEAD or (
        row["state"] not in LIVE_STATES and row["trigger"] != ExecutionTrigger.DAG
    )


@dataclass(frozen=True)
class Retried:
    """What :func:`retry` did: ``requeued`` (a dead execution back in the queue under its
    own id) or ``new_execution`` (an ended one run again as ``execution_id``)."""

    outcome: str
    execution_id: int


def retry(db: Database, row: Row, tenant: str, *, how: str) -> Retried:
    """Run the ended execution ``row`` (as :func:`get` returns it) again: a dead one goes
    back to the queue with fresh attempts (same id, :func:`pgsched.stores.dlq.retry`);
    another that has ended runs again as a new execution with the same params, triggered
    ``how`` (``manual``, ``api``). Raises ValidationError on ``execution`` for one that is
    live, or a DAG node that is not dead."""
    if row["state"] in LIVE_STATES:
        raise ValidationError(
            "execution", row["id"], f"is {row['state']}; only an ended execution is retried"
        )
    if row["trigger"] == ExecutionTrigger.DAG and row["state"] != ExecutionState.DEAD:
        raise ValidationError(
            "execution",
            row["id"],
            "is a node of a DAG run; rerun the run instead (pgsched dag rerun)",
        )
    if row["state"] == ExecutionState.DEAD:
        dlq.retry(db, row["id"], tenant)
        return Retried("requeued", row["id"])
    # the params as stored: row's are masked for a viewer (migration 0031), and an operator
    # may run again what he may not read
    stored = db.one("execution_params", id=row["id"], tenant=tenant)
    if stored is None:
        raise NotFound(f"execution: no execution {row['id']} in tenant {tenant!r}")
    new = tasks.trigger(db, row["task_name"], params=stored["params"], tenant=tenant, how=how)
    return Retried("new_execution", new)

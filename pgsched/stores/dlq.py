"""The dead-letter queue's store: dead executions (``execution_history.state = 'dead'``)
listed, counted, retried, purged and deleted. The faces (CLI, web pages, REST API) call
these.
"""

from __future__ import annotations

from ..db import Database, Row, Session


def recent(
    db: Database | Session, tenant: str, *, task: str | None = None, limit: int = 50
) -> list[Row]:
    """The newest ``limit`` dead executions of ``tenant`` (of task ``task``), by when they
    died."""
    return db.many("dlq_list", tenant=tenant, task=task, limit=limit)


def page(
    db: Database | Session,
    tenant: str,
    *,
    task: str | None = None,
    before: int | None = None,
    limit: int = 50,
) -> list[Row]:
    """Up to ``limit`` dead executions of ``tenant`` (of task ``task``), newest id first,
    below id ``before``; each says whether its task was deleted."""
    return db.many("page_dlq_list", tenant=tenant, task=task, limit=limit, before=before)


def count(db: Database | Session, tenant: str, task: str | None = None) -> int:
    """How many dead executions of live tasks ``tenant`` has (of task ``task``): what
    :func:`retry_all` would retry. Locks nothing."""
    return int((db.one("page_dlq_count", tenant=tenant, task=task) or {"dead": 0})["dead"])


def retry(db: Database | Session, execution_id: int, tenant: str) -> None:
    """Put dead execution ``execution_id`` back in the queue with fresh attempts and a fresh
    backoff (pgsched.dlq_retry_v1; its earlier attempts are kept). One whose idempotency key
    has since succeeded on its task is marked ``skipped`` instead."""
    db.one("dlq_retry", id=execution_id, tenant=tenant)


def retry_all(db: Database | Session, tenant: str, task: str | None = None) -> int:
    """:func:`retry` every dead execution of ``tenant`` (of task ``task``); how many."""
    row = db.one("dlq_retry_all", task=task, tenant=tenant)
    assert row is not None
    return int(row["retried"])


class CountChanged(Exception):
    """The dead-letter queue does not hold the number of executions confirmed; ``dead`` is
    how many it holds now. Nothing was retried."""

    def __init__(self, dead: int):
        super().__init__(f"{dead} dead executions now")
        self.dead = dead


def retry_all_confirmed(db: Database, tenant: str, task: str | None, expected: int) -> int:
    """Retry every dead execution of ``tenant`` (of task ``task``) in one transaction, only
    if there are exactly ``expected`` of them; return how many were retried. Raises
    CountChanged otherwise (rolled back: nothing retried).

    The count locks the rows it counts, but a row that dies between the count and the
    retry is not among them and the retry (a statement of its own, with its own snapshot)
    would take it too: the retried number is checked as well."""
    with db.transaction() as tx:
        dead = (tx.one("api_dlq_count", tenant=tenant, task=task) or {"dead": 0})["dead"]
        if dead == expected:
            retried = (tx.one("dlq_retry_all", task=task, tenant=tenant) or {"retried": 0})[
                "retried"
            ]
            if retried == expected:
                return int(retried)
            dead = retried
        raise CountChanged(dead)


def purge(db: Database | Session, tenant: str, older_than: float = 0.0) -> int:
    """Delete for good the dead executions of ``tenant`` dead for more than ``older_than``
    seconds (0: every one); how many."""
    row = db.one("dlq_purge", seconds=older_than, tenant=tenant)
    assert row is not None
    return int(row["purged"])


def delete(db: Database | Session, execution_id: int, tenant: str) -> bool:
    """Remove dead execution ``execution_id`` from history (its attempts and log stay until
    retention); False when it is not in ``tenant``'s dead-letter queue."""
    return db.one("api_dlq_delete", id=execution_id, tenant=tenant) is not None

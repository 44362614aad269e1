"""The dead-letter queue page ``/dlq``: dead executions (paged by id, newest first), retry
one, delete one, and retry all.

Retry all has a confirm step: ``GET /dlq/retry-all`` shows how many dead executions would
be retried and posts that count back; ``POST /dlq/retry-all`` counts again with the rows
locked and retries them only when the count is the same (else 409 and the new count to
confirm), so what the person saw is what is retried.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..errors import NotFound
from ..stores import dlq
from .access import database, require
from .api import MAX_ID, int_arg, text_arg
from .pages import PAGE_SIZE, done, field, int_field, keyset, notice, path_id
from .rendering import render


def dlq_list(request: Request) -> Response:
    who = require(request, "viewer")
    db = database(request)
    task = text_arg(request, "task")
    rows = dlq.page(
        db,
        who.tenant,
        task=task,
        limit=PAGE_SIZE + 1,
        before=int_arg(request, "before", None, 1, MAX_ID),
    )
    retryable = dlq.count(db, who.tenant, task)
    return render(
        request,
        "web/dlq.html",
        {
            "page": keyset(request, rows, PAGE_SIZE, "id"),
            "task": task,
            "retryable": retryable,
            "notice": notice(request),
        },
    )


def _confirm(
    request: Request, task: str | None, count: int, error: str | None = None, status_code: int = 200
) -> Response:
    return render(
        request,
        "web/dlq_retry_all.html",
        {"task": task, "count": count, "error": error},
        status_code=status_code,
    )


def dlq_retry_all_confirm(request: Request) -> Response:
    who = require(request, "operator")
    task = text_arg(request, "task")
    count = dlq.count(database(request), who.tenant, task)
    return _confirm(request, task, count)


def dlq_retry_all(request: Request) -> Response:
    who = require(request, "operator")
    task = field(request, "task", required=False, max_length=200) or None
    expected = int_field(request, "count", 0, 10_000_000)
    try:
        retried = dlq.retry_all_confirmed(database(request), who.tenant, task, expected)
    except dlq.CountChanged as exc:
        return _confirm(
            request,
            task,
            exc.dead,
            status_code=409,
            error=(
                f"count: you confirmed {expected}, but {exc.dead} dead execution(s) are in the queue now; "
                "nothing was retried. Confirm the new count to go on."
            ),
        )
    return done("/dlq", "retried_all", retried)


def dlq_retry(request: Request) -> Response:
    who = require(request, "operator")
    execution_id = path_id(request, "execution")
    dlq.retry(database(request), execution_id, who.tenant)
    return done("/dlq", "requeued", execution_id)


def dlq_delete(request: Request) -> Response:
    who = require(request, "operator")
    execution_id = path_id(request, "execution")
    if not dlq.delete(database(request), execution_id, who.tenant):
        raise NotFound(
            f"execution: {execution_id} is not in the dead-letter queue of tenant {who.tenant!r}"
        )
    return done("/dlq", "removed")


routes = [
    Route("/dlq", dlq_list, methods=["GET"], name="dlq"),
    Route("/dlq/retry-all", dlq_retry_all_confirm, methods=["GET"]),
    Route("/dlq/retry-all", dlq_retry_all, methods=["POST"]),
    Route("/dlq/{id}/retry", dlq_retry, methods=["POST"]),
    Route("/dlq/{id}/delete", dlq_delete, methods=["POST"]),
]

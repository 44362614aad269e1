"""Execution pages: ``/executions`` (filters by task, state, time range and worker; pages
by id, newest first) and ``/executions/ID`` (attempts, params, result, error, the log,
followed live while it runs, and the cancel and retry buttons).

The live log is the REST API's server-sent events stream
(``/api/v1/executions/ID/logs``); ``static/log.js`` appends its lines. Cancel is
``pgsched.cancel_v1``; retry puts a dead execution back in the queue (same id) and runs
any other ended one again as a new execution with the same params (not a DAG node's:
its run is rerun instead).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..db import Database, Row
from ..stores import executions as execution_store
from ..stores import limits
from .access import database, require
from .api import MAX_ID, choice_arg, int_arg, text_arg, time_arg
from .api_executions import LIVE, STATES
from .pages import PAGE_SIZE, done, keyset, notice, path_id
from .rendering import render

LOG_LINES = 2000  # lines of the log an execution page shows: its end; the API streams it whole


def execution_list(request: Request) -> Response:
    who = require(request, "viewer")
    task, state = text_arg(request, "task"), choice_arg(request, "state", STATES)
    worker = int_arg(request, "worker", None, 1, MAX_ID)
    rows = executions(
        database(request),
        who.tenant,
        task=task,
        state=state,
        worker=worker,
        start=time_arg(request, "from"),
        end=time_arg(request, "to"),
        before=int_arg(request, "before", None, 1, MAX_ID),
    )
    filters = {"task": task, "state": state, "worker": worker}
    return render(
        request,
        "web/executions.html",
        {
            "page": keyset(request, rows, PAGE_SIZE, "id"),
            "filters": filters,
            "states": STATES,
            "raw": {k: request.query_params.get(k, "") for k in ("from", "to")},
        },
    )


def executions(
    db: Database,
    tenant: str,
    *,
    task: str | None = None,
    state: str | None = None,
    worker: int | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    before: int | None = None,
) -> list[Row]:
    """A page of executions (``PAGE_SIZE + 1`` rows, newest first) of ``tenant``,
    optionally of the task called ``task``, in ``state``, run by ``worker``, scheduled in
    [``start``, ``end``). A task filter goes by the tasks' ids: a task with few
    executions is then found through its index, not by walking every id."""
    common: dict[str, Any] = {
        "state": state,
        "worker": worker,
        "before": before,
        "limit": PAGE_SIZE + 1,
        "start": start,
        "end": end,
    }
    if task is None:
        return execution_store.page(db, tenant, **common)
    return execution_store.page_by_task_ids(db, tenant, task, **common)


def execution_detail(request: Request) -> Response:
    who = require(request, "viewer")
    db = database(request)
    row = execution_store.get(db, path_id(request, "execution"), who.tenant)
    ended = row["state"] not in LIVE
    # the end of the log, newest first (one more line tells whether earlier ones were left out)
    log = execution_store.log_tail(db, row["id"], LOG_LINES + 1)
    return render(
        request,
        "web/execution.html",
        {
            "retryable": execution_store.retryable(row),
            "e": row,
            "attempts": execution_store.attempts(db, row["id"]),
            "live": not ended,
            # why a due pending execution has not started, when a limit holds it (0021)
            "wait_reason": (
                limits.wait_reason(db, who.tenant, row["id"]) if row["state"] == "pending" else None
            ),
            "log": log[:LOG_LINES][::-1],
            "log_cut": len(log) > LOG_LINES,
            "notice": notice(request),
        },
    )


def execution_cancel(request: Request) -> Response:
    who = require(request, "operator")
    execution_id = path_id(request, "execution")
    return done(
        f"/executions/{execution_id}",
        execution_store.cancel(database(request), execution_id, who.tenant),
    )


def execution_retry(request: Request) -> Response:
    who = require(request, "operator")
    db = database(request)
    row = execution_store.get(db, path_id(request, "execution"), who.tenant)
    retried = execution_store.retry(
        db, row, who.tenant, how="manual"
    )  # ValidationError: shown on the page
    if retried.outcome == "requeued":
        return done(f"/executions/{row['id']}", "requeued", row["id"])
    return done(f"/executions/{retried.execution_id}", "retried")


routes = [
    Route("/executions", execution_list, methods=["GET"], name="executions"),
    Route("/executions/{id}", execution_detail, methods=["GET"], name="execution"),
    Route("/executions/{id}/cancel", execution_cancel, methods=["POST"]),
    Route("/executions/{id}/retry", execution_retry, methods=["POST"]),
]

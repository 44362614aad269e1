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

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..db import Database, Row
from ..errors import ValidationError
from ..stores import tasks
from .access import database, require
from .api import MAX_ID, choice_arg, int_arg, text_arg, time_arg
from .api_executions import LIVE, STATES
from .api_executions import _get as execution_of
from .pages import PAGE_SIZE, done, keyset, notice, path_id
from .rendering import render

LOG_LINES = 2000  # lines of the log an execution page shows: its end; the API streams it whole


def execution_list(request: Request) -> Response:
    who = require(request, "viewer")
    task, state = text_arg(request, "task"), choice_arg(request, "state", STATES)
    worker = int_arg(request, "worker", None, 1, MAX_ID)
    rows = executions(database(request), who.tenant, task=task, state=state, worker=worker,
                      start=time_arg(request, "from"), end=time_arg(request, "to"),
                      before=int_arg(request, "before", None, 1, MAX_ID))
    filters = {"task": task, "state": state, "worker": worker}
    return render(request, "web/executions.html", {
        "page": keyset(request, rows, PAGE_SIZE, "id"), "filters": filters, "states": STATES,
        "raw": {k: request.query_params.get(k, "") for k in ("from", "to")}})


def executions(db: Database, tenant: str, *, task: str | None = None, state: str | None = None,
               worker: int | None = None, start: datetime | None = None, end: datetime | None = None,
               before: int | None = None) -> list[Row]:
    """A page of executions (``PAGE_SIZE + 1`` rows, newest first) of ``tenant``,
    optionally of the task called ``task``, in ``state``, run by ``worker``, scheduled in
    [``start``, ``end``). A task filter goes by the tasks' ids: a task with few
    executions is then found through its index, not by walking every id."""
    common = {"tenant": tenant, "state": state, "worker": worker, "before": before, "limit": PAGE_SIZE + 1,
              "from": start, "to": end}
    if task is None:
        return db.many("api_execution_list", task=None, **common)
    ids = (db.one("page_task_ids", tenant=tenant, name=task) or {}).get("ids") or []
    return db.many("page_task_executions", task_ids=ids, **common) if ids else []


def execution_detail(request: Request) -> Response:
    who = require(request, "viewer")
    db = database(request)
    row = execution_of(db, path_id(request, "execution"), who.tenant)
    ended = row["state"] not in LIVE
    # the end of the log, newest first (one more line tells whether earlier ones were left out)
    log = db.many("execution_log_tail", id=row["id"], limit=LOG_LINES + 1)
    return render(request, "web/execution.html", {
        "retryable": row["state"] == "dead" or (ended and row["trigger"] != "dag"),
        "e": row, "attempts": db.many("execution_attempts", id=row["id"]), "live": not ended,
        "log": log[:LOG_LINES][::-1], "log_cut": len(log) > LOG_LINES, "notice": notice(request)})


def execution_cancel(request: Request) -> Response:
    who = require(request, "operator")
    execution_id = path_id(request, "execution")
    row = database(request).one("execution_cancel", id=execution_id, tenant=who.tenant)
    assert row is not None
    return done(f"/executions/{execution_id}", str(row["outcome"]))


def execution_retry(request: Request) -> Response:
    who = require(request, "operator")
    db = database(request)
    row = execution_of(db, path_id(request, "execution"), who.tenant)
    if row["state"] in LIVE:
        raise ValidationError("execution", row["id"], f"is {row['state']}; only an ended execution is retried")
    if row["trigger"] == "dag" and row["state"] != "dead":
        raise ValidationError("execution", row["id"], "is a node of a DAG run; rerun the run instead "
                              "(pgsched dag rerun)")
    if row["state"] == "dead":
        db.one("dlq_retry", id=row["id"], tenant=who.tenant)
        return done(f"/executions/{row['id']}", "requeued", row["id"])
    new = tasks.trigger(db, row["task_name"], params=row["params"], tenant=who.tenant, how="manual")
    return done(f"/executions/{new}", "retried")


routes = [
    Route("/executions", execution_list, methods=["GET"], name="executions"),
    Route("/executions/{id}", execution_detail, methods=["GET"], name="execution"),
    Route("/executions/{id}/cancel", execution_cancel, methods=["POST"]),
    Route("/executions/{id}/retry", execution_retry, methods=["POST"]),
]

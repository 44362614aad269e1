"""REST API: executions (``/api/v1/executions``) and their logs as server-sent events.
Reads need a viewer, cancel and retry an operator; all in the caller's tenant."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from ..db import Database, Row
from ..errors import ValidationError
from ..jsontext import json_default
from ..lifecycle import LIVE_STATES, ExecutionState
from ..stores import executions
from .access import database, require
from .api import MAX_ID, PREFIX, choice_arg, id_param, int_arg, page, reply, text_arg, time_arg
from .errors import ApiError

STATES = tuple(s.value for s in ExecutionState)
LIVE = LIVE_STATES
LOG_POLL_SECONDS = 0.5  # how often a followed log looks for new lines
LOG_KEEPALIVE_SECONDS = 15.0  # an SSE comment this often keeps proxies from closing the stream
LOG_MAX_SECONDS = (
    6 * 3600.0
)  # a stream ends after this long; the client reconnects with Last-Event-ID
LOG_BATCH = 1000  # log lines read at a time: a log of a million lines is never held whole


def execution_list(request: Request) -> Response:
    who = require(request, "viewer")
    limit = int_arg(request, "limit", 50, 1, 1000)
    assert limit is not None
    start, end = time_arg(request, "from"), time_arg(request, "to")
    rows = executions.page(
        database(request),
        who.tenant,
        task=text_arg(request, "task"),
        state=choice_arg(request, "state", STATES),
        worker=int_arg(request, "worker", None, 1, MAX_ID),
        before=int_arg(request, "cursor", None, 1, MAX_ID),
        limit=limit + 1,
        start=start,
        end=end,
    )
    return page(rows, limit, "id")


def execution_get(request: Request) -> Response:
    who = require(request, "viewer")
    db = database(request)
    row = executions.get(db, id_param(request), who.tenant)
    return reply({**row, "attempts": executions.attempts(db, row["id"])})


def _read(
    db: Database, execution_id: int, tenant: str, after: tuple[int, int]
) -> tuple[str | None, list[Row]]:
    """The execution's state (None when it was removed) and its log lines after ``after``."""
    # the state is read before the lines: a line written in between comes next pass
    row = executions.find(db, execution_id, tenant)
    return (row["state"] if row else None, executions.log_page(db, execution_id, after, LOG_BATCH))


async def _events(
    db: Database,
    execution_id: int,
    tenant: str,
    after: tuple[int, int],
    follow: bool,
    closing: threading.Event,
) -> AsyncIterator[str]:
    """SSE of an execution's log: ``event: line`` per line (``id: attempt:seq``, data the
    line as JSON), then ``event: end`` with the final state once it has ended (null when
    the execution was removed meanwhile). When ``closing`` is set (the server is stopping)
    the stream ends without ``end``: the client reconnects with ``Last-Event-ID``, and the
    server's shutdown does not wait for streams that would never end by themselves.

    Asynchronous, so that a followed log holds a thread only while it reads the database:
    waiting between reads in a thread would let a few dozen open log pages take every
    thread of the pool that runs the (synchronous) endpoints, and stall the whole app."""
    started = last_sent = time.monotonic()
    while True:
        state, lines = await anyio.to_thread.run_sync(_read, db, execution_id, tenant, after)
        for line in lines:
            after = (line["attempt"], line["seq"])
            yield f"id: {after[0]}:{after[1]}\nevent: line\ndata: {json.dumps(line, default=json_default)}\n\n"
        if closing.is_set():
            return
        now = time.monotonic()
        if lines:
            last_sent = now
        if len(lines) == LOG_BATCH:
            continue  # more lines are waiting: read them before ending or sleeping
        if state not in LIVE or not follow or now - started > LOG_MAX_SECONDS:
            yield f"event: end\ndata: {json.dumps({'state': state})}\n\n"
            return
        if now - last_sent > LOG_KEEPALIVE_SECONDS:
            last_sent = now
            yield ": keep-alive\n\n"
        await anyio.sleep(LOG_POLL_SECONDS)


def _resume_point(request: Request) -> tuple[int, int]:
    """Where a stream starts: after ``Last-Event-ID`` (a reconnecting client), else after
    the ``after`` query parameter (``attempt:seq``, the last line a page already shows)."""
    mark = request.headers.get("last-event-id") or request.query_params.get("after", "")
    attempt, _, seq = mark.partition(":")
    if attempt.isdigit() and seq.isdigit() and int(attempt) < 2**31 and int(seq) < 2**31:
        return int(attempt), int(seq)
    return 0, 0


def execution_logs(request: Request) -> Response:
    who = require(request, "viewer")
    db = database(request)
    row = executions.get(db, id_param(request), who.tenant)
    follow = request.query_params.get("follow", "true") not in ("false", "0", "no")
    return StreamingResponse(
        _events(
            db, row["id"], who.tenant, _resume_point(request), follow, request.app.state.closing
        ),
        media_type="text/event-stream",
        headers={"X-Accel-Buffering": "no"},
    )


def execution_cancel(request: Request) -> Response:
    who = require(request, "operator")
    execution_id = id_param(request)
    outcome = executions.cancel(database(request), execution_id, who.tenant)
    # cancelled (it was pending), cancelling (the worker is told), finished (it had ended)
    return reply({"id": execution_id, "outcome": outcome}, 202 if outcome == "cancelling" else 200)


def execution_retry(request: Request) -> Response:
    """A dead execution goes back to the queue with fresh attempts (same id); another that
    has ended runs again as a new execution with the same params."""
    who = require(request, "operator")
    db = database(request)
    row = executions.get(db, id_param(request), who.tenant)
    try:
        done = executions.retry(db, row, who.tenant, how="api")
    except ValidationError as exc:  # live, or a DAG node: a conflict with its state
        raise ApiError(409, str(exc), field="id") from None
    return reply({"id": row["id"], "execution_id": done.execution_id, "outcome": done.outcome}, 202)


E = PREFIX + "/executions"
routes = [
    Route(E, execution_list, methods=["GET"]),
    Route(E + "/{id}", execution_get, methods=["GET"]),
    Route(E + "/{id}/logs", execution_logs, methods=["GET"]),
    Route(E + "/{id}/cancel", execution_cancel, methods=["POST"]),
    Route(E + "/{id}/retry", execution_retry, methods=["POST"]),
]

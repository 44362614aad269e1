"""REST API: executions (``/api/v1/executions``) and their logs as server-sent events.
Reads need a viewer, cancel and retry an operator; all in the caller's tenant."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import anyio
import anyio.to_thread
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from ..db import Database, Row
from ..errors import ValidationError
from ..jsontext import json_default
from ..lifecycle import LIVE_STATES, ExecutionState
from ..stores import executions, limits
from .access import database, recheck, require
from .api import MAX_ID, PREFIX, choice_arg, id_param, int_arg, page, reply, text_arg, time_arg
from .credentials import Principal
from .errors import ApiError

STATES = tuple(s.value for s in ExecutionState)
LIVE = LIVE_STATES
LOG_POLL_SECONDS = 0.5  # how often a followed log looks for new lines
LOG_KEEPALIVE_SECONDS = 15.0  # an SSE comment this often keeps proxies from closing the stream
LOG_MAX_SECONDS = (
    6 * 3600.0
)  # a stream ends after this long; the client reconnects with Last-Event-ID
LOG_BATCH = 1000  # log lines read at a time: a log of a million lines is never held whole
LOG_RECHECK_SECONDS = 1.0  # how often a stream asks whether its token or session still holds


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
    # why a pending execution waits (a limit, a pause, a quota), as the page and the CLI say
    reason = limits.wait_reason(db, who.tenant, row["id"]) if row["state"] == "pending" else None
    return reply({**row, "wait_reason": reason, "attempts": executions.attempts(db, row["id"])})


def _read(
    db: Database,
    execution_id: int,
    tenant: str,
    after: tuple[int, int],
    allowed: Callable[[], bool] | None,
) -> tuple[bool, Row | None, list[Row]]:
    """Whether the caller may still read (``allowed()``, when given), the execution (None
    when it was removed) and its log lines after ``after`` (none when not allowed)."""
    if allowed is not None and not allowed():
        return False, None, []
    # the state is read before the lines: a line written in between comes next pass
    row = executions.find(db, execution_id, tenant)
    return True, row, executions.log_page(db, execution_id, after, LOG_BATCH)


def _still(who: Principal, again: Callable[[], Principal | None]) -> Callable[[], bool]:
    """Whether the credential of a stream still signs in ``who``'s tenant as a viewer."""

    def allowed() -> bool:
        now = again()
        return now is not None and now.tenant == who.tenant and now.has("viewer")

    return allowed


async def _events(
    db: Database,
    execution_id: int,
    tenant: str,
    after: tuple[int, int],
    follow: bool,
    closing: threading.Event,
    allowed: Callable[[], bool] = lambda: True,
) -> AsyncIterator[str]:
    """SSE of an execution's log: ``event: line`` per line (``id: attempt:seq``, data the
    line as JSON), ``event: progress`` when its progress changed (``{progress, message}``),
    then ``event: end`` with the final state once it has ended (null when
    the execution was removed meanwhile). When ``closing`` is set (the server is stopping)
    the stream ends without ``end``: the client reconnects with ``Last-Event-ID``, and the
    server's shutdown does not wait for streams that would never end by themselves.

    Every :data:`LOG_RECHECK_SECONDS` the stream asks ``allowed()`` (in the thread of a
    read) whether its token or session still holds; once it does not (revoked, signed out
    everywhere, expired, the user deleted) the stream sends ``event: revoked`` and ends, so
    a revocation closes open streams within about a second, whichever web process serves
    them. Polling, not LISTEN/NOTIFY: it also sees an expiry, which nobody announces, and a
    revocation written by any client, and it costs one indexed look-up a second a stream.

    Asynchronous, so that a followed log holds a thread only while it reads the database:
    waiting between reads in a thread would let a few dozen open log pages take every
    thread of the pool that runs the (synchronous) endpoints, and stall the whole app."""
    started = last_sent = checked = time.monotonic()
    progress: tuple[Any, Any] = (None, None)
    while True:
        check = time.monotonic() - checked >= LOG_RECHECK_SECONDS
        may, row, lines = await anyio.to_thread.run_sync(
            _read, db, execution_id, tenant, after, allowed if check else None
        )
        state = row["state"] if row else None
        if row and row.get("progress") is not None:
            now_at = (row["progress"], row.get("progress_message"))
            if now_at != progress:  # its handler's latest ctx.progress (migration 0038)
                progress = now_at
                data = json.dumps({"progress": now_at[0], "message": now_at[1]})
                yield f"event: progress\ndata: {data}\n\n"
        if check:
            checked = time.monotonic()
        if not may:
            yield f"event: revoked\ndata: {json.dumps({'error': _REVOKED})}\n\n"
            return
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


_REVOKED = "session: revoked, ended or expired; sign in again"


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
            db,
            row["id"],
            who.tenant,
            _resume_point(request),
            follow,
            request.app.state.closing,
            _still(who, recheck(request)),
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

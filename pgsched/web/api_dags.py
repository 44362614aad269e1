"""REST API: DAG runs (``/api/v1/dag-runs``), read by viewers, in the caller's tenant."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..lifecycle import DagRunState
from ..stores import dagruns
from .access import database, require
from .api import MAX_ID, PREFIX, choice_arg, id_param, int_arg, page, reply, text_arg

RUN_STATES = tuple(s.value for s in DagRunState)


def dag_run_list(request: Request) -> Response:
    who = require(request, "viewer")
    limit = int_arg(request, "limit", 50, 1, 1000)
    assert limit is not None
    rows = dagruns.run_page(
        database(request),
        who.tenant,
        dag=text_arg(request, "dag"),
        state=choice_arg(request, "state", RUN_STATES),
        before=int_arg(request, "cursor", None, 1, MAX_ID),
        limit=limit + 1,
    )
    return page(rows, limit, "id")


def dag_run_get(request: Request) -> Response:
    who = require(request, "viewer")
    run, nodes = dagruns.run(database(request), id_param(request), who.tenant)
    return reply({**run, "node_runs": nodes})


routes = [
    Route(PREFIX + "/dag-runs", dag_run_list, methods=["GET"]),
    Route(PREFIX + "/dag-runs/{id}", dag_run_get, methods=["GET"]),
]

"""DAG pages: ``/dags`` (every DAG with its last run), ``/dags/NAME`` (its nodes and run
history, paged by run id) and ``/dags/runs/ID`` (the run drawn as a graph coloured by
node state, with each node's execution). Operators may start a run
(:func:`pgsched.stores.dagruns.trigger`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..stores import dagruns, dags
from .access import database, require
from .api import MAX_ID, int_arg
from .graph import draw
from .pages import PAGE_SIZE, done, field, keyset, notice, path_id
from .rendering import render


def dag_list(request: Request) -> Response:
    who = require(request, "viewer")
    return render(
        request,
        "web/dags.html",
        {"dags": dags.list_dags(database(request), who.tenant, limit=500)},
    )


def dag_detail(request: Request) -> Response:
    who = require(request, "viewer")
    db = database(request)
    dag = dags.get(db, str(request.path_params["name"]), who.tenant)
    rows = dagruns.run_page(
        db,
        who.tenant,
        dag=dag["name"],
        before=int_arg(request, "before", None, 1, MAX_ID),
        limit=PAGE_SIZE + 1,
    )
    return render(
        request,
        "web/dag.html",
        {
            "dag": dag,
            "nodes": dags.nodes(db, dag["id"]),
            "page": keyset(request, rows, PAGE_SIZE, "id"),
            "notice": notice(request),
        },
    )


def dag_run(request: Request) -> Response:
    who = require(request, "viewer")
    db = database(request)
    run, nodes = dagruns.run(db, path_id(request, "run"), who.tenant)
    history = dagruns.run_page(db, who.tenant, dag=run["dag_name"], limit=10)
    return render(
        request,
        "web/dag_run.html",
        {
            "run": run,
            "nodes": nodes,
            "drawing": draw(nodes),
            "history": history,
            "notice": notice(request),
        },
    )


def dag_trigger(request: Request) -> Response:
    who = require(request, "operator")
    run_id = dagruns.trigger(database(request), field(request, "name"), tenant=who.tenant)
    return done(f"/dags/runs/{run_id}", "run_started", run_id)


routes = [
    Route("/dags", dag_list, methods=["GET"], name="dags"),
    Route("/dags/trigger", dag_trigger, methods=["POST"]),
    Route("/dags/runs/{id}", dag_run, methods=["GET"], name="dag_run"),
    Route("/dags/{name:path}", dag_detail, methods=["GET"], name="dag"),
]

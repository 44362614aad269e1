"""The processes that serve every tenant: ``/workers`` (host, pid, queues, running, last
heartbeat, state, tenants served) and ``/scheduler`` (leader, standbys, last tick, lag).
They span every tenant (hostnames, pids, queues of all of them), so they are an instance
principal's (any role), 403 for a tenant's (as the REST API's ``/workers`` and
``/scheduler``)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..db import Database
from .access import database, require
from .api_admin import STANDBY_SEEN_SECONDS
from .rendering import render


def workers(request: Request) -> Response:
    require(request, "viewer", instance=True)
    show_all = request.query_params.get("all") == "1"
    db = database(request)
    rows = db.many("worker_list", all=show_all)
    return render(
        request,
        "web/workers.html",
        {"workers": rows, "show_all": show_all, "clock_warn": _clock_warn(db)},
    )


def _clock_warn(db: Database) -> float:
    """Seconds of clock offset above which a process is marked (clock_offset_warn_seconds)."""
    return float((db.one("health_thresholds") or {}).get("clock_offset_warn_seconds", 1.0))


def scheduler(request: Request) -> Response:
    require(request, "viewer", instance=True)
    db = database(request)
    now = db.now()  # ages are the database's: this host's clock may be off
    leader = db.one("scheduler_leader")
    next_due = db.one("scheduler_next_due") or {}
    due = next_due.get("next_fire_at")
    # lag: how long the earliest due fire has waited (0 when nothing is overdue; None
    # when nothing is scheduled at all)
    lag = max(-next_due["seconds"], 0.0) if due else None
    tick_age = (
        (now - leader["last_tick_at"]).total_seconds()
        if leader and leader["last_tick_at"]
        else None
    )
    return render(
        request,
        "web/scheduler.html",
        {
            "leader": leader,
            "standbys": db.many("scheduler_standbys", seconds=STANDBY_SEEN_SECONDS),
            "lag": lag,
            "next_due": due,
            "tick_age": tick_age,
            "now": now,
            "clock_warn": _clock_warn(db),
        },
    )


routes = [
    Route("/workers", workers, methods=["GET"], name="workers"),
    Route("/scheduler", scheduler, methods=["GET"], name="scheduler"),
]

"""The dashboard at ``/``: the tenant's numbers from :func:`pgsched.stats.dashboard` (one
snapshot, so they agree with each other), its open alerts, and, for an instance principal,
what every tenant shares: the live workers and the leader, and their health
(:func:`pgsched.health.check`: the live processes' clock offsets and hosts, the oldest
snapshot holding back cleanup, and their warnings); and the tenant's use of its quotas
(:mod:`pgsched.quota_use`; ``/quotas`` has them all)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .. import alerts, health, quota_use, stats
from ..db import Database
from ..errors import NotFound
from ..lifecycle import ExecutionState
from ..stores import limits
from .access import database, require
from .rendering import render

# Final states in the order the dashboard lists them.
# the order the dashboard shows them in
FINAL_STATES = tuple(
    s.value
    for s in (
        ExecutionState.SUCCEEDED,
        ExecutionState.FAILED,
        ExecutionState.TIMED_OUT,
        ExecutionState.DEAD,
        ExecutionState.CANCELLED,
        ExecutionState.SKIPPED,
    )
)


def _quotas(db: Database, tenant: str) -> list[quota_use.Use] | None:
    """The tenant's use of its quotas; None for a tenant with no row yet (a token may name
    a tenant before its first task registers it)."""
    try:
        return quota_use.uses(limits.tenant_quotas(db, tenant))
    except NotFound:
        return None


def dashboard(request: Request) -> Response:
    who = require(request, "viewer")
    db = database(request)
    numbers = stats.dashboard(db, who.tenant)
    return render(
        request,
        "web/dashboard.html",
        {
            "d": numbers,
            "states": FINAL_STATES,
            "alerts": alerts.active(db, who.tenant, limit=20),
            "health": health.check(db) if who.instance else None,
            "quotas": _quotas(db, who.tenant),
        },
    )


routes = [Route("/", dashboard, methods=["GET"], name="dashboard")]

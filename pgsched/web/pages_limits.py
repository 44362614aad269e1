"""The limits' pages (issue 18): ``/queues`` (each queue of the tenant with its limits,
what runs, is ready and waits in it, its pause and its workers; an operator pauses it
with a reason, resumes it and sets its limits) and ``/quotas`` (the tenant's use of each
quota with a bar; an instance principal sees every tenant's, and an instance admin sets
them).

Changes go through :mod:`pgsched.stores.limits`, one transaction each, recorded as
``user NAME`` or ``token ID`` (``paused_by``). A bad field is shown beside that field of
that queue's (or tenant's) form, with status 422, and nothing is changed.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .. import quota_use
from ..errors import ValidationError
from ..stores import limits
from .access import database, form, require
from .credentials import Principal
from .pages import done, field, notice
from .rendering import render

QUOTA_FIELDS = (
    "max_running",
    "max_starts_per_hour",
    "max_compute_minutes_per_month",
    "max_log_bytes",
)


def by(who: Principal) -> str:
    """Who acts, as ``pgsched.queue.paused_by`` records it: ``user NAME`` or ``token ID``."""
    return f"{who.kind} {who.ref}"


def _queue_name(request: Request) -> str:
    return str(request.path_params["name"])


def optional_int(request: Request, name: str, low: int, high: int) -> int | None:
    """Form field ``name`` as an integer in [low, high], or None when left empty (no
    limit). Raises ValidationError naming it."""
    text = field(request, name, required=False, max_length=20)
    if not text:
        return None
    if not text.isdigit() or not low <= int(text) <= high:
        raise ValidationError(
            name, text, f"must be an integer from {low} to {high}, or empty for none"
        )
    return int(text)


def optional_seconds(request: Request, name: str) -> float | None:
    """Form field ``name`` as seconds above 0 (at most a year), or None when empty."""
    text = field(request, name, required=False, max_length=30)
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value <= limits.MAX_PERIOD_SECONDS:
        raise ValidationError(
            name, text, f"must be seconds above 0, at most {limits.MAX_PERIOD_SECONDS:g}"
        )
    return value


def _queues(
    request: Request,
    *,
    errors: dict[str, str] | None = None,
    failed: str | None = None,
    draft: dict[str, str] | None = None,
    status_code: int = 200,
) -> Response:
    who = require(request, "viewer")
    return render(
        request,
        "web/queues.html",
        {
            "queues": limits.queues(database(request), who.tenant),
            "notice": notice(request),
            "errors": errors or {},
            "failed": failed,
            "draft": draft or {},
        },
        status_code=status_code,
    )


def queue_list(request: Request) -> Response:
    return _queues(request)


def _refused(request: Request, name: str, exc: ValidationError) -> Response:
    """The queues page again, with ``exc`` beside its field of queue ``name``'s forms."""
    draft = _draft(request)
    return _queues(request, errors={exc.field: str(exc)}, failed=name, draft=draft, status_code=422)


def _draft(request: Request) -> dict[str, str]:
    """What the refused form sent (shown again in its fields)."""
    return {k: str(v) for k, v in form(request).items() if k != "csrf_token"}


def queue_pause(request: Request) -> Response:
    who = require(request, "operator")
    name = _queue_name(request)
    try:
        reason = field(request, "reason", required=False, max_length=limits.MAX_REASON) or None
        limits.queue_pause(database(request), who.tenant, name, reason, by=by(who))
    except ValidationError as exc:
        return _refused(request, name, exc)
    return done("/queues", "queue_paused")


def queue_resume(request: Request) -> Response:
    who = require(request, "operator")
    limits.queue_resume(database(request), who.tenant, _queue_name(request), by=by(who))
    return done("/queues", "queue_resumed")


def queue_limits(request: Request) -> Response:
    """Sets all three limits as the form has them: an empty field is no limit."""
    who = require(request, "operator")
    name = _queue_name(request)
    try:
        max_running = optional_int(request, "max_running", 1, limits.INT_MAX)
        rate_limit = optional_int(request, "rate_limit", 1, limits.INT_MAX)
        period = optional_seconds(request, "rate_period_seconds")
        if (rate_limit is None) != (period is None):
            missing = "rate_period_seconds" if period is None else "rate_limit"
            raise ValidationError(
                missing, "", "a rate limit needs both a count and a period (or neither)"
            )
        limits.queue_set_limits(
            database(request),
            who.tenant,
            name,
            max_running=max_running,
            rate_limit=rate_limit,
            rate_period_seconds=period,
        )
    except ValidationError as exc:
        return _refused(request, name, exc)
    return done("/queues", "updated")


def _quotas(
    request: Request,
    *,
    errors: dict[str, str] | None = None,
    failed: str | None = None,
    draft: dict[str, str] | None = None,
    status_code: int = 200,
) -> Response:
    who = require(request, "viewer")
    # an instance principal sees every tenant (row-level security shows a tenant's own)
    rows = database(request).many(
        "limits_web_tenant_usage", tenant=None if who.instance else who.tenant
    )
    tenants: list[dict[str, Any]] = [{**r, "uses": quota_use.uses(r)} for r in rows]
    return render(
        request,
        "web/quotas.html",
        {
            "tenants": tenants,
            "notice": notice(request),
            "errors": errors or {},
            "failed": failed,
            "may_set": who.instance and who.has("admin"),
            "draft": draft or {},
        },
        status_code=status_code,
    )


def quota_list(request: Request) -> Response:
    return _quotas(request)


def quota_set(request: Request) -> Response:
    """Sets the four quotas as the form has them (empty: none) and the weight."""
    require(request, "admin", instance=True)
    tenant = str(request.path_params["tenant"])
    try:
        changes: dict[str, int | None] = {
            f: optional_int(request, f, 0, limits.QUOTAS[f][1]) for f in QUOTA_FIELDS
        }
        text = field(request, "weight", required=False, max_length=20)
        if not text.isdigit() or not 1 <= int(text) <= 100:
            raise ValidationError("weight", text, "must be an integer from 1 to 100 (never none)")
        weight = int(text)
        limits.tenant_set_quotas(database(request), tenant, **changes, weight=weight)
    except ValidationError as exc:
        return _quotas(
            request,
            errors={exc.field: str(exc)},
            failed=tenant,
            draft=_draft(request),
            status_code=422,
        )
    return done("/quotas", "updated")


routes = [
    Route("/queues", queue_list, methods=["GET"], name="queues"),
    Route("/queues/{name}/pause", queue_pause, methods=["POST"]),
    Route("/queues/{name}/resume", queue_resume, methods=["POST"]),
    Route("/queues/{name}/limits", queue_limits, methods=["POST"]),
    Route("/quotas", quota_list, methods=["GET"], name="quotas"),
    Route("/quotas/{tenant}", quota_set, methods=["POST"]),
]

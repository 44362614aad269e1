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

from collections.abc import Callable
from typing import Any, TypeVar

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .. import limits as rules
from .. import quota_use
from ..alerts import webhook_origin
from ..errors import ValidationError
from ..stores import limits, tenants
from .access import database, form, require, tenant_of_path
from .credentials import Principal
from .pages import done, field, notice
from .rendering import render

T = TypeVar("T")

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


def limit_field(request: Request, name: str, parse: Callable[[str, str], T | None]) -> T | None:
    """Form field ``name`` read by ``parse`` (one of :mod:`pgsched.limits`' parsers, as the
    CLI reads its options: ``4``, ``60/1m``, ``100GB``, ``none``); empty is None (no
    limit). Raises ValidationError naming the field and what was typed."""
    text = field(request, name, required=False, max_length=40)
    return parse(name, text) if text else None


def _count(name: str, text: str) -> int | None:
    return rules.parse_count(name, text, 1, rules.INT_MAX)


def shown_queue(row: dict[str, Any]) -> dict[str, Any]:
    """A queue row with its limits as the forms take them: ``rate`` (``60/1m``) and
    ``inputs`` (field: current text, empty for none)."""
    rate = rules.format_rate(row["rate_limit"], row["rate_period_seconds"])
    inputs = {
        "max_running": "" if row["max_running"] is None else str(row["max_running"]),
        "rate_limit": rate or "",
    }
    return {**row, "rate": rate, "inputs": inputs}


def shown_quotas(row: dict[str, Any]) -> dict[str, Any]:
    """A tenant's quota row with its use (:func:`pgsched.quota_use.uses`) and ``inputs``
    (field: current text as the form takes it, ``100GB`` for log bytes; empty for none)."""
    inputs = {f: "" if row[f] is None else str(row[f]) for f in QUOTA_FIELDS + ("weight",)}
    inputs["max_log_bytes"] = rules.format_bytes(row["max_log_bytes"]) or ""
    return {**row, "uses": quota_use.uses(row), "inputs": inputs}


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
            "queues": [shown_queue(q) for q in limits.queues(database(request), who.tenant)],
            "rate_period_range": rules.RATE_PERIOD_RANGE,
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
    """Sets both limits as the form has them, read as ``pgsched queue set`` reads its
    options: ``max_running`` (``4``), ``rate_limit`` (``60/1m``); empty or ``none`` is no
    limit."""
    who = require(request, "operator")
    name = _queue_name(request)
    try:
        max_running = limit_field(request, "max_running", _count)
        rate = limit_field(request, "rate_limit", rules.parse_rate)
        limits.queue_set_limits(
            database(request),
            who.tenant,
            name,
            max_running=max_running,
            rate_limit=rate[0] if rate else None,
            rate_period_seconds=rate[1] if rate else None,
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
    tenants: list[dict[str, Any]] = [shown_quotas(r) for r in rows]
    if not who.has("admin"):  # a webhook's path is often its token: scheme and host only
        for t in tenants:
            if t["alert_webhook"]:
                t["alert_webhook"] = webhook_origin(t["alert_webhook"])
    return render(
        request,
        "web/quotas.html",
        {
            "tenants": tenants,
            "notice": notice(request),
            "errors": errors or {},
            "failed": failed,
            "may_set": who.instance and who.has("admin"),
            "may_set_webhook": who.has("admin"),
            "draft": draft or {},
        },
        status_code=status_code,
    )


def quota_list(request: Request) -> Response:
    return _quotas(request)


def quota_set(request: Request) -> Response:
    """Sets the four quotas and the weight as the form has them, read as ``pgsched
    tenant quota set`` reads its options (``50``, ``100GB``; empty or ``none``: no quota;
    the weight is never none)."""
    require(request, "admin", instance=True)
    tenant = str(request.path_params["tenant"])
    try:
        changes: dict[str, int | None] = {
            f: limit_field(request, f, rules.parse_quota) for f in QUOTA_FIELDS
        }
        weight = limit_field(request, "weight", rules.parse_quota)
        if weight is None:
            raise ValidationError("weight", "", "must be an integer from 1 to 100 (never none)")
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


def quota_webhook_set(request: Request) -> Response:
    """Sets where the tenant's own alerts are POSTed (empty or ``none``: nowhere), as
    ``pgsched tenant webhook set`` does: a tenant's admin for its tenant, an instance admin
    for any (the database refuses another tenant's)."""
    tenant = tenant_of_path(request, require(request, "admin"))
    text = field(request, "alert_webhook", required=False, max_length=2000)
    try:
        url = None if text in ("", "none") else text
        tenants.set_alert_webhook(database(request), tenant, url)
    except ValidationError as exc:
        return _quotas(
            request,
            errors={exc.field: str(exc)},
            failed=tenant,
            draft={"alert_webhook": text},
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
    Route("/quotas/{tenant}/webhook", quota_webhook_set, methods=["POST"]),
]

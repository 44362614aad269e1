"""REST API: queues and quotas (issue 18; :mod:`pgsched.stores.limits`).

``GET /api/v1/queues`` and ``GET /api/v1/queues/{name}`` (a viewer) list the caller's
tenant's queues with their limits, pause and counts; ``POST .../pause`` (body
``{"reason": "..."}``, optional), ``POST .../resume`` and ``PATCH /api/v1/queues/{name}``
(``max_running``, ``rate_limit``, ``rate_period_seconds``; a field left out stays, null
removes the limit) need an operator, and are recorded as ``token ID`` (``paused_by``).
``GET /api/v1/quotas`` (a viewer): the caller's tenant's quotas and use.
``PATCH /api/v1/tenants/{tenant}/quotas`` (an instance admin): set a tenant's quotas.
``GET`` and ``PUT /api/v1/tenants/{tenant}/alert-webhook`` (a viewer, shown the URL's
scheme and host only below admin; an admin, of that tenant or an instance one, and the
database checks which tenant): where the tenant's own alerts are POSTed,
``{"alert_webhook": URL or null}`` (migration 0034).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..alerts import webhook_origin
from ..errors import ValidationError
from ..stores import limits
from ..stores import tenants as tenant_store
from .access import database, require, tenant_of_path
from .api import PREFIX, json_object, only_fields, reply
from .pages_limits import by

QUEUE_LIMITS = frozenset({"max_running", "rate_limit", "rate_period_seconds"})


def _name(request: Request) -> str:
    return str(request.path_params["name"])


def queue_list(request: Request) -> Response:
    who = require(request, "viewer")
    return reply({"items": limits.queues(database(request), who.tenant)})


def queue_get(request: Request) -> Response:
    who = require(request, "viewer")
    return reply(limits.queue(database(request), who.tenant, _name(request)))


def queue_pause(request: Request) -> Response:
    who = require(request, "operator")
    data = json_object(request, required=False)
    only_fields(data, {"reason"})
    reason = data.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise ValidationError("reason", reason, "must be text or null")
    row = limits.queue_pause(
        database(request), who.tenant, _name(request), reason or None, by=by(who)
    )
    return reply(row)


def queue_resume(request: Request) -> Response:
    who = require(request, "operator")
    return reply(limits.queue_resume(database(request), who.tenant, _name(request), by=by(who)))


def queue_update(request: Request) -> Response:
    who = require(request, "operator")
    data = json_object(request)
    only_fields(data, QUEUE_LIMITS)
    if not data:
        raise ValidationError("body", data, f"names no limit ({', '.join(sorted(QUEUE_LIMITS))})")
    changes: dict[str, Any] = {k: data[k] for k in QUEUE_LIMITS if k in data}
    return reply(limits.queue_set_limits(database(request), who.tenant, _name(request), **changes))


def quotas_get(request: Request) -> Response:
    who = require(request, "viewer")
    return reply(limits.tenant_quotas(database(request), who.tenant))


def quotas_update(request: Request) -> Response:
    require(request, "admin", instance=True)
    data = json_object(request)
    only_fields(data, set(limits.QUOTAS))
    if not data:
        raise ValidationError("body", data, f"names no quota ({', '.join(limits.QUOTAS)})")
    tenant = str(request.path_params["tenant"])
    return reply(limits.tenant_set_quotas(database(request), tenant, **data))


def alert_webhook_get(request: Request) -> Response:
    """The URL whole to an admin; to others its scheme and host (its path may be a token)."""
    who = require(request, "viewer")
    row = tenant_store.alert_webhook(database(request), tenant_of_path(request, who))
    if row["alert_webhook"] and not who.has("admin"):
        row = {**row, "alert_webhook": webhook_origin(row["alert_webhook"])}
    return reply(row)


def alert_webhook_put(request: Request) -> Response:
    who = require(request, "admin")
    tenant = tenant_of_path(request, who)
    data = json_object(request)
    only_fields(data, {"alert_webhook"})
    if "alert_webhook" not in data:
        raise ValidationError("alert_webhook", None, "is required: a URL, or null for none")
    url = data["alert_webhook"]
    if url is not None and not isinstance(url, str):
        raise ValidationError("alert_webhook", url, "must be an http(s) URL or null")
    return reply(tenant_store.set_alert_webhook(database(request), tenant, url))


Q = PREFIX + "/queues"
routes = [
    Route(Q, queue_list, methods=["GET"]),
    Route(Q + "/{name}/pause", queue_pause, methods=["POST"]),
    Route(Q + "/{name}/resume", queue_resume, methods=["POST"]),
    Route(Q + "/{name}", queue_get, methods=["GET"]),
    Route(Q + "/{name}", queue_update, methods=["PATCH"]),
    Route(PREFIX + "/quotas", quotas_get, methods=["GET"]),
    Route(PREFIX + "/tenants/{tenant}/quotas", quotas_update, methods=["PATCH"]),
    Route(PREFIX + "/tenants/{tenant}/alert-webhook", alert_webhook_get, methods=["GET"]),
    Route(PREFIX + "/tenants/{tenant}/alert-webhook", alert_webhook_put, methods=["PUT"]),
]

"""The OpenAPI 3.1 document of the REST API, served at ``/api/v1/openapi.json``.

Written by hand next to the routes it describes; ``tests/web/test_openapi.py`` checks that
every ``/api/v1`` route is documented and every documented operation is routed. This module
holds the paths; the schemas they refer to (the document's components) are
:mod:`.openapi_schemas`'s.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .api import PREFIX, reply
from .api_dags import RUN_STATES
from .api_executions import STATES
from .openapi_schemas import ID, NAME, NULLABLE_TEXT, OBJ, SCHEMAS, J, ref


def _query(name: str, schema: J, description: str) -> J:
    return {
        "name": name,
        "in": "query",
        "required": False,
        "schema": schema,
        "description": description,
    }


def _path(name: str, schema: J) -> J:
    return {"name": name, "in": "path", "required": True, "schema": schema}


PAGING = [
    _query(
        "limit",
        {"type": "integer", "minimum": 1, "maximum": 1000, "default": 50},
        "Items per page.",
    ),
    _query("cursor", {"type": "string"}, "next_cursor of the previous page."),
]
TASK_PATH = [_path("name", NAME)]
QUEUE_PATH = [_path("name", {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"})]
ID_PATH = [_path("id", ID)]


def _op(
    summary: str,
    role: str,
    *,
    params: list[J] | None = None,
    body: J | None = None,
    ok: int = 200,
    result: J | None = None,
    body_required: bool = True,
    media: str = "application/json",
    instance: bool = False,
) -> J:
    scope = ", of the instance scope (it spans tenants)" if instance else ""
    errors = {
        "401": "No valid token or session.",
        "403": f"The role is below {role}{' or the scope is a tenant' if instance else ''}.",
        "404": "No such row in the caller's tenant.",
        "409": "A conflict with the current state.",
        "422": "A field is not valid: the message names it and its value.",
    }
    op: J = {
        "summary": summary,
        "description": f"Needs role {role} or above{scope}.",
        "security": [{"bearer": []}],
        "parameters": params or [],
        "responses": {
            str(ok): {"description": "OK", "content": {media: {"schema": result or OBJ}}},
            **{
                code: {
                    "description": text,
                    "content": {"application/json": {"schema": ref("Error")}},
                }
                for code, text in errors.items()
            },
        },
    }
    if body is not None:
        op["requestBody"] = {
            "required": body_required,
            "content": {"application/json": {"schema": body}},
        }
    return op


def _page(item: str) -> J:
    return {
        "type": "object",
        "required": ["items", "next_cursor"],
        "properties": {
            "items": {"type": "array", "items": ref(item)},
            "next_cursor": NULLABLE_TEXT,
        },
    }


EXECUTION_FILTERS = [
    _query("task", {"type": "string"}, "Task name."),
    _query("state", {"enum": list(STATES)}, "State."),
    _query("from", {"type": "string", "format": "date-time"}, "Scheduled at or after (ISO 8601)."),
    _query("to", {"type": "string", "format": "date-time"}, "Scheduled before (ISO 8601)."),
    _query("worker", ID, "Worker id."),
    *PAGING,
]


def _limits() -> J:
    """The queues and quotas (pgsched.web.api_limits)."""
    q = PREFIX + "/queues"
    return {
        q: {
            "get": _op(
                "The tenant's queues: limits, pause, running, ready, waiting, workers",
                "viewer",
                result={
                    "type": "object",
                    "properties": {"items": {"type": "array", "items": ref("Queue")}},
                },
            )
        },
        q + "/{name}": {
            "get": _op("A queue", "viewer", params=QUEUE_PATH, result=ref("Queue")),
            "patch": _op(
                "Set a queue's limits across every worker",
                "operator",
                params=QUEUE_PATH,
                body=ref("QueueLimits"),
                result=ref("Queue"),
            ),
        },
        q + "/{name}/pause": {
            "post": _op(
                "Pause a queue: claims take nothing from it (what runs goes on)",
                "operator",
                params=QUEUE_PATH,
                body=ref("QueuePause"),
                body_required=False,
                result=ref("Queue"),
            )
        },
        q + "/{name}/resume": {
            "post": _op("Resume a queue", "operator", params=QUEUE_PATH, result=ref("Queue"))
        },
        PREFIX + "/quotas": {
            "get": _op("The tenant's quotas beside its use", "viewer", result=ref("Quotas"))
        },
        PREFIX + "/tenants/{tenant}/quotas": {
            "patch": _op(
                "Set a tenant's quotas",
                "admin",
                params=[_path("tenant", NAME)],
                body=ref("QuotasUpdate"),
                result=ref("Quotas"),
                instance=True,
            )
        },
        PREFIX + "/tenants/{tenant}/alert-webhook": {
            "get": _op(
                "Where the tenant's own alerts (a quota reached) are POSTed",
                "viewer",
                params=[_path("tenant", NAME)],
                result=ref("AlertWebhook"),
            ),
            "put": _op(
                "Set where the tenant's own alerts are POSTed (null: nowhere)",
                "admin",
                params=[_path("tenant", NAME)],
                body=ref("AlertWebhookUpdate"),
                result=ref("AlertWebhook"),
            ),
        },
    }


def document() -> J:
    """The OpenAPI 3.1 document (a fresh dict)."""
    t, e = PREFIX + "/tasks", PREFIX + "/executions"
    paths: J = {
        t: {
            "get": _op(
                "List tasks",
                "viewer",
                result=_page("TaskSummary"),
                params=[
                    _query("name", {"type": "string"}, "Name contains."),
                    _query("tag", {"type": "string"}, "Has tag."),
                    _query("state", {"enum": ["active", "paused"]}, "State."),
                    _query("queue", {"type": "string"}, "Queue."),
                    *PAGING,
                ],
            ),
            "post": _op(
                "Create a task", "operator", body=ref("TaskCreate"), ok=201, result=ref("Task")
            ),
        },
        t + "/{name}": {
            "get": _op("Get a task", "viewer", params=TASK_PATH, result=ref("Task")),
            "patch": _op(
                "Update a task's definition",
                "operator",
                params=TASK_PATH,
                body=ref("TaskUpdate"),
                result=ref("Task"),
            ),
            "delete": _op("Soft-delete a task (history stays)", "operator", params=TASK_PATH),
        },
        t + "/{name}/trigger": {
            "post": _op(
                "Run a task now (or at run_at); says whether its "
                "idempotency key deduplicated the run",
                "operator",
                params=TASK_PATH,
                body=ref("Trigger"),
                body_required=False,
                ok=202,
                result=ref("Enqueued"),
            )
        },
        t + "/{name}/pause": {
            "post": _op("Pause a task's schedule", "operator", params=TASK_PATH, result=ref("Task"))
        },
        t + "/{name}/resume": {
            "post": _op(
                "Resume a task's schedule", "operator", params=TASK_PATH, result=ref("Task")
            )
        },
        t + "/{name}/executions": {
            "get": _op(
                "A task's executions, newest first",
                "viewer",
                params=TASK_PATH + PAGING,
                result=_page("Execution"),
            )
        },
        e: {
            "get": _op(
                "List executions, newest first",
                "viewer",
                params=EXECUTION_FILTERS,
                result=_page("Execution"),
            )
        },
        e + "/{id}": {"get": _op("An execution with its attempts", "viewer", params=ID_PATH)},
        e + "/{id}/logs": {
            "get": _op(
                "An execution's log as server-sent events (event line, then event end with the final state); "
                "follows a live execution unless follow=false; resumes after Last-Event-ID (or after=)",
                "viewer",
                params=ID_PATH
                + [
                    _query("follow", {"type": "boolean", "default": True}, "Follow while it runs."),
                    _query(
                        "after",
                        {"type": "string", "pattern": "^[0-9]+:[0-9]+$"},
                        "Start after this line (attempt:seq), as Last-Event-ID does.",
                    ),
                ],
                media="text/event-stream",
                result={"type": "string"},
            )
        },
        e + "/{id}/cancel": {"post": _op("Cancel an execution", "operator", params=ID_PATH)},
        e + "/{id}/retry": {
            "post": _op("Retry an ended execution", "operator", params=ID_PATH, ok=202)
        },
        PREFIX + "/dag-runs": {
            "get": _op(
                "List DAG runs, newest first",
                "viewer",
                result=_page("DagRun"),
                params=[
                    _query("dag", {"type": "string"}, "DAG name."),
                    _query("state", {"enum": list(RUN_STATES)}, "State."),
                    *PAGING,
                ],
            )
        },
        PREFIX + "/dag-runs/{id}": {
            "get": _op("A DAG run with its node states", "viewer", params=ID_PATH)
        },
        PREFIX + "/workers": {
            "get": _op("Running workers (serving every tenant)", "viewer", instance=True)
        },
        PREFIX + "/metrics/summary": {
            "get": _op("The dashboard's figures for the tenant (pgsched.stats.dashboard)", "viewer")
        },
        PREFIX + "/dlq": {
            "get": _op(
                "Dead executions, newest first",
                "viewer",
                params=[
                    _query("task", {"type": "string"}, "Task name."),
                    _query(
                        "limit", {"type": "integer", "minimum": 1, "maximum": 1000}, "How many."
                    ),
                ],
            )
        },
        PREFIX + "/dlq/retry-all": {
            "post": _op(
                "Retry every dead execution, if expected_count matches",
                "operator",
                body=ref("RetryAll"),
            )
        },
        PREFIX + "/dlq/{id}/retry": {
            "post": _op("Retry one dead execution", "operator", params=ID_PATH, ok=202)
        },
        PREFIX + "/dlq/{id}": {
            "delete": _op("Remove a dead execution", "operator", params=ID_PATH)
        },
        PREFIX + "/scheduler": {
            "get": _op("Leader and standby schedulers", "viewer", instance=True)
        },
        PREFIX + "/scheduler/failover": {
            "post": _op(
                "End the leader's session; a standby takes over", "admin", ok=202, instance=True
            )
        },
        PREFIX + "/tokens": {
            "get": _op("The tenant's API tokens (never the tokens)", "admin"),
            "post": _op("Create a token (shown once)", "admin", body=ref("TokenCreate"), ok=201),
        },
        PREFIX + "/tokens/{id}": {
            "delete": _op("Revoke a token; its sessions end", "admin", params=ID_PATH)
        },
        **_limits(),
        PREFIX + "/audit": {
            "get": _op(
                "The tenant's audit events (sign-ins, failed sign-ins, token and user changes, "
                "role refusals, instance actions), newest first",
                "admin",
                params=[
                    _query("action", {"type": "string", "maxLength": 40}, "Only this action."),
                    *PAGING,
                ],
                result=_page("AuditEvent"),
            )
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "pgsched API",
            "version": "1",
            "description": 'Errors: {"error": {"code", "message", "field"}}. Every call acts in '
            "the tenant of its token.",
        },
        "paths": paths,
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


def openapi_json(request: Request) -> Response:
    return reply(document())


routes = [Route(PREFIX + "/openapi.json", openapi_json, methods=["GET"])]

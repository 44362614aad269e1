"""The OpenAPI 3.1 document of the REST API, served at ``/api/v1/openapi.json``.

Written by hand next to the routes it describes; ``tests/web/test_openapi.py`` checks that
every ``/api/v1`` route is documented and every documented operation is routed.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .api import PREFIX, reply
from .api_dags import RUN_STATES
from .api_executions import STATES
from .credentials import ROLES

J = dict[str, Any]
NAME = {"type": "string", "minLength": 1, "maxLength": 200}
ID = {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}
OBJ: J = {"type": "object"}
NULLABLE_TEXT = {"type": ["string", "null"]}


def _ref(name: str) -> J:
    return {"$ref": f"#/components/schemas/{name}"}


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
) -> J:
    errors = {
        "401": "No valid token or session.",
        "403": f"The role is below {role}.",
        "404": "No such row in the caller's tenant.",
        "409": "A conflict with the current state.",
        "422": "A field is not valid: the message names it and its value.",
    }
    op: J = {
        "summary": summary,
        "description": f"Needs role {role} or above.",
        "security": [{"bearer": []}],
        "parameters": params or [],
        "responses": {
            str(ok): {"description": "OK", "content": {media: {"schema": result or OBJ}}},
            **{
                code: {
                    "description": text,
                    "content": {"application/json": {"schema": _ref("Error")}},
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
            "items": {"type": "array", "items": _ref(item)},
            "next_cursor": NULLABLE_TEXT,
        },
    }


TASK_FIELDS: J = {
    "name": {**NAME, "pattern": "^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,199}$"},
    "description": NULLABLE_TEXT,
    "handler_kind": {"enum": ["shell", "argv", "python"]},
    "command": NULLABLE_TEXT,
    "argv": {"type": ["array", "null"], "items": {"type": "string"}},
    "python_target": NULLABLE_TEXT,
    "schedule_kind": {"enum": ["cron", "interval", "once", "none"]},
    "schedule": NULLABLE_TEXT,
    "timezone": {"type": "string"},
    "params": OBJ,
    "env": {"type": "object", "additionalProperties": {"type": "string"}},
    "stdin": NULLABLE_TEXT,
    "timeout_seconds": {"type": ["number", "null"]},
    "max_attempts": {"type": "integer", "minimum": 1, "maximum": 1000},
    "retry_policy": {"enum": ["fixed", "linear", "exponential", "exponential_jitter"]},
    "retry_base_seconds": {"type": "number", "minimum": 0},
    "retry_max_seconds": {"type": "number", "minimum": 0},
    "priority": {"type": "integer", "minimum": 1, "maximum": 10},
    "queue": {"type": "string"},
    "no_retry_exit_codes": {
        "type": "array",
        "items": {"type": "integer", "minimum": 0, "maximum": 255},
    },
    "no_retry_exceptions": {"type": "array", "items": {"type": "string"}},
    "misfire_policy": {"enum": ["skip", "once", "all"]},
    "idempotent": {"type": "boolean"},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 20},
}
# Why a task is paused (read only; all null while it is enabled): paused_by 'scheduler'
# means its schedule could not be computed (pause_reason says why; fixing the schedule
# with PATCH resumes it).
PAUSE_FIELDS: J = {
    "paused_at": {"type": ["string", "null"], "format": "date-time"},
    "paused_by": {"enum": ["operator", "scheduler", None]},
    "pause_reason": NULLABLE_TEXT,
}
SCHEMAS: J = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message", "field"],
                "properties": {
                    "code": {"type": "string"},
                    "message": {"type": "string"},
                    "field": NULLABLE_TEXT,
                },
            }
        },
    },
    "TaskCreate": {
        "type": "object",
        "required": ["name"],
        "additionalProperties": False,
        "properties": {**TASK_FIELDS, "enabled": {"type": "boolean"}},
    },
    "TaskUpdate": {
        "type": "object",
        "additionalProperties": False,
        "properties": {k: v for k, v in TASK_FIELDS.items() if k != "name"},
    },
    "Task": {
        "type": "object",
        "properties": {"id": ID, "tenant": {"type": "string"}, **TASK_FIELDS, **PAUSE_FIELDS},
    },
    "TaskSummary": {
        "type": "object",
        "properties": {"name": NAME, "state": {"enum": ["active", "paused"]}, **PAUSE_FIELDS},
    },
    "Trigger": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "params": OBJ,
            "run_at": {"type": "string", "format": "date-time"},
            "priority": {"type": "integer", "minimum": 1, "maximum": 10},
            "idempotency_key": {
                "type": "string",
                "minLength": 1,
                "maxLength": 200,
                "description": "The task's own key: the same key on another task is another run.",
            },
        },
    },
    "Enqueued": {
        "type": "object",
        "required": ["execution_id", "deduplicated", "dedup_reason", "succeeded_execution_id"],
        "description": "What the trigger did. deduplicated is false when a new execution was "
        "queued. When true, nothing new runs, because of the idempotency key (a "
        "key belongs to one task): dedup_reason 'live': an execution of the task "
        "with the key is queued or running, and execution_id is that one; "
        "'succeeded': the key already succeeded in succeeded_execution_id, and "
        "execution_id is the 'skipped' execution recorded for this call.",
        "properties": {
            "execution_id": ID,
            "deduplicated": {"type": "boolean"},
            "dedup_reason": {"enum": ["live", "succeeded", None]},
            "succeeded_execution_id": {"type": ["integer", "null"], "minimum": 1},
        },
    },
    "Execution": {
        "type": "object",
        "properties": {"id": ID, "task_name": {"type": "string"}, "state": {"enum": list(STATES)}},
    },
    "DagRun": {
        "type": "object",
        "properties": {
            "id": ID,
            "dag_name": {"type": "string"},
            "state": {"enum": list(RUN_STATES)},
        },
    },
    "RetryAll": {
        "type": "object",
        "required": ["expected_count"],
        "additionalProperties": False,
        "properties": {
            "expected_count": {"type": "integer", "minimum": 0},
            "task": {"type": "string"},
        },
    },
    "TokenCreate": {
        "type": "object",
        "required": ["role"],
        "additionalProperties": False,
        "properties": {"role": {"enum": list(ROLES)}, "name": {"type": "string", "maxLength": 200}},
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
                "Create a task", "operator", body=_ref("TaskCreate"), ok=201, result=_ref("Task")
            ),
        },
        t + "/{name}": {
            "get": _op("Get a task", "viewer", params=TASK_PATH, result=_ref("Task")),
            "patch": _op(
                "Update a task's definition",
                "operator",
                params=TASK_PATH,
                body=_ref("TaskUpdate"),
                result=_ref("Task"),
            ),
            "delete": _op("Soft-delete a task (history stays)", "operator", params=TASK_PATH),
        },
        t + "/{name}/trigger": {
            "post": _op(
                "Run a task now (or at run_at); says whether its "
                "idempotency key deduplicated the run",
                "operator",
                params=TASK_PATH,
                body=_ref("Trigger"),
                body_required=False,
                ok=202,
                result=_ref("Enqueued"),
            )
        },
        t + "/{name}/pause": {
            "post": _op(
                "Pause a task's schedule", "operator", params=TASK_PATH, result=_ref("Task")
            )
        },
        t + "/{name}/resume": {
            "post": _op(
                "Resume a task's schedule", "operator", params=TASK_PATH, result=_ref("Task")
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
        PREFIX + "/workers": {"get": _op("Running workers (shared by all tenants)", "viewer")},
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
                body=_ref("RetryAll"),
            )
        },
        PREFIX + "/dlq/{id}/retry": {
            "post": _op("Retry one dead execution", "operator", params=ID_PATH, ok=202)
        },
        PREFIX + "/dlq/{id}": {
            "delete": _op("Remove a dead execution", "operator", params=ID_PATH)
        },
        PREFIX + "/scheduler": {"get": _op("Leader and standby schedulers", "viewer")},
        PREFIX + "/scheduler/failover": {
            "post": _op("End the leader's session; a standby takes over", "admin", ok=202)
        },
        PREFIX + "/tokens": {
            "get": _op("The tenant's API tokens (never the tokens)", "admin"),
            "post": _op("Create a token (shown once)", "admin", body=_ref("TokenCreate"), ok=201),
        },
        PREFIX + "/tokens/{id}": {"delete": _op("Revoke a token", "admin", params=ID_PATH)},
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

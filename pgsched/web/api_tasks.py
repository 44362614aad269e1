"""REST API: tasks (``/api/v1/tasks``). Reads need a viewer, changes an operator. Every
call acts in the caller's tenant; the operations are those of :mod:`pgsched.stores.tasks`."""

from __future__ import annotations

from dataclasses import asdict, fields
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .. import taskspec
from ..errors import ValidationError
from ..stores import executions, tasks
from .access import database, require
from .api import (
    PREFIX,
    choice_arg,
    instant,
    int_arg,
    json_object,
    only_fields,
    page,
    reply,
    text_arg,
)
from .errors import ApiError

# What a client may set: every definition field but the tenant (the caller's), the crontab
# provenance (source, run_as_user: only `pgsched import-crontab` sets them).
CREATABLE = frozenset(f.name for f in fields(taskspec.TaskSpec)) - {
    "tenant",
    "source",
    "run_as_user",
}
_TYPES: dict[str, tuple[type, ...]] = {
    "name": (str,),
    "handler_kind": (str,),
    "command": (str, type(None)),
    "argv": (list, type(None)),
    "python_target": (str, type(None)),
    "schedule_kind": (str,),
    "schedule": (str, type(None)),
    "timezone": (str,),
    "params": (dict,),
    "env": (dict,),
    "stdin": (str, type(None)),
    "timeout_seconds": (int, float, type(None)),
    "max_attempts": (int,),
    "retry_policy": (str,),
    "retry_base_seconds": (int, float),
    "retry_max_seconds": (int, float),
    "priority": (int,),
    "queue": (str,),
    "no_retry_exit_codes": (list,),
    "no_retry_exceptions": (list,),
    "misfire_policy": (str,),
    "idempotent": (bool,),
    "enabled": (bool,),
    "description": (str, type(None)),
    "tags": (list,),
    "sensitive_params": (list,),
    # overlap and unique windows (issue 18, items 5-6)
    "overlap_policy": (str,),
    "unique_policy": (str,),
    "unique_period_seconds": (int, float, type(None)),
    "unique_scope": (str,),
}
_HIDDEN = ("deleted_at",)


def _check_types(data: dict[str, Any]) -> None:
    for key, value in data.items():
        allowed = _TYPES.get(key, (object,))
        if not isinstance(value, allowed) or (isinstance(value, bool) and bool not in allowed):
            names = " or ".join("null" if t is type(None) else t.__name__ for t in allowed)
            raise ValidationError(key, value, f"must be {names}")
        if isinstance(value, str) and "\x00" in value:
            raise ValidationError(key, value, "contains a NUL character")


def _public(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if k not in _HIDDEN}


def _name(request: Request) -> str:
    return str(request.path_params["name"])


def task_list(request: Request) -> Response:
    who = require(request, "viewer")
    limit = int_arg(request, "limit", 50, 1, 1000)
    assert limit is not None
    rows = tasks.page(
        database(request),
        who.tenant,
        name=text_arg(request, "name"),
        tag=text_arg(request, "tag"),
        state=choice_arg(request, "state", ("active", "paused")),
        queue=text_arg(request, "queue"),
        after=text_arg(request, "cursor"),
        limit=limit + 1,
    )
    return page(rows, limit, "name")


def task_create(request: Request) -> Response:
    who = require(request, "operator")
    data = json_object(request)
    only_fields(data, CREATABLE)
    if "name" not in data:
        raise ApiError(422, "name: is required", field="name")
    _check_types(data)
    db = database(request)
    row = tasks.create(db, taskspec.TaskSpec(**data, tenant=who.tenant))
    assert row is not None
    # read back as the caller may see it: env and sensitive params masked (migration 0031)
    return reply(_public(tasks.get(db, row["name"], who.tenant)), 201)


def task_get(request: Request) -> Response:
    who = require(request, "viewer")
    return reply(_public(tasks.get(database(request), _name(request), who.tenant)))


def task_update(request: Request) -> Response:
    who = require(request, "operator")
    data = json_object(request)
    only_fields(data, taskspec.UPDATABLE)
    _check_types(data)
    db = database(request)
    tasks.update(db, _name(request), data, tenant=who.tenant)  # a mask sent back keeps the value
    return reply(_public(tasks.get(db, _name(request), who.tenant)))  # masked as for the caller


def task_delete(request: Request) -> Response:
    who = require(request, "operator")
    dropped = tasks.delete(database(request), _name(request), who.tenant)
    return reply({"name": _name(request), "deleted": True, "pending_dropped": dropped})


def task_trigger(request: Request) -> Response:
    who = require(request, "operator")
    data = json_object(request, required=False)
    only_fields(data, {"params", "run_at", "priority", "idempotency_key"})
    params = data.get("params")
    if params is not None and not isinstance(params, dict):
        raise ValidationError("params", params, "must be a JSON object")
    priority = data.get("priority")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        raise ValidationError("priority", priority, "must be an integer from 1 to 10")
    key = data.get("idempotency_key")
    if key is not None and (not isinstance(key, str) or not 0 < len(key) <= 200 or "\x00" in key):
        raise ValidationError("idempotency_key", key, "must be text of 1 to 200 characters")
    run_at = instant("run_at", data["run_at"]) if data.get("run_at") is not None else None
    done = tasks.enqueue(
        database(request),
        _name(request),
        params=params,
        run_at=run_at,
        priority=priority,
        idempotency_key=key,
        tenant=who.tenant,
        how="api",
    )
    return reply(
        asdict(done), 202
    )  # deduplicated, dedup_reason: what the key did (enqueued.Enqueued)


def task_pause(request: Request) -> Response:
    who = require(request, "operator")
    tasks.pause(database(request), _name(request), who.tenant)
    return reply(_public(tasks.get(database(request), _name(request), who.tenant)))


def task_resume(request: Request) -> Response:
    who = require(request, "operator")
    tasks.resume(database(request), _name(request), who.tenant)
    return reply(_public(tasks.get(database(request), _name(request), who.tenant)))


def task_executions(request: Request) -> Response:
    who = require(request, "viewer")
    db = database(request)
    tasks.get(db, _name(request), who.tenant)  # 404 for a task that is not there
    limit = int_arg(request, "limit", 50, 1, 1000)
    assert limit is not None
    rows = executions.page(
        db,
        who.tenant,
        task=_name(request),
        before=int_arg(request, "cursor", None, 1, 2**63 - 1),
        limit=limit + 1,
    )
    return page(rows, limit, "id")


T = PREFIX + "/tasks"
routes = [
    Route(T, task_list, methods=["GET"]),
    Route(T, task_create, methods=["POST"]),
    Route(T + "/{name:path}/trigger", task_trigger, methods=["POST"]),
    Route(T + "/{name:path}/pause", task_pause, methods=["POST"]),
    Route(T + "/{name:path}/resume", task_resume, methods=["POST"]),
    Route(T + "/{name:path}/executions", task_executions, methods=["GET"]),
    Route(T + "/{name:path}", task_get, methods=["GET"]),
    Route(T + "/{name:path}", task_update, methods=["PATCH"]),
    Route(T + "/{name:path}", task_delete, methods=["DELETE"]),
]

"""REST API: operating pgsched (``/api/v1/workers``, ``metrics/summary``, ``dlq``,
``scheduler``, ``tokens``, ``audit``). Reads need a viewer; DLQ changes an operator; tokens,
the audit log and a forced failover an admin.

Workers and schedulers span every tenant (their hosts, pids, the queues and tenants they
serve): ``/workers``, ``/scheduler`` and ``/scheduler/failover`` need an instance principal
(a failover an instance admin); a tenant's get 403. Everything else is the caller's
tenant's, and ``metrics/summary`` gives the installation-wide figures (leader, standbys,
live workers) to instance principals only.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .. import stats
from ..errors import NotFound
from ..stores import dlq
from . import audit
from .access import actor, database, require
from .api import (
    MAX_ID,
    PREFIX,
    bounded_int,
    id_param,
    int_arg,
    json_object,
    only_fields,
    page,
    reply,
    text_arg,
)
from .credentials import check_role, create_token, list_tokens, parse_duration, revoke_token
from .errors import ApiError
from .reveal_grants import check_grant

STANDBY_SEEN_SECONDS = 10.0  # a standby not seen for this long is not listed

# The figures of the dashboard (stats.Dashboard) that span tenants: the processes.
CLUSTER_FIELDS = frozenset({"leader", "leader_heartbeat_age", "standbys", "workers"})


def workers(request: Request) -> Response:
    require(request, "viewer", instance=True)
    return reply({"items": database(request).many("worker_list", all=False)})


def metrics_summary(request: Request) -> Response:
    """The dashboard's figures (:func:`pgsched.stats.dashboard`) as JSON: the same numbers
    the web page shows, from one snapshot; those that span tenants (CLUSTER_FIELDS) only to
    an instance principal."""
    who = require(request, "viewer")
    figures = stats.dashboard(database(request), who.tenant).as_dict()
    if not who.instance:
        figures = {k: v for k, v in figures.items() if k not in CLUSTER_FIELDS}
    return reply(figures)


def dlq_list(request: Request) -> Response:
    who = require(request, "viewer")
    limit = int_arg(request, "limit", 50, 1, 1000)
    assert limit is not None
    rows = dlq.recent(database(request), who.tenant, task=text_arg(request, "task"), limit=limit)
    return reply({"items": rows})


def dlq_retry_all(request: Request) -> Response:
    """Retry every dead execution (of ``task``), only if there are ``expected_count`` of
    them: what the person confirming saw is what is retried (409 otherwise)."""
    who = require(request, "operator")
    data = json_object(request)
    only_fields(data, {"expected_count", "task"})
    if "expected_count" not in data:
        raise ApiError(
            422,
            "expected_count: is required (the number of dead executions you mean to retry)",
            field="expected_count",
        )
    expected = bounded_int("expected_count", data["expected_count"], 0, 10_000_000)
    task = data.get("task")
    if task is not None and (not isinstance(task, str) or len(task) > 200 or "\x00" in task):
        raise ApiError(422, f"task: {task!r} must be a task name", field="task")
    try:
        return reply(
            {"retried": dlq.retry_all_confirmed(database(request), who.tenant, task, expected)}
        )
    except dlq.CountChanged as exc:
        raise ApiError(
            409,
            f"expected_count: {expected} does not match the {exc.dead} dead executions "
            "now in the dead-letter queue; look again and confirm",
            field="expected_count",
        ) from None


def dlq_retry(request: Request) -> Response:
    who = require(request, "operator")
    execution_id = id_param(request)
    dlq.retry(database(request), execution_id, who.tenant)
    return reply({"id": execution_id, "outcome": "requeued"}, 202)


def dlq_delete(request: Request) -> Response:
    who = require(request, "operator")
    execution_id = id_param(request)
    if not dlq.delete(database(request), execution_id, who.tenant):
        raise NotFound(
            f"execution: {execution_id} is not in the dead-letter queue of tenant {who.tenant!r}"
        )
    return reply({"id": execution_id, "deleted": True})


def scheduler_status(request: Request) -> Response:
    require(request, "viewer", instance=True)
    db = database(request)
    leader = db.one("scheduler_leader")
    return reply(
        {
            "leader": leader if leader and leader["lock_held"] else None,
            "standbys": db.many("scheduler_standbys", seconds=STANDBY_SEEN_SECONDS),
        }
    )


def scheduler_failover(request: Request) -> Response:
    """End the leader's session; a standby takes over (409 when no scheduler leads). An
    instance admin's: the scheduler serves every tenant. Recorded in the audit log (of the
    caller's tenant)."""
    who = require(request, "admin", instance=True)
    db = database(request)
    ended = db.many("api_scheduler_failover")
    pids = [r["pid"] for r in ended if r["ended"]]
    audit.record(
        db,
        actor(request),
        "scheduler_failover",
        tenant=who.tenant,
        target="scheduler leader",
        detail={"ended_backends": pids},
    )
    if not pids:
        raise ApiError(409, "scheduler: no leader holds the lock (no scheduler is running)")
    return reply({"ended_backends": pids}, 202)


def token_list(request: Request) -> Response:
    who = require(request, "admin")
    return reply({"items": list_tokens(database(request), who.tenant)})


def token_create(request: Request) -> Response:
    who = require(request, "admin")
    data = json_object(request)
    only_fields(data, {"role", "name", "expires_in", "instance", "may_reveal"})
    name = data.get("name", "")
    expires = data.get("expires_in")
    instance = data.get("instance", False)
    if not isinstance(instance, bool):
        raise ApiError(422, f"instance: {instance!r} must be true or false", field="instance")
    if instance:
        require(request, "admin", instance=True)  # a tenant's admin cannot widen its reach
    token, row = create_token(
        database(request),
        role=check_role(data.get("role")),
        tenant=who.tenant,
        name=name if isinstance(name, str) else _bad_name(name),
        expires_in=None if expires is None else parse_duration("expires_in", expires),
        by=actor(request),
        instance=instance,
        may_reveal=check_grant(who, data.get("may_reveal", False)),
    )
    return reply({**row, "token": token}, 201)


def _bad_name(name: object) -> str:
    raise ApiError(422, f"name: {name!r} must be text", field="name")


def token_revoke(request: Request) -> Response:
    who = require(request, "admin")
    return reply(revoke_token(database(request), id_param(request), who.tenant, by=actor(request)))


def audit_list(request: Request) -> Response:
    """The caller's tenant's audit events (every tenant's for an instance-wide admin),
    newest first (cursor: the last id shown)."""
    who = require(request, "admin")
    limit = int_arg(request, "limit", 50, 1, 1000)
    assert limit is not None
    rows = audit.events(
        database(request),
        audit.scope(who),
        action=text_arg(request, "action"),
        before=int_arg(request, "cursor", None, 1, MAX_ID),
        limit=limit + 1,
    )
    return page(rows, limit, "id")


routes = [
    Route(PREFIX + "/workers", workers, methods=["GET"]),
    Route(PREFIX + "/metrics/summary", metrics_summary, methods=["GET"]),
    Route(PREFIX + "/dlq", dlq_list, methods=["GET"]),
    Route(PREFIX + "/dlq/retry-all", dlq_retry_all, methods=["POST"]),
    Route(PREFIX + "/dlq/{id}/retry", dlq_retry, methods=["POST"]),
    Route(PREFIX + "/dlq/{id}", dlq_delete, methods=["DELETE"]),
    Route(PREFIX + "/scheduler", scheduler_status, methods=["GET"]),
    Route(PREFIX + "/scheduler/failover", scheduler_failover, methods=["POST"]),
    Route(PREFIX + "/tokens", token_list, methods=["GET"]),
    Route(PREFIX + "/tokens", token_create, methods=["POST"]),
    Route(PREFIX + "/tokens/{id}", token_revoke, methods=["DELETE"]),
    Route(PREFIX + "/audit", audit_list, methods=["GET"]),
]

"""Task pages: ``/tasks`` (search, filters, a create form) and ``/tasks/NAME`` (definition,
next fires, trend chart, execution history, why it is paused), with the actions trigger,
pause, resume, delete and setting the time zone as POST forms (operator role; delete asks
to confirm first). The operations are those of :mod:`pgsched.stores.tasks`, in the principal's
tenant."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from .. import stats, task_rows
from ..errors import ValidationError
from ..schedule import ScheduleKind
from ..stores import tasks
from ..taskspec import TaskSpec
from .access import database, require
from .api import MAX_ID, choice_arg, int_arg, text_arg
from .charts import trend
from .pages import PAGE_SIZE, done, field, keyset, notice
from .pages_executions import executions
from .rendering import render

# the order the form offers them in
SCHEDULE_KINDS = tuple(
    k.value
    for k in (ScheduleKind.NONE, ScheduleKind.CRON, ScheduleKind.INTERVAL, ScheduleKind.ONCE)
)


def _filters(request: Request) -> dict[str, str | None]:
    return {
        "name": text_arg(request, "name"),
        "tag": text_arg(request, "tag"),
        "state": choice_arg(request, "state", ("active", "paused")),
        "queue": text_arg(request, "queue"),
    }


def _list(
    request: Request,
    *,
    error: str | None = None,
    draft: dict[str, str] | None = None,
    status_code: int = 200,
) -> Response:
    who = require(request, "viewer")
    db = database(request)
    filters = _filters(request)
    rows = tasks.page(
        db, who.tenant, after=text_arg(request, "after"), limit=PAGE_SIZE + 1, **filters
    )
    queues, tags = tasks.choices(db, who.tenant)
    return render(
        request,
        "web/tasks.html",
        {
            "page": keyset(request, rows, PAGE_SIZE, "name", "after"),
            "filters": filters,
            "queues": queues,
            "tags": tags,
            "notice": notice(request),
            "error": error,
            "draft": draft or {},
            "kinds": SCHEDULE_KINDS,
        },
        status_code=status_code,
    )


def task_list(request: Request) -> Response:
    return _list(request)


def task_create(request: Request) -> Response:
    """The create form: a shell command with a schedule (none, cron, interval, once), a
    time zone, a queue and tags. A bad value shows the form again with the message."""
    who = require(request, "operator")
    names = ("name", "command", "schedule_kind", "schedule", "timezone", "queue", "tags")
    draft = {n: field(request, n, required=False, max_length=10_000) for n in names}
    kind = draft["schedule_kind"] or "none"
    try:
        if kind not in SCHEDULE_KINDS:
            raise ValidationError(
                "schedule_kind", kind, f"must be one of {', '.join(SCHEDULE_KINDS)}"
            )
        spec = TaskSpec(
            name=draft["name"],
            handler_kind="shell",
            command=draft["command"] or None,
            schedule_kind=kind,
            schedule=draft["schedule"] or None,
            timezone=draft["timezone"] or "UTC",
            queue=draft["queue"] or "default",
            tags=[t for t in draft["tags"].replace(",", " ").split() if t],
            tenant=who.tenant,
        )
        tasks.create(database(request), spec)
    except ValidationError as exc:
        return _list(request, error=str(exc), draft=draft, status_code=422)
    return done(f"/tasks/{spec.name}", "created")


def _back(request: Request, name: str) -> str:
    return "/tasks" if field(request, "back", required=False) == "list" else f"/tasks/{name}"


def task_trigger(request: Request) -> Response:
    who = require(request, "operator")
    name = field(request, "name")
    execution_id = tasks.trigger(database(request), name, tenant=who.tenant, how="manual")
    return done(_back(request, name), "triggered", execution_id)


def task_pause(request: Request) -> Response:
    who = require(request, "operator")
    name = field(request, "name")
    tasks.pause(database(request), name, who.tenant)
    return done(_back(request, name), "paused")


def task_resume(request: Request) -> Response:
    who = require(request, "operator")
    name = field(request, "name")
    tasks.resume(database(request), name, who.tenant)
    return done(_back(request, name), "resumed")


def task_delete(request: Request) -> Response:
    who = require(request, "operator")
    tasks.delete(database(request), field(request, "name"), who.tenant)
    return done("/tasks", "deleted")


def task_timezone(request: Request) -> Response:
    """Set a task's time zone (the fix for a zone the tz database dropped): an update of the
    schedule's zone, which resumes a task the scheduler paused (:func:`pgsched.stores.tasks.update`).
    A bad zone shows the task page again with the message."""
    who = require(request, "operator")
    name = field(request, "name")
    db = database(request)
    before = tasks.get(db, name, who.tenant)
    try:
        after = tasks.update(
            db, name, {"timezone": field(request, "timezone", max_length=200)}, tenant=who.tenant
        )
    except ValidationError as exc:
        return _detail(request, name, error=str(exc), status_code=422)
    return done(
        f"/tasks/{name}", "fixed" if after["enabled"] and not before["enabled"] else "updated"
    )


def _detail(
    request: Request, name: str, *, error: str | None = None, status_code: int = 200
) -> Response:
    who = require(request, "viewer")
    db = database(request)
    row = tasks.get(db, name, who.tenant)
    history = executions(
        db, who.tenant, task=name, before=int_arg(request, "before", None, 1, MAX_ID)
    )
    recent = stats.task_recent(db, name, who.tenant, limit=60)
    # A stored schedule this host cannot compute (a zone the tz database dropped) is shown
    # with the reason and the fix, never as an error page.
    problem = task_rows.schedule_problem(row) if row["schedule_kind"] != "none" else None
    dag_part = row["handler_kind"] == "dag" or (row["source"] or "").startswith("dag:")
    return render(
        request,
        "web/task.html",
        {
            "task": row,
            "fires": stats.next_fires(row, 5, after=db.now())
            if row["schedule_kind"] != "none" and not problem
            else [],
            "problem": problem,
            "fix": task_rows.fix_hint(row) if problem or row["paused_by"] == "scheduler" else None,
            "zone_fixable": problem is not None
            and problem.startswith("timezone:")
            and not dag_part,
            "error": error,
            "page": keyset(request, history, PAGE_SIZE, "id"),
            "chart": trend(list(reversed(recent))),
            "notice": notice(request),
            "confirm_delete": request.query_params.get("confirm") == "delete",
            "dag_part": dag_part,
        },
        status_code=status_code,
    )


def task_detail(request: Request) -> Response:
    return _detail(request, str(request.path_params["name"]))


routes = [
    Route("/tasks", task_list, methods=["GET"], name="tasks"),
    Route("/tasks/create", task_create, methods=["POST"]),
    Route("/tasks/trigger", task_trigger, methods=["POST"]),
    Route("/tasks/pause", task_pause, methods=["POST"]),
    Route("/tasks/resume", task_resume, methods=["POST"]),
    Route("/tasks/delete", task_delete, methods=["POST"]),
    Route("/tasks/timezone", task_timezone, methods=["POST"]),
    Route("/tasks/{name:path}", task_detail, methods=["GET"], name="task"),
]

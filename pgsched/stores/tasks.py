"""The task store: the operations on stored tasks (create, get, update, pause, resume,
enqueue and trigger, delete), each one transaction. What a task is and how it is
validated is :mod:`pgsched.taskspec`; the faces (CLI, web pages, REST API) call these.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import asdict
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from .. import masking, windows
from ..db import Database, Row, Session
from ..enqueued import MAX_KEY_LENGTH, Enqueued
from ..errors import NotFound, ValidationError
from ..jsontext import check_json_object, has_nul
from ..limits import LIMIT_FIELDS, SANDBOX_FIELDS
from ..schedule import Schedule
from ..task_kinds import PausedBy
from ..task_rows import not_a_dag_part, spec_of
from ..taskspec import HANDLER_FIELDS, SCHEDULE_FIELDS, UPDATABLE, TaskSpec
from ..windows import WINDOW_FIELDS, windows_of

#: The fields a viewer is shown masked (migration 0031), where an update that sends the mask
#: back keeps the stored value (:func:`pgsched.masking.restore`).
MASKABLE = ("env", "params")


def insert_values(
    spec: TaskSpec, schedule: Schedule, now: datetime, fired_through: datetime | None = None
) -> dict[str, Any]:
    """Parameters of the ``task_insert`` query, the first fire planned from ``now``
    (the database's clock) and never at or before ``fired_through`` (the stored
    task's ``last_fire_at``, when it is re-planned)."""
    values = asdict(spec)
    plan = schedule.plan(now, fired_through, enabled=spec.enabled)
    values.update(
        schedule_kind=schedule.kind,
        schedule_expr=schedule.expr,
        schedule_anchor=plan.anchor,
        params=Jsonb(spec.params),
        env=Jsonb(spec.env),
        next_fire_at=plan.next_fire_at,
    )
    del values["schedule"]
    return values


def _limits_of(spec: TaskSpec) -> dict[str, Any]:
    return {f: getattr(spec, f) for f in LIMIT_FIELDS}


# what task_sandbox_set writes: its commands' sandbox (0032) and where its Python runs (0035)
_ISOLATION_FIELDS = (*SANDBOX_FIELDS, "python_isolation")


def _sandbox_of(spec: TaskSpec) -> dict[str, Any]:
    return {f: getattr(spec, f) for f in _ISOLATION_FIELDS}


def create(
    db: Database | Session, spec: TaskSpec, *, now: datetime | None = None, if_absent: bool = False
) -> Row | None:
    """Store a new task and plan its first fire from ``now`` (default: the database's
    clock, never this host's). Returns the stored row.

    With ``if_absent``, a live task of the same name is left untouched and None returned;
    otherwise that is a ValidationError on ``name``.
    """
    schedule = spec.validate()
    windows.check_spec(spec, getattr(spec, "concurrency_key", None))
    with db.transaction() as tx:
        row = tx.one("task_insert", **insert_values(spec, schedule, now or tx.now()))
        if row is not None and windows_of(spec) != windows_of(TaskSpec(name=spec.name)):
            row = tx.one("task_windows_set", id=row["id"], **windows_of(spec))
        if row is not None and any(getattr(spec, f) is not None for f in LIMIT_FIELDS):
            row = tx.one("task_limits_set", id=row["id"], **_limits_of(spec))
        if row is not None and any(getattr(spec, f) is not None for f in _ISOLATION_FIELDS):
            row = tx.one("task_sandbox_set", id=row["id"], **_sandbox_of(spec))
        if row is not None and spec.sensitive_params:  # marked keys (0031)
            row = tx.one("task_sensitive_set", id=row["id"], sensitive_params=spec.sensitive_params)
    if row is None and not if_absent:
        raise ValidationError("name", spec.name, f"already exists in tenant {spec.tenant!r}")
    return row


def _as_submitted(exc: ValidationError, changes: dict[str, Any]) -> ValidationError:
    """``exc`` naming what was submitted for a maskable field, not the value it was checked
    as: there the masks sent back were replaced by the stored values (masking.restore), and
    a refusal that quoted it showed an operator shown the masks the values (attack 20)."""
    if exc.field not in MASKABLE:
        return exc
    submitted = changes.get(exc.field)
    if isinstance(submitted, dict) and isinstance(exc.value, str) and exc.value in submitted:
        return exc  # it names a key, which is never masked (a bad variable name)
    return ValidationError(exc.field, changes.get(exc.field, masking.MASK), exc.reason)


def update(
    db: Database,
    name: str,
    changes: dict[str, Any],
    *,
    tenant: str = "default",
    now: datetime | None = None,
    merge_env: bool = False,
    unset_env: Collection[str] = (),
) -> Row:
    """Change the definition of the live task ``name`` and return the stored row.

    ``merge_env``: ``changes["env"]`` is set over the stored env (its other variables
    stay), less the names of ``unset_env`` (a name it lacks is no error); read and written
    in the one transaction, so a concurrent update's variables are not lost.

    ``changes`` maps :class:`TaskSpec` field names (see ``UPDATABLE``) to new values; the
    whole result is validated as at create time. A new ``handler_kind`` clears the other
    kinds' fields. When the schedule, its kind or its time zone changes, the next fire
    time is planned afresh from ``now`` (default: the database's clock; an interval is
    re-anchored at ``now``), never at or before the task's last fire (a re-plan into the
    past cannot run a fire again), and the scheduler is woken; otherwise it is kept.
    Executions already queued are not touched.
    One transaction; the row is locked while it changes.

    Raises NotFound, and ValidationError naming the first bad field and value (unknown
    field names included); nothing is written then.

    Wherever ``env`` or ``params`` hold :data:`pgsched.masking.MASK` (what a viewer was shown
    in place of a sensitive value, migration 0031), the stored value stays: an edit of what
    was shown never writes the mask over a secret (docs/security.md).

    A task the scheduler paused because it could not compute its schedule (a time zone the
    tz database dropped: ``paused_by = 'scheduler'``) is resumed by an update that changes
    its schedule, kind or zone into one that validates: the pause was no one's decision,
    only the consequence of the broken schedule, and the operator who fixes the schedule
    means the task to run on it. A task an operator paused stays paused.
    """
    unknown = sorted(set(changes) - UPDATABLE)
    if unknown:
        raise ValidationError(
            unknown[0],
            changes[unknown[0]],
            f"cannot be updated (updatable: {', '.join(sorted(UPDATABLE))})",
        )
    with db.transaction() as tx:
        row = tx.one("task_get_for_update", name=name, tenant=tenant)
        if row is None:
            raise NotFound(f"task: no task named {name!r} in tenant {tenant!r}")
        not_a_dag_part(row, "updated", "apply")
        spec = spec_of(row)
        if "handler_kind" in changes:
            for kind, attr in HANDLER_FIELDS.items():
                if kind != changes["handler_kind"]:
                    setattr(spec, attr, None)
        for key, value in changes.items():
            if key == "env" and merge_env and isinstance(value, dict):
                value = {**(row["env"] or {}), **value}
                value = {k: v for k, v in value.items() if k not in set(unset_env)}
            if key in MASKABLE:  # a mask shown to a viewer and sent back keeps the stored value
                value = masking.restore(value, row[key])
            setattr(spec, key, value)
        try:
            schedule = spec.validate()
            windows.check_spec(spec, getattr(spec, "concurrency_key", row["concurrency_key"]))
        except ValidationError as exc:
            raise _as_submitted(exc, changes) from None
        replanned = any(getattr(spec, f) != getattr(spec_of(row), f) for f in SCHEDULE_FIELDS)
        if replanned and row["paused_by"] == PausedBy.SCHEDULER:
            spec.enabled = True  # the fix of a schedule the scheduler could not compute resumes it
        values = insert_values(spec, schedule, now or tx.now(), row["last_fire_at"])
        if not replanned:
            values.update(schedule_anchor=row["schedule_anchor"], next_fire_at=row["next_fire_at"])
        stored = tx.one("task_update", id=row["id"], **values)
        if any(f in changes for f in WINDOW_FIELDS):  # overlap and unique windows (0022)
            stored = tx.one("task_windows_set", id=row["id"], **windows_of(spec))
        if any(f in changes for f in LIMIT_FIELDS):  # limits (0021)
            stored = tx.one("task_limits_set", id=row["id"], **_limits_of(spec))
        if any(f in changes for f in _ISOLATION_FIELDS):  # its sandbox, its Python's (0032, 0035)
            stored = tx.one("task_sandbox_set", id=row["id"], **_sandbox_of(spec))
        if "sensitive_params" in changes:  # marked keys (0031)
            stored = tx.one(
                "task_sensitive_set", id=row["id"], sensitive_params=spec.sensitive_params
            )
        if replanned:
            tx.exec("task_wake_scheduler")
        assert stored is not None
        return stored


def get(db: Database | Session, name: str, tenant: str = "default") -> Row:
    """The live task ``name``, as this session may see it (``pgsched.task_v1``: env and
    params masked for a viewer, migration 0031). Raises NotFound."""
    row = db.one("task_get", name=name, tenant=tenant)
    if row is None:
        raise NotFound(f"task: no task named {name!r} in tenant {tenant!r}")
    return row


def list_tasks(
    db: Database | Session,
    tenant: str,
    *,
    search: str | None = None,
    limit: int = 500,
    dag_nodes: bool = False,
) -> list[Row]:
    """Live tasks of ``tenant`` by name (those whose name contains ``search``); the tasks of
    DAG nodes (``DAG.NODE``) only with ``dag_nodes`` (a DAG's own task is always listed).
    env and params are masked for a viewer (migration 0031)."""
    return db.many("task_list", tenant=tenant, search=search, limit=limit, dag_nodes=dag_nodes)


def page(
    db: Database | Session,
    tenant: str,
    *,
    name: str | None = None,
    tag: str | None = None,
    state: str | None = None,
    queue: str | None = None,
    after: str | None = None,
    limit: int = 50,
) -> list[Row]:
    """Up to ``limit`` live tasks of ``tenant`` by name, after the name ``after``: whose name
    contains ``name``, with tag ``tag``, ``state`` ``active`` or ``paused``, on ``queue``,
    each filter optional. DAG nodes' tasks are left out, as in :func:`list_tasks`."""
    return db.many(
        "api_task_list",
        tenant=tenant,
        name=name,
        tag=tag,
        state=state,
        queue=queue,
        after=after,
        limit=limit,
    )


def choices(db: Database | Session, tenant: str) -> tuple[list[str], list[str]]:
    """The queues and the tags ``tenant``'s live tasks use, sorted (the task filters' options)."""
    row = db.one("page_task_choices", tenant=tenant) or {}
    return list(row.get("queues") or []), list(row.get("tags") or [])


def pause(db: Database, name: str, tenant: str = "default") -> None:
    """Stop the task's schedule (pgsched.pause_v1). Raises NotFound."""
    db.one("task_pause", name=name, tenant=tenant)


def resume(db: Database, name: str, tenant: str = "default") -> None:
    """Restart the task's schedule from now; missed fires are skipped (pgsched.resume_v1)."""
    db.one("task_resume", name=name, tenant=tenant)


def enqueue(
    db: Database | Session,
    name: str,
    *,
    params: dict[str, Any] | None = None,
    run_at: datetime | None = None,
    priority: int | None = None,
    idempotency_key: str | None = None,
    tenant: str = "default",
    how: str = "manual",
) -> Enqueued:
    """Enqueue one execution of ``name`` (pgsched.enqueue_v2) and say whether the
    idempotency key deduplicated it (:class:`Enqueued`).

    ``run_at`` (aware, default now) delays it; ``params`` are merged over the task's;
    ``idempotency_key`` (1-200 characters) is the task's own: while an execution of the task
    with it is live, that one is returned; once one has succeeded, a ``skipped`` execution is
    recorded instead of a run. Raises NotFound, ValidationError (params not an object,
    priority out of 1-10, a key empty, too long or holding a NUL).
    """
    if params is not None:
        check_json_object("params", params)
    if priority is not None and not 1 <= priority <= 10:
        raise ValidationError("priority", priority, "must be from 1 (most urgent) to 10")
    if idempotency_key is not None and (
        not isinstance(idempotency_key, str)
        or not 0 < len(idempotency_key) <= MAX_KEY_LENGTH
        or "\x00" in idempotency_key
    ):
        raise ValidationError(
            "idempotency_key",
            idempotency_key,
            f"must be text of 1 to {MAX_KEY_LENGTH} characters without NUL",
        )
    row = db.one(
        "task_trigger",
        name=name,
        tenant=tenant,
        params=Jsonb(params) if params is not None else None,
        run_at=run_at,
        priority=priority,
        idempotency_key=idempotency_key,
        trigger=how,
    )
    assert row is not None
    return Enqueued(
        int(row["execution_id"]),
        bool(row["deduplicated"]),
        row["dedup_reason"],
        row["succeeded_execution_id"],
    )


def trigger(
    db: Database | Session,
    name: str,
    *,
    params: dict[str, Any] | None = None,
    run_at: datetime | None = None,
    priority: int | None = None,
    idempotency_key: str | None = None,
    tenant: str = "default",
    how: str = "manual",
) -> int:
    """Enqueue one execution of ``name``; return its id (:func:`enqueue`'s
    ``execution_id``: with an idempotency key, possibly an execution made earlier).
    Raises what :func:`enqueue` raises."""
    return enqueue(
        db,
        name,
        params=params,
        run_at=run_at,
        priority=priority,
        idempotency_key=idempotency_key,
        tenant=tenant,
        how=how,
    ).execution_id


def enqueue_many(
    db: Database | Session,
    name: str,
    params: list[dict[str, Any]],
    *,
    run_at: datetime | None = None,
    priority: int | None = None,
    tenant: str = "default",
    how: str = "api",
) -> list[int]:
    """Enqueue one execution of ``name`` per element of ``params`` (JSON objects merged
    over the task's params), all at ``run_at`` (aware, default now), in one statement
    (pgsched.enqueue_many_v1). Returns the ids in the order of ``params``. Raises
    NotFound, ValidationError (``params[i]`` not a JSON object, priority out of 1-10)."""
    if priority is not None and not 1 <= priority <= 10:
        raise ValidationError("priority", priority, "must be from 1 (most urgent) to 10")
    # One JSON text for the whole batch (enqueue_many_v2): checked as a whole, and element
    # by element only to name the one at fault.
    try:
        text = (
            json.dumps(params, allow_nan=False)
            if all(isinstance(p, dict) for p in params)
            else None
        )
    except (TypeError, ValueError):
        text = None
    if text is None or has_nul(text):
        for i, p in enumerate(params):
            check_json_object(f"params[{i}]", p)
        raise ValidationError(
            "params", params, "must be a list of JSON objects"
        )  # not reached: one failed
    rows = db.many(
        "task_enqueue_many",
        name=name,
        params=text,
        run_at=run_at,
        priority=priority,
        tenant=tenant,
        trigger=how,
    )
    return [int(r["execution_id"]) for r in rows]


def delete(db: Database, name: str, tenant: str = "default") -> int:
    """Soft-delete ``name``: it stops firing, its pending executions are dropped, its history
    stays. Returns how many pending executions were dropped. Raises NotFound."""
    not_a_dag_part(get(db, name, tenant), "deleted", "delete")
    with db.transaction() as tx:
        row = tx.one("task_soft_delete", name=name, tenant=tenant)
        if row is None:
            raise NotFound(f"task: no task named {name!r} in tenant {tenant!r}")
        return tx.exec("task_drop_pending", id=row["id"])

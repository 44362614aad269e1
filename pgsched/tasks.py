"""Task definitions: validation of a :class:`TaskSpec`, and the operations on stored tasks
(create, get, update, list, pause, resume, enqueue and trigger, delete). Each operation is one
transaction.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from .db import Database, Row, Session, has_nul
from .errors import NotFound, ValidationError
from .retry import POLICIES
from .schedule import Schedule, zone

HANDLER_KINDS = ("shell", "argv", "python")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,199}")
_QUEUE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_PYTHON_TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
_EXCEPTION = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*")
MISFIRE_POLICIES = ("skip", "once", "all")
MAX_ATTEMPTS = 1000
MAX_SECONDS = 366 * 86400.0  # timeouts and retry delays: at most a year


def check_name(field: str, value: object, pattern: re.Pattern[str] = _QUEUE) -> None:
    """Raise ValidationError unless ``value`` is a string matching ``pattern`` whole."""
    if not isinstance(value, str) or not pattern.fullmatch(value):
        rule = ("1-200 characters: letters, digits and . _ : @ / - (starting with a letter or digit)"
                if pattern is _NAME else "1-64 characters: letters, digits and . _ - (starting with a letter or digit)")
        raise ValidationError(field, value, f"must be {rule}")


def check_json_object(field: str, value: object) -> None:
    """Raise ValidationError unless ``value`` is a dict that PostgreSQL's jsonb accepts:
    no NaN or infinities, no NUL characters."""
    if not isinstance(value, dict):
        raise ValidationError(field, value, "must be a JSON object")
    if not value:
        return
    try:
        text = json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(field, value, f"is not valid JSON for PostgreSQL ({exc})") from None
    if has_nul(text):
        raise ValidationError(field, value, "contains a NUL character, which PostgreSQL's jsonb refuses")


def check_seconds(field: str, value: object, *, allow_zero: bool = True) -> None:
    """Raise ValidationError unless ``value`` is a finite number of seconds within a year."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if not ok or not (0 <= value <= MAX_SECONDS) or (value == 0 and not allow_zero):  # type: ignore[operator]
        raise ValidationError(field, value, f"must be a number of seconds from {0 if allow_zero else 'above 0'} "
                              f"to {MAX_SECONDS:g}")


@dataclass
class TaskSpec:
    """What a task is, before it is stored.

    - ``handler_kind``: ``shell`` (``command`` run by ``/bin/sh -c``, or the ``SHELL`` in
      ``env``), ``argv`` (``argv`` executed directly, no shell) or ``python``
      (``python_target`` = ``"package.module:function"``, a function registered with
      ``@app.task``).
    - ``schedule_kind`` / ``schedule``: see :mod:`pgsched.schedule`; ``timezone`` an IANA name.
    - ``timeout_seconds``: wall-clock limit per attempt (None = none).
    - ``max_attempts``, ``retry_policy``, ``retry_base_seconds``, ``retry_max_seconds``:
      see :mod:`pgsched.retry`. ``priority``: 1 (most urgent) to 10; default 5.
    - ``no_retry_exit_codes`` (commands) and ``no_retry_exceptions`` (Python exception
      class names, e.g. ``ValueError``): an attempt that ends so is not retried; the
      execution goes straight to the dead-letter queue.
    - ``misfire_policy``: what a fire missed while no scheduler ran becomes: ``skip``
      (nothing), ``once`` (one catch-up run, the default) or ``all`` (every missed fire,
      capped by the ``misfire_all_cap`` setting).
    - ``idempotent``: runs given no idempotency key get one derived from task, params and
      scheduled time, so a run whose key already succeeded is skipped.
    - ``tags``: labels to find the task by (at most 20, each like a queue name).
    """

    name: str
    handler_kind: str = "shell"
    command: str | None = None
    argv: list[str] | None = None
    python_target: str | None = None
    schedule_kind: str = "none"
    schedule: str | None = None
    timezone: str = "UTC"
    params: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    stdin: str | None = None
    run_as_user: str | None = None
    timeout_seconds: float | None = None
    max_attempts: int = 1
    retry_policy: str = "exponential"
    retry_base_seconds: float = 10.0
    retry_max_seconds: float = 3600.0
    priority: int = 5
    queue: str = "default"
    no_retry_exit_codes: list[int] = field(default_factory=list)
    no_retry_exceptions: list[str] = field(default_factory=list)
    misfire_policy: str = "once"
    idempotent: bool = False
    tenant: str = "default"
    enabled: bool = True
    description: str | None = None
    source: str | None = None
    tags: list[str] = field(default_factory=list)

    def validate(self) -> Schedule:
        """Check every field; return the parsed schedule. Raises ValidationError naming
        the first bad field and its value."""
        check_name("name", self.name, _NAME)
        if self.handler_kind not in HANDLER_KINDS:
            raise ValidationError("handler_kind", self.handler_kind, f"must be one of {', '.join(HANDLER_KINDS)}")
        if self.handler_kind == "shell" and self.command is not None and not isinstance(self.command, str):
            raise ValidationError("command", self.command, f"must be text, not {type(self.command).__name__} "
                                  "(in YAML, quote commands such as true, 42 or yes)")
        if self.handler_kind == "shell" and not (isinstance(self.command, str) and self.command.strip()):
            raise ValidationError("command", self.command, "is required for a shell task")
        if self.handler_kind == "shell" and "\x00" in (self.command or ""):
            raise ValidationError("command", self.command, "contains a NUL character")
        if self.handler_kind == "argv" and not (isinstance(self.argv, list) and self.argv
                                                and all(isinstance(a, str) and "\x00" not in a for a in self.argv)):
            raise ValidationError("argv", self.argv, "must be a non-empty list of strings")
        if self.handler_kind == "python" and not (isinstance(self.python_target, str)
                                                  and _PYTHON_TARGET.fullmatch(self.python_target)):
            raise ValidationError("python_target", self.python_target, "must look like 'package.module:function'")
        check_json_object("params", self.params)
        if not isinstance(self.env, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and k and "=" not in k and "\x00" not in k + v
                for k, v in self.env.items()):
            raise ValidationError("env", self.env, "must map names (no '=') to string values, without NUL characters")
        if self.stdin is not None and (not isinstance(self.stdin, str) or "\x00" in self.stdin):
            raise ValidationError("stdin", self.stdin, "must be text without NUL characters")
        if self.timeout_seconds is not None:
            check_seconds("timeout_seconds", self.timeout_seconds, allow_zero=False)
        if not isinstance(self.max_attempts, int) or not 1 <= self.max_attempts <= MAX_ATTEMPTS:
            raise ValidationError("max_attempts", self.max_attempts, f"must be an integer from 1 to {MAX_ATTEMPTS}")
        if self.retry_policy not in POLICIES:
            raise ValidationError("retry_policy", self.retry_policy, f"must be one of {', '.join(POLICIES)}")
        check_seconds("retry_base_seconds", self.retry_base_seconds)
        check_seconds("retry_max_seconds", self.retry_max_seconds)
        if isinstance(self.priority, bool) or not isinstance(self.priority, int) or not 1 <= self.priority <= 10:
            raise ValidationError("priority", self.priority, "must be an integer from 1 (most urgent) to 10")
        check_name("queue", self.queue)
        check_name("tenant", self.tenant)
        if not isinstance(self.no_retry_exit_codes, list) or not all(
                isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 255 for c in self.no_retry_exit_codes):
            raise ValidationError("no_retry_exit_codes", self.no_retry_exit_codes,
                                  "must be a list of exit codes from 0 to 255")
        if not isinstance(self.no_retry_exceptions, list) or not all(
                isinstance(n, str) and _EXCEPTION.fullmatch(n) for n in self.no_retry_exceptions):
            raise ValidationError("no_retry_exceptions", self.no_retry_exceptions,
                                  "must be a list of exception class names like 'ValueError' or 'mymod.Error'")
        if self.misfire_policy not in MISFIRE_POLICIES:
            raise ValidationError("misfire_policy", self.misfire_policy, f"must be one of {', '.join(MISFIRE_POLICIES)}")
        if not isinstance(self.idempotent, bool):
            raise ValidationError("idempotent", self.idempotent, "must be true or false")
        if not isinstance(self.tags, list) or len(self.tags) > 20:
            raise ValidationError("tags", self.tags, "must be a list of at most 20 tags")
        for tag in self.tags:
            check_name("tags", tag)
        return Schedule.parse(self.schedule_kind, self.schedule, self.timezone)

    def row(self, schedule: Schedule, now: datetime, fired_through: datetime | None = None) -> dict[str, Any]:
        """Parameters of the ``task_insert`` query, the first fire planned from ``now``
        (the database's clock) and never at or before ``fired_through`` (the stored
        task's ``last_fire_at``, when it is re-planned)."""
        values = asdict(self)
        anchor = now.replace(microsecond=0) if schedule.kind == "interval" else None
        planned = Schedule(schedule.kind, schedule.expr, schedule.tz, anchor)
        values.update(
            schedule_kind=schedule.kind, schedule_expr=schedule.expr, schedule_anchor=anchor,
            params=Jsonb(self.params), env=Jsonb(self.env),
            # a paused task is planned when it resumes (from then: missed fires are skipped),
            # but a one-shot's plan is its instant whatever the time: kept through the pause
            next_fire_at=planned.first_fire(now, fired_through) if self.enabled or schedule.kind == "once" else None,
        )
        del values["schedule"]
        return values


def create(db: Database | Session, spec: TaskSpec, *, now: datetime | None = None,
           if_absent: bool = False) -> Row | None:
    """Store a new task and plan its first fire from ``now`` (default: the database's
    clock, never this host's). Returns the stored row.

    With ``if_absent``, a live task of the same name is left untouched and None returned;
    otherwise that is a ValidationError on ``name``.
    """
    schedule = spec.validate()
    row = db.one("task_insert", **spec.row(schedule, now or db.now()))
    if row is None and not if_absent:
        raise ValidationError("name", spec.name, f"already exists in tenant {spec.tenant!r}")
    return row


# What ``update`` may change: every definition field but the identity (name, tenant), the
# crontab provenance (run_as_user, source) and the paused state (pause/resume own it).
UPDATABLE = frozenset(f for f in TaskSpec.__dataclass_fields__
                      if f not in ("name", "tenant", "run_as_user", "source", "enabled"))
_SCHEDULE_FIELDS = ("schedule_kind", "schedule", "timezone")
_HANDLER_FIELDS = {"shell": "command", "argv": "argv", "python": "python_target"}


def spec_of(row: Row) -> TaskSpec:
    """The :class:`TaskSpec` a stored task row was made from."""
    values = {f: row[f] for f in TaskSpec.__dataclass_fields__ if f != "schedule"}
    return TaskSpec(**values, schedule=row["schedule_expr"])


def update(db: Database, name: str, changes: dict[str, Any], *, tenant: str = "default",
           now: datetime | None = None) -> Row:
    """Change the definition of the live task ``name`` and return the stored row.

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

    A task the scheduler paused because it could not compute its schedule (a time zone the
    tz database dropped: ``paused_by = 'scheduler'``) is resumed by an update that changes
    its schedule, kind or zone into one that validates: the pause was no one's decision,
    only the consequence of the broken schedule, and the operator who fixes the schedule
    means the task to run on it. A task an operator paused stays paused.
    """
    unknown = sorted(set(changes) - UPDATABLE)
    if unknown:
        raise ValidationError(unknown[0], changes[unknown[0]],
                              f"cannot be updated (updatable: {', '.join(sorted(UPDATABLE))})")
    with db.transaction() as tx:
        row = tx.one("task_get_for_update", name=name, tenant=tenant)
        if row is None:
            raise NotFound(f"task: no task named {name!r} in tenant {tenant!r}")
        _not_a_dag_part(row, "updated", "apply")
        spec = spec_of(row)
        if "handler_kind" in changes:
            for kind, attr in _HANDLER_FIELDS.items():
                if kind != changes["handler_kind"]:
                    setattr(spec, attr, None)
        for key, value in changes.items():
            setattr(spec, key, value)
        schedule = spec.validate()
        replanned = any(getattr(spec, f) != getattr(spec_of(row), f) for f in _SCHEDULE_FIELDS)
        if replanned and row["paused_by"] == "scheduler":
            spec.enabled = True  # the fix of a schedule the scheduler could not compute resumes it
        values = spec.row(schedule, now or tx.now(), row["last_fire_at"])
        if not replanned:
            values.update(schedule_anchor=row["schedule_anchor"], next_fire_at=row["next_fire_at"])
        stored = tx.one("task_update", id=row["id"], **values)
        if replanned:
            tx.exec("task_wake_scheduler")
        assert stored is not None
        return stored


def _not_a_dag_part(row: Row, done: str, command: str) -> None:
    """Raise ValidationError when the task belongs to a DAG (its schedule task, or a
    node's): those change with the DAG (``pgsched dag apply`` / ``dag delete``)."""
    owner = row["source"][4:] if (row["source"] or "").startswith("dag:") else None
    if row["handler_kind"] == "dag" or owner:
        dag = owner or row["name"]
        raise ValidationError("name", row["name"], f"belongs to DAG {dag!r}: it is {done} with the DAG "
                              f"(pgsched dag {command}{' FILE' if command == 'apply' else ' ' + dag})")


def get(db: Database | Session, name: str, tenant: str = "default") -> Row:
    """The live task ``name``. Raises NotFound."""
    row = db.one("task_get", name=name, tenant=tenant)
    if row is None:
        raise NotFound(f"task: no task named {name!r} in tenant {tenant!r}")
    return row


def schedule_of(row: Row) -> Schedule:
    """The :class:`Schedule` of a stored task row."""
    return Schedule(row["schedule_kind"], row["schedule_expr"], row["timezone"], row["schedule_anchor"])


def schedule_problem(row: Row) -> str | None:
    """Why the fire times of a stored task row cannot be computed on this host (its zone
    is not in the tz database, its stored schedule no longer parses), or None. Faces show
    this instead of upcoming fires."""
    try:
        Schedule.parse(row["schedule_kind"], row["schedule_expr"], row["timezone"])
    except ValidationError as exc:
        return str(exc)
    return None


def fix_hint(row: Row) -> str:
    """How an operator fixes a task paused by the scheduler (one sentence, for every face)."""
    if row["handler_kind"] == "dag" or (row["source"] or "").startswith("dag:"):
        dag = row["source"][4:] if (row["source"] or "").startswith("dag:") else row["name"]
        return f"fix the schedule in DAG {dag!r}'s file and apply it (pgsched dag apply FILE)"
    what = ("--tz ZONE (e.g. --tz Europe/Berlin)" if _bad_zone(row["timezone"])
            else "--cron EXPR, --every INTERVAL or --at INSTANT")
    return (f"give it a schedule that works: pgsched task update {row['name']} {what}, or PATCH "
            f"/api/v1/tasks/{row['name']}" + ("" if row["enabled"] or row["paused_by"] != "scheduler"
                                              else "; that resumes it"))


def _bad_zone(name: str) -> bool:
    try:
        zone(name)
    except ValidationError:
        return True
    return False


def pause(db: Database, name: str, tenant: str = "default") -> None:
    """Stop the task's schedule (pgsched.pause_v1). Raises NotFound."""
    db.one("task_pause", name=name, tenant=tenant)


def resume(db: Database, name: str, tenant: str = "default") -> None:
    """Restart the task's schedule from now; missed fires are skipped (pgsched.resume_v1)."""
    db.one("task_resume", name=name, tenant=tenant)


@dataclass(frozen=True)
class Enqueued:
    """What one enqueue did (pgsched.enqueue_v2).

    ``execution_id``: the execution the call stands for. ``deduplicated``: False when a new
    pending execution was made; True when nothing new will run, because of the
    idempotency key, for ``dedup_reason``: ``"live"`` (an execution of this task with this
    key is pending or running: ``execution_id`` is that one) or ``"succeeded"`` (the key
    already succeeded in ``succeeded_execution_id``: ``execution_id`` is the ``skipped``
    execution recorded for this call). Keys belong to one task: the same key on another
    task deduplicates nothing.
    """

    execution_id: int
    deduplicated: bool = False
    dedup_reason: str | None = None
    succeeded_execution_id: int | None = None


MAX_KEY_LENGTH = 200


def enqueue(db: Database | Session, name: str, *, params: dict[str, Any] | None = None,
            run_at: datetime | None = None, priority: int | None = None,
            idempotency_key: str | None = None, tenant: str = "default",
            how: str = "manual") -> Enqueued:
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
    if idempotency_key is not None and (not isinstance(idempotency_key, str)
                                        or not 0 < len(idempotency_key) <= MAX_KEY_LENGTH
                                        or "\x00" in idempotency_key):
        raise ValidationError("idempotency_key", idempotency_key,
                              f"must be text of 1 to {MAX_KEY_LENGTH} characters without NUL")
    row = db.one("task_trigger", name=name, tenant=tenant,
                 params=Jsonb(params) if params is not None else None, run_at=run_at,
                 priority=priority, idempotency_key=idempotency_key, trigger=how)
    assert row is not None
    return Enqueued(int(row["execution_id"]), bool(row["deduplicated"]), row["dedup_reason"],
                    row["succeeded_execution_id"])


def trigger(db: Database | Session, name: str, *, params: dict[str, Any] | None = None,
            run_at: datetime | None = None, priority: int | None = None,
            idempotency_key: str | None = None, tenant: str = "default",
            how: str = "manual") -> int:
    """Enqueue one execution of ``name``; return its id (:func:`enqueue`'s
    ``execution_id``: with an idempotency key, possibly an execution made earlier).
    Raises what :func:`enqueue` raises."""
    return enqueue(db, name, params=params, run_at=run_at, priority=priority,
                   idempotency_key=idempotency_key, tenant=tenant, how=how).execution_id


def enqueue_many(db: Database | Session, name: str, params: list[dict[str, Any]], *,
                 run_at: datetime | None = None, priority: int | None = None, tenant: str = "default",
                 how: str = "api") -> list[int]:
    """Enqueue one execution of ``name`` per element of ``params`` (JSON objects merged
    over the task's params), all at ``run_at`` (aware, default now), in one statement
    (pgsched.enqueue_many_v1). Returns the ids in the order of ``params``. Raises
    NotFound, ValidationError (``params[i]`` not a JSON object, priority out of 1-10)."""
    if priority is not None and not 1 <= priority <= 10:
        raise ValidationError("priority", priority, "must be from 1 (most urgent) to 10")
    # One JSON text for the whole batch (enqueue_many_v2): checked as a whole, and element
    # by element only to name the one at fault.
    try:
        text = json.dumps(params, allow_nan=False) if all(isinstance(p, dict) for p in params) else None
    except (TypeError, ValueError):
        text = None
    if text is None or has_nul(text):
        for i, p in enumerate(params):
            check_json_object(f"params[{i}]", p)
        raise ValidationError("params", params, "must be a list of JSON objects")  # not reached: one failed
    rows = db.many("task_enqueue_many", name=name, params=text, run_at=run_at,
                   priority=priority, tenant=tenant, trigger=how)
    return [int(r["execution_id"]) for r in rows]


def delete(db: Database, name: str, tenant: str = "default") -> int:
    """Soft-delete ``name``: it stops firing, its pending executions are dropped, its history
    stays. Returns how many pending executions were dropped. Raises NotFound."""
    _not_a_dag_part(get(db, name, tenant), "deleted", "delete")
    with db.transaction() as tx:
        row = tx.one("task_soft_delete", name=name, tenant=tenant)
        if row is None:
            raise NotFound(f"task: no task named {name!r} in tenant {tenant!r}")
        return tx.exec("task_drop_pending", id=row["id"])

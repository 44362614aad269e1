"""What a stored task row says to the faces: the spec and schedule it was made from, why its
fires cannot be computed, how to fix a task the scheduler paused, and the refusal to edit
a DAG's part as a plain task. Pure (no database)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .errors import ValidationError
from .schedule import Schedule, zone
from .task_kinds import HandlerKind, PausedBy
from .taskspec import TaskSpec


def spec_of(row: Mapping[str, Any]) -> TaskSpec:
    """The :class:`TaskSpec` a stored task row was made from."""
    values = {f: row[f] for f in TaskSpec.__dataclass_fields__ if f != "schedule"}
    return TaskSpec(**values, schedule=row["schedule_expr"])


def schedule_of(row: Mapping[str, Any]) -> Schedule:
    """The :class:`Schedule` of a stored task row."""
    return Schedule(
        row["schedule_kind"], row["schedule_expr"], row["timezone"], row["schedule_anchor"]
    )


def schedule_problem(row: Mapping[str, Any]) -> str | None:
    """Why the fire times of a stored task row cannot be computed on this host (its zone
    is not in the tz database, its stored schedule no longer parses), or None. Faces show
    this instead of upcoming fires."""
    try:
        Schedule.parse(row["schedule_kind"], row["schedule_expr"], row["timezone"])
    except ValidationError as exc:
        return str(exc)
    return None


def fix_hint(row: Mapping[str, Any]) -> str:
    """How an operator fixes a task paused by the scheduler (one sentence, for every face)."""
    if row["handler_kind"] == HandlerKind.DAG or (row["source"] or "").startswith("dag:"):
        dag = row["source"][4:] if (row["source"] or "").startswith("dag:") else row["name"]
        return f"fix the schedule in DAG {dag!r}'s file and apply it (pgsched dag apply FILE)"
    what = (
        "--tz ZONE (e.g. --tz Europe/Berlin)"
        if _bad_zone(row["timezone"])
        else "--cron EXPR, --every INTERVAL or --at INSTANT"
    )
    return (
        f"give it a schedule that works: pgsched task update {row['name']} {what}, or PATCH "
        f"/api/v1/tasks/{row['name']}"
        + ("" if row["enabled"] or row["paused_by"] != PausedBy.SCHEDULER else "; that resumes it")
    )


def _bad_zone(name: str) -> bool:
    try:
        zone(name)
    except ValidationError:
        return True
    return False


def not_a_dag_part(row: Mapping[str, Any], done: str, command: str) -> None:
    """Raise ValidationError when the task belongs to a DAG (its schedule task, or a
    node's): those change with the DAG (``pgsched dag apply`` / ``dag delete``)."""
    owner = row["source"][4:] if (row["source"] or "").startswith("dag:") else None
    if row["handler_kind"] == HandlerKind.DAG or owner:
        dag = owner or row["name"]
        raise ValidationError(
            "name",
            row["name"],
            f"belongs to DAG {dag!r}: it is {done} with the DAG "
            f"(pgsched dag {command}{' FILE' if command == 'apply' else ' ' + dag})",
        )

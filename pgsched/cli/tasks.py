"""``pgsched task …``: create, update, list, show, pause, resume, delete and trigger tasks.
The options that define a task are :mod:`pgsched.cli.task_options`."""

from __future__ import annotations

import json
import zoneinfo
from dataclasses import asdict
from typing import Any

import click

from .. import alerts, task_rows
from ..errors import PgschedError
from ..stores import secrets, tasks
from ..taskspec import TaskSpec
from ..windows import UNIQUE_PENDING, UNIQUE_PERIOD
from ..windows import describe as describe_windows
from .output import fmt, parse_json_object, parse_when, print_fields, print_json, table
from .root import Context, main, pass_ctx
from .task_env import check_references, env_update
from .task_options import alerting, definition, definition_options
from .task_sandbox_options import shown_sandbox


@main.group()
def task() -> None:
    """Create, update, list, inspect, pause, resume, trigger and delete tasks."""


@task.command("create")
@click.argument("name")
@definition_options(create=True)
@pass_ctx
def task_create(c: Context, name: str, paused: bool, as_json: bool, **options: Any) -> None:
    """Create task NAME. Give one handler (--command, --argv or --python) and at most one
    schedule (--cron, --every or --at); with none it runs only when triggered."""
    fields = definition(options, lambda: options["tz"], c.db().now)
    if "handler_kind" not in fields:
        raise PgschedError("handler: give one of --command, --argv, --python")
    warnings = _references(c, fields, fields["handler_kind"])
    spec = TaskSpec(name=name, tenant=c.tenant, enabled=not paused, source="cli", **fields)
    hooks = alerting(options)
    with c.db().transaction() as tx:
        row = tasks.create(tx, spec)
        assert row is not None
        if hooks:
            alerts.configure(tx, name, c.tenant, **hooks)
    if as_json:  # as this login may see it: env and sensitive params masked (migration 0031)
        print_json(tasks.get(c.db(), name, c.tenant))
    else:
        click.echo(
            f"created task {row['name']} (id {row['id']}); next fire: {fmt(row['next_fire_at'])}"
        )
    _warn_idle_key(row)
    _warn(warnings)


@task.command("update")
@click.argument("name")
@definition_options(create=False)
@pass_ctx
def task_update(c: Context, name: str, as_json: bool, **options: Any) -> None:
    """Change task NAME: only the options given change; the result is validated as at
    create. A new schedule or time zone is planned from now; queued executions keep
    their definition. Pause and resume with 'task pause' / 'task resume'."""
    db = c.db()
    before = tasks.get(db, name, c.tenant)
    fields = definition(options, lambda: options["tz"] or before["timezone"], db.now)
    hooks = alerting(options)
    merging = env_update(options, fields)
    if not fields and not hooks:
        raise PgschedError("update: nothing to change (give at least one option; see --help)")
    warnings = _references(c, fields, fields.get("handler_kind", before["handler_kind"]))
    row = (
        tasks.update(db, name, fields, tenant=c.tenant, **merging)
        if fields
        else tasks.get(db, name, c.tenant)
    )
    if hooks:
        alerts.configure(db, name, c.tenant, **hooks)
    if as_json:  # as this login may see it: env and sensitive params masked (migration 0031)
        print_json(tasks.get(db, name, c.tenant))
    else:
        resumed = (
            " (resumed: the scheduler had paused it)"
            if row["enabled"] and not before["enabled"]
            else ""
        )
        changed = [f for f in fields if f not in row or row[f] != before.get(f)]
        click.echo(
            f"updated task {row['name']} ({', '.join(sorted([*changed, *hooks])) or 'no change'})"
            f"{resumed}; next fire: {fmt(row['next_fire_at'])}"
        )
    absent = [n for n in merging.get("unset_env", ()) if n not in (before.get("env") or {})]
    if absent:
        click.echo(
            f"note: {', '.join(absent)}: not in task {name}'s environment (nothing to remove)",
            err=True,
        )
    _warn_idle_key(row)
    _warn(warnings)


def _references(c: Context, fields: dict[str, Any], handler_kind: str | None) -> list[str]:
    """Warnings for the secret references given (:func:`.task_env.check_references`;
    ValidationError for a malformed one). The tenant's secrets are listed only when a
    reference is given; a login that may not list them gets no warning of a missing one."""
    if "{{secret:" not in json.dumps([fields.get("env"), fields.get("params")]):
        return []
    check_references(fields, handler_kind, None, c.tenant)  # a malformed one: before a query
    try:
        stored = {r["name"] for r in secrets.list_secrets(c.db(), c.tenant)}
    except PgschedError:
        return check_references(fields, handler_kind, None, c.tenant)
    return check_references(fields, handler_kind, stored, c.tenant)


def _warn(warnings: list[str]) -> None:
    for text in warnings:
        click.echo(f"warning: {text}", err=True)


def _warn_idle_key(row: dict[str, Any]) -> None:
    """A concurrency key with no limit that counts by it limits nothing: say so on stderr
    (a newcomer set --concurrency-key alone and expected one run per key)."""
    key = row.get("concurrency_key")
    if key and row.get("key_max_running") is None and row.get("key_rate_limit") is None:
        click.echo(
            f"warning: task {row['name']}: concurrency key {key!r} limits nothing until "
            "--key-max-running or --key-rate-limit is set",
            err=True,
        )


@task.command("list")
@click.option("--search", help="Only names containing this text.")
@click.option(
    "--dag-nodes",
    is_flag=True,
    help="Also the tasks of DAG nodes (DAG.NODE); a DAG's own task is always listed.",
)
@click.option("--limit", default=500, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def task_list(c: Context, search: str | None, dag_nodes: bool, limit: int, as_json: bool) -> None:
    """List tasks with their schedule and next fire time (UTC)."""
    rows = tasks.list_tasks(c.db(), c.tenant, search=search, limit=limit, dag_nodes=dag_nodes)
    if as_json:
        print_json(rows)
        return
    for r in rows:
        r["schedule"] = f"{r['schedule_kind']} {r['schedule_expr'] or ''}".strip()
        r["state"] = (
            "enabled"
            if r["enabled"]
            else ("paused by scheduler" if r["paused_by"] == "scheduler" else "paused")
        )
        r["handler"] = (
            r["command"]
            or (" ".join(r["argv"]) if r["argv"] else r["python_target"])
            or (f"DAG {r['name']} (pgsched dag show)" if r["handler_kind"] == "dag" else None)
        )
    table(rows, ["name", "state", "schedule", "timezone", "next_fire_at", "queue", "handler"])
    for r in rows:
        if r["paused_by"] == "scheduler":
            click.echo(
                f"warning: {r['name']}: {r['pause_reason']} (since {fmt(r['paused_at'])}); "
                f"{task_rows.fix_hint(r)}"
            )


@task.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def task_show(c: Context, name: str, as_json: bool) -> None:
    """Show one task's definition and its next 5 fire times; for a paused task, why (and,
    when the scheduler paused it, how to fix it)."""
    row = tasks.get(c.db(), name, c.tenant)
    sched = task_rows.schedule_of(row)
    problem = task_rows.schedule_problem(row)
    upcoming = sched.upcoming(c.db().now(), 5) if row["enabled"] and not problem else []
    hooks = {
        k: v for k, v in vars(alerts.alerting_of(c.db(), name, c.tenant)).items() if v is not None
    }
    fix = task_rows.fix_hint(row) if row["paused_by"] == "scheduler" or problem else None
    if as_json:
        print_json(
            {
                **row,
                "upcoming": upcoming,
                "alerting": hooks,
                "schedule_problem": problem,
                "fix": fix,
            }
        )
        return
    sandbox, note = shown_sandbox(row)
    print_fields({**row, **sandbox, **hooks})
    click.echo(f"{'windows':18} {describe_windows(row)}")
    if note:
        click.echo(note)
    if row["paused_by"] == "scheduler":
        click.echo(f"paused by the scheduler at {fmt(row['paused_at'])}: {row['pause_reason']}")
    elif problem:
        click.echo(f"warning: its fire times cannot be computed here: {problem}")
    if fix:
        click.echo(f"to fix it: {fix}")
    if upcoming:
        click.echo("next fires:")
        for t in upcoming:
            local = t.astimezone(zoneinfo.ZoneInfo(row["timezone"]))
            click.echo(f"  {fmt(t)}   {local.isoformat()} {row['timezone']}")


def _simple_task_command(name: str, help_text: str, action: Any, done: str) -> None:
    @task.command(name, help=help_text)
    @click.argument("task_name")
    @pass_ctx
    def command(c: Context, task_name: str) -> None:
        result = action(c.db(), task_name, c.tenant)
        click.echo(done.format(name=task_name, result=result))


_simple_task_command(
    "pause", "Pause a task's schedule (queued executions still run).", tasks.pause, "paused {name}"
)
_simple_task_command(
    "resume",
    "Resume a task's schedule from now (missed fires are skipped).",
    tasks.resume,
    "resumed {name}",
)
_simple_task_command(
    "delete",
    "Delete a task (soft: history stays; pending executions are dropped).",
    tasks.delete,
    "deleted {name} ({result} pending execution(s) dropped)",
)


@task.command("trigger")
@click.argument("name")
@click.option("--params", help="Params for this run, a JSON object (merged over the task's).")
@click.option("--at", help="Run at an ISO 8601 instant or +DURATION (default now).")
@click.option("--priority", type=int, help="1 (most urgent) to 10; default the task's.")
@click.option(
    "--idempotency-key",
    "--key",
    "idempotency_key",
    help="A key of this task's own: while a run of the task with it is queued or "
    "running, a second trigger returns that run; once one has succeeded, a second is "
    "recorded 'skipped', not run. The output says when the trigger was deduplicated.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print JSON: execution_id, deduplicated, dedup_reason (live, succeeded, "
    "unique_pending, unique_period or null), succeeded_execution_id.",
)
@pass_ctx
def task_trigger(
    c: Context,
    name: str,
    params: str | None,
    at: str | None,
    priority: int | None,
    idempotency_key: str | None,
    as_json: bool,
) -> None:
    """Run task NAME now (or --at later), whatever its schedule."""
    done = tasks.enqueue(
        c.db(),
        name,
        params=parse_json_object(params, "params"),
        run_at=parse_when(at, "at", now=c.db().now),
        priority=priority,
        idempotency_key=idempotency_key,
        tenant=c.tenant,
    )
    # an idempotent task derives a key for a run given none (task, params, scheduled time)
    key = repr(idempotency_key) if idempotency_key is not None else "(derived)"
    if as_json:
        print_json(asdict(done))
    elif done.dedup_reason == "live":
        click.echo(
            f"deduplicated: execution {done.execution_id} of {name} with key {key} is "
            "already queued or running; nothing new queued"
        )
    elif done.dedup_reason == UNIQUE_PENDING:
        click.echo(
            f"deduplicated: execution {done.execution_id} of {name} is already queued "
            "(unique window: one pending); nothing new queued"
        )
    elif done.dedup_reason == UNIQUE_PERIOD:
        click.echo(
            f"deduplicated: execution {done.execution_id} of {name} was enqueued within its "
            "unique period; nothing new queued"
        )
    elif done.dedup_reason == "succeeded":
        click.echo(
            f"deduplicated: key {key} of {name} already succeeded in execution "
            f"{done.succeeded_execution_id}; recorded execution {done.execution_id} as "
            "skipped, not run"
        )
    else:
        click.echo(f"execution {done.execution_id} queued for {name}")

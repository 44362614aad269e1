"""``pgsched task …`` and ``pgsched import-crontab``."""

from __future__ import annotations

import json
import shlex
import zoneinfo
from collections.abc import Callable
from dataclasses import asdict
from datetime import datetime
from typing import Any

import click

from .. import alerts, importer, taskspec
from ..errors import PgschedError, ValidationError
from ..retry import POLICIES
from ..schedule import Schedule
from ..stores import tasks
from ..taskspec import MISFIRE_POLICIES, TaskSpec
from .output import fmt, pairs, parse_json_object, parse_when, print_fields, print_json, table
from .root import Context, main, pass_ctx

# --- tasks -----------------------------------------------------------------------------


@main.group()
def task() -> None:
    """Create, update, list, inspect, pause, resume, trigger and delete tasks."""


def _definition_options(create: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The options that define a task, shared by ``task create`` (with defaults) and
    ``task update`` (no defaults: only what is given changes)."""

    def default(value: Any) -> dict[str, Any]:
        return {"default": value, "show_default": True} if create else {}

    options = [
        click.option("--command", help="Shell command (run by /bin/sh -c)."),
        click.option(
            "--argv", help='Command as a JSON list, run without a shell: \'["backup", "--all"]\'.'
        ),
        click.option(
            "--python",
            "python_target",
            help="Python task 'package.module:function' (registered with @app.task).",
        ),
        click.option(
            "--cron",
            help="Cron expression (5 fields, 6 with a leading second, or @daily...; "
            "L, W and # day items), in --tz.",
        ),
        click.option("--every", help="Interval: seconds or 30s, 5m, 1h30m, 1d."),
        click.option("--at", help="One-shot: ISO 8601 instant, or +DURATION from now (+10m)."),
        click.option("--tz", "tz", **default("UTC"), help="IANA time zone of the schedule."),
        click.option("--params", help="Default params, a JSON object."),
        click.option(
            "--env",
            multiple=True,
            help="NAME=VALUE for the command's environment (repeat)"
            + ("." if create else "; replaces the whole environment."),
        ),
        click.option("--stdin", help="Text given to the command on standard input."),
        click.option(
            "--timeout", type=float, help="Seconds an attempt may run (default: no limit)."
        ),
        click.option("--max-attempts", type=int, **default(1)),
        click.option("--retry-policy", type=click.Choice(list(POLICIES)), **default("exponential")),
        click.option(
            "--retry-base", type=float, **default(10.0), help="Base retry delay (seconds)."
        ),
        click.option(
            "--retry-max", type=float, **default(3600.0), help="Longest retry delay (seconds)."
        ),
        click.option("--priority", type=int, **default(5), help="1 (most urgent) to 10."),
        click.option("--queue", **default("default")),
        click.option("--description"),
        click.option(
            "--tags",
            help="Comma list of tags to find the task by (e.g. etl,nightly)"
            + ("." if create else "; replaces the task's tags ('' removes them)."),
        ),
        click.option(
            "--misfire",
            "misfire_policy",
            type=click.Choice(list(MISFIRE_POLICIES)),
            **default("once"),
            help="Fires missed while no scheduler ran: skip them, run once, or run all (capped).",
        ),
        click.option(
            "--no-retry-exit-codes",
            help="Comma list of exit codes that are not retried (e.g. 2,64).",
        ),
        click.option(
            "--no-retry-exceptions",
            help="Comma list of Python exception names that are not retried (e.g. ValueError).",
        ),
        click.option(
            "--idempotent/--not-idempotent",
            default=False if create else None,
            help="Derive an idempotency key from task, params and scheduled time for runs given none.",
        ),
        click.option(
            "--on-failure",
            help="URL POSTed (JSON) when an execution fails, times out or dies, and when "
            "the failure-rate alert opens" + ("" if create else "; '' removes it") + ".",
        ),
        click.option(
            "--on-dlq", help="URL POSTed when an execution goes to the dead-letter queue."
        ),
        click.option("--on-missed", help="URL POSTed when a missed-schedule alert opens."),
        click.option(
            "--missed-after",
            type=float,
            help="Seconds a fire may be late before it counts as missed "
            "(default: the alert_missed_after_seconds setting, 60).",
        ),
        click.option("--json", "as_json", is_flag=True, help="Print the stored task as JSON."),
    ]
    if create:
        options.append(click.option("--paused", is_flag=True, help="Create it paused."))
    else:
        options += [
            click.option(
                "--no-schedule", is_flag=True, help="Remove the schedule (run only when triggered)."
            ),
            click.option("--no-timeout", is_flag=True, help="Remove the timeout."),
            click.option("--no-stdin", is_flag=True, help="Give the command no standard input."),
            click.option("--no-env", is_flag=True, help="Remove the task's environment variables."),
        ]

    def apply(func: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            func = option(func)
        return func

    return apply


_ALERTING = {
    "on_failure": "on_failure",
    "on_dlq": "on_dlq",
    "on_missed": "on_missed",
    "missed_after": "missed_after_seconds",
}


def _alerting(o: dict[str, Any]) -> dict[str, Any]:
    """The webhook and threshold options given (:func:`pgsched.alerts.configure` fields),
    validated. Raises ValidationError naming the field."""
    out = {field: o[key] for key, field in _ALERTING.items() if o.get(key) is not None}
    alerts.Alerting(**{k: (None if v == "" else v) for k, v in out.items()}).validate()
    return out


def _definition(
    o: dict[str, Any], tz_of_at: Callable[[], str], now: Callable[[], datetime]
) -> dict[str, Any]:
    """TaskSpec fields from the given options (None = not given). ``tz_of_at`` gives the
    zone a naive --at is read in, ``now`` the database's clock that --at +DURATION counts
    from. Raises ValidationError for two handlers or schedules."""
    handlers = [k for k in ("command", "argv", "python_target") if o.get(k) is not None]
    if len(handlers) > 1:
        raise ValidationError(
            "handler", handlers, "give exactly one of --command, --argv, --python"
        )
    schedules = [k for k in ("cron", "every", "at", "no_schedule") if o.get(k) not in (None, False)]
    if len(schedules) > 1:
        raise ValidationError(
            "schedule",
            schedules,
            "give at most one of --cron, --every, --at"
            + (", --no-schedule" if "no_schedule" in o else ""),
        )
    if o.get("timeout") is not None and o.get("no_timeout"):
        raise ValidationError("timeout", o["timeout"], "give --timeout or --no-timeout, not both")
    out: dict[str, Any] = {}
    if handlers:
        kind = {"command": "shell", "argv": "argv", "python_target": "python"}[handlers[0]]
        value = o[handlers[0]]
        if kind == "argv":
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                raise ValidationError("argv", value, "must be a JSON list of strings") from None
        out.update(handler_kind=kind, **{handlers[0]: value})
    if schedules:
        which = schedules[0]
        text = o[which] if which in ("cron", "every") else None
        if which == "at":
            once = parse_when(o["at"], "at", tz_of_at(), now=now)
            assert once is not None
            text = once.isoformat()
        out.update(
            schedule_kind={"cron": "cron", "every": "interval", "at": "once"}.get(which, "none"),
            schedule=text,
        )
    if o.get("no_timeout"):
        out["timeout_seconds"] = None
    for flag, value, field_name in (("no_stdin", "stdin", "stdin"), ("no_env", "env", "env")):
        if o.get(flag) and o.get(value):
            raise ValidationError(
                field_name, o[value], f"give --{value} or --{flag.replace('_', '-')}, not both"
            )
        if o.get(flag):
            out[field_name] = None if field_name == "stdin" else {}
    if o.get("stdin") is not None:
        out["stdin"] = o["stdin"]
    renames = {
        "tz": "timezone",
        "timeout": "timeout_seconds",
        "retry_base": "retry_base_seconds",
        "retry_max": "retry_max_seconds",
    }
    if o.get("no_retry_exit_codes") is not None:
        try:
            out["no_retry_exit_codes"] = [
                int(x) for x in o["no_retry_exit_codes"].split(",") if x.strip()
            ]
        except ValueError:
            raise ValidationError(
                "no_retry_exit_codes",
                o["no_retry_exit_codes"],
                "must be a comma list of exit codes like '2,64'",
            ) from None
    if o.get("tags") is not None:
        out["tags"] = [x.strip() for x in o["tags"].split(",") if x.strip()]
    if o.get("no_retry_exceptions") is not None:
        out["no_retry_exceptions"] = [
            x.strip() for x in o["no_retry_exceptions"].split(",") if x.strip()
        ]
    for key in (
        "tz",
        "timeout",
        "max_attempts",
        "retry_policy",
        "retry_base",
        "retry_max",
        "priority",
        "queue",
        "description",
        "misfire_policy",
        "idempotent",
    ):
        if o.get(key) is not None:
            out[renames.get(key, key)] = o[key]
    if o.get("params") is not None:
        out["params"] = parse_json_object(o["params"], "params")
    if o.get("env"):
        out["env"] = pairs(o["env"], "env")
    return out


@task.command("create")
@click.argument("name")
@_definition_options(create=True)
@pass_ctx
def task_create(c: Context, name: str, paused: bool, as_json: bool, **options: Any) -> None:
    """Create task NAME. Give one handler (--command, --argv or --python) and at most one
    schedule (--cron, --every or --at); with none it runs only when triggered."""
    fields = _definition(options, lambda: options["tz"], c.db().now)
    if "handler_kind" not in fields:
        raise PgschedError("handler: give one of --command, --argv, --python")
    spec = TaskSpec(name=name, tenant=c.tenant, enabled=not paused, source="cli", **fields)
    hooks = _alerting(options)
    with c.db().transaction() as tx:
        row = tasks.create(tx, spec)
        assert row is not None
        if hooks:
            alerts.configure(tx, name, c.tenant, **hooks)
    if as_json:
        print_json(row)
    else:
        click.echo(
            f"created task {row['name']} (id {row['id']}); next fire: {fmt(row['next_fire_at'])}"
        )


@task.command("update")
@click.argument("name")
@_definition_options(create=False)
@pass_ctx
def task_update(c: Context, name: str, as_json: bool, **options: Any) -> None:
    """Change task NAME: only the options given change; the result is validated as at
    create. A new schedule or time zone is planned from now; queued executions keep
    their definition. Pause and resume with 'task pause' / 'task resume'."""
    db = c.db()
    before = tasks.get(db, name, c.tenant)
    fields = _definition(options, lambda: options["tz"] or before["timezone"], db.now)
    hooks = _alerting(options)
    if not fields and not hooks:
        raise PgschedError("update: nothing to change (give at least one option; see --help)")
    row = (
        tasks.update(db, name, fields, tenant=c.tenant) if fields else tasks.get(db, name, c.tenant)
    )
    if hooks:
        alerts.configure(db, name, c.tenant, **hooks)
    if as_json:
        print_json(row)
    else:
        resumed = (
            " (resumed: the scheduler had paused it)"
            if row["enabled"] and not before["enabled"]
            else ""
        )
        click.echo(
            f"updated task {row['name']} ({', '.join(sorted([*fields, *hooks]))}){resumed}; "
            f"next fire: {fmt(row['next_fire_at'])}"
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
                f"{taskspec.fix_hint(r)}"
            )


@task.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def task_show(c: Context, name: str, as_json: bool) -> None:
    """Show one task's definition and its next 5 fire times; for a paused task, why (and,
    when the scheduler paused it, how to fix it)."""
    row = tasks.get(c.db(), name, c.tenant)
    sched = taskspec.schedule_of(row)
    problem = taskspec.schedule_problem(row)
    upcoming = sched.upcoming(c.db().now(), 5) if row["enabled"] and not problem else []
    hooks = {
        k: v for k, v in vars(alerts.alerting_of(c.db(), name, c.tenant)).items() if v is not None
    }
    fix = taskspec.fix_hint(row) if row["paused_by"] == "scheduler" or problem else None
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
    print_fields({**row, **hooks})
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
    help="Print JSON: execution_id, deduplicated, dedup_reason (live, succeeded or "
    "null), succeeded_execution_id.",
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
    elif done.dedup_reason == "succeeded":
        click.echo(
            f"deduplicated: key {key} of {name} already succeeded in execution "
            f"{done.succeeded_execution_id}; recorded execution {done.execution_id} as "
            "skipped, not run"
        )
    else:
        click.echo(f"execution {done.execution_id} queued for {name}")


# --- crontab ---------------------------------------------------------------------------


@main.command("import-crontab")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--system",
    is_flag=True,
    help="System crontab (/etc/crontab, /etc/cron.d): has a user column "
    "(stored, never switched to).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print what would be created (schedule, zone, user, command, "
    "stdin, environment), line by line; write nothing.",
)
@click.option(
    "--tz",
    "tz",
    help="IANA zone of entries without CRON_TZ (default: this machine's zone, "
    "which cron here uses).",
)
@click.option(
    "--replace",
    is_flag=True,
    help="Delete tasks imported earlier from a file of this name whose "
    "line is gone or changed (as 'crontab FILE' replaces a table).",
)
@click.option(
    "--allow-problems",
    is_flag=True,
    help="Import the valid entries even when other "
    "lines are refused (exit 0); without it a file with a refused line imports nothing "
    "and exits 1.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def import_crontab(
    c: Context,
    file: str,
    system: bool,
    dry_run: bool,
    tz: str | None,
    replace: bool,
    allow_problems: bool,
    as_json: bool,
) -> None:
    """Import a crontab file: one task per entry; every other line is reported with its
    number and reason, and then nothing is imported and the exit status is 1 (as
    crontab(1) refuses a table with errors) unless --allow-problems. A '%' that looks
    meant as a date format (crontab(5): it ends the command) is warned about. Re-importing
    the same file changes nothing; tasks of lines that changed or went away are reported
    (deleted with --replace)."""
    if tz is not None:
        Schedule.parse("cron", "@daily", tz)  # a clear error for an unknown zone
    db = c.db()  # a dry run reads it too: what exists already, what --replace would delete
    report = importer.import_crontab(
        db,
        file,
        system=system,
        tenant=c.tenant,
        dry_run=dry_run,
        tz=tz,
        replace=replace,
        allow_problems=allow_problems,
    )
    _print_import(report, dry_run, as_json)
    problems = report.count("problem")
    if problems and not allow_problems:
        entries = report.count("would_create") + report.count("unchanged")
        raise PgschedError(
            f"import-crontab: {problems} line(s) of {file} refused (listed above)"
            + ("" if dry_run else "; nothing was imported")
            + f": fix them, or give --allow-problems to import the other {entries} "
            + ("entry" if entries == 1 else "entries")
        )


def _print_import(report: importer.ImportReport, dry_run: bool, as_json: bool) -> None:
    """The report of ``import-crontab``: line by line, then deletions, warnings and notes."""
    if as_json:
        print_json(importer.as_json(report))
    else:
        for line in report.lines:
            if line.action == "problem":
                click.echo(f"skipped {line.reason}")
            else:
                extra = (f" (user {line.user})" if line.user else "") + (
                    f" with {line.stdin.count(chr(10)) + 1} line(s) of stdin"
                    if line.stdin is not None
                    else ""
                )
                zone = "" if line.timezone == "UTC" else f" {line.timezone}"
                click.echo(
                    f"line {line.line_no}: {line.action.replace('_', ' ')} {line.task}  "
                    f"[{line.schedule}{zone}]{extra} {line.command}"
                )
                if dry_run and line.env:
                    click.echo(
                        "    env: " + " ".join(f"{k}={shlex.quote(v)}" for k, v in line.env.items())
                    )
                if dry_run and line.stdin is not None:
                    click.echo(f"    stdin: {line.stdin!r}")
        for name in report.deleted:
            click.echo(f"deleted {name} (its line is gone or changed)")
        for _, warning in report.warnings:
            click.echo(f"warning: {warning}")
        for note in report.notes:
            click.echo(f"note: {note}")
        click.echo(
            f"{report.count('created')} created, {report.count('unchanged')} unchanged, "
            f"{report.count('would_create')} would be created, {report.count('problem')} problem(s)"
        )

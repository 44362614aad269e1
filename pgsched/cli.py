"""The ``pgsched`` command line. It parses flags and prints; the work is done by the
library modules. Errors print one line naming the field and value and exit 1.

The database is ``--dsn``, else ``PGSCHED_DSN``, else the embedded default
(:mod:`pgsched.embedded`).
"""

from __future__ import annotations

import importlib
import json
import math
import os
import signal
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from typing import Any

import click

from . import importer, migrate as migrations, tasks
from .db import Database
from .errors import PgschedError, ValidationError
from .logs import FORMATS, LEVELS, setup as setup_logging
from .schedule import parse_interval, parse_once
from .tasks import TaskSpec


class _Group(click.Group):
    """Turns every pgsched error into one line on stderr and exit status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except PgschedError as exc:
            raise click.ClickException(str(exc)) from None


class Seconds(click.ParamType):
    """A finite number of seconds within [low, high] (click's FloatRange lets NaN through)."""

    name = "seconds"

    def __init__(self, low: float, high: float):
        self.low, self.high = low, high

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(number) or not self.low <= number <= self.high:
            self.fail(f"{value!r} is not between {self.low:g} and {self.high:g} seconds", param, ctx)
        return number


class Context:
    """What every command shares: the DSN (resolved on first use) and the tenant."""

    def __init__(self, dsn: str | None, tenant: str):
        self._dsn = dsn
        self.tenant = tenant
        self._db: Database | None = None

    @property
    def dsn(self) -> str:
        if self._dsn is None:
            from . import embedded

            self._dsn = embedded.start()
        return self._dsn

    def db(self, check_schema: bool = True, max_size: int = 4) -> Database:
        """The pool (opened on first use); refuses a schema behind or ahead of the code."""
        if self._db is None:
            self._db = Database.connect(self.dsn, max_size=max_size)
            if check_schema:
                with self._db.transaction() as tx:
                    migrations.require_current(tx)
        return self._db


pass_ctx = click.make_pass_decorator(Context)


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


def _print_json(data: Any) -> None:
    click.echo(json.dumps(data, default=_json_default, indent=2))


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, (list, dict)):
        return json.dumps(value)
    return str(value)


def _table(rows: list[dict], columns: list[str]) -> None:
    """Print ``rows`` as aligned columns (the header is the column names, upper-cased)."""
    cells = [[_fmt(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c)] + [min(len(row[i]), 60) for row in cells]) for i, c in enumerate(columns)]
    click.echo("  ".join(c.upper().ljust(w) for c, w in zip(columns, widths)).rstrip())
    for row in cells:
        click.echo("  ".join((v if len(v) <= 60 else v[:57] + "...").ljust(w) for v, w in zip(row, widths)).rstrip())


def _parse_when(value: str | None, field: str, tz: str = "UTC") -> datetime | None:
    """An ISO 8601 instant (without an offset: read in ``tz``), or ``+30s`` / ``+5m`` from
    now. Raises ValidationError naming ``field``."""
    if value is None:
        return None
    try:
        if value.startswith("+"):
            return datetime.now(timezone.utc).replace(microsecond=0) + timedelta(seconds=parse_interval(value[1:]))
        return parse_once(value, tz)
    except (ValidationError, OverflowError):
        raise ValidationError(field, value, "is not an ISO 8601 timestamp or +DURATION like +30s "
                              "(durations up to 3650 days)") from None


def _parse_json_object(value: str | None, field: str) -> dict | None:
    if value is None:
        return None
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValidationError(field, value, f"is not valid JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise ValidationError(field, value, "must be a JSON object like '{\"key\": 1}'")
    return data


def _pairs(values: tuple[str, ...], field: str) -> dict[str, str]:
    out = {}
    for item in values:
        key, sep, val = item.partition("=")
        if not sep or not key:
            raise ValidationError(field, item, "must be NAME=VALUE")
        out[key] = val
    return out


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--dsn", envvar="PGSCHED_DSN", help="PostgreSQL connection string. Default: $PGSCHED_DSN, "
              "else the embedded server in the user's data folder.")
@click.option("--tenant", default="default", show_default=True, envvar="PGSCHED_TENANT", help="Tenant to act in.")
@click.option("--log-level", type=click.Choice(LEVELS), default="info", show_default=True,
              help="Log level of long-running processes (stderr).")
@click.option("--log-format", type=click.Choice(FORMATS), default="text", show_default=True,
              help="Log format: text, json (one object per line) or console.")
@click.version_option(package_name="pgsched")
@click.pass_context
def main(ctx: click.Context, dsn: str | None, tenant: str, log_level: str, log_format: str) -> None:
    """pgsched: a task scheduler whose only infrastructure is one PostgreSQL database.

    Start with `pgsched dev`: an embedded PostgreSQL, example tasks, a scheduler and a
    worker in one process.
    """
    if ctx.invoked_subcommand == "dev" and log_format == "text":
        log_format = "console"  # a person is watching
    setup_logging(log_level, log_format)
    ctx.meta["pgsched.logs"] = {"level": log_level, "format": log_format}
    ctx.obj = Context(dsn, tenant)


# --- processes ----------------------------------------------------------------------------

@main.command()
@click.option("--status", "show_status", is_flag=True, help="Only show applied and pending migrations.")
@pass_ctx
def migrate(c: Context, show_status: bool) -> None:
    """Create or upgrade the pgsched schema (safe to run from many processes at once)."""
    if show_status:
        db = c.db(check_schema=False)
        with db.transaction() as tx:
            st = migrations.status(tx)
        click.echo(f"applied: {st.applied or 'none'}  pending: {st.pending or 'none'}"
                   + (f"  unknown (newer): {st.ahead}" if st.ahead else ""))
        return
    applied = migrations.migrate(c.dsn)
    if applied:
        for m in applied:
            click.echo(f"applied {m.version:04d}_{m.name}")
    else:
        click.echo("schema is up to date")


def log_options(command: Any) -> Any:
    """``--log-level`` / ``--log-format`` on a long-running command too (they override the
    group's), so ``pgsched worker --log-level debug`` works as people type it."""
    def apply(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        if value is not None:
            state = ctx.find_root().meta.setdefault("pgsched.logs", {"level": "info", "format": "text"})
            state["level" if param.name == "log_level" else "format"] = value
            setup_logging(state["level"], state["format"])
        return value

    command = click.option("--log-format", type=click.Choice(FORMATS), callback=apply, expose_value=False,
                           help="Log format (overrides the global option).")(command)
    return click.option("--log-level", type=click.Choice(LEVELS), callback=apply, expose_value=False,
                        help="Log level (overrides the global option).")(command)


def _run_until_signal(targets: list[tuple[str, Any]], urgent: list[Any] | None = None) -> None:
    """Run each ``run(stop)`` in a thread until SIGINT/SIGTERM. A second signal calls each
    of ``urgent`` (stop waiting, hand work back) and exits within 10 seconds whatever is
    left. Exits 1 if a part stopped on its own (a bug: its traceback is in the log)."""
    stop = threading.Event()
    signals = []

    def handle(signum: int, _frame: Any) -> None:
        signals.append(signum)
        if len(signals) > 1:
            click.echo("second signal: stopping now, handing running executions back", err=True)
            for call in urgent or []:
                call()
            deadline = threading.Timer(10.0, lambda: os._exit(130))
            deadline.daemon = True  # only a backstop: a clean exit must not wait for it
            deadline.start()
            return
        click.echo(f"{signal.Signals(signum).name}: stopping (again to stop at once)", err=True)
        stop.set()

    signal.signal(signal.SIGINT, handle)
    signal.signal(signal.SIGTERM, handle)
    threads = [threading.Thread(target=run, args=(stop,), name=name, daemon=True) for name, run in targets]
    for t in threads:
        t.start()
    died = False
    while any(t.is_alive() for t in threads):
        for t in threads:
            t.join(0.2)
        if not stop.is_set() and not all(t.is_alive() for t in threads):
            died = True  # one part died: stop the rest rather than run half a process
            click.echo("a part of this process stopped unexpectedly; stopping the rest", err=True)
            stop.set()
    if died:
        sys.exit(1)


@main.command()
@log_options
@click.option("--batch", default=1000, show_default=True, type=click.IntRange(1, 100_000),
              help="Tasks fired per transaction.")
@click.option("--max-sleep", default=5.0, show_default=True, type=Seconds(0.01, 3600),
              help="Longest sleep between ticks (seconds).")
@click.option("--retention-days", default=30, show_default=True, type=click.IntRange(1, 36_500),
              help="Days of execution history kept (at least 1).")
@click.option("--premake-days", default=3, show_default=True, type=click.IntRange(1, 60),
              help="Days of partitions created ahead.")
@pass_ctx
def scheduler(c: Context, batch: int, max_sleep: float, retention_days: int, premake_days: int) -> None:
    """Run a scheduler: fires due tasks while it is leader, stands by otherwise."""
    from .scheduler import Scheduler, SchedulerConfig

    config = SchedulerConfig(batch=batch, max_sleep=max_sleep, retention_days=retention_days,
                             premake_days=premake_days)
    _run_until_signal([("scheduler", Scheduler(c.db(), config).run)])


@main.command()
@log_options
@click.option("--queue", "-q", "queues", multiple=True, default=["default"], show_default=True,
              help="Queue to serve (repeat for several).")
@click.option("--concurrency", "-c", default=4, show_default=True, type=click.IntRange(1, 1024),
              help="Executions run at once.")
@click.option("--poll-interval", default=2.0, show_default=True, type=Seconds(0.05, 3600),
              help="Seconds between polls (besides LISTEN).")
@click.option("--heartbeat-interval", default=5.0, show_default=True, type=Seconds(0.1, 3600),
              help="Seconds between heartbeats.")
@click.option("--kill-grace", default=5.0, show_default=True, type=Seconds(0, 3600),
              help="Seconds between SIGTERM and SIGKILL when a command times out.")
@click.option("--shutdown-timeout", default=30.0, show_default=True, type=Seconds(0, 86400),
              help="Seconds running executions get to finish on SIGTERM before they are handed back.")
@click.option("--pythonpath", "pythonpath", multiple=True, type=click.Path(file_okay=False),
              help="Folder to import Python tasks from (repeat; the current folder is always searched).")
@click.option("--import", "imports", multiple=True, metavar="MODULE",
              help="Import MODULE at start; when given, Python tasks come only from these modules "
                   "(and their submodules). Repeat for several.")
@click.option("--max-output-lines", default=10_000, show_default=True, type=click.IntRange(1, 10_000_000),
              help="Output lines stored per attempt; the rest is counted, not stored.")
@click.option("--max-output-bytes", default=10 * 1024 * 1024, show_default=True,
              type=click.IntRange(1024, 1024 ** 3), help="Output bytes stored per attempt.")
@pass_ctx
def worker(c: Context, queues: tuple[str, ...], concurrency: int, poll_interval: float,
           heartbeat_interval: float, kill_grace: float, shutdown_timeout: float, max_output_lines: int,
           max_output_bytes: int, pythonpath: tuple[str, ...], imports: tuple[str, ...]) -> None:
    """Run a worker: claims and runs executions from its queues. Python tasks
    ('module:function') are imported from the current folder, --pythonpath folders and
    PYTHONPATH."""
    from .worker import PRIVATE_ENV, Worker, WorkerConfig

    for queue in queues:
        tasks.check_name("queue", queue)
    for folder in reversed(("", *pythonpath)):  # "" is the current folder, as for `python -m`
        if folder not in sys.path:
            sys.path.insert(0, folder)
    for module in imports:
        try:
            importlib.import_module(module)
        except BaseException as exc:
            raise PgschedError(f"import: {module!r} cannot be imported: {type(exc).__name__}: {exc}") from None
    config = WorkerConfig(queues=list(queues), concurrency=concurrency, poll_interval=poll_interval,
                          heartbeat_interval=heartbeat_interval, kill_grace=kill_grace,
                          shutdown_timeout=shutdown_timeout, max_output_lines=max_output_lines,
                          max_output_bytes=max_output_bytes, allowed_modules=imports)
    # Executions use a connection only briefly (log flushes, the end of an attempt): a
    # small pool serves many slots. Plus one listener connection.
    db = c.db(max_size=min(concurrency + 2, 10))
    # Tasks run under this process (Python tasks inside it): they get no pgsched settings,
    # and PGSCHED_DSN may carry a password.
    for name in PRIVATE_ENV:
        os.environ.pop(name, None)
    runner = Worker(db, config)
    _run_until_signal([("worker", runner.run)], urgent=[runner.stop_now])


@main.command()
@log_options
@click.option("--examples/--no-examples", default=True, show_default=True, help="Load the example tasks.")
@click.option("--concurrency", default=4, show_default=True)
@click.pass_context
def dev(ctx: click.Context, examples: bool, concurrency: int) -> None:
    """Everything in one process for a first look: embedded PostgreSQL (unless --dsn or
    PGSCHED_DSN), migrations, the example tasks, a scheduler and a worker. Ctrl-C stops."""
    from .dev import run_dev

    run_dev(ctx.obj, examples=examples, concurrency=concurrency, run=_run_until_signal)


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def status(c: Context, as_json: bool) -> None:
    """Leader, workers, queue depth and partition health."""
    from .scheduler import LEADER_LOCK_KEY

    db = c.db()
    leader = db.one("scheduler_leader", key=LEADER_LOCK_KEY)
    workers = db.many("worker_list", all=False)
    queues = db.many("execution_queue_depth")
    strays = {k: v for k, v in (db.one("partition_default_rows") or {}).items() if v}
    partitions = db.one("partition_summary") or {}
    if as_json:
        _print_json({"leader": leader, "workers": workers, "queues": queues, "partitions": partitions,
                     "default_partition_rows": strays})
        return
    if leader and leader["lock_held"]:
        click.echo(f"leader: {leader['holder']} (term {leader['epoch']}, since {_fmt(leader['elected_at'])}, "
                   f"last tick {_fmt(leader['last_tick_at'])})")
    else:
        click.echo("leader: none (no scheduler is running)")
    silent = sum(1 for w in workers if w["presumed_dead"])
    click.echo(f"workers: {len(workers) - silent} running" + (f", {silent} presumed dead" if silent else ""))
    for w in workers:
        click.echo(f"  {w['id']} {w['name']} queues={','.join(w['queues'])} running={w['running']}/"
                   f"{w['concurrency']} heartbeat {w['heartbeat_age_seconds']:.1f}s ago"
                   + ("  (silent for 3 heartbeats: presumed dead)" if w["presumed_dead"] else ""))
    if queues:
        click.echo("queues:")
        _table(queues, ["queue", "ready", "scheduled", "running"])
    else:
        click.echo("queues: empty")
    if partitions.get("daily"):
        click.echo(f"history partitions: {partitions['daily']} daily, {partitions['first_day']} to "
                   f"{partitions['last_day']} (UTC); DEFAULT partitions " + ("NOT empty" if strays else "empty"))
    else:
        click.echo("history partitions: none yet (the leader creates them)")
    if strays:
        click.echo(f"warning: rows outside every daily partition: {strays}")


# --- tasks -----------------------------------------------------------------------------

@main.group()
def task() -> None:
    """Create, list, inspect, pause, resume, trigger and delete tasks."""


@task.command("create")
@click.argument("name")
@click.option("--command", help="Shell command (run by /bin/sh -c).")
@click.option("--argv", help="Command as a JSON list, run without a shell: '[\"backup\", \"--all\"]'.")
@click.option("--python", "python_target", help="Python task 'package.module:function' (registered with @app.task).")
@click.option("--cron", help="Cron expression (5 fields or @daily...), in --tz.")
@click.option("--every", help="Interval: seconds or 30s, 5m, 1h30m, 1d.")
@click.option("--at", help="One-shot: ISO 8601 instant, or +DURATION from now (+10m).")
@click.option("--tz", "tz", default="UTC", show_default=True, help="IANA time zone of the schedule.")
@click.option("--params", help="Default params, a JSON object.")
@click.option("--env", multiple=True, help="NAME=VALUE for the command's environment (repeat).")
@click.option("--timeout", type=float, help="Seconds an attempt may run (default: no limit).")
@click.option("--max-attempts", default=1, show_default=True, type=int)
@click.option("--retry-policy", default="exponential", show_default=True,
              type=click.Choice(["fixed", "linear", "exponential", "exponential_jitter"]))
@click.option("--retry-base", default=10.0, show_default=True, help="Base retry delay (seconds).")
@click.option("--retry-max", default=3600.0, show_default=True, help="Longest retry delay (seconds).")
@click.option("--priority", default=5, show_default=True, type=int, help="1 (most urgent) to 10.")
@click.option("--queue", default="default", show_default=True)
@click.option("--paused", is_flag=True, help="Create it paused.")
@click.option("--description")
@click.option("--json", "as_json", is_flag=True, help="Print the stored task as JSON.")
@pass_ctx
def task_create(c: Context, name: str, command: str | None, argv: str | None, python_target: str | None,
                cron: str | None, every: str | None, at: str | None, tz: str, params: str | None,
                env: tuple[str, ...], timeout: float | None, max_attempts: int, retry_policy: str,
                retry_base: float, retry_max: float, priority: int, queue: str, paused: bool,
                description: str | None, as_json: bool) -> None:
    """Create task NAME. Give one handler (--command, --argv or --python) and at most one
    schedule (--cron, --every or --at); with none it runs only when triggered."""
    handlers = [k for k, v in (("command", command), ("argv", argv), ("python", python_target)) if v is not None]
    if len(handlers) != 1:
        if not handlers:
            raise PgschedError("handler: give one of --command, --argv, --python")
        raise ValidationError("handler", handlers, "give exactly one of --command, --argv, --python")
    schedules = [k for k, v in (("cron", cron), ("every", every), ("at", at)) if v is not None]
    if len(schedules) > 1:
        raise ValidationError("schedule", schedules, "give at most one of --cron, --every, --at")
    argv_list = None
    if argv:
        try:
            argv_list = json.loads(argv)
        except json.JSONDecodeError:
            raise ValidationError("argv", argv, "must be a JSON list of strings") from None
    once = _parse_when(at, "at", tz)
    kind = {"cron": "cron", "every": "interval", "at": "once"}.get(schedules[0] if schedules else "", "none")
    spec = TaskSpec(name=name, handler_kind={"command": "shell", "argv": "argv", "python": "python"}[handlers[0]],
                    command=command, argv=argv_list, python_target=python_target, schedule_kind=kind,
                    schedule=cron if cron is not None else every if every is not None else
                    (once.isoformat() if once else None), timezone=tz,
                    params=_parse_json_object(params, "params") or {}, env=_pairs(env, "env"),
                    timeout_seconds=timeout, max_attempts=max_attempts, retry_policy=retry_policy,
                    retry_base_seconds=retry_base, retry_max_seconds=retry_max, priority=priority,
                    queue=queue, tenant=c.tenant, enabled=not paused, description=description, source="cli")
    row = tasks.create(c.db(), spec)
    assert row is not None
    if as_json:
        _print_json(row)
    else:
        click.echo(f"created task {row['name']} (id {row['id']}); next fire: {_fmt(row['next_fire_at'])}")


@task.command("list")
@click.option("--search", help="Only names containing this text.")
@click.option("--limit", default=500, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def task_list(c: Context, search: str | None, limit: int, as_json: bool) -> None:
    """List tasks with their schedule and next fire time (UTC)."""
    rows = c.db().many("task_list", tenant=c.tenant, search=search, limit=limit)
    if as_json:
        _print_json(rows)
        return
    for r in rows:
        r["schedule"] = f"{r['schedule_kind']} {r['schedule_expr'] or ''}".strip()
        r["state"] = "enabled" if r["enabled"] else "paused"
        r["handler"] = r["command"] or (" ".join(r["argv"]) if r["argv"] else r["python_target"])
    _table(rows, ["name", "state", "schedule", "timezone", "next_fire_at", "queue", "handler"])


@task.command("show")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def task_show(c: Context, name: str, as_json: bool) -> None:
    """Show one task's definition and its next 5 fire times."""
    row = tasks.get(c.db(), name, c.tenant)
    sched = tasks.schedule_of(row)
    upcoming = sched.upcoming(datetime.now(timezone.utc), 5) if row["enabled"] else []
    if as_json:
        _print_json({**row, "upcoming": upcoming})
        return
    for key, value in row.items():
        if value not in (None, {}, []):
            click.echo(f"{key:18} {_fmt(value)}")
    if upcoming:
        click.echo("next fires:")
        for t in upcoming:
            local = t.astimezone(__import__("zoneinfo").ZoneInfo(row["timezone"]))
            click.echo(f"  {_fmt(t)}   {local.isoformat()} {row['timezone']}")


def _simple_task_command(name: str, help_text: str, action: Any, done: str) -> None:
    @task.command(name, help=help_text)
    @click.argument("task_name")
    @pass_ctx
    def command(c: Context, task_name: str) -> None:
        result = action(c.db(), task_name, c.tenant)
        click.echo(done.format(name=task_name, result=result))


_simple_task_command("pause", "Pause a task's schedule (queued executions still run).", tasks.pause, "paused {name}")
_simple_task_command("resume", "Resume a task's schedule from now (missed fires are skipped).",
                     tasks.resume, "resumed {name}")
_simple_task_command("delete", "Delete a task (soft: history stays; pending executions are dropped).",
                     tasks.delete, "deleted {name} ({result} pending execution(s) dropped)")


@task.command("trigger")
@click.argument("name")
@click.option("--params", help="Params for this run, a JSON object (merged over the task's).")
@click.option("--at", help="Run at an ISO 8601 instant or +DURATION (default now).")
@click.option("--priority", type=int, help="1 (most urgent) to 10; default the task's.")
@click.option("--idempotency-key", help="A second trigger with the same key creates nothing.")
@click.option("--json", "as_json", is_flag=True)
@pass_ctx
def task_trigger(c: Context, name: str, params: str | None, at: str | None, priority: int | None,
                 idempotency_key: str | None, as_json: bool) -> None:
    """Run task NAME now (or --at later), whatever its schedule."""
    ident = tasks.trigger(c.db(), name, params=_parse_json_object(params, "params"), run_at=_parse_when(at, "at"),
                          priority=priority, idempotency_key=idempotency_key, tenant=c.tenant)
    if as_json:
        _print_json({"execution_id": ident})
    else:
        click.echo(f"execution {ident} queued for {name}")


# --- executions ------------------------------------------------------------------------

@main.group()
def execution() -> None:
    """List and inspect executions and their logs."""


@execution.command("list")
@click.option("--task", "task_name", help="Only this task's executions.")
@click.option("--state", type=click.Choice(["pending", "running", "succeeded", "failed", "timed_out",
                                            "cancelled", "skipped", "dead"]))
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def execution_list(c: Context, task_name: str | None, state: str | None, limit: int, as_json: bool) -> None:
    """Executions, newest first."""
    rows = c.db().many("execution_list", tenant=c.tenant, task=task_name, state=state, limit=limit)
    if as_json:
        _print_json(rows)
        return
    _table(rows, ["id", "task_name", "state", "trigger", "scheduled_at", "attempt", "exit_code", "duration_seconds"])


@execution.command("show")
@click.argument("execution_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def execution_show(c: Context, execution_id: int, as_json: bool) -> None:
    """One execution with its attempts."""
    db = c.db()
    row = db.one("execution_get", id=execution_id, tenant=c.tenant)
    if row is None:
        raise PgschedError(f"execution: no execution {execution_id} in tenant {c.tenant!r}")
    attempts = db.many("execution_attempts", id=execution_id)
    if as_json:
        _print_json({**row, "attempts": attempts})
        return
    for key, value in row.items():
        if value not in (None, {}, []):
            click.echo(f"{key:18} {_fmt(value)}")
    if attempts:
        click.echo("attempts:")
        _table(attempts, ["attempt", "state", "worker_id", "started_at", "duration_seconds", "exit_code", "error"])


@execution.command("logs")
@click.argument("execution_id", type=int)
@click.option("--follow", "-f", is_flag=True, help="Keep printing new lines until the execution ends.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON lines.")
@pass_ctx
def execution_logs(c: Context, execution_id: int, follow: bool, as_json: bool) -> None:
    """Captured stdout/stderr of an execution, with times."""
    db = c.db()
    if db.one("execution_get", id=execution_id, tenant=c.tenant) is None:
        raise PgschedError(f"execution: no execution {execution_id} in tenant {c.tenant!r}")
    after = (0, 0)
    while True:
        # The state is read before the lines: a line flushed in between is printed on the
        # next pass, never lost.
        current = db.one("execution_get", id=execution_id, tenant=c.tenant)
        for line in db.many("execution_logs", id=execution_id, after_attempt=after[0], after_seq=after[1]):
            after = (line["attempt"], line["seq"])
            if as_json:
                click.echo(json.dumps(line, default=_json_default))
            else:
                click.echo(f"{_fmt(line['logged_at'])} [{line['attempt']}] {line['stream']}: {line['line']}")
        if not follow:
            return
        if current is None or current["finished_at"] is not None:
            if current is not None and not as_json:
                code = f" (exit {current['exit_code']})" if current["exit_code"] is not None else ""
                click.echo(f"-- execution {execution_id} ended {current['state']}{code}")
            return
        time.sleep(0.5)


# --- crontab ---------------------------------------------------------------------------

@main.command("import-crontab")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--system", is_flag=True, help="System crontab (/etc/crontab, /etc/cron.d): has a user column "
              "(stored, never switched to).")
@click.option("--dry-run", is_flag=True, help="Print what would be created; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_ctx
def import_crontab(c: Context, file: str, system: bool, dry_run: bool, as_json: bool) -> None:
    """Import a crontab file: one task per entry; every other line is reported with its
    number and reason. Re-importing the same file changes nothing."""
    report = importer.import_crontab(None if dry_run else c.db(), file, system=system, tenant=c.tenant,
                                     dry_run=dry_run)
    if as_json:
        _print_json(importer.as_json(report))
    else:
        for line in report.lines:
            if line.action == "problem":
                click.echo(f"skipped {line.reason}")
            else:
                extra = (f" (user {line.user})" if line.user else "") + (
                    f" with {line.stdin.count(chr(10)) + 1} line(s) of stdin" if line.stdin is not None else "")
                click.echo(f"line {line.line_no}: {line.action.replace('_', ' ')} {line.task}  "
                           f"[{line.schedule}]{extra} {line.command}")
        for note in report.notes:
            click.echo(f"note: {note}")
        click.echo(f"{report.count('created')} created, {report.count('unchanged')} unchanged, "
                   f"{report.count('would_create')} would be created, {report.count('problem')} problem(s)")


def run() -> None:
    main(prog_name="pgsched")

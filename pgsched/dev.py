"""``pgsched dev``: the newcomer's first command. Embedded PostgreSQL (unless a DSN is
given), migrations, the example tasks from ``examples/``, and a scheduler and a worker in
one process, printing what fires and how it ends. What it prints and loads is here;
:func:`pgsched.node.run_dev` builds and runs the process."""

from __future__ import annotations

import json
import logging
import os
import shlex
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click

from . import dag, migrate
from .app import resolve
from .clock import ServerClock
from .db import Database, Row
from .handlers import Outcome
from .handlers.command import command_result
from .resources import resource_dir
from .schedule import parse_interval
from .secret_keys import Keyring
from .secret_refs import DIR_ENV, ENV_PREFIX, KEY_ENV, KEY_FILE_ENV
from .stores import dags, tasks
from .taskspec import TaskSpec

_MARK = {"succeeded": "ok  ", "failed": "FAIL", "timed_out": "TIME", "cancelled": "STOP"}


def load_examples(db: Database, tenant: str, now: datetime) -> list[str]:
    """Create the example tasks of ``examples/tasks.json`` and ``examples/hello_tasks.py``
    that do not exist yet, and apply the DAGs of ``examples/dags/``; return the names
    created."""
    folder = resource_dir("examples")
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    created = []
    for item in json.loads((folder / "tasks.json").read_text())["tasks"]:
        kind, expr = "none", ""
        for key, k in (("cron", "cron"), ("every", "interval"), ("at", "once")):
            if key in item:
                kind, expr = k, str(item[key])
        if kind == "once" and expr.startswith("+"):
            expr = (now + timedelta(seconds=parse_interval(expr[1:]))).isoformat()
        spec = TaskSpec(
            name=item["name"],
            handler_kind="shell",
            command=item["command"],
            schedule_kind=kind,
            schedule=expr or None,
            description=item.get("description"),
            tenant=tenant,
            source="examples",
            **{
                k: item[k]
                for k in ("max_attempts", "retry_policy", "retry_base_seconds", "timeout_seconds")
                if k in item
            },
        )
        if tasks.create(db, spec, now=now, if_absent=True) is not None:
            created.append(spec.name)
    module = resolve("hello_tasks:greet")  # imports the module, registering its tasks
    app = sys.modules[module.__module__].app
    created += app.sync(db)
    for path in sorted((folder / "dags").glob("*.*")):
        report = dags.apply(
            db, dag.load(path), tenant=tenant, source=f"examples/dags/{path.name}", now=now
        )
        if report.dag == "created":
            created.append(f"DAG {report.name}")
    return created


DEV_TOKEN_NAME = "pgsched dev"


def start_web(
    dsn: str, tenant: str, host: str, first_port: int, keyring: Any = None
) -> tuple[Callable[[Any], None], str, int]:
    """The web admin for ``pgsched dev``: ``(run(stop), login link, port)``. The link signs in as
    a local admin of ``tenant`` with a token made now (the previous dev token is revoked)."""
    from .node import WebSettings
    from .web import credentials
    from .web.app import create_app, protections
    from .web.server import free_port, serve_until

    app = create_app(dsn, pool_size=4, **protections(WebSettings(host=host)))
    app.state.secret_keyring = keyring  # /secrets seals with the worker's key
    app.state.db.exec("api_token_revoke_named", tenant=tenant, name=DEV_TOKEN_NAME)
    token, _ = credentials.create_token(
        app.state.db,
        role="admin",
        tenant=tenant,
        name=DEV_TOKEN_NAME,
        instance=True,
        may_reveal=True,
    )  # the local admin of everything dev runs (its worker serves every tenant too), who
    # reads the values of the tasks they wrote themselves
    port = free_port(host, first_port)
    return (
        (lambda stop: serve_until(app, host, port, stop)),
        f"http://{host}:{port}/login?token={token}",
        port,
    )


def prepare(source: Any, *, examples: bool) -> str:
    """The database of ``pgsched dev``: the embedded server started when ``source`` names
    none (:class:`pgsched.node.Source`), migrations applied; returns its DSN."""
    if source.embedded:
        from .embedded import data_dir

        click.echo(f"starting embedded PostgreSQL (data in {data_dir()}) ...")
    dsn = source.dsn
    applied = migrate.migrate(dsn)
    click.echo(
        f"schema: {'applied ' + ', '.join(f'{m.version:04d}_{m.name}' for m in applied) if applied else 'up to date'}"
    )
    return dsn


def introduce(db: Database, source: Any, *, examples: bool) -> None:
    """Load the examples (``examples``), list the tasks and say what to try next."""
    now = (
        ServerClock(db).now().replace(microsecond=0)
    )  # the examples' one-shot fires 15 s after this
    if examples:
        created = load_examples(db, source.tenant, now)
        click.echo(
            f"examples: {len(created)} task(s) created" if created else "examples: already loaded"
        )
    # DAG nodes are tasks too (DAG.NODE); the DAG stands for them here (task_list leaves them out)
    rows = db.many("task_list", tenant=source.tenant, search=None, limit=50, dag_nodes=False)
    click.echo(f"{len(rows)} task(s):")
    for r in rows:
        sched = f"{r['schedule_kind']} {r['schedule_expr'] or ''}".strip()
        nxt = (
            r["next_fire_at"].astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
            if r["next_fire_at"]
            else "-"
        )
        name = f"DAG {r['name']}" if r["handler_kind"] == "dag" else r["name"]
        click.echo(f"  {name:24} {sched:40} next {nxt}")
    if source.embedded:
        exe = (
            Path(sys.argv[0])
            if Path(sys.argv[0]).name == "pgsched"
            else Path(sys.executable).with_name("pgsched")
        )
        # the embedded server is found (and started) from the data folder: no DSN needed
        home = os.environ.get("PGSCHED_HOME")
        cmd = (f"PGSCHED_HOME={shlex.quote(home)} " if home else "") + str(
            exe if exe.exists() else "pgsched"
        )
        click.echo(f"\nin another terminal:  {cmd} task list")
        if examples:
            click.echo(f"run a DAG:            {cmd} dag trigger documents")


def web_part(
    dsn: str, tenant: str, host: str, web_port: int, keyring: Any = None
) -> Callable[[Any], None]:
    """The web admin's ``run(stop)`` (:func:`start_web`), with its sign-in link printed;
    ``keyring`` (the worker's key, or None) seals what its ``/secrets`` page sets."""
    serve, link, port = start_web(dsn, tenant, host, web_port, keyring)
    if port != web_port:
        click.echo(
            f"web admin:            port {web_port} is in use, so it listens on {port} "
            f"(the docs' examples say {web_port}; use {port})"
        )
    click.echo(
        f"web admin:            {link}\n"
        "                      (signs you in as a local admin; the link works until the next dev start)"
    )
    return serve


def key_source(environ: Mapping[str, str]) -> str | None:
    """Where the secrets' key of this process comes from (read before
    :func:`pgsched.worker.secret_resolver.take_environment` takes it out): ``PGSCHED_SECRET_KEY``
    or ``PGSCHED_SECRET_KEY_FILE PATH``; None when neither is set."""
    if environ.get(KEY_FILE_ENV):
        return f"{KEY_FILE_ENV} {environ[KEY_FILE_ENV]}"
    return KEY_ENV if environ.get(KEY_ENV) else None


def secrets_line(
    where: str | None, keyring: Keyring | None, provided: Mapping[str, str], folder: str | None
) -> str:
    """The startup summary's ``secrets:`` line: where the key comes from and its id (never
    the key), the providers given, or what to set for a key (pgsched/secret_keys.py)."""
    if keyring is None:
        text = (
            f"secrets:              no key ({KEY_ENV} or {KEY_FILE_ENV} unset): tasks that "
            "reference a stored secret fail, and 'pgsched secret set' needs one too "
            "(openssl rand -base64 32)"
        )
    else:
        text = f"secrets:              key from {where}, id {keyring.current_id}"
        if len(keyring.keys) > 1:
            text += f" (and {len(keyring.keys) - 1} older to open with)"
    if provided:
        text += f"; provided by {ENV_PREFIX}*: {', '.join(sorted(provided))}"
    if folder:
        text += f"; files of {DIR_ENV} {folder}"
    return text


def report_finish(row: Row, outcome: Outcome, tail: list[str], final: str | None) -> None:
    """The worker's ``on_finish``: one line per finished attempt, with its output's tail.
    The time shown is this host's local time of day, for the person watching (it decides
    nothing)."""
    # a command's result is its last line of output, shown below already
    echoed = bool(tail) and command_result(tail[-1]) == outcome.result
    detail = outcome.error or (
        json.dumps(outcome.result) if outcome.result is not None and not echoed else ""
    )
    then = {None: ", will retry", "dead": ", to the dead-letter queue"}.get(final, "")
    of = f"attempt {row['attempt']}/{row['max_attempts']}{then}"
    if final == "lost":  # the stop's doing, not the task's: it is given its attempt back
        of = f"attempt {row['attempt']} stopped with the worker: it runs again, not counted"
        detail = ""
    mark = "BACK" if final == "lost" else _MARK.get(outcome.state, outcome.state)
    click.echo(
        f"{datetime.now().astimezone().strftime('%H:%M:%S')}  {mark} "
        f"{row['task_name']} (execution {row['id']}, {of}) {detail}".rstrip()
    )
    for line in tail:
        click.echo(f"          | {line}")


def quiet_worker_log() -> None:
    """The worker's own log lines off below errors: :func:`report_finish` reports executions."""
    logging.getLogger("pgsched.worker").setLevel(logging.ERROR)

"""The ``pgsched`` command group: global options, the shared :class:`Context` (DSN and
tenant), and parameter types. Commands live in the sibling modules by subject.

The database is ``--dsn`` or ``--dsn-file`` (a file that holds the DSN; ``-``: standard
input), else ``PGSCHED_DSN`` or ``PGSCHED_DSN_FILE``, else the embedded default
(:mod:`pgsched.embedded`); libpq's credential variables (``PGPASSWORD``...) are folded
into it (:mod:`pgsched.login`). Errors print one line naming the field and value (a DAG file: one line per problem)
and exit 1.
"""

from __future__ import annotations

import importlib
import math
import os
from typing import Any, ClassVar

import click

from .. import login
from .. import migrate as migrations
from ..db import Database
from ..errors import PermissionDenied, PgschedError
from ..logs import FORMATS, LEVELS
from ..logs import setup as setup_logging


class _Group(click.Group):
    """Turns every pgsched error into one line on stderr and exit status 1. A command's
    module is imported when the command is first asked for (LAZY): a worker, started
    often, does not load the DAG, crontab and web code (about 0.1 s of every start)."""

    #: command name → the modules of pgsched.cli that register it and its subcommands: the
    #: module that defines a group first, then those that add commands to it
    LAZY: ClassVar[dict[str, tuple[str, ...]]] = {
        "alert": ("alerts",),
        "audit": ("web",),
        "cron": ("schedules",),
        "dag": ("dags",),
        "dev": ("processes",),
        "dlq": ("dlq",),
        "execution": ("executions", "dlq"),
        "import-crontab": ("crontab",),
        "lock": ("locks",),
        "migrate": ("processes",),
        "queue": ("queues",),
        "scheduler": ("processes",),
        "secret": ("secrets",),
        "status": ("status",),
        "task": ("tasks", "schedules"),
        "tenant": ("tenants", "quotas", "tenant_webhook"),
        "token": ("web", "reveal"),
        "user": ("web", "reveal"),
        "web": ("web",),
        "worker": ("processes",),
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(self.commands) | set(self.LAZY))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        # every module that adds to the command, even when the command itself is loaded:
        # `execution` was defined by a module that `worker` loads, without `cancel`
        for module in self.LAZY.get(cmd_name, ()):
            importlib.import_module(f"{__package__}.{module}")
        return self.commands.get(cmd_name)

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

    def convert(
        self, value: Any, param: click.Parameter | None, ctx: click.Context | None
    ) -> float:
        try:
            number = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number of seconds", param, ctx)
        if not math.isfinite(number) or not self.low <= number <= self.high:
            self.fail(
                f"{value!r} is not between {self.low:g} and {self.high:g} seconds", param, ctx
            )
        return number


class Context:
    """What every command shares: the DSN (resolved on first use: read from ``dsn_file``
    when given, with ``credentials``, libpq's credential variables as ``{keyword: value}``,
    folded in) and the tenant."""

    def __init__(
        self,
        dsn: str | None,
        tenant: str,
        credentials: dict[str, str] | None = None,
        dsn_file: str | None = None,
        tenant_given: bool = True,
    ):
        self._dsn, self._dsn_file = dsn, dsn_file
        # no DSN given: the embedded server's (started on first use)
        self.embedded = dsn is None and dsn_file is None
        self.tenant = tenant
        # not given (--tenant, $PGSCHED_TENANT): the login's own tenant once connected, if
        # it is a tenant's login (docs/security.md), else ``tenant``
        self.tenant_given = tenant_given
        self._credentials = credentials or {}
        self._db: Database | None = None

    @property
    def dsn(self) -> str:
        if self._dsn is None and self._dsn_file is not None:
            self._dsn = login.read_dsn_file(self._dsn_file)
        if self._dsn is None:
            from .. import embedded

            self._dsn = embedded.start()
        if self._credentials:
            self._dsn = login.with_credentials(self._dsn, self._credentials)
            self._credentials = {}
        return self._dsn

    def db(
        self,
        check_schema: bool = True,
        max_size: int = 4,
        idle_in_transaction_timeout: float | None = None,
        application_name: str = "pgsched",
        statement_deadline: float | None = None,
    ) -> Database:
        """The pool (opened on first use; see Database.connect; ``application_name`` tells
        its connections apart in pg_stat_activity); refuses a schema behind or ahead of the
        code."""
        if self._db is None:
            self._db = Database.connect(
                self.dsn,
                max_size=max_size,
                application_name=application_name,
                idle_in_transaction_timeout=idle_in_transaction_timeout,
                statement_deadline=statement_deadline,
            )
            if check_schema:
                try:
                    with self._db.transaction() as tx:
                        migrations.require_current(tx)
                except PermissionDenied as exc:
                    raise PgschedError(
                        f"{exc}: this login may not read pgsched's schema. An application's "
                        "login (pgsched_app) has the SQL API alone (docs/sql-api.md); the CLI "
                        "needs an engine, web or installation-wide login (docs/security.md)"
                    ) from exc
            if not self.tenant_given:
                try:
                    mapped = self._db.one("tenant_of_login")
                except PermissionDenied:  # a login that may read nothing of pgsched
                    mapped = None
                if mapped is not None:
                    self.tenant = mapped["tenant"]
        return self._db


pass_ctx = click.make_pass_decorator(Context)


@click.group(
    cls=_Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100}
)
@click.option(
    "--dsn",
    envvar="PGSCHED_DSN",
    help="PostgreSQL connection string. Default: $PGSCHED_DSN, "
    "else the embedded server in the user's data folder. Long-running processes wipe it from "
    "their command line, but other users may read it until then: give a password in "
    "--dsn-file or $PGSCHED_DSN.",
)
@click.option(
    "--dsn-file",
    envvar="PGSCHED_DSN_FILE",
    metavar="PATH",
    help="A file holding the connection string, read once at start ('-': standard input). "
    "Default: $PGSCHED_DSN_FILE.",
)
@click.option(
    "--tenant",
    default="default",
    envvar="PGSCHED_TENANT",
    help="Tenant to act in. Default: $PGSCHED_TENANT, else the tenant of the database login "
    "when it is a tenant's (pgsched tenant create … --login), else 'default'.",
)
@click.option(
    "--log-level",
    type=click.Choice(LEVELS),
    default="info",
    show_default=True,
    help="Log level of long-running processes (stderr).",
)
@click.option(
    "--log-format",
    type=click.Choice(FORMATS),
    default="text",
    show_default=True,
    help="Log format: text, json (one object per line) or console.",
)
@click.option(
    "--webhook-allow",
    "webhook_allow",
    multiple=True,
    envvar="PGSCHED_WEBHOOK_ALLOW",
    metavar="CIDR",
    help="Allow webhooks to this network although it is loopback, private or link-local "
    "(repeat for several; e.g. 10.0.0.0/8). Off by default: such targets are refused when "
    "set and when sent to. Default: $PGSCHED_WEBHOOK_ALLOW (separated by spaces).",
)
@click.version_option(package_name="pgsched")
@click.pass_context
def main(
    ctx: click.Context,
    dsn: str | None,
    dsn_file: str | None,
    tenant: str,
    log_level: str,
    log_format: str,
    webhook_allow: tuple[str, ...],
) -> None:
    """pgsched: a task scheduler whose only infrastructure is one PostgreSQL database.

    Start with `pgsched dev`: an embedded PostgreSQL, example tasks, a scheduler and a
    worker in one process.
    """
    if ctx.invoked_subcommand == "dev" and log_format == "text":
        log_format = "console"  # a person is watching
    setup_logging(log_level, log_format)
    ctx.meta["pgsched.logs"] = {"level": log_level, "format": log_format}
    given = None
    if ctx.invoked_subcommand is not None and not ctx.resilient_parsing:
        from ..task_checks import check_name

        check_name("tenant", tenant)  # a mistyped tenant is an error, not an empty listing
        if webhook_allow:  # else this process keeps what it had ($PGSCHED_WEBHOOK_ALLOW)
            from .. import webhook_targets

            webhook_targets.allow(v for item in webhook_allow for v in item.split(",") if v)
        command_line = click.core.ParameterSource.COMMANDLINE
        given = login.choose(
            dsn,
            dsn_file,
            ctx.get_parameter_source("dsn") == command_line,
            ctx.get_parameter_source("dsn_file") == command_line,
        )  # PGSCHED_DSN= (empty) means unset
    ctx.obj = Context(
        given[1] if given and given[0] == "dsn" else None,
        tenant,
        login.libpq_credentials(os.environ),  # so a worker may drop them from its environment
        dsn_file=given[1] if given and given[0] == "dsn_file" else None,
        tenant_given=ctx.get_parameter_source("tenant") != click.core.ParameterSource.DEFAULT,
    )


def log_options(command: Any) -> Any:
    """``--log-level`` / ``--log-format`` on a long-running command too (they override the
    group's), so ``pgsched worker --log-level debug`` works as people type it."""

    def apply(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        if value is not None:
            state = ctx.find_root().meta.setdefault(
                "pgsched.logs", {"level": "info", "format": "text"}
            )
            state["level" if param.name == "log_level" else "format"] = value
            setup_logging(state["level"], state["format"])
        return value

    command = click.option(
        "--log-format",
        type=click.Choice(FORMATS),
        callback=apply,
        expose_value=False,
        help="Log format (overrides the global option).",
    )(command)
    return click.option(
        "--log-level",
        type=click.Choice(LEVELS),
        callback=apply,
        expose_value=False,
        help="Log level (overrides the global option).",
    )(command)

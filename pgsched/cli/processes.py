"""Commands that run processes: migrate, scheduler, worker, dev."""

from __future__ import annotations

import click

from .. import migrate as migrations
from .isolation_options import isolation_options
from .root import Context, Seconds, log_options, main, pass_ctx

# --- processes ----------------------------------------------------------------------------


@main.command()
@click.option(
    "--status", "show_status", is_flag=True, help="Only show applied and pending migrations."
)
@click.option(
    "--lock-timeout",
    type=Seconds(0.001, 86_400),
    metavar="SECONDS",
    help="Give up a lock wait after this many seconds, 0.001 to 86400 (default: wait as "
    "long as it takes): the migration lock another migrate holds, or a table an open "
    "transaction reads. Who holds it is printed while it waits, either way.",
)
@pass_ctx
def migrate(c: Context, show_status: bool, lock_timeout: float | None) -> None:
    """Create or upgrade the pgsched schema (safe to run from many processes at once: the
    later ones wait, then find nothing to do)."""
    if show_status:
        db = c.db(check_schema=False)
        with db.transaction() as tx:
            st = migrations.status(tx)
        click.echo(
            f"applied: {st.applied or 'none'}  pending: {st.pending or 'none'}"
            + (f"  unknown (newer): {st.ahead}" if st.ahead else "")
        )
        return
    applied = migrations.migrate(
        c.dsn, lock_timeout=lock_timeout, say=lambda line: click.echo(line, err=True)
    )
    if applied:
        for m in applied:
            click.echo(f"applied {m.version:04d}_{m.name}")
    else:
        click.echo("schema is up to date")


@main.command()
@log_options
@click.option(
    "--batch",
    default=1000,
    show_default=True,
    type=click.IntRange(1, 100_000),
    help="Tasks fired per transaction.",
)
@click.option(
    "--max-sleep",
    default=5.0,
    show_default=True,
    type=Seconds(0.01, 3600),
    help="Longest sleep between ticks (seconds).",
)
@click.option(
    "--retention-days",
    default=30,
    show_default=True,
    type=click.IntRange(1, 36_500),
    help="Days of execution history kept (at least 1).",
)
@click.option(
    "--premake-days",
    default=3,
    show_default=True,
    type=click.IntRange(1, 60),
    help="Days of partitions created ahead.",
)
@click.option(
    "--leader-timeout",
    default=10.0,
    show_default=True,
    type=Seconds(2, 3600),
    help="Seconds a leader may go without heartbeating (it does every second) before a standby "
    "ends its session and takes over: a hung leader, not a dead one (that takes about 1 s).",
)
@click.option(
    "--observe-interval",
    default=60.0,
    show_default=True,
    type=Seconds(0.5, 3600),
    help="How often the leader rolls up statistics and looks for alerts (seconds).",
)
@click.option(
    "--usage-interval",
    default=60.0,
    show_default=True,
    type=Seconds(0.5, 3600),
    help="How often the leader measures each tenant's compute minutes and log bytes against "
    "its quotas, holds the work of a tenant over one, and raises quota alerts (seconds).",
)
@pass_ctx
def scheduler(
    c: Context,
    batch: int,
    max_sleep: float,
    retention_days: int,
    premake_days: int,
    leader_timeout: float,
    observe_interval: float,
    usage_interval: float,
) -> None:
    """Run a scheduler: fires due tasks while it is leader, stands by otherwise."""
    from ..node import SchedulerSettings, run_scheduler

    run_scheduler(
        c,
        SchedulerSettings(
            batch=batch,
            max_sleep=max_sleep,
            retention_days=retention_days,
            premake_days=premake_days,
            leader_timeout=leader_timeout,
            observe_interval=observe_interval,
            usage_interval=usage_interval,
        ),
    )


@main.command()
@log_options
@click.option(
    "--queue",
    "-q",
    "queues",
    multiple=True,
    default=["default"],
    show_default=True,
    help="Queue to serve (repeat for several).",
)
@click.option(
    "--tenant",
    "tenants",
    multiple=True,
    help="Tenant whose queues to serve (repeat for several): --tenant A --queue q claims "
    "only tenant A's executions on q. Default: the tenant of the database login when it is a "
    "tenant's (pgsched tenant create --engine-login), else the global --tenant "
    "($PGSCHED_TENANT, else default): one tenant, like every other command.",
)
@click.option(
    "--all-tenants",
    is_flag=True,
    help="Serve the queues of every tenant (their tasks then share this worker's host, "
    "login and rights: a choice to make on purpose).",
)
@click.option(
    "--concurrency",
    "-c",
    default=4,
    show_default=True,
    type=click.IntRange(1, 1024),
    help="Executions run at once.",
)
@click.option(
    "--poll-interval",
    default=2.0,
    show_default=True,
    type=Seconds(0.05, 3600),
    help="Seconds between polls (besides LISTEN).",
)
@click.option(
    "--heartbeat-interval",
    default=5.0,
    show_default=True,
    type=Seconds(0.5, 3600),
    help="Seconds between heartbeats; the leader declares a worker silent for 3 of them dead "
    "and runs its executions elsewhere, so keep it well above the longest stall you expect.",
)
@click.option(
    "--kill-grace",
    default=5.0,
    show_default=True,
    type=Seconds(0, 3600),
    help="Seconds between SIGTERM and SIGKILL when a command times out.",
)
@click.option(
    "--shutdown-timeout",
    default=30.0,
    show_default=True,
    type=Seconds(0, 86400),
    help="Seconds running executions get to finish on SIGTERM before they are handed back.",
)
@click.option(
    "--pythonpath",
    "pythonpath",
    multiple=True,
    type=click.Path(file_okay=False),
    help="Folder to import Python tasks from (repeat; the current folder is always searched).",
)
@click.option(
    "--import",
    "imports",
    multiple=True,
    metavar="MODULE",
    help="Import MODULE at start; when given, Python tasks come only from these modules "
    "(and their submodules). Repeat for several.",
)
@click.option(
    "--max-output-lines",
    default=10_000,
    show_default=True,
    type=click.IntRange(1, 10_000_000),
    help="Output lines stored per attempt; the rest is counted, not stored.",
)
@click.option(
    "--max-output-bytes",
    default=10 * 1024 * 1024,
    show_default=True,
    type=click.IntRange(1024, 1024**3),
    help="Output bytes stored per attempt.",
)
@click.option(
    "--prefetch",
    default=100,
    show_default=True,
    type=click.IntRange(0, 10_000),
    help="Executions claimed at most ahead of the free slots, so that a slot never waits for a "
    "claim; only while handlers are short (a claimed execution waits about 50 ms for its "
    "slot, on average). 0: claim only for free slots.",
)
@click.option(
    "--statement-deadline",
    default=30.0,
    show_default=True,
    type=Seconds(0, 3600),
    help="Seconds a statement of the worker (a claim, a heartbeat, the end of an attempt) may go "
    "without a reply before its connection is shut down and opened again: a connection gone "
    "silent (a proxy that stopped forwarding) must not block the worker. Raised to 5 s past the "
    "server's statement_timeout, which fires first; heartbeats get at most one interval. A "
    "claimer that goes round its loop for none of 3 poll intervals plus this (at least 10 s) is "
    "reported (pgsched status), its connection cut, and if it is still stuck that long again "
    "the worker exits with status 70 for its supervisor to restart it. 0: no deadline.",
)
@click.option(
    "--python-isolation",
    default="process",
    show_default=True,
    type=click.Choice(["process", "thread"]),
    help="Where Python handlers run. process: in child processes of the worker, one per "
    "running slot, reused; a timeout or cancel kills the child, whatever it is doing, and a "
    "crash ends only the child (a pipe round trip per call: docs/performance.md). thread: in "
    "the worker's own slot thread; a call blocked in C code cannot be stopped (it is "
    "abandoned), and the handler shares the worker's memory and its database login.",
)
@click.option(
    "--python-memory-limit",
    default="none",
    show_default=True,
    metavar="BYTES",
    help="Address space of each Python handler's child process (RLIMIT_AS): 2GB, 512MB, "
    "none. Over it an allocation raises MemoryError in the handler, whose child is replaced. "
    "Only with --python-isolation process.",
)
@isolation_options
@pass_ctx
def worker(
    c: Context,
    queues: tuple[str, ...],
    tenants: tuple[str, ...],
    all_tenants: bool,
    concurrency: int,
    poll_interval: float,
    heartbeat_interval: float,
    kill_grace: float,
    shutdown_timeout: float,
    max_output_lines: int,
    max_output_bytes: int,
    pythonpath: tuple[str, ...],
    imports: tuple[str, ...],
    prefetch: int,
    statement_deadline: float,
    python_isolation: str,
    python_memory_limit: str,
    isolation: str,
    run_as: str | None,
    tenant_run_as: tuple[str, ...],
    allow_run_as: tuple[str, ...],
    allow_network: bool,
    limit_cpu: str | None,
    limit_memory: str | None,
    limit_nofile: str | None,
    limit_nproc: str | None,
    limit_fsize: str | None,
) -> None:
    """Run a worker: claims and runs executions from its queues of its tenants. Python tasks
    ('module:function') are imported from the current folder, --pythonpath folders and
    PYTHONPATH."""
    from ..errors import ConfigError
    from ..handlers.rlimits import Limits
    from ..limits import parse_bytes
    from ..node import WorkerSettings, run_worker

    if all_tenants and tenants:
        raise ConfigError(
            f"tenant: --all-tenants serves every tenant; drop --tenant {' --tenant '.join(tenants)}"
            " or --all-tenants"
        )
    run_worker(
        c,
        WorkerSettings(
            queues=queues,
            tenants=None if all_tenants else tenants,
            fallback_tenant=c.tenant,
            concurrency=concurrency,
            poll_interval=poll_interval,
            heartbeat_interval=heartbeat_interval,
            kill_grace=kill_grace,
            shutdown_timeout=shutdown_timeout,
            max_output_lines=max_output_lines,
            max_output_bytes=max_output_bytes,
            pythonpath=pythonpath,
            imports=imports,
            prefetch=prefetch,
            statement_deadline=statement_deadline,
            python_isolation=python_isolation,
            python_memory_limit=parse_bytes("python_memory_limit", python_memory_limit),
            isolation=isolation,
            run_as=run_as,
            tenant_run_as=tenant_run_as,
            allow_run_as=allow_run_as,
            limits=Limits.parse(limit_cpu, limit_memory, limit_nofile, limit_nproc, limit_fsize),
            allow_network=allow_network,
        ),
    )


@main.command()
@log_options
@click.option(
    "--examples/--no-examples", default=True, show_default=True, help="Load the example tasks."
)
@click.option("--concurrency", default=4, show_default=True)
@click.option("--web/--no-web", default=True, show_default=True, help="Run the web admin too.")
@click.option(
    "--web-port",
    default=8080,
    show_default=True,
    type=click.IntRange(1, 65535),
    help="Port of the web admin (or the next free one), on 127.0.0.1.",
)
@click.pass_context
def dev(ctx: click.Context, examples: bool, concurrency: int, web: bool, web_port: int) -> None:
    """Everything in one process for a first look: embedded PostgreSQL (unless --dsn or
    PGSCHED_DSN), migrations, the example tasks and DAGs, a scheduler and a worker (queues
    default and examples, of every tenant), and the web admin on 127.0.0.1 with a sign-in
    link printed. Ctrl-C stops.

    The embedded data lives in ~/.local/share/pgsched/pgdata, or $PGSCHED_HOME/pgdata, and
    is reused next time; other pgsched commands with the same PGSCHED_HOME use it too. The
    example tasks stay there and fire whenever a scheduler runs: delete them (pgsched task
    delete) or the data folder to start clean."""
    from ..node import DevSettings, run_dev

    run_dev(
        ctx.obj, DevSettings(examples=examples, concurrency=concurrency, web=web, web_port=web_port)
    )

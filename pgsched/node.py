"""The composition root: one process of each kind (scheduler, worker, web, dev) built from
its settings, checked first, and run until SIGINT/SIGTERM. The CLI only parses options
into settings and calls :func:`run_scheduler`, :func:`run_worker`, :func:`run_web` or
:func:`run_dev`; a program embedding pgsched may call them too, or :func:`build_scheduler`.

The settings (:mod:`pgsched.settings`, importable from here too) are checked first: each
``validate()`` raises :class:`~pgsched.errors.ValidationError` naming the first bad field
and its value. What runs is imported when it is built: a worker start does
not load the web code, nor a web start the worker's.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import click

from .db import Database
from .errors import ConfigError, PgschedError
from .settings import DevSettings, SchedulerSettings, WebSettings, WorkerSettings

if TYPE_CHECKING:
    from .scheduler import Scheduler

# Seconds a pooled statement of the scheduler may go without a reply before its socket is
# cut (pgsched.deadline): above the statistics roll-up and partition maintenance of a busy
# database, far below "for ever" (a connection gone silent would hang the tick).
SCHEDULER_STATEMENT_DEADLINE = 60.0

Target = tuple[str, Callable[[threading.Event], None]]


class Source(Protocol):
    """Where a process's database comes from (:class:`pgsched.cli.root.Context`): ``dsn``
    (the embedded server's when none was given: ``embedded``), ``tenant``, and ``db()``,
    the pool, opened once, refusing a schema behind or ahead of the code."""

    tenant: str
    embedded: bool

    @property
    def dsn(self) -> str: ...

    def db(
        self,
        check_schema: bool = True,
        max_size: int = 4,
        idle_in_transaction_timeout: float | None = None,
        application_name: str = "pgsched",
        statement_deadline: float | None = None,
    ) -> Database: ...


# --- building -------------------------------------------------------------------------------


def build_scheduler(source: Source, settings: SchedulerSettings) -> Scheduler:
    """A scheduler on a pool of its own: the tick's parallel batches and one connection
    for each of the leader's services. A transaction left open while the scheduler is
    frozen ends once it counts as hung (``leader_timeout``): its tasks' row locks do not
    outlive it, standby or not."""
    from .scheduler import Scheduler, SchedulerConfig

    settings.validate()
    config = SchedulerConfig(
        batch=settings.batch,
        max_sleep=settings.max_sleep,
        retention_days=settings.retention_days,
        premake_days=settings.premake_days,
        leader_timeout=settings.leader_timeout,
        observe_interval=settings.observe_interval,
        usage_interval=settings.usage_interval,
    )
    db = source.db(
        max_size=config.parallel + 7,
        application_name="pgsched scheduler",
        idle_in_transaction_timeout=settings.leader_timeout,
        statement_deadline=SCHEDULER_STATEMENT_DEADLINE,
    )
    return Scheduler(db, config)


def conceal_login(source: Source) -> None:
    """Read the login of ``source`` now (its DSN: the embedded server is started if none was
    given), then keep it out of what this process starts and from what /proc shows of it
    (:func:`pgsched.secrecy.conceal`): every long-running process does it before it runs
    anything, a worker before any task."""
    from .secrecy import conceal

    source.dsn  # noqa: B018 (read, so nothing is left to read from the environment later)
    conceal()


def run_scheduler(source: Source, settings: SchedulerSettings) -> None:
    """Run a scheduler until a signal (:func:`run_until_signal`)."""
    conceal_login(source)
    run_until_signal([("scheduler", build_scheduler(source, settings).run)])


def run_worker(source: Source, settings: WorkerSettings) -> None:
    """Run a worker until a signal. Python tasks are imported from the current folder,
    ``pythonpath`` and PYTHONPATH; a module of ``imports`` that cannot be imported raises
    PgschedError naming it."""
    from .handlers.isolation import resolve
    from .login import CREDENTIAL_ENV
    from .worker import HEARTBEAT_STALE, PRIVATE_ENV, Worker, WorkerConfig
    from .worker.secret_resolver import take_environment

    settings.validate()
    # before anything else: a worker never starts with less isolation than it was told
    isolation = resolve(
        settings.isolation,
        settings.run_as,
        settings.limits,
        settings.allow_network,
        tenant_run_as=settings.tenant_run_as,
        allow_run_as=settings.allow_run_as,
    )
    # the secrets' key and providers, out of the environment before it is wiped from /proc
    secret_keys, secret_env, secret_dir = take_environment(os.environ)
    conceal_login(source)
    for folder in reversed(
        ("", *settings.pythonpath)
    ):  # "" is the current folder, as for `python -m`
        if folder not in sys.path:
            sys.path.insert(0, folder)
    for module in settings.imports:
        try:
            importlib.import_module(module)
        except BaseException as exc:
            raise PgschedError(
                f"import: {module!r} cannot be imported: {type(exc).__name__}: {exc}"
            ) from None
    s = settings
    config = WorkerConfig(
        queues=list(s.queues),
        tenants=None,  # resolved below, once the login's tenant is known
        concurrency=s.concurrency,
        poll_interval=s.poll_interval,
        heartbeat_interval=s.heartbeat_interval,
        kill_grace=s.kill_grace,
        shutdown_timeout=s.shutdown_timeout,
        max_output_lines=s.max_output_lines,
        max_output_bytes=s.max_output_bytes,
        allowed_modules=s.imports,
        prefetch=s.prefetch,
        statement_deadline=s.statement_deadline,
        python_isolation=s.python_isolation,
        python_memory_limit=s.python_memory_limit,
        isolation=isolation,
        secret_keys=secret_keys,
        secret_env=secret_env,
        secret_dir=secret_dir,
    )
    # Executions use a connection only briefly (log flushes, the end of an attempt): a
    # small pool serves many slots. Plus one listener connection. A transaction left open
    # while the worker is frozen ends before the leader may declare the worker dead.
    db = source.db(
        max_size=min(s.concurrency + 2, 10),
        idle_in_transaction_timeout=HEARTBEAT_STALE * s.heartbeat_interval,
        application_name="pgsched worker",
        statement_deadline=s.statement_deadline or None,
    )
    config.tenants = worker_tenants(db, s)
    served = config.tenants
    strays = [t for t, _ in isolation.run_as.tenants if served is not None and t not in served]
    if strays and served is not None:  # a user for a tenant never served: a mistyped name?
        raise ConfigError(
            f"tenant_run_as: --tenant-run-as names tenant {strays[0]!r}, which this worker "
            f"does not serve (it serves {', '.join(served)}): add --tenant {strays[0]} or "
            "drop it"
        )
    if (secret_env or secret_dir) and (config.tenants is None or len(config.tenants) > 1):
        # a provider's secret is the worker's, not a tenant's: every tenant it serves could
        # name it (the attack of issue 19); docs/security.md, "Secrets"
        raise ConfigError(
            "secret providers (PGSCHED_SECRET_ENV_*, PGSCHED_SECRET_DIR) are given to a worker "
            "that serves "
            + ("every tenant" if config.tenants is None else ", ".join(config.tenants))
            + ": any of them could read every provided secret; start one worker per tenant "
            "(--tenant NAME) for provided secrets, or store them per tenant (pgsched secret set)"
        )
    # Tasks run under this process (Python tasks inside it): they get no pgsched settings.
    # (Its login left with conceal_login, which keeps what libpq reads again: PGSYSCONFDIR.)
    for name in PRIVATE_ENV - CREDENTIAL_ENV:
        os.environ.pop(name, None)
    runner = Worker(db, config)
    run_until_signal([("worker", runner.run)], urgent=[runner.stop_now])


def worker_tenants(db: Database, settings: WorkerSettings) -> tuple[str, ...] | None:
    """The tenants a worker serves (None: every tenant): ``settings.tenants`` when given,
    else the tenant of the database login when it is a tenant's (pgsched.tenant_role,
    migration 0018: row-level security shows such a login no other tenant's rows), else
    ``settings.fallback_tenant`` (the global ``--tenant``). Raises ConfigError when the
    tenants asked for are not the login's: the worker would claim nothing of them."""
    row = db.one("tenant_of_login")
    login = row["tenant"] if row else None
    asked = None if settings.tenants is None else tuple(dict.fromkeys(settings.tenants))
    if login is None or login == "*":
        return asked if asked != () else (settings.fallback_tenant,)
    if asked == ():
        return (login,)
    if asked != (login,):
        wanted = "every tenant" if asked is None else ", ".join(map(repr, asked))
        raise ConfigError(
            f"tenant: this database login acts for tenant {login!r} only (pgsched tenant list); "
            f"a worker of {wanted} would claim nothing: drop --tenant/--all-tenants or "
            "use an installation-wide engine login"
        )
    return asked


def run_web(source: Source, settings: WebSettings) -> None:
    """Serve the web admin and the REST API until a signal. A port in use raises
    ConfigError (one line, not a traceback from a thread)."""
    from .secret_keys import from_environment
    from .web.app import create_app, protections
    from .web.server import free_port, serve_until

    settings.validate()
    conceal_login(source)
    host, port = settings.host, settings.port
    app = create_app(source.db(max_size=settings.pool_size), **protections(settings))
    app.state.secret_keyring = from_environment(os.environ)  # /secrets seals with it
    free_port(host, port, tries=1)
    run_until_signal(
        [("web", lambda stop: serve_until(app, host, port, stop))],
        banner=f"pgsched web admin on http://{host}:{port}/ (API: /api/v1/, Ctrl-C to stop)",
    )
    click.echo("stopped")


def run_dev(source: Source, settings: DevSettings) -> None:
    """``pgsched dev``: the database set up and introduced (:func:`pgsched.dev.prepare`),
    then a scheduler, a worker (queues default and examples, of every tenant) and, with
    ``web``, the web admin in one process until Ctrl-C. One pool for all (the worker's slots
    + the leader's services)."""
    from . import dev
    from .scheduler import Scheduler, SchedulerConfig
    from .worker import Worker, WorkerConfig
    from .worker.secret_resolver import take_environment

    settings.validate()
    dsn = dev.prepare(source, examples=settings.examples)
    key_source = dev.key_source(os.environ)
    secret_keys, secret_env, secret_dir = take_environment(os.environ)
    click.echo(dev.secrets_line(key_source, secret_keys, secret_env, secret_dir))
    conceal_login(source)
    db = Database.connect(dsn, max_size=settings.concurrency + 9)
    try:
        dev.introduce(db, source, examples=settings.examples)
        parts: list[Target] = []
        if settings.web:
            parts.append(
                (
                    "web",
                    dev.web_part(dsn, source.tenant, "127.0.0.1", settings.web_port, secret_keys),
                )
            )
        scheduler = Scheduler(db, SchedulerConfig(max_sleep=1.0))
        worker = Worker(
            db,
            WorkerConfig(
                queues=["default", "examples"],
                tenants=None,  # a first look at everything in the database: every tenant
                concurrency=settings.concurrency,
                poll_interval=1.0,
                kill_grace=2.0,
                shutdown_timeout=5.0,
                secret_keys=secret_keys,
                secret_env=secret_env,
                secret_dir=secret_dir,
            ),
            on_finish=dev.report_finish,
        )
        dev.quiet_worker_log()
        run_until_signal(
            [("scheduler", scheduler.run), ("worker", worker.run), *parts],
            urgent=[worker.stop_now],
            banner=f"scheduler, worker{' and web admin' if settings.web else ''} running; "
            "Ctrl-C to stop\n",
        )
    finally:
        db.close()
    click.echo("stopped")


# --- running --------------------------------------------------------------------------------


def run_until_signal(
    targets: list[Target], urgent: list[Callable[[], Any]] | None = None, banner: str | None = None
) -> None:
    """Run each ``run(stop)`` in a thread until SIGINT/SIGTERM. A second signal calls each
    of ``urgent`` (stop waiting, hand work back) and exits within 10 seconds whatever is
    left. Exits 1 if a part stopped on its own (a bug: its traceback is in the log).
    ``banner`` (the "Ctrl-C to stop" line) is printed once the signals are handled, so a
    Ctrl-C sent as soon as it shows stops cleanly instead of interrupting the start."""
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
    if banner:
        click.echo(banner)
    threads = [
        threading.Thread(target=run, args=(stop,), name=name, daemon=True) for name, run in targets
    ]
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

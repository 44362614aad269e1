"""The composition root: one process of each kind (scheduler, worker, web, dev) built from
its settings, checked first, and run until SIGINT/SIGTERM. The CLI only parses options
into settings and calls :func:`run_scheduler`, :func:`run_worker`, :func:`run_web` or
:func:`run_dev`; a program embedding pgsched may call them too, or :func:`build_scheduler`.

Each settings class's ``validate()`` raises :class:`~pgsched.errors.ValidationError`
naming the first bad field and its value (the CLI's own ranges are the same, so it never
gets there with a bad one). What runs is imported when it is built: a worker start does
not load the web code, nor a web start the worker's.
"""

from __future__ import annotations

import importlib
import math
import os
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import click

from .db import Database
from .errors import ConfigError, PgschedError, ValidationError

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


def _whole(field: str, value: object, low: int, high: int) -> None:
    if not (isinstance(value, int) and not isinstance(value, bool) and low <= value <= high):
        raise ValidationError(field, value, f"must be a whole number from {low} to {high}")


def _seconds(field: str, value: object, low: float, high: float) -> None:
    if not (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and low <= value <= high
    ):
        raise ValidationError(field, value, f"must be a number of seconds from {low:g} to {high:g}")


@dataclass(frozen=True)
class SchedulerSettings:
    """``pgsched scheduler``: ``batch`` tasks per tick transaction (1-100,000);
    ``max_sleep`` longest sleep between ticks (0.01-3600 s); ``retention_days`` of history
    kept (1-36,500); ``premake_days`` of partitions made ahead (1-60); ``leader_timeout``
    seconds without a heartbeat before a standby takes over (2-3600); ``observe_interval``
    seconds between statistics roll-ups and alert checks (0.5-3600)."""

    batch: int = 1000
    max_sleep: float = 5.0
    retention_days: int = 30
    premake_days: int = 3
    leader_timeout: float = 10.0
    observe_interval: float = 60.0

    def validate(self) -> None:
        _whole("batch", self.batch, 1, 100_000)
        _seconds("max_sleep", self.max_sleep, 0.01, 3600)
        _whole("retention_days", self.retention_days, 1, 36_500)
        _whole("premake_days", self.premake_days, 1, 60)
        _seconds("leader_timeout", self.leader_timeout, 2, 3600)
        _seconds("observe_interval", self.observe_interval, 0.5, 3600)


@dataclass(frozen=True)
class WorkerSettings:
    """``pgsched worker``: ``queues`` served (names as ``taskspec.check_name`` allows) of
    ``tenants`` (names; None: every tenant, which must be asked for; empty: not given, so the
    tenant of the database login when it is a tenant's, else ``fallback_tenant``);
    ``concurrency`` slots (1-1024); ``poll_interval`` (0.05-3600 s), ``heartbeat_interval``
    (0.5-3600 s), ``kill_grace`` (0-3600 s), ``shutdown_timeout`` (0-86,400 s) and
    ``statement_deadline`` (0-3600 s; 0: none) as the options say; ``max_output_lines``
    (1-10,000,000) and ``max_output_bytes`` (1 KiB-1 GiB) stored per attempt; ``prefetch``
    (0-10,000); ``pythonpath`` folders put first on ``sys.path``; ``imports``: modules
    imported at start (Python tasks then come only from them)."""

    queues: tuple[str, ...] = ("default",)
    tenants: tuple[str, ...] | None = ()
    fallback_tenant: str = "default"
    concurrency: int = 4
    poll_interval: float = 2.0
    heartbeat_interval: float = 5.0
    kill_grace: float = 5.0
    shutdown_timeout: float = 30.0
    max_output_lines: int = 10_000
    max_output_bytes: int = 10 * 1024 * 1024
    pythonpath: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()
    prefetch: int = 100
    statement_deadline: float = 30.0

    def validate(self) -> None:
        from .taskspec import check_name

        if not self.queues:
            raise ValidationError("queues", self.queues, "must name at least one queue")
        for queue in self.queues:
            check_name("queue", queue)
        for tenant in (self.fallback_tenant, *(self.tenants or ())):
            check_name("tenant", tenant)
        _whole("concurrency", self.concurrency, 1, 1024)
        _seconds("poll_interval", self.poll_interval, 0.05, 3600)
        _seconds("heartbeat_interval", self.heartbeat_interval, 0.5, 3600)
        _seconds("kill_grace", self.kill_grace, 0, 3600)
        _seconds("shutdown_timeout", self.shutdown_timeout, 0, 86_400)
        _whole("max_output_lines", self.max_output_lines, 1, 10_000_000)
        _whole("max_output_bytes", self.max_output_bytes, 1024, 1024**3)
        _whole("prefetch", self.prefetch, 0, 10_000)
        _seconds("statement_deadline", self.statement_deadline, 0, 3600)


@dataclass(frozen=True)
class WebSettings:
    """``pgsched web``: listens on ``host``:``port`` (1-65535); ``pool_size`` connections
    (1-100). Sign-ins (docs/web.md): at most ``user_failures`` failed ones per username
    within ``user_window`` seconds (1-1000 within 1-86,400 s) and ``address_failures`` per
    client address within ``address_window`` seconds, else 429; password hashes run on
    ``hash_threads`` threads (1-64, 64 MiB each while hashing) with at most ``hash_queue``
    more waiting (0-1024), else 503. ``allowed_hosts``: the Host header names served
    (``*.domain`` and ``*`` allowed); empty: the loopback names when ``host`` is a loopback
    address, ``host`` itself otherwise, and an address that listens everywhere
    (``0.0.0.0``, ``::``) must name them."""

    host: str = "127.0.0.1"
    port: int = 8080
    pool_size: int = 8
    user_failures: int = 5
    user_window: float = 300.0
    address_failures: int = 20
    address_window: float = 60.0
    hash_threads: int = 2
    hash_queue: int = 8
    allowed_hosts: tuple[str, ...] = ()

    def validate(self) -> None:
        from .web.hosts import WILDCARDS

        if not isinstance(self.host, str) or not self.host:
            raise ValidationError("host", self.host, "must be an address to listen on")
        _whole("port", self.port, 1, 65535)
        _whole("pool_size", self.pool_size, 1, 100)
        _whole("user_failures", self.user_failures, 1, 1000)
        _seconds("user_window", self.user_window, 1, 86_400)
        _whole("address_failures", self.address_failures, 1, 1000)
        _seconds("address_window", self.address_window, 1, 86_400)
        _whole("hash_threads", self.hash_threads, 1, 64)
        _whole("hash_queue", self.hash_queue, 0, 1024)
        for name in self.allowed_hosts:
            if not isinstance(name, str) or not name.strip() or any(c in name for c in "/@ "):
                raise ValidationError("allowed_hosts", name, "must be a host name, *.domain or *")
        if not self.allowed_hosts and self.host.strip("[]") in WILDCARDS:
            raise ValidationError(
                "allowed_hosts",
                list(self.allowed_hosts),
                f"must name the hosts clients use (--allowed-host NAME; '*' for any): "
                f"--host {self.host} listens on every address and has no name of its own",
            )

    def hosts(self) -> tuple[str, ...]:
        """The Host names served: ``allowed_hosts``, or the defaults for ``host``."""
        from .web.hosts import default_hosts

        return self.allowed_hosts or default_hosts(self.host)


@dataclass(frozen=True)
class DevSettings:
    """``pgsched dev``: ``examples`` loaded; ``concurrency`` slots of its worker (1-1024);
    the web admin (``web``) on the first free port from ``web_port`` (1-65535)."""

    examples: bool = True
    concurrency: int = 4
    web: bool = True
    web_port: int = 8080

    def validate(self) -> None:
        _whole("concurrency", self.concurrency, 1, 1024)
        _whole("web_port", self.web_port, 1, 65535)


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
    )
    db = source.db(
        max_size=config.parallel + 6,
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
    from .login import CREDENTIAL_ENV
    from .worker import HEARTBEAT_STALE, PRIVATE_ENV, Worker, WorkerConfig

    settings.validate()
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
    row = db.one("worker_login_tenant")
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
            f"a worker of {wanted} would claim nothing else: drop --tenant/--all-tenants or "
            "use an installation-wide engine login"
        )
    return asked


def run_web(source: Source, settings: WebSettings) -> None:
    """Serve the web admin and the REST API until a signal. A port in use raises
    ConfigError (one line, not a traceback from a thread)."""
    from .web.app import create_app, protections
    from .web.server import free_port, serve_until

    settings.validate()
    conceal_login(source)
    host, port = settings.host, settings.port
    app = create_app(source.db(max_size=settings.pool_size), **protections(settings))
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

    settings.validate()
    dsn = dev.prepare(source, examples=settings.examples)
    conceal_login(source)
    db = Database.connect(dsn, max_size=settings.concurrency + 8)
    try:
        dev.introduce(db, source, examples=settings.examples)
        parts: list[Target] = []
        if settings.web:
            parts.append(("web", dev.web_part(dsn, source.tenant, "127.0.0.1", settings.web_port)))
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

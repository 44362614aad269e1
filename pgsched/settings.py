"""The settings of each kind of process (scheduler, worker, web, dev), checked before
anything is built: each ``validate()`` raises :class:`~pgsched.errors.ValidationError`
naming the first bad field and its value (the CLI's own ranges are the same, so it never
gets there with a bad one). :mod:`pgsched.node` builds the processes from them. Pure: no
database driver.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .errors import ValidationError
from .handlers.rlimits import Limits


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
    seconds between statistics roll-ups and alert checks (0.5-3600); ``usage_interval``
    seconds between the usage job's runs (tenants' compute and log bytes measured, quota
    alerts; 0.5-3600)."""

    batch: int = 1000
    max_sleep: float = 5.0
    retention_days: int = 30
    premake_days: int = 3
    leader_timeout: float = 10.0
    observe_interval: float = 60.0
    usage_interval: float = 60.0

    def validate(self) -> None:
        _whole("batch", self.batch, 1, 100_000)
        _seconds("max_sleep", self.max_sleep, 0.01, 3600)
        _whole("retention_days", self.retention_days, 1, 36_500)
        _whole("premake_days", self.premake_days, 1, 60)
        _seconds("leader_timeout", self.leader_timeout, 2, 3600)
        _seconds("observe_interval", self.observe_interval, 0.5, 3600)
        _seconds("usage_interval", self.usage_interval, 0.5, 3600)


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
    imported at start (Python tasks then come only from them); ``python_isolation``:
    ``process`` or ``thread``; ``python_memory_limit``: bytes (64 MiB-1 PiB) or None;
    ``isolation`` (none, rlimits,
    sandbox), ``run_as`` (a user name, uid or ``uid:gid``), ``tenant_run_as``
    (``TENANT=USER`` values), ``allow_run_as`` (``USER[,USER...]`` values: crontab users a
    task may name), ``limits`` and ``allow_network``: what commands run in and as whom
    (:mod:`pgsched.handlers.isolation`, :mod:`pgsched.handlers.run_as`)."""

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
    python_isolation: str = "process"
    python_memory_limit: int | None = None
    isolation: str = "none"
    run_as: str | None = None
    tenant_run_as: tuple[str, ...] = ()
    allow_run_as: tuple[str, ...] = ()
    limits: Limits = field(default_factory=Limits)
    allow_network: bool = False

    def validate(self) -> None:
        from .handlers.isolation import LEVELS
        from .task_checks import check_name

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
        if self.python_isolation not in ("process", "thread"):
            raise ValidationError(
                "python_isolation", self.python_isolation, "must be process or thread"
            )
        if self.python_memory_limit is not None:
            _whole("python_memory_limit", self.python_memory_limit, 64 * 1024**2, 1024**5)
            if self.python_isolation == "thread":  # a limit on the worker itself: refused
                raise ValidationError(
                    "python_memory_limit",
                    self.python_memory_limit,
                    "applies to Python handlers' child processes: it needs "
                    "--python-isolation process",
                )
        if self.isolation not in LEVELS:
            raise ValidationError(
                "isolation", self.isolation, f"must be one of {', '.join(LEVELS)}"
            )


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

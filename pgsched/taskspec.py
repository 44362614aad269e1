"""What a task is, before and apart from the database: :class:`TaskSpec`, its validation and
the fields an update may change. Pure (no database): the task store,
:mod:`pgsched.stores.tasks`, stores them; :mod:`pgsched.task_rows` reads stored rows back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from . import limits
from .errors import ValidationError
from .jsontext import check_json_object
from .retry import POLICIES
from .schedule import Schedule
from .task_checks import TASK_NAME, check_name, check_seconds
from .task_kinds import HANDLER_KINDS, MISFIRE_POLICIES, PYTHON_ISOLATIONS, HandlerKind
from .windows import check_windows

_PYTHON_TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
# an environment variable name a shell passes on (POSIX.1-2017, Base Definitions 8.1)
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_EXCEPTION = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*")
MAX_ATTEMPTS = 1000


@dataclass
class TaskSpec:
    """What a task is, before it is stored.

    - ``handler_kind``: ``shell`` (``command`` run by ``/bin/sh -c``, or the ``SHELL`` in
      ``env``), ``argv`` (``argv`` executed directly, no shell) or ``python``
      (``python_target`` = ``"package.module:function"``, a function registered with
      ``@app.task``).
    - ``schedule_kind`` / ``schedule``: see :mod:`pgsched.schedule`; ``timezone`` an IANA name.
    - ``timeout_seconds``: wall-clock limit per attempt (None = none).
    - ``max_attempts``, ``retry_policy``, ``retry_base_seconds``, ``retry_max_seconds``:
      see :mod:`pgsched.retry`. ``priority``: 1 (most urgent) to 10; default 5.
    - ``no_retry_exit_codes`` (commands) and ``no_retry_exceptions`` (Python exception
      class names, e.g. ``ValueError``): an attempt that ends so is not retried; the
      execution goes straight to the dead-letter queue.
    - ``misfire_policy``: what a fire missed while no scheduler ran becomes: ``skip``
      (nothing), ``once`` (one catch-up run, the default) or ``all`` (every missed fire,
      capped by the ``misfire_all_cap`` setting).
    - ``idempotent``: runs given no idempotency key get one derived from task, params and
      scheduled time, so a run whose key already succeeded is skipped.
    - ``tags``: labels to find the task by (at most 20, each like a queue name).
    - ``sensitive_params``: params keys (any depth, any case) masked for viewers beside those
      whose name says secret (at most 50, each 1-200 characters; migration 0031).
    - ``overlap_policy``, ``unique_policy``, ``unique_period_seconds``, ``unique_scope``:
      see :func:`pgsched.windows.check_windows` and docs/limits.md ("Overlap policy", "Unique windows").
    - ``python_isolation``: where its Python handler runs, ``process`` or ``thread``, over
      the worker's ``--python-isolation`` (None: the worker's; docs/security.md).
    """

    name: str
    handler_kind: str = "shell"
    command: str | None = None
    argv: list[str] | None = None
    python_target: str | None = None
    schedule_kind: str = "none"
    schedule: str | None = None
    timezone: str = "UTC"
    params: dict[str, Any] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    stdin: str | None = None
    run_as_user: str | None = None
    timeout_seconds: float | None = None
    max_attempts: int = 1
    retry_policy: str = "exponential"
    retry_base_seconds: float = 10.0
    retry_max_seconds: float = 3600.0
    priority: int = 5
    queue: str = "default"
    no_retry_exit_codes: list[int] = field(default_factory=list)
    no_retry_exceptions: list[str] = field(default_factory=list)
    misfire_policy: str = "once"
    idempotent: bool = False
    tenant: str = "default"
    enabled: bool = True
    description: str | None = None
    source: str | None = None
    tags: list[str] = field(default_factory=list)
    sensitive_params: list[str] = field(default_factory=list)
    # overlap and unique windows (issue 18, items 5-6)
    overlap_policy: str = "allow"
    unique_policy: str = "none"
    unique_period_seconds: float | None = None
    unique_scope: str = "task"
    # limits (issue 18, items 3-4): held across every worker by the claim (docs/limits.md);
    # None is no limit. max_running: executions of the task at once; rate_limit starts per
    # rate_period_seconds (a sliding window); concurrency_key: a template rendered from
    # each execution's params ("customer:{customer_id}"), whose executions key_max_running
    # and key_rate_limit (per key_rate_period_seconds) bound across every task rendering it
    max_running: int | None = None
    rate_limit: int | None = None
    rate_period_seconds: float | None = None
    concurrency_key: str | None = None
    key_max_running: int | None = None
    key_rate_limit: int | None = None
    key_rate_period_seconds: float | None = None
    # its commands' sandbox (issue 19; pgsched.limits.check_sandbox_fields): limits
    # over the worker's --limit-* and whether a sandboxed command may use the network; None:
    # the worker's. They apply only on a worker that isolates (docs/security.md, "Sandbox").
    limit_cpu_seconds: int | None = None
    limit_memory_bytes: int | None = None
    limit_nofile: int | None = None
    limit_nproc: int | None = None
    limit_fsize_bytes: int | None = None
    network: bool | None = None
    # where its Python handler runs (issue 19, item 2; migration 0035): ``process`` or
    # ``thread`` over the worker's --python-isolation; None: the worker's
    python_isolation: str | None = None

    def validate(self) -> Schedule:
        """Check every field; return the parsed schedule. Raises ValidationError naming
        the first bad field and its value."""
        check_name("name", self.name, TASK_NAME)
        if self.handler_kind not in HANDLER_KINDS:
            raise ValidationError(
                "handler_kind", self.handler_kind, f"must be one of {', '.join(HANDLER_KINDS)}"
            )
        if (
            self.handler_kind == "shell"
            and self.command is not None
            and not isinstance(self.command, str)
        ):
            raise ValidationError(
                "command",
                self.command,
                f"must be text, not {type(self.command).__name__} "
                "(in YAML, quote commands such as true, 42 or yes)",
            )
        if self.handler_kind == "shell" and not (
            isinstance(self.command, str) and self.command.strip()
        ):
            raise ValidationError("command", self.command, "is required for a shell task")
        if self.handler_kind == "shell" and "\x00" in (self.command or ""):
            raise ValidationError("command", self.command, "contains a NUL character")
        if self.handler_kind == "argv" and not (
            isinstance(self.argv, list)
            and self.argv
            and all(isinstance(a, str) and "\x00" not in a for a in self.argv)
        ):
            raise ValidationError("argv", self.argv, "must be a non-empty list of strings")
        if self.handler_kind == "python" and not (
            isinstance(self.python_target, str) and _PYTHON_TARGET.fullmatch(self.python_target)
        ):
            raise ValidationError(
                "python_target", self.python_target, "must look like 'package.module:function'"
            )
        check_json_object("params", self.params)
        if not isinstance(self.env, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and k and "=" not in k and "\x00" not in k + v
            for k, v in self.env.items()
        ):
            raise ValidationError(
                "env", self.env, "must map names (no '=') to string values, without NUL characters"
            )
        for k in self.env:
            if not _ENV_NAME.fullmatch(k):
                raise ValidationError(
                    "env",
                    k,
                    "is not a variable name: letters, digits and '_', not starting with a digit "
                    "(POSIX's portable names; the shell drops any other from a command's "
                    "environment)",
                )
        if self.stdin is not None and (not isinstance(self.stdin, str) or "\x00" in self.stdin):
            raise ValidationError("stdin", self.stdin, "must be text without NUL characters")
        if self.timeout_seconds is not None:
            check_seconds("timeout_seconds", self.timeout_seconds, allow_zero=False)
        if not isinstance(self.max_attempts, int) or not 1 <= self.max_attempts <= MAX_ATTEMPTS:
            raise ValidationError(
                "max_attempts", self.max_attempts, f"must be an integer from 1 to {MAX_ATTEMPTS}"
            )
        if self.retry_policy not in POLICIES:
            raise ValidationError(
                "retry_policy", self.retry_policy, f"must be one of {', '.join(POLICIES)}"
            )
        check_seconds("retry_base_seconds", self.retry_base_seconds)
        check_seconds("retry_max_seconds", self.retry_max_seconds)
        if (
            isinstance(self.priority, bool)
            or not isinstance(self.priority, int)
            or not 1 <= self.priority <= 10
        ):
            raise ValidationError(
                "priority", self.priority, "must be an integer from 1 (most urgent) to 10"
            )
        check_name("queue", self.queue)
        check_name("tenant", self.tenant)
        if not isinstance(self.no_retry_exit_codes, list) or not all(
            isinstance(c, int) and not isinstance(c, bool) and 0 <= c <= 255
            for c in self.no_retry_exit_codes
        ):
            raise ValidationError(
                "no_retry_exit_codes",
                self.no_retry_exit_codes,
                "must be a list of exit codes from 0 to 255",
            )
        if not isinstance(self.no_retry_exceptions, list) or not all(
            isinstance(n, str) and _EXCEPTION.fullmatch(n) for n in self.no_retry_exceptions
        ):
            raise ValidationError(
                "no_retry_exceptions",
                self.no_retry_exceptions,
                "must be a list of exception class names like 'ValueError' or 'mymod.Error'",
            )
        if self.misfire_policy not in MISFIRE_POLICIES:
            raise ValidationError(
                "misfire_policy",
                self.misfire_policy,
                f"must be one of {', '.join(MISFIRE_POLICIES)}",
            )
        if not isinstance(self.idempotent, bool):
            raise ValidationError("idempotent", self.idempotent, "must be true or false")
        if not isinstance(self.tags, list) or len(self.tags) > 20:
            raise ValidationError("tags", self.tags, "must be a list of at most 20 tags")
        for tag in self.tags:
            check_name("tags", tag)
        limits.check_sandbox_fields(self)
        if self.python_isolation is not None and self.python_isolation not in PYTHON_ISOLATIONS:
            raise ValidationError(
                "python_isolation",
                self.python_isolation,
                f"must be one of {', '.join(PYTHON_ISOLATIONS)}, or null (the worker's)",
            )
        if (
            not isinstance(self.sensitive_params, list)
            or len(self.sensitive_params) > 50
            or not all(
                isinstance(k, str) and 0 < len(k) <= 200 and "\x00" not in k
                for k in self.sensitive_params
            )
        ):
            raise ValidationError(
                "sensitive_params",
                self.sensitive_params,
                "must be a list of at most 50 keys, each of 1 to 200 characters without NUL",
            )
        check_windows(
            self.overlap_policy,
            self.unique_policy,
            self.unique_period_seconds,
            self.unique_scope,
            self.concurrency_key,
        )
        limits.check_task_limits(
            self.max_running,
            self.rate_limit,
            self.rate_period_seconds,
            self.concurrency_key,
            self.key_max_running,
            self.key_rate_limit,
            self.key_rate_period_seconds,
        )
        return Schedule.parse(self.schedule_kind, self.schedule, self.timezone)


# What ``update`` may change: every definition field but the identity (name, tenant), the
# crontab provenance (run_as_user, source) and the paused state (pause/resume own it).
UPDATABLE = frozenset(
    f
    for f in TaskSpec.__dataclass_fields__
    if f not in ("name", "tenant", "run_as_user", "source", "enabled")
)
# the fields whose change re-plans the next fire, and the field each handler kind needs
SCHEDULE_FIELDS = ("schedule_kind", "schedule", "timezone")
HANDLER_FIELDS = {
    HandlerKind.SHELL.value: "command",
    HandlerKind.ARGV.value: "argv",
    HandlerKind.PYTHON.value: "python_target",
}

"""The options that define a task, shared by ``pgsched task create`` and ``task update``,
and the :class:`~pgsched.taskspec.TaskSpec` fields and alerting settings read from them."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

import click

from .. import alerts, limits
from ..errors import ValidationError
from ..retry import POLICIES
from ..schedule import parse_interval
from ..task_kinds import MISFIRE_POLICIES
from ..windows import OVERLAP_POLICIES, UNIQUE_POLICIES, UNIQUE_SCOPES
from .output import pairs, parse_json_object, parse_when
from .task_env import UPDATE_ENV_OPTIONS
from .task_sandbox_options import sandbox_fields, sandbox_options


def definition_options(create: bool) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
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
            help="NAME=VALUE for the command's environment (repeat); a value may be or hold "
            "a secret reference, {{secret:NAME}}"
            + (
                "."
                if create
                else ". Merged into the task's: its other variables stay (--unset-env NAME "
                "removes one, --env-replace makes these the whole environment)."
            ),
        ),
        click.option(
            "--sensitive-param",
            "sensitive_params",
            multiple=True,
            help="A params key masked for viewers beside those named like a secret (repeat)"
            + ("." if create else "; replaces the task's list."),
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
            "the failure-rate alert opens" + ("" if create else "; '' removes it") + ". "
            "Public addresses only, unless pgsched --webhook-allow CIDR allows others.",
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
        # overlap and unique windows (issue 18, items 5-6)
        click.option(
            "--overlap",
            "overlap_policy",
            type=click.Choice(list(OVERLAP_POLICIES)),
            help="A scheduled fire while a run of the task is live: allow it (default), skip "
            "it (recorded as skipped) while one is queued or running, or queue_one (one run "
            "at a time, at most one waiting). Manual triggers are never skipped.",
        ),
        click.option(
            "--unique",
            "unique_policy",
            type=click.Choice(list(UNIQUE_POLICIES)),
            help="pending: at most one queued run of the task (or key, --unique-per key) at a "
            "time; a second enqueue returns the queued one. Default none.",
        ),
        click.option(
            "--unique-period",
            help="At most one enqueue per period (30s, 10m, 1h): a second within it returns "
            "the first; 'none' removes it.",
        ),
        click.option(
            "--unique-per",
            "unique_scope",
            type=click.Choice(list(UNIQUE_SCOPES)),
            help="What the unique window counts: the task (default) or its rendered "
            "concurrency key.",
        ),
    ]
    options += limit_options(create) + sandbox_options(create)
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
            *UPDATE_ENV_OPTIONS,
        ]

    def apply(func: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(options):
            func = option(func)
        return func

    return apply


# --- limits (issue 18, items 3-4; docs/limits.md) ----------------------------------------


def limit_options(create: bool) -> list[Any]:
    """``--max-running``, ``--rate-limit``, ``--concurrency-key``, ``--key-max-running``,
    ``--key-rate-limit``: limits held across every worker. On update 'none' removes one."""
    none = "" if create else "; 'none' removes it"
    return [
        click.option(
            "--max-running",
            "limit_max_running",
            metavar="N|none",
            help="Executions of this task running at once, across every worker" + none + ".",
        ),
        click.option(
            "--rate-limit",
            "limit_rate",
            metavar="N/PERIOD|none",
            help="At most N starts per PERIOD, a sliding window (60/1m, 10/30s, 1000/1h)"
            + none
            + ".",
        ),
        click.option(
            "--concurrency-key",
            "limit_key",
            metavar="TEMPLATE",
            help="A key rendered from each run's params, {name} for a param "
            "('customer:{customer_id}'); --key-max-running and --key-rate-limit count by it, "
            "across every task of the tenant that renders the same key"
            + ("" if create else "; '' removes it")
            + ".",
        ),
        click.option(
            "--key-max-running",
            "limit_key_max_running",
            metavar="N|none",
            help="Executions of one key running at once (e.g. 1: one import per customer).",
        ),
        click.option(
            "--key-rate-limit",
            "limit_key_rate",
            metavar="N/PERIOD|none",
            help="At most N starts of one key per PERIOD.",
        ),
    ]


def limit_fields(o: dict[str, Any]) -> dict[str, Any]:
    """TaskSpec limit fields from the limit options given (None = not given; 'none' = no
    limit). Raises ValidationError naming the option's field."""
    out: dict[str, Any] = {}
    for option, field in (
        ("limit_max_running", "max_running"),
        ("limit_key_max_running", "key_max_running"),
    ):
        if o.get(option) is not None:
            out[field] = limits.parse_count(field, o[option])
    for option, prefix in (("limit_rate", ""), ("limit_key_rate", "key_")):
        if o.get(option) is not None:
            rate = limits.parse_rate(f"{prefix}rate_limit", o[option])
            out[f"{prefix}rate_limit"], out[f"{prefix}rate_period_seconds"] = rate or (None, None)
    if o.get("limit_key") is not None:
        key = o["limit_key"]
        if key.strip().lower() in ("", limits.NONE):  # removed, and the limits that count by it
            out["concurrency_key"] = None
            out.setdefault("key_max_running", None)
            out.setdefault("key_rate_limit", None)
            out.setdefault("key_rate_period_seconds", None)
        else:
            out["concurrency_key"] = key
    return out


_ALERTING = {
    "on_failure": "on_failure",
    "on_dlq": "on_dlq",
    "on_missed": "on_missed",
    "missed_after": "missed_after_seconds",
}


def alerting(o: dict[str, Any]) -> dict[str, Any]:
    """The webhook and threshold options given (:func:`pgsched.alerts.configure` fields),
    validated. Raises ValidationError naming the field."""
    out = {field: o[key] for key, field in _ALERTING.items() if o.get(key) is not None}
    alerts.Alerting(**{k: (None if v == "" else v) for k, v in out.items()}).validate()
    return out


def definition(
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
    if o.get("sensitive_params"):
        out["sensitive_params"] = list(o["sensitive_params"])
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
    out.update(windows(o))
    out.update(limit_fields(o))
    out.update(sandbox_fields(o))
    return out


def windows(o: dict[str, Any]) -> dict[str, Any]:
    """The overlap and unique-window fields given (issue 18, items 5-6): ``--unique-period``
    is an interval (``10m``; see :func:`pgsched.schedule.parse_interval`) or ``none``."""
    out = {k: o[k] for k in ("overlap_policy", "unique_policy", "unique_scope") if o.get(k)}
    period = o.get("unique_period")
    if period is not None:
        none = period.strip().lower() in ("none", "")
        out["unique_period_seconds"] = None if none else parse_interval(period, "unique_period")
    return out

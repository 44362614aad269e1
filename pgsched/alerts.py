"""Alerts: a task missed a schedule, or fails too often. Detected by the scheduler
leader's maintenance loop (:func:`detect`, one transaction, idempotent), stored in
``pgsched.alert`` (one open alert per task and kind) and sent to the task's webhooks
through the ``webhook_delivery`` outbox (see :mod:`pgsched.webhooks`).

Rules (``sql/alert.sql``; thresholds per task in ``task_alerting``, else the settings):

- ``missed_schedule``: a fire is more than ``alert_missed_after_seconds`` (60) past its
  time without having started: not made by the scheduler (overdue), made but waiting, or
  started late; or the misfire policy did not run some fires. Resolved when none of that
  holds and a fire has started on time since (or the task is paused, deleted, unscheduled).
  Opening sends ``on_missed``.
- ``failure_rate``: failures (failed, timed_out, dead) / (those + succeeded) finished in
  the last ``alert_failure_window_seconds`` (3600) is above ``alert_failure_rate`` (0.5),
  with at least ``alert_failure_min_executions`` (5) of them. Resolved when the rate is
  at most :data:`RESOLVE_FRACTION` of the threshold (or the minimum is no longer met), so
  that a rate hovering at the threshold does not open, resolve and send again every
  minute. Opening sends ``on_failure``.

- ``quota`` (the tenant's, no task; :mod:`pgsched.scheduler.usage`): the tenant reached
  one of its quotas (``details.quota``: running, starts_per_hour, compute_minutes,
  log_bytes). Resolved when its use falls to 80 % of the quota. Shown with the tenant's
  alerts (dashboard, ``pgsched alert list``); no webhook, a tenant has no URL of its own.

Every failed, timed-out or dead execution also sends ``on_failure`` (and a dead one
``on_dlq``): a trigger on ``execution_history`` queues those in the finishing transaction.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from . import webhook_targets
from .db import Database, Row, Session
from .errors import ValidationError
from .stores.tasks import get as get_task

log = logging.getLogger(__name__)

RESOLVE_FRACTION = 0.8  # a failure-rate alert resolves at or below this share of its threshold

DEFAULTS = {
    "alert_missed_after_seconds": 60.0,
    "alert_failure_rate": 0.5,
    "alert_failure_window_seconds": 3600.0,
    "alert_failure_min_executions": 5,
}


@dataclass
class Alerting:
    """A task's webhooks (http or https URLs; None = none) and its own thresholds (None =
    the global setting): ``missed_after_seconds`` (> 0), ``failure_rate`` (0-1),
    ``failure_window_seconds`` (> 0), ``failure_min_executions`` (>= 1)."""

    on_failure: str | None = None
    on_dlq: str | None = None
    on_missed: str | None = None
    missed_after_seconds: float | None = None
    failure_rate: float | None = None
    failure_window_seconds: float | None = None
    failure_min_executions: int | None = None

    def validate(self) -> None:
        """Raise ValidationError naming the first bad field and its value."""
        for name in ("on_failure", "on_dlq", "on_missed"):
            url = getattr(self, name)
            if url is not None:
                check_webhook_url(name, url)
        for name in ("missed_after_seconds", "failure_window_seconds"):
            value = getattr(self, name)
            if value is not None and not (
                isinstance(value, (int, float))
                and not isinstance(value, bool)
                and 0 < value <= 366 * 86400
            ):
                raise ValidationError(
                    name, value, "must be a number of seconds above 0, at most a year"
                )
        rate = self.failure_rate
        if rate is not None and not (
            isinstance(rate, (int, float)) and not isinstance(rate, bool) and 0 <= rate <= 1
        ):
            raise ValidationError("failure_rate", rate, "must be a ratio from 0 to 1 (0.5 = half)")
        least = self.failure_min_executions
        if least is not None and not (
            isinstance(least, int) and not isinstance(least, bool) and least >= 1
        ):
            raise ValidationError(
                "failure_min_executions", least, "must be a whole number of 1 or more"
            )


FIELDS = tuple(f.name for f in fields(Alerting))


def webhook_origin(url: str) -> str:
    """``url`` as one who may not read it whole is shown it: scheme and host only
    (``https://hooks.example.com/…``): a webhook's path, query and user part often carry
    its token (a Slack-style hook)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port}/…"


def check_webhook_url(name: str, url: object) -> str:
    """``url`` if it is an http:// or https:// URL with a host, of at most 2,000
    characters, with no user name or password and no literal address that
    :mod:`pgsched.webhook_targets` refuses (loopback, private, ... unless allowed); else
    ValidationError naming field ``name`` and the value."""
    try:
        parts = urlsplit(url) if isinstance(url, str) else None
        host, _ = (
            (parts.hostname, parts.port) if parts else (None, None)
        )  # both raise on a bad netloc
    except ValueError as exc:  # 'http://[::1' (an unclosed IPv6 address), a port over 65535
        raise ValidationError(name, url, f"is not a URL ({exc})") from None
    if parts is None or parts.scheme not in ("http", "https") or not host:
        raise ValidationError(name, url, "must be an http:// or https:// URL with a host")
    assert isinstance(url, str)
    if len(url) > 2000 or any(ch.isspace() for ch in url):
        raise ValidationError(name, url, "must be at most 2000 characters, with no spaces")
    webhook_targets.check_url(name, url, parts)  # no credentials, no literal private address
    return url


def configure(
    db: Database | Session, task: str, tenant: str = "default", **changes: Any
) -> Alerting:
    """Change the webhooks and thresholds of live task ``task``: only the fields given
    change; an empty string or None clears one. Returns the whole result. Raises NotFound,
    ValidationError (unknown field, bad URL or value); nothing is written then."""
    unknown = sorted(set(changes) - set(FIELDS))
    if unknown:
        raise ValidationError(
            unknown[0], changes[unknown[0]], f"is not an alerting field ({', '.join(FIELDS)})"
        )
    if isinstance(db, Database):
        with db.transaction() as tx:
            return configure(tx, task, tenant, **changes)
    row = get_task(db, task, tenant)
    stored = db.one("alert_task_get", task_id=row["id"])
    current = Alerting(**{f: stored[f] for f in FIELDS}) if stored else Alerting()
    for key, value in changes.items():
        setattr(current, key, None if value == "" else value)
    current.validate()
    db.one("alert_task_put", task_id=row["id"], **vars(current))
    return current


def alerting_of(db: Database | Session, task: str, tenant: str = "default") -> Alerting:
    """The webhooks and thresholds of ``task`` (all None when never set). Raises NotFound."""
    row = get_task(db, task, tenant)
    stored = db.one("alert_task_get", task_id=row["id"])
    return Alerting(**{f: stored[f] for f in FIELDS}) if stored else Alerting()


def _settings(tx: Session) -> dict[str, float]:
    values = {r["name"]: r["value"] for r in tx.many("scheduler_settings")}
    return {k: float(values.get(k, v)) for k, v in DEFAULTS.items()}


def detect(db: Database, now: datetime | None = None) -> list[Row]:
    """Open and resolve alerts as of ``now`` (default: the database's clock), queueing
    the webhooks of those opened, in one transaction. Returns one row per change:
    ``change`` (opened, resolved), ``id``, ``tenant``, ``task_id``, ``kind``,
    ``opened_at``, ``details``. Does nothing (returns []) while another detection runs."""
    with db.transaction() as tx:
        now = now or tx.now()  # lateness is judged on the database's time line only
        lock = tx.one("alert_lock")
        if not (lock and lock["locked"]):
            return []
        cfg = _settings(tx)
        bounds = (
            tx.one(
                "alert_widest",
                missed_after=cfg["alert_missed_after_seconds"],
                window=cfg["alert_failure_window_seconds"],
            )
            or {}
        )
        last = tx.one("alert_since")
        since = last["checked_at"] if last else now
        changes = tx.many(
            "alert_missed",
            now=now,
            since=since,
            missed_after=cfg["alert_missed_after_seconds"],
            least_missed_after=bounds.get("least_missed_after")
            or cfg["alert_missed_after_seconds"],
        )
        tx.exec("alert_seen_misfires")
        changes += tx.many(
            "alert_failure_rate",
            now=now,
            rate=cfg["alert_failure_rate"],
            resolve_fraction=RESOLVE_FRACTION,
            window=cfg["alert_failure_window_seconds"],
            min_executions=int(cfg["alert_failure_min_executions"]),
            widest_window=bounds.get("widest_window") or cfg["alert_failure_window_seconds"],
        )
        tx.exec("alert_checked", now=now)
    for c in changes:
        task = c["details"].get("task")
        if c["change"] == "opened":
            log.warning(
                "alert opened: task %s %s (%s)", task, c["kind"].replace("_", " "), c["details"]
            )
        else:
            log.info("alert resolved: task %s %s", task, c["kind"].replace("_", " "))
    return changes


def active(
    db: Database | Session,
    tenant: str = "default",
    *,
    include_resolved: bool = False,
    limit: int = 200,
) -> list[Row]:
    """Alerts of ``tenant``, open ones first, then newest first: ``id``, ``task_id``,
    ``task_name`` (both None for a ``quota`` alert, which is the tenant's), ``kind``,
    ``opened_at``, ``resolved_at`` (None while open), ``details`` (what was seen: reasons,
    rates, thresholds; a quota alert's ``quota``, ``used`` and ``limit``)."""
    return db.many("alert_list", tenant=tenant, open_only=not include_resolved, limit=limit)

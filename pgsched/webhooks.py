"""Webhook delivery: the sender of the ``webhook_delivery`` outbox.

Rows are written in the transaction of their event (an execution that failed or died:
trigger on ``execution_history``; an alert opened: :func:`pgsched.alerts.detect`), so an
event is never lost nor sent for a transaction that rolled back. :func:`send_due` claims
due rows (SKIP LOCKED, with a lease so that a sender that dies mid-POST leaves them for a
later try), POSTs each payload as JSON outside any transaction, and records the outcome:
a 2xx response is delivered; anything else (status, refused connection, timeout) is
tried again after an exponential backoff (:func:`pgsched.retry.backoff_seconds`, base
``webhook_backoff_base_seconds`` = 5, cap ``webhook_backoff_max_seconds`` = 600) until
``webhook_max_attempts`` (8) attempts, then given up (``gave_up_at``). Delivery is at least
once: a receiver may see a delivery again (same ``X-Pgsched-Delivery`` header) if the
sender dies between the POST and recording it.

The scheduler leader runs :class:`Sender` in its own thread, so a slow receiver never
delays a tick.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from .db import Database, Row
from .errors import PgschedError
from .retry import backoff_seconds

log = logging.getLogger(__name__)

_DEFAULTS = {"webhook_max_attempts": 8, "webhook_backoff_base_seconds": 5.0,
             "webhook_backoff_max_seconds": 600.0, "webhook_timeout_seconds": 5.0}


@dataclass(frozen=True)
class Policy:
    """``max_attempts`` POSTs at most; ``base`` / ``cap`` seconds of exponential backoff;
    ``timeout`` seconds per POST (connect and read)."""

    max_attempts: int = 8
    base: float = 5.0
    cap: float = 600.0
    timeout: float = 5.0

    @classmethod
    def load(cls, db: Database) -> Policy:
        values = {r["name"]: r["value"] for r in db.many("scheduler_settings")}
        v = {k: values.get(k, d) for k, d in _DEFAULTS.items()}
        return cls(int(v["webhook_max_attempts"]), float(v["webhook_backoff_base_seconds"]),
                   float(v["webhook_backoff_max_seconds"]), float(v["webhook_timeout_seconds"]))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are not followed: urllib would repeat a POST answered 301/302/303 as a GET
    without the payload (and count the GET's 2xx as delivered), and could be sent on to any
    address the receiver names. A 3xx is a failed attempt; fix the URL instead."""

    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


_opener = urllib.request.build_opener(_NoRedirect)


def post(url: str, payload: dict, timeout: float, headers: dict[str, str] | None = None) -> str | None:
    """POST ``payload`` as JSON to ``url``. Returns None on a 2xx response, else what went
    wrong in one line (status and the start of the body, or the connection error). A
    redirect (3xx) is not followed: it is an error naming where it pointed."""
    body = json.dumps(payload, separators=(",", ":"), default=str).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "Content-Type": "application/json", "User-Agent": "pgsched-webhook", **(headers or {})})
    try:
        with _opener.open(request, timeout=timeout) as response:  # http/https only: CHECK of task_alerting
            if 200 <= response.status < 300:
                return None
            return f"HTTP {response.status}"
    except urllib.error.HTTPError as exc:
        if 300 <= exc.code < 400:
            return f"HTTP {exc.code}: redirect to {exc.headers.get('Location', '?')[:200]!r} not followed"
        text = exc.read(200).decode("utf-8", "replace").strip()
        return f"HTTP {exc.code}{': ' + text if text else ''}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return f"{type(exc).__name__}: {reason}"


def send_due(db: Database, *, now: datetime | None = None, limit: int = 20,
             policy: Policy | None = None) -> list[Row]:
    """POST up to ``limit`` deliveries due at ``now`` (default: the current time) and
    record each outcome. Returns the rows tried with ``error`` (None when delivered) and
    ``retry_at`` (None when delivered or given up)."""
    policy = policy or Policy.load(db)
    now = now or datetime.now(timezone.utc)
    lease = policy.timeout * 2 + 30
    rows = db.many("webhook_claim", now=now, limit=limit, lease=lease)
    began = time.monotonic()
    for row in rows:
        error = post(row["url"], row["payload"], policy.timeout,
                     {"X-Pgsched-Event": row["event"], "X-Pgsched-Delivery": str(row["id"])})
        done = now + timedelta(seconds=time.monotonic() - began)  # ``now``'s clock, moved on
        row["error"], row["retry_at"] = error, None
        if error is None:
            db.exec("webhook_delivered", id=row["id"], attempts=row["attempts"], now=done)
            continue
        if row["attempts"] < policy.max_attempts:
            delay = backoff_seconds("exponential", row["attempts"], policy.base, policy.cap)
            row["retry_at"] = done + timedelta(seconds=delay)
            log.warning("webhook %s (%s) to %s failed (attempt %d): %s; next try in %.0fs", row["id"],
                        row["event"], row["url"], row["attempts"], error, delay)
        else:
            log.error("webhook %s (%s) to %s failed %d times, giving up: %s", row["id"], row["event"],
                      row["url"], row["attempts"], error)
        db.exec("webhook_failed", id=row["id"], attempts=row["attempts"], error=error[:1000],
                retry_at=row["retry_at"], now=done)
    return rows


class Sender:
    """Sends due webhooks until stopped: ``start()`` runs a daemon thread; ``stop()``
    ends it (safe to call twice). ``poll`` seconds between looks when nothing was due;
    database errors are logged and retried, never raised."""

    def __init__(self, db: Database, poll: float = 1.0):
        self.db = db
        self.poll = poll
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="pgsched-webhooks", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                sent = send_due(self.db)
            except PgschedError as exc:
                log.warning("webhook sender: %s; retrying", exc)
                sent = []
            if not sent:
                self._stop.wait(self.poll)

"""Webhook delivery: the sender of the ``webhook_delivery`` outbox.

Rows are written in the transaction of their event (an execution that failed or died:
trigger on ``execution_history``; an alert opened: :func:`pgsched.alerts.detect`), so an
event is never lost nor sent for a transaction that rolled back. :func:`send_due` claims
due rows (SKIP LOCKED, with a lease so that a sender that dies mid-POST leaves them for a
later try), POSTs each payload as JSON outside any transaction, and records the outcome:
a 2xx response is delivered; anything else (status, refused connection, timeout) is
tried again after an exponential backoff (:func:`pgsched.retry.backoff_seconds`, base
``webhook_backoff_base_seconds`` = 5, cap ``webhook_backoff_max_seconds`` = 600) until
``webhook_max_attempts`` (8) attempts, then given up (``gave_up_at``). A target the SSRF
guard refuses (:mod:`pgsched.webhook_targets`: loopback, private, link-local, ...
addresses, unless the operator allows them) is given up at once, its reason recorded
(``last_error`` starts with ``Refused:``), and no request is made. Delivery is at least
once: a receiver may see a delivery again (same ``X-Pgsched-Delivery`` header) if the
sender dies between the POST and recording it.

The scheduler leader runs :class:`Sender` in its own thread, so a slow receiver never
delays a tick.
"""

from __future__ import annotations

import functools
import http.client
import json
import logging
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass
from datetime import datetime, timedelta

from . import webhook_targets
from .clock import Clock, ServerClock
from .db import Database, Row
from .retry import backoff_seconds
from .service import IntervalService

log = logging.getLogger(__name__)

_DEFAULTS = {
    "webhook_max_attempts": 8,
    "webhook_backoff_base_seconds": 5.0,
    "webhook_backoff_max_seconds": 600.0,
    "webhook_timeout_seconds": 5.0,
}


@dataclass(frozen=True)
class Policy:
    """``max_attempts`` POSTs at most; ``base`` / ``cap`` seconds of exponential backoff;
    ``timeout`` seconds per POST (the whole exchange: connect, send, read the answer)."""

    max_attempts: int = 8
    base: float = 5.0
    cap: float = 600.0
    timeout: float = 5.0

    @classmethod
    def load(cls, db: Database) -> Policy:
        values = {r["name"]: r["value"] for r in db.many("scheduler_settings")}
        v = {k: values.get(k, d) for k, d in _DEFAULTS.items()}
        return cls(
            int(v["webhook_max_attempts"]),
            float(v["webhook_backoff_base_seconds"]),
            float(v["webhook_backoff_max_seconds"]),
            float(v["webhook_timeout_seconds"]),
        )


def _cut(connection: http.client.HTTPConnection, expired: threading.Event) -> None:
    """End ``connection``'s exchange now: a blocked read in another thread ends at once
    (with an error, or as if the answer had ended: ``expired`` tells which it was)."""
    expired.set()
    sock = connection.sock
    if sock is not None:
        try:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except OSError:  # already closed
            pass


def _connect_to(
    address: tuple, _where: tuple, timeout: float, source: tuple | None = None
) -> socket.socket:
    """A connection to the checked socket ``address`` (numeric: no second lookup), where
    http.client would have connected to ``_where`` (the host name and port): TLS still
    checks the certificate against the name, and the Host header still names it."""
    return socket.create_connection(address[:2], timeout, source)


def post(
    url: str, payload: dict, timeout: float, headers: dict[str, str] | None = None
) -> str | None:
    """POST ``payload`` as JSON to ``url`` (http or https). Returns None on a 2xx response,
    else what went wrong in one line (status and the start of the body, or the connection
    error).

    ``timeout`` seconds bound the whole exchange, not each socket read: a receiver that
    sends its answer a byte at a time cannot hold the sender longer. A redirect (3xx) is
    not followed (following would repeat the POST as a GET without the payload, to any
    address the receiver names): it is an error naming where it pointed.

    The host is resolved once and the connection made to the address that was checked
    (:mod:`pgsched.webhook_targets`): a loopback, private, link-local, ... address not
    allowed by the operator is not connected to; the error then starts with
    ``Refused:`` and says which address and why."""
    body = json.dumps(payload, separators=(",", ":"), default=str).encode()
    try:
        parts = urllib.parse.urlsplit(url)
        kind = {"http": http.client.HTTPConnection, "https": http.client.HTTPSConnection}.get(
            parts.scheme
        )
        if kind is None or not parts.hostname:
            return f"ValueError: {url[:200]!r} is not an http:// or https:// URL"
        connection = kind(parts.hostname, parts.port, timeout=timeout)
        # the one lookup: the address checked is the one connected to (no DNS rebinding)
        address = webhook_targets.resolve(parts.hostname, connection.port)
    except ValueError as exc:  # a bad port
        return f"ValueError: {exc}"
    except webhook_targets.Refused as exc:
        return f"{webhook_targets.REFUSED} {exc}"
    except OSError as exc:  # the name does not resolve
        return f"{type(exc).__name__}: {exc}"
    connection._create_connection = functools.partial(_connect_to, address)  # type: ignore[attr-defined]
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    began = time.monotonic()
    deadline: threading.Timer | None = None
    expired = threading.Event()
    try:
        connection.connect()  # bounded by the socket timeout
        deadline = threading.Timer(
            max(timeout - (time.monotonic() - began), 0.0), _cut, [connection, expired]
        )
        deadline.start()
        connection.request(
            "POST",
            target,
            body,
            {
                "Content-Type": "application/json",
                "User-Agent": "pgsched-webhook",
                **(headers or {}),
            },
        )
        response = connection.getresponse()
        if expired.is_set():  # the answer was cut short: its status is not to be trusted
            raise TimeoutError
        if 200 <= response.status < 300:
            return None
        if 300 <= response.status < 400:
            where = (response.getheader("Location") or "?")[:200]
            return f"HTTP {response.status}: redirect to {where!r} not followed"
        text = response.read(200).decode("utf-8", "replace").strip()
        return f"HTTP {response.status}{': ' + text if text else ''}"
    except (OSError, http.client.HTTPException, ValueError) as exc:
        if expired.is_set() or time.monotonic() - began >= timeout:
            return f"TimeoutError: no whole answer within {timeout:g} s"
        return f"{type(exc).__name__}: {exc}"
    finally:
        if deadline is not None:
            deadline.cancel()
        connection.close()


def send_due(
    db: Database, *, now: datetime | None = None, limit: int = 20, policy: Policy | None = None
) -> list[Row]:
    """POST up to ``limit`` deliveries due at ``now`` (default: the current time) and
    record each outcome. Returns the rows tried with ``error`` (None when delivered) and
    ``retry_at`` (None when delivered or given up)."""
    policy = policy or Policy.load(db)
    now = now or ServerClock(db).now()  # the database's clock: deliveries are due by it
    lease = policy.timeout * 2 + 30
    rows = db.many("webhook_claim", now=now, limit=limit, lease=lease)
    began = time.monotonic()
    for row in rows:
        error = post(
            row["url"],
            row["payload"],
            policy.timeout,
            {"X-Pgsched-Event": row["event"], "X-Pgsched-Delivery": str(row["id"])},
        )
        done = now + timedelta(seconds=time.monotonic() - began)  # ``now``'s clock, moved on
        row["error"], row["retry_at"] = error, None
        if error is None:
            db.exec("webhook_delivered", id=row["id"], attempts=row["attempts"], now=done)
            continue
        refused = error.startswith(webhook_targets.REFUSED)  # refused again if tried again
        if row["attempts"] < policy.max_attempts and not refused:
            delay = backoff_seconds("exponential", row["attempts"], policy.base, policy.cap)
            row["retry_at"] = done + timedelta(seconds=delay)
            log.warning(
                "webhook %s (%s) to %s failed (attempt %d): %s; next try in %.0fs",
                row["id"],
                row["event"],
                row["url"],
                row["attempts"],
                error,
                delay,
            )
        else:
            log.error(
                "webhook %s (%s) to %s failed %d time(s), giving up: %s",
                row["id"],
                row["event"],
                row["url"],
                row["attempts"],
                error,
            )
        db.exec(
            "webhook_failed",
            id=row["id"],
            attempts=row["attempts"],
            error=error[:1000],
            retry_at=row["retry_at"],
            now=done,
        )
    return rows


class Sender(IntervalService):
    """Sends due webhooks until stopped (:func:`send_due` at the clock's ``now``, default
    the database's): again at once after a round that sent something, else after ``poll``
    seconds. ``start()`` runs a daemon thread; ``stop()`` ends it (both safe to call
    twice); a failed round is logged once and tried again, never raised."""

    name = "webhooks"
    log = log
    failure = "webhook sender: %s; retrying"
    failure_level = logging.WARNING

    def __init__(self, db: Database, poll: float = 1.0, clock: Clock | None = None):
        super().__init__(clock or ServerClock(db), poll)
        self.db = db
        self.poll = poll

    def run_once(self, now: datetime) -> list[Row]:
        return send_due(self.db, now=now)

    def next_wait(self, result: object) -> float:
        return 0.0 if result else self.poll

"""The audit log of the web admin's access (table ``pgsched.audit_event``, migration 0019):
who signed in, failed to, signed out; token and user changes; role refusals; instance
actions (a forced scheduler failover).

An event is ``(at, tenant, actor_kind, actor, action, target, detail, ip)``: ``at`` the
database's ``now()``; ``tenant`` the tenant it belongs to (None when none is known: a
failed sign-in as an unknown user); ``actor_kind`` ``token``, ``user``, ``cli`` (a
``pgsched`` command or the library, ``actor`` then the operating system's user) or
``anonymous``; ``actor`` the token id or username; ``target`` what was acted on
(``token 7``, ``user ada``, ``GET /api/v1/tokens``); ``detail`` a JSON object.

Growth is bounded twice: failed sign-ins and role refusals, which anyone can cause as often
as they like, are recorded at most ``audit_noisy_per_minute`` (600) a minute per action and
tenant (and as many for no tenant), so a flood shows as rows at that rate and stops there;
and the leader removes events older than ``audit_retention_days`` (90) every maintenance
round (:mod:`pgsched.scheduler.access_prune`).
"""

from __future__ import annotations

import getpass
import hashlib
from dataclasses import dataclass
from typing import Any

from psycopg.types.json import Jsonb

from ..db import Database, Row, Session
from ..roles import ActorKind

ACTIONS = (
    "sign_in",
    "sign_in_failed",
    "sign_out",
    "sign_out_everywhere",
    "password_change",
    "token_create",
    "token_revoke",
    "user_create",
    "user_delete",
    "reveal_change",
    "secret_set",
    "secret_delete",
    "forbidden",
    "scheduler_failover",
)
"""Every action the log records (the CHECK allows any lower-case word; these are used)."""


@dataclass(frozen=True)
class Actor:
    """Who did it: ``kind`` one of :class:`pgsched.roles.ActorKind`; ``name`` the
    token id, the username or the operating system's user; ``ip`` the client's address
    (None outside a request)."""

    kind: str
    name: str
    ip: str | None = None


def local() -> Actor:
    """The actor of a ``pgsched`` command (or of the library called directly): the
    operating system's user who runs it."""
    try:
        name = getpass.getuser()
    except (KeyError, OSError):  # no such uid in /etc/passwd (a container), no LOGNAME
        name = "unknown"
    return Actor(ActorKind.CLI, name[:200])


def record(
    db: Database | Session,
    by: Actor | None,
    action: str,
    *,
    tenant: str | None,
    target: str = "",
    detail: dict[str, Any] | None = None,
) -> bool:
    """Record one event (``by`` None: :func:`local`). Returns False when it was left out
    (a failed sign-in or a refusal past this minute's cap). Pass a transaction's session
    to record it with the change it describes, in the same transaction."""
    actor = by or local()
    row = db.one(
        "audit_insert",
        tenant=tenant,
        actor_kind=actor.kind,
        actor=actor.name[:200],
        action=action,
        target=target[:500],
        detail=Jsonb(detail or {}),
        ip=actor.ip,
    )
    return row is not None and row["id"] is not None


def sign_in_failed(
    db: Database | Session, *, username: str, token: str, ip: str | None, reason: str
) -> bool:
    """Record a failed sign-in with ``username`` (or with ``token`` when username is
    empty). The event belongs to the user's tenant, or the token's when it is known but
    revoked or expired, else to none; the token itself is never stored (only looked up by
    its SHA-256). Returns False when this minute's cap left it out."""
    digest = hashlib.sha256(token.encode()).digest() if token else b""
    row = db.one(
        "audit_sign_in_failed",
        username=username[:200],
        token_sha256=digest,
        detail=Jsonb(
            {"method": "token" if token and not username else "password", "reason": reason}
        ),
        ip=ip,
    )
    return row is not None and row["id"] is not None


def scope(who: object) -> str | None:
    """The tenant whose events principal ``who`` reads: its own; None (every tenant's, and
    those of none) for an instance-wide principal (``Principal.instance``, when a principal
    has it: the instance scope of issue 17)."""
    return None if getattr(who, "instance", False) else str(getattr(who, "tenant", ""))


def events(
    db: Database | Session,
    tenant: str | None,
    *,
    action: str | None = None,
    before: int | None = None,
    limit: int = 50,
) -> list[Row]:
    """Events of ``tenant`` (every tenant's and those of none when None), newest first;
    only ``action`` when given; ids below ``before`` (a cursor) when given."""
    return db.many("audit_list", tenant=tenant, action=action, before=before, limit=limit)

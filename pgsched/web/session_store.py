"""Sessions of the web admin, stored in the database (table ``pgsched.web_session``,
migration 0019).

A session id is ``secrets.token_urlsafe(32)`` (256 random bits), set as the cookie and
stored only as its SHA-256 (as tokens are: see migrations/0005_web.sql). Its row holds the
tenant, the token or user that backs it, the CSRF token of its forms, and its lifetime by
the database's clock. :func:`resolve` looks it up on every request against ``now()``: a
session that was ended (:func:`end`, :func:`end_all`), has expired, or whose token was
revoked or has expired, or whose user was deleted, signs nobody in from its next request.

A token or user keeps at most :data:`SESSIONS_PER_BACKER` live sessions (the oldest end
first), and the leader removes rows a day after they ended: signing in in
a loop grows nothing without bound (:mod:`pgsched.scheduler.access_prune`).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..db import Database, Row, Session
from . import audit, credentials  # credentials imports this module too: names at call time

if TYPE_CHECKING:
    from .credentials import Principal

SESSIONS_PER_BACKER = 50  # live sessions one token or user may have; the oldest end first


@dataclass(frozen=True)
class Resolved:
    """A live session: who it signs in (``principal``) and its forms' ``csrf`` token."""

    principal: Principal
    csrf: str


def digest(session_id: str) -> bytes:
    """The SHA-256 of ``session_id`` as stored in ``web_session.id_sha256``."""
    return hashlib.sha256(session_id.encode()).digest()


def _backer(who: Principal) -> dict[str, object]:
    """The query parameters naming the token or the user behind ``who``."""
    if who.kind == "token":
        return {"token_id": int(who.ref), "username": None}
    return {"token_id": None, "username": who.ref}


def start(db: Database, who: Principal, *, max_age: int, by: audit.Actor) -> tuple[str, str] | None:
    """Start a session for ``who`` lasting ``max_age`` seconds by the database's clock, and
    record the sign-in, in one transaction. Returns ``(session_id, csrf)``, or None when
    the token or user went away meanwhile (revoked, expired, deleted)."""
    session_id, csrf = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    backer = _backer(who)
    with db.transaction() as tx:
        row = tx.one(
            "web_session_insert",
            id_sha256=digest(session_id),
            csrf=csrf,
            ip=by.ip,
            max_age=max_age,
            **backer,
        )
        if row is None:
            return None
        tx.exec("web_session_trim", keep=SESSIONS_PER_BACKER, **backer)
        audit.record(
            tx,
            by,
            "sign_in",
            tenant=row["tenant"],
            target=f"{who.kind} {who.ref}",
            detail={"expires_at": row["expires_at"].isoformat()},
        )
    return session_id, csrf


def resolve(db: Database | Session, session_id: str | None) -> Resolved | None:
    """The live session ``session_id`` names, or None (missing, unknown, ended, expired,
    or its token or user is no longer valid)."""
    if not session_id or len(session_id) > 200:
        return None
    row = db.one("web_session_resolve", id_sha256=digest(session_id))
    if row is None:
        return None
    since = row["since"].isoformat() if row["since"] else ""
    who = credentials.Principal(
        row["kind"],
        row["ref"],
        row["name"],
        row["role"],
        row["tenant"],
        since,
        instance=bool(row["instance"]),
        may_reveal=bool(row["may_reveal"]),
    )
    return Resolved(who, row["csrf"])


def end(db: Database, session_id: str, by: audit.Actor) -> None:
    """End session ``session_id`` (signing out) and record it; nothing when it is unknown."""
    with db.transaction() as tx:
        row = tx.one("web_session_revoke", id_sha256=digest(session_id))
        if row is not None:
            target = f"token {row['token_id']}" if row["token_id"] else f"user {row['username']}"
            audit.record(tx, by, "sign_out", tenant=row["tenant"], target=target)


def end_all(
    db: Database | Session, *, token_id: int | None = None, username: str | None = None
) -> int:
    """End every live session of token ``token_id`` or user ``username`` (one of them);
    how many were live. Call it inside the transaction of the change that causes it."""
    row = db.one("web_session_revoke_all", token_id=token_id, username=username)
    return int(row["count"]) if row else 0


def sign_out_everywhere(db: Database, who: Principal, by: audit.Actor) -> int:
    """End every session of the token or user behind ``who`` and record it, in one
    transaction; how many ended."""
    with db.transaction() as tx:
        ended = end_all(tx, **_backer(who))  # type: ignore[arg-type]
        audit.record(
            tx,
            by,
            "sign_out_everywhere",
            tenant=who.tenant,
            target=f"{who.kind} {who.ref}",
            detail={"sessions": ended},
        )
    return ended


def live(db: Database | Session, who: Principal) -> list[Row]:
    """The live sessions of the token or user behind ``who``, newest first: their
    ``created_at``, ``last_seen_at``, ``expires_at`` and ``ip`` (never their ids)."""
    return db.many("web_session_list", **_backer(who))

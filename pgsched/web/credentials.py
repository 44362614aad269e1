"""Who may use the web admin and the API: API tokens and web users, and the
:class:`Principal` a request acts as.

Roles are ordered ``viewer < operator < admin``: a viewer reads, an operator also acts
(trigger, pause, cancel, retry ...), an admin also manages tokens and forces a scheduler
failover. Every principal belongs to one tenant and sees only that tenant's rows; an
*instance* principal (``instance``, migration 0020) also sees and acts on what spans
tenants: the workers and schedulers with their hosts, a forced failover (an instance
admin), the installation-wide metrics. Role and scope are apart: an instance viewer reads
the cluster views, only an instance admin forces a failover.

Tokens are ``secrets.token_urlsafe(32)`` (256 random bits), shown once and stored as their
SHA-256 (see migrations/0005_web.sql for why that is enough); passwords are hashed with
argon2id (argon2-cffi's defaults, RFC 9106's second recommended profile).
"""

from __future__ import annotations

import functools
import hashlib
import secrets
from dataclasses import dataclass
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from ..db import Database, Row, Session
from ..errors import NotFound, ValidationError
from ..roles import ROLES
from ..taskspec import _NAME, check_name

TOKEN_PREFIX = "pgs_"  # makes a leaked token easy to recognise (secret scanners, logs)
_hasher = PasswordHasher()


@functools.cache
def _dummy_hash() -> str:
    """Verified against when the username is unknown, so both failures take the same
    time. Made on first use: an argon2 hash takes 64 MiB and a quarter second, which every
    pgsched process (workers import this module through the CLI) would otherwise pay."""
    return _hasher.hash("not a password of anyone")


@dataclass(frozen=True)
class Principal:
    """Who a request acts as: ``kind`` is ``"token"`` or ``"user"``, ``ref`` the token id
    or the username, ``name`` what to show (token name or username), ``role`` one of
    :data:`ROLES`, ``tenant`` the only tenant whose rows it sees; ``since``, for a user,
    when the account was made (ISO 8601): a session names it too, so that a user deleted
    and made again under the same name does not inherit the old account's sessions;
    ``instance``: whether it may see and act on what spans tenants (the cluster views)."""

    kind: str
    ref: str
    name: str
    role: str
    tenant: str
    since: str = ""
    instance: bool = False

    def has(self, role: str) -> bool:
        """Whether this principal's role is ``role`` or above it."""
        return ROLES.index(self.role) >= ROLES.index(role)


def check_role(role: object) -> str:
    """``role`` if it is one of :data:`ROLES`; ValidationError otherwise."""
    if role not in ROLES:
        raise ValidationError("role", role, f"must be one of {', '.join(ROLES)}")
    return str(role)


def check_instance(instance: object) -> bool:
    """``instance`` if it is a bool; ValidationError otherwise."""
    if not isinstance(instance, bool):
        raise ValidationError("instance", instance, "must be true or false")
    return instance


def token_digest(token: str) -> bytes:
    """The SHA-256 of ``token`` as stored in ``api_token.token_sha256``."""
    return hashlib.sha256(token.encode()).digest()


def create_token(
    db: Database | Session,
    *,
    role: str,
    tenant: str = "default",
    name: str = "",
    instance: bool = False,
) -> tuple[str, Row]:
    """Create an API token (``instance``: of the instance scope); return ``(token, row)``.
    The token is not stored and cannot be shown again. Raises ValidationError for a bad
    role, tenant or name (at most 200 characters)."""
    check_role(role)
    check_instance(instance)
    check_name("tenant", tenant)
    if not isinstance(name, str) or len(name) > 200:
        raise ValidationError("name", name, "must be text of at most 200 characters")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = db.one(
        "api_token_insert",
        tenant=tenant,
        role=role,
        name=name,
        token_sha256=token_digest(token),
        instance=instance,
    )
    assert row is not None
    return token, row


def list_tokens(db: Database | Session, tenant: str | None) -> list[Row]:
    """Tokens of ``tenant`` (every tenant when None), newest first, without their hashes."""
    return db.many("api_token_list", tenant=tenant)


def revoke_token(db: Database | Session, token_id: int, tenant: str | None = None) -> Row:
    """Revoke token ``token_id`` (of ``tenant`` when given); idempotent. Raises NotFound."""
    row = db.one("api_token_revoke", id=token_id, tenant=tenant)
    if row is None:
        raise NotFound(f"token: no token {token_id}" + (f" in tenant {tenant!r}" if tenant else ""))
    return row


def authenticate_token(db: Database | Session, token: str) -> Principal | None:
    """The principal of a live ``token``, or None (unknown or revoked)."""
    if not token or len(token) > 200:
        return None
    row = db.one("api_token_authenticate", token_sha256=token_digest(token))
    return _token_principal(row) if row else None


def _token_principal(row: Row) -> Principal:
    return Principal(
        "token",
        str(row["id"]),
        row["name"] or f"token {row['id']}",
        row["role"],
        row["tenant"],
        instance=bool(row["instance"]),
    )


def create_user(
    db: Database | Session,
    username: str,
    password: str,
    *,
    role: str,
    tenant: str = "default",
    instance: bool = False,
) -> Row:
    """Create a web user (``instance``: of the instance scope); return its row (without the
    hash). Raises ValidationError for a bad username (as task names: 1-200 letters, digits
    and ``. _ : @ / -``), a password under 8 characters, a bad role or tenant, or a username
    that is taken."""
    check_name("username", username, _NAME)
    check_role(role)
    check_instance(instance)
    check_name("tenant", tenant)
    if not isinstance(password, str) or len(password) < 8:
        raise ValidationError("password", "***", "must be at least 8 characters")
    row = db.one(
        "web_user_insert",
        username=username,
        tenant=tenant,
        role=role,
        password_hash=_hasher.hash(password),
        instance=instance,
    )
    if row is None:
        raise ValidationError("username", username, "is taken")
    return row


def list_users(db: Database | Session, tenant: str | None) -> list[Row]:
    """Web users of ``tenant`` (every tenant when None) by username, without hashes."""
    return db.many("web_user_list", tenant=tenant)


def delete_user(db: Database | Session, username: str) -> None:
    """Remove web user ``username``; their sessions end. Raises NotFound."""
    if db.one("web_user_delete", username=username) is None:
        raise NotFound(f"user: no web user named {username!r}")


def authenticate_user(db: Database | Session, username: str, password: str) -> Principal | None:
    """The principal of ``username`` when ``password`` is theirs, else None. Rehashes a
    password stored with older argon2 parameters."""
    row = db.one("web_user_get", username=username) if username and len(username) <= 200 else None
    try:
        _hasher.verify(row["password_hash"] if row else _dummy_hash(), password)
    except (VerificationError, InvalidHashError):
        return None
    if row is None:
        return None
    if _hasher.check_needs_rehash(row["password_hash"]):
        db.exec("web_user_rehash", username=username, password_hash=_hasher.hash(password))
    return _user_principal(row)


def _user_principal(row: Row) -> Principal:
    return Principal(
        "user",
        row["username"],
        row["username"],
        row["role"],
        row["tenant"],
        row["created_at"].isoformat(),
        instance=bool(row["instance"]),
    )


def principal_of_session(db: Database | Session, session: dict[str, Any]) -> Principal | None:
    """The principal a signed session names (``{"kind": "token"|"user", "ref": ...,
    "until": ...}``, and for a user ``"since"``: when the account was made), looked up again
    so that a revoked token or a deleted user ends the session, also when a new user takes
    the name; None once the database's clock has passed ``until`` (seconds since the epoch)."""
    kind, ref, until = session.get("kind"), session.get("ref"), session.get("until")
    if not isinstance(until, (int, float)) or isinstance(until, bool):
        return None
    if kind == "token" and isinstance(ref, str) and ref.isdigit():
        row = db.one("api_token_live", id=int(ref))
        return _token_principal(row) if row and row["db_now"].timestamp() < until else None
    if kind == "user" and isinstance(ref, str):
        row = db.one("web_user_get", username=ref)
        if (
            row is None
            or session.get("since") != row["created_at"].isoformat()
            or row["db_now"].timestamp() >= until
        ):
            return None
        return _user_principal(row)
    return None


def session_key(db: Database) -> str:
    """The key that signs session cookies, generated (256 random bits) and stored the first
    time any web process asks."""
    row = db.one("web_key_ensure", name="session", value=secrets.token_urlsafe(32))
    if row is None:  # another process stored its key between our snapshot and our insert
        row = db.one("web_key_get", name="session")
    assert row is not None
    return str(row["value"])
